/* cgj_base.c — the panic, the clock, string copy and byte hashing, and the count of cgjit's own driver calls, shared by
 * every module. */
#include "base/cgj_base.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__thread unsigned cgj_internal_calls;

void cgj_panic(const char *file, int line, const char *msg)
{
    fprintf(stderr, "cgjit: internal error at %s:%d: %s\n", file, line, msg);
    fflush(stderr);
    abort();
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

bool cgj_spawn(void *(*fn)(void *))
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the mask */
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    bool up = pthread_create(&th, &at, fn, NULL) == 0;
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return up;
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
