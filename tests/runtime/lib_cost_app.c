/*
 * lib_cost_app.c — what cgjit costs the host per library call in a replayed step, without a GPU:
 * a marked step of GEMMS cublasSgemm_v2 calls on the fake cuBLAS (tests/common/fake_gemms.h),
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
#include "fake_gemms.h"
#include "fakeapp.h"
#include <cgjit.h>

#include "fakecublas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEMMS 16

static fk_t fk;
static cublasHandle_t g_h;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "lib_cost_app: %s failed\n", what);
        exit(1);
    }
}

/* Runs `steps` steps (marked where `name` is not NULL); the wall time per step from step 20 on. */
static double run(const fk_gemms_t *b, int steps, const char *name)
{
    double t = 0;
    for (int s = 0; s < steps; s++) {
        double t0 = fk_now_ns();
        if (name) check(cgj_trace_begin(name) == CGJ_OK, "cgj_trace_begin");
        check(fk_gemms_step(&fk, g_h, b, s), "the step's calls");
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
    fk_gemms_t e, t;
    fk_gemms_init(&fk, &e, GEMMS);
    fk_gemms_init(&fk, &t, GEMMS);
    double eager_ns = run(&e, steps, NULL), traced_ns = run(&t, steps, "gemms");
    bool same = fk_gemms_same(&fk, &e, &t);
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
