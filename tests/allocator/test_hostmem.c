/*
 * test_hostmem.c — cgjit's own host memory: metadata and pinned staging from jemalloc arenas
 * of cgjit's own, against the fake driver.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/hostmem.h"
#include "base/cgj_base.h"
#include "base/config.h"
#include "base/driver.h"

static void load_fake_driver(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert(n > 0);
    exe[n] = '\0';
    snprintf(path, sizeof path, "%s/fakecuda/libcuda.so.1", dirname(exe));
    setenv("CGJIT_DRIVER", path, 1);
    cgj_config_load();
    void *h = NULL;
    cr_assert(cgj_driver_load(dlsym, &h), "fake driver %s", path);
}

TestSuite(allocator_hostmem, .init = load_fake_driver);

Test(allocator_hostmem, metadata_comes_from_a_jemalloc_arena)
{
    cr_assert_str_eq(cgj_mem_source(), "jemalloc arenas", "libjemalloc.so.2 is installed here");
    char *p = cgj_xmalloc(100);
    memset(p, 7, 100);
    p = cgj_xrealloc(p, 100000);
    cr_assert_eq(p[99], 7);
    int *z = cgj_xcalloc(1000, sizeof(int));
    for (int i = 0; i < 1000; i++) cr_assert_eq(z[i], 0);
    char *s = cgj_xstrdup("anchor");
    cr_assert_str_eq(s, "anchor");
    cgj_free(p), cgj_free(z), cgj_free(s);
    cgj_free(NULL);
}

Test(allocator_hostmem, staging_is_pinned_and_aligned)
{
    void *bufs[64];
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)(i * 7919 % 300000) + 1;
        bufs[i] = cgj_staging_alloc(n);
        cr_assert(bufs[i], "staging of %zu bytes", n);
        cr_assert_eq((uintptr_t)bufs[i] % 256, 0);
        memset(bufs[i], i, n); /* writable, and within what was asked */
        unsigned type = 0;
        cr_assert_eq(
            cgj_drv.r_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)bufs[i]),
            CUDA_SUCCESS, "staging buffer %d is not pinned memory", i);
        cr_assert_eq(type, CU_MEMORYTYPE_HOST);
        cr_assert(cgj_hostmem_owns((uintptr_t)bufs[i], n), "staging buffer %d is not known as cgjit's own", i);
    }
    for (int i = 1; i < 64; i++) cr_assert_neq(bufs[i], bufs[i - 1]);
    /* The program's own pinned memory is not cgjit's. */
    void *mine = NULL;
    cr_assert_eq(cgj_drv.r_cuMemHostAlloc(&mine, 4096, 0), CUDA_SUCCESS);
    cr_assert(!cgj_hostmem_owns((uintptr_t)mine, 4096), "the program's pinned memory taken for cgjit's");
    cr_assert(!cgj_hostmem_owns(4096, 4096));
}
