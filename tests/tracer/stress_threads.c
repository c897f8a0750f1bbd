/*
 * stress_threads.c — many threads stepping at once against the fake driver, without Criterion
 * (which cannot start under ThreadSanitizer), so that the ThreadSanitizer build runs it:
 * scripts/tsan.sh. All at once:
 * - THREADS threads run STEPS marked steps of their own on their own streams, every step also
 *   launching on a shared stream that another thread observes (synchronizes), waiting on a
 *   shared event;
 * - LEGACY threads run their steps on the legacy stream, which every one of them shares: each
 *   call there must first flush the absorbed work of the others (cgj_step_observe), so threads
 *   flush one another all the time, while each reads its own pending state (tracer/step.h,
 *   cgj_others_pending_on: counts read without a lock while other threads change them);
 * - a flusher synchronizes the context and the legacy stream, flushing whichever thread holds
 *   absorbed work;
 * - a reporter reads what the API offers (cgj_stats, cgj_trace_info, cgj_mode_get, cgj_report).
 * With the argument `implicit` the same runs without markers under CGJIT_STEP=sync (`auto`:
 * CGJIT_STEP=auto, steps found as cycles): each step ends at a synchronization of its stream, and the odd workers'
 * steps launch 0 to 4 launches more from one step to the next (an identity), so their steps run eagerly while the
 * others replay: calls of eager steps pass cgjit by its shortest path (cgj_step_passes) beside threads that flush one
 * another. At the end every thread's buffer must equal its eager result bitwise. Exit status 0 on success, 1 on a
 * mismatch or when nothing replayed or no thread flushed another (implicit: when no step replayed or none ran eagerly;
 * under CGJIT_VERIFY also when a checked graph diverged, which with every thread's results eager's is verify's own
 * doing, or none was checked).
 */
#define _GNU_SOURCE
#include <cgjit.h>
#include <cuda.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda.h"

enum { THREADS = 6, LEGACY = 8, LEGACY_OPS = 6, STEPS = 200, N = 256 };

static __typeof__(cuLaunchKernel) *launch;
static __typeof__(cuMemAlloc) *mem_alloc;
static __typeof__(cuMemcpyHtoD) *htod;
static __typeof__(cuMemcpyDtoH) *dtoh;
static __typeof__(cuStreamCreate) *stream_create;
static __typeof__(cuStreamSynchronize) *stream_sync;
static __typeof__(cuEventCreate) *event_create;
static __typeof__(cuEventRecord) *event_record;
static __typeof__(cuStreamWaitEvent) *stream_wait;
static __typeof__(cuCtxSynchronize) *ctx_sync;
static __typeof__(cuStreamQuery) *stream_query;
static CUfunction axpb;
static CUstream shared_stream;
static CUevent shared_event;
static int failures;
static pthread_barrier_t start; /* the workers begin their steps together */
static bool implicit;           /* no markers: CGJIT_STEP=sync finds the steps */

static void step_begin(const char *name)
{
    if (!implicit) cgj_trace_begin(name);
}

/* The end of a step: a marker, or (implicit) the synchronization of its stream that ends it. */
static void step_end(CUstream s);

#define CHECK(call)                                                      \
    do {                                                                 \
        CUresult r_ = (call);                                            \
        if (r_ != CUDA_SUCCESS) {                                        \
            fprintf(stderr, "stress_threads: %s: %d\n", #call, (int)r_); \
            exit(1);                                                     \
        }                                                                \
    } while (0)

static void k_axpb(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    (void)g, (void)b, (void)smem;
    float *x = *(float **)p[0], a = *(float *)p[1], c = *(float *)p[2];
    int n = *(int *)p[3];
    for (int i = 0; i < n; i++) x[i] = a * x[i] + c;
}

static void run(CUstream s, CUdeviceptr x, float a, float b)
{
    int n = N;
    void *params[] = {&x, &a, &b, &n};
    CHECK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

static void step_end(CUstream s)
{
    if (implicit) CHECK(stream_sync(s));
    else cgj_trace_end();
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    CUstream s;
    CUdeviceptr x, mine; /* mine: this thread's buffer for its work on the shared stream */
    CHECK(stream_create(&s, CU_STREAM_NON_BLOCKING));
    CHECK(mem_alloc(&x, N * sizeof(float)));
    CHECK(mem_alloc(&mine, N * sizeof(float)));
    float init[N], want[N], got[N];
    for (int i = 0; i < N; i++) init[i] = want[i] = (float)(i + id);
    CHECK(htod(x, init, sizeof init));
    char name[32];
    snprintf(name, sizeof name, "worker%d", id % 3); /* threads share anchors: one runs, others wait */
    pthread_barrier_wait(&start);
    for (int step = 0; step < STEPS; step++) {
        float a = 0.5f, b = (float)(step % 7);
        step_begin(name);
        run(s, x, a, b);
        run(s, x, 1.0f, 0.25f);
        for (int k = 0; implicit && id % 2 && k < (step * 7) % 5; k++) run(s, x, 1.0f, 0.0f);
        if (step % 5 == 0) CHECK(stream_wait(s, shared_event, 0));
        if (step % 3 == 0) run(shared_stream, mine, 1.0f, 0.0f);
        step_end(s);
        if (step % 4 == 0) CHECK(stream_sync(shared_stream));
        for (int i = 0; i < N; i++) want[i] = (a * want[i] + b) + 0.25f;
    }
    CHECK(stream_sync(s));
    CHECK(dtoh(got, x, sizeof got));
    if (memcmp(got, want, sizeof got)) {
        fprintf(stderr, "stress_threads: thread %d: results differ from eager\n", id);
        __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* On the legacy stream, shared by all LEGACY threads, each with an anchor of its own:
 * LEGACY_OPS launches per step (enough for a graph, so that replay holds them), a query of the
 * legacy stream now and then (a host-observing call: it flushes the others' work first). */
static void *legacy_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    CUdeviceptr x;
    CHECK(mem_alloc(&x, N * sizeof(float)));
    float init[N], want[N], got[N];
    for (int i = 0; i < N; i++) init[i] = want[i] = (float)(2 * i - id);
    CHECK(htod(x, init, sizeof init));
    char name[32];
    snprintf(name, sizeof name, "legacy%d", id);
    pthread_barrier_wait(&start);
    for (int step = 0; step < STEPS; step++) {
        float a = 0.75f, b = (float)(step % 5);
        step_begin(name);
        run(CU_STREAM_LEGACY, x, a, b);
        for (int k = 1; k < LEGACY_OPS; k++) {
            if (k == LEGACY_OPS / 2) sched_yield(); /* another thread's call may come here */
            run(CU_STREAM_LEGACY, x, 1.0f, -0.5f);
        }
        if (step % 7 == 3) (void)stream_query(CU_STREAM_LEGACY);
        step_end(CU_STREAM_LEGACY);
        for (int i = 0; i < N; i++) {
            want[i] = a * want[i] + b;
            for (int k = 1; k < LEGACY_OPS; k++) want[i] -= 0.5f;
        }
    }
    CHECK(stream_sync(CU_STREAM_LEGACY));
    CHECK(dtoh(got, x, sizeof got));
    if (memcmp(got, want, sizeof got)) {
        fprintf(stderr, "stress_threads: legacy thread %d: results differ from eager\n", id);
        __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static volatile int done;
static int ctx_sync_refused;

/* Outside any step: synchronizations that observe every thread's absorbed work. A context
 * synchronization fails while any stream captures (the driver's rule, which the fake keeps):
 * cgjit builds its graphs by capture on the thread whose step it is, and must hold the program's
 * context synchronizations back meanwhile (graphs/graph.h): one that fails is a failure. */
static void *flusher(void *arg)
{
    (void)arg;
    for (unsigned k = 0; !__atomic_load_n(&done, __ATOMIC_RELAXED); k++) {
        if (k % 2 == 0) CHECK(stream_sync(CU_STREAM_LEGACY));
        else {
            CUresult r = ctx_sync();
            if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) ctx_sync_refused++;
            else CHECK(r);
        }
        usleep(100);
    }
    return NULL;
}

static void *reporter(void *arg)
{
    (void)arg;
    FILE *devnull = fopen("/dev/null", "w");
    while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
        cgj_stats_t st;
        cgj_trace_info_t info;
        cgj_stats(&st);
        cgj_trace_info("worker0", &info);
        cgj_trace_info("legacy1", &info);
        (void)cgj_mode_get();
        cgj_report(devnull);
        CHECK(event_record(shared_event, shared_stream));
        usleep(200);
    }
    fclose(devnull);
    return NULL;
}

int main(int argc, char **argv)
{
    bool auto_steps = argc == 2 && !strcmp(argv[1], "auto");
    const char *verify_env = getenv("CGJIT_VERIFY");
    bool verify = verify_env && strcmp(verify_env, "0") != 0;
    implicit = auto_steps || (argc == 2 && !strcmp(argv[1], "implicit"));
    if (argc > 2 || (argc == 2 && !implicit)) {
        fprintf(stderr, "usage: stress_threads [implicit|auto]\n");
        return 2;
    }
    if (implicit) setenv("CGJIT_STEP", auto_steps ? "auto" : "sync", 1);
    char exe[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 1;
    exe[n] = '\0';
    snprintf(path, sizeof path, "%s/fakecuda/libcuda.so.1", dirname(exe));
    setenv("CGJIT_DRIVER", path, 1);
    setenv("CGJIT_COST", "0", 0);   /* replay never pays on the fake driver: keep it on all the same */
    setenv("CGJIT_GOVERN", "0", 0); /* nor let the governor, on the machine's pace, make it dormant */
    void *h = dlopen(path, RTLD_NOW);
    if (!h) return 1;
    __typeof__(cuGetProcAddress) *gpa = (__typeof__(gpa))dlsym(h, "cuGetProcAddress_v2");
    __typeof__(fakecuda_register_kernel) *reg = (__typeof__(reg))dlsym(h, "fakecuda_register_kernel");
    if (!gpa || !reg) return 1;
#define GET(var, name) CHECK(gpa(name, (void **)&var, 13000, 0, NULL))
    GET(launch, "cuLaunchKernel");
    GET(mem_alloc, "cuMemAlloc");
    GET(htod, "cuMemcpyHtoD");
    GET(dtoh, "cuMemcpyDtoH");
    GET(stream_create, "cuStreamCreate");
    GET(stream_sync, "cuStreamSynchronize");
    GET(event_create, "cuEventCreate");
    GET(event_record, "cuEventRecord");
    GET(stream_wait, "cuStreamWaitEvent");
    GET(ctx_sync, "cuCtxSynchronize");
    GET(stream_query, "cuStreamQuery");
    static const size_t sizes[] = {8, 4, 4, 4};
    axpb = reg("axpb", k_axpb, 4, sizes, 0, 0);
    CHECK(stream_create(&shared_stream, 0));
    CHECK(event_create(&shared_event, CU_EVENT_DISABLE_TIMING));
    CHECK(event_record(shared_event, shared_stream));
    pthread_t th[THREADS + LEGACY], rep, flush;
    pthread_create(&rep, NULL, reporter, NULL);
    pthread_create(&flush, NULL, flusher, NULL);
    pthread_barrier_init(&start, NULL, THREADS + LEGACY);
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < LEGACY; i++) pthread_create(&th[THREADS + i], NULL, legacy_worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS + LEGACY; i++) pthread_join(th[i], NULL);
    __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
    pthread_join(rep, NULL);
    pthread_join(flush, NULL);
    pthread_barrier_destroy(&start);
    cgj_stats_t st;
    cgj_stats(&st);
    printf("stress_threads%s: %d + %d (legacy stream) threads x %d steps, %llu replayed, %llu eager, %llu side "
           "exits, %d mismatches\n",
           auto_steps ? " auto"
           : implicit ? " implicit"
                      : "",
           THREADS, LEGACY, STEPS, (unsigned long long)st.steps_replayed, (unsigned long long)st.steps_eager,
           (unsigned long long)st.side_exits, failures);
    if (ctx_sync_refused)
        printf("stress_threads: %d cuCtxSynchronize calls met a graph capture of cgjit's on another thread\n",
               ctx_sync_refused);
    /* CGJIT_VERIFY: a divergence here is verify's own (each thread's results equal eager's). */
    if (verify)
        printf("stress_threads: CGJIT_VERIFY: %llu graphs checked, %llu diverged, %llu not checked\n",
               (unsigned long long)st.verify_segments, (unsigned long long)st.verify_divergences,
               (unsigned long long)st.verify_unchecked);
    if (verify && (st.verify_divergences || !st.verify_segments)) return 1;
    if (implicit) return failures || ctx_sync_refused || st.steps_replayed == 0 || st.steps_eager == 0;
    return failures || ctx_sync_refused || st.steps_replayed == 0 || st.side_exits == 0;
}
