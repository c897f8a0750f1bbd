/*
 * cuda_check.h — what the CUDA programs of the bench (bench/) and of the GPU tests (tests/gpu/)
 * share: the checks of CUDA runtime and library calls, and the fixed-seed random generator of
 * their initial data. Header-only, for C and CUDA C++; it depends on the CUDA runtime's header
 * alone (not on cgjit). Included by relative path: "../tests/common/cuda_check.h" from bench/,
 * "../common/cuda_check.h" from tests/gpu/.
 *
 * CHECK(call)         a CUDA runtime call that must return cudaSuccess
 * CHECK_LAST()        a launch's configuration error, or an asynchronous error of earlier work
 * CHECK_CUBLAS(call)  a cuBLAS or cuBLASLt call that must return CUBLAS_STATUS_SUCCESS
 * CHECK_CUDNN(call)   a cuDNN call that must return CUDNN_STATUS_SUCCESS
 * CHECK_STATUS(type, ok, to_string, text, call)  any call returning a status of `type` that
 *                     must equal `ok`; `to_string(status)` describes a failure, and `text` is
 *                     the call as the message names it (#call in the macro that wraps it, so
 *                     that the call is named as written, before macros such as cublas_v2.h's
 *                     cublasCreate -> cublasCreate_v2 are expanded)
 *
 * CHECK_CUBLAS and CHECK_CUDNN expand only where used: include cublas_v2.h or cudnn.h first.
 * A failed check calls CUDA_CHECK_FAIL(file, line, call, what, detail): call is the call's text,
 * what the error's or status's description, detail the error's name (CUDA) or the status's
 * number (libraries). By default that is cuda_check_exit(): the line
 * `file:line: call: what (detail)` on stderr, exit status 1. A program that ends differently
 * defines CUDA_CHECK_FAIL, a function or function-like macro of those five arguments that does
 * not return, before the include.
 *
 * rng_uniform / rng_fill_uniform: xorshift64*, floats uniform in [lo, hi) on a 2^-24 grid of the
 * range, the same on every run and every machine for a given seed.
 */
#ifndef CGJ_TEST_CUDA_CHECK_H
#define CGJ_TEST_CUDA_CHECK_H

#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The default end of a failed check. */
static inline __attribute__((noreturn)) void cuda_check_exit(const char *file, int line, const char *call,
                                                             const char *what, const char *detail)
{
    fprintf(stderr, "%s:%d: %s: %s (%s)\n", file, line, call, what, detail);
    exit(1);
}

#ifndef CUDA_CHECK_FAIL
#define CUDA_CHECK_FAIL cuda_check_exit
#endif

#define CHECK(call)                                                                                       \
    do {                                                                                                  \
        cudaError_t err_ = (call);                                                                        \
        if (err_ != cudaSuccess)                                                                          \
            CUDA_CHECK_FAIL(__FILE__, __LINE__, #call, cudaGetErrorString(err_), cudaGetErrorName(err_)); \
    } while (0)

#define CHECK_LAST() CHECK(cudaGetLastError())

#define CHECK_STATUS(status_t, ok, to_string, text, call)                     \
    do {                                                                      \
        status_t st_ = (call);                                                \
        if (st_ != (ok)) {                                                    \
            char code_[16];                                                   \
            snprintf(code_, sizeof code_, "%d", (int)st_);                    \
            CUDA_CHECK_FAIL(__FILE__, __LINE__, text, to_string(st_), code_); \
        }                                                                     \
    } while (0)

#define CHECK_CUBLAS(call) CHECK_STATUS(cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublasGetStatusString, #call, call)
#define CHECK_CUDNN(call) CHECK_STATUS(cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnnGetErrorString, #call, call)

/* xorshift64*: advances *state; a float uniform in [lo, hi). */
static inline float rng_uniform(uint64_t *state, float lo, float hi)
{
    uint64_t x = *state;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *state = x;
    float u = (float)((x * 0x2545f4914f6cdd1dull) >> 40) / (float)(1u << 24); /* [0, 1) */
    return lo + (hi - lo) * u;
}

/* n floats uniform in [lo, hi), continuing from *state. */
static inline void rng_fill_uniform(float *v, size_t n, uint64_t *state, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) v[i] = rng_uniform(state, lo, hi);
}

#endif /* CGJ_TEST_CUDA_CHECK_H */
