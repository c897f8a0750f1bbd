/*
 * stderr_capture.h — what a Criterion host test writes to stderr, captured: the warnings and
 * messages cgjit prints for bad settings, specs and registry lines. Header-only; included by
 * relative path ("../common/stderr_capture.h").
 *
 *     capture_begin();
 *     ...call what warns...
 *     const char *err = capture_end();   // a static buffer, valid until the next capture_end
 */
#ifndef CGJ_TEST_STDERR_CAPTURE_H
#define CGJ_TEST_STDERR_CAPTURE_H

#include <criterion/criterion.h>

#include <stdio.h>
#include <unistd.h>

static FILE *cap_file;
static int cap_saved = -1;

/* From now on, stderr goes to a temporary file. */
static inline void capture_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    cr_assert(cap_file, "tmpfile");
    cap_saved = dup(2);
    cr_assert(cap_saved >= 0);
    cr_assert(dup2(fileno(cap_file), 2) == 2);
}

/* Stop capturing; returns what was written to stderr meanwhile (static buffer, 16 KiB at most). */
static inline const char *capture_end(void)
{
    static char buf[16384];
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    cap_saved = -1;
    rewind(cap_file);
    size_t n = fread(buf, 1, sizeof buf - 1, cap_file);
    buf[n] = '\0';
    fclose(cap_file);
    cap_file = NULL;
    return buf;
}

#endif /* CGJ_TEST_STDERR_CAPTURE_H */
