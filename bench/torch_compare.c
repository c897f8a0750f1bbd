/*
 * torch_compare.c — a small JSON reader (RFC 8259, plus Python's NaN/Infinity/-Infinity) for
 * the file of bench/torch_compare.py; see torch_compare.h.
 */
#include "torch_compare.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };
enum { J_MAX_DEPTH = 64, J_MAX_FILE = 16 << 20 };

typedef struct jval {
    int kind;
    double num;
    char *str;          /* J_STR */
    int n;              /* J_ARR, J_OBJ: items */
    char **keys;        /* J_OBJ */
    struct jval *items; /* J_ARR, J_OBJ */
} jval_t;

typedef struct jparser {
    const char *start, *p, *end;
    int depth;
    char err[160];
} jparser_t;

static int jfail(jparser_t *jp, const char *fmt, ...)
{
    if (!jp->err[0]) {
        char what[120];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(jp->err, sizeof jp->err, "%s at byte %ld", what, (long)(jp->p - jp->start));
    }
    return -1;
}

static void jfree(jval_t *v)
{
    if (v->kind == J_STR) free(v->str);
    if (v->kind == J_ARR || v->kind == J_OBJ) {
        for (int i = 0; i < v->n; i++) {
            jfree(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof *v);
}

static void jskip_ws(jparser_t *jp)
{
    while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r')) jp->p++;
}

static int jliteral(jparser_t *jp, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, word, n) != 0) return 0;
    jp->p += n;
    return 1;
}

static int jhex4(jparser_t *jp, unsigned *out)
{
    if (jp->end - jp->p < 4) return jfail(jp, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *jp->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return jfail(jp, "bad \\u escape");
    }
    *out = v;
    return 0;
}

/* A string at jp->p (on its opening quote); *out is malloc'd, UTF-8, NUL-terminated. */
static int jstring(jparser_t *jp, char **out)
{
    jp->p++; /* '"' */
    size_t cap = 16, len = 0;
    char *s = (char *)malloc(cap);
    if (!s) return jfail(jp, "out of memory");
    for (;;) {
        if (jp->p >= jp->end) {
            free(s);
            return jfail(jp, "unterminated string");
        }
        unsigned char c = (unsigned char)*jp->p++;
        unsigned cp;
        if (c == '"') break;
        if (c < 0x20) {
            free(s);
            return jfail(jp, "control character in string");
        }
        if (c != '\\') {
            cp = c; /* a byte of the input's UTF-8, copied as it is */
        } else {
            if (jp->p >= jp->end) {
                free(s);
                return jfail(jp, "unterminated string");
            }
            char e = *jp->p++;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (jhex4(jp, &cp)) {
                    free(s);
                    return -1;
                }
                if (cp >= 0xD800 && cp < 0xDC00 && jp->end - jp->p >= 6 && jp->p[0] == '\\' && jp->p[1] == 'u') {
                    unsigned lo;
                    jp->p += 2;
                    if (jhex4(jp, &lo)) {
                        free(s);
                        return -1;
                    }
                    cp = lo >= 0xDC00 && lo < 0xE000 ? 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00) : 0xFFFD;
                } else if (cp >= 0xD800 && cp < 0xE000) {
                    cp = 0xFFFD;
                }
                break;
            default: free(s); return jfail(jp, "bad escape \\%c", e);
            }
        }
        if (len + 5 > cap) {
            char *t = (char *)realloc(s, cap *= 2);
            if (!t) {
                free(s);
                return jfail(jp, "out of memory");
            }
            s = t;
        }
        if (c != '\\' || cp < 0x80) {
            s[len++] = (char)cp;
        } else if (cp < 0x800) {
            s[len++] = (char)(0xC0 | (cp >> 6));
            s[len++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            s[len++] = (char)(0xE0 | (cp >> 12));
            s[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            s[len++] = (char)(0x80 | (cp & 0x3F));
        } else {
            s[len++] = (char)(0xF0 | (cp >> 18));
            s[len++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            s[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            s[len++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    s[len] = '\0';
    *out = s;
    return 0;
}

static int jnumber(jparser_t *jp, double *out)
{
    const char *q = jp->p;
    if (q < jp->end && *q == '-') q++;
    if (q < jp->end && *q == 'I') { /* -Infinity */
        jp->p = q;
        if (!jliteral(jp, "Infinity")) return jfail(jp, "bad number");
        *out = -INFINITY;
        return 0;
    }
    const char *digits = q;
    while (q < jp->end && *q >= '0' && *q <= '9') q++;
    if (q == digits) return jfail(jp, "bad number");
    if (q < jp->end && *q == '.') {
        const char *frac = ++q;
        while (q < jp->end && *q >= '0' && *q <= '9') q++;
        if (q == frac) return jfail(jp, "bad number");
    }
    if (q < jp->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < jp->end && (*q == '+' || *q == '-')) q++;
        const char *exp = q;
        while (q < jp->end && *q >= '0' && *q <= '9') q++;
        if (q == exp) return jfail(jp, "bad number");
    }
    char buf[64];
    size_t n = (size_t)(q - jp->p);
    if (n >= sizeof buf) return jfail(jp, "number too long");
    memcpy(buf, jp->p, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    jp->p = q;
    return 0;
}

static int jvalue(jparser_t *jp, jval_t *v);

/* An array or an object at jp->p (on its opening bracket). */
static int jcontainer(jparser_t *jp, jval_t *v, int obj)
{
    char close = obj ? '}' : ']';
    v->kind = obj ? J_OBJ : J_ARR;
    if (++jp->depth > J_MAX_DEPTH) return jfail(jp, "nested too deeply");
    jp->p++;
    jskip_ws(jp);
    if (jp->p < jp->end && *jp->p == close) {
        jp->p++;
        jp->depth--;
        return 0;
    }
    int cap = 0;
    for (;;) {
        if (v->n == cap) {
            cap = cap ? 2 * cap : 8;
            jval_t *items = (jval_t *)realloc(v->items, (size_t)cap * sizeof *items);
            if (!items) return jfail(jp, "out of memory");
            v->items = items;
            if (obj) {
                char **keys = (char **)realloc(v->keys, (size_t)cap * sizeof *keys);
                if (!keys) return jfail(jp, "out of memory");
                v->keys = keys;
            }
        }
        jskip_ws(jp);
        char *key = NULL;
        if (obj) {
            if (jp->p >= jp->end || *jp->p != '"') return jfail(jp, "expected a key");
            if (jstring(jp, &key)) return -1;
            jskip_ws(jp);
            if (jp->p >= jp->end || *jp->p != ':') {
                free(key);
                return jfail(jp, "expected ':'");
            }
            jp->p++;
        }
        jval_t *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        if (obj) v->keys[v->n] = key;
        v->n++; /* counted before it is parsed, so that jfree frees a partial item */
        if (jvalue(jp, item)) return -1;
        jskip_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == close) {
            jp->p++;
            jp->depth--;
            return 0;
        }
        return jfail(jp, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int jvalue(jparser_t *jp, jval_t *v)
{
    jskip_ws(jp);
    if (jp->p >= jp->end) return jfail(jp, "unexpected end of file");
    switch (*jp->p) {
    case '{': return jcontainer(jp, v, 1);
    case '[': return jcontainer(jp, v, 0);
    case '"': v->kind = J_STR; return jstring(jp, &v->str);
    case 'n':
        if (jliteral(jp, "null")) {
            v->kind = J_NULL;
            return 0;
        }
        break;
    case 't':
        if (jliteral(jp, "true")) {
            v->kind = J_TRUE;
            return 0;
        }
        break;
    case 'f':
        if (jliteral(jp, "false")) {
            v->kind = J_FALSE;
            return 0;
        }
        break;
    case 'N':
        if (jliteral(jp, "NaN")) {
            v->kind = J_NUM;
            v->num = NAN;
            return 0;
        }
        break;
    case 'I':
        if (jliteral(jp, "Infinity")) {
            v->kind = J_NUM;
            v->num = INFINITY;
            return 0;
        }
        break;
    default:
        if (*jp->p == '-' || (*jp->p >= '0' && *jp->p <= '9')) {
            v->kind = J_NUM;
            return jnumber(jp, &v->num);
        }
        break;
    }
    return jfail(jp, "unexpected character '%c'", *jp->p);
}

static const jval_t *jget(const jval_t *obj, const char *key)
{
    if (!obj || obj->kind != J_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

static void copy_text(char *dst, size_t cap, const jval_t *v)
{
    dst[0] = '\0';
    if (v && v->kind == J_STR) snprintf(dst, cap, "%s", v->str);
    else if (v && v->kind == J_NUM) snprintf(dst, cap, "%g", v->num);
}

/* Reads the whole file into a malloc'd buffer; NULL with errno set (EFBIG when too large). */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = (char *)malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap >= J_MAX_FILE) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            char *t = (char *)realloc(buf, cap *= 2);
            if (!t) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = t;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = !buf || ferror(f);
    int saved = errno;
    fclose(f);
    if (bad) {
        free(buf);
        errno = saved ? saved : EIO;
        return NULL;
    }
    *len = n;
    return buf;
}

void torch_compare_load(const char *path, const char *const *names, int n, torch_compare_t *tc)
{
    memset(tc, 0, sizeof *tc);
    if (n > TORCH_MAX_MODELS) n = TORCH_MAX_MODELS;
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) {
        snprintf(tc->note, sizeof tc->note, "cannot read %s: %s", path, strerror(errno));
        return;
    }
    jparser_t jp;
    memset(&jp, 0, sizeof jp);
    jp.start = jp.p = text;
    jp.end = text + len;
    jval_t root;
    memset(&root, 0, sizeof root);
    int bad = jvalue(&jp, &root);
    if (!bad) {
        jskip_ws(&jp);
        if (jp.p != jp.end) bad = jfail(&jp, "text after the JSON value");
    }
    if (bad) {
        snprintf(tc->note, sizeof tc->note, "%s is not valid JSON: %s", path, jp.err);
        jfree(&root);
        free(text);
        return;
    }
    const jval_t *results = jget(&root, "results");
    if (!results || results->kind != J_OBJ) {
        snprintf(tc->note, sizeof tc->note, "%s has no \"results\" object", path);
        jfree(&root);
        free(text);
        return;
    }
    tc->loaded = 1;
    copy_text(tc->gpu, sizeof tc->gpu, jget(&root, "gpu"));
    copy_text(tc->torch, sizeof tc->torch, jget(&root, "torch"));
    copy_text(tc->file_note, sizeof tc->file_note, jget(&root, "note"));
    static const char *const keys[TORCH_COLS] = {"eager_us", "compile_us", "reduce_overhead_us"};
    char missing[256] = "";
    for (int m = 0; m < n; m++) {
        const jval_t *r = jget(results, names[m]);
        tc->found[m] = r && r->kind == J_OBJ;
        if (!tc->found[m]) {
            size_t used = strlen(missing);
            snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "", names[m]);
            continue;
        }
        for (int c = 0; c < TORCH_COLS; c++) {
            const jval_t *v = jget(r, keys[c]);
            if (v && v->kind == J_NUM && isfinite(v->num)) {
                tc->has[m][c] = 1;
                tc->us[m][c] = v->num;
            }
        }
    }
    if (missing[0]) snprintf(tc->note, sizeof tc->note, "%s has no results for %s", path, missing);
    jfree(&root);
    free(text);
}
