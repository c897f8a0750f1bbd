/*
 * fuzz_stack.h — the stack bound of the harnesses whose input nests (fuzz_spec.c,
 * fuzz_registry.c): the main thread's stack may grow to FUZZ_STACK_LIMIT only (RLIMIT_STACK
 * bounds its growth), so that a parser whose stack use grows with its input overflows at a size
 * the fuzzer reaches (a nesting deep enough to overflow the default 8 MiB needs megabytes of text).
 * Called first from LLVMFuzzerInitialize.
 */
#ifndef CGJ_FUZZ_STACK_H
#define CGJ_FUZZ_STACK_H

#include <sys/resource.h>

#define FUZZ_STACK_LIMIT (1u << 20)

static inline void fuzz_bound_stack(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_STACK, &r) == 0 && (r.rlim_cur == RLIM_INFINITY || r.rlim_cur > FUZZ_STACK_LIMIT)) {
        r.rlim_cur = FUZZ_STACK_LIMIT;
        setrlimit(RLIMIT_STACK, &r);
    }
}

#endif /* CGJ_FUZZ_STACK_H */
