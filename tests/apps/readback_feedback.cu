/*
 * readback_feedback — a device-to-host read in the middle of an iteration whose value the host
 * transforms and feeds into later kernels of the same iteration (as a loop that normalizes by a
 * norm it reads back, or picks a step size from a loss).
 *
 * Each iteration: phase A (10 kernels that grow and bend x), a one-block kernel computing
 * m = mean |x| in a fixed order, cudaMemcpy of m to the host (synchronization 1); the host
 * derives inv = 1/m, an offset and an integer shift from m; phase B (1 kernel x *= inv, 9
 * kernels adding the offset with a pattern that depends on the shift), a checksum kernel and
 * cudaMemcpy of the checksum (synchronization 2). Prints m, the derived values and the checksum.
 */
#include "apps_common.h"

#include <math.h>

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 300, PHASE = 10, TIMED_LAST = 100 };

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

__global__ void bend(float *x, float c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = x[i] + c * tanhf(x[i]);
}

/* *m = mean |x|, summed in a fixed order (per-thread strided sums, then a tree). */
__global__ void mean_abs(const float *x, int n, float *m)
{
    __shared__ float part[BLOCK];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += fabsf(x[i]);
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *m = part[0] / (float)n;
}

__global__ void scale(float *x, float s, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= s;
}

__global__ void shift(float *x, float off, int k, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] += ((i + k) & 3) ? off : -off;
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 31337;
    app_fill_uniform(h_x, NFLOAT, &rng, -3.0f, 3.0f);
    float a[PHASE], b[PHASE];
    for (int j = 0; j < PHASE; j++) {
        a[j] = app_rng_float(&rng, 1.0f, 1.1f);
        b[j] = app_rng_float(&rng, -0.05f, 0.05f);
    }

    float *d_x, *d_m;
    unsigned long long *d_sum;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_m, sizeof(float)));
    CHECK(cudaMalloc(&d_sum, sizeof(unsigned long long)));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        for (int j = 0; j < PHASE; j++) {
            if (j % 2 == 0) axpb<<<GRID, BLOCK>>>(d_x, a[j], b[j], NFLOAT);
            else bend<<<GRID, BLOCK>>>(d_x, 0.1f, NFLOAT);
        }
        mean_abs<<<1, BLOCK>>>(d_x, NFLOAT, d_m);
        CHECK_LAST();
        float m;
        CHECK(cudaMemcpy(&m, d_m, sizeof m, cudaMemcpyDeviceToHost));
        if (!(m > 0.0f) || !isfinite(m)) {
            fprintf(stderr, "readback_feedback: iteration %d: mean |x| = %a\n", it, m);
            return 1;
        }

        /* The host's transformation of the value it read. */
        float inv = 1.0f / m;
        float off = 0.01f * (fmodf(m * 1000.0f, 1.0f) - 0.5f);
        int k = (int)(m * 4096.0f) & 15;
        scale<<<GRID, BLOCK>>>(d_x, inv, NFLOAT);
        for (int j = 1; j < PHASE; j++) shift<<<GRID, BLOCK>>>(d_x, off, k + j, NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, d_sum);
        CHECK_LAST();
        unsigned long long sum;
        CHECK(cudaMemcpy(&sum, d_sum, sizeof sum, cudaMemcpyDeviceToHost));
        t_us[it] = app_now_us() - t0;

        printf("iter %3d m=%a inv=%a off=%a k=%2d sum=%016llx\n", it, m, inv, off, k, sum);
    }

    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_m));
    CHECK(cudaFree(d_sum));
    app_report_time("readback_feedback", t_us, ITERS, TIMED_LAST);
    return 0;
}
