/* graph.c — a trace's segments: chunks, capture, instantiation and upload; see graph.h. Their
 * patching and launch are in launch.c. */
#include "graphs/graph_internal.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/nvtx.h"
#include "base/vec.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define FAIL(code, op, ...)                                              \
    do {                                                                 \
        cgj_reason_set(why, CGJ_REASON_BUILD_##code, (op), __VA_ARGS__); \
        return false;                                                    \
    } while (0)
#define NO_OP CGJ_REASON_NO_OP

static void push_segment(cgj_trace_t *t, uint32_t *cap, uint32_t first, uint32_t end, bool chained)
{
    CGJ_VEC_PUSH(t->segs, t->nsegs, *cap, ((cgj_segment_t){.first = first, .end = end, .chained = chained}));
}

/* A tail too short to be worth a chunk of its own: at most TAIL_OPS captured ops, with the
 * program's recorded host time before them and before the boundary under a sixteenth of
 * CGJIT_CHUNK_US (a graph launch costs the host a few microseconds; the GPU would start the
 * chunk before that tail at most this much earlier). Only before a boundary op: at the step's
 * end no call says how long the host works after the tail, and the last chunk is launched only
 * then. */
enum { TAIL_OPS = 4 };
static bool tail_is_short(uint32_t ops, uint64_t host_ns, uint64_t chunk_ns)
{
    return ops <= TAIL_OPS && host_ns * 16 < chunk_ns;
}

/* Segments run from one boundary op to the next, cut into chunks, each launched as soon as its
 * last op is absorbed: the GPU starts while the host still absorbs the rest, as it would have
 * started on eager launches, and a side exit re-issues at most one chunk's ops eagerly, never
 * the whole step. A chunk ends
 *  - after CGJIT_CHUNK_OPS captured ops;
 *  - where the program's own host time between its calls (op gaps, as recorded) has added up to
 *    CGJIT_CHUNK_US since the chunk began: a PyTorch step spends tens of microseconds in Python
 *    between launches, and a graph launched only at the step's synchronization would leave the
 *    GPU idle all that time, then make the host wait for all of the step's GPU work at once.
 *    No chunk ends inside a library call's group. The host time inside a group (the library's
 *    own: its checks and heuristics before and between its launches) counts where the library
 *    runs at replay, as it does by default: an llm.c-shaped step spends most of its host time
 *    there, and chunked by op count alone its first graph would wait for two thirds of it, the
 *    GPU idle meanwhile. It does not where the call is absorbed whole (CGJIT_LIBS_LEARNED, or
 *    replaced by a fused kernel): the library does not run then. Nor does a chunk end so where
 *    what is left before the boundary is a short tail (tail_is_short): the GPU would gain less
 *    than the extra graph launch costs (a decode step's read-back after its last kernel joins
 *    the last chunk);
 *  - at a handoff op (another thread takes over the stream there), even right before a boundary
 *    or at the step's end: the other thread comes before the step's next call;
 *  - after a collective's group (NCCL), likewise: its kernels wait for peers, which may wait
 *    for this process's host before their own next call; launched before the call returns, as
 *    eager launches them, no peer waits for work cgjit holds back;
 *  - after a kernel that reaches mapped pinned host memory (host_visible), likewise: the host
 *    may wait for what it writes there with no CUDA call at all (a flag it spins on).
 * Nor does a chunk end inside a fused chain (fusion/): its kernel stands at the chain's last op,
 * and a side exit must find the whole chain in the chunk it re-issues. */
static void split_segments(cgj_trace_t *t)
{
    uint32_t n = t->list.n, cap = 0, chunk = (uint32_t)cgj_cfg.CHUNK_OPS;
    uint64_t chunk_ns = (uint64_t)cgj_cfg.CHUNK_US * 1000;
    t->segs = NULL;
    t->nsegs = 0;
    for (uint32_t i = 0;;) {
        uint32_t j = i;
        while (j < n && cgj_op_class[t->list.ops[j].call.kind] != CGJ_CLASS_BOUNDARY) j++;
        uint32_t first = i, captured = 0, group_end = 0; /* ops before group_end are a group's */
        bool group_runs = false;                         /* its library runs at replay */
        uint32_t coll_end = 0;                           /* a collective's group ends before op coll_end */
        uint64_t gaps = 0;
        /* What is left after op k up to the boundary: captured ops, and host time before each of
         * the calls after op k, the boundary's own included (none at the step's end). */
        uint32_t left_ops = 0;
        uint64_t left_ns = 0;
        for (uint32_t k = i; k < j; k++) left_ops += cgj_op_class[t->list.ops[k].call.kind] == CGJ_CLASS_CAPTURE;
        for (uint32_t k = i + 1; k <= j && k < n; k++) left_ns += t->list.ops[k].gap_ns;
        for (uint32_t k = i; k < j; k++) {
            cgj_op_t *o = &t->list.ops[k];
            o->chunk_end = CGJ_REASON_NONE;
            if (o->lib) group_end = k + 1 + o->lib->nops, group_runs = !cgj_libop_learned() && !o->fused;
            if (o->lib && o->lib->collective) coll_end = group_end;
            if (cgj_op_class[o->call.kind] == CGJ_CLASS_CAPTURE) captured++, left_ops--;
            if (k > i) left_ns -= o->gap_ns; /* the host time before op k is behind now */
            bool in_group = k + 1 < group_end, grouped = in_group || (o->fused && t->fused[o->fused - 1].last > k);
            if (k + 1 < j && (!grouped || (in_group && group_runs))) gaps += t->list.ops[k + 1].gap_ns;
            bool full = chunk && captured >= chunk;
            bool idle = chunk_ns && captured && gaps >= chunk_ns &&
                        !(j < n && tail_is_short(left_ops, left_ns, chunk_ns));
            bool coll = k + 1 == coll_end, seen = o->host_visible && !grouped;
            if (((full || idle) && k + 1 < j && !grouped) || o->handoff || coll || seen) {
                o->chunk_end = coll          ? CGJ_REASON_BREAK_COLLECTIVE
                             : seen          ? CGJ_REASON_BREAK_HOST_VISIBLE
                             : idle && !full ? CGJ_REASON_BREAK_IDLE
                                             : CGJ_REASON_NONE;
                push_segment(t, &cap, first, k + 1, true);
                first = k + 1, captured = 0, gaps = 0;
            }
        }
        push_segment(t, &cap, first, j, false);
        if (j >= n) break;
        i = j + 1; /* past the boundary op */
    }
}

/* Is op i a wait on an event recorded earlier in the same segment (ordered by the capture)? */
static bool wait_is_ordered(const cgj_trace_t *t, const cgj_segment_t *seg, uint32_t i)
{
    const cgj_op_t *w = &t->list.ops[i];
    if (w->call.kind != CGJ_OP_STREAM_WAIT) return false;
    for (uint32_t j = seg->first; j < i; j++) {
        const cgj_op_t *o = &t->list.ops[j];
        if (o->call.kind == CGJ_OP_EVENT_RECORD && o->call.u.e.ev == w->call.u.e.ev) return true;
    }
    return false;
}

/* Ops whose values the executable graph can take without a rebuild: their nodes are kept. A
 * wait ordered inside its segment (`ordered`) is an edge, no node. */
static bool has_node(const cgj_op_t *o, bool ordered)
{
    return o->call.kind == CGJ_OP_KERNEL || o->call.kind == CGJ_OP_MEMCPY || o->call.kind == CGJ_OP_MEMSET ||
           o->call.kind == CGJ_OP_HOST_FUNC || o->call.kind == CGJ_OP_EVENT_RECORD ||
           (o->call.kind == CGJ_OP_STREAM_WAIT && !ordered);
}

/* The segment's event ops as its graph is built: each one's previous and its nearest with the
 * same event (ir.h; replay's guard holds a run to that pattern). */
static void event_pattern(cgj_trace_t *t, const cgj_segment_t *seg)
{
    uint32_t last = UINT32_MAX;
    for (uint32_t i = seg->first; i < seg->end; i++) {
        cgj_op_t *o = &t->list.ops[i];
        if (!cgj_op_names_event(o->call.kind)) continue;
        o->ev_prev = last == UINT32_MAX ? 0 : i - last;
        o->ev_same = cgj_op_event_back(o, o->call.u.e.ev);
        last = i;
    }
}

/* ---- capture lanes ----
 * A segment whose ops use several streams is captured with each program stream on a capture
 * stream of its own (a lane), all joined to one capture: work the program spread over streams
 * stays concurrent inside the graph instead of running in program order. The orderings eager
 * execution has become capture edges: a lane's own order; a wait on an event recorded earlier
 * in the segment (an edge from the recording lane at that point); and the legacy stream's
 * implicit ones (work on it waits for every blocking stream's, and work on a blocking stream for
 * its). A segment on one stream is captured on the origin stream alone. */
#define CGJ_MAX_LANES 16
#define CGJ_MAX_LANE_EVENTS 64

typedef struct lane {
    CUstream prog, cap; /* the program's stream; its capture stream (lane 0: the origin) */
    CUevent mark;       /* scratch: the lane's point another lane waits for */
    bool blocking;      /* the program's stream orders with the legacy stream */
} lane_t;

typedef struct lanes {
    lane_t l[CGJ_MAX_LANES];
    uint32_t n;
    CUevent fork; /* recorded on the origin before any op: where lanes join the capture */
    CUevent prog_ev[CGJ_MAX_LANE_EVENTS], cap_ev[CGJ_MAX_LANE_EVENTS]; /* program event -> the
                                                                        * capture event recorded at the same point */
    uint32_t nev;
} lanes_t;

/* `to` waits for everything captured on `from` so far. */
static CUresult lane_edge(lane_t *from, lane_t *to)
{
    CUresult r = cgj_drv.r_cuEventRecord(from->mark, from->cap);
    return r == CUDA_SUCCESS ? cgj_drv.r_cuStreamWaitEvent(to->cap, from->mark, 0) : r;
}

/* The lane of program stream s (made and joined to the capture on first use), or NULL. */
static lane_t *lane_of(lanes_t *ls, CUstream s, CUresult *r)
{
    for (uint32_t k = 0; k < ls->n; k++)
        if (ls->l[k].prog == s) return &ls->l[k];
    if (ls->n == CGJ_MAX_LANES) {
        *r = CUDA_ERROR_NOT_SUPPORTED; /* the build fails with the reason: too many streams */
        return NULL;
    }
    lane_t *l = &ls->l[ls->n];
    *l = (lane_t){.prog = s, .blocking = cgj_stream_blocking(s)};
    *r = cgj_drv.r_cuEventCreate(&l->mark, CU_EVENT_DISABLE_TIMING);
    if (*r == CUDA_SUCCESS && ls->n) *r = cgj_drv.r_cuStreamCreate(&l->cap, CU_STREAM_NON_BLOCKING);
    if (*r == CUDA_SUCCESS && ls->n) *r = cgj_drv.r_cuStreamWaitEvent(l->cap, ls->fork, 0);
    if (*r != CUDA_SUCCESS) return NULL;
    ls->n++;
    return l;
}

/* Before an op on lane l: the legacy stream's implicit orderings, as edges. */
static CUresult legacy_edges(lanes_t *ls, lane_t *l)
{
    CUresult r = CUDA_SUCCESS;
    for (uint32_t k = 0; k < ls->n && r == CUDA_SUCCESS; k++) {
        lane_t *o = &ls->l[k];
        if (o == l || !o->blocking || !l->blocking) continue;
        if (l->prog == CU_STREAM_LEGACY || o->prog == CU_STREAM_LEGACY) r = lane_edge(o, l);
    }
    return r;
}

/* The capture event standing for program event ev at its last record in the segment. */
static CUevent *cap_event(lanes_t *ls, CUevent ev, bool make)
{
    for (uint32_t k = 0; k < ls->nev; k++)
        if (ls->prog_ev[k] == ev) return &ls->cap_ev[k];
    if (!make || ls->nev == CGJ_MAX_LANE_EVENTS ||
        cgj_drv.r_cuEventCreate(&ls->cap_ev[ls->nev], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return NULL;
    ls->prog_ev[ls->nev] = ev;
    return &ls->cap_ev[ls->nev++];
}

/* Issue op o of the segment on its lane, with its orderings. */
static CUresult lane_issue(lanes_t *ls, const cgj_op_t *o, bool ordered, CUstream *on)
{
    CUresult r = CUDA_SUCCESS;
    lane_t *l = lane_of(ls, o->call.stream, &r);
    if (!l) return r;
    *on = l->cap;
    r = legacy_edges(ls, l);
    if (r != CUDA_SUCCESS) return r;
    if (o->call.kind == CGJ_OP_STREAM_WAIT && ordered) { /* an edge from where it was recorded */
        CUevent *ce = cap_event(ls, o->call.u.e.ev, false);
        return ce ? cgj_drv.r_cuStreamWaitEvent(l->cap, *ce, 0) : CUDA_ERROR_INVALID_HANDLE;
    }
    r = cgj_op_issue(o, l->cap, true, false);
    if (r == CUDA_SUCCESS && o->call.kind == CGJ_OP_EVENT_RECORD) {
        CUevent *ce = cap_event(ls, o->call.u.e.ev, true);
        r = ce ? cgj_drv.r_cuEventRecord(*ce, l->cap) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

/* The fused kernel of the chain op o ends, on o's lane (ls NULL: on the origin `cap`). */
static CUresult fused_issue(cgj_trace_t *t, const cgj_op_t *o, lanes_t *ls, CUstream cap)
{
    const cgj_fused_t *fu = &t->fused[o->fused - 1];
    CUresult r = CUDA_SUCCESS;
    if (ls) {
        lane_t *l = lane_of(ls, o->call.stream, &r);
        if (!l) return r;
        cap = l->cap;
        r = legacy_edges(ls, l);
    }
    return r == CUDA_SUCCESS ? cgj_graph_issue_fused(fu, cap) : r;
}

/* Every lane joined back into the origin (a capture ends only with its lanes joined). */
static CUresult lanes_join(lanes_t *ls)
{
    CUresult r = CUDA_SUCCESS;
    for (uint32_t k = 1; k < ls->n && r == CUDA_SUCCESS; k++) r = lane_edge(&ls->l[k], &ls->l[0]);
    return r;
}

static void lanes_free(lanes_t *ls)
{
    for (uint32_t k = 0; k < ls->n; k++) {
        if (k && ls->l[k].cap) cgj_drv.r_cuStreamDestroy_v2(ls->l[k].cap);
        if (ls->l[k].mark) cgj_drv.r_cuEventDestroy_v2(ls->l[k].mark);
    }
    for (uint32_t k = 0; k < ls->nev; k++) cgj_drv.r_cuEventDestroy_v2(ls->cap_ev[k]);
    if (ls->fork) cgj_drv.r_cuEventDestroy_v2(ls->fork);
}

/* The node op i just added on stream `on`. */
static bool keep_node(cgj_op_t *o, CUstream on, uint32_t i, cgj_reason_t *why)
{
    CUstreamCaptureStatus st;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 0;
    CUresult r = cgj_drv.r_cuStreamGetCaptureInfo_v3(on, &st, NULL, NULL, &deps, NULL, &ndeps);
    if (r != CUDA_SUCCESS || ndeps != 1) FAIL(NODE, i, "%s, %zu nodes", cgj_driver_errstr(r), ndeps);
    o->node = deps[0];
    return true;
}

/* A kernel whose parameters vary, patched on the GPU where its segment has enough of them;
 * not one launched with attributes (clusters, programmatic dependent launch, priorities), whose
 * nodes keep the host's patching, nor one fused into a chain (no node). */
static bool gpu_patchable(const cgj_op_t *o)
{
    return o->call.kind == CGJ_OP_KERNEL && o->kp && o->kp->nvarying && !o->call.u.k.nattrs && !o->fused;
}

/* The patch kernel where the segment has at least CGJIT_DEVICE_PATCH kernels to patch every run
 * and it can run here (devpatch.h), and in *blocks how many patch nodes their values need (at
 * most CGJ_DEVPATCH_NODES_MAX); NULL otherwise. Not where the segment's first captured op is a
 * kernel launched with attributes: captured with programmatic dependent launch, its edge from
 * the patch node would let it start before the node's writes are done. */
static CUfunction gpu_patcher(cgj_trace_t *t, const cgj_segment_t *seg, uint32_t *blocks)
{
    for (uint32_t i = seg->first; i < seg->end; i++) {
        const cgj_op_t *o = &t->list.ops[i];
        if (o->fused || cgj_op_class[o->call.kind] != CGJ_CLASS_CAPTURE) continue;
        if (o->call.kind == CGJ_OP_KERNEL && o->call.u.k.nattrs) return NULL;
        break;
    }
    uint32_t want = 0, at = 0, used = 0;
    for (uint32_t j = 0; j < seg->npatch; j++) {
        cgj_op_t *o = &t->list.ops[seg->patch[j]];
        if (!gpu_patchable(o)) continue;
        want++;
        cgj_gpu_fits(cgj_gpu_pieces(o->kp), &at, &used, CGJ_DEVPATCH_NODES_MAX);
    }
    if (!cgj_cfg.DEVICE_PATCH || want < (uint32_t)cgj_cfg.DEVICE_PATCH) return NULL;
    *blocks = at + 1;
    return cgj_devpatch_kernel(t->ctx);
}

static void gpu_free(cgj_segment_t *seg)
{
    cgj_free(seg->gpu);
    seg->gpu = NULL;
}

/* The segment's kernels patched every run are made device-updatable where its graph has patch
 * nodes (capture_ops), as many as their blocks have room for: before instantiation, which takes
 * the attribute. The others are patched from the host. */
static void mark_for_gpu(cgj_trace_t *t, cgj_segment_t *seg)
{
    uint32_t want = 0, marked = 0, at = 0, used = 0;
    seg->patcher = NULL;
    seg->node_stale = false;
    for (uint32_t i = seg->first; i < seg->end; i++) t->list.ops[i].devnode = NULL;
    if (!seg->gpu) return;
    for (uint32_t j = 0; j < seg->npatch; j++) {
        cgj_op_t *o = &t->list.ops[seg->patch[j]];
        if (!gpu_patchable(o) || !o->node) continue;
        want++;
        uint32_t n = cgj_gpu_pieces(o->kp), at0 = at, used0 = used;
        if (!cgj_gpu_fits(n, &at, &used, seg->gpu->n)) continue;
        if (!cgj_devpatch_mark(o->node, &o->devnode)) {
            at = at0, used = used0;
            continue;
        }
        marked++;
    }
    CGJ_LOG(graphs, "segment of ops %u-%u: %u of %u kernels to patch are patched on the GPU, by %u patch node(s)",
            seg->first, seg->end, marked, want, marked ? seg->gpu->n : 0);
    if (marked) {
        seg->patcher = cgj_devpatch_kernel(t->ctx);
        return;
    }
    /* Nothing for them to write (the driver refused every node): the graph runs without them. */
    bool gone = true;
    for (uint32_t k = 0; k < seg->gpu->n; k++) gone &= cgj_drv.r_cuGraphDestroyNode(seg->gpu->node[k]) == CUDA_SUCCESS;
    if (gone) gpu_free(seg);
}

/* Capture the segment's ops on `cap` (capturing): on lanes where it uses several streams. */
static bool capture_ops(cgj_trace_t *t, cgj_segment_t *seg, CUstream cap, lanes_t *ls, cgj_reason_t *why)
{
    bool multi = seg->nothers > 0;
    uint32_t blocks = 0;
    CUfunction fn = gpu_patcher(t, seg, &blocks);
    gpu_free(seg);
    if (fn) { /* the patch nodes first, in a chain: every node of the segment depends on them */
        seg->gpu = cgj_xcalloc(1, sizeof *seg->gpu + blocks * sizeof seg->gpu->b[0]);
        for (uint32_t k = 0; k < blocks; k++) {
            CUresult r = cgj_devpatch_capture_node(fn, cap);
            CUstreamCaptureStatus st;
            const CUgraphNode *deps = NULL;
            size_t ndeps = 0;
            if (r == CUDA_SUCCESS) r = cgj_drv.r_cuStreamGetCaptureInfo_v3(cap, &st, NULL, NULL, &deps, NULL, &ndeps);
            if (r != CUDA_SUCCESS || ndeps != 1)
                FAIL(CAPTURE, NO_OP, "patch node: %s, %zu nodes", cgj_driver_errstr(r), ndeps);
            seg->gpu->node[seg->gpu->n++] = deps[0];
        }
    }
    if (multi) {
        CUresult r = cgj_drv.r_cuEventCreate(&ls->fork, CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuEventRecord(ls->fork, cap);
        if (r == CUDA_SUCCESS && lane_of(ls, seg->home, &r)) ls->l[0].cap = cap;
        if (r != CUDA_SUCCESS) FAIL(CAPTURE, NO_OP, "lanes: %s", cgj_driver_errstr(r));
    }
    event_pattern(t, seg);
    for (uint32_t i = seg->first; i < seg->end; i++) {
        cgj_op_t *o = &t->list.ops[i];
        CUstream on = cap;
        o->node = NULL;
        if (o->fused) { /* the chain's kernel at its last op; no node for its ops */
            CUresult r = t->fused[o->fused - 1].last == i ? fused_issue(t, o, multi ? ls : NULL, cap) : CUDA_SUCCESS;
            if (r != CUDA_SUCCESS) FAIL(CAPTURE, i, "fused kernel: %s", cgj_driver_errstr(r));
            continue;
        }
        bool ordered = wait_is_ordered(t, seg, i);
        CUresult r = cgj_op_class[o->call.kind] != CGJ_CLASS_CAPTURE || !multi ? cgj_op_issue(o, cap, true, ordered)
                                                                               : lane_issue(ls, o, ordered, &on);
        if (r != CUDA_SUCCESS) FAIL(CAPTURE, i, "%s: %s", o->call.api, cgj_driver_errstr(r));
        /* every value may turn out to vary: keep the node to patch it */
        if (has_node(o, ordered) && !keep_node(o, on, i, why)) return false;
    }
    CUresult r = lanes_join(ls);
    if (r != CUDA_SUCCESS) FAIL(CAPTURE, NO_OP, "joining the lanes: %s", cgj_driver_errstr(r));
    return true;
}

/* What the graph holds for op o's node, read once it is built. */
static CUresult read_node(cgj_op_t *o)
{
    switch (o->call.kind) {
    case CGJ_OP_KERNEL: return cgj_drv.r_cuGraphKernelNodeGetParams_v2(o->node, &o->inexec.k);
    case CGJ_OP_MEMCPY: return cgj_drv.r_cuGraphMemcpyNodeGetParams(o->node, &o->inexec.m);
    case CGJ_OP_MEMSET: return cgj_drv.r_cuGraphMemsetNodeGetParams(o->node, &o->inexec.s);
    case CGJ_OP_HOST_FUNC: o->inexec.h = o->call.u.h.data; return CUDA_SUCCESS; /* the data captured */
    default: o->inexec.e = o->call.u.e.ev; return CUDA_SUCCESS;                 /* an event node: the event captured */
    }
}

/* The segment's streams (home: the first captured op's), staging, and kernels to patch.
 * Pool ops issue nothing and do not count. */
static void find_streams(cgj_trace_t *t, cgj_segment_t *seg)
{
    seg->others = cgj_xcalloc(seg->end - seg->first, sizeof(CUstream));
    seg->patch = cgj_xcalloc(seg->end - seg->first, sizeof(uint32_t));
    for (uint32_t i = seg->first; i < seg->end; i++) {
        cgj_op_t *o = &t->list.ops[i];
        CUstream s = o->call.stream;
        if (cgj_op_class[o->call.kind] != CGJ_CLASS_CAPTURE) continue;
        if (!seg->ncapture++) seg->home = s;
        bool seen = s == seg->home;
        for (uint32_t j = 0; j < seg->nothers && !seen; j++) seen = seg->others[j] == s;
        if (!seen) seg->others[seg->nothers++] = s;
        if (o->stage) seg->has_staging = true;
        bool varies = o->listed || (o->kp && o->kp->nvarying) || cgj_names_host_memory(o);
        o->listed = false; /* classification marked the ops that vary: their list is made here */
        if (varies && !o->fused) cgj_graph_list(t, i); /* a fused op has no node */
    }
}

void cgj_graph_list(cgj_trace_t *t, uint32_t i)
{
    cgj_op_t *o = &t->list.ops[i];
    if (o->listed) return;
    cgj_segment_t *seg = &t->segs[o->seg];
    seg->patch[seg->npatch++] = i;
    o->listed = true;
}

static bool make_events(cgj_segment_t *seg, cgj_reason_t *why)
{
    if (!seg->nothers && !seg->has_staging) return true;
    CUresult r = cgj_drv.r_cuEventCreate(&seg->done, CU_EVENT_DISABLE_TIMING);
    seg->pre = cgj_xcalloc(seg->nothers + 1, sizeof(CUevent));
    for (uint32_t j = 0; j < seg->nothers && r == CUDA_SUCCESS; j++)
        r = cgj_drv.r_cuEventCreate(&seg->pre[j], CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) FAIL(EVENTS, NO_OP, "%s", cgj_driver_errstr(r));
    return true;
}

/* The gate between cgjit's captures and context synchronizations (graph.h). */
static pthread_rwlock_t sync_gate = PTHREAD_RWLOCK_INITIALIZER;

CUresult cgj_graph_ctx_sync(CUcontext ctx, bool v2)
{
    pthread_rwlock_rdlock(&sync_gate);
    CUresult r = v2 ? cgj_drv.r_cuCtxSynchronize_v2(ctx) : cgj_drv.r_cuCtxSynchronize();
    pthread_rwlock_unlock(&sync_gate);
    return r;
}

void cgj_graph_forked(void)
{
    pthread_rwlock_init(&sync_gate, NULL);
    cgj_devpatch_forked();
}

static bool build_segment(cgj_trace_t *t, cgj_segment_t *seg, CUstream cap, cgj_reason_t *why)
{
    if (!make_events(seg, why)) return false;
    pthread_rwlock_wrlock(&sync_gate);
    CUresult r = cgj_drv.r_cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (r != CUDA_SUCCESS) {
        pthread_rwlock_unlock(&sync_gate);
        FAIL(CAPTURE, NO_OP, "cuStreamBeginCapture: %s", cgj_driver_errstr(r));
    }
    lanes_t ls = {.n = 0};
    bool ok = capture_ops(t, seg, cap, &ls, why);
    CUgraph g = NULL;
    r = cgj_drv.r_cuStreamEndCapture(cap, &g);
    pthread_rwlock_unlock(&sync_gate);
    lanes_free(&ls);
    seg->graph = g;
    if (!ok) return false;
    if (r != CUDA_SUCCESS) FAIL(CAPTURE, NO_OP, "cuStreamEndCapture: %s", cgj_driver_errstr(r));
    mark_for_gpu(t, seg);
    uint64_t t0 = cgj_now_ns();
    r = cgj_drv.r_cuGraphInstantiateWithFlags(&seg->exec, g, 0);
    t->instantiate_ns += cgj_now_ns() - t0;
    if (r != CUDA_SUCCESS) FAIL(INSTANTIATE, NO_OP, "%s", cgj_driver_errstr(r));
    r = cgj_drv.r_cuGraphUpload(seg->exec, cap);
    if (r != CUDA_SUCCESS) FAIL(UPLOAD, NO_OP, "%s", cgj_driver_errstr(r));
    for (uint32_t i = seg->first; i < seg->end; i++) {
        cgj_op_t *o = &t->list.ops[i];
        if (!o->node) continue;
        r = read_node(o);
        if (r != CUDA_SUCCESS) FAIL(NODE, i, "%s: node parameters: %s", o->call.api, cgj_driver_errstr(r));
        if (o->kp) memcpy(o->kp->inexec, o->kp->live, o->kp->size);
    }
    return true;
}

/* A segment issued eagerly runs its ops as the program makes them: its fused chains are undone
 * (their library calls are absorbed only where replay can reproduce their ops). */
static void unfuse(cgj_trace_t *t, const cgj_segment_t *seg)
{
    for (uint32_t i = seg->first; i < seg->end; i++) {
        cgj_op_t *o = &t->list.ops[i];
        if (!o->fused) continue;
        cgj_fused_t *fu = &t->fused[o->fused - 1];
        if (fu->first == i) t->fused_chains--, t->fused_ops -= fu->nkernels, t->fused_gemms -= fu->ops != NULL;
        o->fused = 0;
    }
}

/* A segment whose every captured op is a copy from host memory that replay stages: replayed, its
 * graph would copy every byte into staging at the call, as the driver does, and start the copies
 * only at the segment's end, later than eager execution does (a program that times the work
 * after its uploads would count them). */
static bool copies_only(const cgj_trace_t *t, const cgj_segment_t *seg)
{
    for (uint32_t i = seg->first; i < seg->end; i++) {
        const cgj_op_t *o = &t->list.ops[i];
        if (cgj_op_class[o->call.kind] == CGJ_CLASS_CAPTURE && (!cgj_call_staged(&o->call) || o->lib)) return false;
    }
    return true;
}

void cgj_graph_segments(cgj_trace_t *t)
{
    split_segments(t);
    for (uint32_t s = 0; s < t->nsegs; s++) {
        cgj_segment_t *seg = &t->segs[s];
        for (uint32_t i = seg->first; i < seg->end; i++) t->list.ops[i].seg = s;
        find_streams(t, seg);
        /* A graph of one or two nodes costs as much host time to launch as its ops do eagerly,
         * and starts later on the GPU: a program waiting for it right away would be slower. So
         * does a graph of staged copies only. Unless it holds a fused chain: one kernel in place
         * of several, its intermediates never written. */
        bool fused = false;
        for (uint32_t i = seg->first; i < seg->end && !fused; i++) fused = t->list.ops[i].fused != 0;
        seg->eager = seg->ncapture && (seg->ncapture < (uint32_t)cgj_cfg.GRAPH_MIN_OPS || copies_only(t, seg)) &&
                     !fused;
        if (seg->eager) unfuse(t, seg);
    }
}

bool cgj_graph_build(cgj_trace_t *t, cgj_reason_t *why)
{
    CUstream cap = NULL;
    CUresult r = cgj_drv.r_cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) FAIL(STREAM, NO_OP, "%s", cgj_driver_errstr(r));
    bool ok = true;
    for (uint32_t s = 0; s < t->nsegs && ok; s++) {
        cgj_segment_t *seg = &t->segs[s];
        if (!seg->ncapture || seg->eager) continue;
        cgj_nvtx_push(CGJ_NVTX_INSTANTIATE, NULL, s); /* captured, instantiated, uploaded */
        ok = build_segment(t, seg, cap, why);
        cgj_nvtx_pop();
    }
    if (ok) cgj_drv.r_cuStreamSynchronize(cap); /* uploads done before the stream goes */
    cgj_drv.r_cuStreamDestroy_v2(cap);
    if (!ok) cgj_graph_destroy(t);
    else CGJ_LOG(graphs, "built %u segment graph(s) from %u ops", t->nsegs, t->list.n);
    return ok;
}

void cgj_graph_destroy(cgj_trace_t *t)
{
    for (uint32_t s = 0; s < t->nsegs; s++) {
        cgj_segment_t *seg = &t->segs[s];
        /* An executable graph still running is freed by the driver once it has run: its patch
         * node's writes end with it. */
        if (seg->exec) cgj_drv.r_cuGraphExecDestroy(seg->exec);
        if (seg->graph) cgj_drv.r_cuGraphDestroy(seg->graph);
        gpu_free(seg);
        for (uint32_t j = 0; seg->pre && j < seg->nothers; j++)
            if (seg->pre[j]) cgj_drv.r_cuEventDestroy_v2(seg->pre[j]);
        if (seg->done) cgj_drv.r_cuEventDestroy_v2(seg->done);
        cgj_free(seg->others), cgj_free(seg->pre), cgj_free(seg->patch);
    }
    cgj_free(t->segs);
    t->segs = NULL;
    t->nsegs = 0;
}
