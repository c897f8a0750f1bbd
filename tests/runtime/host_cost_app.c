/*
 * host_cost_app.c — cgjit's own host time per absorbed launch, without a GPU: a step shaped like
 * cgjit-bench-decode's (ggml's decode loop: a token copied in, 180 cuLaunchKernelEx of 20
 * parameters with the position and KV length changing every step, a read-back), on the fake
 * driver, between cgj_trace_begin and cgj_trace_end. scripts/host-cost.sh runs it, under
 * callgrind too; what it measures is cgjit's part of a launch, which the bench on a GPU cannot
 * separate from the driver's.
 *
 *   host_cost_app [STEPS [--no-eager] [--host-ns NS]]   (default 2000 steps, NS 0)
 *
 * Prints the wall time per absorbed launch of the timed steps' launch loops (from step 20 on:
 * the loop alone; each step is one graph, CGJIT_CHUNK_US=0 unless set, launched at its end, which
 * the fake driver runs on the host) and the steps replayed. Calls in a row overlap in the CPU,
 * so the loop gives cgjit's throughput; with --host-ns the program works NS ns on the host
 * before each launch, as the bench's ggml-like step does, and each launch call is timed on its
 * own (less an empty timing's cost): the latency of one absorbed call that comes after other
 * work. The same steps run eagerly first on buffers of their own (not with --no-eager, for a
 * profile of replay alone); the exit status is 1 where the two sets of buffers differ or too few
 * steps replayed, 0 otherwise.
 */
#include "fakeapp.h"
#include <cgjit.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LAUNCHES 180
#define BUFS 6
#define N 16

static fk_t fk;
static CUfunction g_op;

/* out[i] = a[i] * scale + b[i] + (pos + kv_len + op + layer + head) * eps + tok[0], over n. */
static void k_op(void **p, const unsigned g[3], const unsigned blk[3], unsigned smem)
{
    (void)g, (void)blk, (void)smem;
    const float *a = *(float **)p[0], *b = *(float **)p[1];
    float *out = *(float **)p[2];
    int n = *(int *)p[3], pos = *(int *)p[4], kv = *(int *)p[5];
    float scale = *(float *)p[6], eps = *(float *)p[16];
    int op = *(int *)p[15], layer = *(int *)p[17], head = *(int *)p[18];
    const int *tok = *(int **)p[19];
    for (int i = 0; i < n; i++)
        out[i] = a[i] * scale + b[i] + (float)(pos + kv + op + layer + head) * eps + (float)tok[0];
}

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "host_cost_app: %s failed (%d)\n", what, (int)r);
        exit(1);
    }
}

typedef struct set {
    CUdeviceptr buf[BUFS], tok;
} set_t;

static int g_host_ns; /* --host-ns: host work before each launch (0: launches in a row) */

/* The program's host work before a launch: a spin on the clock for g_host_ns. */
static void host_work(void)
{
    double t0 = fk_now_ns();
    while (fk_now_ns() - t0 < g_host_ns) {}
}

/* What timing an empty stretch costs: two clock reads (median of 9 blocks of 2000). */
static double empty_timing_ns(void)
{
    double v[9];
    for (int b = 0; b < 9; b++) {
        double sum = 0;
        for (int i = 0; i < 2000; i++) {
            double t0 = fk_now_ns();
            sum += fk_now_ns() - t0;
        }
        v[b] = sum / 2000;
    }
    fk_sort(v, 9);
    return v[4];
}

/* One step on set s; the launch loop's wall time returned (with --host-ns: the launch calls'
 * own time, each timed apart). */
static double step(set_t *s, int step_no, float *out)
{
    int host_tok[4] = {step_no % 97, 0, 0, 0};
    check(fk.htod_async(s->tok, host_tok, sizeof host_tok, NULL), "token copy");
    CUlaunchConfig cfg = fk_ex_config(NULL, NULL, 0);
    double t0 = fk_now_ns(), calls = 0;
    for (int l = 0; l < LAUNCHES; l++) {
        CUdeviceptr a = s->buf[l % BUFS], b = s->buf[(l + 1) % BUFS], o = s->buf[(l + 2) % BUFS], tok = s->tok;
        int n = N, pos = step_no, kv = step_no + 1, ne[4] = {N, 1, 1, 1}, nb[4] = {4, 4 * N, 4 * N, 4 * N};
        int op = l % 9, layer = l / 9, head = l % 4;
        float scale = 0.5f, eps = 1.0f / 1024;
        void *p[20] = {&a,     &b,     &o,     &n,     &pos,   &kv, &scale, &ne[0], &ne[1], &ne[2],
                       &ne[3], &nb[0], &nb[1], &nb[2], &nb[3], &op, &eps,   &layer, &head,  &tok};
        if (g_host_ns) {
            host_work();
            double c0 = fk_now_ns();
            check(fk.launch_ex(&cfg, g_op, p, NULL), "cuLaunchKernelEx");
            calls += fk_now_ns() - c0;
        } else {
            check(fk.launch_ex(&cfg, g_op, p, NULL), "cuLaunchKernelEx");
        }
    }
    double t = g_host_ns ? calls : fk_now_ns() - t0;
    check(fk.dtoh_async(out, s->buf[0], N * sizeof(float), NULL), "read-back");
    check(fk.stream_sync(NULL), "synchronize");
    return t;
}

static void set_new(set_t *s)
{
    for (int b = 0; b < BUFS; b++) {
        check(fk.mem_alloc(&s->buf[b], N * sizeof(float)), "cuMemAlloc");
        float init[N];
        for (int i = 0; i < N; i++) init[i] = (float)((b * 31 + i * 7) % 13) / 8.0f;
        check(fk.htod(s->buf[b], init, sizeof init), "init copy");
    }
    check(fk.mem_alloc(&s->tok, 64), "cuMemAlloc");
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 2000;
    bool eager_too = true, bad = steps < 40;
    for (int i = 2; i < argc && !bad; i++) {
        if (!strcmp(argv[i], "--no-eager")) {
            eager_too = false;
        } else if (!strcmp(argv[i], "--host-ns") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            bad = *end || v < 0 || v > 1000000;
            g_host_ns = (int)v;
        } else {
            bad = true;
        }
    }
    if (bad) {
        fprintf(stderr, "usage: host_cost_app [STEPS >= 40 [--no-eager] [--host-ns NS (0-1000000)]]\n");
        return 2;
    }
    double empty = g_host_ns ? empty_timing_ns() : 0;
    setenv("CGJIT_CHUNK_US", "0", 0); /* one graph a step: the launch loop holds no graph launch */
    fk_open(&fk);
    size_t sizes[20];
    for (int i = 0; i < 20; i++) sizes[i] = i < 3 || i == 19 ? 8 : 4;
    g_op = fk.register_kernel("ggml_like_op", k_op, 20, sizes, 0, 0);
    float *eager_out = calloc((size_t)steps * N, sizeof(float)), *replay_out = calloc((size_t)steps * N, sizeof(float));
    if (!eager_out || !replay_out) return 1;
    set_t eager, replay;
    set_new(&eager), set_new(&replay);
    for (int s = 0; eager_too && s < steps; s++) step(&eager, s, eager_out + (size_t)s * N);
    double loop_ns = 0;
    for (int s = 0; s < steps; s++) {
        check(cgj_trace_begin("decode") == CGJ_OK ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN, "cgj_trace_begin");
        double t = step(&replay, s, replay_out + (size_t)s * N);
        check(cgj_trace_end() == CGJ_OK ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN, "cgj_trace_end");
        if (s >= 20) loop_ns += t;
    }
    cgj_trace_info_t info;
    memset(&info, 0, sizeof info);
    cgj_trace_info("decode", &info);
    bool same = !eager_too || !memcmp(eager_out, replay_out, (size_t)steps * N * sizeof(float));
    bool replayed = info.replays >= (uint64_t)(steps - 10);
    printf("host_cost_app: %d steps of %d launches (20 parameters), %llu replayed, outputs %s\n", steps, LAUNCHES,
           (unsigned long long)info.replays,
           !eager_too ? "not compared (--no-eager)"
           : same     ? "identical to eager"
                      : "DIFFER from eager");
    if (g_host_ns)
        printf("  one launch call after %d ns of host work: %.1f ns per absorbed launch (each call timed apart, "
               "less %.1f ns an empty timing costs; steps 20 on)\n",
               g_host_ns, loop_ns / (steps - 20) / LAUNCHES - empty, empty);
    else
        printf("  launch loop: %.1f ns per absorbed launch (wall time, steps 20 on; the fake driver's graph launch "
               "not included)\n",
               loop_ns / (steps - 20) / LAUNCHES);
    free(eager_out), free(replay_out);
    return same && replayed ? 0 : 1;
}
