/*
 * test_map.c — base/map.h, the one hash map of cgjit: put/get/del against a reference array,
 * growth, tombstones, keys that collide by design (add/find with a predicate), and base/vec.h.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "base/cgj_base.h"
#include "base/map.h"
#include "base/spin.h"
#include "base/vec.h"

TestSuite(base_map);

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

Test(base_map, empty_map_finds_nothing)
{
    cgj_map_t m = {0};
    uint64_t v = 7;
    cr_assert_not(cgj_map_get(&m, 0, &v));
    cr_assert_not(cgj_map_get(&m, 42, &v));
    cr_assert_not(cgj_map_del(&m, 42));
    cr_assert_eq(v, 7, "a miss leaves the value alone");
    cgj_map_free(&m);
}

Test(base_map, put_get_replace_delete)
{
    cgj_map_t m = {0};
    cgj_map_put(&m, 0, 100); /* key 0 is a key like any other */
    cgj_map_put(&m, 1, 101);
    cgj_map_put(&m, 1, 102);
    uint64_t v;
    cr_assert(cgj_map_get(&m, 0, &v) && v == 100);
    cr_assert(cgj_map_get(&m, 1, &v) && v == 102, "put replaces");
    cr_assert_eq(m.n, 2);
    cr_assert(cgj_map_del(&m, 1));
    cr_assert_not(cgj_map_get(&m, 1, &v));
    cr_assert(cgj_map_get(&m, 0, &v) && v == 100);
    cgj_map_put(&m, 1, 103); /* reuses the tombstone's place or another: found either way */
    cr_assert(cgj_map_get(&m, 1, &v) && v == 103);
    cgj_map_free(&m);
    cr_assert_eq(m.cap, 0);
}

/* 20000 random operations against a reference of 512 possible keys (pointers, spaced 16). */
Test(base_map, random_operations_agree_with_a_reference)
{
    enum { KEYS = 512 };
    static uint64_t ref[KEYS];
    static bool present[KEYS];
    cgj_map_t m = {0};
    for (int i = 0; i < 20000; i++) {
        uint32_t k = (uint32_t)(next() % KEYS);
        uint64_t key = 0x7f0000000000ull + 16ull * k, v;
        switch (next() % 3) {
        case 0:
            ref[k] = next(), present[k] = true;
            cgj_map_put(&m, key, ref[k]);
            break;
        case 1:
            cr_assert_eq(cgj_map_del(&m, key), present[k], "op %d: del of key %u", i, k);
            present[k] = false;
            break;
        default:
            cr_assert_eq(cgj_map_get(&m, key, &v), present[k], "op %d: get of key %u", i, k);
            if (present[k]) cr_assert_eq(v, ref[k]);
        }
    }
    uint32_t n = 0;
    for (int k = 0; k < KEYS; k++) n += present[k];
    cr_assert_eq(m.n, n);
    cr_assert_leq(2 * (m.n + m.dead), m.cap, "the table stays at most half full");
    cgj_map_free(&m);
}

static bool is_string(const void *ctx, uint64_t v)
{
    return strcmp((const char *)(uintptr_t)v, ctx) == 0;
}

/* Names whose hashes collide (here: every name gets key 5) are told apart by the predicate. */
Test(base_map, colliding_keys_are_told_apart_by_the_predicate)
{
    static const char *const names[] = {"alpha", "beta", "gamma", "delta"};
    cgj_map_t m = {0};
    for (int i = 0; i < 4; i++) cgj_map_add(&m, 5, (uint64_t)(uintptr_t)names[i]);
    cr_assert_eq(m.n, 4, "add keeps every entry");
    for (int i = 0; i < 4; i++) {
        uint64_t v = 0;
        cr_assert(cgj_map_find(&m, 5, is_string, names[i], &v));
        cr_assert_str_eq((const char *)(uintptr_t)v, names[i]);
    }
    uint64_t v;
    cr_assert_not(cgj_map_find(&m, 5, is_string, "epsilon", &v));
    cr_assert_not(cgj_map_find(&m, 6, is_string, "alpha", &v));
    cgj_map_free(&m);
}

Test(base_map, vec_grows_and_keeps_its_elements)
{
    int *v = NULL;
    uint32_t n = 0, cap = 0;
    for (int i = 0; i < 1000; i++) CGJ_VEC_PUSH(v, n, cap, i * 3);
    cr_assert_eq(n, 1000);
    cr_assert_geq(cap, 1000);
    for (int i = 0; i < 1000; i++) cr_assert_eq(v[i], i * 3);
    int *z = CGJ_VEC_ADD(v, n, cap);
    cr_assert_eq(*z, 0, "an added element is zeroed");
    cr_assert_eq(n, 1001);
    cgj_free(v);
}

Test(base_map, spinlock_excludes)
{
    int lock = 0;
    cgj_spin_lock(&lock);
    cr_assert_eq(__atomic_load_n(&lock, __ATOMIC_RELAXED), 1);
    cr_assert(__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE), "held: a second taker would spin");
    cgj_spin_unlock(&lock);
    cr_assert_eq(lock, 0);
    cgj_spin_pause(); /* a hint: it must merely return */
}
