/*
 * bench_modes.h — cgjit's modes as cgjit-bench runs them (--modes), and the check of a replayed
 * result against eager that each mode promises.
 *
 * Every workload runs once per mode, side by side in one process, under an anchor of its own
 * ("chain1000@default"): the bench calls cgj_mode_set before the row's first step, and the mode
 * stays set until the row (warm-up, timed rounds, checks, GPU-busy windows) is done, so the
 * row's traces, variants included, are built in that mode.
 *
 * The check: in reduce-overhead replay runs the kernels eager ran, so the results must be
 * bitwise equal. In default and max-autotune cgjit may fuse elementwise kernels into generated
 * ones, so each element must be within BENCH_ABS_TOL + BENCH_REL_TOL * |eager| of eager (NaN
 * where eager has NaN, the same infinity where eager has one), and bitwise equal where the trace
 * fused nothing; where it made GEMMs cuBLASLt matmuls, normwise (BENCH_GEMM_REL_TOL). The comparison says whether it
 * was bitwise and, where not, how much of the tolerance the worst element used.
 */
#ifndef CGJ_BENCH_MODES_H
#define CGJ_BENCH_MODES_H

#include <stddef.h>
#include <stdint.h>

#include "cgjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The modes in the order the bench runs them by default (cgjit.h, cgj_mode_set). */
enum { BM_REDUCE_OVERHEAD, BM_DEFAULT, BM_MAX_AUTOTUNE, BM_COUNT };
extern const char *const bench_mode_names[BM_COUNT];

/* The tolerance of the fusing modes, per element (cgjit.h). */
#define BENCH_REL_TOL 1e-5
#define BENCH_ABS_TOL 1e-6
/* Where the trace made GEMMs cuBLASLt matmuls (another summation order, through every later
 * layer), normwise: |replay - eager| <= BENCH_ABS_TOL + BENCH_GEMM_REL_TOL max |eager|. */
#define BENCH_GEMM_REL_TOL 1e-4

/* Parse --modes: names of bench_mode_names, comma-separated, each at most once. 0, or -1 for an
 * unknown, repeated or empty item. */
int bench_modes_parse(const char *list, int *modes, int *n);
/* cgj_mode_set(mode); the bench ends (status 1) if cgjit refuses it. */
void bench_mode_enter(int mode);
/* Does the mode fuse (default, max-autotune)? */
int bench_mode_fuses(int mode);
/* The anchor of workload row `base` in `mode`: "base@mode". */
void bench_anchor_name(char *buf, size_t cap, const char *base, int mode);

typedef struct bench_cmp {
    int bitwise;  /* every byte equal */
    double used;  /* max over elements of |got - eager| / (abs + rel |eager|): <= 1 within the
                   * tolerance; INFINITY for a NaN or infinity where eager has none */
    size_t worst; /* the element where `used` is largest */
    size_t first; /* the first element that differs (bitwise); n when none does */
} bench_cmp_t;

/* Compare got with eager, n floats: per element, or (normwise > 0) against normwise times the
 * largest eager magnitude. */
void bench_compare(const float *eager, const float *got, size_t n, double normwise, bench_cmp_t *c);
/* Does the comparison pass the mode's check: bitwise in reduce-overhead and where the trace fused
 * no chain, within the tolerance otherwise? */
int bench_cmp_ok(const bench_cmp_t *c, int mode, uint32_t fused_chains);
/* A table cell: "bitwise", or "tol 0.031" (the share of the tolerance the worst element used). */
const char *bench_cmp_cell(char *buf, size_t cap, const bench_cmp_t *c);
/* A table cell: fused chains / the kernels and library calls they hold ("2/5") in a fusing mode,
 * "-" in reduce-overhead. */
const char *bench_fused_cell(char *buf, size_t cap, int mode, const cgj_trace_info_t *i);
/* One line on stdout where a row's trace left chains or registered kernels unfused: how many, the
 * last one's reason code and what to do about it. Nothing otherwise. */
void bench_fuse_note(const char *anchor, const cgj_trace_info_t *i);
/* One line on stderr for a failed check: where, and by how much. */
void bench_cmp_complain(const char *anchor, const char *what, int mode, uint32_t fused_chains, const bench_cmp_t *c,
                        const float *eager, const float *got);

#ifdef __cplusplus
}
#endif
#endif /* CGJ_BENCH_MODES_H */
