/*
 * dyn_copy_size — copies and a memset whose byte counts (and a copy's destination offset)
 * follow the data: every count is drawn from the checksum read back the iteration before, as a
 * loop over variable-length records, ragged batches or a growing sequence does.
 *
 * Each iteration, from the previous iteration's readback c (all on the legacy stream):
 *  - cudaMemcpy of n_in = 256 + c % 2048 floats from a pageable (malloc) buffer into d_in; the
 *    host overwrites the buffer with NaN bytes as soon as the call returns;
 *  - cudaMemcpyAsync device-to-device of n_mv = 128 + (c >> 11) % 1024 floats of d_in into d_mv
 *    at offset (c >> 44) % 256 floats;
 *  - cudaMemsetAsync of the first n_set = 64 + (c >> 22) % 2048 floats of d_mask to zero (it is
 *    refilled with ones by a kernel afterwards);
 *  - 4 kernels fold d_in, d_mv and d_mask into the state x, and write an output vector;
 *  - a checksum of x, then cudaMemcpyAsync device-to-host of n_out = 16 + (c >> 33) % 1024
 *    output floats and of the checksum into pinned buffers, and cudaStreamSynchronize.
 * Prints the counts, the checksum and the host's checksum of the output floats it received.
 */
#include "apps_common.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { ITERS = 400, TIMED_LAST = 200, MAXIN = 256 + 2048, MVOFF = 256, MAXMV = 128 + 1024 };
enum { MAXSET = 64 + 2048, MAXOUT = 16 + 1024 };

__global__ void fold(float *x, const float *in, int n_in, const float *mv, int n_mv, const float *mask, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float m = mask[i % MAXSET];
        x[i] = 0.98f * x[i] + 0.01f * in[i % n_in] * m + 0.01f * mv[i % (n_mv + MVOFF)];
    }
}

__global__ void fill_ones(float *mask, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) mask[i] = 1.0f;
}

__global__ void wave(float *x, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = x[i] + a * sinf(3.0f * x[i]);
}

__global__ void emit(float *out, const float *x, int n_out)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_out; i += gridDim.x * blockDim.x)
        out[i] = x[(i * 37) % NFLOAT] - x[i];
}

int main(void)
{
    static float h_x[NFLOAT];
    uint64_t rng = 9001;
    app_fill_uniform(h_x, NFLOAT, &rng, -1.0f, 1.0f);
    uint64_t c = app_checksum_host(h_x, NFLOAT);

    float *h_in = (float *)malloc(MAXIN * sizeof(float)); /* pageable on purpose */
    if (!h_in) {
        fprintf(stderr, "dyn_copy_size: out of host memory\n");
        return 1;
    }
    float *h_out;
    unsigned long long *h_sum;
    CHECK(cudaMallocHost(&h_out, MAXOUT * sizeof(float)));
    CHECK(cudaMallocHost(&h_sum, sizeof *h_sum));

    float *d_x, *d_in, *d_mv, *d_mask, *d_out;
    unsigned long long *d_sum;
    CHECK(cudaMalloc(&d_x, NFLOAT * sizeof(float)));
    CHECK(cudaMalloc(&d_in, MAXIN * sizeof(float)));
    CHECK(cudaMalloc(&d_mv, (MAXMV + MVOFF) * sizeof(float)));
    CHECK(cudaMalloc(&d_mask, MAXSET * sizeof(float)));
    CHECK(cudaMalloc(&d_out, MAXOUT * sizeof(float)));
    CHECK(cudaMalloc(&d_sum, sizeof *d_sum));
    CHECK(cudaMemcpy(d_x, h_x, NFLOAT * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_in, 0, MAXIN * sizeof(float)));
    CHECK(cudaMemset(d_mv, 0, (MAXMV + MVOFF) * sizeof(float)));
    fill_ones<<<GRID, BLOCK>>>(d_mask, MAXSET);
    CHECK_LAST();
    CHECK(cudaDeviceSynchronize());

    static double t_us[ITERS];
    for (int it = 0; it < ITERS; it++) {
        int n_in = 256 + (int)(c % 2048);
        int n_mv = 128 + (int)((c >> 11) % 1024);
        int n_set = 64 + (int)((c >> 22) % 2048);
        int n_out = 16 + (int)((c >> 33) % 1024);
        int off = (int)((c >> 44) % MVOFF);
        uint64_t in_rng = c ^ (uint64_t)it;
        app_fill_uniform(h_in, (size_t)n_in, &in_rng, -1.0f, 1.0f);

        double t0 = app_now_us();
        CHECK(cudaMemcpy(d_in, h_in, (size_t)n_in * sizeof(float), cudaMemcpyHostToDevice));
        memset(h_in, 0xFF, MAXIN * sizeof(float)); /* NaN: a late read would show */
        CHECK(cudaMemcpyAsync(d_mv + off, d_in, (size_t)n_mv * sizeof(float), cudaMemcpyDeviceToDevice, 0));
        CHECK(cudaMemsetAsync(d_mask, 0, (size_t)n_set * sizeof(float), 0));
        fold<<<GRID, BLOCK>>>(d_x, d_in, n_in, d_mv, n_mv, d_mask, NFLOAT);
        fill_ones<<<(MAXSET + BLOCK - 1) / BLOCK, BLOCK>>>(d_mask, n_set);
        wave<<<GRID, BLOCK>>>(d_x, 0.05f, NFLOAT);
        emit<<<(MAXOUT + BLOCK - 1) / BLOCK, BLOCK>>>(d_out, d_x, n_out);
        app_checksum_kernel<<<1, APP_CHECKSUM_THREADS>>>(d_x, NFLOAT, d_sum);
        CHECK_LAST();
        CHECK(cudaMemcpyAsync(h_out, d_out, (size_t)n_out * sizeof(float), cudaMemcpyDeviceToHost, 0));
        CHECK(cudaMemcpyAsync(h_sum, d_sum, sizeof *h_sum, cudaMemcpyDeviceToHost, 0));
        CHECK(cudaStreamSynchronize(0));
        t_us[it] = app_now_us() - t0;

        uint64_t hsum = app_checksum_host(h_out, (size_t)n_out);
        printf("iter %3d in=%4d mv=%4d@%3d set=%4d out=%4d sum=%016llx out=%016llx\n", it, n_in, n_mv, off, n_set,
               n_out, *h_sum, (unsigned long long)hsum);
        c = *h_sum ^ (hsum * 0x9E3779B97F4A7C15ull);
    }

    free(h_in);
    CHECK(cudaFreeHost(h_out));
    CHECK(cudaFreeHost(h_sum));
    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_mv));
    CHECK(cudaFree(d_mask));
    CHECK(cudaFree(d_out));
    CHECK(cudaFree(d_sum));
    app_report_time("dyn_copy_size", t_us, ITERS, TIMED_LAST);
    return 0;
}
