/*
 * cupti_busy.c — GPU-busy time of a window, from CUPTI activity records (see cupti_busy.h).
 *
 * CUPTI hands records over in buffers the program provides: buffer_requested() gives it one,
 * buffer_completed() (called by CUPTI's worker thread, or by cuptiActivityFlushAll in the
 * caller's) walks the records and keeps each kernel's, copy's and memset's [start, end) in
 * `spans`, under a lock. bench_busy_end() then sorts the spans by start and sums their union.
 * The three record types keep start and end at the same place in every version CUPTI has had
 * since CUDA 11 (checked below against the previous version), so records of a libcupti a
 * little older than the header read the same.
 *
 * cgjit and CUPTI in one process: CUPTI loads the driver with dlopen/dlsym like the CUDA
 * runtime does, so the driver functions it looks up that cgjit wraps come back as cgjit's
 * wrappers. The bench marks its steps (cgj_trace_begin), so implicit step finding is off and
 * CUPTI's own calls, made outside those marks or on CUPTI's thread, are passed straight through;
 * the bench checks that every step of a busy window was still replayed whole.
 */
#include "cupti_busy.h"

#include <cupti.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(offsetof(CUpti_ActivityKernel10, start) == offsetof(CUpti_ActivityKernel9, start) &&
                   offsetof(CUpti_ActivityKernel10, end) == offsetof(CUpti_ActivityKernel9, end),
               "kernel records moved their timestamps");
_Static_assert(offsetof(CUpti_ActivityMemcpy6, start) == offsetof(CUpti_ActivityMemcpy5, start) &&
                   offsetof(CUpti_ActivityMemcpy6, end) == offsetof(CUpti_ActivityMemcpy5, end),
               "copy records moved their timestamps");
_Static_assert(offsetof(CUpti_ActivityMemset4, start) == offsetof(CUpti_ActivityMemset3, start) &&
                   offsetof(CUpti_ActivityMemset4, end) == offsetof(CUpti_ActivityMemset3, end),
               "memset records moved their timestamps");

enum { BUFFER_BYTES = 8u << 20, ALIGN = 8 };

static const CUpti_ActivityKind KINDS[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET};
static const char *const KIND_NAMES[] = {"CONCURRENT_KERNEL", "MEMCPY", "MEMSET"};
enum { NKINDS = sizeof KINDS / sizeof KINDS[0] };

typedef struct span {
    uint64_t start, end;
} span_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static span_t *spans; /* under lock */
static size_t nspans, cap;
static size_t dropped;    /* records CUPTI had no room for; under lock */
static int out_of_memory; /* a span could not be kept; under lock */
static int attached;      /* callbacks registered since the last cuptiFinalize */
static char broken[256];  /* why CUPTI cannot be used in this process, once it failed */

static void keep_span(uint64_t start, uint64_t end)
{
    if (start == 0 && end == 0) /* CUPTI could not time this one */
        return;
    if (nspans == cap) {
        size_t ncap = cap ? 2 * cap : 4096;
        span_t *p = (span_t *)realloc(spans, ncap * sizeof *p);
        if (!p) {
            out_of_memory = 1;
            return;
        }
        spans = p;
        cap = ncap;
    }
    spans[nspans].start = start;
    spans[nspans++].end = end > start ? end : start;
}

static void keep_record(const CUpti_Activity *r)
{
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        keep_span(k->start, k->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *c = (const CUpti_ActivityMemcpy6 *)r;
        keep_span(c->start, c->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
        keep_span(m->start, m->end);
        break;
    }
    default: break;
    }
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = (uint8_t *)aligned_alloc(ALIGN, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0; /* no buffer: CUPTI drops records and counts them */
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) keep_record(r);
    size_t d = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &d) == CUPTI_SUCCESS) dropped += d;
    pthread_mutex_unlock(&lock);
    free(buffer);
}

/* Record what failed; returns -1. */
static int fail(char *why, size_t len, const char *call, CUptiResult res)
{
    const char *s = NULL;
    if (cuptiGetResultString(res, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
    snprintf(broken, sizeof broken, "%s: %s", call, s);
    snprintf(why, len, "%s", broken);
    return -1;
}

int bench_busy_begin(char *why, size_t len)
{
    if (broken[0]) {
        snprintf(why, len, "%s", broken);
        return -1;
    }
    if (!attached) {
        CUptiResult res = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (res != CUPTI_SUCCESS) return fail(why, len, "cuptiActivityRegisterCallbacks", res);
        attached = 1;
    }
    pthread_mutex_lock(&lock);
    nspans = 0;
    dropped = 0;
    out_of_memory = 0;
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < NKINDS; i++) {
        CUptiResult res = cuptiActivityEnable(KINDS[i]);
        if (res != CUPTI_SUCCESS) {
            char call[64];
            snprintf(call, sizeof call, "cuptiActivityEnable(%s)", KIND_NAMES[i]);
            for (int j = 0; j < i; j++) cuptiActivityDisable(KINDS[j]);
            return fail(why, len, call, res);
        }
    }
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const span_t *x = (const span_t *)a, *y = (const span_t *)b;
    return (x->start > y->start) - (x->start < y->start);
}

/* The length of the union of spans[0..n-1]; sorts them. */
static uint64_t union_ns(span_t *s, size_t n)
{
    qsort(s, n, sizeof *s, by_start);
    uint64_t total = 0;
    for (size_t i = 0; i < n;) {
        uint64_t lo = s[i].start, hi = s[i].end;
        for (i++; i < n && s[i].start <= hi; i++) hi = s[i].end > hi ? s[i].end : hi;
        total += hi - lo;
    }
    return total;
}

int bench_busy_end(uint64_t *busy_ns, uint64_t *records, char *why, size_t len)
{
    for (int i = 0; i < NKINDS; i++) cuptiActivityDisable(KINDS[i]);
    CUptiResult res = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (res != CUPTI_SUCCESS) return fail(why, len, "cuptiActivityFlushAll", res);
    pthread_mutex_lock(&lock);
    *records = nspans;
    *busy_ns = union_ns(spans, nspans);
    size_t d = dropped;
    int oom = out_of_memory;
    pthread_mutex_unlock(&lock);
    if (d || oom) {
        snprintf(why, len, "%zu activity records dropped%s", d, oom ? ", out of host memory" : "");
        return -1;
    }
    return 0;
}

void bench_busy_detach(void)
{
    if (!attached) return;
    CUptiResult res = cuptiFinalize();
    attached = 0;
    if (res != CUPTI_SUCCESS) { /* attached still, perhaps: measure no more, time nothing with it */
        char why[256];
        fail(why, sizeof why, "cuptiFinalize", res);
    }
}
