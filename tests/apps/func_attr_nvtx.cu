/*
 * func_attr_nvtx — the calls around the work that real loops make every step: a
 * cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ...) before each
 * launch batch (as code that does not remember it did it already), launches with more dynamic
 * shared memory than the default 48 KiB, NVTX ranges and marks around and inside each iteration
 * (nvtx3, header-only), and cudaProfilerStart()/cudaProfilerStop() around iterations 100..149.
 *
 * Each iteration: set the two attributes, 5 launches of a kernel that smooths 72 KiB tiles in
 * shared memory, an axpb kernel, a checksum kernel, cudaMemcpy of the checksum and of 4 floats
 * of x (the synchronization). Prints the checksum and the floats.
 */
#include "apps_common.h"

#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

enum { TILE = 18432, BLOCK = 256, NTILES = 8, NFLOAT = TILE * NTILES };
enum { ITERS = 300, SMOOTHS = 5, PROFILE_FROM = 100, PROFILE_TO = 150, TIMED_LAST = 100 };
static const int SMEM_BYTES = TILE * (int)sizeof(float); /* 72 KiB: needs the attribute */

/* One block per tile: load it into shared memory, write back a 3-point circular smoothing. */
__global__ void smooth_tiles(float *x)
{
    extern __shared__ float tile[];
    float *base = x + (size_t)blockIdx.x * TILE;
    for (int j = threadIdx.x; j < TILE; j += blockDim.x) tile[j] = base[j];
    __syncthreads();
    for (int j = threadIdx.x; j < TILE; j += blockDim.x) {
        float l = tile[(j + TILE - 1) % TILE], r = tile[(j + 1) % TILE];
        base[j] = 0.25f * l + 0.5f * tile[j] + 0.25f * r + 1e-4f * (float)(j & 7);
    }
}

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

int main(void)
{
    float *h_x = (float *)malloc(NFLOAT * sizeof(float));
    if (!h_x) {
        fprintf(stderr, "func_attr_nvtx: out of host memory\n");
        return 1;
    }
    uint64_t rng = 1234567;
    app_fill_uniform(h_x, NFLOAT, &rng, -10.0f, 10.0f);

    float *d_x;
    unsigned long long *d_sum;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_sum, sizeof(unsigned long long)));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        if (it == PROFILE_FROM) CHECK(cudaProfilerStart());
        if (it == PROFILE_TO) CHECK(cudaProfilerStop());
        double t0 = app_now_us();
        nvtxRangePushA("iteration");
        CHECK(cudaFuncSetAttribute(smooth_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
        CHECK(cudaFuncSetAttribute(smooth_tiles, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
        nvtxRangePushA("smooth");
        for (int k = 0; k < SMOOTHS; k++) smooth_tiles<<<NTILES, BLOCK, SMEM_BYTES>>>(d_x);
        nvtxRangePop();
        nvtxMarkA("axpb");
        axpb<<<NFLOAT / BLOCK, BLOCK>>>(d_x, 1.003f, 0.001f, NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, d_sum);
        CHECK_LAST();
        unsigned long long sum;
        float head[4];
        CHECK(cudaMemcpy(&sum, d_sum, sizeof sum, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(head, d_x, sizeof head, cudaMemcpyDeviceToHost));
        nvtxRangePop();
        t_us[it] = app_now_us() - t0;

        printf("iter %3d sum=%016llx head: %a %a %a %a\n", it, sum, head[0], head[1], head[2], head[3]);
    }

    free(h_x);
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_sum));
    app_report_time("func_attr_nvtx", t_us, ITERS, TIMED_LAST);
    return 0;
}
