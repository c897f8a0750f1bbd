/*
 * fakecuda.c — a fake libcuda.so.1 for tests on machines without a GPU.
 *
 * cgjit interposes the CUDA driver API. To test that path without a GPU, this library stands in
 * for libcuda.so.1: it exports the driver entry points cgjit touches (every function cgjit wraps
 * or calls, base/driver.h), under their exact ABI names (cuMemcpyHtoD_v2, cuLaunchKernel_ptsz,
 * ...), and runs everything synchronously on the CPU.
 *
 *  - Device memory is host memory: a CUdeviceptr is a host address. Every allocation is entered
 *    in a block registry, so cuPointerGetAttribute can tell device, pinned and pageable memory
 *    apart as the real driver does, and so copies and sets can reject device ranges that lie in
 *    no live allocation (the real driver fails those too, or faults).
 *  - Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, ...) reserves host
 *    address space and maps it in place; a mapped range is device memory like any allocation.
 *    Memory pools reduce to cuMemAllocAsync. See fakecuda_vmm.c for the differences. A CUDA array
 *    is a dense host buffer with no device address; there is no managed memory (prefetching
 *    and discarding only check their arguments).
 *  - A kernel is a host function registered with fakecuda_register_kernel(); its handle serves as
 *    CUfunction or CUkernel. Launching packs the parameter values into a private buffer (from
 *    kernelParams or from the `extra` buffer) and calls the function with pointers into it.
 *  - Work on a stream either runs at once on the calling thread or, while the stream captures,
 *    becomes a node appended to the capture's graph. Graphs are linear: nodes run in capture
 *    order. Kernel nodes hold parameter VALUES copied at capture time, as the real driver does;
 *    copy nodes hold addresses, so a host-to-device node reads its source at launch time. A
 *    stream wait for a value (cuStreamWaitValue*) that does not hold within a second fails with
 *    CUDA_ERROR_TIMEOUT where the real stream would hang.
 *  - An exec (instantiated graph) owns deep copies of its graph's nodes and remembers, for each,
 *    the source node, because cuGraphExecKernelNodeSetParams names the node of the source graph.
 *  - Page-locked host memory has an identity: every allocation and registration gets a serial
 *    number, and cuMemFreeHost keeps freed pinned buffers for reuse, so the next allocation of
 *    the same size comes back at the same address as another allocation (as the real driver's
 *    often does). A graph copy node, and an exec's copy op, remember the page-locked allocations
 *    they name (captured, instantiated, set by cuGraphExecMemcpyNodeSetParams). cuGraphLaunch of
 *    an exec whose copy names one that was freed or unregistered since fails with
 *    CUDA_ERROR_ILLEGAL_ADDRESS and runs nothing, even if a new allocation covers the address:
 *    the real driver segfaults inside cuGraphLaunch there (fakecuda_graph.c).
 *
 * The real driver's capture rules are mirrored, because cgjit must obey them on a GPU:
 *  - work on the legacy default stream while a blocking stream captures fails with
 *    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (legacy-stream work would depend on the capture);
 *  - a synchronizing or "potentially unsafe" call (sync copies and sets, stream/event sync and
 *    query, allocation and free) fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while a capture
 *    in GLOBAL mode runs in any thread, or one in THREAD_LOCAL mode runs in the calling thread;
 *  - syncing or querying a capturing stream (cuStreamGetFlags among the queries, as the real
 *    driver 580 has it), or syncing the context during any capture, fails with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
 * Each such failure invalidates the captures it concerns: later work on them fails with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and cuStreamEndCapture returns that error and no graph.
 *
 * Exports are defined twice over: a library-internal (hidden) implementation fc_NAME and the
 * exported symbol NAME as an alias of it. cuGetProcAddress hands out fc_NAME, which is the address
 * dlsym(handle, "NAME") returns, and it binds inside this library even when cgjit (loaded first)
 * exports a wrapper of the same name, so a wrapper that calls the "real" function never calls
 * itself.
 *
 * All state sits behind one mutex, never held while a kernel or host function runs. It is
 * fork-safe (fork_prepare below): a child forked while another thread held it gets it free, with
 * the state as that thread left it whole.
 *
 * The sources, one concern each (fakecuda_internal.h declares what they share):
 *  - fakecuda.c (this file): the global state and its lock, the live-handle registry, failure
 *    injection (fakecuda_fail_next) and the call counters (fakecuda_get/reset_counts);
 *  - fakecuda_device.c: init, device, context (synchronize, push/pop), error strings;
 *  - fakecuda_kernel.c: kernels and their parameter buffers, launches (cooperative ones
 *    included), kernel introspection, fakecuda_register_kernel;
 *  - fakecuda_memory.c: the memory block registry, allocation, pools, host memory, prefetching
 *    and discarding, CUDA arrays, pointer attributes;
 *  - fakecuda_copy.c: copies and sets (1D, 2D, 3D, peer, array and batch copies; 1D and 2D sets);
 *  - fakecuda_vmm.c: virtual memory management;
 *  - fakecuda_stream.c: streams, events, the capture rules, stream callbacks and memory
 *    operations (write/wait value, batches), stream capture;
 *  - fakecuda_graph.c: operations (units of stream work and how they run), graphs, execs;
 *  - fakecuda_extra.c: what a CPU cannot do (external semaphores, hardware decompression, sparse
 *    array mapping): arguments checked, then CUDA_ERROR_NOT_SUPPORTED;
 *  - fakecuda_devpatch.c: device-updatable kernel nodes, and cgjit's patch kernel as the one
 *    module it loads;
 *  - fakecuda_procaddr.c: cuGetProcAddress and the table of every export.
 */
#include "fakecuda_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PENDING_FAILS 64

/* ---------------------------------------------------------------------------------------------
 * Global state
 * ------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
fakecuda_counts_t g_counts;
char g_ctx_obj; /* the one context; only its address matters */

void lock(void)
{
    pthread_mutex_lock(&g_lock);
}
void unlock(void)
{
    pthread_mutex_unlock(&g_lock);
}

/* fork() while another thread holds the lock would leave the child a lock that no thread of
 * its own ever releases: its first call hangs. So fork takes the lock first
 * (no thread is half-way through a change then), the parent releases it, the child gets a new
 * one. The lock is recursive: cgjit's own prepare handler asks this driver for its device
 * count, and it runs before ours (handlers prepare in the reverse order of registration, and
 * cgjit registers after loading the driver), but should the order ever turn, the thread that
 * forks must not wait for itself. The child handler runs before cgjit's for the same reason. */
static void init_lock(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_lock, &a);
    pthread_mutexattr_destroy(&a);
}

static void fork_prepare(void)
{
    lock();
}
static void fork_parent(void)
{
    unlock();
}
static void fork_child(void)
{
    init_lock();
} /* held by a thread of the parent: a new one */

__attribute__((constructor)) static void fork_safety(void)
{
    init_lock();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void bump(unsigned long *counter)
{
    lock();
    ++*counter;
    unlock();
}

/* Failures queued by fakecuda_fail_next, taken in order. */
static struct {
    char name[64];
    CUresult err;
} g_fails[MAX_PENDING_FAILS];
static int g_nfails;

/* fakecuda_hold: calls of this name wait at their start until fakecuda_release. */
static char g_hold[64];
static int g_held;
static pthread_cond_t g_hold_cond = PTHREAD_COND_INITIALIZER;

FAKECUDA_API void fakecuda_hold(const char *exported_name)
{
    lock();
    snprintf(g_hold, sizeof g_hold, "%s", exported_name);
    g_held = 0;
    unlock();
}

FAKECUDA_API int fakecuda_held(void)
{
    lock();
    int n = g_held;
    unlock();
    return n;
}

FAKECUDA_API void fakecuda_release(void)
{
    lock();
    g_hold[0] = 0;
    pthread_cond_broadcast(&g_hold_cond);
    unlock();
}

CUresult fail_take(const char *name)
{
    CUresult err = CUDA_SUCCESS;
    lock();
    if (g_hold[0] && !strcmp(g_hold, name)) {
        g_held++;
        while (g_hold[0] && !strcmp(g_hold, name)) pthread_cond_wait(&g_hold_cond, &g_lock);
    }
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

struct live *g_live;
size_t g_nlive;
static size_t g_caplive;

int live_add(const void *p, handle_kind kind)
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

void live_del(const void *p)
{
    for (size_t i = 0; i < g_nlive; i++) {
        if (g_live[i].p == p) {
            g_live[i] = g_live[--g_nlive];
            return;
        }
    }
}

void *live_get(const void *p, handle_kind kind)
{
    if (!p) return NULL;
    for (size_t i = 0; i < g_nlive; i++)
        if (g_live[i].p == p && g_live[i].kind == kind) return (void *)p;
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Test-facing API: call counters and failure injection
 * ------------------------------------------------------------------------------------------- */

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

static unsigned g_delay_us[2]; /* eager kernel launch, graph launch */

FAKECUDA_API void fakecuda_set_delays(unsigned launch_us, unsigned graph_launch_us)
{
    __atomic_store_n(&g_delay_us[0], launch_us, __ATOMIC_RELAXED);
    __atomic_store_n(&g_delay_us[1], graph_launch_us, __ATOMIC_RELAXED);
}

void delay(int which)
{
    unsigned us = __atomic_load_n(&g_delay_us[which], __ATOMIC_RELAXED);
    if (!us) return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < (long)us);
}

FAKECUDA_API int fakecuda_fail_pending(void)
{
    lock();
    int n = g_nfails;
    unlock();
    return n;
}

FAKECUDA_API void fakecuda_fail_clear(void)
{
    lock();
    g_nfails = 0;
    unlock();
}
