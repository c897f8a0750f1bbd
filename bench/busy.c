/*
 * busy.c — windows of replayed steps under CUPTI: the GPU-busy floor of a step (busy.h).
 *
 * Why in windows of their own: recording activity adds work per kernel on the host and the GPU,
 * so the windows run after a workload's timed rounds (which ran with CUPTI detached) and CUPTI is
 * detached again before the next workload's. Why checked: CUPTI calls driver functions too, some
 * of them through cgjit's wrappers; a window counts only if every one of its steps was replayed,
 * as in the timed rounds (cgj_trace_info's replays grew by the window's steps), and only if CUPTI
 * saw at least as many records as the replayed trace launches kernels (a graph whose kernels
 * CUPTI did not follow would make the floor look lower than it is). In modes that fuse, a fused
 * chain's kernels stay in the trace but launch as one generated kernel or cuBLASLt matmul (at
 * least one kernel): the trace launches at least kernels - fused_ops + fused_chains (fused_ops:
 * the kernel launches the chains replace).
 */
#include "busy.h"
#include "cupti_busy.h"

#include "cgjit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOWS = 3 };

static char unavailable[256]; /* why CUPTI cannot be used; "" while it can */

int bench_busy_available(const char **why)
{
    if (why) *why = unavailable;
    return unavailable[0] == '\0';
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What cgjit knows of `anchor` (zeros where it knows nothing). */
static cgj_trace_info_t info(const char *anchor)
{
    cgj_trace_info_t i;
    if (cgj_trace_info(anchor, &i) != CGJ_OK) memset(&i, 0, sizeof i);
    return i;
}

/* One window: busy µs per step, or < 0 with the reason in why; *records: CUPTI's records per
 * step. *cupti_failed: CUPTI itself failed. */
static double window(bench_step_fn step, void *arg, int steps, cudaStream_t s, double *records_per_step,
                     int *cupti_failed, char *why, size_t len)
{
    *cupti_failed = bench_busy_begin(why, len) != 0;
    if (*cupti_failed) return -1.0;
    for (int i = 0; i < steps; i++) step(arg, s);
    cudaError_t e = cudaStreamSynchronize(s);
    uint64_t ns = 0, records = 0;
    int rc = bench_busy_end(&ns, &records, why, len);
    if (e != cudaSuccess) {
        fprintf(stderr, "cgjit-bench: cudaStreamSynchronize: %s\n", cudaGetErrorName(e));
        exit(1);
    }
    if (rc != 0) return -1.0;
    *records_per_step = (double)records / steps;
    return (double)ns / 1e3 / steps;
}

double bench_busy_floor(const char *anchor, bench_step_fn step, void *arg, int steps, cudaStream_t s)
{
    if (unavailable[0]) return -1.0;
    double v[WINDOWS], records = 0, fewest = 1e300;
    char why[256] = "";
    int n = 0, cupti_failed = 0;
    uint64_t before = info(anchor).replays;
    while (n < WINDOWS && (v[n] = window(step, arg, steps, s, &records, &cupti_failed, why, sizeof why)) >= 0) {
        fewest = records < fewest ? records : fewest;
        n++;
    }
    bench_busy_detach();
    cgj_trace_info_t after = info(anchor);
    uint64_t replayed = after.replays - before;
    if (cupti_failed) {
        snprintf(unavailable, sizeof unavailable, "%s", why);
        printf("cgjit-bench: no GPU-busy figures: CUPTI cannot be used here (%s)\n", why);
        return -1.0;
    }
    if (n < WINDOWS) {
        printf("cgjit-bench: %s: GPU-busy n/a: %s\n", anchor, why);
        return -1.0;
    }
    if (replayed != (uint64_t)WINDOWS * steps) {
        printf("cgjit-bench: %s: GPU-busy n/a: %llu of the %d steps measured were replayed\n", anchor,
               (unsigned long long)replayed, WINDOWS * steps);
        return -1.0;
    }
    uint32_t launched = after.kernels - (after.fused_ops <= after.kernels ? after.fused_ops : after.kernels) +
                        after.fused_chains;
    if (fewest < (double)launched) {
        printf("cgjit-bench: %s: GPU-busy n/a: CUPTI recorded %.1f kernels, copies and memsets per step, the "
               "replayed trace launches %u kernels\n",
               anchor, fewest, launched);
        return -1.0;
    }
    qsort(v, WINDOWS, sizeof v[0], cmp_double);
    return v[WINDOWS / 2];
}
