/*
 * cgjit.h — public API of cgjit, a trace-based JIT runtime for CUDA programs.
 *
 * cgjit watches the GPU work a program issues through the CUDA driver API, records one step
 * of it, checks on later steps that the program does the same again (guards) and replays the
 * step as one CUDA graph. Results are bitwise equal to eager execution: whenever the host can
 * observe GPU memory, it holds exactly what eager execution would have produced.
 *
 * Marking a step:
 *
 *     for (int i = 0; i < steps; i++) {
 *         cgj_trace_begin("train_step");
 *         ...launch kernels, copy, memset, record events...
 *         cgj_trace_end();
 *     }
 *
 * The first run of a step executes eagerly, unrecorded (WARMUP; CGJIT_WARMUP_RUNS runs, 1 by
 * default); the next executes eagerly and is recorded as a draft; the next executes eagerly
 * again and is compared with the draft (RECORD); if both agree, cgjit builds a CUDA graph (on a
 * thread of its own while the program goes on, its runs meanwhile eager: CGJIT_BUILD_BACKGROUND),
 * and from the first run after the build (the fourth, or a few later) the step is replayed
 * (REPLAY). A run that does not match
 * the recorded trace leaves replay at the point of divergence (a side exit) and finishes eagerly;
 * two identical divergent runs become a second variant of the trace. An anchor whose runs never
 * agree is blacklisted and runs eagerly from then on (BLACKLISTED); one whose replay does not pay
 * runs eagerly for a while or, where it cannot pay, for good (OFF); cgj_report() says why.
 *
 * Every function here is thread-safe. Steps are per thread: a step begun on one thread is
 * ended on that thread, and two threads may trace steps concurrently.
 */
#ifndef CGJIT_H
#define CGJIT_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CGJ_API __attribute__((visibility("default")))
#else
#define CGJ_API
#endif

/* The version of this header. These three lines are the version's one source: CMake reads them
 * into project(VERSION), which names the shared library (libcgjit.so.MAJOR), the pkg-config file
 * and the CMake package, and the tools print them. Before 1.0, a new MINOR may change the ABI. */
#define CGJ_VERSION_MAJOR 0
#define CGJ_VERSION_MINOR 1
#define CGJ_VERSION_PATCH 0
#define CGJ_VERSION_STR_(x) #x
#define CGJ_VERSION_STR(x) CGJ_VERSION_STR_(x)
#define CGJ_VERSION_STRING \
    CGJ_VERSION_STR(CGJ_VERSION_MAJOR) "." CGJ_VERSION_STR(CGJ_VERSION_MINOR) "." CGJ_VERSION_STR(CGJ_VERSION_PATCH)

/* The version of the libcgjit loaded, "MAJOR.MINOR.PATCH": compare it with CGJ_VERSION_STRING to
 * tell the header a program was built with from the library it runs with. Needs no CUDA driver
 * and no GPU; never NULL. */
CGJ_API const char *cgj_version(void);

/* Status codes: X(NAME, value, message). cgj_strerror() returns the message. */
/* clang-format off */
#define CGJ_STATUS_LIST(X)                                                                       \
    X(OK, 0, "success")                                                                          \
    X(ERR_NOT_ACTIVE, 1, "cgj_trace_end without a step begun on this thread")                    \
    X(ERR_NESTED, 2, "cgj_trace_begin while a step is active on this thread; steps do not nest") \
    X(ERR_INVALID_ARG, 3, "invalid argument (NULL or empty name, NULL output pointer)")          \
    X(ERR_NO_DRIVER, 4, "the CUDA driver could not be loaded; the step runs eagerly")            \
    X(ERR_DISABLED, 5, "cgjit is disabled (CGJIT_DISABLE=1); the step runs eagerly")             \
    X(ERR_NOT_FOUND, 6, "no trace anchor of that name")                                         \
    X(ERR_SPEC, 7, "the elementwise spec does not parse (stderr says where)")
/* clang-format on */

typedef enum cgj_status {
#define CGJ_STATUS_ENUM(name, value, msg) CGJ_##name = value,
    CGJ_STATUS_LIST(CGJ_STATUS_ENUM)
#undef CGJ_STATUS_ENUM
} cgj_status_t;

/* The message of a status code; never NULL. */
CGJ_API const char *cgj_strerror(int status);

/*
 * Begin a step anchored at `name` on the calling thread. Steps with the same name share one
 * trace (and its variants). Returns CGJ_OK, or:
 *  - CGJ_ERR_INVALID_ARG: name is NULL or empty. Nothing changes.
 *  - CGJ_ERR_NESTED: a step is already active on this thread. Steps do not nest: the active
 *    step is ended at this point as a divergent run (its pending work is executed eagerly, so
 *    nothing is lost), and the thread runs eagerly until the next cgj_trace_end(), which then
 *    returns CGJ_OK. A nested begin counts as a divergence of the outer anchor.
 *  - CGJ_ERR_NO_DRIVER / CGJ_ERR_DISABLED: the step runs eagerly; cgj_trace_end() still pairs.
 * A step that never ends is bounded by CGJIT_MAX_OPS: past it the step is aborted to eager.
 */
CGJ_API int cgj_trace_begin(const char *name);

/*
 * End the step begun on this thread. In replay, launches what remains of the step's graph on
 * the stream the step used; the call returns without waiting for the GPU, as eager launches do.
 * Returns CGJ_OK, or CGJ_ERR_NOT_ACTIVE when no step is active on this thread (nothing changes).
 */
CGJ_API int cgj_trace_end(void);

/*
 * End the step begun on this thread as an abort: the work it absorbed is issued eagerly, in
 * order, nothing of this run is recorded or replayed, and the anchor notes the reason
 * ABORT_EXCEPTION (an abort is the program's choice: it never counts toward blacklisting the
 * anchor). For a step whose remaining work must not be replayed half-way, as when an exception
 * leaves it. Returns CGJ_OK, or CGJ_ERR_NOT_ACTIVE when no step is active on this thread.
 */
CGJ_API int cgj_trace_abort(void);

/*
 * Pause cgjit on the calling thread: until the matching cgj_trace_resume(), its driver and
 * library calls go straight to the driver, untraced (as with CGJIT_DISABLE=1, for this thread
 * only). Pauses count: each needs its resume. A step found without markers (CGJIT_STEP) open on
 * the thread ends first. A cgj_trace_begin() while paused runs its step eagerly (it still pairs
 * with its end). Returns CGJ_OK, or CGJ_ERR_NESTED when a step begun with cgj_trace_begin() is
 * open on this thread (nothing changes: end it first).
 */
CGJ_API int cgj_trace_pause(void);
/* Undo one cgj_trace_pause(). CGJ_OK, or CGJ_ERR_NOT_ACTIVE when the thread is not paused. */
CGJ_API int cgj_trace_resume(void);

/* Process-wide counters: X(field, description). */
/* clang-format off */
#define CGJ_STATS_LIST(X)                                                                     \
    X(steps, "steps ended (cgj_trace_end calls that closed a step)")                          \
    X(steps_replayed, "steps replayed from a graph from start to end")                        \
    X(steps_eager, "steps run eagerly (warmup, record, blacklisted, aborted, side exit)")    \
    X(ops_recorded, "driver calls recorded in eager runs")                                    \
    X(ops_absorbed, "driver calls absorbed by replay (checked against the trace, not issued)") \
    X(graph_launches, "segment graphs launched")                                              \
    X(params_patched, "graph nodes (kernels, copies, memsets) patched with a run's values before a launch") \
    X(bytes_staged, "host-to-device bytes staged through pinned memory in replay")            \
    X(staging_waits, "replays that waited for an earlier launch before reusing staging")      \
    X(side_exits, "replays that left the trace at a failed guard and finished eagerly")       \
    X(variant_switches, "replays that continued in another variant after a guard failed")     \
    X(slots_promoted, "kernel parameter slots found to vary in replay, patched from then on")  \
    X(aborts, "steps aborted to eager (untraceable call, nesting, CGJIT_MAX_OPS)")            \
    X(traces_built, "traces (variants included) built into graphs")                           \
    X(build_failures, "trace builds that failed (the anchor is then blacklisted)")            \
    X(anchors_blacklisted, "anchors blacklisted: they run eagerly for good")                  \
    X(pool_allocs, "in-step allocations served from the pool by replay (no driver call)")    \
    X(pool_frees, "in-step frees absorbed by replay (no driver call, no synchronization)")    \
    X(escape_exits, "side exits because a block an earlier replay returned is still held")   \
    X(pool_bytes, "device bytes mapped for the replay memory pool (a level, not a count)")  \
    X(lib_calls, "cuBLAS, cuBLASLt, cuDNN and NCCL calls made inside traced steps")          \
    X(lib_absorbed, "library calls replay absorbed whole: the library was not called")       \
    X(lib_relearned, "library calls whose arguments changed in replay: the library ran and the trace learned them") \
    X(anchors_evicted, "anchors whose traces and pool memory were given back to stay within CGJIT_POOL_MAX_GB") \
    X(values_promoted, "ops whose grid, block, copy or memset operands (or parameters) were found to vary in replay, patched from then on") \
    X(steps_probed, "steps of replaying anchors run eagerly on purpose, to measure whether replay pays (CGJIT_COST)") \
    X(anchors_off, "times an anchor turned replay off because it cost more than eager execution, or could not pay (a step too short for a graph)") \
    X(collectives_absorbed, "NCCL collective and point-to-point calls replay absorbed whole: their kernels replayed, launched before the call returned") \
    X(collectives_stuck, "replayed collectives reported as not completed after CGJIT_COLLECTIVE_TIMEOUT_S (a peer never made the same call)") \
    X(fusions, "chains fused into one generated kernel, or a GEMM or convolution with its bias and activation into one library call (CGJIT_MODE=default)") \
    X(ops_fused, "kernel launches those chains hold: each replays as part of its chain's kernel or call") \
    X(fusions_dropped, "chains (or registered kernels) left unfused, with a FUSE_* reason") \
    X(verify_segments, "replayed graphs checked against the program's own calls run eagerly on the same data (CGJIT_VERIFY)") \
    X(verify_divergences, "checked graphs whose results differed from eager execution (each reported on stderr)") \
    X(verify_unchecked, "graphs CGJIT_VERIFY could not check (reported once per anchor with the reason)") \
    X(params_patched_on_gpu, "of params_patched, kernel nodes patched on the GPU by cgjit's patch kernel (CGJIT_DEVICE_PATCH)") \
    X(patch_launches, "blocks of values set into a segment graph's patch node, whose kernel writes them into the graph's device-updatable kernel nodes as it runs (CGJIT_DEVICE_PATCH)") \
    X(launch_host_ns, "host nanoseconds replay spent launching segments: filling and setting patched values and cuGraphLaunch (or issuing the calls of a segment too short for a graph), the launches' part of a replayed step's host time; chunks handed under CGJIT_LAUNCH_ASYNC spend it on cgjit's launch thread")                                                                               \
    X(steps_warmup, "steps run eagerly and unrecorded as one of the first CGJIT_WARMUP_RUNS runs of a step not seen before") \
    X(builds_background, "traces built by cgjit's builder thread while the program went on (CGJIT_BUILD_BACKGROUND)") \
    X(steps_building, "steps run eagerly and unrecorded while cgjit's builder thread built their trace") \
    X(launches_handed, "of graph_launches, chunks patched and launched by cgjit's launch thread while the program went on (CGJIT_LAUNCH_ASYNC)")
/* clang-format on */

/*
 * ABI: cgj_stats_t and cgj_trace_info_t carry their own size in their first field, and fields
 * are only ever appended. The library fills only the bytes the caller's struct has, so a program
 * built against an older cgjit.h is never overrun by a newer library, and one built against a
 * newer header gets zeros in the fields an older library does not know. The inline functions
 * below set the size; a caller of the *_read functions sets it itself.
 */
typedef struct cgj_stats {
    uint64_t size; /* sizeof(cgj_stats_t) as the caller was built with */
#define CGJ_STATS_FIELD(field, doc) uint64_t field;
    CGJ_STATS_LIST(CGJ_STATS_FIELD)
#undef CGJ_STATS_FIELD
} cgj_stats_t;

/* Copy the process-wide counters into *out (out->size bytes of it). CGJ_ERR_INVALID_ARG if out
 * is NULL, or out->size is smaller than the size field itself or larger than 4096 bytes (no
 * version of the struct is: such a size is not a size). */
CGJ_API int cgj_stats_read(cgj_stats_t *out);
static inline int cgj_stats(cgj_stats_t *out)
{
    if (out) out->size = sizeof *out;
    return cgj_stats_read(out);
}

/* The governor (CGJIT_GOVERN): cgjit measures the program's pace with itself active and dormant
 * (every call straight through), in alternating windows, and keeps the faster. Its states:
 * X(NAME, "name", description). */
/* clang-format off */
#define CGJ_GOVERN_STATE_LIST(X)                                                                   \
    X(OFF, "off", "CGJIT_GOVERN=0, or CGJIT_VERIFY: each anchor's cost model alone decides, never dormant") \
    X(HELD, "held dormant", "CGJIT_GOVERN=2: dormant for the whole run")                          \
    X(LEARN, "learning", "counting step begins to choose the heartbeat, the step that repeats most") \
    X(SETTLE, "settling", "the heartbeat is chosen; a few beats before the first window")         \
    X(MEASURE, "measuring", "alternating windows active and dormant")                              \
    X(ACTIVE, "active", "measured: the program runs faster with cgjit active")                    \
    X(DORMANT, "dormant", "measured: the program runs faster without cgjit; every call goes straight through") \
    X(ANCHOR, "its step's cost model", "one marked step makes every step begin and cgjit finds none: that step's cost model (eager probes against replays) judges the process, with no dormant window")
/* clang-format on */

typedef enum cgj_govern_state {
#define CGJ_GOVERN_STATE_ENUM(name, text, doc) CGJ_GOVERN_##name,
    CGJ_GOVERN_STATE_LIST(CGJ_GOVERN_STATE_ENUM)
#undef CGJ_GOVERN_STATE_ENUM
} cgj_govern_state_t;

typedef struct cgj_govern_info {
    uint64_t size;        /* sizeof(cgj_govern_info_t) as the caller was built with */
    int32_t state;        /* a cgj_govern_state_t */
    int32_t dormant;      /* 1: dormant now */
    int32_t last_dormant; /* the last judgement's decision (1: dormant) */
    int32_t reserved;
    char heartbeat[160];         /* the heartbeat's step (its anchor's name); "" before one */
    uint64_t beats;              /* heartbeats counted */
    uint64_t windows;            /* measurement windows closed */
    uint64_t pairs_total;        /* pairs of windows measured in all */
    uint64_t judgements;         /* decisions taken (first ones and re-checks) */
    uint64_t phases;             /* heartbeats chosen: one per phase of the program */
    uint64_t switches;           /* changes between active and dormant */
    uint64_t pairs;              /* pairs behind the last judgement ... */
    double ratio, lo, hi;        /* ... its speed with cgjit active over dormant (above 1: faster
                                  * with cgjit: the pairs' mean, or their median where that
                                  * decided), with the mean's one-sided 95% bounds */
    uint64_t cur_pairs;          /* a judgement in progress: its pairs so far ... */
    double cur_ratio;            /* ... and their ratio */
    uint64_t measure_dormant_ns; /* time spent in dormant windows to measure */
    uint64_t dormant_ns;         /* time spent dormant in all */
} cgj_govern_info_t;

/* Fill *out (out->size bytes of it) with the governor's figures. CGJ_ERR_INVALID_ARG as for
 * cgj_stats_read. */
CGJ_API int cgj_govern_read(cgj_govern_info_t *out);
static inline int cgj_govern(cgj_govern_info_t *out)
{
    if (out) out->size = sizeof *out;
    return cgj_govern_read(out);
}
CGJ_API const char *cgj_govern_state_name(int state);

/* Anchor states: X(NAME, description). */
/* clang-format off */
#define CGJ_STATE_LIST(X)                                                           \
    X(WARMUP, "first runs: execute eagerly, unrecorded (CGJIT_WARMUP_RUNS), then recorded as a draft") \
    X(RECORD, "the run after the draft: executes eagerly, compared with it")       \
    X(REPLAY, "replays a built graph; divergent runs leave it at a side exit")      \
    X(BLACKLISTED, "runs eagerly for good; see the reason")                        \
    X(OFF, "replay did not pay: runs eagerly for now and tries again later, or, where it cannot pay (OFF_NO_GRAPH), until a longer step comes; see the reason")
/* clang-format on */

typedef enum cgj_state {
#define CGJ_STATE_ENUM(name, doc) CGJ_STATE_##name,
    CGJ_STATE_LIST(CGJ_STATE_ENUM)
#undef CGJ_STATE_ENUM
} cgj_state_t;

/* What cgjit knows of one anchor (the current variant's figures where there are several). */
typedef struct cgj_trace_info {
    uint64_t size; /* sizeof(cgj_trace_info_t) as the caller was built with */
    cgj_state_t state;
    uint32_t variants;        /* traces built for this anchor */
    uint32_t ops;             /* driver calls in the current variant's trace */
    uint32_t kernels;         /* kernel launches among them */
    uint32_t segments;        /* graphs the step is split into (host syncs split it) */
    uint32_t varying_slots;   /* kernel parameter slots patched on every replay */
    uint64_t runs;            /* steps begun with this anchor */
    uint64_t replays;         /* steps replayed from start to end */
    uint64_t side_exits;      /* replays that left the trace */
    uint32_t record_failures; /* eager runs that disagreed with the draft */
    uint32_t allocations;     /* in-step allocations of the current variant */
    uint64_t pool_bytes;      /* its planned pool region */
    uint64_t naive_bytes;     /* the sum of its allocation sizes (256-byte aligned) */
    uint64_t lower_bound;     /* the most bytes live at one time: no plan can use less */
    uint32_t lib_calls;       /* cuBLAS/cuBLASLt/cuDNN calls in the current variant's trace ... */
    uint32_t lib_absorbable;  /* ... and those replay absorbs whole when their guard holds (only
                               * under CGJIT_LIBS_LEARNED; by default the library always runs) */
    char reason[256];         /* why blacklisted, or the last divergence/abort; "" if none */
    int reason_code;          /* the same as a code of cgjit's reason table (0: none); see
                               * cgj_reason_name() and cgj_reason_hint() */
    uint32_t reason_op;       /* the op index the reason applies to, UINT32_MAX if none */
    uint64_t eager_step_ns;   /* median time from one begin of the step to the next, eager runs ... */
    uint64_t replay_step_ns;  /* ... and replayed runs (0 until measured; CGJIT_COST) */
    uint64_t reissued_ops;    /* absorbed ops re-issued eagerly when replays left the trace */
    /* Warm-up: what making the first trace cost on the host, and when it paid off. */
    uint64_t record_ns;        /* time spent recording calls (all recorded runs) ... */
    uint64_t recorded_ops;     /* ... for this many calls */
    uint64_t plan_ns;          /* planning the first variant's memory */
    uint64_t build_ns;         /* capturing, instantiating and uploading its graphs ... */
    uint64_t instantiate_ns;   /* ... of which instantiating them */
    uint64_t first_replay_run; /* the run (1 = first) that first replayed; 0: none yet */
    /* Runs made eager on purpose, besides warm-up, recording, side exits and blacklisting: */
    uint64_t probes;    /* eager probes that measure whether replay pays (CGJIT_COST) */
    uint64_t off_runs;  /* runs while the cost model had replay off */
    uint64_t busy_runs; /* runs begun while another thread ran a step of this anchor */
    /* Where an eager run's host time goes: inside the driver and library calls replay absorbs
     * (what replay can save on the host at most; the rest is the program's own work). */
    uint64_t eager_calls_ns; /* per eager run of the cost model (a probe, or a run while replay
                              * is off) of a step found without markers (CGJIT_STEP), mean;
                              * 0: none measured (a marked step's eager runs go straight
                              * through, untimed) */
    /* Fusion (mode default): the current variant's fused chains, the kernel launches they hold,
     * the chains or kernels left unfused and the last one's reason code (FUSE_*, 0: none), and
     * the host time compiling and validating fused kernels cost when it was built. */
    uint32_t fused_chains;
    uint32_t fused_ops;
    uint32_t fuse_drops;
    int fuse_reason_code;
    uint64_t fuse_ns;
    uint64_t fuse_compile_ns; /* of fuse_ns: generating, compiling (or finding in a cache) and
                               * loading the fused kernels ... */
    uint32_t fuse_cold;       /* ... of which this many NVRTC compiled (in no cache yet) */
    uint32_t fused_gemms;     /* of fused_chains: GEMMs replayed as one cuBLASLt matmul with the
                               * bias and activation after them (or alone, a faster algorithm
                               * found in max-autotune) */
    /* CGJIT_BUSY: the GPU's own time in a replayed step (kernels, copies and memsets, work that
     * overlaps counted once), measured with CUPTI: what only faster kernels can take. */
    uint64_t gpu_busy_ns;    /* mean over ... (0: not measured) */
    uint64_t gpu_busy_steps; /* ... this many replayed steps */
    uint64_t building_runs;  /* runs begun while cgjit's builder thread built a trace of it
                              * (eager, unrecorded: CGJIT_BUILD_BACKGROUND) */
    uint64_t warmup_runs;    /* runs it warmed up: eager, unrecorded (CGJIT_WARMUP_RUNS; under
                              * CGJIT_STEP=sync, until a warm-up run's length and work repeat) */
} cgj_trace_info_t;

/* The state's name, "WARMUP" ... "BLACKLISTED"; "?" for a value that is no cgj_state_t. */
CGJ_API const char *cgj_state_name(int state);

/* Fill *out (out->size bytes of it) for the anchor `name`. CGJ_ERR_NOT_FOUND if no step of that
 * name ever began; CGJ_ERR_INVALID_ARG for a NULL argument, or a size smaller than the field or
 * larger than 4096 bytes. */
CGJ_API int cgj_trace_info_read(const char *name, cgj_trace_info_t *out);
static inline int cgj_trace_info(const char *name, cgj_trace_info_t *out)
{
    if (out) out->size = sizeof *out;
    return cgj_trace_info_read(name, out);
}

/* A reason code's name ("ABORT_MAX_OPS"), and what the user can do about it ("" if nothing);
 * "?" and "" for a number that is no code. */
CGJ_API const char *cgj_reason_name(int code);
CGJ_API const char *cgj_reason_hint(int code);

/*
 * Modes, as torch.compile's: what replay may change. "reduce-overhead" (the default) replays the
 * kernels eager ran, results bitwise equal; "default" also fuses chains of elementwise kernels
 * registered below into generated kernels (NVRTC), each validated once against the kernels it
 * replaces, results within 1e-5 relative (1e-6 absolute) of eager per element; "max-autotune"
 * is "default" plus build-time tuning where cgjit has any. CGJIT_MODE sets it at start;
 * cgj_mode_set changes it for the traces built from then on (a trace keeps the mode it was
 * built in). Returns CGJ_OK, or CGJ_ERR_INVALID_ARG for NULL or another name.
 */
CGJ_API int cgj_mode_set(const char *mode);
/* The mode traces are built in now; never NULL. */
CGJ_API const char *cgj_mode_get(void);

/*
 * Register kernel `kernel` as elementwise, with what it computes, so that mode "default" may fuse
 * it with its neighbours. `kernel` is the kernel's name as the driver knows it: the plain name of
 * an extern "C" kernel, the mangled name of a C++ one, or a C++ kernel's plain name (it then
 * names every overload; the spec's layout picks the one it fits). `spec` lists the kernel's
 * parameters in order, each with its role, then the outputs' values per element:
 *
 *     cgj_op_register_elementwise("bias_gelu",
 *         "(out float y, in float x, in float b, count int n): y = gelu(x + b)");
 *
 * Roles: in, out, inout (pointers to float or double elements), count (the element count: int,
 * unsigned, long or size_t) and none for a scalar (float, double, int, unsigned, long, size_t).
 * Expressions: numbers, parameter names, + - * /, unary -, c ? a : b with < <= > >= == !=, and
 * exp log sqrt rsqrt tanh erf abs sigmoid relu gelu gelu_tanh min max pow. The kernel must
 * compute element i of its outputs from element i of its inputs for every i below the count;
 * what it claims is checked against the kernel on real data before any fusion is used.
 * The same lines, "KERNEL (PARAMS): OUT = EXPR", make a registry file (CGJIT_OPS=FILE).
 * Returns CGJ_OK, CGJ_ERR_INVALID_ARG (NULL or empty), or CGJ_ERR_SPEC (the spec does not parse:
 * a message naming the column is printed on stderr; the kernel stays opaque). Thread-safe.
 */
CGJ_API int cgj_op_register_elementwise(const char *kernel, const char *spec);

/* Write a human-readable report to f (stderr if NULL): a summary (share of steps replayed, host
 * time saved, the top reasons steps ran eagerly with what to do), then every anchor, most host
 * time saved or lost first (those that ran once in one line), other reasons, nonzero counters.
 * CGJIT_REPORT=json:FILE writes the same at exit as JSON (docs/report-schema.json). */
CGJ_API void cgj_report(FILE *f);

/* The JSON report (docs/report-schema.json), as CGJIT_REPORT=json:FILE writes it, into buf:
 * at most size bytes, NUL-terminated where size is not 0 (buf may be NULL when size is 0).
 * Returns the bytes the whole report needs, its terminating NUL included (as snprintf, plus
 * one): a return above size means buf holds a truncated report; 0 if it could not be made. */
CGJ_API size_t cgj_report_json_buf(char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* CGJIT_H */
