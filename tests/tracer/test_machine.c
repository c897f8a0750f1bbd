/*
 * test_machine.c — the step state machine's tables (tracer/machine.h): every row is allowed,
 * nothing else is, and modes and events are named from the tables.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tracer/machine.h"

TestSuite(tracer_machine);

Test(tracer_machine, every_row_is_allowed)
{
    int rows = 0;
#define CGJ_TEST_ROW(f, e, t, doc)                                                              \
    cr_assert(cgj_machine_allows(CGJ_MODE_##f, CGJ_EVENT_##e, CGJ_MODE_##t), #f " " #e " " #t); \
    rows++;
    CGJ_TRANSITION_LIST(CGJ_TEST_ROW)
#undef CGJ_TEST_ROW
    int allowed = 0;
    for (int f = 0; f < CGJ_MODE_COUNT; f++)
        for (int e = 0; e < CGJ_EVENT_COUNT; e++)
            for (int t = 0; t < CGJ_MODE_COUNT; t++) allowed += cgj_machine_allows(f, e, t);
    cr_assert_eq(allowed, rows, "exactly the rows are allowed (no duplicate rows)");
}

Test(tracer_machine, what_the_table_forbids)
{
    cr_assert_not(cgj_machine_allows(CGJ_MODE_OFF, CGJ_EVENT_END, CGJ_MODE_OFF), "ending no step");
    cr_assert_not(cgj_machine_allows(CGJ_MODE_RECORD, CGJ_EVENT_GUARD_FAIL, CGJ_MODE_RECORD),
                  "only a replay has guards");
    cr_assert_not(cgj_machine_allows(CGJ_MODE_PASSTHRU, CGJ_EVENT_BEGIN, CGJ_MODE_RECORD), "steps do not nest");
    cr_assert_not(cgj_machine_allows(CGJ_MODE_EAGER, CGJ_EVENT_ABORT, CGJ_MODE_PASSTHRU));
    /* every mode but OFF can end, and only into OFF */
    for (int m = 1; m < CGJ_MODE_COUNT; m++) {
        cr_assert(cgj_machine_allows(m, CGJ_EVENT_END, CGJ_MODE_OFF), "%s cannot end", cgj_mode_name(m));
        for (int t = 1; t < CGJ_MODE_COUNT; t++) cr_assert_not(cgj_machine_allows(m, CGJ_EVENT_END, t));
    }
}

Test(tracer_machine, anchor_states)
{
    cr_assert(cgj_machine_anchor_allows(CGJ_STATE_WARMUP, CGJ_STATE_RECORD));
    cr_assert(cgj_machine_anchor_allows(CGJ_STATE_RECORD, CGJ_STATE_REPLAY));
    cr_assert(cgj_machine_anchor_allows(CGJ_STATE_REPLAY, CGJ_STATE_BLACKLISTED));
    for (int s = 0; s <= CGJ_STATE_BLACKLISTED; s++)
        cr_assert_not(cgj_machine_anchor_allows(CGJ_STATE_BLACKLISTED, s), "blacklisted is for good");
    cr_assert(cgj_machine_anchor_allows(CGJ_STATE_REPLAY, CGJ_STATE_WARMUP), "eviction starts over");
    cr_assert_not(cgj_machine_anchor_allows(CGJ_STATE_RECORD, CGJ_STATE_WARMUP));
}

Test(tracer_machine, names)
{
    cr_assert_str_eq(cgj_mode_name(CGJ_MODE_REPLAY), "REPLAY");
    cr_assert_str_eq(cgj_event_name(CGJ_EVENT_GUARD_FAIL), "GUARD_FAIL");
    cr_assert_str_eq(cgj_mode_name(CGJ_MODE_COUNT), "?");
    cr_assert_str_eq(cgj_event_name(CGJ_EVENT_COUNT), "?");
}
