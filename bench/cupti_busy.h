/*
 * cupti_busy.h — how long the GPU was busy during a window of host code: the physical floor of
 * a step, measured with CUPTI's activity API (cupti_busy.c).
 *
 * Busy time is the union of the intervals in which a kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
 * a copy (MEMCPY) or a memset (MEMSET) ran, so that kernels that overlap are counted once and
 * the gaps between them (launch latency, graph node scheduling) are not counted at all. No
 * launch mechanism, eager, graph or cgjit's replay, can bring a step below it.
 *
 * CUPTI is attached only for a measurement: bench_busy_begin() attaches it and enables the three
 * kinds, bench_busy_end() disables them, flushes the records and sums the union, and
 * bench_busy_detach() detaches CUPTI from the process (cuptiFinalize), so that the timed rounds
 * of every workload run without it. Recording activity costs GPU and host time per kernel: the
 * caller measures busy time in runs of its own, never in timed ones.
 */
#ifndef CGJ_BENCH_CUPTI_BUSY_H
#define CGJ_BENCH_CUPTI_BUSY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Attach CUPTI if needed and start recording. 0, or -1 with the reason in why (CUPTI missing,
 * refused under compute-sanitizer or another profiler, ...); after a failure CUPTI is not
 * tried again in this process and every later call fails with the same reason. */
int bench_busy_begin(char *why, size_t len);

/* Stop recording; *busy_ns is the union of the activity intervals since bench_busy_begin and
 * *records the number of records. The caller synchronizes the GPU first (the work of the window
 * must be done). 0, or -1 with the reason in why (records dropped, a CUPTI error). */
int bench_busy_end(uint64_t *busy_ns, uint64_t *records, char *why, size_t len);

/* Detach CUPTI from the process (after bench_busy_end; harmless when not attached). */
void bench_busy_detach(void);

#ifdef __cplusplus
}
#endif
#endif /* CGJ_BENCH_CUPTI_BUSY_H */
