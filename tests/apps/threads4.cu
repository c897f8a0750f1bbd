/*
 * threads4 — four host threads, each with its own created stream and buffers, each running its
 * own loop of 50 kernels per iteration (48 compute kernels, one that gathers x's head, one
 * checksum), an async copy of the result record into the thread's pinned buffer and a
 * cudaStreamSynchronize of its stream. The threads run at the same time and share nothing but the device; each thread's
 * arguments differ (drawn from a seed that depends on the thread's index). Results are kept per thread and iteration
 * and printed by the main thread after joining, in thread order, so stdout does not depend on the interleaving. stderr:
 * "threads4: median_us=<x>", the median per-iteration time over every thread's last 100.
 */
#include "apps_common.h"

#include <pthread.h>

enum { NTHREADS = 4, NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 200, KERNELS = 50, NHEAD = 4, TIMED_LAST = 100 };

struct result {
    unsigned long long sum;
    float head[NHEAD];
};

struct worker {
    int index;
    struct result res[ITERS];
    double t_us[ITERS];
};

__global__ void logistic(float *x, float r, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = r * x[i] * (1.0f - x[i]);
}

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

__global__ void gather_head(const float *x, float *head)
{
    if (threadIdx.x < NHEAD) head[threadIdx.x] = x[threadIdx.x];
}

static void *run_worker(void *arg)
{
    struct worker *w = (struct worker *)arg;
    CHECK(cudaSetDevice(0));
    uint64_t rng = 1000 + (uint64_t)w->index;
    float h_x[NFLOAT];
    app_fill_uniform(h_x, NFLOAT, &rng, 0.05f, 0.95f);
    float p[KERNELS], q[KERNELS];
    for (int j = 0; j < KERNELS; j++) {
        p[j] = j % 2 ? app_rng_float(&rng, 0.9f, 0.99f) : app_rng_float(&rng, 3.7f, 3.99f);
        q[j] = j % 2 ? app_rng_float(&rng, 0.0f, 1.0f - p[j]) : 0.0f;
    }

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *d_x;
    struct result *d_res, *p_res;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_res, sizeof *d_res));
    CHECK(cudaMallocHost(&p_res, sizeof *p_res));
    CHECK(cudaMemcpyAsync(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice, s));
    CHECK(cudaStreamSynchronize(s));

    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        for (int j = 0; j < KERNELS - 2; j++) {
            if (j % 2) axpb<<<GRID, BLOCK, 0, s>>>(d_x, p[j], q[j], NFLOAT);
            else logistic<<<GRID, BLOCK, 0, s>>>(d_x, p[j], NFLOAT);
        }
        gather_head<<<1, 32, 0, s>>>(d_x, d_res->head);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, s>>>(d_x, NFLOAT, &d_res->sum);
        CHECK_LAST();
        CHECK(cudaMemcpyAsync(p_res, d_res, sizeof *p_res, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        w->t_us[it] = app_now_us() - t0;
        w->res[it] = *p_res;
    }

    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_res));
    CHECK(cudaFreeHost(p_res));
    CHECK(cudaStreamDestroy(s));
    return NULL;
}

int main(void)
{
    static struct worker workers[NTHREADS];
    pthread_t tid[NTHREADS];
    CHECK(cudaFree(0)); /* create the context before the threads race to */
    for (int t = 0; t < NTHREADS; t++) {
        workers[t].index = t;
        int rc = pthread_create(&tid[t], NULL, run_worker, &workers[t]);
        if (rc != 0) {
            fprintf(stderr, "threads4: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    for (int t = 0; t < NTHREADS; t++) {
        int rc = pthread_join(tid[t], NULL);
        if (rc != 0) {
            fprintf(stderr, "threads4: pthread_join: %s\n", strerror(rc));
            return 1;
        }
    }

    static double tail[NTHREADS * TIMED_LAST];
    int ntail = 0;
    for (int t = 0; t < NTHREADS; t++) {
        for (int it = 0; it < ITERS; it++) {
            const struct result *r = &workers[t].res[it];
            printf("thread %d iter %3d sum=%016llx head: %a %a %a %a\n", t, it, r->sum, r->head[0], r->head[1],
                   r->head[2], r->head[3]);
        }
        for (int it = ITERS - TIMED_LAST; it < ITERS; it++) tail[ntail++] = workers[t].t_us[it];
    }
    app_report_time("threads4", tail, ntail, ntail);
    return 0;
}
