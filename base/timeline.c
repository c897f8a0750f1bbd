/* timeline.c — the event buffer behind CGJIT_TRACE_FILE and its Chrome trace; see timeline.h. */
#define _GNU_SOURCE /* syscall(SYS_gettid) */
#include "base/timeline.h"
#include "base/json.h"

#include <inttypes.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHUNK_BITS 12
#define CHUNK (1u << CHUNK_BITS) /* events per chunk */

int cgj_timeline_on;
static cgj_tl_event_t **chunks; /* max_events / CHUNK pointers, filled on first use */
static uint64_t max_events, next, origin_ns;

void cgj_timeline_start(uint64_t max)
{
    if (__atomic_load_n(&cgj_timeline_on, __ATOMIC_ACQUIRE)) return;
    max_events = max;
    chunks = cgj_xcalloc((size_t)((max + CHUNK - 1) >> CHUNK_BITS), sizeof *chunks);
    origin_ns = cgj_now_ns();
    __atomic_store_n(&cgj_timeline_on, 1, __ATOMIC_RELEASE);
}

void cgj_timeline_stop(void)
{
    __atomic_store_n(&cgj_timeline_on, 0, __ATOMIC_RELEASE);
}

static uint32_t thread_id(void)
{
    static __thread uint32_t tid;
    if (!tid) tid = (uint32_t)syscall(SYS_gettid);
    return tid;
}

/* The chunk of slot i, allocated by the first writer that needs it (a loser frees its copy). */
static cgj_tl_event_t *chunk_of(uint64_t i)
{
    cgj_tl_event_t **p = &chunks[i >> CHUNK_BITS];
    cgj_tl_event_t *c = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    if (c) return c;
    cgj_tl_event_t *fresh = cgj_xcalloc(CHUNK, sizeof *fresh);
    if (__atomic_compare_exchange_n(p, &c, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return fresh;
    cgj_free(fresh);
    return c;
}

cgj_tl_event_t *cgj_timeline_take(char ph, const char *cat, const char *name)
{
    if (!__atomic_load_n(&cgj_timeline_on, __ATOMIC_ACQUIRE)) return NULL;
    uint64_t i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
    if (i >= max_events) return NULL; /* counted by `next`, not kept */
    cgj_tl_event_t *e = &chunk_of(i)[i & (CHUNK - 1)];
    memset(e, 0, sizeof *e);
    e->ts_ns = cgj_now_ns();
    e->cat = cat;
    e->name = name;
    e->ph = ph;
    e->tid = thread_id();
    return e;
}

void cgj_timeline_put(cgj_tl_event_t *e)
{
    if (e) __atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
}

void cgj_tl_str(cgj_tl_event_t *e, const char *key, const char *val)
{
    for (int k = 0; e && k < CGJ_TL_ARGS; k++)
        if (!e->skey[k]) {
            e->skey[k] = key, e->sval[k] = val;
            return;
        }
}

void cgj_tl_num(cgj_tl_event_t *e, const char *key, int64_t val)
{
    for (int k = 0; e && k < CGJ_TL_ARGS; k++)
        if (!e->nkey[k]) {
            e->nkey[k] = key, e->nval[k] = val;
            return;
        }
}

uint64_t cgj_timeline_kept(void)
{
    uint64_t n = __atomic_load_n(&next, __ATOMIC_RELAXED);
    return n < max_events ? n : max_events;
}

uint64_t cgj_timeline_dropped(void)
{
    uint64_t n = __atomic_load_n(&next, __ATOMIC_RELAXED);
    return n > max_events ? n - max_events : 0;
}

/* ---- the Chrome trace ---- */

static void write_args(FILE *f, const cgj_tl_event_t *e)
{
    int first = 1;
    fputs(",\"args\":{", f);
    for (int k = 0; k < CGJ_TL_ARGS && e->skey[k]; k++, first = 0) {
        cgj_json_key(f, e->skey[k], first);
        cgj_json_str(f, e->sval[k]);
    }
    for (int k = 0; k < CGJ_TL_ARGS && e->nkey[k]; k++, first = 0) {
        cgj_json_key(f, e->nkey[k], first);
        fprintf(f, "%" PRId64, e->nval[k]);
    }
    if (e->detail[0]) {
        cgj_json_key(f, "detail", first);
        cgj_json_str(f, e->detail);
    }
    fputc('}', f);
}

/* One event; times in microseconds from the origin, as Chrome's format has them. */
static void write_event(FILE *f, const cgj_tl_event_t *e, int pid)
{
    double ts = e->ts_ns >= origin_ns ? (double)(e->ts_ns - origin_ns) / 1e3 : 0.0;
    fputs(",\n{\"name\":", f);
    cgj_json_str(f, e->name);
    fputs(",\"cat\":", f);
    cgj_json_str(f, e->cat);
    fprintf(f, ",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u", e->ph, ts, pid, e->tid);
    if (e->ph == 'X') fprintf(f, ",\"dur\":%.3f", (double)e->dur_ns / 1e3);
    if (e->ph == 'i') fputs(",\"s\":\"t\"", f);
    write_args(f, e);
    fputc('}', f);
}

bool cgj_timeline_write(FILE *f, const char *process)
{
    int pid = (int)getpid();
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"kept\":%" PRIu64 ",\"dropped\":%" PRIu64 "},\n",
            cgj_timeline_kept(), cgj_timeline_dropped());
    fprintf(f,
            "\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
    cgj_json_str(f, process);
    fputs("}}", f);
    uint64_t n = cgj_timeline_kept();
    for (uint64_t i = 0; i < n; i++) {
        const cgj_tl_event_t *c = chunks ? __atomic_load_n(&chunks[i >> CHUNK_BITS], __ATOMIC_ACQUIRE) : NULL;
        if (c && __atomic_load_n(&c[i & (CHUNK - 1)].ready, __ATOMIC_ACQUIRE)) write_event(f, &c[i & (CHUNK - 1)], pid);
    }
    fputs("\n]}\n", f);
    return !ferror(f);
}
