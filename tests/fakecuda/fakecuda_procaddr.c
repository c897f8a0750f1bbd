/*
 * fakecuda_procaddr.c — cuGetProcAddress and cuGetProcAddress_v2 of the fake driver: the table
 * of every exported entry point (name and library-internal implementation fc_NAME), and the real
 * driver's name resolution (newest ABI suffix first, per-thread variants when asked for, minimum
 * versions and renamed bases). Handing out fc_NAME, not NAME, keeps a caller inside this library
 * even when cgjit exports a wrapper of the same name. See fakecuda.c for the overview.
 */
#include "fakecuda_internal.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * cuGetProcAddress: the table of every export, and the real driver's name resolution
 * ------------------------------------------------------------------------------------------- */

/* clang-format off */
#define FC_EXPORTS(X)                                                                                          \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)                      \
    X(cuDeviceGetAttribute) X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxSetCurrent)                            \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxRelease_v2) X(cuCtxDestroy_v2) \
    X(cuModuleUnload) X(cuLibraryUnload) X(cuCtxSynchronize) X(cuGetErrorString) X(cuGetErrorName) X(cuGetExportTable) \
    X(cuGetProcAddress) X(cuGetProcAddress_v2)                                                                  \
    X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz)                      \
    X(cuLaunchHostFunc) X(cuLaunchHostFunc_ptsz)                                                               \
    X(cuFuncGetParamInfo) X(cuKernelGetParamInfo) X(cuFuncGetName) X(cuKernelGetName)                          \
    X(cuMemcpy) X(cuMemcpy_ptds) X(cuMemcpyAsync) X(cuMemcpyAsync_ptsz)                                        \
    X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds)                      \
    X(cuMemcpyDtoD_v2) X(cuMemcpyDtoD_v2_ptds) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyHtoDAsync_v2_ptsz)            \
    X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyDtoDAsync_v2_ptsz)  \
    X(cuMemsetD8_v2) X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2) X(cuMemsetD16_v2_ptds)                            \
    X(cuMemsetD32_v2) X(cuMemsetD32_v2_ptds) X(cuMemsetD8Async) X(cuMemsetD8Async_ptsz)                        \
    X(cuMemsetD16Async) X(cuMemsetD16Async_ptsz) X(cuMemsetD32Async) X(cuMemsetD32Async_ptsz)                  \
    X(cuStreamCreate) X(cuStreamGetFlags) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2)                                      \
    X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuStreamQuery) X(cuStreamQuery_ptsz)                  \
    X(cuStreamWaitEvent) X(cuStreamWaitEvent_ptsz) X(cuEventCreate) X(cuEventDestroy_v2)                       \
    X(cuEventRecord) X(cuEventRecord_ptsz) X(cuEventRecordWithFlags) X(cuEventRecordWithFlags_ptsz)            \
    X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime_v2)                                             \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemFreeAsync)              \
    X(cuMemFreeAsync_ptsz) X(cuMemAllocPitch_v2) X(cuMemHostAlloc) X(cuMemAllocHost_v2) X(cuMemFreeHost)       \
    X(cuMemHostRegister_v2) X(cuMemHostUnregister) X(cuPointerGetAttribute) X(cuPointerGetAttributes)                                    \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuDeviceGetDefaultMemPool) X(cuMemPoolTrimTo)  \
    X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease)  \
    X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAccess) X(cuMemGetInfo_v2)                            \
    X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz) \
    X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz)                                        \
    X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz) X(cuStreamGetCaptureInfo_v3)                            \
    X(cuStreamGetCaptureInfo_v3_ptsz) X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphInstantiateWithFlags)        \
    X(cuGraphInstantiateWithParams) X(cuGraphInstantiateWithParams_ptsz) X(cuGraphUpload) X(cuGraphUpload_ptsz) \
    X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuGraphExecDestroy) X(cuGraphGetNodes) X(cuGraphDestroyNode) X(cuGraphNodeGetType)      \
    X(cuGraphKernelNodeGetParams_v2) X(cuGraphExecKernelNodeSetParams_v2)                                      \
    X(cuGraphMemcpyNodeGetParams) X(cuGraphMemsetNodeGetParams) X(cuGraphExecMemcpyNodeSetParams)               \
    X(cuGraphExecMemsetNodeSetParams) X(cuGraphExecEventRecordNodeSetEvent) X(cuGraphExecEventWaitNodeSetEvent) X(cuGraphExecHostNodeSetParams) X(cuGraphKernelNodeSetAttribute) X(cuGraphKernelNodeGetAttribute)        \
    X(cuModuleLoadData) X(cuModuleGetFunction)                                                                 \
    X(cuCtxSynchronize_v2) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) X(cuCtxWaitEvent)                       \
    X(cuMemcpy2D_v2) X(cuMemcpy2D_v2_ptds) X(cuMemcpy2DUnaligned_v2) X(cuMemcpy2DUnaligned_v2_ptds)             \
    X(cuMemcpy2DAsync_v2) X(cuMemcpy2DAsync_v2_ptsz) X(cuMemcpy3D_v2) X(cuMemcpy3D_v2_ptds)                     \
    X(cuMemcpy3DAsync_v2) X(cuMemcpy3DAsync_v2_ptsz) X(cuMemcpy3DPeer) X(cuMemcpy3DPeer_ptds)                   \
    X(cuMemcpy3DPeerAsync) X(cuMemcpy3DPeerAsync_ptsz) X(cuMemcpyPeer) X(cuMemcpyPeer_ptds)                     \
    X(cuMemcpyPeerAsync) X(cuMemcpyPeerAsync_ptsz)                                                             \
    X(cuMemsetD2D8_v2) X(cuMemsetD2D8_v2_ptds) X(cuMemsetD2D16_v2) X(cuMemsetD2D16_v2_ptds)                     \
    X(cuMemsetD2D32_v2) X(cuMemsetD2D32_v2_ptds) X(cuMemsetD2D8Async) X(cuMemsetD2D8Async_ptsz)                 \
    X(cuMemsetD2D16Async) X(cuMemsetD2D16Async_ptsz) X(cuMemsetD2D32Async) X(cuMemsetD2D32Async_ptsz)           \
    X(cuArrayCreate_v2) X(cuArrayDestroy) X(cuMemcpyAtoA_v2) X(cuMemcpyAtoA_v2_ptds)                           \
    X(cuMemcpyAtoD_v2) X(cuMemcpyAtoD_v2_ptds) X(cuMemcpyAtoH_v2) X(cuMemcpyAtoH_v2_ptds)                       \
    X(cuMemcpyDtoA_v2) X(cuMemcpyDtoA_v2_ptds) X(cuMemcpyHtoA_v2) X(cuMemcpyHtoA_v2_ptds)                       \
    X(cuMemcpyAtoHAsync_v2) X(cuMemcpyAtoHAsync_v2_ptsz) X(cuMemcpyHtoAAsync_v2) X(cuMemcpyHtoAAsync_v2_ptsz)   \
    X(cuMemcpyBatchAsync_v2) X(cuMemcpyBatchAsync_v2_ptsz) X(cuMemcpy3DBatchAsync_v2)                          \
    X(cuMemcpy3DBatchAsync_v2_ptsz)                                                                            \
    X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz) X(cuLaunchCooperativeKernelMultiDevice)     \
    X(cuStreamAddCallback) X(cuStreamAddCallback_ptsz) X(cuStreamWriteValue32_v2)                              \
    X(cuStreamWriteValue32_v2_ptsz) X(cuStreamWaitValue32_v2) X(cuStreamWaitValue32_v2_ptsz)                   \
    X(cuStreamWriteValue64_v2) X(cuStreamWriteValue64_v2_ptsz) X(cuStreamWaitValue64_v2)                       \
    X(cuStreamWaitValue64_v2_ptsz) X(cuStreamBatchMemOp_v2) X(cuStreamBatchMemOp_v2_ptsz)                      \
    X(cuMemPrefetchAsync_v2) X(cuMemPrefetchAsync_v2_ptsz) X(cuMemPrefetchBatchAsync)                          \
    X(cuMemPrefetchBatchAsync_ptsz) X(cuMemDiscardBatchAsync) X(cuMemDiscardBatchAsync_ptsz)                   \
    X(cuMemDiscardAndPrefetchBatchAsync) X(cuMemDiscardAndPrefetchBatchAsync_ptsz)                             \
    X(cuMemBatchDecompressAsync) X(cuMemBatchDecompressAsync_ptsz) X(cuMemMapArrayAsync)                       \
    X(cuMemMapArrayAsync_ptsz) X(cuSignalExternalSemaphoresAsync) X(cuSignalExternalSemaphoresAsync_ptsz)      \
    X(cuWaitExternalSemaphoresAsync) X(cuWaitExternalSemaphoresAsync_ptsz)
/* clang-format on */

/* The implementations fc_NAME, defined (hidden) across the library's sources, each with the
 * type of the driver's NAME. */
#define FC_DECLARE(name) extern FC_HIDDEN __typeof__(name) fc_##name;
FC_EXPORTS(FC_DECLARE)
#undef FC_DECLARE

static const struct {
    const char *name;
    void *fn;
} g_syms[] = {
#define FC_SYM_ROW(name) {#name, (void *)fc_##name},
    FC_EXPORTS(FC_SYM_ROW)
#undef FC_SYM_ROW
};

/* Base names whose current form needs a minimum version (older callers want an older ABI this
 * fake does not export), and base names the driver maps to a differently named function. */
static const struct {
    const char *base, *target;
    int min_version;
} g_versioned[] = {
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000},
    {"cuGraphKernelNodeGetParams", NULL, 12000},
    {"cuGraphExecKernelNodeSetParams", NULL, 12000},
    {"cuStreamGetCaptureInfo", NULL, 12030},
    {"cuStreamWriteValue32", NULL, 11070}, /* the _v2 stream memory operations */
    {"cuStreamWaitValue32", NULL, 11070},
    {"cuStreamWriteValue64", NULL, 11070},
    {"cuStreamWaitValue64", NULL, 11070},
    {"cuStreamBatchMemOp", NULL, 11070},
    {"cuMemPrefetchAsync", NULL, 12020}, /* _v2: a CUmemLocation instead of a device */
    {"cuMemcpyBatchAsync", NULL, 13000}, /* _v2: the CUDA 13 ABI, without failIdx */
    {"cuMemcpy3DBatchAsync", NULL, 13000},
};

/* Base names that are only themselves: cuCtxSynchronize_v2 is a function of its own (it takes a
 * context), which the driver hands out only to those who ask for it by that name. */
static const char *const g_unsuffixed[] = {"cuCtxSynchronize"};

static void *sym_exact(const char *name)
{
    for (size_t i = 0; i < sizeof g_syms / sizeof g_syms[0]; i++)
        if (strcmp(g_syms[i].name, name) == 0) return g_syms[i].fn;
    return NULL;
}

/* Try base+"_v3", "_v2", "" (newest ABI first), each with the per-thread variant first when
 * flags ask for the per-thread default stream. */
static void *sym_suffixed(const char *base, cuuint64_t flags)
{
    static const char *const versions[] = {"_v3", "_v2", ""};
    static const char *const per_thread[] = {"_ptds", "_ptsz"};
    char name[160];
    for (size_t v = 0; v < 3; v++) {
        for (size_t t = 0; (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && t < 2; t++) {
            snprintf(name, sizeof name, "%s%s%s", base, versions[v], per_thread[t]);
            if (sym_exact(name)) return sym_exact(name);
        }
        snprintf(name, sizeof name, "%s%s", base, versions[v]);
        if (sym_exact(name)) return sym_exact(name);
    }
    return NULL;
}

static void *sym_resolve(const char *symbol, int version, cuuint64_t flags)
{
    if (strlen(symbol) > 100) return NULL;
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return version >= 12050 ? (void *)fc_cuGetProcAddress_v2 : (void *)fc_cuGetProcAddress;
    for (size_t i = 0; i < sizeof g_unsuffixed / sizeof g_unsuffixed[0]; i++)
        if (strcmp(symbol, g_unsuffixed[i]) == 0) return sym_exact(symbol);
    for (size_t i = 0; i < sizeof g_versioned / sizeof g_versioned[0]; i++) {
        if (strcmp(symbol, g_versioned[i].base) != 0) continue;
        if (version < g_versioned[i].min_version) return NULL;
        if (g_versioned[i].target) symbol = g_versioned[i].target;
        break;
    }
    return sym_suffixed(symbol, flags);
}

static CUresult proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!symbol || !pfn ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = sym_resolve(symbol, version, flags);
    if (!*pfn) return CUDA_ERROR_NOT_FOUND;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags))
{
    FAIL_POINT();
    return proc_address(symbol, pfn, cudaVersion, flags, NULL);
}

FC_DEFINE(cuGetProcAddress_v2, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                CUdriverProcAddressQueryResult *symbolStatus))
{
    FAIL_POINT();
    return proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}
