/*
 * layout.c — a small cache from function handle to parameter layout and name.
 *
 * Looked up only while recording (never in replay, where the op carries its layout), so a
 * mutex-protected open-addressing table is enough.
 */
#include "tracer/layout.h"
#include "base/driver.h"

#include <pthread.h>
#include <string.h>

typedef struct entry {
    CUfunction f; /* NULL: empty */
    bool known;
    uint32_t n, size;
    uint32_t *off, *sz;
    const char *name;
    const char *why;
} entry_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *table;
static size_t cap, used;

static size_t slot_of(CUfunction f, size_t c)
{
    return (size_t)(((uintptr_t)f >> 4) * 0x9E3779B97F4A7C15ull) & (c - 1);
}

static entry_t *find_or_insert(CUfunction f)
{
    if (2 * (used + 1) > cap) {
        size_t ncap = cap ? 2 * cap : 256;
        entry_t *nt = cgj_xcalloc(ncap, sizeof *nt);
        for (size_t i = 0; i < cap; i++) {
            if (!table[i].f) continue;
            size_t j = slot_of(table[i].f, ncap);
            while (nt[j].f) j = (j + 1) & (ncap - 1);
            nt[j] = table[i];
        }
        cgj_free(table);
        table = nt;
        cap = ncap;
    }
    size_t j = slot_of(f, cap);
    while (table[j].f && table[j].f != f) j = (j + 1) & (cap - 1);
    if (!table[j].f) {
        table[j].f = f;
        used++;
    }
    return &table[j];
}

/* Ask the driver: CUfunction first, CUkernel (what the CUDA runtime passes) second. */
static void learn(entry_t *e)
{
    CUresult (*info)(void *, size_t, size_t *, size_t *) =
        (CUresult(*)(void *, size_t, size_t *, size_t *))cgj_drv.r_cuFuncGetParamInfo;
    size_t off, sz;
    CUresult r = info ? info(e->f, 0, &off, &sz) : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_ERROR_INVALID_HANDLE && cgj_drv.r_cuKernelGetParamInfo) {
        info = (CUresult(*)(void *, size_t, size_t *, size_t *))cgj_drv.r_cuKernelGetParamInfo;
        r = info(e->f, 0, &off, &sz);
    }
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE) {
        e->why = "the driver does not report the kernel's parameter layout";
        return;
    }
    uint32_t n = 0, cap_ = 8;
    e->off = cgj_xmalloc(cap_ * 4);
    e->sz = cgj_xmalloc(cap_ * 4);
    for (; r == CUDA_SUCCESS; r = info(e->f, ++n, &off, &sz)) {
        if (n == cap_) {
            cap_ *= 2;
            e->off = cgj_xrealloc(e->off, cap_ * 4);
            e->sz = cgj_xrealloc(e->sz, cap_ * 4);
        }
        e->off[n] = (uint32_t)off;
        e->sz[n] = (uint32_t)sz;
        if (off + sz > e->size) e->size = (uint32_t)(off + sz);
    }
    e->n = n;
    e->known = true;
}

static void learn_name(entry_t *e)
{
    const char *name = NULL;
    if (cgj_drv.r_cuFuncGetName && cgj_drv.r_cuFuncGetName(&name, e->f) == CUDA_SUCCESS && name)
        e->name = name;
    else if (cgj_drv.r_cuKernelGetName &&
             cgj_drv.r_cuKernelGetName(&name, (CUkernel)e->f) == CUDA_SUCCESS && name)
        e->name = name;
    else
        e->name = "?";
}

static entry_t *lookup(CUfunction f)
{
    entry_t *e = find_or_insert(f);
    if (!e->known && !e->why) {
        learn(e);
        learn_name(e);
    }
    return e;
}

bool cgj_layout_get(const cgj_call_t *c, cgj_layout_t *out, const char **why)
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
    else *why = e->why;
    pthread_mutex_unlock(&cache_lock);
    return ok;
}

const char *cgj_layout_kernel_name(CUfunction f)
{
    pthread_mutex_lock(&cache_lock);
    entry_t *e = lookup(f);
    const char *name = e->name;
    pthread_mutex_unlock(&cache_lock);
    return name;
}
