/*
 * devpatch.cu — cgjit's patch kernel: one thread per update, each writing a run's value into a
 * device-updatable kernel node of a segment graph (graphs/devpatch.c says when and why).
 * Built with -rdc and linked against the device runtime into one image per architecture
 * (scripts/devpatch-image.sh), embedded in libcgjit.
 */
#include <cuda_runtime.h>
#include "devpatch_abi.h"

extern "C" __global__ void __launch_bounds__(CGJ_DEVPATCH_THREADS)
    cgj_devpatch(const __grid_constant__ cgj_devpatch_block_t b)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b.n) return;
    const cgj_devpatch_entry_t *e = &b.e[i];
    unsigned long long value = e->value;
    /* cudaGraphKernelNodeUpdate has no default constructor: built in place. */
    alignas(cudaGraphKernelNodeUpdate) char room[sizeof(cudaGraphKernelNodeUpdate)];
    cudaGraphKernelNodeUpdate *u = reinterpret_cast<cudaGraphKernelNodeUpdate *>(room);
    u->node = (cudaGraphDeviceNode_t)e->node;
    u->field = cudaGraphKernelNodeFieldParam;
    u->updateData.param.pValue = &value;
    u->updateData.param.offset = e->offset;
    u->updateData.param.size = e->size;
    if (cudaGraphKernelNodeUpdatesApply(u, 1) != cudaSuccess) __trap(); /* the launch fails: never a wrong value */
}
