/*
 * exits.c — leaving a replay without losing anything.
 *
 * The invariant: whenever the host can observe GPU memory, it holds what eager execution would
 * have produced. A replay holds absorbed calls until a segment's graph is launched; leaving the
 * trace at op k (a guard failed, another thread observes the work, the step aborts, a launch
 * failed) therefore re-issues the ops absorbed since the last launch eagerly, with this run's
 * values, in order, before the call that left runs. Nothing is skipped or reordered. A side exit
 * then records the rest of the run (it may become a variant); an abort drops the recording.
 */
#include "tracer/tracer.h"
#include "graphs/graph.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/nvtx.h"

#include <string.h>

/* The thread's anchor stops replaying for r, unless it already has. */
static void stop_replaying(cgj_thread_t *t, const cgj_reason_t *r)
{
    if (t->anchor && t->anchor->state != CGJ_STATE_BLACKLISTED) cgj_anchor_blacklist(t->anchor, r);
}

/* Re-issuing met an error: the program gets it at its next call (as an asynchronous error
 * surfaces), and the anchor stops replaying. */
static void reissue_failed(cgj_thread_t *t, uint32_t op, CUresult err)
{
    cgj_reason_t r;
    cgj_reason_set(&r, CGJ_REASON_BLACKLIST_REISSUE, op, "%s: %s", t->cur.trace->list.ops[op].call.api,
                   cgj_driver_errstr(err));
    cgj_thread_defer(t, err);
    stop_replaying(t, &r);
}

/* A chunk handed to the launch thread that failed to launch (it ran as made there): the anchor stops
 * replaying, as where a launch on this thread fails; one that could not run as made either: the
 * program gets its error at its next call. The failed launch's error, CUDA_SUCCESS where none. */
static CUresult take_launch_error(cgj_thread_t *t)
{
    CUresult lost = __atomic_exchange_n(&t->launch_lost, CUDA_SUCCESS, __ATOMIC_ACQUIRE);
    CUresult err = __atomic_exchange_n(&t->launch_err, CUDA_SUCCESS, __ATOMIC_ACQUIRE);
    if (lost != CUDA_SUCCESS) cgj_thread_defer(t, lost);
    if (err == CUDA_SUCCESS) return err;
    cgj_reason_t r;
    cgj_reason_set(&r, CGJ_REASON_BLACKLIST_LAUNCH, CGJ_REASON_NO_OP, "%s", cgj_driver_errstr(err));
    stop_replaying(t, &r);
    return err;
}

void cgj_exit_drain(cgj_thread_t *t)
{
    if (!__atomic_load_n(&t->handed, __ATOMIC_ACQUIRE) && !__atomic_load_n(&t->launch_err, __ATOMIC_RELAXED) &&
        !__atomic_load_n(&t->launch_lost, __ATOMIC_RELAXED))
        return;
    cgj_offload_wait(t);
    CUresult err = take_launch_error(t);
    if (err != CUDA_SUCCESS && t->mode == CGJ_MODE_REPLAY) cgj_exit_launch_failed(t, err);
}

bool cgj_exit_flush(cgj_thread_t *t)
{
    cgj_offload_wait(t); /* handed chunks come first: they were absorbed first */
    take_launch_error(t);
    cgj_trace_t *tr = t->cur.trace;
    uint32_t first = tr->segs[t->cur.seg].first + t->cur.passed; /* the ops that ran are not held */
    bool ok = true;
    if (cgj_verify_flush(t)) { /* CGJIT_VERIFY: these calls ran for real already */
        cgj_thread_set_pending(t, false);
        return true;
    }
    if (t->anchor && t->cur.pos > first)
        __atomic_fetch_add(&t->anchor->cost.reissued, t->cur.pos - first, __ATOMIC_RELAXED);
    /* CGJIT_VERIFY: work re-issued passes verify's gate as the program's calls do, never inside
     * a window (verify.c), on the thread's own behalf or on another's (a call that observes
     * another thread's held work issues it here, before the call itself passes the gate). No
     * holder of the gate waits for the registry or a thread's lock, which the flusher of another
     * thread holds here. */
    bool gated = cgj_verify_on() && first < t->cur.pos;
    if (gated) cgj_verify_calls_enter();
    for (uint32_t i = first, done; i < t->cur.pos; i += done + 1) {
        CUresult r = cgj_graph_reissue(tr, i, t->cur.pos, &done);
        if (r == CUDA_SUCCESS) break;
        CGJ_LOG(guards, "re-issuing op %u (%s) failed: %s", i + done, tr->list.ops[i + done].call.api,
                cgj_driver_errstr(r));
        if (ok) reissue_failed(t, i + done, r);
        ok = false;
    }
    if (gated) cgj_verify_calls_leave();
    /* The staging buffers are rewritten by the next replay: let these copies finish first. */
    for (uint32_t i = first; i < t->cur.pos; i++)
        if (tr->list.ops[i].stage) cgj_drv.r_cuStreamSynchronize(tr->list.ops[i].call.stream);
    cgj_thread_set_pending(t, false);
    return ok;
}

/* Group side exits by op and reason code (under the anchor table's lock: the report reads them). */
static void count_exit(cgj_trace_t *tr, const cgj_reason_t *r)
{
    cgj_anchors_lock();
    uint32_t i = 0;
    while (i < tr->nexits && !(tr->exits[i].reason.op == r->op && tr->exits[i].reason.code == r->code)) i++;
    if (i < tr->nexits) tr->exits[i].count++;
    else if (tr->nexits == CGJ_EXIT_KINDS) tr->other_exits++;
    else tr->exits[tr->nexits++] = (cgj_exit_count_t){*r, 1};
    cgj_anchors_unlock();
}

/* Is the rest of a run that leaves a's trace recorded? Yes, but once the recordings of its last
 * CGJ_LONE_RECORDS exited runs each matched nothing (steps whose shapes follow the data: a
 * recording costs microseconds a call, more for a library call, and a long step's recording more
 * than the step): then only the 1st, 2nd, 4th ... 64th exit after that is, and every 64th, so
 * that a shape that comes back, or a program that settles, is still found. */
static bool records_exit(cgj_anchor_t *a)
{
    if (a->lone_records < CGJ_LONE_RECORDS) return true;
    uint64_t n = ++a->quiet_exits;
    return !(n & (n - 1)) || n % 64 == 0;
}

void cgj_exit_side(cgj_thread_t *t, cgj_event_t ev, cgj_reason_t *r)
{
    cgj_anchor_t *a = t->anchor;
    cgj_trace_t *tr = t->cur.trace;
    char text[320];
    cgj_nvtx_push(CGJ_NVTX_EXIT, a->name, t->cur.pos); /* on the thread that re-issues the work */
    cgj_exit_flush(t);
    bool record = records_exit(a);
    for (uint32_t i = 0; record && i < t->cur.pos; i++) cgj_oplist_clone(&t->rec, &tr->list.ops[i]);
    __atomic_fetch_add(&tr->side_exits, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&a->side_exits, 1, __ATOMIC_RELAXED);
    t->exited = true;
    CGJ_STAT_ADD(side_exits, 1);
    r->op = t->cur.pos;
    count_exit(tr, r);
    cgj_anchor_note(a, r);
    CGJ_LOG(guards, "anchor '%s': side exit at op %u (%s): %s", a->name, r->op, cgj_reason_name(r->code),
            cgj_reason_format(r, text, sizeof text));
    cgj_nvtx_pop(); /* before the recording's range opens */
    cgj_thread_go(t, ev, record ? CGJ_MODE_RECORD : cgj_thread_eager_mode(t));
}

void cgj_exit_abort(cgj_thread_t *t, cgj_reason_t *r)
{
    cgj_anchor_t *a = t->anchor;
    char text[320];
    if (t->mode == CGJ_MODE_REPLAY) cgj_exit_flush(t);
    cgj_oplist_free(&t->rec);
    CGJ_STAT_ADD(aborts, 1);
    if (a) {
        CGJ_LOG(blacklist, "anchor '%s': step aborted to eager: %s", a->name, cgj_reason_format(r, text, sizeof text));
        cgj_anchor_fail(a, r);
    } else {
        cgj_reason_tally(r);
    }
    cgj_thread_go(t, CGJ_EVENT_ABORT, cgj_thread_eager_mode(t));
}

void cgj_exit_launch_failed(cgj_thread_t *t, CUresult err)
{
    cgj_reason_t r;
    cgj_reason_set(&r, CGJ_REASON_BLACKLIST_LAUNCH, CGJ_REASON_NO_OP, "%s", cgj_driver_errstr(err));
    /* Nothing may be lost: run the segment eagerly, and stop replaying this anchor. */
    cgj_exit_flush(t);
    stop_replaying(t, &r);
    cgj_thread_go(t, CGJ_EVENT_ERROR, cgj_thread_eager_mode(t));
}

/* Is s blocking? The driver is asked only while no capture of the program runs: asked about a
 * capturing stream, it fails and invalidates the capture (tracer/captures.c answers then). */
static bool stream_blocking(CUstream s)
{
    return CGJ_UNLIKELY(cgj_program_capturing()) ? cgj_captures_blocking(s) : cgj_stream_blocking(s);
}

/* Could `s`/`ev` observe the pending work of t? Work on s waits for work on s itself and, s
 * being blocking (stream_blocking), for the legacy stream's; work on the legacy stream waits
 * for every blocking stream's: a non-blocking stream never waits for another thread's replay
 * held back on the legacy stream, nor the other way. A per-thread default stream is one of the calling thread's: it
 * shares no handle with t's ops, only the legacy stream's ordering. */
static bool observes(const cgj_thread_t *t, CUstream s, CUevent ev, bool everything)
{
    if (everything) return true;
    const cgj_trace_t *tr = t->cur.trace;
    bool waits_legacy = s && stream_blocking(s);
    CUstream non_blocking = NULL; /* the last stream found non-blocking: ops come in runs */
    for (uint32_t i = tr->segs[t->cur.seg].first + t->cur.passed; i < t->cur.pos; i++) {
        const cgj_call_t *c = &tr->list.ops[i].call;
        if (ev && c->kind == CGJ_OP_EVENT_RECORD && c->u.e.ev == ev) return true;
        if (!s || cgj_op_class[c->kind] != CGJ_CLASS_CAPTURE) continue;
        if (s != CU_STREAM_PER_THREAD && c->stream == s) return true;
        if (c->stream == CU_STREAM_LEGACY) {
            if (waits_legacy) return true;
        } else if (s == CU_STREAM_LEGACY && c->stream != non_blocking) {
            if (stream_blocking(c->stream)) return true;
            non_blocking = c->stream;
        }
    }
    return false;
}

/* Could `s` (or any stream, with `everything`) see the work of t's recording? Its streams are
 * known by bucket (cgj_stream_bucket): a collision only adds a handoff the other recording
 * of the step is unlikely to share. */
static bool observes_recording(const cgj_thread_t *t, CUstream s, CUevent ev, bool everything)
{
    uint64_t mask = t->pending_mask;
    for (uint32_t i = t->rec.n; ev && i-- > 0;)
        if (t->rec.ops[i].call.kind == CGJ_OP_EVENT_RECORD && t->rec.ops[i].call.u.e.ev == ev) return true;
    if (everything || s == CU_STREAM_LEGACY) return mask != 0;
    if (!s) return false;
    if (mask >> cgj_stream_bucket(CU_STREAM_LEGACY) & 1 && stream_blocking(s)) return true;
    return s != CU_STREAM_PER_THREAD && (mask >> cgj_stream_bucket(s) & 1);
}

/* Another thread's work comes after op rec.n - 1 of t's recording on a stream it could see: a
 * handoff there (kept where every recording of the step has it, tracer/shape.c). */
static void note_handoff(cgj_thread_t *t)
{
    cgj_op_t *o = t->rec.n ? &t->rec.ops[t->rec.n - 1] : NULL;
    if (!o || o->handoff || t->lib_depth) return;
    o->handoff = true;
    if (t->anchor)
        CGJ_LOG(breaks, "anchor '%s': another thread issues work after op %u (%s): a handoff", t->anchor->name,
                t->rec.n - 1, o->call.api);
}

void cgj_exit_observe(CUstream s, CUevent ev, bool everything)
{
    cgj_thread_t *self = &cgj_tls;
    cgj_registry_lock();
    for (size_t i = 0; i < cgj_registry_count(); i++) {
        cgj_thread_t *t = cgj_registry_get(i);
        if (t == self || !__atomic_load_n(&t->pending, __ATOMIC_RELAXED)) continue;
        cgj_thread_lock(t);
        if (t->pending && t->mode == CGJ_MODE_REPLAY && observes(t, s, ev, everything)) {
            cgj_reason_t r;
            cgj_reason_set(&r, CGJ_REASON_EXIT_OBSERVED, CGJ_REASON_NO_OP, NULL);
            cgj_exit_side(t, CGJ_EVENT_OBSERVE, &r);
        } else if (t->pending && t->mode == CGJ_MODE_RECORD && observes_recording(t, s, ev, everything)) {
            note_handoff(t);
        }
        cgj_thread_unlock(t);
    }
    cgj_registry_unlock();
}
