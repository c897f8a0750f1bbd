/*
 * devpatch.h — patching a segment graph's kernel nodes from the GPU.
 *
 * A kernel whose values change every run (a decode step's position and KV length) has its node
 * patched before each launch. From the host that is one cuGraphExecKernelNodeSetParams per
 * node, about half a microsecond each: for a step of 180 such kernels, more host time than the
 * launches it replaced. A segment with at least CGJIT_DEVICE_PATCH of them makes their nodes
 * device-updatable instead (CUDA 12.4), and the graph gets cgjit's patch kernel (devpatch.cu)
 * as its root node, ahead of every other node (a chain of such nodes, one per block of 168
 * updates the segment needs, at most CGJ_DEVPATCH_NODES_MAX). Where any of those kernels' values
 * changed, the host writes all their varying bytes, in pieces of up to 8 (windows from a varying
 * byte on: values side by side are one piece; ir/ir.h, cgj_piece_t), into the blocks and
 * sets each as its node's parameter (one cuGraphExecKernelNodeSetParams a block, for the whole
 * segment); when the graph runs, the nodes write them into the nodes after them, which the
 * driver applies within the same launch. Kernels past the last block's room are patched from the
 * host.
 *
 * The driver's rules for such graphs (cuda.h, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE):
 * uploaded before the first launch (the build does), and again after a host update of a
 * device-updatable node (the host path does); the patch nodes themselves are plain kernel nodes,
 * set without an upload, and removed before instantiation where no kernel of the segment could
 * be marked (cuGraphDestroyNode; a device-updatable node cannot be removed).
 *
 * Exact, whatever the driver keeps of earlier launches' device updates: the nodes hold every
 * marked kernel's current varying bytes, the same ones SetParams would have written, and runs
 * before every node they patch in each launch, so a node the driver set back to its host-side
 * parameters, or one the host set (a grid that changed), gets them again before it runs. The
 * blocks are set again whenever any of those values changed, the host's included. Where the patch
 * kernel cannot load (no image for this GPU, a driver without device-updatable nodes, a library
 * built without nvcc), or a node refuses the attribute, nodes are patched from the host as before.
 */
#ifndef CGJ_DEVPATCH_H
#define CGJ_DEVPATCH_H

#include "graphs/devpatch_abi.h"

#include <cuda.h>
#include <stdbool.h>
#include <string.h>

/* The patch kernel in context ctx, which must be current (loaded on first use), or NULL where
 * it cannot run there. */
CUfunction cgj_devpatch_kernel(CUcontext ctx);
/* Make a node of a graph not yet instantiated device-updatable; its device handle in *dn.
 * False: the driver refused, and the node stays as it was. */
bool cgj_devpatch_mark(CUgraphNode node, CUgraphDeviceNode *dn);

/* Add to block b the update of `size` (1 to 8) bytes at `offset` of node dn (b not full): the
 * low `size` bytes of `value`, the others 0. Inline: replay adds every varying value of a
 * segment's kernels before each launch. */
static inline void cgj_devpatch_put(cgj_devpatch_block_t *b, CUgraphDeviceNode dn, uint32_t offset, uint64_t value,
                                    uint32_t size)
{
    cgj_devpatch_entry_t *e = &b->e[b->n++];
    e->node = (uint64_t)(uintptr_t)dn;
    e->value = value;
    e->offset = offset;
    e->size = size;
}

/* Add a patch node to the graph being captured on `cap`, with an empty block: captured before
 * the segment's own ops (a chain of them where there are several), so that every node of the
 * segment depends on it. */
CUresult cgj_devpatch_capture_node(CUfunction fn, CUstream cap);
/* Give the patch node `node` of `exec` the block *b. */
CUresult cgj_devpatch_set_node(CUgraphExec exec, CUgraphNode node, CUfunction fn, cgj_devpatch_block_t *b);
/* In a child after fork(): the loaded kernels belong to the parent's contexts. */
void cgj_devpatch_forked(void);

#endif
