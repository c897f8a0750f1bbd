/*
 * spec.h — what an elementwise kernel computes, as its registration says.
 *
 * A program (cgj_op_register_elementwise) or a registry file (CGJIT_OPS) tells cgjit that a
 * kernel is elementwise: for every i below its element count, its outputs' element i is a
 * function of its inputs' element i and its scalar arguments. The spec names the kernel's
 * parameters in order, each with a role, then the function:
 *
 *     (out float y, in float x, float a, float b, count int n): y = a * x + b
 *
 * Roles: `in` (a pointer the kernel reads), `out` (a pointer it writes), `inout` (both: an
 * in-place update), `count` (the element count, an integer; where several parameters are counts,
 * the element count is their product: `count int rows, count int cols`), and no role for a
 * scalar passed by value (float, double, int, unsigned, long, size_t), which the expression may
 * use. An `in` pointer may be broadcast, read at another index than i: `in float b[i % cols]`,
 * `[i / d]` or `[(i / d) % m]`, with d, m, cols integer parameters (a bias over the rows of a
 * matrix, a per-channel scale of an NCHW tensor). Every
 * pointer of one spec has the same element type, float or double. Each `out` is assigned once,
 * an `inout` at most once; every expression reads the values the kernel was given (an output
 * cannot be read). Expressions: numbers, names, + - * /, unary -, comparisons (< <= > >= == !=)
 * inside `c ? a : b`, parentheses, and the functions of CGJ_EW_FUNC_LIST, nested at most
 * CGJ_EW_MAX_DEPTH deep.
 *
 * The spec's parameters must match the kernel's layout as the driver reports it (count and
 * sizes); a spec that does not is reported once, and the kernel stays opaque. What the
 * registration claims is never trusted: every fusion is validated against the kernels it
 * replaces before it is used (fusion/validate.c).
 */
#ifndef CGJ_FUSION_SPEC_H
#define CGJ_FUSION_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CGJ_EW_MAX_PARAMS 16
#define CGJ_EW_MAX_NODES 160
/* Levels of nesting (parentheses, a call's arguments, a branch of ?:) an expression may have:
 * more is a parse error, which bounds the stack the parser needs whatever the text. */
#define CGJ_EW_MAX_DEPTH 64
#define CGJ_EW_NAME_MAX 32

typedef enum cgj_ew_role { CGJ_EW_IN, CGJ_EW_OUT, CGJ_EW_INOUT, CGJ_EW_SCALAR, CGJ_EW_COUNT } cgj_ew_role_t;

/* X(NAME, "spelling", bytes, CUDA C type) */
/* clang-format off */
#define CGJ_EW_TYPE_LIST(X)                           \
    X(F32, "float", 4, "float")                       \
    X(F64, "double", 8, "double")                     \
    X(I32, "int", 4, "int")                           \
    X(U32, "unsigned", 4, "unsigned")                 \
    X(I64, "long", 8, "long long")                    \
    X(U64, "size_t", 8, "unsigned long long")
/* clang-format on */

typedef enum cgj_ew_type {
#define CGJ_EW_TYPE_ENUM(name, spelling, bytes, ctype) CGJ_EW_##name,
    CGJ_EW_TYPE_LIST(CGJ_EW_TYPE_ENUM)
#undef CGJ_EW_TYPE_ENUM
        CGJ_EW_TYPE_COUNT
} cgj_ew_type_t;

extern const char *const cgj_ew_type_names[CGJ_EW_TYPE_COUNT];
extern const char *const cgj_ew_type_ctypes[CGJ_EW_TYPE_COUNT];
extern const unsigned char cgj_ew_type_bytes[CGJ_EW_TYPE_COUNT];

/* X(name, arguments, float form, double form): the functions an expression may call; %0 %1 are
 * the arguments (temporaries, so an argument may appear twice). */
/* clang-format off */
#define CGJ_EW_FUNC_LIST(X)                                                                        \
    X(exp, 1, "expf(%0)", "exp(%0)")                                                               \
    X(log, 1, "logf(%0)", "log(%0)")                                                               \
    X(sqrt, 1, "sqrtf(%0)", "sqrt(%0)")                                                            \
    X(rsqrt, 1, "rsqrtf(%0)", "rsqrt(%0)")                                                         \
    X(tanh, 1, "tanhf(%0)", "tanh(%0)")                                                            \
    X(erf, 1, "erff(%0)", "erf(%0)")                                                               \
    X(abs, 1, "fabsf(%0)", "fabs(%0)")                                                             \
    X(sigmoid, 1, "1.0f / (1.0f + expf(-%0))", "1.0 / (1.0 + exp(-%0))")                           \
    X(relu, 1, "fmaxf(%0, 0.0f)", "fmax(%0, 0.0)")                                                 \
    X(gelu, 1, "0.5f * %0 * (1.0f + erff(%0 * 0.70710678118654752f))",                            \
      "0.5 * %0 * (1.0 + erf(%0 * 0.70710678118654752))")                                         \
    X(gelu_tanh, 1, "0.5f * %0 * (1.0f + tanhf(0.79788456080286536f * (%0 + 0.044715f * %0 * %0 * %0)))", \
      "0.5 * %0 * (1.0 + tanh(0.79788456080286536 * (%0 + 0.044715 * %0 * %0 * %0)))")            \
    X(min, 2, "fminf(%0, %1)", "fmin(%0, %1)")                                                     \
    X(max, 2, "fmaxf(%0, %1)", "fmax(%0, %1)")                                                     \
    X(pow, 2, "powf(%0, %1)", "pow(%0, %1)")
/* clang-format on */

typedef enum cgj_ew_func {
#define CGJ_EW_FUNC_ENUM(name, nargs, f32, f64) CGJ_EW_FN_##name,
    CGJ_EW_FUNC_LIST(CGJ_EW_FUNC_ENUM)
#undef CGJ_EW_FUNC_ENUM
        CGJ_EW_FUNC_COUNT
} cgj_ew_func_t;

extern const char *const cgj_ew_func_names[CGJ_EW_FUNC_COUNT];
extern const unsigned char cgj_ew_func_nargs[CGJ_EW_FUNC_COUNT];
extern const char *const cgj_ew_func_forms[CGJ_EW_FUNC_COUNT][2];

/* Expression nodes: children come before their parents in the node array. */
typedef enum cgj_ew_node_kind {
    CGJ_EW_NUM,    /* num */
    CGJ_EW_PARAM,  /* param: a pointer's element or a scalar */
    CGJ_EW_NEG,    /* -a */
    CGJ_EW_BINARY, /* a op b, op one of + - * / < <= > >= == != */
    CGJ_EW_SELECT, /* a ? b : c */
    CGJ_EW_CALL,   /* fn(a[, b]) */
} cgj_ew_node_kind_t;

typedef struct cgj_ew_node {
    uint8_t kind, op, fn, param; /* op: '+', '-', '*', '/', '<', '>', 'l' (<=), 'g' (>=), '=' (==), '!' (!=) */
    uint16_t a, b, c;
    double num;
} cgj_ew_node_t;

typedef struct cgj_ew_param {
    uint8_t role, type; /* cgj_ew_role_t, cgj_ew_type_t */
    uint8_t div, mod;   /* a broadcast `in` pointer's index (i / div) % mod: 1 + the parameter
                         * holding each, 0 for none */
    char name[CGJ_EW_NAME_MAX];
} cgj_ew_param_t;

typedef struct cgj_ew_spec {
    uint32_t nparams, nnodes, nassign;
    uint8_t elem;    /* the element type of every pointer (CGJ_EW_F32 or CGJ_EW_F64) */
    int count;       /* index of the (first) count parameter */
    uint16_t counts; /* bit k: parameter k is a count (the element count is their product) */
    cgj_ew_param_t p[CGJ_EW_MAX_PARAMS];
    cgj_ew_node_t n[CGJ_EW_MAX_NODES];
    struct {
        uint8_t param; /* an out or inout parameter */
        uint16_t root; /* its value's node */
    } assign[CGJ_EW_MAX_PARAMS];
} cgj_ew_spec_t;

/* Parse `text` into *out. False with a message in err ("column C: ...") if it does not parse or
 * breaks a rule above. */
bool cgj_ew_parse(const char *text, cgj_ew_spec_t *out, char *err, size_t errlen);
/* The value of expression node `root` of s in double precision, with params[k] the value of
 * parameter k (a pointer's: its element). What fusion/ uses to recognize what a stage does (a
 * bias add, an activation) by evaluating it at a few points. */
double cgj_ew_eval(const cgj_ew_spec_t *s, unsigned root, const double *params);
/* Bytes of parameter k as the kernel receives it (8 for a pointer). */
unsigned cgj_ew_param_bytes(const cgj_ew_spec_t *s, uint32_t k);
/* Is parameter k a pointer (in, out or inout)? */
static inline bool cgj_ew_is_pointer(const cgj_ew_spec_t *s, uint32_t k)
{
    return s->p[k].role <= CGJ_EW_INOUT;
}

#endif /* CGJ_FUSION_SPEC_H */
