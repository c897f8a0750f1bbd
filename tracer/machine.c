/* machine.c — the transition tables of machine.h, as checks (a few compares per step). */
#include "tracer/machine.h"

#include <stdint.h>

static const char *const mode_names[] = {
#define CGJ_MODE_NAME(name, doc) #name,
    CGJ_MODE_LIST(CGJ_MODE_NAME)
#undef CGJ_MODE_NAME
};
static const char *const event_names[] = {
#define CGJ_EVENT_NAME(name, doc) #name,
    CGJ_EVENT_LIST(CGJ_EVENT_NAME)
#undef CGJ_EVENT_NAME
};

const char *cgj_mode_name(cgj_mode_t m)
{
    return m < CGJ_MODE_COUNT ? mode_names[m] : "?";
}

const char *cgj_event_name(cgj_event_t e)
{
    return e < CGJ_EVENT_COUNT ? event_names[e] : "?";
}

bool cgj_machine_allows(cgj_mode_t from, cgj_event_t ev, cgj_mode_t to)
{
#define CGJ_ROW(f, e, t, doc) \
    if (from == CGJ_MODE_##f && ev == CGJ_EVENT_##e && to == CGJ_MODE_##t) return true;
    CGJ_TRANSITION_LIST(CGJ_ROW)
#undef CGJ_ROW
    return false;
}

bool cgj_machine_anchor_allows(cgj_state_t from, cgj_state_t to)
{
#define CGJ_ROW(f, t, doc) \
    if (from == CGJ_STATE_##f && to == CGJ_STATE_##t) return true;
    CGJ_ANCHOR_TRANSITION_LIST(CGJ_ROW)
#undef CGJ_ROW
    return false;
}
