/* json.c — JSON strings and keys; see json.h. */
#include "base/json.h"

void cgj_json_str(FILE *f, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u00%c%c", hex[*p >> 4], hex[*p & 15]);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

void cgj_json_key(FILE *f, const char *key, int first)
{
    if (!first) fputc(',', f);
    cgj_json_str(f, key);
    fputc(':', f);
}
