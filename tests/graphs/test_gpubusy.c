/*
 * test_gpubusy.c — the accounting of CGJIT_BUSY (graphs/gpubusy.c), fed records as CUPTI gives
 * them: the external id of a driver call, then the GPU work that call launched. A step's busy
 * time is the union of its work's intervals; work of no tagged call, and late work of a step
 * already closed, does not count.
 */
#define _GNU_SOURCE
#include "graphs/gpubusy.h"
#include "base/config.h"

#include <criterion/criterion.h>
#include <stdlib.h>

#define EXT(id, serial) (((uint64_t)(id) << 40) | (serial))

static void setup(void)
{
    cgj_gpubusy_reset();
}

TestSuite(gpubusy, .init = setup);

Test(gpubusy, a_step_is_the_union_of_its_work)
{
    uint32_t id = cgj_gpubusy_id();
    cr_assert_eq(id, 1);
    cgj_gpubusy_note_external(7, EXT(id, 3)); /* one graph launch ... */
    cgj_gpubusy_note_work(7, 100, 200);       /* ... its kernels, one after another */
    cgj_gpubusy_note_work(7, 200, 250);
    cgj_gpubusy_note_external(8, EXT(id, 3)); /* a copy on another stream, overlapping */
    cgj_gpubusy_note_work(8, 240, 300);
    cgj_gpubusy_note_work(7, 400, 410); /* after a gap */
    uint64_t busy, steps;
    cgj_gpubusy_figures(id, &busy, &steps);
    cr_assert_eq(steps, 1);
    cr_assert_eq(busy, 200 + 10, "busy %llu", (unsigned long long)busy);
}

Test(gpubusy, steps_are_told_apart_by_their_serial)
{
    uint32_t id = cgj_gpubusy_id();
    for (uint32_t s = 0; s < 10; s++) {
        cgj_gpubusy_note_external(100 + s, EXT(id, s + 3));
        cgj_gpubusy_note_work(100 + s, 1000 * s, 1000 * s + 10 * (s + 1));
    }
    uint64_t busy, steps;
    cr_assert(cgj_gpubusy_figures(id, &busy, &steps));
    cr_assert_eq(steps, 10);
    cr_assert_eq(busy, 10 * 55);
}

Test(gpubusy, untagged_and_late_work_does_not_count)
{
    uint32_t a = cgj_gpubusy_id(), b = cgj_gpubusy_id();
    cgj_gpubusy_note_call(1); /* a call that carried no id: another part of the program */
    cgj_gpubusy_note_work(1, 0, 1000);
    cgj_gpubusy_note_external(2, EXT(a, 5));
    cgj_gpubusy_note_work(2, 0, 50);
    cgj_gpubusy_note_external(3, EXT(a, 6));
    cgj_gpubusy_note_work(3, 100, 150);
    cgj_gpubusy_note_work(2, 60, 90); /* step 5's record after step 6's: still step 5's */
    cgj_gpubusy_note_external(4, EXT(b, 1));
    cgj_gpubusy_note_work(4, 0, 7);
    uint64_t busy, steps;
    cgj_gpubusy_figures(a, &busy, &steps);
    cr_assert_eq(steps, 2);
    cr_assert_eq(busy, 80 + 50);
    cgj_gpubusy_note_work(2, 200, 300); /* after its step was counted: left out */
    cgj_gpubusy_figures(a, &busy, &steps);
    cr_assert_eq(steps, 2);
    cr_assert_eq(busy, 130);
    cgj_gpubusy_figures(b, &busy, &steps);
    cr_assert_eq(steps, 1);
    cr_assert_eq(busy, 7);
    cr_assert_not(cgj_gpubusy_figures(0, &busy, &steps));
    cr_assert_not(cgj_gpubusy_figures(CGJ_GPUBUSY_MAX_IDS, &busy, &steps));
}

/* CUPTI completes a context's buffer of kernels and the buffer of driver calls independently:
 * work that comes before the record of the call that launched it waits for it. */
Test(gpubusy, work_before_its_call_waits_for_it)
{
    uint32_t id = cgj_gpubusy_id();
    cgj_gpubusy_note_work(10, 0, 40); /* tagged, its call not seen yet */
    cgj_gpubusy_note_work(11, 0, 99); /* untagged, its call not seen yet */
    cgj_gpubusy_note_work(12, 50, 60);
    cgj_gpubusy_resolve();
    uint64_t busy, steps;
    cr_assert_not(cgj_gpubusy_figures(id, &busy, &steps), "counted before any call was known");
    cgj_gpubusy_note_external(10, EXT(id, 1)); /* then the driver calls' buffer */
    cgj_gpubusy_note_call(10);
    cgj_gpubusy_note_call(11);
    cgj_gpubusy_note_external(12, EXT(id, 2));
    cgj_gpubusy_note_call(12);
    cgj_gpubusy_resolve();
    cgj_gpubusy_figures(id, &busy, &steps);
    cr_assert_eq(steps, 2);
    cr_assert_eq(busy, 40 + 10);
}

Test(gpubusy, a_step_of_very_many_pieces_keeps_their_union)
{
    uint32_t id = cgj_gpubusy_id();
    cgj_gpubusy_note_external(9, EXT(id, 1));
    for (uint32_t i = 0; i < 200000; i++) cgj_gpubusy_note_work(9, (i % 1000) * 10, (i % 1000) * 10 + 5);
    uint64_t busy, steps;
    cgj_gpubusy_figures(id, &busy, &steps);
    cr_assert_eq(steps, 1);
    cr_assert_eq(busy, 1000 * 5);
}

Test(gpubusy, ids_run_out_without_harm)
{
    uint32_t last = 0;
    for (uint32_t i = 1; i < CGJ_GPUBUSY_MAX_IDS; i++) last = cgj_gpubusy_id();
    cr_assert_eq(last, CGJ_GPUBUSY_MAX_IDS - 1);
    cr_assert_eq(cgj_gpubusy_id(), 0);
    cgj_gpubusy_push(0, 1); /* no id: nothing pushed */
    cgj_gpubusy_pop();
}

/* Off by default; on, with no CUPTI or no GPU to profile, it says why and measures nothing. */
Test(gpubusy, the_option_says_why_it_measures_nothing)
{
    unsetenv("CGJIT_BUSY");
    cgj_config_load();
    cr_assert_not(cgj_gpubusy_on());
    setenv("CGJIT_BUSY", "1", 1);
    cgj_config_load();
    bool on = cgj_gpubusy_on();
    cr_assert(on || cgj_gpubusy_status()[0], "off with no reason");
    unsetenv("CGJIT_BUSY");
    cgj_config_load();
}

/* The report's CGJIT_BUSY line accounts for every piece of work CUPTI gave: counted, the
 * program's own, tied to no call, late, or still waiting for the record of its call (the sign
 * that CUPTI is not tracing the calls that launch the graphs). */
Test(gpubusy, the_report_accounts_for_every_piece)
{
    uint32_t id = cgj_gpubusy_id();
    cgj_gpubusy_note_external(1, EXT(id, 1));
    cgj_gpubusy_note_call(1);
    cgj_gpubusy_note_work(1, 0, 10); /* counted */
    cgj_gpubusy_note_call(2);
    cgj_gpubusy_note_work(2, 0, 10);  /* the program's own */
    cgj_gpubusy_note_work(0, 0, 10);  /* tied to no call */
    cgj_gpubusy_note_work(77, 0, 10); /* its call never recorded */
    uint64_t busy, steps;
    cgj_gpubusy_figures(id, &busy, &steps);
    cgj_gpubusy_note_work(1, 20, 30); /* late */
    char text[400];
    cr_assert_str_eq(cgj_gpubusy_describe(text, sizeof text),
                     "2 CUDA API call(s) recorded, 1 of them in replayed steps; 5 piece(s) of GPU work: "
                     "1 counted, 1 of the program's own calls, 1 naming no call, 1 late, 1 waiting for their "
                     "call, 0 dropped");
}
