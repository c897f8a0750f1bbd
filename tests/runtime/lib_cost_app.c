/*
 * lib_cost_app.c — what cgjit costs the host per library call in a replayed step, without a GPU:
 * a marked step of GEMMS cublasSgemm_v2 calls on the fake cuBLAS (tests/fakecuda/fakecublas.c),
 * each followed by a kernel of the program's on its result, replayed on the default path (the
 * library runs on every call; the launches it makes are guarded and absorbed like the program's),
 * one graph a step (CGJIT_CHUNK_US=0 unless set).
 * scripts/host-cost.sh runs it under callgrind and counts libcgjit's instructions per library
 * call: what cgjit adds to the library's own host work.
 *
 *   lib_cost_app [STEPS]   (default 400)
 *
 * The same steps run first without markers (untraced) on buffers of their own. Prints the wall
 * time per step of both halves from step 20 on, and the steps replayed; the exit status is 1
 * where the halves' results differ, fewer than 9 in 10 traced steps replayed or a library call
 * did not reach the library, 2 on bad usage.
 */
#include "fakeapp.h"
#include <cgjit.h>
#include <cublas_v2.h>

#include "fakecublas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEMMS 16
#define M 8 /* C is M x M, A is M x K, B is K x M (column-major) */
#define K 4

static fk_t fk;
static cublasHandle_t g_h;

typedef struct {
    CUdeviceptr a, b, c[GEMMS];
} bufs_t;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "lib_cost_app: %s failed\n", what);
        exit(1);
    }
}

static void bufs_init(bufs_t *b)
{
    b->a = fk_alloc_floats(&fk, M * K, 1);
    b->b = fk_alloc_floats(&fk, K * M, 2);
    for (int i = 0; i < GEMMS; i++) b->c[i] = fk_alloc_floats(&fk, M * M, 3 + i);
}

/* One step: each GEMM writes its C from A and B (beta 0), then the program's kernel scales C. */
static void step(const bufs_t *b, int s)
{
    const float alpha = 1.0f + (float)(s % 3), beta = 0.0f;
    for (int i = 0; i < GEMMS; i++) {
        check(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, K, &alpha, (const float *)(uintptr_t)b->a, M,
                             (const float *)(uintptr_t)b->b, K, &beta, (float *)(uintptr_t)b->c[i],
                             M) == CUBLAS_STATUS_SUCCESS,
              "cublasSgemm_v2");
        check(fk_axpb_launch(&fk, NULL, b->c[i], 0.5f, (float)i, M * M, 1) == CUDA_SUCCESS, "axpb");
    }
}

/* Runs `steps` steps (marked where `name` is not NULL); the wall time per step from step 20 on. */
static double run(const bufs_t *b, int steps, const char *name)
{
    double t = 0;
    for (int s = 0; s < steps; s++) {
        double t0 = fk_now_ns();
        if (name) check(cgj_trace_begin(name) == CGJ_OK, "cgj_trace_begin");
        step(b, s);
        if (name) check(cgj_trace_end() == CGJ_OK, "cgj_trace_end");
        check(fk.ctx_sync() == CUDA_SUCCESS, "synchronize");
        if (s >= 20) t += fk_now_ns() - t0;
    }
    return steps > 20 ? t / (steps - 20) : 0;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 400;
    if (argc > 2 || steps < 40) {
        fprintf(stderr, "usage: lib_cost_app [STEPS >= 40]\n");
        return 2;
    }
    setenv("CGJIT_CHUNK_US", "0", 0); /* one graph a step, however slowly it runs (callgrind) */
    fk_open(&fk);
    check(cublasCreate_v2(&g_h) == CUBLAS_STATUS_SUCCESS, "cublasCreate_v2");
    bufs_t e, t;
    bufs_init(&e);
    bufs_init(&t);
    double eager_ns = run(&e, steps, NULL), traced_ns = run(&t, steps, "gemms");
    bool same = true;
    for (int i = 0; i < GEMMS; i++) {
        float he[M * M], ht[M * M];
        check(fk.dtoh(he, e.c[i], sizeof he) == CUDA_SUCCESS && fk.dtoh(ht, t.c[i], sizeof ht) == CUDA_SUCCESS,
              "read-back");
        same = same && !memcmp(he, ht, sizeof he);
    }
    cgj_trace_info_t info;
    memset(&info, 0, sizeof info);
    cgj_trace_info("gemms", &info);
    unsigned long ran = fakecublas_calls(), made = 2ul * (unsigned long)steps * GEMMS;
    printf("lib_cost_app: %d steps of %d library calls, %llu replayed; outputs %s; %lu of %lu library calls ran\n",
           steps, GEMMS, (unsigned long long)info.replays, same ? "identical to eager" : "DIFFER from eager", ran,
           made);
    printf("  %.1f us per step untraced, %.1f us traced (steps 20 on)\n", eager_ns / 1e3, traced_ns / 1e3);
    cublasDestroy_v2(g_h);
    return same && info.replays * 10 >= (uint64_t)steps * 9 && ran == made ? 0 : 1;
}
