/*
 * test_libs.c — cgjit's cuBLAS wrappers against the fake cuBLAS (tests/fakecuda/fakecublas.c).
 *
 * The executable links libcgjit before libfakecublas: the cublas* symbols libcgjit exports come
 * first in lookup order, and the wrappers' dlsym(RTLD_NEXT) finds the fake. The fake reaches the
 * fake driver through dlopen + cuGetProcAddress, so cgjit sees its driver calls as it sees a real
 * library's.
 *
 * Each scenario runs STEPS steps eagerly (no markers) on one buffer set and records every buffer
 * and every host value after each step; then STEPS traced steps (cgj_trace_begin/end) on another
 * set with the same initial data, and compares each step's results bitwise with the eager ones,
 * after cgj_trace_end and a synchronization. Between steps (outside them) both halves make the
 * same handle changes. fakecublas_calls() tells whether a library call ran or was absorbed: on
 * a step whose calls all have the keys they had on the step before, none should run.
 *
 * With CGJIT_DISABLE=1 the traced half runs eagerly too: the comparisons then check the fake
 * alone, and the expectations on cgjit's counters are skipped.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <cgjit.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fakeapp.h"
#include "fakecublas.h"

#define STEPS 60
#define NV 64 /* vector length */
#define GM 12 /* GEMM: C is GM x GN, A is GM x GK, B is GK x GN (column-major) */
#define GN 8
#define GK 10
#define HV 4 /* host values a step may record */

static fk_t fk;
static cublasHandle_t g_h;
static CUstream g_streams[2];
static CUstream g_stream; /* the handle's stream; driver launches of a step go there too */
static bool g_disabled;   /* CGJIT_DISABLE=1: cgj_trace_begin said so */

#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s failed", #call)
#define BL(call)                                                                     \
    do {                                                                             \
        cublasStatus_t st_ = (call);                                                 \
        cr_assert_eq(st_, CUBLAS_STATUS_SUCCESS, "%s returned %d", #call, (int)st_); \
    } while (0)

static void setup(void)
{
    /* These scenarios check the optional learned path (CGJIT_LIBS_LEARNED): what it absorbs and
     * when it lets the library run. test_libs_hidden.c checks why it is not the default. */
    setenv("CGJIT_LIBS_LEARNED", "1", 0);
    fk_open(&fk);
    OK(fk.stream_create(&g_streams[0], 0));
    OK(fk.stream_create(&g_streams[1], 0));
    g_stream = g_streams[0];
    BL(cublasCreate_v2(&g_h));
    BL(cublasSetStream_v2(g_h, g_stream));
    fakecublas_reset();
}

TestSuite(runtime_libs, .init = setup);

/* ---------------------------------------------------------------------------------------------
 * Buffer sets, the two halves, the comparison
 * ------------------------------------------------------------------------------------------- */

enum { B_X, B_Y, B_A, B_B, B_C, B_OUT, B_ALPHA, B_BETA, B_RES, B_COUNT };
static const char *const b_name[B_COUNT] = {"x", "y", "A", "B", "C", "out", "alpha", "beta", "res"};
static const int b_len[B_COUNT] = {NV, NV, GM *GK, GK *GN, GM *GN, NV, 1, 1, 1};
#define SET_FLOATS (NV * 3 + GM * GK + GK * GN + GM * GN + 3)

typedef struct bset {
    CUdeviceptr p[B_COUNT];
} bset_t;

#define F(b, i) ((float *)(uintptr_t)(b)->p[i]) /* the fake's device memory is host memory */

static void bset_alloc(bset_t *b)
{
    for (int i = 0; i < B_COUNT; i++) b->p[i] = fk_alloc_floats(&fk, b_len[i], 11 + 3 * i);
    *F(b, B_ALPHA) = 0.5f;
    *F(b, B_BETA) = 0.75f;
}

typedef struct scenario {
    const char *name;
    int nsets; /* buffer sets per half, used by step parity (1 or 2) */
    /* Before step s, outside it, in both halves: handle and stream changes. May be NULL. */
    void (*before)(int s, bset_t *b);
    /* The step's work on set b; host values it computes go to hv[HV]. */
    void (*step)(int s, bset_t *b, float *hv);
} scenario_t;

typedef struct outcome {
    const char *name;          /* the scenario's, its trace's anchor */
    long calls[STEPS];         /* fakecublas_calls() growth during each traced step */
    cgj_stats_t eager, traced; /* cgjit's counters after each half */
} outcome_t;

static float g_snap[STEPS][2][SET_FLOATS];
static float g_hv_eager[STEPS][HV];

static void snapshot(const bset_t *b, float *dst)
{
    for (int i = 0; i < B_COUNT; i++) {
        OK(fk.dtoh(dst, b->p[i], (size_t)b_len[i] * sizeof(float)));
        dst += b_len[i];
    }
}

static void compare(const char *name, int s, int set, const bset_t *b)
{
    float now[SET_FLOATS];
    snapshot(b, now);
    const float *want = g_snap[s][set], *got = now;
    for (int i = 0; i < B_COUNT; i++) {
        for (int j = 0; j < b_len[i]; j++)
            cr_assert(memcmp(&want[j], &got[j], sizeof(float)) == 0,
                      "%s: step %d set %d: %s[%d] is %.9g traced, %.9g eager", name, s, set, b_name[i], j,
                      (double)got[j], (double)want[j]);
        want += b_len[i];
        got += b_len[i];
    }
}

static cgj_stats_t stats_now(void)
{
    cgj_stats_t st;
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    return st;
}

static void begin(const char *name)
{
    int r = cgj_trace_begin(name);
    if (r == CGJ_ERR_DISABLED) {
        g_disabled = true;
        return;
    }
    cr_assert_eq(r, CGJ_OK, "cgj_trace_begin(%s): %s", name, cgj_strerror(r));
}

static void run(const scenario_t *sc, outcome_t *out)
{
    bset_t e[2], t[2];
    for (int k = 0; k < sc->nsets; k++) {
        bset_alloc(&e[k]);
        bset_alloc(&t[k]);
    }
    out->name = sc->name;
    for (int s = 0; s < STEPS; s++) {
        bset_t *b = &e[s % sc->nsets];
        if (sc->before) sc->before(s, b);
        float hv[HV] = {0};
        sc->step(s, b, hv);
        OK(fk.ctx_sync());
        memcpy(g_hv_eager[s], hv, sizeof hv);
        for (int k = 0; k < sc->nsets; k++) snapshot(&e[k], g_snap[s][k]);
    }
    out->eager = stats_now();
    for (int s = 0; s < STEPS; s++) {
        bset_t *b = &t[s % sc->nsets];
        if (sc->before) sc->before(s, b);
        float hv[HV] = {0};
        unsigned long c0 = fakecublas_calls();
        begin(sc->name);
        sc->step(s, b, hv);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        out->calls[s] = (long)(fakecublas_calls() - c0);
        OK(fk.ctx_sync());
        for (int k = 0; k < HV; k++)
            cr_assert(memcmp(&hv[k], &g_hv_eager[s][k], sizeof(float)) == 0,
                      "%s: step %d: host value %d is %.9g traced, %.9g eager", sc->name, s, k, (double)hv[k],
                      (double)g_hv_eager[s][k]);
        for (int k = 0; k < sc->nsets; k++) compare(sc->name, s, k, &t[k]);
    }
    out->traced = stats_now();
    cr_assert_eq(fakecublas_workspace_errors(), 0,
                 "%s: %lu kernels of the library ran with a workspace no live handle owns", sc->name,
                 fakecublas_workspace_errors());
    char line[8 * STEPS];
    size_t len = 0;
    for (int s = 0; s < STEPS && len < sizeof line - 8; s++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%ld", s ? " " : "", out->calls[s]);
    cr_log_info("%s: lib_calls %llu, absorbed %llu, relearned %llu, side exits %llu", sc->name,
                (unsigned long long)(out->traced.lib_calls - out->eager.lib_calls),
                (unsigned long long)(out->traced.lib_absorbed - out->eager.lib_absorbed),
                (unsigned long long)(out->traced.lib_relearned - out->eager.lib_relearned),
                (unsigned long long)(out->traced.side_exits - out->eager.side_exits));
    cr_log_info("%s: library calls per traced step: %s", sc->name, line);
}

/* The traced half's counter growth. */
#define TRACED(o, field) ((o)->traced.field - (o)->eager.field)

/* fakecublas_calls() growth over traced steps [from, to). */
static long calls_between(const outcome_t *o, int from, int to)
{
    long n = 0;
    for (int s = from; s < to; s++) n += o->calls[s];
    return n;
}

/* The traced steps from `from` on (those pred accepts; all if NULL) where the library ran more
 * than `most` times, as "step:calls" (empty if none). */
static const char *steps_over(const outcome_t *o, int from, bool (*pred)(int s), long most)
{
    static char buf[16 * STEPS];
    size_t len = 0;
    buf[0] = '\0';
    for (int s = from; s < STEPS && len < sizeof buf - 16; s++)
        if ((!pred || pred(s)) && o->calls[s] > most)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d:%ld", len ? " " : "", s, o->calls[s]);
    return buf;
}

/* On the steps pred accepts (from `from` on; all if NULL), the library ran at most `most` times;
 * why: what a step over that means. */
static void expect_at_most(const outcome_t *o, int from, bool (*pred)(int s), long most, const char *why)
{
    const char *bad = steps_over(o, from, pred, most);
    cr_expect(!*bad, "%s: %s (step:calls): %s", o->name, why, bad);
}

/* On the steps pred accepts (from `from` on), every call had the key it had on the step before:
 * all of them should be absorbed. */
static void expect_absorbed(const outcome_t *o, int from, bool (*pred)(int s))
{
    expect_at_most(o, from, pred, 0,
                   "the library ran on steps where every call had its recorded key and should have been absorbed");
}

/* The library ran on traced steps first, first + every, ...; why: why it had to. */
static void expect_ran_every(const outcome_t *o, int first, int every, const char *why)
{
    for (int s = first; s < STEPS; s += every)
        cr_assert_geq(o->calls[s], 1, "step %d: %s, the library did not run", s, why);
}

/* The library did not run during the last 20 traced steps; why: why it should not. */
static void expect_quiet_end(const outcome_t *o, const char *why)
{
    cr_assert_eq(calls_between(o, STEPS - 20, STEPS), 0,
                 "the library ran %ld times during the last 20 traced steps (%s)", calls_between(o, STEPS - 20, STEPS),
                 why);
}

/* Expectations on cgjit hold only where it traces. */
static bool cgjit_off(void)
{
    if (g_disabled) cr_log_warn("CGJIT_DISABLE=1: only the fake and the eager comparison were checked");
    return g_disabled;
}

static void expect_replaying(const outcome_t *o)
{
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info(o->name, &i), CGJ_OK);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "%s: state %d, reason: %s", o->name, (int)i.state, i.reason);
}

/* Run the scenario {name, nsets, before, step}, its traced results compared with the eager ones.
 * Its outcome, for the expectations on cgjit; NULL where cgjit does not trace (CGJIT_DISABLE=1). */
static const outcome_t *run_scenario(const char *name, int nsets, void (*before)(int s, bset_t *b),
                                     void (*step)(int s, bset_t *b, float *hv))
{
    static outcome_t o;
    scenario_t sc = {name, nsets, before, step};
    run(&sc, &o);
    return cgjit_off() ? NULL : &o;
}

/* run_scenario, for a scenario where the library's calls are absorbed: some call was. */
static const outcome_t *run_absorbing(const char *name, int nsets, void (*before)(int s, bset_t *b),
                                      void (*step)(int s, bset_t *b, float *hv))
{
    const outcome_t *o = run_scenario(name, nsets, before, step);
    if (o) cr_assert_gt(TRACED(o, lib_absorbed), 0, "no library call was absorbed");
    return o;
}

/* ---------------------------------------------------------------------------------------------
 * Steps
 * ------------------------------------------------------------------------------------------- */

static void set_stream(CUstream s)
{
    g_stream = s;
    BL(cublasSetStream_v2(g_h, s));
}

/* y += 2x; x = 0.5x + 1 (a driver launch); C = 0.5 A B + 0.25 C (the nested Sscal scales C);
 * out = y. */
static void mixed_step(int s, bset_t *b, float *hv)
{
    const float two = 2.0f, half = 0.5f, quarter = 0.25f;
    BL(cublasSaxpy_v2(g_h, NV, &two, F(b, B_X), 1, F(b, B_Y), 1));
    OK(fk_axpb_launch(&fk, g_stream, b->p[B_X], 0.5f, 1.0f, NV, 1));
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &half, F(b, B_A), GM, F(b, B_B), GK, &quarter,
                      F(b, B_C), GM));
    BL(cublasScopy_v2(g_h, NV, F(b, B_Y), 1, F(b, B_OUT), 1));
}

/* ---------------------------------------------------------------------------------------------
 * The fake alone: arithmetic, statuses, nested call, workspace
 * ------------------------------------------------------------------------------------------- */

Test(runtime_libs, fake_matches_reference)
{
    bset_t b;
    bset_alloc(&b);
    float x[NV], y[NV], a[GM * GK], bb[GK * GN], c[GM * GN];
    memcpy(x, F(&b, B_X), sizeof x);
    memcpy(y, F(&b, B_Y), sizeof y);
    memcpy(a, F(&b, B_A), sizeof a);
    memcpy(bb, F(&b, B_B), sizeof bb);
    memcpy(c, F(&b, B_C), sizeof c);
    float out[NV];
    memcpy(out, F(&b, B_OUT), sizeof out);

    const float al = 1.5f, be = -0.5f, sc = 0.25f;
    BL(cublasSaxpy_v2(g_h, NV, &al, F(&b, B_X), 1, F(&b, B_Y), 1));
    for (int i = 0; i < NV; i++) y[i] += al * x[i];
    BL(cublasSscal_v2(g_h, NV / 2, &sc, F(&b, B_X), 2)); /* every other element */
    for (int i = 0; i < NV; i += 2) x[i] *= sc;
    BL(cublasScopy_v2(g_h, NV / 2, F(&b, B_X), 1, F(&b, B_OUT), -2)); /* reversed, stride 2 */
    for (int i = 0; i < NV / 2; i++) out[(NV / 2 - 1 - i) * 2] = x[i];
    float dot = 0;
    BL(cublasSdot_v2(g_h, NV, F(&b, B_X), 1, F(&b, B_Y), 1, &dot));
    float want_dot = 0;
    for (int i = 0; i < NV; i++) want_dot += x[i] * y[i];
    unsigned long before = fakecublas_calls();
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_T, GM, GN, GK, &al, F(&b, B_A), GM, F(&b, B_B), GN, &be, F(&b, B_C),
                      GM));
    cr_assert_eq(fakecublas_calls() - before, 2, "beta != 1: Sgemm and its nested Sscal");
    for (int j = 0; j < GN; j++)
        for (int i = 0; i < GM; i++) {
            float acc = 0;
            for (int l = 0; l < GK; l++) acc += a[i + l * GM] * bb[j + l * GN];
            c[i + j * GM] = al * acc + 1.0f * (be * c[i + j * GM]);
        }
    OK(fk.ctx_sync());
    cr_assert(memcmp(x, F(&b, B_X), sizeof x) == 0, "sscal");
    cr_assert(memcmp(y, F(&b, B_Y), sizeof y) == 0, "saxpy");
    cr_assert(memcmp(out, F(&b, B_OUT), sizeof out) == 0, "scopy");
    cr_assert(memcmp(&dot, &want_dot, sizeof dot) == 0, "sdot: %g, want %g", (double)dot, (double)want_dot);
    cr_assert(memcmp(c, F(&b, B_C), sizeof c) == 0, "sgemm");

    const float one = 1.0f, zero = 0.0f;
    before = fakecublas_calls();
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_T, CUBLAS_OP_N, GM, GN, GK, &al, F(&b, B_A), GK, F(&b, B_B), GK, &one, F(&b, B_C),
                      GM));
    cr_assert_eq(fakecublas_calls() - before, 1, "beta == 1: no nested Sscal");
    for (int i = 0; i < GM * GN; i++) F(&b, B_C)[i] = NAN;
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &al, F(&b, B_A), GM, F(&b, B_B), GK, &zero, F(&b, B_C),
                      GM));
    for (int i = 0; i < GM * GN; i++) cr_assert(!isnan(F(&b, B_C)[i]), "beta == 0 must not read C");

    /* device pointer mode: scalars and the dot result in device memory */
    BL(cublasSetPointerMode_v2(g_h, CUBLAS_POINTER_MODE_DEVICE));
    memcpy(y, F(&b, B_Y), sizeof y);
    memcpy(x, F(&b, B_X), sizeof x);
    BL(cublasSaxpy_v2(g_h, NV, F(&b, B_ALPHA), F(&b, B_X), 1, F(&b, B_Y), 1));
    for (int i = 0; i < NV; i++) y[i] += 0.5f * x[i];
    BL(cublasSdot_v2(g_h, NV, F(&b, B_X), 1, F(&b, B_Y), 1, F(&b, B_RES)));
    want_dot = 0;
    for (int i = 0; i < NV; i++) want_dot += x[i] * y[i];
    OK(fk.ctx_sync());
    cr_assert(memcmp(y, F(&b, B_Y), sizeof y) == 0, "saxpy, device alpha");
    cr_assert(memcmp(&want_dot, F(&b, B_RES), sizeof dot) == 0, "sdot, device result");
    before = fakecublas_calls();
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, F(&b, B_ALPHA), F(&b, B_A), GM, F(&b, B_B), GK,
                      F(&b, B_BETA), F(&b, B_C), GM));
    cr_assert_eq(fakecublas_calls() - before, 2, "device mode: the nested Sscal always runs");
    cublasPointerMode_t pm;
    BL(cublasGetPointerMode_v2(g_h, &pm));
    cr_assert_eq(pm, CUBLAS_POINTER_MODE_DEVICE);
    BL(cublasSetPointerMode_v2(g_h, CUBLAS_POINTER_MODE_HOST));

    /* statuses */
    cr_assert_eq(cublasSaxpy_v2(NULL, NV, &al, F(&b, B_X), 1, F(&b, B_Y), 1), CUBLAS_STATUS_NOT_INITIALIZED);
    cr_assert_eq(cublasSaxpy_v2(g_h, -1, &al, F(&b, B_X), 1, F(&b, B_Y), 1), CUBLAS_STATUS_INVALID_VALUE);
    cr_assert_eq(cublasSscal_v2(g_h, -1, &al, F(&b, B_X), 1), CUBLAS_STATUS_INVALID_VALUE);
    cr_assert_eq(cublasScopy_v2(g_h, -1, F(&b, B_X), 1, F(&b, B_Y), 1), CUBLAS_STATUS_INVALID_VALUE);
    cr_assert_eq(cublasSdot_v2(g_h, -1, F(&b, B_X), 1, F(&b, B_Y), 1, &dot), CUBLAS_STATUS_INVALID_VALUE);
    cr_assert_eq(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, -1, GN, GK, &al, F(&b, B_A), GM, F(&b, B_B), GK, &be,
                                F(&b, B_C), GM),
                 CUBLAS_STATUS_INVALID_VALUE);
    cr_assert_eq(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &al, F(&b, B_A), GM - 1, F(&b, B_B), GK, &be,
                                F(&b, B_C), GM),
                 CUBLAS_STATUS_INVALID_VALUE, "lda < m");
    cr_assert_eq(cublasSetPointerMode_v2(g_h, (cublasPointerMode_t)7), CUBLAS_STATUS_INVALID_VALUE);
    cr_assert_eq(cublasSetWorkspace_v2(g_h, NULL, 64), CUBLAS_STATUS_INVALID_VALUE);
    cublasMath_t mm;
    BL(cublasSetMathMode(g_h, CUBLAS_TF32_TENSOR_OP_MATH));
    BL(cublasGetMathMode(g_h, &mm));
    cr_assert_eq(mm, CUBLAS_TF32_TENSOR_OP_MATH);
    cublasAtomicsMode_t am;
    BL(cublasSetAtomicsMode(g_h, CUBLAS_ATOMICS_ALLOWED));
    BL(cublasGetAtomicsMode(g_h, &am));
    cr_assert_eq(am, CUBLAS_ATOMICS_ALLOWED);
    cudaStream_t st;
    BL(cublasGetStream_v2(g_h, &st));
    cr_assert_eq((CUstream)st, g_stream);

    /* workspace: a handle's own (cuMemAlloc_v2 at create, cuMemFree_v2 at destroy), the caller's */
    fakecuda_counts_t c0, c1;
    fk.get_counts(&c0);
    cublasHandle_t h2;
    BL(cublasCreate_v2(&h2));
    CUdeviceptr ws;
    OK(fk.mem_alloc(&ws, 1024));
    BL(cublasSetWorkspace_v2(h2, (void *)(uintptr_t)ws, 1024));
    unsigned long k0 = fakecublas_kernels_run();
    BL(cublasScopy_v2(h2, NV, F(&b, B_X), 1, F(&b, B_Y), 1)); /* contiguous: a copy, no kernel */
    cr_assert_eq(fakecublas_kernels_run() - k0, 0);
    cr_assert(memcmp(F(&b, B_X), F(&b, B_Y), NV * sizeof(float)) == 0, "the contiguous copy");
    BL(cublasScopy_v2(h2, NV / 2, F(&b, B_X), 2, F(&b, B_Y), 2)); /* strided: the kernel */
    cr_assert_eq(fakecublas_kernels_run() - k0, 1);
    cr_assert_eq(*(unsigned *)(uintptr_t)ws, 1, "the kernel counts its launch in the caller's workspace");
    BL(cublasDestroy_v2(h2));
    fk.get_counts(&c1);
    cr_assert_eq(c1.allocs - c0.allocs, 2, "handle workspace + the caller's");
    cr_assert_eq(c1.frees - c0.frees, 1, "the handle's own workspace, freed when replaced");
    OK(fk.mem_free(ws));
    cr_assert_eq(cublasScopy_v2(h2, NV, F(&b, B_X), 1, F(&b, B_Y), 1), CUBLAS_STATUS_NOT_INITIALIZED,
                 "a destroyed handle");
    cr_assert_eq(fakecublas_workspace_errors(), 0);
}

/* A graph holding a kernel of a destroyed handle is caught by the workspace check. */
Test(runtime_libs, fake_catches_a_destroyed_workspace)
{
    bset_t b;
    bset_alloc(&b);
    cublasHandle_t h2;
    BL(cublasCreate_v2(&h2));
    BL(cublasSetStream_v2(h2, g_streams[1]));
    OK(fk.begin_capture(g_streams[1], CU_STREAM_CAPTURE_MODE_RELAXED));
    BL(cublasScopy_v2(h2, NV / 2, F(&b, B_X), 2, F(&b, B_Y), 2)); /* strided: a kernel */
    CUgraph g;
    OK(fk.end_capture(g_streams[1], &g));
    CUgraphExec x;
    OK(fk.graph_instantiate(&x, g, 0));
    OK(fk.graph_launch(x, g_streams[1]));
    cr_assert_eq(fakecublas_workspace_errors(), 0);
    BL(cublasDestroy_v2(h2));
    OK(fk.graph_launch(x, g_streams[1]));
    cr_assert_eq(fakecublas_workspace_errors(), 1);
    OK(fk.graph_exec_destroy(x));
    OK(fk.graph_destroy(g));
    fakecublas_reset();
}

/* ---------------------------------------------------------------------------------------------
 * cgjit sees the library's driver calls
 * ------------------------------------------------------------------------------------------- */

Test(runtime_libs, library_driver_calls_are_traced)
{
    bset_t b;
    bset_alloc(&b);
    const float two = 2.0f;
    cgj_stats_t st0 = stats_now();
    for (int s = 0; s < 3; s++) {
        begin("saxpy_only");
        BL(cublasSaxpy_v2(g_h, NV, &two, F(&b, B_X), 1, F(&b, B_Y), 1));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    if (cgjit_off()) return;
    cgj_stats_t st1 = stats_now();
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("saxpy_only", &i), CGJ_OK);
    cr_assert_geq(i.ops, 1, "the step holds the library's launch");
    cr_assert_gt(st1.ops_recorded, st0.ops_recorded, "cgjit recorded the library's driver calls");
}

/* ---------------------------------------------------------------------------------------------
 * a. absorb
 * ------------------------------------------------------------------------------------------- */

static void before_first_stream(int s, bset_t *b)
{
    if (s == 0) set_stream(g_streams[0]);
}

Test(runtime_libs, absorb)
{
    const outcome_t *o = run_absorbing("absorb", 1, before_first_stream, mixed_step);
    if (!o) return;
    expect_replaying(o);
    cr_assert_gt(TRACED(o, lib_calls), 0);
    cr_assert_gt(o->calls[0], 0, "the first traced step calls the library");
    expect_quiet_end(o, "all its calls should be absorbed");
    /* Nothing changes from step to step: from the first replay (step 2) on, nothing relearns. */
    expect_absorbed(o, 2, NULL);
    cr_expect_eq(TRACED(o, lib_relearned), 0, "nothing changed, yet %llu calls relearned",
                 (unsigned long long)TRACED(o, lib_relearned));
}

/* ---------------------------------------------------------------------------------------------
 * b. alpha_changes: a host-mode alpha that changes every 5 steps
 * ------------------------------------------------------------------------------------------- */

static float alpha_of(int s)
{
    return 1.0f + 0.25f * (float)(s / 5);
}

static bool alpha_unchanged(int s)
{
    return s % 5 != 0;
}
static bool alpha_changed(int s)
{
    return s % 5 == 0;
}

static void alpha_step(int s, bset_t *b, float *hv)
{
    const float alpha = alpha_of(s), half = 0.5f, quarter = 0.25f;
    BL(cublasSaxpy_v2(g_h, NV, &alpha, F(b, B_X), 1, F(b, B_Y), 1));
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &half, F(b, B_A), GM, F(b, B_B), GK, &quarter,
                      F(b, B_C), GM));
    BL(cublasScopy_v2(g_h, NV, F(b, B_Y), 1, F(b, B_OUT), 1));
}

Test(runtime_libs, alpha_changes)
{
    const outcome_t *o = run_absorbing("alpha", 1, before_first_stream, alpha_step);
    if (!o) return;
    cr_assert_gt(TRACED(o, lib_relearned) + TRACED(o, side_exits), 0);
    expect_ran_every(o, 5, 5, "alpha changed");
    /* Only the Saxpy's key changes, and only on those steps: Sgemm (and its nested Sscal) and
     * Scopy are absorbed throughout, the Saxpy on the other steps. */
    expect_at_most(o, 5, alpha_changed, 1, "more than the Saxpy ran on steps where only its alpha changed");
    expect_absorbed(o, 2, alpha_unchanged);
}

/* ---------------------------------------------------------------------------------------------
 * c. handle_recreate: a new handle every 7 steps
 * ------------------------------------------------------------------------------------------- */

static CUdeviceptr g_hold;

/* Destroy and create the handle; meanwhile a block of the workspace's size holds the freed
 * workspace's address, so that the new handle (often at the old handle's address) gets a
 * workspace elsewhere: a replay using the old one is then caught. */
static void before_recreate(int s, bset_t *b)
{
    if (s == 0) set_stream(g_streams[0]);
    if (s == 0 || s % 7 != 0) return;
    uintptr_t old = (uintptr_t)g_h;
    BL(cublasDestroy_v2(g_h));
    CUdeviceptr hold = g_hold;
    OK(fk.mem_alloc(&g_hold, FAKECUBLAS_WORKSPACE_BYTES));
    BL(cublasCreate_v2(&g_h));
    BL(cublasSetStream_v2(g_h, g_stream));
    if (hold) OK(fk.mem_free(hold));
    if (s == 7)
        cr_log_info("handle_recreate: the new handle %s the old one's address",
                    (uintptr_t)g_h == old ? "has" : "does not have");
}

static bool same_handle(int s)
{
    return s % 7 != 0;
}

Test(runtime_libs, handle_recreate)
{
    const outcome_t *o = run_absorbing("recreate", 1, before_recreate, mixed_step);
    if (!o) return;
    expect_ran_every(o, 7, 7, "first step of a new handle");
    /* The new handle's calls are learned on its first step, absorbed on the next ones. */
    expect_absorbed(o, 2, same_handle);
}

/* ---------------------------------------------------------------------------------------------
 * d. pointers_alternate: two buffer sets by step parity
 * ------------------------------------------------------------------------------------------- */

Test(runtime_libs, pointers_alternate)
{
    const outcome_t *o = run_absorbing("alternate", 2, before_first_stream, mixed_step);
    if (!o) return;
    expect_quiet_end(o, "pointer arguments alone should not stop absorption");
    /* The two parities differ in pointers only, and the first two runs saw both. */
    expect_absorbed(o, 2, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * d2. aliases: the same pointer passed twice, then two pointers, on alternating sets
 * ------------------------------------------------------------------------------------------- */

/* y = 0.25 x + y with x = y for the first half of the steps, then x distinct: a kernel parameter
 * learned while x and y were one pointer must not be replayed from the wrong one afterwards. */
static void alias_step(int s, bset_t *b, float *hv)
{
    (void)hv;
    const float quarter = 0.25f;
    const float *x = s < STEPS / 2 ? F(b, B_Y) : F(b, B_X);
    BL(cublasSaxpy_v2(g_h, NV, &quarter, x, 1, F(b, B_Y), 1));
    BL(cublasScopy_v2(g_h, NV, F(b, B_Y), 1, F(b, B_OUT), 1));
}

Test(runtime_libs, aliases)
{
    const outcome_t *o = run_absorbing("aliases", 2, before_first_stream, alias_step);
    if (!o) return;
    cr_assert_gt(o->calls[STEPS / 2], 0, "the step where x and y part ran no library call: its guard held");
}

/* ---------------------------------------------------------------------------------------------
 * d3. split_k: a GEMM whose library clears C with a memset first, C alternating
 * ------------------------------------------------------------------------------------------- */

static void before_split_k(int s, bset_t *b)
{
    (void)b;
    if (s) return;
    set_stream(g_streams[0]);
    BL(cublasSetAtomicsMode(g_h, CUBLAS_ATOMICS_ALLOWED));
}

/* A = 0.5 A + 1 (a driver launch); C = A B through the fake's split-K path: a memset of C, then
 * a kernel accumulating into it. Replayed without the library, the memset must clear this
 * step's C, not the C of the run it was learned from. */
static void split_k_step(int s, bset_t *b, float *hv)
{
    (void)s, (void)hv;
    const float one = 1.0f, zero = 0.0f;
    OK(fk_axpb_launch(&fk, g_stream, b->p[B_A], 0.5f, 1.0f, GM * GK, 1));
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &one, F(b, B_A), GM, F(b, B_B), GK, &zero, F(b, B_C),
                      GM));
}

Test(runtime_libs, split_k_memset_follows_output)
{
    const outcome_t *o = run_absorbing("split_k", 2, before_split_k, split_k_step);
    if (!o) return;
    expect_absorbed(o, 2, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * d4. two_calls: one step, two library calls with the same arguments but other keys
 * ------------------------------------------------------------------------------------------- */

/* The step is one GEMM: C = A B (split-K: a memset, then the kernel), or C = A B + 0.5 C (the
 * nested Sscal, then the kernel) on one step of four: on set 0 in the first half of the steps,
 * on set 1 after. A replay of the first kind meets a call of the second: the library runs, its
 * first driver call leaves the trace, and the recording that continues holds the second kind's
 * ops. It must also hold the second kind's key, else the first kind's calls would be absorbed
 * with the second kind's kernels; and none of the first kind's learning: the second kind's
 * pointers stay the same until the middle, so the first call on set 1 has new pointers that its
 * group never saw change, and must run the library. */
static bool second_kind(int s)
{
    return s < STEPS / 2 ? s % 4 == 2 : s % 4 == 3;
}

static void before_two_calls(int s, bset_t *b)
{
    before_split_k(s, b);
    OK(fk_axpb_launch(&fk, g_stream, b->p[B_A], 0.5f, 1.0f, GM * GK, 1));
}

static void two_calls_step(int s, bset_t *b, float *hv)
{
    (void)hv;
    const float one = 1.0f, zero = 0.0f, half = 0.5f;
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &one, F(b, B_A), GM, F(b, B_B), GK,
                      second_kind(s) ? &half : &zero, F(b, B_C), GM));
}

Test(runtime_libs, side_exit_in_a_call_keeps_its_key)
{
    const outcome_t *o = run_absorbing("two_calls", 2, before_two_calls, two_calls_step);
    if (!o) return;
    int first_on_set_1 = STEPS / 2 + 1;
    cr_assert(second_kind(first_on_set_1) && first_on_set_1 % 2 == 1);
    cr_assert_geq(o->calls[first_on_set_1], 1, "step %d, the second kind's first call on new pointers, ran no library",
                  first_on_set_1);
    /* Learned on both sets, each kind is absorbed by its own variant, whichever ran before. */
    expect_absorbed(o, first_on_set_1 + 1, NULL);
    cr_assert_eq(TRACED(o, side_exits), 2, "a replay left its trace after both kinds were learned");
}

/* ---------------------------------------------------------------------------------------------
 * e. dot_host: a host-mode dot whose value the host uses
 * ------------------------------------------------------------------------------------------- */

static void dot_step(int s, bset_t *b, float *hv)
{
    const float tenth = 0.1f;
    float r = -1.0f;
    BL(cublasSaxpy_v2(g_h, NV, &tenth, F(b, B_X), 1, F(b, B_Y), 1));
    BL(cublasSdot_v2(g_h, NV, F(b, B_X), 1, F(b, B_Y), 1, &r));
    hv[0] = r;
    /* the host uses the value: y = 0.5 y + r/1000 */
    OK(fk_axpb_launch(&fk, g_stream, b->p[B_Y], 0.5f, r * 1e-3f, NV, 1));
    BL(cublasScopy_v2(g_h, NV, F(b, B_Y), 1, F(b, B_OUT), 1));
}

Test(runtime_libs, dot_host)
{
    const outcome_t *o = run_absorbing("dot_host", 1, before_first_stream, dot_step);
    if (!o) return;
    expect_ran_every(o, 0, 1, "the host-mode dot's value needs a readback");
    for (int s = STEPS - 20; s < STEPS; s++)
        cr_assert_eq(o->calls[s], 1, "step %d: %ld library calls ran; only the dot should", s, o->calls[s]);
    expect_at_most(o, 2, NULL, 1, "more than the dot ran");
}

/* ---------------------------------------------------------------------------------------------
 * f. stream_change: the handle's stream changes every 9 steps
 * ------------------------------------------------------------------------------------------- */

static void before_stream_change(int s, bset_t *b)
{
    if (s % 9 == 0) set_stream(g_streams[(s / 9) % 2]);
}


Test(runtime_libs, stream_change)
{
    const outcome_t *o = run_absorbing("streams", 1, before_stream_change, mixed_step);
    if (!o) return;
    cr_assert_geq(o->calls[9], 1, "step 9, the first on another stream: the library did not run");
    /* Two steps after the first switch the trace knows both streams (a variant per stream), and
     * every later switch is absorbed by the variant of its stream. */
    expect_absorbed(o, 11, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * f2. settings_again: the stream and workspace set again before every call, as PyTorch does
 * ------------------------------------------------------------------------------------------- */

static CUdeviceptr g_ws;

static void settings_again_step(int s, bset_t *b, float *hv)
{
    /* Setting the stream resets the workspace; setting the workspace back leaves the handle as
     * it was: the calls after it are the same calls, absorbed. */
    BL(cublasSetStream_v2(g_h, g_stream));
    BL(cublasSetWorkspace_v2(g_h, (void *)(uintptr_t)g_ws, 4096));
    mixed_step(s, b, hv);
}

Test(runtime_libs, settings_set_again_keep_calls_absorbed)
{
    OK(fk.mem_alloc(&g_ws, 4096));
    const outcome_t *o = run_absorbing("settings_again", 1, before_first_stream, settings_again_step);
    if (!o) return;
    expect_replaying(o);
    expect_absorbed(o, 2, NULL);
    cr_expect_eq(TRACED(o, lib_relearned), 0, "the same settings, yet %llu calls relearned",
                 (unsigned long long)TRACED(o, lib_relearned));
}

/* Another workspace every 4th step: the handle is not as it was, its calls run the library. */
static void workspace_moves_step(int s, bset_t *b, float *hv)
{
    BL(cublasSetWorkspace_v2(g_h, (void *)(uintptr_t)(g_ws + (s % 4 == 3 ? 2048 : 0)), 2048));
    mixed_step(s, b, hv);
}

Test(runtime_libs, another_workspace_runs_the_library)
{
    OK(fk.mem_alloc(&g_ws, 4096));
    const outcome_t *o = run_absorbing("workspace_moves", 1, before_first_stream, workspace_moves_step);
    if (!o) return;
    expect_ran_every(o, 3, 4, "a step with another workspace");
}

/* ---------------------------------------------------------------------------------------------
 * g. error_status: a call with n = -1 inside the step
 * ------------------------------------------------------------------------------------------- */

static void error_step(int s, bset_t *b, float *hv)
{
    const float two = 2.0f, half = 0.5f, quarter = 0.25f;
    BL(cublasSaxpy_v2(g_h, NV, &two, F(b, B_X), 1, F(b, B_Y), 1));
    cublasStatus_t st = cublasSaxpy_v2(g_h, -1, &two, F(b, B_Y), 1, F(b, B_X), 1);
    cr_assert_eq(st, CUBLAS_STATUS_INVALID_VALUE, "step %d: Saxpy with n = -1 returned %d", s, (int)st);
    st = cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, -1, GN, GK, &half, F(b, B_A), GM, F(b, B_B), GK, &quarter,
                        F(b, B_C), GM);
    cr_assert_eq(st, CUBLAS_STATUS_INVALID_VALUE, "step %d: Sgemm with m = -1 returned %d", s, (int)st);
    OK(fk_axpb_launch(&fk, g_stream, b->p[B_X], 0.5f, 1.0f, NV, 1));
    BL(cublasScopy_v2(g_h, NV, F(b, B_Y), 1, F(b, B_OUT), 1));
}

Test(runtime_libs, error_status)
{
    const outcome_t *o = run_absorbing("error", 1, before_first_stream, error_step);
    if (!o) return;
    expect_replaying(o);
    cr_assert_gt(TRACED(o, lib_calls), 0);
    /* The valid calls are absorbed; the failing ones may run (their status is the library's). */
    expect_at_most(o, 2, NULL, 2, "more than the two failing calls ran; the valid Saxpy and Scopy should be absorbed");
}

/* ---------------------------------------------------------------------------------------------
 * h. device_mode: scalars and the dot result in device memory
 * ------------------------------------------------------------------------------------------- */

static void before_device(int s, bset_t *b)
{
    if (s == 0) {
        set_stream(g_streams[0]);
        BL(cublasSetPointerMode_v2(g_h, CUBLAS_POINTER_MODE_DEVICE));
    }
    float beta = 0.5f + 0.0625f * (float)(s % 3); /* written between steps */
    OK(fk.htod(b->p[B_BETA], &beta, sizeof beta));
}

static void device_step(int s, bset_t *b, float *hv)
{
    OK(fk_axpb_launch(&fk, g_stream, b->p[B_ALPHA], 1.0f, 0.125f, 1, 1)); /* alpha += 1/8 on the device */
    BL(cublasSaxpy_v2(g_h, NV, F(b, B_ALPHA), F(b, B_X), 1, F(b, B_Y), 1));
    BL(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_T, GM, GN, GK, F(b, B_ALPHA), F(b, B_A), GM, F(b, B_B), GN,
                      F(b, B_BETA), F(b, B_C), GM));
    BL(cublasSdot_v2(g_h, NV, F(b, B_X), 1, F(b, B_Y), 1, F(b, B_RES)));
    BL(cublasSscal_v2(g_h, NV, F(b, B_BETA), F(b, B_Y), 1));
    BL(cublasScopy_v2(g_h, NV, F(b, B_Y), 1, F(b, B_OUT), 1));
}

Test(runtime_libs, device_mode)
{
    const outcome_t *o = run_absorbing("device", 1, before_device, device_step);
    if (!o) return;
    expect_replaying(o);
    expect_quiet_end(o, "device-mode calls need no host values");
    expect_absorbed(o, 2, NULL);
}

/* CGJIT_LIBS=0: library calls are never absorbed; the library runs on every step and its
 * kernels still replay from the graph, with the same results. */
static void setup_libs_off(void)
{
    setenv("CGJIT_LIBS", "0", 1);
    setup();
}

/* A suite of its own: the variable must be set before cgjit starts, that is before setup(). */
TestSuite(runtime_libs_off);

Test(runtime_libs_off, absorb, .init = setup_libs_off)
{
    const outcome_t *o = run_scenario("libs_off", 1, before_first_stream, mixed_step);
    if (!o) return;
    expect_replaying(o);
    cr_assert_eq(TRACED(o, lib_absorbed), 0, "%llu library calls absorbed with CGJIT_LIBS=0",
                 (unsigned long long)TRACED(o, lib_absorbed));
    cr_assert_gt(calls_between(o, STEPS - 20, STEPS), 0, "the library did not run in the last steps");
}

/* ---------------------------------------------------------------------------------------------
 * own_samples: variants learned from recordings that continue replays
 * ------------------------------------------------------------------------------------------- */

/* y += 2x (absorbed once learned); from the middle on, a driver kernel after it: replays of the
 * first variant leave their trace past its end, and the recordings that continue them hold the
 * Saxpy's group as replay filled it in, not as the library issued it. The variant built from
 * them must not take that for a sample of the library: its group is learned from the library's
 * own runs, never from cgjit's (the first variant, learned from the library, absorbs the call). */
static void own_samples_step(int s, bset_t *b, float *hv)
{
    (void)hv;
    const float two = 2.0f;
    BL(cublasSaxpy_v2(g_h, NV, &two, F(b, B_X), 1, F(b, B_Y), 1));
    if (s >= STEPS / 2) OK(fk_axpb_launch(&fk, g_stream, b->p[B_Y], 0.5f, 1.0f, NV, 1));
}

Test(runtime_libs, continued_recordings_are_no_sample_of_the_library)
{
    const outcome_t *o = run_absorbing("own_samples", 1, before_first_stream, own_samples_step);
    if (!o) return;
    char *buf = fk_report_text();
    cr_assert(buf);
    const char *v2 = strstr(buf, "    variant 2: ");
    cr_assert(v2, "no second variant:\n%s", buf);
    const char *calls = strstr(v2, "library calls: ");
    cr_assert(calls && strncmp(calls, "library calls: 1, 0 absorbed", 28) == 0,
              "the variant learned from continued recordings absorbs its call:\n%s", buf);
    cr_assert(strstr(buf, "LIB_OWN_SAMPLE"), "the report does not say why:\n%s", buf);
    free(buf);
}
