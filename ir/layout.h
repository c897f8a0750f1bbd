/*
 * layout.h — kernel parameter layouts, learned from the driver once per function handle.
 */
#ifndef CGJ_LAYOUT_H
#define CGJ_LAYOUT_H

#include "ir/ir.h"

typedef struct cgj_layout {
    uint32_t n, size;
    bool extra_form;
    const uint32_t *off, *sz; /* owned by the cache (or by the op it was taken from) */
} cgj_layout_t;

/* The layout of kernel call c: from the cache, cuFuncGetParamInfo, or cuKernelGetParamInfo;
 * for an `extra`-form launch, one slot covering the packed buffer. False when the driver cannot
 * tell (CGJ_REASON_ABORT_NO_LAYOUT). */
bool cgj_layout_get(const cgj_call_t *c, cgj_layout_t *out);
/* The kernel's name as the driver reports it (cached), or NULL. */
const char *cgj_layout_kernel_name(CUfunction f);

#endif /* CGJ_LAYOUT_H */
