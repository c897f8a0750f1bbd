/*
 * glibc_compat.h — libcgjit.so and cgjit-run built on a newer glibc load on glibc 2.28.
 *
 * Forced-included (-include) into the library's and the launcher's sources when CMake is
 * configured with -DCGJIT_GLIBC_COMPAT=2.28, never otherwise. glibc 2.29 to 2.34 gave these
 * functions new symbol versions (libm's exp, exp2, log and pow in 2.29; pthread_sigmask in 2.32;
 * the pthread, semaphore and dl functions in 2.34, when libpthread and libdl moved into libc),
 * and keep the old ones for binaries built before. Each CGJ_SYMVER line binds the calls of a
 * source to the old version: a program's references then name versions glibc 2.28 defines. The
 * old versions are in libpthread.so.0 and libdl.so.2 on glibc 2.28, which the library and the
 * launcher list as NEEDED in this build. The same lines rename the references of the jemalloc
 * archive linked in (the top-level CMakeLists.txt reads them), so one table covers both.
 *
 * dlsym is not in the table: libcgjit.so defines its own (runtime/interpose.c), which must keep
 * its unversioned name. stat, fstat and lstat (new symbols in glibc 2.33; inline calls of
 * __xstat, __fxstat and __lxstat before) are defined in base/glibc_compat.c, and cgjit-run's
 * __libc_start_main (2.34) is bound there too. No system header is included here: a source's own
 * _GNU_SOURCE must still come before the first one.
 */
#ifndef CGJ_GLIBC_COMPAT_H
#define CGJ_GLIBC_COMPAT_H

#if !defined(__x86_64__) || !defined(__linux__)
#error "base/glibc_compat.h: the symbol versions bound here are x86_64 glibc's"
#endif

/* The glibc release the build loads on: 2.28 as 228. */
#define CGJ_GLIBC_COMPAT 228

/* CGJ_SYMVER(NAME, "VERSION"): the calls of NAME in this source go to NAME@VERSION. */
#define CGJ_SYMVER(name, version) __asm__(".symver " #name ", " #name "@" version)

/* One line each (the top-level CMakeLists.txt parses them): the newest version of each function
 * that glibc 2.28 has. */
CGJ_SYMVER(dladdr, "GLIBC_2.2.5");
CGJ_SYMVER(dlclose, "GLIBC_2.2.5");
CGJ_SYMVER(dlerror, "GLIBC_2.2.5");
CGJ_SYMVER(dlopen, "GLIBC_2.2.5");
CGJ_SYMVER(dlvsym, "GLIBC_2.2.5");
CGJ_SYMVER(exp, "GLIBC_2.2.5");
CGJ_SYMVER(exp2, "GLIBC_2.2.5");
CGJ_SYMVER(log, "GLIBC_2.2.5");
CGJ_SYMVER(pow, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_getaffinity_np, "GLIBC_2.3.4");
CGJ_SYMVER(pthread_attr_getguardsize, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_getstack, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_getstackaddr, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_getstacksize, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_setaffinity_np, "GLIBC_2.3.4");
CGJ_SYMVER(pthread_attr_setguardsize, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_setstack, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_setstackaddr, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_attr_setstacksize, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_barrier_destroy, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_barrier_init, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_barrier_wait, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_barrierattr_destroy, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_barrierattr_getpshared, "GLIBC_2.3.3");
CGJ_SYMVER(pthread_barrierattr_init, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_barrierattr_setpshared, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_cancel, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_condattr_getclock, "GLIBC_2.3.3");
CGJ_SYMVER(pthread_condattr_getpshared, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_condattr_setclock, "GLIBC_2.3.3");
CGJ_SYMVER(pthread_condattr_setpshared, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_create, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_detach, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_getaffinity_np, "GLIBC_2.3.4");
CGJ_SYMVER(pthread_getattr_default_np, "GLIBC_2.18");
CGJ_SYMVER(pthread_getattr_np, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_getconcurrency, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_getcpuclockid, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_getname_np, "GLIBC_2.12");
CGJ_SYMVER(pthread_getspecific, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_join, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_key_create, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_key_delete, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_kill, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutex_consistent, "GLIBC_2.12");
CGJ_SYMVER(pthread_mutex_getprioceiling, "GLIBC_2.4");
CGJ_SYMVER(pthread_mutex_setprioceiling, "GLIBC_2.4");
CGJ_SYMVER(pthread_mutex_timedlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutex_trylock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutexattr_destroy, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutexattr_getprioceiling, "GLIBC_2.4");
CGJ_SYMVER(pthread_mutexattr_getprotocol, "GLIBC_2.4");
CGJ_SYMVER(pthread_mutexattr_getpshared, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutexattr_getrobust, "GLIBC_2.12");
CGJ_SYMVER(pthread_mutexattr_gettype, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutexattr_init, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutexattr_setprioceiling, "GLIBC_2.4");
CGJ_SYMVER(pthread_mutexattr_setprotocol, "GLIBC_2.4");
CGJ_SYMVER(pthread_mutexattr_setpshared, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_mutexattr_setrobust, "GLIBC_2.12");
CGJ_SYMVER(pthread_mutexattr_settype, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_once, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_destroy, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_init, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_rdlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_timedrdlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_timedwrlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_tryrdlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_trywrlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_unlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlock_wrlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlockattr_destroy, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlockattr_getkind_np, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlockattr_getpshared, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlockattr_init, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlockattr_setkind_np, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_rwlockattr_setpshared, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_setaffinity_np, "GLIBC_2.3.4");
CGJ_SYMVER(pthread_setattr_default_np, "GLIBC_2.18");
CGJ_SYMVER(pthread_setconcurrency, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_setname_np, "GLIBC_2.12");
CGJ_SYMVER(pthread_setschedprio, "GLIBC_2.3.4");
CGJ_SYMVER(pthread_setspecific, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_sigmask, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_sigqueue, "GLIBC_2.11");
CGJ_SYMVER(pthread_spin_destroy, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_spin_init, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_spin_lock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_spin_trylock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_spin_unlock, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_testcancel, "GLIBC_2.2.5");
CGJ_SYMVER(pthread_timedjoin_np, "GLIBC_2.3.3");
CGJ_SYMVER(pthread_tryjoin_np, "GLIBC_2.3.3");
CGJ_SYMVER(sem_close, "GLIBC_2.2.5");
CGJ_SYMVER(sem_destroy, "GLIBC_2.2.5");
CGJ_SYMVER(sem_getvalue, "GLIBC_2.2.5");
CGJ_SYMVER(sem_init, "GLIBC_2.2.5");
CGJ_SYMVER(sem_open, "GLIBC_2.2.5");
CGJ_SYMVER(sem_post, "GLIBC_2.2.5");
CGJ_SYMVER(sem_timedwait, "GLIBC_2.2.5");
CGJ_SYMVER(sem_trywait, "GLIBC_2.2.5");
CGJ_SYMVER(sem_unlink, "GLIBC_2.2.5");
CGJ_SYMVER(sem_wait, "GLIBC_2.2.5");

#endif
