/* anchor.c — the anchor table, per-anchor information and the report; see anchor.h. */
#include "tracer/anchor.h"
#include "base/log.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_anchor_t *anchors; /* a list: anchors are few, and looked up once per step at most */

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
    for (uint32_t i = 0; i < t->list.n; i++)
        if (t->list.ops[i].lib) out->lib_calls++, out->lib_absorbable += t->list.ops[i].lib->absorbable;
    out->ops -= out->lib_calls; /* driver calls: the library ops group them */
}

int cgj_anchor_info(const char *name, cgj_trace_info_t *out)
{
    pthread_mutex_lock(&table_lock);
    cgj_anchor_t *a = find_locked(name);
    if (a) fill_info(a, out);
    pthread_mutex_unlock(&table_lock);
    return a ? CGJ_OK : CGJ_ERR_NOT_FOUND;
}

static void report_variant(FILE *f, const cgj_trace_t *t, uint32_t k)
{
    fprintf(f, "    variant %u: %u ops (%u kernels), %u segment(s), %u varying slot(s), %llu replays, %llu side exits\n",
            k + 1, t->list.n, t->kernels, t->nsegs, t->varying_slots, (unsigned long long)t->replays,
            (unsigned long long)t->side_exits);
    for (uint32_t s = 0; s + 1 < t->nsegs; s++) {
        const cgj_op_t *b = &t->list.ops[t->segs[s].end];
        fprintf(f, "      segment %u ends at op %u: %s (%s)\n", s + 1, t->segs[s].end, b->call.api,
                cgj_op_docs[b->call.kind]);
    }
    for (uint32_t e = 0; e < t->nexits; e++)
        fprintf(f, "      side exit at op %u, %llu time(s): %s\n", t->exits[e].op,
                (unsigned long long)t->exits[e].count, t->exits[e].reason);
    if (t->other_exits)
        fprintf(f, "      %llu further side exit(s) of other kinds\n", (unsigned long long)t->other_exits);
    /* Library calls: how many replay absorbs whole, and why the others run the library. */
    uint32_t calls = 0, absorbable = 0, shown = 0;
    for (uint32_t i = 0; i < t->list.n; i++)
        if (t->list.ops[i].lib) calls++, absorbable += t->list.ops[i].lib->absorbable;
    if (calls)
        fprintf(f, "      library calls: %u, %u absorbed whole when their guard holds\n", calls, absorbable);
    for (uint32_t i = 0; i < t->list.n && shown < 8; i++) {
        const cgj_libop_t *l = t->list.ops[i].lib;
        if (!l || l->absorbable) continue;
        fprintf(f, "      op %u (%s) runs the library (%llu times): %s\n", i, t->list.ops[i].call.api,
                (unsigned long long)l->called, l->why_not);
        shown++;
    }
}

/* Why an anchor is not fast, in plain words, when it is not. */
static void report_verdict(FILE *f, const cgj_anchor_t *a)
{
    if (a->state == CGJ_STATE_BLACKLISTED) {
        fprintf(f, "    never replayed: blacklisted: %s\n", a->reason);
        return;
    }
    if (!a->nvariants) {
        fprintf(f, "    not replayed yet: %s\n", a->runs < 3 ? "a step replays from its third run"
                                                                : a->reason);
        return;
    }
    uint64_t replays = a->replays, eager = a->eager_runs;
    if (replays && eager) {
        double e = (double)a->eager_ns / (double)eager / 1e3, r = (double)a->replay_ns / (double)replays / 1e3;
        fprintf(f, "    host time per step: eager %.1f us, replay %.1f us: about %.3f s of host time saved\n",
                e, r, e > r ? (e - r) * (double)replays / 1e6 : 0.0);
    }
    if (a->side_exits > replays / 4)
        fprintf(f, "    many runs left the trace (%llu side exits for %llu replays): see the side exits above\n",
                (unsigned long long)a->side_exits, (unsigned long long)replays);
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
        fprintf(f, "  anchor '%s': %s, %llu runs, %llu replayed, %llu side exits, %u variant(s)\n",
                a->name, cgj_state_name(i.state), (unsigned long long)i.runs,
                (unsigned long long)i.replays, (unsigned long long)i.side_exits, i.variants);
        for (uint32_t k = 0; k < a->nvariants; k++) report_variant(f, a->variants[k], k);
        if (i.allocations)
            fprintf(f, "    pool: %u allocations, %llu bytes planned, %llu naive, %llu lower bound (%.3f)\n",
                    i.allocations, (unsigned long long)i.pool_bytes,
                    (unsigned long long)i.naive_bytes, (unsigned long long)i.lower_bound,
                    i.lower_bound ? (double)i.pool_bytes / (double)i.lower_bound : 1.0);
        report_verdict(f, a);
        if (i.reason[0] && i.state != CGJ_STATE_BLACKLISTED) fprintf(f, "    last event: %s\n", i.reason);
    }
    pthread_mutex_unlock(&table_lock);
}
