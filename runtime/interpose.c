/*
 * interpose.c — where cgjit gets between a program and the CUDA driver.
 *
 * nvcc links the CUDA runtime statically by default, and cuBLAS/cuDNN carry their own copy;
 * none of them call libcudart.so, but all reach the driver the same way: dlopen libcuda,
 * dlsym("cuGetProcAddress_v2"), then every entry point through cuGetProcAddress. So cgjit
 * defines dlsym (found before libc's because libcgjit is linked or preloaded ahead of it) and
 * wraps cuGetProcAddress: any pointer the driver hands out that is one of the functions cgjit
 * wraps is replaced by its wrapper. Matching by *pointer* rather than by name means the driver
 * resolves versions and per-thread-default-stream flags itself (cuLaunchKernel asked with the
 * per-thread flag is cuLaunchKernel_ptsz, and gets that wrapper); the runtime also asks for
 * cuGetProcAddress through cuGetProcAddress, and gets the wrapper again.
 *
 * Limits: a dlsym(RTLD_NEXT, ...) made by the program is resolved as seen from libcgjit, which
 * sits right after the program in lookup order; that differs only for symbols libcgjit itself
 * defines (dlsym and cgj_*).
 */
#define _GNU_SOURCE
#include "runtime/runtime.h"
#include "fusion/fusion.h"
#include "graphs/graph.h"
#include "base/config.h"
#include "base/driver.h"
#include "allocator/live.h"
#include "allocator/pointers.h"
#include "allocator/pool.h"
#include "base/log.h"
#include "base/nvtx.h"
#include "runtime/libs.h"
#include "runtime/report.h"
#include "tracer/step.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_state = -1; /* -1 not yet, else a cgj_status_t */
static __thread bool in_init;


/* CGJIT_STEP, or its default: sync when libcgjit was preloaded (the program cannot mark its
 * steps), off when it was linked (it marks them). */
static bool preloaded(void)
{
    const char *pre = secure_getenv("LD_PRELOAD");
    Dl_info self;
    if (!pre || !dladdr((void *)cgj_runtime_init, &self) || !self.dli_fname) return false;
    const char *base = strrchr(self.dli_fname, '/');
    base = base ? base + 1 : self.dli_fname;
    for (const char *p = pre; *p;) { /* LD_PRELOAD entries, split at ':' and spaces */
        size_t len = strcspn(p, ": ");
        const char *e = memrchr(p, '/', len);
        e = e ? e + 1 : p;
        if (len && (size_t)(p + len - e) == strlen(base) && !strncmp(e, base, strlen(base))) return true;
        p += len;
        p += strspn(p, ": ");
    }
    return false;
}

/* config.c warned about a value of no policy and made it empty: the default. */
static cgj_step_policy_t step_policy(void)
{
    int p = cgj_cfg.STEP[0] ? cgj_step_policy_parse(cgj_cfg.STEP) : -1;
    if (p >= 0) return (cgj_step_policy_t)p;
    return preloaded() ? CGJ_STEP_SYNC : CGJ_STEP_OFF;
}

/* fork(): the child never waits for a lock a thread of the parent held (that thread does not
 * exist in the child). Where the parent had initialized CUDA, the child cannot use it and cgjit
 * passes its calls through; else the child is traced as any process (tracer/step.h). */
/* The parent's cuDeviceGetCount at fork(): CUDA_ERROR_NOT_INITIALIZED before cuInit
 * (cuCtxGetCurrent may not say so). */
static CUresult fork_probe;

static void fork_prepare(void)
{
    int n;
    fork_probe = cgj_drv.r_cuDeviceGetCount ? cgj_drv.r_cuDeviceGetCount(&n) : CUDA_ERROR_NOT_FOUND;
}

static void fork_child(void)
{
    bool cuda_before_fork = fork_probe != CUDA_ERROR_NOT_INITIALIZED;
    cgj_log_forked();
    cgj_pointers_forked();
    cgj_live_forked();
    cgj_pool_forked();
    cgj_libs_forked();
    cgj_fusion_forked();
    cgj_graph_forked();
#ifdef CGJ_HAVE_CUDNN
    cgj_lib_dnn_forked();
#endif
    cgj_step_forked(cuda_before_fork);
    CGJ_LOG(interpose, "fork: %s (cuDeviceGetCount: %d)",
            cuda_before_fork ? "the parent had initialized CUDA: every call passes through"
                             : "the parent had not initialized CUDA: the child is traced",
            (int)fork_probe);
    if (!cuda_before_fork) cgj_report_forked();
}

static int init_locked(void)
{
    cgj_config_load();
    cgj_log_init();
    cgj_report_setup(); /* before the driver: a run without one still reports, saying so */
    if (!cgj_real_dlsym) cgj_real_find();
    void *h = NULL;
    /* The driver table first, even when disabled: the exported driver functions forward
     * through it (wrappers.c). */
    if (!cgj_real_dlsym || !cgj_driver_load(cgj_real_dlsym, &h)) {
        CGJ_LOG(interpose, "driver '%s' unavailable: every step runs eagerly", cgj_cfg.DRIVER);
        return cgj_cfg.DISABLE ? CGJ_ERR_DISABLED : CGJ_ERR_NO_DRIVER;
    }
    if (cgj_cfg.DISABLE) return CGJ_ERR_DISABLED;
    cgj_nvtx_init(); /* CGJIT_NVTX: before any step, with the real dlsym found */
    cgj_wrappers_init();
    cgj_step_implicit_enable(step_policy());
    cgj_gov_init(); /* the governor, on by default (CGJIT_GOVERN) */
    pthread_atfork(fork_prepare, NULL, fork_child);
    CGJ_LOG(interpose, "driver '%s' loaded", cgj_cfg.DRIVER);
    return CGJ_OK;
}

/* A program linked with -lcuda has the driver loaded before any constructor runs, and may call
 * the driver functions libcgjit exports before anything else of cgjit: start now. A program
 * that does not (the CUDA runtime dlopens the driver later) is started on its first lookup. */
__attribute__((constructor)) static void start_with_the_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h) return;
    dlclose(h);
    cgj_runtime_init();
}

int cgj_runtime_init(void)
{
    int st = __atomic_load_n(&init_state, __ATOMIC_ACQUIRE);
    if (CGJ_LIKELY(st >= 0)) return st;
    if (in_init) return CGJ_ERR_NO_DRIVER; /* the driver's own start-up looking symbols up */
    pthread_mutex_lock(&init_lock);
    if (init_state < 0) {
        in_init = true;
        __atomic_store_n(&init_state, init_locked(), __ATOMIC_RELEASE);
        cgj_report_set_status(init_state);
        in_init = false;
    }
    pthread_mutex_unlock(&init_lock);
    return init_state;
}

CGJ_API CGJ_NO_SANITIZE void *dlsym(void *handle, const char *symbol)
{
    if (CGJ_UNLIKELY(!cgj_real_dlsym)) cgj_real_find();
    void *p = cgj_real_dlsym(handle, symbol);
    if (!p || symbol[0] != 'c' || symbol[1] != 'u') return p;
    if (cgj_runtime_init() != CGJ_OK) return p;
    void *w = cgj_wrapper_for(p);
    if (w) CGJ_LOG(interpose, "dlsym(%s): wrapped", symbol);
    return w ? w : p;
}
