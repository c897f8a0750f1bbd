/* gpubusy.c — GPU-busy time per replayed step through CUPTI's activity API; see gpubusy.h. */
#define _GNU_SOURCE
#include "graphs/gpubusy.h"
#include "base/cgj_base.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"

#include <cupti_activity.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the accounting ----
 *
 * CUPTI delivers its records in buffers that complete independently: those of the driver calls
 * and their external ids in one (no context), a context's kernels, copies and memsets in others,
 * so a kernel's record may come before or after the record saying which step launched it. So:
 *  - each API call's correlation id (a driver call, or a runtime call with the driver calls it
 *    makes) is looked up in a table filled from both the external id records (tagged: this
 *    anchor, this step) and the API records (a call with no external id before its API record
 *    carries none: CUPTI writes the one right before the other);
 *  - a piece of work whose call is not known yet waits in a pending list, resolved after each
 *    buffer; one whose call is known untagged is dropped (the program's own eager work);
 *  - resolved work is kept per anchor with its step's serial; the union of a step's pieces is
 *    taken when its steps are settled: at a report, or, once an anchor holds many pieces, for all
 *    but its newest STEPS_OPEN steps (whose records may still be coming). */

#define SERIAL_BITS 40
#define SERIAL_MASK ((1ull << SERIAL_BITS) - 1)
#define CORR_SLOTS (1u << 20) /* driver calls remembered (the last ones) */
#define UNTAGGED UINT64_MAX
#define MAX_PENDING (1u << 20)
#define SETTLE_AT (1u << 16) /* pieces an anchor holds before its older steps are settled */
#define STEPS_OPEN 4

typedef struct piece {
    uint64_t serial, start, end;
} piece_t;

typedef struct id_acc {
    piece_t *pieces;
    uint32_t n, cap;
    uint64_t settled_below; /* steps before this serial are counted; later pieces of theirs dropped */
    uint64_t newest;        /* the newest serial seen */
    uint32_t settle_at;     /* pieces held before the older steps are settled (SETTLE_AT, doubled
                             * while the newest steps alone hold that many) */
    uint64_t busy_ns, steps;
} id_acc_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct corr {
    uint32_t corr;
    uint64_t ext; /* 0: unknown yet, UNTAGGED, or the external id */
} * corrs;
static struct pend {
    uint32_t corr;
    uint64_t start, end;
} * pending;
static uint32_t npending;
static id_acc_t accs[CGJ_GPUBUSY_MAX_IDS];
static uint32_t next_id = 1;
static uint64_t dropped; /* pieces never attributed (too many pending) */
static struct {
    uint64_t calls, tagged, work, untagged, uncorrelated, counted, late;
} seen; /* what the records said, for the report (cgj_gpubusy_describe) */

static bool tables(void)
{
    if (!corrs) corrs = calloc(CORR_SLOTS, sizeof *corrs);
    if (!pending) pending = malloc(MAX_PENDING * sizeof *pending);
    return corrs && pending;
}

static int by_serial_start(const void *x, const void *y)
{
    const piece_t *a = x, *b = y;
    if (a->serial != b->serial) return a->serial < b->serial ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* Count the steps of s before serial `below` (all of them: UINT64_MAX): the union of each
 * step's pieces; the pieces of later steps stay. */
static void settle_below(id_acc_t *s, uint64_t below)
{
    qsort(s->pieces, s->n, sizeof *s->pieces, by_serial_start);
    uint32_t i = 0, kept = 0;
    while (i < s->n && s->pieces[i].serial < below) {
        uint64_t serial = s->pieces[i].serial, end = 0, sum = 0;
        for (; i < s->n && s->pieces[i].serial == serial; i++) {
            const piece_t *p = &s->pieces[i];
            uint64_t from = p->start > end ? p->start : end;
            if (p->end > from) sum += p->end - from;
            if (p->end > end) end = p->end;
        }
        s->busy_ns += sum;
        s->steps++;
        if (serial + 1 > s->settled_below) s->settled_below = serial + 1;
    }
    for (; i < s->n; i++) s->pieces[kept++] = s->pieces[i];
    s->n = kept;
}

static void add_piece(uint64_t ext, uint64_t start, uint64_t end)
{
    uint32_t id = (uint32_t)(ext >> SERIAL_BITS);
    if (!id || id >= CGJ_GPUBUSY_MAX_IDS) return;
    id_acc_t *s = &accs[id];
    uint64_t serial = ext & SERIAL_MASK;
    /* a step already counted: late, left out */
    if (serial < s->settled_below) {
        seen.late++;
        return;
    }
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 256;
        piece_t *p = realloc(s->pieces, cap * sizeof *p);
        if (!p) return;
        s->pieces = p, s->cap = cap;
    }
    s->pieces[s->n++] = (piece_t){serial, start, end};
    seen.counted++;
    if (serial > s->newest) s->newest = serial;
    if (!s->settle_at) s->settle_at = SETTLE_AT;
    if (s->n >= s->settle_at) {
        settle_below(s, s->newest >= STEPS_OPEN ? s->newest - STEPS_OPEN + 1 : 0);
        s->settle_at = s->n >= SETTLE_AT / 2 ? 2 * s->n : SETTLE_AT;
    }
}

/* What the call `corr` carries: 0 not known yet, UNTAGGED, or its external id. */
static uint64_t carried(uint32_t corr)
{
    const struct corr *c = &corrs[corr % CORR_SLOTS];
    return c->corr == corr ? c->ext : 0;
}

/* Attribute the pending pieces whose calls are known now. */
static void resolve_pending(void)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < npending; i++) {
        uint64_t ext = carried(pending[i].corr);
        if (!ext) pending[kept++] = pending[i];
        else if (ext != UNTAGGED) add_piece(ext, pending[i].start, pending[i].end);
    }
    npending = kept;
}

void cgj_gpubusy_note_external(uint32_t correlation, uint64_t external)
{
    pthread_mutex_lock(&lock);
    if (tables() && external && external != UNTAGGED) {
        corrs[correlation % CORR_SLOTS] = (struct corr){correlation, external};
        seen.tagged++;
    }
    pthread_mutex_unlock(&lock);
}

void cgj_gpubusy_note_call(uint32_t correlation)
{
    pthread_mutex_lock(&lock);
    seen.calls++;
    if (tables() && carried(correlation) == 0) corrs[correlation % CORR_SLOTS] = (struct corr){correlation, UNTAGGED};
    pthread_mutex_unlock(&lock);
}

void cgj_gpubusy_note_work(uint32_t correlation, uint64_t start, uint64_t end)
{
    if (end <= start) return;
    pthread_mutex_lock(&lock);
    if (!tables()) goto out;
    seen.work++;
    if (!correlation) { /* work CUPTI ties to no call */
        seen.uncorrelated++;
        goto out;
    }
    uint64_t ext = carried(correlation);
    if (ext == UNTAGGED) {
        seen.untagged++;
        goto out;
    }
    if (ext) {
        add_piece(ext, start, end);
    } else if (npending < MAX_PENDING) {
        pending[npending++] = (struct pend){correlation, start, end};
    } else {
        dropped++;
    }
out:
    pthread_mutex_unlock(&lock);
}

void cgj_gpubusy_resolve(void)
{
    pthread_mutex_lock(&lock);
    if (pending) resolve_pending();
    pthread_mutex_unlock(&lock);
}

void cgj_gpubusy_reset(void)
{
    pthread_mutex_lock(&lock);
    for (uint32_t i = 0; i < CGJ_GPUBUSY_MAX_IDS; i++) {
        free(accs[i].pieces);
        accs[i] = (id_acc_t){0};
    }
    if (corrs) memset(corrs, 0, CORR_SLOTS * sizeof *corrs);
    npending = 0;
    dropped = 0;
    memset(&seen, 0, sizeof seen);
    next_id = 1;
    pthread_mutex_unlock(&lock);
}

uint32_t cgj_gpubusy_id(void)
{
    pthread_mutex_lock(&lock);
    uint32_t id = next_id < CGJ_GPUBUSY_MAX_IDS ? next_id++ : 0;
    pthread_mutex_unlock(&lock);
    return id;
}

/* ---- CUPTI ---- */

#define BUFFER_BYTES (1u << 20)

static struct {
    CUptiResult (*get_version)(uint32_t *);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*push)(CUpti_ExternalCorrelationKind, uint64_t);
    CUptiResult (*pop)(CUpti_ExternalCorrelationKind, uint64_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
} cupti;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled;
static char status[200];

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (buffer && cupti.next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            const CUpti_ActivityExternalCorrelation *e = (const void *)r;
            if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
                cgj_gpubusy_note_external(e->correlationId, e->externalId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const void *)r;
            cgj_gpubusy_note_work(k->correlationId, k->start, k->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const void *)r;
            cgj_gpubusy_note_work(m->correlationId, m->start, m->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const void *)r;
            cgj_gpubusy_note_work(m->correlationId, m->start, m->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            const CUpti_ActivityAPI *a = (const void *)r;
            cgj_gpubusy_note_call(a->correlationId);
            break;
        }
        default: break;
        }
    }
    free(buffer);
    cgj_gpubusy_resolve();
}

static void *load(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

static void init(void)
{
    void *h = load();
    if (!h) {
        snprintf(status, sizeof status, "CUPTI (libcupti.so.13) not found: put its folder in LD_LIBRARY_PATH");
        goto fail;
    }
    /* libcgjit defines dlsym itself (runtime/interpose.c): the real one resolves CUPTI's names. */
    void *(*sym)(void *, const char *) = cgj_driver_dlsym;
    if (!sym) {
        snprintf(status, sizeof status, "the CUDA driver is not loaded");
        goto fail;
    }
#define SYM(field, name) *(void **)&cupti.field = sym(h, name)
    SYM(get_version, "cuptiGetVersion");
    SYM(enable, "cuptiActivityEnable");
    SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
    SYM(next_record, "cuptiActivityGetNextRecord");
    SYM(flush_all, "cuptiActivityFlushAll");
    SYM(push, "cuptiActivityPushExternalCorrelationId");
    SYM(pop, "cuptiActivityPopExternalCorrelationId");
    SYM(result_string, "cuptiGetResultString");
#undef SYM
    if (!cupti.get_version || !cupti.enable || !cupti.register_callbacks || !cupti.next_record || !cupti.flush_all ||
        !cupti.push || !cupti.pop) {
        snprintf(status, sizeof status, "CUPTI lacks the activity API's functions");
        goto fail;
    }
    /* The records are read through this build's structs: another CUPTI may lay them out anew. */
    uint32_t v = 0;
    if (cupti.get_version(&v) != CUPTI_SUCCESS || v != CUPTI_API_VERSION) {
        snprintf(status, sizeof status, "CUPTI API version %u, cgjit was built for %u", v, (unsigned)CUPTI_API_VERSION);
        goto fail;
    }
    /* RUNTIME too: a driver call made inside a runtime call (a program on the CUDA runtime, with
     * cgjit's graph launch in the driver call the runtime makes) has no record of its own; its
     * work carries the runtime call's correlation id, and that call's record its external id. */
    static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_DRIVER,
                                               CUPTI_ACTIVITY_KIND_RUNTIME,
                                               CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                               CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                               CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};
    CUptiResult r = cupti.register_callbacks(buffer_requested, buffer_completed);
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds && r == CUPTI_SUCCESS; i++) r = cupti.enable(kinds[i]);
    if (r != CUPTI_SUCCESS) {
        const char *text = NULL;
        if (!cupti.result_string || cupti.result_string(r, &text) != CUPTI_SUCCESS || !text) text = "no text";
        snprintf(status, sizeof status,
                 "CUPTI refused its activity records (error %d: %s; no GPU, or another profiler holds them)", (int)r,
                 text);
        goto fail;
    }
    enabled = true;
    return;
fail:
    fprintf(stderr, "cgjit: CGJIT_BUSY: %s; GPU-busy time is not measured\n", status);
}

bool cgj_gpubusy_on(void)
{
    if (!cgj_cfg.BUSY) return false;
    pthread_once(&once, init);
    return enabled;
}

const char *cgj_gpubusy_status(void)
{
    return status;
}

void cgj_gpubusy_push(uint32_t id, uint64_t serial)
{
    if (enabled && id)
        cupti.push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, ((uint64_t)id << SERIAL_BITS) | (serial & SERIAL_MASK));
}

void cgj_gpubusy_pop(void)
{
    uint64_t last;
    if (enabled) cupti.pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

const char *cgj_gpubusy_describe(char *buf, size_t len)
{
    pthread_mutex_lock(&lock);
    snprintf(buf, len,
             "%llu CUDA API call(s) recorded, %llu of them in replayed steps; %llu piece(s) of GPU work: %llu counted, "
             "%llu of the program's own calls, %llu naming no call, %llu late, %u waiting for their call, %llu dropped",
             (unsigned long long)seen.calls, (unsigned long long)seen.tagged, (unsigned long long)seen.work,
             (unsigned long long)seen.counted, (unsigned long long)seen.untagged, (unsigned long long)seen.uncorrelated,
             (unsigned long long)seen.late, npending, (unsigned long long)dropped);
    pthread_mutex_unlock(&lock);
    return buf;
}

bool cgj_gpubusy_figures(uint32_t id, uint64_t *busy_ns, uint64_t *steps)
{
    *busy_ns = *steps = 0;
    if (!id || id >= CGJ_GPUBUSY_MAX_IDS) return false;
    if (enabled) cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    /* After a forced flush every record of a finished step is in: count id's (a step still
     * running on the GPU is counted short; a report comes after the program's last sync). Other
     * anchors' steps stay open: their records may still be coming. */
    pthread_mutex_lock(&lock);
    if (pending) resolve_pending();
    if (accs[id].n) settle_below(&accs[id], UINT64_MAX);
    *busy_ns = accs[id].busy_ns, *steps = accs[id].steps;
    pthread_mutex_unlock(&lock);
    return *steps != 0;
}
