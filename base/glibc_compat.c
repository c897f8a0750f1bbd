/*
 * glibc_compat.c — what base/glibc_compat.h cannot do with a symbol version alone; built into
 * the library and the launcher only when base/glibc_compat.h is forced-included
 * (-DCGJIT_GLIBC_COMPAT=2.28), empty otherwise.
 *
 * stat, fstat and lstat: glibc 2.33 made them functions of libc (GLIBC_2.33); before, they were
 * inline calls of __xstat, __fxstat and __lxstat with _STAT_VER (1 on x86_64). The definitions
 * here are the same calls, hidden: the library's and the launcher's calls bind to them, and no
 * other program sees them.
 *
 * __libc_start_main (cgjit-run only, CGJ_GLIBC_COMPAT_LAUNCHER): the C runtime's _start calls
 * it, reached here through -Wl,--wrap=__libc_start_main and bound to the GLIBC_2.2.5 version.
 * The _start of glibc 2.34 and later passes no init function and leaves the program's
 * constructors to __libc_start_main; glibc 2.28's runs only the init function it is passed. So
 * where none is passed, the one given here runs _init and .init_array as glibc 2.28's
 * __libc_csu_init did (a glibc 2.34 __libc_start_main called with one runs it alone, as for
 * programs built before 2.34).
 */
#ifdef CGJ_GLIBC_COMPAT
#include <stddef.h>
#include <sys/stat.h>

#define CGJ_STAT_VER 1 /* _STAT_VER_LINUX of x86_64 */

extern int __xstat(int ver, const char *path, struct stat *buf);
extern int __fxstat(int ver, int fd, struct stat *buf);
extern int __lxstat(int ver, const char *path, struct stat *buf);
CGJ_SYMVER(__xstat, "GLIBC_2.2.5");
CGJ_SYMVER(__fxstat, "GLIBC_2.2.5");
CGJ_SYMVER(__lxstat, "GLIBC_2.2.5");

__attribute__((visibility("hidden"))) int stat(const char *path, struct stat *buf)
{
    return __xstat(CGJ_STAT_VER, path, buf);
}

__attribute__((visibility("hidden"))) int fstat(int fd, struct stat *buf)
{
    return __fxstat(CGJ_STAT_VER, fd, buf);
}

__attribute__((visibility("hidden"))) int lstat(const char *path, struct stat *buf)
{
    return __lxstat(CGJ_STAT_VER, path, buf);
}

#ifdef CGJ_GLIBC_COMPAT_LAUNCHER
typedef void (*cgj_compat_init_fn)(int, char **, char **);
typedef int (*cgj_compat_main_fn)(int, char **, char **);

/* The executable's constructors, between the linker's __init_array_start and __init_array_end,
 * and its _init (crti.o). */
extern cgj_compat_init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern cgj_compat_init_fn __init_array_end[] __attribute__((visibility("hidden")));
extern void _init(void);

extern int __libc_start_main(cgj_compat_main_fn main, int argc, char **argv, cgj_compat_init_fn init,
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
CGJ_SYMVER(__libc_start_main, "GLIBC_2.2.5");
int __wrap___libc_start_main(cgj_compat_main_fn main, int argc, char **argv, cgj_compat_init_fn init,
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end);

static void cgj_compat_init(int argc, char **argv, char **envp)
{
    _init();
    size_t n = (size_t)(__init_array_end - __init_array_start);
    for (size_t i = 0; i < n; i++) __init_array_start[i](argc, argv, envp);
}

int __wrap___libc_start_main(cgj_compat_main_fn main, int argc, char **argv, cgj_compat_init_fn init,
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    return __libc_start_main(main, argc, argv, init ? init : cgj_compat_init, fini, rtld_fini, stack_end);
}
#endif /* CGJ_GLIBC_COMPAT_LAUNCHER */
#else
typedef int cgj_glibc_compat_unused; /* a translation unit is never empty */
#endif /* CGJ_GLIBC_COMPAT */
