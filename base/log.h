/*
 * log.h — cgjit's log, by category, to stderr or CGJIT_LOG_FILE.
 *
 * CGJIT_LOG=trace,guards,breaks (or `all`) selects categories from CGJ_LOG_LIST. A disabled
 * category costs one load and one branch at the call site: arguments are not evaluated.
 * Lines read "cgjit[CATEGORY] ..." on stderr and "cgjit[PID:CATEGORY] ..." in a log file, which
 * several processes may append to (CGJIT_LOG_FILE; `%p` in its name is the pid).
 *
 * Messages hold what programs and users give (kernel and anchor names, file names, registry
 * lines), which may be any bytes. Every line cgjit writes, to the log or as a message on stderr,
 * is formatted first and then written with control characters, backslashes and bytes of no
 * valid UTF-8 sequence escaped (cgj_text_str of base/json.h): it stays one line, and a terminal
 * never interprets it.
 */
#ifndef CGJ_LOG_H
#define CGJ_LOG_H

#include <stdint.h>
#include <stdio.h>

/* X(name, doc) */
/* clang-format off */
#define CGJ_LOG_LIST(X)                                                        \
    X(trace, "what each step recorded, built and replayed")                    \
    X(guards, "why a guard failed: op index, slot, expected vs actual bytes")  \
    X(breaks, "why a step was split into segments")                            \
    X(graphs, "graph capture, instantiation, launches and patches")            \
    X(blacklist, "why an anchor was blacklisted or a step aborted to eager")   \
    X(cost, "each judgement of the cost model: eager probes against replays")  \
    X(interpose, "driver symbols handed out through dlsym/cuGetProcAddress")   \
    X(govern, "the governor's heartbeat, windows and judgements (active or dormant)")  \
    X(api, "cgj_* API calls and their errors")
/* clang-format on */

typedef enum cgj_log_cat {
#define CGJ_LOG_ENUM(name, doc) CGJ_LOG_##name,
    CGJ_LOG_LIST(CGJ_LOG_ENUM)
#undef CGJ_LOG_ENUM
        CGJ_LOG_COUNT
} cgj_log_cat_t;

extern uint32_t cgj_log_mask;

/* Parse CGJIT_LOG / CGJIT_LOG_FILE (from cgj_cfg); unknown names give a warning. */
void cgj_log_init(void);
/* In a child after fork(): the log's lock as if unlocked (the thread holding it is gone). */
void cgj_log_forked(void);
/* The stream logs and reports go to. */
FILE *cgj_log_stream(void);
void cgj_log_write(cgj_log_cat_t cat, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A message for the user on stderr, whatever CGJIT_LOG says: "cgjit: " and the text, escaped as
 * the essay says, on one line. */
void cgj_log_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Hex of up to 32 bytes into buf (at least 2*32+4 bytes), for guard messages. */
const char *cgj_log_hex(char *buf, const void *p, size_t n);

#define CGJ_LOG(cat, ...)                                                                                         \
    do {                                                                                                          \
        if (__builtin_expect(cgj_log_mask & (1u << CGJ_LOG_##cat), 0)) cgj_log_write(CGJ_LOG_##cat, __VA_ARGS__); \
    } while (0)

#endif /* CGJ_LOG_H */
