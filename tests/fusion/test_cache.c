/*
 * test_cache.c — the disk cache of compiled fused kernels (fusion/cache.c): keys, the entry
 * format's checks, private files and folders, atomic replacement under concurrent processes,
 * where the folder is, and the trust model (a folder or an entry that others may write, or that
 * is not the user's, a link or a FIFO, is not used). Linked with cgjit's objects (INTERNAL).
 *
 * The trust tests hold as root and as any other user: they set modes, which bind root's
 * process as anyone's (cgjit checks them itself). Ownership by another user is made with chown
 * as root; as another user, the folder owned by someone else is "/" (root's), and the entry
 * owned by someone else cannot be made, so that test is skipped.
 *
 * An entry is a 24-byte header (magic, format, payload length, payload checksum) and the
 * payload; the tests damage entries written by cgj_fusion_cache_write at those offsets and
 * expect each damaged entry to read as absent. Every test works in a fresh temporary folder,
 * removed at the end.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "base/config.h"
#include "base/mem.h"
#include "fusion/fusion.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEADER 24 /* magic (4), format (4), size (8), checksum (8) */
#define KEY "0123456789abcdef"

static char dir[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    chmod(path, 0700); /* a folder a test made read-only */
    return remove(path);
}

static void fresh_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/cgj_cache_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void cleanup(void)
{
    if (dir[0]) nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(fusion_cache, .init = fresh_dir, .fini = cleanup);

static const char *entry_path(const char *folder, const char *key)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s.cubin", folder, key);
    return path;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

/* Read entry KEY of dir and expect NULL. */
static void assert_absent(const char *why)
{
    size_t size = 12345;
    void *p = cgj_fusion_cache_read(dir, KEY, &size);
    cr_assert_null(p, "%s: read as present", why);
    cgj_free(p);
}

static unsigned char payload[4096];

static void write_entry(void)
{
    fill(payload, sizeof payload, 1);
    cr_assert(cgj_fusion_cache_write(dir, KEY, payload, sizeof payload));
}

/* Change byte `at` of the entry's file (xor). */
static void flip(off_t at, unsigned char x)
{
    int fd = open(entry_path(dir, KEY), O_RDWR);
    cr_assert_geq(fd, 0);
    unsigned char c;
    cr_assert_eq(pread(fd, &c, 1, at), 1);
    c ^= x;
    cr_assert_eq(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

/* ---- keys ---- */

static bool is_key(const char *k)
{
    if (strlen(k) != 16) return false;
    for (const char *p = k; *p; p++)
        if (!strchr("0123456789abcdef", *p)) return false;
    return true;
}

Test(fusion_cache, keys_are_16_hex_digits_of_everything_that_decides_the_cubin)
{
    char a[17], b[17];
    memset(a, 'x', sizeof a);
    cgj_fusion_cache_key("source", "sm_90", 12080, a);
    cr_assert(is_key(a), "'%.17s'", a);
    cgj_fusion_cache_key("source", "sm_90", 12080, b);
    cr_assert_str_eq(a, b, "deterministic");
    cgj_fusion_cache_key("sourcf", "sm_90", 12080, b);
    cr_assert_str_neq(a, b, "source");
    cgj_fusion_cache_key("source ", "sm_90", 12080, b);
    cr_assert_str_neq(a, b, "source length");
    cgj_fusion_cache_key("source", "sm_80", 12080, b);
    cr_assert_str_neq(a, b, "arch");
    cgj_fusion_cache_key("source", "sm_90", 13000, b);
    cr_assert_str_neq(a, b, "NVRTC version");
    /* the source ends where the arch begins: moving a character across is another key */
    cgj_fusion_cache_key("ab", "c", 1, a);
    cgj_fusion_cache_key("a", "bc", 1, b);
    cr_assert_str_neq(a, b);
    cgj_fusion_cache_key("", "", 0, a);
    cr_assert(is_key(a));
}

Test(fusion_cache, keys_of_many_sources_do_not_collide)
{
    enum { K = 2000 };
    static char keys[K][17];
    for (int i = 0; i < K; i++) {
        char src[64];
        snprintf(src, sizeof src, "extern \"C\" __global__ void cgj_fused() { /* %d */ }", i);
        cgj_fusion_cache_key(src, "sm_90", 12080, keys[i]);
        cr_assert(is_key(keys[i]));
    }
    qsort(keys, K, sizeof keys[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 1; i < K; i++) cr_assert_str_neq(keys[i - 1], keys[i]);
}

/* ---- entries ---- */

Test(fusion_cache, write_then_read)
{
    write_entry();
    size_t size = 0;
    void *p = cgj_fusion_cache_read(dir, KEY, &size);
    cr_assert_not_null(p);
    cr_assert_eq(size, sizeof payload);
    cr_assert(!memcmp(p, payload, size));
    cgj_free(p);
    struct stat sb;
    cr_assert_eq(lstat(entry_path(dir, KEY), &sb), 0);
    cr_assert(S_ISREG(sb.st_mode));
    cr_assert_eq(sb.st_mode & 0777, 0600, "private to the user");
    cr_assert_eq((size_t)sb.st_size, HEADER + sizeof payload);
    /* replaced by another write */
    unsigned char other[10] = "0123456789";
    cr_assert(cgj_fusion_cache_write(dir, KEY, other, sizeof other));
    p = cgj_fusion_cache_read(dir, KEY, &size);
    cr_assert_not_null(p);
    cr_assert_eq(size, sizeof other);
    cr_assert(!memcmp(p, other, size));
    cgj_free(p);
    /* one byte */
    cr_assert(cgj_fusion_cache_write(dir, KEY, "x", 1));
    p = cgj_fusion_cache_read(dir, KEY, &size);
    cr_assert_eq(size, 1);
    cr_assert_eq(*(char *)p, 'x');
    cgj_free(p);
}

Test(fusion_cache, absent_entries)
{
    assert_absent("no file");
    size_t size;
    cr_assert_null(cgj_fusion_cache_read("/nonexistent/cgjit", KEY, &size));
    write_entry();
    cr_assert_null(cgj_fusion_cache_read(dir, "fedcba9876543210", &size), "another key");
}

Test(fusion_cache, a_truncated_entry_is_absent)
{
    write_entry();
    cr_assert_eq(truncate(entry_path(dir, KEY), HEADER + sizeof payload - 1), 0);
    assert_absent("one byte short");
    cr_assert_eq(truncate(entry_path(dir, KEY), HEADER), 0);
    assert_absent("header only");
    cr_assert_eq(truncate(entry_path(dir, KEY), HEADER - 1), 0);
    assert_absent("a partial header");
    cr_assert_eq(truncate(entry_path(dir, KEY), 0), 0);
    assert_absent("empty");
}

Test(fusion_cache, an_entry_with_trailing_bytes_is_absent)
{
    write_entry();
    int fd = open(entry_path(dir, KEY), O_WRONLY | O_APPEND);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "!", 1), 1);
    close(fd);
    assert_absent("a byte too many");
}

Test(fusion_cache, a_corrupt_payload_is_absent)
{
    write_entry();
    flip(HEADER + 1000, 0x01);
    assert_absent("a flipped bit in the payload");
    write_entry();
    flip(HEADER + sizeof payload - 1, 0x80);
    assert_absent("a flipped bit in the last byte");
    write_entry();
    flip(HEADER - 1, 0x01);
    assert_absent("a flipped bit in the checksum");
}

Test(fusion_cache, a_bad_header_is_absent)
{
    write_entry();
    flip(0, 0xff);
    assert_absent("wrong magic");
    write_entry();
    flip(4, 0x02);
    assert_absent("another format");
    write_entry();
    flip(8, 0x01);
    assert_absent("a length that disagrees with the file");
    /* a header that claims a huge payload (and a file as long would be too) */
    write_entry();
    flip(15, 0x40);
    assert_absent("an absurd length");
}

Test(fusion_cache, a_symbolic_link_is_never_followed)
{
    /* a valid entry elsewhere, linked in place of KEY's */
    char other[128];
    snprintf(other, sizeof other, "%s/elsewhere", dir);
    cr_assert_eq(mkdir(other, 0700), 0);
    fill(payload, sizeof payload, 2);
    cr_assert(cgj_fusion_cache_write(other, KEY, payload, sizeof payload));
    char target[256];
    snprintf(target, sizeof target, "%s", entry_path(other, KEY));
    cr_assert_eq(symlink(target, entry_path(dir, KEY)), 0);
    assert_absent("a link to a valid entry");
    /* writing replaces the link, not what it points to */
    unsigned char mine[100];
    fill(mine, sizeof mine, 3);
    cr_assert(cgj_fusion_cache_write(dir, KEY, mine, sizeof mine));
    struct stat sb;
    cr_assert_eq(lstat(entry_path(dir, KEY), &sb), 0);
    cr_assert(S_ISREG(sb.st_mode), "the link was replaced by a file");
    size_t size;
    void *p = cgj_fusion_cache_read(other, KEY, &size);
    cr_assert_not_null(p);
    cr_assert_eq(size, sizeof payload, "the link's target is untouched");
    cr_assert(!memcmp(p, payload, size));
    cgj_free(p);
}

Test(fusion_cache, a_folder_in_place_of_the_entry_is_absent)
{
    cr_assert_eq(mkdir(entry_path(dir, KEY), 0700), 0);
    assert_absent("a folder");
    cr_assert_not(cgj_fusion_cache_write(dir, KEY, payload, sizeof payload));
    char path[256];
    snprintf(path, sizeof path, "%s", entry_path(dir, KEY));
    struct stat sb;
    cr_assert_eq(lstat(path, &sb), 0);
    cr_assert(S_ISDIR(sb.st_mode));
}

/* ---- folders ---- */

Test(fusion_cache, missing_folders_are_made_private)
{
    char deep[256];
    snprintf(deep, sizeof deep, "%s/a/b/c", dir);
    fill(payload, sizeof payload, 4);
    mode_t old = umask(022);
    bool ok = cgj_fusion_cache_write(deep, KEY, payload, sizeof payload);
    umask(old);
    cr_assert(ok);
    static const char *const parts[] = {"/a", "/a/b", "/a/b/c"};
    for (int k = 0; k < 3; k++) {
        char p[256];
        snprintf(p, sizeof p, "%s%s", dir, parts[k]);
        struct stat sb;
        cr_assert_eq(lstat(p, &sb), 0, "%s", p);
        cr_assert(S_ISDIR(sb.st_mode));
        cr_assert_eq(sb.st_mode & 0777, 0700, "%s is %o", p, sb.st_mode & 0777);
    }
    size_t size;
    void *p = cgj_fusion_cache_read(deep, KEY, &size);
    cr_assert_not_null(p);
    cr_assert_eq(size, sizeof payload);
    cgj_free(p);
    /* a trailing slash */
    snprintf(deep, sizeof deep, "%s/d/", dir);
    cr_assert(cgj_fusion_cache_write(deep, KEY, payload, sizeof payload));
    /* an existing folder keeps its mode */
    struct stat sb;
    cr_assert_eq(chmod(dir, 0755), 0);
    cr_assert(cgj_fusion_cache_write(dir, KEY, payload, sizeof payload));
    cr_assert_eq(stat(dir, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0755);
}

Test(fusion_cache, writes_that_cannot_be_made)
{
    cr_assert_not(cgj_fusion_cache_write("", KEY, payload, sizeof payload), "no folder");
    cr_assert_not(cgj_fusion_cache_write(dir, KEY, payload, 0), "nothing to store");
    assert_absent("an empty write stores nothing");
    /* a file where a folder should be */
    char file[128], below[160];
    snprintf(file, sizeof file, "%s/file", dir);
    int fd = open(file, O_CREAT | O_WRONLY, 0600);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_not(cgj_fusion_cache_write(file, KEY, payload, sizeof payload));
    snprintf(below, sizeof below, "%s/sub", file);
    cr_assert_not(cgj_fusion_cache_write(below, KEY, payload, sizeof payload));
    /* a link in place of the folder */
    char link[128];
    snprintf(link, sizeof link, "%s/link", dir);
    cr_assert_eq(symlink(dir, link), 0);
    cr_assert_not(cgj_fusion_cache_write(link, KEY, payload, sizeof payload), "the folder is a link");
    /* a read-only folder (root may write anyway) */
    if (geteuid() != 0) {
        char ro[128];
        snprintf(ro, sizeof ro, "%s/ro", dir);
        cr_assert_eq(mkdir(ro, 0500), 0);
        cr_assert_not(cgj_fusion_cache_write(ro, KEY, payload, sizeof payload));
    }
}

/* Count the files of `folder` whose names contain `part`. */
static int files_with(const char *folder, const char *part)
{
    DIR *d = opendir(folder);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, part)) n++;
    closedir(d);
    return n;
}

Test(fusion_cache, no_temporary_file_is_left)
{
    for (int k = 0; k < 20; k++) {
        fill(payload, sizeof payload, (unsigned)k);
        cr_assert(cgj_fusion_cache_write(dir, KEY, payload, sizeof payload));
    }
    cr_assert_eq(files_with(dir, ".tmp"), 0);
    cr_assert_eq(files_with(dir, ".cubin"), 1);
}

/* ---- concurrent processes ---- */

enum { WRITERS = 8, ROUNDS = 50 };

/* Writer w's payload: its own bytes and length, so that a mix of two is detectable. */
static size_t writer_payload(unsigned w, unsigned char *buf)
{
    size_t n = 20000 + 3001 * w;
    fill(buf, n, w + 10);
    return n;
}

/* In a child: write KEY ROUNDS times, reading it between writes. Exit status: 0, or what went
 * wrong (1: a write failed, 2: a read returned bytes no writer wrote, 3: a read returned nothing
 * after this process had written). */
static int writer(unsigned w)
{
    static unsigned char mine[64 << 10], theirs[64 << 10];
    size_t n = writer_payload(w, mine);
    bool wrote = false;
    for (int r = 0; r < ROUNDS; r++) {
        if (!cgj_fusion_cache_write(dir, KEY, mine, n)) return 1;
        wrote = true;
        for (int k = 0; k < 3; k++) {
            size_t size = 0;
            unsigned char *p = cgj_fusion_cache_read(dir, KEY, &size);
            if (!p) {
                if (wrote) return 3;
                continue;
            }
            bool known = false;
            for (unsigned o = 0; o < WRITERS && !known; o++) {
                size_t m = writer_payload(o, theirs);
                known = m == size && !memcmp(p, theirs, m);
            }
            cgj_free(p);
            if (!known) return 2;
        }
    }
    return 0;
}

Test(fusion_cache, concurrent_writers_and_readers_see_whole_entries)
{
    pid_t pids[WRITERS + 2];
    for (unsigned w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        cr_assert_geq(pids[w], 0);
        if (!pids[w]) _exit(writer(w));
    }
    /* two readers only, from before the first write */
    for (unsigned r = 0; r < 2; r++) {
        pids[WRITERS + r] = fork();
        cr_assert_geq(pids[WRITERS + r], 0);
        if (!pids[WRITERS + r]) {
            static unsigned char theirs[64 << 10];
            for (int k = 0; k < 400; k++) {
                size_t size = 0;
                unsigned char *p = cgj_fusion_cache_read(dir, KEY, &size);
                if (!p) continue;
                bool known = false;
                for (unsigned o = 0; o < WRITERS && !known; o++) {
                    size_t m = writer_payload(o, theirs);
                    known = m == size && !memcmp(p, theirs, m);
                }
                cgj_free(p);
                if (!known) _exit(2);
            }
            _exit(0);
        }
    }
    for (unsigned k = 0; k < WRITERS + 2; k++) {
        int status = 0;
        cr_assert_eq(waitpid(pids[k], &status, 0), pids[k]);
        cr_assert(WIFEXITED(status), "process %u died", k);
        cr_assert_eq(WEXITSTATUS(status), 0, "process %u: %s", k,
                     WEXITSTATUS(status) == 1   ? "a write failed"
                     : WEXITSTATUS(status) == 2 ? "a read returned bytes no writer wrote"
                                                : "a read found nothing after a write");
    }
    cr_assert_eq(files_with(dir, ".tmp"), 0, "temporary files left");
    cr_assert_eq(files_with(dir, ".cubin"), 1);
    size_t size;
    void *p = cgj_fusion_cache_read(dir, KEY, &size);
    cr_assert_not_null(p, "the last writer's entry");
    cgj_free(p);
}

/* ---- the folder ---- */

Test(fusion_cache, the_folder_from_the_environment)
{
    char buf[256];
    cgj_cfg.CACHE_DIR = "/some/where";
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "/some/where", "CGJIT_CACHE_DIR first");
    cr_assert_eq(cgj_fusion_cache_dir(buf, sizeof buf), buf);
    cgj_cfg.CACHE_DIR = "off";
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "", "off: no disk cache");
    cgj_cfg.CACHE_DIR = "";
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "/xdg/cgjit");
    setenv("XDG_CACHE_HOME", "relative/path", 1);
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "/home/u/.cache/cgjit",
                     "a relative XDG_CACHE_HOME is ignored");
    setenv("XDG_CACHE_HOME", "", 1);
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "/home/u/.cache/cgjit");
    unsetenv("XDG_CACHE_HOME");
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "/home/u/.cache/cgjit");
    setenv("HOME", "nowhere", 1);
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "", "no absolute home");
    unsetenv("HOME");
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "", "no home");
    /* a relative CGJIT_CACHE_DIR is taken as it is */
    cgj_cfg.CACHE_DIR = "cache";
    cr_assert_str_eq(cgj_fusion_cache_dir(buf, sizeof buf), "cache");
    /* truncated to the buffer, terminated */
    cgj_cfg.CACHE_DIR = "/a/rather/long/folder/name";
    char small[8];
    cr_assert_str_eq(cgj_fusion_cache_dir(small, sizeof small), "/a/rath");
}

/* ---- trust (cache.c's essay): the folder and the entries are the user's own ---- */

#include "../common/stderr_capture.h"

#define assert_has(hay, needle) cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in '%s'", (needle), (hay))

static int lines_of(const char *s)
{
    int n = 0;
    for (; (s = strchr(s, '\n')); s++) n++;
    return n;
}

/* Read KEY of folder f: present or not, with what was written to stderr meanwhile. */
static bool read_from(const char *f, const char **err)
{
    size_t size = 0;
    capture_begin();
    void *p = cgj_fusion_cache_read(f, KEY, &size);
    *err = capture_end();
    cgj_free(p);
    return p != NULL;
}

Test(fusion_cache, a_folder_writable_by_others_is_not_used)
{
    write_entry();
    cr_assert_eq(chmod(dir, 0777), 0);
    const char *err;
    cr_assert_not(read_from(dir, &err), "an entry of a 0777 folder was loaded");
    assert_has(err, dir);
    assert_has(err, "writable by others (mode 0777)");
    assert_has(err, "the disk cache is not used");
    cr_assert_eq(lines_of(err), 1, "one line: %s", err);
    /* nothing is written there either, and the warning is not repeated */
    capture_begin();
    bool wrote = cgj_fusion_cache_write(dir, "fedcba9876543210", payload, sizeof payload);
    err = capture_end();
    cr_assert_not(wrote);
    cr_assert_str_empty(err, "one warning per process: %s", err);
    cr_assert_eq(files_with(dir, "fedcba"), 0);
    cr_assert_not(read_from(dir, &err));
    cr_assert_str_empty(err);
    /* sticky, as /tmp: others still write there */
    cr_assert_eq(chmod(dir, 01777), 0);
    cr_assert_not(read_from(dir, &err), "1777");
    /* private again: used */
    cr_assert_eq(chmod(dir, 0755), 0);
    cr_assert(read_from(dir, &err));
}

Test(fusion_cache, a_folder_writable_by_its_group_is_not_used)
{
    write_entry();
    cr_assert_eq(chmod(dir, 0770), 0);
    const char *err;
    cr_assert_not(read_from(dir, &err));
    assert_has(err, "writable by its group (mode 0770)");
    cr_assert_not(cgj_fusion_cache_write(dir, KEY, payload, sizeof payload));
}

Test(fusion_cache, a_folder_of_another_user_is_not_used)
{
    const char *err;
    if (geteuid() != 0) {
        /* a folder owned by root and closed to others: the user's process must not trust it */
        cr_assert_not(read_from("/", &err));
        assert_has(err, "the cache folder / belongs to user 0");
        return;
    }
    write_entry();
    cr_assert_eq(chown(dir, 65534, 65534), 0);
    cr_assert_not(read_from(dir, &err), "root loaded an entry of a folder owned by user 65534");
    assert_has(err, "belongs to user 65534, not to this process's (0)");
    cr_assert_not(cgj_fusion_cache_write(dir, KEY, payload, sizeof payload));
}

Test(fusion_cache, a_symbolic_link_to_the_folder_is_refused_for_reads_too)
{
    char real[128], link[128], slash[132];
    snprintf(real, sizeof real, "%s/real", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(slash, sizeof slash, "%s/", link);
    cr_assert_eq(mkdir(real, 0700), 0);
    fill(payload, sizeof payload, 5);
    cr_assert(cgj_fusion_cache_write(real, KEY, payload, sizeof payload));
    cr_assert_eq(symlink(real, link), 0);
    const char *err;
    cr_assert_not(read_from(link, &err), "read through a linked folder");
    assert_has(err, link);
    assert_has(err, "is a symbolic link");
    cr_assert_not(read_from(slash, &err), "read through a linked folder named with a trailing slash");
    cr_assert_not(cgj_fusion_cache_write(slash, KEY, payload, sizeof payload));
    cr_assert(read_from(real, &err), "the folder itself is used");
}

Test(fusion_cache, a_missing_folder_is_absent_silently)
{
    char gone[128];
    snprintf(gone, sizeof gone, "%s/gone", dir);
    const char *err;
    cr_assert_not(read_from(gone, &err));
    cr_assert_str_empty(err);
}

Test(fusion_cache, an_entry_writable_by_group_or_others_is_ignored)
{
    static const mode_t bad[] = {0666, 0602, 0620, 0622, 0777};
    const char *err;
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_entry();
        cr_assert_eq(chmod(entry_path(dir, KEY), bad[k]), 0);
        cr_assert_not(read_from(dir, &err), "an entry of mode %o was loaded", (unsigned)bad[k]);
        cr_assert_str_empty(err, "an entry is ignored silently: %s", err);
    }
    static const mode_t good[] = {0600, 0644, 0400, 0700};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        cr_assert_eq(chmod(entry_path(dir, KEY), good[k]), 0);
        cr_assert(read_from(dir, &err), "an entry of mode %o was ignored", (unsigned)good[k]);
    }
    /* a write replaces an ignored entry with a private one */
    cr_assert_eq(chmod(entry_path(dir, KEY), 0666), 0);
    write_entry();
    struct stat sb;
    cr_assert_eq(stat(entry_path(dir, KEY), &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0600);
    cr_assert(read_from(dir, &err));
}

Test(fusion_cache, an_entry_of_another_user_is_ignored)
{
    if (geteuid() != 0) {
        cleanup(); /* a skipped test's .fini does not run */
        cr_skip("making a file owned by another user needs root");
    }
    write_entry();
    cr_assert_eq(chown(entry_path(dir, KEY), 65534, 65534), 0);
    const char *err;
    cr_assert_not(read_from(dir, &err), "root loaded an entry owned by user 65534");
    cr_assert_eq(chown(entry_path(dir, KEY), 0, 0), 0);
    cr_assert(read_from(dir, &err));
}

/* A FIFO in place of an entry or of the folder: ignored at once. The open of a FIFO without
 * O_NONBLOCK waits for a writer that never comes: the timeout turns that hang into a failure. */
Test(fusion_cache, a_fifo_is_ignored_without_hanging, .timeout = 60)
{
    cr_assert_eq(mkfifo(entry_path(dir, KEY), 0600), 0);
    const char *err;
    cr_assert_not(read_from(dir, &err));
    cr_assert_str_empty(err);
    write_entry(); /* replaced by a file */
    cr_assert(read_from(dir, &err));
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_not(read_from(fifo, &err));
    assert_has(err, "is not a folder");
    cr_assert_not(cgj_fusion_cache_write(fifo, KEY, payload, sizeof payload));
}

/* An entry larger than any entry can be (256 MiB and its header) is absent, refused on its size
 * before a byte is read: a sparse file of a terabyte costs nothing. */
Test(fusion_cache, an_entry_larger_than_any_is_absent)
{
    write_entry();
    cr_assert_eq(truncate(entry_path(dir, KEY), (off_t)1 << 40), 0);
    const char *err;
    cr_assert_not(read_from(dir, &err));
    cr_assert_str_empty(err);
}

/* The folder's name comes from the environment: the warning shows it escaped, on one line. */
Test(fusion_cache, the_folder_warning_shows_the_name_escaped)
{
    char name[128];
    snprintf(name, sizeof name, "%s/not\x1b[2Ja-folder\n", dir);
    FILE *f = fopen(name, "w");
    cr_assert(f);
    fclose(f);
    const char *err;
    cr_assert_not(read_from(name, &err));
    char want[192];
    snprintf(want, sizeof want,
             "cgjit: the cache folder %s/not\\x1b[2Ja-folder\\n is not a folder; the disk cache is not "
             "used\n",
             dir);
    cr_assert_str_eq(err, want);
    unlink(name);
}

/* ---- the entry check on bytes (the fuzzer's target) ---- */

Test(fusion_cache, the_check_of_an_entry_s_bytes)
{
    write_entry();
    static unsigned char bytes[HEADER + sizeof payload + 1];
    int fd = open(entry_path(dir, KEY), O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(read(fd, bytes, sizeof bytes), (ssize_t)(HEADER + sizeof payload));
    close(fd);
    size_t size = 0;
    const void *p = cgj_fusion_cache_payload(bytes, HEADER + sizeof payload, &size);
    cr_assert_eq(p, bytes + HEADER);
    cr_assert_eq(size, sizeof payload);
    size = 7;
    cr_assert_null(cgj_fusion_cache_payload(bytes, HEADER + sizeof payload + 1, &size), "a byte too many");
    cr_assert_null(cgj_fusion_cache_payload(bytes, HEADER + sizeof payload - 1, &size), "a byte short");
    cr_assert_null(cgj_fusion_cache_payload(bytes, HEADER, &size), "the header alone");
    cr_assert_null(cgj_fusion_cache_payload(bytes, HEADER - 1, &size), "a partial header");
    cr_assert_null(cgj_fusion_cache_payload(bytes, 0, &size), "nothing");
    cr_assert_eq(size, 7, "size is left alone");
    bytes[HEADER + 5] ^= 1;
    cr_assert_null(cgj_fusion_cache_payload(bytes, HEADER + sizeof payload, &size), "a flipped bit");
}
