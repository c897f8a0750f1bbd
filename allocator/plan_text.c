/*
 * plan_text.c — the text format of allocation traces (plan.h): cgj_plan_parse and
 * cgj_plan_write. It is what CGJIT_DUMP_ALLOCS writes and cgjit-plan reads; kept apart from
 * the planner, which never sees names or lines, only blocks.
 *
 * The parser knows every ID it has seen: a record per ID (its latest block, whether it is live,
 * the line of its latest event), found through base/map.h by a hash of the name; names that
 * share a hash are told apart by comparing the names themselves.
 *
 * An error message quotes the input's tokens, which may hold any byte: they are shown escaped
 * (shown()), so that the message stays one line of printable text whatever the file holds.
 */
#include "allocator/plan_internal.h"
#include "base/map.h"
#include "base/vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

/* ---- parsing ---- */

typedef struct id_rec {
    char *id;
    uint32_t block; /* the ID's latest block */
    int live;
    unsigned long line; /* of its latest allocation, or of its free when not live */
} id_rec_t;

typedef struct parser {
    cgj_map_t ids; /* hash of an ID -> its index in recs */
    id_rec_t *recs;
    size_t nrecs, caprecs;
    cgj_plan_block_t *blocks;
    size_t n, cap;
    uint32_t pos;   /* events so far */
    uint64_t total; /* aligned bytes so far */
    unsigned long line;
    char why[192];
} parser_t;

/* For cgj_map_find: is the record of index v the ID's? */
typedef struct id_probe {
    const id_rec_t *recs;
    const char *id;
} id_probe_t;

static bool id_is(const void *ctx, uint64_t v)
{
    const id_probe_t *q = ctx;
    return strcmp(q->recs[v].id, q->id) == 0;
}

/* The record of ID, or NULL if it was never seen; *key: the ID's key in p->ids. */
static id_rec_t *id_find(parser_t *p, const char *id, uint64_t *key)
{
    *key = cgj_hash_bytes(id, strlen(id), 0);
    id_probe_t q = {p->recs, id};
    uint64_t v;
    return cgj_map_find(&p->ids, *key, id_is, &q, &v) ? &p->recs[v] : NULL;
}

/* A new record for ID, whose key is `key` (from id_find). */
static id_rec_t *id_add(parser_t *p, const char *id, uint64_t key)
{
    cgj_map_add(&p->ids, key, p->nrecs);
    id_rec_t *s = CGJ_VEC_ADD(p->recs, p->nrecs, p->caprecs);
    s->id = cgj_xstrdup(id);
    return s;
}

static void ids_free(parser_t *p)
{
    for (size_t i = 0; i < p->nrecs; i++) cgj_free(p->recs[i].id);
    cgj_free(p->recs);
    cgj_map_free(&p->ids);
}

/* BYTES: decimal digits only. Returns NULL or why not. */
static const char *parse_bytes(const char *s, uint64_t *out)
{
    if (*s == '-') {
        size_t d = strspn(s + 1, "0123456789");
        return d > 0 && s[1 + d] == '\0' ? "negative size" : "size is not a number";
    }
    if (*s == '\0' || s[strspn(s, "0123456789")] != '\0') return "size is not a number";
    uint64_t v = 0;
    for (; *s; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return "size overflows 64 bits";
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (v > MAX_BLOCK_BYTES) return "size above the limit of 2^44 bytes";
    *out = v;
    return NULL;
}

/* A token as a message shows it: printable ASCII as it is, a backslash and every other byte as
 * a C escape (\\, \x1b), at most SHOWN_MAX bytes of it ("..." after a longer one). */
#define SHOWN_MAX 64
typedef struct shown_buf {
    char s[4 * SHOWN_MAX + 4];
} shown_buf_t;

static const char *shown(const char *tok, shown_buf_t *b)
{
    size_t k = 0, i = 0;
    for (; tok[i] && i < SHOWN_MAX; i++) {
        unsigned char c = (unsigned char)tok[i];
        if (c == '\\') b->s[k++] = '\\', b->s[k++] = '\\';
        else if (c >= 0x20 && c < 0x7f) b->s[k++] = (char)c;
        else k += (size_t)snprintf(b->s + k, sizeof b->s - k, "\\x%02x", c);
    }
    if (tok[i]) memcpy(b->s + k, "...", 3), k += 3;
    b->s[k] = '\0';
    return b->s;
}

/* Record why the line is bad; returns -1. */
__attribute__((format(printf, 2, 3))) static int fail(parser_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
    return -1;
}

/* Split a line (comment already cut) into up to max tokens; returns how many there were. */
static int tokenize(char *s, char **tok, int max)
{
    int k = 0;
    for (char *save = NULL, *t = strtok_r(s, " \t\r\n\v\f", &save); t; t = strtok_r(NULL, " \t\r\n\v\f", &save), k++)
        if (k < max) tok[k] = t;
    return k;
}

static int parse_alloc(parser_t *p, const char *id, const char *bytes)
{
    uint64_t size = 0;
    shown_buf_t sb;
    const char *why = parse_bytes(bytes, &size);
    if (why) return fail(p, "%s: '%s'", why, shown(bytes, &sb));
    if (p->total + align_size(size) >= MAX_TOTAL_BYTES) return fail(p, "allocations add up to 2^62 bytes or more");
    uint64_t key;
    id_rec_t *s = id_find(p, id, &key);
    if (s && s->live)
        return fail(p, "'%s' allocated again while live (allocated on line %lu)", shown(id, &sb), s->line);
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->blocks = cgj_xrealloc(p->blocks, p->cap * sizeof *p->blocks);
    }
    p->blocks[p->n] = (cgj_plan_block_t){size, p->pos, CGJ_PLAN_ESCAPES, 0};
    if (!s) s = id_add(p, id, key);
    s->block = (uint32_t)p->n++;
    s->live = 1;
    s->line = p->line;
    p->total += align_size(size);
    return 0;
}

static int parse_free(parser_t *p, const char *id)
{
    uint64_t key;
    shown_buf_t sb;
    id_rec_t *s = id_find(p, id, &key);
    if (!s) return fail(p, "free of unknown ID '%s'", shown(id, &sb));
    if (!s->live) return fail(p, "double free of '%s' (freed on line %lu)", shown(id, &sb), s->line);
    p->blocks[s->block].end = p->pos;
    s->live = 0;
    s->line = p->line;
    return 0;
}

static int parse_line(parser_t *p, char *line)
{
    char *hash = strchr(line, '#'), *tok[3];
    if (hash) *hash = '\0';
    int k = tokenize(line, tok, 3);
    if (k == 0) return 0;
    if (p->pos == CGJ_PLAN_ESCAPES - 1) return fail(p, "too many events");
    int is_a = strcmp(tok[0], "a") == 0, is_f = strcmp(tok[0], "f") == 0, r;
    shown_buf_t sb;
    if (is_a && k == 3) r = parse_alloc(p, tok[1], tok[2]);
    else if (is_f && k == 2) r = parse_free(p, tok[1]);
    else if (is_a) return fail(p, "malformed allocation: expected 'a ID BYTES'");
    else if (is_f) return fail(p, "malformed free: expected 'f ID'");
    else return fail(p, "malformed line: expected 'a ID BYTES' or 'f ID', not '%s'", shown(tok[0], &sb));
    if (r == 0) p->pos++;
    return r;
}

/* The next line of f (its '\n' dropped) into *buf, grown as needed; false at the end of f. */
static int read_line(FILE *f, char **buf, size_t *cap)
{
    size_t len = 0;
    int ch;
    while ((ch = getc(f)) != EOF && ch != '\n') {
        if (len + 2 > *cap) *buf = cgj_xrealloc(*buf, *cap = *cap ? 2 * *cap : 256);
        (*buf)[len++] = (char)ch;
    }
    if (ch == EOF && len == 0) return 0;
    if (len + 1 > *cap) *buf = cgj_xrealloc(*buf, *cap = *cap ? 2 * *cap : 256);
    (*buf)[len] = '\0';
    return 1;
}

int cgj_plan_parse(FILE *f, const char *name, cgj_plan_block_t **blocks, size_t *n, char *err, size_t errlen)
{
    parser_t p;
    memset(&p, 0, sizeof p);
    char *line = NULL;
    size_t linecap = 0;
    int rc = 0;
    while (read_line(f, &line, &linecap)) {
        p.line++;
        if (parse_line(&p, line) != 0) {
            snprintf(err, errlen, "%s:%lu: %s", name, p.line, p.why);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s:%lu: read error: %s", name, p.line + 1, strerror(errno));
        rc = -1;
    }
    cgj_free(line);
    ids_free(&p);
    if (rc != 0 || p.n == 0) cgj_free(p.blocks), p.blocks = NULL, p.n = rc ? 0 : p.n;
    *blocks = p.blocks;
    *n = p.n;
    return rc;
}

/* ---- writing ---- */

typedef struct event {
    uint32_t pos, is_alloc, block;
} event_t;

/* by position; at one position frees first; then by block */
#define EVENT_LESS(x, y)                                          \
    ((x).pos != (y).pos             ? (x).pos < (y).pos           \
     : (x).is_alloc != (y).is_alloc ? (x).is_alloc < (y).is_alloc \
                                    : (x).block < (y).block)
DEFINE_SORT(sort_events, event_t, EVENT_LESS)

void cgj_plan_write(FILE *f, const cgj_plan_block_t *blocks, size_t n)
{
    event_t *ev = cgj_xmalloc(2 * n * sizeof *ev + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        ev[k++] = (event_t){blocks[i].start, 1, (uint32_t)i};
        if (blocks[i].end != CGJ_PLAN_ESCAPES) ev[k++] = (event_t){blocks[i].end, 0, (uint32_t)i};
    }
    sort_events(ev, k);
    fprintf(f, "# cgjit allocation trace: %zu blocks, %zu events\n", n, k);
    for (size_t i = 0; i < k; i++) {
        if (ev[i].is_alloc) fprintf(f, "a b%" PRIu32 " %" PRIu64 "\n", ev[i].block, blocks[ev[i].block].size);
        else fprintf(f, "f b%" PRIu32 "\n", ev[i].block);
    }
    cgj_free(ev);
}
