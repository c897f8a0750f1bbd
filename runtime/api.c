/* api.c — the public functions of include/cgjit.h that steer: begin, end, status messages, the
 * version (what the program reads back — counters, anchor figures, the report — is report.c). */
#include "runtime/runtime.h"
#include "base/log.h"
#include "tracer/step.h"
#include "fusion/fusion.h"
#include "base/config.h"

#include <stddef.h>
#include <stdio.h>
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

/* The string of the header the library was built with: a program built against another
 * cgjit.h sees the difference. Touches nothing else, so that it answers without a driver. */
CGJ_API const char *cgj_version(void)
{
    return CGJ_VERSION_STRING;
}

CGJ_API int cgj_mode_set(const char *mode)
{
    int m = mode ? cgj_jit_mode_parse(mode) : -1;
    if (m < 0) {
        CGJ_LOG(api, "cgj_mode_set(\"%s\"): %s", mode ? mode : "(null)", cgj_strerror(CGJ_ERR_INVALID_ARG));
        return CGJ_ERR_INVALID_ARG;
    }
    cgj_runtime_init(); /* CGJIT_MODE is read first, so that it does not undo this */
    cgj_jit_mode_set((cgj_jit_mode_t)m);
    return CGJ_OK;
}

CGJ_API const char *cgj_mode_get(void)
{
    cgj_runtime_init();
    return cgj_jit_mode_name(cgj_jit_mode());
}

CGJ_API int cgj_op_register_elementwise(const char *kernel, const char *spec)
{
    if (!kernel || !*kernel || !spec || !*spec) { /* the header's "NULL or empty", either argument */
        CGJ_LOG(api, "cgj_op_register_elementwise: %s", cgj_strerror(CGJ_ERR_INVALID_ARG));
        return CGJ_ERR_INVALID_ARG;
    }
    char err[200];
    if (!cgj_fusion_register(kernel, spec, err, sizeof err)) {
        cgj_log_message("cgj_op_register_elementwise(\"%s\"): %s; the kernel stays opaque", kernel, err);
        return CGJ_ERR_SPEC;
    }
    return CGJ_OK;
}

CGJ_API int cgj_trace_begin(const char *name)
{
    if (!name || !*name) {
        CGJ_LOG(api, "cgj_trace_begin: %s", cgj_strerror(CGJ_ERR_INVALID_ARG));
        return CGJ_ERR_INVALID_ARG;
    }
    int st = cgj_runtime_init();
    cgj_step_markers_seen();
    if (st == CGJ_OK && !cgj_step_paused()) st = cgj_step_begin(name);
    else if (cgj_step_active()) st = CGJ_ERR_NESTED;
    else cgj_step_begin_eager(); /* untraceable, or paused (cgj_trace_pause): eager, paired */
    if (st != CGJ_OK) CGJ_LOG(api, "cgj_trace_begin(\"%s\"): %s", name, cgj_strerror(st));
    return st;
}

CGJ_API int cgj_trace_end(void)
{
    int st = cgj_step_end();
    if (st != CGJ_OK) CGJ_LOG(api, "cgj_trace_end: %s", cgj_strerror(st));
    return st;
}

CGJ_API int cgj_trace_abort(void)
{
    int st = cgj_step_abort();
    if (st != CGJ_OK) CGJ_LOG(api, "cgj_trace_abort: %s", cgj_strerror(st));
    return st;
}

CGJ_API int cgj_trace_pause(void)
{
    int st = cgj_step_pause();
    if (st != CGJ_OK) CGJ_LOG(api, "cgj_trace_pause: %s", cgj_strerror(st));
    return st;
}

CGJ_API int cgj_trace_resume(void)
{
    int st = cgj_step_resume();
    if (st != CGJ_OK) CGJ_LOG(api, "cgj_trace_resume: %s", cgj_strerror(st));
    return st;
}
