/*
 * cgjit_bench.cu — the harness that runs each workload eager, replayed by cgjit, and as a
 * hand-built CUDA graph, in one process, and reports per-step times.
 *
 * Workload `chain` (--workload chain|all; sizes default 10,100,1000): N small dependent kernels
 * per step, x[i] = a*x[i] + b over 4096 floats. Each kernel costs the GPU about as much as its
 * launch costs the host, so the step time is launch overhead: exactly what replaying a step as
 * one graph is meant to remove.
 *
 * Workload `temps` (--workload temps|all; sizes default 10,100): a naive program's step with
 * temporaries, N "layers" over the same 4096 floats x. Layer k (0..N-1): cudaMalloc a
 * temporary t_k of 4096 + 1024*(k%4) floats; a kernel writes all of t_k from x
 * (t[i] = 0.5*x[i % 4096] + c_k); a kernel updates x from t_k (x = 0.999*x + 0.001*t); cudaFree
 * the temporary of layer k-2 (so three temporaries are live when t_k is allocated, two after
 * the free). After the loop the last two are freed. cudaMalloc/cudaFree are the synchronous
 * ones, as a naive program uses them: eager, every cudaFree waits for the device. In replay,
 * cgjit serves them from its planned pool (no driver call, no synchronization).
 *
 * Modes, all on one created non-blocking stream:
 *  - eager:  the step's calls, plain.
 *  - replay: the same calls between cgj_trace_begin("chain<N>" / "temps<N>") and
 *            cgj_trace_end().
 *  - floor:  a CUDA graph of the same kernels, captured by hand: what replay can at best reach.
 *            For temps, the kernels run on three preallocated temporaries of the largest size
 *            (layer k uses buffer k%3, the same rotation of live blocks): no allocations.
 *
 * Timing: R rounds of S steps per mode; a round is timed on the host from its first launch to a
 * cudaStreamSynchronize after its S-th step; per-step time = round time / S; the median over
 * rounds is reported. Modes are interleaved round by round so that clock and thermal drift
 * affect all of them alike. Replay rounds also time the host from just before cgj_trace_begin
 * to just before cgj_trace_end, divided by the step's CUDA calls: cgjit's host cost per absorbed
 * call (chain: N launches, "host_ns/launch"; temps: 2N launches + N cudaMalloc + N cudaFree,
 * "host_ns/call").
 *
 * Correctness: from the same random initial x, K steps eager into one buffer and K steps
 * replayed into another must give bitwise equal results (memcmp), and the K replayed steps must
 * actually have been replayed. Exit status 1 on any mismatch or where replay never happened.
 * For temps the table also gives the pool figures of cgj_trace_info after the run: in-step
 * allocations, planned pool bytes, naive bytes (sum of sizes), lower bound (most bytes live at
 * once) and planned/lower.
 *
 * JSON (--json FILE). The top-level keys of the chain-only bench are kept, with the same
 * meaning: "workload" is "chain" and "floats" / "results" are chain's ("results" is [] when
 * chain was not run). temps has the parallel object "temps", always present:
 *   {
 *     "gpu": "...", "compute_capability": "9.0", "driver_version": 13000, "runtime_version": 13000,
 *     "workload": "chain", "floats": 4096, "rounds": 31, "steps": 20, "check_steps": 50,
 *     "results": [ {"n", "eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                   "replay_over_floor", "host_ns_per_launch", "state", "replays_checked",
 *                   "check"}, ... ],
 *     "workloads_run": ["chain", "temps"],
 *     "temps": {
 *       "workload": "temps", "floats": 4096, "temp_floats": "4096 + 1024*(k%4)",
 *       "results": [ {"n", "eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                     "replay_over_floor", "host_ns_per_call", "state", "replays_checked",
 *                     "check", "ops", "allocations", "pool_bytes", "naive_bytes",
 *                     "lower_bound", "planned_over_lower", "pool_allocs_checked",
 *                     "pool_frees_checked"}, ... ]      ([] when temps was not run)
 *     },
 *     "pass": true
 *   }
 * "ops" and the pool figures are cgj_trace_info's after the run; "pool_allocs_checked" /
 * "pool_frees_checked" are the growth of cgj_stats' pool_allocs / pool_frees over the K checked
 * replayed steps (N each per replayed step when every in-step allocation came from the pool).
 * "pass" covers every workload run.
 */
#include <cuda_runtime.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgjit.h"

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t err_ = (call);                                                       \
        if (err_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,           \
                    cudaGetErrorString(err_), cudaGetErrorName(err_));                   \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* A launch error (bad configuration) or an asynchronous error of an earlier step. */
#define CHECK_LAST() CHECK(cudaGetLastError())

#define CGJ_CHECK(call)                                                                  \
    do {                                                                                 \
        int st_ = (call);                                                                \
        if (st_ != CGJ_OK) {                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                \
                    cgj_strerror(st_));                                                  \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { WARMUP_STEPS = 5, CHECK_STEPS = 50, MAX_SIZES = 16, MAX_KERNELS = 1000000 };

/* Contracting slowly towards b / (1 - a) = 10: values stay finite for any number of steps,
 * and 50 checked steps of 1000 kernels (0.9999^50000 ~ 0.007) still carry the initial data. */
static const float CHAIN_A = 0.9999f;
static const float CHAIN_B = 0.001f;

__global__ void axpb(float *x, float a, float b, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = a * x[i] + b;
}

/* temps: x = 0.999*x + 0.001*(0.5*x + c_k) = 0.9995*x + 0.001*c_k per layer, contracting towards
 * 2*c_k: 50 checked steps of 100 layers (0.9995^5000 ~ 0.08) still carry the initial data. */
static const float TEMPS_HALF = 0.5f;
static const float TEMPS_KEEP = 0.999f;
static const float TEMPS_MIX = 0.001f;
enum { TEMPS_LIVE = 3, TEMPS_MAX_FLOATS = NFLOAT + 1024 * 3 };

/* t[i] = 0.5*x[i % n] + c for every i < m: the whole temporary is written before it is read. */
__global__ void temps_fill(float *t, const float *x, float half, float c, int m, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x)
        t[i] = half * x[i % n] + c;
}

/* x[i] = keep*x[i] + mix*t[i] for i < n (n <= the temporary's size). */
__global__ void temps_update(float *x, const float *t, float keep, float mix, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = keep * x[i] + mix * t[i];
}

static const char *state_name(int state) {
    switch (state) {
#define STATE_CASE(name, doc) \
    case CGJ_STATE_##name:    \
        return #name;
        CGJ_STATE_LIST(STATE_CASE)
#undef STATE_CASE
    }
    return "?";
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n-1]; sorts v in place. */
static double median(double *v, size_t n) {
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- options ---------------------------------------------------------------------------- */

enum { WL_CHAIN, WL_TEMPS, WL_COUNT };
static const char *const WL_NAMES[WL_COUNT] = {"chain", "temps"};

typedef struct options {
    int rounds, steps;
    int sizes[MAX_SIZES]; /* --sizes, for every workload; defaults per workload when not given */
    int nsizes;
    int sizes_given;
    int run[WL_COUNT]; /* --workload */
    const char *json;
} options_t;

/* The sizes a workload runs: --sizes where given, else its defaults. */
static int workload_sizes(const options_t *o, int wl, const int **sizes) {
    static const int chain_default[] = {10, 100, 1000};
    static const int temps_default[] = {10, 100};
    if (o->sizes_given) {
        *sizes = o->sizes;
        return o->nsizes;
    }
    if (wl == WL_CHAIN) {
        *sizes = chain_default;
        return (int)(sizeof chain_default / sizeof chain_default[0]);
    }
    *sizes = temps_default;
    return (int)(sizeof temps_default / sizeof temps_default[0]);
}

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s [--workload chain|temps|all] [--rounds R] [--steps S] [--sizes N1,N2,...]\n"
            "          [--json FILE] [--help]\n"
            "Runs each workload eager, replayed by cgjit, and as a hand-built CUDA graph (floor),\n"
            "and reports the median per-step time over R rounds of S steps.\n"
            "  chain: N dependent kernels x = a*x + b over %d floats per step.\n"
            "  temps: N layers per step over %d floats; layer k cudaMallocs a temporary of\n"
            "         %d + 1024*(k%%4) floats, runs 2 kernels, and cudaFrees the temporary of layer k-2.\n"
            "  --workload W    chain, temps or all (default all)\n"
            "  --rounds R      rounds per mode (default 31)\n"
            "  --steps S       steps per round (default 20)\n"
            "  --sizes LIST    N per step, comma-separated, for every workload run (default:\n"
            "                  chain 10,100,1000; temps 10,100; at most %d)\n"
            "  --json FILE     also write the results as JSON to FILE\n"
            "Exit status: 0 all checks passed, 1 a check or a CUDA call failed, 2 bad options.\n",
            argv0, NFLOAT, NFLOAT, NFLOAT, MAX_SIZES);
}

/* A whole-string decimal integer in [lo, hi], or -1. */
static long parse_int(const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    return v;
}

static int parse_sizes(const char *s, options_t *o) {
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    o->nsizes = 0;
    for (char *rest = buf, *tok; (tok = strsep(&rest, ",")) != NULL;) { /* empty items are errors */
        long v = parse_int(tok, 1, MAX_KERNELS);
        if (v < 0 || o->nsizes == MAX_SIZES)
            return -1;
        o->sizes[o->nsizes++] = (int)v;
    }
    return o->nsizes > 0 ? 0 : -1;
}

static void parse_options(int argc, char **argv, options_t *o) {
    o->rounds = 31;
    o->steps = 20;
    o->nsizes = 0;
    o->sizes_given = 0;
    for (int w = 0; w < WL_COUNT; w++)
        o->run[w] = 1;
    o->json = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            exit(0);
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = v != NULL;
        if (ok && !strcmp(a, "--rounds"))
            ok = (o->rounds = (int)parse_int(v, 1, 100000)) > 0;
        else if (ok && !strcmp(a, "--steps"))
            ok = (o->steps = (int)parse_int(v, 1, 100000)) > 0;
        else if (ok && !strcmp(a, "--sizes"))
            ok = (o->sizes_given = parse_sizes(v, o) == 0);
        else if (ok && !strcmp(a, "--workload")) {
            int all = !strcmp(v, "all");
            ok = all;
            for (int w = 0; w < WL_COUNT; w++) {
                o->run[w] = all || !strcmp(v, WL_NAMES[w]);
                ok |= o->run[w];
            }
        }
        else if (ok && !strcmp(a, "--json"))
            ok = (o->json = v)[0] != '\0';
        else
            ok = 0;
        if (!ok) {
            fprintf(stderr, "%s: bad option or value: %s%s%s\n", argv[0], a, v ? " " : "", v ? v : "");
            usage(stderr, argv[0]);
            exit(2);
        }
        i++;
    }
}

/* ---- the workload ----------------------------------------------------------------------- */

static void chain(float *x, int n, cudaStream_t s) {
    for (int k = 0; k < n; k++)
        axpb<<<GRID, BLOCK, 0, s>>>(x, CHAIN_A, CHAIN_B, NFLOAT);
}

/* temps: layer k's temporary size (floats) and constant. */
static int temp_floats(int k) { return NFLOAT + 1024 * (k % 4); }
static float temp_c(int k) { return 0.25f * (float)(k % 8) - 1.0f; }

/* Layer k's two kernels on the temporary t. */
static void temps_layer(float *x, float *t, int k, cudaStream_t s) {
    temps_fill<<<GRID, BLOCK, 0, s>>>(t, x, TEMPS_HALF, temp_c(k), temp_floats(k), NFLOAT);
    temps_update<<<GRID, BLOCK, 0, s>>>(x, t, TEMPS_KEEP, TEMPS_MIX, NFLOAT);
}

/* One step of N layers, each with its own cudaMalloc'd temporary; t_k is held in slot k%3. */
static void temps(float *x, int n, cudaStream_t s) {
    float *t[TEMPS_LIVE] = {NULL, NULL, NULL};
    for (int k = 0; k < n; k++) {
        CHECK(cudaMalloc((void **)&t[k % TEMPS_LIVE], (size_t)temp_floats(k) * sizeof(float)));
        temps_layer(x, t[k % TEMPS_LIVE], k, s);
        if (k >= 2)
            CHECK(cudaFree(t[(k - 2) % TEMPS_LIVE]));
    }
    for (int k = n >= 2 ? n - 2 : 0; k < n; k++)
        CHECK(cudaFree(t[k % TEMPS_LIVE]));
}

/* The floor's temps step: the same kernels on preallocated temporaries, layer k on tf[k%3]. */
static void temps_prealloc(float *x, float *const *tf, int n, cudaStream_t s) {
    for (int k = 0; k < n; k++)
        temps_layer(x, tf[k % TEMPS_LIVE], k, s);
}

typedef struct size_run {
    int wl;                /* WL_CHAIN or WL_TEMPS */
    int n;
    int calls;             /* CUDA calls per step: the host time divisor */
    char name[32];         /* trace anchor: "chain<N>" or "temps<N>" */
    float *xe, *xr, *xf;   /* eager, replay, floor buffers */
    float *tf[TEMPS_LIVE]; /* temps: the floor's preallocated temporaries */
    cudaGraphExec_t floor; /* hand-built graph of the step's kernels on xf */
    double *t_eager, *t_replay, *t_floor; /* per-step seconds, one per round */
    double *host;                          /* replay host seconds per call, one per step */
    size_t nhost;
    int replay_reached;   /* state was REPLAY after warmup */
    uint64_t replays_checked; /* replays counted during the K checked steps */
    uint64_t pool_allocs_checked, pool_frees_checked; /* cgj_stats growth over them */
    int equal;            /* eager and replayed results bitwise equal */
    cgj_trace_info_t info;
    /* results */
    double eager_us, replay_us, floor_us, host_ns;
} size_run_t;

/* The step's work on x, as the program issues it. */
static void step_work(const size_run_t *r, float *x, cudaStream_t s) {
    if (r->wl == WL_CHAIN)
        chain(x, r->n, s);
    else
        temps(x, r->n, s);
}

static void step_eager(size_run_t *r, float *x, cudaStream_t s) { step_work(r, x, s); }

/* One replayed step; returns the host seconds from before begin to before end. */
static double step_replay(size_run_t *r, float *x, cudaStream_t s) {
    double t0 = now_s();
    CGJ_CHECK(cgj_trace_begin(r->name));
    step_work(r, x, s);
    double t1 = now_s();
    CGJ_CHECK(cgj_trace_end());
    return t1 - t0;
}

static void build_floor(size_run_t *r, cudaStream_t s) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (r->wl == WL_CHAIN)
        chain(r->xf, r->n, s);
    else
        temps_prealloc(r->xf, r->tf, r->n, s);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&r->floor, g, 0));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphUpload(r->floor, s));
}

static void setup(size_run_t *r, int wl, int n, const options_t *o, const float *init, cudaStream_t s) {
    memset(r, 0, sizeof *r);
    r->wl = wl;
    r->n = n;
    r->calls = wl == WL_CHAIN ? n : 4 * n;
    snprintf(r->name, sizeof r->name, "%s%d", WL_NAMES[wl], n);
    size_t bytes = NFLOAT * sizeof(float);
    CHECK(cudaMalloc((void **)&r->xe, bytes));
    CHECK(cudaMalloc((void **)&r->xr, bytes));
    CHECK(cudaMalloc((void **)&r->xf, bytes));
    if (wl == WL_TEMPS)
        for (int i = 0; i < TEMPS_LIVE; i++)
            CHECK(cudaMalloc((void **)&r->tf[i], TEMPS_MAX_FLOATS * sizeof(float)));
    CHECK(cudaMemcpy(r->xe, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(r->xr, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(r->xf, init, bytes, cudaMemcpyHostToDevice));
    r->t_eager = (double *)calloc(o->rounds, sizeof(double));
    r->t_replay = (double *)calloc(o->rounds, sizeof(double));
    r->t_floor = (double *)calloc(o->rounds, sizeof(double));
    r->host = (double *)calloc((size_t)o->rounds * o->steps, sizeof(double));
    if (!r->t_eager || !r->t_replay || !r->t_floor || !r->host) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    build_floor(r, s);

    /* Warm up every mode: module loading, cgjit's two eager runs and its graph build. */
    for (int i = 0; i < WARMUP_STEPS; i++) {
        step_eager(r, r->xe, s);
        step_replay(r, r->xr, s);
        CHECK(cudaGraphLaunch(r->floor, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    cgj_trace_info_t info;
    CGJ_CHECK(cgj_trace_info(r->name, &info));
    r->replay_reached = info.state == CGJ_STATE_REPLAY;
    if (!r->replay_reached)
        fprintf(stderr, "cgjit-bench: %s is in state %s after %d warmup steps, not REPLAY (%s)\n",
                r->name, state_name(info.state), WARMUP_STEPS, info.reason[0] ? info.reason : "no reason given");
}

/* One timed round of S steps of one mode; returns seconds per step. */
static double round_eager(size_run_t *r, int steps, cudaStream_t s) {
    double t0 = now_s();
    for (int i = 0; i < steps; i++)
        step_eager(r, r->xe, s);
    CHECK(cudaStreamSynchronize(s));
    double t = (now_s() - t0) / steps;
    CHECK_LAST();
    return t;
}

static double round_replay(size_run_t *r, int steps, cudaStream_t s) {
    double t0 = now_s();
    for (int i = 0; i < steps; i++)
        r->host[r->nhost++] = step_replay(r, r->xr, s) / r->calls;
    CHECK(cudaStreamSynchronize(s));
    double t = (now_s() - t0) / steps;
    CHECK_LAST();
    return t;
}

static double round_floor(size_run_t *r, int steps, cudaStream_t s) {
    double t0 = now_s();
    for (int i = 0; i < steps; i++)
        CHECK(cudaGraphLaunch(r->floor, s));
    CHECK(cudaStreamSynchronize(s));
    double t = (now_s() - t0) / steps;
    CHECK_LAST();
    return t;
}

static void measure(size_run_t *r, const options_t *o, cudaStream_t s) {
    for (int k = 0; k < o->rounds; k++) {
        CHECK(cudaStreamSynchronize(s));
        r->t_eager[k] = round_eager(r, o->steps, s);
        r->t_replay[k] = round_replay(r, o->steps, s);
        r->t_floor[k] = round_floor(r, o->steps, s);
    }
    r->eager_us = median(r->t_eager, o->rounds) * 1e6;
    r->replay_us = median(r->t_replay, o->rounds) * 1e6;
    r->floor_us = median(r->t_floor, o->rounds) * 1e6;
    r->host_ns = median(r->host, r->nhost) * 1e9;
}

/* K steps eager into xe and K steps replayed into xr, both from `init`; compare bitwise. */
static void check(size_run_t *r, const float *init, cudaStream_t s) {
    size_t bytes = NFLOAT * sizeof(float);
    float *he = (float *)malloc(bytes), *hr = (float *)malloc(bytes);
    if (!he || !hr) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(r->xe, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(r->xr, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaDeviceSynchronize());
    cgj_trace_info_t before;
    CGJ_CHECK(cgj_trace_info(r->name, &before));
    for (int i = 0; i < CHECK_STEPS; i++)
        step_eager(r, r->xe, s);
    cgj_stats_t st0, st1;
    CGJ_CHECK(cgj_stats(&st0));
    for (int i = 0; i < CHECK_STEPS; i++)
        step_replay(r, r->xr, s);
    CGJ_CHECK(cgj_stats(&st1));
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    CGJ_CHECK(cgj_trace_info(r->name, &r->info));
    r->replays_checked = r->info.replays - before.replays;
    r->pool_allocs_checked = st1.pool_allocs - st0.pool_allocs;
    r->pool_frees_checked = st1.pool_frees - st0.pool_frees;
    if (r->wl == WL_TEMPS && (r->pool_allocs_checked != r->replays_checked * (uint64_t)r->n ||
                              r->pool_frees_checked != r->replays_checked * (uint64_t)r->n))
        fprintf(stderr,
                "cgjit-bench: %s: the pool served %llu allocations and %llu frees in %llu replayed "
                "steps, not %d each per step\n",
                r->name, (unsigned long long)r->pool_allocs_checked,
                (unsigned long long)r->pool_frees_checked, (unsigned long long)r->replays_checked, r->n);
    CHECK(cudaMemcpy(he, r->xe, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hr, r->xr, bytes, cudaMemcpyDeviceToHost));
    r->equal = memcmp(he, hr, bytes) == 0;
    if (!r->equal) {
        for (int i = 0; i < NFLOAT; i++)
            if (memcmp(&he[i], &hr[i], sizeof(float))) {
                fprintf(stderr, "cgjit-bench: %s: results differ first at x[%d]: eager %.9g, replay %.9g\n",
                        r->name, i, he[i], hr[i]);
                break;
            }
    }
    if (r->replays_checked < CHECK_STEPS)
        fprintf(stderr, "cgjit-bench: %s: only %llu of %d checked steps were replayed (%s)\n", r->name,
                (unsigned long long)r->replays_checked, CHECK_STEPS,
                r->info.reason[0] ? r->info.reason : "no reason given");
    free(he);
    free(hr);
}

static const char *verdict(const size_run_t *r) {
    if (!r->equal)
        return "FAIL(mismatch)";
    if (!r->replay_reached || r->replays_checked == 0)
        return "FAIL(no replay)";
    return "PASS";
}

static void release(size_run_t *r) {
    CHECK(cudaGraphExecDestroy(r->floor));
    CHECK(cudaFree(r->xe));
    CHECK(cudaFree(r->xr));
    CHECK(cudaFree(r->xf));
    for (int i = 0; i < TEMPS_LIVE; i++)
        if (r->tf[i])
            CHECK(cudaFree(r->tf[i]));
    free(r->t_eager);
    free(r->t_replay);
    free(r->t_floor);
    free(r->host);
}

/* ---- output ----------------------------------------------------------------------------- */

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

static void print_chain_table(const size_run_t *runs, int n, const options_t *o) {
    printf("workload chain: x = a*x + b over %d floats, N dependent kernels per step; "
           "median of %d rounds x %d steps\n",
           NFLOAT, o->rounds, o->steps);
    printf("%7s %11s %11s %11s %13s %13s %15s  %s\n", "N", "eager_us", "replay_us", "floor_us",
           "eager/replay", "replay/floor", "host_ns/launch", "check");
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &runs[i];
        printf("%7d %11.2f %11.2f %11.2f %13.2f %13.2f %15.1f  %s\n", r->n, r->eager_us, r->replay_us,
               r->floor_us, ratio(r->eager_us, r->replay_us), ratio(r->replay_us, r->floor_us), r->host_ns,
               verdict(r));
    }
    fflush(stdout);
}

static void print_temps_table(const size_run_t *runs, int n, const options_t *o) {
    printf("workload temps: N layers over %d floats per step, layer k: cudaMalloc %d + 1024*(k%%4) "
           "floats, 2 kernels, cudaFree layer k-2's; median of %d rounds x %d steps\n",
           NFLOAT, NFLOAT, o->rounds, o->steps);
    printf("%7s %11s %11s %11s %13s %13s %13s %7s %11s %11s %11s %13s  %s\n", "N", "eager_us",
           "replay_us", "floor_us", "eager/replay", "replay/floor", "host_ns/call", "allocs",
           "pool_bytes", "naive_bytes", "lower_bound", "planned/lower", "check");
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &runs[i];
        printf("%7d %11.2f %11.2f %11.2f %13.2f %13.2f %13.1f %7u %11llu %11llu %11llu %13.3f  %s\n",
               r->n, r->eager_us, r->replay_us, r->floor_us, ratio(r->eager_us, r->replay_us),
               ratio(r->replay_us, r->floor_us), r->host_ns, r->info.allocations,
               (unsigned long long)r->info.pool_bytes, (unsigned long long)r->info.naive_bytes,
               (unsigned long long)r->info.lower_bound,
               ratio((double)r->info.pool_bytes, (double)r->info.lower_bound), verdict(r));
    }
    fflush(stdout);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int write_json(const char *path, const cudaDeviceProp *prop, int driver, int runtime,
                      const size_run_t *const *runs, const int *nruns, const options_t *o, int pass) {
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
            "  \"rounds\": %d,\n  \"steps\": %d,\n  \"check_steps\": %d,\n  \"results\": [\n",
            prop->major, prop->minor, driver, runtime, NFLOAT, o->rounds, o->steps, CHECK_STEPS);
    int n = nruns[WL_CHAIN];
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &runs[WL_CHAIN][i];
        fprintf(f,
                "    {\"n\": %d, \"eager_us\": %.3f, \"replay_us\": %.3f, \"floor_us\": %.3f, "
                "\"eager_over_replay\": %.4f, \"replay_over_floor\": %.4f, \"host_ns_per_launch\": %.2f, "
                "\"state\": \"%s\", \"replays_checked\": %llu, \"check\": \"%s\"}%s\n",
                r->n, r->eager_us, r->replay_us, r->floor_us, ratio(r->eager_us, r->replay_us),
                ratio(r->replay_us, r->floor_us), r->host_ns, state_name(r->info.state),
                (unsigned long long)r->replays_checked, verdict(r), i + 1 < n ? "," : "");
    }
    fprintf(f, "  ],\n  \"workloads_run\": [");
    for (int w = 0, first = 1; w < WL_COUNT; w++)
        if (o->run[w]) {
            fprintf(f, "%s\"%s\"", first ? "" : ", ", WL_NAMES[w]);
            first = 0;
        }
    fprintf(f,
            "],\n  \"temps\": {\n    \"workload\": \"temps\",\n    \"floats\": %d,\n"
            "    \"temp_floats\": \"%d + 1024*(k%%4)\",\n    \"results\": [\n",
            NFLOAT, NFLOAT);
    n = nruns[WL_TEMPS];
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &runs[WL_TEMPS][i];
        fprintf(f,
                "      {\"n\": %d, \"eager_us\": %.3f, \"replay_us\": %.3f, \"floor_us\": %.3f, "
                "\"eager_over_replay\": %.4f, \"replay_over_floor\": %.4f, \"host_ns_per_call\": %.2f, "
                "\"state\": \"%s\", \"replays_checked\": %llu, \"check\": \"%s\", \"ops\": %u, "
                "\"allocations\": %u, \"pool_bytes\": %llu, \"naive_bytes\": %llu, "
                "\"lower_bound\": %llu, \"planned_over_lower\": %.4f, \"pool_allocs_checked\": %llu, "
                "\"pool_frees_checked\": %llu}%s\n",
                r->n, r->eager_us, r->replay_us, r->floor_us, ratio(r->eager_us, r->replay_us),
                ratio(r->replay_us, r->floor_us), r->host_ns, state_name(r->info.state),
                (unsigned long long)r->replays_checked, verdict(r), r->info.ops, r->info.allocations,
                (unsigned long long)r->info.pool_bytes, (unsigned long long)r->info.naive_bytes,
                (unsigned long long)r->info.lower_bound,
                ratio((double)r->info.pool_bytes, (double)r->info.lower_bound),
                (unsigned long long)r->pool_allocs_checked, (unsigned long long)r->pool_frees_checked,
                i + 1 < n ? "," : "");
    }
    fprintf(f, "    ]\n  },\n  \"pass\": %s\n}\n", pass ? "true" : "false");
    if (fclose(f) != 0) {
        fprintf(stderr, "cgjit-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    options_t o;
    parse_options(argc, argv, &o);

    int dev, driver, runtime;
    cudaDeviceProp prop;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaDriverGetVersion(&driver));
    CHECK(cudaRuntimeGetVersion(&runtime));
    printf("cgjit-bench: GPU %s (sm_%d%d), CUDA driver %d.%d, runtime %d.%d\n", prop.name, prop.major,
           prop.minor, driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    fflush(stdout);

    float init[NFLOAT];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < NFLOAT; i++) { /* xorshift64*: uniform in [-1, 1) */
        seed ^= seed >> 12, seed ^= seed << 25, seed ^= seed >> 27;
        init[i] = (float)((seed * 0x2545f4914f6cdd1dull) >> 40) / (float)(1u << 23) - 1.0f;
    }

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static size_run_t runs[WL_COUNT][MAX_SIZES];
    int nruns[WL_COUNT] = {0};
    int pass = 1;
    for (int w = 0; w < WL_COUNT; w++) {
        if (!o.run[w])
            continue;
        const int *sizes;
        int nsizes = workload_sizes(&o, w, &sizes);
        for (int i = 0; i < nsizes; i++) {
            size_run_t *r = &runs[w][nruns[w]++];
            setup(r, w, sizes[i], &o, init, s);
            measure(r, &o, s);
            check(r, init, s);
            pass &= strcmp(verdict(r), "PASS") == 0;
            release(r);
        }
    }
    CHECK(cudaStreamDestroy(s));

    if (o.run[WL_CHAIN])
        print_chain_table(runs[WL_CHAIN], nruns[WL_CHAIN], &o);
    if (o.run[WL_TEMPS])
        print_temps_table(runs[WL_TEMPS], nruns[WL_TEMPS], &o);
    const size_run_t *const json_runs[WL_COUNT] = {runs[WL_CHAIN], runs[WL_TEMPS]};
    if (o.json && write_json(o.json, &prop, driver, runtime, json_runs, nruns, &o, pass) != 0)
        return 1;
    printf("bench: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
