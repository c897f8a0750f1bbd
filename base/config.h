/*
 * config.h — cgjit's tunables, read once from CGJIT_* environment variables.
 *
 * Every tunable is one row of CGJ_CONFIG_LIST: its name (the variable is CGJIT_<NAME>), kind,
 * default and one-line documentation. The struct, the parser and the documentation printed by
 * cgj_config_describe() are all expanded from that one table. A malformed value produces a
 * one-line warning naming the variable and keeps the default; it never stops the program.
 */
#ifndef CGJ_CONFIG_H
#define CGJ_CONFIG_H

#include <stdio.h>

/* X(NAME, kind INT|STR, default, minimum (INT only), doc) */
#define CGJ_CONFIG_LIST(X)                                                                        \
    X(DISABLE, INT, 0, 0, "1: trace nothing; every call is forwarded to the driver")               \
    X(LOG, STR, "", 0, "log categories, comma-separated (trace,guards,breaks,graphs,...,all)")    \
    X(LOG_FILE, STR, "", 0, "write the log to this file instead of stderr")                       \
    X(DRIVER, STR, "libcuda.so.1", 0, "the CUDA driver library cgjit forwards to")                \
    X(MAX_RECORDS, INT, 4, 1, "eager runs that may disagree with the draft before blacklisting") \
    X(MAX_VARIANTS, INT, 4, 1, "traces (variants) kept per anchor")                               \
    X(MAX_OPS, INT, 100000, 16, "driver calls one step may hold; longer steps abort to eager")    \
    X(REPORT, INT, 0, 0, "1: print cgj_report() to stderr (or CGJIT_LOG_FILE) at exit")        \
    X(POOL_RESERVE_GB, INT, 64, 1, "virtual address space reserved for the replay memory pool") \
    X(DUMP_ALLOCS, STR, "", 0, "directory: write each trace's allocation events (cgjit-plan format)") \
    X(STEP, STR, "", 0, "steps without markers: sync, auto or off (default: sync when preloaded, else off)") \
    X(CHUNK_OPS, INT, 256, 0, "before a sync, launch a segment in graphs of this many ops (0: one graph)") \
    X(LIBS, INT, 1, 0, "0: never absorb cuBLAS/cuDNN calls whole (the libraries run; their kernels still replay)")

#define CGJ_CFG_TYPE_INT long
#define CGJ_CFG_TYPE_STR const char *

typedef struct cgj_config {
#define CGJ_CFG_FIELD(name, kind, def, min, doc) CGJ_CFG_TYPE_##kind name;
    CGJ_CONFIG_LIST(CGJ_CFG_FIELD)
#undef CGJ_CFG_FIELD
} cgj_config_t;

extern cgj_config_t cgj_cfg;

/* Read the environment into cgj_cfg (idempotent; called from the runtime's init). */
void cgj_config_load(void);
/* One line per tunable: name, default, documentation. */
void cgj_config_describe(FILE *f);

#endif /* CGJ_CONFIG_H */
