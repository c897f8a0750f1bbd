/*
 * workloads_mlp.cu — workload `mlp`: Linear(1024,1024)-ReLU-Linear(1024,1024)-ReLU-
 * Linear(1024,10), batch 128, fp32, with PyTorch's semantics (y = x W^T + b, W stored
 * [out][in] row-major, activations [batch][features] row-major).
 *
 * Per Linear: cublasSgemm_v2 computes x W^T (row-major through the column-major transposition:
 * Y^T = W X^T, i.e. C(out x batch) = op_T(W buffer, in x out) * X buffer (in x batch)) with
 * beta 0, then cudnnAddTensor adds the bias (a 1 x out x 1 x 1 tensor broadcast over the
 * batch x out x 1 x 1 output). ReLU: cudnnActivationForward in place. 8 calls per step.
 *
 * Math: fp32 without TF32: cuBLAS CUBLAS_DEFAULT_MATH (no tensor-op or TF32 flag: as PyTorch
 * with torch.backends.cuda.matmul.allow_tf32 = False), pointer mode host. The cuBLAS
 * workspace is set explicitly (allocated once; cublasSetWorkspace after cublasSetStream), so
 * that no call allocates and the step can be captured.
 *
 * Data: fixed seed; weights and biases uniform in +-1/sqrt(in) (PyTorch's Linear init), input
 * uniform in [-1, 1).
 */
#include "bench_common.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <math.h>
#include <string.h>

namespace
{

enum { BATCH = 128, IN = 1024, HID = 1024, OUT = 10, LAYERS = 3 };
const int DIM_IN[LAYERS] = {IN, HID, HID};
const int DIM_OUT[LAYERS] = {HID, HID, OUT};
const float ONE = 1.0f, ZERO = 0.0f;

struct mlp {
    model_data_t d; /* first: model_data_arena reads it */
    model_blas_t blas;
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t act_desc[LAYERS];  /* BATCH x out x 1 x 1 */
    cudnnTensorDescriptor_t bias_desc[LAYERS]; /* 1 x out x 1 x 1 */
    cudnnActivationDescriptor_t relu;
    float *w[LAYERS], *b[LAYERS];
    float *y[MODEL_SETS][LAYERS]; /* layer outputs: BATCH x out */
    size_t param_off_w[LAYERS], param_off_b[LAYERS];
};

void *mlp_create(cudaStream_t s, int keep_host)
{
    mlp *m = (mlp *)bench_host_calloc(sizeof *m);
    model_blas_create(&m->blas, s);
    CHECK_CUDNN(cudnnCreate(&m->dnn));
    CHECK_CUDNN(cudnnSetStream(m->dnn, s));
    for (int l = 0; l < LAYERS; l++) {
        CHECK_CUDNN(cudnnCreateTensorDescriptor(&m->act_desc[l]));
        CHECK_CUDNN(
            cudnnSetTensor4dDescriptor(m->act_desc[l], CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, BATCH, DIM_OUT[l], 1, 1));
        CHECK_CUDNN(cudnnCreateTensorDescriptor(&m->bias_desc[l]));
        CHECK_CUDNN(
            cudnnSetTensor4dDescriptor(m->bias_desc[l], CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, DIM_OUT[l], 1, 1));
    }
    CHECK_CUDNN(cudnnCreateActivationDescriptor(&m->relu));
    CHECK_CUDNN(cudnnSetActivationDescriptor(m->relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));

    size_t nparams = 0;
    for (int l = 0; l < LAYERS; l++) {
        m->param_off_w[l] = nparams;
        nparams += bench_align((size_t)DIM_OUT[l] * DIM_IN[l] * sizeof(float)) / sizeof(float);
        m->param_off_b[l] = nparams;
        nparams += bench_align((size_t)DIM_OUT[l] * sizeof(float)) / sizeof(float);
    }
    float *hp = (float *)bench_host_alloc(nparams * sizeof(float));
    float *hx = (float *)bench_host_alloc((size_t)BATCH * IN * sizeof(float));
    memset(hp, 0, nparams * sizeof(float));
    uint64_t rng = 0x6d6c7000d1b54a32ull;
    for (int l = 0; l < LAYERS; l++) {
        float bound = 1.0f / sqrtf((float)DIM_IN[l]);
        bench_fill_uniform(hp + m->param_off_w[l], (size_t)DIM_OUT[l] * DIM_IN[l], &rng, -bound, bound);
        bench_fill_uniform(hp + m->param_off_b[l], (size_t)DIM_OUT[l], &rng, -bound, bound);
    }
    bench_fill_uniform(hx, (size_t)BATCH * IN, &rng, -1.0f, 1.0f);
    model_data_upload(&m->d, hp, nparams, hx, (size_t)BATCH * IN, keep_host);
    for (int l = 0; l < LAYERS; l++) {
        m->w[l] = m->d.params + m->param_off_w[l];
        m->b[l] = m->d.params + m->param_off_b[l];
    }

    size_t arena_bytes = 0;
    for (int l = 0; l < LAYERS; l++) arena_bytes += bench_align((size_t)BATCH * DIM_OUT[l] * sizeof(float));
    model_data_arenas(&m->d, arena_bytes);
    for (int set = 0; set < MODEL_SETS; set++) {
        char *p = (char *)m->d.arena[set];
        for (int l = 0; l < LAYERS; l++) {
            m->y[set][l] = (float *)p;
            p += bench_align((size_t)BATCH * DIM_OUT[l] * sizeof(float));
        }
    }
    CHECK(cudaDeviceSynchronize());
    return m;
}

/* The stream is not used: the handles are bound to it. */
int mlp_step(void *ctx, int set, cudaStream_t, char *err, size_t errlen)
{
    mlp *m = (mlp *)ctx;
    const float *in = m->d.x;
    for (int l = 0; l < LAYERS; l++) {
        float *y = m->y[set][l];
        /* y (BATCH x out, row-major) = in (BATCH x in) W^T: column-major C(out x BATCH). */
        STEP_CUBLAS(cublasSgemm_v2(m->blas.h, CUBLAS_OP_T, CUBLAS_OP_N, DIM_OUT[l], BATCH, DIM_IN[l], &ONE, m->w[l],
                                   DIM_IN[l], in, DIM_IN[l], &ZERO, y, DIM_OUT[l]));
        STEP_CUDNN(cudnnAddTensor(m->dnn, &ONE, m->bias_desc[l], m->b[l], &ONE, m->act_desc[l], y));
        if (l + 1 < LAYERS)
            STEP_CUDNN(cudnnActivationForward(m->dnn, m->relu, &ONE, m->act_desc[l], y, &ZERO, m->act_desc[l], y));
        in = y;
    }
    return 0;
}

void mlp_output(void *ctx, int set, const float **out, size_t *count)
{
    mlp *m = (mlp *)ctx;
    *out = m->y[set][LAYERS - 1];
    *count = (size_t)BATCH * OUT;
}

void mlp_reference(void *ctx, double *ref)
{
    mlp *m = (mlp *)ctx;
    double *a = (double *)bench_host_alloc((size_t)BATCH * HID * sizeof(double));
    double *b = (double *)bench_host_alloc((size_t)BATCH * HID * sizeof(double));
    for (size_t i = 0; i < (size_t)BATCH * IN; i++) a[i] = m->d.host_x[i];
    for (int l = 0; l < LAYERS; l++) {
        const float *w = m->d.host_params + m->param_off_w[l];
        const float *bias = m->d.host_params + m->param_off_b[l];
        double *y = l + 1 < LAYERS ? b : ref;
        for (int n = 0; n < BATCH; n++)
            for (int o = 0; o < DIM_OUT[l]; o++) {
                double acc = 0.0;
                for (int i = 0; i < DIM_IN[l]; i++) acc += a[(size_t)n * DIM_IN[l] + i] * w[(size_t)o * DIM_IN[l] + i];
                acc += bias[o];
                if (l + 1 < LAYERS && acc < 0.0) acc = 0.0;
                y[(size_t)n * DIM_OUT[l] + o] = acc;
            }
        double *t = a;
        a = b;
        b = t;
    }
    free(a);
    free(b);
}

void mlp_destroy(void *ctx)
{
    mlp *m = (mlp *)ctx;
    model_data_free(&m->d);
    for (int l = 0; l < LAYERS; l++) {
        CHECK_CUDNN(cudnnDestroyTensorDescriptor(m->act_desc[l]));
        CHECK_CUDNN(cudnnDestroyTensorDescriptor(m->bias_desc[l]));
    }
    CHECK_CUDNN(cudnnDestroyActivationDescriptor(m->relu));
    CHECK_CUDNN(cudnnDestroy(m->dnn));
    model_blas_destroy(&m->blas);
    free(m);
}

} // namespace

const model_desc_t model_mlp = {
    "mlp",
    "Linear(1024,1024)-ReLU-Linear(1024,1024)-ReLU-Linear(1024,10), batch 128, fp32: "
    "3 cublasSgemm_v2 + 3 cudnnAddTensor (bias) + 2 cudnnActivationForward (ReLU)",
    8,
    mlp_create,
    mlp_step,
    model_data_arena,
    mlp_output,
    mlp_reference,
    mlp_destroy,
    NULL, /* no kernels of its own to register: cgjit itself describes cudnnAddTensor and
           * cudnnActivationForward as elementwise (fused in modes default and max-autotune) */
};
