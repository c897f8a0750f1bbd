/*
 * test_config.c — CGJIT_* parsing (base/config.c) and the log's categories and destination
 * (base/log.c). Linked with cgjit's base objects (INTERNAL): each Criterion test runs in its own
 * process, so a test sets the environment, loads the configuration and checks cgj_cfg.
 *
 * Warnings go to stderr; the tests capture fd 2 into a temporary file (dup2) around the call
 * under test and read it back, so the assertions see exactly what a user would see.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "base/config.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- capturing stderr ---- */

static FILE *cap_file;
static int cap_saved = -1;

static void capture_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    cr_assert(cap_file, "tmpfile");
    cap_saved = dup(2);
    cr_assert(cap_saved >= 0);
    cr_assert(dup2(fileno(cap_file), 2) == 2);
}

/* Stop capturing; returns what was written to stderr meanwhile (static buffer). */
static const char *capture_end(void)
{
    static char buf[8192];
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    cap_saved = -1;
    rewind(cap_file);
    size_t n = fread(buf, 1, sizeof buf - 1, cap_file);
    buf[n] = '\0';
    fclose(cap_file);
    cap_file = NULL;
    return buf;
}

/* Load the configuration with the current environment; returns stderr's output. */
static const char *load_captured(void)
{
    capture_begin();
    cgj_config_load();
    return capture_end();
}

static void clear_env(void)
{
    static const char *const vars[] = {"CGJIT_DISABLE",   "CGJIT_LOG",       "CGJIT_LOG_FILE",
                                       "CGJIT_DRIVER",    "CGJIT_MAX_RECORDS", "CGJIT_MAX_VARIANTS",
                                       "CGJIT_MAX_OPS",   "CGJIT_REPORT"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

TestSuite(base_config, .init = clear_env);

/* ---- defaults and valid values ---- */

Test(base_config, defaults_without_environment)
{
    const char *err = load_captured();
    cr_assert_str_empty(err, "no variable set, yet stderr got: %s", err);
    cr_assert_eq(cgj_cfg.DISABLE, 0);
    cr_assert_eq(cgj_cfg.MAX_RECORDS, 4);
    cr_assert_eq(cgj_cfg.MAX_VARIANTS, 4);
    cr_assert_eq(cgj_cfg.MAX_OPS, 100000);
    cr_assert_eq(cgj_cfg.REPORT, 0);
    cr_assert_str_eq(cgj_cfg.DRIVER, "libcuda.so.1");
    cr_assert_str_eq(cgj_cfg.LOG, "");
    cr_assert_str_eq(cgj_cfg.LOG_FILE, "");
}

Test(base_config, valid_values_are_parsed)
{
    setenv("CGJIT_DISABLE", "1", 1);
    setenv("CGJIT_MAX_RECORDS", "7", 1);
    setenv("CGJIT_MAX_VARIANTS", "2", 1);
    setenv("CGJIT_MAX_OPS", "16", 1); /* exactly the minimum */
    setenv("CGJIT_REPORT", "1", 1);
    setenv("CGJIT_DRIVER", "/opt/fake/libcuda.so.1", 1);
    setenv("CGJIT_LOG", "trace,guards", 1);
    const char *err = load_captured();
    cr_assert_str_empty(err, "valid values, yet stderr got: %s", err);
    cr_assert_eq(cgj_cfg.DISABLE, 1);
    cr_assert_eq(cgj_cfg.MAX_RECORDS, 7);
    cr_assert_eq(cgj_cfg.MAX_VARIANTS, 2);
    cr_assert_eq(cgj_cfg.MAX_OPS, 16);
    cr_assert_eq(cgj_cfg.REPORT, 1);
    cr_assert_str_eq(cgj_cfg.DRIVER, "/opt/fake/libcuda.so.1");
    cr_assert_str_eq(cgj_cfg.LOG, "trace,guards");
}

Test(base_config, load_is_idempotent)
{
    setenv("CGJIT_MAX_OPS", "12345", 1);
    cgj_config_load();
    cgj_config_load();
    cr_assert_eq(cgj_cfg.MAX_OPS, 12345);
}

/* ---- malformed values keep the default and warn ---- */

static void check_malformed(const char *var, const char *value, long *field, long def)
{
    setenv(var, value, 1);
    *field = 999999999; /* a value a silent parser would leave or clobber differently */
    const char *err = load_captured();
    cr_assert_eq(*field, def, "%s='%s': got %ld, want the default %ld", var, value, *field, def);
    cr_assert(strstr(err, "warning") != NULL, "%s='%s': no warning on stderr (got '%s')", var,
              value, err);
    cr_assert(strstr(err, var) != NULL, "%s='%s': warning does not name the variable: %s", var,
              value, err);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", value);
    cr_assert(strstr(err, quoted) != NULL, "warning does not quote the value: %s", err);
    /* one line per bad variable */
    cr_assert_eq(strchr(err, '\n') - err + 1, (long)strlen(err), "more than one line: %s", err);
}

Test(base_config, max_ops_not_a_number)
{
    check_malformed("CGJIT_MAX_OPS", "abc", &cgj_cfg.MAX_OPS, 100000);
}

Test(base_config, max_ops_negative)
{
    check_malformed("CGJIT_MAX_OPS", "-3", &cgj_cfg.MAX_OPS, 100000);
}

Test(base_config, max_ops_below_minimum)
{
    check_malformed("CGJIT_MAX_OPS", "15", &cgj_cfg.MAX_OPS, 100000);
}

Test(base_config, max_ops_trailing_garbage)
{
    check_malformed("CGJIT_MAX_OPS", "100x", &cgj_cfg.MAX_OPS, 100000);
}

Test(base_config, max_ops_empty)
{
    check_malformed("CGJIT_MAX_OPS", "", &cgj_cfg.MAX_OPS, 100000);
}

Test(base_config, max_ops_overflow)
{
    check_malformed("CGJIT_MAX_OPS", "99999999999999999999999", &cgj_cfg.MAX_OPS, 100000);
}

Test(base_config, max_records_zero_is_below_minimum)
{
    check_malformed("CGJIT_MAX_RECORDS", "0", &cgj_cfg.MAX_RECORDS, 4);
}

Test(base_config, disable_not_a_number)
{
    check_malformed("CGJIT_DISABLE", "yes", &cgj_cfg.DISABLE, 0);
}

Test(base_config, one_bad_variable_does_not_spoil_the_others)
{
    setenv("CGJIT_MAX_OPS", "abc", 1);
    setenv("CGJIT_MAX_RECORDS", "9", 1);
    const char *err = load_captured();
    cr_assert_eq(cgj_cfg.MAX_OPS, 100000);
    cr_assert_eq(cgj_cfg.MAX_RECORDS, 9);
    cr_assert(strstr(err, "CGJIT_MAX_OPS") && !strstr(err, "CGJIT_MAX_RECORDS"), "%s", err);
}

Test(base_config, describe_lists_every_tunable)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cgj_config_describe(f);
    fclose(f);
    static const char *const names[] = {"CGJIT_DISABLE",   "CGJIT_LOG ",        "CGJIT_LOG_FILE",
                                        "CGJIT_DRIVER",    "CGJIT_MAX_RECORDS", "CGJIT_MAX_VARIANTS",
                                        "CGJIT_MAX_OPS",   "CGJIT_REPORT",      "CGJIT_POOL_RESERVE_GB",
                                        "CGJIT_DUMP_ALLOCS", "CGJIT_STEP"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert(strstr(buf, names[i]), "describe lacks %s:\n%s", names[i], buf);
    cr_assert(strstr(buf, "'100000'"), "MAX_OPS default not shown:\n%s", buf);
    cr_assert(strstr(buf, "'libcuda.so.1'"), "DRIVER default not shown:\n%s", buf);
    free(buf);
}

/* ---- log categories ---- */

static const char *log_init_captured(const char *log, const char *file)
{
    if (log) setenv("CGJIT_LOG", log, 1);
    if (file) setenv("CGJIT_LOG_FILE", file, 1);
    cgj_config_load();
    cgj_log_mask = 0;
    capture_begin();
    cgj_log_init();
    return capture_end();
}

Test(base_config, log_categories_selected)
{
    const char *err = log_init_captured("trace,breaks", NULL);
    cr_assert_str_empty(err, "%s", err);
    cr_assert_eq(cgj_log_mask, (1u << CGJ_LOG_trace) | (1u << CGJ_LOG_breaks));
}

Test(base_config, log_all_enables_every_category)
{
    const char *err = log_init_captured("all", NULL);
    cr_assert_str_empty(err, "%s", err);
    for (int c = 0; c < CGJ_LOG_COUNT; c++)
        cr_assert(cgj_log_mask & (1u << c), "category %d not enabled by 'all'", c);
    cr_assert_eq(cgj_log_mask >> CGJ_LOG_COUNT, 0, "bits beyond the categories set");
}

Test(base_config, log_unknown_category_warns_and_keeps_the_others)
{
    const char *err = log_init_captured("trace,bogus,,graphs", NULL);
    cr_assert(strstr(err, "warning"), "no warning: '%s'", err);
    cr_assert(strstr(err, "'bogus'"), "warning does not name the category: %s", err);
    cr_assert(strstr(err, "guards") && strstr(err, "all"), "warning does not list the known ones: %s", err);
    cr_assert_eq(cgj_log_mask, (1u << CGJ_LOG_trace) | (1u << CGJ_LOG_graphs));
}

Test(base_config, log_prefix_of_a_category_is_unknown)
{
    const char *err = log_init_captured("tra", NULL);
    cr_assert(strstr(err, "'tra'"), "'%s'", err);
    cr_assert_eq(cgj_log_mask, 0);
}

Test(base_config, log_goes_to_stderr_by_default)
{
    log_init_captured("api", NULL);
    cr_assert_eq(cgj_log_stream(), stderr);
    capture_begin();
    CGJ_LOG(api, "hello %d", 42);
    CGJ_LOG(trace, "not shown %d", 7); /* category off */
    const char *err = capture_end();
    cr_assert_str_eq(err, "cgjit[api] hello 42\n");
}

static int evaluated;
static int count_eval(void) { return ++evaluated; }

Test(base_config, disabled_category_does_not_evaluate_arguments)
{
    log_init_captured("trace", NULL);
    capture_begin();
    CGJ_LOG(guards, "%d", count_eval());
    CGJ_LOG(trace, "%d", count_eval());
    const char *err = capture_end();
    cr_assert_eq(evaluated, 1);
    cr_assert_str_eq(err, "cgjit[trace] 1\n");
}

Test(base_config, log_file_receives_the_log)
{
    char path[] = "/tmp/cgjit_logXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    const char *err = log_init_captured("guards", path);
    cr_assert_str_empty(err, "%s", err);
    cr_assert_neq(cgj_log_stream(), stderr);
    capture_begin();
    CGJ_LOG(guards, "slot %u differs", 3u);
    const char *err2 = capture_end();
    cr_assert_str_empty(err2, "log went to stderr too: %s", err2);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[256] = {0};
    cr_assert(fgets(line, sizeof line, f), "log file empty");
    fclose(f);
    unlink(path);
    cr_assert_str_eq(line, "cgjit[guards] slot 3 differs\n");
}

Test(base_config, log_file_unwritable_falls_back_to_stderr)
{
    const char *err = log_init_captured("trace", "/nonexistent-dir/cgjit.log");
    cr_assert(strstr(err, "warning") && strstr(err, "/nonexistent-dir/cgjit.log"), "'%s'", err);
    cr_assert_eq(cgj_log_stream(), stderr);
}

Test(base_config, log_hex)
{
    char buf[2 * 32 + 4];
    unsigned char b[40];
    for (int i = 0; i < 40; i++) b[i] = (unsigned char)(i * 17);
    cr_assert_str_eq(cgj_log_hex(buf, b, 3), "001122");
    cgj_log_hex(buf, b, 40);
    cr_assert_eq(strlen(buf), 66, "32 bytes then '..': %s", buf);
    cr_assert_str_eq(buf + 64, "..");
    cr_assert_str_eq(cgj_log_hex(buf, b, 0), "");
}
