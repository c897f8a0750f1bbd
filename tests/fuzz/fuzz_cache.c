/*
 * fuzz_cache.c — libFuzzer harness for loading a disk-cache entry (fusion/cache.c). Each input
 * is the bytes of an entry file. Two paths must agree on it:
 *  - cgj_fusion_cache_payload, the pure check of an entry's bytes (header, length, checksum);
 *  - cgj_fusion_cache_read of the same bytes written as KEY.cubin (0600) in a private folder of
 *    the harness's own (made at start, removed at exit), which adds the file's checks.
 * Both accept the input or both refuse it, and what is accepted is the bytes after the 24-byte
 * header, all of them. A disagreement aborts (a finding).
 *
 *     fuzz_cache -max_total_time=60 tests/fuzz/corpus/cache
 */
#define _GNU_SOURCE
#include "base/mem.h"
#include "fusion/fusion.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "0123456789abcdef"
#define HEADER 24

static char dir[64], path[128];

static void cleanup(void)
{
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "/tmp/cgj_fuzz_cache_XXXXXX");
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/%s.cubin", dir, KEY);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    size_t n = 0;
    const unsigned char *p = cgj_fusion_cache_payload(data, size, &n);
    if (p && (p != data + HEADER || n != size - HEADER)) abort();

    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) abort();
    close(fd);
    size_t m = 0;
    void *q = cgj_fusion_cache_read(dir, KEY, &m);
    if (!p != !q || (q && (m != n || memcmp(q, p, n)))) abort();
    cgj_free(q);
    return 0;
}
