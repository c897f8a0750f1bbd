/* test_file.c — file names a user gives: %p expands to the pid; files are opened safely. */
#include <criterion/criterion.h>
#include "base/file.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

Test(base_file, percent_p_is_the_pid)
{
    char want[128], out[128];
    snprintf(want, sizeof want, "/tmp/trace-%ld.json", (long)getpid());
    cr_assert_str_eq(cgj_file_expand("/tmp/trace-%p.json", out, sizeof out), want);
    snprintf(want, sizeof want, "%ld-%ld", (long)getpid(), (long)getpid());
    cr_assert_str_eq(cgj_file_expand("%p-%p", out, sizeof out), want);
}

Test(base_file, other_percents_are_kept)
{
    char out[64];
    cr_assert_str_eq(cgj_file_expand("a%%p b%d c%", out, sizeof out), "a%p b%d c%");
    cr_assert_str_eq(cgj_file_expand("plain.log", out, sizeof out), "plain.log");
}

Test(base_file, truncated_and_terminated)
{
    char out[6];
    cr_assert_str_eq(cgj_file_expand("abcdefgh", out, sizeof out), "abcde");
    cgj_file_expand("%p%p%p%p", out, sizeof out);
    cr_assert_eq(strlen(out), 5);
}
