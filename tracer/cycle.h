/*
 * cycle.h — the per-thread cycle detector behind CGJIT_STEP=auto (docs/steps.md).
 *
 * Every driver call of a thread has a nonzero 64-bit signature. The detector is fed them one by
 * one and finds the loop: it locks on a period p (1 <= p <= CGJ_CYCLE_MAX_PERIOD) once the last
 * confirm*p signatures are periodic with period p, and marks one position of the cycle as its
 * head, where each step begins. The head and the cycle's id are canonical: they depend only on
 * the cycle itself (the rotation of it that is lexicographically smallest starts at the head),
 * never on the prefix before the loop or on the moment it was detected.
 *
 * Rule when several periods qualify at once: the one that explains the longest recent suffix
 * wins, then the smallest; the winner is then reduced to its primitive root (A B A B locks on
 * 2). In a stream that is periodic with period p this is the smallest qualifying period; it only
 * differs from "the smallest" when a short inner repetition of a longer, already confirmed loop
 * (the A B A B of C A B A B) qualifies at the same call.
 *
 * While locked each call costs one comparison (sig == the signature p calls ago); a mismatch
 * (an extra or a changed call) unlocks, and detection starts again: the same loop re-locks with
 * the same head and id once it has repeated confirm times. Unlocked, a call costs a few hash
 * table probes: k-gram hashes (k = 1, 4, 16) of the stream index the last position of each
 * k-gram, whose distance proposes candidate periods; a candidate is verified once, by an O(p)
 * backwards comparison, and then followed in O(1) per call.
 *
 * The state is a fixed-size struct with no heap (it lives in thread-local storage), about
 * 160 KiB. Not thread-safe: one detector per thread.
 */
#ifndef CGJ_CYCLE_H
#define CGJ_CYCLE_H

#include "base/cgj_base.h"

#define CGJ_CYCLE_MAX_PERIOD 4096
#define CGJ_CYCLE_RING (3 * CGJ_CYCLE_MAX_PERIOD) /* the last signatures, for comparisons */
#define CGJ_CYCLE_BUCKET_BITS 12
#define CGJ_CYCLE_BUCKETS (1 << CGJ_CYCLE_BUCKET_BITS) /* k-gram index: buckets of ... */
#define CGJ_CYCLE_WAYS 4                               /* ... 4 entries (16-bit tag, 16-bit position) */
#define CGJ_CYCLE_SCALES 3                             /* k-gram lengths indexed: 1, 4, 16 */
#define CGJ_CYCLE_CANDIDATES 16                        /* candidate periods followed at once */
#define CGJ_CYCLE_MIXED 32                             /* mixed signatures of the last 16 positions */

typedef struct cgj_cycle {
    uint64_t n;             /* signatures fed */
    uint32_t cur;           /* ring slot of the next signature */
    uint32_t confirm;       /* repetitions required before locking */
    uint32_t period;        /* locked period, 0 if none */
    uint32_t phase;         /* locked: position of the last call in the cycle, 0 = head */
    uint64_t id;            /* locked cycle's id, 0 if none */
    uint64_t indexed;       /* positions below this are in the k-gram index (or too old to matter) */
    uint64_t locked_at;     /* the position that locked: candidates are followed up to it */
    uint64_t periodic_from; /* locked: the first position of the periodic suffix that locked it */
    uint64_t rolled;        /* roll[] holds the k-gram hashes ending at position rolled - 1 */
    uint64_t roll[CGJ_CYCLE_SCALES];
    uint64_t powk[CGJ_CYCLE_SCALES]; /* the rolling hash's base to the power k */
    uint64_t mixed[CGJ_CYCLE_MIXED];
    uint32_t ncand;
    struct {
        uint32_t d;   /* candidate period */
        uint32_t run; /* consecutive latest calls equal to the call d before them */
    } cand[CGJ_CYCLE_CANDIDATES];
    uint32_t table[CGJ_CYCLE_BUCKETS][CGJ_CYCLE_WAYS];
    uint64_t ring[CGJ_CYCLE_RING];
} cgj_cycle_t;

/* confirm: repetitions required before locking (values below 2 mean 2). */
void cgj_cycle_init(cgj_cycle_t *c, uint32_t confirm);
/* Feed the next signature. Returns true when this call is the head of the locked cycle: a step
 * begins here (also on the call that locks, when that call is the head). */
bool cgj_cycle_feed(cgj_cycle_t *c, uint64_t sig);
/* The locked period, 0 if none. */
uint32_t cgj_cycle_period(const cgj_cycle_t *c);
/* A stable nonzero identifier of the locked cycle (a hash of its canonical rotation), 0 if none:
 * the same loop gives the same id whatever came before it. It is made of the signatures alone,
 * so it is the same from run to run when they are: the caller's signatures must never hash an
 * address (implicit.c hashes names and stream ordinals). */
uint64_t cgj_cycle_id(const cgj_cycle_t *c);
/* Signatures with one of these bits set are marked, each bit a mark of its own (the caller's
 * meaning: implicit.c marks the calls that synchronize with the host, and those that do GPU
 * work a graph holds). */
#define CGJ_CYCLE_MARK 2ull
#define CGJ_CYCLE_MARK2 4ull
/* How many signatures of one turn of the locked cycle have the mark `bit` (O(period)); 0 if
 * none is locked. */
uint32_t cgj_cycle_marked(const cgj_cycle_t *c, uint64_t bit);
/* How many calls the locked cycle has repeated over: from the first of the periodic calls that
 * locked it to the last one fed (at least 2 turns); 0 if none is locked. */
uint64_t cgj_cycle_span(const cgj_cycle_t *c);
/* Forget everything fed so far (confirm is kept). */
void cgj_cycle_reset(cgj_cycle_t *c);

#endif /* CGJ_CYCLE_H */
