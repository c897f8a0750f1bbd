/*
 * libop.c — learning what replay needs to absorb a cuBLAS/cuDNN call whole (ir/libcall.c keeps it).
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
 * The copies and memsets of a group are learned the same way: their addresses are keyed or
 * derived (split-K GEMMs clear their output C with a memset before the kernels accumulate into
 * it, and C moves with the program's allocator), and their sizes and values, as the kernels'
 * grids and blocks, must be the same in both samples or the key's doing.
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
    uint32_t at;              /* index of the LIB op */
    const cgj_blocks_t *bl;   /* in-step allocations (NULL: none to match) */
    bool live;                /* read kp->live, not kp->rec */
    bool own;                 /* the values are cgjit's, not the library's (cgj_libop_t.synthetic) */
    const cgj_opvals_t *seen; /* the group's other values (NULL: its ops' calls) */
} sample_t;

static void other_values(const sample_t *s, uint32_t j, cgj_opvals_t *v)
{
    if (s->seen) *v = s->seen[j];
    else cgj_opvals_of(&s->list->ops[s->at + 1 + j].call, v);
}

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
static int derive(const sample_t *n, const sample_t *o, uint32_t changed, CUdeviceptr wn, CUdeviceptr wo, uint32_t at,
                  int64_t *off)
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

static const cgj_libfix_t *find_fix(const cgj_libop_t *l, uint32_t op, uint32_t field, uint32_t at)
{
    for (uint32_t k = 0; k < l->nfix; k++)
        if (l->fix[k].op == op && l->fix[k].field == field && l->fix[k].at == at) return &l->fix[k];
    return NULL;
}

/* What one learning pass finds: the fixes so far, and whether the group is still absorbable. */
typedef struct learning {
    cgj_libop_t *lib;
    const sample_t *n, *o;
    uint32_t changed;  /* arguments that differ between the samples */
    bool keydiff;      /* the samples' keys differ */
    bool key_explains; /* an address that changes is the key's doing */
    cgj_libfix_t *fix;
    uint32_t nfix, cap;
    bool ok;
    cgj_reason_t why;
} learning_t;

static void push_fix(learning_t *L, cgj_libfix_t f)
{
    if (L->nfix == L->cap) L->fix = cgj_xrealloc(L->fix, (L->cap = L->cap ? 2 * L->cap : 8) * sizeof *L->fix);
    L->fix[L->nfix++] = f;
}

/* One address-sized value of group op j (op index at): a kernel parameter word (field WORD at
 * byte `byte`, patchable when `patchable`) or a copy/memset operand, wn in the newer sample and
 * wo in the older. It is the same memory in both (keyed), derived from a changed argument (a
 * fix), or explained by the key; else the group is not absorbable. */
static void learn_value(learning_t *L, uint32_t j, uint32_t at, cgj_libfix_field_t field, uint32_t byte, CUdeviceptr wn,
                        CUdeviceptr wo, bool patchable)
{
    const sample_t *n = L->n, *o = L->o;
    const cgj_libfix_t *prev = find_fix(L->lib, j + 1, field, byte);
    if (prev && wn == n->args[prev->arg] + (CUdeviceptr)prev->off) {
        push_fix(L, *prev);
        return;
    }
    if (same_addr(n, wn, o, wo, at)) return; /* keyed */
    int64_t off = 0;
    int a = derive(n, o, L->changed, wn, wo, at, &off);
    if (a >= 0 && patchable) {
        push_fix(L, (cgj_libfix_t){j + 1, byte, field, (uint32_t)a, off});
    } else if (!L->key_explains) {
        L->ok = false;
        static const char *const what[] = {"parameter word at byte", "destination of", "source of"};
        cgj_reason_set(&L->why, CGJ_REASON_LIB_UNEXPLAINED, at, "%s %u: %#llx, then %#llx", what[field],
                       field == CGJ_LIBFIX_WORD ? byte : j + 1, (unsigned long long)wo, (unsigned long long)wn);
    }
}

/* Group op j's values other than kernel parameters: the dimensions, counts and memset values
 * must be the same, or the keys differ (no pointer decides them: they are the key's doing, and
 * the op keeps the latest sample's); the copy and memset addresses are learned as words. */
static void learn_other_values(learning_t *L, uint32_t j, uint32_t at)
{
    cgj_opvals_t vn, vo;
    other_values(L->n, j, &vn);
    other_values(L->o, j, &vo);
    if ((vn.count != vo.count || vn.value != vo.value || vn.elem != vo.elem ||
         memcmp(vn.dims, vo.dims, sizeof vn.dims)) &&
        !L->keydiff) {
        L->ok = false;
        cgj_reason_set(&L->why, CGJ_REASON_LIB_UNEXPLAINED, at, "the size, value or launch dimensions of op %u", j + 1);
        return;
    }
    learn_value(L, j, at, CGJ_LIBFIX_DST, 0, vn.dst, vo.dst, true);
    if (L->ok) learn_value(L, j, at, CGJ_LIBFIX_SRC, 0, vn.src, vo.src, true);
}

/* Can op o of a group be replayed without its library? */
static bool op_absorbable(const cgj_op_t *o, cgj_reason_t *why)
{
    const char *what = NULL;
    switch (o->call.kind) {
    case CGJ_OP_KERNEL:
    case CGJ_OP_MEMSET:
    case CGJ_OP_EVENT_RECORD:
    case CGJ_OP_STREAM_WAIT:
    case CGJ_OP_HOST_FUNC: return true;
    case CGJ_OP_MEMCPY:
        if (o->call.u.m.dir != CGJ_DIR_H2D) return true;
        what = "a host-to-device copy from the library's memory";
        break;
    case CGJ_OP_ALLOC:
    case CGJ_OP_POOL_FREE: what = "an allocation"; break;
    default: what = cgj_op_docs[o->call.kind]; break;
    }
    cgj_reason_set(why, CGJ_REASON_LIB_ISSUES, CGJ_REASON_NO_OP, "%s (%s)", what, o->call.api);
    return false;
}

/* Learn lib (the newer sample n's LIB op) from samples n and o. */
static void learn(cgj_libop_t *lib, const sample_t *n, const sample_t *o)
{
    learning_t L = {.lib = lib,
                    .n = n,
                    .o = o,
                    .ok = !lib->failed && !lib->never,
                    .why = {.code = CGJ_REASON_NONE, .op = CGJ_REASON_NO_OP}};
    if (!L.ok) cgj_reason_set(&L.why, lib->failed ? CGJ_REASON_LIB_FAILED : lib->never, CGJ_REASON_NO_OP, NULL);
    if (L.ok && n->nargs != o->nargs)
        L.ok = false,
        cgj_reason_set(&L.why, CGJ_REASON_LIB_ARG_COUNT, CGJ_REASON_NO_OP, "%u, then %u", o->nargs, n->nargs);
    if (L.ok && (n->own || o->own))
        L.ok = false, cgj_reason_set(&L.why, CGJ_REASON_LIB_OWN_SAMPLE, CGJ_REASON_NO_OP, NULL);
    if (L.ok && n->live && !o->seen) /* a group recorded before its copies were learned */
        L.ok = false, cgj_reason_set(&L.why, CGJ_REASON_LIB_UNEXPLAINED, CGJ_REASON_NO_OP, "no earlier sample");
    L.keydiff = n->keylen != o->keylen || memcmp(n->key, o->key, n->keylen) != 0;
    for (uint32_t i = 0; L.ok && i < n->nargs; i++)
        if (!same_addr(n, n->args[i], o, o->args[i], n->at)) L.changed |= 1u << i;
    /* A value that changes when the key does is the key's doing (a new alpha, a new handle's
     * workspace) only if no pointer changed too: A + lda·k with both A and lda new must not
     * be taken for a constant. */
    L.key_explains = L.keydiff && !L.changed;
    cgj_opvals_t *seen = cgj_xcalloc(lib->nops ? lib->nops : 1, sizeof *seen);
    for (uint32_t j = 0; L.ok && j < lib->nops; j++) {
        uint32_t at = n->at + 1 + j;
        const cgj_op_t *op = &n->list->ops[at];
        if (!op_absorbable(op, &L.why)) {
            L.ok = false;
            lib->for_good = true;
            break;
        }
        learn_other_values(&L, j, at);
        const cgj_kparams_t *kp = op->kp;
        if (!kp) continue;
        const uint8_t *vn = values(n, j), *vo = values(o, j);
        for (uint32_t s = 0; L.ok && s < kp->n; s++) {
            uint32_t base = kp->off[s], sz = kp->sz[s], k = 0;
            for (; L.ok && !kp->extra_form && k + 8 <= sz; k += 8)
                learn_value(&L, j, at, CGJ_LIBFIX_WORD, base + k, word(vn + base + k), word(vo + base + k),
                            kp->varying[s]);
            if (L.ok && k < sz && memcmp(vn + base + k, vo + base + k, sz - k) && !L.key_explains) {
                L.ok = false;
                cgj_reason_set(&L.why, CGJ_REASON_LIB_UNEXPLAINED, at, "parameter %u (bytes %u-%u)", s, k, sz);
            }
        }
    }
    for (uint32_t j = 0; j < lib->nops; j++) other_values(n, j, &seen[j]);
    if (L.ok) cgj_reason_set(&L.why, CGJ_REASON_NONE, CGJ_REASON_NO_OP, NULL);
    else if (cgj_libop_learned() && !lib->absorbable_told++) cgj_reason_tally(&L.why); /* once per op */
    cgj_anchors_lock(); /* the report reads what was learned */
    cgj_free(lib->fix);
    lib->fix = L.fix, lib->nfix = L.nfix;
    cgj_free(lib->seen);
    lib->seen = seen;
    lib->free_args |= L.changed;
    lib->synthetic = n->own; /* what `seen` now holds */
    lib->absorbable = L.ok;
    lib->why_not = L.why;
    cgj_anchors_unlock();
}

void cgj_libop_learn(cgj_oplist_t *a, uint32_t at, const cgj_oplist_t *b, const cgj_blocks_t *ta,
                     const cgj_blocks_t *tb)
{
    cgj_libop_t *la = a->ops[at].lib;
    const cgj_libop_t *lb = b->ops[at].lib;
    la->failed |= lb->failed;
    if (!la->never && lb->never) la->never = lb->never;
    sample_t n = {la, la->args, la->key, la->keylen, la->nargs, a, at, ta, false, la->synthetic, NULL};
    sample_t o = {lb, lb->args, lb->key, lb->keylen, lb->nargs, b, at, tb, false, lb->synthetic, NULL};
    learn(la, &n, &o);
    char text[280];
    if (!la->absorbable) {
        CGJ_LOG(trace, "op %u (%s) is not absorbed: %s", at, a->ops[at].call.api,
                cgj_reason_format(&la->why_not, text, sizeof text));
        return;
    }
    /* Learned, not proven: used only under CGJIT_LIBS_LEARNED; otherwise the library runs. */
    CGJ_LOG(trace, "op %u (%s) %s: %u ops, free arguments %#x, %u derived values", at, a->ops[at].call.api,
            cgj_libop_learned() ? "is absorbed whole" : "would be absorbed whole under CGJIT_LIBS_LEARNED", la->nops,
            la->free_args, la->nfix);
    for (uint32_t k = 0; k < la->nfix; k++) {
        static const char *const field[] = {"word at byte", "destination", "source"};
        const cgj_libfix_t *f = &la->fix[k];
        CGJ_LOG(trace, "  op %u: %s %u = argument %u %+lld", at + f->op, field[f->field], f->at, f->arg,
                (long long)f->off);
    }
}

void cgj_libop_relearn(cgj_op_t *lib_op, const cgj_libcall_t *lc)
{
    cgj_libop_t *l = lib_op->lib;
    /* The trace's op list is only read through the group: a one-group view of it. */
    cgj_oplist_t view = {.ops = lib_op, .n = l->nops + 1, .cap = l->nops + 1};
    sample_t n = {l, lc->args, lc->key, lc->keylen, lc->nargs, &view, 0, NULL, true, false, NULL};
    sample_t o = {l, l->args, l->key, l->keylen, l->nargs, &view, 0, NULL, false, l->synthetic, l->seen};
    l->never = lc->never;
    learn(l, &n, &o);
    cgj_free(l->key);
    l->key = cgj_xmemdup(lc->key, lc->keylen ? lc->keylen : 1);
    l->keylen = lc->keylen, l->nargs = lc->nargs;
    memcpy(l->args, lc->args, lc->nargs * sizeof lc->args[0]);
    memcpy(l->live_args, lc->args, lc->nargs * sizeof lc->args[0]);
    l->live_nargs = lc->nargs, l->live_never = lc->never, l->live_other_key = false;
    for (uint32_t j = 1; j <= l->nops; j++)
        if (lib_op[j].kp) memcpy(cgj_kparams_rec_mut(lib_op[j].kp), lib_op[j].kp->live, lib_op[j].kp->size);
}
