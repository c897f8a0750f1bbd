/*
 * test_live.c — the memory a program holds (allocator/live.c), kept for CGJIT_VERIFY_ALL: ranges
 * added and removed in any order, a base given again, and what cgj_live_each hands out.
 */
#include <criterion/criterion.h>

#include "allocator/live.h"

typedef struct seen {
    CUdeviceptr base[64];
    size_t size[64];
    unsigned n;
} seen_t;

static void collect(void *ctx, CUdeviceptr base, size_t size)
{
    seen_t *s = ctx;
    cr_assert_lt(s->n, 64);
    s->base[s->n] = base, s->size[s->n] = size, s->n++;
}

static size_t size_of(const seen_t *s, CUdeviceptr base)
{
    for (unsigned i = 0; i < s->n; i++)
        if (s->base[i] == base) return s->size[i];
    return 0;
}

Test(allocator_live, ranges_come_and_go_in_any_order)
{
    for (CUdeviceptr b = 1; b <= 40; b++) cgj_live_add(b << 20, (size_t)b * 256);
    cgj_live_add(0, 64);         /* nothing at 0 */
    cgj_live_add(5ull << 20, 0); /* nor of no size */
    for (CUdeviceptr b = 2; b <= 40; b += 3) cgj_live_remove(b << 20);
    cgj_live_remove(99ull << 20);   /* never given: nothing happens */
    cgj_live_add(7ull << 20, 4096); /* freed behind cgjit's back and given again: its new size */
    seen_t s = {0};
    cr_assert_eq(cgj_live_each(collect, &s), 40 - 13);
    cr_assert_eq(s.n, 40 - 13);
    for (CUdeviceptr b = 1; b <= 40; b++) {
        size_t want = (b - 2) % 3 == 0 && b >= 2 ? 0 : b == 7 ? 4096 : (size_t)b * 256;
        cr_assert_eq(size_of(&s, b << 20), want, "range %llu", (unsigned long long)b);
    }
    for (CUdeviceptr b = 1; b <= 40; b++) cgj_live_remove(b << 20);
    s.n = 0;
    cr_assert_eq(cgj_live_each(collect, &s), 0);
}
