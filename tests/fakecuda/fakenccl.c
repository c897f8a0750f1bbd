/*
 * fakenccl.c — a fake NCCL (libfakenccl.so) for host tests of cgjit's NCCL wrappers.
 *
 * One rank per communicator (ncclCommInitAll with one device): what NCCL does on one GPU. It
 * exports, with nccl.h's signatures: ncclGetErrorString, ncclCommInitAll, ncclCommDestroy,
 * ncclAllReduce, ncclBroadcast, ncclGroupStart and ncclGroupEnd. Like the real library it works
 * through the driver only, reached as a real library reaches it (fakelib.h: CGJIT_DRIVER,
 * cuGetProcAddress), so cgjit sees its allocations and launches.
 *
 * Behaviour that matters to the tests:
 *  - A communicator owns device state (cuMemAlloc at init, cuMemFree at destroy): a step counter
 *    every kernel of the communicator advances, as NCCL's kernels advance their connections'
 *    steps in device memory. A kernel whose state no live communicator owns (a graph replaying
 *    launches of a destroyed communicator) is counted (fakenccl_errors) and does nothing else.
 *  - A collective is one kernel on the call's stream: (state, send, recv, bytes, work). With one
 *    rank, all-reduce and broadcast copy send to recv. `work` is 0, unless fakenccl_set_fifo(1):
 *    then it is the call's sequence number on the communicator, which the kernel checks against
 *    the calls it has run, as NCCL's kernels read their work from a host FIFO whose slots the
 *    next calls reuse; a kernel replayed with a stale number is counted as an error.
 *  - Between ncclGroupStart and the outermost ncclGroupEnd the calls are queued; ncclGroupEnd
 *    launches them in order.
 *  - Arguments are checked as NCCL checks them: a NULL or destroyed communicator, an unknown data
 *    type or op give ncclInvalidArgument before any driver call.
 */
#define _GNU_SOURCE
#include "fakenccl.h"
#include "fakecuda.h"
#include "fakelib.h"

#include <cuda.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN_API __attribute__((visibility("default")))

static struct {
    __typeof__(cuMemAlloc_v2) *mem_alloc;
    __typeof__(cuMemFree_v2) *mem_free;
    __typeof__(cuLaunchKernel) *launch;
} drv;
static CUfunction kern;
static unsigned long g_calls, g_kernels, g_errors;
static int g_fifo;

typedef struct devstate {
    uint64_t steps; /* kernels of the communicator that ran */
    uint64_t work;  /* FIFO mode: the sequence number of the next call's work */
} devstate_t;

struct ncclComm {
    fakelib_obj_t live; /* on the live list (fakelib.h) */
    CUdeviceptr state;
    uint64_t seq; /* calls enqueued */
};

static bool has_state(const fakelib_obj_t *o, const void *s)
{
    return ((const struct ncclComm *)o)->state == *(const CUdeviceptr *)s;
}

/* Is s the device state of a live communicator? */
static bool state_live(CUdeviceptr s)
{
    return s && fakelib_live_any(has_state, &s);
}

/* (state, send, recv, bytes, work, fifo) */
static void k_coll(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    (void)grid, (void)block, (void)smem;
    fakelib_count(&g_kernels);
    CUdeviceptr st = *(CUdeviceptr *)params[0];
    if (!state_live(st)) {
        fakelib_count(&g_errors);
        fprintf(stderr, "fakenccl: a kernel ran with state 0x%llx, which no live communicator owns\n",
                (unsigned long long)st);
        return;
    }
    devstate_t *d = (devstate_t *)(uintptr_t)st;
    uint64_t work = *(uint64_t *)params[4];
    if (*(int *)params[5]) {
        if (work != d->work) {
            fakelib_count(&g_errors);
            fprintf(stderr, "fakenccl: a kernel ran with work %llu where the FIFO is at %llu\n",
                    (unsigned long long)work, (unsigned long long)d->work);
            return;
        }
        d->work++;
    }
    d->steps++;
    void *send = *(void **)params[1], *recv = *(void **)params[2];
    size_t bytes = *(size_t *)params[3];
    if (send != recv) memmove(recv, send, bytes);
}

static bool init(void)
{
    __typeof__(fakecuda_register_kernel) *reg = fakelib_driver_open();
    if (!reg || !fakelib_resolve("cuMemAlloc", (void **)&drv.mem_alloc) ||
        !fakelib_resolve("cuMemFree", (void **)&drv.mem_free) ||
        !fakelib_resolve("cuLaunchKernel", (void **)&drv.launch))
        return false;
    static const size_t sizes[] = {8, 8, 8, 8, 8, 4};
    kern = reg("fakenccl_collective", k_coll, 6, sizes, 1, 0);
    return kern != NULL;
}

static bool ready(void)
{
    return fakelib_ready(init);
}

/* ---- groups: queued calls ---- */

typedef struct queued {
    ncclComm_t comm;
    const void *send;
    void *recv;
    size_t bytes;
    cudaStream_t s;
} queued_t;

static __thread int t_depth;
static __thread queued_t t_queue[64];
static __thread int t_nqueue;

static ncclResult_t launch(const queued_t *q)
{
    ncclComm_t c = q->comm;
    uint64_t work = g_fifo ? c->seq : 0;
    int fifo = g_fifo;
    c->seq++;
    void *params[] = {&c->state, (void *)&q->send, (void *)&q->recv, (void *)&q->bytes, &work, &fifo};
    CUresult r = drv.launch(kern, 1, 1, 1, 32, 1, 1, 0, (CUstream)q->s, params, NULL);
    return r == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

static size_t type_bytes(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
    }
}

static ncclResult_t collective(const void *send, void *recv, size_t count_, ncclDataType_t dt, int op, ncclComm_t comm,
                               cudaStream_t s)
{
    fakelib_count(&g_calls);
    if (!ready()) return ncclSystemError;
    if (!comm || !fakelib_live(comm) || !type_bytes(dt) || op < 0 || op >= (int)ncclNumOps || !send || !recv)
        return ncclInvalidArgument;
    queued_t q = {comm, send, recv, count_ * type_bytes(dt), s};
    if (t_depth) {
        if (t_nqueue == 64) return ncclInternalError;
        t_queue[t_nqueue++] = q;
        return ncclSuccess;
    }
    return count_ ? launch(&q) : ncclSuccess;
}

FN_API ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t s)
{
    return collective(send, recv, n, dt, op, comm, s);
}

FN_API ncclResult_t ncclBroadcast(const void *send, void *recv, size_t n, ncclDataType_t dt, int root, ncclComm_t comm,
                                  cudaStream_t s)
{
    return root != 0 ? ncclInvalidArgument : collective(send, recv, n, dt, ncclSum, comm, s);
}

FN_API ncclResult_t ncclGroupStart(void)
{
    t_depth++;
    return ncclSuccess;
}

FN_API ncclResult_t ncclGroupEnd(void)
{
    if (t_depth == 0) return ncclInvalidUsage;
    if (--t_depth) return ncclSuccess;
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < t_nqueue && r == ncclSuccess; i++)
        if (t_queue[i].bytes) r = launch(&t_queue[i]);
    t_nqueue = 0;
    return r;
}

FN_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    (void)devlist;
    if (!ready()) return ncclSystemError;
    if (!comms || ndev != 1) return ncclInvalidArgument;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c || drv.mem_alloc(&c->state, sizeof(devstate_t)) != CUDA_SUCCESS) {
        free(c);
        return ncclUnhandledCudaError;
    }
    memset((void *)(uintptr_t)c->state, 0, sizeof(devstate_t));
    fakelib_live_add(&c->live);
    comms[0] = c;
    return ncclSuccess;
}

FN_API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm || !fakelib_live_remove(&comm->live)) return ncclInvalidArgument;
    drv.mem_free(comm->state);
    free(comm);
    return ncclSuccess;
}

FN_API const char *ncclGetErrorString(ncclResult_t r)
{
    return r == ncclSuccess ? "no error" : "fakenccl error";
}

FN_API unsigned long fakenccl_calls(void)
{
    return __atomic_load_n(&g_calls, __ATOMIC_RELAXED);
}
FN_API unsigned long fakenccl_kernels_run(void)
{
    return __atomic_load_n(&g_kernels, __ATOMIC_RELAXED);
}
FN_API unsigned long fakenccl_errors(void)
{
    return __atomic_load_n(&g_errors, __ATOMIC_RELAXED);
}
FN_API void fakenccl_set_fifo(int on)
{
    g_fifo = on;
}
FN_API uint64_t fakenccl_steps(ncclComm_t comm)
{
    return fakelib_live(comm) ? ((devstate_t *)(uintptr_t)comm->state)->steps : 0;
}
