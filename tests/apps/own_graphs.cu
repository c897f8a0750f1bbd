/*
 * own_graphs — a program that makes CUDA graphs of its own, as llama.cpp's decoder and NVIDIA's
 * simpleCudaGraphs do. Each "token" uploads its input, runs a chain of small kernels whose last
 * one writes a checksum, reads the checksum back and synchronizes; the chain is issued three ways
 * over the run, the way such programs switch:
 *   - tokens 0..EAGER_END-1: plain launches on a created stream (llama.cpp runs the prompt, and
 *     any step its graph checks turn down, without graphs);
 *   - tokens EAGER_END..ONCE_END-1: one graph captured once, before the first of them, and
 *     launched every token; the token's position reaches the kernels through device memory
 *     (simpleCudaGraphs: capture once, launch many);
 *   - tokens ONCE_END..ITERS-1: a graph captured every token (the position is a kernel argument
 *     that changes) in relaxed capture mode, the executable graph updated in place with
 *     cudaGraphExecUpdate and instantiated again only when the update is refused (llama.cpp's
 *     decode loop); every other token captures with cudaStreamBeginCaptureToGraph into a fresh
 *     graph instead of cudaStreamBeginCapture.
 * The input comes from a pinned buffer the host rewrites every token after the synchronization.
 * stdout: each token's checksum; stderr: the median time of the last TIMED_LAST tokens (the
 * per-token capture loop).
 */
#include "apps_common.h"

enum { N = 4096, BLOCK = 256, GRID = N / BLOCK, LAYERS = 16 };
enum { ITERS = 300, EAGER_END = 60, ONCE_END = 120, TIMED_LAST = 100 };

/* x = tanh-ish mix of x and the input, shifted by the position (a kernel argument). */
__global__ void embed(float *x, const float *in, int pos, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.5f * in[i] + 0.001f * (float)((pos * 7 + i) % 97);
}

/* The same, with the position read from device memory (a graph captured once). */
__global__ void embed_dev(float *x, const float *in, const int *pos, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.5f * in[i] + 0.001f * (float)((*pos * 7 + i) % 97);
}

__global__ void layer(float *y, const float *x, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a * x[i] + b * x[(i + 1) % n];
        y[i] = v / (1.0f + fabsf(v));
    }
}

struct bufs {
    float *x, *y, *in;
    int *pos;
    unsigned long long *sum;
};

/* The chain after the embedding: LAYERS layers, ping-ponging x and y, and the checksum of x. */
static void chain(const bufs &b, cudaStream_t s)
{
    for (int l = 0; l < LAYERS; l++) {
        const float *src = l % 2 ? b.y : b.x;
        float *dst = l % 2 ? b.x : b.y;
        layer<<<GRID, BLOCK, 0, s>>>(dst, src, 0.9f - 0.01f * (float)l, 0.05f + 0.002f * (float)l, N);
    }
    app_checksum_kernel<<<1, APP_CHECKSUM_THREADS, 0, s>>>(b.x, N, b.sum);
}

/* The token's whole chain, captured into a graph: with cudaStreamBeginCapture, or into a fresh
 * graph with cudaStreamBeginCaptureToGraph. */
static cudaGraph_t capture(const bufs &b, cudaStream_t s, int pos, bool to_graph)
{
    cudaGraph_t g = NULL;
    if (to_graph) {
        CHECK(cudaGraphCreate(&g, 0));
        CHECK(cudaStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, cudaStreamCaptureModeRelaxed));
    } else {
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    }
    embed<<<GRID, BLOCK, 0, s>>>(b.x, b.in, pos, N);
    chain(b, s);
    CHECK(cudaStreamEndCapture(s, &g));
    return g;
}

int main(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    bufs b;
    float *h_in;
    unsigned long long *h_sum;
    CHECK(cudaMalloc(&b.x, N * sizeof(float)));
    CHECK(cudaMalloc(&b.y, N * sizeof(float)));
    CHECK(cudaMalloc(&b.in, N * sizeof(float)));
    CHECK(cudaMalloc(&b.pos, sizeof(int)));
    CHECK(cudaMalloc(&b.sum, sizeof *b.sum));
    CHECK(cudaMallocHost(&h_in, N * sizeof(float) + sizeof(int)));
    CHECK(cudaMallocHost(&h_sum, sizeof *h_sum));
    int *h_pos = (int *)(h_in + N);

    uint64_t rng = 31337;
    cudaGraphExec_t once = NULL, exec = NULL;
    int reinstantiated = 0;
    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        app_fill_uniform(h_in, N, &rng, -1.0f, 1.0f);
        *h_pos = it;
        CHECK(cudaMemcpyAsync(b.in, h_in, N * sizeof(float), cudaMemcpyHostToDevice, s));
        if (it < EAGER_END) {
            embed<<<GRID, BLOCK, 0, s>>>(b.x, b.in, it, N);
            chain(b, s);
            CHECK_LAST();
        } else if (it < ONCE_END) {
            if (!once) { /* captured once: the position comes from device memory */
                cudaGraph_t g;
                CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                embed_dev<<<GRID, BLOCK, 0, s>>>(b.x, b.in, b.pos, N);
                chain(b, s);
                CHECK(cudaStreamEndCapture(s, &g));
                CHECK(cudaGraphInstantiate(&once, g, 0));
                CHECK(cudaGraphDestroy(g));
            }
            CHECK(cudaMemcpyAsync(b.pos, h_pos, sizeof(int), cudaMemcpyHostToDevice, s));
            CHECK(cudaGraphLaunch(once, s));
        } else {
            cudaGraph_t g = capture(b, s, it, it % 2 == 1);
            if (exec) {
                cudaGraphExecUpdateResultInfo info;
                if (cudaGraphExecUpdate(exec, g, &info) != cudaSuccess) {
                    (void)cudaGetLastError(); /* the refusal is the last error: clear it */
                    CHECK(cudaGraphExecDestroy(exec));
                    exec = NULL;
                    reinstantiated++;
                }
            }
            if (!exec) CHECK(cudaGraphInstantiate(&exec, g, 0));
            CHECK(cudaGraphDestroy(g));
            CHECK(cudaGraphLaunch(exec, s));
        }
        CHECK(cudaMemcpyAsync(h_sum, b.sum, sizeof *h_sum, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        t_us[it] = app_now_us() - t0;
        printf("token %3d %s sum=%016llx\n", it, it < EAGER_END ? "eager" : it < ONCE_END ? "once " : "captd", *h_sum);
    }
    /* An update is refused only where the topology changed, which it never does here. */
    printf("instantiated again: %d\n", reinstantiated);

    if (once) CHECK(cudaGraphExecDestroy(once));
    if (exec) CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(b.x));
    CHECK(cudaFree(b.y));
    CHECK(cudaFree(b.in));
    CHECK(cudaFree(b.pos));
    CHECK(cudaFree(b.sum));
    CHECK(cudaFreeHost(h_in));
    CHECK(cudaFreeHost(h_sum));
    app_report_time("own_graphs", t_us, ITERS, TIMED_LAST);
    return 0;
}
