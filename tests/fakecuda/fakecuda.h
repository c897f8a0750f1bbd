/*
 * fakecuda.h — test-facing API of the fake CUDA driver (tests/fakecuda/libcuda.so.1).
 *
 * The fake driver runs everything synchronously on the CPU: device memory is host memory (a
 * CUdeviceptr is a host address), and a "kernel" is a host function registered here. Tests
 * register their kernels, drive cgjit (or the driver directly), and compare replayed results
 * with eager ones on the CPU. See fakecuda.c for what the fake implements and how it mirrors
 * the real driver's rules on stream capture.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <stddef.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FAKECUDA_API __attribute__((visibility("default")))
#else
#define FAKECUDA_API
#endif

/* A kernel body: params[i] points to the value of parameter i; grid, block and smem are the
 * launch's dimensions and dynamic shared memory. Runs once per launch, on the launching thread
 * (eager) or the thread that launches the graph. */
typedef void (*fakecuda_kernel_fn)(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem);

/*
 * Register a kernel: returns an opaque handle usable as CUfunction in cuLaunchKernel/Ex (NULL on
 * a bad argument). param_sizes[i] is the byte size of parameter i; offsets are laid out naturally
 * aligned (each aligned to min(size, 8), rounded down to a power of two).
 * If as_cukernel is nonzero the handle behaves like a CUkernel: cuFuncGetParamInfo/cuFuncGetName
 * on it fail with CUDA_ERROR_INVALID_HANDLE and cuKernelGetParamInfo/cuKernelGetName work (this
 * mimics the CUDA runtime, which passes CUkernel handles to cuLaunchKernel); otherwise the reverse.
 * If opaque_layout is nonzero, both param-info calls fail (CUDA_ERROR_NOT_SUPPORTED).
 */
FAKECUDA_API CUfunction fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, int nparams,
                                                 const size_t *param_sizes, int as_cukernel, int opaque_layout);

typedef struct fakecuda_counts {
    unsigned long kernels_run;     /* kernel bodies executed (eagerly or from a graph) */
    unsigned long eager_launches;  /* cuLaunchKernel/Ex calls that executed immediately (not captured) */
    unsigned long graph_launches;  /* cuGraphLaunch calls */
    unsigned long captures;        /* cuStreamBeginCapture calls */
    unsigned long instantiations;  /* cuGraphInstantiate* calls */
    unsigned long node_param_sets; /* cuGraphExec{Kernel,Memcpy,Memset}NodeSetParams calls */
    unsigned long copies;          /* memcpy operations executed (eager or graph) */
    unsigned long memsets;         /* memset operations executed */
    unsigned long syncs;           /* cuStreamSynchronize/cuCtxSynchronize/cuEventSynchronize calls */
    /* allocs: cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocAsync(_ptsz), cuMemAllocFromPoolAsync(_ptsz);
     * frees: cuMemFree_v2 and cuMemFreeAsync(_ptsz), a free of 0 included. Host allocations count in
     * host_allocs (cuMemFreeHost counts nowhere), VMM calls in the vmm_* fields. */
    unsigned long allocs, frees;
    unsigned long host_allocs;    /* cuMemHostAlloc/cuMemAllocHost calls */
    unsigned long host_funcs_run; /* host functions executed */
    /* Fields added later: appended, so code built against the older layout keeps working. */
    unsigned long vmm_reserves;    /* cuMemAddressReserve calls */
    unsigned long vmm_creates;     /* cuMemCreate calls */
    unsigned long vmm_maps;        /* cuMemMap calls */
    unsigned long vmm_unmaps;      /* cuMemUnmap calls (one per call, however many mappings it covers) */
    unsigned long vmm_access_sets; /* cuMemSetAccess calls */
    /* Calls that synchronize the device: everything `syncs` counts, plus cuMemFree_v2 of a nonzero
     * pointer (the real cuMemFree synchronizes). cuMemFreeAsync does not count. */
    unsigned long device_syncs;
    unsigned long device_updates; /* node parameter updates cgjit's patch kernel applied (fakecuda_devpatch.c) */
    unsigned long param_queries;  /* cuFuncGetParamInfo/cuKernelGetParamInfo calls, answered or not */
    unsigned long name_queries;   /* cuFuncGetName/cuKernelGetName calls, answered or not */
} fakecuda_counts_t;

/* Counters count successful calls only (a call failed by fakecuda_fail_next counts nothing). */
FAKECUDA_API void fakecuda_get_counts(fakecuda_counts_t *out);
FAKECUDA_API void fakecuda_reset_counts(void);
/* How many times event ev was recorded, by a stream or by a graph's event record node. */
FAKECUDA_API unsigned fakecuda_event_records(CUevent ev);

/* Fail the next call of the named driver function (exported name, e.g.
 * "cuGraphInstantiateWithFlags") with err, once. Calls queue: failing the same name twice fails
 * its next two calls. The failed call does nothing else. */
FAKECUDA_API void fakecuda_fail_next(const char *exported_name, CUresult err);
/* Failures queued and not taken yet; forget them all. */
FAKECUDA_API int fakecuda_fail_pending(void);
FAKECUDA_API void fakecuda_fail_clear(void);

/* Calls of the named driver function (exported name) wait at their start, from their next,
 * until fakecuda_release; fakecuda_held: how many began waiting since the hold. What a test of
 * work on another thread (cgjit's builder) holds in the middle. */
FAKECUDA_API void fakecuda_hold(const char *exported_name);
FAKECUDA_API int fakecuda_held(void);
FAKECUDA_API void fakecuda_release(void);

/* Host time each eager kernel launch and each graph launch takes (busy wait, microseconds; 0:
 * none): what a test of cgjit's cost model makes cheap or dear. */
FAKECUDA_API void fakecuda_set_delays(unsigned launch_us, unsigned graph_launch_us);

#ifdef __cplusplus
}
#endif
#endif /* FAKECUDA_H */
