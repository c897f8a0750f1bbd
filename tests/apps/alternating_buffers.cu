/*
 * alternating_buffers — ping-pong: the iteration's source and destination swap every iteration,
 * as a double-buffered solver or a pipelined loader does. Kernels alternate between two device
 * buffer pairs, and the host side alternates between two pinned upload buffers and two pinned
 * result buffers (the host fills one while the other may still be read).
 *
 * State: x[0], x[1] (NFLOAT floats each), scratch g[0], g[1], inputs in[0], in[1], result
 * records res[0], res[1] on the device; h_in[0], h_in[1], h_res[0], h_res[1] pinned on the host.
 * Iteration it, p = it % 2, q = 1 - p:
 *  - the host fills h_in[p] (NIN floats), cudaMemcpyAsync h_in[p] -> in[p];
 *  - g[p] = laplacian-like stencil of x[p] plus in[p]; x[q] = x[p] + dt * g[p] (x[q] is
 *    overwritten: the other buffer of the pair becomes the state), a second smoothing pass
 *    in place on x[q];
 *  - a checksum of x[q] and its first floats into res[p], cudaMemcpyAsync res[p] -> h_res[p],
 *    cudaStreamSynchronize on the program's stream.
 * Prints the record every iteration.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK, NIN = 1024, NHEAD = 4 };
enum { ITERS = 400, TIMED_LAST = 200 };

struct result {
    unsigned long long sum;
    float head[NHEAD];
};

__global__ void stencil(float *g, const float *x, const float *in, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float l = x[(i + n - 1) % n], r = x[(i + 1) % n];
        g[i] = l + r - 2.0f * x[i] + 0.1f * in[i % NIN] - 0.01f * x[i] * x[i] * x[i];
    }
}

__global__ void advance(float *xn, const float *x, const float *g, float dt, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) xn[i] = x[i] + dt * g[i];
}

__global__ void smooth(float *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = 0.995f * x[i] + 0.005f * tanhf(x[i]);
}

__global__ void gather_head(const float *x, float *head)
{
    if (threadIdx.x < NHEAD) head[threadIdx.x] = x[threadIdx.x * 1021];
}

int main(void)
{
    static float h_x0[NFLOAT];
    uint64_t rng = 4711;
    app_fill_uniform(h_x0, NFLOAT, &rng, -1.0f, 1.0f);

    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    float *d_x[2], *d_g[2], *d_in[2], *h_in[2];
    struct result *d_res[2], *h_res[2];
    for (int p = 0; p < 2; p++) {
        CHECK(cudaMalloc(&d_x[p], NFLOAT * sizeof(float)));
        CHECK(cudaMalloc(&d_g[p], NFLOAT * sizeof(float)));
        CHECK(cudaMalloc(&d_in[p], NIN * sizeof(float)));
        CHECK(cudaMalloc(&d_res[p], sizeof(struct result)));
        CHECK(cudaMallocHost(&h_in[p], NIN * sizeof(float)));
        CHECK(cudaMallocHost(&h_res[p], sizeof(struct result)));
    }
    CHECK(cudaMemcpy(d_x[0], h_x0, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        int p = it % 2, q = 1 - p;
        double t0 = app_now_us();
        app_fill_uniform(h_in[p], NIN, &rng, -1.0f, 1.0f);
        CHECK(cudaMemcpyAsync(d_in[p], h_in[p], NIN * sizeof(float), cudaMemcpyHostToDevice, stream));
        stencil<<<GRID, BLOCK, 0, stream>>>(d_g[p], d_x[p], d_in[p], NFLOAT);
        advance<<<GRID, BLOCK, 0, stream>>>(d_x[q], d_x[p], d_g[p], 0.2f, NFLOAT);
        smooth<<<GRID, BLOCK, 0, stream>>>(d_x[q], NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, stream>>>(d_x[q], NFLOAT, &d_res[p]->sum);
        gather_head<<<1, 32, 0, stream>>>(d_x[q], d_res[p]->head);
        CHECK_LAST();
        CHECK(cudaMemcpyAsync(h_res[p], d_res[p], sizeof(struct result), cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        t_us[it] = app_now_us() - t0;

        const struct result *r = h_res[p];
        printf("iter %3d buf=%d sum=%016llx head: %a %a %a %a\n", it, p, r->sum, r->head[0], r->head[1], r->head[2],
               r->head[3]);
    }

    for (int p = 0; p < 2; p++) {
        CHECK(cudaFree(d_x[p]));
        CHECK(cudaFree(d_g[p]));
        CHECK(cudaFree(d_in[p]));
        CHECK(cudaFree(d_res[p]));
        CHECK(cudaFreeHost(h_in[p]));
        CHECK(cudaFreeHost(h_res[p]));
    }
    CHECK(cudaStreamDestroy(stream));
    app_report_time("alternating_buffers", t_us, ITERS, TIMED_LAST);
    return 0;
}
