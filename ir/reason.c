/* reason.c — names, messages and hints of the reason table; counts by code. See reason.h. */
#include "ir/reason.h"
#include "base/cgj_base.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const names[] = {
#define CGJ_REASON_NAME(code, msg, hint) #code,
    CGJ_REASON_LIST(CGJ_REASON_NAME)
#undef CGJ_REASON_NAME
};
static const char *const messages[] = {
#define CGJ_REASON_MSG(code, msg, hint) msg,
    CGJ_REASON_LIST(CGJ_REASON_MSG)
#undef CGJ_REASON_MSG
};
static const char *const hints[] = {
#define CGJ_REASON_HINT(code, msg, hint) hint,
    CGJ_REASON_LIST(CGJ_REASON_HINT)
#undef CGJ_REASON_HINT
};
static uint64_t counts[CGJ_REASON_COUNT];

static bool valid(int code)
{
    return code >= 0 && code < CGJ_REASON_COUNT;
}

CGJ_API const char *cgj_reason_name(int code)
{
    return valid(code) ? names[code] : "?";
}

const char *cgj_reason_message(int code)
{
    return valid(code) ? messages[code] : "?";
}

CGJ_API const char *cgj_reason_hint(int code)
{
    return valid(code) ? hints[code] : "";
}

void cgj_reason_set(cgj_reason_t *r, cgj_reason_code_t code, uint32_t op, const char *fmt, ...)
{
    r->code = code;
    r->op = op;
    r->detail[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->detail, sizeof r->detail, fmt, ap);
        va_end(ap);
    }
}

void cgj_reason_tally(const cgj_reason_t *r)
{
    if (valid(r->code)) __atomic_fetch_add(&counts[r->code], 1, __ATOMIC_RELAXED);
}

const char *cgj_reason_format(const cgj_reason_t *r, char *buf, size_t len)
{
    char at[32] = "";
    if (r->op != CGJ_REASON_NO_OP) snprintf(at, sizeof at, " at op %u", r->op);
    snprintf(buf, len, "%s%s%s%s", cgj_reason_message(r->code), at, r->detail[0] ? ": " : "", r->detail);
    return buf;
}

uint64_t cgj_reason_count(int code)
{
    return valid(code) ? __atomic_load_n(&counts[code], __ATOMIC_RELAXED) : 0;
}
