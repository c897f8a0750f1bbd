/* map.c — open-addressing hash map; see map.h. */
#include "base/map.h"
#include "base/mem.h"

enum { EMPTY, FULL, DEAD };

/* splitmix64's finalizer: pointers and small integers spread over every bit. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void cgj_map_free(cgj_map_t *m)
{
    cgj_free(m->keys), cgj_free(m->vals), cgj_free(m->state);
    *m = (cgj_map_t){0};
}

static void insert(cgj_map_t *m, uint64_t key, uint64_t val);

static void grow(cgj_map_t *m)
{
    cgj_map_t old = *m;
    uint32_t cap = old.cap ? old.cap : 16;
    while (2 * (old.n + 1) > cap) cap *= 2;
    m->cap = cap, m->n = 0, m->dead = 0;
    m->keys = cgj_xcalloc(cap, sizeof *m->keys);
    m->vals = cgj_xcalloc(cap, sizeof *m->vals);
    m->state = cgj_xcalloc(cap, 1);
    for (uint32_t i = 0; i < old.cap; i++)
        if (old.state[i] == FULL) insert(m, old.keys[i], old.vals[i]);
    cgj_free(old.keys), cgj_free(old.vals), cgj_free(old.state);
}

static void insert(cgj_map_t *m, uint64_t key, uint64_t val)
{
    if (2 * (m->n + m->dead + 1) > m->cap) grow(m);
    uint32_t mask = m->cap - 1, i = (uint32_t)mix(key) & mask;
    while (m->state[i] == FULL) i = (i + 1) & mask;
    if (m->state[i] == DEAD) m->dead--;
    m->state[i] = FULL, m->keys[i] = key, m->vals[i] = val;
    m->n++;
}

/* The slot of the first entry with `key` accepted by match (NULL: any), or -1. */
static int64_t slot(const cgj_map_t *m, uint64_t key, bool (*match)(const void *, uint64_t), const void *ctx)
{
    if (!m->cap) return -1;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)mix(key) & mask; m->state[i] != EMPTY; i = (i + 1) & mask)
        if (m->state[i] == FULL && m->keys[i] == key && (!match || match(ctx, m->vals[i]))) return i;
    return -1;
}

bool cgj_map_get(const cgj_map_t *m, uint64_t key, uint64_t *val)
{
    int64_t i = slot(m, key, NULL, NULL);
    if (i >= 0) *val = m->vals[i];
    return i >= 0;
}

bool cgj_map_find(const cgj_map_t *m, uint64_t key, bool (*match)(const void *, uint64_t), const void *ctx,
                  uint64_t *val)
{
    int64_t i = slot(m, key, match, ctx);
    if (i >= 0) *val = m->vals[i];
    return i >= 0;
}

void cgj_map_put(cgj_map_t *m, uint64_t key, uint64_t val)
{
    int64_t i = slot(m, key, NULL, NULL);
    if (i >= 0) m->vals[i] = val;
    else insert(m, key, val);
}

void cgj_map_add(cgj_map_t *m, uint64_t key, uint64_t val)
{
    insert(m, key, val);
}

bool cgj_map_del(cgj_map_t *m, uint64_t key)
{
    int64_t i = slot(m, key, NULL, NULL);
    if (i < 0) return false;
    m->state[i] = DEAD;
    m->n--, m->dead++;
    return true;
}
