/*
 * blocks.c — the in-step allocations of a recording: where each lies and when it lives.
 *
 * Lookups are by range (an address anywhere inside a block, at a given op), so they go through
 * an index sorted by base address rather than a hash map: a binary search finds the last block
 * starting at or below the address, and the scan goes down while a block that starts there
 * could still reach the address (the largest block bounds it). Blocks of one step may occupy
 * the same addresses at different times (the driver reuses freed memory); the op index tells
 * them apart.
 */
#include "ir/ir.h"
#include "base/vec.h"

#include <stdlib.h>

static __thread const cgj_block_t *sort_blocks; /* qsort has no context argument */

static int by_base(const void *x, const void *y)
{
    const cgj_block_t *a = &sort_blocks[*(const uint32_t *)x], *b = &sort_blocks[*(const uint32_t *)y];
    if (a->base != b->base) return a->base < b->base ? -1 : 1;
    return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

static void index_blocks(cgj_blocks_t *bl)
{
    bl->by_base = cgj_xcalloc(bl->n ? bl->n : 1, sizeof *bl->by_base);
    for (uint32_t j = 0; j < bl->n; j++) {
        bl->by_base[j] = j;
        size_t bytes = bl->b[j].bytes ? bl->b[j].bytes : 1;
        if (bytes > bl->max_bytes) bl->max_bytes = bytes;
    }
    sort_blocks = bl->b;
    qsort(bl->by_base, bl->n, sizeof *bl->by_base, by_base);
    sort_blocks = NULL;
}

cgj_blocks_t cgj_blocks_of(const cgj_oplist_t *l)
{
    cgj_blocks_t bl = {0};
    uint32_t cap = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        const cgj_call_t *c = &l->ops[i].call;
        if (c->kind == CGJ_OP_ALLOC) {
            CGJ_VEC_PUSH(bl.b, bl.n, cap, ((cgj_block_t){c->u.a.addr, c->u.a.bytes, i, l->n, true}));
        } else if (c->kind == CGJ_OP_POOL_FREE) {
            for (uint32_t j = bl.n; j-- > 0;)
                if (bl.b[j].escapes && bl.b[j].base == c->u.a.addr) {
                    bl.b[j].end = i, bl.b[j].escapes = false;
                    break;
                }
        }
    }
    index_blocks(&bl);
    return bl;
}

void cgj_blocks_free(cgj_blocks_t *bl)
{
    cgj_free(bl->b), cgj_free(bl->by_base);
    *bl = (cgj_blocks_t){0};
}

/* Position in by_base of the first block whose base is above p. */
static uint32_t upper(const cgj_blocks_t *bl, CUdeviceptr p)
{
    uint32_t lo = 0, hi = bl->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (bl->b[bl->by_base[mid]].base <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int cgj_blocks_find(const cgj_blocks_t *bl, CUdeviceptr p, uint32_t at)
{
    if (!bl || !bl->n) return -1;
    int best = -1;
    for (uint32_t k = upper(bl, p); k-- > 0;) {
        uint32_t j = bl->by_base[k];
        const cgj_block_t *b = &bl->b[j];
        if (p - b->base >= bl->max_bytes) break; /* nothing further down reaches p */
        if (p - b->base < (b->bytes ? b->bytes : 1) && b->start <= at && at <= b->end &&
            (best < 0 || j < (uint32_t)best))
            best = (int)j;
    }
    return best;
}

bool cgj_oplist_holds(const cgj_oplist_t *l, CUdeviceptr addr)
{
    for (uint32_t i = l->n; i-- > 0;) { /* the latest allocation or free of that base decides */
        const cgj_call_t *c = &l->ops[i].call;
        if (c->kind == CGJ_OP_ALLOC && c->u.a.addr == addr) return true;
        if (c->kind == CGJ_OP_POOL_FREE && c->u.a.addr == addr) return false;
    }
    return false;
}
