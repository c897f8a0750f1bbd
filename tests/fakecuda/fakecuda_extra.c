/*
 * fakecuda_extra.c — entry points of the fake driver whose work a CPU cannot do and no test needs
 * done: external semaphores (none can be imported here), hardware decompression and sparse array
 * mapping. Each checks its arguments and its stream as the real driver would, then answers
 * CUDA_ERROR_NOT_SUPPORTED, as the real driver does on a device without the feature. They exist so
 * that every function cgjit wraps has a driver function behind it, with a FAIL_POINT like every
 * other. See fakecuda.c for the overview.
 */
#include "fakecuda_internal.h"

/* ---------------------------------------------------------------------------------------------
 * External semaphores
 * ------------------------------------------------------------------------------------------- */

static CUresult semaphores(const CUexternalSemaphore *sems, const void *params, unsigned n, CUstream h, int ptds)
{
    if (!sems || !params || n == 0) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++)
        if (!sems[i]) return CUDA_ERROR_INVALID_HANDLE;
    CUresult err = stream_check(h, ptds);
    return err == CUDA_SUCCESS ? CUDA_ERROR_NOT_SUPPORTED : err;
}

FC_PTSZ(cuSignalExternalSemaphoresAsync,
        (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray,
         unsigned int numExtSems, CUstream stream),
        semaphores(extSemArray, paramsArray, numExtSems, stream, ptds))

FC_PTSZ(cuWaitExternalSemaphoresAsync,
        (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
         unsigned int numExtSems, CUstream stream),
        semaphores(extSemArray, paramsArray, numExtSems, stream, ptds))

/* ---------------------------------------------------------------------------------------------
 * Hardware decompression: the device reports no decompression engine. *errorIndex names the
 * first operation, which is the one that could not run.
 * ------------------------------------------------------------------------------------------- */

static CUresult decompress(const CUmemDecompressParams *p, size_t count, unsigned flags, size_t *errorIndex, CUstream h,
                           int ptds)
{
    if (!p || count == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if (!p[i].src || !p[i].dst || !p[i].dstActBytes || p[i].srcNumBytes == 0) {
            if (errorIndex) *errorIndex = i;
            return CUDA_ERROR_INVALID_VALUE;
        }
    CUresult err = stream_check(h, ptds);
    if (err != CUDA_SUCCESS) return err;
    if (errorIndex) *errorIndex = 0;
    return CUDA_ERROR_NOT_SUPPORTED;
}

FC_PTSZ(cuMemBatchDecompressAsync,
        (CUmemDecompressParams * paramsArray, size_t count, unsigned int flags, size_t *errorIndex, CUstream stream),
        decompress(paramsArray, count, flags, errorIndex, stream, ptds))

/* ---------------------------------------------------------------------------------------------
 * Sparse and mipmapped arrays: the fake's arrays are dense (cuArrayCreate_v2), none is sparse.
 * ------------------------------------------------------------------------------------------- */

static CUresult map_array(const CUarrayMapInfo *info, unsigned count, CUstream h, int ptds)
{
    if (!info || count == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = stream_check(h, ptds);
    return err == CUDA_SUCCESS ? CUDA_ERROR_NOT_SUPPORTED : err;
}

FC_PTSZ(cuMemMapArrayAsync, (CUarrayMapInfo * mapInfoList, unsigned int count, CUstream hStream),
        map_array(mapInfoList, count, hStream, ptds))
