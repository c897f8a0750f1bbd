/*
 * fakecuda_stream.c — streams, events and stream capture of the fake driver. It holds the
 * core every piece of stream work goes through: resolving a stream handle (legacy and
 * per-thread default streams included), the real driver's capture rules (which calls fail and
 * which captures they invalidate), and submit(), which runs an operation at once or appends it
 * to the capture's graph. Then the stream and event entry points (create, destroy, synchronize,
 * query, wait, record, elapsed time, cuCtxWaitEvent), stream callbacks and stream memory
 * operations (cuStreamAddCallback, cuStreamWrite/WaitValue32/64, cuStreamBatchMemOp) and stream
 * capture (begin, end, capture status and info). See fakecuda.c for the overview.
 */
#include "fakecuda_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------------------------
 * Streams and the capture rules
 * ------------------------------------------------------------------------------------------- */

static cuuint64_t g_next_capture_id = 1;
static int g_active_captures;

/* Resolve a stream handle (under the lock). *s is NULL for a default stream; *legacy says
 * whether that default stream is the legacy one (NULL means legacy unless the call is a
 * per-thread-default-stream variant). */
CUresult stream_get(CUstream h, int ptds, fc_stream **s, int *legacy)
{
    *s = NULL;
    *legacy = 0;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        *legacy = h == CU_STREAM_LEGACY || (h == NULL && !ptds);
        return CUDA_SUCCESS;
    }
    *s = live_get(h, K_STREAM);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult stream_check(CUstream h, int ptds)
{
    fc_stream *s;
    int legacy;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    unlock();
    return err;
}

int stream_capturing(CUstream h, int ptds)
{
    fc_stream *s;
    int legacy;
    lock();
    int capturing = stream_get(h, ptds, &s, &legacy) == CUDA_SUCCESS && s &&
                    s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    unlock();
    return capturing;
}

static int unjoin(fc_stream *s);
static void end_joined(const fc_stream *origin);

static void capture_invalidate(fc_stream *s)
{
    if (s->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return;
    s->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    g_active_captures--;
}

/* Apply the real driver's capture rules to a call that is not work on a capturing stream
 * (under the lock); invalidates the captures the call breaks and returns the error. */
CUresult capture_rules(int rules)
{
    CUresult err = CUDA_SUCCESS;
    if (g_active_captures == 0) return CUDA_SUCCESS;
    for (size_t i = 0; i < g_nlive; i++) {
        if (g_live[i].kind != K_STREAM) continue;
        fc_stream *s = (fc_stream *)g_live[i].p;
        if (s->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) continue;
        int own = pthread_equal(s->owner, pthread_self());
        if ((rules & RULE_LEGACY) && !(s->flags & CU_STREAM_NON_BLOCKING)) {
            capture_invalidate(s);
            err = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        } else if ((rules & RULE_ALL) ||
                   ((rules & RULE_UNSAFE) && (s->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                                              (s->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && own)))) {
            capture_invalidate(s);
            if (err == CUDA_SUCCESS) err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    return err;
}

/* A call that observes or waits for stream h (sync, query): fails on a capturing stream. */
static CUresult stream_observe(CUstream h, int ptds)
{
    fc_stream *s;
    int legacy;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        capture_invalidate(s);
        err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (err == CUDA_SUCCESS) {
        err = capture_rules(RULE_UNSAFE | (legacy ? RULE_LEGACY : 0));
    }
    unlock();
    return err;
}

/* Append op to s's capture (under the lock); takes ownership of op's contents. */
static CUresult capture_append(fc_stream *s, fc_op *op)
{
    if (op->type == CU_GRAPH_NODE_TYPE_EMPTY) return CUDA_SUCCESS;
    fc_node *node = calloc(1, sizeof *node);
    if (!node) return CUDA_ERROR_OUT_OF_MEMORY;
    node->graph = s->graph;
    node->op = *op;
    op_note_host(&node->op); /* a copy node refers to the page-locked host allocations it names */
    if (graph_push(s->graph, node) != CUDA_SUCCESS || live_add(node, K_NODE) != 0) {
        if (s->graph->n && s->graph->nodes[s->graph->n - 1] == node) s->graph->n--;
        free(node);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->type = CU_GRAPH_NODE_TYPE_EMPTY; /* moved into the node */
    s->last = (CUgraphNode)node;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Device-to-device cuMemcpy on the legacy stream returns before the copy is done: with
 * fakecuda_defer_legacy_copies(1) such copies wait in a queue until something is ordered after
 * the legacy stream (work on it or on a blocking stream, a graph launched there, a
 * synchronization), and work on a non-blocking stream runs before them, as on a GPU.
 * ------------------------------------------------------------------------------------------- */

enum { MAX_DEFERRED = 256 };
static fc_op g_deferred[MAX_DEFERRED];
static int g_ndeferred, g_defer;

FAKECUDA_API void fakecuda_defer_legacy_copies(int on)
{
    if (!on) deferred_run();
    g_defer = on;
}

int deferred_take(const fc_op *op)
{
    lock();
    int take = g_defer && !g_active_captures && g_ndeferred < MAX_DEFERRED;
    if (take) g_deferred[g_ndeferred++] = *op;
    unlock();
    return take;
}

void deferred_run(void)
{
    for (;;) {
        lock();
        if (!g_ndeferred) {
            unlock();
            return;
        }
        fc_op op = g_deferred[0];
        for (int i = 1; i < g_ndeferred; i++) g_deferred[i - 1] = g_deferred[i];
        g_ndeferred--;
        unlock();
        op_run(&op);
    }
}

int orders_after_legacy(CUstream h, int ptds)
{
    fc_stream *s;
    int legacy;
    lock();
    int after = stream_get(h, ptds, &s, &legacy) == CUDA_SUCCESS &&
                (legacy || (s && !(s->flags & CU_STREAM_NON_BLOCKING)));
    unlock();
    return after;
}

/*
 * Issue op on stream h: append it to the capture if h captures, else run it now. `blocking`
 * marks a synchronous API call (which also counts as potentially unsafe during capture).
 * Takes ownership of op's contents in every case.
 */
CUresult submit(CUstream h, int ptds, int blocking, fc_op *op)
{
    if (orders_after_legacy(h, ptds)) deferred_run();
    fc_stream *s;
    int legacy, captured = 0;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        err = capture_append(s, op);
        captured = 1;
    } else if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (err == CUDA_SUCCESS) {
        err = capture_rules((legacy ? RULE_LEGACY : 0) | (blocking ? RULE_UNSAFE : 0));
    }
    if (err == CUDA_SUCCESS && !captured && op->type == CU_GRAPH_NODE_TYPE_KERNEL) g_counts.eager_launches++;
    unlock();
    if (err == CUDA_SUCCESS && !captured) op_run(op);
    op_clear(op);
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * Streams and events
 * ------------------------------------------------------------------------------------------- */

static CUresult stream_create(CUstream *ph, unsigned flags)
{
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    fc_stream *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->flags = flags;
    s->status = CU_STREAM_CAPTURE_STATUS_NONE;
    lock();
    int bad = live_add(s, K_STREAM);
    unlock();
    if (bad) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuStreamCreate, (CUstream * phStream, unsigned int flags))
{
    FAIL_POINT();
    return stream_create(phStream, flags);
}

FC_DEFINE(cuStreamGetFlags, (CUstream hStream, unsigned int *flags))
{
    FAIL_POINT();
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    if (hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD) {
        *flags = 0;
        return CUDA_SUCCESS;
    }
    lock();
    fc_stream *s = live_get(hStream, K_STREAM);
    CUresult err = s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    /* As the real driver (580, H200): asked of a capturing stream, it fails and invalidates the
     * capture. */
    if (s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        capture_invalidate(s);
        err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (s) {
        *flags = s->flags;
    }
    unlock();
    return err;
}

FC_DEFINE(cuStreamCreateWithPriority, (CUstream * phStream, unsigned int flags, int priority))
{
    FAIL_POINT();
    (void)priority; /* one queue per stream anyway; priorities change nothing on the CPU */
    return stream_create(phStream, flags);
}

FC_DEFINE(cuStreamDestroy_v2, (CUstream hStream))
{
    FAIL_POINT();
    lock();
    fc_stream *s = live_get(hStream, K_STREAM);
    if (s) {
        if (!unjoin(s)) { /* a joined stream leaves its capture; an origin's dies with it */
            end_joined(s);
            capture_invalidate(s);
            if (s->graph) graph_free(s->graph);
        }
        live_del(s);
    }
    unlock();
    free(s);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_sync(CUstream h, int ptds)
{
    if (orders_after_legacy(h, ptds)) deferred_run();
    CUresult err = stream_observe(h, ptds);
    if (err == CUDA_SUCCESS) {
        lock();
        g_counts.syncs++;
        g_counts.device_syncs++;
        unlock();
    }
    return err;
}

FC_PTSZ(cuStreamSynchronize, (CUstream hStream), stream_sync(hStream, ptds))

/* Work is done when issued: a stream is always complete. */
FC_PTSZ(cuStreamQuery, (CUstream hStream), stream_observe(hStream, ptds))

static CUresult event_check(CUevent ev)
{
    lock();
    void *e = live_get(ev, K_EVENT);
    unlock();
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static void join_capture(fc_stream *s, const void *ev);

/* A plain wait adds no node (dependencies are implicit in a linear graph); an external wait
 * becomes a (no-op) wait node, as in the real driver. */
static CUresult stream_wait(CUstream h, int ptds, CUevent ev, unsigned flags)
{
    CUresult err = event_check(ev);
    if (err != CUDA_SUCCESS) return err;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    fc_op op = {.type = (flags & CU_EVENT_WAIT_EXTERNAL) ? CU_GRAPH_NODE_TYPE_WAIT_EVENT : CU_GRAPH_NODE_TYPE_EMPTY,
                .event = ev};
    if (!(flags & CU_EVENT_WAIT_EXTERNAL)) {
        fc_stream *s = NULL;
        int legacy;
        lock();
        if (stream_get(h, ptds, &s, &legacy) == CUDA_SUCCESS) join_capture(s, ev);
        unlock();
    }
    return submit(h, ptds, 0, &op);
}

FC_PTSZ(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags),
        stream_wait(hStream, ptds, hEvent, Flags))

FC_DEFINE(cuEventCreate, (CUevent * phEvent, unsigned int Flags))
{
    FAIL_POINT();
    (void)Flags;
    if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
    unsigned *e = calloc(1, sizeof *e); /* always complete; the times it was recorded (for tests) */
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    lock();
    int bad = live_add(e, K_EVENT);
    unlock();
    if (bad) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = (CUevent)(void *)e;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuEventDestroy_v2, (CUevent hEvent))
{
    FAIL_POINT();
    lock();
    void *e = live_get(hEvent, K_EVENT);
    if (e) live_del(e);
    unlock();
    free(e);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Cross-stream capture, as the real driver does it: an event recorded (plainly) on a capturing
 * stream stands for the capture; another stream that waits on it joins that capture, and its
 * work goes into the same graph (the fake's graphs are one list in call order, a valid order of
 * the real graph's edges). Ending the capture on its origin stream ends the joined ones. */
#define JOIN_MAX 64
static struct {
    const void *ev;
    fc_stream *origin;
} g_ev_capture[JOIN_MAX];
static fc_stream *g_joined[JOIN_MAX];

/* Under the lock. */
static void note_capture_event(const void *ev, fc_stream *origin)
{
    int free_slot = -1;
    for (int i = 0; i < JOIN_MAX; i++) {
        if (g_ev_capture[i].ev == ev) free_slot = i;
        else if (!g_ev_capture[i].ev && free_slot < 0) free_slot = i;
    }
    if (free_slot >= 0) g_ev_capture[free_slot].ev = ev, g_ev_capture[free_slot].origin = origin;
}

/* Under the lock: s waits on ev; if ev stands for an active capture, s joins it. */
static void join_capture(fc_stream *s, const void *ev)
{
    if (!s || s->status != CU_STREAM_CAPTURE_STATUS_NONE) return;
    for (int i = 0; i < JOIN_MAX; i++) {
        fc_stream *o = g_ev_capture[i].origin;
        if (g_ev_capture[i].ev != ev || !o || o->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) continue;
        for (int j = 0; j < JOIN_MAX; j++)
            if (!g_joined[j]) {
                g_joined[j] = s;
                s->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
                s->mode = o->mode, s->owner = o->owner, s->capture_id = o->capture_id;
                s->graph = o->graph, s->last = NULL;
                g_active_captures++; /* one more stream the capture rules look at */
                return;
            }
    }
}

/* Under the lock: the capture of origin ends (or origin goes); the streams that joined it stop
 * capturing, and its events stand for nothing any more. */
static void end_joined(const fc_stream *origin)
{
    for (int j = 0; j < JOIN_MAX; j++)
        if (g_joined[j] && origin->graph && g_joined[j]->graph == origin->graph) {
            if (g_joined[j]->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) g_active_captures--;
            g_joined[j]->status = CU_STREAM_CAPTURE_STATUS_NONE;
            g_joined[j]->graph = NULL, g_joined[j]->last = NULL;
            g_joined[j] = NULL;
        }
    for (int i = 0; i < JOIN_MAX; i++)
        if (g_ev_capture[i].origin == origin) g_ev_capture[i].ev = NULL, g_ev_capture[i].origin = NULL;
}

/* Under the lock: a joined stream leaves its capture (destroyed); 1 if it had joined one. */
static int unjoin(fc_stream *s)
{
    for (int j = 0; j < JOIN_MAX; j++)
        if (g_joined[j] == s) {
            g_joined[j] = NULL;
            if (s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) g_active_captures--;
            s->status = CU_STREAM_CAPTURE_STATUS_NONE;
            s->graph = NULL, s->last = NULL;
            return 1;
        }
    return 0;
}

/* The capture a stream belongs to: its own, or the one it joined. */
static fc_stream *capture_origin(fc_stream *s)
{
    for (int j = 0; j < JOIN_MAX; j++)
        if (g_joined[j] == s)
            for (int i = 0; i < JOIN_MAX; i++)
                if (g_ev_capture[i].origin && g_ev_capture[i].origin->graph == s->graph) return g_ev_capture[i].origin;
    return s;
}

/* A plain record on a capturing stream adds no node; an external one adds a record node. */
static CUresult event_record(CUevent ev, CUstream h, int ptds, unsigned flags)
{
    CUresult err = event_check(ev);
    if (err != CUDA_SUCCESS) return err;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    int capturing = 0;
    fc_stream *s = NULL;
    int legacy;
    lock();
    if (stream_get(h, ptds, &s, &legacy) == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        capturing = 1;
        if (!(flags & CU_EVENT_RECORD_EXTERNAL)) note_capture_event(ev, capture_origin(s));
    }
    unlock();
    /* Run now, a record counts (fakecuda_event_records); captured, only an external one is a node. */
    fc_op op = {.type = (flags & CU_EVENT_RECORD_EXTERNAL) || !capturing ? CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                                                         : CU_GRAPH_NODE_TYPE_EMPTY,
                .event = ev};
    return submit(h, ptds, 0, &op);
}

FC_PTSZ(cuEventRecord, (CUevent hEvent, CUstream hStream), event_record(hEvent, hStream, ptds, 0))

FC_PTSZ(cuEventRecordWithFlags, (CUevent hEvent, CUstream hStream, unsigned int flags),
        event_record(hEvent, hStream, ptds, flags))

/* Waiting on or polling an event is a potentially unsafe call during capture. */
static CUresult event_observe(CUevent ev, int is_sync)
{
    CUresult err = event_check(ev);
    if (err != CUDA_SUCCESS) return err;
    lock();
    err = capture_rules(RULE_UNSAFE);
    if (err == CUDA_SUCCESS && is_sync) {
        g_counts.syncs++;
        g_counts.device_syncs++;
    }
    unlock();
    return err;
}

FC_DEFINE(cuEventSynchronize, (CUevent hEvent))
{
    FAIL_POINT();
    return event_observe(hEvent, 1);
}

FC_DEFINE(cuEventQuery, (CUevent hEvent))
{
    FAIL_POINT();
    return event_observe(hEvent, 0);
}

FC_DEFINE(cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, CUevent hEnd))
{
    FAIL_POINT();
    if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = event_check(hStart);
    if (err == CUDA_SUCCESS) err = event_check(hEnd);
    if (err == CUDA_SUCCESS) *pMilliseconds = 0.0f; /* no time passes on a fake device */
    return err;
}

/* The context waits for an event: events are always complete, so it only checks its arguments. */
FC_DEFINE(cuCtxWaitEvent, (CUcontext hCtx, CUevent hEvent))
{
    FAIL_POINT();
    if (hCtx != FAKE_CTX) return CUDA_ERROR_INVALID_CONTEXT;
    return event_check(hEvent);
}

/* ---------------------------------------------------------------------------------------------
 * Stream callbacks and stream memory operations
 * ------------------------------------------------------------------------------------------- */

/* The legacy callback runs at once, on the calling thread, with status CUDA_SUCCESS. A capture
 * cannot hold one (the real driver wants cuLaunchHostFunc there): it fails and is invalidated. */
static CUresult add_callback(CUstream h, int ptds, CUstreamCallback cb, void *ud, unsigned flags)
{
    fc_stream *s;
    int legacy;
    if (!cb || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        capture_invalidate(s);
        err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (err == CUDA_SUCCESS) {
        err = capture_rules(legacy ? RULE_LEGACY : 0);
    }
    if (err == CUDA_SUCCESS) g_counts.host_funcs_run++;
    unlock();
    if (err == CUDA_SUCCESS) cb(h, CUDA_SUCCESS, ud);
    return err;
}

FC_PTSZ(cuStreamAddCallback, (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags),
        add_callback(hStream, ptds, callback, userData, flags))

/* A value op from the arguments of cuStreamWrite/WaitValue*: the address must be aligned to the
 * value's size and lie in device memory or in memory the driver knows (pinned or registered).
 * Flushing remote writes is trivially satisfied by host memory, so the flush flag is accepted;
 * the v2 write accepts no flag. */
static CUresult value_op(fc_op *op, CUdeviceptr addr, uint64_t value, unsigned size, unsigned flags, int wait)
{
    if (addr % size != 0) return CUDA_ERROR_INVALID_VALUE;
    if (wait ? (flags & ~(3u | (unsigned)CU_STREAM_WAIT_VALUE_FLUSH)) != 0 : flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    int ok = addr != 0 && range_known((uintptr_t)addr, size, !wait);
    unlock();
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    *op = (fc_op){.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, .val = {PTR(addr), value, size, flags, wait}};
    return CUDA_SUCCESS;
}

/* Issue a value op. A wait outside a capture must hold within a second: nothing else runs on
 * this synchronous device meanwhile, only another host thread could still write the value, and
 * where the real stream would hang the fake says CUDA_ERROR_TIMEOUT. */
static CUresult value_submit(CUstream h, int ptds, fc_op *op)
{
    if (op->val.wait && !stream_capturing(h, ptds)) {
        CUresult err = stream_check(h, ptds);
        if (err != CUDA_SUCCESS) return err;
        if (!value_wait(op, 1.0)) return CUDA_ERROR_TIMEOUT;
    }
    return submit(h, ptds, 0, op);
}

static CUresult value_call(CUstream h, int ptds, CUdeviceptr addr, uint64_t value, unsigned size, unsigned flags,
                           int wait)
{
    fc_op op;
    CUresult err = value_op(&op, addr, value, size, flags, wait);
    return err == CUDA_SUCCESS ? value_submit(h, ptds, &op) : err;
}

FC_PTSZ(cuStreamWriteValue32_v2, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),
        value_call(stream, ptds, addr, value, 4, flags, 0))

FC_PTSZ(cuStreamWaitValue32_v2, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),
        value_call(stream, ptds, addr, value, 4, flags, 1))

FC_PTSZ(cuStreamWriteValue64_v2, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags),
        value_call(stream, ptds, addr, value, 8, flags, 0))

FC_PTSZ(cuStreamWaitValue64_v2, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags),
        value_call(stream, ptds, addr, value, 8, flags, 1))

#define MAX_BATCH_MEM_OPS 255 /* cuda.h: "Must be less than 256" */

/* Every operation is checked before any is issued; barriers and flushes are no-ops on host
 * memory. Each write or wait becomes its own op (a node each while capturing). */
static CUresult batch_mem_op(CUstream h, int ptds, unsigned count, const CUstreamBatchMemOpParams *p, unsigned flags)
{
    if (count == 0 || count > MAX_BATCH_MEM_OPS || !p || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    fc_op ops[MAX_BATCH_MEM_OPS];
    unsigned n = 0;
    CUresult err = stream_check(h, ptds);
    for (unsigned i = 0; err == CUDA_SUCCESS && i < count; i++) {
        switch (p[i].operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
            const struct CUstreamMemOpWaitValueParams_st *w = &p[i].waitValue;
            int is32 = p[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_32;
            err = value_op(&ops[n++], w->address, is32 ? w->value : w->value64, is32 ? 4 : 8, w->flags, 1);
            break;
        }
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
            const struct CUstreamMemOpWriteValueParams_st *w = &p[i].writeValue;
            int is32 = p[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32;
            err = value_op(&ops[n++], w->address, is32 ? w->value : w->value64, is32 ? 4 : 8, w->flags, 0);
            break;
        }
        case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
            if (p[i].flushRemoteWrites.flags != 0) err = CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_STREAM_MEM_OP_BARRIER:
            if (p[i].memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_SYS &&
                p[i].memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
                err = CUDA_ERROR_INVALID_VALUE;
            break;
        default: err = CUDA_ERROR_INVALID_VALUE; break;
        }
    }
    for (unsigned i = 0; err == CUDA_SUCCESS && i < n; i++) err = value_submit(h, ptds, &ops[i]);
    return err;
}

FC_PTSZ(cuStreamBatchMemOp_v2,
        (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags),
        batch_mem_op(stream, ptds, count, paramArray, flags))

/* ---------------------------------------------------------------------------------------------
 * Stream capture
 * ------------------------------------------------------------------------------------------- */

/* into: the caller's graph to capture into (cuStreamBeginCaptureToGraph, no dependencies), or
 * NULL for a new one. */
static CUresult begin_capture(CUstream h, int ptds, CUstreamCaptureMode mode, CUgraph into)
{
    fc_stream *s;
    int legacy;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && !s) err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* default streams */
    if (err == CUDA_SUCCESS && s->status != CU_STREAM_CAPTURE_STATUS_NONE) err = CUDA_ERROR_ILLEGAL_STATE;
    if (err == CUDA_SUCCESS && !(s->graph = into ? (fc_graph *)into : graph_new())) err = CUDA_ERROR_OUT_OF_MEMORY;
    if (err == CUDA_SUCCESS) s->into = into != NULL;
    if (err == CUDA_SUCCESS) {
        s->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->mode = mode;
        s->owner = pthread_self();
        s->capture_id = g_next_capture_id++;
        s->last = NULL;
        g_active_captures++;
        g_counts.captures++;
    }
    unlock();
    return err;
}

FC_PTSZ(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), begin_capture(hStream, ptds, mode, NULL))

/* Capturing into a graph after given dependencies is not modelled: none may be given. */
FC_PTSZ(cuStreamBeginCaptureToGraph,
        (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
         size_t numDependencies, CUstreamCaptureMode mode),
        !hGraph                                             ? CUDA_ERROR_INVALID_VALUE
        : numDependencies || dependencies || dependencyData ? CUDA_ERROR_NOT_SUPPORTED
                                                            : begin_capture(hStream, ptds, mode, hGraph))

/* Under the lock; s is capturing (active or invalidated). */
static CUresult end_capture_locked(fc_stream *s, CUgraph *phGraph)
{
    if (s->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->owner, pthread_self()))
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    fc_graph *g = s->graph;
    int valid = s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    end_joined(s);
    if (valid) g_active_captures--;
    s->status = CU_STREAM_CAPTURE_STATUS_NONE;
    s->graph = NULL;
    s->last = NULL;
    if (!valid) {
        if (!s->into) graph_free(g);
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

static CUresult end_capture(CUstream h, int ptds, CUgraph *phGraph)
{
    fc_stream *s;
    int legacy;
    if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && (!s || s->status == CU_STREAM_CAPTURE_STATUS_NONE)) err = CUDA_ERROR_ILLEGAL_STATE;
    if (err == CUDA_SUCCESS) err = end_capture_locked(s, phGraph);
    unlock();
    return err;
}

FC_PTSZ(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph), end_capture(hStream, ptds, phGraph))

/*
 * Capture status of a stream and, while it captures, its id, graph and dependencies (the last
 * node appended, or none yet). The dependency array lives in the stream, valid until the next
 * call on it, as in the real driver. Default streams never capture.
 */
static CUresult capture_info(CUstream h, int ptds, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    fc_stream *s;
    int legacy;
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS) {
        *status = s ? s->status : CU_STREAM_CAPTURE_STATUS_NONE;
        if (s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            if (id) *id = s->capture_id;
            if (graph) *graph = (CUgraph)s->graph;
            if (deps) *deps = s->last ? &s->last : NULL;
            if (edges) *edges = NULL;
            if (ndeps) *ndeps = s->last ? 1 : 0;
        }
    }
    unlock();
    return err;
}

FC_PTSZ(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus *captureStatus),
        capture_info(hStream, ptds, captureStatus, NULL, NULL, NULL, NULL, NULL))

FC_PTSZ(cuStreamGetCaptureInfo_v3,
        (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out,
         const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out),
        capture_info(hStream, ptds, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                     numDependencies_out))

FAKECUDA_API unsigned fakecuda_event_records(CUevent ev)
{
    lock();
    unsigned *e = live_get(ev, K_EVENT);
    unsigned n = e ? *e : 0;
    unlock();
    return n;
}
