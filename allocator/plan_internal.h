/*
 * plan_internal.h — what the files of the memory planner share; the rest of cgjit sees only
 * allocator/plan.h.
 *
 * The planner is split by concern (calls go one way, down this list):
 *
 *     plan.c             cgj_plan: the blocks that overlap all others, the order of the
 *                        heuristics, budgets and targets, compaction, the kept plan
 *     plan_heuristics.c  the orders (sort keys), skyline best fit, online best/first fit and
 *                        the beam search: each fills ctx_t.off with one plan
 *     plan_place.c       the context of one plan_rest (ranks, lower bound, static indexes) and
 *                        greedy placement of the blocks in a given order
 *     plan_text.c        the text format of allocation traces (cgj_plan_parse, cgj_plan_write)
 *
 * The shared state of a search is ctx_t: the blocks in ranks, the indexes built once, and the
 * scratch of one run. Not thread-safe: one ctx_t per call of cgj_plan.
 */
#ifndef CGJ_PLAN_INTERNAL_H
#define CGJ_PLAN_INTERNAL_H

#include "allocator/plan.h"
#include "base/cgj_base.h"

#include <stddef.h>
#include <stdint.h>

#define MAX_BLOCK_BYTES (1ull << 44)
#define MAX_TOTAL_BYTES (1ull << 62)
/* Layouts kept by the beam search; it runs only where at most BEAM_LIVE blocks are live. */
#define BEAM_WIDTH 16
#define BEAM_LIVE 256
#define BEAM_TRIES 6

typedef struct span {
    uint64_t off, end;
} span_t; /* a block's bytes [off, end) */
typedef struct keyed {
    uint64_t off;
    uint32_t id;
} keyed_t; /* for sorting ids */
typedef struct ord {
    uint64_t k1, k2;
    uint32_t idx;
} ord_t;

typedef struct ctx {
    uint32_t n, T, leaves;
    uint64_t *asz;     /* aligned sizes */
    uint32_t *st, *en; /* lifetimes in ranks; escaping: [0, T) */
    uint64_t lower;
    /* static indexes over all blocks */
    uint32_t *node_base; /* segment tree, CSR: node i's slots [base[i], base[i+1]) */
    uint32_t *node_items, *node_fill;
    uint32_t *by_start, *first_start; /* blocks by start; first index with start >= t */
    uint32_t *by_end, *first_end;     /* blocks by end; first index with end >= t */
    uint32_t *live_count, max_live;   /* blocks live at t; at most */
    uint64_t *live_max;               /* segment tree of live bytes, for range maxima */
    /* one run */
    uint8_t *placed;
    uint64_t *off;
    span_t *cand;
    uint32_t *order;           /* placed blocks in placement order */
    uint32_t *sid, *sst, *sen; /* the first nsorted of them by offset, with their lifetimes */
    keyed_t *tail;             /* scratch for merging the others in */
    uint32_t *hits;            /* scratch: the overlapping ones */
    uint32_t nsorted, nplaced;
    uint64_t work, limit; /* work done (units: plan.c); a run past the limit is abandoned */
    int first_fit;        /* place into the lowest gap that fits, not the smallest */
} ctx_t;

/* The kinds of heuristic: the orders (sort keys for cgj_plan_run_order), then the others. */
typedef enum {
    BY_SIZE,
    BY_BREADTH,
    BY_LIFETIME,
    BY_AREA,
    BY_JITTER,
    BY_OFFSET,
    BY_PRIORITY, /* orders */
    SKYLINE,
    ONLINE /* not orders */
} order_kind_t;

/* Which block goes into the lowest stretch of the skyline: of those whose lifetime lies within
 * it, the longest-lived, the largest, or the largest in area (the other key breaks ties). */
typedef enum { SKY_LIFETIME, SKY_SIZE, SKY_AREA } sky_rule_t;

static inline uint64_t align_size(uint64_t size)
{
    if (size == 0) return CGJ_PLAN_ALIGN;
    return (size + CGJ_PLAN_ALIGN - 1) & ~(uint64_t)(CGJ_PLAN_ALIGN - 1);
}

static inline uint32_t ilog2(uint64_t x)
{
    return x ? 63u - (uint32_t)__builtin_clzll(x) : 0;
}

/* Work units of sorting n items with DEFINE_SORT: about 1.4 n log2 n comparisons, each worth
 * about two units (a comparison of several keys, a swap), and the rest. */
static inline uint64_t sort_work(uint64_t n)
{
    return 3 * n * (ilog2(n) + 1);
}

/* The segment tree's canonical nodes of [s, e), at most two per level; returns how many. */
static inline uint32_t cover(uint32_t leaves, uint32_t s, uint32_t e, uint32_t nodes[64])
{
    uint32_t k = 0;
    for (uint32_t l = s + leaves, r = e + leaves; l < r; l >>= 1, r >>= 1) {
        if (l & 1) nodes[k++] = l++;
        if (r & 1) nodes[k++] = --r;
    }
    return k;
}

/* ---- sorting: a quicksort per element type, with LESS(x, y) inlined; no qsort, whose
 * indirect calls cost too much here and whose buffers would come from the program's heap.
 * DEFINE_SORT(name, T, LESS) defines `static void name(T *v, size_t n)` in the file that
 * uses it. ---- */

#define SWAP(T, a, b) \
    do {              \
        T t_ = (a);   \
        (a) = (b);    \
        (b) = t_;     \
    } while (0)
#define DEFINE_SORT(name, T, LESS)                                       \
    static void name(T *v, size_t n)                                     \
    {                                                                    \
        while (n > 16) {                                                 \
            size_t m = n / 2, i = 0, j = n - 1;                          \
            if (LESS(v[m], v[0])) SWAP(T, v[m], v[0]);                   \
            if (LESS(v[n - 1], v[0])) SWAP(T, v[n - 1], v[0]);           \
            if (LESS(v[n - 1], v[m])) SWAP(T, v[n - 1], v[m]);           \
            T p = v[m];                                                  \
            for (;;) {                                                   \
                while (LESS(v[i], p)) i++;                               \
                while (LESS(p, v[j])) j--;                               \
                if (i >= j) break;                                       \
                SWAP(T, v[i], v[j]);                                     \
                i++, j--;                                                \
            }                                                            \
            /* [0, j] <= p <= [j+1, n): recurse into the smaller side */ \
            if (j + 1 < n - j - 1) {                                     \
                name(v, j + 1);                                          \
                v += j + 1;                                              \
                n -= j + 1;                                              \
            } else {                                                     \
                name(v + j + 1, n - j - 1);                              \
                n = j + 1;                                               \
            }                                                            \
        }                                                                \
        for (size_t i = 1; i < n; i++) {                                 \
            T x = v[i];                                                  \
            size_t j = i;                                                \
            for (; j > 0 && LESS(x, v[j - 1]); j--) v[j] = v[j - 1];     \
            v[j] = x;                                                    \
        }                                                                \
    }
#define OFF_LESS(x, y) ((x).off < (y).off)

/* ---- plan_place.c ---- */

/* Ranks, aligned sizes, the lower bound and the static indexes of blocks[0..n), none of which
 * overlaps all others (checked by cgj_plan); and the scratch of one run. */
void cgj_plan_ctx_init(ctx_t *c, const cgj_plan_block_t *b, size_t n);
void cgj_plan_ctx_free(ctx_t *c);
/* Place all blocks in the given order (best fit, or first fit with c->first_fit) into c->off;
 * returns the pool size, or UINT64_MAX when the run passed c->limit. */
uint64_t cgj_plan_run_order(ctx_t *c, const ord_t *order);

/* ---- plan_heuristics.c: each leaves its plan in c->off ---- */

/* The order of a heuristic into o[0..n): sort keys (k1, then k2, descending), sorted. prev: the
 * offsets of a plan (BY_OFFSET) or priorities (BY_PRIORITY); seed: BY_JITTER's. */
void cgj_plan_order_keys(ctx_t *c, order_kind_t kind, uint64_t seed, const uint64_t *prev, ord_t *o);
/* Skyline best fit; returns the pool, or UINT64_MAX past c->limit. */
uint64_t cgj_plan_run_skyline(ctx_t *c, sky_rule_t rule);
/* By start with best fit (first fit with first_fit), as an allocator; returns the pool, or
 * UINT64_MAX past c->limit. */
uint64_t cgj_plan_run_online(ctx_t *c, int first_fit);
/* The beam search under the cap W; UINT64_MAX where it fails or passes c->limit. */
uint64_t cgj_plan_run_beam(ctx_t *c, uint64_t W);

#endif /* CGJ_PLAN_INTERNAL_H */
