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
 * The W rows are the functions cgjit wraps (runtime/ hands out a wrapper in their place), the U
 * rows among them those it cannot trace; the D rows are the ones it only calls. A function the
 * driver does not export stays NULL.
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

/* W(exported, prototype, ...): traced or observed calls, wrapped (the untraceable rows carry two
 * more columns, so every W takes `...`). */
/* clang-format off */
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
    W(cuMemFreeHost, cuMemFreeHost) W(cuMemHostUnregister, cuMemHostUnregister)            \
    W(cuCtxSetCurrent, cuCtxSetCurrent) W(cuCtxPushCurrent_v2, cuCtxPushCurrent)           \
    W(cuCtxPopCurrent_v2, cuCtxPopCurrent)                                                 \
    W(cuStreamBeginCapture_v2, cuStreamBeginCapture)                                       \
    W(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture)                                  \
    W(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph)                            \
    W(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph)                       \
    W(cuStreamEndCapture, cuStreamEndCapture) W(cuStreamEndCapture_ptsz, cuStreamEndCapture) \
    W(cuModuleUnload, cuModuleUnload) W(cuLibraryUnload, cuLibraryUnload)                  \
    W(cuCtxDestroy_v2, cuCtxDestroy) W(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset) \
    W(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease)                             \
    CGJ_DRIVER_AS_MADE(W)
/* clang-format on */

/* U(exported, prototype, (parameters), (arguments)): calls that issue GPU work cgjit does not
 * capture; inside a step each ends a segment and runs as the program makes it, after the work
 * absorbed before it (tracer: an AS_MADE op). runtime/wrappers.c generates their wrappers from
 * this table. */
/* clang-format off */
#define CGJ_DRIVER_AS_MADE(U)                                                          \
    U(cuMemcpy2D_v2, cuMemcpy2D, (const CUDA_MEMCPY2D *p), (p)) \
    U(cuMemcpy2D_v2_ptds, cuMemcpy2D, (const CUDA_MEMCPY2D *p), (p)) \
    U(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned, (const CUDA_MEMCPY2D *p), (p)) \
    U(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned, (const CUDA_MEMCPY2D *p), (p)) \
    U(cuMemcpy2DAsync_v2, cuMemcpy2DAsync, (const CUDA_MEMCPY2D *p, CUstream s), (p, s)) \
    U(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync, (const CUDA_MEMCPY2D *p, CUstream s), (p, s)) \
    U(cuMemcpy3D_v2, cuMemcpy3D, (const CUDA_MEMCPY3D *p), (p)) \
    U(cuMemcpy3D_v2_ptds, cuMemcpy3D, (const CUDA_MEMCPY3D *p), (p)) \
    U(cuMemcpy3DAsync_v2, cuMemcpy3DAsync, (const CUDA_MEMCPY3D *p, CUstream s), (p, s)) \
    U(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync, (const CUDA_MEMCPY3D *p, CUstream s), (p, s)) \
    U(cuMemcpyPeer, cuMemcpyPeer, (CUdeviceptr d, CUcontext dc, CUdeviceptr sp, CUcontext sc, size_t n), (d, dc, sp, sc, n)) \
    U(cuMemcpyPeer_ptds, cuMemcpyPeer, (CUdeviceptr d, CUcontext dc, CUdeviceptr sp, CUcontext sc, size_t n), (d, dc, sp, sc, n)) \
    U(cuMemcpyPeerAsync, cuMemcpyPeerAsync, (CUdeviceptr d, CUcontext dc, CUdeviceptr sp, CUcontext sc, size_t n, CUstream s), (d, dc, sp, sc, n, s)) \
    U(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, (CUdeviceptr d, CUcontext dc, CUdeviceptr sp, CUcontext sc, size_t n, CUstream s), (d, dc, sp, sc, n, s)) \
    U(cuMemsetD2D8_v2, cuMemsetD2D8, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h), (d, pitch, v, w, h)) \
    U(cuMemsetD2D8_v2_ptds, cuMemsetD2D8, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h), (d, pitch, v, w, h)) \
    U(cuMemsetD2D8Async, cuMemsetD2D8Async, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s), (d, pitch, v, w, h, s)) \
    U(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s), (d, pitch, v, w, h, s)) \
    U(cuMemsetD2D16_v2, cuMemsetD2D16, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h), (d, pitch, v, w, h)) \
    U(cuMemsetD2D16_v2_ptds, cuMemsetD2D16, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h), (d, pitch, v, w, h)) \
    U(cuMemsetD2D16Async, cuMemsetD2D16Async, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s), (d, pitch, v, w, h, s)) \
    U(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s), (d, pitch, v, w, h, s)) \
    U(cuMemsetD2D32_v2, cuMemsetD2D32, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h), (d, pitch, v, w, h)) \
    U(cuMemsetD2D32_v2_ptds, cuMemsetD2D32, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h), (d, pitch, v, w, h)) \
    U(cuMemsetD2D32Async, cuMemsetD2D32Async, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s), (d, pitch, v, w, h, s)) \
    U(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s), (d, pitch, v, w, h, s)) \
    U(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s, void **params), (f, gx, gy, gz, bx, by, bz, smem, s, params)) \
    U(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s, void **params), (f, gx, gy, gz, bx, by, bz, smem, s, params)) \
    U(cuStreamAddCallback, cuStreamAddCallback, (CUstream s, CUstreamCallback cb, void *ud, unsigned flags), (s, cb, ud, flags)) \
    U(cuStreamAddCallback_ptsz, cuStreamAddCallback, (CUstream s, CUstreamCallback cb, void *ud, unsigned flags), (s, cb, ud, flags)) \
    U(cuStreamWriteValue32_v2, cuStreamWriteValue32, (CUstream s, CUdeviceptr a, cuuint32_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamWriteValue32_v2_ptsz, cuStreamWriteValue32, (CUstream s, CUdeviceptr a, cuuint32_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamWaitValue32_v2, cuStreamWaitValue32, (CUstream s, CUdeviceptr a, cuuint32_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamWaitValue32_v2_ptsz, cuStreamWaitValue32, (CUstream s, CUdeviceptr a, cuuint32_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamWriteValue64_v2, cuStreamWriteValue64, (CUstream s, CUdeviceptr a, cuuint64_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamWriteValue64_v2_ptsz, cuStreamWriteValue64, (CUstream s, CUdeviceptr a, cuuint64_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamWaitValue64_v2, cuStreamWaitValue64, (CUstream s, CUdeviceptr a, cuuint64_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamWaitValue64_v2_ptsz, cuStreamWaitValue64, (CUstream s, CUdeviceptr a, cuuint64_t v, unsigned flags), (s, a, v, flags)) \
    U(cuStreamBatchMemOp_v2, cuStreamBatchMemOp, (CUstream s, unsigned n, CUstreamBatchMemOpParams *p, unsigned flags), (s, n, p, flags)) \
    U(cuStreamBatchMemOp_v2_ptsz, cuStreamBatchMemOp, (CUstream s, unsigned n, CUstreamBatchMemOpParams *p, unsigned flags), (s, n, p, flags)) \
    U(cuMemPrefetchAsync_v2, cuMemPrefetchAsync, (CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, CUstream s), (p, n, loc, flags, s)) \
    U(cuMemPrefetchAsync_v2_ptsz, cuMemPrefetchAsync, (CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, CUstream s), (p, n, loc, flags, s)) \
    U(cuMemcpyAtoA_v2, cuMemcpyAtoA, (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstArray, dstOffset, srcArray, srcOffset, ByteCount)) \
    U(cuMemcpyAtoA_v2_ptds, cuMemcpyAtoA, (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstArray, dstOffset, srcArray, srcOffset, ByteCount)) \
    U(cuMemcpyAtoD_v2, cuMemcpyAtoD, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstDevice, srcArray, srcOffset, ByteCount)) \
    U(cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstDevice, srcArray, srcOffset, ByteCount)) \
    U(cuMemcpyAtoH_v2, cuMemcpyAtoH, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstHost, srcArray, srcOffset, ByteCount)) \
    U(cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstHost, srcArray, srcOffset, ByteCount)) \
    U(cuMemcpyDtoA_v2, cuMemcpyDtoA, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset, srcDevice, ByteCount)) \
    U(cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset, srcDevice, ByteCount)) \
    U(cuMemcpyHtoA_v2, cuMemcpyHtoA, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount), (dstArray, dstOffset, srcHost, ByteCount)) \
    U(cuMemcpyHtoA_v2_ptds, cuMemcpyHtoA, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount), (dstArray, dstOffset, srcHost, ByteCount)) \
    U(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream), (dstHost, srcArray, srcOffset, ByteCount, hStream)) \
    U(cuMemcpyAtoHAsync_v2_ptsz, cuMemcpyAtoHAsync, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream), (dstHost, srcArray, srcOffset, ByteCount, hStream)) \
    U(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream), (dstArray, dstOffset, srcHost, ByteCount, hStream)) \
    U(cuMemcpyHtoAAsync_v2_ptsz, cuMemcpyHtoAAsync, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream), (dstArray, dstOffset, srcHost, ByteCount, hStream)) \
    U(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream)) \
    U(cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream)) \
    U(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream hStream), (numOps, opList, flags, hStream)) \
    U(cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream hStream), (numOps, opList, flags, hStream)) \
    U(cuMemcpy3DPeer, cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy)) \
    U(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy)) \
    U(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream)) \
    U(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream)) \
    U(cuMemPrefetchBatchAsync, cuMemPrefetchBatchAsync, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream)) \
    U(cuMemPrefetchBatchAsync_ptsz, cuMemPrefetchBatchAsync, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream)) \
    U(cuMemDiscardBatchAsync, cuMemDiscardBatchAsync, (CUdeviceptr *dptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, flags, hStream)) \
    U(cuMemDiscardBatchAsync_ptsz, cuMemDiscardBatchAsync, (CUdeviceptr *dptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, flags, hStream)) \
    U(cuMemDiscardAndPrefetchBatchAsync, cuMemDiscardAndPrefetchBatchAsync, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream)) \
    U(cuMemDiscardAndPrefetchBatchAsync_ptsz, cuMemDiscardAndPrefetchBatchAsync, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream)) \
    U(cuMemBatchDecompressAsync, cuMemBatchDecompressAsync, (CUmemDecompressParams *paramsArray, size_t count, unsigned int flags, size_t *errorIndex, CUstream stream), (paramsArray, count, flags, errorIndex, stream)) \
    U(cuMemBatchDecompressAsync_ptsz, cuMemBatchDecompressAsync, (CUmemDecompressParams *paramsArray, size_t count, unsigned int flags, size_t *errorIndex, CUstream stream), (paramsArray, count, flags, errorIndex, stream)) \
    U(cuMemMapArrayAsync, cuMemMapArrayAsync, (CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream), (mapInfoList, count, hStream)) \
    U(cuMemMapArrayAsync_ptsz, cuMemMapArrayAsync, (CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream), (mapInfoList, count, hStream)) \
    U(cuSignalExternalSemaphoresAsync, cuSignalExternalSemaphoresAsync, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream)) \
    U(cuSignalExternalSemaphoresAsync_ptsz, cuSignalExternalSemaphoresAsync, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream)) \
    U(cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream)) \
    U(cuWaitExternalSemaphoresAsync_ptsz, cuWaitExternalSemaphoresAsync, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream)) \
    U(cuCtxWaitEvent, cuCtxWaitEvent, (CUcontext hCtx, CUevent hEvent), (hCtx, hEvent)) \
    U(cuGraphUpload, cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream)) \
    U(cuGraphUpload_ptsz, cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream)) \
    U(cuLaunchCooperativeKernelMultiDevice, cgj_proto_coop_multi, (CUDA_LAUNCH_PARAMS *launchParamsList, unsigned int numDevices, unsigned int flags), (launchParamsList, numDevices, flags))
/* clang-format on */

/* D(exported, prototype): functions cgjit calls for its own work. */
/* clang-format off */
#define CGJ_DRIVER_CALLED(D)                                                  \
    D(cuInit, cuInit)                                                         \
    D(cuDeviceGetCount, cuDeviceGetCount)                                     \
    D(cuGetErrorString, cuGetErrorString)                                     \
    D(cuCtxGetCurrent, cuCtxGetCurrent)                                       \
    D(cuCtxGetApiVersion, cuCtxGetApiVersion)                                 \
    D(cuFuncGetParamInfo, cuFuncGetParamInfo)                                 \
    D(cuKernelGetParamInfo, cuKernelGetParamInfo)                             \
    D(cuFuncGetName, cuFuncGetName)                                           \
    D(cuKernelGetName, cuKernelGetName)                                       \
    D(cuPointerGetAttribute, cuPointerGetAttribute)                           \
    D(cuPointerGetAttributes, cuPointerGetAttributes)                         \
    D(cuStreamCreate, cuStreamCreate)                                         \
    D(cuStreamGetFlags, cuStreamGetFlags)                                     \
    D(cuStreamDestroy_v2, cuStreamDestroy)                                    \
    D(cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo)                      \
    D(cuEventCreate, cuEventCreate)                                           \
    D(cuEventDestroy_v2, cuEventDestroy)                                      \
    D(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags)               \
    D(cuGraphDestroy, cuGraphDestroy)                                         \
    D(cuGraphDestroyNode, cuGraphDestroyNode)                                 \
    D(cuGraphExecDestroy, cuGraphExecDestroy)                                 \
    D(cuGraphKernelNodeGetParams_v2, cuGraphKernelNodeGetParams)              \
    D(cuGraphKernelNodeSetAttribute, cuGraphKernelNodeSetAttribute)           \
    D(cuGraphKernelNodeGetAttribute, cuGraphKernelNodeGetAttribute)           \
    D(cuGraphExecKernelNodeSetParams_v2, cuGraphExecKernelNodeSetParams)      \
    D(cuGraphMemcpyNodeGetParams, cuGraphMemcpyNodeGetParams)                 \
    D(cuGraphMemsetNodeGetParams, cuGraphMemsetNodeGetParams)                 \
    D(cuGraphExecMemcpyNodeSetParams, cuGraphExecMemcpyNodeSetParams)         \
    D(cuGraphExecMemsetNodeSetParams, cuGraphExecMemsetNodeSetParams)         \
    D(cuGraphExecEventRecordNodeSetEvent, cuGraphExecEventRecordNodeSetEvent) \
    D(cuGraphExecEventWaitNodeSetEvent, cuGraphExecEventWaitNodeSetEvent)     \
    D(cuGraphExecHostNodeSetParams, cuGraphExecHostNodeSetParams)             \
    D(cuMemHostAlloc, cuMemHostAlloc)                                         \
    D(cuCtxGetDevice, cuCtxGetDevice)                                         \
    D(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity)           \
    D(cuMemAddressReserve, cuMemAddressReserve)                               \
    D(cuMemCreate, cuMemCreate)                                               \
    D(cuMemRelease, cuMemRelease)                                             \
    D(cuMemMap, cuMemMap)                                                     \
    D(cuMemUnmap, cuMemUnmap)                                                 \
    D(cuMemSetAccess, cuMemSetAccess)                                         \
    D(cuDeviceGetAttribute, cuDeviceGetAttribute)                             \
    D(cuModuleLoadData, cuModuleLoadData)                                     \
    D(cuModuleGetFunction, cuModuleGetFunction)                               \
    D(cuEventElapsedTime_v2, cuEventElapsedTime)
/* clang-format on */

typedef struct cgj_driver {
#define CGJ_DRV_FIELD(exported, proto, ...) __typeof__(proto) *r_##exported;
    CGJ_DRIVER_WRAPPED(CGJ_DRV_FIELD)
    CGJ_DRIVER_CALLED(CGJ_DRV_FIELD)
#undef CGJ_DRV_FIELD
} cgj_driver_t;

extern cgj_driver_t cgj_drv;

/* The real dlsym the driver was loaded with (libcgjit defines dlsym itself): what cgjit resolves
 * the other libraries it loads (NVRTC) with. NULL before cgj_driver_load. */
extern void *(*cgj_driver_dlsym)(void *, const char *);
/* dlopen the driver and fill cgj_drv with the real dlsym `real_dlsym`. False if it is absent. */
bool cgj_driver_load(void *(*real_dlsym)(void *, const char *), void **handle_out);

/* Short description of a CUresult for logs (never NULL). */
const char *cgj_driver_errstr(CUresult r);
/* Does work on stream s wait for the legacy stream's, and the legacy stream's for work on s? True
 * for the default streams and streams created blocking; false for a stream created non-blocking
 * (a loader thread's own stream, PyTorch's side streams), which orders with nothing implicitly.
 * Unknown (no driver answer): true, the safe side. */
bool cgj_stream_blocking(CUstream s);

#endif /* CGJ_DRIVER_H */
