/* launch.c — patching a segment's executable graph with a run's values, and launching it; see
 * graph.h. */
#include "graphs/graph_internal.h"
#include "base/driver.h"

#include <string.h>

/* Do kp's varying values differ from what the graph holds? */
static bool values_changed(cgj_kparams_t *kp)
{
    const cgj_slot_t *sl = cgj_kparams_slots(kp);
    uint32_t j = kp->nconst;
    for (; j < kp->v8; j++) {
        uint64_t a, b;
        memcpy(&a, kp->live + sl[j].off, 8), memcpy(&b, kp->inexec + sl[j].off, 8);
        if (a != b) return true;
    }
    for (; j < kp->v4; j++) {
        uint32_t a, b;
        memcpy(&a, kp->live + sl[j].off, 4), memcpy(&b, kp->inexec + sl[j].off, 4);
        if (a != b) return true;
    }
    for (; j < kp->n; j++)
        if (memcmp(kp->live + sl[j].off, kp->inexec + sl[j].off, sl[j].sz)) return true;
    return false;
}

/* Add every varying byte of o to the blocks, its pieces (kp->piece, up to 8 bytes each) one
 * update each, in block *at or the next, and take them as what the graph holds (kp->inexec: its
 * patch nodes write them; seg->node_stale says they have yet to run). *changed: some piece
 * differs from what the graph held (the bytes a piece spans besides varying ones are the node's
 * own, the same in live and inexec). False where they do not fit (slots found varying after the
 * build): nothing of o is added or taken then. Always inlined: patch() runs it for every
 * device-patched kernel before each launch, and a call's frame cost a third of its work. */
static inline __attribute__((always_inline)) bool gpu_add(cgj_op_t *o, cgj_gpu_blocks_t *g, uint32_t *at, bool *changed)
{
    cgj_kparams_t *kp = o->kp;
    uint32_t used = g->b[*at].n, k = *at;
    if (!cgj_gpu_fits(cgj_gpu_pieces(kp), &k, &used, g->n)) return false;
    *at = k;
    cgj_devpatch_block_t *b = &g->b[k];
    const cgj_piece_t *pc = kp->piece;
    uint64_t d = 0;
    for (uint32_t j = 0, n = kp->pieces; j < n; j++) {
        uint64_t v = 0, was = 0;
        uint32_t sz = pc[j].sz;
        uint8_t *in = kp->inexec + pc[j].off;
        if (sz == 8) {
            memcpy(&v, kp->live + pc[j].off, 8), memcpy(&was, in, 8);
            memcpy(in, &v, 8);
        } else {
            memcpy(&v, kp->live + pc[j].off, sz), memcpy(&was, in, sz);
            memcpy(in, &v, sz);
        }
        d |= v ^ was;
        cgj_devpatch_put(b, o->devnode, pc[j].off, v, sz);
    }
    *changed = d != 0;
    return true;
}

/* Kernel op o's node set from the host to p with the run's values. A device-updatable node is
 * set once the segment's earlier launches are done (their patch nodes write into it while they
 * run), and the graph uploaded again after. */
static CUresult set_from_host(cgj_segment_t *seg, cgj_op_t *o, CUDA_KERNEL_NODE_PARAMS_v2 p)
{
    cgj_kparams_t *kp = o->kp;
    CUresult r;
    if (o->devnode && (r = cgj_drv.r_cuStreamSynchronize(seg->home)) != CUDA_SUCCESS) return r;
    size_t blob_size = kp->size;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, kp->live, CU_LAUNCH_PARAM_BUFFER_SIZE, &blob_size,
                     CU_LAUNCH_PARAM_END};
    p.kernelParams = kp->extra_form ? NULL : kp->ptrs;
    p.extra = kp->extra_form ? extra : NULL;
    r = cgj_drv.r_cuGraphExecKernelNodeSetParams_v2(seg->exec, o->node, &p);
    if (r == CUDA_SUCCESS && o->devnode) r = cgj_drv.r_cuGraphUpload(seg->exec, seg->home);
    if (r != CUDA_SUCCESS) return r;
    memcpy(kp->inexec, kp->live, kp->size);
    p.kernelParams = NULL, p.extra = NULL;
    o->inexec.k = p;
    return CUDA_SUCCESS;
}

/* Do o's launch dimensions differ from what its node holds? */
static bool dims_changed(const cgj_op_t *o)
{
    const __typeof__(o->call.u.k) *k = &o->call.u.k;
    const CUDA_KERNEL_NODE_PARAMS_v2 *in = &o->inexec.k;
    return in->gridDimX != k->grid[0] || in->gridDimY != k->grid[1] || in->gridDimZ != k->grid[2] ||
           in->blockDimX != k->block[0] || in->blockDimY != k->block[1] || in->blockDimZ != k->block[2] ||
           in->sharedMemBytes != k->smem;
}

/* *did: o's node takes new values, from the host or (*on_gpu too) through the patch node;
 * *dirty: a device-updatable node's values changed (the patch node's block is made again). */
static CUresult patch_kernel(cgj_segment_t *seg, cgj_op_t *o, bool *dirty, bool *did, bool *on_gpu)
{
    const __typeof__(o->call.u.k) *k = &o->call.u.k;
    const CUDA_KERNEL_NODE_PARAMS_v2 *in = &o->inexec.k;
    bool dims = dims_changed(o);
    if (!dims && !values_changed(o->kp)) return CUDA_SUCCESS;
    *did = true;
    if (o->devnode) *dirty = true; /* the block holds its values, whichever way they go now */
    if (o->devnode && !dims) {
        *on_gpu = true;
        return CUDA_SUCCESS;
    }
    CUDA_KERNEL_NODE_PARAMS_v2 p = *in;
    p.gridDimX = k->grid[0], p.gridDimY = k->grid[1], p.gridDimZ = k->grid[2];
    p.blockDimX = k->block[0], p.blockDimY = k->block[1], p.blockDimZ = k->block[2];
    p.sharedMemBytes = k->smem;
    return set_from_host(seg, o, p);
}

/* One operand of a 1D copy node: a host pointer or a device address, as the node holds it. */
static void set_operand(CUmemorytype type, const void **host, CUdeviceptr *dev, CUdeviceptr value)
{
    if (type == CU_MEMORYTYPE_HOST) *host = (const void *)(uintptr_t)value;
    else *dev = value;
}

static CUresult patch_memcpy(CUgraphExec exec, cgj_op_t *o, CUcontext ctx, uint64_t host_gen, bool *did)
{
    const __typeof__(o->call.u.m) *m = &o->call.u.m;
    CUDA_MEMCPY3D p = o->inexec.m;
    CUdeviceptr src = m->dir == CGJ_DIR_H2D ? (CUdeviceptr)(uintptr_t)(m->direct ? m->hsrc : o->stage) : m->src;
    CUdeviceptr dst = m->dir == CGJ_DIR_D2H ? (CUdeviceptr)(uintptr_t)m->hdst : m->dst;
    set_operand(p.srcMemoryType, &p.srcHost, &p.srcDevice, src);
    set_operand(p.dstMemoryType, (const void **)&p.dstHost, &p.dstDevice, dst);
    p.WidthInBytes = m->bytes;
    bool stale = cgj_names_host_memory(o) && o->host_gen != host_gen; /* freed since: set it again */
    if (!stale && !memcmp(&p, &o->inexec.m, sizeof p)) return CUDA_SUCCESS;
    CUresult r = cgj_drv.r_cuGraphExecMemcpyNodeSetParams(exec, o->node, &p, ctx);
    if (r != CUDA_SUCCESS) return r;
    o->inexec.m = p;
    o->host_gen = host_gen;
    *did = true;
    return CUDA_SUCCESS;
}

static CUresult patch_memset(CUgraphExec exec, cgj_op_t *o, CUcontext ctx, bool *did)
{
    const __typeof__(o->call.u.s) *m = &o->call.u.s;
    CUDA_MEMSET_NODE_PARAMS p = o->inexec.s;
    p.dst = m->dst;
    p.value = m->elem == 1 ? (m->value & 0xffu) : m->elem == 2 ? (m->value & 0xffffu) : m->value;
    p.width = m->count;
    if (!memcmp(&p, &o->inexec.s, sizeof p)) return CUDA_SUCCESS;
    CUresult r = cgj_drv.r_cuGraphExecMemsetNodeSetParams(exec, o->node, &p, ctx);
    if (r != CUDA_SUCCESS) return r;
    o->inexec.s = p;
    *did = true;
    return CUDA_SUCCESS;
}

/* An event record or wait node takes the run's event (a wait ordered inside the segment is an
 * edge: the guard held its event to the record's). */
static CUresult patch_event(CUgraphExec exec, cgj_op_t *o, bool *did)
{
    CUevent ev = o->call.u.e.ev;
    if (!o->node || ev == o->inexec.e) return CUDA_SUCCESS;
    CUresult r = o->call.kind == CGJ_OP_EVENT_RECORD ? cgj_drv.r_cuGraphExecEventRecordNodeSetEvent(exec, o->node, ev)
                                                     : cgj_drv.r_cuGraphExecEventWaitNodeSetEvent(exec, o->node, ev);
    if (r != CUDA_SUCCESS) return r;
    o->inexec.e = ev;
    *did = true;
    return CUDA_SUCCESS;
}

/* A host node takes the run's data (its function is the same: a guarded shape). */
static CUresult patch_host(CUgraphExec exec, cgj_op_t *o, bool *did)
{
    if (o->call.u.h.data == o->inexec.h) return CUDA_SUCCESS;
    CUDA_HOST_NODE_PARAMS p = {.fn = o->call.u.h.fn, .userData = o->call.u.h.data};
    CUresult r = cgj_drv.r_cuGraphExecHostNodeSetParams(exec, o->node, &p);
    if (r != CUDA_SUCCESS) return r;
    o->inexec.h = p.userData;
    *did = true;
    return CUDA_SUCCESS;
}

/* Blocks from every device-updatable op of the segment, from the start; those that do not fit
 * are set from the host (no room left). */
static CUresult gpu_blocks(cgj_segment_t *seg, cgj_trace_t *t, uint32_t *refused)
{
    cgj_gpu_blocks_t *g = seg->gpu;
    for (uint32_t k = 0; k < g->n; k++) g->b[k].n = 0;
    uint32_t at = 0;
    for (uint32_t j = 0; j < seg->npatch; j++) {
        cgj_op_t *o = &t->list.ops[seg->patch[j]];
        bool changed;
        if (!o->devnode || gpu_add(o, g, &at, &changed)) continue;
        CUresult r = set_from_host(seg, o, o->inexec.k);
        if (r != CUDA_SUCCESS) {
            *refused = seg->patch[j];
            return r;
        }
    }
    return CUDA_SUCCESS;
}

/* Patch every listed node of the segment whose values differ from what the graph holds: from
 * the host, or through the patch nodes, which are given blocks with every device-updatable
 * node's varying bytes where any of them changed (or the last blocks made never ran). The
 * blocks are made in the same pass as the check, while each op's values are at hand, and set
 * into the patch nodes only where something changed: unchanged, they hold what the nodes
 * already have. On a refusal, *refused is the op's index and nothing is launched; a block a
 * node refused is a failed launch. */
static CUresult patch(cgj_segment_t *seg, cgj_trace_t *t, uint64_t host_gen, cgj_patched_t *patched, uint32_t *refused)
{
    bool dirty = seg->node_stale, room = true;
    cgj_gpu_blocks_t *g = seg->patcher ? seg->gpu : NULL;
    uint32_t at = 0;
    if (g) {
        for (uint32_t k = 0; k < g->n; k++) g->b[k].n = 0;
        seg->node_stale = true; /* inexec takes the blocks' values: until the graph has run with them */
    }
    for (uint32_t j = 0; j < seg->npatch; j++) {
        cgj_op_t *o = &t->list.ops[seg->patch[j]];
        bool did = false, on_gpu = false, gpu = g && o->devnode && room;
        CUresult r = CUDA_SUCCESS;
        if (gpu && o->call.kind == CGJ_OP_KERNEL && !dims_changed(o)) {
            /* The common device-patched kernel: its pieces go in the block, compared with what
             * the node holds as they go (one walk of its varying bytes). */
            if ((room = gpu_add(o, g, &at, &did))) dirty |= did, on_gpu = did;
            else r = patch_kernel(seg, o, &dirty, &did, &on_gpu);
        } else {
            switch (o->call.kind) {
            case CGJ_OP_KERNEL: r = patch_kernel(seg, o, &dirty, &did, &on_gpu); break;
            case CGJ_OP_MEMCPY: r = patch_memcpy(seg->exec, o, t->ctx, host_gen, &did); break;
            case CGJ_OP_MEMSET: r = patch_memset(seg->exec, o, t->ctx, &did); break;
            case CGJ_OP_HOST_FUNC: r = patch_host(seg->exec, o, &did); break;
            default: r = patch_event(seg->exec, o, &did); break; /* a record, or a wait with a node */
            }
            bool changed;
            if (r == CUDA_SUCCESS && gpu) room = gpu_add(o, g, &at, &changed);
        }
        if (r != CUDA_SUCCESS) {
            *refused = seg->patch[j];
            return r;
        }
        patched->nodes += did;
        patched->on_gpu += on_gpu;
    }
    if (!g || !dirty) return CUDA_SUCCESS;
    if (!room) { /* an op past the blocks' room: made again, with it set from the host */
        CUresult r = gpu_blocks(seg, t, refused);
        if (r != CUDA_SUCCESS) return r;
    }
    for (uint32_t k = 0; k < g->n; k++) {
        CUresult r = cgj_devpatch_set_node(seg->exec, g->node[k], seg->patcher, &g->b[k]);
        if (r != CUDA_SUCCESS) return r;
        patched->launches++;
    }
    return CUDA_SUCCESS;
}

CUresult cgj_graph_issue_ops(cgj_trace_t *t, uint32_t from, uint32_t to, uint32_t *done)
{
    for (*done = 0; from + *done < to; ++*done) {
        const cgj_op_t *o = &t->list.ops[from + *done];
        if (cgj_op_class[o->call.kind] != CGJ_CLASS_CAPTURE) continue;
        CUresult r = cgj_op_issue(o, o->call.stream, false, false);
        /* A staged copy held this far (made inside a library call, or carried over from another
         * variant) reads a staging buffer the next run rewrites: it is waited for. Replay runs
         * the others as the program makes them. */
        if (r == CUDA_SUCCESS && o->stage) r = cgj_drv.r_cuStreamSynchronize(o->call.stream);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

CUresult cgj_graph_launch(cgj_trace_t *t, uint32_t s, uint64_t host_gen, cgj_patched_t *patched, uint32_t *refused,
                          uint32_t issued)
{
    cgj_segment_t *seg = &t->segs[s];
    *refused = UINT32_MAX;
    if (!seg->ncapture) return CUDA_SUCCESS;
    uint32_t done;
    if (seg->eager) return cgj_graph_issue_ops(t, seg->first + issued, seg->end, &done);
    CGJ_ASSERT(!issued, "ops of a graph segment ran before its launch");
    CUresult r = patch(seg, t, host_gen, patched, refused);
    if (r != CUDA_SUCCESS) return r;
    for (uint32_t j = 0; j < seg->nothers && r == CUDA_SUCCESS; j++) {
        r = cgj_drv.r_cuEventRecord(seg->pre[j], seg->others[j]);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuStreamWaitEvent(seg->home, seg->pre[j], 0);
    }
    if (r == CUDA_SUCCESS) r = cgj_drv.r_cuGraphLaunch(seg->exec, seg->home);
    if (r == CUDA_SUCCESS) seg->node_stale = false;
    if (r == CUDA_SUCCESS && seg->done) r = cgj_drv.r_cuEventRecord(seg->done, seg->home);
    for (uint32_t j = 0; j < seg->nothers && r == CUDA_SUCCESS; j++)
        r = cgj_drv.r_cuStreamWaitEvent(seg->others[j], seg->done, 0);
    seg->launched = true;
    return r;
}

bool cgj_graph_staging_wait(cgj_segment_t *seg)
{
    if (!seg->launched || !seg->done) return false;
    if (cgj_drv.r_cuEventQuery(seg->done) != CUDA_ERROR_NOT_READY) return false;
    cgj_drv.r_cuEventSynchronize(seg->done);
    return true;
}
