/*
 * test_libs_hidden.c — a library with state cgjit cannot see: replay must stay equal to eager.
 *
 * The fake cuBLAS runs with its hidden state on (fakecublas_set_heuristics): a GEMM's algorithm
 * depends on the shapes its handle ran before, and a split-K GEMM leaves a workspace semaphore
 * that only the library knows to clear. The loop is a training loop with a sample in the middle,
 * as llm.c's trainer makes one: steps of GEMMs and kernels, marked with cgj_trace_begin/end, and
 * after step SAMPLE_AT, outside any step, one GEMM of another shape with a long k. From then on
 * the library picks another algorithm and clears the semaphore once: what the two recorded runs
 * showed is no longer what the library does.
 *
 * Each configuration runs in a child process (cgjit reads its variables once), and every
 * step's results are compared bitwise with the eager child's:
 *  - the default (the library runs on every call): equal;
 *  - CGJIT_LIBS_LEARNED=1 (absorb whole on learned evidence): differs after the sample, which
 *    is why it is not the default, and what makes this test fail if it ever becomes one;
 *  - CGJIT_LIBS_LEARNED=1 CGJIT_VERIFY=1: the verify mode reports the divergence, and the
 *    program still sees eager results.
 */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "fakeapp.h"
#include "fakecublas.h"

enum { ITERS = 48, SAMPLE_AT = 20, GM = 12, GN = 8, GK = 10, SK = 2 * FAKECUBLAS_SPLIT_K, NV = 64 };
enum { OUT = 2 * GM * GN + NV };

static fk_t fk;

#define F(p) ((float *)(uintptr_t)(p)) /* the fake's device memory is host memory */

/* A with terms of very different sizes, so that summing in another order rounds differently. */
static void fill_a(CUdeviceptr a, int n)
{
    for (int i = 0; i < n; i++) F(a)[i] = (i % 3 == 0 ? 3.0e7f : 0.37f) * (float)(1 + i % 7) * (i % 2 ? -1.0f : 1.0f);
}

/* The loop; each step's two GEMM results and y go to out[step]. */
static int run_loop(float (*out)[OUT])
{
    fk_open(&fk);
    cublasHandle_t h;
    CUstream s;
    if (fk.stream_create(&s, 0) != CUDA_SUCCESS || cublasCreate_v2(&h) != CUBLAS_STATUS_SUCCESS) return 1;
    fakecublas_set_heuristics(1);
    if (cublasSetStream_v2(h, s) != CUBLAS_STATUS_SUCCESS) return 2;
    CUdeviceptr a = fk_alloc_floats(&fk, GM * SK, 3), b = fk_alloc_floats(&fk, SK * GN, 4);
    CUdeviceptr c1 = fk_alloc_floats(&fk, GM * GN, 5), c2 = fk_alloc_floats(&fk, GM * GN, 6);
    CUdeviceptr y = fk_alloc_floats(&fk, NV, 7), big = fk_alloc_floats(&fk, GM * GN, 8);
    fill_a(a, GM * SK);
    const float one = 1.0f, half = 0.5f, zero = 0.0f;
    for (int it = 0; it < ITERS; it++) {
        int r = cgj_trace_begin("hidden_state_step");
        if (r != CGJ_OK && r != CGJ_ERR_DISABLED) return 3;
        if (fk_axpb_launch(&fk, s, y, 0.5f, 1.0f, NV, 1) != CUDA_SUCCESS) return 4;
        if (cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &one, F(a), GM, F(b), GK, &zero, F(c1), GM))
            return 5;
        if (fk_axpb_launch(&fk, s, y, 0.25f, 2.0f, NV, 1) != CUDA_SUCCESS) return 6;
        if (cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, GM, GN, GK, &half, F(a), GK, F(b), GK, &zero, F(c2), GM))
            return 7;
        if (fk_axpb_launch(&fk, s, y, 2.0f, -1.0f, NV, 1) != CUDA_SUCCESS) return 8;
        if (cgj_trace_end() != CGJ_OK && r == CGJ_OK) return 9; /* a disabled step pairs too */
        if (fk.stream_sync(s) != CUDA_SUCCESS) return 10;
        if (fk.dtoh(out[it], c1, GM * GN * sizeof(float)) != CUDA_SUCCESS ||
            fk.dtoh(out[it] + GM * GN, c2, GM * GN * sizeof(float)) != CUDA_SUCCESS ||
            fk.dtoh(out[it] + 2 * GM * GN, y, NV * sizeof(float)) != CUDA_SUCCESS)
            return 11;
        /* The sample: another shape, a long k (split-K), outside any step. */
        if (it == SAMPLE_AT &&
            cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, SK, &one, F(a), GM, F(b), SK, &zero, F(big), GM))
            return 12;
    }
    return 0;
}

typedef struct child_env {
    const char *disable, *learned, *verify;
} child_env_t;

static int loop(void *out)
{
    return run_loop(out);
}

/* Run the loop in a child with the given environment (child.h). */
static void run_child(child_env_t env, float (*out)[OUT], cgj_stats_t *st)
{
    const char *vars[] = {"CGJIT_DISABLE", env.disable, "CGJIT_LIBS_LEARNED", env.learned, "CGJIT_VERIFY",
                          env.verify,      NULL};
    child_run(vars, loop, out, sizeof(float) * ITERS * OUT, st);
}

/* The first step whose results differ between a and b, or -1. */
static int first_difference(float (*a)[OUT], float (*b)[OUT])
{
    for (int it = 0; it < ITERS; it++)
        if (memcmp(a[it], b[it], sizeof a[it])) return it;
    return -1;
}

static float g_eager[ITERS][OUT], g_traced[ITERS][OUT];

static void eager(void)
{
    cgj_stats_t st;
    run_child((child_env_t){"1", "0", "0"}, g_eager, &st);
    /* The hidden state shows: the same inputs give other bits after the sample. */
    cr_assert(memcmp(g_eager[SAMPLE_AT], g_eager[SAMPLE_AT + 1], GM * GN * sizeof(float)) != 0,
              "the fake's hidden state changed nothing");
}

TestSuite(runtime_libs_hidden, .timeout = 60);

Test(runtime_libs_hidden, the_library_runs_every_call_by_default)
{
    cgj_stats_t st;
    eager();
    run_child((child_env_t){"0", "0", "0"}, g_traced, &st);
    int d = first_difference(g_eager, g_traced);
    cr_assert_eq(d, -1, "step %d differs from eager", d);
    cr_assert_gt(st.steps_replayed, ITERS / 2, "replayed %llu steps", (unsigned long long)st.steps_replayed);
    cr_assert_eq(st.lib_absorbed, 0, "%llu library calls skipped by default", (unsigned long long)st.lib_absorbed);
    cr_assert_gt(st.lib_calls, 0);
}

Test(runtime_libs_hidden, learned_absorption_is_wrong_after_the_sample)
{
    cgj_stats_t st;
    eager();
    run_child((child_env_t){"0", "1", "0"}, g_traced, &st);
    int d = first_difference(g_eager, g_traced);
    cr_assert_gt(st.lib_absorbed, 0, "CGJIT_LIBS_LEARNED absorbed no call whole");
    cr_assert_eq(d, SAMPLE_AT + 1, "learned absorption first differs at step %d (the sample is after step %d)", d,
                 SAMPLE_AT);
}

/* --verify on the unsafe path: the divergence is found and reported, and the program still sees
 * what eager execution computes. */
Test(runtime_libs_hidden, verify_finds_the_learned_divergence)
{
    cgj_stats_t st;
    eager();
    run_child((child_env_t){"0", "1", "1"}, g_traced, &st);
    int d = first_difference(g_eager, g_traced);
    cr_assert_eq(d, -1, "under CGJIT_VERIFY step %d differs from eager", d);
    cr_assert_gt(st.verify_segments, 0, "no graph was checked");
    cr_assert_gt(st.verify_divergences, 0, "the divergence after the sample was not found (%llu graphs checked)",
                 (unsigned long long)st.verify_segments);
}

/* --verify on the default path: every graph checked, none differs. */
Test(runtime_libs_hidden, verify_finds_nothing_on_the_default_path)
{
    cgj_stats_t st;
    eager();
    run_child((child_env_t){"0", "0", "1"}, g_traced, &st);
    int d = first_difference(g_eager, g_traced);
    cr_assert_eq(d, -1, "under CGJIT_VERIFY step %d differs from eager", d);
    cr_assert_gt(st.verify_segments, ITERS / 2, "%llu graphs checked", (unsigned long long)st.verify_segments);
    cr_assert_eq(st.verify_divergences, 0, "%llu divergences on the safe path",
                 (unsigned long long)st.verify_divergences);
    cr_assert_eq(st.verify_unchecked, 0, "%llu graphs unchecked", (unsigned long long)st.verify_unchecked);
}
