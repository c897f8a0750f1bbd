/* mem.c — cgjit's metadata arena and the cgj_x* helpers; see mem.h. */
#include "base/mem.h"
#include "base/cgj_base.h"

#ifdef CGJ_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int meta_flags;
static int have_je;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#ifdef CGJ_HAVE_JEMALLOC
/* The private copy's names (scripts/private-jemalloc.sh). */
void *cgjpriv_je_mallocx(size_t size, int flags);
void *cgjpriv_je_rallocx(void *ptr, size_t size, int flags);
void cgjpriv_je_dallocx(void *ptr, int flags);
int cgjpriv_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

int cgj_mem_new_arena(void *hooks, int *flags)
{
    unsigned ind;
    size_t sz = sizeof ind;
    void *hp = hooks;
    if (cgjpriv_je_mallctl("arenas.create", &ind, &sz, hooks ? &hp : NULL, hooks ? sizeof hp : 0)) return 0;
    *flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
    return 1;
}
#define je_mallocx cgjpriv_je_mallocx
#define je_rallocx cgjpriv_je_rallocx
#define je_dallocx cgjpriv_je_dallocx
#else /* built without jemalloc: malloc */
int cgj_mem_new_arena(void *hooks, int *flags)
{
    (void)hooks, (void)flags;
    return 0;
}
#define je_mallocx(n, f) NULL
#define je_rallocx(p, n, f) NULL
#define je_dallocx(p, f) ((void)0)
#endif

static void init_arena(void)
{
    have_je = cgj_mem_new_arena(NULL, &meta_flags);
}

static void init(void)
{
    pthread_once(&once, init_arena);
}

const char *cgj_mem_source(void)
{
    init();
    return have_je ? "jemalloc arenas" : "malloc";
}

void *cgj_xmalloc(size_t n)
{
    init();
    void *p = have_je ? je_mallocx(n ? n : 1, meta_flags) : malloc(n ? n : 1);
    CGJ_ASSERT(p != NULL, "out of host memory");
    return p;
}

void *cgj_xrealloc(void *p, size_t n)
{
    if (!p) return cgj_xmalloc(n);
    init();
    void *q = have_je ? je_rallocx(p, n ? n : 1, meta_flags) : realloc(p, n ? n : 1);
    CGJ_ASSERT(q != NULL, "out of host memory");
    return q;
}

void cgj_free(void *p)
{
    if (!p) return;
    init();
    if (have_je) je_dallocx(p, meta_flags);
    else free(p);
}

void *cgj_xcalloc(size_t count, size_t size)
{
    CGJ_ASSERT(!size || count <= SIZE_MAX / size, "allocation size overflows");
    size_t n = count * size;
    void *p = cgj_xmalloc(n);
    memset(p, 0, n ? n : 1);
    return p;
}

void *cgj_xmemdup(const void *p, size_t n)
{
    void *q = cgj_xmalloc(n);
    if (n) memcpy(q, p, n);
    return q;
}

char *cgj_xstrdup(const char *s)
{
    return cgj_xmemdup(s, strlen(s) + 1);
}
