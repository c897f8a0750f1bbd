/*
 * json.h — the little JSON cgjit writes (the JSON report, the Chrome trace): strings escaped as
 * RFC 8259 asks, so that any name a program gives (an anchor, a kernel) reads back the same,
 * and the same names as plain text (the text report).
 *
 * A name is whatever bytes the program passed: not necessarily UTF-8, and it may hold newlines
 * or terminal escapes. JSON must be valid UTF-8 (RFC 8259, section 8.1), so a byte that starts
 * no valid UTF-8 sequence (RFC 3629: no overlong form, no surrogate, nothing above U+10FFFF) is
 * written as U+FFFD, the replacement character, and every control character is escaped. In
 * text, where a reader must see what is there, control characters, a backslash and invalid
 * bytes are shown as C escapes (\n, \\, \x1b), so that a name stays on its line and a terminal
 * never interprets it.
 */
#ifndef CGJ_JSON_H
#define CGJ_JSON_H

#include <stddef.h>
#include <stdio.h>

/* s as a JSON string, quotes included ("" for NULL): valid UTF-8 whatever s holds. */
void cgj_json_str(FILE *f, const char *s);
/* "key": as an object member's start, after a comma unless `first`. */
void cgj_json_key(FILE *f, const char *key, int first);
/* s as text on one line, without quotes, control characters (C0, DEL and C1), backslashes and
 * bytes of no valid UTF-8 sequence escaped ("(null)" for NULL). */
void cgj_text_str(FILE *f, const char *s);
/* The length of the valid UTF-8 sequence that starts at p (1 for ASCII, NUL included), or 0
 * where none does. Reads no byte past a NUL. */
size_t cgj_utf8_len(const char *p);

#endif /* CGJ_JSON_H */
