/*
 * test_reason.c — the reason table (ir/reason.h): every row is worded, named once and
 * formatted the same way; codes are counted only when taken.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "ir/reason.h"

TestSuite(ir_reason);

Test(ir_reason, every_row_has_a_unique_name_and_a_message)
{
    for (int c = 0; c < CGJ_REASON_COUNT; c++) {
        cr_assert_str_not_empty(cgj_reason_name(c), "code %d", c);
        cr_assert_str_not_empty(cgj_reason_message(c), "code %d (%s)", c, cgj_reason_name(c));
        cr_assert_not_null(cgj_reason_hint(c));
        for (int d = 0; d < c; d++) cr_assert_str_neq(cgj_reason_name(c), cgj_reason_name(d));
    }
    cr_assert_str_eq(cgj_reason_name(CGJ_REASON_ABORT_MAX_OPS), "ABORT_MAX_OPS");
    cr_assert_str_eq(cgj_reason_name(CGJ_REASON_NONE), "NONE");
}

Test(ir_reason, out_of_range_codes)
{
    cr_assert_str_eq(cgj_reason_name(-1), "?");
    cr_assert_str_eq(cgj_reason_name(CGJ_REASON_COUNT), "?");
    cr_assert_str_eq(cgj_reason_message(CGJ_REASON_COUNT), "?");
    cr_assert_str_eq(cgj_reason_hint(10000), "");
}

/* Aborts, differences, exits, blacklists and build failures each say what the user can do. */
Test(ir_reason, step_reasons_have_hints)
{
    for (int c = 1; c < CGJ_REASON_COUNT; c++) {
        const char *n = cgj_reason_name(c);
        if (!strncmp(n, "LIB_", 4) || !strncmp(n, "BREAK_CHUNK", 11)) continue;
        cr_assert_str_not_empty(cgj_reason_hint(c), "%s has no hint", n);
    }
}

Test(ir_reason, format)
{
    cgj_reason_t r;
    char buf[400];
    cgj_reason_set(&r, CGJ_REASON_DIFF_GRID, 12, "cuLaunchKernel(%s)", "k");
    cr_assert_str_eq(cgj_reason_format(&r, buf, sizeof buf), "grid differs at op 12: cuLaunchKernel(k)");
    cgj_reason_set(&r, CGJ_REASON_EXIT_OBSERVED, CGJ_REASON_NO_OP, NULL);
    cr_assert_str_eq(cgj_reason_format(&r, buf, sizeof buf),
                     "another thread synchronized with work this step had absorbed");
    cgj_reason_set(&r, CGJ_REASON_ABORT_MAX_OPS, CGJ_REASON_NO_OP, "%s", "cuMemsetD8Async");
    cr_assert_str_eq(cgj_reason_format(&r, buf, sizeof buf),
                     "the step holds more than CGJIT_MAX_OPS calls: cuMemsetD8Async");
    cr_assert_str_eq(cgj_reason_format(&r, buf, 12), "the step ho", "truncated, terminated");
}

Test(ir_reason, counted_when_taken_not_when_set)
{
    cgj_reason_t r;
    uint64_t before = cgj_reason_count(CGJ_REASON_DIFF_STREAM);
    cgj_reason_set(&r, CGJ_REASON_DIFF_STREAM, 0, NULL);
    cr_assert_eq(cgj_reason_count(CGJ_REASON_DIFF_STREAM), before, "a failed probe is not counted");
    cgj_reason_tally(&r);
    cgj_reason_tally(&r);
    cr_assert_eq(cgj_reason_count(CGJ_REASON_DIFF_STREAM), before + 2);
    cr_assert_eq(cgj_reason_count(-3), 0);
}
