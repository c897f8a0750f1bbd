/*
 * report_data.c — the figures the text and the JSON reports are made of (report.h): anchors in
 * the order a reader needs them, host time saved, the reasons steps most often ran eagerly.
 */
#include "runtime/report.h"
#include "base/config.h"

#include <stdlib.h>
#include <string.h>

static int start_status = -1;

void cgj_report_set_status(int status)
{
    __atomic_store_n(&start_status, status, __ATOMIC_RELEASE);
}

int cgj_report_status(void)
{
    return __atomic_load_n(&start_status, __ATOMIC_ACQUIRE);
}

/* Segment breaks end a graph inside a replay, and a library call that runs is still part of a
 * replayed step: neither sends the step down the eager path. */
bool cgj_report_reason_is_eager(int code)
{
    const char *name = cgj_reason_name(code);
    return code != CGJ_REASON_NONE && strncmp(name, "BREAK_", 6) && strncmp(name, "LIB_", 4);
}

const char *cgj_report_status_name(int status)
{
    return status == CGJ_ERR_DISABLED  ? "disabled"
         : status == CGJ_ERR_NO_DRIVER ? "no_driver"
         : status < 0                  ? "not_started"
                                       : "ok";
}

const char *cgj_report_status_text(int status, char *buf, size_t len)
{
    if (status == CGJ_ERR_DISABLED)
        snprintf(buf, len, "cgjit is disabled (CGJIT_DISABLE=1): every driver call ran as it is; nothing was traced");
    else if (status == CGJ_ERR_NO_DRIVER)
        snprintf(buf, len, "the CUDA driver '%s' could not be loaded: nothing was traced", cgj_cfg.DRIVER);
    else snprintf(buf, len, "%s", "");
    return buf;
}

double cgj_report_share(const cgj_report_data_t *d)
{
    return d->stats.steps ? (double)d->stats.steps_replayed / (double)d->stats.steps : 0.0;
}

/* Anchors that ran more than once come first, the most host time saved or lost (whichever is
 * larger) first, then the most runs; names break ties, so two runs print alike. */
static int by_weight(const void *x, const void *y)
{
    const cgj_report_anchor_t *a = x, *b = y;
    bool once_a = a->info.runs <= 1, once_b = b->info.runs <= 1;
    if (once_a != once_b) return once_a ? 1 : -1;
    double wa = a->saved_ns < 0 ? -a->saved_ns : a->saved_ns, wb = b->saved_ns < 0 ? -b->saved_ns : b->saved_ns;
    if (wa != wb) return wa > wb ? -1 : 1;
    if (a->info.runs != b->info.runs) return a->info.runs > b->info.runs ? -1 : 1;
    return strcmp(cgj_anchor_name(a->a), cgj_anchor_name(b->a));
}

static void gather_anchors(cgj_report_data_t *d)
{
    size_t n = 0, cap = 16;
    d->anchors = cgj_xmalloc(cap * sizeof *d->anchors);
    for (const cgj_anchor_t *a = cgj_anchors_first(); a; a = cgj_anchors_next(a)) {
        if (n == cap) d->anchors = cgj_xrealloc(d->anchors, (cap *= 2) * sizeof *d->anchors);
        cgj_report_anchor_t *r = &d->anchors[n++];
        memset(r, 0, sizeof *r);
        r->a = a;
        r->info.size = sizeof r->info;
        cgj_anchor_fill_info(a, &r->info);
        cgj_anchor_host_times(a, &r->eager_ns, &r->replay_ns);
        if (r->info.replays && r->eager_ns > 0) r->saved_ns = (r->eager_ns - r->replay_ns) * (double)r->info.replays;
        d->saved_ns += r->saved_ns;
        d->nonce += r->info.runs <= 1;
    }
    d->nanchors = n;
    qsort(d->anchors, n, sizeof *d->anchors, by_weight);
}

/* Codes by how often they were taken, most first; the smaller code first among equals. */
static int by_count(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    uint64_t na = cgj_reason_count(a), nb = cgj_reason_count(b);
    return na != nb ? (na > nb ? -1 : 1) : a - b;
}

/* The codes most often taken that send steps down the eager path. */
static void gather_top(cgj_report_data_t *d)
{
    int codes[CGJ_REASON_COUNT], n = 0;
    for (int c = 1; c < CGJ_REASON_COUNT; c++)
        if (cgj_reason_count(c) && cgj_report_reason_is_eager(c)) codes[n++] = c;
    qsort(codes, (size_t)n, sizeof codes[0], by_count);
    d->ntop = n < CGJ_REPORT_TOP_REASONS ? n : CGJ_REPORT_TOP_REASONS;
    memcpy(d->top, codes, (size_t)d->ntop * sizeof codes[0]);
}

void cgj_report_data_gather(cgj_report_data_t *d)
{
    memset(d, 0, sizeof *d);
    d->status = cgj_report_status();
    cgj_stats(&d->stats);
    gather_anchors(d);
    gather_top(d);
}

uint32_t cgj_report_gpu_patched(const cgj_trace_t *t, uint32_t *segs)
{
    uint32_t n = 0, with = 0;
    for (uint32_t s = 0; s < t->nsegs; s++) {
        if (!t->segs[s].patcher) continue;
        with++;
        for (uint32_t i = t->segs[s].first; i < t->segs[s].end; i++) n += t->list.ops[i].devnode != NULL;
    }
    if (segs) *segs = with;
    return n;
}

void cgj_report_data_free(cgj_report_data_t *d)
{
    cgj_free(d->anchors);
    d->anchors = NULL;
    d->nanchors = 0;
}
