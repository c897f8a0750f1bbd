/*
 * libs.c — the library wrappers' common parts: real functions, generations, data types.
 */
#include "runtime/libs.h"
#include "base/map.h"
#include "base/spin.h"

#include <cublas_api.h>
#include <dlfcn.h>
#include <library_types.h>
#include <pthread.h>
#include <stdio.h>
#if __has_include(<cudnn_version.h>)
#include <cudnn_version.h>
#endif

__thread int cgj_lib_depth;

#define STR2(x) #x
#define STR(x) STR2(x)

/* The library a wrapped function belongs to, by the sonames of the headers cgjit was built with. */
static const char *const *library_of(const char *name)
{
    static const char *const lt[] = {"libcublasLt.so." STR(CUBLAS_VER_MAJOR), "libcublasLt.so", NULL};
    static const char *const blas[] = {"libcublas.so." STR(CUBLAS_VER_MAJOR), "libcublas.so", NULL};
#ifdef CUDNN_MAJOR
    static const char *const dnn[] = {"libcudnn.so." STR(CUDNN_MAJOR), "libcudnn.so", NULL};
#else
    static const char *const dnn[] = {"libcudnn.so", NULL};
#endif
    static const char *const nccl[] = {"libnccl.so.2", "libnccl.so", NULL};
    if (!strncmp(name, "nccl", 4)) return nccl;
    if (!strncmp(name, "cublasLt", 8)) return lt;
    if (!strncmp(name, "cublas", 6)) return blas;
    return dnn;
}

/* The real function: the next definition in lookup order; else, when the program does not load
 * the library itself (linked with --as-needed, its calls all bound to libcgjit's exports, the
 * linker drops it), from the library loaded here. */
void *cgj_lib_resolve(const char *name)
{
    void *p = cgj_real_next(name);
    for (const char *const *so = library_of(name); !p && *so; so++) {
        void *h = dlopen(*so, RTLD_NOW | RTLD_LOCAL);
        if (h) p = cgj_real_sym(h, name);
    }
    if (!p)
        fprintf(stderr, "cgjit: error: %s: not found after libcgjit in the lookup order, nor in %s\n", name,
                library_of(name)[0]);
    return p;
}

/* ---- generations ----
 * A map of object -> generation, read on every library call in a step and written when handles
 * change. Readers take the spinlock only on a miss of their thread's one-entry cache, which an
 * epoch invalidates whenever any entry changes. */

static cgj_map_t gens;
static int gen_lock;
static uint64_t gen_next = 1, gen_epoch = 1;
static __thread struct {
    uint64_t epoch, gen;
    const void *obj;
} gen_cache;

uint64_t cgj_lib_gen(const void *obj)
{
    uint64_t epoch = __atomic_load_n(&gen_epoch, __ATOMIC_ACQUIRE);
    if (gen_cache.epoch == epoch && gen_cache.obj == obj) return gen_cache.gen;
    uint64_t g = 0;
    cgj_spin_lock(&gen_lock);
    if (!cgj_map_get(&gens, cgj_map_ptr_key(obj), &g)) g = 0;
    epoch = gen_epoch;
    cgj_spin_unlock(&gen_lock);
    gen_cache.epoch = epoch, gen_cache.obj = obj, gen_cache.gen = g;
    return g;
}

/* A handle's settings (cgj_lib_gen_setting): its generation is a hash of the number it got when
 * created (or first set) and of the values set since. */
typedef struct settings {
    uint64_t serial;
    uint64_t v[CGJ_LIB_SETTINGS];
} settings_t;
static cgj_map_t settings; /* object -> settings_t * */

static void drop_settings(const void *obj)
{
    uint64_t p;
    if (!cgj_map_get(&settings, cgj_map_ptr_key(obj), &p)) return;
    cgj_free((settings_t *)(uintptr_t)p);
    cgj_map_del(&settings, cgj_map_ptr_key(obj));
}

/* Under gen_lock. */
static void gen_put(const void *obj, uint64_t g)
{
    cgj_map_put(&gens, cgj_map_ptr_key(obj), g);
    __atomic_store_n(&gen_epoch, gen_epoch + 1, __ATOMIC_RELEASE);
}

static void gen_set(const void *obj, bool drop)
{
    if (!obj) return;
    cgj_spin_lock(&gen_lock);
    drop_settings(obj);
    if (drop) {
        cgj_map_del(&gens, cgj_map_ptr_key(obj));
        __atomic_store_n(&gen_epoch, gen_epoch + 1, __ATOMIC_RELEASE);
    } else {
        gen_put(obj, gen_next++);
    }
    cgj_spin_unlock(&gen_lock);
}

void cgj_lib_gen_setting(const void *obj, cgj_lib_setting_t what, uint64_t v)
{
    if (!obj) return;
    cgj_spin_lock(&gen_lock);
    uint64_t p;
    settings_t *st;
    if (cgj_map_get(&settings, cgj_map_ptr_key(obj), &p)) {
        st = (settings_t *)(uintptr_t)p;
    } else {
        st = cgj_xcalloc(1, sizeof *st);
        st->serial = gen_next++;
        cgj_map_put(&settings, cgj_map_ptr_key(obj), (uint64_t)(uintptr_t)st);
        st->v[what] = ~v; /* a first setting always makes a generation of its own */
    }
    if (st->v[what] != v) {
        st->v[what] = v;
        /* Past gen_next's range (the high bit), so never equal to a plain generation. */
        gen_put(obj, cgj_hash_bytes(st, sizeof *st, 0x5e771e6) | 1ull << 63);
    }
    cgj_spin_unlock(&gen_lock);
}

void cgj_libs_forked(void)
{
    gen_lock = 0;
}

void cgj_lib_gen_bump(const void *obj)
{
    gen_set(obj, false);
}

void cgj_lib_gen_drop(const void *obj)
{
    gen_set(obj, true);
}

size_t cgj_lib_dtype_bytes(int t)
{
    switch ((cudaDataType)t) {
    case CUDA_R_8I:
    case CUDA_R_8U:
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: return 1;
    case CUDA_R_16F:
    case CUDA_R_16BF:
    case CUDA_C_8I:
    case CUDA_C_8U: return 2;
    case CUDA_R_32F:
    case CUDA_R_32I:
    case CUDA_R_32U:
    case CUDA_C_16F:
    case CUDA_C_16BF: return 4;
    case CUDA_R_64F:
    case CUDA_C_32F:
    case CUDA_C_32I:
    case CUDA_C_32U:
    case CUDA_R_64I:
    case CUDA_R_64U: return 8;
    case CUDA_C_64F: return 16;
    default: return 0;
    }
}
