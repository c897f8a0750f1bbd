/*
 * mapped_memory — memory that the host and the GPU both see, used the way NVIDIA's samples
 * (simpleZeroCopy, simpleCallback, asyncAPI, UnifiedMemoryStreams) use it:
 *   - zero-copy: the input and the output live in mapped pinned host memory
 *     (cudaHostAlloc(cudaHostAllocMapped), cudaHostGetDevicePointer); kernels read the input and
 *     write the output there directly, and the host rewrites the input and reads the output
 *     with no copy at all;
 *   - __constant__ coefficients set with cudaMemcpyToSymbol every iteration;
 *   - managed memory (cudaMallocManaged) that a kernel updates and the host reads and writes
 *     between iterations;
 *   - a host callback (cudaLaunchHostFunc) that reads the mapped output the kernels before it
 *     wrote and logs a value of it;
 *   - no synchronization call: the host waits by polling cudaStreamQuery (asyncAPI counts its
 *     polls while it does host work);
 *   - every FLAG_EVERY-th iteration a kernel sets a flag in mapped memory and the host spins on
 *     the flag (with a time limit) before polling the stream: a CPU-GPU handshake made of plain
 *     memory accesses, with no CUDA call while the host waits.
 * stdout: per iteration the output's and the managed buffer's checksums, the logged value and
 * whether the flag came; stderr: the median iteration time.
 */
#include "apps_common.h"

enum { N = 4096, BLOCK = 256, GRID = N / BLOCK, NCOEF = 16, STEPS = 8 };
enum { ITERS = 300, TIMED_LAST = 200, FLAG_EVERY = 4 };
#define FLAG_LIMIT_US 2e6 /* a flag that has not come after 2 s never will */

__constant__ float c_coef[NCOEF];

__global__ void load(float *x, const float *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = in[i] * c_coef[i % NCOEF];
}

/* One Jacobi sweep from x into y (a sweep in place would race: thread i reads x[i + 1], which
 * thread i + 1 of another warp or block may have overwritten, and the result would depend on
 * the order the GPU happened to run them in). */
__global__ void relax(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + a * (x[(i + 1) % n] - x[i]);
}

__global__ void store(float *out, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * x[i] - 0.25f;
}

__global__ void accumulate(float *m, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) m[i] = 0.75f * m[i] + x[i];
}

__global__ void set_flag(volatile int *flag, int v)
{
    __threadfence_system();
    *flag = v;
}

struct log_ctx {
    const float *out;
    float *log;
    int it;
};

static void CUDART_CB log_value(void *p)
{
    struct log_ctx *c = (struct log_ctx *)p;
    c->log[c->it] = c->out[c->it % N];
}

int main(void)
{
    CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float *h_in, *h_out, *d_in, *d_out, *d_x, *d_y, *m;
    int *h_flag, *d_flag;
    CHECK(cudaHostAlloc(&h_in, N * sizeof(float), cudaHostAllocMapped));
    CHECK(cudaHostAlloc(&h_out, N * sizeof(float), cudaHostAllocMapped));
    CHECK(cudaHostAlloc(&h_flag, sizeof(int), cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer(&d_in, h_in, 0));
    CHECK(cudaHostGetDevicePointer(&d_out, h_out, 0));
    CHECK(cudaHostGetDevicePointer(&d_flag, h_flag, 0));
    CHECK(cudaMalloc(&d_x, N * sizeof(float)));
    CHECK(cudaMalloc(&d_y, N * sizeof(float)));
    CHECK(cudaMallocManaged(&m, N * sizeof(float)));
    *h_flag = 0;

    uint64_t rng = 4242;
    static float log[ITERS];
    static double t_us[ITERS];
    float coef[NCOEF], h_m[N];
    app_fill_uniform(h_m, N, &rng, -1.0f, 1.0f);
    memcpy(m, h_m, sizeof h_m); /* the host writes managed memory directly */
    app_fill_uniform(h_in, N, &rng, -1.0f, 1.0f);
    struct log_ctx ctx = {h_out, log, 0};
    for (int it = 0; it < ITERS; it++) {
        double t0 = app_now_us();
        for (int k = 0; k < NCOEF; k++) coef[k] = 1.0f + 0.01f * (float)((it * 5 + k) % 13);
        CHECK(cudaMemcpyToSymbol(c_coef, coef, sizeof coef));
        load<<<GRID, BLOCK, 0, s>>>(d_x, d_in, N);
        for (int k = 0; k < STEPS; k++) { /* STEPS is even: the last sweep lands in d_x */
            float *from = k % 2 ? d_y : d_x, *to = k % 2 ? d_x : d_y;
            relax<<<GRID, BLOCK, 0, s>>>(to, from, 0.1f + 0.01f * (float)k, N);
        }
        store<<<GRID, BLOCK, 0, s>>>(d_out, d_x, N);
        accumulate<<<GRID, BLOCK, 0, s>>>(m, d_x, N);
        CHECK_LAST();
        ctx.it = it;
        CHECK(cudaLaunchHostFunc(s, log_value, &ctx));
        const char *flag = "-";
        if (it % FLAG_EVERY == 0) {
            set_flag<<<1, 1, 0, s>>>(d_flag, it + 1);
            CHECK_LAST();
            double limit = app_now_us() + FLAG_LIMIT_US;
            while (*(volatile int *)h_flag != it + 1 && app_now_us() < limit) {}
            flag = *(volatile int *)h_flag == it + 1 ? "came" : "timed out";
        }
        unsigned long polls = 0;
        cudaError_t q;
        while ((q = cudaStreamQuery(s)) == cudaErrorNotReady) polls++;
        CHECK(q);
        uint64_t out_sum = app_checksum_host(h_out, N), m_sum = app_checksum_host(m, N);
        m[it % N] += 1.0f;                            /* the host's own update, seen next time */
        app_fill_uniform(h_in, N, &rng, -1.0f, 1.0f); /* the next input, written in place */
        t_us[it] = app_now_us() - t0;
        printf("iter %3d out=%016llx m=%016llx log=%a flag=%s\n", it, (unsigned long long)out_sum,
               (unsigned long long)m_sum, (double)log[it], flag);
        (void)polls; /* how long the host waited: not printed, it differs from run to run */
    }

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_y));
    CHECK(cudaFree(m));
    CHECK(cudaFreeHost(h_in));
    CHECK(cudaFreeHost(h_out));
    CHECK(cudaFreeHost(h_flag));
    app_report_time("mapped_memory", t_us, ITERS, TIMED_LAST);
    return 0;
}
