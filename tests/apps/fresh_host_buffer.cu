/*
 * fresh_host_buffer — host buffers that live for one iteration: a program that mallocs its
 * staging buffer, fills it, copies it to the device and frees it, every iteration (as a data
 * loader handing out freshly allocated batches does), and that now and then allocates a pinned
 * buffer for one asynchronous upload and frees it once the stream is synchronized.
 *
 * Each iteration:
 *  - big = malloc(NBIG floats) (160 KiB, above glibc's mmap threshold, which the program fixes
 *    with mallopt so that glibc does not raise it: a fresh mapping every time, unmapped by
 *    free), filled, cudaMemcpy to d_big, free(big);
 *  - small = malloc(a size that changes every iteration, so the heap hands out different
 *    addresses), filled, cudaMemcpy of NSMALL floats to d_small, free(small);
 *  - every PIN_EVERY-th iteration: cudaMallocHost(NPIN floats), filled, cudaMemcpyAsync to d_pin;
 *    the pinned buffer is freed after the iteration's synchronization;
 *  - 3 kernels fold d_big, d_small and d_pin into x; a checksum; cudaMemcpyAsync of the checksum
 *    into pinned memory and cudaStreamSynchronize.
 * Everything runs on the legacy stream. Prints the checksum every iteration. The buffers'
 * contents come from a fixed-seed generator.
 */
#include "apps_common.h"

#include <malloc.h>

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 400, TIMED_LAST = 200, PIN_EVERY = 8 };
enum { NBIG = 40960, NSMALL = 1000, NPIN = 40960 };

__global__ void fold_big(float *x, const float *big, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int j = i; j < NBIG; j += n) s += big[j]; /* 10 values per element, in order */
        x[i] = 0.9f * x[i] + 0.1f * s;
    }
}

__global__ void fold_small(float *x, const float *small, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = x[i] * (1.0f + 0.01f * small[i % NSMALL]);
}

__global__ void fold_pin(float *x, const float *pin, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = x[i] - 0.05f * pin[(i * 13) % NPIN];
}

/* n floats in [-1, 1) from one draw of the generator (cheap: the host's share of an iteration
 * stays small next to the copies). */
static void fill(float *p, size_t n, uint64_t *rng)
{
    uint32_t h = (uint32_t)app_rng_next(rng);
    for (size_t i = 0; i < n; i++) {
        h = h * 1664525u + 1013904223u;
        p[i] = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

/* malloc(bytes), n floats filled. */
static float *fresh_filled(size_t bytes, size_t n, uint64_t *rng)
{
    float *p = (float *)malloc(bytes);
    if (!p) {
        fprintf(stderr, "fresh_host_buffer: out of host memory\n");
        exit(1);
    }
    fill(p, n, rng);
    return p;
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 2718;
    app_fill_uniform(h_x, NFLOAT, &rng, -1.0f, 1.0f);

    /* A fixed threshold: every allocation above it is its own mapping, made by malloc and
     * unmapped by free (glibc would otherwise raise the threshold after the first free). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    float *d_x, *d_big, *d_small, *d_pin;
    unsigned long long *d_sum, *h_sum;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_big, NBIG * sizeof(float)));
    CHECK(cudaMalloc(&d_small, NSMALL * sizeof(float)));
    CHECK(cudaMalloc(&d_pin, NPIN * sizeof(float)));
    CHECK(cudaMalloc(&d_sum, sizeof *d_sum));
    CHECK(cudaMallocHost(&h_sum, sizeof *h_sum));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_pin, 0, NPIN * sizeof(float)));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        float *big = fresh_filled(NBIG * sizeof(float), NBIG, &rng);
        CHECK(cudaMemcpy(d_big, big, NBIG * sizeof(float), cudaMemcpyHostToDevice));
        free(big);
        size_t small_bytes = NSMALL * sizeof(float) + (size_t)(it % 16) * 48;
        float *small = fresh_filled(small_bytes, NSMALL, &rng);
        CHECK(cudaMemcpy(d_small, small, NSMALL * sizeof(float), cudaMemcpyHostToDevice));
        free(small);
        float *pin = NULL;
        if (it % PIN_EVERY == 0) {
            CHECK(cudaMallocHost(&pin, NPIN * sizeof(float)));
            fill(pin, NPIN, &rng);
            CHECK(cudaMemcpyAsync(d_pin, pin, NPIN * sizeof(float), cudaMemcpyHostToDevice, 0));
        }
        fold_big<<<GRID, BLOCK>>>(d_x, d_big, NFLOAT);
        fold_small<<<GRID, BLOCK>>>(d_x, d_small, NFLOAT);
        fold_pin<<<GRID, BLOCK>>>(d_x, d_pin, NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, d_sum);
        CHECK_LAST();
        CHECK(cudaMemcpyAsync(h_sum, d_sum, sizeof *h_sum, cudaMemcpyDeviceToHost, 0));
        CHECK(cudaStreamSynchronize(0));
        if (pin) CHECK(cudaFreeHost(pin));
        t_us[it] = app_now_us() - t0;

        printf("iter %3d%s sum=%016llx\n", it, pin ? " pinned" : "", *h_sum);
    }

    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_big));
    CHECK(cudaFree(d_small));
    CHECK(cudaFree(d_pin));
    CHECK(cudaFree(d_sum));
    CHECK(cudaFreeHost(h_sum));
    app_report_time("fresh_host_buffer", t_us, ITERS, TIMED_LAST);
    return 0;
}
