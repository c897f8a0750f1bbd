/*
 * layout.c — a small cache from function handle to parameter layout and name.
 *
 * Looked up while recording (never in replay, where the op carries its layout) and where a step
 * begins at a kernel (its name), so a mutex around the map is enough. A name is asked of the
 * driver on its own: a step's warm-up run, which records nothing, asks for no parameters.
 * Entries are never removed: a handle's layout and name do not change.
 *
 * A handle is a CUfunction (cuModuleGetFunction, cuLibraryGetKernel's cuKernelGetFunction) or a
 * CUkernel (what the CUDA runtime launches), and the driver says which only by failing the
 * other kind's query, slowly: a failed cuFuncGetName took 20-60 us on an H100 (driver 580),
 * where the right query takes under 1 us. The kind that answered last is asked first (a program
 * launches through the runtime or through the driver, rarely both), and an entry remembers its
 * own kind for its parameters.
 */
#include "ir/layout.h"
#include "base/driver.h"
#include "base/map.h"
#include "base/vec.h"

#include <pthread.h>
#include <string.h>

typedef struct entry {
    CUfunction f;
    bool known, asked, named;
    bool is_kernel; /* a CUkernel (cuKernelGetName answered) */
    uint32_t n, size;
    uint32_t *off, *sz;
    const char *name;
} entry_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cgj_map_t cache;    /* CUfunction -> entry_t * */
static bool kernels_first; /* the last handle named was a CUkernel: ask that kind first */

static entry_t *find_or_insert(CUfunction f)
{
    uint64_t v;
    if (cgj_map_get(&cache, cgj_map_ptr_key(f), &v)) return (entry_t *)(uintptr_t)v;
    entry_t *e = cgj_xcalloc(1, sizeof *e);
    e->f = f;
    cgj_map_put(&cache, cgj_map_ptr_key(f), (uint64_t)(uintptr_t)e);
    return e;
}

typedef CUresult (*param_info_fn)(void *, size_t, size_t *, size_t *);

/* Ask the driver, with the query of the entry's kind (named() found it) first. */
static void learn(entry_t *e)
{
    param_info_fn fn = (param_info_fn)cgj_drv.r_cuFuncGetParamInfo, kn = (param_info_fn)cgj_drv.r_cuKernelGetParamInfo;
    param_info_fn first = e->is_kernel ? kn : fn, second = e->is_kernel ? fn : kn, info = first;
    size_t off, sz;
    CUresult r = info ? info(e->f, 0, &off, &sz) : CUDA_ERROR_NOT_SUPPORTED;
    if ((r == CUDA_ERROR_INVALID_HANDLE || !first) && second) {
        info = second;
        r = info(e->f, 0, &off, &sz);
    }
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE) return; /* the driver cannot tell */
    uint32_t n = 0, nsz = 0, cap_off = 0, cap_sz = 0;
    for (; r == CUDA_SUCCESS; r = info(e->f, n, &off, &sz)) {
        CGJ_VEC_PUSH(e->off, n, cap_off, (uint32_t)off);
        CGJ_VEC_PUSH(e->sz, nsz, cap_sz, (uint32_t)sz);
        if (off + sz > e->size) e->size = (uint32_t)(off + sz);
    }
    e->n = n;
    e->known = true;
}

static bool name_as(entry_t *e, bool kernel)
{
    const char *name = NULL;
    bool ok = kernel ? cgj_drv.r_cuKernelGetName && cgj_drv.r_cuKernelGetName(&name, (CUkernel)e->f) == CUDA_SUCCESS
                     : cgj_drv.r_cuFuncGetName && cgj_drv.r_cuFuncGetName(&name, e->f) == CUDA_SUCCESS;
    if (!ok || !name) return false;
    e->name = name;
    e->is_kernel = kernel;
    kernels_first = kernel;
    return true;
}

static void learn_name(entry_t *e)
{
    bool k = kernels_first;
    if (!name_as(e, k) && !name_as(e, !k)) {
        e->name = "?";
        e->is_kernel = k; /* neither answered: the parameters are asked in the same order */
    }
}

static entry_t *named(CUfunction f)
{
    entry_t *e = find_or_insert(f);
    if (!e->named) {
        e->named = true;
        learn_name(e);
    }
    return e;
}

static entry_t *lookup(CUfunction f)
{
    entry_t *e = named(f);
    if (!e->asked) {
        e->asked = true;
        learn(e);
    }
    return e;
}

bool cgj_layout_get(const cgj_call_t *c, cgj_layout_t *out)
{
    static const uint32_t zero = 0;
    if (c->u.k.blob) { /* extra form: the packed buffer is one slot */
        static __thread uint32_t size;
        size = (uint32_t)c->u.k.blob_size;
        *out = (cgj_layout_t){.n = 1, .size = size, .extra_form = true, .off = &zero, .sz = &size};
        return true;
    }
    pthread_mutex_lock(&cache_lock);
    entry_t *e = lookup(c->u.k.f);
    bool ok = e->known;
    if (ok) *out = (cgj_layout_t){.n = e->n, .size = e->size, .off = e->off, .sz = e->sz};
    pthread_mutex_unlock(&cache_lock);
    return ok;
}

const char *cgj_layout_kernel_name(CUfunction f)
{
    pthread_mutex_lock(&cache_lock);
    entry_t *e = named(f);
    const char *name = e->name;
    pthread_mutex_unlock(&cache_lock);
    return name;
}
