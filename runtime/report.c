/*
 * report.c — the text report (cgj_report). It leads with a summary (report.h): the share of
 * steps replayed, the host time saved, the reasons steps most often ran eagerly with what to do
 * about each; then every anchor that ran more than once, most host time saved or lost first,
 * with its variants, segments, side exits, library calls, pool figures and, where it is not
 * fast, why; anchors that ran once in one line; the other reasons; the counters that are not
 * zero. (What a program reads back field by field is report_read.c.) Names are the program's
 * bytes: each is escaped (base/json.h), so that a newline or a terminal escape in one cannot
 * break the report's lines or reach the terminal.
 */
#include "runtime/runtime.h"
#include "runtime/report.h"
#include "allocator/pool.h"
#include "base/json.h"
#include "base/log.h"
#include "graphs/gpubusy.h"
#include "tracer/step.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* When a step replays at the earliest (a warm-up run: CGJIT_WARMUP_RUNS, docs/design.md). */
#define ONCE "a step replays from its third run, or its fourth after a warm-up run"

/* Each chain fused (in use: a segment issued eagerly undid its own), each one dropped (the first
 * CGJ_FUSE_DROPS_KEPT), with its reason. */
static void report_fusions(FILE *f, const cgj_trace_t *t)
{
    char text[320];
    for (uint32_t k = 0; k < t->nfused; k++) {
        const cgj_fused_t *fu = &t->fused[k];
        if (t->list.ops[fu->first].fused != k + 1) continue;
        fprintf(f, "        fused: ops %u-%u, %u kernel launch(es), replay as %s\n", fu->first, fu->last, fu->nkernels,
                cgj_fused_as(fu, true));
    }
    for (uint32_t k = 0; k < t->fuse_drops && k < CGJ_FUSE_DROPS_KEPT; k++)
        fprintf(f, "        left unfused: %s\n", cgj_reason_format(&t->fuse_drop_list[k], text, sizeof text));
    if (t->fuse_drops > CGJ_FUSE_DROPS_KEPT)
        fprintf(f, "        ... and %u more left unfused\n", t->fuse_drops - CGJ_FUSE_DROPS_KEPT);
}

static void report_variant(FILE *f, const cgj_trace_t *t, uint32_t k)
{
    char text[320];
    uint32_t segs = 0;
    fprintf(f,
            "    variant %u: %u ops (%u kernels), %u segment(s), %u varying slot(s), %llu replays, %llu side exits\n",
            k + 1, t->list.n, t->kernels, t->nsegs, __atomic_load_n(&t->varying_slots, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&t->replays, __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&t->side_exits, __ATOMIC_RELAXED));
    for (uint32_t s = 0; s + 1 < t->nsegs; s++) {
        const cgj_op_t *b = &t->list.ops[t->segs[s].end - (t->segs[s].chained ? 1 : 0)];
        fprintf(f, "      segment %u ends at op %u: %s (%s)\n", s + 1, t->segs[s].end, b->call.api,
                cgj_reason_message(cgj_op_break_reason(b)));
    }
    uint32_t on_gpu = cgj_report_gpu_patched(t, &segs);
    if (on_gpu)
        fprintf(
            f,
            "      kernels patched on the GPU: %u, in %u segment(s): their values are written by the graph's patch node as it runs (CGJIT_DEVICE_PATCH)\n",
            on_gpu, segs);
    for (uint32_t e = 0; e < t->nexits; e++)
        fprintf(f, "      side exit, %llu time(s): %s\n", (unsigned long long)t->exits[e].count,
                cgj_reason_format(&t->exits[e].reason, text, sizeof text));
    if (t->other_exits)
        fprintf(f, "      %llu further side exit(s) of other kinds\n", (unsigned long long)t->other_exits);
    if (t->fused_chains || t->fuse_drops)
        fprintf(
            f,
            "      fusion: %u chain(s) holding %u kernel launches replay as %u generated kernel(s) and %u cuBLASLt matmul(s) (%.2f ms to compile, %u by NVRTC, %.2f ms to validate)%s%s\n",
            t->fused_chains, t->fused_ops, t->fused_chains - t->fused_gemms, t->fused_gemms,
            (double)t->fuse_compile_ns / 1e6, t->fuse_cold, (double)(t->fuse_ns - t->fuse_compile_ns) / 1e6,
            t->fuse_drops ? "; last left unfused: " : "",
            t->fuse_drops ? cgj_reason_format(&t->fuse_dropped, text, sizeof text) : "");
    report_fusions(f, t);
    /* Library calls: by default each runs the library; under CGJIT_LIBS_LEARNED, how many replay
     * absorbs whole, and why the others run it. */
    uint32_t calls = 0, absorbable = 0, shown = 0;
    for (uint32_t i = 0; i < t->list.n; i++)
        if (t->list.ops[i].lib) calls++, absorbable += t->list.ops[i].lib->absorbable;
    if (calls && !cgj_libop_learned()) {
        fprintf(f, "      library calls: %u; the library runs on every call, its kernels replay\n", calls);
        return;
    }
    if (calls)
        fprintf(f, "      library calls: %u, %u absorbed whole when their guard holds (CGJIT_LIBS_LEARNED: unsafe)\n",
                calls, absorbable);
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
        fprintf(f, "    not replayed yet: %s\n", i->runs < 3 ? ONCE : i->reason);
        return;
    }
    if (i->eager_step_ns && i->replay_step_ns)
        fprintf(f, "    per step, begin to begin (medians): eager %.1f us, replay %.1f us (%.2fx)%s%s\n",
                (double)i->eager_step_ns / 1e3, (double)i->replay_step_ns / 1e3,
                (double)i->eager_step_ns / (double)i->replay_step_ns,
                i->state == CGJ_STATE_OFF ? ": replay is off for now: " : "",
                i->state == CGJ_STATE_OFF ? i->reason : "");
    if (i->gpu_busy_steps) {
        fprintf(f, "    GPU busy per replayed step (CGJIT_BUSY, %llu steps): %.1f us",
                (unsigned long long)i->gpu_busy_steps, (double)i->gpu_busy_ns / 1e3);
        if (i->replay_step_ns)
            fprintf(f,
                    "; replay %.1f us is %.2fx that: %.1f us left for graphs to take, the rest only faster kernels can",
                    (double)i->replay_step_ns / 1e3, (double)i->replay_step_ns / (double)i->gpu_busy_ns,
                    i->replay_step_ns > i->gpu_busy_ns ? (double)(i->replay_step_ns - i->gpu_busy_ns) / 1e3 : 0.0);
        fputc('\n', f);
    }
    if (i->recorded_ops && i->first_replay_run)
        fprintf(
            f,
            "    warm-up: recording %.2f us per call, plan %.2f ms, graphs %.2f ms (instantiate %.2f ms); first replay at run %llu\n",
            (double)i->record_ns / (double)i->recorded_ops / 1e3, (double)i->plan_ns / 1e6, (double)i->build_ns / 1e6,
            (double)i->instantiate_ns / 1e6, (unsigned long long)i->first_replay_run);
    if (i->warmup_runs || i->probes || i->off_runs || i->busy_runs || i->building_runs)
        fprintf(f,
                "    eager on purpose: %llu warm-up run(s), %llu probe(s), %llu run(s) while replay was off, %llu "
                "run(s) while another thread ran the step, %llu run(s) while cgjit's builder thread built it\n",
                (unsigned long long)i->warmup_runs, (unsigned long long)i->probes, (unsigned long long)i->off_runs,
                (unsigned long long)i->busy_runs, (unsigned long long)i->building_runs);
    if (i->reissued_ops)
        fprintf(f, "    %llu absorbed ops re-issued eagerly where replays left the trace\n",
                (unsigned long long)i->reissued_ops);
    double e, r;
    cgj_anchor_host_times(a, &e, &r);
    if (i->replays && e > 0)
        fprintf(f, "    host time per step: eager %.1f us, replay %.1f us: about %.3f s of host time %s\n", e / 1e3,
                r / 1e3, (e > r ? e - r : r - e) * (double)i->replays / 1e9, e >= r ? "saved" : "lost");
    if (i->eager_calls_ns && e > 0) {
        fprintf(
            f,
            "    an eager probe spends %.1f us of its %.1f us in the driver and library calls replay absorbs (the most replay can save on the host)",
            (double)i->eager_calls_ns / 1e3, e / 1e3);
        if (i->eager_step_ns)
            fprintf(f, ": %.0f%% of the step's period", 100.0 * (double)i->eager_calls_ns / (double)i->eager_step_ns);
        fputc('\n', f);
    }
    if (i->side_exits > i->replays / 4)
        fprintf(f, "    many runs left the trace (%llu side exits for %llu replays): see the side exits above\n",
                (unsigned long long)i->side_exits, (unsigned long long)i->replays);
}

static void report_anchor(FILE *f, const cgj_report_anchor_t *ra)
{
    const cgj_anchor_t *a = ra->a;
    cgj_trace_info_t i = ra->info;
    fputs("  anchor '", f);
    cgj_text_str(f, cgj_anchor_name(a)); /* a program's bytes: escaped, on one line */
    fprintf(f, "': %s, %llu runs, %llu replayed, %llu side exits, %u variant(s)\n", cgj_state_name(i.state),
            (unsigned long long)i.runs, (unsigned long long)i.replays, (unsigned long long)i.side_exits, i.variants);
    const cgj_trace_t *t;
    for (uint32_t k = 0; (t = cgj_anchor_variant(a, k)); k++) report_variant(f, t, k);
    if (i.allocations)
        fprintf(f, "    pool: %u allocations, %llu bytes planned, %llu naive, %llu lower bound (%.3f)\n", i.allocations,
                (unsigned long long)i.pool_bytes, (unsigned long long)i.naive_bytes, (unsigned long long)i.lower_bound,
                i.lower_bound ? (double)i.pool_bytes / (double)i.lower_bound : 1.0);
    report_verdict(f, a, &i);
    if (i.reason[0] && i.state != CGJ_STATE_BLACKLISTED) fprintf(f, "    last event: %s\n", i.reason);
}

/* A reason's line: name, times taken, message and hint. */
static void report_reason(FILE *f, int c)
{
    const char *hint = cgj_reason_hint(c);
    fprintf(f, "    %-20s %8llu  %s%s%s\n", cgj_reason_name(c), (unsigned long long)cgj_reason_count(c),
            cgj_reason_message(c), hint[0] ? "; " : "", hint);
}

/* The governor's line: its decision, the measured ratio and what measuring it cost. */
static void report_governor(FILE *f, const cgj_govern_info_t *g)
{
    fprintf(f, "  governor (CGJIT_GOVERN): %s", cgj_govern_state_name(g->state));
    if (g->judgements)
        fprintf(f, "; last judgement: %s, active/dormant %.3fx (95%% bounds %.3f-%.3f) over %llu pairs of windows",
                g->last_dormant ? "dormant" : "active", g->ratio, g->lo, g->hi, (unsigned long long)g->pairs);
    else if (g->cur_pairs)
        fprintf(f, "; measuring: active/dormant %.3fx over %llu pairs so far", g->cur_ratio,
                (unsigned long long)g->cur_pairs);
    if (g->state == CGJ_GOVERN_ANCHOR)
        fputs(" (the heartbeat's eager probes against its replays: its anchor's figures below)", f);
    fputc('\n', f);
    if (g->heartbeat[0]) {
        fputs("    heartbeat '", f);
        cgj_text_str(f, g->heartbeat);
        fprintf(
            f,
            "': %llu beats, %llu windows, %llu judgement(s), %llu phase(s), %.3f s dormant to measure (%.3f s dormant in all)\n",
            (unsigned long long)g->beats, (unsigned long long)g->windows, (unsigned long long)g->judgements,
            (unsigned long long)g->phases, g->measure_dormant_ns / 1e9, g->dormant_ns / 1e9);
    }
}

static void report_summary(FILE *f, const cgj_report_data_t *d)
{
    char status[320];
    fprintf(f, "  pid %ld, implicit steps (CGJIT_STEP): %s\n", (long)getpid(),
            cgj_step_policy_name(__atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED)));
    if (cgj_report_status_text(d->status, status, sizeof status)[0]) fprintf(f, "  %s\n", status);
    if (cgj_cfg.BUSY) {
        char seen[320];
        const char *off = cgj_gpubusy_status();
        fprintf(f, "  CGJIT_BUSY: %s\n", off[0] ? off : cgj_gpubusy_describe(seen, sizeof seen));
    }
    cgj_govern_info_t g = {.size = sizeof g};
    cgj_govern_read(&g);
    if (!d->stats.steps) {
        fprintf(f, "  summary: no step ran\n");
    } else if (g.judgements) { /* measured: the anchors' own sums come with each anchor */
        fprintf(
            f,
            "  summary: %llu of %llu steps replayed (%.1f%%); measured in this process: %.3fx as fast with cgjit active as dormant\n",
            (unsigned long long)d->stats.steps_replayed, (unsigned long long)d->stats.steps,
            100.0 * cgj_report_share(d), g.ratio);
    } else {
        double saved = d->saved_ns;
        fprintf(
            f,
            "  summary: %llu of %llu steps replayed (%.1f%%); the anchors' own estimate: about %.3f s of host time %s\n",
            (unsigned long long)d->stats.steps_replayed, (unsigned long long)d->stats.steps,
            100.0 * cgj_report_share(d), (saved < 0 ? -saved : saved) / 1e9, saved < 0 ? "lost" : "saved");
    }
    report_governor(f, &g);
    if (d->ntop) fprintf(f, "  top reasons steps ran eagerly, with what to do:\n");
    for (int k = 0; k < d->ntop; k++) report_reason(f, d->top[k]);
}

/* Anchors that ran once: setup steps, never replayed (ONCE). */
static void report_once(FILE *f, const cgj_report_data_t *d)
{
    if (!d->nonce) return;
    fprintf(f, "  %zu anchor(s) ran once, never replayed (%s):", d->nonce, ONCE);
    size_t shown = 0;
    for (size_t k = d->nanchors - d->nonce; k < d->nanchors && shown < 4; k++, shown++) {
        fputs(shown ? ", '" : " '", f);
        cgj_text_str(f, cgj_anchor_name(d->anchors[k].a));
        fputc('\'', f);
    }
    fprintf(f, d->nonce > shown ? " and %zu more\n" : "\n", d->nonce - shown);
}

/* The reasons that are not in the summary (segment breaks, library calls that ran, the rarer
 * eager ones). */
static void report_other_reasons(FILE *f, const cgj_report_data_t *d)
{
    bool any = false;
    for (int c = 1; c < CGJ_REASON_COUNT; c++) {
        bool top = false;
        for (int k = 0; k < d->ntop; k++) top |= d->top[k] == c;
        if (top || !cgj_reason_count(c)) continue;
        if (!any) fprintf(f, "  other reasons (segment breaks, library calls that ran, rarer ones):\n");
        any = true;
        report_reason(f, c);
    }
}

static void report_counters(FILE *f, const cgj_stats_t *s)
{
    uint64_t any = 0;
#define CGJ_REPORT_ANY(field, doc) any |= s->field;
    CGJ_STATS_LIST(CGJ_REPORT_ANY)
#undef CGJ_REPORT_ANY
    if (any) fprintf(f, "  counters (those not zero):\n");
#define CGJ_REPORT_STAT(field, doc) \
    if (s->field) fprintf(f, "    %-20s %12llu  %s\n", #field, (unsigned long long)s->field, doc);
    CGJ_STATS_LIST(CGJ_REPORT_STAT)
#undef CGJ_REPORT_STAT
}

CGJ_API void cgj_report(FILE *f)
{
    f = f ? f : stderr;
    cgj_report_data_t d;
    fprintf(f, "cgjit report\n");
    cgj_anchors_lock();
    cgj_report_data_gather(&d);
    report_summary(f, &d);
    if (d.nanchors > d.nonce)
        fprintf(f, "  anchors, most host time saved or lost first (each anchor's own estimate):\n");
    for (size_t k = 0; k < d.nanchors - d.nonce; k++) report_anchor(f, &d.anchors[k]);
    report_once(f, &d);
    cgj_anchors_unlock();
    report_other_reasons(f, &d);
    report_counters(f, &d.stats);
    cgj_report_data_free(&d);
}
