/*
 * tiny_kernels — launch overhead, the case cgjit exists for: each iteration runs 1000 small
 * dependent kernels, x = a*x + b over 4096 floats, on the legacy default stream, then reads 8
 * floats back with cudaMemcpy (the iteration's only host synchronization) and prints them.
 *
 * Each kernel costs the GPU about what its launch costs the host, so an iteration's time is
 * launch overhead. The per-iteration wall time (launches + readback) is measured on the host and
 * its median over the last 100 iterations is printed to stderr as "tiny_kernels: median_us=<x>".
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 300, KERNELS = 1000, NREAD = 8, TIMED_LAST = 100 };

/* Contracting slowly towards b / (1 - a) = 10: after 300 000 kernels (0.99999^300000 ~ 0.05)
 * the values still carry the random initial data. */
static const float A = 0.99999f;
static const float B = 0.0001f;

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 20240601;
    app_fill_uniform(h_x, NFLOAT, &rng, -100.0f, 100.0f);

    float *d_x;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    float out[NREAD];
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        for (int k = 0; k < KERNELS; k++) axpb<<<GRID, BLOCK>>>(d_x, A, B, NFLOAT);
        CHECK_LAST();
        CHECK(cudaMemcpy(out, d_x, sizeof out, cudaMemcpyDeviceToHost));
        t_us[it] = app_now_us() - t0;

        printf("iter %3d:", it);
        for (int j = 0; j < NREAD; j++) printf(" %a", out[j]);
        printf("\n");
    }

    CHECK(cudaMemcpy(h_x, d_x, NFLOAT * sizeof(float), cudaMemcpyDeviceToHost));
    printf("final checksum %016llx\n", (unsigned long long)app_checksum_host(h_x, NFLOAT));
    CHECK(cudaFree(d_x));
    app_report_time("tiny_kernels", t_us, ITERS, TIMED_LAST);
    return 0;
}
