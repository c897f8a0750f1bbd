/*
 * test_spec_depth.c — how deep an elementwise spec's expression may nest (fusion/spec.c,
 * CGJ_EW_MAX_DEPTH): parentheses, calls and ?: nest at most that deep; deeper is a parse error
 * with a message, never a crash, whatever the stack. Linked with cgjit's objects (INTERNAL).
 *
 * A parser that recurses once per level needs stack in proportion to the nesting: 30 000 levels
 * overflowed the 8 MiB main stack, 4000 a 1 MiB one. The deep specs here are parsed
 * on the main thread and on threads with small stacks (SMALL_STACK), where a parser that still
 * recursed without a bound would crash the test process, which Criterion reports as a failure.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "fusion/fusion.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(fusion_spec_depth);

#define assert_has(hay, needle) cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in '%s'", (needle), (hay))

#define HEAD "(out float y, in float x, count int n): y = "
#define SMALL_STACK (256u << 10)

static cgj_ew_spec_t S;

/* HEAD, then `open` repeated n times, `mid`, then `close` repeated n times (a new buffer). */
static char *nested(const char *open, unsigned n, const char *mid, const char *close)
{
    size_t lo = strlen(open), lc = strlen(close), len = strlen(HEAD) + n * (lo + lc) + strlen(mid) + 1;
    char *text = malloc(len), *p = text;
    cr_assert_not_null(text);
    p = stpcpy(p, HEAD);
    for (unsigned k = 0; k < n; k++) p = stpcpy(p, open);
    p = stpcpy(p, mid);
    for (unsigned k = 0; k < n; k++) p = stpcpy(p, close);
    return text;
}

/* Parse text; the result, with the message in err[256]. */
static bool parse(const char *text, char *err)
{
    return cgj_ew_parse(text, &S, err, 256);
}

static void assert_too_deep(const char *text, const char *what)
{
    char err[256] = "";
    cr_assert_not(parse(text, err), "%s parsed", what);
    char want[64];
    snprintf(want, sizeof want, "nested deeper than %d levels", CGJ_EW_MAX_DEPTH);
    assert_has(err, want);
    assert_has(err, "column ");
}

Test(fusion_spec_depth, parentheses_at_the_limit_parse)
{
    char err[256] = "";
    char *text = nested("(", CGJ_EW_MAX_DEPTH, "x", ")");
    cr_assert(parse(text, err), "%s", err);
    cr_assert_eq(S.nnodes, 1, "parentheses make no nodes");
    free(text);
    text = nested("exp(", CGJ_EW_MAX_DEPTH, "x", ")");
    cr_assert(parse(text, err), "%s", err);
    cr_assert_eq(S.nnodes, CGJ_EW_MAX_DEPTH + 1);
    free(text);
}

Test(fusion_spec_depth, one_level_more_is_a_parse_error)
{
    char *text = nested("(", CGJ_EW_MAX_DEPTH + 1, "x", ")");
    assert_too_deep(text, "parentheses");
    /* the column is where the first expression too deep begins: after the last '(' */
    char err[256];
    parse(text, err);
    char col[32];
    snprintf(col, sizeof col, "column %zu:", strlen(HEAD) + CGJ_EW_MAX_DEPTH + 2);
    cr_assert(!strncmp(err, col, strlen(col)), "expected '%s' in '%s'", col, err);
    free(text);
    text = nested("exp(", CGJ_EW_MAX_DEPTH + 1, "x", ")");
    assert_too_deep(text, "calls");
    free(text);
    text = nested("min(x, ", CGJ_EW_MAX_DEPTH + 1, "x", ")");
    assert_too_deep(text, "second arguments");
    free(text);
}

Test(fusion_spec_depth, thirty_thousand_levels_fail_cleanly)
{
    char *text = nested("(", 30000, "x", ")");
    assert_too_deep(text, "30 000 parentheses");
    free(text);
    text = nested("(", 30000, "", ""); /* unclosed, as a fuzzer writes it */
    assert_too_deep(text, "30 000 unclosed parentheses");
    free(text);
    text = nested("(x > 0 ? x : ", 30000, "x", ")");
    char err[256];
    cr_assert_not(parse(text, err), "30 000 nested ?:");
    free(text);
}

/* Unary signs chain without nesting: a long chain of - is too many nodes, of + nothing. */
Test(fusion_spec_depth, long_sign_chains)
{
    char err[256] = "";
    char *text = nested("-", 30000, "x", "");
    cr_assert_not(parse(text, err));
    assert_has(err, "expression too long");
    free(text);
    text = nested("+", 30000, "x", "");
    cr_assert(parse(text, err), "%s", err);
    cr_assert_eq(S.nnodes, 1);
    free(text);
    text = nested("-", 2, "x", "");
    cr_assert(parse(text, err), "%s", err);
    cr_assert_eq(S.nnodes, 3, "x, -x, --x");
    cr_assert_eq(S.n[1].kind, CGJ_EW_NEG);
    cr_assert_eq(S.n[1].a, 0);
    cr_assert_eq(S.n[2].kind, CGJ_EW_NEG);
    cr_assert_eq(S.n[2].a, 1);
    free(text);
    text = nested("-+-", 1, "x", "");
    cr_assert(parse(text, err), "%s", err);
    cr_assert_eq(S.nnodes, 3);
    free(text);
}

/* ---- on a small stack ---- */

typedef struct job {
    const char *text;
    bool ok;
    char err[256];
} job_t;

static void *parse_job(void *p)
{
    job_t *j = p;
    j->ok = cgj_ew_parse(j->text, &S, j->err, sizeof j->err);
    return NULL;
}

/* Parse text on a thread with a SMALL_STACK-byte stack. */
static job_t parse_on_small_stack(const char *text)
{
    static job_t j;
    j = (job_t){.text = text};
    pthread_attr_t a;
    pthread_attr_init(&a);
    cr_assert_eq(pthread_attr_setstacksize(&a, SMALL_STACK), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, &a, parse_job, &j), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&a);
    return j;
}

Test(fusion_spec_depth, deep_specs_on_a_small_stack)
{
    char *text = nested("(", 30000, "x", ")");
    job_t j = parse_on_small_stack(text);
    cr_assert_not(j.ok);
    assert_has(j.err, "nested deeper than");
    free(text);
    text = nested("((-", 4000, "x", ")*x)");
    j = parse_on_small_stack(text);
    cr_assert_not(j.ok);
    assert_has(j.err, "nested deeper than");
    free(text);
    text = nested("-", 30000, "x", "");
    j = parse_on_small_stack(text);
    cr_assert_not(j.ok);
    assert_has(j.err, "expression too long");
    free(text);
    text = nested("(", CGJ_EW_MAX_DEPTH, "x", ")");
    j = parse_on_small_stack(text);
    cr_assert(j.ok, "the deepest spec that parses needs little stack: %s", j.err);
    free(text);
}

/* Through the registry: refused with the message, nothing registered. */
Test(fusion_spec_depth, a_deep_registration_is_refused)
{
    char *text = nested("(", 30000, "x", ")");
    char err[256] = "";
    cr_assert_not(cgj_fusion_register("deep", text, err, sizeof err));
    assert_has(err, "nested deeper than");
    cr_assert_null(cgj_fusion_lookup("deep"));
    free(text);
}
