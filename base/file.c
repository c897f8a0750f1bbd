/* file.c — files and directories a user names, opened safely; see file.h. */
#include "base/file.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The names that are no file to create (file.h): a descriptor for /dev/stdout, /dev/stderr or
 * /dev/null; -1 with errno set when it cannot be had; -2 for any other name. */
static int stream_fd(const char *path)
{
    if (!strcmp(path, "/dev/stdout")) return fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (!strcmp(path, "/dev/stderr")) return fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (!strcmp(path, "/dev/null")) return open(path, O_WRONLY | O_CLOEXEC);
    return -2;
}

/* Close fd, keeping err as errno: -1. */
static int close_failed(int fd, int err)
{
    close(fd);
    errno = err;
    return -1;
}

/* Open `path` with `flags` without blocking, and keep the descriptor only if it is a regular
 * file (then in blocking mode again, as the writes expect); truncated (`trunc`) only once that
 * is known. -1 with errno set. */
static int open_regular(const char *path, int flags, bool trunc)
{
    int fd = open(path, flags | O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) return errno == ENXIO ? (errno = EINVAL, -1) : -1; /* ENXIO: a FIFO without reader */
    struct stat st;
    int err = fstat(fd, &st) != 0                       ? errno
            : !S_ISREG(st.st_mode)                      ? EINVAL
            : fcntl(fd, F_SETFL, flags & O_APPEND) != 0 ? errno
            : trunc && ftruncate(fd, 0) != 0            ? errno
                                                        : 0;
    return err ? close_failed(fd, err) : fd;
}

static FILE *as_stream(int fd, const char *mode)
{
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, mode);
    if (!f) close_failed(fd, errno);
    return f;
}

FILE *cgj_file_open(const char *path, bool fresh)
{
    int fd = stream_fd(path);
    if (fd == -2) fd = open_regular(path, O_CREAT | (fresh ? O_EXCL : O_APPEND), false);
    return as_stream(fd, fresh ? "w" : "a");
}

FILE *cgj_file_replace(const char *path)
{
    int fd = stream_fd(path);
    if (fd == -2) fd = open_regular(path, O_CREAT, true);
    return as_stream(fd, "w");
}

int cgj_file_open_read(int dir, const char *path, int flags, size_t max, struct stat *st)
{
    int fd = openat(dir, path, flags | O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    int err = fstat(fd, st) != 0                      ? errno
            : !S_ISREG(st->st_mode)                   ? EINVAL
            : (uintmax_t)st->st_size > (uintmax_t)max ? EFBIG
            : fcntl(fd, F_SETFL, 0) != 0              ? errno
                                                      : 0;
    return err ? close_failed(fd, err) : fd;
}

char *cgj_file_read_fd(int fd, size_t max, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = cgj_xmalloc(cap);
    for (;;) {
        if (n == cap - 1) { /* full but for the NUL: grow, up to max and one byte to see more */
            if (n > max) break;
            cap = cap - 1 < max / 2 ? 2 * cap : max + 2;
            buf = cgj_xrealloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int err = errno;
            cgj_free(buf);
            errno = err;
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    if (n > max) {
        cgj_free(buf);
        errno = EFBIG;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

char *cgj_file_read(const char *path, size_t max, size_t *len)
{
    struct stat st;
    int fd = cgj_file_open_read(AT_FDCWD, path, 0, max, &st);
    if (fd < 0) return NULL;
    char *buf = cgj_file_read_fd(fd, max, len);
    int err = errno;
    close(fd);
    errno = err;
    return buf;
}

const char *cgj_file_strerror(int err)
{
    if (err == EINVAL) return "not a regular file";
    if (err == EFBIG) return "larger than cgjit reads";
    if (err == ELOOP) return "a symbolic link (never followed)";
    return strerror(err);
}

int cgj_file_mkdir(const char *path)
{
    if (mkdir(path, 0700) == 0) return 0;
    if (errno != EEXIST) return errno;
    struct stat st;
    if (lstat(path, &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

char *cgj_file_expand(const char *name, char *out, size_t len)
{
    size_t j = 0;
    if (!len) return out;
    for (const char *s = name; *s && j + 1 < len; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            int n = snprintf(out + j, len - j, "%ld", (long)getpid());
            j = n < 0 ? j : j + (size_t)n < len ? j + (size_t)n : len - 1;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            out[j++] = '%';
            s++;
        } else {
            out[j++] = *s;
        }
    }
    out[j] = '\0';
    return out;
}
