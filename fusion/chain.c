/*
 * chain.c — from trace ops to a chain (fusion.h): which kernels are elementwise, their buffers,
 * and which buffers' values must reach memory.
 *
 * Sequential semantics per element are what make the chain one kernel: every stage touches only
 * element i of each buffer, so running all stages for element i before element i+1 computes
 * what the kernels computed one after the other, provided two distinct pointers never reach the
 * same element. Buffers are therefore either the same address (then the same buffer, whose
 * current value flows in a register) or disjoint ranges; anything else drops the chain
 * (FUSE_ALIAS). Addresses are the trace's relocated ones, so an in-step allocation the pool
 * reused for another block at the same address is, per element, just the same buffer written
 * again.
 */
#include "fusion/fusion.h"
#include "ir/layout.h"
#include "base/mem.h"

#include <string.h>

const cgj_ew_spec_t *cgj_fusion_spec_of(const cgj_op_t *o, cgj_reason_t *why)
{
    why->code = CGJ_REASON_NONE;
    if (o->call.kind != CGJ_OP_KERNEL || !o->kp) return NULL;
    const char *name = cgj_layout_kernel_name(o->call.u.k.f);
    const cgj_ew_spec_t *sp = cgj_fusion_lookup(name);
    if (!sp) return NULL;
    const cgj_kparams_t *kp = o->kp;
    bool agrees = !kp->extra_form && kp->n == sp->nparams;
    for (uint32_t k = 0; agrees && k < kp->n; k++) agrees = kp->sz[k] == cgj_ew_param_bytes(sp, k);
    if (agrees) return sp;
    cgj_reason_set(why, CGJ_REASON_FUSE_LAYOUT, CGJ_REASON_NO_OP,
                   "kernel %s: %u parameter(s) of %u byte(s) in all, the spec has %u", name, kp->n, kp->size,
                   sp->nparams);
    return NULL;
}

/* The value of parameter k of op o as recorded, zero-extended: a kernel's from its parameter
 * buffer; a library call's from its description, where a pointer is the argument it names. */
uint64_t cgj_fusion_param(const cgj_op_t *o, uint32_t k)
{
    if (o->lib) {
        uint64_t v = o->lib->ew.vals[k];
        const cgj_ew_spec_t *sp = cgj_fusion_lib_spec(o->lib);
        if (!sp || !cgj_ew_is_pointer(sp, k)) return v;
        return v < o->lib->nargs ? o->lib->args[v] : 0;
    }
    uint64_t v = 0;
    memcpy(&v, o->kp->rec + o->kp->off[k], o->kp->sz[k] < 8 ? o->kp->sz[k] : 8);
    return v;
}

/* Integer parameter k of op o as a non-negative number, UINT64_MAX for a negative one. */
static uint64_t integer_of(const cgj_op_t *o, const cgj_ew_spec_t *sp, uint32_t k)
{
    uint64_t bits = cgj_fusion_param(o, k);
    switch (sp->p[k].type) {
    case CGJ_EW_I32: return (int32_t)bits < 0 ? UINT64_MAX : (uint64_t)(int32_t)bits;
    case CGJ_EW_I64: return (int64_t)bits < 0 ? UINT64_MAX : bits;
    default: return bits;
    }
}

uint64_t cgj_fusion_count(const cgj_op_t *o, const cgj_ew_spec_t *sp)
{
    uint64_t n = 1;
    for (uint32_t k = 0; k < sp->nparams; k++) {
        if (!(sp->counts >> k & 1)) continue;
        uint64_t v = integer_of(o, sp, k);
        if (v == UINT64_MAX || (v && n > UINT64_MAX / v)) return UINT64_MAX;
        n *= v;
    }
    return n;
}

/* Elements a broadcast index (i / d) % m reaches for i < n. */
static uint64_t broadcast_extent(const cgj_op_t *o, const cgj_ew_spec_t *sp, uint32_t k, uint64_t n)
{
    const cgj_ew_param_t *p = &sp->p[k];
    uint64_t d = p->div ? integer_of(o, sp, p->div - 1u) : 1, m = p->mod ? integer_of(o, sp, p->mod - 1u) : 0;
    if (!d || d == UINT64_MAX || m == UINT64_MAX || (p->mod && !m)) return UINT64_MAX; /* i % 0: no index */
    uint64_t reach = (n + d - 1) / d;
    return m && m < reach ? m : reach;
}

/* The buffer of chain ch at address a with elements of `type`, reaching `extent` of them (added
 * if new, grown if it reaches further), or -1 with *why. */
static int buffer(cgj_fuse_chain_t *ch, CUdeviceptr a, uint8_t type, uint64_t extent, cgj_reason_t *why)
{
    int found = -1;
    for (uint32_t k = 0; k < ch->nbufs; k++)
        if (ch->buf[k].addr == a && ch->buf[k].type == type) found = (int)k;
    if (found >= 0 && ch->buf[found].extent >= extent) return found;
    uint64_t bytes = extent * cgj_ew_type_bytes[type];
    for (uint32_t k = 0; k < ch->nbufs; k++) {
        const cgj_fuse_buf_t *b = &ch->buf[k];
        if ((int)k == found) continue;
        if (a < b->addr + b->extent * cgj_ew_type_bytes[b->type] && b->addr < a + bytes) {
            cgj_reason_set(why, CGJ_REASON_FUSE_ALIAS, CGJ_REASON_NO_OP, "0x%llx and 0x%llx, %llu elements",
                           (unsigned long long)a, (unsigned long long)b->addr, (unsigned long long)extent);
            return -1;
        }
    }
    if (found >= 0) {
        ch->buf[found].extent = extent;
        return found;
    }
    if (ch->nbufs == CGJ_FUSE_MAX_BUFS) {
        cgj_reason_set(why, CGJ_REASON_FUSE_SIZE, CGJ_REASON_NO_OP, "more than %d buffers", CGJ_FUSE_MAX_BUFS);
        return -1;
    }
    ch->buf[ch->nbufs] = (cgj_fuse_buf_t){.addr = a, .type = type, .extent = extent};
    return (int)ch->nbufs++;
}

/* Stage of op o: its buffers (loads where read before the chain wrote them), its scalars. */
static bool add_stage(cgj_fuse_chain_t *ch, const cgj_op_t *o, uint32_t i, const cgj_ew_spec_t *sp, bool *written,
                      cgj_reason_t *why)
{
    cgj_fuse_stage_t *st = &ch->st[ch->nstages];
    *st = (cgj_fuse_stage_t){.spec = sp, .op = i};
    for (uint32_t k = 0; k < sp->nparams; k++) {
        uint64_t v = cgj_fusion_param(o, k);
        if (!cgj_ew_is_pointer(sp, k)) {
            st->scalar[k] = v;
            continue;
        }
        bool bcast = sp->p[k].div || sp->p[k].mod;
        uint64_t extent = bcast ? broadcast_extent(o, sp, k, ch->n) : ch->n;
        if (extent == UINT64_MAX) {
            cgj_reason_set(why, CGJ_REASON_FUSE_ALIAS, i, "a broadcast index of a negative or zero size");
            return false;
        }
        int b = buffer(ch, (CUdeviceptr)v, sp->elem, extent, why);
        if (b < 0) return false;
        st->buf[k] = (uint8_t)b;
        if (bcast) ch->buf[b].bcast = true;
        else if (sp->p[k].role != CGJ_EW_OUT && !written[b]) ch->buf[b].load = true;
    }
    for (uint32_t j = 0; j < sp->nassign; j++) written[st->buf[sp->assign[j].param]] = true;
    ch->nstages++;
    return true;
}

bool cgj_fusion_chain_of(const cgj_oplist_t *l, const cgj_ew_spec_t *const *specs, uint32_t first, uint32_t last,
                         cgj_fuse_chain_t *ch, cgj_reason_t *why)
{
    memset(ch, 0, sizeof *ch);
    ch->st = cgj_xcalloc(last - first + 1, sizeof *ch->st);
    bool written[CGJ_FUSE_MAX_BUFS] = {false};
    bool counted = false;
    for (uint32_t i = first; i <= last; i++) {
        const cgj_ew_spec_t *sp = specs[i];
        if (!sp) continue; /* an allocation or a free between the chain's kernels, a library call's ops */
        uint64_t n = cgj_fusion_count(&l->ops[i], sp);
        if (counted && n != ch->n) {
            cgj_reason_set(why, CGJ_REASON_FUSE_ALIAS, i, "element counts %llu and %llu", (unsigned long long)ch->n,
                           (unsigned long long)n);
            return false;
        }
        ch->n = n, counted = true;
        if (n == UINT64_MAX || !add_stage(ch, &l->ops[i], i, sp, written, why)) {
            if (n == UINT64_MAX) cgj_reason_set(why, CGJ_REASON_FUSE_ALIAS, i, "a negative element count");
            return false;
        }
    }
    for (uint32_t k = 0; k < ch->nbufs; k++) {
        ch->buf[k].store = written[k];
        if (written[k] && ch->buf[k].bcast) {
            cgj_reason_set(why, CGJ_REASON_FUSE_ALIAS, first, "buffer 0x%llx is written and read broadcast",
                           (unsigned long long)ch->buf[k].addr);
            return false;
        }
    }
    return true;
}

/* Does op o name an address in [lo, hi)? Kernel parameters are read word by word (a pointer
 * inside a struct argument counts); an op that may observe memory any other way does. */
static bool mentions(const cgj_op_t *o, CUdeviceptr lo, CUdeviceptr hi)
{
    const cgj_call_t *c = &o->call;
    switch (c->kind) {
    case CGJ_OP_KERNEL:
        if (!o->kp) return true;
        for (uint32_t at = 0; at + 8 <= o->kp->size; at += 4) {
            uint64_t v;
            memcpy(&v, o->kp->rec + at, sizeof v);
            if (v >= lo && v < hi) return true;
        }
        return false;
    case CGJ_OP_MEMCPY: return (c->u.m.dst >= lo && c->u.m.dst < hi) || (c->u.m.src >= lo && c->u.m.src < hi);
    case CGJ_OP_MEMSET: return c->u.s.dst >= lo && c->u.s.dst < hi;
    case CGJ_OP_ALLOC:
    case CGJ_OP_POOL_FREE:
    case CGJ_OP_EVENT_RECORD:
    case CGJ_OP_STREAM_WAIT:
    case CGJ_OP_SYNC:
    case CGJ_OP_QUERY:
    case CGJ_OP_FREE: return false;
    case CGJ_OP_LIB:
        for (uint32_t k = 0; k < o->lib->nargs; k++)
            if (o->lib->args[k] >= lo && o->lib->args[k] < hi) return true;
        return false;     /* its group's own ops are looked at one by one */
    default: return true; /* a read-back or a host function */
    }
}

void cgj_fusion_mark_stores(const cgj_oplist_t *l, uint32_t last, cgj_fuse_chain_t *ch)
{
    cgj_blocks_t bl = cgj_blocks_of(l);
    for (uint32_t k = 0; k < ch->nbufs; k++) {
        cgj_fuse_buf_t *b = &ch->buf[k];
        if (!b->store) continue;
        int j = cgj_blocks_find(&bl, b->addr, last);
        if (j < 0 || bl.b[j].escapes || bl.b[j].end >= l->n) continue; /* the program may read it */
        CUdeviceptr lo = bl.b[j].base, hi = lo + bl.b[j].bytes;
        bool read = false;
        for (uint32_t i = last + 1; i < bl.b[j].end && !read; i++) read = mentions(&l->ops[i], lo, hi);
        b->store = read;
    }
    cgj_blocks_free(&bl);
}

uint32_t cgj_fusion_element_end(const cgj_oplist_t *l, uint32_t i)
{
    const cgj_op_t *o = &l->ops[i];
    return o->lib ? i + o->lib->nops : i;
}

CUstream cgj_fusion_element_stream(const cgj_oplist_t *l, uint32_t i)
{
    return l->ops[l->ops[i].lib ? i + 1 : i].call.stream;
}

uint32_t cgj_fusion_next_element(const cgj_oplist_t *l, uint32_t from)
{
    while (from < l->n && cgj_op_class[l->ops[from].call.kind] == CGJ_CLASS_POOL) from++;
    return from;
}

int cgj_fusion_add_buffer(cgj_fuse_chain_t *ch, CUdeviceptr a, uint64_t elems)
{
    cgj_reason_t why;
    return buffer(ch, a, CGJ_EW_F32, elems, &why);
}
