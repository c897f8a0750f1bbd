/*
 * gemm.c — a GEMM and what follows it, as one cuBLASLt matmul (mode default and max-autotune).
 *
 * A plain fp32 GEMM (cgj_libgemm_t: cublasSgemm, cublasGemmEx in fp32, C packed) followed on its
 * stream by a bias over C's rows and optionally a ReLU or GELU (tanh) of C becomes one
 * cublasLtMatmul with the epilogue BIAS, RELU_BIAS or GELU_BIAS: one kernel where there were
 * three, C written once, taken where it is faster than the program's calls on copies of the
 * real operands (the heuristic's first algorithm in mode default, the fastest of up to 8 in
 * max-autotune). What follows the GEMM is recognized by what it computes (follow.c). In max-autotune every such GEMM,
 * with or without an epilogue, is also timed at build on copies of its real operands against the cuBLASLt algorithms
 * the heuristic offers, and the fastest is kept; where the program's own calls are faster, nothing changes.
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

/* clang-format off */
#define LT_FUNCS(X)                                                                                     \
    X(cublasLtCreate) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescSetAttribute)                    \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)          \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute)                          \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
/* clang-format on */

static struct {
#define LT_FIELD(name) __typeof__(name) *name;
    LT_FUNCS(LT_FIELD)
#undef LT_FIELD
    bool ok;
} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static cgj_handles_t handles = CGJ_HANDLES_INIT;

#define WORKSPACE (4u << 20)
#define MAX_ALGOS 8

static void load_lt(void)
{
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    void *h = cgj_fusion_dlopen(names, CGJ_ARRAY_LEN(names));
    if (!h) return;
    lt.ok = true;
#define LT_RESOLVE(name) lt.ok &= (lt.name = (__typeof__(lt.name))cgj_driver_dlsym(h, #name)) != NULL;
    LT_FUNCS(LT_RESOLVE)
#undef LT_RESOLVE
}

static bool create_lt(void **h)
{
    return lt.cublasLtCreate((cublasLtHandle_t *)h) == CUBLAS_STATUS_SUCCESS;
}

void cgj_fusion_gemm_forked(void)
{
    cgj_handles_forked(&handles);
}

/* cgjit's cuBLASLt handle for the current context, or NULL. */
static cublasLtHandle_t lt_handle(void)
{
    pthread_once(&lt_once, load_lt);
    return lt.ok ? (cublasLtHandle_t)cgj_fusion_handle(&handles, create_lt) : NULL;
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
    CUdeviceptr ptr[5]; /* A, B, C, D, bias as the trace has them */
    uint32_t buf[5];    /* their buffers in the check chain */
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

static CUresult gemm_issue(void *ctx, CUstream s)
{
    lt_op_t *op = ctx;
    return lt_run(op, &op->algo, op->ptr, s);
}

static void gemm_release(void *ctx)
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
              LT_OK(lt.cublasLtMatrixLayoutCreate(&op->la, CUDA_R_32F, g->transa ? g->k : g->m, g->transa ? g->m : g->k,
                                                  g->lda)) &&
              LT_OK(lt.cublasLtMatrixLayoutCreate(&op->lb, CUDA_R_32F, g->transb ? g->n : g->k, g->transb ? g->k : g->n,
                                                  g->ldb)) &&
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
        LT_OK(
            lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)) &&
        !LT_OK(
            lt.cublasLtMatmulAlgoGetHeuristic(op->h, op->desc, op->la, op->lb, op->lc, op->lc, pref, want, res, &got)))
        got = 0;
    if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
    cgj_internal_calls--;
    return got;
}

/* ---- checking and choosing ---- */

/* The chain the matmul is checked on: the group's and stages' ops, A, B, C, bias and D as
 * buffers, D stored (and C, where it is D). */
static bool check_chain(const cgj_fold_t *f, const cgj_libgemm_t *g, lt_op_t *op, cgj_fuse_chain_t *ch)
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
        int b = cgj_fusion_add_buffer(ch, op->ptr[k], extents[k]);
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

/* The fastest valid algorithm of res[0..n), or -1 (cgj_fusion_fastest). */
static int choose(const cgj_trace_t *t, const cgj_fuse_chain_t *ch, lt_op_t *op, const cgj_libgemm_t *g,
                  const cublasLtMatmulHeuristicResult_t *res, int n, cgj_reason_t *why)
{
    cgj_fuse_candidate_t c[MAX_ALGOS];
    candidate_ctx_t cc[MAX_ALGOS];
    for (int k = 0; k < n; k++) {
        cc[k] = (candidate_ctx_t){op, &res[k].algo};
        c[k] = (cgj_fuse_candidate_t){.run = run_candidate, .ctx = &cc[k]};
    }
    float ops_us, best_us;
    int best = cgj_fusion_fastest(&t->list, ch, c, (uint32_t)n, &ops_us, &best_us, why);
    if (best < 0 && why->code == CGJ_REASON_NONE)
        CGJ_LOG(trace, "GEMM %dx%dx%d: the program's calls (%.1f us) beat the cuBLASLt matmul (%.1f us, best of %d)",
                g->m, g->n, g->k, ops_us, best_us, n);
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

/* The bias and activation after the GEMM that op can take (its epilogue, D, the stages). */
static void find_epilogue(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, const cgj_libgemm_t *g, lt_op_t *op,
                          cgj_fold_t *f)
{
    cgj_epilogue_t e;
    CUstream s = cgj_fusion_element_stream(&t->list, f->first);
    if (!cgj_fusion_epilogue(t, specs, f->last, s, op->ptr[PC], (uint64_t)g->m * g->n, 1, (uint64_t)g->m, &e)) return;
    op->epilogue = e.act == CGJ_ACT_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS
                 : e.act == CGJ_ACT_GELU ? CUBLASLT_EPILOGUE_GELU_BIAS
                                         : CUBLASLT_EPILOGUE_BIAS;
    op->ptr[PBIAS] = e.bias, op->ptr[PD] = e.out;
    for (uint32_t k = 0; k < e.nstages; k++) f->stages[f->nstages++] = e.stages[k];
    f->last = e.last;
}

bool cgj_fusion_gemm(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t i, cgj_fold_t *out,
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
    *out = (cgj_fold_t){.first = i, .last = cgj_fusion_element_end(&t->list, i), .stages = {i}, .nstages = 1};
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
                       !lt.ok   ? "not found"
                       : !op->h ? "handle"
                                : "offers no algorithm",
                       g->m, g->n, g->k);
    bool ok = ready && check_chain(out, g, op, &ch) && (best = choose(t, &ch, op, g, res, nres, why)) >= 0;
    cgj_free(ch.st);
    if (!ok) {
        gemm_release(op);
        return false;
    }
    op->algo = res[best].algo;
    static const cgj_fused_ops_t ops = {"cublaslt_matmul", "one cuBLASLt matmul with its epilogue", gemm_issue,
                                        gemm_release};
    out->ctx = op, out->ops = &ops;
    CGJ_LOG(trace, "GEMM %dx%dx%d at op %u: one cuBLASLt matmul with %u stage(s) after it, algorithm %d of %d", g->m,
            g->n, g->k, i, out->nstages - 1, best + 1, nres);
    return true;
}
