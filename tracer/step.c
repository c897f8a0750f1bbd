/*
 * step.c — one step's life, from the calls runtime/ makes: begin, enter and leave (once per
 * intercepted call), end. The state machine's rows are in machine.h; this file decides which
 * row applies and hands the work to the file that owns it: replay.c (absorb), record.c (record),
 * exits.c (leave a replay), build.c through record.c (make a trace), implicit.c (where steps
 * begin and end without markers).
 *
 * Every entry point takes the thread's own lock, so that another thread that must flush this
 * thread's absorbed work (exits.c, cgj_step_observe) sees it whole.
 */
#include "tracer/tracer.h"
#include "fusion/fusion.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/timeline.h"
#include "graphs/gpubusy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int begin_locked(cgj_thread_t *t, const char *name, bool implicit, bool record);
static int end_locked(cgj_thread_t *t);

/* ---- a thread's end: its step ends there, as with cgj_trace_end ----
 * A thread that exits (or a process that exits from main) with a step open has its absorbed
 * work issued and its anchor released: a TLS destructor for threads, atexit for the process. */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static int forked; /* this process is a child of fork(): everything passes through */

void cgj_step_forked(bool cuda_before)
{
    if (cuda_before) {
        forked = 1;
        cgj_implicit_disable_silently();
    }
    cgj_threads_forked();
    cgj_implicit_forked();
    cgj_gov_forked();
    cgj_verify_forked();
    cgj_captures_forked();
    cgj_anchors_forked();
    cgj_watch_forked();
    cgj_builder_forked();
    cgj_offload_forked();
    cgj_tls.handed = 0, cgj_tls.launch_err = cgj_tls.launch_lost = CUDA_SUCCESS; /* the parent's chunks */
    /* The threads' count started afresh: implicit steps look at every call again. */
    if (__atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) != CGJ_STEP_OFF)
        __atomic_fetch_add(&cgj_tracing_threads, 1, __ATOMIC_RELAXED);
    if (cgj_cfg.VERIFY && !forked) __atomic_fetch_add(&cgj_tracing_threads, 1, __ATOMIC_RELAXED);
}

/* The CUDA runtime may have unbound an exiting thread's context already (its own TLS destructor
 * ran first): the step's work is issued in the context it was made in, if that still exists. At
 * process exit nothing is rebound: the program may have destroyed its contexts on purpose. */
static void rebind_context(const cgj_thread_t *t)
{
    CUcontext cur = NULL;
    unsigned version = 0;
    if (!t->ctx || !cgj_drv.r_cuCtxGetCurrent || !cgj_drv.r_cuCtxGetApiVersion ||
        cgj_drv.r_cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur)
        return;
    if (cgj_drv.r_cuCtxGetApiVersion(t->ctx, &version) == CUDA_SUCCESS) cgj_drv.r_cuCtxSetCurrent(t->ctx);
}

static void end_at_exit(cgj_thread_t *t, bool thread)
{
    cgj_thread_lock(t);
    if (t->mode != CGJ_MODE_OFF) {
        CGJ_LOG(trace, "the thread ends inside a step: the step ends here");
        if (thread) rebind_context(t);
        end_locked(t);
    }
    cgj_thread_unlock(t);
}

static void thread_exit(void *arg)
{
    cgj_thread_t *t = arg;
    end_at_exit(t, true);
    cgj_implicit_thread_exit(t);
    cgj_verify_free(t);
    cgj_thread_unregister(t);
}

static void process_exit(void)
{
    if (cgj_tls.registered && !forked) end_at_exit(&cgj_tls, false);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, thread_exit);
    atexit(process_exit);
}

/* The thread joins the registry, with its exit hook, on its first traced call. */
static void enter_thread(cgj_thread_t *t)
{
    if (CGJ_LIKELY(t->registered)) return;
    pthread_once(&exit_once, make_exit_key);
    if (cgj_thread_register(t)) pthread_setspecific(exit_key, t);
}

/* ---- the timeline (CGJIT_TRACE_FILE): one event per step, one per side exit ---- */

static __thread bool exit_marked; /* this step's side exit is on the timeline */

/* An instant event where the step left its trace; the anchor's reason says why. */
static void timeline_exit(const cgj_thread_t *t)
{
    exit_marked = true;
    const cgj_anchor_t *a = t->anchor ? t->anchor : t->last;
    cgj_tl_event_t *e = a ? cgj_timeline_take('i', "exit", "side exit") : NULL;
    if (!e) return;
    cgj_tl_str(e, "anchor", a->name);
    cgj_tl_str(e, "reason", cgj_reason_name(a->reason.code));
    if (a->reason.op != CGJ_REASON_NO_OP) cgj_tl_num(e, "op", a->reason.op);
    cgj_reason_format(&a->reason, e->detail, sizeof e->detail);
    cgj_timeline_put(e);
}

/* The step that began at t->begun_ns ends at `now`: a complete event named after its anchor,
 * of category replay (replayed to its end), exit (left its trace), record or eager. */
static void timeline_step(const cgj_thread_t *t, cgj_mode_t mode, bool replayed, bool exited, uint64_t now)
{
    if (exited && !exit_marked) timeline_exit(t); /* left at the end, or by another thread */
    const char *kind = replayed && !exited ? "replay" : exited ? "exit" : mode == CGJ_MODE_RECORD ? "record" : "eager";
    const cgj_anchor_t *a = t->anchor ? t->anchor : t->last;
    cgj_tl_event_t *e = cgj_timeline_take('X', kind, a ? a->name : "step");
    if (!e) return;
    e->ts_ns = t->begun_ns;
    e->dur_ns = now - t->begun_ns;
    cgj_tl_str(e, "kind", kind);
    if (a) cgj_tl_num(e, "run", (int64_t)__atomic_load_n(&a->runs, __ATOMIC_RELAXED));
    if (replayed) cgj_tl_num(e, "absorbed", (int64_t)t->cur.absorbed);
    cgj_timeline_put(e);
}

/* Act on implicit.c's decision for call c. False when the call runs outside any step. A driver
 * call made by a library call is part of that call: steps never begin or end inside one, and the
 * cycle detector sees the library call alone, as it does when replay absorbs the call whole. */
static bool route(cgj_thread_t *t, const cgj_call_t *c)
{
    if (t->lib_depth || CGJ_UNLIKELY(cgj_program_capturing())) return t->mode != CGJ_MODE_OFF;
    cgj_decision_t d;
    cgj_implicit_decide(t, c, &d);
    if (d.route == CGJ_ROUTE_STAY) return true;
    /* A warm-up run cut for its length (implicit.c) where the step begun there is another anchor:
     * a long step that ends, whose next run records whole (record.c). Where it is the same anchor
     * (a loop that never waits), that run is its first recorded one. */
    if (d.record && t->last && strcmp(t->last->name, d.name) != 0)
        __atomic_store_n(&t->last->long_steps, true, __ATOMIC_RELAXED);
    else if (d.record && t->find.sighted && t->find.sighted != cgj_anchor_sight_key(d.name))
        cgj_anchor_sighting_long(t->find.sighted);
    if (t->mode != CGJ_MODE_OFF) end_locked(t);
    /* Dormant (govern.c): a step in progress ends as it would, and none begins. */
    if (d.route == CGJ_ROUTE_OUTSIDE || __atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED)) return false;
    cgj_gov_begun(c, d.name, t->sync_calls + 1);
    begin_locked(t, d.name, true, d.record);
    return true;
}

/* May call c begin or end a step (implicit steps: between steps, or in one CGJIT_STEP began)? */
static bool may_route(cgj_thread_t *t, const cgj_call_t *c)
{
    return (t->mode == CGJ_MODE_OFF || t->implicit) && !cgj_implicit_stays(t, c);
}

/* A query right after a query of the same step (a host polling: while (cuStreamQuery(s) ==
 * CUDA_ERROR_NOT_READY) ...): the first issued whatever the step held, and nothing came since,
 * so the others pass straight through: not recorded, not guarded, not counted toward a step's
 * length nor seen by the cycle detector. A poll is one op however long the host waits. */
static bool repeats_query(cgj_thread_t *t, const cgj_call_t *c)
{
    bool query = c->kind == CGJ_OP_QUERY && !t->lib_depth;
    t->repeat = query && t->polled;
    t->polled = query;
    return t->repeat;
}

/* ---- the fast-path tests runtime/ asks (tracer/step.h) ---- */

bool cgj_step_tracing(void)
{
    cgj_mode_t m = cgj_thread_mode(&cgj_tls);
    return m >= CGJ_MODE_EAGER ||
           (m == CGJ_MODE_OFF && __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) != CGJ_STEP_OFF &&
            !cgj_program_capturing() && !__atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED)) ||
           __atomic_load_n(&cgj_tls.deferred, __ATOMIC_RELAXED) != CUDA_SUCCESS;
}

bool cgj_step_take(void)
{
    /* CGJIT_VERIFY: every call, so that work touching memory passes verify's gate (verify.c). */
    if (!cgj_step_tracing() && !CGJ_UNLIKELY(cgj_cfg.VERIFY)) return false;
    if (CGJ_UNLIKELY(cgj_tls.probe.probing)) cgj_probe_mark();
    return true;
}

bool cgj_step_active(void)
{
    return cgj_thread_mode(&cgj_tls) != CGJ_MODE_OFF;
}

bool cgj_step_lib_key_wanted(void)
{
    return !(cgj_thread_mode(&cgj_tls) == CGJ_MODE_EAGER &&
             __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) == CGJ_STEP_SYNC);
}

bool cgj_step_others_pending_on(CUstream s)
{
    uint64_t own = __atomic_load_n(&cgj_tls.pending_mask, __ATOMIC_RELAXED);
    unsigned b = cgj_stream_bucket(s), l = cgj_stream_bucket(CU_STREAM_LEGACY);
    if (s == CU_STREAM_LEGACY) /* the legacy stream waits for every blocking stream */
        return __atomic_load_n(&cgj_pending_threads, __ATOMIC_RELAXED) > (cgj_thread_pending(&cgj_tls) ? 1 : 0);
    return __atomic_load_n(&cgj_pending_on[b], __ATOMIC_RELAXED) > (own >> b & 1) ||
           __atomic_load_n(&cgj_pending_on[l], __ATOMIC_RELAXED) > (own >> l & 1);
}

int cgj_step_enter(const cgj_call_t *c)
{
    cgj_thread_t *t = &cgj_tls;
    enter_thread(t);
    cgj_thread_lock(t);
    if (repeats_query(t, c)) {
        cgj_thread_unlock(t);
        return CGJ_EXECUTE;
    }
    t->rec_in_ns = t->mode == CGJ_MODE_RECORD ? cgj_now_ns() : 0;
    int d = CGJ_EXECUTE;
    bool routed = t->routed; /* by cgj_step_verify_first, before the call ran */
    t->routed = false;
    if (routed ? !t->routed_in : may_route(t, c) && !route(t, c)) d = CGJ_EXECUTE;
    else if (t->mode == CGJ_MODE_REPLAY) {
        if (CGJ_UNLIKELY(c->kind == CGJ_OP_LIB) && cgj_verify_on()) cgj_verify_enter(t); /* before it runs */
        d = cgj_replay_enter(t, c);
        if (CGJ_UNLIKELY(cgj_timeline_on) && t->exited && !exit_marked) timeline_exit(t);
    }
    /* An eager probe times the calls replay would absorb (the outermost: a library's own
     * driver calls are inside its call), not the synchronizations that wait for the GPU. */
    if (CGJ_UNLIKELY(t->probe.probing)) cgj_cost_call_in(t, c);
    if (c->kind == CGJ_OP_LIB && t->mode == CGJ_MODE_RECORD) {
        cgj_record_lib(t, c);
        t->rec_out_ns = t->rec_in_ns; /* the library's first driver call: its gap is the library's own time */
    }
    if (c->kind == CGJ_OP_LIB && t->mode >= CGJ_MODE_RECORD) CGJ_STAT_ADD(lib_calls, 1);
    if (c->kind == CGJ_OP_LIB && d == CGJ_EXECUTE) t->lib_depth++; /* the library runs now */
    /* A call that runs for real comes after the chunks handed to the launch thread (a library call
     * does not: its own driver calls are matched next, and those that run come here). */
    else if (d == CGJ_EXECUTE && CGJ_UNLIKELY(__atomic_load_n(&t->handed, __ATOMIC_RELAXED))) cgj_exit_drain(t);
    if (CGJ_UNLIKELY(d == CGJ_ABSORB && c->kind == CGJ_OP_LIB && cgj_verify_running(t))) d = CGJ_RUN_ABSORBED;
    cgj_thread_unlock(t);
    if (CGJ_UNLIKELY(cgj_cfg.VERIFY) && d == CGJ_EXECUTE) cgj_verify_call_begin(c); /* ended in cgj_step_leave */
    return d;
}

bool cgj_step_passes(const cgj_call_t *c)
{
    cgj_thread_t *t = &cgj_tls;
    /* Unlocked: a thread leaves EAGER only by itself (another thread flushes only a thread with
     * absorbed work pending, which one running eagerly has none of). The tests are
     * cgj_step_enter's and cgj_implicit_stays', the count taken only where the call passes (where
     * it does not, cgj_step_enter takes it). An error re-issuing met waits for cgj_step_leave:
     * such a call takes the long way, as every call does under CGJIT_VERIFY (verify.c's gate). */
    if (cgj_thread_mode(t) != CGJ_MODE_EAGER || t->lib_depth || t->routed ||
        CGJ_UNLIKELY(t->probe.probing | cgj_cfg.VERIFY) || c->kind == CGJ_OP_LIB ||
        __atomic_load_n(&t->deferred, __ATOMIC_RELAXED) != CUDA_SUCCESS || !cgj_implicit_counts(t, c) ||
        !cgj_implicit_goes_on(t, t->sync_calls + 1))
        return false;
    t->sync_calls++;
    if (t->find.warming) t->sync_shape = cgj_implicit_shape(t->sync_shape, c);
    t->polled = false; /* as repeats_query: this call is no query */
    return true;
}

bool cgj_step_verify_first(const cgj_call_t *c)
{
    cgj_thread_t *t = &cgj_tls;
    cgj_mode_t mode = cgj_thread_mode(t);
    if ((mode != CGJ_MODE_REPLAY && mode != CGJ_MODE_OFF) || cgj_op_class[c->kind] != CGJ_CLASS_CAPTURE ||
        c->kind == CGJ_OP_HOST_FUNC)
        return false;
    enter_thread(t);
    cgj_thread_lock(t);
    bool run = false;
    /* The call may begin an implicit step (between steps), or end this one and begin the next
     * (the next step's first call): routed now, it runs for real in the step it begins, so that
     * step's first segment is checked too, and never inside the check of the ending step's last
     * graph (whose eager results it would join, and whose new step would then replay it again).
     * cgj_step_enter does not route it twice. */
    if (may_route(t, c)) {
        t->routed = true;
        t->routed_in = route(t, c);
    }
    if (t->mode == CGJ_MODE_REPLAY) {
        cgj_verify_enter(t);
        run = cgj_verify_running(t);
    }
    cgj_thread_unlock(t);
    if (run) cgj_verify_call_begin(c); /* ended in cgj_step_verify_ran */
    return run;
}

void cgj_step_verify_run(void)
{
    cgj_verify_call_begin(NULL);
}

void cgj_step_verify_ran(void)
{
    cgj_verify_call_end();
}

/* The library call whose LIB op is open returned (ok: successfully). */
static void lib_leave(cgj_thread_t *t, const cgj_libcall_t *lc, bool ok)
{
    uint32_t at = t->lib_open - 1;
    bool open = t->lib_open && t->lib_serial == t->serial;
    t->lib_open = 0;
    if (!open) return;
    if (t->mode == CGJ_MODE_RECORD && at < t->rec.n && t->rec.ops[at].lib) cgj_record_lib_leave(t, at, ok);
    else if (t->mode == CGJ_MODE_REPLAY) cgj_replay_lib_leave(t, at, lc, ok);
}

CUresult cgj_step_leave(const cgj_call_t *c, CUresult r)
{
    cgj_thread_t *t = &cgj_tls;
    uint64_t out_ns = CGJ_UNLIKELY(t->probe.probing) ? cgj_now_ns() : 0; /* the real call returned (cost.c) */
    if (CGJ_UNLIKELY(cgj_cfg.VERIFY)) cgj_verify_call_end();
    cgj_thread_lock(t);
    if (t->repeat) {
        t->repeat = false;
        if (r == CUDA_SUCCESS) r = cgj_thread_take_deferred(t);
        cgj_thread_unlock(t);
        return r;
    }
    if (c->kind == CGJ_OP_LIB && t->lib_depth) t->lib_depth--;
    if (CGJ_UNLIKELY(t->probe.call_in_ns) && !t->lib_depth) cgj_cost_call_out(t);
    if (c->kind == CGJ_OP_LIB) lib_leave(t, c->u.l.lc, r == CUDA_SUCCESS);
    else if (t->mode == CGJ_MODE_RECORD) cgj_record_leave(t, c, r);
    if (t->mode == CGJ_MODE_RECORD) t->rec_out_ns = cgj_now_ns();
    if (r == CUDA_SUCCESS && c->kind != CGJ_OP_LIB) r = cgj_thread_take_deferred(t);
    if (out_ns && t->probe.probing) cgj_cost_call_left(t, out_ns);
    cgj_thread_unlock(t);
    return r;
}

void cgj_step_untraceable(const char *api)
{
    cgj_thread_t *t = &cgj_tls;
    cgj_thread_lock(t);
    t->polled = false;
    if (t->mode >= CGJ_MODE_RECORD) { /* else: no step, or one already running eagerly */
        cgj_reason_t r;
        cgj_reason_set(&r, CGJ_REASON_ABORT_UNTRACEABLE, CGJ_REASON_NO_OP, "%s", api);
        cgj_exit_abort(t, &r);
    }
    cgj_thread_unlock(t);
}

void cgj_step_capture_begin(CUstream s, const char *api)
{
    cgj_thread_t *t = &cgj_tls;
    if (cgj_tracing()) {
        cgj_thread_lock(t);
        if (t->mode >= CGJ_MODE_RECORD) {
            cgj_reason_t r;
            cgj_reason_set(&r, CGJ_REASON_ABORT_CAPTURE, CGJ_REASON_NO_OP, "%s", api);
            cgj_exit_abort(t, &r);
        }
        /* An implicit step ends here: the capture's calls then run outside any step, forwarded
         * at once (a marked step still pairs with its end). */
        if (t->mode != CGJ_MODE_OFF && t->implicit) end_locked(t);
        cgj_thread_unlock(t);
    }
    cgj_captures_beginning(s);
    cgj_builder_settle(false); /* a build in hand ends first; none starts while this runs */
    cgj_offload_settle();      /* and every chunk handed to the launch thread is launched */
}

void cgj_step_objects_ending(void)
{
    cgj_builder_settle(true);
    cgj_offload_settle();
}

void cgj_step_observe(CUstream s, CUevent ev, bool everything)
{
    cgj_exit_observe(s, ev, everything);
}

/* ---- begin and end ---- */

/* Graphs run in the context they were built in: a step of a's in another context (a program
 * with contexts of its own, cuCtxCreate/cuCtxSetCurrent) runs eagerly, with the reason. */
static bool same_context(const cgj_thread_t *t, cgj_anchor_t *a)
{
    CUcontext cur = t->ctx;
    const cgj_trace_t *tr = a->variants[__atomic_load_n(&a->current, __ATOMIC_RELAXED)];
    if (cur == tr->ctx) return true;
    cgj_reason_t r;
    cgj_reason_set(&r, CGJ_REASON_ABORT_CONTEXT, CGJ_REASON_NO_OP, "%p, built in %p", (void *)cur, (void *)tr->ctx);
    cgj_anchor_note(a, &r);
    return false;
}

/* Where another thread runs a's step now, this one takes a sibling anchor (a trace of its own):
 * the one it took last if that is free (threads whose steps begin alike each keep to their own
 * trace, whichever begins first), else the first free one. NULL: all are taken (eager). */
static cgj_anchor_t *take(const cgj_thread_t *t, cgj_anchor_t *a)
{
    for (cgj_anchor_t *s = a; s; s = __atomic_load_n(&s->sibling, __ATOMIC_ACQUIRE))
        if (__atomic_load_n(&s->taker, __ATOMIC_RELAXED) == t) {
            if (!__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE)) return s;
            break;
        }
    for (cgj_anchor_t *s = a; s; s = cgj_anchor_sibling(s))
        if (__atomic_load_n(&s->building, __ATOMIC_RELAXED)) {
            return NULL; /* built now (builder.c): eager, and no sibling to record it again */
        } else if (!__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&s->taker, t, __ATOMIC_RELAXED);
            return s;
        }
    return NULL;
}

/* CGJIT_BUSY: the thread's launches between a replayed step's begin and its end carry the
 * anchor's id and the run (graphs/gpubusy.h). */
static __thread bool gpubusy_pushed;

static void gpubusy_begin(cgj_anchor_t *a)
{
    if (gpubusy_pushed) cgj_gpubusy_pop(), gpubusy_pushed = false; /* a step that ended otherwise */
    if (!cgj_gpubusy_on()) return;
    uint32_t id = __atomic_load_n(&a->gpu_id, __ATOMIC_RELAXED); /* the report reads it */
    if (!id) __atomic_store_n(&a->gpu_id, id = cgj_gpubusy_id(), __ATOMIC_RELAXED);
    if (!id) return;
    cgj_gpubusy_push(id, __atomic_load_n(&a->runs, __ATOMIC_RELAXED));
    gpubusy_pushed = true;
}

static void gpubusy_end(void)
{
    if (gpubusy_pushed) cgj_gpubusy_pop(), gpubusy_pushed = false;
}

/* A step cgjit has not seen CGJIT_WARMUP_RUNS times yet runs eagerly and unrecorded (and so
 * does a step of a program that makes it only once): its runs are counted, nothing else. Only a
 * new anchor warms up; one that starts over (evicted, rebuilt) records at once, and so does the
 * step begun where a warm-up run was cut for its length (`record`, implicit.c). */
static bool warming_up(bool record, bool implicit, cgj_anchor_t *a)
{
    if (record || a->nvariants || a->state != CGJ_STATE_WARMUP || a->ndrafts) return false;
    uint64_t runs = __atomic_load_n(&a->warmup_runs, __ATOMIC_RELAXED);
    if (runs < (uint64_t)cgj_cfg.WARMUP_RUNS) return true;
    return cgj_cfg.WARMUP_RUNS && implicit && runs < CGJ_WARMUP_MAX &&
           __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) == CGJ_STEP_SYNC &&
           !__atomic_load_n(&a->warm_repeat, __ATOMIC_RELAXED) && !__atomic_load_n(&a->long_steps, __ATOMIC_RELAXED);
}

/* Under sync, a warm-up run's length (its calls) and shape (cgj_implicit_shape) are kept, and
 * the step keeps warming up until one of its warm-up runs is as long as an earlier one and of
 * its shape (at most CGJ_WARMUP_MAX runs): a step whose length or work changes every time (a
 * program's differently shaped sections between the same synchronizations, in single and double
 * precision; a batch of detections) records drafts that never agree, each at the cost of a
 * recorded run. A run cut for its length (CGJ_SYNC_FIRST_RECORD) says nothing of it. Several
 * threads may warm an anchor up at once: the lengths and shapes are atomics, and one lost, or
 * paired with another run's, only moves the first recording. */
static void warmup_ended(cgj_thread_t *t, uint32_t calls, uint64_t shape)
{
    cgj_anchor_t *a = t->last;
    if (!a || !t->implicit || calls >= CGJ_SYNC_FIRST_RECORD || calls >= t->find.sync_long) return;
    uint64_t n = __atomic_load_n(&a->warmup_runs, __ATOMIC_RELAXED); /* this run counted at its begin */
    for (uint64_t i = 0; i + 1 < n && i < CGJ_WARMUP_LENS; i++)
        if (__atomic_load_n(&a->warm_len[i], __ATOMIC_RELAXED) == calls &&
            __atomic_load_n(&a->warm_shape[i], __ATOMIC_RELAXED) == shape)
            __atomic_store_n(&a->warm_repeat, true, __ATOMIC_RELAXED);
    if (!n) return;
    __atomic_store_n(&a->warm_shape[(n - 1) % CGJ_WARMUP_LENS], shape, __ATOMIC_RELAXED);
    __atomic_store_n(&a->warm_len[(n - 1) % CGJ_WARMUP_LENS], calls, __ATOMIC_RELAXED);
}

/* Begin a step of anchor `name`; implicit steps (CGJIT_STEP) run eagerly in EAGER mode, where
 * their calls keep passing through cgj_step_enter so that their end is seen. */
static int begin_locked(cgj_thread_t *t, const char *name, bool implicit, bool record)
{
    if (t->mode != CGJ_MODE_OFF) {
        if (t->mode >= CGJ_MODE_RECORD) {
            cgj_reason_t r;
            cgj_reason_set(&r, CGJ_REASON_ABORT_NESTED, CGJ_REASON_NO_OP, "'%s'", name);
            cgj_exit_abort(t, &r);
        }
        return CGJ_ERR_NESTED;
    }
    t->serial++;
    t->polled = false;
    cgj_anchor_t *pred = t->last; /* the step before this one on the thread */
    bool same = pred && strcmp(pred->name, name) == 0;
    t->implicit = implicit;
    t->sync_calls = 0;
    t->sync_shape = 0;
    t->begun_ns = cgj_now_ns();
    t->ctx = NULL;
    if (cgj_drv.r_cuCtxGetCurrent) cgj_drv.r_cuCtxGetCurrent(&t->ctx);
    /* An implicit step seen for the first time warms up with no anchor (tracer.h: sightings). */
    uint64_t sighted = implicit && !record && !same && cgj_cfg.WARMUP_RUNS ? cgj_anchor_sight(name) : 0;
    if (sighted) {
        t->last = NULL;
        t->anchor = NULL;
        t->find.warming = true;
        t->find.sighted = sighted;
        CGJ_STAT_ADD(steps_warmup, 1);
        cgj_thread_go(t, CGJ_EVENT_BEGIN, cgj_thread_eager_mode(t));
        return CGJ_OK;
    }
    cgj_anchor_t *a = same ? pred : cgj_anchor_get(name);
    uint64_t ticket = __atomic_load_n(&a->fuse_ticket, __ATOMIC_RELAXED); /* fusion's compiler: built again */
    if (CGJ_UNLIKELY(ticket) && cgj_fusion_compiled(ticket)) cgj_anchor_refuse(a);
    cgj_anchor_t *own = take(t, a);
    static uint64_t serial;
    if (!own) {
        t->last = a;
        t->anchor = NULL;
        __atomic_fetch_add(&a->runs, 1, __ATOMIC_RELAXED);
        if (__atomic_load_n(&a->building, __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&a->building_runs, 1, __ATOMIC_RELAXED);
            CGJ_STAT_ADD(steps_building, 1);
        } else {
            __atomic_fetch_add(&a->busy_runs, 1, __ATOMIC_RELAXED);
        }
        cgj_thread_go(t, CGJ_EVENT_BEGIN, cgj_thread_eager_mode(t));
        return CGJ_OK;
    }
    if (warming_up(record, implicit, own)) { /* as a busy anchor's run: eager, unrecorded, counted nowhere else */
        __atomic_fetch_add(&own->runs, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&own->warmup_runs, 1, __ATOMIC_RELAXED); /* before another thread takes it */
        __atomic_store_n(&own->busy, 0, __ATOMIC_RELEASE);
        t->last = own;
        t->anchor = NULL;
        t->find.warming = true;
        CGJ_STAT_ADD(steps_warmup, 1);
        cgj_thread_go(t, CGJ_EVENT_BEGIN, cgj_thread_eager_mode(t));
        return CGJ_OK;
    }
    a = own;
    t->last = a;
    __atomic_fetch_add(&a->runs, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&a->last_used, __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    t->anchor = a;
    exit_marked = false;
    cgj_cost_kind_t kind = CGJ_COST_NONE;
    if (a->state == CGJ_STATE_BLACKLISTED || cgj_program_capturing() || (a->nvariants && !same_context(t, a))) {
        cgj_thread_go(t, CGJ_EVENT_BEGIN, cgj_thread_eager_mode(t));
    } else if (a->nvariants && cgj_cost_eager(a)) { /* an eager probe, or replay is off */
        kind = CGJ_COST_EAGER;
        cgj_thread_go(t, CGJ_EVENT_BEGIN, cgj_thread_eager_mode(t));
    } else if (a->nvariants) {
        kind = CGJ_COST_REPLAY;
        if (CGJ_UNLIKELY(cgj_cfg.BUSY)) gpubusy_begin(a);
        cgj_replay_begin(t, a);
    } else {
        cgj_thread_go(t, CGJ_EVENT_BEGIN, CGJ_MODE_RECORD);
    }
    t->replaying = kind == CGJ_COST_REPLAY;
    cgj_cost_begin(a, t, pred, t->begun_ns, kind);
    return CGJ_OK;
}

int cgj_step_begin(const char *name)
{
    cgj_thread_t *t = &cgj_tls;
    if (forked) { /* a marked step in a child of fork(): eager, still paired with its end */
        if (t->mode != CGJ_MODE_OFF) return CGJ_ERR_NESTED;
        cgj_step_begin_eager();
        return CGJ_OK;
    }
    if (cgj_gov_marked(name)) { /* dormant: straight through, still paired with its end */
        if (t->mode != CGJ_MODE_OFF) return CGJ_ERR_NESTED;
        cgj_step_begin_eager();
        return CGJ_OK;
    }
    enter_thread(t);
    cgj_thread_lock(t);
    int st = begin_locked(t, name, false, false);
    cgj_thread_unlock(t);
    return st;
}

void cgj_step_begin_eager(void)
{
    if (cgj_tls.mode == CGJ_MODE_OFF) cgj_thread_go(&cgj_tls, CGJ_EVENT_BEGIN, CGJ_MODE_PASSTHRU);
}

static int end_locked(cgj_thread_t *t)
{
    t->polled = false;
    if (t->mode == CGJ_MODE_OFF) return CGJ_ERR_NOT_ACTIVE;
    cgj_anchor_t *a = t->anchor;
    cgj_mode_t mode = t->mode;
    bool replayed = t->replaying, exited;
    if (t->mode == CGJ_MODE_REPLAY) cgj_replay_end(t);
    if (t->mode == CGJ_MODE_RECORD) cgj_record_finish(t);
    exited = t->exited;
    if (a && t->replaying && a->state == CGJ_STATE_REPLAY) {
        cgj_anchor_note_run(a, t->exited);
        cgj_cost_replayed(a, t->exited);
    }
    t->replaying = false;
    t->exited = false;
    uint64_t now = cgj_now_ns(), host_ns = now - t->begun_ns;
    if (CGJ_UNLIKELY(cgj_timeline_on)) timeline_step(t, mode, replayed, exited, now);
    if (t->mode != CGJ_MODE_REPLAY) {
        CGJ_STAT_ADD(steps_eager, 1);
        /* The eager figure is taken from runs that record nothing (probes, runs while replay is
         * off or the anchor blacklisted): a recording run holds the program's first-time costs
         * (module loading, library set-up) and cgjit's, and would make replay look as if it
         * saved seconds; nor does a run that left its trace and finished unrecorded (its start
         * was replayed). */
        if (a && t->mode != CGJ_MODE_RECORD && !exited) {
            __atomic_fetch_add(&a->eager_ns, host_ns, __ATOMIC_RELAXED);
            __atomic_fetch_add(&a->eager_runs, 1, __ATOMIC_RELAXED);
        }
        if (a)
            cgj_cost_end_eager(a, host_ns, t->probe.probing ? t->probe.calls_ns : 0,
                               t->probe.probing ? t->probe.own_ns : 0);
        cgj_cost_probe_end(t);
    } else if (a) {
        __atomic_fetch_add(&a->replay_ns, host_ns, __ATOMIC_RELAXED);
    }
    /* A run of an anchor that could replay: a replay to its end, or one that recorded or left. */
    if (a && a->nvariants && (replayed || mode == CGJ_MODE_RECORD)) cgj_cost_ended(a, replayed && !exited, host_ns);
    if (a && t->implicit && mode == CGJ_MODE_EAGER) /* the call that began it, and those that stayed */
        cgj_cost_off_ran(a, t->sync_calls + 1);
    /* The recording to build goes to the builder with the anchor, which it gives back once
     * built; else it is built here. Not where the run blacklisted the anchor meanwhile (its
     * replay, before it recorded, left the trace once too often). */
    bool handed = false;
    if (t->build_pending) {
        t->build_pending = false;
        if (a->state != CGJ_STATE_BLACKLISTED && !(handed = cgj_builder_hand(a, &t->build, t->ctx)))
            cgj_build_variant(a, &t->build, false);
        cgj_oplist_free(&t->build);
    }
    if (a && !handed) __atomic_store_n(&a->busy, 0, __ATOMIC_RELEASE);
    gpubusy_end();
    if (t->find.sighted) cgj_anchor_sighting_ended(t->find.sighted, t->sync_calls + 1, t->sync_shape);
    else if (t->find.warming) warmup_ended(t, t->sync_calls + 1, t->sync_shape);
    t->anchor = NULL;
    t->find.warming = false;
    t->find.sighted = 0;
    cgj_replay_forget(t);
    t->implicit = false;
    cgj_thread_go(t, CGJ_EVENT_END, CGJ_MODE_OFF);
    CGJ_STAT_ADD(steps, 1);
    return CGJ_OK;
}

int cgj_step_end(void)
{
    cgj_thread_t *t = &cgj_tls;
    cgj_thread_lock(t);
    int st = end_locked(t);
    cgj_thread_unlock(t);
    return st;
}

/* An abort the program asks for: as cgj_exit_abort, but the anchor only notes the reason (an
 * exception is the program's choice, not a disagreement between runs). */
int cgj_step_abort(void)
{
    cgj_thread_t *t = &cgj_tls;
    cgj_thread_lock(t);
    if (t->mode >= CGJ_MODE_RECORD) {
        cgj_reason_t r;
        cgj_reason_set(&r, CGJ_REASON_ABORT_EXCEPTION, CGJ_REASON_NO_OP, "%s", "cgj_trace_abort");
        if (t->mode == CGJ_MODE_REPLAY) cgj_exit_flush(t);
        cgj_oplist_free(&t->rec);
        CGJ_STAT_ADD(aborts, 1);
        if (t->anchor) cgj_anchor_note(t->anchor, &r);
        else cgj_reason_tally(&r);
        cgj_thread_go(t, CGJ_EVENT_ABORT, cgj_thread_eager_mode(t));
    }
    int st = end_locked(t);
    cgj_thread_unlock(t);
    return st;
}

static __thread unsigned pauses; /* cgj_trace_pause calls not yet resumed on this thread */

int cgj_step_pause(void)
{
    cgj_thread_t *t = &cgj_tls;
    if (!pauses) {
        cgj_thread_lock(t);
        bool marked = t->mode != CGJ_MODE_OFF && !t->implicit;
        if (!marked && t->mode != CGJ_MODE_OFF) end_locked(t); /* an implicit step ends here */
        cgj_thread_unlock(t);
        if (marked) return CGJ_ERR_NESTED;
        cgj_internal_calls++;
    }
    pauses++;
    return CGJ_OK;
}

int cgj_step_resume(void)
{
    if (!pauses) return CGJ_ERR_NOT_ACTIVE;
    if (--pauses == 0) cgj_internal_calls--;
    return CGJ_OK;
}

bool cgj_step_paused(void)
{
    return pauses != 0;
}

void cgj_step_implicit_enable(cgj_step_policy_t policy)
{
    if (cgj_cfg.VERIFY) __atomic_fetch_add(&cgj_tracing_threads, 1, __ATOMIC_RELAXED); /* cgj_step_take */
    cgj_implicit_enable(policy);
}

void cgj_step_markers_seen(void)
{
    if (!cgj_implicit_disable()) return;
    cgj_gov_markers();
    if (cgj_tls.implicit && cgj_tls.mode != CGJ_MODE_OFF) cgj_step_end();
}
