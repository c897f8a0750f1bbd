/*
 * nvtx.h — cgjit's own work on a profiler's timeline (Nsight Systems), as NVTX ranges and marks
 * in the domain "cgjit" (CGJIT_NVTX=1).
 *
 * Each range is pushed and popped on the thread that does the work, named "<what> <anchor>"
 * with the report's anchor name; its category and colour are the kind of work
 * (CGJ_NVTX_KIND_LIST), and where a number says more (a segment, an op) it is the range's
 * payload. A name is registered once per thread, kind and anchor (a small cache of string
 * handles), so that a replayed segment's range passes a handle, not text, to the profiler.
 * Ranges nest: a build inside the recording that ends with it, a graph's instantiation inside
 * its build. The kinds that last a whole step (a recording, an eager probe) are opened and
 * closed through cgj_nvtx_step_open/close: at most one per thread, closed at most once (a
 * step's range still open when the next one opens is closed first).
 *
 * Off (the default), every hook is one load and one predictable branch: `if (cgj_nvtx_on)`;
 * nothing of NVTX runs and no injection library is looked for. On, the NVTX3 calls reach
 * whatever profiler injected itself (NVTX_INJECTION64_PATH); with none, each is a call that
 * returns at once.
 */
#ifndef CGJ_NVTX_H
#define CGJ_NVTX_H

#include "base/cgj_base.h"

/* X(NAME, "what", ARGB): the kinds of cgjit's work on the timeline, the first word of each name
 * (and its category's name), and its colour. */
/* clang-format off */
#define CGJ_NVTX_KIND_LIST(X)                                                                                \
    X(RECORD, "record", 0xffe0a030)           /* a step run recorded (RECORD mode), to its end */             \
    X(BUILD, "build", 0xffc04040)             /* a recording made a trace: memory plan, graphs (build.c) */   \
    X(INSTANTIATE, "instantiate", 0xffa03060) /* one segment captured and instantiated (graphs/graph.c) */    \
    X(LAUNCH, "replay", 0xff40a040)           /* a replayed segment's patches and graph launch */             \
    X(PROBE, "probe", 0xff4070c0)             /* an eager probe of a replaying anchor, to its end (cost.c) */ \
    X(EXIT, "side exit", 0xffd04080)          /* leaving a replay: absorbed work re-issued eagerly */         \
    X(GOVERN, "governor", 0xff808080)         /* the governor's switches between active and dormant (marks) */
/* clang-format on */

typedef enum cgj_nvtx_kind {
#define CGJ_NVTX_KIND_ENUM(name, what, argb) CGJ_NVTX_##name,
    CGJ_NVTX_KIND_LIST(CGJ_NVTX_KIND_ENUM)
#undef CGJ_NVTX_KIND_ENUM
        CGJ_NVTX_KIND_COUNT
} cgj_nvtx_kind_t;

#define CGJ_NVTX_NO_NUMBER (-1) /* a range or mark that carries no number */

/* Written once by cgj_nvtx_init, before any step; read by every hook. */
extern bool cgj_nvtx_on;

/* CGJIT_NVTX=1: the domain, its categories and fixed strings are registered (the profiler's
 * injection library, if any, is loaded here) and the hooks are on. */
void cgj_nvtx_init(void);

void cgj_nvtx_push_slow(cgj_nvtx_kind_t kind, const char *anchor, int64_t number);
void cgj_nvtx_pop_slow(void);
void cgj_nvtx_mark_slow(cgj_nvtx_kind_t kind, const char *what, int64_t number);
void cgj_nvtx_step_open_slow(cgj_nvtx_kind_t kind, const char *anchor);
void cgj_nvtx_step_close_slow(cgj_nvtx_kind_t kind);

/* A range of `kind` for `anchor` (NULL: none), with `number` (CGJ_NVTX_NO_NUMBER: none), pushed
 * on this thread; cgj_nvtx_pop ends the innermost one. */
static inline void cgj_nvtx_push(cgj_nvtx_kind_t kind, const char *anchor, int64_t number)
{
    if (CGJ_UNLIKELY(cgj_nvtx_on)) cgj_nvtx_push_slow(kind, anchor, number);
}
static inline void cgj_nvtx_pop(void)
{
    if (CGJ_UNLIKELY(cgj_nvtx_on)) cgj_nvtx_pop_slow();
}
/* An instant on this thread: "<kind's word> <what>". */
static inline void cgj_nvtx_mark(cgj_nvtx_kind_t kind, const char *what, int64_t number)
{
    if (CGJ_UNLIKELY(cgj_nvtx_on)) cgj_nvtx_mark_slow(kind, what, number);
}
/* The range of a whole step's kind of run (RECORD, PROBE) on this thread: opened unless one is
 * open already, closed only where one of `kind` is open. */
static inline void cgj_nvtx_step_open(cgj_nvtx_kind_t kind, const char *anchor)
{
    if (CGJ_UNLIKELY(cgj_nvtx_on)) cgj_nvtx_step_open_slow(kind, anchor);
}
static inline void cgj_nvtx_step_close(cgj_nvtx_kind_t kind)
{
    if (CGJ_UNLIKELY(cgj_nvtx_on)) cgj_nvtx_step_close_slow(kind);
}

#endif /* CGJ_NVTX_H */
