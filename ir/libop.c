/*
 * libop.c — a library call's record (LIB op): its key, its pointer arguments, and the kernel
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
    l->never = lc->never;
    return l;
}

cgj_libop_t *cgj_libop_clone(const cgj_libop_t *src)
{
    cgj_libop_t *l = cgj_xmemdup(src, sizeof *src);
    memcpy(l->args, src->live_args, sizeof l->args);
    l->key = cgj_xmemdup(src->key, src->keylen ? src->keylen : 1);
    l->fix = src->nfix ? cgj_xmemdup(src->fix, src->nfix * sizeof *src->fix) : NULL;
    return l;
}

void cgj_libop_note_call(cgj_libop_t *l, const cgj_libcall_t *lc)
{
    uint32_t n = lc->nargs < CGJ_LIB_MAX_ARGS ? lc->nargs : CGJ_LIB_MAX_ARGS;
    memcpy(l->live_args, lc->args, n * sizeof lc->args[0]);
}

void cgj_libop_free(cgj_libop_t *l)
{
    if (!l) return;
    cgj_free(l->key), cgj_free(l->fix), cgj_free(l);
}

bool cgj_libop_matches(const cgj_libop_t *l, const cgj_libcall_t *lc)
{
    if (l->keylen != lc->keylen || l->nargs != lc->nargs || memcmp(l->key, lc->key, l->keylen)) return false;
    for (uint32_t i = 0; i < l->nargs; i++)
        if (!(l->free_args >> i & 1) && l->args[i] != lc->args[i]) return false;
    return true;
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
        memcpy(lib_op[f->op].kp->live + f->at, &v, sizeof v);
    }
}
