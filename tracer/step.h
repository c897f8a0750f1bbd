/*
 * step.h — the per-thread step state machine, as seen by runtime/ (wrappers and the API).
 *
 * A wrapper asks cgj_tracing() first: with no step being recorded or replayed on this thread,
 * and no implicit stepping (CGJIT_STEP) to do, it forwards the call at once (one load of a
 * process-wide counter, one branch). Otherwise it describes the call and asks cgj_step_enter()
 * what to do: CGJ_ABSORB (replay holds it; return success) or CGJ_EXECUTE (call the real
 * function, then cgj_step_leave() with its result).
 */
#ifndef CGJ_STEP_H
#define CGJ_STEP_H

#include "tracer/trace.h"
#include <cgjit.h>

/* OFF: no step. PASSTHRU: a marked step running eagerly, unseen. EAGER: an implicit step
 * running eagerly (its calls still pass through cgj_step_enter, to find where it ends).
 * RECORD / REPLAY: a step being recorded or replayed. */
typedef enum { CGJ_MODE_OFF, CGJ_MODE_PASSTHRU, CGJ_MODE_EAGER, CGJ_MODE_RECORD, CGJ_MODE_REPLAY } cgj_mode_t;

/* How steps are found without markers (CGJIT_STEP). */
typedef enum { CGJ_STEP_OFF, CGJ_STEP_SYNC, CGJ_STEP_AUTO } cgj_step_policy_t;
enum { CGJ_EXECUTE = 0, CGJ_ABSORB = 1 };

typedef struct cgj_anchor cgj_anchor_t;

typedef struct cgj_thread {
    cgj_mode_t mode;
    cgj_anchor_t *anchor;    /* of the active step */
    cgj_anchor_t *last;      /* last anchor begun here: a cache for the name lookup */
    cgj_oplist_t rec;        /* RECORD: this run so far */
    cgj_trace_t *trace;      /* REPLAY: the variant being followed */
    uint32_t pos;            /* REPLAY: next op of the trace */
    uint32_t seg;            /* REPLAY: current segment */
    bool launched;           /* REPLAY: a segment of this step has been launched */
    bool staged_waited;      /* REPLAY: staging of the current segment checked */
    uint64_t absorbed;       /* REPLAY: calls absorbed in this step */
    bool implicit;           /* the step was begun by CGJIT_STEP, not by a marker */
    uint64_t begun_ns;       /* when the step began (host time, for the report) */
    struct cgj_cycle *cycle; /* CGJIT_STEP=auto: this thread's cycle detector */
    int lock;                /* held by this thread while it steps, or by another flushing it */
    bool pending;            /* REPLAY: absorbed calls not launched yet */
    bool registered;         /* in the registry other threads flush through */
    bool allocs_served;      /* REPLAY: pool blocks were handed out in this step */
    bool exited;             /* this step left its trace */
    uint64_t serial;         /* steps begun on this thread */
    uint64_t lib_serial;     /* the step the open library call began in */
    uint32_t lib_open;       /* RECORD/REPLAY: 1 + the index of the LIB op of the library call
                              * running now (0: none) */
} cgj_thread_t;

extern __thread cgj_thread_t cgj_tls;
/* Threads in EAGER, RECORD or REPLAY, plus one while implicit stepping is on: zero means every
 * wrapper can forward at once. */
extern int cgj_tracing_threads;
extern int cgj_implicit_policy; /* a cgj_step_policy_t; CGJ_STEP_OFF once markers are used */

static inline bool cgj_tracing(void)
{
    if (CGJ_LIKELY(__atomic_load_n(&cgj_tracing_threads, __ATOMIC_RELAXED) == 0)) return false;
    cgj_mode_t m = cgj_tls.mode;
    return m >= CGJ_MODE_EAGER ||
           (m == CGJ_MODE_OFF && __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) != CGJ_STEP_OFF);
}

int cgj_step_enter(const cgj_call_t *c);
void cgj_step_leave(const cgj_call_t *c, CUresult r);
/* A call cgjit cannot trace, inside a step: abort the step to eager (pending work first). */
void cgj_step_untraceable(const char *api);

int cgj_step_begin(const char *name);
/* The same, for a caller that holds the thread's step lock (implicit steps, from inside
 * cgj_step_enter). */
int cgj_step_begin_as(const char *name, bool implicit);
int cgj_step_end_locked(void);
int cgj_step_end(void);
void cgj_step_begin_eager(void);
/* Implicit steps (implicit.c): turn CGJIT_STEP on at start-up; a marker turns it off for good. */
void cgj_implicit_enable(cgj_step_policy_t policy);
void cgj_implicit_markers_seen(void);
/* For a call with no step active, or inside an implicit step: begin or end implicit steps
 * around it. Returns false when the call is to run outside any step. */
bool cgj_implicit_route(const cgj_call_t *c);

/* The common case of cgj_implicit_route, inline: a call inside a sync-policy step that does not
 * end it stays in the step. */
static inline bool cgj_implicit_fast(const cgj_thread_t *t, const cgj_call_t *c)
{
    return t->mode != CGJ_MODE_OFF && t->implicit && c->kind != CGJ_OP_SYNC &&
           c->kind != CGJ_OP_READBACK &&
           __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) == CGJ_STEP_SYNC;
}

/* Anchors (anchor.c). */
cgj_anchor_t *cgj_anchor_get(const char *name);
int cgj_anchor_info(const char *name, cgj_trace_info_t *out);
void cgj_anchor_report(FILE *f);

/* Another thread's host-observing call (synchronize, query, read back) must never overtake
 * work a replaying thread absorbed but has not launched. cgj_step_observe() flushes, eagerly and
 * in order, the pending work of every other thread that the call could observe: work on stream
 * `s` (CU_STREAM_LEGACY: any), or recording event `ev`, or anything when `everything`.
 * Callers test cgj_pending_threads first. */
extern int cgj_pending_threads;
void cgj_step_observe(CUstream s, CUevent ev, bool everything);

/* Process-wide counters (step.c). */
extern cgj_stats_t cgj_g_stats;
#define CGJ_STAT_ADD(field, v) __atomic_fetch_add(&cgj_g_stats.field, (v), __ATOMIC_RELAXED)

#endif /* CGJ_STEP_H */
