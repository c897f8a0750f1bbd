/* api.c — the public functions of include/cgjit.h (the report: report.c). */
#include "runtime/runtime.h"
#include "allocator/pool.h"
#include "base/log.h"
#include "tracer/step.h"

#include <stddef.h>
#include <string.h>

static const char *const status_msgs[] = {
#define CGJ_STATUS_MSG(name, value, msg) [value] = msg,
    CGJ_STATUS_LIST(CGJ_STATUS_MSG)
#undef CGJ_STATUS_MSG
};

CGJ_API const char *cgj_strerror(int status)
{
    if (status < 0 || (size_t)status >= CGJ_ARRAY_LEN(status_msgs) || !status_msgs[status])
        return "unknown cgjit status";
    return status_msgs[status];
}

CGJ_API const char *cgj_state_name(int state)
{
    static const char *const names[] = {
#define CGJ_STATE_NAME(name, doc) #name,
        CGJ_STATE_LIST(CGJ_STATE_NAME)
#undef CGJ_STATE_NAME
    };
    return state >= 0 && (size_t)state < CGJ_ARRAY_LEN(names) ? names[state] : "?";
}

CGJ_API int cgj_trace_begin(const char *name)
{
    if (!name || !*name) {
        CGJ_LOG(api, "cgj_trace_begin: %s", cgj_strerror(CGJ_ERR_INVALID_ARG));
        return CGJ_ERR_INVALID_ARG;
    }
    int st = cgj_runtime_init();
    cgj_step_markers_seen();
    if (st == CGJ_OK) st = cgj_step_begin(name);
    else if (cgj_tls.mode != CGJ_MODE_OFF) st = CGJ_ERR_NESTED;
    else cgj_step_begin_eager();
    if (st != CGJ_OK) CGJ_LOG(api, "cgj_trace_begin(\"%s\"): %s", name, cgj_strerror(st));
    return st;
}

CGJ_API int cgj_trace_end(void)
{
    int st = cgj_step_end();
    if (st != CGJ_OK) CGJ_LOG(api, "cgj_trace_end: %s", cgj_strerror(st));
    return st;
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
