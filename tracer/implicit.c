/*
 * implicit.c — finding the step of a program that has no markers (CGJIT_STEP).
 *
 *  - sync: a step is the work between two host synchronizations (stream, context or event
 *    synchronization, or a device-to-host copy the host reads at once). The step ends just
 *    before the synchronization, which then runs outside any step: the host only ever waits on
 *    work that has been launched. Each step is anchored at its first call, so the segments of
 *    one loop iteration that are separated by synchronizations become traces of their own.
 *  - auto: a per-thread detector (cycle.h) finds the repeating cycle in the stream of call
 *    signatures; steps begin at the cycle's head, so a loop with no synchronization at all is
 *    found too. When the cycle breaks, the current step ends at once and calls run eagerly
 *    until the loop is found again.
 *    A thread that makes CGJ_SYNC_LONG calls without synchronizing (a loop that never waits,
 *    or a worker thread whose work another thread waits for, such as PyTorch's autograd
 *    engine) would otherwise stay in one step that never ends: its step ends there, and from
 *    then on that thread finds its steps as auto does. So sync is "sync, else auto", per thread.
 *  - off: nothing is recorded.
 *
 * The default is sync when libcgjit is preloaded (an unmodified program, which can only be
 * stepped implicitly) and off when it is linked (the program marks its steps). sync is the
 * default rather than auto because every program that reads its results synchronizes, steps
 * found that way can never hold work across the point where the host looks, and they need no
 * warm-up to be found. Markers take precedence: the first cgj_trace_begin ends implicit
 * stepping for the whole process.
 *
 * This file decides; step.c acts: cgj_implicit_decide says where a call belongs (the step in
 * progress, outside any step, or a new step of a given name) and never begins or ends a step.
 */
#include "tracer/tracer.h"
#include "tracer/cycle.h"
#include "ir/layout.h"
#include "allocator/plan.h"
#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

int cgj_implicit_policy;

void cgj_implicit_enable(cgj_step_policy_t policy)
{
    if (policy == CGJ_STEP_OFF) return;
    __atomic_store_n(&cgj_implicit_policy, policy, __ATOMIC_RELAXED);
    __atomic_fetch_add(&cgj_tracing_threads, 1, __ATOMIC_RELAXED); /* every call is looked at */
    CGJ_LOG(trace, "implicit steps: CGJIT_STEP=%s", cgj_step_policy_name(policy));
}

void cgj_implicit_disable_silently(void)
{
    __atomic_store_n(&cgj_implicit_policy, CGJ_STEP_OFF, __ATOMIC_RELAXED);
}

bool cgj_implicit_disable(void)
{
    int was = __atomic_exchange_n(&cgj_implicit_policy, CGJ_STEP_OFF, __ATOMIC_RELAXED);
    if (was == CGJ_STEP_OFF) return false;
    __atomic_fetch_sub(&cgj_tracing_threads, 1, __ATOMIC_RELAXED);
    CGJ_LOG(trace, "markers in use: implicit steps (CGJIT_STEP=%s) end", cgj_step_policy_name(was));
    return true;
}

/* The topology of a call (Guards v2), without the values a replay patches: grids, copy and
 * memset sizes and operands. A loop whose grid or copy sizes follow the data is one cycle. */
static uint64_t signature(const cgj_call_t *c)
{
    uint64_t h = cgj_hash_bytes(&c->kind, sizeof c->kind, (uintptr_t)c->api);
    h = cgj_hash_bytes(&c->stream, sizeof c->stream, h);
    switch (c->kind) {
    case CGJ_OP_KERNEL:
        return cgj_hash_bytes(&c->u.k.f, sizeof c->u.k.f, h) | 1;
    case CGJ_OP_MEMCPY:
        h = cgj_hash_bytes(&c->u.m.dir, sizeof c->u.m.dir, h);
        return cgj_hash_bytes(&c->u.m.direct, sizeof c->u.m.direct, h) | 1;
    case CGJ_OP_ALLOC: {
        uint64_t cls = cgj_plan_size_class(c->u.a.bytes);
        return cgj_hash_bytes(&cls, sizeof cls, h) | 1;
    }
    default:
        return h | 1;
    }
}

static bool delimits_step(const cgj_call_t *c)
{
    return c->kind == CGJ_OP_SYNC || c->kind == CGJ_OP_READBACK;
}

/* A sync step is anchored at what its first call is (driver function, stream, kernel), not at
 * its sizes: a step whose first copy's size follows the data is one anchor whose runs disagree
 * (and is given up after CGJIT_MAX_RECORDS), not a new anchor every step. */
static void sync_step_name(const cgj_call_t *c, char *name, size_t len)
{
    const char *kernel = c->kind == CGJ_OP_KERNEL ? cgj_layout_kernel_name(c->u.k.f) : NULL;
    uint64_t h = cgj_hash_bytes(&c->stream, sizeof c->stream, (uintptr_t)c->api);
    if (c->kind == CGJ_OP_KERNEL) h = cgj_hash_bytes(&c->u.k.f, sizeof c->u.k.f, h);
    snprintf(name, len, "sync:%s%s%s:%016llx", c->api, kernel ? ":" : "", kernel ? kernel : "",
             (unsigned long long)h);
}

/* Detectors are large (cycle.h): a thread gets one only once it has made CGJ_AUTO_QUIET_CALLS
 * calls (a short-lived thread that launches a few kernels and exits pays nothing), and gives it
 * back at its exit to a small pool the next thread takes it from. */
#define CGJ_AUTO_QUIET_CALLS 64
#define CGJ_CYCLE_POOL 16

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_cycle_t *pool[CGJ_CYCLE_POOL];
static unsigned npool;

static cgj_cycle_t *take_detector(void)
{
    cgj_cycle_t *c = NULL;
    pthread_mutex_lock(&pool_lock);
    if (npool) c = pool[--npool];
    pthread_mutex_unlock(&pool_lock);
    if (!c) c = cgj_xmalloc(sizeof *c);
    cgj_cycle_init(c, 2);
    return c;
}

void cgj_implicit_thread_exit(cgj_thread_t *t)
{
    cgj_cycle_t *c = t->cycle;
    t->cycle = NULL;
    if (!c) return;
    pthread_mutex_lock(&pool_lock);
    if (npool < CGJ_CYCLE_POOL) pool[npool++] = c, c = NULL;
    pthread_mutex_unlock(&pool_lock);
    cgj_free(c);
}

static void decide_auto(cgj_thread_t *t, const cgj_call_t *c, cgj_decision_t *d)
{
    if (!t->cycle) {
        if (++t->quiet_calls < CGJ_AUTO_QUIET_CALLS) {
            d->route = CGJ_ROUTE_OUTSIDE;
            return;
        }
        t->cycle = take_detector();
    }
    if (cgj_cycle_feed(t->cycle, signature(c))) {
        d->route = CGJ_ROUTE_BEGIN;
        snprintf(d->name, sizeof d->name, "auto:%016llx", (unsigned long long)cgj_cycle_id(t->cycle));
        return;
    }
    if (t->mode != CGJ_MODE_OFF && cgj_cycle_period(t->cycle) == 0) {
        CGJ_LOG(breaks, "the loop broke at %s: the implicit step ends here", c->api);
        d->route = CGJ_ROUTE_OUTSIDE;
        return;
    }
    d->route = t->mode != CGJ_MODE_OFF ? CGJ_ROUTE_STAY : CGJ_ROUTE_OUTSIDE;
}

void cgj_implicit_decide(cgj_thread_t *t, const cgj_call_t *c, cgj_decision_t *d)
{
    int policy = __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED);
    d->route = CGJ_ROUTE_STAY;
    if (t->mode != CGJ_MODE_OFF && !t->implicit) return; /* a marked step */
    if (policy == CGJ_STEP_SYNC && !t->finds_cycles && t->mode != CGJ_MODE_OFF && t->sync_calls >= CGJ_SYNC_LONG) {
        t->finds_cycles = true;
        CGJ_LOG(trace, "%u calls without a synchronization: this thread's steps are found by their cycle from now on",
                t->sync_calls);
        d->route = CGJ_ROUTE_OUTSIDE;
        return;
    }
    if (policy == CGJ_STEP_AUTO || (policy == CGJ_STEP_SYNC && t->finds_cycles)) {
        decide_auto(t, c, d);
    } else if (policy == CGJ_STEP_OFF || delimits_step(c)) {
        d->route = CGJ_ROUTE_OUTSIDE;
    } else if (t->mode == CGJ_MODE_OFF) {
        d->route = CGJ_ROUTE_BEGIN;
        sync_step_name(c, d->name, sizeof d->name);
    }
}
