/*
 * gpu_fusion.cu — fusion (mode default) against eager on a GPU: `gpu_fusion SCENARIO` prints
 * `PASS SCENARIO` when every traced step's results are within the mode's tolerance of the same
 * step run eagerly (bitwise where nothing may be fused), and cgjit fused, or declined to fuse,
 * what the scenario expects.
 *
 * Each scenario registers elementwise kernels, runs STEPS steps eagerly on one set of buffers
 * (untraced: a linked program traces only between markers) and between cgj_trace_begin/end on
 * another, and compares both after every step. Steps change their state (x is updated in place),
 * so a replay that did nothing would differ.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#ifndef GPU_FUSION_NO_CUDNN
#include <cudnn.h>
#endif
#include "gpu_common.h"

#include <math.h>
#include <unistd.h>

enum { N = 1 << 16, STEPS = 1000, BLOCK = 256, GRID = 64 };
#define REL_TOL 1e-5
#define ABS_TOL 1e-6

__global__ void axpb(float *x, float a, float b, int n)
{
    FOR_EACH(i, n) x[i] = a * x[i] + b;
}
__global__ void scale_shift(float *y, const float *x, float a, float b, int n)
{
    FOR_EACH(i, n) y[i] = a * x[i] + b;
}
__global__ void add_k(float *y, const float *a, const float *b, int n)
{
    FOR_EACH(i, n) y[i] = a[i] + b[i];
}
__global__ void gelu_k(float *x, int n)
{
    FOR_EACH(i, n) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}
__global__ void relu_k(float *y, const float *x, int n)
{
    FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void times2(float *x, int n)
{
    FOR_EACH(i, n) x[i] = 2.0f * x[i];
}
/* Opaque: not registered, and not elementwise (reads a neighbour). */
__global__ void smooth(float *y, const float *x, int n)
{
    FOR_EACH(i, n) y[i] = 0.5f * (x[i] + x[(i + 1) % n]);
}

static const char *const SPECS[][2] = {
    {"axpb", "(inout float x, float a, float b, count int n): x = a * x + b"},
    {"bias_rows", "(inout float x, in float b[i % cols], count int rows, count int cols): x = x + b"},
    {"gelu_t", "(inout float x, count int n): x = gelu_tanh(x)"},
    {"scale_shift", "(out float y, in float x, float a, float b, count int n): y = a * x + b"},
    {"add_k", "(out float y, in float a, in float b, count int n): y = a + b"},
    {"gelu_k", "(inout float x, count int n): x = gelu(x)"},
    {"relu_k", "(out float y, in float x, count int n): y = x > 0 ? x : 0"},
};

typedef struct bufs {
    float *x, *bias, *out, *side;
} bufs_t;

typedef struct scenario {
    const char *name;
    void (*step)(const bufs_t *b, int k, cudaStream_t s);
    const char *mode;
    int min_fusions, max_fusions; /* cgj_stats fusions over the run */
    int min_dropped;              /* fusions_dropped at least */
    const char *reason;           /* the anchor's fuse_reason_code by name, NULL: any */
    int bitwise;                  /* every step bitwise equal to eager */
    int gemms;                    /* GEMMs or convolutions folded into one call at least; their
                                   * results are compared normwise (the largest eager magnitude) */
    const char *env;              /* NAME=VALUE the program runs itself again with, or NULL */
} scenario_t;

/* x = 0.999 x + 0.001; out = relu(gelu(0.5 x + 0.25 + bias)), through two in-step temporaries
 * the step frees: one chain of five kernels, whose temporaries need never be written. */
static void step_chain(const bufs_t *b, int, cudaStream_t s)
{
    float *t1, *t2;
    CHECK(cudaMallocAsync((void **)&t1, N * sizeof(float), s));
    CHECK(cudaMallocAsync((void **)&t2, N * sizeof(float), s));
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.999f, 0.001f, N);
    scale_shift<<<GRID, BLOCK, 0, s>>>(t1, b->x, 0.5f, 0.25f, N);
    add_k<<<GRID, BLOCK, 0, s>>>(t2, t1, b->bias, N);
    gelu_k<<<GRID, BLOCK, 0, s>>>(t2, N);
    relu_k<<<GRID, BLOCK, 0, s>>>(b->out, t2, N);
    CHECK(cudaFreeAsync(t1, s));
    CHECK(cudaFreeAsync(t2, s));
}

/* The same with an opaque kernel reading t1 after the first chain: t1 must reach memory. */
static void step_split(const bufs_t *b, int, cudaStream_t s)
{
    float *t1, *t2;
    CHECK(cudaMallocAsync((void **)&t1, N * sizeof(float), s));
    CHECK(cudaMallocAsync((void **)&t2, N * sizeof(float), s));
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.999f, 0.001f, N);
    scale_shift<<<GRID, BLOCK, 0, s>>>(t1, b->x, 0.5f, 0.25f, N);
    add_k<<<GRID, BLOCK, 0, s>>>(t2, t1, b->bias, N);
    smooth<<<GRID, BLOCK, 0, s>>>(b->side, t1, N);
    gelu_k<<<GRID, BLOCK, 0, s>>>(t2, N);
    relu_k<<<GRID, BLOCK, 0, s>>>(b->out, t2, N);
    CHECK(cudaFreeAsync(t1, s));
    CHECK(cudaFreeAsync(t2, s));
}

/* 1000 dependent in-place kernels: one chain, one kernel. */
static void step_long(const bufs_t *b, int, cudaStream_t s)
{
    for (int j = 0; j < 1000; j++) axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.9999f, 0.001f, N);
    relu_k<<<GRID, BLOCK, 0, s>>>(b->out, b->x, N);
}

/* times2 registered as x * 3 (wrong_registration): validation must drop the fusion. */
static void step_wrong(const bufs_t *b, int, cudaStream_t s)
{
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.5f, 0.001f, N);
    times2<<<GRID, BLOCK, 0, s>>>(b->x, N);
    relu_k<<<GRID, BLOCK, 0, s>>>(b->out, b->x, N);
}

/* A scalar that changes every 7th step: the fused chain's ops are guarded like constants. */
static void step_changing(const bufs_t *b, int k, cudaStream_t s)
{
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, k % 7 == 6 ? 0.998f : 0.999f, 0.001f, N);
    scale_shift<<<GRID, BLOCK, 0, s>>>(b->out, b->x, 0.5f, 0.25f, N);
    gelu_k<<<GRID, BLOCK, 0, s>>>(b->out, N);
}

/* Library calls cgjit describes as elementwise, one chain: a per-channel bias (cudnnAddTensor,
 * broadcast), ReLU (cudnnActivationForward), a residual add (cudnnOpTensor), a scale
 * (cudnnScaleTensor), then cuBLAS axpy and scal; the handles on the step's stream. */
enum { LC = 16, LHW = N / LC };
enum { GM = 256, GN = N / GM, GK = 256 }; /* the GEMM scenarios' shapes */
static cublasHandle_t blas;
#ifndef GPU_FUSION_NO_CUDNN
static cudnnHandle_t dnn;
static cudnnTensorDescriptor_t t_gemm, t_gbias;
static cudnnTensorDescriptor_t t_full, t_bias;
static cudnnActivationDescriptor_t act;
static cudnnOpTensorDescriptor_t opt;

static void libs_setup(cudaStream_t s)
{
    CHECK_CUDNN(cudnnCreate(&dnn));
    CHECK_CUDNN(cudnnSetStream(dnn, s));
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&t_full));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(t_full, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, LC, LHW / 256, 256));
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&t_bias));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(t_bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, LC, 1, 1));
    CHECK_CUDNN(cudnnCreateActivationDescriptor(&act));
    CHECK_CUDNN(cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    CHECK_CUDNN(cudnnCreateOpTensorDescriptor(&opt));
    CHECK_CUDNN(cudnnSetOpTensorDescriptor(opt, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN));
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&t_gemm));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(t_gemm, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, GN, GM, 1, 1));
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&t_gbias));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(t_gbias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, GM, 1, 1));
    CHECK_CUBLAS(cublasCreate(&blas));
    CHECK_CUBLAS(cublasSetStream(blas, s));
}

static void libs_chain(const bufs_t *b, float decay, cudaStream_t s)
{
    const float one = 1.0f, zero = 0.0f, half = 0.5f, small = 0.001f;
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.999f, 0.001f, N); /* the state moves, and heads the chain */
    CHECK_CUDNN(cudnnAddTensor(dnn, &one, t_bias, b->bias, &zero, t_full, b->out)); /* out = bias, broadcast */
    CHECK_CUDNN(cudnnAddTensor(dnn, &half, t_full, b->x, &one, t_full, b->out));    /* out += 0.5 x */
    CHECK_CUDNN(cudnnActivationForward(dnn, act, &one, t_full, b->out, &zero, t_full, b->side));
    CHECK_CUDNN(cudnnOpTensor(dnn, opt, &one, t_full, b->side, &half, t_full, b->x, &zero, t_full, b->out));
    CHECK_CUDNN(cudnnScaleTensor(dnn, t_full, b->out, &decay));
    CHECK_CUBLAS(cublasSaxpy(blas, N, &small, b->x, 1, b->out, 1));
    CHECK_CUBLAS(cublasSscal(blas, N, &decay, b->side, 1));
}

static void step_libs(const bufs_t *b, int, cudaStream_t s)
{
    libs_chain(b, 0.999f, s);
}

/* The last call's scale is another one every 7th step: replay leaves the chain there, with the
 * calls before it absorbed, and re-issues them (cudnnAddTensor through its solo kernel); no
 * variant can take such a run, as no two are alike. */
static void step_libs_exit(const bufs_t *b, int k, cudaStream_t s)
{
    libs_chain(b, k % 7 == 6 ? 0.998f - 1e-6f * (float)k : 0.999f, s);
}
#else
static void libs_setup(cudaStream_t) {}
static void step_libs(const bufs_t *, int, cudaStream_t) {}
static void step_libs_exit(const bufs_t *, int, cudaStream_t) {}
#endif

/* A GEMM with a bias over its rows and an activation after it: C = relu(x B / 16 + bias) with
 * cudnnAddTensor and cudnnActivationForward (gemm_relu), or gelu_tanh(...) with registered
 * kernels, as gpt2 writes them (gemm_gelu): each one cuBLASLt matmul with its epilogue. */
__global__ void bias_rows(float *x, const float *b, int rows, int cols)
{
    FOR_EACH(i, rows * cols) x[i] += b[i % cols];
}
__global__ void gelu_t(float *x, int n)
{
    FOR_EACH(i, n)
    {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

static void gemm(const bufs_t *b, cudaStream_t s)
{
    const float scale = 1.0f / 16, zero = 0.0f;
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.999f, 0.001f, N);
    CHECK_CUBLAS(
        cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &scale, b->side, GM, b->x, GK, &zero, b->out, GM));
}

#ifndef GPU_FUSION_NO_CUDNN
static void step_gemm_relu(const bufs_t *b, int, cudaStream_t s)
{
    const float one = 1.0f, zero = 0.0f;
    gemm(b, s);
    CHECK_CUDNN(cudnnAddTensor(dnn, &one, t_gbias, b->bias, &one, t_gemm, b->out));
    CHECK_CUDNN(cudnnActivationForward(dnn, act, &one, t_gemm, b->out, &zero, t_gemm, b->out));
}
#else
static void step_gemm_relu(const bufs_t *, int, cudaStream_t) {}
#endif

static void step_gemm_gelu(const bufs_t *b, int, cudaStream_t s)
{
    gemm(b, s);
    bias_rows<<<GRID, BLOCK, 0, s>>>(b->out, b->bias, GN, GM);
    gelu_t<<<GRID, BLOCK, 0, s>>>(b->out, N);
}

static void step_gemm_alone(const bufs_t *b, int, cudaStream_t s)
{
    gemm(b, s);
}

/* The same GEMM as a plain cublasLtMatmul, then the bias and ReLU (cuDNN): one matmul with the
 * RELU_BIAS epilogue in the program's matmul's place. */
static cublasLtHandle_t lt;
static cublasLtMatmulDesc_t lt_desc;
static cublasLtMatrixLayout_t lt_a, lt_b, lt_c;
static void lt_setup(void)
{
    CHECK_CUBLAS(cublasLtCreate(&lt));
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&lt_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&lt_a, CUDA_R_32F, GM, GK, GM));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&lt_b, CUDA_R_32F, GK, GN, GK));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&lt_c, CUDA_R_32F, GM, GN, GM));
}

#ifndef GPU_FUSION_NO_CUDNN
static void step_lt_relu(const bufs_t *b, int, cudaStream_t s)
{
    const float scale = 1.0f / 16, zero = 0.0f, one = 1.0f;
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.999f, 0.001f, N);
    CHECK_CUBLAS(cublasLtMatmul(lt, lt_desc, &scale, b->side, lt_a, b->x, lt_b, &zero, b->out, lt_c, b->out, lt_c, NULL,
                                NULL, 0, s));
    CHECK_CUDNN(cudnnAddTensor(dnn, &one, t_gbias, b->bias, &one, t_gemm, b->out));
    CHECK_CUDNN(cudnnActivationForward(dnn, act, &one, t_gemm, b->out, &zero, t_gemm, b->out));
}
#else
static void step_lt_relu(const bufs_t *, int, cudaStream_t) {}
#endif

/* A 3x3 convolution of 16 channels over 64x64 (x as 1 x 16 x 64 x 64), its bias per channel
 * (cudnnAddTensor) and a ReLU (cudnnActivationForward): one cudnnConvolutionBiasActivationForward. */
enum { CC = 16, CH = 64, CW = N / (CC * CH) };
#ifndef GPU_FUSION_NO_CUDNN
static cudnnTensorDescriptor_t t_cx, t_cbias;
static cudnnFilterDescriptor_t f_cw;
static cudnnConvolutionDescriptor_t c_conv;
static void *c_ws;
static size_t c_ws_bytes;

static void conv_setup(void)
{
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&t_cx));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(t_cx, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CC, CH, CW));
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&t_cbias));
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(t_cbias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, CC, 1, 1));
    CHECK_CUDNN(cudnnCreateFilterDescriptor(&f_cw));
    CHECK_CUDNN(cudnnSetFilter4dDescriptor(f_cw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CC, CC, 3, 3));
    CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&c_conv));
    CHECK_CUDNN(cudnnSetConvolution2dDescriptor(c_conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CHECK_CUDNN(cudnnSetConvolutionMathType(c_conv, CUDNN_FMA_MATH));
    CHECK_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(dnn, t_cx, f_cw, c_conv, t_cx,
                                                        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &c_ws_bytes));
    CHECK(cudaMalloc(&c_ws, c_ws_bytes ? c_ws_bytes : 256));
}

static void step_conv_relu(const bufs_t *b, int, cudaStream_t s)
{
    const float one = 1.0f, zero = 0.0f;
    axpb<<<GRID, BLOCK, 0, s>>>(b->x, 0.999f, 0.001f, N);
    CHECK_CUDNN(cudnnConvolutionForward(dnn, &one, t_cx, b->x, f_cw, b->side, c_conv,
                                        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, c_ws, c_ws_bytes, &zero, t_cx,
                                        b->out));
    CHECK_CUDNN(cudnnAddTensor(dnn, &one, t_cbias, b->bias, &one, t_cx, b->out));
    CHECK_CUDNN(cudnnActivationForward(dnn, act, &one, t_cx, b->out, &zero, t_cx, b->out));
}
#else
static void conv_setup(void) {}
static void step_conv_relu(const bufs_t *, int, cudaStream_t) {}
#endif

static const scenario_t SCENARIOS[] = {
    {"chain", step_chain, "default", 1, 1000, 0, "NONE", 0, 0, NULL},
    {"split", step_split, "default", 2, 1000, 0, "NONE", 0, 0, NULL},
    {"long_chain", step_long, "default", 1, 1000, 0, "NONE", 0, 0, NULL},
    {"wrong_registration", step_wrong, "default", 0, 0, 1, "FUSE_MISMATCH", 1, 0, NULL},
    /* scale_shift's registration disagrees: the chain is fused around it */
    {"layout_mismatch", step_chain, "default", 1, 1000, 1, "FUSE_LAYOUT", 0, 0, NULL},
    {"reduce_overhead", step_chain, "reduce-overhead", 0, 0, 0, "NONE", 1, 0, NULL},
    {"registry_file", step_chain, NULL, 1, 1000, 0, "NONE", 0, 0, NULL},
    {"changing_scalar", step_changing, "default", 1, 1000, 0, NULL, 0, 0, NULL},
    {"library_calls", step_libs, "default", 1, 1000, 0, NULL, 0, 0, NULL},
    {"library_exit", step_libs_exit, "default", 1, 1000, 0, NULL, 0, 0, NULL},
    {"gemm_relu", step_gemm_relu, "default", 1, 1000, 0, "NONE", 0, 1, "CGJIT_FOLD_TIMING=0"},
    {"gemm_gelu", step_gemm_gelu, "default", 1, 1000, 0, "NONE", 0, 1, "CGJIT_FOLD_TIMING=0"},
    {"conv_relu", step_conv_relu, "default", 1, 1000, 0, "NONE", 0, 1, "CGJIT_FOLD_TIMING=0"},
    {"gemm_lt_relu", step_lt_relu, "default", 1, 1000, 0, "NONE", 0, 1, "CGJIT_FOLD_TIMING=0"},
    /* where the fold is timed, it is taken only where it is faster: either way within tolerance */
    {"gemm_relu_timed", step_gemm_relu, "default", 0, 1000, 0, "NONE", 0, 0, NULL},
    /* max-autotune: a cuBLASLt algorithm where one beats cuBLAS's own, else the program's calls */
    {"gemm_autotune", step_gemm_alone, "max-autotune", 0, 1000, 0, "NONE", 0, 0, NULL},
};
enum { NSCENARIOS = sizeof SCENARIOS / sizeof SCENARIOS[0] };
static const char *scenario_at(int i)
{
    return SCENARIOS[i].name;
}

/* The registrations of scenario sc: through the API, or (registry_file) a file in CGJIT_OPS:
 * cgjit reads its variables once, when it starts (a library linked in may start it before main),
 * so the program runs itself again with them set. */
static void register_kernels(const scenario_t *sc, char **argv)
{
    if (sc->env) {
        char name[64];
        const char *eq = strchr(sc->env, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - sc->env), sc->env);
        if (!getenv(name)) {
            setenv(name, eq + 1, 1);
            execv("/proc/self/exe", argv);
            fail_exit("execv of itself failed", NULL);
        }
    }
    if (!strcmp(sc->name, "registry_file") && !getenv("CGJIT_OPS")) {
        char path[] = "/tmp/cgjit-ops-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) fail_exit("mkstemp failed", NULL);
        FILE *f = fdopen(fd, "w");
        fprintf(f, "# elementwise kernels of gpu_fusion\n\n");
        for (size_t k = 0; k < sizeof SPECS / sizeof SPECS[0]; k++) fprintf(f, "%s %s\n", SPECS[k][0], SPECS[k][1]);
        fprintf(f, "smooth (out float y, in float x, count int n): y = x +\n"); /* a bad line: reported, skipped */
        fclose(f);
        setenv("CGJIT_OPS", path, 1);
        setenv("CGJIT_MODE", "default", 1);
        execv("/proc/self/exe", argv);
        fail_exit("execv of itself failed", NULL);
    }
    if (!strcmp(sc->name, "registry_file")) return;
    for (size_t k = 0; k < sizeof SPECS / sizeof SPECS[0]; k++) {
        const char *spec = SPECS[k][1];
        if (!strcmp(sc->name, "layout_mismatch") && !strcmp(SPECS[k][0], "scale_shift"))
            spec = "(out float y, in float x, float a, count int n): y = a * x"; /* one scalar short */
        if (cgj_op_register_elementwise(SPECS[k][0], spec) != CGJ_OK) fail_exit("a registration was refused", NULL);
    }
    if (!strcmp(sc->name, "wrong_registration") &&
        cgj_op_register_elementwise("times2", "(inout float x, count int n): x = x * 3") != CGJ_OK)
        fail_exit("times2's registration was refused", NULL);
    if (cgj_op_register_elementwise("smooth", "(out float y, in float x, count int n): y = ") != CGJ_ERR_SPEC)
        problem("a spec that does not parse was not refused with CGJ_ERR_SPEC");
    if (cgj_mode_set(sc->mode) != CGJ_OK) fail_exit("cgj_mode_set refused the mode", NULL);
    if (cgj_mode_set("fast") != CGJ_ERR_INVALID_ARG) problem("cgj_mode_set accepted an unknown mode");
}

static void alloc_bufs(bufs_t *b, const float *init)
{
    float **all[] = {&b->x, &b->bias, &b->out, &b->side};
    for (int k = 0; k < 4; k++) {
        CHECK(cudaMalloc((void **)all[k], N * sizeof(float)));
        CHECK(cudaMemcpy(*all[k], init + (size_t)k * 997, N * sizeof(float), cudaMemcpyHostToDevice));
    }
}

/* Worst excess of got over eager's tolerance (<= 0: within; normwise: against the largest eager
 * magnitude), and whether they are bitwise equal. */
static double excess(const float *want, const float *got, size_t n, int normwise, int *bitwise)
{
    double worst = -1, scale = 0;
    *bitwise = !memcmp(want, got, n * sizeof(float));
    for (size_t i = 0; i < n && normwise; i++) scale = fmax(scale, fabs((double)want[i]));
    for (size_t i = 0; i < n && !*bitwise; i++) {
        double mag = normwise ? scale : fabs((double)want[i]);
        double d = fabs((double)want[i] - (double)got[i]) - (ABS_TOL + REL_TOL * mag);
        if (d > worst || d != d) worst = d != d ? INFINITY : d;
    }
    return *bitwise ? -1 : worst;
}

int main(int argc, char **argv)
{
    int idx = scenario_arg(argc, argv, "SCENARIO", scenario_at, NSCENARIOS);
    if (idx < 0) return 2;
    const scenario_t *sc = &SCENARIOS[idx];
    register_kernels(sc, argv);
    char gpu[512];
    describe_gpu(gpu, sizeof gpu);
    printf("%s, scenario %s, mode %s\n", gpu, sc->name, cgj_mode_get());
    float *init = (float *)malloc((N + 4 * 997) * sizeof(float));
    random_init(init, N + 4 * 997);
    bufs_t e, r;
    alloc_bufs(&e, init);
    alloc_bufs(&r, init);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (!strncmp(sc->name, "library_", 8) || !strncmp(sc->name, "gemm_", 5) || !strncmp(sc->name, "conv_", 5)) {
#ifdef GPU_FUSION_NO_CUDNN
        printf("SKIP %s cuDNN was not found when gpu_fusion was built\n", sc->name);
        return 0;
#endif
        libs_setup(s);
        if (!strncmp(sc->name, "conv_", 5)) conv_setup();
        if (!strcmp(sc->name, "gemm_lt_relu")) lt_setup();
    }
    float *he = (float *)malloc(3 * N * sizeof(float)), *hr = (float *)malloc(3 * N * sizeof(float));
    int off = 0, unequal = 0;
    double worst = -1;
    for (int k = 0; k < STEPS; k++) {
        sc->step(&e, k, s);
        CHECK(cgj_trace_begin(sc->name) == CGJ_OK ? cudaSuccess : cudaErrorUnknown);
        sc->step(&r, k, s);
        CHECK(cgj_trace_end() == CGJ_OK ? cudaSuccess : cudaErrorUnknown);
        const bufs_t *b[2] = {&e, &r};
        float *h[2] = {he, hr};
        for (int j = 0; j < 2; j++) {
            CHECK(cudaMemcpyAsync(h[j], b[j]->x, N * sizeof(float), cudaMemcpyDeviceToHost, s));
            CHECK(cudaMemcpyAsync(h[j] + N, b[j]->out, N * sizeof(float), cudaMemcpyDeviceToHost, s));
            CHECK(cudaMemcpyAsync(h[j] + 2 * N, b[j]->side, N * sizeof(float), cudaMemcpyDeviceToHost, s));
        }
        CHECK(cudaStreamSynchronize(s));
        int bitwise;
        double ex = excess(he, hr, 3 * N, sc->gemms || !strncmp(sc->name, "gemm_", 5), &bitwise);
        unequal += !bitwise;
        if (ex > worst) worst = ex;
        if (ex > 0 && off++ == 0) problem("step %d: traced results beyond the tolerance of eager (excess %g)", k, ex);
    }
    cgj_stats_t st;
    cgj_trace_info_t info;
    cgj_stats(&st);
    if (cgj_trace_info(sc->name, &info) != CGJ_OK) fail_exit("no trace info", NULL);
    print_stats(&st);
    printf("info %s: %u fused chain(s) of %u kernels, %u dropped (%s), %llu replays, %d of %d steps not bitwise equal, "
           "fusion build %.2f ms (compile %.2f ms, %u by NVRTC), %u GEMM(s) or convolution(s) folded\n",
           sc->name, info.fused_chains, info.fused_ops, info.fuse_drops, cgj_reason_name(info.fuse_reason_code),
           (unsigned long long)info.replays, unequal, STEPS, (double)info.fuse_ns / 1e6,
           (double)info.fuse_compile_ns / 1e6, info.fuse_cold, info.fused_gemms);
    if (off) problem("%d of %d steps beyond tolerance", off, STEPS);
    if (sc->bitwise && unequal) problem("%d of %d steps not bitwise equal to eager", unequal, STEPS);
    if (st.fusions < (uint64_t)sc->min_fusions || st.fusions > (uint64_t)sc->max_fusions)
        problem("%llu fusions, expected %d to %d (last dropped: %s; anchor: %s)", (unsigned long long)st.fusions,
                sc->min_fusions, sc->max_fusions, cgj_reason_name(info.fuse_reason_code), info.reason);
    if (st.fusions_dropped < (uint64_t)sc->min_dropped)
        problem("%llu fusions dropped, expected at least %d", (unsigned long long)st.fusions_dropped, sc->min_dropped);
    if (sc->reason && strcmp(cgj_reason_name(info.fuse_reason_code), sc->reason))
        problem("the anchor's fusion reason is %s, expected %s", cgj_reason_name(info.fuse_reason_code), sc->reason);
    if (!strcmp(sc->name, "library_exit") && st.side_exits + st.variant_switches < STEPS / 7)
        problem("%llu side exits and %llu variant switches where the scale changed %d times",
                (unsigned long long)st.side_exits, (unsigned long long)st.variant_switches, STEPS / 7);
    if (info.replays < STEPS / 2) problem("only %llu of %d steps replayed", (unsigned long long)info.replays, STEPS);
    if (info.fused_gemms < (uint32_t)sc->gemms)
        problem("%u GEMMs or convolutions folded, expected at least %d (%s)", info.fused_gemms, sc->gemms,
                cgj_reason_name(info.fuse_reason_code));
    if (!strncmp(sc->name, "library_", 8) && info.fused_ops < 8)
        problem("the library calls were not fused into the chain (%u kernels, %s)", info.fused_ops,
                cgj_reason_name(info.fuse_reason_code));
    if (!strcmp(sc->name, "long_chain") && info.fused_ops < 1001)
        problem("the 1001 kernels were not fused as one chain (%u fused)", info.fused_ops);
    if (problems) {
        printf("FAIL %s %s\n", sc->name, first_problem);
        return 1;
    }
    printf("PASS %s\n", sc->name);
    return 0;
}
