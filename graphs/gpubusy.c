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

/* ---- the accounting ---- */

#define SERIAL_BITS 40
#define SERIAL_MASK ((1ull << SERIAL_BITS) - 1)
#define CORR_SLOTS (1u << 16) /* driver calls whose external id is remembered (the last ones) */
#define MAX_PIECES (1u << 16) /* intervals one step keeps before merging them */

typedef struct piece {
    uint64_t start, end;
} piece_t;

typedef struct step_acc {
    uint64_t serial; /* the step open now */
    bool open;
    piece_t *pieces;
    uint32_t n, cap;
    uint64_t busy_ns, steps; /* closed steps */
} step_acc_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint32_t corr;
    uint64_t ext; /* 0: none */
} corrs[CORR_SLOTS];
static step_acc_t accs[CGJ_GPUBUSY_MAX_IDS];
static uint32_t next_id = 1;

static int by_start(const void *x, const void *y)
{
    const piece_t *a = x, *b = y;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* Merge s's pieces into their union, in place; the union's length. */
static uint64_t merge(step_acc_t *s)
{
    if (!s->n) return 0;
    qsort(s->pieces, s->n, sizeof *s->pieces, by_start);
    uint32_t k = 0;
    for (uint32_t i = 1; i < s->n; i++) {
        if (s->pieces[i].start <= s->pieces[k].end) {
            if (s->pieces[i].end > s->pieces[k].end) s->pieces[k].end = s->pieces[i].end;
        } else {
            s->pieces[++k] = s->pieces[i];
        }
    }
    s->n = k + 1;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < s->n; i++) sum += s->pieces[i].end - s->pieces[i].start;
    return sum;
}

static void close_step(step_acc_t *s)
{
    if (!s->open) return;
    s->busy_ns += merge(s);
    s->steps++;
    s->n = 0;
    s->open = false;
}

void cgj_gpubusy_note_external(uint32_t correlation, uint64_t external)
{
    pthread_mutex_lock(&lock);
    corrs[correlation % CORR_SLOTS].corr = correlation;
    corrs[correlation % CORR_SLOTS].ext = external;
    pthread_mutex_unlock(&lock);
}

void cgj_gpubusy_note_work(uint32_t correlation, uint64_t start, uint64_t end)
{
    if (end <= start) return;
    pthread_mutex_lock(&lock);
    uint64_t ext = corrs[correlation % CORR_SLOTS].corr == correlation ? corrs[correlation % CORR_SLOTS].ext : 0;
    uint32_t id = (uint32_t)(ext >> SERIAL_BITS);
    if (!ext || !id || id >= CGJ_GPUBUSY_MAX_IDS) goto out;
    step_acc_t *s = &accs[id];
    uint64_t serial = ext & SERIAL_MASK;
    if (s->open && serial != s->serial) {
        if (serial < s->serial) goto out; /* a step already closed: late, left out */
        close_step(s);
    }
    if (!s->open) s->open = true, s->serial = serial, s->n = 0;
    if (s->n == s->cap) {
        if (s->cap >= MAX_PIECES) merge(s); /* keeps the union, in fewer pieces */
        if (s->n == s->cap) {
            uint32_t cap = s->cap ? 2 * s->cap : 64;
            piece_t *p = realloc(s->pieces, cap * sizeof *p);
            if (!p) goto out;
            s->pieces = p, s->cap = cap;
        }
    }
    s->pieces[s->n++] = (piece_t){start, end};
out:
    pthread_mutex_unlock(&lock);
}

void cgj_gpubusy_settle(void)
{
    pthread_mutex_lock(&lock);
    for (uint32_t i = 1; i < CGJ_GPUBUSY_MAX_IDS; i++) close_step(&accs[i]);
    pthread_mutex_unlock(&lock);
}

void cgj_gpubusy_reset(void)
{
    pthread_mutex_lock(&lock);
    for (uint32_t i = 0; i < CGJ_GPUBUSY_MAX_IDS; i++) {
        free(accs[i].pieces);
        accs[i] = (step_acc_t){0};
    }
    memset(corrs, 0, sizeof corrs);
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
        default:
            break;
        }
    }
    free(buffer);
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
    static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                               CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};
    CUptiResult r = cupti.register_callbacks(buffer_requested, buffer_completed);
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds && r == CUPTI_SUCCESS; i++) r = cupti.enable(kinds[i]);
    if (r != CUPTI_SUCCESS) {
        const char *text = NULL;
        if (!cupti.result_string || cupti.result_string(r, &text) != CUPTI_SUCCESS || !text) text = "no text";
        snprintf(status, sizeof status, "CUPTI refused its activity records (error %d: %s; no GPU, or another profiler holds them)",
                 (int)r, text);
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
    if (enabled && id) cupti.push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, ((uint64_t)id << SERIAL_BITS) | (serial & SERIAL_MASK));
}

void cgj_gpubusy_pop(void)
{
    uint64_t last;
    if (enabled) cupti.pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

bool cgj_gpubusy_figures(uint32_t id, uint64_t *busy_ns, uint64_t *steps)
{
    *busy_ns = *steps = 0;
    if (!id || id >= CGJ_GPUBUSY_MAX_IDS) return false;
    if (enabled) cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&lock);
    /* The open step's records may not all be in; only closed steps count. */
    *busy_ns = accs[id].busy_ns, *steps = accs[id].steps;
    pthread_mutex_unlock(&lock);
    return *steps != 0;
}
