/*
 * shape.c — comparing calls with ops, and recordings with each other; the replay guard.
 *
 * Guards (docs/design.md): the shape of a call is its topology — op kind, driver function, stream,
 * kernel function and parameter form, launch attributes, copy direction and memory kinds, events,
 * host functions, the size class of an allocation. Shapes are compared exactly: a different
 * stream or kernel is a different step. Everything else is a *value* the executable graph can
 * take: kernel parameters, grid, block, shared memory, copy operands and sizes, memset operands.
 * Values that differ between the two recorded runs vary from the start (patched at each launch);
 * a value that differs later becomes varying at that replay (promotion). The source of a staged
 * host-to-device copy is no value at all: replay copies its bytes at call time.
 * Addresses of in-step allocations differ between the two eager runs a trace is made of (the
 * driver chose them): comparisons match an address of one run with the other run's by
 * (allocation, offset), and the built trace is relocated to the planned addresses.
 */
#include "tracer/tracer.h"
#include "allocator/plan.h"
#include "allocator/pool.h"
#include "base/log.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Is address x of op ia in run A the same memory as y of op ib in run B? Equal, or the same
 * offset into the same in-step allocation. */
static bool addr_eq(CUdeviceptr x, const cgj_blocks_t *ta, uint32_t ia, CUdeviceptr y, const cgj_blocks_t *tb,
                    uint32_t ib)
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
        if (a[i].id != b[i].id || memcmp(&a[i].value, &b[i].value, attr_value_bytes(a[i].id))) return false;
    return true;
}

/* Context for comparing addresses: the blocks of each run and the op indices (NULL tables:
 * addresses must be equal, as in a replay of a relocated trace). */
typedef struct addr_ctx {
    const cgj_blocks_t *ta, *tb;
    uint32_t ia, ib;
} addr_ctx_t;

#define ADDR_EQ(x, y) addr_eq((x), ctx->ta, ctx->ia, (y), ctx->tb, ctx->ib)
#define DIFF(code)                                                         \
    do {                                                                   \
        cgj_reason_set(r, CGJ_REASON_DIFF_##code, CGJ_REASON_NO_OP, NULL); \
        return false;                                                      \
    } while (0)

/* The topology of two calls (Guards v2): what an executable graph cannot change. */
static bool call_shape_equal(const cgj_call_t *a, const cgj_call_t *b, const addr_ctx_t *ctx, cgj_reason_t *r)
{
    if (a->kind != b->kind) DIFF(OPERATION);
    if (a->api != b->api && strcmp(a->api, b->api) != 0) DIFF(API);
    if (cgj_op_class[a->kind] == CGJ_CLASS_BOUNDARY) return true; /* executed as called */
    if (a->stream != b->stream) DIFF(STREAM);
    switch (a->kind) {
    case CGJ_OP_KERNEL: {
        const __typeof__(a->u.k) *x = &a->u.k, *y = &b->u.k;
        if (x->f != y->f) DIFF(KERNEL);
        if ((x->blob != NULL) != (y->blob != NULL) || x->blob_size != y->blob_size) DIFF(PARAM_FORM);
        if (x->nattrs != y->nattrs || !attrs_equal(x->attrs, y->attrs, x->nattrs)) DIFF(ATTRS);
        return true;
    }
    case CGJ_OP_MEMCPY:
        if (a->u.m.dir != b->u.m.dir || a->u.m.direct != b->u.m.direct) DIFF(COPY_KIND);
        return true;
    case CGJ_OP_ALLOC: {
        const __typeof__(a->u.a) *x = &a->u.a, *y = &b->u.a;
        if (cgj_plan_size_class(x->bytes) != cgj_plan_size_class(y->bytes) || x->width != y->width ||
            x->height != y->height || x->elem != y->elem || x->pool != y->pool)
            DIFF(ALLOC_SIZE);
        return true;
    }
    case CGJ_OP_POOL_FREE:
        if (!ADDR_EQ(a->u.a.addr, b->u.a.addr)) DIFF(FREED_ADDR);
        return true;
    case CGJ_OP_EVENT_RECORD:
    case CGJ_OP_STREAM_WAIT: /* the event itself is a value: programs take theirs from a pool */
        if (a->u.e.flags != b->u.e.flags) DIFF(EVENT);
        return true;
    case CGJ_OP_HOST_FUNC: /* its data is a value: a closure made for each call */
        if (a->u.h.fn != b->u.h.fn) DIFF(HOST_FUNC);
        return true;
    default: return true;
    }
}

/* The values of two calls of the same topology that a patch changes: grid, block and shared
 * memory; copy operands and size; memset operands. The source of a staged copy is no value: its
 * bytes are copied at call time. */
static bool call_values_equal(const cgj_call_t *a, const cgj_call_t *b, const addr_ctx_t *ctx, cgj_reason_t *r)
{
    switch (a->kind) {
    case CGJ_OP_KERNEL: {
        const __typeof__(a->u.k) *x = &a->u.k, *y = &b->u.k;
        if (memcmp(x->grid, y->grid, sizeof x->grid)) DIFF(GRID);
        if (memcmp(x->block, y->block, sizeof x->block)) DIFF(BLOCK);
        if (x->smem != y->smem) DIFF(SMEM);
        return true;
    }
    case CGJ_OP_MEMCPY: {
        const __typeof__(a->u.m) *x = &a->u.m, *y = &b->u.m;
        if (x->bytes != y->bytes) DIFF(COPY_SIZE);
        if ((x->direct && x->hsrc != y->hsrc) || x->hdst != y->hdst || !ADDR_EQ(x->dst, y->dst) ||
            !ADDR_EQ(x->src, y->src))
            DIFF(COPY_ADDR);
        return true;
    }
    case CGJ_OP_MEMSET:
        if (!ADDR_EQ(a->u.s.dst, b->u.s.dst) || a->u.s.value != b->u.s.value || a->u.s.count != b->u.s.count)
            DIFF(MEMSET);
        return true;
    case CGJ_OP_EVENT_RECORD:
    case CGJ_OP_STREAM_WAIT:
        if (a->u.e.ev != b->u.e.ev) DIFF(EVENT);
        return true;
    case CGJ_OP_HOST_FUNC:
        if (a->u.h.data != b->u.h.data) DIFF(HOST_FUNC);
        return true;
    default: return true;
    }
}

/* Take the values of call c into op o (the run in progress). */
static void take_values(cgj_op_t *o, const cgj_call_t *c)
{
    cgj_call_t *d = &o->call;
    switch (c->kind) {
    case CGJ_OP_KERNEL:
        memcpy(d->u.k.grid, c->u.k.grid, sizeof d->u.k.grid);
        memcpy(d->u.k.block, c->u.k.block, sizeof d->u.k.block);
        d->u.k.smem = c->u.k.smem;
        break;
    case CGJ_OP_MEMCPY:
        d->u.m.dst = c->u.m.dst, d->u.m.src = c->u.m.src, d->u.m.hdst = c->u.m.hdst;
        d->u.m.bytes = c->u.m.bytes;
        if (d->u.m.direct) d->u.m.hsrc = c->u.m.hsrc;
        break;
    case CGJ_OP_MEMSET: d->u.s.dst = c->u.s.dst, d->u.s.value = c->u.s.value, d->u.s.count = c->u.s.count; break;
    case CGJ_OP_EVENT_RECORD:
    case CGJ_OP_STREAM_WAIT: d->u.e.ev = c->u.e.ev; break;
    case CGJ_OP_HOST_FUNC: d->u.h.data = c->u.h.data; break;
    default: break;
    }
}

/* Event op o's event this run, ev, against the ops of its graph segment before it, which hold
 * this run's events already: the nearest one with the same event must be as many ops back as
 * when the graph was built (o->ev_same, found the same way), else the graph's orderings are not
 * this run's (a wait it holds as an edge from one record, the program's own on another). Holding
 * for every event op of the segment, the run's events fall into the same groups as the build's. */
static bool event_pattern_holds(const cgj_op_t *o, CUevent ev)
{
    return cgj_op_event_back(o, ev) == o->ev_same;
}

/* A copy or memset of nothing: the graph cannot hold one where it holds a real one. */
static bool empty_for(const cgj_op_t *o, const cgj_call_t *c)
{
    if (c->kind == CGJ_OP_MEMCPY) return !c->u.m.bytes && o->call.u.m.bytes;
    if (c->kind == CGJ_OP_MEMSET) return !c->u.s.count && o->call.u.s.count;
    return false;
}

static bool layout_equal(const cgj_kparams_t *a, const cgj_kparams_t *b)
{
    return a->n == b->n && a->size == b->size && !memcmp(a->off, b->off, a->n * 4) && !memcmp(a->sz, b->sz, a->n * 4);
}

static bool shape_loop(const cgj_oplist_t *a, const cgj_oplist_t *b, const cgj_blocks_t *ta, const cgj_blocks_t *tb,
                       cgj_reason_t *r)
{
    uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++) {
        const cgj_op_t *x = &a->ops[i], *y = &b->ops[i];
        addr_ctx_t ctx = {ta, tb, i, i};
        bool same = call_shape_equal(&x->call, &y->call, &ctx, r);
        if (same && (empty_for(x, &y->call) || empty_for(y, &x->call))) {
            same = false;
            cgj_reason_set(r, CGJ_REASON_DIFF_ZERO_LENGTH, i, NULL);
        }
        if (same && x->kp && !layout_equal(x->kp, y->kp)) {
            same = false;
            cgj_reason_set(r, CGJ_REASON_DIFF_LAYOUT, i, "%s", y->call.api);
        }
        if (same && x->lib && x->lib->nops != y->lib->nops) {
            same = false;
            cgj_reason_set(r, CGJ_REASON_DIFF_LIB_OPS, i, "%s: %u driver calls instead of %u", y->call.api,
                           y->lib->nops, x->lib->nops);
        }
        if (!same) {
            r->op = i;
            if (!r->detail[0]) cgj_strlcpy(r->detail, y->call.api, sizeof r->detail);
            return false;
        }
    }
    if (a->n == b->n) return true;
    cgj_reason_set(r, CGJ_REASON_DIFF_OP_COUNT, n, "%u ops instead of %u", b->n, a->n);
    return false;
}

/* How many ops back from op i of l the nearest op naming the same event is, within [from, i)
 * (0: none). */
static uint32_t same_event_back(const cgj_oplist_t *l, uint32_t from, uint32_t i)
{
    CUevent ev = l->ops[i].call.u.e.ev;
    for (uint32_t j = i; j-- > from;)
        if (cgj_op_names_event(l->ops[j].call.kind) && l->ops[j].call.u.e.ev == ev) return i - j;
    return 0;
}

/* Do the event ops of two runs of one shape group alike by event, within each stretch between
 * boundary ops? Events are values (taken from a pool), but how they group is what a graph's
 * edges and nodes are made of: a run that groups them otherwise is another shape, so that it
 * gets a variant of its own. Alike over a stretch, they are alike over any segment inside it,
 * which is what the guard holds a run to (event_pattern_holds). */
static bool events_group_alike(const cgj_oplist_t *a, const cgj_oplist_t *b, cgj_reason_t *r)
{
    uint32_t from = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        cgj_op_kind_t k = a->ops[i].call.kind;
        if (cgj_op_class[k] == CGJ_CLASS_BOUNDARY) from = i + 1;
        if (!cgj_op_names_event(k) || same_event_back(a, from, i) == same_event_back(b, from, i)) continue;
        cgj_reason_set(r, CGJ_REASON_DIFF_EVENT, i, "%s: the run's events group otherwise", b->ops[i].call.api);
        return false;
    }
    return true;
}

bool cgj_shape_same(const cgj_oplist_t *a, const cgj_oplist_t *b, cgj_reason_t *r)
{
    cgj_blocks_t ta = cgj_blocks_of(a), tb = cgj_blocks_of(b);
    bool same = shape_loop(a, b, &ta, &tb, r) && events_group_alike(a, b, r);
    cgj_blocks_free(&ta), cgj_blocks_free(&tb);
    return same;
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

void cgj_shape_classify(cgj_oplist_t *a, const cgj_oplist_t *b)
{
    cgj_blocks_t ta = cgj_blocks_of(a), tb = cgj_blocks_of(b);
    for (uint32_t i = 0; i < a->n; i++) {
        cgj_kparams_t *x = a->ops[i].kp;
        const cgj_kparams_t *y = b->ops[i].kp;
        addr_ctx_t c = {&ta, &tb, i, i}, *ctx = &c;
        cgj_reason_t why;
        a->ops[i].listed = !call_values_equal(&a->ops[i].call, &b->ops[i].call, ctx, &why);
        /* A handoff both runs saw is the program's (a thread waiting for this one); one run's
         * alone is two threads racing, and no reason to cut a graph. */
        a->ops[i].handoff &= b->ops[i].handoff;
        if (b->ops[i].gap_ns < a->ops[i].gap_ns) a->ops[i].gap_ns = b->ops[i].gap_ns;
        if (!x) continue;
        x->nvarying = 0;
        for (uint32_t s = 0; s < x->n; s++) {
            x->varying[s] = !slot_same(x->rec + x->off[s], y->rec + y->off[s], x->sz[s], ctx);
            x->nvarying += x->varying[s];
        }
        x->slots_stale = true;
    }
    /* Library groups last: what they learn depends on which slots vary. */
    for (uint32_t i = 0; i < a->n; i++)
        if (a->ops[i].lib) cgj_libop_learn(a, i, b, &ta, &tb);
    cgj_blocks_free(&ta), cgj_blocks_free(&tb);
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

void cgj_shape_relocate(cgj_oplist_t *l, const CUdeviceptr *planned)
{
    cgj_blocks_t bl = cgj_blocks_of(l);
    for (uint32_t i = 0; i < l->n; i++) {
        cgj_op_t *o = &l->ops[i];
        cgj_call_t *c = &o->call;
        if (o->kp) {
            uint8_t *rec = cgj_kparams_rec_mut(o->kp);
            for (uint32_t s = 0; s < o->kp->n; s++)
                for (uint32_t k = 0; k + 8 <= o->kp->sz[s]; k += 8) {
                    relocate_word(rec + o->kp->off[s] + k, &bl, planned, i);
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
            for (uint32_t k = 0; o->lib->seen && k < o->lib->nops; k++) {
                relocate_addr(&o->lib->seen[k].dst, &bl, planned, i + 1 + k);
                relocate_addr(&o->lib->seen[k].src, &bl, planned, i + 1 + k);
            }
        }
    }
    cgj_blocks_free(&bl);
}

/* Addresses compared as they are (a replay of a relocated trace): no block tables. */
static const addr_ctx_t exact = {NULL, NULL, 0, 0};

/* The values of call c against op o's: taken when the op's values vary (listed), or newly
 * with `promote`; else a difference fails. */
static bool guard_values(cgj_op_t *o, const cgj_call_t *c, bool promote, bool dry, cgj_reason_t *r)
{
    if (empty_for(o, c)) {
        cgj_reason_set(r, CGJ_REASON_DIFF_ZERO_LENGTH, CGJ_REASON_NO_OP, NULL);
        return false;
    }
    /* Another event only where the run's events keep the build's pattern; a dry run (a switch's
     * held ops, whose segment holds another run's events) takes none. */
    if (cgj_op_names_event(c->kind) && ((dry && c->u.e.ev != o->call.u.e.ev) || !event_pattern_holds(o, c->u.e.ev))) {
        cgj_reason_set(r, CGJ_REASON_DIFF_EVENT, CGJ_REASON_NO_OP, "the run's events repeat in another pattern");
        return false;
    }
    if (o->listed && !o->fixed) {
        if (!dry) take_values(o, c);
        return true;
    }
    if (call_values_equal(&o->call, c, &exact, r)) return true;
    if (!promote || o->fixed) return false;
    if (dry) return true;
    take_values(o, c); /* the graph takes the new value: patched from now on */
    o->promoted = true;
    return true;
}

/* Are the n bytes at a and b equal? Kernel parameters are mostly 4 or 8 bytes: compared as
 * words, without a call (the full guard's promotion of a kernel's slots; the common case's
 * constant slots are compared in kernel_as_recorded, from their own arrays). */
static inline bool slot_eq(const void *a, const void *b, uint32_t n)
{
    if (n == 8) {
        uint64_t x, y;
        memcpy(&x, a, 8), memcpy(&y, b, 8);
        return x == y;
    }
    if (n == 4) {
        uint32_t x, y;
        memcpy(&x, a, 4), memcpy(&y, b, 4);
        return x == y;
    }
    return memcmp(a, b, n) == 0;
}

/* A kernel launch's function, grid, block and dynamic shared memory: 36 bytes side by side,
 * compared as four 8-byte words and one 4-byte word with no branch between them. */
typedef __typeof__(((cgj_call_t *)0)->u.k) cgj_kcall_t;
_Static_assert(offsetof(cgj_kcall_t, grid) == offsetof(cgj_kcall_t, f) + 8 &&
                   offsetof(cgj_kcall_t, block) == offsetof(cgj_kcall_t, grid) + 12 &&
                   offsetof(cgj_kcall_t, smem) == offsetof(cgj_kcall_t, block) + 12,
               "a launch's configuration is 36 contiguous bytes");
static inline bool launch_config_eq(const cgj_kcall_t *x, const cgj_kcall_t *y)
{
    const char *a = (const char *)&x->f, *b = (const char *)&y->f;
    uint64_t d = 0;
    for (int w = 0; w < 4; w++) {
        uint64_t p, q;
        memcpy(&p, a + 8 * w, 8), memcpy(&q, b + 8 * w, 8);
        d |= p ^ q;
    }
    uint32_t p4, q4;
    memcpy(&p4, a + 32, 4), memcpy(&q4, b + 32, 4);
    return !(d | (p4 ^ q4));
}

/* The guard of the common absorbed call, without its generality: a kernel launched exactly as
 * the op holds it (same wrapper, stream, function, kernelParams form without attributes,
 * launch dimensions and constant parameters). True when the full guard would hold without
 * promoting anything; the varying slots are taken then, as it takes them. False says nothing:
 * the call gets the full guard. An op whose values are patched (listed) qualifies too: its
 * launch dimensions are those of the last run, which the full guard would take again as they
 * are, and its varying slots are taken here (a decoder's kernels, whose position changes every
 * step, are such ops: each of them took the full guard before). */
static bool kernel_as_recorded(cgj_op_t *o, const cgj_call_t *c)
{
    const cgj_kcall_t *x = &o->call.u.k, *y = &c->u.k;
    cgj_kparams_t *kp = o->kp;
    if (c->kind != CGJ_OP_KERNEL || o->call.kind != CGJ_OP_KERNEL || !kp || !y->params || o->call.api != c->api ||
        o->call.stream != c->stream)
        return false;
    /* The other forms (a packed buffer, launch attributes) take the full guard. */
    if (kp->extra_form || ((uintptr_t)y->blob | (uintptr_t)x->blob | y->nattrs | x->nattrs) || !launch_config_eq(x, y))
        return false;
    const cgj_slot_t *sl = cgj_kparams_slots(kp);
    void *const *v = y->params;
    const uint32_t *gi = kp->gidx;
    const uint64_t *g8 = kp->g8;
    const size_t c8 = kp->c8, c4 = kp->c4;
    const uint32_t *g4 = kp->g4 - c8; /* g4[j] for c8 <= j < c4 */
    /* Differences gathered without a branch a slot into two accumulators (the loads of one slot
     * do not wait for the last one's comparison), the 4-byte slots four a turn; size_t indices
     * and the tail's bounds loaded after the test keep the loops free of spills. */
    uint64_t d8 = 0, e8 = 0;
    uint32_t d4 = 0, e4 = 0;
    size_t j = 0;
    for (; j + 2 <= c8; j += 2) {
        uint64_t a, b;
        memcpy(&a, v[gi[j]], 8), memcpy(&b, v[gi[j + 1]], 8);
        d8 |= a ^ g8[j], e8 |= b ^ g8[j + 1];
    }
    if (j < c8) {
        uint64_t a;
        memcpy(&a, v[gi[j]], 8);
        d8 |= a ^ g8[j], j++;
    }
    for (; j + 4 <= c4; j += 4) {
        uint32_t a, b, a2, b2;
        memcpy(&a, v[gi[j]], 4), memcpy(&b, v[gi[j + 1]], 4);
        memcpy(&a2, v[gi[j + 2]], 4), memcpy(&b2, v[gi[j + 3]], 4);
        d4 |= (a ^ g4[j]) | (a2 ^ g4[j + 2]), e4 |= (b ^ g4[j + 1]) | (b2 ^ g4[j + 3]);
    }
    for (; j + 2 <= c4; j += 2) {
        uint32_t a, b;
        memcpy(&a, v[gi[j]], 4), memcpy(&b, v[gi[j + 1]], 4);
        d4 |= a ^ g4[j], e4 |= b ^ g4[j + 1];
    }
    if (j < c4) {
        uint32_t a;
        memcpy(&a, v[gi[j]], 4);
        d4 |= a ^ g4[j], j++;
    }
    if (d8 | e8 | d4 | e4) return false;
    const size_t nconst = kp->nconst, v8 = kp->v8, v4 = kp->v4, n = kp->n;
    const uint8_t *rec = kp->rec;
    uint8_t *live = kp->live;
    for (; j < nconst; j++)
        if (memcmp(rec + sl[j].off, v[sl[j].i], sl[j].sz)) return false;
    for (; j < v8; j++) memcpy(live + sl[j].off, v[sl[j].i], 8);
    for (; j < v4; j++) memcpy(live + sl[j].off, v[sl[j].i], 4);
    for (; j < n; j++) memcpy(live + sl[j].off, v[sl[j].i], sl[j].sz);
    return true;
}

static __attribute__((noinline)) bool guard_full(cgj_op_t *o, const cgj_call_t *c, bool promote, bool dry,
                                                 cgj_reason_t *r);

/* Every absorbed launch takes kernel_as_recorded first, in a frame of its own: the full guard's
 * (its reason texts on the stack) would cost each call its set-up. */
bool cgj_guard(cgj_op_t *o, const cgj_call_t *c, bool promote, cgj_reason_t *r)
{
    return kernel_as_recorded(o, c) || guard_full(o, c, promote, false, r);
}

bool cgj_guard_would_hold(cgj_op_t *o, const cgj_call_t *c, bool promote, cgj_reason_t *r)
{
    return guard_full(o, c, promote, true, r);
}

/* With `dry`, nothing is taken or promoted: true says the guard would hold. */
static bool guard_full(cgj_op_t *o, const cgj_call_t *c, bool promote, bool dry, cgj_reason_t *r)
{
    const addr_ctx_t *ctx = &exact;
    if (!call_shape_equal(&o->call, c, ctx, r)) return false;
    if (cgj_op_class[c->kind] == CGJ_CLASS_BOUNDARY) return true;
    if (c->kind == CGJ_OP_ALLOC && c->u.a.bytes > cgj_plan_size_class(o->call.u.a.bytes)) {
        cgj_reason_set(r, CGJ_REASON_DIFF_ALLOC_SIZE, CGJ_REASON_NO_OP, "%zu bytes, planned %llu", c->u.a.bytes,
                       (unsigned long long)cgj_plan_size_class(o->call.u.a.bytes));
        return false;
    }
    cgj_kparams_t *kp = o->kp;
    if (kp && !kp->extra_form && kp->n && !c->u.k.params) {
        cgj_reason_set(r, CGJ_REASON_DIFF_NO_PARAMS, CGJ_REASON_NO_OP, "%s", c->api);
        return false;
    }
    /* Parameters first: a failed guard leaves the op's values as they were. Slots that vary,
     * or differ and are promoted, are taken after the other values held (`take`). */
    bool take = kp && kp->nvarying;
    for (uint32_t i = 0; kp && i < kp->n; i++) {
        const void *v = cgj_call_slot(c, kp, i);
        if (kp->varying[i] || slot_eq(kp->rec + kp->off[i], v, kp->sz[i])) continue;
        if (promote && !o->fixed) { /* promoted below */
            take = true;
            continue;
        }
        char e[72], g[72];
        cgj_reason_set(r, CGJ_REASON_DIFF_PARAM, CGJ_REASON_NO_OP, "slot %u (%u bytes): expected %s got %s", i,
                       kp->sz[i], cgj_log_hex(e, kp->rec + kp->off[i], kp->sz[i]), cgj_log_hex(g, v, kp->sz[i]));
        return false;
    }
    if (!guard_values(o, c, promote, dry, r)) return false;
    for (uint32_t i = 0; take && !dry && i < kp->n; i++) {
        const void *v = cgj_call_slot(c, kp, i);
        if (!kp->varying[i] && !slot_eq(kp->rec + kp->off[i], v, kp->sz[i])) {
            /* A value the two recorded runs happened to share: patching it is as exact as
             * baking it in, so the slot becomes varying instead of failing every such run. */
            kp->varying[i] = 1;
            kp->nvarying++;
            kp->slots_stale = true;
            o->promoted = true;
        }
        if (kp->varying[i]) memcpy(kp->live + kp->off[i], v, kp->sz[i]);
    }
    return true;
}
