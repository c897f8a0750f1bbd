/*
 * test_libs_chunks.c — a library's own host time ends replay's chunks, as the program's does.
 *
 * By default the library runs on every call at replay, so its host time (argument checks,
 * heuristics: 2-6 us a call for cuBLAS) recurs between the step's calls. A step made mostly of
 * library calls (llm.c's trainer: 75 a step) spends most of its host time there; a chunk that
 * ended only after CGJIT_CHUNK_OPS ops left the GPU idle while the host went through two thirds
 * of the step. The fake cuBLAS spends a known time per call on the fake clock
 * (fakecublas_set_host_work), and replay's chunks must end where that time adds up to
 * CGJIT_CHUNK_US, never inside a library call's group; under CGJIT_LIBS_LEARNED=1 the library
 * does not run at replay, and its time ends no chunk. Results equal eager execution throughout.
 */
#define _GNU_SOURCE /* dladdr, in fake_clock.h */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_clock.h"
#include "fakeapp.h"
#include "fakecublas.h"

enum { STEPS = 20, GEMMS = 6, M = 8, K = 4 };

static fk_t fk;
static cublasHandle_t g_h;

static void setup(void)
{
    setenv("CGJIT_CHUNK_US", "50", 1);
    fk_open(&fk);
    fake_clock_start(NULL);
    cr_assert_eq(cublasCreate_v2(&g_h), CUBLAS_STATUS_SUCCESS);
    fakecublas_set_host_work(host_work, 30); /* each GEMM: 30 us of the library's own */
}

static void learned_setup(void)
{
    setenv("CGJIT_LIBS_LEARNED", "1", 1);
    setup();
}

TestSuite(runtime_libs_chunks, .init = setup);
TestSuite(runtime_libs_chunks_learned, .init = learned_setup);

typedef struct {
    CUdeviceptr a, b, c[GEMMS];
} bufs_t;

static void bufs_init(bufs_t *b)
{
    b->a = fk_alloc_floats(&fk, M * K, 1);
    b->b = fk_alloc_floats(&fk, K * M, 2);
    for (int i = 0; i < GEMMS; i++) b->c[i] = fk_alloc_floats(&fk, M * M, 3 + i);
}

/* One step, no host work of the program's own: each GEMM writes its C, a kernel scales it. */
static void step(const bufs_t *b, int s)
{
    const float alpha = 1.0f + (float)(s % 3), beta = 0.0f;
    for (int i = 0; i < GEMMS; i++) {
        cr_assert_eq(cublasSgemm_v2(g_h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, K, &alpha, (const float *)(uintptr_t)b->a, M,
                                    (const float *)(uintptr_t)b->b, K, &beta, (float *)(uintptr_t)b->c[i], M),
                     CUBLAS_STATUS_SUCCESS);
        cr_assert_eq(fk_axpb_launch(&fk, NULL, b->c[i], 0.5f, (float)i, M * M, 1), CUDA_SUCCESS);
    }
}

/* STEPS steps untraced and STEPS marked ones on buffers of their own, compared after each; the
 * marked step's figures. */
static cgj_trace_info_t run_both(void)
{
    bufs_t e, t;
    bufs_init(&e);
    bufs_init(&t);
    for (int s = 0; s < STEPS; s++) {
        step(&e, s);
        cr_assert_eq(cgj_trace_begin("gemms"), CGJ_OK);
        step(&t, s);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        cr_assert_eq(fk.ctx_sync(), CUDA_SUCCESS);
        for (int i = 0; i < GEMMS; i++) {
            float he[M * M], ht[M * M];
            cr_assert_eq(fk.dtoh(he, e.c[i], sizeof he), CUDA_SUCCESS);
            cr_assert_eq(fk.dtoh(ht, t.c[i], sizeof ht), CUDA_SUCCESS);
            cr_assert(!memcmp(he, ht, sizeof he), "step %d, GEMM %d: results differ from eager", s, i);
        }
    }
    cgj_trace_info_t info;
    memset(&info, 0, sizeof info);
    cr_assert_eq(cgj_trace_info("gemms", &info), CGJ_OK);
    cr_assert_geq(info.replays, STEPS - 3, "%llu of %d steps replayed", (unsigned long long)info.replays, STEPS);
    return info;
}

Test(runtime_libs_chunks, the_library_s_host_time_ends_chunks)
{
    /* 30 us a GEMM, chunks of 50 us: one ends after every second GEMM's group (its LIB op and
     * the kernel the library launched: ops 1-5, 6-11, 12-17 as the report counts), never inside
     * one; the program's last kernel is a chunk of its own (nothing says how long the host works
     * after it). */
    cgj_trace_info_t info = run_both();
    char *buf = fk_report_text();
    cr_assert(buf);
    cr_assert_eq(info.segments, 4, "%u segments:\n%s", info.segments, buf);
    for (int at = 5; at <= 17; at += 6) {
        char want[64];
        snprintf(want, sizeof want, "ends at op %d: cuLaunchKernel (host work before the next call", at);
        cr_assert(strstr(buf, want), "no chunk %s:\n%s", want, buf);
    }
    free(buf);
}

Test(runtime_libs_chunks, a_library_without_host_time_ends_none)
{
    fakecublas_set_host_work(NULL, 0);
    cr_assert_eq(run_both().segments, 1);
}

Test(runtime_libs_chunks_learned, a_library_absorbed_whole_ends_none)
{
    /* Absorbed whole, the library does not run at replay: its recorded time is not spent. */
    cr_assert_eq(run_both().segments, 1);
}
