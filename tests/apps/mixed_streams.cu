/*
 * mixed_streams — the legacy default stream mixed with two created streams: s1 blocking
 * (cudaStreamCreate, so it synchronizes implicitly with the legacy stream) and s2 non-blocking
 * (cudaStreamNonBlocking, so only events order it), as a program that overlaps a side stream
 * with its main loop does.
 *
 * Each iteration:
 *   legacy: cudaMemcpy a (pageable, new data each iteration), cudaMemset acc, prep(b <- x, a),
 *           event ev0 recorded on stream 0
 *   s1:     waits ev0; c = half(b); cudaMemcpyAsync c -> c2 (device to device); axpb(c2)
 *   s2:     waits ev0; cudaMemcpyAsync e <- pinned host data; acc += b * e; cudaMemsetAsync hist;
 *           hist(b) with integer atomics (order-independent)
 *   legacy: waits ev1 (s1) and ev2 (s2); combine(x <- x, c2, acc, hist); checksum(x) -> sum;
 *           ev3 recorded on stream 0
 *   s2:     waits ev3; cudaMemcpyAsync sum -> pinned host
 *   s1:     waits ev2; cudaMemcpyAsync hist -> pinned host
 *   cudaDeviceSynchronize (the final sync); print sum and hist.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 300, NBINS = 8, TIMED_LAST = 100 };

__global__ void prep(float *b, const float *x, const float *a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) b[i] = x[i] + 0.1f * a[i];
}

__global__ void half_plus(float *c, const float *b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) c[i] = 0.5f * b[i] + 0.1f;
}

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

__global__ void accum(float *acc, const float *b, const float *e, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc[i] += b[i] * e[i];
}

__global__ void hist(int *h, const float *b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int bin = (int)fminf(fabsf(b[i]) * 4.0f, (float)(NBINS - 1)); /* NaN: the last bin */
        atomicAdd(&h[bin], 1);
    }
}

__global__ void combine(float *x, const float *c2, const float *acc, const int *h, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = 0.5f * x[i] + 0.25f * c2[i] + 0.25f * acc[i] + 1e-5f * (float)h[i % NBINS];
}

int main(void)
{
    static float h_x[NFLOAT], h_a[NFLOAT];
    uint64_t rng = 99;
    app_fill_uniform(h_x, NFLOAT, &rng, -1.0f, 1.0f);

    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t ev0, ev1, ev2, ev3;
    CHECK(cudaEventCreateWithFlags(&ev0, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&ev1, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&ev3, cudaEventDisableTiming));

    const size_t bytes = NFLOAT * sizeof(float);
    float *d_x, *d_a, *d_b, *d_c, *d_c2, *d_e, *d_acc;
    int *d_hist;
    unsigned long long *d_sum;
    CHECK(cudaMalloc(&d_x, bytes));
    CHECK(cudaMalloc(&d_a, bytes));
    CHECK(cudaMalloc(&d_b, bytes));
    CHECK(cudaMalloc(&d_c, bytes));
    CHECK(cudaMalloc(&d_c2, bytes));
    CHECK(cudaMalloc(&d_e, bytes));
    CHECK(cudaMalloc(&d_acc, bytes));
    CHECK(cudaMalloc(&d_hist, NBINS * sizeof(int)));
    CHECK(cudaMalloc(&d_sum, sizeof(unsigned long long)));
    CHECK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));

    float *p_e;
    unsigned long long *p_sum;
    int *p_hist;
    CHECK(cudaMallocHost(&p_e, bytes));
    CHECK(cudaMallocHost(&p_sum, sizeof(unsigned long long)));
    CHECK(cudaMallocHost(&p_hist, NBINS * sizeof(int)));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        app_fill_uniform(h_a, NFLOAT, &rng, -1.0f, 1.0f);
        app_fill_uniform(p_e, NFLOAT, &rng, 0.5f, 1.5f); /* the previous copy finished: synced */

        double t0 = app_now_us();
        CHECK(cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(d_acc, 0, bytes));
        prep<<<GRID, BLOCK>>>(d_b, d_x, d_a, NFLOAT);
        CHECK(cudaEventRecord(ev0, 0));

        CHECK(cudaStreamWaitEvent(s1, ev0, 0));
        half_plus<<<GRID, BLOCK, 0, s1>>>(d_c, d_b, NFLOAT);
        CHECK(cudaMemcpyAsync(d_c2, d_c, bytes, cudaMemcpyDeviceToDevice, s1));
        axpb<<<GRID, BLOCK, 0, s1>>>(d_c2, 0.9f, 0.05f, NFLOAT);
        CHECK(cudaEventRecord(ev1, s1));

        CHECK(cudaStreamWaitEvent(s2, ev0, 0));
        CHECK(cudaMemcpyAsync(d_e, p_e, bytes, cudaMemcpyHostToDevice, s2));
        accum<<<GRID, BLOCK, 0, s2>>>(d_acc, d_b, d_e, NFLOAT);
        CHECK(cudaMemsetAsync(d_hist, 0, NBINS * sizeof(int), s2));
        hist<<<GRID, BLOCK, 0, s2>>>(d_hist, d_b, NFLOAT);
        CHECK(cudaEventRecord(ev2, s2));

        CHECK(cudaStreamWaitEvent(0, ev1, 0));
        CHECK(cudaStreamWaitEvent(0, ev2, 0));
        combine<<<GRID, BLOCK>>>(d_x, d_c2, d_acc, d_hist, NFLOAT);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, d_sum);
        CHECK(cudaEventRecord(ev3, 0));

        CHECK(cudaStreamWaitEvent(s2, ev3, 0));
        CHECK(cudaMemcpyAsync(p_sum, d_sum, sizeof *p_sum, cudaMemcpyDeviceToHost, s2));
        CHECK(cudaStreamWaitEvent(s1, ev2, 0));
        CHECK(cudaMemcpyAsync(p_hist, d_hist, NBINS * sizeof(int), cudaMemcpyDeviceToHost, s1));
        CHECK_LAST();
        CHECK(cudaDeviceSynchronize());
        t_us[it] = app_now_us() - t0;

        printf("iter %3d sum=%016llx hist:", it, *p_sum);
        for (int j = 0; j < NBINS; j++) printf(" %d", p_hist[j]);
        printf("\n");
    }

    CHECK(cudaMemcpy(h_x, d_x, bytes, cudaMemcpyDeviceToHost));
    printf("final x[0..3]: %a %a %a %a\n", h_x[0], h_x[1], h_x[2], h_x[3]);
    CHECK(cudaFreeHost(p_e));
    CHECK(cudaFreeHost(p_sum));
    CHECK(cudaFreeHost(p_hist));
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_a));
    CHECK(cudaFree(d_b));
    CHECK(cudaFree(d_c));
    CHECK(cudaFree(d_c2));
    CHECK(cudaFree(d_e));
    CHECK(cudaFree(d_acc));
    CHECK(cudaFree(d_hist));
    CHECK(cudaFree(d_sum));
    CHECK(cudaEventDestroy(ev0));
    CHECK(cudaEventDestroy(ev1));
    CHECK(cudaEventDestroy(ev2));
    CHECK(cudaEventDestroy(ev3));
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    app_report_time("mixed_streams", t_us, ITERS, TIMED_LAST);
    return 0;
}
