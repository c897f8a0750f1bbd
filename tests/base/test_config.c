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
#include <criterion/parameterized.h>

#include "base/config.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- capturing stderr ---- */

#include "../common/stderr_capture.h"

/* Load the configuration with the current environment; returns stderr's output. */
static const char *load_captured(void)
{
    capture_begin();
    cgj_config_load();
    return capture_end();
}

static void clear_env(void)
{
    static const char *const vars[] = {"CGJIT_DISABLE", "CGJIT_LOG",         "CGJIT_LOG_FILE",
                                       "CGJIT_DRIVER",  "CGJIT_MAX_RECORDS", "CGJIT_MAX_VARIANTS",
                                       "CGJIT_MAX_OPS", "CGJIT_REPORT",      "CGJIT_STEP"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

TestSuite(base_config, .init = clear_env);

/* The parameter of a table's ParameterizedTest is the row's index: Criterion runs every
 * parameter in a fresh process of this program, at other addresses, where the row's pointers
 * would not hold; the test reads the row from its own copy of the table. */
static void free_indices(struct criterion_test_params *p)
{
    cr_free(p->params);
}

static struct criterion_test_params row_indices(size_t rows)
{
    int *idx = cr_malloc(rows * sizeof *idx);
    cr_assert(idx);
    for (size_t i = 0; i < rows; i++) idx[i] = (int)i;
    return cr_make_param_array(int, idx, rows, free_indices);
}

/* ---- parsing: one row per environment ----
 *
 * Each row sets some variables (a Criterion parameter: every row runs in its own process, from
 * the defaults) and loads the configuration. Afterwards every tunable below holds the row's
 * value for it, or its default; a malformed value (want REJECTED) keeps the default and produces
 * exactly one line on stderr, a warning that names the variable and quotes the value; valid
 * values produce nothing. */

/* A tunable: its variable, its field in cgj_cfg (INT: num, STR: str) and its default as text. */
typedef struct tunable {
    const char *var;
    long long *num;
    const char **str;
    const char *def;
} tunable_t;

static const tunable_t tunables[] = {
    {"CGJIT_DISABLE", &cgj_cfg.DISABLE, NULL, "0"},
    {"CGJIT_LOG", NULL, &cgj_cfg.LOG, ""},
    {"CGJIT_LOG_FILE", NULL, &cgj_cfg.LOG_FILE, ""},
    {"CGJIT_DRIVER", NULL, &cgj_cfg.DRIVER, "libcuda.so.1"},
    {"CGJIT_MAX_RECORDS", &cgj_cfg.MAX_RECORDS, NULL, "4"},
    {"CGJIT_MAX_VARIANTS", &cgj_cfg.MAX_VARIANTS, NULL, "8"},
    {"CGJIT_MAX_OPS", &cgj_cfg.MAX_OPS, NULL, "100000"},
    {"CGJIT_REPORT", NULL, &cgj_cfg.REPORT, "0"},
    {"CGJIT_LIBS", &cgj_cfg.LIBS, NULL, "1"},
    {"CGJIT_CHUNK_OPS", &cgj_cfg.CHUNK_OPS, NULL, "256"},
    {"CGJIT_POOL_RESERVE_GB", &cgj_cfg.POOL_RESERVE_GB, NULL, "64"},
};
enum { NTUNABLES = sizeof tunables / sizeof tunables[0] };

#define REJECTED NULL /* setting_t.want of a malformed value: the default is kept, with a warning */

/* var=value in the environment; want: the tunable's value after loading, as text. */
typedef struct setting {
    const char *var, *value, *want;
} setting_t;

typedef struct config_case {
    const char *name;
    setting_t set[NTUNABLES]; /* up to the first var == NULL */
} config_case_t;

static const config_case_t config_cases[] = {
    {"defaults_without_environment", {{NULL}}},
    {"valid_values_are_parsed",
     {{"CGJIT_DISABLE", "1", "1"},
      {"CGJIT_MAX_RECORDS", "7", "7"},
      {"CGJIT_MAX_VARIANTS", "2", "2"},
      {"CGJIT_MAX_OPS", "16", "16"}, /* exactly the minimum */
      {"CGJIT_REPORT", "1", "1"},
      {"CGJIT_DRIVER", "/opt/fake/libcuda.so.1", "/opt/fake/libcuda.so.1"},
      {"CGJIT_LOG", "trace,guards", "trace,guards"}}},
    {"max_ops_not_a_number", {{"CGJIT_MAX_OPS", "abc", REJECTED}}},
    {"max_ops_negative", {{"CGJIT_MAX_OPS", "-3", REJECTED}}},
    {"max_ops_below_minimum", {{"CGJIT_MAX_OPS", "15", REJECTED}}},
    {"max_ops_trailing_garbage", {{"CGJIT_MAX_OPS", "100x", REJECTED}}},
    {"max_ops_empty", {{"CGJIT_MAX_OPS", "", REJECTED}}},
    {"max_ops_overflow", {{"CGJIT_MAX_OPS", "99999999999999999999999", REJECTED}}},
    /* what cgjit-run refuses, the library refuses too: one parser (cgj_config_int) */
    {"max_ops_leading_space", {{"CGJIT_MAX_OPS", " 20", REJECTED}}},
    {"max_ops_plus_sign", {{"CGJIT_MAX_OPS", "+20", REJECTED}}},
    {"max_records_zero_is_below_minimum", {{"CGJIT_MAX_RECORDS", "0", REJECTED}}},
    {"disable_not_a_boolean", {{"CGJIT_DISABLE", "maybe", REJECTED}}},
    {"booleans_in_words", {{"CGJIT_DISABLE", "true", "1"}, {"CGJIT_REPORT", "ON", "1"}, {"CGJIT_LIBS", "no", "0"}}},
    {"booleans_off_and_false", {{"CGJIT_LIBS", "off", "0"}, {"CGJIT_REPORT", "False", "0"}}},
    /* CGJIT_REPORT: a boolean word, json:FILE or text:FILE */
    {"report_as_json_to_a_file", {{"CGJIT_REPORT", "json:/tmp/r-%p.json", "json:/tmp/r-%p.json"}}},
    {"report_as_text_to_a_file", {{"CGJIT_REPORT", "text:r.txt", "text:r.txt"}}},
    {"report_of_no_known_form", {{"CGJIT_REPORT", "xml:r.xml", REJECTED}}},
    {"report_json_without_a_file", {{"CGJIT_REPORT", "json:", REJECTED}}},
    /* 64-bit values are range-checked, never truncated to 32 bits */
    {"max_ops_above_maximum", {{"CGJIT_MAX_OPS", "4294967312", REJECTED}}},
    {"max_ops_at_maximum", {{"CGJIT_MAX_OPS", "4294967295", "4294967295"}}},
    {"max_records_above_maximum", {{"CGJIT_MAX_RECORDS", "4294967296", REJECTED}}},
    {"max_variants_above_the_hard_limit", {{"CGJIT_MAX_VARIANTS", "17", REJECTED}}},
    {"chunk_ops_zero_is_one_graph", {{"CGJIT_CHUNK_OPS", "0", "0"}}},
    {"pool_reserve_too_large", {{"CGJIT_POOL_RESERVE_GB", "9999999999", REJECTED}}},
    {"one_bad_variable_does_not_spoil_the_others",
     {{"CGJIT_MAX_OPS", "abc", REJECTED}, {"CGJIT_MAX_RECORDS", "9", "9"}}},
};

ParameterizedTestParameters(base_config, parsing)
{
    return row_indices(sizeof config_cases / sizeof config_cases[0]);
}

static const setting_t *setting_of(const config_case_t *c, const char *var)
{
    for (const setting_t *s = c->set; s < c->set + NTUNABLES && s->var; s++)
        if (!strcmp(s->var, var)) return s;
    return NULL;
}

ParameterizedTest(int *row, base_config, parsing)
{
    const config_case_t *c = &config_cases[*row];
    int rejected = 0;
    for (const tunable_t *t = tunables; t < tunables + NTUNABLES; t++) {
        const setting_t *s = setting_of(c, t->var);
        if (!s) continue;
        setenv(s->var, s->value, 1);
        if (t->num) *t->num = 999999999; /* a value a silent parser would leave or clobber differently */
        rejected += s->want == REJECTED;
    }
    const char *err = load_captured();

    for (const tunable_t *t = tunables; t < tunables + NTUNABLES; t++) {
        const setting_t *s = setting_of(c, t->var);
        const char *want = s && s->want != REJECTED ? s->want : t->def;
        char got[64];
        if (t->num) snprintf(got, sizeof got, "%lld", *t->num);
        else snprintf(got, sizeof got, "%s", *t->str);
        cr_assert_str_eq(got, want, "%s: %s is '%s', want '%s'", c->name, t->var, got, want);
    }

    if (!rejected) {
        cr_assert_str_empty(err, "%s: valid values, yet stderr got: %s", c->name, err);
        return;
    }
    cr_assert(strstr(err, "warning") != NULL, "%s: no warning on stderr (got '%s')", c->name, err);
    int lines = 0; /* one line per bad variable */
    for (const char *p = strchr(err, '\n'); p; p = strchr(p + 1, '\n')) lines++;
    cr_assert(lines == rejected && err[strlen(err) - 1] == '\n', "%s: %d bad variables, stderr: %s", c->name, rejected,
              err);
    for (const setting_t *s = c->set; s < c->set + NTUNABLES && s->var; s++) {
        if (s->want != REJECTED) {
            cr_assert(strstr(err, s->var) == NULL, "%s: %s='%s' is valid, yet warned: %s", c->name, s->var, s->value,
                      err);
            continue;
        }
        cr_assert(strstr(err, s->var) != NULL, "%s: %s='%s': warning does not name the variable: %s", c->name, s->var,
                  s->value, err);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", s->value);
        cr_assert(strstr(err, quoted) != NULL, "%s: warning does not quote the value: %s", c->name, err);
        const tunable_t *t = tunables;
        while (strcmp(t->var, s->var)) t++;
        char using[64];
        snprintf(using, sizeof using, "using %s\n", t->def);
        cr_assert(strstr(err, using) != NULL, "%s: warning does not name the value used: %s", c->name, err);
    }
}

Test(base_config, int_parser_is_strict)
{
    long long v = 7;
    cr_assert_eq(cgj_config_int("16", 16, 20, &v), 0);
    cr_assert_eq(v, 16);
    cr_assert_eq(cgj_config_int("-3", -5, 5, &v), 0);
    cr_assert_eq(v, -3);
    static const char *const bad[] = {"", " 1", "+1", "1 ", "0x10", "1e3", "-", "--1", "21", "9223372036854775808"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        cr_assert_eq(cgj_config_int(bad[i], 0, 20, &v), -1, "'%s' taken", bad[i]);
        cr_assert_eq(v, 7, "'%s': the value was touched", bad[i]);
    }
}

/* A value with a newline, a terminal escape (C0 or C1) or bytes of no UTF-8 still makes one
 * warning line, escaped as every message cgjit writes (base/log.h). */
Test(base_config, warning_escapes_control_characters)
{
    setenv("CGJIT_MAX_OPS", "12\n\x1b[31m\xc2\x9b\xff\\", 1);
    const char *err = load_captured();
    cr_assert_str_eq(err, "cgjit: warning: CGJIT_MAX_OPS='12\\n\\x1b[31m\\xc2\\x9b\\xff\\\\' is not an integer from 16 "
                          "to 4294967295; using 100000\n");
}

/* CGJIT_STEP is checked as it is read, as CGJIT_MODE is, not where a driver is found later:
 * a program without one is told too. */
Test(base_config, step_of_no_policy_warns_as_it_is_read)
{
    setenv("CGJIT_STEP", "bogus\x1b", 1);
    const char *err = load_captured();
    cr_assert_str_eq(err, "cgjit: warning: CGJIT_STEP='bogus\\x1b' is not sync, auto or off; using the default "
                          "(sync when preloaded, off when linked)\n");
    cr_assert_str_eq(cgj_cfg.STEP, "");
    setenv("CGJIT_STEP", "auto", 1);
    err = load_captured();
    cr_assert_str_empty(err);
    cr_assert_str_eq(cgj_cfg.STEP, "auto");
}

/* A CGJIT_* variable that is no tunable is a misspelling: one warning each, in the same form;
 * CGJIT_LIB is cgjit-run's. */
Test(base_config, a_variable_of_no_tunable_is_warned_about)
{
    setenv("CGJIT_SETP", "auto", 1);
    setenv("CGJIT_LIB", "/opt/cgjit/libcgjit.so", 1);
    setenv("CGJIT_MAX_OP", "12", 1);
    const char *err = load_captured();
    cr_assert(strstr(err, "cgjit: warning: CGJIT_SETP='auto' is no cgjit variable, and is ignored"), "%s", err);
    cr_assert(strstr(err, "cgjit: warning: CGJIT_MAX_OP='12' is no cgjit variable"), "%s", err);
    cr_assert_null(strstr(err, "CGJIT_LIB"), "%s", err);
    int lines = 0;
    for (const char *p = err; (p = strchr(p, '\n')); p++) lines++;
    cr_assert_eq(lines, 2, "%s", err);
}

/* cgj_config_set: one value parsed as loading it would (the fuzzer's entry). */
Test(base_config, set_parses_one_value_as_loading_does)
{
    capture_begin();
    cr_assert_eq(cgj_config_set("CGJIT_MAX_OPS", "500"), 0);
    cr_assert_eq(cgj_config_set("CGJIT_REPORT_EVERY_S", "86401"), 0);
    cr_assert_eq(cgj_config_set("CGJIT_MODE", "fast"), 0);
    cr_assert_eq(cgj_config_set("CGJIT_REPORT", "yes"), 0);
    cr_assert_eq(cgj_config_set("CGJIT_NO_SUCH", "1"), -1);
    const char *err = capture_end();
    cr_assert_eq(cgj_cfg.MAX_OPS, 500);
    cr_assert_eq(cgj_cfg.REPORT_EVERY_S, 0);
    cr_assert_eq(cgj_jit_mode(), CGJ_JIT_REDUCE_OVERHEAD);
    cr_assert_str_eq(cgj_cfg.REPORT, "1");
    cr_assert(strstr(err, "CGJIT_REPORT_EVERY_S='86401'") && strstr(err, "CGJIT_MODE='fast'"), "%s", err);
}

Test(base_config, load_is_idempotent)
{
    setenv("CGJIT_MAX_OPS", "12345", 1);
    cgj_config_load();
    cgj_config_load();
    cr_assert_eq(cgj_cfg.MAX_OPS, 12345);
}

Test(base_config, describe_lists_every_tunable)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cgj_config_describe(f);
    fclose(f);
    static const char *const names[] = {"CGJIT_DISABLE",         "CGJIT_LOG ",         "CGJIT_LOG_FILE", "CGJIT_DRIVER",
                                        "CGJIT_MAX_RECORDS",     "CGJIT_MAX_VARIANTS", "CGJIT_MAX_OPS",  "CGJIT_REPORT",
                                        "CGJIT_POOL_RESERVE_GB", "CGJIT_DUMP_ALLOCS",  "CGJIT_STEP"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert(strstr(buf, names[i]), "describe lacks %s:\n%s", names[i], buf);
    cr_assert(strstr(buf, "'100000'"), "MAX_OPS default not shown:\n%s", buf);
    cr_assert(strstr(buf, "'libcuda.so.1'"), "DRIVER default not shown:\n%s", buf);
    free(buf);
}

/* ---- log categories ---- */

/* CGJIT_LOG and CGJIT_LOG_FILE read and the log started: what stderr got meanwhile. */
static const char *log_init_captured(const char *log, const char *file)
{
    if (log) setenv("CGJIT_LOG", log, 1);
    if (file) setenv("CGJIT_LOG_FILE", file, 1);
    cgj_log_mask = 0;
    capture_begin();
    cgj_config_load();
    cgj_log_init();
    return capture_end();
}

/* One CGJIT_LOG value per row (each in its own process): the categories it selects, and what
 * stderr must contain (no substrings: stderr stays empty). */
typedef struct log_case {
    const char *name, *log;
    uint32_t mask;
    const char *stderr_has[4];
} log_case_t;

static const log_case_t log_cases[] = {
    {"log_categories_selected", "trace,breaks", (1u << CGJ_LOG_trace) | (1u << CGJ_LOG_breaks), {NULL}},
    /* every category and no bit beyond them */
    {"log_all_enables_every_category", "all", (1u << CGJ_LOG_COUNT) - 1, {NULL}},
    /* a warning naming the category and listing the known ones; the others still apply */
    {"log_unknown_category_warns_and_keeps_the_others",
     "trace,bogus,,graphs",
     (1u << CGJ_LOG_trace) | (1u << CGJ_LOG_graphs),
     {"warning", "'bogus'", "guards", "all"}},
    {"log_prefix_of_a_category_is_unknown", "tra", 0, {"'tra'"}},
    /* in the form of every other variable's warning, with each unknown category named */
    {"log_unknown_categories_in_one_warning",
     "api,x,y",
     1u << CGJ_LOG_api,
     {"cgjit: warning: CGJIT_LOG='api,x,y' names no category 'x', 'y' (known: trace,"}},
};

ParameterizedTestParameters(base_config, log_categories)
{
    return row_indices(sizeof log_cases / sizeof log_cases[0]);
}

ParameterizedTest(int *row, base_config, log_categories)
{
    const log_case_t *c = &log_cases[*row];
    const char *err = log_init_captured(c->log, NULL);
    if (!c->stderr_has[0]) cr_assert_str_empty(err, "%s: %s", c->name, err);
    for (int k = 0; k < 4 && c->stderr_has[k]; k++)
        cr_assert(strstr(err, c->stderr_has[k]), "%s: stderr lacks %s: '%s'", c->name, c->stderr_has[k], err);
    cr_assert_eq(cgj_log_mask, c->mask, "%s: mask %#x, want %#x", c->name, cgj_log_mask, c->mask);
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
static int count_eval(void)
{
    return ++evaluated;
}

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
    char want[64]; /* a log file's lines carry the pid: processes may share the file */
    snprintf(want, sizeof want, "cgjit[%ld:guards] slot 3 differs\n", (long)getpid());
    cr_assert_str_eq(line, want);
}

/* /dev/stderr is stderr itself: the log lines keep stderr's form, and nothing is warned. */
Test(base_config, log_file_dev_stderr_is_stderr)
{
    const char *err = log_init_captured("api", "/dev/stderr");
    cr_assert_str_empty(err, "%s", err);
    cr_assert_eq(cgj_log_stream(), stderr);
}

Test(base_config, log_file_unwritable_falls_back_to_stderr)
{
    const char *err = log_init_captured("trace", "/nonexistent-dir/cgjit.log");
    cr_assert(strstr(err, "warning") && strstr(err, "/nonexistent-dir/cgjit.log"), "'%s'", err);
    cr_assert_eq(cgj_log_stream(), stderr);
}

/* What a program gives (a kernel's or an anchor's name) is any bytes: every log line is written
 * with its control characters and invalid UTF-8 escaped, on one line. */
Test(base_config, log_lines_are_escaped)
{
    log_init_captured("api", NULL);
    capture_begin();
    CGJ_LOG(api, "kernel '%s' at %d", "k\n\x1b]0;owned\x07\xc3\x28\xe2\x82\xac", 3);
    const char *err = capture_end();
    cr_assert_str_eq(err, "cgjit[api] kernel 'k\\n\\x1b]0;owned\\x07\\xc3(\xe2\x82\xac' at 3\n");
    char big[3000]; /* longer than the line buffer: formatted whole */
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    big[1500] = '\r';
    capture_begin();
    CGJ_LOG(api, "%s|", big);
    err = capture_end();
    cr_assert_eq(strlen(err), strlen("cgjit[api] ") + sizeof big - 1 + 1 + 1 + 1, "%zu", strlen(err));
    cr_assert(strstr(err, "a\\ra") && !strchr(err, '\r') && !strcmp(err + strlen(err) - 2, "|\n"), "%s", err);
}

Test(base_config, messages_are_escaped)
{
    capture_begin();
    cgj_log_message("%s:%u: kernel '%s'", "ops\ttxt", 7u, "a\x1b[2J\xff");
    const char *err = capture_end();
    cr_assert_str_eq(err, "cgjit: ops\\ttxt:7: kernel 'a\\x1b[2J\\xff'\n");
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

/* ---- files a user names (base/file.h) ---- */

#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

Test(base_config, log_file_is_private_and_not_inherited)
{
    char dir[] = "/tmp/cgjit_logXXXXXX";
    cr_assert(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/log", dir);
    const char *err = log_init_captured("trace", path);
    cr_assert_str_empty(err, "%s", err);
    FILE *f = cgj_log_stream();
    cr_assert_neq(f, stderr);
    cr_assert(fcntl(fileno(f), F_GETFD) & FD_CLOEXEC, "the log descriptor leaks into exec'd programs");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    unlink(path);
    rmdir(dir);
}

Test(base_config, log_file_through_a_symlink_is_refused)
{
    char dir[] = "/tmp/cgjit_logXXXXXX";
    cr_assert(mkdtemp(dir));
    char victim[64], link[64];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(link, sizeof link, "%s/cgjit.log", dir);
    FILE *v = fopen(victim, "w");
    fputs("precious\n", v);
    fclose(v);
    cr_assert_eq(symlink(victim, link), 0);
    const char *err = log_init_captured("trace", link);
    cr_assert(strstr(err, "warning") && strstr(err, link), "'%s'", err);
    cr_assert_eq(cgj_log_stream(), stderr, "a planted link is never followed");
    struct stat st;
    cr_assert_eq(stat(victim, &st), 0);
    cr_assert_eq(st.st_size, 9, "the link's target was written");
    unlink(link), unlink(victim), rmdir(dir);
}

Test(base_config, dump_files_are_created_anew_never_overwritten)
{
    char dir[] = "/tmp/cgjit_dumpXXXXXX";
    cr_assert(mkdtemp(dir));
    char sub[64], path[80];
    snprintf(sub, sizeof sub, "%s/allocs", dir);
    cr_assert_eq(cgj_file_mkdir(sub), 0);
    cr_assert_eq(cgj_file_mkdir(sub), 0, "an existing directory is fine");
    struct stat st;
    cr_assert_eq(stat(sub, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700);
    snprintf(path, sizeof path, "%s/a-v1.txt", sub);
    FILE *f = cgj_file_open(path, true);
    cr_assert(f);
    fclose(f);
    errno = 0;
    cr_assert_null(cgj_file_open(path, true));
    cr_assert_eq(errno, EEXIST);
    char link[80];
    snprintf(link, sizeof link, "%s/link", dir);
    cr_assert_eq(symlink(sub, link), 0);
    cr_assert_eq(cgj_file_mkdir(link), ENOTDIR, "a link is no directory of ours");
    unlink(path), rmdir(sub), unlink(link), rmdir(dir);
}
