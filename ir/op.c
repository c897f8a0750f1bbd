/*
 * op.c — ops from driver calls: the op table's names, deep copies of calls, op lists.
 *
 * Kernel parameters are copied by value using the layout the driver reports (ir/layout.h). A
 * kernel whose layout cannot be learned cannot be recorded: copying a guessed number of bytes
 * could read past the caller's arguments, and comparing them could miss a change.
 */
#include "ir/ir.h"
#include "ir/layout.h"
#include "base/vec.h"

#include <stdio.h>
#include <string.h>

const char *const cgj_op_names[CGJ_OP_COUNT] = {
#define CGJ_OP_NAME(name, cls, doc) #name,
    CGJ_OP_LIST(CGJ_OP_NAME)
#undef CGJ_OP_NAME
};
const char *const cgj_op_docs[CGJ_OP_COUNT] = {
#define CGJ_OP_DOC(name, cls, doc) doc,
    CGJ_OP_LIST(CGJ_OP_DOC)
#undef CGJ_OP_DOC
};
const unsigned char cgj_op_class[CGJ_OP_COUNT] = {
#define CGJ_OP_CLASS(name, cls, doc) cls,
    CGJ_OP_LIST(CGJ_OP_CLASS)
#undef CGJ_OP_CLASS
};

static cgj_op_t *oplist_push(cgj_oplist_t *l, cgj_op_kind_t kind)
{
    l->kinds |= 1u << kind;
    return CGJ_VEC_ADD(l->ops, l->n, l->cap);
}

/* Room for n items of t at *at, aligned for t; *at moves past them. */
#define CARVE(at, t, n) ((t *)carve((at), _Alignof(t), (size_t)(n) * sizeof(t)))
static void *carve(uint8_t **at, size_t align, size_t bytes)
{
    uintptr_t p = ((uintptr_t)*at + align - 1) & ~(uintptr_t)(align - 1);
    *at = (uint8_t *)p + bytes;
    return (void *)p;
}

/* One allocation for the op's parameters, the struct first and what an absorbed launch's guard
 * reads right after it (slots, recorded and live values): a step of many kernels walks them all
 * every run, and they share cache lines. */
static cgj_kparams_t *kparams_new(const cgj_layout_t *lay)
{
    size_t n = lay->n ? lay->n : 1, size = lay->size ? lay->size : 1;
    size_t npieces = n + size / 8 + 1; /* a slot's windows, at most one more than its 8-byte words */
    size_t total = sizeof(cgj_kparams_t) + n * (sizeof(cgj_slot_t) + 2 * sizeof(uint32_t) + 1 + sizeof(void *)) +
                   n * (2 * sizeof(uint32_t) + sizeof(uint64_t)) + npieces * sizeof(cgj_piece_t) + 3 * size +
                   16 * _Alignof(max_align_t); /* each carve aligns at most once */
    uint8_t *at = cgj_xcalloc(1, total);
    cgj_kparams_t *kp = CARVE(&at, cgj_kparams_t, 1);
    kp->n = lay->n;
    kp->size = lay->size;
    kp->extra_form = lay->extra_form;
    kp->slots = CARVE(&at, cgj_slot_t, n);
    kp->rec = carve(&at, _Alignof(max_align_t), size);
    kp->live = carve(&at, _Alignof(max_align_t), size);
    kp->off = CARVE(&at, uint32_t, n);
    kp->sz = CARVE(&at, uint32_t, n);
    kp->varying = CARVE(&at, uint8_t, n);
    kp->ptrs = CARVE(&at, void *, n);
    kp->inexec = carve(&at, _Alignof(max_align_t), size);
    kp->piece = CARVE(&at, cgj_piece_t, npieces);
    kp->gidx = CARVE(&at, uint32_t, n);
    kp->g8 = CARVE(&at, uint64_t, n);
    kp->g4 = CARVE(&at, uint32_t, n);
    if (lay->n) { /* a kernel without parameters has no arrays to copy */
        memcpy(kp->off, lay->off, lay->n * sizeof(uint32_t));
        memcpy(kp->sz, lay->sz, lay->n * sizeof(uint32_t));
    }
    for (uint32_t i = 0; i < kp->n; i++) kp->ptrs[i] = kp->live + kp->off[i];
    kp->slots_stale = true;
    return kp;
}

/* Append kp's slots that are `varying` (or not) and of `sz` bytes (0: of any other size) at
 * slots[*at]. */
static void split_part(cgj_kparams_t *kp, bool varying, uint32_t sz, uint32_t *at)
{
    for (uint32_t i = 0; i < kp->n; i++) {
        bool sized = sz ? kp->sz[i] == sz : kp->sz[i] != 8 && kp->sz[i] != 4;
        if (!kp->varying[i] == !varying && sized)
            kp->slots[(*at)++] = (cgj_slot_t){.i = i, .sz = kp->sz[i], .off = kp->off[i]};
    }
}

/* kp->piece from the varying slots ([nconst, n) of kp->slots). A window starts at the first
 * varying byte not yet covered and reaches 8 bytes on (or the buffer's end); a piece ends at the
 * last varying byte inside its window. */
static void make_pieces(cgj_kparams_t *kp)
{
    uint32_t nv = kp->n - kp->nconst, np = 0, wend = 0;
    cgj_slot_t *v = cgj_xmalloc((nv ? nv : 1) * sizeof *v);
    memcpy(v, kp->slots + kp->nconst, nv * sizeof *v);
    for (uint32_t a = 1; a < nv; a++) /* by offset (a kernel's slots mostly are already) */
        for (uint32_t b = a; b > 0 && v[b - 1].off > v[b].off; b--) {
            cgj_slot_t x = v[b];
            v[b] = v[b - 1], v[b - 1] = x;
        }
    for (uint32_t j = 0; j < nv; j++) {
        uint32_t a = v[j].off, end = v[j].off + v[j].sz;
        if (np && a < wend) { /* begins inside the last window: that piece grows to cover it */
            cgj_piece_t *last = &kp->piece[np - 1];
            uint32_t in = end < wend ? end : wend;
            if (in - last->off > last->sz) last->sz = in - last->off;
            a = in;
        }
        for (; a < end; a = wend) {
            wend = a + 8 < kp->size ? a + 8 : kp->size;
            kp->piece[np++] = (cgj_piece_t){.off = a, .sz = (end < wend ? end : wend) - a};
        }
    }
    kp->pieces = np;
    cgj_free(v);
}

void cgj_kparams_split(cgj_kparams_t *kp)
{
    uint32_t at = 0;
    split_part(kp, false, 8, &at), kp->c8 = at;
    split_part(kp, false, 4, &at), kp->c4 = at;
    split_part(kp, false, 0, &at), kp->nconst = at;
    split_part(kp, true, 8, &at), kp->v8 = at;
    split_part(kp, true, 4, &at), kp->v4 = at;
    split_part(kp, true, 0, &at);
    for (uint32_t j = 0; j < kp->c4; j++) {
        kp->gidx[j] = kp->slots[j].i;
        if (j < kp->c8) memcpy(&kp->g8[j], kp->rec + kp->slots[j].off, 8);
        else memcpy(&kp->g4[j - kp->c8], kp->rec + kp->slots[j].off, 4);
    }
    make_pieces(kp);
    kp->slots_stale = false;
}

static void kparams_free(cgj_kparams_t *kp)
{
    cgj_free(kp); /* one allocation (kparams_new) */
}

/* Make the op own what its call points to. */
static void own_call(cgj_op_t *o)
{
    if (o->call.kind == CGJ_OP_KERNEL) {
        o->call.u.k.params = o->kp->ptrs;
        o->call.u.k.blob = o->kp->extra_form ? o->kp->live : NULL;
        if (o->call.u.k.nattrs)
            o->call.u.k.attrs = cgj_xmemdup(o->call.u.k.attrs, o->call.u.k.nattrs * sizeof(CUlaunchAttribute));
    }
    if (cgj_call_staged(&o->call))
        o->call.u.m.hsrc = NULL; /* staged: the source is read at call time, its address never matters */
    if (o->call.kind == CGJ_OP_LIB) o->call.u.l.lc = NULL;
}

bool cgj_oplist_record(cgj_oplist_t *l, const cgj_call_t *c, cgj_reason_code_t *why)
{
    cgj_layout_t lay;
    if (c->kind == CGJ_OP_KERNEL && !cgj_layout_get(c, &lay)) {
        *why = CGJ_REASON_ABORT_NO_LAYOUT;
        return false;
    }
    cgj_op_t *o = oplist_push(l, c->kind);
    o->call = *c;
    if (c->kind == CGJ_OP_KERNEL) {
        o->kp = kparams_new(&lay);
        for (uint32_t i = 0; i < o->kp->n; i++)
            memcpy(cgj_kparams_rec_mut(o->kp) + o->kp->off[i], cgj_call_slot(c, o->kp, i), o->kp->sz[i]);
        memcpy(o->kp->live, o->kp->rec, o->kp->size);
    }
    if (c->kind == CGJ_OP_LIB) o->lib = cgj_libop_new(c->u.l.lc);
    own_call(o);
    return true;
}

void cgj_oplist_clone(cgj_oplist_t *l, const cgj_op_t *src)
{
    cgj_op_t *o = oplist_push(l, src->call.kind);
    o->call = src->call;
    o->handoff = src->handoff;
    o->gap_ns = src->gap_ns;
    if (src->kp) {
        cgj_layout_t lay = {.n = src->kp->n,
                            .size = src->kp->size,
                            .extra_form = src->kp->extra_form,
                            .off = src->kp->off,
                            .sz = src->kp->sz};
        o->kp = kparams_new(&lay);
        memcpy(cgj_kparams_rec_mut(o->kp), src->kp->live, o->kp->size);
        memcpy(o->kp->live, src->kp->live, o->kp->size);
    }
    if (src->lib) o->lib = cgj_libop_clone(src->lib);
    own_call(o);
}

void cgj_oplist_free(cgj_oplist_t *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        cgj_op_t *o = &l->ops[i];
        if (o->call.kind == CGJ_OP_KERNEL && o->call.u.k.nattrs) cgj_free((void *)o->call.u.k.attrs);
        kparams_free(o->kp);
        cgj_libop_free(o->lib);
    }
    cgj_free(l->ops);
    memset(l, 0, sizeof *l);
}

const char *cgj_op_describe(const cgj_op_t *o, char *buf, size_t len)
{
    const char *name = NULL;
    if (o->call.kind == CGJ_OP_KERNEL) name = cgj_layout_kernel_name(o->call.u.k.f);
    snprintf(buf, len, "%s%s%s%s", o->call.api, name ? "(" : "", name ? name : "", name ? ")" : "");
    return buf;
}

uint32_t cgj_op_event_back(const cgj_op_t *o, CUevent ev)
{
    uint32_t back = 0;
    for (const cgj_op_t *p = o; p->ev_prev;) {
        back += p->ev_prev;
        p -= p->ev_prev;
        if (p->call.u.e.ev == ev) return back;
    }
    return 0;
}

cgj_reason_code_t cgj_op_break_reason(const cgj_op_t *o)
{
    switch (o->call.kind) {
    case CGJ_OP_SYNC: return CGJ_REASON_BREAK_SYNC;
    case CGJ_OP_QUERY: return CGJ_REASON_BREAK_QUERY;
    case CGJ_OP_READBACK: return CGJ_REASON_BREAK_READBACK;
    case CGJ_OP_FREE: return CGJ_REASON_BREAK_FREE;
    case CGJ_OP_GRAPH_LAUNCH: return CGJ_REASON_BREAK_OWN_GRAPH;
    case CGJ_OP_AS_MADE: return CGJ_REASON_BREAK_AS_MADE;
    default: return o->handoff ? CGJ_REASON_BREAK_HANDOFF : o->chunk_end ? o->chunk_end : CGJ_REASON_BREAK_CHUNK;
    }
}
