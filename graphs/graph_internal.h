/*
 * graph_internal.h — what the two files of graph building share; the rest of cgjit sees only
 * graphs/graph.h.
 *
 *     graph.c   segments and chunks, capture (on lanes where a segment uses several streams),
 *               the patch nodes' layout, instantiation and upload, the capture gate, destroy
 *     launch.c  patching a built graph with a run's values (from the host or through the patch
 *               nodes) and launching it; issuing a segment too short for a graph eagerly
 *
 * graph.c lays out the patch nodes' blocks and launch.c fills them, by the same rule
 * (cgj_gpu_fits): a block holds whole kernels only.
 */
#ifndef CGJ_GRAPH_INTERNAL_H
#define CGJ_GRAPH_INTERNAL_H

#include "graphs/devpatch.h"
#include "graphs/graph.h"

/* Does the copy's node name the program's page-locked host memory (not cgjit's staging)? */
static inline bool cgj_names_host_memory(const cgj_op_t *o)
{
    return o->call.kind == CGJ_OP_MEMCPY &&
           ((o->call.u.m.dir == CGJ_DIR_H2D && o->call.u.m.direct) || o->call.u.m.dir == CGJ_DIR_D2H);
}

/* The pieces (of up to 8 bytes) of kp's varying slots: its entries in a block. */
static inline uint32_t cgj_gpu_pieces(cgj_kparams_t *kp)
{
    cgj_kparams_slots(kp);
    return kp->pieces;
}

/* Blocks filled in order, a kernel's pieces never split between two: does one of n pieces fit,
 * in block *at (moved on to the next where the current one is too full), of `max` blocks? */
static inline bool cgj_gpu_fits(uint32_t n, uint32_t *at, uint32_t *used, uint32_t max)
{
    if (n > CGJ_DEVPATCH_ENTRIES) return false;
    if (*used + n > CGJ_DEVPATCH_ENTRIES) {
        if (*at + 1 >= max) return false;
        ++*at, *used = 0;
    }
    *used += n;
    return true;
}

/* A segment's patch nodes and their blocks as last made. */
typedef struct cgj_gpu_blocks {
    uint32_t n; /* patch nodes, one block each */
    CUgraphNode node[CGJ_DEVPATCH_NODES_MAX];
    cgj_devpatch_block_t b[];
} cgj_gpu_blocks_t;

#endif /* CGJ_GRAPH_INTERNAL_H */
