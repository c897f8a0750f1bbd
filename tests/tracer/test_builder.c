/*
 * test_builder.c — a step's graphs built by cgjit's builder thread (CGJIT_BUILD_BACKGROUND=1),
 * against the fake driver. The fake holds the builder inside its graph instantiation
 * (fakecuda_hold) for as long as a test wants: meanwhile the program goes on, every run of the
 * step being built runs eagerly and unrecorded, and the step replays once the build is done.
 * A capture of the program's own waits for the build in hand; a module unloaded gives the
 * queued builds back; a build that fails there is made again on the program's thread; a child
 * of fork() runs eagerly; the process exits with a build in hand. Results are eager's at every
 * run.
 */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fakeapp.h"

#define N 64
#define OK(x) cr_assert_eq((x), CUDA_SUCCESS, "%s", #x)
#define INSTANTIATE "cuGraphInstantiateWithFlags"
static fk_t fk;

static void background(void)
{
    setenv("CGJIT_BUILD_BACKGROUND", "1", 1);
    setenv("CGJIT_WARMUP_RUNS", "0", 1);
    setenv("CGJIT_STEP", "off", 1);
    fk_open(&fk);
}

static cgj_stats_t stats(void)
{
    cgj_stats_t s;
    cr_assert_eq(cgj_stats(&s), CGJ_OK);
    return s;
}

static cgj_trace_info_t info(const char *anchor)
{
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info(anchor, &i), CGJ_OK);
    return i;
}

/* Wait (a hang guard of 60 s, no verdict on speed) until the fake holds a call, or until the
 * builder has finished `n` builds. */
static void wait_held(void)
{
    for (int k = 0; k < 120000 && !fk.held(); k++) usleep(500);
    cr_assert(fk.held(), "the builder never reached the graph's instantiation");
}
static void wait_built(uint64_t n)
{
    for (int k = 0; k < 120000 && stats().builds_background < n; k++) usleep(500);
    cr_assert_eq(stats().builds_background, n);
}

static void step(const char *anchor, CUdeviceptr x, float *ref)
{
    fk_axpb3_step(&fk, anchor, x, ref, N);
}

static CUdeviceptr fresh(float *ref)
{
    return fk_fresh_floats(&fk, ref, N);
}

TestSuite(tracer_builder, .init = background);

Test(tracer_builder, the_program_goes_on_while_its_step_is_built_and_replays_once_built)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    fk.hold(INSTANTIATE);
    step("s", x, ref); /* the draft */
    step("s", x, ref); /* agrees with it: handed to the builder */
    wait_held();
    uint64_t recorded = stats().ops_recorded;
    for (int r = 0; r < 5; r++) step("s", x, ref); /* the builder is held: these run eagerly */
    cgj_stats_t s = stats();
    cr_assert_eq(s.steps_building, 5);
    cr_assert_eq(s.ops_recorded, recorded, "runs while building record nothing");
    cr_assert_eq(s.steps_replayed, 0);
    cr_assert_eq(info("s").variants, 0);
    cr_assert_eq(info("s").building_runs, 5);
    cgj_trace_info_t sib;
    cr_assert_eq(cgj_trace_info("s#2", &sib), CGJ_ERR_NOT_FOUND, "no sibling anchor records the step again");
    fk.release();
    wait_built(1);
    for (int r = 0; r < 4; r++) step("s", x, ref);
    cgj_trace_info_t i = info("s");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY);
    cr_assert_eq(i.replays, 4);
    cr_assert_eq(i.runs, 11);
    cr_assert_eq(stats().traces_built, 1);
    /* the report says where those runs went */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cgj_report(f);
    fclose(f);
    cr_assert(strstr(text, "5 run(s) while cgjit's builder thread built it"), "%s", text);
    free(text);
}

/* The program's capture must not meet cgjit's instantiation (global mode forbids it to every
 * thread): its begin waits for the build in hand. */
typedef struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool go;
} flag_t;

static void *release_when_told(void *arg)
{
    flag_t *f = arg;
    pthread_mutex_lock(&f->m);
    while (!f->go) pthread_cond_wait(&f->c, &f->m);
    pthread_mutex_unlock(&f->m);
    fk.release();
    return NULL;
}

static pthread_t releaser(flag_t *f)
{
    pthread_mutex_init(&f->m, NULL);
    pthread_cond_init(&f->c, NULL);
    f->go = false;
    pthread_t th;
    pthread_create(&th, NULL, release_when_told, f);
    return th;
}

static void tell(flag_t *f)
{
    pthread_mutex_lock(&f->m);
    f->go = true;
    pthread_cond_signal(&f->c);
    pthread_mutex_unlock(&f->m);
}

Test(tracer_builder, a_capture_of_the_program_begins_after_the_build_in_hand)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    CUstream cs;
    OK(fk.stream_create(&cs, CU_STREAM_NON_BLOCKING));
    fk.hold(INSTANTIATE);
    step("c", x, ref);
    step("c", x, ref);
    wait_held();
    flag_t f;
    pthread_t th = releaser(&f);
    tell(&f); /* released now or while the begin waits: the build ends before the capture */
    OK(fk.begin_capture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(info("c").variants, 1, "the capture began before the build in hand ended");
    OK(fk_axpb_launch(&fk, cs, x, 2.0f, 0.0f, N, 1));
    OK(fk_capture_end_and_run(&fk, cs));
    for (int i = 0; i < N; i++) ref[i] *= 2.0f;
    pthread_join(th, NULL);
    wait_built(1);
    for (int r = 0; r < 3; r++) step("c", x, ref);
    cr_assert_eq(info("c").replays, 3);
}

Test(tracer_builder, an_unloaded_module_gives_queued_builds_back)
{
    float ra[N], rb[N];
    CUdeviceptr xa = fresh(ra), xb = fresh(rb);
    __typeof__(cuModuleUnload) *unload = NULL;
    OK(fk.gpa("cuModuleUnload", (void **)&unload, 13000, 0, NULL));
    fk.hold(INSTANTIATE);
    step("a", xa, ra);
    step("a", xa, ra); /* a's build, held in hand */
    wait_held();
    step("b", xb, rb);
    step("b", xb, rb); /* b's build, queued behind it */
    flag_t f;
    pthread_t th = releaser(&f);
    tell(&f);
    OK(unload((CUmodule)0x1)); /* waits for a's build; b's goes back to b */
    pthread_join(th, NULL);
    cr_assert_eq(info("a").variants, 1);
    cgj_trace_info_t b = info("b");
    cr_assert_eq(b.variants, 0);
    cr_assert_neq(b.state, CGJ_STATE_BLACKLISTED);
    cr_assert_eq(stats().builds_background, 1);
    step("b", xb, rb); /* records again */
    step("b", xb, rb); /* built again */
    wait_built(2);
    for (int r = 0; r < 3; r++) step("a", xa, ra), step("b", xb, rb);
    cr_assert_eq(info("a").replays, 3);
    cr_assert_eq(info("b").replays, 3);
}

Test(tracer_builder, a_build_that_fails_there_is_made_again_on_the_programs_thread)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    fk.fail_next(INSTANTIATE, CUDA_ERROR_OUT_OF_MEMORY);
    step("f", x, ref);
    step("f", x, ref); /* handed over; its instantiation fails */
    for (int k = 0; k < 120000 && fk.fail_pending(); k++) usleep(500);
    cgj_trace_info_t i;
    for (int k = 0; k < 120000; k++) { /* the failed build gives the anchor back */
        i = info("f");
        if (i.reason_code != 0) break;
        usleep(500);
    }
    cr_assert_neq(i.state, CGJ_STATE_BLACKLISTED, "a failure on the builder thread blacklists nothing");
    cr_assert_eq(i.variants, 0);
    step("f", x, ref); /* may still meet the anchor given back late: then eager */
    for (int r = 0; r < 8 && info("f").variants == 0; r++) step("f", x, ref); /* records, builds here */
    cr_assert_eq(stats().builds_background, 0);
    cr_assert_eq(stats().traces_built, 1);
    step("f", x, ref);
    cr_assert_geq(info("f").replays, 1);
}

Test(tracer_builder, a_child_of_fork_runs_eagerly_while_the_parent_builds)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    fk.hold(INSTANTIATE);
    step("k", x, ref);
    step("k", x, ref);
    wait_held();
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);                                     /* a hang ends as SIGALRM */
        for (int r = 0; r < 4; r++) step("k", x, ref); /* asserts the results: a failure exits non-zero */
        /* The parent's build in hand did not come along: nothing here waits for it. */
        __typeof__(cuModuleUnload) *unload = NULL;
        if (fk.gpa("cuModuleUnload", (void **)&unload, 13000, 0, NULL) != CUDA_SUCCESS) _exit(4);
        if (unload((CUmodule)0x1) != CUDA_SUCCESS) _exit(5);
        _exit(stats().steps_replayed == 0 ? 0 : 3);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child %s %d",
              WIFEXITED(status) ? "exited with" : "was killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    fk.release();
    wait_built(1);
    for (int r = 0; r < 3; r++) step("k", x, ref);
    cr_assert_eq(info("k").replays, 3);
}

/* The process exits right after a hand-over: the build in hand ends first (the driver is still
 * there), and the exit completes. */
Test(tracer_builder, the_process_exits_with_a_build_in_hand, .exit_code = 0)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    step("e", x, ref);
    step("e", x, ref);
    exit(0);
}

/* Builds stay on the program's thread where fusion is on (its pass times library calls). */
Test(tracer_builder, with_fusion_on_the_step_is_built_where_recorded)
{
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    float ref[N];
    CUdeviceptr x = fresh(ref);
    for (int r = 0; r < 3; r++) step("d", x, ref);
    cgj_trace_info_t i = info("d");
    cr_assert_eq(i.replays, 1, "%s, %llu runs, %llu replays: %s", cgj_state_name(i.state), (unsigned long long)i.runs,
                 (unsigned long long)i.replays, i.reason);
    cr_assert_eq(stats().builds_background, 0);
    cr_assert_eq(stats().steps_building, 0);
}

/* ---- kernels that reach mapped page-locked host memory ---- */

/* One step: a kernel on x, one that adds 1 to every float of the mapped buffer `flag` (which
 * the host reads right after the launch, with no CUDA call in between: its chunk must be
 * launched when the program launches it), another on x. */
static void mapped_step(const char *anchor, CUdeviceptr x, float *ref, float *flag, float want)
{
    cr_assert_eq(cgj_trace_begin(anchor), CGJ_OK);
    OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, (CUdeviceptr)(uintptr_t)flag, 1, N));
    cr_assert_eq(flag[0], want, "the kernel's write to mapped memory is not there: %g, not %g", flag[0], want);
    OK(fk_axpb_launch(&fk, NULL, x, 2.0f, 0.0f, N, 1));
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    for (int i = 0; i < N; i++) ref[i] = 2.0f * (0.5f * ref[i] + 1.0f);
    OK(fk.stream_sync(NULL));
}

static float *mapped_buffer(void)
{
    float *flag = NULL;
    OK(fk.host_alloc((void **)&flag, N * sizeof(float), CU_MEMHOSTALLOC_DEVICEMAP));
    memset(flag, 0, N * sizeof(float));
    return flag;
}

static void expect_x(CUdeviceptr x, const float *ref)
{
    float h[N];
    OK(fk.dtoh(h, x, sizeof h));
    for (int i = 0; i < N; i++) cr_assert_eq(h[i], ref[i], "x[%d] = %g, eager gives %g", i, h[i], ref[i]);
}

/* Which kernels reach mapped memory is asked on the builder thread: the replays launch that
 * kernel's chunk when the program launches it. */
Test(tracer_builder, a_kernel_on_mapped_memory_built_there_runs_when_the_program_launches_it)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    float *flag = mapped_buffer();
    for (int s = 0; s < 2; s++) mapped_step("mapped", x, ref, flag, (float)(s + 1));
    wait_built(1);
    for (int s = 2; s < 12; s++) mapped_step("mapped", x, ref, flag, (float)(s + 1));
    cr_assert_geq(info("mapped").replays, 9);
    char *buf = fk_report_text();
    cr_assert(buf && strstr(buf, "(a kernel that reaches mapped pinned host memory"),
              "no chunk ends at the kernel:\n%s", buf ? buf : "");
    free(buf);
    expect_x(x, ref);
    OK(fk.free_host(flag));
}

/* Page-locked memory freed after the run ended and before the builder asked about it: the
 * answers may not be the run's, the build gives up (BUILD_HOST_CHANGED), blacklists nothing,
 * and the step is built again on the program's thread. */
Test(tracer_builder, page_locked_memory_freed_before_the_builder_asks_gives_the_build_up)
{
    float ref[N];
    CUdeviceptr x = fresh(ref);
    float *flag = mapped_buffer();
    fk.hold("cuCtxSetCurrent"); /* the builder's first call: before it asks anything */
    for (int s = 0; s < 2; s++) mapped_step("freed", x, ref, flag, (float)(s + 1));
    wait_held();
    OK(fk.free_host(flag));
    flag = mapped_buffer();
    fk.release();
    cgj_trace_info_t i;
    for (int k = 0; k < 120000; k++) { /* the build gives the anchor back */
        i = info("freed");
        if (i.reason_code != 0) break;
        usleep(500);
    }
    cr_assert_str_eq(cgj_reason_name(i.reason_code), "BUILD_HOST_CHANGED", "%s", i.reason);
    cr_assert_neq(i.state, CGJ_STATE_BLACKLISTED);
    for (int s = 0; s < 12; s++) mapped_step("freed", x, ref, flag, (float)(s + 1));
    cr_assert_eq(stats().builds_background, 0);
    cr_assert_geq(stats().traces_built, 1);
    cr_assert_geq(info("freed").replays, 1);
    expect_x(x, ref);
    OK(fk.free_host(flag));
}
