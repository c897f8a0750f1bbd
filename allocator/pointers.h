/*
 * pointers.h — what a pointer is, asked of the driver and cached by range.
 *
 * With unified addressing a "host" argument may be device memory (a program copies a device
 * row into a device buffer with cudaMemcpy(..., cudaMemcpyHostToDevice), which the driver
 * accepts), and a "device" argument may be pinned host memory. cgjit records a copy by what its
 * operands are, never by the API's name: only pageable host memory is read on the CPU (staged).
 *
 * The driver's answer for a device, pinned or managed pointer comes with the whole range of its
 * allocation, which is cached (a small table, most recent first); a free or unregistration
 * through cgjit's wrappers forgets the range. Pageable memory has no range and is not cached.
 */
#ifndef CGJ_POINTERS_H
#define CGJ_POINTERS_H

#include <cuda.h>

typedef enum cgj_mem_kind {
    CGJ_MEM_PAGEABLE, /* host memory the driver does not know: read on the CPU */
    CGJ_MEM_PINNED,   /* page-locked host memory (allocated or registered with the driver) */
    CGJ_MEM_DEVICE,   /* device memory */
    CGJ_MEM_MANAGED,  /* managed (unified) memory */
} cgj_mem_kind_t;

cgj_mem_kind_t cgj_pointer_kind(CUdeviceptr p);
/* What p is, and (device, pinned or managed memory) the allocation it falls in: *start and
 * *size, both 0 where the driver does not say. */
cgj_mem_kind_t cgj_pointer_range(CUdeviceptr p, CUdeviceptr *start, size_t *size);
/* Memory at p is freed or unregistered: forget the cached range that holds it. */
void cgj_pointer_forget(CUdeviceptr p);
/* Page-locked host memory at p is freed or unregistered: forget it, and count a new host memory
 * generation. An executable graph whose copy node names host memory freed since it was set must
 * have that node set again before it launches (the driver keeps the old allocation, even when
 * the same address comes back). */
void cgj_pointer_forget_host(void *p);
uint64_t cgj_pointer_host_generation(void);
/* In a child after fork(): the cache's lock as if unlocked. */
void cgj_pointers_forked(void);

#endif /* CGJ_POINTERS_H */
