/*
 * test_launcher.c — cgjit-run (tools/cgjit_run.c) and preloading libcgjit.so into programs that
 * never use CUDA.
 *
 * Each test runs <build>/cgjit-run (found from this executable, <build>/tests/test_x) with
 * posix_spawn, stdin from /dev/null, stdout and stderr captured in temporary files, and an
 * environment of our own making: the inherited one without LD_PRELOAD and CGJIT_*, plus what
 * the test sets. --print-env shows what cgjit-run would set without running anything; the other
 * tests run real programs (/bin/true, /bin/sh, /bin/echo, /bin/ls) under the preload.
 *
 * In a sanitized build (ASan) the ASan runtime must come first in LD_PRELOAD of any program
 * that loads the instrumented libcgjit.so. So every LD_PRELOAD a test gives starts with the
 * ASan runtime there, and the tests that let cgjit-run put libcgjit.so first and start a
 * program skip themselves (cgjit-run itself is checked all the same).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "base/config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

TestSuite(runtime_launcher, .timeout = 60);

/* ---- paths ---- */

static const char *build_dir(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        char self[PATH_MAX], tests[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        cr_assert(k > 0);
        self[k] = '\0';
        snprintf(tests, sizeof tests, "%s/..", dirname(self));
        cr_assert(realpath(tests, dir), "%s: %s", tests, strerror(errno));
    }
    return dir;
}

static const char *launcher(void)
{
    static char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/cgjit-run", build_dir());
    cr_assert(access(path, X_OK) == 0, "%s: not built? %s", path, strerror(errno));
    return path;
}

/* The absolute name cgjit-run should put into LD_PRELOAD: <build>/libcgjit.so. */
static const char *lib_path(void)
{
    static char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/libcgjit.so", build_dir());
    cr_assert(access(path, R_OK) == 0, "%s: not built? %s", path, strerror(errno));
    return path;
}

static int find_asan(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libasan.so")) {
        snprintf(out, PATH_MAX, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

/* The value to give LD_PRELOAD for `libs`: in a sanitized build, the ASan runtime first. */
static const char *preload_value(const char *libs)
{
    static char asan[PATH_MAX];
    static char value[4][2 * PATH_MAX + 8];
    static int next;
    char *v = value[next++ % 4];
    if (SANITIZED && !asan[0]) {
        dl_iterate_phdr(find_asan, asan);
        cr_assert(asan[0], "sanitized build, but no libasan.so is loaded");
    }
    snprintf(v, sizeof value[0], "%s%s%s", SANITIZED ? asan : "", SANITIZED && *libs ? ":" : "", libs);
    return v;
}

/* Two real libraries that are harmless to preload anywhere (libc's and libm's), as a value an
 * LD_PRELOAD might already hold. */
static const char *existing_preload(void)
{
    static char v[2 * PATH_MAX + 2];
    Dl_info a, b;
    cr_assert(dladdr((void *)printf, &a) && a.dli_fname);
    cr_assert(dladdr((void *)cos, &b) && b.dli_fname);
    snprintf(v, sizeof v, "%s:%s", a.dli_fname, b.dli_fname);
    return v;
}

/* ---- running a program ---- */

typedef struct result {
    int status; /* exit status, or 128 + signal */
    char out[16384], err[16384];
} result_t;

static void slurp(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t k;
    lseek(fd, 0, SEEK_SET);
    while (len < cap - 1 && (k = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)k;
    buf[len] = '\0';
    close(fd);
}

/* BXFI_MAP too: Criterion's worker, which would make a program linked with libcriterion (the
 * fake-driver programs) take itself for one. */
static int is_managed(const char *entry)
{
    return strncmp(entry, "LD_PRELOAD=", 11) == 0 || strncmp(entry, "CGJIT_", 6) == 0 ||
           strncmp(entry, "BXFI_", 5) == 0;
}

/* Run argv[0] (a path) with argv; the environment is the inherited one less LD_PRELOAD and
 * CGJIT_*, plus `set` ("NAME=VALUE" strings, NULL-terminated; NULL: none). */
static result_t *run_env(const char *const *argv, const char *const *set)
{
    static result_t r;
    memset(&r, 0, sizeof r);
    const char *envp[1024];
    size_t n = 0;
    for (char **e = environ; *e && n < 900; e++)
        if (!is_managed(*e)) envp[n++] = *e;
    for (const char *const *s = set; s && *s; s++) envp[n++] = *s;
    envp[n] = NULL;

    char outp[] = "/tmp/cgjit-launcher-out-XXXXXX", errp[] = "/tmp/cgjit-launcher-err-XXXXXX";
    int fo = mkstemp(outp), fe = mkstemp(errp);
    cr_assert(fo >= 0 && fe >= 0);
    unlink(outp);
    unlink(errp);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    cr_assert_eq(rc, 0, "posix_spawn %s: %s", argv[0], strerror(rc));
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    slurp(fo, r.out, sizeof r.out);
    slurp(fe, r.err, sizeof r.err);
    return &r;
}

/* cgjit-run with the arguments given (NULL-terminated), environment as run_env's. */
#define LAUNCH_ENV(set, ...) run_env((const char *const[]){launcher(), __VA_ARGS__, NULL}, set)
#define LAUNCH(...) LAUNCH_ENV(NULL, __VA_ARGS__)
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A "NAME=VALUE" string that lives until the next few calls. */
static const char *env_entry(const char *name, const char *value)
{
    static char buf[8][3 * PATH_MAX];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s=%s", name, value);
    return b;
}

static void skip_if_sanitized(void)
{
    if (SANITIZED)
        cr_skip_test("sanitized build: a program with the instrumented libcgjit.so first in LD_PRELOAD "
                     "cannot start (ASan must come first)");
}

/* ---- --help, --version ---- */

static const char *default_of(const char *var)
{
#define CGJ_TEST_TEXT_INT(def) #def
#define CGJ_TEST_TEXT_BOOL(def) #def
#define CGJ_TEST_TEXT_STR(def) def
#define CGJ_TEST_DEFAULT(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    if (strcmp(var, "CGJIT_" #name) == 0) return CGJ_TEST_TEXT_##kind(def);
    CGJ_CONFIG_LIST(CGJ_TEST_DEFAULT)
#undef CGJ_TEST_DEFAULT
    cr_assert_fail("%s is not in base/config.h", var);
    return NULL;
}

Test(runtime_launcher, help_documents_every_option)
{
    result_t *r = LAUNCH("--help");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->err, "");
    cr_assert(strncmp(r->out, "usage: cgjit-run [OPTIONS] [--] PROGRAM [ARGS...]\n", 50) == 0, "%s", r->out);
    static const char *const names[] = {
        "--step=MODE",         "--log=CATS",        "--log-file=FILE",  "--report[=json:FILE]",
        "--disable",           "--max-records=N",   "--max-variants=N", "--max-ops=N",
        "--pool-reserve-gb=N", "--dump-allocs=DIR", "--chunk-ops=N",    "--libs=0|1",
        "--lib=PATH",          "--print-env",       "--config-table",   "-h, --help",
        "--version",           "LD_PRELOAD",        "CGJIT_LIB"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_expect(strstr(r->out, names[i]), "--help does not mention %s", names[i]);
    /* the step modes, each explained */
    cr_expect(strstr(r->out, "  sync  a step is the work between two host"));
    cr_expect(strstr(r->out, "  auto  detect the repeating cycle of driver"));
    cr_expect(strstr(r->out, "  off   record nothing"));
    cr_expect(strstr(r->out, "markers in the code take precedence"));
    /* each option's variable and its default: the library's (base/config.h) where it has one */
    static const struct {
        const char *var, *shown;
    } vars[] = {
        {"CGJIT_STEP", "sync"},        {"CGJIT_LOG", "none"},     {"CGJIT_LOG_FILE", "stderr"},
        {"CGJIT_REPORT=1", NULL},      {"CGJIT_DISABLE=1", NULL}, {"CGJIT_MAX_RECORDS", NULL},
        {"CGJIT_MAX_VARIANTS", NULL},  {"CGJIT_MAX_OPS", NULL},   {"CGJIT_POOL_RESERVE_GB", NULL},
        {"CGJIT_DUMP_ALLOCS", "none"}, {"CGJIT_CHUNK_OPS", NULL}, {"CGJIT_LIBS", NULL},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        char name[64], want[128];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(vars[i].var, "="), vars[i].var);
        const char *def = vars[i].shown && !default_of(name)[0] ? vars[i].shown : default_of(name);
        snprintf(want, sizeof want, "[%s, default %s]\n", vars[i].var, def);
        cr_expect(strstr(r->out, want), "--help lacks '%s'", want);
    }
    /* no line wider than 80 columns */
    for (const char *s = r->out; *s;) {
        size_t len = strcspn(s, "\n");
        cr_expect(len <= 80, "--help line of %zu columns: %.*s", len, (int)len, s);
        s += len + (s[len] == '\n');
    }
    char out[sizeof r->out];
    strcpy(out, r->out);
    r = LAUNCH("-h");
    cr_assert_eq(r->status, 0);
    cr_assert_str_eq(r->out, out);
    r = LAUNCH("--report", "--help", "/bin/false"); /* --help anywhere among the options */
    cr_assert_eq(r->status, 0);
    cr_assert_str_eq(r->out, out);
}

/* Every option of --help: "  --name=METAVAR", two spaces or more, its description at one column
 * for all; the lines that go on with it start there or further in. No option runs into its text. */
Test(runtime_launcher, help_aligns_every_option)
{
    const char *s = strstr(LAUNCH("--help")->out, "\nOptions:\n");
    cr_assert_not_null(s);
    size_t options = 0, column = 0;
    for (s += 10; *s && *s != '\n'; s += strcspn(s, "\n") + 1) { /* up to the blank line after them */
        int len = (int)strcspn(s, "\n");
        size_t lead = strspn(s, " "), at = lead;
        if (lead == 2 && s[2] == '-') {
            const char *gap = strstr(s + 2, "  ");
            cr_assert(gap && gap < s + len, "an option without its description: %.*s", len, s);
            at = (size_t)(gap - s) + strspn(gap, " ");
            column = column ? column : at;
            cr_expect_eq(at, column, "description at column %zu, not %zu: %.*s", at, column, len, s);
            options++;
        }
        cr_expect(column && at >= column && at < (size_t)len, "left of column %zu: %.*s", column, len, s);
    }
    size_t want = 6; /* --lib, --print-env, --config-table, --help, --version, --man */
#define CGJ_TEST_COUNT(name, kind, def, min, max, opt, optkind, metavar, shown, doc) want += opt != NULL;
    CGJ_CONFIG_LIST(CGJ_TEST_COUNT)
#undef CGJ_TEST_COUNT
    cr_assert_eq(options, want, "%zu option lines, %zu options", options, want);
}

/* docs/configuration.md's table is exactly what the launcher prints from base/config.h. */
Test(runtime_launcher, the_configuration_page_holds_the_table)
{
    result_t *r = LAUNCH("--config-table");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert(strncmp(r->out, "| variable | option | default | meaning |\n", 42) == 0, "%s", r->out);
#define CGJ_TEST_ROW(name, kind, def, min, max, opt, optkind, metavar, shown, doc) \
    cr_expect(strstr(r->out, "| `CGJIT_" #name "` |"), "no row for CGJIT_" #name);
    CGJ_CONFIG_LIST(CGJ_TEST_ROW)
#undef CGJ_TEST_ROW
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/tests/configuration.md", build_dir());
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s: docs/configuration.md is copied next to the tests at build time", path);
    static char page[1 << 17];
    size_t n = fread(page, 1, sizeof page - 1, f);
    fclose(f);
    page[n] = '\0';
    cr_assert(strstr(page, r->out), "docs/configuration.md's table differs from `cgjit-run --config-table`:\n%s",
              r->out);
}

Test(runtime_launcher, version)
{
    result_t *r = LAUNCH("--version");
    cr_assert_eq(r->status, 0);
    cr_assert_str_eq(r->out, "cgjit-run 0.1.0\n");
    cr_assert_str_eq(r->err, "");
}

/* ---- --print-env ---- */

Test(runtime_launcher, print_env_preload_only)
{
    result_t *r = LAUNCH("--print-env");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->err, "");
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "LD_PRELOAD=%s\n", lib_path());
    cr_assert_str_eq(r->out, want);
    /* absolute, and named libcgjit.so (not the versioned file the link points to) */
    cr_assert_eq(r->out[11], '/');
    cr_assert(strstr(r->out, "/libcgjit.so\n"));
    /* a PROGRAM after --print-env is not run */
    r = LAUNCH("--print-env", "/bin/sh", "-c", "echo ran; exit 9");
    cr_assert_eq(r->status, 0);
    cr_assert_str_eq(r->out, want);
}

Test(runtime_launcher, print_env_prepends_to_existing_preload)
{
    const char *old = preload_value(existing_preload());
    result_t *r = LAUNCH_ENV(ENV(env_entry("LD_PRELOAD", old)), "--print-env");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->err, "");
    char want[3 * PATH_MAX];
    snprintf(want, sizeof want, "LD_PRELOAD=%s:%s\n", lib_path(), old);
    cr_assert_str_eq(r->out, want);
    /* an empty LD_PRELOAD is not kept as an empty element */
    if (!SANITIZED) {
        r = LAUNCH_ENV(ENV("LD_PRELOAD="), "--print-env");
        snprintf(want, sizeof want, "LD_PRELOAD=%s\n", lib_path());
        cr_assert_str_eq(r->out, want);
    }
}

static void expect_env(result_t *r, const char *vars)
{
    char want[2 * PATH_MAX + 1024];
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->err, "");
    snprintf(want, sizeof want, "LD_PRELOAD=%s\n%s", lib_path(), vars);
    cr_assert_str_eq(r->out, want);
}

Test(runtime_launcher, print_env_every_option)
{
    static const char all[] = "CGJIT_STEP=auto\n"
                              "CGJIT_LOG=trace,guards\n"
                              "CGJIT_LOG_FILE=/tmp/cgjit.log\n"
                              "CGJIT_REPORT=1\n"
                              "CGJIT_DISABLE=1\n"
                              "CGJIT_MAX_RECORDS=7\n"
                              "CGJIT_MAX_VARIANTS=2\n"
                              "CGJIT_MAX_OPS=500\n"
                              "CGJIT_POOL_RESERVE_GB=8\n"
                              "CGJIT_DUMP_ALLOCS=/tmp/allocs\n";
    expect_env(LAUNCH("--step=auto", "--log=trace,guards", "--log-file=/tmp/cgjit.log", "--report", "--disable",
                      "--max-records=7", "--max-variants=2", "--max-ops=500", "--pool-reserve-gb=8",
                      "--dump-allocs=/tmp/allocs", "--print-env"),
               all);
    /* the same with the value as the next argument, in another order */
    expect_env(LAUNCH("--print-env", "--dump-allocs", "/tmp/allocs", "--pool-reserve-gb", "8", "--max-ops", "500",
                      "--max-variants", "2", "--max-records", "7", "--disable", "--report", "--log-file",
                      "/tmp/cgjit.log", "--log", "trace,guards", "--step", "auto"),
               all);
}

Test(runtime_launcher, print_env_each_option_alone)
{
    expect_env(LAUNCH("--print-env", "--step=sync"), "CGJIT_STEP=sync\n");
    expect_env(LAUNCH("--print-env", "--step=auto"), "CGJIT_STEP=auto\n");
    expect_env(LAUNCH("--print-env", "--step", "off"), "CGJIT_STEP=off\n");
    expect_env(LAUNCH("--print-env", "--log=all"), "CGJIT_LOG=all\n");
    expect_env(LAUNCH("--print-env", "--log", "graphs,blacklist,interpose,api,breaks"),
               "CGJIT_LOG=graphs,blacklist,interpose,api,breaks\n");
    expect_env(LAUNCH("--print-env", "--log-file", "run.log"), "CGJIT_LOG_FILE=run.log\n");
    expect_env(LAUNCH("--print-env", "--report"), "CGJIT_REPORT=1\n");
    expect_env(LAUNCH("--print-env", "--disable"), "CGJIT_DISABLE=1\n");
    expect_env(LAUNCH("--print-env", "--max-records=1"), "CGJIT_MAX_RECORDS=1\n");
    expect_env(LAUNCH("--print-env", "--max-variants=16"), "CGJIT_MAX_VARIANTS=16\n");
    expect_env(LAUNCH("--print-env", "--max-ops=16"), "CGJIT_MAX_OPS=16\n");
    expect_env(LAUNCH("--print-env", "--max-ops=0100"), "CGJIT_MAX_OPS=100\n"); /* normalized */
    expect_env(LAUNCH("--print-env", "--pool-reserve-gb=1"), "CGJIT_POOL_RESERVE_GB=1\n");
    expect_env(LAUNCH("--print-env", "--dump-allocs", "dumps"), "CGJIT_DUMP_ALLOCS=dumps\n");
    /* the last of a repeated option wins */
    expect_env(LAUNCH("--print-env", "--max-ops=100", "--max-ops=200", "--step=off", "--step=auto"),
               "CGJIT_STEP=auto\nCGJIT_MAX_OPS=200\n");
}

/* ---- finding libcgjit.so ---- */

static char *temp_dir(void)
{
    static char dirs[4][64];
    static int next;
    char *d = dirs[next++ % 4];
    strcpy(d, "/tmp/cgjit-launcher-XXXXXX");
    cr_assert(mkdtemp(d));
    return d;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    close(fd);
}

static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    cr_assert(in >= 0 && out >= 0, "%s -> %s: %s", from, to, strerror(errno));
    char buf[65536];
    ssize_t k;
    while ((k = read(in, buf, sizeof buf)) > 0) cr_assert_eq(write(out, buf, (size_t)k), k);
    close(in);
    close(out);
}

static void remove_tree(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

Test(runtime_launcher, lib_option_and_environment)
{
    char *d = temp_dir();
    char link[PATH_MAX], other[PATH_MAX + 32], want[2 * PATH_MAX];
    /* --lib through a symbolic link to a folder: the folder is resolved, the name is kept */
    snprintf(link, sizeof link, "%s/build-link", d);
    cr_assert_eq(symlink(build_dir(), link), 0);
    snprintf(other, sizeof other, "%s/libcgjit.so", link);
    result_t *r = LAUNCH("--print-env", "--lib", other);
    snprintf(want, sizeof want, "LD_PRELOAD=%s\n", lib_path());
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, want);
    /* CGJIT_LIB is used without --lib; --lib wins over it */
    snprintf(other, sizeof other, "%s/libcgjit-other.so", d);
    touch(other);
    r = LAUNCH_ENV(ENV(env_entry("CGJIT_LIB", other)), "--print-env");
    snprintf(want, sizeof want, "LD_PRELOAD=%s\n", other);
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, want);
    r = LAUNCH_ENV(ENV(env_entry("CGJIT_LIB", other)), "--print-env", "--lib=/dev/null/x");
    cr_assert_eq(r->status, 2);
    r = LAUNCH_ENV(ENV(env_entry("CGJIT_LIB", "/nonexistent/libcgjit.so")), "--print-env", "--lib", other);
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, want);
    remove_tree(d);
}

Test(runtime_launcher, lib_missing)
{
    result_t *r = LAUNCH("--lib=/nonexistent/libcgjit.so", "/bin/true");
    cr_assert_eq(r->status, 2);
    cr_assert_str_eq(r->out, "");
    cr_assert(strstr(r->err, "--lib") && strstr(r->err, "/nonexistent/libcgjit.so"), "%s", r->err);
    r = LAUNCH_ENV(ENV("CGJIT_LIB=/nonexistent/libcgjit.so"), "--print-env");
    cr_assert_eq(r->status, 2);
    cr_assert(strstr(r->err, "CGJIT_LIB") && strstr(r->err, "/nonexistent/libcgjit.so"), "%s", r->err);
    r = LAUNCH("--lib=/tmp", "--print-env"); /* a folder */
    cr_assert_eq(r->status, 2);
    cr_assert(strstr(r->err, "--lib") && strstr(r->err, "/tmp"), "%s", r->err);
    r = LAUNCH("--lib=", "--print-env");
    cr_assert_eq(r->status, 2);
    cr_assert(strstr(r->err, "--lib"), "%s", r->err);
}

Test(runtime_launcher, lib_next_to_the_launcher)
{
    /* a copy of cgjit-run in D/bin: D/bin/libcgjit.so, else D/lib/libcgjit.so, else an error
     * naming both */
    char *d = temp_dir();
    char bin[PATH_MAX], lib[PATH_MAX], tool[PATH_MAX + 16], in_bin[PATH_MAX + 16], in_lib[PATH_MAX + 16];
    char want[2 * PATH_MAX];
    snprintf(bin, sizeof bin, "%s/bin", d);
    snprintf(lib, sizeof lib, "%s/lib", d);
    cr_assert_eq(mkdir(bin, 0755), 0);
    cr_assert_eq(mkdir(lib, 0755), 0);
    snprintf(tool, sizeof tool, "%s/cgjit-run", bin);
    copy_file(launcher(), tool);
    snprintf(in_bin, sizeof in_bin, "%s/libcgjit.so", bin);
    snprintf(in_lib, sizeof in_lib, "%s/libcgjit.so", lib);

    result_t *r = run_env(ENV(tool, "--print-env"), NULL);
    cr_assert_eq(r->status, 2);
    cr_assert_str_eq(r->out, "");
    snprintf(want, sizeof want, "%s/libcgjit.so", bin);
    cr_assert(strstr(r->err, want), "%s", r->err);
    snprintf(want, sizeof want, "%s/../lib/libcgjit.so", bin);
    cr_assert(strstr(r->err, want), "%s", r->err);
    cr_assert(strstr(r->err, "not found"), "%s", r->err);
    r = run_env(ENV(tool, "/bin/true"), NULL); /* the same when a program would run */
    cr_assert_eq(r->status, 2);

    touch(in_lib);
    r = run_env(ENV(tool, "--print-env"), NULL);
    snprintf(want, sizeof want, "LD_PRELOAD=%s\n", in_lib); /* D/lib, not D/bin/../lib */
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, want);

    touch(in_bin);
    r = run_env(ENV(tool, "--print-env"), NULL);
    snprintf(want, sizeof want, "LD_PRELOAD=%s\n", in_bin);
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, want);
    remove_tree(d);
}

/* ---- errors ---- */

/* cgjit-run with these arguments exits 2 with nothing on stdout, and stderr names `what` on
 * its first line and points at --help on its second. */
static void expect_error(const char *what, const char *const *args)
{
    const char *argv[16] = {launcher()};
    size_t n = 1;
    for (; args[n - 1]; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    result_t *r = run_env(argv, NULL);
    char shown[256] = "";
    for (size_t i = 1; i < n; i++) {
        strncat(shown, " ", sizeof shown - strlen(shown) - 1);
        strncat(shown, argv[i], sizeof shown - strlen(shown) - 1);
    }
    cr_expect_eq(r->status, 2, "cgjit-run%s: status %d", shown, r->status);
    cr_expect_str_eq(r->out, "", "cgjit-run%s", shown);
    size_t first = strcspn(r->err, "\n");
    cr_expect(strncmp(r->err, "cgjit-run: ", 11) == 0, "cgjit-run%s: %s", shown, r->err);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)first, r->err);
    cr_expect(strstr(line, what), "cgjit-run%s: first line does not name '%s': %s", shown, what, r->err);
    cr_expect_str_eq(r->err + first, "\nTry 'cgjit-run --help' for more information.\n", "cgjit-run%s: %s", shown,
                     r->err);
}

#define EXPECT_ERROR(what, ...) expect_error(what, ENV(__VA_ARGS__))

Test(runtime_launcher, bad_values)
{
    EXPECT_ERROR("--step", "--step=fast", "/bin/true");
    EXPECT_ERROR("fast", "--step=fast", "/bin/true");
    EXPECT_ERROR("--step", "--step=SYNC", "/bin/true");
    EXPECT_ERROR("--step", "--step", "/bin/true"); /* /bin/true is taken as the value */
    EXPECT_ERROR("--max-ops", "--max-ops=abc", "/bin/true");
    EXPECT_ERROR("--max-ops", "--max-ops", "12abc", "/bin/true");
    EXPECT_ERROR("--max-ops", "--max-ops=15", "/bin/true"); /* below the library's minimum */
    EXPECT_ERROR("--max-ops", "--max-ops=-5", "/bin/true");
    EXPECT_ERROR("--max-ops", "--max-ops= 20", "/bin/true");
    EXPECT_ERROR("--max-ops", "--max-ops=99999999999999999999999", "/bin/true");
    EXPECT_ERROR("--max-records", "--max-records=0", "/bin/true");
    EXPECT_ERROR("--max-variants", "--max-variants=two", "/bin/true");
    EXPECT_ERROR("--pool-reserve-gb", "--pool-reserve-gb=1.5", "/bin/true");
    EXPECT_ERROR("--pool-reserve-gb", "--pool-reserve-gb=0", "/bin/true");
    EXPECT_ERROR("--log", "--log=trace,bogus", "/bin/true");
    EXPECT_ERROR("bogus", "--log=trace,bogus", "/bin/true");
    EXPECT_ERROR("--report", "--report=xml:r.xml", "/bin/true");
    EXPECT_ERROR("--report", "--report=json:", "/bin/true");
    EXPECT_ERROR("--report", "--report=", "/bin/true");
}

/* An integer out of range: the message gives both bounds, however large the upper one. */
Test(runtime_launcher, integer_errors_give_the_range)
{
    EXPECT_ERROR("'4294967296' is not an integer from 16 to 4294967295", "--max-ops=4294967296", "/bin/true");
    EXPECT_ERROR("'15' is not an integer from 16 to 4294967295", "--max-ops=15", "/bin/true");
    EXPECT_ERROR("'0' is not an integer from 1 to 1048576", "--pool-reserve-gb=0", "/bin/true");
    EXPECT_ERROR("from 0 to 86400", "--report-every-s=-1", "/bin/true");
}

/* What the user gave comes back escaped (controls, bytes of no UTF-8): one line, nothing raw. */
Test(runtime_launcher, errors_show_values_escaped)
{
    EXPECT_ERROR("--step: '\\x1b[2J\\nx\\xff' is not sync, auto or off", "--step=\x1b[2J\nx\xff", "/bin/true");
    EXPECT_ERROR("unknown option '--a\\rb'", "--a\rb", "/bin/true");
    result_t *r = LAUNCH("/nonexistent/a\x1b]0;b\x07");
    cr_assert_eq(r->status, 127, "%s", r->err);
    cr_assert_str_eq(r->err, "cgjit-run: /nonexistent/a\\x1b]0;b\\x07: No such file or directory\n");
}

/* --report alone sets 1; --report=VALUE takes any form CGJIT_REPORT takes (json:FILE as --help
 * says), only after '=': a separate argument is the program. */
Test(runtime_launcher, report_takes_a_value_after_equals)
{
    expect_env(LAUNCH("--print-env", "--report=json:r-%p.json"), "CGJIT_REPORT=json:r-%p.json\n");
    expect_env(LAUNCH("--print-env", "--report=text:/dev/stderr"), "CGJIT_REPORT=text:/dev/stderr\n");
    expect_env(LAUNCH("--print-env", "--report=0"), "CGJIT_REPORT=0\n");
    expect_env(LAUNCH("--print-env", "--report"), "CGJIT_REPORT=1\n");
    expect_env(LAUNCH("--print-env", "--report", "json:x"), "CGJIT_REPORT=1\n"); /* json:x is PROGRAM */
    result_t *r = LAUNCH("--help");
    cr_assert(strstr(r->out, "  --report[=json:FILE]  "), "%s", r->out);
}

Test(runtime_launcher, missing_values)
{
    static const char *const with_value[] = {"--step",         "--log",     "--log-file",        "--max-records",
                                             "--max-variants", "--max-ops", "--pool-reserve-gb", "--dump-allocs",
                                             "--lib"};
    for (size_t i = 0; i < sizeof with_value / sizeof with_value[0]; i++) {
        char eq[64];
        snprintf(eq, sizeof eq, "%s=", with_value[i]);
        EXPECT_ERROR(with_value[i], with_value[i]);   /* last argument: no value */
        EXPECT_ERROR(with_value[i], eq, "/bin/true"); /* empty value */
        EXPECT_ERROR(with_value[i], "--report", with_value[i]);
    }
}

Test(runtime_launcher, unknown_options_and_values_where_none_is_taken)
{
    EXPECT_ERROR("--frobnicate", "--frobnicate", "/bin/true");
    EXPECT_ERROR("--frobnicate", "--frobnicate=3", "/bin/true");
    EXPECT_ERROR("-x", "-x", "/bin/true");
    EXPECT_ERROR("--ste", "--ste=sync", "/bin/true"); /* no abbreviations */
    EXPECT_ERROR("--disable", "--disable=yes", "/bin/true");
    EXPECT_ERROR("--print-env", "--print-env=1");
    EXPECT_ERROR("--help", "--help=x");
    EXPECT_ERROR("--version", "--version=2");
}

Test(runtime_launcher, no_program)
{
    const char *const *cases[] = {ENV(NULL), ENV("--"), ENV("--report"), ENV("--step=off", "--")};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[8] = {launcher()};
        for (size_t j = 0; cases[i][j]; j++) argv[j + 1] = cases[i][j];
        result_t *r = run_env(argv, NULL);
        cr_expect_eq(r->status, 2, "case %zu", i);
        cr_expect_str_eq(r->out, "");
        cr_expect(strncmp(r->err, "usage: cgjit-run [OPTIONS] [--] PROGRAM [ARGS...]\n", 50) == 0, "%s", r->err);
        cr_expect(strstr(r->err, "no PROGRAM"), "%s", r->err);
    }
}

/* ---- running programs ---- */

Test(runtime_launcher, exit_status_of_the_program)
{
    skip_if_sanitized();
    result_t *r = LAUNCH("--", "/bin/true");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, "");
    cr_assert_str_eq(r->err, "");
    r = LAUNCH("/bin/true"); /* without -- */
    cr_assert_eq(r->status, 0, "%s", r->err);
    r = LAUNCH("--", "/bin/false");
    cr_assert_eq(r->status, 1);
    r = LAUNCH("--", "/bin/sh", "-c", "exit 3");
    cr_assert_eq(r->status, 3, "%s", r->err);
    cr_assert_str_eq(r->err, "");
    r = LAUNCH("--report", "--step=off", "/bin/sh", "-c", "exit 42");
    cr_assert_eq(r->status, 42, "%s", r->err);
    r = LAUNCH("/bin/sh", "-c", "kill -TERM $$"); /* cgjit-run became the program: its signal shows */
    cr_assert_eq(r->status, 128 + SIGTERM);
    r = LAUNCH("true"); /* searched in PATH */
    cr_assert_eq(r->status, 0, "%s", r->err);
}

Test(runtime_launcher, output_unchanged)
{
    skip_if_sanitized();
    result_t *r = LAUNCH("--", "/bin/echo", "hello", "world");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, "hello world\n");
    cr_assert_str_eq(r->err, "");
    /* options end at the first non-option; what follows is the program's, -- included */
    r = LAUNCH("/bin/echo", "--step=fast", "--report");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, "--step=fast --report\n");
    r = LAUNCH("--", "/bin/echo", "--", "x");
    cr_assert_str_eq(r->out, "-- x\n");
    r = LAUNCH("--step", "auto", "/bin/echo", "--", "--help");
    cr_assert_str_eq(r->out, "-- --help\n");
}

Test(runtime_launcher, program_not_executable)
{
    result_t *r = LAUNCH("--", "/nonexistent");
    cr_assert_eq(r->status, 127);
    cr_assert_str_eq(r->out, "");
    cr_assert(strstr(r->err, "/nonexistent") && strstr(r->err, "No such file"), "%s", r->err);
    r = LAUNCH("cgjit-no-such-program-in-path");
    cr_assert_eq(r->status, 127);
    cr_assert(strstr(r->err, "cgjit-no-such-program-in-path"), "%s", r->err);
    /* found, but not executable: 126, as a shell */
    char *d = temp_dir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/not-executable", d);
    touch(path);
    r = LAUNCH(path);
    cr_assert_eq(r->status, 126, "%s", r->err);
    cr_assert(strstr(r->err, path), "%s", r->err);
    r = LAUNCH("--", d); /* a folder */
    cr_assert_eq(r->status, 126, "%s", r->err);
    remove_tree(d);
}

Test(runtime_launcher, environment_seen_by_the_program)
{
    skip_if_sanitized();
    char want[3 * PATH_MAX];
    result_t *r = LAUNCH("/bin/sh", "-c", "echo \"$LD_PRELOAD\"");
    cr_assert_eq(r->status, 0, "%s", r->err);
    snprintf(want, sizeof want, "%s\n", lib_path());
    cr_assert_str_eq(r->out, want);
    cr_assert_str_eq(r->err, "");

    const char *old = existing_preload();
    r = LAUNCH_ENV(ENV(env_entry("LD_PRELOAD", old)), "/bin/sh", "-c", "echo \"$LD_PRELOAD\"");
    cr_assert_eq(r->status, 0, "%s", r->err);
    snprintf(want, sizeof want, "%s:%s\n", lib_path(), old);
    cr_assert_str_eq(r->out, want);
    cr_assert_str_eq(r->err, "");

    /* options set their variables; CGJIT_* already set pass through; an option overrides */
    r = LAUNCH_ENV(ENV("CGJIT_MAX_RECORDS=9", "CGJIT_MAX_OPS=5000"), "--step=auto", "--max-ops", "300",
                   "--log-file=/dev/null", "/bin/sh", "-c",
                   "echo \"$CGJIT_STEP $CGJIT_MAX_OPS $CGJIT_MAX_RECORDS $CGJIT_LOG_FILE ${CGJIT_REPORT-unset}\"");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_eq(r->out, "auto 300 9 /dev/null unset\n");
}

/* Output paths that are no regular file but say where output goes: /dev/stdout and /dev/stderr
 * (links to /proc/self/fd/N) and /dev/null are taken, without a warning. */
Test(runtime_launcher, standard_streams_as_output_paths)
{
    skip_if_sanitized();
    char app[PATH_MAX + 32];
    snprintf(app, sizeof app, "%s/tests/report_app", build_dir());
    result_t *r = LAUNCH("--report=json:/dev/stdout", "--trace-file=/dev/null", "--log-file=/dev/stderr", "--log=api",
                         app, "marked", "5");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert(strncmp(r->out, "{\"schema_version\":1,", 20) == 0, "the JSON report on stdout: %s", r->out);
    cr_assert_null(strstr(r->err, "warning"), "%s", r->err);
    r = LAUNCH("--report=text:/dev/stderr", "--log-file=/dev/null", app, "marked", "5");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert(strstr(r->err, "cgjit report\n") && strstr(r->err, "anchor 'train'"), "%s", r->err);
    cr_assert_null(strstr(r->err, "warning"), "%s", r->err);
    r = LAUNCH("--report", "--log-file=/dev/stderr", app, "marked", "5");
    cr_assert(strstr(r->err, "cgjit report\n"), "%s", r->err);
    cr_assert_null(strstr(r->err, "warning"), "%s", r->err);
}

/* ---- preloading libcgjit.so directly, without the launcher ---- */

Test(runtime_launcher, direct_preload_of_programs_without_cuda)
{
    const char *preload = env_entry("LD_PRELOAD", preload_value(lib_path()));
    const char *const *programs[] = {
        (const char *const[]){"/bin/true", NULL},
        (const char *const[]){"/bin/ls", "/", NULL},
        (const char *const[]){"/bin/echo", "hello", "world", NULL},
        (const char *const[]){"/bin/sh", "-c", "echo $((6 * 7)); ls / >/dev/null; exit 5", NULL},
    };
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        const char *const *argv = programs[i];
        result_t *plain = run_env(argv, NULL);
        int status = plain->status;
        char out[sizeof plain->out], err[sizeof plain->err];
        strcpy(out, plain->out);
        strcpy(err, plain->err);
        result_t *pre = run_env(argv, ENV(preload));
        cr_expect_eq(pre->status, status, "%s: %d with the preload, %d without", argv[0], pre->status, status);
        cr_expect_str_eq(pre->out, out, "%s: stdout differs with the preload", argv[0]);
        cr_expect_str_eq(pre->err, err, "%s: stderr differs with the preload: %s", argv[0], pre->err);
        /* and with CGJIT_* set as cgjit-run would set them */
        pre = run_env(argv, ENV(preload, "CGJIT_STEP=auto", "CGJIT_REPORT=1", "CGJIT_LOG=all"));
        cr_expect_eq(pre->status, status, "%s", argv[0]);
        cr_expect_str_eq(pre->out, out, "%s", argv[0]);
        cr_expect_str_eq(pre->err, err, "%s: %s", argv[0], pre->err);
    }
    result_t *r = run_env(ENV("/bin/true"), ENV(preload));
    cr_assert_eq(r->status, 0);
    r = run_env(ENV("/bin/ls", "/"), ENV(preload));
    cr_assert_eq(r->status, 0);
    cr_assert_neq(r->out[0], '\0');
}
