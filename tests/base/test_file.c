/* test_file.c — file names a user gives: %p expands to the pid; files are opened safely, only
 * regular files, never blocking (a FIFO), and /dev/stdout, /dev/stderr, /dev/null as meant; files
 * cgjit reads likewise, and no more of them than their bound. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include "base/file.h"
#include "base/mem.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/stderr_capture.h"

Test(base_file, percent_p_is_the_pid)
{
    char want[128], out[128];
    snprintf(want, sizeof want, "/tmp/trace-%ld.json", (long)getpid());
    cr_assert_str_eq(cgj_file_expand("/tmp/trace-%p.json", out, sizeof out), want);
    snprintf(want, sizeof want, "%ld-%ld", (long)getpid(), (long)getpid());
    cr_assert_str_eq(cgj_file_expand("%p-%p", out, sizeof out), want);
}

Test(base_file, other_percents_are_kept)
{
    char out[64];
    cr_assert_str_eq(cgj_file_expand("a%%p b%d c%", out, sizeof out), "a%p b%d c%");
    cr_assert_str_eq(cgj_file_expand("plain.log", out, sizeof out), "plain.log");
}

Test(base_file, truncated_and_terminated)
{
    char out[6];
    cr_assert_str_eq(cgj_file_expand("abcdefgh", out, sizeof out), "abcde");
    cgj_file_expand("%p%p%p%p", out, sizeof out);
    cr_assert_eq(strlen(out), 5);
}

/* ---- what is not a regular file ---- */

static FILE *open_append(const char *path)
{
    return cgj_file_open(path, false);
}

/* `open` on `path` in a child with an alarm (a blocking open would hang it: it then dies of
 * SIGALRM instead of hanging the test): refused at once with EINVAL. */
static void expect_refused_in_child(FILE *(*open)(const char *), const char *path, const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(10);
        errno = 0;
        FILE *f = open(path);
        _exit(f ? 1 : errno == EINVAL ? 0 : 2);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(!WIFSIGNALED(st), "%s: %s: the open blocked (signal %d)", what, path, WTERMSIG(st));
    cr_assert_eq(WEXITSTATUS(st), 0, "%s: %s: %s", what, path, WEXITSTATUS(st) == 1 ? "opened" : "another errno");
}

Test(base_file, fifo_is_refused_without_blocking)
{
    char dir[] = "/tmp/cgjit_fileXXXXXX", fifo[64];
    cr_assert(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    /* no reader: an open for writing would wait for one */
    expect_refused_in_child(cgj_file_replace, fifo, "replace, no reader");
    expect_refused_in_child(open_append, fifo, "append, no reader");
    /* a reader: the open succeeds, the descriptor is no regular file */
    int reader = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert(reader >= 0);
    expect_refused_in_child(cgj_file_replace, fifo, "replace, a reader");
    expect_refused_in_child(open_append, fifo, "append, a reader");
    close(reader);
    expect_refused_in_child(cgj_file_replace, "/dev/zero", "a device");
    cr_assert_str_eq(cgj_file_strerror(EINVAL), "not a regular file");
    unlink(fifo), rmdir(dir);
}

/* /dev/stdout and /dev/stderr are the program's descriptors 1 and 2 (on Linux links, which the
 * opens would otherwise refuse), /dev/null discards; each descriptor stays out of exec'd programs. */
Test(base_file, standard_streams_and_dev_null_are_accepted)
{
    FILE *f = cgj_file_replace("/dev/null");
    cr_assert(f, "/dev/null: %s", strerror(errno));
    cr_assert(fcntl(fileno(f), F_GETFD) & FD_CLOEXEC);
    fputs("discarded\n", f);
    cr_assert_eq(fclose(f), 0);
    capture_begin();
    f = cgj_file_replace("/dev/stderr");
    FILE *g = cgj_file_open("/dev/stderr", false);
    if (f) fputs("to stderr\n", f), fclose(f);
    if (g) fputs("appended\n", g), fclose(g);
    const char *err = capture_end();
    cr_assert(f && g, "/dev/stderr refused");
    cr_assert_str_eq(err, "to stderr\nappended\n");
    fflush(stdout);
    int saved = dup(1);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 1);
    f = cgj_file_replace("/dev/stdout");
    if (f) fputs("to stdout\n", f), fclose(f);
    dup2(saved, 1);
    close(saved);
    cr_assert(f, "/dev/stdout refused");
    char buf[64] = "";
    rewind(tmp);
    cr_assert(fgets(buf, sizeof buf, tmp));
    fclose(tmp);
    cr_assert_str_eq(buf, "to stdout\n");
}

/* A regular file is written in blocking mode and replaced; one of another name under /dev is
 * not taken for a stream. */
Test(base_file, regular_file_replaced)
{
    char path[] = "/tmp/cgjit_fileXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "old contents\n", 13), 13);
    close(fd);
    FILE *f = cgj_file_replace(path);
    cr_assert(f);
    cr_assert_eq(fcntl(fileno(f), F_GETFL) & O_NONBLOCK, 0, "left non-blocking");
    fputs("new\n", f);
    fclose(f);
    f = fopen(path, "r");
    char buf[64] = "";
    cr_assert(fgets(buf, sizeof buf, f));
    fclose(f);
    cr_assert_str_eq(buf, "new\n");
    unlink(path);
}

/* ---- files cgjit reads: a regular file only, never blocking, bounded ---- */

#define READ_MAX 4096

/* cgj_file_read of `path` fails with `err` and leaves *len alone. The call is made here, not in
 * a child: a refusal comes from what the descriptor is, so it cannot wait; a regression would
 * hang the test until Criterion stops it. */
static void expect_unread(const char *path, int err, const char *what)
{
    size_t len = 99;
    errno = 0;
    char *text = cgj_file_read(path, READ_MAX, &len);
    cr_assert_null(text, "%s: %s was read", what, path);
    cr_assert_eq(errno, err, "%s: %s: %s", what, path, strerror(errno));
    cr_assert_eq(len, 99);
}

Test(base_file, what_is_no_regular_file_is_not_read)
{
    char dir[] = "/tmp/cgjit_fileXXXXXX", fifo[64];
    cr_assert(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_unread(fifo, EINVAL, "a FIFO without a writer");
    int both = open(fifo, O_RDWR | O_NONBLOCK); /* a writer, with bytes waiting */
    cr_assert(both >= 0);
    cr_assert_eq(write(both, "x(y): y = 1\n", 12), 12);
    expect_unread(fifo, EINVAL, "a FIFO with a writer");
    close(both);
    expect_unread("/dev/zero", EINVAL, "a device without end");
    expect_unread("/dev/urandom", EINVAL, "a device without end");
    expect_unread(dir, EINVAL, "a directory");
    expect_unread("/nonexistent/cgjit/input", ENOENT, "a missing file");
    struct stat st;
    cr_assert_eq(cgj_file_open_read(AT_FDCWD, "/dev/zero", 0, READ_MAX, &st), -1);
    cr_assert_eq(errno, EINVAL);
    unlink(fifo), rmdir(dir);
}

Test(base_file, a_file_larger_than_its_bound_is_not_read)
{
    char path[] = "/tmp/cgjit_fileXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, READ_MAX + 1), 0);
    expect_unread(path, EFBIG, "one byte over");
    cr_assert_eq(ftruncate(fd, (off_t)1 << 40), 0); /* a terabyte, sparse: refused before any read */
    expect_unread(path, EFBIG, "a terabyte");
    cr_assert_str_eq(cgj_file_strerror(EFBIG), "larger than cgjit reads");
    cr_assert_eq(ftruncate(fd, READ_MAX), 0);
    size_t len = 0;
    char *text = cgj_file_read(path, READ_MAX, &len);
    cr_assert_not_null(text, "exactly the bound: %s", strerror(errno));
    cr_assert_eq(len, READ_MAX);
    cr_assert_eq(text[0], 0);
    cgj_free(text);
    close(fd);
    unlink(path);
}

Test(base_file, a_regular_file_is_read_whole)
{
    char dir[] = "/tmp/cgjit_fileXXXXXX", path[64], link[64];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ops.txt", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fwrite("one\0two\n", 1, 8, f); /* a NUL inside is kept: the reader decides what it means */
    fclose(f);
    size_t len = 0;
    char *text = cgj_file_read(path, READ_MAX, &len);
    cr_assert_not_null(text, "%s", strerror(errno));
    cr_assert_eq(len, 8);
    cr_assert(memcmp(text, "one\0two\n", 9) == 0, "the bytes and a NUL after them");
    cgj_free(text);
    cr_assert_eq(symlink(path, link), 0);
    text = cgj_file_read(link, READ_MAX, &len); /* a link the user names is followed */
    cr_assert_not_null(text);
    cgj_free(text);
    struct stat st;
    int fd = cgj_file_open_read(AT_FDCWD, link, O_NOFOLLOW, READ_MAX, &st);
    cr_assert_eq(fd, -1, "O_NOFOLLOW: a link is refused");
    cr_assert_eq(errno, ELOOP);
    fd = cgj_file_open_read(AT_FDCWD, path, 0, READ_MAX, &st);
    cr_assert(fd >= 0);
    cr_assert_eq(st.st_size, 8);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    cr_assert_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0, "left non-blocking");
    close(fd);
    unlink(link), unlink(path), rmdir(dir);
}

/* Standard input may be a pipe or a device: what is read of it is bounded all the same. */
Test(base_file, a_descriptor_is_read_up_to_the_bound)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    char block[READ_MAX + 1];
    memset(block, 'a', sizeof block);
    cr_assert_eq(write(p[1], block, sizeof block), (ssize_t)sizeof block);
    close(p[1]);
    size_t len = 99;
    errno = 0;
    cr_assert_null(cgj_file_read_fd(p[0], READ_MAX, &len));
    cr_assert_eq(errno, EFBIG);
    close(p[0]);
    int zero = open("/dev/zero", O_RDONLY);
    cr_assert(zero >= 0);
    cr_assert_null(cgj_file_read_fd(zero, READ_MAX, &len), "an endless input is cut at the bound");
    cr_assert_eq(errno, EFBIG);
    close(zero);
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(write(p[1], "a x 1\n", 6), 6);
    close(p[1]);
    char *text = cgj_file_read_fd(p[0], READ_MAX, &len);
    cr_assert_not_null(text);
    cr_assert_eq(len, 6);
    cr_assert_str_eq(text, "a x 1\n");
    cgj_free(text);
    close(p[0]);
}
