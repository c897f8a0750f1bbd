/*
 * bench_run.h — what cgjit_bench.cu (running the workloads) and bench_output.cu (their tables and
 * JSON) share: the options, one row's run of chain or temps (size_run_t) and of a model or an
 * elementwise workload (model_run_t), and all rows of one bench run (bench_results_t). A row is
 * one workload (and size) in one cgjit mode (bench_modes.h).
 */
#ifndef CGJ_BENCH_RUN_H
#define CGJ_BENCH_RUN_H

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_common.h"
#include "bench_modes.h"
#include "cgjit.h"
#include "torch_compare.h"

enum { NFLOAT = 4096, BLOCK = 256, GRID = NFLOAT / BLOCK };
enum { WARMUP_STEPS = 5, CHECK_STEPS = 50, MAX_SIZES = 16, MAX_KERNELS = 1000000 };
enum { TEMPS_LIVE = 3, TEMPS_MAX_FLOATS = NFLOAT + 1024 * 3 };

/* A cgjit call that must return CGJ_OK, or the bench ends (status 1). */
#define CGJ_CHECK(call)                                                                       \
    do {                                                                                      \
        int st_ = (call);                                                                     \
        if (st_ != CGJ_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cgj_strerror(st_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n-1]; sorts v in place. */
static inline double median(double *v, size_t n)
{
    if (n == 0) return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Relative error allowed between the eager output and the host reference (--reference). */
#define REF_TOL 1e-3

enum { WL_CHAIN, WL_TEMPS, WL_COUNT };
extern const char *const WL_NAMES[WL_COUNT];

/* The workloads of model_desc_t (workloads_*.cu), run after chain and temps, in this order: the
 * models (mlp and cnn need cuDNN: they are built only where CMake found it), then the elementwise
 * ones (--workload elementwise). */
enum { MD_MLP, MD_CNN, MD_GPT2, MD_MODELS, MD_EW16M = MD_MODELS, MD_EW10, MD_COUNT };
enum { MD_EW_COUNT = MD_COUNT - MD_MODELS };
extern const char *const MD_NAMES[MD_COUNT];
/* The workload's description, or NULL where it was not built. */
const model_desc_t *model_of(int m);

typedef struct options {
    int rounds, steps;
    int sizes[MAX_SIZES]; /* --sizes, for every workload; defaults per workload when not given */
    int nsizes;
    int sizes_given;
    int run[WL_COUNT]; /* --workload */
    int run_model[MD_COUNT];
    int named;           /* --workload named one workload (not all) */
    int modes[BM_COUNT]; /* --modes, in the order given */
    int nmodes;
    const char *json;
    const char *compare; /* --compare FILE, or NULL */
    int reference;       /* --reference */
} options_t;

typedef struct size_run {
    int wl; /* WL_CHAIN or WL_TEMPS */
    int n;
    int mode;                             /* the cgjit mode of this row (bench_modes.h) */
    int calls;                            /* CUDA calls per step: the host time divisor */
    char name[48];                        /* trace anchor: "chain<N>@<mode>" or "temps<N>@<mode>" */
    float *xe, *xr, *xf;                  /* eager, replay, floor buffers */
    float *tf[TEMPS_LIVE];                /* temps: the floor's preallocated temporaries */
    cudaGraphExec_t floor;                /* hand-built graph of the step's kernels on xf */
    double *t_eager, *t_replay, *t_floor; /* per-step seconds, one per round */
    double *host;                         /* replay host seconds per call, one per step */
    size_t nhost;
    int replay_reached;                               /* state was REPLAY after warmup */
    uint64_t replays_checked;                         /* replays counted during the K checked steps */
    uint64_t pool_allocs_checked, pool_frees_checked; /* cgj_stats growth over them */
    int equal;                                        /* the replayed results pass the mode's check against eager's */
    bench_cmp_t cmp;                                  /* replayed against eager */
    cgj_trace_info_t info;
    /* results */
    double eager_us, replay_us, floor_us, host_ns;
    double busy_us;     /* GPU-busy time of a replayed step (CUPTI); < 0: n/a */
    double host_drv_ns; /* chain: host_ns with the launches made by cuLaunchKernel; < 0: n/a */
} size_run_t;

typedef struct model_run {
    const model_desc_t *md;
    void *ctx;
    int mode;              /* the cgjit mode of this row */
    char name[48];         /* trace anchor: "<workload>@<mode>" */
    cudaGraphExec_t floor; /* stream capture of one eager step on the floor set */
    int has_floor;         /* the capture worked; else floor_note says why */
    char floor_note[320];
    double *t_eager, *t_replay, *t_floor; /* per-step seconds, one per round */
    double *host;                         /* replay host seconds per step (begin to before end) */
    double *ehost;                        /* eager host seconds per step (issuing it, no wait) */
    size_t nhost;
    int replay_reached;       /* state was REPLAY after warmup */
    uint64_t timed_replays;   /* steps replayed from start to end in the timed rounds */
    uint64_t replays_checked; /* replays counted during the K checked steps */
    int equal;                /* the replayed output passes the mode's check against eager's */
    bench_cmp_t cmp;          /* replayed output against eager's */
    int floor_equal;          /* eager and floor outputs bitwise equal (has_floor) */
    int finite;               /* the eager output has no NaN or infinity */
    int ref_done, ref_ok;     /* --reference: computed, and within REF_TOL */
    double ref_err;           /* max |eager - ref| / max |ref| */
    cgj_trace_info_t info;    /* after the checked steps */
    uint32_t ops;             /* driver calls in the replayed trace after the timed rounds */
    double eager_us, replay_us, floor_us, host_ns_op, host_ns_call;
    double eager_ns_call; /* eager host time per call: what the program and libraries cost */
    double lib_absorbed;  /* library calls absorbed whole per timed replayed step */
    double busy_us;       /* GPU-busy time of a replayed step (CUPTI); < 0: n/a */
} model_run_t;

/* Every row of one bench run, each workload's rows in the order of --modes. */
typedef struct bench_results {
    size_run_t runs[WL_COUNT][MAX_SIZES * BM_COUNT];
    int nruns[WL_COUNT];
    model_run_t mruns[MD_COUNT][BM_COUNT];
    int nmruns[MD_COUNT];      /* rows of workload m; 0: not run */
    torch_compare_t tc;        /* --compare: the models' torch figures (MD_NAMES[0..MD_MODELS)) */
    torch_compare_t tc_ew;     /* ... and the elementwise workloads' (MD_NAMES[MD_MODELS..)) */
    int busy_shown;            /* some GPU-busy figure was measured: the tables have its columns */
    int registrations_refused; /* elementwise registrations cgjit refused (a failure) */
    cgj_stats_t stats;         /* cgjit's counters at the end */
} bench_results_t;

/* A row's verdict: "PASS" or "FAIL(why)". */
const char *verdict(const size_run_t *r);
const char *model_verdict(const model_run_t *r);

/* bench_models.cu: one row of a model or an elementwise workload, in cgjit mode `mode`: created
 * and warmed up (the mode set first), timed, checked, and released. */
void model_setup(model_run_t *r, const model_desc_t *md, int mode, const options_t *o, cudaStream_t s);
void model_measure(model_run_t *r, const options_t *o, cudaStream_t s);
void model_check(model_run_t *r, const options_t *o, cudaStream_t s);
void model_release(model_run_t *r);
/* One replayed step of the row (a bench_step_fn of busy.h; arg is the model_run_t). */
void busy_step_model(void *arg, cudaStream_t s);

/* bench_output.cu: the tables (stdout) and the JSON file. */
void print_chain_table(const bench_results_t *res, const options_t *o);
void print_temps_table(const bench_results_t *res, const options_t *o);
void print_models_table(const bench_results_t *res, const options_t *o, const char *gpu);
void print_elementwise_table(const bench_results_t *res, const options_t *o, const char *gpu);
/* One line: what fusion did over the whole run (cgj_stats), where a fusing mode ran. */
void print_fusion_summary(const bench_results_t *res, const options_t *o);
int write_json(const char *path, const cudaDeviceProp *prop, int driver, int runtime, const bench_results_t *res,
               const options_t *o, int pass);

#endif /* CGJ_BENCH_RUN_H */
