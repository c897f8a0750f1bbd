/*
 * verify.c — CGJIT_VERIFY: every replayed graph checked against the program's own calls.
 *
 * A user who wants to know whether cgjit is safe on their program, and a developer looking for
 * the next bug, need the replay compared with what the program itself would have computed, on
 * its real data. In verify mode each graph segment of a replay runs twice:
 *  1. At the segment's first op, the memory the segment's ops name (every allocation a kernel
 *     parameter word, a copy or memset operand or a library call's pointer falls in: device,
 *     pinned or managed, whole allocations as the driver gives their ranges, so PyTorch's
 *     caching allocator segments and its expandable segments (cuMemCreate/cuMemMap) are taken as
 *     they are mapped, with the mappings that follow without a gap) is copied aside: S0.
 *  2. Every call of the segment runs as the program made it, for real, while replay absorbs it
 *     as usual (guards, patches, the pool): a driver call before it is absorbed (step.c's
 *     cgj_step_verify_first), a library call absorbed whole right after (CGJ_RUN_ABSORBED).
 *     This is eager execution: E.
 *  3. Where replay launches the graph, E is copied aside, S0 is put back, the graph runs, and
 *     its result G is compared with E byte for byte. The first difference is reported on stderr
 *     (anchor, run, segment, allocation, offset, the values, how many words differ, the worst
 *     difference read as float32, and the last op of the segment that names that allocation,
 *     with the library call it belongs to), and E is put back: the program goes on with what
 *     eager execution computed, and prints what it prints without cgjit.
 * A side exit in a checked segment re-issues nothing: its calls ran already (exits.c asks
 * cgj_verify_flush); for the same reason a run in a checked segment does not switch to a variant
 * whose segment there is too short for a graph (replay.c), which would issue them again.
 * Segments issued eagerly have no graph to check; a segment holding a host
 * function is not checked (it would run twice); one whose ops name at launch an allocation not
 * known at its start cannot be compared and keeps E. Those count as unchecked, with a reason.
 *
 * Threads: while one thread copies its memory aside, puts S0 back and runs its graph (the
 * windows), no other thread's work runs: every call that touches memory and runs for real on
 * any thread (eager, recording, passing through, outside any step, or run by a checked segment),
 * every library call replay absorbed and runs too, every graph of an unchecked segment, and the
 * held work a thread's call issues for another thread it observes (exits.c) pass
 * a process-wide gate, held shared by the work and alone by a window (under CGJIT_VERIFY every
 * call of every thread is looked at, step.c). Work passes the gate only around the real call:
 * a thread waiting for it holds nothing a window waits for, so a window never waits for a
 * thread that waits for it. Between the windows of one check, other threads' work goes on: work
 * that writes memory of an open check (a kernel parameter word, a copy's or memset's
 * destination, a free falling in one of its allocations; a graph, a library call or a host
 * function: anywhere) marks it there, and at the second window an allocation that another
 * thread wrote meanwhile and that the segment's ops name leaves the segment unchecked
 * (CGJ_REASON_VERIFY_SHARED, eager results kept): put back as it was at the start, it would undo
 * that thread's work and make a difference of verify's own. Allocations in S0 that the ops no
 * longer name (values an earlier run of the trace had, on another thread perhaps) are left out
 * of the second window: the graph does not touch them, and their bytes are another's.
 * Limits: memory a kernel reaches only through pointers stored in device memory (pointer
 * arrays), or past the allocation its parameter names, is not in the set: a difference there
 * shows only where it flows into memory that is, and the graph's writes there are not undone.
 * CGJIT_VERIFY_ALL adds every allocation the program holds (allocator/live.h) to every set, so
 * such writes are compared and undone too, at the cost of copying all of it per graph (one that
 * another thread wrote meanwhile is left out of the second window). A
 * nondeterministic kernel (atomic float accumulation) differs from itself and is reported as it
 * would be between two eager runs.
 * Cost: four context synchronizations and three copies of the segment's memory per graph, plus a
 * read-back of E and G to compare them: a debugging mode, not a way to run.
 */
#define _GNU_SOURCE /* a writer-first read-write lock, where glibc has one */
#include "tracer/tracer.h"
#include "allocator/hostmem.h"
#include "allocator/live.h"
#include "allocator/pointers.h"
#include "graphs/graph.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/spin.h"
#include "ir/layout.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct vrange {
    CUdeviceptr base;
    size_t size;
    size_t at; /* offset of its copy in the shadows */
    bool met;  /* another thread's work wrote it since S0 (under checks_lock) */
} vrange_t;

typedef struct vset {
    vrange_t *r;
    uint32_t n, cap;
    size_t total;
} vset_t;

/* A thread's check. Its thread writes `active` and the set's ranges under checks_lock (or while
 * not active, when no other thread reads them); other threads read them under checks_lock, and
 * mark `met` there. */
struct cgj_verify {
    bool active;       /* the current segment's calls run for real: S0 holds its memory */
    bool met_all;      /* another thread's work on memory not told ran since S0 */
    uint32_t seg;      /* the segment checked */
    vset_t set;        /* S0's ranges */
    CUdeviceptr s0, e; /* shadows: memory at the segment's start, and eager results */
    size_t shadow_cap;
    uint8_t *hg, *he;        /* host buffers the comparison reads through */
    struct cgj_verify *next; /* every thread's check (checks) */
};

enum { HOST_CHUNK = 8 << 20, MAX_REPORTS = 20, MAX_CHUNKS = 4096 };
static unsigned reports, unchecked_told;

bool cgj_verify_on(void)
{
    return cgj_cfg.VERIFY != 0;
}

/* ---- the gate between windows and other threads' work (see the essay) ----
 * Writers first: a window must not wait behind a stream of calls. */
#ifdef PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
#define GATE_INIT PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
#else
#define GATE_INIT PTHREAD_RWLOCK_INITIALIZER
#endif
static pthread_rwlock_t gate = GATE_INIT;
static __thread unsigned shared; /* this thread's holds of the gate, shared (taken once) */
static __thread bool call_holds; /* cgj_verify_call_begin took one, for cgj_verify_call_end */

static struct cgj_verify *checks; /* every thread's check */
static int checks_lock;

static void shared_enter(void)
{
    if (!shared++) pthread_rwlock_rdlock(&gate);
}

static void shared_leave(void)
{
    if (!--shared) pthread_rwlock_unlock(&gate);
}

static void window_enter(void)
{
    /* A thread that held the gate shared would wait for itself. */
    CGJ_ASSERT(!shared, "a verify window opened by a thread whose work holds the gate");
    pthread_rwlock_wrlock(&gate);
}

static void window_leave(void)
{
    pthread_rwlock_unlock(&gate);
}

void cgj_verify_forked(void)
{
    gate = (pthread_rwlock_t)GATE_INIT;
    shared = 0, call_holds = false;
    checks = NULL, checks_lock = 0; /* the parent's threads are not in the child */
}

enum { MAX_VALUES = 256 }; /* words of one call that may name memory, beyond which: anywhere */

/* The values call c may write memory at, into v (n of them); false: anywhere, or not told. */
static bool call_writes(const cgj_call_t *c, CUdeviceptr *v, unsigned *n)
{
    *n = 0;
    cgj_layout_t lay;
    switch (c->kind) {
    case CGJ_OP_KERNEL:
        if (!cgj_layout_get(c, &lay) || (!lay.extra_form && !c->u.k.params)) return false;
        for (uint32_t i = 0; i < lay.n; i++) {
            const uint8_t *p = lay.extra_form ? c->u.k.blob : c->u.k.params[i];
            /* the 8-byte words of the blob, as add_op reads them */
            for (uint32_t b = (8 - lay.off[i] % 8) % 8; p && b + 8 <= lay.sz[i]; b += 8) {
                if (*n == MAX_VALUES) return false;
                memcpy(&v[(*n)++], p + b, sizeof *v);
            }
        }
        return true;
    case CGJ_OP_MEMCPY:
        v[(*n)++] = c->u.m.dir == CGJ_DIR_D2H ? (CUdeviceptr)(uintptr_t)c->u.m.hdst : c->u.m.dst;
        return true;
    case CGJ_OP_MEMSET: v[(*n)++] = c->u.s.dst; return true;
    case CGJ_OP_FREE:
    case CGJ_OP_POOL_FREE: v[(*n)++] = c->u.a.addr; return true;
    case CGJ_OP_READBACK: /* to pageable memory, which no check holds */ return true;
    default: /* a host function, a graph of the program's own, work run as made */ return false;
    }
}

/* Work of this thread's (on values v[0..n), or anywhere) runs now, the gate held: every other
 * open check whose memory it may write notes it. */
static void mark(const CUdeviceptr *v, unsigned n, bool anywhere)
{
    const struct cgj_verify *self = cgj_tls.verify;
    cgj_spin_lock(&checks_lock);
    for (struct cgj_verify *c = checks; c; c = c->next) {
        if (c == self || !c->active) continue;
        if (anywhere) c->met_all = true;
        for (uint32_t i = 0; i < c->set.n && !anywhere; i++)
            for (unsigned k = 0; k < n && !c->set.r[i].met; k++)
                c->set.r[i].met = c->set.r[i].base && v[k] - c->set.r[i].base < c->set.r[i].size;
    }
    cgj_spin_unlock(&checks_lock);
}

/* Does kind k's work touch memory (a window must not meet it)? Synchronizations, queries, events
 * and allocations do not; a library call's driver calls pass one by one. */
static bool touches_memory(cgj_op_kind_t k)
{
    return k == CGJ_OP_KERNEL || k == CGJ_OP_MEMCPY || k == CGJ_OP_MEMSET || k == CGJ_OP_HOST_FUNC ||
           k == CGJ_OP_READBACK || k == CGJ_OP_FREE || k == CGJ_OP_GRAPH_LAUNCH || k == CGJ_OP_AS_MADE ||
           k == CGJ_OP_POOL_FREE;
}

void cgj_verify_call_begin(const cgj_call_t *c)
{
    if (call_holds || (c && !touches_memory(c->kind))) return;
    CUdeviceptr v[MAX_VALUES];
    unsigned n = 0;
    bool told = c && call_writes(c, v, &n);
    shared_enter();
    call_holds = true;
    if (!told || n) mark(v, n, !told);
}

void cgj_verify_call_end(void)
{
    if (!call_holds) return;
    call_holds = false;
    shared_leave();
}

void cgj_verify_calls_enter(void)
{
    shared_enter();
    mark(NULL, 0, true);
}

void cgj_verify_calls_leave(void)
{
    shared_leave();
}

static void set_add(vset_t *s, CUdeviceptr base, size_t size)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->r[i].base == base) return;
    if (s->n == s->cap) s->r = cgj_xrealloc(s->r, (s->cap = s->cap ? 2 * s->cap : 32) * sizeof *s->r);
    s->r[s->n++] = (vrange_t){base, size, s->total, false};
    s->total += (size + 255) & ~(size_t)255;
}

/* Add the allocation value v falls in, if it is GPU-visible memory the driver knows, and the
 * mappings that follow it without a gap: a buffer of PyTorch's expandable segments
 * (cuMemCreate + cuMemMap, chunk after chunk in one reservation) may run on past the chunk its
 * address falls in, and its length is nowhere to be read. */
static void add_value(vset_t *s, CUdeviceptr v)
{
    if (v < 65536) return;
    CUdeviceptr start = 0;
    size_t size = 0;
    cgj_mem_kind_t k = cgj_pointer_range(v, &start, &size);
    for (unsigned chunks = 0; k != CGJ_MEM_PAGEABLE && size && chunks < MAX_CHUNKS; chunks++) {
        uint32_t had = s->n;
        set_add(s, start, size);
        if (s->n == had) return; /* known already, and so are the chunks after it */
        CUdeviceptr next = start + size;
        k = cgj_pointer_range(next, &start, &size);
        if (start != next) return;
    }
}

/* Values of op o that may name memory: parameter words, copy and memset operands, a library
 * call's pointers. */
static void add_op(vset_t *s, const cgj_op_t *o)
{
    if (o->kp)
        for (uint32_t b = 0; b + 8 <= o->kp->size; b += 8) {
            CUdeviceptr w;
            memcpy(&w, o->kp->live + b, sizeof w);
            add_value(s, w);
        }
    if (o->lib) {
        for (uint32_t k = 0; k < o->lib->nargs; k++) add_value(s, o->lib->args[k]);
        for (uint32_t k = 0; k < o->lib->live_nargs; k++) add_value(s, o->lib->live_args[k]);
    }
    if (o->call.kind == CGJ_OP_MEMCPY || o->call.kind == CGJ_OP_MEMSET) {
        cgj_opvals_t v;
        cgj_opvals_of(&o->call, &v);
        add_value(s, v.dst);
        add_value(s, v.src);
    }
}

/* CGJIT_VERIFY_ALL: every allocation the program holds (allocator/live.h). */
static void add_live(void *ctx, CUdeviceptr base, size_t size)
{
    set_add(ctx, base, size);
}

static bool op_names(const cgj_op_t *o, CUdeviceptr base, size_t size)
{
    vset_t one = {0};
    add_op(&one, o);
    bool hit = false;
    for (uint32_t i = 0; i < one.n && !hit; i++) hit = one.r[i].base == base && one.r[i].size == size;
    cgj_free(one.r);
    return hit;
}

/* A segment not checked: counted always, told once per anchor and reason (and at most
 * MAX_REPORTS times in all), so that a program whose pointers move every step is not drowned. */
static void unchecked(cgj_thread_t *t, const char *why)
{
    static struct {
        const void *anchor;
        uint64_t why;
    } told[MAX_REPORTS];
    static int lock;
    CGJ_STAT_ADD(verify_unchecked, 1);
    uint64_t h = cgj_hash_bytes(why, strcspn(why, "0123456789"), 0x7e51f7);
    cgj_spin_lock(&lock);
    bool tell = unchecked_told < MAX_REPORTS;
    for (unsigned i = 0; i < unchecked_told && tell; i++) tell = !(told[i].anchor == t->anchor && told[i].why == h);
    if (tell) told[unchecked_told].anchor = t->anchor, told[unchecked_told].why = h, unchecked_told++;
    cgj_spin_unlock(&lock);
    if (tell)
        cgj_log_message("verify: anchor '%s', run %llu, segment %u: not checked: %s (told once per anchor)",
                        t->anchor->name, (unsigned long long)__atomic_load_n(&t->anchor->runs, __ATOMIC_RELAXED),
                        t->cur.seg, why);
}

/* Every thread's shadows, so that no range of a set is one of them: an op's value from an
 * earlier run may point where the program freed memory that a shadow took since. */
enum { MAX_SHADOWS = 256 };
static struct {
    CUdeviceptr base;
    size_t size;
} own[MAX_SHADOWS];
static int own_lock;

static void own_note(CUdeviceptr base, size_t size, bool add)
{
    cgj_spin_lock(&own_lock);
    for (unsigned i = 0; i < MAX_SHADOWS; i++)
        if (add ? !own[i].base : own[i].base == base) {
            own[i].base = add ? base : 0, own[i].size = size;
            break;
        }
    cgj_spin_unlock(&own_lock);
}

/* Leave out of s the ranges that overlap a shadow, or cgjit's pinned staging (and give their
 * copies no bytes). Staging is the graph's input, written when replay absorbed the copies that
 * the segment's calls made for real: put back as it was at the segment's start, it would feed
 * the graph the last step's bytes (a divergence of verify's own making). */
static void drop_own(vset_t *s)
{
    cgj_spin_lock(&own_lock);
    for (uint32_t i = 0; i < s->n; i++)
        for (unsigned k = 0; k < MAX_SHADOWS && s->r[i].base; k++)
            if (own[k].base && s->r[i].base < own[k].base + own[k].size && own[k].base < s->r[i].base + s->r[i].size)
                s->r[i].base = 0;
    cgj_spin_unlock(&own_lock);
    for (uint32_t i = 0; i < s->n; i++)
        if (s->r[i].base && cgj_hostmem_owns((uintptr_t)s->r[i].base, s->r[i].size)) s->r[i].base = 0;
}

static void shadows_free(struct cgj_verify *v)
{
    if (!v->s0) return;
    /* Freed past the wrappers: the pointer cache must not answer for them either. */
    cgj_drv.r_cuMemFree_v2(v->s0), cgj_drv.r_cuMemFree_v2(v->e);
    cgj_pointer_forget(v->s0), cgj_pointer_forget(v->e);
    own_note(v->s0, 0, false), own_note(v->e, 0, false);
    v->s0 = v->e = 0, v->shadow_cap = 0;
}

static CUresult shadows(struct cgj_verify *v, size_t bytes)
{
    if (bytes <= v->shadow_cap) return CUDA_SUCCESS;
    shadows_free(v);
    CUresult r = cgj_drv.r_cuMemAlloc_v2(&v->s0, bytes);
    if (r != CUDA_SUCCESS) return r;
    if ((r = cgj_drv.r_cuMemAlloc_v2(&v->e, bytes)) != CUDA_SUCCESS) {
        cgj_drv.r_cuMemFree_v2(v->s0);
        v->s0 = 0;
        return r;
    }
    own_note(v->s0, bytes, true), own_note(v->e, bytes, true);
    v->shadow_cap = bytes;
    return CUDA_SUCCESS;
}

/* Copy every range of s to the shadow at `shadow` (out) or back from it; *bad: the range that
 * failed. */
static CUresult copy_set(const vset_t *s, CUdeviceptr shadow, bool out, uint32_t *bad)
{
    CUresult r = CUDA_SUCCESS;
    for (uint32_t i = 0; i < s->n && r == CUDA_SUCCESS; i++) {
        if (!s->r[i].base) continue; /* left out (cgj_verify_enter) */
        r = out ? cgj_drv.r_cuMemcpy(shadow + s->r[i].at, s->r[i].base, s->r[i].size)
                : cgj_drv.r_cuMemcpy(s->r[i].base, shadow + s->r[i].at, s->r[i].size);
        *bad = i;
    }
    return r;
}

/* The eager results back in the program's memory (as far as E was taken), done before the
 * program's next call: cuMemcpy between device allocations returns before the GPU has done it. */
static void restore_eager(struct cgj_verify *v)
{
    uint32_t bad;
    copy_set(&v->set, v->e, false, &bad);
    cgj_graph_ctx_sync(NULL, false);
}

/* The copies failed on range `bad` with r: not checked, with what failed. */
static void copy_failed(cgj_thread_t *t, const vset_t *s, uint32_t bad, CUresult r)
{
    char why[200];
    if (r == CUDA_SUCCESS || bad >= s->n)
        snprintf(why, sizeof why, "its memory could not be copied (%s)", cgj_driver_errstr(r));
    else
        snprintf(why, sizeof why, "the allocation at %#llx (%zu bytes) could not be copied: %s",
                 (unsigned long long)s->r[bad].base, s->r[bad].size, cgj_driver_errstr(r));
    unchecked(t, why);
}

/* The check begins (in its first window) or ends: other threads' work marks it while it runs. */
static void set_active(struct cgj_verify *v, bool on)
{
    cgj_spin_lock(&checks_lock);
    v->active = on;
    v->met_all = false;
    cgj_spin_unlock(&checks_lock);
}

static struct cgj_verify *check_of(cgj_thread_t *t)
{
    if (t->verify) return t->verify;
    t->verify = cgj_xcalloc(1, sizeof *t->verify);
    cgj_spin_lock(&checks_lock);
    t->verify->next = checks;
    checks = t->verify;
    cgj_spin_unlock(&checks_lock);
    return t->verify;
}

void cgj_verify_enter(cgj_thread_t *t)
{
    cgj_trace_t *tr = t->cur.trace;
    struct cgj_verify *v = check_of(t);
    if (v->active || t->cur.seg >= tr->nsegs) return;
    const cgj_segment_t *seg = &tr->segs[t->cur.seg];
    if (t->cur.pos != seg->first || seg->eager || !seg->ncapture) return;
    for (uint32_t i = seg->first; i < seg->end; i++)
        if (tr->list.ops[i].call.kind == CGJ_OP_HOST_FUNC) return unchecked(t, "it holds a host function");
    v->set.n = 0, v->set.total = 0;
    for (uint32_t i = seg->first; i < seg->end; i++) add_op(&v->set, &tr->list.ops[i]);
    if (cgj_cfg.VERIFY_ALL) cgj_live_each(add_live, &v->set);
    drop_own(&v->set); /* the shadows as they are, and as they may be made anew */
    CUresult sr = shadows(v, v->set.total ? v->set.total : 256);
    if (sr != CUDA_SUCCESS) {
        char why[200];
        snprintf(why, sizeof why, "no device memory for its copies (twice %zu bytes, %u allocations: %s)", v->set.total,
                 v->set.n, cgj_driver_errstr(sr));
        return unchecked(t, why);
    }
    drop_own(&v->set);
    uint32_t bad = UINT32_MAX;
    window_enter();
    CUresult r = cgj_graph_ctx_sync(NULL, false);
    /* A range the driver will not copy (a value that looked like a pointer into memory freed
     * since) is left out: should an op name it at launch, the segment is not compared. */
    while (r == CUDA_SUCCESS && (r = copy_set(&v->set, v->s0, true, &bad)) != CUDA_SUCCESS && bad < v->set.n &&
           cgj_graph_ctx_sync(NULL, false) == CUDA_SUCCESS) {
        CGJ_LOG(trace, "verify: the allocation at %#llx (%zu bytes) is left out: %s",
                (unsigned long long)v->set.r[bad].base, v->set.r[bad].size, cgj_driver_errstr(r));
        v->set.r[bad].base = 0;
        r = CUDA_SUCCESS;
    }
    /* S0 is whole before the program's calls, on their own streams, change what it copies. */
    if (r == CUDA_SUCCESS) r = cgj_graph_ctx_sync(NULL, false);
    v->seg = t->cur.seg;
    if (r == CUDA_SUCCESS) set_active(v, true); /* before any other thread's work may write it */
    window_leave();
    if (r != CUDA_SUCCESS) return copy_failed(t, &v->set, bad, r);
}

bool cgj_verify_running(const cgj_thread_t *t)
{
    return t->verify && t->verify->active;
}

bool cgj_verify_flush(cgj_thread_t *t)
{
    if (!cgj_verify_running(t)) return false;
    set_active(t->verify, false);
    return true;
}

/* In the second window: the ranges the segment's ops no longer name (now) are left out, and so,
 * under CGJIT_VERIFY_ALL, is one no op names that another thread wrote. The first range the ops
 * name that another thread wrote since S0, or UINT32_MAX. */
static uint32_t keep_named(struct cgj_verify *v, const vset_t *now)
{
    uint32_t hit = UINT32_MAX;
    cgj_spin_lock(&checks_lock);
    for (uint32_t i = 0; i < v->set.n; i++) {
        vrange_t *r = &v->set.r[i];
        bool named = false, met = r->met || v->met_all;
        for (uint32_t j = 0; j < now->n && !named && r->base; j++) named = now->r[j].base == r->base;
        if (named && met && hit == UINT32_MAX) hit = i;
        else if (!named && (met || !cgj_cfg.VERIFY_ALL)) r->base = 0;
    }
    cgj_spin_unlock(&checks_lock);
    return hit;
}

/* Not checked: another thread's work wrote range `at` (or, met_all, memory not told) meanwhile. */
static void shared_met(cgj_thread_t *t, const struct cgj_verify *v, uint32_t at)
{
    cgj_reason_t r;
    char why[320];
    if (v->met_all)
        cgj_reason_set(&r, CGJ_REASON_VERIFY_SHARED, CGJ_REASON_NO_OP,
                       "a graph, a library call or a host function of another thread ran meanwhile");
    else
        cgj_reason_set(&r, CGJ_REASON_VERIFY_SHARED, CGJ_REASON_NO_OP, "the allocation at %#llx (%zu bytes)",
                       (unsigned long long)v->set.r[at].base, v->set.r[at].size);
    cgj_anchor_note(t->anchor, &r);
    unchecked(t, cgj_reason_format(&r, why, sizeof why));
}

bool cgj_verify_before(cgj_thread_t *t)
{
    struct cgj_verify *v = t->verify;
    if (!v || !v->active) return false;
    if (v->seg != t->cur.seg) {
        set_active(v, false);
        unchecked(t, "replay continued in another segment");
        return false;
    }
    /* Every allocation the ops name now must be one S0 holds. */
    const cgj_segment_t *seg = &t->cur.trace->segs[t->cur.seg];
    vset_t now = {0};
    for (uint32_t i = seg->first; i < seg->end; i++) add_op(&now, &t->cur.trace->list.ops[i]);
    drop_own(&now);
    bool known = true;
    for (uint32_t i = 0; i < now.n && known; i++) {
        if (!now.r[i].base) continue;
        known = false;
        for (uint32_t j = 0; j < v->set.n && !known; j++) known = v->set.r[j].base == now.r[i].base;
    }
    if (!known) {
        cgj_free(now.r);
        set_active(v, false);
        unchecked(t, "its ops name an allocation not known at its start (eager results kept)");
        return false;
    }
    uint32_t bad = UINT32_MAX;
    window_enter(); /* left in cgj_verify_after */
    uint32_t met = keep_named(v, &now);
    cgj_free(now.r);
    if (met != UINT32_MAX) { /* eager results kept */
        shared_met(t, v, met);
        set_active(v, false);
        window_leave();
        return false;
    }
    CUresult r = cgj_graph_ctx_sync(NULL, false);
    if (r == CUDA_SUCCESS) r = copy_set(&v->set, v->e, true, &bad);
    if (r == CUDA_SUCCESS) r = copy_set(&v->set, v->s0, false, &bad);
    /* The copies run on the legacy stream, and a device-to-device cuMemcpy returns before it is
     * done: a graph on a non-blocking stream would start on memory still being put back. */
    if (r == CUDA_SUCCESS) r = cgj_graph_ctx_sync(NULL, false);
    if (r != CUDA_SUCCESS) {
        set_active(v, false);
        restore_eager(v); /* eager results kept */
        window_leave();
        copy_failed(t, &v->set, bad, r);
        return false;
    }
    return true;
}

/* The last op of the segment that names range r, described (with its library call). */
static void blame(const cgj_thread_t *t, const vrange_t *r, char *buf, size_t len)
{
    const cgj_trace_t *tr = t->cur.trace;
    const cgj_segment_t *seg = &tr->segs[t->cur.seg];
    snprintf(buf, len,
             "none of its ops names it (reached through a pointer held in memory, or past an allocation an "
             "op names)");
    for (uint32_t i = seg->end; i-- > seg->first;) {
        if (!op_names(&tr->list.ops[i], r->base, r->size)) continue;
        char d[160];
        int n = snprintf(buf, len, "op %u (%s)", i, cgj_op_describe(&tr->list.ops[i], d, sizeof d));
        for (uint32_t j = i + 1; j-- > 0 && n > 0 && (size_t)n < len;)
            if (tr->list.ops[j].lib && j + tr->list.ops[j].lib->nops >= i && j != i) {
                snprintf(buf + n, len - (size_t)n, ", in library call op %u (%s)", j, tr->list.ops[j].call.api);
                break;
            }
        return;
    }
}

typedef struct diff {
    size_t first, words, differing;
    uint32_t ev, gv;
    double worst;
} diff_t;

static void diff_chunk(const uint8_t *e, const uint8_t *g, size_t n, size_t base, diff_t *d)
{
    for (size_t k = 0; k + 4 <= n; k += 4) {
        d->words++;
        if (!memcmp(e + k, g + k, 4)) continue;
        float fe, fg;
        memcpy(&fe, e + k, 4), memcpy(&fg, g + k, 4);
        if (!d->differing++) d->first = base + k, memcpy(&d->ev, e + k, 4), memcpy(&d->gv, g + k, 4);
        double x = fabs((double)fe - (double)fg);
        if (isfinite(x) && x > d->worst) d->worst = x;
    }
    if (n % 4 && memcmp(e + n - n % 4, g + n - n % 4, n % 4) && !d->differing++) d->first = base + n - n % 4;
}

/* Compare range r of memory (G) with its copy in e (E). */
static bool compare(struct cgj_verify *v, const vrange_t *r, diff_t *d)
{
    memset(d, 0, sizeof *d);
    if (!v->hg) v->hg = cgj_xmalloc(HOST_CHUNK), v->he = cgj_xmalloc(HOST_CHUNK);
    for (size_t off = 0; off < r->size; off += HOST_CHUNK) {
        size_t n = r->size - off < HOST_CHUNK ? r->size - off : HOST_CHUNK;
        if (cgj_drv.r_cuMemcpy((CUdeviceptr)(uintptr_t)v->hg, r->base + off, n) != CUDA_SUCCESS ||
            cgj_drv.r_cuMemcpy((CUdeviceptr)(uintptr_t)v->he, v->e + r->at + off, n) != CUDA_SUCCESS)
            return false;
        diff_chunk(v->he, v->hg, n, off, d);
    }
    return true;
}

static void report(cgj_thread_t *t, const vrange_t *r, const diff_t *d)
{
    CGJ_STAT_ADD(verify_divergences, 1);
    if (__atomic_fetch_add(&reports, 1, __ATOMIC_RELAXED) >= MAX_REPORTS) return;
    char who[320];
    blame(t, r, who, sizeof who);
    float fe, fg;
    memcpy(&fe, &d->ev, 4), memcpy(&fg, &d->gv, 4);
    cgj_log_message(
        "verify: anchor '%s', run %llu, segment %u (ops %u-%u): the graph diverges from eager execution "
        "in the allocation at %#llx (%zu bytes), first at byte %zu: eager %08x (%g), graph %08x (%g); %zu of "
        "%zu words differ, worst difference %g (as float32); last op naming it: %s",
        t->anchor->name, (unsigned long long)__atomic_load_n(&t->anchor->runs, __ATOMIC_RELAXED), t->cur.seg,
        t->cur.trace->segs[t->cur.seg].first, t->cur.trace->segs[t->cur.seg].end - 1, (unsigned long long)r->base,
        r->size, d->first, d->ev, (double)fe, d->gv, (double)fg, d->differing, d->words, d->worst, who);
}

void cgj_verify_after(cgj_thread_t *t, CUresult launched)
{
    struct cgj_verify *v = t->verify;
    if (launched != CUDA_SUCCESS) { /* exits.c re-issues nothing: the calls ran already */
        restore_eager(v);
        window_leave();
        return;
    }
    set_active(v, false);
    CGJ_STAT_ADD(verify_segments, 1);
    bool differs = false;
    if (cgj_graph_ctx_sync(NULL, false) != CUDA_SUCCESS) {
        unchecked(t, "the graph failed to run");
        differs = true;
    }
    for (uint32_t i = 0; i < v->set.n && !differs; i++) {
        diff_t d;
        if (!v->set.r[i].base) continue;
        if (!compare(v, &v->set.r[i], &d)) {
            unchecked(t, "its memory could not be read back");
            differs = true;
        } else if (d.differing) {
            report(t, &v->set.r[i], &d);
            differs = true;
        }
    }
    if (differs) restore_eager(v); /* the program goes on with eager results */
    window_leave();
}

void cgj_verify_free(cgj_thread_t *t)
{
    struct cgj_verify *v = t->verify;
    if (!v) return;
    cgj_spin_lock(&checks_lock);
    for (struct cgj_verify **p = &checks; *p; p = &(*p)->next)
        if (*p == v) {
            *p = v->next;
            break;
        }
    cgj_spin_unlock(&checks_lock);
    shadows_free(v);
    cgj_free(v->set.r), cgj_free(v->hg), cgj_free(v->he), cgj_free(v);
    t->verify = NULL;
}
