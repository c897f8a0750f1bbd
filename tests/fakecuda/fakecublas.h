/*
 * fakecublas.h — test-facing API of the fake cuBLAS (tests/fakecuda/libfakecublas.so).
 *
 * The fake exports a few cuBLAS entry points (handles, streams, modes, workspace, Saxpy, Sscal,
 * Scopy, Sdot, Sgemm) under their exact names and signatures from cublas_v2.h. It computes on
 * the CPU through the fake driver: it reaches the driver the way the real library does (dlopen
 * libcuda.so.1, dlsym cuGetProcAddress_v2, every entry point through it), so a process running
 * cgjit sees every allocation, launch, copy and synchronization it makes. See fakecublas.c.
 */
#ifndef FAKECUBLAS_H
#define FAKECUBLAS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FAKECUBLAS_API __attribute__((visibility("default")))
#else
#define FAKECUBLAS_API
#endif

/* Calls of the computing functions (Saxpy, Sscal, Scopy, Sdot, Sgemm) that reached the fake,
 * nested ones included (Sgemm's own Sscal counts when it reaches the fake), whatever status they
 * returned. A call absorbed by a replay never reaches the fake and is not counted. */
FAKECUBLAS_API unsigned long fakecublas_calls(void);

/* Kernels of the fake that ran with a workspace pointer that is not the current workspace of a
 * live handle (a graph replaying launches of a destroyed handle, or of a replaced workspace).
 * Such a kernel leaves the workspace untouched and prints one line to stderr. */
FAKECUBLAS_API unsigned long fakecublas_workspace_errors(void);

/* Kernels of the fake that ran (eagerly or from a graph). */
FAKECUBLAS_API unsigned long fakecublas_kernels_run(void);

/* Turn the hidden state of Sgemm on or off (fakecublas.c: an algorithm chosen from the shapes a
 * handle ran before, a workspace semaphore a split-K GEMM leaves set and the next one clears).
 * Off by default. */
FAKECUBLAS_API void fakecublas_set_heuristics(int on);
/* Under heuristics, a GEMM with k above this leaves its handle's workspace semaphore set. */
#define FAKECUBLAS_SPLIT_K 16

/* Each call of a computing function spends `us` of the library's own host time through `work`
 * (NULL: none) before any driver call, as the real library's argument checks and heuristics take
 * 2-6 us: a test on the fake clock (tests/common/fake_clock.h) passes host_work. */
FAKECUBLAS_API void fakecublas_set_host_work(void (*work)(double us), double us);

/* Reset the three counters above. */
FAKECUBLAS_API void fakecublas_reset(void);

/* Bytes of the workspace cublasCreate_v2 allocates (cuMemAlloc_v2); cublasSetWorkspace_v2 wants
 * at least FAKECUBLAS_MIN_WORKSPACE bytes, 256-byte aligned. */
#define FAKECUBLAS_WORKSPACE_BYTES 4096
#define FAKECUBLAS_MIN_WORKSPACE 256

#ifdef __cplusplus
}
#endif
#endif /* FAKECUBLAS_H */
