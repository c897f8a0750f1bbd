/*
 * vec.h — the one growable array of cgjit: a pointer, a count and a capacity kept side by side
 * in the owner's struct, grown by doubling through cgjit's own host memory (base/mem.h).
 *
 *     cgj_op_t *ops; uint32_t n, cap;
 *     CGJ_VEC_PUSH(ops, n, cap, op);          // append a value
 *     cgj_op_t *o = CGJ_VEC_ADD(ops, n, cap); // append a zeroed slot, get a pointer to it
 */
#ifndef CGJ_VEC_H
#define CGJ_VEC_H

#include "base/mem.h"

#include <string.h>

/* Make room for one more element (first capacity: 16). An expression. */
#define CGJ_VEC_RESERVE(ptr, n, cap)                                                                                   \
    ((n) == (cap) ? (void)((cap) = (cap) ? 2 * (cap) : 16, (ptr) = cgj_xrealloc((ptr), (size_t)(cap) * sizeof *(ptr))) \
                  : (void)0)

#define CGJ_VEC_PUSH(ptr, n, cap, val) \
    do {                               \
        CGJ_VEC_RESERVE(ptr, n, cap);  \
        (ptr)[(n)++] = (val);          \
    } while (0)

/* Append a zeroed element; evaluates to its address. */
#define CGJ_VEC_ADD(ptr, n, cap) (CGJ_VEC_RESERVE(ptr, n, cap), memset(&(ptr)[(n)], 0, sizeof *(ptr)), &(ptr)[(n)++])

#endif /* CGJ_VEC_H */
