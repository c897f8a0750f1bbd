/*
 * libs_nccl.c — NCCL collectives and point-to-point calls as traced ops (see libs.h).
 *
 * A collective's key: the communicator (address and generation), the stream, the function,
 * count, data type, reduction op, and root or peer; its buffers are arguments. A replay whose
 * guard holds absorbs the call: NCCL's host work is skipped, and the kernels it launched for the
 * call replay from the step's graph with the parameters learned from its runs (a parameter that
 * changes with none of the arguments keeps NCCL running on every call: LIB_UNEXPLAINED).
 *
 * The calls are marked collective: their kernels wait for the peers' kernels of the same call.
 * A chunk ends with each (graphs/graph.c, BREAK_COLLECTIVE), so when the program's call returns
 * its kernels are on the GPU, as they are when NCCL launches them eagerly. Each rank issues each
 * collective exactly once, in program order, no later than eager would, whether its step
 * replays, leaves its trace, or runs eagerly: ranks need not take the same decision for a step,
 * and none waits for work another holds back.
 *
 * Generations: a communicator gets one when created (ncclCommInitRank*, ncclCommInitAll,
 * ncclCommSplit, ncclCommShrink) and a new one whenever NCCL's choices for it may change
 * without a change of arguments (a reduction op created or destroyed, buffers registered or
 * deregistered, finalize, revoke); destroy and abort drop it.
 *
 * Groups: the calls between ncclGroupStart and ncclGroupEnd only queue work; the outermost
 * ncclGroupEnd launches it. The calls inside reach NCCL as the program makes them, and that
 * ncclGroupEnd is one LIB op that is never absorbed (LIB_NCCL_GROUP): its launches are matched
 * and replayed from graphs with the run's values, and it is a collective like the others.
 */
#include "runtime/libs.h"

/* The wrappers are the library's entry points: exported, unlike the rest of libcgjit. */
#pragma GCC visibility push(default)

#include <nccl.h>

/* Depth of ncclGroupStart on this thread. */
static __thread int group_depth;

/* The functions, as they are part of a key. */
enum {
    F_ALLREDUCE,
    F_BROADCAST,
    F_BCAST,
    F_REDUCE,
    F_ALLGATHER,
    F_REDUCESCATTER,
    F_ALLTOALL,
    F_GATHER,
    F_SCATTER,
    F_SEND,
    F_RECV
};

static void nccl_key(cgj_libcall_t *lc, int fn, ncclComm_t comm, cudaStream_t s, size_t count, ncclDataType_t dt,
                     ncclRedOp_t op, int peer)
{
    struct {
        const void *comm, *s;
        uint64_t gen, count;
        int32_t fn, dt, op, peer; /* no padding: every byte of a key is compared */
    } k = {comm, s, cgj_lib_gen(comm), count, fn, dt, op, peer};
    if (!comm) lib_never(lc, CGJ_REASON_LIB_HANDLE);
    lc->collective = true;
    key_put(lc, &k, sizeof k);
}

#define NCCL_PROLOGUE(fn, ...)                                    \
    LIB_REAL(fn, ncclSystemError);                                \
    if (group_depth || cgj_lib_pass()) return real_(__VA_ARGS__); \
    cgj_libcall_t lc;                                             \
    lib_init(&lc)

#define NCCL_RUN(fn, ...) LIB_CALL(lc, #fn, ncclSuccess, real_(__VA_ARGS__))

/* ---- collectives ---- */

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s)
{
    NCCL_PROLOGUE(ncclAllReduce, send, recv, count, dt, op, comm, s);
    nccl_key(&lc, F_ALLREDUCE, comm, s, count, dt, op, -1);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclAllReduce, send, recv, count, dt, op, comm, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           cudaStream_t s)
{
    NCCL_PROLOGUE(ncclBroadcast, send, recv, count, dt, root, comm, s);
    nccl_key(&lc, F_BROADCAST, comm, s, count, dt, -1, root);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclBroadcast, send, recv, count, dt, root, comm, s);
}

ncclResult_t ncclBcast(void *buf, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t s)
{
    NCCL_PROLOGUE(ncclBcast, buf, count, dt, root, comm, s);
    nccl_key(&lc, F_BCAST, comm, s, count, dt, -1, root);
    arg_put(&lc, buf);
    NCCL_RUN(ncclBcast, buf, count, dt, root, comm, s);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t s)
{
    NCCL_PROLOGUE(ncclReduce, send, recv, count, dt, op, root, comm, s);
    nccl_key(&lc, F_REDUCE, comm, s, count, dt, op, root);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclReduce, send, recv, count, dt, op, root, comm, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm,
                           cudaStream_t s)
{
    NCCL_PROLOGUE(ncclAllGather, send, recv, count, dt, comm, s);
    nccl_key(&lc, F_ALLGATHER, comm, s, count, dt, -1, -1);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclAllGather, send, recv, count, dt, comm, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t s)
{
    NCCL_PROLOGUE(ncclReduceScatter, send, recv, count, dt, op, comm, s);
    nccl_key(&lc, F_REDUCESCATTER, comm, s, count, dt, op, -1);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclReduceScatter, send, recv, count, dt, op, comm, s);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
ncclResult_t ncclAlltoAll(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm,
                          cudaStream_t s)
{
    NCCL_PROLOGUE(ncclAlltoAll, send, recv, count, dt, comm, s);
    nccl_key(&lc, F_ALLTOALL, comm, s, count, dt, -1, -1);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclAlltoAll, send, recv, count, dt, comm, s);
}

ncclResult_t ncclGather(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                        cudaStream_t s)
{
    NCCL_PROLOGUE(ncclGather, send, recv, count, dt, root, comm, s);
    nccl_key(&lc, F_GATHER, comm, s, count, dt, -1, root);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclGather, send, recv, count, dt, root, comm, s);
}

ncclResult_t ncclScatter(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                         cudaStream_t s)
{
    NCCL_PROLOGUE(ncclScatter, send, recv, count, dt, root, comm, s);
    nccl_key(&lc, F_SCATTER, comm, s, count, dt, -1, root);
    arg_put(&lc, send), arg_put(&lc, recv);
    NCCL_RUN(ncclScatter, send, recv, count, dt, root, comm, s);
}
#endif

/* ---- point to point ---- */

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s)
{
    NCCL_PROLOGUE(ncclSend, send, count, dt, peer, comm, s);
    nccl_key(&lc, F_SEND, comm, s, count, dt, -1, peer);
    arg_put(&lc, send);
    NCCL_RUN(ncclSend, send, count, dt, peer, comm, s);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s)
{
    NCCL_PROLOGUE(ncclRecv, recv, count, dt, peer, comm, s);
    nccl_key(&lc, F_RECV, comm, s, count, dt, -1, peer);
    arg_put(&lc, recv);
    NCCL_RUN(ncclRecv, recv, count, dt, peer, comm, s);
}

/* ---- groups ---- */

ncclResult_t ncclGroupStart(void)
{
    LIB_REAL(ncclGroupStart, ncclSystemError);
    ncclResult_t r = real_();
    if (r == ncclSuccess) group_depth++;
    return r;
}

/* NCCL leaves the group level whatever the outcome. */
ncclResult_t ncclGroupEnd(void)
{
    LIB_REAL(ncclGroupEnd, ncclSystemError);
    if (group_depth > 0) group_depth--;
    if (group_depth || cgj_lib_pass()) return real_();
    cgj_libcall_t lc;
    lib_init(&lc);
    lc.collective = true;
    lib_never(&lc, CGJ_REASON_LIB_NCCL_GROUP);
    LIB_CALL(lc, "ncclGroupEnd", ncclSuccess, real_());
}

/* ---- communicators: generations ---- */

static ncclResult_t born(ncclResult_t r, ncclComm_t *comm)
{
    if (r == ncclSuccess && comm && *comm) cgj_lib_gen_bump(*comm);
    return r;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    LIB_REAL(ncclCommInitRank, ncclSystemError);
    return born(real_(comm, nranks, id, rank), comm);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
    LIB_REAL(ncclCommInitRankConfig, ncclSystemError);
    return born(real_(comm, nranks, id, rank, config), comm);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid, ncclUniqueId *ids,
                                      ncclConfig_t *config)
{
    LIB_REAL(ncclCommInitRankScalable, ncclSystemError);
    return born(real_(comm, nranks, rank, nid, ids, config), comm);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    LIB_REAL(ncclCommInitAll, ncclSystemError);
    ncclResult_t r = real_(comms, ndev, devlist);
    for (int i = 0; r == ncclSuccess && comms && i < ndev; i++) born(r, &comms[i]);
    return r;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    LIB_REAL(ncclCommSplit, ncclSystemError);
    return born(real_(comm, color, key, newcomm, config), newcomm);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm, ncclConfig_t *config,
                            int flags)
{
    LIB_REAL(ncclCommShrink, ncclSystemError);
    return born(real_(comm, exclude, nexclude, newcomm, config, flags), newcomm);
}
#endif

/* A call after which NCCL may choose other kernels for the same arguments: a new generation. */
#define COMM_CHANGES(fn, comm, params, args) \
    ncclResult_t fn params                   \
    {                                        \
        LIB_REAL(fn, ncclSystemError);       \
        ncclResult_t r = real_ args;         \
        cgj_lib_gen_bump(comm);              \
        return r;                            \
    }

COMM_CHANGES(ncclCommFinalize, comm, (ncclComm_t comm), (comm))
COMM_CHANGES(ncclCommRegister, comm, (const ncclComm_t comm, void *buf, size_t size, void **handle),
             (comm, buf, size, handle))
COMM_CHANGES(ncclCommDeregister, comm, (const ncclComm_t comm, void *handle), (comm, handle))
COMM_CHANGES(ncclRedOpCreatePreMulSum, comm,
             (ncclRedOp_t * op, void *scalar, ncclDataType_t dt, ncclScalarResidence_t res, ncclComm_t comm),
             (op, scalar, dt, res, comm))
COMM_CHANGES(ncclRedOpDestroy, comm, (ncclRedOp_t op, ncclComm_t comm), (op, comm))
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
COMM_CHANGES(ncclCommWindowRegister, comm, (ncclComm_t comm, void *buf, size_t size, ncclWindow_t *win, int flags),
             (comm, buf, size, win, flags))
COMM_CHANGES(ncclCommWindowDeregister, comm, (ncclComm_t comm, ncclWindow_t win), (comm, win))
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
COMM_CHANGES(ncclCommRevoke, comm, (ncclComm_t comm, int flags), (comm, flags))
#endif

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    LIB_REAL(ncclCommDestroy, ncclSystemError);
    cgj_lib_gen_drop(comm);
    return real_(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    LIB_REAL(ncclCommAbort, ncclSystemError);
    cgj_lib_gen_drop(comm);
    return real_(comm);
}
