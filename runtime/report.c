/*
 * report.c — what a program reads back from cgjit: the process-wide counters (cgj_stats), one
 * anchor's figures (cgj_trace_info), state names, and the report (cgj_report): the counters, the
 * reasons steps left the fast path (counted by code, each with what the user can do), then
 * every anchor with its variants, segments, side exits, library calls, pool figures and, where
 * it is not fast, why.
 */
#include "runtime/runtime.h"
#include "allocator/pool.h"
#include "base/log.h"
#include "tracer/step.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

CGJ_API const char *cgj_state_name(int state)
{
    static const char *const names[] = {
#define CGJ_STATE_NAME(name, doc) #name,
        CGJ_STATE_LIST(CGJ_STATE_NAME)
#undef CGJ_STATE_NAME
    };
    return state >= 0 && (size_t)state < CGJ_ARRAY_LEN(names) ? names[state] : "?";
}

/* Copy the first out->size bytes of `full` (whose size field is set) into out, keeping out's
 * size: the caller's struct may be older (smaller) or newer (larger: the rest is zeroed). */
static void copy_sized(void *out, const void *full, size_t full_size)
{
    uint64_t size;
    memcpy(&size, out, sizeof size);
    size_t n = size < full_size ? (size_t)size : full_size;
    memcpy((char *)out + sizeof size, (const char *)full + sizeof size, n - sizeof size);
    if (size > full_size) memset((char *)out + full_size, 0, (size_t)size - full_size);
}

CGJ_API int cgj_stats_read(cgj_stats_t *out)
{
    if (!out || out->size < sizeof out->size) return CGJ_ERR_INVALID_ARG;
    cgj_stats_t s = {.size = sizeof s};
#define CGJ_STATS_COPY(field, doc) s.field = __atomic_load_n(&cgj_g_stats.field, __ATOMIC_RELAXED);
    CGJ_STATS_LIST(CGJ_STATS_COPY)
#undef CGJ_STATS_COPY
    s.pool_bytes = cgj_pool_mapped_bytes();
    copy_sized(out, &s, sizeof s);
    return CGJ_OK;
}

CGJ_API int cgj_trace_info_read(const char *name, cgj_trace_info_t *out)
{
    if (!name || !out || out->size < sizeof out->size) return CGJ_ERR_INVALID_ARG;
    cgj_trace_info_t i = {.size = sizeof i};
    int st = cgj_anchor_info(name, &i);
    if (st == CGJ_OK) copy_sized(out, &i, sizeof i);
    return st;
}


static void report_variant(FILE *f, const cgj_trace_t *t, uint32_t k)
{
    char text[320];
    fprintf(f, "    variant %u: %u ops (%u kernels), %u segment(s), %u varying slot(s), %llu replays, %llu side exits\n",
            k + 1, t->list.n, t->kernels, t->nsegs, t->varying_slots,
            (unsigned long long)__atomic_load_n(&t->replays, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&t->side_exits, __ATOMIC_RELAXED));
    for (uint32_t s = 0; s + 1 < t->nsegs; s++) {
        const cgj_op_t *b = &t->list.ops[t->segs[s].end - (t->segs[s].chained ? 1 : 0)];
        fprintf(f, "      segment %u ends at op %u: %s (%s)\n", s + 1, t->segs[s].end, b->call.api,
                cgj_reason_message(cgj_op_break_reason(b)));
    }
    for (uint32_t e = 0; e < t->nexits; e++)
        fprintf(f, "      side exit, %llu time(s): %s\n", (unsigned long long)t->exits[e].count,
                cgj_reason_format(&t->exits[e].reason, text, sizeof text));
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
                (unsigned long long)l->called, cgj_reason_format(&l->why_not, text, sizeof text));
        shown++;
    }
}

/* Why an anchor is not fast, in plain words, when it is not. */
static void report_verdict(FILE *f, const cgj_anchor_t *a, const cgj_trace_info_t *i)
{
    if (i->state == CGJ_STATE_BLACKLISTED) {
        fprintf(f, "    never replayed: blacklisted: %s\n", i->reason);
        return;
    }
    if (!i->variants) {
        fprintf(f, "    not replayed yet: %s\n", i->runs < 3 ? "a step replays from its third run" : i->reason);
        return;
    }
    if (i->eager_step_ns && i->replay_step_ns)
        fprintf(f, "    per step, begin to begin (medians): eager %.1f us, replay %.1f us (%.2fx)%s%s\n",
                (double)i->eager_step_ns / 1e3, (double)i->replay_step_ns / 1e3,
                (double)i->eager_step_ns / (double)i->replay_step_ns,
                i->state == CGJ_STATE_OFF ? ": replay is off for now: " : "",
                i->state == CGJ_STATE_OFF ? i->reason : "");
    if (i->recorded_ops && i->first_replay_run)
        fprintf(f, "    warm-up: recording %.2f us per call, plan %.2f ms, graphs %.2f ms (instantiate %.2f ms); first replay at run %llu\n",
                (double)i->record_ns / (double)i->recorded_ops / 1e3, (double)i->plan_ns / 1e6,
                (double)i->build_ns / 1e6, (double)i->instantiate_ns / 1e6,
                (unsigned long long)i->first_replay_run);
    if (i->reissued_ops)
        fprintf(f, "    %llu absorbed ops re-issued eagerly where replays left the trace\n",
                (unsigned long long)i->reissued_ops);
    double e, r;
    cgj_anchor_host_times(a, &e, &r);
    if (i->replays && e > 0)
        fprintf(f, "    host time per step: eager %.1f us, replay %.1f us: about %.3f s of host time saved\n",
                e / 1e3, r / 1e3, e > r ? (e - r) * (double)i->replays / 1e9 : 0.0);
    if (i->side_exits > i->replays / 4)
        fprintf(f, "    many runs left the trace (%llu side exits for %llu replays): see the side exits above\n",
                (unsigned long long)i->side_exits, (unsigned long long)i->replays);
}

static void report_anchor(FILE *f, const cgj_anchor_t *a)
{
    cgj_trace_info_t i = {.size = sizeof i};
    cgj_anchor_fill_info(a, &i);
    fprintf(f, "  anchor '%s': %s, %llu runs, %llu replayed, %llu side exits, %u variant(s)\n",
            cgj_anchor_name(a), cgj_state_name(i.state), (unsigned long long)i.runs,
            (unsigned long long)i.replays, (unsigned long long)i.side_exits, i.variants);
    const cgj_trace_t *t;
    for (uint32_t k = 0; (t = cgj_anchor_variant(a, k)); k++) report_variant(f, t, k);
    if (i.allocations)
        fprintf(f, "    pool: %u allocations, %llu bytes planned, %llu naive, %llu lower bound (%.3f)\n",
                i.allocations, (unsigned long long)i.pool_bytes, (unsigned long long)i.naive_bytes,
                (unsigned long long)i.lower_bound,
                i.lower_bound ? (double)i.pool_bytes / (double)i.lower_bound : 1.0);
    report_verdict(f, a, &i);
    if (i.reason[0] && i.state != CGJ_STATE_BLACKLISTED) fprintf(f, "    last event: %s\n", i.reason);
}

/* Every reason taken so far, by code, with its hint. */
static void report_reasons(FILE *f)
{
    bool any = false;
    for (int c = 1; c < CGJ_REASON_COUNT; c++) {
        uint64_t n = cgj_reason_count(c);
        if (!n) continue;
        if (!any) fprintf(f, "  reasons steps left the fast path:\n");
        any = true;
        const char *hint = cgj_reason_hint(c);
        fprintf(f, "    %-20s %8llu  %s%s%s\n", cgj_reason_name(c), (unsigned long long)n, cgj_reason_message(c),
                hint[0] ? "; " : "", hint);
    }
}

CGJ_API void cgj_report(FILE *f)
{
    f = f ? f : stderr;
    cgj_stats_t s;
    cgj_stats(&s);
    fprintf(f, "cgjit report\n");
#define CGJ_REPORT_STAT(field, doc) fprintf(f, "  %-20s %12llu  %s\n", #field, (unsigned long long)s.field, doc);
    CGJ_STATS_LIST(CGJ_REPORT_STAT)
#undef CGJ_REPORT_STAT
    report_reasons(f);
    cgj_anchors_lock();
    for (const cgj_anchor_t *a = cgj_anchors_first(); a; a = cgj_anchors_next(a)) report_anchor(f, a);
    cgj_anchors_unlock();
}
