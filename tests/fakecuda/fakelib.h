/*
 * fakelib.h — what the fake vendor libraries (fakecublas.c, fakenccl.c) share. fakelib.c is
 * compiled into each of them (cgj_fake_library), so each library has its own lock and its own
 * list of live objects, as two real libraries would.
 *
 *  - The library's lock, a leaf (nothing else is called under it), safe across fork(): fork
 *    takes it first, the parent releases it, the child gets a new one. A child forked while
 *    another thread held it would otherwise wait for it forever.
 *  - The live list: the objects the library handed out and has not destroyed (cuBLAS handles,
 *    NCCL communicators). A kernel checks that what it was given is still live, so a replayed
 *    graph that uses a destroyed object is caught in every build.
 *  - The fake driver, reached as a real library reaches it: dlopen (CGJIT_DRIVER, which the tests
 *    set to the fake's path, so that a real libcuda.so.1 found first on a GPU machine is never
 *    used; else "libcuda.so.1"), then every entry point through cuGetProcAddress_v2.
 */
#ifndef FAKELIB_H
#define FAKELIB_H

#include "fakecuda.h"

#include <stdbool.h>

/* The first member of every object on the live list. */
typedef struct fakelib_obj {
    struct fakelib_obj *next;
} fakelib_obj_t;

void fakelib_lock(void);
void fakelib_unlock(void);

/* Add o to the live list; take it off (false where it was not on it). */
void fakelib_live_add(fakelib_obj_t *o);
bool fakelib_live_remove(fakelib_obj_t *o);
/* Is o on the live list? Is some object on it one that match(object, arg) accepts? */
bool fakelib_live(const void *o);
bool fakelib_live_any(bool (*match)(const fakelib_obj_t *o, const void *arg), const void *arg);

/* Open the fake driver: its kernel registry, or NULL where the driver or one of the two entry
 * points cannot be found. */
__typeof__(fakecuda_register_kernel) *fakelib_driver_open(void);
/* *fn: the driver's entry point `name` (cuGetProcAddress, CUDA 12.0 semantics); false where the
 * driver has none (or fakelib_driver_open has not found it). */
bool fakelib_resolve(const char *name, void **fn);

/* Set the library up once (init, the first caller runs it, the others wait for it): true where
 * init did (returned true). One init per library. */
bool fakelib_ready(bool (*init)(void));

/* Add one to a counter other threads read. */
static inline void fakelib_count(unsigned long *c)
{
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

#endif /* FAKELIB_H */
