/*
 * builder.c — a step's graphs built off the program's thread (CGJIT_BUILD_BACKGROUND).
 *
 * The run that completes a recording hands it here at its end (step.c) with its anchor still
 * taken (`busy`, with `building` set): one thread of cgjit's plans the step's memory, captures
 * its segments, instantiates and uploads their graphs (build.c), publishes the variant and
 * gives the anchor back. Meanwhile the program goes on, and every run of the anchor runs eagerly,
 * unrecorded (step.c's take: a building anchor is neither taken nor given a sibling); the run
 * after the build replays. A build costs the program's thread nothing but the hand-over.
 *
 * What the build reads of the program's state is taken on the program's thread, when the run
 * ends: the context, and, in build.c's cgj_build_prepare, the host generation the graphs' host
 * operands belong to. Which kernels reach mapped host memory is asked here (build.c's
 * mark_host), and holds only if no page-locked host memory went away since the run ended (the
 * generation says so; else the build gives up). The rest is the recording's own.
 *
 * The driver objects a queued recording names must outlive its build:
 *  - a capture of the program's own (global mode forbids cgjit's capture and instantiation to
 *    every thread, and they would invalidate it): the capture's begin waits for the build in
 *    hand (cgj_builder_settle), and no build starts while any capture of the program runs;
 *  - a module or library unloaded, a context destroyed or reset: the call first waits for the
 *    build in hand and gives the queued ones back (their anchors record again);
 *  - the process's exit: the build in hand ends, the queued ones are given back;
 *  - fork(): the child starts with no builder and an empty queue (the thread did not come along,
 *    and the parent's build in hand is not the child's to wait for); anchors a build held stay
 *    eager there.
 * A build that fails here for any reason but the pool's is not retried here: its anchor's next
 * build runs on the program's thread, where the failure is judged as it always was (build.c).
 *
 * Not under CGJIT_VERIFY, nor where fusion is on (CGJIT_MODE other than reduce-overhead: its
 * pass times library calls at the build): those builds stay on the program's thread.
 */
#include "tracer/tracer.h"
#include "base/driver.h"
#include "base/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

typedef struct job {
    cgj_anchor_t *a;
    cgj_oplist_t rec;
    CUcontext ctx;
    struct job *next;
} job_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER; /* a job queued, or stop */
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER; /* the job in hand is done */
static job_t *head, *tail;
static bool up;       /* the thread runs */
static bool in_hand;  /* it builds a job now */
static bool stopping; /* the process exits: no more jobs */

/* The anchor goes back to the program: its next run replays (built) or records again. */
static void give_back(job_t *j)
{
    /* Free first: a thread that finds it no longer building must find it free (step.c's take
     * would make a sibling of a taken anchor). */
    __atomic_store_n(&j->a->busy, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&j->a->building, 0, __ATOMIC_RELEASE);
    cgj_oplist_free(&j->rec);
    cgj_free(j);
}

static bool build(job_t *j)
{
    cgj_anchor_t *a = j->a;
    if (j->ctx && cgj_drv.r_cuCtxSetCurrent) cgj_drv.r_cuCtxSetCurrent(j->ctx);
    uint32_t pool_failures = a->pool_failures;
    CGJ_LOG(trace, "anchor '%s': built by cgjit's builder thread (%u ops)", a->name, j->rec.n);
    bool built = cgj_build_variant(a, &j->rec, true);
    if (!built && a->pool_failures == pool_failures)
        a->build_here = true; /* failed, not for the pool: the next build is the program's */
    return built;
}

static void *loop(void *arg)
{
    (void)arg;
    cgj_internal_calls = 1; /* any call this thread makes passes the wrappers untraced */
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!stopping && (!head || cgj_program_capturing())) {
            if (!head) {
                pthread_cond_wait(&wake, &lock);
                continue;
            }
            /* A capture of the program's runs: no build starts before it ends (its end is
             * not signalled here; looked at again every millisecond). */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 1000000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&wake, &lock, &ts);
        }
        if (stopping) break;
        job_t *j = head;
        head = j->next;
        if (!head) tail = NULL;
        in_hand = true;
        pthread_mutex_unlock(&lock);
        bool built = build(j);
        give_back(j);
        if (built) CGJ_STAT_ADD(builds_background, 1); /* counted once its anchor is free */
        pthread_mutex_lock(&lock);
        in_hand = false;
        pthread_cond_broadcast(&idle);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Under the lock: the queued jobs go back to their anchors. */
static void drop_queued(void)
{
    while (head) {
        job_t *j = head;
        head = j->next;
        CGJ_LOG(trace, "anchor '%s': its queued build is given up; it records again", j->a->name);
        give_back(j);
    }
    tail = NULL;
}

static void stop(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    drop_queued();
    pthread_cond_broadcast(&wake);
    while (in_hand) pthread_cond_wait(&idle, &lock);
    pthread_mutex_unlock(&lock);
}

/* Under the lock: the thread, started at the first job (cgj_spawn: every signal blocked). */
static bool start_locked(void)
{
    if (up) return true;
    static bool hooked;
    if (!hooked) hooked = atexit(stop) == 0;
    if (!hooked) return false;
    up = cgj_spawn(loop);
    if (!up) CGJ_LOG(trace, "%s", "no builder thread: steps are built on the program's threads");
    return up;
}

bool cgj_builder_wanted(const cgj_anchor_t *a)
{
    return cgj_cfg.BUILD_BACKGROUND && !cgj_cfg.VERIFY && !a->build_here && cgj_jit_mode() == CGJ_JIT_REDUCE_OVERHEAD;
}

bool cgj_builder_hand(cgj_anchor_t *a, cgj_oplist_t *rec, CUcontext ctx)
{
    pthread_mutex_lock(&lock);
    bool ok = !stopping && start_locked();
    if (ok) {
        job_t *j = cgj_xcalloc(1, sizeof *j);
        j->a = a, j->rec = *rec, j->ctx = ctx;
        *rec = (cgj_oplist_t){0};
        __atomic_store_n(&a->building, 1, __ATOMIC_RELAXED);
        if (tail) tail->next = j;
        else head = j;
        tail = j;
        pthread_cond_signal(&wake);
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

void cgj_builder_settle(bool drop)
{
    pthread_mutex_lock(&lock);
    if (drop) drop_queued();
    while (in_hand) pthread_cond_wait(&idle, &lock);
    pthread_mutex_unlock(&lock);
}

void cgj_builder_forked(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&idle, NULL);
    head = tail = NULL;                            /* the parent's jobs: their anchors stay taken (eager) here */
    up = false, in_hand = false, stopping = false; /* no thread here: the first hand-over starts one */
}
