/*
 * json.h — the little JSON cgjit writes (the JSON report, the Chrome trace): strings escaped as
 * RFC 8259 asks, so that any name a program gives (an anchor, a kernel) reads back the same.
 */
#ifndef CGJ_JSON_H
#define CGJ_JSON_H

#include <stdio.h>

/* s as a JSON string, quotes included ("" for NULL). Bytes from 0x80 up pass as they are. */
void cgj_json_str(FILE *f, const char *s);
/* "key": as an object member's start, after a comma unless `first`. */
void cgj_json_key(FILE *f, const char *key, int first);

#endif /* CGJ_JSON_H */
