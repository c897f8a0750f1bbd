/*
 * issue.c — issue one recorded op through the real driver, with its live values.
 *
 * Used twice: to re-issue a segment's ops inside a capture when a trace is built, and to
 * re-issue absorbed ops eagerly when a replay leaves its trace (a side exit): there a fused chain
 * held whole runs as its kernel, and a fused library call whose own ops replay cannot reproduce
 * as its solo kernel (cgj_graph_reissue). Ops are always
 * issued with the asynchronous form of their call and an explicit stream; a synchronous copy
 * or memset was absorbed at call time, and its graph node is the asynchronous equivalent.
 */
#include "graphs/graph.h"
#include "base/driver.h"

static CUresult issue_kernel(const cgj_op_t *o, CUstream s)
{
    const __typeof__(o->call.u.k) *k = &o->call.u.k;
    size_t blob_size = o->kp->size;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, o->kp->live, CU_LAUNCH_PARAM_BUFFER_SIZE, &blob_size,
                     CU_LAUNCH_PARAM_END};
    void **params = o->kp->extra_form ? NULL : o->kp->ptrs;
    void **ex = o->kp->extra_form ? extra : NULL;
    if (k->nattrs) {
        CUlaunchConfig cfg = {k->grid[0],  k->grid[1],  k->grid[2],
                              k->block[0], k->block[1], k->block[2],
                              k->smem,     s,           (CUlaunchAttribute *)k->attrs,
                              k->nattrs};
        return cgj_drv.r_cuLaunchKernelEx(&cfg, k->f, params, ex);
    }
    return cgj_drv.r_cuLaunchKernel(k->f, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
                                    k->smem, s, params, ex);
}

static CUresult issue_memcpy(const cgj_op_t *o, CUstream s)
{
    const __typeof__(o->call.u.m) *m = &o->call.u.m;
    switch (m->dir) {
    case CGJ_DIR_H2D: return cgj_drv.r_cuMemcpyHtoDAsync_v2(m->dst, m->direct ? m->hsrc : o->stage, m->bytes, s);
    case CGJ_DIR_D2H: return cgj_drv.r_cuMemcpyDtoHAsync_v2(m->hdst, m->src, m->bytes, s);
    default: return cgj_drv.r_cuMemcpyDtoDAsync_v2(m->dst, m->src, m->bytes, s);
    }
}

static CUresult issue_memset(const cgj_op_t *o, CUstream s)
{
    const __typeof__(o->call.u.s) *m = &o->call.u.s;
    switch (m->elem) {
    case 1: return cgj_drv.r_cuMemsetD8Async(m->dst, (unsigned char)m->value, m->count, s);
    case 2: return cgj_drv.r_cuMemsetD16Async(m->dst, (unsigned short)m->value, m->count, s);
    default: return cgj_drv.r_cuMemsetD32Async(m->dst, m->value, m->count, s);
    }
}

CUresult cgj_op_issue(const cgj_op_t *o, CUstream s, bool capturing, bool skip_wait)
{
    switch (o->call.kind) {
    case CGJ_OP_KERNEL: return issue_kernel(o, s);
    case CGJ_OP_MEMCPY: return issue_memcpy(o, s);
    case CGJ_OP_MEMSET: return issue_memset(o, s);
    case CGJ_OP_EVENT_RECORD:
        return cgj_drv.r_cuEventRecordWithFlags(o->call.u.e.ev, s,
                                                capturing ? CU_EVENT_RECORD_EXTERNAL : o->call.u.e.flags);
    case CGJ_OP_STREAM_WAIT:
        if (skip_wait) return CUDA_SUCCESS;
        return cgj_drv.r_cuStreamWaitEvent(s, o->call.u.e.ev, capturing ? CU_EVENT_WAIT_EXTERNAL : o->call.u.e.flags);
    case CGJ_OP_HOST_FUNC: return cgj_drv.r_cuLaunchHostFunc(s, o->call.u.h.fn, o->call.u.h.data);
    case CGJ_OP_ALLOC:
    case CGJ_OP_POOL_FREE: return CUDA_SUCCESS; /* served from the pool: nothing reaches the driver */
    case CGJ_OP_LIB: return CUDA_SUCCESS;       /* a marker: the library's own driver calls follow it */
    default: return CUDA_ERROR_NOT_SUPPORTED;   /* boundary ops are never re-issued */
    }
}

CUresult cgj_graph_issue_fused(const cgj_fused_t *fu, CUstream s)
{
    if (fu->ops) return fu->ops->issue(fu->ctx, s);
    return cgj_drv.r_cuLaunchKernel(fu->f, fu->grid, 1, 1, fu->block, 1, 1, 0, s, fu->ptrs, NULL);
}

const cgj_fused_t *cgj_graph_solo_at(const cgj_trace_t *t, uint32_t i)
{
    for (uint32_t k = 0; k < t->nsolo; k++)
        if (t->solo[k].first == i) return &t->solo[k];
    return NULL;
}

CUresult cgj_graph_reissue(const cgj_trace_t *t, uint32_t from, uint32_t to, uint32_t *done)
{
    for (uint32_t i = from; i < to; i++) {
        const cgj_op_t *o = &t->list.ops[i];
        const cgj_fused_t *fu = o->fused ? &t->fused[o->fused - 1] : NULL, *solo = NULL;
        CUresult r;
        if (fu && fu->first == i && fu->last < to) { /* the whole chain is held: its kernel */
            r = cgj_graph_issue_fused(fu, t->list.ops[fu->last].call.stream);
            i = fu->last;
        } else if (fu && o->lib && (solo = cgj_graph_solo_at(t, i)) && solo->last < to) {
            r = cgj_graph_issue_fused(solo, t->list.ops[solo->last].call.stream);
            i = solo->last;
        } else {
            r = cgj_op_issue(o, o->call.stream, false, false);
        }
        if (r != CUDA_SUCCESS) {
            *done = i - from;
            return r;
        }
    }
    *done = to - from;
    return CUDA_SUCCESS;
}
