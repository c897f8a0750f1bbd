/*
 * test_replay_threads.c — replay from several threads at once, and fork() while a thread
 * replays, against the fake driver: steps are per thread, each thread's results must equal
 * eager execution, and a child forked meanwhile must never block on a lock of the parent's.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "replay_common.h"

#include "fake_clock.h"

static void replay_setup(void)
{
    setup();
    fake_clock_start(NULL);
}

TestSuite(tracer_replay, .init = replay_setup);

/* ---------------------------------------------------------------------------------------------
 * Threads: steps are per thread
 * ------------------------------------------------------------------------------------------- */

typedef struct thread_job {
    const char *name;
    int steps, mismatches, api_errors;
    CUdeviceptr e, t;
    float offset;            /* own_stream_main: added to each step's constants */
    pthread_barrier_t *meet; /* own_stream_main: met twice inside each step (NULL: never) */
} thread_job_t;

static void thread_chain(CUdeviceptr x, int s)
{
    for (int k = 0; k < 4; k++) fk_axpb_launch(&fk, NULL, x, 0.5f, (float)(k + s % 3), N, 1);
    fk_addk_launch(&fk, NULL, x, s, N);
}

static void *thread_main(void *arg)
{
    thread_job_t *j = arg;
    for (int s = 0; s < j->steps; s++) {
        thread_chain(j->e, s);
        if (cgj_trace_begin(j->name) != CGJ_OK) j->api_errors++;
        thread_chain(j->t, s);
        if (cgj_trace_end() != CGJ_OK) j->api_errors++;
        float he[N], ht[N];
        fk.dtoh(he, j->e, sizeof he);
        fk.dtoh(ht, j->t, sizeof ht);
        if (memcmp(he, ht, sizeof he)) j->mismatches++;
    }
    return NULL;
}

static void run_threads(const char *n1, const char *n2)
{
    thread_job_t j[2] = {{.name = n1, .steps = 200}, {.name = n2, .steps = 200}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        j[k].e = fk_alloc_floats(&fk, N, 11 + k);
        j[k].t = fk_alloc_floats(&fk, N, 11 + k);
    }
    for (int k = 0; k < 2; k++) cr_assert_eq(pthread_create(&th[k], NULL, thread_main, &j[k]), 0);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(j[k].api_errors, 0, "thread %d: begin/end errors", k);
        cr_assert_eq(j[k].mismatches, 0, "thread %d: %d steps differ from eager", k, j[k].mismatches);
    }
}

/* Both threads read back on the legacy stream, which synchronizes with every blocking stream:
 * a read by one thread may flush the other's absorbed work (a side exit), so the replay counts
 * depend on timing; the results never do. */
Test(tracer_replay, two_threads_two_anchors)
{
    run_threads("thread_a", "thread_b");
    cr_assert_gt(info_of("thread_a").replays, 0);
    cr_assert_gt(info_of("thread_b").replays, 0);
}

/* Four x = 0.5 x + (k + b) launches on j's buffer t in st, and the same on the host model ref. */
static void axpb4(thread_job_t *j, CUstream st, float *ref, float b0)
{
    for (int k = 0; k < 4; k++) {
        float b = (float)k + b0;
        CUdeviceptr x = j->t;
        float a = 0.5f;
        int n = N;
        void *p[] = {&x, &a, &b, &n};
        if (fk.launch(fk_axpb, 1, 1, 1, 32, 1, 1, 0, st, p, NULL) != CUDA_SUCCESS) j->api_errors++;
        for (int i = 0; i < N; i++) ref[i] = 0.5f * ref[i] + b;
    }
}

/* Each thread on its own stream, synchronizing only that stream: neither disturbs the other.
 * With j->meet, the threads meet twice inside each step, so that their steps overlap. */
static void *own_stream_main(void *arg)
{
    thread_job_t *j = arg;
    CUstream st;
    if (fk.stream_create(&st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) j->api_errors++;
    float ref[N];
    memcpy(ref, (float *)(uintptr_t)j->t, sizeof ref); /* fake device memory is host memory */
    for (int s = 0; s < j->steps; s++) {
        if (cgj_trace_begin(j->name) != CGJ_OK) j->api_errors++;
        if (j->meet) pthread_barrier_wait(j->meet); /* both steps are open here */
        axpb4(j, st, ref, (float)(s % 3) + j->offset);
        if (j->meet) pthread_barrier_wait(j->meet);
        if (cgj_trace_end() != CGJ_OK) j->api_errors++;
        if (fk.stream_sync(st) != CUDA_SUCCESS) j->api_errors++;
        if (memcmp(ref, (float *)(uintptr_t)j->t, sizeof ref)) j->mismatches++;
    }
    return NULL;
}

Test(tracer_replay, threads_on_their_own_streams_replay_independently)
{
    thread_job_t j[4];
    pthread_t th[4];
    char names[4][16];
    for (int k = 0; k < 4; k++) {
        snprintf(names[k], sizeof names[k], "own%d", k);
        j[k] = (thread_job_t){.name = names[k], .steps = 200, .t = fk_alloc_floats(&fk, N, 21 + k)};
    }
    for (int k = 0; k < 4; k++) cr_assert_eq(pthread_create(&th[k], NULL, own_stream_main, &j[k]), 0);
    for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(j[k].api_errors, 0, "thread %d", k);
        cr_assert_eq(j[k].mismatches, 0, "thread %d: %d steps differ", k, j[k].mismatches);
        cr_assert_eq(info_of(names[k]).replays, 198, "thread %d", k);
    }
}

/* Two threads whose steps begin alike and overlap every iteration (PyTorch's main thread holds
 * its step open while its autograd thread runs one; a thread pool): the second to begin takes a
 * sibling anchor, "same#2", and each thread keeps to its own anchor whichever begins first, so
 * both replay. Each works on its own stream and buffer. */
Test(tracer_replay, threads_whose_steps_begin_alike_and_overlap_each_replay)
{
    thread_job_t j[2];
    pthread_t th[2];
    pthread_barrier_t overlap;
    pthread_barrier_init(&overlap, NULL, 2);
    for (int k = 0; k < 2; k++)
        j[k] = (thread_job_t){
            .name = "same", .steps = 100, .offset = (float)k, .meet = &overlap, .t = fk_alloc_floats(&fk, N, 31 + k)};
    for (int k = 0; k < 2; k++) cr_assert_eq(pthread_create(&th[k], NULL, own_stream_main, &j[k]), 0);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&overlap);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(j[k].api_errors, 0, "thread %d", k);
        cr_assert_eq(j[k].mismatches, 0, "thread %d: %d steps differ", k, j[k].mismatches);
    }
    cgj_trace_info_t a = info_of("same"), b = info_of("same#2");
    cr_assert_eq(a.runs + b.runs, 200, "runs %llu + %llu", (unsigned long long)a.runs, (unsigned long long)b.runs);
    cr_assert_eq(a.busy_runs + b.busy_runs, 0);
    cr_assert_geq(a.replays + b.replays, 190, "replays %llu + %llu (side exits %llu + %llu)",
                  (unsigned long long)a.replays, (unsigned long long)b.replays, (unsigned long long)a.side_exits,
                  (unsigned long long)b.side_exits);
}

/* fork() while another thread replays: the child synchronizes and exits.
 * It once hung, 1 child in 20 to 40, on the fake driver's lock, held by the replaying thread at
 * the fork; the fake's atfork handlers give the child a free one. A child that hangs is ended
 * by its alarm (a failure, not a hung suite). */
static int g_stop_replaying;

static void *replay_until_stopped(void *arg)
{
    thread_job_t *j = arg;
    CUstream st;
    if (fk.stream_create(&st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) j->api_errors++;
    float ref[N];
    memcpy(ref, (float *)(uintptr_t)j->t, sizeof ref);
    for (int s = 0; !__atomic_load_n(&g_stop_replaying, __ATOMIC_ACQUIRE); s++, j->steps++) {
        if (cgj_trace_begin(j->name) != CGJ_OK) j->api_errors++;
        axpb4(j, st, ref, (float)(s % 3));
        if (cgj_trace_end() != CGJ_OK) j->api_errors++;
        if (fk.stream_sync(st) != CUDA_SUCCESS) j->api_errors++;
        if (memcmp(ref, (float *)(uintptr_t)j->t, sizeof ref)) j->mismatches++;
    }
    return NULL;
}

Test(tracer_replay, children_forked_while_another_thread_replays_all_exit, .timeout = 600)
{
    enum { FORKS = 200 };
    thread_job_t j = {.name = "forking", .t = fk_alloc_floats(&fk, N, 41)};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, replay_until_stopped, &j), 0);
    cgj_trace_info_t i = {0};
    while (cgj_trace_info("forking", &i) != CGJ_OK || i.replays < 2) sched_yield(); /* forks land among replays */
    for (int k = 0; k < FORKS; k++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0, "fork");
        if (pid == 0) {
            alarm(30); /* a hang ends the child (SIGALRM) */
            _exit(fk.stream_sync(NULL) == CUDA_SUCCESS && fk.ctx_sync() == CUDA_SUCCESS ? 0 : 3);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d of %d: %s %d", k + 1, FORKS,
                  WIFSIGNALED(st) ? "killed by signal" : "exit status",
                  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    __atomic_store_n(&g_stop_replaying, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    cr_assert_eq(j.api_errors, 0);
    cr_assert_eq(j.mismatches, 0, "%d of %d steps differ from eager", j.mismatches, j.steps);
    cr_assert_gt(info_of("forking").replays, 2);
}

/* Both threads on the legacy stream, one anchor: while one replays, the other's launches on
 * that stream issue its absorbed work first (a side exit), so under enough overlap the anchor
 * may give up replaying (most replays left the trace); the results are always eager's. */
Test(tracer_replay, two_threads_one_anchor)
{
    run_threads("shared", "shared");
    cgj_trace_info_t i = info_of("shared");
    cgj_trace_info_t sib = {.size = sizeof sib};
    if (cgj_trace_info_read("shared#2", &sib) != CGJ_OK) sib.runs = 0; /* the threads never overlapped */
    cr_assert_eq(i.runs + sib.runs, 400, "runs %llu + %llu", (unsigned long long)i.runs, (unsigned long long)sib.runs);
    cr_assert_eq(i.busy_runs, 0, "a second thread ran eagerly while a sibling anchor was free");
    if (i.state == CGJ_STATE_BLACKLISTED)
        cr_assert_eq(i.reason_code, CGJ_REASON_BLACKLIST_EXITS, "reason: %s", i.reason);
}
