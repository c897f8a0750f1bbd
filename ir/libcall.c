/*
 * libcall.c — a library call's record (LIB op): its key, its pointer arguments, and the kernel
 * parameter words derived from them (see tracer/libop.c for how those are learned).
 */
#include "ir/ir.h"

#include <string.h>

cgj_libop_t *cgj_libop_new(const cgj_libcall_t *lc)
{
    cgj_libop_t *l = cgj_xcalloc(1, sizeof *l);
    l->keylen = lc->keylen;
    l->key = cgj_xmemdup(lc->key, lc->keylen ? lc->keylen : 1);
    l->nargs = lc->nargs;
    memcpy(l->args, lc->args, lc->nargs * sizeof lc->args[0]);
    memcpy(l->live_args, lc->args, lc->nargs * sizeof lc->args[0]);
    l->live_nargs = lc->nargs;
    l->never = l->live_never = lc->never;
    l->collective = lc->collective;
    l->ew = lc->ew;
    l->gemm = lc->gemm;
    l->conv = lc->conv;
    return l;
}

cgj_libop_t *cgj_libop_clone(const cgj_libop_t *src)
{
    cgj_libop_t *l = cgj_xmemdup(src, sizeof *src);
    memcpy(l->args, src->live_args, sizeof l->args);
    l->nargs = src->live_nargs;
    l->never = src->live_never;
    /* A replay that ran the library for another call (another key) and left the trace inside
     * it: the recording holds what the library issued for that call, under that call's key. */
    if (src->live_other_key) l->keylen = src->live_keylen;
    l->key = cgj_xmemdup(src->live_other_key ? src->live_key : src->key, l->keylen ? l->keylen : 1);
    l->live_key = NULL, l->live_keylen = l->live_cap = 0;
    l->synthetic = src->live_absorbed;
    l->live_absorbed = false;
    if (src->live_other_key) { /* what was learned belongs to the recorded call */
        l->live_other_key = l->absorbable = false;
        l->fix = NULL, l->nfix = 0, l->seen = NULL, l->free_args = 0;
        l->ew.spec = NULL, l->gemm.valid = l->conv.valid = false; /* they described the recorded call */
        return l;
    }
    l->fix = src->nfix ? cgj_xmemdup(src->fix, src->nfix * sizeof *src->fix) : NULL;
    l->seen = src->seen && src->nops ? cgj_xmemdup(src->seen, src->nops * sizeof *src->seen) : NULL;
    return l;
}

void cgj_libop_note_call(cgj_libop_t *l, const cgj_libcall_t *lc, bool absorbed)
{
    uint32_t n = lc->nargs < CGJ_LIB_MAX_ARGS ? lc->nargs : CGJ_LIB_MAX_ARGS;
    memcpy(l->live_args, lc->args, n * sizeof lc->args[0]);
    l->live_nargs = n;
    l->live_never = lc->never;
    l->live_absorbed = absorbed;
    l->live_other_key = !absorbed && (lc->keylen != l->keylen || memcmp(lc->key, l->key, lc->keylen) != 0);
    if (!l->live_other_key) return;
    if (lc->keylen > l->live_cap) {
        cgj_free(l->live_key);
        l->live_key = cgj_xmalloc(l->live_cap = lc->keylen);
    }
    memcpy(l->live_key, lc->key, lc->keylen);
    l->live_keylen = lc->keylen;
}

void cgj_libop_free(cgj_libop_t *l)
{
    if (!l) return;
    cgj_free(l->key), cgj_free(l->fix), cgj_free(l->seen), cgj_free(l->live_key), cgj_free(l);
}

bool cgj_libop_matches(const cgj_libop_t *l, const cgj_libcall_t *lc)
{
    if (l->keylen != lc->keylen || l->nargs != lc->nargs || memcmp(l->key, lc->key, l->keylen)) return false;
    for (uint32_t i = 0; i < l->nargs; i++)
        if (!(l->free_args >> i & 1) && l->args[i] != lc->args[i]) return false;
    return true;
}

void cgj_opvals_of(const cgj_call_t *c, cgj_opvals_t *v)
{
    memset(v, 0, sizeof *v);
    switch (c->kind) {
    case CGJ_OP_KERNEL:
        memcpy(v->dims, c->u.k.grid, sizeof c->u.k.grid);
        memcpy(v->dims + 3, c->u.k.block, sizeof c->u.k.block);
        v->dims[6] = c->u.k.smem;
        break;
    case CGJ_OP_MEMCPY:
        v->dst = c->u.m.dir == CGJ_DIR_D2H ? (CUdeviceptr)(uintptr_t)c->u.m.hdst : c->u.m.dst;
        v->src = c->u.m.dir == CGJ_DIR_H2D ? (CUdeviceptr)(uintptr_t)c->u.m.hsrc : c->u.m.src;
        v->count = c->u.m.bytes;
        break;
    case CGJ_OP_MEMSET:
        v->dst = c->u.s.dst, v->count = c->u.s.count, v->value = c->u.s.value, v->elem = c->u.s.elem;
        break;
    default: break;
    }
}

void cgj_libop_fill(cgj_op_t *lib_op, const cgj_libcall_t *lc)
{
    const cgj_libop_t *l = lib_op->lib;
    for (uint32_t j = 1; j <= l->nops; j++) {
        cgj_kparams_t *kp = lib_op[j].kp;
        if (!kp || !kp->nvarying) continue;
        for (uint32_t s = 0; s < kp->n; s++)
            if (kp->varying[s]) memcpy(kp->live + kp->off[s], kp->rec + kp->off[s], kp->sz[s]);
    }
    for (uint32_t k = 0; k < l->nfix; k++) {
        const cgj_libfix_t *f = &l->fix[k];
        CUdeviceptr v = lc->args[f->arg] + (CUdeviceptr)f->off;
        cgj_call_t *c = &lib_op[f->op].call;
        if (f->field == CGJ_LIBFIX_WORD) memcpy(lib_op[f->op].kp->live + f->at, &v, sizeof v);
        else if (c->kind == CGJ_OP_MEMSET) c->u.s.dst = v;
        else if (f->field == CGJ_LIBFIX_DST) c->u.m.dst = v;
        else c->u.m.src = v;
    }
}
