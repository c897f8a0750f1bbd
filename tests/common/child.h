/*
 * child.h — run a loop in a child process under an environment of its own.
 *
 * cgjit reads its CGJIT_* variables once, when it starts: a test that compares configurations
 * (cgjit disabled as the eager reference, a step policy, an option) runs each in a forked child
 * of a process that has not started CUDA, and gets back the loop's results and the child's
 * cgj_stats through a temporary file.
 */
#ifndef CGJ_TEST_CHILD_H
#define CGJ_TEST_CHILD_H

#include <criterion/criterion.h>
#include <cgjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* env: "NAME", "VALUE" pairs, NULL-terminated. loop fills `bytes` bytes at out (a buffer in the
 * child) and returns 0, or a nonzero code the assertion names. */
static inline void child_run(const char *const *env, int (*loop)(void *out), void *out, size_t bytes, cgj_stats_t *st)
{
    FILE *f = tmpfile();
    cr_assert(f);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; env[i]; i += 2) setenv(env[i], env[i + 1], 1);
        int rc = loop(out);
        cgj_stats_t s;
        cgj_stats(&s);
        fwrite(out, bytes, 1, f);
        fwrite(&s, sizeof s, 1, f);
        fflush(f);
        _exit(rc);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the loop failed (status %d)", status);
    rewind(f);
    cr_assert_eq(fread(out, bytes, 1, f), 1);
    cr_assert_eq(fread(st, sizeof *st, 1, f), 1);
    fclose(f);
}

#endif /* CGJ_TEST_CHILD_H */
