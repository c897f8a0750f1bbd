/*
 * threads.c — the threads that step: their registry, their locks, their mode changes, and the
 * process-wide counters the wrappers read before anything else.
 *
 * Lock order: the registry, then one thread's lock. A thread takes its own lock only around its
 * own step calls, never while holding or waiting for the registry; another thread takes it to
 * flush work the first one absorbed (cgj_step_observe).
 *
 * What a flushing thread changes and the owner reads without its lock (mode, pending,
 * pending_mask, deferred: the "(shared)" fields of cgj_thread_t) is written here only, under
 * the lock and atomically; the owner's unlocked reads are atomic too (cgj_thread_mode,
 * cgj_thread_pending in step.h), so that no plain read meets a write of another thread.
 */
#include "tracer/tracer.h"
#include "base/nvtx.h"
#include "base/spin.h"
#include "base/vec.h"

#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread cgj_thread_t cgj_tls;
int cgj_tracing_threads;
int cgj_pending_threads;
cgj_stats_t cgj_g_stats;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_thread_t **registry;
static size_t nregistry, capregistry;

void cgj_thread_unregister(cgj_thread_t *t)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nregistry; i++)
        if (registry[i] == t) registry[i] = registry[--nregistry];
    pthread_mutex_unlock(&registry_lock);
    t->registered = false;
}

bool cgj_thread_register(cgj_thread_t *t)
{
    if (CGJ_LIKELY(t->registered)) return false;
    t->find.sync_long = syscall(SYS_gettid) == getpid() ? CGJ_SYNC_LONG : CGJ_SYNC_LONG_WORKER;
    pthread_mutex_lock(&registry_lock);
    CGJ_VEC_PUSH(registry, nregistry, capregistry, t);
    pthread_mutex_unlock(&registry_lock);
    t->registered = true;
    return true;
}

void cgj_registry_lock(void)
{
    pthread_mutex_lock(&registry_lock);
}

void cgj_registry_unlock(void)
{
    pthread_mutex_unlock(&registry_lock);
}

size_t cgj_registry_count(void)
{
    return nregistry;
}

cgj_thread_t *cgj_registry_get(size_t i)
{
    return registry[i];
}

/* CGJIT_NVTX: a recording's range, on the thread that records, from the mode change that starts
 * it to the one that ends it (a recording that another thread started, observing this thread's
 * replay, has none); an eager probe's range ends with its step. */
static __attribute__((cold, noinline)) void nvtx_mode(const cgj_thread_t *t, cgj_mode_t to)
{
    if (t != &cgj_tls) return;
    if (to == CGJ_MODE_RECORD && t->mode != CGJ_MODE_RECORD && t->anchor)
        cgj_nvtx_step_open(CGJ_NVTX_RECORD, t->anchor->name);
    else if (t->mode == CGJ_MODE_RECORD && to != CGJ_MODE_RECORD) cgj_nvtx_step_close(CGJ_NVTX_RECORD);
    if (to == CGJ_MODE_OFF) cgj_nvtx_step_close(CGJ_NVTX_PROBE);
}

void cgj_thread_go(cgj_thread_t *t, cgj_event_t ev, cgj_mode_t to)
{
    CGJ_ASSERT(cgj_machine_allows(t->mode, ev, to), "a step transition outside the table (tracer/machine.h)");
    if (CGJ_UNLIKELY(cgj_nvtx_on)) nvtx_mode(t, to);
    bool was = t->mode >= CGJ_MODE_EAGER, is = to >= CGJ_MODE_EAGER;
    if (t->mode == CGJ_MODE_RECORD && to != CGJ_MODE_RECORD) cgj_thread_set_pending(t, false);
    if (was != is) __atomic_fetch_add(&cgj_tracing_threads, is ? 1 : -1, __ATOMIC_RELAXED);
    /* Written under t's lock (by t, or by a thread flushing it); read by t without it in
     * cgj_tracing(): atomic. */
    __atomic_store_n(&t->mode, to, __ATOMIC_RELAXED);
}

cgj_mode_t cgj_thread_eager_mode(const cgj_thread_t *t)
{
    return t->implicit ? CGJ_MODE_EAGER : CGJ_MODE_PASSTHRU;
}

uint32_t cgj_pending_on[CGJ_PENDING_BUCKETS];

void cgj_thread_set_pending(cgj_thread_t *t, bool pending)
{
    if (!pending) { /* the streams it had pending work on have none of it any more */
        for (uint64_t m = t->pending_mask; m; m &= m - 1)
            __atomic_fetch_sub(&cgj_pending_on[__builtin_ctzll(m)], 1, __ATOMIC_RELAXED);
        __atomic_store_n(&t->pending_mask, 0, __ATOMIC_RELAXED);
    }
    if (t->pending == pending) return;
    __atomic_store_n(&t->pending, pending, __ATOMIC_RELAXED); /* other threads read it unlocked */
    __atomic_fetch_add(&cgj_pending_threads, pending ? 1 : -1, __ATOMIC_RELAXED);
}

/* A recording's streams are published like absorbed work, so that another thread's call there
 * reaches this thread (exits.c): not to flush anything, but to note a handoff. */
void cgj_thread_recorded(cgj_thread_t *t, CUstream s)
{
    cgj_thread_absorbed(t, s);
}

void cgj_thread_absorbed(cgj_thread_t *t, CUstream s)
{
    unsigned b = cgj_stream_bucket(s);
    if (!(t->pending_mask >> b & 1)) {
        __atomic_store_n(&t->pending_mask, t->pending_mask | 1ull << b, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cgj_pending_on[b], 1, __ATOMIC_RELAXED);
    }
    cgj_thread_set_pending(t, true);
}


/* While an error waits, the thread counts as tracing: its calls leave the fast path, and the
 * first one that returns success returns the error instead. */
void cgj_thread_defer(cgj_thread_t *t, CUresult err)
{
    if (err == CUDA_SUCCESS || t->deferred != CUDA_SUCCESS) return;
    __atomic_store_n(&t->deferred, err, __ATOMIC_RELAXED);
    __atomic_fetch_add(&cgj_tracing_threads, 1, __ATOMIC_RELAXED);
}

CUresult cgj_thread_take_deferred(cgj_thread_t *t)
{
    CUresult err = t->deferred;
    if (err == CUDA_SUCCESS) return err;
    __atomic_store_n(&t->deferred, CUDA_SUCCESS, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&cgj_tracing_threads, 1, __ATOMIC_RELAXED);
    return err;
}

void cgj_threads_forked(void)
{
    pthread_mutex_init(&registry_lock, NULL);
    nregistry = 0;
    memset(cgj_pending_on, 0, sizeof cgj_pending_on);
    __atomic_store_n(&cgj_tracing_threads, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cgj_pending_threads, 0, __ATOMIC_RELAXED);
    /* This thread's step belonged to the parent: the child starts outside any step. */
    cgj_thread_t fresh = {.last = NULL};
    cgj_tls = fresh;
}
