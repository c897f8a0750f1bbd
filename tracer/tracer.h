/*
 * tracer.h — what the files of tracer/ share; runtime/ sees only tracer/step.h.
 *
 * Calls between the files go one way, in this order (a file calls only files below it):
 *
 *     step.c      the entry points: begin, enter, leave, end; acts on implicit.c's decisions
 *     implicit.c  step finding without markers: returns decisions (cycle.c: the detector)
 *     record.c    eager runs: calls recorded, the recording compared with the drafts
 *     builder.c   builds on a thread of cgjit's (CGJIT_BUILD_BACKGROUND): hand-over and queue
 *     build.c     a trace from a recording: memory plan, staging, graphs
 *     replay.c    guard, absorb, patch, launch; variant switches
 *     exits.c     leaving a replay: flush, side exit, abort; other threads' observations
 *     offload.c   a chunk's launch, counted; chunks launched on a thread of cgjit's (CGJIT_LAUNCH_ASYNC)
 *     verify.c    CGJIT_VERIFY: each replayed graph checked against the calls run eagerly
 *     watch.c     replayed collectives in flight: the ones that never complete are reported
 *     cost.c      does replay pay? eager probes, periods, turning replay off and on
 *     govern.c    is the process faster active or dormant? the heartbeat, windows, judgements
 *     shape.c     comparing calls with ops and recordings with each other; the guard
 *     libop.c     learning how a library call's kernels follow its arguments
 *     anchor.c    the anchor table, anchor states, failure and exit history
 *     threads.c   the thread registry, per-thread locks, process-wide counters, mode changes
 *     machine.c   the transition tables (machine.h)
 */
#ifndef CGJ_TRACER_H
#define CGJ_TRACER_H

#include "tracer/step.h"
#include "tracer/thread.h"
#include "base/spin.h"

#define CGJ_MAX_VARIANTS_HARD 16
#define CGJ_MAX_DRAFTS 4  /* eager recordings kept, so that A B A B finds its pairs */
#define CGJ_WARMUP_LENS 4 /* sync: warm-up runs' lengths kept to find one that repeats ... */
#define CGJ_WARMUP_MAX 16 /* ... and warm-up runs at most while none has */
/* Recordings of exited runs in a row that matched nothing, after which exits stop recording
 * (every draft slot then holds a shape seen once). */
#define CGJ_LONE_RECORDS CGJ_MAX_DRAFTS

/* An anchor: the named point where a step starts, and what cgjit knows of it. It moves along
 * CGJ_ANCHOR_TRANSITION_LIST (machine.h). One thread at a time runs a step of a given anchor
 * (`busy`); a second thread beginning the same anchor meanwhile runs its step eagerly. */
/* ---- cost.c: does replay pay? ---- */
#define CGJ_COST_EAGER_WINDOW 8
#define CGJ_COST_RECENT 8
typedef enum { CGJ_COST_NONE, CGJ_COST_EAGER, CGJ_COST_REPLAY } cgj_cost_kind_t;
typedef struct cgj_cost {
    uint64_t last_ns;          /* when the anchor's last step began ... */
    const void *last_thread;   /* ... on which thread ... */
    cgj_cost_kind_t last_kind; /* ... as which kind of run, in which of the governor's epochs */
    uint32_t last_epoch;
    uint64_t eager[CGJ_COST_EAGER_WINDOW];  /* eager periods, ns ... */
    uint64_t paired[CGJ_COST_EAGER_WINDOW]; /* ... each with the median of the replay periods
                                             * right before it at the same place in the program's loop (at
                                             * the program's pace then) */
    struct {
        uint64_t ns;
        const void *from, *to;
    } recent[CGJ_COST_RECENT]; /* the last
                                * replay periods, and the anchors whose steps came before the
                                * begins that start and end each (its place in the loop) */
    uint32_t nrecent;
    const void *last_pred;                /* the anchor whose step came before its last step */
    uint64_t neager;                      /* pairs measured (the window holds the last ones) */
    uint64_t eager_med_ns, replay_med_ns; /* the medians at the last judgement (the report):
                                           * eager periods, and the replay ones paired with them */
    uint64_t since_probe;                 /* replay runs since the last eager probe */
    uint32_t unpaired;                    /* eager probes in a row that found no replay at their place */
    uint64_t retry_at;                    /* OFF: the run from which replay is tried again */
    uint32_t offs;                        /* times turned off */
    uint32_t short_streak;                /* replays in a row of a trace that cannot pay, to its end */
    bool no_graph;                        /* turned off for want of a graph (OFF_NO_GRAPH) ... */
    uint32_t no_graph_retries;            /* ... and tried again since, for a longer step */
    uint32_t strikes;                     /* judgements in a row that found replay slower */
    uint32_t clear;                       /* judgements in a row that found replay clearly faster */
    uint64_t probe_ns, probe_runs;        /* host time of eager probes (and runs while off), begin to end */
    uint64_t probe_calls_ns;              /* ... of which inside driver and library calls (probes only) */
    uint64_t timed_probes;                /* ... over this many probes */
    uint64_t last_own_ns;                 /* the last probe's cgjit's own host time in its calls, taken
                                           * off its period at the next begin */
    uint64_t reissued;                    /* absorbed ops re-issued at side exits and aborts */
    uint64_t probes, off_runs;            /* runs made eager: probes, and runs while replay was off */
    uint64_t record_ns, recorded_ops;     /* warm-up: time spent recording calls, and how many */
    uint64_t waste_ns, waste_runs;        /* runs that recorded or left the trace while it could replay:
                                           * host time from begin to end, and how many ... */
    uint64_t clean_ns, clean_runs;        /* ... and replays that ran to their end (OFF_WASTE) */
    uint64_t first_replay_run;            /* the run that first replayed (0: none yet) */
} cgj_cost_t;

struct cgj_anchor {
    char *name;
    cgj_state_t state; /* changed only by cgj_anchor_go */
    int busy;
    int building;                        /* builder.c builds a trace of it now (it holds `busy`): its runs are eager */
    bool build_here;                     /* a build on the builder thread failed: the next is made by the program's */
    cgj_oplist_t drafts[CGJ_MAX_DRAFTS]; /* newest last */
    uint32_t draft_runs[CGJ_MAX_DRAFTS]; /* runs of each draft's shape seen so far */
    uint32_t ndrafts;
    cgj_trace_t *variants[CGJ_MAX_VARIANTS_HARD];
    uint32_t nvariants, current;
    uint64_t runs, replays, side_exits;
    uint64_t busy_runs;                       /* runs begun while other threads ran it and all its siblings (eager) */
    uint64_t warmup_runs;                     /* runs it warmed up: eager, unrecorded (CGJIT_WARMUP_RUNS) */
    uint64_t building_runs;                   /* runs begun while builder.c built it (eager, unrecorded) */
    struct cgj_anchor *sibling;               /* the anchor a thread takes while another runs this one ... */
    uint32_t order;                           /* ... "NAME#2" (order 1), "NAME#3" ...; 0: the anchor NAME */
    const void *taker;                        /* the thread that took it last (each thread keeps to its own) */
    uint64_t eager_ns, eager_runs, replay_ns; /* host time from begin to end, for the report (eager:
                                               * runs that record nothing) */
    uint32_t record_failures;
    uint32_t exit_history; /* one bit per replayed run, newest lowest: 1 if it left the trace */
    uint32_t history_len;
    bool want_twin;                       /* an escape exit happened: a duplicate variant is welcome */
    uint32_t lone_records;                /* recordings of runs that left the trace, in a row, that matched no
                                           * variant and no draft (record.c) ... */
    uint64_t quiet_exits;                 /* ... and the exits since they reached CGJ_LONE_RECORDS, run
                                           * without recording but for one in a growing number (exits.c) */
    bool long_steps;                      /* a first run went CGJ_SYNC_FIRST_RECORD calls without ending */
    uint32_t warm_len[CGJ_WARMUP_LENS];   /* sync: the lengths of its last warm-up runs (step.c) ... */
    uint64_t warm_shape[CGJ_WARMUP_LENS]; /* ... and their shapes (cgj_implicit_shape) ... */
    bool warm_repeat;                     /* ... one of which repeated an earlier one */
    uint64_t last_used;                   /* the begin serial of its last step (the coldest are evicted first) */
    uint32_t pool_failures;               /* builds that found no pool memory ... */
    uint64_t pool_retry_at;               /* ... and the run from which to try again */
    uint64_t fuse_ticket;                 /* a build left chains unfused for the background compiler: once it
                                           * is done with this ticket, the anchor starts over (cgj_anchor_refuse) */
    uint32_t refusions;                   /* times it started over for that */
    uint64_t refuse_at;                   /* ... not before this run (it could not: pool blocks were held) */
    cgj_reason_t reason;                  /* why blacklisted, or the last divergence, exit or abort */
    cgj_cost_t cost;                      /* cost.c (touched by the thread running its step) */
    uint32_t gpu_id;                      /* graphs/gpubusy.h's id of its figures (CGJIT_BUSY; 0: none yet) */
    struct cgj_anchor *next;
};

/* ---- anchor.c ---- */
#define CGJ_MAX_SIBLINGS 3 /* threads beyond 1 + this many that run one step at once run it eagerly */
cgj_anchor_t *cgj_anchor_get(const char *name);
/* The anchor a thread takes where a's step runs on another thread now (two threads whose steps
 * begin with the same call: PyTorch's autograd thread and the main thread, a thread pool):
 * "NAME#2", then "NAME#3" ... for a's sibling; NULL past CGJ_MAX_SIBLINGS. */
cgj_anchor_t *cgj_anchor_sibling(cgj_anchor_t *a);
/* An implicit step's first run makes no anchor: a step a program makes once (a set-up, a loop it
 * times once) then costs a fingerprint, not an anchor made on the program's thread, whose first
 * time on that path is cold. cgj_anchor_sight(name) records the sighting and returns its key
 * (nonzero) where `name` has neither an anchor nor an earlier sighting; 0 otherwise, and the
 * step's anchor is then made (cgj_anchor_get) as if that first run had warmed it up: one run, one
 * warm-up run with the length and shape cgj_anchor_sighting_ended kept, long_steps as
 * cgj_anchor_sighting_long set. Sightings are kept for CGJ_SIGHTINGS names at most; past that,
 * every new step makes its anchor at its first run. */
#define CGJ_SIGHTINGS 1024
uint64_t cgj_anchor_sight(const char *name);
/* The key cgj_anchor_sight gives `name` (whether or not it was sighted). */
uint64_t cgj_anchor_sight_key(const char *name);
void cgj_anchor_sighting_ended(uint64_t key, uint32_t calls, uint64_t shape);
void cgj_anchor_sighting_long(uint64_t key);
/* In a child after fork(): the table's lock as if unlocked. */
void cgj_anchors_forked(void);
/* Before a region of `bytes` is mapped for `a`: evict the coldest other anchors until the pool
 * stays within CGJIT_POOL_MAX_GB, or none is left that can go (every block given back). */
void cgj_anchor_make_room(const cgj_anchor_t *a, size_t bytes);
/* Give back all a trace holds: its graphs, pool region, staging and ops. */
void cgj_anchor_trace_free(cgj_trace_t *tr);
void cgj_anchor_go(cgj_anchor_t *a, cgj_state_t to);
/* A new variant of a, built: published to the API and the report, and the current one. */
/* The fused kernels a's traces waited for are compiled: its traces go and it starts over from
 * WARMUP, to be built again with them (at most twice; false where it cannot go now). */
bool cgj_anchor_refuse(cgj_anchor_t *a);
void cgj_anchor_publish(cgj_anchor_t *a, cgj_trace_t *tr);
/* Keep r as the anchor's last event. */
void cgj_anchor_note(cgj_anchor_t *a, const cgj_reason_t *r);
void cgj_anchor_blacklist(cgj_anchor_t *a, const cgj_reason_t *r);
/* An eager run failed (aborted, or disagreed with the drafts) while the anchor has no trace:
 * blacklisted after CGJIT_MAX_RECORDS of them. */
void cgj_anchor_fail(cgj_anchor_t *a, const cgj_reason_t *r);
/* A replayed run ended (exited: it left the trace): too many exits blacklist the anchor. */
void cgj_anchor_note_run(cgj_anchor_t *a, bool exited);

/* ---- cost.c ---- */
/* a has a trace and the state to replay it: should this run be eager instead (an eager probe,
 * or the anchor is OFF)? May turn an OFF anchor back to REPLAY. */
bool cgj_cost_eager(cgj_anchor_t *a);
/* A replay of a ran to its end (or left its trace: exited): an anchor whose replay cannot pay
 * goes OFF once its steps keep matching the short trace. */
void cgj_cost_replayed(cgj_anchor_t *a, bool exited);
/* A step of a ended after host_ns from its begin: a replay to its end (clean), or a run that
 * recorded or left the trace while a could replay (waste). An anchor whose waste costs more than
 * its clean replays save, against its eager runs, goes OFF (OFF_WASTE). */
void cgj_cost_ended(cgj_anchor_t *a, bool clean, uint64_t host_ns);
/* An implicit step of a ran eagerly to its end, `calls` calls: an anchor off for want of a
 * graph whose trace is shorter has replay tried again. */
void cgj_cost_off_ran(cgj_anchor_t *a, uint32_t calls);
/* A step of a begins at `now` on `thread` as a run of `kind`, after a step of `pred` there (NULL:
 * none): the period since its last begin there is a figure of the last run's kind; may turn the
 * anchor OFF. */
void cgj_cost_begin(cgj_anchor_t *a, cgj_thread_t *t, const void *pred, uint64_t now, cgj_cost_kind_t kind);
/* An eager probe's timing of the calls in its step (t->probe, cost.c's part of the thread
 * state): a call came in (cgjit's own time in the wrapper ends), the outermost call returned,
 * the wrapper left (cgjit's own time after the real call), the step ended. */
void cgj_cost_call_in(cgj_thread_t *t, const cgj_call_t *c);
void cgj_cost_call_out(cgj_thread_t *t);
void cgj_cost_call_left(cgj_thread_t *t, uint64_t out_ns);
void cgj_cost_probe_end(cgj_thread_t *t);
/* The step of a that began last ended, eagerly, after host_ns from its begin, calls_ns of them
 * inside the driver and library calls replay absorbs (0: not timed), own_ns in cgjit's own code
 * around its calls (a probe: taken off its period, which then stands for eager execution
 * without cgjit). */
void cgj_cost_end_eager(cgj_anchor_t *a, uint64_t host_ns, uint64_t calls_ns, uint64_t own_ns);

/* ---- watch.c: replayed collectives that never complete ---- */
/* A chunk ending with a collective (named by `call`) was launched on s in ctx by anchor's step. */
void cgj_watch_collective(CUcontext ctx, CUstream s, const char *anchor, const char *call);
void cgj_watch_forked(void);

/* ---- threads.c ---- */
/* Put t in the registry other threads flush through; true the first time. */
bool cgj_thread_register(cgj_thread_t *t);
void cgj_thread_unregister(cgj_thread_t *t);
/* t's lock (held while it steps, or by another thread flushing it): inline, every call of a
 * step takes it. */
static inline void cgj_thread_lock(cgj_thread_t *t)
{
    cgj_spin_lock(&t->lock);
}
static inline void cgj_thread_unlock(cgj_thread_t *t)
{
    cgj_spin_unlock(&t->lock);
}
/* Move t's step along a row of CGJ_TRANSITION_LIST (asserted). */
void cgj_thread_go(cgj_thread_t *t, cgj_event_t ev, cgj_mode_t to);
/* The mode an eager step of t takes: EAGER (implicit) or PASSTHRU (marked). */
cgj_mode_t cgj_thread_eager_mode(const cgj_thread_t *t);
/* t has absorbed work on stream s, not launched yet (other threads' work on s must wait for it). */
void cgj_thread_absorbed(cgj_thread_t *t, CUstream s);
/* t records work on stream s: other threads' calls there note a handoff in its recording. The
 * streams stay published until the recording ends (cgj_thread_go). */
void cgj_thread_recorded(cgj_thread_t *t, CUstream s);
/* false: t's absorbed work is launched or issued, nothing of it is pending any more. */
void cgj_thread_set_pending(cgj_thread_t *t, bool pending);
/* Keep err for t's program (the first one wins); the error it keeps, once, or CUDA_SUCCESS. */
void cgj_thread_defer(cgj_thread_t *t, CUresult err);
CUresult cgj_thread_take_deferred(cgj_thread_t *t);
/* In a child after fork(): no registry, no counters, this thread in no step, locks free. */
void cgj_threads_forked(void);

/* The program's own stream captures in progress (captures.c; cgj_program_capturing in step.h):
 * one on stream s counts from just before its begin reaches the driver; in a child after fork(),
 * none. cgj_captures_blocking: is s blocking, answered without the driver while captures run
 * (cuStreamGetFlags on a capturing stream invalidates its capture): as asked at the begin of a
 * capture on s, and true for any other stream. */
void cgj_captures_beginning(CUstream s);
bool cgj_captures_blocking(CUstream s);
void cgj_captures_forked(void);
/* The registry, for visiting other threads: lock, count, get, unlock. */
void cgj_registry_lock(void);
void cgj_registry_unlock(void);
size_t cgj_registry_count(void);
cgj_thread_t *cgj_registry_get(size_t i);

/* ---- govern.c ---- */
/* A step begins at call c (implicit) as anchor `name`, after the thread's step before it held
 * `calls` calls: learning counts that one where it held more than one; a phase may end. */
void cgj_gov_begun(const cgj_call_t *c, const char *name, uint32_t calls);
/* A marked step `name` begins: counted, and a beat where it is the heartbeat. True: the governor
 * is dormant (the step runs straight through). */
bool cgj_gov_marked(const char *name);
/* The program's first marker ended implicit stepping (step.c): a new judgement, among the
 * marked steps. */
void cgj_gov_markers(void);
void cgj_gov_forked(void);

/* ---- shape.c ---- */
/* Do two recordings have the same topology? On false, *r says where and how they differ. */
bool cgj_shape_same(const cgj_oplist_t *a, const cgj_oplist_t *b, cgj_reason_t *r);
/* Mark the kernel parameter slots whose bytes differ between a and b as varying in a, and the
 * ops whose grid, block, copy or memset values differ as listed (same shape; addresses into
 * in-step allocations match by allocation and offset), then learn a's library groups. a keeps
 * its own values as the recorded ones, and only the handoffs both recordings saw. */
void cgj_shape_classify(cgj_oplist_t *a, const cgj_oplist_t *b);
/* Rewrite every address into an in-step allocation of l to planned[block] + offset. */
void cgj_shape_relocate(cgj_oplist_t *l, const CUdeviceptr *planned);
/* Replay guard: does call c match op o? The topology must be equal; on success, varying slots
 * and the values of a listed op are taken into o (the run in progress). On failure *r names the
 * difference (its op is left for the caller) and o is unchanged. With `promote` (the caller
 * knows the op takes new values: a graph node, or an op its segment issues eagerly), a constant
 * slot or value that differs becomes varying instead of failing; o->promoted is then set. */
bool cgj_guard(cgj_op_t *o, const cgj_call_t *c, bool promote, cgj_reason_t *r);
/* Would cgj_guard(o, c, promote, r) hold? o is left as it is either way. */
bool cgj_guard_would_hold(cgj_op_t *o, const cgj_call_t *c, bool promote, cgj_reason_t *r);

/* ---- libop.c ---- */
/* Learn how the group of LIB op `at` in `a` derives its kernel parameters from the call's
 * pointer arguments, from two samples: `a` (its values become the recorded ones) and an older
 * one, `b` (same shape). `ta`/`tb` are the in-step allocations of each run (NULL: addresses
 * compare exactly). Decides whether the group can be absorbed. */
void cgj_libop_learn(cgj_oplist_t *a, uint32_t at, const cgj_oplist_t *b, const cgj_blocks_t *ta,
                     const cgj_blocks_t *tb);
/* After the library ran in replay and its group matched: learn from (recorded, this run) and
 * make this run's call and values the recorded ones. */
void cgj_libop_relearn(cgj_op_t *lib_op, const cgj_libcall_t *lc);

/* ---- exits.c ---- */
/* Re-issue the ops absorbed since the last launch, eagerly, in order. False if one failed. */
bool cgj_exit_flush(cgj_thread_t *t);
/* t's chunks handed to the launch thread are launched (CGJIT_LAUNCH_ASYNC): before t's work is issued
 * on its own thread, or a call of t's runs for real. Where one failed, the program gets the
 * error at its next call and the step, if it replays, goes on eagerly. */
void cgj_exit_drain(cgj_thread_t *t);
/* Leave the trace at t->cur.pos (GUARD_FAIL or OBSERVE): pending ops eagerly, then the rest of the
 * run is recorded. r->op is set here. */
void cgj_exit_side(cgj_thread_t *t, cgj_event_t ev, cgj_reason_t *r);
/* Stop tracing this step: pending replay work runs eagerly, the recording is dropped. */
void cgj_exit_abort(cgj_thread_t *t, cgj_reason_t *r);
/* A graph launch failed: the segment runs eagerly, the anchor is blacklisted. */
void cgj_exit_launch_failed(cgj_thread_t *t, CUresult err);
/* See cgj_step_observe. */
void cgj_exit_observe(CUstream s, CUevent ev, bool everything);

/* ---- verify.c (CGJIT_VERIFY) ---- */
bool cgj_verify_on(void);
/* Replay is at op t->cur.pos: where a graph segment starts, copy its memory aside and run its calls
 * for real from now on (cgj_verify_running). */
void cgj_verify_enter(cgj_thread_t *t);
bool cgj_verify_running(const cgj_thread_t *t);
/* Before the current segment's graph launches: eager results aside, the start put back. False
 * where the segment is not checked (the graph must not run: memory holds eager results). */
bool cgj_verify_before(cgj_thread_t *t);
/* After the launch (its result): compare, report, and leave eager results in memory. */
void cgj_verify_after(cgj_thread_t *t, CUresult launched);
/* The thread leaves the segment before its launch: true if its calls ran already (nothing is
 * to be re-issued). */
bool cgj_verify_flush(cgj_thread_t *t);
void cgj_verify_free(cgj_thread_t *t);
/* Work that must not meet another thread's window (verify.c's essay), between begin and end:
 * call c run for real (by cgj_step_enter's leave, or before replay absorbs it in a checked
 * segment), or (c NULL) a library call replay absorbed whole that runs too. It waits while a
 * window is open, and every open check whose memory it may write notes it. Nothing for a call
 * that touches no memory (a synchronization, an event, an allocation). */
void cgj_verify_call_begin(const cgj_call_t *c);
void cgj_verify_call_end(void);
/* The same around a graph of an unchecked segment (its memory not told). */
void cgj_verify_calls_enter(void);
void cgj_verify_calls_leave(void);
void cgj_verify_forked(void);

/* ---- replay.c ---- */
/* Replay call c: CGJ_ABSORB, or CGJ_EXECUTE (a boundary, a library that must run, or a side
 * exit, after which the thread records). */
int cgj_replay_enter(cgj_thread_t *t, const cgj_call_t *c);
/* The library call of LIB op lib_open - 1 returned (ok: successfully) while replaying. */
void cgj_replay_lib_leave(cgj_thread_t *t, uint32_t at, const cgj_libcall_t *lc, bool ok);
/* The step ends in replay: its last segment is launched, or (it ended early) it side-exits. */
void cgj_replay_end(cgj_thread_t *t);
/* The step is over: the cursor follows no trace. */
void cgj_replay_forget(cgj_thread_t *t);
/* Begin replaying a's current variant. */
void cgj_replay_begin(cgj_thread_t *t, cgj_anchor_t *a);

/* ---- offload.c: chunks launched on a thread of cgjit's (CGJIT_LAUNCH_ASYNC) ---- */
/* Launch segment seg of tr (cgj_graph_launch: host_gen, *refused, issued as there), from the
 * program's thread or the launch thread alike: in an NVTX range named `name`, its host time into
 * launch_host_ns and its patches into cgj_stats (graph_launches is the caller's to count). */
CUresult cgj_chunk_launch(cgj_trace_t *tr, uint32_t seg, uint64_t host_gen, const char *name, uint32_t *refused,
                          uint32_t issued);
/* Is segment seg of t's replay, whose last op is `last`, handed to the launch thread as it ends? A
 * chunk that ends inside its segment (host time, op count), in a graph, not under CGJIT_VERIFY. */
bool cgj_offload_wanted(const cgj_thread_t *t, const cgj_segment_t *seg, const cgj_op_t *last);
/* Hand segment seg of tr to the launch thread (t->handed counts it until launched). False: no
 * launch thread (the caller launches). */
bool cgj_offload_hand(cgj_thread_t *t, cgj_trace_t *tr, uint32_t seg);
/* Wait until t's handed chunks are launched (or issued as made: t->launch_err then). */
void cgj_offload_wait(cgj_thread_t *t);
/* Wait until every handed chunk is launched. */
void cgj_offload_settle(void);
void cgj_offload_forked(void);

/* ---- builder.c: builds on a thread of cgjit's (CGJIT_BUILD_BACKGROUND) ---- */
/* Is a's next build handed to the builder thread? */
bool cgj_builder_wanted(const cgj_anchor_t *a);
/* Hand a's prepared recording (taken over) to the builder, with a taken (`busy`), which it
 * gives back once built. False: no builder (the caller builds). */
bool cgj_builder_hand(cgj_anchor_t *a, cgj_oplist_t *rec, CUcontext ctx);
/* Wait for the build in hand; `drop`: give the queued recordings back to their anchors too. */
void cgj_builder_settle(bool drop);
void cgj_builder_forked(void);

/* ---- build.c ---- */
/* What a build reads of the program's state, taken from rec on the thread that recorded it:
 * the host generation of its host operands (which kernels reach mapped host memory is asked as
 * the build starts, and holds while that generation does). */
void cgj_build_prepare(cgj_oplist_t *rec);
/* Build a trace from a classified, prepared recording (taken over) as a new variant of a. A
 * failure not for the pool blacklists an anchor with no variant, unless `background`: then the
 * anchor only notes it. True: built. */
bool cgj_build_variant(cgj_anchor_t *a, cgj_oplist_t *rec, bool background);
/* Would rec (classified) add nothing to a's variants? */
bool cgj_build_duplicates(const cgj_anchor_t *a, const cgj_oplist_t *rec);
uint32_t cgj_build_max_variants(void);
/* False while a build that found no pool memory waits to be tried again (16, 32, ... runs). */
bool cgj_build_may_try(const cgj_anchor_t *a);

/* ---- record.c ---- */
/* A call in RECORD mode returned r: record it (or abort the step). */
void cgj_record_leave(cgj_thread_t *t, const cgj_call_t *c, CUresult r);
/* A library call in RECORD mode: its LIB op goes before the driver calls it makes. */
void cgj_record_lib(cgj_thread_t *t, const cgj_call_t *c);
/* The library call of LIB op `at` returned while recording. */
void cgj_record_lib_leave(cgj_thread_t *t, uint32_t at, bool ok);
/* The recorded run ends: compare with the drafts, build a variant or keep it as a draft. */
void cgj_record_finish(cgj_thread_t *t);

/* ---- implicit.c ---- */
typedef enum cgj_route {
    CGJ_ROUTE_STAY,    /* the call belongs to the step in progress */
    CGJ_ROUTE_OUTSIDE, /* the call runs outside any step: end the step in progress first */
    CGJ_ROUTE_BEGIN,   /* end the step in progress, if any, and begin `name` */
} cgj_route_t;
typedef struct cgj_decision {
    cgj_route_t route;
    char name[160];
    bool record; /* BEGIN: recorded at once, no warm-up run (the warm-up run ending was cut for
                  * its length) */
} cgj_decision_t;
/* For a call with no step active, or inside an implicit step: where it belongs. */
void cgj_implicit_decide(cgj_thread_t *t, const cgj_call_t *c, cgj_decision_t *d);
/* The common case, inline: a call inside a sync-policy step that does not end it stays. */
#define CGJ_SYNC_LONG 8192        /* calls without a synchronization: implicit.c ... */
#define CGJ_SYNC_LONG_WORKER 1024 /* ... on a thread other than the process's first */
#define CGJ_SYNC_FIRST_RECORD 256 /* ... of which an anchor's first run records (record.c) */
/* Does call c end a CGJIT_STEP=sync step (it runs outside any step)? The host waits for the GPU
 * there, or asks whether it is done (a query: a host polling the GPU has synchronized once it
 * is told so). */
static inline bool cgj_implicit_delimits(const cgj_call_t *c)
{
    return c->kind == CGJ_OP_SYNC || c->kind == CGJ_OP_READBACK || c->kind == CGJ_OP_QUERY;
}
/* Is c a call of the implicit step in progress that counts toward its length (one that does not
 * end it)? */
static inline bool cgj_implicit_counts(const cgj_thread_t *t, const cgj_call_t *c)
{
    return t->mode != CGJ_MODE_OFF && t->implicit && !cgj_implicit_delimits(c);
}
/* Does a sync-policy step of `calls` calls so far go on (not too long without a
 * synchronization, and no cycle finding taken over)? */
static inline bool cgj_implicit_goes_on(const cgj_thread_t *t, uint32_t calls)
{
    uint32_t limit = t->find.warming && t->find.sync_long > CGJ_SYNC_FIRST_RECORD ? CGJ_SYNC_FIRST_RECORD
                                                                                  : t->find.sync_long;
    return calls < limit && !t->find.finds_cycles &&
           __atomic_load_n(&cgj_implicit_policy, __ATOMIC_RELAXED) == CGJ_STEP_SYNC;
}
/* A warm-up run's shape with call c added: what guards compare of it and a replay cannot
 * patch (its driver function, stream, kernel, copy direction, allocation size class), its values
 * left out: two runs of one length and shape are likely to record traces that agree. */
uint64_t cgj_implicit_shape(uint64_t shape, const cgj_call_t *c);
static inline bool cgj_implicit_stays(cgj_thread_t *t, const cgj_call_t *c)
{
    if (!cgj_implicit_counts(t, c) || !cgj_implicit_goes_on(t, ++t->sync_calls)) return false;
    if (t->find.warming) t->sync_shape = cgj_implicit_shape(t->sync_shape, c);
    return true;
}
void cgj_implicit_enable(cgj_step_policy_t policy);
/* The governor's hold (govern.c): while held, implicit stepping lets every call go straight
 * through; the policy stays as it is. */
void cgj_implicit_hold(bool hold);
void cgj_implicit_forked(void);
/* The thread ends: its cycle detector goes back to the pool. */
void cgj_implicit_thread_exit(cgj_thread_t *t);
/* Turn implicit stepping off for good; false if it was off already. */
bool cgj_implicit_disable(void);
/* The same in a child after fork(), where the counters are reset anyway and nothing logs. */
void cgj_implicit_disable_silently(void);

#endif /* CGJ_TRACER_H */
