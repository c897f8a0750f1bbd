/*
 * cgj_base.h — what every cgjit module needs: assertions, branch hints, small helpers.
 *
 * Failure tiers: a broken invariant aborts with file, line and message
 * (CGJ_ASSERT); a trace that cannot continue aborts the trace, never the program; a CUDA error
 * from the application's own call is returned to it unchanged.
 */
#ifndef CGJ_BASE_H
#define CGJ_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define CGJ_LIKELY(x) __builtin_expect(!!(x), 1)
#define CGJ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CGJ_INTERNAL __attribute__((visibility("hidden")))
#define CGJ_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Abort the process: only for a broken invariant of cgjit itself. */
void cgj_panic(const char *file, int line, const char *msg) __attribute__((noreturn));
#define CGJ_ASSERT(cond, msg)                                          \
    do {                                                               \
        if (CGJ_UNLIKELY(!(cond))) cgj_panic(__FILE__, __LINE__, msg); \
    } while (0)

#include "base/mem.h"

/* Copy src into dst[n], truncating; always terminated. */
void cgj_strlcpy(char *dst, const char *src, size_t n);

/* Monotonic clock in nanoseconds. */
uint64_t cgj_now_ns(void);

/* A detached thread of cgjit's running fn(NULL), started with every signal blocked (the
 * program's handlers run on its own threads); true where it runs. */
bool cgj_spawn(void *(*fn)(void *));

/* FNV-1a over bytes, for anchor names and signatures. */
uint64_t cgj_hash_bytes(const void *p, size_t n, uint64_t seed);

/* The finalizer of MurmurHash3: every bit of x reaches every bit of the result. */
static inline uint64_t cgj_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* One 64-bit word into a running hash: a dozen instructions where cgj_hash_bytes takes four a
 * byte. For hashes taken on every call (the cycle detector's signatures) and never written
 * anywhere that outlives the process. */
static inline uint64_t cgj_hash_word(uint64_t v, uint64_t seed)
{
    return cgj_mix64(seed ^ (v * 0x9e3779b97f4a7c15ull));
}

/* Calls cgjit itself is making on this thread into a library (fusion/'s cuBLASLt matmuls, at
 * build and when a side exit re-issues one): while nonzero, the driver and library wrappers
 * forward everything at once, so that nothing the library does is taken for the program's. */
extern __thread unsigned cgj_internal_calls;

#endif /* CGJ_BASE_H */
