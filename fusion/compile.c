/*
 * compile.c — fused kernels compiled by NVRTC for the running GPU, cached in memory and on disk.
 *
 * NVRTC is loaded on first use (CGJIT_NVRTC, else libnvrtc.so.13, .12, the unversioned name,
 * then the toolkit's under $CUDA_HOME or /usr/local/cuda): a program that never fuses never
 * loads it, and one without it replays unfused (FUSE_COMPILE). A kernel is looked up by its key
 * (cache.c) in memory, then on disk; only a miss runs NVRTC, whose CUBIN then goes to both.
 * CUDA_HOME names a library to load: it is read with secure_getenv, as every variable cgjit
 * reads that names a path (base/config.h).
 */
#define _GNU_SOURCE /* secure_getenv */
#include "fusion/fusion.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/mem.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
#define NVRTC_FUNCS(X)                                                                                \
    X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)          \
    X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram) X(nvrtcGetErrorString)
/* clang-format on */

static struct {
#define NVRTC_FIELD(name) __typeof__(name) *name;
    NVRTC_FUNCS(NVRTC_FIELD)
#undef NVRTC_FIELD
    int version;
    char why[200];
} nv;

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct entry {
    char key[17];
    void *data;
    size_t size;
} entry_t;
static entry_t *mem;
static uint32_t nmem, memcap;

static void *open_nvrtc(void)
{
    const char *cuda = secure_getenv("CUDA_HOME");
    char home[512], fixed[] = "/usr/local/cuda/lib64/libnvrtc.so";
    snprintf(home, sizeof home, "%s/lib64/libnvrtc.so", cuda && cuda[0] ? cuda : "/usr/local/cuda");
    const char *names[] = {cgj_cfg.NVRTC, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", home, fixed};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        if (!names[k] || !names[k][0]) continue;
        void *h = dlopen(names[k], RTLD_LAZY | RTLD_LOCAL);
        if (h || k == 0) return h; /* a library named by CGJIT_NVRTC is the one or none */
    }
    return NULL;
}

static void load_nvrtc(void)
{
    void *(*sym)(void *, const char *) = cgj_driver_dlsym;
    void *h = sym ? open_nvrtc() : NULL;
    if (!h) {
        snprintf(nv.why, sizeof nv.why, "NVRTC not found (%s%s)", cgj_cfg.NVRTC[0] ? "CGJIT_NVRTC=" : "libnvrtc.so",
                 cgj_cfg.NVRTC);
        return;
    }
#define NVRTC_RESOLVE(name) nv.name = (__typeof__(nv.name))sym(h, #name);
    NVRTC_FUNCS(NVRTC_RESOLVE)
#undef NVRTC_RESOLVE
    int major = 0, minor = 0;
    if (!nv.nvrtcVersion || !nv.nvrtcCompileProgram || !nv.nvrtcGetCUBIN || !nv.nvrtcGetErrorString ||
        nv.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
        snprintf(nv.why, sizeof nv.why, "the NVRTC library found lacks its functions");
        return;
    }
    nv.version = major * 1000 + minor * 10;
}

int cgj_fusion_nvrtc_version(char *err, size_t errlen)
{
    pthread_once(&nv_once, load_nvrtc);
    if (!nv.version) snprintf(err, errlen, "%s", nv.why);
    return nv.version;
}

bool cgj_fusion_arch(char *arch, size_t len)
{
    CUdevice dev;
    int major = 0, minor = 0;
    if (!cgj_drv.r_cuCtxGetDevice || !cgj_drv.r_cuDeviceGetAttribute ||
        cgj_drv.r_cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
        cgj_drv.r_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        cgj_drv.r_cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
        return false;
    snprintf(arch, len, "sm_%d%d", major, minor);
    return true;
}

/* NVRTC: source -> CUBIN (a new buffer), or NULL with the compiler's first words in err. */
static void *nvrtc_compile(const char *source, const char *arch, size_t *size, char *err, size_t errlen)
{
    nvrtcProgram prog;
    nvrtcResult r = nv.nvrtcCreateProgram(&prog, source, "cgj_fused.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        snprintf(err, errlen, "nvrtcCreateProgram: %s", nv.nvrtcGetErrorString(r));
        return NULL;
    }
    char opt[64];
    snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt};
    void *data = NULL;
    r = nv.nvrtcCompileProgram(prog, 1, opts);
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        char log[4096] = "";
        if (nv.nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n <= sizeof log) nv.nvrtcGetProgramLog(prog, log);
        log[sizeof log - 1] = 0;
        snprintf(err, errlen, "%s for %s: %.150s", nv.nvrtcGetErrorString(r), arch, log);
    } else if (nv.nvrtcGetCUBINSize(prog, size) == NVRTC_SUCCESS && *size) {
        data = cgj_xmalloc(*size);
        if (nv.nvrtcGetCUBIN(prog, data) != NVRTC_SUCCESS) cgj_free(data), data = NULL;
    }
    if (!data && !err[0]) snprintf(err, errlen, "NVRTC gave no CUBIN for %s", arch);
    nv.nvrtcDestroyProgram(&prog);
    return data;
}

static const entry_t *mem_find(const char *key)
{
    for (uint32_t k = 0; k < nmem; k++)
        if (!strcmp(mem[k].key, key)) return &mem[k];
    return NULL;
}

/* Keep an entry in memory (for the process's life); returns its bytes. */
static const void *mem_add(const char *key, void *data, size_t size)
{
    pthread_mutex_lock(&mem_lock);
    const entry_t *e = mem_find(key);
    if (!e) {
        if (nmem == memcap) memcap = memcap ? 2 * memcap : 16, mem = cgj_xrealloc(mem, memcap * sizeof *mem);
        mem[nmem] = (entry_t){.data = data, .size = size};
        memcpy(mem[nmem].key, key, 17);
        e = &mem[nmem++];
        data = NULL;
    }
    const void *out = e->data;
    pthread_mutex_unlock(&mem_lock);
    cgj_free(data); /* another thread stored it first */
    return out;
}

/* The cached CUBIN for key, from memory or disk (then kept in memory too); NULL: a miss. */
static const void *cached(const char *key, size_t *size)
{
    char dir[1024];
    pthread_mutex_lock(&mem_lock);
    const entry_t *e = mem_find(key);
    const void *hit = e ? e->data : NULL;
    if (e) *size = e->size;
    pthread_mutex_unlock(&mem_lock);
    if (hit) return hit;
    cgj_fusion_cache_dir(dir, sizeof dir);
    void *data = dir[0] ? cgj_fusion_cache_read(dir, key, size) : NULL;
    return data ? mem_add(key, data, *size) : NULL;
}

/* NVRTC for key, the CUBIN stored in both caches; NULL with err. */
static const void *compile_store(const char *key, const char *source, const char *arch, size_t *size, char *err,
                                 size_t errlen)
{
    char dir[1024];
    void *data = nvrtc_compile(source, arch, size, err, errlen);
    if (!data) return NULL;
    cgj_fusion_cache_dir(dir, sizeof dir);
    if (dir[0]) cgj_fusion_cache_write(dir, key, data, *size);
    return mem_add(key, data, *size);
}

/* The cache key of source on arch; false where NVRTC cannot be loaded (err says why). */
static bool keyed(const char *source, const char *arch, char key[17], char *err, size_t errlen)
{
    err[0] = 0;
    int version = cgj_fusion_nvrtc_version(err, errlen);
    if (version) cgj_fusion_cache_key(source, arch, version, key);
    return version != 0;
}

/* ---- compiling in the background (CGJIT_FUSE_BACKGROUND) ----
 * One worker thread, started at the first miss, compiles the queued sources in order into both
 * caches. Tickets are numbered from 1 in queue order; `done` is the last one finished (compiled
 * or failed: a failure is not cached, and the next build meets the miss again and compiles it
 * itself, where its error becomes the chain's reason). */
typedef struct job {
    struct job *next;
    uint64_t ticket;
    char key[17], arch[32];
    char *source;
} job_t;

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER; /* a job came, or the process exits */
static pthread_cond_t q_idle = PTHREAD_COND_INITIALIZER; /* the worker compiles no more */
static job_t *q_head, *q_tail;
static uint64_t issued, done;
static bool worker_up, compiling, stopping;

/* At exit, the worker finishes the compile in progress and stops: NVRTC must not be running
 * while the process tears down the libraries it uses. */
static void stop_worker(void)
{
    pthread_mutex_lock(&q_lock);
    stopping = true;
    pthread_cond_broadcast(&q_cond);
    while (compiling) pthread_cond_wait(&q_idle, &q_lock);
    pthread_mutex_unlock(&q_lock);
}

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (!q_head && !stopping) pthread_cond_wait(&q_cond, &q_lock);
        if (stopping) {
            pthread_mutex_unlock(&q_lock);
            return NULL;
        }
        job_t *j = q_head;
        q_head = j->next;
        if (!q_head) q_tail = NULL;
        compiling = true;
        pthread_mutex_unlock(&q_lock);
        char err[200] = "";
        size_t size = 0;
        if (!cached(j->key, &size)) compile_store(j->key, j->source, j->arch, &size, err, sizeof err);
        pthread_mutex_lock(&q_lock);
        done = j->ticket;
        compiling = false;
        pthread_cond_broadcast(&q_idle);
        pthread_mutex_unlock(&q_lock);
        cgj_free(j->source);
        cgj_free(j);
    }
}

/* Queue source for the worker, started at the first job: its ticket, 0 where no thread runs. */
static uint64_t enqueue(const char *key, const char *source, const char *arch)
{
    uint64_t ticket = 0;
    pthread_mutex_lock(&q_lock);
    if (!worker_up && !stopping) {
        static bool hooked;
        if (!hooked) hooked = atexit(stop_worker) == 0;
        worker_up = cgj_spawn(worker);
    }
    if (worker_up) {
        job_t *j = cgj_xcalloc(1, sizeof *j);
        memcpy(j->key, key, sizeof j->key);
        snprintf(j->arch, sizeof j->arch, "%s", arch);
        j->source = cgj_xstrdup(source);
        j->ticket = ticket = ++issued;
        if (q_tail) q_tail->next = j;
        else q_head = j;
        q_tail = j;
        pthread_cond_signal(&q_cond);
    }
    pthread_mutex_unlock(&q_lock);
    return ticket;
}

/* From a cache, else queued for the worker where `ticket` is given and the option is on, else
 * compiled here. */
static const void *compile(const char *source, const char *arch, size_t *size, bool *cold, uint64_t *ticket, char *err,
                           size_t errlen)
{
    char key[17];
    *cold = false;
    if (ticket) *ticket = 0;
    if (!keyed(source, arch, key, err, errlen)) return NULL;
    const void *hit = cached(key, size);
    if (hit) return hit;
    if (ticket && cgj_cfg.FUSE_BACKGROUND && (*ticket = enqueue(key, source, arch))) {
        snprintf(err, errlen, "compiling in the background (ticket %llu)", (unsigned long long)*ticket);
        return NULL;
    }
    const void *made = compile_store(key, source, arch, size, err, errlen);
    *cold = made != NULL;
    return made;
}

const void *cgj_fusion_compile(const char *source, const char *arch, size_t *size, bool *cold, char *err, size_t errlen)
{
    return compile(source, arch, size, cold, NULL, err, errlen);
}

const void *cgj_fusion_compile_or_queue(const char *source, const char *arch, size_t *size, bool *cold,
                                        uint64_t *ticket, char *err, size_t errlen)
{
    return compile(source, arch, size, cold, ticket, err, errlen);
}

bool cgj_fusion_compiled(uint64_t ticket)
{
    pthread_mutex_lock(&q_lock);
    bool ok = done >= ticket;
    pthread_mutex_unlock(&q_lock);
    return ok;
}

/* In a child after fork(): the worker is gone with its queue; what it had not compiled counts as
 * done, so that anchors waiting for it build again (and meet the misses anew). */
void cgj_fusion_compile_forked(void)
{
    pthread_mutex_init(&mem_lock, NULL);
    pthread_mutex_init(&q_lock, NULL);
    pthread_cond_init(&q_cond, NULL);
    pthread_cond_init(&q_idle, NULL);
    compiling = false;
    q_head = q_tail = NULL; /* the jobs' memory was the parent's to free */
    done = issued;
    worker_up = false;
}
