/* live.c — see live.h. */
#include "allocator/live.h"
#include "base/mem.h"
#include "base/map.h"
#include "base/spin.h"

#include <string.h>

typedef struct range {
    CUdeviceptr base;
    size_t size;
} range_t;

static int lock;
static cgj_map_t index_of; /* base -> index in ranges */
static range_t *ranges;
static uint32_t n, cap;

void cgj_live_add(CUdeviceptr base, size_t size)
{
    if (!base || !size) return;
    cgj_spin_lock(&lock);
    uint64_t at;
    if (cgj_map_get(&index_of, base, &at)) {
        ranges[at].size = size; /* freed behind cgjit's back and given again */
    } else {
        if (n == cap) ranges = cgj_xrealloc(ranges, (cap = cap ? 2 * cap : 64) * sizeof *ranges);
        ranges[n] = (range_t){base, size};
        cgj_map_put(&index_of, base, n++);
    }
    cgj_spin_unlock(&lock);
}

void cgj_live_remove(CUdeviceptr base)
{
    cgj_spin_lock(&lock);
    uint64_t at;
    if (cgj_map_get(&index_of, base, &at)) {
        cgj_map_del(&index_of, base);
        if (at != --n) { /* the last range takes its place */
            ranges[at] = ranges[n];
            cgj_map_put(&index_of, ranges[at].base, at);
        }
    }
    cgj_spin_unlock(&lock);
}

size_t cgj_live_each(void (*fn)(void *ctx, CUdeviceptr base, size_t size), void *ctx)
{
    cgj_spin_lock(&lock);
    uint32_t count = n;
    range_t *copy = count ? cgj_xmalloc(count * sizeof *copy) : NULL;
    if (count) memcpy(copy, ranges, count * sizeof *copy);
    cgj_spin_unlock(&lock);
    for (uint32_t i = 0; i < count; i++) fn(ctx, copy[i].base, copy[i].size);
    cgj_free(copy);
    return count;
}

void cgj_live_forked(void)
{
    lock = 0;
}
