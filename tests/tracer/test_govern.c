/*
 * test_govern.c — the governor (tracer/govern.c) against the fake driver on a fake clock: a
 * program cgjit makes slower goes dormant and stays there; one it makes faster stays active and
 * pays only the measurement, and one it makes slower is left on less evidence than active needs;
 * a program with two phases gets two judgements, and so does one that
 * begins to mark its steps; switching never cuts a step; a heartbeat on one thread with work on another; a child after
 * fork() starts afresh. Results equal eager execution throughout.
 *
 * The fake driver's launches can cost host time (fk.set_delays): a graph launch that costs more
 * than the kernels it replaces makes replay slower than eager, a kernel launch that costs makes
 * it faster. The clock is fake (tests/common/fake_clock.h), so what the governor measures, and
 * decides, depends on the program's calls alone, never on how loaded the machine is. Each step's
 * anchor keeps replaying whatever it costs (CGJIT_COST=0): the governor alone decides here.
 */
#define _GNU_SOURCE
#include "replay_common.h"

#include "fake_clock.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

/* The fake driver on the fake clock, the governor as `govern` says, the anchors' cost model as
 * `cost` says ("0": each anchor replaying whatever it costs). */
static void open_with(const char *govern, const char *cost)
{
    setenv("CGJIT_GOVERN", govern, 1);
    setenv("CGJIT_COST", cost, 1);
    fk_open(&fk);
    fake_clock_start(fk.handle);
}

static void govern_setup(void)
{
    open_with("1", "0");
}

TestSuite(tracer_govern, .init = govern_setup);

static cgj_govern_info_t govern_now(void)
{
    cgj_govern_info_t g;
    cr_assert_eq(cgj_govern(&g), CGJ_OK);
    return g;
}

/* The delays off, the governor's figures once it has judged a program cgjit makes faster:
 * judged at least once, and active. */
static cgj_govern_info_t judged_active(void)
{
    fk.set_delays(0, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_geq(g.judgements, 1, "no judgement");
    cr_assert(!g.last_dormant, "cgjit makes it faster, yet it went dormant (%.3fx)", g.ratio);
    return g;
}

/* One step's work: the program's own host work, then two kernels. */
static void work(CUdeviceptr x, int s)
{
    host_work(100);
    OK(fk_addk_launch(&fk, NULL, x, s % 7, N));
    OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
}

/* The same on the host: what x holds after step s. */
static void model(float *h, int s)
{
    for (int i = 0; i < N; i++) h[i] = (h[i] + (float)(s % 7)) * 0.5f + 1.0f;
}

typedef struct {
    CUdeviceptr x;
    float h[N];
    int s;
} prog_t;

static void prog_init(prog_t *p)
{
    p->x = fk_alloc_floats(&fk, N, 3);
    OK(fk.dtoh(p->h, p->x, sizeof p->h));
    p->s = 0;
}

/* x holds what eager execution gives after p's steps so far. */
static void expect_eager(const prog_t *p, const char *what)
{
    float got[N];
    OK(fk.dtoh(got, p->x, sizeof got));
    cr_assert(memcmp(got, p->h, sizeof got) == 0, "%s: results differ from eager after step %d", what, p->s);
}

/* `steps` marked steps named `name`, checked against the host model at the end. */
static void run_marked(prog_t *p, const char *name, int steps)
{
    for (int k = 0; k < steps; k++, p->s++) {
        cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
        work(p->x, p->s);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        model(p->h, p->s);
    }
    expect_eager(p, name);
}

/* `steps` steps with no markers, each `us` of the program's host work after its kernels and then
 * a synchronization, which ends the step that CGJIT_STEP=sync found. */
static void run_synced(prog_t *p, int steps, double us)
{
    for (int k = 0; k < steps; k++, p->s++) {
        work(p->x, p->s);
        host_work(us);
        OK(fk.ctx_sync());
        model(p->h, p->s);
    }
}

/* A program whose graph launches cost 300 us, 1500 steps of "slow": the governor takes it dormant. */
static void run_dormant(prog_t *p)
{
    fk.set_delays(0, 300);
    prog_init(p);
    run_marked(p, "slow", 1500);
    cr_assert_eq(govern_now().state, CGJ_GOVERN_DORMANT);
}

Test(tracer_govern, a_program_cgjit_makes_slower_goes_dormant_and_stays)
{
    fk.set_delays(0, 300); /* a graph launch costs 300 us, a kernel launch nothing */
    prog_t p;
    prog_init(&p);
    run_marked(&p, "slow", 1500);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_DORMANT, "state %s", cgj_govern_state_name(g.state));
    cr_assert(g.dormant);
    cr_assert_geq(g.judgements, 1);
    cr_assert_lt(g.ratio, 1.0, "active/dormant %.3f", g.ratio);
    cr_assert_lt(g.hi, 1.0, "upper bound %.3f", g.hi);
    cr_assert_geq(g.pairs, 2);
    cr_assert_str_eq(g.heartbeat, "slow");
    uint64_t judged = g.judgements, replays = info_of("slow").replays;
    run_marked(&p, "slow", 14000);
    fk.set_delays(0, 0);
    g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_DORMANT, "state %s after more steps", cgj_govern_state_name(g.state));
    cr_assert_gt(g.judgements, judged, "the decision was never checked again");
    cr_assert(g.last_dormant, "a check found active faster");
    /* Dormant, steps run straight through: only the re-checks' active windows replayed. */
    uint64_t more = info_of("slow").replays - replays;
    cr_assert_lt(more, 14000 / 20, "%llu of 14000 steps replayed while dormant", (unsigned long long)more);
}

Test(tracer_govern, a_program_cgjit_makes_faster_stays_active)
{
    fk.set_delays(50, 0); /* each kernel launch costs 50 us, a graph launch nothing */
    prog_t p;
    prog_init(&p);
    uint64_t t0 = fake_clock_ns;
    run_marked(&p, "fast", 20000);
    uint64_t elapsed = fake_clock_ns - t0;
    fk.set_delays(0, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_ACTIVE, "state %s", cgj_govern_state_name(g.state));
    cr_assert(!g.dormant);
    cr_assert_gt(g.ratio, 1.1, "active/dormant %.3f", g.ratio);
    cr_assert_gt(g.lo, 1.0, "lower bound %.3f", g.lo);
    cr_assert_geq(g.judgements, 2, "one judgement in 20000 steps: no check again");
    /* The measurement's cost: the time spent dormant, a small share of the run once decided. */
    cr_assert_eq(g.measure_dormant_ns, g.dormant_ns);
    cr_assert_lt(g.dormant_ns, elapsed / 5, "dormant %llu of %llu ns", (unsigned long long)g.dormant_ns,
                 (unsigned long long)elapsed);
    cr_assert_gt(info_of("fast").replays, 18000);
}

/* Marked steps named `name` of 1 ms of the program's host work, 4% more in the fourth window
 * measured (a machine that got busier for a while), each costing `graph_us` more or `launch_us`
 * less with cgjit active, until the governor judges the phase they make: its figures. */
static cgj_govern_info_t judge_with_one_busy_window(prog_t *p, const char *name, unsigned launch_us, unsigned graph_us)
{
    fk.set_delays(launch_us, graph_us);
    cgj_govern_info_t g = govern_now();
    uint64_t before = g.judgements, w0 = g.windows;
    for (int k = 0; k < 4000 && !(g.judgements > before && !strcmp(g.heartbeat, name)); k++, p->s++) {
        cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
        work(p->x, p->s);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        host_work(g.windows - w0 == 3 ? 1040 : 1000);
        model(p->h, p->s);
        g = govern_now();
    }
    fk.set_delays(0, 0);
    expect_eager(p, name);
    cr_assert_str_eq(g.heartbeat, name);
    cr_assert_gt(g.judgements, before, "%s: never judged", name);
    return g;
}

Test(tracer_govern, a_state_that_is_no_faster_is_left_on_less_evidence)
{
    /* cgjit costs a step 50 us (a graph launch), 5%: the pairs read 0.95x and, the busy window
     * an active one, 0.92x. Dormant after those two, though their 95% interval still holds 1:
     * 80% confidence that cgjit is slower suffices. */
    prog_t p;
    prog_init(&p);
    cgj_govern_info_t g = judge_with_one_busy_window(&p, "slower", 0, 50);
    cr_assert(g.last_dormant, "cgjit makes it slower, yet it stayed active (%.3fx)", g.ratio);
    cr_assert_eq(g.pairs, 2, "dormant after %llu pairs", (unsigned long long)g.pairs);
    cr_assert_lt(g.ratio, 0.95);
    cr_assert_gt(g.hi, 1.0, "the 95%% bounds exclude 1 (%.3f-%.3f): no test of the lesser evidence", g.lo, g.hi);
    /* cgjit saves a step as much in the next phase (two kernel launches of 25 us): the pairs read
     * 1.05x and 1.01x, and active needs more than those two. */
    g = judge_with_one_busy_window(&p, "faster", 25, 0);
    cr_assert(!g.last_dormant, "cgjit makes it faster, yet it went dormant (%.3fx)", g.ratio);
    cr_assert_gt(g.pairs, 2, "active after %llu pairs", (unsigned long long)g.pairs);
    cr_assert_gt(g.lo, 1.0);
}

Test(tracer_govern, a_program_of_one_step_has_its_heartbeat_sooner)
{
    /* One marked step: its heartbeat after 8 begins. Two marked steps in turn: after 32. */
    prog_t p;
    prog_init(&p);
    run_marked(&p, "only", 7);
    cr_assert_eq(govern_now().state, CGJ_GOVERN_LEARN);
    run_marked(&p, "only", 1);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_SETTLE, "state %s after 8 begins of one step", cgj_govern_state_name(g.state));
    cr_assert_str_eq(g.heartbeat, "only");
    cr_assert_eq(g.phases, 1);
}

Test(tracer_govern, a_program_of_two_steps_learns_among_32_begins)
{
    prog_t p;
    prog_init(&p);
    for (int k = 0; k < 15; k++) run_marked(&p, "one", 1), run_marked(&p, "two", 1);
    cr_assert_eq(govern_now().state, CGJ_GOVERN_LEARN, "a heartbeat chosen among 30 begins of two steps");
    run_marked(&p, "one", 1), run_marked(&p, "two", 1);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_SETTLE, "state %s after 32 begins", cgj_govern_state_name(g.state));
    cr_assert_str_eq(g.heartbeat, "one");
}

/* With the anchors' cost model on (the default), a marked step that makes every begin, in a
 * program whose steps cgjit finds none of, is judged by its own cost model: no window, never
 * dormant. A slower replay goes off at the anchor (its eager probes against its replays); a second
 * marked step ends that, and the process is learned and judged by windows. */
static void cost_setup(void)
{
    open_with("1", "1");
}

TestSuite(tracer_govern_cost, .init = cost_setup);

Test(tracer_govern_cost, the_only_marked_step_is_judged_by_its_cost_model)
{
    prog_t p;
    prog_init(&p);
    fk.set_delays(0, 300); /* replay loses: each graph launch costs 300 us */
    run_marked(&p, "only", 200);
    fk.set_delays(0, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_ANCHOR, "state %s", cgj_govern_state_name(g.state));
    cr_assert_str_eq(g.heartbeat, "only");
    cr_assert_eq(g.windows, 0, "%llu windows measured", (unsigned long long)g.windows);
    cr_assert_eq(g.switches, 0, "%llu switches to dormant and back", (unsigned long long)g.switches);
    cgj_trace_info_t i;
    memset(&i, 0, sizeof i);
    cr_assert_eq(cgj_trace_info("only", &i), CGJ_OK);
    cr_assert_eq(i.reason_code, CGJ_REASON_OFF_COST, "the slower replay was not turned off: %s", i.reason);
    cr_assert_gt(i.off_runs, 100, "%llu runs off", (unsigned long long)i.off_runs);
    char *text = fk_report_text();
    cr_assert(text);
    cr_assert(strstr(text, "governor (CGJIT_GOVERN): its step's cost model (the heartbeat's eager probes"), "%s", text);
    free(text);
}

Test(tracer_govern_cost, a_second_marked_step_brings_the_windows_back)
{
    prog_t p;
    prog_init(&p);
    run_marked(&p, "first", 20);
    cr_assert_eq(govern_now().state, CGJ_GOVERN_ANCHOR);
    run_marked(&p, "second", 1); /* learning again, this begin its first */
    for (int k = 0; k < 15; k++) run_marked(&p, "first", 1), run_marked(&p, "second", 1);
    cr_assert_eq(govern_now().state, CGJ_GOVERN_LEARN);
    run_marked(&p, "first", 1);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_SETTLE, "state %s after 32 begins of two steps", cgj_govern_state_name(g.state));
    cr_assert_eq(g.phases, 2);
}

Test(tracer_govern, each_phase_of_a_program_gets_its_own_judgement)
{
    fk.set_delays(50, 0);
    prog_t p;
    prog_init(&p);
    run_marked(&p, "prefill", 1500);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.phases, 1);
    cr_assert_geq(g.judgements, 1);
    cr_assert_str_eq(g.heartbeat, "prefill");
    uint64_t judged = g.judgements;
    run_marked(&p, "decode", 2000);
    fk.set_delays(0, 0);
    g = govern_now();
    cr_assert_eq(g.phases, 2, "%llu phases", (unsigned long long)g.phases);
    cr_assert_str_eq(g.heartbeat, "decode");
    cr_assert_gt(g.judgements, judged, "the second phase was not judged");
    cr_assert_eq(g.state, CGJ_GOVERN_ACTIVE, "state %s", cgj_govern_state_name(g.state));
}

/* One window that meets a phase of the program (here 60 ms of other host work inside the first
 * window measured) must not decide alone: the program stays active, where cgjit pays. The
 * window's halves hold its beats unevenly, so it is measured again: every pair then measures
 * the two states alone (on the fake clock, each pair finds the same ratio). */
Test(tracer_govern, one_window_that_meets_a_pause_does_not_decide)
{
    fk.set_delays(50, 0);
    prog_t p;
    prog_init(&p);
    run_marked(&p, "paced", 60); /* learned and settled: the first window is open */
    cr_assert_eq(govern_now().state, CGJ_GOVERN_MEASURE, "state %s", cgj_govern_state_name(govern_now().state));
    host_work(60000);
    run_marked(&p, "paced", 4000);
    cgj_govern_info_t g = judged_active();
    cr_assert_eq(g.state, CGJ_GOVERN_ACTIVE, "state %s", cgj_govern_state_name(g.state));
    cr_assert_float_eq(g.lo, g.hi, 1e-9, "the paused window was paired (interval %.3f-%.3f)", g.lo, g.hi);
}

/* A program cgjit makes faster (kernel launches cost 50 us; graph launches nothing), its steps
 * marked `name`, run until the governor opens its first dormant window to measure. */
static void until_a_dormant_window(prog_t *p, const char *name)
{
    fk.set_delays(50, 0);
    prog_init(p);
    int guard = 0;
    while (!(govern_now().state == CGJ_GOVERN_MEASURE && govern_now().dormant) && guard++ < 5000)
        run_marked(p, name, 1);
    cr_assert(govern_now().dormant, "no dormant window opened in 5000 steps");
}

/* The program changes its pace (its prompt read, it decodes one token a beat: 2 ms of its own
 * host work a step from then on) while the first pair's dormant window is open. That window is
 * measured again, and the pair with it: its active window was measured at the old pace. Every
 * pair then measures the two states at the new pace (on the fake clock, each finds the same
 * ratio), and cgjit, which makes the program faster, stays active. */
Test(tracer_govern, a_pace_that_changes_inside_a_pair_starts_the_pair_again)
{
    prog_t p;
    until_a_dormant_window(&p, "decode");
    cr_assert_eq(govern_now().windows, 1, "%llu windows before the first dormant one",
                 (unsigned long long)govern_now().windows);
    run_marked(&p, "decode", 40); /* the old pace, in the dormant window */
    for (int k = 0; k < 3000; k++) {
        run_marked(&p, "decode", 1);
        host_work(2000);
    }
    cgj_govern_info_t g = judged_active();
    cr_assert_float_eq(g.lo, g.hi, 1e-9, "a pair held both paces (interval %.3f-%.3f)", g.lo, g.hi);
}

/* A heartbeat that comes in bursts shorter than a window (20 steps, then 5 ms of other host work)
 * holds its beats evenly enough across each window's halves: no window is measured again for it,
 * and the program is judged as one without bursts. */
Test(tracer_govern, a_heartbeat_in_short_bursts_is_judged)
{
    fk.set_delays(50, 0);
    prog_t p;
    prog_init(&p);
    for (int b = 0; b < 400; b++) {
        run_marked(&p, "bursts", 20);
        host_work(5000);
    }
    cgj_govern_info_t g = judged_active();
    cr_assert_gt(g.ratio, 1.0, "active/dormant %.3f", g.ratio);
}

/* A dormant window that meets a pause is measured again: its time still counts as time spent
 * dormant to measure, so that the report's two dormant figures agree where the program stays
 * active. */
Test(tracer_govern, a_dormant_window_measured_again_counts_as_measuring)
{
    prog_t p;
    until_a_dormant_window(&p, "paused");
    run_marked(&p, "paused", 20);
    host_work(60000);
    run_marked(&p, "paused", 4000);
    fk.set_delays(0, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_ACTIVE, "state %s", cgj_govern_state_name(g.state));
    cr_assert_eq(g.measure_dormant_ns, g.dormant_ns, "dormant %llu ns, of them measuring %llu",
                 (unsigned long long)g.dormant_ns, (unsigned long long)g.measure_dormant_ns);
}

/* A phase that went dormant ends when its heartbeat stops: the next phase is judged too. */
Test(tracer_govern, a_dormant_phase_ends_when_its_heartbeat_stops)
{
    prog_t p;
    run_dormant(&p);
    fk.set_delays(50, 0);
    host_work(500000); /* half a second of other work: the heartbeat stopped */
    run_marked(&p, "fast", 2000);
    fk.set_delays(0, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.phases, 2, "%llu phases", (unsigned long long)g.phases);
    cr_assert_str_eq(g.heartbeat, "fast");
    cr_assert_eq(g.state, CGJ_GOVERN_ACTIVE, "state %s", cgj_govern_state_name(g.state));
}

/* ---- implicit steps: the governor switches between steps, never inside one ---- */

static void implicit_setup(void)
{
    setenv("CGJIT_STEP", "sync", 1);
    govern_setup();
}

TestSuite(tracer_govern_implicit, .init = implicit_setup);

Test(tracer_govern_implicit, switching_never_cuts_a_step)
{
    fk.set_delays(0, 300); /* replay is slower: the governor switches during its measurement */
    prog_t p;
    prog_init(&p);
    run_synced(&p, 3000, 50);
    fk.set_delays(0, 0);
    expect_eager(&p, "sync");
    cgj_govern_info_t g = govern_now();
    cgj_stats_t st = stats_now();
    cr_assert_geq(g.switches, 3, "%llu switches", (unsigned long long)g.switches);
    cr_assert_eq(g.state, CGJ_GOVERN_DORMANT, "state %s", cgj_govern_state_name(g.state));
    cr_assert_gt(st.steps_replayed, 0);
    /* A switch inside a step would leave it early: a side exit, or an abort. */
    cr_assert_eq(st.side_exits, 0, "%llu side exits", (unsigned long long)st.side_exits);
    cr_assert_eq(st.aborts, 0, "%llu aborts", (unsigned long long)st.aborts);
}

/* A step cgjit found itself is chosen among 32 begins, even where it made every begin so far: a
 * set-up that repeats one step would else be taken for the loop. */
Test(tracer_govern_implicit, a_step_found_alone_is_chosen_among_32_begins)
{
    prog_t p;
    prog_init(&p);
    run_synced(&p, 20, 50);
    cr_assert_eq(govern_now().state, CGJ_GOVERN_LEARN, "a heartbeat chosen among 19 begins of one found step");
    run_synced(&p, 20, 50);
    cr_assert_neq(govern_now().state, CGJ_GOVERN_LEARN, "no heartbeat after 39 begins");
    expect_eager(&p, "sync");
}

/* A program that loads its model first: each parameter's upload and the synchronization after
 * it are a step of one call under sync, more of them than the heartbeat is learned from. None
 * of them is counted: the heartbeat is the loop's step, learned once the loop runs. */
Test(tracer_govern_implicit, uploads_one_by_one_are_no_heartbeat)
{
    fk.set_delays(50, 0);
    prog_t p;
    prog_init(&p);
    CUdeviceptr w = fk_alloc_floats(&fk, N, 0);
    float host[N] = {0};
    for (int i = 0; i < 300; i++) {
        host[0] = (float)i;
        OK(fk.htod(w, host, sizeof host));
        OK(fk.ctx_sync());
    }
    cr_assert_eq(govern_now().state, CGJ_GOVERN_LEARN, "a heartbeat among the uploads: '%s'", govern_now().heartbeat);
    run_synced(&p, 400, 0);
    fk.set_delays(0, 0);
    expect_eager(&p, "sync");
    cgj_govern_info_t g = govern_now();
    cr_assert_neq(g.state, CGJ_GOVERN_LEARN, "no heartbeat in 400 steps of the loop");
    cr_assert(strncmp(g.heartbeat, "sync:cuLaunchKernel:", 20) == 0, "heartbeat '%s'", g.heartbeat);
    float got[N];
    OK(fk.dtoh(got, w, sizeof got));
    cr_assert_float_eq(got[0], 299.0f, 0, "the last upload landed");
}

/* A program whose loop is made of one-call steps (a kernel, then a synchronization) is still
 * judged: once 1024 such steps came with no longer one, they count toward the heartbeat too. */
Test(tracer_govern_implicit, a_loop_of_one_call_steps_still_has_a_heartbeat)
{
    prog_t p;
    prog_init(&p);
    for (int k = 0; k < 1500; k++, p.s++) {
        OK(fk_addk_launch(&fk, NULL, p.x, p.s % 7, N));
        OK(fk.ctx_sync());
        for (int i = 0; i < N; i++) p.h[i] += (float)(p.s % 7);
    }
    expect_eager(&p, "one-call steps");
    cgj_govern_info_t g = govern_now();
    cr_assert_neq(g.state, CGJ_GOVERN_LEARN, "no heartbeat in 1500 steps of one call");
    cr_assert(strncmp(g.heartbeat, "sync:cuLaunchKernel:", 20) == 0, "heartbeat '%s'", g.heartbeat);
}

/* A program that begins to mark its steps (a Python program's `with cgjit.step()` after its
 * set-up): the steps cgjit found itself begin no more, and the governor judges anew, with the
 * marked step as its heartbeat. */
Test(tracer_govern_implicit, marking_the_step_starts_a_new_judgement)
{
    fk.set_delays(50, 0);
    prog_t p;
    prog_init(&p);
    run_synced(&p, 400, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_neq(g.state, CGJ_GOVERN_LEARN, "no heartbeat in 400 implicit steps");
    cr_assert(strncmp(g.heartbeat, "sync:", 5) == 0, "heartbeat '%s'", g.heartbeat);
    uint64_t phases = g.phases;
    run_marked(&p, "marked", 1);
    cr_assert_eq(govern_now().state, CGJ_GOVERN_LEARN, "state %s", cgj_govern_state_name(govern_now().state));
    run_marked(&p, "marked", 300);
    fk.set_delays(0, 0);
    g = govern_now();
    cr_assert_str_eq(g.heartbeat, "marked");
    cr_assert_gt(g.phases, phases);
}

/* A host that polls (cuStreamQuery until the GPU is done) makes as many queries as it waits: a
 * step that begins at a query is never the heartbeat, however often it begins. */
static void auto_setup(void)
{
    setenv("CGJIT_STEP", "auto", 1);
    govern_setup();
}

TestSuite(tracer_govern_auto, .init = auto_setup);

Test(tracer_govern_auto, a_polling_query_is_no_heartbeat)
{
    fk.set_delays(50, 0);
    prog_t p;
    prog_init(&p);
    for (int k = 0; k < 3000; k++, p.s++) {
        for (int q = 0; q < 1 + k % 5; q++) (void)fk.stream_query(NULL); /* polls: as many as it waits */
        work(p.x, p.s);
        model(p.h, p.s);
    }
    fk.set_delays(0, 0);
    expect_eager(&p, "auto");
    cgj_govern_info_t g = govern_now();
    cr_assert(g.heartbeat[0], "no heartbeat chosen");
    cr_assert(!strstr(g.heartbeat, "cuStreamQuery"), "a query is the heartbeat: %s", g.heartbeat);
}

/* ---- threads: the heartbeat on one thread, the work on another ---- */

typedef struct {
    prog_t p;
    int steps;
    pthread_barrier_t *bar;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    for (int k = 0; k < w->steps; k++) {
        pthread_barrier_wait(w->bar);
        run_marked(&w->p, "work", 1);
        pthread_barrier_wait(w->bar);
    }
    return NULL;
}

Test(tracer_govern, a_heartbeat_on_one_thread_with_the_work_on_another)
{
    fk.set_delays(50, 0);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    worker_t w = {.steps = 1500, .bar = &bar};
    prog_init(&w.p);
    prog_t beat;
    prog_init(&beat);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, worker, &w), 0);
    for (int k = 0; k < w.steps; k++) {
        pthread_barrier_wait(&bar);
        run_marked(&beat, "beat", 2); /* the most frequent step: the heartbeat */
        pthread_barrier_wait(&bar);
    }
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    fk.set_delays(0, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_str_eq(g.heartbeat, "beat");
    cr_assert_geq(g.judgements, 1);
    cr_assert_eq(g.state, CGJ_GOVERN_ACTIVE, "state %s", cgj_govern_state_name(g.state));
}

/* ---- fork(): the child judges afresh ---- */

Test(tracer_govern, a_child_after_fork_starts_afresh)
{
    prog_t p;
    run_dormant(&p);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        cgj_govern_info_t g;
        g.size = sizeof g;
        int ok = cgj_govern_read(&g) == CGJ_OK && g.state == CGJ_GOVERN_LEARN && !g.dormant && !g.heartbeat[0] &&
                 cgj_trace_begin("child") == CGJ_OK && cgj_trace_end() == CGJ_OK;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw the parent's governor");
    cr_assert_eq(govern_now().state, CGJ_GOVERN_DORMANT, "the parent's decision changed");
}

/* ---- CGJIT_GOVERN=0 and 2 ---- */

static void off_setup(void)
{
    open_with("0", "0");
}

TestSuite(tracer_govern_off, .init = off_setup);

Test(tracer_govern_off, off_never_goes_dormant)
{
    fk.set_delays(0, 300);
    prog_t p;
    prog_init(&p);
    run_marked(&p, "slow", 1500);
    fk.set_delays(0, 0);
    cgj_govern_info_t g = govern_now();
    cr_assert_eq(g.state, CGJ_GOVERN_OFF);
    cr_assert_eq(g.switches, 0);
    cgj_trace_info_t i = info_of("slow");
    cr_assert_geq(i.replays, 1500 - 3, "%llu of 1500 steps replayed", (unsigned long long)i.replays);
}

static void held_setup(void)
{
    setenv("CGJIT_GOVERN", "2", 1);
    setenv("CGJIT_STEP", "sync", 1);
    fk_open(&fk);
}

TestSuite(tracer_govern_held, .init = held_setup);

Test(tracer_govern_held, held_dormant_records_nothing)
{
    prog_t p;
    prog_init(&p);
    run_marked(&p, "held", 50);
    run_synced(&p, 50, 0);
    expect_eager(&p, "held");
    cgj_govern_info_t g = govern_now();
    cgj_stats_t st = stats_now();
    cr_assert_eq(g.state, CGJ_GOVERN_HELD);
    cr_assert(g.dormant);
    cr_assert_eq(st.steps_replayed, 0);
    cr_assert_eq(st.ops_recorded, 0, "%llu calls recorded", (unsigned long long)st.ops_recorded);
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("held", &i), CGJ_ERR_NOT_FOUND);
}
