/* file.c — files and directories a user names, opened safely; see file.h. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
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

int cgj_file_mkdir(const char *path)
{
    if (mkdir(path, 0700) == 0) return 0;
    if (errno != EEXIST) return errno;
    struct stat st;
    if (lstat(path, &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}
