/*
 * live.h — the memory a program holds, as cgjit's wrappers saw it allocated and freed.
 *
 * CGJIT_VERIFY_ALL checks a replayed graph against all of it, not only the allocations its ops
 * name: a kernel that writes through a pointer stored in device memory, or past the allocation
 * its parameter names, writes where no op points, and only a copy of everything can catch and
 * undo that. Kept only while the option is on (the wrappers ask cgj_cfg.VERIFY_ALL): every
 * cuMemAlloc, cuMemAllocPitch, cuMemAllocAsync and cuMemAllocFromPoolAsync that returns memory
 * adds its range, every free through cgjit removes it. Memory mapped with cuMemMap (PyTorch's expandable segments) is
 * not seen here: verify finds it through the ops that name it.
 */
#ifndef CGJ_LIVE_H
#define CGJ_LIVE_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

void cgj_live_add(CUdeviceptr base, size_t size);
void cgj_live_remove(CUdeviceptr base);
/* Every range held now, oldest first, to fn; how many. */
size_t cgj_live_each(void (*fn)(void *ctx, CUdeviceptr base, size_t size), void *ctx);
/* In a child after fork(): the lock as if unlocked. */
void cgj_live_forked(void);

#endif /* CGJ_LIVE_H */
