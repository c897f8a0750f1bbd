/*
 * fakecuda_vmm.c — virtual memory management of the fake driver: allocation granularity,
 * address reservations (cuMemAddressReserve/Free), physical handles (cuMemCreate/Release),
 * mapping and unmapping them into a reservation (cuMemMap/Unmap), access control
 * (cuMemSetAccess/GetAccess), and cuMemGetInfo, whose used memory counts both device
 * allocations and VMM handles. Mappings are entered in the block registry of fakecuda_memory.c
 * as device memory. The section comment below lists how this differs from the real driver.
 * See fakecuda.c for the overview.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <sys/mman.h>

/* ---------------------------------------------------------------------------------------------
 * Virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap ...).
 *
 * A reservation is an anonymous PROT_NONE, MAP_NORESERVE mapping. A physical handle only records
 * its size (it counts as used memory for cuMemGetInfo); it owns no host memory of its own. Mapping
 * a handle makes that part of the reservation readable and writable (mprotect) and enters it in
 * the block registry as MEM_VMM device memory; unmapping protects it again and drops its pages
 * (MADV_DONTNEED), so the contents are gone. Hence, unlike the real driver: a handle can be mapped
 * at one place at a time (a second mapping would not alias the first: refused), and a handle
 * unmapped and mapped again comes back zeroed rather than with its old contents.
 * None of these calls are subject to the capture rules.
 * ------------------------------------------------------------------------------------------- */

#define VMM_GRANULARITY ((size_t)2 << 20)
#define FAKE_TOTAL_MEM ((size_t)80 << 30)

typedef struct vmm_handle {
    size_t size;
    int released; /* cuMemRelease called: gone once unmapped */
    int mapped;
} vmm_handle;

static struct resv {
    uintptr_t base;
    size_t size;
} * g_resv;
static size_t g_nresv, g_capresv;
static size_t g_vmm_bytes; /* physical bytes of live handles (released ones still mapped included) */

static int prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           prop->location.id == 0;
}

/* The reservation that holds [p, p+n) whole (under the lock). */
static struct resv *resv_find(uintptr_t p, size_t n)
{
    for (size_t i = 0; i < g_nresv; i++)
        if (p >= g_resv[i].base && p - g_resv[i].base < g_resv[i].size && n <= g_resv[i].size - (p - g_resv[i].base))
            return &g_resv[i];
    return NULL;
}

/* Does [p, p+n) overlap any registered block (under the lock)? */
static int blocks_overlap(uintptr_t p, size_t n)
{
    for (size_t i = 0; i < g_nblocks; i++)
        if (p < g_blocks[i].base + g_blocks[i].size && g_blocks[i].base < p + n) return 1;
    return 0;
}

/* Is [p, p+n) exactly a run of whole VMM mappings without gaps (under the lock)? */
static int vmm_run(uintptr_t p, size_t n)
{
    uintptr_t end = p + n;
    if (n == 0 || end < p) return 0;
    while (p < end) {
        const struct block *b = block_find(p);
        if (!b || b->kind != MEM_VMM || b->base != p || b->size > end - p) return 0;
        p += b->size;
    }
    return 1;
}

/* Forget a handle's memory once it is released and unmapped (under the lock). */
static void vmm_handle_drop(vmm_handle *h)
{
    if (!h->released || h->mapped) return;
    g_vmm_bytes -= h->size;
    free(h);
}

FC_DEFINE(cuMemGetAllocationGranularity,
          (size_t * granularity, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option))
{
    FAIL_POINT();
    if (!granularity || !prop_ok(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

/* The hint addr is ignored; the range is aligned to max(alignment, granularity). */
FC_DEFINE(cuMemAddressReserve,
          (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags))
{
    FAIL_POINT();
    (void)addr;
    if (!ptr || size == 0 || size % VMM_GRANULARITY || flags || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > VMM_GRANULARITY ? alignment : VMM_GRANULARITY;
    if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
    /* Over-reserve by the alignment, then give back the ends. */
    void *raw = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t lo = (uintptr_t)raw, base = align_up(lo, align);
    if (base > lo) munmap(raw, base - lo);
    if (lo + align > base) munmap((void *)(base + size), lo + align - base);
    lock();
    int bad = 0;
    if (g_nresv == g_capresv) {
        size_t cap = g_capresv ? 2 * g_capresv : 16;
        struct resv *grown = realloc(g_resv, cap * sizeof *grown);
        if (grown) {
            g_resv = grown;
            g_capresv = cap;
        } else {
            bad = 1;
        }
    }
    if (!bad) {
        g_resv[g_nresv++] = (struct resv){base, size};
        g_counts.vmm_reserves++;
    }
    unlock();
    if (bad) {
        munmap((void *)base, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

/* ptr and size must be those of a reservation, and nothing may be mapped in it any more (stricter
 * than the real driver is known to be, to catch leaked mappings). */
FC_DEFINE(cuMemAddressFree, (CUdeviceptr ptr, size_t size))
{
    FAIL_POINT();
    lock();
    struct resv *r = resv_find((uintptr_t)ptr, size);
    CUresult err = (r && r->base == (uintptr_t)ptr && r->size == size && !blocks_overlap(r->base, r->size))
                     ? CUDA_SUCCESS
                     : CUDA_ERROR_INVALID_VALUE;
    if (err == CUDA_SUCCESS) {
        munmap((void *)r->base, r->size);
        *r = g_resv[--g_nresv];
    }
    unlock();
    return err;
}

FC_DEFINE(cuMemCreate, (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,
                        unsigned long long flags))
{
    FAIL_POINT();
    if (!handle || !prop_ok(prop) || size == 0 || size % VMM_GRANULARITY || flags) return CUDA_ERROR_INVALID_VALUE;
    vmm_handle *h = calloc(1, sizeof *h);
    if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
    h->size = size;
    lock();
    int bad = live_add(h, K_VMM);
    if (!bad) {
        g_vmm_bytes += size;
        g_counts.vmm_creates++;
    }
    unlock();
    if (bad) {
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* As in the real driver, a handle released while mapped lives on until it is unmapped. */
FC_DEFINE(cuMemRelease, (CUmemGenericAllocationHandle handle))
{
    FAIL_POINT();
    lock();
    vmm_handle *h = live_get((const void *)(uintptr_t)handle, K_VMM);
    if (h) {
        live_del(h);
        h->released = 1;
        vmm_handle_drop(h);
    }
    unlock();
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Map the first size bytes of handle at ptr (offset must be 0): ptr and size granularity-aligned,
 * the range inside one reservation and not mapped yet; the handle mapped nowhere else. */
FC_DEFINE(cuMemMap,
          (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags))
{
    FAIL_POINT();
    if (size == 0 || size % VMM_GRANULARITY || ptr % VMM_GRANULARITY || offset || flags)
        return CUDA_ERROR_INVALID_VALUE;
    lock();
    vmm_handle *h = live_get((const void *)(uintptr_t)handle, K_VMM);
    CUresult err = CUDA_SUCCESS;
    if (!h || size > h->size || !resv_find((uintptr_t)ptr, size) || blocks_overlap((uintptr_t)ptr, size))
        err = CUDA_ERROR_INVALID_VALUE;
    else if (h->mapped) err = CUDA_ERROR_NOT_SUPPORTED; /* would alias the other mapping on a GPU; cannot here */
    else if (mprotect(PTR(ptr), size, PROT_READ | PROT_WRITE) != 0) err = CUDA_ERROR_OUT_OF_MEMORY;
    else if (block_add((uintptr_t)ptr, size, MEM_VMM) != 0) {
        mprotect(PTR(ptr), size, PROT_NONE);
        err = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (err == CUDA_SUCCESS) {
        g_blocks[g_nblocks - 1].vh = h;
        h->mapped = 1;
        g_counts.vmm_maps++;
    }
    unlock();
    return err;
}

/* Unmap whole mappings: [ptr, ptr+size) must be one or more of them, back to back. */
FC_DEFINE(cuMemUnmap, (CUdeviceptr ptr, size_t size))
{
    FAIL_POINT();
    lock();
    CUresult err = vmm_run((uintptr_t)ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t p = (uintptr_t)ptr; err == CUDA_SUCCESS && p < (uintptr_t)ptr + size;) {
        struct block *b = block_find(p);
        vmm_handle *h = b->vh;
        size_t n = b->size;
        block_del(b);
        mprotect((void *)p, n, PROT_NONE);
        madvise((void *)p, n, MADV_DONTNEED); /* the contents are lost */
        h->mapped = 0;
        vmm_handle_drop(h);
        p += n;
    }
    if (err == CUDA_SUCCESS) g_counts.vmm_unmaps++;
    unlock();
    return err;
}

/* Set device 0's access to mapped memory: the range must be granularity-aligned and wholly mapped.
 * The access is recorded on each mapping the range touches and enforced with mprotect (a kernel
 * writing read-only memory faults); copies and sets check it too. */
FC_DEFINE(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))
{
    FAIL_POINT();
    if (!desc || count == 0 || size == 0 || size % VMM_GRANULARITY || ptr % VMM_GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    int access = VMM_ACCESS_UNSET;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        access = (int)desc[i].flags;
    }
    int prot = access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
             : access == CU_MEM_ACCESS_FLAGS_PROT_READ      ? PROT_READ
                                                            : PROT_NONE;
    lock();
    CUresult err = CUDA_SUCCESS;
    uintptr_t end = (uintptr_t)ptr + size;
    for (uintptr_t p = (uintptr_t)ptr; err == CUDA_SUCCESS && p < end;) {
        const struct block *b = block_find(p);
        if (!b || b->kind != MEM_VMM) err = CUDA_ERROR_INVALID_VALUE;
        else p = b->base + b->size;
    }
    for (uintptr_t p = (uintptr_t)ptr; err == CUDA_SUCCESS && p < end;) {
        struct block *b = block_find(p);
        b->access = access;
        p = b->base + b->size;
    }
    if (err == CUDA_SUCCESS) {
        mprotect(PTR(ptr), size, prot);
        g_counts.vmm_access_sets++;
    }
    unlock();
    return err;
}

/* Device 0's access to the mapping holding ptr; PROT_NONE until cuMemSetAccess (although the
 * fake lets the memory be used before that). */
FC_DEFINE(cuMemGetAccess, (unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr))
{
    FAIL_POINT();
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (location->id != 0) return CUDA_ERROR_INVALID_DEVICE;
    lock();
    const struct block *b = block_find((uintptr_t)ptr);
    CUresult err = b && b->kind == MEM_VMM ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (err == CUDA_SUCCESS)
        *flags = b->access == VMM_ACCESS_UNSET ? CU_MEM_ACCESS_FLAGS_PROT_NONE : (unsigned long long)b->access;
    unlock();
    return err;
}

/* An 80 GiB device; free is the total less live device allocations and VMM physical handles. */
FC_DEFINE(cuMemGetInfo_v2, (size_t * free_bytes, size_t *total_bytes))
{
    FAIL_POINT();
    if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
    lock();
    size_t used = g_vmm_bytes;
    for (size_t i = 0; i < g_nblocks; i++)
        if (g_blocks[i].kind == MEM_DEVICE) used += g_blocks[i].size;
    unlock();
    *total_bytes = FAKE_TOTAL_MEM;
    *free_bytes = used < FAKE_TOTAL_MEM ? FAKE_TOTAL_MEM - used : 0;
    return CUDA_SUCCESS;
}
