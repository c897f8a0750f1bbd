/*
 * libs_blas.c — cuBLAS and cuBLASLt calls as traced ops (see libs.h).
 *
 * A cuBLAS call's key: the handle (address and generation), its stream, pointer, math and
 * atomics modes, every scalar argument, and alpha/beta by value in host pointer mode (they are
 * baked into the kernels' parameters); in device pointer mode they are pointers like A, B, C.
 * A dot product into host memory returns its result to the host: the library synchronizes, the
 * call ends a segment and is never absorbed. cublasSetStream resets the handle's workspace, and
 * every other handle setter may change what the library launches: the handle's generation
 * follows its settings (libs.h). A destroyed handle's generation is gone for good, so no absorbed call can use
 * its workspace after cublasDestroy; the next call with a new handle runs the library, whose
 * launches are matched and patched as the driver sees them, and the trace learns it.
 *
 * cuBLASLt: the matmul and layout descriptors are fixed-size opaque structures: their bytes are
 * their content. The algorithm, when given, is compared the same way; without one the library
 * runs its heuristics on every call, which absorbed calls skip.
 */
#include "runtime/libs.h"

/* The wrappers are the library's entry points: exported, unlike the rest of libcgjit. */
#pragma GCC visibility push(default)

#include <cublasLt.h>
#include <cublas_v2.h>

/* ---- handles ---- */

#define BLAS_GETTERS(X) X(cublasGetStream_v2) X(cublasGetPointerMode_v2) X(cublasGetMathMode) X(cublasGetAtomicsMode)
LIB_DEFINE_GETTERS(BLAS_GETTERS)
static __typeof__(cublasLtMatmulDescGetAttribute) *g_cublasLtMatmulDescGetAttribute;

/* The handle's part of the key. Returns whether alpha/beta are host values; *plain: fp32 math
 * as written (no TF32 or other reduced precision), where asked. */
static bool blas_handle_math(cgj_libcall_t *lc, cublasHandle_t h, bool *plain)
{
    cudaStream_t s = NULL;
    cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
    cublasMath_t mm = CUBLAS_DEFAULT_MATH;
    cublasAtomicsMode_t am = CUBLAS_ATOMICS_NOT_ALLOWED;
    if (!getters_ready() || !h || g_cublasGetStream_v2(h, &s) != CUBLAS_STATUS_SUCCESS ||
        g_cublasGetPointerMode_v2(h, &pm) != CUBLAS_STATUS_SUCCESS ||
        g_cublasGetMathMode(h, &mm) != CUBLAS_STATUS_SUCCESS || g_cublasGetAtomicsMode(h, &am) != CUBLAS_STATUS_SUCCESS)
        lib_never(lc, CGJ_REASON_LIB_HANDLE);
    struct {
        const void *h, *s;
        uint64_t gen;
        int32_t pm, mm, am, zero; /* no padding: every byte of a key is compared */
    } k = {h, s, cgj_lib_gen(h), pm, mm, am, 0};
    key_put(lc, &k, sizeof k);
    if (plain) *plain = mm == CUBLAS_DEFAULT_MATH || mm == CUBLAS_PEDANTIC_MATH;
    return pm == CUBLAS_POINTER_MODE_HOST;
}

static bool blas_handle(cgj_libcall_t *lc, cublasHandle_t h)
{
    return blas_handle_math(lc, h, NULL);
}

/* The GEMM description of a plain fp32 call (mode default): arguments A 0, B 1, C 2. */
static void describe_gemm(cgj_libcall_t *lc, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                          const float *alpha, int lda, int ldb, const float *beta, int ldc)
{
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || m <= 0 || n <= 0 ||
        k <= 0 || !lib_ew_wanted(lc))
        return;
    lc->gemm = (cgj_libgemm_t){.valid = true,
                               .transa = ta == CUBLAS_OP_T,
                               .transb = tb == CUBLAS_OP_T,
                               .a = 0,
                               .b = 1,
                               .c = 2,
                               .m = m,
                               .n = n,
                               .k = k,
                               .lda = lda,
                               .ldb = ldb,
                               .ldc = ldc,
                               .alpha = *alpha,
                               .beta = *beta};
}

static void scalar(cgj_libcall_t *lc, bool host, const void *p, size_t bytes)
{
    if (host) key_host_scalar(lc, p, bytes);
    else arg_put(lc, p);
}

static bool complex_type(cudaDataType t)
{
    switch (t) {
    case CUDA_C_16F:
    case CUDA_C_16BF:
    case CUDA_C_32F:
    case CUDA_C_64F:
    case CUDA_C_8I:
    case CUDA_C_8U:
    case CUDA_C_32I:
    case CUDA_C_32U: return true;
    default: return false;
    }
}

/* Bytes of alpha/beta for a compute type and output type (0: unknown). */
static size_t compute_scalar_bytes(cublasComputeType_t ct, cudaDataType ctype)
{
    size_t b = 0;
    switch (ct) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC: b = 2; break;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC: b = 4; break;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: b = 8; break;
    default: return 0;
    }
    return complex_type(ctype) ? 2 * b : b;
}

#define INTS(lc, ...)                       \
    do {                                    \
        const int64_t v_[] = {__VA_ARGS__}; \
        key_put((lc), v_, sizeof v_);       \
    } while (0)

#define BLAS_PROLOGUE(fn, ...)                     \
    LIB_REAL(fn, CUBLAS_STATUS_NOT_INITIALIZED);   \
    if (cgj_lib_pass()) return real_(__VA_ARGS__); \
    cgj_libcall_t lc;                              \
    lib_init(&lc)

#define BLAS_RUN(fn, ...) LIB_CALL(lc, #fn, CUBLAS_STATUS_SUCCESS, real_(__VA_ARGS__))

/* ---- level 3 ---- */

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    BLAS_PROLOGUE(cublasSgemm_v2, h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    bool plain, host = blas_handle_math(&lc, h, &plain);
    INTS(&lc, ta, tb, m, n, k, lda, ldb, ldc);
    scalar(&lc, host, alpha, 4), scalar(&lc, host, beta, 4);
    arg_put(&lc, A), arg_put(&lc, B), arg_put(&lc, C);
    if (host && plain) describe_gemm(&lc, ta, tb, m, n, k, alpha, lda, ldb, beta, ldc);
    BLAS_RUN(cublasSgemm_v2, h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t comp,
                            cublasGemmAlgo_t algo)
{
    BLAS_PROLOGUE(cublasGemmEx, h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp, algo);
    bool plain, host = blas_handle_math(&lc, h, &plain);
    INTS(&lc, ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc, comp, algo);
    size_t sb = compute_scalar_bytes(comp, ct);
    scalar(&lc, host, alpha, sb), scalar(&lc, host, beta, sb);
    arg_put(&lc, A), arg_put(&lc, B), arg_put(&lc, C);
    if (host && plain && at == CUDA_R_32F && bt == CUDA_R_32F && ct == CUDA_R_32F &&
        (comp == CUBLAS_COMPUTE_32F || comp == CUBLAS_COMPUTE_32F_PEDANTIC))
        describe_gemm(&lc, ta, tb, m, n, k, alpha, lda, ldb, beta, ldc);
    BLAS_RUN(cublasGemmEx, h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, comp, algo);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                         long long sc, int batch)
{
    BLAS_PROLOGUE(cublasSgemmStridedBatched, h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                  batch);
    bool host = blas_handle(&lc, h);
    INTS(&lc, ta, tb, m, n, k, lda, sa, ldb, sb, ldc, sc, batch);
    scalar(&lc, host, alpha, 4), scalar(&lc, host, beta, 4);
    arg_put(&lc, A), arg_put(&lc, B), arg_put(&lc, C);
    BLAS_RUN(cublasSgemmStridedBatched, h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType at, int lda,
                                          long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    BLAS_PROLOGUE(cublasGemmStridedBatchedEx, h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct,
                  ldc, sc, batch, comp, algo);
    bool host = blas_handle(&lc, h);
    INTS(&lc, ta, tb, m, n, k, at, lda, sa, bt, ldb, sb, ct, ldc, sc, batch, comp, algo);
    size_t s = compute_scalar_bytes(comp, ct);
    scalar(&lc, host, alpha, s), scalar(&lc, host, beta, s);
    arg_put(&lc, A), arg_put(&lc, B), arg_put(&lc, C);
    BLAS_RUN(cublasGemmStridedBatchedEx, h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc,
             sc, batch, comp, algo);
}

/* The pointer arrays live in device memory and are read by the kernels when they run: the
 * arrays are the arguments, their contents are data. */
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void *alpha, const void *const A[], cudaDataType at, int lda,
                                   const void *const B[], cudaDataType bt, int ldb, const void *beta, void *const C[],
                                   cudaDataType ct, int ldc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo)
{
    BLAS_PROLOGUE(cublasGemmBatchedEx, h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, batch, comp,
                  algo);
    bool host = blas_handle(&lc, h);
    INTS(&lc, ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc, batch, comp, algo);
    size_t s = compute_scalar_bytes(comp, ct);
    scalar(&lc, host, alpha, s), scalar(&lc, host, beta, s);
    arg_put(&lc, A), arg_put(&lc, B), arg_put(&lc, C);
    BLAS_RUN(cublasGemmBatchedEx, h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, batch, comp,
             algo);
}

/* ---- level 2 and 1 ---- */

cublasStatus_t cublasSgemv_v2(cublasHandle_t h, cublasOperation_t t, int m, int n, const float *alpha, const float *A,
                              int lda, const float *x, int incx, const float *beta, float *y, int incy)
{
    BLAS_PROLOGUE(cublasSgemv_v2, h, t, m, n, alpha, A, lda, x, incx, beta, y, incy);
    bool host = blas_handle(&lc, h);
    INTS(&lc, t, m, n, lda, incx, incy);
    scalar(&lc, host, alpha, 4), scalar(&lc, host, beta, 4);
    arg_put(&lc, A), arg_put(&lc, x), arg_put(&lc, y);
    BLAS_RUN(cublasSgemv_v2, h, t, m, n, alpha, A, lda, x, incx, beta, y, incy);
}

cublasStatus_t cublasSaxpy_v2(cublasHandle_t h, int n, const float *alpha, const float *x, int incx, float *y, int incy)
{
    BLAS_PROLOGUE(cublasSaxpy_v2, h, n, alpha, x, incx, y, incy);
    bool host = blas_handle(&lc, h);
    INTS(&lc, n, incx, incy);
    scalar(&lc, host, alpha, 4);
    arg_put(&lc, x), arg_put(&lc, y);
    if (host && incx == 1 && incy == 1 && n > 0 && lib_ew_wanted(&lc))
        lc.ew = (cgj_libew_t){"(inout float y, in float x, float alpha, count int n): y = alpha * x + y",
                              {1, 0, lib_ew_float(*alpha), (uint64_t)n}};
    BLAS_RUN(cublasSaxpy_v2, h, n, alpha, x, incx, y, incy);
}

cublasStatus_t cublasSscal_v2(cublasHandle_t h, int n, const float *alpha, float *x, int incx)
{
    BLAS_PROLOGUE(cublasSscal_v2, h, n, alpha, x, incx);
    bool host = blas_handle(&lc, h);
    INTS(&lc, n, incx);
    scalar(&lc, host, alpha, 4);
    arg_put(&lc, x);
    if (host && incx == 1 && n > 0 && lib_ew_wanted(&lc))
        lc.ew = (cgj_libew_t){"(inout float x, float alpha, count int n): x = alpha * x",
                              {0, lib_ew_float(*alpha), (uint64_t)n}};
    BLAS_RUN(cublasSscal_v2, h, n, alpha, x, incx);
}

cublasStatus_t cublasScopy_v2(cublasHandle_t h, int n, const float *x, int incx, float *y, int incy)
{
    BLAS_PROLOGUE(cublasScopy_v2, h, n, x, incx, y, incy);
    blas_handle(&lc, h);
    INTS(&lc, n, incx, incy);
    arg_put(&lc, x), arg_put(&lc, y);
    BLAS_RUN(cublasScopy_v2, h, n, x, incx, y, incy);
}

/* A result in host memory is a value returned to the host: never absorbed. */
static void dot_result(cgj_libcall_t *lc, bool host, const void *result)
{
    if (host) lib_never(lc, CGJ_REASON_LIB_HOST_RESULT);
    else arg_put(lc, result);
}

cublasStatus_t cublasSdot_v2(cublasHandle_t h, int n, const float *x, int incx, const float *y, int incy, float *result)
{
    BLAS_PROLOGUE(cublasSdot_v2, h, n, x, incx, y, incy, result);
    bool host = blas_handle(&lc, h);
    INTS(&lc, n, incx, incy);
    arg_put(&lc, x), arg_put(&lc, y);
    dot_result(&lc, host, result);
    BLAS_RUN(cublasSdot_v2, h, n, x, incx, y, incy, result);
}

cublasStatus_t cublasAxpyEx(cublasHandle_t h, int n, const void *alpha, cudaDataType alpha_t, const void *x,
                            cudaDataType xt, int incx, void *y, cudaDataType yt, int incy, cudaDataType et)
{
    BLAS_PROLOGUE(cublasAxpyEx, h, n, alpha, alpha_t, x, xt, incx, y, yt, incy, et);
    bool host = blas_handle(&lc, h);
    INTS(&lc, n, alpha_t, xt, incx, yt, incy, et);
    scalar(&lc, host, alpha, cgj_lib_dtype_bytes(alpha_t));
    arg_put(&lc, x), arg_put(&lc, y);
    BLAS_RUN(cublasAxpyEx, h, n, alpha, alpha_t, x, xt, incx, y, yt, incy, et);
}

cublasStatus_t cublasScalEx(cublasHandle_t h, int n, const void *alpha, cudaDataType alpha_t, void *x, cudaDataType xt,
                            int incx, cudaDataType et)
{
    BLAS_PROLOGUE(cublasScalEx, h, n, alpha, alpha_t, x, xt, incx, et);
    bool host = blas_handle(&lc, h);
    INTS(&lc, n, alpha_t, xt, incx, et);
    scalar(&lc, host, alpha, cgj_lib_dtype_bytes(alpha_t));
    arg_put(&lc, x);
    BLAS_RUN(cublasScalEx, h, n, alpha, alpha_t, x, xt, incx, et);
}

cublasStatus_t cublasCopyEx(cublasHandle_t h, int n, const void *x, cudaDataType xt, int incx, void *y, cudaDataType yt,
                            int incy)
{
    BLAS_PROLOGUE(cublasCopyEx, h, n, x, xt, incx, y, yt, incy);
    blas_handle(&lc, h);
    INTS(&lc, n, xt, incx, yt, incy);
    arg_put(&lc, x), arg_put(&lc, y);
    BLAS_RUN(cublasCopyEx, h, n, x, xt, incx, y, yt, incy);
}

cublasStatus_t cublasDotEx(cublasHandle_t h, int n, const void *x, cudaDataType xt, int incx, const void *y,
                           cudaDataType yt, int incy, void *result, cudaDataType rt, cudaDataType et)
{
    BLAS_PROLOGUE(cublasDotEx, h, n, x, xt, incx, y, yt, incy, result, rt, et);
    bool host = blas_handle(&lc, h);
    INTS(&lc, n, xt, incx, yt, incy, rt, et);
    arg_put(&lc, x), arg_put(&lc, y);
    dot_result(&lc, host, result);
    BLAS_RUN(cublasDotEx, h, n, x, xt, incx, y, yt, incy, result, rt, et);
}

/* ---- handle life and settings: a new generation each ---- */

LIB_CREATE(cublasStatus_t, cublasCreate_v2, cublasHandle_t, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED)
LIB_DESTROY(cublasStatus_t, cublasDestroy_v2, cublasHandle_t, CUBLAS_STATUS_NOT_INITIALIZED)

#define SETTER(fn, T, what)                                   \
    cublasStatus_t fn(cublasHandle_t h, T v)                  \
    {                                                         \
        LIB_REAL(fn, CUBLAS_STATUS_NOT_INITIALIZED);          \
        cublasStatus_t r = real_(h, v);                       \
        cgj_lib_gen_setting(h, what, (uint64_t)(uintptr_t)v); \
        return r;                                             \
    }
SETTER(cublasSetMathMode, cublasMath_t, CGJ_LIB_SET_MATH)
SETTER(cublasSetAtomicsMode, cublasAtomicsMode_t, CGJ_LIB_SET_ATOMICS)
SETTER(cublasSetSmCountTarget, int, CGJ_LIB_SET_SM_COUNT)
SETTER(cublasSetEmulationStrategy, cublasEmulationStrategy_t, CGJ_LIB_SET_EMULATION)
SETTER(cublasSetEmulationSpecialValuesSupport, cudaEmulationSpecialValuesSupport, CGJ_LIB_SET_EMU_SPECIAL)
SETTER(cublasSetFixedPointEmulationMantissaControl, cudaEmulationMantissaControl, CGJ_LIB_SET_EMU_MANTISSA)
SETTER(cublasSetFixedPointEmulationMaxMantissaBitCount, int, CGJ_LIB_SET_EMU_MAX_BITS)
SETTER(cublasSetFixedPointEmulationMantissaBitOffset, int, CGJ_LIB_SET_EMU_BIT_OFFSET)
SETTER(cublasSetFixedPointEmulationMantissaBitCountPointer, int *, CGJ_LIB_SET_EMU_BITS_POINTER)

/* Setting the stream resets the handle's workspace to the library's own. */
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    LIB_REAL(cublasSetStream_v2, CUBLAS_STATUS_NOT_INITIALIZED);
    cublasStatus_t r = real_(h, s);
    cgj_lib_gen_setting(h, CGJ_LIB_SET_STREAM, (uint64_t)(uintptr_t)s);
    cgj_lib_gen_setting(h, CGJ_LIB_SET_WORKSPACE, 0);
    cgj_lib_gen_setting(h, CGJ_LIB_SET_WORKSPACE_BYTES, 0);
    return r;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes)
{
    LIB_REAL(cublasSetWorkspace_v2, CUBLAS_STATUS_NOT_INITIALIZED);
    cublasStatus_t r = real_(h, ws, bytes);
    cgj_lib_gen_setting(h, CGJ_LIB_SET_WORKSPACE, (uint64_t)(uintptr_t)ws);
    cgj_lib_gen_setting(h, CGJ_LIB_SET_WORKSPACE_BYTES, bytes);
    return r;
}

/* ---- cuBLASLt ---- */

LIB_CREATE(cublasStatus_t, cublasLtCreate, cublasLtHandle_t, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED)
LIB_DESTROY(cublasStatus_t, cublasLtDestroy, cublasLtHandle_t, CUBLAS_STATUS_NOT_INITIALIZED)

static void key_opaque(cgj_libcall_t *lc, const void *p, size_t bytes)
{
    if (p) key_put(lc, p, bytes);
    else key_i64(lc, -1);
}

static void lt_desc_attr(cgj_libcall_t *lc, cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, void *v, size_t n)
{
    size_t written = 0;
    if (!g_cublasLtMatmulDescGetAttribute)
        g_cublasLtMatmulDescGetAttribute =
            (__typeof__(cublasLtMatmulDescGetAttribute) *)cgj_lib_resolve("cublasLtMatmulDescGetAttribute");
    if (!g_cublasLtMatmulDescGetAttribute || g_cublasLtMatmulDescGetAttribute(d, a, v, n, &written))
        lib_never(lc, CGJ_REASON_LIB_DESCRIPTOR);
}

/* A layout of one float column-major matrix: its rows, columns and leading dimension; false for
 * any other (another type or order, a batch). */
static bool lt_plain_layout(cublasLtMatrixLayout_t l, uint64_t *rows, uint64_t *cols, int64_t *ld)
{
    static __typeof__(cublasLtMatrixLayoutGetAttribute) *get;
    if (!get) get = (__typeof__(get))cgj_lib_resolve("cublasLtMatrixLayoutGetAttribute");
    uint32_t type = 0;
    int32_t order = CUBLASLT_ORDER_COL, batch = 1;
    size_t w;
    return l && get && !get(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type, &w) && type == CUDA_R_32F &&
           !get(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order, &w) && order == CUBLASLT_ORDER_COL &&
           !get(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch, &w) && batch == 1 &&
           !get(l, CUBLASLT_MATRIX_LAYOUT_ROWS, rows, sizeof *rows, &w) &&
           !get(l, CUBLASLT_MATRIX_LAYOUT_COLS, cols, sizeof *cols, &w) &&
           !get(l, CUBLASLT_MATRIX_LAYOUT_LD, ld, sizeof *ld, &w);
}

/* The GEMM description of a plain cuBLASLt matmul (mode default): fp32 compute and scale, host
 * alpha and beta, no epilogue and no scale pointers, column-major float matrices, C and D one
 * matrix. Arguments: the descriptor's 7 pointers, then A 7, B 8, C 9, D 10. */
static void describe_lt_gemm(cgj_libcall_t *lc, cublasLtMatmulDesc_t desc, const void *alpha, const void *beta,
                             const void *C, cublasLtMatrixLayout_t ad, cublasLtMatrixLayout_t bd,
                             cublasLtMatrixLayout_t cd, const void *D, cublasLtMatrixLayout_t dd)
{
    int32_t compute = 0, ta = 0, tb = 0, pm = -1;
    uint32_t epilogue = 0;
    uint32_t scale = 0;
    uint64_t ar, ac, br, bc, cr, cc, dr, dc;
    int64_t lda, ldb, ldc, ldd;
    size_t w;
    if (!g_cublasLtMatmulDescGetAttribute || C != D || lc->nargs != 12) return;
    for (uint32_t k = 0; k < 7; k++)
        if (lc->args[k]) return; /* a bias or scale pointer: not a plain GEMM */
    if (g_cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute, sizeof compute, &w) ||
        g_cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale, sizeof scale, &w) ||
        g_cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm, &w) ||
        g_cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta, &w) ||
        g_cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb, &w) ||
        g_cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue, &w))
        return;
    if ((compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC) || scale != CUDA_R_32F ||
        pm != CUBLASLT_POINTER_MODE_HOST || epilogue != CUBLASLT_EPILOGUE_DEFAULT ||
        !lt_plain_layout(ad, &ar, &ac, &lda) || !lt_plain_layout(bd, &br, &bc, &ldb) ||
        !lt_plain_layout(cd, &cr, &cc, &ldc) || !lt_plain_layout(dd, &dr, &dc, &ldd) || cr != dr || cc != dc ||
        ldc != ldd || cr > INT32_MAX || cc > INT32_MAX || ar > INT32_MAX || ac > INT32_MAX)
        return;
    uint64_t k = ta == CUBLAS_OP_T ? ar : ac;
    if ((ta == CUBLAS_OP_T ? ac : ar) != cr || (tb == CUBLAS_OP_T ? br : bc) != cc ||
        (tb == CUBLAS_OP_T ? bc : br) != k)
        return;
    lc->gemm = (cgj_libgemm_t){.valid = true,
                               .transa = ta == CUBLAS_OP_T,
                               .transb = tb == CUBLAS_OP_T,
                               .a = 7,
                               .b = 8,
                               .c = 9,
                               .m = (int32_t)cr,
                               .n = (int32_t)cc,
                               .k = (int32_t)k,
                               .lda = (int32_t)lda,
                               .ldb = (int32_t)ldb,
                               .ldc = (int32_t)ldc,
                               .alpha = *(const float *)alpha,
                               .beta = *(const float *)beta};
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t ad, const void *B, cublasLtMatrixLayout_t bd, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cd, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsbytes, cudaStream_t s)
{
    BLAS_PROLOGUE(cublasLtMatmul, h, desc, alpha, A, ad, B, bd, beta, C, cd, D, dd, algo, ws, wsbytes, s);
    struct {
        const void *h, *s;
        uint64_t gen, wsbytes;
    } k = {h, s, cgj_lib_gen(h), wsbytes};
    key_put(&lc, &k, sizeof k);
    /* The descriptor's device pointers are arguments, not key: their words are blanked in the
     * copy of its bytes that goes into the key. */
    static const cublasLtMatmulDescAttributes_t ptr_attrs[] = {
        CUBLASLT_MATMUL_DESC_BIAS_POINTER,    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
        CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
        CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER,
        CUBLASLT_MATMUL_DESC_AMAX_D_POINTER};
    cublasLtMatmulDescOpaque_t content = {{0}};
    if (desc) content = *desc;
    for (size_t i = 0; desc && i < sizeof ptr_attrs / sizeof ptr_attrs[0]; i++) {
        void *p = NULL;
        lt_desc_attr(&lc, desc, ptr_attrs[i], &p, sizeof p);
        for (size_t w = 0; p && w < sizeof content.data / sizeof content.data[0]; w++)
            if (content.data[w] == (uint64_t)(uintptr_t)p) content.data[w] = 0;
        arg_put(&lc, p);
    }
    key_opaque(&lc, desc ? &content : NULL, sizeof content);
    key_opaque(&lc, ad, sizeof(cublasLtMatrixLayoutOpaque_t));
    key_opaque(&lc, bd, sizeof(cublasLtMatrixLayoutOpaque_t));
    key_opaque(&lc, cd, sizeof(cublasLtMatrixLayoutOpaque_t));
    key_opaque(&lc, dd, sizeof(cublasLtMatrixLayoutOpaque_t));
    key_opaque(&lc, algo, sizeof *algo);
    int32_t pm = CUBLASLT_POINTER_MODE_HOST;
    cudaDataType st = CUDA_R_32F;
    if (desc) {
        lt_desc_attr(&lc, desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
        lt_desc_attr(&lc, desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &st, sizeof st);
    } else {
        lib_never(&lc, CGJ_REASON_LIB_DESCRIPTOR);
    }
    size_t sb = cgj_lib_dtype_bytes(st);
    bool alpha_host = pm == CUBLASLT_POINTER_MODE_HOST;
    bool beta_host = pm == CUBLASLT_POINTER_MODE_HOST || pm == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
    scalar(&lc, alpha_host, alpha, sb);
    if (pm != CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO) scalar(&lc, beta_host, beta, sb);
    arg_put(&lc, A), arg_put(&lc, B), arg_put(&lc, C), arg_put(&lc, D), arg_put(&lc, ws);
    if (desc && alpha_host && beta_host && lib_ew_wanted(&lc))
        describe_lt_gemm(&lc, desc, alpha, beta, C, ad, bd, cd, D, dd);
    BLAS_RUN(cublasLtMatmul, h, desc, alpha, A, ad, B, bd, beta, C, cd, D, dd, algo, ws, wsbytes, s);
}

#pragma GCC visibility pop
