/*
 * step_cost_app.c — what cgjit costs the host on the paths of a step that does not replay to its
 * end, without a GPU (the fake driver): scripts/host-cost.sh prints its figures beside the
 * absorbed launch's.
 *
 *   step_cost_app exits [STEPS]   a marked step of 3 launches, and every other run 112 more of
 *                                 which one, at a place that moves every run, is another kernel
 *                                 (shapes that follow the data): the long runs leave the trace.
 *                                 Prints the host time a long run costs beyond the same run
 *                                 eagerly (median over the long runs after the first 20 steps).
 *   step_cost_app eager [STEPS]   a loop of 20 to 32 launches and a read-back (the synchronization
 *                                 that ends an implicit step), the count changing every iteration
 *                                 so that no step replays. Prints the host time per call; run
 *                                 it under CGJIT_STEP=off and CGJIT_STEP=sync to see what a call in
 *                                 an eager implicit step costs.
 *   step_cost_app first           once in the process, as cuda-samples' MersenneTwister does: a
 *                                 kernel launched inside a step begun at a copy, a
 *                                 synchronization, then a loop of 40 launches of it and a
 *                                 synchronization. Prints the host time of the loop's first
 *                                 launch, which begins a step never seen before at a kernel on
 *                                 a path of cgjit's the process never ran (scripts/host-cost.sh
 *                                 runs it in fresh processes).
 *   step_cost_app fresh [STEPS]   steps of 3 launches and a synchronization, each on a stream of
 *                                 its own: every step is an anchor's first run (a program's
 *                                 timed section that it makes once). Prints the host time per
 *                                 step, first runs against the same steps run again; run it
 *                                 under CGJIT_STEP=off and CGJIT_STEP=sync.
 *
 * Each run's results are compared with the same arithmetic eagerly (exits: the same steps
 * without markers on buffers of their own; eager and fresh: host arithmetic); the exit status is 1 where
 * they differ or the path was not taken (exits: fewer than a third of the steps left the trace
 * or replayed), 2 on bad usage, 0 otherwise.
 */
#include "fakeapp.h"
#include <cgjit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 16
#define TAIL 112
static fk_t fk;

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "step_cost_app: %s failed (%d)\n", what, (int)r);
        exit(1);
    }
}

static void exit_step(CUdeviceptr *b, int s)
{
    for (int i = 0; i < 3; i++) check(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)i, N, 1), "axpb");
    for (int i = 0; s % 2 && i < TAIL; i++) {
        if (i == (s / 2) % TAIL) check(fk_addk_launch(&fk, NULL, b[1], 1, N), "addk");
        else check(fk_copyscale_launch(&fk, NULL, b[i % 2], b[(i + 1) % 2], 0.25f, N), "copyscale");
    }
    check(fk.stream_sync(NULL), "synchronize");
}

static int exits(int steps)
{
    CUdeviceptr e[2], t[2];
    for (int i = 0; i < 2; i++) {
        e[i] = fk_alloc_floats(&fk, N, 3 + i);
        t[i] = fk_alloc_floats(&fk, N, 3 + i);
    }
    double *extra = calloc((size_t)steps, sizeof(double));
    int n = 0;
    if (!extra) return 1;
    for (int s = 0; s < steps; s++) {
        double t0 = fk_now_ns();
        exit_step(e, s);
        double t1 = fk_now_ns();
        check(cgj_trace_begin("exits") == CGJ_OK ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN, "cgj_trace_begin");
        exit_step(t, s);
        check(cgj_trace_end() == CGJ_OK ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN, "cgj_trace_end");
        double t2 = fk_now_ns();
        if (s >= 20 && s % 2) extra[n++] = (t2 - t1) - (t1 - t0);
    }
    float he[N], ht[N];
    bool same = true;
    for (int i = 0; i < 2; i++) {
        check(fk.dtoh(he, e[i], sizeof he), "read-back");
        check(fk.dtoh(ht, t[i], sizeof ht), "read-back");
        same = same && !memcmp(he, ht, sizeof he);
    }
    cgj_trace_info_t info;
    memset(&info, 0, sizeof info);
    cgj_trace_info("exits", &info);
    fk_sort(extra, (size_t)n);
    bool taken = info.side_exits >= (uint64_t)steps / 3 && info.replays >= (uint64_t)steps / 3;
    printf("step_cost_app exits: %d steps, %llu replayed, %llu left the trace; outputs %s\n", steps,
           (unsigned long long)info.replays, (unsigned long long)info.side_exits,
           same ? "identical to eager" : "DIFFER from eager");
    printf("  a run that left the trace: %.1f us beyond the same run eagerly (median of %d; %d calls a run)\n",
           n ? extra[n / 2] / 1e3 : 0.0, n, TAIL + 3 + 1);
    free(extra);
    return same && taken ? 0 : 1;
}

static int eager(int iters)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
    float ref[N], seen[N];
    check(fk.dtoh(ref, x, sizeof ref), "read-back");
    double t = 0;
    long calls = 0;
    bool same = true;
    for (int it = 0; it < iters; it++) {
        int k = 20 + (it * 7919) % 13;
        double t0 = fk_now_ns();
        for (int j = 0; j < k; j++) check(fk_axpb_launch(&fk, NULL, x, 0.5f, (float)(j % 3), N, 1), "axpb");
        check(fk.dtoh(seen, x, sizeof seen), "read-back");
        double t1 = fk_now_ns();
        for (int j = 0; j < k; j++)
            for (int i = 0; i < N; i++) ref[i] = 0.5f * ref[i] + (float)(j % 3);
        same = same && !memcmp(ref, seen, sizeof ref);
        if (it >= 100) t += t1 - t0, calls += k + 1;
    }
    const char *policy = getenv("CGJIT_STEP");
    printf("step_cost_app eager: %d iterations under CGJIT_STEP=%s; outputs %s\n", iters, policy ? policy : "(unset)",
           same ? "identical to the host's arithmetic" : "DIFFER from the host's arithmetic");
    printf("  %.1f ns per call (iterations 100 on)\n", calls ? t / (double)calls : 0.0);
    return same ? 0 : 1;
}

static int fresh(int steps)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
    float ref[N], seen[N];
    check(fk.dtoh(ref, x, sizeof ref), "read-back");
    CUstream *st = calloc((size_t)steps, sizeof(CUstream));
    double *first = calloc((size_t)steps, sizeof(double)), *again = calloc((size_t)steps, sizeof(double));
    if (!st || !first || !again) return 1;
    for (int s = 0; s < steps; s++) check(fk.stream_create(&st[s], CU_STREAM_NON_BLOCKING), "stream");
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < steps; s++) {
            double t0 = fk_now_ns();
            for (int j = 0; j < 3; j++) check(fk_axpb_launch(&fk, st[s], x, 0.5f, (float)j, N, 1), "axpb");
            check(fk.stream_sync(st[s]), "synchronize");
            (pass ? again : first)[s] = fk_now_ns() - t0;
            for (int j = 0; j < 3; j++)
                for (int i = 0; i < N; i++) ref[i] = 0.5f * ref[i] + (float)j;
        }
    check(fk.dtoh(seen, x, sizeof seen), "read-back");
    bool same = !memcmp(ref, seen, sizeof ref);
    fk_sort(first, (size_t)steps);
    fk_sort(again, (size_t)steps);
    const char *policy = getenv("CGJIT_STEP");
    printf("step_cost_app fresh: %d steps on streams of their own, twice, under CGJIT_STEP=%s; outputs %s\n", steps,
           policy ? policy : "(unset)",
           same ? "identical to the host's arithmetic" : "DIFFER from the host's arithmetic");
    printf("  %.1f us per first run, %.1f us per second run (medians)\n", first[steps / 2] / 1e3,
           again[steps / 2] / 1e3);
    free(st);
    free(first);
    free(again);
    return same ? 0 : 1;
}

static int first(void)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 5);
    float ref[N], seen[N];
    check(fk.dtoh(ref, x, sizeof ref), "read-back");
    CUfunction k = fk_axpb_twin(&fk, "first_kernel", true);
    check(fk.htod(x, ref, sizeof ref), "upload");                              /* a step begun at a copy ... */
    check(fk_axpb_launch_f(&fk, k, false, NULL, x, 0.5f, 1.0f, N, 1), "axpb"); /* ... holds the kernel */
    check(fk.stream_sync(NULL), "synchronize");
    double t0 = fk_now_ns();
    check(fk_axpb_launch_f(&fk, k, false, NULL, x, 0.5f, 1.0f, N, 1), "axpb"); /* begins a new step */
    double t1 = fk_now_ns();
    for (int i = 1; i < 40; i++) check(fk_axpb_launch_f(&fk, k, false, NULL, x, 0.5f, 1.0f, N, 1), "axpb");
    check(fk.stream_sync(NULL), "synchronize");
    check(fk.dtoh(seen, x, sizeof seen), "read-back");
    for (int r = 0; r < 41; r++)
        for (int i = 0; i < N; i++) ref[i] = 0.5f * ref[i] + 1.0f;
    bool same = !memcmp(ref, seen, sizeof ref);
    printf("step_cost_app first: %.0f ns for the first launch of a step never seen before; outputs %s\n", t1 - t0,
           same ? "identical to the host's arithmetic" : "DIFFER from the host's arithmetic");
    return same ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "first")) {
        fk_open(&fk);
        return first();
    }
    int steps = argc > 2 ? atoi(argv[2]) : 400;
    if (argc < 2 || argc > 3 || steps < 120 ||
        (strcmp(argv[1], "exits") && strcmp(argv[1], "eager") && strcmp(argv[1], "fresh"))) {
        fprintf(stderr, "usage: step_cost_app exits|eager|fresh [STEPS >= 120] | first\n");
        return 2;
    }
    fk_open(&fk);
    if (!strcmp(argv[1], "fresh")) return fresh(steps);
    return !strcmp(argv[1], "exits") ? exits(steps) : eager(steps);
}
