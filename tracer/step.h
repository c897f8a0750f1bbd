/*
 * step.h — the tracer as runtime/ sees it: a thread's step, entered once per intercepted call.
 *
 * A wrapper asks cgj_tracing() first: with no step being recorded or replayed on any thread,
 * and no implicit stepping (CGJIT_STEP) to do, it forwards the call at once (one load of a
 * process-wide counter, one branch). Otherwise it describes the call and asks cgj_step_enter()
 * what to do: CGJ_ABSORB (replay holds it; return success) or CGJ_EXECUTE (call the real
 * function, then cgj_step_leave() with its result).
 *
 * This is all runtime/ sees of the tracer: begin, enter, leave, end, observe, and the fast-path
 * tests. A thread's step state (cgj_thread_t) is the tracer's own, in tracer/thread.h.
 */
#ifndef CGJ_STEP_H
#define CGJ_STEP_H

#include "base/config.h"
#include "ir/ir.h"
#include "tracer/machine.h"
#include <cgjit.h>

/* CGJ_RUN_ABSORBED (CGJIT_VERIFY): replay absorbed a library call whole, and the wrapper runs it
 * too, with its driver calls passed through: the eager execution the graph is checked against. */
enum { CGJ_EXECUTE = 0, CGJ_ABSORB = 1, CGJ_RUN_ABSORBED = 2 };

typedef struct cgj_anchor cgj_anchor_t;

/* Threads in EAGER, RECORD or REPLAY, plus one while implicit stepping is on: zero means every
 * wrapper can forward at once. */
extern int cgj_tracing_threads;
extern int cgj_implicit_policy; /* a cgj_step_policy_t; CGJ_STEP_OFF once markers are used */

/* The program's own stream captures in progress (tracer/captures.c): while any runs, no step
 * begins and nothing is built, and a thread outside any step forwards its calls at once. */
extern int cgj_program_captures;
static inline bool cgj_program_capturing(void)
{
    return __atomic_load_n(&cgj_program_captures, __ATOMIC_RELAXED) != 0;
}

/* Is this thread's call looked at? The fast path is the first test: no thread records or replays
 * and no implicit stepping is on. */
bool cgj_step_tracing(void);
static inline bool cgj_tracing(void)
{
    if (CGJ_LIKELY(__atomic_load_n(&cgj_tracing_threads, __ATOMIC_RELAXED) == 0) || cgj_internal_calls) return false;
    return cgj_step_tracing();
}

/* cgj_tracing() and, where it is true, a wrapper's first move (cgj_probe_mark) in one call: the
 * test every wrapped driver call makes. */
bool cgj_step_take(void);
static inline bool cgj_tracing_take(void)
{
    if (CGJ_LIKELY(__atomic_load_n(&cgj_tracing_threads, __ATOMIC_RELAXED) == 0) || cgj_internal_calls) return false;
    return cgj_step_take();
}

/* Is a step open on this thread (a marked one, or one found by CGJIT_STEP)? */
bool cgj_step_active(void);
/* Does a library call made now need its key built? Not inside an implicit step running eagerly
 * that a library call cannot end (sync policy: only host syncs do): nothing would read it. */
bool cgj_step_lib_key_wanted(void);

/* A wrapper's first move once it knows the call is looked at: an eager probe times cgjit's own
 * work in the call from here (cost.c takes it off the probe's period). */
void cgj_probe_mark(void);

int cgj_step_enter(const cgj_call_t *c);
/* CGJIT_VERIFY: should driver call c run for real before cgj_step_enter (replay checks a graph
 * segment against eager execution, tracer/verify.c)? Its result is then the program's, whatever
 * cgj_step_enter decides: a wrapper passes it to cgj_step_leave instead of calling again. */
bool cgj_step_verify_first(const cgj_call_t *c);
/* Around a call CGJIT_VERIFY runs for real: cgj_step_verify_first (when true) or
 * cgj_step_verify_run before it, cgj_step_verify_ran after it (no other thread's check meets it). */
void cgj_step_verify_run(void);
void cgj_step_verify_ran(void);
/* The call returned r; returns what the program gets: r, or (r being success) an error that
 * re-issuing this thread's absorbed work met since, as an asynchronous error surfaces. */
CUresult cgj_step_leave(const cgj_call_t *c, CUresult r);
/* Before cgj_step_enter: is c a call of an implicit step running eagerly under CGJIT_STEP=sync
 * that does not end it (no synchronization, no library call, no probe timing it, no error
 * waiting to be returned)? Then nothing is to be done with it but count it toward the step's
 * length, which this does: the wrapper makes the call and returns its result, without
 * cgj_step_enter and cgj_step_leave (a program whose steps run eagerly makes most of its calls
 * this way). */
bool cgj_step_passes(const cgj_call_t *c);
/* A call cgjit cannot trace, inside a step: abort the step to eager (pending work first). */
void cgj_step_untraceable(const char *api);
/* The program's own stream capture (tracer/captures.c): before cuStreamBeginCapture* on stream
 * s, the step is aborted (its absorbed work issued, so none of it lands in the program's graph)
 * and the capture counted; after the begin returned r it is kept (or forgotten where r is an
 * error), and after cuStreamEndCapture on s returned r, forgotten. */
void cgj_step_capture_begin(CUstream s, const char *api);
void cgj_step_capture_began(CUstream s, CUresult r, const char *api);
void cgj_step_capture_ended(CUstream s, CUresult r);
/* Before a module, library or context ends: no build of cgjit's thread outlives what it names
 * (tracer/builder.c). */
void cgj_step_objects_ending(void);

int cgj_step_begin(const char *name);
int cgj_step_end(void);
/* A step that cannot be traced at all (no driver, disabled): it still pairs with its end. */
void cgj_step_begin_eager(void);
/* cgj_trace_abort: end the step with its absorbed work issued eagerly and nothing recorded
 * (reason ABORT_EXCEPTION). CGJ_ERR_NOT_ACTIVE without a step. */
int cgj_step_abort(void);
/* cgj_trace_pause/resume: while a thread is paused (counted), its calls take the fast path
 * (cgj_internal_calls). Pausing ends an implicit step first; CGJ_ERR_NESTED with a marked step
 * open. Resuming an unpaused thread: CGJ_ERR_NOT_ACTIVE. */
int cgj_step_pause(void);
int cgj_step_resume(void);
bool cgj_step_paused(void);
/* Implicit steps: turn CGJIT_STEP on at start-up; the first marker turns it off for good. */
void cgj_step_implicit_enable(cgj_step_policy_t policy);
void cgj_step_markers_seen(void);

/* In a child after fork(): the parent's steps, threads and locks are not the child's, and it
 * never blocks on them. A parent that had initialized CUDA (cuda_before) leaves a child that
 * cannot use CUDA: cgjit passes every call through. A parent that had not (a launcher forking
 * one worker per GPU, as torchrun or mpirun do) leaves a child that starts CUDA afresh: cgjit
 * traces it as any process. */
void cgj_step_forked(bool cuda_before);

/* Another thread's host-observing call (synchronize, query, read back) must never overtake
 * work a replaying thread absorbed but has not launched. cgj_step_observe() flushes, eagerly and
 * in order, the pending work of every other thread that the call could observe: work on stream
 * `s` (CU_STREAM_LEGACY: any), or recording event `ev`, or anything when `everything`.
 * Callers test cgj_pending_threads first. */
extern int cgj_pending_threads;
void cgj_step_observe(CUstream s, CUevent ev, bool everything);

/* Work issued on stream s runs after everything issued on s before it, and after the legacy
 * stream's work: another thread's absorbed work there must be issued first, or this call would
 * overtake it (a PyTorch autograd thread launching the backward pass on the stream where the
 * main thread's replay holds the forward pass). Counts per bucket of streams tell, without a
 * lock, whether another thread may hold such work; cgj_step_observe then looks closer. */
#define CGJ_PENDING_BUCKETS 64
extern uint32_t cgj_pending_on[CGJ_PENDING_BUCKETS];

static inline unsigned cgj_stream_bucket(CUstream s)
{
    return (unsigned)(((uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull) >> 58);
}

bool cgj_step_others_pending_on(CUstream s);
static inline bool cgj_others_pending_on(CUstream s)
{
    if (CGJ_LIKELY(__atomic_load_n(&cgj_pending_threads, __ATOMIC_RELAXED) == 0)) return false;
    return cgj_step_others_pending_on(s);
}

/* ---- the governor (tracer/govern.c): is the process faster with cgjit active or dormant? ----
 * Every wrapped driver call tells it where the heartbeat may be (CGJ_GOV_BEAT: one load and one
 * compare, whatever the state); a synchronization while dormant asks whether the heartbeat
 * stopped (CGJ_GOV_TICK). Dormant, implicit stepping lets go of every call and no step begins. */
extern const char *cgj_gov_api; /* the heartbeat's driver function (NULL: none) */
extern int cgj_gov_dormant;
extern uint32_t cgj_gov_epoch; /* bumped at each switch */
void cgj_gov_seen(const char *api, const void *stream, const void *f);
void cgj_gov_tick(void);
#define CGJ_GOV_BEAT(api, stream, f)                                                \
    do {                                                                            \
        if (CGJ_UNLIKELY(__atomic_load_n(&cgj_gov_api, __ATOMIC_RELAXED) == (api))) \
            cgj_gov_seen((api), (const void *)(stream), (const void *)(f));         \
    } while (0)
#define CGJ_GOV_TICK()                                                                         \
    do {                                                                                       \
        if (CGJ_UNLIKELY(__atomic_load_n(&cgj_gov_dormant, __ATOMIC_RELAXED))) cgj_gov_tick(); \
    } while (0)
/* At start-up, after the configuration (CGJIT_GOVERN, CGJIT_VERIFY). */
void cgj_gov_init(void);
/* The governor's figures (cgjit.h); out->size is the caller's. */
void cgj_gov_get(cgj_govern_info_t *out);

/* Process-wide counters (tracer/threads.c); the public cgj_stats() copies them. */
extern cgj_stats_t cgj_g_stats;
#define CGJ_STAT_ADD(field, v) __atomic_fetch_add(&cgj_g_stats.field, (v), __ATOMIC_RELAXED)

/* Anchors, for the API and the report (tracer/anchor.c). */
int cgj_anchor_info(const char *name, cgj_trace_info_t *out);
/* Walk every anchor, newest first, between lock and unlock of the anchor table:
 *     cgj_anchors_lock(); for (a = cgj_anchors_first(); a; a = cgj_anchors_next(a)) ...; unlock */
void cgj_anchors_lock(void);
void cgj_anchors_unlock(void);
const cgj_anchor_t *cgj_anchors_first(void);
const cgj_anchor_t *cgj_anchors_next(const cgj_anchor_t *a);
/* An anchor's figures (the current variant's where there are several). */
void cgj_anchor_fill_info(const cgj_anchor_t *a, cgj_trace_info_t *out);
const char *cgj_anchor_name(const cgj_anchor_t *a);
/* Variant k of a (NULL past the last), for the report. */
const cgj_trace_t *cgj_anchor_variant(const cgj_anchor_t *a, uint32_t k);
/* Host time per eager run and per replay, in ns (0 where none ran). */
void cgj_anchor_host_times(const cgj_anchor_t *a, double *eager_ns, double *replay_ns);

#endif /* CGJ_STEP_H */
