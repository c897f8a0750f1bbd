/*
 * test_chain.c — chains from trace ops (fusion/chain.c): buffers, loads and stores, the checks
 * that keep a chain one kernel (aliasing, counts, buffer limit), broadcast extents, and which
 * buffers' last values must reach memory (cgj_fusion_mark_stores). Linked with cgjit's objects
 * (INTERNAL).
 *
 * Traces are made by hand: a kernel op carries a cgj_kparams_t laid out as the driver would
 * (each parameter at its natural alignment) with the recorded values, and the specs are passed
 * to cgj_fusion_chain_of directly, as the pass would after cgj_fusion_spec_of. In-step
 * allocations are ALLOC and POOL_FREE ops, as ir/blocks.c reads them. cgj_fusion_spec_of itself
 * is tested with a stand-in for the driver's cuFuncGetName.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "base/driver.h"
#include "base/mem.h"
#include "fusion/fusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXOPS 128
#define N 1000u /* elements of most chains */

/* ---- specs ---- */

static cgj_ew_spec_t spec_pool[16];
static unsigned nspec;

static const cgj_ew_spec_t *spec(const char *text)
{
    char err[256];
    cr_assert_lt(nspec, 16);
    cr_assert(cgj_ew_parse(text, &spec_pool[nspec], err, sizeof err), "'%s': %s", text, err);
    return &spec_pool[nspec++];
}

#define MUL "(out float y, in float x, float a, count int n): y = a * x"
#define ADD "(out float z, in float y, float b, count int n): z = y + b"
#define INPLACE "(inout float x, float a, count int n): x = x * a"
#define DMUL "(out double y, in double x, double a, count int n): y = a * x"

/* ---- a hand-made trace ---- */

typedef struct kstore {
    cgj_kparams_t kp;
    uint32_t off[CGJ_EW_MAX_PARAMS], sz[CGJ_EW_MAX_PARAMS];
    uint8_t rec[256];
} kstore_t;

static cgj_op_t ops[MAXOPS];
static kstore_t kst[MAXOPS];
static const cgj_ew_spec_t *specs[MAXOPS];
static cgj_oplist_t L = {.ops = ops, .cap = MAXOPS};
static cgj_fuse_chain_t ch;
static cgj_reason_t why;

static void reset(void)
{
    memset(ops, 0, sizeof ops);
    memset(specs, 0, sizeof specs);
    L.n = 0;
    why = (cgj_reason_t){.code = CGJ_REASON_NONE, .op = CGJ_REASON_NO_OP};
}

static void release(void)
{
    cgj_free(ch.st);
    ch.st = NULL;
}

TestSuite(fusion_chain, .init = reset, .fini = release);

static cgj_op_t *add_op(cgj_op_kind_t kind)
{
    cr_assert_lt(L.n, MAXOPS);
    cgj_op_t *o = &ops[L.n++];
    o->call.kind = kind;
    o->call.stream = (CUstream)0x5;
    return o;
}

/* A launch of a kernel registered as sp with parameter values vals (bits, in the spec's order),
 * each laid out at its natural alignment. Returns the op's index. */
static uint32_t kernel(const cgj_ew_spec_t *sp, const uint64_t *vals)
{
    cgj_op_t *o = add_op(CGJ_OP_KERNEL);
    uint32_t i = L.n - 1;
    kstore_t *k = &kst[i];
    memset(k, 0, sizeof *k);
    uint32_t at = 0;
    for (uint32_t p = 0; p < sp->nparams; p++) {
        uint32_t sz = cgj_ew_param_bytes(sp, p);
        at = (at + sz - 1) / sz * sz;
        k->off[p] = at, k->sz[p] = sz;
        memcpy(k->rec + at, &vals[p], sz); /* little-endian: the low bytes */
        at += sz;
    }
    k->kp = (cgj_kparams_t){.n = sp->nparams, .size = at, .off = k->off, .sz = k->sz, .rec = k->rec};
    o->kp = &k->kp;
    specs[i] = sp;
    return i;
}

/* A kernel nothing registered, with one 8-byte parameter per value. */
static uint32_t opaque(const uint64_t *vals, uint32_t n)
{
    cgj_op_t *o = add_op(CGJ_OP_KERNEL);
    uint32_t i = L.n - 1;
    kstore_t *k = &kst[i];
    memset(k, 0, sizeof *k);
    for (uint32_t p = 0; p < n; p++) {
        k->off[p] = 8 * p, k->sz[p] = 8;
        memcpy(k->rec + 8 * p, &vals[p], 8);
    }
    k->kp = (cgj_kparams_t){.n = n, .size = 8 * n, .off = k->off, .sz = k->sz, .rec = k->rec};
    o->kp = &k->kp;
    return i;
}

static uint32_t alloc_op(CUdeviceptr addr, size_t bytes)
{
    cgj_op_t *o = add_op(CGJ_OP_ALLOC);
    o->call.u.a.addr = addr, o->call.u.a.bytes = bytes;
    return L.n - 1;
}

static uint32_t pool_free(CUdeviceptr addr)
{
    cgj_op_t *o = add_op(CGJ_OP_POOL_FREE);
    o->call.u.a.addr = addr;
    return L.n - 1;
}

static uint64_t f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The buffer of the chain at address a, or -1. */
static int at(CUdeviceptr a)
{
    for (uint32_t k = 0; k < ch.nbufs; k++)
        if (ch.buf[k].addr == a) return (int)k;
    return -1;
}

static void assert_buf(CUdeviceptr a, bool load, bool store)
{
    int k = at(a);
    cr_assert_geq(k, 0, "no buffer at 0x%llx", (unsigned long long)a);
    cr_assert_eq(ch.buf[k].load, load, "buffer 0x%llx: load %d", (unsigned long long)a, ch.buf[k].load);
    cr_assert_eq(ch.buf[k].store, store, "buffer 0x%llx: store %d", (unsigned long long)a, ch.buf[k].store);
}

static bool chain_of(uint32_t first, uint32_t last)
{
    release();
    return cgj_fusion_chain_of(&L, specs, first, last, &ch, &why);
}

static void assert_dropped(cgj_reason_code_t code, const char *detail)
{
    char text[320];
    cr_assert_eq(why.code, code, "reason %d, want %d: %s", why.code, code, cgj_reason_format(&why, text, sizeof text));
    if (detail) cr_assert(strstr(why.detail, detail), "detail '%s' lacks '%s'", why.detail, detail);
}

#define X 0x100000ull
#define Y 0x200000ull
#define Z 0x300000ull
#define T 0x400000ull

/* ---- chains ---- */

Test(fusion_chain, producer_and_consumer_share_a_buffer)
{
    const cgj_ew_spec_t *mul = spec(MUL), *add = spec(ADD);
    kernel(mul, (uint64_t[]){T, X, f32(2.0f), N});
    kernel(add, (uint64_t[]){Z, T, f32(-1.0f), N});
    cr_assert(chain_of(0, 1));
    cr_assert_eq(ch.nstages, 2);
    cr_assert_eq(ch.nbufs, 3, "x, t, z: t is one buffer");
    cr_assert_eq(ch.n, N);
    assert_buf(X, true, false);
    assert_buf(T, false, true); /* written first; stored until mark_stores says otherwise */
    assert_buf(Z, false, true);
    for (uint32_t k = 0; k < 3; k++) cr_assert_eq(ch.buf[k].extent, N);
    cr_assert_eq(ch.buf[at(X)].type, CGJ_EW_F32);
    /* the stages: their ops, buffers and scalars' bits */
    cr_assert_eq(ch.st[0].op, 0);
    cr_assert_eq(ch.st[1].op, 1);
    cr_assert_eq(ch.st[0].spec, mul);
    cr_assert_eq(ch.st[0].buf[0], at(T));
    cr_assert_eq(ch.st[0].buf[1], at(X));
    cr_assert_eq(ch.st[1].buf[0], at(Z));
    cr_assert_eq(ch.st[1].buf[1], at(T));
    cr_assert_eq(ch.st[0].scalar[2], 0x40000000u);
    cr_assert_eq(ch.st[1].scalar[2], 0xbf800000u);
    cr_assert_eq(ch.st[1].scalar[3], N);
}

Test(fusion_chain, a_buffer_read_before_it_is_written_is_loaded)
{
    const cgj_ew_spec_t *mul = spec(MUL);
    kernel(mul, (uint64_t[]){Y, X, f32(2.0f), N}); /* y = 2x */
    kernel(mul, (uint64_t[]){X, Y, f32(3.0f), N}); /* x = 3y: x was read before */
    cr_assert(chain_of(0, 1));
    assert_buf(X, true, true);
    assert_buf(Y, false, true);
}

Test(fusion_chain, in_place)
{
    const cgj_ew_spec_t *sp = spec(INPLACE);
    for (int k = 0; k < 5; k++) kernel(sp, (uint64_t[]){X, f32((float)k), N});
    cr_assert(chain_of(0, 4));
    cr_assert_eq(ch.nbufs, 1);
    cr_assert_eq(ch.nstages, 5);
    assert_buf(X, true, true);
    cr_assert_eq(ch.st[4].scalar[1], f32(4.0f));
    /* a sub-range of the ops */
    cr_assert(chain_of(2, 3));
    cr_assert_eq(ch.nstages, 2);
    cr_assert_eq(ch.st[0].op, 2);
}

/* An `inout` left unassigned is only read: loaded, not stored. */
Test(fusion_chain, an_unassigned_inout_is_read_only)
{
    const cgj_ew_spec_t *sp = spec("(inout float x, out float y, count int n): y = x + 1");
    kernel(sp, (uint64_t[]){X, Y, N});
    cr_assert(chain_of(0, 0));
    assert_buf(X, true, false);
    assert_buf(Y, false, true);
}

Test(fusion_chain, allocations_between_the_kernels_are_skipped)
{
    const cgj_ew_spec_t *mul = spec(MUL), *add = spec(ADD);
    kernel(mul, (uint64_t[]){T, X, f32(2.0f), N});
    alloc_op(Z, 4 * N);
    kernel(add, (uint64_t[]){Z, T, f32(1.0f), N});
    cr_assert(chain_of(0, 2));
    cr_assert_eq(ch.nstages, 2);
    cr_assert_eq(ch.st[1].op, 2);
}

Test(fusion_chain, partially_overlapping_buffers_are_not_fused)
{
    const cgj_ew_spec_t *mul = spec(MUL);
    kernel(mul, (uint64_t[]){Y, X, f32(2.0f), N});
    kernel(mul, (uint64_t[]){Z, X + 4 * (N / 2), f32(2.0f), N}); /* the second half of x and beyond */
    cr_assert_not(chain_of(0, 1));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "0x100000");
    /* within one kernel: y overlaps x */
    reset();
    kernel(mul, (uint64_t[]){X + 4, X, f32(2.0f), N});
    cr_assert_not(chain_of(0, 0));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, NULL);
    /* the last element of one is the first of the other */
    reset();
    kernel(mul, (uint64_t[]){X + 4 * (N - 1), X, f32(2.0f), N});
    cr_assert_not(chain_of(0, 0));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, NULL);
}

Test(fusion_chain, adjacent_buffers_are_distinct)
{
    const cgj_ew_spec_t *mul = spec(MUL);
    kernel(mul, (uint64_t[]){X + 4 * N, X, f32(2.0f), N});
    kernel(mul, (uint64_t[]){X - 4 * N, X + 4 * N, f32(2.0f), N});
    cr_assert(chain_of(0, 1), "%s", why.detail);
    cr_assert_eq(ch.nbufs, 3);
}

Test(fusion_chain, one_address_of_two_element_types_is_not_fused)
{
    const cgj_ew_spec_t *mul = spec(MUL), *dmul = spec(DMUL);
    kernel(mul, (uint64_t[]){Y, X, f32(2.0f), N});
    uint64_t two;
    double d = 2.0;
    memcpy(&two, &d, sizeof two);
    kernel(dmul, (uint64_t[]){Z, Y, two, N}); /* y read as doubles */
    cr_assert_not(chain_of(0, 1));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, NULL);
    /* distinct buffers of both types are one chain */
    reset();
    kernel(mul, (uint64_t[]){Y, X, f32(2.0f), N});
    kernel(dmul, (uint64_t[]){Z, T, two, N});
    cr_assert(chain_of(0, 1));
    cr_assert_eq(ch.buf[at(Z)].type, CGJ_EW_F64);
    cr_assert_eq(ch.buf[at(Y)].type, CGJ_EW_F32);
}

Test(fusion_chain, different_element_counts_are_not_fused)
{
    const cgj_ew_spec_t *mul = spec(MUL);
    kernel(mul, (uint64_t[]){Y, X, f32(2.0f), N});
    kernel(mul, (uint64_t[]){Z, Y, f32(2.0f), N - 1});
    cr_assert_not(chain_of(0, 1));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "element counts 1000 and 999");
    cr_assert_eq(why.op, 1);
}

Test(fusion_chain, a_negative_count_is_not_fused)
{
    const cgj_ew_spec_t *mul = spec(MUL);
    kernel(mul, (uint64_t[]){Y, X, f32(2.0f), (uint32_t)-5});
    cr_assert_not(chain_of(0, 0));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "negative");
    cr_assert_eq(why.op, 0);
}

/* 15 pointers a kernel: 64 distinct buffers fit, 65 do not. */
Test(fusion_chain, at_most_64_buffers)
{
    char text[512] = "(out float y";
    for (int k = 0; k < 14; k++) snprintf(text + strlen(text), sizeof text - strlen(text), ", in float x%d", k);
    strcat(text, ", count int n): y = x0");
    const cgj_ew_spec_t *wide = spec(text);
    const cgj_ew_spec_t *four = spec("(out float y, in float a, in float b, in float c, count int n): y = a + b + c");
    CUdeviceptr next = X;
    for (int s = 0; s < 4; s++) {
        uint64_t v[16];
        for (int k = 0; k < 15; k++) v[k] = next, next += 4 * N;
        v[15] = N;
        kernel(wide, v);
    }
    kernel(four, (uint64_t[]){next, next + 4 * N, next + 8 * N, next + 12 * N, N});
    cr_assert(chain_of(0, 4), "%s", why.detail);
    cr_assert_eq(ch.nbufs, 64);
    /* one more */
    next += 16 * N;
    kernel(four, (uint64_t[]){next, X, X + 4 * N, X + 8 * N, N});
    cr_assert_not(chain_of(0, 5));
    assert_dropped(CGJ_REASON_FUSE_SIZE, "more than 64 buffers");
}

/* ---- counts ---- */

Test(fusion_chain, the_count_of_every_integer_type)
{
    const cgj_ew_spec_t *i32 = spec("(inout float x, count int n): x = 1");
    const cgj_ew_spec_t *u32 = spec("(inout float x, count unsigned n): x = 1");
    const cgj_ew_spec_t *i64 = spec("(inout float x, count long n): x = 1");
    const cgj_ew_spec_t *u64 = spec("(inout float x, count size_t n): x = 1");
    struct {
        const cgj_ew_spec_t *sp;
        uint64_t bits, want;
    } rows[] = {
        {i32, 7, 7},
        {i32, 0x80000000u, UINT64_MAX},
        {i32, 0xffffffffu, UINT64_MAX},
        {u32, 0xffffffffu, 0xffffffffu},
        {i64, 1ull << 40, 1ull << 40},
        {i64, (uint64_t)-1, UINT64_MAX},
        {u64, 1ull << 63, 1ull << 63},
        {i32, 0, 0},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        reset();
        kernel(rows[r].sp, (uint64_t[]){X, rows[r].bits});
        cr_assert_eq(cgj_fusion_count(&ops[0], rows[r].sp), rows[r].want, "row %zu", r);
    }
}

/* Several count parameters: the element count is their product. */
Test(fusion_chain, several_counts_multiply)
{
    const cgj_ew_spec_t *mat = spec("(out float y, in float x, count int rows, count long cols): y = x");
    const cgj_ew_spec_t *flat = spec(MUL);
    kernel(mat, (uint64_t[]){Y, X, 20, 50});
    cr_assert_eq(cgj_fusion_count(&ops[0], mat), 1000);
    kernel(flat, (uint64_t[]){Z, Y, f32(1.0f), 1000});
    cr_assert(chain_of(0, 1), "%s", why.detail);
    cr_assert_eq(ch.n, 1000);
    reset();
    kernel(mat, (uint64_t[]){Y, X, 20, (uint64_t)-50});
    cr_assert_eq(cgj_fusion_count(&ops[0], mat), UINT64_MAX, "a negative factor");
    reset();
    kernel(mat, (uint64_t[]){Y, X, 0x7fffffff, 1ull << 62});
    cr_assert_eq(cgj_fusion_count(&ops[0], mat), UINT64_MAX, "an overflowing product");
    cr_assert_not(chain_of(0, 0));
    reset();
    kernel(mat, (uint64_t[]){Y, X, 0, (uint64_t)-1});
    cr_assert_eq(cgj_fusion_count(&ops[0], mat), UINT64_MAX, "zero times a negative count");
}

/* ---- broadcasts ---- */

#define BIAS "(out float y, in float x, in float b[i % cols], count int rows, count int cols): y = x + b"
#define CHAN "(out float y, in float x, in float s[(i / hw) % c], int hw, int c, count int n): y = x * s"
#define ROWS "(out float y, in float x, in float r[i / cols], int cols, count int n): y = x * r"

Test(fusion_chain, a_broadcast_buffer_reaches_only_its_extent)
{
    const cgj_ew_spec_t *bias = spec(BIAS);
    kernel(bias, (uint64_t[]){Y, X, T, 40, 25});
    cr_assert(chain_of(0, 0));
    cr_assert_eq(ch.n, 1000);
    int b = at(T);
    cr_assert_eq(ch.buf[b].extent, 25);
    cr_assert(ch.buf[b].bcast);
    cr_assert_not(ch.buf[b].load, "a broadcast buffer is read where it is used");
    cr_assert_not(ch.buf[b].store);
    cr_assert_eq(ch.buf[at(X)].extent, 1000);
    /* a buffer right after the 25 elements does not overlap it; one inside does */
    const cgj_ew_spec_t *mul = spec(MUL);
    kernel(mul, (uint64_t[]){T + 4 * 25, X, f32(1.0f), 1000});
    cr_assert(chain_of(0, 1), "%s", why.detail);
    kernel(mul, (uint64_t[]){T + 4 * 24, X, f32(1.0f), 1000});
    cr_assert_not(chain_of(0, 2));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, NULL);
}

Test(fusion_chain, broadcast_extents)
{
    const cgj_ew_spec_t *chan = spec(CHAN), *rows = spec(ROWS);
    kernel(chan, (uint64_t[]){Y, X, T, 10, 3, 1000});             /* (i / 10) % 3: 3 elements */
    kernel(rows, (uint64_t[]){Z, Y, X + 0x10000, 7, 1000});       /* i / 7: 143 elements */
    kernel(chan, (uint64_t[]){Y, Z, Y + 0x10000, 100, 30, 1000}); /* (i / 100) % 30: 10 elements */
    cr_assert(chain_of(0, 2), "%s", why.detail);
    cr_assert_eq(ch.buf[at(T)].extent, 3);
    cr_assert_eq(ch.buf[at(X + 0x10000)].extent, 143);
    cr_assert_eq(ch.buf[at(Y + 0x10000)].extent, 10);
}

Test(fusion_chain, a_broadcast_buffer_read_whole_later_grows)
{
    const cgj_ew_spec_t *bias = spec(BIAS), *mul = spec(MUL);
    kernel(bias, (uint64_t[]){Y, X, T, 40, 25});
    kernel(mul, (uint64_t[]){Z, T, f32(2.0f), 1000});
    cr_assert(chain_of(0, 1), "%s", why.detail);
    int b = at(T);
    cr_assert_eq(ch.buf[b].extent, 1000);
    cr_assert(ch.buf[b].load, "read at i as well");
    /* grown, it now overlaps a buffer placed after its first 25 elements */
    reset();
    kernel(bias, (uint64_t[]){Y, X, T, 40, 25});
    kernel(mul, (uint64_t[]){T + 4 * 25, X, f32(2.0f), 1000});
    kernel(mul, (uint64_t[]){Z, T, f32(2.0f), 1000});
    cr_assert_not(chain_of(0, 2));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, NULL);
}

Test(fusion_chain, a_buffer_written_and_read_broadcast_is_not_fused)
{
    const cgj_ew_spec_t *bias = spec(BIAS), *mul = spec(MUL);
    kernel(mul, (uint64_t[]){T, X, f32(2.0f), 1000});
    kernel(bias, (uint64_t[]){Y, X, T, 40, 25});
    cr_assert_not(chain_of(0, 1));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "written and read broadcast");
    /* the other order too */
    reset();
    kernel(bias, (uint64_t[]){Y, X, T, 40, 25});
    kernel(mul, (uint64_t[]){T, X, f32(2.0f), 1000});
    cr_assert_not(chain_of(0, 1));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, NULL);
}

Test(fusion_chain, a_broadcast_index_of_zero_or_negative_size_is_not_fused)
{
    const cgj_ew_spec_t *chan = spec(CHAN), *rows = spec(ROWS);
    kernel(rows, (uint64_t[]){Y, X, T, 0, 1000}); /* i / 0 */
    cr_assert_not(chain_of(0, 0));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "broadcast");
    reset();
    kernel(rows, (uint64_t[]){Y, X, T, (uint32_t)-4, 1000});
    cr_assert_not(chain_of(0, 0));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "broadcast");
    reset();
    kernel(chan, (uint64_t[]){Y, X, T, 10, 0, 1000}); /* (i / 10) % 0 */
    cr_assert_not(chain_of(0, 0), "a modulus of zero");
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "broadcast");
    reset();
    kernel(chan, (uint64_t[]){Y, X, T, 10, (uint32_t)-3, 1000});
    cr_assert_not(chain_of(0, 0));
    assert_dropped(CGJ_REASON_FUSE_ALIAS, "broadcast");
}

/* ---- library calls described as elementwise (cgj_libop_t.ew) ---- */

static const char LIB_MUL[] = "(out float y, in float x, float a, count int n): y = a * x";

/* A LIB op computing LIB_MUL with its pointers as argument indices, then the one kernel the
 * library issued (no spec: part of the call). */
static cgj_libop_t *lib_call(const char *text, CUdeviceptr x, CUdeviceptr y, uint64_t a, uint64_t n)
{
    cgj_op_t *o = add_op(CGJ_OP_LIB);
    cgj_libop_t *lib = cgj_xcalloc(1, sizeof *lib);
    lib->nops = 1, lib->nargs = 2, lib->args[0] = x, lib->args[1] = y;
    lib->ew.spec = text;
    uint64_t vals[] = {1, 0, a, n}; /* y: args[1], x: args[0] */
    memcpy(lib->ew.vals, vals, sizeof vals);
    o->lib = lib;
    specs[L.n - 1] = cgj_fusion_lib_spec(lib);
    opaque((uint64_t[]){y, x}, 2);
    return lib;
}

Test(fusion_chain, a_library_call_is_a_stage)
{
    cgj_libop_t *lib = lib_call(LIB_MUL, X, T, f32(3.0f), N);
    cr_assert_not_null(specs[0]);
    cr_assert_eq(cgj_fusion_count(&ops[0], specs[0]), N);
    kernel(spec(ADD), (uint64_t[]){Z, T, f32(1.0f), N});
    cr_assert(chain_of(0, 2), "%s", why.detail);
    cr_assert_eq(ch.nstages, 2);
    cr_assert_eq(ch.nbufs, 3);
    cr_assert_eq(ch.st[0].op, 0);
    cr_assert_eq(ch.st[1].op, 2);
    cr_assert_eq(ch.st[0].scalar[2], f32(3.0f));
    cr_assert_eq(ch.st[0].buf[1], at(X));
    assert_buf(X, true, false);
    assert_buf(T, false, true);
    assert_buf(Z, false, true);
    cgj_free(lib);
}

Test(fusion_chain, library_descriptions_are_parsed_once)
{
    cgj_libop_t a = {0}, b = {0};
    a.ew.spec = b.ew.spec = LIB_MUL;
    const cgj_ew_spec_t *sa = cgj_fusion_lib_spec(&a);
    cr_assert_not_null(sa);
    cr_assert_eq(cgj_fusion_lib_spec(&b), sa, "one text, one spec");
    cr_assert_eq(sa->nparams, 4);
    b.ew.spec = NULL;
    cr_assert_null(cgj_fusion_lib_spec(&b), "not described");
    static const char bad[] = "(out float y): y = ";
    b.ew.spec = bad;
    cr_assert_null(cgj_fusion_lib_spec(&b));
    cr_assert_null(cgj_fusion_lib_spec(&b), "and it stays so");
}

/* ---- cgj_fusion_spec_of: the registry and the recorded layout ---- */

static const char *fake_name = "_Z5scalePfPKffi";
static CUresult fake_func_get_name(const char **name, CUfunction f)
{
    *name = fake_name;
    return CUDA_SUCCESS;
}

Test(fusion_chain, spec_of_checks_the_layout)
{
    char err[256];
    cr_assert(cgj_fusion_register("scale", MUL, err, sizeof err), "%s", err);
    cgj_drv.r_cuFuncGetName = fake_func_get_name;
    const cgj_ew_spec_t *reg = cgj_fusion_lookup("scale");
    kernel(spec(MUL), (uint64_t[]){Y, X, f32(2.0f), N});
    ops[0].call.u.k.f = (CUfunction)0x1234;
    cgj_reason_t r;
    cr_assert_eq(cgj_fusion_spec_of(&ops[0], &r), reg);
    cr_assert_eq(r.code, CGJ_REASON_NONE);
    /* sizes that disagree: 8-byte scalar where the spec has a float */
    kst[0].sz[2] = 8;
    cr_assert_null(cgj_fusion_spec_of(&ops[0], &r));
    cr_assert_eq(r.code, CGJ_REASON_FUSE_LAYOUT);
    cr_assert(strstr(r.detail, fake_name), "%s", r.detail);
    kst[0].sz[2] = 4;
    /* a parameter fewer */
    kst[0].kp.n = 3;
    cr_assert_null(cgj_fusion_spec_of(&ops[0], &r));
    cr_assert_eq(r.code, CGJ_REASON_FUSE_LAYOUT);
    kst[0].kp.n = 4;
    /* launched with `extra` */
    kst[0].kp.extra_form = true;
    cr_assert_null(cgj_fusion_spec_of(&ops[0], &r));
    cr_assert_eq(r.code, CGJ_REASON_FUSE_LAYOUT);
    kst[0].kp.extra_form = false;
    cr_assert_eq(cgj_fusion_spec_of(&ops[0], &r), reg);
}

Test(fusion_chain, spec_of_an_unregistered_or_other_op)
{
    cgj_drv.r_cuFuncGetName = fake_func_get_name;
    kernel(spec(MUL), (uint64_t[]){Y, X, f32(2.0f), N});
    ops[0].call.u.k.f = (CUfunction)0x99;
    cgj_reason_t r = {.code = CGJ_REASON_FUSE_SIZE};
    cr_assert_null(cgj_fusion_spec_of(&ops[0], &r), "not registered");
    cr_assert_eq(r.code, CGJ_REASON_NONE);
    alloc_op(Z, 64);
    r.code = CGJ_REASON_FUSE_SIZE;
    cr_assert_null(cgj_fusion_spec_of(&ops[1], &r), "not a kernel");
    cr_assert_eq(r.code, CGJ_REASON_NONE);
    ops[0].kp = NULL;
    cr_assert_null(cgj_fusion_spec_of(&ops[0], &r), "no parameters recorded");
}

/* ---- stores ---- */

/* ALLOC t; t = 2x; z = t + 1; [between...]; POOL_FREE t — the chain is ops 1..2. */
static void intermediate_chain(void)
{
    alloc_op(T, 4 * N);
    kernel(spec(MUL), (uint64_t[]){T, X, f32(2.0f), N});
    kernel(spec(ADD), (uint64_t[]){Z, T, f32(1.0f), N});
}

static void mark(void)
{
    cr_assert(chain_of(1, 2), "%s", why.detail);
    assert_buf(T, false, true);
    cgj_fusion_mark_stores(&L, 2, &ch);
}

Test(fusion_chain, a_dead_intermediate_is_not_stored)
{
    intermediate_chain();
    kernel(spec(INPLACE), (uint64_t[]){Z, f32(3.0f), N}); /* after the chain, not touching t */
    add_op(CGJ_OP_EVENT_RECORD);
    add_op(CGJ_OP_STREAM_WAIT);
    add_op(CGJ_OP_SYNC);
    alloc_op(Y, 64);
    pool_free(Y);
    pool_free(T);
    opaque((uint64_t[]){T, T + 8}, 2); /* after the free: another block at t's address */
    mark();
    assert_buf(T, false, false);
    assert_buf(Z, false, true);
    assert_buf(X, true, false);
}

Test(fusion_chain, an_intermediate_read_later_is_stored)
{
    intermediate_chain();
    kernel(spec(INPLACE), (uint64_t[]){T, f32(3.0f), N});
    pool_free(T);
    mark();
    assert_buf(T, false, true);
}

Test(fusion_chain, a_pointer_into_the_intermediate_counts)
{
    intermediate_chain();
    opaque((uint64_t[]){7, T + 4 * (N - 1)}, 2); /* its last element, in the second word */
    pool_free(T);
    mark();
    assert_buf(T, false, true);
}

Test(fusion_chain, an_escaping_intermediate_is_stored)
{
    intermediate_chain();
    kernel(spec(INPLACE), (uint64_t[]){Z, f32(3.0f), N});
    mark(); /* never freed: the program may read it after the step */
    assert_buf(T, false, true);
}

Test(fusion_chain, a_buffer_not_allocated_in_the_step_is_stored)
{
    kernel(spec(MUL), (uint64_t[]){T, X, f32(2.0f), N});
    kernel(spec(MUL), (uint64_t[]){Z, T, f32(2.0f), N});
    cr_assert(chain_of(0, 1));
    cgj_fusion_mark_stores(&L, 1, &ch);
    assert_buf(T, false, true);
    assert_buf(Z, false, true);
}

/* Ops between the chain and the free that may observe t: each makes it stored. */
Test(fusion_chain, an_op_that_may_observe_the_intermediate_stores_it)
{
    for (int kind = 0; kind < 7; kind++) {
        reset();
        intermediate_chain();
        cgj_op_t *o;
        const char *what = "";
        switch (kind) {
        case 0: add_op(CGJ_OP_HOST_FUNC), what = "host function"; break;
        case 1: o = add_op(CGJ_OP_MEMCPY), o->call.u.m.src = T + 16, o->call.u.m.dst = Y, what = "copy from"; break;
        case 2: o = add_op(CGJ_OP_MEMCPY), o->call.u.m.dst = T, o->call.u.m.src = Y, what = "copy into"; break;
        case 3: o = add_op(CGJ_OP_MEMSET), o->call.u.s.dst = T + 4, what = "memset"; break;
        case 4: add_op(CGJ_OP_READBACK), what = "read-back"; break;
        case 5: o = add_op(CGJ_OP_KERNEL), o->kp = NULL, what = "kernel without parameters recorded"; break;
        case 6:
            o = add_op(CGJ_OP_LIB);
            o->lib = cgj_xcalloc(1, sizeof *o->lib);
            o->lib->nargs = 2, o->lib->args[0] = Y, o->lib->args[1] = T;
            what = "library call";
            break;
        }
        pool_free(T);
        mark();
        int k = at(T);
        cr_assert(ch.buf[k].store, "%s between the chain and the free: t must be stored", what);
        if (kind == 6) cgj_free(ops[3].lib);
    }
}

/* Copies, memsets and library calls elsewhere do not. */
Test(fusion_chain, ops_elsewhere_do_not_store_it)
{
    intermediate_chain();
    cgj_op_t *o = add_op(CGJ_OP_MEMCPY);
    o->call.u.m.src = Z, o->call.u.m.dst = Y;
    o = add_op(CGJ_OP_MEMSET);
    o->call.u.s.dst = T + 4 * N; /* just past t */
    o = add_op(CGJ_OP_LIB);
    o->lib = cgj_xcalloc(1, sizeof *o->lib);
    o->lib->nargs = 1, o->lib->args[0] = T - 4;
    add_op(CGJ_OP_FREE);
    add_op(CGJ_OP_QUERY);
    pool_free(T);
    mark();
    assert_buf(T, false, false);
    cgj_free(ops[5].lib);
}

/* A buffer the chain only reads is never stored, whatever follows. */
Test(fusion_chain, marking_never_adds_a_store)
{
    alloc_op(X, 4 * N);
    kernel(spec(MUL), (uint64_t[]){T, X, f32(2.0f), N});
    kernel(spec(ADD), (uint64_t[]){Z, T, f32(1.0f), N});
    add_op(CGJ_OP_HOST_FUNC);
    pool_free(X);
    mark();
    assert_buf(X, true, false);
}
