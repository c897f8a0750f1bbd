/*
 * test_libs_auto.c — library calls in a loop that has no markers, stepped by CGJIT_STEP=auto:
 * the cycle detector must see a library call as one call whether it runs or replay absorbs it
 * whole, and no step may begin or end inside a library call. The same loop runs in two child
 * processes, one with cgjit disabled and one with CGJIT_STEP=auto, and every iteration's
 * results must be bitwise equal.
 */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "fakeapp.h"
#include "fakecublas.h"

enum { ITERS = 80, NV = 64, GM = 12, GN = 8, GK = 10 };

static fk_t fk;

#define F(p) ((float *)(uintptr_t)(p)) /* the fake's device memory is host memory */

/* The loop, as a program without markers writes it; each iteration's C and y go to `out`. */
static int run_loop(float (*out)[GM * GN + NV])
{
    fk_open(&fk);
    cublasHandle_t h;
    CUstream s;
    if (fk.stream_create(&s, 0) != CUDA_SUCCESS || cublasCreate_v2(&h) != CUBLAS_STATUS_SUCCESS) return 1;
    fakecublas_reset(); /* a call of the fake's own keeps it linked ahead of any real cuBLAS */
    if (cublasSetStream_v2(h, s) != CUBLAS_STATUS_SUCCESS) return 2;
    CUdeviceptr x = fk_alloc_floats(&fk, NV, 1), y = fk_alloc_floats(&fk, NV, 2);
    CUdeviceptr a = fk_alloc_floats(&fk, GM * GK, 3), b = fk_alloc_floats(&fk, GK * GN, 4);
    CUdeviceptr c = fk_alloc_floats(&fk, GM * GN, 5);
    const float two = 2.0f, half = 0.5f, quarter = 0.25f;
    for (int it = 0; it < ITERS; it++) {
        if (cublasSaxpy_v2(h, NV, &two, F(x), 1, F(y), 1) != CUBLAS_STATUS_SUCCESS) return 3;
        if (fk_axpb_launch(&fk, s, x, 0.5f, 1.0f, NV, 1) != CUDA_SUCCESS) return 4;
        if (cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &half, F(a), GM, F(b), GK, &quarter, F(c), GM) !=
            CUBLAS_STATUS_SUCCESS)
            return 5;
        if (cublasSscal_v2(h, NV, &half, F(y), 1) != CUBLAS_STATUS_SUCCESS) return 6;
        if (fk.stream_sync(s) != CUDA_SUCCESS) return 7;
        if (fk.dtoh(out[it], c, GM * GN * sizeof(float)) != CUDA_SUCCESS) return 8;
        if (fk.dtoh(out[it] + GM * GN, y, NV * sizeof(float)) != CUDA_SUCCESS) return 9;
    }
    return 0;
}

static int loop(void *out)
{
    return run_loop(out);
}

/* Run the loop in a child with the given environment (child.h). */
static void run_child(const char *disable, const char *step, const char *learned, float (*out)[GM * GN + NV],
                      cgj_stats_t *st)
{
    const char *env[] = {"CGJIT_DISABLE", disable, "CGJIT_STEP", step, "CGJIT_LIBS_LEARNED", learned, NULL};
    child_run(env, loop, out, sizeof(float) * ITERS * (GM * GN + NV), st);
}

Test(runtime_libs_auto, library_calls_in_an_unmarked_loop)
{
    static float eager[ITERS][GM * GN + NV], traced[ITERS][GM * GN + NV];
    cgj_stats_t se, st;
    run_child("0", "off", "0", eager, &se);
    /* By default the library runs on every call; under CGJIT_LIBS_LEARNED replay skips it. */
    for (int learned = 0; learned < 2; learned++) {
        run_child("0", "auto", learned ? "1" : "0", traced, &st);
        for (int it = 0; it < ITERS; it++)
            cr_assert(memcmp(eager[it], traced[it], sizeof eager[it]) == 0, "iteration %d differs", it);
        cr_assert_gt(st.steps_replayed, ITERS / 2, "replayed %llu steps", (unsigned long long)st.steps_replayed);
        if (learned) cr_assert_gt(st.lib_absorbed, 0, "no library call was absorbed whole");
        else cr_assert_eq(st.lib_absorbed, 0, "library calls were absorbed whole by default");
    }
}
