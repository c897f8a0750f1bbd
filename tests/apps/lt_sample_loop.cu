/*
 * lt_sample_loop — llm.c's pattern: a training-like loop of cuBLASLt matmuls, each call asking
 * the library's heuristic for an algorithm and running it with a workspace, and every SAMPLE_EVERY
 * steps a "sample": matmuls of other shapes (one row at a time, as generation makes them) between
 * the steps. The library keeps state across calls that no argument shows (its heuristic caches,
 * what the sample's shapes left in the workspace); a replay that skipped the library on the
 * strength of two earlier steps could launch what no longer holds after a sample.
 *
 * Each step: H = W1 X (bf16 in, fp32 accumulate, bf16 out), X' = tanh-like mix of H, Y = W2 X'
 * (fp32), a checksum of Y read back (the step's synchronization). Prints one line per step and
 * one per sample. cuBLASLt is deterministic for a given algorithm on one stream.
 */
#include "apps_common.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#define CHECK_LT(call)                                                                      \
    do {                                                                                    \
        cublasStatus_t st_ = (call);                                                        \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, (int)st_); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

enum { C = 256, OC = 768, ROWS = 256, ITERS = 300, SAMPLE_EVERY = 50, SAMPLE_TOKENS = 8, TIMED_LAST = 100 };
enum { WS_BYTES = 32 << 20 };

static cublasLtHandle_t lt;
static void *ws;

/* out (m x n, column-major) = a^T (k x m) b (k x n), as llm.c's matmul_cublaslt asks for it. */
static void matmul(void *out, const void *a, const void *b, int m, int n, int k, cudaDataType_t t, cudaStream_t s)
{
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CHECK_LT(cublasLtMatrixLayoutCreate(&la, t, k, m, k));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lb, t, k, n, k));
    CHECK_LT(cublasLtMatrixLayoutCreate(&lc, t, m, n, m));
    cublasLtMatmulPreference_t pref;
    size_t wsb = WS_BYTES;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &h, &found));
    if (!found) {
        fprintf(stderr, "lt_sample_loop: no algorithm for %dx%dx%d\n", m, n, k);
        exit(1);
    }
    const float one = 1.0f, zero = 0.0f;
    CHECK_LT(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, out, lc, out, lc, &h.algo, ws, WS_BYTES, s));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
}

__global__ void to_bf16(__nv_bfloat16 *o, const float *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        o[i] = __float2bfloat16(x[i]);
}

/* x = 0.5 x + 0.5 tanh(h): the state moves every step and stays bounded. */
__global__ void mix(float *x, const __nv_bfloat16 *h, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = 0.5f * x[i] + 0.5f * tanhf(__bfloat162float(h[i % (OC * ROWS)]) * 0.05f);
}

int main(void)
{
    static float h_w1[C * OC], h_w2[C * C], h_x[C * ROWS];
    uint64_t rng = 7;
    app_fill_uniform(h_w1, C * OC, &rng, -1.0f, 1.0f);
    app_fill_uniform(h_w2, C * C, &rng, -1.0f, 1.0f);
    app_fill_uniform(h_x, C * ROWS, &rng, -1.0f, 1.0f);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK_LT(cublasLtCreate(&lt));
    CHECK(cudaMalloc(&ws, WS_BYTES));
    float *w1f, *w2, *x, *y;
    __nv_bfloat16 *w1, *xb, *hb;
    unsigned long long *d_sum, *h_sum;
    CHECK(cudaMalloc(&w1f, sizeof h_w1));
    CHECK(cudaMalloc(&w1, C * OC * sizeof *w1));
    CHECK(cudaMalloc(&w2, sizeof h_w2));
    CHECK(cudaMalloc(&x, sizeof h_x));
    CHECK(cudaMalloc(&xb, C * ROWS * sizeof *xb));
    CHECK(cudaMalloc(&hb, OC * ROWS * sizeof *hb));
    CHECK(cudaMalloc(&y, C * ROWS * sizeof *y));
    CHECK(cudaMalloc(&d_sum, sizeof *d_sum));
    CHECK(cudaMallocHost(&h_sum, sizeof *h_sum));
    CHECK(cudaMemcpy(w1f, h_w1, sizeof h_w1, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w2, h_w2, sizeof h_w2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(x, h_x, sizeof h_x, cudaMemcpyHostToDevice));
    to_bf16<<<64, 256, 0, s>>>(w1, w1f, C * OC);
    CHECK(cudaStreamSynchronize(s));

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        to_bf16<<<64, 256, 0, s>>>(xb, x, C * ROWS);
        matmul(hb, w1, xb, OC, ROWS, C, CUDA_R_16BF, s); /* H (OC x ROWS) */
        mix<<<64, 256, 0, s>>>(x, hb, C * ROWS);
        matmul(y, w2, x, C, ROWS, C, CUDA_R_32F, s); /* Y (C x ROWS) */
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, s>>>(y, C * ROWS, d_sum);
        CHECK_LAST();
        CHECK(cudaMemcpyAsync(h_sum, d_sum, sizeof *h_sum, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        t_us[it] = app_now_us() - t0;
        printf("step %3d sum=%016llx\n", it, *h_sum);
        if (it % SAMPLE_EVERY != SAMPLE_EVERY - 1) continue;
        for (int tok = 1; tok <= SAMPLE_TOKENS; tok++) { /* the sample: one, two, ... rows */
            to_bf16<<<64, 256, 0, s>>>(xb, x, C * tok);
            matmul(hb, w1, xb, OC, tok, C, CUDA_R_16BF, s);
            matmul(y, w2, x, C, tok, C, CUDA_R_32F, s);
            app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, s>>>(y, C * tok, d_sum);
            CHECK(cudaMemcpyAsync(h_sum, d_sum, sizeof *h_sum, cudaMemcpyDeviceToHost, s));
            CHECK(cudaStreamSynchronize(s));
            printf("  sample %d sum=%016llx\n", tok, *h_sum);
        }
    }
    CHECK_LT(cublasLtDestroy(lt));
    app_report_time("lt_sample_loop", t_us, ITERS, TIMED_LAST);
    return 0;
}
