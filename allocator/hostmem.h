/*
 * hostmem.h — cgjit's own host memory, kept apart from the program's malloc heap.
 *
 * Two jemalloc arenas: one for cgjit's metadata (trace records, parameter copies), one for
 * pinned staging whose extent hooks take their memory from cuMemHostAlloc, so every staging
 * buffer is page-locked and host-to-device copies from it are true asynchronous DMA.
 *
 * jemalloc is loaded with dlopen(RTLD_LOCAL): linking it would replace the program's malloc,
 * and cgjit must not change what a program does with its own memory. Where libjemalloc.so.2 is
 * not installed, metadata comes from malloc and staging from cuMemHostAlloc chunks cut by a
 * bump allocator; the report says which.
 */
#ifndef CGJ_HOSTMEM_H
#define CGJ_HOSTMEM_H

#include <stdbool.h>
#include <stddef.h>

/* Metadata allocation (never NULL: exhaustion aborts, see cgj_base.h). */
void *cgj_meta_alloc(size_t n);
void *cgj_meta_realloc(void *p, size_t n);
void cgj_meta_free(void *p);
/* A pinned staging buffer of n bytes, 256-byte aligned, or NULL if the driver refuses. */
void *cgj_staging_alloc(size_t n);
/* Where cgjit's host memory comes from: "jemalloc arenas" or "malloc". */
const char *cgj_hostmem_source(void);

#endif /* CGJ_HOSTMEM_H */
