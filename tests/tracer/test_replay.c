/*
 * test_replay.c — the whole path (interposition → recording → graphs → replay) against the
 * fake driver: replayed steps must leave memory exactly as eager steps do. This file: steps
 * that stay on their trace (parameter patching, segments, staging, streams and events, odd step
 * shapes); test_replay_threads.c: steps of several threads, and fork; test_replay_exits.c:
 * steps that leave it (side exits, variants, blacklisting, aborts, driver failures).
 *
 * Each scenario is a step function and a row of expectations run by run_scenario()
 * (replay_common.h): the step runs eagerly into buffers E and traced into buffers T from the
 * same initial data, E and T are compared bitwise after every step, and the row's expectations
 * on cgj_trace_info, cgj_stats and the fake driver's counters are checked at the end.
 *
 * Where a chunk of replay ends depends on the program's host time between its calls
 * (CGJIT_CHUNK_US), which a loaded machine stretches at random. So cgjit runs on a fake clock
 * here (tests/common/fake_clock.h), moved by the host work the steps declare (host_work).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "replay_common.h"

#include "fake_clock.h"

static void replay_setup(void)
{
    setup();
    fake_clock_start(NULL);
}

TestSuite(tracer_replay, .init = replay_setup);

static void chain_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int k = 0; k < 10; k++) cr_assert_eq(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)k, N, 1), CUDA_SUCCESS);
}

Test(tracer_replay, replay_equals_eager_over_100_steps)
{
    run_scenario(&(scenario_t){.name = "chain",
                               .fn = chain_step,
                               .steps = 100,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .replays = IS(98),
                                        .kernels = IS(10),
                                        .segments = IS(1),
                                        .varying_slots = IS(0)},
                               /* eager: 100 steps × 10; traced: 2 eager runs × 10, then 98 graph launches */
                               .fake = {.eager_launches = IS(100 * 10 + 2 * 10), .graph_launches = IS(98)},
                               .stats = {.ops_absorbed = IS(98 * 10), .steps_replayed = IS(98)}});
}

/* ---------------------------------------------------------------------------------------------
 * Kernel parameter slots: constant, varying, patched
 * ------------------------------------------------------------------------------------------- */

static void counter_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, 1.0f, N, 1));
}

Test(tracer_replay, step_counter_is_the_only_varying_slot)
{
    run_scenario(
        &(scenario_t){.name = "counter",
                      .fn = counter_step,
                      .steps = 100,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY),
                               .kernels = IS(2),
                               .replays = IS(98),
                               .side_exits = IS(0),
                               .varying_slots = IS(1)},    /* only addk's k varies (pointers and n are constant) */
                      .stats = {.params_patched = IS(98)}, /* k changes on every replay: one patch each */
                      .fake = {.node_param_sets = IS(98)}});
}

static void saturating_counter_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s < 5 ? s : 5, N));
}

Test(tracer_replay, unchanged_varying_slot_is_not_patched)
{
    run_scenario(
        &(scenario_t){.name = "saturating",
                      .fn = saturating_counter_step,
                      .steps = 40,
                      .nbufs = 1,
                      .info = {.varying_slots = IS(1), .replays = IS(38)},
                      /* the graph holds k=1 (run 2); replays with k = 2, 3, 4, 5 patch, later ones (k=5) do not */
                      .stats = {.params_patched = IS(4)},
                      .fake = {.node_param_sets = IS(4)}});
}

static void ping_pong_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr dst = b[s % 2], src = b[1 - s % 2];
    OK(fk_copyscale_launch(&fk, NULL, dst, src, 0.5f + 0.001f * (float)s, N));
    OK(fk_axpb_launch(&fk, NULL, b[2], 0.5f, 0.25f, N, 1));
}

Test(tracer_replay, varying_float_and_pointer_are_patched)
{
    run_scenario(&(scenario_t){.name = "ping_pong",
                               .fn = ping_pong_step,
                               .steps = 100,
                               .nbufs = 3,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .replays = IS(98),
                                        .varying_slots = IS(3)}, /* dst, src and the scale vary; n does not */
                               .stats = {.params_patched = IS(98)},
                               .fake = {.node_param_sets = MORE_THAN(0), .graph_launches = IS(98)}});
}

static void ping_pong_pointer_only_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_copyscale_launch(&fk, NULL, b[s % 2], b[1 - s % 2], 0.75f, N));
}

Test(tracer_replay, alternating_pointer_alone_is_patched)
{
    run_scenario(&(scenario_t){.name = "ptr_only",
                               .fn = ping_pong_pointer_only_step,
                               .steps = 50,
                               .nbufs = 2,
                               .info = {.varying_slots = IS(2), .replays = IS(48)},
                               .stats = {.params_patched = IS(48)}});
}

static void cukernel_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch_f(&fk, fk_axpb_kernel_handle, false, NULL, b[0], 0.5f, (float)(s % 7), N, 1));
    OK(fk_axpb_launch_f(&fk, fk_axpb_kernel_handle, false, NULL, b[1], 0.25f, 1.0f, N, 2));
}

Test(tracer_replay, cukernel_handles_replay)
{
    run_scenario(
        &(scenario_t){.name = "cukernel",
                      .fn = cukernel_step,
                      .steps = 100,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY),
                               .kernels = IS(2),
                               .varying_slots = IS(1),
                               .side_exits = IS(0),
                               /* (s % 7) repeats: the guard of a varying slot never fails, whatever the value */
                               .replays = IS(98)}});
}

/* A kernel parameter both recorded runs happened to share, which then changes: the slot becomes
 * varying and is patched from then on; no side exit, no second variant. */
static void late_varying_step(int s, CUdeviceptr *b, void *ctx)
{
    float a = s < 20 ? 0.5f : 0.5f + 0.001f * (float)s;
    OK(fk_axpb_launch(&fk, NULL, b[0], a, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[1], s < 30 ? 2 : s, N));
}

Test(tracer_replay, a_constant_that_starts_varying_is_promoted)
{
    run_scenario(&(scenario_t){.name = "late",
                               .fn = late_varying_step,
                               .steps = 60,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .side_exits = IS(0),
                                        .variants = IS(1),
                                        .replays = IS(58),
                                        .varying_slots = IS(2)},
                               .stats = {.slots_promoted = IS(2), .params_patched = MORE_THAN(0)}});
}

/* A kernel of many parameters, each folded into its output: 3 pointers (8 bytes), then WIDE_4
 * 4-byte values (ints and floats). The absorbed-launch guard compares its constant slots in
 * unrolled groups (two 8-byte slots a turn, four and two 4-byte ones); a slot any group skipped
 * would replay a stale value and show in the output. */
#define WIDE_4 19
static CUfunction g_wide;

static void k_wide(void **p, const unsigned g[3], const unsigned blk[3], unsigned smem)
{
    (void)g, (void)blk, (void)smem;
    float *x = *(float **)p[0];
    const float *y = *(float **)p[1], *z = *(float **)p[2];
    float acc = 0;
    for (int k = 0; k < WIDE_4; k++) {
        int v;
        memcpy(&v, p[3 + k], 4);
        acc += (float)(v % 1000) * (float)(k + 1);
    }
    for (int i = 0; i < N; i++) x[i] = 0.5f * x[i] + y[i] - z[i] + acc / 64.0f;
}

/* Step 10: parameter *ctx differs from every other step's (a pointer: another buffer; a value:
 * 7 more). */
static void wide_step(int s, CUdeviceptr *b, void *ctx)
{
    int d = s == 10 ? *(const int *)ctx : -1;
    CUdeviceptr x = d == 0 ? b[3] : b[0], y = d == 1 ? b[3] : b[1], z = d == 2 ? b[3] : b[2];
    int v[WIDE_4];
    void *p[3 + WIDE_4] = {&x, &y, &z};
    for (int k = 0; k < WIDE_4; k++) {
        v[k] = 11 * k + 3 + (d == 3 + k ? 7 : 0);
        p[3 + k] = &v[k];
    }
    CUlaunchConfig cfg = fk_ex_config(NULL, NULL, 0);
    OK(fk_addk_launch(&fk, NULL, b[3], 1, N)); /* three kernels: one graph, not issued eagerly */
    OK(fk.launch_ex(&cfg, g_wide, p, NULL));
    OK(fk_addk_launch(&fk, NULL, b[3], 2, N));
}

Test(tracer_replay, each_constant_parameter_of_a_wide_kernel_is_guarded)
{
    size_t sizes[3 + WIDE_4];
    for (int k = 0; k < 3 + WIDE_4; k++) sizes[k] = k < 3 ? 8 : 4;
    g_wide = fk.register_kernel("wide", k_wide, 3 + WIDE_4, sizes, 0, 0);
    /* One anchor per slot, all others constant, so that the differing slot sits at its own place
     * in the guard's groups: it is promoted (a value both recorded runs shared is patched from
     * then on), no run leaves the trace, and the buffers are eager's after every step. */
    for (int k = 0; k < 3 + WIDE_4; k++) {
        char name[16];
        snprintf(name, sizeof name, "wide%d", k);
        run_scenario(&(scenario_t){.name = name,
                                   .fn = wide_step,
                                   .ctx = &k,
                                   .steps = 14,
                                   .nbufs = 4,
                                   .info = {.state = IS(CGJ_STATE_REPLAY),
                                            .side_exits = IS(0),
                                            .variants = IS(1),
                                            .replays = IS(12),
                                            .varying_slots = IS(1)}});
    }
    cr_assert_eq(stats_now().slots_promoted, 3 + WIDE_4);
}

/* ---------------------------------------------------------------------------------------------
 * Segments: boundary ops inside a step
 * ------------------------------------------------------------------------------------------- */

static void sync_step(int s, CUdeviceptr *b, void *ctx)
{
    float hv = 0;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f + (float)(s % 3), N, 1));
    OK(fk.dtoh(&hv, b[0] + 5 * sizeof(float), sizeof hv)); /* the host reads a result ... */
    int k = s + ((int)(hv * 16.0f) & 7);                   /* ... and feeds it back */
    OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    OK(fk.stream_sync(NULL));
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, 0.5f, N, 1));
}

Test(tracer_replay, sync_inside_a_step_splits_it)
{
    run_scenario(
        &(scenario_t){.name = "sync",
                      .fn = sync_step,
                      .steps = 100,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY),
                               .segments = IS(3),
                               .ops = IS(5),
                               .kernels = IS(3),
                               .replays = IS(98),
                               .side_exits = IS(0)},
                      .fake = {.graph_launches = IS(3 * 98)}}); /* three segments, each launched on every replay */
}

static void dtoh_async_pageable_step(int s, CUdeviceptr *b, void *ctx)
{
    float hv = -1;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(s % 4), N, 1));
    OK(fk.dtoh_async(&hv, b[0] + 3 * sizeof(float), sizeof hv, NULL));
    /* pageable: the host may read it at once, as eager does on the fake */
    OK(fk_addk_launch(&fk, NULL, b[1], (int)(hv * 8.0f) + s, N));
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, 0.5f, N, 1));
}

Test(tracer_replay, dtoh_async_into_pageable_memory_splits)
{
    run_scenario(&(scenario_t){.name = "dtoh_async",
                               .fn = dtoh_async_pageable_step,
                               .steps = 100,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .segments = IS(2), .replays = IS(98)}});
}

static float *g_pinned[2];

static void dtoh_async_pinned_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(s % 4), N, 1));
    OK(fk.dtoh_async(g_pinned[g_traced], b[0], N * sizeof(float), NULL));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 0.5f, N, 1));
}

static void pinned_copies_equal(const scenario_t *sc, int s, bufs_t *b)
{
    OK(fk.stream_sync(NULL));
    cr_assert(memcmp(g_pinned[0], g_pinned[1], N * sizeof(float)) == 0, "step %d: pinned copy differs", s);
}

Test(tracer_replay, dtoh_async_into_pinned_memory_stays_in_the_graph)
{
    for (int k = 0; k < 2; k++) OK(fk.host_alloc((void **)&g_pinned[k], N * sizeof(float), 0));
    run_scenario(&(scenario_t){.name = "pinned",
                               .fn = dtoh_async_pinned_step,
                               .steps = 50,
                               .nbufs = 1,
                               .after = pinned_copies_equal,
                               .info = {.segments = IS(1), .replays = IS(48)}});
}

/* ---------------------------------------------------------------------------------------------
 * Guards v2: values that change between runs are patched into the graph, not side exits
 * ------------------------------------------------------------------------------------------- */

static float *g_pin_in[2][2], *g_pin_out[2][2]; /* [eager or traced half][even or odd step] */

/* Every value a step may change: a grid, a staged copy's size (growing past its staging buffer)
 * from a fresh malloc'd buffer each step, a device copy's source and destination, a memset's
 * address, value and count, a pinned copy's host address in both directions. */
static void varying_values_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1 + (unsigned)s % 3));
    size_t n = 8 + (size_t)(s * 7) % (N - 8);
    float *h = malloc(N * sizeof(float));
    cr_assert(h);
    for (size_t i = 0; i < n; i++) h[i] = (float)s + (float)i;
    OK(fk.htod_async(b[1], h, n * sizeof(float), NULL));
    memset(h, 0xEE, N * sizeof(float));
    free(h);
    OK(fk.dtod_async(b[2] + (CUdeviceptr)(s % 2) * N / 2 * sizeof(float), b[s % 2], N / 2 * sizeof(float), NULL));
    OK(fk.memset32_async(b[3] + (CUdeviceptr)(s % 4) * sizeof(float), fbits((float)s), (size_t)(N / 2 + s % 5), NULL));
    float *in = g_pin_in[g_traced][s % 2];
    for (int i = 0; i < 8; i++) in[i] = (float)(s * 8 + i);
    OK(fk.htod_async(b[2], in, 8 * sizeof(float), NULL)); /* pinned: read when the copy runs */
    OK(fk.dtoh_async(g_pin_out[g_traced][s % 2], b[0], N * sizeof(float), NULL));
    OK(fk_copyscale_launch(&fk, NULL, b[3], b[1], 0.5f, N));
}

static void pinned_outputs_equal(const scenario_t *sc, int s, bufs_t *b)
{
    OK(fk.ctx_sync());
    cr_assert(memcmp(g_pin_out[0][s % 2], g_pin_out[1][s % 2], N * sizeof(float)) == 0,
              "step %d: pinned output differs", s);
}

Test(tracer_replay, values_that_vary_every_step_are_patched)
{
    for (int k = 0; k < 4; k++) {
        OK(fk.host_alloc((void **)&g_pin_in[k / 2][k % 2], N * sizeof(float), 0));
        OK(fk.host_alloc((void **)&g_pin_out[k / 2][k % 2], N * sizeof(float), 0));
    }
    run_scenario(&(scenario_t){
        .name = "varying_values",
        .fn = varying_values_step,
        .steps = 60,
        .nbufs = 4,
        .after = pinned_outputs_equal,
        .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(1), .replays = IS(58), .side_exits = IS(0)},
        .stats = {.params_patched = MORE_THAN(100)},
        .fake = {.node_param_sets = MORE_THAN(100)}});
}

/* A copy of nothing where the trace copies something: a graph cannot hold it, so that step
 * leaves the trace (with its reason) and runs eagerly; the others replay. */
static void empty_copy_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk.dtod_async(b[1], b[0], s == 10 ? 0 : N * sizeof(float), NULL));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.5f, N));
}

static void zero_length_at_ten(const scenario_t *sc, int s, bufs_t *b)
{
    cgj_trace_info_t i = info_of(sc->name);
    if (s == 10) cr_assert(i.reason_code == CGJ_REASON_DIFF_ZERO_LENGTH && i.reason_op == 1, "%s", i.reason);
}

Test(tracer_replay, empty_copy_leaves_the_trace)
{
    run_scenario(&(scenario_t){.name = "empty_copy",
                               .fn = empty_copy_step,
                               .steps = 30,
                               .nbufs = 2,
                               .after = zero_length_at_ten,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .side_exits = IS(1), .replays = IS(27)}});
}

/* In-step allocations whose size changes every step within its size class keep the plan. */
static void alloc_in_class_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr tmp = 0;
    OK(fk.mem_alloc(&tmp, 4160 + (size_t)(s % 16) * 4)); /* class 5120 */
    OK(fk.memset32_async(tmp, fbits(1.0f), N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, tmp, b[1], 1.0f + (float)(s % 3), N));
    OK(fk_copyscale_launch(&fk, NULL, b[0], tmp, 0.5f, N));
    OK(fk.mem_free(tmp));
}

Test(tracer_replay, allocation_size_varying_within_its_class_keeps_the_plan)
{
    run_scenario(&(scenario_t){.name = "alloc_class",
                               .fn = alloc_in_class_step,
                               .steps = 40,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .variants = IS(1),
                                        .allocations = IS(1),
                                        .replays = IS(38),
                                        .side_exits = IS(0)}});
}

/* One boundary op between two kernels; ctx selects which. */
enum { B_STREAM_SYNC, B_CTX_SYNC, B_EVENT_SYNC, B_STREAM_QUERY, B_EVENT_QUERY, B_FREE, B_DTOH_SYNC, B_COUNT };
static const char *const boundary_names[B_COUNT] = {"stream_sync", "ctx_sync", "event_sync", "stream_query",
                                                    "event_query", "mem_free", "dtoh"};
static CUevent g_ev;

static void boundary_step(int s, CUdeviceptr *b, void *ctx)
{
    int kind = *(int *)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(s % 5), N, 1));
    OK(fk.event_record(g_ev, NULL));
    CUdeviceptr tmp = 0;
    float h[4];
    switch (kind) {
    case B_STREAM_SYNC: OK(fk.stream_sync(NULL)); break;
    case B_CTX_SYNC: OK(fk.ctx_sync()); break;
    case B_EVENT_SYNC: OK(fk.event_sync(g_ev)); break;
    case B_STREAM_QUERY: OK(fk.stream_query(NULL)); break;
    case B_EVENT_QUERY: OK(fk.event_query(g_ev)); break;
    case B_FREE:
        OK(fk.mem_alloc(&tmp, 256));
        OK(fk.mem_free(tmp));
        break;
    case B_DTOH_SYNC: OK(fk.dtoh(h, b[0], sizeof h)); break;
    }
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f, N));
}

Test(tracer_replay, every_boundary_op_splits)
{
    OK(fk.event_create(&g_ev, 0));
    for (int kind = 0; kind < B_COUNT; kind++) {
        char name[64];
        snprintf(name, sizeof name, "boundary_%s", boundary_names[kind]);
        run_scenario(&(scenario_t){
            .name = name,
            .fn = boundary_step,
            .steps = 20,
            .nbufs = 2,
            .ctx = &kind,
            /* A free of memory the step allocated itself is a pool op: it ends no segment. */
            .info = {.state = IS(CGJ_STATE_REPLAY), .segments = IS(kind == B_FREE ? 1 : 2), .replays = IS(18)}});
    }
}

static CUstream g_prod;
static CUevent g_outside_ev;

/* The step waits on an event recorded before it began (outside any step). */
static void outside_event_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk.stream_wait(NULL, g_outside_ev, 0));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.5f, N));
    OK(fk.event_record(g_ev, NULL));
    OK(fk.stream_sync(NULL));
    OK(fk.stream_wait(g_prod, g_ev, 0)); /* recorded in the previous segment: not ordered by it */
    OK(fk_axpb_launch(&fk, g_prod, b[1], 0.5f, (float)(s % 3), N, 1));
}

/* Before each step, outside it: work on the producer stream and the event the step waits on. */
static void produce_outside(const scenario_t *sc, int s, bufs_t *b)
{
    OK(fk_addk_launch(&fk, g_prod, b->e[1], 1, N));
    OK(fk_addk_launch(&fk, g_prod, b->t[1], 1, N));
    OK(fk.event_record(g_outside_ev, g_prod));
}

Test(tracer_replay, waits_on_events_recorded_elsewhere)
{
    OK(fk.stream_create(&g_prod, 0));
    OK(fk.event_create(&g_outside_ev, 0));
    OK(fk.event_create(&g_ev, 0));
    run_scenario(&(scenario_t){.name = "outside_event",
                               .fn = outside_event_step,
                               .steps = 40,
                               .nbufs = 2,
                               .before = produce_outside,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .segments = IS(2), .replays = IS(38)}});
}

/* The same, the outside event taken from a pool of three: the step's wait node takes each. */
static CUevent g_outside_pool[3];

static void produce_outside_pooled(const scenario_t *sc, int s, bufs_t *b)
{
    g_outside_ev = g_outside_pool[s % 3];
    produce_outside(sc, s, b);
}

Test(tracer_replay, waits_on_pooled_events_recorded_elsewhere)
{
    OK(fk.stream_create(&g_prod, 0));
    for (int k = 0; k < 3; k++) OK(fk.event_create(&g_outside_pool[k], 0));
    OK(fk.event_create(&g_ev, 0));
    run_scenario(&(scenario_t){.name = "outside_event_pool",
                               .fn = outside_event_step,
                               .steps = 40,
                               .nbufs = 2,
                               .before = produce_outside_pooled,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .segments = IS(2), .replays = IS(38)},
                               .fake = {.node_param_sets = AT_LEAST(30)}});
}

/* ---------------------------------------------------------------------------------------------
 * Host-to-device staging
 * ------------------------------------------------------------------------------------------- */

static float g_src[N], g_src2[N];

static void staging_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int i = 0; i < N; i++) g_src[i] = 0.5f * (float)s + (float)i;
    OK(fk.htod_async(b[1], g_src, sizeof g_src, NULL));
    memset(g_src, 0xAB, sizeof g_src); /* the app reuses its buffer at once */
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.5f, N));
    for (int i = 0; i < N; i++) g_src2[i] = (float)(s * i % 13);
    OK(fk.htod(b[2], g_src2, sizeof g_src2)); /* the synchronous form, too */
    memset(g_src2, 0xCD, sizeof g_src2);
    OK(fk_axpb_launch(&fk, NULL, b[2], 0.5f, 1.0f, N, 1));
}

Test(tracer_replay, h2d_from_pageable_memory_is_staged_at_call_time)
{
    run_scenario(&(scenario_t){.name = "staging",
                               .fn = staging_step,
                               .steps = 100,
                               .nbufs = 3,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(98), .segments = IS(1)},
                               .stats = {.bytes_staged = IS(98ull * 2 * N * sizeof(float))}});
}

/* ---------------------------------------------------------------------------------------------
 * Streams and events
 * ------------------------------------------------------------------------------------------- */

static void ptsz_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int k = 0; k < 4; k++)
        OK(fk_axpb_launch_f(&fk, fk_axpb, true, NULL, b[k % 2], 0.5f, (float)(k + s % 3), N, 1));
}

Test(tracer_replay, per_thread_default_stream_replays)
{
    run_scenario(&(scenario_t){.name = "ptsz",
                               .fn = ptsz_step,
                               .steps = 100,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(98), .segments = IS(1)},
                               .fake = {.graph_launches = IS(98)}});
}

static void mixed_default_streams_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch_f(&fk, fk_axpb, true, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_axpb_launch_f(&fk, fk_axpb, false, NULL, b[1], 0.5f, (float)s, N, 1));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.5f, N));
}

Test(tracer_replay, legacy_and_per_thread_streams_in_one_step)
{
    run_scenario(&(scenario_t){.name = "mixed_default",
                               .fn = mixed_default_streams_step,
                               .steps = 50,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(48)}});
}

static CUstream g_side;
static CUevent g_ev1, g_ev2;

/* Stream 0 and g_side ordered by two events: e1 recorded on 0 and waited on by g_side, e2 back. */
static void two_stream_step(int s, CUdeviceptr *b, CUevent e1, CUevent e2)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(s % 4), N, 1));
    OK(fk.event_record(e1, NULL));
    OK(fk.stream_wait(g_side, e1, 0));
    OK(fk_copyscale_launch(&fk, g_side, b[1], b[0], 0.5f, N));
    OK(fk.event_record(e2, g_side));
    OK(fk.stream_wait(NULL, e2, 0));
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, 1.0f, N, 1));
}

static void events_step(int s, CUdeviceptr *b, void *ctx)
{
    two_stream_step(s, b, g_ev1, g_ev2);
}

Test(tracer_replay, events_across_streams_replay)
{
    OK(fk.stream_create(&g_side, 0));
    OK(fk.event_create(&g_ev1, 0));
    OK(fk.event_create(&g_ev2, 0));
    run_scenario(
        &(scenario_t){.name = "events",
                      .fn = events_step,
                      .steps = 100,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .ops = IS(7), .segments = IS(1), .replays = IS(98)}});
}

/* Events taken from a pool, as PyTorch and XLA take theirs: each step records and waits on
 * other events of the pool, in the same pattern (two distinct events a step), or every
 * `same_every`-th step on one event twice (another pattern: the second wait is ordered after the
 * second record, not the first). */
#define POOL 6
static CUevent g_pool[POOL];
static unsigned g_records[POOL];
static int g_same_every;
static unsigned (*g_event_records)(CUevent);

static int g_pick[200][2]; /* with g_random: each step's two events, drawn from the first three */
static bool g_random;

static int pool_first(int s)
{
    return g_random ? g_pick[s][0] : (2 * s) % POOL;
}
static int pool_second(int s)
{
    if (g_random) return g_pick[s][1];
    return g_same_every && s % g_same_every == 0 ? pool_first(s) : (2 * s + 1) % POOL;
}

static void pool_step(int s, CUdeviceptr *b, void *ctx)
{
    two_stream_step(s, b, g_pool[pool_first(s)], g_pool[pool_second(s)]);
}

static void pool_before(const scenario_t *sc, int s, bufs_t *b)
{
    for (int k = 0; k < POOL; k++) g_records[k] = g_event_records(g_pool[k]);
}

/* Each event the step recorded was recorded as often by both runs of the step (eager, and
 * replayed or not), and no other: a graph that kept another step's event would record that one. */
static void pool_after(const scenario_t *sc, int s, bufs_t *b)
{
    for (int k = 0; k < POOL; k++) {
        unsigned want = 2 * ((k == pool_first(s)) + (k == pool_second(s)));
        cr_assert_eq(g_event_records(g_pool[k]) - g_records[k], want, "step %d: event %d recorded %u times, want %u", s,
                     k, g_event_records(g_pool[k]) - g_records[k], want);
    }
}

static void pool_setup(int same_every)
{
    g_event_records = (unsigned (*)(CUevent))dlsym(fk.handle, "fakecuda_event_records");
    cr_assert(g_event_records);
    OK(fk.stream_create(&g_side, 0));
    for (int k = 0; k < POOL; k++) OK(fk.event_create(&g_pool[k], 0));
    g_same_every = same_every;
}

Test(tracer_replay, events_from_a_pool_replay_renamed)
{
    pool_setup(0);
    run_scenario(
        &(scenario_t){.name = "event_pool",
                      .fn = pool_step,
                      .steps = 100,
                      .nbufs = 2,
                      .before = pool_before,
                      .after = pool_after,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .ops = IS(7), .segments = IS(1), .replays = IS(98)}});
}

/* Events drawn at random from three, six seeds: a third of the steps record one event twice (the
 * other grouping, which gets a variant of its own). Every step exact, every event recorded by
 * exactly its own steps' runs, and most steps replayed (130-146 of 150; the same test with the
 * grouping left out of the shape: 8 of 150, its exits never making a variant). */
Test(tracer_replay, events_drawn_at_random_from_a_pool)
{
    pool_setup(0);
    g_random = true;
    for (unsigned seed = 1; seed <= 6; seed++) {
        srand(seed);
        for (int k = 0; k < 200; k++) g_pick[k][0] = rand() % 3, g_pick[k][1] = rand() % 3;
        char name[32];
        snprintf(name, sizeof name, "event_pool_random_%u", seed);
        cgj_trace_info_t i = run_scenario(&(scenario_t){
            .name = name, .fn = pool_step, .steps = 150, .nbufs = 2, .before = pool_before, .after = pool_after});
        cr_log_info("%s: %llu replays, %llu side exits, %u variants", name, (unsigned long long)i.replays,
                    (unsigned long long)i.side_exits, i.variants);
        cr_assert_geq(i.replays, 120, "%s: %llu replays of 150 steps", name, (unsigned long long)i.replays);
    }
    g_random = false;
}

/* Every 7th step records one event twice: that grouping leaves the trace until it has a
 * variant of its own, then switches to it. */
Test(tracer_replay, events_from_a_pool_in_another_grouping_get_a_variant)
{
    pool_setup(7);
    run_scenario(&(scenario_t){.name = "event_pool_pattern",
                               .fn = pool_step,
                               .steps = 100,
                               .nbufs = 2,
                               .before = pool_before,
                               .after = pool_after,
                               .info = {.replays = AT_LEAST(90), .variants = IS(2), .side_exits = AT_MOST(2)}});
}

static void host_func_count(void *data)
{
    ++*(int *)data;
}

/* A host function whose data is made for each call (XLA's callbacks): each run calls it with
 * its own, in turn one of three counters; both runs of a step count the same one. */
static int g_host_slots[2][3];

static void host_data_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk.host_func(NULL, host_func_count, &g_host_slots[g_traced][s % 3]));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.25f, 1.0f, N, 1));
}

static void host_data_after(const scenario_t *sc, int s, bufs_t *b)
{
    OK(fk.ctx_sync());
    for (int k = 0; k < 3; k++)
        cr_assert_eq(g_host_slots[1][k], g_host_slots[0][k], "step %d: counter %d called %d times replayed, %d eagerly",
                     s, k, g_host_slots[1][k], g_host_slots[0][k]);
    cr_assert_eq(g_host_slots[0][s % 3], s / 3 + 1);
}

Test(tracer_replay, host_functions_with_new_data_each_call_replay)
{
    run_scenario(&(scenario_t){.name = "host_data",
                               .fn = host_data_step,
                               .steps = 30,
                               .nbufs = 1,
                               .after = host_data_after,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28)}});
}

/* The driver refuses one event change: that run goes on eagerly, exact; the event is then
 * guarded as a constant (a run on another one leaves the trace). */
static void pool_refuse(const scenario_t *sc, int s, bufs_t *b)
{
    pool_before(sc, s, b);
    if (s == 10) fk.fail_next("cuGraphExecEventRecordNodeSetEvent", CUDA_ERROR_INVALID_VALUE);
}

Test(tracer_replay, an_event_change_the_driver_refuses_runs_eagerly)
{
    pool_setup(0);
    run_scenario(&(scenario_t){.name = "event_pool_refused",
                               .fn = pool_step,
                               .steps = 40,
                               .nbufs = 2,
                               .before = pool_refuse,
                               .after = pool_after,
                               .info = {.replays = AT_LEAST(8)}});
    cr_assert(!fk.fail_pending(), "the refusal was not met");
}

static int g_host_calls[2];

static void host_func_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk.host_func(NULL, host_func_count, &g_host_calls[g_traced]));
}

Test(tracer_replay, host_functions_replay)
{
    run_scenario(&(scenario_t){.name = "host_func",
                               .fn = host_func_step,
                               .steps = 30,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28)}});
    cr_assert_eq(g_host_calls[0], 30);
    cr_assert_eq(g_host_calls[1], 30, "the host function ran %d times in 30 traced steps", g_host_calls[1]);
}

/* ---------------------------------------------------------------------------------------------
 * Odd step shapes
 * ------------------------------------------------------------------------------------------- */

/* A temporary allocated and freed inside the step, used only through kernel parameters: replay
 * serves it from the pool, so its address is a constant pool pointer and the free ends no
 * segment. */
static void in_step_alloc_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr tmp = 0;
    OK(fk.mem_alloc(&tmp, N * sizeof(float)));
    OK(fk.memset32_async(tmp, 0, N, NULL)); /* copyscale reads its destination */
    OK(fk_copyscale_launch(&fk, NULL, tmp, b[1], 1.0f, N));
    OK(fk_axpb_launch(&fk, NULL, tmp, 0.5f, (float)(s % 3), N, 1));
    OK(fk_copyscale_launch(&fk, NULL, b[0], tmp, 0.5f, N));
    OK(fk.mem_free(tmp));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 0.0f, N, 1));
}

Test(tracer_replay, allocation_inside_a_step)
{
    run_scenario(&(scenario_t){
        .name = "in_step_alloc",
        .fn = in_step_alloc_step,
        .steps = 50,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY),
                 .segments = IS(1),
                 .allocations = IS(1),
                 .replays = IS(48),
                 .varying_slots = IS(1)}}); /* only the step's scalar varies: the temporary is a pool pointer */
}

/* The same with a memset and a copy on the temporary: their addresses are shape, matched
 * between the two eager runs by (allocation, offset) and relocated into the pool. */
static void in_step_alloc_memset_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr tmp = 0;
    OK(fk.mem_alloc(&tmp, N * sizeof(float)));
    OK(fk.memset32_async(tmp, fbits(1.5f), N, NULL));
    OK(fk_axpb_launch(&fk, NULL, tmp, 0.5f, (float)(s % 3), N, 1));
    OK(fk.dtod_async(b[1], tmp, N * sizeof(float), NULL));
    OK(fk.mem_free(tmp));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.5f, N));
}

Test(tracer_replay, allocation_inside_a_step_used_by_copies)
{
    run_scenario(&(scenario_t){.name = "in_step_alloc_copy",
                               .fn = in_step_alloc_memset_step,
                               .steps = 30,
                               .nbufs = 2,
                               .info = {.runs = IS(30), .state = IS(CGJ_STATE_REPLAY), .replays = IS(28)}});
}

static void boundaries_at_the_edges_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[2];
    OK(fk.dtoh(h, b[0], sizeof h));
    OK(fk_addk_launch(&fk, NULL, b[0], (int)h[0] % 5 + s, N));
    OK(fk.stream_sync(NULL));
}

Test(tracer_replay, boundaries_first_and_last)
{
    run_scenario(&(scenario_t){.name = "edges",
                               .fn = boundaries_at_the_edges_step,
                               .steps = 40,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .segments = IS(3), .replays = IS(38)},
                               .fake = {.graph_launches = IS(38)}}); /* empty segments are not launched */
}

Test(tracer_replay, empty_step)
{
    for (int s = 0; s < 10; s++) {
        cr_assert_eq(cgj_trace_begin("empty"), CGJ_OK);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    cgj_trace_info_t i = info_of("empty");
    cr_assert_neq(i.state, CGJ_STATE_BLACKLISTED, "reason: %s", i.reason);
    cr_assert_eq(i.runs, 10);
    cr_assert_eq(counts_now().graph_launches, 0);
}

static int g_ticks;
static void k_tick(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    g_ticks++;
}

static void tick_step(int s, CUdeviceptr *b, void *ctx)
{
    CUfunction tick = *(CUfunction *)ctx;
    OK(fk.launch(tick, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    OK(fk_addk_launch(&fk, NULL, b[0], 1, N));
}

Test(tracer_replay, kernel_without_parameters)
{
    CUfunction tick = fk.register_kernel("tick", k_tick, 0, NULL, 0, 0);
    cr_assert(tick);
    run_scenario(&(scenario_t){.name = "tick",
                               .fn = tick_step,
                               .steps = 30,
                               .nbufs = 1,
                               .ctx = &tick,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28)}});
    cr_assert_eq(g_ticks, 60, "the parameterless kernel ran %d times for 60 launches", g_ticks);
}

/* A kernel with parameters of 1, 8, 2, 4 and 16 bytes: offsets come from the driver. */
typedef struct {
    float a, b, c, d;
} f4_t;
static void k_mixed(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    signed char c = *(signed char *)p[0];
    float *x = *(float **)p[1];
    short sh = *(short *)p[2];
    int n = *(int *)p[3];
    f4_t v = *(f4_t *)p[4];
    for (int i = 0; i < n; i++) x[i] = x[i] * v.a + (float)c + (float)sh * v.b + v.d;
}

static void mixed_step(int s, CUdeviceptr *b, void *ctx)
{
    CUfunction f = *(CUfunction *)ctx;
    signed char c = (signed char)(s % 3);
    short sh = 7;
    int n = N;
    f4_t v = {0.5f, 0.25f, 99.0f, (float)(s % 5)};
    void *p[] = {&c, &b[0], &sh, &n, &v};
    OK(fk.launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
}

Test(tracer_replay, mixed_size_parameters)
{
    size_t sizes[] = {1, 8, 2, 4, 16};
    CUfunction f = fk.register_kernel("mixed", k_mixed, 5, sizes, 0, 0);
    cr_assert(f);
    run_scenario(
        &(scenario_t){.name = "mixed",
                      .fn = mixed_step,
                      .steps = 60,
                      .nbufs = 1,
                      .ctx = &f,
                      .info = {.state = IS(CGJ_STATE_REPLAY),
                               .varying_slots = IS(2), /* c and v vary */
                               .replays = IS(58)}}); /* (s % 3) and (s % 5) repeat: varying slots never fail a guard */
}

static void extra_form_step(int s, CUdeviceptr *b, void *ctx)
{
    struct {
        CUdeviceptr x;
        float a, c;
        int n;
        int pad;
    } blob = {b[0], 0.5f, (float)(s % 4), N, 0};
    size_t size = sizeof blob;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &blob, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    OK(fk.launch(fk_axpb, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    OK(fk_addk_launch(&fk, NULL, b[0], 1, N));
}

Test(tracer_replay, extra_form_parameters_are_patched)
{
    run_scenario(&(scenario_t){.name = "extra",
                               .fn = extra_form_step,
                               .steps = 50,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .varying_slots = IS(1), /* the packed buffer is one slot */
                                        .replays = IS(48)},
                               .stats = {.params_patched = MORE_THAN(0)}});
}

static void launch_ex_step(int s, CUdeviceptr *b, void *ctx)
{
    bool with_attr = *(bool *)ctx;
    CUlaunchAttribute attr;
    memset(&attr, 0x50 + s % 7, sizeof attr); /* bytes the attribute does not use: stack garbage */
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 0;
    CUlaunchConfig cfg = fk_ex_config(NULL, with_attr ? &attr : NULL, with_attr ? 1 : 0);
    CUdeviceptr x = b[0];
    float a = 0.5f, c = (float)s;
    int n = N;
    void *p[] = {&x, &a, &c, &n};
    OK(fk.launch_ex(&cfg, fk_axpb, p, NULL));
}

Test(tracer_replay, launch_kernel_ex_replays)
{
    bool with_attr = false;
    run_scenario(&(scenario_t){.name = "launch_ex",
                               .fn = launch_ex_step,
                               .steps = 40,
                               .nbufs = 1,
                               .ctx = &with_attr,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(38)}});
}

/* The same attribute every step, but the bytes of the value union it does not use differ (as
 * they do when a program fills a stack CUlaunchAttribute field by field).
 * FAILS with the current library (LIBRARY BUG): call_shape_equal() in tracer/record.c memcmps
 * whole CUlaunchAttribute structs (padding after `id` and the unused bytes of the 64-byte value
 * union included), so every run "differs" and the anchor is blacklisted at step 4. */
Test(tracer_replay, launch_kernel_ex_attribute_padding_is_not_shape)
{
    bool with_attr = true;
    run_scenario(&(scenario_t){.name = "launch_ex_attr",
                               .fn = launch_ex_step,
                               .steps = 40,
                               .nbufs = 1,
                               .ctx = &with_attr,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = AT_LEAST(30)}});
}

static float g_mc_src[N];
static float g_mc_dst[N];

static void copies_and_sets_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int i = 0; i < N; i++) g_mc_src[i] = (float)(s + 2 * i);
    OK(fk.memcpy_async(b[1], (CUdeviceptr)(uintptr_t)g_mc_src, sizeof g_mc_src, NULL)); /* H2D */
    OK(fk.memset8(b[2], (unsigned char)(0x3f), N * sizeof(float)));
    OK(fk.memset32(b[2] + 8 * sizeof(float), fbits(2.5f), 4));
    OK(fk.dtod(b[0], b[1], N / 2 * sizeof(float)));
    OK(fk.memcpy_async(b[0] + N / 2 * sizeof(float), b[2], N / 2 * sizeof(float), NULL)); /* D2D */
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk.memcpy_async((CUdeviceptr)(uintptr_t)g_mc_dst, b[0], sizeof g_mc_dst, NULL)); /* D2H pageable */
    OK(fk_addk_launch(&fk, NULL, b[2], s + (int)g_mc_dst[3] % 4, N));
}

Test(tracer_replay, copies_and_sets_of_every_form)
{
    run_scenario(&(scenario_t){.name = "copies",
                               .fn = copies_and_sets_step,
                               .steps = 50,
                               .nbufs = 3,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .replays = IS(48),
                                        .segments = IS(2)}}); /* the D2H into pageable memory ends a segment */
}

/* CGJIT_CHUNK_OPS: a segment the host waits for at its end is launched in chunks as it is
 * absorbed, so that the GPU starts early; the results are the same. */
static void chunk_setup(void)
{
    setenv("CGJIT_CHUNK_OPS", "4", 1);
    fk_open(&fk);
    fake_clock_start(NULL);
}

static void chunked_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[2];
    for (int k = 0; k < 10; k++) OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(k + s % 3), N, 1));
    OK(fk.dtoh(h, b[0], sizeof h)); /* the host waits here */
    for (int k = 0; k < 3; k++) OK(fk_addk_launch(&fk, NULL, b[1], (int)h[0] % 7 + k, N));
}

Test(tracer_replay_chunks, segments_before_a_sync_launch_in_chunks, .init = chunk_setup)
{
    run_scenario(&(scenario_t){
        .name = "chunked",
        .fn = chunked_step,
        .steps = 30,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY),
                 .replays = IS(28),
                 .segments = IS(4)}, /* 10 kernels before the sync in chunks of 4, 4, 2; then 3 after it */
        .fake = {.graph_launches = IS(28 * 4)}});
}

/* CGJIT_CHUNK_US: where the program works on the host between its calls (Python between
 * PyTorch's launches), replay launches what it absorbed so far, so the GPU runs it meanwhile. */
static void gap_setup(void)
{
    setenv("CGJIT_CHUNK_US", "200", 1);
    fk_open(&fk);
    fake_clock_start(NULL);
}

static int g_gap_us; /* the program's host work between its groups of launches */

static void gapped_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[2];
    for (int g = 0; g < 3; g++) {
        if (g) host_work(g_gap_us);
        for (int k = 0; k < 3; k++) OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(k + s % 3), N, 1));
    }
    OK(fk.dtoh(h, b[0], sizeof h)); /* the host waits here */
    for (int k = 0; k < 3; k++) OK(fk_addk_launch(&fk, NULL, b[1], (int)h[0] % 7 + k, N));
}

Test(tracer_replay_chunks, host_work_between_calls_ends_a_chunk, .init = gap_setup)
{
    g_gap_us = 1000;
    run_scenario(&(scenario_t){
        .name = "gapped",
        .fn = gapped_step,
        .steps = 20,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY),
                 .replays = IS(18),
                 .segments = IS(4)}, /* 3 chunks of 3 kernels, one at each stretch of host work; 3 after */
        .fake = {.graph_launches = IS(18 * 4)}});
    char *buf = fk_report_text();
    cr_assert(buf);
    cr_assert(strstr(buf, "segment 1 ends at op 3: cuLaunchKernel (host work before the next call"),
              "the report does not say why the chunks end:\n%s", buf);
    free(buf);
}

Test(tracer_replay_chunks, calls_in_a_row_stay_in_one_chunk, .init = gap_setup)
{
    g_gap_us = 0;
    run_scenario(&(scenario_t){.name = "gapless",
                               .fn = gapped_step,
                               .steps = 20,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(2)},
                               .fake = {.graph_launches = IS(18 * 2)}});
}

/* A decode step's shape: host work before each launch, adding up to CGJIT_CHUNK_US at the
 * last kernel, then at once a read-back into pinned memory and the synchronization. The
 * read-back is a short tail: it joins the last chunk, not a graph launch of its own. With more
 * host work before it, the GPU gains enough to launch the chunk before it on its own. */
static float *g_tail_pin[2];
static int g_tail_gap_us; /* the host work before the read-back */

/* Five launches with 199 us of host work between them, then host work of gap_us (crossing
 * CGJIT_CHUNK_US=200 at the last kernel) and the read-back into pinned memory. */
static void launches_then_tail(int s, CUdeviceptr *b, int gap_us)
{
    for (int k = 0; k < 5; k++) {
        if (k) host_work(k < 4 ? 50 : 49);
        OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(k + s % 3), N, 1));
    }
    host_work(gap_us);
    OK(fk.dtoh_async(g_tail_pin[g_traced], b[0], N * sizeof(float), NULL));
}

static void tail_step(int s, CUdeviceptr *b, void *ctx)
{
    launches_then_tail(s, b, g_tail_gap_us);
    OK(fk.stream_sync(NULL));
}

static void tail_copies_equal(const scenario_t *sc, int s, bufs_t *b)
{
    cr_assert(memcmp(g_tail_pin[0], g_tail_pin[1], N * sizeof(float)) == 0, "step %d: read-back differs", s);
}

Test(tracer_replay_chunks, a_short_tail_joins_the_last_chunk, .init = gap_setup)
{
    for (int k = 0; k < 2; k++) OK(fk.host_alloc((void **)&g_tail_pin[k], N * sizeof(float), 0));
    g_tail_gap_us = 2;
    run_scenario(&(scenario_t){.name = "short_tail",
                               .fn = tail_step,
                               .steps = 20,
                               .nbufs = 1,
                               .after = tail_copies_equal,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(2)},
                               .fake = {.graph_launches = IS(18)}}); /* the sync's segment is empty */
}

Test(tracer_replay_chunks, a_tail_after_long_host_work_is_a_chunk, .init = gap_setup)
{
    for (int k = 0; k < 2; k++) OK(fk.host_alloc((void **)&g_tail_pin[k], N * sizeof(float), 0));
    g_tail_gap_us = 40; /* over CGJIT_CHUNK_US / 16 */
    run_scenario(&(scenario_t){.name = "long_tail",
                               .fn = tail_step,
                               .steps = 20,
                               .nbufs = 1,
                               .after = tail_copies_equal,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(3)},
                               .fake = {.graph_launches = IS(18 * 2)}});
}

/* The same tail at the step's end, with host work after it: no call says how long the host
 * works before cgj_trace_end, so the chunk before the tail still launches on its own. */
static void tail_at_end_step(int s, CUdeviceptr *b, void *ctx)
{
    launches_then_tail(s, b, 2);
    host_work(1000); /* then the step ends */
}

static void tail_at_end_equal(const scenario_t *sc, int s, bufs_t *b)
{
    OK(fk.stream_sync(NULL));
    tail_copies_equal(sc, s, b);
}

Test(tracer_replay_chunks, a_tail_at_the_steps_end_stays_a_chunk, .init = gap_setup)
{
    for (int k = 0; k < 2; k++) OK(fk.host_alloc((void **)&g_tail_pin[k], N * sizeof(float), 0));
    run_scenario(&(scenario_t){.name = "tail_at_end",
                               .fn = tail_at_end_step,
                               .steps = 20,
                               .nbufs = 1,
                               .after = tail_at_end_equal,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(2)},
                               .fake = {.graph_launches = IS(18 * 2)}});
}

/* Two variants whose chunks end at different ops: the short step (4 launches) works on the
 * host after its second launch, so its variant ends a chunk there; the long one (8 launches) does
 * not. A short run that begins in the long variant and ends after 4 ops switches to the short
 * variant: the work absorbed past the end of the short variant's first chunk must still be
 * launched (it was dropped: the switch took that chunk for the one in progress). */
static void two_chunkings_step(int s, CUdeviceptr *b, void *ctx)
{
    bool is_long = s == 0 || (s >= 3 && s % 2 == 1); /* long, short, short, long, short, ... */
    for (int k = 0; k < (is_long ? 8 : 4); k++) {
        if (!is_long && k == 2) host_work(1000);
        OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(k + 1), N, 1));
    }
}

Test(tracer_replay_chunks, a_switch_to_a_variant_chunked_elsewhere_launches_all_it_absorbed, .init = gap_setup)
{
    run_scenario(&(scenario_t){
        .name = "two_chunkings", .fn = two_chunkings_step, .steps = 40, .nbufs = 1, .info = {.variants = AT_LEAST(2)}});
}
