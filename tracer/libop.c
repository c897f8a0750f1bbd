/*
 * libop.c — learning what replay needs to absorb a cuBLAS/cuDNN call whole (ir/libop.c keeps it).
 *
 * A LIB op marks a library call and groups the driver ops the library issued for it (the next
 * `nops` ops). Replay may skip the library when the call's key (everything but its device
 * pointers) and its fixed pointers equal the recorded ones: the library would issue the same
 * driver calls, with kernel parameters that are either
 *  - keyed: the same bytes whenever the key is the same (the handle's workspace, sizes,
 *    host-mode alpha), taken from the last run that called the library; or
 *  - derived: one of the call's device pointers plus a constant offset (A, B, C, A + k·lda).
 * Which word is which is learned from two samples of the group (the two eager runs a trace is
 * made of; later, a recorded run and a replay that had to call the library): a word that
 * changes exactly as one changing argument does is derived from it; a word that changes while
 * the key (and no pointer) changes is keyed; a word that changes for no visible reason (the
 * library keeps state of its own, or passes uninitialized bytes) makes the group unabsorbable:
 * the library is called, and each such call is a new sample to learn from.
 * Groups that hold host synchronizations, read-backs, host-to-device copies (their source is
 * the library's host memory) or allocations are never absorbed either.
 */
#include "tracer/tracer.h"
#include "base/log.h"

#include <string.h>

/* One sample of a group: its LIB op, the op list and which parameter values to read. */
typedef struct sample {
    const cgj_libop_t *lib;
    const CUdeviceptr *args;
    const uint8_t *key;
    uint32_t keylen, nargs;
    const cgj_oplist_t *list;
    uint32_t at;             /* index of the LIB op */
    const cgj_blocks_t *bl;  /* in-step allocations (NULL: none to match) */
    bool live;               /* read kp->live, not kp->rec */
} sample_t;

static const uint8_t *values(const sample_t *s, uint32_t j)
{
    const cgj_kparams_t *kp = s->list->ops[s->at + 1 + j].kp;
    return s->live ? kp->live : kp->rec;
}

static CUdeviceptr word(const uint8_t *p)
{
    CUdeviceptr v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The in-step block of address p at op `at` of sample s, or -1. */
static int block_of(const sample_t *s, CUdeviceptr p, uint32_t at)
{
    return s->bl ? cgj_blocks_find(s->bl, p, at) : -1;
}

/* Same memory in both samples: equal, or the same offset into the same in-step allocation. */
static bool same_addr(const sample_t *n, CUdeviceptr x, const sample_t *o, CUdeviceptr y, uint32_t at)
{
    if (x == y) return true;
    int bx = block_of(n, x, at), by = block_of(o, y, at);
    return bx >= 0 && bx == by && x - n->bl->b[bx].base == y - o->bl->b[by].base;
}

/* The changing argument word w (at op index `at`) is derived from, with *off; -1 if none.
 * Candidates move exactly as w does and lie in the same in-step block as w (or neither in
 * one, so that relocation keeps the offset). A word points into the buffer it is derived from:
 * the smallest offset at or above the argument wins (A + 4000 is A's, not B − 96's), then the
 * smallest below. */
static int derive(const sample_t *n, const sample_t *o, uint32_t changed, CUdeviceptr wn,
                  CUdeviceptr wo, uint32_t at, int64_t *off)
{
    int best = -1;
    uint64_t best_rank = UINT64_MAX;
    for (uint32_t i = 0; i < n->nargs; i++) {
        if (!(changed >> i & 1)) continue;
        int64_t d = (int64_t)(wn - n->args[i]);
        if (d != (int64_t)(wo - o->args[i])) continue;
        if (block_of(n, wn, at) != block_of(n, n->args[i], n->at)) continue;
        /* Offsets below the argument rank after every offset at or above it. */
        uint64_t rank = d < 0 ? (uint64_t)1 << 63 | (0 - (uint64_t)d) : (uint64_t)d;
        if (rank < best_rank) best = (int)i, best_rank = rank, *off = d;
    }
    return best;
}

static const cgj_libfix_t *find_fix(const cgj_libop_t *l, uint32_t op, uint32_t at)
{
    for (uint32_t k = 0; k < l->nfix; k++)
        if (l->fix[k].op == op && l->fix[k].at == at) return &l->fix[k];
    return NULL;
}

static void push_fix(cgj_libfix_t **fix, uint32_t *n, uint32_t *cap, cgj_libfix_t f)
{
    if (*n == *cap) *fix = cgj_xrealloc(*fix, (*cap = *cap ? 2 * *cap : 8) * sizeof **fix);
    (*fix)[(*n)++] = f;
}

/* Can op o of a group be replayed without its library? */
static bool op_absorbable(const cgj_op_t *o, cgj_reason_t *why)
{
    const char *what = NULL;
    switch (o->call.kind) {
    case CGJ_OP_KERNEL: case CGJ_OP_MEMSET: case CGJ_OP_EVENT_RECORD: case CGJ_OP_STREAM_WAIT:
    case CGJ_OP_HOST_FUNC:
        return true;
    case CGJ_OP_MEMCPY:
        if (o->call.u.m.dir != CGJ_DIR_H2D) return true;
        what = "a host-to-device copy from the library's memory";
        break;
    case CGJ_OP_ALLOC: case CGJ_OP_POOL_FREE: what = "an allocation"; break;
    default: what = cgj_op_docs[o->call.kind]; break;
    }
    cgj_reason_set(why, CGJ_REASON_LIB_ISSUES, CGJ_REASON_NO_OP, "%s (%s)", what, o->call.api);
    return false;
}

/* Learn lib (the newer sample n's LIB op) from samples n and o. */
static void learn(cgj_libop_t *lib, const sample_t *n, const sample_t *o)
{
    cgj_reason_t why = {.code = CGJ_REASON_NONE, .op = CGJ_REASON_NO_OP};
    bool ok = !lib->failed && !lib->never;
    if (!ok) cgj_reason_set(&why, lib->failed ? CGJ_REASON_LIB_FAILED : lib->never, CGJ_REASON_NO_OP, NULL);
    if (ok && n->nargs != o->nargs)
        ok = false, cgj_reason_set(&why, CGJ_REASON_LIB_ARG_COUNT, CGJ_REASON_NO_OP, "%u, then %u", o->nargs, n->nargs);
    bool keydiff = n->keylen != o->keylen || memcmp(n->key, o->key, n->keylen) != 0;
    uint32_t changed = 0;
    for (uint32_t i = 0; ok && i < n->nargs; i++)
        if (!same_addr(n, n->args[i], o, o->args[i], n->at)) changed |= 1u << i;
    /* A word that changes when the key does is the key's doing (a new alpha, a new handle's
     * workspace) only if no pointer changed too: A + lda·k with both A and lda new must not
     * be taken for a constant. */
    bool key_explains = keydiff && !changed;
    cgj_libfix_t *fix = NULL;
    uint32_t nfix = 0, cap = 0;
    for (uint32_t j = 0; ok && j < lib->nops; j++) {
        uint32_t at = n->at + 1 + j;
        const cgj_op_t *op = &n->list->ops[at];
        if (!op_absorbable(op, &why)) {
            ok = false;
            lib->for_good = true;
            break;
        }
        const cgj_kparams_t *kp = op->kp;
        if (!kp) continue;
        const uint8_t *vn = values(n, j), *vo = values(o, j);
        for (uint32_t s = 0; ok && s < kp->n; s++) {
            uint32_t base = kp->off[s], sz = kp->sz[s], k = 0;
            for (; ok && !kp->extra_form && k + 8 <= sz; k += 8) {
                CUdeviceptr wn = word(vn + base + k), wo = word(vo + base + k);
                const cgj_libfix_t *prev = find_fix(lib, j + 1, base + k);
                if (prev && wn == n->args[prev->arg] + (CUdeviceptr)prev->off) {
                    push_fix(&fix, &nfix, &cap, *prev);
                    continue;
                }
                if (same_addr(n, wn, o, wo, at)) continue; /* keyed */
                int64_t off = 0;
                int a = derive(n, o, changed, wn, wo, at, &off);
                if (a >= 0 && kp->varying[s]) {
                    push_fix(&fix, &nfix, &cap, (cgj_libfix_t){j + 1, base + k, (uint32_t)a, off});
                } else if (!key_explains) {
                    ok = false;
                    cgj_reason_set(&why, CGJ_REASON_LIB_UNEXPLAINED, at, "parameter %u (byte %u): %#llx, then %#llx",
                                   s, k, (unsigned long long)wo, (unsigned long long)wn);
                }
            }
            if (ok && k < sz && memcmp(vn + base + k, vo + base + k, sz - k) && !key_explains) {
                ok = false;
                cgj_reason_set(&why, CGJ_REASON_LIB_UNEXPLAINED, at, "parameter %u (bytes %u-%u)", s, k, sz);
            }
        }
    }
    if (ok) cgj_reason_set(&why, CGJ_REASON_NONE, CGJ_REASON_NO_OP, NULL);
    else if (!lib->absorbable_told++) cgj_reason_tally(&why); /* once per op, not per sample */
    cgj_anchors_lock(); /* the report reads what was learned */
    cgj_free(lib->fix);
    lib->fix = fix, lib->nfix = nfix;
    lib->free_args |= changed;
    lib->absorbable = ok;
    lib->why_not = why;
    cgj_anchors_unlock();
}

void cgj_libop_learn(cgj_oplist_t *a, uint32_t at, const cgj_oplist_t *b, const cgj_blocks_t *ta,
                     const cgj_blocks_t *tb)
{
    cgj_libop_t *la = a->ops[at].lib;
    const cgj_libop_t *lb = b->ops[at].lib;
    la->failed |= lb->failed;
    if (!la->never && lb->never) la->never = lb->never;
    sample_t n = {la, la->args, la->key, la->keylen, la->nargs, a, at, ta, false};
    sample_t o = {lb, lb->args, lb->key, lb->keylen, lb->nargs, b, at, tb, false};
    learn(la, &n, &o);
    char text[280];
    if (!la->absorbable)
        CGJ_LOG(trace, "op %u (%s) is not absorbed: %s", at, a->ops[at].call.api,
                cgj_reason_format(&la->why_not, text, sizeof text));
}

void cgj_libop_relearn(cgj_op_t *lib_op, const cgj_libcall_t *lc)
{
    cgj_libop_t *l = lib_op->lib;
    /* The trace's op list is only read through the group: a one-group view of it. */
    cgj_oplist_t view = {lib_op, l->nops + 1, l->nops + 1};
    sample_t n = {l, lc->args, lc->key, lc->keylen, lc->nargs, &view, 0, NULL, true};
    sample_t o = {l, l->args, l->key, l->keylen, l->nargs, &view, 0, NULL, false};
    l->never = lc->never;
    learn(l, &n, &o);
    cgj_free(l->key);
    l->key = cgj_xmemdup(lc->key, lc->keylen ? lc->keylen : 1);
    l->keylen = lc->keylen, l->nargs = lc->nargs;
    memcpy(l->args, lc->args, lc->nargs * sizeof lc->args[0]);
    memcpy(l->live_args, lc->args, lc->nargs * sizeof lc->args[0]);
    for (uint32_t j = 1; j <= l->nops; j++)
        if (lib_op[j].kp) memcpy(lib_op[j].kp->rec, lib_op[j].kp->live, lib_op[j].kp->size);
}
