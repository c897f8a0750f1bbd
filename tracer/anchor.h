/*
 * anchor.h — a trace anchor: the named point where a step starts, and what cgjit knows of it.
 *
 * An anchor moves WARMUP (no draft) → RECORD (drafts, no trace) → REPLAY (one or more
 * variants), or to BLACKLISTED when its runs keep disagreeing or its trace cannot be built.
 * One thread at a time runs a step of a given anchor (`busy`); a second thread beginning the
 * same anchor meanwhile runs its step eagerly.
 */
#ifndef CGJ_ANCHOR_H
#define CGJ_ANCHOR_H

#include "tracer/step.h"

#define CGJ_MAX_VARIANTS_HARD 16
#define CGJ_MAX_DRAFTS 4 /* eager recordings kept, so that A B A B finds its pairs */

struct cgj_anchor {
    char *name;
    cgj_state_t state;
    int busy;
    cgj_oplist_t drafts[CGJ_MAX_DRAFTS]; /* newest last */
    uint32_t ndrafts;
    cgj_trace_t *variants[CGJ_MAX_VARIANTS_HARD];
    uint32_t nvariants, current;
    uint64_t runs, replays, side_exits;
    uint64_t eager_ns, eager_runs, replay_ns; /* host time from begin to end, for the report */
    uint32_t record_failures;
    uint32_t exit_history;  /* one bit per replayed run, newest lowest: 1 if it left the trace */
    uint32_t history_len;
    bool want_twin;         /* an escape exit happened: a duplicate variant is welcome */
    char reason[256];
    struct cgj_anchor *next;
};

/* Set the anchor's reason (printf-style) and log it under `blacklist` if it blacklists. */
void cgj_anchor_blacklist(cgj_anchor_t *a, const char *why);

#endif /* CGJ_ANCHOR_H */
