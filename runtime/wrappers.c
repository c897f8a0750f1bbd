/*
 * wrappers.c — the driver functions cgjit hands out in place of the real ones.
 *
 * Every wrapper starts with the same test: no step recording or replaying on this thread →
 * call the real function at once. Otherwise it describes the call as a cgj_call_t with an
 * explicit stream (the NULL stream is CU_STREAM_LEGACY for the plain functions and
 * CU_STREAM_PER_THREAD for the _ptsz/_ptds ones, exactly as the driver reads it) and lets the
 * step decide: absorb it (replay) or execute it through the real function and record it.
 *
 * The legacy default stream: graphs are never captured on a program stream, so stream 0 needs
 * no special case beyond this normalization; a replayed segment is launched on the stream its
 * first op used, CU_STREAM_LEGACY included, and keeps that stream's implicit synchronization.
 */
#include "runtime/runtime.h"
#include "allocator/live.h"
#include "allocator/pointers.h"
#include "allocator/pool.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/map.h"
#include "graphs/graph.h"
#include "tracer/step.h"

static inline CUstream norm(CUstream s, bool pt)
{
    return s ? s : (pt ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY);
}

/* Run call c under the step: absorbed, or executed by `expr` and recorded. The result is the
 * call's own, or an error that re-issuing this thread's absorbed work met (tracer/exits.c).
 * Under CGJIT_VERIFY a call replay checks runs for real first (tracer/verify.c). */
#define TRACE_CALL(c, expr)                                                \
    do {                                                                   \
        if (CGJ_UNLIKELY(cgj_cfg.VERIFY) && cgj_step_verify_first(&(c))) { \
            CUresult v_ = (expr);                                          \
            cgj_step_verify_ran();                                         \
            if (cgj_step_enter(&(c)) == CGJ_ABSORB) return v_;             \
            return cgj_step_leave(&(c), v_);                               \
        }                                                                  \
        if (cgj_step_passes(&(c))) return (expr);                          \
        if (cgj_step_enter(&(c)) == CGJ_ABSORB) return CUDA_SUCCESS;       \
        CUresult r_ = (expr);                                              \
        return cgj_step_leave(&(c), r_);                                   \
    } while (0)

#define IDLE_FORWARD(expr)                                  \
    do {                                                    \
        if (CGJ_LIKELY(!cgj_tracing_take())) return (expr); \
    } while (0)

/* A call through which the host observes GPU work: first, the work other threads' replays
 * absorbed and could be observed here is issued (tracer/step.h). */
#define OBSERVE(s, ev, all)                                                                                            \
    do {                                                                                                               \
        if (CGJ_UNLIKELY(__atomic_load_n(&cgj_pending_threads, __ATOMIC_RELAXED))) cgj_step_observe((s), (ev), (all)); \
    } while (0)

/* Work issued on stream s: another thread's absorbed work it would overtake is issued first
 * (tracer/step.h, cgj_others_pending_on). */
#define ORDER(s)                                                                        \
    do {                                                                                \
        if (CGJ_UNLIKELY(cgj_others_pending_on(s))) cgj_step_observe((s), NULL, false); \
    } while (0)

/* Two wrappers, plain and per-thread, over one body taking (pt, real, args...). */
#define TWO_WRAPPERS(exported, pt_exported, body, params, ...)                 \
    CUresult cgj_w_##exported params                                           \
    {                                                                          \
        return body(false, #exported, cgj_drv.r_##exported, __VA_ARGS__);      \
    }                                                                          \
    CUresult cgj_w_##pt_exported params                                        \
    {                                                                          \
        return body(true, #pt_exported, cgj_drv.r_##pt_exported, __VA_ARGS__); \
    }

/* The names of the calls below that are not made by a body taking `api`: a wrapper's
 * heartbeat test (CGJ_GOV_BEAT) and its call must name it by the same address. */
static const char ctx_sync_api[] = "cuCtxSynchronize", ctx_sync_v2_api[] = "cuCtxSynchronize_v2";
static const char free_api[] = "cuMemFree_v2", alloc_api[] = "cuMemAlloc_v2", alloc_pitch_api[] = "cuMemAllocPitch_v2";

/* ---- kernels ---- */

/* A kernel call: every field a kernel's call has is set, and nothing else (zeroing the whole
 * call, union and all, was a string store of 104 bytes on every launch). */
static inline __attribute__((always_inline)) void fill_kernel(cgj_call_t *c, const char *api, CUstream s, CUfunction f,
                                                              unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                              unsigned by, unsigned bz, unsigned smem, void **params,
                                                              void **extra)
{
    c->kind = CGJ_OP_KERNEL;
    c->api = api;
    c->stream = s;
    c->u.k.f = f;
    c->u.k.grid[0] = gx, c->u.k.grid[1] = gy, c->u.k.grid[2] = gz;
    c->u.k.block[0] = bx, c->u.k.block[1] = by, c->u.k.block[2] = bz;
    c->u.k.smem = smem;
    c->u.k.params = params;
    c->u.k.blob = NULL;
    c->u.k.blob_size = 0;
    c->u.k.attrs = NULL;
    c->u.k.nattrs = 0;
    if (CGJ_LIKELY(params) || !extra) return;
    for (unsigned i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) c->u.k.blob = extra[i + 1];
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) c->u.k.blob_size = *(size_t *)extra[i + 1];
    }
}

static inline CUresult launch_kernel(bool pt, const char *api, __typeof__(cuLaunchKernel) *real, CUfunction f,
                                     unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                     unsigned smem, CUstream s, void **params, void **extra)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), f);
    IDLE_FORWARD(real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra));
    cgj_call_t c;
    fill_kernel(&c, api, norm(s, pt), f, gx, gy, gz, bx, by, bz, smem, params, extra);
    TRACE_CALL(c, real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra));
}
TWO_WRAPPERS(cuLaunchKernel, cuLaunchKernel_ptsz, launch_kernel,
             (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
              CUstream s, void **params, void **extra),
             f, gx, gy, gz, bx, by, bz, smem, s, params, extra)

static inline CUresult launch_kernel_ex(bool pt, const char *api, __typeof__(cuLaunchKernelEx) *real,
                                        const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
    ORDER(norm(cfg ? cfg->hStream : NULL, pt));
    CGJ_GOV_BEAT(api, norm(cfg ? cfg->hStream : NULL, pt), f);
    IDLE_FORWARD(real(cfg, f, params, extra));
    if (!cfg) return real(cfg, f, params, extra);
    cgj_call_t c;
    fill_kernel(&c, api, norm(cfg->hStream, pt), f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
                cfg->blockDimY, cfg->blockDimZ, cfg->sharedMemBytes, params, extra);
    c.u.k.attrs = cfg->attrs;
    c.u.k.nattrs = cfg->attrs ? cfg->numAttrs : 0;
    TRACE_CALL(c, real(cfg, f, params, extra));
}
TWO_WRAPPERS(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, launch_kernel_ex,
             (const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra), cfg, f, params, extra)

static inline CUresult launch_host_func(bool pt, const char *api, __typeof__(cuLaunchHostFunc) *real, CUstream s,
                                        CUhostFn fn, void *data)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(s, fn, data));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_HOST_FUNC, api, norm(s, pt));
    c.u.h.fn = fn;
    c.u.h.data = data;
    TRACE_CALL(c, real(s, fn, data));
}
TWO_WRAPPERS(cuLaunchHostFunc, cuLaunchHostFunc_ptsz, launch_host_func, (CUstream s, CUhostFn fn, void *data), s, fn,
             data)

/* ---- copies ---- */

/* Device-side memory: what a graph's copy node reads or writes on the device. */
static bool on_device(cgj_mem_kind_t k)
{
    return k == CGJ_MEM_DEVICE || k == CGJ_MEM_MANAGED;
}

/* Describe a copy by what its operands are (allocator/pointers.h), not by the API's name: a
 * "host" source that is device memory is a device-to-device copy. Device→host lands in a graph
 * only when asynchronous into pinned memory; otherwise the host sees the bytes when the call
 * returns: a READBACK boundary. */
static void fill_copy(cgj_call_t *c, CUdeviceptr dst, CUdeviceptr src, size_t n, bool async)
{
    cgj_mem_kind_t td = cgj_pointer_kind(dst), ts = cgj_pointer_kind(src);
    c->kind = CGJ_OP_MEMCPY;
    c->u.m.bytes = n;
    if (on_device(td) && on_device(ts)) {
        c->u.m.dir = CGJ_DIR_D2D, c->u.m.dst = dst, c->u.m.src = src;
    } else if (on_device(td)) {
        c->u.m.dir = CGJ_DIR_H2D, c->u.m.dst = dst, c->u.m.hsrc = (const void *)(uintptr_t)src;
        /* Only a synchronous copy, or one from pageable memory, has read its source when the call
         * returns: those are staged. An asynchronous copy from pinned memory reads it when it
         * runs, and so does its graph node. */
        c->u.m.direct = async && ts == CGJ_MEM_PINNED;
    } else if (on_device(ts) && async && td == CGJ_MEM_PINNED) {
        c->u.m.dir = CGJ_DIR_D2H, c->u.m.hdst = (void *)(uintptr_t)dst, c->u.m.src = src;
    } else {
        c->kind = CGJ_OP_READBACK;
    }
}

static inline CUresult memcpy_any(bool pt, const char *api, __typeof__(cuMemcpy) *real, CUdeviceptr dst,
                                  CUdeviceptr src, size_t n)
{
    OBSERVE(norm(NULL, pt), NULL, false); /* may read device memory back: as a sync would */
    CGJ_GOV_BEAT(api, norm(NULL, pt), NULL);
    IDLE_FORWARD(real(dst, src, n));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_MEMCPY, api, norm(NULL, pt)); /* fill_copy says which */
    fill_copy(&c, dst, src, n, false);
    TRACE_CALL(c, real(dst, src, n));
}
TWO_WRAPPERS(cuMemcpy, cuMemcpy_ptds, memcpy_any, (CUdeviceptr dst, CUdeviceptr src, size_t n), dst, src, n)

static inline CUresult memcpy_any_async(bool pt, const char *api, __typeof__(cuMemcpyAsync) *real, CUdeviceptr dst,
                                        CUdeviceptr src, size_t n, CUstream s)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(dst, src, n, s));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_MEMCPY, api, norm(s, pt)); /* fill_copy says which */
    fill_copy(&c, dst, src, n, true);
    TRACE_CALL(c, real(dst, src, n, s));
}
TWO_WRAPPERS(cuMemcpyAsync, cuMemcpyAsync_ptsz, memcpy_any_async,
             (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)

/* Host-to-device copies: replay stages the bytes of a host source at call time (tracer/replay.c);
 * a source that is device memory (unified addressing) makes a device-to-device copy. */
#define H2D_CALL(api_, pt_, s_, async_)                    \
    cgj_call_t c;                                          \
    cgj_call_init(&c, CGJ_OP_MEMCPY, api_, norm(s_, pt_)); \
    fill_copy(&c, dst, (CUdeviceptr)(uintptr_t)src, n, async_)

static inline CUresult memcpy_h2d(bool pt, const char *api, __typeof__(cuMemcpyHtoD) *real, CUdeviceptr dst,
                                  const void *src, size_t n)
{
    ORDER(norm(NULL, pt));
    CGJ_GOV_BEAT(api, norm(NULL, pt), NULL);
    IDLE_FORWARD(real(dst, src, n));
    H2D_CALL(api, pt, NULL, false);
    TRACE_CALL(c, real(dst, src, n));
}
TWO_WRAPPERS(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, memcpy_h2d, (CUdeviceptr dst, const void *src, size_t n), dst, src,
             n)

static inline CUresult memcpy_h2d_async(bool pt, const char *api, __typeof__(cuMemcpyHtoDAsync) *real, CUdeviceptr dst,
                                        const void *src, size_t n, CUstream s)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(dst, src, n, s));
    H2D_CALL(api, pt, s, true);
    TRACE_CALL(c, real(dst, src, n, s));
}
TWO_WRAPPERS(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, memcpy_h2d_async,
             (CUdeviceptr dst, const void *src, size_t n, CUstream s), dst, src, n, s)

static inline CUresult memcpy_d2h(bool pt, const char *api, __typeof__(cuMemcpyDtoH) *real, void *dst, CUdeviceptr src,
                                  size_t n)
{
    OBSERVE(norm(NULL, pt), NULL, false);
    CGJ_GOV_BEAT(api, norm(NULL, pt), NULL);
    CGJ_GOV_TICK();
    IDLE_FORWARD(real(dst, src, n));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_READBACK, api, norm(NULL, pt));
    TRACE_CALL(c, real(dst, src, n));
}
TWO_WRAPPERS(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, memcpy_d2h, (void *dst, CUdeviceptr src, size_t n), dst, src, n)

static inline CUresult memcpy_d2h_async(bool pt, const char *api, __typeof__(cuMemcpyDtoHAsync) *real, void *dst,
                                        CUdeviceptr src, size_t n, CUstream s)
{
    OBSERVE(norm(s, pt), NULL, false);
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(dst, src, n, s));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_MEMCPY, api, norm(s, pt)); /* fill_copy says which */
    fill_copy(&c, (CUdeviceptr)(uintptr_t)dst, src, n, true);
    TRACE_CALL(c, real(dst, src, n, s));
}
TWO_WRAPPERS(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, memcpy_d2h_async,
             (void *dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)

static inline CUresult memcpy_d2d(bool pt, const char *api, __typeof__(cuMemcpyDtoD) *real, CUdeviceptr dst,
                                  CUdeviceptr src, size_t n)
{
    ORDER(norm(NULL, pt));
    CGJ_GOV_BEAT(api, norm(NULL, pt), NULL);
    IDLE_FORWARD(real(dst, src, n));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_MEMCPY, api, norm(NULL, pt));
    c.u.m.dir = CGJ_DIR_D2D, c.u.m.dst = dst, c.u.m.src = src, c.u.m.bytes = n;
    TRACE_CALL(c, real(dst, src, n));
}
TWO_WRAPPERS(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, memcpy_d2d, (CUdeviceptr dst, CUdeviceptr src, size_t n), dst, src,
             n)

static inline CUresult memcpy_d2d_async(bool pt, const char *api, __typeof__(cuMemcpyDtoDAsync) *real, CUdeviceptr dst,
                                        CUdeviceptr src, size_t n, CUstream s)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(dst, src, n, s));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_MEMCPY, api, norm(s, pt));
    c.u.m.dir = CGJ_DIR_D2D, c.u.m.dst = dst, c.u.m.src = src, c.u.m.bytes = n;
    TRACE_CALL(c, real(dst, src, n, s));
}
TWO_WRAPPERS(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, memcpy_d2d_async,
             (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)

/* ---- memsets: one body per element size, sync and async ---- */

#define MEMSET_WRAPPERS(bits, type)                                                                                   \
    static inline CUresult memset##bits(bool pt, const char *api, __typeof__(cuMemsetD##bits) *real, CUdeviceptr d,   \
                                        type v, size_t n)                                                             \
    {                                                                                                                 \
        ORDER(norm(NULL, pt));                                                                                        \
        CGJ_GOV_BEAT(api, norm(NULL, pt), NULL);                                                                      \
        IDLE_FORWARD(real(d, v, n));                                                                                  \
        cgj_call_t c;                                                                                                 \
        cgj_call_init(&c, CGJ_OP_MEMSET, api, norm(NULL, pt));                                                        \
        c.u.s.dst = d, c.u.s.value = v, c.u.s.count = n, c.u.s.elem = bits / 8;                                       \
        TRACE_CALL(c, real(d, v, n));                                                                                 \
    }                                                                                                                 \
    TWO_WRAPPERS(cuMemsetD##bits##_v2, cuMemsetD##bits##_v2_ptds, memset##bits, (CUdeviceptr d, type v, size_t n), d, \
                 v, n)                                                                                                \
    static inline CUresult memset##bits##_async(bool pt, const char *api, __typeof__(cuMemsetD##bits##Async) *real,   \
                                                CUdeviceptr d, type v, size_t n, CUstream s)                          \
    {                                                                                                                 \
        ORDER(norm(s, pt));                                                                                           \
        CGJ_GOV_BEAT(api, norm(s, pt), NULL);                                                                         \
        IDLE_FORWARD(real(d, v, n, s));                                                                               \
        cgj_call_t c;                                                                                                 \
        cgj_call_init(&c, CGJ_OP_MEMSET, api, norm(s, pt));                                                           \
        c.u.s.dst = d, c.u.s.value = v, c.u.s.count = n, c.u.s.elem = bits / 8;                                       \
        TRACE_CALL(c, real(d, v, n, s));                                                                              \
    }                                                                                                                 \
    TWO_WRAPPERS(cuMemsetD##bits##Async, cuMemsetD##bits##Async_ptsz, memset##bits##_async,                           \
                 (CUdeviceptr d, type v, size_t n, CUstream s), d, v, n, s)

MEMSET_WRAPPERS(8, unsigned char)
MEMSET_WRAPPERS(16, unsigned short)
MEMSET_WRAPPERS(32, unsigned int)

/* ---- events, streams, synchronization ---- */

static inline CUresult event_record_flags(bool pt, const char *api, __typeof__(cuEventRecordWithFlags) *real,
                                          CUevent ev, CUstream s, unsigned flags)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(ev, s, flags));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_EVENT_RECORD, api, norm(s, pt));
    c.u.e.ev = ev, c.u.e.flags = flags;
    TRACE_CALL(c, real(ev, s, flags));
}
TWO_WRAPPERS(cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz, event_record_flags,
             (CUevent ev, CUstream s, unsigned flags), ev, s, flags)

static inline CUresult event_record(bool pt, const char *api, __typeof__(cuEventRecord) *real, CUevent ev, CUstream s)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(ev, s));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_EVENT_RECORD, api, norm(s, pt));
    c.u.e.ev = ev;
    TRACE_CALL(c, real(ev, s));
}
TWO_WRAPPERS(cuEventRecord, cuEventRecord_ptsz, event_record, (CUevent ev, CUstream s), ev, s)

static inline CUresult stream_wait(bool pt, const char *api, __typeof__(cuStreamWaitEvent) *real, CUstream s,
                                   CUevent ev, unsigned flags)
{
    /* Another thread's stream may wait on an event a replay recorded: what the event stands for
     * must be issued before the wait, or the waiting stream would run ahead of it. */
    OBSERVE(NULL, ev, false);
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(s, ev, flags));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_STREAM_WAIT, api, norm(s, pt));
    c.u.e.ev = ev, c.u.e.flags = flags;
    TRACE_CALL(c, real(s, ev, flags));
}
TWO_WRAPPERS(cuStreamWaitEvent, cuStreamWaitEvent_ptsz, stream_wait, (CUstream s, CUevent ev, unsigned flags), s, ev,
             flags)

/* Calls of one handle argument that end a segment (synchronize, query). */
#define BOUNDARY_BODY(name, kind_, type, observe)                                         \
    static inline CUresult name(bool pt, const char *api, CUresult (*real)(type), type h) \
    {                                                                                     \
        observe;                                                                          \
        CGJ_GOV_BEAT(api, norm(NULL, pt), NULL);                                          \
        if (kind_ == CGJ_OP_SYNC) CGJ_GOV_TICK();                                         \
        IDLE_FORWARD(real(h));                                                            \
        cgj_call_t c;                                                                     \
        cgj_call_init(&c, kind_, api, norm(NULL, pt));                                    \
        TRACE_CALL(c, real(h));                                                           \
    }
BOUNDARY_BODY(stream_sync, CGJ_OP_SYNC, CUstream, OBSERVE(norm(h, pt), NULL, false))
BOUNDARY_BODY(stream_query, CGJ_OP_QUERY, CUstream, OBSERVE(norm(h, pt), NULL, false))
BOUNDARY_BODY(event_sync, CGJ_OP_SYNC, CUevent, OBSERVE(NULL, h, false))
BOUNDARY_BODY(event_query, CGJ_OP_QUERY, CUevent, OBSERVE(NULL, h, false))

TWO_WRAPPERS(cuStreamSynchronize, cuStreamSynchronize_ptsz, stream_sync, (CUstream s), s)
TWO_WRAPPERS(cuStreamQuery, cuStreamQuery_ptsz, stream_query, (CUstream s), s)
CUresult cgj_w_cuEventSynchronize(CUevent ev)
{
    return event_sync(false, "cuEventSynchronize", cgj_drv.r_cuEventSynchronize, ev);
}
CUresult cgj_w_cuEventQuery(CUevent ev)
{
    return event_query(false, "cuEventQuery", cgj_drv.r_cuEventQuery, ev);
}

/* Context synchronizations wait while cgjit captures a graph on another thread (graphs/graph.h). */
CUresult cgj_w_cuCtxSynchronize(void)
{
    OBSERVE(NULL, NULL, true);
    CGJ_GOV_BEAT(ctx_sync_api, CU_STREAM_LEGACY, NULL);
    CGJ_GOV_TICK();
    IDLE_FORWARD(cgj_graph_ctx_sync(NULL, false));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_SYNC, ctx_sync_api, CU_STREAM_LEGACY);
    TRACE_CALL(c, cgj_graph_ctx_sync(NULL, false));
}

/* CUDA 13's cudaDeviceSynchronize comes here. */
CUresult cgj_w_cuCtxSynchronize_v2(CUcontext ctx)
{
    OBSERVE(NULL, NULL, true);
    CGJ_GOV_BEAT(ctx_sync_v2_api, CU_STREAM_LEGACY, NULL);
    CGJ_GOV_TICK();
    IDLE_FORWARD(cgj_graph_ctx_sync(ctx, true));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_SYNC, ctx_sync_v2_api, CU_STREAM_LEGACY);
    TRACE_CALL(c, cgj_graph_ctx_sync(ctx, true));
}

/* ---- allocations and frees ----
 * Inside a step they are ops: eager runs call the driver and record them; a replay serves them
 * from the trace's pool region (tracer/step.c). A free of pool memory never reaches the driver,
 * whenever it comes: it releases the block (allocator/pool.h). */

#define POOL_OR(p, expr) (cgj_pool_owns(p) ? (cgj_pool_release(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE) : (expr))

CUresult cgj_w_cuMemFree_v2(CUdeviceptr p)
{
    if (CGJ_UNLIKELY(cgj_cfg.VERIFY_ALL)) cgj_live_remove(p);
    cgj_pointer_forget(p);
    CGJ_GOV_BEAT(free_api, CU_STREAM_LEGACY, NULL);
    IDLE_FORWARD(POOL_OR(p, cgj_drv.r_cuMemFree_v2(p)));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_FREE, free_api, CU_STREAM_LEGACY);
    c.u.a.addr = p;
    TRACE_CALL(c, POOL_OR(p, cgj_drv.r_cuMemFree_v2(p)));
}

static inline CUresult mem_free_async(bool pt, const char *api, __typeof__(cuMemFreeAsync) *real, CUdeviceptr p,
                                      CUstream s)
{
    if (CGJ_UNLIKELY(cgj_cfg.VERIFY_ALL)) cgj_live_remove(p);
    cgj_pointer_forget(p);
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(POOL_OR(p, real(p, s)));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_FREE, api, norm(s, pt));
    c.u.a.addr = p;
    TRACE_CALL(c, POOL_OR(p, real(p, s)));
}
TWO_WRAPPERS(cuMemFreeAsync, cuMemFreeAsync_ptsz, mem_free_async, (CUdeviceptr p, CUstream s), p, s)

#define ALLOC_CALL(api_, stream_, out_, bytes_)     \
    cgj_call_t c;                                   \
    cgj_call_init(&c, CGJ_OP_ALLOC, api_, stream_); \
    c.u.a.out = out_, c.u.a.bytes = bytes_

/* CGJIT_VERIFY_ALL: what an allocation returned joins the memory the program holds. */
static inline CUresult held(CUresult r, const CUdeviceptr *p, size_t n)
{
    if (CGJ_UNLIKELY(cgj_cfg.VERIFY_ALL) && r == CUDA_SUCCESS && p) cgj_live_add(*p, n);
    return r;
}

static CUresult mem_alloc(CUdeviceptr *p, size_t n)
{
    CGJ_GOV_BEAT(alloc_api, CU_STREAM_LEGACY, NULL);
    IDLE_FORWARD(cgj_drv.r_cuMemAlloc_v2(p, n));
    if (!p) return cgj_drv.r_cuMemAlloc_v2(p, n);
    ALLOC_CALL(alloc_api, CU_STREAM_LEGACY, p, n);
    TRACE_CALL(c, cgj_drv.r_cuMemAlloc_v2(p, n));
}

CUresult cgj_w_cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    return held(mem_alloc(p, n), p, n);
}

static CUresult mem_alloc_pitch(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e)
{
    CGJ_GOV_BEAT(alloc_pitch_api, CU_STREAM_LEGACY, NULL);
    IDLE_FORWARD(cgj_drv.r_cuMemAllocPitch_v2(p, pitch, w, h, e));
    if (!p || !pitch) return cgj_drv.r_cuMemAllocPitch_v2(p, pitch, w, h, e);
    ALLOC_CALL(alloc_pitch_api, CU_STREAM_LEGACY, p, w * h);
    c.u.a.pitch_out = pitch, c.u.a.width = w, c.u.a.height = h, c.u.a.elem = e;
    TRACE_CALL(c, cgj_drv.r_cuMemAllocPitch_v2(p, pitch, w, h, e));
}

CUresult cgj_w_cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e)
{
    CUresult r = mem_alloc_pitch(p, pitch, w, h, e);
    return held(r, p, r == CUDA_SUCCESS && pitch ? *pitch * h : 0);
}

static inline CUresult mem_alloc_async_call(bool pt, const char *api, __typeof__(cuMemAllocAsync) *real, CUdeviceptr *p,
                                            size_t n, CUstream s)
{
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(p, n, s));
    if (!p) return real(p, n, s);
    ALLOC_CALL(api, norm(s, pt), p, n);
    TRACE_CALL(c, real(p, n, s));
}

static inline CUresult mem_alloc_async(bool pt, const char *api, __typeof__(cuMemAllocAsync) *real, CUdeviceptr *p,
                                       size_t n, CUstream s)
{
    return held(mem_alloc_async_call(pt, api, real, p, n, s), p, n);
}
TWO_WRAPPERS(cuMemAllocAsync, cuMemAllocAsync_ptsz, mem_alloc_async, (CUdeviceptr * p, size_t n, CUstream s), p, n, s)

static inline CUresult mem_alloc_pool_call(bool pt, const char *api, __typeof__(cuMemAllocFromPoolAsync) *real,
                                           CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(p, n, pool, s));
    if (!p) return real(p, n, pool, s);
    ALLOC_CALL(api, norm(s, pt), p, n);
    c.u.a.pool = pool;
    TRACE_CALL(c, real(p, n, pool, s));
}

static inline CUresult mem_alloc_pool(bool pt, const char *api, __typeof__(cuMemAllocFromPoolAsync) *real,
                                      CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    return held(mem_alloc_pool_call(pt, api, real, p, n, pool, s), p, n);
}
TWO_WRAPPERS(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, mem_alloc_pool,
             (CUdeviceptr * p, size_t n, CUmemoryPool pool, CUstream s), p, n, pool, s)

/* ---- contexts: a step's work belongs to the context current when it began. Making another
 * context current inside a step aborts the step (its graphs could not run there); setting the
 * current one again changes nothing. ---- */

static void context_change(const char *api, CUcontext to, bool known)
{
    CUcontext cur = NULL;
    if (!cgj_tracing()) return;
    if (known && cgj_drv.r_cuCtxGetCurrent && cgj_drv.r_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == to) return;
    cgj_step_untraceable(api);
}

CUresult cgj_w_cuCtxSetCurrent(CUcontext ctx)
{
    context_change("cuCtxSetCurrent", ctx, true);
    return cgj_drv.r_cuCtxSetCurrent(ctx);
}

CUresult cgj_w_cuCtxPushCurrent_v2(CUcontext ctx)
{
    context_change("cuCtxPushCurrent", ctx, true);
    return cgj_drv.r_cuCtxPushCurrent_v2(ctx);
}

CUresult cgj_w_cuCtxPopCurrent_v2(CUcontext *pctx)
{
    context_change("cuCtxPopCurrent", NULL, false);
    return cgj_drv.r_cuCtxPopCurrent_v2(pctx);
}

/* Host memory leaving the driver: its cached classification goes first. */
CUresult cgj_w_cuMemFreeHost(void *p)
{
    cgj_pointer_forget_host(p);
    return cgj_drv.r_cuMemFreeHost(p);
}

CUresult cgj_w_cuMemHostUnregister(void *p)
{
    cgj_pointer_forget_host(p);
    return cgj_drv.r_cuMemHostUnregister(p);
}

/* ---- a program's own graph launch: inside a step it ends a segment and runs as the program
 * launches it, after the work absorbed before it ---- */

static inline CUresult graph_launch(bool pt, const char *api, __typeof__(cuGraphLaunch) *real, CUgraphExec g,
                                    CUstream s)
{
    ORDER(norm(s, pt));
    CGJ_GOV_BEAT(api, norm(s, pt), NULL);
    IDLE_FORWARD(real(g, s));
    cgj_call_t c;
    cgj_call_init(&c, CGJ_OP_GRAPH_LAUNCH, api, norm(s, pt));
    TRACE_CALL(c, real(g, s));
}
TWO_WRAPPERS(cuGraphLaunch, cuGraphLaunch_ptsz, graph_launch, (CUgraphExec g, CUstream s), g, s)

/* ---- a program's own stream capture ----
 * Its step (if any) ends first, issuing what it absorbed, so that nothing cgjit holds back is
 * issued later into the program's graph; while any capture of the program runs, no step begins
 * and nothing is built (tracer/step.h), so cgjit neither absorbs what the program means to
 * capture nor makes calls a capture in global mode forbids. */

static inline CUresult capture_began(const char *api, CUstream s, CUresult r)
{
    cgj_step_capture_began(s, r, api);
    return r;
}

#define CAPTURE_BEGIN(exported, stream_pt, params, ...)                         \
    CUresult cgj_w_##exported params                                            \
    {                                                                           \
        CUstream s_ = norm(s, stream_pt);                                       \
        if (!cgj_drv.r_##exported) return CUDA_ERROR_NOT_SUPPORTED;             \
        ORDER(s_);                                                              \
        cgj_step_capture_begin(s_, #exported);                                  \
        return capture_began(#exported, s_, cgj_drv.r_##exported(__VA_ARGS__)); \
    }
CAPTURE_BEGIN(cuStreamBeginCapture_v2, false, (CUstream s, CUstreamCaptureMode mode), s, mode)
CAPTURE_BEGIN(cuStreamBeginCapture_v2_ptsz, true, (CUstream s, CUstreamCaptureMode mode), s, mode)
CAPTURE_BEGIN(cuStreamBeginCaptureToGraph, false,
              (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
               CUstreamCaptureMode mode),
              s, g, deps, edges, n, mode)
CAPTURE_BEGIN(cuStreamBeginCaptureToGraph_ptsz, true,
              (CUstream s, CUgraph g, const CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
               CUstreamCaptureMode mode),
              s, g, deps, edges, n, mode)
#undef CAPTURE_BEGIN

static inline CUresult capture_end(bool pt, const char *api, __typeof__(cuStreamEndCapture) *real, CUstream s,
                                   CUgraph *g)
{
    (void)api;
    CUresult r = real(s, g);
    cgj_step_capture_ended(norm(s, pt), r); /* ended, whether or not it made a graph */
    return r;
}
TWO_WRAPPERS(cuStreamEndCapture, cuStreamEndCapture_ptsz, capture_end, (CUstream s, CUgraph *g), s, g)

/* ---- calls that end driver objects (modules, libraries, contexts) a recording may name: a
 * build on cgjit's builder thread must not outlive them, so the one in hand ends first and the
 * queued ones are given up (tracer/builder.c) ---- */

#define OBJECTS_END(exported, params, ...)                          \
    CUresult cgj_w_##exported params                                \
    {                                                               \
        if (!cgj_drv.r_##exported) return CUDA_ERROR_NOT_SUPPORTED; \
        cgj_step_objects_ending();                                  \
        return cgj_drv.r_##exported(__VA_ARGS__);                   \
    }
OBJECTS_END(cuModuleUnload, (CUmodule m), m)
OBJECTS_END(cuLibraryUnload, (CUlibrary l), l)
OBJECTS_END(cuCtxDestroy_v2, (CUcontext c), c)
OBJECTS_END(cuDevicePrimaryCtxReset_v2, (CUdevice d), d)
OBJECTS_END(cuDevicePrimaryCtxRelease_v2, (CUdevice d), d)
#undef OBJECTS_END

/* ---- calls that issue work cgjit does not capture: inside a step they end a segment and run
 * as the program makes them, after the work absorbed before them ---- */

#define AS_MADE(exported, proto, params, args)                      \
    CUresult cgj_w_##exported params                                \
    {                                                               \
        static const char name_[] = #exported;                      \
        OBSERVE(NULL, NULL, true);                                  \
        CGJ_GOV_BEAT(name_, CU_STREAM_LEGACY, NULL);                \
        IDLE_FORWARD(cgj_drv.r_##exported args);                    \
        cgj_call_t c;                                               \
        cgj_call_init(&c, CGJ_OP_AS_MADE, name_, CU_STREAM_LEGACY); \
        TRACE_CALL(c, cgj_drv.r_##exported args);                   \
    }

CGJ_DRIVER_AS_MADE(AS_MADE)

/* ---- exports: a program linked with -lcuda calls the driver's symbols directly; with libcgjit
 * ahead of libcuda in the lookup order (preloaded, or linked first) those calls land here.
 * Each exported ABI name (cuMemcpyHtoD_v2, cuLaunchKernel_ptsz, ...) is an alias of its
 * wrapper; the assembler name keeps cuda.h's macros (cuGetProcAddress -> _v2) out of the way.
 * The runtime is started before any of them can be called (interpose.c, when libcuda is already
 * loaded as the program's dependency). ---- */

#define CGJ_EXPORT(exported, proto, ...)                                                 \
    CGJ_API extern __typeof__(cgj_w_##exported) cgj_export_##exported __asm__(#exported) \
        __attribute__((alias("cgj_w_" #exported)));
CUresult cgj_w_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cgj_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status);
CGJ_DRIVER_WRAPPED(CGJ_EXPORT)
#undef CGJ_EXPORT

/* ---- the table: real driver function -> its wrapper ---- */

static cgj_map_t table; /* built once at start-up (cgj_wrappers_init), then only read */

CUresult cgj_w_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cgj_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status);

void cgj_wrappers_init(void)
{
#define CGJ_WRAP_ENTRY(exported, proto, ...) \
    if (cgj_drv.r_##exported)                \
        cgj_map_put(&table, cgj_map_ptr_key((void *)cgj_drv.r_##exported), (uint64_t)(uintptr_t)cgj_w_##exported);
    CGJ_DRIVER_WRAPPED(CGJ_WRAP_ENTRY)
#undef CGJ_WRAP_ENTRY
}

void *cgj_wrapper_for(const void *real)
{
    uint64_t w;
    return cgj_map_get(&table, cgj_map_ptr_key(real), &w) ? (void *)(uintptr_t)w : NULL;
}

/* ---- cuGetProcAddress, both ABI versions: what the driver hands out is replaced by its
 * wrapper where cgjit has one (see interpose.c) ---- */

static void wrap_result(const char *symbol, void **pfn, CUresult r)
{
    if (r != CUDA_SUCCESS || !pfn || !*pfn) return;
    void *w = cgj_wrapper_for(*pfn);
    if (!w) return;
    CGJ_LOG(interpose, "cuGetProcAddress(%s): wrapped", symbol);
    *pfn = w;
}

CUresult cgj_w_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    CUresult r = ((cgj_gpa_v1_fn)cgj_drv.r_cuGetProcAddress)(symbol, pfn, version, flags);
    wrap_result(symbol, pfn, r);
    return r;
}

CUresult cgj_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status)
{
    CUresult r = cgj_drv.r_cuGetProcAddress_v2(symbol, pfn, version, flags, status);
    wrap_result(symbol, pfn, r);
    return r;
}
