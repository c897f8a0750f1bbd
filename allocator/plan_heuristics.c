/*
 * plan_heuristics.c — the heuristics of the memory planner, each of which gives one plan in
 * ctx_t.off: the orders (sort keys that plan.c runs through cgj_plan_run_order), skyline best
 * fit, online best/first fit (a free-list allocator over the events) and the beam search under
 * a cap. plan.c decides which of them run, in which order and within which budget; this file
 * only knows how each one builds its plan.
 */
#include "allocator/plan_internal.h"

#include <string.h>

/* descending k1, then descending k2, then ascending index: a total order */
#define ORD_LESS(x, y) ((x).k1 != (y).k1 ? (x).k1 > (y).k1 : (x).k2 != (y).k2 ? (x).k2 > (y).k2 : (x).idx < (y).idx)
DEFINE_SORT(sort_spans, span_t, OFF_LESS)
DEFINE_SORT(sort_ord, ord_t, ORD_LESS)

/* ---- the orders: each fills the sort keys (k1, then k2, descending) ---- */

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

void cgj_plan_order_keys(ctx_t *c, order_kind_t kind, uint64_t seed, const uint64_t *prev, ord_t *o)
{
    c->work += (uint64_t)c->n * (kind == BY_BREADTH ? 2 * ilog2(c->leaves) + 2 : 2) + sort_work(c->n);
    for (uint32_t i = 0; i < c->n; i++) {
        uint64_t a = c->asz[i], len = c->en[i] - c->st[i];
        o[i].idx = i;
        o[i].k2 = a;
        switch (kind) {
        case BY_SIZE:
            o[i].k1 = a;
            o[i].k2 = len;
            break;
        case BY_BREADTH: o[i].k1 = range_max(c, c->st[i], c->en[i]); break;
        case BY_LIFETIME: o[i].k1 = len; break;
        case BY_AREA: o[i].k1 = (a / CGJ_PLAN_ALIGN) * len; break;
        case BY_JITTER: /* the size, scaled by a factor in [1/2, 1): nearby sizes swap */
            o[i].k1 = (a >> 1) + (uint64_t)(((unsigned __int128)(a >> 1) * (mix(seed ^ i) >> 32)) >> 32);
            break;
        case BY_OFFSET: o[i].k1 = UINT64_MAX - prev[i]; break;
        case BY_PRIORITY: o[i].k1 = prev[i]; break;
        case SKYLINE:
        case ONLINE: break;
        }
    }
    sort_ord(o, c->n);
}

/* ---- skyline best fit: a different kind of heuristic, not an order ---- */

/* The skyline is the height of the placed blocks at each position, as segments [a[i], a[i+1])
 * at height h[i] (the last one ends at T); neighbours always differ in height. */
typedef struct skyline {
    uint32_t *a;
    uint64_t *h;
    uint32_t n;
} skyline_t;

static void sky_merge(skyline_t *k)
{
    uint32_t w = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        if (w > 0 && k->h[w - 1] == k->h[i]) continue;
        k->a[w] = k->a[i], k->h[w] = k->h[i], w++;
    }
    k->n = w;
}

/* Put [s, e) of segment i (which covers it) at height h. This and sky_merge move and scan the
 * whole skyline: k.n work units, which the caller counts. */
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

uint64_t cgj_plan_run_skyline(ctx_t *c, sky_rule_t rule)
{
    skyline_t k = {cgj_xmalloc((2 * (size_t)c->n + 2) * sizeof *k.a), cgj_xmalloc((2 * (size_t)c->n + 2) * sizeof *k.h),
                   1};
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
        c->work += 2 * (uint64_t)k.n; /* this scan, then a raise or a merge */
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
typedef struct freelist {
    span_t *v;
    uint32_t n;
    int first_fit;
    uint64_t top, pool;
} freelist_t;

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
    *work += 2 + i / 2 + f->n / 8; /* the scan (a tight loop), a move */
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

static void fl_give(freelist_t *f, uint64_t off, uint64_t end, uint64_t *work)
{
    uint32_t lo = 0, hi = f->n;
    *work += 2 + ilog2(f->n) + f->n / 8; /* the search, a move */
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

uint64_t cgj_plan_run_online(ctx_t *c, int first_fit)
{
    freelist_t f = {cgj_xmalloc((c->n + 1) * sizeof *f.v), 0, first_fit, 0, 0};
    c->work += c->T;
    for (uint32_t t = 0; t < c->T && f.pool != UINT64_MAX; t++) {
        /* frees first; every event checks the limit (many may share a position) */
        for (uint32_t i = c->first_end[t]; i < c->first_end[t + 1] && f.pool != UINT64_MAX; i++) {
            uint32_t b = c->by_end[i];
            if (c->work > c->limit) f.pool = UINT64_MAX;
            else fl_give(&f, c->off[b], c->off[b] + c->asz[b], &c->work);
        }
        for (uint32_t i = c->first_start[t]; i < c->first_start[t + 1] && f.pool != UINT64_MAX; i++) {
            if (c->work > c->limit) f.pool = UINT64_MAX;
            else c->off[c->by_start[i]] = fl_take(&f, c->asz[c->by_start[i]], &c->work);
        }
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
typedef struct choice {
    uint32_t parent, block;
    uint64_t off;
} choice_t;
typedef struct layout {
    uint64_t peak, hash;
    uint32_t choice;
} layout_t;
/* a placement: its layout's top (of the live blocks) and peak (of all) after it */
typedef struct cand {
    uint64_t top, peak, hash, off;
    uint32_t from;
} cand_t;
#define CAND_LESS(x, y) ((x).top != (y).top ? (x).top < (y).top : (x).hash < (y).hash)
DEFINE_SORT(sort_cands, cand_t, CAND_LESS)

typedef struct beam {
    uint32_t *live, m; /* the live blocks, in allocation order */
    uint64_t *offs[2]; /* layout i's offsets: offs[cur][i * max_live + j] */
    layout_t *lay[2];
    uint32_t n, cur; /* layouts */
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
uint64_t cgj_plan_run_beam(ctx_t *c, uint64_t W)
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
        for (uint32_t i = c->first_start[t]; i < c->first_start[t + 1] && ok && c->work <= c->limit; i++)
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
