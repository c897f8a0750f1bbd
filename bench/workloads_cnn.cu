/*
 * workloads_cnn.cu — workload `cnn`: a small convolutional net with cuDNN's legacy API, batch 1,
 * NCHW fp32, input 1x3x64x64. Four blocks, channels 3 -> 32 -> 64 -> 64 -> 128:
 *
 *   block k:  conv 3x3, pad 1, stride 1 (cross-correlation, as PyTorch's Conv2d)
 *                                        cudnnConvolutionForward, beta 0
 *             + bias (1 x C x 1 x 1)      cudnnAddTensor
 *             ReLU, in place              cudnnActivationForward
 *             2x2 max pooling, stride 2   cudnnPoolingForward into the next block's input
 *
 *   1x3x64x64 -> 1x32x32x32 -> 1x64x16x16 -> 1x64x8x8 -> 1x128x4x4 (the output, 2048 floats).
 *
 * 16 calls per step. PyTorch equivalent: for each block, Conv2d(cin, cout, 3, padding=1),
 * ReLU, MaxPool2d(2).
 *
 * Math: fp32 without TF32: every convolution uses CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM with
 * CUDNN_FMA_MATH (CUDNN_DEFAULT_MATH would allow TF32 on Ampere and later); its workspace
 * (the largest of the four convolutions', at least 256 bytes) is allocated once. NaN
 * propagates through ReLU and pooling, as in PyTorch.
 *
 * Data: fixed seed; weights and biases uniform in +-1/sqrt(cin*9) (PyTorch's Conv2d init),
 * input uniform in [-1, 1).
 */
#include "bench_common.h"

#include <cudnn.h>

#include <math.h>
#include <string.h>

namespace
{

enum { BLOCKS = 4, KS = 3, PAD = 1, IN_C = 3, IN_HW = 64 };
const int CH[BLOCKS + 1] = {IN_C, 32, 64, 64, 128};
const float ONE = 1.0f, ZERO = 0.0f;

/* Spatial size of block k's input (k = BLOCKS: the output). */
int hw_of(int k)
{
    return IN_HW >> k;
}
size_t conv_out_floats(int k)
{
    return (size_t)CH[k + 1] * hw_of(k) * hw_of(k);
}
size_t pool_out_floats(int k)
{
    return (size_t)CH[k + 1] * hw_of(k + 1) * hw_of(k + 1);
}
size_t filter_floats(int k)
{
    return (size_t)CH[k + 1] * CH[k] * KS * KS;
}

struct cnn {
    model_data_t d; /* first: model_data_arena reads it */
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t in_desc[BLOCKS];   /* 1 x CH[k] x hw(k) x hw(k) */
    cudnnTensorDescriptor_t cout_desc[BLOCKS]; /* 1 x CH[k+1] x hw(k) x hw(k) */
    cudnnTensorDescriptor_t bias_desc[BLOCKS]; /* 1 x CH[k+1] x 1 x 1 */
    cudnnTensorDescriptor_t out_desc;          /* 1 x 128 x 4 x 4 */
    cudnnFilterDescriptor_t filt[BLOCKS];
    cudnnConvolutionDescriptor_t conv[BLOCKS];
    cudnnActivationDescriptor_t relu;
    cudnnPoolingDescriptor_t pool;
    void *ws;
    size_t ws_bytes;
    size_t off_w[BLOCKS], off_b[BLOCKS];
    float *conv_out[MODEL_SETS][BLOCKS]; /* conv + bias + ReLU */
    float *pool_out[MODEL_SETS][BLOCKS]; /* the next block's input; the last is the output */
};

void *cnn_create(cudaStream_t s, int keep_host)
{
    cnn *m = (cnn *)bench_host_calloc(sizeof *m);
    CHECK_CUDNN(cudnnCreate(&m->dnn));
    CHECK_CUDNN(cudnnSetStream(m->dnn, s));
    const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    m->ws_bytes = 256;
    for (int k = 0; k < BLOCKS; k++) {
        int hw = hw_of(k);
        CHECK_CUDNN(cudnnCreateTensorDescriptor(&m->in_desc[k]));
        CHECK_CUDNN(cudnnSetTensor4dDescriptor(m->in_desc[k], CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CH[k], hw, hw));
        CHECK_CUDNN(cudnnCreateTensorDescriptor(&m->cout_desc[k]));
        CHECK_CUDNN(
            cudnnSetTensor4dDescriptor(m->cout_desc[k], CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CH[k + 1], hw, hw));
        CHECK_CUDNN(cudnnCreateTensorDescriptor(&m->bias_desc[k]));
        CHECK_CUDNN(
            cudnnSetTensor4dDescriptor(m->bias_desc[k], CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CH[k + 1], 1, 1));
        CHECK_CUDNN(cudnnCreateFilterDescriptor(&m->filt[k]));
        CHECK_CUDNN(
            cudnnSetFilter4dDescriptor(m->filt[k], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CH[k + 1], CH[k], KS, KS));
        CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&m->conv[k]));
        CHECK_CUDNN(cudnnSetConvolution2dDescriptor(m->conv[k], PAD, PAD, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT));
        CHECK_CUDNN(cudnnSetConvolutionMathType(m->conv[k], CUDNN_FMA_MATH));
        int on, oc, oh, ow;
        CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(m->conv[k], m->in_desc[k], m->filt[k], &on, &oc, &oh, &ow));
        if (on != 1 || oc != CH[k + 1] || oh != hw || ow != hw) {
            fprintf(stderr, "cnn: block %d: unexpected convolution output %dx%dx%dx%d\n", k, on, oc, oh, ow);
            exit(1);
        }
        size_t ws = 0;
        CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(m->dnn, m->in_desc[k], m->filt[k], m->conv[k],
                                                            m->cout_desc[k], algo, &ws));
        if (ws > m->ws_bytes) m->ws_bytes = ws;
    }
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&m->out_desc));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(m->out_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CH[BLOCKS],
                                           hw_of(BLOCKS), hw_of(BLOCKS)));
    CHECK_CUDNN(cudnnCreateActivationDescriptor(&m->relu));
    CHECK_CUDNN(cudnnSetActivationDescriptor(m->relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    CHECK_CUDNN(cudnnCreatePoolingDescriptor(&m->pool));
    CHECK_CUDNN(cudnnSetPooling2dDescriptor(m->pool, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
    CHECK(cudaMalloc(&m->ws, m->ws_bytes));

    size_t nparams = 0;
    for (int k = 0; k < BLOCKS; k++) {
        m->off_w[k] = nparams;
        nparams += bench_align(filter_floats(k) * sizeof(float)) / sizeof(float);
        m->off_b[k] = nparams;
        nparams += bench_align((size_t)CH[k + 1] * sizeof(float)) / sizeof(float);
    }
    size_t nx = (size_t)IN_C * IN_HW * IN_HW;
    float *hp = (float *)bench_host_alloc(nparams * sizeof(float));
    float *hx = (float *)bench_host_alloc(nx * sizeof(float));
    memset(hp, 0, nparams * sizeof(float));
    uint64_t rng = 0x636e6e00a5a5f00dull;
    for (int k = 0; k < BLOCKS; k++) {
        float bound = 1.0f / sqrtf((float)(CH[k] * KS * KS));
        bench_fill_uniform(hp + m->off_w[k], filter_floats(k), &rng, -bound, bound);
        bench_fill_uniform(hp + m->off_b[k], (size_t)CH[k + 1], &rng, -bound, bound);
    }
    bench_fill_uniform(hx, nx, &rng, -1.0f, 1.0f);
    model_data_upload(&m->d, hp, nparams, hx, nx, keep_host);

    size_t arena_bytes = 0;
    for (int k = 0; k < BLOCKS; k++)
        arena_bytes += bench_align(conv_out_floats(k) * sizeof(float)) +
                       bench_align(pool_out_floats(k) * sizeof(float));
    model_data_arenas(&m->d, arena_bytes);
    for (int set = 0; set < MODEL_SETS; set++) {
        char *p = (char *)m->d.arena[set];
        for (int k = 0; k < BLOCKS; k++) {
            m->conv_out[set][k] = (float *)p;
            p += bench_align(conv_out_floats(k) * sizeof(float));
            m->pool_out[set][k] = (float *)p;
            p += bench_align(pool_out_floats(k) * sizeof(float));
        }
    }
    CHECK(cudaDeviceSynchronize());
    return m;
}

/* The stream is not used: the handle is bound to it. */
int cnn_step(void *ctx, int set, cudaStream_t, char *err, size_t errlen)
{
    cnn *m = (cnn *)ctx;
    const cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    const float *in = m->d.x;
    for (int k = 0; k < BLOCKS; k++) {
        float *c = m->conv_out[set][k], *p = m->pool_out[set][k];
        STEP_CUDNN(cudnnConvolutionForward(m->dnn, &ONE, m->in_desc[k], in, m->filt[k], m->d.params + m->off_w[k],
                                           m->conv[k], algo, m->ws, m->ws_bytes, &ZERO, m->cout_desc[k], c));
        STEP_CUDNN(cudnnAddTensor(m->dnn, &ONE, m->bias_desc[k], m->d.params + m->off_b[k], &ONE, m->cout_desc[k], c));
        STEP_CUDNN(cudnnActivationForward(m->dnn, m->relu, &ONE, m->cout_desc[k], c, &ZERO, m->cout_desc[k], c));
        STEP_CUDNN(cudnnPoolingForward(m->dnn, m->pool, &ONE, m->cout_desc[k], c, &ZERO,
                                       k + 1 < BLOCKS ? m->in_desc[k + 1] : m->out_desc, p));
        in = p;
    }
    return 0;
}

void cnn_output(void *ctx, int set, const float **out, size_t *count)
{
    cnn *m = (cnn *)ctx;
    *out = m->pool_out[set][BLOCKS - 1];
    *count = pool_out_floats(BLOCKS - 1);
}

void cnn_reference(void *ctx, double *ref)
{
    cnn *m = (cnn *)ctx;
    size_t most = conv_out_floats(0);
    double *in = (double *)bench_host_alloc(most * sizeof(double));
    double *c = (double *)bench_host_alloc(most * sizeof(double));
    for (size_t i = 0; i < (size_t)IN_C * IN_HW * IN_HW; i++) in[i] = m->d.host_x[i];
    for (int k = 0; k < BLOCKS; k++) {
        int hw = hw_of(k), cin = CH[k], cout = CH[k + 1];
        const float *w = m->d.host_params + m->off_w[k], *b = m->d.host_params + m->off_b[k];
        for (int o = 0; o < cout; o++)
            for (int y = 0; y < hw; y++)
                for (int x = 0; x < hw; x++) {
                    double acc = 0.0;
                    for (int ci = 0; ci < cin; ci++)
                        for (int dy = 0; dy < KS; dy++)
                            for (int dx = 0; dx < KS; dx++) {
                                int yy = y + dy - PAD, xx = x + dx - PAD;
                                if (yy < 0 || yy >= hw || xx < 0 || xx >= hw) continue;
                                acc += in[((size_t)ci * hw + yy) * hw + xx] *
                                       w[(((size_t)o * cin + ci) * KS + dy) * KS + dx];
                            }
                    acc += b[o];
                    c[((size_t)o * hw + y) * hw + x] = acc > 0.0 ? acc : 0.0;
                }
        int ph = hw / 2;
        double *p = k + 1 < BLOCKS ? in : ref; /* the input is no longer needed */
        for (int o = 0; o < cout; o++)
            for (int y = 0; y < ph; y++)
                for (int x = 0; x < ph; x++) {
                    double v = c[((size_t)o * hw + 2 * y) * hw + 2 * x];
                    for (int d = 1; d < 4; d++) {
                        double u = c[((size_t)o * hw + 2 * y + d / 2) * hw + 2 * x + d % 2];
                        v = u > v ? u : v;
                    }
                    p[((size_t)o * ph + y) * ph + x] = v;
                }
    }
    free(in);
    free(c);
}

void cnn_destroy(void *ctx)
{
    cnn *m = (cnn *)ctx;
    model_data_free(&m->d);
    CHECK(cudaFree(m->ws));
    for (int k = 0; k < BLOCKS; k++) {
        CHECK_CUDNN(cudnnDestroyTensorDescriptor(m->in_desc[k]));
        CHECK_CUDNN(cudnnDestroyTensorDescriptor(m->cout_desc[k]));
        CHECK_CUDNN(cudnnDestroyTensorDescriptor(m->bias_desc[k]));
        CHECK_CUDNN(cudnnDestroyFilterDescriptor(m->filt[k]));
        CHECK_CUDNN(cudnnDestroyConvolutionDescriptor(m->conv[k]));
    }
    CHECK_CUDNN(cudnnDestroyTensorDescriptor(m->out_desc));
    CHECK_CUDNN(cudnnDestroyActivationDescriptor(m->relu));
    CHECK_CUDNN(cudnnDestroyPoolingDescriptor(m->pool));
    CHECK_CUDNN(cudnnDestroy(m->dnn));
    free(m);
}

} // namespace

const model_desc_t model_cnn = {
    "cnn",
    "4 x [conv3x3 pad 1 + bias + ReLU + maxpool 2x2], channels 3-32-64-64-128, input 1x3x64x64 "
    "(output 1x128x4x4), batch 1, fp32: per block cudnnConvolutionForward (IMPLICIT_GEMM, FMA "
    "math) + cudnnAddTensor + cudnnActivationForward + cudnnPoolingForward",
    16,
    cnn_create,
    cnn_step,
    model_data_arena,
    cnn_output,
    cnn_reference,
    cnn_destroy,
    NULL, /* no kernels of its own to register: cgjit itself describes cudnnAddTensor and
           * cudnnActivationForward as elementwise (fused in modes default and max-autotune) */
};
