/*
 * fakecuda_copy.c — copies and sets of the fake driver: cuMemcpy* and cuMemsetD* in their
 * synchronous, asynchronous and per-thread (_ptds/_ptsz) forms. Each checks that its device
 * side lies in live allocations (fakecuda_memory.c) and submits one memcpy or memset operation
 * to the stream, which runs it at once or captures it (fakecuda_stream.c). See fakecuda.c for the
 * overview.
 */
#include "fakecuda_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Copies and sets. `dev_dst`/`dev_src` mark the sides that must lie in a live allocation; the
 * unified cuMemcpy checks neither (UVA: any address goes). Sync variants run on the legacy
 * stream, or the per-thread one for _ptds.
 * ------------------------------------------------------------------------------------------- */

static CUresult do_copy(void *dst, int dev_dst, const void *src, int dev_src, size_t n, CUstream h, int ptds,
                        int blocking)
{
    if (n > 0) {
        lock();
        int ok = (!dev_dst || range_known((uintptr_t)dst, n, 1)) && (!dev_src || range_known((uintptr_t)src, n, 0));
        unlock();
        if (!ok) return CUDA_ERROR_INVALID_VALUE;
    }
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .copy = {dst, src, n}};
    return submit(h, ptds, blocking, &op);
}

FC_PTDS(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n),
        do_copy(PTR(dst), 0, PTR(src), 0, n, NULL, ptds, 1))

FC_PTSZ(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(PTR(dst), 0, PTR(src), 0, n, h, ptds, 0))

FC_PTDS(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n),
        do_copy(PTR(dst), 1, src, 0, n, NULL, ptds, 1))

FC_PTDS(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n),
        do_copy(dst, 0, PTR(src), 1, n, NULL, ptds, 1))

FC_PTDS(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n),
        do_copy(PTR(dst), 1, PTR(src), 1, n, NULL, ptds, 1))

FC_PTSZ(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream h),
        do_copy(PTR(dst), 1, src, 0, n, h, ptds, 0))

FC_PTSZ(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(dst, 0, PTR(src), 1, n, h, ptds, 0))

FC_PTSZ(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
        do_copy(PTR(dst), 1, PTR(src), 1, n, h, ptds, 0))

static CUresult do_set(CUdeviceptr dst, unsigned value, unsigned elem, size_t count, CUstream h, int ptds,
                       int blocking)
{
    if (dst % elem != 0) return CUDA_ERROR_INVALID_VALUE;
    if (count > 0) {
        lock();
        int ok = count <= SIZE_MAX / elem && range_known((uintptr_t)dst, count * elem, 1);
        unlock();
        if (!ok) return CUDA_ERROR_INVALID_VALUE;
    }
    fc_op op = {.type = CU_GRAPH_NODE_TYPE_MEMSET, .set = {PTR(dst), value, elem, count}};
    return submit(h, ptds, blocking, &op);
}

FC_PTDS(cuMemsetD8_v2, (CUdeviceptr dst, unsigned char v, size_t n),
        do_set(dst, v, 1, n, NULL, ptds, 1))

FC_PTDS(cuMemsetD16_v2, (CUdeviceptr dst, unsigned short v, size_t n),
        do_set(dst, v, 2, n, NULL, ptds, 1))

FC_PTDS(cuMemsetD32_v2, (CUdeviceptr dst, unsigned int v, size_t n),
        do_set(dst, v, 4, n, NULL, ptds, 1))

FC_PTSZ(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream h),
        do_set(dst, v, 1, n, h, ptds, 0))

FC_PTSZ(cuMemsetD16Async, (CUdeviceptr dst, unsigned short v, size_t n, CUstream h),
        do_set(dst, v, 2, n, h, ptds, 0))

FC_PTSZ(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream h),
        do_set(dst, v, 4, n, h, ptds, 0))
