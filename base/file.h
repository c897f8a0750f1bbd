/*
 * file.h — how cgjit opens the files a user names (CGJIT_LOG_FILE, CGJIT_DUMP_ALLOCS, the JSON
 * report of CGJIT_REPORT=json:FILE, CGJIT_TRACE_FILE).
 *
 * `%p` in a file name a user gives stands for the process id (`%%` for a percent sign), so that
 * the processes of one program (workers, a launcher and its children) can each write their own
 * file from one setting: CGJIT_TRACE_FILE=trace-%p.json.
 *
 * A path in an environment variable may point into a shared directory where someone else
 * planted a symbolic link: cgjit never follows one (O_NOFOLLOW), never lets the descriptor leak
 * into programs the application starts (O_CLOEXEC), creates files private to the user (0600)
 * and directories likewise (0700), and creates dumps only where nothing exists yet (O_EXCL).
 *
 * Only a regular file is written, and nothing is waited for on the way: the open is
 * non-blocking (O_NONBLOCK), so a FIFO with no reader fails at once (ENXIO) instead of hanging
 * the program until one comes, and whatever opened (a FIFO with a reader, a terminal, a device)
 * is refused after fstat of the descriptor itself (EINVAL), never after a separate stat of the
 * name, which another process could swap in between. The exceptions are three names that say
 * where the output goes without being files: /dev/stdout and /dev/stderr write to the program's
 * own descriptors 1 and 2 (a duplicate, whatever they are), and /dev/null discards. On Linux
 * the first two are links to /proc/self/fd/N, which O_NOFOLLOW would refuse.
 *
 * Files cgjit reads (the registry of CGJIT_OPS, the kernel cache's entries, cgjit-plan's trace)
 * are opened the same way: without blocking, so a FIFO is refused at once whether or not a
 * writer exists, and only a regular file, checked on the descriptor. What is read is bounded: a
 * file larger than its reader's bound is refused (EFBIG) before anything is read, and reading
 * stops past the bound all the same (a file that grows while it is read, a pipe on standard
 * input), so no input can make cgjit wait or take memory without end.
 */
#ifndef CGJ_FILE_H
#define CGJ_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

/* Open `path` for appending (created 0600 if absent), or create it anew (`fresh`: fails if it
 * exists). Never through a symbolic link; never blocks. NULL with errno set on failure. */
FILE *cgj_file_open(const char *path, bool fresh);
/* Open `path` to write it anew: created 0600, or a regular file's contents replaced (a report
 * written again by the next run). Never through a symbolic link; never blocks. NULL with errno
 * set. */
FILE *cgj_file_replace(const char *path);
/* Open `path` to read, relative to the directory descriptor `dir` (AT_FDCWD: as open does), with
 * `flags` added (O_NOFOLLOW where a symbolic link must not be followed): only a regular file of
 * at most `max` bytes, never blocking on the way; *st is what fstat said of it. The descriptor,
 * in blocking mode, or -1 with errno set: EINVAL for what is no regular file (a FIFO, a device,
 * a directory, a socket), EFBIG for a larger file. */
int cgj_file_open_read(int dir, const char *path, int flags, size_t max, struct stat *st);
/* What remains of descriptor `fd`, read to its end into a new buffer (cgj_free) with a NUL after
 * its *len bytes; at most `max` bytes: NULL with errno EFBIG where there is more, or with the
 * read's errno. Any descriptor (a pipe on standard input too). */
char *cgj_file_read_fd(int fd, size_t max, size_t *len);
/* The regular file `path` whole, as cgj_file_open_read and cgj_file_read_fd take it (symbolic
 * links followed: the user named the file); NULL with errno set. */
char *cgj_file_read(const char *path, size_t max, size_t *len);
/* Why a cgj_file_* function failed, for a message: strerror(err), except "not a regular file"
 * for what is refused as no file (a FIFO, a device, a socket, a directory), "larger than cgjit
 * reads" (EFBIG) and "a symbolic link (never followed)". */
const char *cgj_file_strerror(int err);
/* `name` with %p replaced by the process id and %% by %, into out[len] (truncated, always
 * terminated); any other % is kept as it is. Returns out. */
char *cgj_file_expand(const char *name, char *out, size_t len);
/* Create directory `path` (0700) unless it exists as a directory (not a link). 0 or errno. */
int cgj_file_mkdir(const char *path);

#endif /* CGJ_FILE_H */
