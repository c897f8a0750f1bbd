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
 */
#ifndef CGJ_FILE_H
#define CGJ_FILE_H

#include <stdbool.h>
#include <stdio.h>

/* Open `path` for appending (created 0600 if absent), or create it anew (`fresh`: fails if it
 * exists). Never through a symbolic link. NULL with errno set on failure. */
FILE *cgj_file_open(const char *path, bool fresh);
/* Open `path` to write it anew: created 0600, or a regular file's contents replaced (a report
 * written again by the next run). Never through a symbolic link. NULL with errno set. */
FILE *cgj_file_replace(const char *path);
/* `name` with %p replaced by the process id and %% by %, into out[len] (truncated, always
 * terminated); any other % is kept as it is. Returns out. */
char *cgj_file_expand(const char *name, char *out, size_t len);
/* Create directory `path` (0700) unless it exists as a directory (not a link). 0 or errno. */
int cgj_file_mkdir(const char *path);

#endif /* CGJ_FILE_H */
