/*
 * gpu_libs.cu — cgjit's library wrappers on a real GPU: `gpu_libs SCENARIO`, `gpu_libs --list`.
 *
 * cgjit exports the cuBLAS, cuBLASLt and cuDNN entry points below; inside a traced step each such
 * call is one semantic op. In replay, a call whose arguments (scalars, host-mode alpha/beta
 * values, descriptor contents, the handle's stream and modes) equal the recorded ones is
 * absorbed: the library is not called, its kernels are replayed from the graph with pointer
 * arguments patched. A call whose arguments differ runs the library and the trace learns it.
 *
 * Each scenario is one step function: it writes the step's inputs from the step index k (a small
 * kernel), makes library calls on one created non-blocking stream, and leaves its outputs in
 * device buffers (and, for host-mode results, in host floats). It is run STEPS times eagerly, no
 * step active (cgjit is linked, the calls pass through), on buffer set E, the outputs copied to
 * the host after every step; then STEPS times between cgj_trace_begin("lib_<scenario>") and
 * cgj_trace_end() on buffer set R (other allocations, so other addresses), and every step's
 * outputs are compared bitwise (memcmp) with eager step k's. Then the scenario's expectations on
 * cgj_stats and cgj_trace_info are checked: a scenario of one kind of call must be in REPLAY with
 * at least STEPS/2 replays, and replay must have absorbed at least (STEPS - 20) * calls-per-step
 * library calls. The others expect less (check_expectations): sdot_host, whose results reach the
 * host inside the step, only library calls; alpha_changes also calls replay relearned or left;
 * desc_modified, handle_recreate and pointers_alternate some absorbed calls.
 *
 * GPU_LIBS_CORRECTNESS_ONLY=1 checks the results alone and prints the expectations unchecked,
 * for a cgjit built without the library wrappers.
 *
 * Exit status 0 with the last line `PASS <scenario>` (or `SKIP <scenario> <reason>` for a cuDNN
 * scenario where cgjit's tests were built without cuDNN); otherwise the problems, a last line
 * `FAIL <scenario> <first problem>` and exit status 1; 2 for a bad command line. A library call
 * that returns an error status is a failure naming the call and the status.
 *
 * All data are fp32; cuBLAS runs with CUBLAS_DEFAULT_MATH (no TF32), cuDNN convolutions with
 * CUDNN_FMA_MATH, and the cuDNN graph API's engine is chosen among those without tensor-core,
 * down-converting or nondeterministic numerical notes where one exists, so that every step's
 * results are exactly reproducible.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#ifndef GPU_LIBS_NO_CUDNN
#include <cudnn.h>
#endif

#include "gpu_common.h"

enum {
    STEPS = 200,
    NBUF = 16,         /* device buffers per set */
    BUF_FLOATS = 8192, /* floats per buffer */
    NHOST = 4,         /* host floats a step may leave as outputs */
    BLOCK = 256,
    GRID = 32
};
static const size_t BUF_BYTES = BUF_FLOATS * sizeof(float);

/* Matrix shapes (column-major, as cuBLAS): C (M x N) = A (M x K) * B (K x N). */
enum { M = 64, N = 48, K = 40 };
/* Batched: BATCH products of BM x BK by BK x BN. */
enum { BATCH = 4, BM = 32, BN = 24, BK = 16 };
/* Level 1 vectors. */
enum { VEC = 4096 };

static const float ONE = 1.0f, ZERO = 0.0f, HALF = 0.5f, QUARTER = 0.25f, THREE_QUARTERS = 0.75f;

static bool correctness_only; /* GPU_LIBS_CORRECTNESS_ONLY=1 */

static void fail_now(const char *msg)
{
    fail_exit(msg, NULL);
}

/* A library call that must succeed; a failure ends the scenario, naming the call as written and
 * its status (cuda_check.h, through gpu_common.h). BLAS: cuBLAS and cuBLASLt (cublasStatus_t).
 * Object-like aliases, so that the checks stringize the call before its macros (cublas_v2.h's
 * cublasCreate -> cublasCreate_v2 ...) are expanded. */
#define BLAS CHECK_CUBLAS
#ifndef GPU_LIBS_NO_CUDNN
#define DNN CHECK_CUDNN
#endif

/* ---- kernels (grid-stride) ------------------------------------------------------------------ */

/* The step's inputs: values in [-1, 1) on a 1/512 grid, a hash of (i, step, salt). */
__global__ void k_fill(float *x, int n, int step, int salt)
{
    FOR_EACH(i, n)
    {
        unsigned h = (unsigned)i * 2654435761u + (unsigned)step * 40503u + (unsigned)salt * 2246822519u;
        h ^= h >> 15;
        h *= 0x2c1b3c6du;
        h ^= h >> 12;
        h *= 0x297a2d39u;
        h ^= h >> 15;
        x[i] = (float)(h & 1023u) / 512.0f - 1.0f;
    }
}

__global__ void k_scale(float *y, const float *x, float a, int n)
{
    FOR_EACH(i, n) y[i] = a * x[i];
}

__global__ void k_positive(float *x, int n)
{
    FOR_EACH(i, n) x[i] = fabsf(x[i]) + 0.5f;
}

/* ---- the libraries' state ------------------------------------------------------------------- */

enum { NEED_BLAS = 1, NEED_LT = 2, NEED_DNN = 4 };
static const size_t BLAS_WS_BYTES = 4u << 20, LT_WS_BYTES = 4u << 20;

static struct libs {
    cudaStream_t stream; /* every call of every step goes to this created stream */
    cublasHandle_t blas;
    void *blas_ws;
    cublasLtHandle_t lt;
    void *lt_ws;
    cublasLtMatmulDesc_t mm_plain, mm_relu_bias;
    cublasLtMatrixLayout_t la, lb, lc; /* M x K, K x N, M x N */
#ifndef GPU_LIBS_NO_CUDNN
    cudnnHandle_t dnn;
    void *dnn_ws;
    size_t dnn_ws_bytes;
    cudnnTensorDescriptor_t t_x;     /* 2 x 4 x 16 x 16: convolution input, pooling input */
    cudnnTensorDescriptor_t t_y;     /* 2 x 8 x 16 x 16: convolution output, pooling input */
    cudnnTensorDescriptor_t t_bias8; /* 1 x 8 x 1 x 1 */
    cudnnTensorDescriptor_t t_act;   /* 2 x 8 x 8 x 8 */
    cudnnTensorDescriptor_t t_soft;  /* 2 x 10 x 4 x 4 */
    cudnnTensorDescriptor_t t_bn;    /* derived from t_act, spatial */
    cudnnTensorDescriptor_t t_mod;   /* desc_modified: one descriptor, several shapes */
    cudnnFilterDescriptor_t f_w;     /* 8 x 4 x 3 x 3 */
    cudnnConvolutionDescriptor_t conv;
    cudnnActivationDescriptor_t relu, tanh_;
    cudnnOpTensorDescriptor_t op_add, op_mul;
    cudnnPoolingDescriptor_t pool_max, pool_avg;
    cudnnBackendDescriptor_t plan; /* backend_execute: a convolution's execution plan */
    void *plan_ws;
    int64_t plan_ws_bytes;
#endif
} g;

static void blas_create(void)
{
    BLAS(cublasCreate(&g.blas));
    BLAS(cublasSetStream(g.blas, g.stream));
    /* After cublasSetStream, which resets the workspace: no call allocates one of its own. */
    BLAS(cublasSetWorkspace(g.blas, g.blas_ws, BLAS_WS_BYTES));
    BLAS(cublasSetMathMode(g.blas, CUBLAS_DEFAULT_MATH));
    BLAS(cublasSetPointerMode(g.blas, CUBLAS_POINTER_MODE_HOST));
}

static void lt_create(void)
{
    BLAS(cublasLtCreate(&g.lt));
    CHECK(cudaMalloc(&g.lt_ws, LT_WS_BYTES));
    BLAS(cublasLtMatmulDescCreate(&g.mm_plain, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BLAS(cublasLtMatmulDescCreate(&g.mm_relu_bias, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
    BLAS(cublasLtMatmulDescSetAttribute(g.mm_relu_bias, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    BLAS(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_32F, M, K, M));
    BLAS(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_32F, K, N, K));
    BLAS(cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_32F, M, N, M));
}

#ifndef GPU_LIBS_NO_CUDNN
static const cudnnConvolutionFwdAlgo_t CONV_ALGO = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
static const cudnnConvolutionFwdAlgo_t CONV_BIAS_ALGO = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;

static void dnn_create_handle(void)
{
    DNN(cudnnCreate(&g.dnn));
    DNN(cudnnSetStream(g.dnn, g.stream));
}

static void tensor4d(cudnnTensorDescriptor_t *t, int n, int c, int h, int w)
{
    DNN(cudnnCreateTensorDescriptor(t));
    DNN(cudnnSetTensor4dDescriptor(*t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

static void dnn_create(void)
{
    dnn_create_handle();
    tensor4d(&g.t_x, 2, 4, 16, 16);
    tensor4d(&g.t_y, 2, 8, 16, 16);
    tensor4d(&g.t_bias8, 1, 8, 1, 1);
    tensor4d(&g.t_act, 2, 8, 8, 8);
    tensor4d(&g.t_soft, 2, 10, 4, 4);
    DNN(cudnnCreateTensorDescriptor(&g.t_bn));
    DNN(cudnnDeriveBNTensorDescriptor(g.t_bn, g.t_act, CUDNN_BATCHNORM_SPATIAL));
    DNN(cudnnCreateTensorDescriptor(&g.t_mod));
    DNN(cudnnSetTensor4dDescriptor(g.t_mod, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 8));
    DNN(cudnnCreateFilterDescriptor(&g.f_w));
    DNN(cudnnSetFilter4dDescriptor(g.f_w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 8, 4, 3, 3));
    DNN(cudnnCreateConvolutionDescriptor(&g.conv));
    DNN(cudnnSetConvolution2dDescriptor(g.conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionMathType(g.conv, CUDNN_FMA_MATH));
    int on, oc, oh, ow;
    DNN(cudnnGetConvolution2dForwardOutputDim(g.conv, g.t_x, g.f_w, &on, &oc, &oh, &ow));
    if (on != 2 || oc != 8 || oh != 16 || ow != 16) {
        char msg[128];
        snprintf(msg, sizeof msg, "convolution output is %dx%dx%dx%d, expected 2x8x16x16", on, oc, oh, ow);
        fail_now(msg);
    }
    g.dnn_ws_bytes = 256;
    const cudnnConvolutionFwdAlgo_t algos[2] = {CONV_ALGO, CONV_BIAS_ALGO};
    for (int a = 0; a < 2; a++) {
        size_t ws = 0;
        DNN(cudnnGetConvolutionForwardWorkspaceSize(g.dnn, g.t_x, g.f_w, g.conv, g.t_y, algos[a], &ws));
        if (ws > g.dnn_ws_bytes) g.dnn_ws_bytes = ws;
    }
    CHECK(cudaMalloc(&g.dnn_ws, g.dnn_ws_bytes));
    DNN(cudnnCreateActivationDescriptor(&g.relu));
    DNN(cudnnSetActivationDescriptor(g.relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    DNN(cudnnCreateActivationDescriptor(&g.tanh_));
    DNN(cudnnSetActivationDescriptor(g.tanh_, CUDNN_ACTIVATION_TANH, CUDNN_PROPAGATE_NAN, 0.0));
    DNN(cudnnCreateOpTensorDescriptor(&g.op_add));
    DNN(cudnnSetOpTensorDescriptor(g.op_add, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN));
    DNN(cudnnCreateOpTensorDescriptor(&g.op_mul));
    DNN(cudnnSetOpTensorDescriptor(g.op_mul, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN));
    DNN(cudnnCreatePoolingDescriptor(&g.pool_max));
    DNN(cudnnSetPooling2dDescriptor(g.pool_max, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
    DNN(cudnnCreatePoolingDescriptor(&g.pool_avg));
    DNN(cudnnSetPooling2dDescriptor(g.pool_avg, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_PROPAGATE_NAN, 3, 3,
                                    1, 1, 2, 2));
}
#endif

static void libs_create(unsigned needs)
{
    CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    if (needs & NEED_BLAS) {
        CHECK(cudaMalloc(&g.blas_ws, BLAS_WS_BYTES));
        blas_create();
    }
    if (needs & NEED_LT) lt_create();
#ifndef GPU_LIBS_NO_CUDNN
    if (needs & NEED_DNN) dnn_create();
#endif
}

/* ---- buffer sets ---------------------------------------------------------------------------- */

typedef struct set {
    float *d[NBUF];    /* device buffers, BUF_FLOATS each */
    void **ptrs;       /* device array of 16 pointers (gemm_batched_ex) */
    float host[NHOST]; /* host outputs of a step */
} set_t;

static void fill(float *x, int n, int step, int salt)
{
    k_fill<<<GRID, BLOCK, 0, g.stream>>>(x, n, step, salt);
    CHECK(cudaGetLastError());
}

static void set_init(set_t *s, const float *init, void (*init_set)(set_t *))
{
    for (int b = 0; b < NBUF; b++) {
        CHECK(cudaMalloc((void **)&s->d[b], BUF_BYTES));
        CHECK(cudaMemcpy(s->d[b], init + (size_t)b * BUF_FLOATS, BUF_BYTES, cudaMemcpyHostToDevice));
    }
    CHECK(cudaMalloc((void **)&s->ptrs, 16 * sizeof(void *)));
    CHECK(cudaMemset(s->ptrs, 0, 16 * sizeof(void *)));
    memset(s->host, 0, sizeof s->host);
    if (init_set) init_set(s);
    CHECK(cudaDeviceSynchronize());
}

static void set_free(set_t *s)
{
    for (int b = 0; b < NBUF; b++) CHECK(cudaFree(s->d[b]));
    CHECK(cudaFree(s->ptrs));
}

/* ---- cuBLAS scenarios ----------------------------------------------------------------------- */

/* sgemm: C0 = A B (NN, beta 0); C1 = 1/4 A2^T B + 1/2 C1 (TN, accumulating). */
static void step_sgemm(set_t *s, int k)
{
    float *A = s->d[2], *B = s->d[3], *A2 = s->d[4];
    fill(A, M * K, k, 1);
    BLAS(cublasSgemm_v2(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &ONE, A, M, B, K, &ZERO, s->d[0], M));
    BLAS(cublasSgemm_v2(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &QUARTER, A2, K, B, K, &HALF, s->d[1], M));
}

/* gemm_ex: C = A B + 1/2 C through cublasGemmEx, fp32 in, out and compute. */
static void step_gemm_ex(set_t *s, int k)
{
    float *A = s->d[2], *B = s->d[3];
    fill(A, M * K, k, 2);
    BLAS(cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &ONE, A, CUDA_R_32F, M, B, CUDA_R_32F, K, &HALF,
                      s->d[0], CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* sgemm_strided_batched: BATCH products C_i = A_i B_i^T, B stored BN x BK. */
static void step_sgemm_strided_batched(set_t *s, int k)
{
    float *A = s->d[2], *B = s->d[3];
    fill(A, BATCH * BM * BK, k, 3);
    BLAS(cublasSgemmStridedBatched(g.blas, CUBLAS_OP_N, CUBLAS_OP_T, BM, BN, BK, &ONE, A, BM, BM * BK, B, BN, BN * BK,
                                   &ZERO, s->d[0], BM, BM * BN, BATCH));
}

/* gemm_strided_batched_ex: C_i = A_i^T B_i + 1/4 C_i, A stored BK x BM. */
static void step_gemm_strided_batched_ex(set_t *s, int k)
{
    float *A = s->d[2], *B = s->d[3];
    fill(A, BATCH * BM * BK, k, 4);
    BLAS(cublasGemmStridedBatchedEx(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, BM, BN, BK, &ONE, A, CUDA_R_32F, BK, BM * BK, B,
                                    CUDA_R_32F, BK, BK * BN, &QUARTER, s->d[0], CUDA_R_32F, BM, BM * BN, BATCH,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* gemm_batched_ex: pointer arrays in device memory, written once per set: A_i from d[2], B_i from
 * d[3] in reverse order, C_i into d[0] with a gap, so that the arrays are not one stride. */
static void init_gemm_batched_ex(set_t *s)
{
    void *h[16] = {0};
    for (int i = 0; i < BATCH; i++) {
        h[i] = s->d[2] + i * BM * BK;
        h[BATCH + i] = s->d[3] + (BATCH - 1 - i) * BK * BN;
        h[2 * BATCH + i] = s->d[0] + i * (BM * BN + 64);
    }
    CHECK(cudaMemcpy(s->ptrs, h, sizeof h, cudaMemcpyHostToDevice));
}

static void step_gemm_batched_ex(set_t *s, int k)
{
    fill(s->d[2], BATCH * BM * BK, k, 5);
    BLAS(cublasGemmBatchedEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, BM, BN, BK, &ONE, (const void *const *)s->ptrs,
                             CUDA_R_32F, BM, (const void *const *)(s->ptrs + BATCH), CUDA_R_32F, BK, &HALF,
                             (void *const *)(s->ptrs + 2 * BATCH), CUDA_R_32F, BM, BATCH, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
}

/* sgemv: y0 = A x (M), y1 = A^T z + 1/2 y1 (K). */
static void step_sgemv(set_t *s, int k)
{
    float *x = s->d[2], *A = s->d[3], *z = s->d[4];
    fill(x, K, k, 6);
    fill(z, M, k, 7);
    BLAS(cublasSgemv_v2(g.blas, CUBLAS_OP_N, M, K, &ONE, A, M, x, 1, &ZERO, s->d[0], 1));
    BLAS(cublasSgemv_v2(g.blas, CUBLAS_OP_T, M, K, &ONE, A, M, z, 1, &HALF, s->d[1], 1));
}

/* saxpy: y += 1/2 x. */
static void step_saxpy(set_t *s, int k)
{
    fill(s->d[2], VEC, k, 8);
    BLAS(cublasSaxpy_v2(g.blas, VEC, &HALF, s->d[2], 1, s->d[0], 1));
}

/* sscal: x = 3/4 x, x written first. */
static void step_sscal(set_t *s, int k)
{
    fill(s->d[0], VEC, k, 9);
    BLAS(cublasSscal_v2(g.blas, VEC, &THREE_QUARTERS, s->d[0], 1));
}

/* scopy: every other float of the input into the first VEC/2 floats of the output. */
static void step_scopy(set_t *s, int k)
{
    fill(s->d[2], VEC, k, 10);
    BLAS(cublasScopy_v2(g.blas, VEC / 2, s->d[2], 2, s->d[0], 1));
}

/* sdot, device pointer mode: the result into device memory. */
static void setup_device_pointer_mode(void)
{
    BLAS(cublasSetPointerMode(g.blas, CUBLAS_POINTER_MODE_DEVICE));
}

static void step_sdot(set_t *s, int k)
{
    fill(s->d[2], VEC, k, 11);
    BLAS(cublasSdot_v2(g.blas, VEC, s->d[2], 1, s->d[3], 1, s->d[0] + 5));
}

/* sdot_host, host pointer mode: the result into host memory (the call synchronizes inside the
 * step), and the value then feeds a kernel and a second dot. */
static void step_sdot_host(set_t *s, int k)
{
    float h0 = 0.0f, h1 = 0.0f;
    fill(s->d[2], VEC, k, 12);
    BLAS(cublasSdot_v2(g.blas, VEC, s->d[2], 1, s->d[3], 1, &h0));
    k_scale<<<GRID, BLOCK, 0, g.stream>>>(s->d[0], s->d[2], h0 * (1.0f / 64.0f), VEC);
    CHECK(cudaGetLastError());
    BLAS(cublasSdot_v2(g.blas, VEC, s->d[0], 1, s->d[4], 1, &h1));
    s->host[0] = h0;
    s->host[1] = h1;
}

/* The Ex forms, fp32 throughout. */
static void step_axpy_ex(set_t *s, int k)
{
    fill(s->d[2], VEC, k, 13);
    BLAS(cublasAxpyEx(g.blas, VEC, &QUARTER, CUDA_R_32F, s->d[2], CUDA_R_32F, 1, s->d[0], CUDA_R_32F, 1, CUDA_R_32F));
}

static void step_scal_ex(set_t *s, int k)
{
    fill(s->d[0], VEC, k, 14);
    BLAS(cublasScalEx(g.blas, VEC / 2, &THREE_QUARTERS, CUDA_R_32F, s->d[0], CUDA_R_32F, 2, CUDA_R_32F));
}

static void step_copy_ex(set_t *s, int k)
{
    fill(s->d[2], VEC, k, 15);
    BLAS(cublasCopyEx(g.blas, VEC / 2, s->d[2], CUDA_R_32F, 1, s->d[0], CUDA_R_32F, 2));
}

static void step_dot_ex(set_t *s, int k)
{
    fill(s->d[2], VEC, k, 16);
    BLAS(cublasDotEx(g.blas, VEC, s->d[2], CUDA_R_32F, 1, s->d[3], CUDA_R_32F, 1, s->d[0] + 3, CUDA_R_32F, CUDA_R_32F));
}

/* ---- cuBLASLt scenarios --------------------------------------------------------------------- */

/* lt_matmul: D = A B + 1/2 D (C and D the same matrix), no epilogue; algo NULL (cuBLASLt's own
 * heuristics), with a workspace. */
static void step_lt_matmul(set_t *s, int k)
{
    float *A = s->d[2], *B = s->d[3];
    fill(A, M * K, k, 17);
    BLAS(cublasLtMatmul(g.lt, g.mm_plain, &ONE, A, g.la, B, g.lb, &HALF, s->d[0], g.lc, s->d[0], g.lc, NULL, g.lt_ws,
                        LT_WS_BYTES, g.stream));
}

/* lt_matmul_relu_bias: D = relu(A B + bias) with CUBLASLT_EPILOGUE_RELU_BIAS; the bias pointer
 * is set into the descriptor every step, as a framework does. */
static void lt_relu_bias(const float *A, const float *B, const float *bias, float *D)
{
    BLAS(cublasLtMatmulDescSetAttribute(g.mm_relu_bias, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    BLAS(cublasLtMatmul(g.lt, g.mm_relu_bias, &ONE, A, g.la, B, g.lb, &ZERO, D, g.lc, D, g.lc, NULL, g.lt_ws,
                        LT_WS_BYTES, g.stream));
}

static void step_lt_matmul_relu_bias(set_t *s, int k)
{
    float *A = s->d[2], *B = s->d[3], *bias = s->d[4];
    fill(A, M * K, k, 18);
    fill(bias, M, k, 19);
    lt_relu_bias(A, B, bias, s->d[0]);
}

/* ---- behaviour: alpha_changes (cuBLAS only) ------------------------------------------------ */

/* alpha_changes: host pointer mode, alpha = 1 + (k / 7) % 3 for a saxpy and an sgemm. */
static void step_alpha_changes(set_t *s, int k)
{
    float alpha = 1.0f + (float)((k / 7) % 3);
    float *x = s->d[2], *A = s->d[3], *B = s->d[4];
    fill(x, VEC, k, 32);
    fill(A, M * K, k, 33);
    BLAS(cublasSaxpy_v2(g.blas, VEC, &alpha, x, 1, s->d[0], 1));
    BLAS(cublasSgemm_v2(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, A, M, B, K, &ZERO, s->d[1], M));
}

/* ---- cuDNN scenarios ------------------------------------------------------------------------ */

#ifndef GPU_LIBS_NO_CUDNN
/* conv_forward: y = conv(x, w), 3x3, pad 1, implicit GEMM, FMA math. */
static void step_conv_forward(set_t *s, int k)
{
    float *x = s->d[2], *w = s->d[3];
    fill(x, 2 * 4 * 16 * 16, k, 20);
    DNN(cudnnConvolutionForward(g.dnn, &ONE, g.t_x, x, g.f_w, w, g.conv, CONV_ALGO, g.dnn_ws, g.dnn_ws_bytes, &ZERO,
                                g.t_y, s->d[0]));
}

/* conv_bias_act: y = relu(conv(x, w) + 1/2 z + bias). */
static void step_conv_bias_act(set_t *s, int k)
{
    float *x = s->d[2], *w = s->d[3], *z = s->d[4], *bias = s->d[5];
    fill(x, 2 * 4 * 16 * 16, k, 21);
    fill(z, 2 * 8 * 16 * 16, k, 22);
    DNN(cudnnConvolutionBiasActivationForward(g.dnn, &ONE, g.t_x, x, g.f_w, w, g.conv, CONV_BIAS_ALGO, g.dnn_ws,
                                              g.dnn_ws_bytes, &HALF, g.t_y, z, g.t_bias8, bias, g.relu, g.t_y,
                                              s->d[0]));
}

/* activation: y0 = relu(x); y1 = tanh(x) + 1/4 y1. */
static void step_activation(set_t *s, int k)
{
    float *x = s->d[2];
    fill(x, 1024, k, 23);
    DNN(cudnnActivationForward(g.dnn, g.relu, &ONE, g.t_act, x, &ZERO, g.t_act, s->d[0]));
    DNN(cudnnActivationForward(g.dnn, g.tanh_, &ONE, g.t_act, x, &QUARTER, g.t_act, s->d[1]));
}

/* op_tensor: c0 = a + 1/2 b (b 1 x 8 x 1 x 1, broadcast); c1 = a * b2 + 1/2 c1. */
static void step_op_tensor(set_t *s, int k)
{
    float *a = s->d[2], *b = s->d[3], *b2 = s->d[4];
    fill(a, 1024, k, 24);
    DNN(cudnnOpTensor(g.dnn, g.op_add, &ONE, g.t_act, a, &HALF, g.t_bias8, b, &ZERO, g.t_act, s->d[0]));
    DNN(cudnnOpTensor(g.dnn, g.op_mul, &ONE, g.t_act, a, &ONE, g.t_act, b2, &HALF, g.t_act, s->d[1]));
}

/* add_tensor: c = bias + 1/2 c, the bias (1 x 8 x 1 x 1) broadcast and new every step. */
static void step_add_tensor(set_t *s, int k)
{
    float *bias = s->d[2];
    fill(bias, 8, k, 25);
    DNN(cudnnAddTensor(g.dnn, &ONE, g.t_bias8, bias, &HALF, g.t_act, s->d[0]));
}

/* scale_tensor: y = 3/4 y, y written first. */
static void step_scale_tensor(set_t *s, int k)
{
    fill(s->d[0], 1024, k, 26);
    DNN(cudnnScaleTensor(g.dnn, g.t_act, s->d[0], &THREE_QUARTERS));
}

/* softmax: over the 10 channels of 2 x 10 x 4 x 4. */
static void step_softmax(set_t *s, int k)
{
    float *x = s->d[2];
    fill(x, 320, k, 27);
    DNN(cudnnSoftmaxForward(g.dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &ONE, g.t_soft, x, &ZERO,
                            g.t_soft, s->d[0]));
}

/* pooling: 2x2 max, stride 2; 3x3 average with padding 1, stride 2; 2x8x16x16 -> 2x8x8x8. */
static void step_pooling(set_t *s, int k)
{
    float *x = s->d[2];
    fill(x, 2 * 8 * 16 * 16, k, 28);
    DNN(cudnnPoolingForward(g.dnn, g.pool_max, &ONE, g.t_y, x, &ZERO, g.t_act, s->d[0]));
    DNN(cudnnPoolingForward(g.dnn, g.pool_avg, &ONE, g.t_y, x, &ZERO, g.t_act, s->d[1]));
}

/* batchnorm_inference: spatial, running mean and (positive) variance fixed per set. */
static void init_batchnorm(set_t *s)
{
    k_positive<<<1, 32>>>(s->d[6], 8);
    CHECK(cudaGetLastError());
}

static void step_batchnorm_inference(set_t *s, int k)
{
    float *x = s->d[2];
    fill(x, 1024, k, 29);
    DNN(cudnnBatchNormalizationForwardInference(g.dnn, CUDNN_BATCHNORM_SPATIAL, &ONE, &ZERO, g.t_act, x, g.t_act,
                                                s->d[0], g.t_bn, s->d[3], s->d[4], s->d[5], s->d[6], 1e-5));
}

/* backend_execute: the graph API. A convolution forward (x 2x4x16x16, w 8x4x3x3, y 2x8x16x16,
 * cross-correlation, pad 1) as an operation graph, an execution plan from heuristics mode A,
 * executed with a variant pack that is built for every call (as cudnn-frontend does). */
enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

static cudnnBackendDescriptor_t be_tensor(int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w)
{
    cudnnBackendDescriptor_t t;
    int64_t dims[4] = {n, c, h, w}, strides[4] = {c * h * w, h * w, w, 1}, align = 16;
    cudnnDataType_t dt = CUDNN_DATA_FLOAT;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    DNN(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    DNN(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    DNN(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    DNN(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    DNN(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    DNN(cudnnBackendFinalize(t));
    return t;
}

/* 1 if the engine of cfg has none of the notes that would make fp32 results inexact or
 * irreproducible, and needs no runtime compilation. */
static int engine_is_plain(cudnnBackendDescriptor_t cfg)
{
    cudnnBackendDescriptor_t engine;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine));
    int64_t count = 0;
    int plain = 1;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine) !=
            CUDNN_STATUS_SUCCESS ||
        count != 1) {
        DNN(cudnnBackendDestroyDescriptor(engine));
        return 0;
    }
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    count = 0;
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes) == CUDNN_STATUS_SUCCESS) {
        for (int64_t i = 0; i < count; i++)
            if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
                notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
                notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
                plain = 0;
    }
    cudnnBackendBehaviorNote_t behaviour[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    count = 0;
    if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                 CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, behaviour) == CUDNN_STATUS_SUCCESS) {
        for (int64_t i = 0; i < count; i++)
            if (behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) plain = 0;
    }
    DNN(cudnnBackendDestroyDescriptor(engine));
    return plain;
}

static void setup_backend(void)
{
    cudnnBackendDescriptor_t x = be_tensor(UID_X, 2, 4, 16, 16), w = be_tensor(UID_W, 8, 4, 3, 3),
                             y = be_tensor(UID_Y, 2, 8, 16, 16);
    cudnnBackendDescriptor_t conv, op, graph, heur;
    int64_t dims = 2, pad[2] = {1, 1}, one[2] = {1, 1};
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv));
    DNN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct));
    DNN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    DNN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
    DNN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one));
    DNN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, one));
    DNN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    DNN(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
    DNN(cudnnBackendFinalize(conv));

    float alpha = 1.0f, beta = 0.0f;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &op));
    DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
    DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &conv));
    DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
    DNN(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
    DNN(cudnnBackendFinalize(op));

    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    DNN(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g.dnn));
    DNN(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    DNN(cudnnBackendFinalize(graph));

    cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    DNN(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &graph));
    DNN(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode));
    DNN(cudnnBackendFinalize(heur));
    int64_t nres = 0;
    DNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &nres, NULL));
    if (nres <= 0) fail_now("cuDNN heuristics found no engine configuration for the convolution graph");
    if (nres > 64) nres = 64;
    cudnnBackendDescriptor_t cfgs[64];
    for (int64_t i = 0; i < nres; i++) DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    int64_t got = 0;
    DNN(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nres, &got, cfgs));
    /* First pass: plain engines only; second: any that finalizes. */
    g.plan = NULL;
    int chosen = -1, pass_used = -1;
    for (int pass = 0; pass < 2 && !g.plan; pass++)
        for (int64_t i = 0; i < got && !g.plan; i++) {
            if (pass == 0 && !engine_is_plain(cfgs[i])) continue;
            cudnnBackendDescriptor_t plan;
            DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
            DNN(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g.dnn));
            DNN(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         1, &cfgs[i]));
            if (cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS) {
                g.plan = plan;
                chosen = (int)i;
                pass_used = pass;
            } else {
                DNN(cudnnBackendDestroyDescriptor(plan));
            }
        }
    if (!g.plan) fail_now("no execution plan of the cuDNN heuristics' engine configurations finalized");
    int64_t n = 0;
    DNN(cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                 &g.plan_ws_bytes));
    CHECK(cudaMalloc(&g.plan_ws, g.plan_ws_bytes > 256 ? (size_t)g.plan_ws_bytes : 256));
    printf("backend: %lld engine configurations, plan from #%d (%s), workspace %lld bytes\n", (long long)got, chosen,
           pass_used == 0 ? "no tensor-core, down-convert or nondeterministic note" : "any: no plain engine",
           (long long)g.plan_ws_bytes);
    for (int64_t i = 0; i < nres; i++) DNN(cudnnBackendDestroyDescriptor(cfgs[i]));
    DNN(cudnnBackendDestroyDescriptor(heur));
    /* The plan keeps what it needs of the graph. */
}

static void step_backend_execute(set_t *s, int k)
{
    float *x = s->d[2], *w = s->d[3];
    fill(x, 2 * 4 * 16 * 16, k, 30);
    void *ptrs[3] = {x, w, s->d[0]};
    int64_t uids[3] = {UID_X, UID_W, UID_Y};
    cudnnBackendDescriptor_t pack;
    DNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    DNN(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs));
    DNN(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids));
    DNN(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &g.plan_ws));
    DNN(cudnnBackendFinalize(pack));
    DNN(cudnnBackendExecute(g.dnn, g.plan, pack));
    DNN(cudnnBackendDestroyDescriptor(pack));
}

/* ---- behaviour scenarios -------------------------------------------------------------------- */

/* desc_modified: one tensor descriptor, t_mod, for three calls of one step with different
 * contents: 1x1x4x8 packed for an add, then 1x1x8x4 with strides (64, 64, 8, 2) (every other
 * float of 8 rows of 8) for a ReLU, then 1x1x4x8 again for a second add. A call replayed with
 * the contents of another would touch other floats. Between steps, outside them, the program sets
 * the descriptor to 1x2x4x4 and back to 1x1x4x8. */
static void desc_packed(void)
{
    DNN(cudnnSetTensor4dDescriptor(g.t_mod, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 4, 8));
}

static void between_desc_modified(int k)
{
    (void)k;
    DNN(cudnnSetTensor4dDescriptor(g.t_mod, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 2, 4, 4));
    desc_packed();
}

static void step_desc_modified(set_t *s, int k)
{
    float *x = s->d[2];
    fill(x, 128, k, 31);
    DNN(cudnnAddTensor(g.dnn, &ONE, g.t_mod, x, &HALF, g.t_mod, s->d[0]));
    DNN(cudnnSetTensor4dDescriptorEx(g.t_mod, CUDNN_DATA_FLOAT, 1, 1, 8, 4, 64, 64, 8, 2));
    DNN(cudnnActivationForward(g.dnn, g.relu, &ONE, g.t_mod, x, &ZERO, g.t_mod, s->d[1]));
    desc_packed();
    DNN(cudnnAddTensor(g.dnn, &HALF, g.t_mod, x + 64, &ONE, g.t_mod, s->d[0] + 32));
}

/* handle_recreate: every 10 steps, outside the step, the cuBLAS and cuDNN handles are destroyed
 * and created again (stream, workspace and modes set again): at k % 20 == 0 the old ones are
 * destroyed first (the new ones may get the same addresses), at k % 20 == 10 the new ones are
 * created first (other addresses). */
static void between_handle_recreate(int k)
{
    if (k % 10) return;
    cublasHandle_t old_blas = g.blas;
    cudnnHandle_t old_dnn = g.dnn;
    bool create_first = k % 20 == 10;
    if (!create_first) {
        BLAS(cublasDestroy(old_blas));
        DNN(cudnnDestroy(old_dnn));
    }
    blas_create();
    dnn_create_handle();
    if (create_first) {
        BLAS(cublasDestroy(old_blas));
        DNN(cudnnDestroy(old_dnn));
    }
}

static void step_handle_recreate(set_t *s, int k)
{
    float *in = s->d[4], *B = s->d[5];
    fill(in, BUF_FLOATS, k, 34);
    BLAS(cublasSgemm_v2(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &ONE, in, M, B, K, &HALF, s->d[0], M));
    BLAS(cublasSaxpy_v2(g.blas, VEC, &QUARTER, in + 4096, 1, s->d[1], 1));
    DNN(cudnnAddTensor(g.dnn, &ONE, g.t_bias8, in + 3072, &HALF, g.t_act, s->d[2]));
    DNN(cudnnActivationForward(g.dnn, g.tanh_, &ONE, g.t_act, s->d[2], &ZERO, g.t_act, s->d[3]));
}

/* pointers_alternate: the same five calls on two groups of buffers, alternating with the step's
 * parity p: outputs d[5p .. 5p+4], inputs d[10+p] (written every step) and d[12+p] (fixed). The
 * cuBLASLt call's bias pointer, part of its descriptor, alternates too. */
static void step_pointers_alternate(set_t *s, int k)
{
    int p = k % 2;
    float *C = s->d[5 * p], *y = s->d[5 * p + 1], *D = s->d[5 * p + 2], *C2 = s->d[5 * p + 3], *Y2 = s->d[5 * p + 4];
    float *in = s->d[10 + p], *B = s->d[12 + p];
    fill(in, BUF_FLOATS, k, 35);
    BLAS(cublasSgemm_v2(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &ONE, in, M, B, K, &HALF, C, M));
    BLAS(cublasSaxpy_v2(g.blas, VEC / 2, &HALF, in + 4096, 1, y, 1));
    lt_relu_bias(in, B, in + 3072, D);
    DNN(cudnnAddTensor(g.dnn, &ONE, g.t_bias8, in + 3200, &HALF, g.t_act, C2));
    DNN(cudnnActivationForward(g.dnn, g.tanh_, &ONE, g.t_act, C2, &ZERO, g.t_act, Y2));
}
#endif /* GPU_LIBS_NO_CUDNN */

/* ---- the scenario table --------------------------------------------------------------------- */

typedef enum expect_kind {
    EXPECT_ABSORB,  /* REPLAY, replays >= STEPS/2, lib_calls > 0, lib_absorbed >= (STEPS-20)*calls */
    EXPECT_CALLS,   /* lib_calls > 0 (correctness is the point) */
    EXPECT_RELEARN, /* lib_relearned + side_exits > 0, lib_absorbed > 0 */
    EXPECT_SOME     /* lib_calls > 0, lib_absorbed > 0 */
} expect_kind_t;

typedef struct scenario {
    const char *name;
    unsigned needs; /* NEED_* */
    int nout;       /* d[0 .. nout-1] are the step's device outputs */
    int nhost;      /* host[0 .. nhost-1] are its host outputs */
    int calls;      /* wrapped library calls per step */
    expect_kind_t expect;
    void (*setup)(void);       /* after the handles, before any set */
    void (*init_set)(set_t *); /* each set, after its random contents */
    void (*between)(int k);    /* before step k, outside it (eager and traced alike) */
    void (*step)(set_t *, int k);
} scenario_t;

#define B_ NEED_BLAS
#define L_ (NEED_BLAS | NEED_LT)
#define D_ NEED_DNN
#ifdef GPU_LIBS_NO_CUDNN
#define DNN_STEP(f) NULL
#define DNN_HOOK(f) NULL
#else
#define DNN_STEP(f) f
#define DNN_HOOK(f) f
#endif

static const scenario_t SCENARIOS[] = {
    {"sgemm", B_, 2, 0, 2, EXPECT_ABSORB, NULL, NULL, NULL, step_sgemm},
    {"gemm_ex", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_gemm_ex},
    {"sgemm_strided_batched", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_sgemm_strided_batched},
    {"gemm_strided_batched_ex", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_gemm_strided_batched_ex},
    {"gemm_batched_ex", B_, 1, 0, 1, EXPECT_ABSORB, NULL, init_gemm_batched_ex, NULL, step_gemm_batched_ex},
    {"sgemv", B_, 2, 0, 2, EXPECT_ABSORB, NULL, NULL, NULL, step_sgemv},
    {"saxpy", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_saxpy},
    {"sscal", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_sscal},
    {"scopy", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_scopy},
    {"sdot", B_, 1, 0, 1, EXPECT_ABSORB, setup_device_pointer_mode, NULL, NULL, step_sdot},
    {"sdot_host", B_, 1, 2, 2, EXPECT_CALLS, NULL, NULL, NULL, step_sdot_host},
    {"axpy_ex", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_axpy_ex},
    {"scal_ex", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_scal_ex},
    {"copy_ex", B_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_copy_ex},
    {"dot_ex", B_, 1, 0, 1, EXPECT_ABSORB, setup_device_pointer_mode, NULL, NULL, step_dot_ex},
    {"lt_matmul", L_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_lt_matmul},
    {"lt_matmul_relu_bias", L_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, step_lt_matmul_relu_bias},
    {"conv_forward", D_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_conv_forward)},
    {"conv_bias_act", D_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_conv_bias_act)},
    {"activation", D_, 2, 0, 2, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_activation)},
    {"op_tensor", D_, 2, 0, 2, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_op_tensor)},
    {"add_tensor", D_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_add_tensor)},
    {"scale_tensor", D_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_scale_tensor)},
    {"softmax", D_, 1, 0, 1, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_softmax)},
    {"pooling", D_, 2, 0, 2, EXPECT_ABSORB, NULL, NULL, NULL, DNN_STEP(step_pooling)},
    {"batchnorm_inference", D_, 1, 0, 1, EXPECT_ABSORB, NULL, DNN_HOOK(init_batchnorm), NULL,
     DNN_STEP(step_batchnorm_inference)},
    {"backend_execute", D_, 1, 0, 1, EXPECT_ABSORB, DNN_HOOK(setup_backend), NULL, NULL,
     DNN_STEP(step_backend_execute)},
    {"desc_modified", D_, 2, 0, 3, EXPECT_SOME, NULL, NULL, DNN_HOOK(between_desc_modified),
     DNN_STEP(step_desc_modified)},
    {"alpha_changes", B_, 2, 0, 2, EXPECT_RELEARN, NULL, NULL, NULL, step_alpha_changes},
    {"handle_recreate", B_ | D_, 4, 0, 4, EXPECT_SOME, NULL, NULL, DNN_HOOK(between_handle_recreate),
     DNN_STEP(step_handle_recreate)},
    {"pointers_alternate", L_ | D_, 10, 0, 5, EXPECT_SOME, NULL, NULL, NULL, DNN_STEP(step_pointers_alternate)},
};
enum { NSCENARIOS = sizeof SCENARIOS / sizeof SCENARIOS[0] };

/* ---- expectations --------------------------------------------------------------------------- */

/* One expectation: a problem if it fails, or, with GPU_LIBS_CORRECTNESS_ONLY=1, a line saying
 * whether it holds. */
static void want(bool ok, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (correctness_only) printf("unchecked: %s: %s\n", msg, ok ? "holds" : "does not hold");
    else if (!ok) problem("%s", msg);
}

static void check_expectations(const scenario_t *sc, const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    unsigned long long calls = st->lib_calls, absorbed = st->lib_absorbed, relearned = st->lib_relearned;
    unsigned long long min_absorbed = (unsigned long long)(STEPS - 20) * (unsigned long long)sc->calls;
    want(calls > 0, "lib_calls is %llu, expected > 0", calls);
    const char *learned = getenv("CGJIT_LIBS_LEARNED");
    if (!learned || strcmp(learned, "1")) { /* the default: the library runs, its kernels replay */
        want(absorbed == 0, "lib_absorbed is %llu, expected 0 (the library runs on every call)", absorbed);
        if (sc->expect == EXPECT_ABSORB)
            want(in->replays >= STEPS / 2, "replays is %llu, expected at least %d", (unsigned long long)in->replays,
                 STEPS / 2);
        return;
    }
    switch (sc->expect) {
    case EXPECT_ABSORB:
        want(in->state == CGJ_STATE_REPLAY, "state is %s, expected REPLAY (reason: \"%s\")", cgj_state_name(in->state),
             in->reason);
        want(in->replays >= STEPS / 2, "replays is %llu, expected at least %d", (unsigned long long)in->replays,
             STEPS / 2);
        want(absorbed >= min_absorbed, "lib_absorbed is %llu, expected at least %llu ((%d - 20) steps x %d calls)",
             absorbed, min_absorbed, STEPS, sc->calls);
        break;
    case EXPECT_CALLS: break;
    case EXPECT_RELEARN:
        want(relearned + in->side_exits > 0, "lib_relearned + side_exits is %llu + %llu, expected > 0", relearned,
             (unsigned long long)in->side_exits);
        want(absorbed > 0, "lib_absorbed is %llu, expected > 0", absorbed);
        break;
    case EXPECT_SOME: want(absorbed > 0, "lib_absorbed is %llu, expected > 0", absorbed); break;
    }
}

/* ---- the runner ----------------------------------------------------------------------------- */

/* After a step, outside the markers: wait for the stream, then copy the outputs. */
static void copy_outputs(const scenario_t *sc, const set_t *s, float *out)
{
    CHECK(cudaStreamSynchronize(g.stream));
    CHECK(cudaGetLastError());
    for (int b = 0; b < sc->nout; b++)
        CHECK(cudaMemcpy(out + (size_t)b * BUF_FLOATS, s->d[b], BUF_BYTES, cudaMemcpyDeviceToHost));
    memcpy(out + (size_t)sc->nout * BUF_FLOATS, s->host, (size_t)sc->nhost * sizeof(float));
}

/* The first differing float, at index i, of a step's outputs. */
static void report_mismatch(const scenario_t *sc, int step, const float *want_, const float *got, size_t i)
{
    size_t dev = (size_t)sc->nout * BUF_FLOATS;
    if (i < dev)
        problem("step %d: output differs first at buffer d[%zu] [%zu]: eager %.9g, traced %.9g", step, i / BUF_FLOATS,
                i % BUF_FLOATS, want_[i], got[i]);
    else
        problem("step %d: output differs first at host value %zu: eager %.9g, traced %.9g", step, i - dev, want_[i],
                got[i]);
}

static int run(const scenario_t *sc)
{
    libs_create(sc->needs);
    if (sc->setup) sc->setup();
    size_t init_n = (size_t)NBUF * BUF_FLOATS;
    float *init = (float *)malloc(init_n * sizeof(float));
    size_t per_step = (size_t)sc->nout * BUF_FLOATS + (size_t)sc->nhost;
    float *eager = (float *)malloc(STEPS * per_step * sizeof(float));
    float *got = (float *)malloc(per_step * sizeof(float));
    if (!init || !eager || !got) fail_now("out of host memory");
    random_init(init, init_n);
    set_t eager_set, traced_set;
    set_init(&eager_set, init, sc->init_set);
    set_init(&traced_set, init, sc->init_set);

    for (int k = 0; k < STEPS; k++) {
        if (sc->between) sc->between(k);
        sc->step(&eager_set, k);
        copy_outputs(sc, &eager_set, eager + k * per_step);
        expect_step_changes(eager, k, per_step, "outputs");
    }

    char anchor[128];
    snprintf(anchor, sizeof anchor, "lib_%s", sc->name);
    int differing = 0;
    for (int k = 0; k < STEPS; k++) {
        if (sc->between) sc->between(k);
        int rc = cgj_trace_begin(anchor);
        if (rc != CGJ_OK) problem("step %d: cgj_trace_begin(\"%s\") returned %d (%s)", k, anchor, rc, cgj_strerror(rc));
        sc->step(&traced_set, k);
        rc = cgj_trace_end();
        if (rc != CGJ_OK) problem("step %d: cgj_trace_end() returned %d (%s)", k, rc, cgj_strerror(rc));
        copy_outputs(sc, &traced_set, got);
        size_t first = compare_step(eager + k * per_step, got, per_step, &differing);
        if (first < per_step) report_mismatch(sc, k, eager + k * per_step, got, first);
    }
    report_differing(differing, STEPS);

    cgj_trace_info_t in;
    cgj_stats_t st;
    memset(&in, 0, sizeof in);
    memset(&st, 0, sizeof st);
    int rc = cgj_trace_info(anchor, &in);
    if (rc != CGJ_OK) problem("cgj_trace_info(\"%s\") returned %d (%s)", anchor, rc, cgj_strerror(rc));
    rc = cgj_stats(&st);
    if (rc != CGJ_OK) problem("cgj_stats returned %d (%s)", rc, cgj_strerror(rc));
    printf("info %s: state=%s replays=%llu side_exits=%llu segments=%u variants=%u ops=%u kernels=%u runs=%llu "
           "lib_calls=%llu lib_absorbed=%llu lib_relearned=%llu calls_per_step=%d reason=\"%s\"\n",
           sc->name, cgj_state_name(in.state), (unsigned long long)in.replays, (unsigned long long)in.side_exits,
           in.segments, in.variants, in.ops, in.kernels, (unsigned long long)in.runs, (unsigned long long)st.lib_calls,
           (unsigned long long)st.lib_absorbed, (unsigned long long)st.lib_relearned, sc->calls, in.reason);
    print_stats(&st);
    check_expectations(sc, &in, &st);

    set_free(&eager_set);
    set_free(&traced_set);
    free(init);
    free(eager);
    free(got);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaGetLastError());
    if (problems) {
        printf("FAIL %s %s (%d problem%s)\n", sc->name, first_problem, problems, problems == 1 ? "" : "s");
        return 1;
    }
    printf("PASS %s\n", sc->name);
    return 0;
}

static const char *scenario_at(int i)
{
    return SCENARIOS[i].name;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < NSCENARIOS; i++) printf("%s\n", SCENARIOS[i].name);
        return 0;
    }
    int i = scenario_arg(argc, argv, "SCENARIO | --list", scenario_at, NSCENARIOS);
    if (i < 0) return 2;
    const scenario_t *sc = &SCENARIOS[i];
#ifdef GPU_LIBS_NO_CUDNN
    if (sc->needs & NEED_DNN) {
        printf("SKIP %s cuDNN not built\n", sc->name);
        return 0;
    }
#endif
    const char *co = getenv("GPU_LIBS_CORRECTNESS_ONLY");
    correctness_only = co && co[0] && strcmp(co, "0") != 0;

    char gpu[512];
    describe_gpu(gpu, sizeof gpu);
    int blas_major = 0, blas_minor = 0, blas_patch = 0;
    cublasGetProperty(MAJOR_VERSION, &blas_major);
    cublasGetProperty(MINOR_VERSION, &blas_minor);
    cublasGetProperty(PATCH_LEVEL, &blas_patch);
    char dnn_version[32] = "not built";
#ifndef GPU_LIBS_NO_CUDNN
    snprintf(dnn_version, sizeof dnn_version, "%zu", cudnnGetVersion());
#endif
    printf("gpu_libs %s: %s, cuBLAS %d.%d.%d, cuDNN %s, %d steps, %d library calls per step%s\n", sc->name, gpu,
           blas_major, blas_minor, blas_patch, dnn_version, STEPS, sc->calls,
           correctness_only ? ", correctness only" : "");
    return run(sc);
}
