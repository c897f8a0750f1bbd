/*
 * cgjit_run.c — cgjit-run [OPTIONS] [--] PROGRAM [ARGS...]: run an unmodified program under cgjit.
 *
 * Puts libcgjit.so first in LD_PRELOAD (ahead of any value already there), sets the CGJIT_*
 * variables its options name, and execvp()s PROGRAM in its own place: same process, same
 * standard streams, PROGRAM's exit status. It does not link libcgjit; it only reads the tables
 * of base/config.h (each variable's default and minimum) and base/log.h (the log categories),
 * so that its checks and its --help follow the library's.
 *
 * libcgjit.so is looked for in this order: --lib PATH, $CGJIT_LIB, <dir of cgjit-run>/libcgjit.so
 * (a build folder), <dir of cgjit-run>/../lib/libcgjit.so (an installation). A path given with
 * --lib or CGJIT_LIB must exist: a misspelt path is an error, never a silent fall-back to another
 * library. The path put into LD_PRELOAD is absolute (its folder resolved by realpath, the file's
 * own name kept), so a program that changes its working directory and starts others still
 * finds it.
 *
 * Exit status: PROGRAM's; 0 for --help, --version, --print-env; 2 for a wrong option or value,
 * no PROGRAM, or no libcgjit.so; 127 when PROGRAM is not found and 126 when it is found but
 * cannot be executed, as a shell does.
 */
#define _GNU_SOURCE
#include "base/config.h"
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CGJ_VERSION
#define CGJ_VERSION "0.1.0"
#endif

static const char prog_name[] = "cgjit-run";

/* ---- the library's tables ---- */

/* Default (as text) and minimum of every CGJIT_* tunable, from base/config.h. */
#define CGJ_RUN_TEXT_INT(def) #def
#define CGJ_RUN_TEXT_STR(def) def
static const struct tunable {
    const char *var;
    const char *def;
    long min;
} tunables[] = {
#define CGJ_RUN_TUNABLE(name, kind, def, min, doc) {"CGJIT_" #name, CGJ_RUN_TEXT_##kind(def), min},
    CGJ_CONFIG_LIST(CGJ_RUN_TUNABLE)
#undef CGJ_RUN_TUNABLE
};

static const struct tunable *tunable(const char *var)
{
    for (size_t i = 0; i < sizeof tunables / sizeof tunables[0]; i++)
        if (strcmp(tunables[i].var, var) == 0) return &tunables[i];
    return NULL;
}

static const char *const log_categories[] = {
#define CGJ_RUN_CATEGORY(name, doc) #name,
    CGJ_LOG_LIST(CGJ_RUN_CATEGORY)
#undef CGJ_RUN_CATEGORY
};
#define N_CATEGORIES (sizeof log_categories / sizeof log_categories[0])

/* ---- the options ---- */

typedef enum {
    OPT_STEP,        /* sync|auto|off */
    OPT_LOG,         /* comma-separated categories of base/log.h, or all */
    OPT_TEXT,        /* any non-empty text (a file or directory name) */
    OPT_INT,         /* a decimal integer >= the tunable's minimum */
    OPT_FLAG,        /* no value; sets the variable to 1 */
    OPT_LIB,         /* --lib */
    OPT_PRINT_ENV,   /* --print-env */
    OPT_HELP,        /* --help, -h */
    OPT_VERSION,     /* --version */
} opt_kind_t;

typedef struct option {
    const char *name;     /* without the leading -- */
    opt_kind_t kind;
    const char *var;      /* the variable it sets, or NULL */
    const char *metavar;  /* for --help; NULL: the option takes no value */
    const char *empty;    /* the default to show where the library's default is the empty string */
    const char *doc;      /* for --help; lines separated by \n */
} option_t;

static const option_t options[] = {
    {"step", OPT_STEP, "CGJIT_STEP", "MODE", "sync",
     "how a step is found without cgj_trace_begin/end\n"
     "markers (markers in the code take precedence):\n"
     "  sync  a step is the work between two host\n"
     "        synchronizations (stream, context or event\n"
     "        synchronize, blocking device-to-host copy)\n"
     "  auto  detect the repeating cycle of driver calls\n"
     "        (finds a loop that never synchronizes)\n"
     "  off   record nothing; every call runs eagerly"},
    {"log", OPT_LOG, "CGJIT_LOG", "CATS", "none",
     "log categories, comma-separated: trace, guards,\n"
     "breaks, graphs, blacklist, interpose, api, or all"},
    {"log-file", OPT_TEXT, "CGJIT_LOG_FILE", "FILE", "stderr",
     "append the log and the exit report to FILE"},
    {"report", OPT_FLAG, "CGJIT_REPORT", NULL, "0",
     "print the report at exit: what was replayed, and\n"
     "why not where it was not"},
    {"disable", OPT_FLAG, "CGJIT_DISABLE", NULL, "0",
     "trace nothing; forward every driver call as it is"},
    {"max-records", OPT_INT, "CGJIT_MAX_RECORDS", "N", NULL,
     "eager runs that may disagree with a step's first\n"
     "run before its anchor is blacklisted (left eager)"},
    {"max-variants", OPT_INT, "CGJIT_MAX_VARIANTS", "N", NULL,
     "traces (variants) kept per anchor; at most 16"},
    {"max-ops", OPT_INT, "CGJIT_MAX_OPS", "N", NULL,
     "driver calls one step may hold; a longer step\n"
     "runs eagerly"},
    {"pool-reserve-gb", OPT_INT, "CGJIT_POOL_RESERVE_GB", "N", NULL,
     "GiB of virtual address space reserved for the\n"
     "memory pool of replayed steps"},
    {"dump-allocs", OPT_TEXT, "CGJIT_DUMP_ALLOCS", "DIR", "none",
     "write each trace's allocation events to\n"
     "DIR/ANCHOR-vN.txt (the format cgjit-plan reads)"},
    {"lib", OPT_LIB, NULL, "PATH", NULL,
     "the libcgjit.so to preload; without it:\n"
     "$CGJIT_LIB, else DIR/libcgjit.so, else\n"
     "DIR/../lib/libcgjit.so (DIR: cgjit-run's folder)"},
    {"print-env", OPT_PRINT_ENV, NULL, NULL, NULL,
     "print the environment changes, NAME=VALUE one a\n"
     "line, and exit without running anything"},
    {"help", OPT_HELP, NULL, NULL, NULL, "print this help and exit"},
    {"version", OPT_VERSION, NULL, NULL, NULL, "print the version and exit"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

/* The default shown for an option's variable. */
static const char *default_text(const option_t *o)
{
    const struct tunable *t = tunable(o->var);
    if (t && t->def[0]) return t->def;
    return o->empty ? o->empty : "none";
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
            "--opt VALUE.\n"
            "\n"
            "Options:\n",
            prog_name, prog_name);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const option_t *o = &options[i];
        char head[64];
        snprintf(head, sizeof head, "%s--%s%s%s", o->kind == OPT_HELP ? "-h, " : "", o->name,
                 o->metavar ? "=" : "", o->metavar ? o->metavar : "");
        fprintf(f, "  %-22s", head);
        for (const char *s = o->doc; *s;) {
            size_t len = strcspn(s, "\n");
            fprintf(f, "%s%.*s\n", s == o->doc ? "" : "                        ", (int)len, s);
            s += len;
            if (*s == '\n') s++;
        }
        if (o->var)
            fprintf(f, "                        [%s%s, default %s]\n", o->var,
                    o->kind == OPT_FLAG ? "=1" : "", default_text(o));
    }
    fprintf(f,
            "\n"
            "Exit status: PROGRAM's; 2 for a wrong option or value, no PROGRAM, or no\n"
            "libcgjit.so; 127 when PROGRAM is not found, 126 when it cannot be executed.\n"
            "Every CGJIT_* variable: the README's Configuration section.\n");
}

/* One line naming the problem, one pointing at --help; exit status 2. */
__attribute__((format(printf, 1, 2), noreturn)) static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog_name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", prog_name);
    exit(2);
}

/* Check an option's value; returns the text to put into its variable (normalized integers). */
static const char *check_value(const option_t *o, const char *val)
{
    if (!*val) usage_error("option '--%s' needs a value", o->name);
    switch (o->kind) {
    case OPT_STEP:
        if (strcmp(val, "sync") && strcmp(val, "auto") && strcmp(val, "off"))
            usage_error("--%s: '%s' is not sync, auto or off", o->name, val);
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
    case OPT_INT: {
        const struct tunable *t = tunable(o->var);
        long min = t ? t->min : 0;
        char *end = NULL;
        errno = 0;
        long v = val[0] >= '0' && val[0] <= '9' ? strtol(val, &end, 10) : -1;
        if (!end || *end || errno || v < min)
            usage_error("--%s: '%s' is not an integer >= %ld", o->name, val, min);
        static char text[N_OPTIONS][24];
        snprintf(text[o - options], sizeof text[0], "%ld", v);
        return text[o - options];
    }
    default:
        return val;
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
            fprintf(stderr, "%s: %s: libcgjit.so '%s': %s\n", prog_name, opt_lib ? "--lib" : "CGJIT_LIB",
                    given, e == EINVAL ? "not a regular file" : strerror(e));
            exit(2);
        }
        return;
    }
    char dir[PATH_MAX];
    if (!own_dir(argv0, dir)) {
        fprintf(stderr, "%s: cannot tell which folder %s is in, so libcgjit.so is not found next to it; "
                        "give it with --lib=PATH or CGJIT_LIB\n", prog_name, prog_name);
        exit(2);
    }
    const char *sep = strcmp(dir, "/") == 0 ? "" : "/";
    char tried[2][PATH_MAX + 32];
    snprintf(tried[0], sizeof tried[0], "%s%slibcgjit.so", dir, sep);
    snprintf(tried[1], sizeof tried[1], "%s%s../lib/libcgjit.so", dir, sep);
    for (int i = 0; i < 2; i++)
        if (usable_file(tried[i], out) == 0) return;
    fprintf(stderr, "%s: libcgjit.so not found; tried %s and %s (give it with --lib=PATH or CGJIT_LIB)\n",
            prog_name, tried[0], tried[1]);
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
            if (strlen(options[j].name) == len && strncmp(options[j].name, name, len) == 0) o = &options[j];
        if (!o) usage_error("unknown option '--%.*s'", (int)len, name);
        const char *val = NULL;
        if (o->metavar) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else usage_error("option '--%s' needs a value", o->name);
            val = check_value(o, val);
        } else if (eq) {
            usage_error("option '--%s' takes no value", o->name);
        }
        switch (o->kind) {
        case OPT_HELP:
            print_help(stdout);
            return 0;
        case OPT_VERSION:
            printf("%s %s\n", prog_name, CGJ_VERSION);
            return 0;
        case OPT_PRINT_ENV:
            print_env = true;
            break;
        case OPT_LIB:
            opt_lib = val;
            break;
        case OPT_FLAG:
            values[o - options] = "1";
            break;
        default:
            values[o - options] = val;
            break;
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
        fprintf(stderr, "%s: cannot preload '%s': LD_PRELOAD cannot hold a path with ':' or ' '\n", prog_name, lib);
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
        for (size_t j = 0; j < N_OPTIONS; j++)
            if (values[j]) printf("%s=%s\n", options[j].var, values[j]);
        return fflush(stdout) == 0 ? 0 : 2;
    }

    if (setenv("LD_PRELOAD", preload, 1) != 0) {
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
    fprintf(stderr, "%s: %s: %s\n", prog_name, argv[i], strerror(e));
    return e == ENOENT || e == ENOTDIR ? 127 : 126;
}
