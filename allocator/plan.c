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
 * These three come first. While the best plan is more than 10% above the lower bound, others
 * follow: skyline best fit (Burke et al.'s strip packing heuristic, as Sekiyama et al. apply it
 * to DNN memory: fill the lowest stretch of the skyline with the block that fits it best),
 * orders by area, by lifetime, by start with first fit, a squeaky wheel (blocks that ended above
 * the bound go earlier next time), a beam search under a cap (the one with lookahead: some
 * narrow traces need it), then sizes with random jitter. The orders are followed by a
 * compaction: re-placing the blocks by offset with first fit, which never raises one.
 *
 * Every search stops at the lower bound, and all of them together at one budget of work units
 * (plan.h: a block visited, compared or moved, about 2 ns each; counted where the work is done,
 * sorts and moves included), so that the result depends on the input only and the time is
 * bounded by the input's size in every case: a search that passes the budget is abandoned.
 * Greedy by size runs only where its estimated cost leaves room for by start with best fit,
 * whose cost is bounded beforehand (O(n x live blocks)) and which gives every trace a plan; a
 * trace for which even that passes the budget gets the stack (bytes of its own for every block).
 *
 * Blocks that overlap every other block (escaping ones always do) are stacked at the bottom
 * first: they get bytes of their own in any plan, so the search need not see them.
 *
 * This file is the entry point and the search: which heuristics run, in which order, within
 * which budget, and which plan is kept. How each heuristic builds its plan is in
 * plan_heuristics.c, greedy placement in an order in plan_place.c, the text format of traces
 * in plan_text.c (plan_internal.h lists them).
 */
#include "allocator/plan_internal.h"

#include <string.h>

/* Jittered orders, each with its own seed, until the target or the budget is reached. */
#define MAX_JITTERS 1000000
/* Passes of the squeaky wheel, before the jittered orders. */
#define SQUEAKY_ROUNDS 50
/* The target of the extra heuristics: pool <= lower * TARGET_NUM / TARGET_DEN. */
#define TARGET_NUM 110
#define TARGET_DEN 100

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

typedef struct best {
    uint64_t *off, pool;
    const char *name;
} best_t;

static void keep_if_better(ctx_t *c, uint64_t pool, const char *name, best_t *best)
{
    if (pool >= best->pool) return;
    c->work += c->n / 4;
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
    cgj_plan_order_keys(c, BY_OFFSET, 0, offsets, order);
    c->first_fit = 1;
    keep_if_better(c, cgj_plan_run_order(c, order), name, best);
}

static void run_heuristic(ctx_t *c, const struct heuristic *h, ord_t *order, best_t *best)
{
    if (h->kind == SKYLINE) {
        keep_if_better(c, cgj_plan_run_skyline(c, (sky_rule_t)h->seed), h->name, best);
        return;
    }
    if (h->kind == ONLINE) {
        keep_if_better(c, cgj_plan_run_online(c, h->first_fit), h->name, best);
        return;
    }
    cgj_plan_order_keys(c, h->kind, h->seed, NULL, order);
    c->first_fit = h->first_fit;
    keep_if_better(c, cgj_plan_run_order(c, order), h->name, best);
}

/* Squeaky wheel: start from the sizes; after each pass, the blocks that ended above the lower
 * bound gain priority, so that the next pass places them earlier. */
static void run_squeaky(ctx_t *c, ord_t *order, best_t *best, int rounds)
{
    uint64_t *prio = cgj_xmalloc(c->n * sizeof *prio);
    for (uint32_t i = 0; i < c->n; i++) prio[i] = c->asz[i];
    for (int r = 0; r < rounds && !good_enough(best->pool, c->lower) && c->work < c->limit; r++) {
        cgj_plan_order_keys(c, BY_PRIORITY, 0, prio, order);
        c->first_fit = 0;
        keep_if_better(c, cgj_plan_run_order(c, order), "squeaky-wheel", best);
        c->work += c->n;
        for (uint32_t i = 0; i < c->n; i++)
            if (c->off[i] + c->asz[i] > c->lower) prio[i] += prio[i] / 2 + c->asz[i];
    }
    cgj_free(prio);
}

/* What greedy by size would cost in work units, about: each block scans the placed blocks
 * or sorts those that may overlap it, whichever is less, and half of them are placed. */
static uint64_t size_cost(ctx_t *c)
{
    uint64_t sum = 0;
    c->work += c->n;
    for (uint32_t b = 0; b < c->n; b++) {
        uint64_t most = (uint64_t)c->live_count[c->st[b]] + (c->first_start[c->en[b]] - c->first_start[c->st[b] + 1]);
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
    c->work += c->n;
    for (uint32_t b = 0; b < c->n; b++) est += (uint64_t)BEAM_WIDTH * c->live_count[c->st[b]] * lg;
    if (c->work + est > c->limit) return;
    uint64_t align = CGJ_PLAN_ALIGN, lo = c->lower - align; /* no plan fits below the bound */
    uint64_t W = ((unsigned __int128)c->lower * TARGET_NUM / TARGET_DEN) & ~(align - 1);
    for (int tries = 0; tries < BEAM_TRIES && W > lo && W < best->pool && c->work < c->limit; tries++) {
        uint64_t pool = cgj_plan_run_beam(c, W);
        keep_if_better(c, pool, "beam-search", best);
        if (pool == UINT64_MAX) lo = W;
        W = (lo + (best->pool - lo) / 2) & ~(align - 1);
    }
}

/* What by start with best fit costs, about: each allocation scans and moves the free list, and
 * each free moves it; it has fewer extents than there are blocks live (each extent lies below
 * a live block). */
static uint64_t online_cost(ctx_t *c)
{
    uint64_t sum = c->T;
    c->work += c->n;
    for (uint32_t b = 0; b < c->n; b++) sum += 5 + ilog2(c->n) + (uint64_t)c->live_count[c->st[b]] * 3 / 4;
    return sum;
}

/* The plan of last resort, where not even by start with best fit fits the budget: every block
 * gets bytes of its own (the naive pool). Never met by a trace of a real program. */
static void run_stack(ctx_t *c, best_t *best)
{
    uint64_t top = 0;
    for (uint32_t b = 0; b < c->n; b++) c->off[b] = top, top += c->asz[b];
    c->work += c->n;
    keep_if_better(c, top, "stack", best);
}

/*
 * The order of trying, all within one budget of work (c->limit, set by plan_rest):
 * greedy by size, unless its estimated cost would leave too little for the next one; by start
 * with best fit, the plan every trace gets (it costs O(n * live blocks), within the budget for
 * any trace of a real program; past it, the stack); greedy by breadth; then, while the best
 * plan is above the target, the others. Each stops at the budget, its plan abandoned.
 */
static void plan_search(ctx_t *c, ord_t *order, best_t *best)
{
    uint64_t budget = c->limit, online = online_cost(c);
    uint64_t room = budget > c->work + online ? budget - c->work - online : 0; /* left for the first */
    c->limit = c->work + room;
    if (size_cost(c) <= room) run_heuristic(c, &heuristics[H_SIZE], order, best);
    c->limit = budget;
    if (best->pool == c->lower) return; /* optimal: no other plan can be smaller */
    run_heuristic(c, &heuristics[H_ONLINE], order, best);
    if (best->pool == UINT64_MAX) run_stack(c, best);
    if (best->pool == c->lower) return;
    run_heuristic(c, &heuristics[H_BREADTH], order, best);
    for (size_t h = H_EXTRAS; h < CGJ_ARRAY_LEN(heuristics) && searching(c, best); h++)
        run_extra(c, &heuristics[h], order, best);
    if (searching(c, best)) run_squeaky(c, order, best, SQUEAKY_ROUNDS);
    if (searching(c, best)) run_beams(c, best);
    for (uint64_t seed = 1; seed <= MAX_JITTERS && searching(c, best); seed++) {
        struct heuristic jitter = {"jittered-size", BY_JITTER, seed, 0};
        run_extra(c, &jitter, order, best);
    }
    if (c->work < c->limit) compact(c, best->off, best->name, order, best);
}

/* Plan blocks none of which overlaps all others (see cgj_plan). */
static void plan_rest(cgj_plan_block_t *blocks, size_t n, cgj_plan_result_t *out)
{
    ctx_t c;
    cgj_plan_ctx_init(&c, blocks, n);
    c.limit = cgj_plan_work_budget(n);
    out->lower_bound = c.lower;
    ord_t *order = cgj_xmalloc(n * sizeof *order);
    best_t best = {cgj_xmalloc(n * sizeof *best.off), UINT64_MAX, "none"};
    plan_search(&c, order, &best);
    for (size_t i = 0; i < n; i++) blocks[i].offset = best.off[i];
    out->pool_bytes = best.pool;
    out->heuristic = best.name;
    out->work = c.work;
    cgj_free(order);
    cgj_free(best.off);
    cgj_plan_ctx_free(&c);
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
    cgj_plan_result_t r = {0, 0, 0, "greedy-by-size", 0}; /* for blocks that all overlap: a stack */
    if (nr > 0) plan_rest(rest, nr, &r);
    for (size_t i = 0, j = 0; i < n; i++)
        if (!overlaps_all(&blocks[i], min_end, max_start)) blocks[i].offset = base + rest[j++].offset;
    out->pool_bytes = base + r.pool_bytes;
    out->lower_bound = base + r.lower_bound;
    out->heuristic = r.heuristic;
    out->work = r.work + 2 * (uint64_t)n; /* and these passes over the blocks */
    cgj_free(rest);
}
