/*
 * fakecuda_device.c — init, device, context and error strings of the fake driver: cuInit and
 * cuDriverGetVersion, the one device (ordinal 0, with the attributes of an H100-class part), the
 * one context (always current, cuCtxPushCurrent/cuCtxPopCurrent included; cuCtxSynchronize and
 * cuCtxSynchronize_v2 obey the capture rules), and the real driver's names and messages for
 * cuGetErrorName / cuGetErrorString. See fakecuda.c for the overview.
 */
#include "fakecuda_internal.h"

#include <stdio.h>

/* ---------------------------------------------------------------------------------------------
 * Init, device and context
 * ------------------------------------------------------------------------------------------- */

FC_DEFINE(cuInit, (unsigned int flags))
{
    FAIL_POINT();
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_DEFINE(cuDriverGetVersion, (int *version))
{
    FAIL_POINT();
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

/* The driver's private tables, which the fake has none of. NVRTC (13.0) dlopens libcuda.so.1 —
 * in a host test, this library, found by its soname — calls cuInit, then calls cuGetExportTable
 * without checking that dlsym found it: without this export nvrtcCompileProgram crashes in any
 * host test that compiles a fused kernel (mode default). An error makes NVRTC do without. */
FC_DEFINE(cuGetExportTable, (const void **ppExportTable, const CUuuid *pExportTableId))
{
    FAIL_POINT();
    if (!ppExportTable || !pExportTableId) return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

FC_DEFINE(cuDeviceGet, (CUdevice * device, int ordinal))
{
    FAIL_POINT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuDeviceGetCount, (int *count))
{
    FAIL_POINT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuDeviceGetName, (char *name, int len, CUdevice dev))
{
    FAIL_POINT();
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", "fakecuda CPU device");
    return CUDA_SUCCESS;
}

/* Plausible values of an H100-class device (compute capability 9.0); 0 for the rest. */
static int device_attribute(CUdevice_attribute attr)
{
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return (int)MAX_SMEM;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    default: return 0;
    }
}

FC_DEFINE(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev))
{
    FAIL_POINT();
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pi = device_attribute(attrib);
    return CUDA_SUCCESS;
}

FC_DEFINE(cuCtxGetCurrent, (CUcontext * pctx))
{
    FAIL_POINT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = FAKE_CTX; /* one context, always current */
    return CUDA_SUCCESS;
}

FC_DEFINE(cuCtxGetDevice, (CUdevice * device))
{
    FAIL_POINT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

FC_DEFINE(cuCtxSetCurrent, (CUcontext ctx))
{
    FAIL_POINT();
    return (ctx == NULL || ctx == FAKE_CTX) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* The one context lives as long as the process: ending it, its module or a library is only
 * checked. */
FC_DEFINE(cuCtxDestroy_v2, (CUcontext ctx))
{
    FAIL_POINT();
    return ctx == FAKE_CTX ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FC_DEFINE(cuDevicePrimaryCtxReset_v2, (CUdevice dev))
{
    FAIL_POINT();
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

FC_DEFINE(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))
{
    FAIL_POINT();
    return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

FC_DEFINE(cuModuleUnload, (CUmodule m))
{
    FAIL_POINT();
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_DEFINE(cuLibraryUnload, (CUlibrary l))
{
    FAIL_POINT();
    return l ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FC_DEFINE(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev))
{
    FAIL_POINT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *pctx = FAKE_CTX;
    return CUDA_SUCCESS;
}

static CUresult ctx_sync(void)
{
    lock();
    CUresult err = capture_rules(RULE_ALL); /* it would wait for the capturing streams too */
    if (err == CUDA_SUCCESS) {
        g_counts.syncs++;
        g_counts.device_syncs++;
    }
    unlock();
    return err;
}

FC_DEFINE(cuCtxSynchronize, (void))
{
    FAIL_POINT();
    deferred_run();
    return ctx_sync();
}

/* CUDA 12.9+: synchronize the given context (NULL: the current one). */
FC_DEFINE(cuCtxSynchronize_v2, (CUcontext ctx))
{
    FAIL_POINT();
    if (ctx == NULL || ctx == FAKE_CTX) deferred_run();
    return (ctx == NULL || ctx == FAKE_CTX) ? ctx_sync() : CUDA_ERROR_INVALID_CONTEXT;
}

/* The context stack holds only the one context, always current: pushing it again changes
 * nothing, and popping hands it out and leaves it current (it is the device's primary context,
 * which a real program would make current again anyway). */
FC_DEFINE(cuCtxPushCurrent_v2, (CUcontext ctx))
{
    FAIL_POINT();
    return ctx == FAKE_CTX ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FC_DEFINE(cuCtxPopCurrent_v2, (CUcontext * pctx))
{
    FAIL_POINT();
    if (pctx) *pctx = FAKE_CTX;
    return CUDA_SUCCESS;
}

/* X(code, message): the messages of the real driver, for the codes a test is likely to see. */
/* clang-format off */
#define FC_ERRORS(X) \
    X(CUDA_SUCCESS, "no error") \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down") \
    X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library") \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid") \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
    X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed") \
    X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid") \
    X(CUDA_ERROR_FILE_NOT_FOUND, "file not found") \
    X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS") \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
    X(CUDA_ERROR_NOT_READY, "device not ready") \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch") \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated") \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already " \
      "mapped") \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address") \
    X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure") \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch") \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted") \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work") \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing " \
      "blocking stream") \
    X(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from " \
      "another thread") \
    X(CUDA_ERROR_TIMEOUT, "wait operation timed out") \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not performed because it included " \
      "changes which violated constraints specific to instantiated graph update") \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED, "function not loaded") \
    X(CUDA_ERROR_UNKNOWN, "unknown error")
/* clang-format on */

static const struct {
    CUresult code;
    const char *name, *msg;
} g_errors[] = {
#define FC_ERROR_ROW(code, msg) {code, #code, msg},
    FC_ERRORS(FC_ERROR_ROW)
#undef FC_ERROR_ROW
};

static CUresult error_text(CUresult error, int want_name, const char **out)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++) {
        if (g_errors[i].code == error) {
            *out = want_name ? g_errors[i].name : g_errors[i].msg;
            return CUDA_SUCCESS;
        }
    }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

FC_DEFINE(cuGetErrorString, (CUresult error, const char **pStr))
{
    FAIL_POINT();
    return error_text(error, 0, pStr);
}

FC_DEFINE(cuGetErrorName, (CUresult error, const char **pStr))
{
    FAIL_POINT();
    return error_text(error, 1, pStr);
}
