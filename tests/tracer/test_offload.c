/*
 * test_offload.c — chunks launched by cgjit's launch thread (CGJIT_LAUNCH_ASYNC=1, tracer/
 * offload.c), against the fake driver: replayed steps must leave memory exactly as eager steps
 * do while their chunks are launched on another thread.
 *
 * The fake driver runs a graph's kernels when it is launched, on the thread that launches it,
 * and each graph launch here first spins 300 us of real time (fakecuda_set_delays): the launch thread
 * lags behind the program's thread, so a call that ran for real before the chunks handed ahead
 * of it were launched would compute on stale data, and the comparison with eager would fail.
 * cgjit itself runs on a fake clock (tests/common/fake_clock.h), so that where a chunk ends
 * (CGJIT_CHUNK_US: the host work the steps declare) does not depend on the machine's load.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "replay_common.h"

#include "fake_clock.h"

static void offload_setup(void)
{
    setenv("CGJIT_LAUNCH_ASYNC", "1", 1);
    setenv("CGJIT_CHUNK_US", "200", 1);
    setup();
    fake_clock_start(NULL); /* cgjit's clock only: the driver's delays are real time */
    fk.set_delays(0, 300);
}

static void small_setup(void)
{
    setenv("CGJIT_GRAPH_MIN_OPS", "3", 1); /* a chunk of two kernels runs as the program makes it */
    offload_setup();
}

TestSuite(tracer_offload, .init = offload_setup);
TestSuite(tracer_offload_small, .init = small_setup);

/* `n` kernels on b0, each taking what the one before left: a chunk out of order changes b0. */
static void kernels(CUdeviceptr b0, int n, int s)
{
    for (int k = 0; k < n; k++) OK(fk_axpb_launch(&fk, NULL, b0, 0.5f, (float)(k + s % 5), N, 1));
}

/* Three groups of three kernels with host work between them (two chunks handed to the
 * launch thread, the third launched at the read-back), then kernels after the read-back that use
 * what it read. */
static void gapped_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[2];
    for (int g = 0; g < 3; g++) {
        if (g) host_work(1000);
        kernels(b[0], 3, s + g); /* each group its own: groups out of order change b0 */
    }
    OK(fk.dtoh(h, b[0], sizeof h)); /* the host reads here: every chunk before is launched */
    for (int k = 0; k < 3; k++) OK(fk_addk_launch(&fk, NULL, b[1], (int)h[0] % 7 + k, N));
}

Test(tracer_offload, handed_chunks_replay_as_eager)
{
    run_scenario(&(scenario_t){.name = "handed",
                               .fn = gapped_step,
                               .steps = 20,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(4)},
                               .stats = {.launches_handed = IS(18 * 2)},
                               .fake = {.graph_launches = IS(18 * 4)}});
}

/* The same groups, and the step ends after the third: its launch at the step's end comes after
 * the two chunks handed before it. */
static void ending_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int g = 0; g < 3; g++) {
        if (g) host_work(1000);
        kernels(b[0], 3, s + g);
    }
}

Test(tracer_offload, the_step_s_end_comes_after_the_chunks_handed)
{
    run_scenario(&(scenario_t){.name = "ending",
                               .fn = ending_step,
                               .steps = 20,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(3)},
                               .stats = {.launches_handed = IS(18 * 2)}});
}

/* The same groups on the per-thread default stream: a chunk there is never handed (launched from
 * the launch thread, the handle would name that thread's stream). */
static void per_thread_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int g = 0; g < 3; g++) {
        if (g) host_work(1000);
        for (int k = 0; k < 3; k++)
            OK(fk_axpb_launch_f(&fk, fk_axpb, true, NULL, b[0], 0.5f, (float)(k + (s + g) % 5), N, 1));
    }
}

Test(tracer_offload, a_chunk_on_the_per_thread_stream_is_never_handed)
{
    run_scenario(&(scenario_t){.name = "per_thread",
                               .fn = per_thread_step,
                               .steps = 20,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(3)},
                               .stats = {.launches_handed = IS(0)}});
}

/* Host work, then a chunk of two kernels, too small for a graph, that runs as the program makes
 * it: after the chunk handed before it. */
static void small_chunk_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[2];
    kernels(b[0], 3, s);
    host_work(1000);
    kernels(b[0], 2, s + 1);
    host_work(1000);
    kernels(b[0], 3, s + 2);
    OK(fk.dtoh(h, b[0], sizeof h));
}

Test(tracer_offload_small, a_call_that_runs_comes_after_the_chunks_handed)
{
    run_scenario(&(scenario_t){.name = "small_chunk",
                               .fn = small_chunk_step,
                               .steps = 20,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18)},
                               .stats = {.launches_handed = IS(18)}}); /* one chunk a step handed */
}

/* Host work, then a copy from pageable memory and a kernel on what the handed chunk left: a
 * chunk too small for a graph, whose copy runs as the program makes it. */
static void staged_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[N], r[2];
    for (int i = 0; i < N; i++) h[i] = (float)(s * 3 + i % 7);
    kernels(b[0], 3, s);
    host_work(1000);
    OK(fk.htod(b[1], h, sizeof h));
    OK(fk_addk_launch(&fk, NULL, b[0], s % 7, N));
    host_work(1000);
    kernels(b[0], 3, s + 1);
    OK(fk.dtoh(r, b[0], sizeof r));
}

Test(tracer_offload_small, a_copy_that_runs_as_made_comes_after_the_chunks_handed)
{
    run_scenario(&(scenario_t){.name = "staged_small",
                               .fn = staged_step,
                               .steps = 20,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18)},
                               .stats = {.launches_handed = MORE_THAN(0)}});
}

/* The launch thread's graph launch fails in step 5: that chunk runs as made there, the anchor stops
 * replaying, and the rest of the step goes on eagerly. */
static void failing_step(int s, CUdeviceptr *b, void *ctx)
{
    if (g_traced && s == 5) fk.fail_next("cuGraphLaunch", CUDA_ERROR_LAUNCH_FAILED);
    gapped_step(s, b, ctx);
}

Test(tracer_offload, a_launch_that_fails_on_the_launch_thread_runs_as_made)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "handed_fail",
                                                    .fn = failing_step,
                                                    .steps = 12,
                                                    .nbufs = 2,
                                                    .info = {.state = IS(CGJ_STATE_BLACKLISTED)},
                                                    .stats = {.anchors_blacklisted = IS(1)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_BLACKLIST_LAUNCH, "reason: %s", i.reason);
    cr_assert_eq(fk.fail_pending(), 0, "the failure was never met");
}

/* The driver refuses a kernel node's new parameters in step 6: the chunk runs as made on the
 * launch thread, and later runs guard that op's values. */
static void refusing_step(int s, CUdeviceptr *b, void *ctx)
{
    if (g_traced && s == 6) fk.fail_next("cuGraphExecKernelNodeSetParams_v2", CUDA_ERROR_INVALID_VALUE);
    gapped_step(s, b, ctx);
}

Test(tracer_offload, a_patch_refused_on_the_launch_thread_runs_as_made)
{
    run_scenario(&(scenario_t){.name = "handed_refused", .fn = refusing_step, .steps = 20, .nbufs = 2});
    cr_assert_eq(fk.fail_pending(), 0, "the refusal was never met");
}

/* Another thread synchronizes the context while this one has chunks handed and not launched:
 * its synchronization comes after them (the flush it makes waits for the launch thread). */
static pthread_barrier_t g_gate;
static CUdeviceptr g_watched;
static float g_seen[N];

static void *observer(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&g_gate); /* the owner has handed its first chunks */
    OK(fk.ctx_sync());
    OK(fk.dtoh(g_seen, g_watched, sizeof g_seen));
    pthread_barrier_wait(&g_gate);
    return NULL;
}

Test(tracer_offload, another_thread_s_synchronization_waits_for_handed_chunks)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3);
    float model[N];
    OK(fk.dtoh(model, x, sizeof model));
    g_watched = x;
    for (int s = 0; s < 12; s++) {
        bool watch = s >= 6;
        pthread_t th;
        if (watch) {
            pthread_barrier_init(&g_gate, NULL, 2);
            cr_assert_eq(pthread_create(&th, NULL, observer, NULL), 0);
        }
        cr_assert_eq(cgj_trace_begin("observed"), CGJ_OK);
        for (int g = 0; g < 3; g++) {
            if (g) host_work(1000);
            kernels(x, 3, s + g);
            for (int k = 0; k < 3; k++)
                for (int i = 0; i < N; i++) model[i] = model[i] * 0.5f + (float)(k + (s + g) % 5);
            if (watch && g == 1) { /* two chunks handed; the other thread syncs and reads */
                pthread_barrier_wait(&g_gate);
                pthread_barrier_wait(&g_gate);
                float after_two[N];
                memcpy(after_two, model, sizeof model);
                cr_assert(!memcmp(g_seen, after_two, sizeof g_seen),
                          "step %d: another thread's synchronization did not see the chunks handed before it", s);
            }
        }
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        float got[N];
        OK(fk.dtoh(got, x, sizeof got));
        cr_assert(!memcmp(got, model, sizeof got), "step %d differs from the host's arithmetic", s);
        if (watch) {
            pthread_join(th, NULL);
            pthread_barrier_destroy(&g_gate);
        }
    }
    cr_assert_gt(info_of("observed").replays, 0);
}
