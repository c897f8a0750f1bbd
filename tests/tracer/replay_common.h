/*
 * replay_common.h — what the replay tests share (test_replay.c: runs that stay on the trace;
 * test_replay_exits.c: runs that leave it): the fake driver and the scenario runner.
 *
 * A scenario runs one step function twice per step from the same initial data: eagerly (no
 * markers) into buffers E, then traced (cgj_trace_begin/end) into buffers T, and compares E and
 * T bitwise after every step. After the last step it checks the scenario's expectations on the
 * anchor's cgj_trace_info, on cgj_stats and on the fake driver's counters. The fake driver runs
 * everything on the CPU, synchronously. Each Criterion test runs in a process of its own, so
 * the counters are the test's own.
 *
 * Included by one source file per test program: it defines that program's state.
 */
#ifndef CGJ_TEST_REPLAY_COMMON_H
#define CGJ_TEST_REPLAY_COMMON_H

#include <criterion/criterion.h>
#include <cgjit.h>
#include <stdlib.h>
#include <string.h>

#include "fakeapp.h"
#include "ir/reason.h"

#define N 64
static fk_t fk;

static inline void setup(void)
{
    fk_open(&fk);
}

#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s failed", #call)

typedef void (*step_fn)(int step, CUdeviceptr *bufs, void *ctx);

/* True while the traced half of a step runs (step functions that need per-run host state,
 * such as pinned buffers or failure injection aimed at the traced run, look at it). */
static bool g_traced;

/* Buffers of one comparison: e for the eager runs, t for the traced ones, same initial data. */
typedef struct bufs {
    CUdeviceptr e[4], t[4];
    int n;
} bufs_t;

static inline void bufs_alloc(bufs_t *b, int n)
{
    b->n = n;
    for (int i = 0; i < n; i++) {
        b->e[i] = fk_alloc_floats(&fk, N, 7 + i);
        b->t[i] = fk_alloc_floats(&fk, N, 7 + i);
    }
}

static inline void compare_bufs(const char *name, int s, const bufs_t *b)
{
    for (int i = 0; i < b->n; i++) {
        float he[N], ht[N];
        cr_assert_eq(fk.dtoh(he, b->e[i], sizeof he), CUDA_SUCCESS);
        cr_assert_eq(fk.dtoh(ht, b->t[i], sizeof ht), CUDA_SUCCESS);
        cr_assert(memcmp(he, ht, sizeof he) == 0, "%s: step %d buffer %d differs", name, s, i);
    }
}

/* One step eagerly into e, then traced into t. */
static inline void step_pair(const char *name, step_fn fn, int s, bufs_t *b, void *ctx)
{
    g_traced = false;
    fn(s, b->e, ctx);
    cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
    g_traced = true;
    fn(s, b->t, ctx);
    g_traced = false;
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
}

/* The same, then compare. */
static inline void step_both(const char *name, step_fn fn, int s, bufs_t *b, void *ctx)
{
    step_pair(name, fn, s, b, ctx);
    compare_bufs(name, s, b);
}

static inline cgj_trace_info_t info_of(const char *name)
{
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info(name, &i), CGJ_OK);
    return i;
}

static inline cgj_stats_t stats_now(void)
{
    cgj_stats_t st;
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    return st;
}

static inline fakecuda_counts_t counts_now(void)
{
    fakecuda_counts_t c;
    fk.get_counts(&c);
    return c;
}

/* axpb, launched as itself or (other) through its CUkernel handle: another kernel identity, a
 * change of the step's topology (a grid, copy size or address that changes is patched instead). */
static inline CUresult axpb_or_other(CUstream st, CUdeviceptr x, float a, float b, int n, bool other)
{
    return fk_axpb_launch_f(&fk, other ? fk_axpb_kernel_handle : fk_axpb, false, st, x, a, b, n, 1);
}

static inline unsigned fbits(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- expectations -------------------------------------------------------------------------
 *
 * One expectation per counter: IS(v) (==), NOT(v) (!=), AT_LEAST(v), MORE_THAN(v), AT_MOST(v),
 * LESS_THAN(v). A counter the scenario does not name is not checked. */
typedef enum { W_ANY, W_EQ, W_NE, W_GE, W_GT, W_LE, W_LT } want_op_t;
typedef struct want {
    want_op_t op;
    long long v;
} want_t;
#define IS(v)                \
    {                        \
        W_EQ, (long long)(v) \
    }
#define NOT(v)               \
    {                        \
        W_NE, (long long)(v) \
    }
#define AT_LEAST(v)          \
    {                        \
        W_GE, (long long)(v) \
    }
#define MORE_THAN(v)         \
    {                        \
        W_GT, (long long)(v) \
    }
#define AT_MOST(v)           \
    {                        \
        W_LE, (long long)(v) \
    }
#define LESS_THAN(v)         \
    {                        \
        W_LT, (long long)(v) \
    }

/* The counters a scenario may name: the anchor's cgj_trace_info, every cgj_stats counter, and
 * the fake driver's. */
/* clang-format off */
#define REPLAY_INFO_FIELDS(X)                                                                     \
    X(state) X(variants) X(ops) X(kernels) X(segments) X(varying_slots) X(runs) X(replays)        \
    X(side_exits) X(record_failures) X(allocations)
/* clang-format on */
#define REPLAY_FAKE_FIELDS(X) \
    X(kernels_run) X(eager_launches) X(graph_launches) X(captures) X(node_param_sets) X(device_updates)

#define REPLAY_WANT_FIELD(f) want_t f;
#define REPLAY_WANT_STAT(f, doc) want_t f;
typedef struct want_info {
    REPLAY_INFO_FIELDS(REPLAY_WANT_FIELD)
} want_info_t;
typedef struct want_stats {
    CGJ_STATS_LIST(REPLAY_WANT_STAT)
} want_stats_t;
typedef struct want_fake {
    REPLAY_FAKE_FIELDS(REPLAY_WANT_FIELD)
} want_fake_t;

typedef struct scenario scenario_t;
typedef void (*scenario_hook)(const scenario_t *sc, int s, bufs_t *b);

struct scenario {
    const char *name; /* the anchor */
    step_fn fn;
    int steps, nbufs;
    void *ctx;             /* the step function's */
    scenario_hook prepare; /* once, after the buffers are allocated (s = -1) */
    scenario_hook before;  /* before each step's two runs, outside any step */
    scenario_hook after;   /* after each step's comparison: per-step checks */
    want_info_t info;      /* the anchor's cgj_trace_info at the end */
    want_stats_t stats;    /* cgj_stats at the end */
    want_fake_t fake;      /* the fake driver's counters at the end */
};

static inline void want_check(const scenario_t *sc, const char *what, long long got, want_t w,
                              const cgj_trace_info_t *i)
{
    static const char *const op_text[] = {"", "==", "!=", ">=", ">", "<=", "<"};
    bool ok = true;
    switch (w.op) {
    case W_ANY: return;
    case W_EQ: ok = got == w.v; break;
    case W_NE: ok = got != w.v; break;
    case W_GE: ok = got >= w.v; break;
    case W_GT: ok = got > w.v; break;
    case W_LE: ok = got <= w.v; break;
    case W_LT: ok = got < w.v; break;
    }
    cr_assert(ok, "%s: %s is %lld, expected %s %lld (state %s, reason: %s)", sc->name, what, got, op_text[w.op], w.v,
              cgj_state_name(i->state), i->reason);
}

/* Run the scenario, compare after every step, check its expectations; the anchor's info. */
static inline cgj_trace_info_t run_scenario(const scenario_t *sc)
{
    bufs_t b;
    bufs_alloc(&b, sc->nbufs);
    if (sc->prepare) sc->prepare(sc, -1, &b);
    for (int s = 0; s < sc->steps; s++) {
        if (sc->before) sc->before(sc, s, &b);
        step_both(sc->name, sc->fn, s, &b, sc->ctx);
        if (sc->after) sc->after(sc, s, &b);
    }
    cgj_trace_info_t i = info_of(sc->name);
    cgj_stats_t st = stats_now();
    fakecuda_counts_t c = counts_now();
#define REPLAY_CHECK_INFO(f) want_check(sc, "trace_info." #f, (long long)i.f, sc->info.f, &i);
#define REPLAY_CHECK_STAT(f, doc) want_check(sc, "stats." #f, (long long)st.f, sc->stats.f, &i);
#define REPLAY_CHECK_FAKE(f) want_check(sc, "fakecuda." #f, (long long)c.f, sc->fake.f, &i);
    REPLAY_INFO_FIELDS(REPLAY_CHECK_INFO)
    CGJ_STATS_LIST(REPLAY_CHECK_STAT)
    REPLAY_FAKE_FIELDS(REPLAY_CHECK_FAKE)
#undef REPLAY_CHECK_INFO
#undef REPLAY_CHECK_STAT
#undef REPLAY_CHECK_FAKE
    return i;
}

/* Many short-lived anchors ("short0" ... ), four steps each, each step with a temporary block
 * of the fake's 2 MiB granularity: under CGJIT_POOL_MAX_GB the coldest are given back. */
static inline void one_temp_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr tmp;
    OK(fk.mem_alloc(&tmp, 1 << 20));
    OK(fk.dtod_async(tmp, b[0], N * sizeof(float), NULL));
    OK(fk_axpb_launch(&fk, NULL, tmp, 0.5f, (float)s, N, 1));
    OK(fk.dtod_async(b[0], tmp, N * sizeof(float), NULL));
    OK(fk.mem_free(tmp));
}

static inline void run_short_anchors(int anchors)
{
    bufs_t b;
    bufs_alloc(&b, 1);
    char name[32];
    for (int a = 0; a < anchors; a++) {
        snprintf(name, sizeof name, "short%d", a);
        for (int s = 0; s < 4; s++) step_both(name, one_temp_step, s, &b, NULL);
    }
}

#endif /* CGJ_TEST_REPLAY_COMMON_H */
