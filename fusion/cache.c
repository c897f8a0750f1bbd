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
 * kernel is compiled and stored again. Files are created 0600 in a 0700 folder, never through
 * a symbolic link.
 */
#include "fusion/fusion.h"
#include "base/config.h"
#include "base/file.h"
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
    const char *dir = cgj_cfg.CACHE_DIR, *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
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

void *cgj_fusion_cache_read(const char *dir, const char *key, size_t *size)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    header_t h;
    struct stat sb;
    void *data = NULL;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && read(fd, &h, sizeof h) == (ssize_t)sizeof h && h.magic == MAGIC &&
        h.format == FORMAT && h.size && h.size <= MAX_ENTRY && (uint64_t)sb.st_size == sizeof h + h.size) {
        data = cgj_xmalloc(h.size);
        if (read(fd, data, h.size) != (ssize_t)h.size || cgj_hash_bytes(data, h.size, 0) != h.sum) {
            cgj_free(data);
            data = NULL;
        }
    }
    close(fd);
    if (data) *size = h.size;
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
    if (!dir[0] || !size || size > MAX_ENTRY || !make_dirs(dir)) return false;
    static unsigned serial;
    char tmp[1200], path[1200];
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld.%u.tmp", dir, key, (long)getpid(),
             __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    header_t h = {.magic = MAGIC, .format = FORMAT, .size = size, .sum = cgj_hash_bytes(data, size, 0)};
    bool ok = write_all(fd, &h, sizeof h) && write_all(fd, data, size);
    ok = close(fd) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) unlink(tmp);
    return ok;
}
