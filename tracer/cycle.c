/*
 * cycle.c — the cycle detector behind CGJIT_STEP=auto (cycle.h says what it promises).
 *
 * Unlocked, each call:
 *   1. follows the candidate periods d: run counts the latest calls equal to the call d before
 *      them; a mismatch drops the candidate. d qualifies once run >= (confirm-1)*d, i.e. once
 *      the last confirm*d calls are d-periodic.
 *   2. indexes the k-grams ending here (k = 1, 4, 16; polynomial rolling hashes) in a 4-way
 *      table of their last position; the distance to a k-gram's previous occurrence, when at
 *      most CGJ_CYCLE_MAX_PERIOD, proposes a candidate, verified once by comparing backwards
 *      (the O(p) work, paid only when a candidate appears).
 *   3. locks on the best qualifying candidate (longest periodic suffix, then smallest d),
 *      reduced to its primitive root; the head is where the lexicographically least rotation of
 *      the cycle starts, the id a hash of that rotation.
 * Locked, a call only compares with the call p before it; neither the candidates nor the k-gram
 * index are updated then: both catch up on the call that unlocks, at a cost bounded by the calls
 * skipped (and, for the index, by CGJ_CYCLE_MAX_PERIOD).
 */
#include "tracer/cycle.h"

#include <string.h>

static const uint32_t scale_k[CGJ_CYCLE_SCALES] = {1, 4, 16};
static const uint64_t scale_salt[CGJ_CYCLE_SCALES] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
                                                      0xa4093822299f31d0ull};
#define ROLL_BASE 0x9e3779b97f4a7c15ull /* odd */
#define MAX_K 16

_Static_assert(CGJ_CYCLE_MAX_PERIOD < 65536, "table positions are 16 bits");
_Static_assert(CGJ_CYCLE_RING >= 2 * CGJ_CYCLE_MAX_PERIOD + MAX_K, "ring too small");
_Static_assert(CGJ_CYCLE_MIXED > MAX_K, "mixed[] too small");


/* The signature at stream position pos; pos must be one of the last CGJ_CYCLE_RING fed. */
static inline uint64_t at(const cgj_cycle_t *c, uint64_t pos)
{
    return c->ring[pos % CGJ_CYCLE_RING];
}

/* The same for the position `off` after the one in ring slot `base` (off < CGJ_CYCLE_RING): the
 * loops over a whole cycle read it so, a subtraction where `at` divides. */
static inline uint64_t at_off(const cgj_cycle_t *c, uint32_t base, uint32_t off)
{
    uint32_t slot = base + off;
    return c->ring[slot >= CGJ_CYCLE_RING ? slot - CGJ_CYCLE_RING : slot];
}

static inline uint32_t slot_back(uint32_t slot, uint32_t d)
{
    return slot >= d ? slot - d : slot + CGJ_CYCLE_RING - d;
}

void cgj_cycle_reset(cgj_cycle_t *c)
{
    uint32_t confirm = c->confirm < 2 ? 2 : c->confirm;
    memset(c, 0, sizeof *c);
    c->confirm = confirm;
    for (int s = 0; s < CGJ_CYCLE_SCALES; s++) {
        uint64_t p = 1;
        for (uint32_t k = 0; k < scale_k[s]; k++) p *= ROLL_BASE;
        c->powk[s] = p;
    }
}

void cgj_cycle_init(cgj_cycle_t *c, uint32_t confirm)
{
    c->confirm = confirm < 2 ? 2 : confirm;
    cgj_cycle_reset(c);
}

uint32_t cgj_cycle_period(const cgj_cycle_t *c)
{
    return c->period;
}
uint64_t cgj_cycle_id(const cgj_cycle_t *c)
{
    return c->id;
}

uint32_t cgj_cycle_marked(const cgj_cycle_t *c, uint64_t bit)
{
    uint32_t n = 0, base = (uint32_t)((c->n - c->period) % CGJ_CYCLE_RING);
    for (uint32_t k = 0; k < c->period; k++) n += (at_off(c, base, k) & bit) != 0;
    return n;
}

uint64_t cgj_cycle_span(const cgj_cycle_t *c)
{
    return c->period ? c->n - c->periodic_from : 0;
}

/* ---- the k-gram index ---------------------------------------------------------------------- */

/* The k-gram hashes ending at position j, rolled from j-1 when roll[] holds those (mixed[]
 * keeps the mixed signatures of the last MAX_K positions for that). */
static void roll_to(cgj_cycle_t *c, uint64_t j)
{
    uint64_t mj = cgj_mix64(at(c, j));
    bool from_prev = c->rolled == j && j > 0;
    if (!from_prev)
        for (uint64_t t = j >= MAX_K ? j - MAX_K : 0; t < j; t++) c->mixed[t % CGJ_CYCLE_MIXED] = cgj_mix64(at(c, t));
    c->mixed[j % CGJ_CYCLE_MIXED] = mj;
    for (int s = 0; s < CGJ_CYCLE_SCALES; s++) {
        uint32_t k = scale_k[s];
        if (j + 1 < k) continue;
        if (from_prev && j >= k) {
            c->roll[s] = c->roll[s] * ROLL_BASE + mj - c->mixed[(j - k) % CGJ_CYCLE_MIXED] * c->powk[s];
        } else {
            uint64_t h = 0;
            for (uint64_t t = j + 1 - k; t <= j; t++) h = h * ROLL_BASE + c->mixed[t % CGJ_CYCLE_MIXED];
            c->roll[s] = h;
        }
    }
    c->rolled = j + 1;
}

/* Index the k-grams ending at position j; with out, write the distances to their previous
 * occurrences that could be periods (0 where none) to out[scale]. */
static void index_at(cgj_cycle_t *c, uint64_t j, uint32_t *out)
{
    roll_to(c, j);
    uint16_t pos = (uint16_t)j;
    for (int s = 0; s < CGJ_CYCLE_SCALES; s++) {
        if (out) out[s] = 0;
        if (j + 1 < scale_k[s]) continue;
        uint64_t key = (c->roll[s] + scale_salt[s]) * 0xd6e8feb86659fd93ull; /* top bits: all of it */
        uint32_t *b = c->table[key >> (64 - CGJ_CYCLE_BUCKET_BITS)];
        uint32_t tag = (uint32_t)(key >> 32) & 0xffffu, entry;
        tag |= 1; /* nonzero: an entry of 0 is empty */
        entry = tag << 16 | pos;
        int w = 0;
        while (w < CGJ_CYCLE_WAYS && b[w] >> 16 != tag) w++;
        if (w < CGJ_CYCLE_WAYS) { /* seen: its previous position proposes a period */
            uint32_t age = (uint16_t)(pos - (uint16_t)b[w]);
            if (out && age >= 1 && age <= CGJ_CYCLE_MAX_PERIOD && age <= j) out[s] = age;
        } else { /* new: replace the oldest entry (an empty one first) */
            uint32_t oldest = 0;
            w = 0;
            for (int v = 0; v < CGJ_CYCLE_WAYS; v++) {
                uint32_t age = b[v] ? (uint16_t)(pos - (uint16_t)b[v]) : 0x10000u;
                if (age > oldest) oldest = age, w = v;
            }
        }
        b[w] = entry;
    }
}

/* ---- candidates ---------------------------------------------------------------------------- */

/* How many consecutive positions ending at i equal the one d before them (within the ring),
 * counting at most cap. */
static uint32_t backward_run(const cgj_cycle_t *c, uint64_t i, uint32_t d, uint64_t cap)
{
    uint64_t oldest = c->n > CGJ_CYCLE_RING ? c->n - CGJ_CYCLE_RING : 0;
    if (i < oldest + d) return 0;
    uint64_t limit = i - (oldest + d) + 1;
    if (limit > cap) limit = cap;
    uint32_t a = (uint32_t)(i % CGJ_CYCLE_RING), b = slot_back(a, d);
    uint32_t run = 0;
    while (run < limit && c->ring[a] == c->ring[b]) {
        run++;
        a = a ? a - 1 : CGJ_CYCLE_RING - 1;
        b = b ? b - 1 : CGJ_CYCLE_RING - 1;
    }
    return run;
}

static void propose(cgj_cycle_t *c, uint64_t i, uint32_t d)
{
    for (uint32_t k = 0; k < c->ncand; k++)
        if (c->cand[k].d == d) return;
    uint32_t run = backward_run(c, i, d, UINT64_MAX);
    if (run == 0) return; /* a hash collision */
    uint32_t k = c->ncand;
    if (k == CGJ_CYCLE_CANDIDATES) { /* full: replace the one explaining the shortest suffix */
        uint64_t worst = UINT64_MAX;
        for (uint32_t q = 0; q < c->ncand; q++) {
            uint64_t len = (uint64_t)c->cand[q].run + c->cand[q].d;
            if (len < worst) worst = len, k = q;
        }
        if ((uint64_t)run + d <= worst) return;
    } else {
        c->ncand++;
    }
    c->cand[k].d = d;
    c->cand[k].run = run;
}

/* ---- locking ------------------------------------------------------------------------------- */

/* The smallest e dividing d such that the cycle of the last d positions (ending at i) is e
 * periodic. */
static uint32_t primitive(const cgj_cycle_t *c, uint64_t i, uint32_t d)
{
    uint32_t base = (uint32_t)((i + 1 - d) % CGJ_CYCLE_RING);
    for (uint32_t e = 1; e <= d / 2; e++) {
        if (d % e) continue;
        uint32_t t = 0;
        while (t < d - e && at_off(c, base, t) == at_off(c, base, t + e)) t++;
        if (t == d - e) return e;
    }
    return d;
}

/* Start of the lexicographically least rotation of the p positions from start (a primitive
 * word: that rotation is unique). Two-pointer minimum-rotation algorithm, O(p), no memory. */
static uint32_t least_rotation(const cgj_cycle_t *c, uint64_t start, uint32_t p)
{
    uint32_t a = 0, b = 1, k = 0, base = (uint32_t)(start % CGJ_CYCLE_RING);
    while (a < p && b < p && k < p) {
        uint32_t ak = a + k, bk = b + k; /* < 2p: one subtraction wraps them */
        uint64_t x = at_off(c, base, ak >= p ? ak - p : ak), y = at_off(c, base, bk >= p ? bk - p : bk);
        if (x == y) {
            k++;
            continue;
        }
        if (x > y) a += k + 1;
        else b += k + 1;
        if (a == b) b++;
        k = 0;
    }
    return a < b ? a : b;
}

/* Lock on period d, confirmed at position i by the periodic suffix of len positions ending
 * there; returns whether position i is the head. */
static bool lock(cgj_cycle_t *c, uint64_t i, uint32_t d, uint64_t len)
{
    uint32_t p = primitive(c, i, d);
    uint64_t start = i + 1 - p;
    uint32_t m = least_rotation(c, start, p);
    uint64_t h = cgj_mix64(p ^ 0x6a09e667f3bcc908ull);
    uint32_t base = (uint32_t)(start % CGJ_CYCLE_RING);
    for (uint32_t t = 0, mt = m; t < p; t++, mt = mt + 1 == p ? 0 : mt + 1) h = cgj_mix64(h + at_off(c, base, mt));
    c->period = p;
    c->id = h ? h : 1;
    c->phase = p - 1 - m; /* the head is position start + m */
    c->locked_at = i;
    c->periodic_from = i + 1 - len;
    return c->phase == 0;
}

/* Position u broke the lock. The candidates were not followed while locked: bring their runs up
 * to u-1 (a cost bounded by the calls skipped, which paid nothing for them). */
static void unlock(cgj_cycle_t *c, uint64_t u)
{
    c->period = 0;
    c->phase = 0;
    c->id = 0;
    uint64_t skipped = u - 1 - c->locked_at; /* positions locked_at+1 .. u-1 */
    for (uint32_t k = 0; k < c->ncand;) {
        uint32_t r = skipped ? backward_run(c, u - 1, c->cand[k].d, skipped) : 0;
        if (r == skipped) {
            uint64_t run = (uint64_t)c->cand[k].run + r;
            c->cand[k].run = run > UINT32_MAX ? UINT32_MAX : (uint32_t)run;
        } else {
            c->cand[k].run = r;
        }
        if (c->cand[k].run) k++;
        else c->cand[k] = c->cand[--c->ncand];
    }
}

/* An unlocked call: the signature at position i (in slot) is already in the ring. */
static bool feed_unlocked(cgj_cycle_t *c, uint64_t i, uint32_t slot)
{
    uint64_t sig = c->ring[slot];
    for (uint32_t k = 0; k < c->ncand;) {
        uint32_t d = c->cand[k].d;
        if (i >= d && c->ring[slot_back(slot, d)] == sig) {
            if (c->cand[k].run != UINT32_MAX) c->cand[k].run++;
            k++;
        } else {
            c->cand[k] = c->cand[--c->ncand];
        }
    }

    /* Catch the index up with positions skipped while locked: only the last MAX_PERIOD can
     * still propose a period. */
    uint64_t from = i > CGJ_CYCLE_MAX_PERIOD ? i - CGJ_CYCLE_MAX_PERIOD : 0;
    if (c->indexed < from) c->indexed = from;
    for (; c->indexed < i; c->indexed++) index_at(c, c->indexed, NULL);
    uint32_t d[CGJ_CYCLE_SCALES];
    index_at(c, i, d);
    c->indexed = i + 1;
    for (int s = 0; s < CGJ_CYCLE_SCALES; s++)
        if (d[s]) propose(c, i, d[s]);

    uint64_t best_len = 0;
    uint32_t best = 0;
    for (uint32_t k = 0; k < c->ncand; k++) {
        uint64_t cd = c->cand[k].d, run = c->cand[k].run;
        if (run < (uint64_t)(c->confirm - 1) * cd) continue;
        if (run + cd > best_len || (run + cd == best_len && cd < best)) best_len = run + cd, best = (uint32_t)cd;
    }
    return best ? lock(c, i, best, best_len) : false;
}

bool cgj_cycle_feed(cgj_cycle_t *c, uint64_t sig)
{
    uint32_t slot = c->cur;
    c->ring[slot] = sig;
    c->cur = slot + 1 == CGJ_CYCLE_RING ? 0 : slot + 1;
    uint64_t i = c->n++;
    uint32_t p = c->period;
    if (CGJ_LIKELY(p)) {
        if (CGJ_LIKELY(c->ring[slot_back(slot, p)] == sig)) {
            uint32_t ph = c->phase + 1;
            if (ph == p) ph = 0;
            c->phase = ph;
            return ph == 0;
        }
        unlock(c, i);
    }
    return feed_unlocked(c, i, slot);
}
