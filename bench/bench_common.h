/*
 * bench_common.h — what cgjit-bench's sources share: error checking, the fixed-seed random
 * generator, the registration of elementwise kernels, and the interface of the model workloads
 * (mlp, cnn, gpt2) and the elementwise ones (ew16M, ew10) that workloads_*.cu implement and
 * cgjit_bench.cu runs.
 *
 * The set-up checks (CHECK, CHECK_LAST, CHECK_CUBLAS, CHECK_CUDNN: a failing call prints
 * `file:line: call: what (detail)` and ends the program) and the generator come from
 * tests/common/cuda_check.h, shared with the GPU test programs; the step checks (STEP_*) are
 * the bench's own.
 */
#ifndef CGJ_BENCH_COMMON_H
#define CGJ_BENCH_COMMON_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/common/cuda_check.h"
#include "cgjit.h"

/* Inside a step function `int f(..., char *err, size_t errlen)`: the first failing call writes
 * its reason to err and returns -1, so that a stream capture of the step (the floor) can fail
 * softly. Eager and replayed steps treat -1 as fatal. */
#define STEP_CUDA(call)                                                                              \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            snprintf(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return -1;                                                                               \
        }                                                                                            \
    } while (0)

/* After a kernel launch: its configuration error, if any. */
#define STEP_LAUNCHED() STEP_CUDA(cudaGetLastError())

#define STEP_CUBLAS(call)                                                                                  \
    do {                                                                                                   \
        cublasStatus_t st_ = (call);                                                                       \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                \
            snprintf(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cublasGetStatusString(st_)); \
            return -1;                                                                                     \
        }                                                                                                  \
    } while (0)

#define STEP_CUDNN(call)                                                                                 \
    do {                                                                                                 \
        cudnnStatus_t st_ = (call);                                                                      \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                               \
            snprintf(err, errlen, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudnnGetErrorString(st_)); \
            return -1;                                                                                   \
        }                                                                                                \
    } while (0)

/* The models' weights and inputs: cuda_check.h's xorshift64* generator, each model with its own
 * seed. */
#define bench_fill_uniform rng_fill_uniform

static inline void *bench_host_alloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* Zeroed host memory, or the program ends. */
static inline void *bench_host_calloc(size_t bytes)
{
    void *p = bench_host_alloc(bytes);
    memset(p, 0, bytes);
    return p;
}

/* 256-byte aligned offsets for carving one allocation into buffers. */
static inline size_t bench_align(size_t bytes)
{
    return (bytes + 255) & ~(size_t)255;
}

/* Register kernel `fn` as elementwise (cgj_op_register_elementwise), so that modes default and
 * max-autotune may fuse it, under the name the driver knows it by: cudaFuncGetName gives the
 * mangled name of a C++ kernel, which a kernel in an anonymous namespace needs (its mangled name
 * carries the namespace's, which nvcc makes unique per file, so its plain name would not find
 * it). Where cudaFuncGetName is missing or fails, the plain name (found for a kernel at namespace
 * scope). Call before the first step. Returns 0, or -1 when cgjit refused the spec (it printed
 * why; the kernel stays opaque and the bench counts a failure). */
static inline int bench_register_elementwise(const void *fn, const char *plain, const char *spec)
{
    const char *name = NULL;
#if CUDART_VERSION >= 12040
    if (cudaFuncGetName(&name, fn) != cudaSuccess || !name || !name[0]) {
        (void)cudaGetLastError();
        name = NULL;
    }
#else
    (void)fn;
#endif
    int st = cgj_op_register_elementwise(name ? name : plain, spec);
    if (st == CGJ_OK) return 0;
    fprintf(stderr, "cgjit-bench: registering kernel %s (%s) as elementwise: %s\n", plain, name ? name : plain,
            cgj_strerror(st));
    return -1;
}

/* ---- model workloads ---------------------------------------------------------------------
 *
 * A model holds its handles (created once, bound to the bench's stream), its weights and input
 * (read-only, shared by eager, replay and floor), a library workspace allocated once, and
 * MODEL_SETS sets of activations: every buffer its step writes, one set per way of running it
 * (eager, replay, floor), each one cudaMalloc'd block, so that the three ways' outputs are
 * computed independently and one that skipped work cannot borrow another's results. Nothing is
 * allocated inside a model's step
 * (the elementwise workloads, which share this interface, allocate their temporaries inside
 * the eager and replayed steps on purpose; their floor uses temporaries of its set). Each
 * cgjit mode (bench_modes.h) runs the workload afresh: create, the three sets, destroy. */
enum { MODEL_SET_EAGER, MODEL_SET_REPLAY, MODEL_SET_FLOOR, MODEL_SETS };

typedef struct model_desc {
    const char *name;    /* --workload name; the trace anchor is "name@mode" */
    const char *summary; /* one line: the net, its shapes and the calls per step */
    int calls;           /* library calls and kernel launches the program makes per step (the
                          * elementwise workloads: kernel launches, allocations and frees) */
    /* Handles bound to s, weights, input, workspace and the activation sets. keep_host keeps a
     * host copy of the weights and input for reference(). Exits on failure. */
    void *(*create)(cudaStream_t s, int keep_host);
    /* One forward step into activation set `set`, every call on s. 0, or -1 with the first
     * failure's reason in err. */
    int (*step)(void *ctx, int set, cudaStream_t s, char *err, size_t errlen);
    /* The set's activations, as one block (poisoned before the checked runs). */
    void (*arena)(void *ctx, int set, void **base, size_t *bytes);
    /* The set's output: count floats. */
    void (*output)(void *ctx, int set, const float **out, size_t *count);
    /* The forward computed on the host in double from the same weights and input (create with
     * keep_host); ref has the output's count. */
    void (*reference)(void *ctx, double *ref);
    void (*destroy)(void *ctx);
    /* Register the workload's elementwise kernels (bench_register_elementwise), once, before any
     * step; NULL where it has none (mlp and cnn: their bias and activation are cuDNN calls, which
     * cgjit describes as elementwise itself). Returns the registrations cgjit refused. */
    int (*register_ops)(void);
} model_desc_t;

/* What every model holds besides its handles and shapes; a model's context begins with it. */
typedef struct model_data {
    float *params, *x;           /* device: the weights (one block) and the input */
    float *host_params, *host_x; /* their host copies, kept for reference() (keep_host) */
    void *arena[MODEL_SETS];     /* one block of activations per set */
    size_t arena_bytes;
} model_data_t;

/* Copy the host weights (nparams floats) and input (nx floats) to the device; keep the host
 * copies for the reference, or free them. */
static inline void model_data_upload(model_data_t *d, float *hp, size_t nparams, float *hx, size_t nx, int keep_host)
{
    CHECK(cudaMalloc((void **)&d->params, nparams * sizeof(float)));
    CHECK(cudaMalloc((void **)&d->x, nx * sizeof(float)));
    CHECK(cudaMemcpy(d->params, hp, nparams * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d->x, hx, nx * sizeof(float), cudaMemcpyHostToDevice));
    if (keep_host) {
        d->host_params = hp;
        d->host_x = hx;
    } else {
        free(hp);
        free(hx);
    }
}

/* One activation block of `bytes` per set. */
static inline void model_data_arenas(model_data_t *d, size_t bytes)
{
    d->arena_bytes = bytes;
    for (int set = 0; set < MODEL_SETS; set++) CHECK(cudaMalloc(&d->arena[set], bytes));
}

/* model_desc_t.arena of every model (its context begins with a model_data_t). */
static inline void model_data_arena(void *ctx, int set, void **base, size_t *bytes)
{
    const model_data_t *d = (const model_data_t *)ctx;
    *base = d->arena[set];
    *bytes = d->arena_bytes;
}

static inline void model_data_free(model_data_t *d)
{
    for (int set = 0; set < MODEL_SETS; set++) CHECK(cudaFree(d->arena[set]));
    CHECK(cudaFree(d->params));
    CHECK(cudaFree(d->x));
    free(d->host_params);
    free(d->host_x);
}

/* A model's cuBLAS handle: bound to the bench's stream, with its workspace set explicitly
 * (allocated once), fp32 math without TF32, host pointer mode. */
typedef struct model_blas {
    cublasHandle_t h;
    void *ws;
} model_blas_t;

static inline void model_blas_create(model_blas_t *b, cudaStream_t s)
{
    const size_t ws_bytes = 32u << 20;
    CHECK_CUBLAS(cublasCreate(&b->h));
    CHECK_CUBLAS(cublasSetStream(b->h, s));
    CHECK(cudaMalloc(&b->ws, ws_bytes));
    CHECK_CUBLAS(cublasSetWorkspace(b->h, b->ws, ws_bytes));
    CHECK_CUBLAS(cublasSetMathMode(b->h, CUBLAS_DEFAULT_MATH));
    CHECK_CUBLAS(cublasSetPointerMode(b->h, CUBLAS_POINTER_MODE_HOST));
}

static inline void model_blas_destroy(model_blas_t *b)
{
    CHECK_CUBLAS(cublasDestroy(b->h));
    CHECK(cudaFree(b->ws));
}

extern const model_desc_t model_gpt2;
extern const model_desc_t model_ew16M; /* workloads_elementwise.cu */
extern const model_desc_t model_ew10;
#ifdef CGJ_BENCH_CUDNN
extern const model_desc_t model_mlp;
extern const model_desc_t model_cnn;
#endif

#endif /* CGJ_BENCH_COMMON_H */
