/* anchor.c — the anchor table, per-anchor information and the report; see anchor.h. */
#include "tracer/anchor.h"
#include "base/log.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_anchor_t *anchors; /* a list: anchors are few, and looked up once per step at most */

static const char *const state_names[] = {
#define CGJ_STATE_NAME(name, doc) #name,
    CGJ_STATE_LIST(CGJ_STATE_NAME)
#undef CGJ_STATE_NAME
};

static cgj_anchor_t *find_locked(const char *name)
{
    for (cgj_anchor_t *a = anchors; a; a = a->next)
        if (strcmp(a->name, name) == 0) return a;
    return NULL;
}

cgj_anchor_t *cgj_anchor_get(const char *name)
{
    pthread_mutex_lock(&table_lock);
    cgj_anchor_t *a = find_locked(name);
    if (!a) {
        a = cgj_xcalloc(1, sizeof *a);
        a->name = cgj_xstrdup(name);
        a->state = CGJ_STATE_WARMUP;
        a->next = anchors;
        anchors = a;
    }
    pthread_mutex_unlock(&table_lock);
    return a;
}

void cgj_anchor_blacklist(cgj_anchor_t *a, const char *why)
{
    a->state = CGJ_STATE_BLACKLISTED;
    cgj_strlcpy(a->reason, why, sizeof a->reason);
    CGJ_STAT_ADD(anchors_blacklisted, 1);
    CGJ_LOG(blacklist, "anchor '%s' blacklisted: %s", a->name, why);
}

static void fill_info(const cgj_anchor_t *a, cgj_trace_info_t *out)
{
    memset(out, 0, sizeof *out);
    out->state = a->state;
    out->variants = a->nvariants;
    out->runs = a->runs;
    out->replays = a->replays;
    out->side_exits = a->side_exits;
    out->record_failures = a->record_failures;
    cgj_strlcpy(out->reason, a->reason, sizeof out->reason);
    if (!a->nvariants) return;
    const cgj_trace_t *t = a->variants[a->current];
    out->ops = t->list.n;
    out->kernels = t->kernels;
    out->segments = t->nsegs;
    out->varying_slots = t->varying_slots;
    out->allocations = t->nblocks;
    out->pool_bytes = t->pool_bytes;
    out->naive_bytes = t->naive_bytes;
    out->lower_bound = t->lower_bound;
}

int cgj_anchor_info(const char *name, cgj_trace_info_t *out)
{
    pthread_mutex_lock(&table_lock);
    cgj_anchor_t *a = find_locked(name);
    if (a) fill_info(a, out);
    pthread_mutex_unlock(&table_lock);
    return a ? CGJ_OK : CGJ_ERR_NOT_FOUND;
}

void cgj_anchor_report(FILE *f)
{
    cgj_stats_t s;
    cgj_stats(&s);
    fprintf(f, "cgjit report\n");
#define CGJ_REPORT_STAT(field, doc) fprintf(f, "  %-20s %12llu  %s\n", #field, (unsigned long long)s.field, doc);
    CGJ_STATS_LIST(CGJ_REPORT_STAT)
#undef CGJ_REPORT_STAT
    pthread_mutex_lock(&table_lock);
    for (cgj_anchor_t *a = anchors; a; a = a->next) {
        cgj_trace_info_t i;
        fill_info(a, &i);
        fprintf(f, "  anchor '%s': %s, %llu runs, %llu replayed, %llu side exits, %u variant(s)",
                a->name, state_names[i.state], (unsigned long long)i.runs,
                (unsigned long long)i.replays, (unsigned long long)i.side_exits, i.variants);
        if (i.variants)
            fprintf(f, "; %u ops (%u kernels) in %u segment(s), %u varying slot(s)", i.ops,
                    i.kernels, i.segments, i.varying_slots);
        fprintf(f, "\n");
        if (i.allocations)
            fprintf(f, "    pool: %u allocations, %llu bytes planned, %llu naive, %llu lower bound (%.3f)\n",
                    i.allocations, (unsigned long long)i.pool_bytes,
                    (unsigned long long)i.naive_bytes, (unsigned long long)i.lower_bound,
                    i.lower_bound ? (double)i.pool_bytes / (double)i.lower_bound : 1.0);
        if (i.reason[0])
            fprintf(f, "    %s: %s\n", i.state == CGJ_STATE_BLACKLISTED ? "blacklisted" : "last event",
                    i.reason);
    }
    pthread_mutex_unlock(&table_lock);
}
