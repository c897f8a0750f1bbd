/* pool.c — the device memory pool of replayed steps; see pool.h. */
#include "allocator/pool.h"
#include "base/cgj_base.h"
#include "base/config.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/vec.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUdeviceptr res_base, res_end, res_used; /* the reservation [res_base, res_end) */
static size_t granularity, mapped;
static bool vmm_tried, vmm_ok;
static CUdevice device;

/* Without VMM: regions from cuMemAlloc, remembered for cgj_pool_owns. */
static struct {
    CUdeviceptr base, end;
} * plain;
static size_t nplain;
static CUdeviceptr plain_lo = ~(CUdeviceptr)0, plain_hi;

static CUmemAllocationProp device_prop(void)
{
    CUmemAllocationProp p = {0};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    return p;
}

static void vmm_init(void)
{
    vmm_tried = true;
    if (!cgj_drv.r_cuMemAddressReserve || !cgj_drv.r_cuMemCreate || !cgj_drv.r_cuMemMap || !cgj_drv.r_cuMemSetAccess ||
        !cgj_drv.r_cuMemGetAllocationGranularity)
        return;
    if (cgj_drv.r_cuCtxGetDevice(&device) != CUDA_SUCCESS) return;
    CUmemAllocationProp p = device_prop();
    if (cgj_drv.r_cuMemGetAllocationGranularity(&granularity, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
            CUDA_SUCCESS ||
        !granularity)
        return;
    size_t want = (size_t)cgj_cfg.POOL_RESERVE_GB << 30;
    want = (want + granularity - 1) / granularity * granularity;
    CUdeviceptr base = 0;
    CUresult r = cgj_drv.r_cuMemAddressReserve(&base, want, 0, 0, 0);
    if (r != CUDA_SUCCESS) {
        CGJ_LOG(graphs, "pool: cuMemAddressReserve(%zu) failed: %s; regions use cuMemAlloc", want,
                cgj_driver_errstr(r));
        return;
    }
    /* Read without the lock by cgj_pool_owns: published with atomics (used before base). */
    res_end = base + want;
    __atomic_store_n(&res_used, base, __ATOMIC_RELEASE);
    __atomic_store_n(&res_base, base, __ATOMIC_RELEASE);
    vmm_ok = true;
}

/* Address ranges of the reservation given back by cgj_pool_region_free, for reuse: first fit. */
static struct {
    CUdeviceptr base;
    size_t bytes;
} * spare;
static size_t nspare, capspare;

static bool take_spare(size_t bytes, CUdeviceptr *base)
{
    for (size_t i = 0; i < nspare; i++) {
        if (spare[i].bytes < bytes) continue;
        *base = spare[i].base;
        spare[i].base += bytes, spare[i].bytes -= bytes;
        if (!spare[i].bytes) spare[i] = spare[--nspare];
        return true;
    }
    return false;
}

static bool map_region(size_t bytes, CUdeviceptr *base, char *why, size_t whylen)
{
    CUdeviceptr at = 0;
    bool reused = take_spare(bytes, &at);
    if (!reused) at = res_used;
    if (!reused && res_used + bytes > res_end) {
        snprintf(why, whylen, "pool reservation of %llu GiB exhausted (CGJIT_POOL_RESERVE_GB)",
                 (unsigned long long)cgj_cfg.POOL_RESERVE_GB);
        return false;
    }
    CUmemAllocationProp p = device_prop();
    CUmemGenericAllocationHandle h;
    CUresult r = cgj_drv.r_cuMemCreate(&h, bytes, &p, 0);
    if (r == CUDA_SUCCESS) {
        r = cgj_drv.r_cuMemMap(at, bytes, 0, h, 0);
        cgj_drv.r_cuMemRelease(h); /* the mapping keeps the memory */
    }
    if (r == CUDA_SUCCESS) {
        CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, device}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        r = cgj_drv.r_cuMemSetAccess(at, bytes, &d, 1);
    }
    if (r != CUDA_SUCCESS) {
        if (reused) CGJ_VEC_PUSH(spare, nspare, capspare, ((__typeof__(*spare)){at, bytes}));
        snprintf(why, whylen, "mapping %zu bytes of pool memory: %s", bytes, cgj_driver_errstr(r));
        return false;
    }
    *base = at;
    if (!reused) __atomic_store_n(&res_used, res_used + bytes, __ATOMIC_RELEASE);
    return true;
}

static bool plain_region(size_t bytes, CUdeviceptr *base, char *why, size_t whylen)
{
    CUresult r = cgj_drv.r_cuMemAlloc_v2(base, bytes);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "cuMemAlloc(%zu) for a pool region: %s", bytes, cgj_driver_errstr(r));
        return false;
    }
    plain = cgj_xrealloc(plain, (nplain + 1) * sizeof *plain);
    plain[nplain].base = *base;
    plain[nplain++].end = *base + bytes;
    if (*base < plain_lo) __atomic_store_n(&plain_lo, *base, __ATOMIC_RELEASE);
    if (*base + bytes > plain_hi) __atomic_store_n(&plain_hi, *base + bytes, __ATOMIC_RELEASE);
    return true;
}

bool cgj_pool_region(size_t bytes, CUdeviceptr *base, char *why, size_t whylen)
{
    pthread_mutex_lock(&lock);
    if (!vmm_tried) vmm_init();
    size_t g = vmm_ok ? granularity : 256;
    bytes = (bytes ? bytes + g - 1 : g) / g * g;
    bool ok = vmm_ok ? map_region(bytes, base, why, whylen) : plain_region(bytes, base, why, whylen);
    if (ok) __atomic_store_n(&mapped, mapped + bytes, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    if (ok) CGJ_LOG(graphs, "pool: region of %zu bytes at 0x%llx", bytes, (unsigned long long)*base);
    return ok;
}

size_t cgj_pool_region_bytes(size_t bytes)
{
    pthread_mutex_lock(&lock);
    if (!vmm_tried) vmm_init();
    size_t g = vmm_ok ? granularity : 256;
    pthread_mutex_unlock(&lock);
    return (bytes ? bytes + g - 1 : g) / g * g;
}

void cgj_pool_region_free(CUdeviceptr base, size_t bytes)
{
    bytes = cgj_pool_region_bytes(bytes);
    pthread_mutex_lock(&lock);
    bool ok = false;
    if (vmm_ok && base >= res_base && base < res_used) {
        ok = cgj_drv.r_cuMemUnmap && cgj_drv.r_cuMemUnmap(base, bytes) == CUDA_SUCCESS;
        if (ok) CGJ_VEC_PUSH(spare, nspare, capspare, ((__typeof__(*spare)){base, bytes}));
    } else {
        for (size_t i = 0; i < nplain && !ok; i++)
            if (plain[i].base == base) {
                ok = cgj_drv.r_cuMemFree_v2(base) == CUDA_SUCCESS;
                plain[i] = plain[--nplain];
            }
    }
    if (ok) __atomic_store_n(&mapped, mapped - bytes, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    CGJ_LOG(graphs, "pool: region of %zu bytes at 0x%llx %s", bytes, (unsigned long long)base,
            ok ? "given back" : "could not be given back");
}

bool cgj_pool_owns(CUdeviceptr p)
{
    CUdeviceptr base = __atomic_load_n(&res_base, __ATOMIC_ACQUIRE);
    if (base && p >= base && p < __atomic_load_n(&res_used, __ATOMIC_ACQUIRE)) return true;
    if (CGJ_LIKELY(p < __atomic_load_n(&plain_lo, __ATOMIC_ACQUIRE) ||
                   p >= __atomic_load_n(&plain_hi, __ATOMIC_ACQUIRE)))
        return false;
    pthread_mutex_lock(&lock);
    bool found = false;
    for (size_t i = 0; i < nplain && !found; i++) found = p >= plain[i].base && p < plain[i].end;
    pthread_mutex_unlock(&lock);
    return found;
}

size_t cgj_pool_mapped_bytes(void)
{
    return __atomic_load_n(&mapped, __ATOMIC_RELAXED);
}

/* ---- held blocks: address → the flag of the op that handed it out ---- */

static struct held {
    CUdeviceptr addr;
    bool *flag;
} * held;
static size_t nheld, capheld;

void cgj_pool_hold(CUdeviceptr addr, bool *flag)
{
    pthread_mutex_lock(&lock);
    if (nheld == capheld) held = cgj_xrealloc(held, (capheld = capheld ? 2 * capheld : 64) * sizeof *held);
    held[nheld++] = (struct held){addr, flag};
    __atomic_store_n(flag, true, __ATOMIC_RELEASE); /* the replaying thread reads it unlocked */
    pthread_mutex_unlock(&lock);
}

bool cgj_pool_release(CUdeviceptr addr)
{
    pthread_mutex_lock(&lock);
    bool found = false;
    for (size_t i = nheld; i-- > 0 && !found;) {
        if (held[i].addr != addr) continue;
        __atomic_store_n(held[i].flag, false, __ATOMIC_RELEASE);
        held[i] = held[--nheld];
        found = true;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void cgj_pool_forked(void)
{
    pthread_mutex_init(&lock, NULL);
}
