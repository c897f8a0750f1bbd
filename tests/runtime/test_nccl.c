/*
 * test_nccl.c — cgjit's NCCL wrappers against the fake NCCL (tests/fakecuda/fakenccl.c).
 *
 * Linked as test_libs.c is: libcgjit before libfakenccl, so cgjit's nccl* exports come first and
 * their dlsym(RTLD_NEXT) finds the fake, which reaches the fake driver as the real NCCL reaches
 * the driver. Each scenario runs STEPS steps eagerly on one buffer set, then STEPS traced steps
 * (cgj_trace_begin/end) on another with the same initial data, and compares every step's
 * buffers bitwise. The communicator's device-side step counter (fakenccl_steps) tells how many
 * collective kernels ran: each collective runs exactly once per call, replayed or not.
 */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <nccl.h>
#include <string.h>
#include <unistd.h>

#include "fakeapp.h"
#include "fakenccl.h"

#define STEPS 30
#define N 64

static fk_t fk;
static CUstream g_s;
static ncclComm_t g_comm;

#define OK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s failed", #call)
#define NC(call)                                                         \
    do {                                                                 \
        ncclResult_t r_ = (call);                                        \
        cr_assert_eq(r_, ncclSuccess, "%s returned %d", #call, (int)r_); \
    } while (0)

static void setup(void)
{
    setenv("CGJIT_COLLECTIVE_TIMEOUT_S", "1", 1);
    /* The suite runtime_nccl checks the optional learned path (CGJIT_LIBS_LEARNED): collectives
     * absorbed whole; runtime_nccl_default checks the default, where NCCL runs on every call. */
    setenv("CGJIT_LIBS_LEARNED", getenv("NCCL_TEST_DEFAULT") ? "0" : "1", 1);
    fk_open(&fk);
    OK(fk.stream_create(&g_s, 0));
    NC(ncclCommInitAll(&g_comm, 1, NULL));
    fakenccl_set_fifo(0);
}

TestSuite(runtime_nccl, .init = setup);

typedef struct bufs {
    CUdeviceptr x, y, z;
} bufs_t;

typedef void (*step_fn)(int s, const bufs_t *b);

/* A step's own work around its collectives: a kernel before, one after. */
static void allreduce_step(int s, const bufs_t *b)
{
    OK(fk_addk_launch(&fk, g_s, b->x, s + 1, N));
    NC(ncclAllReduce((const void *)(uintptr_t)b->x, (void *)(uintptr_t)b->y, N, ncclFloat, ncclSum, g_comm, g_s));
    OK(fk_axpb_launch(&fk, g_s, b->y, 2.0f, 1.0f, N, 1));
}

typedef struct outcome {
    unsigned long calls_traced; /* collective calls that reached NCCL in the traced half */
    unsigned long calls_late;   /* ... in its last 10 steps */
    unsigned long graph_launches_late;
} outcome_t;

/* Run fn eagerly and traced; between steps, `between` (may be NULL) runs in both halves. */
static outcome_t run(const char *anchor, step_fn fn, void (*between)(int s))
{
    bufs_t e = {fk_alloc_floats(&fk, N, 1), fk_alloc_floats(&fk, N, 2), fk_alloc_floats(&fk, N, 3)};
    bufs_t t = {fk_alloc_floats(&fk, N, 1), fk_alloc_floats(&fk, N, 2), fk_alloc_floats(&fk, N, 3)};
    static float want[STEPS][3][N];
    for (int s = 0; s < STEPS; s++) {
        if (between) between(s);
        fn(s, &e);
        OK(fk.stream_sync(g_s));
        OK(fk.dtoh(want[s][0], e.x, sizeof want[s][0]));
        OK(fk.dtoh(want[s][1], e.y, sizeof want[s][1]));
        OK(fk.dtoh(want[s][2], e.z, sizeof want[s][2]));
    }
    outcome_t o = {0};
    unsigned long c0 = fakenccl_calls(), late = 0;
    fakecuda_counts_t g0 = {0}, g1;
    for (int s = 0; s < STEPS; s++) {
        if (between) between(s);
        if (s == STEPS - 10) {
            late = fakenccl_calls();
            fk.get_counts(&g0);
        }
        cr_assert_eq(cgj_trace_begin(anchor), CGJ_OK);
        fn(s, &t);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk.stream_sync(g_s));
        float got[N];
        CUdeviceptr bs[3] = {t.x, t.y, t.z};
        for (int k = 0; k < 3; k++) {
            OK(fk.dtoh(got, bs[k], sizeof got));
            cr_assert(memcmp(got, want[s][k], sizeof got) == 0, "step %d: buffer %d differs from eager", s, k);
        }
    }
    fk.get_counts(&g1);
    o.calls_traced = fakenccl_calls() - c0;
    o.calls_late = fakenccl_calls() - late;
    o.graph_launches_late = g1.graph_launches - g0.graph_launches;
    cr_assert_eq(fakenccl_errors(), 0, "a collective kernel ran with stale state");
    return o;
}

static cgj_trace_info_t info(const char *name)
{
    cgj_trace_info_t i = {.size = sizeof i};
    cr_assert_eq(cgj_trace_info_read(name, &i), CGJ_OK);
    return i;
}

Test(runtime_nccl, an_all_reduce_is_absorbed_and_launched_before_its_call_returns)
{
    uint64_t k0 = fakenccl_steps(g_comm);
    outcome_t o = run("allreduce", allreduce_step, NULL);
    cr_assert_eq(o.calls_late, 0, "replays called NCCL %lu times", o.calls_late);
    /* A chunk ends with the collective: each replay launches two graphs, one through the
     * all-reduce, one for the rest. */
    cr_assert_eq(o.graph_launches_late, 20, "graph launches in 10 replays: %lu", o.graph_launches_late);
    /* Exactly one collective kernel per call, replayed or not. */
    cr_assert_eq(fakenccl_steps(g_comm) - k0, 2 * STEPS);
    cr_assert_geq(info("allreduce").replays, STEPS - 3);
    char *r = fk_report_text();
    cr_assert(r && strstr(r, "collectives_absorbed"), "the report counts collectives absorbed:\n%s", r ? r : "");
    free(r);
}

/* Every fifth step all-reduces half the buffer; at step 12 the communicator is made anew. */
static void changing_step(int s, const bufs_t *b)
{
    OK(fk_addk_launch(&fk, g_s, b->x, s + 1, N));
    NC(ncclAllReduce((const void *)(uintptr_t)b->x, (void *)(uintptr_t)b->y, s % 5 == 4 ? N / 2 : N, ncclFloat, ncclSum,
                     g_comm, g_s));
    OK(fk_axpb_launch(&fk, g_s, b->y, 2.0f, 1.0f, N, 1));
}

static void new_comm_at_12(int s)
{
    if (s != 12) return;
    NC(ncclCommDestroy(g_comm));
    NC(ncclCommInitAll(&g_comm, 1, NULL));
}

Test(runtime_nccl, another_count_or_a_new_communicator_runs_the_library)
{
    outcome_t o = run("changing", changing_step, new_comm_at_12);
    /* Steps 4, 9, 14, ... (another count) and the steps after the new communicator are not
     * absorbed; steady steps are. Results were compared with eager at every step. */
    cr_assert_geq(o.calls_traced, 6);
    cr_assert_lt(o.calls_traced, STEPS, "nothing was absorbed: %lu calls", o.calls_traced);
}

static void grouped_step(int s, const bufs_t *b)
{
    OK(fk_addk_launch(&fk, g_s, b->x, s + 1, N));
    NC(ncclGroupStart());
    NC(ncclAllReduce((const void *)(uintptr_t)b->x, (void *)(uintptr_t)b->y, N, ncclFloat, ncclSum, g_comm, g_s));
    NC(ncclBroadcast((const void *)(uintptr_t)b->x, (void *)(uintptr_t)b->z, N, ncclFloat, 0, g_comm, g_s));
    NC(ncclGroupEnd());
    OK(fk_axpb_launch(&fk, g_s, b->z, 0.5f, 1.0f, N, 1));
}

Test(runtime_nccl, a_group_runs_the_library_and_its_kernels_replay)
{
    outcome_t o = run("grouped", grouped_step, NULL);
    cr_assert_eq(o.calls_late, 20, "the group's two calls reach NCCL on every step");
    cr_assert_geq(info("grouped").replays, STEPS - 3, "the step still replays");
    char *r = fk_report_text();
    cr_assert(r && strstr(r, "LIB_NCCL_GROUP"), "the report says why:\n%s", r ? r : "");
    free(r);
}

static void fifo_step(int s, const bufs_t *b)
{
    fakenccl_set_fifo(1);
    allreduce_step(s, b);
}

/* The kernel's work changes with every call and with none of its arguments: never absorbed
 * (its kernel would read a stale FIFO entry), the library runs and its kernel is captured. */
Test(runtime_nccl, work_that_changes_with_no_argument_keeps_the_library_running)
{
    outcome_t o = run("fifo", fifo_step, NULL);
    cr_assert_eq(o.calls_late, 10);
    cr_assert_geq(info("fifo").replays, STEPS - 3);
}

static uint64_t stuck_now(void)
{
    cgj_stats_t st = {.size = sizeof st};
    cr_assert_eq(cgj_stats_read(&st), CGJ_OK);
    return st.collectives_stuck;
}

/* A replayed all-reduce whose kernels never complete (the driver says "not ready", as when a
 * peer never makes the call) is reported after CGJIT_COLLECTIVE_TIMEOUT_S (1 s here), once;
 * the program's work is left alone. Asserted on what the watchdog did, never on how long the
 * test waited (sleeps sized for an idle machine fail on a loaded one): the
 * watchdog queries the collective's event at most every 100 ms, and each query takes one "not
 * ready" from the fake driver's queue (NOT_READY_ANSWERS, 6.4 s of them at the least), so the
 * report must come while some are left; then it must not come again in three more queries. */
#define NOT_READY_ANSWERS 64
Test(runtime_nccl, a_replayed_collective_that_never_completes_is_reported, .timeout = 120)
{
    bufs_t b = {fk_alloc_floats(&fk, N, 1), fk_alloc_floats(&fk, N, 2), fk_alloc_floats(&fk, N, 3)};
    for (int s = 0; s < 8; s++) {
        cr_assert_eq(cgj_trace_begin("stuck"), CGJ_OK);
        allreduce_step(s, &b);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk.stream_sync(g_s));
    }
    cr_assert_geq(info("stuck").replays, 4);
    cr_assert_eq(stuck_now(), 0, "a collective that completed was reported");
    for (int i = 0; i < NOT_READY_ANSWERS; i++) fk.fail_next("cuEventQuery", CUDA_ERROR_NOT_READY);
    cr_assert_eq(fk.fail_pending(), NOT_READY_ANSWERS);
    cr_assert_eq(cgj_trace_begin("stuck"), CGJ_OK);
    allreduce_step(8, &b); /* its collective's event (or an earlier one's, not queried yet) waits */
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    while (!stuck_now()) {
        cr_assert_gt(fk.fail_pending(), 0, "the watchdog queried %d times and reported nothing", NOT_READY_ANSWERS);
        usleep(10000);
    }
    int left = fk.fail_pending();
    cr_assert_gt(left, 3, "reported only at the last of the driver's answers");
    while (fk.fail_pending() > left - 3) usleep(10000); /* three more queries, still not ready */
    cr_assert_eq(stuck_now(), 1, "the stuck collective was reported more than once");
    fk.fail_clear();
}

/* The default: NCCL runs on every call, and its kernels replay from the step's graphs, a chunk
 * ending with each collective's group so that its kernels are launched before the call returns. */
static void setup_default(void)
{
    setenv("NCCL_TEST_DEFAULT", "1", 1);
    setup();
}

TestSuite(runtime_nccl_default, .init = setup_default);

Test(runtime_nccl_default, an_all_reduce_runs_nccl_and_its_kernels_replay)
{
    uint64_t k0 = fakenccl_steps(g_comm);
    outcome_t o = run("allreduce_default", allreduce_step, NULL);
    cr_assert_eq(o.calls_late, 10, "replays called NCCL %lu times in 10 steps", o.calls_late);
    cr_assert_eq(o.graph_launches_late, 20, "graph launches in 10 replays: %lu", o.graph_launches_late);
    cr_assert_eq(fakenccl_steps(g_comm) - k0, 2 * STEPS, "one collective kernel per call");
    cr_assert_geq(info("allreduce_default").replays, STEPS - 3);
}
