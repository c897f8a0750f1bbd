/*
 * apps_common.h — what the sample programs of tests/apps share: error checking, a fixed-seed
 * random generator, a deterministic device checksum, and timing.
 *
 * The programs are ordinary CUDA programs: they know nothing of cgjit (no header, no markers)
 * and are run unmodified, with and without `LD_PRELOAD=libcgjit.so` (scripts/apps-check.sh).
 * Their stdout must be byte-identical in both runs, so everything printed there is exact:
 * floats as %a hex-floats, checksums as hex bit patterns, nothing timing- or address-dependent.
 * Timings go to stderr only, as one line "<app>: median_us=<x>" (the median per-iteration wall
 * time over the last iterations), which scripts/apps-check.sh reads.
 *
 * Checksums are integer sums (order-independent, so bitwise deterministic for any schedule of
 * threads) of a mix of each float's bit pattern and its index: a single changed bit anywhere
 * changes the checksum.
 */
#ifndef APPS_COMMON_H
#define APPS_COMMON_H

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                                      \
    do {                                                                                                 \
        cudaError_t err_ = (call);                                                                       \
        if (err_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_), \
                    cudaGetErrorName(err_));                                                             \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

/* A launch error (bad configuration) or an asynchronous error of earlier work. Launch errors
 * stay the "last error" until read, so one check after a batch of launches catches them all. */
#define CHECK_LAST() CHECK(cudaGetLastError())

/* A cuBLAS call's status (in the programs that include cublas_v2.h). */
#define CHECK_CUBLAS(call)                                                                                            \
    do {                                                                                                              \
        cublasStatus_t st_ = (call);                                                                                  \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                           \
            fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call, cublasGetStatusString(st_), (int)st_); \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

/* splitmix64: the fixed-seed generator of every program (host side). */
static inline uint64_t app_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A float uniform in [lo, hi), never exactly 0 for lo > 0. */
static inline float app_rng_float(uint64_t *state, float lo, float hi)
{
    float u = (float)(app_rng_next(state) >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
    return lo + (hi - lo) * u;
}

static inline void app_fill_uniform(float *h, size_t n, uint64_t *state, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) h[i] = app_rng_float(state, lo, hi);
}

/* The same mixer on both sides: a 64-bit hash of a value and a salt. */
__host__ __device__ static inline uint64_t app_mix64(uint64_t x, uint64_t salt)
{
    x ^= salt * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 33)) * 0xFF51AFD7ED558CCDull;
    x = (x ^ (x >> 33)) * 0xC4CEB9FE1A85EC53ull;
    return x ^ (x >> 33);
}

/* Host checksum of n floats, equal to app_checksum_kernel's for the same data. */
static inline uint64_t app_checksum_host(const float *x, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        sum += app_mix64(bits, i);
    }
    return sum;
}

/* *out = sum over i of app_mix64(bits(x[i]), i), mod 2^64. Launch with one block of
 * APP_CHECKSUM_THREADS threads: it writes *out itself, so no memset is needed before it. */
enum { APP_CHECKSUM_THREADS = 256 };
__global__ void app_checksum_kernel(const float *x, int n, unsigned long long *out)
{
    __shared__ unsigned long long part[APP_CHECKSUM_THREADS];
    unsigned long long sum = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += app_mix64(__float_as_uint(x[i]), (uint64_t)i);
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = part[0];
}

static inline double app_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static inline int app_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the last `last` of n samples (all of them if fewer); sorts that tail. */
static inline double app_median_tail(double *t, int n, int last)
{
    int k = n < last ? n : last;
    if (k <= 0) return 0.0;
    double *tail = t + (n - k);
    qsort(tail, (size_t)k, sizeof *tail, app_cmp_double);
    return k % 2 ? tail[k / 2] : 0.5 * (tail[k / 2 - 1] + tail[k / 2]);
}

/* The timing line on stderr that scripts/apps-check.sh reads. */
static inline void app_report_time(const char *app, double *t, int n, int last)
{
    fprintf(stderr, "%s: median_us=%.1f\n", app, app_median_tail(t, n, last));
}

#endif /* APPS_COMMON_H */
