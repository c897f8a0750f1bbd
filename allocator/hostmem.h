/*
 * hostmem.h — pinned staging: page-locked host memory owned by cgjit.
 *
 * Host-to-device copies of a replayed step are staged here at call time, so the program may
 * reuse its buffer as soon as the call returns. The memory comes from a jemalloc arena of
 * cgjit's private copy (base/mem.h) whose extent hooks take it from cuMemHostAlloc, so every
 * staging buffer is page-locked and copies from it are true asynchronous DMA. Built without
 * jemalloc, staging is cut from 4 MiB cuMemHostAlloc chunks by a bump allocator.
 */
#ifndef CGJ_HOSTMEM_H
#define CGJ_HOSTMEM_H

#include <stddef.h>

/* A pinned staging buffer of n bytes, 256-byte aligned, or NULL if the driver refuses. */
void *cgj_staging_alloc(size_t n);
/* Give a staging buffer back (a trace is evicted); its pinned memory stays with the arena. */
void cgj_staging_free(void *p);

#endif /* CGJ_HOSTMEM_H */
