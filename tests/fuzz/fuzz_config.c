/*
 * fuzz_config.c — libFuzzer harness for the values of CGJIT_* variables (base/config.c): integers
 * with bounds, booleans, CGJIT_REPORT's forms, the step policies and modes, CGJIT_LOG's
 * categories (checked in base/config.c, used by base/log.c).
 *
 * An input reads "NAME=VALUE" (NAME without CGJIT_): VALUE is set as CGJIT_NAME would be loaded
 * (cgj_config_set). Where NAME is no tunable, the first byte picks one (its index modulo the
 * table's rows) and the rest is its value; the whole input also goes through the parsers one by
 * one (every INT row's bounds, the boolean words, the report forms, the names). Besides the
 * sanitizers' checks, a broken invariant aborts (a finding):
 *  - after a set, an INT tunable lies within its bounds, a BOOL is 0 or 1, CGJIT_REPORT is one
 *    of its forms, CGJIT_MODE a mode, CGJIT_STEP a policy or empty, the log mask within its
 *    categories;
 *  - what a parser accepts reads back the same (an integer printed and parsed again, a policy
 *    or mode by its name), and a boolean word is one of the eight;
 *  - stderr gets nothing for a valid value and exactly one line, with no control character in
 *    it, for a malformed one (captured per input).
 *
 *     fuzz_config -max_total_time=60 tests/fuzz/corpus/config
 */
#define _GNU_SOURCE /* memfd_create */
#include "base/config.h"
#include "base/log.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHECK(c)                                                                               \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            fprintf(stderr, "fuzz_config: %s:%d: %s does not hold\n", __FILE__, __LINE__, #c); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

enum { K_INT, K_BOOL, K_STR };
typedef struct row {
    const char *var;
    int kind;
    long long min, max;
    void *field;
} row_t;

static const row_t rows[] = {
#define FUZZ_ROW(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    {"CGJIT_" #name, K_##kind, min, max, &cgj_cfg.name},
    CGJ_CONFIG_LIST(FUZZ_ROW)
#undef FUZZ_ROW
};
#define NROWS (sizeof rows / sizeof rows[0])

static cgj_config_t defaults;
static int capture_fd = -1, saved_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    defaults = cgj_cfg;
    capture_fd = memfd_create("fuzz_config_stderr", 0);
    saved_fd = dup(2);
    CHECK(capture_fd >= 0 && saved_fd >= 0);
    return 0;
}

static void capture_begin(void)
{
    CHECK(ftruncate(capture_fd, 0) == 0 && lseek(capture_fd, 0, SEEK_SET) == 0);
    dup2(capture_fd, 2);
}

/* What stderr got since capture_begin: lines (0 with nothing), each checked for controls. */
static int capture_end(void)
{
    static char buf[1 << 16];
    dup2(saved_fd, 2);
    int lines = 0;
    char last = '\n';
    ssize_t n;
    for (off_t at = 0; (n = pread(capture_fd, buf, sizeof buf, at)) > 0; at += n) {
        for (ssize_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)buf[i];
            if (c == '\n') lines++;
            else CHECK(c >= 0x20 && c != 0x7f); /* a value's control characters are escaped */
        }
        last = buf[n - 1];
    }
    CHECK(last == '\n'); /* nothing, or whole lines */
    return lines;
}

/* Is every comma-separated name of s a category of base/log.h or `all`? */
static bool known_categories(const char *s)
{
    static const char *const names[] = {
#define FUZZ_CATEGORY(name, doc) #name,
        CGJ_LOG_LIST(FUZZ_CATEGORY)
#undef FUZZ_CATEGORY
            "all"};
    for (; *s; s += *s == ',') {
        size_t len = strcspn(s, ","), i = 0;
        while (len && i < sizeof names / sizeof names[0] && (strlen(names[i]) != len || strncmp(names[i], s, len))) i++;
        if (len && i == sizeof names / sizeof names[0]) return false;
        s += len;
    }
    return true;
}

/* The tunable row r after cgj_config_set(r->var, value). */
static void check_row(const row_t *r, const char *value, int lines)
{
    if (r->kind == K_INT || r->kind == K_BOOL) {
        long long v = *(long long *)r->field, parsed;
        CHECK(v >= r->min && v <= r->max);
        bool valid = r->kind == K_INT ? cgj_config_int(value, r->min, r->max, &parsed) == 0
                                      : cgj_config_bool(value) >= 0;
        CHECK(lines == (valid ? 0 : 1));
        if (valid) CHECK(v == (r->kind == K_INT ? parsed : cgj_config_bool(value)));
        return;
    }
    const char *s = *(const char **)r->field, *file;
    if (r->field == &cgj_cfg.REPORT) {
        int kind = cgj_config_report(s, &file);
        CHECK(kind >= 0 && (!file || *file));
        CHECK(lines == (cgj_config_report(value, &file) >= 0 ? 0 : 1));
    } else if (r->field == &cgj_cfg.MODE) {
        CHECK(cgj_jit_mode_parse(s) >= 0 && (int)cgj_jit_mode() >= 0 && cgj_jit_mode() < CGJ_JIT_MODE_COUNT);
        CHECK(lines == (cgj_jit_mode_parse(value) >= 0 ? 0 : 1));
    } else if (r->field == &cgj_cfg.STEP) { /* a policy or empty, else warned about and empty */
        bool valid = !*value || cgj_step_policy_parse(value) >= 0;
        CHECK(valid ? s == value : !*s);
        CHECK(lines == (valid ? 0 : 1));
    } else if (r->field == &cgj_cfg.LOG) { /* taken as it is; unknown categories in one warning */
        CHECK(s == value && lines == (known_categories(value) ? 0 : 1));
    } else {
        CHECK(s == value && lines == 0); /* other strings are taken as they are */
    }
    if (r->field == &cgj_cfg.LOG) { /* its categories: the log's own parser */
        cgj_cfg.LOG_FILE = "";
        cgj_log_mask = 0;
        capture_begin();
        cgj_log_init();
        capture_end();
        CHECK(cgj_log_mask < (1u << CGJ_LOG_COUNT));
    }
}

/* The parsers one by one on s. */
static void check_parsers(const char *s)
{
    for (size_t i = 0; i < NROWS; i++) {
        long long v = 0x5a5a5a5a, again;
        if (rows[i].kind != K_INT) continue;
        if (cgj_config_int(s, rows[i].min, rows[i].max, &v) != 0) {
            CHECK(v == 0x5a5a5a5a); /* untouched */
            continue;
        }
        char text[32];
        snprintf(text, sizeof text, "%lld", v);
        CHECK(v >= rows[i].min && v <= rows[i].max);
        CHECK(cgj_config_int(text, rows[i].min, rows[i].max, &again) == 0 && again == v);
    }
    int b = cgj_config_bool(s);
    static const char *const words[] = {"0", "1", "false", "true", "no", "yes", "off", "on"};
    bool word = false;
    for (size_t k = 0; k < 8; k++) word |= !strcasecmp(s, words[k]) && (int)(k & 1) == b;
    CHECK(b == -1 || word);
    const char *file;
    int kind = cgj_config_report(s, &file);
    CHECK(kind >= -1 && kind <= CGJ_REPORT_JSON);
    if (file) CHECK(kind > 0 && *file && file >= s && file <= s + strlen(s));
    int p = cgj_step_policy_parse(s), m = cgj_jit_mode_parse(s);
    if (p >= 0) CHECK(!strcmp(cgj_step_policy_name(p), s));
    if (m >= 0) CHECK(!strcmp(cgj_jit_mode_name(m), s));
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *in = malloc(size + 1);
    memcpy(in, data, size);
    in[size] = '\0'; /* a NUL in the input ends the value, as in an environment */
    const row_t *r = NULL;
    const char *value = in, *eq = strchr(in, '=');
    char var[64];
    if (eq && (size_t)(eq - in) < sizeof var - 6) {
        snprintf(var, sizeof var, "CGJIT_%.*s", (int)(eq - in), in);
        for (size_t i = 0; i < NROWS && !r; i++)
            if (!strcmp(rows[i].var, var)) r = &rows[i], value = eq + 1;
    }
    if (!r && size) r = &rows[data[0] % NROWS], value = in + 1;
    if (r) {
        capture_begin();
        CHECK(cgj_config_set(r->var, value) == 0);
        check_row(r, value, capture_end());
    }
    check_parsers(in);
    cgj_cfg = defaults; /* the strings set point into `in` */
    free(in);
    return 0;
}
