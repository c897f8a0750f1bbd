/*
 * fakeapp.h — a tiny "CUDA program" for host tests: it reaches the fake driver the way the
 * CUDA runtime reaches the real one (dlopen libcuda.so.1, dlsym cuGetProcAddress_v2, every
 * entry point through it), so every call it makes goes through cgjit's interposition.
 */
#ifndef CGJ_TEST_FAKEAPP_H
#define CGJ_TEST_FAKEAPP_H

#include <stdbool.h>
#include <cuda.h>
#include "fakecuda.h"
#include <cgjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct fk {
    void *handle;
    __typeof__(cuGetProcAddress) *gpa;
    __typeof__(cuLaunchKernel) *launch, *launch_ptsz;
    __typeof__(cuLaunchKernelEx) *launch_ex;
    __typeof__(cuLaunchHostFunc) *host_func;
    __typeof__(cuMemcpyHtoD) *htod;
    __typeof__(cuMemcpyHtoDAsync) *htod_async;
    __typeof__(cuMemcpyDtoH) *dtoh;
    __typeof__(cuMemcpyDtoHAsync) *dtoh_async;
    __typeof__(cuMemcpyDtoDAsync) *dtod_async;
    __typeof__(cuMemcpyAsync) *memcpy_async;
    __typeof__(cuMemsetD32Async) *memset32_async;
    __typeof__(cuMemsetD8) *memset8;
    __typeof__(cuStreamSynchronize) *stream_sync;
    __typeof__(cuStreamCreate) *stream_create;
    __typeof__(cuStreamWaitEvent) *stream_wait;
    __typeof__(cuStreamBeginCapture) *begin_capture;
    __typeof__(cuStreamEndCapture) *end_capture;
    __typeof__(cuCtxSynchronize) *ctx_sync;
    __typeof__(cuEventCreate) *event_create;
    __typeof__(cuEventRecord) *event_record;
    __typeof__(cuMemAlloc) *mem_alloc;
    __typeof__(cuMemFree) *mem_free;
    __typeof__(cuMemHostAlloc) *host_alloc;
    CUfunction (*register_kernel)(const char *, fakecuda_kernel_fn, int, const size_t *, int, int);
    void (*get_counts)(fakecuda_counts_t *);
    void (*reset_counts)(void);
    void (*fail_next)(const char *, CUresult);
    int (*fail_pending)(void);
    void (*set_delays)(unsigned launch_us, unsigned graph_launch_us);
    void (*fail_clear)(void);
    void (*hold)(const char *);
    int (*held)(void);
    void (*release)(void);
    /* Added for the replay/API tests (resolved by fk_open like the others). */
    __typeof__(cuGraphInstantiateWithFlags) *graph_instantiate;
    __typeof__(cuGraphLaunch) *graph_launch;
    __typeof__(cuGraphDestroy) *graph_destroy;
    __typeof__(cuGraphExecDestroy) *graph_exec_destroy;
    __typeof__(cuStreamQuery) *stream_query;
    __typeof__(cuStreamDestroy) *stream_destroy;
    __typeof__(cuEventSynchronize) *event_sync;
    __typeof__(cuEventQuery) *event_query;
    __typeof__(cuEventDestroy) *event_destroy;
    __typeof__(cuMemcpyDtoD) *dtod;
    __typeof__(cuMemsetD32) *memset32;
    __typeof__(cuMemFreeHost) *free_host;
    __typeof__(cuDeviceGet) *device_get;
} fk_t;

/* Point cgjit at the fake driver (CGJIT_DRIVER) and resolve everything; asserts on failure. */
void fk_open(fk_t *fk);
/* Path of the fake libcuda.so.1 next to the test executable. */
const char *fk_driver_path(void);
/* Path of `file` in the fake libraries' folder next to the test executable (fakecuda/). */
void fk_fakecuda_file(char *path, size_t size, const char *file);

/* Kernels every test can use (registered by fk_open):
 *  axpb(float *x, float a, float b, int n):        x[i] = a*x[i] + b
 *  addk(float *x, int k, int n):                   x[i] += k
 *  copyscale(float *dst, const float *src, float s, int n): dst[i] = s*src[i]
 *  addk_at(float **cell, int k, int n):            (*cell)[i] += k, the buffer named by no parameter */
extern CUfunction fk_axpb, fk_addk, fk_copyscale, fk_axpb_kernel_handle, fk_opaque, fk_addk_at;

/* One more kernel that computes axpb, named `name`: a CUkernel handle (what the CUDA runtime
 * launches) where as_cukernel, a CUfunction otherwise. */
CUfunction fk_axpb_twin(fk_t *fk, const char *name, bool as_cukernel);
/* The fake driver's counters now. */
fakecuda_counts_t fk_counts(fk_t *fk);
CUdeviceptr fk_alloc_floats(fk_t *fk, int n, unsigned seed);
/* A fresh buffer of n floats, and in ref what it holds. */
CUdeviceptr fk_fresh_floats(fk_t *fk, float *ref, int n);
/* One marked step `anchor` of three axpb kernels on x (n floats), then x read back and checked
 * against the same arithmetic on the host copy ref (updated). */
void fk_axpb3_step(fk_t *fk, const char *anchor, CUdeviceptr x, float *ref, int n);
CUresult fk_axpb_launch(fk_t *fk, CUstream s, CUdeviceptr x, float a, float b, int n, unsigned grid);
CUresult fk_addk_launch(fk_t *fk, CUstream s, CUdeviceptr x, int k, int n);
CUresult fk_copyscale_launch(fk_t *fk, CUstream s, CUdeviceptr dst, CUdeviceptr src, float sc, int n);
CUresult fk_addk_at_launch(fk_t *fk, CUstream s, CUdeviceptr cell, int k, int n);
/* Launch any of the 4-parameter (x, a, b, n) kernels (axpb, its CUkernel and opaque twins) with
 * the plain or per-thread launch function. */
CUresult fk_axpb_launch_f(fk_t *fk, CUfunction f, bool ptsz, CUstream s, CUdeviceptr x, float a, float b, int n,
                          unsigned grid);
/* The launch configuration of those kernels for cuLaunchKernelEx (one block of 32 threads) on
 * stream s, with nattrs attributes. */
static inline CUlaunchConfig fk_ex_config(CUstream s, CUlaunchAttribute *attrs, unsigned nattrs)
{
    return (CUlaunchConfig){.gridDimX = 1,
                            .gridDimY = 1,
                            .gridDimZ = 1,
                            .blockDimX = 32,
                            .blockDimY = 1,
                            .blockDimZ = 1,
                            .hStream = s,
                            .attrs = attrs,
                            .numAttrs = nattrs};
}

/* The program's side of its own graph: end the capture on stream s, instantiate the graph,
 * launch it on s, synchronize s, destroy both; the first error. */
CUresult fk_capture_end_and_run(fk_t *fk, CUstream s);

/* The host's monotonic clock, in ns: what the cost apps time with. */
static inline double fk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline int fk_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[0..n) in ascending order (the cost apps take medians of their timings). */
static inline void fk_sort(double *v, size_t n)
{
    qsort(v, n, sizeof *v, fk_cmp_double);
}

/* cgjit's report (cgj_report) as text, for a test to search; free() it. */
static inline char *fk_report_text(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    cgj_report(f);
    fclose(f);
    return buf;
}

#endif
