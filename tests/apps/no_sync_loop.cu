/*
 * no_sync_loop — a loop with no host synchronization at all: 300 iterations of 100 kernels on
 * one created stream, then a single cudaDeviceSynchronize and readback at the very end. Only a
 * step policy that finds the repeating cycle of launches (CGJIT_STEP=auto) can replay it.
 *
 * An iteration is 99 kernels whose arguments depend only on the kernel's position j in the
 * iteration (a table drawn once from a fixed seed: logistic maps x = r*x*(1-x), chaotic, and
 * contractions x = a*x + b that keep x in [0, 1]), then one record kernel that reads an iteration
 * counter kept on the device, stores x's checksum and head in that iteration's slot and bumps the
 * counter. So every iteration issues exactly the same launches with the same arguments, and still
 * every iteration's result is kept. The chaotic maps turn any wrong bit into a different
 * checksum within a few iterations. Prints every iteration's record after the loop.
 * stderr: "no_sync_loop: mean_us=<x>", the loop's wall time (final sync included) / 300.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 300, KERNELS = 100, NHEAD = 4 };

__global__ void logistic(float *x, float r, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = r * x[i] * (1.0f - x[i]);
}

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

/* One block of APP_CHECKSUM_THREADS: sums[*counter] = checksum(x), heads[*counter] = x[0..3],
 * then ++*counter. */
__global__ void record(const float *x, int n, int *counter, unsigned long long *sums, float *heads)
{
    __shared__ unsigned long long part[APP_CHECKSUM_THREADS];
    int slot = *counter;
    unsigned long long sum = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += app_mix64(__float_as_uint(x[i]), (uint64_t)i);
    part[threadIdx.x] = sum;
    if (threadIdx.x < NHEAD) heads[slot * NHEAD + threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sums[slot] = part[0];
        *counter = slot + 1;
    }
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 555;
    app_fill_uniform(h_x, NFLOAT, &rng, 0.05f, 0.95f);
    float p[KERNELS], q[KERNELS];
    for (int j = 0; j < KERNELS; j++) {
        if (j % 3 == 0) {
            p[j] = app_rng_float(&rng, 3.7f, 3.99f); /* logistic: r */
            q[j] = 0.0f;
        } else {
            p[j] = app_rng_float(&rng, 0.9f, 0.99f); /* a*x + b with a + b <= 1 */
            q[j] = app_rng_float(&rng, 0.0f, 1.0f - p[j]);
        }
    }

    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float *d_x, *d_heads;
    int *d_counter;
    unsigned long long *d_sums;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_heads, ITERS * NHEAD * sizeof(float)));
    CHECK(cudaMalloc(&d_counter, sizeof(int)));
    CHECK(cudaMalloc(&d_sums, ITERS * sizeof(unsigned long long)));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_counter, 0, sizeof(int)));
    CHECK(cudaMemset(d_heads, 0, ITERS * NHEAD * sizeof(float)));
    CHECK(cudaMemset(d_sums, 0, ITERS * sizeof(unsigned long long)));
    CHECK(cudaDeviceSynchronize());

    double t0 = app_now_us();
    for (int it = 0; it < ITERS; it++) {
        for (int j = 0; j < KERNELS - 1; j++) {
            if (j % 3 == 0) logistic<<<GRID, BLOCK, 0, s>>>(d_x, p[j], NFLOAT);
            else axpb<<<GRID, BLOCK, 0, s>>>(d_x, p[j], q[j], NFLOAT);
        }
        record<<<1, APP_CHECKSUM_THREADS, 0, s>>>(d_x, NFLOAT, d_counter, d_sums, d_heads);
    }
    CHECK_LAST();
    CHECK(cudaDeviceSynchronize());
    double mean_us = (app_now_us() - t0) / ITERS;

    static unsigned long long sums[ITERS];
    static float heads[ITERS * NHEAD];
    int counter;
    CHECK(cudaMemcpy(&counter, d_counter, sizeof counter, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(sums, d_sums, sizeof sums, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(heads, d_heads, sizeof heads, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_x, d_x, NFLOAT * sizeof(float), cudaMemcpyDeviceToHost));
    printf("iterations recorded: %d\n", counter);
    for (int it = 0; it < ITERS; it++)
        printf("iter %3d sum=%016llx head: %a %a %a %a\n", it, sums[it], heads[it * NHEAD], heads[it * NHEAD + 1],
               heads[it * NHEAD + 2], heads[it * NHEAD + 3]);
    printf("final checksum %016llx\n", (unsigned long long)app_checksum_host(h_x, NFLOAT));

    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_heads));
    CHECK(cudaFree(d_counter));
    CHECK(cudaFree(d_sums));
    CHECK(cudaStreamDestroy(s));
    fprintf(stderr, "no_sync_loop: mean_us=%.1f\n", mean_us);
    if (counter != ITERS) {
        fprintf(stderr, "no_sync_loop: %d iterations recorded, expected %d\n", counter, ITERS);
        return 1;
    }
    return 0;
}
