/*
 * implicit.c — finding the step of a program that has no markers (CGJIT_STEP).
 *
 *  - sync: a step is the work between two host synchronizations (stream, context or event
 *    synchronization, a device-to-host copy the host reads at once, or a stream or event query:
 *    a host that polls has synchronized when the answer is yes). The step ends just
 *    before the synchronization, which then runs outside any step: the host only ever waits on
 *    work that has been launched. Each step is anchored at its first call, so the segments of
 *    one loop iteration that are separated by synchronizations become traces of their own.
 *  - auto: a per-thread detector (cycle.h) finds the repeating cycle in the stream of call
 *    signatures; steps begin at the cycle's head, so a loop with no synchronization at all is
 *    found too. When the cycle breaks, the current step ends at once and calls run eagerly
 *    until the loop is found again.
 *    A thread that makes CGJ_SYNC_LONG calls without synchronizing (a loop that never waits,
 *    or a worker thread whose work another thread waits for, such as PyTorch's autograd
 *    engine) would otherwise stay in one step that never ends: its step ends there, and from
 *    then on that thread finds its steps as auto does. So sync is "sync, else auto", per thread.
 *    A thread other than the process's first does so after CGJ_SYNC_LONG_WORKER calls: worker
 *    threads that never synchronize are the rule (PyTorch's backward pass makes a few dozen
 *    calls per step), a main thread's long unsynchronized start-up is not a loop.
 *  - off: nothing is recorded.
 *
 * The default is sync when libcgjit is preloaded (an unmodified program, which can only be
 * stepped implicitly) and off when it is linked (the program marks its steps). sync is the
 * default rather than auto because every program that reads its results synchronizes, steps
 * found that way can never hold work across the point where the host looks, and they need no
 * warm-up to be found. Markers take precedence: the first cgj_trace_begin ends implicit
 * stepping for the whole process.
 *
 * Anchor names say what a step's first call is and carry a hash of it (sync) or of the cycle
 * (auto), made from names and stream ordinals only: the same program names the same anchors in
 * every run, whatever addresses its handles get.
 *
 * This file decides; step.c acts: cgj_implicit_decide says where a call belongs (the step in
 * progress, outside any step, or a new step of a given name) and never begins or ends a step.
 */
#include "tracer/tracer.h"
#include "tracer/cycle.h"
#include "ir/layout.h"
#include "allocator/plan.h"
#include "base/log.h"
#include "base/map.h"

#include <pthread.h>
#include <string.h>

int cgj_implicit_policy;

/* Implicit stepping holds one count of cgj_tracing_threads while its policy is on and the
 * governor has it awake (govern.c holds it while dormant): every call is looked at then. The
 * policy and the hold change under one lock, so that the count is taken and given back once. */
static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static bool held;

static void share(int was_policy, bool was_held, int policy, bool hold)
{
    bool had = was_policy != CGJ_STEP_OFF && !was_held, has = policy != CGJ_STEP_OFF && !hold;
    if (has && !had) __atomic_fetch_add(&cgj_tracing_threads, 1, __ATOMIC_RELAXED);
    if (had && !has) __atomic_fetch_sub(&cgj_tracing_threads, 1, __ATOMIC_RELAXED);
}

static void ready_one(void);

void cgj_implicit_enable(cgj_step_policy_t policy)
{
    if (policy == CGJ_STEP_OFF) return;
    ready_one();
    pthread_mutex_lock(&share_lock);
    int was = __atomic_exchange_n(&cgj_implicit_policy, policy, __ATOMIC_RELAXED);
    share(was, held, policy, held); /* every call is looked at */
    pthread_mutex_unlock(&share_lock);
    CGJ_LOG(trace, "implicit steps: CGJIT_STEP=%s", cgj_step_policy_name(policy));
}

void cgj_implicit_hold(bool hold)
{
    pthread_mutex_lock(&share_lock);
    int policy = __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED);
    share(policy, held, policy, hold);
    held = hold;
    pthread_mutex_unlock(&share_lock);
}

void cgj_implicit_disable_silently(void)
{
    __atomic_store_n(&cgj_implicit_policy, CGJ_STEP_OFF, __ATOMIC_RELAXED);
}

void cgj_implicit_forked(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&share_lock, &fresh, sizeof share_lock);
    held = false;
}

bool cgj_implicit_disable(void)
{
    pthread_mutex_lock(&share_lock);
    int was = __atomic_exchange_n(&cgj_implicit_policy, CGJ_STEP_OFF, __ATOMIC_RELAXED);
    share(was, held, CGJ_STEP_OFF, held);
    pthread_mutex_unlock(&share_lock);
    if (was == CGJ_STEP_OFF) return false;
    CGJ_LOG(trace, "markers in use: implicit steps (CGJIT_STEP=%s) end", cgj_step_policy_name(was));
    return true;
}

/* ---- stable identities ----
 * Anchor names and the cycle detector's ids must name the same step in every run of a program,
 * so that two runs' reports, logs and dumps can be compared: they are made from what a call
 * does (its driver function's name, its kind, the kernel's name, size classes) and which of the
 * program's streams it uses by *ordinal* (the order in which the process first used them),
 * never from addresses, which change from run to run. Looking names up costs a lock; calls
 * under CGJIT_STEP=auto each need one, so each thread keeps small direct-mapped caches from
 * address to hash (an entry is only ever a hash of a name, so a stale one merely misnames). */

#define IDENT_CACHE 64 /* entries per cache, a power of two */

typedef struct ident_slot {
    const void *key;
    uint64_t val;
} ident_slot_t;

static __thread ident_slot_t api_cache[IDENT_CACHE], kernel_cache[IDENT_CACHE], stream_cache[IDENT_CACHE];

static pthread_mutex_t ordinal_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_map_t ordinals; /* stream handle -> its ordinal */
static uint64_t nstreams;

static ident_slot_t *ident_slot(ident_slot_t *cache, const void *key)
{
    return &cache[((uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull) >> (64 - 6)];
}
_Static_assert(IDENT_CACHE == 64, "ident_slot takes 6 bits");

/* The defaults are 0 (legacy) and 1 (per-thread); the program's streams 2, 3, ... in the order
 * the process first used them. Threads racing to a first use may number them differently. */
static uint64_t stream_ordinal(CUstream s)
{
    if (s == CU_STREAM_LEGACY || !s) return 0;
    if (s == CU_STREAM_PER_THREAD) return 1;
    ident_slot_t *e = ident_slot(stream_cache, s);
    if (e->key == s) return e->val;
    uint64_t v;
    pthread_mutex_lock(&ordinal_lock);
    if (!cgj_map_get(&ordinals, cgj_map_ptr_key(s), &v)) cgj_map_put(&ordinals, cgj_map_ptr_key(s), v = 2 + nstreams++);
    pthread_mutex_unlock(&ordinal_lock);
    *e = (ident_slot_t){s, v};
    return v;
}

static uint64_t api_hash(const char *api)
{
    ident_slot_t *e = ident_slot(api_cache, api);
    if (e->key != api) *e = (ident_slot_t){api, cgj_hash_bytes(api, strlen(api), 0)};
    return e->val;
}

/* A kernel the driver cannot name is known by its handle (stable within the run only). */
static uint64_t kernel_hash(CUfunction f)
{
    ident_slot_t *e = ident_slot(kernel_cache, f);
    if (e->key == f) return e->val;
    const char *name = cgj_layout_kernel_name(f);
    uint64_t h = name && strcmp(name, "?") ? cgj_hash_bytes(name, strlen(name), 1) : cgj_hash_bytes(&f, sizeof f, 2);
    *e = (ident_slot_t){f, h};
    return h;
}

/* A call's kind, driver function and stream (hashed into h by the caller, as it names them)
 * with what of its operation a replay cannot patch: its kernel (`kernel`, as the caller names
 * it), copy direction or allocation size class. */
static uint64_t call_hash(const cgj_call_t *c, uint64_t h, uint64_t kernel)
{
    switch (c->kind) {
    case CGJ_OP_KERNEL: return cgj_hash_word(kernel, h);
    case CGJ_OP_MEMCPY: return cgj_hash_word((uint64_t)(unsigned)c->u.m.dir << 1 | (c->u.m.direct ? 1 : 0), h);
    case CGJ_OP_ALLOC: return cgj_hash_word(cgj_plan_size_class(c->u.a.bytes), h);
    default: return h;
    }
}

/* Named by their handles, not as topology names them: a warm-up run asks the driver nothing. */
uint64_t cgj_implicit_shape(uint64_t shape, const cgj_call_t *c)
{
    uint64_t h = cgj_hash_word((uint64_t)c->kind, cgj_hash_word((uint64_t)(uintptr_t)c->api, shape));
    h = cgj_hash_word((uint64_t)(uintptr_t)c->stream, h);
    return call_hash(c, h, (uint64_t)(uintptr_t)(c->kind == CGJ_OP_KERNEL ? c->u.k.f : NULL));
}

/* The topology of a call (Guards v2), without the values a replay patches: grids, copy and
 * memset sizes and operands. A loop whose grid or copy sizes follow the data is one cycle. */
static uint64_t topology(const cgj_call_t *c)
{
    uint64_t h = cgj_hash_word((uint64_t)c->kind, api_hash(c->api));
    h = cgj_hash_word(stream_ordinal(c->stream), h);
    return call_hash(c, h, c->kind == CGJ_OP_KERNEL ? kernel_hash(c->u.k.f) : 0) | 1;
}

/* Does the call do GPU work a graph holds: a kernel, a copy or memset, a library call? (Not an
 * allocation, a free, an event or a synchronization.) */
static bool works(const cgj_call_t *c)
{
    return c->kind == CGJ_OP_KERNEL || c->kind == CGJ_OP_MEMCPY || c->kind == CGJ_OP_MEMSET || c->kind == CGJ_OP_LIB;
}

/* A call's signature for the cycle detector: its topology, marked CGJ_CYCLE_MARK where the call
 * synchronizes with the host, CGJ_CYCLE_MARK2 where it does GPU work a graph holds. */
static uint64_t signature(const cgj_call_t *c)
{
    uint64_t h = topology(c) & ~(CGJ_CYCLE_MARK | CGJ_CYCLE_MARK2);
    if (cgj_implicit_delimits(c)) h |= CGJ_CYCLE_MARK;
    return works(c) ? h | CGJ_CYCLE_MARK2 : h;
}

/* Appends at most max bytes of s to the name being made in [*p, end), always leaving room for
 * its terminating NUL. */
static void put(char **p, char *end, const char *s, size_t max)
{
    size_t n = strnlen(s, max), room = (size_t)(end - 1 - *p);
    n = n < room ? n : room;
    memcpy(*p, s, n);
    *p += n;
}

/* An anchor's name, "POLICY:WORDS:HASH": WORDS say what the call is, for a reader
 * ("cuLaunchKernel:KERNEL" or the driver function alone; a long kernel name is cut: the hash
 * keeps names apart), HASH is h in 16 hex digits. Made by hand: a step's begin makes one, and
 * the C library's formatting cost more than the rest of the begin. Cut at len - 1 bytes. */
static void anchor_name(char *name, size_t len, const char *policy, const cgj_call_t *c, uint64_t h)
{
    const char *kernel = c->kind == CGJ_OP_KERNEL ? cgj_layout_kernel_name(c->u.k.f) : NULL;
    char *p = name, *end = name + len;
    put(&p, end, policy, 64);
    put(&p, end, ":", 1);
    put(&p, end, c->api, 64);
    if (kernel) put(&p, end, ":", 1), put(&p, end, kernel, 80);
    put(&p, end, ":", 1);
    char hex[17];
    for (int i = 0; i < 16; i++) hex[i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 15];
    hex[16] = 0;
    put(&p, end, hex, 16);
    *p = 0;
}

/* A sync step is anchored at what its first call is (driver function, stream ordinal, kernel
 * name), not at its sizes: a step whose first copy's size follows the data is one anchor whose
 * runs disagree (and is given up after CGJIT_MAX_RECORDS), not a new anchor every step. The
 * name begins with `policy` (sync, or auto for the steps of a cycle split at its synchronizations). */
static void sync_step_name(const char *policy, const cgj_call_t *c, char *name, size_t len)
{
    uint64_t ord = stream_ordinal(c->stream);
    uint64_t h = cgj_hash_bytes(&ord, sizeof ord, api_hash(c->api));
    if (c->kind == CGJ_OP_KERNEL) {
        uint64_t k = kernel_hash(c->u.k.f);
        h = cgj_hash_bytes(&k, sizeof k, h);
    }
    anchor_name(name, len, policy, c, h);
}

/* Detectors are large (cycle.h, 160 KB): a thread gets one only once it has made
 * CGJ_AUTO_QUIET_CALLS calls (a short-lived thread that launches a few kernels and exits pays
 * nothing), and gives it back at its exit to a small pool the next thread takes it from. The
 * pool's detectors are ready: one is made as implicit stepping is enabled, and one given back is
 * cleared by the thread that exits, so that no thread allocates and clears 160 KB in a region
 * the program times. The one made as stepping is enabled goes to the first thread that calls,
 * at its first call: the program's main thread signs its calls (and has its kernels named) from
 * the start, during its set-up, not at its 64th call, which may fall in its first timed loop
 * (cuda-samples' MersenneTwister: 30 us there on an H200). */
#define CGJ_AUTO_QUIET_CALLS 64
#define CGJ_AUTO_MIN_STEP 32   /* calls a step of a short cycle holds at least */
#define CGJ_AUTO_SPLIT_SYNCS 4 /* synchronizations in a turn from which its steps are taken between them */
#define CGJ_AUTO_MIN_SPAN 32   /* calls a cycle repeats over before its first step begins */
#define CGJ_CYCLE_POOL 16

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int first_ready; /* the detector made ready as stepping was enabled is not taken yet */
static cgj_cycle_t *pool[CGJ_CYCLE_POOL];
static unsigned npool;

static cgj_cycle_t *new_detector(void)
{
    cgj_cycle_t *c = cgj_xmalloc(sizeof *c);
    cgj_cycle_init(c, 2);
    return c;
}

static cgj_cycle_t *take_detector(void)
{
    cgj_cycle_t *c = NULL;
    pthread_mutex_lock(&pool_lock);
    if (npool) c = pool[--npool];
    pthread_mutex_unlock(&pool_lock);
    if (c) return c;
    CGJ_LOG(trace, "cycle detector: none ready, one made on this thread");
    return new_detector();
}

/* Detector c, ready, into the pool; false where the pool is full. */
static bool pool_put(cgj_cycle_t *c)
{
    pthread_mutex_lock(&pool_lock);
    bool put = npool < CGJ_CYCLE_POOL;
    if (put) pool[npool++] = c;
    pthread_mutex_unlock(&pool_lock);
    return put;
}

static unsigned pooled(void)
{
    pthread_mutex_lock(&pool_lock);
    unsigned n = npool;
    pthread_mutex_unlock(&pool_lock);
    return n;
}

/* One detector made ready in the pool where it has none (as implicit stepping is enabled: the
 * program's first thread takes it). */
static void ready_one(void)
{
    if (pooled()) return;
    cgj_cycle_t *c = new_detector();
    if (!pool_put(c)) cgj_free(c);
    __atomic_store_n(&first_ready, 1, __ATOMIC_RELEASE);
    CGJ_LOG(trace, "cycle detector: one made ready for the program's first thread");
}

void cgj_implicit_thread_exit(cgj_thread_t *t)
{
    cgj_cycle_t *c = t->find.cycle;
    t->find.cycle = NULL;
    if (!c) return;
    cgj_cycle_init(c, 2); /* cleared here, not by the thread that takes it */
    if (!pool_put(c)) cgj_free(c);
}

/* What a turn of the locked cycle (id) holds, counted once per cycle: whether its steps are
 * taken between its synchronizations, and whether it does GPU work a graph holds. */
static void learn_cycle(cgj_thread_t *t, const cgj_cycle_t *cy, uint64_t id)
{
    t->find.cycle_id = id;
    uint32_t syncs = cgj_cycle_marked(cy, CGJ_CYCLE_MARK);
    t->find.split_at_syncs = syncs >= CGJ_AUTO_SPLIT_SYNCS;
    t->find.works = cgj_cycle_marked(cy, CGJ_CYCLE_MARK2) > 0;
    if (t->find.split_at_syncs)
        CGJ_LOG(trace,
                "a cycle of %u calls that synchronizes %u times a turn: its steps are taken between synchronizations",
                cgj_cycle_period(cy), syncs);
    if (!t->find.works)
        CGJ_LOG(trace, "a cycle of %u calls that does no GPU work a graph holds: no step begins in it",
                cgj_cycle_period(cy));
}

/* Is the locked cycle one whose steps are taken between synchronizations? Every auto call asks,
 * and so keeps what learn_cycle knows of the cycle current. */
static bool split_at_syncs(cgj_thread_t *t, const cgj_cycle_t *cy)
{
    uint64_t id = cgj_cycle_id(cy);
    if (!id) return false;
    if (id != t->find.cycle_id) learn_cycle(t, cy, id);
    return t->find.split_at_syncs;
}

/* May a step begin in the locked cycle (split_at_syncs asked about it at this call)? Not where a
 * turn of it does no GPU work a graph holds (allocations, frees, streams and events made in a
 * loop of a program's set-up: a step of them would be recorded and built to replay nothing), and
 * not before it has repeated over CGJ_AUTO_MIN_SPAN calls: three allocations in a row lock a
 * cycle of one call, and a step begun there would be warmed up, recorded and built for the one or
 * two calls left of the loop, as cuda-samples' batchCUBLAS makes each of its timed sections
 * once. A long loop has repeated over that many calls as it locks (two turns); a short one (a
 * kernel launched again and again) begins its first step a few turns later. */
static bool steps_begin(const cgj_thread_t *t, const cgj_cycle_t *cy)
{
    return t->find.works && cgj_cycle_span(cy) >= CGJ_AUTO_MIN_SPAN;
}

static void decide_auto(cgj_thread_t *t, const cgj_call_t *c, cgj_decision_t *d)
{
    if (!t->find.cycle) {
        bool first = __atomic_load_n(&first_ready, __ATOMIC_RELAXED) &&
                     __atomic_exchange_n(&first_ready, 0, __ATOMIC_ACQ_REL);
        if (!first && ++t->find.quiet_calls < CGJ_AUTO_QUIET_CALLS) {
            d->route = CGJ_ROUTE_OUTSIDE;
            return;
        }
        t->find.cycle = take_detector();
    }
    bool head = cgj_cycle_feed(t->find.cycle, signature(c));
    if (split_at_syncs(t, t->find.cycle)) {
        /* A turn that synchronizes again and again (a training loop's iterations, each read
         * back, and a sample every 50 of them: the loop is the 50 iterations and the sample) is
         * cut into segments at each synchronization anyway, and a step of the whole turn would
         * run once in 50 iterations, its warm-up never repaid: its steps are taken between the
         * synchronizations, as CGJIT_STEP=sync takes them, and the same iteration is one anchor. */
        t->find.heads = 0;
        if (cgj_implicit_delimits(c) || (t->mode == CGJ_MODE_OFF && !steps_begin(t, t->find.cycle))) {
            d->route = CGJ_ROUTE_OUTSIDE;
        } else if (t->mode == CGJ_MODE_OFF) {
            d->route = CGJ_ROUTE_BEGIN;
            sync_step_name("auto", c, d->name, sizeof d->name);
        } else {
            d->route = CGJ_ROUTE_STAY;
        }
        return;
    }
    if (head) {
        /* A short cycle (a kernel launched over and over): a step of one or two calls gains
         * nothing from a graph and pays a step's bookkeeping, so a step holds as many turns
         * of it as make CGJ_AUTO_MIN_STEP calls; unless a turn synchronizes, which ends the
         * graph's segment there anyway. */
        uint32_t p = cgj_cycle_period(t->find.cycle), turns = (CGJ_AUTO_MIN_STEP + p - 1) / p;
        bool synced = t->find.turn_synced; /* the turn that ends here */
        t->find.turn_synced = cgj_implicit_delimits(c);
        if (t->mode != CGJ_MODE_OFF && !synced && ++t->find.heads < turns) {
            d->route = CGJ_ROUTE_STAY;
            return;
        }
        t->find.heads = 0;
        if (t->mode == CGJ_MODE_OFF && !steps_begin(t, t->find.cycle)) {
            d->route = CGJ_ROUTE_OUTSIDE;
            return;
        }
        d->route = CGJ_ROUTE_BEGIN;
        anchor_name(d->name, sizeof d->name, "auto", c, cgj_cycle_id(t->find.cycle));
        return;
    }
    t->find.turn_synced |= cgj_implicit_delimits(c);
    if (t->mode != CGJ_MODE_OFF && cgj_cycle_period(t->find.cycle) == 0) {
        CGJ_LOG(breaks, "the loop broke at %s: the implicit step ends here", c->api);
        d->route = CGJ_ROUTE_OUTSIDE;
        return;
    }
    d->route = t->mode != CGJ_MODE_OFF ? CGJ_ROUTE_STAY : CGJ_ROUTE_OUTSIDE;
}

void cgj_implicit_decide(cgj_thread_t *t, const cgj_call_t *c, cgj_decision_t *d)
{
    int policy = __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED);
    d->route = CGJ_ROUTE_STAY;
    d->record = false;
    if (t->mode != CGJ_MODE_OFF && !t->implicit) return; /* a marked step */
    /* A warm-up run records nothing, and so cannot see a producer's handoffs (record.c): one that
     * goes CGJ_SYNC_FIRST_RECORD calls without a synchronization ends there, and a step begins
     * at this call, recorded as an anchor's first run is (a long step: see record.c). */
    if (policy == CGJ_STEP_SYNC && !t->find.finds_cycles && t->find.warming && t->mode != CGJ_MODE_OFF &&
        t->sync_calls >= CGJ_SYNC_FIRST_RECORD && t->sync_calls < t->find.sync_long) {
        d->record = true;
        CGJ_LOG(trace, "a warm-up run went %u calls without a synchronization: a step recorded from here",
                t->sync_calls);
        d->route = CGJ_ROUTE_BEGIN;
        sync_step_name("sync", c, d->name, sizeof d->name);
        return;
    }
    if (policy == CGJ_STEP_SYNC && !t->find.finds_cycles && t->mode != CGJ_MODE_OFF &&
        t->sync_calls >= t->find.sync_long) {
        t->find.finds_cycles = true;
        CGJ_LOG(trace, "%u calls without a synchronization: this thread's steps are found by their cycle from now on",
                t->sync_calls);
        d->route = CGJ_ROUTE_OUTSIDE;
        return;
    }
    if (policy == CGJ_STEP_AUTO || (policy == CGJ_STEP_SYNC && t->find.finds_cycles)) {
        decide_auto(t, c, d);
    } else if (policy == CGJ_STEP_OFF || cgj_implicit_delimits(c)) {
        d->route = CGJ_ROUTE_OUTSIDE;
    } else if (t->mode == CGJ_MODE_OFF) {
        d->route = CGJ_ROUTE_BEGIN;
        sync_step_name("sync", c, d->name, sizeof d->name);
    }
}
