/* hostmem.c — the pinned staging arena; see hostmem.h. */
#define _GNU_SOURCE
#include "allocator/hostmem.h"
#include "base/cgj_base.h"
#include "base/mem.h"
#include "base/driver.h"
#include "base/log.h"

#ifdef CGJ_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool pinned_ok;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The pinned chunks the arena took from the driver (cgj_hostmem_owns): a fixed table, read
 * without a lock (entries are published whole before the count that covers them). */
enum { MAX_CHUNKS = 4096 };
static struct {
    uintptr_t base;
    size_t size;
} chunks[MAX_CHUNKS];
static uint32_t nchunks;
static pthread_mutex_t chunks_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_chunk(const void *p, size_t size)
{
    pthread_mutex_lock(&chunks_lock);
    uint32_t n = __atomic_load_n(&nchunks, __ATOMIC_RELAXED);
    if (n < MAX_CHUNKS) {
        chunks[n].base = (uintptr_t)p, chunks[n].size = size;
        __atomic_store_n(&nchunks, n + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&chunks_lock);
}

bool cgj_hostmem_owns(uintptr_t base, size_t size)
{
    uint32_t n = __atomic_load_n(&nchunks, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++)
        if (base < chunks[i].base + chunks[i].size && chunks[i].base < base + size) return true;
    return false;
}

#ifdef CGJ_HAVE_JEMALLOC
static int pinned_flags;

/* ---- the pinned arena's extent hooks: memory from cuMemHostAlloc, never returned ---- */

static void *pinned_extent_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t align, bool *zero, bool *commit,
                                 unsigned arena)
{
    if (new_addr || !cgj_drv.r_cuMemHostAlloc) return NULL; /* cannot place it at an address */
    void *p = NULL;
    size_t pad = align > 4096 ? align : 0; /* cuMemHostAlloc gives page-aligned memory */
    if (cgj_drv.r_cuMemHostAlloc(&p, size + pad, 0) != CUDA_SUCCESS) return NULL;
    note_chunk(p, size + pad);
    uintptr_t a = ((uintptr_t)p + (align - 1)) & ~(uintptr_t)(align - 1);
    if (*zero) memset((void *)a, 0, size);
    *commit = true;
    return (void *)a;
}

/* true: "not done", so jemalloc keeps the extent for reuse; merges across separate pinned
 * allocations are refused, since one copy must not span two registrations. */
static bool pinned_extent_dalloc(extent_hooks_t *h, void *a, size_t s, bool c, unsigned i)
{
    return true;
}
static bool pinned_extent_merge(extent_hooks_t *h, void *a, size_t sa, void *b, size_t sb, bool c, unsigned i)
{
    return true;
}
static bool pinned_extent_split(extent_hooks_t *h, void *a, size_t s, size_t sa, size_t sb, bool c, unsigned i)
{
    return false;
}

static extent_hooks_t pinned_hooks = {
    .alloc = pinned_extent_alloc,
    .dalloc = pinned_extent_dalloc,
    .split = pinned_extent_split,
    .merge = pinned_extent_merge,
};

/* The private copy's names (scripts/private-jemalloc.sh). */
void *cgjpriv_je_mallocx(size_t size, int flags);
void cgjpriv_je_dallocx(void *ptr, int flags);
#define je_mallocx cgjpriv_je_mallocx
#define je_dallocx cgjpriv_je_dallocx

static void init_arenas(void)
{
    pinned_ok = cgj_mem_new_arena(&pinned_hooks, &pinned_flags);
}
#else /* built without jemalloc: malloc and bump-allocated pinned chunks */
#define MALLOCX_ALIGN(a) 0
#define je_mallocx(n, f) NULL
#define je_dallocx(p, f) ((void)(p), (void)(f))
static int pinned_flags;
static void init_arenas(void) {}
#endif

static void init(void)
{
    pthread_once(&once, init_arenas);
}

/* Without jemalloc: bump allocation from 4 MiB pinned chunks, never freed. */
static void *bump_staging(size_t n)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char *chunk;
    static size_t used, size;
    pthread_mutex_lock(&lock);
    if (!chunk || used + n > size) {
        size_t sz = n > (4u << 20) ? n : (4u << 20);
        void *p = NULL;
        if (!cgj_drv.r_cuMemHostAlloc || cgj_drv.r_cuMemHostAlloc(&p, sz, 0) != CUDA_SUCCESS) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        note_chunk(p, sz);
        chunk = p, size = sz, used = 0;
    }
    void *p = chunk + used;
    used += n;
    pthread_mutex_unlock(&lock);
    return p;
}

void *cgj_staging_alloc(size_t n)
{
    init();
    n = (n + 255) & ~(size_t)255;
    void *p = pinned_ok ? je_mallocx(n, pinned_flags | MALLOCX_ALIGN(256)) : bump_staging(n);
    if (!p) CGJ_LOG(graphs, "pinned staging of %zu bytes refused", n);
    return p;
}

void cgj_staging_free(void *p)
{
    /* Bump-allocated chunks (built without jemalloc) are never returned. */
    if (p && pinned_ok) je_dallocx(p, pinned_flags);
}
