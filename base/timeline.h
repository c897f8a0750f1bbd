/*
 * timeline.h — what happened when, for CGJIT_TRACE_FILE: steps (eager or replayed), builds, side
 * exits and what anchors noted, kept in memory and written at exit as a Chrome trace (the JSON
 * object format that Perfetto and chrome://tracing open).
 *
 * Off (the default), a hook costs one load and one branch: `if (cgj_timeline_on)`. On, the
 * threads that run steps write events without waiting for each other: an event takes its slot
 * with one atomic add on a process-wide counter, is filled in place and then published (a
 * release store of its `ready` flag). Slots live in chunks allocated on first use and never
 * moved, so no writer ever waits for another or for a reallocation. Past the cap
 * (CGJIT_TRACE_EVENTS) events are counted, not kept. The writer at exit reads published slots
 * only: an event a thread is still filling then is left out.
 *
 * Strings an event points to must live as long as the process: literals, reason names, anchor
 * names (anchors are never freed). Free text is copied into the event (`detail`).
 */
#ifndef CGJ_TIMELINE_H
#define CGJ_TIMELINE_H

#include "base/cgj_base.h"

#include <stdio.h>

#define CGJ_TL_ARGS 3 /* text and number arguments an event may carry, of each */

typedef struct cgj_tl_event {
    uint64_t ts_ns, dur_ns;                            /* begin and duration (complete events), host clock */
    const char *cat, *name;                            /* Chrome's category and name */
    const char *skey[CGJ_TL_ARGS], *sval[CGJ_TL_ARGS]; /* args: text (keys are literals) */
    const char *nkey[CGJ_TL_ARGS];
    int64_t nval[CGJ_TL_ARGS]; /* args: numbers */
    char detail[96];           /* args.detail, copied ("" for none) */
    uint32_t tid;
    char ph;   /* 'X' complete, 'i' instant */
    int ready; /* published: the writer may read it */
} cgj_tl_event_t;

extern int cgj_timeline_on;

/* Start keeping events (at most max_events); the clock's origin is now. */
void cgj_timeline_start(uint64_t max_events);
/* Keep no more events (a child after fork(), or once written). */
void cgj_timeline_stop(void);
/* A slot for an event of phase ph ('X' or 'i'), ts now and dur 0, on this thread; NULL when
 * the timeline is off or full. Fill it, then cgj_timeline_put. */
cgj_tl_event_t *cgj_timeline_take(char ph, const char *cat, const char *name);
void cgj_timeline_put(cgj_tl_event_t *e);
/* Arguments: the next free text or number argument of e (ignored when all are taken). */
void cgj_tl_str(cgj_tl_event_t *e, const char *key, const char *val);
void cgj_tl_num(cgj_tl_event_t *e, const char *key, int64_t val);
/* Events kept and events dropped past the cap. */
uint64_t cgj_timeline_kept(void);
uint64_t cgj_timeline_dropped(void);
/* Every kept event as a Chrome trace: {"traceEvents": [...], ...}; `process` names the
 * process in the viewer. False if writing failed. */
bool cgj_timeline_write(FILE *f, const char *process);

#endif /* CGJ_TIMELINE_H */
