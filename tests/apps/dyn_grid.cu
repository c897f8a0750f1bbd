/*
 * dyn_grid — a kernel whose grid the host computes every iteration from data it read back the
 * iteration before, as a bucketed pass does that launches one block per non-empty bucket (sparse
 * histograms, MoE expert dispatch, ragged batches).
 *
 * State: x (NFLOAT floats in (0, 1)) and acc (one float per bucket). Each iteration:
 *  - 2 fixed kernels move x (a chaotic logistic map, then a small shift by the step);
 *  - a memset zeroes bsum, and bucket_sum runs with one block per non-empty bucket of the counts
 *    the previous iteration computed (grid = `active`, known on the host from the readback): block
 *    b finds the b-th non-empty bucket itself and sums x over it in a fixed order;
 *  - acc += bsum, then the counts of the new x (fixed grid, integer atomics: exact), a checksum
 *    of x and acc, and one cudaMemcpy of {counts, checksum} to the host (the synchronization).
 * The host counts the non-empty buckets for the next iteration's grid. Prints `active`, the
 * checksum and a digest of the counts every iteration.
 */
#include "apps_common.h"

enum { NFLOAT = 768, NBUCKET = 512, BLOCK = 256, GRID = (NFLOAT + BLOCK - 1) / BLOCK };
enum { ITERS = 400, TIMED_LAST = 200 };

struct result {
    unsigned long long sum;
    int counts[NBUCKET];
};

__device__ int bucket_of(float v)
{
    int k = (int)(v * (float)NBUCKET);
    return k < 0 ? 0 : k >= NBUCKET ? NBUCKET - 1 : k;
}

__global__ void logistic(float *x, float r, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = r * x[i] * (1.0f - x[i]);
}

/* Keeps x inside (0, 1) while moving it a little differently every step. */
__global__ void nudge(float *x, int step, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i] + 1e-3f * (float)((i + step) % 7 - 3);
        x[i] = fminf(fmaxf(v, 1e-4f), 1.0f - 1e-4f);
    }
}

/* Block b: the b-th non-empty bucket k of `counts`; bsum[k] = sum of x[i] over bucket k, in a
 * fixed order (strided per thread, then a tree). Launched with grid = non-empty buckets. */
__global__ void bucket_sum(const float *x, const int *counts, float *bsum, int n)
{
    __shared__ int k_shared;
    __shared__ float part[BLOCK];
    if (threadIdx.x == 0) {
        int seen = -1, k = 0;
        for (; k < NBUCKET; k++)
            if (counts[k] > 0 && ++seen == (int)blockIdx.x) break;
        k_shared = k;
    }
    __syncthreads();
    int k = k_shared;
    if (k >= NBUCKET) return; /* more blocks than non-empty buckets: never with a right grid */
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (bucket_of(x[i]) == k) s += x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) bsum[k] = part[0] / (float)counts[k];
}

__global__ void accumulate(float *acc, const float *bsum, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc[i] = 0.9f * acc[i] + bsum[i];
}

/* counts must be zero before; integer atomics give the same counts in any order. */
__global__ void count_buckets(const float *x, int *counts, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&counts[bucket_of(x[i])], 1);
}

__global__ void combine(unsigned long long *out, const unsigned long long *a, const unsigned long long *b)
{
    *out = *a ^ (*b * 0x9E3779B97F4A7C15ull);
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 5150;
    app_fill_uniform(h_x, NFLOAT, &rng, 0.05f, 0.95f);

    float *d_x, *d_acc, *d_bsum;
    unsigned long long *d_sx, *d_sacc;
    struct result *d_res;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_acc, NBUCKET * sizeof(float)));
    CHECK(cudaMalloc(&d_bsum, NBUCKET * sizeof(float)));
    CHECK(cudaMalloc(&d_sx, sizeof(unsigned long long)));
    CHECK(cudaMalloc(&d_sacc, sizeof(unsigned long long)));
    CHECK(cudaMalloc(&d_res, sizeof *d_res));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_acc, 0, NBUCKET * sizeof(float)));
    CHECK(cudaMemset(d_res, 0, sizeof *d_res));
    count_buckets<<<GRID, BLOCK>>>(d_x, d_res->counts, NFLOAT);
    CHECK_LAST();
    static struct result res;
    CHECK(cudaMemcpy(&res, d_res, sizeof res, cudaMemcpyDeviceToHost));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        int active = 0;
        for (int k = 0; k < NBUCKET; k++) active += res.counts[k] > 0;

        double t0 = app_now_us();
        logistic<<<GRID, BLOCK>>>(d_x, 3.99f, NFLOAT);
        nudge<<<GRID, BLOCK>>>(d_x, it, NFLOAT);
        CHECK(cudaMemsetAsync(d_bsum, 0, NBUCKET * sizeof(float), 0));
        /* counts in d_res are those the host just read: the grid follows them. */
        bucket_sum<<<active, BLOCK>>>(d_x, d_res->counts, d_bsum, NFLOAT);
        accumulate<<<(NBUCKET + BLOCK - 1) / BLOCK, BLOCK>>>(d_acc, d_bsum, NBUCKET);
        CHECK(cudaMemsetAsync(d_res->counts, 0, sizeof res.counts, 0));
        count_buckets<<<GRID, BLOCK>>>(d_x, d_res->counts, NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, d_sx);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_acc, NBUCKET, d_sacc);
        combine<<<1, 1>>>(&d_res->sum, d_sx, d_sacc);
        CHECK_LAST();
        CHECK(cudaMemcpy(&res, d_res, sizeof res, cudaMemcpyDeviceToHost));
        t_us[it] = app_now_us() - t0;

        uint64_t digest = 0;
        for (int k = 0; k < NBUCKET; k++) digest += app_mix64((uint64_t)res.counts[k], (uint64_t)k);
        printf("iter %3d active=%3d sum=%016llx counts=%016llx\n", it, active, res.sum, (unsigned long long)digest);
    }

    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_acc));
    CHECK(cudaFree(d_bsum));
    CHECK(cudaFree(d_sx));
    CHECK(cudaFree(d_sacc));
    CHECK(cudaFree(d_res));
    app_report_time("dyn_grid", t_us, ITERS, TIMED_LAST);
    return 0;
}
