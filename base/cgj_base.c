/* cgj_base.c — panic, allocation and clock helpers shared by every module. */
#include "base/cgj_base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cgj_panic(const char *file, int line, const char *msg)
{
    fprintf(stderr, "cgjit: internal error at %s:%d: %s\n", file, line, msg);
    fflush(stderr);
    abort();
}

void *cgj_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    CGJ_ASSERT(p != NULL, "out of host memory");
    return p;
}

void *cgj_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    CGJ_ASSERT(p != NULL, "out of host memory");
    return p;
}

void *cgj_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    CGJ_ASSERT(q != NULL, "out of host memory");
    return q;
}

void *cgj_xmemdup(const void *p, size_t n)
{
    void *q = cgj_xmalloc(n);
    if (n) memcpy(q, p, n);
    return q;
}

char *cgj_xstrdup(const char *s)
{
    return cgj_xmemdup(s, strlen(s) + 1);
}

void cgj_strlcpy(char *dst, const char *src, size_t n)
{
    if (!n) return;
    size_t len = strlen(src);
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

uint64_t cgj_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t cgj_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t h = seed ^ 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
