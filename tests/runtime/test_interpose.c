/*
 * test_interpose.c — runtime/interpose.c against the fake driver: which pointers dlsym and
 * cuGetProcAddress hand out (cgjit's wrappers for the functions it wraps, the driver's own
 * for everything else), and that outside a step a wrapped call simply executes; and that the
 * library reads the environment only with secure_getenv (its ELF imports).
 *
 * "Points into libcgjit" is checked with dladdr: the object that contains the address.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cgjit.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeapp.h"

static fk_t fk;

static void setup(void)
{
    fk_open(&fk);
}
TestSuite(runtime_interpose, .init = setup);

static const char *object_of(const void *p)
{
    Dl_info di;
    cr_assert(dladdr(p, &di) != 0 && di.dli_fname, "dladdr(%p) found no object", p);
    return di.dli_fname;
}

static bool in_cgjit(const void *p)
{
    return strstr(object_of(p), "libcgjit") != NULL;
}
static bool in_fake(const void *p)
{
    return strstr(object_of(p), "fakecuda/libcuda.so.1") != NULL;
}

static void *gpa(const char *sym, int version, cuuint64_t flags)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = -1;
    CUresult r = fk.gpa(sym, &p, version, flags, &st);
    cr_assert_eq(r, CUDA_SUCCESS, "cuGetProcAddress(%s, %d, %llu) = %d", sym, version, (unsigned long long)flags, r);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
    cr_assert(p);
    return p;
}

Test(runtime_interpose, dlsym_of_a_wrapped_function_is_a_cgjit_wrapper)
{
    void *p = dlsym(fk.handle, "cuLaunchKernel");
    cr_assert(p);
    cr_assert(in_cgjit(p), "dlsym(cuLaunchKernel) -> %s", object_of(p));
    /* the entry point the fake app started from, too */
    void *g = dlsym(fk.handle, "cuGetProcAddress_v2");
    cr_assert(in_cgjit(g), "dlsym(cuGetProcAddress_v2) -> %s", object_of(g));
    cr_assert_eq(g, (void *)fk.gpa);
    /* and the same wrapper whichever way it is looked up */
    cr_assert_eq(p, gpa("cuLaunchKernel", 4000, 0));
    cr_assert_eq(p, (void *)fk.launch);
    void *sync = dlsym(fk.handle, "cuStreamSynchronize");
    cr_assert(in_cgjit(sync));
    cr_assert_eq(sync, (void *)fk.stream_sync);
}

Test(runtime_interpose, get_proc_address_hands_out_wrappers)
{
    static const char *const wrapped[] = {
        "cuLaunchKernel", "cuLaunchKernelEx",    "cuLaunchHostFunc",     "cuMemcpyHtoD",       "cuMemcpyHtoDAsync",
        "cuMemcpyDtoH",   "cuMemcpyDtoHAsync",   "cuMemcpyDtoDAsync",    "cuMemcpyAsync",      "cuMemsetD32Async",
        "cuMemsetD8",     "cuStreamSynchronize", "cuStreamWaitEvent",    "cuCtxSynchronize",   "cuEventRecord",
        "cuMemFree",      "cuGraphLaunch",       "cuStreamBeginCapture", "cuEventSynchronize", "cuStreamQuery",
        "cuEventQuery"};
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++) {
        void *p = gpa(wrapped[i], 13000, 0);
        cr_assert(in_cgjit(p), "cuGetProcAddress(%s) -> %s, not a cgjit wrapper", wrapped[i], object_of(p));
    }
}

Test(runtime_interpose, per_thread_flag_gets_another_wrapper)
{
    void *plain = gpa("cuLaunchKernel", 13000, 0);
    void *pt = gpa("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    cr_assert(in_cgjit(plain) && in_cgjit(pt));
    cr_assert_neq(plain, pt, "the per-thread cuLaunchKernel got the plain wrapper");
    cr_assert_eq(pt, (void *)fk.launch_ptsz);
    /* it is the wrapper of the driver's _ptsz export */
    cr_assert_eq(pt, dlsym(fk.handle, "cuLaunchKernel_ptsz"));
    /* explicit legacy flag: the plain one */
    cr_assert_eq(plain, gpa("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM));

    void *sp = gpa("cuStreamSynchronize", 13000, 0);
    void *spt = gpa("cuStreamSynchronize", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    cr_assert(in_cgjit(sp) && in_cgjit(spt));
    cr_assert_neq(sp, spt);
    void *cp = gpa("cuMemcpyHtoD", 13000, 0);
    void *cpt = gpa("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    cr_assert(in_cgjit(cp) && in_cgjit(cpt));
    cr_assert_neq(cp, cpt);
    cr_assert_eq(cpt, dlsym(fk.handle, "cuMemcpyHtoD_v2_ptds"));
}

Test(runtime_interpose, get_proc_address_of_itself_is_wrapped_again)
{
    void *v1 = gpa("cuGetProcAddress", 11030, 0);
    void *v2 = gpa("cuGetProcAddress", 12050, 0);
    cr_assert(in_cgjit(v1), "cuGetProcAddress@11030 -> %s", object_of(v1));
    cr_assert(in_cgjit(v2), "cuGetProcAddress@12050 -> %s", object_of(v2));
    cr_assert_neq(v1, v2, "the fake hands out two ABIs; cgjit must wrap each with its own");
    cr_assert_eq(v2, (void *)fk.gpa);
    cr_assert_eq(v1, dlsym(fk.handle, "cuGetProcAddress"));
    cr_assert_eq(gpa("cuGetProcAddress", 12000, 0), v1);

    /* look-ups through the v1 wrapper are wrapped as well: nothing escapes */
    typedef CUresult (*gpa_v1_t)(const char *, void **, int, cuuint64_t);
    void *p = NULL;
    cr_assert_eq(((gpa_v1_t)v1)("cuLaunchKernel", &p, 11030, 0), CUDA_SUCCESS);
    cr_assert_eq(p, (void *)fk.launch);
    cr_assert_eq(((gpa_v1_t)v1)("cuLaunchKernel", &p, 11030, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                 CUDA_SUCCESS);
    cr_assert_eq(p, (void *)fk.launch_ptsz);
    void *q = NULL;
    cr_assert_eq(((gpa_v1_t)v1)("cuGetProcAddress", &q, 11030, 0), CUDA_SUCCESS);
    cr_assert_eq(q, v1);
    /* ... and through the v2 wrapper obtained from itself */
    __typeof__(cuGetProcAddress) *g2 = (__typeof__(cuGetProcAddress) *)v2;
    cr_assert_eq(g2("cuMemcpyDtoH", &p, 13000, 0, NULL), CUDA_SUCCESS);
    cr_assert_eq(p, (void *)fk.dtoh);
}

Test(runtime_interpose, unwrapped_driver_functions_are_the_drivers_own)
{
    static const char *const plain[] = {"cuDeviceGet",        "cuStreamCreate",        "cuEventCreate",
                                        "cuGraphExecDestroy", "cuPointerGetAttribute", "cuInit"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        void *p = gpa(plain[i], 13000, 0);
        cr_assert(!in_cgjit(p), "%s was wrapped (-> %s)", plain[i], object_of(p));
        cr_assert(in_fake(p), "%s -> %s", plain[i], object_of(p));
        cr_assert_eq(p, dlsym(fk.handle, plain[i]), "%s: cuGetProcAddress and dlsym disagree", plain[i]);
    }
    CUdevice dev = -1;
    cr_assert_eq(fk.device_get(&dev, 0), CUDA_SUCCESS);
    cr_assert_eq(dev, 0);
}

Test(runtime_interpose, non_driver_symbols_are_untouched)
{
    void *p = dlsym(fk.handle, "fakecuda_get_counts");
    cr_assert(p);
    cr_assert(in_fake(p), "-> %s", object_of(p));
    cr_assert_eq(p, (void *)fk.get_counts);
    cr_assert_null(dlsym(fk.handle, "cuNoSuchFunction"));
    cr_assert_null(dlsym(fk.handle, "no_such_symbol"));
    /* a libc symbol looked up through RTLD_DEFAULT */
    cr_assert_eq(dlsym(RTLD_DEFAULT, "strlen"), (void *)strlen);
}

Test(runtime_interpose, unknown_symbol_error_is_the_drivers)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = fk.gpa("cuNoSuchFunction", &p, 13000, 0, &st);
    cr_assert_eq(r, CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    cr_assert_null(p);
    r = fk.gpa("cuLaunchKernel", &p, 13000, 0x80, NULL); /* unknown flag */
    cr_assert_eq(r, CUDA_ERROR_INVALID_VALUE);
}

Test(runtime_interpose, outside_a_step_a_launch_executes_at_once)
{
    CUdeviceptr x = fk_alloc_floats(&fk, 16, 3);
    float before[16], after[16];
    memcpy(before, (void *)(uintptr_t)x, sizeof before);
    fk.reset_counts();
    cr_assert_eq(fk_axpb_launch(&fk, NULL, x, 2.0f, 1.0f, 16, 1), CUDA_SUCCESS);
    fakecuda_counts_t c;
    fk.get_counts(&c);
    cr_assert_eq(c.eager_launches, 1);
    cr_assert_eq(c.kernels_run, 1);
    cr_assert_eq(c.graph_launches, 0);
    cr_assert_eq(c.captures, 0);
    memcpy(after, (void *)(uintptr_t)x, sizeof after);
    for (int i = 0; i < 16; i++) cr_assert_eq(after[i], 2.0f * before[i] + 1.0f);
    /* the per-thread one as well */
    cr_assert_eq(fk_axpb_launch_f(&fk, fk_axpb, true, NULL, x, 1.0f, 1.0f, 16, 1), CUDA_SUCCESS);
    fk.get_counts(&c);
    cr_assert_eq(c.eager_launches, 2);
    cr_assert_eq(c.graph_launches, 0);
    cgj_stats_t st;
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    cr_assert_eq(st.ops_recorded, 0);
    cr_assert_eq(st.ops_absorbed, 0);
    cr_assert_eq(st.steps, 0);
}

Test(runtime_interpose, outside_a_step_errors_are_returned_unchanged)
{
    CUdeviceptr x = fk_alloc_floats(&fk, 16, 3);
    fk.fail_next("cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    cr_assert_eq(fk_axpb_launch(&fk, NULL, x, 2.0f, 1.0f, 16, 1), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    fk.fail_next("cuMemcpyHtoD_v2", CUDA_ERROR_INVALID_VALUE);
    float h[16] = {0};
    cr_assert_eq(fk.htod(x, h, sizeof h), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(fk.htod(x, h, sizeof h), CUDA_SUCCESS);
}

Test(runtime_interpose, inside_a_step_errors_are_returned_unchanged)
{
    CUdeviceptr x = fk_alloc_floats(&fk, 16, 3);
    cr_assert_eq(cgj_trace_begin("err"), CGJ_OK);
    fk.fail_next("cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    cr_assert_eq(fk_axpb_launch(&fk, NULL, x, 2.0f, 1.0f, 16, 1), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    cr_assert_eq(fk_axpb_launch(&fk, NULL, x, 2.0f, 1.0f, 16, 1), CUDA_SUCCESS);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_geq(st.aborts, 1, "a failed call inside a step aborts the step");
}

/* cgjit carries its own jemalloc for its own memory: the program's malloc must stay libc's. */
Test(runtime_interpose, program_malloc_is_untouched)
{
    void *p = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    cr_assert(p && dladdr(p, &info) && info.dli_fname);
    cr_assert(strstr(info.dli_fname, "libc.so") || strstr(info.dli_fname, "libasan"), "malloc comes from %s",
              info.dli_fname);
    cr_assert_null(dlsym(RTLD_DEFAULT, "mallocx"), "no jemalloc symbol may leak into the program");
}

/* A program linked with -lcuda calls the driver's symbols directly: with libcgjit ahead of the
 * driver in the lookup order they are cgjit's exports, and its steps are traced and replayed. */
Test(runtime_interpose, direct_driver_calls_reach_cgjit)
{
    Dl_info di;
    cr_assert(dladdr((void *)&cuLaunchKernel, &di) && strstr(di.dli_fname, "libcgjit"), "cuLaunchKernel resolves to %s",
              di.dli_fname);
    enum { n = 32 };
    CUdeviceptr e = fk_alloc_floats(&fk, n, 4), t = fk_alloc_floats(&fk, n, 4);
    for (int s = 0; s < 10; s++) {
        for (int traced = 0; traced < 2; traced++) {
            CUdeviceptr x = traced ? t : e;
            float a = 1.0f + (float)s, b = 0.25f;
            int count = n;
            void *params[] = {&x, &a, &b, &count};
            if (traced) cr_assert_eq(cgj_trace_begin("direct_calls"), CGJ_OK);
            cr_assert_eq(cuLaunchKernel(fk_axpb, 1, 1, 1, n, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
            cr_assert_eq(cuMemsetD32Async(x + 4 * (n - 1), 7u, 1, NULL), CUDA_SUCCESS);
            if (traced) cr_assert_eq(cgj_trace_end(), CGJ_OK);
        }
        float he[n], ht[n];
        cr_assert_eq(cuMemcpyDtoH(he, e, sizeof he), CUDA_SUCCESS);
        cr_assert_eq(cuMemcpyDtoH(ht, t, sizeof ht), CUDA_SUCCESS);
        cr_assert(memcmp(he, ht, sizeof he) == 0, "step %d differs", s);
    }
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info("direct_calls", &i), CGJ_OK);
    cr_assert_eq(i.ops, 2, "both direct calls were recorded");
    cr_assert_eq(i.replays, 8);
}

/* ---- the environment ---- */

/* Is `name` among the symbols the ELF object `lib` takes from others (undefined in .dynsym)? */
static bool imports(const char *lib, const char *name)
{
    FILE *f = fopen(lib, "rb");
    cr_assert(f, "%s", lib);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    cr_assert_gt(size, (long)sizeof(ElfW(Ehdr)));
    unsigned char *image = malloc((size_t)size);
    rewind(f);
    cr_assert_eq(fread(image, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    const ElfW(Ehdr) *eh = (const void *)image;
    cr_assert(!memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_shentsize == sizeof(ElfW(Shdr)));
    const ElfW(Shdr) *sh = (const void *)(image + eh->e_shoff);
    bool found = false;
    for (unsigned k = 0; k < eh->e_shnum && !found; k++) {
        if (sh[k].sh_type != SHT_DYNSYM) continue;
        const ElfW(Sym) *sym = (const void *)(image + sh[k].sh_offset);
        const char *strtab = (const char *)image + sh[sh[k].sh_link].sh_offset;
        for (size_t i = 0; i < sh[k].sh_size / sizeof *sym && !found; i++)
            found = sym[i].st_shndx == SHN_UNDEF && !strcmp(strtab + sym[i].st_name, name);
    }
    free(image);
    return found;
}

/* Every variable libcgjit reads, those that name a path above all (HOME, XDG_CACHE_HOME,
 * CUDA_HOME, CGJIT_*), is read with secure_getenv: a set-user-ID program gets the defaults,
 * never a path from the environment of whoever started it. The library takes no getenv. */
Test(runtime_interpose, the_environment_is_read_with_secure_getenv_only)
{
    const char *lib = object_of((void *)cgj_trace_begin);
    cr_assert(imports(lib, "secure_getenv"), "%s: no secure_getenv found among its imports", lib);
    cr_assert_not(imports(lib, "getenv"), "%s imports getenv", lib);
}
