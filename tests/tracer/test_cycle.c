/*
 * test_cycle.c — the CGJIT_STEP=auto cycle detector (tracer/cycle.c) on synthetic streams of
 * signatures: periods 1 to 4096 (4097 never locks), prefixes, cycles with inner repetition,
 * noise, a loop changing into another, confirm=3, random streams, a brute-force check of every
 * lock on small-alphabet streams, and the cost per call.
 *
 * A stream records, for every position, which element of its loop it is (-1: not in a loop), so
 * that a head can be named by loop element: the same loop must begin its steps at the same
 * element whatever came before it.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/cycle.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t rng_state;
static void seed(uint64_t s)
{
    rng_state = s * 0x9e3779b97f4a7c15ull + 12345;
}
static uint64_t rnd(void) /* splitmix64, never 0 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z ? z : 1;
}

static cgj_cycle_t *new_cycle(uint32_t confirm)
{
    cgj_cycle_t *c = malloc(sizeof *c);
    cr_assert(c);
    cgj_cycle_init(c, confirm);
    return c;
}

/* p random (distinct) signatures. */
static uint64_t *random_loop(uint32_t p, uint64_t s)
{
    seed(s);
    uint64_t *l = malloc(p * sizeof *l);
    for (uint32_t i = 0; i < p; i++) l[i] = rnd();
    return l;
}

/* A loop spelled with letters: each letter one signature ("AAB"). */
static uint64_t *letter_loop(const char *spell, uint32_t *p)
{
    *p = (uint32_t)strlen(spell);
    uint64_t *l = malloc(*p * sizeof *l);
    for (uint32_t i = 0; i < *p; i++) l[i] = 0x1000 + (uint64_t)(unsigned char)spell[i] * 7919;
    return l;
}

typedef struct {
    uint64_t *sig;
    int32_t *elem; /* loop element, -1 outside a loop */
    size_t n, cap;
    /* results of run() */
    bool *head;
    uint32_t *period;
    uint64_t *id;
} stream_t;

static void push(stream_t *s, uint64_t sig, int32_t elem)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->sig = realloc(s->sig, s->cap * sizeof *s->sig);
        s->elem = realloc(s->elem, s->cap * sizeof *s->elem);
    }
    s->sig[s->n] = sig;
    s->elem[s->n] = elem;
    s->n++;
}
static void push_random(stream_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) push(s, rnd(), -1);
}
/* Elements [from, to) of the loop. */
static void push_part(stream_t *s, const uint64_t *l, uint32_t from, uint32_t to)
{
    for (uint32_t e = from; e < to; e++) push(s, l[e], (int32_t)e);
}
static void push_loops(stream_t *s, const uint64_t *l, uint32_t p, uint32_t reps)
{
    for (uint32_t r = 0; r < reps; r++) push_part(s, l, 0, p);
}

static void run(cgj_cycle_t *c, stream_t *s)
{
    s->head = realloc(s->head, s->n * sizeof *s->head);
    s->period = realloc(s->period, s->n * sizeof *s->period);
    s->id = realloc(s->id, s->n * sizeof *s->id);
    for (size_t i = 0; i < s->n; i++) {
        s->head[i] = cgj_cycle_feed(c, s->sig[i]);
        s->period[i] = cgj_cycle_period(c);
        s->id[i] = cgj_cycle_id(c);
        if (s->head[i]) cr_assert(s->period[i], "a head at %zu while unlocked", i);
        cr_assert_eq(s->period[i] == 0, s->id[i] == 0, "period and id disagree at %zu", i);
    }
}

static void free_stream(stream_t *s)
{
    free(s->sig), free(s->elem), free(s->head), free(s->period), free(s->id);
    memset(s, 0, sizeof *s);
}

/* The element where the lexicographically least rotation of the (primitive) loop starts. */
static uint32_t least_rotation(const uint64_t *l, uint32_t p)
{
    uint32_t best = 0;
    for (uint32_t r = 1; r < p; r++) {
        for (uint32_t k = 0; k < p; k++) {
            uint64_t x = l[(r + k) % p], y = l[(best + k) % p];
            if (x != y) {
                if (x < y) best = r;
                break;
            }
        }
    }
    return best;
}

/* Positions [from, to) are locked on period p with this id, and heads are exactly the
 * positions of loop element head_elem. */
static void expect_locked(const stream_t *s, size_t from, size_t to, uint32_t p, uint64_t id, int32_t head_elem)
{
    for (size_t i = from; i < to; i++) {
        cr_assert_eq(s->period[i], p, "period at %zu: %u, not %u", i, s->period[i], p);
        cr_assert_eq(s->id[i], id, "id changed at %zu", i);
        cr_assert_eq(s->head[i], s->elem[i] == head_elem, "head at %zu (element %d, head %d): %d", i, s->elem[i],
                     head_elem, s->head[i]);
    }
}
static void expect_unlocked(const stream_t *s, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) cr_assert_eq(s->period[i], 0, "locked (%u) at %zu", s->period[i], i);
}

/* Feed prefix (random, length pre) + reps loops; the loop must lock exactly when confirm
 * repetitions are complete and stay locked, a head every p calls at the canonical element.
 * Returns the id. */
static uint64_t check_loop(const uint64_t *l, uint32_t p, size_t pre, uint32_t confirm, uint32_t reps, bool distinct)
{
    cgj_cycle_t *c = new_cycle(confirm);
    stream_t s = {0};
    seed(pre * 31 + p);
    push_random(&s, pre);
    push_loops(&s, l, p, reps);
    run(c, &s);
    size_t lock = pre + (size_t)confirm * p - 1;
    if (distinct) expect_unlocked(&s, 0, lock);
    cr_assert_eq(s.period[lock], p, "p=%u prefix %zu: period %u at the lock position", p, pre, s.period[lock]);
    uint64_t id = s.id[lock];
    expect_locked(&s, lock, s.n, p, id, (int32_t)least_rotation(l, p));
    cr_assert_eq(cgj_cycle_period(c), p);
    free_stream(&s);
    free(c);
    return id;
}

TestSuite(tracer_cycle);

/* ---- tests --------------------------------------------------------------------------------- */

Test(tracer_cycle, fixed_size_state)
{
    cr_assert_lt(sizeof(cgj_cycle_t), 200 * 1024, "%zu bytes", sizeof(cgj_cycle_t));
    cgj_cycle_t *c = new_cycle(0);
    cr_assert_eq(c->confirm, 2, "confirm below 2 means 2");
    cr_assert_eq(cgj_cycle_period(c), 0);
    cr_assert_eq(cgj_cycle_id(c), 0);
    free(c);
}

Test(tracer_cycle, periods_with_prefixes)
{
    static const uint32_t periods[] = {1, 2, 3, 7, 64, 999, 1000, 4096};
    seed(99);
    size_t prefixes[6] = {0, 1, 17, 5000, 0, 0};
    for (int k = 4; k < 6; k++) prefixes[k] = rnd() % 5001;
    for (size_t pi = 0; pi < CGJ_ARRAY_LEN(periods); pi++) {
        uint32_t p = periods[pi];
        uint64_t *l = random_loop(p, p);
        uint64_t id = 0;
        for (size_t k = 0; k < CGJ_ARRAY_LEN(prefixes); k++) {
            uint64_t got = check_loop(l, p, prefixes[k], 2, 5, true);
            if (k == 0) id = got;
            cr_assert_eq(got, id, "p=%u: the id depends on the prefix", p);
        }
        free(l);
    }
}

Test(tracer_cycle, detected_at_a_different_moment)
{
    /* The stream begins in the middle of the loop: the loop is confirmed earlier or later, the
     * head element and the id stay. */
    static const uint32_t periods[] = {3, 64, 1000};
    for (size_t pi = 0; pi < CGJ_ARRAY_LEN(periods); pi++) {
        uint32_t p = periods[pi];
        uint64_t *l = random_loop(p, 1000 + p);
        uint64_t id = check_loop(l, p, 0, 2, 4, true);
        int32_t want = (int32_t)least_rotation(l, p);
        for (uint32_t from = 1; from < p; from += (p / 3 ? p / 3 : 1)) {
            cgj_cycle_t *c = new_cycle(2);
            stream_t s = {0};
            push_part(&s, l, from, p);
            push_loops(&s, l, p, 4);
            run(c, &s);
            size_t lock = 2 * (size_t)p - 1;
            expect_unlocked(&s, 0, lock);
            expect_locked(&s, lock, s.n, p, id, want);
            free_stream(&s);
            free(c);
        }
        free(l);
    }
}

Test(tracer_cycle, period_4097_never_locks)
{
    uint64_t *l = random_loop(4097, 4097);
    cgj_cycle_t *c = new_cycle(2);
    for (int r = 0; r < 8; r++)
        for (uint32_t e = 0; e < 4097; e++) {
            cr_assert_not(cgj_cycle_feed(c, l[e]));
            cr_assert_eq(cgj_cycle_period(c), 0, "locked on %u", cgj_cycle_period(c));
        }
    free(c);
    free(l);
}

Test(tracer_cycle, inner_repetition)
{
    /* A A B is period 3 (not 1), A B A B A C period 6, A^1000 B period 1001: once confirmed
     * they stay locked through their inner repetitions, with canonical heads. */
    static const char *spells[] = {"AAB", "ABABAC", "CABAB", "AABB", "ABAC", "ABCACB", "AAAAAAAAAB", "ABABABABABC"};
    for (size_t k = 0; k < CGJ_ARRAY_LEN(spells); k++) {
        uint32_t p;
        uint64_t *l = letter_loop(spells[k], &p);
        uint64_t id = check_loop(l, p, 0, 2, 6, false);
        cr_assert_eq(check_loop(l, p, 1234, 2, 6, false), id, "%s", spells[k]);
        cr_assert_eq(check_loop(l, p, 4321, 3, 6, false), id, "%s, confirm 3", spells[k]);
        free(l);
    }
    uint64_t *l = malloc(1001 * sizeof *l);
    for (int i = 0; i < 1000; i++) l[i] = 0xaaaa;
    l[1000] = 0xbbbb;
    uint64_t id = check_loop(l, 1001, 0, 2, 4, false);
    cr_assert_eq(check_loop(l, 1001, 77, 2, 4, false), id);
    free(l);
}

Test(tracer_cycle, a_repeated_cycle_locks_on_its_primitive_root)
{
    /* Signatures A B A B ... : period 2, whatever multiple was seen first. */
    uint32_t p;
    uint64_t *l = letter_loop("ABABABAB", &p);
    cgj_cycle_t *c = new_cycle(2);
    stream_t s = {0};
    push_loops(&s, l, p, 3);
    run(c, &s);
    cr_assert_eq(s.period[3], 2);
    cr_assert_eq(cgj_cycle_period(c), 2);
    free_stream(&s);
    free(c);
    free(l);
}

/* Loop, noise at the middle of a repetition (an extra call, or a changed one), loop again:
 * unlocked by the noise, re-locked confirm repetitions later with the same head and id. */
static void check_noise(uint32_t p, uint32_t confirm, bool replace)
{
    uint64_t *l = random_loop(p, 7 * p + confirm);
    uint64_t id = check_loop(l, p, 10, confirm, confirm + 1, true);
    int32_t want = (int32_t)least_rotation(l, p);
    cgj_cycle_t *c = new_cycle(confirm);
    stream_t s = {0};
    seed(p);
    push_random(&s, 100);
    push_loops(&s, l, p, confirm + 2);
    uint32_t half = p / 2;
    push_part(&s, l, 0, half);
    size_t x = s.n;
    push(&s, 0x5eed5eed5eedull, -1);
    push_part(&s, l, replace ? half + 1 : half, p);
    push_loops(&s, l, p, confirm + 3);
    run(c, &s);
    size_t lock = 100 + (size_t)confirm * p - 1;
    expect_unlocked(&s, 0, lock);
    expect_locked(&s, lock, x, p, id, want);
    size_t relock = x + (size_t)confirm * p;
    expect_unlocked(&s, x, relock);
    expect_locked(&s, relock, s.n, p, id, want);
    free_stream(&s);
    free(c);
    free(l);
}

Test(tracer_cycle, noise_extra_call)
{
    static const uint32_t periods[] = {1, 2, 7, 64, 1000, 4096};
    for (size_t k = 0; k < CGJ_ARRAY_LEN(periods); k++) check_noise(periods[k], 2, false);
}

Test(tracer_cycle, noise_changed_call)
{
    static const uint32_t periods[] = {2, 7, 64, 1000, 4096};
    for (size_t k = 0; k < CGJ_ARRAY_LEN(periods); k++) check_noise(periods[k], 2, true);
}

Test(tracer_cycle, confirm_3)
{
    static const uint32_t periods[] = {1, 5, 64, 999, 4096};
    for (size_t k = 0; k < CGJ_ARRAY_LEN(periods); k++) {
        uint32_t p = periods[k];
        uint64_t *l = random_loop(p, 3 * p);
        cr_assert_eq(check_loop(l, p, 0, 3, 5, true), check_loop(l, p, 2500, 3, 5, true));
        free(l);
        check_noise(p, 3, false);
        if (p > 1) check_noise(p, 3, true);
    }
}

Test(tracer_cycle, a_loop_changes_to_another)
{
    static const uint32_t pairs[][2] = {{7, 64}, {1000, 3}, {64, 4096}, {1, 999}, {5, 10}};
    for (size_t k = 0; k < CGJ_ARRAY_LEN(pairs); k++) {
        uint32_t p1 = pairs[k][0], p2 = pairs[k][1];
        uint64_t *l1 = random_loop(p1, 11 * p1), *l2 = random_loop(p2, 13 * p2 + 1);
        uint64_t id1 = check_loop(l1, p1, 0, 2, 3, true), id2 = check_loop(l2, p2, 0, 2, 3, true);
        cr_assert_neq(id1, id2);
        cgj_cycle_t *c = new_cycle(2);
        stream_t s = {0};
        push_loops(&s, l1, p1, 4);
        size_t change = s.n;
        for (size_t i = 0; i < (size_t)6 * p2; i++) push(&s, l2[i % p2], (int32_t)(p1 + i % p2));
        run(c, &s);
        expect_locked(&s, 2 * (size_t)p1 - 1, change, p1, id1, (int32_t)least_rotation(l1, p1));
        size_t relock = change + 2 * (size_t)p2 - 1;
        expect_unlocked(&s, change, relock);
        expect_locked(&s, relock, s.n, p2, id2, (int32_t)(p1 + least_rotation(l2, p2)));
        free_stream(&s);
        free(c);
        free(l1);
        free(l2);
    }
}

Test(tracer_cycle, random_streams_never_lock)
{
    cgj_cycle_t *c = new_cycle(2);
    seed(2024);
    for (int i = 0; i < 2000000; i++) {
        cr_assert_not(cgj_cycle_feed(c, rnd()));
        cr_assert_eq(cgj_cycle_period(c), 0);
    }
    free(c);
}

/* cgj_cycle_marked counts the signatures of one turn of the locked cycle with a mark, each
 * mark on its own, whichever phase the stream is at: a loop of 10 with 3 marked and 1 marked
 * with the other mark, then one of 40 with none, then none locked. */
Test(tracer_cycle, marked_signatures_of_a_turn_are_counted)
{
    cgj_cycle_t *c = new_cycle(2);
    uint64_t *l = random_loop(10, 11);
    for (uint32_t e = 0; e < 10; e++) l[e] &= ~(CGJ_CYCLE_MARK | CGJ_CYCLE_MARK2);
    l[2] |= CGJ_CYCLE_MARK, l[5] |= CGJ_CYCLE_MARK, l[9] |= CGJ_CYCLE_MARK | CGJ_CYCLE_MARK2;
    cr_assert_eq(cgj_cycle_marked(c, CGJ_CYCLE_MARK), 0, "nothing locked yet");
    for (int r = 0; r < 5; r++)
        for (uint32_t e = 0; e < 10; e++) {
            cgj_cycle_feed(c, l[e]);
            if (!cgj_cycle_period(c)) continue;
            cr_assert_eq(cgj_cycle_marked(c, CGJ_CYCLE_MARK), 3, "turn %d, element %u", r, e);
            cr_assert_eq(cgj_cycle_marked(c, CGJ_CYCLE_MARK2), 1, "turn %d, element %u", r, e);
        }
    cr_assert_eq(cgj_cycle_period(c), 10);
    uint64_t *m = random_loop(40, 12);
    for (uint32_t e = 0; e < 40; e++) m[e] &= ~(CGJ_CYCLE_MARK | CGJ_CYCLE_MARK2);
    for (int r = 0; r < 4; r++)
        for (uint32_t e = 0; e < 40; e++) cgj_cycle_feed(c, m[e]);
    cr_assert_eq(cgj_cycle_period(c), 40);
    cr_assert_eq(cgj_cycle_marked(c, CGJ_CYCLE_MARK), 0);
    cr_assert_eq(cgj_cycle_marked(c, CGJ_CYCLE_MARK2), 0);
    cgj_cycle_reset(c);
    cr_assert_eq(cgj_cycle_marked(c, CGJ_CYCLE_MARK), 0);
    free(l), free(m), free(c);
}

/* cgj_cycle_span: the calls a locked cycle has repeated over, from the first of the periodic
 * suffix that locked it (after a prefix of other calls), growing by one a call; 0 unlocked, and
 * counted afresh once a changed call breaks the loop and it locks again. */
Test(tracer_cycle, the_span_of_a_cycle_counts_its_repeated_calls)
{
    cgj_cycle_t *c = new_cycle(2);
    uint64_t *l = random_loop(7, 21), *prefix = random_loop(5, 22);
    cr_assert_eq(cgj_cycle_span(c), 0);
    for (uint32_t e = 0; e < 5; e++) cgj_cycle_feed(c, prefix[e]);
    uint64_t fed = 0, locked = 0;
    for (int r = 0; r < 6; r++)
        for (uint32_t e = 0; e < 7; e++) {
            cgj_cycle_feed(c, l[e]), fed++;
            if (!cgj_cycle_period(c)) {
                cr_assert_eq(cgj_cycle_span(c), 0);
                continue;
            }
            if (!locked) locked = fed;
            cr_assert_eq(cgj_cycle_span(c), fed, "turn %d, element %u: the loop's %llu calls", r, e,
                         (unsigned long long)fed);
        }
    cr_assert_eq(locked, 14, "locked after two turns of 7");
    cgj_cycle_feed(c, l[3] ^ 0x100); /* a changed call */
    cr_assert_eq(cgj_cycle_period(c), 0);
    cr_assert_eq(cgj_cycle_span(c), 0);
    for (int r = 0; r < 3; r++)
        for (uint32_t e = 0; e < 7; e++) cgj_cycle_feed(c, l[e]);
    cr_assert_eq(cgj_cycle_period(c), 7);
    cr_assert_lt(cgj_cycle_span(c), 22, "counted afresh: %llu", (unsigned long long)cgj_cycle_span(c));
    cr_assert_geq(cgj_cycle_span(c), 14);
    free(l), free(prefix), free(c);
}

Test(tracer_cycle, reset_forgets)
{
    uint64_t *l = random_loop(64, 5);
    cgj_cycle_t *c = new_cycle(2);
    uint64_t id = 0;
    for (int round = 0; round < 2; round++) {
        int heads = 0;
        for (int r = 0; r < 4; r++)
            for (uint32_t e = 0; e < 64; e++) heads += cgj_cycle_feed(c, l[e]);
        cr_assert_eq(cgj_cycle_period(c), 64);
        /* two repetitions to confirm, then a head in each (and maybe on the locking call) */
        cr_assert_eq(heads, 2 + (least_rotation(l, 64) == 63), "%d heads", heads);
        if (round == 0) id = cgj_cycle_id(c);
        cr_assert_eq(cgj_cycle_id(c), id);
        cgj_cycle_reset(c);
        cr_assert_eq(cgj_cycle_period(c), 0);
        cr_assert_eq(cgj_cycle_id(c), 0);
        cgj_cycle_feed(c, l[0]);
        cr_assert_eq(cgj_cycle_period(c), 0, "nothing from before the reset counts");
        cgj_cycle_reset(c);
    }
    free(c);
    free(l);
}

/* Random streams over a small alphabet, loops and noise mixed: every lock is checked by brute
 * force (the last confirm*p calls are p-periodic, p is primitive, the head starts the least
 * rotation, heads come every p calls, a locked call equals the one p before it), and a period
 * the detector misses for long is reported. */
static void check_small_alphabet(uint32_t confirm, uint64_t sd)
{
    seed(sd);
    stream_t s = {0};
    while (s.n < 60000) {
        uint32_t kind = rnd() % 3, alpha = 2 + rnd() % 4;
        if (kind == 0) { /* noise */
            size_t len = rnd() % 30;
            for (size_t i = 0; i < len; i++) push(&s, 1 + rnd() % alpha, -1);
        } else { /* a loop over a small alphabet, repeated */
            uint32_t p = 1 + rnd() % (kind == 1 ? 12 : 300), reps = 1 + rnd() % 8;
            uint64_t l[300];
            for (uint32_t e = 0; e < p; e++) l[e] = 1 + rnd() % alpha;
            for (uint32_t r = 0; r < reps; r++) push_part(&s, l, 0, p);
        }
    }
    cgj_cycle_t *c = new_cycle(confirm);
    run(c, &s);
    size_t locks = 0, late = 0;
    for (size_t i = 0; i < s.n; i++) {
        uint32_t p = s.period[i], prev = i ? s.period[i - 1] : 0;
        const uint64_t *x = s.sig;
        if (p && prev == p && s.id[i] == s.id[i - 1]) {
            cr_assert_eq(x[i], x[i - p], "locked on %u at %zu through a mismatch", p, i);
        } else if (p) { /* a new lock */
            locks++;
            cr_assert_geq(i + 1, (size_t)confirm * p);
            for (size_t j = i + 1 - (size_t)(confirm - 1) * p; j <= i; j++)
                cr_assert_eq(x[j], x[j - p], "lock on %u at %zu: not periodic at %zu", p, i, j);
            for (uint32_t e = 1; e < p; e++) {
                if (p % e) continue;
                uint32_t t = 0;
                while (t < p - e && x[i + 1 - p + t] == x[i + 1 - p + t + e]) t++;
                cr_assert_neq(t, p - e, "lock on %u at %zu: not primitive (%u)", p, i, e);
            }
            if (prev) cr_assert_neq(x[i], x[i - prev], "left period %u at %zu without a mismatch", prev, i);
        }
        if (p && s.head[i]) { /* x[i-p .. i-1] is the rotation starting at the head: least */
            uint32_t m = least_rotation(x + i - p, p);
            cr_assert_eq(m, 0, "head at %zu (period %u) is not the least rotation", i, p);
        }
        if (p && prev == p && s.id[i] == s.id[i - 1]) {
            /* heads exactly every p calls */
            if (s.period[i - p] == p && s.id[i - p] == s.id[i])
                cr_assert_eq(s.head[i], s.head[i - p], "heads not every %u calls at %zu", p, i);
        }
        /* A period confirmed for a whole extra period, and still unlocked, is a miss. */
        if (!p) {
            for (uint32_t q = 1; q <= 300 && (size_t)(confirm + 1) * q <= i + 1; q++) {
                size_t j = i + 1 - (size_t)confirm * q;
                while (j <= i && x[j] == x[j - q]) j++;
                if (j > i) {
                    late++;
                    break;
                }
            }
        }
    }
    fprintf(stderr, "small alphabet (confirm %u, seed %llu): %zu calls, %zu locks, %zu calls unlocked a period late\n",
            confirm, (unsigned long long)sd, s.n, locks, late);
    cr_assert_gt(locks, 100);
    cr_assert_lt(late, s.n / 100, "too many misses: %zu", late);
    free_stream(&s);
    free(c);
}

Test(tracer_cycle, small_alphabet_locks_checked_by_brute_force)
{
    check_small_alphabet(2, 1);
    check_small_alphabet(2, 2);
    check_small_alphabet(3, 3);
}

/* Long runs: what the detector finds over millions of calls. How fast it is belongs to the
 * benchmarks, not here: a duration asserted in a test fails on a loaded machine. */
Test(tracer_cycle, ten_million_calls_of_a_period_1000_loop, .timeout = 600)
{
    uint64_t *l = random_loop(1000, 42);
    cgj_cycle_t *c = new_cycle(2);
    size_t heads = 0;
    for (uint32_t r = 0; r < 10000; r++)
        for (uint32_t e = 0; e < 1000; e++) heads += cgj_cycle_feed(c, l[e]);
    cr_assert_eq(cgj_cycle_period(c), 1000);
    cr_assert_eq(heads, 9998, "%zu heads", heads);
    free(c);
    free(l);
}

Test(tracer_cycle, two_million_random_calls, .timeout = 600)
{
    cgj_cycle_t *c = new_cycle(2);
    seed(7);
    size_t heads = 0;
    for (int i = 0; i < 2000000; i++) heads += cgj_cycle_feed(c, rnd());
    cr_assert_eq(heads, 0);
    cr_assert_eq(cgj_cycle_period(c), 0, "locked on random calls");
    free(c);
}
