/*
 * host_values — host values that change every iteration and feed kernels, as a training loop's
 * do: a step counter (int), a learning rate that decays every step (float), and a per-step random
 * seed (uint64) from which the kernels draw noise with an in-kernel hash RNG.
 *
 * Each iteration: 4 rounds of (g = w - t; w -= lr * (g + 0.1 * noise(seed, round, i)), with a
 * nudge where (i + step) % 17 == 0), a scale by a factor derived from the step, a checksum
 * kernel and a device-to-device copy of w's head into one result record, then one cudaMemcpy of
 * that record to the host (the iteration's only synchronization). Prints the host values and
 * the record every iteration.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 300, ROUNDS = 4, TIMED_LAST = 100 };

struct result {
    unsigned long long sum;
    float head[4];
};

__global__ void grad(float *g, const float *w, const float *t, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) g[i] = w[i] - t[i];
}

/* noise in [-1, 1) from (seed, round, i): the same on every run, different every step. */
__device__ float noise(unsigned long long seed, int round, int i)
{
    uint64_t h = app_mix64(seed ^ (uint64_t)i, (uint64_t)round + 1);
    return (float)(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void update(float *w, const float *g, float lr, unsigned long long seed, int step, int round, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = w[i] - lr * (g[i] + 0.1f * noise(seed, round, i));
        if ((i + step) % 17 == 0) v += 1e-3f;
        w[i] = v;
    }
}

__global__ void scale(float *w, float s, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) w[i] *= s;
}

int main(void)
{
    static float h_w[NFLOAT], h_t[NFLOAT];
    uint64_t rng = 7;
    app_fill_uniform(h_w, NFLOAT, &rng, -1.0f, 1.0f);
    app_fill_uniform(h_t, NFLOAT, &rng, -2.0f, 2.0f);

    float *d_w, *d_t, *d_g;
    struct result *d_res;
    CHECK(cudaMalloc(&d_w, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_t, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_g, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_res, sizeof *d_res));
    CHECK(cudaMemcpy(d_w, h_w, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_t, h_t, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    float lr = 0.05f;
    uint64_t seed_rng = 0xC0FFEE;
    for (int step = 0; step < ITERS; step++) {
        unsigned long long seed = app_rng_next(&seed_rng);
        float s = 1.0f + 1e-4f * (float)(step % 5) - 2e-4f;
        double t0 = app_now_us();
        for (int r = 0; r < ROUNDS; r++) {
            grad<<<GRID, BLOCK>>>(d_g, d_w, d_t, NFLOAT);
            update<<<GRID, BLOCK>>>(d_w, d_g, lr, seed, step, r, NFLOAT);
        }
        scale<<<GRID, BLOCK>>>(d_w, s, NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_w, NFLOAT, &d_res->sum);
        CHECK_LAST();
        CHECK(cudaMemcpyAsync(d_res->head, d_w, sizeof d_res->head, cudaMemcpyDeviceToDevice, 0));
        struct result res;
        CHECK(cudaMemcpy(&res, d_res, sizeof res, cudaMemcpyDeviceToHost));
        t_us[step] = app_now_us() - t0;

        printf("step %3d lr=%a seed=%016llx s=%a sum=%016llx head: %a %a %a %a\n", step, lr, seed, s, res.sum,
               res.head[0], res.head[1], res.head[2], res.head[3]);
        lr *= 0.995f;
    }

    CHECK(cudaFree(d_w));
    CHECK(cudaFree(d_t));
    CHECK(cudaFree(d_g));
    CHECK(cudaFree(d_res));
    app_report_time("host_values", t_us, ITERS, TIMED_LAST);
    return 0;
}
