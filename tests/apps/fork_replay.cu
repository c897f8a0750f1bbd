/*
 * fork_replay — a training-loop-like program that forks helper processes (a data loader, a
 * checkpoint writer) while a second thread keeps launching and synchronizing its own loop. The
 * children touch CUDA once (as careless code does: a cudaDeviceSynchronize that fails after
 * fork), print one line and exit; the parent waits for each before going on.
 * stdout: each child's line in order, and the loops' checksums; stderr: "fork_replay: median_us=<x>".
 */
#include "apps_common.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 4096, ITERS = 120, FORK_EVERY = 10, TIMED_LAST = 80 };

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

static unsigned long long side_sum;

static void *side_loop(void *arg)
{
    (void)arg;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *d;
    CHECK(cudaMalloc(&d, sizeof(float) * N));
    CHECK(cudaMemsetAsync(d, 0, sizeof(float) * N, s));
    static float h[N];
    for (int it = 0; it < 300; it++) {
        for (int k = 0; k < 16; k++) axpb<<<16, 256, 0, s>>>(d, 0.5f, (float)(k + it % 3), N);
        CHECK(cudaStreamSynchronize(s));
    }
    CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    side_sum = app_checksum_host(h, N);
    return NULL;
}

int main(void)
{
    float *d;
    CHECK(cudaMalloc(&d, sizeof(float) * N));
    CHECK(cudaMemset(d, 0, sizeof(float) * N));
    pthread_t th;
    pthread_create(&th, NULL, side_loop, NULL);
    static float h[N];
    double t[ITERS];
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        for (int k = 0; k < 20; k++) axpb<<<16, 256>>>(d, 0.75f, (float)(k + it), N);
        CHECK_LAST();
        if (it % FORK_EVERY == 0) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                (void)cudaDeviceSynchronize(); /* an error after fork: ignored, as such code does */
                printf("child of iteration %d done\n", it);
                fflush(stdout);
                _exit(0);
            }
            int status = 0;
            waitpid(pid, &status, 0);
            printf("iteration %d: child exited %d\n", it, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        }
        CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        t[it] = app_now_us() - t0;
    }
    pthread_join(th, NULL);
    printf("main checksum %016llx, side checksum %016llx\n", (unsigned long long)app_checksum_host(h, N), side_sum);
    app_report_time("fork_replay", t, ITERS, TIMED_LAST);
    return 0;
}
