/*
 * device_as_host_src — a llama2.c-style decoder loop: each token's embedding row is copied from
 * a table that lives on the device with cudaMemcpy(x, row, n, cudaMemcpyHostToDevice), where
 * `row` is a *device* pointer (legal with unified addressing, and common in ports of CPU code).
 * Then a few kernels (rmsnorm-like scale, a matvec, an argmax) pick the next token, which the
 * host reads back to choose the next row: the step's copies follow the data.
 * stdout: the token sequence and a checksum; stderr: "device_as_host_src: median_us=<x>".
 */
#include "apps_common.h"

enum { VOCAB = 512, DIM = 256, STEPS = 300, TIMED_LAST = 200 };

__global__ void rmsnorm(float *x, int n)
{
    __shared__ float ss;
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < n; i++) s += x[i] * x[i];
        ss = rsqrtf(s / n + 1e-5f);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= ss;
}

__global__ void matvec(float *out, const float *w, const float *x, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.0f;
    for (int c = 0; c < cols; c++) s += w[(size_t)r * cols + c] * x[c];
    out[r] = s;
}

__global__ void argmax(const float *v, int n, int *best)
{
    if (threadIdx.x != 0) return;
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    *best = b;
}

int main(void)
{
    uint64_t rng = 42;
    float *h_table = (float *)malloc(sizeof(float) * VOCAB * DIM);
    float *h_w = (float *)malloc(sizeof(float) * VOCAB * DIM);
    app_fill_uniform(h_table, (size_t)VOCAB * DIM, &rng, -1.0f, 1.0f);
    app_fill_uniform(h_w, (size_t)VOCAB * DIM, &rng, -1.0f, 1.0f);
    float *d_table, *d_w, *d_x, *d_logits;
    int *d_tok;
    CHECK(cudaMalloc(&d_table, sizeof(float) * VOCAB * DIM));
    CHECK(cudaMalloc(&d_w, sizeof(float) * VOCAB * DIM));
    CHECK(cudaMalloc(&d_x, sizeof(float) * DIM));
    CHECK(cudaMalloc(&d_logits, sizeof(float) * VOCAB));
    CHECK(cudaMalloc(&d_tok, sizeof(int)));
    CHECK(cudaMemcpy(d_table, h_table, sizeof(float) * VOCAB * DIM, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_w, h_w, sizeof(float) * VOCAB * DIM, cudaMemcpyHostToDevice));

    int tok = 1;
    uint64_t sum = 0;
    double t[STEPS];
    printf("tokens:");
    for (int s = 0; s < STEPS; s++) {
        double t0 = app_now_us();
        /* the row is device memory, passed as the "host" source */
        CHECK(cudaMemcpy(d_x, d_table + (size_t)tok * DIM, sizeof(float) * DIM, cudaMemcpyHostToDevice));
        rmsnorm<<<1, 128>>>(d_x, DIM);
        matvec<<<(VOCAB + 127) / 128, 128>>>(d_logits, d_w, d_x, VOCAB, DIM);
        argmax<<<1, 32>>>(d_logits, VOCAB, d_tok);
        CHECK_LAST();
        CHECK(cudaMemcpy(&tok, d_tok, sizeof tok, cudaMemcpyDeviceToHost));
        t[s] = app_now_us() - t0;
        sum = sum * 31 + (uint64_t)tok;
        if (s < 40) printf(" %d", tok);
    }
    float h_x[DIM];
    CHECK(cudaMemcpy(h_x, d_x, sizeof h_x, cudaMemcpyDeviceToHost));
    printf("\nsequence hash %016llx, last x checksum %016llx\n", (unsigned long long)sum,
           (unsigned long long)app_checksum_host(h_x, DIM));
    app_report_time("device_as_host_src", t, STEPS, TIMED_LAST);
    return 0;
}
