/*
 * bench_output.cu — cgjit-bench's tables (stdout) and JSON file (--json), from the rows of one run
 * (bench_run.h); the formats are documented at the top of cgjit_bench.cu.
 *
 * Every table has one row per workload (and N) and cgjit mode, the modes of one workload side by
 * side, with the columns `mode` (second), `fused` (chains cgjit fused into generated kernels / the
 * kernels and library calls they hold, "-" in reduce-overhead) and `vs_eager` ("bitwise", or
 * "tol X": the share of the tolerance the worst element used) before `check`. Every JSON result
 * row has the same figures under "mode", "anchor", "bitwise", "tolerance_used", "fused_chains",
 * "fused_ops", "fuse_drops", "fuse_reason", "fuse_ms", "fuse_compile_ms" and "fuse_cold",
 * besides the keys it always had.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_run.h"
#include "busy.h"

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

/* v formatted with fmt into buf, or "n/a". */
static const char *cell(char *buf, size_t cap, int has, double v, const char *fmt)
{
    if (has) snprintf(buf, cap, fmt, v);
    else snprintf(buf, cap, "n/a");
    return buf;
}

/* "null" or v with fmt. */
static void json_num(FILE *f, int has, double v, const char *fmt)
{
    if (has && isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* The GPU-busy cells of a row (busy_us, replay/busy), when the table has them. */
static void print_busy_cells(const bench_results_t *res, double replay_us, double busy_us)
{
    char a[32], b[32];
    if (res->busy_shown)
        printf(" %11s %12s", cell(a, sizeof a, busy_us >= 0, busy_us, "%.2f"),
               cell(b, sizeof b, busy_us > 0, ratio(replay_us, busy_us), "%.2f"));
}

static void print_busy_heads(const bench_results_t *res)
{
    if (res->busy_shown) printf(" %11s %12s", "busy_us", "replay/busy");
}

/* A result row's GPU-busy keys: the figure and replay over it, null where n/a. */
static void json_busy(FILE *f, double replay_us, double busy_us)
{
    fprintf(f, ", \"gpu_busy_us\": ");
    json_num(f, busy_us >= 0, busy_us, "%.3f");
    fprintf(f, ", \"replay_over_gpu_busy\": ");
    json_num(f, busy_us > 0, ratio(replay_us, busy_us), "%.4f");
}

/* The mode's cells of a row, before `check`: fused, vs_eager. */
static void print_mode_cells(int mode, const cgj_trace_info_t *info, const bench_cmp_t *cmp)
{
    char a[32], b[32];
    printf(" %9s %11s", bench_fused_cell(a, sizeof a, mode, info), bench_cmp_cell(b, sizeof b, cmp));
}

static void print_mode_heads(void)
{
    printf(" %9s %11s", "fused", "vs_eager");
}

/* A result row's mode keys. */
static void json_mode(FILE *f, int mode, const char *anchor, const bench_cmp_t *cmp, const cgj_trace_info_t *info)
{
    fprintf(f, ", \"mode\": \"%s\", \"anchor\": ", bench_mode_names[mode]);
    json_string(f, anchor);
    fprintf(f, ", \"bitwise\": %s, \"tolerance_used\": ", cmp->bitwise ? "true" : "false");
    json_num(f, 1, cmp->bitwise ? 0.0 : cmp->used, "%.4g");
    fprintf(f, ", \"fused_chains\": %u, \"fused_ops\": %u, \"fuse_drops\": %u, \"fuse_reason\": ", info->fused_chains,
            info->fused_ops, info->fuse_drops);
    if (info->fuse_reason_code) json_string(f, cgj_reason_name(info->fuse_reason_code));
    else fputs("null", f);
    fprintf(f, ", \"fuse_ms\": %.3f, \"fuse_compile_ms\": %.3f, \"fuse_cold\": %u", (double)info->fuse_ns / 1e6,
            (double)info->fuse_compile_ns / 1e6, info->fuse_cold);
}

/* ---- chain and temps ------------------------------------------------------------------------ */

/* The columns the chain and temps tables share: N, mode, the times and their ratios, GPU busy. */
static void print_size_heads(const bench_results_t *res)
{
    printf("%7s %15s %11s %11s %11s %13s %13s", "N", "mode", "eager_us", "replay_us", "floor_us", "eager/replay",
           "replay/floor");
    print_busy_heads(res);
}

static void print_size_cells(const bench_results_t *res, const size_run_t *r)
{
    printf("%7d %15s %11.2f %11.2f %11.2f %13.2f %13.2f", r->n, bench_mode_names[r->mode], r->eager_us, r->replay_us,
           r->floor_us, ratio(r->eager_us, r->replay_us), ratio(r->replay_us, r->floor_us));
    print_busy_cells(res, r->replay_us, r->busy_us);
}

void print_chain_table(const bench_results_t *res, const options_t *o)
{
    printf("workload chain: x = a*x + b over %d floats, N dependent kernels per step; "
           "median of %d rounds x %d steps\n",
           NFLOAT, o->rounds, o->steps);
    print_size_heads(res);
    printf(" %15s %14s", "host_ns/launch", "drv_ns/launch");
    print_mode_heads();
    printf("  %s\n", "check");
    for (int i = 0; i < res->nruns[WL_CHAIN]; i++) {
        const size_run_t *r = &res->runs[WL_CHAIN][i];
        print_size_cells(res, r);
        char drv[32];
        printf(" %15.1f %14s", r->host_ns, cell(drv, sizeof drv, r->host_drv_ns >= 0, r->host_drv_ns, "%.1f"));
        print_mode_cells(r->mode, &r->info, &r->cmp);
        printf("  %s\n", verdict(r));
    }
    for (int i = 0; i < res->nruns[WL_CHAIN]; i++)
        bench_fuse_note(res->runs[WL_CHAIN][i].name, &res->runs[WL_CHAIN][i].info);
    fflush(stdout);
}

void print_temps_table(const bench_results_t *res, const options_t *o)
{
    printf("workload temps: N layers over %d floats per step, layer k: cudaMalloc %d + 1024*(k%%4) "
           "floats, 2 kernels, cudaFree layer k-2's; median of %d rounds x %d steps\n",
           NFLOAT, NFLOAT, o->rounds, o->steps);
    print_size_heads(res);
    printf(" %13s %7s %11s %11s %11s %13s", "host_ns/call", "allocs", "pool_bytes", "naive_bytes", "lower_bound",
           "planned/lower");
    print_mode_heads();
    printf("  %s\n", "check");
    for (int i = 0; i < res->nruns[WL_TEMPS]; i++) {
        const size_run_t *r = &res->runs[WL_TEMPS][i];
        print_size_cells(res, r);
        printf(" %13.1f %7u %11llu %11llu %11llu %13.3f", r->host_ns, r->info.allocations,
               (unsigned long long)r->info.pool_bytes, (unsigned long long)r->info.naive_bytes,
               (unsigned long long)r->info.lower_bound, ratio((double)r->info.pool_bytes, (double)r->info.lower_bound));
        print_mode_cells(r->mode, &r->info, &r->cmp);
        printf("  %s\n", verdict(r));
    }
    for (int i = 0; i < res->nruns[WL_TEMPS]; i++)
        bench_fuse_note(res->runs[WL_TEMPS][i].name, &res->runs[WL_TEMPS][i].info);
    fflush(stdout);
}

/* ---- the models and the elementwise workloads --------------------------------------------- */

/* The torch figures of workload m (an MD_* index): which file's, and its index there. */
static const torch_compare_t *torch_of(const bench_results_t *res, const options_t *o, int m, int *idx)
{
    *idx = m < MD_MODELS ? m : m - MD_MODELS;
    return o->compare ? (m < MD_MODELS ? &res->tc : &res->tc_ew) : NULL;
}

/* The torch column c of workload m, if the compare file has it. */
static int torch_has(const torch_compare_t *tc, int idx, int c)
{
    return tc && tc->loaded && tc->has[idx][c];
}

/* replay over torch column c, where the file has it. */
static int torch_ratio(const torch_compare_t *tc, int idx, int c, double replay_us, double *v)
{
    int has = torch_has(tc, idx, c) && tc->us[idx][c] > 0;
    *v = has ? replay_us / tc->us[idx][c] : 0.0;
    return has;
}

static void print_torch_heads(int with_compile_ratio)
{
    printf(" %15s %17s %25s %23s", "torch_eager_us", "torch_compile_us", "torch_reduce_overhead_us",
           "replay/reduce_overhead");
    if (with_compile_ratio) printf(" %15s", "replay/compile");
}

static void print_torch_cells(const torch_compare_t *tc, int idx, double replay_us, int with_compile_ratio)
{
    char b[5][32];
    double ro, co;
    int has_ro = torch_ratio(tc, idx, TORCH_REDUCE_OVERHEAD, replay_us, &ro);
    int has_co = torch_ratio(tc, idx, TORCH_COMPILE, replay_us, &co);
    printf(
        " %15s %17s %25s %23s",
        cell(b[0], sizeof b[0], torch_has(tc, idx, TORCH_EAGER), tc->us[idx][TORCH_EAGER], "%.2f"),
        cell(b[1], sizeof b[1], torch_has(tc, idx, TORCH_COMPILE), tc->us[idx][TORCH_COMPILE], "%.2f"),
        cell(b[2], sizeof b[2], torch_has(tc, idx, TORCH_REDUCE_OVERHEAD), tc->us[idx][TORCH_REDUCE_OVERHEAD], "%.2f"),
        cell(b[3], sizeof b[3], has_ro, ro, "%.2f"));
    if (with_compile_ratio) printf(" %15s", cell(b[4], sizeof b[4], has_co, co, "%.2f"));
}

/* The notes under a table with torch columns: where they come from, what is missing. */
static void print_torch_notes(const torch_compare_t *tc, const options_t *o, const char *gpu)
{
    if (!tc->loaded) printf("note: torch columns n/a: %s\n", tc->note);
    else {
        printf("note: torch columns from %s (torch %s, GPU %s)\n", o->compare, tc->torch[0] ? tc->torch : "?",
               tc->gpu[0] ? tc->gpu : "?");
        if (tc->note[0]) printf("note: torch columns n/a where missing: %s\n", tc->note);
        if (tc->file_note[0]) printf("note: %s says: %s\n", o->compare, tc->file_note);
        if (tc->gpu[0] && strcmp(tc->gpu, gpu) != 0)
            printf("note: the torch times were measured on %s, this run is on %s\n", tc->gpu, gpu);
    }
}

/* The notes under the rows of workloads [lo, hi): floors n/a, references, fusions left out. */
static void print_row_notes(const bench_results_t *res, const options_t *o, int lo, int hi)
{
    for (int m = lo; m < hi; m++)
        for (int k = 0; k < res->nmruns[m]; k++)
            if (!res->mruns[m][k].has_floor)
                printf("note: %s floor n/a: %s\n", res->mruns[m][k].name, res->mruns[m][k].floor_note);
    for (int m = lo; m < hi; m++)
        for (int k = 0; k < res->nmruns[m]; k++) bench_fuse_note(res->mruns[m][k].name, &res->mruns[m][k].info);
    if (o->reference)
        for (int m = lo; m < hi; m++)
            for (int k = 0; k < res->nmruns[m]; k++) {
                const model_run_t *r = &res->mruns[m][k];
                printf("reference %s: max |eager - host double| / max |host| = %.3g (tolerance %g): %s\n", r->name,
                       r->ref_err, REF_TOL, r->ref_ok ? "ok" : "FAIL");
            }
}

/* The "workload NAME: summary" lines of the workloads [lo, hi) asked for; whether any ran. */
static int print_summaries(const bench_results_t *res, const options_t *o, int lo, int hi)
{
    int any = 0;
    for (int m = lo; m < hi; m++) {
        if (!o->run_model[m]) continue;
        if (model_of(m)) printf("workload %s: %s\n", MD_NAMES[m], model_of(m)->summary);
        else
            printf("workload %s: not built: cuDNN (cudnn.h, libcudnn) was not found when cgjit-bench was "
                   "built, and mlp and cnn need it\n",
                   MD_NAMES[m]);
        any |= res->nmruns[m] > 0;
    }
    return any;
}

void print_models_table(const bench_results_t *res, const options_t *o, const char *gpu)
{
    if (!print_summaries(res, o, 0, MD_MODELS)) {
        fflush(stdout);
        return;
    }
    printf("models: fp32 without TF32, one non-blocking stream; median of %d rounds x %d steps; ops: driver "
           "calls in the replayed trace (cgj_trace_info), host_ns/op: replay host time from before "
           "cgj_trace_begin to before cgj_trace_end / ops; calls: library calls and kernel launches per "
           "step, host_ns/call: the same host time / calls; eager_ns/call: the host time of issuing an "
           "eager step / calls; saved_ns/call: their difference; lib/step: library calls replay absorbed "
           "whole per step\n",
           o->rounds, o->steps);
    printf("%8s %15s %11s %11s %11s %13s %13s", "workload", "mode", "eager_us", "replay_us", "floor_us", "eager/replay",
           "replay/floor");
    print_busy_heads(res);
    printf(" %11s %6s %13s %6s %14s %14s %9s", "host_ns/op", "ops", "host_ns/call", "calls", "eager_ns/call",
           "saved_ns/call", "lib/step");
    if (o->compare) print_torch_heads(0);
    print_mode_heads();
    printf("  %s\n", "check");
    char b[3][32];
    for (int m = 0; m < MD_MODELS; m++)
        for (int k = 0; k < res->nmruns[m]; k++) {
            const model_run_t *r = &res->mruns[m][k];
            printf("%8s %15s %11.2f %11.2f %11s %13.2f %13s", MD_NAMES[m], bench_mode_names[r->mode], r->eager_us,
                   r->replay_us, cell(b[0], sizeof b[0], r->has_floor, r->floor_us, "%.2f"),
                   ratio(r->eager_us, r->replay_us),
                   cell(b[1], sizeof b[1], r->has_floor, ratio(r->replay_us, r->floor_us), "%.2f"));
            print_busy_cells(res, r->replay_us, r->busy_us);
            printf(" %11s %6u %13.1f %6d %14.1f %14.1f %9.1f",
                   cell(b[2], sizeof b[2], r->ops > 0, r->host_ns_op, "%.1f"), r->ops, r->host_ns_call, r->md->calls,
                   r->eager_ns_call, r->eager_ns_call - r->host_ns_call, r->lib_absorbed);
            if (o->compare) print_torch_cells(&res->tc, m, r->replay_us, 0);
            print_mode_cells(r->mode, &r->info, &r->cmp);
            printf("  %s\n", model_verdict(r));
        }
    print_row_notes(res, o, 0, MD_MODELS);
    if (o->compare) print_torch_notes(&res->tc, o, gpu);
    fflush(stdout);
}

void print_elementwise_table(const bench_results_t *res, const options_t *o, const char *gpu)
{
    if (!print_summaries(res, o, MD_MODELS, MD_COUNT)) {
        fflush(stdout);
        return;
    }
    printf(
        "elementwise: every kernel registered with cgj_op_register_elementwise, temporaries allocated and "
        "freed inside the step (cudaMallocAsync/cudaFreeAsync; the floor's are preallocated); median of %d "
        "rounds x %d steps; calls: kernel launches, allocations and frees per step, host_ns/call: replay host "
        "time from before cgj_trace_begin to before cgj_trace_end / calls; fused: chains fused into "
        "generated kernels / the kernels they hold; vs_eager: bitwise, or the share of the tolerance (%g + %g |eager|) the worst "
        "element used\n",
        o->rounds, o->steps, BENCH_ABS_TOL, BENCH_REL_TOL);
    printf("%8s %15s %11s %11s %11s %13s %13s", "workload", "mode", "eager_us", "replay_us", "floor_us", "eager/replay",
           "replay/floor");
    print_busy_heads(res);
    printf(" %13s %6s", "host_ns/call", "calls");
    if (o->compare) print_torch_heads(1);
    print_mode_heads();
    printf("  %s\n", "check");
    char b[2][32];
    for (int m = MD_MODELS; m < MD_COUNT; m++)
        for (int k = 0; k < res->nmruns[m]; k++) {
            const model_run_t *r = &res->mruns[m][k];
            printf("%8s %15s %11.2f %11.2f %11s %13.2f %13s", MD_NAMES[m], bench_mode_names[r->mode], r->eager_us,
                   r->replay_us, cell(b[0], sizeof b[0], r->has_floor, r->floor_us, "%.2f"),
                   ratio(r->eager_us, r->replay_us),
                   cell(b[1], sizeof b[1], r->has_floor, ratio(r->replay_us, r->floor_us), "%.2f"));
            print_busy_cells(res, r->replay_us, r->busy_us);
            printf(" %13.1f %6d", r->host_ns_call, r->md->calls);
            if (o->compare) print_torch_cells(&res->tc_ew, m - MD_MODELS, r->replay_us, 1);
            print_mode_cells(r->mode, &r->info, &r->cmp);
            printf("  %s\n", model_verdict(r));
        }
    print_row_notes(res, o, MD_MODELS, MD_COUNT);
    if (o->compare) print_torch_notes(&res->tc_ew, o, gpu);
    fflush(stdout);
}

void print_fusion_summary(const bench_results_t *res, const options_t *o)
{
    int fusing = 0;
    for (int k = 0; k < o->nmodes; k++) fusing |= bench_mode_fuses(o->modes[k]);
    if (fusing)
        printf("fusion: %llu elementwise chains fused into generated kernels, holding %llu kernels and library "
               "calls; %llu "
               "chains or registered kernels left unfused (cgj_stats, whole run)\n",
               (unsigned long long)res->stats.fusions, (unsigned long long)res->stats.ops_fused,
               (unsigned long long)res->stats.fusions_dropped);
}

/* One result row of a model or an elementwise workload, as a JSON object. */
static void json_model_row(FILE *f, const bench_results_t *res, const options_t *o, int m, const model_run_t *r)
{
    int idx;
    const torch_compare_t *tc = torch_of(res, o, m, &idx);
    double ro, co;
    int has_ro = torch_ratio(tc, idx, TORCH_REDUCE_OVERHEAD, r->replay_us, &ro);
    int has_co = torch_ratio(tc, idx, TORCH_COMPILE, r->replay_us, &co);
    fprintf(f, "{\"workload\": \"%s\", \"eager_us\": %.3f, \"replay_us\": %.3f, \"floor_us\": ", MD_NAMES[m],
            r->eager_us, r->replay_us);
    json_num(f, r->has_floor, r->floor_us, "%.3f");
    fprintf(f, ", \"eager_over_replay\": %.4f, \"replay_over_floor\": ", ratio(r->eager_us, r->replay_us));
    json_num(f, r->has_floor, ratio(r->replay_us, r->floor_us), "%.4f");
    fprintf(f, ", \"host_ns_per_op\": ");
    json_num(f, r->ops > 0, r->host_ns_op, "%.2f");
    fprintf(f,
            ", \"ops\": %u, \"host_ns_per_call\": %.2f, \"eager_host_ns_per_call\": %.2f, "
            "\"saved_host_ns_per_call\": %.2f, \"lib_absorbed_per_step\": %.2f, \"calls\": %d, \"kernels\": %u, "
            "\"segments\": %u, \"varying_slots\": %u, \"state\": \"%s\", \"timed_replays\": %llu, "
            "\"replays_checked\": %llu, \"check\": \"%s\", \"floor\": ",
            r->ops, r->host_ns_call, r->eager_ns_call, r->eager_ns_call - r->host_ns_call, r->lib_absorbed,
            r->md->calls, r->info.kernels, r->info.segments, r->info.varying_slots, cgj_state_name(r->info.state),
            (unsigned long long)r->timed_replays, (unsigned long long)r->replays_checked, model_verdict(r));
    if (r->has_floor) fprintf(f, "\"captured\", \"floor_check\": \"%s\"", r->floor_equal ? "equal" : "differs");
    else {
        char note[400];
        snprintf(note, sizeof note, "n/a: %s", r->floor_note);
        json_string(f, note);
        fprintf(f, ", \"floor_check\": null");
    }
    fprintf(f, ", \"reference_rel_err\": ");
    json_num(f, r->ref_done, r->ref_err, "%.3e");
    fprintf(f, ", \"torch_eager_us\": ");
    json_num(f, torch_has(tc, idx, TORCH_EAGER), tc ? tc->us[idx][TORCH_EAGER] : 0.0, "%.3f");
    fprintf(f, ", \"torch_compile_us\": ");
    json_num(f, torch_has(tc, idx, TORCH_COMPILE), tc ? tc->us[idx][TORCH_COMPILE] : 0.0, "%.3f");
    fprintf(f, ", \"torch_reduce_overhead_us\": ");
    json_num(f, torch_has(tc, idx, TORCH_REDUCE_OVERHEAD), tc ? tc->us[idx][TORCH_REDUCE_OVERHEAD] : 0.0, "%.3f");
    fprintf(f, ", \"replay_over_reduce_overhead\": ");
    json_num(f, has_ro, ro, "%.4f");
    fprintf(f, ", \"replay_over_compile\": ");
    json_num(f, has_co, co, "%.4f");
    json_busy(f, r->replay_us, r->busy_us);
    json_mode(f, r->mode, r->name, &r->cmp, &r->info);
    fprintf(f, "}");
}

/* The rows of workload m, one per mode, as the items of a "results" array. */
static void json_model_rows(FILE *f, const bench_results_t *res, const options_t *o, int m, const char *indent)
{
    for (int k = 0; k < res->nmruns[m]; k++) {
        fprintf(f, "%s\n%s", k ? "," : "", indent);
        json_model_row(f, res, o, m, &res->mruns[m][k]);
    }
}

static void json_models(FILE *f, const bench_results_t *res, const options_t *o)
{
    for (int m = 0; m < MD_MODELS; m++) {
        const model_desc_t *md = model_of(m);
        fprintf(f, "  \"%s\": {\n    \"workload\": \"%s\",\n    \"built\": %s,\n    \"description\": ", MD_NAMES[m],
                MD_NAMES[m], md ? "true" : "false");
        if (md) json_string(f, md->summary);
        else json_string(f, "not built: cuDNN was not found when cgjit-bench was built");
        fprintf(f, ",\n    \"results\": [");
        json_model_rows(f, res, o, m, "      ");
        fprintf(f, "%s]\n  },\n", res->nmruns[m] ? "\n    " : "");
    }
    fprintf(f, "  \"elementwise\": {\n    \"workload\": \"elementwise\",\n    \"description\": {");
    for (int m = MD_MODELS; m < MD_COUNT; m++) {
        fprintf(f, "%s\"%s\": ", m > MD_MODELS ? ", " : "", MD_NAMES[m]);
        json_string(f, model_of(m)->summary);
    }
    fprintf(f, "},\n    \"results\": [");
    int any = 0;
    for (int m = MD_MODELS; m < MD_COUNT; m++) {
        if (!res->nmruns[m]) continue;
        if (any) fputc(',', f);
        json_model_rows(f, res, o, m, "      ");
        any = 1;
    }
    fprintf(f, "%s]\n  },\n", any ? "\n    " : "");
}

/* "torch_compare": the file, whether it was read, its strings, and why columns are n/a. */
static void json_torch_summary(FILE *f, const bench_results_t *res, const options_t *o)
{
    const torch_compare_t *tc = &res->tc;
    fprintf(f, "  \"torch_compare\": {\"file\": ");
    if (o->compare) json_string(f, o->compare);
    else fputs("null", f);
    fprintf(f, ", \"loaded\": %s, \"torch\": ", o->compare && tc->loaded ? "true" : "false");
    if (o->compare && tc->loaded && tc->torch[0]) json_string(f, tc->torch);
    else fputs("null", f);
    fprintf(f, ", \"gpu\": ");
    if (o->compare && tc->loaded && tc->gpu[0]) json_string(f, tc->gpu);
    else fputs("null", f);
    fprintf(f, ", \"note\": ");
    if (!o->compare) json_string(f, "no --compare FILE given");
    else if (tc->note[0]) json_string(f, tc->note);
    else fputs("null", f);
    fprintf(f, ", \"elementwise_note\": ");
    if (o->compare && res->tc_ew.note[0]) json_string(f, res->tc_ew.note);
    else fputs("null", f);
    fprintf(f, "},\n");
}

/* "gpu_busy": how the busy figures were measured, and why there are none where CUPTI failed. */
static void json_busy_summary(FILE *f)
{
    const char *why;
    int ok = bench_busy_available(&why);
    fprintf(f, "  \"gpu_busy\": {\"method\": ");
    json_string(f, "CUPTI activity records (kernels, copies, memsets), union of their intervals, per replayed "
                   "step, in runs apart from the timed ones");
    fprintf(f, ", \"available\": %s, \"note\": ", ok ? "true" : "false");
    if (ok) fputs("null", f);
    else json_string(f, why);
    fprintf(f, "},\n");
}

static void json_chain_rows(FILE *f, const bench_results_t *res)
{
    int n = res->nruns[WL_CHAIN];
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &res->runs[WL_CHAIN][i];
        fprintf(f,
                "    {\"n\": %d, \"eager_us\": %.3f, \"replay_us\": %.3f, \"floor_us\": %.3f, "
                "\"eager_over_replay\": %.4f, \"replay_over_floor\": %.4f, \"host_ns_per_launch\": %.2f, "
                "\"host_ns_per_launch_driver\": ",
                r->n, r->eager_us, r->replay_us, r->floor_us, ratio(r->eager_us, r->replay_us),
                ratio(r->replay_us, r->floor_us), r->host_ns);
        json_num(f, r->host_drv_ns >= 0, r->host_drv_ns, "%.2f");
        fprintf(f, ", \"state\": \"%s\", \"replays_checked\": %llu, \"check\": \"%s\"", cgj_state_name(r->info.state),
                (unsigned long long)r->replays_checked, verdict(r));
        json_busy(f, r->replay_us, r->busy_us);
        json_mode(f, r->mode, r->name, &r->cmp, &r->info);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
}

static void json_temps_rows(FILE *f, const bench_results_t *res)
{
    int n = res->nruns[WL_TEMPS];
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &res->runs[WL_TEMPS][i];
        fprintf(f,
                "      {\"n\": %d, \"eager_us\": %.3f, \"replay_us\": %.3f, \"floor_us\": %.3f, "
                "\"eager_over_replay\": %.4f, \"replay_over_floor\": %.4f, \"host_ns_per_call\": %.2f, "
                "\"state\": \"%s\", \"replays_checked\": %llu, \"check\": \"%s\", \"ops\": %u, "
                "\"allocations\": %u, \"pool_bytes\": %llu, \"naive_bytes\": %llu, "
                "\"lower_bound\": %llu, \"planned_over_lower\": %.4f, \"pool_allocs_checked\": %llu, "
                "\"pool_frees_checked\": %llu",
                r->n, r->eager_us, r->replay_us, r->floor_us, ratio(r->eager_us, r->replay_us),
                ratio(r->replay_us, r->floor_us), r->host_ns, cgj_state_name(r->info.state),
                (unsigned long long)r->replays_checked, verdict(r), r->info.ops, r->info.allocations,
                (unsigned long long)r->info.pool_bytes, (unsigned long long)r->info.naive_bytes,
                (unsigned long long)r->info.lower_bound, ratio((double)r->info.pool_bytes, (double)r->info.lower_bound),
                (unsigned long long)r->pool_allocs_checked, (unsigned long long)r->pool_frees_checked);
        json_busy(f, r->replay_us, r->busy_us);
        json_mode(f, r->mode, r->name, &r->cmp, &r->info);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
}

int write_json(const char *path, const cudaDeviceProp *prop, int driver, int runtime, const bench_results_t *res,
               const options_t *o, int pass)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cgjit-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"gpu\": ");
    json_string(f, prop->name);
    fprintf(f,
            ",\n  \"compute_capability\": \"%d.%d\",\n  \"driver_version\": %d,\n"
            "  \"runtime_version\": %d,\n  \"workload\": \"chain\",\n  \"floats\": %d,\n"
            "  \"rounds\": %d,\n  \"steps\": %d,\n  \"check_steps\": %d,\n  \"modes\": [",
            prop->major, prop->minor, driver, runtime, NFLOAT, o->rounds, o->steps, CHECK_STEPS);
    for (int k = 0; k < o->nmodes; k++) fprintf(f, "%s\"%s\"", k ? ", " : "", bench_mode_names[o->modes[k]]);
    fprintf(f, "],\n  \"tolerance\": {\"rel\": %g, \"abs\": %g},\n  \"results\": [\n", BENCH_REL_TOL, BENCH_ABS_TOL);
    json_chain_rows(f, res);
    fprintf(f, "  ],\n  \"workloads_run\": [");
    int first = 1;
    for (int w = 0; w < WL_COUNT; w++)
        if (o->run[w]) {
            fprintf(f, "%s\"%s\"", first ? "" : ", ", WL_NAMES[w]);
            first = 0;
        }
    for (int m = 0; m < MD_MODELS; m++)
        if (res->nmruns[m]) {
            fprintf(f, "%s\"%s\"", first ? "" : ", ", MD_NAMES[m]);
            first = 0;
        }
    int ew = 0;
    for (int m = MD_MODELS; m < MD_COUNT; m++) ew |= res->nmruns[m] > 0;
    if (ew) fprintf(f, "%s\"elementwise\"", first ? "" : ", ");
    fprintf(f,
            "],\n  \"temps\": {\n    \"workload\": \"temps\",\n    \"floats\": %d,\n"
            "    \"temp_floats\": \"%d + 1024*(k%%4)\",\n    \"results\": [\n",
            NFLOAT, NFLOAT);
    json_temps_rows(f, res);
    fprintf(f, "    ]\n  },\n");
    json_models(f, res, o);
    json_torch_summary(f, res, o);
    json_busy_summary(f);
    fprintf(f,
            "  \"fusion\": {\"fusions\": %llu, \"ops_fused\": %llu, \"fusions_dropped\": %llu, "
            "\"registrations_refused\": %d},\n",
            (unsigned long long)res->stats.fusions, (unsigned long long)res->stats.ops_fused,
            (unsigned long long)res->stats.fusions_dropped, res->registrations_refused);
    fprintf(f, "  \"pass\": %s\n}\n", pass ? "true" : "false");
    if (fclose(f) != 0) {
        fprintf(stderr, "cgjit-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
