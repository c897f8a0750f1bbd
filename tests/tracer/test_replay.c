/*
 * test_replay.c — the whole path (interposition → recording → graphs → replay) against the
 * fake driver: replayed steps must leave memory exactly as eager steps do.
 *
 * Each test runs the same step function twice from the same initial data: eagerly (no
 * markers) into buffers E, and traced (cgj_trace_begin/end) into buffers T, and compares E and
 * T bitwise after every step. The fake driver runs everything on the CPU, synchronously.
 */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fakeapp.h"

#define N 64
static fk_t fk;

static void setup(void) { fk_open(&fk); }
TestSuite(tracer_replay, .init = setup);

typedef void (*step_fn)(int step, CUdeviceptr *bufs, void *ctx);

/* True while the traced half of a step runs (step functions that need per-run host state,
 * such as pinned buffers or failure injection aimed at the traced run, look at it). */
static bool g_traced;

/* Buffers of one comparison: e for the eager runs, t for the traced ones, same initial data. */
typedef struct bufs {
    CUdeviceptr e[4], t[4];
    int n;
} bufs_t;

static void bufs_alloc(bufs_t *b, int n)
{
    b->n = n;
    for (int i = 0; i < n; i++) {
        b->e[i] = fk_alloc_floats(&fk, N, 7 + i);
        b->t[i] = fk_alloc_floats(&fk, N, 7 + i);
    }
}

static void compare_bufs(const char *name, int s, const bufs_t *b)
{
    for (int i = 0; i < b->n; i++) {
        float he[N], ht[N];
        cr_assert_eq(fk.dtoh(he, b->e[i], sizeof he), CUDA_SUCCESS);
        cr_assert_eq(fk.dtoh(ht, b->t[i], sizeof ht), CUDA_SUCCESS);
        cr_assert(memcmp(he, ht, sizeof he) == 0, "%s: step %d buffer %d differs", name, s, i);
    }
}

/* One step eagerly into e, then traced into t; compare. */
static void step_both(const char *name, step_fn fn, int s, bufs_t *b, void *ctx)
{
    g_traced = false;
    fn(s, b->e, ctx);
    cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
    g_traced = true;
    fn(s, b->t, ctx);
    g_traced = false;
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    compare_bufs(name, s, b);
}

/* Run `steps` steps eagerly and traced, compare nbufs buffers after each step. */
static void run_compare(const char *name, step_fn fn, int steps, int nbufs, void *ctx)
{
    bufs_t b;
    bufs_alloc(&b, nbufs);
    for (int s = 0; s < steps; s++) step_both(name, fn, s, &b, ctx);
}

static cgj_trace_info_t info_of(const char *name)
{
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info(name, &i), CGJ_OK);
    return i;
}

static void chain_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int k = 0; k < 10; k++)
        cr_assert_eq(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)k, N, 1), CUDA_SUCCESS);
}

Test(tracer_replay, replay_equals_eager_over_100_steps)
{
    run_compare("chain", chain_step, 100, 1, NULL);
    cgj_trace_info_t i = info_of("chain");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY);
    cr_assert_eq(i.replays, 98);
    cr_assert_eq(i.kernels, 10);
    cr_assert_eq(i.segments, 1);
    cr_assert_eq(i.varying_slots, 0);
    fakecuda_counts_t c;
    fk.get_counts(&c);
    /* eager: 100 steps × 10; traced: 2 eager runs × 10, then 98 graph launches */
    cr_assert_eq(c.eager_launches, 100 * 10 + 2 * 10);
    cr_assert_eq(c.graph_launches, 98);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_eq(st.ops_absorbed, 98 * 10);
    cr_assert_eq(st.steps_replayed, 98);
}
