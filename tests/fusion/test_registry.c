/*
 * test_registry.c — registry files (CGJIT_OPS, fusion/registry.c) that are hostile or odd: a
 * line nested thousands deep, read on a thread with a small stack; lines longer than the
 * reader's buffer; names longer than a kernel name may be; a FIFO, a device, a folder or a file
 * too large in place of the file; bytes that must not reach a terminal. Linked with cgjit's
 * objects (INTERNAL). Criterion runs each test in a fresh process: the registry starts empty.
 *
 * The well-formed files are test_spec.c's; here, a bad line must be reported with its own line
 * number and must register nothing, and every line after it must be read as it is written.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "base/config.h"
#include "fusion/fusion.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/stderr_capture.h"

TestSuite(fusion_registry);

#define assert_has(hay, needle) cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in '%s'", (needle), (hay))

#define SHIFT "shift (out float y, in float x, float b, count int n): y = x + b\n"
#define SMALL_STACK (256u << 10)

static char path[64];

static const char *write_bytes(const char *text, size_t len)
{
    snprintf(path, sizeof path, "/tmp/cgj_registry_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

static const char *write_registry(const char *text)
{
    return write_bytes(text, strlen(text));
}

static void cleanup(void)
{
    if (path[0]) unlink(path);
}

/* "deep (...): y = " and `depth` opening parentheses around x (closed only where they fit a
 * line of the reader's 4 KiB), then SHIFT on line 2. */
static char *deep_file(unsigned depth)
{
    static const char head[] = "deep (out float y, in float x, count int n): y = ";
    char *text = malloc(sizeof head + depth + 2 + sizeof SHIFT), *p = text;
    cr_assert_not_null(text);
    p = stpcpy(p, head);
    memset(p, '(', depth);
    p += depth;
    p = stpcpy(p, "x\n" SHIFT);
    cr_assert_lt(strlen(head) + depth + 2, 4096, "the line fits the reader's buffer");
    return text;
}

typedef struct job {
    int bad;
    const cgj_ew_spec_t *deep, *shift;
} job_t;

static void *load_job(void *p)
{
    job_t *j = p;
    j->bad = cgj_fusion_load_file(path);
    return NULL;
}

/* CGJIT_OPS read at the first lookup, as the fusion pass does it. */
static void *lookup_job(void *p)
{
    job_t *j = p;
    j->deep = cgj_fusion_lookup("deep");
    j->shift = cgj_fusion_lookup("shift");
    return NULL;
}

static void run_small(void *(*fn)(void *), job_t *j)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    cr_assert_eq(pthread_attr_setstacksize(&a, SMALL_STACK), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, &a, fn, j), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&a);
}

Test(fusion_registry, a_line_nested_4000_deep_is_reported, .fini = cleanup)
{
    char *text = deep_file(4000);
    write_registry(text);
    free(text);
    job_t j = {0};
    capture_begin();
    run_small(load_job, &j);
    const char *err = capture_end();
    cr_assert_eq(j.bad, 1, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "%s:1: kernel 'deep': column", path);
    assert_has(err, want);
    assert_has(err, "nested deeper than");
    cr_assert_null(cgj_fusion_lookup("deep"));
    cr_assert_not_null(cgj_fusion_lookup("shift"), "the line after it is read");
}

Test(fusion_registry, the_configured_file_nested_4000_deep, .fini = cleanup)
{
    char *text = deep_file(4000);
    write_registry(text);
    free(text);
    cgj_cfg.OPS = path;
    job_t j = {0};
    capture_begin();
    run_small(lookup_job, &j);
    const char *err = capture_end();
    assert_has(err, "nested deeper than");
    cr_assert_null(j.deep);
    cr_assert_not_null(j.shift);
}

/* A line longer than the reader's buffer is one bad line: not cut into a spec that means
 * something else (`x * 2` read as `x`) and a second line made of its tail. */
Test(fusion_registry, a_line_too_long_is_one_bad_line, .fini = cleanup)
{
    static char text[16384];
    char *p = stpcpy(text, "cut (inout float x, count int n): x = x");
    memset(p, ' ', 5000);
    p += 5000;
    p = stpcpy(p, "* 2\n" SHIFT "long (inout float x, count int n): x = x");
    memset(p, ' ', 9000); /* the last line, without a newline, longer than two buffers */
    p += 9000;
    strcpy(p, "+ 1");
    write_registry(text);
    capture_begin();
    int bad = cgj_fusion_load_file(path);
    const char *err = capture_end();
    cr_assert_eq(bad, 2, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "%s:1: a line longer than 4095 bytes", path);
    assert_has(err, want);
    snprintf(want, sizeof want, "%s:3: a line longer than 4095 bytes", path);
    assert_has(err, want);
    cr_assert_null(cgj_fusion_lookup("cut"), "a cut spec is not registered");
    cr_assert_null(cgj_fusion_lookup("long"));
    cr_assert_not_null(cgj_fusion_lookup("shift"), "the line after a long one keeps its number and meaning");
    int lines = 0;
    for (const char *q = err; (q = strchr(q, '\n')); q++) lines++;
    cr_assert_eq(lines, 2, "one message per long line: %s", err);
}

/* A line of exactly 4095 bytes and its newline is still read. */
Test(fusion_registry, a_line_that_just_fits, .fini = cleanup)
{
    static char text[8192];
    char *p = stpcpy(text, "fits (inout float x, count int n): x = x");
    size_t pad = 4095 - strlen(text) - 3;
    memset(p, ' ', pad);
    p += pad;
    strcpy(p, "* 2\n" SHIFT);
    write_registry(text);
    capture_begin();
    int bad = cgj_fusion_load_file(path);
    const char *err = capture_end();
    cr_assert_eq(bad, 0, "%s", err);
    const cgj_ew_spec_t *s = cgj_fusion_lookup("fits");
    cr_assert_not_null(s);
    cr_assert_eq(s->n[s->assign[0].root].op, '*');
    cr_assert_not_null(cgj_fusion_lookup("shift"));
}

/* A NUL byte would end the spec early (`x = x` of `x = x\0* 2`): the line is bad. */
Test(fusion_registry, a_nul_byte_is_one_bad_line, .fini = cleanup)
{
    static const char text[] = "nul (inout float x, count int n): x = x\0* 2\n" SHIFT;
    write_bytes(text, sizeof text - 1);
    capture_begin();
    int bad = cgj_fusion_load_file(path);
    const char *err = capture_end();
    cr_assert_eq(bad, 1, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "%s:1: a NUL byte in the line", path);
    assert_has(err, want);
    cr_assert_null(cgj_fusion_lookup("nul"));
    cr_assert_not_null(cgj_fusion_lookup("shift"));
}

/* A kernel name longer than the registry keeps is an error, not a shorter name. */
Test(fusion_registry, a_name_too_long_is_reported, .fini = cleanup)
{
    static char text[4096];
    char name[300];
    memset(name, 'k', 299);
    name[299] = 0;
    snprintf(text, sizeof text, "%s (inout float x, count int n): x = 1\n" SHIFT, name);
    write_registry(text);
    capture_begin();
    int bad = cgj_fusion_load_file(path);
    const char *err = capture_end();
    cr_assert_eq(bad, 1, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "%s:1: a kernel name longer than 255 bytes", path);
    assert_has(err, want);
    name[255] = 0;
    cr_assert_null(cgj_fusion_lookup(name), "not registered under a cut name");
    cr_assert_not_null(cgj_fusion_lookup("shift"));
}

/* cgj_fusion_registry_reset forgets every registration (fuzzers and tests). */
Test(fusion_registry, reset_forgets_everything)
{
    char err[256];
    cr_assert(cgj_fusion_register("a", "(inout float x, count int n): x = 1", err, sizeof err));
    cr_assert_not_null(cgj_fusion_lookup("a"));
    cgj_fusion_registry_reset();
    cr_assert_null(cgj_fusion_lookup("a"));
    cr_assert(cgj_fusion_register("b", "(inout float x, count int n): x = 2", err, sizeof err));
    cr_assert_not_null(cgj_fusion_lookup("b"));
    cr_assert_null(cgj_fusion_lookup("a"));
}

/* ---- a registry that is no regular file, or too large ---- */

/* cgj_fusion_load_file(p) refuses at once: -1, one message naming the file and why, nothing
 * registered. Called in this process: a refusal depends on what the descriptor is, never on
 * time (a FIFO without a writer is no regular file, whether a writer comes or not). */
static void expect_refused(const char *p, const char *why)
{
    capture_begin();
    int bad = cgj_fusion_load_file(p);
    const char *err = capture_end();
    cr_assert_eq(bad, -1, "%s: %s", p, err);
    char want[256];
    snprintf(want, sizeof want, "cgjit: CGJIT_OPS=%s: %s; no kernel is registered from it\n", p, why);
    cr_assert_str_eq(err, want);
    cr_assert_null(cgj_fusion_lookup("shift"));
}

Test(fusion_registry, a_fifo_a_device_or_a_folder_is_refused_at_once)
{
    char dir[] = "/tmp/cgj_registry_XXXXXX", fifo[64];
    cr_assert(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/ops", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    /* CGJIT_OPS naming the FIFO: the first lookup (which reads it) returns, with the message */
    cgj_cfg.OPS = fifo;
    capture_begin();
    const cgj_ew_spec_t *s = cgj_fusion_lookup("shift");
    const char *err = capture_end();
    cr_assert_null(s);
    assert_has(err, "not a regular file");
    expect_refused(fifo, "not a regular file");
    expect_refused("/dev/zero", "not a regular file");
    expect_refused("/dev/urandom", "not a regular file");
    expect_refused(dir, "not a regular file");
    unlink(fifo), rmdir(dir);
}

Test(fusion_registry, a_file_over_16_mib_is_refused, .fini = cleanup)
{
    write_registry(SHIFT);
    cr_assert_eq(truncate(path, (16 << 20) + 1), 0); /* SHIFT, then NUL bytes: sparse */
    expect_refused(path, "larger than 16777216 bytes");
    cr_assert_eq(truncate(path, 16 << 20), 0); /* at the bound: read, its NUL line is bad */
    capture_begin();
    int bad = cgj_fusion_load_file(path);
    capture_end();
    cr_assert_eq(bad, 1);
    cr_assert_not_null(cgj_fusion_lookup("shift"));
}

/* A registry's bytes come back escaped in its messages: a control character or a byte of no
 * UTF-8 in a name, a spec or the file's name cannot reach the terminal as it is. */
Test(fusion_registry, messages_show_the_file_s_bytes_escaped)
{
    char dir[] = "/tmp/cgj_registry_XXXXXX", name[80];
    cr_assert(mkdtemp(dir));
    snprintf(name, sizeof name, "%s/ops\x1b[2J.txt", dir);
    FILE *f = fopen(name, "w");
    cr_assert(f);
    fputs("k\x1b]0;x\x07 (inout float x, count int n): x = q\xff\n"
          "nospec\x9b\n",
          f);
    fclose(f);
    capture_begin();
    int bad = cgj_fusion_load_file(name);
    const char *err = capture_end();
    cr_assert_eq(bad, 2, "%s", err);
    for (const unsigned char *c = (const unsigned char *)err; *c; c++)
        cr_assert(*c == '\n' || (*c >= 0x20 && *c < 0x7f), "byte %#x on stderr: %s", *c, err);
    char want[160];
    snprintf(want, sizeof want, "cgjit: %s/ops\\x1b[2J.txt:1: kernel 'k\\x1b]0;x\\x07': ", dir);
    assert_has(err, want);
    snprintf(want, sizeof want, "cgjit: %s/ops\\x1b[2J.txt:2: 'nospec\\x9b' has no spec", dir);
    assert_has(err, want);
    unlink(name), rmdir(dir);
}
