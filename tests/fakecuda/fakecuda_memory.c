/*
 * fakecuda_memory.c — memory of the fake driver, where device memory is host memory: the block
 * registry (every allocation and registration, so that cuPointerGetAttribute tells device,
 * pinned and registered memory apart and copies and sets can reject ranges in no live
 * allocation), device allocation and free (plain, pitched, stream-ordered), the one default
 * memory pool, pinned host allocation, host registration, prefetching and discarding (argument
 * checks only: there is no managed memory), CUDA arrays (cuArrayCreate_v2, cuArrayDestroy) and
 * cuPointerGetAttribute. Virtual memory management lives in fakecuda_vmm.c. See fakecuda.c for
 * the overview.
 *
 * Every block has a serial number, its identity: a page-locked host allocation that comes back
 * at the address of a freed one is another allocation (another serial). Graph copy nodes and
 * exec copy ops remember the serials of the page-locked host memory they name (fakecuda_graph.c).
 * Like the real driver, cuMemFreeHost keeps freed page-locked memory for reuse: the next
 * cuMemHostAlloc/cuMemAllocHost of the same (256-byte rounded) size gets the most recently
 * freed such buffer back, at the same address, zeroed.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Memory blocks: every allocation and registration, for cuPointerGetAttribute and range checks.
 * ------------------------------------------------------------------------------------------- */

struct block *g_blocks;
size_t g_nblocks;
static size_t g_capblocks;
static uint64_t g_last_serial; /* serials start at 1: 0 means "no allocation" */

struct block *block_find(uintptr_t p)
{
    for (size_t i = 0; i < g_nblocks; i++)
        if (p >= g_blocks[i].base && p - g_blocks[i].base < g_blocks[i].size) return &g_blocks[i];
    return NULL;
}

int block_add(uintptr_t base, size_t size, mem_kind kind)
{
    if (g_nblocks == g_capblocks) {
        size_t cap = g_capblocks ? 2 * g_capblocks : 256;
        struct block *grown = realloc(g_blocks, cap * sizeof *grown);
        if (!grown) return -1;
        g_blocks = grown;
        g_capblocks = cap;
    }
    g_blocks[g_nblocks++] = (struct block){base, size, kind, NULL, VMM_ACCESS_UNSET, ++g_last_serial};
    return 0;
}

void block_del(struct block *b)
{
    *b = g_blocks[--g_nblocks];
}

uint64_t host_serial(uintptr_t p)
{
    const struct block *b = block_find(p);
    return b && (b->kind == MEM_PINNED || b->kind == MEM_REGISTERED) ? b->serial : 0;
}

int serial_live(uint64_t serial)
{
    for (size_t i = 0; i < g_nblocks; i++)
        if (g_blocks[i].serial == serial) return 1;
    return 0;
}

/* Is [p, p+n) inside one live block, or inside VMM mappings that follow each other without a gap
 * (a reservation mapped chunk by chunk is one device range)? Device-side addresses of copies and
 * sets must be. A VMM mapping whose access was set must allow the access (write: read-write). */
int range_known(uintptr_t p, size_t n, int write)
{
    for (;;) {
        const struct block *b = block_find(p);
        if (!b) return 0;
        if (b->kind == MEM_VMM && b->access != VMM_ACCESS_UNSET &&
            (write ? b->access != CU_MEM_ACCESS_FLAGS_PROT_READWRITE : b->access == CU_MEM_ACCESS_FLAGS_PROT_NONE))
            return 0;
        size_t left = b->size - (p - b->base);
        if (n <= left) return 1;
        if (b->kind != MEM_VMM) return 0;
        p += left;
        n -= left;
    }
}

/* Freed page-locked buffers kept for reuse (under the lock): each of `size` bytes, 256-byte
 * rounded; the most recently freed last. Beyond FREE_PINNED_MAX they go back to the system. */
#define FREE_PINNED_MAX 64
static struct {
    void *p;
    size_t size;
} g_free_pinned[FREE_PINNED_MAX];
static size_t g_nfree_pinned;

/* A kept page-locked buffer of `size` rounded bytes, taken off the list; NULL if none. */
static void *pinned_reuse(size_t size)
{
    void *p = NULL;
    lock();
    for (size_t i = g_nfree_pinned; i-- > 0;) {
        if (g_free_pinned[i].size != size) continue;
        p = g_free_pinned[i].p;
        memmove(&g_free_pinned[i], &g_free_pinned[i + 1], (g_nfree_pinned - i - 1) * sizeof g_free_pinned[0]);
        g_nfree_pinned--;
        break;
    }
    unlock();
    return p;
}

/* Keep a freed page-locked buffer for reuse (under the lock); 0 if the list is full. */
static int pinned_keep(void *p, size_t size)
{
    if (g_nfree_pinned == FREE_PINNED_MAX) return 0;
    g_free_pinned[g_nfree_pinned].p = p;
    g_free_pinned[g_nfree_pinned].size = size;
    g_nfree_pinned++;
    return 1;
}

/* Allocate zeroed, 256-byte aligned memory and enter it in the registry (a new serial). Pinned
 * memory comes from the freed buffers kept for reuse first. */
static CUresult mem_new(size_t bytes, mem_kind kind, void **out)
{
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t size = align_up(bytes, ALLOC_ALIGN);
    void *p = kind == MEM_PINNED ? pinned_reuse(size) : NULL;
    if (!p) p = aligned_alloc(ALLOC_ALIGN, size);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, size);
    lock();
    int bad = block_add((uintptr_t)p, bytes, kind);
    unlock();
    if (bad) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = p;
    return CUDA_SUCCESS;
}

/* Free a block allocated by mem_new, given its base; kind must match. Its serial dies with it. */
static CUresult mem_release(uintptr_t base, mem_kind kind)
{
    lock();
    struct block *b = block_find(base);
    int ok = b && b->base == base && b->kind == kind;
    int kept = 0;
    if (ok) {
        kept = kind == MEM_PINNED && pinned_keep((void *)base, align_up(b->size, ALLOC_ALIGN));
        block_del(b);
    }
    unlock();
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    if (!kept) free((void *)base);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------------------------- */

/* Allocation and free are potentially unsafe calls during capture. */
static CUresult alloc_rules(void)
{
    lock();
    CUresult err = capture_rules(RULE_UNSAFE);
    unlock();
    return err;
}

static CUresult device_alloc(CUdeviceptr *dptr, size_t bytes)
{
    void *p;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = alloc_rules();
    if (err == CUDA_SUCCESS) err = mem_new(bytes, MEM_DEVICE, &p);
    if (err != CUDA_SUCCESS) return err;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    bump(&g_counts.allocs);
    return CUDA_SUCCESS;
}

static CUresult device_free(CUdeviceptr dptr)
{
    CUresult err = alloc_rules();
    if (err == CUDA_SUCCESS && dptr) err = mem_release((uintptr_t)dptr, MEM_DEVICE);
    if (err == CUDA_SUCCESS) bump(&g_counts.frees);
    return err;
}

FC_DEFINE(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize))
{
    FAIL_POINT();
    return device_alloc(dptr, bytesize);
}

/* The synchronous free waits for the device (device_syncs), as the real one does. */
FC_DEFINE(cuMemFree_v2, (CUdeviceptr dptr))
{
    FAIL_POINT();
    CUresult err = device_free(dptr);
    if (err == CUDA_SUCCESS && dptr) bump(&g_counts.device_syncs);
    return err;
}

FC_DEFINE(cuMemAllocPitch_v2,
          (CUdeviceptr * dptr, size_t *pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes))
{
    FAIL_POINT();
    if (!pPitch || (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = align_up(WidthInBytes, ALLOC_ALIGN);
    if (Height && pitch > SIZE_MAX / Height) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult err = device_alloc(dptr, pitch * Height);
    if (err == CUDA_SUCCESS) *pPitch = pitch;
    return err;
}

/*
 * Stream-ordered allocation runs at once. Inside a capture the real driver would add an
 * allocation node; this fake refuses instead (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture
 * stays valid), because freeing at capture time would leave the graph with dangling memory.
 */
static CUresult async_mem_stream(CUstream h, int ptds)
{
    fc_stream *s;
    int legacy;
    lock();
    CUresult err = stream_get(h, ptds, &s, &legacy);
    if (err == CUDA_SUCCESS && s && s->status != CU_STREAM_CAPTURE_STATUS_NONE)
        err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (err == CUDA_SUCCESS && legacy) err = capture_rules(RULE_LEGACY);
    unlock();
    return err;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream h, int ptds)
{
    CUresult err = async_mem_stream(h, ptds);
    return err == CUDA_SUCCESS ? device_alloc(dptr, bytes) : err;
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptds)
{
    CUresult err = async_mem_stream(h, ptds);
    return err == CUDA_SUCCESS ? device_free(dptr) : err;
}

FC_PTSZ(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
        alloc_async(dptr, bytesize, hStream, ptds))

FC_PTSZ(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), free_async(dptr, hStream, ptds))

/* Memory pools: one fake default pool; allocating from any pool is cuMemAllocAsync. */
static char g_pool_obj;
#define FAKE_POOL ((CUmemoryPool)(void *)&g_pool_obj)

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h, int ptds)
{
    return pool ? alloc_async(dptr, bytes, h, ptds) : CUDA_ERROR_INVALID_VALUE;
}

FC_PTSZ(cuMemAllocFromPoolAsync, (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
        alloc_from_pool(dptr, bytesize, pool, hStream, ptds))

FC_DEFINE(cuDeviceGetDefaultMemPool, (CUmemoryPool * pool_out, CUdevice dev))
{
    FAIL_POINT();
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = FAKE_POOL;
    return CUDA_SUCCESS;
}

/* Freed memory goes straight back to the system here: nothing to trim. */
FC_DEFINE(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep))
{
    FAIL_POINT();
    (void)minBytesToKeep;
    return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult host_alloc(void **pp, size_t bytes)
{
    if (!pp) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = alloc_rules();
    if (err == CUDA_SUCCESS) err = mem_new(bytes, MEM_PINNED, pp);
    if (err == CUDA_SUCCESS) bump(&g_counts.host_allocs);
    return err;
}

FC_DEFINE(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags))
{
    FAIL_POINT();
    (void)Flags; /* portable/mapped/write-combined: all the same on the CPU */
    return host_alloc(pp, bytesize);
}

FC_DEFINE(cuMemAllocHost_v2, (void **pp, size_t bytesize))
{
    FAIL_POINT();
    return host_alloc(pp, bytesize);
}

FC_DEFINE(cuMemFreeHost, (void *p))
{
    FAIL_POINT();
    CUresult err = alloc_rules();
    return err == CUDA_SUCCESS ? mem_release((uintptr_t)p, MEM_PINNED) : err;
}

FC_DEFINE(cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags))
{
    FAIL_POINT();
    (void)Flags;
    if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    lock();
    CUresult err = capture_rules(RULE_UNSAFE);
    uintptr_t b = (uintptr_t)p;
    for (size_t i = 0; err == CUDA_SUCCESS && i < g_nblocks; i++) /* any overlap */
        if (b < g_blocks[i].base + g_blocks[i].size && g_blocks[i].base < b + bytesize)
            err = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (err == CUDA_SUCCESS && block_add(b, bytesize, MEM_REGISTERED) != 0) err = CUDA_ERROR_OUT_OF_MEMORY;
    unlock();
    return err;
}

FC_DEFINE(cuMemHostUnregister, (void *p))
{
    FAIL_POINT();
    lock();
    CUresult err = capture_rules(RULE_UNSAFE);
    struct block *b = block_find((uintptr_t)p);
    if (err == CUDA_SUCCESS && !(b && b->base == (uintptr_t)p && b->kind == MEM_REGISTERED))
        err = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (err == CUDA_SUCCESS) block_del(b);
    unlock();
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * Prefetching and discarding. Without managed memory there is nothing to migrate: the calls check
 * their arguments (ranges the driver knows, valid locations) and issue no work, but go through
 * the stream like any work (stream handle, capture rules).
 * ------------------------------------------------------------------------------------------- */

static CUresult location_ok(CUmemLocation loc)
{
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return loc.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult ranges_known(const CUdeviceptr *p, const size_t *n, size_t count)
{
    if (!p || !n || count == 0) return CUDA_ERROR_INVALID_VALUE;
    lock();
    int ok = 1;
    for (size_t i = 0; ok && i < count; i++) ok = n[i] > 0 && range_known((uintptr_t)p[i], n[i], 0);
    unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The prefetch locations of a batch: locIdx[k] is the first op of location k (0 for the first). */
static CUresult locations_ok(const CUmemLocation *loc, const size_t *idx, size_t nloc, size_t count)
{
    if (!loc || !idx || nloc == 0 || nloc > count || idx[0] != 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nloc; k++) {
        if (k > 0 && (idx[k] <= idx[k - 1] || idx[k] >= count)) return CUDA_ERROR_INVALID_VALUE;
        CUresult err = location_ok(loc[k]);
        if (err != CUDA_SUCCESS) return err;
    }
    return CUDA_SUCCESS;
}

static CUresult no_work(CUstream h, int ptds)
{
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    return submit(h, ptds, 0, &op);
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, CUstream h, int ptds)
{
    CUresult err = flags != 0 ? CUDA_ERROR_INVALID_VALUE : location_ok(loc);
    if (err == CUDA_SUCCESS) err = ranges_known(&p, &n, 1);
    return err == CUDA_SUCCESS ? no_work(h, ptds) : err;
}

FC_PTSZ(cuMemPrefetchAsync_v2,
        (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream),
        prefetch(devPtr, count, location, flags, hStream, ptds))

/* Prefetch a batch to the locations given, or, with discard_only, discard it (no locations). */
static CUresult batch_prefetch(CUdeviceptr *p, size_t *n, size_t count, CUmemLocation *loc, size_t *idx, size_t nloc,
                               unsigned long long flags, CUstream h, int ptds, int discard_only)
{
    CUresult err = flags != 0 ? CUDA_ERROR_INVALID_VALUE : ranges_known(p, n, count);
    if (err == CUDA_SUCCESS && !discard_only) err = locations_ok(loc, idx, nloc, count);
    return err == CUDA_SUCCESS ? no_work(h, ptds) : err;
}

FC_PTSZ(cuMemPrefetchBatchAsync,
        (CUdeviceptr * dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
         size_t numPrefetchLocs, unsigned long long flags, CUstream hStream),
        batch_prefetch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream, ptds, 0))

/* Discarded contents become undefined; keeping them is one way to be undefined. */
FC_PTSZ(cuMemDiscardBatchAsync,
        (CUdeviceptr * dptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream hStream),
        batch_prefetch(dptrs, sizes, count, NULL, NULL, 0, flags, hStream, ptds, 1))

FC_PTSZ(cuMemDiscardAndPrefetchBatchAsync,
        (CUdeviceptr * dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
         size_t numPrefetchLocs, unsigned long long flags, CUstream hStream),
        batch_prefetch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream, ptds, 0))

/* ---------------------------------------------------------------------------------------------
 * CUDA arrays: dense host buffers (fc_array in fakecuda_internal.h); copies to and from them are
 * in fakecuda_copy.c. Formats of 1, 2 or 4 bytes per channel with 1, 2 or 4 channels.
 * ------------------------------------------------------------------------------------------- */

fc_array *array_get(CUarray h)
{
    return live_get(h, K_ARRAY);
}

static size_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

FC_DEFINE(cuArrayCreate_v2, (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR *d))
{
    FAIL_POINT();
    if (!pHandle || !d || d->Width == 0 || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    size_t elem = format_bytes(d->Format) * d->NumChannels, rows = d->Height ? d->Height : 1;
    if (elem == 0) return CUDA_ERROR_NOT_SUPPORTED;
    if (d->Width > SIZE_MAX / elem / rows) return CUDA_ERROR_OUT_OF_MEMORY;
    fc_array *a = calloc(1, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    *a = (fc_array){calloc(rows, d->Width * elem), d->Width * elem, rows, 1, elem};
    lock();
    int bad = !a->data || live_add(a, K_ARRAY) != 0;
    unlock();
    if (bad) {
        free(a->data);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pHandle = (CUarray)(void *)a;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuArrayDestroy, (CUarray hArray))
{
    FAIL_POINT();
    lock();
    fc_array *a = array_get(hArray);
    if (a) live_del(a);
    unlock();
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    free(a->data);
    free(a);
    return CUDA_SUCCESS;
}

/* One attribute of a known block (under the lock). */
static CUresult block_attribute(const struct block *b, uintptr_t p, CUpointer_attribute attr, void *data)
{
    int device = b->kind == MEM_DEVICE || b->kind == MEM_VMM;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = FAKE_CTX; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = (CUdeviceptr)p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (device) return CUDA_ERROR_INVALID_VALUE; /* device memory has no host mapping */
        *(void **)data = (void *)p;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)b->base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = b->size; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

FC_DEFINE(cuPointerGetAttribute, (void *data, CUpointer_attribute attribute, CUdeviceptr ptr))
{
    FAIL_POINT();
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    lock();
    const struct block *b = block_find((uintptr_t)ptr);
    /* Pageable memory is unknown to the real driver too: it answers CUDA_ERROR_INVALID_VALUE. */
    CUresult err = b ? block_attribute(b, (uintptr_t)ptr, attribute, data) : CUDA_ERROR_INVALID_VALUE;
    unlock();
    return err;
}

/* Several attributes at once; unlike cuPointerGetAttribute, memory the driver does not know is
 * no error: its attributes are zero. */
FC_DEFINE(cuPointerGetAttributes, (unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr))
{
    FAIL_POINT();
    if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
    lock();
    const struct block *b = block_find((uintptr_t)ptr);
    CUresult err = CUDA_SUCCESS;
    for (unsigned i = 0; i < n && err == CUDA_SUCCESS; i++) {
        if (!data[i]) continue;
        if (b) {
            err = block_attribute(b, (uintptr_t)ptr, attrs[i], data[i]);
            if (err == CUDA_ERROR_INVALID_VALUE && attrs[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER)
                *(void **)data[i] = NULL, err = CUDA_SUCCESS;
        } else if (attrs[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE) {
            *(size_t *)data[i] = 0;
        } else if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE || attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED) {
            *(unsigned *)data[i] = 0;
        } else {
            *(CUdeviceptr *)data[i] = 0;
        }
    }
    unlock();
    return err;
}
