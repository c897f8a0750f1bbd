/*
 * thread_exit — worker threads that each launch `x += 1` (and a scale) on one shared buffer and
 * exit without synchronizing; the main thread then synchronizes the device and reads x. A
 * library that holds a thread's work until the thread synchronizes must issue it when the
 * thread ends, or x comes out short.
 * stdout: x's checksum after each round; stderr: "thread_exit: median_us=<x>".
 */
#include "apps_common.h"

#include <pthread.h>

enum { N = 4096, ROUNDS = 40, WORKERS = 6, TIMED_LAST = 30 };

__global__ void add_one(float *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] += 1.0f;
}

__global__ void scale(float *x, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= a;
}

static float *d_x;

static void *worker(void *arg)
{
    (void)arg;
    add_one<<<16, 256>>>(d_x, N);
    scale<<<16, 256>>>(d_x, 0.5f, N);
    add_one<<<16, 256>>>(d_x, N);
    return NULL; /* no cudaDeviceSynchronize: the main thread does it */
}

int main(void)
{
    CHECK(cudaMalloc(&d_x, sizeof(float) * N));
    CHECK(cudaMemset(d_x, 0, sizeof(float) * N));
    static float h[N];
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = app_now_us();
        for (int w = 0; w < WORKERS; w++) {
            pthread_t th;
            pthread_create(&th, NULL, worker, NULL);
            pthread_join(th, NULL);
        }
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(h, d_x, sizeof h, cudaMemcpyDeviceToHost));
        t[r] = app_now_us() - t0;
        printf("round %d: x[0] %a checksum %016llx\n", r, h[0], (unsigned long long)app_checksum_host(h, N));
    }
    app_report_time("thread_exit", t, ROUNDS, TIMED_LAST);
    return 0;
}
