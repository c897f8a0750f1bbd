/*
 * test_implicit.c — steps found without markers (CGJIT_STEP=sync|auto|off), against the fake
 * driver. The "program" here never calls cgj_trace_begin: cgjit must find its steps, replay
 * them, and leave memory exactly as eager execution would. The expected values are computed on
 * the host with the same arithmetic as the fake kernels.
 */
#define _GNU_SOURCE /* dladdr, in fake_clock.h */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <cgjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_clock.h"
#include "fakeapp.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 64
#define OK(x) cr_assert_eq((x), CUDA_SUCCESS, "%s", #x)
static fk_t fk;

static void open_with(const char *policy)
{
    setenv("CGJIT_STEP", policy, 1);
    fk_open(&fk);
}
static void sync_setup(void)
{
    open_with("sync");
}
static void auto_setup(void)
{
    open_with("auto");
}
static void off_setup(void)
{
    open_with("off");
}

/* x = a*x + b on the host, as the fake axpb does with grid 1. */
static void host_axpb(float *x, float a, float b)
{
    for (int i = 0; i < N; i++) x[i] = a * x[i] + b;
}

/* One loop iteration: `k` kernels then, with `sync`, a read of x (the host observes). */
static void iteration(CUdeviceptr x, int it, int k, bool sync, float *ref, float *seen)
{
    for (int j = 0; j < k; j++) {
        float b = 0.01f * (float)(j % 3) + (j == 0 ? 0.001f * (float)(it % 4) : 0.0f);
        OK(fk_axpb_launch(&fk, NULL, x, 0.5f, b, N, 1));
        host_axpb(ref, 0.5f, b);
    }
    if (sync) OK(fk.dtoh(seen, x, N * sizeof(float)));
}

static cgj_stats_t stats(void)
{
    cgj_stats_t s;
    cgj_stats(&s);
    return s;
}

/* The ops of the first variant the report lists from `from` on (within report text `buf`). */
static unsigned first_variant_ops(const char *from, const char *buf)
{
    unsigned ops = 0;
    const char *v = strstr(from, "variant 1: ");
    cr_assert(v && sscanf(v, "variant 1: %u ops", &ops) == 1, "no trace: %s", buf);
    return ops;
}

TestSuite(tracer_implicit_sync, .init = sync_setup);

/* `iters` iterations of k kernels, each followed by a readback checked against eager arithmetic. */
static cgj_stats_t synced_loop(int iters, int k)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    for (int it = 0; it < iters; it++) {
        iteration(x, it, k, true, ref, seen);
        cr_assert(!memcmp(ref, seen, sizeof ref), "iteration %d differs from eager arithmetic", it);
    }
    return stats();
}

Test(tracer_implicit_sync, a_loop_with_one_sync_replays)
{
    cgj_stats_t s = synced_loop(50, 10);
    cr_assert_geq(s.steps_replayed, 47, "replayed %llu", (unsigned long long)s.steps_replayed);
    cr_assert_eq(s.side_exits, 0);
}

/* Under `sync`, iterations of two forms: three kernels and a readback, or (every other one) the
 * same three, then 80 more of which one, at a place that moves every time, is another kernel
 * (shapes that follow the data), then the readback. The long form leaves the short trace past
 * its end every time; its recordings never agree, so after 4 of them its exits finish
 * unrecorded (but for one in a growing number), as an implicit step in eager mode. The results
 * stay eager's; the short form keeps replaying. */
Test(tracer_implicit_sync, exits_that_record_shapes_seen_once_stop_recording)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    const int iters = 200, tail = 80;
    for (int it = 0; it < iters; it++) {
        for (int j = 0; j < 3; j++) {
            OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 0.01f * (float)j, N, 1));
            host_axpb(ref, 0.5f, 0.01f * (float)j);
        }
        for (int j = 0; it % 2 && j < tail; j++) {
            if (j == (it / 2) % tail) {
                OK(fk_addk_launch(&fk, NULL, x, 1, N));
                for (int i = 0; i < N; i++) ref[i] += 1.0f;
            } else {
                OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 0.25f, N, 1));
                host_axpb(ref, 0.5f, 0.25f);
            }
        }
        OK(fk.dtoh(seen, x, N * sizeof(float)));
        cr_assert(!memcmp(ref, seen, sizeof ref), "iteration %d differs from eager arithmetic", it);
    }
    cgj_stats_t s = stats();
    cr_assert_geq(s.steps_replayed, 90, "replayed %llu", (unsigned long long)s.steps_replayed);
    cr_assert_geq(s.side_exits, 90, "%llu side exits", (unsigned long long)s.side_exits);
    /* 100 long runs of 84 calls: 8,400 ops recorded if each were; under 1,500 with the first few
     * and the 1st, 2nd, 4th ... 64th quiet exit recorded. */
    cr_assert_lt(s.ops_recorded, 1500, "%llu ops recorded", (unsigned long long)s.ops_recorded);
}

/* The same loop, its long form leaving the trace; in iteration `fail` the re-issue of the three
 * absorbed launches at the exit fails. The program gets the error once, from the call at which
 * the step left its trace, whether that exit records the rest of its run or (quiet: its anchor's
 * exits no longer record) runs it eagerly; the calls after it pass cgjit by its shortest path. */
static void reissue_error_reaches_the_next_call(int fail)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
    float seen[N];
    for (int it = 0; it <= fail; it++) {
        if (it == fail) fk.fail_next("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED);
        CUresult got[3 + 40];
        int n = 0;
        for (int j = 0; j < 3; j++) got[n++] = fk_axpb_launch(&fk, NULL, x, 0.5f, 0.01f * (float)j, N, 1);
        for (int j = 0; it % 2 && j < 40; j++)
            got[n++] = j == it % 40 ? fk_addk_launch(&fk, NULL, x, 1, N)
                                    : fk_axpb_launch(&fk, NULL, x, 0.5f, 0.25f, N, 1);
        OK(fk.dtoh(seen, x, N * sizeof(float)));
        for (int j = 0; j < n; j++) {
            bool want = it == fail && j == 3;
            cr_assert_eq(got[j], want ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS, "iteration %d, call %d: %d", it, j,
                         (int)got[j]);
        }
    }
    cr_assert_eq(fk.fail_pending(), 0, "the injected failure was not met");
}

/* Iteration 11: its exit is recorded (the anchor's 1st after 4 lone recordings); 15: it is not. */
Test(tracer_implicit_sync, a_reissue_error_at_a_recorded_exit_reaches_the_next_call)
{
    reissue_error_reaches_the_next_call(11);
}

Test(tracer_implicit_sync, a_reissue_error_at_an_unrecorded_exit_reaches_the_next_call)
{
    reissue_error_reaches_the_next_call(15);
}

/* A worker forked by a launcher that never initialized CUDA (one process per GPU) finds its
 * steps as any process does. */
Test(tracer_implicit_sync, a_worker_forked_before_cuda_started_finds_its_steps)
{
    fk.fail_next("cuDeviceGetCount", CUDA_ERROR_NOT_INITIALIZED); /* cgjit's question at fork() */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
        float ref[N], seen[N];
        if (fk.dtoh(ref, x, sizeof ref) != CUDA_SUCCESS) _exit(2);
        for (int it = 0; it < 30; it++) {
            iteration(x, it, 5, true, ref, seen);
            if (memcmp(ref, seen, sizeof ref)) _exit(3);
        }
        _exit(stats().steps_replayed >= 20 ? 0 : 4);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the worker: %s %d", WIFEXITED(st) ? "exit status" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Two buffers x and y, and their contents on the host (the eager arithmetic starts there). */
static void two_buffers(CUdeviceptr *x, CUdeviceptr *y, float *rx, float *ry, unsigned seed)
{
    *x = fk_alloc_floats(&fk, N, seed), *y = fk_alloc_floats(&fk, N, seed + 1);
    OK(fk.dtoh(rx, *x, N * sizeof(float)));
    OK(fk.dtoh(ry, *y, N * sizeof(float)));
}

/* A kernel whose name is longer than an anchor name keeps: the anchor is named
 * "sync:cuLaunchKernel:" and the name's first 80 characters, then ':' and 16 hex digits. */
static void k_long(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    (void)g, (void)b, (void)smem;
    float *x = *(float **)p[0];
    for (int i = 0; i < N; i++) x[i] += 1.0f;
}

Test(tracer_implicit_sync, a_long_kernel_name_is_cut_in_the_anchor_name)
{
    char kname[121];
    for (int i = 0; i < 120; i++) kname[i] = (char)('a' + i % 26);
    kname[120] = 0;
    size_t sizes[] = {sizeof(CUdeviceptr)};
    CUfunction f = fk.register_kernel(kname, k_long, 1, sizes, 0, 0);
    cr_assert(f);
    CUdeviceptr x = fk_alloc_floats(&fk, N, 0);
    float seen[N];
    for (int it = 0; it < 8; it++) {
        void *p[] = {&x};
        OK(fk.launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
        OK(fk.launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
        OK(fk.dtoh(seen, x, sizeof seen));
        cr_assert_float_eq(seen[0], 2.0f * (float)(it + 1), 0, "iteration %d differs from eager", it);
    }
    char want[128];
    snprintf(want, sizeof want, "\"sync:cuLaunchKernel:%.80s:", kname);
    size_t len = cgj_report_json_buf(NULL, 0);
    char *json = malloc(len);
    cr_assert(json);
    cgj_report_json_buf(json, len);
    const char *at = strstr(json, want);
    cr_assert(at, "no anchor named %s... in the report", want + 1);
    at += strlen(want);
    for (int i = 0; i < 16; i++)
        cr_assert(strchr("0123456789abcdef", at[i]) && at[i], "hash digit %d of '%.24s'", i, at);
    cr_assert_eq(at[16], '"', "the name goes on after its hash: '%.24s'", at);
    free(json);
}

Test(tracer_implicit_sync, two_syncs_per_iteration_make_two_traces)
{
    CUdeviceptr x, y;
    float rx[N], ry[N], seen[N];
    two_buffers(&x, &y, rx, ry, 5);
    for (int it = 0; it < 40; it++) {
        iteration(x, it, 5, true, rx, seen);
        cr_assert(!memcmp(rx, seen, sizeof rx), "x at iteration %d", it);
        iteration(y, it, 7, true, ry, seen);
        cr_assert(!memcmp(ry, seen, sizeof ry), "y at iteration %d", it);
    }
    char *buf = fk_report_text();
    cr_assert(buf);
    int anchors = 0;
    for (char *p = buf; (p = strstr(p, "'sync:")); p++) anchors++; /* listed, or folded (ran once) */
    cr_assert_geq(anchors, 2, "%s", buf);
    cr_assert_geq(stats().steps_replayed, 70);
    free(buf);
}

Test(tracer_implicit_sync, markers_take_precedence)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 7);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    for (int it = 0; it < 5; it++) iteration(x, it, 3, true, ref, seen);
    uint64_t before = stats().steps;
    for (int it = 5; it < 30; it++) {
        cr_assert_eq(cgj_trace_begin("marked"), CGJ_OK);
        iteration(x, it, 3, false, ref, seen);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk.dtoh(seen, x, sizeof seen));
        cr_assert(!memcmp(ref, seen, sizeof ref), "iteration %d", it);
    }
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("marked", &i), CGJ_OK);
    cr_assert_eq(i.replays, 23);
    /* After the first marker, only marked steps: one per iteration (+1 implicit step ended). */
    cr_assert_leq(stats().steps - before, 25 + 1);
}

/* A loop that never synchronizes, under sync: after CGJ_SYNC_LONG (8192) calls the step ends
 * and the thread finds its steps by their cycle, as auto does: most iterations replay. The
 * first run stopped recording after CGJ_SYNC_FIRST_RECORD (256) calls, not at CGJIT_MAX_OPS nor
 * at the fallback: only the cycles' few runs are recorded after that. */
Test(tracer_implicit_sync, a_loop_without_any_sync_falls_back_to_cycles)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 6);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    const int iters = 3000; /* 7 kernels each: 21000 calls */
    for (int it = 0; it < iters; it++) iteration(x, it, 7, false, ref, seen);
    OK(fk.ctx_sync());
    OK(fk.dtoh(seen, x, sizeof seen));
    cr_assert(memcmp(ref, seen, sizeof ref) == 0, "results differ from eager");
    cgj_stats_t st = stats();
    cr_assert_leq(st.ops_recorded, 256 + 100, "%llu calls recorded", (unsigned long long)st.ops_recorded);
    cr_assert_geq(st.ops_absorbed, iters / 2 * 7, "replay absorbed %llu of %d calls",
                  (unsigned long long)st.ops_absorbed, iters * 7);
}

/* The same loop on a thread other than the process's first, as PyTorch's autograd worker runs
 * the backward pass: it finds cycles after CGJ_SYNC_LONG_WORKER (1024) calls already, so a
 * program of a few hundred such iterations replays most of them. */
typedef struct worker_loop {
    CUdeviceptr x;
    float ref[N], seen[N];
    int iters;
} worker_loop_t;

static void *worker_loop_main(void *arg)
{
    worker_loop_t *w = arg;
    for (int it = 0; it < w->iters; it++) iteration(w->x, it, 7, false, w->ref, w->seen);
    OK(fk.ctx_sync());
    return NULL;
}

Test(tracer_implicit_sync, a_worker_thread_without_any_sync_finds_cycles_early)
{
    static worker_loop_t w = {.iters = 400}; /* 2800 calls: below CGJ_SYNC_LONG */
    w.x = fk_alloc_floats(&fk, N, 6);
    OK(fk.dtoh(w.ref, w.x, sizeof w.ref));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, worker_loop_main, &w), 0);
    pthread_join(th, NULL);
    OK(fk.dtoh(w.seen, w.x, sizeof w.seen));
    cr_assert(memcmp(w.ref, w.seen, sizeof w.ref) == 0, "results differ from eager");
    cgj_stats_t st = stats();
    cr_assert_geq(st.ops_absorbed, 200 * 7, "replay absorbed %llu of 2800 calls", (unsigned long long)st.ops_absorbed);
}

/* A producer (the process's first thread) that never synchronizes and hands its work to a
 * consumer thread through an event each iteration: its first run's recording saw the consumer
 * take the work over (handoffs), so when it stops recording at 256 calls the thread looks for
 * its cycle at once, and replays most of a few hundred iterations (at CGJ_SYNC_LONG it would
 * replay none of them). */
typedef struct consumer {
    pthread_barrier_t recorded, consumed;
    CUstream ps, cs;
    CUevent ev;
    CUdeviceptr src, dst;
    int iters, mismatches;
    float expect[N];
} consumer_t;

static void *consumer_main(void *arg)
{
    consumer_t *c = arg;
    float seen[N];
    for (int it = 0; it < c->iters; it++) {
        pthread_barrier_wait(&c->recorded);
        OK(fk.stream_wait(c->cs, c->ev, 0));
        OK(fk.dtod_async(c->dst, c->src, sizeof seen, c->cs));
        OK(fk.stream_sync(c->cs));
        OK(fk.dtoh(seen, c->dst, sizeof seen));
        c->mismatches += memcmp(seen, c->expect, sizeof seen) != 0;
        pthread_barrier_wait(&c->consumed);
    }
    return NULL;
}

Test(tracer_implicit_sync, a_producer_that_hands_its_work_over_finds_cycles_early)
{
    static consumer_t c = {.iters = 300};
    OK(fk.stream_create(&c.ps, CU_STREAM_NON_BLOCKING));
    OK(fk.stream_create(&c.cs, CU_STREAM_NON_BLOCKING));
    OK(fk.event_create(&c.ev, CU_EVENT_DISABLE_TIMING));
    c.src = fk_alloc_floats(&fk, N, 3);
    c.dst = fk_alloc_floats(&fk, N, 4);
    OK(fk.dtoh(c.expect, c.src, sizeof c.expect));
    pthread_barrier_init(&c.recorded, NULL, 2);
    pthread_barrier_init(&c.consumed, NULL, 2);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, consumer_main, &c), 0);
    for (int it = 0; it < c.iters; it++) {
        for (int k = 0; k < 8; k++) {
            OK(fk_axpb_launch(&fk, c.ps, c.src, 0.5f, (float)(k + it % 5), N, 1));
            host_axpb(c.expect, 0.5f, (float)(k + it % 5));
        }
        OK(fk.event_record(c.ev, c.ps));
        pthread_barrier_wait(&c.recorded);
        pthread_barrier_wait(&c.consumed);
    }
    pthread_join(th, NULL);
    cr_assert_eq(c.mismatches, 0, "the consumer read work missing or doubled %d times", c.mismatches);
    /* The producer's steps are the cycle's: its anchor is the one named auto:. */
    char *buf = fk_report_text();
    cr_assert(buf);
    const char *a = strstr(buf, "anchor 'auto:");
    unsigned runs = 0, replayed = 0;
    cr_assert(a && sscanf(strstr(a, "': ") + 3, "%*[A-Z], %u runs, %u replayed", &runs, &replayed) == 2,
              "no cycle anchor: %s", buf);
    /* Its steps hold several turns of the cycle (CGJ_AUTO_MIN_STEP): count the calls. At 256
     * calls its first step saw the consumer take its work over, and looks for its cycle from
     * the next call on (not after a worker's 1024 calls, 114 of the 300 iterations). */
    unsigned ops = first_variant_ops(a, buf);
    cr_assert_geq(replayed * ops, 2000, "the producer replayed %u of %u steps of %u calls (of its 2700):\n%s", replayed,
                  runs, ops, buf);
    free(buf);
}

/* A long step (300 calls) whose stream another thread takes over once in the middle, as a
 * PyTorch worker runs the backward pass of the main thread's forward: one handoff is no
 * producer's loop, the main thread keeps its sync steps, and they replay. */
typedef struct once_worker {
    pthread_barrier_t go, done;
    CUdeviceptr x;
    int iters;
} once_worker_t;

static void *once_worker_main(void *arg)
{
    once_worker_t *w = arg;
    for (int it = 0; it < w->iters; it++) {
        pthread_barrier_wait(&w->go);
        OK(fk_addk_launch(&fk, NULL, w->x, 1, N));
        pthread_barrier_wait(&w->done);
    }
    return NULL;
}

Test(tracer_implicit_sync, one_handoff_in_a_long_step_keeps_its_sync_steps)
{
    static once_worker_t w = {.iters = 12};
    w.x = fk_alloc_floats(&fk, N, 5);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, w.x, sizeof ref));
    pthread_barrier_init(&w.go, NULL, 2);
    pthread_barrier_init(&w.done, NULL, 2);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, once_worker_main, &w), 0);
    for (int it = 0; it < w.iters; it++) {
        iteration(w.x, it, 150, false, ref, seen);
        pthread_barrier_wait(&w.go);
        pthread_barrier_wait(&w.done);
        for (int i = 0; i < N; i++) ref[i] += 1.0f;
        iteration(w.x, it, 150, true, ref, seen);
        cr_assert(!memcmp(ref, seen, sizeof ref), "iteration %d differs from eager arithmetic", it);
    }
    pthread_join(th, NULL);
    cgj_stats_t st = stats();
    cr_assert_geq(st.steps_replayed, w.iters - 4, "%llu replayed", (unsigned long long)st.steps_replayed);
    char *buf = fk_report_text();
    cr_assert(buf);
    cr_assert(!strstr(buf, "anchor 'auto:"), "the main thread went looking for cycles:\n%s", buf);
    free(buf);
}

/* A long step that does synchronize (1500 calls, past CGJ_SYNC_FIRST_RECORD): its first run is
 * not recorded whole, its next two are, and it replays from its fourth run. */
Test(tracer_implicit_sync, a_long_step_is_recorded_from_its_second_run)
{
    cgj_stats_t st = synced_loop(10, 1500);
    cr_assert_eq(st.steps_replayed, 10 - 3, "%llu replayed", (unsigned long long)st.steps_replayed);
    cr_assert_eq(st.side_exits, 0);
}

TestSuite(tracer_implicit_auto, .init = auto_setup);

Test(tracer_implicit_auto, a_loop_without_any_sync_is_found)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 8);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    /* A prefix that is not part of the loop. */
    OK(fk_addk_launch(&fk, NULL, x, 3, N));
    for (int i = 0; i < N; i++) ref[i] += 3.0f;
    for (int it = 0; it < 60; it++) iteration(x, it, 12, false, ref, seen);
    OK(fk.stream_sync(NULL));
    OK(fk.dtoh(seen, x, sizeof seen));
    cr_assert(!memcmp(ref, seen, sizeof ref), "the loop's result differs from eager arithmetic");
    cgj_stats_t s = stats();
    /* Steps hold several turns of a cycle this short (CGJ_AUTO_MIN_STEP): count calls. */
    cr_assert_geq(s.ops_absorbed, 40 * 12, "replay absorbed %llu of 720 calls", (unsigned long long)s.ops_absorbed);
}

/* The cycle detector a thread takes at its 64th call (160 KB) is made ready as implicit stepping
 * is enabled, and one given back at a thread's exit is cleared there and taken by the next
 * thread as it is: each of three loops, on the program's thread and on two threads one after
 * the other, is found and replayed, every result eager's. */
typedef struct {
    CUdeviceptr x;
    float ref[N];
} loop_arg_t;

static void *loop_main(void *p)
{
    loop_arg_t *a = p;
    float seen[N];
    for (int it = 0; it < 40; it++) iteration(a->x, it, 4, true, a->ref, seen);
    return NULL;
}

/* Calls replay absorbed while loop l ran (on a thread of its own where `thread`). */
static unsigned long long absorbed_by(loop_arg_t *l, bool thread)
{
    unsigned long long before = stats().ops_absorbed;
    OK(fk.dtoh(l->ref, l->x, sizeof l->ref));
    pthread_t th;
    if (!thread) {
        loop_main(l);
    } else {
        cr_assert_eq(pthread_create(&th, NULL, loop_main, l), 0);
        cr_assert_eq(pthread_join(th, NULL), 0);
    }
    float seen[N];
    OK(fk.dtoh(seen, l->x, sizeof seen));
    cr_assert(!memcmp(l->ref, seen, sizeof seen), "a loop's result differs from eager arithmetic");
    return stats().ops_absorbed - before;
}

Test(tracer_implicit_auto, each_thread_finds_its_loop_with_a_detector_from_the_pool)
{
    loop_arg_t m = {.x = fk_alloc_floats(&fk, N, 8)}, a = {.x = fk_alloc_floats(&fk, N, 9)},
               b = {.x = fk_alloc_floats(&fk, N, 10)};
    cr_assert_gt(absorbed_by(&m, false), 0, "the program's thread: its loop was not replayed");
    cr_assert_gt(absorbed_by(&a, true), 0, "a first thread: its loop was not replayed");
    cr_assert_gt(absorbed_by(&b, true), 0, "a second thread, with the first's detector: its loop was not replayed");
}

/* The program's first thread signs its calls from its first one, with the detector made ready
 * as stepping was enabled: a kernel it launches early is named then (the driver asked for its
 * name), during the program's set-up, not at the thread's 64th call, which may be in a loop the
 * program times. A second thread waits for its 64th call, and takes a detector then. */

static void *launch_fresh_kernel(void *p)
{
    CUdeviceptr x = *(CUdeviceptr *)p;
    CUfunction k = fk_axpb_twin(&fk, "a_thread_s_first_kernel", true);
    unsigned long before = fk_counts(&fk).name_queries;
    OK(fk_axpb_launch_f(&fk, k, false, NULL, x, 1.0f, 0.0f, N, 1));
    return (void *)(uintptr_t)(fk_counts(&fk).name_queries - before);
}

Test(tracer_implicit_auto, the_first_thread_signs_its_calls_from_its_first_one)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 8);
    CUfunction k = fk_axpb_twin(&fk, "set_up_kernel", true);
    unsigned long before = fk_counts(&fk).name_queries;
    OK(fk_axpb_launch_f(&fk, k, false, NULL, x, 2.0f, 1.0f, N, 1));
    cr_assert_gt(fk_counts(&fk).name_queries, before,
                 "the program's thread's early kernel was not named: its calls are not signed");
    pthread_t th;
    void *asked;
    cr_assert_eq(pthread_create(&th, NULL, launch_fresh_kernel, &x), 0);
    cr_assert_eq(pthread_join(th, &asked), 0);
    cr_assert_eq((uintptr_t)asked, 0, "a second thread signed its first call");
    float h[N], ref[N];
    OK(fk.dtoh(h, x, sizeof h));
    CUdeviceptr y = fk_alloc_floats(&fk, N, 8);
    OK(fk.dtoh(ref, y, sizeof ref));
    for (int i = 0; i < N; i++) ref[i] = (2.0f * ref[i] + 1.0f) * 1.0f + 0.0f;
    cr_assert(!memcmp(h, ref, sizeof h), "results differ from eager arithmetic");
}

/* `iters` iterations of k kernels with no synchronization, on a buffer of its own (seeded),
 * the result read at the end and checked against eager arithmetic. */
static void unsynced_loop(unsigned seed, int iters, int k)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, seed);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    for (int it = 0; it < iters; it++) iteration(x, it, k, false, ref, seen);
    OK(fk.stream_sync(NULL));
    OK(fk.dtoh(seen, x, sizeof seen));
    cr_assert(!memcmp(ref, seen, sizeof ref), "the loop's result differs from eager arithmetic");
}

/* One kernel launched over and over (a cycle of one call): a step of one launch would gain
 * nothing from a graph, so a step holds CGJ_AUTO_MIN_STEP (32) turns of the cycle. */
Test(tracer_implicit_auto, a_kernel_launched_over_and_over_is_replayed_many_launches_a_step)
{
    unsynced_loop(5, 2000, 1);
    char *buf = fk_report_text();
    cr_assert(buf);
    unsigned ops = first_variant_ops(buf, buf);
    cr_assert_eq(ops, 32, "a step holds %u launches:\n%s", ops, buf);
    cgj_stats_t s = stats();
    cr_assert_geq(s.ops_absorbed, 1800, "replay absorbed %llu of 2000 calls:\n%s", (unsigned long long)s.ops_absorbed,
                  buf);
    free(buf);
}

/* A loop that allocates and frees (a program's set-up) does no GPU work a graph holds: no step
 * begins in its cycle, none is warmed up or recorded; the kernel loop after it replays. */
Test(tracer_implicit_auto, a_loop_of_allocations_begins_no_step)
{
    for (int i = 0; i < 200; i++) {
        CUdeviceptr p;
        OK(fk.mem_alloc(&p, 4096));
        OK(fk.mem_free(p));
    }
    cgj_stats_t s = stats();
    cr_assert_eq(s.steps + s.steps_warmup, 0, "%llu steps, %llu warm-up runs in a loop of allocations",
                 (unsigned long long)s.steps, (unsigned long long)s.steps_warmup);
    unsynced_loop(8, 60, 12);
    cr_assert_geq(stats().ops_absorbed, 40 * 12, "the kernel loop after the allocations was not replayed");
}

/* Sections a program makes once each (cuda-samples' batchCUBLAS times each of its sections
 * once): allocations, ten launches of one kernel, a read back, frees, each section with a kernel
 * of its own. Ten launches lock a cycle of one call, but a step begins only in a cycle that has
 * repeated over CGJ_AUTO_MIN_SPAN (32) calls: none is begun, recorded or built for the calls
 * left of a section, and every result is eager's. */
Test(tracer_implicit_auto, a_short_run_of_one_call_begins_no_step)
{
    for (int sec = 0; sec < 12; sec++) {
        char name[32];
        snprintf(name, sizeof name, "section_kernel_%d", sec);
        CUfunction k = fk_axpb_twin(&fk, name, sec % 2);
        CUdeviceptr x[3];
        for (int b = 0; b < 3; b++) x[b] = fk_alloc_floats(&fk, N, (unsigned)(sec + b));
        float ref[N], seen[N];
        OK(fk.dtoh(ref, x[1], sizeof ref));
        for (int j = 0; j < 10; j++) {
            OK(fk_axpb_launch_f(&fk, k, false, NULL, x[1], 0.5f, (float)j, N, 1));
            host_axpb(ref, 0.5f, (float)j);
        }
        OK(fk.dtoh(seen, x[1], sizeof seen));
        cr_assert(!memcmp(ref, seen, sizeof ref), "section %d differs from eager arithmetic", sec);
        for (int b = 0; b < 3; b++) OK(fk.mem_free(x[b]));
    }
    cgj_stats_t s = stats();
    cr_assert_eq(s.steps + s.steps_warmup, 0, "%llu steps, %llu warm-up runs in sections made once",
                 (unsigned long long)s.steps, (unsigned long long)s.steps_warmup);
}

/* ---- a program's own stream capture (tracer/captures.c) ---- */

/* `iters` iterations of a loop that captures a graph of its own every time (as llama.cpp's
 * decoder does) with 200 launches inside, a short cycle a detector would step on, then
 * instantiates and launches it and synchronizes its stream. */
static void own_graph_loop(CUstream cs, CUstreamCaptureMode mode, CUdeviceptr x, float *ref, int iters)
{
    for (int it = 0; it < iters; it++) {
        OK(fk.begin_capture(cs, mode));
        for (int j = 0; j < 200; j++) {
            float b = 0.01f * (float)(j % 3);
            OK(fk_axpb_launch(&fk, cs, x, 0.5f, b, N, 1));
            host_axpb(ref, 0.5f, b);
        }
        OK(fk_capture_end_and_run(&fk, cs));
    }
}

/* While the program captures, no step begins: nothing it means to capture is absorbed, and
 * cgjit builds nothing (a capture in global mode forbids that to every thread). Its graphs hold
 * every launch, in both capture modes. */
static void own_graphs_are_left_alone(void)
{
    CUstream cs;
    OK(fk.stream_create(&cs, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x = fk_alloc_floats(&fk, N, 6);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    own_graph_loop(cs, CU_STREAM_CAPTURE_MODE_GLOBAL, x, ref, 20);
    own_graph_loop(cs, CU_STREAM_CAPTURE_MODE_RELAXED, x, ref, 20);
    OK(fk.dtoh(seen, x, sizeof seen));
    cr_assert(!memcmp(ref, seen, sizeof ref), "the program's graphs lost work: x[0] = %g, want %g", seen[0], ref[0]);
    cgj_stats_t s = stats();
    cr_assert_eq(s.ops_absorbed, 0, "%llu launches meant for the program's graphs were absorbed",
                 (unsigned long long)s.ops_absorbed);
    cr_assert_eq(s.build_failures, 0);
    OK(fk.stream_destroy(cs));
}

Test(tracer_implicit_auto, a_graph_the_program_captures_holds_every_launch)
{
    own_graphs_are_left_alone();
}
Test(tracer_implicit_sync, a_graph_the_program_captures_holds_every_launch)
{
    own_graphs_are_left_alone();
}

/* ---- a host that polls (cuStreamQuery) instead of synchronizing ---- */

/* `iters` iterations of 6 kernels and an async copy of x into pinned memory; the host then asks
 * cuStreamQuery until it says done (the fake driver answers "not ready" it % 4 times first) and
 * reads the pinned copy. */
static void polling_loop(int iters)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 9);
    float ref[N], *pinned;
    OK(fk.dtoh(ref, x, sizeof ref));
    OK(fk.host_alloc((void **)&pinned, sizeof ref, 0));
    for (int it = 0; it < iters; it++) {
        iteration(x, it, 6, false, ref, NULL);
        OK(fk.dtoh_async(pinned, x, sizeof ref, NULL));
        for (int p = 0; p < it % 4; p++) {
            fk.fail_next("cuStreamQuery", CUDA_ERROR_NOT_READY);
            cr_assert_eq(fk.stream_query(NULL), CUDA_ERROR_NOT_READY);
        }
        OK(fk.stream_query(NULL));
        cr_assert(!memcmp(ref, pinned, sizeof ref), "iteration %d: the host read what eager would not hold", it);
    }
    OK(fk.free_host(pinned));
}

/* Each poll is one op however long it waits, and "not ready" is an answer, not a failure: the
 * loop replays (sync: a query that says done has synchronized, so it ends the step). */
static void polls_replay(void)
{
    polling_loop(80);
    cgj_stats_t s = stats();
    cr_assert_eq(s.aborts, 0, "%llu steps aborted", (unsigned long long)s.aborts);
    cr_assert_geq(s.ops_absorbed, 60 * 7, "replay absorbed %llu calls", (unsigned long long)s.ops_absorbed);
}

Test(tracer_implicit_sync, a_host_that_polls_with_queries_replays)
{
    polls_replay();
}
Test(tracer_implicit_auto, a_host_that_polls_with_queries_replays)
{
    polls_replay();
}

TestSuite(tracer_implicit_off, .init = off_setup);

Test(tracer_implicit_off, off_records_nothing)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 9);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    for (int it = 0; it < 10; it++) {
        iteration(x, it, 4, true, ref, seen);
        cr_assert(!memcmp(ref, seen, sizeof ref));
    }
    cgj_stats_t s = stats();
    cr_assert_eq(s.steps, 0);
    cr_assert_eq(s.ops_recorded, 0);
}

/* A CGJIT_STEP that is not sync, auto or off: a one-line warning naming the variable, and no
 * implicit steps. */
static void bad_setup(void)
{
    cr_redirect_stderr();
    open_with("sometimes");
}

Test(tracer_implicit_bad, unknown_policy_warns_and_records_nothing, .init = bad_setup)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 10);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    for (int it = 0; it < 5; it++) iteration(x, it, 3, true, ref, seen);
    cr_assert_eq(stats().steps, 0);
    fflush(stderr);
    cr_assert_stderr_neq_str("", "no warning");
}

/* The warning shows the value as it came, on one line: a newline in it is escaped. */
static void bad_newline_setup(void)
{
    cr_redirect_stderr();
    open_with("sync\nforged line");
}

Test(tracer_implicit_bad, the_warning_stays_on_one_line, .init = bad_newline_setup)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 10);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    iteration(x, 0, 3, true, ref, seen);
    fflush(stderr);
    char out[512] = "";
    FILE *f = cr_get_redirected_stderr();
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    cr_assert(strstr(out, "CGJIT_STEP='sync\\nforged line' is not sync, auto or off"), "warning: %s", out);
    cr_assert_eq(strchr(out, '\n'), out + n - 1, "the warning is not one line: %s", out);
}

/* ---- where an eager probe's time goes (CGJIT_COST on) ---- */

static void cost_setup(void)
{
    setenv("CGJIT_COST", "1", 1);
    open_with("sync");
}

/* A loop of 4 launches of 100 us each (the fake driver's delay) and a readback: its eager probes
 * spend at least 400 us in the calls replay absorbs, of the time from the probe's begin to its
 * end, and the report says so. */
Test(tracer_implicit_cost, an_eager_probe_times_the_calls_replay_absorbs, .init = cost_setup)
{
    fk.set_delays(100, 0);
    cgj_stats_t s = synced_loop(120, 4);
    fk.set_delays(0, 0);
    cr_assert_geq(s.steps_probed, 2, "%llu probes", (unsigned long long)s.steps_probed);
    char *buf = fk_report_text();
    cr_assert(buf);
    const char *line = strstr(buf, "an eager probe spends ");
    double us = 0, run_us = 0;
    cr_assert(line && sscanf(line, "an eager probe spends %lf us of its %lf us", &us, &run_us) == 2, "%s", buf);
    cr_assert_geq(us, 400.0, "%s", line);
    cr_assert_leq(us, run_us, "%s", line);
    free(buf);
}

/* ---- an anchor whose first trace is too short for a graph ---- */

/* The cost model on, on the fake clock: its verdicts on periods depend on the program's calls,
 * never on how loaded the machine is (on the real clock, a sanitizer build's replays read as
 * grossly slower and turned off). */
static void no_graph_setup(void)
{
    setenv("CGJIT_COST", "1", 1);
    setenv("CGJIT_GRAPH_MIN_OPS", "3", 1);
    open_with("sync");
    fake_clock_start(fk.handle);
}

/* Every step begins with the same kernel, but the program's first iterations read x back after
 * one kernel, and every later one after ten (a PyTorch loop whose first iteration synchronizes
 * after its input copy). The first trace holds one op: too short for a graph, the anchor turns
 * off (OFF_NO_GRAPH). The longer steps that follow are the program's real ones: replay is tried
 * again, they get a trace of their own, and they replay. Turned off for good, none would. */
Test(tracer_implicit_no_graph, a_longer_step_after_a_short_first_trace_replays, .init = no_graph_setup)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    for (int it = 0; it < 100; it++) {
        iteration(x, it, it < 4 ? 1 : 10, true, ref, seen);
        cr_assert(!memcmp(ref, seen, sizeof ref), "iteration %d differs from eager arithmetic", it);
    }
    /* A variant of the long shape was built and replayed (on the fake clock, replay and eager
     * periods are alike: the cost model turns nothing off). */
    cgj_stats_t s = stats();
    cr_assert_geq(s.traces_built, 2, "built %llu trace(s)", (unsigned long long)s.traces_built);
    cr_assert_geq(s.steps_replayed, 20, "replayed %llu of 96 long steps", (unsigned long long)s.steps_replayed);
}

/* Steps as short as the trace turn it off once it has replayed 8 times in a row, for good. */
Test(tracer_implicit_no_graph, steps_as_short_as_the_trace_stay_off, .init = no_graph_setup)
{
    cgj_stats_t s = synced_loop(100, 1);
    cr_assert_eq(s.steps_replayed, 8, "replayed %llu", (unsigned long long)s.steps_replayed);
    cr_assert_eq(s.anchors_off, 1, "turned off %llu times", (unsigned long long)s.anchors_off);
}

/* A program whose phase changes: 40 short steps (the anchor turns off once its short trace has
 * replayed 8 times in a row), then long ones at the same anchor. The first long step, eager, has
 * replay tried again; the long steps get a trace of their own and replay. */
Test(tracer_implicit_no_graph, an_anchor_turned_off_replays_its_longer_steps_when_they_come, .init = no_graph_setup)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    for (int it = 0; it < 140; it++) {
        if (it == 40) {
            cgj_stats_t s = stats();
            cr_assert_eq(s.anchors_off, 1, "short steps: turned off %llu times", (unsigned long long)s.anchors_off);
            cr_assert_leq(s.steps_replayed, 8, "short steps: replayed %llu", (unsigned long long)s.steps_replayed);
        }
        iteration(x, it, it < 40 ? 1 : 10, true, ref, seen);
        cr_assert(!memcmp(ref, seen, sizeof ref), "iteration %d differs from eager arithmetic", it);
    }
    cgj_stats_t s = stats();
    cr_assert_geq(s.traces_built, 2, "built %llu trace(s)", (unsigned long long)s.traces_built);
    cr_assert_geq(s.steps_replayed, 8 + 20, "replayed %llu", (unsigned long long)s.steps_replayed);
}

/* ---- CGJIT_VERIFY on steps found by their cycle ---- */

static void auto_verify_setup(void)
{
    setenv("CGJIT_VERIFY", "1", 1);
    open_with("auto");
}

TestSuite(tracer_implicit_verify, .init = auto_verify_setup);

/* llm.c's step as CGJIT_STEP=auto finds it: a kernel that begins each iteration (the one call
 * of its kind in the loop, so the step begins there), kernels, read-backs, and kernels after the
 * last one, up to the next iteration's first kernel, which ends the step and begins the next.
 * That call must run for real in the step it begins, not inside the check of the ending step's
 * last graph: there it would join that graph's eager results, and its own step would replay it
 * a second time (copyscale is not idempotent: the read-backs would differ from the host's
 * arithmetic). */
Test(tracer_implicit_verify, the_next_steps_first_call_runs_once)
{
    CUdeviceptr x, y;
    float rx[N], ry[N], seen[N];
    two_buffers(&x, &y, rx, ry, 4);
    for (int it = 0; it < 40; it++) {
        OK(fk_copyscale_launch(&fk, NULL, y, x, 0.5f, N)); /* y = x/2 + y/2 */
        for (int i = 0; i < N; i++) ry[i] = 0.5f * rx[i] + 0.5f * ry[i];
        for (int r = 0; r < 2; r++) {
            for (int j = 0; j < 2; j++) {
                OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 0.02f, N, 1));
                host_axpb(rx, 0.5f, 0.02f);
            }
            OK(fk.dtoh(seen, y, sizeof seen));
            cr_assert(!memcmp(ry, seen, sizeof ry), "iteration %d differs from eager arithmetic", it);
        }
        for (int j = 0; j < 2; j++) {
            OK(fk_axpb_launch(&fk, NULL, x, 0.5f, 0.01f, N, 1));
            host_axpb(rx, 0.5f, 0.01f);
        }
    }
    cgj_stats_t s = stats();
    cr_assert_gt(s.steps_replayed, 20, "%llu steps replayed", (unsigned long long)s.steps_replayed);
    cr_assert_gt(s.verify_segments, 20, "%llu graphs checked", (unsigned long long)s.verify_segments);
    cr_assert_eq(s.verify_divergences, 0, "%llu divergences", (unsigned long long)s.verify_divergences);
}

static void sync_verify_setup(void)
{
    setenv("CGJIT_VERIFY", "1", 1);
    open_with("sync");
}

TestSuite(tracer_implicit_verify_sync, .init = sync_verify_setup);

/* CGJIT_STEP=sync: a step begins with the call after a read-back. That call is routed before
 * it runs, so the step's first segment is checked like the others (it used to be absorbed
 * before verify could take its memory, and went unchecked): every replayed step's graph. */
Test(tracer_implicit_verify_sync, the_first_segment_of_a_step_is_checked)
{
    cgj_stats_t s = synced_loop(40, 6);
    cr_assert_gt(s.steps_replayed, 30, "%llu steps replayed", (unsigned long long)s.steps_replayed);
    cr_assert_geq(s.verify_segments, s.steps_replayed, "%llu graphs checked in %llu replayed steps",
                  (unsigned long long)s.verify_segments, (unsigned long long)s.steps_replayed);
    cr_assert_eq(s.verify_divergences, 0);
    cr_assert_eq(s.verify_unchecked, 0, "%llu graphs unchecked", (unsigned long long)s.verify_unchecked);
}

/* llm.c's training loop with a sample every 50 steps (tests/apps/lt_sample_loop): each
 * iteration reads its result back (a synchronization), and every 50th is followed by 8 short
 * iterations of other kernels. The stream is then periodic twice over: with the iteration, and
 * with the 50 iterations and their sample (hundreds of calls, dozens of synchronizations), which
 * the detector locks on once the iteration's cycle breaks at a sample. A step of that long cycle
 * runs once every 50 iterations and is cut at each of its synchronizations anyway: steps of it
 * are taken between synchronizations, so that the iterations keep replaying. */
Test(tracer_implicit_auto, a_long_cycle_of_synchronized_iterations_is_stepped_at_its_synchronizations)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 9);
    float ref[N], seen[N];
    OK(fk.dtoh(ref, x, sizeof ref));
    int iters = 300, samples = 0;
    for (int it = 0; it < iters; it++) {
        iteration(x, it, 4, true, ref, seen);
        cr_assert(!memcmp(ref, seen, sizeof ref), "iteration %d differs from eager arithmetic", it);
        if (it % 50 != 49) continue;
        samples++;
        for (int tok = 1; tok <= 8; tok++) { /* the sample: another kernel, read back */
            OK(fk_addk_launch(&fk, NULL, x, 1, N));
            for (int i = 0; i < N; i++) ref[i] += 1.0f;
            OK(fk.dtoh(seen, x, sizeof seen));
            cr_assert(!memcmp(ref, seen, sizeof ref), "sample %d token %d differs from eager arithmetic", samples, tok);
        }
    }
    cgj_stats_t s = stats();
    char *buf = fk_report_text();
    cr_assert(buf);
    /* Every iteration after the first few, but the ones next to a sample, replays. */
    cr_assert_geq(s.steps_replayed, 260, "%llu of %d iterations replayed:\n%s", (unsigned long long)s.steps_replayed,
                  iters, buf);
    free(buf);
}

/* ---- one anchor at several places, found by CGJIT_STEP=sync ----
 * Every iteration begins with the same kernel and ends with a read-back, at one of four places
 * drawn at random, each with work of its own in between (none; more kernels on another buffer;
 * a kernel that reads the first one's result; more kernels on the same buffer), and a value of
 * the first kernel that changes now and then at each place: every step begins at the same kernel
 * after a synchronization, so one anchor holds every place's shape, as after each `nonzero` of a
 * detection model. The read-backs are checked against the same arithmetic on the host. */
static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
    return x;
}

static void host_addk(float *x, int k)
{
    for (int i = 0; i < N; i++) x[i] += (float)k;
}

static void host_copyscale(float *d, const float *s, float sc)
{
    for (int i = 0; i < N; i++) d[i] = sc * s[i] + 0.5f * d[i];
}

static void random_places_loop(uint32_t seed, int iters)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 4), y = fk_alloc_floats(&fk, N, 5), z = fk_alloc_floats(&fk, N, 6);
    float rx[N], ry[N], rz[N], seen[N];
    OK(fk.dtoh(rx, x, sizeof rx));
    OK(fk.dtoh(ry, y, sizeof ry));
    OK(fk.dtoh(rz, z, sizeof rz));
    for (int it = 0; it < iters; it++) {
        uint32_t p = mix32(seed * 2654435761U + (uint32_t)it) % 4;
        float b = 0.01f * (float)((it / (9 + 4 * (int)p)) % 3);
        OK(fk_axpb_launch(&fk, NULL, x, 0.5f, b, N, 1));
        host_axpb(rx, 0.5f, b);
        CUdeviceptr read = x;
        const float *ref = rx;
        if (p == 1) {
            for (int k = 1; k <= 5; k++) {
                OK(fk_addk_launch(&fk, NULL, y, k, N));
                host_addk(ry, k);
            }
            read = y, ref = ry;
        } else if (p == 2) {
            OK(fk_copyscale_launch(&fk, NULL, z, x, 0.25f, N));
            host_copyscale(rz, rx, 0.25f);
            OK(fk_addk_launch(&fk, NULL, z, 3, N));
            host_addk(rz, 3);
            read = z, ref = rz;
        } else if (p == 3) {
            for (int k = 0; k < 6; k++) {
                OK(fk_addk_launch(&fk, NULL, x, k % 2 ? -1 : 1, N));
                host_addk(rx, k % 2 ? -1 : 1);
            }
        }
        OK(fk.dtoh(seen, read, sizeof seen));
        cr_assert(!memcmp(ref, seen, sizeof seen), "seed %u, iteration %d (place %u) differs from eager arithmetic",
                  seed, it, p);
    }
}

TestSuite(tracer_implicit_places, .init = sync_setup);

Test(tracer_implicit_places, places_at_random_behind_one_anchor_stay_exact_and_replay)
{
    for (uint32_t seed = 1; seed <= 4; seed++) random_places_loop(seed, 300);
    cgj_stats_t s = stats();
    cr_assert_geq(s.steps_replayed, 1000, "replayed %llu of 1200 steps (%llu side exits, %llu switches)",
                  (unsigned long long)s.steps_replayed, (unsigned long long)s.side_exits,
                  (unsigned long long)s.variant_switches);
}

TestSuite(tracer_implicit_places_auto, .init = auto_setup);

Test(tracer_implicit_places_auto, places_at_random_stay_exact_under_auto)
{
    for (uint32_t seed = 1; seed <= 2; seed++) random_places_loop(seed, 300);
}
