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
 * Workloads `mlp`, `cnn`, `gpt2` (--workload mlp|cnn|gpt2|all; the models, run after chain and
 * temps): real forward passes written in plain CUDA C++ with cuBLAS and cuDNN, fp32 without
 * TF32, fixed-seed random weights and input, handles created once and bound to the stream, every
 * buffer and workspace allocated once before timing (nothing is allocated inside a step). Each
 * file's top comment gives the exact math:
 *  - mlp (workloads_mlp.cu): Linear(1024,1024)-ReLU-Linear(1024,1024)-ReLU-Linear(1024,10),
 *    batch 128: cublasSgemm_v2, cudnnAddTensor (bias), cudnnActivationForward (ReLU); 8 calls.
 *  - cnn (workloads_cnn.cu): batch 1, input 3x64x64, four blocks of conv3x3 pad 1 (IMPLICIT_GEMM,
 *    CUDNN_FMA_MATH) + bias (cudnnAddTensor) + ReLU + 2x2 max pooling, channels 3-32-64-64-128,
 *    output 128x4x4; 16 calls.
 *  - gpt2 (workloads_gpt2.cu): 12 GPT-2-small-shaped layers, d 768, 12 heads, T 64, batch 1:
 *    own layernorm, bias, causal softmax, GELU and residual kernels, cuBLAS SGEMM and strided
 *    batched SGEMM; 193 calls.
 * Needs cuDNN for mlp and cnn: where CMake did not find it they are not built, and the bench
 * says so when asked to run them (gpt2 needs cuBLAS only); --workload all skips them, and
 * --workload mlp or cnn exits with status 1.
 *
 * Modes, all on one created non-blocking stream:
 *  - eager:  the step's calls, plain.
 *  - replay: the same calls between cgj_trace_begin("chain<N>" / "temps<N>") and
 *            cgj_trace_end().
 *  - floor:  a CUDA graph of the same kernels, captured by hand: what replay can at best reach.
 *            For temps, the kernels run on three preallocated temporaries of the largest size
 *            (layer k uses buffer k%3, the same rotation of live blocks): no allocations.
 *            For the models, a stream capture of the eager step itself, library calls included,
 *            taken after one eager step (the libraries' lazy set-up is done by then); where the
 *            capture fails, the floor columns say n/a and a note gives the reason.
 * Each model computes each mode into its own set of activations (weights, input and library
 * workspaces are shared), so no mode can borrow another's results.
 *
 * Timing: R rounds of S steps per mode; a round is timed on the host from its first launch to a
 * cudaStreamSynchronize after its S-th step; per-step time = round time / S; the median over
 * rounds is reported. Modes are interleaved round by round so that clock and thermal drift
 * affect all of them alike. Replay rounds also time the host from just before cgj_trace_begin
 * to just before cgj_trace_end, divided by the step's CUDA calls: cgjit's host cost per absorbed
 * call (chain: N launches, "host_ns/launch"; temps: 2N launches + N cudaMalloc + N cudaFree,
 * "host_ns/call"). For the models, the divisor is the driver calls in the replayed trace, the
 * `ops` of cgj_trace_info after the timed rounds ("host_ns/op": what the library's host work and
 * cgjit together cost per absorbed driver call), and also the calls the program makes
 * (library calls and kernel launches, "host_ns/call").
 *
 * GPU-busy floor (busy.c, cupti_busy.c): after a workload's timed rounds and checks, 3 windows
 * of S replayed steps each run with CUPTI's activity API recording every kernel, copy and
 * memset; the union of their intervals over S is the time the GPU was busy per step, the
 * physical floor below which no way of launching the step can go (the hand-built graph's floor
 * still pays the GPU's scheduling of each node). "busy_us" is the median over the windows and
 * "replay/busy" sits beside replay/floor. CUPTI is attached only for those windows and detached
 * again (cuptiFinalize) before the next workload's timed rounds; a window counts only if every
 * step in it was replayed. Where CUPTI cannot be used (missing, or refused under
 * compute-sanitizer or another profiler) one line says so and the tables leave the two columns
 * out; the JSON has null there.
 *
 * No GPU: one line on stderr, `cgjit-bench: no CUDA GPU found: <why>`, and exit status 77.
 *
 * Correctness: from the same random initial x, K steps eager into one buffer and K steps
 * replayed into another must give bitwise equal results (memcmp), and the K replayed steps must
 * actually have been replayed. Exit status 1 on any mismatch or where replay never happened.
 * For temps the table also gives the pool figures of cgj_trace_info after the run: in-step
 * allocations, planned pool bytes, naive bytes (sum of sizes), lower bound (most bytes live at
 * once) and planned/lower. For the models: every set's activations are poisoned (bytes 0xff,
 * NaN), then K steps eager, K replayed and K floor launches each into its own set; the replayed
 * and the floor outputs must be bitwise equal to the eager one (the same kernels run), the
 * eager output must be finite, and the K replayed steps must have been replayed. --reference
 * also computes each model on the host in double from the same weights and input and requires
 * max |eager - reference| <= 1e-3 * max |reference|.
 *
 * --compare FILE adds PyTorch's times to the models' table: FILE is what bench/torch_compare.py
 * writes, {"gpu": "...", "torch": "2.x", "results": {"mlp": {"eager_us": x, "compile_us": y,
 * "reduce_overhead_us": z}, "cnn": {...}, "gpt2": {...}}}, any value possibly null (read by
 * torch_compare.c). The columns torch_eager_us, torch_compile_us, torch_reduce_overhead_us and
 * replay/reduce_overhead (replay_us / torch_reduce_overhead_us) say n/a where FILE is missing,
 * unreadable or has no such value; a note line says why, another one shows FILE's own top-level
 * "note" where it has one, and another one when FILE's "gpu" is not this GPU's name.
 *
 * JSON (--json FILE). The top-level keys of the chain-only bench are kept, with the same
 * meaning: "workload" is "chain" and "floats" / "results" are chain's ("results" is [] when
 * chain was not run). temps has the parallel object "temps", always present:
 *   {
 *     "gpu": "...", "compute_capability": "9.0", "driver_version": 13000, "runtime_version": 13000,
 *     "workload": "chain", "floats": 4096, "rounds": 31, "steps": 20, "check_steps": 50,
 *     "results": [ {"n", "eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                   "replay_over_floor", "host_ns_per_launch", "state", "replays_checked",
 *                   "check", "gpu_busy_us", "replay_over_gpu_busy"}, ... ],
 *     "workloads_run": ["chain", "temps"],
 *     "temps": {
 *       "workload": "temps", "floats": 4096, "temp_floats": "4096 + 1024*(k%4)",
 *       "results": [ {"n", "eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                     "replay_over_floor", "host_ns_per_call", "state", "replays_checked",
 *                     "check", "ops", "allocations", "pool_bytes", "naive_bytes",
 *                     "lower_bound", "planned_over_lower", "pool_allocs_checked",
 *                     "pool_frees_checked", "gpu_busy_us", "replay_over_gpu_busy"}, ... ]
 *                                                        ([] when temps was not run)
 *     },
 *     "pass": true
 *   }
 * "ops" and the pool figures are cgj_trace_info's after the run; "pool_allocs_checked" /
 * "pool_frees_checked" are the growth of cgj_stats' pool_allocs / pool_frees over the K checked
 * replayed steps (N each per replayed step when every in-step allocation came from the pool).
 * "workloads_run" also names the models that ran. Each model has a parallel object, always
 * present, between "temps" and "pass" (here mlp; cnn and gpt2 alike), and the compare file's
 * summary follows them:
 *     "mlp": {
 *       "workload": "mlp", "built": true, "description": "...",
 *       "results": [ {"eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                     "replay_over_floor", "host_ns_per_op", "ops", "host_ns_per_call",
 *                     "eager_host_ns_per_call", "saved_host_ns_per_call", "lib_absorbed_per_step", "calls",
 *                     "kernels", "segments", "varying_slots", "state", "timed_replays",
 *                     "replays_checked", "check", "floor", "floor_check", "reference_rel_err",
 *                     "torch_eager_us", "torch_compile_us", "torch_reduce_overhead_us",
 *                     "replay_over_reduce_overhead", "gpu_busy_us", "replay_over_gpu_busy"} ]
 *                                                        (one row; [] when not run)
 *     },
 *     "cnn": {...}, "gpt2": {...},
 *     "torch_compare": {"file", "loaded", "torch", "gpu", "note"},
 *     "gpu_busy": {"method", "available", "note"},
 * "built" is false where the model was not compiled in (no cuDNN). "floor_us",
 * "replay_over_floor" and "floor_check" ("equal" / "differs") are null when the floor is n/a,
 * and "floor" is then "n/a: <reason>" instead of "captured"; "host_ns_per_op" is null when the
 * trace has no ops; "reference_rel_err" is null without --reference; the torch values and
 * "replay_over_reduce_overhead" are null where the compare file gave none. "ops", "kernels",
 * "segments", "varying_slots" are cgj_trace_info's of the replayed trace; "timed_replays" counts
 * the timed steps (rounds x steps) that were replayed from start to end. "torch_compare": the
 * --compare path (null without it), whether it was read, its "torch" and "gpu" strings, and
 * why columns are n/a (null when none are). "gpu_busy_us" and "replay_over_gpu_busy" are null
 * where the busy figure is n/a; "gpu_busy" says how it is measured, whether CUPTI could be used,
 * and why not (its "note", null when it could).
 * "pass" covers every workload run.
 */
#include <cuda_runtime.h>

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "busy.h"
#include "cgjit.h"
#include "torch_compare.h"

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

/* The model workloads (workloads_*.cu), run after chain and temps, in this order. mlp and cnn
 * need cuDNN: they are built only where CMake found it. */
enum { MD_MLP, MD_CNN, MD_GPT2, MD_COUNT };
static const char *const MD_NAMES[MD_COUNT] = {"mlp", "cnn", "gpt2"};

/* The model's description, or NULL where it was not built. */
static const model_desc_t *model_of(int m) {
    switch (m) {
#ifdef CGJ_BENCH_CUDNN
    case MD_MLP:
        return &model_mlp;
    case MD_CNN:
        return &model_cnn;
#endif
    case MD_GPT2:
        return &model_gpt2;
    }
    return NULL;
}

typedef struct options {
    int rounds, steps;
    int sizes[MAX_SIZES]; /* --sizes, for every workload; defaults per workload when not given */
    int nsizes;
    int sizes_given;
    int run[WL_COUNT]; /* --workload */
    int run_model[MD_COUNT];
    int named;           /* --workload named one workload (not all) */
    const char *json;
    const char *compare; /* --compare FILE, or NULL */
    int reference;       /* --reference */
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
            "usage: %s [--workload chain|temps|mlp|cnn|gpt2|all] [--rounds R] [--steps S]\n"
            "          [--sizes N1,N2,...] [--json FILE] [--compare FILE] [--reference]\n"
            "          [--help] [--version]\n"
            "Runs each workload eager, replayed by cgjit, and as a hand-built CUDA graph (floor),\n"
            "and reports the median per-step time over R rounds of S steps.\n"
            "  chain: N dependent kernels x = a*x + b over %d floats per step.\n"
            "  temps: N layers per step over %d floats; layer k cudaMallocs a temporary of\n"
            "         %d + 1024*(k%%4) floats, runs 2 kernels, and cudaFrees the temporary of layer k-2.\n"
            "  mlp:   Linear(1024,1024)-ReLU-Linear(1024,1024)-ReLU-Linear(1024,10), batch 128\n"
            "         (cuBLAS SGEMM, cuDNN bias and ReLU).\n"
            "  cnn:   4 x [conv3x3 + bias + ReLU + maxpool 2x2], channels 3-32-64-64-128, input\n"
            "         1x3x64x64 (cuDNN).\n"
            "  gpt2:  12-layer GPT-2-small-shaped transformer forward, d 768, 12 heads, T 64, batch 1\n"
            "         (cuBLAS GEMMs, own layernorm/softmax/GELU/bias/residual kernels).\n"
            "         The models are fp32 without TF32; their floor is a stream capture of the\n"
            "         eager step (n/a where the capture fails).\n"
            "  --workload W    chain, temps, mlp, cnn, gpt2 or all (default all)\n"
            "  --rounds R      rounds per mode (default 31)\n"
            "  --steps S       steps per round (default 20)\n"
            "  --sizes LIST    N per step, comma-separated, for chain and temps (default:\n"
            "                  chain 10,100,1000; temps 10,100; at most %d)\n"
            "  --json FILE     also write the results as JSON to FILE\n"
            "  --compare FILE  add PyTorch's times from FILE (written by bench/torch_compare.py)\n"
            "                  to the mlp/cnn/gpt2 table; n/a where FILE is missing or unreadable\n"
            "  --reference     also check each model's eager output against a host computation\n"
            "                  in double (relative error <= 1e-3 of the largest output; gpt2 takes\n"
            "                  some seconds)\n"
            "  --version       print the version of cgjit (cgjit.h) and exit\n"
            "Exit status: 0 all checks passed, 1 a check or a CUDA call failed (or the workload\n"
            "named by --workload was not built), 2 bad options, 77 no CUDA GPU (one line says why).\n",
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
    for (int m = 0; m < MD_COUNT; m++)
        o->run_model[m] = 1;
    o->named = 0;
    o->json = NULL;
    o->compare = NULL;
    o->reference = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            exit(0);
        }
        if (!strcmp(a, "--version")) {
            printf("cgjit-bench %s\n", CGJ_VERSION_STRING);
            exit(0);
        }
        if (!strcmp(a, "--reference")) {
            o->reference = 1;
            continue;
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
            o->named = !all;
            for (int w = 0; w < WL_COUNT; w++) {
                o->run[w] = all || !strcmp(v, WL_NAMES[w]);
                ok |= o->run[w];
            }
            for (int m = 0; m < MD_COUNT; m++) {
                o->run_model[m] = all || !strcmp(v, MD_NAMES[m]);
                ok |= o->run_model[m];
            }
        }
        else if (ok && !strcmp(a, "--json"))
            ok = (o->json = v)[0] != '\0';
        else if (ok && !strcmp(a, "--compare"))
            ok = (o->compare = v)[0] != '\0';
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
    double busy_us; /* GPU-busy time of a replayed step (CUPTI); < 0: n/a */
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

/* What the JIT costs before it pays: the first three traced runs (two recorded, one built and
 * replayed), each to the end of its GPU work, against a warm eager step; and cgjit's own
 * figures of the anchor's warm-up (cgj_trace_info). Printed as one "warm-up" line. */
static void warm_up_cost(size_run_t *r, cudaStream_t s) {
    step_eager(r, r->xe, s); /* modules loaded */
    CHECK(cudaStreamSynchronize(s));
    double t0 = now_s();
    step_eager(r, r->xe, s);
    CHECK(cudaStreamSynchronize(s));
    double eager = now_s() - t0, run[3], extra = 0;
    for (int k = 0; k < 3; k++) {
        t0 = now_s();
        step_replay(r, r->xr, s);
        CHECK(cudaStreamSynchronize(s));
        run[k] = now_s() - t0;
        extra += run[k] - eager;
    }
    cgj_trace_info_t i;
    CGJ_CHECK(cgj_trace_info(r->name, &i));
    printf("warm-up %s: eager step %.2f ms; traced runs 1-3: %.2f, %.2f, %.2f ms; JIT cost %.2f ms over eager "
           "(%.2f ms per 1000 calls); recording %.2f us per call, plan %.3f ms, graphs %.2f ms (instantiate %.2f ms); "
           "first replay at run %llu\n",
           r->name, eager * 1e3, run[0] * 1e3, run[1] * 1e3, run[2] * 1e3, extra * 1e3, extra * 1e6 / r->calls,
           i.recorded_ops ? (double)i.record_ns / (double)i.recorded_ops / 1e3 : 0.0, (double)i.plan_ns / 1e6,
           (double)i.build_ns / 1e6, (double)i.instantiate_ns / 1e6, (unsigned long long)i.first_replay_run);
    fflush(stdout);
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
    warm_up_cost(r, s);

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
                r->name, cgj_state_name(info.state), WARMUP_STEPS, info.reason[0] ? info.reason : "no reason given");
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

/* ---- the model workloads (mlp, cnn, gpt2) ------------------------------------------------ */

/* Relative error allowed between the eager output and the host reference (--reference). */
static const double REF_TOL = 1e-3;

typedef struct model_run {
    const model_desc_t *md;
    void *ctx;
    cudaGraphExec_t floor;   /* stream capture of one eager step on the floor set */
    int has_floor;           /* the capture worked; else floor_note says why */
    char floor_note[320];
    double *t_eager, *t_replay, *t_floor; /* per-step seconds, one per round */
    double *host;                          /* replay host seconds per step (begin to before end) */
    double *ehost;                         /* eager host seconds per step (issuing it, no wait) */
    size_t nhost;
    int replay_reached;       /* state was REPLAY after warmup */
    uint64_t timed_replays;   /* steps replayed from start to end in the timed rounds */
    uint64_t replays_checked; /* replays counted during the K checked steps */
    int equal;                /* eager and replayed outputs bitwise equal */
    int floor_equal;          /* eager and floor outputs bitwise equal (has_floor) */
    int finite;               /* the eager output has no NaN or infinity */
    int ref_done, ref_ok;     /* --reference: computed, and within REF_TOL */
    double ref_err;           /* max |eager - ref| / max |ref| */
    cgj_trace_info_t info;    /* after the checked steps */
    uint32_t ops;             /* driver calls in the replayed trace after the timed rounds */
    double eager_us, replay_us, floor_us, host_ns_op, host_ns_call;
    double eager_ns_call;     /* eager host time per call: what the program and libraries cost */
    double lib_absorbed;      /* library calls absorbed whole per timed replayed step */
    double busy_us;           /* GPU-busy time of a replayed step (CUPTI); < 0: n/a */
} model_run_t;

static void model_step_eager(model_run_t *r, cudaStream_t s) {
    char err[256];
    if (r->md->step(r->ctx, MODEL_SET_EAGER, s, err, sizeof err)) {
        fprintf(stderr, "cgjit-bench: %s: eager step: %s\n", r->md->name, err);
        exit(1);
    }
}

/* One replayed step; returns the host seconds from before begin to before end. */
static double model_step_replay(model_run_t *r, cudaStream_t s) {
    char err[256];
    double t0 = now_s();
    CGJ_CHECK(cgj_trace_begin(r->md->name));
    if (r->md->step(r->ctx, MODEL_SET_REPLAY, s, err, sizeof err)) {
        fprintf(stderr, "cgjit-bench: %s: replayed step: %s\n", r->md->name, err);
        exit(1);
    }
    double t1 = now_s();
    CGJ_CHECK(cgj_trace_end());
    return t1 - t0;
}

/* The floor: one eager step on the floor set, captured on s (the stream the handles are bound
 * to) and instantiated. A failing capture (a library call that cannot be captured) leaves
 * has_floor 0 and the reason in floor_note; the bench goes on without the floor. */
static void model_build_floor(model_run_t *r, cudaStream_t s) {
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
    if (rc == 0 && e != cudaSuccess)
        snprintf(err, sizeof err, "cudaStreamEndCapture: %s", cudaGetErrorName(e));
    if (rc == 0 && e == cudaSuccess) {
        e = cudaGraphInstantiate(&r->floor, g, 0);
        if (e != cudaSuccess)
            snprintf(err, sizeof err, "cudaGraphInstantiate: %s", cudaGetErrorName(e));
    }
    if (g)
        CHECK(cudaGraphDestroy(g));
    if (err[0]) {
        snprintf(r->floor_note, sizeof r->floor_note, "the stream capture failed: %s", err);
        (void)cudaGetLastError(); /* capture errors are not sticky: the context goes on */
        CHECK(cudaStreamSynchronize(s));
        return;
    }
    CHECK(cudaGraphUpload(r->floor, s));
    r->has_floor = 1;
}

static void model_setup(model_run_t *r, const model_desc_t *md, const options_t *o, cudaStream_t s) {
    memset(r, 0, sizeof *r);
    r->md = md;
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
    if (!r->has_floor)
        fprintf(stderr, "cgjit-bench: %s: no floor: %s\n", md->name, r->floor_note);

    /* Warm up every mode: cgjit's two eager runs and its graph build. */
    for (int i = 0; i < WARMUP_STEPS; i++) {
        model_step_eager(r, s);
        model_step_replay(r, s);
        if (r->has_floor)
            CHECK(cudaGraphLaunch(r->floor, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    cgj_trace_info_t info;
    CGJ_CHECK(cgj_trace_info(md->name, &info));
    r->replay_reached = info.state == CGJ_STATE_REPLAY;
    if (!r->replay_reached)
        fprintf(stderr, "cgjit-bench: %s is in state %s after %d warmup steps, not REPLAY (%s)\n", md->name,
                cgj_state_name(info.state), WARMUP_STEPS, info.reason[0] ? info.reason : "no reason given");
}

static void model_measure(model_run_t *r, const options_t *o, cudaStream_t s) {
    cgj_trace_info_t before, after;
    cgj_stats_t st0, st1;
    CGJ_CHECK(cgj_trace_info(r->md->name, &before));
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
        for (int i = 0; i < o->steps; i++)
            r->host[r->nhost++] = model_step_replay(r, s);
        CHECK(cudaStreamSynchronize(s));
        r->t_replay[k] = (now_s() - t0) / o->steps;
        CHECK_LAST();

        if (r->has_floor) {
            t0 = now_s();
            for (int i = 0; i < o->steps; i++)
                CHECK(cudaGraphLaunch(r->floor, s));
            CHECK(cudaStreamSynchronize(s));
            r->t_floor[k] = (now_s() - t0) / o->steps;
            CHECK_LAST();
        }
    }
    CGJ_CHECK(cgj_trace_info(r->md->name, &after));
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
        fprintf(stderr, "cgjit-bench: %s: only %llu of %d timed steps were replayed (%s)\n", r->md->name,
                (unsigned long long)r->timed_replays, o->rounds * o->steps,
                after.reason[0] ? after.reason : "no reason given");
}

/* The set's output, copied to the host. */
static float *model_output_host(model_run_t *r, int set, size_t *count) {
    const float *d;
    r->md->output(r->ctx, set, &d, count);
    float *h = (float *)bench_host_alloc(*count * sizeof(float));
    CHECK(cudaMemcpy(h, d, *count * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static void report_first_difference(const char *name, const char *what, const float *a, const float *b,
                                    size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            fprintf(stderr,
                    "cgjit-bench: %s: eager and %s outputs differ first at [%zu]: eager %.9g, %s %.9g\n", name,
                    what, i, a[i], what, b[i]);
            return;
        }
}

/* Every set's activations poisoned (all bytes 0xff: NaN), then K steps of each mode into its own
 * set; the replayed and floor outputs must be bitwise equal to the eager one. */
static void model_check(model_run_t *r, const options_t *o, cudaStream_t s) {
    CHECK(cudaStreamSynchronize(s));
    for (int set = 0; set < MODEL_SETS; set++) {
        void *base;
        size_t bytes;
        r->md->arena(r->ctx, set, &base, &bytes);
        CHECK(cudaMemset(base, 0xff, bytes));
    }
    CHECK(cudaDeviceSynchronize());
    cgj_trace_info_t before;
    CGJ_CHECK(cgj_trace_info(r->md->name, &before));
    for (int i = 0; i < CHECK_STEPS; i++)
        model_step_eager(r, s);
    for (int i = 0; i < CHECK_STEPS; i++)
        model_step_replay(r, s);
    if (r->has_floor)
        for (int i = 0; i < CHECK_STEPS; i++)
            CHECK(cudaGraphLaunch(r->floor, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    CGJ_CHECK(cgj_trace_info(r->md->name, &r->info));
    r->replays_checked = r->info.replays - before.replays;

    size_t n;
    float *he = model_output_host(r, MODEL_SET_EAGER, &n);
    float *hr = model_output_host(r, MODEL_SET_REPLAY, &n);
    r->equal = memcmp(he, hr, n * sizeof(float)) == 0;
    if (!r->equal)
        report_first_difference(r->md->name, "replay", he, hr, n);
    if (r->has_floor) {
        float *hf = model_output_host(r, MODEL_SET_FLOOR, &n);
        r->floor_equal = memcmp(he, hf, n * sizeof(float)) == 0;
        if (!r->floor_equal)
            report_first_difference(r->md->name, "floor", he, hf, n);
        free(hf);
    }
    r->finite = 1;
    for (size_t i = 0; i < n && r->finite; i++)
        if (!isfinite(he[i])) {
            r->finite = 0;
            fprintf(stderr, "cgjit-bench: %s: the eager output is not finite at [%zu]: %g\n", r->md->name, i,
                    he[i]);
        }
    if (r->replays_checked < CHECK_STEPS)
        fprintf(stderr, "cgjit-bench: %s: only %llu of %d checked steps were replayed (%s)\n", r->md->name,
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
            fprintf(stderr, "cgjit-bench: %s: the eager output is %.3g (relative to its largest value) away "
                            "from the host reference, more than %g\n",
                    r->md->name, r->ref_err, REF_TOL);
        free(ref);
    }
    free(he);
    free(hr);
}

static const char *model_verdict(const model_run_t *r) {
    if (!r->equal)
        return "FAIL(mismatch)";
    if (!r->replay_reached || r->replays_checked == 0)
        return "FAIL(no replay)";
    if (r->has_floor && !r->floor_equal)
        return "FAIL(floor mismatch)";
    if (!r->finite)
        return "FAIL(non-finite)";
    if (r->ref_done && !r->ref_ok)
        return "FAIL(reference)";
    return "PASS";
}

static void model_release(model_run_t *r) {
    if (r->has_floor)
        CHECK(cudaGraphExecDestroy(r->floor));
    CHECK(cudaDeviceSynchronize());
    r->md->destroy(r->ctx);
    r->ctx = NULL;
    free(r->t_eager);
    free(r->t_replay);
    free(r->t_floor);
    free(r->host);
    free(r->ehost);
}

/* ---- the GPU-busy floor (busy.c) ---------------------------------------------------------- */

static void busy_step_size(void *arg, cudaStream_t s) {
    size_run_t *r = (size_run_t *)arg;
    step_replay(r, r->xr, s);
}

static void busy_step_model(void *arg, cudaStream_t s) { model_step_replay((model_run_t *)arg, s); }

/* ---- no GPU ------------------------------------------------------------------------------ */

/* Exit status where this machine has no usable CUDA GPU (automake's "skipped"). */
enum { EXIT_NO_GPU = 77 };

/* Where there is no GPU the bench has nothing to measure: one line saying why, and EXIT_NO_GPU.
 * The CUDA runtime says "driver version is insufficient" when the driver is missing: the line
 * says what it means. */
static void require_gpu(void) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0)
        return;
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver)
        fprintf(stderr, "cgjit-bench: no CUDA GPU found: the CUDA driver cannot be loaded (%s)\n", dlerror());
    else if (e != cudaSuccess)
        fprintf(stderr, "cgjit-bench: no CUDA GPU found: cudaGetDeviceCount: %s (%s)\n", cudaGetErrorName(e),
                cudaGetErrorString(e));
    else
        fprintf(stderr, "cgjit-bench: no CUDA GPU found: the CUDA driver sees no device\n");
    exit(EXIT_NO_GPU);
}

/* ---- output ----------------------------------------------------------------------------- */

static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

/* v formatted with fmt into buf, or "n/a". */
static const char *cell(char *buf, size_t cap, int has, double v, const char *fmt) {
    if (has)
        snprintf(buf, cap, fmt, v);
    else
        snprintf(buf, cap, "n/a");
    return buf;
}

/* "null" or v with fmt. */
static void json_num(FILE *f, int has, double v, const char *fmt) {
    if (has && isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

/* Whether any GPU-busy figure was measured: the tables have the busy columns only then. */
static int busy_shown;

/* The GPU-busy cells of a row (busy_us, replay/busy), when the table has them. */
static void print_busy_cells(double replay_us, double busy_us) {
    char a[32], b[32];
    if (busy_shown)
        printf(" %11s %12s", cell(a, sizeof a, busy_us >= 0, busy_us, "%.2f"),
               cell(b, sizeof b, busy_us > 0, ratio(replay_us, busy_us), "%.2f"));
}

static void print_busy_heads(void) {
    if (busy_shown)
        printf(" %11s %12s", "busy_us", "replay/busy");
}

/* A result row's GPU-busy keys: the figure and replay over it, null where n/a. */
static void json_busy(FILE *f, double replay_us, double busy_us) {
    fprintf(f, ", \"gpu_busy_us\": ");
    json_num(f, busy_us >= 0, busy_us, "%.3f");
    fprintf(f, ", \"replay_over_gpu_busy\": ");
    json_num(f, busy_us > 0, ratio(replay_us, busy_us), "%.4f");
}

static void print_chain_table(const size_run_t *runs, int n, const options_t *o) {
    printf("workload chain: x = a*x + b over %d floats, N dependent kernels per step; "
           "median of %d rounds x %d steps\n",
           NFLOAT, o->rounds, o->steps);
    printf("%7s %11s %11s %11s %13s %13s", "N", "eager_us", "replay_us", "floor_us", "eager/replay",
           "replay/floor");
    print_busy_heads();
    printf(" %15s  %s\n", "host_ns/launch", "check");
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &runs[i];
        printf("%7d %11.2f %11.2f %11.2f %13.2f %13.2f", r->n, r->eager_us, r->replay_us, r->floor_us,
               ratio(r->eager_us, r->replay_us), ratio(r->replay_us, r->floor_us));
        print_busy_cells(r->replay_us, r->busy_us);
        printf(" %15.1f  %s\n", r->host_ns, verdict(r));
    }
    fflush(stdout);
}

static void print_temps_table(const size_run_t *runs, int n, const options_t *o) {
    printf("workload temps: N layers over %d floats per step, layer k: cudaMalloc %d + 1024*(k%%4) "
           "floats, 2 kernels, cudaFree layer k-2's; median of %d rounds x %d steps\n",
           NFLOAT, NFLOAT, o->rounds, o->steps);
    printf("%7s %11s %11s %11s %13s %13s", "N", "eager_us", "replay_us", "floor_us", "eager/replay",
           "replay/floor");
    print_busy_heads();
    printf(" %13s %7s %11s %11s %11s %13s  %s\n", "host_ns/call", "allocs", "pool_bytes", "naive_bytes",
           "lower_bound", "planned/lower", "check");
    for (int i = 0; i < n; i++) {
        const size_run_t *r = &runs[i];
        printf("%7d %11.2f %11.2f %11.2f %13.2f %13.2f", r->n, r->eager_us, r->replay_us, r->floor_us,
               ratio(r->eager_us, r->replay_us), ratio(r->replay_us, r->floor_us));
        print_busy_cells(r->replay_us, r->busy_us);
        printf(" %13.1f %7u %11llu %11llu %11llu %13.3f  %s\n", r->host_ns, r->info.allocations,
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

/* ---- the model workloads' output ---------------------------------------------------------- */

/* The torch column c of model m, if the compare file has it. */
static int torch_has(const torch_compare_t *tc, int m, int c) { return tc && tc->loaded && tc->has[m][c]; }

static void print_models_table(const model_run_t *runs, const int *ran, const options_t *o,
                               const torch_compare_t *tc, const char *gpu) {
    for (int m = 0; m < MD_COUNT; m++) {
        if (!o->run_model[m])
            continue;
        if (model_of(m))
            printf("workload %s: %s\n", MD_NAMES[m], model_of(m)->summary);
        else
            printf("workload %s: not built: cuDNN (cudnn.h, libcudnn) was not found when cgjit-bench was "
                   "built, and mlp and cnn need it\n",
                   MD_NAMES[m]);
    }
    int any = 0;
    for (int m = 0; m < MD_COUNT; m++)
        any |= ran[m];
    if (!any) {
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
    printf("%8s %11s %11s %11s %13s %13s", "workload", "eager_us", "replay_us", "floor_us", "eager/replay",
           "replay/floor");
    print_busy_heads();
    printf(" %11s %6s %13s %6s %14s %14s %9s", "host_ns/op", "ops", "host_ns/call", "calls", "eager_ns/call",
           "saved_ns/call", "lib/step");
    if (o->compare)
        printf(" %15s %17s %25s %23s", "torch_eager_us", "torch_compile_us", "torch_reduce_overhead_us",
               "replay/reduce_overhead");
    printf("  %s\n", "check");
    char b[8][32];
    for (int m = 0; m < MD_COUNT; m++) {
        if (!ran[m])
            continue;
        const model_run_t *r = &runs[m];
        printf("%8s %11.2f %11.2f %11s %13.2f %13s", MD_NAMES[m], r->eager_us, r->replay_us,
               cell(b[0], sizeof b[0], r->has_floor, r->floor_us, "%.2f"), ratio(r->eager_us, r->replay_us),
               cell(b[1], sizeof b[1], r->has_floor, ratio(r->replay_us, r->floor_us), "%.2f"));
        print_busy_cells(r->replay_us, r->busy_us);
        printf(" %11s %6u %13.1f %6d %14.1f %14.1f %9.1f", cell(b[2], sizeof b[2], r->ops > 0, r->host_ns_op, "%.1f"),
               r->ops, r->host_ns_call, r->md->calls, r->eager_ns_call, r->eager_ns_call - r->host_ns_call,
               r->lib_absorbed);
        if (o->compare) {
            int ro = torch_has(tc, m, TORCH_REDUCE_OVERHEAD) && tc->us[m][TORCH_REDUCE_OVERHEAD] > 0;
            printf(" %15s %17s %25s %23s",
                   cell(b[3], sizeof b[3], torch_has(tc, m, TORCH_EAGER), tc->us[m][TORCH_EAGER], "%.2f"),
                   cell(b[4], sizeof b[4], torch_has(tc, m, TORCH_COMPILE), tc->us[m][TORCH_COMPILE], "%.2f"),
                   cell(b[5], sizeof b[5], torch_has(tc, m, TORCH_REDUCE_OVERHEAD),
                        tc->us[m][TORCH_REDUCE_OVERHEAD], "%.2f"),
                   cell(b[6], sizeof b[6], ro, ro ? r->replay_us / tc->us[m][TORCH_REDUCE_OVERHEAD] : 0.0,
                        "%.2f"));
        }
        printf("  %s\n", model_verdict(r));
    }
    for (int m = 0; m < MD_COUNT; m++)
        if (ran[m] && !runs[m].has_floor)
            printf("note: %s floor n/a: %s\n", MD_NAMES[m], runs[m].floor_note);
    if (o->compare) {
        if (!tc->loaded)
            printf("note: torch columns n/a: %s\n", tc->note);
        else {
            printf("note: torch columns from %s (torch %s, GPU %s)\n", o->compare,
                   tc->torch[0] ? tc->torch : "?", tc->gpu[0] ? tc->gpu : "?");
            if (tc->note[0])
                printf("note: torch columns n/a where missing: %s\n", tc->note);
            if (tc->file_note[0])
                printf("note: %s says: %s\n", o->compare, tc->file_note);
            if (tc->gpu[0] && strcmp(tc->gpu, gpu) != 0)
                printf("note: the torch times were measured on %s, this run is on %s\n", tc->gpu, gpu);
        }
    }
    if (o->reference)
        for (int m = 0; m < MD_COUNT; m++)
            if (ran[m])
                printf("reference %s: max |eager - host double| / max |host| = %.3g (tolerance %g): %s\n",
                       MD_NAMES[m], runs[m].ref_err, REF_TOL, runs[m].ref_ok ? "ok" : "FAIL");
    fflush(stdout);
}

static void json_models(FILE *f, const model_run_t *runs, const int *ran, const options_t *o,
                        const torch_compare_t *tc) {
    for (int m = 0; m < MD_COUNT; m++) {
        const model_desc_t *md = model_of(m);
        fprintf(f, "  \"%s\": {\n    \"workload\": \"%s\",\n    \"built\": %s,\n    \"description\": ",
                MD_NAMES[m], MD_NAMES[m], md ? "true" : "false");
        if (md)
            json_string(f, md->summary);
        else
            json_string(f, "not built: cuDNN was not found when cgjit-bench was built");
        fprintf(f, ",\n    \"results\": [");
        if (ran[m]) {
            const model_run_t *r = &runs[m];
            int ro = torch_has(tc, m, TORCH_REDUCE_OVERHEAD) && tc->us[m][TORCH_REDUCE_OVERHEAD] > 0;
            fprintf(f, "\n      {\"eager_us\": %.3f, \"replay_us\": %.3f, \"floor_us\": ", r->eager_us,
                    r->replay_us);
            json_num(f, r->has_floor, r->floor_us, "%.3f");
            fprintf(f, ", \"eager_over_replay\": %.4f, \"replay_over_floor\": ",
                    ratio(r->eager_us, r->replay_us));
            json_num(f, r->has_floor, ratio(r->replay_us, r->floor_us), "%.4f");
            fprintf(f, ", \"host_ns_per_op\": ");
            json_num(f, r->ops > 0, r->host_ns_op, "%.2f");
            fprintf(f,
                    ", \"ops\": %u, \"host_ns_per_call\": %.2f, \"eager_host_ns_per_call\": %.2f, "
                    "\"saved_host_ns_per_call\": %.2f, \"lib_absorbed_per_step\": %.2f, \"calls\": %d, \"kernels\": %u, "
                    "\"segments\": %u, \"varying_slots\": %u, \"state\": \"%s\", \"timed_replays\": %llu, "
                    "\"replays_checked\": %llu, \"check\": \"%s\", \"floor\": ",
                    r->ops, r->host_ns_call, r->eager_ns_call, r->eager_ns_call - r->host_ns_call, r->lib_absorbed,
                    r->md->calls, r->info.kernels, r->info.segments,
                    r->info.varying_slots, cgj_state_name(r->info.state), (unsigned long long)r->timed_replays,
                    (unsigned long long)r->replays_checked, model_verdict(r));
            if (r->has_floor)
                fprintf(f, "\"captured\", \"floor_check\": \"%s\"", r->floor_equal ? "equal" : "differs");
            else {
                char note[400];
                snprintf(note, sizeof note, "n/a: %s", r->floor_note);
                json_string(f, note);
                fprintf(f, ", \"floor_check\": null");
            }
            fprintf(f, ", \"reference_rel_err\": ");
            json_num(f, r->ref_done, r->ref_err, "%.3e");
            fprintf(f, ", \"torch_eager_us\": ");
            json_num(f, torch_has(tc, m, TORCH_EAGER), tc ? tc->us[m][TORCH_EAGER] : 0.0, "%.3f");
            fprintf(f, ", \"torch_compile_us\": ");
            json_num(f, torch_has(tc, m, TORCH_COMPILE), tc ? tc->us[m][TORCH_COMPILE] : 0.0, "%.3f");
            fprintf(f, ", \"torch_reduce_overhead_us\": ");
            json_num(f, torch_has(tc, m, TORCH_REDUCE_OVERHEAD), tc ? tc->us[m][TORCH_REDUCE_OVERHEAD] : 0.0,
                     "%.3f");
            fprintf(f, ", \"replay_over_reduce_overhead\": ");
            json_num(f, ro, ro ? r->replay_us / tc->us[m][TORCH_REDUCE_OVERHEAD] : 0.0, "%.4f");
            json_busy(f, r->replay_us, r->busy_us);
            fprintf(f, "}\n    ");
        }
        fprintf(f, "]\n  },\n");
    }
    fprintf(f, "  \"torch_compare\": {\"file\": ");
    if (o->compare)
        json_string(f, o->compare);
    else
        fputs("null", f);
    fprintf(f, ", \"loaded\": %s, \"torch\": ", tc && tc->loaded ? "true" : "false");
    if (tc && tc->loaded && tc->torch[0])
        json_string(f, tc->torch);
    else
        fputs("null", f);
    fprintf(f, ", \"gpu\": ");
    if (tc && tc->loaded && tc->gpu[0])
        json_string(f, tc->gpu);
    else
        fputs("null", f);
    fprintf(f, ", \"note\": ");
    if (!o->compare)
        json_string(f, "no --compare FILE given");
    else if (tc->note[0])
        json_string(f, tc->note);
    else
        fputs("null", f);
    fprintf(f, "},\n");
}

/* "gpu_busy": how the busy figures were measured, and why there are none where CUPTI failed. */
static void json_busy_summary(FILE *f) {
    const char *why;
    int ok = bench_busy_available(&why);
    fprintf(f, "  \"gpu_busy\": {\"method\": ");
    json_string(f, "CUPTI activity records (kernels, copies, memsets), union of their intervals, per replayed "
                   "step, in runs apart from the timed ones");
    fprintf(f, ", \"available\": %s, \"note\": ", ok ? "true" : "false");
    if (ok)
        fputs("null", f);
    else
        json_string(f, why);
    fprintf(f, "},\n");
}

static int write_json(const char *path, const cudaDeviceProp *prop, int driver, int runtime,
                      const size_run_t *const *runs, const int *nruns, const model_run_t *mruns,
                      const int *mran, const torch_compare_t *tc, const options_t *o, int pass) {
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
                "\"state\": \"%s\", \"replays_checked\": %llu, \"check\": \"%s\"",
                r->n, r->eager_us, r->replay_us, r->floor_us, ratio(r->eager_us, r->replay_us),
                ratio(r->replay_us, r->floor_us), r->host_ns, cgj_state_name(r->info.state),
                (unsigned long long)r->replays_checked, verdict(r));
        json_busy(f, r->replay_us, r->busy_us);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ],\n  \"workloads_run\": [");
    for (int w = 0, first = 1; w < WL_COUNT; w++)
        if (o->run[w]) {
            fprintf(f, "%s\"%s\"", first ? "" : ", ", WL_NAMES[w]);
            first = 0;
        }
    for (int m = 0, first = !o->run[WL_CHAIN] && !o->run[WL_TEMPS]; m < MD_COUNT; m++)
        if (mran[m]) {
            fprintf(f, "%s\"%s\"", first ? "" : ", ", MD_NAMES[m]);
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
                "\"pool_frees_checked\": %llu",
                r->n, r->eager_us, r->replay_us, r->floor_us, ratio(r->eager_us, r->replay_us),
                ratio(r->replay_us, r->floor_us), r->host_ns, cgj_state_name(r->info.state),
                (unsigned long long)r->replays_checked, verdict(r), r->info.ops, r->info.allocations,
                (unsigned long long)r->info.pool_bytes, (unsigned long long)r->info.naive_bytes,
                (unsigned long long)r->info.lower_bound,
                ratio((double)r->info.pool_bytes, (double)r->info.lower_bound),
                (unsigned long long)r->pool_allocs_checked, (unsigned long long)r->pool_frees_checked);
        json_busy(f, r->replay_us, r->busy_us);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "    ]\n  },\n");
    json_models(f, mruns, mran, o, tc);
    json_busy_summary(f);
    fprintf(f, "  \"pass\": %s\n}\n", pass ? "true" : "false");
    if (fclose(f) != 0) {
        fprintf(stderr, "cgjit-bench: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    /* The bench times replay itself: no eager probes among its timed steps (CGJIT_COST). cgjit
     * reads its settings when the driver is loaded, before main: start again with it set. */
    if (!getenv("CGJIT_COST")) {
        setenv("CGJIT_COST", "0", 1);
        execv("/proc/self/exe", argv);
    }
    options_t o;
    parse_options(argc, argv, &o);

    require_gpu();
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
            r->busy_us = bench_busy_floor(r->name, busy_step_size, r, o.steps, s);
            busy_shown |= r->busy_us >= 0;
            pass &= strcmp(verdict(r), "PASS") == 0;
            release(r);
        }
    }
    /* The models, after chain and temps (so that theirs run as they always did). */
    static model_run_t mruns[MD_COUNT];
    int mran[MD_COUNT] = {0};
    for (int m = 0; m < MD_COUNT; m++) {
        if (!o.run_model[m])
            continue;
        const model_desc_t *md = model_of(m);
        if (!md) { /* skipped under all; a failure when asked for by name */
            fprintf(stderr, "cgjit-bench: workload %s: not built (cuDNN was not found when cgjit-bench was "
                            "built); %s\n", MD_NAMES[m], o.named ? "not run" : "skipped");
            if (o.named)
                pass = 0;
            continue;
        }
        model_run_t *r = &mruns[m];
        model_setup(r, md, &o, s);
        model_measure(r, &o, s);
        model_check(r, &o, s);
        r->busy_us = bench_busy_floor(md->name, busy_step_model, r, o.steps, s);
        busy_shown |= r->busy_us >= 0;
        pass &= strcmp(model_verdict(r), "PASS") == 0;
        model_release(r);
        mran[m] = 1;
    }
    CHECK(cudaStreamDestroy(s));

    torch_compare_t tc;
    memset(&tc, 0, sizeof tc);
    if (o.compare)
        torch_compare_load(o.compare, MD_NAMES, MD_COUNT, &tc);

    if (o.run[WL_CHAIN])
        print_chain_table(runs[WL_CHAIN], nruns[WL_CHAIN], &o);
    if (o.run[WL_TEMPS])
        print_temps_table(runs[WL_TEMPS], nruns[WL_TEMPS], &o);
    print_models_table(mruns, mran, &o, &tc, prop.name);
    const size_run_t *const json_runs[WL_COUNT] = {runs[WL_CHAIN], runs[WL_TEMPS]};
    if (o.json &&
        write_json(o.json, &prop, driver, runtime, json_runs, nruns, mruns, mran, &tc, &o, pass) != 0)
        return 1;
    printf("bench: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
