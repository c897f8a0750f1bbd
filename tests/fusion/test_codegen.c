/*
 * test_codegen.c — the CUDA C of fused chains (fusion/codegen.c) and its compilation by NVRTC
 * with the memory and disk caches (fusion/compile.c). Linked with cgjit's objects (INTERNAL).
 *
 * Chains are made by hand here (stages pointing at parsed specs, buffers with their load and
 * store flags) so that the source can be checked against what each flag promises: loads only
 * for `load` buffers, stores only for `store` buffers, scalars as literals of their exact bits.
 * Then the source must compile: NVRTC needs no GPU, only its library, so every source shape
 * (every function in float and double, the ternary, every scalar type, broadcasts, a chain of
 * 1000 stages) is compiled for sm_90 and the result checked to be an ELF CUBIN that defines
 * cgj_fused. Where NVRTC cannot be loaded those tests are skipped with the reason.
 *
 * Each test runs in its own process: the memory cache starts empty, and CGJIT_CACHE_DIR
 * (cgj_cfg.CACHE_DIR) points at a fresh temporary folder, removed at the end.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "base/config.h"
#include "base/driver.h"
#include "base/mem.h"
#include "fusion/fusion.h"

#include <dlfcn.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARCH "sm_90"
#define N_FN CGJ_EW_FUNC_COUNT

static char cache_dir[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static void cleanup(void)
{
    if (cache_dir[0]) nftw(cache_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void fresh_cache(void)
{
    snprintf(cache_dir, sizeof cache_dir, "/tmp/cgj_codegen_XXXXXX");
    cr_assert_not_null(mkdtemp(cache_dir));
    cgj_cfg.CACHE_DIR = cache_dir;
    /* what the runtime's cgj_driver_load sets: the real dlsym, which NVRTC is resolved with */
    cgj_driver_dlsym = dlsym;
}

TestSuite(fusion_codegen, .init = fresh_cache, .fini = cleanup);

#define assert_has(hay, needle) cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in:\n%s", (needle), (hay))
#define assert_lacks(hay, needle) \
    cr_assert(strstr((hay), (needle)) == NULL, "did not expect '%s' in:\n%s", (needle), (hay))

static int occurrences(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* ---- making chains by hand ---- */

static cgj_ew_spec_t specs[2 * N_FN + 8];
static unsigned nspecs;

static const cgj_ew_spec_t *spec(const char *text)
{
    char err[256];
    cr_assert_lt(nspecs, sizeof specs / sizeof specs[0]);
    cr_assert(cgj_ew_parse(text, &specs[nspecs], err, sizeof err), "'%s': %s", text, err);
    return &specs[nspecs++];
}

static cgj_fuse_chain_t ch;

static void chain(uint64_t n, uint32_t maxstages)
{
    cgj_free(ch.st);
    memset(&ch, 0, sizeof ch);
    ch.n = n;
    ch.st = cgj_xcalloc(maxstages, sizeof *ch.st);
}

static unsigned buf(uint8_t type, bool load, bool store)
{
    cr_assert_lt(ch.nbufs, CGJ_FUSE_MAX_BUFS);
    ch.buf[ch.nbufs] =
        (cgj_fuse_buf_t){.addr = 0x10000 * (ch.nbufs + 1), .extent = ch.n, .type = type, .load = load, .store = store};
    return ch.nbufs++;
}

/* A stage of spec sp: its pointers on the buffers of `bufs`, its scalars' bits from `scalars`,
 * both in the order of the spec's parameters (each list only for its kind). */
static void stage(const cgj_ew_spec_t *sp, const unsigned *bufs, const uint64_t *scalars)
{
    cgj_fuse_stage_t *st = &ch.st[ch.nstages];
    *st = (cgj_fuse_stage_t){.spec = sp, .op = ch.nstages};
    for (uint32_t k = 0, b = 0, s = 0; k < sp->nparams; k++) {
        if (cgj_ew_is_pointer(sp, k)) st->buf[k] = (uint8_t)bufs[b++];
        else st->scalar[k] = scalars ? scalars[s++] : ch.n;
    }
    ch.nstages++;
}

static uint64_t f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t f64(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static char *source;

static const char *gen(void)
{
    cgj_free(source);
    source = cgj_fusion_codegen(&ch);
    cr_assert_not_null(source);
    return source;
}

/* ---- NVRTC ---- */

static int nvrtc(void)
{
    char err[256] = "";
    int v = cgj_fusion_nvrtc_version(err, sizeof err);
    if (!v) {
        cleanup(); /* a skipped test does not reach .fini */
        cr_skip_test("NVRTC cannot be loaded: %s", err);
    }
    return v;
}

static bool defines_cgj_fused(const void *cubin, size_t size)
{
    return memmem(cubin, size, "cgj_fused", 9) != NULL;
}

/* Compile `src` cold, check the CUBIN and both caches; returns it. */
static const void *compile_cold(const char *src, size_t *size)
{
    int version = nvrtc();
    char err[256] = "";
    bool cold = false;
    *size = 0;
    const void *cubin = cgj_fusion_compile(src, ARCH, size, &cold, err, sizeof err);
    cr_assert_not_null(cubin, "NVRTC: %s\nsource:\n%.4000s", err, src);
    cr_assert(cold, "the first compile of a source runs NVRTC");
    cr_assert_gt(*size, 64);
    cr_assert(!memcmp(cubin, "\177ELF", 4), "a CUBIN is an ELF file");
    cr_assert(defines_cgj_fused(cubin, *size), "the CUBIN names cgj_fused");
    /* in memory: the same bytes, not compiled again */
    size_t size2 = 0;
    bool cold2 = true;
    const void *again = cgj_fusion_compile(src, ARCH, &size2, &cold2, err, sizeof err);
    cr_assert_eq(again, cubin, "the memory cache returns its bytes");
    cr_assert_not(cold2);
    cr_assert_eq(size2, *size);
    /* on disk: DIR/KEY.cubin, the same bytes */
    char key[17], path[256];
    cgj_fusion_cache_key(src, ARCH, version, key);
    snprintf(path, sizeof path, "%s/%s.cubin", cache_dir, key);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "no %s", path);
    cr_assert_eq(sb.st_mode & 0777, 0600);
    size_t dsize = 0;
    void *disk = cgj_fusion_cache_read(cache_dir, key, &dsize);
    cr_assert_not_null(disk);
    cr_assert_eq(dsize, *size);
    cr_assert(!memcmp(disk, cubin, dsize));
    cgj_free(disk);
    return cubin;
}

/* ---- the source ---- */

Test(fusion_codegen, grid)
{
    cr_assert_eq(cgj_fusion_grid(0), 1);
    cr_assert_eq(cgj_fusion_grid(1), 1);
    cr_assert_eq(cgj_fusion_grid(CGJ_FUSE_BLOCK), 1);
    cr_assert_eq(cgj_fusion_grid(CGJ_FUSE_BLOCK + 1), 2);
    cr_assert_eq(cgj_fusion_grid((uint64_t)CGJ_FUSE_BLOCK << 20), 1u << 20);
    cr_assert_eq(cgj_fusion_grid(UINT64_MAX / 2), 1u << 20, "capped: the grid-stride loop covers the rest");
}

Test(fusion_codegen, one_stage)
{
    const cgj_ew_spec_t *sp = spec("(out float y, in float x, float a, float b, count int n): y = a * x + b");
    chain(1000, 1);
    unsigned x = buf(CGJ_EW_F32, true, false), y = buf(CGJ_EW_F32, false, true);
    stage(sp, (unsigned[]){y, x}, (uint64_t[]){f32(0.5f), f32(-2.0f), 1000});
    const char *s = gen();
    assert_has(s, "extern \"C\" __global__");
    assert_has(s, "cgj_fused(float *__restrict__ b0, float *__restrict__ b1, long long n)");
    assert_has(s, "__launch_bounds__(256)");
    assert_has(s, "v0 = b0[i];");
    assert_lacks(s, "= b1[i]");
    assert_has(s, "b1[i] = v1;");
    assert_lacks(s, "b0[i] = ");
    assert_has(s, "__int_as_float(0x3f000000)");
    assert_has(s, "__int_as_float(0xc0000000)");
    assert_has(s, "v1 = cgj_keep(");
    assert_has(s, "i < n; i += stride");
    /* no address and no count in the source: chains that differ only there share a kernel */
    assert_lacks(s, "10000");
    assert_lacks(s, "1000");
}

/* Producer -> consumer through a buffer kept in a register: the intermediate is neither loaded
 * nor stored, the consumer reads the producer's register. */
Test(fusion_codegen, values_flow_in_registers)
{
    const cgj_ew_spec_t *mul = spec("(out float y, in float x, float a, count int n): y = a * x");
    const cgj_ew_spec_t *add = spec("(out float z, in float y, float b, count int n): z = y + b");
    chain(64, 2);
    unsigned x = buf(CGJ_EW_F32, true, false), t = buf(CGJ_EW_F32, false, false), z = buf(CGJ_EW_F32, false, true);
    stage(mul, (unsigned[]){t, x}, (uint64_t[]){f32(3.0f), 64});
    stage(add, (unsigned[]){z, t}, (uint64_t[]){f32(1.0f), 64});
    const char *s = gen();
    cr_assert_eq(occurrences(s, "b1["), 0, "the intermediate never touches memory:\n%s", s);
    assert_has(s, "float v1;");
    assert_has(s, "v1 = cgj_keep(s0_");
    assert_has(s, "v2 = cgj_keep(s1_");
    assert_has(s, "const float s1_0 = v1;"); /* stage 1 reads t from its register */
    cr_assert_eq(occurrences(s, "= b0[i]"), 1, "x loaded once");
    cr_assert_eq(occurrences(s, "b2[i] = v2;"), 1, "z stored once");
    cr_assert_eq(occurrences(s, "[i] = "), 1, "one store in all");
    /* stored when asked: the same chain with t's last value needed */
    ch.buf[t].store = true;
    s = gen();
    assert_has(s, "b1[i] = v1;");
    assert_lacks(s, "= b1[i]");
}

/* In place: one buffer loaded once, updated by each stage, stored once. */
Test(fusion_codegen, in_place)
{
    const cgj_ew_spec_t *sp = spec("(inout float x, float a, count int n): x = x * a");
    chain(10, 3);
    unsigned x = buf(CGJ_EW_F32, true, true);
    for (int k = 0; k < 3; k++) stage(sp, (unsigned[]){x}, (uint64_t[]){f32((float)k), 10});
    const char *s = gen();
    cr_assert_eq(occurrences(s, "v0 = b0[i];"), 1);
    cr_assert_eq(occurrences(s, "b0[i] = v0;"), 1);
    cr_assert_eq(occurrences(s, "v0 = cgj_keep("), 3);
    assert_has(s, "__int_as_float(0x00000000)");
    assert_has(s, "__int_as_float(0x3f800000)");
    assert_has(s, "__int_as_float(0x40000000)");
}

Test(fusion_codegen, scalar_literals_are_exact_bits)
{
    const cgj_ew_spec_t *sp =
        spec("(out double y, float a, double b, int c, unsigned d, long e, size_t f, count long n): "
             "y = a + b + c + d + e + f");
    chain(5, 1);
    unsigned y = buf(CGJ_EW_F64, false, true);
    stage(sp, (unsigned[]){y}, (uint64_t[]){f32(0.5f), f64(0.1), (uint32_t)-3, 7, (uint64_t)-1, 1ull << 40, 5});
    const char *s = gen();
    assert_has(s, "double *__restrict__ b0");
    assert_has(s, "(double)__int_as_float(0x3f000000)");
    assert_has(s, "(double)__longlong_as_double(0x3fb999999999999all)");
    assert_has(s, "(double)(int)0xfffffffdu");
    assert_has(s, "(double)0x00000007u");
    assert_has(s, "(double)(long long)0xffffffffffffffffull");
    assert_has(s, "(double)0x0000010000000000ull");
    assert_lacks(s, "0x0000000000000005ull"); /* the count: a parameter of the kernel, no literal */
}

Test(fusion_codegen, numbers_are_exact_bits_of_the_element_type)
{
    const cgj_ew_spec_t *fs = spec("(inout float x, count int n): x = x * 0.1 + 1e40");
    const cgj_ew_spec_t *ds = spec("(inout double x, count int n): x = x * 0.1");
    chain(1, 2);
    unsigned a = buf(CGJ_EW_F32, true, true), b = buf(CGJ_EW_F64, true, true);
    stage(fs, (unsigned[]){a}, NULL);
    stage(ds, (unsigned[]){b}, NULL);
    const char *s = gen();
    assert_has(s, "__int_as_float(0x3dcccccd)"); /* 0.1f */
    assert_has(s, "__int_as_float(0x7f800000)"); /* 1e40 is inf in float */
    assert_has(s, "__longlong_as_double(0x3fb999999999999all)");
    assert_has(s, "const double s1_");
    assert_has(s, "const float s0_");
}

Test(fusion_codegen, ternary_and_comparisons)
{
    const cgj_ew_spec_t *sp = spec("(out float y, in float x, float a, count int n): y = x < a ? x : x >= a ? a : 0");
    chain(3, 1);
    unsigned x = buf(CGJ_EW_F32, true, false), y = buf(CGJ_EW_F32, false, true);
    stage(sp, (unsigned[]){y, x}, (uint64_t[]){f32(1.0f), 3});
    const char *s = gen();
    assert_has(s, " < s0_");
    assert_has(s, " >= s0_");
    assert_has(s, "? (float)1 : (float)0");
    assert_has(s, "!= (float)0 ? s0_");
}

Test(fusion_codegen, functions_use_their_forms)
{
    chain(2, 2 * N_FN);
    unsigned x = buf(CGJ_EW_F32, true, true), d = buf(CGJ_EW_F64, true, true);
    for (int f = 0; f < N_FN; f++) {
        char text[160];
        for (int dbl = 0; dbl < 2; dbl++) {
            const char *t = dbl ? "double" : "float";
            snprintf(text, sizeof text, "(inout %s x, %s a, count int n): x = %s(x%s)", t, t, cgj_ew_func_names[f],
                     cgj_ew_func_nargs[f] == 2 ? ", a" : "");
            stage(spec(text), (unsigned[]){dbl ? d : x}, (uint64_t[]){dbl ? f64(0.5) : f32(0.5f), 2});
        }
    }
    const char *s = gen();
    static const char *const fl[] = {"expf(", "logf(",  "sqrtf(", "rsqrtf(", "tanhf(",
                                     "erff(", "fabsf(", "fmaxf(", "fminf(",  "powf("};
    static const char *const db[] = {" exp(", " log(", "sqrt(", "rsqrt(", "tanh(",
                                     "erf(",  "fabs(", "fmax(", "fmin(",  "pow("};
    for (size_t k = 0; k < sizeof fl / sizeof fl[0]; k++) {
        assert_has(s, fl[k]);
        assert_has(s, db[k]);
    }
    /* forms are expanded: no %0 / %1 left after the prelude (its asm has its own), arguments are
     * temporaries */
    const char *body = strstr(s, "cgj_fused(");
    cr_assert_not_null(body);
    assert_lacks(body, "%");
    assert_has(s, "powf(s");
}

Test(fusion_codegen, broadcast_reads_index_memory)
{
    const cgj_ew_spec_t *sp = spec("(out float y, in float x, in float b[i % cols], in float sc[i / hw], "
                                   "in float c[(i / hw) % ch], int hw, int ch, count int rows, count int cols): "
                                   "y = x * sc + b + c");
    chain(60, 1);
    unsigned y = buf(CGJ_EW_F32, false, true), x = buf(CGJ_EW_F32, true, false);
    unsigned b = buf(CGJ_EW_F32, false, false), sc = buf(CGJ_EW_F32, false, false), c = buf(CGJ_EW_F32, false, false);
    ch.buf[b].bcast = ch.buf[sc].bcast = ch.buf[c].bcast = true;
    stage(sp, (unsigned[]){y, x, b, sc, c}, (uint64_t[]){5, 3, 4, 15});
    const char *s = gen();
    assert_has(s, "b2[(i % 15ll)]");
    assert_has(s, "b3[(i / 5ll)]");
    assert_has(s, "b4[(i / 5ll % 3ll)]");
    assert_lacks(s, "= b2[i]");
    assert_lacks(s, "b2[i] =");
}

/* ---- compiled by NVRTC ---- */

Test(fusion_codegen, compiles_one_stage)
{
    const cgj_ew_spec_t *sp = spec("(out float y, in float x, float a, float b, count int n): y = a * x + b");
    chain(1000, 1);
    unsigned x = buf(CGJ_EW_F32, true, false), y = buf(CGJ_EW_F32, false, true);
    stage(sp, (unsigned[]){y, x}, (uint64_t[]){f32(0.5f), f32(2.0f), 1000});
    size_t size;
    compile_cold(gen(), &size);
    /* another architecture is another key: compiled again */
    char err[256];
    bool cold = false;
    size_t size80 = 0;
    const void *c80 = cgj_fusion_compile(source, "sm_80", &size80, &cold, err, sizeof err);
    cr_assert_not_null(c80, "%s", err);
    cr_assert(cold);
}

Test(fusion_codegen, compiles_every_function_in_float_and_double)
{
    for (int dbl = 0; dbl < 2; dbl++) {
        chain(77, N_FN + 1);
        unsigned x = buf(dbl ? CGJ_EW_F64 : CGJ_EW_F32, true, true);
        unsigned y = buf(dbl ? CGJ_EW_F64 : CGJ_EW_F32, false, true);
        const char *t = dbl ? "double" : "float";
        for (int f = 0; f < N_FN; f++) {
            char text[160];
            snprintf(text, sizeof text, "(inout %s x, %s a, count int n): x = %s(x%s)", t, t, cgj_ew_func_names[f],
                     cgj_ew_func_nargs[f] == 2 ? ", a" : "");
            stage(spec(text), (unsigned[]){x}, (uint64_t[]){dbl ? f64(1.25) : f32(1.25f), 77});
        }
        char text[200];
        snprintf(text, sizeof text, "(out %s y, in %s x, count int n): y = gelu(x) + gelu_tanh(x) * sigmoid(-x)", t, t);
        stage(spec(text), (unsigned[]){y, x}, NULL);
        size_t size;
        compile_cold(gen(), &size);
    }
}

Test(fusion_codegen, compiles_the_ternary_with_every_comparison)
{
    static const char *const cmp[] = {"<", "<=", ">", ">=", "==", "!="};
    chain(9, 7);
    unsigned x = buf(CGJ_EW_F32, true, true), y = buf(CGJ_EW_F32, false, true);
    for (int k = 0; k < 6; k++) {
        char text[200];
        snprintf(text, sizeof text, "(inout float x, float a, count int n): x = x %s a ? x * 2 : -(x - a)", cmp[k]);
        stage(spec(text), (unsigned[]){x}, (uint64_t[]){f32((float)k), 9});
    }
    stage(spec("(out float y, in float x, count int n): y = x > 0 ? 1 : x < 0 ? -1 : 0"), (unsigned[]){y, x}, NULL);
    size_t size;
    compile_cold(gen(), &size);
}

Test(fusion_codegen, compiles_integer_scalars)
{
    const cgj_ew_spec_t *sp = spec("(out float y, in float x, int c, unsigned d, long e, size_t f, count size_t n): "
                                   "y = x * c + d - e / f");
    const cgj_ew_spec_t *dp = spec("(out double y, in double x, int c, unsigned d, long e, size_t f, count size_t n): "
                                   "y = x * c + d - e / f");
    chain(12, 2);
    unsigned x = buf(CGJ_EW_F32, true, false), y = buf(CGJ_EW_F32, false, true);
    unsigned dx = buf(CGJ_EW_F64, true, false), dy = buf(CGJ_EW_F64, false, true);
    uint64_t sc[] = {(uint32_t)-7, 0xffffffffu, (uint64_t)INT64_MIN, UINT64_MAX, 12};
    stage(sp, (unsigned[]){y, x}, sc);
    stage(dp, (unsigned[]){dy, dx}, sc);
    size_t size;
    compile_cold(gen(), &size);
}

Test(fusion_codegen, compiles_a_chain_of_1000_stages)
{
    const cgj_ew_spec_t *sp = spec("(inout float x, float a, float b, count int n): x = a * x + b");
    chain(1 << 20, 1000);
    unsigned x = buf(CGJ_EW_F32, true, true);
    for (int k = 0; k < 1000; k++)
        stage(sp, (unsigned[]){x}, (uint64_t[]){f32(1.0f + k / 4096.0f), f32(-k / 8.0f), 1 << 20});
    const char *s = gen();
    cr_assert_eq(occurrences(s, "v0 = cgj_keep("), 1000);
    cr_assert_eq(occurrences(s, "= b0[i]"), 1);
    cr_assert_eq(occurrences(s, "b0[i] = v0;"), 1);
    size_t size;
    compile_cold(s, &size);
}

Test(fusion_codegen, compiles_mixed_element_types_broadcasts_and_dead_buffers)
{
    const cgj_ew_spec_t *bias =
        spec("(out float y, in float x, in float b[i % cols], count int rows, count int cols): y = x + b");
    const cgj_ew_spec_t *nchw =
        spec("(inout float y, in float s[(i / hw) % c], int hw, int c, count int n): y = y * s");
    const cgj_ew_spec_t *wide = spec("(out double d, in double e, count int n): d = e * 2");
    chain(4 * 6, 3);
    unsigned x = buf(CGJ_EW_F32, true, false), y = buf(CGJ_EW_F32, false, true);
    unsigned b = buf(CGJ_EW_F32, false, false), s = buf(CGJ_EW_F32, false, false);
    unsigned e = buf(CGJ_EW_F64, true, false), d = buf(CGJ_EW_F64, false, false); /* d: a dead intermediate */
    ch.buf[b].bcast = ch.buf[s].bcast = true;
    stage(bias, (unsigned[]){y, x, b}, (uint64_t[]){4, 6});
    stage(nchw, (unsigned[]){y, s}, (uint64_t[]){2, 3, 24});
    stage(wide, (unsigned[]){d, e}, NULL);
    const char *src = gen();
    assert_has(src, "double *__restrict__ b4");
    assert_has(src, "double v5;");
    assert_lacks(src, "b5[i]");
    size_t size;
    compile_cold(src, &size);
}

/* A kernel in the disk cache is used as it is: NVRTC does not run (cold stays false). */
Test(fusion_codegen, a_disk_entry_is_used_without_compiling)
{
    int version = nvrtc();
    const char *src = "extern \"C\" __global__ void cgj_fused(long long n) {}\n";
    char key[17];
    cgj_fusion_cache_key(src, ARCH, version, key);
    static const char fake[] = "not really a cubin, but the cache's bytes";
    cr_assert(cgj_fusion_cache_write(cache_dir, key, fake, sizeof fake));
    char err[256];
    bool cold = true;
    size_t size = 0;
    const void *got = cgj_fusion_compile(src, ARCH, &size, &cold, err, sizeof err);
    cr_assert_not_null(got, "%s", err);
    cr_assert_not(cold);
    cr_assert_eq(size, sizeof fake);
    cr_assert(!memcmp(got, fake, sizeof fake));
    /* and kept in memory: the file's removal does not matter any more */
    char path[256];
    snprintf(path, sizeof path, "%s/%s.cubin", cache_dir, key);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(cgj_fusion_compile(src, ARCH, &size, &cold, err, sizeof err), got);
    cr_assert_not(cold);
}

/* A corrupt entry reads as absent: the kernel is compiled again and the entry replaced. */
Test(fusion_codegen, a_corrupt_disk_entry_is_compiled_again)
{
    int version = nvrtc();
    const char *src = "extern \"C\" __global__ void cgj_fused(float *b0, long long n) { if (n) b0[0] = 1; }\n";
    char key[17], path[256];
    cgj_fusion_cache_key(src, ARCH, version, key);
    snprintf(path, sizeof path, "%s/%s.cubin", cache_dir, key);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("garbage garbage garbage garbage garbage", f);
    fclose(f);
    size_t size;
    compile_cold(src, &size); /* checks the rewritten entry */
}

Test(fusion_codegen, cache_dir_off_keeps_kernels_in_memory_only)
{
    nvrtc();
    cgj_cfg.CACHE_DIR = "off";
    const char *src = "extern \"C\" __global__ void cgj_fused(float *b0, long long n) { if (n) b0[0] = 2; }\n";
    char err[256];
    bool cold = false;
    size_t size = 0;
    const void *c = cgj_fusion_compile(src, ARCH, &size, &cold, err, sizeof err);
    cr_assert_not_null(c, "%s", err);
    cr_assert(cold);
    cr_assert_eq(cgj_fusion_compile(src, ARCH, &size, &cold, err, sizeof err), c);
    cr_assert_not(cold);
    cr_assert_eq(rmdir(cache_dir), 0, "the cache folder stays empty");
    cache_dir[0] = 0;
}

Test(fusion_codegen, compile_errors_are_reported_and_not_cached)
{
    nvrtc();
    const char *src = "extern \"C\" __global__ void cgj_fused(long long n) { this is not C; }\n";
    char err[256] = "";
    bool cold = true;
    size_t size = 0;
    cr_assert_null(cgj_fusion_compile(src, ARCH, &size, &cold, err, sizeof err));
    cr_assert_not(cold);
    cr_assert_str_not_empty(err);
    assert_has(err, ARCH);
    assert_has(err, "error");
    cr_assert_null(cgj_fusion_compile(src, ARCH, &size, &cold, err, sizeof err), "a failure is not cached");
    cr_assert_eq(rmdir(cache_dir), 0, "nothing written to disk");
    cache_dir[0] = 0;
    /* an architecture NVRTC does not know */
    const char *ok = "extern \"C\" __global__ void cgj_fused(long long n) {}\n";
    cr_assert_null(cgj_fusion_compile(ok, "sm_1", &size, &cold, err, sizeof err));
    cr_assert_str_not_empty(err);
    /* a virtual architecture gives PTX, no CUBIN */
    cr_assert_null(cgj_fusion_compile(ok, "compute_90", &size, &cold, err, sizeof err));
    assert_has(err, "compute_90");
}

typedef struct compile_arg {
    const char *src;
    const void *cubin;
    char err[256];
} compile_arg_t;

static void *compile_thread(void *p)
{
    compile_arg_t *a = p;
    size_t size;
    bool cold;
    a->cubin = cgj_fusion_compile(a->src, ARCH, &size, &cold, a->err, sizeof a->err);
    return NULL;
}

/* Threads compiling one source at once all get the one kept copy. */
Test(fusion_codegen, concurrent_compiles_share_one_entry)
{
    nvrtc();
    const char *src = "extern \"C\" __global__ void cgj_fused(float *b0, long long n) { if (n > 3) b0[1] = 3; }\n";
    pthread_t th[4];
    compile_arg_t arg[4];
    for (int t = 0; t < 4; t++) {
        arg[t] = (compile_arg_t){.src = src};
        cr_assert_eq(pthread_create(&th[t], NULL, compile_thread, &arg[t]), 0);
    }
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 4; t++) {
        cr_assert_not_null(arg[t].cubin, "thread %d: %s", t, arg[t].err);
        cr_assert_eq(arg[t].cubin, arg[0].cubin, "thread %d", t);
    }
}

Test(fusion_codegen, the_nvrtc_version)
{
    int v = nvrtc();
    cr_assert_geq(v, 11000);
    cr_assert_eq(v % 10, 0, "major*1000 + minor*10");
}

/* CGJIT_NVRTC names the library: that one or none. */
Test(fusion_codegen, a_missing_nvrtc_is_reported)
{
    cgj_cfg.NVRTC = "/nonexistent/libnvrtc.so";
    char err[256] = "";
    cr_assert_eq(cgj_fusion_nvrtc_version(err, sizeof err), 0);
    assert_has(err, "NVRTC not found");
    assert_has(err, "CGJIT_NVRTC=/nonexistent/libnvrtc.so");
    bool cold = true;
    size_t size = 0;
    cr_assert_null(
        cgj_fusion_compile("extern \"C\" __global__ void cgj_fused() {}", ARCH, &size, &cold, err, sizeof err));
    cr_assert_not(cold);
    assert_has(err, "NVRTC not found");
}

/* Float buffers on 16-byte boundaries: four elements a thread with 16-byte loads and stores,
 * then a scalar tail; the grid covers a quarter of the elements. */
Test(fusion_codegen, aligned_float_chains_take_four_elements_a_thread)
{
    const cgj_ew_spec_t *sp = spec("(out float y, in float x, float a, float b, count int n): y = a * x + b");
    chain(1003, 1);
    unsigned x = buf(CGJ_EW_F32, true, false), y = buf(CGJ_EW_F32, false, true);
    stage(sp, (unsigned[]){y, x}, (uint64_t[]){f32(0.5f), f32(2.0f), 1003});
    cr_assert(cgj_fusion_vectorized(&ch));
    const char *s = gen();
    assert_has(s, "float4 w0 = reinterpret_cast<const float4 *>(b0)[q];");
    assert_has(s, "reinterpret_cast<float4 *>(b1)[q] = w1;");
    assert_lacks(s, "= reinterpret_cast<const float4 *>(b1)");
    cr_assert_eq(occurrences(s, "cgj_elem(4 * q + "), 4);
    assert_has(s, "for (long long i = 4 * nv + t; i < n; i += stride)");
    cr_assert_eq(cgj_fusion_launch_grid(&ch), cgj_fusion_grid((1003 + 3) / 4));
    size_t size;
    compile_cold(s, &size);
}

/* One buffer off a 16-byte boundary, or a double buffer: one element a thread. */
Test(fusion_codegen, unaligned_or_double_chains_take_one_element_a_thread)
{
    const cgj_ew_spec_t *sp = spec("(out float y, in float x, float a, float b, count int n): y = a * x + b");
    chain(1000, 1);
    unsigned x = buf(CGJ_EW_F32, true, false), y = buf(CGJ_EW_F32, false, true);
    ch.buf[x].addr += 4;
    stage(sp, (unsigned[]){y, x}, (uint64_t[]){f32(0.5f), f32(2.0f), 1000});
    cr_assert_not(cgj_fusion_vectorized(&ch));
    cr_assert_eq(cgj_fusion_launch_grid(&ch), cgj_fusion_grid(1000));
    const char *s = gen();
    assert_lacks(s, "float4");
    assert_has(s, "for (long long i = 0 + t; i < n; i += stride)");
    const cgj_ew_spec_t *dp = spec("(out double y, in double x, count int n): y = 2 * x");
    chain(1000, 1);
    x = buf(CGJ_EW_F64, true, false), y = buf(CGJ_EW_F64, false, true);
    stage(dp, (unsigned[]){y, x}, NULL);
    cr_assert_not(cgj_fusion_vectorized(&ch));
}
