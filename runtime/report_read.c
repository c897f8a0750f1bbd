/*
 * report_read.c — what a program reads back from cgjit field by field: the process-wide
 * counters (cgj_stats), one anchor's figures (cgj_trace_info), the governor's (cgj_govern) and
 * state names. Structs carry
 * their own size (cgjit.h): a caller built against an older or newer header gets the fields
 * it knows, and a size no header ever had (above READ_SIZE_MAX) is refused.
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

/* The largest size a caller's struct may claim. The library writes out->size bytes (cgjit.h's
 * ABI: zeros past the fields it knows), so a size is a promise about the caller's memory that
 * the library cannot check; a garbage one (a struct never initialized, a size in other units)
 * would have it zero a megabyte of someone else's heap. Fields are only appended, a few dozen
 * bytes a release: no cgjit.h will come near 4 KiB (each struct is a few hundred bytes today,
 * checked below), so a size above it is refused, and nothing is written. */
#define READ_SIZE_MAX 4096
_Static_assert(sizeof(cgj_stats_t) <= READ_SIZE_MAX / 4 && sizeof(cgj_trace_info_t) <= READ_SIZE_MAX / 4 &&
                   sizeof(cgj_govern_info_t) <= READ_SIZE_MAX / 4,
               "the structs must stay far below the size a caller may claim");

static bool size_ok(const void *out)
{
    uint64_t size;
    if (!out) return false;
    memcpy(&size, out, sizeof size);
    return size >= sizeof size && size <= READ_SIZE_MAX;
}

/* Copy the first out->size bytes of `full` (whose size field is set) into out, keeping out's
 * size: the caller's struct may be older (smaller: min(out->size, full_size) bytes are copied)
 * or newer (larger: its bytes past full_size, fields this library does not know, are zeroed). */
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
    if (!size_ok(out)) return CGJ_ERR_INVALID_ARG;
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
    if (!name || !size_ok(out)) return CGJ_ERR_INVALID_ARG;
    cgj_trace_info_t i = {.size = sizeof i};
    int st = cgj_anchor_info(name, &i);
    if (st == CGJ_OK) copy_sized(out, &i, sizeof i);
    return st;
}

CGJ_API const char *cgj_govern_state_name(int state)
{
    static const char *const names[] = {
#define CGJ_GOVERN_STATE_NAME(name, text, doc) text,
        CGJ_GOVERN_STATE_LIST(CGJ_GOVERN_STATE_NAME)
#undef CGJ_GOVERN_STATE_NAME
    };
    return state >= 0 && (size_t)state < CGJ_ARRAY_LEN(names) ? names[state] : "?";
}

CGJ_API int cgj_govern_read(cgj_govern_info_t *out)
{
    if (!size_ok(out)) return CGJ_ERR_INVALID_ARG;
    cgj_govern_info_t g = {.size = sizeof g};
    cgj_gov_get(&g);
    copy_sized(out, &g, sizeof g);
    return CGJ_OK;
}
