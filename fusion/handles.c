/*
 * handles.c — the libraries fusion calls itself (cuBLASLt, cuDNN): opened by name, and one
 * handle of cgjit's own per CUDA context, made on first use and kept for the process's life.
 * Creating a handle makes driver calls: they pass the wrappers by (cgj_internal_calls).
 */
#include "fusion/fusion.h"
#include "base/driver.h"

#include <dlfcn.h>

void *cgj_fusion_dlopen(const char *const *names, size_t n)
{
    void *h = NULL;
    for (size_t k = 0; k < n && !h && cgj_driver_dlsym; k++) h = dlopen(names[k], RTLD_LAZY | RTLD_LOCAL);
    return h;
}

void *cgj_fusion_handle(cgj_handles_t *hs, bool (*create)(void **h))
{
    CUcontext ctx = NULL;
    if (!cgj_drv.r_cuCtxGetCurrent || cgj_drv.r_cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return NULL;
    void *h = NULL;
    pthread_mutex_lock(&hs->lock);
    for (uint32_t k = 0; k < hs->n && !h; k++)
        if (hs->e[k].ctx == ctx) h = hs->e[k].h;
    if (!h && hs->n < CGJ_ARRAY_LEN(hs->e)) {
        cgj_internal_calls++;
        if (create(&h)) hs->e[hs->n].ctx = ctx, hs->e[hs->n++].h = h;
        else h = NULL;
        cgj_internal_calls--;
    }
    pthread_mutex_unlock(&hs->lock);
    return h;
}
