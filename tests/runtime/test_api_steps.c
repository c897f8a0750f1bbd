/*
 * test_api_steps.c — the step functions of include/cgjit.h that languages other than C build on:
 * cgj_trace_abort (a step left half-way, as an exception leaves it: its absorbed work issued
 * eagerly, in order, nothing of the run recorded or replayed), cgj_trace_pause/resume (a
 * thread's calls straight to the driver, counted) and cgj_report_json_buf (the JSON report into
 * a buffer, snprintf-style). Against the fake driver; results compared with the same work
 * eagerly.
 */
#define _GNU_SOURCE
#include "../tracer/replay_common.h"

TestSuite(runtime_api_steps, .init = setup);

static void two_kernels(CUdeviceptr x, int s)
{
    OK(fk_addk_launch(&fk, NULL, x, s % 5, N));
    OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
}

/* Steps of two kernels on t (traced) and e (eager); in step `abort_at` the traced one stops after
 * its first kernel with cgj_trace_abort, and the eager twin does the same work. */
static void run(bufs_t *b, int steps, int abort_at)
{
    for (int s = 0; s < steps; s++) {
        if (s == abort_at) {
            OK(fk_addk_launch(&fk, NULL, b->e[0], s % 5, N));
            cr_assert_eq(cgj_trace_begin("abortable"), CGJ_OK);
            OK(fk_addk_launch(&fk, NULL, b->t[0], s % 5, N));
            cr_assert_eq(cgj_trace_abort(), CGJ_OK);
        } else {
            two_kernels(b->e[0], s);
            cr_assert_eq(cgj_trace_begin("abortable"), CGJ_OK);
            two_kernels(b->t[0], s);
            cr_assert_eq(cgj_trace_end(), CGJ_OK);
        }
        compare_bufs("abortable", s, b);
    }
}

Test(runtime_api_steps, an_abort_in_replay_issues_what_was_absorbed_and_replay_goes_on)
{
    bufs_t b;
    bufs_alloc(&b, 1);
    run(&b, 12, 6);
    cgj_trace_info_t i = info_of("abortable");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_geq(i.replays, 12 - 2 - 1 - 1, "%llu replays", (unsigned long long)i.replays);
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE, "the abort ended the step");
    cr_assert_eq(cgj_trace_abort(), CGJ_ERR_NOT_ACTIVE, "no step to abort");
}

Test(runtime_api_steps, an_abort_while_recording_records_nothing)
{
    bufs_t b;
    bufs_alloc(&b, 1);
    run(&b, 10, 1); /* the second run, the one compared with the draft */
    cgj_trace_info_t i = info_of("abortable");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "state %s: %s", cgj_state_name(i.state), i.reason);
    cr_assert_gt(i.replays, 0);
}

Test(runtime_api_steps, paused_calls_go_straight_to_the_driver)
{
    bufs_t b;
    bufs_alloc(&b, 1);
    cr_assert_eq(cgj_trace_resume(), CGJ_ERR_NOT_ACTIVE, "not paused");
    cr_assert_eq(cgj_trace_pause(), CGJ_OK);
    cr_assert_eq(cgj_trace_pause(), CGJ_OK); /* counted */
    uint64_t recorded = stats_now().ops_recorded;
    for (int s = 0; s < 8; s++) {
        two_kernels(b.e[0], s);
        cr_assert_eq(cgj_trace_begin("paused"), CGJ_OK); /* eager, still paired with its end */
        two_kernels(b.t[0], s);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        compare_bufs("paused", s, &b);
    }
    cr_assert_eq(stats_now().ops_recorded, recorded, "a paused thread's calls were recorded");
    cr_assert_eq(stats_now().steps_replayed, 0);
    cr_assert_eq(cgj_trace_resume(), CGJ_OK);
    cr_assert_eq(cgj_trace_resume(), CGJ_OK);
    cr_assert_eq(cgj_trace_resume(), CGJ_ERR_NOT_ACTIVE);
}

Test(runtime_api_steps, pausing_inside_a_marked_step_is_refused)
{
    cr_assert_eq(cgj_trace_begin("open"), CGJ_OK);
    cr_assert_eq(cgj_trace_pause(), CGJ_ERR_NESTED);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
}

Test(runtime_api_steps, the_json_report_fits_the_size_it_asks_for)
{
    bufs_t b;
    bufs_alloc(&b, 1);
    run(&b, 5, -1);
    size_t need = cgj_report_json_buf(NULL, 0);
    cr_assert_gt(need, 2);
    char small[8];
    cr_assert_eq(cgj_report_json_buf(small, sizeof small), need, "a short buffer gets the size needed");
    cr_assert_eq(small[sizeof small - 1], '\0', "a short buffer is still terminated");
    char *buf = malloc(need + 64); /* the report may grow by a few bytes between the two calls */
    cr_assert(buf);
    size_t got = cgj_report_json_buf(buf, need + 64);
    cr_assert_leq(got, need + 64);
    cr_assert_eq(buf[0], '{');
    cr_assert(strstr(buf, "\"anchors\"") && strstr(buf, "abortable"), "%.200s", buf);
    free(buf);
}
