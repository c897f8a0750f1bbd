/*
 * fusion.h — passes over a built trace, between recording and graph emission (docs/design.md, Fusion).
 *
 * In mode `default` (and `max-autotune`), a run of elementwise kernels on one stream, each
 * registered with what it computes (spec.h), becomes one generated kernel: producer and consumer
 * through the same buffer, values kept in registers, and a buffer's last value stored only where
 * something may read it later (an in-step allocation freed within the step and not touched after
 * the chain is never written). The generated CUDA C is compiled by NVRTC for the running GPU,
 * cached in memory and on disk (cache.c), and validated once against the kernels it replaces on
 * the step's real inputs (validate.c); a fusion that fails any of this is dropped with its
 * reason, and its ops replay unfused, as recorded.
 *
 * The pass returns its decision in the trace (cgj_trace_t.fused, cgj_op_t.fused): graphs/ emits
 * the fused kernel in place of the chain's last op and no node for the others, and keeps a chunk
 * from ending inside a chain. The chain's original ops stay in the trace: replay guards every
 * call against them as before, a side exit re-issues them eagerly, and a value that changes
 * (a fused op has no node to patch) is a side exit.
 */
#ifndef CGJ_FUSION_H
#define CGJ_FUSION_H

#include "fusion/spec.h"
#include "ir/ir.h"

#include <pthread.h>
#include <stdio.h>

/* ---- registry.c: the kernels registered as elementwise ---- */

/* Register kernel `kernel` (the driver's name, or a C++ kernel's plain name) as computing
 * `spec`. False with a message in err if the spec does not parse. Thread-safe. */
bool cgj_fusion_register(const char *kernel, const char *spec, char *err, size_t errlen);
/* Register every line of registry file `path` ('KERNEL (PARAMS): OUT = EXPR', '#' comments);
 * each bad line is reported on stderr with its number. Returns the bad lines, -1 (with a
 * message) if the file cannot be read, is no regular file (a FIFO, a device, a directory) or is
 * larger than 16 MiB. */
int cgj_fusion_load_file(const char *path);
/* The same from stream f, named `path` in the messages (cgj_fusion_load_file; the fuzzer's). */
int cgj_fusion_load_stream(FILE *f, const char *path);
/* Forget every registration. For tests and fuzzers only: a spec cgj_fusion_lookup returned
 * before is freed (the registry otherwise never removes one). */
void cgj_fusion_registry_reset(void);
/* The spec registered for the kernel the driver names `kernel`, or NULL. Reads CGJIT_OPS the
 * first time. */
const cgj_ew_spec_t *cgj_fusion_lookup(const char *kernel);

/* ---- chain.c, codegen.c: a chain and its kernel's source ---- */

#define CGJ_FUSE_BLOCK 256       /* threads per block of a fused kernel */
#define CGJ_FUSE_MAX_BUFS 64     /* distinct buffers of one chain (the kernel's pointers) */
#define CGJ_FUSE_MAX_STAGES 4096 /* kernels of one chain */

typedef struct cgj_fuse_buf {
    CUdeviceptr addr;
    uint64_t extent;  /* elements the chain may touch: n, or fewer for one only broadcast */
    uint8_t type;     /* cgj_ew_type_t of its elements */
    bool load, store; /* read before the chain writes it; its last value is stored */
    bool bcast;       /* read at a broadcast index somewhere (then never written) */
} cgj_fuse_buf_t;

typedef struct cgj_fuse_stage {
    const cgj_ew_spec_t *spec;
    uint32_t op;                        /* the trace op it stands for */
    uint8_t buf[CGJ_EW_MAX_PARAMS];     /* pointer parameters: their buffer */
    uint64_t scalar[CGJ_EW_MAX_PARAMS]; /* scalar parameters: their bits, zero-extended */
} cgj_fuse_stage_t;

typedef struct cgj_fuse_chain {
    uint32_t nstages, nbufs;
    uint64_t n; /* elements */
    cgj_fuse_stage_t *st;
    cgj_fuse_buf_t buf[CGJ_FUSE_MAX_BUFS];
} cgj_fuse_chain_t;

/* Blocks of a fused kernel over n elements (a grid-stride loop covers the rest). */
static inline unsigned cgj_fusion_grid(uint64_t n)
{
    uint64_t g = (n + CGJ_FUSE_BLOCK - 1) / CGJ_FUSE_BLOCK;
    return g < 1 ? 1u : g > (1u << 20) ? (1u << 20) : (unsigned)g;
}

/* Does chain ch's kernel take four elements a thread (float buffers, 16-byte aligned)? */
bool cgj_fusion_vectorized(const cgj_fuse_chain_t *ch);
/* The blocks chain ch's kernel is launched with. */
unsigned cgj_fusion_launch_grid(const cgj_fuse_chain_t *ch);

/* The CUDA C of chain ch's kernel, `extern "C" __global__ void cgj_fused(T0 *b0, ..., long long
 * n)`, into a new string (release with cgj_free). Scalars are literals of their exact bits;
 * pointers and the count are parameters, so chains that differ only in addresses share a kernel. */
char *cgj_fusion_codegen(const cgj_fuse_chain_t *ch);

/* The stages of op list l, ops [first, last], as one chain (pointers, scalars, count read from
 * the recorded parameters; the ops are registered elementwise kernels with layouts checked).
 * False with *why (FUSE_*) if they cannot be one kernel. Release ch->st with cgj_free. */
bool cgj_fusion_chain_of(const cgj_oplist_t *l, const cgj_ew_spec_t *const *specs, uint32_t first, uint32_t last,
                         cgj_fuse_chain_t *ch, cgj_reason_t *why);
/* Parameter k of op o (a chain stage) as recorded, zero-extended; a pointer as its address. */
uint64_t cgj_fusion_param(const cgj_op_t *o, uint32_t k);
/* The last op of the stage at op i: the op, or the last op its library call issued. */
uint32_t cgj_fusion_element_end(const cgj_oplist_t *l, uint32_t i);
/* The stream a stage's work runs on. */
CUstream cgj_fusion_element_stream(const cgj_oplist_t *l, uint32_t i);
/* The first op from `from` on that is not one of the step's own allocations or frees (which
 * issue nothing in replay): where the next stage may begin. l->n where none. */
uint32_t cgj_fusion_next_element(const cgj_oplist_t *l, uint32_t from);
/* The element count op o (of spec sp) was launched with (the product of its count parameters),
 * UINT64_MAX if one is negative or the product overflows. */
uint64_t cgj_fusion_count(const cgj_op_t *o, const cgj_ew_spec_t *sp);
/* Buffer of ch at [a, a + elems floats), for checking a library call of cgjit's own on copies: a
 * new one, the same one (grown), or -1 where it overlaps another partly. */
int cgj_fusion_add_buffer(cgj_fuse_chain_t *ch, CUdeviceptr a, uint64_t elems);
/* Mark which buffers' last values must be stored: all but those inside an in-step allocation
 * of l that is freed within the step and that no op after the chain mentions. */
void cgj_fusion_mark_stores(const cgj_oplist_t *l, uint32_t last, cgj_fuse_chain_t *ch);
/* The spec of a library call's elementwise description (cgj_libop_t.ew), parsed once per text;
 * NULL where it has none (or it does not parse: a defect, logged). */
const cgj_ew_spec_t *cgj_fusion_lib_spec(const cgj_libop_t *l);
/* The spec of op o if it is a registered elementwise kernel whose layout agrees; NULL if not
 * registered; with *why FUSE_LAYOUT (and NULL) if the layout disagrees. */
const cgj_ew_spec_t *cgj_fusion_spec_of(const cgj_op_t *o, cgj_reason_t *why);

/* ---- compile.c, cache.c: NVRTC and the kernel cache ---- */

/* The compute capability of the current context's device as NVRTC names it ("sm_90"), or
 * false. */
bool cgj_fusion_arch(char *arch, size_t len);
/* CUBIN for `source` on `arch`: from the memory cache, the disk cache, or NVRTC (then stored in
 * both). NULL with a message in err. The bytes belong to the cache. *cold: NVRTC ran. */
const void *cgj_fusion_compile(const char *source, const char *arch, size_t *size, bool *cold, char *err,
                               size_t errlen);
/* As cgj_fusion_compile, but under CGJIT_FUSE_BACKGROUND a miss is not compiled here: it is
 * queued for a worker thread, and NULL comes back with *ticket (non-zero) and err saying so. */
const void *cgj_fusion_compile_or_queue(const char *source, const char *arch, size_t *size, bool *cold,
                                        uint64_t *ticket, char *err, size_t errlen);
/* Has the worker finished every job up to `ticket` (compiled into the caches, or failed)? */
bool cgj_fusion_compiled(uint64_t ticket);
/* The NVRTC version as major*1000 + minor*10, 0 where NVRTC cannot be loaded (err says why). */
int cgj_fusion_nvrtc_version(char *err, size_t errlen);

/* The cache key of a kernel: source, arch and NVRTC version, as 16 hex digits. */
void cgj_fusion_cache_key(const char *source, const char *arch, int nvrtc_version, char key[17]);
/* The cache folder: CGJIT_CACHE_DIR, else $XDG_CACHE_HOME/cgjit, else ~/.cache/cgjit; "" if
 * off ('off') or there is no home. */
const char *cgj_fusion_cache_dir(char *buf, size_t len);
/* The entry `key` of folder dir, checked (magic, length, checksum): a new buffer (cgj_free) and
 * its size, or NULL where it is absent, truncated or corrupt, or where the folder or the file
 * may not be trusted (cache.c's essay: the folder is then not used, with one warning). */
void *cgj_fusion_cache_read(const char *dir, const char *key, size_t *size);
/* The payload of an entry's bytes entry[len] (a pointer into them) and its size, or NULL if the
 * bytes are no valid entry (header, length, checksum). Pure: cgj_fusion_cache_read's check. */
const void *cgj_fusion_cache_payload(const void *entry, size_t len, size_t *size);
/* Store an entry: written to a temporary file of its own and renamed into place, so concurrent
 * writers and readers never see a partial entry. False if it could not be written. */
bool cgj_fusion_cache_write(const char *dir, const char *key, const void *data, size_t size);

/* ---- follow.c: a bias and an activation after a GEMM or a convolution ---- */

typedef enum cgj_fuse_act { CGJ_ACT_NONE, CGJ_ACT_RELU, CGJ_ACT_GELU /* tanh form */ } cgj_fuse_act_t;

typedef struct cgj_epilogue {
    uint32_t stages[2], nstages; /* the bias's stage, then the activation's, where taken */
    uint32_t last;               /* the last op they hold */
    CUdeviceptr bias;            /* the bias vector */
    CUdeviceptr out;             /* where the result goes: C, or the activation's output (C is
                                  * then never read again) */
    cgj_fuse_act_t act;
} cgj_epilogue_t;

/* The stages right after op `after` on stream s that make C (n floats at c) C + bias, the bias read
 * at (i / d) % m, then optionally an activation of it. False where no bias follows. */
bool cgj_fusion_epilogue(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t after, CUstream s,
                         CUdeviceptr c, uint64_t n, uint64_t d, uint64_t m, cgj_epilogue_t *e);

/* ---- handles.c: the libraries fusion calls itself ---- */

/* The first of names[0..n) dlopen opens, or NULL (resolve its functions with cgj_driver_dlsym). */
void *cgj_fusion_dlopen(const char *const *names, size_t n);

/* cgjit's own handles of one library, one per CUDA context. */
typedef struct cgj_handles {
    pthread_mutex_t lock;
    struct {
        CUcontext ctx;
        void *h;
    } e[16];
    uint32_t n;
} cgj_handles_t;
#define CGJ_HANDLES_INIT                  \
    {                                     \
        .lock = PTHREAD_MUTEX_INITIALIZER \
    }

/* The handle for the current context: found, or made by create (false: it could not be), or
 * NULL. */
void *cgj_fusion_handle(cgj_handles_t *hs, bool (*create)(void **h));

/* ---- gemm.c, conv.c: a GEMM or a convolution with its bias and activation, as one call ---- */

/* A library call of cgjit's own in place of the GEMM or convolution at `first` and the stages
 * after it it takes. */
typedef struct cgj_fold {
    uint32_t first, last;        /* the GEMM's or convolution's LIB op .. the last op folded */
    uint32_t stages[3], nstages; /* that LIB op, then the bias's and activation's ops */
    void *ctx;                   /* the call: ops->issue(ctx, stream), ops->release(ctx) */
    const cgj_fused_ops_t *ops;
} cgj_fold_t;

/* The matmul for the GEMM at LIB op i of t and the stages after it it can take (specs as the
 * pass found them): in mode default only where a bias follows; in max-autotune also alone, where
 * a cuBLASLt algorithm is faster than the program's calls. Checked and timed on copies of the
 * real operands. False with why.code NONE where there is nothing to fold, else the reason. */
bool cgj_fusion_gemm(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t i, cgj_fold_t *out,
                     cgj_reason_t *why);
/* The same for the convolution at LIB op i: one cudnnConvolutionBiasActivationForward where a
 * bias over its channels follows (and a ReLU, where one does). */
bool cgj_fusion_conv(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t i, cgj_fold_t *out,
                     cgj_reason_t *why);

/* ---- validate.c ---- */

/* What may run in place of a chain's ops: run(ctx, ch, bufs, stream) on copies of the chain's
 * buffers (bufs[k] for ch->buf[k]). */
typedef struct cgj_fuse_candidate {
    CUresult (*run)(void *ctx, const cgj_fuse_chain_t *ch, const CUdeviceptr *bufs, CUstream s);
    void *ctx;
    bool ok;  /* out: within the tolerance */
    float us; /* out: median time of a run where timed, else -1 */
} cgj_fuse_candidate_t;

/* Run ops [first, last] of l ... (see cgj_fusion_validate) once, then each of the nc candidates
 * on fresh copies, and compare what each stores with what the ops stored: per element, or
 * `normwise` (against the largest eager magnitude: a GEMM's rounding). With ops_us, each valid
 * candidate and the ops themselves are timed too (microseconds a run, the GPU kept busy). Returns how
 * many candidates are valid; where none, *why says why the first failed (FUSE_MISMATCH,
 * FUSE_VALIDATE). */
int cgj_fusion_check(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, cgj_fuse_candidate_t *c, uint32_t nc,
                     bool normwise, float *ops_us, cgj_reason_t *why);
/* The fastest of the valid candidates c[0..n) (checked normwise, timed as replay runs them), -1
 * where none is valid (*why says why) or the chain's own ops are faster (*why NONE; *ops_us and
 * *best_us say by how much). Never slower: a call that saves kernels but runs slower than the
 * program's is not taken (CGJIT_FOLD_TIMING=0 takes it wherever it is valid). */
int cgj_fusion_fastest(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, cgj_fuse_candidate_t *c, uint32_t n,
                       float *ops_us, float *best_us, cgj_reason_t *why);
/* A candidate's run for a fused kernel (ctx: its CUfunction). */
CUresult cgj_fusion_run_kernel(void *f, const cgj_fuse_chain_t *ch, const CUdeviceptr *bufs, CUstream s);

/* Run ops [first, last] of l and fused kernel f on copies of the chain's buffers (their
 * contents now), and compare what each stores: within the tolerance of the mode. False with *why
 * FUSE_MISMATCH (the worst element) or FUSE_VALIDATE (the check itself failed). */
bool cgj_fusion_validate(const cgj_oplist_t *l, const cgj_fuse_chain_t *ch, CUfunction f, cgj_reason_t *why);

/* ---- pass.c ---- */

typedef struct cgj_fusion_stats {
    uint32_t chains, ops, dropped; /* chains fused and the ops they hold; chains dropped */
    uint32_t compiled_cold;        /* kernels NVRTC compiled (not found in a cache) */
    uint32_t queued;               /* kernels left to the background worker (chains unfused) */
    uint64_t ticket;               /* ... the last one's ticket (cgj_fusion_compiled) */
    uint64_t compile_ns, validate_ns;
} cgj_fusion_stats_t;

/* The fusion pass over trace t (relocated, pool memory mapped): finds chains, builds, compiles,
 * validates and records them in t, with what that cost (t->fuse_ns ...). Each dropped chain's reason is tallied and
 * logged under `anchor`. Does nothing in mode reduce-overhead. */
void cgj_fusion_pass(cgj_trace_t *t, const char *anchor, cgj_fusion_stats_t *st);
/* Release what the pass put into t. */
void cgj_fusion_free(cgj_trace_t *t);

/* In a child after fork(): fusion's locks as if unlocked (the threads that held them are gone);
 * each file's part. */
void cgj_fusion_forked(void);
void cgj_fusion_registry_forked(void);
void cgj_fusion_compile_forked(void);
void cgj_fusion_gemm_forked(void);
void cgj_fusion_conv_forked(void);
/* A handle table's lock as if unlocked. */
static inline void cgj_handles_forked(cgj_handles_t *hs)
{
    pthread_mutex_init(&hs->lock, NULL);
}

#endif /* CGJ_FUSION_H */
