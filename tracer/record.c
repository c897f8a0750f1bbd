/*
 * record.c — turning driver calls into trace ops, comparing recordings, guarding replays.
 *
 * Kernel parameters are copied by value using the layout the driver reports
 * (cuFuncGetParamInfo, or cuKernelGetParamInfo for the CUkernel handles the CUDA runtime
 * passes). A kernel whose layout cannot be learned cannot be recorded: copying a guessed number
 * of bytes could read past the caller's arguments, and comparing them could miss a change.
 *
 * The shape of a call is everything except the kernel parameter values and the source of a
 * host-to-device copy (which replay stages at call time, so its address never matters).
 * Shapes are compared exactly: a different stream, grid or copy size is a different step.
 */
#include "tracer/trace.h"
#include "tracer/layout.h"
#include "allocator/pool.h"
#include "base/log.h"

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

static cgj_op_t *oplist_push(cgj_oplist_t *l)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->ops = cgj_xrealloc(l->ops, l->cap * sizeof *l->ops);
    }
    cgj_op_t *o = &l->ops[l->n++];
    memset(o, 0, sizeof *o);
    return o;
}

static cgj_kparams_t *kparams_new(const cgj_layout_t *lay)
{
    cgj_kparams_t *kp = cgj_xcalloc(1, sizeof *kp);
    kp->n = lay->n;
    kp->size = lay->size;
    kp->extra_form = lay->extra_form;
    kp->off = cgj_xmemdup(lay->off, lay->n * sizeof(uint32_t));
    kp->sz = cgj_xmemdup(lay->sz, lay->n * sizeof(uint32_t));
    kp->rec = cgj_xcalloc(1, kp->size);
    kp->live = cgj_xcalloc(1, kp->size);
    kp->inexec = cgj_xcalloc(1, kp->size);
    kp->varying = cgj_xcalloc(kp->n ? kp->n : 1, 1);
    kp->ptrs = cgj_xcalloc(kp->n ? kp->n : 1, sizeof(void *));
    for (uint32_t i = 0; i < kp->n; i++) kp->ptrs[i] = kp->live + kp->off[i];
    return kp;
}

static void kparams_free(cgj_kparams_t *kp)
{
    if (!kp) return;
    cgj_free(kp->off), cgj_free(kp->sz), cgj_free(kp->rec), cgj_free(kp->live), cgj_free(kp->inexec);
    cgj_free(kp->varying), cgj_free(kp->ptrs), cgj_free(kp);
}

/* Pointer to slot i's value as the caller passed it. */
static const void *call_slot(const cgj_call_t *c, const cgj_kparams_t *kp, uint32_t i)
{
    return kp->extra_form ? c->u.k.blob : c->u.k.params[i];
}

/* Make the op own what its call points to. */
static void own_call(cgj_op_t *o)
{
    if (o->call.kind == CGJ_OP_KERNEL) {
        o->call.u.k.params = o->kp->ptrs;
        o->call.u.k.blob = o->kp->extra_form ? o->kp->live : NULL;
        if (o->call.u.k.nattrs)
            o->call.u.k.attrs =
                cgj_xmemdup(o->call.u.k.attrs, o->call.u.k.nattrs * sizeof(CUlaunchAttribute));
    }
    if (o->call.kind == CGJ_OP_MEMCPY && o->call.u.m.dir == CGJ_DIR_H2D) o->call.u.m.hsrc = NULL;
    if (o->call.kind == CGJ_OP_LIB) o->call.u.l.lc = NULL;
}

bool cgj_record_call(cgj_oplist_t *l, const cgj_call_t *c, const char **why)
{
    cgj_layout_t lay;
    if (c->kind == CGJ_OP_KERNEL && !cgj_layout_get(c, &lay, why)) return false;
    cgj_op_t *o = oplist_push(l);
    o->call = *c;
    if (c->kind == CGJ_OP_KERNEL) {
        o->kp = kparams_new(&lay);
        for (uint32_t i = 0; i < o->kp->n; i++)
            memcpy(o->kp->rec + o->kp->off[i], call_slot(c, o->kp, i), o->kp->sz[i]);
        memcpy(o->kp->live, o->kp->rec, o->kp->size);
    }
    if (c->kind == CGJ_OP_LIB) o->lib = cgj_libop_new(c->u.l.lc);
    own_call(o);
    return true;
}

void cgj_record_clone(cgj_oplist_t *l, const cgj_op_t *src)
{
    cgj_op_t *o = oplist_push(l);
    o->call = src->call;
    if (src->kp) {
        cgj_layout_t lay = {.n = src->kp->n, .size = src->kp->size,
                            .extra_form = src->kp->extra_form, .off = src->kp->off,
                            .sz = src->kp->sz};
        o->kp = kparams_new(&lay);
        memcpy(o->kp->rec, src->kp->live, o->kp->size);
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

/* ---- in-step allocations ---- */

cgj_blocks_t cgj_record_blocks(const cgj_oplist_t *l)
{
    cgj_blocks_t bl = {0};
    uint32_t cap = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        const cgj_call_t *c = &l->ops[i].call;
        if (c->kind == CGJ_OP_ALLOC) {
            if (bl.n == cap) bl.b = cgj_xrealloc(bl.b, (cap = cap ? 2 * cap : 16) * sizeof *bl.b);
            bl.b[bl.n++] = (cgj_block_t){c->u.a.addr, c->u.a.bytes, i, l->n, true};
        } else if (c->kind == CGJ_OP_POOL_FREE) {
            for (uint32_t j = bl.n; j-- > 0;)
                if (bl.b[j].escapes && bl.b[j].base == c->u.a.addr) {
                    bl.b[j].end = i, bl.b[j].escapes = false;
                    break;
                }
        }
    }
    return bl;
}

int cgj_blocks_find(const cgj_blocks_t *bl, CUdeviceptr p, uint32_t at)
{
    if (!bl) return -1;
    for (uint32_t j = 0; j < bl->n; j++) {
        const cgj_block_t *b = &bl->b[j];
        if (p >= b->base && p - b->base < (b->bytes ? b->bytes : 1) && b->start <= at && at <= b->end)
            return (int)j;
    }
    return -1;
}

/* Is address x of op ia in run A the same memory as y of op ib in run B? Equal, or the same
 * offset into the same in-step allocation. */
static bool addr_eq(CUdeviceptr x, const cgj_blocks_t *ta, uint32_t ia, CUdeviceptr y,
                    const cgj_blocks_t *tb, uint32_t ib)
{
    if (x == y) return true;
    int bx = cgj_blocks_find(ta, x, ia), by = cgj_blocks_find(tb, y, ib);
    return bx >= 0 && bx == by && x - ta->b[bx].base == y - tb->b[by].base;
}

/* Bytes of CUlaunchAttributeValue that attribute `id` uses. Programs fill attributes field by
 * field on the stack: the padding after `id` and the rest of the value union hold whatever was
 * there, so they must not make two identical launches look different. */
static size_t attr_value_bytes(CUlaunchAttributeID id)
{
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE: return 0;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: return 28; /* ptr, size, float, 2 enums */
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: return 12;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: return 16;
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: return 12;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: return 2;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: return 4; /* devNode is an output */
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return 4;
    default: return sizeof(CUlaunchAttributeValue); /* unknown: all of it */
    }
}

static bool attrs_equal(const CUlaunchAttribute *a, const CUlaunchAttribute *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (a[i].id != b[i].id || memcmp(&a[i].value, &b[i].value, attr_value_bytes(a[i].id)))
            return false;
    return true;
}

/* Shape equality of two calls: everything but parameter values and H2D sources. */
/* Context for comparing addresses: the blocks of each run and the op indices (NULL tables:
 * addresses must be equal, as in a replay of a relocated trace). */
typedef struct addr_ctx {
    const cgj_blocks_t *ta, *tb;
    uint32_t ia, ib;
} addr_ctx_t;

#define ADDR_EQ(x, y) addr_eq((x), ctx->ta, ctx->ia, (y), ctx->tb, ctx->ib)

static bool call_shape_equal(const cgj_call_t *a, const cgj_call_t *b, const addr_ctx_t *ctx,
                             char *why, size_t len)
{
#define SHAPE_DIFF(what)                                   \
    do {                                                   \
        snprintf(why, len, "%s differs", what);            \
        return false;                                      \
    } while (0)
    if (a->kind != b->kind) SHAPE_DIFF("operation");
    if (a->api != b->api && strcmp(a->api, b->api) != 0) SHAPE_DIFF("driver function");
    if (cgj_op_class[a->kind] == CGJ_CLASS_BOUNDARY) return true; /* executed as called */
    if (a->stream != b->stream) SHAPE_DIFF("stream");
    switch (a->kind) {
    case CGJ_OP_KERNEL: {
        const __typeof__(a->u.k) *x = &a->u.k, *y = &b->u.k;
        if (x->f != y->f) SHAPE_DIFF("kernel function");
        if (memcmp(x->grid, y->grid, sizeof x->grid)) SHAPE_DIFF("grid");
        if (memcmp(x->block, y->block, sizeof x->block)) SHAPE_DIFF("block");
        if (x->smem != y->smem) SHAPE_DIFF("dynamic shared memory");
        if ((x->blob != NULL) != (y->blob != NULL) || x->blob_size != y->blob_size)
            SHAPE_DIFF("parameter form");
        if (x->nattrs != y->nattrs || !attrs_equal(x->attrs, y->attrs, x->nattrs))
            SHAPE_DIFF("launch attributes");
        return true;
    }
    case CGJ_OP_MEMCPY: {
        const __typeof__(a->u.m) *x = &a->u.m, *y = &b->u.m;
        if (x->dir != y->dir || x->bytes != y->bytes) SHAPE_DIFF("copy direction or size");
        if (!ADDR_EQ(x->dst, y->dst) || !ADDR_EQ(x->src, y->src) || x->hdst != y->hdst)
            SHAPE_DIFF("copy address");
        return true;
    }
    case CGJ_OP_MEMSET:
        if (!ADDR_EQ(a->u.s.dst, b->u.s.dst) || a->u.s.value != b->u.s.value ||
            a->u.s.elem != b->u.s.elem || a->u.s.count != b->u.s.count)
            SHAPE_DIFF("memset arguments");
        return true;
    case CGJ_OP_ALLOC: {
        const __typeof__(a->u.a) *x = &a->u.a, *y = &b->u.a;
        if (x->bytes != y->bytes || x->width != y->width || x->height != y->height ||
            x->elem != y->elem || x->pool != y->pool)
            SHAPE_DIFF("allocation size");
        return true;
    }
    case CGJ_OP_POOL_FREE:
        if (!ADDR_EQ(a->u.a.addr, b->u.a.addr)) SHAPE_DIFF("freed address");
        return true;
    case CGJ_OP_EVENT_RECORD:
    case CGJ_OP_STREAM_WAIT:
        if (a->u.e.ev != b->u.e.ev || a->u.e.flags != b->u.e.flags) SHAPE_DIFF("event");
        return true;
    case CGJ_OP_HOST_FUNC:
        if (a->u.h.fn != b->u.h.fn || a->u.h.data != b->u.h.data) SHAPE_DIFF("host function");
        return true;
    default:
        return true;
    }
#undef SHAPE_DIFF
}

static bool layout_equal(const cgj_kparams_t *a, const cgj_kparams_t *b)
{
    return a->n == b->n && a->size == b->size && !memcmp(a->off, b->off, a->n * 4) &&
           !memcmp(a->sz, b->sz, a->n * 4);
}

static bool shape_loop(const cgj_oplist_t *a, const cgj_oplist_t *b, const cgj_blocks_t *pa,
                       const cgj_blocks_t *pb, uint32_t *at, char *why, size_t whylen);

bool cgj_record_same_shape(const cgj_oplist_t *a, const cgj_oplist_t *b, uint32_t *at, char *why,
                           size_t whylen)
{
    cgj_blocks_t ta = cgj_record_blocks(a), tb = cgj_record_blocks(b);
    bool same = shape_loop(a, b, &ta, &tb, at, why, whylen);
    cgj_free(ta.b), cgj_free(tb.b);
    return same;
}

static bool shape_loop(const cgj_oplist_t *a, const cgj_oplist_t *b, const cgj_blocks_t *pa,
                       const cgj_blocks_t *pb, uint32_t *at, char *why, size_t whylen)
{
    const cgj_blocks_t ta = *pa, tb = *pb;
    uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++) {
        const cgj_op_t *x = &a->ops[i], *y = &b->ops[i];
        addr_ctx_t ctx = {&ta, &tb, i, i};
        if (!call_shape_equal(&x->call, &y->call, &ctx, why, whylen)) {
            *at = i;
            return false;
        }
        if (x->kp && !layout_equal(x->kp, y->kp)) {
            *at = i;
            snprintf(why, whylen, "parameter layout differs");
            return false;
        }
        if (x->lib && x->lib->nops != y->lib->nops) {
            *at = i;
            snprintf(why, whylen, "the library call issued %u driver calls instead of %u", y->lib->nops,
                     x->lib->nops);
            return false;
        }
    }
    if (a->n != b->n) {
        *at = n;
        snprintf(why, whylen, "%u ops instead of %u", b->n, a->n);
        return false;
    }
    return true;
}

/* A pointer-sized word that points into pool memory an *earlier* replay handed out (not an
 * allocation of this run): which region it lies in depends on which twin variant served that
 * step, so it is never a constant, even when both runs happened to see the same value. */
static bool earlier_pool_pointer(const uint8_t *x, uint32_t size, const addr_ctx_t *ctx)
{
    for (uint32_t k = 0; k + 8 <= size; k += 8) {
        CUdeviceptr v;
        memcpy(&v, x + k, 8);
        if (cgj_pool_owns(v) && cgj_blocks_find(ctx->ta, v, ctx->ia) < 0) return true;
    }
    return false;
}

/* Same value in both runs: equal bytes, or the same in-step allocation and offset in every
 * pointer-sized word (a *pool pointer*, constant once the trace is relocated). */
static bool slot_same(const uint8_t *x, const uint8_t *y, uint32_t size, const addr_ctx_t *ctx)
{
    const addr_ctx_t swapped = {ctx->tb, ctx->ta, ctx->ib, ctx->ia};
    if (earlier_pool_pointer(x, size, ctx) || earlier_pool_pointer(y, size, &swapped)) return false;
    if (!memcmp(x, y, size)) return true;
    if (size < 8) return false;
    for (uint32_t k = 0; k + 8 <= size; k += 8) {
        CUdeviceptr vx, vy;
        memcpy(&vx, x + k, 8), memcpy(&vy, y + k, 8);
        if (!ADDR_EQ(vx, vy)) return false;
    }
    uint32_t tail = size % 8;
    return !tail || !memcmp(x + size - tail, y + size - tail, tail);
}

void cgj_record_classify(cgj_oplist_t *a, const cgj_oplist_t *b)
{
    cgj_blocks_t ta = cgj_record_blocks(a), tb = cgj_record_blocks(b);
    for (uint32_t i = 0; i < a->n; i++) {
        cgj_kparams_t *x = a->ops[i].kp;
        const cgj_kparams_t *y = b->ops[i].kp;
        if (!x) continue;
        addr_ctx_t c = {&ta, &tb, i, i}, *ctx = &c;
        x->nvarying = 0;
        for (uint32_t s = 0; s < x->n; s++) {
            x->varying[s] = !slot_same(x->rec + x->off[s], y->rec + y->off[s], x->sz[s], ctx);
            x->nvarying += x->varying[s];
        }
    }
    /* Library groups last: what they learn depends on which slots vary. */
    for (uint32_t i = 0; i < a->n; i++)
        if (a->ops[i].lib) cgj_libop_learn(a, i, b, &ta, &tb);
    cgj_free(ta.b), cgj_free(tb.b);
}

static void relocate_word(uint8_t *p, const cgj_blocks_t *bl, const CUdeviceptr *planned, uint32_t at)
{
    CUdeviceptr v;
    memcpy(&v, p, 8);
    int b = cgj_blocks_find(bl, v, at);
    if (b < 0) return;
    v = planned[b] + (v - bl->b[b].base);
    memcpy(p, &v, 8);
}

static void relocate_addr(CUdeviceptr *p, const cgj_blocks_t *bl, const CUdeviceptr *planned, uint32_t at)
{
    relocate_word((uint8_t *)p, bl, planned, at);
}

void cgj_record_relocate(cgj_oplist_t *l, const CUdeviceptr *planned)
{
    cgj_blocks_t bl = cgj_record_blocks(l);
    for (uint32_t i = 0; i < l->n; i++) {
        cgj_op_t *o = &l->ops[i];
        cgj_call_t *c = &o->call;
        if (o->kp) {
            for (uint32_t s = 0; s < o->kp->n; s++)
                for (uint32_t k = 0; k + 8 <= o->kp->sz[s]; k += 8) {
                    relocate_word(o->kp->rec + o->kp->off[s] + k, &bl, planned, i);
                    relocate_word(o->kp->live + o->kp->off[s] + k, &bl, planned, i);
                }
        } else if (c->kind == CGJ_OP_MEMCPY) {
            relocate_addr(&c->u.m.dst, &bl, planned, i);
            relocate_addr(&c->u.m.src, &bl, planned, i);
        } else if (c->kind == CGJ_OP_MEMSET) {
            relocate_addr(&c->u.s.dst, &bl, planned, i);
        } else if (c->kind == CGJ_OP_ALLOC || c->kind == CGJ_OP_POOL_FREE) {
            relocate_addr(&c->u.a.addr, &bl, planned, i);
        } else if (o->lib) {
            for (uint32_t k = 0; k < o->lib->nargs; k++) {
                relocate_addr(&o->lib->args[k], &bl, planned, i);
                o->lib->live_args[k] = o->lib->args[k];
            }
        }
    }
    cgj_free(bl.b);
}

bool cgj_guard(cgj_op_t *o, const cgj_call_t *c, bool promote, char *why, size_t whylen)
{
    static const addr_ctx_t exact = {NULL, NULL, 0, 0};
    if (!call_shape_equal(&o->call, c, &exact, why, whylen)) return false;
    cgj_kparams_t *kp = o->kp;
    if (!kp) return true;
    if (!kp->extra_form && kp->n && !c->u.k.params) {
        snprintf(why, whylen, "no kernel parameters passed");
        return false;
    }
    for (uint32_t i = 0; i < kp->n; i++) {
        const void *v = call_slot(c, kp, i);
        if (kp->varying[i]) {
            memcpy(kp->live + kp->off[i], v, kp->sz[i]);
        } else if (memcmp(kp->rec + kp->off[i], v, kp->sz[i]) != 0 && promote && o->node) {
            /* A value the two recorded runs happened to share: patching it is as exact as
             * baking it in, so the slot becomes varying instead of failing every such run. */
            kp->varying[i] = 1;
            kp->nvarying++;
            o->promoted = true;
            memcpy(kp->live + kp->off[i], v, kp->sz[i]);
        } else if (memcmp(kp->rec + kp->off[i], v, kp->sz[i]) != 0) {
            char e[72], g[72];
            snprintf(why, whylen, "parameter slot %u (%u bytes): expected %s got %s", i, kp->sz[i],
                     cgj_log_hex(e, kp->rec + kp->off[i], kp->sz[i]),
                     cgj_log_hex(g, v, kp->sz[i]));
            return false;
        }
    }
    return true;
}

const char *cgj_op_describe(const cgj_op_t *o, char *buf, size_t len)
{
    const char *name = NULL;
    if (o->call.kind == CGJ_OP_KERNEL) name = cgj_layout_kernel_name(o->call.u.k.f);
    snprintf(buf, len, "%s%s%s%s", o->call.api, name ? "(" : "", name ? name : "", name ? ")" : "");
    return buf;
}
