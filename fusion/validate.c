/*
 * validate.c — a fused kernel checked once, at build, against the kernels it replaces.
 *
 * What a registration claims is never trusted. Each buffer of the chain is copied twice into
 * scratch memory, as it holds now (the step's real data, once the device is idle); the chain's
 * own kernels (and the kernels, memsets and copies a library call issued) run on the first copies
 * with their recorded arguments, every parameter word that points into a chain buffer moved to
 * its copy; the fused kernel runs on the second; every buffer the fused kernel stores is
 * compared element by element. Within the
 * tolerance of mode `default` (|fused - eager| <= 1e-6 + 1e-5 |eager|; NaN where eager has NaN;
 * infinities equal) the fusion stands, else it is dropped with the worst element as detail.
 * Nothing of the program's memory is written.
 */
#include "fusion/fusion.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/mem.h"

#include <math.h>
#include <string.h>

#define REL_TOL 1e-5
#define ABS_TOL 1e-6

typedef struct scratch {
    CUdeviceptr eager[CGJ_FUSE_MAX_BUFS], fused[CGJ_FUSE_MAX_BUFS];
    CUstream s;
} scratch_t;

static CUresult make_scratch(const cgj_fuse_chain_t *ch, scratch_t *sc)
{
    CUresult r = cgj_drv.r_cuStreamCreate(&sc->s, CU_STREAM_NON_BLOCKING);
    for (uint32_t k = 0; k < ch->nbufs && r == CUDA_SUCCESS; k++) {
        size_t bytes = ch->buf[k].extent * cgj_ew_type_bytes[ch->buf[k].type];
        r = cgj_drv.r_cuMemAlloc_v2(&sc->eager[k], bytes);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuMemAlloc_v2(&sc->fused[k], bytes);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuMemcpyDtoDAsync_v2(sc->eager[k], ch->buf[k].addr, bytes, sc->s);
    }
    return r;
}

/* The candidates' copies as the chain's buffers hold now. */
static CUresult reset_fused(const cgj_fuse_chain_t *ch, const scratch_t *sc)
{
    CUresult r = CUDA_SUCCESS;
    for (uint32_t k = 0; k < ch->nbufs && r == CUDA_SUCCESS; k++)
        r = cgj_drv.r_cuMemcpyDtoDAsync_v2(sc->fused[k], ch->buf[k].addr,
                                           ch->buf[k].extent * cgj_ew_type_bytes[ch->buf[k].type], sc->s);
    return r;
}

static void free_scratch(const cgj_fuse_chain_t *ch, scratch_t *sc)
{
    if (sc->s) cgj_drv.r_cuStreamSynchronize(sc->s), cgj_drv.r_cuStreamDestroy_v2(sc->s);
    for (uint32_t k = 0; k < ch->nbufs; k++) {
        if (sc->eager[k]) cgj_drv.r_cuMemFree_v2(sc->eager[k]);
        if (sc->fused[k]) cgj_drv.r_cuMemFree_v2(sc->fused[k]);
    }
}

/* v moved into the eager copies where it points into one of the chain's buffers. */
static uint64_t remap(const cgj_fuse_chain_t *ch, const scratch_t *sc, uint64_t v)
{
    for (uint32_t k = 0; k < ch->nbufs; k++) {
        const cgj_fuse_buf_t *b = &ch->buf[k];
        if (v >= b->addr && v < b->addr + b->extent * cgj_ew_type_bytes[b->type]) return sc->eager[k] + (v - b->addr);
    }
    return v;
}

/* Kernel op o with every parameter word that points into the chain's buffers moved to the eager
 * copies (pointers sit at 8-byte offsets of a parameter buffer). */
static CUresult launch_remapped(const cgj_op_t *o, const cgj_fuse_chain_t *ch, const scratch_t *sc)
{
    const cgj_kparams_t *kp = o->kp;
    const __typeof__(o->call.u.k) *k = &o->call.u.k;
    size_t size = kp->size;
    uint8_t *blob = cgj_xmalloc(size ? size : 1);
    void **ptrs = cgj_xcalloc(kp->n ? kp->n : 1, sizeof *ptrs);
    memcpy(blob, kp->rec, size);
    for (size_t at = 0; at + 8 <= size; at += 8) {
        uint64_t v;
        memcpy(&v, blob + at, sizeof v);
        v = remap(ch, sc, v);
        memcpy(blob + at, &v, sizeof v);
    }
    for (uint32_t j = 0; j < kp->n; j++) ptrs[j] = blob + kp->off[j];
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, blob, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    void **params = kp->extra_form ? NULL : ptrs, **ex = kp->extra_form ? extra : NULL;
    CUresult r;
    if (k->nattrs) {
        CUlaunchConfig cfg = {.gridDimX = k->grid[0],
                              .gridDimY = k->grid[1],
                              .gridDimZ = k->grid[2],
                              .blockDimX = k->block[0],
                              .blockDimY = k->block[1],
                              .blockDimZ = k->block[2],
                              .sharedMemBytes = k->smem,
                              .hStream = sc->s,
                              .attrs = (CUlaunchAttribute *)k->attrs,
                              .numAttrs = k->nattrs};
        r = cgj_drv.r_cuLaunchKernelEx(&cfg, k->f, params, ex);
    } else {
        r = cgj_drv.r_cuLaunchKernel(k->f, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
                                     k->smem, sc->s, params, ex);
    }
    cgj_free(blob), cgj_free(ptrs);
    return r;
}

/* Op o as recorded, on the eager copies. */
static CUresult issue_remapped(const cgj_op_t *o, const cgj_fuse_chain_t *ch, const scratch_t *sc)
{
    const cgj_call_t *c = &o->call;
    switch (c->kind) {
    case CGJ_OP_KERNEL: return o->kp ? launch_remapped(o, ch, sc) : CUDA_ERROR_NOT_SUPPORTED;
    case CGJ_OP_MEMSET: {
        CUdeviceptr d = remap(ch, sc, c->u.s.dst);
        if (c->u.s.elem == 1) return cgj_drv.r_cuMemsetD8Async(d, (unsigned char)c->u.s.value, c->u.s.count, sc->s);
        if (c->u.s.elem == 2) return cgj_drv.r_cuMemsetD16Async(d, (unsigned short)c->u.s.value, c->u.s.count, sc->s);
        return cgj_drv.r_cuMemsetD32Async(d, c->u.s.value, c->u.s.count, sc->s);
    }
    case CGJ_OP_EVENT_RECORD: /* orderings: the copies run on one stream */
    case CGJ_OP_STREAM_WAIT: return CUDA_SUCCESS;
    case CGJ_OP_MEMCPY:
        if (c->u.m.dir != CGJ_DIR_D2D) return CUDA_ERROR_NOT_SUPPORTED;
        return cgj_drv.r_cuMemcpyDtoDAsync_v2(remap(ch, sc, c->u.m.dst), remap(ch, sc, c->u.m.src), c->u.m.bytes,
                                              sc->s);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* The chain's stages as recorded (a kernel, or the ops a library call issued) on the eager
 * copies. */
static CUresult run_eager(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, const scratch_t *sc)
{
    CUresult r = CUDA_SUCCESS;
    for (uint32_t s = 0; s < ch->nstages && r == CUDA_SUCCESS; s++) {
        const cgj_op_t *o = &l->ops[ch->st[s].op];
        uint32_t from = o->lib ? ch->st[s].op + 1 : ch->st[s].op, to = o->lib ? from + o->lib->nops : from + 1;
        for (uint32_t i = from; i < to && r == CUDA_SUCCESS; i++) {
            r = issue_remapped(&l->ops[i], ch, sc);
            char desc[160];
            if (r != CUDA_SUCCESS)
                CGJ_LOG(trace, "validation: op %u (%s) on the copies: %s", i,
                        cgj_op_describe(&l->ops[i], desc, sizeof desc), cgj_driver_errstr(r));
        }
    }
    return r;
}

CUresult cgj_fusion_run_kernel(void *f, const cgj_fuse_chain_t *ch, const CUdeviceptr *bufs, CUstream s)
{
    uint64_t args[CGJ_FUSE_MAX_BUFS + 1];
    void *ptrs[CGJ_FUSE_MAX_BUFS + 1];
    for (uint32_t k = 0; k < ch->nbufs; k++) args[k] = bufs[k], ptrs[k] = &args[k];
    args[ch->nbufs] = ch->n, ptrs[ch->nbufs] = &args[ch->nbufs];
    return cgj_drv.r_cuLaunchKernel((CUfunction)f, cgj_fusion_launch_grid(ch), 1, 1, CGJ_FUSE_BLOCK, 1, 1, 0, s, ptrs,
                                    NULL);
}

/* Element i of a buffer of `type` as a double. */
static double element(const void *p, uint8_t type, uint64_t i)
{
    if (type == CGJ_EW_F32) return ((const float *)p)[i];
    return ((const double *)p)[i];
}

/* Compare buffer k's two copies (normwise: against the largest eager magnitude, as a GEMM's
 * rounding goes); false with *why at the worst element. */
static bool compare(const cgj_fuse_chain_t *ch, uint32_t k, const void *e, const void *f, bool normwise,
                    cgj_reason_t *why)
{
    uint8_t type = ch->buf[k].type;
    double worst = 0, scale = 0;
    uint64_t at = 0;
    for (uint64_t i = 0; normwise && i < ch->n; i++)
        if (isfinite(element(e, type, i))) scale = fmax(scale, fabs(element(e, type, i)));
    for (uint64_t i = 0; i < ch->n; i++) {
        double a = element(e, type, i), b = element(f, type, i);
        if (a == b || (isnan(a) && isnan(b))) continue;
        double over = isfinite(a) && isfinite(b) ? fabs(a - b) - (ABS_TOL + REL_TOL * (normwise ? scale : fabs(a)))
                                                 : INFINITY;
        if (over > worst || isnan(over)) worst = over, at = i;
    }
    if (worst <= 0) return true;
    cgj_reason_set(why, CGJ_REASON_FUSE_MISMATCH, CGJ_REASON_NO_OP,
                   "buffer 0x%llx, element %llu: eager %.9g, fused %.9g", (unsigned long long)ch->buf[k].addr,
                   (unsigned long long)at, element(e, type, at), element(f, type, at));
    return false;
}

/* The eager results of the buffers the chain stores, read back (one block, buffer by buffer). */
static void *read_stored(const cgj_fuse_chain_t *ch, const CUdeviceptr *bufs, CUresult *r)
{
    size_t total = 0;
    for (uint32_t k = 0; k < ch->nbufs; k++)
        if (ch->buf[k].store) total += ch->n * cgj_ew_type_bytes[ch->buf[k].type];
    uint8_t *h = cgj_xmalloc(total ? total : 1), *p = h;
    *r = CUDA_SUCCESS;
    for (uint32_t k = 0; k < ch->nbufs && *r == CUDA_SUCCESS; k++) {
        if (!ch->buf[k].store) continue;
        size_t bytes = ch->n * cgj_ew_type_bytes[ch->buf[k].type];
        *r = cgj_drv.r_cuMemcpyDtoH_v2(p, bufs[k], bytes);
        p += bytes;
    }
    return h;
}

static bool compare_all(const cgj_fuse_chain_t *ch, const uint8_t *e, const uint8_t *f, bool normwise,
                        cgj_reason_t *why)
{
    for (uint32_t k = 0; k < ch->nbufs; k++) {
        if (!ch->buf[k].store) continue;
        if (!compare(ch, k, e, f, normwise, why)) return false;
        size_t bytes = ch->n * cgj_ew_type_bytes[ch->buf[k].type];
        e += bytes, f += bytes;
    }
    return true;
}

#define TIMED_RUNS 5

/* c's ops (or the chain's own ops) captured into a graph on the scratch stream, as replay would
 * launch them. */
static CUresult graph_of(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, const scratch_t *sc,
                         const cgj_fuse_candidate_t *c, CUgraphExec *exec)
{
    CUgraph g = NULL;
    CUresult r = cgj_drv.r_cuStreamBeginCapture_v2(sc->s, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (r != CUDA_SUCCESS) return r;
    r = c ? c->run(c->ctx, ch, sc->fused, sc->s) : run_eager(l, ch, sc);
    CUresult e = cgj_drv.r_cuStreamEndCapture(sc->s, &g);
    if (r == CUDA_SUCCESS) r = e;
    if (r == CUDA_SUCCESS) r = cgj_drv.r_cuGraphInstantiateWithFlags(exec, g, 0);
    if (g) cgj_drv.r_cuGraphDestroy(g);
    return r;
}

/* Microseconds a run of c takes (NULL: the chain's own ops on the eager copies), as replay runs
 * it: captured into a graph, then the median of TIMED_RUNS launches, each timed alone (a kernel
 * that overlaps its successor, as cuBLASLt's may, would look faster back to back than it is
 * among the step's other work). -1 where it could not be timed. */
static float time_runs(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, const scratch_t *sc,
                       const cgj_fuse_candidate_t *c)
{
    CUevent ev[2] = {NULL, NULL};
    CUgraphExec exec = NULL;
    float t[TIMED_RUNS];
    CUresult r = cgj_drv.r_cuEventCreate(&ev[0], CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cgj_drv.r_cuEventCreate(&ev[1], CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = graph_of(l, ch, sc, c, &exec);
    if (r == CUDA_SUCCESS) r = cgj_drv.r_cuGraphLaunch(exec, sc->s); /* warm-up */
    for (int k = 0; k < TIMED_RUNS && r == CUDA_SUCCESS; k++) {
        r = cgj_drv.r_cuStreamSynchronize(sc->s);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuEventRecord(ev[0], sc->s);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuGraphLaunch(exec, sc->s);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuEventRecord(ev[1], sc->s);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuEventSynchronize(ev[1]);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuEventElapsedTime_v2(&t[k], ev[0], ev[1]);
    }
    if (exec) cgj_drv.r_cuGraphExecDestroy(exec);
    for (int k = 0; k < 2; k++)
        if (ev[k]) cgj_drv.r_cuEventDestroy_v2(ev[k]);
    if (r != CUDA_SUCCESS) return -1;
    for (int a = 1; a < TIMED_RUNS; a++) /* insertion sort: five values */
        for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
            float x = t[b];
            t[b] = t[b - 1], t[b - 1] = x;
        }
    return t[TIMED_RUNS / 2] * 1000.0f;
}

/* Candidate c on fresh copies, compared with the eager results e. */
static bool check_one(const cgj_fuse_chain_t *ch, const scratch_t *sc, cgj_fuse_candidate_t *c, const uint8_t *e,
                      bool normwise, cgj_reason_t *why)
{
    const char *step = "copying the buffers";
    CUresult r = reset_fused(ch, sc);
    if (r == CUDA_SUCCESS) step = "running it", r = c->run(c->ctx, ch, sc->fused, sc->s);
    if (r == CUDA_SUCCESS) step = "waiting for it", r = cgj_drv.r_cuStreamSynchronize(sc->s);
    uint8_t *f = r == CUDA_SUCCESS ? (step = "reading back", read_stored(ch, sc->fused, &r)) : NULL;
    if (r != CUDA_SUCCESS)
        cgj_reason_set(why, CGJ_REASON_FUSE_VALIDATE, CGJ_REASON_NO_OP, "%s: %s", step, cgj_driver_errstr(r));
    c->ok = r == CUDA_SUCCESS && compare_all(ch, e, f, normwise, why);
    cgj_free(f);
    return c->ok;
}

int cgj_fusion_check(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, cgj_fuse_candidate_t *c, uint32_t nc,
                     bool normwise, float *ops_us, cgj_reason_t *why)
{
    scratch_t sc = {.s = NULL};
    uint8_t *e = NULL;
    int valid = 0;
    cgj_reason_t first = {.code = CGJ_REASON_NONE, .op = CGJ_REASON_NO_OP};
    /* the step's last kernels may still be writing the buffers: the device settles first */
    CUresult r = cgj_drv.r_cuCtxSynchronize();
    if (r == CUDA_SUCCESS) r = make_scratch(ch, &sc);
    if (r == CUDA_SUCCESS) r = run_eager(l, ch, &sc);
    if (r == CUDA_SUCCESS) r = cgj_drv.r_cuStreamSynchronize(sc.s);
    if (r == CUDA_SUCCESS) e = read_stored(ch, sc.eager, &r);
    if (r != CUDA_SUCCESS)
        cgj_reason_set(&first, CGJ_REASON_FUSE_VALIDATE, CGJ_REASON_NO_OP, "the ops on the copies: %s",
                       cgj_driver_errstr(r));
    for (uint32_t k = 0; k < nc && r == CUDA_SUCCESS; k++) {
        c[k].us = -1;
        if (!check_one(ch, &sc, &c[k], e, normwise, why)) {
            if (first.code == CGJ_REASON_NONE) first = *why;
            continue;
        }
        valid++;
        if (ops_us) c[k].us = time_runs(l, ch, &sc, &c[k]);
    }
    if (ops_us && valid) *ops_us = time_runs(l, ch, &sc, NULL);
    if (!valid) *why = first;
    cgj_free(e);
    free_scratch(ch, &sc);
    return valid;
}

bool cgj_fusion_validate(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, CUfunction f, cgj_reason_t *why)
{
    cgj_fuse_candidate_t c = {.run = cgj_fusion_run_kernel, .ctx = (void *)f};
    return cgj_fusion_check(l, ch, &c, 1, false, NULL, why) == 1;
}

int cgj_fusion_fastest(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, cgj_fuse_candidate_t *c, uint32_t n,
                       float *ops_us, float *best_us, cgj_reason_t *why)
{
    *ops_us = *best_us = -1;
    bool timed = cgj_cfg.FOLD_TIMING || n > 1;
    if (!cgj_fusion_check(l, ch, c, n, true, timed ? ops_us : NULL, why)) return -1;
    int best = -1;
    for (uint32_t k = 0; k < n; k++)
        if (c[k].ok && (best < 0 || (c[k].us >= 0 && c[k].us < c[best].us))) best = (int)k;
    *best_us = c[best].us;
    cgj_reason_set(why, CGJ_REASON_NONE, CGJ_REASON_NO_OP, NULL);
    bool slower = cgj_cfg.FOLD_TIMING && c[best].us >= 0 && *ops_us >= 0 && *ops_us <= c[best].us;
    return slower ? -1 : best;
}
