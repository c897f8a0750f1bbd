/*
 * plan.h — the memory planner: offsets in one static pool for the allocations of a step.
 *
 * The first run of a step records, for every in-step allocation, its size and its lifetime (the
 * positions of its alloc and free among the step's events). cgj_plan then gives each block an
 * offset in one pool such that two blocks whose lifetimes overlap never overlap in memory, and
 * tries to keep the pool close to the lower bound: the largest total of bytes live at one time.
 *
 * Conventions shared by the planner, the text format and the three figures:
 * - Sizes are rounded up to CGJ_PLAN_ALIGN before anything else: the pool, the naive total and
 *   the lower bound are all sums of aligned sizes, so they can be compared with one another.
 *   A zero-size block counts as CGJ_PLAN_ALIGN bytes, so that every block has an address of
 *   its own (as cuMemAlloc would give it).
 * - Lifetimes are half-open: a block is live over positions [start, end), end > start. A block
 *   freed at position p and one allocated at p do not overlap. Positions need not be dense.
 * - An escaping block (end == CGJ_PLAN_ESCAPES: never freed in the step) is treated as live over
 *   the whole step, not only from its start: its slot is never shared with any other block of
 *   the step (docs/design.md, Memory), because the program may still hold it when the next replay
 *   starts writing the step's first temporaries. Its `start` is kept, but does not matter to the
 *   plan. The lower bound counts it as live at every position too.
 */
#ifndef CGJ_PLAN_H
#define CGJ_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CGJ_PLAN_ALIGN 256
#define CGJ_PLAN_ESCAPES UINT32_MAX

/* The size class of an allocation of `bytes`: the bytes its block is planned with. A step whose
 * allocation sizes vary within their classes keeps its plan (docs/design.md, Memory). Classes are
 * four per power of two (at most 25% over), at least CGJ_PLAN_ALIGN. */
static inline uint64_t cgj_plan_size_class(uint64_t bytes)
{
    if (bytes <= 4 * CGJ_PLAN_ALIGN)
        return bytes <= CGJ_PLAN_ALIGN ? CGJ_PLAN_ALIGN
                                       : (bytes + CGJ_PLAN_ALIGN - 1) / CGJ_PLAN_ALIGN * CGJ_PLAN_ALIGN;
    uint64_t step = 1ull << (63 - __builtin_clzll(bytes) - 2);
    return (bytes + step - 1) / step * step;
}

typedef struct cgj_plan_block {
    uint64_t size;       /* bytes asked for */
    uint32_t start, end; /* live over event positions [start, end); end == CGJ_PLAN_ESCAPES: never freed in the step
                            (escapes: live to the end and beyond) */
    uint64_t offset;     /* out: offset in the pool, a multiple of CGJ_PLAN_ALIGN */
} cgj_plan_block_t;

typedef struct cgj_plan_result {
    uint64_t pool_bytes;   /* planned pool size: max(offset + aligned size) */
    uint64_t naive_bytes;  /* sum of aligned sizes */
    uint64_t lower_bound;  /* largest total of aligned sizes live at one time */
    const char *heuristic; /* which heuristic gave the kept plan */
    uint64_t work;         /* work units the planner spent (see cgj_plan_work_limit) */
} cgj_plan_result_t;

/*
 * The planner's budget, in work units: a block visited, compared or moved (about 2 ns each on
 * a current x86-64 core at -O2; 1 to 6 ns by heuristic and trace). Every search of cgj_plan
 * stops at cgj_plan_work_budget(n) units, counted, not timed: so its time is bounded by the
 * input's size, and its result depends on the input only. The budget is about 0.1 s for a
 * trace of up to a few thousand blocks, 0.2 s for 10,000, 1 s for 100,000.
 */
#define CGJ_PLAN_WORK_BASE 60000000ull
#define CGJ_PLAN_WORK_PER_BLOCK 4000ull
static inline uint64_t cgj_plan_work_budget(uint64_t n)
{
    return CGJ_PLAN_WORK_BASE + CGJ_PLAN_WORK_PER_BLOCK * n;
}
/* The most work any cgj_plan of n blocks reports (cgj_plan_result_t.work): the budget, plus the
 * step in progress when it ran out (one placement or one sort of the blocks, one step of the
 * beam search) and the plan of last resort. */
static inline uint64_t cgj_plan_work_limit(uint64_t n)
{
    uint64_t lg = n ? 64 - (uint64_t)__builtin_clzll(n) : 1;
    return cgj_plan_work_budget(n) + 32 * n * (lg + 2) + 2000000;
}

/*
 * Plan offsets so that two blocks whose lifetimes overlap never overlap in memory.
 *
 * Every block needs end > start (or end == CGJ_PLAN_ESCAPES) and size <= 2^44; the aligned sizes
 * must add up to less than 2^62 (else: a broken invariant, abort). Several heuristics run and
 * the smallest pool is kept (plan.c lists them): greedy by size (where its estimated cost
 * leaves room for the next), by start with best fit (the plan every trace gets) and greedy by
 * breadth, then others while the best plan is more than 10% above the lower bound; all of them
 * within one budget of work (cgj_plan_work_budget above), each abandoned where it passes it.
 * Where even by start with best fit (O(n x live blocks)) passes it, which no trace of a real
 * program does, every block gets bytes of its own. The result depends on the input only (no
 * clocks, no randomness from outside). n == 0 gives zeros and heuristic "none". Work: at most
 * cgj_plan_work_limit(n), reported in out->work. Memory: O(n log n).
 */
void cgj_plan(cgj_plan_block_t *blocks, size_t n, cgj_plan_result_t *out);

/*
 * The text format of an allocation trace, one event per line, in step order:
 *     a ID BYTES      an allocation (ID: any token without spaces; BYTES: decimal, <= 2^44)
 *     f ID            its free
 * Blank lines and `#` comments (whole-line or trailing) are ignored. An event's position is the
 * index of its line among the event lines, from 0. An ID may be allocated again after its free
 * (a new block); a block never freed escapes. Errors: a malformed line, a free of an ID that is
 * not allocated, a double free, an allocation of an ID that is live, a bad BYTES.
 */

/* Parse the text format from f (name is used in messages). On success returns 0 and *blocks
 * (from cgj_xmalloc: release it with cgj_free; NULL when *n == 0) holds the blocks in the order
 * of their allocations. On error returns -1, *blocks = NULL, *n = 0, and writes
 * "NAME:LINE: message" into err. */
int cgj_plan_parse(FILE *f, const char *name, cgj_plan_block_t **blocks, size_t *n, char *err, size_t errlen);

/* Write blocks as the text format (events in position order; at one position frees come before
 * allocations; block i is named "bI"). Positions are renumbered densely, so parsing the output
 * gives back the same blocks when their positions were dense to begin with. */
void cgj_plan_write(FILE *f, const cgj_plan_block_t *blocks, size_t n);

#endif /* CGJ_PLAN_H */
