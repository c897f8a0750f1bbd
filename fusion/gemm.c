/*
 * gemm.c — a GEMM and what follows it, as one cuBLASLt matmul (mode default and max-autotune).
 *
 * A plain fp32 GEMM (cgj_libgemm_t: cublasSgemm, cublasGemmEx in fp32, C packed) followed on its
 * stream by a bias over C's rows and optionally a ReLU or GELU (tanh) of C becomes one
 * cublasLtMatmul with the epilogue BIAS, RELU_BIAS or GELU_BIAS: one kernel where there were
 * three, C written once, taken where it is faster than the program's calls on copies of the
 * real operands (the heuristic's first algorithm in mode default, the fastest of up to 8 in
 * max-autotune). What the stages after the GEMM compute is not taken from their names:
 * each is an elementwise stage (a registered kernel or a described library call, fusion/spec.h)
 * evaluated at a few points, and it is a bias add only if it computes c + b for them, an
 * activation only if it computes relu(x) or gelu_tanh(x). In max-autotune every such GEMM, with
 * or without an epilogue, is also timed at build on copies of its real operands against the
 * cuBLASLt algorithms the heuristic offers, and the fastest is kept; where the program's own
 * calls are faster, nothing changes.
 *
 * A matmul is checked like a fused kernel, normwise (its summation order is not the GEMM's):
 * |lt - eager| <= 1e-6 + 1e-5 max|eager| over C. cgjit calls cuBLASLt itself (its own handle,
 * workspace and descriptors) while it captures the segment and when a side exit re-issues the
 * chain, with cgj_internal_calls set, so that nothing cuBLASLt does is taken for the program's.
 */
#include "fusion/fusion.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/mem.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LT_FUNCS(X)                                                                                     \
    X(cublasLtCreate) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescSetAttribute)                    \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)          \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute)                          \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

static struct {
#define LT_FIELD(name) __typeof__(name) *name;
    LT_FUNCS(LT_FIELD)
#undef LT_FIELD
    bool ok;
} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUcontext ctx;
    cublasLtHandle_t h;
} handles[16];
static uint32_t nhandles;

#define WORKSPACE (4u << 20)
#define MAX_ALGOS 8

static void load_lt(void)
{
    const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    void *h = NULL;
    for (size_t k = 0; k < sizeof names / sizeof names[0] && !h && cgj_driver_dlsym; k++)
        h = dlopen(names[k], RTLD_LAZY | RTLD_LOCAL);
    if (!h) return;
    lt.ok = true;
#define LT_RESOLVE(name) lt.ok &= (lt.name = (__typeof__(lt.name))cgj_driver_dlsym(h, #name)) != NULL;
    LT_FUNCS(LT_RESOLVE)
#undef LT_RESOLVE
}

/* cgjit's cuBLASLt handle for the current context, or NULL. */
static cublasLtHandle_t lt_handle(void)
{
    pthread_once(&lt_once, load_lt);
    CUcontext ctx = NULL;
    if (!lt.ok || !cgj_drv.r_cuCtxGetCurrent || cgj_drv.r_cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return NULL;
    cublasLtHandle_t h = NULL;
    pthread_mutex_lock(&handles_lock);
    for (uint32_t k = 0; k < nhandles && !h; k++)
        if (handles[k].ctx == ctx) h = handles[k].h;
    if (!h && nhandles < CGJ_ARRAY_LEN(handles)) {
        cgj_internal_calls++;
        if (lt.cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS) handles[nhandles].ctx = ctx, handles[nhandles++].h = h;
        else h = NULL;
        cgj_internal_calls--;
    }
    pthread_mutex_unlock(&handles_lock);
    return h;
}

/* ---- what follows the GEMM ---- */

/* The stage of op i: its spec and parameter values (a pointer's: its address). */
typedef struct stage_view {
    const cgj_ew_spec_t *sp;
    uint64_t v[CGJ_EW_MAX_PARAMS];
} stage_view_t;

static void view_of(const cgj_oplist_t *l, const cgj_ew_spec_t *sp, uint32_t i, stage_view_t *out)
{
    out->sp = sp;
    for (uint32_t k = 0; k < sp->nparams; k++) out->v[k] = cgj_fusion_param(&l->ops[i], k);
}

/* Scalar parameter k's value as a double. */
static double scalar_value(const stage_view_t *s, uint32_t k)
{
    uint64_t v = s->v[k];
    switch (s->sp->p[k].type) {
    case CGJ_EW_F32: {
        float f;
        uint32_t u = (uint32_t)v;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case CGJ_EW_F64: {
        double d;
        memcpy(&d, &v, sizeof d);
        return d;
    }
    case CGJ_EW_I32: return (int32_t)v;
    case CGJ_EW_I64: return (double)(int64_t)v;
    default: return (double)v;
    }
}

/* Its one assignment's value with pointer `x` (and `y`, where not 0) read as the given values:
 * NAN if it has other pointers, or not exactly one assignment. */
static double probe(const stage_view_t *s, CUdeviceptr x, double xv, CUdeviceptr y, double yv)
{
    const cgj_ew_spec_t *sp = s->sp;
    double p[CGJ_EW_MAX_PARAMS];
    if (sp->nassign != 1) return NAN;
    for (uint32_t k = 0; k < sp->nparams; k++) {
        if (!cgj_ew_is_pointer(sp, k)) p[k] = scalar_value(s, k);
        else if (sp->p[k].role == CGJ_EW_OUT) p[k] = NAN; /* never read */
        else if (s->v[k] == x) p[k] = xv;
        else if (y && s->v[k] == y) p[k] = yv;
        else return NAN;
    }
    return cgj_ew_eval(sp, sp->assign[0].root, p);
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (1 + fabs(b));
}

/* Is stage s C += bias, bias read at [i % m] (or [(i / 1) % m]), written to C? *bias its address. */
static bool is_row_bias(const stage_view_t *s, const cgj_libgemm_t *g, CUdeviceptr c, CUdeviceptr *bias)
{
    const cgj_ew_spec_t *sp = s->sp;
    if (sp->nassign != 1 || s->v[sp->assign[0].param] != c) return false;
    *bias = 0;
    for (uint32_t k = 0; k < sp->nparams; k++) {
        const cgj_ew_param_t *p = &sp->p[k];
        if (!cgj_ew_is_pointer(sp, k) || !(p->div || p->mod)) continue;
        uint64_t d = p->div ? s->v[p->div - 1] : 1, m = p->mod ? s->v[p->mod - 1] : 0;
        if (d != 1 || m != (uint64_t)g->m || *bias) return false;
        *bias = s->v[k];
    }
    static const double pts[][2] = {{0.5, 0.25}, {-1.5, 3.0}, {2.0, -0.75}};
    for (size_t k = 0; *bias && k < sizeof pts / sizeof pts[0]; k++)
        if (!near(probe(s, c, pts[k][0], *bias, pts[k][1]), pts[k][0] + pts[k][1])) return false;
    return *bias != 0;
}

/* The activation stage s applies to C (written to *out): CUBLASLT_EPILOGUE_RELU or _GELU, or 0. */
static int activation_of(const stage_view_t *s, CUdeviceptr c, CUdeviceptr *out)
{
    const cgj_ew_spec_t *sp = s->sp;
    if (sp->nassign != 1) return 0;
    *out = s->v[sp->assign[0].param];
    static const double xs[] = {-2.0, -0.5, 0.0, 0.5, 3.0};
    bool relu = true, gelu = true;
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        double y = probe(s, c, xs[k], 0, 0), x = xs[k];
        relu &= near(y, x > 0 ? x : 0);
        gelu &= near(y, 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x))));
    }
    return relu ? CUBLASLT_EPILOGUE_RELU : gelu ? CUBLASLT_EPILOGUE_GELU : 0;
}

/* ---- the matmul ---- */

typedef struct lt_op {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    uint32_t epilogue;
    float alpha, beta;
    CUdeviceptr ws;
    CUdeviceptr ptr[5];   /* A, B, C, D, bias as the trace has them */
    uint32_t buf[5];      /* their buffers in the check chain */
} lt_op_t;
enum { PA, PB, PC, PD, PBIAS };

static CUresult lt_run(lt_op_t *op, const cublasLtMatmulAlgo_t *algo, const CUdeviceptr *p, CUstream s)
{
    cgj_internal_calls++;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (op->epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
        const void *bias = (const void *)(uintptr_t)p[PBIAS];
        st = lt.cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
    if (st == CUBLAS_STATUS_SUCCESS)
        st = lt.cublasLtMatmul(op->h, op->desc, &op->alpha, (const void *)(uintptr_t)p[PA], op->la,
                               (const void *)(uintptr_t)p[PB], op->lb, &op->beta, (const void *)(uintptr_t)p[PC],
                               op->lc, (void *)(uintptr_t)p[PD], op->lc, algo, (void *)(uintptr_t)op->ws, WORKSPACE,
                               (cudaStream_t)s);
    cgj_internal_calls--;
    if (st != CUBLAS_STATUS_SUCCESS) CGJ_LOG(trace, "cublasLtMatmul: status %d", (int)st);
    return st == CUBLAS_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
}

CUresult cgj_fusion_gemm_issue(void *ctx, CUstream s)
{
    lt_op_t *op = ctx;
    return lt_run(op, &op->algo, op->ptr, s);
}

void cgj_fusion_gemm_release(void *ctx)
{
    lt_op_t *op = ctx;
    if (!op) return;
    cgj_internal_calls++;
    if (op->desc) lt.cublasLtMatmulDescDestroy(op->desc);
    if (op->la) lt.cublasLtMatrixLayoutDestroy(op->la);
    if (op->lb) lt.cublasLtMatrixLayoutDestroy(op->lb);
    if (op->lc) lt.cublasLtMatrixLayoutDestroy(op->lc);
    cgj_internal_calls--;
    if (op->ws) cgj_drv.r_cuMemFree_v2(op->ws);
    cgj_free(op);
}

#define LT_OK(call) ((call) == CUBLAS_STATUS_SUCCESS)

/* Descriptors, layouts and workspace of the matmul of g with `epilogue`. */
static bool lt_setup(lt_op_t *op, const cgj_libgemm_t *g)
{
    cublasOperation_t ta = g->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t bias_type = CUDA_R_32F;
    cgj_internal_calls++;
    bool ok = LT_OK(lt.cublasLtMatmulDescCreate(&op->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
              LT_OK(lt.cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
              LT_OK(lt.cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
              LT_OK(lt.cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &op->epilogue,
                                                       sizeof op->epilogue)) &&
              (op->epilogue == CUBLASLT_EPILOGUE_DEFAULT ||
               LT_OK(lt.cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                        sizeof bias_type))) &&
              LT_OK(lt.cublasLtMatrixLayoutCreate(&op->la, CUDA_R_32F, g->transa ? g->k : g->m,
                                                  g->transa ? g->m : g->k, g->lda)) &&
              LT_OK(lt.cublasLtMatrixLayoutCreate(&op->lb, CUDA_R_32F, g->transb ? g->n : g->k,
                                                  g->transb ? g->k : g->n, g->ldb)) &&
              LT_OK(lt.cublasLtMatrixLayoutCreate(&op->lc, CUDA_R_32F, g->m, g->n, g->ldc));
    cgj_internal_calls--;
    return ok && cgj_drv.r_cuMemAlloc_v2(&op->ws, WORKSPACE) == CUDA_SUCCESS;
}

/* Up to `want` algorithms the heuristic offers for op. */
static int lt_algos(lt_op_t *op, cublasLtMatmulHeuristicResult_t *res, int want)
{
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = WORKSPACE;
    int got = 0;
    cgj_internal_calls++;
    if (LT_OK(lt.cublasLtMatmulPreferenceCreate(&pref)) &&
        LT_OK(lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)) &&
        !LT_OK(lt.cublasLtMatmulAlgoGetHeuristic(op->h, op->desc, op->la, op->lb, op->lc, op->lc, pref, want, res, &got)))
        got = 0;
    if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
    cgj_internal_calls--;
    return got;
}

/* ---- checking and choosing ---- */

/* Buffer of the check chain at [a, a + elems floats): a new one, the same one, or -1 where it
 * overlaps another partly. */
static int check_buffer(cgj_fuse_chain_t *ch, CUdeviceptr a, uint64_t elems)
{
    for (uint32_t k = 0; k < ch->nbufs; k++) {
        cgj_fuse_buf_t *b = &ch->buf[k];
        if (b->addr == a) {
            if (elems > b->extent) b->extent = elems;
            return (int)k;
        }
        if (a < b->addr + 4 * b->extent && b->addr < a + 4 * elems) return -1;
    }
    ch->buf[ch->nbufs] = (cgj_fuse_buf_t){.addr = a, .extent = elems, .type = CGJ_EW_F32};
    return (int)ch->nbufs++;
}

/* The chain the matmul is checked on: the group's and stages' ops, A, B, C, bias and D as
 * buffers, D stored (and C, where it is D). */
static bool check_chain(const cgj_gemm_fold_t *f, const cgj_libgemm_t *g, lt_op_t *op, cgj_fuse_chain_t *ch)
{
    uint64_t ea = (uint64_t)g->lda * ((g->transa ? g->m : g->k) - 1) + (g->transa ? g->k : g->m);
    uint64_t eb = (uint64_t)g->ldb * ((g->transb ? g->k : g->n) - 1) + (g->transb ? g->n : g->k);
    uint64_t extents[5] = {ea, eb, (uint64_t)g->m * g->n, (uint64_t)g->m * g->n, (uint64_t)g->m};
    memset(ch, 0, sizeof *ch);
    ch->n = (uint64_t)g->m * g->n;
    ch->st = cgj_xcalloc(f->nstages, sizeof *ch->st);
    for (uint32_t s = 0; s < f->nstages; s++) ch->st[ch->nstages++].op = f->stages[s];
    for (int k = 0; k < 5; k++) {
        if (k == PBIAS && op->epilogue == CUBLASLT_EPILOGUE_DEFAULT) continue;
        int b = check_buffer(ch, op->ptr[k], extents[k]);
        if (b < 0) return false;
        op->buf[k] = (uint32_t)b;
    }
    ch->buf[op->buf[PD]].store = true;
    return true;
}

typedef struct candidate_ctx {
    lt_op_t *op;
    const cublasLtMatmulAlgo_t *algo;
} candidate_ctx_t;

static CUresult run_candidate(void *ctx, const cgj_fuse_chain_t *ch, const CUdeviceptr *bufs, CUstream s)
{
    candidate_ctx_t *c = ctx;
    CUdeviceptr p[5];
    for (int k = 0; k < 5; k++) p[k] = bufs[c->op->buf[k]];
    return lt_run(c->op, c->algo, p, s);
}

/* The fastest valid algorithm of res[0..n), timed on the copies, or -1 where none is valid or
 * the program's own calls are faster (never slower: a matmul that saves two kernels but runs a
 * slower algorithm than cuBLAS chose is not taken). */
static int choose(const cgj_trace_t *t, const cgj_fuse_chain_t *ch, lt_op_t *op, const cgj_libgemm_t *g,
                  const cublasLtMatmulHeuristicResult_t *res, int n, cgj_reason_t *why)
{
    cgj_fuse_candidate_t c[MAX_ALGOS];
    candidate_ctx_t cc[MAX_ALGOS];
    for (int k = 0; k < n; k++) {
        cc[k] = (candidate_ctx_t){op, &res[k].algo};
        c[k] = (cgj_fuse_candidate_t){.run = run_candidate, .ctx = &cc[k]};
    }
    float ops_us = -1;
    if (!cgj_fusion_check(&t->list, ch, c, (uint32_t)n, true, &ops_us, why)) return -1;
    int best = -1;
    for (int k = 0; k < n; k++)
        if (c[k].ok && (best < 0 || (c[k].us >= 0 && c[k].us < c[best].us))) best = k;
    if (c[best].us >= 0 && ops_us >= 0 && ops_us <= c[best].us) {
        CGJ_LOG(trace, "GEMM %dx%dx%d: the program's calls (%.1f us) beat the cuBLASLt matmul (%.1f us, best of %d)",
                g->m, g->n, g->k, ops_us, c[best].us, n);
        return -1;
    }
    return best;
}

/* Does an op after j wait for the event that op j records? (cuBLAS records one after a split-K
 * GEMM; a matmul in the group's place records none.) */
static bool waited_later(const cgj_trace_t *t, uint32_t j)
{
    for (uint32_t k = j + 1; k < t->list.n; k++)
        if (t->list.ops[k].call.kind == CGJ_OP_STREAM_WAIT && t->list.ops[k].call.u.e.ev == t->list.ops[j].call.u.e.ev)
            return true;
    return false;
}

/* The GEMM of LIB op i where a matmul may stand for its group: described, absorbed whole by
 * replay with arguments that do not vary, C packed, its ops on one stream (an event it records
 * waited for by no later op). */
static const cgj_libgemm_t *gemm_of(const cgj_trace_t *t, uint32_t i)
{
    const cgj_libop_t *l = t->list.ops[i].lib;
    if (!l || !l->gemm.valid || !l->absorbable || l->free_args || l->never || l->collective || !l->nops ||
        i + l->nops >= t->list.n || l->gemm.ldc != l->gemm.m)
        return NULL;
    CUstream s = t->list.ops[i + 1].call.stream;
    for (uint32_t j = i + 1; j <= i + l->nops; j++) {
        const cgj_op_t *o = &t->list.ops[j];
        if (o->call.stream != s || o->host_visible || o->handoff || o->fused || o->call.kind == CGJ_OP_STREAM_WAIT ||
            (o->call.kind == CGJ_OP_EVENT_RECORD && waited_later(t, j)))
            return NULL;
    }
    return &l->gemm;
}

/* The stage right after op `after` on stream s over n elements, or UINT32_MAX. */
static uint32_t next_stage(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t after, CUstream s,
                           uint64_t n)
{
    uint32_t j = cgj_fusion_next_element(&t->list, after + 1);
    if (j >= t->list.n || !specs[j] || cgj_fusion_element_stream(&t->list, j) != s ||
        cgj_fusion_count(&t->list.ops[j], specs[j]) != n)
        return UINT32_MAX;
    return j;
}

/* Is C (n floats at c) never read after op `last`: an in-step allocation freed in the step and
 * mentioned by no later op? */
static bool dead_after(const cgj_trace_t *t, CUdeviceptr c, uint64_t n, uint32_t last)
{
    cgj_fuse_chain_t one = {.nbufs = 1, .n = n};
    one.buf[0] = (cgj_fuse_buf_t){.addr = c, .extent = n, .type = CGJ_EW_F32, .store = true};
    cgj_fusion_mark_stores(&t->list, last, &one);
    return !one.buf[0].store;
}

/* The bias and activation after the GEMM that op can take (its epilogue, D, the stages). */
static void find_epilogue(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, const cgj_libgemm_t *g,
                          lt_op_t *op, cgj_gemm_fold_t *f)
{
    CUstream s = cgj_fusion_element_stream(&t->list, f->first);
    uint64_t n = (uint64_t)g->m * g->n;
    stage_view_t v;
    uint32_t j = next_stage(t, specs, f->last, s, n);
    if (j == UINT32_MAX) return;
    view_of(&t->list, specs[j], j, &v);
    if (!is_row_bias(&v, g, op->ptr[PC], &op->ptr[PBIAS])) return;
    op->epilogue = CUBLASLT_EPILOGUE_BIAS;
    f->stages[f->nstages++] = j, f->last = cgj_fusion_element_end(&t->list, j);
    uint32_t k = next_stage(t, specs, f->last, s, n);
    if (k == UINT32_MAX) return;
    view_of(&t->list, specs[k], k, &v);
    CUdeviceptr y = 0;
    int act = activation_of(&v, op->ptr[PC], &y);
    uint32_t end = cgj_fusion_element_end(&t->list, k);
    if (!act || (y != op->ptr[PC] && !dead_after(t, op->ptr[PC], n, end))) return;
    op->epilogue = act == CUBLASLT_EPILOGUE_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    op->ptr[PD] = y;
    f->stages[f->nstages++] = k, f->last = end;
}

bool cgj_fusion_gemm(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t i, cgj_gemm_fold_t *out,
                     cgj_reason_t *why)
{
    cgj_reason_set(why, CGJ_REASON_NONE, CGJ_REASON_NO_OP, NULL);
    cgj_jit_mode_t mode = cgj_jit_mode();
    const cgj_libgemm_t *g = mode == CGJ_JIT_REDUCE_OVERHEAD ? NULL : gemm_of(t, i);
    if (!g) return false;
    const cgj_libop_t *l = t->list.ops[i].lib;
    lt_op_t *op = cgj_xcalloc(1, sizeof *op);
    op->ptr[PA] = l->args[g->a], op->ptr[PB] = l->args[g->b], op->ptr[PC] = op->ptr[PD] = l->args[g->c];
    op->alpha = g->alpha, op->beta = g->beta, op->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    *out = (cgj_gemm_fold_t){.first = i, .last = cgj_fusion_element_end(&t->list, i), .stages = {i}, .nstages = 1};
    find_epilogue(t, specs, g, op, out);
    bool tune = mode == CGJ_JIT_MAX_AUTOTUNE;
    if (op->epilogue == CUBLASLT_EPILOGUE_DEFAULT && !tune) {
        cgj_free(op);
        return false;
    }
    cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
    cgj_fuse_chain_t ch = {.st = NULL};
    int nres = 0, best = -1;
    bool ready = (op->h = lt_handle()) && lt_setup(op, g) && (nres = lt_algos(op, res, tune ? MAX_ALGOS : 1)) > 0;
    if (!ready)
        cgj_reason_set(why, CGJ_REASON_FUSE_COMPILE, i, "cuBLASLt %s for a %dx%dx%d GEMM",
                       !lt.ok ? "not found" : !op->h ? "handle" : "offers no algorithm", g->m, g->n, g->k);
    bool ok = ready && check_chain(out, g, op, &ch) && (best = choose(t, &ch, op, g, res, nres, why)) >= 0;
    cgj_free(ch.st);
    if (!ok) {
        cgj_fusion_gemm_release(op);
        return false;
    }
    op->algo = res[best].algo;
    out->ctx = op;
    CGJ_LOG(trace, "GEMM %dx%dx%d at op %u: one cuBLASLt matmul with %u stage(s) after it, algorithm %d of %d", g->m, g->n,
            g->k, i, out->nstages - 1, best + 1, nres);
    return true;
}
