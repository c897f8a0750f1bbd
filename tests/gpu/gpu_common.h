/*
 * gpu_common.h — what the GPU test programs gpu_scenarios.cu and gpu_libs.cu share: problem
 * reporting and the FAIL line of a fatal error, the checks of CUDA and library calls
 * (tests/common/cuda_check.h, ending the scenario), the initial data, the comparison of eager
 * and traced steps' results, the cgj_stats line, the GPU's description and the command line
 * `PROGRAM SCENARIO`.
 *
 * Included once by each program (CUDA C++): it defines the program's problem state.
 * GPU_CUDA_FAIL_SUMMARY, where the program defines it before the include, is what the FAIL line
 * of a failed checked call says after the scenario's name; by default the error message itself.
 */
#ifndef CGJ_GPU_COMMON_H
#define CGJ_GPU_COMMON_H

#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgjit.h"

#ifndef GPU_CUDA_FAIL_SUMMARY
#define GPU_CUDA_FAIL_SUMMARY NULL
#endif

enum { MAX_REPORTED = 12 }; /* problems printed; further ones are only counted */

static const char *scenario_name = "?";
static int problems;
static char first_problem[512]; /* repeated on the FAIL line */

/* A problem: printed at once (the first MAX_REPORTED), counted always. */
static inline void problem(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (++problems <= MAX_REPORTED) printf("error: %s\n", msg);
    else if (problems == MAX_REPORTED + 1) printf("error: (further problems counted, not printed)\n");
    if (problems == 1) memcpy(first_problem, msg, sizeof msg);
}

/* The end of a scenario that cannot go on: `error: <msg>`, then `FAIL <scenario> <summary>`
 * (summary NULL: the message), exit status 1. */
static inline void fail_exit(const char *msg, const char *summary)
{
    printf("error: %s\n", msg);
    printf("FAIL %s %s\n", scenario_name, summary ? summary : msg);
    fflush(stdout);
    exit(1);
}

/* A failed CHECK, CHECK_CUBLAS or CHECK_CUDNN (cuda_check.h) ends the scenario:
 * `error: file:line: call: what (detail)`, then the FAIL line. */
static inline void fatal_call(const char *file, int line, const char *call, const char *what, const char *detail)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s:%d: %s: %s (%s)", file, line, call, what, detail);
    fail_exit(msg, GPU_CUDA_FAIL_SUMMARY);
}

#define CUDA_CHECK_FAIL fatal_call
#include "../common/cuda_check.h"

/* Grid-stride loop: any grid computes the same values. */
#define FOR_EACH(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

/* The initial data: n floats, uniform in [-1, 1), the same on every run. */
static inline void random_init(float *init, size_t n)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
    rng_fill_uniform(init, n, &seed, -1.0f, 1.0f);
}

/* The index of the first float that differs bitwise between a and b; n where none does. */
static inline size_t first_difference(const float *a, const float *b, size_t n)
{
    size_t i = 0;
    while (i < n && !memcmp(&a[i], &b[i], sizeof(float))) i++;
    return i;
}

/* Eager step k left its n floats at results + k * n (what: "result", "outputs"): a step that
 * changes nothing would let a replay that does nothing pass. */
static inline void expect_step_changes(const float *results, int k, size_t n, const char *what)
{
    if (k > 0 && !memcmp(results + k * n, results + (k - 1) * n, n * sizeof(float)))
        problem("eager step %d left the %s unchanged: the scenario tests nothing", k, what);
}

/* Traced step k's n floats (got) against eager step k's (want): a step that differs is counted in
 * *differing; for the first one, the index of its first differing float is returned, for the
 * program to report; n otherwise. */
static inline size_t compare_step(const float *want, const float *got, size_t n, int *differing)
{
    if (!memcmp(want, got, n * sizeof(float)) || (*differing)++ > 0) return n;
    return first_difference(want, got, n);
}

/* After the traced steps: the problem of those that differed from eager, if any. */
static inline void report_differing(int differing, int steps)
{
    if (differing) problem("%d of %d traced steps differ from eager", differing, steps);
}

/* The line `stats: <field>=<value> ...` of every cgj_stats counter. */
static inline void print_stats(const cgj_stats_t *st)
{
    printf("stats:");
#define STATS_PRINT(field, doc) printf(" %s=%llu", #field, (unsigned long long)st->field);
    CGJ_STATS_LIST(STATS_PRINT)
#undef STATS_PRINT
    printf("\n");
}

/* "GPU <name> (sm_XY), CUDA driver X.Y" for the program's first line. */
static inline void describe_gpu(char *buf, size_t len)
{
    int dev, driver;
    cudaDeviceProp prop;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaDriverGetVersion(&driver));
    snprintf(buf, len, "GPU %s (sm_%d%d), CUDA driver %d.%d", prop.name, prop.major, prop.minor, driver / 1000,
             driver % 1000 / 10);
}

/* The scenario that the command line `argv[0] SCENARIO` names, as an index below n (name(i):
 * the i-th scenario's name). On success scenario_name is set and stdout is line-buffered, so that
 * a crash still leaves everything printed so far. Otherwise, -1 after the usage on stderr
 * (`usage: argv[0] <syntax>` and the scenarios): the program exits with status 2. */
static inline int scenario_arg(int argc, char **argv, const char *syntax, const char *(*name)(int), int n)
{
    int found = -1;
    if (argc == 2) {
        for (int i = 0; i < n; i++)
            if (!strcmp(argv[1], name(i))) found = i;
        if (found < 0) fprintf(stderr, "%s: unknown scenario %s\n", argv[0], argv[1]);
    }
    if (found < 0) {
        fprintf(stderr, "usage: %s %s\nscenarios:", argv[0], syntax);
        for (int i = 0; i < n; i++) fprintf(stderr, " %s", name(i));
        fprintf(stderr, "\n");
        return -1;
    }
    scenario_name = name(found);
    setvbuf(stdout, NULL, _IOLBF, 0);
    return found;
}

#endif /* CGJ_GPU_COMMON_H */
