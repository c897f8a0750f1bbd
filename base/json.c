/* json.c — JSON strings and keys, names as text; see json.h. */
#include "base/json.h"

#include <stdbool.h>
#include <string.h>

static const char hex[] = "0123456789abcdef";

size_t cgj_utf8_len(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0], lo = 0x80, hi = 0xbf; /* the second byte's range (RFC 3629, section 4) */
    size_t n;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c == 0xe0) n = 3, lo = 0xa0; /* not overlong */
    else if (c == 0xed) n = 3, hi = 0x9f; /* no surrogate */
    else if (c >= 0xe1 && c <= 0xef) n = 3;
    else if (c == 0xf0) n = 4, lo = 0x90; /* not overlong */
    else if (c == 0xf4) n = 4, hi = 0x8f; /* nothing above U+10FFFF */
    else if (c >= 0xf1 && c <= 0xf3) n = 4;
    else return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < n; k++) /* a NUL is no continuation byte: the loop stops at it */
        if ((p[k] & 0xc0) != 0x80) return 0;
    return n;
}

void cgj_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const char *p = s ? s : ""; *p;) {
        unsigned char c = (unsigned char)*p;
        size_t n = cgj_utf8_len(p);
        switch (n ? c : 0) {
        case 0: fputs("\\ufffd", f), n = 1; break; /* no valid sequence starts here */
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(f, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            else fwrite(p, 1, n, f);
        }
        p += n;
    }
    fputc('"', f);
}

void cgj_json_key(FILE *f, const char *key, int first)
{
    if (!first) fputc(',', f);
    cgj_json_str(f, key);
    fputc(':', f);
}

void cgj_text_str(FILE *f, const char *s)
{
    if (!s) s = "(null)";
    char out[256]; /* written in pieces, not a byte at a time: stderr has no buffer */
    size_t k = 0;
    for (const char *p = s; *p;) {
        if (k > sizeof out - 8) fwrite(out, 1, k, f), k = 0;
        unsigned char c = (unsigned char)*p;
        size_t n = cgj_utf8_len(p);
        /* C1 controls are U+0080..U+009F: 0xc2 0x80..0x9f */
        bool shown = n == 1 ? c >= 0x20 && c != 0x7f && c != '\\' : n > 1 && !(c == 0xc2 && (unsigned char)p[1] < 0xa0);
        if (shown) {
            memcpy(out + k, p, n);
            k += n;
            p += n;
            continue;
        }
        out[k++] = '\\';
        if (c == '\n') out[k++] = 'n';
        else if (c == '\t') out[k++] = 't';
        else if (c == '\r') out[k++] = 'r';
        else if (c == '\\') out[k++] = '\\';
        else out[k++] = 'x', out[k++] = hex[c >> 4], out[k++] = hex[c & 15];
        p++; /* a C1 control's second byte is no valid start: it is escaped next */
    }
    fwrite(out, 1, k, f);
}
