/*
 * fakenvtx.c — an NVTX injection library for host tests (libfakenvtx.so): what a profiler such
 * as Nsight Systems is to NVTX, reduced to a list of what it was given.
 *
 * A process started with NVTX_INJECTION64_PATH naming this library loads it at its first NVTX
 * call, and calls InitializeInjectionNvtx2, which points the domain functions (NVTX's CORE2
 * module) here. Every range push and pop and every mark is kept in order, with the calling
 * thread, the domain's name, the message (registered strings are resolved) and the payload;
 * a test reads them through fakenvtx_count and fakenvtx_get (dlsym in the same process).
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_EVENTS 65536

typedef struct fakenvtx_event {
    char what;           /* '(' push, ')' pop, '!' mark */
    long tid;            /* the calling thread */
    const char *domain;  /* the domain's name ("" for the default domain) */
    const char *message; /* "" for a pop */
    int64_t payload;     /* -1: none */
} fakenvtx_event_t;

typedef struct domain {
    char *name;
} domain_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fakenvtx_event_t events[MAX_EVENTS];
static size_t nevents, dropped;

static const char *message_of(const nvtxEventAttributes_t *e)
{
    if (!e) return "";
    switch (e->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return e->message.ascii ? strdup(e->message.ascii) : "";
    case NVTX_MESSAGE_TYPE_REGISTERED: return e->message.registered ? (const char *)e->message.registered : "";
    default: return "?";
    }
}

static void keep(char what, nvtxDomainHandle_t d, const nvtxEventAttributes_t *e)
{
    fakenvtx_event_t ev = {
        .what = what,
        .tid = (long)syscall(SYS_gettid),
        .domain = d ? ((const domain_t *)d)->name : "",
        .message = message_of(e),
        .payload = e && e->payloadType == NVTX_PAYLOAD_TYPE_INT64 ? e->payload.llValue : -1,
    };
    pthread_mutex_lock(&lock);
    if (nevents < MAX_EVENTS) events[nevents++] = ev;
    else dropped++;
    pthread_mutex_unlock(&lock);
}

static int push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *e)
{
    keep('(', d, e);
    return 0;
}

static int pop(nvtxDomainHandle_t d)
{
    keep(')', d, NULL);
    return 0;
}

static void mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *e)
{
    keep('!', d, e);
}

static nvtxDomainHandle_t create(const char *name)
{
    domain_t *d = calloc(1, sizeof *d);
    d->name = strdup(name ? name : "");
    return (nvtxDomainHandle_t)d;
}

/* A registered string's handle is the string itself, kept for the process's life. */
static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    return (nvtxStringHandle_t)strdup(s ? s : "");
}

static void name_category(nvtxDomainHandle_t d, uint32_t id, const char *name)
{
    (void)d, (void)id, (void)name;
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable t = NULL;
    unsigned int n = 0;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) || !t) return 0;
    if (n > NVTX_CBID_CORE2_DomainRangePushEx) *t[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)push;
    if (n > NVTX_CBID_CORE2_DomainRangePop) *t[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)pop;
    if (n > NVTX_CBID_CORE2_DomainMarkEx) *t[NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)mark;
    if (n > NVTX_CBID_CORE2_DomainCreateA) *t[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)create;
    if (n > NVTX_CBID_CORE2_DomainRegisterStringA)
        *t[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)register_string;
    if (n > NVTX_CBID_CORE2_DomainNameCategoryA)
        *t[NVTX_CBID_CORE2_DomainNameCategoryA] = (NvtxFunctionPointer)name_category;
    return 1;
}

/* Events kept so far (and, in *lost, those past MAX_EVENTS). */
EXPORT size_t fakenvtx_count(size_t *lost)
{
    pthread_mutex_lock(&lock);
    size_t n = nevents;
    if (lost) *lost = dropped;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Event i, in the order they came: what ('(' push, ')' pop, '!' mark), the thread, the domain,
 * the message, the payload (-1: none). */
EXPORT void fakenvtx_get(size_t i, char *what, long *tid, const char **domain, const char **message, int64_t *payload)
{
    pthread_mutex_lock(&lock);
    fakenvtx_event_t e = i < nevents ? events[i] : (fakenvtx_event_t){0};
    pthread_mutex_unlock(&lock);
    *what = e.what, *tid = e.tid, *domain = e.domain, *message = e.message, *payload = e.payload;
}
