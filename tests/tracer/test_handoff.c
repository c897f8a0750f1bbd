/*
 * test_handoff.c — a step whose stream another thread takes over in the middle, as PyTorch's
 * autograd worker takes over the main thread's stream for the backward pass while the main
 * thread waits: the work absorbed up to the handoff is launched as soon as it is absorbed (the
 * recordings saw the other thread come there), so the other thread never finds it held back
 * and the replay never leaves its trace. Where the other thread comes at no fixed point (a
 * race), there is no handoff, and its calls still see every absorbed call issued first.
 *
 * The fake driver runs kernels at once, on the CPU: the host computes what eager gives.
 */
#include "replay_common.h"

#include <pthread.h>

TestSuite(tracer_handoff, .init = setup);

static pthread_barrier_t g_bar;
static CUdeviceptr g_x;
static float g_expect[N];
static int g_mismatches;

static void expect_axpb(float a, float b)
{
    for (int i = 0; i < N; i++) g_expect[i] = a * g_expect[i] + b;
}

static bool x_is_expected(void)
{
    return !memcmp(g_expect, (float *)(uintptr_t)g_x, sizeof g_expect);
}

static void start(void)
{
    g_x = fk_alloc_floats(&fk, N, 33);
    memcpy(g_expect, (float *)(uintptr_t)g_x, sizeof g_expect);
    g_mismatches = 0;
    pthread_barrier_init(&g_bar, NULL, 2);
}

/* ---- another thread synchronizes at a fixed point of the step ---- */

static void *syncing_main(void *arg)
{
    int steps = *(int *)arg;
    for (int s = 0; s < steps; s++) {
        pthread_barrier_wait(&g_bar); /* A has absorbed its launches */
        fk.ctx_sync();
        if (!x_is_expected()) g_mismatches++;
        pthread_barrier_wait(&g_bar); /* A may end its step */
    }
    return NULL;
}

/* Thread A has absorbed a step's launches and not ended it; thread B synchronizes the context
 * and reads the buffer there, every step: it sees A's work done, A's end does not do it twice,
 * and since B always comes at that point, the replay launches there instead of leaving. */
Test(tracer_handoff, another_threads_sync_sees_absorbed_work)
{
    int steps = 40;
    start();
    pthread_t b;
    cr_assert_eq(pthread_create(&b, NULL, syncing_main, &steps), 0);
    for (int s = 0; s < steps; s++) {
        cr_assert_eq(cgj_trace_begin("observed"), CGJ_OK);
        for (int k = 0; k < 3; k++) {
            OK(fk_axpb_launch(&fk, NULL, g_x, 0.5f, (float)k, N, 1));
            expect_axpb(0.5f, (float)k);
        }
        pthread_barrier_wait(&g_bar);
        pthread_barrier_wait(&g_bar);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        cr_assert(x_is_expected(), "step %d: work lost or doubled", s);
    }
    pthread_join(b, NULL);
    cr_assert_eq(g_mismatches, 0, "the other thread saw absorbed work missing %d times", g_mismatches);
    cgj_trace_info_t i = info_of("observed");
    cr_assert_eq(i.replays, steps - 2, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_eq(i.side_exits, 0, "a handoff is no side exit: %s", i.reason);
}

/* ---- an autograd-like worker: forward on A, backward on B, optimizer on A ---- */

typedef struct worker {
    int steps;
    bool traced; /* B runs its work as steps of its own, ended only when the next one begins */
} worker_t;

static void *backward_main(void *arg)
{
    const worker_t *w = arg;
    for (int s = 0; s < w->steps; s++) {
        pthread_barrier_wait(&g_bar); /* A's forward is issued (or absorbed) */
        if (w->traced && s) cr_assert_eq(cgj_trace_end(), CGJ_OK);
        if (w->traced) cr_assert_eq(cgj_trace_begin("backward"), CGJ_OK);
        for (int k = 0; k < 2; k++) OK(fk_axpb_launch(&fk, NULL, g_x, 2.0f, (float)-k, N, 1));
        pthread_barrier_wait(&g_bar); /* A goes on with its step */
    }
    if (w->traced) cr_assert_eq(cgj_trace_end(), CGJ_OK);
    return NULL;
}

static void run_autograd_like(bool traced)
{
    worker_t w = {.steps = 60, .traced = traced};
    start();
    pthread_t b;
    cr_assert_eq(pthread_create(&b, NULL, backward_main, &w), 0);
    for (int s = 0; s < w.steps; s++) {
        cr_assert_eq(cgj_trace_begin("forward"), CGJ_OK);
        OK(fk_axpb_launch(&fk, NULL, g_x, 0.5f, 1.0f, N, 1));
        OK(fk_axpb_launch(&fk, NULL, g_x, 0.25f, (float)(s % 4), N, 1));
        pthread_barrier_wait(&g_bar);
        pthread_barrier_wait(&g_bar); /* the worker's backward is issued (or absorbed) */
        OK(fk_axpb_launch(&fk, NULL, g_x, 0.5f, 0.0f, N, 1));
        fk.ctx_sync();
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        expect_axpb(0.5f, 1.0f), expect_axpb(0.25f, (float)(s % 4));
        for (int k = 0; k < 2; k++) expect_axpb(2.0f, (float)-k);
        expect_axpb(0.5f, 0.0f);
        cr_assert(x_is_expected(), "step %d: the threads' work is out of order, lost or doubled", s);
    }
    pthread_join(b, NULL);
    cgj_trace_info_t f = info_of("forward");
    cr_assert_eq(f.side_exits, 0, "forward: %s", f.reason);
    cr_assert_eq(f.replays, w.steps - 2, "forward: state %s: %s", cgj_state_name(f.state), f.reason);
    cr_assert_geq(f.segments, 2, "the handoff cuts the step's graph");
    if (!traced) return;
    cgj_trace_info_t g = info_of("backward");
    cr_assert_eq(g.side_exits, 0, "backward: %s", g.reason);
    cr_assert_eq(g.replays, w.steps - 2, "backward: state %s: %s", cgj_state_name(g.state), g.reason);
}

/* The worker's launches outside any step of its own. */
Test(tracer_handoff, worker_takes_over_the_stream)
{
    run_autograd_like(false);
}

/* The worker replays too, its step open while A goes on: a handoff in each direction. */
Test(tracer_handoff, worker_replays_its_own_step)
{
    run_autograd_like(true);
}

/* ---- a thread that comes at no fixed point ---- */

static void *early_main(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&g_bar);
    fk.ctx_sync();
    pthread_barrier_wait(&g_bar);
    return NULL;
}

/* B synchronizes inside A's first step only (a one-off, as two racing threads would): that
 * recording's handoff is not the step's, and the trace is one graph. */
Test(tracer_handoff, a_one_off_is_no_handoff)
{
    start();
    pthread_t b;
    cr_assert_eq(pthread_create(&b, NULL, early_main, NULL), 0);
    for (int s = 0; s < 20; s++) {
        cr_assert_eq(cgj_trace_begin("once"), CGJ_OK);
        OK(fk_axpb_launch(&fk, NULL, g_x, 0.5f, 1.0f, N, 1));
        if (s == 0) pthread_barrier_wait(&g_bar), pthread_barrier_wait(&g_bar);
        OK(fk_axpb_launch(&fk, NULL, g_x, 0.5f, 2.0f, N, 1));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        expect_axpb(0.5f, 1.0f), expect_axpb(0.5f, 2.0f);
        cr_assert(x_is_expected(), "step %d", s);
    }
    pthread_join(b, NULL);
    cgj_trace_info_t i = info_of("once");
    cr_assert_eq(i.segments, 1, "a one-off handoff cut the graph");
    cr_assert_eq(i.replays, 18, "state %s: %s", cgj_state_name(i.state), i.reason);
}

/* ---- a stream created non-blocking never waits for the legacy stream, nor it for it ---- */

static CUdeviceptr g_y;
static float g_expect_y[N];

static void *non_blocking_main(void *arg)
{
    int steps = *(int *)arg;
    CUstream sb;
    OK(fk.stream_create(&sb, CU_STREAM_NON_BLOCKING));
    for (int s = 0; s < steps; s++) {
        pthread_barrier_wait(&g_bar); /* A holds absorbed work on the legacy stream */
        cr_assert_eq(cgj_trace_begin("side"), CGJ_OK);
        for (int k = 0; k < 3; k++) OK(fk_axpb_launch(&fk, sb, g_y, 0.5f, (float)k, N, 1));
        pthread_barrier_wait(&g_bar); /* A launches on the legacy stream while this is held */
        pthread_barrier_wait(&g_bar);
        OK(fk.stream_sync(sb));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < N; i++) g_expect_y[i] = 0.5f * g_expect_y[i] + (float)k;
        if (memcmp(g_expect_y, (float *)(uintptr_t)g_y, sizeof g_expect_y)) g_mismatches++;
    }
    return NULL;
}

/* Thread A replays on the legacy stream, thread B on a stream of its own created non-blocking;
 * each launches while the other holds absorbed work. Neither has to issue the other's work
 * first: no side exit, no handoff, each step one graph. */
Test(tracer_handoff, a_non_blocking_stream_observes_nothing_on_the_legacy_stream)
{
    int steps = 30;
    start();
    g_y = fk_alloc_floats(&fk, N, 34);
    memcpy(g_expect_y, (float *)(uintptr_t)g_y, sizeof g_expect_y);
    pthread_t b;
    cr_assert_eq(pthread_create(&b, NULL, non_blocking_main, &steps), 0);
    for (int s = 0; s < steps; s++) {
        cr_assert_eq(cgj_trace_begin("main"), CGJ_OK);
        for (int k = 0; k < 3; k++) OK(fk_axpb_launch(&fk, NULL, g_x, 0.5f, (float)k, N, 1));
        pthread_barrier_wait(&g_bar);
        pthread_barrier_wait(&g_bar); /* B holds its absorbed work */
        OK(fk_axpb_launch(&fk, NULL, g_x, 2.0f, 1.0f, N, 1));
        pthread_barrier_wait(&g_bar);
        OK(fk.stream_sync(NULL)); /* the legacy stream: B's work is none of its business */
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        for (int k = 0; k < 3; k++) expect_axpb(0.5f, (float)k);
        expect_axpb(2.0f, 1.0f);
        cr_assert(x_is_expected(), "step %d", s);
    }
    pthread_join(b, NULL);
    cr_assert_eq(g_mismatches, 0, "thread B's results differ %d times", g_mismatches);
    const char *names[] = {"main", "side"};
    for (int k = 0; k < 2; k++) {
        cgj_trace_info_t i = info_of(names[k]);
        cr_assert_eq(i.side_exits, 0, "%s: %s", names[k], i.reason);
        cr_assert_eq(i.replays, steps - 2, "%s: state %s: %s", names[k], cgj_state_name(i.state), i.reason);
    }
}

/* ---- the program captures a graph on one thread while another holds a step ---- */

static CUstream g_cap;
static int g_capture_failures;

/* B captures its own graph on g_cap (thread-local mode, as PyTorch's cudagraph trees do) while
 * A holds its step's work on the legacy stream, then runs the graph. */
static void *capturing_main(void *arg)
{
    int steps = *(int *)arg;
    for (int s = 0; s < steps; s++) {
        pthread_barrier_wait(&g_bar); /* A's launches are recorded or absorbed */
        CUresult r = fk.begin_capture(g_cap, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        for (int k = 0; k < 2 && r == CUDA_SUCCESS; k++) r = fk_axpb_launch(&fk, g_cap, g_y, 0.5f, (float)k, N, 1);
        if (r == CUDA_SUCCESS) r = fk_capture_end_and_run(&fk, g_cap);
        if (r != CUDA_SUCCESS) g_capture_failures++;
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < N; i++) g_expect_y[i] = 0.5f * g_expect_y[i] + (float)k;
        if (memcmp(g_expect_y, (float *)(uintptr_t)g_y, sizeof g_expect_y)) g_mismatches++;
        pthread_barrier_wait(&g_bar); /* A may end its step */
    }
    return NULL;
}

/* Each launch into the capture asks whether another thread's held work could be overtaken,
 * which depends on the capture's stream being blocking: the driver must not be asked that about
 * a capturing stream (it fails and invalidates the capture). Every capture succeeds and gives
 * eager's results; with a stream created non-blocking, A's replay is not disturbed either. */
static void run_capture_beside_a_step(unsigned cap_flags)
{
    int steps = 24;
    start();
    g_capture_failures = 0;
    g_y = fk_alloc_floats(&fk, N, 35);
    memcpy(g_expect_y, (float *)(uintptr_t)g_y, sizeof g_expect_y);
    OK(fk.stream_create(&g_cap, cap_flags));
    pthread_t b;
    cr_assert_eq(pthread_create(&b, NULL, capturing_main, &steps), 0);
    for (int s = 0; s < steps; s++) {
        cr_assert_eq(cgj_trace_begin("held"), CGJ_OK);
        for (int k = 0; k < 3; k++) OK(fk_axpb_launch(&fk, NULL, g_x, 0.5f, (float)k, N, 1));
        pthread_barrier_wait(&g_bar);
        pthread_barrier_wait(&g_bar); /* B's capture ended */
        OK(fk.stream_sync(NULL));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        for (int k = 0; k < 3; k++) expect_axpb(0.5f, (float)k);
        cr_assert(x_is_expected(), "step %d", s);
    }
    pthread_join(b, NULL);
    OK(fk.stream_destroy(g_cap));
    cr_assert_eq(g_capture_failures, 0, "the program's capture failed %d times of %d", g_capture_failures, steps);
    cr_assert_eq(g_mismatches, 0, "the program's graphs gave other results %d times", g_mismatches);
    cgj_trace_info_t i = info_of("held");
    cr_assert_gt(i.replays, 0, "state %s: %s", cgj_state_name(i.state), i.reason);
    if (cap_flags & CU_STREAM_NON_BLOCKING) {
        cr_assert_eq(i.side_exits, 0, "a non-blocking capture observes nothing on the legacy stream: %s", i.reason);
        cr_assert_eq(i.replays, steps - 2, "state %s: %s", cgj_state_name(i.state), i.reason);
    }
}

Test(tracer_handoff, a_capture_on_a_non_blocking_stream_beside_a_step)
{
    run_capture_beside_a_step(CU_STREAM_NON_BLOCKING);
}

/* Created blocking, the capture's stream waits for the legacy stream: A's held work is issued
 * before the capture begins, never into it. */
Test(tracer_handoff, a_capture_on_a_blocking_stream_beside_a_step)
{
    run_capture_beside_a_step(0);
}
