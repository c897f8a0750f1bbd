/*
 * test_api.c — the public functions of include/cgjit.h: status codes, pairing of begin/end,
 * nesting, start-up without a driver or with cgjit disabled, CGJIT_MAX_OPS, info and report,
 * the size a caller's struct claims; and, in child processes of report_app, what is written as
 * a program ends: outputs named as FIFOs, names of any bytes, SIGTERM and SIGINT, the periodic
 * report.
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

#include "../common/stderr_capture.h"

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
#define CHECK_MSG(name, value, msg)                  \
    cr_assert_str_eq(cgj_strerror(CGJ_##name), msg); \
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
        for (int b = a + 1; b <= CGJ_ERR_SPEC; b++) cr_assert_str_neq(cgj_strerror(a), cgj_strerror(b));
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

/* A malformed value is told as the configuration is read: without a driver as with one. */
Test(runtime_api, no_driver_still_warns_about_a_bad_step_policy)
{
    setenv("CGJIT_DRIVER", "/nonexistent/libcuda.so.1", 1);
    setenv("CGJIT_STEP", "bogus", 1);
    capture_begin();
    cr_assert_eq(cgj_trace_begin("x"), CGJ_ERR_NO_DRIVER);
    const char *err = capture_end();
    cr_assert(strstr(err, "cgjit: warning: CGJIT_STEP='bogus' is not sync, auto or off"), "stderr: '%s'", err);
}

/* A name or spec the program passes is shown escaped: one line, nothing a terminal acts on. */
Test(runtime_api, names_in_messages_are_escaped)
{
    setenv("CGJIT_DRIVER", "/nonexistent/libcuda.so.1", 1);
    setenv("CGJIT_LOG", "api", 1);
    capture_begin();
    cr_assert_eq(cgj_op_register_elementwise("k\x1b[2J\n", "(inout float x, count int n): x = \xff"), CGJ_ERR_SPEC);
    cr_assert_eq(cgj_trace_begin("step\r\x1b]0;t\x07"), CGJ_ERR_NO_DRIVER);
    const char *err = capture_end();
    cr_assert(strstr(err, "cgjit: cgj_op_register_elementwise(\"k\\x1b[2J\\n\"): "), "%s", err);
    cr_assert(strstr(err, "cgjit[api] cgj_trace_begin(\"step\\r\\x1b]0;t\\x07\"): "), "%s", err);
    for (const unsigned char *c = (const unsigned char *)err; *c; c++)
        cr_assert(*c == '\n' || (*c >= 0x20 && *c < 0x7f), "byte %#x on stderr: %s", *c, err);
    cgj_trace_end();
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
    for (int k = 0; k < 40; k++) cr_assert_eq(fk_axpb_launch(&fk, NULL, x, 0.5f, (float)(k + s), N, 1), CUDA_SUCCESS);
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
    /* Each replay launched its graph: the host time of those launches is counted, and no
     * eager run adds to it. */
    cgj_stats_t st;
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    cr_assert_eq(st.graph_launches, 4);
    cr_assert_gt(st.launch_host_ns, 0, "segment launches took no host time");
}

Test(runtime_api, eager_steps_count_no_launch_time)
{
    fk_open(&fk);
    CUdeviceptr t = fk_alloc_floats(&fk, N, 3);
    for (int s = 0; s < 2; s++) { /* recorded twice, never replayed */
        cr_assert_eq(cgj_trace_begin("twice"), CGJ_OK);
        for (int k = 0; k < 4; k++) fk_axpb_launch(&fk, NULL, t, 0.5f, (float)k, N, 1);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    cgj_stats_t st;
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    cr_assert_eq(st.graph_launches, 0);
    cr_assert_eq(st.launch_host_ns, 0);
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

/* A report's anchor lines show a name's bytes escaped: a newline cannot split a line, a terminal
 * escape never reaches the terminal, bytes of no valid UTF-8 show as \xNN. */
Test(runtime_api, report_escapes_names)
{
    fk_open(&fk);
    CUdeviceptr t = fk_alloc_floats(&fk, N, 4);
    static const char twice[] = "two\nlines\x1b[2J\xff\\ \xe2\x82\xac", once[] = "once\r\nname\x7f";
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(cgj_trace_begin(twice), CGJ_OK);
        chain(t);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    cr_assert_eq(cgj_trace_begin(once), CGJ_OK);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    FILE *f = tmpfile();
    cgj_report(f);
    char *txt = slurp(f);
    fclose(f);
    cr_assert(strstr(txt, "  anchor 'two\\nlines\\x1b[2J\\xff\\\\ \xe2\x82\xac': "), "%s", txt);
    cr_assert(strstr(txt, "'once\\r\\nname\\x7f'"), "%s", txt);
    cr_assert_null(strpbrk(txt, "\x1b\x7f\r\xff"), "a raw control character or invalid byte: %s", txt);
    free(txt);
}

/* ---- the size a caller's struct claims (cgjit.h's ABI) ---- */

/* A size no cgjit.h ever had (a struct never initialized, a size in other units) is refused,
 * and not one byte of the caller's memory is written: it may be far smaller than it claims. */
Test(runtime_api, read_refuses_a_size_no_struct_has)
{
    fk_open(&fk);
    cr_assert_eq(cgj_trace_begin("sized"), CGJ_OK);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    const size_t big = 1 << 20;
    unsigned char *buf = malloc(big);
    cr_assert(buf);
    memset(buf, 0xa5, big);
    uint64_t size = big;
    memcpy(buf, &size, sizeof size);
    cr_assert_eq(cgj_stats_read((cgj_stats_t *)buf), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_trace_info_read("sized", (cgj_trace_info_t *)buf), CGJ_ERR_INVALID_ARG);
    for (size_t k = sizeof size; k < big; k++)
        if (buf[k] != 0xa5) cr_assert_fail("byte %zu of a struct claiming 1 MiB was written", k);
    free(buf);
}

/* Fill buf (a struct claiming `size` bytes, in `cap` bytes of 0xa5) with `read`; 0 or an error. */
static int read_sized(unsigned char *buf, size_t cap, uint64_t size, int (*read)(void *))
{
    memset(buf, 0xa5, cap);
    memcpy(buf, &size, sizeof size);
    return read(buf);
}
static int read_stats(void *p)
{
    return cgj_stats_read(p);
}
static int read_info(void *p)
{
    return cgj_trace_info_read("sized", p);
}

/* An older caller (smaller struct) gets its fields; a newer one (larger) zeros in the fields
 * this library does not know; nothing past the claimed size is written. */
Test(runtime_api, read_fills_what_the_caller_has)
{
    fk_open(&fk);
    cr_assert_eq(cgj_trace_begin("sized"), CGJ_OK);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    unsigned char buf[sizeof(cgj_trace_info_t) + 128];
    const struct {
        int (*read)(void *);
        size_t full;
    } kinds[] = {{read_stats, sizeof(cgj_stats_t)}, {read_info, sizeof(cgj_trace_info_t)}};
    for (size_t i = 0; i < 2; i++) {
        size_t full = kinds[i].full;
        cr_assert_eq(read_sized(buf, sizeof buf, full + 64, kinds[i].read), CGJ_OK);
        for (size_t k = full; k < full + 64; k++) cr_assert_eq(buf[k], 0, "struct %zu, byte %zu", i, k);
        for (size_t k = full + 64; k < sizeof buf; k++) cr_assert_eq(buf[k], 0xa5, "struct %zu, byte %zu", i, k);
        cr_assert_eq(read_sized(buf, sizeof buf, 12, kinds[i].read), CGJ_OK);
        for (size_t k = 12; k < sizeof buf; k++) cr_assert_eq(buf[k], 0xa5, "struct %zu, byte %zu", i, k);
        cr_assert_eq(read_sized(buf, sizeof buf, 4, kinds[i].read), CGJ_ERR_INVALID_ARG);
    }
    cgj_stats_t st;
    cr_assert_eq(read_sized(buf, sizeof buf, 16, read_stats), CGJ_OK);
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    cr_assert_eq(memcmp(buf + 8, &st.steps, 8), 0, "the first counter, as an older caller has it");
}

/* ---- what cgjit writes as a program ends: report_app (report_app.c) in a child process ---- */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

typedef struct app {
    pid_t pid;
    int out;        /* its stdout, a pipe */
    char errp[64];  /* its stderr, a file */
    char err[8192]; /* ... as read by app_wait */
} app_t;

/* Start <tests>/report_app with args, its environment ours without CGJIT_* (and Criterion's
 * BXFI_MAP, which would make report_app's libcriterion take it for a test worker) plus `set`, and
 * SIGTERM and SIGINT at their defaults. It gets an alarm: one that hangs dies of SIGALRM and
 * the test fails saying so, rather than hanging (alarms survive exec). */
static void app_start(app_t *a, const char *const *args, const char *const *set)
{
    static char path[PATH_MAX + 16];
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(k > 0);
    self[k] = '\0';
    snprintf(path, sizeof path, "%s/report_app", dirname(self));
    const char *argv[16] = {path}, *envp[1024];
    size_t n = 0;
    for (size_t i = 0; args[i] && i < 14; i++) argv[i + 1] = args[i];
    for (char **e = environ; *e && n < 1000; e++)
        if (strncmp(*e, "CGJIT_", 6) && strncmp(*e, "BXFI_", 5)) envp[n++] = *e; /* BXFI_: Criterion's worker */
    for (const char *const *s = set; s && *s && n < 1023; s++) envp[n++] = *s;
    envp[n] = NULL;
    int p[2];
    cr_assert_eq(pipe(p), 0);
    strcpy(a->errp, "/tmp/cgjit-api-err-XXXXXX");
    int fe = mkstemp(a->errp);
    cr_assert(fe >= 0);
    a->pid = fork();
    cr_assert(a->pid >= 0);
    if (a->pid == 0) { /* async-signal-safe calls only, until exec */
        dup2(p[1], 1), dup2(fe, 2), close(p[0]);
        signal(SIGTERM, SIG_DFL), signal(SIGINT, SIG_DFL);
        alarm(30);
        execve(path, (char *const *)argv, (char *const *)envp);
        _exit(127);
    }
    close(p[1]);
    close(fe);
    a->out = p[0];
}

/* Its stdout's first line (report_app wait says "ready" once cgjit runs). */
static void app_ready(app_t *a)
{
    char line[64] = "";
    size_t n = 0;
    while (n < sizeof line - 1 && read(a->out, line + n, 1) == 1 && line[n] != '\n') n++;
    cr_assert(strncmp(line, "ready", 5) == 0, "report_app did not get ready: '%s'", line);
}

/* Wait for it: its exit status, or 128 + the signal that ended it; its stderr in a->err. */
static int app_wait(app_t *a)
{
    int st;
    cr_assert_eq(waitpid(a->pid, &st, 0), a->pid);
    close(a->out);
    FILE *f = fopen(a->errp, "r");
    size_t n = f ? fread(a->err, 1, sizeof a->err - 1, f) : 0;
    a->err[n] = '\0';
    if (f) fclose(f);
    unlink(a->errp);
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    cr_expect_neq(status, 128 + SIGALRM, "report_app hung (killed by its alarm): %s", a->err);
    return status;
}

static int run_app(const char *const *args, const char *const *set, char *err, size_t len)
{
    app_t a;
    app_start(&a, args, set);
    int status = app_wait(&a);
    snprintf(err, len, "%s", a.err);
    return status;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A file's contents (NULL if it cannot be read), malloc'd. */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END); /* slurp reads up to the position */
    char *txt = slurp(f);
    fclose(f);
    return txt;
}

static char *temp_dir(void)
{
    static char dir[64];
    strcpy(dir, "/tmp/cgjit-api-XXXXXX");
    cr_assert(mkdtemp(dir));
    return dir;
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* A FIFO where an output file is named never hangs the program (an open for writing would wait
 * for a reader): it is refused with one warning, and the program runs to its end. */
Test(runtime_api, output_to_a_fifo_is_refused_without_hanging)
{
    static const char *const vars[][2] = {
        {"CGJIT_TRACE_FILE", ""}, {"CGJIT_LOG_FILE", ""}, {"CGJIT_REPORT", "json:"}, {"CGJIT_REPORT", "text:"}};
    char *dir = temp_dir(), fifo[128], set[192], err[8192];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        snprintf(set, sizeof set, "%s=%s%s", vars[i][0], vars[i][1], fifo);
        int status = run_app(ARGS("marked", "5"), ARGS(set), err, sizeof err);
        cr_expect_eq(status, 0, "%s: status %d: %s", set, status, err);
        cr_expect(strstr(err, fifo) && strstr(err, "not a regular file"), "%s: %s", set, err);
        cr_expect_eq(strchr(err, '\n'), err + strlen(err) - 1, "%s: one warning, one line: %s", set, err);
    }
    remove_dir(dir);
}

/* Names of any bytes give JSON that parses as UTF-8 (invalid bytes as U+FFFD, controls
 * escaped), in the report and in the timeline; checked by Python's own strict parser. */
Test(runtime_api, names_of_any_bytes_in_the_json_outputs)
{
    static const char name[] = "bad\xff\xfe name\nnext\x1b[31m\t\"q\"\\ \xe2\x82\xac";
    char *dir = temp_dir(), report[128], trace[128], script[128], cmd[512], err[8192];
    snprintf(report, sizeof report, "CGJIT_REPORT=json:%s/r.json", dir);
    snprintf(trace, sizeof trace, "CGJIT_TRACE_FILE=%s/t.json", dir);
    cr_assert_eq(run_app(ARGS("named", name, "5"), ARGS(report, trace), err, sizeof err), 0, "%s", err);
    snprintf(script, sizeof script, "%s/check.py", dir);
    FILE *f = fopen(script, "w");
    cr_assert(f);
    fputs("import json, sys\n"
          "want = b'bad\\xff\\xfe name\\nnext\\x1b[31m\\t\"q\"\\\\ \\xe2\\x82\\xac'.decode('utf-8', 'replace')\n"
          "r = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'))\n"
          "t = json.loads(open(sys.argv[2], 'rb').read().decode('utf-8'))\n"
          "names = [a['name'] for a in r['anchors']]\n"
          "steps = set(e['name'] for e in t['traceEvents'] if e.get('ph') == 'X' and e['cat'] != 'build')\n"
          "print('ok' if want in names and want in steps else repr((names, steps, want)))\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s %s/r.json %s/t.json 2>&1", script, dir, dir);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    cr_assert_str_eq(out, "ok\n", "the JSON outputs: %s", out);
    remove_dir(dir);
}

/* report_app waits under cgjit and `sig` ends it: what it leaves behind. */
static int end_with_signal(int sig, const char *handler, const char *const *set)
{
    app_t a;
    app_start(&a, ARGS("wait", handler), set);
    app_ready(&a);
    cr_assert_eq(kill(a.pid, sig), 0);
    return app_wait(&a);
}

/* SIGTERM (kill, timeout) where the program keeps the default action: the report and the
 * timeline are written, and the program still ends killed by SIGTERM. */
Test(runtime_api, sigterm_writes_the_report_and_the_timeline)
{
    char *dir = temp_dir(), report[128], trace[128], path[128];
    snprintf(report, sizeof report, "CGJIT_REPORT=json:%s/r.json", dir);
    snprintf(trace, sizeof trace, "CGJIT_TRACE_FILE=%s/t.json", dir);
    cr_assert_eq(end_with_signal(SIGTERM, "none", ARGS(report, trace)), 128 + SIGTERM);
    snprintf(path, sizeof path, "%s/r.json", dir);
    char *r = read_all(path);
    cr_assert(r, "no report after SIGTERM");
    cr_assert(strstr(r, "\"name\":\"train\"") && strstr(r, "}\n"), "%s", r);
    snprintf(path, sizeof path, "%s/t.json", dir);
    char *t = read_all(path);
    cr_assert(t, "no timeline after SIGTERM");
    cr_assert(strstr(t, "\"train\"") && strstr(t, "]}\n"), "%s", t);
    free(r), free(t);
    remove_dir(dir);
}

/* SIGINT (Ctrl-C) likewise; the text report. */
Test(runtime_api, sigint_writes_the_report)
{
    char *dir = temp_dir(), report[128], path[128];
    snprintf(report, sizeof report, "CGJIT_REPORT=text:%s/r.txt", dir);
    cr_assert_eq(end_with_signal(SIGINT, "none", ARGS(report)), 128 + SIGINT);
    snprintf(path, sizeof path, "%s/r.txt", dir);
    char *r = read_all(path);
    cr_assert(r && strstr(r, "anchor 'train'"), "report after SIGINT: %s", r ? r : "(none)");
    free(r);
    remove_dir(dir);
}

/* A program that handles SIGTERM itself, installed before cgjit starts or after, keeps its own
 * handling (here: exit status 3), and the report is written at its exit. */
Test(runtime_api, a_program_handling_sigterm_keeps_its_handling)
{
    static const char *const handlers[] = {"early", "late"};
    for (size_t i = 0; i < 2; i++) {
        char *dir = temp_dir(), report[128], path[128];
        snprintf(report, sizeof report, "CGJIT_REPORT=json:%s/r.json", dir);
        cr_expect_eq(end_with_signal(SIGTERM, handlers[i], ARGS(report)), 3, "handler installed %s", handlers[i]);
        snprintf(path, sizeof path, "%s/r.json", dir);
        char *r = read_all(path);
        cr_expect(r && strstr(r, "\"name\":\"train\""), "handler %s: report %s", handlers[i], r ? r : "(none)");
        free(r);
        remove_dir(dir);
    }
}

/* CGJIT_REPORT_EVERY_S: the report is written while the program still runs. */
Test(runtime_api, report_every_s_writes_while_the_program_runs)
{
    char *dir = temp_dir(), report[128], path[128];
    snprintf(report, sizeof report, "CGJIT_REPORT=json:%s/r.json", dir);
    snprintf(path, sizeof path, "%s/r.json", dir);
    app_t a;
    app_start(&a, ARGS("wait", "none"), ARGS(report, "CGJIT_REPORT_EVERY_S=1"));
    app_ready(&a);
    bool seen = false;
    for (int k = 0; k < 300 && !seen; k++) { /* a bound on the wait, not a measure */
        char *r = read_all(path);
        seen = r && strstr(r, "\"name\":\"train\"") && strstr(r, "}\n");
        free(r);
        int st;
        cr_assert_eq(waitpid(a.pid, &st, WNOHANG), 0, "report_app ended before it was signalled");
        if (!seen) usleep(100000);
    }
    kill(a.pid, SIGTERM);
    app_wait(&a);
    cr_assert(seen, "no report was written while the program ran");
    remove_dir(dir);
}
