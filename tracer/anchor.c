/*
 * anchor.c — the anchor table (name -> anchor), anchor states, and the two histories that can
 * turn an anchor off: eager runs that keep disagreeing before a trace exists, and replays that
 * keep leaving the trace after.
 */
#include "tracer/tracer.h"
#include "fusion/fusion.h"
#include "allocator/hostmem.h"
#include "allocator/pool.h"
#include "graphs/gpubusy.h"
#include "graphs/graph.h"
#include "base/log.h"
#include "base/map.h"
#include "base/timeline.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_anchor_t *anchors; /* every anchor, newest first (the report's order) */
static cgj_map_t by_name;     /* hash of the name -> anchor */

static bool name_is(const void *name, uint64_t v)
{
    return strcmp(((const cgj_anchor_t *)(uintptr_t)v)->name, name) == 0;
}

static uint64_t name_key(const char *name)
{
    return cgj_hash_bytes(name, strlen(name), 0);
}

/* The anchor `name` (whose name_key is `key`), or NULL. */
static cgj_anchor_t *find_locked(const char *name, uint64_t key)
{
    uint64_t v;
    return cgj_map_find(&by_name, key, name_is, name, &v) ? (cgj_anchor_t *)(uintptr_t)v : NULL;
}

/* Steps seen once (tracer.h, cgj_anchor_sight): open addressing on the name's hash (never 0),
 * under table_lock; an entry stays once its anchor is made (the anchor is found first). */
typedef struct {
    uint64_t key;
    uint64_t shape;
    uint32_t calls; /* its length, once ended (0: not ended) */
    bool long_steps;
} sighting_t;
static sighting_t sightings[CGJ_SIGHTINGS];
static uint32_t nsightings;

uint64_t cgj_anchor_sight_key(const char *name)
{
    return name_key(name) | 1;
}

/* The sighting of `key`, or the free slot it would take (key 0 there); NULL where the table is
 * full and `key` not in it. */
static sighting_t *sighting_locked(uint64_t key)
{
    for (uint32_t i = 0, at = (uint32_t)(key >> 20) % CGJ_SIGHTINGS; i < CGJ_SIGHTINGS;
         i++, at = (at + 1) % CGJ_SIGHTINGS)
        if (sightings[at].key == key || sightings[at].key == 0) return &sightings[at];
    return NULL;
}

uint64_t cgj_anchor_sight(const char *name)
{
    uint64_t nk = name_key(name), key = nk | 1, first = 0;
    pthread_mutex_lock(&table_lock);
    sighting_t *s = find_locked(name, nk) ? NULL : sighting_locked(key);
    if (s && !s->key && nsightings < CGJ_SIGHTINGS * 3 / 4) {
        *s = (sighting_t){.key = key};
        nsightings++;
        first = key;
    }
    pthread_mutex_unlock(&table_lock);
    return first;
}

/* The sighting of `key`, or NULL where there is none. */
static sighting_t *sighted_locked(uint64_t key)
{
    sighting_t *s = nsightings ? sighting_locked(key) : NULL;
    return s && s->key == key ? s : NULL;
}

void cgj_anchor_sighting_ended(uint64_t key, uint32_t calls, uint64_t shape)
{
    pthread_mutex_lock(&table_lock);
    sighting_t *s = sighted_locked(key);
    if (s) s->calls = calls ? calls : 1, s->shape = shape;
    pthread_mutex_unlock(&table_lock);
}

void cgj_anchor_sighting_long(uint64_t key)
{
    pthread_mutex_lock(&table_lock);
    sighting_t *s = sighted_locked(key);
    if (s) s->long_steps = true;
    pthread_mutex_unlock(&table_lock);
}

/* A new anchor whose step was sighted (its sighting's key: `key`): that first run counts as its
 * first warm-up run. */
static void seed_locked(cgj_anchor_t *a, uint64_t key)
{
    sighting_t *s = sighted_locked(key);
    if (!s) return;
    a->runs = 1;
    a->warmup_runs = 1;
    a->warm_len[0] = s->calls;
    a->warm_shape[0] = s->shape;
    a->long_steps = s->long_steps;
}

/* The anchor `name`, made (with `order`: a sibling's) where there is none yet. */
static cgj_anchor_t *get(const char *name, uint32_t order)
{
    uint64_t key = name_key(name);
    pthread_mutex_lock(&table_lock);
    cgj_anchor_t *a = find_locked(name, key);
    if (!a) {
        a = cgj_xcalloc(1, sizeof *a);
        a->name = cgj_xstrdup(name);
        a->state = CGJ_STATE_WARMUP;
        a->reason.op = CGJ_REASON_NO_OP;
        a->order = order;
        a->next = anchors;
        anchors = a;
        cgj_map_add(&by_name, key, (uint64_t)(uintptr_t)a);
        seed_locked(a, key | 1);
    }
    pthread_mutex_unlock(&table_lock);
    return a;
}

cgj_anchor_t *cgj_anchor_get(const char *name)
{
    return get(name, 0);
}

cgj_anchor_t *cgj_anchor_sibling(cgj_anchor_t *a)
{
    cgj_anchor_t *s = __atomic_load_n(&a->sibling, __ATOMIC_ACQUIRE);
    if (s || a->order >= CGJ_MAX_SIBLINGS) return s;
    size_t len = strlen(a->name);
    const char *hash = a->order ? strrchr(a->name, '#') : NULL;
    if (hash) len = (size_t)(hash - a->name);
    char *name = cgj_xmalloc(len + 16);
    snprintf(name, len + 16, "%.*s#%u", (int)len, a->name, a->order + 2);
    s = get(name, a->order + 1); /* its order set as it is made, under the table's lock */
    cgj_free(name);
    __atomic_store_n(&a->sibling, s, __ATOMIC_RELEASE);
    return s;
}

void cgj_anchors_forked(void)
{
    pthread_mutex_init(&table_lock, NULL);
}

/* The thread running a's step (the one that took `busy`) changes its state, reason and variants
 * under the table's lock and reads them without it; the API and the report read them under the
 * lock. Counters, `current` and `gpu_id`, which other threads read without the lock, are atomic
 * everywhere. */
static void go_locked(cgj_anchor_t *a, cgj_state_t to)
{
    if (a->state == to && to != CGJ_STATE_REPLAY) return;
    CGJ_ASSERT(cgj_machine_anchor_allows(a->state, to), "an anchor transition outside the table (tracer/machine.h)");
    a->state = to;
}

void cgj_anchor_go(cgj_anchor_t *a, cgj_state_t to)
{
    pthread_mutex_lock(&table_lock);
    go_locked(a, to);
    pthread_mutex_unlock(&table_lock);
}

/* ---- the timeline (CGJIT_TRACE_FILE): builds, and what an anchor notes ---- */

/* A variant was just built: a complete event over its plan and graph building, ending now. */
static void timeline_build(const cgj_anchor_t *a, const cgj_trace_t *tr)
{
    cgj_tl_event_t *e = cgj_timeline_take('X', "build", a->name);
    if (!e) return;
    e->dur_ns = tr->plan_ns + tr->build_ns;
    e->ts_ns = e->ts_ns > e->dur_ns ? e->ts_ns - e->dur_ns : 0;
    cgj_tl_str(e, "kind", "build");
    cgj_tl_num(e, "variant", a->nvariants + 1);
    cgj_tl_num(e, "ops", tr->list.n);
    cgj_tl_num(e, "instantiate_ns", (int64_t)tr->instantiate_ns);
    cgj_timeline_put(e);
}

/* An instant event for a reason the anchor took, named after its code. A side exit has an
 * event of its own (step.c): the thread leaving its trace notes it here as well, and is not
 * counted twice. */
static void timeline_note(const cgj_anchor_t *a, const cgj_reason_t *r, const char *what)
{
    if (cgj_tls.exited && cgj_tls.anchor == a && !strcmp(what, "note")) return;
    cgj_tl_event_t *e = cgj_timeline_take('i', "anchor", cgj_reason_name(r->code));
    if (!e) return;
    cgj_tl_str(e, "anchor", a->name);
    cgj_tl_str(e, "kind", what);
    if (r->op != CGJ_REASON_NO_OP) cgj_tl_num(e, "op", r->op);
    cgj_reason_format(r, e->detail, sizeof e->detail);
    cgj_timeline_put(e);
}

void cgj_anchor_publish(cgj_anchor_t *a, cgj_trace_t *tr)
{
    if (CGJ_UNLIKELY(cgj_timeline_on)) timeline_build(a, tr);
    pthread_mutex_lock(&table_lock);
    a->variants[a->nvariants] = tr;
    __atomic_store_n(&a->current, a->nvariants++, __ATOMIC_RELAXED);
    go_locked(a, CGJ_STATE_REPLAY);
    pthread_mutex_unlock(&table_lock);
}

void cgj_anchor_note(cgj_anchor_t *a, const cgj_reason_t *r)
{
    pthread_mutex_lock(&table_lock);
    if (a->state != CGJ_STATE_BLACKLISTED) a->reason = *r; /* a blacklisted anchor keeps why */
    pthread_mutex_unlock(&table_lock);
    cgj_reason_tally(r);
    if (CGJ_UNLIKELY(cgj_timeline_on)) timeline_note(a, r, "note");
}

static void blacklist(cgj_anchor_t *a, const cgj_reason_t *r)
{
    char text[320];
    pthread_mutex_lock(&table_lock);
    go_locked(a, CGJ_STATE_BLACKLISTED);
    a->reason = *r;
    pthread_mutex_unlock(&table_lock);
    CGJ_STAT_ADD(anchors_blacklisted, 1);
    if (CGJ_UNLIKELY(cgj_timeline_on)) timeline_note(a, r, "blacklisted");
    CGJ_LOG(blacklist, "anchor '%s' blacklisted: %s", a->name, cgj_reason_format(r, text, sizeof text));
}

void cgj_anchor_blacklist(cgj_anchor_t *a, const cgj_reason_t *r)
{
    cgj_reason_tally(r);
    blacklist(a, r);
}

void cgj_anchor_fail(cgj_anchor_t *a, const cgj_reason_t *r)
{
    cgj_anchor_note(a, r);
    if (a->nvariants || a->state == CGJ_STATE_BLACKLISTED) return;
    uint32_t failures = __atomic_add_fetch(&a->record_failures, 1, __ATOMIC_RELAXED);
    if (failures >= (uint32_t)cgj_cfg.MAX_RECORDS) {
        CGJ_LOG(blacklist, "anchor '%s': %u eager runs disagreed", a->name, failures);
        blacklist(a, r);
    }
}

/* An anchor whose replays keep leaving their trace costs more than eager execution (every
 * exit re-issues what it absorbed and records the rest): when 3 of its last 4 x 8 runs exited,
 * it runs eagerly for good. A copy whose size follows the data, say, ends up here. */
#define EXIT_WINDOW 32
#define EXIT_LIMIT 24

void cgj_anchor_note_run(cgj_anchor_t *a, bool exited)
{
    a->exit_history = (a->exit_history << 1) | exited;
    if (a->history_len < EXIT_WINDOW) a->history_len++;
    int n = __builtin_popcount(a->exit_history);
    if (a->history_len < EXIT_WINDOW || n < EXIT_LIMIT) return;
    const cgj_trace_t *tr = a->variants[__atomic_load_n(&a->current, __ATOMIC_RELAXED)];
    const cgj_exit_count_t *top = NULL;
    for (uint32_t i = 0; i < tr->nexits; i++)
        if (!top || tr->exits[i].count > top->count) top = &tr->exits[i];
    char most[240] = "?";
    if (top) cgj_reason_format(&top->reason, most, sizeof most);
    cgj_reason_t r;
    cgj_reason_set(&r, CGJ_REASON_BLACKLIST_EXITS, CGJ_REASON_NO_OP, "%d of its last %d runs; most often: %s", n,
                   EXIT_WINDOW, most);
    cgj_anchor_blacklist(a, &r);
}

/* ---- eviction under CGJIT_POOL_MAX_GB ---- */

/* Can a's traces go? They exist, and the program holds none of the blocks they handed out. */
static bool evictable(const cgj_anchor_t *a)
{
    if (a->state != CGJ_STATE_REPLAY || !a->nvariants) return false;
    for (uint32_t k = 0; k < a->nvariants; k++)
        for (uint32_t i = 0; i < a->variants[k]->list.n; i++)
            if (__atomic_load_n(&a->variants[k]->list.ops[i].held, __ATOMIC_ACQUIRE)) return false;
    return true;
}

static cgj_anchor_t *coldest(const cgj_anchor_t *except)
{
    cgj_anchor_t *best = NULL;
    pthread_mutex_lock(&table_lock);
    for (cgj_anchor_t *a = anchors; a; a = a->next)
        if (a != except && !__atomic_load_n(&a->busy, __ATOMIC_RELAXED) && evictable(a) &&
            (!best ||
             __atomic_load_n(&a->last_used, __ATOMIC_RELAXED) < __atomic_load_n(&best->last_used, __ATOMIC_RELAXED)))
            best = a;
    pthread_mutex_unlock(&table_lock);
    return best;
}

void cgj_anchor_trace_free(cgj_trace_t *tr)
{
    cgj_graph_destroy(tr);
    cgj_fusion_free(tr);
    if (tr->allocs) cgj_pool_region_free(tr->region, tr->pool_bytes);
    for (uint32_t i = 0; i < tr->list.n; i++) cgj_staging_free(tr->list.ops[i].stage);
    cgj_oplist_free(&tr->list);
    cgj_free(tr->allocs);
    cgj_free(tr);
}

/* Give a's traces, graphs and pool regions back; it starts over from WARMUP. The number of
 * traces given back (0: a step runs it now, or the program holds blocks of its pool). */
static uint32_t start_over(cgj_anchor_t *a)
{
    if (__atomic_exchange_n(&a->busy, 1, __ATOMIC_ACQUIRE)) return 0; /* a step runs it now */
    cgj_trace_t *gone[CGJ_MAX_VARIANTS_HARD];
    uint32_t n = 0;
    pthread_mutex_lock(&table_lock);
    if (evictable(a)) {
        n = a->nvariants;
        memcpy(gone, a->variants, n * sizeof gone[0]);
        a->nvariants = 0;
        __atomic_store_n(&a->current, 0, __ATOMIC_RELAXED);
        go_locked(a, CGJ_STATE_WARMUP);
    }
    pthread_mutex_unlock(&table_lock);
    for (uint32_t k = 0; k < n; k++) cgj_anchor_trace_free(gone[k]);
    while (a->ndrafts) cgj_oplist_free(&a->drafts[--a->ndrafts]);
    __atomic_store_n(&a->busy, 0, __ATOMIC_RELEASE);
    return n;
}

static bool evict(cgj_anchor_t *a)
{
    uint32_t n = start_over(a);
    if (n) {
        CGJ_STAT_ADD(anchors_evicted, 1);
        CGJ_LOG(trace, "anchor '%s' evicted: %u trace(s) and their memory given back (CGJIT_POOL_MAX_GB)", a->name, n);
    }
    return n > 0;
}

bool cgj_anchor_refuse(cgj_anchor_t *a)
{
    uint64_t runs = __atomic_load_n(&a->runs, __ATOMIC_RELAXED);
    if (runs < __atomic_load_n(&a->refuse_at, __ATOMIC_RELAXED)) return false;
    uint32_t n = start_over(a);
    if (!n) { /* the program holds blocks of its pool: looked at again in 64 runs, not at each */
        __atomic_store_n(&a->refuse_at, runs + 64, __ATOMIC_RELAXED);
        return false;
    }
    __atomic_store_n(&a->fuse_ticket, 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&a->refusions, 1, __ATOMIC_RELAXED);
    CGJ_LOG(trace, "anchor '%s': its fused kernels are compiled: %u trace(s) given back, built again with them",
            a->name, n);
    return true;
}

void cgj_anchor_make_room(const cgj_anchor_t *a, size_t bytes)
{
    size_t budget = (size_t)cgj_cfg.POOL_MAX_GB << 30;
    for (int tries = 0; tries < 64 && cgj_pool_mapped_bytes() + cgj_pool_region_bytes(bytes) > budget; tries++) {
        cgj_anchor_t *v = coldest(a);
        if (!v) break;
        evict(v);
    }
}

/* ---- for the API and the report ---- */

void cgj_anchor_fill_info(const cgj_anchor_t *a, cgj_trace_info_t *out)
{
    size_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    out->state = a->state;
    out->variants = a->nvariants;
    out->runs = __atomic_load_n(&a->runs, __ATOMIC_RELAXED);
    out->replays = __atomic_load_n(&a->replays, __ATOMIC_RELAXED);
    out->side_exits = __atomic_load_n(&a->side_exits, __ATOMIC_RELAXED);
    out->record_failures = __atomic_load_n(&a->record_failures, __ATOMIC_RELAXED);
    if (a->reason.code != CGJ_REASON_NONE) cgj_reason_format(&a->reason, out->reason, sizeof out->reason);
    out->reason_code = (int)a->reason.code;
    out->reason_op = a->reason.op;
    out->eager_step_ns = __atomic_load_n(&a->cost.eager_med_ns, __ATOMIC_RELAXED);
    out->replay_step_ns = __atomic_load_n(&a->cost.replay_med_ns, __ATOMIC_RELAXED);
    uint64_t busy_ns, busy_steps;
    uint32_t gpu_id = __atomic_load_n(&a->gpu_id, __ATOMIC_RELAXED);
    if (gpu_id && cgj_gpubusy_figures(gpu_id, &busy_ns, &busy_steps))
        out->gpu_busy_ns = busy_ns / busy_steps, out->gpu_busy_steps = busy_steps;
    out->reissued_ops = __atomic_load_n(&a->cost.reissued, __ATOMIC_RELAXED);
    out->record_ns = __atomic_load_n(&a->cost.record_ns, __ATOMIC_RELAXED);
    out->recorded_ops = __atomic_load_n(&a->cost.recorded_ops, __ATOMIC_RELAXED);
    out->first_replay_run = __atomic_load_n(&a->cost.first_replay_run, __ATOMIC_RELAXED);
    out->probes = __atomic_load_n(&a->cost.probes, __ATOMIC_RELAXED);
    out->off_runs = __atomic_load_n(&a->cost.off_runs, __ATOMIC_RELAXED);
    out->busy_runs = __atomic_load_n(&a->busy_runs, __ATOMIC_RELAXED);
    out->building_runs = __atomic_load_n(&a->building_runs, __ATOMIC_RELAXED);
    out->warmup_runs = __atomic_load_n(&a->warmup_runs, __ATOMIC_RELAXED);
    uint64_t timed = __atomic_load_n(&a->cost.timed_probes, __ATOMIC_RELAXED);
    out->eager_calls_ns = timed ? __atomic_load_n(&a->cost.probe_calls_ns, __ATOMIC_RELAXED) / timed : 0;
    if (!a->nvariants) return;
    out->plan_ns = a->variants[0]->plan_ns;
    out->build_ns = a->variants[0]->build_ns;
    out->instantiate_ns = a->variants[0]->instantiate_ns;
    const cgj_trace_t *t = a->variants[__atomic_load_n(&a->current, __ATOMIC_RELAXED)];
    out->ops = t->list.n;
    out->kernels = t->kernels;
    out->segments = t->nsegs;
    out->varying_slots = __atomic_load_n(&t->varying_slots, __ATOMIC_RELAXED);
    out->allocations = t->nblocks;
    out->pool_bytes = t->pool_bytes;
    out->naive_bytes = t->naive_bytes;
    out->lower_bound = t->lower_bound;
    out->fused_chains = t->fused_chains;
    out->fused_ops = t->fused_ops;
    out->fuse_drops = t->fuse_drops;
    out->fuse_reason_code = t->fuse_drops ? (int)t->fuse_dropped.code : 0;
    out->fuse_ns = t->fuse_ns;
    out->fuse_compile_ns = t->fuse_compile_ns;
    out->fuse_cold = t->fuse_cold;
    out->fused_gemms = t->fused_gemms;
    for (uint32_t i = 0; i < t->list.n; i++)
        if (t->list.ops[i].lib)
            out->lib_calls++, out->lib_absorbable += t->list.ops[i].lib->absorbable && cgj_libop_learned();
    out->ops -= out->lib_calls; /* driver calls: the library ops group them */
}

int cgj_anchor_info(const char *name, cgj_trace_info_t *out)
{
    uint64_t key = name_key(name);
    pthread_mutex_lock(&table_lock);
    cgj_anchor_t *a = find_locked(name, key);
    if (a) cgj_anchor_fill_info(a, out);
    pthread_mutex_unlock(&table_lock);
    return a ? CGJ_OK : CGJ_ERR_NOT_FOUND;
}

void cgj_anchors_lock(void)
{
    pthread_mutex_lock(&table_lock);
}

void cgj_anchors_unlock(void)
{
    pthread_mutex_unlock(&table_lock);
}

const cgj_anchor_t *cgj_anchors_first(void)
{
    return anchors;
}

const cgj_anchor_t *cgj_anchors_next(const cgj_anchor_t *a)
{
    return a->next;
}

const char *cgj_anchor_name(const cgj_anchor_t *a)
{
    return a->name;
}

const cgj_trace_t *cgj_anchor_variant(const cgj_anchor_t *a, uint32_t k)
{
    return k < a->nvariants ? a->variants[k] : NULL;
}

void cgj_anchor_host_times(const cgj_anchor_t *a, double *eager_ns, double *replay_ns)
{
    uint64_t er = __atomic_load_n(&a->eager_runs, __ATOMIC_RELAXED),
             rr = __atomic_load_n(&a->replays, __ATOMIC_RELAXED);
    *eager_ns = er ? (double)__atomic_load_n(&a->eager_ns, __ATOMIC_RELAXED) / (double)er : 0;
    *replay_ns = rr ? (double)__atomic_load_n(&a->replay_ns, __ATOMIC_RELAXED) / (double)rr : 0;
}
