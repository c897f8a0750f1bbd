/*
 * libs_dnn.c — cuDNN calls as traced ops (see libs.h).
 *
 * Descriptors are read back by content on every call with cuDNN's getters, never trusted by
 * handle: programs reuse and modify one descriptor object for many calls. Scaling factors
 * (alpha, beta) are host values in cuDNN: float, or double for double tensors. The handle's
 * key is its address and generation (cudnnCreate, cudnnSetStream), and its stream where cgjit
 * did not see it created.
 *
 * cudnnBackendExecute: an execution plan cannot change once finalized, so it is keyed by
 * address and generation (cudnnBackendFinalize, cudnnBackendDestroyDescriptor); the variant
 * pack by content: its tensor ids (key), data pointers and workspace (arguments), as set.
 */
#include "runtime/libs.h"

/* The wrappers are the library's entry points: exported, unlike the rest of libcgjit. */
#pragma GCC visibility push(default)

#include <cudnn.h>
#include <pthread.h>

/* Some legacy descriptor functions are marked deprecated in cuDNN 9; the wrappers still read
 * and export them for the programs that use them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* clang-format off */
#define DNN_GETTERS(X)                                                                                 \
    X(cudnnGetStream) X(cudnnGetTensorNdDescriptor) X(cudnnGetFilterNdDescriptor)                     \
    X(cudnnGetConvolutionNdDescriptor) X(cudnnGetConvolutionMathType) X(cudnnGetConvolutionGroupCount) \
    X(cudnnGetConvolutionReorderType) X(cudnnGetActivationDescriptor)                                  \
    X(cudnnGetActivationDescriptorSwishBeta) X(cudnnGetOpTensorDescriptor)                             \
    X(cudnnGetPoolingNdDescriptor) X(cudnnGetPooling2dDescriptor)
/* clang-format on */
LIB_DEFINE_GETTERS(DNN_GETTERS)

#define OK(expr) ((expr) == CUDNN_STATUS_SUCCESS)

/* A handle cgjit saw created has a generation, and cudnnSetStream (its only setter) gives it a
 * new one: the generation stands for the stream. Others have their stream read back. */
static void dnn_handle(cgj_libcall_t *lc, cudnnHandle_t h)
{
    cudaStream_t s = NULL;
    uint64_t gen = cgj_lib_gen(h);
    if (!getters_ready()) lib_never(lc, CGJ_REASON_LIB_GETTERS);
    else if (!h || (!gen && !OK(g_cudnnGetStream(h, &s)))) lib_never(lc, CGJ_REASON_LIB_HANDLE);
    struct {
        const void *h, *s;
        uint64_t gen;
    } k = {h, s, gen};
    key_put(lc, &k, sizeof k);
}

/* A tensor descriptor's content as read. */
typedef struct tensor {
    int32_t dt, nb, dims[CUDNN_DIM_MAX], strides[CUDNN_DIM_MAX];
} tensor_t;

/* A tensor descriptor's content, into the key and *out (NULL: not wanted); returns its data type
 * (CUDNN_DATA_FLOAT when unreadable). */
static cudnnDataType_t key_tensor_shape(cgj_libcall_t *lc, cudnnTensorDescriptor_t d, tensor_t *out)
{
    tensor_t k = {-1, 0, {0}, {0}};
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    int nb = 0;
    if (d && !lc->never) {
        if (!OK(g_cudnnGetTensorNdDescriptor(d, CUDNN_DIM_MAX, &dt, &nb, k.dims, k.strides)) || nb > CUDNN_DIM_MAX)
            lib_never(lc, CGJ_REASON_LIB_DESCRIPTOR);
        k.dt = dt, k.nb = nb;
    }
    key_put(lc, &k, sizeof k);
    if (out) *out = k;
    return dt;
}

static cudnnDataType_t key_tensor(cgj_libcall_t *lc, cudnnTensorDescriptor_t d)
{
    return key_tensor_shape(lc, d, NULL);
}

static void key_filter(cgj_libcall_t *lc, cudnnFilterDescriptor_t d)
{
    struct {
        int32_t dt, fmt, nb, dims[CUDNN_DIM_MAX];
    } k = {-1, 0, 0, {0}};
    if (d && !lc->never) {
        cudnnDataType_t dt;
        cudnnTensorFormat_t fmt;
        int nb = 0;
        if (!OK(g_cudnnGetFilterNdDescriptor(d, CUDNN_DIM_MAX, &dt, &fmt, &nb, k.dims)) || nb > CUDNN_DIM_MAX)
            lib_never(lc, CGJ_REASON_LIB_DESCRIPTOR);
        k.dt = dt, k.fmt = fmt, k.nb = nb;
    }
    key_put(lc, &k, sizeof k);
}

static void key_conv(cgj_libcall_t *lc, cudnnConvolutionDescriptor_t d)
{
    enum { MAXC = CUDNN_DIM_MAX - 2 };
    struct {
        int32_t len, pad[MAXC], stride[MAXC], dil[MAXC], mode, ct, math, groups, reorder;
    } k = {-1, {0}, {0}, {0}, 0, 0, 0, 0, 0};
    if (d && !lc->never) {
        int len = 0;
        cudnnConvolutionMode_t mode;
        cudnnDataType_t ct;
        cudnnMathType_t math;
        cudnnReorderType_t reorder;
        if (!OK(g_cudnnGetConvolutionNdDescriptor(d, MAXC, &len, k.pad, k.stride, k.dil, &mode, &ct)) || len > MAXC ||
            !OK(g_cudnnGetConvolutionMathType(d, &math)) || !OK(g_cudnnGetConvolutionGroupCount(d, &k.groups)) ||
            !OK(g_cudnnGetConvolutionReorderType(d, &reorder)))
            lib_never(lc, CGJ_REASON_LIB_DESCRIPTOR);
        else k.len = len, k.mode = mode, k.ct = ct, k.math = math, k.reorder = reorder;
    }
    key_put(lc, &k, sizeof k);
}

static void key_activation(cgj_libcall_t *lc, cudnnActivationDescriptor_t d)
{
    struct {
        int32_t mode, nan;
        double coef, swish;
    } k = {-1, 0, 0, 0};
    if (d && !lc->never) {
        cudnnActivationMode_t mode;
        cudnnNanPropagation_t nan;
        if (!OK(g_cudnnGetActivationDescriptor(d, &mode, &nan, &k.coef)) ||
            (mode == CUDNN_ACTIVATION_SWISH && !OK(g_cudnnGetActivationDescriptorSwishBeta(d, &k.swish))))
            lib_never(lc, CGJ_REASON_LIB_DESCRIPTOR);
        else k.mode = mode, k.nan = nan;
    }
    key_put(lc, &k, sizeof k);
}

/* What both convolution calls share: input, filter, convolution, algorithm, workspace size. */
static void key_conv_call(cgj_libcall_t *lc, cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                          cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo, size_t wsbytes)
{
    key_tensor(lc, xd);
    key_filter(lc, wd);
    key_conv(lc, cd);
    key_i64(lc, algo), key_i64(lc, (int64_t)wsbytes);
}

/* Scaling factors are host values: double for double tensors, float otherwise. */
static void key_scale(cgj_libcall_t *lc, const void *p, cudnnDataType_t dt)
{
    key_host_scalar(lc, p, dt == CUDNN_DATA_DOUBLE ? sizeof(double) : sizeof(float));
}

#define DNN_PROLOGUE(fn, h, ...)                      \
    LIB_REAL(fn, CUDNN_STATUS_NOT_INITIALIZED);       \
    if (cgj_lib_pass()) return real_(h, __VA_ARGS__); \
    cgj_libcall_t lc;                                 \
    lib_init(&lc);                                    \
    dnn_handle(&lc, h)

#define DNN_RUN(fn, ...) LIB_CALL(lc, #fn, CUDNN_STATUS_SUCCESS, real_(__VA_ARGS__))

/* The convolution description of a float call (mode default): arguments x 0, w 1, ws 2, y 3. */
static void describe_conv(cgj_libcall_t *lc, cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd,
                          cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo, size_t wsbytes,
                          const void *alpha, const void *beta, cudnnTensorDescriptor_t yd)
{
    cgj_libconv_t c = {.valid = true, .x = 0, .w = 1, .ws = 2, .y = 3, .algo = algo, .ws_bytes = wsbytes};
    cudnnDataType_t xt, yt, wt, ct;
    cudnnTensorFormat_t fmt;
    cudnnConvolutionMode_t mode;
    cudnnMathType_t math;
    int ynb = 0, wnb = 0;
    if (!OK(g_cudnnGetTensorNdDescriptor(xd, CGJ_LIBCONV_DIMS, &xt, &c.nb, c.xdims, c.xstrides)) ||
        !OK(g_cudnnGetTensorNdDescriptor(yd, CGJ_LIBCONV_DIMS, &yt, &ynb, c.ydims, c.ystrides)) ||
        !OK(g_cudnnGetFilterNdDescriptor(wd, CGJ_LIBCONV_DIMS, &wt, &fmt, &wnb, c.wdims)) ||
        !OK(g_cudnnGetConvolutionNdDescriptor(cd, CUDNN_DIM_MAX - 2, &c.nconv, c.pad, c.stride, c.dil, &mode, &ct)) ||
        !OK(g_cudnnGetConvolutionMathType(cd, &math)) || !OK(g_cudnnGetConvolutionGroupCount(cd, &c.groups)))
        return;
    if (xt != CUDNN_DATA_FLOAT || yt != CUDNN_DATA_FLOAT || wt != CUDNN_DATA_FLOAT || ct != CUDNN_DATA_FLOAT ||
        c.nb != ynb || c.nb != wnb || c.nb > CGJ_LIBCONV_DIMS || c.nconv != c.nb - 2)
        return;
    c.wformat = fmt, c.mode = mode, c.math = math;
    c.alpha = *(const float *)alpha, c.beta = *(const float *)beta;
    lc->conv = c;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                      const void *x, const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo, void *ws,
                                      size_t wsbytes, const void *beta, const cudnnTensorDescriptor_t yd, void *y)
{
    DNN_PROLOGUE(cudnnConvolutionForward, h, alpha, xd, x, wd, w, cd, algo, ws, wsbytes, beta, yd, y);
    key_conv_call(&lc, xd, wd, cd, algo, wsbytes);
    cudnnDataType_t dt = key_tensor(&lc, yd);
    key_scale(&lc, alpha, dt), key_scale(&lc, beta, dt);
    arg_put(&lc, x), arg_put(&lc, w), arg_put(&lc, ws), arg_put(&lc, y);
    if (lib_ew_wanted(&lc)) describe_conv(&lc, xd, wd, cd, algo, wsbytes, alpha, beta, yd);
    DNN_RUN(cudnnConvolutionForward, h, alpha, xd, x, wd, w, cd, algo, ws, wsbytes, beta, yd, y);
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t h, const void *alpha1, const cudnnTensorDescriptor_t xd, const void *x,
    const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
    cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wsbytes, const void *alpha2, const cudnnTensorDescriptor_t zd,
    const void *z, const cudnnTensorDescriptor_t bd, const void *bias, const cudnnActivationDescriptor_t ad,
    const cudnnTensorDescriptor_t yd, void *y)
{
    DNN_PROLOGUE(cudnnConvolutionBiasActivationForward, h, alpha1, xd, x, wd, w, cd, algo, ws, wsbytes, alpha2, zd, z,
                 bd, bias, ad, yd, y);
    key_conv_call(&lc, xd, wd, cd, algo, wsbytes);
    key_tensor(&lc, zd);
    key_tensor(&lc, bd);
    key_activation(&lc, ad);
    cudnnDataType_t dt = key_tensor(&lc, yd);
    key_scale(&lc, alpha1, dt), key_scale(&lc, alpha2, dt);
    arg_put(&lc, x), arg_put(&lc, w), arg_put(&lc, ws), arg_put(&lc, z), arg_put(&lc, bias), arg_put(&lc, y);
    DNN_RUN(cudnnConvolutionBiasActivationForward, h, alpha1, xd, x, wd, w, cd, algo, ws, wsbytes, alpha2, zd, z, bd,
            bias, ad, yd, y);
}

/* ---- elementwise descriptions (fusion/, mode default) ----
 * Float tensors, packed (each stride the product of the dimensions after it): element i is the
 * i-th in memory. A broadcast operand (a bias over channels) is read at (i / d) % m. */

/* Elements of packed float tensor t, or 0 if it is not one. */
static uint64_t packed_elements(const tensor_t *t)
{
    uint64_t n = 1;
    if (t->dt != CUDNN_DATA_FLOAT || t->nb < 1) return 0;
    for (int k = t->nb - 1; k >= 0; k--) {
        if (t->dims[k] < 1 || (uint64_t)t->strides[k] != n) return 0;
        n *= (uint64_t)t->dims[k];
    }
    return n;
}

/* How operand a is read against output c: 0 whole (same dimensions), 1 broadcast at (i / *d) % *m
 * (a's dimensions are c's on one contiguous run and 1 elsewhere), -1 neither. */
static int broadcast_of(const tensor_t *a, const tensor_t *c, uint64_t *d, uint64_t *m)
{
    if (!packed_elements(a) || a->nb != c->nb) return -1;
    int first = -1, last = -1;
    for (int k = 0; k < c->nb; k++) {
        if (a->dims[k] != c->dims[k] && a->dims[k] != 1) return -1;
        if (a->dims[k] == c->dims[k] && c->dims[k] != 1) {
            if (last >= 0 && last != k - 1) return -1;
            if (first < 0) first = k;
            last = k;
        }
    }
    if (!memcmp(a->dims, c->dims, sizeof(int32_t) * (size_t)c->nb)) return 0;
    *d = 1, *m = 1;
    for (int k = c->nb - 1; k > last; k--) *d *= (uint64_t)c->dims[k];
    for (int k = first; first >= 0 && k <= last; k++) *m *= (uint64_t)c->dims[k];
    if (first < 0) *d = packed_elements(c); /* a single value */
    return 1;
}

/* A host scale factor's bits (float tensors). */
static uint64_t scale_bits(const void *p)
{
    return lib_ew_float(*(const float *)p);
}

#define EW_BLEND(out, expr) out " = alpha * (" expr ")"
#define EW_BLEND_BETA(out, expr) out " = alpha * (" expr ") + beta * " out

/* y = alpha * f(x) + beta * y, for each activation mode cuDNN has (f over x, coef, swish): where
 * NaN is not propagated, and where it is (the clamping modes then keep a NaN). */
/* clang-format off */
#define ACT_MODES(X)                                                                                        \
    X(CUDNN_ACTIVATION_SIGMOID, "sigmoid(x)", "sigmoid(x)")                                                 \
    X(CUDNN_ACTIVATION_RELU, "x > 0 ? x : 0", "x > 0 ? x : (x != x ? x : 0)")                               \
    X(CUDNN_ACTIVATION_TANH, "tanh(x)", "tanh(x)")                                                          \
    X(CUDNN_ACTIVATION_CLIPPED_RELU, "min(max(x, 0), coef)", "x != x ? x : min(max(x, 0), coef)")           \
    X(CUDNN_ACTIVATION_ELU, "x > 0 ? x : coef * (exp(x) - 1)", "x > 0 ? x : coef * (exp(x) - 1)")           \
    X(CUDNN_ACTIVATION_IDENTITY, "x", "x")                                                                  \
    X(CUDNN_ACTIVATION_SWISH, "x * sigmoid(swish * x)", "x * sigmoid(swish * x)")
/* clang-format on */
#define ACT_PARAMS "float alpha, float coef, float swish, count long n): "

static void ew_activation(cgj_libcall_t *lc, cudnnActivationDescriptor_t ad, const tensor_t *xt, const tensor_t *yt,
                          const void *alpha, const void *beta)
{
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef = 0, swish = 0;
    uint64_t n = packed_elements(yt);
    if (!n || memcmp(xt, yt, sizeof *xt) || !OK(g_cudnnGetActivationDescriptor(ad, &mode, &nan, &coef)) ||
        (mode == CUDNN_ACTIVATION_SWISH && !OK(g_cudnnGetActivationDescriptorSwishBeta(ad, &swish))))
        return;
    bool b0 = *(const float *)beta == 0.0f, keep = nan == CUDNN_PROPAGATE_NAN;
#define ACT_CASE(m, f, fnan)                                                                                      \
    case m:                                                                                                       \
        lc->ew.spec = b0 ? (keep ? "(out float y, in float x, " ACT_PARAMS EW_BLEND("y", fnan)                    \
                                 : "(out float y, in float x, " ACT_PARAMS EW_BLEND("y", f))                      \
                         : (keep ? "(inout float y, in float x, float beta, " ACT_PARAMS EW_BLEND_BETA("y", fnan) \
                                 : "(inout float y, in float x, float beta, " ACT_PARAMS EW_BLEND_BETA("y", f));  \
        break;
    switch (mode) {
        ACT_MODES(ACT_CASE)
    default: return;
    }
#undef ACT_CASE
    uint64_t *v = lc->ew.vals; /* in the spec's order; pointers by argument: x 0, y 1 */
    int k = 0;
    v[k++] = 1, v[k++] = 0;
    if (!b0) v[k++] = scale_bits(beta);
    v[k++] = scale_bits(alpha), v[k++] = lib_ew_float((float)coef), v[k++] = lib_ew_float((float)swish), v[k++] = n;
}

/* C = alpha * A + beta * C, A whole or broadcast. */
static void ew_add(cgj_libcall_t *lc, const tensor_t *at, const tensor_t *ct, const void *alpha, const void *beta)
{
    uint64_t n = packed_elements(ct), d = 1, m = 1;
    int bc = n ? broadcast_of(at, ct, &d, &m) : -1;
    if (bc < 0) return;
    bool b0 = *(const float *)beta == 0.0f;
    static const char *const specs[2][2] = {
        {"(inout float c, in float a, float beta, float alpha, long d, long m, count long n): c = alpha * a + beta * c",
         "(inout float c, in float a[(i / d) % m], float beta, float alpha, long d, long m, count long n): c = alpha * a + beta * c"},
        {"(out float c, in float a, float beta, float alpha, long d, long m, count long n): c = alpha * a",
         "(out float c, in float a[(i / d) % m], float beta, float alpha, long d, long m, count long n): c = alpha * a"}};
    lc->ew = (cgj_libew_t){specs[b0][bc], {1, 0, scale_bits(beta), scale_bits(alpha), d, m, n}};
}

/* C = op(alpha1 * A, alpha2 * B) + beta * C for the binary ops, B whole or broadcast. */
#define OPT_SPEC(c, b, expr)                  \
    "(" c " float c, in float a, in float " b \
    ", float alpha1, float alpha2, float beta, long d, long m, count long n): c = " expr
#define OPT_SPECS(expr)                                                                                        \
    {                                                                                                          \
        {OPT_SPEC("inout", "b", expr " + beta * c"), OPT_SPEC("inout", "b[(i / d) % m]", expr " + beta * c")}, \
        {                                                                                                      \
            OPT_SPEC("out", "b", expr), OPT_SPEC("out", "b[(i / d) % m]", expr)                                \
        }                                                                                                      \
    }
static void ew_op_tensor(cgj_libcall_t *lc, cudnnOpTensorOp_t op, const tensor_t *at, const tensor_t *bt,
                         const tensor_t *ct, const void *a1, const void *a2, const void *beta)
{
    static const char *const specs[4][2][2] = {
        OPT_SPECS("alpha1 * a + alpha2 * b"), OPT_SPECS("(alpha1 * a) * (alpha2 * b)"),
        OPT_SPECS("min(alpha1 * a, alpha2 * b)"), OPT_SPECS("max(alpha1 * a, alpha2 * b)")};
    int which = op == CUDNN_OP_TENSOR_ADD ? 0
              : op == CUDNN_OP_TENSOR_MUL ? 1
              : op == CUDNN_OP_TENSOR_MIN ? 2
              : op == CUDNN_OP_TENSOR_MAX ? 3
                                          : -1;
    uint64_t n = packed_elements(ct), d = 1, m = 1;
    int bc = n && which >= 0 && broadcast_of(at, ct, &d, &m) == 0 ? broadcast_of(bt, ct, &d, &m) : -1;
    if (bc < 0) return;
    bool b0 = *(const float *)beta == 0.0f; /* args: A 0, B 1, C 2 */
    lc->ew = (cgj_libew_t){specs[which][b0][bc], {2, 0, 1, scale_bits(a1), scale_bits(a2), scale_bits(beta), d, m, n}};
}

cudnnStatus_t cudnnActivationForward(cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void *alpha,
                                     const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                     const cudnnTensorDescriptor_t yd, void *y)
{
    DNN_PROLOGUE(cudnnActivationForward, h, ad, alpha, xd, x, beta, yd, y);
    key_activation(&lc, ad);
    tensor_t xt, yt;
    key_tensor_shape(&lc, xd, &xt);
    cudnnDataType_t dt = key_tensor_shape(&lc, yd, &yt);
    key_scale(&lc, alpha, dt), key_scale(&lc, beta, dt);
    arg_put(&lc, x), arg_put(&lc, y);
    if (lib_ew_wanted(&lc)) ew_activation(&lc, ad, &xt, &yt, alpha, beta);
    DNN_RUN(cudnnActivationForward, h, ad, alpha, xd, x, beta, yd, y);
}

cudnnStatus_t cudnnOpTensor(cudnnHandle_t h, const cudnnOpTensorDescriptor_t od, const void *alpha1,
                            const cudnnTensorDescriptor_t ad, const void *A, const void *alpha2,
                            const cudnnTensorDescriptor_t bd, const void *B, const void *beta,
                            const cudnnTensorDescriptor_t cd, void *C)
{
    DNN_PROLOGUE(cudnnOpTensor, h, od, alpha1, ad, A, alpha2, bd, B, beta, cd, C);
    struct {
        int32_t op, ct, nan;
    } k = {-1, 0, 0};
    if (od && !lc.never) {
        cudnnOpTensorOp_t op;
        cudnnDataType_t ct;
        cudnnNanPropagation_t nan;
        if (!OK(g_cudnnGetOpTensorDescriptor(od, &op, &ct, &nan))) lib_never(&lc, CGJ_REASON_LIB_DESCRIPTOR);
        else k.op = op, k.ct = ct, k.nan = nan;
    }
    key_put(&lc, &k, sizeof k);
    tensor_t at, bt, ct;
    key_tensor_shape(&lc, ad, &at);
    key_tensor_shape(&lc, bd, &bt);
    cudnnDataType_t dt = key_tensor_shape(&lc, cd, &ct);
    key_scale(&lc, alpha1, dt), key_scale(&lc, alpha2, dt), key_scale(&lc, beta, dt);
    arg_put(&lc, A), arg_put(&lc, B), arg_put(&lc, C);
    if (lib_ew_wanted(&lc) && k.ct == CUDNN_DATA_FLOAT && k.nan == CUDNN_NOT_PROPAGATE_NAN)
        ew_op_tensor(&lc, (cudnnOpTensorOp_t)k.op, &at, &bt, &ct, alpha1, alpha2, beta);
    DNN_RUN(cudnnOpTensor, h, od, alpha1, ad, A, alpha2, bd, B, beta, cd, C);
}

cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t ad, const void *A,
                             const void *beta, const cudnnTensorDescriptor_t cd, void *C)
{
    DNN_PROLOGUE(cudnnAddTensor, h, alpha, ad, A, beta, cd, C);
    tensor_t at, ct;
    key_tensor_shape(&lc, ad, &at);
    cudnnDataType_t dt = key_tensor_shape(&lc, cd, &ct);
    key_scale(&lc, alpha, dt), key_scale(&lc, beta, dt);
    arg_put(&lc, A), arg_put(&lc, C);
    if (lib_ew_wanted(&lc)) ew_add(&lc, &at, &ct, alpha, beta);
    DNN_RUN(cudnnAddTensor, h, alpha, ad, A, beta, cd, C);
}

cudnnStatus_t cudnnScaleTensor(cudnnHandle_t h, const cudnnTensorDescriptor_t yd, void *y, const void *alpha)
{
    DNN_PROLOGUE(cudnnScaleTensor, h, yd, y, alpha);
    tensor_t yt;
    cudnnDataType_t dt = key_tensor_shape(&lc, yd, &yt);
    key_scale(&lc, alpha, dt);
    arg_put(&lc, y);
    uint64_t n = lib_ew_wanted(&lc) ? packed_elements(&yt) : 0;
    if (n)
        lc.ew = (cgj_libew_t){"(inout float y, float alpha, count long n): y = alpha * y", {0, scale_bits(alpha), n}};
    DNN_RUN(cudnnScaleTensor, h, yd, y, alpha);
}

cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
                                  const void *alpha, const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yd, void *y)
{
    DNN_PROLOGUE(cudnnSoftmaxForward, h, algo, mode, alpha, xd, x, beta, yd, y);
    key_i64(&lc, algo), key_i64(&lc, mode);
    key_tensor(&lc, xd);
    cudnnDataType_t dt = key_tensor(&lc, yd);
    key_scale(&lc, alpha, dt), key_scale(&lc, beta, dt);
    arg_put(&lc, x), arg_put(&lc, y);
    DNN_RUN(cudnnSoftmaxForward, h, algo, mode, alpha, xd, x, beta, yd, y);
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void *alpha,
                                  const cudnnTensorDescriptor_t xd, const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yd, void *y)
{
    DNN_PROLOGUE(cudnnPoolingForward, h, pd, alpha, xd, x, beta, yd, y);
    struct {
        int32_t mode, nan, nb, win[CUDNN_DIM_MAX], pad[CUDNN_DIM_MAX], stride[CUDNN_DIM_MAX];
    } k = {-1, 0, 0, {0}, {0}, {0}};
    if (pd && !lc.never) {
        cudnnPoolingMode_t mode;
        cudnnNanPropagation_t nan;
        int nb = 0;
        /* The N-d getter wants at most the descriptor's own dimensions: 2-d ones first. */
        bool read = OK(g_cudnnGetPooling2dDescriptor(pd, &mode, &nan, &k.win[0], &k.win[1], &k.pad[0], &k.pad[1],
                                                     &k.stride[0], &k.stride[1]));
        if (read) nb = 2;
        else read = OK(g_cudnnGetPoolingNdDescriptor(pd, 3, &mode, &nan, &nb, k.win, k.pad, k.stride));
        if (!read || nb > 3) lib_never(&lc, CGJ_REASON_LIB_DESCRIPTOR);
        else k.mode = mode, k.nan = nan, k.nb = nb;
    }
    key_put(&lc, &k, sizeof k);
    key_tensor(&lc, xd);
    cudnnDataType_t dt = key_tensor(&lc, yd);
    key_scale(&lc, alpha, dt), key_scale(&lc, beta, dt);
    arg_put(&lc, x), arg_put(&lc, y);
    DNN_RUN(cudnnPoolingForward, h, pd, alpha, xd, x, beta, yd, y);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void *alpha,
                                                      const void *beta, const cudnnTensorDescriptor_t xd, const void *x,
                                                      const cudnnTensorDescriptor_t yd, void *y,
                                                      const cudnnTensorDescriptor_t bnd, const void *scale,
                                                      const void *bias, const void *mean, const void *var, double eps)
{
    DNN_PROLOGUE(cudnnBatchNormalizationForwardInference, h, mode, alpha, beta, xd, x, yd, y, bnd, scale, bias, mean,
                 var, eps);
    key_i64(&lc, mode);
    key_put(&lc, &eps, sizeof eps);
    key_tensor(&lc, xd);
    cudnnDataType_t dt = key_tensor(&lc, yd);
    key_tensor(&lc, bnd);
    key_scale(&lc, alpha, dt), key_scale(&lc, beta, dt);
    arg_put(&lc, x), arg_put(&lc, y), arg_put(&lc, scale), arg_put(&lc, bias), arg_put(&lc, mean), arg_put(&lc, var);
    DNN_RUN(cudnnBatchNormalizationForwardInference, h, mode, alpha, beta, xd, x, yd, y, bnd, scale, bias, mean, var,
            eps);
}

/* ---- the graph API ----
 * A variant pack's content is taken as the program sets it (cudnnBackendSetAttribute): cuDNN
 * does not read all of it back. */

enum { MAXT = CGJ_LIB_MAX_ARGS - 1 };

typedef struct pack {
    cudnnBackendDescriptor_t d;
    int64_t nuids, nptrs;
    int64_t uids[MAXT];
    void *ptrs[MAXT], *ws;
    bool too_many;
} pack_t;

static pack_t *packs;
static size_t npacks, cappacks;
static pthread_mutex_t packs_lock = PTHREAD_MUTEX_INITIALIZER;

void cgj_lib_dnn_forked(void)
{
    pthread_mutex_init(&packs_lock, NULL);
}

static pack_t *pack_find(cudnnBackendDescriptor_t d, bool create)
{
    for (size_t i = 0; i < npacks; i++)
        if (packs[i].d == d) return &packs[i];
    if (!create) return NULL;
    if (npacks == cappacks) packs = cgj_xrealloc(packs, (cappacks = cappacks ? 2 * cappacks : 8) * sizeof *packs);
    memset(&packs[npacks], 0, sizeof packs[npacks]);
    packs[npacks].d = d;
    return &packs[npacks++];
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t n, const void *elems)
{
    LIB_REAL(cudnnBackendSetAttribute, CUDNN_STATUS_NOT_INITIALIZED);
    cudnnStatus_t r = real_(d, name, type, n, elems);
    if (r != CUDNN_STATUS_SUCCESS ||
        (name != CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS && name != CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS &&
         name != CUDNN_ATTR_VARIANT_PACK_WORKSPACE))
        return r;
    pthread_mutex_lock(&packs_lock);
    pack_t *p = pack_find(d, true);
    if (n > MAXT || n < 0 || (n && !elems)) {
        p->too_many = true;
    } else if (name == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS) {
        p->nuids = n;
        memcpy(p->uids, elems, (size_t)n * sizeof p->uids[0]);
    } else if (name == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS) {
        p->nptrs = n;
        memcpy(p->ptrs, elems, (size_t)n * sizeof p->ptrs[0]);
    } else {
        p->ws = n ? *(void *const *)elems : NULL;
    }
    pthread_mutex_unlock(&packs_lock);
    return r;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp)
{
    DNN_PROLOGUE(cudnnBackendExecute, h, plan, vp);
    struct {
        const void *plan;
        uint64_t gen;
        int64_t nuids, uids[MAXT];
    } k = {plan, cgj_lib_gen(plan), 0, {0}};
    pack_t p = {0};
    pthread_mutex_lock(&packs_lock);
    const pack_t *found = vp ? pack_find(vp, false) : NULL;
    if (found) p = *found;
    pthread_mutex_unlock(&packs_lock);
    if (!found) lib_never(&lc, CGJ_REASON_LIB_VARIANT_PACK);
    else if (p.too_many || p.nuids != p.nptrs) lib_never(&lc, CGJ_REASON_LIB_VARIANT_PACK);
    if (!k.gen) lib_never(&lc, CGJ_REASON_LIB_VARIANT_PACK);
    k.nuids = p.nuids;
    memcpy(k.uids, p.uids, sizeof k.uids);
    key_put(&lc, &k, sizeof k);
    for (int64_t i = 0; i < p.nptrs; i++) arg_put(&lc, p.ptrs[i]);
    arg_put(&lc, p.ws);
    DNN_RUN(cudnnBackendExecute, h, plan, vp);
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t d)
{
    LIB_REAL(cudnnBackendFinalize, CUDNN_STATUS_NOT_INITIALIZED);
    cudnnStatus_t r = real_(d);
    cgj_lib_gen_bump(d);
    return r;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d)
{
    LIB_REAL(cudnnBackendDestroyDescriptor, CUDNN_STATUS_NOT_INITIALIZED);
    cgj_lib_gen_drop(d);
    pthread_mutex_lock(&packs_lock);
    pack_t *p = pack_find(d, false);
    if (p) *p = packs[--npacks];
    pthread_mutex_unlock(&packs_lock);
    return real_(d);
}

/* ---- handles ---- */

LIB_CREATE(cudnnStatus_t, cudnnCreate, cudnnHandle_t, CUDNN_STATUS_SUCCESS, CUDNN_STATUS_NOT_INITIALIZED)
LIB_DESTROY(cudnnStatus_t, cudnnDestroy, cudnnHandle_t, CUDNN_STATUS_NOT_INITIALIZED)

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    LIB_REAL(cudnnSetStream, CUDNN_STATUS_NOT_INITIALIZED);
    cudnnStatus_t r = real_(h, s);
    cgj_lib_gen_setting(h, CGJ_LIB_SET_STREAM, (uint64_t)(uintptr_t)s);
    return r;
}

#pragma GCC visibility pop
