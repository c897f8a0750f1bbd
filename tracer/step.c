/*
 * step.c — one step's life: WARMUP → RECORD → BUILD → REPLAY, side exits, variants, aborts.
 *
 * Eager runs (warmup, record, and the rest of a run after a side exit) execute every call as
 * it comes and record it. At the end of an eager run the recording is compared with the
 * anchor's drafts (its last few eager recordings, so that steps alternating between shapes
 * find their pairs): the same shape as one of them makes a trace (slots that differ become
 * varying, the trace is built into graphs); no match keeps it as a draft and counts as a
 * failure while the anchor has no trace.
 *
 * A replay absorbs each call that passes its guard (nothing reaches the driver) and launches
 * the current segment's graph at a boundary op or at the end of the step. The invariant is
 * kept because the host can only observe GPU memory through a boundary op, and every boundary
 * op launches what was absorbed before the call itself proceeds. When a guard fails, the ops
 * absorbed since the last launch are re-issued eagerly with this run's values, in order, and
 * the run continues eagerly, recording: nothing is skipped or reordered. Before giving up,
 * a replay may switch to another variant that has a segment starting where the pending work
 * starts and matches every call absorbed since.
 */
#include "tracer/anchor.h"
#include "graphs/graph.h"
#include "allocator/plan.h"
#include "allocator/pool.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

__thread cgj_thread_t cgj_tls;
int cgj_tracing_threads;
cgj_stats_t cgj_g_stats;

int cgj_pending_threads;

static void set_pending(cgj_thread_t *t, bool pending)
{
    if (t->pending == pending) return;
    t->pending = pending;
    __atomic_fetch_add(&cgj_pending_threads, pending ? 1 : -1, __ATOMIC_RELAXED);
}

/* ---- the thread registry and per-thread locks (see cgj_step_observe) ----
 * Lock order: the registry, then one thread's lock. A thread takes its own lock only around
 * its own step calls, never while holding or waiting for the registry. */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_thread_t **registry;
static size_t nregistry, capregistry;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void lock_thread(cgj_thread_t *t)
{
    while (__atomic_exchange_n(&t->lock, 1, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
}

static void unlock_thread(cgj_thread_t *t)
{
    __atomic_store_n(&t->lock, 0, __ATOMIC_RELEASE);
}

static void unregister_thread(void *arg)
{
    cgj_thread_t *t = arg;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nregistry; i++)
        if (registry[i] == t) registry[i] = registry[--nregistry];
    pthread_mutex_unlock(&registry_lock);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, unregister_thread);
}

static void register_thread(cgj_thread_t *t)
{
    if (CGJ_LIKELY(t->registered)) return;
    pthread_once(&exit_key_once, make_exit_key);
    pthread_mutex_lock(&registry_lock);
    if (nregistry == capregistry)
        registry = cgj_xrealloc(registry, (capregistry = capregistry ? 2 * capregistry : 16) * sizeof *registry);
    registry[nregistry++] = t;
    pthread_mutex_unlock(&registry_lock);
    pthread_setspecific(exit_key, t);
    t->registered = true;
}

static void set_mode(cgj_thread_t *t, cgj_mode_t m)
{
    bool was = t->mode >= CGJ_MODE_EAGER, is = m >= CGJ_MODE_EAGER;
    if (was != is) __atomic_fetch_add(&cgj_tracing_threads, is ? 1 : -1, __ATOMIC_RELAXED);
    t->mode = m;
}

/* Count a failed eager run of an anchor that has no trace yet; blacklist when it is enough. */
static void record_failure(cgj_anchor_t *a, const char *why)
{
    cgj_strlcpy(a->reason, why, sizeof a->reason);
    if (a->nvariants || a->state == CGJ_STATE_BLACKLISTED) return;
    if (++a->record_failures >= (uint32_t)cgj_cfg.MAX_RECORDS) {
        char msg[320];
        snprintf(msg, sizeof msg, "%u eager runs disagreed; last: %s", a->record_failures, why);
        cgj_anchor_blacklist(a, msg);
    }
}

/* ---- replay helpers ---- */

/* Re-issue the ops absorbed since the last launch, eagerly, in order. */
static void flush_pending(cgj_thread_t *t)
{
    cgj_trace_t *tr = t->trace;
    uint32_t first = tr->segs[t->seg].first;
    for (uint32_t i = first; i < t->pos; i++) {
        cgj_op_t *o = &tr->list.ops[i];
        CUresult r = cgj_op_issue(o, o->call.stream, false, false);
        if (r != CUDA_SUCCESS)
            CGJ_LOG(guards, "re-issuing op %u (%s) failed: %s", i, o->call.api, cgj_driver_errstr(r));
    }
    /* The staging buffers are rewritten by the next replay: let these copies finish first. */
    for (uint32_t i = first; i < t->pos; i++)
        if (tr->list.ops[i].stage) cgj_drv.r_cuStreamSynchronize(tr->list.ops[i].call.stream);
    set_pending(t, false);
}

static void launch_segment(cgj_thread_t *t)
{
    cgj_trace_t *tr = t->trace;
    cgj_segment_t *seg = &tr->segs[t->seg];
    if (!seg->ncapture) return;
    uint64_t patched = 0;
    CUresult r = cgj_graph_launch(tr, t->seg, &patched);
    CGJ_STAT_ADD(params_patched, patched);
    t->launched = true;
    if (r == CUDA_SUCCESS) set_pending(t, false);
    if (r == CUDA_SUCCESS) {
        CGJ_STAT_ADD(graph_launches, 1);
        return;
    }
    /* Nothing may be lost: run the segment eagerly, and stop replaying this anchor. */
    char why[200];
    snprintf(why, sizeof why, "graph launch failed: %s", cgj_driver_errstr(r));
    flush_pending(t);
    cgj_anchor_blacklist(t->anchor, why);
    set_mode(t, t->implicit ? CGJ_MODE_EAGER : CGJ_MODE_PASSTHRU);
}

/* Group side exits by op and reason (the reason up to its first digit-bearing detail, so that
 * "slot 1: expected 05 got 07" and "... got 09" count as one). */
static void count_exit(cgj_trace_t *tr, uint32_t op, const char *why)
{
    size_t key = strcspn(why, ":");
    for (uint32_t i = 0; i < tr->nexits; i++)
        if (tr->exits[i].op == op && !strncmp(tr->exits[i].reason, why, key)) {
            tr->exits[i].count++;
            return;
        }
    if (tr->nexits == CGJ_EXIT_KINDS) {
        tr->other_exits++;
        return;
    }
    cgj_exit_count_t *e = &tr->exits[tr->nexits++];
    e->op = op, e->count = 1;
    cgj_strlcpy(e->reason, why, sizeof e->reason);
}

/* Leave the trace at t->pos: pending ops eagerly, then record the rest of the run. */
static void side_exit(cgj_thread_t *t, const char *why)
{
    cgj_anchor_t *a = t->anchor;
    cgj_trace_t *tr = t->trace;
    flush_pending(t);
    for (uint32_t i = 0; i < t->pos; i++) cgj_record_clone(&t->rec, &tr->list.ops[i]);
    tr->side_exits++;
    a->side_exits++;
    t->exited = true;
    CGJ_STAT_ADD(side_exits, 1);
    count_exit(tr, t->pos, why);
    snprintf(a->reason, sizeof a->reason, "side exit at op %u: %s", t->pos, why);
    CGJ_LOG(guards, "anchor '%s': %s", a->name, a->reason);
    set_mode(t, CGJ_MODE_RECORD);
}

/* The segment of v that starts at op `first`, or UINT32_MAX. */
static uint32_t segment_at(const cgj_trace_t *v, uint32_t first)
{
    for (uint32_t s = 0; s < v->nsegs; s++)
        if (v->segs[s].first == first) return s;
    return UINT32_MAX;
}

/* Does variant v match the calls absorbed since the current segment began, and c? Stashes
 * into v if so. Earlier segments are launched already: what v would have done there no longer
 * matters, only that its segment starts where the pending work starts. */
static bool variant_matches(cgj_thread_t *t, cgj_trace_t *v, uint32_t first, const cgj_call_t *c)
{
    char why[256];
    if (c ? v->list.n <= t->pos : v->list.n != t->pos) return false;
    for (uint32_t i = first; i < t->pos; i++)
        if (!cgj_guard(&v->list.ops[i], &t->trace->list.ops[i].call, false, why, sizeof why)) return false;
    return !c || cgj_guard(&v->list.ops[t->pos], c, false, why, sizeof why);
}

/* Continue in another variant that matches what was absorbed since the pending work began and
 * call c (or, with c NULL at the step's end, that ends here too). */
static bool try_switch(cgj_thread_t *t, const cgj_call_t *c)
{
    cgj_anchor_t *a = t->anchor;
    uint32_t first = t->trace->segs[t->seg].first;
    if (t->allocs_served) return false; /* the program holds this variant's pool addresses */
    for (uint32_t k = 0; k < a->nvariants; k++) {
        cgj_trace_t *v = a->variants[k];
        uint32_t s = v == t->trace ? UINT32_MAX : segment_at(v, first);
        if (s == UINT32_MAX || (c && (v->list.n <= t->pos || v->list.ops[t->pos].held))) continue;
        if (!variant_matches(t, v, first, c)) continue;
        bool waited = false;
        for (uint32_t i = first; i < t->pos; i++) { /* carry the staged bytes over */
            cgj_op_t *o = &v->list.ops[i];
            if (!o->stage) continue;
            if (!waited && cgj_graph_staging_wait(&v->segs[s])) CGJ_STAT_ADD(staging_waits, 1);
            waited = true;
            memcpy(o->stage, t->trace->list.ops[i].stage, o->call.u.m.bytes);
        }
        t->staged_waited = waited;
        t->trace = v;
        t->seg = s;
        a->current = k;
        CGJ_STAT_ADD(variant_switches, 1);
        return true;
    }
    return false;
}

/* A free the trace recorded as the step freeing its own allocation. */
static const cgj_call_t *as_pool_free(const cgj_call_t *c, const cgj_op_t *o, cgj_call_t *tmp)
{
    if (c->kind != CGJ_OP_FREE || o->call.kind != CGJ_OP_POOL_FREE) return c;
    *tmp = *c;
    tmp->kind = CGJ_OP_POOL_FREE;
    return tmp;
}

/* Serve an allocation or free of the step from the trace's pool region. False (with why)
 * when the block is still held by the program since an earlier replay. */
static bool serve_pool_op(cgj_op_t *o, const cgj_call_t *c, char *why, size_t whylen)
{
    if (o->call.kind == CGJ_OP_POOL_FREE) {
        cgj_pool_release(o->call.u.a.addr);
        CGJ_STAT_ADD(pool_frees, 1);
        return true;
    }
    if (o->held) {
        snprintf(why, whylen, "the %zu-byte block this allocation returns is still held: an earlier "
                 "replay returned it and the program has not freed it", o->call.u.a.bytes);
        return false;
    }
    *c->u.a.out = o->call.u.a.addr;
    if (c->u.a.pitch_out) *c->u.a.pitch_out = o->call.u.a.pitch;
    cgj_pool_hold(o->call.u.a.addr, &o->held);
    CGJ_STAT_ADD(pool_allocs, 1);
    return true;
}

/* Last resort before a side exit: the call differs from its op only in kernel parameter values
 * the trace took for constants; make those slots varying (patched from now on). */
static bool promote_slots(cgj_thread_t *t, const cgj_call_t *c)
{
    cgj_trace_t *tr = t->trace;
    cgj_op_t *o = &tr->list.ops[t->pos];
    char why[256];
    uint32_t before = o->kp ? o->kp->nvarying : 0;
    if (!o->kp || !cgj_guard(o, c, true, why, sizeof why)) return false;
    if (o->promoted) {
        cgj_segment_t *seg = &tr->segs[t->seg];
        bool listed = false;
        for (uint32_t j = 0; j < seg->npatch && !listed; j++) listed = seg->patch[j] == t->pos;
        if (!listed) seg->patch[seg->npatch++] = t->pos;
        o->promoted = false;
        tr->varying_slots += o->kp->nvarying - before;
        CGJ_STAT_ADD(slots_promoted, o->kp->nvarying - before);
        CGJ_LOG(guards, "anchor '%s': op %u: %u parameter slot(s) became varying", t->anchor->name,
                t->pos, o->kp->nvarying - before);
    }
    return true;
}

/* Replay reached the LIB op m of library call lc: absorb the whole group when its guard holds
 * (the library is not called) and return true; else note the open call (the library runs, its
 * driver calls are matched one by one, and cgj_step_leave learns from them) and return false. */
static bool replay_lib(cgj_thread_t *t, cgj_op_t *m, const cgj_libcall_t *lc)
{
    cgj_trace_t *tr = t->trace;
    cgj_libop_t *l = m->lib;
    cgj_libop_note_call(l, lc);
    if (!l->absorbable || lc->never_absorb || t->pos + 1 + l->nops > tr->list.n || !cgj_libop_matches(l, lc)) {
        t->lib_open = t->pos + 1;
        t->lib_serial = t->serial;
        l->called++;
        return false;
    }
    cgj_libop_fill(m, lc);
    set_pending(t, true);
    uint32_t end = t->pos + 1 + l->nops;
    while (t->pos < end && t->mode == CGJ_MODE_REPLAY) {
        t->pos++;
        t->absorbed++;
        if (tr->segs[t->seg].chained && t->pos == tr->segs[t->seg].end) { /* a chunk is complete */
            launch_segment(t);
            t->seg++;
            t->staged_waited = false;
        }
    }
    /* A failed launch turned the step eager: what the library would have issued still runs. */
    for (uint32_t i = t->pos; i < end; i++) cgj_op_issue(&tr->list.ops[i], tr->list.ops[i].call.stream, false, false);
    l->absorbed++;
    CGJ_STAT_ADD(lib_absorbed, 1);
    return true;
}

static int replay_enter(cgj_thread_t *t, const cgj_call_t *c)
{
    cgj_trace_t *tr = t->trace;
    char why[256];
    cgj_call_t tmp;
    if (t->pos < tr->list.n) c = as_pool_free(c, &tr->list.ops[t->pos], &tmp);
    if (t->pos >= tr->list.n && !try_switch(t, c)) {
        snprintf(why, sizeof why, "the step goes on past the trace's %u ops (%s)", tr->list.n, c->api);
        side_exit(t, why);
        return CGJ_EXECUTE;
    }
    tr = t->trace;
    if (!cgj_guard(&tr->list.ops[t->pos], c, false, why, sizeof why) && !try_switch(t, c) &&
        !promote_slots(t, c)) {
        char desc[160], msg[420];
        snprintf(msg, sizeof msg, "%s: %s", cgj_op_describe(&tr->list.ops[t->pos], desc, sizeof desc), why);
        side_exit(t, msg);
        return CGJ_EXECUTE;
    }
    tr = t->trace;
    cgj_op_t *o = &tr->list.ops[t->pos];
    if (o->lib && replay_lib(t, o, c->u.l.lc)) return CGJ_ABSORB;
    if (cgj_op_class[o->call.kind] == CGJ_CLASS_BOUNDARY) {
        CGJ_LOG(breaks, "anchor '%s': segment %u ends at op %u (%s)", t->anchor->name, t->seg, t->pos, c->api);
        launch_segment(t);
        t->pos++;
        t->seg++;
        t->staged_waited = false;
        return CGJ_EXECUTE;
    }
    if (cgj_op_class[o->call.kind] == CGJ_CLASS_POOL && !serve_pool_op(o, c, why, sizeof why)) {
        /* Double buffering: a twin variant (same trace, another region) may have it free. */
        if (!try_switch(t, c)) {
            CGJ_STAT_ADD(escape_exits, 1);
            t->anchor->want_twin = true;
            side_exit(t, why);
            return CGJ_EXECUTE;
        }
        tr = t->trace;
        o = &tr->list.ops[t->pos];
        CGJ_ASSERT(serve_pool_op(o, c, why, sizeof why), "a switch target's block is held");
    }
    if (cgj_op_class[o->call.kind] == CGJ_CLASS_POOL) {
        t->allocs_served |= o->call.kind == CGJ_OP_ALLOC;
    } else if (o->stage) {
        if (!t->staged_waited && cgj_graph_staging_wait(&tr->segs[t->seg])) CGJ_STAT_ADD(staging_waits, 1);
        t->staged_waited = true;
        memcpy(o->stage, c->u.m.hsrc, c->u.m.bytes);
        CGJ_STAT_ADD(bytes_staged, c->u.m.bytes);
    }
    t->pos++;
    t->absorbed++;
    set_pending(t, true);
    if (tr->segs[t->seg].chained && t->pos == tr->segs[t->seg].end) { /* a chunk is complete */
        launch_segment(t);
        t->seg++;
        t->staged_waited = false;
    }
    return o->lib ? CGJ_EXECUTE : CGJ_ABSORB; /* the library runs: its calls are matched next */
}

/* ---- eager runs ---- */

/* Stop tracing this step: pending replay work runs eagerly, the recording is dropped. */
static void abort_step(cgj_thread_t *t, const char *why)
{
    cgj_anchor_t *a = t->anchor;
    if (t->mode == CGJ_MODE_REPLAY) flush_pending(t);
    cgj_oplist_free(&t->rec);
    CGJ_STAT_ADD(aborts, 1);
    if (a) {
        CGJ_LOG(blacklist, "anchor '%s': step aborted to eager: %s", a->name, why);
        record_failure(a, why);
    }
    set_mode(t, t->implicit ? CGJ_MODE_EAGER : CGJ_MODE_PASSTHRU);
}

/* A library call in an eager run: its LIB op goes before the driver calls it makes. */
static void record_lib(cgj_thread_t *t, const cgj_call_t *c)
{
    const char *why = NULL;
    if (t->rec.n >= (uint32_t)cgj_cfg.MAX_OPS) {
        abort_step(t, "the step holds more than CGJIT_MAX_OPS calls");
        return;
    }
    if (!cgj_record_call(&t->rec, c, &why)) return;
    t->lib_open = t->rec.n;
    t->lib_serial = t->serial;
}

/* The library call whose LIB op is open returned (ok: successfully). */
static void lib_leave(cgj_thread_t *t, const cgj_libcall_t *lc, bool ok)
{
    uint32_t at = t->lib_open - 1;
    bool open = t->lib_open && t->lib_serial == t->serial;
    t->lib_open = 0;
    if (!open) return;
    if (t->mode == CGJ_MODE_RECORD && at < t->rec.n && t->rec.ops[at].lib) {
        cgj_libop_t *l = t->rec.ops[at].lib;
        l->nops = t->rec.n - at - 1;
        l->failed |= !ok;
        return;
    }
    if (t->mode != CGJ_MODE_REPLAY || !ok || lc->never_absorb) return;
    cgj_trace_t *tr = t->trace;
    cgj_op_t *m = at < tr->list.n ? &tr->list.ops[at] : NULL;
    if (!m || !m->lib || m->lib->failed || t->pos != at + 1 + m->lib->nops) return;
    bool matched = cgj_libop_matches(m->lib, lc);
    if (matched && (m->lib->absorbable || m->lib->for_good)) return;
    /* New arguments, or a group not absorbable yet: this run is one more sample. */
    bool was = m->lib->absorbable;
    cgj_libop_relearn(m, lc);
    if (!matched) CGJ_STAT_ADD(lib_relearned, 1);
    if (!matched || was != m->lib->absorbable)
        CGJ_LOG(guards, "anchor '%s': op %u (%s): %s; %s%s", t->anchor->name, at, m->call.api,
                matched ? "learned again" : "new arguments learned",
                m->lib->absorbable ? "absorbed from now on" : "not absorbed: ", m->lib->why_not);
}

int cgj_step_enter(const cgj_call_t *c)
{
    cgj_thread_t *t = &cgj_tls;
    register_thread(t);
    lock_thread(t);
    int d = CGJ_EXECUTE;
    if ((t->mode == CGJ_MODE_OFF || t->implicit) && !cgj_implicit_fast(t, c) && !cgj_implicit_route(c))
        d = CGJ_EXECUTE;
    else if (t->mode == CGJ_MODE_REPLAY) d = replay_enter(t, c);
    if (c->kind == CGJ_OP_LIB && t->mode == CGJ_MODE_RECORD) record_lib(t, c);
    if (c->kind == CGJ_OP_LIB && t->mode >= CGJ_MODE_RECORD) CGJ_STAT_ADD(lib_calls, 1);
    unlock_thread(t);
    return d;
}

/* Complete a call for recording: the address an allocation returned; a free of an allocation
 * this step made becomes a POOL_FREE. */
static const cgj_call_t *resolve_for_record(const cgj_thread_t *t, const cgj_call_t *c, cgj_call_t *tmp)
{
    if (c->kind == CGJ_OP_ALLOC) {
        *tmp = *c;
        tmp->u.a.addr = *c->u.a.out;
        if (c->u.a.pitch_out) {
            tmp->u.a.pitch = *c->u.a.pitch_out;
            tmp->u.a.bytes = tmp->u.a.pitch * c->u.a.height;
        }
        return tmp;
    }
    if (c->kind != CGJ_OP_FREE) return c;
    cgj_blocks_t bl = cgj_record_blocks(&t->rec);
    bool own = false;
    for (uint32_t j = 0; j < bl.n && !own; j++) own = bl.b[j].escapes && bl.b[j].base == c->u.a.addr;
    cgj_free(bl.b);
    if (!own) return c;
    *tmp = *c;
    tmp->kind = CGJ_OP_POOL_FREE;
    return tmp;
}

static void leave_locked(cgj_thread_t *t, const cgj_call_t *c, CUresult r);

void cgj_step_leave(const cgj_call_t *c, CUresult r)
{
    cgj_thread_t *t = &cgj_tls;
    lock_thread(t);
    leave_locked(t, c, r);
    unlock_thread(t);
}

static void leave_locked(cgj_thread_t *t, const cgj_call_t *c, CUresult r)
{
    if (c->kind == CGJ_OP_LIB) {
        lib_leave(t, c->u.l.lc, r == CUDA_SUCCESS);
        return;
    }
    if (t->mode != CGJ_MODE_RECORD) return;
    const char *why = NULL;
    char msg[200];
    cgj_call_t tmp;
    if (r == CUDA_SUCCESS) c = resolve_for_record(t, c, &tmp);
    if (r != CUDA_SUCCESS) {
        snprintf(msg, sizeof msg, "%s returned %s", c->api, cgj_driver_errstr(r));
        abort_step(t, msg);
    } else if (t->rec.n >= (uint32_t)cgj_cfg.MAX_OPS) {
        abort_step(t, "the step holds more than CGJIT_MAX_OPS driver calls");
    } else if (!cgj_record_call(&t->rec, c, &why)) {
        snprintf(msg, sizeof msg, "%s cannot be recorded: %s", c->api, why);
        abort_step(t, msg);
    } else {
        CGJ_STAT_ADD(ops_recorded, 1);
    }
}

void cgj_step_untraceable(const char *api)
{
    cgj_thread_t *t = &cgj_tls;
    lock_thread(t);
    if (t->mode >= CGJ_MODE_RECORD) { /* else: no step, or one already running eagerly */
        char msg[160];
        snprintf(msg, sizeof msg, "%s cannot be traced inside a step", api);
        abort_step(t, msg);
    }
    unlock_thread(t);
}

/* Could `s`/`ev` observe the pending work of t? */
static bool observes(const cgj_thread_t *t, CUstream s, CUevent ev, bool everything)
{
    if (everything || s == CU_STREAM_LEGACY) return true;
    const cgj_trace_t *tr = t->trace;
    for (uint32_t i = tr->segs[t->seg].first; i < t->pos; i++) {
        const cgj_call_t *c = &tr->list.ops[i].call;
        if (s && s != CU_STREAM_PER_THREAD && c->stream == s) return true;
        if (ev && c->kind == CGJ_OP_EVENT_RECORD && c->u.e.ev == ev) return true;
    }
    return false;
}

void cgj_step_observe(CUstream s, CUevent ev, bool everything)
{
    cgj_thread_t *self = &cgj_tls;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nregistry; i++) {
        cgj_thread_t *t = registry[i];
        if (t == self || !__atomic_load_n(&t->pending, __ATOMIC_RELAXED)) continue;
        lock_thread(t);
        if (t->pending && t->mode == CGJ_MODE_REPLAY && observes(t, s, ev, everything))
            side_exit(t, "another thread synchronized with work this step had absorbed");
        unlock_thread(t);
    }
    pthread_mutex_unlock(&registry_lock);
}

/* ---- building a trace at the end of an eager run ---- */

/* CGJIT_DUMP_ALLOCS: the trace's allocation events, in the format cgjit-plan reads. */
static void dump_allocs(const cgj_anchor_t *a, const cgj_plan_block_t *pb, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-v%u.txt", cgj_cfg.DUMP_ALLOCS, a->name, a->nvariants + 1);
    for (char *p = path + strlen(cgj_cfg.DUMP_ALLOCS) + 1; *p; p++)
        if (*p == '/' || *p == ' ') *p = '_';
    mkdir(cgj_cfg.DUMP_ALLOCS, 0777);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cgjit: warning: CGJIT_DUMP_ALLOCS: cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    fprintf(f, "# cgjit allocation trace of anchor '%s', variant %u\n", a->name, a->nvariants + 1);
    cgj_plan_write(f, pb, n);
    fclose(f);
}

/* Plan the in-step allocations of tr into one pool region and relocate the trace there. */
static bool plan_memory(const cgj_anchor_t *a, cgj_trace_t *tr, char *why, size_t whylen)
{
    cgj_blocks_t bl = cgj_record_blocks(&tr->list);
    tr->nblocks = bl.n;
    if (!bl.n) return true;
    cgj_plan_block_t *pb = cgj_xcalloc(bl.n, sizeof *pb);
    for (uint32_t j = 0; j < bl.n; j++)
        pb[j] = (cgj_plan_block_t){.size = bl.b[j].bytes, .start = bl.b[j].start,
                                   .end = bl.b[j].escapes ? CGJ_PLAN_ESCAPES : bl.b[j].end};
    cgj_plan_result_t res;
    cgj_plan(pb, bl.n, &res);
    if (cgj_cfg.DUMP_ALLOCS[0]) dump_allocs(a, pb, bl.n);
    bool ok = cgj_pool_region(res.pool_bytes, &tr->region, why, whylen);
    if (ok) {
        CUdeviceptr *planned = cgj_xcalloc(bl.n, sizeof *planned);
        for (uint32_t j = 0; j < bl.n; j++) planned[j] = tr->region + pb[j].offset;
        cgj_record_relocate(&tr->list, planned);
        cgj_free(planned);
        tr->pool_bytes = res.pool_bytes, tr->naive_bytes = res.naive_bytes;
        tr->lower_bound = res.lower_bound;
        CGJ_LOG(trace, "anchor '%s': %u allocations planned into %llu bytes (naive %llu, lower bound %llu, %s)",
                a->name, bl.n, (unsigned long long)res.pool_bytes, (unsigned long long)res.naive_bytes,
                (unsigned long long)res.lower_bound, res.heuristic);
    }
    cgj_free(pb), cgj_free(bl.b);
    return ok;
}

/* Build a trace from a classified recording (taken over). */
static void build_variant(cgj_anchor_t *a, cgj_oplist_t *rec)
{
    cgj_trace_t *tr = cgj_xcalloc(1, sizeof *tr);
    tr->list = *rec;
    *rec = (cgj_oplist_t){0};
    for (uint32_t i = 0; i < tr->list.n; i++) {
        const cgj_kparams_t *kp = tr->list.ops[i].kp;
        if (kp) tr->kernels++, tr->varying_slots += kp->nvarying;
    }
    char why[256];
    tr->ends_in_sync = cgj_tls.implicit && cgj_implicit_policy == CGJ_STEP_SYNC;
    if (!plan_memory(a, tr, why, sizeof why) || !cgj_graph_build(tr, why, sizeof why)) {
        char msg[300];
        snprintf(msg, sizeof msg, "graph build failed: %s", why);
        CGJ_STAT_ADD(build_failures, 1);
        cgj_oplist_free(&tr->list);
        cgj_free(tr);
        if (!a->nvariants) cgj_anchor_blacklist(a, msg);
        else cgj_strlcpy(a->reason, msg, sizeof a->reason);
        return;
    }
    a->variants[a->nvariants] = tr;
    a->current = a->nvariants++;
    a->state = CGJ_STATE_REPLAY;
    CGJ_STAT_ADD(traces_built, 1);
    CGJ_LOG(trace, "anchor '%s': variant %u built: %u ops, %u kernels, %u segment(s), %u varying slot(s)",
            a->name, a->nvariants, tr->list.n, tr->kernels, tr->nsegs, tr->varying_slots);
    for (uint32_t i = 0; i < tr->list.n && (cgj_log_mask & (1u << CGJ_LOG_trace)); i++) {
        char desc[160];
        const cgj_op_t *o = &tr->list.ops[i];
        CGJ_LOG(trace, "  op %u: %s%s%s", i, cgj_op_describe(o, desc, sizeof desc),
                cgj_op_class[o->call.kind] == CGJ_CLASS_BOUNDARY ? " (ends a segment)" : "",
                o->kp && o->kp->nvarying ? " (varying parameters)" : "");
    }
}

static uint32_t max_variants(void)
{
    long m = cgj_cfg.MAX_VARIANTS;
    return m > CGJ_MAX_VARIANTS_HARD ? CGJ_MAX_VARIANTS_HARD : (uint32_t)m;
}

/* Same shape and same varying slots as an existing variant: building it would add nothing. */
static bool duplicates_variant(const cgj_anchor_t *a, const cgj_oplist_t *rec)
{
    uint32_t at;
    char why[200];
    for (uint32_t k = 0; k < a->nvariants; k++) {
        const cgj_oplist_t *v = &a->variants[k]->list;
        if (!cgj_record_same_shape(v, rec, &at, why, sizeof why)) continue;
        bool same = true;
        for (uint32_t i = 0; i < v->n && same; i++)
            if (v->ops[i].kp)
                same = !memcmp(v->ops[i].kp->varying, rec->ops[i].kp->varying, v->ops[i].kp->n);
        if (same) return true;
    }
    return false;
}

static void drop_draft(cgj_anchor_t *a, uint32_t d)
{
    cgj_oplist_free(&a->drafts[d]);
    memmove(&a->drafts[d], &a->drafts[d + 1], (a->ndrafts - d - 1) * sizeof a->drafts[0]);
    a->ndrafts--;
}

static void finish_record(cgj_thread_t *t)
{
    cgj_anchor_t *a = t->anchor;
    cgj_oplist_t rec = t->rec;
    memset(&t->rec, 0, sizeof t->rec);
    CGJ_LOG(trace, "anchor '%s': recorded %u ops", a->name, rec.n);
    if (a->state == CGJ_STATE_BLACKLISTED) {
        cgj_oplist_free(&rec);
        return;
    }
    uint32_t at = 0;
    char why[200] = "";
    uint32_t newest_at = 0;
    char newest_why[200] = "";
    for (uint32_t d = a->ndrafts; d-- > 0;) {
        if (!cgj_record_same_shape(&a->drafts[d], &rec, &at, why, sizeof why)) {
            if (d + 1 == a->ndrafts) newest_at = at, cgj_strlcpy(newest_why, why, sizeof newest_why);
            continue;
        }
        cgj_record_classify(&rec, &a->drafts[d]);
        /* A twin of an existing variant is worth building after an escape exit: its own
         * region double-buffers the blocks the program still holds. */
        if (a->nvariants < max_variants() && (a->want_twin || !duplicates_variant(a, &rec))) {
            build_variant(a, &rec);
            a->want_twin = false;
        }
        cgj_oplist_free(&rec);
        drop_draft(a, d);
        return;
    }
    if (a->ndrafts) {
        char msg[260];
        snprintf(msg, sizeof msg, "run differs from the previous one at op %u: %s", newest_at, newest_why);
        CGJ_LOG(guards, "anchor '%s': %s", a->name, msg);
        record_failure(a, msg);
    }
    if (a->ndrafts == CGJ_MAX_DRAFTS) drop_draft(a, 0);
    a->drafts[a->ndrafts++] = rec;
    if (!a->nvariants && a->state != CGJ_STATE_BLACKLISTED) a->state = CGJ_STATE_RECORD;
}

/* An anchor whose replays keep leaving their trace costs more than eager execution (every
 * exit re-issues what it absorbed and records the rest): when 3 of its last 4 x 8 runs exited,
 * it runs eagerly for good. A copy whose size follows the data, say, ends up here. */
#define EXIT_WINDOW 32
#define EXIT_LIMIT 24

static void note_exit_history(cgj_anchor_t *a, bool exited)
{
    a->exit_history = (a->exit_history << 1) | exited;
    if (a->history_len < EXIT_WINDOW) a->history_len++;
    int n = __builtin_popcount(a->exit_history);
    if (a->history_len < EXIT_WINDOW || n < EXIT_LIMIT) return;
    const cgj_trace_t *tr = a->variants[a->current];
    const cgj_exit_count_t *top = NULL;
    for (uint32_t i = 0; i < tr->nexits; i++)
        if (!top || tr->exits[i].count > top->count) top = &tr->exits[i];
    char msg[300];
    snprintf(msg, sizeof msg, "%d of its last %d runs left the trace; most often at op %u: %s", n,
             EXIT_WINDOW, top ? top->op : 0, top ? top->reason : "?");
    cgj_anchor_blacklist(a, msg);
}

/* ---- begin and end ---- */

static void start_replay(cgj_thread_t *t, cgj_anchor_t *a)
{
    set_pending(t, false);
    t->trace = a->variants[a->current];
    t->pos = t->seg = 0;
    t->launched = t->staged_waited = t->allocs_served = t->exited = false;
    t->absorbed = 0;
    set_mode(t, CGJ_MODE_REPLAY);
}

/* Begin a step of anchor `name`; implicit steps (CGJIT_STEP) run eagerly in EAGER mode, where
 * their calls keep passing through cgj_step_enter so that their end is seen. */
int cgj_step_begin_as(const char *name, bool implicit)
{
    cgj_thread_t *t = &cgj_tls;
    if (t->mode != CGJ_MODE_OFF) {
        if (t->mode >= CGJ_MODE_RECORD) abort_step(t, "cgj_trace_begin inside a step (steps do not nest)");
        return CGJ_ERR_NESTED;
    }
    cgj_mode_t eager = implicit ? CGJ_MODE_EAGER : CGJ_MODE_PASSTHRU;
    t->serial++;
    cgj_anchor_t *a = t->last && strcmp(t->last->name, name) == 0 ? t->last : cgj_anchor_get(name);
    t->last = a;
    t->implicit = implicit;
    t->begun_ns = cgj_now_ns();
    __atomic_fetch_add(&a->runs, 1, __ATOMIC_RELAXED);
    if (__atomic_exchange_n(&a->busy, 1, __ATOMIC_ACQUIRE)) {
        t->anchor = NULL; /* another thread runs this anchor now: this step runs eagerly */
        set_mode(t, eager);
        return CGJ_OK;
    }
    t->anchor = a;
    if (a->state == CGJ_STATE_BLACKLISTED) set_mode(t, eager);
    else if (a->nvariants) start_replay(t, a);
    else set_mode(t, CGJ_MODE_RECORD);
    return CGJ_OK;
}

int cgj_step_begin(const char *name)
{
    cgj_thread_t *t = &cgj_tls;
    register_thread(t);
    lock_thread(t);
    int st = cgj_step_begin_as(name, false);
    unlock_thread(t);
    return st;
}

/* A step that cannot be traced at all (no driver, disabled): it still pairs with its end. */
void cgj_step_begin_eager(void)
{
    if (cgj_tls.mode == CGJ_MODE_OFF) set_mode(&cgj_tls, CGJ_MODE_PASSTHRU);
}

int cgj_step_end(void)
{
    cgj_thread_t *t = &cgj_tls;
    lock_thread(t);
    int st = cgj_step_end_locked();
    unlock_thread(t);
    return st;
}

int cgj_step_end_locked(void)
{
    cgj_thread_t *t = &cgj_tls;
    if (t->mode == CGJ_MODE_OFF) return CGJ_ERR_NOT_ACTIVE;
    cgj_anchor_t *a = t->anchor;
    if (t->mode == CGJ_MODE_REPLAY) {
        cgj_trace_t *tr = t->trace;
        CGJ_STAT_ADD(ops_absorbed, t->absorbed);
        if (t->pos != tr->list.n && try_switch(t, NULL)) tr = t->trace; /* a variant that ends here */
        if (t->pos == tr->list.n) {
            launch_segment(t); /* on failure the step has become eager */
            if (t->mode == CGJ_MODE_REPLAY) {
                tr->replays++;
                a->replays++;
                CGJ_STAT_ADD(steps_replayed, 1);
            }
        } else {
            char why[120];
            snprintf(why, sizeof why, "the step ended after %u of the trace's %u ops", t->pos, tr->list.n);
            side_exit(t, why);
        }
    }
    if (t->mode == CGJ_MODE_RECORD) finish_record(t);
    if (a && a->nvariants && a->state == CGJ_STATE_REPLAY) note_exit_history(a, t->exited);
    t->exited = false;
    uint64_t host_ns = cgj_now_ns() - t->begun_ns;
    if (t->mode != CGJ_MODE_REPLAY) {
        CGJ_STAT_ADD(steps_eager, 1);
        if (a) a->eager_ns += host_ns, a->eager_runs++;
    } else if (a) {
        a->replay_ns += host_ns;
    }
    if (a) __atomic_store_n(&a->busy, 0, __ATOMIC_RELEASE);
    t->anchor = NULL;
    t->trace = NULL;
    t->implicit = false;
    set_mode(t, CGJ_MODE_OFF);
    CGJ_STAT_ADD(steps, 1);
    return CGJ_OK;
}
