/* pointers.c — pointer classification with a range cache; see pointers.h. */
#include "allocator/pointers.h"
#include "base/driver.h"
#include "base/spin.h"

#include <stdbool.h>
#include <stdint.h>

#define SLOTS 64

typedef struct range {
    CUdeviceptr start;
    size_t size; /* 0: empty */
    cgj_mem_kind_t kind;
} range_t;

static range_t cache[SLOTS];
static unsigned next_slot;
static int lock;

static bool cached_range(CUdeviceptr p, cgj_mem_kind_t *kind, CUdeviceptr *start, size_t *size)
{
    bool hit = false;
    cgj_spin_lock(&lock);
    for (unsigned i = 0; i < SLOTS && !hit; i++)
        if (cache[i].size && p - cache[i].start < cache[i].size)
            hit = true, *kind = cache[i].kind, *start = cache[i].start, *size = cache[i].size;
    cgj_spin_unlock(&lock);
    return hit;
}

static void remember(CUdeviceptr start, size_t size, cgj_mem_kind_t kind)
{
    cgj_spin_lock(&lock);
    cache[next_slot] = (range_t){start, size, kind};
    next_slot = (next_slot + 1) % SLOTS;
    cgj_spin_unlock(&lock);
}

/* cuPointerGetAttributes answers host memory the driver does not know with zeros instead of an
 * error (which tools like compute-sanitizer would report as the program's): asked first. */
static cgj_mem_kind_t ask(CUdeviceptr p, CUdeviceptr *start, size_t *size)
{
    unsigned type = 0, managed = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {&type, &managed, start, size};
    if (cgj_drv.r_cuPointerGetAttributes && cgj_drv.r_cuPointerGetAttributes(4, attrs, data, p) == CUDA_SUCCESS) {
        if (!type) return CGJ_MEM_PAGEABLE;
        if (managed || type == CU_MEMORYTYPE_UNIFIED) return CGJ_MEM_MANAGED;
        return type == CU_MEMORYTYPE_HOST ? CGJ_MEM_PINNED : CGJ_MEM_DEVICE;
    }
    *start = 0, *size = 0;
    if (!cgj_drv.r_cuPointerGetAttribute ||
        cgj_drv.r_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS || !type)
        return CGJ_MEM_PAGEABLE;
    if (cgj_drv.r_cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) != CUDA_SUCCESS) managed = 0;
    if (cgj_drv.r_cuPointerGetAttribute(start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p) != CUDA_SUCCESS ||
        cgj_drv.r_cuPointerGetAttribute(size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p) != CUDA_SUCCESS)
        *size = 0; /* known, but not its extent: not cached */
    if (managed || type == CU_MEMORYTYPE_UNIFIED) return CGJ_MEM_MANAGED;
    return type == CU_MEMORYTYPE_HOST ? CGJ_MEM_PINNED : CGJ_MEM_DEVICE;
}

cgj_mem_kind_t cgj_pointer_range(CUdeviceptr p, CUdeviceptr *start, size_t *size)
{
    cgj_mem_kind_t kind;
    *start = 0, *size = 0;
    if (!p) return CGJ_MEM_PAGEABLE;
    if (cached_range(p, &kind, start, size)) return kind;
    kind = ask(p, start, size);
    if (kind == CGJ_MEM_PAGEABLE || !*size || p - *start >= *size) *start = 0, *size = 0;
    else remember(*start, *size, kind);
    return kind;
}

cgj_mem_kind_t cgj_pointer_kind(CUdeviceptr p)
{
    CUdeviceptr start;
    size_t size;
    return cgj_pointer_range(p, &start, &size);
}

void cgj_pointers_forked(void)
{
    lock = 0;
}

static uint64_t host_generation;

void cgj_pointer_forget_host(void *p)
{
    cgj_pointer_forget((CUdeviceptr)(uintptr_t)p);
    __atomic_fetch_add(&host_generation, 1, __ATOMIC_RELEASE);
}

uint64_t cgj_pointer_host_generation(void)
{
    return __atomic_load_n(&host_generation, __ATOMIC_ACQUIRE);
}

void cgj_pointer_forget(CUdeviceptr p)
{
    cgj_spin_lock(&lock);
    for (unsigned i = 0; i < SLOTS; i++)
        if (cache[i].size && p - cache[i].start < cache[i].size) cache[i].size = 0;
    cgj_spin_unlock(&lock);
}
