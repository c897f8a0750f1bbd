/*
 * fakecuda_kernel.c — kernels of the fake driver: a kernel is a host function registered with
 * fakecuda_register_kernel (its handle serves as CUfunction or CUkernel), laid out with naturally
 * aligned parameters. This file packs a launch's parameter values (from kernelParams or `extra`)
 * into a private buffer, checks launch dimensions, submits kernel and host-function launches to
 * a stream (cuLaunchKernel/Ex, cuLaunchCooperativeKernel, cuLaunchHostFunc and their _ptsz twins,
 * cuLaunchCooperativeKernelMultiDevice), and answers the kernel introspection calls
 * (cuFuncGetParamInfo, cuKernelGetParamInfo, cuFuncGetName, cuKernelGetName). See fakecuda.c for
 * the overview.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Kernels and their parameter buffers
 * ------------------------------------------------------------------------------------------- */

fc_kernel *kernel_get(const void *handle)
{
    return live_get(handle, K_KERNEL);
}

/* Natural alignment of a parameter: min(size, 8), rounded down to a power of two. */
static size_t param_align(size_t size)
{
    size_t a = 8;
    while (a > size) a /= 2;
    return a ? a : 1;
}

/* One calloc'd block: nparams pointers, then the packed parameter bytes they point into. Zeroed,
 * so padding bytes are deterministic for anyone who compares parameter buffers. */
static size_t args_head(const fc_kernel *k)
{
    return align_up((size_t)k->nparams * sizeof(void *), 16);
}

unsigned char *args_bytes(const fc_kernel *k, void **argv)
{
    return (unsigned char *)argv + args_head(k);
}

void **args_new(const fc_kernel *k)
{
    void **argv = calloc(1, args_head(k) + k->total + 1);
    if (!argv) return NULL;
    for (int i = 0; i < k->nparams; i++) argv[i] = args_bytes(k, argv) + k->offset[i];
    return argv;
}

/* The packed buffer an `extra` array names (CU_LAUNCH_PARAM_BUFFER_POINTER/_SIZE/_END). */
static CUresult extra_parse(void **extra, const void **buf, size_t *bufsize)
{
    int have_size = 0;
    *buf = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            *buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            if (!extra[i + 1]) return CUDA_ERROR_INVALID_VALUE;
            *bufsize = *(const size_t *)extra[i + 1];
            have_size = 1;
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return (*buf && have_size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Copy a launch's parameter values (from kernelParams or extra) into a new args block. */
CUresult args_pack(const fc_kernel *k, void **params, void **extra, void ***out)
{
    const void *buf = NULL;
    size_t bufsize = 0;
    if (params && extra) return CUDA_ERROR_INVALID_VALUE;
    if (extra) {
        CUresult err = extra_parse(extra, &buf, &bufsize);
        if (err != CUDA_SUCCESS) return err;
        if (bufsize < k->total) return CUDA_ERROR_INVALID_VALUE;
    } else if (k->nparams > 0) {
        if (!params) return CUDA_ERROR_INVALID_VALUE;
        for (int i = 0; i < k->nparams; i++)
            if (!params[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    void **argv = args_new(k);
    if (!argv) return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned char *dst = args_bytes(k, argv);
    if (buf) {
        memcpy(dst, buf, k->total);
    } else {
        for (int i = 0; i < k->nparams; i++) memcpy(dst + k->offset[i], params[i], k->size[i]);
    }
    *out = argv;
    return CUDA_SUCCESS;
}

CUresult check_dims(const unsigned grid[3], const unsigned block[3], unsigned smem)
{
    for (int i = 0; i < 3; i++)
        if (grid[i] == 0 || block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned long long)block[0] * block[1] * block[2] > 1024) return CUDA_ERROR_INVALID_VALUE;
    return smem > MAX_SMEM ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Launches and kernel introspection
 * ------------------------------------------------------------------------------------------- */

static CUresult launch_kernel(const void *f, const unsigned grid[3], const unsigned block[3], unsigned smem, CUstream h,
                              int ptds, void **params, void **extra)
{
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    lock();
    fc_kernel *k = kernel_get(f);
    unlock();
    if (!k) return CUDA_ERROR_INVALID_HANDLE;
    CUresult err = check_dims(grid, block, smem);
    if (err == CUDA_SUCCESS) err = args_pack(k, params, extra, &op.kern.argv);
    if (err != CUDA_SUCCESS) return err;
    op.kern.k = k;
    memcpy(op.kern.grid, grid, sizeof op.kern.grid);
    memcpy(op.kern.block, block, sizeof op.kern.block);
    op.kern.smem = smem;
    delay(DELAY_LAUNCH);
    return submit(h, ptds, 0, &op);
}

static CUresult launch_classic(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream h, int ptds, void **params, void **extra)
{
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return launch_kernel(f, grid, block, smem, h, ptds, params, extra);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, int ptds, void **params, void **extra)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
    const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    return launch_kernel(f, grid, block, c->sharedMemBytes, c->hStream, ptds, params, extra);
}

FC_PTSZ(cuLaunchKernel,
        (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
         unsigned int bz, unsigned int smem, CUstream h, void **kernelParams, void **extra),
        launch_classic(f, gx, gy, gz, bx, by, bz, smem, h, ptds, kernelParams, extra))

FC_PTSZ(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
        launch_ex(config, f, ptds, kernelParams, extra))

/* A cooperative launch: every block must be resident at once. The fake's device has 132 SMs of
 * 2048 threads and at most 32 blocks each (registers and shared memory are not modelled). */
static CUresult launch_coop(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned smem, CUstream h, int ptds, void **params)
{
    unsigned long long threads = (unsigned long long)bx * by * bz, blocks = (unsigned long long)gx * gy * gz;
    if (threads > 0 && threads <= 1024) {
        unsigned long long per_sm = 2048 / threads < 32 ? 2048 / threads : 32;
        if (blocks > 132 * per_sm) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    return launch_classic(f, gx, gy, gz, bx, by, bz, smem, h, ptds, params, NULL);
}

FC_PTSZ(cuLaunchCooperativeKernel,
        (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
         unsigned int bz, unsigned int smem, CUstream h, void **kernelParams),
        launch_coop(f, gx, gy, gz, bx, by, bz, smem, h, ptds, kernelParams))

/* Deprecated since CUDA 11.3: one launch per device, and the fake has one device. Each launch
 * goes to an explicit stream; the synchronization flags change nothing on the CPU. */
FC_DEFINE(cuLaunchCooperativeKernelMultiDevice,
          (CUDA_LAUNCH_PARAMS * list, unsigned int numDevices, unsigned int flags))
{
    FAIL_POINT();
    if (!list || numDevices != 1 ||
        (flags & ~(unsigned)(CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_PRE_LAUNCH_SYNC |
                             CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_POST_LAUNCH_SYNC)))
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_LAUNCH_PARAMS *p = &list[0];
    if (!p->hStream || p->hStream == CU_STREAM_LEGACY || p->hStream == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    return launch_coop(p->function, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
                       p->sharedMemBytes, p->hStream, 0, p->kernelParams);
}

static CUresult launch_host(CUstream h, int ptds, CUhostFn fn, void *data)
{
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_HOST, .host = {fn, data}};
    return submit(h, ptds, 0, &op);
}

FC_PTSZ(cuLaunchHostFunc, (CUstream hStream, CUhostFn fn, void *userData), launch_host(hStream, ptds, fn, userData))

/* The kernel behind a handle, if it is the flavour (CUfunction or CUkernel) the call expects. */
static CUresult kernel_flavour(const void *handle, int want_cukernel, fc_kernel **out)
{
    lock();
    fc_kernel *k = kernel_get(handle);
    unlock();
    if (!k || !k->as_cukernel != !want_cukernel) return CUDA_ERROR_INVALID_HANDLE;
    *out = k;
    return CUDA_SUCCESS;
}

static CUresult param_info(const void *handle, int want_cukernel, size_t index, size_t *offset, size_t *size)
{
    lock();
    g_counts.param_queries++;
    unlock();
    fc_kernel *k;
    CUresult err = kernel_flavour(handle, want_cukernel, &k);
    if (err != CUDA_SUCCESS) return err;
    if (k->opaque) return CUDA_ERROR_NOT_SUPPORTED;
    if (!offset || index >= (size_t)k->nparams) return CUDA_ERROR_INVALID_VALUE;
    *offset = k->offset[index];
    if (size) *size = k->size[index]; /* optional, as in the real driver */
    return CUDA_SUCCESS;
}

FC_DEFINE(cuFuncGetParamInfo, (CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize))
{
    FAIL_POINT();
    return param_info(func, 0, paramIndex, paramOffset, paramSize);
}

FC_DEFINE(cuKernelGetParamInfo, (CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize))
{
    FAIL_POINT();
    return param_info(kernel, 1, paramIndex, paramOffset, paramSize);
}

static CUresult kernel_name(const void *handle, int want_cukernel, const char **name)
{
    fc_kernel *k;
    lock();
    g_counts.name_queries++;
    unlock();
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = kernel_flavour(handle, want_cukernel, &k);
    if (err == CUDA_SUCCESS) *name = k->name;
    return err;
}

FC_DEFINE(cuFuncGetName, (const char **name, CUfunction hfunc))
{
    FAIL_POINT();
    return kernel_name(hfunc, 0, name);
}

FC_DEFINE(cuKernelGetName, (const char **name, CUkernel hfunc))
{
    FAIL_POINT();
    return kernel_name(hfunc, 1, name);
}

/* ---------------------------------------------------------------------------------------------
 * Test-facing API: kernel registration
 * ------------------------------------------------------------------------------------------- */

static void kernel_free(fc_kernel *k)
{
    if (!k) return;
    free(k->name);
    free(k->size);
    free(k->offset);
    free(k);
}

static fc_kernel *kernel_new(const char *name, fakecuda_kernel_fn fn, int nparams, const size_t *sizes)
{
    fc_kernel *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->name = strdup(name);
    k->size = calloc((size_t)nparams + 1, sizeof *k->size);
    k->offset = calloc((size_t)nparams + 1, sizeof *k->offset);
    if (!k->name || !k->size || !k->offset) {
        kernel_free(k);
        return NULL;
    }
    k->fn = fn;
    k->nparams = nparams;
    for (int i = 0; i < nparams; i++) {
        k->size[i] = sizes[i];
        k->offset[i] = align_up(k->total, param_align(sizes[i]));
        k->total = k->offset[i] + sizes[i];
    }
    return k;
}

FAKECUDA_API CUfunction fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, int nparams,
                                                 const size_t *param_sizes, int as_cukernel, int opaque_layout)
{
    if (!name || !fn || nparams < 0 || (nparams > 0 && !param_sizes)) return NULL;
    for (int i = 0; i < nparams; i++)
        if (param_sizes[i] == 0) return NULL;
    fc_kernel *k = kernel_new(name, fn, nparams, param_sizes);
    if (!k) return NULL;
    k->as_cukernel = as_cukernel != 0;
    k->opaque = opaque_layout != 0;
    lock();
    int bad = live_add(k, K_KERNEL);
    unlock();
    if (bad) {
        kernel_free(k);
        return NULL;
    }
    return (CUfunction)(void *)k;
}
