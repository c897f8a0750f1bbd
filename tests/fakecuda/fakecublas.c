/*
 * fakecublas.c — a fake cuBLAS (libfakecublas.so) for host tests of cgjit's library wrappers.
 *
 * It exports, with the signatures of cublas_v2.h: cublasCreate_v2, cublasDestroy_v2,
 * cublasSetStream_v2/GetStream_v2, cublasSetPointerMode_v2/GetPointerMode_v2, cublasSetMathMode/
 * GetMathMode, cublasSetAtomicsMode/GetAtomicsMode, cublasSetWorkspace_v2, and the computing
 * functions cublasSaxpy_v2, cublasSscal_v2, cublasScopy_v2, cublasSdot_v2, cublasSgemm_v2
 * (column-major, naive). Results are plain sequential float arithmetic: two runs with the same
 * inputs agree bitwise, which is what the tests compare.
 *
 * Like the real library it works only through the driver API, and reaches the driver as the real
 * one does: dlopen the driver (CGJIT_DRIVER, as the tests set it to the fake's path, else
 * "libcuda.so.1"), dlsym("cuGetProcAddress_v2"), then every entry point through
 * cuGetProcAddress. In a process running cgjit those look-ups go through cgjit's dlsym, so cgjit
 * sees every driver call the fake makes: cuMemAlloc_v2/cuMemFree_v2 of workspaces, cuLaunchKernel
 * of its kernels, cuMemcpyDtoHAsync_v2 + cuStreamSynchronize of a host-mode dot result. The
 * kernels are host functions registered with fakecuda_register_kernel, looked up in that driver.
 *
 * Behaviour that matters to the tests:
 *  - Each handle owns a workspace (cuMemAlloc_v2 at create, cuMemFree_v2 at destroy, replaced by
 *    cublasSetWorkspace_v2). EVERY kernel takes the workspace pointer as its first parameter and
 *    writes to it (a launch counter; Sdot also its partial result). A kernel whose workspace is not
 *    the current workspace of a live handle is counted (fakecublas_workspace_errors) and reported,
 *    and does not touch it: a replayed graph still using a destroyed handle's workspace is caught
 *    in every build, not only under AddressSanitizer.
 *  - Host pointer mode passes alpha/beta by value as kernel parameters; device pointer mode passes
 *    the device pointers, and the kernels read them when they run.
 *  - Sdot: one kernel reduces into the workspace; in host pointer mode the value is copied to the
 *    host pointer (cuMemcpyDtoHAsync_v2 on the handle's stream, then cuStreamSynchronize); in
 *    device pointer mode a second kernel stores it at *result.
 *  - Sgemm with beta != 1 first scales C through cublasSscal_v2, looked up with
 *    dlsym(RTLD_DEFAULT): a library call nested in a library call, as real libraries make them. In
 *    a process where something else exports cublasSscal_v2 ahead of this library (cgjit's
 *    wrapper), that is what the nested call reaches. In host pointer mode beta == 1 skips the
 *    nested call and beta == 0 overwrites C (BLAS: C is not read); in device pointer mode the
 *    library cannot see beta, so the nested Sscal always runs and the GEMM kernel reads *beta only
 *    to overwrite C when it is 0.
 *  - Sgemm in host pointer mode with beta == 0, ldc == m and atomics allowed
 *    (cublasSetAtomicsMode) works as the real library's split-K does: cuMemsetD32Async clears C
 *    on the handle's stream, then the kernel accumulates into it. The memset's address is C.
 *  - Scopy of contiguous vectors (both increments 1) is one cuMemcpyDtoDAsync on the handle's
 *    stream, no kernel; strided copies launch the copy kernel.
 *  - Arguments are validated as cuBLAS does: a NULL or destroyed handle gives
 *    CUBLAS_STATUS_NOT_INITIALIZED, n < 0 (m, n, k < 0 for Sgemm), a bad transpose or leading
 *    dimension, a NULL scalar pointer give CUBLAS_STATUS_INVALID_VALUE, before any driver call.
 *    n == 0 returns at once (Sdot then stores 0). Strides follow BLAS: a negative increment walks
 *    the vector backwards; Sscal with incx <= 0 does nothing.
 *  - Hidden state, as the real library keeps it (fakecublas_set_heuristics(1); off by default so
 *    that tests comparing two halves on one handle see one algorithm). Sgemm's last parameter
 *    says how it runs, chosen from what earlier calls left behind, which no argument shows:
 *     - the algorithm: once a handle has run GEMMs of two different shapes (m, n, k) it "tunes"
 *       and sums the k products in the other order from then on, which rounds differently;
 *     - a workspace semaphore: a GEMM with k > FAKECUBLAS_SPLIT_K leaves a word of the
 *       workspace set, as a split-K GEMM leaves its semaphores; the next GEMM on that handle
 *       clears it first (cuMemsetD32Async), and only then. A kernel that starts with the word set
 *       reads stale partial sums: its result is off by one in every element.
 *    A replay that skipped the library and launched what two earlier calls launched computes
 *    wrong results here; one that lets the library run sees the new kernel parameter or the
 *    extra memset.
 */
#define _GNU_SOURCE
#include "fakecublas.h"
#include "fakecuda.h"
#include "fakelib.h"

#include <cublas_v2.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FB_API __attribute__((visibility("default")))
#define BLOCK 256u

/* ---------------------------------------------------------------------------------------------
 * The driver, reached as the real library reaches it
 * ------------------------------------------------------------------------------------------- */

static struct {
    __typeof__(cuMemAlloc_v2) *mem_alloc;
    __typeof__(cuMemFree_v2) *mem_free;
    __typeof__(cuLaunchKernel) *launch;
    __typeof__(cuMemcpyDtoHAsync_v2) *dtoh_async;
    __typeof__(cuStreamSynchronize) *stream_sync;
    __typeof__(cuMemsetD32Async) *memset32_async;
    __typeof__(cuMemcpyDtoDAsync_v2) *dtod_async;
} drv;

/* Kernels, registered once with the fake driver. */
enum { K_AXPY_H, K_AXPY_D, K_SCAL_H, K_SCAL_D, K_COPY, K_DOT_REDUCE, K_DOT_STORE, K_GEMM_H, K_GEMM_D, K_COUNT };
static CUfunction kern[K_COUNT];

/* What the workspace holds. */
typedef struct ws_layout {
    unsigned launches;    /* kernels of this library that ran with this workspace */
    unsigned last_kernel; /* K_* of the last one */
    float dot;            /* Sdot's reduction */
    unsigned semaphore;   /* Sgemm under heuristics: set by a split-K GEMM, cleared by the library */
} ws_layout;

static unsigned long g_calls, g_ws_errors, g_kernels_run;
static void (*g_host_work)(double us); /* fakecublas_set_host_work */
static double g_host_us;

/* First statement of every computing function: counted, then the library's own host time. */
static void entered(void)
{
    fakelib_count(&g_calls);
    void (*work)(double) = __atomic_load_n(&g_host_work, __ATOMIC_RELAXED);
    if (work) work(g_host_us);
}

/* ---------------------------------------------------------------------------------------------
 * Handles
 * ------------------------------------------------------------------------------------------- */

struct cublasContext {
    fakelib_obj_t live; /* on the live list (fakelib.h) */
    CUstream stream;
    cublasPointerMode_t pointer_mode;
    cublasMath_t math_mode;
    cublasAtomicsMode_t atomics_mode;
    CUdeviceptr ws; /* the workspace every kernel gets */
    size_t ws_bytes;
    bool ws_owned; /* allocated by the handle (freed at destroy or when replaced) */
    /* Hidden state (fakecublas_set_heuristics): the GEMM shapes seen, and whether a split-K
     * GEMM left the workspace semaphore set. */
    int shapes[2][3];
    int nshapes;
    bool semaphore_set;
};
static int g_heuristics;

static bool has_workspace(const fakelib_obj_t *o, const void *ws)
{
    return ((const struct cublasContext *)o)->ws == *(const CUdeviceptr *)ws;
}

/* Is ws the current workspace of a live handle? */
static bool workspace_live(CUdeviceptr ws)
{
    return ws && fakelib_live_any(has_workspace, &ws);
}

/* First statement of every entry point taking a handle. */
#define CHECK_HANDLE(h)                                                     \
    do {                                                                    \
        if (!(h) || !fakelib_live(h)) return CUBLAS_STATUS_NOT_INITIALIZED; \
    } while (0)

/* ---------------------------------------------------------------------------------------------
 * Kernels (host functions run by the fake driver)
 * ------------------------------------------------------------------------------------------- */

#define P(type, i) (*(type *)params[i])

/* Every kernel starts here: the workspace must be live; it counts the launch there. */
static bool ws_touch(void **params, int kernel)
{
    fakelib_count(&g_kernels_run);
    CUdeviceptr ws = P(CUdeviceptr, 0);
    if (!workspace_live(ws)) {
        fakelib_count(&g_ws_errors);
        fprintf(stderr, "fakecublas: kernel %d ran with workspace 0x%llx, which no live handle owns\n", kernel,
                (unsigned long long)ws);
        return false;
    }
    ws_layout *w = (ws_layout *)(uintptr_t)ws;
    w->launches++;
    w->last_kernel = (unsigned)kernel;
    return true;
}

/* Element i of a BLAS vector of n elements with increment inc. */
static long at(int i, int n, int inc)
{
    return inc >= 0 ? (long)i * inc : (long)(n - 1 - i) * -inc;
}

#define UNUSED_DIMS (void)grid, (void)block, (void)smem

static void axpy_body(void **params, float alpha)
{
    int n = P(int, 1), incx = P(int, 4), incy = P(int, 6);
    const float *x = P(const float *, 3);
    float *y = P(float *, 5);
    for (int i = 0; i < n; i++) y[at(i, n, incy)] += alpha * x[at(i, n, incx)];
}

static void scal_body(void **params, float alpha)
{
    int n = P(int, 1), incx = P(int, 4);
    float *x = P(float *, 3);
    for (int i = 0; i < n; i++) x[(long)i * incx] *= alpha;
}

/* A kernel whose alpha is parameter 2: by value in host pointer mode (ALPHA_HOST), a device
 * pointer read when the kernel runs in device pointer mode (ALPHA_DEVICE). */
#define ALPHA_HOST P(float, 2)
#define ALPHA_DEVICE (*P(const float *, 2))
#define ALPHA_KERNEL(name, id, body, alpha)                                                         \
    static void name(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem) \
    {                                                                                               \
        UNUSED_DIMS;                                                                                \
        ws_touch(params, id);                                                                       \
        body(params, alpha);                                                                        \
    }

/* (ws, n, alpha, x, incx, y, incy) */
ALPHA_KERNEL(k_axpy_h, K_AXPY_H, axpy_body, ALPHA_HOST)
ALPHA_KERNEL(k_axpy_d, K_AXPY_D, axpy_body, ALPHA_DEVICE)
/* (ws, n, alpha, x, incx), incx > 0 */
ALPHA_KERNEL(k_scal_h, K_SCAL_H, scal_body, ALPHA_HOST)
ALPHA_KERNEL(k_scal_d, K_SCAL_D, scal_body, ALPHA_DEVICE)

/* (ws, n, x, incx, y, incy) */
static void k_copy(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    UNUSED_DIMS;
    ws_touch(params, K_COPY);
    int n = P(int, 1), incx = P(int, 3), incy = P(int, 5);
    const float *x = P(const float *, 2);
    float *y = P(float *, 4);
    for (int i = 0; i < n; i++) y[at(i, n, incy)] = x[at(i, n, incx)];
}

/* (ws, n, x, incx, y, incy): the dot product into the workspace */
static void k_dot_reduce(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    UNUSED_DIMS;
    bool live = ws_touch(params, K_DOT_REDUCE);
    int n = P(int, 1), incx = P(int, 3), incy = P(int, 5);
    const float *x = P(const float *, 2), *y = P(const float *, 4);
    float acc = 0.0f;
    for (int i = 0; i < n; i++) acc += x[at(i, n, incx)] * y[at(i, n, incy)];
    if (live) ((ws_layout *)(uintptr_t)P(CUdeviceptr, 0))->dot = acc;
}

/* (ws, result): *result = the workspace's dot (device pointer mode) */
static void k_dot_store(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    UNUSED_DIMS;
    bool live = ws_touch(params, K_DOT_STORE);
    *P(float *, 1) = live ? ((const ws_layout *)(uintptr_t)P(CUdeviceptr, 0))->dot : 0.0f;
}

static float op_at(const float *a, int ld, int trans, int row, int col)
{
    return trans == CUBLAS_OP_N ? a[row + (long)col * ld] : a[col + (long)row * ld];
}

/* Sgemm's last parameter: how the kernel runs (hidden state, fakecublas_set_heuristics). */
enum { GEMM_REVERSED = 1, GEMM_SEMAPHORE = 2 };

/* C = alpha * op(A) op(B) + (overwrite ? 0 : beta * C) */
static void gemm_body(void **params, float alpha, float beta, bool overwrite)
{
    int how = P(int, 14);
    float stale = 0.0f; /* partial sums a semaphore left set adds */
    if ((how & GEMM_SEMAPHORE) && workspace_live(P(CUdeviceptr, 0))) {
        ws_layout *w = (ws_layout *)(uintptr_t)P(CUdeviceptr, 0);
        stale = w->semaphore ? 1.0f : 0.0f;
        w->semaphore = P(int, 5) > FAKECUBLAS_SPLIT_K;
    }
    int ta = P(int, 1), tb = P(int, 2), m = P(int, 3), n = P(int, 4), k = P(int, 5);
    const float *a = P(const float *, 7), *b = P(const float *, 9);
    int lda = P(int, 8), ldb = P(int, 10);
    float *c = P(float *, 12);
    int ldc = P(int, 13);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0.0f; /* alpha == 0: A and B are not read (BLAS) */
            for (int q = 0; alpha != 0.0f && q < k; q++) {
                int l = how & GEMM_REVERSED ? k - 1 - q : q;
                acc += op_at(a, lda, ta, i, l) * op_at(b, ldb, tb, l, j);
            }
            float *cij = &c[i + (long)j * ldc];
            *cij = (overwrite ? alpha * acc : alpha * acc + beta * *cij) + stale;
        }
}

/* (ws, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); host mode: beta is 1
 * (C already scaled by the nested Sscal) or 0 (overwrite) */
static void k_gemm_h(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    UNUSED_DIMS;
    ws_touch(params, K_GEMM_H);
    float beta = P(float, 11);
    gemm_body(params, P(float, 6), beta, beta == 0.0f);
}

/* Device mode: alpha and beta are device pointers; C was scaled by beta already. */
static void k_gemm_d(void **params, const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    UNUSED_DIMS;
    ws_touch(params, K_GEMM_D);
    gemm_body(params, *P(const float *, 6), 1.0f, *P(const float *, 11) == 0.0f);
}

/* ---------------------------------------------------------------------------------------------
 * Initialization: the driver's entry points and the kernels
 * ------------------------------------------------------------------------------------------- */

static bool init(void)
{
    __typeof__(fakecuda_register_kernel) *reg = fakelib_driver_open();
    if (!reg) return false;
#define RESOLVE(field, name)                                           \
    do {                                                               \
        if (!fakelib_resolve(name, (void **)&drv.field)) return false; \
    } while (0)
    RESOLVE(mem_alloc, "cuMemAlloc");
    RESOLVE(mem_free, "cuMemFree");
    RESOLVE(launch, "cuLaunchKernel");
    RESOLVE(dtoh_async, "cuMemcpyDtoHAsync");
    RESOLVE(stream_sync, "cuStreamSynchronize");
    RESOLVE(memset32_async, "cuMemsetD32Async");
    RESOLVE(dtod_async, "cuMemcpyDtoDAsync");
#undef RESOLVE
    static const size_t axpy[] = {8, 4, 4, 8, 4, 8, 4}, axpy_d[] = {8, 4, 8, 8, 4, 8, 4};
    static const size_t scal[] = {8, 4, 4, 8, 4}, scal_d[] = {8, 4, 8, 8, 4};
    static const size_t copy[] = {8, 4, 8, 4, 8, 4}, store[] = {8, 8};
    static const size_t gemm[] = {8, 4, 4, 4, 4, 4, 4, 8, 4, 8, 4, 4, 8, 4, 4};
    static const size_t gemm_d[] = {8, 4, 4, 4, 4, 4, 8, 8, 4, 8, 4, 8, 8, 4, 4};
    static const struct {
        const char *name;
        fakecuda_kernel_fn fn;
        int n;
        const size_t *sizes;
    } defs[K_COUNT] = {
        [K_AXPY_H] = {"fakecublas_saxpy_host", k_axpy_h, 7, axpy},
        [K_AXPY_D] = {"fakecublas_saxpy_device", k_axpy_d, 7, axpy_d},
        [K_SCAL_H] = {"fakecublas_sscal_host", k_scal_h, 5, scal},
        [K_SCAL_D] = {"fakecublas_sscal_device", k_scal_d, 5, scal_d},
        [K_COPY] = {"fakecublas_scopy", k_copy, 6, copy},
        [K_DOT_REDUCE] = {"fakecublas_sdot_reduce", k_dot_reduce, 6, copy},
        [K_DOT_STORE] = {"fakecublas_sdot_store", k_dot_store, 2, store},
        [K_GEMM_H] = {"fakecublas_sgemm_host", k_gemm_h, 15, gemm},
        [K_GEMM_D] = {"fakecublas_sgemm_device", k_gemm_d, 15, gemm_d},
    };
    for (int i = 0; i < K_COUNT; i++) {
        /* Registered as CUkernel handles, as the CUDA runtime inside the real library hands them. */
        kern[i] = reg(defs[i].name, defs[i].fn, defs[i].n, defs[i].sizes, 1, 0);
        if (!kern[i]) return false;
    }
    return true;
}

static bool ready(void)
{
    return fakelib_ready(init);
}

static cublasStatus_t launch(cublasHandle_t h, int k, long work, void **params)
{
    unsigned grid = work > 0 ? (unsigned)((work + BLOCK - 1) / BLOCK) : 1u;
    CUresult r = drv.launch(kern[k], grid, 1, 1, BLOCK, 1, 1, 0, h->stream, params, NULL);
    return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

/* ---------------------------------------------------------------------------------------------
 * Handle functions
 * ------------------------------------------------------------------------------------------- */

FB_API cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    if (!ready()) return CUBLAS_STATUS_NOT_INITIALIZED;
    struct cublasContext *c = calloc(1, sizeof *c);
    if (!c) return CUBLAS_STATUS_ALLOC_FAILED;
    c->pointer_mode = CUBLAS_POINTER_MODE_HOST;
    c->math_mode = CUBLAS_DEFAULT_MATH;
    c->atomics_mode = CUBLAS_ATOMICS_NOT_ALLOWED;
    if (drv.mem_alloc(&c->ws, FAKECUBLAS_WORKSPACE_BYTES) != CUDA_SUCCESS) {
        free(c);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    c->ws_bytes = FAKECUBLAS_WORKSPACE_BYTES;
    c->ws_owned = true;
    fakelib_live_add(&c->live);
    *handle = c;
    return CUBLAS_STATUS_SUCCESS;
}

FB_API cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!fakelib_live_remove(&handle->live)) return CUBLAS_STATUS_NOT_INITIALIZED;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (handle->ws_owned && drv.mem_free(handle->ws) != CUDA_SUCCESS) st = CUBLAS_STATUS_INTERNAL_ERROR;
    free(handle);
    return st;
}

/* cublasSet<X>/cublasGet<X> of a setting the handle keeps in `field`: the set function stores a
 * value that `valid` accepts, the get function reads it back. */
#define HANDLE_SETTING(set_fn, get_fn, type, field, valid)           \
    FB_API cublasStatus_t set_fn(cublasHandle_t handle, type value)  \
    {                                                                \
        CHECK_HANDLE(handle);                                        \
        if (!(valid)) return CUBLAS_STATUS_INVALID_VALUE;            \
        handle->field = value;                                       \
        return CUBLAS_STATUS_SUCCESS;                                \
    }                                                                \
    FB_API cublasStatus_t get_fn(cublasHandle_t handle, type *value) \
    {                                                                \
        CHECK_HANDLE(handle);                                        \
        if (!value) return CUBLAS_STATUS_INVALID_VALUE;              \
        *value = handle->field;                                      \
        return CUBLAS_STATUS_SUCCESS;                                \
    }

HANDLE_SETTING(cublasSetStream_v2, cublasGetStream_v2, cudaStream_t, stream, true)
HANDLE_SETTING(cublasSetPointerMode_v2, cublasGetPointerMode_v2, cublasPointerMode_t, pointer_mode,
               value == CUBLAS_POINTER_MODE_HOST || value == CUBLAS_POINTER_MODE_DEVICE)
HANDLE_SETTING(cublasSetMathMode, cublasGetMathMode, cublasMath_t, math_mode, true)
HANDLE_SETTING(cublasSetAtomicsMode, cublasGetAtomicsMode, cublasAtomicsMode_t, atomics_mode,
               value == CUBLAS_ATOMICS_NOT_ALLOWED || value == CUBLAS_ATOMICS_ALLOWED)

#undef HANDLE_SETTING

/* The caller's workspace replaces the handle's (whose own is freed); NULL and 0 go back to a
 * workspace of the handle's own. */
FB_API cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes)
{
    CHECK_HANDLE(handle);
    if ((workspace == NULL) != (workspaceSizeInBytes == 0)) return CUBLAS_STATUS_INVALID_VALUE;
    if (workspace && ((uintptr_t)workspace % 256 != 0 || workspaceSizeInBytes < FAKECUBLAS_MIN_WORKSPACE))
        return CUBLAS_STATUS_INVALID_VALUE;
    CUdeviceptr ws = (CUdeviceptr)(uintptr_t)workspace;
    size_t bytes = workspaceSizeInBytes;
    if (!workspace) {
        if (drv.mem_alloc(&ws, FAKECUBLAS_WORKSPACE_BYTES) != CUDA_SUCCESS) return CUBLAS_STATUS_ALLOC_FAILED;
        bytes = FAKECUBLAS_WORKSPACE_BYTES;
    }
    fakelib_lock();
    CUdeviceptr old = handle->ws;
    bool old_owned = handle->ws_owned;
    handle->ws = ws;
    handle->ws_bytes = bytes;
    handle->ws_owned = !workspace;
    fakelib_unlock();
    if (old_owned && drv.mem_free(old) != CUDA_SUCCESS) return CUBLAS_STATUS_INTERNAL_ERROR;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Computing functions
 * ------------------------------------------------------------------------------------------- */

static bool host_mode(cublasHandle_t h)
{
    return h->pointer_mode == CUBLAS_POINTER_MODE_HOST;
}

FB_API cublasStatus_t cublasSaxpy_v2(cublasHandle_t handle, int n, const float *alpha, const float *x, int incx,
                                     float *y, int incy)
{
    entered();
    CHECK_HANDLE(handle);
    if (n < 0 || !alpha) return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0) return CUBLAS_STATUS_SUCCESS;
    float a = host_mode(handle) ? *alpha : 0.0f;
    void *params[] = {&handle->ws, &n, host_mode(handle) ? (void *)&a : (void *)&alpha, &x, &incx, &y, &incy};
    return launch(handle, host_mode(handle) ? K_AXPY_H : K_AXPY_D, n, params);
}

FB_API cublasStatus_t cublasSscal_v2(cublasHandle_t handle, int n, const float *alpha, float *x, int incx)
{
    entered();
    CHECK_HANDLE(handle);
    if (n < 0 || !alpha) return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0 || incx <= 0) return CUBLAS_STATUS_SUCCESS;
    float a = host_mode(handle) ? *alpha : 0.0f;
    void *params[] = {&handle->ws, &n, host_mode(handle) ? (void *)&a : (void *)&alpha, &x, &incx};
    return launch(handle, host_mode(handle) ? K_SCAL_H : K_SCAL_D, n, params);
}

FB_API cublasStatus_t cublasScopy_v2(cublasHandle_t handle, int n, const float *x, int incx, float *y, int incy)
{
    entered();
    CHECK_HANDLE(handle);
    if (n < 0) return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0) return CUBLAS_STATUS_SUCCESS;
    if (incx == 1 && incy == 1) { /* contiguous: a device-to-device copy, no kernel */
        CUresult r = drv.dtod_async((CUdeviceptr)(uintptr_t)y, (CUdeviceptr)(uintptr_t)x, (size_t)n * sizeof(float),
                                    handle->stream);
        return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
    }
    void *params[] = {&handle->ws, &n, &x, &incx, &y, &incy};
    return launch(handle, K_COPY, n, params);
}

FB_API cublasStatus_t cublasSdot_v2(cublasHandle_t handle, int n, const float *x, int incx, const float *y, int incy,
                                    float *result)
{
    entered();
    CHECK_HANDLE(handle);
    if (n < 0 || !result) return CUBLAS_STATUS_INVALID_VALUE;
    if (n == 0) {
        if (host_mode(handle)) {
            *result = 0.0f;
            return CUBLAS_STATUS_SUCCESS;
        }
        /* device mode: the zero is stored by the kernel below, after an empty reduction */
    }
    void *reduce[] = {&handle->ws, &n, &x, &incx, &y, &incy};
    cublasStatus_t st = launch(handle, K_DOT_REDUCE, n, reduce);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (host_mode(handle)) {
        CUdeviceptr src = handle->ws + offsetof(ws_layout, dot);
        if (drv.dtoh_async(result, src, sizeof *result, handle->stream) != CUDA_SUCCESS ||
            drv.stream_sync(handle->stream) != CUDA_SUCCESS)
            return CUBLAS_STATUS_EXECUTION_FAILED;
        return CUBLAS_STATUS_SUCCESS;
    }
    void *store[] = {&handle->ws, &result};
    return launch(handle, K_DOT_STORE, 1, store);
}

typedef cublasStatus_t (*sscal_fn)(cublasHandle_t, int, const float *, float *, int);

/* cublasSscal_v2 as the process resolves it (cgjit's wrapper, where there is one). */
static sscal_fn exported_sscal(void)
{
    static sscal_fn fn;
    sscal_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (sscal_fn)dlsym(RTLD_DEFAULT, "cublasSscal_v2");
        if (!f) f = cublasSscal_v2;
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* How the next GEMM of handle h runs, from the state earlier calls left (heuristics on): the
 * algorithm its shape history picks, and the semaphore cleared first where one was left set.
 * -1 if that clearing failed. */
static int gemm_how(cublasHandle_t h, int m, int n, int k)
{
    if (!__atomic_load_n(&g_heuristics, __ATOMIC_RELAXED)) return 0;
    const int shape[3] = {m, n, k};
    bool seen = false;
    for (int i = 0; i < h->nshapes && !seen; i++) seen = !memcmp(h->shapes[i], shape, sizeof shape);
    if (!seen && h->nshapes < 2) memcpy(h->shapes[h->nshapes++], shape, sizeof shape);
    if (h->semaphore_set && drv.memset32_async(h->ws + offsetof(ws_layout, semaphore), 0, 1, h->stream) != CUDA_SUCCESS)
        return -1;
    h->semaphore_set = k > FAKECUBLAS_SPLIT_K;
    return GEMM_SEMAPHORE | (h->nshapes >= 2 ? GEMM_REVERSED : 0);
}

static bool op_ok(cublasOperation_t t)
{
    return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C;
}

static int imax(int a, int b)
{
    return a > b ? a : b;
}

FB_API cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                     int n, int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                                     const float *beta, float *C, int ldc)
{
    entered();
    CHECK_HANDLE(handle);
    if (!op_ok(transa) || !op_ok(transb) || m < 0 || n < 0 || k < 0 || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (lda < imax(1, transa == CUBLAS_OP_N ? m : k) || ldb < imax(1, transb == CUBLAS_OP_N ? k : n) ||
        ldc < imax(1, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    bool host = host_mode(handle);
    float a = host ? *alpha : 0.0f, b = host ? *beta : 0.0f;
    if (host && b == 1.0f && (a == 0.0f || k == 0)) return CUBLAS_STATUS_SUCCESS;
    /* C = beta * C first, through the exported Sscal (nested library call). */
    if (!host || (b != 1.0f && b != 0.0f)) {
        sscal_fn scal = exported_sscal();
        cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
        if (ldc == m) st = scal(handle, m * n, beta, C, 1);
        for (int j = 0; ldc != m && j < n && st == CUBLAS_STATUS_SUCCESS; j++)
            st = scal(handle, m, beta, C + (long)j * ldc, 1);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    int ta = (int)transa, tb = (int)transb;
    float beta_kernel = b == 0.0f ? 0.0f : 1.0f; /* host mode: 0 overwrites, else C is scaled */
    if (host && b == 0.0f && ldc == m && handle->atomics_mode == CUBLAS_ATOMICS_ALLOWED) {
        /* Split-K as the real library does it with atomics allowed: C cleared, then accumulated. */
        if (drv.memset32_async((CUdeviceptr)(uintptr_t)C, 0, (size_t)m * n, handle->stream) != CUDA_SUCCESS)
            return CUBLAS_STATUS_EXECUTION_FAILED;
        beta_kernel = 1.0f;
    }
    int how = gemm_how(handle, m, n, k);
    if (how < 0) return CUBLAS_STATUS_EXECUTION_FAILED;
    void *params[] = {&handle->ws,
                      &ta,
                      &tb,
                      &m,
                      &n,
                      &k,
                      host ? (void *)&a : (void *)&alpha,
                      &A,
                      &lda,
                      &B,
                      &ldb,
                      host ? (void *)&beta_kernel : (void *)&beta,
                      &C,
                      &ldc,
                      &how};
    return launch(handle, host ? K_GEMM_H : K_GEMM_D, (long)m * n, params);
}

/* ---------------------------------------------------------------------------------------------
 * Test-facing API
 * ------------------------------------------------------------------------------------------- */

FAKECUBLAS_API unsigned long fakecublas_calls(void)
{
    return __atomic_load_n(&g_calls, __ATOMIC_RELAXED);
}

FAKECUBLAS_API unsigned long fakecublas_workspace_errors(void)
{
    return __atomic_load_n(&g_ws_errors, __ATOMIC_RELAXED);
}

FAKECUBLAS_API unsigned long fakecublas_kernels_run(void)
{
    return __atomic_load_n(&g_kernels_run, __ATOMIC_RELAXED);
}

FAKECUBLAS_API void fakecublas_set_heuristics(int on)
{
    __atomic_store_n(&g_heuristics, on, __ATOMIC_RELAXED);
}

FAKECUBLAS_API void fakecublas_set_host_work(void (*work)(double us), double us)
{
    g_host_us = us;
    __atomic_store_n(&g_host_work, work, __ATOMIC_RELAXED);
}

FAKECUBLAS_API void fakecublas_reset(void)
{
    __atomic_store_n(&g_calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_ws_errors, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_kernels_run, 0, __ATOMIC_RELAXED);
}
