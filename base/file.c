/* file.c — files and directories a user names, opened safely; see file.h. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *cgj_file_open(const char *path, bool fresh)
{
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (fresh ? O_EXCL | O_TRUNC : O_APPEND);
    int fd = open(path, flags, 0600);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { /* a FIFO or a device: not a log */
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    FILE *f = fdopen(fd, fresh ? "w" : "a");
    if (!f) close(fd);
    return f;
}

FILE *cgj_file_replace(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return NULL;
    struct stat st; /* truncated only once it is known to be a regular file */
    int err = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : ftruncate(fd, 0) != 0 ? errno : 0;
    if (err) {
        close(fd);
        errno = err;
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) close(fd);
    return f;
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
