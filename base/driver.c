/* driver.c — load the real CUDA driver and resolve cgj_drv; see driver.h. */
#include "base/driver.h"
#include "base/config.h"
#include "base/log.h"

#include <dlfcn.h>
#include <stdio.h>

cgj_driver_t cgj_drv;

void *(*cgj_driver_dlsym)(void *, const char *);

bool cgj_driver_load(void *(*real_dlsym)(void *, const char *), void **handle_out)
{
    cgj_driver_dlsym = real_dlsym;
    void *h = dlopen(cgj_cfg.DRIVER, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        CGJ_LOG(interpose, "cannot load the driver '%s': %s", cgj_cfg.DRIVER, dlerror());
        return false;
    }
#define CGJ_DRV_RESOLVE(exported, proto, ...) \
    cgj_drv.r_##exported = (__typeof__(cgj_drv.r_##exported))real_dlsym(h, #exported);
    CGJ_DRIVER_WRAPPED(CGJ_DRV_RESOLVE)
    CGJ_DRIVER_CALLED(CGJ_DRV_RESOLVE)
#undef CGJ_DRV_RESOLVE
    *handle_out = h;
    return cgj_drv.r_cuLaunchKernel != NULL && cgj_drv.r_cuGetProcAddress_v2 != NULL;
}

bool cgj_stream_blocking(CUstream s)
{
    unsigned flags = 0;
    if (s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !cgj_drv.r_cuStreamGetFlags) return true;
    return cgj_drv.r_cuStreamGetFlags(s, &flags) != CUDA_SUCCESS || !(flags & CU_STREAM_NON_BLOCKING);
}

const char *cgj_driver_errstr(CUresult r)
{
    const char *s = NULL;
    if (cgj_drv.r_cuGetErrorString && cgj_drv.r_cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    static __thread char buf[32];
    snprintf(buf, sizeof buf, "CUresult %d", (int)r);
    return buf;
}
