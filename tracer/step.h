/*
 * step.h — the per-thread step state machine, as seen by runtime/ (wrappers and the API).
 *
 * A wrapper asks cgj_tracing() first: with no step being recorded or replayed on this thread
 * it forwards the call at once (one load of a process-wide counter, one branch). Otherwise it
 * describes the call and asks cgj_step_enter() what to do: CGJ_ABSORB (replay holds it; return
 * success) or CGJ_EXECUTE (call the real function, then cgj_step_leave() with its result).
 */
#ifndef CGJ_STEP_H
#define CGJ_STEP_H

#include "tracer/trace.h"
#include <cgjit.h>

typedef enum { CGJ_MODE_OFF, CGJ_MODE_PASSTHRU, CGJ_MODE_RECORD, CGJ_MODE_REPLAY } cgj_mode_t;
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
    bool allocs_served;      /* REPLAY: pool blocks were handed out in this step */
} cgj_thread_t;

extern __thread cgj_thread_t cgj_tls;
extern int cgj_tracing_threads; /* threads in RECORD or REPLAY */

static inline bool cgj_tracing(void)
{
    return __atomic_load_n(&cgj_tracing_threads, __ATOMIC_RELAXED) != 0 &&
           cgj_tls.mode >= CGJ_MODE_RECORD;
}

int cgj_step_enter(const cgj_call_t *c);
void cgj_step_leave(const cgj_call_t *c, CUresult r);
/* A call cgjit cannot trace, inside a step: abort the step to eager (pending work first). */
void cgj_step_untraceable(const char *api);

int cgj_step_begin(const char *name);
int cgj_step_end(void);
void cgj_step_begin_eager(void);

/* Anchors (anchor.c). */
cgj_anchor_t *cgj_anchor_get(const char *name);
int cgj_anchor_info(const char *name, cgj_trace_info_t *out);
void cgj_anchor_report(FILE *f);

/* Process-wide counters (step.c). */
extern cgj_stats_t cgj_g_stats;
#define CGJ_STAT_ADD(field, v) __atomic_fetch_add(&cgj_g_stats.field, (v), __ATOMIC_RELAXED)

#endif /* CGJ_STEP_H */
