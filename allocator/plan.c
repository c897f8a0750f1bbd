/*
 * plan.c — offsets for a step's allocations in one static pool; see plan.h.
 *
 * The problem is dynamic storage allocation: blocks with fixed lifetimes get addresses so that
 * blocks live at the same time are disjoint, in as few bytes as possible. It is NP-hard, and the
 * lower bound (the largest total live at one time) cannot always be reached; but greedy
 * placement comes close, as TFLite's and XLA's planners show: take the blocks in some order and
 * put each into the smallest gap (best fit) between the placed blocks whose lifetimes overlap
 * it, or above the highest of them. Heuristics differ in the order, and the smallest pool wins:
 *
 *   greedy-by-size      aligned size, largest first: big blocks first leave small gaps to fill.
 *   by-start-best-fit   start, earliest first: what a best-fit allocator would do at run time.
 *                       Run as an allocator (a free list), it costs O(n * free extents).
 *   greedy-by-breadth   the peak live total over the block's lifetime, then size: the blocks of
 *                       the busiest moments, which set the bound, are packed first.
 * These three always run, up to MANY_BLOCKS blocks. While the best plan is more than 10% above
 * the lower bound, others follow: skyline best fit (Burke et al.'s strip packing heuristic, as
 * Sekiyama et al. apply it to DNN memory: fill the lowest stretch of the skyline with the block
 * that fits it best), orders by area, by lifetime, by start with first fit, a squeaky wheel
 * (blocks that ended above the bound go earlier next time), a beam search under a cap (the one
 * with lookahead: some narrow traces need it), then sizes with random jitter. The orders are
 * followed by a compaction: re-placing the blocks by offset with first fit, which never raises
 * one. Every search stops at the lower bound, and the extra ones at a fixed budget of work
 * units (about 2 ns each), so that the result depends on the input only and a 10,000-block
 * trace plans in well under a second.
 *
 * Blocks that overlap every other block (escaping ones always do) are stacked at the bottom
 * first: they get bytes of their own in any plan, so the search need not see them.
 *
 * Placing one block needs the placed blocks that overlap its lifetime [s, e), by offset. They
 * are found in one of two ways, whichever is cheaper for this block (the plan is the same):
 * - sparse: a segment tree over positions holds each placed block at the O(log T) nodes that
 *   cover its lifetime, so the placed blocks live at s are those on the path from leaf s to the
 *   root; the ones that start inside (s, e) are a contiguous run of the blocks sorted by start.
 *   The k blocks found are sorted by offset: O(k log k).
 * - dense: one pass over all placed blocks kept sorted by offset, skipping those that do not
 *   overlap: O(placed). Blocks placed in sparse mode are merged in lazily.
 * So a block costs O(min(k log k, n)), and an order O(n^2) at worst. Beyond MANY_BLOCKS, greedy
 * by size runs only if its estimated cost is below LARGE_BUDGET: by start with best fit always
 * gives a plan.
 *
 * Positions are compressed to ranks 0..T-1 first (lifetimes are compared only with < and >, so
 * ranks keep every overlap). An escaping block is live over [0, T): its slot is never shared.
 */
#include "allocator/plan.h"
#include "base/cgj_base.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCK_BYTES (1ull << 44)
#define MAX_TOTAL_BYTES (1ull << 62)
/* Beyond this many blocks, the searches that scan are held to budgets (see plan_search). */
#define MANY_BLOCKS 20000
/* Work units (blocks visited or compared) for the searches beyond the first three. */
#define WORK_BUDGET 150000000ull
/* Jittered orders, each with its own seed, until the target or the budget is reached. */
#define MAX_JITTERS 1000000
/* Layouts kept by the beam search; it runs only where at most BEAM_LIVE blocks are live. */
#define BEAM_WIDTH 16
#define BEAM_LIVE 256
#define BEAM_TRIES 6
/* Passes of the squeaky wheel, before the jittered orders. */
#define SQUEAKY_ROUNDS 50
/* Greedy by size beyond MANY_BLOCKS: past this, the online best fit instead. */
#define LARGE_BUDGET 600000000ull
/* The target of the extra heuristics: pool <= lower * TARGET_NUM / TARGET_DEN. */
#define TARGET_NUM 110
#define TARGET_DEN 100

typedef struct span { uint64_t off, end; } span_t;             /* a block's bytes [off, end) */
typedef struct keyed { uint64_t off; uint32_t id; } keyed_t;               /* for sorting ids */
typedef struct ord { uint64_t k1, k2; uint32_t idx; } ord_t;

typedef struct ctx {
    uint32_t n, T, leaves;
    uint64_t *asz;                   /* aligned sizes */
    uint32_t *st, *en;               /* lifetimes in ranks; escaping: [0, T) */
    uint64_t lower;
    /* static indexes over all blocks */
    uint32_t *node_base;             /* segment tree, CSR: node i's slots [base[i], base[i+1]) */
    uint32_t *node_items, *node_fill;
    uint32_t *by_start, *first_start; /* blocks by start; first index with start >= t */
    uint32_t *by_end, *first_end;    /* blocks by end; first index with end >= t */
    uint32_t *live_count, max_live;  /* blocks live at t; at most */
    uint64_t *live_max;              /* segment tree of live bytes, for range maxima */
    /* one run */
    uint8_t *placed;
    uint64_t *off;
    span_t *cand;
    uint32_t *order;                 /* placed blocks in placement order */
    uint32_t *sid, *sst, *sen;       /* the first nsorted of them by offset, with their lifetimes */
    keyed_t *tail;                   /* scratch for merging the others in */
    uint32_t *hits;                  /* scratch: the overlapping ones */
    uint32_t nsorted, nplaced;
    uint64_t work, limit;            /* work done; a run that passes the limit is abandoned */
    int first_fit;                   /* place into the lowest gap that fits, not the smallest */
} ctx_t;

static uint64_t align_size(uint64_t size)
{
    if (size == 0) return CGJ_PLAN_ALIGN;
    return (size + CGJ_PLAN_ALIGN - 1) & ~(uint64_t)(CGJ_PLAN_ALIGN - 1);
}

static uint32_t ilog2(uint64_t x) { return x ? 63u - (uint32_t)__builtin_clzll(x) : 0; }

/* ---- sorting: a quicksort per element type, with LESS(x, y) inlined; no qsort, whose
 * indirect calls cost too much here and whose buffers would come from the program's heap ---- */

#define SWAP(T, a, b) do { T t_ = (a); (a) = (b); (b) = t_; } while (0)
#define DEFINE_SORT(name, T, LESS)                                                 \
    static void name(T *v, size_t n)                                               \
    {                                                                              \
        while (n > 16) {                                                           \
            size_t m = n / 2, i = 0, j = n - 1;                                    \
            if (LESS(v[m], v[0])) SWAP(T, v[m], v[0]);                             \
            if (LESS(v[n - 1], v[0])) SWAP(T, v[n - 1], v[0]);                     \
            if (LESS(v[n - 1], v[m])) SWAP(T, v[n - 1], v[m]);                     \
            T p = v[m];                                                            \
            for (;;) {                                                             \
                while (LESS(v[i], p)) i++;                                         \
                while (LESS(p, v[j])) j--;                                         \
                if (i >= j) break;                                                 \
                SWAP(T, v[i], v[j]);                                               \
                i++, j--;                                                          \
            }                                                                      \
            /* [0, j] <= p <= [j+1, n): recurse into the smaller side */           \
            if (j + 1 < n - j - 1) { name(v, j + 1); v += j + 1; n -= j + 1; }     \
            else { name(v + j + 1, n - j - 1); n = j + 1; }                        \
        }                                                                          \
        for (size_t i = 1; i < n; i++) {                                           \
            T x = v[i];                                                            \
            size_t j = i;                                                          \
            for (; j > 0 && LESS(x, v[j - 1]); j--) v[j] = v[j - 1];               \
            v[j] = x;                                                              \
        }                                                                          \
    }
#define OFF_LESS(x, y) ((x).off < (y).off)
#define U32_LESS(x, y) ((x) < (y))
/* descending k1, then descending k2, then ascending index: a total order */
#define ORD_LESS(x, y)                                                                 \
    ((x).k1 != (y).k1 ? (x).k1 > (y).k1 : (x).k2 != (y).k2 ? (x).k2 > (y).k2 : (x).idx < (y).idx)
DEFINE_SORT(sort_spans, span_t, OFF_LESS)
DEFINE_SORT(sort_keyed, keyed_t, OFF_LESS)
DEFINE_SORT(sort_u32, uint32_t, U32_LESS)
DEFINE_SORT(sort_ord, ord_t, ORD_LESS)

/* ---- set-up: ranks, lower bound, static indexes ---- */

static uint32_t rank_of(const uint32_t *vals, uint32_t nv, uint32_t x)
{
    uint32_t lo = 0, hi = nv;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (vals[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Aligned sizes, and lifetimes in ranks (the blocks were checked by cgj_plan). */
static void ctx_lifetimes(ctx_t *c, const cgj_plan_block_t *b)
{
    uint32_t *vals = cgj_xmalloc(2 * (size_t)c->n * sizeof *vals + 1);
    uint32_t nv = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        c->asz[i] = align_size(b[i].size);
        if (b[i].end == CGJ_PLAN_ESCAPES) continue;
        vals[nv++] = b[i].start;
        vals[nv++] = b[i].end;
    }
    sort_u32(vals, nv);
    uint32_t u = 0;
    for (uint32_t i = 0; i < nv; i++)
        if (u == 0 || vals[u - 1] != vals[i]) vals[u++] = vals[i];
    c->T = u ? u : 1;
    for (uint32_t i = 0; i < c->n; i++) {
        int esc = b[i].end == CGJ_PLAN_ESCAPES;
        c->st[i] = esc ? 0 : rank_of(vals, u, b[i].start);
        c->en[i] = esc ? c->T : rank_of(vals, u, b[i].end);
    }
    cgj_free(vals);
}

/* Live counts and bytes per position, the lower bound, the range-max tree, blocks by start and
 * by end. */
static void ctx_profile(ctx_t *c)
{
    uint32_t T = c->T, L = c->leaves;
    int64_t *dbytes = cgj_xcalloc(T + 1, sizeof *dbytes);
    int64_t *dcount = cgj_xcalloc(T + 1, sizeof *dcount);
    for (uint32_t i = 0; i < c->n; i++) {
        dbytes[c->st[i]] += (int64_t)c->asz[i], dbytes[c->en[i]] -= (int64_t)c->asz[i];
        dcount[c->st[i]]++, dcount[c->en[i]]--;
        c->first_start[c->st[i] + 1]++;
    }
    int64_t bytes = 0, count = 0;
    for (uint32_t t = 0; t < T; t++) {
        bytes += dbytes[t], count += dcount[t];
        c->live_count[t] = (uint32_t)count;
        if ((uint32_t)count > c->max_live) c->max_live = (uint32_t)count;
        c->live_max[L + t] = (uint64_t)bytes;
        if ((uint64_t)bytes > c->lower) c->lower = (uint64_t)bytes;
    }
    for (uint32_t i = L - 1; i >= 1; i--)
        c->live_max[i] = c->live_max[2 * i] > c->live_max[2 * i + 1] ? c->live_max[2 * i]
                                                                      : c->live_max[2 * i + 1];
    for (uint32_t t = 0; t < T; t++) c->first_start[t + 1] += c->first_start[t];
    uint32_t *fill = cgj_xcalloc(T + 1, sizeof *fill);
    for (uint32_t i = 0; i < c->n; i++)
        c->by_start[c->first_start[c->st[i]] + fill[c->st[i]]++] = i;
    memset(fill, 0, (T + 1) * sizeof *fill);
    for (uint32_t i = 0; i < c->n; i++) c->first_end[c->en[i] + 1]++;
    for (uint32_t t = 0; t <= T; t++) c->first_end[t + 1] += c->first_end[t];
    for (uint32_t i = 0; i < c->n; i++) c->by_end[c->first_end[c->en[i]] + fill[c->en[i]]++] = i;
    cgj_free(fill);
    cgj_free(dbytes);
    cgj_free(dcount);
}

/* The segment tree's canonical nodes of [s, e), at most two per level; returns how many. */
static uint32_t cover(uint32_t leaves, uint32_t s, uint32_t e, uint32_t nodes[64])
{
    uint32_t k = 0;
    for (uint32_t l = s + leaves, r = e + leaves; l < r; l >>= 1, r >>= 1) {
        if (l & 1) nodes[k++] = l++;
        if (r & 1) nodes[k++] = --r;
    }
    return k;
}

/* Lay out the segment tree's slots: each block gets one at every node that covers it. */
static void ctx_tree(ctx_t *c)
{
    uint32_t nodes = 2 * c->leaves;
    c->node_base = cgj_xcalloc(nodes + 1, sizeof *c->node_base);
    c->node_fill = cgj_xcalloc(nodes, sizeof *c->node_fill);
    uint32_t cov[64];
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t k = cover(c->leaves, c->st[i], c->en[i], cov), j = 0; j < k; j++)
            c->node_base[cov[j] + 1]++;
    for (uint32_t i = 0; i < nodes; i++) c->node_base[i + 1] += c->node_base[i];
    c->node_items = cgj_xmalloc((size_t)c->node_base[nodes] * sizeof *c->node_items + 1);
}

static void ctx_init(ctx_t *c, const cgj_plan_block_t *b, size_t n)
{
    memset(c, 0, sizeof *c);
    CGJ_ASSERT(n < UINT32_MAX / 4, "cgj_plan: too many blocks");
    c->n = (uint32_t)n;
    c->asz = cgj_xmalloc(n * sizeof *c->asz);
    c->st = cgj_xmalloc(n * sizeof *c->st);
    c->en = cgj_xmalloc(n * sizeof *c->en);
    ctx_lifetimes(c, b);
    for (c->leaves = 1; c->leaves < c->T; c->leaves *= 2) {}
    c->live_count = cgj_xcalloc(c->T, sizeof *c->live_count);
    c->live_max = cgj_xcalloc(2 * (size_t)c->leaves, sizeof *c->live_max);
    c->first_start = cgj_xcalloc(c->T + 1, sizeof *c->first_start);
    c->by_start = cgj_xmalloc(n * sizeof *c->by_start);
    c->first_end = cgj_xcalloc(c->T + 2, sizeof *c->first_end);
    c->by_end = cgj_xmalloc(n * sizeof *c->by_end);
    ctx_profile(c);
    ctx_tree(c);
    c->placed = cgj_xmalloc(n);
    c->off = cgj_xmalloc(n * sizeof *c->off);
    c->cand = cgj_xmalloc(n * sizeof *c->cand);
    c->order = cgj_xmalloc(n * sizeof *c->order);
    c->sid = cgj_xmalloc(n * sizeof *c->sid);
    c->sst = cgj_xmalloc(n * sizeof *c->sst);
    c->sen = cgj_xmalloc(n * sizeof *c->sen);
    c->hits = cgj_xmalloc(n * sizeof *c->hits);
    c->tail = cgj_xmalloc(n * sizeof *c->tail);
}

static void ctx_free(ctx_t *c)
{
    cgj_free(c->asz), cgj_free(c->st), cgj_free(c->en);
    cgj_free(c->node_base), cgj_free(c->node_items), cgj_free(c->node_fill);
    cgj_free(c->by_start), cgj_free(c->first_start), cgj_free(c->live_count), cgj_free(c->live_max);
    cgj_free(c->by_end), cgj_free(c->first_end);
    cgj_free(c->placed), cgj_free(c->off), cgj_free(c->cand), cgj_free(c->tail);
    cgj_free(c->order), cgj_free(c->sid), cgj_free(c->sst), cgj_free(c->sen), cgj_free(c->hits);
}

/* ---- placing one block ---- */

/* Best fit in the gaps between spans (by offset): the smallest gap of at least size bytes, or
 * the top of the highest span. The walk is shared by both ways of finding the spans. */
typedef struct fit { uint64_t top, best_gap, best_off; int first; } fit_t;

static inline void fit_step(fit_t *f, uint64_t off, uint64_t end, uint64_t size)
{
    if (off > f->top) {
        uint64_t gap = off - f->top;
        if (gap >= size && gap < f->best_gap && (!f->first || f->best_gap == UINT64_MAX))
            f->best_gap = gap, f->best_off = f->top;
    }
    if (end > f->top) f->top = end;
}

static uint64_t fit_sparse(ctx_t *c, uint32_t b)
{
    uint32_t s = c->st[b], e = c->en[b], k = 0;
    for (uint32_t node = s + c->leaves; node >= 1; node >>= 1) {
        const uint32_t *it = c->node_items + c->node_base[node];
        for (uint32_t i = 0; i < c->node_fill[node]; i++)
            c->cand[k++] = (span_t){c->off[it[i]], c->off[it[i]] + c->asz[it[i]]};
    }
    for (uint32_t i = c->first_start[s + 1]; i < c->first_start[e]; i++) {
        uint32_t j = c->by_start[i];
        if (c->placed[j]) c->cand[k++] = (span_t){c->off[j], c->off[j] + c->asz[j]};
    }
    sort_spans(c->cand, k);
    c->work += (uint64_t)k * (ilog2(k) + 1);
    fit_t f = {0, UINT64_MAX, 0, c->first_fit};
    for (uint32_t i = 0; i < k; i++) fit_step(&f, c->cand[i].off, c->cand[i].end, c->asz[b]);
    return f.best_gap != UINT64_MAX ? f.best_off : f.top;
}

/* Bring the blocks placed since the last dense fit into the arrays sorted by offset. */
static void merge_tail(ctx_t *c)
{
    uint32_t nt = c->nplaced - c->nsorted, ns = c->nsorted;
    for (uint32_t t = 0; t < nt; t++) {
        uint32_t id = c->order[ns + t];
        c->tail[t] = (keyed_t){c->off[id], id};
    }
    sort_keyed(c->tail, nt);
    if (nt <= 4) { /* the usual case in dense mode: insert each one */
        for (uint32_t t = 0, lo = 0; t < nt; t++, ns++) {
            uint32_t hi = ns;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (c->off[c->sid[mid]] <= c->tail[t].off) lo = mid + 1;
                else hi = mid;
            }
            memmove(c->sid + lo + 1, c->sid + lo, (ns - lo) * sizeof *c->sid);
            memmove(c->sst + lo + 1, c->sst + lo, (ns - lo) * sizeof *c->sst);
            memmove(c->sen + lo + 1, c->sen + lo, (ns - lo) * sizeof *c->sen);
            uint32_t id = c->tail[t].id;
            c->sid[lo] = id, c->sst[lo] = c->st[id], c->sen[lo] = c->en[id];
        }
    } else { /* merge from the back */
        for (uint32_t i = ns, j = nt, k = c->nplaced; j > 0;) {
            k--;
            if (i > 0 && c->off[c->sid[i - 1]] > c->tail[j - 1].off)
                i--, c->sid[k] = c->sid[i], c->sst[k] = c->sst[i], c->sen[k] = c->sen[i];
            else
                j--, c->sid[k] = c->tail[j].id, c->sst[k] = c->st[c->sid[k]], c->sen[k] = c->en[c->sid[k]];
        }
    }
    c->nsorted = c->nplaced;
}

static uint64_t fit_dense(ctx_t *c, uint32_t b)
{
    uint32_t s = c->st[b], e = c->en[b], k = 0;
    if (c->nsorted < c->nplaced) merge_tail(c);
    c->work += c->nplaced;
    /* Gather the overlapping ones without a branch (overlap is random along the offsets, so a
     * branch would mispredict), then fit as in sparse mode: they are in offset order already. */
    const uint32_t *restrict sid = c->sid, *restrict sst = c->sst, *restrict sen = c->sen;
    uint32_t *restrict hits = c->hits, np = c->nplaced;
    for (uint32_t i = 0; i < np; i++) {
        hits[k] = sid[i];
        k += (sst[i] < e) & (sen[i] > s);
    }
    fit_t f = {0, UINT64_MAX, 0, c->first_fit};
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = c->hits[i];
        fit_step(&f, c->off[j], c->off[j] + c->asz[j], c->asz[b]);
    }
    return f.best_gap != UINT64_MAX ? f.best_off : f.top;
}

static void place(ctx_t *c, uint32_t b)
{
    uint32_t s = c->st[b], e = c->en[b];
    /* at most this many blocks to look at in sparse mode, placed or not */
    uint64_t most = (uint64_t)c->live_count[s] + (c->first_start[e] - c->first_start[s + 1]);
    uint64_t off = most * (ilog2(most) + 1) <= c->nplaced ? fit_sparse(c, b) : fit_dense(c, b);
    c->off[b] = off;
    c->placed[b] = 1;
    c->work += 1;
    uint32_t cov[64];
    for (uint32_t k = cover(c->leaves, s, e, cov), j = 0; j < k; j++)
        c->node_items[c->node_base[cov[j]] + c->node_fill[cov[j]]++] = b;
    c->order[c->nplaced++] = b;
}

/* Place all blocks in the given order; returns the pool size. */
static uint64_t run_order(ctx_t *c, const ord_t *order)
{
    memset(c->placed, 0, c->n);
    memset(c->node_fill, 0, 2 * (size_t)c->leaves * sizeof *c->node_fill);
    c->work += (uint64_t)c->n * (ilog2(c->n) + 1) + c->leaves; /* sorting the order, this */
    c->nsorted = c->nplaced = 0;
    uint64_t pool = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->work > c->limit) return UINT64_MAX;
        uint32_t b = order[i].idx;
        place(c, b);
        if (c->off[b] + c->asz[b] > pool) pool = c->off[b] + c->asz[b];
    }
    return pool;
}

/* ---- the heuristics: each fills the sort keys (k1, then k2, descending) ---- */

static uint64_t range_max(const ctx_t *c, uint32_t s, uint32_t e)
{
    uint32_t cov[64];
    uint64_t m = 0;
    for (uint32_t k = cover(c->leaves, s, e, cov), j = 0; j < k; j++)
        if (c->live_max[cov[j]] > m) m = c->live_max[cov[j]];
    return m;
}

static uint64_t mix(uint64_t x) /* splitmix64's finalizer */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef enum {
    BY_SIZE, BY_BREADTH, BY_LIFETIME, BY_AREA, BY_JITTER, BY_OFFSET, BY_PRIORITY, /* orders */
    SKYLINE, ONLINE                                                             /* not orders */
} order_kind_t;

static void order_keys(const ctx_t *c, order_kind_t kind, uint64_t seed, const uint64_t *prev, ord_t *o)
{
    for (uint32_t i = 0; i < c->n; i++) {
        uint64_t a = c->asz[i], len = c->en[i] - c->st[i];
        o[i].idx = i;
        o[i].k2 = a;
        switch (kind) {
        case BY_SIZE: o[i].k1 = a; o[i].k2 = len; break;
        case BY_BREADTH: o[i].k1 = range_max(c, c->st[i], c->en[i]); break;
        case BY_LIFETIME: o[i].k1 = len; break;
        case BY_AREA: o[i].k1 = (a / CGJ_PLAN_ALIGN) * len; break;
        case BY_JITTER: /* the size, scaled by a factor in [1/2, 1): nearby sizes swap */
            o[i].k1 = (a >> 1) + (uint64_t)(((unsigned __int128)(a >> 1) * (mix(seed ^ i) >> 32)) >> 32);
            break;
        case BY_OFFSET: o[i].k1 = UINT64_MAX - prev[i]; break;
        case BY_PRIORITY: o[i].k1 = prev[i]; break;
        case SKYLINE: case ONLINE: break;
        }
    }
    sort_ord(o, c->n);
}

/* ---- skyline best fit: a different kind of heuristic, not an order ---- */

/* The skyline is the height of the placed blocks at each position, as segments [a[i], a[i+1])
 * at height h[i] (the last one ends at T); neighbours always differ in height. */
typedef struct skyline { uint32_t *a; uint64_t *h; uint32_t n; } skyline_t;

static void sky_merge(skyline_t *k)
{
    uint32_t w = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        if (w > 0 && k->h[w - 1] == k->h[i]) continue;
        k->a[w] = k->a[i], k->h[w] = k->h[i], w++;
    }
    k->n = w;
}

/* Put [s, e) of segment i (which covers it) at height h. */
static void sky_raise(skyline_t *k, uint32_t i, uint32_t s, uint32_t e, uint32_t T, uint64_t h)
{
    uint32_t b = i + 1 < k->n ? k->a[i + 1] : T, add = (s > k->a[i]) + (e < b);
    memmove(k->a + i + 1 + add, k->a + i + 1, (k->n - i - 1) * sizeof *k->a);
    memmove(k->h + i + 1 + add, k->h + i + 1, (k->n - i - 1) * sizeof *k->h);
    uint64_t old = k->h[i];
    uint32_t j = i;
    if (s > k->a[i]) j++;
    k->a[j] = s, k->h[j] = h;
    if (e < b) k->a[j + 1] = e, k->h[j + 1] = old;
    k->n += add;
    sky_merge(k);
}

/* Which block goes into the lowest stretch of the skyline: of those whose lifetime lies within
 * it, the longest-lived, the largest, or the largest in area (the other key breaks ties). */
typedef enum { SKY_LIFETIME, SKY_SIZE, SKY_AREA } sky_rule_t;

static uint32_t sky_pick(ctx_t *c, uint32_t a, uint32_t b, sky_rule_t rule)
{
    uint32_t best = UINT32_MAX;
    uint64_t bk1 = 0, bk2 = 0;
    for (uint32_t i = c->first_start[a]; i < c->first_start[b]; i++) {
        uint32_t j = c->by_start[i];
        if (c->placed[j] || c->en[j] > b) continue;
        uint64_t len = c->en[j] - c->st[j], k1 = len, k2 = c->asz[j];
        if (rule == SKY_SIZE) k1 = c->asz[j], k2 = len;
        if (rule == SKY_AREA) k1 = len * (c->asz[j] / CGJ_PLAN_ALIGN), k2 = len;
        if (best == UINT32_MAX || k1 > bk1 || (k1 == bk1 && k2 > bk2)) best = j, bk1 = k1, bk2 = k2;
    }
    c->work += c->first_start[b] - c->first_start[a] + 1;
    return best;
}

static uint64_t run_skyline(ctx_t *c, sky_rule_t rule)
{
    skyline_t k = {cgj_xmalloc((2 * (size_t)c->n + 2) * sizeof *k.a),
                   cgj_xmalloc((2 * (size_t)c->n + 2) * sizeof *k.h), 1};
    k.a[0] = 0, k.h[0] = 0;
    memset(c->placed, 0, c->n);
    uint64_t pool = 0;
    for (uint32_t left = c->n; left > 0;) {
        if (c->work > c->limit) {
            pool = UINT64_MAX;
            break;
        }
        uint32_t lo = 0;
        for (uint32_t i = 1; i < k.n; i++)
            if (k.h[i] < k.h[lo]) lo = i;
        uint32_t a = k.a[lo], b = lo + 1 < k.n ? k.a[lo + 1] : c->T;
        c->work += k.n;
        uint32_t j = sky_pick(c, a, b, rule);
        if (j == UINT32_MAX) { /* nothing fits: waste the stretch up to its lower neighbour */
            uint64_t l = lo > 0 ? k.h[lo - 1] : UINT64_MAX, r = lo + 1 < k.n ? k.h[lo + 1] : UINT64_MAX;
            k.h[lo] = l < r ? l : r;
            sky_merge(&k);
            continue;
        }
        c->off[j] = k.h[lo];
        c->placed[j] = 1;
        left--;
        if (c->off[j] + c->asz[j] > pool) pool = c->off[j] + c->asz[j];
        sky_raise(&k, lo, c->st[j], c->en[j], c->T, c->off[j] + c->asz[j]);
    }
    cgj_free(k.a);
    cgj_free(k.h);
    return pool;
}

/* ---- online best fit: by start with best fit, as an allocator would do it ---- */

/* Greedy placement by start with best fit sees, for each block, exactly the blocks live at its
 * start: so it is the simulation of a best-fit allocator over the events, done here with a
 * free list (extents by address, none touching the top) in O(n * extents) instead of scans. */
typedef struct freelist { span_t *v; uint32_t n; int first_fit; uint64_t top, pool; } freelist_t;

static void fl_remove(freelist_t *f, uint32_t i)
{
    memmove(f->v + i, f->v + i + 1, (f->n - i - 1) * sizeof *f->v);
    f->n--;
}

static uint64_t fl_take(freelist_t *f, uint64_t size, uint64_t *work)
{
    uint32_t best = UINT32_MAX, i = 0;
    for (; i < f->n; i++) {
        if (f->v[i].end - f->v[i].off < size) continue;
        if (best == UINT32_MAX || f->v[i].end - f->v[i].off < f->v[best].end - f->v[best].off) best = i;
        if (f->first_fit) break;
    }
    *work += i + 1;
    if (best == UINT32_MAX) {
        f->top += size;
        if (f->top > f->pool) f->pool = f->top;
        return f->top - size;
    }
    uint64_t off = f->v[best].off;
    f->v[best].off += size;
    if (f->v[best].off == f->v[best].end) fl_remove(f, best);
    return off;
}

static void fl_give(freelist_t *f, uint64_t off, uint64_t end)
{
    uint32_t lo = 0, hi = f->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (f->v[mid].off < off) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && f->v[lo - 1].end == off) off = f->v[--lo].off, fl_remove(f, lo);
    if (lo < f->n && f->v[lo].off == end) end = f->v[lo].end, fl_remove(f, lo);
    if (end == f->top) { /* the top comes down instead */
        f->top = off;
        return;
    }
    memmove(f->v + lo + 1, f->v + lo, (f->n - lo) * sizeof *f->v);
    f->v[lo] = (span_t){off, end};
    f->n++;
}

static uint64_t run_online(ctx_t *c, int first_fit)
{
    freelist_t f = {cgj_xmalloc((c->n + 1) * sizeof *f.v), 0, first_fit, 0, 0};
    for (uint32_t t = 0; t < c->T; t++) {
        for (uint32_t i = c->first_end[t]; i < c->first_end[t + 1]; i++) /* frees first */
            fl_give(&f, c->off[c->by_end[i]], c->off[c->by_end[i]] + c->asz[c->by_end[i]]);
        for (uint32_t i = c->first_start[t]; i < c->first_start[t + 1]; i++)
            c->off[c->by_start[i]] = fl_take(&f, c->asz[c->by_start[i]], &c->work);
    }
    cgj_free(f.v);
    return f.pool;
}

/* ---- beam search under a cap: lookahead for narrow traces ---- */

/*
 * Greedy placement cannot look ahead, and some traces need it: a window of three live blocks
 * whose sizes cycle through 16, 20, 24, 28 KiB (the bench's "temps") packs into 76 KiB, but
 * every greedy order gives 88 KiB. The beam simulates the allocator over the events, keeping up
 * to BEAM_WIDTH different layouts of the live blocks. A new block may go to either end of any
 * gap below the cap W; layouts that cannot place it die, and of the others those whose live
 * blocks end lowest (the most room) are kept. All layouts at one moment hold the same blocks,
 * so a layout is the offsets of the live list; the offsets of blocks already freed are kept
 * in a tree of choices.
 */
typedef struct choice { uint32_t parent, block; uint64_t off; } choice_t;
typedef struct layout { uint64_t peak, hash; uint32_t choice; } layout_t;
/* a placement: its layout's top (of the live blocks) and peak (of all) after it */
typedef struct cand { uint64_t top, peak, hash, off; uint32_t from; } cand_t;
#define CAND_LESS(x, y) ((x).top != (y).top ? (x).top < (y).top : (x).hash < (y).hash)
DEFINE_SORT(sort_cands, cand_t, CAND_LESS)

typedef struct beam {
    uint32_t *live, m;        /* the live blocks, in allocation order */
    uint64_t *offs[2];        /* layout i's offsets: offs[cur][i * max_live + j] */
    layout_t *lay[2];
    uint32_t n, cur;          /* layouts */
    choice_t *choices;
    uint32_t nchoices, cap_choices;
    cand_t *cands;
    span_t *ext;
} beam_t;

static uint64_t beam_hash(const uint64_t *offs, uint32_t m)
{
    uint64_t h = 0;
    for (uint32_t j = 0; j < m; j++) h ^= mix(offs[j] * 0x100000001b3ull + j);
    return h;
}

static void beam_free_block(ctx_t *c, beam_t *k, uint32_t b)
{
    uint32_t i = 0;
    while (k->live[i] != b) i++;
    memmove(k->live + i, k->live + i + 1, (k->m - i - 1) * sizeof *k->live);
    k->m--;
    uint32_t w = 0;
    for (uint32_t l = 0; l < k->n; l++) { /* drop its offset; merge layouts that became equal */
        uint64_t *o = k->offs[k->cur] + (size_t)l * c->max_live;
        uint64_t *dst = k->offs[k->cur] + (size_t)w * c->max_live;
        memmove(o + i, o + i + 1, (k->m - i) * sizeof *o);
        k->lay[k->cur][l].hash = beam_hash(o, k->m);
        int dup = 0;
        for (uint32_t q = 0; q < w && !dup; q++) dup = k->lay[k->cur][q].hash == k->lay[k->cur][l].hash;
        if (dup) continue;
        if (dst != o) memcpy(dst, o, k->m * sizeof *o);
        k->lay[k->cur][w++] = k->lay[k->cur][l];
    }
    k->n = w;
    c->work += (uint64_t)k->n * (k->m + 1);
}

/* The candidates of layout l for a block of size s: both ends of every gap below W. */
static uint32_t beam_candidates(ctx_t *c, beam_t *k, uint32_t l, uint64_t s, uint64_t W, uint32_t nc)
{
    const uint64_t *o = k->offs[k->cur] + (size_t)l * c->max_live;
    for (uint32_t j = 0; j < k->m; j++) k->ext[j] = (span_t){o[j], o[j] + c->asz[k->live[j]]};
    sort_spans(k->ext, k->m);
    uint64_t live_top = 0, top = 0, h = k->lay[k->cur][l].hash, peak = k->lay[k->cur][l].peak;
    for (uint32_t j = 0; j < k->m; j++) live_top = k->ext[j].end > live_top ? k->ext[j].end : live_top;
    k->ext[k->m] = (span_t){W, W};
    for (uint32_t j = 0; j <= k->m; j++) {
        if (k->ext[j].off >= top + s) {
            uint64_t ends[2] = {top, k->ext[j].off - s};
            for (int e = 0; e < 1 + (ends[1] != ends[0]); e++) {
                uint64_t end = ends[e] + s;
                k->cands[nc++] = (cand_t){end > live_top ? end : live_top, end > peak ? end : peak,
                                          h ^ mix(ends[e] * 0x100000001b3ull + k->m), ends[e], l};
            }
        }
        if (k->ext[j].end > top) top = k->ext[j].end;
    }
    c->work += (uint64_t)k->m * (ilog2(k->m) + 2);
    return nc;
}

/* Place block b in every layout; keep the best BEAM_WIDTH distinct ones. False: none can. */
static int beam_alloc(ctx_t *c, beam_t *k, uint32_t b, uint64_t W)
{
    uint32_t nc = 0;
    for (uint32_t l = 0; l < k->n; l++) nc = beam_candidates(c, k, l, c->asz[b], W, nc);
    sort_cands(k->cands, nc);
    c->work += (uint64_t)nc * (ilog2(nc) + 1);
    uint32_t nxt = k->cur ^ 1, n = 0;
    for (uint32_t i = 0; i < nc && n < BEAM_WIDTH; i++) {
        int dup = 0;
        for (uint32_t q = 0; q < n && !dup; q++) dup = k->lay[nxt][q].hash == k->cands[i].hash;
        if (dup) continue;
        const uint64_t *from = k->offs[k->cur] + (size_t)k->cands[i].from * c->max_live;
        uint64_t *to = k->offs[nxt] + (size_t)n * c->max_live;
        memcpy(to, from, k->m * sizeof *to);
        to[k->m] = k->cands[i].off;
        if (k->nchoices == k->cap_choices)
            k->choices = cgj_xrealloc(k->choices, (k->cap_choices *= 2) * sizeof *k->choices);
        k->choices[k->nchoices] = (choice_t){k->lay[k->cur][k->cands[i].from].choice, b, k->cands[i].off};
        k->lay[nxt][n++] = (layout_t){k->cands[i].peak, k->cands[i].hash, k->nchoices++};
        c->work += k->m + 1;
    }
    k->cur = nxt, k->n = n;
    k->live[k->m++] = b;
    return n > 0;
}

/* Plan with the beam under the cap W; UINT64_MAX where it fails or passes the limit. */
static uint64_t run_beam(ctx_t *c, uint64_t W)
{
    beam_t k = {0};
    size_t per = (size_t)BEAM_WIDTH * c->max_live;
    k.live = cgj_xmalloc(c->max_live * sizeof *k.live);
    k.offs[0] = cgj_xmalloc(per * sizeof *k.offs[0]), k.offs[1] = cgj_xmalloc(per * sizeof *k.offs[1]);
    k.lay[0] = cgj_xmalloc(BEAM_WIDTH * sizeof *k.lay[0]);
    k.lay[1] = cgj_xmalloc(BEAM_WIDTH * sizeof *k.lay[1]);
    k.cands = cgj_xmalloc(BEAM_WIDTH * 2 * (c->max_live + 1) * sizeof *k.cands);
    k.ext = cgj_xmalloc((c->max_live + 1) * sizeof *k.ext);
    k.cap_choices = 1024;
    k.choices = cgj_xmalloc(k.cap_choices * sizeof *k.choices);
    k.choices[0] = (choice_t){0, UINT32_MAX, 0}; /* the root */
    k.nchoices = 1, k.n = 1, k.lay[0][0] = (layout_t){0, 0, 0};
    int ok = 1;
    for (uint32_t t = 0; t < c->T && ok && c->work <= c->limit; t++) {
        for (uint32_t i = c->first_end[t]; i < c->first_end[t + 1]; i++) beam_free_block(c, &k, c->by_end[i]);
        for (uint32_t i = c->first_start[t]; i < c->first_start[t + 1] && ok; i++)
            ok = beam_alloc(c, &k, c->by_start[i], W);
    }
    uint64_t pool = UINT64_MAX;
    if (ok && c->work <= c->limit) { /* the lowest layout left: follow its choices back */
        uint32_t best = 0;
        for (uint32_t l = 1; l < k.n; l++)
            if (k.lay[k.cur][l].peak < k.lay[k.cur][best].peak) best = l;
        pool = k.lay[k.cur][best].peak;
        for (uint32_t ch = k.lay[k.cur][best].choice; ch != 0; ch = k.choices[ch].parent)
            c->off[k.choices[ch].block] = k.choices[ch].off;
    }
    cgj_free(k.live), cgj_free(k.offs[0]), cgj_free(k.offs[1]), cgj_free(k.lay[0]), cgj_free(k.lay[1]);
    cgj_free(k.cands), cgj_free(k.ext), cgj_free(k.choices);
    return pool;
}

/* The order of trying (see plan_search). */
enum { H_SIZE, H_ONLINE, H_BREADTH, H_EXTRAS };
static const struct heuristic {
    const char *name;
    order_kind_t kind;
    uint64_t seed; /* the skyline's choice rule; the jitter's seed */
    int first_fit;
} heuristics[] = {
    {"greedy-by-size", BY_SIZE, 0, 0},
    {"by-start-best-fit", ONLINE, 0, 0},
    {"greedy-by-breadth", BY_BREADTH, 0, 0},
    {"skyline-lifetime", SKYLINE, SKY_LIFETIME, 0},
    {"skyline-size", SKYLINE, SKY_SIZE, 0},
    {"skyline-area", SKYLINE, SKY_AREA, 0},
    {"by-area", BY_AREA, 0, 0},
    {"by-lifetime", BY_LIFETIME, 0, 0},
    {"by-start-first-fit", ONLINE, 0, 1},
    /* then the squeaky wheel, then jittered sizes with seeds 1, 2, ... */
};

static int good_enough(uint64_t pool, uint64_t lower)
{
    return (unsigned __int128)pool * TARGET_DEN <= (unsigned __int128)lower * TARGET_NUM;
}

typedef struct best { uint64_t *off, pool; const char *name; } best_t;

static void keep_if_better(const ctx_t *c, uint64_t pool, const char *name, best_t *best)
{
    if (pool >= best->pool) return;
    best->pool = pool;
    memcpy(best->off, c->off, c->n * sizeof *best->off);
    best->name = name;
}

/* Re-place the blocks of a plan by offset, lowest first, with first fit. This never raises a
 * block: the blocks placed before it lie at or below where they were, so its old slot is still
 * free; and it often lowers some, which may lower the top. */
static void compact(ctx_t *c, const uint64_t *offsets, const char *name, ord_t *order, best_t *best)
{
    if (best->pool == c->lower) return;
    order_keys(c, BY_OFFSET, 0, offsets, order);
    c->first_fit = 1;
    keep_if_better(c, run_order(c, order), name, best);
}

static void run_heuristic(ctx_t *c, const struct heuristic *h, ord_t *order, best_t *best)
{
    if (h->kind == SKYLINE) {
        keep_if_better(c, run_skyline(c, (sky_rule_t)h->seed), h->name, best);
        return;
    }
    if (h->kind == ONLINE) {
        keep_if_better(c, run_online(c, h->first_fit), h->name, best);
        return;
    }
    order_keys(c, h->kind, h->seed, NULL, order);
    c->first_fit = h->first_fit;
    keep_if_better(c, run_order(c, order), h->name, best);
}

/* Squeaky wheel: start from the sizes; after each pass, the blocks that ended above the lower
 * bound gain priority, so that the next pass places them earlier. */
static void run_squeaky(ctx_t *c, ord_t *order, best_t *best, int rounds)
{
    uint64_t *prio = cgj_xmalloc(c->n * sizeof *prio);
    for (uint32_t i = 0; i < c->n; i++) prio[i] = c->asz[i];
    for (int r = 0; r < rounds && !good_enough(best->pool, c->lower) && c->work < c->limit; r++) {
        order_keys(c, BY_PRIORITY, 0, prio, order);
        c->first_fit = 0;
        keep_if_better(c, run_order(c, order), "squeaky-wheel", best);
        for (uint32_t i = 0; i < c->n; i++)
            if (c->off[i] + c->asz[i] > c->lower) prio[i] += prio[i] / 2 + c->asz[i];
    }
    cgj_free(prio);
}

/* What greedy by size would cost in work units, about: each block scans the placed blocks
 * or sorts those that may overlap it, whichever is less, and half of them are placed. */
static uint64_t size_cost(const ctx_t *c)
{
    uint64_t sum = 0;
    for (uint32_t b = 0; b < c->n; b++) {
        uint64_t most = (uint64_t)c->live_count[c->st[b]] +
                        (c->first_start[c->en[b]] - c->first_start[c->st[b] + 1]);
        uint64_t sparse = most * (ilog2(most) + 1);
        sum += (sparse < c->n ? sparse : c->n) / 2;
    }
    return sum;
}

static int searching(const ctx_t *c, const best_t *best)
{
    return !good_enough(best->pool, c->lower) && c->work < c->limit;
}

static void run_extra(ctx_t *c, const struct heuristic *h, ord_t *order, best_t *best)
{
    run_heuristic(c, h, order, best);
    if (c->work < c->limit) compact(c, c->off, h->name, order, best);
}

/* The beam under the target cap first, then bisection: upwards, between caps out of its reach
 * and the best plan so far; or downwards, towards the lower bound, once it met the target.
 * Only where it is cheap enough. */
static void run_beams(ctx_t *c, best_t *best)
{
    if (c->max_live > BEAM_LIVE) return;
    uint64_t est = 0, lg = ilog2(c->max_live) + 3;
    for (uint32_t b = 0; b < c->n; b++) est += (uint64_t)BEAM_WIDTH * c->live_count[c->st[b]] * lg;
    if (c->work + est > c->limit) return;
    uint64_t align = CGJ_PLAN_ALIGN, lo = c->lower - align; /* no plan fits below the bound */
    uint64_t W = ((unsigned __int128)c->lower * TARGET_NUM / TARGET_DEN) & ~(align - 1);
    for (int tries = 0; tries < BEAM_TRIES && W > lo && W < best->pool && c->work < c->limit; tries++) {
        uint64_t pool = run_beam(c, W);
        keep_if_better(c, pool, "beam-search", best);
        if (pool == UINT64_MAX) lo = W;
        W = (lo + (best->pool - lo) / 2) & ~(align - 1);
    }
}

static void plan_search(ctx_t *c, ord_t *order, best_t *best)
{
    int many = c->n > MANY_BLOCKS;
    c->limit = many ? LARGE_BUDGET : UINT64_MAX;
    if (!many || size_cost(c) <= LARGE_BUDGET) run_heuristic(c, &heuristics[H_SIZE], order, best);
    c->limit = UINT64_MAX;
    if (best->pool == c->lower) return; /* optimal: no other plan can be smaller */
    run_heuristic(c, &heuristics[H_ONLINE], order, best);
    c->limit = many ? WORK_BUDGET : UINT64_MAX;
    if (best->pool == c->lower) return;
    run_heuristic(c, &heuristics[H_BREADTH], order, best);
    c->limit = WORK_BUDGET;
    for (size_t h = H_EXTRAS; h < CGJ_ARRAY_LEN(heuristics) && searching(c, best); h++)
        run_extra(c, &heuristics[h], order, best);
    if (searching(c, best)) run_squeaky(c, order, best, SQUEAKY_ROUNDS);
    if (searching(c, best)) run_beams(c, best);
    for (uint64_t seed = 1; seed <= MAX_JITTERS && searching(c, best); seed++) {
        struct heuristic jitter = {"jittered-size", BY_JITTER, seed, 0};
        run_extra(c, &jitter, order, best);
    }
    compact(c, best->off, best->name, order, best);
}

/* Plan blocks none of which overlaps all others (see cgj_plan). */
static void plan_rest(cgj_plan_block_t *blocks, size_t n, cgj_plan_result_t *out)
{
    ctx_t c;
    ctx_init(&c, blocks, n);
    out->lower_bound = c.lower;
    ord_t *order = cgj_xmalloc(n * sizeof *order);
    best_t best = {cgj_xmalloc(n * sizeof *best.off), UINT64_MAX, "none"};
    plan_search(&c, order, &best);
    for (size_t i = 0; i < n; i++) blocks[i].offset = best.off[i];
    out->pool_bytes = best.pool;
    out->heuristic = best.name;
    cgj_free(order);
    cgj_free(best.off);
    ctx_free(&c);
}

/* Does block b overlap every block of the step? min_end, max_start: over the blocks that do
 * not escape (an escaping block starts, for planning, before everything). */
static int overlaps_all(const cgj_plan_block_t *b, uint64_t min_end, uint64_t max_start)
{
    return b->end == CGJ_PLAN_ESCAPES || (b->start < min_end && b->end > max_start);
}

/*
 * A block that overlaps every other block (every escaping block does) gets bytes of its own in
 * any plan: such blocks are stacked at the bottom of the pool, in index order, and only the
 * others are planned, above them. Both the plan and the lower bound grow by the same amount,
 * and the searches no longer scan them for every other block.
 */
void cgj_plan(cgj_plan_block_t *blocks, size_t n, cgj_plan_result_t *out)
{
    memset(out, 0, sizeof *out);
    out->heuristic = "none";
    if (n == 0) return;
    uint64_t min_end = UINT64_MAX, max_start = 0, base = 0;
    for (size_t i = 0; i < n; i++) {
        CGJ_ASSERT(blocks[i].size <= MAX_BLOCK_BYTES, "cgj_plan: block larger than 2^44 bytes");
        CGJ_ASSERT(blocks[i].end == CGJ_PLAN_ESCAPES || blocks[i].end > blocks[i].start,
                   "cgj_plan: block with end <= start");
        out->naive_bytes += align_size(blocks[i].size);
        CGJ_ASSERT(out->naive_bytes < MAX_TOTAL_BYTES, "cgj_plan: sizes add up to 2^62 bytes or more");
        if (blocks[i].end == CGJ_PLAN_ESCAPES) continue;
        if (blocks[i].end < min_end) min_end = blocks[i].end;
        if (blocks[i].start > max_start) max_start = blocks[i].start;
    }
    cgj_plan_block_t *rest = cgj_xmalloc(n * sizeof *rest);
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!overlaps_all(&blocks[i], min_end, max_start)) {
            rest[nr++] = blocks[i];
            continue;
        }
        blocks[i].offset = base;
        base += align_size(blocks[i].size);
    }
    cgj_plan_result_t r = {0, 0, 0, "greedy-by-size"}; /* for blocks that all overlap: a stack */
    if (nr > 0) plan_rest(rest, nr, &r);
    for (size_t i = 0, j = 0; i < n; i++)
        if (!overlaps_all(&blocks[i], min_end, max_start)) blocks[i].offset = base + rest[j++].offset;
    out->pool_bytes = base + r.pool_bytes;
    out->lower_bound = base + r.lower_bound;
    out->heuristic = r.heuristic;
    cgj_free(rest);
}

/* ---- the text format ---- */

typedef struct id_slot {
    char *id;
    uint32_t block; /* the ID's latest block */
    int live;
    unsigned long line; /* of its latest allocation, or of its free when not live */
} id_slot_t;

typedef struct id_map { id_slot_t *slots; size_t cap, used; } id_map_t;

static id_slot_t *id_find(id_map_t *m, const char *id)
{
    if (2 * (m->used + 1) > m->cap) { /* grow: rehash into twice the slots */
        size_t cap = m->cap ? 2 * m->cap : 64;
        id_map_t g = {cgj_xcalloc(cap, sizeof *g.slots), cap, m->used};
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].id) continue;
            size_t h = cgj_hash_bytes(m->slots[i].id, strlen(m->slots[i].id), 0) & (g.cap - 1);
            while (g.slots[h].id) h = (h + 1) & (g.cap - 1);
            g.slots[h] = m->slots[i];
        }
        cgj_free(m->slots);
        *m = g;
    }
    size_t h = cgj_hash_bytes(id, strlen(id), 0) & (m->cap - 1);
    while (m->slots[h].id && strcmp(m->slots[h].id, id) != 0) h = (h + 1) & (m->cap - 1);
    return &m->slots[h]; /* id == NULL: not there; the caller may fill it in */
}

static void id_map_free(id_map_t *m)
{
    for (size_t i = 0; i < m->cap; i++) cgj_free(m->slots[i].id);
    cgj_free(m->slots);
}

/* BYTES: decimal digits only. Returns NULL or why not. */
static const char *parse_bytes(const char *s, uint64_t *out)
{
    if (*s == '-') {
        size_t d = strspn(s + 1, "0123456789");
        return d > 0 && s[1 + d] == '\0' ? "negative size" : "size is not a number";
    }
    if (*s == '\0' || s[strspn(s, "0123456789")] != '\0') return "size is not a number";
    uint64_t v = 0;
    for (; *s; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return "size overflows 64 bits";
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (v > MAX_BLOCK_BYTES) return "size above the limit of 2^44 bytes";
    *out = v;
    return NULL;
}

typedef struct parser {
    id_map_t ids;
    cgj_plan_block_t *blocks;
    size_t n, cap;
    uint32_t pos;     /* events so far */
    uint64_t total;   /* aligned bytes so far */
    unsigned long line;
    char why[192];
} parser_t;

/* Record why the line is bad; returns -1. */
__attribute__((format(printf, 2, 3))) static int fail(parser_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
    return -1;
}

/* Split a line (comment already cut) into up to max tokens; returns how many there were. */
static int tokenize(char *s, char **tok, int max)
{
    int k = 0;
    for (char *save = NULL, *t = strtok_r(s, " \t\r\n\v\f", &save); t;
         t = strtok_r(NULL, " \t\r\n\v\f", &save), k++)
        if (k < max) tok[k] = t;
    return k;
}

static int parse_alloc(parser_t *p, const char *id, const char *bytes)
{
    uint64_t size = 0;
    const char *why = parse_bytes(bytes, &size);
    if (why) return fail(p, "%s: '%s'", why, bytes);
    if (p->total + align_size(size) >= MAX_TOTAL_BYTES)
        return fail(p, "allocations add up to 2^62 bytes or more");
    id_slot_t *s = id_find(&p->ids, id);
    if (s->id && s->live)
        return fail(p, "'%s' allocated again while live (allocated on line %lu)", id, s->line);
    if (!s->id) s->id = cgj_xstrdup(id), p->ids.used++;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->blocks = cgj_xrealloc(p->blocks, p->cap * sizeof *p->blocks);
    }
    p->blocks[p->n] = (cgj_plan_block_t){size, p->pos, CGJ_PLAN_ESCAPES, 0};
    s->block = (uint32_t)p->n++;
    s->live = 1;
    s->line = p->line;
    p->total += align_size(size);
    return 0;
}

static int parse_free(parser_t *p, const char *id)
{
    id_slot_t *s = id_find(&p->ids, id);
    if (!s->id) return fail(p, "free of unknown ID '%s'", id);
    if (!s->live) return fail(p, "double free of '%s' (freed on line %lu)", id, s->line);
    p->blocks[s->block].end = p->pos;
    s->live = 0;
    s->line = p->line;
    return 0;
}

static int parse_line(parser_t *p, char *line)
{
    char *hash = strchr(line, '#'), *tok[3];
    if (hash) *hash = '\0';
    int k = tokenize(line, tok, 3);
    if (k == 0) return 0;
    if (p->pos == CGJ_PLAN_ESCAPES - 1) return fail(p, "too many events");
    int is_a = strcmp(tok[0], "a") == 0, is_f = strcmp(tok[0], "f") == 0, r;
    if (is_a && k == 3) r = parse_alloc(p, tok[1], tok[2]);
    else if (is_f && k == 2) r = parse_free(p, tok[1]);
    else if (is_a) return fail(p, "malformed allocation: expected 'a ID BYTES'");
    else if (is_f) return fail(p, "malformed free: expected 'f ID'");
    else return fail(p, "malformed line: expected 'a ID BYTES' or 'f ID', not '%s'", tok[0]);
    if (r == 0) p->pos++;
    return r;
}

/* The next line of f (its '\n' dropped) into *buf, grown as needed; false at the end of f. */
static int read_line(FILE *f, char **buf, size_t *cap)
{
    size_t len = 0;
    int ch;
    while ((ch = getc(f)) != EOF && ch != '\n') {
        if (len + 2 > *cap) *buf = cgj_xrealloc(*buf, *cap = *cap ? 2 * *cap : 256);
        (*buf)[len++] = (char)ch;
    }
    if (ch == EOF && len == 0) return 0;
    if (len + 1 > *cap) *buf = cgj_xrealloc(*buf, *cap = *cap ? 2 * *cap : 256);
    (*buf)[len] = '\0';
    return 1;
}

int cgj_plan_parse(FILE *f, const char *name, cgj_plan_block_t **blocks, size_t *n, char *err, size_t errlen)
{
    parser_t p;
    memset(&p, 0, sizeof p);
    char *line = NULL;
    size_t linecap = 0;
    int rc = 0;
    while (read_line(f, &line, &linecap)) {
        p.line++;
        if (parse_line(&p, line) != 0) {
            snprintf(err, errlen, "%s:%lu: %s", name, p.line, p.why);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s:%lu: read error: %s", name, p.line + 1, strerror(errno));
        rc = -1;
    }
    cgj_free(line);
    id_map_free(&p.ids);
    if (rc != 0 || p.n == 0) cgj_free(p.blocks), p.blocks = NULL, p.n = rc ? 0 : p.n;
    *blocks = p.blocks;
    *n = p.n;
    return rc;
}

typedef struct event { uint32_t pos, is_alloc, block; } event_t;

/* by position; at one position frees first; then by block */
#define EVENT_LESS(x, y)                                                                      \
    ((x).pos != (y).pos ? (x).pos < (y).pos                                                   \
     : (x).is_alloc != (y).is_alloc ? (x).is_alloc < (y).is_alloc : (x).block < (y).block)
DEFINE_SORT(sort_events, event_t, EVENT_LESS)

void cgj_plan_write(FILE *f, const cgj_plan_block_t *blocks, size_t n)
{
    event_t *ev = cgj_xmalloc(2 * n * sizeof *ev + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        ev[k++] = (event_t){blocks[i].start, 1, (uint32_t)i};
        if (blocks[i].end != CGJ_PLAN_ESCAPES) ev[k++] = (event_t){blocks[i].end, 0, (uint32_t)i};
    }
    sort_events(ev, k);
    fprintf(f, "# cgjit allocation trace: %zu blocks, %zu events\n", n, k);
    for (size_t i = 0; i < k; i++) {
        if (ev[i].is_alloc)
            fprintf(f, "a b%" PRIu32 " %" PRIu64 "\n", ev[i].block, blocks[ev[i].block].size);
        else
            fprintf(f, "f b%" PRIu32 "\n", ev[i].block);
    }
    cgj_free(ev);
}
