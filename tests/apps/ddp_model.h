/*
 * ddp_model.h — a data-parallel training step, written as a CUDA C program would write it: an
 * MLP trained with cuBLAS and kernels of its own, its gradients summed over the ranks with NCCL
 * every step. Shared by the sample program tests/apps/ddp_trainer.cu and cgjit-bench's `ddp`
 * workload; it knows nothing of cgjit.
 *
 * One rank: one GPU, one stream, one cuBLAS handle, one communicator. The net (column-major,
 * batch B per rank): H = relu(W1 X + b1), Y = W2 H + b2, loss = mean((Y - T)^2), where the
 * target T = Wt X comes from a fixed teacher. Each step:
 *   batch      a kernel makes X from (seed, rank, step): every rank trains on its own data
 *   teacher    T = Wt X                                       cublasSgemm
 *   forward    H = W1 X, bias + relu, Y = W2 H, bias          2 cublasSgemm, 2 kernels
 *   loss       dY = 2 (Y - T) / (O B), loss (one block, fixed order: deterministic)
 *   backward   dW2 = dY H^T, db2; dH = W2^T dY, relu'; dW1 = dH X^T, db1   3 cublasSgemm, 3 kernels
 *   all-reduce layer 2's gradients, then layer 1's (buckets, as PyTorch's DDP sends them), then
 *              the loss: three ncclAllReduce (sum) on the rank's stream
 *   update     AdamW over all parameters, gradients scaled by 1/ranks; the step's bias
 *              corrections are host scalars that change every step
 *   readback   the summed loss into pinned memory, cudaStreamSynchronize
 * Every rank ends each step with the same weights. cuBLAS without atomics, NCCL's sum and the
 * kernels here are deterministic, so a program's output is the same bits on every run.
 */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DDP_CK(call)                                                                             \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)
#define DDP_CKB(call)                                                                                  \
    do {                                                                                               \
        cublasStatus_t st_ = (call);                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cublasGetStatusString(st_)); \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)
#define DDP_CKN(call)                                                                              \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { DDP_D = 256, DDP_H = 512, DDP_O = 128, DDP_B = 64, DDP_THREADS = 256 };
/* Parameters, one block: W1 (H x D), b1 (H), W2 (O x H), b2 (O). Layer 2 first: its gradients
 * are ready first and go out in the first bucket. */
enum {
    DDP_OFF_W2 = 0,
    DDP_OFF_B2 = DDP_OFF_W2 + DDP_O * DDP_H,
    DDP_OFF_W1 = DDP_OFF_B2 + DDP_O,
    DDP_OFF_B1 = DDP_OFF_W1 + DDP_H * DDP_D,
    DDP_NPARAM = DDP_OFF_B1 + DDP_H
};

typedef struct ddp_rank {
    int rank, nranks;
    cudaStream_t s;
    cublasHandle_t h;
    ncclComm_t comm;
    float *w, *g, *m, *v; /* parameters, gradients, Adam moments: DDP_NPARAM each */
    float *wt;            /* the teacher, O x D */
    float *x, *t, *hid, *y, *dy, *dh;
    float *loss;   /* device: this rank's loss, then the sum over ranks */
    float *h_loss; /* pinned */
} ddp_rank_t;

__device__ static inline uint32_t ddp_hash(uint32_t x)
{
    x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
    return x;
}

__global__ static void ddp_batch(float *x, int n, uint32_t seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = (float)(ddp_hash(seed ^ ddp_hash((uint32_t)i)) >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

__global__ static void ddp_init_kernel(float *p, int n, uint32_t seed, float scale)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = ((float)(ddp_hash(seed ^ ddp_hash((uint32_t)i)) >> 8) * (1.0f / 8388608.0f) - 1.0f) * scale;
}

/* a (rows x cols) += bias per row, then relu where asked. */
__global__ static void ddp_bias_act(float *a, const float *bias, int rows, int cols, int relu)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    float v = a[i] + bias[i % rows];
    a[i] = relu && v < 0.0f ? 0.0f : v;
}

/* dY = 2 (Y - T) / n and the loss: one block, each thread a fixed stride, then a tree. */
__global__ static void ddp_loss(const float *y, const float *t, float *dy, float *loss, int n)
{
    __shared__ float part[DDP_THREADS];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float d = y[i] - t[i];
        dy[i] = 2.0f * d / (float)n;
        acc += d * d;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = part[0] / (float)n;
}

/* db[r] = sum over columns of d (rows x cols); dh *= relu'(h) first where h is given. */
__global__ static void ddp_bias_grad(float *d, const float *h, float *db, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int c = 0; c < cols; c++) {
        float v = d[r + c * rows];
        if (h && h[r + c * rows] <= 0.0f) d[r + c * rows] = v = 0.0f;
        acc += v;
    }
    db[r] = acc;
}

__global__ static void ddp_adamw(float *w, const float *g, float *m, float *v, int n, float lr, float gscale, float bc1,
                                 float bc2)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i] * gscale;
    m[i] = 0.9f * m[i] + 0.1f * gi;
    v[i] = 0.999f * v[i] + 0.001f * gi * gi;
    w[i] -= lr * ((m[i] / bc1) / (sqrtf(v[i] / bc2) + 1e-8f) + 0.01f * w[i]);
}

static inline int ddp_blocks(int n)
{
    return (n + DDP_THREADS - 1) / DDP_THREADS;
}

/* Set up rank `rank` of `nranks` on the current device, with its communicator. The weights
 * are the same on every rank (fixed seeds). */
static inline void ddp_create(ddp_rank_t *r, int rank, int nranks, ncclComm_t comm)
{
    memset(r, 0, sizeof *r);
    r->rank = rank, r->nranks = nranks, r->comm = comm;
    DDP_CK(cudaStreamCreateWithFlags(&r->s, cudaStreamNonBlocking));
    DDP_CKB(cublasCreate(&r->h));
    DDP_CKB(cublasSetStream(r->h, r->s));
    DDP_CKB(cublasSetMathMode(r->h, CUBLAS_DEFAULT_MATH));
    float **bufs[] = {&r->w, &r->g, &r->m, &r->v};
    for (int i = 0; i < 4; i++) DDP_CK(cudaMalloc(bufs[i], DDP_NPARAM * sizeof(float)));
    DDP_CK(cudaMalloc(&r->wt, DDP_O * DDP_D * sizeof(float)));
    DDP_CK(cudaMalloc(&r->x, DDP_D * DDP_B * sizeof(float)));
    DDP_CK(cudaMalloc(&r->t, DDP_O * DDP_B * sizeof(float)));
    DDP_CK(cudaMalloc(&r->y, DDP_O * DDP_B * sizeof(float)));
    DDP_CK(cudaMalloc(&r->dy, DDP_O * DDP_B * sizeof(float)));
    DDP_CK(cudaMalloc(&r->hid, DDP_H * DDP_B * sizeof(float)));
    DDP_CK(cudaMalloc(&r->dh, DDP_H * DDP_B * sizeof(float)));
    DDP_CK(cudaMalloc(&r->loss, sizeof(float)));
    DDP_CK(cudaMallocHost(&r->h_loss, sizeof(float)));
    ddp_init_kernel<<<ddp_blocks(DDP_NPARAM), DDP_THREADS, 0, r->s>>>(r->w, DDP_NPARAM, 7u, 0.05f);
    ddp_init_kernel<<<ddp_blocks(DDP_O * DDP_D), DDP_THREADS, 0, r->s>>>(r->wt, DDP_O * DDP_D, 99u, 0.1f);
    DDP_CK(cudaMemsetAsync(r->m, 0, DDP_NPARAM * sizeof(float), r->s));
    DDP_CK(cudaMemsetAsync(r->v, 0, DDP_NPARAM * sizeof(float), r->s));
    DDP_CK(cudaStreamSynchronize(r->s));
}

/* Training step `step` (from 0); returns the loss summed over the ranks. */
static inline float ddp_step(ddp_rank_t *r, int step)
{
    const float one = 1.0f, zero = 0.0f;
    const int D = DDP_D, H = DDP_H, O = DDP_O, B = DDP_B;
    float *w1 = r->w + DDP_OFF_W1, *b1 = r->w + DDP_OFF_B1, *w2 = r->w + DDP_OFF_W2, *b2 = r->w + DDP_OFF_B2;
    float *gw1 = r->g + DDP_OFF_W1, *gb1 = r->g + DDP_OFF_B1, *gw2 = r->g + DDP_OFF_W2, *gb2 = r->g + DDP_OFF_B2;
    uint32_t seed = (uint32_t)step * 7919u + (uint32_t)r->rank * 104729u + 1u;
    ddp_batch<<<ddp_blocks(D * B), DDP_THREADS, 0, r->s>>>(r->x, D * B, seed);
    DDP_CKB(cublasSgemm(r->h, CUBLAS_OP_N, CUBLAS_OP_N, O, B, D, &one, r->wt, O, r->x, D, &zero, r->t, O));
    /* forward */
    DDP_CKB(cublasSgemm(r->h, CUBLAS_OP_N, CUBLAS_OP_N, H, B, D, &one, w1, H, r->x, D, &zero, r->hid, H));
    ddp_bias_act<<<ddp_blocks(H * B), DDP_THREADS, 0, r->s>>>(r->hid, b1, H, B, 1);
    DDP_CKB(cublasSgemm(r->h, CUBLAS_OP_N, CUBLAS_OP_N, O, B, H, &one, w2, O, r->hid, H, &zero, r->y, O));
    ddp_bias_act<<<ddp_blocks(O * B), DDP_THREADS, 0, r->s>>>(r->y, b2, O, B, 0);
    ddp_loss<<<1, DDP_THREADS, 0, r->s>>>(r->y, r->t, r->dy, r->loss, O * B);
    /* backward: layer 2, then its bucket goes out while layer 1 is computed */
    DDP_CKB(cublasSgemm(r->h, CUBLAS_OP_N, CUBLAS_OP_T, O, H, B, &one, r->dy, O, r->hid, H, &zero, gw2, O));
    ddp_bias_grad<<<ddp_blocks(O), DDP_THREADS, 0, r->s>>>(r->dy, NULL, gb2, O, B);
    DDP_CKB(cublasSgemm(r->h, CUBLAS_OP_T, CUBLAS_OP_N, H, B, O, &one, w2, O, r->dy, O, &zero, r->dh, H));
    DDP_CKN(ncclAllReduce(r->g + DDP_OFF_W2, r->g + DDP_OFF_W2, DDP_OFF_W1 - DDP_OFF_W2, ncclFloat, ncclSum, r->comm,
                          r->s));
    ddp_bias_grad<<<ddp_blocks(H), DDP_THREADS, 0, r->s>>>(r->dh, r->hid, gb1, H, B);
    DDP_CKB(cublasSgemm(r->h, CUBLAS_OP_N, CUBLAS_OP_T, H, D, B, &one, r->dh, H, r->x, D, &zero, gw1, H));
    DDP_CKN(ncclAllReduce(r->g + DDP_OFF_W1, r->g + DDP_OFF_W1, DDP_NPARAM - DDP_OFF_W1, ncclFloat, ncclSum, r->comm,
                          r->s));
    DDP_CKN(ncclAllReduce(r->loss, r->loss, 1, ncclFloat, ncclSum, r->comm, r->s));
    /* update */
    float bc1 = 1.0f - powf(0.9f, (float)(step + 1)), bc2 = 1.0f - powf(0.999f, (float)(step + 1));
    ddp_adamw<<<ddp_blocks(DDP_NPARAM), DDP_THREADS, 0, r->s>>>(r->w, r->g, r->m, r->v, DDP_NPARAM, 1e-3f,
                                                                1.0f / (float)r->nranks, bc1, bc2);
    DDP_CK(cudaGetLastError());
    DDP_CK(cudaMemcpyAsync(r->h_loss, r->loss, sizeof(float), cudaMemcpyDeviceToHost, r->s));
    DDP_CK(cudaStreamSynchronize(r->s));
    return *r->h_loss;
}

/* A checksum of the weights: any changed bit changes it. */
static inline uint64_t ddp_checksum(const ddp_rank_t *r)
{
    float *h = (float *)malloc(DDP_NPARAM * sizeof(float));
    if (!h) exit(1);
    DDP_CK(cudaMemcpy(h, r->w, DDP_NPARAM * sizeof(float), cudaMemcpyDeviceToHost));
    uint64_t sum = 0;
    for (uint32_t i = 0; i < DDP_NPARAM; i++) {
        uint32_t bits;
        memcpy(&bits, &h[i], sizeof bits);
        uint64_t x = bits ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull);
        x = (x ^ (x >> 33)) * 0xFF51AFD7ED558CCDull;
        sum += x ^ (x >> 29);
    }
    free(h);
    return sum;
}

static inline void ddp_destroy(ddp_rank_t *r)
{
    float *bufs[] = {r->w, r->g, r->m, r->v, r->wt, r->x, r->t, r->y, r->dy, r->hid, r->dh, r->loss};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) DDP_CK(cudaFree(bufs[i]));
    DDP_CK(cudaFreeHost(r->h_loss));
    DDP_CKB(cublasDestroy(r->h));
    DDP_CK(cudaStreamDestroy(r->s));
}

#endif /* DDP_MODEL_H */
