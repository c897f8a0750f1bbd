/*
 * devpatch.h — patching a segment graph's kernel nodes from the GPU.
 *
 * A kernel whose values change every run (a decode step's position and KV length) has its node
 * patched before each launch. From the host that is one cuGraphExecKernelNodeSetParams per
 * node, about half a microsecond each: for a step of 180 such kernels, more host time than the
 * launches it replaced. A segment with at least CGJIT_DEVICE_PATCH of them makes their nodes
 * device-updatable instead (CUDA 12.4), and the graph gets cgjit's patch kernel (devpatch.cu)
 * as its root node, ahead of every other node. Before each launch the host writes the run's
 * changed bytes into one parameter block and sets it as that node's parameter (one
 * cuGraphExecKernelNodeSetParams for the whole segment); when the graph runs, the node writes
 * the values into the nodes after it, which the driver applies within the same launch. Updates
 * past one block go to the same kernel launched on the graph's stream right before the graph.
 *
 * Exact: the block carries the same bytes SetParams would have written; the patch node runs
 * before every node it patches, in the launch whose values they are, and stream order puts a
 * launched block between the previous launch of the graph and this one. A device-updatable node
 * is never patched from the host while a patch kernel may still be queued for it (graph.c waits
 * for the segment's stream first), and the patch node is given a new block (or an empty one)
 * whenever it holds one, so it never writes a stale value over one the host set. Where the patch
 * kernel cannot load (no image for this GPU, a driver without device-updatable nodes, a library
 * built without nvcc), or a node refuses the attribute, nodes are patched from the host as before.
 */
#ifndef CGJ_DEVPATCH_H
#define CGJ_DEVPATCH_H

#include "graphs/devpatch_abi.h"

#include <cuda.h>
#include <stdbool.h>

/* The patch kernel in context ctx, which must be current (loaded on first use), or NULL where
 * it cannot run there. */
CUfunction cgj_devpatch_kernel(CUcontext ctx);
/* Make a node of a graph not yet instantiated device-updatable; its device handle in *dn.
 * False: the driver refused, and the node stays as it was. */
bool cgj_devpatch_mark(CUgraphNode node, CUgraphDeviceNode *dn);

/* The updates of one launch, sent in blocks of CGJ_DEVPATCH_ENTRIES. */
typedef struct cgj_devpatch_batch {
    CUfunction fn;
    CUstream stream;
    uint32_t launches; /* patch kernels launched so far */
    cgj_devpatch_block_t b;
} cgj_devpatch_batch_t;

/* Queue the update of `size` (1 to 8) bytes at `offset` of node dn (the block not full: the
 * caller launches a full one first, cgj_devpatch_flush). */
void cgj_devpatch_add(cgj_devpatch_batch_t *b, CUgraphDeviceNode dn, uint32_t offset, const void *value,
                      uint32_t size);
/* Launch what is queued. */
CUresult cgj_devpatch_flush(cgj_devpatch_batch_t *b);
/* Add the patch node to the graph being captured on `cap`, with an empty block: the first
 * captured op, so that every node of the segment depends on it. */
CUresult cgj_devpatch_capture_node(CUfunction fn, CUstream cap);
/* Give the patch node `node` of `exec` the block *b. */
CUresult cgj_devpatch_set_node(CUgraphExec exec, CUgraphNode node, CUfunction fn, cgj_devpatch_block_t *b);
/* In a child after fork(): the loaded kernels belong to the parent's contexts. */
void cgj_devpatch_forked(void);

#endif
