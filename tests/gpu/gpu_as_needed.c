/*
 * gpu_as_needed.c — cuBLAS through cgjit in a program linked with --as-needed, as Debian's and
 * Ubuntu's compilers link by default: `gpu_as_needed as_needed`.
 *
 * Every cuBLAS function this program calls is one libcgjit wraps, so the linker binds them all to
 * libcgjit and drops libcublas: the process never loads cuBLAS itself, and cgjit must load it to
 * reach the real functions. The program checks that precondition (libcublas is not loaded before
 * the first cuBLAS call), then runs STEPS steps of SGEMM + SAXPY eagerly and STEPS traced on
 * other buffers, compares the results bitwise after every step, and expects the library calls to
 * be absorbed. Last line `PASS as_needed`, or `FAIL as_needed <why>` with exit status 1; a bad
 * command line exits 2.
 */
#include <cgjit.h>
#include <cublas_api.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M = 64, STEPS = 100 };

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL as_needed ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    exit(1);
}

/* A failed CHECK (cuda_check.h): `FAIL as_needed file:line: call: what (detail)`. */
static void check_failed(const char *file, int line, const char *call, const char *what, const char *detail)
{
    fail("%s:%d: %s: %s (%s)", file, line, call, what, detail);
}
#define CUDA_CHECK_FAIL check_failed
#include "../common/cuda_check.h"

/* cuBLAS calls: the status's number, not CHECK_CUBLAS's cublasGetStatusString, which libcgjit
 * does not export: calling it would keep libcublas linked, and the test needs it dropped. */
static const char *cublas_status(cublasStatus_t st)
{
    return "cuBLAS status";
}
#define BL(call) CHECK_STATUS(cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublas_status, #call, call)

typedef struct set {
    float *a, *b, *c;
} set_t;

static void set_alloc(set_t *s, const float *init)
{
    CHECK(cudaMalloc((void **)&s->a, M * M * sizeof(float)));
    CHECK(cudaMalloc((void **)&s->b, M * M * sizeof(float)));
    CHECK(cudaMalloc((void **)&s->c, M * M * sizeof(float)));
    CHECK(cudaMemcpy(s->a, init, M * M * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(s->b, init + M * M, M * M * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(s->c, 0, M * M * sizeof(float)));
}

/* c = 0.5 a b + 0.25 c; b += 0.001 c. */
static void step(cublasHandle_t h, const set_t *s)
{
    const float alpha = 0.5f, beta = 0.25f, k = 0.001f;
    BL(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, M, &alpha, s->a, M, s->b, M, &beta, s->c, M));
    BL(cublasSaxpy(h, M * M, &k, s->c, 1, s->b, 1));
}

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "as_needed")) {
        fprintf(stderr, "usage: %s as_needed\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char so[64];
    snprintf(so, sizeof so, "libcublas.so.%d", CUBLAS_VER_MAJOR);
    if (dlopen(so, RTLD_NOW | RTLD_NOLOAD))
        fail("%s is loaded by the program itself: the test needs a link that dropped it", so);

    static float init[2 * M * M], eager[STEPS][M * M], got[M * M];
    for (int i = 0; i < 2 * M * M; i++) init[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cublasHandle_t h;
    BL(cublasCreate(&h));
    BL(cublasSetStream(h, st));
    set_t e, r;
    set_alloc(&e, init);
    set_alloc(&r, init);
    for (int k = 0; k < STEPS; k++) {
        step(h, &e);
        CHECK(cudaStreamSynchronize(st));
        CHECK(cudaMemcpy(eager[k], e.c, sizeof eager[k], cudaMemcpyDeviceToHost));
    }
    for (int k = 0; k < STEPS; k++) {
        if (cgj_trace_begin("as_needed") != CGJ_OK) fail("cgj_trace_begin failed");
        step(h, &r);
        cgj_trace_end();
        CHECK(cudaStreamSynchronize(st));
        CHECK(cudaMemcpy(got, r.c, sizeof got, cudaMemcpyDeviceToHost));
        if (memcmp(got, eager[k], sizeof got)) fail("step %d: traced result differs from eager", k);
    }
    cgj_stats_t stats;
    cgj_stats(&stats);
    printf("info as_needed: lib_calls=%llu lib_absorbed=%llu\n", (unsigned long long)stats.lib_calls,
           (unsigned long long)stats.lib_absorbed);
    const char *learned = getenv("CGJIT_LIBS_LEARNED");
    if (stats.lib_calls < (STEPS - 10) * 2) fail("only %llu library calls seen", (unsigned long long)stats.lib_calls);
    if (learned && !strcmp(learned, "1") && stats.lib_absorbed < (STEPS - 10) * 2)
        fail("only %llu library calls absorbed", (unsigned long long)stats.lib_absorbed);
    BL(cublasDestroy(h));
    printf("PASS as_needed\n");
    return 0;
}
