/* api.c — the public functions of include/cgjit.h. */
#include "runtime/runtime.h"
#include "allocator/pool.h"
#include "base/log.h"
#include "tracer/step.h"

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
    cgj_implicit_markers_seen();
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

CGJ_API int cgj_stats(cgj_stats_t *out)
{
    if (!out) return CGJ_ERR_INVALID_ARG;
#define CGJ_STATS_COPY(field, doc) out->field = __atomic_load_n(&cgj_g_stats.field, __ATOMIC_RELAXED);
    CGJ_STATS_LIST(CGJ_STATS_COPY)
#undef CGJ_STATS_COPY
    out->pool_bytes = cgj_pool_mapped_bytes();
    return CGJ_OK;
}

CGJ_API int cgj_trace_info(const char *name, cgj_trace_info_t *out)
{
    if (!name || !out) return CGJ_ERR_INVALID_ARG;
    return cgj_anchor_info(name, out);
}

CGJ_API void cgj_report(FILE *f)
{
    cgj_anchor_report(f ? f : stderr);
}
