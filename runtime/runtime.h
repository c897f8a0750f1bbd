/*
 * runtime.h — process-wide start-up of cgjit, and the wrapper table.
 *
 * Start-up is lazy: nothing happens until the first driver symbol is looked up through dlsym
 * or cuGetProcAddress, or the first cgj_* call. A program that never touches CUDA never loads
 * the driver because of cgjit.
 */
#ifndef CGJ_RUNTIME_H
#define CGJ_RUNTIME_H

#include <stdbool.h>

/* Load the configuration and the driver once. CGJ_OK, CGJ_ERR_NO_DRIVER or CGJ_ERR_DISABLED. */
int cgj_runtime_init(void);
/* wrappers.c: build the table of (real driver function, wrapper) once the driver is loaded;
 * then the wrapper cgjit hands out instead of the real function `real`, or NULL. */
void cgj_wrappers_init(void);
void *cgj_wrapper_for(const void *real);

/* Sanitizer runtimes (ASan, UBSan, TSan) call dlsym while they start, before their shadow
 * memory exists: the code on that path must not be instrumented. */
#define CGJ_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

/* real.c: libc's dlsym (found by cgj_real_find, a constructor). */
extern void *(*cgj_real_dlsym)(void *, const char *);
void cgj_real_find(void);
/* The definition of `name` next after libcgjit in the lookup order (RTLD_NEXT), or NULL. */
void *cgj_real_next(const char *name);
/* The real dlsym(handle, name), past cgjit's own dlsym. */
void *cgj_real_sym(void *handle, const char *name);

#endif /* CGJ_RUNTIME_H */
