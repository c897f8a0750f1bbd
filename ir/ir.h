/*
 * ir.h — the trace IR: one record per driver call of a step, and the traces built from them.
 *
 * A wrapper in runtime/ describes each intercepted call as a cgj_call_t (normalized: the stream
 * is explicit, never NULL; the per-thread-default-stream variant is a flag). Recording turns a
 * call into a cgj_op_t that owns copies of everything it points to: kernel parameters by value,
 * launch attributes. Two recordings of the same anchor are compared op by op: equal shapes
 * (topologies, tracer/shape.c) make a trace; the kernel parameter slots whose bytes differ between
 * the two runs are *varying*, and so are grids, copy and memset operands that differ (patched into
 * the graph when they change); the other slots are *constant* (guarded by memcmp).
 *
 * Op classes:
 *  - CAPTURE ops go into the segment's graph (kernels, async copies, memsets, events, host
 *    functions);
 *  - BOUNDARY ops end a segment: in replay the pending graph is launched, then the call itself
 *    executes eagerly (host synchronizations, reads of device memory by the host, frees of
 *    memory the step did not allocate);
 *  - POOL ops are the step's own allocations and frees: replay serves them from the trace's
 *    pool region at planned addresses (allocator/plan.h), with no driver call and no sync.
 *
 * Addresses of in-step allocations differ between the two eager runs a trace is made of (the
 * driver chose them). Comparisons therefore match a device address of one run with the other
 * run's by (allocation, offset), and the built trace is *relocated*: every address into an
 * in-step allocation, in kernel parameters and copy/memset arguments, is rewritten to the
 * planned address of that allocation. Allocations are planned by size class (allocator/plan.h).
 * Calls that cannot be traced never become ops: they abort the step to eager.
 */
#ifndef CGJ_IR_H
#define CGJ_IR_H

#include "base/cgj_base.h"
#include "base/config.h"
#include "ir/reason.h"
#include <cuda.h>
#include <string.h>

#define CGJ_CLASS_CAPTURE 0
#define CGJ_CLASS_BOUNDARY 1
#define CGJ_CLASS_POOL 2   /* served from the trace's pool region: absorbed, never issued */
#define CGJ_CLASS_MARKER 3 /* issues nothing: a library call grouping the ops after it */

/* X(NAME, class, description) */
/* clang-format off */
#define CGJ_OP_LIST(X)                                                               \
    X(KERNEL, CGJ_CLASS_CAPTURE, "kernel launch")                                    \
    X(MEMCPY, CGJ_CLASS_CAPTURE, "copy")                                             \
    X(MEMSET, CGJ_CLASS_CAPTURE, "memset")                                           \
    X(EVENT_RECORD, CGJ_CLASS_CAPTURE, "event record")                               \
    X(STREAM_WAIT, CGJ_CLASS_CAPTURE, "stream wait on event")                        \
    X(HOST_FUNC, CGJ_CLASS_CAPTURE, "host function")                                 \
    X(SYNC, CGJ_CLASS_BOUNDARY, "host synchronization")                              \
    X(QUERY, CGJ_CLASS_BOUNDARY, "host query of GPU progress")                       \
    X(READBACK, CGJ_CLASS_BOUNDARY, "copy the host observes at once (to pageable memory)") \
    X(FREE, CGJ_CLASS_BOUNDARY, "free of device memory the step did not allocate")        \
    X(GRAPH_LAUNCH, CGJ_CLASS_BOUNDARY, "launch of a graph of the program's own")          \
    X(AS_MADE, CGJ_CLASS_BOUNDARY,                                                   \
      "GPU work cgjit does not capture (2D/3D, array and peer copies, cooperative launches, "     \
      "stream memory operations), run as made")                                     \
    X(ALLOC, CGJ_CLASS_POOL, "allocation inside the step")                                 \
    X(POOL_FREE, CGJ_CLASS_POOL, "free of an allocation made inside the step")               \
    X(LIB, CGJ_CLASS_MARKER, "library call (cuBLAS, cuBLASLt, cuDNN) grouping the ops it issued")
/* clang-format on */

typedef enum cgj_op_kind {
#define CGJ_OP_ENUM(name, cls, doc) CGJ_OP_##name,
    CGJ_OP_LIST(CGJ_OP_ENUM)
#undef CGJ_OP_ENUM
        CGJ_OP_COUNT
} cgj_op_kind_t;

extern const char *const cgj_op_names[CGJ_OP_COUNT];
extern const char *const cgj_op_docs[CGJ_OP_COUNT];
extern const unsigned char cgj_op_class[CGJ_OP_COUNT];

/* Copy directions of a MEMCPY op (after resolving unified addresses). */
enum { CGJ_DIR_H2D, CGJ_DIR_D2H, CGJ_DIR_D2D };

/* A library call as a wrapper saw it (runtime/libs*.c): its key is everything that decides
 * which driver calls the library makes, by content (scalar arguments, host-mode scalars,
 * descriptor contents, the handle's stream, modes and generation, the alignment of each
 * device pointer); its args are the device pointers it was given. */
#define CGJ_LIB_MAX_ARGS 16
#define CGJ_LIB_KEY_MAX 1536

/* A library call that is elementwise (cudnnAddTensor, cudnnActivationForward, cuBLAS axpy...),
 * as fusion/ fuses it: a spec in the language of fusion/spec.h (static text) and one value per
 * parameter, where a pointer's value is the index of the call's argument it is (so that the
 * trace's relocation of arguments applies). Described in mode default only. */
#define CGJ_LIBEW_MAX 16
typedef struct cgj_libew {
    const char *spec; /* NULL: not described */
    uint64_t vals[CGJ_LIBEW_MAX];
} cgj_libew_t;

/* A library call that is a plain fp32 GEMM (cublasSgemm, cublasGemmEx in fp32 without TF32, host
 * scalars): C = alpha op(A) op(B) + beta C, column-major, as fusion/ folds a bias and an
 * activation after it into one cuBLASLt matmul. Arguments by index, as cgj_libew_t's. Described
 * in mode default only. */
typedef struct cgj_libgemm {
    bool valid;
    uint8_t transa, transb; /* cublasOperation_t: 0 N, 1 T */
    uint8_t a, b, c;        /* argument indices */
    int32_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
} cgj_libgemm_t;

/* A library call that is a plain fp32 convolution (cudnnConvolutionForward on float tensors with
 * float compute), as fusion/ folds a bias over its channels and a ReLU after it into one
 * cudnnConvolutionBiasActivationForward: y = alpha conv(x, w) + beta y. Descriptors by content,
 * arguments by index. Described in mode default only. */
#define CGJ_LIBCONV_DIMS 8
typedef struct cgj_libconv {
    bool valid;
    uint8_t x, w, ws, y; /* argument indices */
    int32_t nb, xdims[CGJ_LIBCONV_DIMS], xstrides[CGJ_LIBCONV_DIMS];
    int32_t ydims[CGJ_LIBCONV_DIMS], ystrides[CGJ_LIBCONV_DIMS];
    int32_t wformat, wdims[CGJ_LIBCONV_DIMS];
    int32_t nconv, pad[CGJ_LIBCONV_DIMS], stride[CGJ_LIBCONV_DIMS], dil[CGJ_LIBCONV_DIMS];
    int32_t mode, math, groups, algo;
    uint64_t ws_bytes;
    float alpha, beta;
} cgj_libconv_t;

typedef struct cgj_libcall {
    uint32_t keylen, nargs;
    cgj_reason_code_t never; /* why the call is never absorbed (the key is incomplete, it returns a
                              * value to the host), or CGJ_REASON_NONE */
    bool collective;         /* its kernels wait for other processes or devices (NCCL): replay
                              * launches them before the call returns, as eager does */
    cgj_libew_t ew;          /* what it computes per element, where it is elementwise */
    cgj_libgemm_t gemm;      /* the GEMM it is, where it is a plain one */
    cgj_libconv_t conv;      /* the convolution it is, where it is a plain one */
    CUdeviceptr args[CGJ_LIB_MAX_ARGS];
    uint8_t key[CGJ_LIB_KEY_MAX];
} cgj_libcall_t;

/* A driver call as a wrapper saw it. Pointers refer to the caller's memory. */
typedef struct cgj_call {
    cgj_op_kind_t kind;
    const char *api; /* exported driver name, for logs and as part of the shape */
    CUstream stream; /* explicit: CU_STREAM_LEGACY / CU_STREAM_PER_THREAD for the defaults */
    union {
        struct {
            CUfunction f;
            unsigned grid[3], block[3], smem;
            void **params;                  /* kernelParams form */
            void *blob;                     /* extra form: packed buffer ... */
            size_t blob_size;               /* ... and its size */
            const CUlaunchAttribute *attrs; /* cuLaunchKernelEx only */
            unsigned nattrs;
        } k;
        struct {
            int dir;
            CUdeviceptr dst, src; /* device side(s) */
            const void *hsrc;     /* H2D source */
            bool direct;          /* H2D from pinned memory, asynchronous: the copy reads the
                                   * source when it runs (as eager), so it is not staged and its
                                   * address is part of the shape */
            void *hdst;           /* D2H destination (pinned) */
            size_t bytes;
        } m;
        struct {
            CUdeviceptr dst;
            unsigned value, elem;
            size_t count;
        } s;
        struct {
            CUevent ev;
            unsigned flags;
        } e;
        struct {
            CUhostFn fn;
            void *data;
        } h;
        struct {
            CUdeviceptr *out;    /* where the call returns the address (caller's memory) */
            size_t *pitch_out;   /* cuMemAllocPitch */
            CUdeviceptr addr;    /* the address: returned (recorded), planned (trace) */
            size_t bytes, pitch; /* block size (pitch × height for pitched allocations) */
            size_t width, height;
            unsigned elem;
            CUmemoryPool pool; /* cuMemAllocFromPoolAsync */
        } a;                   /* ALLOC; FREE and POOL_FREE use addr */
        struct {
            const cgj_libcall_t *lc; /* the wrapper's description (NULL in a recorded op) */
        } l;
    } u;
} cgj_call_t;

/* One parameter slot: its index, bytes and offset in the blob. */
typedef struct cgj_slot {
    uint32_t i, sz, off;
} cgj_slot_t;

/* Bytes [off, off + sz) of a parameter buffer, sz 1 to 8: one update of a node patched on the
 * GPU (graphs/devpatch.h). */
typedef struct cgj_piece {
    uint32_t off, sz;
} cgj_piece_t;

/* Kernel parameters of a recorded launch: layout, recorded values and replay buffers. */
typedef struct cgj_kparams {
    uint32_t n, size; /* slots, blob bytes */
    bool extra_form;  /* launched with `extra` (one slot: the whole buffer) */
    uint32_t *off, *sz;
    const uint8_t *rec; /* values seen when recorded; written only through cgj_kparams_rec_mut */
    uint8_t *live;      /* values of the current run (constants + stashed varying slots) */
    uint8_t *inexec;    /* values the instantiated graph holds now */
    uint8_t *varying;   /* per slot: 1 if the value changes between runs */
    uint32_t nvarying;
    void **ptrs; /* kernelParams array pointing into live */
    /* The slots split by `varying`, constant ones first (cgj_kparams_split): what an absorbed
     * launch's guard walks. Each part has its 8-byte slots first, then its 4-byte ones, then the
     * rest: [0, c8) [c8, c4) [c4, nconst) constant, [nconst, v8) [v8, v4) [v4, n) varying. Made
     * again whenever `varying` changes (slots_stale). */
    cgj_slot_t *slots;
    uint32_t nconst, c8, c4, v8, v4;
    /* The guard's copy of the constant 8- and 4-byte slots, made with `slots`: parameter index
     * (gidx[j], j < c4) and recorded value (g8[j], j < c8; g4[j - c8], c8 <= j < c4), side by
     * side, so that an absorbed launch's guard reads one value per slot. rec is written only
     * through cgj_kparams_rec_mut, which has them made again. */
    uint32_t *gidx;
    uint64_t *g8;
    uint32_t *g4;
    /* The varying bytes in windows of up to 8 in offset order (a device patch's entries, one
     * each): a window starts at a varying byte and takes every varying byte of the next 8, so
     * two 4-byte values side by side (a position and a KV length) are one update. The constant
     * or padding bytes a window spans are written with it, as live holds them: the same bytes
     * the node holds. */
    cgj_piece_t *piece;
    uint32_t pieces;
    bool slots_stale;
} cgj_kparams_t;

/* (Re)make kp->slots from kp->varying. */
void cgj_kparams_split(cgj_kparams_t *kp);
/* kp->rec, to be written (recorded, relocated, learned again): the guard's copy of it is made
 * again before it is next read. */
static inline uint8_t *cgj_kparams_rec_mut(cgj_kparams_t *kp)
{
    kp->slots_stale = true;
    return (uint8_t *)kp->rec;
}

/* kp's slots (and the counts of their parts), made again first where `varying` changed. */
static inline const cgj_slot_t *cgj_kparams_slots(cgj_kparams_t *kp)
{
    if (kp->slots_stale) cgj_kparams_split(kp);
    return kp->slots;
}

/* A call of `kind` on `stream`, its union zeroed. Every wrapped call begins so: zeroing the
 * union alone is a few vector stores, where an initializer zeroing the whole call is a string
 * store (rep stos on x86), tens of nanoseconds on every call. */
static inline __attribute__((always_inline)) void cgj_call_init(cgj_call_t *c, cgj_op_kind_t kind, const char *api,
                                                                CUstream stream)
{
    c->kind = kind;
    c->api = api;
    c->stream = stream;
    memset(&c->u, 0, sizeof c->u);
}

/* A host-to-device copy whose source replay copies into pinned staging at call time (a
 * synchronous copy, or one from pageable memory), as opposed to an asynchronous copy from pinned
 * memory, which reads its source when it runs. */
static inline bool cgj_call_staged(const cgj_call_t *c)
{
    return c->kind == CGJ_OP_MEMCPY && c->u.m.dir == CGJ_DIR_H2D && !c->u.m.direct;
}

/* Pointer to slot i's value as the caller passed it in call c. */
static inline const void *cgj_call_slot(const cgj_call_t *c, const cgj_kparams_t *kp, uint32_t i)
{
    return kp->extra_form ? c->u.k.blob : c->u.k.params[i];
}

/* Where a value derived from an argument goes: a kernel parameter word, or a copy's or a
 * memset's device operand. */
typedef enum cgj_libfix_field { CGJ_LIBFIX_WORD, CGJ_LIBFIX_DST, CGJ_LIBFIX_SRC } cgj_libfix_field_t;

typedef struct cgj_libfix {
    uint32_t op;    /* index of the group's op, relative to the LIB op */
    uint32_t at;    /* WORD: byte offset of the 8-byte word in the kernel's parameter buffer */
    uint32_t field; /* cgj_libfix_field_t */
    uint32_t arg;   /* the value is args[arg] + off */
    int64_t off;
} cgj_libfix_t;

/* The values of a group's op that are not kernel parameters, as one sample had them: a kernel's
 * grid, block and shared memory; a copy's or memset's operands (tracer/libop.c compares two
 * samples' and derives operands from the call's pointers as it does parameter words). */
typedef struct cgj_opvals {
    CUdeviceptr dst, src; /* device operands; a read-back's host destination as a number */
    uint64_t count;       /* copy bytes, memset elements */
    unsigned value, elem; /* memset */
    unsigned dims[7];     /* kernel: grid, block, shared memory bytes */
} cgj_opvals_t;

/* A LIB op: the library call and what replay needs to absorb it whole (tracer/libop.c). */
typedef struct cgj_libop {
    uint32_t nops; /* the ops the call issued: the next nops ops of the trace */
    uint32_t keylen, nargs;
    uint8_t *key;
    CUdeviceptr args[CGJ_LIB_MAX_ARGS];
    uint32_t free_args;                      /* bit i: args[i] varies between runs and is not part of the guard */
    CUdeviceptr live_args[CGJ_LIB_MAX_ARGS]; /* the pointers of the replay in progress, which
                                              * its kernels' live values follow (see clone) */
    uint32_t live_nargs;
    cgj_reason_code_t live_never;
    bool live_absorbed;  /* the call in progress was absorbed whole: the group's live values
                          * are cgjit's (cgj_libop_fill), not the library's */
    bool synthetic;      /* a recording's LIB op cloned from a replay that absorbed the call: its
                          * group's values are cgjit's own, no sample of the library to learn
                          * from (learning from it would confirm what was learned, right or not) */
    bool live_other_key; /* the call in progress has another key than the recorded one ... */
    uint8_t *live_key;   /* ... this one (live_keylen bytes, buffer of live_cap) */
    uint32_t live_keylen, live_cap;
    bool failed;              /* the library returned an error: it is always called */
    bool collective;          /* the call's kernels wait for peers (cgj_libcall_t): a chunk ends with
                               * its group */
    cgj_reason_code_t never;  /* the wrapper's reason never to absorb it, or CGJ_REASON_NONE */
    cgj_libew_t ew;           /* what the call computes per element (fusion/), where described */
    cgj_libgemm_t gemm;       /* the GEMM it is (fusion/), where described */
    cgj_libconv_t conv;       /* the convolution it is (fusion/), where described */
    bool absorbable;          /* the group can be replayed without calling the library */
    bool for_good;            /* not absorbable whatever the samples: its driver calls' kinds */
    cgj_reason_t why_not;     /* why not */
    uint32_t absorbable_told; /* why_not was counted in the report's reasons */
    cgj_libfix_t *fix;        /* kernel parameter words and copy/memset operands derived from args */
    uint32_t nfix;
    cgj_opvals_t *seen; /* nops entries: the group's values in the sample learned last */
    uint64_t absorbed, called;
} cgj_libop_t;

/* What the executable graph holds for a kernel, copy, memset, host or event node (Guards v2):
 * the node's parameters as the driver reported them at build time (an event node: its event),
 * updated by every patch. The op's call holds the current run's values; where they differ at
 * launch, the node is patched. */
typedef union cgj_nodeparams {
    CUDA_KERNEL_NODE_PARAMS_v2 k;
    CUDA_MEMCPY3D m;
    CUDA_MEMSET_NODE_PARAMS s;
    CUevent e;
    void *h; /* a host node: its data */
} cgj_nodeparams_t;

typedef struct cgj_op {
    cgj_call_t call;             /* owned: k.params = kp->ptrs, k.attrs copied; in a trace, the values of
                                  * the run in progress (the last run's between runs) */
    cgj_kparams_t *kp;           /* KERNEL only */
    cgj_libop_t *lib;            /* LIB only */
    void *stage;                 /* H2D: pinned staging buffer owned by the trace ... */
    size_t stage_cap;            /* ... and its size (it grows with the copy) */
    CUgraphNode node;            /* KERNEL, MEMCPY, MEMSET, HOST_FUNC, EVENT_RECORD and a STREAM_WAIT not
                                  * ordered inside its segment, in a trace: its node in the segment graph */
    CUgraphDeviceNode devnode;   /* KERNEL: the node's device handle where it is patched on the GPU
                                  * (graphs/devpatch.h), else NULL */
    cgj_nodeparams_t inexec;     /* what the executable graph holds for the node */
    uint32_t seg;                /* the segment it belongs to */
    uint32_t ev_prev;            /* EVENT_RECORD, STREAM_WAIT in a graph segment: how many ops back the
                                  * segment's previous such op is (0: none) ... */
    uint32_t ev_same;            /* ... and the nearest one with the same event when the graph was built
                                  * (0: none). Events may differ from run to run (taken from a pool), as
                                  * long as the run's events repeat in the pattern the graph was built
                                  * with (tracer/shape.c) */
    uint32_t gap_ns;             /* host time the program spent before this call since its previous
                                  * recorded call returned (its own work: Python, cuBLAS's heuristics),
                                  * the smaller of the two recorded runs', saturated; 0 for a step's
                                  * first call. Where it adds up, replay ends a chunk (graphs/graph.c) */
    uint64_t host_gen;           /* MEMCPY with a host operand: the host memory generation its node was
                                  * last set in (allocator/pointers.h) */
    bool held;                   /* ALLOC in a trace: the block a replay handed out is not freed yet */
    bool listed;                 /* in its segment's patch list: its values are compared at each launch */
    bool promoted;               /* a value became varying during replay; not yet in the patch list */
    bool fixed;                  /* the executable graph refused a new value: its values are guarded */
    cgj_reason_code_t chunk_end; /* in a trace: why a chunk ends after this op (graphs/graph.c):
                                  * BREAK_IDLE, the program works on the host before its next call
                                  * (CGJIT_CHUNK_US); BREAK_COLLECTIVE, a collective's last op;
                                  * BREAK_HOST_VISIBLE, a host_visible kernel; else
                                  * CGJ_REASON_NONE */
    bool host_visible;           /* KERNEL in a trace: an argument word points into page-locked host
                                  * memory (mapped: the kernel may write what the host reads with no CUDA
                                  * call, such as a flag it spins on): its chunk ends here (graphs/graph.c) */
    bool handoff;                /* another thread issued work that could observe this op's stream right
                                  * after it, in every recording (a PyTorch autograd worker taking over
                                  * the main thread's stream): its segment launches as soon as it is
                                  * absorbed, so the other thread never finds the work held back */
    uint32_t fused;              /* in a trace: 1 + the index of the fused chain (cgj_trace_t.fused) this op
                                  * belongs to, 0 for none; graphs/ emits the chain's kernel at its last op */
} cgj_op_t;

/* A growing list of ops: a recording in progress, or the ops of a trace. */
typedef struct cgj_oplist {
    cgj_op_t *ops;
    uint32_t n, cap;
    uint32_t kinds; /* bit k: an op of kind k is in the list (lists only grow) */
} cgj_oplist_t;
_Static_assert(CGJ_OP_COUNT <= 32, "cgj_oplist_t.kinds has a bit per op kind");

/* One graph of a trace: the capture ops [first, end), then (if end < nops) boundary op `end`. */
typedef struct cgj_segment {
    uint32_t first, end;
    CUgraph graph;
    CUgraphExec exec;
    CUstream home;    /* the stream the graph is launched on */
    CUstream *others; /* further streams the segment's ops use */
    CUevent *pre;     /* one per other stream: its work so far, waited on by home */
    uint32_t nothers;
    uint32_t ncapture; /* ops captured into the graph (none: nothing to launch) */
    CUevent done;      /* recorded after each launch where needed (staging, other streams) */
    bool has_staging, launched;
    bool chained;    /* ends at a chunk limit, not at a boundary: the next segment follows */
    bool eager;      /* fewer than CGJIT_GRAPH_MIN_OPS captured ops: no graph; replay issues
                      * them eagerly, with the run's values, where it would launch the graph */
    uint32_t *patch; /* op indices whose values vary (parameters, dims, copy/memset operands) */
    uint32_t npatch;
    CUfunction patcher;         /* cgjit's patch kernel, where kernels of the segment are patched on the
                                 * GPU (their ops' devnode set; graphs/devpatch.h) */
    struct cgj_gpu_blocks *gpu; /* its nodes at the graph's root and their blocks (graph.c) */
    bool node_stale;            /* those blocks were made again and no launch ran with them yet */
} cgj_segment_t;

/* A chain of elementwise ops [first, last] replayed as one generated kernel (fusion/). Its
 * arguments (the chain's buffers, then the element count) are fixed: the chain's ops are guarded
 * like constants, never patched, and its library calls are absorbed whole when their keys and
 * arguments match (cgj_trace_t.solo re-issues those the library's own ops cannot). */
/* What a fused entry replays as, when it is a library call of cgjit's own (a GEMM or a
 * convolution with its epilogue) instead of one generated kernel: the call's names for the
 * reports, and its functions (fusion/ defines one table per kind). */
typedef struct cgj_fused_ops {
    const char *name; /* the JSON report's "as" */
    const char *text; /* the text report's "replay as ..." */
    CUresult (*issue)(void *ctx, CUstream s);
    void (*release)(void *ctx);
} cgj_fused_ops_t;

typedef struct cgj_fused {
    uint32_t first, last;
    uint32_t nstages;  /* kernels and library calls it stands for ... */
    uint32_t nkernels; /* ... and the kernel launches among their ops */
    /* A library call of cgjit's own in place of a kernel: ops->issue(ctx, stream), released with
     * ops->release(ctx); NULL: one generated kernel (f, grid, block, args below). */
    const cgj_fused_ops_t *ops;
    void *ctx;
    CUfunction f;
    unsigned grid, block;
    uint32_t nargs;
    uint64_t *args; /* each argument's value (pointers, then the count as a long long) */
    void **ptrs;    /* kernelParams: &args[k] */
} cgj_fused_t;

/* What fused entry fu replays as: for the JSON report ("kernel", "cublaslt_matmul", ...) or,
 * text, for the text report. */
static inline const char *cgj_fused_as(const cgj_fused_t *fu, bool text)
{
    if (fu->ops) return text ? fu->ops->text : fu->ops->name;
    return text ? "one generated kernel" : "kernel";
}

#define CGJ_EXIT_KINDS 8
#define CGJ_FUSE_DROPS_KEPT 8
/* Side exits of a trace, grouped by op and reason code (for the report); the detail is the
 * first such exit's. */
typedef struct cgj_exit_count {
    cgj_reason_t reason;
    uint64_t count;
} cgj_exit_count_t;

typedef struct cgj_trace {
    cgj_oplist_t list;
    cgj_exit_count_t exits[CGJ_EXIT_KINDS];
    uint32_t nexits;
    uint64_t other_exits; /* exits beyond the kinds kept */
    CUcontext ctx;        /* the context its graphs were built in */
    CUdeviceptr region;   /* pool region of the in-step allocations */
    uint64_t pool_bytes, naive_bytes, lower_bound;
    uint32_t nblocks;
    uint32_t *allocs; /* the nblocks ALLOC ops, served from the region */
    cgj_segment_t *segs;
    uint32_t nsegs;
    uint32_t kernels, varying_slots;
    cgj_fused_t *fused;               /* fused chains (fusion/), in op order */
    uint32_t nfused;                  /* entries of fused */
    uint32_t fused_chains, fused_ops; /* those in use (a segment issued eagerly has none),
                                       * and the kernel launches they replace */
    uint32_t fused_gemms;             /* of the chains, GEMMs made cuBLASLt matmuls (with
                                       * the bias and activation after them) */
    cgj_fused_t *solo;                /* a generated kernel for each library call of a chain
                                       * whose own ops replay cannot reproduce (not
                                       * absorbable): what re-issues it on a side exit */
    uint32_t nsolo;
    uint32_t fuse_drops;                              /* chains (or kernels) the fusion pass dropped ... */
    cgj_reason_t fuse_dropped;                        /* ... the last one's reason ... */
    cgj_reason_t fuse_drop_list[CGJ_FUSE_DROPS_KEPT]; /* ... and the first ones' (the report) */
    uint64_t replays, side_exits;
    uint64_t plan_ns, build_ns, instantiate_ns; /* what building it cost on the host */
    uint64_t fuse_ns;                           /* of build_ns: fused kernels compiled and validated ... */
    uint64_t fuse_compile_ns;                   /* ... of which compiled (NVRTC or a cache) and loaded */
    uint32_t fuse_cold;                         /* kernels NVRTC compiled (found in no cache) */
} cgj_trace_t;

/* ---- op.c: ops from calls, op lists ---- */

/* Append a deep copy of call `c` to `l`. False (with *why set) if it cannot be recorded. */
bool cgj_oplist_record(cgj_oplist_t *l, const cgj_call_t *c, cgj_reason_code_t *why);
/* Append a deep copy of op `o` with its live parameter values as the recorded ones. */
void cgj_oplist_clone(cgj_oplist_t *l, const cgj_op_t *o);
void cgj_oplist_free(cgj_oplist_t *l);
/* Describe an op for logs: "cuLaunchKernel(name)". */
const char *cgj_op_describe(const cgj_op_t *o, char *buf, size_t len);
/* The reason a boundary op ends a segment (BREAK_*). */
cgj_reason_code_t cgj_op_break_reason(const cgj_op_t *o);
/* Does an op of kind k name an event (a record, or a wait)? */
static inline bool cgj_op_names_event(cgj_op_kind_t k)
{
    return k == CGJ_OP_EVENT_RECORD || k == CGJ_OP_STREAM_WAIT;
}
/* How many ops back from event op o the nearest event op of its graph segment naming event ev
 * is, along the segment's chain of event ops (ev_prev); 0 for none. */
uint32_t cgj_op_event_back(const cgj_op_t *o, CUevent ev);

/* ---- blocks.c: the in-step allocations of a recording ---- */

typedef struct cgj_block {
    CUdeviceptr base;
    size_t bytes;
    uint32_t start, end; /* ALLOC op index; POOL_FREE op index, or the op count if it escapes */
    bool escapes;
} cgj_block_t;
typedef struct cgj_blocks {
    cgj_block_t *b; /* in the order of their ALLOC ops */
    uint32_t n;
    uint32_t *by_base; /* block indices sorted by base address, for range lookups */
    size_t max_bytes;  /* the largest block: how far below an address a block may start */
} cgj_blocks_t;
/* The in-step allocations of l. Release with cgj_blocks_free. */
cgj_blocks_t cgj_blocks_of(const cgj_oplist_t *l);
void cgj_blocks_free(cgj_blocks_t *bl);
/* Index of the block of bl (NULL: none) that address p falls in at op `at`, or -1; the lowest
 * such index where lifetimes touch. */
int cgj_blocks_find(const cgj_blocks_t *bl, CUdeviceptr p, uint32_t at);
/* Is `addr` the base of an in-step allocation of l that l has not freed (no index built)? */
bool cgj_oplist_holds(const cgj_oplist_t *l, CUdeviceptr addr);

/* ---- libop.c: a library call's record ---- */

cgj_libop_t *cgj_libop_new(const cgj_libcall_t *lc);
/* A copy for a recording that continues a replay (side exit): the call it describes is the
 * replay's (its pointers, its key), not the recorded one. */
cgj_libop_t *cgj_libop_clone(const cgj_libop_t *l);
/* Replay reached the op with call lc: note its pointers and key, and whether it is absorbed
 * whole (its key then is the recorded one, and the group's live values are cgjit's). */
void cgj_libop_note_call(cgj_libop_t *l, const cgj_libcall_t *lc, bool absorbed);
void cgj_libop_free(cgj_libop_t *l);
/* May replay absorb a library call whole on what earlier runs of it suggested (tracer/libop.c
 * learns it)? Only under CGJIT_LIBS_LEARNED, an option documented as unsafe: a library keeps
 * state cgjit cannot see (algorithm caches and heuristics, workspace semaphores, what calls of
 * other shapes left behind), so two runs that looked alike prove nothing about the third. By
 * default the library runs on every call and its driver calls replay like any other. */
static inline bool cgj_libop_learned(void)
{
    return cgj_cfg.LIBS_LEARNED != 0;
}
/* Does call lc have the key and fixed arguments LIB op l recorded? */
bool cgj_libop_matches(const cgj_libop_t *l, const cgj_libcall_t *lc);
/* Replay of a group without the library: write the kernel parameter values the library would
 * have passed (recorded keyed values, arguments + offsets) into the group's live buffers, and
 * the derived copy and memset operands into the ops' calls (patched into the graph). */
void cgj_libop_fill(cgj_op_t *lib_op, const cgj_libcall_t *lc);
/* The values of call c that cgj_opvals_t holds. */
void cgj_opvals_of(const cgj_call_t *c, cgj_opvals_t *v);

#endif /* CGJ_IR_H */
