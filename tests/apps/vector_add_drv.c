/*
 * vector_add_drv — a driver-API program in the style of NVIDIA's vectorAddDrv: plain C linked
 * with -lcuda (no CUDA runtime), its own context from cuCtxCreate, a module loaded from a
 * fatbin file next to the executable, cuLaunchKernel with a kernelParams array, synchronous
 * copies. Every call it makes binds to libcuda's symbols directly.
 * stdout: checksums; stderr: "vector_add_drv: median_us=<x>".
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CU(call)                                                                          \
    do {                                                                                  \
        CUresult r_ = (call);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                         \
            const char *s_ = NULL;                                                        \
            cuGetErrorName(r_, &s_);                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_ ? s_ : "?"); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

enum { N = 8192, ITERS = 300, TIMED_LAST = 200 };

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    (void)argc;
    char path[4096];
    snprintf(path, sizeof path, "%s", argv[0]);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "vector_add_drv.fatbin");

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CUctxCreateParams params = {0};
    CU(cuCtxCreate(&ctx, &params, 0, dev));
    CU(cuModuleLoad(&mod, path));
    CU(cuModuleGetFunction(&fn, mod, "vec_add"));

    static float ha[N], hb[N], hc[N];
    uint64_t x = 7;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ha[i] = (float)(x >> 40) / 16777216.0f;
        hb[i] = (float)((x >> 20) & 0xfffff) / 1048576.0f;
    }
    CUdeviceptr da, db, dc;
    CU(cuMemAlloc(&da, sizeof ha));
    CU(cuMemAlloc(&db, sizeof hb));
    CU(cuMemAlloc(&dc, sizeof hc));
    CU(cuMemsetD32(dc, 0, N));
    double t[ITERS];
    unsigned long long sum = 0;
    for (int it = 0; it < ITERS; it++) {
        double t0 = now_us();
        hb[it % N] += 1.0f; /* the host input changes every iteration */
        CU(cuMemcpyHtoD(da, ha, sizeof ha));
        CU(cuMemcpyHtoD(db, hb, sizeof hb));
        int n = N;
        void *args[] = {&da, &db, &dc, &n};
        for (int k = 0; k < 8; k++) CU(cuLaunchKernel(fn, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
        CU(cuMemcpyDtoH(hc, dc, sizeof hc));
        t[it] = now_us() - t0;
        uint32_t bits;
        memcpy(&bits, &hc[it % N], sizeof bits);
        sum = sum * 1000003ull + bits;
    }
    printf("vector_add_drv: checksum %016llx, c[0] %a c[N-1] %a\n", sum, hc[0], hc[N - 1]);
    qsort(t + ITERS - TIMED_LAST, TIMED_LAST, sizeof t[0], cmp);
    fprintf(stderr, "vector_add_drv: median_us=%.1f\n", t[ITERS - TIMED_LAST / 2]);
    CU(cuMemFree(da));
    CU(cuMemFree(db));
    CU(cuMemFree(dc));
    CU(cuModuleUnload(mod));
    CU(cuCtxDestroy(ctx));
    return 0;
}
