/*
 * busy.h — the physical floor of a replayed step: its GPU-busy time, measured with CUPTI
 * (cupti_busy.h) in windows of replayed steps of their own, after the timed rounds (busy.c).
 */
#ifndef CGJ_BENCH_BUSY_H
#define CGJ_BENCH_BUSY_H

#include <cuda_runtime.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One replayed step of a workload (between cgj_trace_begin and cgj_trace_end), issued on s. */
typedef void (*bench_step_fn)(void *arg, cudaStream_t s);

/* GPU-busy microseconds per replayed step of the trace `anchor`: the median over a few windows
 * of `steps` steps each. < 0 where it cannot be measured: once, when CUPTI cannot be used in this
 * process, one line says why (and bench_busy_available() is 0 from then on); otherwise one line
 * names the anchor and the reason (records dropped, a step of the window not replayed whole). */
double bench_busy_floor(const char *anchor, bench_step_fn step, void *arg, int steps, cudaStream_t s);

/* 1 until CUPTI turned out unusable; then 0 and why says so (NULL: not wanted). */
int bench_busy_available(const char **why);

#ifdef __cplusplus
}
#endif
#endif /* CGJ_BENCH_BUSY_H */
