/*
 * test_cost.c — the cost model (tracer/cost.c) against the fake driver, whose launches can be
 * made to cost host time: an anchor whose replay costs more than eager execution turns replay
 * off (state OFF, reason OFF_COST) and tries again later; one whose replay pays keeps replaying,
 * with one eager probe now and then. Results equal eager execution throughout.
 *
 * The model weighs host time, so these tests run cgjit and the fake driver on a fake clock
 * (tests/common/fake_clock.h: on a loaded machine the real one decided them at random): what the
 * model sees, and decides, depends on the program's calls only.
 */
#define _GNU_SOURCE
#include "replay_common.h"

#include "fake_clock.h"

static void cost_setup(void)
{
    setenv("CGJIT_COST", "1", 1);
    fk_open(&fk);
    fake_clock_start(fk.handle);
}

TestSuite(tracer_cost, .init = cost_setup);

static double g_host_us; /* host work the program does in each step, besides its launches */

/* Two short kernels: one eager launch each against one graph launch. */
static void two_kernel_step(int s, CUdeviceptr *b, void *ctx)
{
    host_work(g_host_us);
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
}

/* Steps of `fn` run traced only (the scenario helper runs an eager twin of each step, which
 * would be timed into the periods): compare with a host model of the buffer at the end. */
static cgj_trace_info_t run_traced_fn(const char *name, int steps, step_fn fn)
{
    bufs_t b;
    bufs_alloc(&b, 1);
    for (int s = 0; s < steps; s++) {
        g_traced = false;
        fn(s, b.e, NULL);
        cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
        g_traced = true;
        fn(s, b.t, NULL);
        g_traced = false;
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    compare_bufs(name, steps, &b);
    return info_of(name);
}

static cgj_trace_info_t run_traced(const char *name, int steps)
{
    return run_traced_fn(name, steps, two_kernel_step);
}

Test(tracer_cost, replay_that_costs_more_than_eager_turns_itself_off)
{
    fk.set_delays(0, 300); /* a graph launch costs 300 us, a kernel launch nothing */
    cgj_trace_info_t i = run_traced("dear", 80);
    fk.set_delays(0, 0);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_eq(i.reason_code, CGJ_REASON_OFF_COST, "%s", i.reason);
    cr_assert_gt(i.replay_step_ns, i.eager_step_ns, "replay %llu ns, eager %llu ns",
                 (unsigned long long)i.replay_step_ns, (unsigned long long)i.eager_step_ns);
    cr_assert_lt(i.replays, 40, "%llu replays: it should have stopped early", (unsigned long long)i.replays);
    cr_assert_geq(stats_now().anchors_off, 1);
}

/* Replay at several times the eager period is off at its first EARLY_PAIRS pairs (3 probes),
 * not after two windows of MIN_PAIRS (10): a program of 40 steps would replay most of them at
 * that pace before the second window. */
Test(tracer_cost, replay_grossly_slower_is_off_at_its_first_pairs)
{
    fk.set_delays(0, 300);
    cgj_trace_info_t i = run_traced("gross", 60);
    fk.set_delays(0, 0);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_eq(i.reason_code, CGJ_REASON_OFF_COST, "%s", i.reason);
    cr_assert_eq(i.probes, 3, "%llu eager probes before the verdict", (unsigned long long)i.probes);
}

/* Replay 10% slower is no gross verdict: it is off only after two windows of pairs of their own. */
static void slower_by_a_tenth(int s, CUdeviceptr *b, void *ctx)
{
    g_host_us = 1000; /* the graph launch costs 100 us more than the two kernel launches */
    two_kernel_step(s, b, ctx);
    g_host_us = 0;
}

Test(tracer_cost, replay_slightly_slower_is_judged_on_two_windows)
{
    fk.set_delays(0, 100);
    cgj_trace_info_t i = run_traced_fn("tenth", 100, slower_by_a_tenth);
    fk.set_delays(0, 0);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_eq(i.reason_code, CGJ_REASON_OFF_COST, "%s", i.reason);
    cr_assert_geq(i.probes, 10, "off after %llu eager probes", (unsigned long long)i.probes);
}

/* Under CGJIT_VERIFY every replay also runs its calls and compares: slower than eager by
 * design. The same dear replay keeps replaying, and checking, with no probe. */
static void cost_verify_setup(void)
{
    setenv("CGJIT_VERIFY", "1", 1);
    cost_setup();
}

TestSuite(tracer_cost_verify, .init = cost_verify_setup);

Test(tracer_cost_verify, verify_keeps_replaying_what_costs_more)
{
    fk.set_delays(0, 300);
    cgj_trace_info_t i = run_traced("dear_verified", 80);
    fk.set_delays(0, 0);
    cgj_stats_t st = stats_now();
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_geq(i.replays, 70, "%llu replays", (unsigned long long)i.replays);
    cr_assert_eq(st.steps_probed, 0, "%llu eager probes", (unsigned long long)st.steps_probed);
    cr_assert_geq(st.verify_segments, 70, "%llu graphs checked", (unsigned long long)st.verify_segments);
    cr_assert_eq(st.verify_divergences, 0);
}

Test(tracer_cost, an_anchor_turned_off_tries_again_later)
{
    fk.set_delays(0, 300);
    cgj_trace_info_t i = run_traced("again", 60);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "%s", i.reason);
    cr_assert_gt(i.off_runs, 0, "no run counted as run while replay was off");
    cr_assert_leq(i.off_runs + i.probes + i.replays, i.runs);
    uint64_t replays = i.replays;
    fk.set_delays(300, 0); /* now eager launches are the dear ones */
    i = run_traced("again", 400);
    fk.set_delays(0, 0);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_gt(i.replays, replays + 50, "replay was not tried again (%llu replays)", (unsigned long long)i.replays);
}

/* `steps` steps of `name` where each eager kernel launch costs 200 us, so replay pays: it must
 * keep replaying. Its figures. */
static cgj_trace_info_t run_paying(const char *name, int steps)
{
    fk.set_delays(200, 0);
    cgj_trace_info_t i = run_traced(name, steps);
    fk.set_delays(0, 0);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    return i;
}

Test(tracer_cost, replay_that_pays_keeps_replaying_with_probes)
{
    cgj_trace_info_t i = run_paying("cheap", 200);
    cgj_stats_t st = stats_now();
    cr_assert_geq(st.steps_probed, 5, "%llu eager probes", (unsigned long long)st.steps_probed);
    cr_assert_leq(st.steps_probed, 15, "%llu eager probes in 200 runs", (unsigned long long)st.steps_probed);
    cr_assert_eq(i.probes, st.steps_probed, "the anchor counts %llu probes", (unsigned long long)i.probes);
    cr_assert_eq(i.off_runs, 0);
    cr_assert_eq(i.busy_runs, 0);
    cr_assert_geq(i.replays, 180);
    cr_assert_lt(i.replay_step_ns, i.eager_step_ns);
    cr_assert_eq(st.anchors_off, 0);
    /* Marked steps run eagerly straight through (no cgjit code in their calls): not timed. */
    cr_assert_eq(i.eager_calls_ns, 0, "%llu ns in calls", (unsigned long long)i.eager_calls_ns);
}

/* Replay whose first three pairs each find it clearly faster gets the rest of its first figures
 * at the steady rate: 3 quick probes, not 5. */
Test(tracer_cost, replay_that_pays_clearly_at_once_ends_quick_probing)
{
    cgj_trace_info_t i = run_paying("early", 90);
    cr_assert_eq(i.probes, 3, "%llu probes in 90 runs", (unsigned long long)i.probes);
}

/* Replay that keeps paying clearly is probed less often: one run in 128 once four judgements
 * in a row found it faster (one in 64 before). */
Test(tracer_cost, replay_that_clearly_pays_is_probed_less)
{
    cgj_trace_info_t i = run_paying("clear", 1200);
    /* First figures: 3 probes (clearly faster at once), then one in 64 until 4 clear judgements
     * (2 more probes make the first, 3 more the others); then one in 128: 3 + 5 + about 7. One in
     * 64 throughout would make 3 + 18. */
    cr_assert_geq(i.probes, 9, "%llu probes", (unsigned long long)i.probes);
    cr_assert_leq(i.probes, 18, "%llu probes in 1200 runs", (unsigned long long)i.probes);
    cr_assert_geq(i.replays, 1170);
}

/* The program's pace changes (a shared machine, a Python interpreter): from run 120 on each
 * step does 3 ms more host work (after 4 eager probes: 3 quick ones, one at the steady rate).
 * Eager figures taken before the change must not be weighed against replay figures taken after
 * it: replay still pays and keeps replaying. */
static void slower_from_120(int s, CUdeviceptr *b, void *ctx)
{
    g_host_us = s >= 120 ? 3000 : 0;
    two_kernel_step(s, b, ctx);
}

Test(tracer_cost, a_program_that_slows_down_is_no_verdict_on_replay)
{
    fk.set_delays(100, 0); /* replay saves 200 us per step */
    cgj_trace_info_t i = run_traced_fn("drift", 260, slower_from_120);
    g_host_us = 0;
    fk.set_delays(0, 0);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_eq(stats_now().anchors_off, 0);
    cr_assert_geq(i.replays, 230);
    cr_assert_lt(i.replay_step_ns, i.eager_step_ns, "replay %llu ns, eager %llu ns",
                 (unsigned long long)i.replay_step_ns, (unsigned long long)i.eager_step_ns);
}

/* An anchor that begins two steps of each iteration, as a PyTorch step begins after each of an
 * iteration's synchronizations: 'twice' right after 'other', and again before 2 ms of host work.
 * Its periods are short at one place and long at the other; each eager figure is weighed against
 * replays at its own place, and replay, which pays, keeps replaying. */
Test(tracer_cost, an_anchor_at_two_places_of_a_loop_is_judged_place_by_place)
{
    fk.set_delays(100, 0); /* replay saves 200 us per step of 'twice' */
    bufs_t b;
    bufs_alloc(&b, 2);
    int steps = 0;
    for (int it = 0; it < 150; it++) {
        for (int place = 0; place < 2; place++, steps++) {
            g_traced = false;
            two_kernel_step(steps, b.e, NULL);
            cr_assert_eq(cgj_trace_begin("twice"), CGJ_OK);
            g_traced = true;
            two_kernel_step(steps, b.t, NULL);
            g_traced = false;
            cr_assert_eq(cgj_trace_end(), CGJ_OK);
            cr_assert_eq(cgj_trace_begin(place ? "long" : "other"), CGJ_OK);
            g_host_us = place ? 2000 : 0;
            g_traced = true;
            two_kernel_step(steps, b.t + 1, NULL);
            g_traced = false;
            cr_assert_eq(cgj_trace_end(), CGJ_OK);
            two_kernel_step(steps, b.e + 1, NULL);
            g_host_us = 0;
        }
    }
    fk.set_delays(0, 0);
    compare_bufs("twice", steps, &b);
    cgj_trace_info_t i = info_of("twice");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_neq(i.reason_code, CGJ_REASON_OFF_COST, "%s", i.reason);
    cr_assert_geq(i.replays, 250, "%llu replays: it was turned off for a while", (unsigned long long)i.replays);
}

/* `steps` steps of `name` (traced only) in a program whose host work after each step is 400 us,
 * except after an eager probe from step 20 on: probe_host(k) for the k-th such probe. Returns
 * the anchor's figures once the results are checked; *probes: how many there were. */
static cgj_trace_info_t run_noisy(const char *name, int steps, double (*probe_host)(unsigned k), unsigned *probes)
{
    bufs_t b;
    bufs_alloc(&b, 1);
    *probes = 0;
    for (int s = 0; s < steps; s++) {
        g_traced = false;
        two_kernel_step(s, b.e, NULL);
        uint64_t before = stats_now().steps_probed;
        cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
        g_traced = true;
        two_kernel_step(s, b.t, NULL);
        g_traced = false;
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        double host = 400;
        if (stats_now().steps_probed > before && s > 20) host = probe_host((*probes)++);
        host_work(host);
    }
    compare_bufs(name, steps, &b);
    return info_of(name);
}

static double scatter_host(unsigned k)
{
    return k % 5 == 0 || k % 5 == 2 || k % 5 == 3 ? 340 : 560;
}

/* Replay as fast as eager, on a machine whose noise lands on the eager probes unevenly: after
 * 3 probes in 5 the program happens to be 15% quicker, after the other 2 it is 40% slower. The
 * median of the pairs says replay is 1.18x slower, yet the program spends less time replaying
 * (the sum of the periods): replay keeps replaying. */
Test(tracer_cost, a_median_that_the_sums_contradict_is_no_verdict)
{
    unsigned probes;
    cgj_trace_info_t i = run_noisy("scatter", 300, scatter_host, &probes);
    cr_assert_geq(probes, 8, "%u eager probes", probes);
    cr_assert_eq(stats_now().anchors_off, 0, "turned off on noise: %s", i.reason);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
}

/* The first eager probes fall in a quick stretch of the program, the later ones do not: the
 * first window of pairs calls replay slower, the next pairs call it faster. The second judgement
 * must be taken on pairs of its own: one on the first window plus a pair would turn replay off
 * on the same evidence twice. */
static double stretch_host(unsigned k)
{
    return k < 5 ? 340 : 500; /* replay 1.18x the first probes' periods: slower, not grossly */
}

Test(tracer_cost, a_strike_is_confirmed_on_pairs_of_its_own)
{
    unsigned probes;
    cgj_trace_info_t i = run_noisy("stretch", 300, stretch_host, &probes);
    cr_assert_geq(probes, 10, "%u eager probes (%s: %s)", probes, cgj_state_name(i.state), i.reason);
    cr_assert_eq(stats_now().anchors_off, 0, "turned off on one window twice: %s", i.reason);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
}

/* A step too small for a graph (2 ops, CGJIT_GRAPH_MIN_OPS 3) makes, replayed, the calls eager
 * execution makes, with cgjit's guards around them: it cannot pay. Its anchor goes OFF
 * (OFF_NO_GRAPH) once its trace has replayed to its end 8 times in a row, and no run of it is
 * ever an eager probe: from then on it costs nothing to measure. A step as short that allocates
 * inside (served from the pool when replayed) may pay, and keeps replaying. */
static void cost_small_setup(void)
{
    setenv("CGJIT_GRAPH_MIN_OPS", "3", 1);
    cost_setup();
}

TestSuite(tracer_cost_small, .init = cost_small_setup);

static double fast_probe_host(unsigned k)
{
    (void)k;
    return 320;
}

Test(tracer_cost_small, a_step_too_short_for_a_graph_turns_replay_off)
{
    unsigned probes;
    cgj_trace_info_t i = run_noisy("small", 800, fast_probe_host, &probes);
    cr_assert_eq(i.segments, 1);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_str_eq(cgj_reason_name(i.reason_code), "OFF_NO_GRAPH", "%s", i.reason);
    cr_assert_eq(i.replays, 8, "%llu replays", (unsigned long long)i.replays);
    cr_assert_eq(probes, 0, "%u eager probes of a step that cannot pay", probes);
    cr_assert_eq(i.off_runs, 800 - 2 - 8, "%llu runs while off", (unsigned long long)i.off_runs);
    cr_assert_eq(stats_now().anchors_off, 1);
    cr_assert_eq(stats_now().steps_replayed, 8);
}

/* Two shapes of a step too small for a graph, in turn (its second kernel launched as itself or
 * through its CUkernel handle): two variants, neither launching a graph. The anchor cannot pay
 * with either, and goes OFF as one of a single shape does. */
static void two_small_shapes_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_addk_launch(&fk, NULL, b[0], s % 5, N));
    OK(axpb_or_other(NULL, b[0], 0.5f, 1.0f, N, s % 2));
}

Test(tracer_cost_small, steps_of_two_shapes_too_short_for_a_graph_turn_replay_off)
{
    cgj_trace_info_t i = run_traced_fn("two_small", 200, two_small_shapes_step);
    cr_assert_eq(i.variants, 2, "%u variants", i.variants);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_str_eq(cgj_reason_name(i.reason_code), "OFF_NO_GRAPH", "%s", i.reason);
    cr_assert(strstr(i.reason, "other variants") != NULL, "%s", i.reason);
    cr_assert_lt(i.replays, 40, "%llu replays of steps that cannot pay", (unsigned long long)i.replays);
}

/* run_traced_fn, and what the fake driver did meanwhile: graph launches and pinned allocations. */
typedef struct spent {
    unsigned long graph_launches, host_allocs;
} spent_t;

static cgj_trace_info_t run_counted(const char *name, int steps, step_fn fn, spent_t *spent)
{
    fakecuda_counts_t before, after;
    fk.get_counts(&before);
    cgj_trace_info_t i = run_traced_fn(name, steps, fn);
    fk.get_counts(&after);
    *spent = (spent_t){after.graph_launches - before.graph_launches, after.host_allocs - before.host_allocs};
    return i;
}

/* A big copy from pageable memory and one kernel: a set-up step (a program filling its inputs
 * on the host) too short for a graph. Replayed and turned off, it must not have pinned a
 * staging buffer the size of its copy for nothing (tens of milliseconds for 256 MB). */
static void big_copy_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)(s + i);
    OK(fk.htod(b[0], host, sizeof host));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
}

Test(tracer_cost_small, a_short_step_pins_no_staging_for_its_copies)
{
    spent_t spent;
    cgj_trace_info_t i = run_counted("small_copy", 20, big_copy_step, &spent);
    cr_assert_str_eq(cgj_reason_name(i.reason_code), "OFF_NO_GRAPH", "%s", i.reason);
    cr_assert_eq(spent.host_allocs, 0, "%lu pinned allocations for a step that launches no graph", spent.host_allocs);
}

/* Four copies from pageable memory and nothing else: a program uploading its inputs before
 * the work it times. Replayed as a graph, the copies would be staged as the driver stages them
 * and start only at the step's end: the step launches no graph, and turns off. */
static void uploads_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    enum { Q = N / 4 };
    float host[Q];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < Q; i++) host[i] = (float)(s * 7 + k * Q + i);
        OK(fk.htod(b[0] + (CUdeviceptr)k * Q * sizeof(float), host, sizeof host));
    }
}

Test(tracer_cost_small, a_step_of_uploads_only_launches_no_graph)
{
    spent_t spent;
    cgj_trace_info_t i = run_counted("uploads", 20, uploads_step, &spent);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_str_eq(cgj_reason_name(i.reason_code), "OFF_NO_GRAPH", "%s", i.reason);
    cr_assert(strstr(i.reason, "staged copies only") != NULL, "%s", i.reason);
    cr_assert_eq(i.replays, 8, "%llu replays", (unsigned long long)i.replays);
    cr_assert_eq(spent.graph_launches, 0, "%lu graph launches for a step of uploads", spent.graph_launches);
    cr_assert_eq(spent.host_allocs, 0, "%lu pinned allocations for a step that launches no graph", spent.host_allocs);
}

/* The uploads, a synchronization (a segment's end), then kernels on what was uploaded: the
 * uploads' segment is issued as made, the kernels' is a graph, and every step is eager's. */
static void uploads_then_work_step(int s, CUdeviceptr *b, void *ctx)
{
    uploads_step(s, b, ctx);
    OK(fk.stream_sync(NULL));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, -1.0f, N, 1));
}

Test(tracer_cost_small, uploads_then_work_replay_the_work_from_a_graph)
{
    spent_t spent;
    cgj_trace_info_t i = run_counted("uploads_work", 20, uploads_then_work_step, &spent);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_eq(i.segments, 2);
    cr_assert_geq(i.replays, 15, "%llu replays", (unsigned long long)i.replays);
    cr_assert_geq(spent.graph_launches, i.replays, "the work's segment is no graph");
    cr_assert_eq(spent.host_allocs, 0, "%lu pinned allocations for uploads issued as made", spent.host_allocs);
}

/* Two kernels around an allocation made and freed inside the step. */
static void alloc_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    CUdeviceptr tmp = 0;
    OK(fk.mem_alloc(&tmp, N * sizeof(float)));
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk.mem_free(tmp));
}

Test(tracer_cost_small, a_short_step_served_from_the_pool_keeps_replaying)
{
    cgj_trace_info_t i = run_traced_fn("small_alloc", 60, alloc_step);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_geq(i.replays, 50, "%llu replays", (unsigned long long)i.replays);
}

/* Run `name` on t (traced) and on e (its eager twin); true if the traced step ran eagerly. */
static bool traced_step(const char *name, int s, CUdeviceptr e, CUdeviceptr t)
{
    two_kernel_step(s, &e, NULL);
    fakecuda_counts_t before, after;
    fk.get_counts(&before);
    cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
    g_traced = true;
    two_kernel_step(s, &t, NULL);
    g_traced = false;
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    fk.get_counts(&after);
    return after.graph_launches == before.graph_launches;
}

/* After an eager step of 'path' the program takes another path ('detour'), so no eager period
 * of 'path' ever meets a replay at its place: its probes find nothing to pair with. They must
 * not go on at one run in 3 for good (a third of the replays lost): after a few, probing slows
 * to the steady rate. */
Test(tracer_cost, probes_that_never_pair_slow_down)
{
    bufs_t b;
    bufs_alloc(&b, 3);
    bool eager = false;
    for (int s = 0; s < 300; s++) {
        traced_step("before", s, b.e[1], b.t[1]);
        if (eager) traced_step("detour", s, b.e[2], b.t[2]); /* the step before 'path' differs */
        eager = traced_step("path", s, b.e[0], b.t[0]);
    }
    compare_bufs("path", 300, &b);
    cgj_trace_info_t i = info_of("path");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_geq(i.replays, 270, "%llu of 300 steps replayed: probing never slowed down",
                  (unsigned long long)i.replays);
}

/* Warm-up figures: recording time per call, plan and graph build times, the first replayed run. */
Test(tracer_cost, warm_up_is_measured)
{
    cgj_trace_info_t i = run_traced("warm", 10);
    cr_assert_eq(i.first_replay_run, 3, "first replay at run %llu", (unsigned long long)i.first_replay_run);
    cr_assert_eq(i.recorded_ops, 4, "%llu calls recorded in two runs of two", (unsigned long long)i.recorded_ops);
    cr_assert_gt(i.record_ns, 0);
    cr_assert_gt(i.build_ns, 0);
    cr_assert_geq(i.build_ns, i.instantiate_ns);
}

/* A step whose shape follows the data in most runs: 3 launches, then in 3 runs of 4 a tail of
 * 40 more whose kernel changes at a place that moves every run. Those runs leave the trace and
 * re-issue eagerly what they absorbed; the replays of the short shape save little. Recording and
 * exiting costs the process more than replay gives it: the anchor goes OFF (OFF_WASTE). */
static void shifting_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    host_work(20);
    for (int k = 0; k < 3; k++) OK(fk_addk_launch(&fk, NULL, b[0], k, N));
    if (s % 4 == 0) return;
    for (int k = 0; k < 40; k++) OK(axpb_or_other(NULL, b[0], 0.5f, (float)k, N, k == (s * 7) % 40));
}

Test(tracer_cost, recordings_and_exits_that_cost_more_than_replays_save_turn_replay_off)
{
    fk.set_delays(5, 0); /* an eager launch costs 5 us: re-issued chunks cost, short replays save little */
    cgj_trace_info_t i = run_traced_fn("shifting", 60, shifting_step);
    fk.set_delays(0, 0);
    cr_assert_eq(i.state, CGJ_STATE_OFF, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_eq(i.reason_code, CGJ_REASON_OFF_WASTE, "%s", i.reason);
    cr_assert_gt(i.off_runs, 0, "no run counted as run while replay was off");
}
