/*
 * plan_place.c — greedy placement for the memory planner: the context of a search (ranks, lower
 * bound, static indexes) and placing the blocks one by one in a given order. Every order that
 * plan.c tries (the greedy heuristics, the squeaky wheel, the jittered sizes, the compactions)
 * runs through cgj_plan_run_order, so most of the planner's time is spent here; it is kept
 * apart from which orders are tried and why.
 *
 * Positions are compressed to ranks 0..T-1 first (lifetimes are compared only with < and >, so
 * ranks keep every overlap). An escaping block is live over [0, T): its slot is never shared.
 *
 * Placing one block needs the placed blocks that overlap its lifetime [s, e), by offset. They
 * are found in one of two ways, whichever is cheaper for this block (the plan is the same):
 * - sparse: a segment tree over positions holds each placed block at the O(log T) nodes that
 *   cover its lifetime, so the placed blocks live at s are those on the path from leaf s to the
 *   root; the ones that start inside (s, e) are a contiguous run of the blocks sorted by start.
 *   The k blocks found are sorted by offset: O(k log k).
 * - dense: one pass over all placed blocks kept sorted by offset, skipping those that do not
 *   overlap: O(placed). Blocks placed in sparse mode are merged in lazily.
 * So a block costs O(min(k log k, n)), and an order O(n^2) at worst.
 */
#include "allocator/plan_internal.h"

#include <string.h>

#define U32_LESS(x, y) ((x) < (y))
DEFINE_SORT(sort_spans, span_t, OFF_LESS)
DEFINE_SORT(sort_keyed, keyed_t, OFF_LESS)
DEFINE_SORT(sort_u32, uint32_t, U32_LESS)

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
        c->live_max[i] = c->live_max[2 * i] > c->live_max[2 * i + 1] ? c->live_max[2 * i] : c->live_max[2 * i + 1];
    for (uint32_t t = 0; t < T; t++) c->first_start[t + 1] += c->first_start[t];
    uint32_t *fill = cgj_xcalloc(T + 1, sizeof *fill);
    for (uint32_t i = 0; i < c->n; i++) c->by_start[c->first_start[c->st[i]] + fill[c->st[i]]++] = i;
    memset(fill, 0, (T + 1) * sizeof *fill);
    for (uint32_t i = 0; i < c->n; i++) c->first_end[c->en[i] + 1]++;
    for (uint32_t t = 0; t <= T; t++) c->first_end[t + 1] += c->first_end[t];
    for (uint32_t i = 0; i < c->n; i++) c->by_end[c->first_end[c->en[i]] + fill[c->en[i]]++] = i;
    cgj_free(fill);
    cgj_free(dbytes);
    cgj_free(dcount);
}

/* Lay out the segment tree's slots: each block gets one at every node that covers it. */
static void ctx_tree(ctx_t *c)
{
    uint32_t nodes = 2 * c->leaves;
    c->node_base = cgj_xcalloc(nodes + 1, sizeof *c->node_base);
    c->node_fill = cgj_xcalloc(nodes, sizeof *c->node_fill);
    uint32_t cov[64];
    for (uint32_t i = 0; i < c->n; i++)
        for (uint32_t k = cover(c->leaves, c->st[i], c->en[i], cov), j = 0; j < k; j++) c->node_base[cov[j] + 1]++;
    for (uint32_t i = 0; i < nodes; i++) c->node_base[i + 1] += c->node_base[i];
    c->node_items = cgj_xmalloc((size_t)c->node_base[nodes] * sizeof *c->node_items + 1);
}

void cgj_plan_ctx_init(ctx_t *c, const cgj_plan_block_t *b, size_t n)
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
    /* what this cost: sorting the positions, the profile, the trees, the scratch */
    c->work = sort_work(2 * (uint64_t)n) + 4 * (uint64_t)n + c->T + 2 * (uint64_t)c->leaves +
              c->node_base[2 * c->leaves];
}

void cgj_plan_ctx_free(ctx_t *c)
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
typedef struct fit {
    uint64_t top, best_gap, best_off;
    int first;
} fit_t;

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
    c->work += ilog2(c->leaves) + 1 + (c->first_start[e] - c->first_start[s + 1]); /* the walks */
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
    c->work += sort_work(k) + k;
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
    /* the sort, then a move of up to ns entries of three arrays per insert, or one merge */
    c->work += sort_work(nt) + (nt <= 4 ? nt * (ilog2(ns) + 1 + ns / 4) : 2 * ((uint64_t)ns + nt));
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
            else j--, c->sid[k] = c->tail[j].id, c->sst[k] = c->st[c->sid[k]], c->sen[k] = c->en[c->sid[k]];
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
    c->work += k;
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

/* Place all blocks in the given order; returns the pool size, or UINT64_MAX past c->limit. */
uint64_t cgj_plan_run_order(ctx_t *c, const ord_t *order)
{
    memset(c->placed, 0, c->n);
    memset(c->node_fill, 0, 2 * (size_t)c->leaves * sizeof *c->node_fill);
    c->work += c->n + c->leaves; /* these (the order's sort is counted where it is made) */
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
