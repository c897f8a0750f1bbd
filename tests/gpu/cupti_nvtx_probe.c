/*
 * cupti_nvtx_probe.c — libcupti_nvtx_probe.so: what NVIDIA's CUPTI, a real profiler's NVTX
 * interface, receives of cgjit's NVTX ranges (tests/gpu/nvtx-cupti-check.sh).
 *
 * Preloaded beside libcgjit.so, with NVTX_INJECTION64_PATH naming the probe itself,
 * CUPTI_NVTX_PROBE_CUPTI naming libcupti.so and CUPTI_NVTX_PROBE_OUT the file to write. NVTX
 * loads the probe as its injection library at the process's first NVTX call (cgjit's, in its
 * start-up): the probe opens libcupti, hands NVTX's tables to CUPTI's own entry point
 * (InitializeInjectionNvtx2, what NVTX_INJECTION64_PATH=libcupti.so would call; from then on
 * every NVTX call goes to CUPTI as it would to a profiler, Nsight Systems' injection library
 * doing the same), then subscribes to CUPTI's NVTX callbacks (cuptiSubscribe, cuptiEnableDomain).
 * It keeps, for the domain "cgjit", its registered strings (handle -> text) and every range
 * pushed and every mark, and at exit writes FILE:
 *
 *     # cupti-nvtx-probe: subscribed (CUPTI /path/libcupti.so)        or: not subscribed: <why>
 *     push<TAB>CATEGORY<TAB>NAME                                         one per range pushed
 *     mark<TAB>CATEGORY<TAB>NAME                                         one per mark
 *     # pushes N pops N marks N registered N other-domains N dropped N
 *
 * CATEGORY is the event's category number (cgjit's kinds in base/nvtx.h's order, from 1: the
 * names cgjit gives them with nvtxDomainNameCategoryA are not read, CUPTI's generated_nvtx_meta.h
 * declaring no parameter structure for that call); NAME is the message, a registered string
 * resolved ("?handle 0x..." where the handle was never seen registered). Control bytes in a
 * name (a tab, a newline) are written as '?'. A "%p" in FILE is the process id (for programs
 * that start others with the same environment).
 *
 * CUPTI_NVTX_PROBE_SUBSCRIBE=start subscribes in the probe's constructor instead, with
 * NVTX_INJECTION64_PATH naming libcupti.so, as a profiler does. CUPTI looks driver functions up
 * with dlsym while it subscribes; libcgjit's dlsym (runtime/interpose.c) starts cgjit on such a
 * name. A cgjit that made its first NVTX call as it started (CGJIT_NVTX=1) entered CUPTI's NVTX
 * start-up while CUPTI's subscription was under way, and the process aborted in CUPTI ("Resource
 * deadlock avoided", H100, CUDA 13.0): cgjit now makes its first NVTX call at its first range.
 *
 * libcupti is opened at run time, never linked: the probe loads where CUPTI is absent (and says
 * so in FILE). Its functions are looked up with the C library's dlsym, not libcgjit's. Nothing
 * here ends the process: every failure is a line in FILE.
 */
#define _GNU_SOURCE /* dlvsym, RTLD_NOLOAD */
#define NVTX_NO_IMPL
#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_EVENTS (1u << 22) /* 48 MiB at most; beyond, events are counted as dropped */

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*enable_domain_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);

typedef struct event {
    char what;         /* 'p' push, 'm' mark */
    uint32_t category; /* as given */
    uint32_t text;     /* index into texts */
} event_t;

/* A text table with a hash index (open addressing): the names, each kept once. */
typedef struct text_tab {
    char **text;
    size_t n, cap;
    uint32_t *slot; /* index + 1, 0: empty */
    size_t nslot;
} text_tab_t;

/* registered string's handle -> text index. */
typedef struct handle_map {
    uintptr_t *key;
    uint32_t *text; /* index + 1, 0: empty */
    size_t nslot, n;
} handle_map_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;      /* what is kept, the file */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER; /* CUPTI's loading, status, subscribed */
static bool injected, subscribed, subscribe_tried, written;
static subscribe_fn cupti_subscribe;
static enable_domain_fn cupti_enable;
static result_string_fn cupti_result_string;
static const char *cupti_path;
static pid_t owner;
static char status[512]; /* the first line of the file */
static char *out_name;
static uintptr_t cgjit_domain;   /* 0: not seen created */
static bool cgjit_domain_seen;   /* nvtxDomainCreateA("cgjit") seen, with its handle */
static bool domain_unknown_seen; /* a domain created without a return value to read */
static text_tab_t texts;
static handle_map_t strings;
static event_t *events;
static size_t nevents, cap_events;
static uint64_t n_push, n_pop, n_mark, n_registered, n_other, n_dropped;

static uint64_t hash_bytes(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint64_t hash_word(uintptr_t k)
{
    uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

/* The index of `s` in texts, added if new; UINT32_MAX where memory ran out. */
static uint32_t text_id(const char *s)
{
    if (texts.n * 2 >= texts.nslot) {
        size_t nslot = texts.nslot ? texts.nslot * 2 : 1024;
        uint32_t *slot = calloc(nslot, sizeof *slot);
        if (!slot) return UINT32_MAX;
        for (size_t i = 0; i < texts.n; i++) {
            size_t j = hash_bytes(texts.text[i]) & (nslot - 1);
            while (slot[j]) j = (j + 1) & (nslot - 1);
            slot[j] = (uint32_t)i + 1;
        }
        free(texts.slot);
        texts.slot = slot;
        texts.nslot = nslot;
    }
    size_t j = hash_bytes(s) & (texts.nslot - 1);
    for (; texts.slot[j]; j = (j + 1) & (texts.nslot - 1))
        if (!strcmp(texts.text[texts.slot[j] - 1], s)) return texts.slot[j] - 1;
    if (texts.n == texts.cap) {
        size_t cap = texts.cap ? texts.cap * 2 : 512;
        char **t = realloc(texts.text, cap * sizeof *t);
        if (!t) return UINT32_MAX;
        texts.text = t;
        texts.cap = cap;
    }
    char *copy = strdup(s);
    if (!copy) return UINT32_MAX;
    texts.text[texts.n] = copy;
    texts.slot[j] = (uint32_t)texts.n + 1;
    return (uint32_t)texts.n++;
}

static void map_put(handle_map_t *m, uintptr_t key, uint32_t text)
{
    if (text == UINT32_MAX) return;
    if (m->n * 2 >= m->nslot) {
        size_t nslot = m->nslot ? m->nslot * 2 : 256;
        uintptr_t *k = calloc(nslot, sizeof *k);
        uint32_t *t = calloc(nslot, sizeof *t);
        if (!k || !t) {
            free(k);
            free(t);
            return;
        }
        for (size_t i = 0; i < m->nslot; i++) {
            if (!m->text[i]) continue;
            size_t j = hash_word(m->key[i]) & (nslot - 1);
            while (t[j]) j = (j + 1) & (nslot - 1);
            k[j] = m->key[i];
            t[j] = m->text[i];
        }
        free(m->key);
        free(m->text);
        m->key = k;
        m->text = t;
        m->nslot = nslot;
    }
    size_t j = hash_word(key) & (m->nslot - 1);
    for (; m->text[j]; j = (j + 1) & (m->nslot - 1))
        if (m->key[j] == key) {
            m->text[j] = text + 1; /* registered again: the later text */
            return;
        }
    m->key[j] = key;
    m->text[j] = text + 1;
    m->n++;
}

/* The text index for `key`, UINT32_MAX if none. */
static uint32_t map_get(const handle_map_t *m, uintptr_t key)
{
    if (!m->nslot) return UINT32_MAX;
    for (size_t j = hash_word(key) & (m->nslot - 1); m->text[j]; j = (j + 1) & (m->nslot - 1))
        if (m->key[j] == key) return m->text[j] - 1;
    return UINT32_MAX;
}

/* Whether the call's domain is cgjit's. Until the domain "cgjit" was seen created with a handle
 * to read, every domain's calls are kept (the file's last line says so). */
static bool ours(nvtxDomainHandle_t d)
{
    if (cgjit_domain_seen) return (uintptr_t)d == cgjit_domain;
    return true;
}

static void keep(char what, const nvtxEventAttributes_t *e)
{
    char text[64];
    uint32_t id = UINT32_MAX;
    uint32_t category = 0;
    if (!e) {
        id = text_id("?no attributes");
    } else {
        category = e->category;
        switch (e->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII: id = text_id(e->message.ascii ? e->message.ascii : ""); break;
        case NVTX_MESSAGE_TYPE_REGISTERED:
            id = map_get(&strings, (uintptr_t)e->message.registered);
            if (id == UINT32_MAX) {
                snprintf(text, sizeof text, "?handle %p", (void *)e->message.registered);
                id = text_id(text);
            }
            break;
        case NVTX_MESSAGE_TYPE_UNICODE: id = text_id("?unicode message"); break;
        default: snprintf(text, sizeof text, "?message type %d", (int)e->messageType); id = text_id(text);
        }
    }
    if (nevents == cap_events) {
        size_t cap = cap_events ? cap_events * 2 : 4096;
        event_t *ev = cap <= MAX_EVENTS ? realloc(events, cap * sizeof *ev) : NULL;
        if (!ev) {
            n_dropped++;
            return;
        }
        events = ev;
        cap_events = cap;
    }
    if (id == UINT32_MAX) {
        n_dropped++;
        return;
    }
    events[nevents++] = (event_t){.what = what, .category = category, .text = id};
}

static void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData *data)
{
    const void *params = data->functionParams;
    const void *ret = data->functionReturnValue;
    if (!params) return;
    switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxDomainCreateA: {
        const nvtxDomainCreateA_params *p = params;
        if (!p->name || strcmp(p->name, "cgjit")) break;
        if (ret) {
            cgjit_domain = (uintptr_t) * (const nvtxDomainHandle_t *)ret;
            cgjit_domain_seen = true;
        } else {
            domain_unknown_seen = true;
        }
        break;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringA: {
        const nvtxDomainRegisterStringA_params *p = params;
        if (!ours(p->domain) || !p->string) break;
        if (ret) {
            map_put(&strings, (uintptr_t) * (const nvtxStringHandle_t *)ret, text_id(p->string));
            n_registered++;
        }
        break;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
        const nvtxDomainRangePushEx_params *p = params;
        if (!ours(p->domain)) {
            n_other++;
            break;
        }
        n_push++;
        keep('p', p->core.eventAttrib);
        break;
    }
    case CUPTI_CBID_NVTX_nvtxDomainMarkEx: {
        const nvtxDomainMarkEx_params *p = params;
        if (!ours(p->domain)) {
            n_other++;
            break;
        }
        n_mark++;
        keep('m', p->core.eventAttrib);
        break;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRangePop: {
        const nvtxDomainRangePop_params *p = params;
        if (ours(p->domain)) n_pop++;
        break;
    }
    default: break;
    }
}

static void CUPTIAPI callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_NVTX || !cbdata) return;
    pthread_mutex_lock(&lock);
    if (!written) on_nvtx(cbid, cbdata);
    pthread_mutex_unlock(&lock);
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(status, sizeof status, fmt, ap);
    va_end(ap);
}

/* CUPTI_NVTX_PROBE_OUT with "%p" replaced by the process id; NULL if unset. */
static char *out_path(void)
{
    const char *name = getenv("CUPTI_NVTX_PROBE_OUT");
    if (!name || !*name) return NULL;
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    size_t n = 1;
    for (const char *s = name; *s; s++) n += (s[0] == '%' && s[1] == 'p') ? strlen(pid) : 1;
    char *path = malloc(n);
    if (!path) return NULL;
    char *o = path;
    for (const char *s = name; *s; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            o = stpcpy(o, pid);
            s++;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return path;
}

static void write_name(FILE *f, const char *s)
{
    for (; *s; s++) fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

/* A process whose NVTX never loaded the probe (one that starts the program, such as timeout(1),
 * with the same environment) writes FILE only where no other process has: it does not overwrite
 * what the program's process wrote. */
static void write_out(void)
{
    if (!out_name) return;
    char line[sizeof status];
    pthread_mutex_lock(&init_lock); /* inside `lock`: never taken the other way round */
    memcpy(line, status, sizeof line);
    bool sub = subscribed, loaded = injected;
    pthread_mutex_unlock(&init_lock);
    int fd = open(out_name, O_WRONLY | O_CREAT | O_CLOEXEC | (loaded ? O_TRUNC : O_EXCL), 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        if (loaded || errno != EEXIST) fprintf(stderr, "cupti-nvtx-probe: cannot write %s\n", out_name);
        return;
    }
    fprintf(f, "# cupti-nvtx-probe: %s\n", line);
    for (size_t i = 0; i < nevents; i++) {
        const event_t *e = &events[i];
        fprintf(f, "%s\t%u\t", e->what == 'p' ? "push" : "mark", e->category);
        write_name(f, texts.text[e->text]);
        fputc('\n', f);
    }
    if (sub && !cgjit_domain_seen)
        fprintf(f, "# domain \"cgjit\" not seen created%s: every domain's calls kept\n",
                domain_unknown_seen ? " with a handle to read" : "");
    fprintf(f, "# pushes %llu pops %llu marks %llu registered %llu other-domains %llu dropped %llu\n",
            (unsigned long long)n_push, (unsigned long long)n_pop, (unsigned long long)n_mark,
            (unsigned long long)n_registered, (unsigned long long)n_other, (unsigned long long)n_dropped);
    if (fclose(f)) fprintf(stderr, "cupti-nvtx-probe: cannot write %s\n", out_name);
}

__attribute__((destructor)) static void probe_end(void)
{
    if (getpid() != owner) return; /* a forked child's exit: the parent writes the file */
    pthread_mutex_lock(&lock);
    if (!written) {
        write_out();
        written = true; /* calls from here on are not kept: the file is written */
    }
    pthread_mutex_unlock(&lock);
}

/* The C library's own dlsym, found through libc's handle by its symbol version. */
static void *(*libc_dlsym(void))(void *, const char *)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void *(*f)(void *, const char *) = NULL;
    if (libc) {
        f = (void *(*)(void *, const char *))dlvsym(libc, "dlsym", "GLIBC_2.34");
        if (!f) f = (void *(*)(void *, const char *))dlvsym(libc, "dlsym", "GLIBC_2.2.5");
        dlclose(libc);
    }
    return f;
}

/* CUPTI's NVTX entry point, found once; NULL (with the reason said) where it cannot be. */
static NvtxInitializeInjectionNvtxFunc_t cupti_entry(void)
{
    static NvtxInitializeInjectionNvtxFunc_t entry;
    static bool tried;
    if (tried) return entry;
    tried = true;
    const char *lib = getenv("CUPTI_NVTX_PROBE_CUPTI");
    if (!lib || !*lib) {
        say("not subscribed: CUPTI_NVTX_PROBE_CUPTI is not set (it names libcupti.so)");
        return NULL;
    }
    void *(*real_dlsym)(void *, const char *) = libc_dlsym();
    if (!real_dlsym) {
        say("not subscribed: the C library's dlsym not found");
        return NULL;
    }
    void *cupti = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    if (!cupti) {
        const char *why = dlerror();
        say("not subscribed: cannot load %s: %s", lib, why ? why : "?");
        return NULL;
    }
    NvtxInitializeInjectionNvtxFunc_t init =
        (NvtxInitializeInjectionNvtxFunc_t)real_dlsym(cupti, "InitializeInjectionNvtx2");
    cupti_subscribe = (subscribe_fn)real_dlsym(cupti, "cuptiSubscribe");
    cupti_enable = (enable_domain_fn)real_dlsym(cupti, "cuptiEnableDomain");
    cupti_result_string = (result_string_fn)real_dlsym(cupti, "cuptiGetResultString");
    if (!init || !cupti_subscribe || !cupti_enable) {
        say("not subscribed: %s has no InitializeInjectionNvtx2, cuptiSubscribe or cuptiEnableDomain", lib);
        return NULL;
    }
    cupti_path = lib;
    entry = init;
    return entry;
}

static void subscribe(void)
{
    CUpti_SubscriberHandle sub = NULL;
    CUptiResult r = cupti_subscribe(&sub, callback, NULL);
    const char *what = "cuptiSubscribe";
    if (r == CUPTI_SUCCESS) {
        r = cupti_enable(1, sub, CUPTI_CB_DOMAIN_NVTX);
        what = "cuptiEnableDomain(NVTX)";
    }
    if (r != CUPTI_SUCCESS) {
        const char *text = NULL;
        if (!cupti_result_string || cupti_result_string(r, &text) != CUPTI_SUCCESS || !text) text = "?";
        say("not subscribed: %s failed: CUPTI error %d (%s)", what, (int)r, text);
        return;
    }
    subscribed = true;
    say("subscribed (CUPTI %s)", cupti_path);
}

/* NVTX's call to its injection library (NVTX_INJECTION64_PATH), once per NVTX instance of the
 * process, at its first NVTX call: CUPTI's own entry point is given NVTX's tables, then the
 * probe subscribes (the first time). A 0 returned leaves that NVTX instance with no tool. */
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    pthread_mutex_lock(&init_lock);
    injected = true;
    NvtxInitializeInjectionNvtxFunc_t entry = cupti_entry();
    int ok = entry ? entry(get) : 0;
    if (entry && !ok && !subscribed) say("not subscribed: CUPTI's InitializeInjectionNvtx2 returned 0");
    if (ok && !subscribed && !subscribe_tried) {
        subscribe_tried = true;
        subscribe();
    }
    pthread_mutex_unlock(&init_lock);
    return ok;
}

/* CUPTI_NVTX_PROBE_SUBSCRIBE=start subscribes here, as a profiler's own start-up does, with
 * NVTX_INJECTION64_PATH naming libcupti.so itself: what Nsight Systems does, and what cgjit must
 * survive (it makes no NVTX call as it starts, base/nvtx.c). */
__attribute__((constructor)) static void probe_start(void)
{
    owner = getpid();
    out_name = out_path();
    const char *mode = getenv("CUPTI_NVTX_PROBE_SUBSCRIBE");
    if (!mode || strcmp(mode, "start") != 0) {
        say("not subscribed: NVTX never loaded the probe (NVTX_INJECTION64_PATH names the probe)");
        return;
    }
    pthread_mutex_lock(&init_lock);
    injected = true;
    if (cupti_entry()) {
        subscribe_tried = true;
        subscribe();
    }
    pthread_mutex_unlock(&init_lock);
}
