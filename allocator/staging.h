/*
 * staging.h — pinned host memory owned by cgjit, for host-to-device copies.
 *
 * A replayed step absorbs a host-to-device copy at call time: the bytes are copied into a
 * pinned staging buffer right away (so the program may reuse its buffer as soon as the call
 * returns, as with eager cudaMemcpy) and the graph copies from there. Each staged copy of a
 * trace owns its buffer for the trace's life; buffers are carved from cuMemHostAlloc chunks.
 */
#ifndef CGJ_STAGING_H
#define CGJ_STAGING_H

#include <stddef.h>

/* A pinned buffer of n bytes (256-byte aligned), or NULL if the driver refuses. */
void *cgj_staging_alloc(size_t n);

#endif /* CGJ_STAGING_H */
