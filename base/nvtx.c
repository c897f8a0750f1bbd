/*
 * nvtx.c — cgjit's ranges and marks in the NVTX domain "cgjit" (base/nvtx.h).
 *
 * NVTX3 is header-only: its first call looks for a profiler's injection library
 * (NVTX_INJECTION64_PATH, set by Nsight Systems) and hands it the calls from then on; with none,
 * every call returns at once. Nothing here runs unless CGJIT_NVTX=1, so that without it no
 * injection library is loaded on cgjit's behalf. cgjit's first NVTX call (the domain's creation)
 * waits for its first range or mark, on the thread that makes it: never at cgjit's start, which
 * may run inside a dlsym of a profiler that is setting itself up (CUPTI subscribing looks up
 * driver functions), where loading that profiler's NVTX side would re-enter it.
 */
#define _GNU_SOURCE /* secure_getenv */
#include "base/nvtx.h"
#include "base/config.h"
#include "base/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* libcgjit defines dlsym itself (runtime/interpose.c): NVTX finds the injection library's entry
 * point with the real one, which the driver's loading found. And it reads NVTX_INJECTION64_PATH
 * as cgjit reads every path from the environment: with secure_getenv (a set-user-ID program
 * loads no injection library named there). */
static void *real_dlsym(void *handle, const char *name)
{
    return cgj_driver_dlsym ? cgj_driver_dlsym(handle, name) : NULL;
}
#define dlsym real_dlsym
#define getenv secure_getenv
#include <nvtx3/nvToolsExt.h>
#undef getenv
#undef dlsym

bool cgj_nvtx_on;

static nvtxDomainHandle_t domain;

static const char *const kind_word[] = {
#define CGJ_NVTX_KIND_WORD(name, what, argb) what,
    CGJ_NVTX_KIND_LIST(CGJ_NVTX_KIND_WORD)
#undef CGJ_NVTX_KIND_WORD
};
static const uint32_t kind_argb[] = {
#define CGJ_NVTX_KIND_ARGB(name, what, argb) argb,
    CGJ_NVTX_KIND_LIST(CGJ_NVTX_KIND_ARGB)
#undef CGJ_NVTX_KIND_ARGB
};

/* This thread's registered names: "<kind's word> <anchor>" by kind and the anchor's name's
 * address (anchors live as long as the process; a mark's `what` is a literal). Direct-mapped; a
 * collision registers the name again, which NVTX allows. */
#define NAME_CACHE 64
static __thread struct {
    const char *key;
    int kind; /* 0: empty; else kind + 1 */
    nvtxStringHandle_t handle;
} names[NAME_CACHE];

/* The range of a whole step's run that is open on this thread (-1: none). */
static __thread int step_kind = -1;

static pthread_once_t domain_once = PTHREAD_ONCE_INIT;

static void create_domain(void)
{
    domain = nvtxDomainCreateA("cgjit");
    for (int k = 0; k < CGJ_NVTX_KIND_COUNT; k++) nvtxDomainNameCategoryA(domain, (uint32_t)k + 1, kind_word[k]);
}

/* The domain, created by the first range or mark. */
static nvtxDomainHandle_t the_domain(void)
{
    pthread_once(&domain_once, create_domain);
    return domain;
}

void cgj_nvtx_init(void)
{
    if (!cgj_cfg.NVTX || cgj_nvtx_on) return;
    cgj_nvtx_on = true; /* before any step: the runtime starts here; no NVTX call yet */
}

static nvtxStringHandle_t name_of(cgj_nvtx_kind_t kind, const char *key)
{
    uintptr_t h = ((uintptr_t)key >> 4) * 31 + (uintptr_t)kind;
    size_t i = (size_t)(cgj_mix64(h) % NAME_CACHE);
    if (names[i].kind == (int)kind + 1 && names[i].key == key) return names[i].handle;
    char text[192];
    if (key) snprintf(text, sizeof text, "%s %s", kind_word[kind], key);
    else snprintf(text, sizeof text, "%s", kind_word[kind]);
    names[i].key = key;
    names[i].kind = (int)kind + 1;
    names[i].handle = nvtxDomainRegisterStringA(the_domain(), text);
    return names[i].handle;
}

static nvtxEventAttributes_t attributes(cgj_nvtx_kind_t kind, const char *key, int64_t number)
{
    nvtxEventAttributes_t e = {0};
    e.version = NVTX_VERSION;
    e.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    e.category = (uint32_t)kind + 1;
    e.colorType = NVTX_COLOR_ARGB;
    e.color = kind_argb[kind];
    e.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    e.message.registered = name_of(kind, key);
    if (number != CGJ_NVTX_NO_NUMBER) {
        e.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        e.payload.llValue = number;
    }
    return e;
}

void cgj_nvtx_push_slow(cgj_nvtx_kind_t kind, const char *anchor, int64_t number)
{
    nvtxEventAttributes_t e = attributes(kind, anchor, number);
    nvtxDomainRangePushEx(the_domain(), &e);
}

void cgj_nvtx_pop_slow(void)
{
    nvtxDomainRangePop(domain);
}

void cgj_nvtx_mark_slow(cgj_nvtx_kind_t kind, const char *what, int64_t number)
{
    nvtxEventAttributes_t e = attributes(kind, what, number);
    nvtxDomainMarkEx(the_domain(), &e);
}

void cgj_nvtx_step_open_slow(cgj_nvtx_kind_t kind, const char *anchor)
{
    if (step_kind == (int)kind) return;
    if (step_kind >= 0) nvtxDomainRangePop(domain); /* a step that ended without closing it */
    cgj_nvtx_push_slow(kind, anchor, CGJ_NVTX_NO_NUMBER);
    step_kind = (int)kind;
}

void cgj_nvtx_step_close_slow(cgj_nvtx_kind_t kind)
{
    if (step_kind != (int)kind) return;
    nvtxDomainRangePop(domain);
    step_kind = -1;
}
