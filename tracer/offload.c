/*
 * offload.c — chunks launched on a thread of cgjit's (CGJIT_LAUNCH_ASYNC).
 *
 * A replayed step launches its graphs in chunks as it absorbs them (graphs/graph.c): where the
 * program works on the host between its calls (Python between PyTorch's launches), a chunk ends
 * there, and its launch (the patches its nodes take, the events that join its streams, the
 * graph launch: several microseconds of driver calls) lands on the program's thread between its
 * calls. Here a chunk that ends inside a segment (by host time or op count) is handed to one
 * thread of cgjit's, which patches and launches it while the program goes on.
 *
 * Why nothing changes for the program. A handed chunk is, to everyone but that thread, absorbed
 * work not launched yet, which replay already holds back until a boundary, a flush or the step's
 * end; every place that issues held work first waits for the owner's handed chunks (`drain`):
 *  - a launch on the program's thread (replay.c: a boundary, the step's end, a chunk that must be
 *    launched before the program's call returns: a collective, a kernel that reaches mapped
 *    host memory, another thread's handoff);
 *  - a call the program's thread makes for real in a replayed step, other than a library call
 *    whose own driver calls replay goes on to match (step.c);
 *  - a flush of the step's held work, by its thread or by another that observes it (exits.c);
 *  - a capture of the program's, a module or context going away, the process's exit.
 * The owner's `pending` stays set until its step's last launch, so other threads' calls on its
 * streams come through that flush. The queue is one, in order: chunks reach the GPU in the
 * order the program made their calls, as from the program's thread.
 *
 * A chunk the driver refuses to patch (a copy of another kind of memory) or to launch runs
 * eagerly here, its ops with this run's values, in order. A refused op's values are guarded
 * like its topology from then on (its next runs leave the trace there or make a variant, as a
 * refusal on the program's thread has them). A failed launch is left for the owner, which at its
 * next drain stops replaying the anchor and goes on eagerly, and so is a chunk that could not
 * run as made either, whose error the program gets at its next call (exits.c).
 *
 * Not under CGJIT_VERIFY (its windows check each graph on the program's thread), nor under
 * CGJIT_BUSY (CUPTI tags work by the thread that launched it: the step's), and not for a
 * segment too small for a graph (issued as made) or one on a per-thread default stream (the
 * handle names the stream of the thread that uses it: the launch thread's would be another). fork(): the child starts
 * with no launch thread and nothing handed (the parent's chunks are the parent's).
 */
#include "tracer/tracer.h"
#include "graphs/gpubusy.h"
#include "graphs/graph.h"
#include "allocator/pointers.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/nvtx.h"

#include <pthread.h>
#include <stdlib.h>

enum { QUEUE = 256 };

typedef struct {
    cgj_thread_t *t; /* the owner: its count of handed chunks, and where a failure is left */
    cgj_trace_t *tr;
    uint32_t seg;
    uint64_t host_gen; /* of the owner's view when it handed the chunk */
    CUcontext ctx;
    const char *name; /* the anchor's, for NVTX */
} job_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER; /* a chunk handed, or stop */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER; /* a chunk launched, or room in the queue */
static job_t queue[QUEUE];
static uint32_t head, count;
static bool up, stopping, failed_start;

/* A chunk the driver would not take runs eagerly, in order; what happened is left for the owner. */
static void refused(const job_t *j, CUresult err, uint32_t op)
{
    const cgj_segment_t *seg = &j->tr->segs[j->seg];
    uint32_t issued;
    CUresult r = cgj_graph_issue_ops(j->tr, seg->first, seg->end, &issued);
    CGJ_LOG(guards, "segment %u of '%s' not launched (%s): its %u ops issued as made%s", j->seg, j->name,
            cgj_driver_errstr(err), seg->end - seg->first, r == CUDA_SUCCESS ? "" : ", which failed too");
    CUresult none = CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) /* work lost: the program gets the error */
        __atomic_compare_exchange_n(&j->t->launch_lost, &none, r, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    if (op != UINT32_MAX) {
        /* Its values are guarded like its topology from now on, as replay.c's patch_refused
         * has them: the owner reads it at its next run of the trace, after its drain. */
        j->tr->list.ops[op].fixed = true;
    } else {
        none = CUDA_SUCCESS; /* the launch failed: the owner stops replaying the anchor */
        __atomic_compare_exchange_n(&j->t->launch_err, &none, err, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
}

CUresult cgj_chunk_launch(cgj_trace_t *tr, uint32_t seg, uint64_t host_gen, const char *name, uint32_t *refused,
                          uint32_t issued)
{
    cgj_patched_t patched = {0, 0, 0};
    cgj_nvtx_push(CGJ_NVTX_LAUNCH, name, seg);
    uint64_t t0 = cgj_now_ns();
    CUresult r = cgj_graph_launch(tr, seg, host_gen, &patched, refused, issued);
    CGJ_STAT_ADD(launch_host_ns, cgj_now_ns() - t0);
    cgj_nvtx_pop();
    CGJ_STAT_ADD(params_patched, patched.nodes);
    CGJ_STAT_ADD(params_patched_on_gpu, patched.on_gpu);
    CGJ_STAT_ADD(patch_launches, patched.launches);
    return r;
}

static void run(const job_t *j)
{
    CUcontext cur = NULL;
    if (j->ctx && cgj_drv.r_cuCtxGetCurrent && cgj_drv.r_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != j->ctx)
        cgj_drv.r_cuCtxSetCurrent(j->ctx);
    uint32_t op = UINT32_MAX;
    CUresult r = cgj_chunk_launch(j->tr, j->seg, j->host_gen, j->name, &op, 0);
    if (r == CUDA_SUCCESS) CGJ_STAT_ADD(graph_launches, 1), CGJ_STAT_ADD(launches_handed, 1);
    else refused(j, r, op);
}

static void *loop(void *arg)
{
    (void)arg;
    cgj_internal_calls = 1; /* any call this thread makes passes the wrappers untraced */
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!count && !stopping) pthread_cond_wait(&wake, &lock);
        if (!count) break; /* stopping, nothing left */
        job_t j = queue[head];
        pthread_mutex_unlock(&lock);
        run(&j);
        pthread_mutex_lock(&lock);
        head = (head + 1) % QUEUE, count--; /* taken off only now: a drain sees it in hand */
        __atomic_fetch_sub(&j.t->handed, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&done);
    }
    up = false;
    pthread_cond_broadcast(&done);
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* The process exits: what is handed is launched, and the thread ends. */
static void stop(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_cond_broadcast(&wake);
    while (up) pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
}

/* Under the lock: the thread, started at the first chunk (cgj_spawn: every signal blocked). */
static bool start_locked(void)
{
    if (up) return true;
    if (failed_start || stopping) return false;
    static bool hooked;
    if (!hooked) hooked = atexit(stop) == 0;
    up = hooked && cgj_spawn(loop);
    if (!up) {
        failed_start = true;
        CGJ_LOG(trace, "%s", "no launch thread: chunks are launched on the program's threads");
    }
    return up;
}

/* Does the segment use a per-thread default stream? That stream is the owner's own: launched from
 * another thread, the same handle names that thread's. */
static bool per_thread(const cgj_segment_t *seg)
{
    if (seg->home == CU_STREAM_PER_THREAD) return true;
    for (uint32_t j = 0; j < seg->nothers; j++)
        if (seg->others[j] == CU_STREAM_PER_THREAD) return true;
    return false;
}

bool cgj_offload_wanted(const cgj_thread_t *t, const cgj_segment_t *seg, const cgj_op_t *last)
{
    return cgj_cfg.LAUNCH_ASYNC && !cgj_verify_on() && !cgj_gpubusy_on() && !seg->eager && seg->ncapture &&
           !last->handoff && (last->chunk_end == CGJ_REASON_NONE || last->chunk_end == CGJ_REASON_BREAK_IDLE) &&
           t->anchor && !per_thread(seg);
}

bool cgj_offload_hand(cgj_thread_t *t, cgj_trace_t *tr, uint32_t seg)
{
    pthread_mutex_lock(&lock);
    bool ok = start_locked();
    while (ok && count == QUEUE) pthread_cond_wait(&done, &lock); /* the launch thread catches up */
    if (ok) {
        queue[(head + count) % QUEUE] = (job_t){t, tr, seg, cgj_pointer_host_generation(), tr->ctx, t->anchor->name};
        count++;
        __atomic_fetch_add(&t->handed, 1, __ATOMIC_RELAXED);
        pthread_cond_signal(&wake);
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

void cgj_offload_wait(cgj_thread_t *t)
{
    if (!__atomic_load_n(&t->handed, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&lock);
    while (__atomic_load_n(&t->handed, __ATOMIC_ACQUIRE)) pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
}

void cgj_offload_settle(void)
{
    pthread_mutex_lock(&lock);
    while (count) pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
}

void cgj_offload_forked(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&done, NULL);
    head = count = 0;
    up = stopping = failed_start = false; /* no thread here: the first chunk handed starts one */
}
