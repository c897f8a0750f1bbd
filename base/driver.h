/*
 * driver.h — the table of real CUDA driver functions.
 *
 * cgjit never links libcuda: it dlopens the driver (CGJIT_DRIVER, default libcuda.so.1) and
 * resolves every function it forwards to or calls itself by its exported name with the real
 * dlsym. Each row of CGJ_DRIVER_LIST is (exported name, prototype name): the field is
 * cgj_drv.r_<exported name>, typed like the prototype in cuda.h. Exported names are the ABI
 * names (cuMemcpyHtoD_v2, cuLaunchKernel_ptsz): cuda.h maps the API names onto them with
 * macros, which is why the table only ever pastes or stringifies the first column.
 *
 * The W rows are the functions cgjit wraps (runtime/ hands out a wrapper in their place); the
 * D rows are the ones it only calls. A function the driver does not export stays NULL.
 */
#ifndef CGJ_DRIVER_H
#define CGJ_DRIVER_H

#include <cuda.h>
#include <stdbool.h>

/* The v1 cuGetProcAddress (CUDA 11.3–12.4); cuda.h only declares the v2 form. */
typedef CUresult (*cgj_gpa_v1_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cgj_proto_gpa_v1(const char *symbol, void **pfn, int version, cuuint64_t flags);
/* cuLaunchCooperativeKernelMultiDevice's prototype, without cuda.h's deprecation mark. */
CUresult cgj_proto_coop_multi(CUDA_LAUNCH_PARAMS *list, unsigned int n, unsigned int flags);

/* W(exported, prototype): traced or observed calls, wrapped. */
#define CGJ_DRIVER_WRAPPED(W)                                                              \
    W(cuGetProcAddress, cgj_proto_gpa_v1)                                                  \
    W(cuGetProcAddress_v2, cuGetProcAddress)                                               \
    W(cuLaunchKernel, cuLaunchKernel) W(cuLaunchKernel_ptsz, cuLaunchKernel)               \
    W(cuLaunchKernelEx, cuLaunchKernelEx) W(cuLaunchKernelEx_ptsz, cuLaunchKernelEx)       \
    W(cuLaunchHostFunc, cuLaunchHostFunc) W(cuLaunchHostFunc_ptsz, cuLaunchHostFunc)       \
    W(cuMemcpy, cuMemcpy) W(cuMemcpy_ptds, cuMemcpy)                                       \
    W(cuMemcpyAsync, cuMemcpyAsync) W(cuMemcpyAsync_ptsz, cuMemcpyAsync)                   \
    W(cuMemcpyHtoD_v2, cuMemcpyHtoD) W(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD)                 \
    W(cuMemcpyDtoH_v2, cuMemcpyDtoH) W(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH)                 \
    W(cuMemcpyDtoD_v2, cuMemcpyDtoD) W(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD)                 \
    W(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync) W(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync) \
    W(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync) W(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync) \
    W(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync) W(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync) \
    W(cuMemsetD8_v2, cuMemsetD8) W(cuMemsetD8_v2_ptds, cuMemsetD8)                         \
    W(cuMemsetD16_v2, cuMemsetD16) W(cuMemsetD16_v2_ptds, cuMemsetD16)                     \
    W(cuMemsetD32_v2, cuMemsetD32) W(cuMemsetD32_v2_ptds, cuMemsetD32)                     \
    W(cuMemsetD8Async, cuMemsetD8Async) W(cuMemsetD8Async_ptsz, cuMemsetD8Async)           \
    W(cuMemsetD16Async, cuMemsetD16Async) W(cuMemsetD16Async_ptsz, cuMemsetD16Async)       \
    W(cuMemsetD32Async, cuMemsetD32Async) W(cuMemsetD32Async_ptsz, cuMemsetD32Async)       \
    W(cuEventRecord, cuEventRecord) W(cuEventRecord_ptsz, cuEventRecord)                   \
    W(cuEventRecordWithFlags, cuEventRecordWithFlags)                                      \
    W(cuEventRecordWithFlags_ptsz, cuEventRecordWithFlags)                                 \
    W(cuStreamWaitEvent, cuStreamWaitEvent) W(cuStreamWaitEvent_ptsz, cuStreamWaitEvent)   \
    W(cuStreamSynchronize, cuStreamSynchronize)                                            \
    W(cuStreamSynchronize_ptsz, cuStreamSynchronize)                                       \
    W(cuStreamQuery, cuStreamQuery) W(cuStreamQuery_ptsz, cuStreamQuery)                   \
    W(cuCtxSynchronize, cuCtxSynchronize)                                                  \
    W(cuCtxSynchronize_v2, cuCtxSynchronize_v2)                                            \
    W(cuEventSynchronize, cuEventSynchronize)                                              \
    W(cuEventQuery, cuEventQuery)                                                          \
    W(cuGraphLaunch, cuGraphLaunch) W(cuGraphLaunch_ptsz, cuGraphLaunch)                   \
    W(cuMemAlloc_v2, cuMemAlloc) W(cuMemAllocPitch_v2, cuMemAllocPitch)                    \
    W(cuMemFree_v2, cuMemFree)                                                             \
    W(cuMemAllocAsync, cuMemAllocAsync) W(cuMemAllocAsync_ptsz, cuMemAllocAsync)           \
    W(cuMemFreeAsync, cuMemFreeAsync) W(cuMemFreeAsync_ptsz, cuMemFreeAsync)               \
    W(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)                                    \
    W(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync)                               \
    CGJ_DRIVER_UNTRACEABLE(W)

/* Calls that issue GPU work cgjit cannot trace yet: inside a step they abort it to eager. */
#define CGJ_DRIVER_UNTRACEABLE(W)                                                          \
    W(cuMemcpy2D_v2, cuMemcpy2D) W(cuMemcpy2D_v2_ptds, cuMemcpy2D)                         \
    W(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned)                                         \
    W(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned)                                    \
    W(cuMemcpy2DAsync_v2, cuMemcpy2DAsync) W(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync)     \
    W(cuMemcpy3D_v2, cuMemcpy3D) W(cuMemcpy3D_v2_ptds, cuMemcpy3D)                         \
    W(cuMemcpy3DAsync_v2, cuMemcpy3DAsync) W(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync)     \
    W(cuMemcpyPeer, cuMemcpyPeer) W(cuMemcpyPeer_ptds, cuMemcpyPeer)                       \
    W(cuMemcpyPeerAsync, cuMemcpyPeerAsync) W(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync)   \
    W(cuMemsetD2D8_v2, cuMemsetD2D8) W(cuMemsetD2D8_v2_ptds, cuMemsetD2D8)                 \
    W(cuMemsetD2D16_v2, cuMemsetD2D16) W(cuMemsetD2D16_v2_ptds, cuMemsetD2D16)             \
    W(cuMemsetD2D32_v2, cuMemsetD2D32) W(cuMemsetD2D32_v2_ptds, cuMemsetD2D32)             \
    W(cuMemsetD2D8Async, cuMemsetD2D8Async) W(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async)   \
    W(cuMemsetD2D16Async, cuMemsetD2D16Async) W(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async) \
    W(cuMemsetD2D32Async, cuMemsetD2D32Async) W(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async) \
    W(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel)                                \
    W(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel)                           \
    W(cuStreamBeginCapture_v2, cuStreamBeginCapture)                                       \
    W(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture)                                  \
    W(cuStreamAddCallback, cuStreamAddCallback) W(cuStreamAddCallback_ptsz, cuStreamAddCallback) \
    W(cuStreamWriteValue32_v2, cuStreamWriteValue32) W(cuStreamWriteValue32_v2_ptsz, cuStreamWriteValue32) \
    W(cuStreamWaitValue32_v2, cuStreamWaitValue32) W(cuStreamWaitValue32_v2_ptsz, cuStreamWaitValue32) \
    W(cuStreamWriteValue64_v2, cuStreamWriteValue64) W(cuStreamWriteValue64_v2_ptsz, cuStreamWriteValue64) \
    W(cuStreamWaitValue64_v2, cuStreamWaitValue64) W(cuStreamWaitValue64_v2_ptsz, cuStreamWaitValue64) \
    W(cuStreamBatchMemOp_v2, cuStreamBatchMemOp) W(cuStreamBatchMemOp_v2_ptsz, cuStreamBatchMemOp) \
    W(cuMemPrefetchAsync_v2, cuMemPrefetchAsync) W(cuMemPrefetchAsync_v2_ptsz, cuMemPrefetchAsync) \
    W(cuMemcpyAtoA_v2, cuMemcpyAtoA) W(cuMemcpyAtoA_v2_ptds, cuMemcpyAtoA) \
    W(cuMemcpyAtoD_v2, cuMemcpyAtoD) W(cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD) \
    W(cuMemcpyAtoH_v2, cuMemcpyAtoH) W(cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH) \
    W(cuMemcpyDtoA_v2, cuMemcpyDtoA) W(cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA) \
    W(cuMemcpyHtoA_v2, cuMemcpyHtoA) W(cuMemcpyHtoA_v2_ptds, cuMemcpyHtoA) \
    W(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync) W(cuMemcpyAtoHAsync_v2_ptsz, cuMemcpyAtoHAsync) \
    W(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync) W(cuMemcpyHtoAAsync_v2_ptsz, cuMemcpyHtoAAsync) \
    W(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync) W(cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync) \
    W(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync) W(cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync) \
    W(cuMemcpy3DPeer, cuMemcpy3DPeer) W(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer) \
    W(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync) W(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync) \
    W(cuMemPrefetchBatchAsync, cuMemPrefetchBatchAsync) W(cuMemPrefetchBatchAsync_ptsz, cuMemPrefetchBatchAsync) \
    W(cuMemDiscardBatchAsync, cuMemDiscardBatchAsync) W(cuMemDiscardBatchAsync_ptsz, cuMemDiscardBatchAsync) \
    W(cuMemDiscardAndPrefetchBatchAsync, cuMemDiscardAndPrefetchBatchAsync) W(cuMemDiscardAndPrefetchBatchAsync_ptsz, cuMemDiscardAndPrefetchBatchAsync) \
    W(cuMemBatchDecompressAsync, cuMemBatchDecompressAsync) W(cuMemBatchDecompressAsync_ptsz, cuMemBatchDecompressAsync) \
    W(cuMemMapArrayAsync, cuMemMapArrayAsync) W(cuMemMapArrayAsync_ptsz, cuMemMapArrayAsync) \
    W(cuSignalExternalSemaphoresAsync, cuSignalExternalSemaphoresAsync) W(cuSignalExternalSemaphoresAsync_ptsz, cuSignalExternalSemaphoresAsync) \
    W(cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync) W(cuWaitExternalSemaphoresAsync_ptsz, cuWaitExternalSemaphoresAsync) \
    W(cuCtxWaitEvent, cuCtxWaitEvent) \
    W(cuGraphUpload, cuGraphUpload) W(cuGraphUpload_ptsz, cuGraphUpload) \
    W(cuLaunchCooperativeKernelMultiDevice, cgj_proto_coop_multi)

/* D(exported, prototype): functions cgjit calls for its own work. */
#define CGJ_DRIVER_CALLED(D)                                                  \
    D(cuInit, cuInit)                                                         \
    D(cuGetErrorString, cuGetErrorString)                                     \
    D(cuCtxGetCurrent, cuCtxGetCurrent)                                       \
    D(cuFuncGetParamInfo, cuFuncGetParamInfo)                                 \
    D(cuKernelGetParamInfo, cuKernelGetParamInfo)                             \
    D(cuFuncGetName, cuFuncGetName)                                           \
    D(cuKernelGetName, cuKernelGetName)                                       \
    D(cuPointerGetAttribute, cuPointerGetAttribute)                           \
    D(cuStreamCreate, cuStreamCreate)                                         \
    D(cuStreamDestroy_v2, cuStreamDestroy)                                    \
    D(cuStreamEndCapture, cuStreamEndCapture)                                 \
    D(cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo)                      \
    D(cuEventCreate, cuEventCreate)                                           \
    D(cuEventDestroy_v2, cuEventDestroy)                                      \
    D(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags)               \
    D(cuGraphDestroy, cuGraphDestroy)                                         \
    D(cuGraphExecDestroy, cuGraphExecDestroy)                                 \
    D(cuGraphKernelNodeGetParams_v2, cuGraphKernelNodeGetParams)              \
    D(cuGraphExecKernelNodeSetParams_v2, cuGraphExecKernelNodeSetParams)      \
    D(cuMemHostAlloc, cuMemHostAlloc)                                         \
    D(cuMemFreeHost, cuMemFreeHost)                                           \
    D(cuCtxGetDevice, cuCtxGetDevice)                                         \
    D(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity)           \
    D(cuMemAddressReserve, cuMemAddressReserve)                               \
    D(cuMemCreate, cuMemCreate)                                               \
    D(cuMemRelease, cuMemRelease)                                             \
    D(cuMemMap, cuMemMap)                                                     \
    D(cuMemSetAccess, cuMemSetAccess)

typedef struct cgj_driver {
#define CGJ_DRV_FIELD(exported, proto) __typeof__(proto) *r_##exported;
    CGJ_DRIVER_WRAPPED(CGJ_DRV_FIELD)
    CGJ_DRIVER_CALLED(CGJ_DRV_FIELD)
#undef CGJ_DRV_FIELD
} cgj_driver_t;

extern cgj_driver_t cgj_drv;

/* dlopen the driver and fill cgj_drv with the real dlsym `real_dlsym`. False if it is absent. */
bool cgj_driver_load(void *(*real_dlsym)(void *, const char *), void **handle_out);

/* Short description of a CUresult for logs (never NULL). */
const char *cgj_driver_errstr(CUresult r);

#endif /* CGJ_DRIVER_H */
