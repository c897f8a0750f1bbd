/*
 * config.h — cgjit's tunables, read once from CGJIT_* environment variables.
 *
 * Every tunable is one row of CGJ_CONFIG_LIST. The struct, the parser, cgjit-run's options and
 * its --help, and docs/configuration.md's table (`cgjit-run --config-table`) are all
 * expanded from that one table, so none of them can drift from the others. A malformed value
 * produces a one-line warning naming the variable and the value used instead (the default); it
 * never stops the program (cgjit-run, by contrast, refuses it with status 2). Every value that
 * has a form is checked here, as it is read, whether or not a CUDA driver is found later: the
 * integers and booleans, CGJIT_REPORT, CGJIT_MODE, CGJIT_STEP and CGJIT_LOG's categories; a
 * CGJIT_* variable that names no tunable (a misspelling) is warned about too. The value is quoted
 * with its control characters and invalid UTF-8 escaped (cgj_text_str), so that the warning stays
 * one line whatever it holds. Variables are read with secure_getenv, and so is every other
 * variable cgjit reads that names a path (HOME, XDG_CACHE_HOME, CUDA_HOME): a set-user-ID or
 * file-capability program gets the defaults. cgj_config_set parses one value as loading does
 * (the fuzzer's entry, and the launcher's checks share cgj_config_int and cgj_config_report with
 * it).
 *
 * Columns: X(NAME, KIND, DEFAULT, MIN, MAX, OPTION, OPTKIND, METAVAR, SHOWN, DOC)
 *  - the variable is CGJIT_<NAME>; KIND INT, BOOL (1/0, true/false, yes/no, on/off) or STR;
 *    MIN and MAX bound an INT (a value outside them, or one that is no integer, keeps the
 *    default with a warning naming the variable and the value used); CGJIT_REPORT, a STR, is
 *    checked by cgj_config_report (a boolean word, json:FILE or text:FILE);
 *  - OPTION the cgjit-run option (--OPTION), NULL for none; OPTKIND how it takes its value:
 *    FLAG (none; sets 1), INT, BOOL, TEXT (a non-empty name), STEP (a policy of
 *    CGJ_STEP_POLICY_LIST), MODE (a mode of CGJ_JIT_MODE_LIST), LOG (categories of base/log.h),
 *    REPORT (none, setting 1, or one of cgj_config_report's forms after '='), NONE;
 *  - METAVAR the value's name in --help; SHOWN the default as a user reads it where the raw
 *    default says nothing ("" → "none"), NULL to show the default itself; DOC one sentence.
 */
#ifndef CGJ_CONFIG_H
#define CGJ_CONFIG_H

#include <stdio.h>

/* clang-format off */
#define CGJ_CONFIG_LIST(X)                                                                         \
    X(STEP, STR, "", 0, 0, "step", STEP, "MODE", "sync",                                              \
      "how a step is found without cgj_trace_begin/end markers (default: sync when preloaded, off when linked); markers in the code take precedence") \
    X(LOG, STR, "", 0, 0, "log", LOG, "CATS", "none",                                                 \
      "log categories, comma-separated: trace, guards, breaks, graphs, blacklist, cost, interpose, api, or all") \
    X(LOG_FILE, STR, "", 0, 0, "log-file", TEXT, "FILE", "stderr",                                   \
      "append the log and the exit report to FILE") \
    X(REPORT, STR, "0", 0, 0, "report", REPORT, "json:FILE", NULL,                                     \
      "1: print the report at exit (to stderr or CGJIT_LOG_FILE): what was replayed, and why not where it was not; json:FILE writes it to FILE as JSON, text:FILE as text") \
    X(TRACE_FILE, STR, "", 0, 0, "trace-file", TEXT, "FILE", "none",                                \
      "write a timeline of steps (eager or replayed), builds and side exits to FILE at exit, as a Chrome trace (Perfetto, chrome://tracing)") \
    X(TRACE_EVENTS, INT, 1000000, 1000, 100000000, "trace-events", INT, "N", NULL,                 \
      "events the timeline of CGJIT_TRACE_FILE keeps; later ones are counted, not kept") \
    X(REPORT_EVERY_S, INT, 0, 0, 86400, "report-every-s", INT, "S", NULL,                           \
      "also write the report and the timeline (CGJIT_REPORT, CGJIT_TRACE_FILE) every S seconds while the program runs (0: only at exit, or when SIGTERM or SIGINT ends it)") \
    X(DISABLE, BOOL, 0, 0, 1, "disable", FLAG, NULL, NULL,                                             \
      "1: trace nothing; forward every driver call as it is") \
    X(WARMUP_RUNS, INT, 1, 0, 1000000, "warmup-runs", INT, "N", NULL,                                 \
      "the first N runs of a step cgjit has not seen before run eagerly and unrecorded; it records from run N + 1 (a step the program makes only once costs nothing to record; under CGJIT_STEP=sync a step also warms up until a warm-up run is as long as an earlier one and does the same work, 16 runs at most, and a warm-up run that makes 256 calls without a synchronization ends there, and the step begun at that call is recorded)") \
    X(MAX_RECORDS, INT, 4, 1, 1000000, "max-records", INT, "N", NULL,                                       \
      "eager runs that may disagree with the draft before the anchor is blacklisted") \
    X(MAX_VARIANTS, INT, 8, 1, 16, "max-variants", INT, "N", NULL,                                     \
      "traces (variants) kept per anchor; at most 16 are used") \
    X(MAX_OPS, INT, 100000, 16, 4294967295, "max-ops", INT, "N", NULL,                                         \
      "calls one step may hold; a longer step runs eagerly") \
    X(POOL_RESERVE_GB, INT, 64, 1, 1048576, "pool-reserve-gb", INT, "N", NULL,                              \
      "GiB of virtual address space reserved for the memory pool of replayed steps") \
    X(POOL_MAX_GB, INT, 16, 1, 1048576, "pool-max-gb", INT, "N", NULL,                             \
      "GiB of device memory the replay pool may map; past it the coldest anchors give their traces and memory back") \
    X(DUMP_ALLOCS, STR, "", 0, 0, "dump-allocs", TEXT, "DIR", "none",                                 \
      "write each trace's allocation events to DIR/ANCHOR-vN.txt (the format cgjit-plan reads)") \
    X(CHUNK_OPS, INT, 256, 0, 1000000, "chunk-ops", INT, "N", NULL,                                         \
      "replay launches a step in graphs of N ops as they are absorbed; a side exit re-issues at most one (0: one graph per segment)") \
    X(DEVICE_PATCH, INT, 8, 0, 1000000, "device-patch", INT, "N", NULL,                                  \
      "a segment graph with at least N kernels to patch every run has them patched on the GPU by a kernel of cgjit's at the graph's root (0: every node is patched from the host)") \
    X(CHUNK_US, INT, 50, 0, 1000000, "chunk-us", INT, "US", NULL,                                        \
      "replay also ends a chunk where the program spent US microseconds of its own host time between the chunk's calls (as recorded), so the GPU runs the chunk meanwhile, unless what is left before the next boundary is a short tail (docs/replay.md) (0: chunks by op count only)") \
    X(GRAPH_MIN_OPS, INT, 3, 1, 1000000, "graph-min-ops", INT, "N", NULL,                               \
      "a segment of fewer than N graph ops is issued eagerly at replay, not launched as a graph (too small to pay for a graph's launch)") \
    X(COST, BOOL, 1, 0, 1, "cost", BOOL, "0|1", NULL,                                                   \
      "measure each anchor's replayed and eager steps (1 in 64 runs eagerly) and turn replay off where it does not pay (not while CGJIT_VERIFY checks replays)") \
    X(LIBS, BOOL, 1, 0, 1, "libs", BOOL, "0|1", NULL,                                                   \
      "0: cuBLAS/cuDNN/NCCL calls are not looked at as calls (their driver calls replay like any other); 1: each is one op of its step, keyed by its arguments, and the library runs on every call") \
    X(LIBS_LEARNED, BOOL, 0, 0, 1, "libs-learned", BOOL, "0|1", NULL,                               \
      "1: UNSAFE, CAN COMPUTE WRONG RESULTS: skip a library call whose arguments match what two earlier runs saw and replay the kernels those runs suggest; the library keeps state cgjit cannot see") \
    X(VERIFY, BOOL, 0, 0, 1, "verify", FLAG, NULL, NULL,                                              \
      "1: check every replayed graph against the program's own calls run eagerly on the same data, report the first divergence on stderr, and keep the eager results (slow: a debugging mode)") \
    X(VERIFY_ALL, BOOL, 0, 0, 1, "verify-all", FLAG, NULL, NULL,                                      \
      "1: verify (CGJIT_VERIFY) with every allocation the program holds copied aside and compared, not only those a graph's ops name: also catches and undoes a graph that writes where none of its ops point (slower still)") \
    X(BUSY, BOOL, 0, 0, 1, "busy", FLAG, NULL, NULL,                                                  \
      "1: measure each replaying anchor's GPU-busy time per step with CUPTI's activity API; the report prints replay / GPU-busy (CUPTI adds host time to every driver call: such a run's speed is not the program's)") \
    X(NVTX, BOOL, 0, 0, 1, "nvtx", FLAG, NULL, NULL,                                                  \
      "1: show cgjit's own work on a profiler's timeline (Nsight Systems) as NVTX ranges in the domain cgjit, named with the anchors: recordings, builds, replayed segment launches, eager probes, side exits, and the governor's switches as marks") \
    X(GOVERN, INT, 1, 0, 2, "govern", INT, "0|1|2", NULL,                                          \
      "the governor: 1 alternates windows with cgjit active and dormant, measures the program's pace in each and keeps the faster; 0 leaves replay to each step's own cost model; 2 keeps cgjit dormant for the whole run (every call straight through: what preloading alone costs)") \
    X(COLLECTIVE_TIMEOUT_S, INT, 60, 0, 86400, "collective-timeout-s", INT, "S", NULL,                \
      "a replayed NCCL collective that has not completed after S seconds is reported on stderr: a peer never made the same call (0: not watched)") \
    X(MODE, STR, "reduce-overhead", 0, 0, "mode", MODE, "MODE", NULL,                               \
      "what replay may change: reduce-overhead (graphs only, bitwise equal), default (also fuses elementwise chains, within a stated tolerance), max-autotune (default, and more build-time work)") \
    X(FOLD_TIMING, BOOL, 1, 0, 1, "fold-timing", BOOL, "0|1", NULL,                                      \
      "1: a GEMM or convolution is folded with its bias and activation into one library call only where that runs faster than the program's calls (timed at build); 0: wherever it is within tolerance") \
    X(OPS, STR, "", 0, 0, "ops", TEXT, "FILE", "none",                                                 \
      "a registry of elementwise kernels (one 'KERNEL (PARAMS): OUT = EXPR' per line) that fusion may fuse") \
    X(CACHE_DIR, STR, "", 0, 0, "cache-dir", TEXT, "DIR", "$XDG_CACHE_HOME/cgjit",                  \
      "where compiled fused kernels are kept between runs ('off': in memory only)") \
    X(NVRTC, STR, "", 0, 0, NULL, NONE, NULL, "libnvrtc.so.13, .12, the toolkit's",                    \
      "the NVRTC library fusion compiles with") \
    X(FUSE_BACKGROUND, BOOL, 1, 0, 1, "fuse-background", BOOL, "0|1", NULL,                            \
      "1: a fused kernel not in a cache is compiled by a thread while its chain replays unfused, and the step is built again once it is ready (no step waits for NVRTC); 0: compiled at the build") \
    X(LAUNCH_ASYNC, BOOL, 0, 0, 1, "launch-async", BOOL, "0|1", NULL,                                  \
      "1: a chunk that ends inside a segment (CGJIT_CHUNK_US, CGJIT_CHUNK_OPS) is patched and launched by a thread of cgjit's while the program goes on; every call that runs for real, boundary or step end waits for it first (not under CGJIT_VERIFY or CGJIT_BUSY); 0: launched on the program's thread") \
    X(BUILD_BACKGROUND, BOOL, 1, 0, 1, "build-background", BOOL, "0|1", NULL,                          \
      "1: a step's graphs are built by a thread of cgjit's while the program goes on, its runs meanwhile eager (the build's planning, capture and instantiation off the program's thread); 0: at the end of the run that completes the recording (always so under CGJIT_VERIFY, and where fusion is on: CGJIT_MODE other than reduce-overhead)") \
    X(DRIVER, STR, "libcuda.so.1", 0, 0, NULL, NONE, NULL, NULL,                                      \
      "the CUDA driver library cgjit forwards to (tests point it at a fake)")
/* clang-format on */

/* X(NAME, "value", doc): how steps are found without markers (CGJIT_STEP). */
/* clang-format off */
#define CGJ_STEP_POLICY_LIST(X)                                                                    \
    X(OFF, "off", "record nothing; every call runs eagerly")                                       \
    X(SYNC, "sync", "a step is the work between two host synchronizations (stream, context or event synchronize, blocking device-to-host copy)")                        \
    X(AUTO, "auto", "detect the repeating cycle of driver calls (finds a loop that never synchronizes)")
/* clang-format on */

/* X(NAME, "value", doc): what replay may change (CGJIT_MODE), torch.compile's modes. */
/* clang-format off */
#define CGJ_JIT_MODE_LIST(X)                                                                           \
    X(REDUCE_OVERHEAD, "reduce-overhead", "graphs only: the same kernels run, results bitwise equal to eager") \
    X(DEFAULT, "default", "also fuse elementwise chains into generated kernels, validated at build within 1e-5 relative")  \
    X(MAX_AUTOTUNE, "max-autotune", "as default; build-time tuning where cgjit has any")
/* clang-format on */

typedef enum cgj_jit_mode {
#define CGJ_JIT_MODE_ENUM(name, value, doc) CGJ_JIT_##name,
    CGJ_JIT_MODE_LIST(CGJ_JIT_MODE_ENUM)
#undef CGJ_JIT_MODE_ENUM
        CGJ_JIT_MODE_COUNT
} cgj_jit_mode_t;

/* The mode named `s`, or -1. */
int cgj_jit_mode_parse(const char *s);
/* "reduce-overhead", "default", "max-autotune"; "?" out of range. */
const char *cgj_jit_mode_name(int mode);
/* The mode traces are built in: CGJIT_MODE as loaded (a malformed value was warned about and is
 * reduce-overhead), or as cgj_mode_set made it since. */
cgj_jit_mode_t cgj_jit_mode(void);
/* Set the mode for the traces built from now on (cgj_mode_set); thread-safe. */
void cgj_jit_mode_set(cgj_jit_mode_t m);

typedef enum cgj_step_policy {
#define CGJ_STEP_POLICY_ENUM(name, value, doc) CGJ_STEP_##name,
    CGJ_STEP_POLICY_LIST(CGJ_STEP_POLICY_ENUM)
#undef CGJ_STEP_POLICY_ENUM
        CGJ_STEP_POLICY_COUNT
} cgj_step_policy_t;

/* The policy named `s`, or -1. */
int cgj_step_policy_parse(const char *s);
/* "off", "sync", "auto"; "?" out of range. */
const char *cgj_step_policy_name(int policy);
/* What CGJIT_REPORT asks for: nothing, the text report or the JSON one. */
typedef enum cgj_report_kind { CGJ_REPORT_OFF, CGJ_REPORT_TEXT, CGJ_REPORT_JSON } cgj_report_kind_t;
/* The report `s` asks for: a boolean word (1: text to stderr or CGJIT_LOG_FILE), "json:FILE"
 * or "text:FILE"; *file is FILE (NULL for none). -1 if s is none of these. File names may hold
 * %p (base/file.h). */
int cgj_config_report(const char *s, const char **file);
/* The value of a boolean word (1/0, true/false, yes/no, on/off, any case), or -1. */
int cgj_config_bool(const char *s);
/* `s` as an integer from min to max into *out: decimal digits, a '-' before them at most, nothing
 * else (no space, no '+', no trailing text); 0, or -1 (*out untouched) when it is none. */
int cgj_config_int(const char *s, long long min, long long max, long long *out);

#define CGJ_CFG_TYPE_INT long long
#define CGJ_CFG_TYPE_BOOL long long
#define CGJ_CFG_TYPE_STR const char *

typedef struct cgj_config {
#define CGJ_CFG_FIELD(name, kind, def, min, max, opt, optkind, metavar, shown, doc) CGJ_CFG_TYPE_##kind name;
    CGJ_CONFIG_LIST(CGJ_CFG_FIELD)
#undef CGJ_CFG_FIELD
} cgj_config_t;

extern cgj_config_t cgj_cfg;

/* Read the environment into cgj_cfg (idempotent; called from the runtime's init). */
void cgj_config_load(void);
/* Set the tunable `var` (CGJIT_NAME) from `value` as loading it from the environment would,
 * warning on stderr about a malformed value (the default is kept). A STR tunable keeps the
 * pointer: `value` must outlive its use. 0, or -1 when `var` is no tunable. */
int cgj_config_set(const char *var, const char *value);
/* One line per tunable: name, default, documentation. */
void cgj_config_describe(FILE *f);

#endif /* CGJ_CONFIG_H */
