/*
 * watch.c — replayed collectives that never complete are reported, not waited on in silence.
 *
 * A collective's kernels wait for the same call on every peer. When a peer never makes it (the
 * program's ranks diverged, or a peer died), the replayed chunk never completes and the program
 * hangs at its next synchronization, as it would eagerly. cgjit does not hold such work back
 * (graphs/graph.c ends a chunk with each collective), but it says what it launched: after a
 * chunk that ends with a collective, the thread records an event (one in flight per thread at
 * a time: a stuck collective stops everything after it on its stream, so the first one found
 * is the one to report), and a watchdog thread, started with the first, queries it. Past
 * CGJIT_COLLECTIVE_TIMEOUT_S the watchdog prints which anchor and call were left waiting
 * and counts it (stat collectives_stuck); it never aborts the program's work.
 */
#include "tracer/tracer.h"
#include "base/driver.h"
#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WATCH_SLOTS 64
#define WATCH_POLL_MS 100

typedef struct slot {
    int state; /* 0 free, 1 armed: an event in flight (the watchdog reads it) */
    bool told;
    CUevent ev;
    CUcontext ctx;
    uint64_t since_ns;
    char what[224];
} slot_t;

static slot_t slots[WATCH_SLOTS];
static uint32_t nslots;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static bool running, stopping;
static pthread_t watchdog;
static __thread int my_slot = -1;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void check_slot(slot_t *s, uint64_t now, uint64_t limit_ns)
{
    CUresult r = cgj_drv.r_cuEventQuery(s->ev);
    if (r != CUDA_ERROR_NOT_READY) {
        if (s->told && r == CUDA_SUCCESS)
            cgj_log_message("the collective reported waiting completed after %.1f s: %s",
                            (double)(now - s->since_ns) / 1e9, s->what);
        __atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
        return;
    }
    if (s->told || now - s->since_ns < limit_ns) return;
    s->told = true;
    CGJ_STAT_ADD(collectives_stuck, 1);
    cgj_log_message("warning: a replayed collective has not completed after %.0f s: %s. Its kernels wait for the "
                    "same call on every peer: a peer that did not make it (ranks that diverged, or one that died) "
                    "leaves it waiting, as eagerly (CGJIT_COLLECTIVE_TIMEOUT_S)",
                    (double)(now - s->since_ns) / 1e9, s->what);
}

static void *watch_loop(void *arg)
{
    (void)arg;
    uint64_t limit_ns = (uint64_t)cgj_cfg.COLLECTIVE_TIMEOUT_S * 1000000000ull;
    pthread_mutex_lock(&lock);
    while (!stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WATCH_POLL_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&wake, &lock, &until);
        if (stopping) break;
        uint64_t now = now_ns();
        for (uint32_t i = 0; i < nslots; i++)
            if (__atomic_load_n(&slots[i].state, __ATOMIC_ACQUIRE) == 1) check_slot(&slots[i], now, limit_ns);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* At exit the watchdog stops before the driver goes away. */
static void stop_watchdog(void)
{
    pthread_mutex_lock(&lock);
    bool was = running;
    stopping = true;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    if (was) pthread_join(watchdog, NULL);
}

/* This thread's slot with its event, or NULL (none left, or the event cannot be made). */
static slot_t *own_slot(CUcontext ctx)
{
    if (my_slot >= 0) return slots[my_slot].ctx == ctx ? &slots[my_slot] : NULL;
    pthread_mutex_lock(&lock);
    slot_t *s = NULL;
    if (!stopping && nslots < WATCH_SLOTS) {
        s = &slots[nslots];
        if (cgj_drv.r_cuEventCreate(&s->ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
            s->ctx = ctx;
            my_slot = (int)nslots++;
            if (!running && pthread_create(&watchdog, NULL, watch_loop, NULL) == 0) {
                running = true;
                atexit(stop_watchdog);
            }
        } else {
            s = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    return s;
}

void cgj_watch_collective(CUcontext ctx, CUstream s, const char *anchor, const char *call)
{
    if (!cgj_cfg.COLLECTIVE_TIMEOUT_S) return;
    slot_t *w = own_slot(ctx);
    if (!w || __atomic_load_n(&w->state, __ATOMIC_ACQUIRE) != 0) return; /* one in flight */
    if (cgj_drv.r_cuEventRecord(w->ev, s) != CUDA_SUCCESS) return;
    w->since_ns = now_ns();
    w->told = false;
    snprintf(w->what, sizeof w->what, "anchor '%s', %s", anchor, call);
    __atomic_store_n(&w->state, 1, __ATOMIC_RELEASE);
}

void cgj_watch_forked(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    running = stopping = false;
    nslots = 0;
    my_slot = -1;
}
