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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A pinned staging buffer of n bytes, 256-byte aligned, or NULL if the driver refuses. */
void *cgj_staging_alloc(size_t n);
/* Give a staging buffer back (a trace is evicted); its pinned memory stays with the arena. */
void cgj_staging_free(void *p);

/* Does [base, base + size) overlap pinned memory the staging arena took from the driver
 * (cgjit's own, never the program's)? */
bool cgj_hostmem_owns(uintptr_t base, size_t size);

#endif /* CGJ_HOSTMEM_H */
