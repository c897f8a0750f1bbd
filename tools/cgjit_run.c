/*
 * cgjit_run.c — cgjit-run [OPTIONS] [--] PROGRAM [ARGS...]: run an unmodified program under cgjit.
 *
 * Puts libcgjit.so first in LD_PRELOAD (ahead of any value already there), sets the CGJIT_*
 * variables its options name, and execvp()s PROGRAM in its own place: same process, same
 * standard streams, PROGRAM's exit status. It does not link libcgjit; its options are the rows
 * of base/config.h's table that name one (with each variable's default, minimum and
 * documentation), and --log takes base/log.h's categories, so that its checks, its --help and
 * docs/configuration.md's table (--config-table) follow the library's.
 *
 * libcgjit.so is looked for in this order: --lib PATH, $CGJIT_LIB, <dir of cgjit-run>/libcgjit.so
 * (a build folder), then the library folder of an installation relative to cgjit-run's
 * (CGJ_RUN_LIBDIR: ../lib, or the CMAKE_INSTALL_LIBDIR it was built for, e.g.
 * ../lib/x86_64-linux-gnu), ../lib and ../lib64. In each folder libcgjit.so comes first, then
 * the soname's file (libcgjit.so.0: an installation of the runtime alone has no libcgjit.so
 * link). A path given with --lib or CGJIT_LIB must exist: a misspelt path is an error, never a
 * silent fall-back to another library. The path put into LD_PRELOAD is absolute (its folder
 * resolved by realpath, the file's own name kept), so a program that changes its working
 * directory and starts others still finds it.
 *
 * --man prints this tool's manual page, its options expanded from the same tables as --help;
 * the build writes it with this option and installs it as cgjit-run.1.
 *
 * Exit status: PROGRAM's; 0 for --help, --version, --print-env; 2 for a wrong option or value,
 * no PROGRAM, or no libcgjit.so; 127 when PROGRAM is not found and 126 when it is found but
 * cannot be executed, as a shell does.
 */
#define _GNU_SOURCE
#include "base/config.h"
#include "base/json.h"
#include "base/log.h"
#include "cgjit.h" /* the version macros only: cgjit-run does not link libcgjit */

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An installation's library folder relative to its bin folder (set by the build from
 * GNUInstallDirs), or an absolute folder. */
#ifndef CGJ_RUN_LIBDIR
#define CGJ_RUN_LIBDIR "../lib"
#endif
#define CGJ_RUN_SONAME "libcgjit.so." CGJ_VERSION_STR(CGJ_VERSION_MAJOR)

static const char prog_name[] = "cgjit-run";

/* ---- the library's tables ---- */

static const char *const log_categories[] = {
#define CGJ_RUN_CATEGORY(name, doc) #name,
    CGJ_LOG_LIST(CGJ_RUN_CATEGORY)
#undef CGJ_RUN_CATEGORY
};
#define N_CATEGORIES (sizeof log_categories / sizeof log_categories[0])

/* ---- the options: one per option column of base/config.h, then the launcher's own ---- */

typedef enum {
    OPT_NONE,         /* a tunable with no option */
    OPT_STEP,         /* a policy of CGJ_STEP_POLICY_LIST */
    OPT_MODE,         /* a mode of CGJ_JIT_MODE_LIST */
    OPT_LOG,          /* comma-separated categories of base/log.h, or all */
    OPT_TEXT,         /* any non-empty text (a file or directory name) */
    OPT_INT,          /* a decimal integer within the tunable's bounds */
    OPT_BOOL,         /* 1/0, true/false, yes/no, on/off */
    OPT_FLAG,         /* no value; sets the variable to 1 */
    OPT_REPORT,       /* alone sets 1, as a flag; --report=VALUE takes what CGJIT_REPORT takes */
    OPT_LIB,          /* --lib */
    OPT_PRINT_ENV,    /* --print-env */
    OPT_CONFIG_TABLE, /* --config-table */
    OPT_HELP,         /* --help, -h */
    OPT_VERSION,      /* --version */
    OPT_MAN,          /* --man */
} opt_kind_t;

typedef struct option {
    const char *name; /* without the leading --; NULL: a tunable with no option */
    opt_kind_t kind;
    const char *var;     /* the variable it sets, or NULL */
    const char *metavar; /* for --help; NULL: the option takes no value */
    const char *def;     /* the default as a user reads it */
    long long min, max;  /* OPT_INT: the values accepted */
    const char *doc;     /* one sentence, wrapped by --help */
} option_t;

#define CGJ_RUN_TEXT_INT(def) #def
#define CGJ_RUN_TEXT_BOOL(def) #def
#define CGJ_RUN_TEXT_STR(def) def
/* The default as shown: SHOWN where given, else the default itself ("" shown as "none"). */
#define CGJ_RUN_SHOWN(kind, def, shown) \
    (shown ? shown : CGJ_RUN_TEXT_##kind(def)[0] ? CGJ_RUN_TEXT_##kind(def) : "none")

static const option_t options[] = {
#define CGJ_RUN_OPTION(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    {opt, OPT_##optkind, "CGJIT_" #name, metavar, CGJ_RUN_SHOWN(kind, def, shown), min, max, doc},
    CGJ_CONFIG_LIST(CGJ_RUN_OPTION)
#undef CGJ_RUN_OPTION
        {"lib", OPT_LIB, NULL, "PATH", NULL, 0, 0,
         "the libcgjit.so to preload; without it: $CGJIT_LIB, else DIR/libcgjit.so, else the "
         "installation's DIR/" CGJ_RUN_LIBDIR "/libcgjit.so (DIR: cgjit-run's folder)"},
    {"print-env", OPT_PRINT_ENV, NULL, NULL, NULL, 0, 0,
     "print the environment changes, NAME=VALUE one a line, and exit without running anything"},
    {"config-table", OPT_CONFIG_TABLE, NULL, NULL, NULL, 0, 0,
     "print every CGJIT_* variable as docs/configuration.md's Markdown table, and exit"},
    {"help", OPT_HELP, NULL, NULL, NULL, 0, 0, "print this help and exit"},
    {"version", OPT_VERSION, NULL, NULL, NULL, 0, 0, "print the version and exit"},
    {"man", OPT_MAN, NULL, NULL, NULL, 0, 0, "print the manual page (roff, for man -l -) and exit"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static const char *const policy_docs[] = {
#define CGJ_RUN_POLICY_DOC(name, value, doc) doc,
    CGJ_STEP_POLICY_LIST(CGJ_RUN_POLICY_DOC)
#undef CGJ_RUN_POLICY_DOC
};

static const char *const jit_mode_docs[] = {
#define CGJ_RUN_MODE_DOC(name, value, doc) doc,
    CGJ_JIT_MODE_LIST(CGJ_RUN_MODE_DOC)
#undef CGJ_RUN_MODE_DOC
};

/* Print `doc` wrapped to end by column 76, every line after the first indented by `indent`. */
static void print_wrapped(FILE *f, const char *doc, int indent)
{
    const int width = 76 - indent;
    for (bool first = true; *doc; first = false) {
        int len = (int)strlen(doc);
        if (len > width) {
            len = width;
            while (len > 0 && doc[len] != ' ') len--;
            if (len == 0) len = width;
        }
        fprintf(f, "%*s%.*s\n", first ? 0 : indent, "", len, doc);
        doc += len;
        while (*doc == ' ') doc++;
    }
}

/* "--name", "--name=METAVAR" or, for --report, whose value is optional, "--name[=METAVAR]". */
static const char *option_head(const option_t *o, char *buf, size_t len)
{
    const char *open = !o->metavar ? "" : o->kind == OPT_REPORT ? "[=" : "=";
    snprintf(buf, len, "--%s%s%s%s", o->name, open, o->metavar ? o->metavar : "", o->kind == OPT_REPORT ? "]" : "");
    return buf;
}

/* What an option sets its variable to when given alone, for --help: "=1" (a flag). */
static const char *alone_value(const option_t *o)
{
    return o->kind == OPT_FLAG || o->kind == OPT_REPORT ? "=1" : "";
}

/* The option's head as --help shows it: "--name=METAVAR", "-h, --help". */
static const char *help_head(const option_t *o, char *buf, size_t len)
{
    char opt[60];
    snprintf(buf, len, "%s%s", o->kind == OPT_HELP ? "-h, " : "", option_head(o, opt, sizeof opt));
    return buf;
}

/* The column every option's description starts at: two spaces after the widest head. */
static int help_column(void)
{
    int width = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char head[64];
        int n = options[i].name ? (int)strlen(help_head(&options[i], head, sizeof head)) : 0;
        width = n > width ? n : width;
    }
    return 2 + width + 2;
}

static void print_help(FILE *f)
{
    fprintf(f,
            "usage: %s [OPTIONS] [--] PROGRAM [ARGS...]\n"
            "\n"
            "Runs PROGRAM with ARGS under cgjit, unmodified: puts libcgjit.so first in\n"
            "LD_PRELOAD (ahead of any value already there), sets the CGJIT_* variable of\n"
            "each option given, then executes PROGRAM in its own place (searched in PATH;\n"
            "same process, same standard streams, PROGRAM's exit status). A program that\n"
            "never uses CUDA runs exactly as without cgjit. CGJIT_* variables already set\n"
            "are passed on; an option overrides its variable.\n"
            "\n"
            "Options stop at '--' or at the first argument that is not an option (in\n"
            "'%s ./app --x', --x is the app's). A value is given as --opt=VALUE or\n"
            "--opt VALUE (--report takes one only as --report=VALUE).\n"
            "\n"
            "Options:\n",
            prog_name, prog_name);
    const int col = help_column();
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const option_t *o = &options[i];
        if (!o->name) continue;
        char head[64];
        fprintf(f, "  %-*s", col - 2, help_head(o, head, sizeof head));
        print_wrapped(f, o->doc, col);
        for (int p = 0; o->kind == OPT_STEP && p < CGJ_STEP_POLICY_COUNT; p++) {
            fprintf(f, "%*s  %-4s  ", col, "", cgj_step_policy_name(p));
            print_wrapped(f, policy_docs[p], col + 8);
        }
        for (int m = 0; o->kind == OPT_MODE && m < CGJ_JIT_MODE_COUNT; m++) {
            fprintf(f, "%*s  %s\n%*s", col, "", cgj_jit_mode_name(m), col + 6, "");
            print_wrapped(f, jit_mode_docs[m], col + 6);
        }
        if (o->var) fprintf(f, "%*s[%s%s, default %s]\n", col, "", o->var, alone_value(o), o->def);
    }
    fprintf(f, "\n"
               "Exit status: PROGRAM's; 2 for a wrong option or value, no PROGRAM, or no\n"
               "libcgjit.so; 127 when PROGRAM is not found, 126 when it cannot be executed.\n"
               "Every CGJIT_* variable: --config-table, or docs/configuration.md.\n");
}

/* docs/configuration.md's table, from the same rows. */
static void print_config_table(FILE *f)
{
    fprintf(f, "| variable | option | default | meaning |\n| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const option_t *o = &options[i];
        if (!o->var) continue;
        char opt[64] = "", head[60];
        if (o->name) snprintf(opt, sizeof opt, "`%s`", option_head(o, head, sizeof head));
        fprintf(f, "| `%s` | %s | `%s` | %s |\n", o->var, opt, o->def, o->doc);
    }
}

/* ---- the manual page (--man) ---- */

/* Text as roff reads it literally: '-' and '\' escaped, a control character at a line's start
 * made plain. */
static void roff_text(FILE *f, const char *s)
{
    for (const char *p = s; *p; p++) {
        if ((p == s || p[-1] == '\n') && (*p == '.' || *p == '\'')) fputs("\\&", f);
        if (*p == '-' || *p == '\\') fputc('\\', f);
        fputc(*p, f);
    }
}

/* The values an option takes (its step policies, its modes), each with its documentation. */
static void roff_values(FILE *f, const char *(*name)(int), const char *const *docs, int n)
{
    fputs(".RS\n", f);
    for (int k = 0; k < n; k++) {
        fprintf(f, ".TP\n.B %s\n", name(k));
        roff_text(f, docs[k]);
        fputc('\n', f);
    }
    fputs(".RE\n", f);
}

static void print_man_options(FILE *f)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const option_t *o = &options[i];
        if (!o->name) continue;
        fputs(".TP\n", f);
        if (o->kind == OPT_HELP) fputs("\\fB\\-h\\fR, ", f);
        fputs("\\fB\\-\\-", f);
        roff_text(f, o->name);
        fputs("\\fR", f);
        if (o->metavar) {
            fputs(o->kind == OPT_REPORT ? "[=\\fI" : "=\\fI", f);
            roff_text(f, o->metavar);
            fputs(o->kind == OPT_REPORT ? "\\fR]" : "\\fR", f);
        }
        fputc('\n', f);
        roff_text(f, o->doc);
        fputs(o->doc[0] && o->doc[strlen(o->doc) - 1] == '.' ? "\n" : ".\n", f);
        if (o->var) {
            fputs("Sets \\fB", f);
            roff_text(f, o->var);
            fprintf(f, "\\fR%s; default: ", alone_value(o));
            roff_text(f, o->def);
            fputs(".\n", f);
        }
        if (o->kind == OPT_STEP) roff_values(f, cgj_step_policy_name, policy_docs, CGJ_STEP_POLICY_COUNT);
        if (o->kind == OPT_MODE) roff_values(f, cgj_jit_mode_name, jit_mode_docs, CGJ_JIT_MODE_COUNT);
    }
}

static void print_man(FILE *f)
{
    fputs(
        ".TH CGJIT\\-RUN 1 \"\" \"cgjit " CGJ_VERSION_STRING "\" \"User Commands\"\n"
        ".SH NAME\n"
        "cgjit\\-run \\- run an unmodified CUDA program under cgjit\n"
        ".SH SYNOPSIS\n"
        ".B cgjit\\-run\n"
        "[\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fIPROGRAM\\fR [\\fIARGS\\fR...]\n"
        ".SH DESCRIPTION\n"
        "cgjit records one step of a program's GPU work at the CUDA driver API, checks on later\n"
        "steps that the program does the same again, and replays the step as CUDA graphs; results\n"
        "are bitwise equal to eager execution.\n"
        ".PP\n"
        ".B cgjit\\-run\n"
        "puts libcgjit.so first in \\fBLD_PRELOAD\\fR (ahead of any value already there), sets the\n"
        "\\fBCGJIT_*\\fR variable of each option given, then executes \\fIPROGRAM\\fR in its own\n"
        "place (searched in \\fBPATH\\fR; same process, same standard streams, \\fIPROGRAM\\fR's\n"
        "exit status). A program that never uses CUDA runs exactly as without cgjit.\n"
        "\\fBCGJIT_*\\fR variables already set are passed on; an option overrides its variable.\n"
        ".PP\n"
        "Options stop at \\fB\\-\\-\\fR or at the first argument that is not an option. A value is\n"
        "given as \\fB\\-\\-opt\\fR=\\fIVALUE\\fR or \\fB\\-\\-opt\\fR \\fIVALUE\\fR (\\fB\\-\\-report\\fR takes one\n"
        "only as \\fB\\-\\-report\\fR=\\fIVALUE\\fR); a repeated option's last value wins. A bad value is\n"
        "refused with status 2.\n"
        ".SH OPTIONS\n",
        f);
    print_man_options(f);
    fputs(".SH ENVIRONMENT\n"
          ".TP\n.B CGJIT_LIB\n"
          "The libcgjit.so to preload when \\fB\\-\\-lib\\fR is not given.\n"
          ".TP\n.B LD_PRELOAD\n"
          "Kept, after libcgjit.so.\n"
          ".TP\n.B CGJIT_*\n"
          "Read by libcgjit in \\fIPROGRAM\\fR; \\fBcgjit\\-run \\-\\-config\\-table\\fR lists every\n"
          "variable with its default, including those without an option.\n"
          ".SH FILES\n"
          "Without \\fB\\-\\-lib\\fR or \\fBCGJIT_LIB\\fR, libcgjit.so is looked for in the folder of\n"
          "cgjit\\-run (a build folder), then in an installation's library folder relative to it:\n",
          f);
    roff_text(f, CGJ_RUN_LIBDIR);
    fputs(" (the one it was installed with), else ../lib or ../lib64. In each folder libcgjit.so\n"
          "comes first, then " CGJ_RUN_SONAME ". The path preloaded is absolute.\n"
          ".SH EXIT STATUS\n"
          "\\fIPROGRAM\\fR's own; 0 for \\fB\\-\\-help\\fR, \\fB\\-\\-version\\fR, \\fB\\-\\-man\\fR,\n"
          "\\fB\\-\\-config\\-table\\fR and \\fB\\-\\-print\\-env\\fR; 2 for a wrong option or value, no\n"
          "\\fIPROGRAM\\fR, or no libcgjit.so; 127 when \\fIPROGRAM\\fR is not found and 126 when it\n"
          "cannot be executed, as a shell.\n"
          ".SH EXAMPLES\n"
          ".nf\n"
          "cgjit\\-run \\-\\-report \\-\\- ./train \\-\\-steps 1000\n"
          "cgjit\\-run \\-\\-step=auto \\-\\-log=guards ./app\n"
          "cgjit\\-run \\-\\-print\\-env    # what it would set; runs nothing\n"
          ".fi\n"
          ".SH SEE ALSO\n"
          ".BR ld.so (8);\n"
          "\\fBcgjit\\-plan \\-\\-help\\fR (the memory planner on an allocation trace); the\n"
          "docs/configuration.md of cgjit (its table is \\fBcgjit\\-run \\-\\-config\\-table\\fR).\n",
          f);
}

/* "cgjit-run: " and the message on stderr, on one line: what the user gave (a value, a path, a
 * program's name) may hold any bytes, so control characters and invalid UTF-8 are escaped
 * (cgj_text_str), as the library's messages are. */
static void vsay(const char *fmt, va_list ap)
{
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
    fprintf(stderr, "%s: ", prog_name);
    cgj_text_str(stderr, msg ? msg : fmt);
    fputc('\n', stderr);
    free(msg);
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

/* One line naming the problem, one pointing at --help; exit status 2. */
__attribute__((format(printf, 1, 2), noreturn)) static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try '%s --help' for more information.\n", prog_name);
    exit(2);
}

/* Check an option's value; returns the text to put into its variable (normalized integers). */
static const char *check_value(const option_t *o, const char *val)
{
    if (!*val) usage_error("option '--%s' needs a value", o->name);
    switch (o->kind) {
    case OPT_STEP:
        if (cgj_step_policy_parse(val) < 0) usage_error("--%s: '%s' is not sync, auto or off", o->name, val);
        return val;
    case OPT_MODE:
        if (cgj_jit_mode_parse(val) < 0)
            usage_error("--%s: '%s' is not reduce-overhead, default or max-autotune", o->name, val);
        return val;
    case OPT_LOG:
        for (const char *s = val; *s;) {
            size_t len = strcspn(s, ",");
            bool known = len == 0 || (len == 3 && strncmp(s, "all", 3) == 0);
            for (size_t i = 0; !known && i < N_CATEGORIES; i++)
                known = strlen(log_categories[i]) == len && strncmp(log_categories[i], s, len) == 0;
            if (!known) {
                char list[256] = "";
                for (size_t i = 0; i < N_CATEGORIES; i++) {
                    strncat(list, log_categories[i], sizeof list - strlen(list) - 1);
                    strncat(list, ", ", sizeof list - strlen(list) - 1);
                }
                usage_error("--%s: unknown category '%.*s' (known: %sall)", o->name, (int)len, s, list);
            }
            s += len;
            if (*s == ',') s++;
        }
        return val;
    case OPT_REPORT: {
        const char *file;
        if (cgj_config_report(val, &file) < 0)
            usage_error("--%s: '%s' is not 1/0, json:FILE or text:FILE", o->name, val);
        return val;
    }
    case OPT_INT: {
        long long v;
        if (cgj_config_int(val, o->min, o->max, &v) != 0) /* the library's own check */
            usage_error("--%s: '%s' is not an integer from %lld to %lld", o->name, val, o->min, o->max);
        static char text[N_OPTIONS][24];
        snprintf(text[o - options], sizeof text[0], "%lld", v);
        return text[o - options];
    }
    case OPT_BOOL: {
        int v = cgj_config_bool(val);
        if (v < 0) usage_error("--%s: '%s' is not 1/0, true/false, yes/no or on/off", o->name, val);
        return v ? "1" : "0";
    }
    default: return val;
    }
}

/* ---- finding libcgjit.so ---- */

/* The absolute name of a readable regular file into out (PATH_MAX): its folder resolved by
 * realpath, its own name kept (libcgjit.so stays libcgjit.so, not the versioned file that the
 * link names). 0, or an errno value. */
static int usable_file(const char *path, char *out)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[PATH_MAX], real_dir[PATH_MAX];
    if (!*base) return EISDIR;
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) return ENAMETOOLONG;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    if (!realpath(dir, real_dir)) return errno;
    if (snprintf(out, PATH_MAX, "%s%s%s", real_dir, strcmp(real_dir, "/") ? "/" : "", base) >= PATH_MAX)
        return ENAMETOOLONG;
    struct stat st;
    if (stat(out, &st) != 0) return errno;
    if (!S_ISREG(st.st_mode)) return S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    if (access(out, R_OK) != 0) return errno;
    return 0;
}

/* The folder cgjit-run was started from (PATH_MAX), or false where it cannot be told. */
static bool own_dir(const char *argv0, char *out)
{
    char buf[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (k > 0) {
        buf[k] = '\0';
    } else if (!strchr(argv0, '/') || !realpath(argv0, buf)) {
        return false;
    }
    char *slash = strrchr(buf, '/');
    if (!slash) return false;
    if (slash == buf) slash++; /* the root folder */
    *slash = '\0';
    strcpy(out, buf);
    return true;
}

static void find_lib(const char *opt_lib, const char *argv0, char *out)
{
    const char *env_lib = getenv("CGJIT_LIB");
    const char *given = opt_lib ? opt_lib : env_lib && *env_lib ? env_lib : NULL;
    if (given) {
        int e = usable_file(given, out);
        if (e) {
            say("%s: libcgjit.so '%s': %s", opt_lib ? "--lib" : "CGJIT_LIB", given,
                e == EINVAL ? "not a regular file" : strerror(e));
            exit(2);
        }
        return;
    }
    char dir[PATH_MAX];
    if (!own_dir(argv0, dir)) {
        say("cannot tell which folder %s is in, so libcgjit.so is not found next to it; "
            "give it with --lib=PATH or CGJIT_LIB",
            prog_name);
        exit(2);
    }
    const char *sep = strcmp(dir, "/") == 0 ? "" : "/";
    /* the build folder, then an installation's library folder (the one it was built for
     * first, then the two usual ones, each once) */
    const char *const sub[] = {"", CGJ_RUN_LIBDIR "/", "../lib/", "../lib64/"};
    const size_t n_sub = sizeof sub / sizeof sub[0];
    char tried[256 + 8 * PATH_MAX] = "";
    for (size_t i = 0; i < n_sub; i++) {
        bool seen = false;
        for (size_t j = 0; j < i; j++) seen |= strcmp(sub[i], sub[j]) == 0;
        if (seen) continue;
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s%s%slibcgjit.so", dir, sep, sub[i]);
        if (usable_file(cand, out) == 0) return;
        size_t at = strlen(tried);
        snprintf(tried + at, sizeof tried - at, "%s%s", at ? ", " : "", cand);
        snprintf(cand, sizeof cand, "%s%s%s" CGJ_RUN_SONAME, dir, sep, sub[i]);
        if (usable_file(cand, out) == 0) return;
    }
    say("libcgjit.so not found; tried %s (and %s in each folder) (give it with --lib=PATH or CGJIT_LIB)", tried,
        CGJ_RUN_SONAME);
    exit(2);
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    const char *values[N_OPTIONS] = {0}; /* the value of each option given (last one wins) */
    const char *opt_lib = NULL;
    bool print_env = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') break; /* PROGRAM ('-' alone is a name too) */
        if (strcmp(a, "-h") == 0) {
            print_help(stdout);
            return 0;
        }
        if (a[1] != '-') usage_error("unknown option '%s'", a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const option_t *o = NULL;
        for (size_t j = 0; j < N_OPTIONS && !o; j++)
            if (options[j].name && strlen(options[j].name) == len && strncmp(options[j].name, name, len) == 0)
                o = &options[j];
        if (!o) usage_error("unknown option '--%.*s'", (int)len, name);
        const char *val = NULL;
        if (o->kind == OPT_REPORT && eq) { /* its value is optional: only after '=' */
            val = check_value(o, eq + 1);
        } else if (o->kind == OPT_REPORT) {
            val = "1";
        } else if (o->metavar) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else usage_error("option '--%s' needs a value", o->name);
            val = check_value(o, val);
        } else if (eq) {
            usage_error("option '--%s' takes no value", o->name);
        }
        switch (o->kind) {
        case OPT_HELP: print_help(stdout); return 0;
        case OPT_VERSION: printf("%s %s\n", prog_name, CGJ_VERSION_STRING); return 0;
        case OPT_MAN: print_man(stdout); return fflush(stdout) == 0 ? 0 : 2;
        case OPT_CONFIG_TABLE: print_config_table(stdout); return 0;
        case OPT_PRINT_ENV: print_env = true; break;
        case OPT_LIB: opt_lib = val; break;
        case OPT_FLAG: values[o - options] = "1"; break;
        default: values[o - options] = val; break;
        }
    }
    if (i >= argc && !print_env) {
        fprintf(stderr, "usage: %s [OPTIONS] [--] PROGRAM [ARGS...]\n", prog_name);
        fprintf(stderr, "%s: no PROGRAM to run\nTry '%s --help' for more information.\n", prog_name, prog_name);
        return 2;
    }

    char lib[PATH_MAX];
    find_lib(opt_lib, argv[0], lib);
    if (strpbrk(lib, ": ")) {
        /* ld.so splits LD_PRELOAD at colons and spaces: such a path cannot be preloaded */
        say("cannot preload '%s': LD_PRELOAD cannot hold a path with ':' or ' '", lib);
        return 2;
    }
    const char *old = getenv("LD_PRELOAD");
    size_t n = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(n);
    if (!preload) {
        perror(prog_name);
        return 2;
    }
    snprintf(preload, n, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "");

    if (print_env) {
        printf("LD_PRELOAD=%s\n", preload);
        free(preload);
        for (size_t j = 0; j < N_OPTIONS; j++)
            if (values[j]) printf("%s=%s\n", options[j].var, values[j]);
        return fflush(stdout) == 0 ? 0 : 2;
    }

    int set = setenv("LD_PRELOAD", preload, 1); /* setenv copies it */
    free(preload);
    if (set != 0) {
        perror(prog_name);
        return 2;
    }
    for (size_t j = 0; j < N_OPTIONS; j++) {
        if (values[j] && setenv(options[j].var, values[j], 1) != 0) {
            perror(prog_name);
            return 2;
        }
    }
    execvp(argv[i], argv + i);
    int e = errno;
    say("%s: %s", argv[i], strerror(e));
    return e == ENOENT || e == ENOTDIR ? 127 : 126;
}
