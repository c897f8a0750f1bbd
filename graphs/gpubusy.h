/*
 * gpubusy.h — how long the GPU was busy with each replayed step (CGJIT_BUSY=1).
 *
 * Replay takes the host's time out of a step; what is left is the GPU's own work and the gaps
 * between it. Knowing the GPU-busy time of a step tells a user how much is left for graphs to
 * take (replay time minus busy time) and how much only faster kernels can take (the busy time).
 *
 * The figure comes from CUPTI's activity API, loaded with dlopen when the option is on: the
 * kernels, copies and memsets the GPU ran, each with its start and end on the GPU's clock and
 * the correlation id of the driver call that launched it. A replayed step pushes an external
 * correlation id (the anchor's id and the step's serial) for its thread while it runs, so every
 * launch it makes (its graphs, and the calls it issues eagerly) carries it; the records of one
 * step are merged into the union of their intervals (work on several streams that overlaps
 * counts once), and the anchor keeps the sum and the number of steps.
 *
 * The accounting (cgj_gpubusy_note_*) is separate from CUPTI so that it can be tested on a
 * machine without a GPU.
 */
#ifndef CGJ_GPUBUSY_H
#define CGJ_GPUBUSY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Is CGJIT_BUSY on and CUPTI enabled? The first call loads CUPTI and enables its activity
 * records; where that fails it says why once on stderr and measures nothing. */
bool cgj_gpubusy_on(void);
/* An id for an anchor's figures (1 to CGJ_GPUBUSY_MAX_IDS - 1; 0: none left). */
uint32_t cgj_gpubusy_id(void);
/* The calling thread's launches from now until cgj_gpubusy_pop belong to step `serial` of id. */
void cgj_gpubusy_push(uint32_t id, uint64_t serial);
void cgj_gpubusy_pop(void);
/* The GPU-busy time of id's steps so far: the sum of each step's busy time, and the number of
 * steps measured (records still in CUPTI's buffers are fetched first). False if none. */
bool cgj_gpubusy_figures(uint32_t id, uint64_t *busy_ns, uint64_t *steps);
/* What CUPTI's records said so far, in words (the report's CGJIT_BUSY line). */
const char *cgj_gpubusy_describe(char *buf, size_t len);
/* Why nothing is measured ("" if it is, or the option is off). */
const char *cgj_gpubusy_status(void);

#define CGJ_GPUBUSY_MAX_IDS 4096

/* The accounting, fed by CUPTI's records in whatever order its buffers complete (and by tests):
 * the external id a driver call's correlation id carries, a driver call's own record (after
 * its external id's, if any: a call with none before it carries none), and a piece of GPU work
 * [start, end) launched by a call. Work of a call that carries no external id is not counted;
 * work of a call not known yet waits for it (cgj_gpubusy_resolve, after each buffer). */
void cgj_gpubusy_note_external(uint32_t correlation, uint64_t external);
void cgj_gpubusy_note_call(uint32_t correlation);
void cgj_gpubusy_note_work(uint32_t correlation, uint64_t start, uint64_t end);
void cgj_gpubusy_resolve(void);
/* Forget everything (tests). */
void cgj_gpubusy_reset(void);

#endif /* CGJ_GPUBUSY_H */
