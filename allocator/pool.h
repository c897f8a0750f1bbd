/*
 * pool.h — device memory for replayed steps: one virtual reservation, regions mapped on demand.
 *
 * Every trace gets a region sized by its plan (allocator/plan.h); the in-step allocations of
 * a replay are served at planned offsets in it, so their addresses are the same on every replay
 * and kernel parameters pointing into them are constants of the graph. Regions are carved from
 * one virtual address reservation (cuMemAddressReserve) and backed by physical memory mapped as
 * they are created (cuMemCreate/cuMemMap/cuMemSetAccess): the pool grows without ever moving.
 * Where the driver has no virtual memory management, each region is one cuMemAlloc.
 *
 * Blocks a replay hands out are *held* until the program frees them. A free of a pool address
 * never reaches the driver: it only releases the block. A replay that would hand out a block
 * whose previous instance is still held (an allocation that escaped an earlier step and was not
 * freed) must not: the step leaves replay there instead, so nothing is overwritten.
 */
#ifndef CGJ_POOL_H
#define CGJ_POOL_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

/* Map a new region of `bytes` (rounded up to the mapping granularity). False with why[] set. */
bool cgj_pool_region(size_t bytes, CUdeviceptr *base, char *why, size_t whylen);
/* The bytes a region of `bytes` really takes (rounded to the mapping granularity). */
size_t cgj_pool_region_bytes(size_t bytes);
/* Give region [base, base + bytes) back: its memory is unmapped, its addresses reused later. */
void cgj_pool_region_free(CUdeviceptr base, size_t bytes);
/* Is p inside memory cgjit's pool owns? One comparison on the common path. */
bool cgj_pool_owns(CUdeviceptr p);
/* Mark the block at `addr` (a replay handed it out) held; `flag` is cleared when it is freed. */
void cgj_pool_hold(CUdeviceptr addr, bool *flag);
/* The program frees a pool address: release it. False if no held block starts there. */
bool cgj_pool_release(CUdeviceptr addr);
/* In a child after fork(): the pool's lock as if unlocked (nothing of it is used there). */
void cgj_pool_forked(void);
/* Bytes of device memory the pool has mapped. */
size_t cgj_pool_mapped_bytes(void);

#endif /* CGJ_POOL_H */
