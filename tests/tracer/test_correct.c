/*
 * test_correct.c — the invariant on patterns of programs nobody here wrote: a device pointer
 * passed as a "host" source, a thread that exits mid-step, a cross-thread event wait, fork()
 * while another thread replays, errors while absorbed work is re-issued, page-locked host memory
 * freed and allocated again at its address between replays. Each step runs eagerly and traced
 * from the same data and must leave memory bitwise equal.
 */
#include "replay_common.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(tracer_correct, .init = setup);

/* ---- a device pointer as the source of a host-to-device copy (unified addressing) ---- */

static void device_as_host_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s + 1, N)); /* absorbed in replay: not run yet */
    OK(fk.htod(b[1], (const void *)(uintptr_t)b[0], N * sizeof(float)));
    OK(fk.htod_async(b[2], (const void *)(uintptr_t)b[1], N * sizeof(float), NULL));
    OK(fk_axpb_launch(&fk, NULL, b[2], 2.0f, 1.0f, N, 1));
}

Test(tracer_correct, device_pointer_as_host_source_is_a_device_copy)
{
    run_scenario(&(scenario_t){.name = "dev_as_host",
                               .fn = device_as_host_step,
                               .steps = 12,
                               .nbufs = 3,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(10), .side_exits = IS(0)},
                               .stats = {.bytes_staged = IS(0)}});
}

/* ---- a kernel that writes mapped pinned memory, read by the host with no CUDA call ---- */

/* The host spins on a flag a kernel sets in mapped memory (here: reads it right after the
 * launch, which the fake driver runs at once): a replay must launch that kernel when the program
 * does, not at the step's end, or the host would wait forever for work cgjit holds back. */
Test(tracer_correct, a_kernel_on_mapped_memory_runs_when_the_program_launches_it)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3);
    float *flag;
    OK(fk.host_alloc((void **)&flag, N * sizeof(float), CU_MEMHOSTALLOC_DEVICEMAP));
    memset(flag, 0, N * sizeof(float));
    for (int s = 0; s < 12; s++) {
        cr_assert_eq(cgj_trace_begin("host_visible"), CGJ_OK);
        OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 1.0f, N, 1));
        OK(fk_addk_launch(&fk, NULL, (CUdeviceptr)(uintptr_t)flag, 1, N));
        cr_assert_eq(flag[0], (float)(s + 1), "step %d: the kernel's write to mapped memory is not there", s);
        OK(fk_axpb_launch(&fk, NULL, x, 2.0f, 0.0f, N, 1));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk.stream_sync(NULL));
    }
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("host_visible", &i), CGJ_OK);
    cr_assert_eq(i.replays, 10, "replays: %llu", (unsigned long long)i.replays);
    char *buf = fk_report_text();
    cr_assert(buf && strstr(buf, "ends at op 2: cuLaunchKernel (a kernel that reaches mapped pinned host memory"),
              "the chunk does not end at the kernel:\n%s", buf ? buf : "");
    free(buf);
    OK(fk.free_host(flag));
}

/* ---- another thread's stream waits on an event a replayed step recorded ---- */

typedef struct handoff {
    pthread_barrier_t recorded, consumed;
    CUstream consumer_stream;
    CUevent ev;
    CUdeviceptr src, dst;
    int steps;
} handoff_t;

static void *consumer(void *arg)
{
    handoff_t *h = arg;
    for (int s = 0; s < 2 * h->steps; s++) { /* each step runs eagerly, then traced */
        pthread_barrier_wait(&h->recorded);
        OK(fk.stream_wait(h->consumer_stream, h->ev, 0));
        OK(fk.dtod_async(h->dst, h->src, N * sizeof(float), h->consumer_stream));
        OK(fk.stream_sync(h->consumer_stream));
        pthread_barrier_wait(&h->consumed);
    }
    return NULL;
}

/* The producer's step: a kernel on its stream, an event recorded after it; the consumer copies
 * what the kernel wrote once its stream has waited on the event, while the step is still open. */
static void produce(handoff_t *h, CUstream ps, int s, const char *anchor)
{
    if (anchor) cr_assert_eq(cgj_trace_begin(anchor), CGJ_OK);
    OK(fk_addk_launch(&fk, ps, h->src, s + 1, N));
    OK(fk.event_record(h->ev, ps));
    pthread_barrier_wait(&h->recorded);
    pthread_barrier_wait(&h->consumed);
    if (anchor) cr_assert_eq(cgj_trace_end(), CGJ_OK);
}

Test(tracer_correct, cross_thread_event_wait_sees_the_absorbed_work)
{
    handoff_t h = {.steps = 10};
    CUstream ps;
    OK(fk.stream_create(&ps, CU_STREAM_NON_BLOCKING));
    OK(fk.stream_create(&h.consumer_stream, CU_STREAM_NON_BLOCKING));
    OK(fk.event_create(&h.ev, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr src[2] = {fk_alloc_floats(&fk, N, 3), fk_alloc_floats(&fk, N, 3)};
    CUdeviceptr dst[2] = {fk_alloc_floats(&fk, N, 4), fk_alloc_floats(&fk, N, 4)};
    pthread_barrier_init(&h.recorded, NULL, 2);
    pthread_barrier_init(&h.consumed, NULL, 2);
    pthread_t th;
    for (int s = 0; s < h.steps; s++) {
        if (s == 0) pthread_create(&th, NULL, consumer, &h);
        for (int traced = 0; traced < 2; traced++) {
            h.src = src[traced], h.dst = dst[traced];
            produce(&h, ps, s, traced ? "producer" : NULL);
        }
        float e[N], t[N];
        OK(fk.dtoh(e, dst[0], sizeof e));
        OK(fk.dtoh(t, dst[1], sizeof t));
        cr_assert(memcmp(e, t, sizeof e) == 0, "step %d: the consumer read stale data", s);
    }
    pthread_join(th, NULL);
}

/* ---- a thread that exits in the middle of its step ---- */

static void *exit_mid_step(void *arg)
{
    CUdeviceptr x = *(const CUdeviceptr *)arg;
    cr_assert_eq(cgj_trace_begin("exits_mid_step"), CGJ_OK);
    OK(fk_addk_launch(&fk, NULL, x, 1, N));
    OK(fk_axpb_launch(&fk, NULL, x, 1.0f, 0.5f, N, 1));
    return NULL; /* no cgj_trace_end, no synchronization */
}

Test(tracer_correct, thread_exit_issues_the_absorbed_work)
{
    CUdeviceptr e = fk_alloc_floats(&fk, N, 5), t = fk_alloc_floats(&fk, N, 5);
    for (int i = 0; i < 8; i++) {
        OK(fk_addk_launch(&fk, NULL, e, 1, N));
        OK(fk_axpb_launch(&fk, NULL, e, 1.0f, 0.5f, N, 1));
        pthread_t th;
        pthread_create(&th, NULL, exit_mid_step, &t);
        pthread_join(th, NULL);
    }
    OK(fk.ctx_sync());
    float he[N], ht[N];
    OK(fk.dtoh(he, e, sizeof he));
    OK(fk.dtoh(ht, t, sizeof ht));
    cr_assert(memcmp(he, ht, sizeof he) == 0, "a thread's absorbed work was lost at its exit");
    cgj_trace_info_t i = info_of("exits_mid_step");
    cr_assert_eq(i.runs, 8);
    cr_assert_geq(i.replays, 5, "the anchor is released at each exit and replays: %s", i.reason);
}

/* ---- fork() while another thread is inside a replayed step with absorbed work ---- */

typedef struct replayer {
    pthread_barrier_t absorbed, forked;
    CUdeviceptr x;
    int steps;
} replayer_t;

static void *replay_loop(void *arg)
{
    replayer_t *r = arg;
    for (int s = 0; s < r->steps; s++) {
        cr_assert_eq(cgj_trace_begin("forked"), CGJ_OK);
        OK(fk_addk_launch(&fk, NULL, r->x, 1, N)); /* absorbed from the third step on */
        pthread_barrier_wait(&r->absorbed);
        pthread_barrier_wait(&r->forked);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    return NULL;
}

/* The child synchronizes the context, steps on its own and exits: it must neither hang on the
 * parent thread's locks nor issue that thread's absorbed work. */
static void child(CUdeviceptr x)
{
    alarm(10); /* a hang ends as SIGALRM */
    fakecuda_counts_t before = counts_now();
    if (fk.ctx_sync() != CUDA_SUCCESS) _exit(3);
    fakecuda_counts_t after = counts_now();
    if (after.eager_launches != before.eager_launches) _exit(4); /* re-issued the parent's work */
    if (cgj_trace_begin("in_child") != CGJ_OK) _exit(5);
    if (fk_addk_launch(&fk, NULL, x, 1, N) != CUDA_SUCCESS) _exit(6);
    if (cgj_trace_end() != CGJ_OK || fk.ctx_sync() != CUDA_SUCCESS) _exit(7);
    _exit(0);
}

Test(tracer_correct, fork_during_a_replay_never_hangs)
{
    replayer_t r = {.x = fk_alloc_floats(&fk, N, 9), .steps = 12};
    pthread_barrier_init(&r.absorbed, NULL, 2);
    pthread_barrier_init(&r.forked, NULL, 2);
    pthread_t th;
    pthread_create(&th, NULL, replay_loop, &r);
    for (int s = 0; s < r.steps; s++) {
        pthread_barrier_wait(&r.absorbed);
        pid_t pid = fork();
        if (pid == 0) child(r.x);
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "step %d: the child %s %d", s,
                  WIFEXITED(status) ? "exited with" : "was killed by signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        pthread_barrier_wait(&r.forked);
    }
    pthread_join(th, NULL);
    OK(fk.ctx_sync());
    float h[N], want[N];
    OK(fk.dtoh(h, r.x, sizeof h));
    CUdeviceptr e = fk_alloc_floats(&fk, N, 9);
    for (int s = 0; s < r.steps; s++) OK(fk_addk_launch(&fk, NULL, e, 1, N));
    OK(fk.dtoh(want, e, sizeof want));
    cr_assert(memcmp(h, want, sizeof h) == 0, "the parent's steps lost work");
    cr_assert_geq(info_of("forked").replays, 8);
}

/* ---- a launcher that forks a worker before it initialized CUDA ---- */

/* A worker forked from a parent that never initialized CUDA (a launcher starting one process per
 * GPU, as torchrun or mpirun do) starts CUDA afresh: its steps are traced and replayed, and it
 * writes its own report. Its exit status says what it saw. */
static void fresh_worker(CUdeviceptr x)
{
    alarm(10);
    float want[N];
    if (fk.dtoh(want, x, sizeof want) != CUDA_SUCCESS) _exit(2);
    for (int s = 0; s < 6; s++) {
        if (cgj_trace_begin("worker") != CGJ_OK) _exit(3);
        if (fk_addk_launch(&fk, NULL, x, 1, N) != CUDA_SUCCESS) _exit(4);
        if (cgj_trace_end() != CGJ_OK) _exit(5);
    }
    float h[N];
    if (fk.ctx_sync() != CUDA_SUCCESS || fk.dtoh(h, x, sizeof h) != CUDA_SUCCESS) _exit(6);
    for (int i = 0; i < N; i++) {
        for (int s = 0; s < 6; s++) want[i] += 1.0f; /* as the kernel adds, step by step */
        if (h[i] != want[i]) _exit(7);
    }
    cgj_trace_info_t i = {.size = sizeof i};
    _exit(cgj_trace_info_read("worker", &i) == CGJ_OK && i.replays >= 3 ? 0 : 9); /* 9: not replayed */
}

static int fork_worker(CUdeviceptr x, bool parent_without_cuda)
{
    /* cgjit asks the driver at fork() whether CUDA was initialized; the fake always says yes
     * unless told otherwise once. */
    if (parent_without_cuda) fk.fail_next("cuDeviceGetCount", CUDA_ERROR_NOT_INITIALIZED);
    pid_t pid = fork();
    if (pid == 0) fresh_worker(x);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the worker was killed by signal %d", WTERMSIG(status));
    return WEXITSTATUS(status);
}

Test(tracer_correct, a_worker_forked_before_cuda_started_is_traced)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 9);
    int st = fork_worker(x, true);
    cr_assert_eq(st, 0, "the fresh worker's steps were not replayed, or were wrong (exit status %d)", st);
    /* A child of a parent that used CUDA runs every call through: its steps never replay. */
    st = fork_worker(x, false);
    cr_assert_eq(st, 9, "the worker's exit status: %d", st);
}

/* ---- a failure while absorbed work is re-issued at a side exit ---- */

static const char *g_fail_api; /* the driver function failed once in step 6 of each half */
static CUresult g_results[4];  /* what the program got from each call of the step */

static void reissue_step(int s, CUdeviceptr *b, void *ctx)
{
    static float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)(s * N + i);
    if (s == 6) fk.fail_next(g_fail_api, CUDA_ERROR_LAUNCH_FAILED);
    g_results[0] = fk_addk_launch(&fk, NULL, b[0], 3, N);
    g_results[1] = fk.htod_async(b[1], host, sizeof host, NULL);
    g_results[2] = fk.dtod_async(b[2], b[1], sizeof host, NULL);
    g_results[3] = axpb_or_other(NULL, b[2], 0.5f, 1.0f, N, s == 6); /* differs at 6 */
    OK(fk.ctx_sync());
}

/* Each half of step 6: exactly one program call returns the injected error. */
static void one_error_in_step_six(const scenario_t *sc, int s, bufs_t *b)
{
    int errors = 0;
    for (int i = 0; i < 4; i++) errors += g_results[i] != CUDA_SUCCESS;
    cr_assert_eq(errors, s == 6 ? 1 : 0, "step %d (%s failing): %d calls failed", s, g_fail_api, errors);
    for (int i = 0; i < 4; i++)
        cr_assert(g_results[i] == CUDA_SUCCESS || g_results[i] == CUDA_ERROR_LAUNCH_FAILED, "op %d got %d", i,
                  (int)g_results[i]);
}

/* step_both runs the eager half first and checks nothing of its results: check both halves. */
static void reissue_step_checked(int s, CUdeviceptr *b, void *ctx)
{
    reissue_step(s, b, ctx);
    one_error_in_step_six(NULL, s, NULL);
}

static void reissue_failure(const char *api)
{
    g_fail_api = api;
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = api,
                                                    .fn = reissue_step_checked,
                                                    .steps = 12,
                                                    .nbufs = 3,
                                                    .info = {.state = IS(CGJ_STATE_BLACKLISTED)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_BLACKLIST_REISSUE, "%s: %s", api, i.reason);
}

Test(tracer_correct, reissue_failure_of_a_kernel_is_returned)
{
    reissue_failure("cuLaunchKernel");
}
Test(tracer_correct, reissue_failure_of_a_staged_copy_is_returned)
{
    reissue_failure("cuMemcpyHtoDAsync_v2");
}
Test(tracer_correct, reissue_failure_of_a_device_copy_is_returned)
{
    reissue_failure("cuMemcpyDtoDAsync_v2");
}

/* ---- contexts: making another context current inside a step aborts it; the same is fine ---- */

static void context_step(int s, CUdeviceptr *b, void *ctx)
{
    CUcontext cur = NULL;
    __typeof__(cuCtxGetCurrent) *get_current = NULL;
    OK(fk.gpa("cuCtxGetCurrent", (void **)&get_current, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    OK(get_current(&cur));
    OK(fk_addk_launch(&fk, NULL, b[0], 2, N));
    OK(cuCtxSetCurrent(cur));                /* the current one again: nothing changes */
    if (s >= 6) (void)cuCtxSetCurrent(NULL); /* another (none): the step cannot go on traced */
    if (s >= 6) OK(cuCtxSetCurrent(cur));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
}

Test(tracer_correct, a_context_switch_inside_a_step_aborts_it)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "ctx_switch",
                                                    .fn = context_step,
                                                    .steps = 12,
                                                    .nbufs = 1,
                                                    .info = {.replays = IS(4)},
                                                    .stats = {.aborts = AT_LEAST(6)}});
    cr_assert_eq(i.reason_code, CGJ_REASON_ABORT_UNTRACEABLE, "%s", i.reason);
}

/* ---- another thread launches on the stream where a replay holds absorbed work ---- */

typedef struct overtake {
    pthread_barrier_t absorbed, launched;
    CUstream s;
    CUdeviceptr x, y;
    int steps;
} overtake_t;

/* Thread B: after A absorbed its kernel on s, B copies x to y on s (as PyTorch's autograd
 * thread launches the backward pass on the stream of the forward pass). */
static void *launch_after(void *arg)
{
    overtake_t *o = arg;
    for (int s = 0; s < o->steps; s++) {
        pthread_barrier_wait(&o->absorbed);
        OK(fk.dtod_async(o->y, o->x, N * sizeof(float), o->s));
        OK(fk_addk_launch(&fk, o->s, o->y, 1, N));
        pthread_barrier_wait(&o->launched);
    }
    return NULL;
}

Test(tracer_correct, another_threads_launch_never_overtakes_absorbed_work)
{
    overtake_t o = {.x = fk_alloc_floats(&fk, N, 6), .y = fk_alloc_floats(&fk, N, 7), .steps = 12};
    OK(fk.stream_create(&o.s, 0));
    pthread_barrier_init(&o.absorbed, NULL, 2);
    pthread_barrier_init(&o.launched, NULL, 2);
    pthread_t th;
    pthread_create(&th, NULL, launch_after, &o);
    float ref[N], got[N];
    OK(fk.dtoh(ref, o.x, sizeof ref));
    for (int s = 0; s < o.steps; s++) {
        cr_assert_eq(cgj_trace_begin("overtaken"), CGJ_OK);
        OK(fk_axpb_launch(&fk, o.s, o.x, 0.5f, (float)s, N, 1)); /* absorbed from the third step */
        pthread_barrier_wait(&o.absorbed);
        pthread_barrier_wait(&o.launched);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk.stream_sync(o.s));
        for (int i = 0; i < N; i++) ref[i] = 0.5f * ref[i] + (float)s; /* what x holds now */
        OK(fk.dtoh(got, o.y, sizeof got));
        for (int i = 0; i < N; i++)
            cr_assert_eq(fbits(got[i]), fbits(ref[i] + 1.0f), "step %d: B's copy ran before A's kernel", s);
    }
    pthread_join(th, NULL);
}

/* ---- a trace whose pool memory cannot be had is tried again later, not given up ---- */

static void temp_step(int s, CUdeviceptr *b, void *ctx)
{
    CUdeviceptr tmp;
    if (g_traced && s == 1) fk.fail_next("cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY); /* at the build */
    OK(fk.mem_alloc(&tmp, N * sizeof(float)));
    OK(fk.dtod_async(tmp, b[0], N * sizeof(float), NULL));
    OK(fk_axpb_launch(&fk, NULL, tmp, 0.5f, 1.0f, N, 1));
    OK(fk.dtod_async(b[0], tmp, N * sizeof(float), NULL));
    OK(fk.mem_free(tmp));
}

Test(tracer_correct, no_pool_memory_is_retried_later)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "pool_retry",
                                                    .fn = temp_step,
                                                    .steps = 60,
                                                    .nbufs = 1,
                                                    .info = {.state = IS(CGJ_STATE_REPLAY), .replays = AT_LEAST(20)},
                                                    .stats = {.build_failures = IS(1)}});
    cr_assert_eq(i.allocations, 1);
}

/* ---- a soak: 10^5 replayed steps keep host and pool memory flat ---- */

static long resident_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert(f);
    cr_assert_eq(fscanf(f, "%ld %ld", &pages, &rss), 2);
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

Test(tracer_correct, soak_keeps_memory_flat, .timeout = 120)
{
    static float host[N];
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3);
    long rss_at_10k = 0;
    uint64_t pool_at_10k = 0;
    for (int s = 0; s < 100000; s++) {
        cr_assert_eq(cgj_trace_begin("soak"), CGJ_OK);
        CUdeviceptr tmp;
        for (int i = 0; i < 4; i++) host[i] = (float)(s + i);
        OK(fk.mem_alloc(&tmp, N * sizeof(float)));
        OK(fk.htod_async(tmp, host, sizeof host, NULL));
        OK(fk_axpb_launch(&fk, NULL, x, 0.5f, (float)(s % 5), N, 1));
        OK(fk.mem_free(tmp));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        if (s == 10000) rss_at_10k = resident_kib(), pool_at_10k = stats_now().pool_bytes;
    }
    OK(fk.ctx_sync());
    long grown = resident_kib() - rss_at_10k;
#ifdef __SANITIZE_ADDRESS__
    (void)grown; /* AddressSanitizer keeps freed memory in quarantine: resident size says nothing */
#else
    cr_assert_leq(grown, 1024, "resident memory grew by %ld KiB over 90000 steps", grown);
#endif
    cr_assert_eq(stats_now().pool_bytes, pool_at_10k, "the pool grew");
    cr_assert_geq(info_of("soak").replays, 99990);
}

/* ---- many short-lived anchors: the pool stays within CGJIT_POOL_MAX_GB ---- */

/* The configuration is read on the first call: the budget is set before the fake is opened. */
static void budget_setup(void)
{
    setenv("CGJIT_POOL_MAX_GB", "1", 1);
    fk_open(&fk);
}
TestSuite(tracer_budget, .init = budget_setup);

Test(tracer_budget, cold_anchors_give_their_memory_back, .timeout = 120)
{
    run_short_anchors(600);
    cgj_stats_t st = stats_now();
    cr_assert_leq(st.pool_bytes, (uint64_t)1 << 30, "the pool maps %llu bytes", (unsigned long long)st.pool_bytes);
    cr_assert_gt(st.anchors_evicted, 50);
    cr_assert_geq(st.steps_replayed, 600 * 2, "every anchor replayed, evicted ones included");
    cr_assert_eq(info_of("short0").state, CGJ_STATE_WARMUP, "the first anchor, the coldest, was evicted");
    cr_assert_eq(info_of("short599").state, CGJ_STATE_REPLAY);
}

/* ---- an asynchronous copy from pinned memory reads its source when it runs ---- */

static float *g_pinned[2]; /* the eager half's and the traced half's */
static int g_pinned_step[2];

static void fill_pinned(void *arg)
{
    int half = (int)(intptr_t)arg;
    for (int i = 0; i < N; i++)
        g_pinned[half][i] = (float)(g_pinned_step[half] * 100 + i); /* when the stream gets here */
}

static void pinned_step(int s, CUdeviceptr *b, void *ctx)
{
    int half = g_traced;
    g_pinned_step[half] = s;
    OK(fk.host_func(NULL, fill_pinned, (void *)(intptr_t)half));
    OK(fk.htod_async(b[0], g_pinned[half], N * sizeof(float), NULL)); /* reads what fill_pinned wrote */
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, 1.0f, N, 1));
}

Test(tracer_correct, async_copy_from_pinned_memory_reads_it_when_it_runs)
{
    for (int h = 0; h < 2; h++) OK(fk.host_alloc((void **)&g_pinned[h], N * sizeof(float), 0));
    run_scenario(&(scenario_t){.name = "pinned_src",
                               .fn = pinned_step,
                               .steps = 10,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(8)},
                               .stats = {.bytes_staged = IS(0)}});
    for (int h = 0; h < 2; h++) OK(fk.free_host(g_pinned[h]));
}

/* ---- 50 000 distinct anchors: each is found by its name in the anchor map ---- */

Test(tracer_correct, many_distinct_anchors)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 2);
    char name[32];
    for (int a = 0; a < 50000; a++) {
        snprintf(name, sizeof name, "distinct%d", a);
        cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
        OK(fk_addk_launch(&fk, NULL, x, 1, N));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    cr_assert_eq(info_of("distinct0").runs, 1);
    cr_assert_eq(info_of("distinct49999").runs, 1);
    cr_assert_eq(stats_now().steps, 50000);
    float h[N];
    OK(fk.dtoh(h, x, sizeof h));
    CUdeviceptr e = fk_alloc_floats(&fk, N, 2);
    float he[N];
    OK(fk.dtoh(he, e, sizeof he));
    for (int a = 0; a < 50000; a++)
        for (int i = 0; i < N; i++) he[i] += 1.0f; /* as the kernel adds, one step at a time */
    for (int i = 0; i < N; i++) cr_assert_eq(fbits(h[i]), fbits(he[i]), "element %d", i);
}

/* ---- page-locked host memory freed and allocated again between replays ----
 *
 * An executable graph whose copy node names page-locked host memory refers to that host
 * ALLOCATION: the real driver crashes in cuGraphLaunch once it is freed (or unregistered), even
 * when a new allocation came back at the very same address, unless the node was set again since
 * (the fake fails the launch with CUDA_ERROR_ILLEGAL_ADDRESS instead). The fake hands a freed
 * pinned buffer back to the next allocation of its size, as the real driver often does, so each
 * half of every step below gets the same address as in the step before, as another allocation. */

typedef enum {
    PIN_FREE_IN_STEP,   /* cuMemHostAlloc, copy, sync, cuMemFreeHost, all in the step */
    PIN_FREE_NEXT_STEP, /* the step frees the previous step's buffer first: live when the graph is built */
    PIN_REREGISTER,     /* the step unregisters its host buffer and registers it again */
} pin_mode_t;

typedef struct fresh_pin {
    pin_mode_t mode;
    CUstream stream; /* NULL: the legacy stream, synchronized with cuCtxSynchronize */
    float *held[2];  /* the eager half's and the traced half's buffer */
    float *first[2]; /* their addresses in step 0 */
} fresh_pin_t;

static float g_registered[2][N] __attribute__((aligned(4096)));
static __typeof__(cuMemHostRegister) *g_host_register;
static __typeof__(cuMemHostUnregister) *g_host_unregister;

static void fresh_pin_step(int s, CUdeviceptr *b, void *ctx)
{
    fresh_pin_t *f = ctx;
    int half = g_traced;
    float *p = f->held[half];
    if (f->mode == PIN_REREGISTER) {
        if (p) OK(g_host_unregister(p));
        p = g_registered[half];
        OK(g_host_register(p, sizeof g_registered[half], 0));
    } else {
        if (p) OK(fk.free_host(p)); /* PIN_FREE_NEXT_STEP: the previous step's */
        OK(fk.host_alloc((void **)&p, N * sizeof(float), 0));
    }
    if (s == 0) f->first[half] = p;
    cr_assert_eq(p, f->first[half], "step %d: the address did not come back", s);
    for (int i = 0; i < N; i++) p[i] = (float)(s * 100 + i);
    OK(fk.htod_async(b[0], p, N * sizeof(float), f->stream));
    OK(fk_axpb_launch(&fk, f->stream, b[0], 2.0f, 1.0f, N, 1));
    OK(fk_copyscale_launch(&fk, f->stream, b[1], b[0], 0.5f, N));
    OK(f->stream ? fk.stream_sync(f->stream) : fk.ctx_sync());
    if (f->mode == PIN_FREE_IN_STEP) {
        OK(fk.free_host(p));
        p = NULL;
    }
    f->held[half] = p;
}

static void fresh_pin(const char *name, pin_mode_t mode, bool on_stream)
{
    fresh_pin_t f = {.mode = mode};
    if (on_stream) OK(fk.stream_create(&f.stream, CU_STREAM_NON_BLOCKING));
    if (mode == PIN_REREGISTER) {
        OK(fk.gpa("cuMemHostRegister", (void **)&g_host_register, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
        OK(fk.gpa("cuMemHostUnregister", (void **)&g_host_unregister, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    }
    enum { STEPS = 12 };
    run_scenario(&(scenario_t){.name = name,
                               .fn = fresh_pin_step,
                               .steps = STEPS,
                               .nbufs = 2,
                               .ctx = &f,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(STEPS - 2), .side_exits = IS(0)}});
    for (int h = 0; h < 2; h++)
        if (f.held[h]) OK(mode == PIN_REREGISTER ? g_host_unregister(f.held[h]) : fk.free_host(f.held[h]));
}

Test(tracer_correct, fresh_pinned_buffer_each_step_replays)
{
    fresh_pin("pin_fresh", PIN_FREE_IN_STEP, false);
    fresh_pin("pin_fresh_stream", PIN_FREE_IN_STEP, true);
}

Test(tracer_correct, pinned_buffer_freed_and_allocated_again_at_its_address_replays)
{
    fresh_pin("pin_next", PIN_FREE_NEXT_STEP, false);
    fresh_pin("pin_next_stream", PIN_FREE_NEXT_STEP, true);
}

Test(tracer_correct, host_memory_registered_again_each_step_replays)
{
    fresh_pin("pin_reregister", PIN_REREGISTER, false);
    fresh_pin("pin_reregister_stream", PIN_REREGISTER, true);
}

/* The fake's rule itself, outside any step (what the tests above rely on to see a stale node). */
Test(tracer_correct, fake_driver_refuses_a_graph_whose_pinned_memory_is_gone)
{
    __typeof__(cuGraphExecMemcpyNodeSetParams) *exec_memcpy_set = NULL;
    __typeof__(cuGraphGetNodes) *get_nodes = NULL;
    __typeof__(cuGraphMemcpyNodeGetParams) *memcpy_get = NULL;
    OK(fk.gpa("cuGraphExecMemcpyNodeSetParams", (void **)&exec_memcpy_set, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    OK(fk.gpa("cuGraphGetNodes", (void **)&get_nodes, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    OK(fk.gpa("cuGraphMemcpyNodeGetParams", (void **)&memcpy_get, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    CUdeviceptr d = fk_alloc_floats(&fk, N, 1);
    float *pin, *again, back[N];
    OK(fk.host_alloc((void **)&pin, N * sizeof(float), 0));
    for (int i = 0; i < N; i++) pin[i] = (float)i;
    CUstream st;
    OK(fk.stream_create(&st, CU_STREAM_NON_BLOCKING));
    CUgraph g;
    CUgraphExec x;
    OK(fk.begin_capture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(fk.htod_async(d, pin, N * sizeof(float), st));
    OK(fk.end_capture(st, &g));
    OK(fk.graph_instantiate(&x, g, 0));
    OK(fk.graph_launch(x, st));

    OK(fk.free_host(pin));
    OK(fk.host_alloc((void **)&again, N * sizeof(float), 0));
    cr_assert_eq(again, pin, "a freed pinned buffer comes back at its address");
    for (int i = 0; i < N; i++) again[i] = (float)(2 * i);
    OK(fk.htod_async(d, again, N * sizeof(float), st)); /* eager copies are unaffected */
    for (int i = 0; i < N; i++) again[i] = (float)(3 * i);
    cr_assert_eq(fk.graph_launch(x, st), CUDA_ERROR_ILLEGAL_ADDRESS, "the exec names the freed allocation");
    OK(fk.dtoh(back, d, sizeof back));
    for (int i = 0; i < N; i++) cr_assert_eq(back[i], (float)(2 * i), "the refused launch ran nothing");

    CUgraphNode node;
    size_t n = 1;
    OK(get_nodes(g, &node, &n));
    CUDA_MEMCPY3D p;
    OK(memcpy_get(node, &p));
    OK(exec_memcpy_set(x, node, &p, NULL)); /* the same pointer, set again: the new allocation */
    OK(fk.graph_launch(x, st));
    OK(fk.dtoh(back, d, sizeof back));
    for (int i = 0; i < N; i++) cr_assert_eq(back[i], (float)(3 * i));

    /* Instantiated while the new allocation lives: fine until it is freed. */
    CUgraphExec y;
    OK(fk.graph_instantiate(&y, g, 0));
    OK(fk.graph_launch(y, st));
    OK(fk.free_host(again));
    cr_assert_eq(fk.graph_launch(y, st), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_assert_eq(fk.graph_launch(x, st), CUDA_ERROR_ILLEGAL_ADDRESS);
    OK(fk.graph_exec_destroy(x));
    OK(fk.graph_exec_destroy(y));
    OK(fk.graph_destroy(g));
    OK(fk.stream_destroy(st));
}

/* ---- segments too small for a graph (CGJIT_GRAPH_MIN_OPS) ---- */

static void small_setup(void)
{
    setenv("CGJIT_GRAPH_MIN_OPS", "3", 1);
    setup();
}

TestSuite(tracer_small, .init = small_setup);

/* Two kernels whose grid and scalar change every step, a readback between them: each segment
 * has one op, issued eagerly where its graph would be launched; every value goes through (an
 * eager segment takes any value without a side exit), and no graph is built or launched. */
static void small_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[N];
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)s, N, 1 + (unsigned)(s % 3)));
    OK(fk.dtoh(h, b[0], sizeof h));
    OK(fk_axpb_launch(&fk, NULL, b[1], 2.0f, h[s % N], N, 1));
}

/* A parameter both recorded runs happened to share, which then changes, in a segment issued
 * eagerly (no graph node to patch: the op is issued with the run's values): the slot becomes
 * varying, without a side exit, as it does in a graph. */
static void small_late_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_axpb_launch(&fk, NULL, b[0], s < 20 ? 0.5f : 0.5f + 0.001f * (float)s, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[1], s < 30 ? 2 : s, N));
}

Test(tracer_small, a_constant_that_starts_varying_in_an_eager_segment_is_promoted)
{
    run_scenario(&(scenario_t){.name = "small_late",
                               .fn = small_late_step,
                               .steps = 60,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY),
                                        .replays = IS(58),
                                        .side_exits = IS(0),
                                        .variants = IS(1),
                                        .varying_slots = IS(2)},
                               .fake = {.graph_launches = IS(0)},
                               .stats = {.slots_promoted = IS(2)}});
}

Test(tracer_small, small_segments_are_issued_eagerly)
{
    run_scenario(&(scenario_t){
        .name = "small",
        .fn = small_step,
        .steps = 20,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .side_exits = IS(0), .segments = IS(2)},
        .fake = {.graph_launches = IS(0), .captures = IS(0)}});
}

/* The ops of a segment too small for a graph run when the program makes them, as eager runs
 * them: holding them back to the segment's end would only start them later. */
Test(tracer_small, ops_of_a_small_segment_run_when_the_program_makes_them)
{
    CUdeviceptr e = fk_alloc_floats(&fk, N, 4), t = fk_alloc_floats(&fk, N, 4);
    for (int s = 0; s < 30; s++) {
        float h[N];
        for (int pass = 0; pass < 2; pass++) {
            CUdeviceptr x = pass ? t : e;
            if (pass) cr_assert_eq(cgj_trace_begin("runs_now"), CGJ_OK);
            fakecuda_counts_t c0, c1;
            fk.get_counts(&c0);
            OK(fk_axpb_launch(&fk, NULL, x, 0.5f, (float)s, N, 1));
            fk.get_counts(&c1);
            if (pass && s >= 2)
                cr_assert_eq(c1.eager_launches - c0.eager_launches, 1, "step %d: the launch was held back", s);
            OK(fk_addk_launch(&fk, NULL, x, s % 3, N));
            OK(fk.dtoh(h, x, sizeof h));
            if (pass) cr_assert_eq(cgj_trace_end(), CGJ_OK);
        }
        float he[N], ht[N];
        OK(fk.dtoh(he, e, sizeof he));
        OK(fk.dtoh(ht, t, sizeof ht));
        cr_assert(!memcmp(he, ht, sizeof he), "step %d differs", s);
    }
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("runs_now", &i), CGJ_OK);
    cr_assert_eq(i.replays, 28, "%s", i.reason);
}

/* A step that sometimes launches another kernel second: its first op ran already when the
 * second differs, and must not run again, whether the step switches to the variant that
 * launches the other kernel or leaves the trace. */
static void small_fork_step(int s, CUdeviceptr *b, void *ctx)
{
    float h[N];
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)s, N, 1));
    if (s % 5 == 3) OK(fk_addk_launch(&fk, NULL, b[0], 7, N));
    else OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 2.0f, N));
    OK(fk.dtoh(h, b[0], sizeof h));
}

Test(tracer_small, an_op_that_ran_is_never_issued_again)
{
    run_scenario(&(scenario_t){.name = "small_fork",
                               .fn = small_fork_step,
                               .steps = 60,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = AT_LEAST(45), .variants = IS(2)},
                               .fake = {.graph_launches = IS(0)}});
}

/* A copy from a fresh malloc'd host buffer and the kernel that reads it: a segment too small
 * for a graph, whose copy runs as the program makes it (nothing staged, no graph), with the
 * bytes of this run, wherever the program put them. */
static void small_staged_step(int s, CUdeviceptr *b, void *ctx)
{
    float *host = malloc(N * sizeof *host);
    cr_assert(host);
    for (int i = 0; i < N; i++) host[i] = (float)(s * N + i);
    OK(fk.htod_async(b[0], host, N * sizeof *host, NULL));
    free(host); /* an eager copy from pageable memory has its bytes when the call returns */
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, (float)s, N, 1));
}

Test(tracer_small, a_small_segment_with_a_staged_copy_launches_no_graph)
{
    run_scenario(&(scenario_t){.name = "small_staged",
                               .fn = small_staged_step,
                               .steps = 20,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .side_exits = IS(0)},
                               .stats = {.bytes_staged = IS(0)},
                               .fake = {.graph_launches = IS(0), .captures = IS(0)}});
}

/* The same copy after an in-step allocation the pool serves (held, not run): the held op goes
 * first, then the copy runs as the program makes it. */
static void small_staged_alloc_step(int s, CUdeviceptr *b, void *ctx)
{
    float host[N];
    CUdeviceptr tmp;
    for (int i = 0; i < N; i++) host[i] = (float)(s - i);
    OK(fk.mem_alloc(&tmp, N * sizeof(float)));
    OK(fk.htod_async(tmp, host, sizeof host, NULL));
    for (int i = 0; i < N; i++) host[i] = -1.0f; /* what a copy held back would read */
    OK(fk_copyscale_launch(&fk, NULL, b[0], tmp, 2.0f, N));
    OK(fk.mem_free(tmp));
}

Test(tracer_small, a_staged_copy_after_a_pool_op_runs_as_made)
{
    run_scenario(&(scenario_t){
        .name = "small_staged_alloc",
        .fn = small_staged_alloc_step,
        .steps = 20,
        .nbufs = 1,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .side_exits = IS(0), .allocations = IS(1)},
        .stats = {.bytes_staged = IS(0), .pool_allocs = IS(18)},
        .fake = {.graph_launches = IS(0), .captures = IS(0)}});
}
