/*
 * test_plan_tool.c — cgjit-plan (tools/cgjit_plan.c), run as a user runs it: the figures of a
 * trace from a file or standard input, its messages and exit status, and the inputs it refuses
 * at once (a FIFO, a device, a folder, a file over its bound) or reads only up to its bound
 * (standard input without end).
 *
 * Each run is a child process with stdin from a file (or /dev/null) and stdout and stderr in
 * temporary files. No verdict depends on time: an input is refused for what it is, so a FIFO
 * without a writer is refused whether a writer would ever come or not.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(tools_plan);

/* <build>/cgjit-plan, from <build>/tests/this-executable */
static const char *tool_path(void)
{
    static char path[PATH_MAX];
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(k > 0);
    self[k] = '\0';
    snprintf(path, sizeof path, "%s/../cgjit-plan", dirname(self));
    cr_assert(access(path, X_OK) == 0, "%s: not built? %s", path, strerror(errno));
    return path;
}

typedef struct run {
    int status;
    char out[8192], err[8192];
} run_t;

static void slurp(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t k;
    while ((k = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)k;
    buf[len] = '\0';
    close(fd);
}

/* Run cgjit-plan with up to two arguments (NULL: fewer), stdin from a file or /dev/null. */
static run_t run_tool(const char *a1, const char *a2, const char *stdin_path)
{
    static run_t r;
    memset(&r, 0, sizeof r);
    char outp[] = "/tmp/cgjit-plan-out-XXXXXX", errp[] = "/tmp/cgjit-plan-err-XXXXXX";
    int fo = mkstemp(outp), fe = mkstemp(errp);
    cr_assert(fo >= 0 && fe >= 0);
    const char *tool = tool_path();
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fi = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        dup2(fi, 0), dup2(fo, 1), dup2(fe, 2);
        execl(tool, "cgjit-plan", a1, a2, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    lseek(fo, 0, SEEK_SET), lseek(fe, 0, SEEK_SET);
    slurp(fo, r.out, sizeof r.out);
    slurp(fe, r.err, sizeof r.err);
    unlink(outp), unlink(errp);
    return r;
}

static char *temp_file(const char *content)
{
    static char paths[8][64];
    static int next;
    char *p = paths[next++ % 8];
    strcpy(p, "/tmp/cgjit-plan-in-XXXXXX");
    int fd = mkstemp(p);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    return p;
}

Test(tools_plan, good_file)
{
    /* x and y live together (512 + 1024), then z (768) reuses x's bytes and the gap */
    char *in = temp_file("a x 300\na y 1000\nf x\na z 700\nf y\nf z\n");
    run_t r = run_tool(in, NULL, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "naive bytes:      2304\n"
                            "planned bytes:    1792\n"
                            "lower bound:      1792\n"
                            "planned/lower:    1.0000\n"
                            "heuristic:        greedy-by-size\n");
    cr_assert_str_eq(r.err, "");
    run_t s = run_tool("-", NULL, in); /* the same from stdin */
    cr_assert_eq(s.status, 0);
    cr_assert_str_eq(s.out, r.out);
    unlink(in);
}

Test(tools_plan, empty_trace)
{
    char *in = temp_file("# no events\n");
    run_t r = run_tool(in, NULL, NULL);
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "naive bytes:      0\n"
                            "planned bytes:    0\n"
                            "lower bound:      0\n"
                            "planned/lower:    1.0000\n"
                            "heuristic:        none\n");
    unlink(in);
}

Test(tools_plan, bad_input)
{
    char *in = temp_file("a x 10\nf x\n\nf x\n");
    run_t r = run_tool(in, NULL, NULL);
    char want[256];
    snprintf(want, sizeof want, "cgjit-plan: %s:4: double free of 'x' (freed on line 2)\n", in);
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, want);
    cr_assert_str_eq(r.out, "");
    unlink(in);
    in = temp_file("a x ten\n");
    r = run_tool("-", NULL, in);
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, "cgjit-plan: <stdin>:1: size is not a number: 'ten'\n");
    unlink(in);
}

Test(tools_plan, usage_and_unreadable)
{
    run_t r = run_tool(NULL, NULL, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strncmp(r.err, "usage: cgjit-plan FILE", 22) == 0, "%s", r.err);
    r = run_tool("a", "b", NULL);
    cr_assert_eq(r.status, 2);
    r = run_tool("--bogus", NULL, NULL);
    cr_assert_eq(r.status, 2);
    r = run_tool("--help", NULL, NULL);
    cr_assert_eq(r.status, 0);
    cr_assert(strncmp(r.out, "usage: cgjit-plan FILE", 22) == 0);
    r = run_tool("/nonexistent/trace.txt", NULL, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, "cgjit-plan: /nonexistent/trace.txt: No such file or directory\n");
    r = run_tool("/tmp", NULL, NULL);
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, "cgjit-plan: /tmp: not a regular file\n");
}

/* ---- inputs that are no regular file, or too large ---- */

#define INPUT_MAX (256u << 20)

/* cgjit-plan FILE exits 2 at once with the one line "cgjit-plan: FILE: why". */
static void expect_refused(const char *file, const char *why)
{
    run_t r = run_tool(file, NULL, NULL);
    char want[512];
    snprintf(want, sizeof want, "cgjit-plan: %s: %s\n", file, why);
    cr_assert_eq(r.status, 2, "%s: status %d", file, r.status);
    cr_assert_str_eq(r.err, want);
    cr_assert_str_eq(r.out, "");
}

Test(tools_plan, a_fifo_a_device_or_a_folder_is_refused)
{
    char dir[] = "/tmp/cgjit-plan-dir-XXXXXX", fifo[64];
    cr_assert(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/trace", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_refused(fifo, "not a regular file"); /* no writer: an open that waits would hang */
    expect_refused("/dev/zero", "not a regular file");
    expect_refused("/dev/urandom", "not a regular file");
    expect_refused(dir, "not a regular file");
    unlink(fifo), rmdir(dir);
}

Test(tools_plan, a_file_over_the_bound_is_refused_before_it_is_read)
{
    char *in = temp_file("a x 300\nf x\n");
    cr_assert_eq(truncate(in, (off_t)INPUT_MAX + 1), 0); /* sparse: costs no disk */
    char why[64];
    snprintf(why, sizeof why, "larger than %u bytes", INPUT_MAX);
    expect_refused(in, why);
    unlink(in);
}

/* Standard input may be a pipe or a device: it is read up to the same bound, never without end. */
Test(tools_plan, standard_input_is_read_up_to_the_bound)
{
    run_t r = run_tool("-", NULL, "/dev/zero");
    char want[128];
    snprintf(want, sizeof want, "cgjit-plan: <stdin>: larger than %u bytes\n", INPUT_MAX);
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, want);
}

/* A file's name is shown escaped, as the parser shows the tokens. */
Test(tools_plan, the_file_name_is_shown_escaped)
{
    char dir[] = "/tmp/cgjit-plan-dir-XXXXXX", name[96];
    cr_assert(mkdtemp(dir));
    snprintf(name, sizeof name, "%s/t\x1b[2J\xff.txt", dir);
    FILE *f = fopen(name, "w");
    cr_assert(f);
    fputs("f x\n", f);
    fclose(f);
    run_t r = run_tool(name, NULL, NULL);
    char want[192];
    snprintf(want, sizeof want, "cgjit-plan: %s/t\\x1b[2J\\xff.txt:1: free of unknown ID 'x'\n", dir);
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, want);
    unlink(name), rmdir(dir);
}
