/*
 * record.c — eager runs: every call executed is recorded as an op; at the run's end the
 * recording is compared with the anchor's drafts (its last few eager recordings, so that steps
 * alternating between shapes find their pairs). The same shape as one of them makes a trace
 * (slots that differ become varying; build.c builds it); no match keeps the recording as a
 * draft and counts as a failure while the anchor has no trace.
 */
#include "tracer/tracer.h"
#include "base/driver.h"
#include "base/log.h"

#include <string.h>

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
    if (!cgj_oplist_holds(&t->rec, c->u.a.addr)) return c;
    *tmp = *c;
    tmp->kind = CGJ_OP_POOL_FREE;
    return tmp;
}

static void abort_with(cgj_thread_t *t, cgj_reason_code_t code, const char *api, const char *error)
{
    cgj_reason_t r;
    cgj_reason_set(&r, code, CGJ_REASON_NO_OP, "%s%s%s", api, error ? " returned " : "", error ? error : "");
    cgj_exit_abort(t, &r);
}

/* The program's own host time before the call being recorded: from the return of the step's
 * previous recorded call to this one's arrival (0 for the first, or where either is unknown). */
static uint32_t gap_ns(const cgj_thread_t *t)
{
    if (!t->rec.n || !t->rec_in_ns || t->rec_in_ns <= t->rec_out_ns || !t->rec_out_ns) return 0;
    uint64_t d = t->rec_in_ns - t->rec_out_ns;
    return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

/* Record call c as the recording's next op, with its gap. */
static bool record_op(cgj_thread_t *t, const cgj_call_t *c, cgj_reason_code_t *why)
{
    uint32_t gap = gap_ns(t);
    if (!cgj_oplist_record(&t->rec, c, why)) return false;
    t->rec.ops[t->rec.n - 1].gap_ns = gap;
    return true;
}

/* Does the recording both allocate and make a call run as made? A replay serves the step's
 * allocations from its pool, at other addresses than the eager runs got, and lets blocks share
 * memory by the lifetimes its plan sees: a program's graph made outside the step may hold the
 * eager addresses, and what such a call reads or writes, on which stream, is not in the plan. */
static bool as_made_with_alloc(const cgj_oplist_t *l)
{
    /* Calls run as made: a graph of the program's own, or work cgjit does not capture. */
    return (l->kinds & (1u << CGJ_OP_GRAPH_LAUNCH | 1u << CGJ_OP_AS_MADE)) && (l->kinds & 1u << CGJ_OP_ALLOC);
}

static void record_leave(cgj_thread_t *t, const cgj_call_t *c, CUresult r)
{
    cgj_reason_code_t why = CGJ_REASON_NONE;
    cgj_call_t tmp;
    /* A query's "not ready" is an answer, not a failure. */
    if (r != CUDA_SUCCESS && !(c->kind == CGJ_OP_QUERY && r == CUDA_ERROR_NOT_READY)) {
        abort_with(t, CGJ_REASON_ABORT_CALL_FAILED, c->api, cgj_driver_errstr(r));
        return;
    }
    c = resolve_for_record(t, c, &tmp);
    if (t->rec.n >= (uint32_t)cgj_cfg.MAX_OPS) abort_with(t, CGJ_REASON_ABORT_MAX_OPS, c->api, NULL);
    else if (!record_op(t, c, &why)) abort_with(t, why, c->api, NULL);
    else if (as_made_with_alloc(&t->rec)) abort_with(t, CGJ_REASON_ABORT_AS_MADE_ALLOC, c->api, NULL);
    else CGJ_STAT_ADD(ops_recorded, 1);
    if (t->mode == CGJ_MODE_RECORD && cgj_op_class[c->kind] == CGJ_CLASS_CAPTURE) cgj_thread_recorded(t, c->stream);
}

/* CGJIT_STEP=sync: an anchor's first run that has made CGJ_SYNC_FIRST_RECORD calls without a
 * synchronization may be a loop that never synchronizes (its thread then finds cycles from
 * CGJ_SYNC_LONG calls on): recording all of it would slow each of its calls down meanwhile. The
 * recording stops there and the run goes on eagerly; later runs of the anchor (a long step that
 * does end) are recorded whole, from their first call. Where other threads took its work over
 * meanwhile (a producer thread handing work to consumers through events), the thread looks for
 * its cycle at once rather than after CGJ_SYNC_LONG calls. */
#define PRODUCER_HANDOFFS 4

static void drop_long_first_run(cgj_thread_t *t)
{
    cgj_anchor_t *a = t->anchor;
    if (!a || __atomic_load_n(&a->long_steps, __ATOMIC_RELAXED) || a->ndrafts || a->nvariants || !t->implicit ||
        t->find.finds_cycles || t->sync_calls != CGJ_SYNC_FIRST_RECORD ||
        __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) != CGJ_STEP_SYNC)
        return;
    __atomic_store_n(&a->long_steps, true, __ATOMIC_RELAXED);
    /* Other threads took this thread's work over again and again (handoffs) and it never waits
     * itself: a producer's loop, not a long step (a PyTorch main thread's first step, whose
     * backward pass the worker takes over once, is one). It finds its steps by their cycle from
     * now on, as a worker thread does (implicit.c). */
    uint32_t handoffs = 0;
    for (uint32_t i = 0; i < t->rec.n; i++) handoffs += t->rec.ops[i].handoff;
    bool handed = handoffs >= PRODUCER_HANDOFFS;
    if (handed) t->find.sync_long = t->sync_calls; /* from its next call on: right here */
    cgj_oplist_free(&t->rec);
    CGJ_LOG(trace, "anchor '%s': %u calls without a synchronization in its first run: not recorded further%s", a->name,
            t->sync_calls, handed ? "; other threads take its work over: its cycle is looked for" : "");
    cgj_thread_go(t, CGJ_EVENT_ABORT, CGJ_MODE_EAGER);
}

/* Recording costs host time on top of the eager call: the anchor keeps the sum (warm-up). */
void cgj_record_leave(cgj_thread_t *t, const cgj_call_t *c, CUresult r)
{
    uint64_t t0 = cgj_now_ns();
    cgj_anchor_t *a = t->anchor;
    record_leave(t, c, r);
    if (!a) return;
    if (t->mode == CGJ_MODE_RECORD) drop_long_first_run(t);
    __atomic_fetch_add(&a->cost.record_ns, cgj_now_ns() - t0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&a->cost.recorded_ops, 1, __ATOMIC_RELAXED);
}

void cgj_record_lib(cgj_thread_t *t, const cgj_call_t *c)
{
    cgj_reason_code_t why;
    if (t->rec.n >= (uint32_t)cgj_cfg.MAX_OPS) {
        abort_with(t, CGJ_REASON_ABORT_MAX_OPS, c->api, NULL);
        return;
    }
    if (!record_op(t, c, &why)) return;
    t->lib_open = t->rec.n;
    t->lib_serial = t->serial;
}

void cgj_record_lib_leave(cgj_thread_t *t, uint32_t at, bool ok)
{
    if (at >= t->rec.n || !t->rec.ops[at].lib) return;
    cgj_libop_t *l = t->rec.ops[at].lib;
    l->nops = t->rec.n - at - 1;
    l->failed |= !ok;
}

static void drop_draft(cgj_anchor_t *a, uint32_t d)
{
    cgj_oplist_free(&a->drafts[d]);
    memmove(&a->drafts[d], &a->drafts[d + 1], (a->ndrafts - d - 1) * sizeof a->drafts[0]);
    memmove(&a->draft_runs[d], &a->draft_runs[d + 1], (a->ndrafts - d - 1) * sizeof a->draft_runs[0]);
    a->ndrafts--;
}

/* Runs of one shape that build a variant of a: two (the recording and one that agrees with it),
 * and one more for each of its variants beyond the first that never replayed to its end. An
 * anchor whose later variants never replayed meets steps that do not repeat (their shapes
 * follow the data: two alike batches, and never again); each such variant cost its recording,
 * plan, capture and instantiation (more than a step's time for a long step) for nothing, so a
 * shape must show itself more often before another is built. A shape that recurs still gets its
 * variant, a few runs later. */
static uint32_t runs_to_build(const cgj_anchor_t *a)
{
    uint32_t need = 2;
    for (uint32_t k = 1; k < a->nvariants; k++) need += !__atomic_load_n(&a->variants[k]->replays, __ATOMIC_RELAXED);
    return need;
}

/* A recording of a run that left the trace and matched no variant and no draft is one more in a
 * row (a run that matched resets the count); at CGJ_LONE_RECORDS the anchor's exits stop
 * recording (cgj_exit_side), which the report says. */
static void note_lone(const cgj_thread_t *t, cgj_anchor_t *a, bool matched)
{
    if (matched || !t->exited) {
        a->lone_records = 0, a->quiet_exits = 0;
        return;
    }
    if (++a->lone_records != CGJ_LONE_RECORDS) return;
    cgj_reason_t r;
    cgj_reason_set(&r, CGJ_REASON_OFF_LONE_RECORDINGS, CGJ_REASON_NO_OP,
                   "the recordings of its last %u exited runs each matched no other", a->lone_records);
    cgj_anchor_note(a, &r);
    CGJ_LOG(guards, "anchor '%s': runs that leave the trace are no longer recorded: its last %u matched nothing",
            a->name, a->lone_records);
}

void cgj_record_finish(cgj_thread_t *t)
{
    cgj_anchor_t *a = t->anchor;
    cgj_oplist_t rec = t->rec;
    memset(&t->rec, 0, sizeof t->rec);
    CGJ_LOG(trace, "anchor '%s': recorded %u ops", a->name, rec.n);
    if (a->state == CGJ_STATE_BLACKLISTED) {
        cgj_oplist_free(&rec);
        return;
    }
    cgj_reason_t why, newest = {.code = CGJ_REASON_NONE, .op = CGJ_REASON_NO_OP};
    /* A run that left its variant for the shape of another (the other could not be taken
     * there: a library call had run, or the program held the variant's blocks) says where the
     * program is now: the next step begins in that variant, not again in the one it left. */
    bool matched = false;
    for (uint32_t k = 0; k < a->nvariants && !matched; k++) {
        matched = cgj_shape_same(&a->variants[k]->list, &rec, &why);
        if (matched) __atomic_store_n(&a->current, k, __ATOMIC_RELAXED);
    }
    for (uint32_t d = a->ndrafts; d-- > 0;) {
        if (!cgj_shape_same(&a->drafts[d], &rec, &why)) {
            if (d + 1 == a->ndrafts) newest = why;
            continue;
        }
        note_lone(t, a, true);
        cgj_shape_classify(&rec, &a->drafts[d]);
        bool twin = a->want_twin, dup = !twin && cgj_build_duplicates(a, &rec);
        uint32_t need = runs_to_build(a);
        if (!twin && !dup && a->nvariants < cgj_build_max_variants() && ++a->draft_runs[d] < need) {
            cgj_reason_t r;
            cgj_reason_set(&r, CGJ_REASON_OFF_UNUSED_VARIANT, CGJ_REASON_NO_OP,
                           "%u runs of this shape so far, %u wanted: %u variants, some never replayed",
                           a->draft_runs[d], need, a->nvariants);
            cgj_anchor_note(a, &r);
            cgj_oplist_free(&rec); /* the draft stays, to be matched again */
            return;
        }
        /* A twin of an existing variant is worth building after an escape exit: its own
         * region double-buffers the blocks the program still holds. */
        if (a->nvariants < cgj_build_max_variants() && cgj_build_may_try(a) && (twin || !dup)) {
            cgj_build_prepare(&rec);
            if (cgj_builder_wanted(a)) { /* handed to the builder as the step ends (step.c) */
                t->build = rec, t->build_pending = true;
                rec = (cgj_oplist_t){0};
            } else {
                cgj_build_variant(a, &rec, false);
            }
        }
        cgj_oplist_free(&rec);
        drop_draft(a, d);
        return;
    }
    if (a->ndrafts) {
        char text[320];
        CGJ_LOG(guards, "anchor '%s': run differs from the previous one: %s", a->name,
                cgj_reason_format(&newest, text, sizeof text));
        cgj_anchor_fail(a, &newest);
    }
    note_lone(t, a, matched);
    if (a->ndrafts == CGJ_MAX_DRAFTS) drop_draft(a, 0);
    a->draft_runs[a->ndrafts] = 1;
    a->drafts[a->ndrafts++] = rec;
    if (!a->nvariants && a->state != CGJ_STATE_BLACKLISTED) cgj_anchor_go(a, CGJ_STATE_RECORD);
}
