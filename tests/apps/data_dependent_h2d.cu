/*
 * data_dependent_h2d — host-to-device copies whose size AND content depend on the data, from
 * pageable buffers that the host rewrites as soon as each copy returns (which eager CUDA allows:
 * a copy from pageable memory has taken the bytes when it returns).
 *
 * Each iteration, from the checksum c read back at the end of the previous one:
 *  - count = 256 + (c % 1024) floats drawn from a generator seeded with c, copied with cudaMemcpy
 *    into d_in; the host buffer is then overwritten with NaN bytes at once;
 *  - 16 floats derived from c's bits, copied with cudaMemcpyAsync on stream 0 (pageable); that
 *    buffer is overwritten at once too;
 *  - a kernel folds d_in[i % count] and the 16 parameters into x; 3 more kernels; a checksum
 *    kernel; cudaMemcpy of the checksum to the host (the synchronization).
 * Prints count and the checksum every iteration.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 300, MAXIN = 256 + 1024, NPAR = 16, TIMED_LAST = 100 };

__global__ void fold(float *x, const float *in, int count, const float *par, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = 0.99f * x[i] + 0.01f * in[i % count] + 1e-3f * par[i % NPAR];
}

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 4242;
    app_fill_uniform(h_x, NFLOAT, &rng, -1.0f, 1.0f);
    uint64_t c = app_checksum_host(h_x, NFLOAT);

    /* Pageable on purpose (plain malloc), as most programs' buffers are. */
    float *h_in = (float *)malloc(MAXIN * sizeof(float));
    float *h_par = (float *)malloc(NPAR * sizeof(float));
    if (!h_in || !h_par) {
        fprintf(stderr, "data_dependent_h2d: out of host memory\n");
        return 1;
    }

    float *d_x, *d_in, *d_par;
    unsigned long long *d_sum;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_in, MAXIN * sizeof(float)));
    CHECK(cudaMalloc(&d_par, NPAR * sizeof(float)));
    CHECK(cudaMalloc(&d_sum, sizeof(unsigned long long)));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        int count = 256 + (int)(c % 1024);
        uint64_t in_rng = c ^ (uint64_t)it;
        app_fill_uniform(h_in, (size_t)count, &in_rng, -1.0f, 1.0f);
        for (int j = 0; j < NPAR; j++) h_par[j] = (float)((c >> (4 * (j % 16))) & 0xF) - 7.5f;

        double t0 = app_now_us();
        CHECK(cudaMemcpy(d_in, h_in, (size_t)count * sizeof(float), cudaMemcpyHostToDevice));
        memset(h_in, 0xFF, MAXIN * sizeof(float)); /* NaN: a late read would show */
        CHECK(cudaMemcpyAsync(d_par, h_par, NPAR * sizeof(float), cudaMemcpyHostToDevice, 0));
        memset(h_par, 0xFF, NPAR * sizeof(float));
        fold<<<GRID, BLOCK>>>(d_x, d_in, count, d_par, NFLOAT);
        axpb<<<GRID, BLOCK>>>(d_x, 1.001f, 0.0f, NFLOAT);
        axpb<<<GRID, BLOCK>>>(d_x, 0.999f, 0.001f, NFLOAT);
        axpb<<<GRID, BLOCK>>>(d_x, 1.0f, -0.001f, NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, d_sum);
        CHECK_LAST();
        unsigned long long sum;
        CHECK(cudaMemcpy(&sum, d_sum, sizeof sum, cudaMemcpyDeviceToHost));
        t_us[it] = app_now_us() - t0;

        printf("iter %3d count=%4d sum=%016llx\n", it, count, sum);
        c = sum;
    }

    CHECK(cudaMemcpy(h_x, d_x, NFLOAT * sizeof(float), cudaMemcpyDeviceToHost));
    printf("final x[0..3]: %a %a %a %a\n", h_x[0], h_x[1], h_x[2], h_x[3]);
    free(h_in);
    free(h_par);
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_par));
    CHECK(cudaFree(d_sum));
    app_report_time("data_dependent_h2d", t_us, ITERS, TIMED_LAST);
    return 0;
}
