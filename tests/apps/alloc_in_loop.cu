/*
 * alloc_in_loop — a naive program that allocates inside its loop: each iteration cudaMallocs two
 * temporaries and cudaFrees them after use, and allocates one output record that it frees only in
 * the next iteration (so it outlives the iteration that made it, as a returned tensor does).
 *
 * Each iteration: cudaMalloc t1 (4096 floats) and t2 (8192 floats); t1 = r*x*(1-x) (a chaotic
 * logistic map); t2 mixes t1; x = 0.5*x + 0.25*(t2[i] + t2[i+4096]); cudaMalloc out; a checksum
 * and x's head into out; cudaFree t1, t2 and the previous iteration's out; cudaMemcpy out to the
 * host (the synchronization). Prints the record.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 300, NHEAD = 4, TIMED_LAST = 100 };

struct result {
    unsigned long long sum;
    float head[NHEAD];
};

__global__ void make_t1(float *t1, const float *x, float r, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        t1[i] = r * x[i] * (1.0f - x[i]);
}

__global__ void make_t2(float *t2, const float *t1, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 2 * n; i += gridDim.x * blockDim.x)
        t2[i] = 0.5f * (t1[i % n] + t1[(i * 7 + 3) % n]);
}

__global__ void update(float *x, const float *t2, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = 0.5f * x[i] + 0.25f * (t2[i] + t2[i + n]);
}

__global__ void gather_head(const float *x, float *head)
{
    if (threadIdx.x < NHEAD) head[threadIdx.x] = x[threadIdx.x];
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 8080;
    app_fill_uniform(h_x, NFLOAT, &rng, 0.05f, 0.95f);

    float *d_x;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    struct result *prev_out = NULL;
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        float *t1, *t2;
        CHECK(cudaMalloc(&t1, NFLOAT * sizeof(float)));
        CHECK(cudaMalloc(&t2, 2 * NFLOAT * sizeof(float)));
        make_t1<<<GRID, BLOCK>>>(t1, d_x, 3.9f, NFLOAT);
        make_t2<<<GRID, BLOCK>>>(t2, t1, NFLOAT);
        update<<<GRID, BLOCK>>>(d_x, t2, NFLOAT);
        struct result *out;
        CHECK(cudaMalloc(&out, sizeof *out));
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, &out->sum);
        gather_head<<<1, 32>>>(d_x, out->head);
        CHECK_LAST();
        CHECK(cudaFree(t1));
        CHECK(cudaFree(t2));
        if (prev_out) CHECK(cudaFree(prev_out));
        struct result res;
        CHECK(cudaMemcpy(&res, out, sizeof res, cudaMemcpyDeviceToHost));
        prev_out = out;
        t_us[it] = app_now_us() - t0;

        printf("iter %3d sum=%016llx head: %a %a %a %a\n", it, res.sum, res.head[0], res.head[1], res.head[2],
               res.head[3]);
    }

    CHECK(cudaFree(prev_out));
    CHECK(cudaFree(d_x));
    app_report_time("alloc_in_loop", t_us, ITERS, TIMED_LAST);
    return 0;
}
