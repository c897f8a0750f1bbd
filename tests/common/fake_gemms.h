/*
 * fake_gemms.h — a step made mostly of library calls, on the fake cuBLAS: FK_GEMMS calls of
 * cublasSgemm_v2 (small matrices, beta 0), each followed by a kernel of the program's on its
 * result. tests/runtime/lib_cost_app.c times it, test_libs_chunks.c chunks it.
 */
#ifndef CGJ_TEST_FAKE_GEMMS_H
#define CGJ_TEST_FAKE_GEMMS_H

#include "fakeapp.h"
#include <cublas_v2.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define FK_GEMMS_MAX 16
#define FK_GEMM_M 8 /* C is M x M, A is M x K, B is K x M (column-major) */
#define FK_GEMM_K 4

typedef struct {
    CUdeviceptr a, b, c[FK_GEMMS_MAX];
    int n;
} fk_gemms_t;

/* Buffers for n GEMMs (at most FK_GEMMS_MAX), from the same initial data every time. */
static inline void fk_gemms_init(fk_t *fk, fk_gemms_t *g, int n)
{
    g->n = n;
    g->a = fk_alloc_floats(fk, FK_GEMM_M * FK_GEMM_K, 1);
    g->b = fk_alloc_floats(fk, FK_GEMM_K * FK_GEMM_M, 2);
    for (int i = 0; i < n; i++) g->c[i] = fk_alloc_floats(fk, FK_GEMM_M * FK_GEMM_M, 3 + i);
}

/* Step s: each GEMM writes its C from A and B, then the program's kernel scales it. False where a
 * call failed. */
static inline bool fk_gemms_step(fk_t *fk, cublasHandle_t h, const fk_gemms_t *g, int s)
{
    const float alpha = 1.0f + (float)(s % 3), beta = 0.0f;
    for (int i = 0; i < g->n; i++) {
        if (cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, FK_GEMM_M, FK_GEMM_M, FK_GEMM_K, &alpha,
                           (const float *)(uintptr_t)g->a, FK_GEMM_M, (const float *)(uintptr_t)g->b, FK_GEMM_K, &beta,
                           (float *)(uintptr_t)g->c[i], FK_GEMM_M) != CUBLAS_STATUS_SUCCESS ||
            fk_axpb_launch(fk, NULL, g->c[i], 0.5f, (float)i, FK_GEMM_M * FK_GEMM_M, 1) != CUDA_SUCCESS)
            return false;
    }
    return true;
}

/* Do the two sets hold the same results? */
static inline bool fk_gemms_same(fk_t *fk, const fk_gemms_t *x, const fk_gemms_t *y)
{
    for (int i = 0; i < x->n; i++) {
        float hx[FK_GEMM_M * FK_GEMM_M], hy[FK_GEMM_M * FK_GEMM_M];
        if (fk->dtoh(hx, x->c[i], sizeof hx) != CUDA_SUCCESS || fk->dtoh(hy, y->c[i], sizeof hy) != CUDA_SUCCESS ||
            memcmp(hx, hy, sizeof hx))
            return false;
    }
    return true;
}

#endif /* CGJ_TEST_FAKE_GEMMS_H */
