/*
 * test_warmup.c — the warm-up runs of a new step (CGJIT_WARMUP_RUNS), against the fake driver:
 * the first N runs of a step cgjit has not seen run eagerly, unrecorded, and are counted; the
 * step records from run N + 1, is built at the end of run N + 2 and replays from run N + 3. A
 * step the program makes only once records nothing. Results are eager's at every run.
 */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeapp.h"

#define N 64
#define ANCHOR "warm"
#define OK(x) cr_assert_eq((x), CUDA_SUCCESS, "%s", #x)
static fk_t fk;

static void open_with(const char *warmup, const char *policy)
{
    setenv("CGJIT_WARMUP_RUNS", warmup, 1);
    setenv("CGJIT_STEP", policy, 1);
    fk_open(&fk);
}
static void warm1(void)
{
    open_with("1", "off");
}
static void warm2(void)
{
    open_with("2", "off");
}
static void warm0(void)
{
    open_with("0", "off");
}
static void warm1_sync(void)
{
    open_with("1", "sync");
}
static void warm1_auto(void)
{
    open_with("1", "auto");
}

static cgj_stats_t stats(void)
{
    cgj_stats_t s;
    cr_assert_eq(cgj_stats(&s), CGJ_OK);
    return s;
}

static cgj_trace_info_t info(void)
{
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info(ANCHOR, &i), CGJ_OK);
    return i;
}

static void step(CUdeviceptr x, float *ref)
{
    fk_axpb3_step(&fk, ANCHOR, x, ref, N);
}

/* A fresh buffer x, and in ref what it holds. */
static CUdeviceptr fresh(float *ref)
{
    return fk_fresh_floats(&fk, ref, N);
}

/* From a fresh x: `warmup` runs record nothing, the next records the draft, the next is compared
 * with it and builds the trace, and the one after replays. */
static void first_replay_after(unsigned warmup, CUdeviceptr x, float *ref)
{
    for (unsigned k = 0; k < warmup; k++) step(x, ref);
    cgj_stats_t s = stats();
    cr_assert_eq(s.ops_recorded, 0, "the warm-up recorded %llu calls", (unsigned long long)s.ops_recorded);
    cr_assert_eq(s.steps_warmup, warmup);
    if (warmup) {
        cgj_trace_info_t i = info();
        cr_assert_eq(i.runs, warmup);
        cr_assert_eq(i.warmup_runs, warmup);
        cr_assert_eq(i.state, CGJ_STATE_WARMUP);
        cr_assert_eq(i.recorded_ops, 0);
    }
    step(x, ref); /* the draft */
    cr_assert_eq(stats().ops_recorded, 3);
    step(x, ref); /* compared with it: a trace is built */
    cr_assert_eq(info().state, CGJ_STATE_REPLAY);
    cr_assert_eq(info().replays, 0);
    step(x, ref);
    cr_assert_eq(info().replays, 1);
    cr_assert_eq(info().runs, warmup + 3);
}

TestSuite(tracer_warmup, .init = warm1);

Test(tracer_warmup, a_new_step_runs_once_eagerly_then_records_and_replays_from_its_fourth_run)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    first_replay_after(1, x, ref);
    for (int r = 0; r < 4; r++) step(x, ref);
    cgj_trace_info_t i = info();
    cr_assert_eq(i.runs, 8);
    cr_assert_eq(i.replays, 5, "%llu replays of 8 runs", (unsigned long long)i.replays);
    cgj_stats_t s = stats();
    cr_assert_eq(s.steps_warmup, 1, "only the first run warms up");
    cr_assert_eq(s.steps_replayed, 5);
}

Test(tracer_warmup, a_step_made_once_records_nothing)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    step(x, ref);
    cgj_stats_t s = stats();
    cr_assert_eq(s.ops_recorded, 0);
    cr_assert_eq(s.traces_built, 0);
    cr_assert_eq(s.steps, 1);
    cr_assert_eq(s.steps_eager, 1);
}

TestSuite(tracer_warmup_two, .init = warm2);

Test(tracer_warmup_two, two_warm_up_runs_replay_from_the_fifth)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    first_replay_after(2, x, ref);
}

TestSuite(tracer_warmup_none, .init = warm0);

Test(tracer_warmup_none, none_records_the_first_run)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    first_replay_after(0, x, ref);
}

/* `iters` iterations of two kernels on x, each read back (sync) or not, checked against eager
 * arithmetic; a last read-back where none synchronized. */
static void loop(CUdeviceptr x, float *ref, int iters, bool sync)
{
    float h[N];
    for (int it = 0; it < iters; it++) {
        OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
        OK(fk_axpb_launch(&fk, NULL, x, 1.5f, -0.5f, N, 1));
        for (int i = 0; i < N; i++) ref[i] = 1.5f * (0.5f * ref[i] + 1.0f) - 0.5f;
        if (!sync && it < iters - 1) continue;
        OK(fk.dtoh(h, x, sizeof h));
        for (int i = 0; i < N; i++)
            cr_assert_eq(h[i], ref[i], "iteration %d: x[%d] = %g, eager gives %g", it, i, h[i], ref[i]);
    }
}

TestSuite(tracer_warmup_sync, .init = warm1_sync);

/* Implicit steps (CGJIT_STEP=sync): each read-back ends one. A step the program makes once (its
 * set-up) is never recorded; the loop's step records from its second run and replays. */
Test(tracer_warmup_sync, the_loop_replays_and_a_set_up_made_once_is_not_recorded)
{
    float ref[N], h[N];
    CUdeviceptr x = fresh(ref);
    /* set-up: one kernel of another shape, then a read-back */
    OK(fk_axpb_launch(&fk, NULL, x, 2.0f, 0.0f, N, 1));
    for (int i = 0; i < N; i++) ref[i] = 2.0f * ref[i];
    OK(fk.dtoh(h, x, sizeof h));
    cr_assert_eq(stats().ops_recorded, 0, "the set-up, made once, was recorded");
    loop(x, ref, 12, true);
    cgj_stats_t s = stats();
    cr_assert_geq(s.steps_warmup, 2, "the set-up's step and the loop's first run warm up");
    cr_assert_gt(s.steps_replayed, 6, "%llu of 12 loop steps replayed", (unsigned long long)s.steps_replayed);
}

/* A step begun at a kernel is named after it; its warm-up run asks the driver for the kernel's
 * name only, and the parameters are asked when a run records (a program's timed region made
 * once pays for no more than it uses). */
Test(tracer_warmup_sync, a_warm_up_run_asks_the_driver_for_no_kernel_parameters)
{
    float ref[N], h[N];
    CUdeviceptr x = fresh(ref);
    fakecuda_counts_t before, after;
    fk.get_counts(&before);
    OK(fk_axpb_launch(&fk, NULL, x, 2.0f, 0.0f, N, 1));
    for (int i = 0; i < N; i++) ref[i] = 2.0f * ref[i];
    OK(fk.dtoh(h, x, sizeof h));
    fk.get_counts(&after);
    cr_assert_geq(stats().steps_warmup, 1);
    cr_assert_eq(stats().ops_recorded, 0);
    cr_assert_eq(after.param_queries, before.param_queries, "a warm-up run asked for %lu parameters",
                 after.param_queries - before.param_queries);
    loop(x, ref, 6, true);
    fk.get_counts(&after);
    cr_assert_gt(stats().ops_recorded, 0);
    cr_assert_gt(after.param_queries, before.param_queries, "a recording asked for no parameters");
}

/* Steps begun at kernels are named after them. A handle is a CUfunction or a CUkernel, and the
 * driver tells which only by failing the other kind's query (slowly, on a GPU): the kind that
 * answered last is asked first, so a program that launches one kind pays one miss in all. */

static void one_kernel_step(CUfunction f, CUdeviceptr x, float *ref)
{
    float h[N];
    OK(fk_axpb_launch_f(&fk, f, false, NULL, x, 2.0f, 0.0f, N, 1));
    for (int i = 0; i < N; i++) ref[i] = 2.0f * ref[i];
    OK(fk.dtoh(h, x, sizeof h));
    for (int i = 0; i < N; i++) cr_assert_eq(h[i], ref[i], "x[%d] = %g, eager gives %g", i, h[i], ref[i]);
}

Test(tracer_warmup_sync, kernels_of_one_kind_are_named_with_one_query_each)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    CUfunction k[4], f[3];
    char name[64];
    for (int i = 0; i < 4; i++)
        snprintf(name, sizeof name, "runtime_kernel_%d", i), k[i] = fk_axpb_twin(&fk, name, true);
    for (int i = 0; i < 3; i++)
        snprintf(name, sizeof name, "driver_kernel_%d", i), f[i] = fk_axpb_twin(&fk, name, false);
    unsigned long q0 = fk_counts(&fk).name_queries;
    one_kernel_step(k[0], x, ref); /* the first CUkernel: CUfunction asked first, then CUkernel */
    cr_assert_eq(fk_counts(&fk).name_queries - q0, 2, "%lu queries named the first CUkernel",
                 fk_counts(&fk).name_queries - q0);
    for (int i = 1; i < 4; i++) one_kernel_step(k[i], x, ref);
    cr_assert_eq(fk_counts(&fk).name_queries - q0, 2 + 3, "%lu queries named 4 CUkernels",
                 fk_counts(&fk).name_queries - q0);
    one_kernel_step(f[0], x, ref); /* the first CUfunction after them: one miss */
    for (int i = 1; i < 3; i++) one_kernel_step(f[i], x, ref);
    cr_assert_eq(fk_counts(&fk).name_queries - q0, 5 + 2 + 2, "%lu queries named 4 CUkernels and 3 CUfunctions",
                 fk_counts(&fk).name_queries - q0);
    for (int i = 0; i < 4; i++) one_kernel_step(k[i], x, ref); /* named once: never asked again */
    one_kernel_step(f[2], x, ref);
    cr_assert_eq(fk_counts(&fk).name_queries - q0, 9, "a kernel named before was asked again");
    static char json[1 << 16];
    cr_assert_lt(cgj_report_json_buf(json, sizeof json), sizeof json);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "cuLaunchKernel:runtime_kernel_%d:", i);
        cr_assert(strstr(json, name), "no anchor named after %s in the report", name);
    }
    cr_assert(strstr(json, "cuLaunchKernel:driver_kernel_2:"), "no anchor named after driver_kernel_2");
    cr_assert(!strstr(json, "cuLaunchKernel:driver_kernel_1:"), "a step run once has an anchor");
}

/* A step the program makes once makes no anchor: its run warms up with a fingerprint only (its
 * name, length and shape). Made a second time, its anchor starts as if that first run had been
 * its warm-up run, so a loop keeps its schedule: two warm-up runs (the second repeats the
 * first's length and shape), a draft, the run compared with it, and replays from the fifth. */
Test(tracer_warmup_sync, a_step_made_once_makes_no_anchor_and_a_loop_replays_from_its_fifth_run)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    CUfunction once = fk_axpb_twin(&fk, "made_once", false), loop = fk_axpb_twin(&fk, "the_loop", false);
    one_kernel_step(once, x, ref);
    static char json[1 << 16];
    cr_assert_lt(cgj_report_json_buf(json, sizeof json), sizeof json);
    cr_assert(!strstr(json, ":made_once:"), "the step made once has an anchor");
    cgj_stats_t before = stats();
    for (int s = 0; s < 10; s++) {
        one_kernel_step(loop, x, ref);
        cgj_stats_t now = stats();
        unsigned long long replayed = now.steps_replayed - before.steps_replayed;
        cr_assert_eq(replayed, s < 4 ? 0 : (unsigned long long)(s - 3), "after run %d: %llu replayed", s + 1, replayed);
    }
    cr_assert_lt(cgj_report_json_buf(json, sizeof json), sizeof json);
    cr_assert(strstr(json, ":the_loop:"), "the loop has no anchor");
}

/* A warm-up run records nothing, so it cannot see a producer's handoffs: one that goes 256 calls
 * without a synchronization ends there, and the step begun at that call is recorded as an
 * anchor's first run is (its first 256 calls). */
Test(tracer_warmup_sync, a_warm_up_run_that_does_not_synchronize_is_cut_and_recorded_from_there)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    loop(x, ref, 200, false); /* 400 calls, then one read-back: 256 warm up, 144 are recorded */
    cgj_stats_t s = stats();
    /* the set-up's step (the allocation, until fresh()'s read-back) and the loop's first run */
    cr_assert_eq(s.steps_warmup, 2, "%llu warm-up runs", (unsigned long long)s.steps_warmup);
    cr_assert_gt(s.ops_recorded, 0, "no step was recorded after the warm-up run's first 256 calls");
    cr_assert_leq(s.ops_recorded, 256, "%llu calls recorded", (unsigned long long)s.ops_recorded);
}

/* A long step that does synchronize (400 calls, then a read-back): its warm-up run is cut at 256
 * calls, the step begun there is another anchor, and the long step records whole from its next
 * run: it replays from its fourth, as with no warm-up (tracer_implicit_sync's long step). */
Test(tracer_warmup_sync, a_long_step_cut_in_its_warm_up_replays_from_its_fourth_run)
{
    float ref[N], h[N];
    CUdeviceptr x = fresh(ref);
    const int iters = 10;
    for (int it = 0; it < iters; it++) {
        OK(fk_addk_launch(&fk, NULL, x, 1, N)); /* the step's first call: its anchor */
        for (int k = 0; k < 399; k++) OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
        for (int i = 0; i < N; i++) {
            ref[i] += 1.0f;
            for (int k = 0; k < 399; k++) ref[i] = 0.5f * ref[i] + 1.0f;
        }
        OK(fk.dtoh(h, x, sizeof h));
        for (int i = 0; i < N; i++) cr_assert_eq(h[i], ref[i], "iteration %d: x[%d] differs from eager", it, i);
    }
    cr_assert_eq(stats().steps_replayed, iters - 3, "%llu replayed", (unsigned long long)stats().steps_replayed);
}

/* Steps of one anchor (their first call) whose lengths are lens[0..iters): an addk, then
 * lens[it] - 2 axpb kernels, then a read-back (the synchronization that ends the step), checked
 * against eager arithmetic. */
static void sized_steps(CUdeviceptr x, float *ref, const int *lens, int iters)
{
    float h[N];
    for (int it = 0; it < iters; it++) {
        OK(fk_addk_launch(&fk, NULL, x, 1, N));
        for (int k = 0; k < lens[it] - 2; k++) OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
        for (int i = 0; i < N; i++) {
            ref[i] += 1.0f;
            for (int k = 0; k < lens[it] - 2; k++) ref[i] = 0.5f * ref[i] + 1.0f;
        }
        OK(fk.dtoh(h, x, sizeof h));
        for (int i = 0; i < N; i++) cr_assert_eq(h[i], ref[i], "iteration %d: x[%d] differs from eager", it, i);
    }
}

static cgj_trace_info_t sized_info(void)
{
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("sync:cuLaunchKernel:addk:5d0c54949986efa7", &i), CGJ_OK);
    return i;
}

/* `iters` steps of lengths 3, 4, 5 ...: a new length at every run. */
static void growing_steps(CUdeviceptr x, float *ref, int iters)
{
    int lens[32];
    cr_assert_leq(iters, 32);
    for (int it = 0; it < iters; it++) lens[it] = 3 + it;
    sized_steps(x, ref, lens, iters);
}

/* A step whose length changes at every run keeps warming up: none of its runs is recorded,
 * where each would have made a draft that the next run disagrees with. */
Test(tracer_warmup_sync, a_step_whose_length_changes_every_run_is_not_recorded)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    uint64_t before = stats().ops_recorded;
    growing_steps(x, ref, 12);
    cr_assert_eq(stats().ops_recorded, before, "%llu calls recorded",
                 (unsigned long long)(stats().ops_recorded - before));
    cr_assert_eq(sized_info().runs, 12);
    cr_assert_eq(sized_info().warmup_runs, 12);
}

/* Lengths that alternate (A B A B ...) repeat from the third run: the step records from its
 * fourth and replays both shapes. */
Test(tracer_warmup_sync, a_step_of_two_alternating_lengths_records_once_one_repeats)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    int lens[24];
    for (int it = 0; it < 24; it++) lens[it] = it % 2 ? 7 : 5;
    sized_steps(x, ref, lens, 24);
    cgj_trace_info_t i = sized_info();
    cr_assert_eq(i.variants, 2);
    cr_assert_gt(i.replays, 10, "%llu of 24 runs replayed", (unsigned long long)i.replays);
}

/* `iters` steps of 14 calls each: an addk, then 12 kernels, of which the one at place[it] (if 0
 * or more) is addk and the others axpb: one length, and the work at place[it] changing. */
static void shaped_steps(CUdeviceptr x, float *ref, const int *place, int iters)
{
    float h[N];
    for (int it = 0; it < iters; it++) {
        OK(fk_addk_launch(&fk, NULL, x, 1, N));
        for (int k = 0; k < 12; k++)
            OK(k == place[it] ? fk_addk_launch(&fk, NULL, x, 1, N) : fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
        for (int i = 0; i < N; i++) {
            ref[i] += 1.0f;
            for (int k = 0; k < 12; k++) ref[i] = k == place[it] ? ref[i] + 1.0f : 0.5f * ref[i] + 1.0f;
        }
        OK(fk.dtoh(h, x, sizeof h));
        for (int i = 0; i < N; i++) cr_assert_eq(h[i], ref[i], "iteration %d: x[%d] differs from eager", it, i);
    }
}

/* One length, but other work at every run (a program's sections in single and then double
 * precision, between the same synchronizations): none of its runs is recorded. */
Test(tracer_warmup_sync, a_step_of_one_length_whose_work_changes_every_run_is_not_recorded)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    int place[12];
    for (int it = 0; it < 12; it++) place[it] = it;
    uint64_t before = stats().ops_recorded;
    shaped_steps(x, ref, place, 12);
    cr_assert_eq(stats().ops_recorded, before, "%llu calls recorded",
                 (unsigned long long)(stats().ops_recorded - before));
    cr_assert_eq(sized_info().warmup_runs, 12);
}

/* One length, two kinds of work alternating: the third run repeats the first, and the step
 * records from its fourth and replays both. */
Test(tracer_warmup_sync, a_step_of_one_length_and_two_alternating_works_replays_both)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    int place[24];
    for (int it = 0; it < 24; it++) place[it] = it % 2 ? 3 : -1;
    shaped_steps(x, ref, place, 24);
    cgj_trace_info_t i = sized_info();
    cr_assert_eq(i.warmup_runs, 3);
    cr_assert_eq(i.variants, 2);
    cr_assert_gt(i.replays, 10, "%llu of 24 runs replayed", (unsigned long long)i.replays);
}

/* At most CGJ_WARMUP_MAX (16) warm-up runs: then the step records as ever. */
Test(tracer_warmup_sync, a_step_warms_up_at_most_sixteen_times)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    uint64_t warm = stats().steps_warmup;
    growing_steps(x, ref, 20);
    cr_assert_eq(stats().steps_warmup - warm, 16);
    cr_assert_eq(sized_info().warmup_runs, 16);
    cr_assert_gt(stats().ops_recorded, 0, "no run recorded after the sixteenth warm-up");
}

TestSuite(tracer_warmup_auto, .init = warm1_auto);

/* Steps found by their cycle (CGJIT_STEP=auto) warm up: the loop's step runs once unrecorded,
 * then records and replays. */
Test(tracer_warmup_auto, a_step_found_by_its_cycle_warms_up_then_replays)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    loop(x, ref, 400, false);
    cgj_stats_t s = stats();
    cr_assert_geq(s.steps_warmup, 1);
    cr_assert_gt(s.steps_replayed, 10, "%llu steps replayed", (unsigned long long)s.steps_replayed);
}
