/*
 * test_replay_exits.c — replay against the fake driver, continued (see test_replay.c): steps
 * that leave their trace. Guards and side exits, variants, blacklisting, untraceable work
 * inside a step, failures of cgjit's own driver calls, and the CGJIT_LOG / CGJIT_MAX_* knobs.
 * Whatever the trace does, every step must leave memory exactly as eager execution does.
 *
 * Each scenario is a step function and a row of expectations run by run_scenario()
 * (replay_common.h). Assertions on the text of cgj_trace_info's reason stay in the tests, one
 * per line.
 */
#include <time.h>
#include <unistd.h>

#include "replay_common.h"

TestSuite(tracer_replay, .init = setup);

/* ---------------------------------------------------------------------------------------------
 * Guards: a failure at every op position
 * ------------------------------------------------------------------------------------------- */

static float g_host[N];

/* Six ops; at step 10+k (k = 0..5) op k differs from the trace in its topology (another kernel,
 * another driver function); a differing grid, copy size or operand is patched instead (see
 * test_replay.c, values_that_vary_every_step_are_patched). */
static void six_op_step(int s, CUdeviceptr *b, void *ctx)
{
    int d = (s >= 10 && s < 16) ? s - 10 : -1;
    for (int i = 0; i < N; i++) g_host[i] = 0.25f * (float)(s + i);
    OK(axpb_or_other(NULL, b[0], 0.5f, 1.0f, N, d == 0));
    if (d == 1) OK(fk.memset32(b[2], fbits(1.0f), N)); /* synchronous: another driver function */
    else OK(fk.memset32_async(b[2], fbits(1.0f), N, NULL));
    if (d == 2) OK(fk_axpb_launch(&fk, NULL, b[1], 1.0f, 3.0f, N, 1)); /* another function */
    else OK(fk_addk_launch(&fk, NULL, b[1], 3, N));
    if (d == 3) OK(fk.dtod_async(b[3], b[0], N * sizeof(float), NULL)); /* a device source */
    else OK(fk.htod_async(b[3], g_host, N * sizeof(float), NULL));
    OK(axpb_or_other(NULL, b[1], 0.5f, 2.0f, N, d == 4));
    if (d == 5) OK(fk.htod_async(b[2] + N / 2 * sizeof(float), g_host, N / 2 * sizeof(float), NULL));
    else OK(fk.dtod_async(b[2] + N / 2 * sizeof(float), b[0], N / 2 * sizeof(float), NULL));
}

static uint64_t g_exits_before;

static void count_exits_before(const scenario_t *sc, int s, bufs_t *b)
{
    g_exits_before = s >= 2 ? info_of(sc->name).side_exits : 0;
}

/* Steps 10..15 side exit once each; no other replayed step does. */
static void one_exit_per_differing_step(const scenario_t *sc, int s, bufs_t *b)
{
    cgj_trace_info_t i = info_of(sc->name);
    if (s >= 10 && s < 16)
        cr_assert_eq(i.side_exits, g_exits_before + 1, "step %d (op %d differs) did not side exit", s, s - 10);
    else if (s >= 2) cr_assert_eq(i.side_exits, g_exits_before, "step %d: unexpected side exit: %s", s, i.reason);
    /* the first exit's recording becomes the draft, so its reason survives the step; later
     * divergent recordings overwrite the reason with "run differs from the previous one" */
    if (s == 10) cr_assert(i.reason_code == CGJ_REASON_DIFF_KERNEL && i.reason_op == 0, "reason: %s", i.reason);
}

Test(tracer_replay, guard_failure_at_every_op_position)
{
    const int steps = 40;
    run_scenario(&(scenario_t){.name = "six",
                               .fn = six_op_step,
                               .steps = steps,
                               .nbufs = 4,
                               .before = count_exits_before,
                               .after = one_exit_per_differing_step,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .ops = IS(6),
                                        .side_exits = IS(6),
                                        .replays = IS(steps - 2 - 6)}, /* replays resume after the exits */
                               .stats = {.side_exits = AT_LEAST(6)}});
}

static void length_step(int s, CUdeviceptr *b, void *ctx)
{
    int n = 6;
    if (s == 10) n = 3; /* ends early */
    if (s == 12) n = 9; /* goes on past the trace */
    if (s == 14) n = 0; /* empty */
    for (int k = 0; k < n; k++) OK(fk_axpb_launch(&fk, NULL, b[k % 2], 0.5f, (float)k, N, 1));
}

Test(tracer_replay, shorter_and_longer_steps_side_exit)
{
    run_scenario(
        &(scenario_t){.name = "length",
                      .fn = length_step,
                      .steps = 30,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .side_exits = IS(3), .replays = IS(30 - 2 - 3)}});
}

/* ---------------------------------------------------------------------------------------------
 * Side exits carrying this run's values; exits after a boundary; exits that keep coming
 * ------------------------------------------------------------------------------------------- */

static void varying_then_diverge_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));                                  /* varying k, absorbed */
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f + 0.01f * (float)s, N)); /* varying scale */
    OK(axpb_or_other(NULL, b[1], 0.5f, 1.0f, N, s % 10 == 9));                  /* diverges now and then */
}

Test(tracer_replay, side_exit_reissues_absorbed_ops_with_this_runs_values)
{
    run_scenario(&(scenario_t){.name = "exit_values",
                               .fn = varying_then_diverge_step,
                               .steps = 60,
                               .nbufs = 2,
                               .info = {.side_exits = AT_LEAST(1), .state = IS(CGJ_STATE_REPLAY)}});
}

static void diverge_after_sync_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk.stream_sync(NULL));
    OK(axpb_or_other(NULL, b[1], 0.5f, 1.0f, N, s >= 4 && s % 2));
    OK(fk_addk_launch(&fk, NULL, b[1], 1, N));
}

/* The two shapes differ only after a boundary: a replay that has launched a segment cannot
 * switch variants, so every other step side-exits. Results must stay equal; and a variant that
 * already exists should not be built again.
 * The cr_expect lines FAIL with the current library: each side exit's recording matches the
 * draft left by the previous exit of the same shape, so finish_record() builds the same two
 * shapes again and again until CGJIT_MAX_VARIANTS (8 variants, 8 traces built). */
Test(tracer_replay, divergence_after_a_boundary)
{
    cgj_trace_info_t i =
        run_scenario(&(scenario_t){.name = "after_sync",
                                   .fn = diverge_after_sync_step,
                                   .steps = 60,
                                   .nbufs = 2,
                                   .info = {.state = IS(CGJ_STATE_REPLAY), .side_exits = AT_LEAST(1)}});
    cr_expect_leq(i.variants, 2, "%u variants built for 2 distinct shapes", i.variants);
    cr_expect_leq(stats_now().traces_built, 2, "%llu traces built for 2 distinct shapes",
                  (unsigned long long)stats_now().traces_built);
}

/* A step whose length follows the data (after ten steady steps, 0..30 extra launches): far more
 * shapes than CGJIT_MAX_VARIANTS, so almost every replay leaves the trace; after 24 of 32 such
 * runs the anchor runs eagerly for good, which is cheaper. */
static void data_length_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    int extra = s < 10 ? 0 : 1 + (s * 7) % 31;
    for (int k = 0; k < extra; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.25f, N));
}

Test(tracer_replay, replays_that_keep_exiting_are_given_up)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){
        .name = "data_length",
        .fn = data_length_step,
        .steps = 120,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_BLACKLISTED), .side_exits = LESS_THAN(60)}}); /* given up long before the end */
    cr_assert_eq(i.reason_code, CGJ_REASON_BLACKLIST_EXITS, "%s", i.reason);
}

/* Shapes that come in pairs and never again (after ten steady steps, steps 10 and 11 launch one
 * extra kernel, 12 and 13 two, ...): each pair's two recordings agree, so a variant could be
 * built for it, and none would ever replay. The second variant is built; it never replays, so no
 * third is (OFF_UNUSED_VARIANT), where before one was built for every pair up to
 * CGJIT_MAX_VARIANTS (8 variants, each recorded, planned, captured and instantiated for
 * nothing). */
static void paired_length_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    int extra = s < 10 ? 0 : 1 + (s - 10) / 2;
    for (int k = 0; k < extra; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.25f, N));
}

static bool g_unused_noted;

static void note_unused_variant(const scenario_t *sc, int s, bufs_t *b)
{
    g_unused_noted |= info_of(sc->name).reason_code == CGJ_REASON_OFF_UNUSED_VARIANT;
}

Test(tracer_replay, a_newest_variant_that_never_replays_stops_the_building)
{
    run_scenario(&(scenario_t){.name = "paired_length",
                               .fn = paired_length_step,
                               .steps = 60,
                               .nbufs = 2,
                               .after = note_unused_variant,
                               .info = {.variants = IS(2)},
                               .stats = {.traces_built = IS(2)}});
    cr_assert(g_unused_noted, "no step noted OFF_UNUSED_VARIANT");
}

/* Four shapes in pairs, over and over (AABBCCDDAABB...): every shape recurs, so every one gets
 * its variant, the third and fourth once the one before them has replayed; then every step
 * replays. */
static void cycling_pairs_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    int extra = (s / 2) % 4;
    for (int k = 0; k < extra; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.25f, N));
}

static uint64_t g_replays_at_40;

static void note_replays_at_40(const scenario_t *sc, int s, bufs_t *b)
{
    if (s == 39) g_replays_at_40 = info_of(sc->name).replays;
}

/* 80 steps of fn: `variants` variants built, and every one of the last 40 steps replayed. */
static void check_variants_then_all_replay(const char *name, step_fn fn, int variants)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = name,
                                                    .fn = fn,
                                                    .steps = 80,
                                                    .nbufs = 2,
                                                    .after = note_replays_at_40,
                                                    .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(variants)},
                                                    .stats = {.traces_built = IS(variants)}});
    cr_assert_eq(i.replays - g_replays_at_40, 40, "%s: only %llu of the last 40 steps replayed", name,
                 (unsigned long long)(i.replays - g_replays_at_40));
}

Test(tracer_replay, shapes_that_recur_get_their_variants)
{
    check_variants_then_all_replay("cycling_pairs", cycling_pairs_step, 4);
}

/* A library's way of picking kernels changes for good after a one-off step (cuBLASLt after a
 * sample of other shapes, lt_sample_loop): ten steady steps, two steps of another shape that
 * never comes back (its variant never replays), then a new steady shape. The new shape must get
 * its variant (a run later than the second did) and replay from then on. */
static void new_steady_shape_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    int extra = s < 10 ? 0 : s < 12 ? 5 : 1;
    for (int k = 0; k < extra; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.25f, N));
}

Test(tracer_replay, a_new_steady_shape_after_an_unused_variant_gets_its_own)
{
    check_variants_then_all_replay("new_steady", new_steady_shape_step, 3);
}

/* Steps whose long form differs every time somewhere in its tail (data-dependent shapes), every
 * other step the short form, which replays: each long run leaves the trace at the end of the
 * short form. Its recordings match nothing; after CGJ_LONE_RECORDS of them in a row the exits
 * stop recording but for one in a growing number (the 1st, 2nd, 4th ... after that), where
 * before every exit recorded its whole run. From step `settle` on (when set) the long form is
 * always the same: it must then get its variant (found by a recording made on the way) and
 * replay. */
#define LONE_TAIL 110
static void lone_tail_step(int s, CUdeviceptr *b, void *ctx)
{
    int settle = ctx ? *(int *)ctx : 1 << 30;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[1], 1, N));
    if (s % 2 == 0) return;
    int var = s >= settle ? 0 : (s / 2) % LONE_TAIL; /* no two alike in 220 steps */
    for (int k = 0; k < LONE_TAIL; k++)
        if (k == var) OK(fk_axpb_launch(&fk, NULL, b[1], 0.25f, (float)k, N, 1));
        else OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.25f, N));
}

Test(tracer_replay, exits_whose_recordings_match_nothing_stop_recording)
{
    cgj_trace_info_t i = run_scenario(
        &(scenario_t){.name = "lone_tail",
                      .fn = lone_tail_step,
                      .steps = 200,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(1), .replays = AT_LEAST(98)}});
    /* 100 long runs of 112 calls: about 11,000 ops recorded if each were; the first runs (before
     * a variant: 2, and the lone streak of 4) and the 1st, 2nd, 4th, 8th, 16th, 32nd and 64th
     * exit after it: 13 runs, under 1,500. */
    cgj_stats_t st = stats_now();
    cr_assert_lt(st.ops_recorded, 1500, "%llu ops recorded", (unsigned long long)st.ops_recorded);
    cr_assert_geq(i.side_exits, 90, "%llu side exits", (unsigned long long)i.side_exits);
}

static uint64_t g_replays_before_last_40;

static void note_replays_before_last_40(const scenario_t *sc, int s, bufs_t *b)
{
    if (s == sc->steps - 41) g_replays_before_last_40 = info_of(sc->name).replays;
}

Test(tracer_replay, a_shape_that_settles_after_lone_exits_still_gets_its_variant)
{
    int settle = 61;
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "lone_settles",
                                                    .fn = lone_tail_step,
                                                    .steps = 300,
                                                    .nbufs = 2,
                                                    .ctx = &settle,
                                                    .after = note_replays_before_last_40,
                                                    .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2)}});
    cr_assert_eq(i.replays - g_replays_before_last_40, 40, "only %llu of the last 40 steps replayed",
                 (unsigned long long)(i.replays - g_replays_before_last_40));
}

/* ---------------------------------------------------------------------------------------------
 * Blacklisting and variants
 * ------------------------------------------------------------------------------------------- */

static void varying_count_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int k = 0; k <= s % 5; k++) OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)k, N, 1));
}

/* Every run disagrees with the previous one: blacklisted at the 4th failure (CGJIT_MAX_RECORDS). */
static void blacklisted_after_four_failures(const scenario_t *sc, int s, bufs_t *b)
{
    cgj_trace_info_t i = info_of(sc->name);
    if (s < 4) {
        cr_assert_neq(i.state, CGJ_STATE_BLACKLISTED, "blacklisted after %d failures", s);
        cr_assert_eq(i.record_failures, (uint32_t)s);
    } else {
        cr_assert_eq(i.state, CGJ_STATE_BLACKLISTED, "step %d: not blacklisted after 4 failures", s);
        cr_assert_eq(i.record_failures, 4);
    }
}

Test(tracer_replay, repeated_divergence_blacklists)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "diverge",
                                                    .fn = varying_count_step,
                                                    .steps = 30,
                                                    .nbufs = 1,
                                                    .after = blacklisted_after_four_failures,
                                                    .info = {.variants = IS(0), .replays = IS(0), .runs = IS(30)},
                                                    .stats = {.anchors_blacklisted = IS(1), .steps_eager = IS(30)},
                                                    .fake = {.graph_launches = IS(0), .captures = IS(0)}});
    cr_assert_str_not_empty(i.reason);
}

static void alternating_step(int s, CUdeviceptr *b, void *ctx)
{
    int warm = *(int *)ctx; /* steps before the alternation starts */
    OK(axpb_or_other(NULL, b[0], 0.5f, 1.0f, N, s >= warm && s % 2));
    OK(fk_addk_launch(&fk, NULL, b[1], 1, N));
}

static uint64_t g_replays_at_70;

static void note_replays_at_70(const scenario_t *sc, int s, bufs_t *b)
{
    if (s == sc->steps - 51) g_replays_at_70 = info_of(sc->name).replays;
}

static void check_alternation(const char *name, int warm)
{
    cgj_trace_info_t i =
        run_scenario(&(scenario_t){.name = name,
                                   .fn = alternating_step,
                                   .steps = 120,
                                   .nbufs = 2,
                                   .ctx = &warm,
                                   .after = note_replays_at_70,
                                   .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2)},
                                   .stats = {.variant_switches = MORE_THAN(0), .traces_built = IS(2)}});
    cr_assert_geq(i.replays - g_replays_at_70, 48, "%s: only %llu of the last 50 steps replayed", name,
                  (unsigned long long)(i.replays - g_replays_at_70));
}

Test(tracer_replay, alternating_shapes_after_a_warm_start_build_two_variants)
{
    check_alternation("alt_warm", 4);
}

/* Strict alternation from the very first step: one kernel on even steps, another on odd ones.
 * FAILS with the current library: with no trace yet, finish_record() compares a run only with
 * the previous one (the draft), so A B A B ... never produces two equal runs; every run is a
 * record failure and the anchor is blacklisted at step 4 (CGJIT_MAX_RECORDS), never reaching
 * the variant logic. Results stay equal to eager. */
Test(tracer_replay, alternating_shapes_from_the_start_build_two_variants)
{
    check_alternation("alt_strict", 0);
}

static float g_alt_src[N];

static void alternating_staged_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int i = 0; i < N; i++) g_alt_src[i] = (float)(s * 3 + i);
    OK(fk.htod_async(b[1], g_alt_src, sizeof g_alt_src, NULL));
    memset(g_alt_src, 0xEE, sizeof g_alt_src);
    OK(axpb_or_other(NULL, b[0], 0.5f, 1.0f, N, s >= 4 && s % 2));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.25f, N));
}

Test(tracer_replay, variant_switch_carries_staged_bytes)
{
    run_scenario(&(scenario_t){.name = "alt_staged",
                               .fn = alternating_staged_step,
                               .steps = 80,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2), .replays = AT_LEAST(70)},
                               .stats = {.variant_switches = MORE_THAN(0)}});
}

/* A memset value that changes every step is a value of the memset node: patched, replayed. */
static void memset_value_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk.memset32_async(b[1], fbits((float)s), N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.5f, N));
}

Test(tracer_replay, memset_value_changing_every_step_is_patched)
{
    run_scenario(&(scenario_t){.name = "memset_value",
                               .fn = memset_value_step,
                               .steps = 30,
                               .nbufs = 2,
                               .info = {.replays = IS(28), .side_exits = IS(0)},
                               .fake = {.node_param_sets = AT_LEAST(27)}});
}

/* ---------------------------------------------------------------------------------------------
 * Untraceable work inside a step
 * ------------------------------------------------------------------------------------------- */

static void opaque_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_axpb_launch_f(&fk, fk_opaque, false, NULL, b[1], 0.5f, (float)s, N, 1));
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, 1.0f, N, 1));
}

Test(tracer_replay, kernel_without_layout_aborts_and_blacklists)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "opaque",
                                                    .fn = opaque_step,
                                                    .steps = 20,
                                                    .nbufs = 2,
                                                    .info = {.state = IS(CGJ_STATE_BLACKLISTED), .replays = IS(0)},
                                                    .stats = {.aborts = AT_LEAST(4), .traces_built = IS(0)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_ABORT_NO_LAYOUT, "reason: %s", i.reason);
}

static CUstream g_cap_stream;

static void capture_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    /* the app captures its own graph on its own stream, inside the step */
    OK(fk.begin_capture(g_cap_stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(fk_axpb_launch(&fk, g_cap_stream, b[1], 0.5f, (float)(s % 3), N, 1));
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    OK(fk.end_capture(g_cap_stream, &g));
    cr_assert(g);
    OK(fk.graph_instantiate(&x, g, 0));
    OK(fk.graph_launch(x, g_cap_stream));
    OK(fk.stream_sync(g_cap_stream));
    OK(fk.graph_exec_destroy(x));
    OK(fk.graph_destroy(g));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.25f, N));
}

Test(tracer_replay, stream_capture_inside_a_step_aborts)
{
    OK(fk.stream_create(&g_cap_stream, CU_STREAM_NON_BLOCKING));
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "capture",
                                                    .fn = capture_step,
                                                    .steps = 20,
                                                    .nbufs = 2,
                                                    .info = {.state = IS(CGJ_STATE_BLACKLISTED), .replays = IS(0)},
                                                    .stats = {.aborts = MORE_THAN(0)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_ABORT_CAPTURE, "reason: %s", i.reason);
}

/* A step marked inside the program's own capture runs eagerly: were it replayed, its launches
 * would be absorbed and go to cgjit's graph, not to the one the program captures. */
Test(tracer_replay, a_step_begun_while_the_program_captures_runs_eagerly)
{
    CUstream cs;
    OK(fk.stream_create(&cs, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = fk_alloc_floats(&fk, N, 2);
    float want[N], got[N];
    OK(fk.dtoh(want, x, sizeof want));
    for (int s = 0; s < 12; s++) {
        OK(fk.begin_capture(cs, s % 2 ? CU_STREAM_CAPTURE_MODE_RELAXED : CU_STREAM_CAPTURE_MODE_GLOBAL));
        cr_assert_eq(cgj_trace_begin("in_capture"), CGJ_OK);
        for (int k = 0; k < 3; k++) OK(fk_axpb_launch(&fk, cs, x, 0.5f, (float)k, N, 1));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk_capture_end_and_run(&fk, cs));
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < N; i++) want[i] = 0.5f * want[i] + (float)k;
    }
    OK(fk.dtoh(got, x, sizeof got));
    cr_assert(!memcmp(want, got, sizeof want), "the program's graphs lost work: x[0] = %g, want %g", got[0], want[0]);
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("in_capture", &i), CGJ_OK);
    cr_assert_eq(i.replays, 0, "replays: %llu", (unsigned long long)i.replays);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_eq(st.ops_absorbed + st.build_failures + st.traces_built, 0,
                 "absorbed %llu, builds failed %llu, built %llu", (unsigned long long)st.ops_absorbed,
                 (unsigned long long)st.build_failures, (unsigned long long)st.traces_built);
    OK(fk.stream_destroy(cs));
}

/* The app's own graphs, built outside any step (one per buffer set), launched inside one. */
static CUgraphExec g_app_exec[2];

static void build_app_graph(int which, CUdeviceptr x)
{
    CUgraph g = NULL;
    OK(fk.begin_capture(g_cap_stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(fk_axpb_launch(&fk, g_cap_stream, x, 0.5f, 3.0f, N, 1));
    OK(fk.end_capture(g_cap_stream, &g));
    OK(fk.graph_instantiate(&g_app_exec[which], g, 0));
}

static void build_app_graphs(const scenario_t *sc, int s, bufs_t *b)
{
    build_app_graph(0, b->e[0]);
    build_app_graph(1, b->t[0]);
}

static void app_graph_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk.graph_launch(g_app_exec[g_traced], NULL));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 0.0f, N, 1));
}

/* The program's graph runs where the program launches it, after the work absorbed before it
 * (launched first) and before the work after it: the step replays around it. */
Test(tracer_replay, app_graph_launch_inside_a_step_runs_as_made)
{
    OK(fk.stream_create(&g_cap_stream, CU_STREAM_NON_BLOCKING));
    run_scenario(&(scenario_t){.name = "app_graph",
                               .fn = app_graph_step,
                               .steps = 20,
                               .nbufs = 1,
                               .prepare = build_app_graphs,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .segments = IS(2)},
                               .stats = {.aborts = IS(0)}});
}

/* A step that allocates and launches a graph of the program's own runs eagerly: a replay would
 * hand the step's allocation another address than the one the program's graph may hold. */
static void app_graph_alloc_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr tmp;
    OK(fk.mem_alloc(&tmp, N * sizeof(float)));
    OK(fk_copyscale_launch(&fk, NULL, tmp, b[0], 2.0f, N));
    OK(fk.graph_launch(g_app_exec[g_traced], NULL));
    OK(fk_copyscale_launch(&fk, NULL, b[0], tmp, 0.5f, N));
    OK(fk.mem_free(tmp));
}

Test(tracer_replay, app_graph_launch_in_a_step_that_allocates_runs_eagerly)
{
    OK(fk.stream_create(&g_cap_stream, CU_STREAM_NON_BLOCKING));
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "app_graph_alloc",
                                                    .fn = app_graph_alloc_step,
                                                    .steps = 20,
                                                    .nbufs = 1,
                                                    .prepare = build_app_graphs,
                                                    .info = {.replays = IS(0)},
                                                    .stats = {.aborts = MORE_THAN(0)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_ABORT_AS_MADE_ALLOC, "reason: %s", i.reason);
}

/* A call cgjit does not capture (a 2D copy), run as made. Once in a replayed step: the run
 * leaves the trace there, the absorbed work first. In every step: the step replays around it. */
static __typeof__(cuMemcpy2D) *g_copy2d;

static void copy2d(CUdeviceptr dst, CUdeviceptr src)
{
    CUDA_MEMCPY2D p = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                       .srcDevice = src,
                       .srcPitch = N * sizeof(float),
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                       .dstDevice = dst,
                       .dstPitch = N * sizeof(float),
                       .WidthInBytes = N * sizeof(float),
                       .Height = 1};
    OK(g_copy2d(&p));
}

static void late_copy_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[0], 2, N));
    if (s == 10 || ctx) copy2d(b[1], b[0]);
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.25f, 1.0f, N, 1));
    if (ctx) OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, (float)s, N, 1));
}

Test(tracer_replay, a_call_run_as_made_once_in_a_replayed_step_comes_after_the_absorbed_work)
{
    OK(fk.gpa("cuMemcpy2D", (void **)&g_copy2d, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    run_scenario(&(scenario_t){.name = "late",
                               .fn = late_copy_step,
                               .steps = 30,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(30 - 2 - 1), .side_exits = IS(1)},
                               .stats = {.aborts = IS(0)}});
}

Test(tracer_replay, a_call_run_as_made_in_every_step_ends_a_segment)
{
    static int every;
    OK(fk.gpa("cuMemcpy2D", (void **)&g_copy2d, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    run_scenario(&(scenario_t){.name = "as_made",
                               .fn = late_copy_step,
                               .ctx = &every,
                               .steps = 30,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28), .segments = IS(2)},
                               .stats = {.aborts = IS(0)}});
}

/* Such a call on memory the step allocated: the step runs eagerly (the pool's plan cannot see
 * what the call touches). */
static void as_made_alloc_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr tmp;
    OK(fk.mem_alloc(&tmp, N * sizeof(float)));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    copy2d(tmp, b[0]);
    OK(fk_copyscale_launch(&fk, NULL, b[1], tmp, 0.5f, N));
    OK(fk.mem_free(tmp));
}

Test(tracer_replay, a_call_run_as_made_in_a_step_that_allocates_runs_eagerly)
{
    OK(fk.gpa("cuMemcpy2D", (void **)&g_copy2d, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "as_made_alloc",
                                                    .fn = as_made_alloc_step,
                                                    .steps = 20,
                                                    .nbufs = 2,
                                                    .info = {.replays = IS(0)},
                                                    .stats = {.aborts = MORE_THAN(0)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_ABORT_AS_MADE_ALLOC, "reason: %s", i.reason);
}

/* ---------------------------------------------------------------------------------------------
 * Driver failures in cgjit's own calls
 * ------------------------------------------------------------------------------------------- */

static void launch_fail_step(int s, CUdeviceptr *b, void *ctx)
{
    int fail_at = *(int *)ctx;
    if (g_traced && s == fail_at) fk.fail_next("cuGraphLaunch", CUDA_ERROR_LAUNCH_FAILED);
    for (int k = 0; k < 5; k++) OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)(k + s), N, 1));
}

Test(tracer_replay, graph_launch_failure_reruns_eagerly_and_blacklists)
{
    int fail_at = 5;
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "launch_fail",
                                                    .fn = launch_fail_step,
                                                    .steps = 30,
                                                    .nbufs = 1,
                                                    .ctx = &fail_at,
                                                    .info = {.state = IS(CGJ_STATE_BLACKLISTED)},
                                                    .stats = {.anchors_blacklisted = IS(1)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_BLACKLIST_LAUNCH, "reason: %s", i.reason);
    /* Steps 2, 3 and 4 replayed; step 5's graph never ran (its ops ran eagerly): step 5 counts as
     * eager, not as replayed too. */
    cgj_stats_t st = stats_now();
    cr_expect_eq(i.replays, 3, "a step whose graph launch failed counts as replayed (replays = %llu)",
                 (unsigned long long)i.replays);
    cr_expect_eq(st.steps_replayed, 3, "steps_replayed = %llu", (unsigned long long)st.steps_replayed);
    cr_expect_eq(st.steps, st.steps_replayed + st.steps_eager, "steps %llu != replayed %llu + eager %llu",
                 (unsigned long long)st.steps, (unsigned long long)st.steps_replayed,
                 (unsigned long long)st.steps_eager);
}

static void launch_fail_mid_step(int s, CUdeviceptr *b, void *ctx)
{
    if (g_traced && s == 5) fk.fail_next("cuGraphLaunch", CUDA_ERROR_LAUNCH_FAILED);
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)s, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[0], 1, N));
    OK(fk.stream_sync(NULL)); /* the first segment's launch fails here */
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, 1.0f, N, 1));
}

Test(tracer_replay, graph_launch_failure_at_a_boundary)
{
    run_scenario(&(scenario_t){.name = "launch_fail_mid",
                               .fn = launch_fail_mid_step,
                               .steps = 20,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_BLACKLISTED), .replays = IS(3)}});
}

static void instantiate_fail_step(int s, CUdeviceptr *b, void *ctx)
{
    if (g_traced && s == 1) fk.fail_next("cuGraphInstantiateWithFlags", CUDA_ERROR_OUT_OF_MEMORY);
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[1], s, N));
}

Test(tracer_replay, instantiate_failure_blacklists)
{
    cgj_trace_info_t i =
        run_scenario(&(scenario_t){.name = "inst_fail",
                                   .fn = instantiate_fail_step,
                                   .steps = 20,
                                   .nbufs = 2,
                                   .info = {.state = IS(CGJ_STATE_BLACKLISTED), .variants = IS(0)},
                                   .stats = {.build_failures = IS(1), .traces_built = IS(0), .steps_replayed = IS(0)},
                                   .fake = {.graph_launches = IS(0)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_BUILD_INSTANTIATE, "reason: %s", i.reason);
}

static void patch_fail_step(int s, CUdeviceptr *b, void *ctx)
{
    if (g_traced && s == 6) fk.fail_next("cuGraphExecKernelNodeSetParams_v2", CUDA_ERROR_INVALID_VALUE);
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f + 0.01f * (float)s, N));
}

static void exit_patch_at_six(const scenario_t *sc, int s, bufs_t *b)
{
    cgj_trace_info_t i = info_of(sc->name);
    if (s == 6) cr_assert_eq(i.reason_code, CGJ_REASON_EXIT_PATCH, "step 6: %s", i.reason);
}

/* The driver refuses a patch once: that step's absorbed work runs eagerly (results equal), and
 * the next steps replay again (the parameters are still patched). */
Test(tracer_replay, patch_refused_reruns_that_step_eagerly)
{
    run_scenario(&(scenario_t){.name = "patch_fail",
                               .fn = patch_fail_step,
                               .steps = 20,
                               .nbufs = 2,
                               .after = exit_patch_at_six,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(17), .side_exits = IS(1)}});
}

/* A memset whose count changes every step, whose node refuses one new count: the same. */
static void memset_refused_step(int s, CUdeviceptr *b, void *ctx)
{
    if (g_traced && s == 6) fk.fail_next("cuGraphExecMemsetNodeSetParams", CUDA_ERROR_INVALID_VALUE);
    OK(fk.memset32_async(b[1], fbits(2.0f), (size_t)(N / 2 + s % 7), NULL));
    OK(fk_copyscale_launch(&fk, NULL, b[0], b[1], 0.5f, N));
}

Test(tracer_replay, memset_patch_refused_reruns_eagerly)
{
    run_scenario(&(scenario_t){.name = "memset_refused",
                               .fn = memset_refused_step,
                               .steps = 20,
                               .nbufs = 2,
                               .after = exit_patch_at_six,
                               .info = {.replays = AT_LEAST(4), .side_exits = AT_LEAST(1)}});
}

/* A second variant whose build fails: the first one keeps replaying. */
static void second_variant_fail_step(int s, CUdeviceptr *b, void *ctx)
{
    bool other = s == 6 || s == 8; /* two identical divergent runs: a variant is built at s == 8 */
    if (g_traced && s == 8) fk.fail_next("cuGraphInstantiateWithFlags", CUDA_ERROR_OUT_OF_MEMORY);
    OK(axpb_or_other(NULL, b[0], 0.5f, 1.0f, N, other));
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
}

Test(tracer_replay, failed_build_of_a_second_variant_keeps_the_first)
{
    run_scenario(&(scenario_t){
        .name = "second_fail",
        .fn = second_variant_fail_step,
        .steps = 30,
        .nbufs = 1,
        .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(1), .side_exits = IS(2), .replays = IS(30 - 2 - 2)},
        .stats = {.build_failures = IS(1), .traces_built = IS(1), .anchors_blacklisted = IS(0)}});
}

/* ---------------------------------------------------------------------------------------------
 * With the guards log on, or a CGJIT_MAX_* limit (a suite without .init: the environment must be
 * set before fk_open)
 * ------------------------------------------------------------------------------------------- */

TestSuite(tracer_replay_log);

/* fk_open with CGJIT_LOG=cats written to a new file, named in path (a mkstemp template). */
static void open_logging_to(char *path, const char *cats)
{
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    setenv("CGJIT_LOG", cats, 1);
    setenv("CGJIT_LOG_FILE", path, 1);
    fk_open(&fk);
}

Test(tracer_replay_log, guard_failure_is_at_the_differing_op)
{
    char path[] = "/tmp/cgjit_guardsXXXXXX";
    open_logging_to(path, "guards");
    run_scenario(
        &(scenario_t){.name = "six_log", .fn = six_op_step, .steps = 24, .nbufs = 4, .info = {.side_exits = IS(6)}});
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[1024];
    int next = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "side exit at op ");
        if (!p) continue;
        int at = atoi(p + strlen("side exit at op "));
        cr_assert_eq(at, next, "side exit #%d at op %d, expected op %d: %s", next, at, next, line);
        next++;
    }
    fclose(f);
    unlink(path);
    cr_assert_eq(next, 6, "%d side exits logged", next);
}

Test(tracer_replay_log, max_variants_one_keeps_one_trace)
{
    setenv("CGJIT_MAX_VARIANTS", "1", 1);
    fk_open(&fk);
    int warm = 4;
    run_scenario(&(scenario_t){.name = "one_variant",
                               .fn = alternating_step,
                               .steps = 40,
                               .nbufs = 2,
                               .ctx = &warm,
                               .info = {.variants = IS(1), .state = IS(CGJ_STATE_REPLAY), .side_exits = AT_LEAST(15)},
                               .stats = {.traces_built = IS(1)}});
}

Test(tracer_replay_log, max_records_one_blacklists_at_the_first_disagreement)
{
    setenv("CGJIT_MAX_RECORDS", "1", 1);
    fk_open(&fk);
    bufs_t b;
    bufs_alloc(&b, 1);
    step_both("mr1", varying_count_step, 0, &b, NULL);
    cr_assert_neq(info_of("mr1").state, CGJ_STATE_BLACKLISTED);
    step_both("mr1", varying_count_step, 1, &b, NULL);
    cr_assert_eq(info_of("mr1").state, CGJ_STATE_BLACKLISTED);
}

/* Two shapes in turn, and once a third that neither variant holds: under CGJIT_LOG=guards the
 * side exit it makes comes after a line for each variant, saying why it was not taken. */
static void third_shape_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    if (s == 31) OK(fk_axpb_launch(&fk, NULL, b[1], 0.25f, 1.0f, N, 1));
    else if (s % 2) OK(fk_addk_launch(&fk, NULL, b[1], 3, N));
    else OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.25f, N));
    OK(fk_addk_launch(&fk, NULL, b[0], 1, N));
}

Test(tracer_replay_log, a_side_exit_says_why_each_other_variant_was_not_taken)
{
    char path[] = "/tmp/cgjit_variantsXXXXXX";
    open_logging_to(path, "guards");
    run_scenario(
        &(scenario_t){.name = "third", .fn = third_shape_step, .steps = 36, .nbufs = 2, .info = {.variants = IS(2)}});
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[1024];
    int not_taken = 0, exits_after = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "at op 1, variant ") && strstr(line, " not taken: differs: kernel function differs"))
            not_taken++;
        if (strstr(line, "side exit at op 1 (DIFF_KERNEL)") && not_taken) exits_after++;
    }
    fclose(f);
    unlink(path);
    cr_assert_geq(not_taken, 1, "no variant's refusal logged");
    cr_assert_geq(exits_after, 1, "no side exit after the refusals");
}

/* Bursts of two shapes: 40 steps of one, 8 of the other, again and again. Each step allocates a
 * block first (served from the trace's pool), so a replay that finds the other shape past it
 * cannot continue in the other variant (the program holds this variant's block) and leaves the
 * trace. Its recording is the other variant's shape, which exists: the next step must begin in
 * that variant, not again in the one it left (each step of a 40-step burst leaving the trace,
 * then the anchor given up as one whose replays keep exiting). tests/apps/lt_sample_loop under
 * CGJIT_STEP=sync did that: cuBLASLt ran inside the step, so no switch was possible. */
static void burst_step(int s, CUdeviceptr *b, void *ctx)
{
    bool other = s % 48 >= 40;
    CUdeviceptr tmp;
    OK(fk.mem_alloc(&tmp, 1 << 20));
    OK(fk.dtod_async(tmp, b[0], N * sizeof(float), NULL));
    OK(axpb_or_other(NULL, tmp, 0.5f, 1.0f, N, other));
    OK(fk.dtod_async(b[0], tmp, N * sizeof(float), NULL));
    OK(fk.mem_free(tmp));
}

Test(tracer_replay, a_step_that_left_for_a_known_shape_begins_the_next_in_it)
{
    cgj_trace_info_t i = run_scenario(
        &(scenario_t){.name = "bursts",
                      .fn = burst_step,
                      .steps = 240,
                      .nbufs = 1,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2), .replays = AT_LEAST(200)}});
    cr_assert_leq(i.side_exits, 16, "%llu side exits: steps kept beginning in the variant they left",
                  (unsigned long long)i.side_exits);
}

/* ---- one anchor begun at several places of a loop ----
 * As a kernel that follows each synchronization of a PyTorch program (torchvision's detection
 * heads): each place makes a step of its own shape under the same anchor, and each run begins
 * in the variant the run before it ended in, so its first ops match that variant's until the
 * shapes part. Segments of fewer than 3 ops run as made (CGJIT_GRAPH_MIN_OPS 3, the default). */
static void places_setup(void)
{
    setenv("CGJIT_GRAPH_MIN_OPS", "3", 1);
    setup();
}

TestSuite(tracer_places, .init = places_setup);

static uint64_t g_exits_at_40;

static void note_exits_at_40(const scenario_t *sc, int s, bufs_t *b)
{
    (void)b;
    if (s == sc->steps - 41) g_exits_at_40 = info_of(sc->name).side_exits;
}

static void check_no_exit_in_last_40(const scenario_t *sc)
{
    cgj_trace_info_t i = run_scenario(sc);
    cr_assert_eq(i.side_exits, g_exits_at_40, "%s: %llu side exits in the last 40 steps", sc->name,
                 (unsigned long long)(i.side_exits - g_exits_at_40));
}

/* At even steps the kernel and one more (a step too short for a graph, run as made), at odd
 * steps the same kernel and ten more (a graph). The kernel's op runs as made in the short
 * variant only where no other variant holds it in a graph: a long run begun in the short
 * variant then still switches to the long one where they part. */
/* The two places' own work: at even steps one copy (a segment too short for a graph), at odd
 * steps ten kernels. */
static void short_or_long(int s, CUdeviceptr *b)
{
    if (s % 2 == 0) {
        OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.25f, N));
        return;
    }
    for (int k = 0; k < 10; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
}

static void short_and_long_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    short_or_long(s, b);
}

Test(tracer_places, a_short_and_a_long_step_switch_variants_without_leaving)
{
    check_no_exit_in_last_40(&(scenario_t){.name = "short_long",
                                           .fn = short_and_long_step,
                                           .steps = 100,
                                           .nbufs = 2,
                                           .after = note_exits_at_40,
                                           .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2)}});
}

/* The short step is the kernel and a copy from pageable memory, whose bytes change every step:
 * a copy of a segment too short for a graph has no staging of its own and runs as the program
 * makes it, with the kernel held before it, even where the long variant holds that kernel in a
 * graph. */
static float g_short_src[N];

static void short_copy_and_long_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    if (s % 2 == 0) {
        for (int i = 0; i < N; i++) g_short_src[i] = (float)(s + i);
        OK(fk.htod_async(b[1], g_short_src, sizeof g_short_src, NULL));
        memset(g_short_src, 0xEE, sizeof g_short_src); /* the program reuses its buffer at once */
        return;
    }
    for (int k = 0; k < 10; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
}

Test(tracer_places, a_short_step_with_a_pageable_copy_and_a_long_step_switch_without_leaving)
{
    check_no_exit_in_last_40(&(scenario_t){.name = "short_copy",
                                           .fn = short_copy_and_long_step,
                                           .steps = 100,
                                           .nbufs = 2,
                                           .after = note_exits_at_40,
                                           .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2)}});
}

/* The short step's second kernel takes a scale that changes every 16 steps: the short variant
 * held it for a constant. A short run begun in the long variant switches to the short one with
 * the new value patched in (it varies from then on), as a run begun in the short variant itself
 * takes it, instead of leaving the trace. */
static void short_with_new_value_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    if (s % 2 == 0) {
        OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.25f * (float)(1 + s / 16), N));
        return;
    }
    for (int k = 0; k < 10; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
}

Test(tracer_places, a_switch_takes_a_value_the_other_variant_held_for_a_constant)
{
    check_no_exit_in_last_40(&(scenario_t){.name = "short_value",
                                           .fn = short_with_new_value_step,
                                           .steps = 100,
                                           .nbufs = 2,
                                           .after = note_exits_at_40,
                                           .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2)},
                                           .stats = {.values_promoted = MORE_THAN(0)}});
}

/* Eight kernels both places share, then four of each place's own. The program works on the host
 * for 300 us before the fourth kernel at one place and before the sixth at the other (more than
 * CGJIT_CHUNK_US, 50): each recording would end a chunk at another op of the shared part. The
 * variant built second takes the first's gaps where they share their calls, so their chunks end
 * at the same ops, and a run switches where the places part. */
static void spin_us(int us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) < us * 1000LL);
}

static void host_work_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    for (int k = 0; k < 8; k++) {
        if (k == (s % 2 ? 5 : 3)) spin_us(300);
        OK(fk_addk_launch(&fk, NULL, b[0], k, N));
    }
    for (int k = 0; k < 4; k++) {
        if (s % 2) OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f, N));
        else OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    }
}

Test(tracer_places, chunks_end_at_the_same_ops_where_variants_share_their_calls)
{
    check_no_exit_in_last_40(
        &(scenario_t){.name = "host_work",
                      .fn = host_work_step,
                      .steps = 100,
                      .nbufs = 2,
                      .after = note_exits_at_40,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2), .segments = AT_LEAST(2)}});
}

/* Both places begin with the same two kernels; from step 30 on, the long place's first kernel
 * takes another scale. A long run begins in the short variant, which takes the new scale (its
 * op varies from then on), and where the places part, the long variant still holds the old
 * scale for a constant in that first op, already held: the switch takes the new values in the
 * held ops too, instead of leaving the trace. */
static void shared_prefix_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], s % 2 && s >= 30 ? 0.75f : 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[0], 2, N));
    short_or_long(s, b);
}

Test(tracer_places, a_switch_takes_new_values_in_the_ops_it_held_before)
{
    check_no_exit_in_last_40(&(scenario_t){.name = "shared_prefix",
                                           .fn = shared_prefix_step,
                                           .steps = 100,
                                           .nbufs = 2,
                                           .after = note_exits_at_40,
                                           .info = {.state = IS(CGJ_STATE_REPLAY), .variants = IS(2)}});
}

/* Places chosen at random, each with a shape of its own under one anchor, and values that change
 * now and then at each place (a first kernel's scale, a later kernel's buffer and scale, a
 * copy's bytes), some steps with a read-back in their middle: whatever the switches, the
 * promotions and the exits do, every step leaves memory as eager execution does (compared after
 * each), and most steps replay. */
static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
    return x;
}

static float g_random_src[N];

static void random_places_step(int s, CUdeviceptr *b, void *ctx)
{
    uint32_t seed = *(uint32_t *)ctx, h = mix32(seed * 1000003U + (uint32_t)s), p = h % 4;
    float first = 0.5f + 0.25f * (float)((s / (17 + 5 * (int)p)) % 3);
    OK(fk_axpb_launch(&fk, NULL, b[0], first, 1.0f, N, 1));
    if (p == 0) { /* two ops: too short for a graph; a copy from pageable memory */
        for (int i = 0; i < N; i++) g_random_src[i] = (float)(s + i);
        OK(fk.htod_async(b[1], g_random_src, sizeof g_random_src, NULL));
        memset(g_random_src, 0xEE, sizeof g_random_src);
        return;
    }
    OK(fk_addk_launch(&fk, NULL, b[0], 1, N));
    CUdeviceptr other = b[2 + (s / (11 + (int)p)) % 2];
    if (p == 1) {
        for (int k = 0; k < 6; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    } else if (p == 2) {
        OK(fk_copyscale_launch(&fk, NULL, other, b[0], 0.125f * (float)(1 + s % 3), N));
        float h_out[N];
        OK(fk.dtoh(h_out, other, sizeof h_out)); /* a read-back: the segment ends here */
        for (int k = 0; k < 3; k++) OK(fk_addk_launch(&fk, NULL, b[1], k + (int)(h_out[0] > 1e9f), N));
    } else {
        for (int k = 0; k < 8; k++) OK(fk_addk_launch(&fk, NULL, k % 2 ? other : b[1], k, N));
    }
}

Test(tracer_places, places_at_random_stay_exact)
{
    for (uint32_t seed = 1; seed <= 6; seed++) {
        char name[32];
        snprintf(name, sizeof name, "random_%u", seed);
        cgj_trace_info_t i =
            run_scenario(&(scenario_t){.name = name, .fn = random_places_step, .steps = 200, .nbufs = 4, .ctx = &seed});
        cr_assert_geq(i.replays, 100, "%s: %llu of 200 steps replayed (%llu side exits; %s)", name,
                      (unsigned long long)i.replays, (unsigned long long)i.side_exits, i.reason);
    }
}

/* The same with more kinds of work at the places: a memset whose value changes, an allocation
 * inside the step (served from the pool when replayed), a second stream forked and joined with
 * events. */
static CUstream g_side;
static CUevent g_fork, g_join;

static void make_side_stream(const scenario_t *sc, int s, bufs_t *b)
{
    (void)sc, (void)s, (void)b;
    if (g_side) return;
    OK(fk.stream_create(&g_side, CU_STREAM_NON_BLOCKING));
    OK(fk.event_create(&g_fork, CU_EVENT_DISABLE_TIMING));
    OK(fk.event_create(&g_join, CU_EVENT_DISABLE_TIMING));
}

static void random_rich_step(int s, CUdeviceptr *b, void *ctx)
{
    uint32_t seed = *(uint32_t *)ctx, h = mix32(seed * 7919U + (uint32_t)s), p = h % 4;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f + 0.25f * (float)((s / (13 + 3 * (int)p)) % 2), 1.0f, N, 1));
    if (p == 0) {
        for (int i = 0; i < N; i++) g_random_src[i] = (float)(2 * s + i);
        OK(fk.htod_async(b[1], g_random_src, sizeof g_random_src, NULL));
        return;
    }
    OK(fk_addk_launch(&fk, NULL, b[0], 1, N));
    if (p == 1) {
        OK(fk.memset32_async(b[3], 0x3f800000u + (unsigned)(s % 3), N, NULL));
        for (int k = 0; k < 4; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    } else if (p == 2) {
        CUdeviceptr tmp;
        OK(fk.mem_alloc(&tmp, N * sizeof(float)));
        OK(fk.dtod_async(tmp, b[0], N * sizeof(float), NULL));
        OK(fk_copyscale_launch(&fk, NULL, b[1], tmp, 0.25f * (float)(1 + (s / 9) % 2), N));
        OK(fk.mem_free(tmp));
        for (int k = 0; k < 2; k++) OK(fk_addk_launch(&fk, NULL, b[2], k, N));
    } else {
        OK(fk.event_record(g_fork, NULL));
        OK(fk.stream_wait(g_side, g_fork, 0));
        OK(fk_addk_launch(&fk, g_side, b[2], 5, N));
        OK(fk.event_record(g_join, g_side));
        OK(fk.stream_wait(NULL, g_join, 0));
        for (int k = 0; k < 3; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
    }
}

Test(tracer_places, places_at_random_with_memsets_allocations_and_streams_stay_exact)
{
    for (uint32_t seed = 1; seed <= 6; seed++) {
        char name[32];
        snprintf(name, sizeof name, "rich_%u", seed);
        cgj_trace_info_t i = run_scenario(&(scenario_t){
            .name = name, .fn = random_rich_step, .steps = 200, .nbufs = 4, .ctx = &seed, .prepare = make_side_stream});
        cr_assert_geq(i.replays, 100, "%s: %llu of 200 steps replayed (%llu side exits; %s)", name,
                      (unsigned long long)i.replays, (unsigned long long)i.side_exits, i.reason);
    }
}
