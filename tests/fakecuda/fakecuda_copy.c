/*
 * fakecuda_copy.c — copies and sets of the fake driver: cuMemcpy*, cuMemsetD* and cuMemsetD2D* in
 * their synchronous, asynchronous and per-thread (_ptds/_ptsz) forms, peer copies (one context),
 * 2D and 3D copies (host, device, unified and array sides, peer ones included), copies to and from
 * arrays, and the batch copies. Each checks that its device side lies in live allocations
 * (fakecuda_memory.c) and submits one memcpy or memset operation per copy to the stream, which
 * runs it at once or captures it (fakecuda_stream.c). See fakecuda.c for the overview.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>

/* ---------------------------------------------------------------------------------------------
 * Copies and sets. `dev_dst`/`dev_src` mark the sides that must lie in a live allocation; the
 * unified cuMemcpy checks neither (UVA: any address goes). Sync variants run on the legacy
 * stream, or the per-thread one for _ptds.
 * ------------------------------------------------------------------------------------------- */

static CUresult do_copy(void *dst, int dev_dst, const void *src, int dev_src, size_t n, CUstream h, int ptds,
                        int blocking)
{
    if (n > 0) {
        lock();
        int ok = (!dev_dst || range_known((uintptr_t)dst, n, 1)) && (!dev_src || range_known((uintptr_t)src, n, 0));
        unlock();
        if (!ok) return CUDA_ERROR_INVALID_VALUE;
    }
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .copy = {.dst = dst, .src = src, .n = n}};
    return submit(h, ptds, blocking, &op);
}

/* cuMemcpy between two device allocations on the legacy stream returns before the copy is done
 * where fakecuda_defer_legacy_copies asks it to (fakecuda_stream.c). */
static CUresult unified_copy(void *dst, const void *src, size_t n, int ptds)
{
    if (!ptds && n > 0) {
        lock();
        int device = range_known((uintptr_t)dst, n, 1) && range_known((uintptr_t)src, n, 0);
        unlock();
        fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .copy = {.dst = dst, .src = src, .n = n}};
        if (device && deferred_take(&op)) return CUDA_SUCCESS;
    }
    return do_copy(dst, 0, src, 0, n, NULL, ptds, 1);
}

FC_PTDS(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), unified_copy(PTR(dst), PTR(src), n, ptds))

FC_PTSZ(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(PTR(dst), 0, PTR(src), 0, n, h, ptds, 0))

FC_PTDS(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n), do_copy(PTR(dst), 1, src, 0, n, NULL, ptds, 1))

FC_PTDS(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n), do_copy(dst, 0, PTR(src), 1, n, NULL, ptds, 1))

FC_PTDS(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n),
        do_copy(PTR(dst), 1, PTR(src), 1, n, NULL, ptds, 1))

FC_PTSZ(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream h),
        do_copy(PTR(dst), 1, src, 0, n, h, ptds, 0))

FC_PTSZ(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(dst, 0, PTR(src), 1, n, h, ptds, 0))

FC_PTSZ(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(PTR(dst), 1, PTR(src), 1, n, h, ptds, 0))

static CUresult do_set(CUdeviceptr dst, unsigned value, unsigned elem, size_t count, CUstream h, int ptds, int blocking)
{
    if (dst % elem != 0) return CUDA_ERROR_INVALID_VALUE;
    if (count > 0) {
        lock();
        int ok = count <= SIZE_MAX / elem && range_known((uintptr_t)dst, count * elem, 1);
        unlock();
        if (!ok) return CUDA_ERROR_INVALID_VALUE;
    }
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMSET,
                .set = {.dst = PTR(dst), .value = value, .elem = elem, .count = count}};
    return submit(h, ptds, blocking, &op);
}

FC_PTDS(cuMemsetD8_v2, (CUdeviceptr dst, unsigned char v, size_t n), do_set(dst, v, 1, n, NULL, ptds, 1))

FC_PTDS(cuMemsetD16_v2, (CUdeviceptr dst, unsigned short v, size_t n), do_set(dst, v, 2, n, NULL, ptds, 1))

FC_PTDS(cuMemsetD32_v2, (CUdeviceptr dst, unsigned int v, size_t n), do_set(dst, v, 4, n, NULL, ptds, 1))

FC_PTSZ(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream h), do_set(dst, v, 1, n, h, ptds, 0))

FC_PTSZ(cuMemsetD16Async, (CUdeviceptr dst, unsigned short v, size_t n, CUstream h), do_set(dst, v, 2, n, h, ptds, 0))

FC_PTSZ(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream h), do_set(dst, v, 4, n, h, ptds, 0))

/* ---------------------------------------------------------------------------------------------
 * 2D sets: `h` rows of `w` elements, rows `pitch` bytes apart; the pitch must hold a row and
 * keep the element alignment.
 * ------------------------------------------------------------------------------------------- */

static CUresult do_set2d(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem, size_t w, size_t h, CUstream hs,
                         int ptds, int blocking)
{
    if (dst % elem != 0 || pitch % elem != 0) return CUDA_ERROR_INVALID_VALUE;
    if (w > 0 && h > 0) {
        if (w > SIZE_MAX / elem || (h > 1 && pitch < w * elem) || (h > 1 && pitch > (SIZE_MAX - w * elem) / (h - 1)))
            return CUDA_ERROR_INVALID_VALUE;
        lock();
        int ok = range_known((uintptr_t)dst, (h - 1) * pitch + w * elem, 1);
        unlock();
        if (!ok) return CUDA_ERROR_INVALID_VALUE;
    }
    fc_op op = {
        .type = CU_GRAPH_NODE_TYPE_MEMSET,
        .set = {.dst = PTR(dst), .value = value, .elem = elem, .count = h ? w : 0, .pitch = pitch, .height = h}};
    return submit(hs, ptds, blocking, &op);
}

FC_PTDS(cuMemsetD2D8_v2, (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h),
        do_set2d(dst, pitch, v, 1, w, h, NULL, ptds, 1))

FC_PTDS(cuMemsetD2D16_v2, (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h),
        do_set2d(dst, pitch, v, 2, w, h, NULL, ptds, 1))

FC_PTDS(cuMemsetD2D32_v2, (CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h),
        do_set2d(dst, pitch, v, 4, w, h, NULL, ptds, 1))

FC_PTSZ(cuMemsetD2D8Async, (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
        do_set2d(dst, pitch, v, 1, w, h, s, ptds, 0))

FC_PTSZ(cuMemsetD2D16Async, (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
        do_set2d(dst, pitch, v, 2, w, h, s, ptds, 0))

FC_PTSZ(cuMemsetD2D32Async, (CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
        do_set2d(dst, pitch, v, 4, w, h, s, ptds, 0))

/* ---------------------------------------------------------------------------------------------
 * Peer copies: the one context is every peer.
 * ------------------------------------------------------------------------------------------- */

static CUresult do_peer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream h, int ptds,
                        int blocking)
{
    if (dc != FAKE_CTX || sc != FAKE_CTX) return CUDA_ERROR_INVALID_CONTEXT;
    return do_copy(PTR(dst), 1, PTR(src), 1, n, h, ptds, blocking);
}

FC_PTDS(cuMemcpyPeer, (CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t n),
        do_peer(dst, dstCtx, src, srcCtx, n, NULL, ptds, 1))

FC_PTSZ(cuMemcpyPeerAsync, (CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t n, CUstream h),
        do_peer(dst, dstCtx, src, srcCtx, n, h, ptds, 0))

/* ---------------------------------------------------------------------------------------------
 * 2D and 3D copies (CUDA_MEMCPY2D, CUDA_MEMCPY3D, CUDA_MEMCPY3D_PEER), with host, device, unified
 * or array sides. Each side is resolved to its first byte, row pitch and slice pitch, and the
 * whole range it spans is checked: device memory must lie in live allocations, an array side in
 * the array, a unified address in an allocation if it is one (else it is host memory). The
 * aligned and unaligned 2D copies are the same here (no pitch limit).
 * ------------------------------------------------------------------------------------------- */

typedef struct copy_side {
    CUmemorytype type;
    const void *host;
    CUdeviceptr dev;
    CUarray array;
    CUcontext ctx; /* peer copies; NULL: not checked */
    size_t x, y, z, pitch, height;
} copy_side;

typedef struct copy_desc {
    copy_side src, dst;
    size_t width, height, depth;
} copy_desc;

/* Resolve one side (under the lock): *p its first byte, *pitch and *slice its row and slice
 * pitches. */
static CUresult side_resolve(const copy_side *sd, const copy_desc *c, int write, unsigned char **p, size_t *pitch,
                             size_t *slice)
{
    if (sd->type == CU_MEMORYTYPE_ARRAY) {
        const fc_array *a = array_get(sd->array);
        if (!a) return CUDA_ERROR_INVALID_HANDLE;
        if (sd->x > a->row || c->width > a->row - sd->x || sd->y > a->rows || c->height > a->rows - sd->y ||
            sd->z > a->layers || c->depth > a->layers - sd->z)
            return CUDA_ERROR_INVALID_VALUE;
        *pitch = a->row, *slice = a->row * a->rows;
        *p = a->data + sd->z * *slice + sd->y * a->row + sd->x;
        return CUDA_SUCCESS;
    }
    if (sd->ctx && sd->ctx != FAKE_CTX) return CUDA_ERROR_INVALID_CONTEXT;
    uintptr_t base;
    switch (sd->type) {
    case CU_MEMORYTYPE_HOST: base = (uintptr_t)sd->host; break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: base = (uintptr_t)sd->dev; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (!base) return CUDA_ERROR_INVALID_VALUE;
    if ((c->height > 1 || c->depth > 1) && sd->pitch < sd->x + c->width) return CUDA_ERROR_INVALID_VALUE;
    if (c->depth > 1 && sd->height < sd->y + c->height) return CUDA_ERROR_INVALID_VALUE;
    *pitch = sd->pitch, *slice = sd->pitch * sd->height;
    uintptr_t first = base + sd->z * *slice + sd->y * sd->pitch + sd->x;
    size_t span = (c->depth - 1) * *slice + (c->height - 1) * *pitch + c->width;
    *p = (unsigned char *)first;
    int device = sd->type == CU_MEMORYTYPE_DEVICE || (sd->type == CU_MEMORYTYPE_UNIFIED && block_find(first));
    return !device || range_known(first, span, write) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult do_copy3d(const copy_desc *c, CUstream h, int ptds, int blocking)
{
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    if (c->width && c->height && c->depth) {
        unsigned char *d, *s;
        lock();
        CUresult err = side_resolve(&c->dst, c, 1, &d, &op.copy.dpitch, &op.copy.dslice);
        if (err == CUDA_SUCCESS) err = side_resolve(&c->src, c, 0, &s, &op.copy.spitch, &op.copy.sslice);
        unlock();
        if (err != CUDA_SUCCESS) return err;
        op.copy.dst = d, op.copy.src = s;
        op.copy.n = c->width, op.copy.height = c->height, op.copy.depth = c->depth;
    }
    return submit(h, ptds, blocking, &op);
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream h, int ptds, int blocking)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    copy_desc c = {.src = {p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, NULL, p->srcXInBytes, p->srcY, 0,
                           p->srcPitch, 0},
                   .dst = {p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, NULL, p->dstXInBytes, p->dstY, 0,
                           p->dstPitch, 0},
                   .width = p->WidthInBytes,
                   .height = p->Height,
                   .depth = 1};
    return do_copy3d(&c, h, ptds, blocking);
}

FC_PTDS(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *p), copy2d(p, NULL, ptds, 1))
FC_PTDS(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *p), copy2d(p, NULL, ptds, 1))
FC_PTSZ(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *p, CUstream h), copy2d(p, h, ptds, 0))

/* The 3D descriptors differ only in their reserved pointer or context fields: one body. */
#define COPY3D_DESC(p, sctx, dctx)                                                                \
    {                                                                                             \
        .src = {(p)->srcMemoryType, (p)->srcHost, (p)->srcDevice, (p)->srcArray, (sctx),          \
                (p)->srcXInBytes,   (p)->srcY,    (p)->srcZ,      (p)->srcPitch, (p)->srcHeight}, \
        .dst = {(p)->dstMemoryType, (p)->dstHost, (p)->dstDevice, (p)->dstArray, (dctx),          \
                (p)->dstXInBytes,   (p)->dstY,    (p)->dstZ,      (p)->dstPitch, (p)->dstHeight}, \
        .width = (p)->WidthInBytes, .height = (p)->Height, .depth = (p)->Depth                    \
    }

static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream h, int ptds, int blocking)
{
    if (!p || p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1) return CUDA_ERROR_INVALID_VALUE;
    copy_desc c = COPY3D_DESC(p, NULL, NULL);
    return do_copy3d(&c, h, ptds, blocking);
}

static CUresult copy3d_peer(const CUDA_MEMCPY3D_PEER *p, CUstream h, int ptds, int blocking)
{
    if (!p || p->srcLOD || p->dstLOD) return CUDA_ERROR_INVALID_VALUE;
    if (!p->srcContext || !p->dstContext) return CUDA_ERROR_INVALID_CONTEXT;
    copy_desc c = COPY3D_DESC(p, p->srcContext, p->dstContext);
    return do_copy3d(&c, h, ptds, blocking);
}

FC_PTDS(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *p), copy3d(p, NULL, ptds, 1))
FC_PTSZ(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *p, CUstream h), copy3d(p, h, ptds, 0))
FC_PTDS(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *p), copy3d_peer(p, NULL, ptds, 1))
FC_PTSZ(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *p, CUstream h), copy3d_peer(p, h, ptds, 0))

/* ---------------------------------------------------------------------------------------------
 * Copies to and from arrays by byte offset into their dense storage (1D arrays in the real
 * driver's terms). The byte count must be a whole number of elements.
 * ------------------------------------------------------------------------------------------- */

/* The bytes [off, off+n) of an array, or NULL. Takes the lock. */
static void *array_span(CUarray h, size_t off, size_t n, CUresult *err)
{
    lock();
    const fc_array *a = array_get(h);
    size_t size = a ? a->row * a->rows * a->layers : 0;
    void *p = a && n % a->elem == 0 && off <= size && n <= size - off ? a->data + off : NULL;
    unlock();
    *err = !a ? CUDA_ERROR_INVALID_HANDLE : !p ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    return p;
}

/* An array-side copy: dst and src are either plain addresses (dev_* say whether they must be
 * device memory) or, where the array handle is set, offsets into that array. */
static CUresult do_copy_array(CUarray da, uintptr_t dst, int dev_dst, CUarray sa, uintptr_t src, int dev_src, size_t n,
                              CUstream h, int ptds, int blocking)
{
    CUresult err = CUDA_SUCCESS;
    void *d = da ? array_span(da, dst, n, &err) : (void *)dst;
    if (err != CUDA_SUCCESS) return err;
    const void *s = sa ? array_span(sa, src, n, &err) : (const void *)src;
    if (err != CUDA_SUCCESS) return err;
    return do_copy(d, dev_dst && !da, s, dev_src && !sa, n, h, ptds, blocking);
}

FC_PTDS(cuMemcpyAtoA_v2, (CUarray dst, size_t dstOffset, CUarray src, size_t srcOffset, size_t n),
        dst &&src ? do_copy_array(dst, dstOffset, 0, src, srcOffset, 0, n, NULL, ptds, 1) : CUDA_ERROR_INVALID_HANDLE)

FC_PTDS(cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray src, size_t srcOffset, size_t n),
        src ? do_copy_array(NULL, dst, 1, src, srcOffset, 0, n, NULL, ptds, 1) : CUDA_ERROR_INVALID_HANDLE)

FC_PTDS(cuMemcpyAtoH_v2, (void *dst, CUarray src, size_t srcOffset, size_t n),
        src ? do_copy_array(NULL, (uintptr_t)dst, 0, src, srcOffset, 0, n, NULL, ptds, 1) : CUDA_ERROR_INVALID_HANDLE)

FC_PTDS(cuMemcpyDtoA_v2, (CUarray dst, size_t dstOffset, CUdeviceptr src, size_t n),
        dst ? do_copy_array(dst, dstOffset, 0, NULL, src, 1, n, NULL, ptds, 1) : CUDA_ERROR_INVALID_HANDLE)

FC_PTDS(cuMemcpyHtoA_v2, (CUarray dst, size_t dstOffset, const void *src, size_t n),
        dst ? do_copy_array(dst, dstOffset, 0, NULL, (uintptr_t)src, 0, n, NULL, ptds, 1) : CUDA_ERROR_INVALID_HANDLE)

FC_PTSZ(cuMemcpyAtoHAsync_v2, (void *dst, CUarray src, size_t srcOffset, size_t n, CUstream h),
        src ? do_copy_array(NULL, (uintptr_t)dst, 0, src, srcOffset, 0, n, h, ptds, 0) : CUDA_ERROR_INVALID_HANDLE)

FC_PTSZ(cuMemcpyHtoAAsync_v2, (CUarray dst, size_t dstOffset, const void *src, size_t n, CUstream h),
        dst ? do_copy_array(dst, dstOffset, 0, NULL, (uintptr_t)src, 0, n, h, ptds, 0) : CUDA_ERROR_INVALID_HANDLE)

/* ---------------------------------------------------------------------------------------------
 * Batch copies (CUDA 12.8+ with the CUDA 13 ABI, no failIdx). Every copy is checked before any
 * is issued, then each is one copy op.
 * ------------------------------------------------------------------------------------------- */

static int access_order_ok(CUmemcpySrcAccessOrder o)
{
    return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
           o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* attrs[k] applies to the copies from attrIdx[k] on (attrIdx[0] == 0, increasing). Addresses are
 * unified: a side that lies in an allocation must lie in it whole. */
static CUresult batch_copy(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
                           size_t *attrIdx, size_t nattrs, CUstream h, int ptds)
{
    if (!dsts || !srcs || !sizes || count == 0 || !attrs || !attrIdx || nattrs == 0 || nattrs > count ||
        attrIdx[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++)
        if ((k > 0 && (attrIdx[k] <= attrIdx[k - 1] || attrIdx[k] >= count)) ||
            !access_order_ok(attrs[k].srcAccessOrder) ||
            (attrs[k].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
            return CUDA_ERROR_INVALID_VALUE;
    CUresult err = stream_check(h, ptds);
    lock();
    for (size_t i = 0; err == CUDA_SUCCESS && i < count; i++) {
        if (!dsts[i] || !srcs[i] || sizes[i] == 0) err = CUDA_ERROR_INVALID_VALUE;
        else if ((block_find(dsts[i]) && !range_known(dsts[i], sizes[i], 1)) ||
                 (block_find(srcs[i]) && !range_known(srcs[i], sizes[i], 0)))
            err = CUDA_ERROR_INVALID_VALUE;
    }
    unlock();
    for (size_t i = 0; err == CUDA_SUCCESS && i < count; i++)
        err = do_copy(PTR(dsts[i]), 0, PTR(srcs[i]), 0, sizes[i], h, ptds, 0);
    return err;
}

FC_PTSZ(cuMemcpyBatchAsync_v2,
        (CUdeviceptr * dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
         size_t *attrsIdxs, size_t numAttrs, CUstream hStream),
        batch_copy(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, ptds))

/* A 3D batch operand as a copy side: pointers (rowLength and layerHeight in bytes, 0 meaning the
 * extent's; unified addressing) or arrays (offset in elements). */
static CUresult operand_side(const CUmemcpy3DOperand *o, const CUextent3D *e, copy_side *sd)
{
    if (o->type == CU_MEMCPY_OPERAND_TYPE_POINTER) {
        size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
        size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
        *sd = (copy_side){CU_MEMORYTYPE_UNIFIED, NULL, o->op.ptr.ptr, NULL, NULL, 0, 0, 0, row, layer};
        return CUDA_SUCCESS;
    }
    if (o->type != CU_MEMCPY_OPERAND_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
    lock();
    const fc_array *a = array_get(o->op.array.array);
    size_t elem = a ? a->elem : 0;
    unlock();
    if (!elem) return CUDA_ERROR_INVALID_HANDLE;
    *sd = (copy_side){
        CU_MEMORYTYPE_ARRAY,  NULL, 0, o->op.array.array, NULL, o->op.array.offset.x * elem, o->op.array.offset.y,
        o->op.array.offset.z, 0,    0};
    return CUDA_SUCCESS;
}

static CUresult batch_copy3d(size_t n, const CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream h,
                             int ptds)
{
    if (n == 0 || !ops || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    copy_desc *descs = calloc(n, sizeof *descs);
    if (!descs) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult err = stream_check(h, ptds);
    for (size_t i = 0; err == CUDA_SUCCESS && i < n; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
        if (!o->extent.width || !o->extent.height || !o->extent.depth || !access_order_ok(o->srcAccessOrder) ||
            (o->flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)) {
            err = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        err = operand_side(&o->src, &o->extent, &descs[i].src);
        if (err == CUDA_SUCCESS) err = operand_side(&o->dst, &o->extent, &descs[i].dst);
        /* array extents count elements: the width in bytes is that of the array's elements */
        size_t elem = 1;
        const CUmemcpy3DOperand *arr = o->src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? &o->src : &o->dst;
        if (err == CUDA_SUCCESS && arr->type == CU_MEMCPY_OPERAND_TYPE_ARRAY) {
            lock();
            const fc_array *a = array_get(arr->op.array.array);
            elem = a ? a->elem : 1;
            unlock();
        }
        descs[i].width = o->extent.width * elem, descs[i].height = o->extent.height, descs[i].depth = o->extent.depth;
        if (err == CUDA_SUCCESS && o->src.type == CU_MEMCPY_OPERAND_TYPE_POINTER) descs[i].src.pitch *= elem;
        if (err == CUDA_SUCCESS && o->dst.type == CU_MEMCPY_OPERAND_TYPE_POINTER) descs[i].dst.pitch *= elem;
    }
    for (size_t i = 0; err == CUDA_SUCCESS && i < n; i++) err = do_copy3d(&descs[i], h, ptds, 0);
    free(descs);
    return err;
}

FC_PTSZ(cuMemcpy3DBatchAsync_v2,
        (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream hStream),
        batch_copy3d(numOps, opList, flags, hStream, ptds))
