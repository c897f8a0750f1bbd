/* fakelib.c — the lock, live list and driver look-up of a fake vendor library; see fakelib.h. */
#define _GNU_SOURCE
#include "fakelib.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static fakelib_obj_t *g_live;
static __typeof__(cuGetProcAddress_v2) *g_gpa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool (*g_init)(void);
static bool g_ready;

void fakelib_lock(void)
{
    pthread_mutex_lock(&g_lock);
}
void fakelib_unlock(void)
{
    pthread_mutex_unlock(&g_lock);
}

static void fork_child(void)
{
    pthread_mutex_init(&g_lock, NULL);
}

__attribute__((constructor)) static void fork_safety(void)
{
    pthread_atfork(fakelib_lock, fakelib_unlock, fork_child);
}

void fakelib_live_add(fakelib_obj_t *o)
{
    fakelib_lock();
    o->next = g_live;
    g_live = o;
    fakelib_unlock();
}

bool fakelib_live_remove(fakelib_obj_t *o)
{
    bool found = false;
    fakelib_lock();
    for (fakelib_obj_t **p = &g_live; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            found = true;
            break;
        }
    fakelib_unlock();
    return found;
}

bool fakelib_live(const void *o)
{
    bool live = false;
    fakelib_lock();
    for (fakelib_obj_t *p = g_live; p && !live; p = p->next) live = (const void *)p == o;
    fakelib_unlock();
    return live;
}

bool fakelib_live_any(bool (*match)(const fakelib_obj_t *o, const void *arg), const void *arg)
{
    bool any = false;
    fakelib_lock();
    for (fakelib_obj_t *p = g_live; p && !any; p = p->next) any = match(p, arg);
    fakelib_unlock();
    return any;
}

static void run_init(void)
{
    g_ready = g_init();
}

bool fakelib_ready(bool (*init)(void))
{
    g_init = init;
    pthread_once(&g_once, run_init);
    return g_ready;
}

__typeof__(fakecuda_register_kernel) *fakelib_driver_open(void)
{
    const char *path = getenv("CGJIT_DRIVER");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return NULL;
    __typeof__(fakecuda_register_kernel) *reg = (__typeof__(reg))dlsym(lib, "fakecuda_register_kernel");
    g_gpa = (__typeof__(g_gpa))dlsym(lib, "cuGetProcAddress_v2");
    return g_gpa ? reg : NULL;
}

bool fakelib_resolve(const char *name, void **fn)
{
    CUdriverProcAddressQueryResult q;
    *fn = NULL;
    return g_gpa && g_gpa(name, fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS && *fn;
}
