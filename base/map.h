/*
 * map.h — the one hash map of cgjit: 64-bit keys to 64-bit values, open addressing.
 *
 * Every lookup by key goes through it: the interposition table (driver function -> wrapper),
 * kernel layouts (function handle -> layout), anchors (name -> anchor), library handle
 * generations, the planner's block names. Keys are pointers or hashes; values are indices or
 * pointers. Where the key is a hash of something longer (a name), several entries may share a
 * key: cgj_map_add inserts without replacing and cgj_map_find takes a predicate that checks the
 * real key. Linear probing over a power-of-two table kept at most half full; deletions leave
 * tombstones, swept when the table grows. Not thread-safe: owners lock around it; a map that is
 * only read after it is built may be read concurrently.
 */
#ifndef CGJ_MAP_H
#define CGJ_MAP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cgj_map {
    uint64_t *keys, *vals;
    uint8_t *state; /* per slot: 0 empty, 1 full, 2 deleted */
    uint32_t cap, n, dead;
} cgj_map_t;

/* A map is ready when zeroed: cgj_map_t m = {0}. */
void cgj_map_free(cgj_map_t *m);
/* The value of `key` into *val; false if absent. */
bool cgj_map_get(const cgj_map_t *m, uint64_t key, uint64_t *val);
/* Set key to val, replacing an entry with the same key. */
void cgj_map_put(cgj_map_t *m, uint64_t key, uint64_t val);
/* Remove the entry of `key` (the first, where keys repeat); false if absent. */
bool cgj_map_del(cgj_map_t *m, uint64_t key);
/* Add an entry even if the key is present (keys that are hashes of longer keys). */
void cgj_map_add(cgj_map_t *m, uint64_t key, uint64_t val);
/* The first entry with `key` whose value `match(ctx, value)` accepts, into *val. */
bool cgj_map_find(const cgj_map_t *m, uint64_t key, bool (*match)(const void *ctx, uint64_t val), const void *ctx,
                  uint64_t *val);

static inline uint64_t cgj_map_ptr_key(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

#endif /* CGJ_MAP_H */
