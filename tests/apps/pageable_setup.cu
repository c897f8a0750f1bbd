/*
 * pageable_setup — a program that replays nothing: most of its time is the host's. It fills
 * three 256 MB matrices in pageable host memory, copies them to the GPU with cudaMemcpy, runs
 * one kernel over them, reads 1 MB of the result back and prints its checksum: the pattern of a
 * cuda-sample that fills its inputs on the host and runs one GEMM. Under cgjit no step repeats,
 * so nothing replays; what cgjit costs it is its start-up, the pageable copies it looks at, and
 * its exit (scripts/no-replay-cost.sh times the whole process with and without it).
 */
#include "apps_common.h"

enum { N = 64 << 20, OUT = 256 << 10, BLOCK = 256 };

__global__ void mix(const float *a, const float *b, const float *c, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i] + c[i];
}

int main(void)
{
    float *h[3], *d[3], *d_out;
    uint64_t rng = 20261127;
    for (int k = 0; k < 3; k++) {
        h[k] = (float *)malloc((size_t)N * sizeof(float));
        if (!h[k]) {
            fprintf(stderr, "pageable_setup: out of host memory\n");
            return 1;
        }
        app_fill_uniform(h[k], N, &rng, -1.0f, 1.0f);
        CHECK(cudaMalloc(&d[k], (size_t)N * sizeof(float)));
        CHECK(cudaMemcpy(d[k], h[k], (size_t)N * sizeof(float), cudaMemcpyHostToDevice));
    }
    CHECK(cudaMalloc(&d_out, OUT * sizeof(float)));
    mix<<<OUT / BLOCK, BLOCK>>>(d[0], d[1], d[2], d_out, OUT);
    CHECK_LAST();
    static float h_out[OUT];
    CHECK(cudaMemcpy(h_out, d_out, sizeof h_out, cudaMemcpyDeviceToHost));
    printf("pageable_setup: checksum %016llx\n", (unsigned long long)app_checksum_host(h_out, OUT));
    for (int k = 0; k < 3; k++) {
        CHECK(cudaFree(d[k]));
        free(h[k]);
    }
    CHECK(cudaFree(d_out));
    return 0;
}
