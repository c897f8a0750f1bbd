/*
 * pass.c — the fusion pass over a built trace (fusion.h): GEMMs folded with what follows them
 * into cuBLASLt matmuls first (gemm.c), then chains found, each compiled, validated and recorded
 * in the trace, or dropped with its reason.
 *
 * A chain is a run of elementwise stages on one stream with one element count — registered
 * kernels, and library calls the runtime described (cudnnAddTensor, cudnnOpTensor,
 * cudnnActivationForward, cudnnScaleTensor, cuBLAS axpy and scal: cgj_libop_t.ew), each with the
 * ops it issued — with nothing between them but the step's own allocations and frees (which
 * issue nothing in replay): any other op (a boundary, a copy, an opaque kernel, another library
 * call) ends it, so a chain lies within one segment and nothing outside it can observe its
 * intermediates. Its kernels must hold their values from run to run (a fused kernel's arguments
 * are fixed), its library calls their arguments (they are guarded with the key), and none may
 * reach mapped host memory. A chain of one kernel is left alone: fusing it saves nothing. A
 * library call whose own ops replay could not reproduce (cuDNN passes uninitialized bytes to some
 * kernels) gets a solo kernel of its own besides, what a side exit half-way through the chain
 * re-issues it with.
 */
#include "fusion/fusion.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/mem.h"

#include <pthread.h>
#include <string.h>

/* Loaded modules: one per CUBIN and context, for the process's life. */
typedef struct loaded {
    const void *cubin;
    CUcontext ctx;
    CUfunction f;
} loaded_t;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded_t *loaded;
static uint32_t nloaded, loadcap;

static CUresult load(const void *cubin, CUfunction *f)
{
    CUcontext ctx = NULL;
    if (!cgj_drv.r_cuModuleLoadData || !cgj_drv.r_cuModuleGetFunction) return CUDA_ERROR_NOT_SUPPORTED;
    if (cgj_drv.r_cuCtxGetCurrent) cgj_drv.r_cuCtxGetCurrent(&ctx);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&load_lock);
    *f = NULL;
    for (uint32_t k = 0; k < nloaded && !*f; k++)
        if (loaded[k].cubin == cubin && loaded[k].ctx == ctx) *f = loaded[k].f;
    if (!*f) {
        CUmodule m;
        r = cgj_drv.r_cuModuleLoadData(&m, cubin);
        if (r == CUDA_SUCCESS) r = cgj_drv.r_cuModuleGetFunction(f, m, "cgj_fused");
        if (r == CUDA_SUCCESS) {
            if (nloaded == loadcap)
                loadcap = loadcap ? 2 * loadcap : 16, loaded = cgj_xrealloc(loaded, loadcap * sizeof *loaded);
            loaded[nloaded++] = (loaded_t){.cubin = cubin, .ctx = ctx, .f = *f};
        }
    }
    pthread_mutex_unlock(&load_lock);
    return r;
}

/* The fused kernel of chain ch: generated, compiled (or found in a cache), loaded. */
static bool make_kernel(const cgj_fuse_chain_t *ch, CUfunction *f, cgj_fusion_stats_t *st, cgj_reason_t *why)
{
    char arch[32], err[200];
    if (!cgj_fusion_arch(arch, sizeof arch)) {
        cgj_reason_set(why, CGJ_REASON_FUSE_COMPILE, CGJ_REASON_NO_OP, "the device's architecture is unknown");
        return false;
    }
    char *src = cgj_fusion_codegen(ch);
    size_t size = 0;
    uint64_t ticket = 0, t0 = cgj_now_ns();
    bool cold = false;
    const void *cubin = cgj_fusion_compile_or_queue(src, arch, &size, &cold, &ticket, err, sizeof err);
    st->compile_ns += cgj_now_ns() - t0;
    st->compiled_cold += cold;
    cgj_free(src);
    if (!cubin && ticket) {
        st->queued++;
        st->ticket = ticket;
        cgj_reason_set(why, CGJ_REASON_FUSE_PENDING, CGJ_REASON_NO_OP, "%s", err);
        return false;
    }
    if (!cubin) {
        cgj_reason_set(why, CGJ_REASON_FUSE_COMPILE, CGJ_REASON_NO_OP, "%s", err);
        return false;
    }
    CUresult r = load(cubin, f);
    if (r != CUDA_SUCCESS)
        cgj_reason_set(why, CGJ_REASON_FUSE_COMPILE, CGJ_REASON_NO_OP, "loading: %s", cgj_driver_errstr(r));
    return r == CUDA_SUCCESS;
}

/* Kernel f of chain ch over ops [first, last], appended to *list (n entries). */
static void add_fused(cgj_fused_t **list, uint32_t *n, const cgj_fuse_chain_t *ch, uint32_t first, uint32_t last,
                      CUfunction f)
{
    *list = cgj_xrealloc(*list, (*n + 1) * sizeof **list);
    cgj_fused_t *fu = &(*list)[(*n)++];
    *fu = (cgj_fused_t){.first = first,
                        .last = last,
                        .nstages = ch->nstages,
                        .f = f,
                        .grid = cgj_fusion_launch_grid(ch),
                        .block = CGJ_FUSE_BLOCK,
                        .nargs = ch->nbufs + 1};
    fu->args = cgj_xcalloc(fu->nargs, sizeof *fu->args);
    fu->ptrs = cgj_xcalloc(fu->nargs, sizeof *fu->ptrs);
    for (uint32_t k = 0; k < fu->nargs; k++) {
        fu->args[k] = k < ch->nbufs ? ch->buf[k].addr : ch->n;
        fu->ptrs[k] = &fu->args[k];
    }
}

/* Fused entry fu of t in use: its ops marked, the trace's counts. */
static void mark_fused(cgj_trace_t *t, cgj_fused_t *fu)
{
    for (uint32_t i = fu->first; i <= fu->last; i++) {
        t->list.ops[i].fused = (uint32_t)(fu - t->fused) + 1;
        fu->nkernels += t->list.ops[i].call.kind == CGJ_OP_KERNEL;
    }
    t->fused_chains++;
    t->fused_ops += fu->nkernels;
    t->fused_gemms += fu->ops != NULL;
}

static void record(cgj_trace_t *t, const cgj_fuse_chain_t *ch, uint32_t first, uint32_t last, CUfunction f)
{
    add_fused(&t->fused, &t->nfused, ch, first, last, f);
    mark_fused(t, &t->fused[t->nfused - 1]);
}

/* Solo kernels for the library calls at ops[0..nops) that replay cannot reproduce from their own
 * ops (not absorbable): each stage alone, every output stored, validated like the chain. They go
 * to `solo` (n entries) until the chain stands. */
static bool make_solos(cgj_trace_t *t, const cgj_ew_spec_t *const *specs, const uint32_t *ops, uint32_t nops,
                       cgj_fused_t **solo, uint32_t *n, cgj_fusion_stats_t *st, cgj_reason_t *why)
{
    for (uint32_t s = 0; s < nops; s++) {
        uint32_t at = ops[s];
        const cgj_libop_t *l = t->list.ops[at].lib;
        if (!l || l->absorbable) continue;
        cgj_fuse_chain_t one;
        CUfunction f = NULL;
        bool ok = cgj_fusion_chain_of(&t->list, specs, at, at + l->nops, &one, why) && make_kernel(&one, &f, st, why) &&
                  cgj_fusion_validate(&t->list, &one, f, why);
        if (ok) add_fused(solo, n, &one, at, at + l->nops, f);
        cgj_free(one.st);
        if (!ok) return false;
    }
    return true;
}

static void free_fused(cgj_fused_t *list, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        if (list[k].ops) list[k].ops->release(list[k].ctx);
        cgj_free(list[k].args), cgj_free(list[k].ptrs);
    }
    cgj_free(list);
}

static void keep_solos(cgj_trace_t *t, cgj_fused_t *solo, uint32_t nsolo)
{
    t->solo = cgj_xrealloc(t->solo, (t->nsolo + nsolo) * sizeof *t->solo);
    memcpy(t->solo + t->nsolo, solo, nsolo * sizeof *solo);
    t->nsolo += nsolo;
    cgj_free(solo);
}

static void drop(cgj_trace_t *t, const char *anchor, uint32_t first, const cgj_reason_t *why, cgj_fusion_stats_t *st)
{
    char text[320];
    cgj_reason_t r = *why;
    if (r.op == CGJ_REASON_NO_OP) r.op = first;
    cgj_reason_tally(&r);
    t->fuse_dropped = r;
    if (t->fuse_drops < CGJ_FUSE_DROPS_KEPT) t->fuse_drop_list[t->fuse_drops] = r;
    t->fuse_drops++;
    st->dropped++;
    CGJ_LOG(trace, "anchor '%s': chain at op %u not fused: %s", anchor, first,
            cgj_reason_format(&r, text, sizeof text));
}

static void fuse(cgj_trace_t *t, const char *anchor, const cgj_ew_spec_t *const *specs, uint32_t first, uint32_t last,
                 cgj_fusion_stats_t *st)
{
    cgj_fuse_chain_t ch;
    cgj_reason_t why = {.code = CGJ_REASON_NONE, .op = CGJ_REASON_NO_OP};
    CUfunction f = NULL;
    bool ok = cgj_fusion_chain_of(&t->list, specs, first, last, &ch, &why);
    if (ok) cgj_fusion_mark_stores(&t->list, last, &ch);
    ok = ok && make_kernel(&ch, &f, st, &why);
    uint64_t t0 = cgj_now_ns();
    ok = ok && cgj_fusion_validate(&t->list, &ch, f, &why);
    st->validate_ns += cgj_now_ns() - t0;
    cgj_fused_t *solo = NULL;
    uint32_t nsolo = 0, *stage_ops = cgj_xcalloc(ch.nstages + 1, sizeof *stage_ops);
    for (uint32_t k = 0; k < ch.nstages; k++) stage_ops[k] = ch.st[k].op;
    ok = ok && make_solos(t, specs, stage_ops, ch.nstages, &solo, &nsolo, st, &why);
    cgj_free(stage_ops);
    if (ok) {
        uint32_t stored = 0;
        for (uint32_t k = 0; k < ch.nbufs; k++) stored += ch.buf[k].store;
        record(t, &ch, first, last, f);
        keep_solos(t, solo, nsolo);
        st->chains++, st->ops += t->fused[t->nfused - 1].nkernels;
        CGJ_LOG(trace, "anchor '%s': ops %u-%u: %u kernels fused into one (%u buffers, %u stored)", anchor, first, last,
                ch.nstages, ch.nbufs, stored);
    } else {
        free_fused(solo, nsolo);
        drop(t, anchor, first, &why, st);
    }
    cgj_free(ch.st);
}

/* The GEMM or convolution at LIB op i with what follows it as one library call of cgjit's own,
 * where it can be: the ops it takes leave the elementwise chains (specs cleared). */
static void fold(cgj_trace_t *t, const char *anchor, const cgj_ew_spec_t **specs, uint32_t i, cgj_fusion_stats_t *st)
{
    cgj_fold_t f = {.ctx = NULL};
    cgj_reason_t why;
    cgj_fused_t *solo = NULL;
    uint32_t nsolo = 0;
    const cgj_libop_t *l = t->list.ops[i].lib;
    uint64_t t0 = cgj_now_ns();
    bool ok = (l->gemm.valid ? cgj_fusion_gemm(t, specs, i, &f, &why) : cgj_fusion_conv(t, specs, i, &f, &why)) &&
              make_solos(t, specs, f.stages + 1, f.nstages - 1, &solo, &nsolo, st, &why);
    st->validate_ns += cgj_now_ns() - t0;
    if (!ok) {
        if (why.code != CGJ_REASON_NONE) {
            if (f.ctx) f.ops->release(f.ctx);
            free_fused(solo, nsolo);
            drop(t, anchor, i, &why, st);
        }
        return;
    }
    t->fused = cgj_xrealloc(t->fused, (t->nfused + 1) * sizeof *t->fused);
    t->fused[t->nfused++] =
        (cgj_fused_t){.first = f.first, .last = f.last, .nstages = f.nstages, .ops = f.ops, .ctx = f.ctx};
    mark_fused(t, &t->fused[t->nfused - 1]);
    for (uint32_t k = f.first; k <= f.last; k++) specs[k] = NULL;
    st->chains++, st->ops += t->fused[t->nfused - 1].nkernels;
    keep_solos(t, solo, nsolo);
    CGJ_LOG(trace, "anchor '%s': ops %u-%u: a %s and %u stage(s) after it as one library call", anchor, f.first, f.last,
            l->gemm.valid ? "GEMM" : "convolution", f.nstages - 1);
}

/* The spec of library call op i if its group may be part of a chain: described, with arguments
 * that do not vary (guarded with its key), issuing only kernels, memsets and device copies on
 * one stream. Replay absorbs a fused call whole whenever its key and arguments match, whether or
 * not it could reproduce the call's own ops (absorbable): the chain's kernel computes what the
 * call computes, and a solo kernel re-issues it where the chain is left half-way. */
static const cgj_ew_spec_t *lib_eligible(const cgj_trace_t *t, uint32_t i)
{
    const cgj_libop_t *l = t->list.ops[i].lib;
    const cgj_ew_spec_t *sp = cgj_fusion_lib_spec(l);
    if (!sp || l->free_args || l->never || l->failed || l->collective || !l->nops || i + l->nops >= t->list.n)
        return NULL;
    CUstream s = t->list.ops[i + 1].call.stream;
    for (uint32_t j = i + 1; j <= i + l->nops; j++) {
        const cgj_op_t *g = &t->list.ops[j];
        const cgj_call_t *c = &g->call;
        bool issues = c->kind == CGJ_OP_KERNEL || c->kind == CGJ_OP_MEMSET ||
                      (c->kind == CGJ_OP_MEMCPY && c->u.m.dir == CGJ_DIR_D2D);
        if (!issues || c->stream != s || g->host_visible || g->handoff) return NULL;
    }
    return sp;
}

/* The spec of op i if it may be part of a chain, else NULL (a reason tallied where a registered
 * kernel cannot be). `grouped`: it is one of a library call's ops. */
static const cgj_ew_spec_t *eligible(cgj_trace_t *t, const char *anchor, uint32_t i, bool grouped,
                                     cgj_fusion_stats_t *st)
{
    const cgj_op_t *o = &t->list.ops[i];
    if (o->lib) return lib_eligible(t, i);
    if (o->call.kind != CGJ_OP_KERNEL || grouped || o->host_visible || o->call.u.k.nattrs) return NULL;
    cgj_reason_t why;
    const cgj_ew_spec_t *sp = cgj_fusion_spec_of(o, &why);
    if (!sp && why.code != CGJ_REASON_NONE) drop(t, anchor, i, &why, st);
    if (sp && (o->kp->nvarying || o->listed)) {
        cgj_reason_set(&why, CGJ_REASON_FUSE_VARYING, i, "%u varying parameter slot(s)", o->kp->nvarying);
        drop(t, anchor, i, &why, st);
        return NULL;
    }
    return sp;
}

void cgj_fusion_pass(cgj_trace_t *t, const char *anchor, cgj_fusion_stats_t *st)
{
    memset(st, 0, sizeof *st);
    if (cgj_jit_mode() == CGJ_JIT_REDUCE_OVERHEAD || !t->list.n) return;
    uint32_t n = t->list.n, group_end = 0;
    const cgj_ew_spec_t **specs = cgj_xcalloc(n, sizeof *specs);
    for (uint32_t i = 0; i < n; i++) {
        const cgj_op_t *o = &t->list.ops[i];
        if (o->lib) group_end = i + 1 + o->lib->nops;
        specs[i] = eligible(t, anchor, i, i < group_end && !o->lib, st);
    }
    for (uint32_t i = 0; i < n; i++)
        if (t->list.ops[i].lib && (t->list.ops[i].lib->gemm.valid || t->list.ops[i].lib->conv.valid))
            fold(t, anchor, specs, i, st);
    for (uint32_t i = 0; i < n;) {
        if (!specs[i]) {
            i++;
            continue;
        }
        uint32_t last = cgj_fusion_element_end(&t->list, i), stages = 1;
        CUstream s = cgj_fusion_element_stream(&t->list, i);
        uint64_t count = cgj_fusion_count(&t->list.ops[i], specs[i]);
        for (uint32_t j = last + 1; j < n && stages < CGJ_FUSE_MAX_STAGES && !t->list.ops[last].handoff;) {
            if (cgj_op_class[t->list.ops[j].call.kind] == CGJ_CLASS_POOL) {
                j++;
                continue;
            }
            if (!specs[j] || cgj_fusion_element_stream(&t->list, j) != s ||
                cgj_fusion_count(&t->list.ops[j], specs[j]) != count)
                break;
            last = cgj_fusion_element_end(&t->list, j), stages++;
            j = last + 1;
        }
        if (stages >= 2 && count && count != UINT64_MAX) fuse(t, anchor, specs, i, last, st);
        i = last + 1;
    }
    cgj_free(specs);
    t->fuse_ns = st->compile_ns + st->validate_ns;
    t->fuse_compile_ns = st->compile_ns;
    t->fuse_cold = st->compiled_cold;
}

void cgj_fusion_forked(void)
{
    pthread_mutex_init(&load_lock, NULL);
    cgj_fusion_registry_forked();
    cgj_fusion_compile_forked();
    cgj_fusion_gemm_forked();
    cgj_fusion_conv_forked();
}

void cgj_fusion_free(cgj_trace_t *t)
{
    free_fused(t->fused, t->nfused);
    free_fused(t->solo, t->nsolo);
    t->fused = t->solo = NULL;
    t->nfused = t->fused_chains = t->fused_ops = t->fused_gemms = t->nsolo = 0;
}
