/* config.c — parse CGJIT_* variables into cgj_cfg; the step policies. See config.h. */
#define _GNU_SOURCE /* secure_getenv */
#include "base/config.h"
#include "base/json.h"
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

cgj_config_t cgj_cfg = {
#define CGJ_CFG_DEFAULT(name, kind, def, min, max, opt, optkind, metavar, shown, doc) .name = def,
    CGJ_CONFIG_LIST(CGJ_CFG_DEFAULT)
#undef CGJ_CFG_DEFAULT
};

static const char *const policy_names[] = {
#define CGJ_STEP_POLICY_NAME(name, value, doc) value,
    CGJ_STEP_POLICY_LIST(CGJ_STEP_POLICY_NAME)
#undef CGJ_STEP_POLICY_NAME
};

int cgj_step_policy_parse(const char *s)
{
    for (int i = 0; i < CGJ_STEP_POLICY_COUNT; i++)
        if (!strcmp(s, policy_names[i])) return i;
    return -1;
}

const char *cgj_step_policy_name(int policy)
{
    return policy >= 0 && policy < CGJ_STEP_POLICY_COUNT ? policy_names[policy] : "?";
}

static const char *const jit_mode_names[] = {
#define CGJ_JIT_MODE_NAME(name, value, doc) value,
    CGJ_JIT_MODE_LIST(CGJ_JIT_MODE_NAME)
#undef CGJ_JIT_MODE_NAME
};

int cgj_jit_mode_parse(const char *s)
{
    for (int i = 0; i < CGJ_JIT_MODE_COUNT; i++)
        if (!strcmp(s, jit_mode_names[i])) return i;
    return -1;
}

const char *cgj_jit_mode_name(int mode)
{
    return mode >= 0 && mode < CGJ_JIT_MODE_COUNT ? jit_mode_names[mode] : "?";
}

cgj_jit_mode_t cgj_jit_mode(void)
{
    /* Asked on every library call of a step: CGJIT_MODE is one of the names' own strings once
     * loaded (check_mode), so a pointer comparison answers. */
    const char *s = __atomic_load_n(&cgj_cfg.MODE, __ATOMIC_ACQUIRE);
    for (int i = 0; i < CGJ_JIT_MODE_COUNT; i++)
        if (s == jit_mode_names[i]) return (cgj_jit_mode_t)i;
    int m = cgj_jit_mode_parse(s);
    return m < 0 ? CGJ_JIT_REDUCE_OVERHEAD : (cgj_jit_mode_t)m;
}

void cgj_jit_mode_set(cgj_jit_mode_t m)
{
    __atomic_store_n(&cgj_cfg.MODE, jit_mode_names[m], __ATOMIC_RELEASE);
}

/* A warning about CGJIT_<var>='value': the value quoted, the whole line escaped (cgj_text_str),
 * so that it is one line whatever the value holds. */
__attribute__((format(printf, 3, 4))) static void warn(const char *var, const char *value, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    flockfile(stderr);
    fprintf(stderr, "cgjit: warning: %s='", var);
    cgj_text_str(stderr, value);
    fputs("' ", stderr);
    cgj_text_str(stderr, why);
    fputc('\n', stderr);
    funlockfile(stderr);
}

/* CGJIT_MODE: a name of CGJ_JIT_MODE_LIST, else the default with a warning. */
static void check_mode(void)
{
    int m = cgj_jit_mode_parse(cgj_cfg.MODE);
    if (m < 0)
        warn("CGJIT_MODE", cgj_cfg.MODE, "is not reduce-overhead, default or max-autotune; using reduce-overhead");
    cgj_cfg.MODE = jit_mode_names[m < 0 ? CGJ_JIT_REDUCE_OVERHEAD : m];
}

int cgj_config_bool(const char *s)
{
    static const char *const words[][2] = {{"0", "1"}, {"false", "true"}, {"no", "yes"}, {"off", "on"}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        for (int v = 0; v < 2; v++)
            if (!strcasecmp(s, words[i][v])) return v;
    return -1;
}

int cgj_config_int(const char *s, long long min, long long max, long long *out)
{
    const char *digits = s[0] == '-' ? s + 1 : s;
    if (*digits < '0' || *digits > '9') return -1; /* strtoll would skip spaces and take a '+' */
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int cgj_config_report(const char *s, const char **file)
{
    *file = NULL;
    int b = cgj_config_bool(s);
    if (b >= 0) return b ? CGJ_REPORT_TEXT : CGJ_REPORT_OFF;
    if (!strncmp(s, "json:", 5) && s[5]) return *file = s + 5, CGJ_REPORT_JSON;
    if (!strncmp(s, "text:", 5) && s[5]) return *file = s + 5, CGJ_REPORT_TEXT;
    return -1;
}

/* CGJIT_REPORT: a boolean word reads as "1" or "0"; anything else than the forms of
 * cgj_config_report keeps the default, with a warning, as a malformed number does. */
static void check_report(void)
{
    const char *file, *s = cgj_cfg.REPORT;
    int kind = cgj_config_report(s, &file);
    if (kind < 0) {
        warn("CGJIT_REPORT", s, "is not 1/0, json:FILE or text:FILE; using 0");
        cgj_cfg.REPORT = "0";
    } else if (!file) {
        cgj_cfg.REPORT = kind == CGJ_REPORT_TEXT ? "1" : "0";
    }
}

/* CGJIT_STEP: empty (the default: sync when preloaded, off when linked) or a policy of
 * CGJ_STEP_POLICY_LIST, else the default with a warning. */
static void check_step(void)
{
    if (!cgj_cfg.STEP[0] || cgj_step_policy_parse(cgj_cfg.STEP) >= 0) return;
    warn("CGJIT_STEP", cgj_cfg.STEP,
         "is not sync, auto or off; using the default (sync when preloaded, off when linked)");
    cgj_cfg.STEP = "";
}

/* CGJIT_LOG: categories of base/log.h or `all`, comma-separated; unknown ones are named in one
 * warning (the log leaves them out; the others are used). */
static void check_log(void)
{
    static const char *const names[] = {
#define CGJ_CFG_LOG_NAME(name, doc) #name,
        CGJ_LOG_LIST(CGJ_CFG_LOG_NAME)
#undef CGJ_CFG_LOG_NAME
            "all"};
    char unknown[256] = "", known[256] = "";
    for (const char *s = cgj_cfg.LOG; *s; s += *s == ',') {
        size_t len = strcspn(s, ","), at = strlen(unknown);
        bool found = len == 0;
        for (size_t i = 0; !found && i < sizeof names / sizeof names[0]; i++)
            found = strlen(names[i]) == len && !strncmp(names[i], s, len);
        if (!found) snprintf(unknown + at, sizeof unknown - at, "%s'%.*s'", at ? ", " : "", (int)len, s);
        s += len;
    }
    if (!unknown[0]) return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t at = strlen(known);
        snprintf(known + at, sizeof known - at, "%s%s", i ? ", " : "", names[i]);
    }
    warn("CGJIT_LOG", cgj_cfg.LOG, "names no category %s (known: %s); the others are used", unknown, known);
}

static void set_INT(const char *var, const char *s, long long *out, long long def, long long min, long long max)
{
    if (cgj_config_int(s, min, max, out) == 0) return;
    warn(var, s, "is not an integer from %lld to %lld; using %lld", min, max, def);
    *out = def;
}

static void set_BOOL(const char *var, const char *s, long long *out, long long def, long long min, long long max)
{
    (void)min, (void)max;
    int v = cgj_config_bool(s);
    if (v < 0) warn(var, s, "is not 1/0, true/false, yes/no or on/off; using %lld", def);
    *out = v < 0 ? def : v;
}

static void set_STR(const char *var, const char *s, const char **out, const char *def, long long min, long long max)
{
    (void)var, (void)def, (void)min, (void)max;
    *out = s;
    if (out == &cgj_cfg.REPORT) check_report();
    if (out == &cgj_cfg.MODE) check_mode();
    if (out == &cgj_cfg.STEP) check_step();
    if (out == &cgj_cfg.LOG) check_log();
}

int cgj_config_set(const char *var, const char *value)
{
#define CGJ_CFG_SET(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    if (!strcmp(var, "CGJIT_" #name)) return set_##kind(var, value, &cgj_cfg.name, def, min, max), 0;
    CGJ_CONFIG_LIST(CGJ_CFG_SET)
#undef CGJ_CFG_SET
    return -1;
}

/* Is `entry` (NAME=VALUE of the environment) a CGJIT_* variable cgjit does not know? CGJIT_LIB
 * is cgjit-run's. */
static bool unknown_variable(const char *entry)
{
    size_t len = strcspn(entry, "=");
    if (strncmp(entry, "CGJIT_", 6) || !entry[len] || (len == 9 && !strncmp(entry, "CGJIT_LIB", 9))) return false;
#define CGJ_CFG_KNOWN(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    if (len == sizeof("CGJIT_" #name) - 1 && !strncmp(entry, "CGJIT_" #name, len)) return false;
    CGJ_CONFIG_LIST(CGJ_CFG_KNOWN)
#undef CGJ_CFG_KNOWN
    return true;
}

/* A CGJIT_* variable that names no tunable (a misspelling) is warned about; in secure execution
 * (a set-user-ID program) the environment is not read, as secure_getenv reads none. */
static void check_names(void)
{
    extern char **environ;
    if (getauxval(AT_SECURE)) return;
    for (char **e = environ; e && *e; e++) {
        if (!unknown_variable(*e)) continue;
        char var[64];
        size_t len = strcspn(*e, "=");
        snprintf(var, sizeof var, "%.*s", (int)(len < 63 ? len : 63), *e);
        warn(var, *e + len + 1, "is no cgjit variable, and is ignored (cgjit-run --config-table lists them)");
    }
}

void cgj_config_load(void)
{
#define CGJ_CFG_PARSE(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    if ((s = secure_getenv("CGJIT_" #name))) cgj_config_set("CGJIT_" #name, s);
    const char *s;
    CGJ_CONFIG_LIST(CGJ_CFG_PARSE)
#undef CGJ_CFG_PARSE
    check_report();
    check_mode(); /* also unset: the mode is one of the names' own strings (cgj_jit_mode) */
    check_names();
    if (cgj_cfg.VERIFY_ALL) cgj_cfg.VERIFY = 1; /* verify, over all the memory */
}

#define CGJ_CFG_STR_INT(def) #def
#define CGJ_CFG_STR_BOOL(def) #def
#define CGJ_CFG_STR_STR(def) def

void cgj_config_describe(FILE *f)
{
#define CGJ_CFG_DESCRIBE(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    fprintf(f, "  CGJIT_%-13s default %-14s %s\n", #name, "'" CGJ_CFG_STR_##kind(def) "'", doc);
    CGJ_CONFIG_LIST(CGJ_CFG_DESCRIBE)
#undef CGJ_CFG_DESCRIBE
}
