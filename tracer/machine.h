/*
 * machine.h — the step state machine: every state, event and transition, in one place.
 *
 * A thread's step is in one mode (CGJ_MODE_LIST). Events move it along the rows of
 * CGJ_TRANSITION_LIST, and only along them: cgj_thread_go() checks every change against the
 * table, so a transition that is not written here is a broken invariant (CGJ_ASSERT), not a
 * silent new behaviour. An anchor — what cgjit knows of one named step across runs — moves
 * along CGJ_ANCHOR_TRANSITION_LIST between the public states of cgjit.h (CGJ_STATE_LIST),
 * checked the same way by cgj_anchor_go(). The report and the logs name modes, events and
 * states from these tables.
 *
 * "EAGER*" below stands for the mode an eager step takes: EAGER for an implicit step (its calls
 * are still looked at, to find where it ends), PASSTHRU for a marked one (nothing is looked at).
 */
#ifndef CGJ_MACHINE_H
#define CGJ_MACHINE_H

#include <cgjit.h>
#include <stdbool.h>

/* X(NAME, doc): the modes of a thread's step. */
/* clang-format off */
#define CGJ_MODE_LIST(X)                                                                       \
    X(OFF, "no step on this thread")                                                           \
    X(PASSTHRU, "a marked step running eagerly; its calls are not looked at")                  \
    X(EAGER, "an implicit step running eagerly; its calls are looked at to find its end")      \
    X(RECORD, "a step running eagerly, recorded call by call")                                 \
    X(REPLAY, "a step replayed: calls checked against the trace and absorbed into graphs")
/* clang-format on */

/* X(NAME, doc): what happens to a step. */
/* clang-format off */
#define CGJ_EVENT_LIST(X)                                                                      \
    X(BEGIN, "a step begins: cgj_trace_begin, or the first call of an implicit step")          \
    X(GUARD_FAIL, "a call differs from the trace (or the step ends early or goes on): side exit") \
    X(OBSERVE, "another thread synchronizes with work the replay absorbed: side exit")         \
    X(ABORT, "the step cannot be traced further: untraceable call, failed call, CGJIT_MAX_OPS, nesting") \
    X(ERROR, "a graph launch failed: the segment runs eagerly, the anchor is blacklisted")     \
    X(END, "the step ends: cgj_trace_end, or where an implicit step ends")
/* clang-format on */

/* X(FROM, EVENT, TO, doc): every transition of a thread's step. */
/* clang-format off */
#define CGJ_TRANSITION_LIST(X)                                                                 \
    X(OFF, BEGIN, RECORD, "the anchor has no trace yet: run eagerly and record (WARMUP, RECORD)") \
    X(OFF, BEGIN, REPLAY, "the anchor has a trace: replay it")                                  \
    X(OFF, BEGIN, PASSTHRU, "a marked step of a blacklisted or busy anchor, or cgjit is off")   \
    X(OFF, BEGIN, EAGER, "an implicit step of a blacklisted or busy anchor")                    \
    X(REPLAY, GUARD_FAIL, RECORD, "absorbed work re-issued eagerly; the rest is recorded")      \
    X(REPLAY, OBSERVE, RECORD, "absorbed work re-issued eagerly; the rest is recorded")         \
    X(REPLAY, GUARD_FAIL, PASSTHRU, "a marked step whose last exits' recordings matched nothing: absorbed work re-issued eagerly, the rest runs eagerly unrecorded") \
    X(REPLAY, GUARD_FAIL, EAGER, "the same, an implicit step")                                  \
    X(REPLAY, OBSERVE, PASSTHRU, "the same, another thread observing")                          \
    X(REPLAY, OBSERVE, EAGER, "the same, an implicit step, another thread observing")           \
    X(RECORD, ABORT, PASSTHRU, "a marked step: the recording is dropped")                       \
    X(RECORD, ABORT, EAGER, "an implicit step: the recording is dropped")                       \
    X(REPLAY, ABORT, PASSTHRU, "a marked step: absorbed work re-issued eagerly first")          \
    X(REPLAY, ABORT, EAGER, "an implicit step: absorbed work re-issued eagerly first")          \
    X(REPLAY, ERROR, PASSTHRU, "the segment re-issued eagerly; the anchor blacklisted")         \
    X(REPLAY, ERROR, EAGER, "the segment re-issued eagerly; the anchor blacklisted")            \
    X(PASSTHRU, END, OFF, "")                                                                   \
    X(EAGER, END, OFF, "")                                                                      \
    X(RECORD, END, OFF, "the recording is compared with the drafts; a match builds a trace")    \
    X(REPLAY, END, OFF, "the last segment is launched (or the step ended early: side exit first)")
/* clang-format on */

/* X(FROM, TO, doc): every transition of an anchor (states of cgjit.h). */
/* clang-format off */
#define CGJ_ANCHOR_TRANSITION_LIST(X)                                                          \
    X(WARMUP, RECORD, "an eager run was kept as a draft")                                       \
    X(WARMUP, REPLAY, "a trace was built")                                                      \
    X(RECORD, REPLAY, "two runs agreed: a trace was built")                                     \
    X(REPLAY, REPLAY, "another variant was built")                                              \
    X(WARMUP, BLACKLISTED, "a build or launch failed, or runs kept disagreeing")                \
    X(RECORD, BLACKLISTED, "a build or launch failed, or runs kept disagreeing")                \
    X(REPLAY, BLACKLISTED, "a launch failed, or most replays left the trace")                   \
    X(REPLAY, WARMUP, "evicted (the pool was full and the anchor the coldest), or its fused kernels compiled in the background: it starts over")  \
    X(REPLAY, OFF, "replay cost more than eager execution (tracer/cost.c)")                      \
    X(OFF, REPLAY, "replay is tried again")
/* clang-format on */

typedef enum cgj_mode {
#define CGJ_MODE_ENUM(name, doc) CGJ_MODE_##name,
    CGJ_MODE_LIST(CGJ_MODE_ENUM)
#undef CGJ_MODE_ENUM
        CGJ_MODE_COUNT
} cgj_mode_t;

typedef enum cgj_event {
#define CGJ_EVENT_ENUM(name, doc) CGJ_EVENT_##name,
    CGJ_EVENT_LIST(CGJ_EVENT_ENUM)
#undef CGJ_EVENT_ENUM
        CGJ_EVENT_COUNT
} cgj_event_t;

const char *cgj_mode_name(cgj_mode_t m);
const char *cgj_event_name(cgj_event_t e);
/* Is (from, event, to) a row of CGJ_TRANSITION_LIST? */
bool cgj_machine_allows(cgj_mode_t from, cgj_event_t ev, cgj_mode_t to);
/* Is (from, to) a row of CGJ_ANCHOR_TRANSITION_LIST? */
bool cgj_machine_anchor_allows(cgj_state_t from, cgj_state_t to);

#endif /* CGJ_MACHINE_H */
