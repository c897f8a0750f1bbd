/*
 * thread.h — a thread's step state, the tracer's own (runtime/ sees tracer/step.h only).
 *
 * cgj_thread_t is one per thread (cgj_tls). Its parts have owners: each group of fields below is
 * written by the file its heading names (the replay cursor, an eager probe's timing and step
 * finding are structs of their own: cur, probe, find); where another file writes a field too,
 * the heading says which. Two stay so because the call graph allows no other way without a
 * cycle between files (scripts/check-layers.py): exits.c keeps the recording going after a side
 * exit and notes handoffs in it (record.c calls exits.c to abort), and threads.c sets a new
 * thread's sync_long when it registers (implicit.c's value; implicit.c calls threads.c). The
 * mode changes only through cgj_thread_go (tracer/threads.c), along the rows of
 * tracer/machine.h.
 */
#ifndef CGJ_THREAD_H
#define CGJ_THREAD_H

#include "tracer/step.h"

/* Another thread that must flush this thread's absorbed work (cgj_step_observe) takes its lock
 * and may change what a step's state holds: the fields below marked "(shared)" are those it
 * changes that this thread also reads without its lock (in the wrappers, before any step
 * code). Every write of one is atomic and under the lock; every read without the lock is
 * atomic (cgj_thread_mode, cgj_thread_pending), so that the two never race; reads under the
 * lock may be plain. */
typedef struct cgj_thread {
    /* -- shared with other threads (threads.c: the registry, flushes; cgj_thread_go) -- */
    cgj_mode_t mode;       /* (shared) changed only by cgj_thread_go (tracer/machine.h) */
    int lock;              /* held by this thread while it steps, or by another flushing it */
    bool registered;       /* in the registry other threads flush through */
    bool pending;          /* (shared) other threads' calls on its streams come through it first:
                            * absorbed calls not launched yet (REPLAY), or a recording that
                            * notes where they come (RECORD: a handoff, exits.c) */
    uint64_t pending_mask; /* (shared) stream buckets (cgj_stream_bucket) of those calls */
    CUresult deferred;     /* (shared) an error re-issuing absorbed work met, for the program's
                            * next call (set under the lock, maybe by another thread) */
    uint32_t handed;       /* (shared) chunks handed to offload.c and not launched yet (the
                            * launch thread counts them down, without the lock) */
    CUresult launch_err;   /* (shared) a handed chunk the launch thread could not launch ... */
    CUresult launch_lost;  /* (shared) ... nor issue as made (the launch thread sets both, without
                            * the lock; exits.c takes them) */
    /* -- the step (step.c; exited also by replay.c and exits.c, anchor by exits.c) -- */
    bool implicit;        /* the step was begun by CGJIT_STEP, not by a marker */
    cgj_anchor_t *anchor; /* of the active step (NULL: another thread runs that anchor) */
    cgj_anchor_t *last;   /* last anchor begun here: a cache for the name lookup */
    bool exited;          /* this step left its trace */
    bool replaying;       /* this step began as a replay (it may have left the trace since) */
    uint64_t begun_ns;    /* when the step began (host time, for the report) */
    CUcontext ctx;        /* the context current when the step began */
    uint64_t serial;      /* steps begun on this thread */
    bool polled;          /* the thread's last call in this step was a query ... */
    bool repeat;          /* ... and the call in progress is one more (passed through) */
    uint32_t sync_calls;  /* CGJIT_STEP=sync: calls of the implicit step in progress ... */
    uint64_t sync_shape;  /* ... and, in a warm-up run, a hash of what they are (cgj_implicit_shape) */
    bool routed;          /* CGJIT_VERIFY: the call in progress was routed (ended a step,
                           * began one) before it ran for real; routed_in: it is in a step */
    bool routed_in;
    /* -- library calls in progress (step.c opens them; record.c and replay.c close them) -- */
    uint64_t lib_serial; /* the step the open library call began in */
    uint32_t lib_open;   /* RECORD/REPLAY: 1 + the index of the LIB op of the library call
                          * running now (0: none) */
    uint32_t lib_depth;  /* library calls running on this thread (that passed through
                          * cgj_step_enter): their driver calls are theirs, not steps' */
    /* -- the recording (record.c; exits.c notes handoffs; step.c times the calls) -- */
    cgj_oplist_t rec;    /* RECORD: this run so far */
    uint64_t rec_in_ns;  /* RECORD: when the call in progress came in (0: not in RECORD) */
    uint64_t rec_out_ns; /* RECORD: when the last recorded call returned to the program */
    cgj_oplist_t build;  /* a recording to build, handed to builder.c as the step ends ... */
    bool build_pending;  /* ... (record.c sets it; step.c hands it over) */
    /* -- the replay cursor (replay.c) -- */
    struct {
        cgj_trace_t *trace; /* the variant being followed */
        uint32_t pos;       /* next op of the trace */
        uint32_t seg;       /* current segment */
        bool launched;      /* a segment of this step has been launched */
        bool staged_waited; /* staging of the current segment checked */
        bool allocs_served; /* pool blocks were handed out in this step */
        uint32_t passed;    /* ops at the head of the current segment (one too small for a
                             * graph) that ran as the program made them, not absorbed */
        uint64_t absorbed;  /* calls absorbed in this step */
    } cur;
    /* -- an eager probe's timing (cost.c, called from step.c around each call) -- */
    struct {
        bool probing;        /* this step is an eager probe of its anchor (CGJIT_COST) ... */
        uint64_t call_in_ns; /* ... when its outermost call in progress came in (0: none) */
        uint64_t calls_ns;   /* ... its host time inside driver and library calls so far */
        uint64_t wrap_in_ns; /* ... when the call in progress entered cgjit's wrapper (0: none) */
        uint64_t own_ns;     /* ... cgjit's own host time in its calls so far (wrappers and
                              * step code around each real call: what eager execution without
                              * cgjit would not spend) */
    } probe;
    /* -- step finding (implicit.c; sync_long set by threads.c at registration, record.c) -- */
    struct {
        struct cgj_cycle *cycle; /* CGJIT_STEP=auto: this thread's cycle detector */
        uint32_t quiet_calls;    /* CGJIT_STEP=auto: calls made before it had one */
        uint32_t heads;          /* CGJIT_STEP=auto: cycle heads passed inside the step in progress */
        bool turn_synced;        /* CGJIT_STEP=auto: the cycle's turn in progress synchronized */
        uint64_t cycle_id;       /* CGJIT_STEP=auto: the cycle the next two were found for ... */
        bool split_at_syncs;     /* ... a turn of it synchronizes CGJ_AUTO_SPLIT_SYNCS times or more:
                                  * its steps are taken between synchronizations (implicit.c) ... */
        bool works;              /* ... a turn of it does GPU work a graph holds (implicit.c) */
        uint32_t sync_long;      /* CGJIT_STEP=sync: calls without a synchronization after which
                                  * the thread finds cycles (CGJ_SYNC_LONG; a worker thread's is
                                  * shorter: set when it registers) */
        bool finds_cycles;       /* CGJIT_STEP=sync: this thread never synchronizes; it finds its
                                  * steps as CGJIT_STEP=auto does (implicit.c) */
        bool warming;            /* the step in progress is a warm-up run (step.c) ... */
        uint64_t sighted;        /* ... of a step seen for the first time, with no anchor yet: its
                                  * sighting's key (anchor.c, cgj_anchor_sight), 0 otherwise */
    } find;
    /* -- CGJIT_VERIFY (verify.c) -- */
    struct cgj_verify *verify; /* the segment being checked */
} cgj_thread_t;

extern __thread cgj_thread_t cgj_tls;

/* t's mode and whether it holds pending work, read without t's lock (see cgj_thread_t). */
static inline cgj_mode_t cgj_thread_mode(const cgj_thread_t *t)
{
    return __atomic_load_n(&t->mode, __ATOMIC_RELAXED);
}
static inline bool cgj_thread_pending(const cgj_thread_t *t)
{
    return __atomic_load_n(&t->pending, __ATOMIC_RELAXED);
}
#endif /* CGJ_THREAD_H */
