/*
 * libs.h — what the library wrappers (libs.c, libs_blas.c, libs_dnn.c, libs_nccl.c) share.
 *
 * cgjit exports cuBLAS, cuBLASLt, cuDNN and NCCL entry points; loaded before the libraries
 * (preload, or linked ahead of them) it receives the program's calls and reaches the real
 * functions with dlsym(RTLD_NEXT). Outside a step, and inside a library call (a library calling
 * another's exported function), a wrapper forwards at once. Inside a step it describes the call
 * as a cgj_libcall_t (ir/ir.h): a key holding every argument that decides what the library
 * does, by value — scalars, host-mode alpha/beta, descriptor contents read back with the
 * libraries' getters, the handle's stream, modes and generation — and the device pointers.
 * The step then runs the library and groups the driver calls it makes under one LIB op, whose
 * launches replay like any other; only under CGJIT_LIBS_LEARNED (unsafe) may replay absorb the
 * call whole when its guard holds, the library not called.
 */
#ifndef CGJ_LIBS_H
#define CGJ_LIBS_H

#include "runtime/runtime.h"
#include "tracer/step.h"
#include "base/config.h"
#include "base/log.h"

#include <string.h>

/* Library calls running on this thread: nested ones are part of the outer call. */
extern __thread int cgj_lib_depth;

static inline bool cgj_lib_pass(void)
{
    if (cgj_lib_depth > 0 || !cgj_tracing() || !cgj_cfg.LIBS) return true;
    return !cgj_step_lib_key_wanted();
}

/* The real function, looked up once. A missing one is reported, and the wrapper returns `err`. */
void *cgj_lib_resolve(const char *name);
#define LIB_REAL(fn, err)         \
    static __typeof__(fn) *real_; \
    if (CGJ_UNLIKELY(!real_) && !(real_ = (__typeof__(fn) *)cgj_lib_resolve(#fn))) return (err)

/* The getters a wrapper file reads descriptors and handles with: LIST(X) names them, X(fn) each;
 * getters_ready() resolves them all once and says whether every one was found. */
#define LIB_GETTER(fn) static __typeof__(fn) *g_##fn;
#define LIB_RESOLVE_ONE(fn) ok_ &= (g_##fn = (__typeof__(fn) *)cgj_lib_resolve(#fn)) != NULL;
#define LIB_DEFINE_GETTERS(LIST)                                \
    LIST(LIB_GETTER)                                            \
    static bool getters_ready(void)                             \
    {                                                           \
        static int state_; /* 0 unknown, 1 ready, -1 missing */ \
        if (CGJ_LIKELY(state_)) return state_ > 0;              \
        bool ok_ = true;                                        \
        LIST(LIB_RESOLVE_ONE)                                   \
        state_ = ok_ ? 1 : -1;                                  \
        return ok_;                                             \
    }

/* Generations of handles and descriptors whose hidden state the key cannot read: a new number
 * whenever that state may change (created, destroyed, finalized), and for a handle's settings a
 * number that follows what is set: the same settings give the same generation. PyTorch sets a
 * cuBLAS handle's stream and workspace again before every GEMM (the stream resets the
 * workspace, the workspace is set back): the handle is then as it was, and its calls are still
 * absorbed. Unknown objects have generation 0. */
uint64_t cgj_lib_gen(const void *obj);
/* In a child after fork(): the wrappers' locks as if unlocked. */
void cgj_libs_forked(void);
void cgj_lib_dnn_forked(void); /* libs_dnn.c (a no-op where cgjit is built without cuDNN) */
void cgj_lib_gen_bump(const void *obj);
void cgj_lib_gen_drop(const void *obj);
/* A handle's settings, each a value the library keeps and the key cannot read back. */
typedef enum cgj_lib_setting {
    CGJ_LIB_SET_STREAM,
    CGJ_LIB_SET_WORKSPACE,
    CGJ_LIB_SET_WORKSPACE_BYTES,
    CGJ_LIB_SET_MATH,
    CGJ_LIB_SET_ATOMICS,
    CGJ_LIB_SET_SM_COUNT,
    CGJ_LIB_SET_EMULATION,
    CGJ_LIB_SET_EMU_SPECIAL,
    CGJ_LIB_SET_EMU_MANTISSA,
    CGJ_LIB_SET_EMU_MAX_BITS,
    CGJ_LIB_SET_EMU_BIT_OFFSET,
    CGJ_LIB_SET_EMU_BITS_POINTER,
    CGJ_LIB_SETTINGS
} cgj_lib_setting_t;
/* Setting `what` of handle obj is now v: its generation follows its settings. */
void cgj_lib_gen_setting(const void *obj, cgj_lib_setting_t what, uint64_t v);

/* The call can never be absorbed: the first reason given is kept (a code of ir/reason.h). */
static inline void lib_never(cgj_libcall_t *lc, cgj_reason_code_t why)
{
    if (!lc->never) lc->never = why;
}

static inline void lib_init(cgj_libcall_t *lc)
{
    lc->keylen = lc->nargs = 0;
    lc->never = CGJ_REASON_NONE;
    lc->collective = false;
    lc->ew.spec = NULL;
    lc->gemm.valid = false;
    lc->conv.valid = false;
}

/* Elementwise descriptions (fusion/, mode default): worth building only where they may be used. */
static inline bool lib_ew_wanted(const cgj_libcall_t *lc)
{
    return !lc->never && cgj_jit_mode() != CGJ_JIT_REDUCE_OVERHEAD;
}

/* A float's bits as an elementwise parameter's value. */
static inline uint64_t lib_ew_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Keys are compared byte for byte: a struct put whole must have no padding (stack bytes). */
static inline void key_put(cgj_libcall_t *lc, const void *p, size_t n)
{
    if (CGJ_UNLIKELY(lc->keylen + n > CGJ_LIB_KEY_MAX)) {
        lib_never(lc, CGJ_REASON_LIB_KEY_SIZE);
        return;
    }
    memcpy(lc->key + lc->keylen, p, n);
    lc->keylen += (uint32_t)n;
}

static inline void key_i64(cgj_libcall_t *lc, int64_t v)
{
    key_put(lc, &v, sizeof v);
}

/* A device pointer: an argument; its alignment (and whether it is NULL) goes into the key, as
 * libraries pick kernels by alignment. */
static inline void arg_put(cgj_libcall_t *lc, const void *p)
{
    CUdeviceptr v = (CUdeviceptr)(uintptr_t)p;
    uint8_t al = v ? (uint8_t)__builtin_ctzll(v) : 64;
    if (al > 8 && v) al = 8;
    key_put(lc, &al, 1);
    if (CGJ_UNLIKELY(lc->nargs == CGJ_LIB_MAX_ARGS)) {
        lib_never(lc, CGJ_REASON_LIB_MANY_ARGS);
        return;
    }
    lc->args[lc->nargs++] = v;
}

/* A scalar the library reads from host memory (host pointer mode): its value. */
static inline void key_host_scalar(cgj_libcall_t *lc, const void *p, size_t bytes)
{
    if (!p) {
        key_i64(lc, -1);
        return;
    }
    if (!bytes) {
        lib_never(lc, CGJ_REASON_LIB_HOST_SCALAR);
        return;
    }
    key_put(lc, p, bytes);
}

/* Handle life: a created handle gets a generation, a destroyed one loses its own for good. */
#define LIB_CREATE(RT, fn, H, ok, err)            \
    RT fn(H *h)                                   \
    {                                             \
        LIB_REAL(fn, err);                        \
        RT r = real_(h);                          \
        if (r == (ok) && h) cgj_lib_gen_bump(*h); \
        return r;                                 \
    }
#define LIB_DESTROY(RT, fn, H, err) \
    RT fn(H h)                      \
    {                               \
        LIB_REAL(fn, err);          \
        cgj_lib_gen_drop(h);        \
        return real_(h);            \
    }

/* Bytes of one value of a cudaDataType (0: unknown). */
size_t cgj_lib_dtype_bytes(int cuda_data_type);

/* Which pointer arguments are the same pointer goes into the key: a kernel parameter learned as
 * "B" where A == B in the recorded runs must not be replayed from A once they differ. */
static inline void key_aliases(cgj_libcall_t *lc)
{
    uint8_t first[CGJ_LIB_MAX_ARGS];
    for (uint32_t i = 0; i < lc->nargs; i++) {
        first[i] = (uint8_t)i;
        for (uint32_t j = 0; j < i; j++)
            if (lc->args[j] == lc->args[i]) {
                first[i] = (uint8_t)j;
                break;
            }
    }
    key_put(lc, first, lc->nargs);
}

/* Run the library call lc as `expr` under the step; `ok` is the library's success status.
 * CGJ_RUN_ABSORBED (CGJIT_VERIFY): replay absorbed it whole, and it runs for real too, its driver
 * calls passed straight through (the eager execution the graph is checked against). */
#define LIB_CALL(lc, name, ok, expr)                                         \
    do {                                                                     \
        cgj_probe_mark();                                                    \
        key_aliases(&(lc));                                                  \
        cgj_call_t c_;                                                       \
        cgj_call_init(&c_, CGJ_OP_LIB, (name), NULL);                        \
        c_.u.l.lc = &(lc);                                                   \
        int d_ = cgj_step_enter(&c_);                                        \
        if (d_ == CGJ_ABSORB) return (ok);                                   \
        if (CGJ_UNLIKELY(d_ == CGJ_RUN_ABSORBED)) {                          \
            cgj_internal_calls++;                                            \
            cgj_step_verify_run();                                           \
            __typeof__(expr) v_ = (expr);                                    \
            cgj_step_verify_ran();                                           \
            cgj_internal_calls--;                                            \
            return v_;                                                       \
        }                                                                    \
        cgj_lib_depth++;                                                     \
        __typeof__(expr) r_ = (expr);                                        \
        cgj_lib_depth--;                                                     \
        cgj_step_leave(&c_, r_ == (ok) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN); \
        return r_;                                                           \
    } while (0)

#endif /* CGJ_LIBS_H */
