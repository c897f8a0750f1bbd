/* fakeapp.c — see fakeapp.h. */
#define _GNU_SOURCE
#include "fakeapp.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

CUfunction fk_axpb, fk_addk, fk_copyscale, fk_axpb_kernel_handle, fk_opaque, fk_addk_at;

void fk_fakecuda_file(char *path, size_t size, const char *file)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert(n > 0, "readlink /proc/self/exe");
    exe[n] = '\0';
    snprintf(path, size, "%s/fakecuda/%s", dirname(exe), file);
}

const char *fk_driver_path(void)
{
    static char path[PATH_MAX];
    fk_fakecuda_file(path, sizeof path, "libcuda.so.1");
    return path;
}

static void k_axpb(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    float *x = *(float **)p[0], a = *(float *)p[1], c = *(float *)p[2];
    int n = *(int *)p[3];
    for (int i = 0; i < n; i++) x[i] = a * x[i] + c + (float)(g[0] - 1);
}

static void k_addk(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    float *x = *(float **)p[0];
    int k = *(int *)p[1], n = *(int *)p[2];
    for (int i = 0; i < n; i++) x[i] += (float)k;
}

static void k_addk_at(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    float *x = **(float ***)p[0]; /* the buffer whose address the cell holds */
    int k = *(int *)p[1], n = *(int *)p[2];
    for (int i = 0; i < n; i++) x[i] += (float)k;
}

static void k_copyscale(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    float *d = *(float **)p[0];
    const float *s = *(const float **)p[1];
    float sc = *(float *)p[2];
    int n = *(int *)p[3];
    for (int i = 0; i < n; i++) d[i] = sc * s[i] + 0.5f * d[i];
}

#define RESOLVE(field, name)                                                             \
    do {                                                                                 \
        CUresult r_ = fk->gpa(name, (void **)&fk->field, 13000, 0, NULL);                \
        cr_assert(r_ == CUDA_SUCCESS && fk->field, "cuGetProcAddress(%s) failed", name); \
    } while (0)

void fk_open(fk_t *fk)
{
    memset(fk, 0, sizeof *fk);
    const char *path = fk_driver_path();
    setenv("CGJIT_DRIVER", path, 1);
    /* Timing decides nothing in these tests unless one asks for it: replay is never turned off
     * for cost, no run is an eager probe (the cost model's own tests set CGJIT_COST=1). */
    setenv("CGJIT_COST", "0", 0);
    /* Nor does the governor make the process dormant (its own tests set CGJIT_GOVERN=1). */
    setenv("CGJIT_GOVERN", "0", 0);
    /* A step records from its first run, so that tests count runs as they always did (the
     * warm-up's own tests set CGJIT_WARMUP_RUNS). */
    setenv("CGJIT_WARMUP_RUNS", "0", 0);
    /* A step is built at the end of the run that completes its recording and replays from the
     * next, so that tests count runs as they always did (the background builder's own tests set
     * CGJIT_BUILD_BACKGROUND=1). */
    setenv("CGJIT_BUILD_BACKGROUND", "0", 0);
    /* Small steps are graphs here, so that every test's few ops exercise the graphs (tests of
     * the eager small segments set CGJIT_GRAPH_MIN_OPS themselves). */
    setenv("CGJIT_GRAPH_MIN_OPS", "1", 0);
    /* A fused kernel is compiled at the build, so that a test's trace holds it when built (the
     * background compiler's own test sets CGJIT_FUSE_BACKGROUND=1). */
    setenv("CGJIT_FUSE_BACKGROUND", "0", 0);
    fk->handle = dlopen(path, RTLD_NOW);
    cr_assert(fk->handle, "dlopen %s: %s", path, dlerror());
    fk->gpa = (__typeof__(fk->gpa))dlsym(fk->handle, "cuGetProcAddress_v2");
    cr_assert(fk->gpa);
    RESOLVE(launch, "cuLaunchKernel");
    CUresult r = fk->gpa("cuLaunchKernel", (void **)&fk->launch_ptsz, 13000,
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
    cr_assert(r == CUDA_SUCCESS);
    RESOLVE(launch_ex, "cuLaunchKernelEx");
    RESOLVE(host_func, "cuLaunchHostFunc");
    RESOLVE(htod, "cuMemcpyHtoD");
    RESOLVE(htod_async, "cuMemcpyHtoDAsync");
    RESOLVE(dtoh, "cuMemcpyDtoH");
    RESOLVE(dtoh_async, "cuMemcpyDtoHAsync");
    RESOLVE(dtod_async, "cuMemcpyDtoDAsync");
    RESOLVE(memcpy_async, "cuMemcpyAsync");
    RESOLVE(memset32_async, "cuMemsetD32Async");
    RESOLVE(memset8, "cuMemsetD8");
    RESOLVE(stream_sync, "cuStreamSynchronize");
    RESOLVE(stream_create, "cuStreamCreate");
    RESOLVE(stream_wait, "cuStreamWaitEvent");
    RESOLVE(begin_capture, "cuStreamBeginCapture");
    RESOLVE(end_capture, "cuStreamEndCapture");
    RESOLVE(ctx_sync, "cuCtxSynchronize");
    RESOLVE(event_create, "cuEventCreate");
    RESOLVE(event_record, "cuEventRecord");
    RESOLVE(mem_alloc, "cuMemAlloc");
    RESOLVE(mem_free, "cuMemFree");
    RESOLVE(host_alloc, "cuMemHostAlloc");
    RESOLVE(graph_instantiate, "cuGraphInstantiate");
    RESOLVE(graph_launch, "cuGraphLaunch");
    RESOLVE(graph_destroy, "cuGraphDestroy");
    RESOLVE(graph_exec_destroy, "cuGraphExecDestroy");
    RESOLVE(stream_query, "cuStreamQuery");
    RESOLVE(stream_destroy, "cuStreamDestroy");
    RESOLVE(event_sync, "cuEventSynchronize");
    RESOLVE(event_query, "cuEventQuery");
    RESOLVE(event_destroy, "cuEventDestroy");
    RESOLVE(dtod, "cuMemcpyDtoD");
    RESOLVE(memset32, "cuMemsetD32");
    RESOLVE(free_host, "cuMemFreeHost");
    RESOLVE(device_get, "cuDeviceGet");
    fk->register_kernel = (__typeof__(fk->register_kernel))dlsym(fk->handle, "fakecuda_register_kernel");
    fk->get_counts = (__typeof__(fk->get_counts))dlsym(fk->handle, "fakecuda_get_counts");
    fk->reset_counts = (__typeof__(fk->reset_counts))dlsym(fk->handle, "fakecuda_reset_counts");
    fk->fail_next = (__typeof__(fk->fail_next))dlsym(fk->handle, "fakecuda_fail_next");
    fk->fail_pending = (__typeof__(fk->fail_pending))dlsym(fk->handle, "fakecuda_fail_pending");
    fk->set_delays = (__typeof__(fk->set_delays))dlsym(fk->handle, "fakecuda_set_delays");
    fk->fail_clear = (__typeof__(fk->fail_clear))dlsym(fk->handle, "fakecuda_fail_clear");
    fk->hold = (__typeof__(fk->hold))dlsym(fk->handle, "fakecuda_hold");
    fk->held = (__typeof__(fk->held))dlsym(fk->handle, "fakecuda_held");
    fk->release = (__typeof__(fk->release))dlsym(fk->handle, "fakecuda_release");
    cr_assert(fk->register_kernel && fk->get_counts && fk->reset_counts && fk->fail_next);
    size_t s4[] = {8, 4, 4, 4}, s3[] = {8, 4, 4}, s_cs[] = {8, 8, 4, 4};
    fk_axpb = fk->register_kernel("axpb", k_axpb, 4, s4, 0, 0);
    fk_addk = fk->register_kernel("addk", k_addk, 3, s3, 0, 0);
    fk_copyscale = fk->register_kernel("copyscale", k_copyscale, 4, s_cs, 0, 0);
    fk_axpb_kernel_handle = fk->register_kernel("axpb_cukernel", k_axpb, 4, s4, 1, 0);
    fk_opaque = fk->register_kernel("axpb_opaque", k_axpb, 4, s4, 0, 1);
    fk_addk_at = fk->register_kernel("addk_at", k_addk_at, 3, s3, 0, 0);
}

CUfunction fk_axpb_twin(fk_t *fk, const char *name, bool as_cukernel)
{
    size_t s4[] = {8, 4, 4, 4};
    return fk->register_kernel(name, k_axpb, 4, s4, as_cukernel ? 1 : 0, 0);
}

fakecuda_counts_t fk_counts(fk_t *fk)
{
    fakecuda_counts_t c;
    fk->get_counts(&c);
    return c;
}

CUdeviceptr fk_alloc_floats(fk_t *fk, int n, unsigned seed)
{
    CUdeviceptr d = 0;
    cr_assert(fk->mem_alloc(&d, n * sizeof(float)) == CUDA_SUCCESS);
    float *h = (float *)(uintptr_t)d; /* fake device memory is host memory */
    for (int i = 0; i < n; i++) h[i] = (float)((seed * 2654435761u + i * 40503u) % 1000) / 100.0f;
    return d;
}

CUresult fk_axpb_launch(fk_t *fk, CUstream s, CUdeviceptr x, float a, float b, int n, unsigned grid)
{
    void *p[] = {&x, &a, &b, &n};
    return fk->launch(fk_axpb, grid, 1, 1, 32, 1, 1, 0, s, p, NULL);
}

CUresult fk_addk_launch(fk_t *fk, CUstream s, CUdeviceptr x, int k, int n)
{
    void *p[] = {&x, &k, &n};
    return fk->launch(fk_addk, 1, 1, 1, 32, 1, 1, 0, s, p, NULL);
}

CUresult fk_addk_at_launch(fk_t *fk, CUstream s, CUdeviceptr cell, int k, int n)
{
    void *p[] = {&cell, &k, &n};
    return fk->launch(fk_addk_at, 1, 1, 1, 32, 1, 1, 0, s, p, NULL);
}

CUresult fk_copyscale_launch(fk_t *fk, CUstream s, CUdeviceptr dst, CUdeviceptr src, float sc, int n)
{
    void *p[] = {&dst, &src, &sc, &n};
    return fk->launch(fk_copyscale, 1, 1, 1, 32, 1, 1, 0, s, p, NULL);
}

CUresult fk_axpb_launch_f(fk_t *fk, CUfunction f, bool ptsz, CUstream s, CUdeviceptr x, float a, float b, int n,
                          unsigned grid)
{
    void *p[] = {&x, &a, &b, &n};
    return (ptsz ? fk->launch_ptsz : fk->launch)(f, grid, 1, 1, 32, 1, 1, 0, s, p, NULL);
}

CUresult fk_capture_end_and_run(fk_t *fk, CUstream s)
{
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    CUresult r = fk->end_capture(s, &g);
    if (r == CUDA_SUCCESS) r = fk->graph_instantiate(&e, g, 0);
    if (r == CUDA_SUCCESS) r = fk->graph_launch(e, s);
    if (r == CUDA_SUCCESS) r = fk->stream_sync(s);
    if (e) fk->graph_exec_destroy(e);
    if (g) fk->graph_destroy(g);
    return r;
}

void fk_axpb3_step(fk_t *fk, const char *anchor, CUdeviceptr x, float *ref, int n)
{
    cr_assert_eq(cgj_trace_begin(anchor), CGJ_OK);
    cr_assert_eq(fk_axpb_launch(fk, NULL, x, 1.5f, 0.5f, n, 1), CUDA_SUCCESS);
    cr_assert_eq(fk_axpb_launch(fk, NULL, x, 0.5f, 1.0f, n, 1), CUDA_SUCCESS);
    cr_assert_eq(fk_axpb_launch(fk, NULL, x, 0.25f, -1.0f, n, 1), CUDA_SUCCESS);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    for (int i = 0; i < n; i++) ref[i] = 0.25f * (0.5f * (1.5f * ref[i] + 0.5f) + 1.0f) - 1.0f;
    float *h = malloc((size_t)n * sizeof *h);
    cr_assert(h);
    cr_assert_eq(fk->dtoh(h, x, (size_t)n * sizeof *h), CUDA_SUCCESS);
    for (int i = 0; i < n; i++) cr_assert_eq(h[i], ref[i], "x[%d] = %g, eager gives %g", i, h[i], ref[i]);
    free(h);
}

CUdeviceptr fk_fresh_floats(fk_t *fk, float *ref, int n)
{
    CUdeviceptr x = fk_alloc_floats(fk, n, 3);
    cr_assert_eq(fk->dtoh(ref, x, (size_t)n * sizeof(float)), CUDA_SUCCESS);
    return x;
}
