/*
 * test_api.c — the public functions of include/cgjit.h: status codes, pairing of begin/end,
 * nesting, start-up without a driver or with cgjit disabled, CGJIT_MAX_OPS, info and report.
 *
 * Tests that set CGJIT_* variables do so before the first cgjit call of their process (each
 * Criterion test runs in its own process; cgjit initializes lazily), so they call fk_open
 * themselves instead of using a suite .init.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cgjit.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakeapp.h"
#include "ir/reason.h"

#define N 64
static fk_t fk;

TestSuite(runtime_api);

static void expect_equal(CUdeviceptr e, CUdeviceptr t, const char *what, int step)
{
    float he[N], ht[N];
    cr_assert_eq(fk.dtoh(he, e, sizeof he), CUDA_SUCCESS);
    cr_assert_eq(fk.dtoh(ht, t, sizeof ht), CUDA_SUCCESS);
    cr_assert(memcmp(he, ht, sizeof he) == 0, "%s: step %d: traced differs from eager", what, step);
}

/* Everything a FILE* got, as a malloc'd string. */
static char *slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    cr_assert(n >= 0);
    char *buf = calloc(1, (size_t)n + 1);
    rewind(f);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    return buf;
}

/* ---- argument and pairing errors ---- */

Test(runtime_api, end_without_begin)
{
    fk_open(&fk);
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_eq(st.steps, 0);
}

Test(runtime_api, end_without_begin_before_any_cgjit_call)
{
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
}

Test(runtime_api, begin_with_bad_name)
{
    fk_open(&fk);
    cr_assert_eq(cgj_trace_begin(NULL), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_trace_begin(""), CGJ_ERR_INVALID_ARG);
    /* nothing changed: no step is active */
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
    /* and an invalid begin inside a step leaves that step alone */
    cr_assert_eq(cgj_trace_begin("ok"), CGJ_OK);
    cr_assert_eq(cgj_trace_begin(NULL), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_eq(st.aborts, 0);
    cr_assert_eq(st.steps, 1);
}

static void nested_step(fk_t *f, CUdeviceptr x, int s, bool traced, bool nest)
{
    if (traced) cr_assert_eq(cgj_trace_begin("outer"), CGJ_OK);
    cr_assert_eq(fk_axpb_launch(f, NULL, x, 0.5f, 1.0f, N, 1), CUDA_SUCCESS);
    if (traced && nest) cr_assert_eq(cgj_trace_begin("inner"), CGJ_ERR_NESTED);
    cr_assert_eq(fk_addk_launch(f, NULL, x, s, N), CUDA_SUCCESS);
    cr_assert_eq(fk_axpb_launch(f, NULL, x, 0.25f, 2.0f, N, 1), CUDA_SUCCESS);
    if (traced) {
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        if (nest) cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
    }
}

Test(runtime_api, nested_begin_in_first_run)
{
    fk_open(&fk);
    CUdeviceptr e = fk_alloc_floats(&fk, N, 1), t = fk_alloc_floats(&fk, N, 1);
    nested_step(&fk, e, 0, false, true);
    nested_step(&fk, t, 0, true, true);
    expect_equal(e, t, "nested", 0);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_geq(st.aborts, 1);
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("outer", &i), CGJ_OK);
    cr_assert_str_not_empty(i.reason, "a nested begin is a divergence of the outer anchor");
}

Test(runtime_api, nested_begin_during_replay_keeps_results_and_replay)
{
    fk_open(&fk);
    CUdeviceptr e = fk_alloc_floats(&fk, N, 1), t = fk_alloc_floats(&fk, N, 1);
    cgj_trace_info_t i;
    for (int s = 0; s < 20; s++) {
        bool nest = s == 5 || s == 6;
        nested_step(&fk, e, s, false, nest);
        nested_step(&fk, t, s, true, nest);
        expect_equal(e, t, "nested during replay", s);
        if (s == 4) {
            cr_assert_eq(cgj_trace_info("outer", &i), CGJ_OK);
            cr_assert_eq(i.state, CGJ_STATE_REPLAY);
            cr_assert_eq(i.replays, 3);
        }
    }
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_geq(st.aborts, 2);
    cr_assert_eq(cgj_trace_info("outer", &i), CGJ_OK);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "two nested begins after a trace exists must not blacklist");
    cr_assert_eq(i.replays, 3 + 13, "steps 7..19 replay again (got %llu)", (unsigned long long)i.replays);
}

Test(runtime_api, nested_begin_on_a_blacklisted_anchor)
{
    setenv("CGJIT_MAX_RECORDS", "1", 1);
    fk_open(&fk);
    CUdeviceptr e = fk_alloc_floats(&fk, N, 1), t = fk_alloc_floats(&fk, N, 1);
    for (int s = 0; s < 4; s++) {
        nested_step(&fk, e, s, false, true);
        nested_step(&fk, t, s, true, true);
        expect_equal(e, t, "nested on blacklisted", s);
    }
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("outer", &i), CGJ_OK);
    cr_assert_eq(i.state, CGJ_STATE_BLACKLISTED);
}

/* ---- messages ---- */

Test(runtime_api, strerror_of_every_code)
{
#define CHECK_MSG(name, value, msg)                                               \
    cr_assert_str_eq(cgj_strerror(CGJ_##name), msg);                              \
    cr_assert_str_not_empty(cgj_strerror(value));
    CGJ_STATUS_LIST(CHECK_MSG)
#undef CHECK_MSG
    static const int bad[] = {999, -1, CGJ_ERR_SPEC + 1, 1 << 30};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *m = cgj_strerror(bad[k]);
        cr_assert(m != NULL);
        cr_assert(strncmp(m, "unknown", 7) == 0, "cgj_strerror(%d) = '%s'", bad[k], m);
    }
    /* all messages distinct */
    for (int a = 0; a <= CGJ_ERR_SPEC; a++)
        for (int b = a + 1; b <= CGJ_ERR_SPEC; b++)
            cr_assert_str_neq(cgj_strerror(a), cgj_strerror(b));
}

Test(runtime_api, state_name_of_every_state)
{
#define CHECK_STATE(name, doc) cr_assert_str_eq(cgj_state_name(CGJ_STATE_##name), #name);
    CGJ_STATE_LIST(CHECK_STATE)
#undef CHECK_STATE
    static const int bad[] = {-1, CGJ_STATE_OFF + 1, 1 << 30};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        cr_assert_str_eq(cgj_state_name(bad[k]), "?", "cgj_state_name(%d)", bad[k]);
}

/* ---- info and stats ---- */

Test(runtime_api, trace_info_errors)
{
    fk_open(&fk);
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("never-begun", &i), CGJ_ERR_NOT_FOUND);
    cr_assert_eq(cgj_trace_info("never-begun", NULL), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_trace_info(NULL, &i), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_trace_begin("begun"), CGJ_OK);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    cr_assert_eq(cgj_trace_info("begun", NULL), CGJ_ERR_INVALID_ARG);
    memset(&i, 0xff, sizeof i);
    cr_assert_eq(cgj_trace_info("begun", &i), CGJ_OK);
    cr_assert_eq(i.runs, 1);
    cr_assert_eq(i.variants, 0);
    cr_assert_eq(i.replays, 0);
    cr_assert_eq(i.ops, 0);
    cr_assert_neq(i.state, CGJ_STATE_BLACKLISTED);
    cr_assert_eq(cgj_trace_info("begu", &i), CGJ_ERR_NOT_FOUND, "names match exactly");
}

Test(runtime_api, stats_null)
{
    cr_assert_eq(cgj_stats(NULL), CGJ_ERR_INVALID_ARG);
    fk_open(&fk);
    cr_assert_eq(cgj_stats(NULL), CGJ_ERR_INVALID_ARG);
    cgj_stats_t st;
    memset(&st, 0xff, sizeof st);
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    cr_assert_eq(st.steps, 0);
    cr_assert_eq(st.graph_launches, 0);
}

/* ---- start-up: no driver, disabled ---- */

Test(runtime_api, no_driver)
{
    setenv("CGJIT_DRIVER", "/nonexistent/libcuda.so.1", 1);
    cr_assert_eq(cgj_trace_begin("x"), CGJ_ERR_NO_DRIVER);
    cr_assert_eq(cgj_trace_end(), CGJ_OK, "a begin that failed with NO_DRIVER still pairs");
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
    /* nesting is still reported */
    cr_assert_eq(cgj_trace_begin("x"), CGJ_ERR_NO_DRIVER);
    cr_assert_eq(cgj_trace_begin("y"), CGJ_ERR_NESTED);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
    cr_assert_eq(cgj_trace_begin(""), CGJ_ERR_INVALID_ARG);
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("x", &i), CGJ_ERR_NOT_FOUND);
    cgj_stats_t st;
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    cr_assert_eq(st.ops_recorded, 0);
}

Test(runtime_api, disabled)
{
    setenv("CGJIT_DISABLE", "1", 1);
    fk_open(&fk);
    /* nothing is wrapped */
    Dl_info di;
    cr_assert(dladdr((void *)fk.launch, &di) && di.dli_fname);
    cr_assert_null(strstr(di.dli_fname, "libcgjit"), "CGJIT_DISABLE=1 but cuLaunchKernel is wrapped");
    cr_assert_eq((void *)fk.launch, dlsym(fk.handle, "cuLaunchKernel"));
    /* a program linked with -lcuda reaches the driver through cgjit's exports, which forward */
    float a = 2.0f, b = 1.0f;
    int n = N;
    CUdeviceptr x = fk_alloc_floats(&fk, N, 1), y = fk_alloc_floats(&fk, N, 1);
    void *params[] = {&x, &a, &b, &n};
    cr_assert_eq(cuLaunchKernel(fk_axpb, 1, 1, 1, N, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
    cr_assert_eq(fk_axpb_launch(&fk, NULL, y, 2.0f, 1.0f, N, 1), CUDA_SUCCESS);
    float hx[N], hy[N];
    cr_assert_eq(cuMemcpyDtoH(hx, x, sizeof hx), CUDA_SUCCESS);
    cr_assert_eq(fk.dtoh(hy, y, sizeof hy), CUDA_SUCCESS);
    cr_assert(memcmp(hx, hy, sizeof hx) == 0, "a direct call when disabled did not run as the driver's");

    CUdeviceptr e = fk_alloc_floats(&fk, N, 2), t = fk_alloc_floats(&fk, N, 2);
    fk.reset_counts();
    for (int s = 0; s < 5; s++) {
        cr_assert_eq(fk_axpb_launch(&fk, NULL, e, 0.5f, (float)s, N, 1), CUDA_SUCCESS);
        cr_assert_eq(cgj_trace_begin("x"), CGJ_ERR_DISABLED);
        cr_assert_eq(fk_axpb_launch(&fk, NULL, t, 0.5f, (float)s, N, 1), CUDA_SUCCESS);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        cr_assert_eq(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE);
        expect_equal(e, t, "disabled", s);
    }
    fakecuda_counts_t c;
    fk.get_counts(&c);
    cr_assert_eq(c.eager_launches, 10);
    cr_assert_eq(c.graph_launches, 0);
    cr_assert_eq(c.captures, 0);
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("x", &i), CGJ_ERR_NOT_FOUND);
}

/* ---- CGJIT_MAX_OPS ---- */

static void long_step(CUdeviceptr x, int s)
{
    for (int k = 0; k < 40; k++)
        cr_assert_eq(fk_axpb_launch(&fk, NULL, x, 0.5f, (float)(k + s), N, 1), CUDA_SUCCESS);
}

Test(runtime_api, max_ops_aborts_a_long_step)
{
    setenv("CGJIT_MAX_OPS", "16", 1);
    fk_open(&fk);
    CUdeviceptr e = fk_alloc_floats(&fk, N, 3), t = fk_alloc_floats(&fk, N, 3);
    for (int s = 0; s < 8; s++) {
        long_step(e, s);
        cr_assert_eq(cgj_trace_begin("long"), CGJ_OK);
        long_step(t, s);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        expect_equal(e, t, "max_ops", s);
    }
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_geq(st.aborts, 1);
    cr_assert_eq(st.steps_replayed, 0);
    cr_assert_eq(st.traces_built, 0);
    cr_assert_leq(st.ops_recorded, 8 * 16, "recording went past CGJIT_MAX_OPS: %llu",
                  (unsigned long long)st.ops_recorded);
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("long", &i), CGJ_OK);
    cr_assert_eq(i.state, CGJ_STATE_BLACKLISTED, "every run aborts: blacklisted after CGJIT_MAX_RECORDS");
    cr_assert_eq(i.reason_code, CGJ_REASON_ABORT_MAX_OPS, "reason: %s", i.reason);
    cr_assert_str_eq(cgj_reason_name(i.reason_code), "ABORT_MAX_OPS");
    cr_assert_str_not_empty(cgj_reason_hint(i.reason_code), "every abort says what the user can do");
    fakecuda_counts_t c;
    fk.get_counts(&c);
    cr_assert_eq(c.graph_launches, 0);
}

Test(runtime_api, max_ops_lets_a_short_step_replay)
{
    setenv("CGJIT_MAX_OPS", "16", 1);
    fk_open(&fk);
    CUdeviceptr e = fk_alloc_floats(&fk, N, 3), t = fk_alloc_floats(&fk, N, 3);
    for (int s = 0; s < 6; s++) {
        for (int k = 0; k < 16; k++) fk_axpb_launch(&fk, NULL, e, 0.5f, (float)k, N, 1);
        cr_assert_eq(cgj_trace_begin("short"), CGJ_OK);
        for (int k = 0; k < 16; k++) fk_axpb_launch(&fk, NULL, t, 0.5f, (float)k, N, 1);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        expect_equal(e, t, "16 ops", s);
    }
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("short", &i), CGJ_OK);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "a step of exactly CGJIT_MAX_OPS calls is traced");
    cr_assert_eq(i.replays, 4);
}

/* ---- report ---- */

static void chain(CUdeviceptr x)
{
    for (int k = 0; k < 3; k++) fk_axpb_launch(&fk, NULL, x, 0.5f, (float)k, N, 1);
}

Test(runtime_api, report_names_anchors_and_states)
{
    fk_open(&fk);
    CUdeviceptr t = fk_alloc_floats(&fk, N, 4);
    for (int s = 0; s < 5; s++) {
        cr_assert_eq(cgj_trace_begin("report_anchor"), CGJ_OK);
        chain(t);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    /* an anchor that gets blacklisted: a different number of kernels every run */
    for (int s = 0; s < 5; s++) {
        cr_assert_eq(cgj_trace_begin("flaky_anchor"), CGJ_OK);
        for (int k = 0; k <= s; k++) fk_addk_launch(&fk, NULL, t, 1, N);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    FILE *f = tmpfile();
    cr_assert(f);
    cgj_report(f);
    char *txt = slurp(f);
    fclose(f);
    cr_assert(strstr(txt, "report_anchor"), "report lacks the anchor:\n%s", txt);
    cr_assert(strstr(txt, "REPLAY"), "report lacks the state:\n%s", txt);
    cr_assert(strstr(txt, "flaky_anchor"), "%s", txt);
    cr_assert(strstr(txt, "BLACKLISTED"), "%s", txt);
    cr_assert(strstr(txt, "steps_replayed"), "report lacks the counters:\n%s", txt);
    cr_assert(strstr(txt, "blacklisted:"), "report lacks the blacklist reason:\n%s", txt);
    free(txt);
}

Test(runtime_api, report_null_goes_to_stderr)
{
    fk_open(&fk);
    cr_assert_eq(cgj_trace_begin("stderr_anchor"), CGJ_OK);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    fflush(stderr);
    FILE *f = tmpfile();
    int saved = dup(2);
    dup2(fileno(f), 2);
    cgj_report(NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(f, 0, SEEK_END);
    char *txt = slurp(f);
    fclose(f);
    cr_assert(strstr(txt, "stderr_anchor"), "cgj_report(NULL) did not reach stderr: '%s'", txt);
    cr_assert(strstr(txt, "ran once"), "an anchor that ran once is folded: %s", txt);
    free(txt);
}

Test(runtime_api, report_before_anything)
{
    FILE *f = tmpfile();
    cgj_report(f);
    char *txt = slurp(f);
    fclose(f);
    cr_assert(strstr(txt, "cgjit report"), "%s", txt);
    free(txt);
}
