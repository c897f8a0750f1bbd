/*
 * fakecuda.c — a fake libcuda.so.1 for tests on machines without a GPU.
 *
 * cgjit interposes the CUDA driver API. To test that path without a GPU, this library stands in
 * for libcuda.so.1: it exports the driver entry points cgjit touches, under their exact ABI names
 * (cuMemcpyHtoD_v2, cuLaunchKernel_ptsz, ...), and runs everything synchronously on the CPU.
 *
 *  - Device memory is host memory: a CUdeviceptr is a host address. Every allocation is entered
 *    in a block registry, so cuPointerGetAttribute can tell device, pinned and pageable memory
 *    apart as the real driver does, and so copies and sets can reject device ranges that lie in
 *    no live allocation (the real driver fails those too, or faults).
 *  - Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, ...) reserves host
 *    address space and maps it in place; a mapped range is device memory like any allocation.
 *    Memory pools reduce to cuMemAllocAsync. See the VMM section for the differences.
 *  - A kernel is a host function registered with fakecuda_register_kernel(); its handle serves as
 *    CUfunction or CUkernel. Launching packs the parameter values into a private buffer (from
 *    kernelParams or from the `extra` buffer) and calls the function with pointers into it.
 *  - Work on a stream either runs at once on the calling thread or, while the stream captures,
 *    becomes a node appended to the capture's graph. Graphs are linear: nodes run in capture
 *    order. Kernel nodes hold parameter VALUES copied at capture time, as the real driver does;
 *    copy nodes hold addresses, so a host-to-device node reads its source at launch time.
 *  - An exec (instantiated graph) owns deep copies of its graph's nodes and remembers, for each,
 *    the source node, because cuGraphExecKernelNodeSetParams names the node of the source graph.
 *
 * The real driver's capture rules are mirrored, because cgjit must obey them on a GPU:
 *  - work on the legacy default stream while a blocking stream captures fails with
 *    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (legacy-stream work would depend on the capture);
 *  - a synchronizing or "potentially unsafe" call (sync copies and sets, stream/event sync and
 *    query, allocation and free) fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while a capture
 *    in GLOBAL mode runs in any thread, or one in THREAD_LOCAL mode runs in the calling thread;
 *  - syncing or querying a capturing stream, or syncing the context during any capture, fails
 *    with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
 * Each such failure invalidates the captures it concerns: later work on them fails with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and cuStreamEndCapture returns that error and no graph.
 *
 * Exports are defined twice over: a file-local implementation fc_NAME and the exported symbol
 * NAME as an alias of it. cuGetProcAddress hands out fc_NAME, which is the address dlsym(handle,
 * "NAME") returns, and it binds inside this library even when cgjit (loaded first) exports a
 * wrapper of the same name, so a wrapper that calls the "real" function never calls itself.
 *
 * All state sits behind one mutex, never held while a kernel or host function runs.
 */
#define _GNU_SOURCE
/* Declare every ABI variant of the driver functions (_v2, _ptds, _ptsz, v1 cuGetProcAddress) under
 * its exact exported name, as the driver's own build does; the compiler then checks our
 * definitions against the header's prototypes. */
#define __CUDA_API_VERSION_INTERNAL 1

#include "fakecuda.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FC_API __attribute__((visibility("default")))

/* Define the exported driver function NAME: file-local fc_NAME, exported NAME as its alias. */
#define FC_DEFINE(name, params)                                       \
    static CUresult fc_##name params;                                 \
    FC_API CUresult name params __attribute__((alias("fc_" #name))); \
    static CUresult fc_##name params

/* First statement of every export: a failure queued by fakecuda_fail_next for this name. */
#define FAIL_POINT()                              \
    do {                                          \
        CUresult fail_ = fail_take(__func__ + 3); \
        if (fail_ != CUDA_SUCCESS) return fail_;  \
    } while (0)

/* NAME and its per-thread-default-stream twin NAME_ptds / NAME_ptsz, which differ only in the
 * meaning of the NULL stream: both return the expression, with `ptds` 0 in NAME and 1 in the twin. */
#define FC_DEFINE_PT(name, twin, params, ...)                   \
    FC_DEFINE(name, params)                                     \
    {                                                           \
        enum { ptds = 0 };                                      \
        FAIL_POINT();                                           \
        return __VA_ARGS__;                                     \
    }                                                           \
    FC_DEFINE(twin, params)                                     \
    {                                                           \
        enum { ptds = 1 };                                      \
        FAIL_POINT();                                           \
        return __VA_ARGS__;                                     \
    }
#define FC_PTDS(name, params, ...) FC_DEFINE_PT(name, name##_ptds, params, __VA_ARGS__)
#define FC_PTSZ(name, params, ...) FC_DEFINE_PT(name, name##_ptsz, params, __VA_ARGS__)

#define ALLOC_ALIGN 256 /* what cuMemAlloc guarantees */
#define MAX_SMEM 232448u
#define MAX_PENDING_FAILS 64

/* ---------------------------------------------------------------------------------------------
 * Global state
 * ------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static fakecuda_counts_t g_counts;
static char g_ctx_obj; /* the one context; only its address matters */
#define FAKE_CTX ((CUcontext)(void *)&g_ctx_obj)

static void lock(void) { pthread_mutex_lock(&g_lock); }
static void unlock(void) { pthread_mutex_unlock(&g_lock); }

static void bump(unsigned long *counter)
{
    lock();
    ++*counter;
    unlock();
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* Failures queued by fakecuda_fail_next, taken in order. */
static struct {
    char name[64];
    CUresult err;
} g_fails[MAX_PENDING_FAILS];
static int g_nfails;

static CUresult fail_take(const char *name)
{
    CUresult err = CUDA_SUCCESS;
    lock();
    for (int i = 0; i < g_nfails; i++) {
        if (strcmp(g_fails[i].name, name) != 0) continue;
        err = g_fails[i].err;
        memmove(&g_fails[i], &g_fails[i + 1], (size_t)(g_nfails - i - 1) * sizeof g_fails[0]);
        g_nfails--;
        break;
    }
    unlock();
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * Live handles. Every handle given out (kernel, stream, event, graph, node, exec) is registered
 * here, so a stale or foreign handle is answered with an error instead of being dereferenced.
 * ------------------------------------------------------------------------------------------- */

typedef enum { K_KERNEL, K_STREAM, K_EVENT, K_GRAPH, K_NODE, K_EXEC, K_VMM } handle_kind;

static struct live {
    const void *p;
    handle_kind kind;
} *g_live;
static size_t g_nlive, g_caplive;

static int live_add(const void *p, handle_kind kind)
{
    if (g_nlive == g_caplive) {
        size_t cap = g_caplive ? 2 * g_caplive : 256;
        struct live *grown = realloc(g_live, cap * sizeof *grown);
        if (!grown) return -1;
        g_live = grown;
        g_caplive = cap;
    }
    g_live[g_nlive].p = p;
    g_live[g_nlive].kind = kind;
    g_nlive++;
    return 0;
}

static void live_del(const void *p)
{
    for (size_t i = 0; i < g_nlive; i++) {
        if (g_live[i].p == p) {
            g_live[i] = g_live[--g_nlive];
            return;
        }
    }
}

static void *live_get(const void *p, handle_kind kind)
{
    if (!p) return NULL;
    for (size_t i = 0; i < g_nlive; i++)
        if (g_live[i].p == p && g_live[i].kind == kind) return (void *)p;
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Kernels and their parameter buffers
 * ------------------------------------------------------------------------------------------- */

typedef struct fc_kernel {
    char *name;
    fakecuda_kernel_fn fn;
    int nparams;
    size_t *size, *offset;
    size_t total; /* bytes of the packed parameter buffer */
    int as_cukernel, opaque;
} fc_kernel;

static fc_kernel *kernel_get(const void *handle) { return live_get(handle, K_KERNEL); }

/* Natural alignment of a parameter: min(size, 8), rounded down to a power of two. */
static size_t param_align(size_t size)
{
    size_t a = 8;
    while (a > size) a /= 2;
    return a ? a : 1;
}

/* One calloc'd block: nparams pointers, then the packed parameter bytes they point into. Zeroed,
 * so padding bytes are deterministic for anyone who compares parameter buffers. */
static size_t args_head(const fc_kernel *k) { return align_up((size_t)k->nparams * sizeof(void *), 16); }

static unsigned char *args_bytes(const fc_kernel *k, void **argv) { return (unsigned char *)argv + args_head(k); }

static void **args_new(const fc_kernel *k)
{
    void **argv = calloc(1, args_head(k) + k->total + 1);
    if (!argv) return NULL;
    for (int i = 0; i < k->nparams; i++) argv[i] = args_bytes(k, argv) + k->offset[i];
    return argv;
}

/* The packed buffer an `extra` array names (CU_LAUNCH_PARAM_BUFFER_POINTER/_SIZE/_END). */
static CUresult extra_parse(void **extra, const void **buf, size_t *bufsize)
{
    int have_size = 0;
    *buf = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            *buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            if (!extra[i + 1]) return CUDA_ERROR_INVALID_VALUE;
            *bufsize = *(const size_t *)extra[i + 1];
            have_size = 1;
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return (*buf && have_size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Copy a launch's parameter values (from kernelParams or extra) into a new args block. */
static CUresult args_pack(const fc_kernel *k, void **params, void **extra, void ***out)
{
    const void *buf = NULL;
    size_t bufsize = 0;
    if (params && extra) return CUDA_ERROR_INVALID_VALUE;
    if (extra) {
        CUresult err = extra_parse(extra, &buf, &bufsize);
        if (err != CUDA_SUCCESS) return err;
        if (bufsize < k->total) return CUDA_ERROR_INVALID_VALUE;
    } else if (k->nparams > 0) {
        if (!params) return CUDA_ERROR_INVALID_VALUE;
        for (int i = 0; i < k->nparams; i++)
            if (!params[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    void **argv = args_new(k);
    if (!argv) return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned char *dst = args_bytes(k, argv);
    if (buf) {
        memcpy(dst, buf, k->total);
    } else {
        for (int i = 0; i < k->nparams; i++) memcpy(dst + k->offset[i], params[i], k->size[i]);
    }
    *out = argv;
    return CUDA_SUCCESS;
}

static CUresult check_dims(const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    for (int i = 0; i < 3; i++)
        if (grid[i] == 0 || block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned long long)block[0] * block[1] * block[2] > 1024) return CUDA_ERROR_INVALID_VALUE;
    return smem > MAX_SMEM ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Memory blocks: every allocation and registration, for cuPointerGetAttribute and range checks.
 * ------------------------------------------------------------------------------------------- */

/* MEM_VMM: one cuMemMap mapping (device memory inside a cuMemAddressReserve reservation). */
typedef enum { MEM_DEVICE, MEM_PINNED, MEM_REGISTERED, MEM_VMM } mem_kind;

#define VMM_ACCESS_UNSET (-1) /* cuMemSetAccess not called yet: the fake allows any access */

static struct block {
    uintptr_t base;
    size_t size;
    mem_kind kind;
    struct vmm_handle *vh; /* MEM_VMM: the mapped physical handle */
    int access;            /* MEM_VMM: CUmemAccess_flags set for device 0, or VMM_ACCESS_UNSET */
} *g_blocks;
static size_t g_nblocks, g_capblocks;

static struct block *block_find(uintptr_t p)
{
    for (size_t i = 0; i < g_nblocks; i++)
        if (p >= g_blocks[i].base && p - g_blocks[i].base < g_blocks[i].size) return &g_blocks[i];
    return NULL;
}

static int block_add(uintptr_t base, size_t size, mem_kind kind)
{
    if (g_nblocks == g_capblocks) {
        size_t cap = g_capblocks ? 2 * g_capblocks : 256;
        struct block *grown = realloc(g_blocks, cap * sizeof *grown);
        if (!grown) return -1;
        g_blocks = grown;
        g_capblocks = cap;
    }
    g_blocks[g_nblocks++] = (struct block){base, size, kind, NULL, VMM_ACCESS_UNSET};
    return 0;
}

static void block_del(struct block *b) { *b = g_blocks[--g_nblocks]; }

/* Is [p, p+n) inside one live block, or inside VMM mappings that follow each other without a gap
 * (a reservation mapped chunk by chunk is one device range)? Device-side addresses of copies and
 * sets must be. A VMM mapping whose access was set must allow the access (write: read-write). */
static int range_known(uintptr_t p, size_t n, int write)
{
    for (;;) {
        const struct block *b = block_find(p);
        if (!b) return 0;
        if (b->kind == MEM_VMM && b->access != VMM_ACCESS_UNSET &&
            (write ? b->access != CU_MEM_ACCESS_FLAGS_PROT_READWRITE : b->access == CU_MEM_ACCESS_FLAGS_PROT_NONE))
            return 0;
        size_t left = b->size - (p - b->base);
        if (n <= left) return 1;
        if (b->kind != MEM_VMM) return 0;
        p += left;
        n -= left;
    }
}

/* Allocate zeroed, 256-byte aligned memory and enter it in the registry. */
static CUresult mem_new(size_t bytes, mem_kind kind, void **out)
{
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    void *p = aligned_alloc(ALLOC_ALIGN, align_up(bytes, ALLOC_ALIGN));
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, align_up(bytes, ALLOC_ALIGN));
    lock();
    int bad = block_add((uintptr_t)p, bytes, kind);
    unlock();
    if (bad) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = p;
    return CUDA_SUCCESS;
}

/* Free a block allocated by mem_new, given its base; kind must match. */
static CUresult mem_release(uintptr_t base, mem_kind kind)
{
    lock();
    struct block *b = block_find(base);
    int ok = b && b->base == base && b->kind == kind;
    if (ok) block_del(b);
    unlock();
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    free((void *)base);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Operations, graphs, execs
 * ------------------------------------------------------------------------------------------- */

/* One unit of stream work; CU_GRAPH_NODE_TYPE_EMPTY means "nothing to run, nothing to capture"
 * (a plain event record or wait). */
typedef struct fc_op {
    CUgraphNodeType type;
    union {
        struct {
            fc_kernel *k;
            unsigned grid[3], block[3], smem;
            void **argv;
        } kern;
        struct {
            void *dst;
            const void *src;
            size_t n;
        } copy;
        struct {
            void *dst;
            unsigned value, elem;
            size_t count;
        } set;
        struct {
            CUhostFn fn;
            void *data;
        } host;
        CUevent event;
    };
} fc_op;

typedef struct fc_graph {
    struct fc_node **nodes;
    size_t n, cap;
} fc_graph;

typedef struct fc_node {
    fc_graph *graph;
    fc_op op;
} fc_node;

typedef struct fc_exec {
    size_t n;
    fc_node **src; /* the source-graph node each op came from */
    fc_op *ops;
} fc_exec;

static void op_clear(fc_op *op)
{
    if (op->type == CU_GRAPH_NODE_TYPE_KERNEL) free(op->kern.argv);
    op->type = CU_GRAPH_NODE_TYPE_EMPTY;
}

/* Deep copy: a kernel op gets its own parameter values. */
static CUresult op_dup(fc_op *dst, const fc_op *src)
{
    *dst = *src;
    if (src->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_SUCCESS;
    const fc_kernel *k = src->kern.k;
    dst->kern.argv = args_new(k);
    if (!dst->kern.argv) {
        dst->type = CU_GRAPH_NODE_TYPE_EMPTY;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(args_bytes(k, dst->kern.argv), args_bytes(k, src->kern.argv), k->total);
    return CUDA_SUCCESS;
}

static void run_set(const fc_op *op)
{
    unsigned char *d = op->set.dst;
    for (size_t i = 0; i < op->set.count; i++) {
        if (op->set.elem == 1) {
            d[i] = (unsigned char)op->set.value;
        } else if (op->set.elem == 2) {
            uint16_t v = (uint16_t)op->set.value;
            memcpy(d + 2 * i, &v, 2);
        } else {
            uint32_t v = op->set.value;
            memcpy(d + 4 * i, &v, 4);
        }
    }
}

/* Execute one op on the calling thread. Called without the lock. */
static void op_run(const fc_op *op)
{
    switch (op->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        bump(&g_counts.kernels_run);
        op->kern.k->fn(op->kern.argv, op->kern.grid, op->kern.block, op->kern.smem);
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        bump(&g_counts.copies);
        if (op->copy.n) memmove(op->copy.dst, op->copy.src, op->copy.n);
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        bump(&g_counts.memsets);
        run_set(op);
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        bump(&g_counts.host_funcs_run);
        op->host.fn(op->host.data);
        break;
    default: /* event record/wait, empty: events are always complete */
        break;
    }
}

static CUresult graph_push(fc_graph *g, fc_node *node)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        fc_node **grown = realloc(g->nodes, cap * sizeof *grown);
        if (!grown) return CUDA_ERROR_OUT_OF_MEMORY;
        g->nodes = grown;
        g->cap = cap;
    }
    g->nodes[g->n++] = node;
    return CUDA_SUCCESS;
}

/* Under the lock. */
static fc_graph *graph_new(void)
{
    fc_graph *g = calloc(1, sizeof *g);
    if (g && live_add(g, K_GRAPH) != 0) {
        free(g);
        return NULL;
    }
    return g;
}

/* Under the lock. */
static void graph_free(fc_graph *g)
{
    for (size_t i = 0; i < g->n; i++) {
        live_del(g->nodes[i]);
        op_clear(&g->nodes[i]->op);
        free(g->nodes[i]);
    }
    free(g->nodes);
    live_del(g);
    free(g);
}

/* Under the lock. */
static void exec_free(fc_exec *x)
{
    for (size_t i = 0; i < x->n; i++) op_clear(&x->ops[i]);
    free(x->ops);
    free(x->src);
    live_del(x);
    free(x);
}

/* ---------------------------------------------------------------------------------------------
 * Streams and the capture rules
 * ------------------------------------------------------------------------------------------- */

typedef struct fc_stream {
    unsigned flags;
    CUstreamCaptureStatus status;
    CUstreamCaptureMode mode;
    pthread_t owner; /* thread that began the capture */
    cuuint64_t capture_id;
    fc_graph *graph;  /* the capture's graph while status != NONE */
    CUgraphNode last; /* last node appended; what cuStreamGetCaptureInfo reports */
} fc_stream;

static cuuint64_t g_next_capture_id = 1;
static int g_active_captures;

/* Resolve a stream handle (under the lock). *s is NULL for a default stream; *legacy says
 * whether that default stream is the legacy one (NULL means legacy unless the call is a
 * per-thread-default-stream variant). */
static CUresult stream_get(CUstream h, int ptds, fc_stream **s, int *legacy)
{
    *s = NULL;
    *legacy = 0;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        *legacy = h == CU_STREAM_LEGACY || (h == NULL && !ptds);
        return CUDA_SUCCESS;
    }
    *s = live_get(h, K_STREAM);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static void capture_invalidate(fc_stream *s)
{
    if (s->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return;
    s->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    g_active_captures--;
}

enum {
    RULE_LEGACY = 1, /* async work on the legacy default stream */
    RULE_UNSAFE = 2, /* a synchronizing / potentially unsafe call */
    RULE_ALL = 4,    /* waits for every stream (context synchronize) */
};

/* Apply the real driver's capture rules to a call that is not work on a capturing stream
 * (under the lock); invalidates the captures the call breaks and returns the error. */
static CUresult capture_rules(int rules)
{
    CUresult err = CUDA_SUCCESS;
    if (g_active_captures == 0) return CUDA_SUCCESS;
    for (size_t i = 0; i < g_nlive; i++) {
        if (g_live[i].kind != K_STREAM) continue;
        fc_stream *s = (fc_stream *)g_live[i].p;
        if (s->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) continue;
        int own = pthread_equal(s->owner, pthread_self());
        if ((rules & RULE_LEGACY) && !(s->flags & CU_STREAM_NON_BLOCKING)) {
            capture_invalidate(s);
            err = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        } else if ((rules & RULE_ALL) ||
                   ((rules & RULE_UNSAFE) && (s->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                                             (s->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && own)))) {
            capture_invalidate(s);
            if (err == CUDA_SUCCESS) err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    return err;
}

/* A call that observes or waits for stream h (sync, query): fails on a capturing stream. */
static CUresult stream_observe(CUstream h, int ptds)
{
    fc_stream *s;
    int legacy;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        capture_invalidate(s);
        err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (err == CUDA_SUCCESS) {
        err = capture_rules(RULE_UNSAFE | (legacy ? RULE_LEGACY : 0));
    }
    unlock();
    return err;
}

/* Append op to s's capture (under the lock); takes ownership of op's contents. */
static CUresult capture_append(fc_stream *s, fc_op *op)
{
    if (op->type == CU_GRAPH_NODE_TYPE_EMPTY) return CUDA_SUCCESS;
    fc_node *node = calloc(1, sizeof *node);
    if (!node) return CUDA_ERROR_OUT_OF_MEMORY;
    node->graph = s->graph;
    node->op = *op;
    if (graph_push(s->graph, node) != CUDA_SUCCESS || live_add(node, K_NODE) != 0) {
        if (s->graph->n && s->graph->nodes[s->graph->n - 1] == node) s->graph->n--;
        free(node);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->type = CU_GRAPH_NODE_TYPE_EMPTY; /* moved into the node */
    s->last = (CUgraphNode)node;
    return CUDA_SUCCESS;
}

/*
 * Issue op on stream h: append it to the capture if h captures, else run it now. `blocking`
 * marks a synchronous API call (which also counts as potentially unsafe during capture).
 * Takes ownership of op's contents in every case.
 */
static CUresult submit(CUstream h, int ptds, int blocking, fc_op *op)
{
    fc_stream *s;
    int legacy, captured = 0;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        err = capture_append(s, op);
        captured = 1;
    } else if (err == CUDA_SUCCESS && s && s->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        err = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (err == CUDA_SUCCESS) {
        err = capture_rules((legacy ? RULE_LEGACY : 0) | (blocking ? RULE_UNSAFE : 0));
    }
    if (err == CUDA_SUCCESS && !captured && op->type == CU_GRAPH_NODE_TYPE_KERNEL)
        g_counts.eager_launches++;
    unlock();
    if (err == CUDA_SUCCESS && !captured) op_run(op);
    op_clear(op);
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * Init, device and context
 * ------------------------------------------------------------------------------------------- */

FC_DEFINE(cuInit, (unsigned int flags))
{
    FAIL_POINT();
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_DEFINE(cuDriverGetVersion, (int *version))
{
    FAIL_POINT();
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuDeviceGet, (CUdevice * device, int ordinal))
{
    FAIL_POINT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuDeviceGetCount, (int *count))
{
    FAIL_POINT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuDeviceGetName, (char *name, int len, CUdevice dev))
{
    FAIL_POINT();
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", "fakecuda CPU device");
    return CUDA_SUCCESS;
}

/* Plausible values of an H100-class device (compute capability 9.0); 0 for the rest. */
static int device_attribute(CUdevice_attribute attr)
{
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return (int)MAX_SMEM;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    default: return 0;
    }
}

FC_DEFINE(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev))
{
    FAIL_POINT();
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pi = device_attribute(attrib);
    return CUDA_SUCCESS;
}

FC_DEFINE(cuCtxGetCurrent, (CUcontext * pctx))
{
    FAIL_POINT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = FAKE_CTX; /* one context, always current */
    return CUDA_SUCCESS;
}

FC_DEFINE(cuCtxGetDevice, (CUdevice * device))
{
    FAIL_POINT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuCtxSetCurrent, (CUcontext ctx))
{
    FAIL_POINT();
    return (ctx == NULL || ctx == FAKE_CTX) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FC_DEFINE(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev))
{
    FAIL_POINT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pctx = FAKE_CTX;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuCtxSynchronize, (void))
{
    FAIL_POINT();
    lock();
    CUresult err = capture_rules(RULE_ALL); /* it would wait for the capturing streams too */
    if (err == CUDA_SUCCESS) {
        g_counts.syncs++;
        g_counts.device_syncs++;
    }
    unlock();
    return err;
}

/* X(code, message): the messages of the real driver, for the codes a test is likely to see. */
#define FC_ERRORS(X) \
    X(CUDA_SUCCESS, "no error") \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down") \
    X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library") \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid") \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
    X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed") \
    X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid") \
    X(CUDA_ERROR_FILE_NOT_FOUND, "file not found") \
    X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS") \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
    X(CUDA_ERROR_NOT_READY, "device not ready") \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch") \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated") \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already " \
      "mapped") \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address") \
    X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure") \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted") \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work") \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing " \
      "blocking stream") \
    X(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from " \
      "another thread") \
    X(CUDA_ERROR_TIMEOUT, "wait operation timed out") \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not performed because it included " \
      "changes which violated constraints specific to instantiated graph update") \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED, "function not loaded") \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

static const struct {
    CUresult code;
    const char *name, *msg;
} g_errors[] = {
#define FC_ERROR_ROW(code, msg) {code, #code, msg},
    FC_ERRORS(FC_ERROR_ROW)
#undef FC_ERROR_ROW
};

static CUresult error_text(CUresult error, int want_name, const char **out)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++) {
        if (g_errors[i].code == error) {
            *out = want_name ? g_errors[i].name : g_errors[i].msg;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

FC_DEFINE(cuGetErrorString, (CUresult error, const char **pStr))
{
    FAIL_POINT();
    return error_text(error, 0, pStr);
}

FC_DEFINE(cuGetErrorName, (CUresult error, const char **pStr))
{
    FAIL_POINT();
    return error_text(error, 1, pStr);
}

/* ---------------------------------------------------------------------------------------------
 * Launches and kernel introspection
 * ------------------------------------------------------------------------------------------- */

static CUresult launch_kernel(const void *f, const unsigned grid[3], const unsigned block[3], unsigned smem,
                              CUstream h, int ptds, void **params, void **extra)
{
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    lock();
    fc_kernel *k = kernel_get(f);
    unlock();
    if (!k) return CUDA_ERROR_INVALID_HANDLE;
    CUresult err = check_dims(grid, block, smem);
    if (err == CUDA_SUCCESS) err = args_pack(k, params, extra, &op.kern.argv);
    if (err != CUDA_SUCCESS) return err;
    op.kern.k = k;
    memcpy(op.kern.grid, grid, sizeof op.kern.grid);
    memcpy(op.kern.block, block, sizeof op.kern.block);
    op.kern.smem = smem;
    return submit(h, ptds, 0, &op);
}

static CUresult launch_classic(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream h, int ptds, void **params, void **extra)
{
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return launch_kernel(f, grid, block, smem, h, ptds, params, extra);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, int ptds, void **params, void **extra)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
    const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    return launch_kernel(f, grid, block, c->sharedMemBytes, c->hStream, ptds, params, extra);
}

FC_PTSZ(cuLaunchKernel, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz, unsigned int smem, CUstream h, void **kernelParams,
                           void **extra),
        launch_classic(f, gx, gy, gz, bx, by, bz, smem, h, ptds, kernelParams, extra))

FC_PTSZ(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
        launch_ex(config, f, ptds, kernelParams, extra))

static CUresult launch_host(CUstream h, int ptds, CUhostFn fn, void *data)
{
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_HOST, .host = {fn, data}};
    return submit(h, ptds, 0, &op);
}

FC_PTSZ(cuLaunchHostFunc, (CUstream hStream, CUhostFn fn, void *userData),
        launch_host(hStream, ptds, fn, userData))

/* The kernel behind a handle, if it is the flavour (CUfunction or CUkernel) the call expects. */
static CUresult kernel_flavour(const void *handle, int want_cukernel, fc_kernel **out)
{
    lock();
    fc_kernel *k = kernel_get(handle);
    unlock();
    if (!k || !k->as_cukernel != !want_cukernel) return CUDA_ERROR_INVALID_HANDLE;
    *out = k;
    return CUDA_SUCCESS;
}

static CUresult param_info(const void *handle, int want_cukernel, size_t index, size_t *offset, size_t *size)
{
    fc_kernel *k;
    CUresult err = kernel_flavour(handle, want_cukernel, &k);
    if (err != CUDA_SUCCESS) return err;
    if (k->opaque) return CUDA_ERROR_NOT_SUPPORTED;
    if (!offset || index >= (size_t)k->nparams) return CUDA_ERROR_INVALID_VALUE;
    *offset = k->offset[index];
    if (size) *size = k->size[index]; /* optional, as in the real driver */
    return CUDA_SUCCESS;
}

FC_DEFINE(cuFuncGetParamInfo, (CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize))
{
    FAIL_POINT();
    return param_info(func, 0, paramIndex, paramOffset, paramSize);
}

FC_DEFINE(cuKernelGetParamInfo, (CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize))
{
    FAIL_POINT();
    return param_info(kernel, 1, paramIndex, paramOffset, paramSize);
}

static CUresult kernel_name(const void *handle, int want_cukernel, const char **name)
{
    fc_kernel *k;
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = kernel_flavour(handle, want_cukernel, &k);
    if (err == CUDA_SUCCESS) *name = k->name;
    return err;
}

FC_DEFINE(cuFuncGetName, (const char **name, CUfunction hfunc))
{
    FAIL_POINT();
    return kernel_name(hfunc, 0, name);
}

FC_DEFINE(cuKernelGetName, (const char **name, CUkernel hfunc))
{
    FAIL_POINT();
    return kernel_name(hfunc, 1, name);
}

/* ---------------------------------------------------------------------------------------------
 * Copies and sets. `dev_dst`/`dev_src` mark the sides that must lie in a live allocation; the
 * unified cuMemcpy checks neither (UVA: any address goes). Sync variants run on the legacy
 * stream, or the per-thread one for _ptds.
 * ------------------------------------------------------------------------------------------- */

#define PTR(d) ((void *)(uintptr_t)(d))

static CUresult do_copy(void *dst, int dev_dst, const void *src, int dev_src, size_t n, CUstream h, int ptds,
                        int blocking)
{
    if (n > 0) {
        lock();
        int ok = (!dev_dst || range_known((uintptr_t)dst, n, 1)) && (!dev_src || range_known((uintptr_t)src, n, 0));
        unlock();
        if (!ok) return CUDA_ERROR_INVALID_VALUE;
    }
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .copy = {dst, src, n}};
    return submit(h, ptds, blocking, &op);
}

FC_PTDS(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n),
        do_copy(PTR(dst), 0, PTR(src), 0, n, NULL, ptds, 1))

FC_PTSZ(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(PTR(dst), 0, PTR(src), 0, n, h, ptds, 0))

FC_PTDS(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n),
        do_copy(PTR(dst), 1, src, 0, n, NULL, ptds, 1))

FC_PTDS(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n),
        do_copy(dst, 0, PTR(src), 1, n, NULL, ptds, 1))

FC_PTDS(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n),
        do_copy(PTR(dst), 1, PTR(src), 1, n, NULL, ptds, 1))

FC_PTSZ(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream h),
        do_copy(PTR(dst), 1, src, 0, n, h, ptds, 0))

FC_PTSZ(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(dst, 0, PTR(src), 1, n, h, ptds, 0))

FC_PTSZ(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(PTR(dst), 1, PTR(src), 1, n, h, ptds, 0))

static CUresult do_set(CUdeviceptr dst, unsigned value, unsigned elem, size_t count, CUstream h, int ptds,
                       int blocking)
{
    if (dst % elem != 0) return CUDA_ERROR_INVALID_VALUE;
    if (count > 0) {
        lock();
        int ok = count <= SIZE_MAX / elem && range_known((uintptr_t)dst, count * elem, 1);
        unlock();
        if (!ok) return CUDA_ERROR_INVALID_VALUE;
    }
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMSET, .set = {PTR(dst), value, elem, count}};
    return submit(h, ptds, blocking, &op);
}

FC_PTDS(cuMemsetD8_v2, (CUdeviceptr dst, unsigned char v, size_t n),
        do_set(dst, v, 1, n, NULL, ptds, 1))

FC_PTDS(cuMemsetD16_v2, (CUdeviceptr dst, unsigned short v, size_t n),
        do_set(dst, v, 2, n, NULL, ptds, 1))

FC_PTDS(cuMemsetD32_v2, (CUdeviceptr dst, unsigned int v, size_t n),
        do_set(dst, v, 4, n, NULL, ptds, 1))

FC_PTSZ(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream h),
        do_set(dst, v, 1, n, h, ptds, 0))

FC_PTSZ(cuMemsetD16Async, (CUdeviceptr dst, unsigned short v, size_t n, CUstream h),
        do_set(dst, v, 2, n, h, ptds, 0))

FC_PTSZ(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream h),
        do_set(dst, v, 4, n, h, ptds, 0))

/* ---------------------------------------------------------------------------------------------
 * Streams and events
 * ------------------------------------------------------------------------------------------- */

static CUresult stream_create(CUstream *ph, unsigned flags)
{
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    fc_stream *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->flags = flags;
    s->status = CU_STREAM_CAPTURE_STATUS_NONE;
    lock();
    int bad = live_add(s, K_STREAM);
    unlock();
    if (bad) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuStreamCreate, (CUstream * phStream, unsigned int flags))
{
    FAIL_POINT();
    return stream_create(phStream, flags);
}

FC_DEFINE(cuStreamCreateWithPriority, (CUstream * phStream, unsigned int flags, int priority))
{
    FAIL_POINT();
    (void)priority; /* one queue per stream anyway; priorities change nothing on the CPU */
    return stream_create(phStream, flags);
}

FC_DEFINE(cuStreamDestroy_v2, (CUstream hStream))
{
    FAIL_POINT();
    lock();
    fc_stream *s = live_get(hStream, K_STREAM);
    if (s) {
        capture_invalidate(s); /* a capture in progress dies with its stream */
        if (s->graph) graph_free(s->graph);
        live_del(s);
    }
    unlock();
    free(s);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_sync(CUstream h, int ptds)
{
    CUresult err = stream_observe(h, ptds);
    if (err == CUDA_SUCCESS) {
        lock();
        g_counts.syncs++;
        g_counts.device_syncs++;
        unlock();
    }
    return err;
}

FC_PTSZ(cuStreamSynchronize, (CUstream hStream),
        stream_sync(hStream, ptds))

/* Work is done when issued: a stream is always complete. */
FC_PTSZ(cuStreamQuery, (CUstream hStream), stream_observe(hStream, ptds))

static CUresult event_check(CUevent ev)
{
    lock();
    void *e = live_get(ev, K_EVENT);
    unlock();
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A plain wait adds no node (dependencies are implicit in a linear graph); an external wait
 * becomes a (no-op) wait node, as in the real driver. */
static CUresult stream_wait(CUstream h, int ptds, CUevent ev, unsigned flags)
{
    CUresult err = event_check(ev);
    if (err != CUDA_SUCCESS) return err;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    fc_op op = {.type = (flags & CU_EVENT_WAIT_EXTERNAL) ? CU_GRAPH_NODE_TYPE_WAIT_EVENT
                                                          : CU_GRAPH_NODE_TYPE_EMPTY,
                .event = ev};
    return submit(h, ptds, 0, &op);
}

FC_PTSZ(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags),
        stream_wait(hStream, ptds, hEvent, Flags))

FC_DEFINE(cuEventCreate, (CUevent * phEvent, unsigned int Flags))
{
    FAIL_POINT();
    (void)Flags;
    if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
    char *e = malloc(1); /* an event has no state: always complete */
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    lock();
    int bad = live_add(e, K_EVENT);
    unlock();
    if (bad) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = (CUevent)(void *)e;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuEventDestroy_v2, (CUevent hEvent))
{
    FAIL_POINT();
    lock();
    void *e = live_get(hEvent, K_EVENT);
    if (e) live_del(e);
    unlock();
    free(e);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A plain record on a capturing stream adds no node; an external one adds a record node. */
static CUresult event_record(CUevent ev, CUstream h, int ptds, unsigned flags)
{
    CUresult err = event_check(ev);
    if (err != CUDA_SUCCESS) return err;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    fc_op op = {.type = (flags & CU_EVENT_RECORD_EXTERNAL) ? CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                                            : CU_GRAPH_NODE_TYPE_EMPTY,
                .event = ev};
    return submit(h, ptds, 0, &op);
}

FC_PTSZ(cuEventRecord, (CUevent hEvent, CUstream hStream),
        event_record(hEvent, hStream, ptds, 0))

FC_PTSZ(cuEventRecordWithFlags, (CUevent hEvent, CUstream hStream, unsigned int flags),
        event_record(hEvent, hStream, ptds, flags))

/* Waiting on or polling an event is a potentially unsafe call during capture. */
static CUresult event_observe(CUevent ev, int is_sync)
{
    CUresult err = event_check(ev);
    if (err != CUDA_SUCCESS) return err;
    lock();
    err = capture_rules(RULE_UNSAFE);
    if (err == CUDA_SUCCESS && is_sync) {
        g_counts.syncs++;
        g_counts.device_syncs++;
    }
    unlock();
    return err;
}

FC_DEFINE(cuEventSynchronize, (CUevent hEvent))
{
    FAIL_POINT();
    return event_observe(hEvent, 1);
}

FC_DEFINE(cuEventQuery, (CUevent hEvent))
{
    FAIL_POINT();
    return event_observe(hEvent, 0);
}

FC_DEFINE(cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, CUevent hEnd))
{
    FAIL_POINT();
    if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = event_check(hStart);
    if (err == CUDA_SUCCESS) err = event_check(hEnd);
    if (err == CUDA_SUCCESS) *pMilliseconds = 0.0f; /* no time passes on a fake device */
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------------------------- */

/* Allocation and free are potentially unsafe calls during capture. */
static CUresult alloc_rules(void)
{
    lock();
    CUresult err = capture_rules(RULE_UNSAFE);
    unlock();
    return err;
}

static CUresult device_alloc(CUdeviceptr *dptr, size_t bytes)
{
    void *p;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = alloc_rules();
    if (err == CUDA_SUCCESS) err = mem_new(bytes, MEM_DEVICE, &p);
    if (err != CUDA_SUCCESS) return err;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    bump(&g_counts.allocs);
    return CUDA_SUCCESS;
}

static CUresult device_free(CUdeviceptr dptr)
{
    CUresult err = alloc_rules();
    if (err == CUDA_SUCCESS && dptr) err = mem_release((uintptr_t)dptr, MEM_DEVICE);
    if (err == CUDA_SUCCESS) bump(&g_counts.frees);
    return err;
}

FC_DEFINE(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize))
{
    FAIL_POINT();
    return device_alloc(dptr, bytesize);
}

/* The synchronous free waits for the device (device_syncs), as the real one does. */
FC_DEFINE(cuMemFree_v2, (CUdeviceptr dptr))
{
    FAIL_POINT();
    CUresult err = device_free(dptr);
    if (err == CUDA_SUCCESS && dptr) bump(&g_counts.device_syncs);
    return err;
}

FC_DEFINE(cuMemAllocPitch_v2, (CUdeviceptr * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                               unsigned int ElementSizeBytes))
{
    FAIL_POINT();
    if (!pPitch || (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = align_up(WidthInBytes, ALLOC_ALIGN);
    if (Height && pitch > SIZE_MAX / Height) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult err = device_alloc(dptr, pitch * Height);
    if (err == CUDA_SUCCESS) *pPitch = pitch;
    return err;
}

/*
 * Stream-ordered allocation runs at once. Inside a capture the real driver would add an
 * allocation node; this fake refuses instead (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture
 * stays valid), because freeing at capture time would leave the graph with dangling memory.
 */
static CUresult async_mem_stream(CUstream h, int ptds)
{
    fc_stream *s;
    int legacy;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && s && s->status != CU_STREAM_CAPTURE_STATUS_NONE)
        err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (err == CUDA_SUCCESS && legacy) err = capture_rules(RULE_LEGACY);
    unlock();
    return err;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream h, int ptds)
{
    CUresult err = async_mem_stream(h, ptds);
    return err == CUDA_SUCCESS ? device_alloc(dptr, bytes) : err;
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptds)
{
    CUresult err = async_mem_stream(h, ptds);
    return err == CUDA_SUCCESS ? device_free(dptr) : err;
}

FC_PTSZ(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
        alloc_async(dptr, bytesize, hStream, ptds))

FC_PTSZ(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream),
        free_async(dptr, hStream, ptds))

/* Memory pools: one fake default pool; allocating from any pool is cuMemAllocAsync. */
static char g_pool_obj;
#define FAKE_POOL ((CUmemoryPool)(void *)&g_pool_obj)

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h, int ptds)
{
    return pool ? alloc_async(dptr, bytes, h, ptds) : CUDA_ERROR_INVALID_VALUE;
}

FC_PTSZ(cuMemAllocFromPoolAsync, (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
        alloc_from_pool(dptr, bytesize, pool, hStream, ptds))

FC_DEFINE(cuDeviceGetDefaultMemPool, (CUmemoryPool * pool_out, CUdevice dev))
{
    FAIL_POINT();
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = FAKE_POOL;
    return CUDA_SUCCESS;
}

/* Freed memory goes straight back to the system here: nothing to trim. */
FC_DEFINE(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep))
{
    FAIL_POINT();
    (void)minBytesToKeep;
    return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult host_alloc(void **pp, size_t bytes)
{
    if (!pp) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = alloc_rules();
    if (err == CUDA_SUCCESS) err = mem_new(bytes, MEM_PINNED, pp);
    if (err == CUDA_SUCCESS) bump(&g_counts.host_allocs);
    return err;
}

FC_DEFINE(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags))
{
    FAIL_POINT();
    (void)Flags; /* portable/mapped/write-combined: all the same on the CPU */
    return host_alloc(pp, bytesize);
}

FC_DEFINE(cuMemAllocHost_v2, (void **pp, size_t bytesize))
{
    FAIL_POINT();
    return host_alloc(pp, bytesize);
}

FC_DEFINE(cuMemFreeHost, (void *p))
{
    FAIL_POINT();
    CUresult err = alloc_rules();
    return err == CUDA_SUCCESS ? mem_release((uintptr_t)p, MEM_PINNED) : err;
}

FC_DEFINE(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags))
{
    FAIL_POINT();
    (void)Flags;
    if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = capture_rules(RULE_UNSAFE);
    uintptr_t b = (uintptr_t)p;
    for (size_t i = 0; err == CUDA_SUCCESS && i < g_nblocks; i++) /* any overlap */
        if (b < g_blocks[i].base + g_blocks[i].size && g_blocks[i].base < b + bytesize)
            err = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (err == CUDA_SUCCESS && block_add(b, bytesize, MEM_REGISTERED) != 0) err = CUDA_ERROR_OUT_OF_MEMORY;
    unlock();
    return err;
}

FC_DEFINE(cuMemHostUnregister, (void *p))
{
    FAIL_POINT();
    lock();
    CUresult err = capture_rules(RULE_UNSAFE);
    struct block *b = block_find((uintptr_t)p);
    if (err == CUDA_SUCCESS && !(b && b->base == (uintptr_t)p && b->kind == MEM_REGISTERED))
        err = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (err == CUDA_SUCCESS) block_del(b);
    unlock();
    return err;
}

/* One attribute of a known block (under the lock). */
static CUresult block_attribute(const struct block *b, uintptr_t p, CUpointer_attribute attr, void *data)
{
    int device = b->kind == MEM_DEVICE || b->kind == MEM_VMM;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = FAKE_CTX; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = (CUdeviceptr)p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (device) return CUDA_ERROR_INVALID_VALUE; /* device memory has no host mapping */
        *(void **)data = (void *)p;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)b->base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = b->size; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

FC_DEFINE(cuPointerGetAttribute, (void *data, CUpointer_attribute attribute, CUdeviceptr ptr))
{
    FAIL_POINT();
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    lock();
    const struct block *b = block_find((uintptr_t)ptr);
    /* Pageable memory is unknown to the real driver too: it answers CUDA_ERROR_INVALID_VALUE. */
    CUresult err = b ? block_attribute(b, (uintptr_t)ptr, attribute, data) : CUDA_ERROR_INVALID_VALUE;
    unlock();
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * Virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap ...).
 *
 * A reservation is an anonymous PROT_NONE, MAP_NORESERVE mapping. A physical handle only records
 * its size (it counts as used memory for cuMemGetInfo); it owns no host memory of its own. Mapping
 * a handle makes that part of the reservation readable and writable (mprotect) and enters it in
 * the block registry as MEM_VMM device memory; unmapping protects it again and drops its pages
 * (MADV_DONTNEED), so the contents are gone. Hence, unlike the real driver: a handle can be mapped
 * at one place at a time (a second mapping would not alias the first: refused), and a handle
 * unmapped and mapped again comes back zeroed rather than with its old contents.
 * None of these calls are subject to the capture rules.
 * ------------------------------------------------------------------------------------------- */

#define VMM_GRANULARITY ((size_t)2 << 20)
#define FAKE_TOTAL_MEM ((size_t)80 << 30)

typedef struct vmm_handle {
    size_t size;
    int released; /* cuMemRelease called: gone once unmapped */
    int mapped;
} vmm_handle;

static struct resv {
    uintptr_t base;
    size_t size;
} *g_resv;
static size_t g_nresv, g_capresv;
static size_t g_vmm_bytes; /* physical bytes of live handles (released ones still mapped included) */

static int prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           prop->location.id == 0;
}

/* The reservation that holds [p, p+n) whole (under the lock). */
static struct resv *resv_find(uintptr_t p, size_t n)
{
    for (size_t i = 0; i < g_nresv; i++)
        if (p >= g_resv[i].base && p - g_resv[i].base < g_resv[i].size && n <= g_resv[i].size - (p - g_resv[i].base))
            return &g_resv[i];
    return NULL;
}

/* Does [p, p+n) overlap any registered block (under the lock)? */
static int blocks_overlap(uintptr_t p, size_t n)
{
    for (size_t i = 0; i < g_nblocks; i++)
        if (p < g_blocks[i].base + g_blocks[i].size && g_blocks[i].base < p + n) return 1;
    return 0;
}

/* Is [p, p+n) exactly a run of whole VMM mappings without gaps (under the lock)? */
static int vmm_run(uintptr_t p, size_t n)
{
    uintptr_t end = p + n;
    if (n == 0 || end < p) return 0;
    while (p < end) {
        const struct block *b = block_find(p);
        if (!b || b->kind != MEM_VMM || b->base != p || b->size > end - p) return 0;
        p += b->size;
    }
    return 1;
}

/* Forget a handle's memory once it is released and unmapped (under the lock). */
static void vmm_handle_drop(vmm_handle *h)
{
    if (!h->released || h->mapped) return;
    g_vmm_bytes -= h->size;
    free(h);
}

FC_DEFINE(cuMemGetAllocationGranularity, (size_t *granularity, const CUmemAllocationProp *prop,
                                          CUmemAllocationGranularity_flags option))
{
    FAIL_POINT();
    if (!granularity || !prop_ok(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

/* The hint addr is ignored; the range is aligned to max(alignment, granularity). */
FC_DEFINE(cuMemAddressReserve, (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                unsigned long long flags))
{
    FAIL_POINT();
    (void)addr;
    if (!ptr || size == 0 || size % VMM_GRANULARITY || flags || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > VMM_GRANULARITY ? alignment : VMM_GRANULARITY;
    if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
    /* Over-reserve by the alignment, then give back the ends. */
    void *raw = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t lo = (uintptr_t)raw, base = align_up(lo, align);
    if (base > lo) munmap(raw, base - lo);
    if (lo + align > base) munmap((void *)(base + size), lo + align - base);
    lock();
    int bad = 0;
    if (g_nresv == g_capresv) {
        size_t cap = g_capresv ? 2 * g_capresv : 16;
        struct resv *grown = realloc(g_resv, cap * sizeof *grown);
        if (grown) {
            g_resv = grown;
            g_capresv = cap;
        } else {
            bad = 1;
        }
    }
    if (!bad) {
        g_resv[g_nresv++] = (struct resv){base, size};
        g_counts.vmm_reserves++;
    }
    unlock();
    if (bad) {
        munmap((void *)base, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

/* ptr and size must be those of a reservation, and nothing may be mapped in it any more (stricter
 * than the real driver is known to be, to catch leaked mappings). */
FC_DEFINE(cuMemAddressFree, (CUdeviceptr ptr, size_t size))
{
    FAIL_POINT();
    lock();
    struct resv *r = resv_find((uintptr_t)ptr, size);
    CUresult err = (r && r->base == (uintptr_t)ptr && r->size == size && !blocks_overlap(r->base, r->size))
                       ? CUDA_SUCCESS
                       : CUDA_ERROR_INVALID_VALUE;
    if (err == CUDA_SUCCESS) {
        munmap((void *)r->base, r->size);
        *r = g_resv[--g_nresv];
    }
    unlock();
    return err;
}

FC_DEFINE(cuMemCreate, (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,
                        unsigned long long flags))
{
    FAIL_POINT();
    if (!handle || !prop_ok(prop) || size == 0 || size % VMM_GRANULARITY || flags) return CUDA_ERROR_INVALID_VALUE;
    vmm_handle *h = calloc(1, sizeof *h);
    if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
    h->size = size;
    lock();
    int bad = live_add(h, K_VMM);
    if (!bad) {
        g_vmm_bytes += size;
        g_counts.vmm_creates++;
    }
    unlock();
    if (bad) {
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* As in the real driver, a handle released while mapped lives on until it is unmapped. */
FC_DEFINE(cuMemRelease, (CUmemGenericAllocationHandle handle))
{
    FAIL_POINT();
    lock();
    vmm_handle *h = live_get((const void *)(uintptr_t)handle, K_VMM);
    if (h) {
        live_del(h);
        h->released = 1;
        vmm_handle_drop(h);
    }
    unlock();
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Map the first size bytes of handle at ptr (offset must be 0): ptr and size granularity-aligned,
 * the range inside one reservation and not mapped yet; the handle mapped nowhere else. */
FC_DEFINE(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                     unsigned long long flags))
{
    FAIL_POINT();
    if (size == 0 || size % VMM_GRANULARITY || ptr % VMM_GRANULARITY || offset || flags)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    vmm_handle *h = live_get((const void *)(uintptr_t)handle, K_VMM);
    CUresult err = CUDA_SUCCESS;
    if (!h || size > h->size || !resv_find((uintptr_t)ptr, size) || blocks_overlap((uintptr_t)ptr, size))
        err = CUDA_ERROR_INVALID_VALUE;
    else if (h->mapped)
        err = CUDA_ERROR_NOT_SUPPORTED; /* would alias the other mapping on a GPU; cannot here */
    else if (mprotect(PTR(ptr), size, PROT_READ | PROT_WRITE) != 0)
        err = CUDA_ERROR_OUT_OF_MEMORY;
    else if (block_add((uintptr_t)ptr, size, MEM_VMM) != 0) {
        mprotect(PTR(ptr), size, PROT_NONE);
        err = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (err == CUDA_SUCCESS) {
        g_blocks[g_nblocks - 1].vh = h;
        h->mapped = 1;
        g_counts.vmm_maps++;
    }
    unlock();
    return err;
}

/* Unmap whole mappings: [ptr, ptr+size) must be one or more of them, back to back. */
FC_DEFINE(cuMemUnmap, (CUdeviceptr ptr, size_t size))
{
    FAIL_POINT();
    lock();
    CUresult err = vmm_run((uintptr_t)ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t p = (uintptr_t)ptr; err == CUDA_SUCCESS && p < (uintptr_t)ptr + size;) {
        struct block *b = block_find(p);
        vmm_handle *h = b->vh;
        size_t n = b->size;
        block_del(b);
        mprotect((void *)p, n, PROT_NONE);
        madvise((void *)p, n, MADV_DONTNEED); /* the contents are lost */
        h->mapped = 0;
        vmm_handle_drop(h);
        p += n;
    }
    if (err == CUDA_SUCCESS) g_counts.vmm_unmaps++;
    unlock();
    return err;
}

/* Set device 0's access to mapped memory: the range must be granularity-aligned and wholly mapped.
 * The access is recorded on each mapping the range touches and enforced with mprotect (a kernel
 * writing read-only memory faults); copies and sets check it too. */
FC_DEFINE(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))
{
    FAIL_POINT();
    if (!desc || count == 0 || size == 0 || size % VMM_GRANULARITY || ptr % VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    int access = VMM_ACCESS_UNSET;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        access = (int)desc[i].flags;
    }
    int prot = access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
               : access == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                            : PROT_NONE;
    lock();
    CUresult err = CUDA_SUCCESS;
    uintptr_t end = (uintptr_t)ptr + size;
    for (uintptr_t p = (uintptr_t)ptr; err == CUDA_SUCCESS && p < end;) {
        const struct block *b = block_find(p);
        if (!b || b->kind != MEM_VMM) err = CUDA_ERROR_INVALID_VALUE;
        else p = b->base + b->size;
    }
    for (uintptr_t p = (uintptr_t)ptr; err == CUDA_SUCCESS && p < end;) {
        struct block *b = block_find(p);
        b->access = access;
        p = b->base + b->size;
    }
    if (err == CUDA_SUCCESS) {
        mprotect(PTR(ptr), size, prot);
        g_counts.vmm_access_sets++;
    }
    unlock();
    return err;
}

/* Device 0's access to the mapping holding ptr; PROT_NONE until cuMemSetAccess (although the
 * fake lets the memory be used before that). */
FC_DEFINE(cuMemGetAccess, (unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr))
{
    FAIL_POINT();
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (location->id != 0) return CUDA_ERROR_INVALID_DEVICE;
    lock();
    const struct block *b = block_find((uintptr_t)ptr);
    CUresult err = b && b->kind == MEM_VMM ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (err == CUDA_SUCCESS)
        *flags = b->access == VMM_ACCESS_UNSET ? CU_MEM_ACCESS_FLAGS_PROT_NONE : (unsigned long long)b->access;
    unlock();
    return err;
}

/* An 80 GiB device; free is the total less live device allocations and VMM physical handles. */
FC_DEFINE(cuMemGetInfo_v2, (size_t *free_bytes, size_t *total_bytes))
{
    FAIL_POINT();
    if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
    lock();
    size_t used = g_vmm_bytes;
    for (size_t i = 0; i < g_nblocks; i++)
        if (g_blocks[i].kind == MEM_DEVICE) used += g_blocks[i].size;
    unlock();
    *total_bytes = FAKE_TOTAL_MEM;
    *free_bytes = used < FAKE_TOTAL_MEM ? FAKE_TOTAL_MEM - used : 0;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Stream capture
 * ------------------------------------------------------------------------------------------- */

static CUresult begin_capture(CUstream h, int ptds, CUstreamCaptureMode mode)
{
    fc_stream *s;
    int legacy;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && !s) err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* default streams */
    if (err == CUDA_SUCCESS && s->status != CU_STREAM_CAPTURE_STATUS_NONE) err = CUDA_ERROR_ILLEGAL_STATE;
    if (err == CUDA_SUCCESS && !(s->graph = graph_new())) err = CUDA_ERROR_OUT_OF_MEMORY;
    if (err == CUDA_SUCCESS) {
        s->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        s->mode = mode;
        s->owner = pthread_self();
        s->capture_id = g_next_capture_id++;
        s->last = NULL;
        g_active_captures++;
        g_counts.captures++;
    }
    unlock();
    return err;
}

FC_PTSZ(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode),
        begin_capture(hStream, ptds, mode))

/* Under the lock; s is capturing (active or invalidated). */
static CUresult end_capture_locked(fc_stream *s, CUgraph *phGraph)
{
    if (s->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->owner, pthread_self()))
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    fc_graph *g = s->graph;
    int valid = s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (valid) g_active_captures--;
    s->status = CU_STREAM_CAPTURE_STATUS_NONE;
    s->graph = NULL;
    s->last = NULL;
    if (!valid) {
        graph_free(g);
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

static CUresult end_capture(CUstream h, int ptds, CUgraph *phGraph)
{
    fc_stream *s;
    int legacy;
    if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && (!s || s->status == CU_STREAM_CAPTURE_STATUS_NONE)) err = CUDA_ERROR_ILLEGAL_STATE;
    if (err == CUDA_SUCCESS) err = end_capture_locked(s, phGraph);
    unlock();
    return err;
}

FC_PTSZ(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph),
        end_capture(hStream, ptds, phGraph))

/*
 * Capture status of a stream and, while it captures, its id, graph and dependencies (the last
 * node appended, or none yet). The dependency array lives in the stream, valid until the next
 * call on it, as in the real driver. Default streams never capture.
 */
static CUresult capture_info(CUstream h, int ptds, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    fc_stream *s;
    int legacy;
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS) {
        *status = s ? s->status : CU_STREAM_CAPTURE_STATUS_NONE;
        if (s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            if (id) *id = s->capture_id;
            if (graph) *graph = (CUgraph)s->graph;
            if (deps) *deps = s->last ? &s->last : NULL;
            if (edges) *edges = NULL;
            if (ndeps) *ndeps = s->last ? 1 : 0;
        }
    }
    unlock();
    return err;
}

FC_PTSZ(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus *captureStatus),
        capture_info(hStream, ptds, captureStatus, NULL, NULL, NULL, NULL, NULL))

FC_PTSZ(cuStreamGetCaptureInfo_v3, (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
                                      CUgraph *graph_out, const CUgraphNode **dependencies_out,
                                      const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out),
        capture_info(hStream, ptds, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                     numDependencies_out))

/* ---------------------------------------------------------------------------------------------
 * Graphs and execs
 * ------------------------------------------------------------------------------------------- */

FC_DEFINE(cuGraphCreate, (CUgraph * phGraph, unsigned int flags))
{
    FAIL_POINT();
    if (!phGraph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_graph *g = graph_new();
    unlock();
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuGraphDestroy, (CUgraph hGraph))
{
    FAIL_POINT();
    lock();
    fc_graph *g = live_get(hGraph, K_GRAPH);
    if (g) graph_free(g);
    unlock();
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_DEFINE(cuGraphGetNodes, (CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes))
{
    FAIL_POINT();
    if (!numNodes) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_graph *g = live_get(hGraph, K_GRAPH);
    if (g && nodes) {
        /* Fill up to *numNodes entries, NULL past the real count; report the count filled. */
        for (size_t i = 0; i < *numNodes; i++) nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
        if (*numNodes > g->n) *numNodes = g->n;
    } else if (g) {
        *numNodes = g->n;
    }
    unlock();
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_DEFINE(cuGraphNodeGetType, (CUgraphNode hNode, CUgraphNodeType *type))
{
    FAIL_POINT();
    if (!type) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_node *node = live_get(hNode, K_NODE);
    if (node) *type = node->op.type;
    unlock();
    return node ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_DEFINE(cuGraphKernelNodeGetParams_v2, (CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p))
{
    FAIL_POINT();
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_node *node = live_get(hNode, K_NODE);
    CUresult err = !node ? CUDA_ERROR_INVALID_HANDLE
                         : node->op.type != CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (err == CUDA_SUCCESS) {
        const fc_op *op = &node->op;
        memset(p, 0, sizeof *p);
        p->func = (CUfunction)(void *)op->kern.k;
        p->gridDimX = op->kern.grid[0], p->gridDimY = op->kern.grid[1], p->gridDimZ = op->kern.grid[2];
        p->blockDimX = op->kern.block[0], p->blockDimY = op->kern.block[1], p->blockDimZ = op->kern.block[2];
        p->sharedMemBytes = op->kern.smem;
        p->kernelParams = op->kern.argv; /* the node's own copy of the values */
        p->ctx = FAKE_CTX;
    }
    unlock();
    return err;
}

static CUresult instantiate(CUgraphExec *phExec, CUgraph hGraph)
{
    if (!phExec) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_graph *g = live_get(hGraph, K_GRAPH);
    fc_exec *x = g ? calloc(1, sizeof *x) : NULL;
    CUresult err = !g ? CUDA_ERROR_INVALID_HANDLE : !x ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    if (err == CUDA_SUCCESS) {
        x->src = calloc(g->n + 1, sizeof *x->src);
        x->ops = calloc(g->n + 1, sizeof *x->ops);
        err = (x->src && x->ops && live_add(x, K_EXEC) == 0) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; err == CUDA_SUCCESS && i < g->n; i++, x->n++) {
        x->src[i] = g->nodes[i];
        err = op_dup(&x->ops[i], &g->nodes[i]->op);
    }
    if (err == CUDA_SUCCESS) {
        g_counts.instantiations++;
        *phExec = (CUgraphExec)x;
    } else if (x) {
        exec_free(x);
    }
    unlock();
    return err;
}

FC_DEFINE(cuGraphInstantiateWithFlags, (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags))
{
    FAIL_POINT();
    (void)flags; /* auto-free, upload, device launch, priority: nothing to do on the CPU */
    return instantiate(phGraphExec, hGraph);
}

static CUresult instantiate_with_params(CUgraphExec *phExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    if (!params) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = instantiate(phExec, hGraph);
    params->hErrNode_out = NULL;
    params->result_out = err == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return err;
}

FC_PTSZ(cuGraphInstantiateWithParams,
        (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
        instantiate_with_params(phGraphExec, hGraph, instantiateParams))

FC_DEFINE(cuGraphExecDestroy, (CUgraphExec hGraphExec))
{
    FAIL_POINT();
    lock();
    fc_exec *x = live_get(hGraphExec, K_EXEC);
    if (x) exec_free(x);
    unlock();
    return x ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Check an exec and the stream it goes to (under the lock). Launching a graph into a capture is
 * not supported by this fake. */
static CUresult exec_stream_check(CUgraphExec hExec, CUstream h, int ptds, fc_exec **x)
{
    fc_stream *s;
    int legacy;
    *x = live_get(hExec, K_EXEC);
    if (!*x) return CUDA_ERROR_INVALID_HANDLE;
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err != CUDA_SUCCESS) return err;
    if (s && s->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s && s->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (legacy) err = capture_rules(RULE_LEGACY);
    return err;
}

static CUresult graph_upload(CUgraphExec hExec, CUstream h, int ptds)
{
    fc_exec *x;
    lock();
    CUresult err = exec_stream_check(hExec, h, ptds, &x);
    unlock();
    return err; /* nothing to upload: "device" memory is host memory */
}

FC_PTSZ(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream),
        graph_upload(hGraphExec, hStream, ptds))

/* Run an exec: snapshot its ops under the lock (so a concurrent SetParams affects only later
 * launches, as on a GPU), then run them in order without it. */
static CUresult graph_launch(CUgraphExec hExec, CUstream h, int ptds)
{
    fc_exec *x;
    fc_op *snap = NULL;
    size_t n = 0;
    lock();
    CUresult err = exec_stream_check(hExec, h, ptds, &x);
    if (err == CUDA_SUCCESS && !(snap = calloc(x->n + 1, sizeof *snap))) err = CUDA_ERROR_OUT_OF_MEMORY;
    for (; err == CUDA_SUCCESS && n < x->n; n++) err = op_dup(&snap[n], &x->ops[n]);
    if (err == CUDA_SUCCESS) g_counts.graph_launches++;
    unlock();
    for (size_t i = 0; err == CUDA_SUCCESS && i < n; i++) op_run(&snap[i]);
    for (size_t i = 0; i < n; i++) op_clear(&snap[i]);
    free(snap);
    return err;
}

FC_PTSZ(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream),
        graph_launch(hGraphExec, hStream, ptds))

/* The exec's kernel op that came from source node hNode (under the lock). */
static fc_op *exec_kernel_op(fc_exec *x, CUgraphNode hNode)
{
    for (size_t i = 0; i < x->n; i++) {
        if ((CUgraphNode)x->src[i] == hNode)
            return x->ops[i].type == CU_GRAPH_NODE_TYPE_KERNEL ? &x->ops[i] : NULL;
    }
    return NULL;
}

/* Replace an exec kernel op's function, dims and parameter values (read through the given
 * kernelParams or extra with the registered sizes of the new function). */
FC_DEFINE(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec hGraphExec, CUgraphNode hNode,
                                              const CUDA_KERNEL_NODE_PARAMS *p))
{
    FAIL_POINT();
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
    const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    void **argv = NULL;
    lock();
    fc_exec *x = live_get(hGraphExec, K_EXEC);
    fc_op *op = x ? exec_kernel_op(x, hNode) : NULL;
    fc_kernel *k = kernel_get(p->func ? (const void *)p->func : (const void *)p->kern);
    CUresult err = !x    ? CUDA_ERROR_INVALID_HANDLE
                   : !op ? CUDA_ERROR_INVALID_VALUE
                   : !k  ? CUDA_ERROR_INVALID_HANDLE
                         : check_dims(grid, block, p->sharedMemBytes);
    if (err == CUDA_SUCCESS) err = args_pack(k, p->kernelParams, p->extra, &argv);
    if (err == CUDA_SUCCESS) {
        free(op->kern.argv);
        op->kern.k = k;
        op->kern.argv = argv;
        memcpy(op->kern.grid, grid, sizeof grid);
        memcpy(op->kern.block, block, sizeof block);
        op->kern.smem = p->sharedMemBytes;
        g_counts.node_param_sets++;
    }
    unlock();
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * cuGetProcAddress: the table of every export, and the real driver's name resolution
 * ------------------------------------------------------------------------------------------- */

#define FC_EXPORTS(X)                                                                                          \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)                      \
    X(cuDeviceGetAttribute) X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxSetCurrent)                            \
    X(cuDevicePrimaryCtxRetain) X(cuCtxSynchronize) X(cuGetErrorString) X(cuGetErrorName)                      \
    X(cuGetProcAddress) X(cuGetProcAddress_v2)                                                                  \
    X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz)                      \
    X(cuLaunchHostFunc) X(cuLaunchHostFunc_ptsz)                                                               \
    X(cuFuncGetParamInfo) X(cuKernelGetParamInfo) X(cuFuncGetName) X(cuKernelGetName)                          \
    X(cuMemcpy) X(cuMemcpy_ptds) X(cuMemcpyAsync) X(cuMemcpyAsync_ptsz)                                        \
    X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds)                      \
    X(cuMemcpyDtoD_v2) X(cuMemcpyDtoD_v2_ptds) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyHtoDAsync_v2_ptsz)            \
    X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyDtoDAsync_v2_ptsz)  \
    X(cuMemsetD8_v2) X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2) X(cuMemsetD16_v2_ptds)                            \
    X(cuMemsetD32_v2) X(cuMemsetD32_v2_ptds) X(cuMemsetD8Async) X(cuMemsetD8Async_ptsz)                        \
    X(cuMemsetD16Async) X(cuMemsetD16Async_ptsz) X(cuMemsetD32Async) X(cuMemsetD32Async_ptsz)                  \
    X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2)                                      \
    X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuStreamQuery) X(cuStreamQuery_ptsz)                  \
    X(cuStreamWaitEvent) X(cuStreamWaitEvent_ptsz) X(cuEventCreate) X(cuEventDestroy_v2)                       \
    X(cuEventRecord) X(cuEventRecord_ptsz) X(cuEventRecordWithFlags) X(cuEventRecordWithFlags_ptsz)            \
    X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime_v2)                                             \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemFreeAsync)              \
    X(cuMemFreeAsync_ptsz) X(cuMemAllocPitch_v2) X(cuMemHostAlloc) X(cuMemAllocHost_v2) X(cuMemFreeHost)       \
    X(cuMemHostRegister_v2) X(cuMemHostUnregister) X(cuPointerGetAttribute)                                    \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuDeviceGetDefaultMemPool) X(cuMemPoolTrimTo)  \
    X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease)  \
    X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAccess) X(cuMemGetInfo_v2)                            \
    X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz) \
    X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz) X(cuStreamGetCaptureInfo_v3)                            \
    X(cuStreamGetCaptureInfo_v3_ptsz) X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphInstantiateWithFlags)        \
    X(cuGraphInstantiateWithParams) X(cuGraphInstantiateWithParams_ptsz) X(cuGraphUpload) X(cuGraphUpload_ptsz) \
    X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuGraphExecDestroy) X(cuGraphGetNodes) X(cuGraphNodeGetType)      \
    X(cuGraphKernelNodeGetParams_v2) X(cuGraphExecKernelNodeSetParams_v2)

/* Forward declarations for the two defined after the table. */
static CUresult fc_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
static CUresult fc_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus);

static const struct {
    const char *name;
    void *fn;
} g_syms[] = {
#define FC_SYM_ROW(name) {#name, (void *)fc_##name},
    FC_EXPORTS(FC_SYM_ROW)
#undef FC_SYM_ROW
};

/* Base names whose current form needs a minimum version (older callers want an older ABI this
 * fake does not export), and base names the driver maps to a differently named function. */
static const struct {
    const char *base, *target;
    int min_version;
} g_versioned[] = {
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000},
    {"cuGraphKernelNodeGetParams", NULL, 12000},
    {"cuGraphExecKernelNodeSetParams", NULL, 12000},
    {"cuStreamGetCaptureInfo", NULL, 12030},
};

static void *sym_exact(const char *name)
{
    for (size_t i = 0; i < sizeof g_syms / sizeof g_syms[0]; i++)
        if (strcmp(g_syms[i].name, name) == 0) return g_syms[i].fn;
    return NULL;
}

/* Try base+"_v3", "_v2", "" (newest ABI first), each with the per-thread variant first when
 * flags ask for the per-thread default stream. */
static void *sym_suffixed(const char *base, cuuint64_t flags)
{
    static const char *const versions[] = {"_v3", "_v2", ""};
    static const char *const per_thread[] = {"_ptds", "_ptsz"};
    char name[160];
    for (size_t v = 0; v < 3; v++) {
        for (size_t t = 0; (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && t < 2; t++) {
            snprintf(name, sizeof name, "%s%s%s", base, versions[v], per_thread[t]);
            if (sym_exact(name)) return sym_exact(name);
        }
        snprintf(name, sizeof name, "%s%s", base, versions[v]);
        if (sym_exact(name)) return sym_exact(name);
    }
    return NULL;
}

static void *sym_resolve(const char *symbol, int version, cuuint64_t flags)
{
    if (strlen(symbol) > 100) return NULL;
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return version >= 12050 ? (void *)fc_cuGetProcAddress_v2 : (void *)fc_cuGetProcAddress;
    for (size_t i = 0; i < sizeof g_versioned / sizeof g_versioned[0]; i++) {
        if (strcmp(symbol, g_versioned[i].base) != 0) continue;
        if (version < g_versioned[i].min_version) return NULL;
        if (g_versioned[i].target) symbol = g_versioned[i].target;
        break;
    }
    return sym_suffixed(symbol, flags);
}

static CUresult proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!symbol || !pfn ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = sym_resolve(symbol, version, flags);
    if (!*pfn) return CUDA_ERROR_NOT_FOUND;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags))
{
    FAIL_POINT();
    return proc_address(symbol, pfn, cudaVersion, flags, NULL);
}

FC_DEFINE(cuGetProcAddress_v2, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *symbolStatus))
{
    FAIL_POINT();
    return proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* ---------------------------------------------------------------------------------------------
 * Test-facing API
 * ------------------------------------------------------------------------------------------- */

static void kernel_free(fc_kernel *k)
{
    if (!k) return;
    free(k->name);
    free(k->size);
    free(k->offset);
    free(k);
}

static fc_kernel *kernel_new(const char *name, fakecuda_kernel_fn fn, int nparams, const size_t *sizes)
{
    fc_kernel *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->name = strdup(name);
    k->size = calloc((size_t)nparams + 1, sizeof *k->size);
    k->offset = calloc((size_t)nparams + 1, sizeof *k->offset);
    if (!k->name || !k->size || !k->offset) {
        kernel_free(k);
        return NULL;
    }
    k->fn = fn;
    k->nparams = nparams;
    for (int i = 0; i < nparams; i++) {
        k->size[i] = sizes[i];
        k->offset[i] = align_up(k->total, param_align(sizes[i]));
        k->total = k->offset[i] + sizes[i];
    }
    return k;
}

FAKECUDA_API CUfunction fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, int nparams,
                                                 const size_t *param_sizes, int as_cukernel, int opaque_layout)
{
    if (!name || !fn || nparams < 0 || (nparams > 0 && !param_sizes)) return NULL;
    for (int i = 0; i < nparams; i++)
        if (param_sizes[i] == 0) return NULL;
    fc_kernel *k = kernel_new(name, fn, nparams, param_sizes);
    if (!k) return NULL;
    k->as_cukernel = as_cukernel != 0;
    k->opaque = opaque_layout != 0;
    lock();
    int bad = live_add(k, K_KERNEL);
    unlock();
    if (bad) {
        kernel_free(k);
        return NULL;
    }
    return (CUfunction)(void *)k;
}

FAKECUDA_API void fakecuda_get_counts(fakecuda_counts_t *out)
{
    if (!out) return;
    lock();
    *out = g_counts;
    unlock();
}

FAKECUDA_API void fakecuda_reset_counts(void)
{
    lock();
    memset(&g_counts, 0, sizeof g_counts);
    unlock();
}

FAKECUDA_API void fakecuda_fail_next(const char *exported_name, CUresult err)
{
    if (!exported_name || err == CUDA_SUCCESS) return;
    lock();
    if (g_nfails < MAX_PENDING_FAILS) {
        snprintf(g_fails[g_nfails].name, sizeof g_fails[0].name, "%s", exported_name);
        g_fails[g_nfails].err = err;
        g_nfails++;
    }
    unlock();
}
