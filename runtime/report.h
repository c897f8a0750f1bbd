/*
 * report.h — what cgjit tells its user about a run: the report (text, report.c; JSON,
 * report_json.c), the figures both are made of (report_data.c), and what is written as the
 * program ends — at exit, on SIGTERM or SIGINT — and every CGJIT_REPORT_EVERY_S seconds
 * (report_exit.c: CGJIT_REPORT and CGJIT_TRACE_FILE).
 *
 * Both reports lead with the same summary, computed once here: the share of steps replayed, the
 * host time replay saved (per anchor: eager host time per run minus replayed host time per run,
 * times the replays), and the reasons that most often sent steps down the eager path, each
 * with what the user can do. Anchors follow, the ones that saved or lost the most host time
 * first; anchors that ran once (setup steps, never replayed) are folded together.
 */
#ifndef CGJ_REPORT_H
#define CGJ_REPORT_H

#include "tracer/step.h"

#include <stdio.h>

#define CGJ_REPORT_SCHEMA_VERSION 1 /* of the JSON report: docs/report-schema.json */
#define CGJ_REPORT_TOP_REASONS 5

/* One anchor's figures. */
typedef struct cgj_report_anchor {
    const cgj_anchor_t *a;
    cgj_trace_info_t info;
    double eager_ns, replay_ns; /* host time per eager run, per replay (0: none ran) */
    double saved_ns;            /* (eager_ns - replay_ns) x replays; below 0 when replay lost */
} cgj_report_anchor_t;

typedef struct cgj_report_data {
    int status; /* how start-up went: cgj_report_status() */
    cgj_stats_t stats;
    cgj_report_anchor_t *anchors;    /* most host time saved or lost first; once-run ones last */
    size_t nanchors, nonce;          /* all of them, and those that ran once */
    double saved_ns;                 /* over every anchor */
    int top[CGJ_REPORT_TOP_REASONS]; /* codes that sent steps down the eager path, most taken first */
    int ntop;
} cgj_report_data_t;

/* How start-up went (interpose.c tells once it knows; the reports say so when it went wrong);
 * -1 until then. */
void cgj_report_set_status(int status);
int cgj_report_status(void);
/* Gather the figures. Call with the anchor table locked (cgj_anchors_lock), and keep it locked
 * while the anchors' traces are read; release with cgj_report_data_free. */
void cgj_report_data_gather(cgj_report_data_t *d);
void cgj_report_data_free(cgj_report_data_t *d);
/* Kernels of trace t patched on the GPU (graphs/devpatch.h), and in how many segments (*segs,
 * where segs is not NULL). */
uint32_t cgj_report_gpu_patched(const cgj_trace_t *t, uint32_t *segs);
/* Share of steps replayed, 0 to 1 (0 without steps). */
double cgj_report_share(const cgj_report_data_t *d);
/* Does this code send a step down the eager path (rather than end a segment, or make a library
 * call run, inside a replay)? */
bool cgj_report_reason_is_eager(int code);
/* One line on a start-up that did not go well ("" when it did): cgjit disabled, no driver. */
const char *cgj_report_status_text(int status, char *buf, size_t len);
/* "ok", "disabled", "no_driver" or "not_started" (no CUDA call or cgj_* call seen yet). */
const char *cgj_report_status_name(int status);

/* The JSON report (schema: docs/report-schema.json). */
void cgj_report_json(FILE *f);
/* At start-up, once the configuration is read: when CGJIT_REPORT or CGJIT_TRACE_FILE ask for
 * output, start the timeline and write the output at exit, when SIGTERM or SIGINT ends the
 * program (where its action is the default) and every CGJIT_REPORT_EVERY_S seconds. */
void cgj_report_setup(void);
/* In a child after fork() that cgjit traces (tracer/step.h, cgj_step_forked): the child writes
 * its own report and timeline at exit or on a signal, as the parent does (its own writer
 * thread: threads do not survive fork()). */
void cgj_report_forked(void);

#endif /* CGJ_REPORT_H */
