/*
 * bench_models.cu — one row of a model_desc_t workload (the models mlp, cnn, gpt2 and the
 * elementwise ones ew16M, ew10) in one cgjit mode: created afresh with the mode set, its floor
 * captured, warmed up, timed eager / replayed / floor round by round, checked (the floor bitwise,
 * the replay as the mode promises, bench_modes.h), and released. The method is documented at
 * the top of cgjit_bench.cu.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"

static void model_step_eager(model_run_t *r, cudaStream_t s)
{
    char err[256];
    if (r->md->step(r->ctx, MODEL_SET_EAGER, s, err, sizeof err)) {
        fprintf(stderr, "cgjit-bench: %s: eager step: %s\n", r->name, err);
        exit(1);
    }
}

/* One replayed step; returns the host seconds from before begin to before end. */
static double model_step_replay(model_run_t *r, cudaStream_t s)
{
    char err[256];
    double t0 = now_s();
    CGJ_CHECK(cgj_trace_begin(r->name));
    if (r->md->step(r->ctx, MODEL_SET_REPLAY, s, err, sizeof err)) {
        fprintf(stderr, "cgjit-bench: %s: replayed step: %s\n", r->name, err);
        exit(1);
    }
    double t1 = now_s();
    CGJ_CHECK(cgj_trace_end());
    return t1 - t0;
}

/* The floor: one eager step on the floor set, captured on s (the stream the handles are bound
 * to) and instantiated. A failing capture (a library call that cannot be captured) leaves
 * has_floor 0 and the reason in floor_note; the bench goes on without the floor. */
static void model_build_floor(model_run_t *r, cudaStream_t s)
{
    char err[256] = "";
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        snprintf(r->floor_note, sizeof r->floor_note, "cudaStreamBeginCapture: %s", cudaGetErrorName(e));
        (void)cudaGetLastError();
        return;
    }
    int rc = r->md->step(r->ctx, MODEL_SET_FLOOR, s, err, sizeof err);
    e = cudaStreamEndCapture(s, &g);
    if (rc == 0 && e != cudaSuccess) snprintf(err, sizeof err, "cudaStreamEndCapture: %s", cudaGetErrorName(e));
    if (rc == 0 && e == cudaSuccess) {
        e = cudaGraphInstantiate(&r->floor, g, 0);
        if (e != cudaSuccess) snprintf(err, sizeof err, "cudaGraphInstantiate: %s", cudaGetErrorName(e));
    }
    if (g) CHECK(cudaGraphDestroy(g));
    if (err[0]) {
        snprintf(r->floor_note, sizeof r->floor_note, "the stream capture failed: %s", err);
        (void)cudaGetLastError(); /* capture errors are not sticky: the context goes on */
        CHECK(cudaStreamSynchronize(s));
        return;
    }
    CHECK(cudaGraphUpload(r->floor, s));
    r->has_floor = 1;
}

/* Workload md in cgjit mode `mode`, created afresh: the mode is set here, before the row's first
 * traced step, and stays set until the row is done (bench_modes.h). */
void model_setup(model_run_t *r, const model_desc_t *md, int mode, const options_t *o, cudaStream_t s)
{
    memset(r, 0, sizeof *r);
    r->md = md;
    r->mode = mode;
    bench_anchor_name(r->name, sizeof r->name, md->name, mode);
    bench_mode_enter(mode);
    r->ctx = md->create(s, o->reference);
    r->t_eager = (double *)calloc(o->rounds, sizeof(double));
    r->t_replay = (double *)calloc(o->rounds, sizeof(double));
    r->t_floor = (double *)calloc(o->rounds, sizeof(double));
    r->host = (double *)calloc((size_t)o->rounds * o->steps, sizeof(double));
    r->ehost = (double *)calloc((size_t)o->rounds * o->steps, sizeof(double));
    if (!r->t_eager || !r->t_replay || !r->t_floor || !r->host || !r->ehost) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    /* One eager step first: the libraries' lazy initialization (modules, kernel attributes)
     * happens there, not inside the floor's capture. */
    model_step_eager(r, s);
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    model_build_floor(r, s);
    if (!r->has_floor) fprintf(stderr, "cgjit-bench: %s: no floor: %s\n", r->name, r->floor_note);

    /* Warm up eager, replay and floor: cgjit's two eager runs and its graph build. */
    for (int i = 0; i < WARMUP_STEPS; i++) {
        model_step_eager(r, s);
        model_step_replay(r, s);
        if (r->has_floor) CHECK(cudaGraphLaunch(r->floor, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    cgj_trace_info_t info;
    CGJ_CHECK(cgj_trace_info(r->name, &info));
    r->replay_reached = info.state == CGJ_STATE_REPLAY;
    if (!r->replay_reached)
        fprintf(stderr, "cgjit-bench: %s is in state %s after %d warmup steps, not REPLAY (%s)\n", r->name,
                cgj_state_name(info.state), WARMUP_STEPS, info.reason[0] ? info.reason : "no reason given");
}

void model_measure(model_run_t *r, const options_t *o, cudaStream_t s)
{
    cgj_trace_info_t before, after;
    cgj_stats_t st0, st1;
    CGJ_CHECK(cgj_trace_info(r->name, &before));
    CGJ_CHECK(cgj_stats(&st0));
    size_t nehost = 0;
    for (int k = 0; k < o->rounds; k++) {
        CHECK(cudaStreamSynchronize(s));
        double t0 = now_s();
        for (int i = 0; i < o->steps; i++) {
            double t1 = now_s();
            model_step_eager(r, s);
            r->ehost[nehost++] = now_s() - t1;
        }
        CHECK(cudaStreamSynchronize(s));
        r->t_eager[k] = (now_s() - t0) / o->steps;
        CHECK_LAST();

        t0 = now_s();
        for (int i = 0; i < o->steps; i++) r->host[r->nhost++] = model_step_replay(r, s);
        CHECK(cudaStreamSynchronize(s));
        r->t_replay[k] = (now_s() - t0) / o->steps;
        CHECK_LAST();

        if (r->has_floor) {
            t0 = now_s();
            for (int i = 0; i < o->steps; i++) CHECK(cudaGraphLaunch(r->floor, s));
            CHECK(cudaStreamSynchronize(s));
            r->t_floor[k] = (now_s() - t0) / o->steps;
            CHECK_LAST();
        }
    }
    CGJ_CHECK(cgj_trace_info(r->name, &after));
    CGJ_CHECK(cgj_stats(&st1));
    r->timed_replays = after.replays - before.replays;
    r->lib_absorbed = r->timed_replays ? (double)(st1.lib_absorbed - st0.lib_absorbed) / (double)r->timed_replays : 0.0;
    r->eager_ns_call = median(r->ehost, nehost) * 1e9 / r->md->calls;
    r->ops = after.ops;
    r->eager_us = median(r->t_eager, o->rounds) * 1e6;
    r->replay_us = median(r->t_replay, o->rounds) * 1e6;
    r->floor_us = r->has_floor ? median(r->t_floor, o->rounds) * 1e6 : 0.0;
    double host_s = median(r->host, r->nhost);
    r->host_ns_op = r->ops ? host_s * 1e9 / r->ops : 0.0;
    r->host_ns_call = host_s * 1e9 / r->md->calls;
    if (r->timed_replays < (uint64_t)o->rounds * o->steps)
        fprintf(stderr, "cgjit-bench: %s: only %llu of %d timed steps were replayed (%s)\n", r->name,
                (unsigned long long)r->timed_replays, o->rounds * o->steps,
                after.reason[0] ? after.reason : "no reason given");
}

/* The set's output, copied to the host. */
static float *model_output_host(model_run_t *r, int set, size_t *count)
{
    const float *d;
    r->md->output(r->ctx, set, &d, count);
    float *h = (float *)bench_host_alloc(*count * sizeof(float));
    CHECK(cudaMemcpy(h, d, *count * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static void report_first_difference(const char *name, const char *what, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            fprintf(stderr, "cgjit-bench: %s: eager and %s outputs differ first at [%zu]: eager %.9g, %s %.9g\n", name,
                    what, i, a[i], what, b[i]);
            return;
        }
}

/* Every set's activations poisoned (all bytes 0xff: NaN), then K steps of each way of running into
 * its own set; the floor's output must be bitwise equal to the eager one, the replayed one as the
 * cgjit mode promises (bench_modes.h). */
void model_check(model_run_t *r, const options_t *o, cudaStream_t s)
{
    CHECK(cudaStreamSynchronize(s));
    for (int set = 0; set < MODEL_SETS; set++) {
        void *base;
        size_t bytes;
        r->md->arena(r->ctx, set, &base, &bytes);
        CHECK(cudaMemset(base, 0xff, bytes));
    }
    CHECK(cudaDeviceSynchronize());
    cgj_trace_info_t before;
    CGJ_CHECK(cgj_trace_info(r->name, &before));
    for (int i = 0; i < CHECK_STEPS; i++) model_step_eager(r, s);
    for (int i = 0; i < CHECK_STEPS; i++) model_step_replay(r, s);
    if (r->has_floor)
        for (int i = 0; i < CHECK_STEPS; i++) CHECK(cudaGraphLaunch(r->floor, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    CGJ_CHECK(cgj_trace_info(r->name, &r->info));
    r->replays_checked = r->info.replays - before.replays;

    size_t n;
    float *he = model_output_host(r, MODEL_SET_EAGER, &n);
    float *hr = model_output_host(r, MODEL_SET_REPLAY, &n);
    bench_compare(he, hr, n, r->info.fused_gemms ? BENCH_GEMM_REL_TOL : 0, &r->cmp);
    r->equal = bench_cmp_ok(&r->cmp, r->mode, r->info.fused_chains);
    if (!r->equal) bench_cmp_complain(r->name, "replay", r->mode, r->info.fused_chains, &r->cmp, he, hr);
    if (r->has_floor) {
        float *hf = model_output_host(r, MODEL_SET_FLOOR, &n);
        r->floor_equal = memcmp(he, hf, n * sizeof(float)) == 0;
        if (!r->floor_equal) report_first_difference(r->name, "floor", he, hf, n);
        free(hf);
    }
    r->finite = 1;
    for (size_t i = 0; i < n && r->finite; i++)
        if (!isfinite(he[i])) {
            r->finite = 0;
            fprintf(stderr, "cgjit-bench: %s: the eager output is not finite at [%zu]: %g\n", r->name, i, he[i]);
        }
    if (r->replays_checked < CHECK_STEPS)
        fprintf(stderr, "cgjit-bench: %s: only %llu of %d checked steps were replayed (%s)\n", r->name,
                (unsigned long long)r->replays_checked, CHECK_STEPS,
                r->info.reason[0] ? r->info.reason : "no reason given");
    if (o->reference) {
        double *ref = (double *)bench_host_alloc(n * sizeof(double));
        r->md->reference(r->ctx, ref);
        double err = 0.0, scale = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)he[i] - ref[i]);
            err = d > err || d != d ? d : err; /* NaN wins */
            scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
        }
        r->ref_done = 1;
        r->ref_err = scale > 0.0 ? err / scale : err;
        r->ref_ok = r->ref_err <= REF_TOL;
        if (!r->ref_ok)
            fprintf(stderr,
                    "cgjit-bench: %s: the eager output is %.3g (relative to its largest value) away "
                    "from the host reference, more than %g\n",
                    r->name, r->ref_err, REF_TOL);
        free(ref);
    }
    free(he);
    free(hr);
}

const char *model_verdict(const model_run_t *r)
{
    if (!r->equal) return "FAIL(mismatch)";
    if (!r->replay_reached || r->replays_checked == 0) return "FAIL(no replay)";
    if (r->has_floor && !r->floor_equal) return "FAIL(floor mismatch)";
    if (!r->finite) return "FAIL(non-finite)";
    if (r->ref_done && !r->ref_ok) return "FAIL(reference)";
    return "PASS";
}

void model_release(model_run_t *r)
{
    if (r->has_floor) CHECK(cudaGraphExecDestroy(r->floor));
    CHECK(cudaDeviceSynchronize());
    r->md->destroy(r->ctx);
    r->ctx = NULL;
    free(r->t_eager);
    free(r->t_replay);
    free(r->t_floor);
    free(r->host);
    free(r->ehost);
}

void busy_step_model(void *arg, cudaStream_t s)
{
    model_step_replay((model_run_t *)arg, s);
}
