/*
 * alloc_size_class — temporaries allocated and freed inside every iteration whose sizes change a
 * little every iteration (a workspace sized by the batch, a buffer rounded to the data), both
 * with cudaMalloc/cudaFree and with the stream-ordered cudaMallocAsync/cudaFreeAsync.
 *
 * Each iteration it, on the program's stream:
 *  - cudaMalloc of t1 = 1,000,000 + (it * 37) % 4096 bytes; a kernel fills its n1 = bytes / 4
 *    floats from x (through tanh: bounded), a second folds them back into x;
 *  - cudaMallocAsync of t2 = 500,000 + (it * 53) % 2048 bytes on the stream; a kernel fills it
 *    from t1, one folds it into x; cudaFreeAsync(t2) on the stream;
 *  - cudaFree(t1) (after the kernels that use it, before the synchronization);
 *  - a checksum of x, cudaMemcpyAsync of it into pinned memory and cudaStreamSynchronize.
 * Prints the sizes and the checksum every iteration.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK, TGRID = 128 };
enum { ITERS = 400, TIMED_LAST = 200 };

__global__ void spread(float *t, const float *x, int nt, int nx, float a)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nt; i += gridDim.x * blockDim.x)
        t[i] = tanhf(a * x[(i * 7 + i / nx) % nx]) + (float)(i % 97) * 1e-3f;
}

/* x[i] += c * (sum of t[j] for j = i, i + nx, ... < nt), in order. */
__global__ void gather(float *x, const float *t, int nt, int nx, float c)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nx; i += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int j = i; j < nt; j += nx) s += t[j];
        x[i] = 0.5f * x[i] + c * s;
    }
}

__global__ void mix(float *t2, const float *t1, int n2, int n1)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n2; i += gridDim.x * blockDim.x)
        t2[i] = tanhf(t1[(2 * i + 1) % n1] - t1[i % n1]);
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 65537;
    app_fill_uniform(h_x, NFLOAT, &rng, -1.0f, 1.0f);

    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    float *d_x;
    unsigned long long *d_sum, *h_sum;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_sum, sizeof *d_sum));
    CHECK(cudaMallocHost(&h_sum, sizeof *h_sum));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        size_t b1 = 1000000 + (size_t)((it * 37) % 4096);
        size_t b2 = 500000 + (size_t)((it * 53) % 2048);
        int n1 = (int)(b1 / sizeof(float)), n2 = (int)(b2 / sizeof(float));

        double t0 = app_now_us();
        float *t1, *t2;
        CHECK(cudaMalloc(&t1, b1));
        spread<<<TGRID, BLOCK, 0, stream>>>(t1, d_x, n1, NFLOAT, 0.9f);
        gather<<<GRID, BLOCK, 0, stream>>>(d_x, t1, n1, NFLOAT, 0.02f);
        CHECK(cudaMallocAsync(&t2, b2, stream));
        mix<<<TGRID, BLOCK, 0, stream>>>(t2, t1, n2, n1);
        gather<<<GRID, BLOCK, 0, stream>>>(d_x, t2, n2, NFLOAT, 0.03f);
        CHECK(cudaFreeAsync(t2, stream));
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, stream>>>(d_x, NFLOAT, d_sum);
        CHECK_LAST();
        CHECK(cudaFree(t1));
        CHECK(cudaMemcpyAsync(h_sum, d_sum, sizeof *h_sum, cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        t_us[it] = app_now_us() - t0;

        printf("iter %3d t1=%zu t2=%zu sum=%016llx\n", it, b1, b2, *h_sum);
    }

    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_sum));
    CHECK(cudaFreeHost(h_sum));
    CHECK(cudaStreamDestroy(stream));
    app_report_time("alloc_size_class", t_us, ITERS, TIMED_LAST);
    return 0;
}
