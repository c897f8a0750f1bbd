/*
 * replay.c — a step replayed: each call is checked against the next op of the trace (the
 * guard) and absorbed; the current segment's graph is launched at a boundary op, at a chunk's
 * end, or at the step's end, with its varying parameters patched first.
 *
 * The invariant is kept because the host can only observe GPU memory through a boundary op,
 * and every boundary op launches what was absorbed before the call itself proceeds. When a
 * guard fails, the replay may first switch to another variant that has a segment starting where
 * the pending work starts and matches every call absorbed since; only then does it leave the
 * trace (exits.c).
 */
#include "tracer/tracer.h"
#include "graphs/graph.h"
#include "allocator/hostmem.h"
#include "allocator/pointers.h"
#include "allocator/pool.h"
#include "base/driver.h"
#include "base/log.h"

#include <string.h>

/* The executable graph refused op i's new values (a copy of another kind of memory, a memset
 * that no longer fits its node): the absorbed work runs eagerly, and from now on the op's values
 * are guarded like its topology, so that such runs leave the trace at that op or make a variant. */
static void patch_refused(cgj_thread_t *t, uint32_t i, CUresult err)
{
    cgj_op_t *o = &t->cur.trace->list.ops[i];
    char desc[160];
    cgj_reason_t r;
    o->fixed = true;
    cgj_reason_set(&r, CGJ_REASON_EXIT_PATCH, CGJ_REASON_NO_OP, "op %u, %s: %s", i,
                   cgj_op_describe(o, desc, sizeof desc), cgj_driver_errstr(err));
    cgj_exit_side(t, CGJ_EVENT_GUARD_FAIL, &r);
}

static void launch_segment(cgj_thread_t *t)
{
    cgj_mode_t mode = t->mode;
    cgj_exit_drain(t);           /* chunks handed to the launch thread go first (CGJIT_LAUNCH_ASYNC) */
    if (t->mode != mode) return; /* one of them failed: the step went on eagerly */
    cgj_trace_t *tr = t->cur.trace;
    cgj_segment_t *seg = &tr->segs[t->cur.seg];
    if (!seg->ncapture) return;
    uint32_t refused = UINT32_MAX;
    CUresult r = CUDA_SUCCESS;
    /* CGJIT_VERIFY: the segment's calls ran for real; the graph runs on the memory they started
     * from, and is compared with what they left (verify.c). Unchecked, it does not run. */
    bool verifying = CGJ_UNLIKELY(cgj_verify_running(t));
    bool runs = !verifying || cgj_verify_before(t);
    bool gated = runs && !verifying && cgj_verify_on(); /* a graph not checked: no window meets it */
    if (gated) cgj_verify_calls_enter();
    if (runs)
        r = cgj_chunk_launch(tr, t->cur.seg, cgj_pointer_host_generation(), t->anchor->name, &refused, t->cur.passed);
    if (gated) cgj_verify_calls_leave();
    if (verifying && runs) cgj_verify_after(t, r);
    if (r != CUDA_SUCCESS && refused != UINT32_MAX) {
        patch_refused(t, refused, r);
        return;
    }
    t->cur.launched = true;
    if (r != CUDA_SUCCESS) {
        cgj_exit_launch_failed(t, r);
        return;
    }
    cgj_thread_set_pending(t, false);
    CGJ_STAT_ADD(graph_launches, 1);
}

/* The chunk in flight is complete: launch it (or hand it to the launch thread, which launches it while
 * the program goes on: CGJIT_LAUNCH_ASYNC) and go on with the next segment. */
static void chunk_done(cgj_thread_t *t)
{
    cgj_trace_t *tr = t->cur.trace;
    const cgj_segment_t *seg = &tr->segs[t->cur.seg];
    if (cgj_offload_wanted(t, seg, &tr->list.ops[seg->end - 1]) && cgj_offload_hand(t, tr, t->cur.seg))
        t->cur.launched = true; /* its work stays pending for other threads until the step's last launch */
    else launch_segment(t);
    if (t->mode == CGJ_MODE_REPLAY && seg->ncapture && seg->end > seg->first &&
        tr->list.ops[seg->end - 1].chunk_end == CGJ_REASON_BREAK_COLLECTIVE) {
        uint32_t i = seg->end - 1;
        while (i > seg->first && !tr->list.ops[i].lib) i--;
        cgj_watch_collective(t->ctx, seg->home, t->anchor->name, tr->list.ops[i].call.api);
    }
    t->cur.seg++;
    t->cur.passed = 0;
    t->cur.staged_waited = false;
}

/* The segment of v that starts at op `first`, or UINT32_MAX. */
static uint32_t segment_at(const cgj_trace_t *v, uint32_t first)
{
    for (uint32_t s = 0; s < v->nsegs; s++)
        if (v->segs[s].first == first) return s;
    return UINT32_MAX;
}

/* Can op i of trace tr take values it holds for constants: its graph node is patched, or its
 * segment is issued eagerly with the run's values? (A node the driver refused is `fixed`.) */
static bool takes_values(const cgj_trace_t *tr, uint32_t i)
{
    const cgj_op_t *o = &tr->list.ops[i];
    return o->node || tr->segs[o->seg].eager;
}

/* Op `at` of trace tr took values it held for constants (cgj_guard with promote; `before`: its
 * varying parameter slots until then): they vary from now on, and its node joins its segment's
 * patch list. */
static void note_promoted(const cgj_thread_t *t, cgj_trace_t *tr, uint32_t at, uint32_t before)
{
    cgj_op_t *o = &tr->list.ops[at];
    if (!o->promoted) return;
    cgj_graph_list(tr, at);
    o->promoted = false;
    uint32_t slots = o->kp ? o->kp->nvarying - before : 0;
    __atomic_fetch_add(&tr->varying_slots, slots, __ATOMIC_RELAXED); /* the report reads it meanwhile */
    CGJ_STAT_ADD(slots_promoted, slots);
    CGJ_STAT_ADD(values_promoted, 1);
    CGJ_LOG(guards, "anchor '%s': op %u (%s): its values vary from now on (%u parameter slot(s))", t->anchor->name, at,
            o->call.api, slots);
}

/* Does variant v match the calls absorbed since the current segment began, and c? Stashes
 * into v if so. Earlier segments are launched already: what v would have done there no longer
 * matters, only that its segment starts where the pending work starts. */
static bool variant_matches(cgj_thread_t *t, cgj_trace_t *v, uint32_t first, const cgj_call_t *c, bool promote,
                            cgj_reason_t *why)
{
    const uint32_t pos = t->cur.pos;
    const cgj_op_t *held = t->cur.trace->list.ops; /* their calls hold this run's values */
    if (c ? v->list.n <= pos : v->list.n != pos) {
        cgj_reason_set(why, CGJ_REASON_EXIT_PAST_END, CGJ_REASON_NO_OP, "%u ops", v->list.n);
        return false;
    }
    if (!promote) {
        for (uint32_t i = first; i < pos; i++)
            if (!cgj_guard(&v->list.ops[i], &held[i].call, false, why)) return false;
        return !c || cgj_guard(&v->list.ops[pos], c, false, why);
    }
    /* With `promote`, the calls held since the segment began may take new values in v too
     * (another place of the loop, on other pointers): every op is asked first (as it is, else
     * whether it would take them), and only then are constants promoted and the promoted ops
     * listed, so that v keeps its constants unless the switch happens (the caller switches once
     * this holds). */
    const uint32_t end = c ? pos + 1 : pos;
    for (uint32_t i = first; i < end; i++) { /* as they are first: the common case, the guard's fast path */
        const cgj_call_t *call = i < pos ? &held[i].call : c;
        if (!cgj_guard(&v->list.ops[i], call, false, why) &&
            !cgj_guard_would_hold(&v->list.ops[i], call, takes_values(v, i), why))
            return false;
    }
    for (uint32_t i = first; i < end; i++) {
        cgj_op_t *o = &v->list.ops[i];
        uint32_t before = o->kp ? o->kp->nvarying : 0;
        bool held_ok = cgj_guard(o, i < pos ? &held[i].call : c, takes_values(v, i), why);
        CGJ_ASSERT(held_ok, "a guard that would hold did not");
        note_promoted(t, v, i, before);
    }
    return true;
}

/* CGJIT_LOG=guards: why variant k was not taken where the current one failed at op `pos`. */
static void log_not_taken(const cgj_thread_t *t, uint32_t k, const char *what, const cgj_reason_t *why)
{
    char text[320];
    CGJ_LOG(guards, "anchor '%s': at op %u, variant %u not taken: %s%s%s", t->anchor->name, t->cur.pos, k, what,
            why ? ": " : "", why ? cgj_reason_format(why, text, sizeof text) : "");
}

/* Under CGJIT_VERIFY, a call absorbed whole runs for real after its group is absorbed: a group
 * whose last op ends its segment would launch the graph before the call ran (verify.c). */
static bool ends_segment(const cgj_trace_t *v, uint32_t at, const cgj_libop_t *l)
{
    return cgj_verify_on() && at + 1 + l->nops >= v->segs[v->list.ops[at].seg].end;
}

/* Can variant v absorb library call lc whole at op `at`? A call of a fused chain needs no ops of
 * its own replayed: the chain's kernel computes what the call is documented to compute, and it
 * is absorbed whenever its key and arguments match. Any other call is absorbed whole only under
 * CGJIT_LIBS_LEARNED (cgj_libop_learned): nothing proves that the library, with state of its own
 * that cgjit cannot see, would issue what two earlier runs suggested; by default it runs. */
static bool absorbs(const cgj_trace_t *v, uint32_t at, const cgj_libcall_t *lc)
{
    const cgj_libop_t *l = v->list.ops[at].lib;
    return l && ((l->absorbable && cgj_libop_learned()) || v->list.ops[at].fused) && !lc->never &&
           at + 1 + l->nops <= v->list.n && cgj_libop_matches(l, lc) && !ends_segment(v, at, l);
}

/* Continue in another variant that matches what was absorbed since the pending work began and
 * call c (or, with c NULL at the step's end, that ends here too); with lc, one that absorbs that
 * library call whole; with `promote`, one whose op for c takes c's values where it held others
 * for constants (a library running for a call of a kind another variant learned, on new
 * pointers). */
static bool try_switch_to(cgj_thread_t *t, const cgj_call_t *c, const cgj_libcall_t *lc, bool promote)
{
    cgj_anchor_t *a = t->anchor;
    uint32_t first = t->cur.trace->segs[t->cur.seg].first;
    if (t->cur.allocs_served) { /* the program holds this variant's pool addresses */
        CGJ_LOG(guards, "anchor '%s': at op %u, no other variant: the step was served pool blocks", a->name,
                t->cur.pos);
        return false;
    }
    for (uint32_t k = 0; k < a->nvariants; k++) {
        cgj_trace_t *v = a->variants[k];
        if (v == t->cur.trace) continue;
        uint32_t s = segment_at(v, first);
        cgj_reason_t why;
        if (s == UINT32_MAX) {
            log_not_taken(t, k, "no segment begins where the pending work does", NULL);
            continue;
        }
        if (c && (v->list.n <= t->cur.pos || __atomic_load_n(&v->list.ops[t->cur.pos].held, __ATOMIC_ACQUIRE))) {
            log_not_taken(t, k, v->list.n <= t->cur.pos ? "shorter" : "its block is held", NULL);
            continue;
        }
        if (t->cur.passed && !v->segs[s].eager) { /* ops that ran would run again in its graph */
            log_not_taken(t, k, "ops already ran that its graph holds", NULL);
            continue;
        }
        /* CGJIT_VERIFY: the held calls ran for real already, to be checked against the graph; a
         * segment too short for one would issue them again. The run leaves the trace instead,
         * which issues nothing (exits.c). */
        if (v->segs[s].eager && cgj_verify_running(t)) {
            log_not_taken(t, k, "under CGJIT_VERIFY, its segment is too short for a graph", NULL);
            continue;
        }
        /* The pending work must lie in v's segment s: where v ends a chunk earlier than the
         * current trace (chunks follow each recording's host time), v's next segment would hold
         * absorbed work that is never launched. */
        if (t->cur.pos > v->segs[s].end || (t->cur.pos == v->segs[s].end && v->segs[s].chained && c)) {
            log_not_taken(t, k, "its chunk ends before the pending work does", NULL);
            continue;
        }
        if (lc && !absorbs(v, t->cur.pos, lc)) {
            log_not_taken(t, k, "does not absorb the library call", NULL);
            continue;
        }
        /* Asked before the guards: with `promote`, a guard that holds has taken new values. */
        bool waited = false, fits = true;
        for (uint32_t i = first + t->cur.passed; i < t->cur.pos && fits; i++) {
            const cgj_call_t *held = &t->cur.trace->list.ops[i].call; /* this run's values */
            const cgj_op_t *o = &v->list.ops[i];
            fits = !o->stage || (held->kind == CGJ_OP_MEMCPY && o->stage_cap >= held->u.m.bytes);
        }
        if (!fits) {
            log_not_taken(t, k, "its staging is smaller than the bytes held", NULL);
            continue;
        }
        if (!variant_matches(t, v, first, c, promote, &why)) {
            log_not_taken(t, k, "differs", &why);
            continue;
        }
        for (uint32_t i = first + t->cur.passed; i < t->cur.pos; i++) { /* carry the staged bytes over */
            cgj_op_t *o = &v->list.ops[i];
            if (!o->stage) continue;
            if (!waited && cgj_graph_staging_wait(&v->segs[s])) CGJ_STAT_ADD(staging_waits, 1);
            waited = true;
            memcpy(o->stage, t->cur.trace->list.ops[i].stage, o->call.u.m.bytes);
        }
        t->cur.staged_waited = waited;
        /* v's ops before t->cur.pos hold no library call's values of this run (the earlier
         * segments ran another variant's; the pending ones took values replay filled in): a
         * recording that continues v after a side exit must not learn library groups from them. */
        for (uint32_t i = 0; i < t->cur.pos; i++)
            if (v->list.ops[i].lib) v->list.ops[i].lib->live_absorbed = true;
        t->cur.trace = v;
        t->cur.seg = s;
        __atomic_store_n(&a->current, k, __ATOMIC_RELAXED); /* the report reads it */
        CGJ_STAT_ADD(variant_switches, 1);
        return true;
    }
    return false;
}

static bool try_switch(cgj_thread_t *t, const cgj_call_t *c)
{
    return try_switch_to(t, c, NULL, false);
}

/* Another variant as it is, else one that takes this run's values where it held constants:
 * where the current variant has no op to take new values (the run goes past its end, or ends
 * before it). */
static bool try_switch_or_promote(cgj_thread_t *t, const cgj_call_t *c)
{
    return try_switch(t, c) || try_switch_to(t, c, NULL, true);
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
static bool serve_pool_op(cgj_op_t *o, const cgj_call_t *c, cgj_reason_t *why)
{
    if (o->call.kind == CGJ_OP_POOL_FREE) {
        cgj_pool_release(o->call.u.a.addr);
        CGJ_STAT_ADD(pool_frees, 1);
        return true;
    }
    if (__atomic_load_n(&o->held, __ATOMIC_ACQUIRE)) { /* freed by any thread (allocator/pool.c) */
        cgj_reason_set(why, CGJ_REASON_EXIT_HELD_BLOCK, CGJ_REASON_NO_OP, "%zu bytes", o->call.u.a.bytes);
        return false;
    }
    *c->u.a.out = o->call.u.a.addr;
    if (c->u.a.pitch_out) *c->u.a.pitch_out = o->call.u.a.pitch;
    cgj_pool_hold(o->call.u.a.addr, &o->held);
    CGJ_STAT_ADD(pool_allocs, 1);
    return true;
}

/* Last resort before a side exit: the call differs from its op only in values the trace took
 * for constants (kernel parameters, grid, block, copy and memset operands); they vary from now
 * on, and the op's node joins its segment's patch list. */
static bool promote_values(cgj_thread_t *t, const cgj_call_t *c)
{
    cgj_trace_t *tr = t->cur.trace;
    cgj_op_t *o = &tr->list.ops[t->cur.pos];
    cgj_reason_t why;
    uint32_t before = o->kp ? o->kp->nvarying : 0;
    if (!takes_values(tr, t->cur.pos) || !cgj_guard(o, c, true, &why)) return false;
    note_promoted(t, tr, t->cur.pos, before);
    return true;
}

/* Stage a host-to-device copy's bytes: the buffer grows with the copy (after the graph that
 * reads it is done), and the node is patched to the new buffer at launch. */
static bool stage_bytes(cgj_thread_t *t, cgj_op_t *o, const cgj_call_t *c, cgj_reason_t *why)
{
    cgj_trace_t *tr = t->cur.trace;
    if (!t->cur.staged_waited && cgj_graph_staging_wait(&tr->segs[t->cur.seg])) CGJ_STAT_ADD(staging_waits, 1);
    t->cur.staged_waited = true;
    if (c->u.m.bytes > o->stage_cap) {
        size_t cap = o->stage_cap * 2 > c->u.m.bytes ? o->stage_cap * 2 : c->u.m.bytes;
        void *grown = cgj_staging_alloc(cap);
        if (!grown) {
            cgj_reason_set(why, CGJ_REASON_BUILD_STAGING, CGJ_REASON_NO_OP, "%zu bytes", cap);
            return false;
        }
        cgj_staging_free(o->stage);
        o->stage = grown;
        o->stage_cap = cap;
        cgj_graph_list(tr, t->cur.pos);
    }
    memcpy(o->stage, c->u.m.hsrc, c->u.m.bytes);
    CGJ_STAT_ADD(bytes_staged, c->u.m.bytes);
    return true;
}

/* Replay reached a LIB op with library call c: absorb the whole group when its guard holds
 * (the library is not called) and return true, in another variant whose group at this op
 * absorbs the call where the current one does not (steps that make one of several calls here,
 * each learned in a variant of its own); else note the open call (the library runs, its
 * driver calls are matched one by one, and cgj_step_leave learns from them) and return false. */
static bool replay_lib(cgj_thread_t *t, const cgj_call_t *c)
{
    const cgj_libcall_t *lc = c->u.l.lc;
    /* Under CGJIT_VERIFY a call is absorbed whole only in a segment being checked: elsewhere
     * (a segment issued eagerly, one verify could not copy) nothing would run it for real. */
    bool absorbed = (!cgj_verify_on() || cgj_verify_running(t)) &&
                    (absorbs(t->cur.trace, t->cur.pos, lc) || try_switch_to(t, c, lc, false));
    cgj_op_t *m = &t->cur.trace->list.ops[t->cur.pos]; /* another variant's, after a switch */
    cgj_trace_t *tr = t->cur.trace;
    cgj_libop_t *l = m->lib;
    cgj_libop_note_call(l, lc, absorbed);
    if (!absorbed) {
        t->lib_open = t->cur.pos + 1;
        t->lib_serial = t->serial;
        l->called++;
        return false;
    }
    cgj_libop_fill(m, lc);
    uint32_t end = t->cur.pos + 1 + l->nops;
    while (t->cur.pos < end && t->mode == CGJ_MODE_REPLAY) {
        cgj_thread_absorbed(t, tr->list.ops[t->cur.pos].call.stream);
        t->cur.pos++;
        t->cur.absorbed++;
        if (tr->segs[t->cur.seg].chained && t->cur.pos == tr->segs[t->cur.seg].end) chunk_done(t);
    }
    /* A failed launch turned the step eager: what the library would have issued still runs. */
    for (uint32_t i = t->cur.pos; i < end; i++)
        cgj_op_issue(&tr->list.ops[i], tr->list.ops[i].call.stream, false, false);
    l->absorbed++;
    CGJ_STAT_ADD(lib_absorbed, 1);
    if (l->collective) CGJ_STAT_ADD(collectives_absorbed, 1);
    return true;
}

/* Leave the trace at the current op: the difference r, with the op described. */
static int guard_exit(cgj_thread_t *t, cgj_reason_t *r)
{
    char desc[160], detail[sizeof r->detail + sizeof desc + 8];
    cgj_op_describe(&t->cur.trace->list.ops[t->cur.pos], desc, sizeof desc);
    snprintf(detail, sizeof detail, "%s%s%s", desc, r->detail[0] ? ", " : "", r->detail);
    cgj_strlcpy(r->detail, detail, sizeof r->detail);
    cgj_exit_side(t, CGJ_EVENT_GUARD_FAIL, r);
    return CGJ_EXECUTE;
}

/* An allocation or free of the step: served from the pool, or (the block is still held)
 * from a twin variant, or the trace is left. False when it left. */
static bool pool_op(cgj_thread_t *t, const cgj_call_t *c)
{
    cgj_reason_t why;
    cgj_op_t *o = &t->cur.trace->list.ops[t->cur.pos];
    if (!serve_pool_op(o, c, &why)) {
        /* Double buffering: a twin variant (same trace, another region) may have it free. */
        if (!try_switch(t, c)) {
            CGJ_STAT_ADD(escape_exits, 1);
            t->anchor->want_twin = true;
            cgj_exit_side(t, CGJ_EVENT_GUARD_FAIL, &why);
            return false;
        }
        o = &t->cur.trace->list.ops[t->cur.pos];
        CGJ_ASSERT(serve_pool_op(o, c, &why), "a switch target's block is held");
    }
    t->cur.allocs_served |= o->call.kind == CGJ_OP_ALLOC;
    return true;
}

/* Does no other variant hold the ops of a segment that begins at `first` in a graph? An op that
 * ran as the program made it could not be in a graph launched after a switch to such a variant:
 * a run that leaves the current variant there would leave the trace (an anchor begun at several
 * places of a loop, a short step at one and a long one at another, switched at every run). */
static bool eager_in_every_variant(const cgj_thread_t *t, uint32_t first)
{
    const cgj_anchor_t *a = t->anchor;
    for (uint32_t k = 0; k < a->nvariants; k++) {
        const cgj_trace_t *v = a->variants[k];
        uint32_t s = v == t->cur.trace ? UINT32_MAX : segment_at(v, first);
        if (s != UINT32_MAX && !v->segs[s].eager) return false;
    }
    return true;
}

/* Op o (at t->cur.pos, its guard held) is in a segment too small for a graph, which replay would
 * issue eagerly at the segment's end anyway, and nothing of the segment is held before it: the
 * program's call runs now, as eager runs it, and the segment's launch skips it. Holding it back
 * would only start it later, and make other threads that wait for it flush it. Unless another
 * variant holds it in a graph: then it is held, so that the run can still switch there. */
static bool passes(const cgj_thread_t *t, const cgj_op_t *o)
{
    const cgj_segment_t *seg = &t->cur.trace->segs[t->cur.seg];
    return seg->eager && t->cur.pos == seg->first + t->cur.passed && cgj_op_class[o->call.kind] == CGJ_CLASS_CAPTURE &&
           !o->lib && !t->lib_open && eager_in_every_variant(t, seg->first);
}

/* A copy from pageable memory (staged) in a segment too small for a graph runs as the program
 * makes it, like any op of such a segment, once the ops held before it (pool ops, a library call
 * absorbed whole) are issued, in order: held to the segment's end, it would go out of a staging
 * buffer that the next run rewrites while the copy may still be pending, and cost a copy of its
 * bytes besides. False where the thread left replay (an op failed to issue). */
static bool issue_held(cgj_thread_t *t)
{
    cgj_exit_drain(t); /* chunks handed to the launch thread go first (CGJIT_LAUNCH_ASYNC) */
    if (t->mode != CGJ_MODE_REPLAY) return false;
    uint32_t done, first = t->cur.trace->segs[t->cur.seg].first + t->cur.passed;
    bool gated = cgj_verify_on() && first < t->cur.pos; /* as the program's calls (exits.c) */
    if (gated) cgj_verify_calls_enter();
    CUresult r = cgj_graph_issue_ops(t->cur.trace, first, t->cur.pos, &done);
    if (gated) cgj_verify_calls_leave();
    t->cur.passed += done;
    if (r != CUDA_SUCCESS) {
        cgj_exit_launch_failed(t, r);
        return false;
    }
    cgj_thread_set_pending(t, false);
    return true;
}

int cgj_replay_enter(cgj_thread_t *t, const cgj_call_t *c)
{
    cgj_trace_t *tr = t->cur.trace;
    cgj_reason_t why;
    cgj_call_t tmp;
    bool run_now = false;
    if (t->cur.pos < tr->list.n) c = as_pool_free(c, &tr->list.ops[t->cur.pos], &tmp);
    if (t->cur.pos >= tr->list.n && !try_switch_or_promote(t, c)) { /* past its end */
        cgj_reason_set(&why, CGJ_REASON_EXIT_PAST_END, CGJ_REASON_NO_OP, "%s after the trace's %u ops", c->api,
                       tr->list.n);
        cgj_exit_side(t, CGJ_EVENT_GUARD_FAIL, &why);
        return CGJ_EXECUTE;
    }
    /* A failed guard tries, in turn: another variant as it is, new values in this one, new values
     * in another (an anchor begun at several places: the value changed at the place whose
     * variant this run is not in yet). */
    if (!cgj_guard(&t->cur.trace->list.ops[t->cur.pos], c, false, &why) && !try_switch(t, c) && !promote_values(t, c) &&
        !try_switch_to(t, c, NULL, true))
        return guard_exit(t, &why);
    tr = t->cur.trace;
    cgj_op_t *o = &tr->list.ops[t->cur.pos];
    if (o->lib && replay_lib(t, c)) return CGJ_ABSORB;
    o = &t->cur.trace->list.ops[t->cur.pos]; /* replay_lib may have switched variants */
    tr = t->cur.trace;
    if (o->lib && o->fused) { /* the library runs, but the chain's kernel holds the recorded call */
        cgj_reason_set(&why, CGJ_REASON_EXIT_FUSED_CALL, CGJ_REASON_NO_OP, NULL);
        return guard_exit(t, &why);
    }
    if (cgj_op_class[o->call.kind] == CGJ_CLASS_BOUNDARY) {
        CGJ_LOG(breaks, "anchor '%s': segment %u ends at op %u (%s): %s", t->anchor->name, t->cur.seg, t->cur.pos,
                c->api, cgj_reason_message(cgj_op_break_reason(o)));
        launch_segment(t);
        t->cur.pos++;
        t->cur.seg++;
        t->cur.passed = 0;
        t->cur.staged_waited = false;
        return CGJ_EXECUTE;
    }
    if (cgj_op_class[o->call.kind] == CGJ_CLASS_POOL) {
        if (!pool_op(t, c)) return CGJ_EXECUTE;
        o = &t->cur.trace->list.ops[t->cur.pos];
    } else if (cgj_call_staged(&o->call) && tr->segs[t->cur.seg].eager && !o->lib && !t->lib_open) {
        if (!issue_held(t)) return CGJ_EXECUTE;
        run_now = true; /* no staging of its own: it runs now, whatever other variants hold */
    } else if (o->stage && !stage_bytes(t, o, c, &why)) {
        return guard_exit(t, &why);
    }
    tr = t->cur.trace;
    if (run_now || passes(t, o)) {
        t->cur.pos++;
        t->cur.passed++;
        if (tr->segs[t->cur.seg].chained && t->cur.pos == tr->segs[t->cur.seg].end) chunk_done(t);
        return CGJ_EXECUTE;
    }
    cgj_thread_absorbed(t, o->call.stream);
    t->cur.pos++;
    t->cur.absorbed++;
    if (tr->segs[t->cur.seg].chained && t->cur.pos == tr->segs[t->cur.seg].end) chunk_done(t);
    return o->lib ? CGJ_EXECUTE : CGJ_ABSORB; /* the library runs: its calls are matched next */
}

void cgj_replay_lib_leave(cgj_thread_t *t, uint32_t at, const cgj_libcall_t *lc, bool ok)
{
    if (!ok || lc->never || !cgj_libop_learned()) return; /* nothing to learn for: it runs anyway */
    cgj_trace_t *tr = t->cur.trace;
    cgj_op_t *m = at < tr->list.n ? &tr->list.ops[at] : NULL;
    if (!m || !m->lib || m->lib->failed || t->cur.pos != at + 1 + m->lib->nops) return;
    bool matched = cgj_libop_matches(m->lib, lc);
    if (matched && (m->lib->absorbable || m->lib->for_good)) return;
    /* New arguments, or a group not absorbable yet: this run is one more sample. */
    bool was = m->lib->absorbable;
    cgj_libop_relearn(m, lc);
    if (!matched) CGJ_STAT_ADD(lib_relearned, 1);
    char text[280] = "";
    if (!m->lib->absorbable) cgj_reason_format(&m->lib->why_not, text, sizeof text);
    if (!matched || was != m->lib->absorbable)
        CGJ_LOG(guards, "anchor '%s': op %u (%s): %s; %s%s", t->anchor->name, at, m->call.api,
                matched ? "learned again" : "new arguments learned",
                m->lib->absorbable ? "absorbed from now on" : "not absorbed: ", text);
}

/* Are all of v's in-step allocations free (none still held by the program since an earlier
 * replay of v)? */
static bool blocks_free(const cgj_trace_t *v)
{
    for (uint32_t j = 0; j < v->nblocks && v->allocs; j++)
        if (__atomic_load_n(&v->list.ops[v->allocs[j]].held, __ATOMIC_ACQUIRE)) return false;
    return true;
}

/* The variant a step begins in: the current one, or where the program still holds a block it
 * returned (an output freed only in a later step, perhaps after the step has allocated others),
 * a twin whose blocks are all free. Switching at the held allocation itself is too late once
 * the step was served other blocks of the current variant. */
static uint32_t begin_variant(cgj_anchor_t *a)
{
    uint32_t cur = __atomic_load_n(&a->current, __ATOMIC_RELAXED);
    if (blocks_free(a->variants[cur])) return cur;
    for (uint32_t k = 0; k < a->nvariants; k++)
        if (k != cur && blocks_free(a->variants[k])) {
            __atomic_store_n(&a->current, k, __ATOMIC_RELAXED);
            CGJ_STAT_ADD(variant_switches, 1);
            return k;
        }
    return cur;
}

void cgj_replay_begin(cgj_thread_t *t, cgj_anchor_t *a)
{
    CGJ_ASSERT(!__atomic_load_n(&t->handed, __ATOMIC_ACQUIRE),
               "a step begins with chunks of the last one still handed");
    cgj_thread_set_pending(t, false);
    t->cur.trace = a->variants[begin_variant(a)];
    t->cur.pos = t->cur.seg = t->cur.passed = 0;
    t->cur.launched = t->cur.staged_waited = t->cur.allocs_served = t->exited = false;
    t->cur.absorbed = 0;
    cgj_thread_go(t, CGJ_EVENT_BEGIN, CGJ_MODE_REPLAY);
}

void cgj_replay_end(cgj_thread_t *t)
{
    cgj_anchor_t *a = t->anchor;
    cgj_trace_t *tr = t->cur.trace;
    CGJ_STAT_ADD(ops_absorbed, t->cur.absorbed);
    if (t->cur.pos != tr->list.n && try_switch_or_promote(t, NULL))
        tr = t->cur.trace; /* a variant that ends here, with new values where needed */
    if (t->cur.pos == tr->list.n) {
        launch_segment(t); /* on failure the step has become eager */
        if (t->mode == CGJ_MODE_REPLAY) {
            __atomic_fetch_add(&tr->replays, 1, __ATOMIC_RELAXED);
            if (!__atomic_fetch_add(&a->replays, 1, __ATOMIC_RELAXED))
                __atomic_store_n(&a->cost.first_replay_run, __atomic_load_n(&a->runs, __ATOMIC_RELAXED),
                                 __ATOMIC_RELAXED);
            CGJ_STAT_ADD(steps_replayed, 1);
        }
        return;
    }
    cgj_reason_t why;
    cgj_reason_set(&why, CGJ_REASON_EXIT_ENDED_EARLY, CGJ_REASON_NO_OP, "after %u of the trace's %u ops", t->cur.pos,
                   tr->list.n);
    cgj_exit_side(t, CGJ_EVENT_GUARD_FAIL, &why);
}

void cgj_replay_forget(cgj_thread_t *t)
{
    t->cur.trace = NULL;
}
