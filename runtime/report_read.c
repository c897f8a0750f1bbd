/*
 * report_read.c — what a program reads back from cgjit field by field: the process-wide
 * counters (cgj_stats), one anchor's figures (cgj_trace_info) and state names. Structs carry
 * their own size (cgjit.h): a caller built against an older or newer header gets the fields
 * it knows.
 */
#include "runtime/report.h"
#include "allocator/pool.h"

#include <stddef.h>
#include <string.h>

CGJ_API const char *cgj_state_name(int state)
{
    static const char *const names[] = {
#define CGJ_STATE_NAME(name, doc) #name,
        CGJ_STATE_LIST(CGJ_STATE_NAME)
#undef CGJ_STATE_NAME
    };
    return state >= 0 && (size_t)state < CGJ_ARRAY_LEN(names) ? names[state] : "?";
}

/* Copy the first out->size bytes of `full` (whose size field is set) into out, keeping out's
 * size: the caller's struct may be older (smaller) or newer (larger: the rest is zeroed). */
static void copy_sized(void *out, const void *full, size_t full_size)
{
    uint64_t size;
    memcpy(&size, out, sizeof size);
    size_t n = size < full_size ? (size_t)size : full_size;
    memcpy((char *)out + sizeof size, (const char *)full + sizeof size, n - sizeof size);
    if (size > full_size) memset((char *)out + full_size, 0, (size_t)size - full_size);
}

CGJ_API int cgj_stats_read(cgj_stats_t *out)
{
    if (!out || out->size < sizeof out->size) return CGJ_ERR_INVALID_ARG;
    cgj_stats_t s = {.size = sizeof s};
#define CGJ_STATS_COPY(field, doc) s.field = __atomic_load_n(&cgj_g_stats.field, __ATOMIC_RELAXED);
    CGJ_STATS_LIST(CGJ_STATS_COPY)
#undef CGJ_STATS_COPY
    s.pool_bytes = cgj_pool_mapped_bytes();
    copy_sized(out, &s, sizeof s);
    return CGJ_OK;
}

CGJ_API int cgj_trace_info_read(const char *name, cgj_trace_info_t *out)
{
    if (!name || !out || out->size < sizeof out->size) return CGJ_ERR_INVALID_ARG;
    cgj_trace_info_t i = {.size = sizeof i};
    int st = cgj_anchor_info(name, &i);
    if (st == CGJ_OK) copy_sized(out, &i, sizeof i);
    return st;
}
