/* test_json.c — names of any bytes as JSON strings (valid UTF-8, controls escaped) and as text
 * (escaped, on one line); see base/json.h. */
#include <criterion/criterion.h>
#include "base/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What `put` writes for s, as a malloc'd string. */
static char *written(void (*put)(FILE *, const char *), const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    put(f, s);
    fclose(f);
    return buf;
}

static void expect(void (*put)(FILE *, const char *), const char *in, const char *want)
{
    char *got = written(put, in);
    cr_assert_str_eq(got, want, "for '%s'", in);
    free(got);
}

Test(base_json, valid_utf8_passes_as_it_is)
{
    expect(cgj_json_str, "plain", "\"plain\"");
    expect(cgj_json_str, "\xe2\x82\xac \xc3\xa9 \xf0\x9f\x98\x80 \xef\xbf\xbf",
           "\"\xe2\x82\xac \xc3\xa9 \xf0\x9f\x98\x80 \xef\xbf\xbf\"");
    expect(cgj_json_str, NULL, "\"\"");
}

Test(base_json, invalid_bytes_become_the_replacement_character)
{
    expect(cgj_json_str,
           "a\xff"
           "b",
           "\"a\\ufffdb\"");
    expect(cgj_json_str, "\x80", "\"\\ufffd\"");                                  /* a lone continuation byte */
    expect(cgj_json_str, "\xc0\xaf", "\"\\ufffd\\ufffd\"");                       /* overlong '/' */
    expect(cgj_json_str, "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"");            /* overlong, 3 bytes */
    expect(cgj_json_str, "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");            /* a surrogate, U+D800 */
    expect(cgj_json_str, "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* above U+10FFFF */
    expect(cgj_json_str, "\xe2\x82", "\"\\ufffd\\ufffd\"");                       /* cut short by the end */
    expect(cgj_json_str, "\xe2\x82x", "\"\\ufffd\\ufffdx\"");
}

Test(base_json, controls_are_escaped)
{
    expect(cgj_json_str, "a\nb\tc\rd\"e\\f", "\"a\\nb\\tc\\rd\\\"e\\\\f\"");
    expect(cgj_json_str, "\x01\x1b\x7f", "\"\\u0001\\u001b\\u007f\"");
}

Test(base_json, utf8_lengths)
{
    cr_assert_eq(cgj_utf8_len("a"), 1);
    cr_assert_eq(cgj_utf8_len(""), 1);
    cr_assert_eq(cgj_utf8_len("\xc3\xa9"), 2);
    cr_assert_eq(cgj_utf8_len("\xe2\x82\xac"), 3);
    cr_assert_eq(cgj_utf8_len("\xf0\x9f\x98\x80"), 4);
    cr_assert_eq(cgj_utf8_len("\xc1\xbf"), 0);
    cr_assert_eq(cgj_utf8_len("\xf5\x80\x80\x80"), 0);
    cr_assert_eq(cgj_utf8_len("\xf0\x9f\x98"), 0);
}

Test(base_json, text_is_escaped_onto_one_line)
{
    expect(cgj_text_str, "plain \xe2\x82\xac", "plain \xe2\x82\xac");
    expect(cgj_text_str, "two\nlines\r\t", "two\\nlines\\r\\t");
    expect(cgj_text_str, "\x1b[2J\x7f", "\\x1b[2J\\x7f");
    expect(cgj_text_str, "back\\slash", "back\\\\slash");
    expect(cgj_text_str, "bad\xff\xfe", "bad\\xff\\xfe");
    expect(cgj_text_str, "c1 \xc2\x9b", "c1 \\xc2\\x9b"); /* a C1 control, CSI */
    expect(cgj_text_str, NULL, "(null)");
}
