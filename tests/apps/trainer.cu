/*
 * trainer — a training loop in the shape of llm.c's train_gpt2.cu, in miniature and in fp32: a
 * GPT-like model (token and position embeddings, L pre-LayerNorm blocks of causal self-attention
 * and a GELU MLP, a final LayerNorm and an untied output layer), trained with AdamW on batches of
 * tokens that the host generates and uploads every step.
 *
 * One step, all on the legacy stream, as llm.c issues it:
 *  - two cudaMemcpy of the batch's input and target token ids from pageable buffers (the host
 *    generates them from a fixed-seed generator: a noisy bigram language the model can learn);
 *  - forward: encoder, per block LayerNorm, QKV (cublasSgemm + bias kernel), attention (this
 *    program's kernels), projection (cublasLtMatmul with a bias epilogue), residual, LayerNorm,
 *    MLP up (cublasGemmEx + bias kernel), GELU, MLP down (cublasLtMatmul + bias epilogue),
 *    residual; final LayerNorm, logits (cublasSgemm), fused softmax-crossentropy forward and
 *    backward, the mean loss;
 *  - cudaMemsetAsync of the whole gradient buffer to zero (zero-grad), then backward: the
 *    matching kernels and GEMMs (cuBLAS, cuBLASLt for the projections' input gradients), in
 *    reverse;
 *  - AdamW: one kernel per parameter tensor (77 tensors), with host scalars that change every
 *    step: the learning rate (linear warmup, then cosine decay), the bias corrections
 *    1 - beta1^t and 1 - beta2^t, and the weight decay (weights only, not biases or norms);
 *  - cudaMemcpy of the mean loss to the host (the step's only synchronization).
 * About 200 kernels of this program and 75 cuBLAS/cuBLASLt calls per step. The cuBLASLt
 * algorithms are chosen once at setup (cublasLtMatmulAlgoGetHeuristic). No TF32 (default math
 * mode, CUBLAS_COMPUTE_32F), one stream, and every reduction of this program's kernels runs in a
 * fixed order (no float atomics), so two runs print the same bits. The kernels are parallel, as
 * llm.c's are, so each takes a few microseconds: a warp per row for LayerNorm and the fused
 * crossentropy, a warp per query (a lane per key position) or per key for attention, a block
 * per group of columns with a tree over row slices for the bias and LayerNorm parameter
 * gradients, one block's tree for the mean loss, a block per token id for the embedding
 * gradient. stdout: the learning rate and the loss of every step as hex floats, and a checksum
 * of the parameters at the end.
 */
#include "apps_common.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <math.h>

/* Model and batch. */
enum { V = 128, T = 32, B = 4, C = 64, NH = 4, HS = C / NH, L = 6, BT = B * T };
enum { STEPS = 250, TIMED_LAST = 100, WARMUP = 25 };
static const float LR_MAX = 3e-3f, LR_MIN = 3e-4f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f;
static const float WEIGHT_DECAY = 0.1f;

/* ---- parameters: one buffer, tensors at offsets (all multiples of 64 floats: 256 B aligned) */

enum {
    P_LN1W,
    P_LN1B,
    P_QKVW,
    P_QKVB,
    P_PROJW,
    P_PROJB,
    P_LN2W,
    P_LN2B,
    P_FCW,
    P_FCB,
    P_FCPROJW,
    P_FCPROJB,
    NLAYER_PARAMS
};
enum { T_WTE, T_WPE, T_LAYERS, T_LNFW = T_LAYERS + L * NLAYER_PARAMS, T_LNFB, T_LMHEAD, NTENSOR };

struct tensor {
    size_t off;
    int n;
    int decay;  /* weight decay applies (matrices and embeddings) */
    float init; /* uniform(-init, init); init < 0: constant -init (LayerNorm weights: 1) */
};

static struct tensor tensors[NTENSOR];

static void layout_tensors(size_t *total)
{
    const float in_c = 1.0f / sqrtf((float)C), in_4c = 1.0f / sqrtf(4.0f * C);
    const float res_scale = 1.0f / sqrtf(2.0f * L); /* residual projections, as GPT-2 scales */
    const struct {
        int n, decay;
        float init;
    } layer[NLAYER_PARAMS] = {
        {C, 0, -1.0f},
        {C, 0, 0.0f},
        {3 * C * C, 1, in_c},
        {3 * C, 0, 0.0f},
        {C * C, 1, in_c * res_scale},
        {C, 0, 0.0f},
        {C, 0, -1.0f},
        {C, 0, 0.0f},
        {4 * C * C, 1, in_c},
        {4 * C, 0, 0.0f},
        {4 * C * C, 1, in_4c * res_scale},
        {C, 0, 0.0f},
    };
    size_t off = 0;
    for (int k = 0; k < NTENSOR; k++) {
        struct tensor *t = &tensors[k];
        int j = (k - T_LAYERS) % NLAYER_PARAMS;
        switch (k) {
        case T_WTE: t->n = V * C, t->decay = 1, t->init = 0.1f; break;
        case T_WPE: t->n = T * C, t->decay = 1, t->init = 0.05f; break;
        case T_LNFW: t->n = C, t->decay = 0, t->init = -1.0f; break;
        case T_LNFB: t->n = C, t->decay = 0, t->init = 0.0f; break;
        case T_LMHEAD: t->n = V * C, t->decay = 1, t->init = in_c; break;
        default: t->n = layer[j].n, t->decay = layer[j].decay, t->init = layer[j].init; break;
        }
        t->off = off;
        off += (size_t)t->n;
    }
    *total = off;
}

static int layer_tensor(int l, int p)
{
    return T_LAYERS + l * NLAYER_PARAMS + p;
}

/* ---- activations: one arena, carved once --------------------------------------------------- */

struct layer_acts {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fchg;
};

struct acts {
    float *res[L + 1]; /* the residual stream entering each block; res[L] leaves the last */
    struct layer_acts layer[L];
    float *tmp, *lnf, *lnf_mean, *lnf_rstd, *logits, *dlogits, *losses, *loss;
    /* backward scratch */
    float *dres, *dln, *dqkv, *datty, *dpreatt, *dfch;
};

/* A bump allocator over one device buffer; with no base it only counts (the sizing pass). */
struct arena {
    float *base;
    size_t used;
};

static float *carve(struct arena *ar, size_t n)
{
    float *p = ar->base ? ar->base + ar->used : NULL;
    ar->used += (n + 63) / 64 * 64;
    return p;
}

/* Points a's buffers into base (NULL: sizing only); returns the floats needed. */
static size_t layout_acts(struct acts *a, float *base)
{
    struct arena ar = {base, 0}, *p = &ar;
    for (int l = 0; l <= L; l++) a->res[l] = carve(p, BT * C);
    for (int l = 0; l < L; l++) {
        struct layer_acts *la = &a->layer[l];
        la->ln1 = carve(p, BT * C);
        la->ln1_mean = carve(p, BT);
        la->ln1_rstd = carve(p, BT);
        la->qkv = carve(p, BT * 3 * C);
        la->att = carve(p, B * NH * T * T);
        la->atty = carve(p, BT * C);
        la->res2 = carve(p, BT * C);
        la->ln2 = carve(p, BT * C);
        la->ln2_mean = carve(p, BT);
        la->ln2_rstd = carve(p, BT);
        la->fch = carve(p, BT * 4 * C);
        la->fchg = carve(p, BT * 4 * C);
    }
    a->tmp = carve(p, BT * C);
    a->lnf = carve(p, BT * C);
    a->lnf_mean = carve(p, BT);
    a->lnf_rstd = carve(p, BT);
    a->logits = carve(p, BT * V);
    a->dlogits = carve(p, BT * V);
    a->losses = carve(p, BT);
    a->loss = carve(p, 1);
    a->dres = carve(p, BT * C);
    a->dln = carve(p, BT * C);
    a->dqkv = carve(p, BT * 3 * C);
    a->datty = carve(p, BT * C);
    a->dpreatt = carve(p, B * NH * T * T);
    a->dfch = carve(p, BT * 4 * C);
    return ar.used;
}

/* ---- kernels ------------------------------------------------------------------------------ */

static int blocks(int n, int block)
{
    return (n + block - 1) / block;
}

/* Every reduction below runs in an order fixed by the indices alone: a warp's butterfly of
 * __shfl_xor_sync (each step adds the same two values in every lane, so all lanes end with the
 * same bits), a shared-memory tree of fixed shape, or a loop in index order. No float atomics. */
enum { WARP = 32, ROWS_PER_BLOCK = 4, ROW_BLOCK = ROWS_PER_BLOCK * WARP };
/* The grid of blocks of ROW_BLOCK threads for one warp per item. */
static int warp_grid(int items)
{
    return blocks(items * WARP, ROW_BLOCK);
}

/* Column sums: a block of COLS_X columns by COLS_Y row slices, summed by a tree over the slices. */
enum { COLS_X = 32, COLS_Y = 16 };
enum { LOSS_BLOCK = 128 };

static_assert(C % WARP == 0 && V % WARP == 0, "rows are split evenly over a warp's lanes");
static_assert((int)T == (int)WARP, "attention: one lane per position of the sequence");
static_assert(2 * HS <= WARP, "attention_bwd_kv: one lane per channel of k and of v");
static_assert(BT % WARP == 0, "encoder_bwd_wte: whole warps of tokens");
static_assert((COLS_Y & (COLS_Y - 1)) == 0 && (LOSS_BLOCK & (LOSS_BLOCK - 1)) == 0,
              "tree reductions over powers of two");

__device__ __forceinline__ float warp_sum(float v)
{
    for (int k = WARP / 2; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int k = WARP / 2; k > 0; k >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, k));
    return v;
}

/* The warp's index in the grid when every warp handles one item (row, query, key...). The
 * whole warp shares it, so a warp leaves or stays as one and its shuffles see all 32 lanes. */
__device__ __forceinline__ int warp_item(void)
{
    return (int)((blockIdx.x * blockDim.x + threadIdx.x) / WARP);
}

__global__ void encoder_fwd(float *out, const int *tokens, const float *wte, const float *wpe)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= BT * C) return;
    int r = i / C, c = i % C, t = r % T;
    out[i] = wte[tokens[r] * C + c] + wpe[t * C + c];
}

/* One warp per row: mean, reciprocal standard deviation, normalized and scaled output. */
__global__ void layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                              int n)
{
    int r = warp_item(), lane = threadIdx.x % WARP;
    if (r >= n) return;
    const float *x = inp + (size_t)r * C;
    float xs[C / WARP];
    float m = 0.0f;
    for (int k = 0; k < C / WARP; k++) {
        xs[k] = x[lane + k * WARP];
        m += xs[k];
    }
    m = warp_sum(m) / (float)C;
    float v = 0.0f;
    for (int k = 0; k < C / WARP; k++) v += (xs[k] - m) * (xs[k] - m);
    v = warp_sum(v);
    float s = 1.0f / sqrtf(v / (float)C + 1e-5f);
    for (int k = 0; k < C / WARP; k++) {
        int c = lane + k * WARP;
        out[(size_t)r * C + c] = (xs[k] - m) * s * w[c] + b[c];
    }
    if (lane == 0) {
        mean[r] = m;
        rstd[r] = s;
    }
}

/* One warp per row: dinp (+)= the input gradient of a LayerNorm row. */
__global__ void layernorm_bwd_inp(float *dinp, const float *dout, const float *inp, const float *w, const float *mean,
                                  const float *rstd, int n, int accumulate)
{
    int r = warp_item(), lane = threadIdx.x % WARP;
    if (r >= n) return;
    const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
    float m = mean[r], s = rstd[r], dmean = 0.0f, dnorm_norm = 0.0f;
    float dn[C / WARP], nm[C / WARP];
    for (int k = 0; k < C / WARP; k++) {
        int c = lane + k * WARP;
        dn[k] = dy[c] * w[c];
        nm[k] = (x[c] - m) * s;
        dmean += dn[k];
        dnorm_norm += dn[k] * nm[k];
    }
    dmean = warp_sum(dmean) / (float)C;
    dnorm_norm = warp_sum(dnorm_norm) / (float)C;
    for (int k = 0; k < C / WARP; k++) {
        float dx = (dn[k] - dmean - nm[k] * dnorm_norm) * s;
        float *d = &dinp[(size_t)r * C + lane + k * WARP];
        *d = accumulate ? *d + dx : dx;
    }
}

/* A block of COLS_X channels by COLS_Y row slices (grid: blocks(C, COLS_X)): each thread sums
 * the rows y, y + COLS_Y, ... of its channel in order, then a tree over the slices;
 * dw += sum over rows of dout * norm, db += sum of dout. */
__global__ void layernorm_bwd_params(float *dw, float *db, const float *dout, const float *inp, const float *mean,
                                     const float *rstd, int n)
{
    __shared__ float shw[COLS_Y][COLS_X], shb[COLS_Y][COLS_X];
    int x = threadIdx.x, y = threadIdx.y, c = blockIdx.x * COLS_X + x;
    float sw = 0.0f, sb = 0.0f;
    if (c < C)
        for (int r = y; r < n; r += COLS_Y) {
            float dy = dout[(size_t)r * C + c];
            sw += dy * (inp[(size_t)r * C + c] - mean[r]) * rstd[r];
            sb += dy;
        }
    shw[y][x] = sw;
    shb[y][x] = sb;
    __syncthreads();
    for (int k = COLS_Y / 2; k > 0; k >>= 1) {
        if (y < k) {
            shw[y][x] += shw[y + k][x];
            shb[y][x] += shb[y + k][x];
        }
        __syncthreads();
    }
    if (y == 0 && c < C) {
        dw[c] += shw[0][x];
        db[c] += shb[0][x];
    }
}

__global__ void add_bias(float *out, const float *bias, int n, int oc)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * oc) out[i] += bias[i % oc];
}

/* dbias += column sums of dout (n rows, oc columns); blocks as layernorm_bwd_params's
 * (grid: blocks(oc, COLS_X)). */
__global__ void bias_grad(float *dbias, const float *dout, int n, int oc)
{
    __shared__ float sh[COLS_Y][COLS_X];
    int x = threadIdx.x, y = threadIdx.y, c = blockIdx.x * COLS_X + x;
    float s = 0.0f;
    if (c < oc)
        for (int r = y; r < n; r += COLS_Y) s += dout[(size_t)r * oc + c];
    sh[y][x] = s;
    __syncthreads();
    for (int k = COLS_Y / 2; k > 0; k >>= 1) {
        if (y < k) sh[y][x] += sh[y + k][x];
        __syncthreads();
    }
    if (y == 0 && c < oc) dbias[c] += sh[0][x];
}

/* One warp per (batch, head, query position t), one lane per key position t2 (T == 32): causal
 * softmax attention of one head. qkv rows hold q | k | v, each C wide, head h at columns h*HS.
 * att: [B, NH, T, T]. Launch with ROW_BLOCK threads per block. */
__global__ void attention_fwd(float *atty, float *att, const float *qkv)
{
    __shared__ float prob[ROWS_PER_BLOCK][T];
    int i = warp_item(), lane = threadIdx.x % WARP, wib = threadIdx.x / WARP;
    if (i >= B * NH * T) return;
    int t = i % T, h = (i / T) % NH, b = i / (T * NH), t2 = lane;
    const float scale = 1.0f / sqrtf((float)HS);
    const float *q = qkv + (size_t)(b * T + t) * 3 * C + h * HS;
    float *arow = att + ((size_t)(b * NH + h) * T + t) * T;
    float s = -INFINITY;
    if (t2 <= t) {
        const float *k = qkv + (size_t)(b * T + t2) * 3 * C + C + h * HS;
        s = 0.0f;
        for (int j = 0; j < HS; j++) s += q[j] * k[j];
        s *= scale;
    }
    float maxv = warp_max(s); /* lane 0 (t2 = 0 <= t) always holds a finite score */
    float e = t2 <= t ? expf(s - maxv) : 0.0f;
    float sum = warp_sum(e);
    float inv = 1.0f / sum;
    float p = t2 <= t ? e * inv : 0.0f;
    arow[t2] = p;
    prob[wib][t2] = p;
    __syncwarp();
    if (lane < HS) {
        int j = lane;
        float y = 0.0f;
        for (int u = 0; u <= t; u++) y += prob[wib][u] * qkv[(size_t)(b * T + u) * 3 * C + 2 * C + h * HS + j];
        atty[(size_t)(b * T + t) * C + h * HS + j] = y;
    }
}

/* One warp per (batch, head, query position t), one lane per key position t2: the gradient of
 * the pre-softmax scores (dpreatt) and of q. Launch with ROW_BLOCK threads per block. */
__global__ void attention_bwd_q(float *dqkv, float *dpreatt, const float *datty, const float *qkv, const float *att)
{
    __shared__ float dpre[ROWS_PER_BLOCK][T];
    int i = warp_item(), lane = threadIdx.x % WARP, wib = threadIdx.x / WARP;
    if (i >= B * NH * T) return;
    int t = i % T, h = (i / T) % NH, b = i / (T * NH), t2 = lane;
    const float scale = 1.0f / sqrtf((float)HS);
    const float *dy = datty + (size_t)(b * T + t) * C + h * HS;
    const float *arow = att + ((size_t)(b * NH + h) * T + t) * T;
    float *drow = dpreatt + ((size_t)(b * NH + h) * T + t) * T;
    float a = arow[t2], d = 0.0f; /* d: dL/datt[t2] */
    if (t2 <= t) {
        const float *v = qkv + (size_t)(b * T + t2) * 3 * C + 2 * C + h * HS;
        for (int j = 0; j < HS; j++) d += dy[j] * v[j];
    }
    float dsum = warp_sum(t2 <= t ? a * d : 0.0f);
    float dp = t2 <= t ? a * (d - dsum) : 0.0f;
    drow[t2] = dp;
    dpre[wib][t2] = dp;
    __syncwarp();
    if (lane < HS) {
        int j = lane;
        float dq = 0.0f;
        for (int u = 0; u <= t; u++) dq += dpre[wib][u] * qkv[(size_t)(b * T + u) * 3 * C + C + h * HS + j];
        dqkv[(size_t)(b * T + t) * 3 * C + h * HS + j] = dq * scale;
    }
}

/* One warp per (batch, head, key position t2): lanes 0..HS-1 the gradient of k's channels,
 * lanes WARP/2.. that of v's, each summed over the query positions t >= t2 in order (after
 * attention_bwd_q wrote dpreatt). Launch with ROW_BLOCK threads per block. */
__global__ void attention_bwd_kv(float *dqkv, const float *dpreatt, const float *datty, const float *qkv,
                                 const float *att)
{
    int i = warp_item(), lane = threadIdx.x % WARP;
    if (i >= B * NH * T) return;
    int t2 = i % T, h = (i / T) % NH, b = i / (T * NH);
    int is_v = lane >= WARP / 2, j = lane % (WARP / 2);
    if (j >= HS) return; /* no shuffles below */
    const float scale = 1.0f / sqrtf((float)HS);
    float s = 0.0f;
    for (int t = t2; t < T; t++) {
        size_t a = ((size_t)(b * NH + h) * T + t) * T + t2;
        if (is_v) s += att[a] * datty[(size_t)(b * T + t) * C + h * HS + j];
        else s += dpreatt[a] * qkv[(size_t)(b * T + t) * 3 * C + h * HS + j];
    }
    if (is_v) dqkv[(size_t)(b * T + t2) * 3 * C + 2 * C + h * HS + j] = s;
    else dqkv[(size_t)(b * T + t2) * 3 * C + C + h * HS + j] = s * scale;
}

#define GELU_S 0.7978845608f /* sqrt(2 / pi) */

__global__ void gelu_fwd(float *out, const float *inp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(GELU_S * (x + 0.044715f * x * x * x)));
}

/* In place: d = d * gelu'(x). */
__global__ void gelu_bwd(float *d, const float *inp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = inp[i];
    float u = GELU_S * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
    d[i] *= local;
}

__global__ void residual_fwd(float *out, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

/* One warp per row: the loss of the row and dlogits = (softmax - onehot) / n. */
__global__ void crossentropy_fwd_bwd(float *losses, float *dlogits, const float *logits, const int *targets, int n)
{
    int r = warp_item(), lane = threadIdx.x % WARP;
    if (r >= n) return;
    const float *z = logits + (size_t)r * V;
    float zs[V / WARP];
    float maxv = -INFINITY;
    for (int k = 0; k < V / WARP; k++) {
        zs[k] = z[lane + k * WARP];
        maxv = fmaxf(maxv, zs[k]);
    }
    maxv = warp_max(maxv);
    float sum = 0.0f;
    for (int k = 0; k < V / WARP; k++) sum += expf(zs[k] - maxv);
    sum = warp_sum(sum);
    int y = targets[r];
    if (lane == 0) losses[r] = logf(sum) + maxv - z[y];
    float inv = 1.0f / sum;
    for (int k = 0; k < V / WARP; k++) {
        int v = lane + k * WARP;
        float p = expf(zs[k] - maxv) * inv;
        dlogits[(size_t)r * V + v] = (p - (v == y ? 1.0f : 0.0f)) / (float)n;
    }
}

/* One block of LOSS_BLOCK threads: *loss = mean of the rows' losses (each thread sums the rows
 * tid, tid + LOSS_BLOCK, ... in order, then a shared-memory tree). */
__global__ void mean_loss(float *loss, const float *losses, int n)
{
    __shared__ float sh[LOSS_BLOCK];
    int tid = threadIdx.x;
    float s = 0.0f;
    for (int r = tid; r < n; r += LOSS_BLOCK) s += losses[r];
    sh[tid] = s;
    __syncthreads();
    for (int k = LOSS_BLOCK / 2; k > 0; k >>= 1) {
        if (tid < k) sh[tid] += sh[tid + k];
        __syncthreads();
    }
    if (tid == 0) *loss = sh[0] / (float)n;
}

/* One block per token id v, C threads (one per channel): the rows whose token is v are found
 * with a ballot per warp of rows, then dwte[v] += those rows, in row order. */
__global__ void encoder_bwd_wte(float *dwte, const float *dout, const int *tokens)
{
    __shared__ unsigned hits[BT / WARP];
    int v = blockIdx.x, tid = threadIdx.x;
    for (int base = 0; base < BT; base += blockDim.x) { /* blockDim.x: a multiple of WARP */
        int r = base + tid;
        unsigned m = __ballot_sync(0xffffffffu, r < BT && tokens[r] == v);
        if (tid % WARP == 0 && r < BT) hits[r / WARP] = m;
    }
    __syncthreads();
    int c = tid;
    if (c >= C) return;
    float s = 0.0f;
    for (int w = 0; w < BT / WARP; w++)
        for (unsigned m = hits[w]; m; m &= m - 1) s += dout[(size_t)(w * WARP + __ffs(m) - 1) * C + c];
    dwte[(size_t)v * C + c] += s;
}

__global__ void encoder_bwd_wpe(float *dwpe, const float *dout)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * C) return;
    int t = i / C, c = i % C;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += dout[(size_t)(b * T + t) * C + c];
    dwpe[i] += s;
}

__global__ void adamw(float *p, const float *g, float *m, float *v, int n, float lr, float beta1, float beta2,
                      float bc1, float bc2, float eps, float wd)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
    float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p[i]);
}

/* ---- GEMMs: row-major out[n, oc] = inp[n, ic] @ w[oc, ic]^T, as llm.c maps them ------------ */

static cublasHandle_t cublas;
static cublasLtHandle_t lt;
static void *lt_ws;
static const size_t LT_WS_BYTES = 4u << 20;
static const float ONE = 1.0f, ZERO = 0.0f;

static void sgemm_fwd(float *out, const float *inp, const float *w, int n, int ic, int oc)
{
    CHECK_CUBLAS(cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, oc, n, ic, &ONE, w, ic, inp, ic, &ZERO, out, oc));
}

static void gemmex_fwd(float *out, const float *inp, const float *w, int n, int ic, int oc)
{
    CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, oc, n, ic, &ONE, w, CUDA_R_32F, ic, inp, CUDA_R_32F, ic,
                              &ZERO, out, CUDA_R_32F, oc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* dinp[n, ic] = dout[n, oc] @ w[oc, ic] */
static void sgemm_bwd_inp(float *dinp, const float *dout, const float *w, int n, int ic, int oc)
{
    CHECK_CUBLAS(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, ic, n, oc, &ONE, w, ic, dout, oc, &ZERO, dinp, ic));
}

static void gemmex_bwd_inp(float *dinp, const float *dout, const float *w, int n, int ic, int oc)
{
    CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, ic, n, oc, &ONE, w, CUDA_R_32F, ic, dout, CUDA_R_32F,
                              oc, &ZERO, dinp, CUDA_R_32F, ic, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* dw[oc, ic] += dout[n, oc]^T @ inp[n, ic] */
static void sgemm_bwd_w(float *dw, const float *dout, const float *inp, int n, int ic, int oc)
{
    CHECK_CUBLAS(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_T, ic, oc, n, &ONE, inp, ic, dout, oc, &ONE, dw, ic));
}

static void gemmex_bwd_w(float *dw, const float *dout, const float *inp, int n, int ic, int oc)
{
    CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_T, ic, oc, n, &ONE, inp, CUDA_R_32F, ic, dout, CUDA_R_32F,
                              oc, &ONE, dw, CUDA_R_32F, ic, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* A cuBLASLt matmul set up once: descriptors, layouts and the algorithm the heuristic chose. */
struct lt_gemm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
};

/* forward = 1: out[n, oc] = inp[n, ic] @ w^T + bias (bias epilogue; the bias pointer is set
 * before each call). forward = 0: dinp[n, ic] = dout[n, oc] @ w. Column-major, as cuBLAS sees
 * row-major matrices: forward is D(oc x n) = W^T(oc x ic) X(ic x n). */
static void lt_gemm_init(struct lt_gemm *g, int forward, int n, int ic, int oc)
{
    int32_t ta = forward ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (forward) {
        uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_32F, ic, oc, ic)); /* W */
        CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_32F, ic, n, ic));  /* X */
        CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&g->d, CUDA_R_32F, oc, n, oc));  /* out */
    } else {
        CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&g->a, CUDA_R_32F, ic, oc, ic)); /* W */
        CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&g->b, CUDA_R_32F, oc, n, oc));  /* dout */
        CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&g->d, CUDA_R_32F, ic, n, ic));  /* dinp */
    }
    cublasLtMatmulPreference_t pref;
    uint64_t ws = LT_WS_BYTES;
    CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, g->desc, g->a, g->b, g->d, g->d, pref, 1, &heur, &found));
    if (found < 1) {
        fprintf(stderr, "trainer: cuBLASLt has no algorithm for %s %dx%dx%d\n", forward ? "forward" : "backward", n, ic,
                oc);
        exit(1);
    }
    g->algo = heur.algo;
    CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(pref));
}

static void lt_gemm_destroy(struct lt_gemm *g)
{
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(g->a));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(g->b));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(g->d));
    CHECK_CUBLAS(cublasLtMatmulDescDestroy(g->desc));
}

static void lt_gemm_run(struct lt_gemm *g, float *d, const float *x, const float *w, const float *bias)
{
    if (bias)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    CHECK_CUBLAS(
        cublasLtMatmul(lt, g->desc, &ONE, w, g->a, x, g->b, &ZERO, d, g->d, d, g->d, &g->algo, lt_ws, LT_WS_BYTES, 0));
}

/* proj: C -> C, fcproj: 4C -> C; forward with the bias epilogue, backward for the input. */
static struct lt_gemm lt_proj_fwd, lt_fcproj_fwd, lt_proj_bwd, lt_fcproj_bwd;

/* ---- the step ----------------------------------------------------------------------------- */

struct model {
    float *params, *grads, *m, *v;
    size_t nparams;
    struct acts a;
    int *inputs, *targets; /* device, BT each */
};

static float *param(const struct model *md, int k)
{
    return md->params + tensors[k].off;
}

static float *grad(const struct model *md, int k)
{
    return md->grads + tensors[k].off;
}

static void forward(struct model *md)
{
    struct acts *a = &md->a;
    encoder_fwd<<<blocks(BT * C, 256), 256>>>(a->res[0], md->inputs, param(md, T_WTE), param(md, T_WPE));
    for (int l = 0; l < L; l++) {
        struct layer_acts *la = &a->layer[l];
#define P(x) param(md, layer_tensor(l, P_##x))
        layernorm_fwd<<<warp_grid(BT), ROW_BLOCK>>>(la->ln1, la->ln1_mean, la->ln1_rstd, a->res[l], P(LN1W), P(LN1B),
                                                    BT);
        sgemm_fwd(la->qkv, la->ln1, P(QKVW), BT, C, 3 * C);
        add_bias<<<blocks(BT * 3 * C, 256), 256>>>(la->qkv, P(QKVB), BT, 3 * C);
        attention_fwd<<<warp_grid(B * NH * T), ROW_BLOCK>>>(la->atty, la->att, la->qkv);
        lt_gemm_run(&lt_proj_fwd, a->tmp, la->atty, P(PROJW), P(PROJB));
        residual_fwd<<<blocks(BT * C, 256), 256>>>(la->res2, a->res[l], a->tmp, BT * C);
        layernorm_fwd<<<warp_grid(BT), ROW_BLOCK>>>(la->ln2, la->ln2_mean, la->ln2_rstd, la->res2, P(LN2W), P(LN2B),
                                                    BT);
        gemmex_fwd(la->fch, la->ln2, P(FCW), BT, C, 4 * C);
        add_bias<<<blocks(BT * 4 * C, 256), 256>>>(la->fch, P(FCB), BT, 4 * C);
        gelu_fwd<<<blocks(BT * 4 * C, 256), 256>>>(la->fchg, la->fch, BT * 4 * C);
        lt_gemm_run(&lt_fcproj_fwd, a->tmp, la->fchg, P(FCPROJW), P(FCPROJB));
        residual_fwd<<<blocks(BT * C, 256), 256>>>(a->res[l + 1], la->res2, a->tmp, BT * C);
#undef P
    }
    layernorm_fwd<<<warp_grid(BT), ROW_BLOCK>>>(a->lnf, a->lnf_mean, a->lnf_rstd, a->res[L], param(md, T_LNFW),
                                                param(md, T_LNFB), BT);
    sgemm_fwd(a->logits, a->lnf, param(md, T_LMHEAD), BT, C, V);
    crossentropy_fwd_bwd<<<warp_grid(BT), ROW_BLOCK>>>(a->losses, a->dlogits, a->logits, md->targets, BT);
    mean_loss<<<1, LOSS_BLOCK>>>(a->loss, a->losses, BT);
    CHECK_LAST();
}

static void backward(struct model *md)
{
    struct acts *a = &md->a;
    const dim3 cols_block(COLS_X, COLS_Y);
    sgemm_bwd_inp(a->dln, a->dlogits, param(md, T_LMHEAD), BT, C, V);
    sgemm_bwd_w(grad(md, T_LMHEAD), a->dlogits, a->lnf, BT, C, V);
    layernorm_bwd_inp<<<warp_grid(BT), ROW_BLOCK>>>(a->dres, a->dln, a->res[L], param(md, T_LNFW), a->lnf_mean,
                                                    a->lnf_rstd, BT, 0);
    layernorm_bwd_params<<<blocks(C, COLS_X), cols_block>>>(grad(md, T_LNFW), grad(md, T_LNFB), a->dln, a->res[L],
                                                            a->lnf_mean, a->lnf_rstd, BT);
    for (int l = L - 1; l >= 0; l--) {
        struct layer_acts *la = &a->layer[l];
#define P(x) param(md, layer_tensor(l, P_##x))
#define G(x) grad(md, layer_tensor(l, P_##x))
        /* dres = dL/d(res[l+1]) */
        lt_gemm_run(&lt_fcproj_bwd, a->dfch, a->dres, P(FCPROJW), NULL);
        sgemm_bwd_w(G(FCPROJW), a->dres, la->fchg, BT, 4 * C, C);
        bias_grad<<<blocks(C, COLS_X), cols_block>>>(G(FCPROJB), a->dres, BT, C);
        gelu_bwd<<<blocks(BT * 4 * C, 256), 256>>>(a->dfch, la->fch, BT * 4 * C);
        gemmex_bwd_inp(a->dln, a->dfch, P(FCW), BT, C, 4 * C);
        gemmex_bwd_w(G(FCW), a->dfch, la->ln2, BT, C, 4 * C);
        bias_grad<<<blocks(4 * C, COLS_X), cols_block>>>(G(FCB), a->dfch, BT, 4 * C);
        layernorm_bwd_inp<<<warp_grid(BT), ROW_BLOCK>>>(a->dres, a->dln, la->res2, P(LN2W), la->ln2_mean, la->ln2_rstd,
                                                        BT, 1);
        layernorm_bwd_params<<<blocks(C, COLS_X), cols_block>>>(G(LN2W), G(LN2B), a->dln, la->res2, la->ln2_mean,
                                                                la->ln2_rstd, BT);
        /* dres = dL/d(res2) */
        lt_gemm_run(&lt_proj_bwd, a->datty, a->dres, P(PROJW), NULL);
        sgemm_bwd_w(G(PROJW), a->dres, la->atty, BT, C, C);
        bias_grad<<<blocks(C, COLS_X), cols_block>>>(G(PROJB), a->dres, BT, C);
        attention_bwd_q<<<warp_grid(B * NH * T), ROW_BLOCK>>>(a->dqkv, a->dpreatt, a->datty, la->qkv, la->att);
        attention_bwd_kv<<<warp_grid(B * NH * T), ROW_BLOCK>>>(a->dqkv, a->dpreatt, a->datty, la->qkv, la->att);
        sgemm_bwd_inp(a->dln, a->dqkv, P(QKVW), BT, C, 3 * C);
        sgemm_bwd_w(G(QKVW), a->dqkv, la->ln1, BT, C, 3 * C);
        bias_grad<<<blocks(3 * C, COLS_X), cols_block>>>(G(QKVB), a->dqkv, BT, 3 * C);
        layernorm_bwd_inp<<<warp_grid(BT), ROW_BLOCK>>>(a->dres, a->dln, a->res[l], P(LN1W), la->ln1_mean, la->ln1_rstd,
                                                        BT, 1);
        layernorm_bwd_params<<<blocks(C, COLS_X), cols_block>>>(G(LN1W), G(LN1B), a->dln, a->res[l], la->ln1_mean,
                                                                la->ln1_rstd, BT);
        /* dres = dL/d(res[l]) */
#undef P
#undef G
    }
    encoder_bwd_wte<<<V, C>>>(grad(md, T_WTE), a->dres, md->inputs);
    encoder_bwd_wpe<<<blocks(T * C, 256), 256>>>(grad(md, T_WPE), a->dres);
    CHECK_LAST();
}

static void update(struct model *md, int t, float lr)
{
    float bc1 = 1.0f - powf(BETA1, (float)t), bc2 = 1.0f - powf(BETA2, (float)t);
    for (int k = 0; k < NTENSOR; k++) {
        const struct tensor *ts = &tensors[k];
        adamw<<<blocks(ts->n, 256), 256>>>(md->params + ts->off, md->grads + ts->off, md->m + ts->off, md->v + ts->off,
                                           ts->n, lr, BETA1, BETA2, bc1, bc2, EPS, ts->decay ? WEIGHT_DECAY : 0.0f);
    }
    CHECK_LAST();
}

/* Linear warmup over WARMUP steps, then cosine decay to LR_MIN at the last step. */
static float lr_at(int t)
{
    if (t <= WARMUP) return LR_MAX * (float)t / (float)WARMUP;
    float progress = (float)(t - WARMUP) / (float)(STEPS - WARMUP);
    return LR_MIN + 0.5f * (LR_MAX - LR_MIN) * (1.0f + cosf(3.14159265f * progress));
}

/* A noisy bigram language: mostly next = (5 * prev + 3 + position parity) % V, sometimes random. */
static void make_batch(int *inputs, int *targets, uint64_t *rng)
{
    for (int b = 0; b < B; b++) {
        int tok = (int)(app_rng_next(rng) % V);
        for (int t = 0; t <= T; t++) {
            if (t < T) inputs[b * T + t] = tok;
            if (t > 0) targets[b * T + t - 1] = tok;
            uint64_t r = app_rng_next(rng);
            tok = (r & 7) ? (5 * tok + 3 + (t & 1)) % V : (int)((r >> 8) % V);
        }
    }
}

int main(void)
{
    size_t nparams;
    layout_tensors(&nparams);
    float *h_params = (float *)malloc(nparams * sizeof(float));
    int *h_inputs = (int *)malloc(BT * sizeof(int)), *h_targets = (int *)malloc(BT * sizeof(int));
    if (!h_params || !h_inputs || !h_targets) {
        fprintf(stderr, "trainer: out of host memory\n");
        return 1;
    }
    uint64_t rng = 1337;
    for (int k = 0; k < NTENSOR; k++) {
        const struct tensor *ts = &tensors[k];
        if (ts->init < 0.0f)
            for (int i = 0; i < ts->n; i++) h_params[ts->off + i] = -ts->init;
        else app_fill_uniform(h_params + ts->off, (size_t)ts->n, &rng, -ts->init, ts->init);
    }

    struct model md;
    md.nparams = nparams;
    CHECK(cudaMalloc(&md.params, nparams * sizeof(float)));
    CHECK(cudaMalloc(&md.grads, nparams * sizeof(float)));
    CHECK(cudaMalloc(&md.m, nparams * sizeof(float)));
    CHECK(cudaMalloc(&md.v, nparams * sizeof(float)));
    CHECK(cudaMalloc(&md.inputs, BT * sizeof(int)));
    CHECK(cudaMalloc(&md.targets, BT * sizeof(int)));
    CHECK(cudaMemcpy(md.params, h_params, nparams * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(md.m, 0, nparams * sizeof(float)));
    CHECK(cudaMemset(md.v, 0, nparams * sizeof(float)));
    size_t nacts = layout_acts(&md.a, NULL);
    float *acts_base;
    CHECK(cudaMalloc(&acts_base, nacts * sizeof(float)));
    layout_acts(&md.a, acts_base);

    CHECK_CUBLAS(cublasCreate(&cublas));
    CHECK_CUBLAS(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));
    CHECK_CUBLAS(cublasLtCreate(&lt));
    CHECK(cudaMalloc(&lt_ws, LT_WS_BYTES));
    lt_gemm_init(&lt_proj_fwd, 1, BT, C, C);
    lt_gemm_init(&lt_fcproj_fwd, 1, BT, 4 * C, C);
    lt_gemm_init(&lt_proj_bwd, 0, BT, C, C);
    lt_gemm_init(&lt_fcproj_bwd, 0, BT, 4 * C, C);
    CHECK(cudaDeviceSynchronize());

    static double t_us[STEPS];
    for (int step = 1; step <= STEPS; step++) {
        make_batch(h_inputs, h_targets, &rng);
        float lr = lr_at(step);

        double t0 = app_now_us();
        CHECK(cudaMemcpy(md.inputs, h_inputs, BT * sizeof(int), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(md.targets, h_targets, BT * sizeof(int), cudaMemcpyHostToDevice));
        forward(&md);
        CHECK(cudaMemsetAsync(md.grads, 0, nparams * sizeof(float), 0));
        backward(&md);
        update(&md, step, lr);
        float loss;
        CHECK(cudaMemcpy(&loss, md.a.loss, sizeof loss, cudaMemcpyDeviceToHost));
        t_us[step - 1] = app_now_us() - t0;

        if (!isfinite(loss)) {
            fprintf(stderr, "trainer: step %d: loss %a\n", step, loss);
            return 1;
        }
        printf("step %3d lr=%a loss=%a\n", step, lr, loss);
    }

    unsigned long long *d_sum, sum;
    CHECK(cudaMalloc(&d_sum, sizeof *d_sum));
    app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(md.params, (int)nparams, d_sum);
    CHECK_LAST();
    CHECK(cudaMemcpy(&sum, d_sum, sizeof sum, cudaMemcpyDeviceToHost));
    printf("parameters %zu checksum %016llx\n", nparams, sum);

    lt_gemm_destroy(&lt_proj_fwd);
    lt_gemm_destroy(&lt_fcproj_fwd);
    lt_gemm_destroy(&lt_proj_bwd);
    lt_gemm_destroy(&lt_fcproj_bwd);
    CHECK_CUBLAS(cublasLtDestroy(lt));
    CHECK_CUBLAS(cublasDestroy(cublas));
    CHECK(cudaFree(lt_ws));
    CHECK(cudaFree(d_sum));
    CHECK(cudaFree(acts_base));
    CHECK(cudaFree(md.params));
    CHECK(cudaFree(md.grads));
    CHECK(cudaFree(md.m));
    CHECK(cudaFree(md.v));
    CHECK(cudaFree(md.inputs));
    CHECK(cudaFree(md.targets));
    free(h_params);
    free(h_inputs);
    free(h_targets);
    app_report_time("trainer", t_us, STEPS, TIMED_LAST);
    return 0;
}
