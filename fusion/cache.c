/*
 * cache.c — compiled fused kernels on disk, shared by every process of the user.
 *
 * An entry is one file, DIR/KEY.cubin, named by the hash of what decides its contents (the
 * source, the GPU architecture, the NVRTC version): a header (magic, format, payload length,
 * payload checksum) and the CUBIN. A writer writes a temporary file of its own and renames it
 * into place, which is atomic: concurrent writers of one key each install a whole entry (the
 * same bytes), and a reader sees the old entry, the new one or none, never a mix. A reader
 * checks the header against the file: a truncated or corrupt entry (a full disk, a crash
 * before rename on a file system without ordering, a stray edit) reads as absent, and the
 * kernel is compiled and stored again.
 *
 * Trust. A CUBIN read from the cache runs in the process with the process's rights (output
 * validation is no defence against a planted kernel: it may behave until it does not), so the
 * cache is only as trusted as the folder and files are private to the user:
 *  - the folder is used only if it is a folder (not a symbolic link to one, for reads as for
 *    writes), owned by the effective user and not writable by group or others; otherwise the
 *    disk cache is not used at all, and one line on stderr names the folder and why. Folders
 *    cgjit creates are 0700 (missing parents too). Folders above it are not checked: a home on a
 *    symbolic link is common, and the one checked folder is what others must not write.
 *  - an entry is loaded only if it is a regular file owned by the effective user and not
 *    writable by group or others; any other (a link, a FIFO, a device, another user's file)
 *    reads as absent, silently, and the next write replaces it. Entries are created 0600.
 * Checks are made on descriptors, not names: the folder is opened once (O_NOFOLLOW) and fstat'd,
 * the entry is opened relative to that descriptor as every file cgjit reads is (base/file.h:
 * O_NOFOLLOW here, O_NONBLOCK so that a FIFO does not block the open, a regular file of at most
 * the largest entry's size, else absent) and fstat'd, and a writer's temporary file is created
 * and renamed relative to it too. What was checked is what is read; a name swapped in between is
 * never followed. Root is no exception: it trusts only what root owns.
 *
 * The folder comes from CGJIT_CACHE_DIR, else $XDG_CACHE_HOME/cgjit, else $HOME/.cache/cgjit,
 * each read with secure_getenv (base/config.h): a set-user-ID program has no disk cache.
 */
#define _GNU_SOURCE /* secure_getenv */
#include "fusion/fusion.h"
#include "base/config.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC 0x4b4a4743u /* "CGJK" */
#define FORMAT 1u
#define MAX_ENTRY (256u << 20)

typedef struct header {
    uint32_t magic, format;
    uint64_t size, sum;
} header_t;

void cgj_fusion_cache_key(const char *source, const char *arch, int nvrtc_version, char key[17])
{
    uint64_t h = cgj_hash_bytes(source, strlen(source) + 1, FORMAT);
    h = cgj_hash_bytes(arch, strlen(arch) + 1, h);
    h = cgj_hash_bytes(&nvrtc_version, sizeof nvrtc_version, h);
    snprintf(key, 17, "%016llx", (unsigned long long)h);
}

const char *cgj_fusion_cache_dir(char *buf, size_t len)
{
    const char *dir = cgj_cfg.CACHE_DIR, *xdg = secure_getenv("XDG_CACHE_HOME");
    const char *home = secure_getenv("HOME");
    if (dir && !strcmp(dir, "off")) buf[0] = 0;
    else if (dir && dir[0]) snprintf(buf, len, "%s", dir);
    else if (xdg && xdg[0] == '/') snprintf(buf, len, "%s/cgjit", xdg);
    else if (home && home[0] == '/') snprintf(buf, len, "%s/.cache/cgjit", home);
    else buf[0] = 0;
    return buf;
}

/* Create dir and its missing parents (0700). */
static bool make_dirs(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0700) && errno != EEXIST) return false;
        *p = '/';
    }
    return cgj_file_mkdir(path) == 0;
}

/* One warning per process: the folder is the same for all its kernels. */
static void warn_folder(const char *dir, const char *why)
{
    static int warned;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) return;
    cgj_log_message("the cache folder %s %s; the disk cache is not used", dir, why);
}

/* Open the cache folder dir as the essay says it may be used: its descriptor, or -1 where it is
 * absent (silently) or may not be trusted (with the warning). */
static int open_folder(const char *dir)
{
    char path[1024], why[96];
    size_t n = (size_t)snprintf(path, sizeof path, "%s", dir);
    if (n >= sizeof path) return -1;
    while (n > 1 && path[n - 1] == '/') path[--n] = 0; /* "link/" would follow the link */
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        struct stat lsb; /* only to word the warning: nothing is opened by this name */
        if (errno == ELOOP || (errno == ENOTDIR && lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode)))
            warn_folder(dir, "is a symbolic link");
        else if (errno == ENOTDIR) warn_folder(dir, "is not a folder");
        else if (errno != ENOENT) {
            snprintf(why, sizeof why, "cannot be opened (%s)", strerror(errno));
            warn_folder(dir, why);
        }
        return -1;
    }
    struct stat sb;
    why[0] = 0;
    if (fstat(fd, &sb) != 0) snprintf(why, sizeof why, "cannot be checked (%s)", strerror(errno));
    else if (sb.st_uid != geteuid())
        snprintf(why, sizeof why, "belongs to user %ld, not to this process's (%ld)", (long)sb.st_uid, (long)geteuid());
    else if (sb.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, sizeof why, "is writable by %s (mode %04o)", sb.st_mode & S_IWOTH ? "others" : "its group",
                 (unsigned)(sb.st_mode & 07777));
    if (!why[0]) return fd;
    warn_folder(dir, why);
    close(fd);
    return -1;
}

/* Are the header's claims possible for an entry of len bytes? */
static bool header_ok(const header_t *h, uint64_t len)
{
    return h->magic == MAGIC && h->format == FORMAT && h->size && h->size <= MAX_ENTRY && len == sizeof *h + h->size;
}

const void *cgj_fusion_cache_payload(const void *entry, size_t len, size_t *size)
{
    header_t h;
    if (len < sizeof h) return NULL;
    memcpy(&h, entry, sizeof h);
    const unsigned char *payload = (const unsigned char *)entry + sizeof h;
    if (!header_ok(&h, len) || cgj_hash_bytes(payload, h.size, 0) != h.sum) return NULL;
    *size = h.size;
    return payload;
}

static bool read_all(int fd, void *p, size_t n)
{
    for (char *c = p; n;) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        c += r, n -= (size_t)r;
    }
    return true;
}

/* Entry `name` of folder descriptor dfd, whole, if it may be trusted (the essay) and its header
 * fits its length: a new buffer of *len bytes, or NULL. */
static void *read_entry(int dfd, const char *name, size_t *len)
{
    struct stat sb;
    int fd = cgj_file_open_read(dfd, name, O_NOFOLLOW, sizeof(header_t) + MAX_ENTRY, &sb);
    if (fd < 0) return NULL;
    header_t h;
    void *data = NULL;
    if (sb.st_uid == geteuid() && !(sb.st_mode & (S_IWGRP | S_IWOTH)) && read_all(fd, &h, sizeof h) &&
        header_ok(&h, (uint64_t)sb.st_size)) {
        *len = sizeof h + h.size;
        data = cgj_xmalloc(*len);
        memcpy(data, &h, sizeof h);
        if (!read_all(fd, (char *)data + sizeof h, h.size)) {
            cgj_free(data);
            data = NULL;
        }
    }
    close(fd);
    return data;
}

void *cgj_fusion_cache_read(const char *dir, const char *key, size_t *size)
{
    int dfd = open_folder(dir);
    if (dfd < 0) return NULL;
    char name[256];
    size_t len = 0;
    void *data = (size_t)snprintf(name, sizeof name, "%s.cubin", key) < sizeof name ? read_entry(dfd, name, &len)
                                                                                    : NULL;
    close(dfd);
    const void *payload = data ? cgj_fusion_cache_payload(data, len, size) : NULL;
    if (!payload) {
        cgj_free(data);
        return NULL;
    }
    memmove(data, payload, *size);
    return data;
}

static bool write_all(int fd, const void *p, size_t n)
{
    for (const char *c = p; n;) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w, n -= (size_t)w;
    }
    return true;
}

bool cgj_fusion_cache_write(const char *dir, const char *key, const void *data, size_t size)
{
    if (!dir[0] || !size || size > MAX_ENTRY) return false;
    make_dirs(dir); /* where it fails, open_folder says why, if there is something to say */
    int dfd = open_folder(dir);
    if (dfd < 0) return false;
    static unsigned serial;
    char tmp[320], name[256];
    int fd = -1;
    if ((size_t)snprintf(name, sizeof name, "%s.cubin", key) < sizeof name) {
        snprintf(tmp, sizeof tmp, ".%s.%ld.%u.tmp", key, (long)getpid(),
                 __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    bool ok = fd >= 0;
    if (ok) {
        header_t h = {.magic = MAGIC, .format = FORMAT, .size = size, .sum = cgj_hash_bytes(data, size, 0)};
        ok = write_all(fd, &h, sizeof h) && write_all(fd, data, size);
        ok = close(fd) == 0 && ok;
        if (ok) ok = renameat(dfd, tmp, dfd, name) == 0;
        if (!ok) unlinkat(dfd, tmp, 0);
    }
    close(dfd);
    return ok;
}
