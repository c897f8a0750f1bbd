/*
 * devpatch_abi.h — the block of node updates the host hands cgjit's patch kernel as its one
 * parameter (graphs/devpatch.cu runs it, graphs/devpatch.c fills it). Plain C: both compilers
 * read it, and the two must agree on every byte.
 */
#ifndef CGJ_DEVPATCH_ABI_H
#define CGJ_DEVPATCH_ABI_H

#include <stdint.h>

/* Updates in one launch of the patch kernel: the block stays under the 4 KiB of parameters
 * every GPU takes. */
#define CGJ_DEVPATCH_ENTRIES 168
/* Patch nodes a segment graph may have at its root, one block each. */
#define CGJ_DEVPATCH_NODES_MAX 8
#define CGJ_DEVPATCH_THREADS 128

/* Write `size` (1 to 8) bytes of `value` at byte `offset` of device-updatable node `node`'s
 * parameters. */
typedef struct cgj_devpatch_entry {
    uint64_t node;  /* CUgraphDeviceNode */
    uint64_t value; /* the bytes, little end first */
    uint32_t offset;
    uint32_t size;
} cgj_devpatch_entry_t;

typedef struct cgj_devpatch_block {
    uint32_t n;
    uint32_t pad;
    cgj_devpatch_entry_t e[CGJ_DEVPATCH_ENTRIES];
} cgj_devpatch_block_t;

#endif
