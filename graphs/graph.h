/*
 * graph.h — building a trace into CUDA graphs, and launching them.
 *
 * Each segment of a trace (the capture ops between two boundary ops) is re-issued inside a
 * stream capture on a private non-blocking stream, instantiated and uploaded. Capture never
 * touches the program's streams: the legacy default stream cannot be captured, and capturing
 * a program stream would turn the program's own concurrent calls into capture errors. The
 * graph is then launched on the segment's *home* stream (the stream of its first op), after
 * the other streams it uses have been made to wait for their work so far; afterwards they
 * wait for the graph. So the graph runs exactly where eager execution would have run those
 * ops, with the same ordering towards everything else the program does. Inside the graph,
 * ops keep the orderings eager execution gives them: each program stream's ops in order, on a
 * capture stream (lane) of its own, with edges for event waits and the legacy stream's implicit
 * synchronization, so the streams' work stays concurrent (graph.c).
 */
#ifndef CGJ_GRAPH_H
#define CGJ_GRAPH_H

#include "ir/ir.h"

/* Split t->list into segments, and say which have no graph worth launching (seg->eager: too
 * short, or staged copies only; their ops run as the program makes them at replay). */
void cgj_graph_segments(cgj_trace_t *t);
/* Capture and instantiate each segment cgj_graph_segments left for a graph (the host-to-device
 * copies in them must have their staging already). On failure returns false with *why set
 * (BUILD_*); the trace's partial graphs are destroyed. */
bool cgj_graph_build(cgj_trace_t *t, cgj_reason_t *why);
/* A context synchronization fails while any stream of the context captures, in whichever thread
 * and capture mode (the driver's rule): cgjit's own captures must never make the program's
 * cuCtxSynchronize fail on another thread. Every context synchronization, the program's and
 * cgjit's, goes through here: it holds the capture gate shared for the call, and cgjit holds it
 * alone while it captures. v2: cuCtxSynchronize_v2(ctx), else cuCtxSynchronize(). */
CUresult cgj_graph_ctx_sync(CUcontext ctx, bool v2);
/* In a child after fork(): the gate as if no thread held it. */
void cgj_graph_forked(void);
/* Patch the nodes of segment s whose values differ from what its executable graph holds
 * (kernel parameters, grid, block, shared memory; copy operands and sizes; memset operands),
 * then launch it. When the driver refuses a patch, *refused is that op's index (else
 * UINT32_MAX) and nothing is launched; the nodes patched before it keep their new values.
 * host_gen: the host memory generation now; a copy node naming host memory is set again when it
 * was set in an older one (the driver crashes on a node whose host allocation was freed).
 * *patched counts what was patched (added to). */
typedef struct cgj_patched {
    uint64_t nodes;    /* nodes patched */
    uint64_t on_gpu;   /* of them, kernels patched by cgjit's patch kernel (graphs/devpatch.h) */
    uint64_t launches; /* blocks set into patch nodes */
} cgj_patched_t;
CUresult cgj_graph_launch(cgj_trace_t *t, uint32_t s, uint64_t host_gen, cgj_patched_t *patched, uint32_t *refused,
                          uint32_t issued);
/* (A segment of fewer than CGJIT_GRAPH_MIN_OPS ops has no graph: launching it issues its ops
 * eagerly with the run's values, but for its first `issued` ops, which ran already as the
 * program made them; there is nothing to patch or refuse. A graph segment has issued 0.) */
/* Issue ops from..to-1 of t (of a segment too small for a graph) eagerly, in order, on their own
 * streams; *done: how many were issued (on an error, the failing op is from + *done). */
CUresult cgj_graph_issue_ops(cgj_trace_t *t, uint32_t from, uint32_t to, uint32_t *done);
/* Op i's values vary from now on: its node joins its segment's patch list (once), compared with
 * what the executable graph holds at each launch. */
void cgj_graph_list(cgj_trace_t *t, uint32_t i);
/* Before replay overwrites segment s's staging buffers: wait until its last launch is done.
 * Returns true if it had to wait. */
bool cgj_graph_staging_wait(cgj_segment_t *seg);
/* Destroy the graphs and events of t (not its ops). */
void cgj_graph_destroy(cgj_trace_t *t);

/* Launch fused kernel fu (fusion/) on stream s, eagerly or into a capture: its arguments are fixed. */
CUresult cgj_graph_issue_fused(const cgj_fused_t *fu, CUstream s);
/* The solo kernel of t's library call at op i (cgj_trace_t.solo), or NULL. */
const cgj_fused_t *cgj_graph_solo_at(const cgj_trace_t *t, uint32_t i);
/* Re-issue ops from..to-1 of t eagerly with their live values, in order: a fused chain held whole
 * as its kernel, a library call of a chain that has a solo kernel as that; *done as
 * cgj_graph_issue_ops. */
CUresult cgj_graph_reissue(const cgj_trace_t *t, uint32_t from, uint32_t to, uint32_t *done);

/* issue.c: issue op o on `stream` with its live values, eagerly or into a capture. `capturing`:
 * use the external event-record and event-wait nodes; `skip_wait`: the wait is ordered by the
 * capture already. */
CUresult cgj_op_issue(const cgj_op_t *o, CUstream stream, bool capturing, bool skip_wait);

#endif /* CGJ_GRAPH_H */
