/*
 * fakecuda_internal.h — private to the sources of the fake driver (tests/fakecuda/fakecuda*.c):
 * the macros that define an exported entry point (FC_DEFINE, FC_PTDS, FC_PTSZ, FAIL_POINT), the
 * internal types (live-handle kinds, kernels, memory blocks, operations, graphs, execs, streams),
 * and the one declaration of each piece of state or helper that more than one source file uses.
 * Everything declared here has hidden visibility: the library exports only the driver entry points
 * and the test-facing API of fakecuda.h. Include it first, before any system header. See
 * fakecuda.c for what the fake implements and how its sources are divided.
 */
#ifndef FAKECUDA_INTERNAL_H
#define FAKECUDA_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* Declare every ABI variant of the driver functions (_v2, _ptds, _ptsz, v1 cuGetProcAddress) under
 * its exact exported name, as the driver's own build does; the compiler then checks our
 * definitions against the header's prototypes. */
#define __CUDA_API_VERSION_INTERNAL 1

#include "fakecuda.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FC_API __attribute__((visibility("default")))
#define FC_HIDDEN __attribute__((visibility("hidden")))

/* Define the exported driver function NAME: library-internal (hidden) fc_NAME, exported NAME as
 * its alias. fc_NAME is what cuGetProcAddress hands out (see fakecuda_procaddr.c). */
#define FC_DEFINE(name, params)                                      \
    FC_HIDDEN CUresult fc_##name params;                             \
    FC_API CUresult name params __attribute__((alias("fc_" #name))); \
    FC_HIDDEN CUresult fc_##name params

/* First statement of every export: a failure queued by fakecuda_fail_next for this name. */
#define FAIL_POINT()                              \
    do {                                          \
        CUresult fail_ = fail_take(__func__ + 3); \
        if (fail_ != CUDA_SUCCESS) return fail_;  \
    } while (0)

/* NAME and its per-thread-default-stream twin NAME_ptds / NAME_ptsz, which differ only in the
 * meaning of the NULL stream: both return the expression, with `ptds` 0 in NAME and 1 in the twin. */
#define FC_DEFINE_PT(name, twin, params, ...) \
    FC_DEFINE(name, params)                   \
    {                                         \
        enum { ptds = 0 };                    \
        FAIL_POINT();                         \
        return __VA_ARGS__;                   \
    }                                         \
    FC_DEFINE(twin, params)                   \
    {                                         \
        enum { ptds = 1 };                    \
        FAIL_POINT();                         \
        return __VA_ARGS__;                   \
    }
#define FC_PTDS(name, params, ...) FC_DEFINE_PT(name, name##_ptds, params, __VA_ARGS__)
#define FC_PTSZ(name, params, ...) FC_DEFINE_PT(name, name##_ptsz, params, __VA_ARGS__)

#define ALLOC_ALIGN 256 /* what cuMemAlloc guarantees */
#define MAX_SMEM 232448u

#define PTR(d) ((void *)(uintptr_t)(d))

#pragma GCC visibility push(hidden)

/* Spend the host time fakecuda_set_delays asked for: DELAY_LAUNCH or DELAY_GRAPH_LAUNCH. */
enum { DELAY_LAUNCH, DELAY_GRAPH_LAUNCH };
void delay(int which);

/* ---------------------------------------------------------------------------------------------
 * Global state (fakecuda.c). All state sits behind one mutex, taken by lock() and never held
 * while a kernel or host function runs.
 * ------------------------------------------------------------------------------------------- */

extern fakecuda_counts_t g_counts;
extern char g_ctx_obj; /* the one context; only its address matters */
#define FAKE_CTX ((CUcontext)(void *)&g_ctx_obj)

void lock(void);
void unlock(void);
void bump(unsigned long *counter);

static inline size_t align_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* The failure fakecuda_fail_next queued first for exported name, taken; CUDA_SUCCESS if none. */
CUresult fail_take(const char *name);

/* ---------------------------------------------------------------------------------------------
 * Live handles (fakecuda.c). Every handle given out (kernel, stream, event, graph, node, exec,
 * VMM allocation, array) is registered, so a stale or foreign handle is answered with an error instead
 * of being dereferenced. All under the lock.
 * ------------------------------------------------------------------------------------------- */

typedef enum { K_KERNEL, K_STREAM, K_EVENT, K_GRAPH, K_NODE, K_EXEC, K_VMM, K_ARRAY } handle_kind;

struct live {
    const void *p;
    handle_kind kind;
};
extern struct live *g_live;
extern size_t g_nlive;

int live_add(const void *p, handle_kind kind);
void live_del(const void *p);
void *live_get(const void *p, handle_kind kind);

/* ---------------------------------------------------------------------------------------------
 * Kernels and their parameter buffers (fakecuda_kernel.c)
 * ------------------------------------------------------------------------------------------- */

typedef struct fc_kernel {
    char *name;
    fakecuda_kernel_fn fn;
    int nparams;
    size_t *size, *offset;
    size_t total; /* bytes of the packed parameter buffer */
    int as_cukernel, opaque;
} fc_kernel;

fc_kernel *kernel_get(const void *handle);
unsigned char *args_bytes(const fc_kernel *k, void **argv);
void **args_new(const fc_kernel *k);
CUresult args_pack(const fc_kernel *k, void **params, void **extra, void ***out);
CUresult check_dims(const unsigned grid[3], const unsigned block[3], unsigned smem);

/* ---------------------------------------------------------------------------------------------
 * Memory blocks (fakecuda_memory.c): every allocation and registration, for cuPointerGetAttribute
 * and range checks. Under the lock.
 * ------------------------------------------------------------------------------------------- */

/* MEM_VMM: one cuMemMap mapping (device memory inside a cuMemAddressReserve reservation). */
typedef enum { MEM_DEVICE, MEM_PINNED, MEM_REGISTERED, MEM_VMM } mem_kind;

#define VMM_ACCESS_UNSET (-1) /* cuMemSetAccess not called yet: the fake allows any access */

struct block {
    uintptr_t base;
    size_t size;
    mem_kind kind;
    struct vmm_handle *vh; /* MEM_VMM: the mapped physical handle */
    int access;            /* MEM_VMM: CUmemAccess_flags set for device 0, or VMM_ACCESS_UNSET */
    uint64_t serial;       /* the allocation's identity: never given to another, even at the same address */
};
extern struct block *g_blocks;
extern size_t g_nblocks;

struct block *block_find(uintptr_t p);
int block_add(uintptr_t base, size_t size, mem_kind kind);
void block_del(struct block *b);
int range_known(uintptr_t p, size_t n, int write);
/* The serial of the page-locked host allocation (MEM_PINNED or MEM_REGISTERED) that holds p; 0
 * if none does (pageable or device memory). */
uint64_t host_serial(uintptr_t p);
/* Is the allocation with this serial still live (not freed or unregistered)? */
int serial_live(uint64_t serial);

/* A CUDA array (cuArrayCreate_v2): `layers` planes of `rows` rows of `row` bytes, stored densely
 * in host memory (elements of `elem` bytes, channels included). Not in the block registry: an
 * array has no device address. */
typedef struct fc_array {
    unsigned char *data;
    size_t row, rows, layers, elem;
} fc_array;

fc_array *array_get(CUarray h); /* under the lock; NULL for a stale or foreign handle */

/* ---------------------------------------------------------------------------------------------
 * Operations, graphs, execs (fakecuda_graph.c)
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
        /* n bytes; or, when height/depth are set (0 counts as 1), `depth` slices of `height` rows
         * of n bytes, rows `dpitch`/`spitch` apart and slices `dslice`/`sslice` apart.
         * dst_host/src_host: in a graph node or an exec, the serial of the page-locked host
         * allocation the side lay in when the node was made, the graph instantiated or the node
         * set (op_note_host); 0 for none. Eager copies leave them 0. */
        struct {
            void *dst;
            const void *src;
            size_t n;
            size_t height, depth, dpitch, spitch, dslice, sslice;
            uint64_t dst_host, src_host;
        } copy;
        /* count elements; or `height` rows of them (0 counts as 1), `pitch` bytes apart. */
        struct {
            void *dst;
            unsigned value, elem;
            size_t count;
            size_t pitch, height;
        } set;
        /* CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: write `value` (size 4 or 8) to addr, or wait until the
         * condition `flags` (CUstreamWaitValue_flags) holds there. */
        struct {
            void *addr;
            uint64_t value;
            unsigned size, flags;
            int wait;
        } val;
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
    int dev_updatable;        /* CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE set (for good) */
    struct fc_exec *dev_exec; /* ... and the one exec instantiated from its graph, while it lives */
} fc_node;

typedef struct fc_exec {
    size_t n;
    fc_node **src; /* the source-graph node each op came from */
    fc_op *ops;
    fc_op *host; /* each op as instantiated or last set from the host (device updates left out) */
} fc_exec;

/* The kernel op of the exec a device-updatable node was instantiated into (under the lock). */
fc_op *devnode_op(fc_node *node);
/* Is k cgjit's patch kernel (fakecuda_devpatch.c)? */
int fakecuda_is_devpatch(const fc_kernel *k);

void op_clear(fc_op *op);
void op_run(const fc_op *op);
/* A copy op taken into a graph or an exec remembers the page-locked host allocations its sides
 * lie in now (under the lock); other ops are left as they are. */
void op_note_host(fc_op *op);
/* Does the wait condition of a value op hold now? Wait for it up to `seconds` (another host
 * thread may write the value meanwhile); 1 if it held. Called without the lock. */
int value_wait(const fc_op *op, double seconds);
CUresult graph_push(fc_graph *g, fc_node *node);
fc_graph *graph_new(void);
void graph_free(fc_graph *g);

/* ---------------------------------------------------------------------------------------------
 * Streams and the capture rules (fakecuda_stream.c)
 * ------------------------------------------------------------------------------------------- */

typedef struct fc_stream {
    unsigned flags;
    CUstreamCaptureStatus status;
    CUstreamCaptureMode mode;
    pthread_t owner; /* thread that began the capture */
    cuuint64_t capture_id;
    fc_graph *graph;  /* the capture's graph while status != NONE */
    int into;         /* the graph is the caller's (cuStreamBeginCaptureToGraph): never freed here */
    CUgraphNode last; /* last node appended; what cuStreamGetCaptureInfo reports */
} fc_stream;

enum {
    RULE_LEGACY = 1, /* async work on the legacy default stream */
    RULE_UNSAFE = 2, /* a synchronizing / potentially unsafe call */
    RULE_ALL = 4,    /* waits for every stream (context synchronize) */
};

CUresult stream_get(CUstream h, int ptds, fc_stream **s, int *legacy);
CUresult stream_check(CUstream h, int ptds); /* takes the lock: is h a valid stream handle? */
int stream_capturing(CUstream h, int ptds);  /* takes the lock: does h capture (active)? */
CUresult capture_rules(int rules);
CUresult submit(CUstream h, int ptds, int blocking, fc_op *op);
/* Deferred device-to-device cuMemcpy (fakecuda_defer_legacy_copies, fakecuda_stream.c), all
 * taking the lock: deferred_take queues op and returns 1 where deferral is on; deferred_run runs
 * the queue; orders_after_legacy says whether work on stream h waits for the legacy stream (h is
 * the legacy stream or a blocking one), so that the queue must run before it. */
int deferred_take(const fc_op *op);
void deferred_run(void);
int orders_after_legacy(CUstream h, int ptds);

#pragma GCC visibility pop

#endif /* FAKECUDA_INTERNAL_H */
