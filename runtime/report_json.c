/*
 * report_json.c — the report as JSON (CGJIT_REPORT=json:FILE), for programs that read it: the
 * same figures as the text report (report.h), every counter included, times in nanoseconds.
 *
 * The schema is docs/report-schema.json. Its version, CGJ_REPORT_SCHEMA_VERSION, is the
 * output's "schema_version": a field added keeps the version (readers ignore what they do not
 * know); a field renamed, removed or given another meaning raises it.
 */
#define _GNU_SOURCE /* open_memstream */
#include "runtime/report.h"
#include "base/json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void num(FILE *f, const char *key, uint64_t v)
{
    cgj_json_key(f, key, 0);
    fprintf(f, "%" PRIu64, v);
}

static void real(FILE *f, const char *key, double v)
{
    cgj_json_key(f, key, 0);
    fprintf(f, "%.6g", v);
}

static void str(FILE *f, const char *key, const char *v)
{
    cgj_json_key(f, key, 0);
    cgj_json_str(f, v);
}

/* {"code": NAME, "count": N, "message": ..., "hint": ...} */
static void reason_entry(FILE *f, int code)
{
    fputc('{', f);
    cgj_json_key(f, "code", 1);
    cgj_json_str(f, cgj_reason_name(code));
    num(f, "count", cgj_reason_count(code));
    str(f, "message", cgj_reason_message(code));
    str(f, "hint", cgj_reason_hint(code));
    fputc('}', f);
}

/* A reason as kept: {"code", "op" (null: none), "text"}; null for none. */
static void kept_reason(FILE *f, const char *key, int code, uint32_t op, const char *text)
{
    cgj_json_key(f, key, 0);
    if (code == CGJ_REASON_NONE) {
        fputs("null", f);
        return;
    }
    fputc('{', f);
    cgj_json_key(f, "code", 1);
    cgj_json_str(f, cgj_reason_name(code));
    cgj_json_key(f, "op", 0);
    if (op == CGJ_REASON_NO_OP) fputs("null", f);
    else fprintf(f, "%u", op);
    str(f, "text", text);
    fputc('}', f);
}

static void summary(FILE *f, const cgj_report_data_t *d)
{
    cgj_json_key(f, "summary", 0);
    fputc('{', f);
    cgj_json_key(f, "steps", 1);
    fprintf(f, "%" PRIu64, d->stats.steps);
    num(f, "steps_replayed", d->stats.steps_replayed);
    real(f, "share_replayed", cgj_report_share(d));
    real(f, "host_ns_saved", d->saved_ns);
    num(f, "anchors", d->nanchors);
    num(f, "anchors_run_once", d->nonce);
    cgj_json_key(f, "top_reasons", 0);
    fputc('[', f);
    for (int k = 0; k < d->ntop; k++) {
        if (k) fputc(',', f);
        reason_entry(f, d->top[k]);
    }
    fputs("]}", f);
}

static void governor(FILE *f)
{
    cgj_govern_info_t g = {.size = sizeof g};
    cgj_govern_read(&g);
    cgj_json_key(f, "governor", 0);
    fputc('{', f);
    cgj_json_key(f, "state", 1);
    cgj_json_str(f, cgj_govern_state_name(g.state));
    num(f, "dormant", (uint64_t)g.dormant);
    str(f, "heartbeat", g.heartbeat);
    num(f, "judgements", g.judgements);
    if (g.judgements) str(f, "decision", g.last_dormant ? "dormant" : "active");
    else cgj_json_key(f, "decision", 0), fputs("null", f);
    real(f, "ratio", g.judgements ? g.ratio : 0);
    real(f, "ratio_low", g.judgements ? g.lo : 0);
    real(f, "ratio_high", g.judgements ? g.hi : 0);
    num(f, "pairs", g.pairs);
    num(f, "pairs_total", g.pairs_total);
    num(f, "windows", g.windows);
    num(f, "beats", g.beats);
    num(f, "phases", g.phases);
    num(f, "switches", g.switches);
    num(f, "measure_dormant_ns", g.measure_dormant_ns);
    num(f, "dormant_ns", g.dormant_ns);
    fputc('}', f);
}

static void counters(FILE *f, const cgj_stats_t *s)
{
    cgj_json_key(f, "counters", 0);
    fputc('{', f);
    int first = 1;
#define CGJ_JSON_STAT(field, doc) cgj_json_key(f, #field, first), first = 0, fprintf(f, "%" PRIu64, (uint64_t)s->field);
    CGJ_STATS_LIST(CGJ_JSON_STAT)
#undef CGJ_JSON_STAT
    fputc('}', f);
}

static void reasons(FILE *f)
{
    cgj_json_key(f, "reasons", 0);
    fputc('[', f);
    int first = 1;
    for (int c = 1; c < CGJ_REASON_COUNT; c++) {
        if (!cgj_reason_count(c)) continue;
        if (!first) fputc(',', f);
        first = 0;
        reason_entry(f, c);
    }
    fputc(']', f);
}

/* Each chain fused (in use) and the first ones dropped, with their reasons. */
static void fusions(FILE *f, const cgj_trace_t *t)
{
    char text[320];
    cgj_json_key(f, "fusions", 0);
    fputc('[', f);
    for (uint32_t k = 0, n = 0; k < t->nfused; k++) {
        const cgj_fused_t *fu = &t->fused[k];
        if (t->list.ops[fu->first].fused != k + 1) continue;
        fputs(n++ ? ",{" : "{", f);
        cgj_json_key(f, "first", 1);
        fprintf(f, "%u", fu->first);
        num(f, "last", fu->last);
        num(f, "kernels", fu->nkernels);
        str(f, "as", cgj_fused_as(fu, false));
        fputc('}', f);
    }
    fputc(']', f);
    cgj_json_key(f, "fuse_drop_list", 0);
    fputc('[', f);
    for (uint32_t k = 0; k < t->fuse_drops && k < CGJ_FUSE_DROPS_KEPT; k++) {
        const cgj_reason_t *r = &t->fuse_drop_list[k];
        fputs(k ? ",{" : "{", f);
        cgj_json_key(f, "index", 1);
        fprintf(f, "%u", k);
        kept_reason(f, "reason", r->code, r->op, cgj_reason_format(r, text, sizeof text));
        fputc('}', f);
    }
    fputc(']', f);
}

/* One variant: its size, segments, replays and side exits by op and reason. */
static void variant(FILE *f, const cgj_trace_t *t)
{
    char text[320];
    fputc('{', f);
    cgj_json_key(f, "ops", 1);
    fprintf(f, "%u", t->list.n);
    num(f, "kernels", t->kernels);
    num(f, "segments", t->nsegs);
    num(f, "varying_slots", __atomic_load_n(&t->varying_slots, __ATOMIC_RELAXED));
    num(f, "gpu_patched_kernels", cgj_report_gpu_patched(t, NULL));
    num(f, "replays", __atomic_load_n(&t->replays, __ATOMIC_RELAXED));
    num(f, "side_exits", __atomic_load_n(&t->side_exits, __ATOMIC_RELAXED));
    num(f, "other_exits", t->other_exits);
    num(f, "fused_chains", t->fused_chains);
    num(f, "fused_ops", t->fused_ops);
    num(f, "fused_gemms", t->fused_gemms);
    num(f, "fuse_drops", t->fuse_drops);
    num(f, "fuse_ns", t->fuse_ns);
    num(f, "fuse_compile_ns", t->fuse_compile_ns);
    num(f, "fuse_cold", t->fuse_cold);
    if (t->fuse_drops)
        kept_reason(f, "fuse_dropped", t->fuse_dropped.code, t->fuse_dropped.op,
                    cgj_reason_format(&t->fuse_dropped, text, sizeof text));
    fusions(f, t);
    cgj_json_key(f, "exits", 0);
    fputc('[', f);
    for (uint32_t e = 0; e < t->nexits; e++) {
        fputs(e ? ",{" : "{", f);
        cgj_json_key(f, "count", 1);
        fprintf(f, "%" PRIu64, (uint64_t)t->exits[e].count);
        const cgj_reason_t *r = &t->exits[e].reason;
        kept_reason(f, "reason", r->code, r->op, cgj_reason_format(r, text, sizeof text));
        fputc('}', f);
    }
    fputs("]}", f);
}

static void times(FILE *f, const cgj_report_anchor_t *r)
{
    const cgj_trace_info_t *i = &r->info;
    real(f, "eager_host_ns_per_run", r->eager_ns);
    real(f, "replay_host_ns_per_run", r->replay_ns);
    real(f, "host_ns_saved", r->saved_ns);
    num(f, "eager_step_ns", i->eager_step_ns);
    num(f, "replay_step_ns", i->replay_step_ns);
    num(f, "gpu_busy_ns", i->gpu_busy_ns);
    num(f, "gpu_busy_steps", i->gpu_busy_steps);
    num(f, "record_ns", i->record_ns);
    num(f, "plan_ns", i->plan_ns);
    num(f, "build_ns", i->build_ns);
    num(f, "instantiate_ns", i->instantiate_ns);
    num(f, "first_replay_run", i->first_replay_run);
}

static void anchor(FILE *f, const cgj_report_anchor_t *r)
{
    const cgj_trace_info_t *i = &r->info;
    fputc('{', f);
    cgj_json_key(f, "name", 1);
    cgj_json_str(f, cgj_anchor_name(r->a));
    str(f, "state", cgj_state_name(i->state));
    num(f, "runs", i->runs);
    num(f, "replays", i->replays);
    num(f, "side_exits", i->side_exits);
    num(f, "record_failures", i->record_failures);
    num(f, "reissued_ops", i->reissued_ops);
    num(f, "probes", i->probes);
    num(f, "off_runs", i->off_runs);
    num(f, "busy_runs", i->busy_runs);
    num(f, "building_runs", i->building_runs);
    num(f, "warmup_runs", i->warmup_runs);
    num(f, "eager_calls_ns", i->eager_calls_ns);
    times(f, r);
    kept_reason(f, "reason", i->reason_code, i->reason_op, i->reason);
    cgj_json_key(f, "variants", 0);
    fputc('[', f);
    const cgj_trace_t *t;
    for (uint32_t k = 0; (t = cgj_anchor_variant(r->a, k)); k++) {
        if (k) fputc(',', f);
        variant(f, t);
    }
    fputs("]}", f);
}

static void anchors(FILE *f, const cgj_report_data_t *d)
{
    cgj_json_key(f, "anchors", 0);
    fputc('[', f);
    for (size_t k = 0; k < d->nanchors; k++) {
        if (k) fputc(',', f);
        fputc('\n', f);
        anchor(f, &d->anchors[k]);
    }
    fputs("]", f);
}

void cgj_report_json(FILE *f)
{
    char text[320];
    cgj_report_data_t d;
    cgj_anchors_lock();
    cgj_report_data_gather(&d);
    fputc('{', f);
    cgj_json_key(f, "schema_version", 1);
    fprintf(f, "%d", CGJ_REPORT_SCHEMA_VERSION);
    str(f, "cgjit_version", CGJ_VERSION_STRING);
    num(f, "pid", (uint64_t)getpid());
    str(f, "status", cgj_report_status_name(d.status));
    str(f, "status_text", cgj_report_status_text(d.status, text, sizeof text));
    str(f, "policy", cgj_step_policy_name(__atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED)));
    fputc('\n', f);
    summary(f, &d);
    fputc('\n', f);
    governor(f);
    fputc('\n', f);
    counters(f, &d.stats);
    fputc('\n', f);
    reasons(f);
    anchors(f, &d);
    cgj_anchors_unlock();
    fputs("}\n", f);
    cgj_report_data_free(&d);
}

/* The report into a memory stream (the C library's heap: freed here), then into buf. */
CGJ_API size_t cgj_report_json_buf(char *buf, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (buf && size) buf[0] = '\0';
    if (!f) return 0;
    cgj_report_json(f);
    if (fclose(f) != 0 || !text) {
        free(text);
        return 0;
    }
    if (buf && size) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(buf, text, n);
        buf[n] = '\0';
    }
    free(text);
    return len + 1;
}
