/*
 * real.c — the real dlsym, past cgjit's own, and the lookups made with it.
 *
 * libcgjit defines dlsym (interpose.c), so its own lookups must reach libc's: found once, by
 * version, with dlvsym(RTLD_NEXT) from here (a constructor, and again on first use when another
 * library's constructor looks symbols up before ours ran).
 */
#define _GNU_SOURCE
#include "runtime/runtime.h"

#include <dlfcn.h>
#include <stddef.h>

void *(*cgj_real_dlsym)(void *, const char *);

__attribute__((constructor)) CGJ_NO_SANITIZE void cgj_real_find(void)
{
    cgj_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!cgj_real_dlsym) cgj_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

void *cgj_real_next(const char *name)
{
    return cgj_real_sym(RTLD_NEXT, name);
}

void *cgj_real_sym(void *handle, const char *name)
{
    if (!cgj_real_dlsym) cgj_real_find();
    return cgj_real_dlsym ? cgj_real_dlsym(handle, name) : NULL;
}
