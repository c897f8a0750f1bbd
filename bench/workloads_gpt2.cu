/*
 * workloads_gpt2.cu — workload `gpt2`: the forward pass of a 12-layer GPT-2-small-shaped
 * transformer, d = 768, 12 heads of 64, T = 64 tokens, batch 1, fp32, from a random T x d input
 * (no embedding lookup). Every activation is row-major [token][feature]; every Linear has
 * PyTorch's semantics, y = x W^T + b with W stored [out][in].
 *
 * Per layer (16 calls; h is the residual stream, the input x for layer 0):
 *   a = layernorm(h)                       layernorm kernel (own; one warp per row, eps 1e-5)
 *   qkv = a Wqkv^T + bqkv   (768 -> 2304)   cublasSgemm_v2 + bias kernel (own)
 *   per head h: S = Q K^T / sqrt(64)       cublasSgemmStridedBatched over the 12 heads
 *   P = softmax(causal_mask(S))            softmax kernel (own; one warp per row: key j > query
 *                                          i is excluded, P[i][j] = 0 there)
 *   attn = P V (heads side by side)        cublasSgemmStridedBatched over the 12 heads
 *   p = attn Wo^T + bo      (768 -> 768)    cublasSgemm_v2 + bias kernel
 *   h = h + p                              residual-add kernel (own)
 *   a = layernorm(h)                       layernorm kernel
 *   f = gelu(a Wfc^T + bfc) (768 -> 3072)   cublasSgemm_v2 + bias kernel + GELU kernel (own; tanh
 *                                          approximation, PyTorch's gelu(approximate="tanh"))
 *   p = f Wfc2^T + bfc2     (3072 -> 768)   cublasSgemm_v2 + bias kernel
 *   h = h + p                              residual-add kernel
 * then the final layernorm: 12 * 16 + 1 = 193 calls per step. Q, K and V are the three
 * 768-column thirds of qkv; head h is columns h*64..h*64+63 of each (as PyTorch's view/transpose).
 *
 * Row-major through cuBLAS's column-major: a row-major R x C matrix with row stride ld is the
 * column-major C x R matrix with leading dimension ld, so y = x W^T is the column-major
 * C(out x T) = op_T(W buffer: in x out) * (x buffer: in x T); for a head, S^T = K Q^T and
 * attn^T = V^T P^T, read off the same buffers with leading dimensions 2304 (Q, K, V), 64 (S, P)
 * and 768 (attn) and per-head strides of 64 floats (Q, K, V, attn) and 64*64 floats (S, P).
 *
 * Math: fp32 without TF32 (cuBLAS CUBLAS_DEFAULT_MATH with no tensor-op/TF32 flag, as PyTorch
 * with allow_tf32 = False), pointer mode host, the cuBLAS workspace set explicitly (allocated
 * once). The kernels use IEEE division, sqrtf, expf and tanhf (no fast-math intrinsics).
 *
 * Data: fixed seed; weights uniform with standard deviation 0.02 (GPT-2's init scale), biases
 * uniform in +-0.02, layernorm gains 1 + U(-0.1, 0.1) and shifts U(-0.1, 0.1), input U(-1, 1).
 *
 * The bias, GELU and residual-add kernels are registered as elementwise (gpt2_register, near the
 * end), so that modes default and max-autotune may fuse them.
 */
#include "bench_common.h"

#include <cublas_v2.h>

#include <math.h>
#include <string.h>

namespace
{

enum { LAYERS = 12, D = 768, HEADS = 12, HD = 64, T = 64, D3 = 3 * D, D4 = 4 * D };
const float LN_EPS = 1e-5f;
const float ONE = 1.0f, ZERO = 0.0f;
const float SCALE = 0.125f; /* 1 / sqrt(64), exact */

/* One layer's parameters, in this order, as offsets in floats (all multiples of 768 floats, so
 * every tensor is 256-byte aligned). */
enum {
    P_LN1_G = 0,
    P_LN1_B = P_LN1_G + D,
    P_WQKV = P_LN1_B + D,
    P_BQKV = P_WQKV + D3 * D,
    P_WO = P_BQKV + D3,
    P_BO = P_WO + D * D,
    P_LN2_G = P_BO + D,
    P_LN2_B = P_LN2_G + D,
    P_WFC = P_LN2_B + D,
    P_BFC = P_WFC + D4 * D,
    P_WFC2 = P_BFC + D4,
    P_BFC2 = P_WFC2 + D * D4,
    P_LAYER = P_BFC2 + D,
};
const size_t P_FINAL = (size_t)LAYERS * P_LAYER; /* final layernorm gain, then shift */
const size_t P_TOTAL = P_FINAL + 2 * D;

enum { WARPS_PER_BLOCK = 4, ROW_THREADS = 32 * WARPS_PER_BLOCK, EW_THREADS = 256 };

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* out[r] = (in[r] - mean) / sqrt(var + eps) * g + b per row r of `cols`; one warp per row,
 * two passes (mean, then the mean of squared deviations: the biased variance, as PyTorch). */
__global__ void layernorm_kernel(float *out, const float *in, const float *g, const float *b, int rows, int cols,
                                 float eps)
{
    int row = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float *x = in + (size_t)row * cols;
    float *y = out + (size_t)row * cols;
    float s = 0.0f;
    for (int i = lane; i < cols; i += 32) s += x[i];
    float mean = warp_sum(s) / (float)cols;
    float v = 0.0f;
    for (int i = lane; i < cols; i += 32) {
        float d = x[i] - mean;
        v += d * d;
    }
    float rstd = 1.0f / sqrtf(warp_sum(v) / (float)cols + eps);
    for (int i = lane; i < cols; i += 32) y[i] = (x[i] - mean) * rstd * g[i] + b[i];
}

/* x[r][c] += b[c] over rows x cols. */
__global__ void bias_kernel(float *x, const float *b, int rows, int cols)
{
    int n = rows * cols;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] += b[i % cols];
}

/* out = a + b over n floats (out may be a). */
__global__ void add_kernel(float *out, const float *a, const float *b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = a[i] + b[i];
}

/* x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place. */
__global__ void gelu_kernel(float *x, int n)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}

/* Causal softmax in place over rows of t scores, rows = heads * t; row r is query i = r % t and
 * keys j <= i take part; P[i][j] = 0 for j > i. One warp per row. */
__global__ void causal_softmax_kernel(float *s, int rows, int t)
{
    int row = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    int q = row % t;
    float *x = s + (size_t)row * t;
    float m = -INFINITY;
    for (int j = lane; j <= q; j += 32) m = fmaxf(m, x[j]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j <= q; j += 32) sum += expf(x[j] - m);
    sum = warp_sum(sum);
    for (int j = lane; j < t; j += 32) x[j] = j <= q ? expf(x[j] - m) / sum : 0.0f;
}

int ew_grid(int n)
{
    return (n + EW_THREADS - 1) / EW_THREADS;
}
int row_grid(int rows)
{
    return (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
}

struct acts {
    float *h, *a, *qkv, *s, *attn, *p, *f, *out;
};

struct gpt2 {
    model_data_t d; /* first: model_data_arena reads it */
    model_blas_t blas;
    acts act[MODEL_SETS];
};

void *gpt2_create(cudaStream_t s, int keep_host)
{
    gpt2 *m = (gpt2 *)bench_host_calloc(sizeof *m);
    model_blas_create(&m->blas, s);

    float *hp = (float *)bench_host_alloc(P_TOTAL * sizeof(float));
    float *hx = (float *)bench_host_alloc((size_t)T * D * sizeof(float));
    uint64_t rng = 0x6770743200c0ffeeull;
    const float wb = 0.02f * sqrtf(3.0f); /* U(-wb, wb) has standard deviation 0.02 */
    for (int l = 0; l < LAYERS; l++) {
        float *p = hp + (size_t)l * P_LAYER;
        bench_fill_uniform(p + P_LN1_G, D, &rng, 0.9f, 1.1f);
        bench_fill_uniform(p + P_LN1_B, D, &rng, -0.1f, 0.1f);
        bench_fill_uniform(p + P_WQKV, (size_t)D3 * D, &rng, -wb, wb);
        bench_fill_uniform(p + P_BQKV, D3, &rng, -0.02f, 0.02f);
        bench_fill_uniform(p + P_WO, (size_t)D * D, &rng, -wb, wb);
        bench_fill_uniform(p + P_BO, D, &rng, -0.02f, 0.02f);
        bench_fill_uniform(p + P_LN2_G, D, &rng, 0.9f, 1.1f);
        bench_fill_uniform(p + P_LN2_B, D, &rng, -0.1f, 0.1f);
        bench_fill_uniform(p + P_WFC, (size_t)D4 * D, &rng, -wb, wb);
        bench_fill_uniform(p + P_BFC, D4, &rng, -0.02f, 0.02f);
        bench_fill_uniform(p + P_WFC2, (size_t)D * D4, &rng, -wb, wb);
        bench_fill_uniform(p + P_BFC2, D, &rng, -0.02f, 0.02f);
    }
    bench_fill_uniform(hp + P_FINAL, D, &rng, 0.9f, 1.1f);
    bench_fill_uniform(hp + P_FINAL + D, D, &rng, -0.1f, 0.1f);
    bench_fill_uniform(hx, (size_t)T * D, &rng, -1.0f, 1.0f);
    model_data_upload(&m->d, hp, P_TOTAL, hx, (size_t)T * D, keep_host);

    const size_t sizes[8] = {(size_t)T * D, (size_t)T * D, (size_t)T * D3, (size_t)HEADS * T * T,
                             (size_t)T * D, (size_t)T * D, (size_t)T * D4, (size_t)T * D};
    size_t arena_bytes = 0;
    for (int i = 0; i < 8; i++) arena_bytes += bench_align(sizes[i] * sizeof(float));
    model_data_arenas(&m->d, arena_bytes);
    for (int set = 0; set < MODEL_SETS; set++) {
        float **slots[8] = {&m->act[set].h,    &m->act[set].a, &m->act[set].qkv, &m->act[set].s,
                            &m->act[set].attn, &m->act[set].p, &m->act[set].f,   &m->act[set].out};
        char *p = (char *)m->d.arena[set];
        for (int i = 0; i < 8; i++) {
            *slots[i] = (float *)p;
            p += bench_align(sizes[i] * sizeof(float));
        }
    }
    CHECK(cudaDeviceSynchronize());
    return m;
}

/* y (T x out) = x (T x in) W^T, W [out][in]; then y += b. */
int linear(gpt2 *m, float *y, const float *x, const float *w, const float *b, int in, int out, cudaStream_t s,
           char *err, size_t errlen)
{
    STEP_CUBLAS(cublasSgemm_v2(m->blas.h, CUBLAS_OP_T, CUBLAS_OP_N, out, T, in, &ONE, w, in, x, in, &ZERO, y, out));
    bias_kernel<<<ew_grid(T * out), EW_THREADS, 0, s>>>(y, b, T, out);
    STEP_LAUNCHED();
    return 0;
}

int gpt2_step(void *ctx, int set, cudaStream_t s, char *err, size_t errlen)
{
    gpt2 *m = (gpt2 *)ctx;
    const acts *a = &m->act[set];
    for (int l = 0; l < LAYERS; l++) {
        const float *p = m->d.params + (size_t)l * P_LAYER;
        const float *h_in = l == 0 ? m->d.x : a->h;
        layernorm_kernel<<<row_grid(T), ROW_THREADS, 0, s>>>(a->a, h_in, p + P_LN1_G, p + P_LN1_B, T, D, LN_EPS);
        STEP_LAUNCHED();
        if (linear(m, a->qkv, a->a, p + P_WQKV, p + P_BQKV, D, D3, s, err, errlen)) return -1;
        /* S_h (T x T, [query][key]) = Q_h K_h^T / 8: column-major S^T = op_T(K) * Q. */
        STEP_CUBLAS(cublasSgemmStridedBatched(m->blas.h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, HD, &SCALE, a->qkv + D, D3, HD,
                                              a->qkv, D3, HD, &ZERO, a->s, T, (long long)T * T, HEADS));
        causal_softmax_kernel<<<row_grid(HEADS * T), ROW_THREADS, 0, s>>>(a->s, HEADS * T, T);
        STEP_LAUNCHED();
        /* attn[:, h*64:(h+1)*64] (T x 64) = P_h V_h: column-major attn^T = V^T * P^T. */
        STEP_CUBLAS(cublasSgemmStridedBatched(m->blas.h, CUBLAS_OP_N, CUBLAS_OP_N, HD, T, T, &ONE, a->qkv + 2 * D, D3,
                                              HD, a->s, T, (long long)T * T, &ZERO, a->attn, D, HD, HEADS));
        if (linear(m, a->p, a->attn, p + P_WO, p + P_BO, D, D, s, err, errlen)) return -1;
        add_kernel<<<ew_grid(T * D), EW_THREADS, 0, s>>>(a->h, h_in, a->p, T * D);
        STEP_LAUNCHED();
        layernorm_kernel<<<row_grid(T), ROW_THREADS, 0, s>>>(a->a, a->h, p + P_LN2_G, p + P_LN2_B, T, D, LN_EPS);
        STEP_LAUNCHED();
        if (linear(m, a->f, a->a, p + P_WFC, p + P_BFC, D, D4, s, err, errlen)) return -1;
        gelu_kernel<<<ew_grid(T * D4), EW_THREADS, 0, s>>>(a->f, T * D4);
        STEP_LAUNCHED();
        if (linear(m, a->p, a->f, p + P_WFC2, p + P_BFC2, D4, D, s, err, errlen)) return -1;
        add_kernel<<<ew_grid(T * D), EW_THREADS, 0, s>>>(a->h, a->h, a->p, T * D);
        STEP_LAUNCHED();
    }
    layernorm_kernel<<<row_grid(T), ROW_THREADS, 0, s>>>(a->out, a->h, m->d.params + P_FINAL, m->d.params + P_FINAL + D,
                                                         T, D, LN_EPS);
    STEP_LAUNCHED();
    return 0;
}

void gpt2_output(void *ctx, int set, const float **out, size_t *count)
{
    gpt2 *m = (gpt2 *)ctx;
    *out = m->act[set].out;
    *count = (size_t)T * D;
}

/* ---- the host reference, in double ---- */

void ref_layernorm(double *y, const double *x, const float *g, const float *b)
{
    for (int r = 0; r < T; r++) {
        const double *xr = x + (size_t)r * D;
        double mean = 0.0, var = 0.0;
        for (int i = 0; i < D; i++) mean += xr[i];
        mean /= D;
        for (int i = 0; i < D; i++) var += (xr[i] - mean) * (xr[i] - mean);
        double rstd = 1.0 / sqrt(var / D + (double)LN_EPS);
        for (int i = 0; i < D; i++) y[(size_t)r * D + i] = (xr[i] - mean) * rstd * g[i] + b[i];
    }
}

void ref_linear(double *y, const double *x, const float *w, const float *b, int in, int out)
{
    for (int r = 0; r < T; r++)
        for (int o = 0; o < out; o++) {
            double acc = 0.0;
            const float *wo = w + (size_t)o * in;
            const double *xr = x + (size_t)r * in;
            for (int i = 0; i < in; i++) acc += xr[i] * wo[i];
            y[(size_t)r * out + o] = acc + b[o];
        }
}

void gpt2_reference(void *ctx, double *ref)
{
    gpt2 *m = (gpt2 *)ctx;
    double *h = (double *)bench_host_alloc((size_t)T * D * sizeof(double));
    double *a = (double *)bench_host_alloc((size_t)T * D * sizeof(double));
    double *qkv = (double *)bench_host_alloc((size_t)T * D3 * sizeof(double));
    double *attn = (double *)bench_host_alloc((size_t)T * D * sizeof(double));
    double *p = (double *)bench_host_alloc((size_t)T * D * sizeof(double));
    double *f = (double *)bench_host_alloc((size_t)T * D4 * sizeof(double));
    for (size_t i = 0; i < (size_t)T * D; i++) h[i] = m->d.host_x[i];
    for (int l = 0; l < LAYERS; l++) {
        const float *pp = m->d.host_params + (size_t)l * P_LAYER;
        ref_layernorm(a, h, pp + P_LN1_G, pp + P_LN1_B);
        ref_linear(qkv, a, pp + P_WQKV, pp + P_BQKV, D, D3);
        for (int hh = 0; hh < HEADS; hh++)
            for (int i = 0; i < T; i++) {
                double sc[T], mx = -INFINITY, sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    double dot = 0.0;
                    for (int d = 0; d < HD; d++)
                        dot += qkv[(size_t)i * D3 + hh * HD + d] * qkv[(size_t)j * D3 + D + hh * HD + d];
                    sc[j] = dot * SCALE;
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j <= i; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int d = 0; d < HD; d++) {
                    double acc = 0.0;
                    for (int j = 0; j <= i; j++) acc += sc[j] / sum * qkv[(size_t)j * D3 + 2 * D + hh * HD + d];
                    attn[(size_t)i * D + hh * HD + d] = acc;
                }
            }
        ref_linear(p, attn, pp + P_WO, pp + P_BO, D, D);
        for (size_t i = 0; i < (size_t)T * D; i++) h[i] += p[i];
        ref_layernorm(a, h, pp + P_LN2_G, pp + P_LN2_B);
        ref_linear(f, a, pp + P_WFC, pp + P_BFC, D, D4);
        for (size_t i = 0; i < (size_t)T * D4; i++) {
            double v = f[i];
            f[i] = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        }
        ref_linear(p, f, pp + P_WFC2, pp + P_BFC2, D4, D);
        for (size_t i = 0; i < (size_t)T * D; i++) h[i] += p[i];
    }
    ref_layernorm(ref, h, m->d.host_params + P_FINAL, m->d.host_params + P_FINAL + D);
    free(h);
    free(a);
    free(qkv);
    free(attn);
    free(p);
    free(f);
}

/* The elementwise kernels, registered for modes default and max-autotune (bench_common.h).
 * Where one follows another with the same element count, cgjit may fuse them: per layer the
 * projection's bias with the residual add after it, the MLP's first bias with the GELU, and its
 * second bias with the residual add: 3 chains of 2 kernels (36 chains of 72 kernels per step).
 * The QKV bias is followed by a GEMM and stays alone. Each spec says what its kernel computes,
 * in the kernel's parameter order; gelu_tanh is the kernel's expression with the same float
 * constants (sqrt(2/pi): 0.7978845608028654f here and the spec language's 0.79788456080286536f
 * are both 0x3f4c422a). layernorm and the causal softmax read whole rows: not elementwise, left
 * opaque. */
int gpt2_register(void)
{
    int refused = 0;
    refused += bench_register_elementwise((const void *)bias_kernel, "bias_kernel",
                                          "(inout float x, in float b[i % cols], count int rows, count int cols): "
                                          "x = x + b") != 0;
    refused += bench_register_elementwise((const void *)add_kernel, "add_kernel",
                                          "(out float y, in float a, in float b, count int n): y = a + b") != 0;
    refused += bench_register_elementwise((const void *)gelu_kernel, "gelu_kernel",
                                          "(inout float x, count int n): x = gelu_tanh(x)") != 0;
    return refused;
}

void gpt2_destroy(void *ctx)
{
    gpt2 *m = (gpt2 *)ctx;
    model_data_free(&m->d);
    model_blas_destroy(&m->blas);
    free(m);
}

} // namespace

const model_desc_t model_gpt2 = {
    "gpt2",
    "12-layer GPT-2-small-shaped transformer forward, d 768, 12 heads, T 64, batch 1, fp32: per "
    "layer layernorm, QKV (cublasSgemm_v2 + bias), attention (2 cublasSgemmStridedBatched + causal "
    "softmax), projection + bias, residual add, layernorm, MLP 768-3072 GELU(tanh)-768 (+biases), "
    "residual add; final layernorm",
    LAYERS * 16 + 1,
    gpt2_create,
    gpt2_step,
    model_data_arena,
    gpt2_output,
    gpt2_reference,
    gpt2_destroy,
    gpt2_register,
};
