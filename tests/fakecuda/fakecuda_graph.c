/*
 * fakecuda_graph.c — operations, graphs and execs of the fake driver. An operation is one unit
 * of stream work (kernel, 1D/2D/3D copy, 1D/2D set, host function, event record or wait, value
 * write or wait); this file runs one on the calling thread and deep-copies it. Graphs are linear
 * lists of nodes made by stream capture or cuGraphCreate; an exec (instantiated graph) owns deep
 * copies of its graph's operations and remembers each one's source node. Entry points: graph
 * create/destroy/inspect (kernel, copy and memset node parameters), instantiate, upload, launch,
 * exec destroy and cuGraphExec{Kernel,Memcpy,Memset}NodeSetParams. See fakecuda.c for the overview.
 *
 * Page-locked host memory in graphs. A copy node whose source or destination lies in page-locked
 * host memory (cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister) refers to that host
 * ALLOCATION, not just to its address: the node remembers the allocation's serial (fakecuda_memory.c)
 * when it is captured, the exec's copy of the op when the graph is instantiated, and the exec's
 * op again when cuGraphExecMemcpyNodeSetParams sets it. cuGraphLaunch of an exec with a copy op
 * whose allocation has since been freed (cuMemFreeHost) or unregistered (cuMemHostUnregister)
 * fails with CUDA_ERROR_ILLEGAL_ADDRESS and runs nothing, even when a new page-locked allocation
 * now covers the same address. The real driver (seen on an H200) segfaults inside cuGraphLaunch
 * there; setting the node again (even to the same pointer) once the new allocation exists makes
 * the launch fine, here as there. Eager copies are unaffected.
 */
#include "fakecuda_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------------
 * Operations, graphs, execs
 * ------------------------------------------------------------------------------------------- */

void op_clear(fc_op *op)
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

void op_note_host(fc_op *op)
{
    if (op->type != CU_GRAPH_NODE_TYPE_MEMCPY) return;
    op->copy.dst_host = host_serial((uintptr_t)op->copy.dst);
    op->copy.src_host = host_serial((uintptr_t)op->copy.src);
}

/* Does a copy op of an exec name a page-locked host allocation that is gone (under the lock)? */
static int op_host_gone(const fc_op *op)
{
    return op->type == CU_GRAPH_NODE_TYPE_MEMCPY && ((op->copy.dst_host && !serial_live(op->copy.dst_host)) ||
                                                     (op->copy.src_host && !serial_live(op->copy.src_host)));
}

static void run_set(const fc_op *op)
{
    size_t rows = op->set.height ? op->set.height : 1;
    for (size_t r = 0; r < rows; r++) {
        unsigned char *d = (unsigned char *)op->set.dst + r * op->set.pitch;
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
}

static void run_copy(const fc_op *op)
{
    if (!op->copy.n) return;
    size_t rows = op->copy.height ? op->copy.height : 1, slices = op->copy.depth ? op->copy.depth : 1;
    for (size_t z = 0; z < slices; z++) {
        for (size_t y = 0; y < rows; y++) {
            unsigned char *d = (unsigned char *)op->copy.dst + z * op->copy.dslice + y * op->copy.dpitch;
            const unsigned char *s = (const unsigned char *)op->copy.src + z * op->copy.sslice + y * op->copy.spitch;
            memmove(d, s, op->copy.n);
        }
    }
}

/* The value at a value op's address, read atomically (another thread may be writing it). */
static uint64_t value_load(const fc_op *op)
{
    if (op->val.size == 4) return __atomic_load_n((const uint32_t *)op->val.addr, __ATOMIC_ACQUIRE);
    return __atomic_load_n((const uint64_t *)op->val.addr, __ATOMIC_ACQUIRE);
}

static int value_met(const fc_op *op)
{
    uint64_t cur = value_load(op), v = op->val.value;
    switch (op->val.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) {
    case CU_STREAM_WAIT_VALUE_GEQ: /* cyclic: (intN_t)(*addr - value) >= 0 */
        return op->val.size == 4 ? (int32_t)(uint32_t)(cur - v) >= 0 : (int64_t)(cur - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == v;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & v) != 0;
    default: /* NOR */ return op->val.size == 4 ? (uint32_t) ~(cur | v) != 0 : ~(cur | v) != 0;
    }
}

int value_wait(const fc_op *op, double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (value_met(op)) return 1;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) >= seconds) return 0;
        sched_yield();
    }
}

/* A write of a value op (a wait is value_wait). */
static void value_write(const fc_op *op)
{
    if (op->val.size == 4) __atomic_store_n((uint32_t *)op->val.addr, (uint32_t)op->val.value, __ATOMIC_RELEASE);
    else __atomic_store_n((uint64_t *)op->val.addr, op->val.value, __ATOMIC_RELEASE);
}

/* Execute one op on the calling thread. Called without the lock. A wait that never holds (the
 * real stream would hang) gives up after a while: from a graph there is nobody to tell. */
void op_run(const fc_op *op)
{
    switch (op->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        bump(&g_counts.kernels_run);
        op->kern.k->fn(op->kern.argv, op->kern.grid, op->kern.block, op->kern.smem);
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        bump(&g_counts.copies);
        run_copy(op);
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        bump(&g_counts.memsets);
        run_set(op);
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        bump(&g_counts.host_funcs_run);
        op->host.fn(op->host.data);
        break;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        if (op->val.wait) (void)value_wait(op, 1.0);
        else value_write(op);
        break;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: /* events are always complete: counted, for the tests */
        if (op->event) ++*(unsigned *)(void *)op->event;
        break;
    default: /* event wait, empty */ break;
    }
}

CUresult graph_push(fc_graph *g, fc_node *node)
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
fc_graph *graph_new(void)
{
    fc_graph *g = calloc(1, sizeof *g);
    if (g && live_add(g, K_GRAPH) != 0) {
        free(g);
        return NULL;
    }
    return g;
}

/* Under the lock. */
void graph_free(fc_graph *g)
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
    for (size_t i = 0; i < x->n; i++) {
        if (live_get(x->src[i], K_NODE) && x->src[i]->dev_exec == x) x->src[i]->dev_exec = NULL;
        op_clear(&x->ops[i]);
        if (x->host) op_clear(&x->host[i]);
    }
    free(x->ops);
    free(x->host);
    free(x->src);
    live_del(x);
    free(x);
}

/* FAKECUDA_DEVICE_UPDATES_LOST set: any host update of an exec (a node's parameters set, an
 * upload) sets every device-updatable kernel node but `except` back to its parameters as
 * instantiated or last set from the host, losing what patch kernels wrote into it: a driver that
 * keeps no device update past a host one, which cgjit must be exact under too (under the lock). */
static void lose_device_updates(fc_exec *x, const fc_op *except)
{
    static int lost = -1;
    if (lost < 0) lost = getenv("FAKECUDA_DEVICE_UPDATES_LOST") != NULL;
    for (size_t i = 0; lost && i < x->n; i++) {
        fc_op *op = &x->ops[i], *h = &x->host[i];
        if (op == except || op->type != CU_GRAPH_NODE_TYPE_KERNEL || h->type != CU_GRAPH_NODE_TYPE_KERNEL ||
            !live_get(x->src[i], K_NODE) || !x->src[i]->dev_updatable || op->kern.k != h->kern.k)
            continue;
        memcpy(args_bytes(op->kern.k, op->kern.argv), args_bytes(h->kern.k, h->kern.argv), op->kern.k->total);
    }
}

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

/* As the driver: a device-updatable node cannot be removed. */
FC_DEFINE(cuGraphDestroyNode, (CUgraphNode hNode))
{
    FAIL_POINT();
    lock();
    fc_node *node = live_get(hNode, K_NODE);
    CUresult err = !node ? CUDA_ERROR_INVALID_HANDLE : node->dev_updatable ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (err == CUDA_SUCCESS) {
        fc_graph *g = node->graph;
        size_t i = 0;
        while (i < g->n && g->nodes[i] != node) i++;
        if (i < g->n) memmove(&g->nodes[i], &g->nodes[i + 1], (g->n - i - 1) * sizeof *g->nodes), g->n--;
        live_del(node);
        op_clear(&node->op);
        free(node);
    }
    unlock();
    return err;
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
    CUresult err = !node                                      ? CUDA_ERROR_INVALID_HANDLE
                 : node->op.type != CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_ERROR_INVALID_VALUE
                                                              : CUDA_SUCCESS;
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
        x->host = calloc(g->n + 1, sizeof *x->host);
        err = (x->src && x->ops && x->host && live_add(x, K_EXEC) == 0) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* As the driver: a graph with device-updatable nodes is instantiated once at a time. */
    for (size_t i = 0; err == CUDA_SUCCESS && i < g->n; i++)
        if (g->nodes[i]->dev_updatable && g->nodes[i]->dev_exec) err = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; err == CUDA_SUCCESS && i < g->n; i++, x->n++) {
        x->src[i] = g->nodes[i];
        if (g->nodes[i]->dev_updatable) g->nodes[i]->dev_exec = x;
        err = op_dup(&x->ops[i], &g->nodes[i]->op);
        if (err == CUDA_SUCCESS) err = op_dup(&x->host[i], &g->nodes[i]->op);
        op_note_host(&x->ops[i]); /* the exec refers to the host allocations live now */
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
    if (err == CUDA_SUCCESS) lose_device_updates(x, NULL);
    unlock();
    return err; /* nothing to upload: "device" memory is host memory */
}

FC_PTSZ(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream), graph_upload(hGraphExec, hStream, ptds))

/* After a patch kernel node ran: the device-updatable nodes from `from` on take the values it
 * wrote into the exec, within this launch, as the driver applies a node's device updates to the
 * nodes that depend on it. */
static void devpatch_applied(CUgraphExec hExec, fc_op *snap, size_t n, size_t from)
{
    lock();
    fc_exec *x = live_get(hExec, K_EXEC);
    for (size_t j = from; x && j < n && j < x->n; j++) {
        fc_node *node = live_get(x->src[j], K_NODE);
        if (!node || !node->dev_updatable || snap[j].type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
        const fc_kernel *k = snap[j].kern.k;
        memcpy(args_bytes(k, snap[j].kern.argv), args_bytes(k, x->ops[j].kern.argv), k->total);
    }
    unlock();
}

/* Run an exec: snapshot its ops under the lock (so a concurrent SetParams affects only later
 * launches, as on a GPU), then run them in order without it. A copy op whose page-locked host
 * allocation is gone fails the launch before anything runs (the real driver crashes). */
static CUresult graph_launch(CUgraphExec hExec, CUstream h, int ptds)
{
    fc_exec *x;
    fc_op *snap = NULL;
    size_t n = 0;
    delay(DELAY_GRAPH_LAUNCH);
    if (orders_after_legacy(h, ptds)) deferred_run();
    lock();
    CUresult err = exec_stream_check(hExec, h, ptds, &x);
    for (size_t i = 0; err == CUDA_SUCCESS && i < x->n; i++)
        if (op_host_gone(&x->ops[i])) err = CUDA_ERROR_ILLEGAL_ADDRESS;
    if (err == CUDA_SUCCESS && !(snap = calloc(x->n + 1, sizeof *snap))) err = CUDA_ERROR_OUT_OF_MEMORY;
    for (; err == CUDA_SUCCESS && n < x->n; n++) err = op_dup(&snap[n], &x->ops[n]);
    if (err == CUDA_SUCCESS) g_counts.graph_launches++;
    unlock();
    for (size_t i = 0; err == CUDA_SUCCESS && i < n; i++) {
        op_run(&snap[i]);
        if (snap[i].type == CU_GRAPH_NODE_TYPE_KERNEL && fakecuda_is_devpatch(snap[i].kern.k))
            devpatch_applied(hExec, snap, n, i + 1);
    }
    for (size_t i = 0; i < n; i++) op_clear(&snap[i]);
    free(snap);
    return err;
}

FC_PTSZ(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream), graph_launch(hGraphExec, hStream, ptds))

/* The exec's op of `type` that came from source node hNode (under the lock). */
static fc_op *exec_op(fc_exec *x, CUgraphNode hNode, CUgraphNodeType type)
{
    for (size_t i = 0; i < x->n; i++) {
        if ((CUgraphNode)x->src[i] == hNode) return x->ops[i].type == type ? &x->ops[i] : NULL;
    }
    return NULL;
}
#define exec_kernel_op(x, node) exec_op((x), (node), CU_GRAPH_NODE_TYPE_KERNEL)

fc_op *devnode_op(fc_node *node)
{
    return node->dev_exec ? exec_kernel_op(node->dev_exec, (CUgraphNode)node) : NULL;
}

/* A graph node of `type` (under the lock). */
static fc_node *node_of(CUgraphNode hNode, CUgraphNodeType type, CUresult *err)
{
    fc_node *node = live_get(hNode, K_NODE);
    *err = !node ? CUDA_ERROR_INVALID_HANDLE : node->op.type != type ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    return *err == CUDA_SUCCESS ? node : NULL;
}

/* Copy nodes report unified operands: in the fake, every pointer is a host address. */
FC_DEFINE(cuGraphMemcpyNodeGetParams, (CUgraphNode hNode, CUDA_MEMCPY3D *p))
{
    FAIL_POINT();
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult err;
    lock();
    fc_node *node = node_of(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, &err);
    if (node) {
        const fc_op *op = &node->op;
        memset(p, 0, sizeof *p);
        p->srcMemoryType = p->dstMemoryType = CU_MEMORYTYPE_UNIFIED;
        p->srcDevice = (CUdeviceptr)(uintptr_t)op->copy.src;
        p->dstDevice = (CUdeviceptr)(uintptr_t)op->copy.dst;
        p->srcPitch = op->copy.spitch, p->dstPitch = op->copy.dpitch;
        p->WidthInBytes = op->copy.n;
        p->Height = op->copy.height ? op->copy.height : 1;
        p->Depth = op->copy.depth ? op->copy.depth : 1;
    }
    unlock();
    return err;
}

FC_DEFINE(cuGraphMemsetNodeGetParams, (CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *p))
{
    FAIL_POINT();
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult err;
    lock();
    fc_node *node = node_of(hNode, CU_GRAPH_NODE_TYPE_MEMSET, &err);
    if (node) {
        const fc_op *op = &node->op;
        memset(p, 0, sizeof *p);
        p->dst = (CUdeviceptr)(uintptr_t)op->set.dst;
        p->pitch = op->set.pitch;
        p->value = op->set.value;
        p->elementSize = op->set.elem;
        p->width = op->set.count;
        p->height = op->set.height ? op->set.height : 1;
    }
    unlock();
    return err;
}

/* A host or device operand of a copy as the parameters give it. */
static void *operand(CUmemorytype type, const void *host, CUdeviceptr dev)
{
    return type == CU_MEMORYTYPE_HOST ? (void *)(uintptr_t)host : PTR(dev);
}

/* As the driver: both the node's copy and the new one must be 1D, and not empty. */
FC_DEFINE(cuGraphExecMemcpyNodeSetParams,
          (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_MEMCPY3D *p, CUcontext ctx))
{
    FAIL_POINT();
    (void)ctx;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_exec *x = live_get(hGraphExec, K_EXEC);
    fc_op *op = x ? exec_op(x, hNode, CU_GRAPH_NODE_TYPE_MEMCPY) : NULL;
    CUresult err = !x ? CUDA_ERROR_INVALID_HANDLE : !op ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (err == CUDA_SUCCESS &&
        (p->Height > 1 || p->Depth > 1 || op->copy.height > 1 || op->copy.depth > 1 || !p->WidthInBytes))
        err = CUDA_ERROR_INVALID_VALUE;
    if (err == CUDA_SUCCESS) {
        op->copy.src = operand(p->srcMemoryType, p->srcHost, p->srcDevice);
        op->copy.dst = operand(p->dstMemoryType, p->dstHost, p->dstDevice);
        op->copy.n = p->WidthInBytes;
        op_note_host(op); /* now refers to the host allocations live now */
        lose_device_updates(x, NULL);
        g_counts.node_param_sets++;
    }
    unlock();
    return err;
}

/* As the driver: a 1D memset may change its address, value and width, not its element size or
 * height, and not to an empty one. */
FC_DEFINE(cuGraphExecMemsetNodeSetParams,
          (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx))
{
    FAIL_POINT();
    (void)ctx;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_exec *x = live_get(hGraphExec, K_EXEC);
    fc_op *op = x ? exec_op(x, hNode, CU_GRAPH_NODE_TYPE_MEMSET) : NULL;
    CUresult err = !x ? CUDA_ERROR_INVALID_HANDLE : !op ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (err == CUDA_SUCCESS && (p->elementSize != op->set.elem || p->height > 1 || op->set.height > 1 || !p->width))
        err = CUDA_ERROR_INVALID_VALUE;
    if (err == CUDA_SUCCESS) {
        op->set.dst = PTR(p->dst);
        op->set.value = p->value;
        op->set.count = p->width;
        lose_device_updates(x, NULL);
        g_counts.node_param_sets++;
    }
    unlock();
    return err;
}

/* As the driver: an event record or wait node of the exec takes another event. */
static CUresult exec_set_event(CUgraphExec hGraphExec, CUgraphNode hNode, CUevent ev, CUgraphNodeType type)
{
    lock();
    fc_exec *x = live_get(hGraphExec, K_EXEC);
    fc_op *op = x ? exec_op(x, hNode, type) : NULL;
    CUresult err = !x || !live_get(ev, K_EVENT) ? CUDA_ERROR_INVALID_HANDLE
                 : !op                          ? CUDA_ERROR_INVALID_VALUE
                                                : CUDA_SUCCESS;
    if (err == CUDA_SUCCESS) {
        op->event = ev;
        g_counts.node_param_sets++;
    }
    unlock();
    return err;
}

FC_DEFINE(cuGraphExecEventRecordNodeSetEvent, (CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event))
{
    FAIL_POINT();
    return exec_set_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

FC_DEFINE(cuGraphExecEventWaitNodeSetEvent, (CUgraphExec hGraphExec, CUgraphNode hNode, CUevent event))
{
    FAIL_POINT();
    return exec_set_event(hGraphExec, hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* As the driver: a host node of the exec takes another function and data. */
FC_DEFINE(cuGraphExecHostNodeSetParams, (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *p))
{
    FAIL_POINT();
    if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
    lock();
    fc_exec *x = live_get(hGraphExec, K_EXEC);
    fc_op *op = x ? exec_op(x, hNode, CU_GRAPH_NODE_TYPE_HOST) : NULL;
    CUresult err = !x ? CUDA_ERROR_INVALID_HANDLE : !op ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (err == CUDA_SUCCESS) {
        op->host.fn = p->fn;
        op->host.data = p->userData;
        g_counts.node_param_sets++;
    }
    unlock();
    return err;
}

/* Replace an exec kernel op's function, dims and parameter values (read through the given
 * kernelParams or extra with the registered sizes of the new function). */
FC_DEFINE(cuGraphExecKernelNodeSetParams_v2,
          (CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *p))
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
    CUresult err = !x  ? CUDA_ERROR_INVALID_HANDLE
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
        fc_op *h = &x->host[op - x->ops];
        op_clear(h);
        if (op_dup(h, op) != CUDA_SUCCESS) h->type = CU_GRAPH_NODE_TYPE_EMPTY;
        lose_device_updates(x, op);
        g_counts.node_param_sets++;
    }
    unlock();
    return err;
}
