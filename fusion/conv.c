/*
 * conv.c — a convolution, the bias over its channels and the ReLU after it, as one
 * cudnnConvolutionBiasActivationForward (mode default and max-autotune).
 *
 * A plain fp32 convolution (cgj_libconv_t: cudnnConvolutionForward on float tensors, its output
 * packed) followed on its stream by a bias over the output's channels (read at (i / HW) % C:
 * cudnnAddTensor of a 1 x C x 1 x 1 tensor, or a registered kernel that computes the same) and
 * optionally a ReLU of it becomes one call: y = relu(alpha conv(x, w) + beta y + bias). Without
 * a ReLU cuDNN offers the identity only with the IMPLICIT_PRECOMP_GEMM algorithm; elsewhere the
 * bias alone stays an elementwise stage. What follows is recognized by what it computes
 * (follow.c). The call is made with cgjit's own cuDNN handle and descriptors, made again from the
 * recorded contents, and a workspace of its own of the recorded size; it is checked normwise on
 * copies of the real operands and taken only where it runs faster than the program's calls, as
 * gemm.c's matmuls are.
 */
#include "fusion/fusion.h"

#ifdef CGJ_HAVE_CUDNN
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/mem.h"

#include <cudnn.h>
#include <string.h>

/* clang-format off */
#define DNN_FUNCS(X)                                                                                        \
    X(cudnnCreate) X(cudnnSetStream) X(cudnnCreateTensorDescriptor) X(cudnnSetTensorNdDescriptor)           \
    X(cudnnDestroyTensorDescriptor) X(cudnnCreateFilterDescriptor) X(cudnnSetFilterNdDescriptor)            \
    X(cudnnDestroyFilterDescriptor) X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolutionNdDescriptor)  \
    X(cudnnSetConvolutionMathType) X(cudnnSetConvolutionGroupCount) X(cudnnDestroyConvolutionDescriptor)    \
    X(cudnnCreateActivationDescriptor) X(cudnnSetActivationDescriptor) X(cudnnDestroyActivationDescriptor)  \
    X(cudnnConvolutionBiasActivationForward)
/* clang-format on */

static struct {
#define DNN_FIELD(name) __typeof__(name) *name;
    DNN_FUNCS(DNN_FIELD)
#undef DNN_FIELD
    bool ok;
} dnn;
static pthread_once_t dnn_once = PTHREAD_ONCE_INIT;
static cgj_handles_t handles = CGJ_HANDLES_INIT;

#define OK(call) ((call) == CUDNN_STATUS_SUCCESS)

static void load_dnn(void)
{
    static const char *const names[] = {"libcudnn.so.9", "libcudnn.so"};
    void *h = cgj_fusion_dlopen(names, CGJ_ARRAY_LEN(names));
    if (!h) return;
    dnn.ok = true;
#define DNN_RESOLVE(name) dnn.ok &= (dnn.name = (__typeof__(dnn.name))cgj_driver_dlsym(h, #name)) != NULL;
    DNN_FUNCS(DNN_RESOLVE)
#undef DNN_RESOLVE
}

static bool create_dnn(void **h)
{
    return OK(dnn.cudnnCreate((cudnnHandle_t *)h));
}

void cgj_fusion_conv_forked(void)
{
    cgj_handles_forked(&handles);
}

typedef struct conv_op {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t ad;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws_bytes;
    CUdeviceptr ws;
    float alpha, beta;
    CUdeviceptr ptr[5]; /* x, w, C (the convolution's y), D (the result), bias */
    uint32_t buf[5];    /* their buffers in the check chain */
} conv_op_t;
enum { PX, PW, PC, PD, PBIAS };

static CUresult conv_run(conv_op_t *op, const CUdeviceptr *p, CUstream s)
{
    cgj_internal_calls++;
    const void *z = (const void *)(uintptr_t)(op->beta != 0 ? p[PC] : p[PD]);
    cudnnStatus_t st = dnn.cudnnSetStream(op->h, (cudaStream_t)s);
    if (OK(st))
        st = dnn.cudnnConvolutionBiasActivationForward(
            op->h, &op->alpha, op->xd, (const void *)(uintptr_t)p[PX], op->wd, (const void *)(uintptr_t)p[PW], op->cd,
            op->algo, (void *)(uintptr_t)op->ws, op->ws_bytes, &op->beta, op->yd, z, op->bd,
            (const void *)(uintptr_t)p[PBIAS], op->ad, op->yd, (void *)(uintptr_t)p[PD]);
    cgj_internal_calls--;
    if (!OK(st)) CGJ_LOG(trace, "cudnnConvolutionBiasActivationForward: status %d", (int)st);
    return OK(st) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
}

static CUresult conv_issue(void *ctx, CUstream s)
{
    conv_op_t *op = ctx;
    return conv_run(op, op->ptr, s);
}

static void conv_release(void *ctx)
{
    conv_op_t *op = ctx;
    if (!op) return;
    cgj_internal_calls++;
    if (op->xd) dnn.cudnnDestroyTensorDescriptor(op->xd);
    if (op->yd) dnn.cudnnDestroyTensorDescriptor(op->yd);
    if (op->bd) dnn.cudnnDestroyTensorDescriptor(op->bd);
    if (op->wd) dnn.cudnnDestroyFilterDescriptor(op->wd);
    if (op->cd) dnn.cudnnDestroyConvolutionDescriptor(op->cd);
    if (op->ad) dnn.cudnnDestroyActivationDescriptor(op->ad);
    cgj_internal_calls--;
    if (op->ws) cgj_drv.r_cuMemFree_v2(op->ws);
    cgj_free(op);
}

/* The descriptors of c made again, the bias's (1 x C x 1 ...), the activation's, a workspace. */
static bool conv_setup(conv_op_t *op, const cgj_libconv_t *c, bool relu)
{
    int bdims[CGJ_LIBCONV_DIMS], bstrides[CGJ_LIBCONV_DIMS];
    for (int k = 0; k < c->nb; k++) bdims[k] = k == 1 ? c->ydims[1] : 1;
    for (int k = c->nb - 1, s = 1; k >= 0; s *= bdims[k--]) bstrides[k] = s;
    cgj_internal_calls++;
    bool ok = OK(dnn.cudnnCreateTensorDescriptor(&op->xd)) && OK(dnn.cudnnCreateTensorDescriptor(&op->yd)) &&
              OK(dnn.cudnnCreateTensorDescriptor(&op->bd)) && OK(dnn.cudnnCreateFilterDescriptor(&op->wd)) &&
              OK(dnn.cudnnCreateConvolutionDescriptor(&op->cd)) && OK(dnn.cudnnCreateActivationDescriptor(&op->ad)) &&
              OK(dnn.cudnnSetTensorNdDescriptor(op->xd, CUDNN_DATA_FLOAT, c->nb, c->xdims, c->xstrides)) &&
              OK(dnn.cudnnSetTensorNdDescriptor(op->yd, CUDNN_DATA_FLOAT, c->nb, c->ydims, c->ystrides)) &&
              OK(dnn.cudnnSetTensorNdDescriptor(op->bd, CUDNN_DATA_FLOAT, c->nb, bdims, bstrides)) &&
              OK(dnn.cudnnSetFilterNdDescriptor(op->wd, CUDNN_DATA_FLOAT, (cudnnTensorFormat_t)c->wformat, c->nb,
                                                c->wdims)) &&
              OK(dnn.cudnnSetConvolutionNdDescriptor(op->cd, c->nconv, c->pad, c->stride, c->dil,
                                                     (cudnnConvolutionMode_t)c->mode, CUDNN_DATA_FLOAT)) &&
              OK(dnn.cudnnSetConvolutionMathType(op->cd, (cudnnMathType_t)c->math)) &&
              OK(dnn.cudnnSetConvolutionGroupCount(op->cd, c->groups)) &&
              OK(dnn.cudnnSetActivationDescriptor(op->ad, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                  CUDNN_PROPAGATE_NAN, 0.0));
    cgj_internal_calls--;
    op->algo = (cudnnConvolutionFwdAlgo_t)c->algo, op->ws_bytes = c->ws_bytes;
    return ok && cgj_drv.r_cuMemAlloc_v2(&op->ws, op->ws_bytes ? op->ws_bytes : 256) == CUDA_SUCCESS;
}

/* Elements a tensor of nb dims and strides reaches. */
static uint64_t extent(int nb, const int32_t *dims, const int32_t *strides)
{
    uint64_t e = 1;
    for (int k = 0; k < nb; k++) e += (uint64_t)(dims[k] - 1) * (uint64_t)strides[k];
    return e;
}

/* The convolution of LIB op i where one call may stand for its group: described, absorbed whole
 * by replay with arguments that do not vary, its output packed, its ops kernels on one stream. */
static const cgj_libconv_t *conv_of(const cgj_trace_t *t, uint32_t i, uint64_t *n)
{
    const cgj_libop_t *l = t->list.ops[i].lib;
    const cgj_libconv_t *c = &l->conv;
    if (!c->valid || !l->absorbable || l->free_args || l->never || l->collective || !l->nops ||
        i + l->nops >= t->list.n || c->nb < 3)
        return NULL;
    *n = 1;
    for (int k = c->nb - 1; k >= 0; k--) {
        if ((uint64_t)c->ystrides[k] != *n || c->ydims[k] < 1) return NULL;
        *n *= (uint64_t)c->ydims[k];
    }
    CUstream s = t->list.ops[i + 1].call.stream;
    for (uint32_t j = i + 1; j <= i + l->nops; j++) {
        const cgj_op_t *o = &t->list.ops[j];
        if (o->call.stream != s || o->host_visible || o->handoff || o->fused || o->call.kind != CGJ_OP_KERNEL)
            return NULL;
    }
    return c;
}

/* The chain the call is checked on: the ops it replaces, x, w, C, D and the bias as buffers. */
static bool check_chain(const cgj_fold_t *f, const cgj_libconv_t *c, uint64_t n, conv_op_t *op, cgj_fuse_chain_t *ch)
{
    uint64_t wn = 1;
    for (int k = 0; k < c->nb; k++) wn *= (uint64_t)c->wdims[k];
    uint64_t extents[5] = {extent(c->nb, c->xdims, c->xstrides), wn, n, n, (uint64_t)c->ydims[1]};
    memset(ch, 0, sizeof *ch);
    ch->n = n;
    ch->st = cgj_xcalloc(f->nstages, sizeof *ch->st);
    for (uint32_t s = 0; s < f->nstages; s++) ch->st[ch->nstages++].op = f->stages[s];
    for (int k = 0; k < 5; k++) {
        int b = cgj_fusion_add_buffer(ch, op->ptr[k], extents[k]);
        if (b < 0) return false;
        op->buf[k] = (uint32_t)b;
    }
    ch->buf[op->buf[PD]].store = true;
    return true;
}

static CUresult run_candidate(void *ctx, const cgj_fuse_chain_t *ch, const CUdeviceptr *bufs, CUstream s)
{
    conv_op_t *op = ctx;
    CUdeviceptr p[5];
    for (int k = 0; k < 5; k++) p[k] = bufs[op->buf[k]];
    return conv_run(op, p, s);
}

bool cgj_fusion_conv(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t i, cgj_fold_t *out,
                     cgj_reason_t *why)
{
    cgj_reason_set(why, CGJ_REASON_NONE, CGJ_REASON_NO_OP, NULL);
    uint64_t n = 0;
    const cgj_libconv_t *c = cgj_jit_mode() == CGJ_JIT_REDUCE_OVERHEAD ? NULL : conv_of(t, i, &n);
    if (!c) return false;
    cgj_epilogue_t e;
    const cgj_libop_t *l = t->list.ops[i].lib;
    uint64_t hw = n / ((uint64_t)c->ydims[0] * (uint64_t)c->ydims[1]);
    if (!cgj_fusion_epilogue(t, specs, cgj_fusion_element_end(&t->list, i), cgj_fusion_element_stream(&t->list, i),
                             l->args[c->y], n, hw, (uint64_t)c->ydims[1], &e))
        return false;
    if (e.act == CGJ_ACT_GELU)
        e.nstages = 1, e.out = l->args[c->y], e.act = CGJ_ACT_NONE,
        e.last = cgj_fusion_element_end(&t->list, e.stages[0]);
    if (e.act == CGJ_ACT_NONE && c->algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return false;
    conv_op_t *op = cgj_xcalloc(1, sizeof *op);
    op->alpha = c->alpha, op->beta = c->beta;
    op->ptr[PX] = l->args[c->x], op->ptr[PW] = l->args[c->w], op->ptr[PC] = l->args[c->y], op->ptr[PD] = e.out;
    op->ptr[PBIAS] = e.bias;
    *out = (cgj_fold_t){.first = i, .last = e.last, .stages = {i}, .nstages = 1};
    for (uint32_t k = 0; k < e.nstages; k++) out->stages[out->nstages++] = e.stages[k];
    pthread_once(&dnn_once, load_dnn);
    cgj_fuse_chain_t ch = {.st = NULL};
    cgj_fuse_candidate_t cand = {.run = run_candidate, .ctx = op};
    float ops_us, us;
    int best = -1;
    bool ready = dnn.ok && (op->h = cgj_fusion_handle(&handles, create_dnn)) &&
                 conv_setup(op, c, e.act == CGJ_ACT_RELU);
    if (!ready) cgj_reason_set(why, CGJ_REASON_FUSE_COMPILE, i, "cuDNN %s", !dnn.ok ? "not found" : "descriptors");
    bool ok = ready && check_chain(out, c, n, op, &ch) &&
              (best = cgj_fusion_fastest(&t->list, &ch, &cand, 1, &ops_us, &us, why)) >= 0;
    cgj_free(ch.st);
    if (best < 0 && ready && why->code == CGJ_REASON_NONE)
        CGJ_LOG(trace,
                "convolution at op %u: the program's calls (%.1f us) beat cudnnConvolutionBiasActivationForward "
                "(%.1f us)",
                i, ops_us, us);
    if (!ok) {
        conv_release(op);
        return false;
    }
    static const cgj_fused_ops_t ops = {"cudnn_conv_bias_act", "one cudnnConvolutionBiasActivationForward", conv_issue,
                                        conv_release};
    out->ctx = op, out->ops = &ops;
    return true;
}

#else /* built without cuDNN's headers: no convolution is folded */

void cgj_fusion_conv_forked(void) {}

bool cgj_fusion_conv(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t i, cgj_fold_t *out,
                     cgj_reason_t *why)
{
    (void)t, (void)specs, (void)i, (void)out;
    cgj_reason_set(why, CGJ_REASON_NONE, CGJ_REASON_NO_OP, NULL);
    return false;
}

#endif
