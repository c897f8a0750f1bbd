/*
 * cupti_calls_probe.c — libcupti_calls_probe.so: every CUDA runtime and driver API call of a
 * process as NVIDIA's CUPTI sees it, with the time it entered and left, to tell where a short
 * timed region of a program spends its host time with and without cgjit
 * (scripts/call-timeline.py reads the file; docs/diagnostics.md says how to run both).
 *
 * Preloaded (after libcgjit.so where cgjit is preloaded too), with CUPTI_CALLS_CUPTI naming
 * libcupti.so and CUPTI_CALLS_OUT the file to write ("%p" is the process id). The constructor
 * opens libcupti and subscribes to CUPTI's callbacks of both API domains (cuptiSubscribe,
 * cuptiEnableDomain); CUPTI_CALLS_SUBSCRIBE=inject subscribes instead where the driver calls
 * InitializeInjection, with CUDA_INJECTION64_PATH naming the probe, as Nsight's tools do. The
 * driver fires the callbacks inside the real functions: cgjit's wrappers are outside them, so a
 * runtime call's time less its driver calls' is host time of the runtime, the libraries and
 * cgjit. At exit it writes one line per callback:
 *
 *     # cupti-calls-probe: subscribed (CUPTI /path/libcupti.so)      or: not subscribed: <why>
 *     NS<TAB>TID<TAB>SITE<TAB>DOMAIN<TAB>NAME<TAB>FAULTS   SITE: E (enter) or X (exit); DOMAIN: r or d
 *     # events N dropped N
 *
 * NS is CLOCK_MONOTONIC in nanoseconds, TID the kernel's thread id, FAULTS the thread's page
 * faults so far (getrusage RUSAGE_THREAD: minor and major). libcupti is opened at run
 * time, never linked. Nothing here ends the process: every failure is a line in the file.
 */
#define _GNU_SOURCE /* dlvsym */
#include <cupti.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS (1u << 21) /* 64 MiB at most; beyond, events are counted as dropped */

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*enable_domain_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);

typedef struct {
    uint64_t ns;
    uint32_t tid;
    char site;
    char domain;
    const char *name; /* CUPTI's own string: it lives as long as libcupti */
    uint64_t faults;
} event_t;

static event_t *events;
static atomic_uint nevents;
static atomic_uint dropped;
static char status[512] = "not subscribed: the probe was never started";
static atomic_int started;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    (void)user;
    (void)cbid;
    uint64_t t = now_ns();
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
    const CUpti_CallbackData *d = data;
    struct rusage ru;
    uint64_t faults = getrusage(RUSAGE_THREAD, &ru) == 0 ? (uint64_t)(ru.ru_minflt + ru.ru_majflt) : 0;
    unsigned i = atomic_fetch_add(&nevents, 1);
    if (i >= MAX_EVENTS) {
        atomic_fetch_add(&dropped, 1);
        return;
    }
    events[i] = (event_t){.ns = t,
                          .tid = (uint32_t)syscall(SYS_gettid),
                          .site = d->callbackSite == CUPTI_API_ENTER ? 'E' : 'X',
                          .domain = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 'd' : 'r',
                          .name = d->functionName,
                          .faults = faults};
}

static void write_out(void)
{
    const char *pattern = getenv("CUPTI_CALLS_OUT");
    if (!pattern || !*pattern) return;
    char path[4096];
    size_t o = 0;
    for (const char *p = pattern; *p && o + 24 < sizeof path; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%d", (int)getpid());
            p++;
        } else {
            path[o++] = *p;
        }
    }
    path[o] = 0;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "# cupti-calls-probe: %s\n", status);
    unsigned n = atomic_load(&nevents);
    if (n > MAX_EVENTS) n = MAX_EVENTS;
    for (unsigned i = 0; i < n; i++) {
        const event_t *e = &events[i];
        if (!e->name) continue; /* a slot taken by a callback still being written at exit */
        fprintf(f, "%llu\t%u\t%c\t%c\t%s\t%llu\n", (unsigned long long)e->ns, e->tid, e->site, e->domain, e->name,
                (unsigned long long)e->faults);
    }
    fprintf(f, "# events %u dropped %u\n", n, atomic_load(&dropped));
    fclose(f);
}

static void subscribe(void)
{
    if (atomic_exchange(&started, 1)) return;
    events = calloc(MAX_EVENTS, sizeof *events);
    if (!events) {
        snprintf(status, sizeof status, "not subscribed: no memory for %u events", MAX_EVENTS);
        return;
    }
    const char *lib = getenv("CUPTI_CALLS_CUPTI");
    if (!lib || !*lib) lib = "libcupti.so";
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        snprintf(status, sizeof status, "not subscribed: dlopen(%s): %s", lib, dlerror());
        return;
    }
    subscribe_fn sub = (subscribe_fn)dlsym(h, "cuptiSubscribe");
    enable_domain_fn enable = (enable_domain_fn)dlsym(h, "cuptiEnableDomain");
    result_string_fn why = (result_string_fn)dlsym(h, "cuptiGetResultString");
    if (!sub || !enable) {
        snprintf(status, sizeof status, "not subscribed: %s lacks cuptiSubscribe or cuptiEnableDomain", lib);
        return;
    }
    CUpti_SubscriberHandle s;
    CUptiResult r = sub(&s, on_callback, NULL);
    if (r == CUPTI_SUCCESS) r = enable(1, s, CUPTI_CB_DOMAIN_DRIVER_API);
    if (r == CUPTI_SUCCESS) r = enable(1, s, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (r != CUPTI_SUCCESS) {
        const char *msg = "?";
        if (why) why(r, &msg);
        snprintf(status, sizeof status, "not subscribed: CUPTI error %d (%s)", (int)r, msg);
        return;
    }
    snprintf(status, sizeof status, "subscribed (CUPTI %s)", lib);
}

/* The driver's injection entry point (CUDA_INJECTION64_PATH). */
int InitializeInjection(void)
{
    subscribe();
    return 1;
}

__attribute__((constructor)) static void probe_start(void)
{
    atexit(write_out);
    const char *when = getenv("CUPTI_CALLS_SUBSCRIBE");
    if (!when || strcmp(when, "inject") != 0) subscribe();
}
