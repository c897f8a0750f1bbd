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
 * ops, with the same ordering towards everything else the program does (ops within one
 * segment run in program order, which is one valid eager ordering).
 */
#ifndef CGJ_GRAPH_H
#define CGJ_GRAPH_H

#include "tracer/trace.h"

/* Split t->list into segments, capture and instantiate each. On failure returns false with
 * why[] set; the trace's partial graphs are destroyed. */
bool cgj_graph_build(cgj_trace_t *t, char *why, size_t whylen);
/* Patch the varying parameters of segment s and launch it. */
CUresult cgj_graph_launch(cgj_trace_t *t, uint32_t s, uint64_t *patched);
/* Before replay overwrites segment s's staging buffers: wait until its last launch is done.
 * Returns true if it had to wait. */
bool cgj_graph_staging_wait(cgj_segment_t *seg);
/* Destroy the graphs and events of t (not its ops). */
void cgj_graph_destroy(cgj_trace_t *t);

#endif /* CGJ_GRAPH_H */
