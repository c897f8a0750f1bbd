/*
 * test_faults.c — a failure injected at every driver function a step's work reaches (the
 * program's own calls and cgjit's: capture, instantiation, graph launch, parameter patches,
 * staging waits, pool mapping) and at every position of a step that uses every feature
 * (a pool allocation, a staged copy, a memset, kernels, an event, a cross-stream wait, a
 * device copy, a free, an allocation that escapes the step, a cuBLAS call through the fake
 * cuBLAS). For each function x position x step (the build step and a replayed
 * one): every program call that fails returns exactly the injected error, and every step in
 * which no call failed leaves memory bitwise equal to eager. The figures are printed.
 */
#include "replay_common.h"

#include <cublas_v2.h>

#include "fakecublas.h"

TestSuite(tracer_faults, .init = setup);

#define INJECTED CUDA_ERROR_NOT_PERMITTED
enum { CALLS = 12, STEPS = 6 };

static const char *const apis[] = {
    "cuMemAlloc_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemsetD32Async",
    "cuLaunchKernel",
    "cuEventRecord",
    "cuEventRecordWithFlags",
    "cuStreamWaitEvent",
    "cuMemcpyDtoDAsync_v2",
    "cuMemFree_v2",
    "cuGraphLaunch",
    "cuGraphExecKernelNodeSetParams_v2",
    "cuStreamSynchronize",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags",
    "cuGraphUpload",
    "cuStreamGetCaptureInfo_v3",
    "cuGraphKernelNodeGetParams_v2",
    "cuStreamCreate",
    "cuEventCreate",
    "cuMemCreate",
    "cuMemMap",
    "cuMemSetAccess",
    "cuMemAddressReserve",
    "cuMemHostAlloc",
    "cuPointerGetAttribute",
    "cuCtxSynchronize",
    "cuMemcpyDtoH_v2",
};
enum { NAPIS = sizeof apis / sizeof apis[0] };

typedef struct trial {
    CUstream s1, s2;
    CUevent ev;
    cublasHandle_t blas;
    CUdeviceptr escaped; /* the step's escaping allocation, freed by the program after the step */
    const char *api;     /* failed once, before call `at` of step `step` of the traced half */
    int at, step;
} trial_t;

/* The step, as a careful program writes it: it stops at its first failing call and returns
 * that call's error. */
static CUresult fault_step(int s, CUdeviceptr *b, trial_t *tr, bool traced)
{
    const float half = 0.5f;
    static float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)(s * 3 + i);
    CUdeviceptr tmp = 0;
    CUresult r = CUDA_SUCCESS;
    for (int call = 0; call < CALLS && r == CUDA_SUCCESS; call++) {
        if (traced && s == tr->step && call == tr->at) fk.fail_next(tr->api, INJECTED);
        switch (call) {
        case 0: r = fk.mem_alloc(&tmp, N * sizeof(float)); break;
        case 1: r = fk.htod_async(tmp, host, sizeof host, tr->s1); break;
        case 2: r = fk.memset32_async(b[1], 0x3f800000u, N, tr->s1); break;
        case 3: r = fk_axpb_launch(&fk, tr->s1, b[0], 0.5f, (float)s, N, 1); break;
        case 4: r = fk_copyscale_launch(&fk, tr->s1, b[0], tmp, 0.25f, N); break;
        case 5: r = fk.event_record(tr->ev, tr->s1); break;
        case 6: r = fk.stream_wait(tr->s2, tr->ev, 0); break;
        case 7: r = fk.dtod_async(b[1], b[0], N * sizeof(float), tr->s2); break;
        case 8: r = fk.mem_free(tmp); break;
        case 9: r = fk.mem_alloc(&tr->escaped, N * sizeof(float)); break; /* escapes the step */
        case 10: r = fk.dtod_async(tr->escaped, b[1], N * sizeof(float), tr->s2); break;
        case 11:
            r = cublasSscal_v2(tr->blas, N, &half, (float *)(uintptr_t)b[1], 1) == CUBLAS_STATUS_SUCCESS
                  ? CUDA_SUCCESS
                  : INJECTED; /* the fake cuBLAS fails with the driver's error: that one */
            break;
        }
    }
    if (traced && s == tr->step && tr->at == CALLS) fk.fail_next(tr->api, INJECTED); /* at the end */
    return r;
}

typedef struct figures {
    int trials, injected_reached, failures_returned, wrong_errors, mismatches, steps_compared;
} figures_t;

/* One trial: STEPS steps eager and traced (a fresh anchor), the failure in one of them. */
static void run_trial(trial_t *tr, figures_t *f, int id)
{
    char name[48];
    snprintf(name, sizeof name, "faults%d", id);
    bufs_t b;
    bufs_alloc(&b, 2);
    for (int s = 0; s < STEPS; s++) {
        tr->escaped = 0;
        cr_assert_eq(fault_step(s, b.e, tr, false), CUDA_SUCCESS);
        cr_assert_eq(fk.ctx_sync(), CUDA_SUCCESS);
        float esc_e[N], esc_t[N];
        cr_assert_eq(fk.dtoh(esc_e, tr->escaped, sizeof esc_e), CUDA_SUCCESS);
        cr_assert_eq(fk.mem_free(tr->escaped), CUDA_SUCCESS);
        tr->escaped = 0;
        cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
        CUresult r = fault_step(s, b.t, tr, true);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        CUresult rs = fk.ctx_sync(); /* an error of re-issued work surfaces here at the latest */
        if (r == CUDA_SUCCESS && rs == CUDA_SUCCESS) {
            CUresult rc = fk.dtoh(esc_t, tr->escaped, sizeof esc_t);
            if (rc == CUDA_SUCCESS && memcmp(esc_e, esc_t, sizeof esc_e)) {
                f->mismatches++;
                cr_log_error("%s before call %d of step %d: step %d, the escaping block differs", tr->api, tr->at,
                             tr->step, s);
            }
            if (rs == CUDA_SUCCESS) rs = rc;
        }
        if (tr->escaped) (void)fk.mem_free(tr->escaped); /* the program lets its output go */
        if (s == tr->step) f->injected_reached += fk.fail_pending() == 0, fk.fail_clear();
        CUresult err = r != CUDA_SUCCESS ? r : rs;
        if (err != CUDA_SUCCESS) {
            f->failures_returned++;
            if (err != INJECTED) {
                f->wrong_errors++;
                cr_log_error("%s before call %d of step %d: a call returned %d", tr->api, tr->at, s, (int)err);
            }
            return; /* the program stops here; eager and traced no longer did the same */
        }
        f->steps_compared++;
        for (int i = 0; i < b.n; i++) {
            float he[N], ht[N];
            cr_assert_eq(fk.dtoh(he, b.e[i], sizeof he), CUDA_SUCCESS);
            cr_assert_eq(fk.dtoh(ht, b.t[i], sizeof ht), CUDA_SUCCESS);
            if (memcmp(he, ht, sizeof he)) {
                f->mismatches++;
                cr_log_error("%s before call %d of step %d: step %d, buffer %d differs with no call failing", tr->api,
                             tr->at, tr->step, s, i);
            }
        }
    }
}

Test(tracer_faults, every_function_every_position, .timeout = 300)
{
    trial_t tr = {0};
    OK(fk.stream_create(&tr.s1, CU_STREAM_NON_BLOCKING));
    OK(fk.stream_create(&tr.s2, CU_STREAM_NON_BLOCKING));
    OK(fk.event_create(&tr.ev, CU_EVENT_DISABLE_TIMING));
    cr_assert_eq(cublasCreate_v2(&tr.blas), CUBLAS_STATUS_SUCCESS);
    fakecublas_reset(); /* a call of the fake's own keeps it linked ahead of any real cuBLAS */
    figures_t f = {0};
    static const int steps[] = {1, 4}; /* the run that builds the trace, a replayed run */
    int id = 0;
    for (int a = 0; a < NAPIS; a++)
        for (int k = 0; k < 2; k++)
            for (int at = 0; at <= CALLS; at++) {
                tr.api = apis[a], tr.at = at, tr.step = steps[k];
                run_trial(&tr, &f, id++);
                f.trials++;
            }
    cr_log_info("fault injection: %d functions x %d positions x 2 steps = %d trials; the failure reached a call "
                "in %d; %d failures returned to the program (%d with another error); %d steps compared, %d "
                "mismatches",
                NAPIS, CALLS + 1, f.trials, f.injected_reached, f.failures_returned, f.wrong_errors, f.steps_compared,
                f.mismatches);
    printf("fault injection: %d trials, %d reached, %d failures returned, %d wrong errors, %d steps compared, "
           "%d mismatches\n",
           f.trials, f.injected_reached, f.failures_returned, f.wrong_errors, f.steps_compared, f.mismatches);
    cr_assert_eq(f.mismatches, 0);
    cr_assert_eq(f.wrong_errors, 0);
    cr_assert_gt(stats_now().steps_replayed, (unsigned long long)f.trials, "the trials' steps replay");
    cr_assert_gt(f.failures_returned, 0);
}
