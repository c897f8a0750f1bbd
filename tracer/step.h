/*
 * step.h — the tracer as runtime/ sees it: a thread's step, entered once per intercepted call.
 *
 * A wrapper asks cgj_tracing() first: with no step being recorded or replayed on this thread,
 * and no implicit stepping (CGJIT_STEP) to do, it forwards the call at once (one load of a
 * process-wide counter, one branch). Otherwise it describes the call and asks cgj_step_enter()
 * what to do: CGJ_ABSORB (replay holds it; return success) or CGJ_EXECUTE (call the real
 * function, then cgj_step_leave() with its result).
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

/* Another thread that must flush this thread's absorbed work (cgj_step_observe) takes its lock
 * and may change what a step's state holds: the fields below marked "(shared)" are those it
 * changes that this thread also reads without its lock (in the wrappers, before any step
 * code). Every write of one is atomic and under the lock; every read without the lock is
 * atomic (cgj_thread_mode, cgj_thread_pending), so that the two never race; reads under the
 * lock may be plain. */
typedef struct cgj_thread {
    cgj_mode_t mode;         /* (shared) changed only by cgj_thread_go (tracer/machine.h) */
    bool implicit;           /* the step was begun by CGJIT_STEP, not by a marker */
    cgj_anchor_t *anchor;    /* of the active step (NULL: another thread runs that anchor) */
    cgj_anchor_t *last;      /* last anchor begun here: a cache for the name lookup */
    cgj_oplist_t rec;        /* RECORD: this run so far */
    /* REPLAY: where the replay stands */
    cgj_trace_t *trace;      /* the variant being followed */
    uint32_t pos;            /* next op of the trace */
    uint32_t seg;            /* current segment */
    bool launched;           /* a segment of this step has been launched */
    bool staged_waited;      /* staging of the current segment checked */
    bool pending;            /* (shared) other threads' calls on its streams come through it first:
                              * absorbed calls not launched yet (REPLAY), or a recording that
                              * notes where they come (RECORD: a handoff, exits.c) */
    uint64_t pending_mask;   /* (shared) stream buckets (cgj_stream_bucket) of those calls */
    bool allocs_served;      /* pool blocks were handed out in this step */
    uint32_t passed;         /* REPLAY: ops at the head of the current segment (one too small
                              * for a graph) that ran as the program made them, not absorbed */
    bool exited;             /* this step left its trace */
    bool replaying;          /* this step began as a replay (it may have left the trace since) */
    uint64_t absorbed;       /* calls absorbed in this step */
    uint64_t rec_in_ns;      /* RECORD: when the call in progress came in (0: not in RECORD) */
    uint64_t rec_out_ns;     /* RECORD: when the last recorded call returned to the program */
    bool probing;            /* this step is an eager probe of its anchor (CGJIT_COST) ... */
    uint64_t call_in_ns;     /* ... when its outermost call in progress came in (0: none) */
    uint64_t calls_ns;       /* ... its host time inside driver and library calls so far */
    uint64_t wrap_in_ns;     /* ... when the call in progress entered cgjit's wrapper (0: none) */
    uint64_t own_ns;         /* ... cgjit's own host time in its calls so far (wrappers and
                              * step code around each real call: what eager execution without
                              * cgjit would not spend) */
    bool polled;             /* the thread's last call in this step was a query ... */
    bool repeat;             /* ... and the call in progress is one more (passed through) */
    /* the thread */
    uint64_t begun_ns;       /* when the step began (host time, for the report) */
    CUcontext ctx;           /* the context current when the step began */
    struct cgj_cycle *cycle; /* CGJIT_STEP=auto: this thread's cycle detector */
    uint32_t quiet_calls;    /* CGJIT_STEP=auto: calls made before it had one */
    uint32_t heads;          /* CGJIT_STEP=auto: cycle heads passed inside the step in progress */
    bool turn_synced;        /* CGJIT_STEP=auto: the cycle's turn in progress synchronized */
    uint32_t sync_calls;     /* CGJIT_STEP=sync: calls of the implicit step in progress */
    uint32_t sync_long;      /* CGJIT_STEP=sync: calls without a synchronization after which
                              * the thread finds cycles (CGJ_SYNC_LONG; a worker thread's is
                              * shorter: set when it registers) */
    bool finds_cycles;       /* CGJIT_STEP=sync: this thread never synchronizes; it finds its
                              * steps as CGJIT_STEP=auto does (implicit.c) */
    int lock;                /* held by this thread while it steps, or by another flushing it */
    bool registered;         /* in the registry other threads flush through */
    uint64_t serial;         /* steps begun on this thread */
    uint64_t lib_serial;     /* the step the open library call began in */
    uint32_t lib_open;       /* RECORD/REPLAY: 1 + the index of the LIB op of the library call
                              * running now (0: none) */
    uint32_t lib_depth;      /* library calls running on this thread (that passed through
                              * cgj_step_enter): their driver calls are theirs, not steps' */
    CUresult deferred;       /* (shared) an error re-issuing absorbed work met, for the program's
                              * next call (set under the lock, maybe by another thread) */
    struct cgj_verify *verify; /* CGJIT_VERIFY: the segment being checked (verify.c's own) */
} cgj_thread_t;

extern __thread cgj_thread_t cgj_tls;

/* t's mode and whether it holds pending work, read without t's lock (see cgj_thread_t). */
static inline cgj_mode_t cgj_thread_mode(const cgj_thread_t *t)
{
    return __atomic_load_n(&t->mode, __ATOMIC_RELAXED);
}
static inline bool cgj_thread_pending(const cgj_thread_t *t)
{
    return __atomic_load_n(&t->pending, __ATOMIC_RELAXED);
}
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

static inline bool cgj_tracing(void)
{
    if (CGJ_LIKELY(__atomic_load_n(&cgj_tracing_threads, __ATOMIC_RELAXED) == 0) || cgj_internal_calls) return false;
    cgj_mode_t m = cgj_thread_mode(&cgj_tls);
    return m >= CGJ_MODE_EAGER ||
           (m == CGJ_MODE_OFF && __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) != CGJ_STEP_OFF &&
            !cgj_program_capturing()) ||
           __atomic_load_n(&cgj_tls.deferred, __ATOMIC_RELAXED) != CUDA_SUCCESS;
}

/* A wrapper's first move once it knows the call is looked at: an eager probe times cgjit's own
 * work in the call from here (cost.c takes it off the probe's period). */
static inline void cgj_probe_mark(void)
{
    if (CGJ_UNLIKELY(cgj_tls.probing)) cgj_tls.wrap_in_ns = cgj_now_ns();
}

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
/* A call cgjit cannot trace, inside a step: abort the step to eager (pending work first). */
void cgj_step_untraceable(const char *api);
/* The program's own stream capture (tracer/captures.c): before cuStreamBeginCapture*, the step
 * is aborted (its absorbed work issued, so none of it lands in the program's graph); after it
 * succeeded on stream s, and after cuStreamEndCapture on s returned r, the capture is counted
 * and forgotten. */
void cgj_step_capture_begin(const char *api);
void cgj_step_capture_began(CUstream s, const char *api);
void cgj_step_capture_ended(CUstream s, CUresult r);

int cgj_step_begin(const char *name);
int cgj_step_end(void);
/* A step that cannot be traced at all (no driver, disabled): it still pairs with its end. */
void cgj_step_begin_eager(void);
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

static inline bool cgj_others_pending_on(CUstream s)
{
    if (CGJ_LIKELY(__atomic_load_n(&cgj_pending_threads, __ATOMIC_RELAXED) == 0)) return false;
    uint64_t own = __atomic_load_n(&cgj_tls.pending_mask, __ATOMIC_RELAXED);
    unsigned b = cgj_stream_bucket(s), l = cgj_stream_bucket(CU_STREAM_LEGACY);
    if (s == CU_STREAM_LEGACY) /* the legacy stream waits for every blocking stream */
        return __atomic_load_n(&cgj_pending_threads, __ATOMIC_RELAXED) > (cgj_thread_pending(&cgj_tls) ? 1 : 0);
    return __atomic_load_n(&cgj_pending_on[b], __ATOMIC_RELAXED) > (own >> b & 1) ||
           __atomic_load_n(&cgj_pending_on[l], __ATOMIC_RELAXED) > (own >> l & 1);
}

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
