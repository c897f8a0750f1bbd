/*
 * test_libs_chunks.c — a library's own host time ends replay's chunks, as the program's does.
 *
 * By default the library runs on every call at replay, so its host time (argument checks,
 * heuristics: 2-6 us a call for cuBLAS) recurs between the step's calls. A step made mostly of
 * library calls (llm.c's trainer: 75 a step) spends most of its host time there; a chunk that
 * ended only after CGJIT_CHUNK_OPS ops left the GPU idle while the host went through two thirds
 * of the step. The fake cuBLAS spends a known time per call on the fake clock
 * (fakecublas_set_host_work), and replay's chunks must end where that time adds up to
 * CGJIT_CHUNK_US, never inside a library call's group; under CGJIT_LIBS_LEARNED=1 the library
 * does not run at replay, and its time ends no chunk. Results equal eager execution throughout.
 */
#define _GNU_SOURCE /* dladdr, in fake_clock.h */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_clock.h"
#include "fake_gemms.h"
#include "fakeapp.h"
#include "fakecublas.h"

enum { STEPS = 20, GEMMS = 6 };

static fk_t fk;
static cublasHandle_t g_h;

static void setup(void)
{
    setenv("CGJIT_CHUNK_US", "50", 1);
    fk_open(&fk);
    fake_clock_start(NULL);
    cr_assert_eq(cublasCreate_v2(&g_h), CUBLAS_STATUS_SUCCESS);
    fakecublas_set_host_work(host_work, 30); /* each GEMM: 30 us of the library's own */
}

static void learned_setup(void)
{
    setenv("CGJIT_LIBS_LEARNED", "1", 1);
    setup();
}

TestSuite(runtime_libs_chunks, .init = setup);
TestSuite(runtime_libs_chunks_learned, .init = learned_setup);

/* One step, no host work of the program's own (fake_gemms.h). */
static void step(const fk_gemms_t *b, int s)
{
    cr_assert(fk_gemms_step(&fk, g_h, b, s), "step %d: a call failed", s);
}

/* STEPS steps untraced and STEPS marked ones on buffers of their own, compared after each; the
 * marked step's figures. */
static cgj_trace_info_t run_both(void)
{
    fk_gemms_t e, t;
    fk_gemms_init(&fk, &e, GEMMS);
    fk_gemms_init(&fk, &t, GEMMS);
    for (int s = 0; s < STEPS; s++) {
        step(&e, s);
        cr_assert_eq(cgj_trace_begin("gemms"), CGJ_OK);
        step(&t, s);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        cr_assert_eq(fk.ctx_sync(), CUDA_SUCCESS);
        cr_assert(fk_gemms_same(&fk, &e, &t), "step %d: results differ from eager", s);
    }
    cgj_trace_info_t info;
    memset(&info, 0, sizeof info);
    cr_assert_eq(cgj_trace_info("gemms", &info), CGJ_OK);
    cr_assert_geq(info.replays, STEPS - 3, "%llu of %d steps replayed", (unsigned long long)info.replays, STEPS);
    return info;
}

Test(runtime_libs_chunks, the_library_s_host_time_ends_chunks)
{
    /* 30 us a GEMM, chunks of 50 us: one ends after every second GEMM's group (its LIB op and
     * the kernel the library launched: ops 1-5, 6-11, 12-17 as the report counts), never inside
     * one; the program's last kernel is a chunk of its own (nothing says how long the host works
     * after it). */
    cgj_trace_info_t info = run_both();
    char *buf = fk_report_text();
    cr_assert(buf);
    cr_assert_eq(info.segments, 4, "%u segments:\n%s", info.segments, buf);
    for (int at = 5; at <= 17; at += 6) {
        char want[64];
        snprintf(want, sizeof want, "ends at op %d: cuLaunchKernel (host work before the next call", at);
        cr_assert(strstr(buf, want), "no chunk %s:\n%s", want, buf);
    }
    free(buf);
}

Test(runtime_libs_chunks, a_library_without_host_time_ends_none)
{
    fakecublas_set_host_work(NULL, 0);
    cr_assert_eq(run_both().segments, 1);
}

Test(runtime_libs_chunks_learned, a_library_absorbed_whole_ends_none)
{
    /* Absorbed whole, the library does not run at replay: its recorded time is not spent. */
    cr_assert_eq(run_both().segments, 1);
}
