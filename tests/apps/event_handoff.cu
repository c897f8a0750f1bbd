/*
 * event_handoff — a producer thread launches kernels on its stream and records an event; a
 * consumer thread makes its own stream wait on that event, copies what the producer wrote and
 * synchronizes its own stream, then hands the turn back. Nothing on the producer's side ever
 * synchronizes with the host: the event is the only edge.
 * stdout: what the consumer read each round; stderr: "event_handoff: median_us=<x>".
 */
#include "apps_common.h"

#include <pthread.h>

enum { N = 2048, ROUNDS = 200, TIMED_LAST = 150 };

__global__ void step_kernel(float *x, float k, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = x[i] * 0.5f + k;
}

static pthread_barrier_t recorded, consumed;
static cudaEvent_t ev;
static float *d_src, *d_dst;
static float h_out[ROUNDS][4];

static void *consumer(void *arg)
{
    (void)arg;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static float h[N];
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&recorded);
        CHECK(cudaStreamWaitEvent(s, ev, 0));
        CHECK(cudaMemcpyAsync(d_dst, d_src, sizeof(float) * N, cudaMemcpyDeviceToDevice, s));
        CHECK(cudaMemcpyAsync(h, d_dst, sizeof h, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        memcpy(h_out[r], h + N - 4, sizeof h_out[r]);
        pthread_barrier_wait(&consumed);
    }
    return NULL;
}

int main(void)
{
    cudaStream_t ps;
    CHECK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CHECK(cudaMalloc(&d_src, sizeof(float) * N));
    CHECK(cudaMalloc(&d_dst, sizeof(float) * N));
    CHECK(cudaMemset(d_src, 0, sizeof(float) * N));
    CHECK(cudaDeviceSynchronize());
    pthread_barrier_init(&recorded, NULL, 2);
    pthread_barrier_init(&consumed, NULL, 2);
    pthread_t th;
    pthread_create(&th, NULL, consumer, NULL);
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = app_now_us();
        for (int k = 0; k < 8; k++) step_kernel<<<8, 256, 0, ps>>>(d_src, (float)(r + k), N);
        CHECK_LAST();
        CHECK(cudaEventRecord(ev, ps));
        pthread_barrier_wait(&recorded);
        pthread_barrier_wait(&consumed);
        t[r] = app_now_us() - t0;
    }
    pthread_join(th, NULL);
    for (int r = 0; r < ROUNDS; r += 10)
        printf("round %d: %a %a %a %a\n", r, h_out[r][0], h_out[r][1], h_out[r][2], h_out[r][3]);
    app_report_time("event_handoff", t, ROUNDS, TIMED_LAST);
    return 0;
}
