/*
 * test_wrapped_errors.c — every driver function cgjit wraps (each W row of CGJ_DRIVER_WRAPPED in
 * base/driver.h, the untraceable U rows included) hands the driver's error back to the program
 * unchanged: the fake driver fails the call once with CUDA_ERROR_NOT_PERMITTED and cgjit's
 * wrapper must return exactly that, outside any step and inside a step whose anchor replays.
 *
 * The rows come from the X-macro itself, so the list cannot drift: each row names its prototype,
 * and the row's caller is caller_<prototype>, a function that calls a function of that type with
 * plausible valid arguments (real fake device buffers, a stream, an event, a registered kernel,
 * an array, a graph exec ...). A new prototype in driver.h without a caller here does not compile.
 * The two rows without a caller are cuGetProcAddress and cuGetProcAddress_v2: failing them would
 * fail the very look-ups the test makes (caller NULL, counted as skipped).
 *
 * Each function is reached as a program reaches it: cuGetProcAddress with the API name (the
 * prototype column; the per-thread flag for the _ptds/_ptsz exports), checked to be cgjit's
 * wrapper (it lies in libcgjit) and the same pointer dlsym hands out for the exported name.
 *
 * Inside a step: a fresh anchor (named after the export) runs a step of two ops three times, so
 * that it replays; the fourth run issues the same two ops and then the failing call. The call
 * must return the injected error, cgj_trace_end() must return CGJ_OK, the context must
 * synchronize cleanly afterwards and the step's own work must have happened exactly once per
 * step (the program keeps running, with the right results).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cgjit.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "base/driver.h"
#include "fakeapp.h"

#define INJECTED CUDA_ERROR_NOT_PERMITTED
#define N 64         /* floats of the step's buffers */
#define SCRATCH 4096 /* bytes of each scratch buffer the failing calls name */
#define COPY 256     /* bytes each failing copy would move */

static fk_t fk;

static void setup(void)
{
    fk_open(&fk);
}
TestSuite(runtime_wrapped_errors, .init = setup, .timeout = 120);

#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s failed", #call)

/* Everything the failing calls name: created once, never consumed (a failed call does nothing). */
typedef struct env {
    CUstream s, cap; /* cap: the stream cuStreamBeginCapture names */
    CUevent ev;
    CUcontext ctx;
    CUdeviceptr a, b, val;        /* scratch device buffers; val zeroed, for stream memory ops */
    CUdeviceptr victim;           /* what the frees name */
    void *pinned, *pinned_victim; /* cuMemHostAlloc */
    void *registered;             /* cuMemHostRegister */
    unsigned char host[SCRATCH];
    CUarray arr, arr2;
    CUgraphExec exec;
    CUgraph graph; /* what cuStreamBeginCaptureToGraph names */
    CUmemoryPool pool;
    /* the kernel's parameters: axpb(a, 1, 0, 16) */
    CUdeviceptr kx;
    float ka, kb;
    int kn;
    void *kparams[4];
} env_t;

static env_t env;

static void *gpa(const char *name, cuuint64_t flags)
{
    void *p = NULL;
    CUresult r = fk.gpa(name, &p, 13000, flags, NULL);
    cr_assert(r == CUDA_SUCCESS && p, "cuGetProcAddress(%s, %llu) = %d", name, (unsigned long long)flags, (int)r);
    return p;
}

static void env_init(env_t *e)
{
    memset(e, 0, sizeof *e);
    OK(fk.stream_create(&e->s, CU_STREAM_NON_BLOCKING));
    OK(fk.stream_create(&e->cap, CU_STREAM_NON_BLOCKING));
    OK(fk.event_create(&e->ev, CU_EVENT_DISABLE_TIMING));
    OK(((__typeof__(cuCtxGetCurrent) *)gpa("cuCtxGetCurrent", 0))(&e->ctx));
    OK(fk.mem_alloc(&e->a, SCRATCH));
    OK(fk.mem_alloc(&e->b, SCRATCH));
    OK(fk.mem_alloc(&e->val, SCRATCH));
    OK(fk.memset8(e->val, 0, SCRATCH));
    OK(fk.mem_alloc(&e->victim, SCRATCH));
    OK(fk.host_alloc(&e->pinned, SCRATCH, 0));
    OK(fk.host_alloc(&e->pinned_victim, SCRATCH, 0));
    e->registered = aligned_alloc(4096, SCRATCH);
    cr_assert(e->registered);
    OK(((__typeof__(cuMemHostRegister) *)gpa("cuMemHostRegister", 0))(e->registered, SCRATCH, 0));
    CUDA_ARRAY_DESCRIPTOR d = {.Width = SCRATCH / 4, .Height = 0, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    __typeof__(cuArrayCreate) *array_create = gpa("cuArrayCreate", 0);
    OK(array_create(&e->arr, &d));
    OK(array_create(&e->arr2, &d));
    CUgraph g;
    OK(((__typeof__(cuGraphCreate) *)gpa("cuGraphCreate", 0))(&g, 0));
    OK(fk.graph_instantiate(&e->exec, g, 0));
    OK(((__typeof__(cuGraphCreate) *)gpa("cuGraphCreate", 0))(&e->graph, 0));
    OK(((__typeof__(cuDeviceGetDefaultMemPool) *)gpa("cuDeviceGetDefaultMemPool", 0))(&e->pool, 0));
    e->kx = e->a, e->ka = 1.0f, e->kb = 0.0f, e->kn = 16;
    e->kparams[0] = &e->kx, e->kparams[1] = &e->ka, e->kparams[2] = &e->kb, e->kparams[3] = &e->kn;
}

static void host_noop(void *data)
{
    (void)data;
}
static void callback_noop(CUstream s, CUresult status, void *data)
{
    (void)s, (void)status, (void)data;
}

/* ---------------------------------------------------------------------------------------------
 * Callers, one per prototype of the table: caller_<prototype>(fn, e) calls fn, a function of
 * that prototype, with plausible valid arguments. CALL(proto, args) writes the simple ones.
 * ------------------------------------------------------------------------------------------- */

typedef CUresult (*caller_t)(void *fn, env_t *e);

#define CALL(proto, ...)                                 \
    static CUresult caller_##proto(void *fn_, env_t *e)  \
    {                                                    \
        __typeof__(proto) *f = (__typeof__(proto) *)fn_; \
        (void)e;                                         \
        return f(__VA_ARGS__);                           \
    }

/* Skipped rows: failing cuGetProcAddress would fail the look-ups themselves. */
#define caller_cgj_proto_gpa_v1 NULL
#define caller_cuGetProcAddress NULL

CALL(cuLaunchKernel, fk_axpb, 1, 1, 1, 32, 1, 1, 0, e->s, e->kparams, NULL)
CALL(cuLaunchHostFunc, e->s, host_noop, NULL)
CALL(cuMemcpy, e->b, e->a, COPY)
CALL(cuMemcpyAsync, e->b, e->a, COPY, e->s)
CALL(cuMemcpyHtoD, e->a, e->host, COPY)
CALL(cuMemcpyDtoH, e->host, e->a, COPY)
CALL(cuMemcpyDtoD, e->b, e->a, COPY)
CALL(cuMemcpyHtoDAsync, e->a, e->pinned, COPY, e->s)
CALL(cuMemcpyDtoHAsync, e->pinned, e->a, COPY, e->s)
CALL(cuMemcpyDtoDAsync, e->b, e->a, COPY, e->s)
CALL(cuMemsetD8, e->a, 1, COPY)
CALL(cuMemsetD16, e->a, 1, COPY / 2)
CALL(cuMemsetD32, e->a, 1, COPY / 4)
CALL(cuMemsetD8Async, e->a, 1, COPY, e->s)
CALL(cuMemsetD16Async, e->a, 1, COPY / 2, e->s)
CALL(cuMemsetD32Async, e->a, 1, COPY / 4, e->s)
CALL(cuEventRecord, e->ev, e->s)
CALL(cuEventRecordWithFlags, e->ev, e->s, 0)
CALL(cuStreamWaitEvent, e->s, e->ev, 0)
CALL(cuStreamSynchronize, e->s)
CALL(cuStreamQuery, e->s)
CALL(cuCtxSynchronize)
CALL(cuCtxSynchronize_v2, e->ctx)
CALL(cuEventSynchronize, e->ev)
CALL(cuEventQuery, e->ev)
CALL(cuGraphLaunch, e->exec, e->s)
CALL(cuMemFree, e->victim)
CALL(cuMemFreeAsync, e->victim, e->s)
CALL(cuMemFreeHost, e->pinned_victim)
CALL(cuMemHostUnregister, e->registered)
CALL(cuCtxSetCurrent, e->ctx)
CALL(cuCtxPushCurrent, e->ctx)
CALL(cuModuleUnload, (CUmodule)e->ctx)
CALL(cuLibraryUnload, (CUlibrary)e->ctx)
CALL(cuCtxDestroy, e->ctx)
CALL(cuDevicePrimaryCtxReset, 0)
CALL(cuDevicePrimaryCtxRelease, 0)
CALL(cuMemcpyPeer, e->b, e->ctx, e->a, e->ctx, COPY)
CALL(cuMemcpyPeerAsync, e->b, e->ctx, e->a, e->ctx, COPY, e->s)
CALL(cuMemsetD2D8, e->a, 64, 1, 32, 4)
CALL(cuMemsetD2D8Async, e->a, 64, 1, 32, 4, e->s)
CALL(cuMemsetD2D16, e->a, 64, 1, 16, 4)
CALL(cuMemsetD2D16Async, e->a, 64, 1, 16, 4, e->s)
CALL(cuMemsetD2D32, e->a, 64, 1, 8, 4)
CALL(cuMemsetD2D32Async, e->a, 64, 1, 8, 4, e->s)
CALL(cuLaunchCooperativeKernel, fk_axpb, 1, 1, 1, 32, 1, 1, 0, e->s, e->kparams)
CALL(cuStreamBeginCapture, e->cap, CU_STREAM_CAPTURE_MODE_GLOBAL)
CALL(cuStreamBeginCaptureToGraph, e->cap, e->graph, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL)
static CUresult caller_cuStreamEndCapture(void *fn, env_t *e)
{
    CUgraph g = NULL;
    return ((__typeof__(cuStreamEndCapture) *)fn)(e->cap, &g);
}
CALL(cuStreamAddCallback, e->s, callback_noop, NULL, 0)
CALL(cuStreamWriteValue32, e->s, e->val, 1, 0)
CALL(cuStreamWaitValue32, e->s, e->val, 0, CU_STREAM_WAIT_VALUE_GEQ)
CALL(cuStreamWriteValue64, e->s, e->val + 8, 1, 0)
CALL(cuStreamWaitValue64, e->s, e->val + 8, 0, CU_STREAM_WAIT_VALUE_GEQ)
CALL(cuMemcpyAtoA, e->arr2, 0, e->arr, 0, COPY)
CALL(cuMemcpyAtoD, e->a, e->arr, 0, COPY)
CALL(cuMemcpyAtoH, e->host, e->arr, 0, COPY)
CALL(cuMemcpyDtoA, e->arr, 0, e->a, COPY)
CALL(cuMemcpyHtoA, e->arr, 0, e->host, COPY)
CALL(cuMemcpyAtoHAsync, e->pinned, e->arr, 0, COPY, e->s)
CALL(cuMemcpyHtoAAsync, e->arr, 0, e->pinned, COPY, e->s)
CALL(cuCtxWaitEvent, e->ctx, e->ev)
CALL(cuGraphUpload, e->exec, e->s)

static CUresult caller_cuLaunchKernelEx(void *fn, env_t *e)
{
    CUlaunchConfig cfg = fk_ex_config(e->s, NULL, 0);
    return ((__typeof__(cuLaunchKernelEx) *)fn)(&cfg, fk_axpb, e->kparams, NULL);
}

static CUresult caller_cuMemAlloc(void *fn, env_t *e)
{
    CUdeviceptr p = 0;
    (void)e;
    return ((__typeof__(cuMemAlloc) *)fn)(&p, COPY);
}

static CUresult caller_cuMemAllocPitch(void *fn, env_t *e)
{
    CUdeviceptr p = 0;
    size_t pitch = 0;
    (void)e;
    return ((__typeof__(cuMemAllocPitch) *)fn)(&p, &pitch, 64, 4, 4);
}

static CUresult caller_cuMemAllocAsync(void *fn, env_t *e)
{
    CUdeviceptr p = 0;
    return ((__typeof__(cuMemAllocAsync) *)fn)(&p, COPY, e->s);
}

static CUresult caller_cuMemAllocFromPoolAsync(void *fn, env_t *e)
{
    CUdeviceptr p = 0;
    return ((__typeof__(cuMemAllocFromPoolAsync) *)fn)(&p, COPY, e->pool, e->s);
}

static CUresult caller_cuCtxPopCurrent(void *fn, env_t *e)
{
    CUcontext c = NULL;
    (void)e;
    return ((__typeof__(cuCtxPopCurrent) *)fn)(&c);
}

/* device to device, 4 rows of 32 bytes, pitch 64 */
static CUDA_MEMCPY2D copy2d(const env_t *e)
{
    return (CUDA_MEMCPY2D){.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                           .srcDevice = e->a,
                           .srcPitch = 64,
                           .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                           .dstDevice = e->b,
                           .dstPitch = 64,
                           .WidthInBytes = 32,
                           .Height = 4};
}

static CUresult caller_cuMemcpy2D(void *fn, env_t *e)
{
    CUDA_MEMCPY2D p = copy2d(e);
    return ((__typeof__(cuMemcpy2D) *)fn)(&p);
}

static CUresult caller_cuMemcpy2DUnaligned(void *fn, env_t *e)
{
    CUDA_MEMCPY2D p = copy2d(e);
    return ((__typeof__(cuMemcpy2DUnaligned) *)fn)(&p);
}

static CUresult caller_cuMemcpy2DAsync(void *fn, env_t *e)
{
    CUDA_MEMCPY2D p = copy2d(e);
    return ((__typeof__(cuMemcpy2DAsync) *)fn)(&p, e->s);
}

/* device to device, 2 slices of 4 rows of 32 bytes, pitch 64, 4 rows a slice */
static CUDA_MEMCPY3D copy3d(const env_t *e)
{
    return (CUDA_MEMCPY3D){.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                           .srcDevice = e->a,
                           .srcPitch = 64,
                           .srcHeight = 4,
                           .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                           .dstDevice = e->b,
                           .dstPitch = 64,
                           .dstHeight = 4,
                           .WidthInBytes = 32,
                           .Height = 4,
                           .Depth = 2};
}

static CUresult caller_cuMemcpy3D(void *fn, env_t *e)
{
    CUDA_MEMCPY3D p = copy3d(e);
    return ((__typeof__(cuMemcpy3D) *)fn)(&p);
}

static CUresult caller_cuMemcpy3DAsync(void *fn, env_t *e)
{
    CUDA_MEMCPY3D p = copy3d(e);
    return ((__typeof__(cuMemcpy3DAsync) *)fn)(&p, e->s);
}

static CUDA_MEMCPY3D_PEER copy3d_peer(const env_t *e)
{
    return (CUDA_MEMCPY3D_PEER){.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                                .srcDevice = e->a,
                                .srcContext = e->ctx,
                                .srcPitch = 64,
                                .srcHeight = 4,
                                .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                                .dstDevice = e->b,
                                .dstContext = e->ctx,
                                .dstPitch = 64,
                                .dstHeight = 4,
                                .WidthInBytes = 32,
                                .Height = 4,
                                .Depth = 2};
}

static CUresult caller_cuMemcpy3DPeer(void *fn, env_t *e)
{
    CUDA_MEMCPY3D_PEER p = copy3d_peer(e);
    return ((__typeof__(cuMemcpy3DPeer) *)fn)(&p);
}

static CUresult caller_cuMemcpy3DPeerAsync(void *fn, env_t *e)
{
    CUDA_MEMCPY3D_PEER p = copy3d_peer(e);
    return ((__typeof__(cuMemcpy3DPeerAsync) *)fn)(&p, e->s);
}

/* write 7, then wait until it is there */
static CUresult caller_cuStreamBatchMemOp(void *fn, env_t *e)
{
    CUstreamBatchMemOpParams p[2];
    memset(p, 0, sizeof p);
    p[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p[0].writeValue.address = e->val + 16;
    p[0].writeValue.value = 7;
    p[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p[1].waitValue.address = e->val + 16;
    p[1].waitValue.value = 7;
    p[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    return ((__typeof__(cuStreamBatchMemOp) *)fn)(e->s, 2, p, 0);
}

static const CUmemLocation device0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};

static CUresult caller_cuMemPrefetchAsync(void *fn, env_t *e)
{
    return ((__typeof__(cuMemPrefetchAsync) *)fn)(e->a, COPY, device0, 0, e->s);
}

static CUresult caller_cuMemcpyBatchAsync(void *fn, env_t *e)
{
    CUdeviceptr dsts[] = {e->b, e->b + COPY}, srcs[] = {e->a, e->a + COPY};
    size_t sizes[] = {COPY, COPY}, idx[] = {0};
    CUmemcpyAttributes attrs[] = {
        {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, .srcLocHint = device0, .dstLocHint = device0}};
    return ((__typeof__(cuMemcpyBatchAsync) *)fn)(dsts, srcs, sizes, 2, attrs, idx, 1, e->s);
}

static CUresult caller_cuMemcpy3DBatchAsync(void *fn, env_t *e)
{
    CUDA_MEMCPY3D_BATCH_OP op = {
        .src = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = {.ptr = e->a, .rowLength = 64, .locHint = device0}},
        .dst = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER, .op.ptr = {.ptr = e->b, .rowLength = 64, .locHint = device0}},
        .extent = {.width = 32, .height = 4, .depth = 1},
        .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    return ((__typeof__(cuMemcpy3DBatchAsync) *)fn)(1, &op, 0, e->s);
}

static CUresult caller_cuMemPrefetchBatchAsync(void *fn, env_t *e)
{
    CUdeviceptr p[] = {e->a, e->b};
    size_t sizes[] = {COPY, COPY}, idx[] = {0};
    CUmemLocation locs[] = {device0};
    return ((__typeof__(cuMemPrefetchBatchAsync) *)fn)(p, sizes, 2, locs, idx, 1, 0, e->s);
}

static CUresult caller_cuMemDiscardBatchAsync(void *fn, env_t *e)
{
    CUdeviceptr p[] = {e->a, e->b};
    size_t sizes[] = {COPY, COPY};
    return ((__typeof__(cuMemDiscardBatchAsync) *)fn)(p, sizes, 2, 0, e->s);
}

static CUresult caller_cuMemDiscardAndPrefetchBatchAsync(void *fn, env_t *e)
{
    CUdeviceptr p[] = {e->a, e->b};
    size_t sizes[] = {COPY, COPY}, idx[] = {0};
    CUmemLocation locs[] = {device0};
    return ((__typeof__(cuMemDiscardAndPrefetchBatchAsync) *)fn)(p, sizes, 2, locs, idx, 1, 0, e->s);
}

static CUresult caller_cuMemBatchDecompressAsync(void *fn, env_t *e)
{
    CUmemDecompressParams p = {.srcNumBytes = 64,
                               .dstNumBytes = COPY,
                               .dstActBytes = (cuuint32_t *)(uintptr_t)e->val,
                               .src = (const void *)(uintptr_t)e->a,
                               .dst = (void *)(uintptr_t)e->b,
                               .algo = CU_MEM_DECOMPRESS_ALGORITHM_DEFLATE};
    size_t error_index = 0;
    return ((__typeof__(cuMemBatchDecompressAsync) *)fn)(&p, 1, 0, &error_index, e->s);
}

static CUresult caller_cuMemMapArrayAsync(void *fn, env_t *e)
{
    CUarrayMapInfo info;
    memset(&info, 0, sizeof info);
    info.resourceType = CU_RESOURCE_TYPE_ARRAY;
    info.resource.array = e->arr;
    info.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_MIPTAIL;
    info.memOperationType = CU_MEM_OPERATION_TYPE_UNMAP;
    info.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
    info.deviceBitMask = 1;
    return ((__typeof__(cuMemMapArrayAsync) *)fn)(&info, 1, e->s);
}

/* The fake cannot import an external semaphore: the handle is a stand-in (the injected failure
 * comes before any look at it). */
#define SOME_SEMAPHORE ((CUexternalSemaphore)(uintptr_t)0x5e4a)

static CUresult caller_cuSignalExternalSemaphoresAsync(void *fn, env_t *e)
{
    CUexternalSemaphore sem = SOME_SEMAPHORE;
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS p;
    memset(&p, 0, sizeof p);
    p.params.fence.value = 1;
    return ((__typeof__(cuSignalExternalSemaphoresAsync) *)fn)(&sem, &p, 1, e->s);
}

static CUresult caller_cuWaitExternalSemaphoresAsync(void *fn, env_t *e)
{
    CUexternalSemaphore sem = SOME_SEMAPHORE;
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS p;
    memset(&p, 0, sizeof p);
    p.params.fence.value = 1;
    return ((__typeof__(cuWaitExternalSemaphoresAsync) *)fn)(&sem, &p, 1, e->s);
}

static CUresult caller_cgj_proto_coop_multi(void *fn, env_t *e)
{
    CUDA_LAUNCH_PARAMS lp = {.function = fk_axpb,
                             .gridDimX = 1,
                             .gridDimY = 1,
                             .gridDimZ = 1,
                             .blockDimX = 32,
                             .blockDimY = 1,
                             .blockDimZ = 1,
                             .hStream = e->s,
                             .kernelParams = e->kparams};
    return ((__typeof__(cgj_proto_coop_multi) *)fn)(&lp, 1, 0);
}

/* ---------------------------------------------------------------------------------------------
 * The table: every W row, expanded from base/driver.h.
 * ------------------------------------------------------------------------------------------- */

typedef struct row {
    const char *exported, *proto;
    caller_t call; /* NULL: skipped */
} row_t;

#define ROW(exported, proto, ...) {#exported, #proto, caller_##proto},
static const row_t rows[] = {CGJ_DRIVER_WRAPPED(ROW)};
#undef ROW
enum { NROWS = sizeof rows / sizeof rows[0] };

static const char *const expected_skips[] = {"cuGetProcAddress", "cuGetProcAddress_v2"};
enum { NSKIPS = sizeof expected_skips / sizeof expected_skips[0] };

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool in_cgjit(const void *p)
{
    Dl_info di;
    return dladdr(p, &di) && di.dli_fname && strstr(di.dli_fname, "libcgjit");
}

/* The row's function as a program gets it: cuGetProcAddress with the API name (the prototype's
 * name; the export's own where the prototype is cgjit's stand-in) and the per-thread flag for
 * the _ptds/_ptsz exports. It must be cgjit's wrapper of exactly that export. */
static void *resolve(const row_t *r)
{
    const char *api = strncmp(r->proto, "cgj_", 4) == 0 ? r->exported : r->proto;
    bool pt = ends_with(r->exported, "_ptds") || ends_with(r->exported, "_ptsz");
    void *p = gpa(api, pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0);
    cr_assert(in_cgjit(p), "cuGetProcAddress(%s%s) is not a cgjit wrapper", api, pt ? ", per-thread" : "");
    cr_assert_eq(p, dlsym(fk.handle, r->exported), "cuGetProcAddress(%s) and dlsym(%s) disagree", api, r->exported);
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * The step: x = 1*x + 1 (kernel axpb) and y set (memset), on stream s. When the failing call
 * leaves the replayed trace, cgjit first re-issues the ops it absorbed (tracer/exits.c), through
 * cuLaunchKernel and cuMemsetD32Async for variant A of the step: that re-issue would take a
 * failure queued for either name (and hand it to the program at its next call, by design), so
 * the rows of those two functions use variant B, re-issued through cuLaunchKernelEx (the launch
 * has an attribute) and cuMemsetD16Async.
 * ------------------------------------------------------------------------------------------- */

typedef struct step_variant {
    const char *reissued[2]; /* the driver functions re-issuing its absorbed ops goes through */
    uint32_t y_bits;         /* what its memset leaves in each float of y */
} step_variant_t;

static const step_variant_t variant_a = {{"cuLaunchKernel", "cuMemsetD32Async"}, 0x3f800000u},
                            variant_b = {{"cuLaunchKernelEx", "cuMemsetD16Async"}, 0x3f803f80u};

static CUdeviceptr g_x, g_y;
static float g_xe[N];    /* what x must hold: the step's arithmetic, on the host */
static uint32_t g_ye;    /* what each float of y must hold */
static int g_mismatches; /* checks where x or y did not hold that */

static const step_variant_t *variant_for(const char *exported)
{
    for (int k = 0; k < 2; k++)
        if (strcmp(exported, variant_a.reissued[k]) == 0) return &variant_b;
    return &variant_a;
}

static void step_ops(const step_variant_t *v)
{
    CUdeviceptr x = g_x;
    float a = 1.0f, b = 1.0f;
    int n = N;
    void *params[] = {&x, &a, &b, &n};
    if (v == &variant_a) {
        OK(fk.launch(fk_axpb, 1, 1, 1, 32, 1, 1, 0, env.s, params, NULL));
        OK(fk.memset32_async(g_y, 0x3f800000u, N, env.s));
    } else {
        CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = 0};
        CUlaunchConfig cfg = fk_ex_config(env.s, &attr, 1);
        OK(fk.launch_ex(&cfg, fk_axpb, params, NULL));
        OK(((__typeof__(cuMemsetD16Async) *)gpa("cuMemsetD16Async", 0))(g_y, 0x3f80, 2 * N, env.s));
    }
    for (int i = 0; i < N; i++) g_xe[i] = a * g_xe[i] + b + (float)(1 - 1); /* as k_axpb computes it */
    g_ye = v->y_bits;
}

/* After the context synchronizes, x and y hold what every step's work, each issued once, makes. */
static void check_step_results(const char *after)
{
    float x[N];
    uint32_t y[N];
    CUresult sync = fk.ctx_sync();
    cr_expect_eq(sync, CUDA_SUCCESS, "after %s: cuCtxSynchronize() = %d", after, (int)sync);
    OK(fk.dtoh(x, g_x, sizeof x));
    OK(fk.dtoh(y, g_y, sizeof y));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += x[i] != g_xe[i] || y[i] != g_ye;
    cr_expect_eq(bad, 0, "after %s: x[0] = %g (want %g), y[0] = %#x (want %#x): %d of %d elements differ", after, x[0],
                 g_xe[0], y[0], g_ye, bad, N);
    if (bad) {
        g_mismatches++;
        memcpy(g_xe, x, sizeof x); /* go on from what is there */
    }
}

/* Fail the row's next call, make it, and tell what came back (and whether the failure was
 * taken: a call cgjit did not pass on leaves it pending). */
static CUresult fail_once(const row_t *r, void *fn, bool *taken)
{
    fk.fail_next(r->exported, INJECTED);
    CUresult got = r->call(fn, &env);
    *taken = fk.fail_pending() == 0;
    fk.fail_clear();
    return got;
}

Test(runtime_wrapped_errors, every_wrapped_function_returns_the_drivers_error)
{
    env_init(&env);
    g_x = fk_alloc_floats(&fk, N, 5);
    OK(fk.mem_alloc(&g_y, N * sizeof(float)));
    OK(fk.dtoh(g_xe, g_x, sizeof g_xe));

    int covered = 0, skipped = 0, wrong = 0, left_trace = 0;
    for (int i = 0; i < NROWS; i++) {
        const row_t *r = &rows[i];
        if (!r->call) {
            bool expected = false;
            for (int k = 0; k < NSKIPS; k++) expected |= strcmp(r->exported, expected_skips[k]) == 0;
            cr_expect(expected, "%s has no caller: write caller_%s", r->exported, r->proto);
            skipped++;
            continue;
        }
        void *fn = resolve(r);

        /* outside any step */
        bool taken;
        CUresult got = fail_once(r, fn, &taken);
        cr_expect_eq(got, INJECTED, "%s outside a step returned %d, not the injected %d", r->exported, (int)got,
                     (int)INJECTED);
        cr_expect(taken, "%s outside a step did not reach the driver", r->exported);
        wrong += got != INJECTED || !taken;

        /* inside the fourth step of a fresh anchor, which replays */
        const step_variant_t *v = variant_for(r->exported);
        for (int s = 0; s < 3; s++) {
            cr_assert_eq(cgj_trace_begin(r->exported), CGJ_OK);
            step_ops(v);
            cr_assert_eq(cgj_trace_end(), CGJ_OK);
        }
        cgj_trace_info_t info;
        cr_assert_eq(cgj_trace_info(r->exported, &info), CGJ_OK);
        cr_assert(info.state == CGJ_STATE_REPLAY && info.replays == 1, "%s: anchor %s after 3 runs, %llu replays",
                  r->exported, cgj_state_name(info.state), (unsigned long long)info.replays);
        cgj_stats_t before, after;
        cr_assert_eq(cgj_trace_begin(r->exported), CGJ_OK);
        step_ops(v);
        cgj_stats(&before);
        got = fail_once(r, fn, &taken);
        cgj_stats(&after);
        int end = cgj_trace_end();
        if (after.side_exits + after.aborts > before.side_exits + before.aborts) left_trace++;
        else cr_log_info("%s: the failing call did not leave the replay (cgjit does not trace it)", r->exported);
        cr_expect_eq(got, INJECTED, "%s inside a replayed step returned %d, not the injected %d", r->exported, (int)got,
                     (int)INJECTED);
        cr_expect(taken, "%s inside a replayed step did not reach the driver", r->exported);
        cr_expect_eq(end, CGJ_OK, "%s: cgj_trace_end() = %d after the failing call", r->exported, end);
        wrong += got != INJECTED || !taken || end != CGJ_OK;
        check_step_results(r->exported);
        covered++;
    }

    /* the program keeps running: a step of a new anchor still replays, with the right results */
    for (int s = 0; s < 4; s++) {
        cr_assert_eq(cgj_trace_begin("after_all"), CGJ_OK);
        step_ops(&variant_a);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    check_step_results("all rows");
    cgj_trace_info_t info;
    cr_assert_eq(cgj_trace_info("after_all", &info), CGJ_OK);
    cr_expect_eq(info.replays, 2);

    cr_log_info("wrapped driver functions: %d rows in CGJ_DRIVER_WRAPPED, %d covered (outside a step and inside a "
                "replayed one; there, %d left the replay: a side exit or an abort), %d skipped (cuGetProcAddress, "
                "cuGetProcAddress_v2), %d with a wrong result, %d wrong results of the step's work",
                (int)NROWS, covered, left_trace, skipped, wrong, g_mismatches);
    cr_assert_eq(skipped, NSKIPS);
    cr_assert_eq(covered, NROWS - NSKIPS, "covered %d of %d rows", covered, NROWS - NSKIPS);
    cr_assert_eq(wrong, 0);
    cr_assert_eq(g_mismatches, 0);
}
