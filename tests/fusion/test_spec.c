/*
 * test_spec.c — the elementwise spec parser (fusion/spec.c) and the registry of elementwise
 * kernels (fusion/registry.c). Linked with cgjit's objects (INTERNAL).
 *
 * Good specs are checked on the structure the parser builds (roles, types, the count's index,
 * the expression's nodes, children before parents), not only on the return value; bad specs on
 * the message's words and, where the error has an obvious place, on its column. The registry is
 * process-wide state: Criterion runs each test in a fresh process, so each test starts with an
 * empty registry and CGJIT_OPS not yet read (cgj_cfg.OPS is set directly before the first lookup).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "base/config.h"
#include "fusion/fusion.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(fusion_spec);

#define assert_has(hay, needle) cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in '%s'", (needle), (hay))

static cgj_ew_spec_t S; /* large (nodes): one per test process */

static const cgj_ew_spec_t *parse_ok(const char *text)
{
    char err[256] = "unset";
    cr_assert(cgj_ew_parse(text, &S, err, sizeof err), "'%s' did not parse: %s", text, err);
    cr_assert_str_empty(err, "a good spec leaves err empty: %s", err);
    return &S;
}

/* Every node's children come before it; every PARAM node names a readable parameter. */
static void check_nodes(const cgj_ew_spec_t *s)
{
    for (uint32_t k = 0; k < s->nnodes; k++) {
        const cgj_ew_node_t *n = &s->n[k];
        switch (n->kind) {
        case CGJ_EW_NUM: break;
        case CGJ_EW_PARAM:
            cr_assert_lt(n->param, s->nparams);
            cr_assert_neq(s->p[n->param].role, CGJ_EW_OUT, "node %u reads an out", k);
            break;
        case CGJ_EW_NEG: cr_assert_lt(n->a, k); break;
        case CGJ_EW_BINARY: cr_assert(n->a < k && n->b < k, "node %u", k); break;
        case CGJ_EW_SELECT: cr_assert(n->a < k && n->b < k && n->c < k, "node %u", k); break;
        case CGJ_EW_CALL:
            cr_assert_lt(n->fn, CGJ_EW_FUNC_COUNT);
            cr_assert_lt(n->a, k);
            if (cgj_ew_func_nargs[n->fn] == 2) cr_assert_lt(n->b, k);
            break;
        default: cr_assert_fail("node %u of unknown kind %u", k, n->kind);
        }
    }
    for (uint32_t j = 0; j < s->nassign; j++) cr_assert_lt(s->assign[j].root, s->nnodes);
}

/* ---- good specs ---- */

Test(fusion_spec, the_header_example)
{
    const cgj_ew_spec_t *s = parse_ok("(out float y, in float x, float a, float b, count int n): y = a * x + b");
    cr_assert_eq(s->nparams, 5);
    cr_assert_eq(s->elem, CGJ_EW_F32);
    cr_assert_eq(s->count, 4);
    static const uint8_t roles[] = {CGJ_EW_OUT, CGJ_EW_IN, CGJ_EW_SCALAR, CGJ_EW_SCALAR, CGJ_EW_COUNT};
    static const char *const names[] = {"y", "x", "a", "b", "n"};
    for (uint32_t k = 0; k < 5; k++) {
        cr_assert_eq(s->p[k].role, roles[k], "param %u", k);
        cr_assert_str_eq(s->p[k].name, names[k]);
    }
    cr_assert_eq(s->p[4].type, CGJ_EW_I32);
    cr_assert_eq(s->nassign, 1);
    cr_assert_eq(s->assign[0].param, 0);
    /* a * x + b: a, x, (*), b, (+) — the root is the sum, its left child the product */
    cr_assert_eq(s->nnodes, 5);
    const cgj_ew_node_t *root = &s->n[s->assign[0].root];
    cr_assert_eq(root->kind, CGJ_EW_BINARY);
    cr_assert_eq(root->op, '+');
    cr_assert_eq(s->n[root->a].kind, CGJ_EW_BINARY);
    cr_assert_eq(s->n[root->a].op, '*');
    cr_assert_eq(s->n[root->b].kind, CGJ_EW_PARAM);
    cr_assert_eq(s->n[root->b].param, 3);
    check_nodes(s);
    cr_assert(cgj_ew_is_pointer(s, 0) && cgj_ew_is_pointer(s, 1) && !cgj_ew_is_pointer(s, 2) &&
              !cgj_ew_is_pointer(s, 4));
}

Test(fusion_spec, every_role_and_type)
{
    const cgj_ew_spec_t *s =
        parse_ok("(inout double x, out double y, in double z, float a, double b, int c, unsigned d, "
                 "long e, size_t f, count size_t n): x = x * a + b; y = z + c + d + e + f");
    cr_assert_eq(s->nparams, 10);
    cr_assert_eq(s->elem, CGJ_EW_F64);
    cr_assert_eq(s->count, 9);
    static const uint8_t roles[] = {CGJ_EW_INOUT,  CGJ_EW_OUT,    CGJ_EW_IN,     CGJ_EW_SCALAR, CGJ_EW_SCALAR,
                                    CGJ_EW_SCALAR, CGJ_EW_SCALAR, CGJ_EW_SCALAR, CGJ_EW_SCALAR, CGJ_EW_COUNT};
    static const uint8_t types[] = {CGJ_EW_F64, CGJ_EW_F64, CGJ_EW_F64, CGJ_EW_F32, CGJ_EW_F64,
                                    CGJ_EW_I32, CGJ_EW_U32, CGJ_EW_I64, CGJ_EW_U64, CGJ_EW_U64};
    static const unsigned bytes[] = {8, 8, 8, 4, 8, 4, 4, 8, 8, 8};
    for (uint32_t k = 0; k < 10; k++) {
        cr_assert_eq(s->p[k].role, roles[k], "param %u", k);
        cr_assert_eq(s->p[k].type, types[k], "param %u", k);
        cr_assert_eq(cgj_ew_param_bytes(s, k), bytes[k], "param %u", k);
    }
    cr_assert_eq(s->nassign, 2);
    check_nodes(s);
}

Test(fusion_spec, every_count_type)
{
    static const char *const t[] = {"int", "unsigned", "long", "size_t"};
    static const uint8_t want[] = {CGJ_EW_I32, CGJ_EW_U32, CGJ_EW_I64, CGJ_EW_U64};
    for (int k = 0; k < 4; k++) {
        char text[128];
        snprintf(text, sizeof text, "(count %s n, inout float x): x = -x", t[k]);
        const cgj_ew_spec_t *s = parse_ok(text);
        cr_assert_eq(s->count, 0, "%s", t[k]);
        cr_assert_eq(s->p[0].type, want[k], "%s", t[k]);
        cr_assert_eq(cgj_ew_param_bytes(s, 0), cgj_ew_type_bytes[want[k]]);
    }
}

Test(fusion_spec, type_tables_agree)
{
    static const char *const spell[] = {"float", "double", "int", "unsigned", "long", "size_t"};
    static const unsigned bytes[] = {4, 8, 4, 4, 8, 8};
    cr_assert_eq(CGJ_EW_TYPE_COUNT, 6);
    for (int k = 0; k < CGJ_EW_TYPE_COUNT; k++) {
        cr_assert_str_eq(cgj_ew_type_names[k], spell[k]);
        cr_assert_eq(cgj_ew_type_bytes[k], bytes[k]);
        cr_assert_str_not_empty(cgj_ew_type_ctypes[k]);
    }
}

Test(fusion_spec, every_function)
{
    cr_assert_geq(CGJ_EW_FUNC_COUNT, 14, "the functions of spec.h");
    for (int f = 0; f < CGJ_EW_FUNC_COUNT; f++) {
        for (int dbl = 0; dbl < 2; dbl++) {
            char text[256];
            const char *ty = dbl ? "double" : "float";
            snprintf(text, sizeof text, "(out %s y, in %s x, %s a, count int n): y = %s(x%s)", ty, ty, ty,
                     cgj_ew_func_names[f], cgj_ew_func_nargs[f] == 2 ? ", a" : "");
            const cgj_ew_spec_t *s = parse_ok(text);
            const cgj_ew_node_t *root = &s->n[s->assign[0].root];
            cr_assert_eq(root->kind, CGJ_EW_CALL, "%s", text);
            cr_assert_eq(root->fn, f, "%s", text);
            cr_assert_eq(s->n[root->a].kind, CGJ_EW_PARAM);
            cr_assert_eq(s->n[root->a].param, 1);
            if (cgj_ew_func_nargs[f] == 2) cr_assert_eq(s->n[root->b].param, 2);
            cr_assert_eq(s->nnodes, 1u + cgj_ew_func_nargs[f]);
            check_nodes(s);
            /* each form names its argument(s) */
            assert_has(cgj_ew_func_forms[f][dbl], "%0");
            if (cgj_ew_func_nargs[f] == 2) assert_has(cgj_ew_func_forms[f][dbl], "%1");
        }
    }
}

Test(fusion_spec, nested_calls_and_expressions)
{
    const cgj_ew_spec_t *s = parse_ok(
        "(out float y, in float x, float a, count int n): y = max(min(x, a), -a) * sigmoid(gelu_tanh(x)) / (1 + pow(abs(x), 2))");
    check_nodes(s);
    const cgj_ew_node_t *root = &s->n[s->assign[0].root];
    cr_assert_eq(root->kind, CGJ_EW_BINARY);
    cr_assert_eq(root->op, '/', "* and / are left-associative: the root is the division");
}

Test(fusion_spec, ternary_with_every_comparison)
{
    static const struct {
        const char *text;
        char op;
    } cmp[] = {{"<", '<'}, {"<=", 'l'}, {">", '>'}, {">=", 'g'}, {"==", '='}, {"!=", '!'}};
    for (size_t k = 0; k < sizeof cmp / sizeof cmp[0]; k++) {
        char text[160];
        snprintf(text, sizeof text, "(out float y, in float x, float a, count int n): y = x %s a ? x : a * 2",
                 cmp[k].text);
        const cgj_ew_spec_t *s = parse_ok(text);
        const cgj_ew_node_t *root = &s->n[s->assign[0].root];
        cr_assert_eq(root->kind, CGJ_EW_SELECT, "%s", text);
        cr_assert_eq(s->n[root->a].kind, CGJ_EW_BINARY);
        cr_assert_eq(s->n[root->a].op, cmp[k].op, "%s", text);
        cr_assert_eq(s->n[root->b].kind, CGJ_EW_PARAM);
        cr_assert_eq(s->n[root->c].kind, CGJ_EW_BINARY);
        cr_assert_eq(s->n[root->c].op, '*');
        check_nodes(s);
    }
    /* nested: c1 ? a : c2 ? b : c, right-associative */
    const cgj_ew_spec_t *s = parse_ok("(out float y, in float x, count int n): y = x < 0 ? 0 : x > 6 ? 6 : x");
    const cgj_ew_node_t *root = &s->n[s->assign[0].root];
    cr_assert_eq(root->kind, CGJ_EW_SELECT);
    cr_assert_eq(s->n[root->c].kind, CGJ_EW_SELECT);
    check_nodes(s);
}

Test(fusion_spec, multiple_assignments_and_a_trailing_semicolon)
{
    const cgj_ew_spec_t *s = parse_ok("(out float y, out float z, inout float w, in float x, count int n): "
                                      "y = x; z = -x; w = w + x;");
    cr_assert_eq(s->nassign, 3);
    cr_assert_eq(s->assign[0].param, 0);
    cr_assert_eq(s->assign[1].param, 1);
    cr_assert_eq(s->assign[2].param, 2);
    cr_assert_eq(s->n[s->assign[1].root].kind, CGJ_EW_NEG);
    check_nodes(s);
    /* an inout may be left unassigned (read only); one assignment is enough */
    s = parse_ok("(inout float w, out float y, count int n): y = w * w");
    cr_assert_eq(s->nassign, 1);
}

Test(fusion_spec, whitespace_anywhere)
{
    const cgj_ew_spec_t *s =
        parse_ok("  \t(\n out\tfloat  y ,in float\nx,\tcount   int n\t)\n:\n  y\t=\tx\n*\n2 ;  \n ");
    cr_assert_eq(s->nparams, 3);
    cr_assert_str_eq(s->p[1].name, "x");
    cr_assert_eq(s->nassign, 1);
    /* and none at all */
    s = parse_ok("(out float y,in float x,count int n):y=x*2;");
    cr_assert_eq(s->nnodes, 3);
}

Test(fusion_spec, numbers)
{
    const cgj_ew_spec_t *s = parse_ok("(out double y, count int n): y = 1.5f + .25 + 2F + 1e-3 + 7 + 0x10");
    double want[] = {1.5, .25, 2, 1e-3, 7, 16};
    uint32_t seen = 0;
    for (uint32_t k = 0; k < s->nnodes; k++) {
        if (s->n[k].kind != CGJ_EW_NUM) continue;
        cr_assert_lt(seen, 6u);
        cr_assert_eq(s->n[k].num, want[seen], "number %u is %g, want %g", seen, s->n[k].num, want[seen]);
        seen++;
    }
    cr_assert_eq(seen, 6);
    /* unary minus and plus, parentheses */
    s = parse_ok("(out float y, in float x, count int n): y = -(x - -2) * +x");
    check_nodes(s);
    cr_assert_eq(s->n[s->assign[0].root].op, '*');
}

Test(fusion_spec, the_count_and_names_are_readable)
{
    /* the count is a scalar an expression may use; names may contain digits and '_' */
    const cgj_ew_spec_t *s = parse_ok("(out float y_1, in float _x2, count int n): y_1 = _x2 * n");
    cr_assert_eq(s->n[s->n[s->assign[0].root].b].param, 2);
    /* the longest name (31 characters) */
    char text[200], name[32];
    memset(name, 'a', 31);
    name[31] = 0;
    snprintf(text, sizeof text, "(inout float %s, count int n): %s = %s + 1", name, name, name);
    s = parse_ok(text);
    cr_assert_str_eq(s->p[0].name, name);
}

/* Several counts: the element count is their product (chain.c); `count` is the first one. */
Test(fusion_spec, several_counts)
{
    const cgj_ew_spec_t *s = parse_ok("(out float y, in float x, count int rows, float a, count long cols): y = a * x");
    cr_assert_eq(s->count, 2);
    cr_assert_eq(s->counts, (1u << 2) | (1u << 4));
    cr_assert_eq(s->p[4].role, CGJ_EW_COUNT);
    cr_assert_eq(s->p[4].type, CGJ_EW_I64);
    s = parse_ok("(count int n, inout float x): x = 1");
    cr_assert_eq(s->counts, 1u);
}

/* Broadcast `in` pointers: [i % M], [i / D], [(i / D) % M], names resolved after the list. */
Test(fusion_spec, broadcast_indices)
{
    const cgj_ew_spec_t *s = parse_ok("(out float y, in float x, in float b[i % cols], in float sc[i / hw], "
                                      "in float c [ ( i / hw ) % ch ], int hw, unsigned ch, count int rows, "
                                      "count long cols): y = x * sc + b + c");
    cr_assert_eq(s->nparams, 9);
    cr_assert_eq(s->p[1].div, 0);
    cr_assert_eq(s->p[1].mod, 0);
    cr_assert_eq(s->p[2].div, 0);
    cr_assert_eq(s->p[2].mod, 1 + 8, "cols is parameter 8");
    cr_assert_eq(s->p[3].div, 1 + 5, "hw is parameter 5");
    cr_assert_eq(s->p[3].mod, 0);
    cr_assert_eq(s->p[4].div, 1 + 5);
    cr_assert_eq(s->p[4].mod, 1 + 6);
    cr_assert_str_eq(s->p[4].name, "c");
    cr_assert_eq(s->counts, (1u << 7) | (1u << 8));
    check_nodes(s);
    /* an index may name a size_t scalar declared before the pointer */
    s = parse_ok("(size_t d, in double x[i / d], out double y, count int n): y = x");
    cr_assert_eq(s->p[1].div, 1);
    cr_assert_eq(s->elem, CGJ_EW_F64);
}

/* CGJ_EW_MAX_PARAMS parameters parse; CGJ_EW_MAX_NODES nodes parse */
Test(fusion_spec, limits_exactly)
{
    char text[1024] = "(out float y";
    for (int k = 1; k < CGJ_EW_MAX_PARAMS - 1; k++)
        snprintf(text + strlen(text), sizeof text - strlen(text), ", in float x%d", k);
    strcat(text, ", count int n): y = x1");
    const cgj_ew_spec_t *s = parse_ok(text);
    cr_assert_eq(s->nparams, CGJ_EW_MAX_PARAMS);

    /* -x + x + ... with 80 x: 80 params, 79 sums, 1 negation = 160 nodes */
    char expr[2048] = "(out float y, in float x, count int n): y = -x";
    for (int k = 1; k < CGJ_EW_MAX_NODES / 2; k++) strcat(expr, " + x");
    s = parse_ok(expr);
    cr_assert_eq(s->nnodes, CGJ_EW_MAX_NODES);
}

/* ---- bad specs: one row each (a Criterion parameter is the row's index) ---- */

typedef struct bad_case {
    const char *name, *text, *msg;
} bad_case_t;

#define P3 "(out float y, in float x, count int n): "
#define P3B "(out float y, in float x"
static const bad_case_t bad_cases[] = {
    {"unknown_type", "(out half y, count int n): y = 1", "unknown type 'half'"},
    {"unknown_scalar_type", "(out float y, char c, count int n): y = 1", "unknown type 'char'"},
    {"unknown_name", P3 "y = z", "unknown name 'z'"},
    {"unknown_function", P3 "y = foo(x)", "unknown function 'foo'"},
    {"a_function_without_parentheses", P3 "y = exp", "unknown name 'exp'"},
    {"too_many_arguments", P3 "y = exp(x, x)", "exp takes 1 argument(s)"},
    {"too_many_arguments_of_two", P3 "y = min(x, x, x)", "min takes 2 argument(s)"},
    {"too_few_arguments", P3 "y = pow(x)", "expected ','"},
    {"no_arguments", P3 "y = tanh()", "expected a number, a name or '('"},
    {"reading_an_out", P3 "y = y + x", "'y' is an output: it cannot be read"},
    {"reading_an_out_from_another_assignment", "(out float y, out float z, in float x, count int n): y = x; z = y",
     "'y' is an output: it cannot be read"},
    {"output_never_assigned", "(out float y, out float z, in float x, count int n): y = x",
     "output 'z' is never assigned"},
    {"assigned_twice", P3 "y = x; y = x", "'y' assigned twice"},
    {"inout_assigned_twice", "(inout float y, count int n): y = y; y = 2 * y", "'y' assigned twice"},
    {"no_count", "(out float y, in float x): y = x", "no count parameter"},
    {"no_pointer", "(float a, count int n):", "no pointer parameter"},
    {"assigning_a_scalar", "(float a, count int n): a = 1", "'a' is not an out or inout parameter"},
    {"assigning_an_in", P3 "x = 1", "'x' is not an out or inout parameter"},
    {"assigning_an_unknown_name", P3 "q = 1", "'q' is not an out or inout parameter"},
    {"mixed_float_double", "(out float y, in double x, count int n): y = x",
     "pointers of one kernel have one element type"},
    {"count_not_integer", "(out float y, count float n): y = 1", "the count is an integer"},
    {"count_double", "(out float y, count double n): y = 1", "the count is an integer"},
    {"pointer_of_int", "(out float y, in int x, count int n): y = x", "a pointer's elements are float or double"},
    {"pointer_of_size_t", "(out size_t y, count int n): y = 1", "a pointer's elements are float or double"},
    {"named_twice", "(out float y, in float y, count int n): y = 1", "parameter 'y' named twice"},
    {"no_type_after_role", "(in, out float y, count int n): y = 1", "expected a type after 'in'"},
    {"no_parameter_name", "(out float, count int n): y = 1", "expected a parameter name"},
    {"no_parameters", "(): y = 1", "expected a parameter"},
    {"missing_close_paren_of_params", "(out float y, count int n: y = 1", "expected ')'"},
    {"missing_close_paren_of_expression", P3 "y = (x + 1", "expected ')' at the end"},
    {"missing_colon", "(out float y, count int n) y = 1", "expected ':'"},
    {"missing_colon_of_ternary", P3 "y = x > 0 ? x", "expected ':' at the end"},
    {"missing_equals", P3 "y x", "expected '='"},
    {"missing_operand", P3 "y = x +", "expected a number, a name or '('"},
    {"bad_number", P3 "y = .", "bad number"},
    {"garbage_at_end", P3 "y = x )", "unexpected ')'"},
    {"two_values_without_operator", P3 "y = x 1", "unexpected '1'"},
    {"a_comparison_chain", P3 "y = x < 1 < 2", "unexpected '< 2'"},
    {"double_semicolon", P3 "y = x;;", "expected an output's name"},
    {"no_assignment", "(inout float x, count int n):", "no assignment"},
    {"index_of_an_out", "(out float y[i % n], count int n): y = 1", "only an `in` pointer may be indexed"},
    {"index_of_an_inout", "(inout float y[i % n], count int n): y = 1", "only an `in` pointer may be indexed"},
    {"index_of_a_scalar", "(out float y, float a[i % n], count int n): y = a", "only an `in` pointer may be indexed"},
    {"index_not_i", P3B "[j % n], count int n): y = x", "an index is i % M, i / D or (i / D) % M"},
    {"index_plus", P3B "[i + n], count int n): y = x", "an index is i % M, i / D or (i / D) % M"},
    {"index_plain_i", P3B "[i], count int n): y = x", "an index is i % M, i / D or (i / D) % M"},
    {"index_paren_mod", P3B "[(i % n)], count int n): y = x", "an index is i % M, i / D or (i / D) % M"},
    {"index_paren_unclosed", P3B "[(i / n], count int n): y = x", "expected ')'"},
    {"index_unclosed", P3B "[i % n, count int n): y = x", "expected ']'"},
    {"index_without_name", P3B "[i %], count int n): y = x", "expected a parameter's name"},
    {"index_of_an_unknown_name", P3B "[i % q], count int n): y = x", "index 'q' is no integer parameter"},
    {"index_of_a_float", P3B "[i / a], float a, count int n): y = x", "index 'a' is no integer parameter"},
    {"index_of_a_pointer", P3B "[i / z], in float z, count int n): y = x", "index 'z' is no integer parameter"},
    {"no_open_paren", "out float y, count int n): y = 1", "expected '('"},
    {"empty", "", "expected '(' at the end"},
    {"blank", "  \t ", "expected '(' at the end"},
    {"only_params", "(out float y, count int n)", "expected ':' at the end"},
};

/* The parameter is the row's index: every row runs in a fresh process of this program, where
 * the row's pointers would not hold; the test reads the row from its own copy of the table. */
static void free_indices(struct criterion_test_params *p)
{
    cr_free(p->params);
}

ParameterizedTestParameters(fusion_spec, bad)
{
    size_t rows = sizeof bad_cases / sizeof bad_cases[0];
    int *idx = cr_malloc(rows * sizeof *idx);
    cr_assert(idx);
    for (size_t i = 0; i < rows; i++) idx[i] = (int)i;
    return cr_make_param_array(int, idx, rows, free_indices);
}

ParameterizedTest(int *row, fusion_spec, bad)
{
    const bad_case_t *c = &bad_cases[*row];
    char err[256] = "";
    cr_assert_not(cgj_ew_parse(c->text, &S, err, sizeof err), "%s: '%s' parsed", c->name, c->text);
    cr_assert(!strncmp(err, "column ", 7), "%s: message without a column: '%s'", c->name, err);
    cr_assert(strstr(err, c->msg) != NULL, "%s: want '%s' in '%s'", c->name, c->msg, err);
}

/* Column of the first occurrence of `at` in `text` from its last occurrence of `after`. */
static int column_of(const char *text, const char *after, const char *at)
{
    const char *p = strstr(text, after);
    cr_assert(p);
    const char *q = strstr(p, at);
    cr_assert(q);
    return (int)(q - text) + 1;
}

static int parsed_column(const char *text)
{
    char err[256] = "";
    cr_assert_not(cgj_ew_parse(text, &S, err, sizeof err), "'%s' parsed", text);
    int col = 0;
    cr_assert_eq(sscanf(err, "column %d:", &col), 1, "'%s'", err);
    return col;
}

/* Where an error has an obvious place, the column points at it (1-based). */
Test(fusion_spec, columns_point_at_the_error)
{
    const char *t = P3 "y = x + zz";
    cr_assert_eq(parsed_column(t), column_of(t, "=", "zz"), "unknown name");
    t = P3 "y = y + x";
    cr_assert_eq(parsed_column(t), column_of(t, "=", "y"), "reading an out");
    t = P3 "y = x; y = 2";
    cr_assert_eq(parsed_column(t), column_of(t, ";", "y"), "assigned twice");
    t = P3 "y = x ) + 1";
    cr_assert_eq(parsed_column(t), column_of(t, "= x", ")"), "garbage at the end");
    t = "(out float y, count int n) y = 1";
    cr_assert_eq(parsed_column(t), column_of(t, ")", "y"), "missing ':'");
    t = "(out float y, count int n): y = 1 +";
    cr_assert_eq(parsed_column(t), (int)strlen(t) + 1, "missing operand at the end");
}

Test(fusion_spec, too_many_parameters)
{
    char text[1024] = "(out float y, count int n";
    for (int k = 0; k < CGJ_EW_MAX_PARAMS - 1; k++)
        snprintf(text + strlen(text), sizeof text - strlen(text), ", float a%d", k);
    strcat(text, "): y = 1");
    char err[256];
    cr_assert_not(cgj_ew_parse(text, &S, err, sizeof err));
    assert_has(err, "more than 16 parameters");
}

Test(fusion_spec, expression_too_long)
{
    /* 81 x and 80 sums: 161 nodes */
    char text[2048] = "(out float y, in float x, count int n): y = x";
    for (int k = 0; k < CGJ_EW_MAX_NODES / 2; k++) strcat(text, " + x");
    char err[256];
    cr_assert_not(cgj_ew_parse(text, &S, err, sizeof err));
    assert_has(err, "expression too long (160 nodes)");
    /* the limit is the spec's, over all its assignments: two of 100 nodes each */
    char two[2048] = "(out float y, out float z, in float x, count int n): y = x";
    for (int k = 0; k < 49; k++) strcat(two, " + x");
    strcat(two, " + x; z = x");
    for (int k = 0; k < 49; k++) strcat(two, " + x");
    strcat(two, " + x");
    cr_assert_not(cgj_ew_parse(two, &S, err, sizeof err));
    assert_has(err, "expression too long");
}

Test(fusion_spec, name_too_long)
{
    char name[40], text[200], err[256];
    memset(name, 'b', 32);
    name[32] = 0;
    snprintf(text, sizeof text, "(inout float %s, count int n): %s = 1", name, name);
    cr_assert_not(cgj_ew_parse(text, &S, err, sizeof err));
    assert_has(err, "name too long");
    /* a long name in an expression, a function's place or an assignment's */
    snprintf(text, sizeof text, "(inout float x, count int n): x = %s(x)", name);
    cr_assert_not(cgj_ew_parse(text, &S, err, sizeof err));
    assert_has(err, "name too long");
    snprintf(text, sizeof text, "(inout float x, count int n): %s = 1", name);
    cr_assert_not(cgj_ew_parse(text, &S, err, sizeof err));
    assert_has(err, "name too long");
}

Test(fusion_spec, null_text_and_small_buffers)
{
    char err[256] = "x";
    cr_assert_not(cgj_ew_parse(NULL, &S, err, sizeof err));
    assert_has(err, "expected '('");
    /* a short buffer is truncated and terminated; none at all is not written */
    char small[12];
    memset(small, 'z', sizeof small);
    cr_assert_not(cgj_ew_parse(P3 "y = q", &S, small, sizeof small));
    cr_assert_eq(strlen(small), sizeof small - 1);
    cr_assert(!strncmp(small, "column ", 7));
    cr_assert_not(cgj_ew_parse(P3 "y = q", &S, NULL, 0));
    cr_assert(cgj_ew_parse(P3 "y = x", &S, NULL, 0));
}

/* A failed parse then a good one: no state carries over (the spec is reset). */
Test(fusion_spec, parse_resets_the_spec)
{
    char err[256];
    cr_assert_not(cgj_ew_parse("(out float y, in double x, count int n): y = x", &S, err, sizeof err));
    const cgj_ew_spec_t *s = parse_ok("(inout double x, count int n): x = 2 * x");
    cr_assert_eq(s->nparams, 2);
    cr_assert_eq(s->elem, CGJ_EW_F64);
    cr_assert_eq(s->nnodes, 3);
}

/* ---- registry ---- */

#define SCALE "(out float y, in float x, float a, count int n): y = a * x"
#define SHIFT "(out float y, in float x, float b, count int n): y = x + b"

Test(fusion_spec, register_and_look_up)
{
    char err[256];
    cr_assert(cgj_fusion_register("scale", SCALE, err, sizeof err), "%s", err);
    const cgj_ew_spec_t *s = cgj_fusion_lookup("scale");
    cr_assert_not_null(s);
    cr_assert_eq(s->nparams, 4);
    cr_assert_eq(s->n[s->assign[0].root].op, '*');
    cr_assert_null(cgj_fusion_lookup("scal"));
    cr_assert_null(cgj_fusion_lookup("scales"));
    cr_assert_null(cgj_fusion_lookup("other"));
    cr_assert_null(cgj_fusion_lookup(NULL));
    cr_assert_eq(cgj_fusion_lookup("scale"), s, "a spec found stays where it is");
}

Test(fusion_spec, plain_name_finds_the_mangled_kernel)
{
    char err[256];
    cr_assert(cgj_fusion_register("scale", SCALE, err, sizeof err), "%s", err);
    const cgj_ew_spec_t *s = cgj_fusion_lookup("scale");
    cr_assert_eq(cgj_fusion_lookup("_Z5scalePfPKfi"), s);
    cr_assert_eq(cgj_fusion_lookup("_Z5scaleIfEvPT_PKS0_S0_i"), s, "a template instance of scale");
    cr_assert_null(cgj_fusion_lookup("_Z6scale2PfPKfi"), "scale2 is another kernel");
    cr_assert_null(cgj_fusion_lookup("_Z4scalPfPKfi"));
    cr_assert_null(cgj_fusion_lookup("_Z5scal"));
    cr_assert_null(cgj_fusion_lookup("scalePfPKfi"));
    cr_assert(cgj_fusion_register("scale2", SHIFT, err, sizeof err), "%s", err);
    const cgj_ew_spec_t *s2 = cgj_fusion_lookup("_Z6scale2PfPKfi");
    cr_assert_not_null(s2);
    cr_assert_neq(s2, s);
    cr_assert_eq(cgj_fusion_lookup("_Z5scalePfPKfi"), s);
    /* a mangled registration is found by its exact name only */
    cr_assert(cgj_fusion_register("_Z4axpyPfPKff", SHIFT, err, sizeof err), "%s", err);
    cr_assert_not_null(cgj_fusion_lookup("_Z4axpyPfPKff"));
    cr_assert_null(cgj_fusion_lookup("axpy"));
}

/* The plain name of a long C++ kernel name finds it: the mangled prefix is not cut short. */
Test(fusion_spec, plain_name_of_a_long_kernel)
{
    char name[128], mangled[160], err[256];
    memset(name, 'k', 100);
    name[100] = 0;
    snprintf(mangled, sizeof mangled, "_Z100%sPfPKfi", name);
    cr_assert(cgj_fusion_register(name, SCALE, err, sizeof err), "%s", err);
    cr_assert_not_null(cgj_fusion_lookup(name));
    cr_assert_not_null(cgj_fusion_lookup(mangled), "%s", mangled);
    mangled[10] = 'j'; /* another name of that length */
    cr_assert_null(cgj_fusion_lookup(mangled));
    snprintf(mangled, sizeof mangled, "_Z99%.99sPfPKfi", name);
    cr_assert_null(cgj_fusion_lookup(mangled), "a 99-character prefix of the name");
}

Test(fusion_spec, later_registration_wins)
{
    char err[256];
    cr_assert(cgj_fusion_register("k", SCALE, err, sizeof err));
    const cgj_ew_spec_t *first = cgj_fusion_lookup("k");
    cr_assert(cgj_fusion_register("k", SHIFT, err, sizeof err));
    const cgj_ew_spec_t *second = cgj_fusion_lookup("k");
    cr_assert_neq(first, second);
    cr_assert_eq(second->n[second->assign[0].root].op, '+');
    cr_assert_eq(first->n[first->assign[0].root].op, '*', "the first spec is still valid");
    /* a failed registration leaves the last good one */
    cr_assert_not(cgj_fusion_register("k", "(out float y): y = ", err, sizeof err));
    cr_assert_eq(cgj_fusion_lookup("k"), second);
}

Test(fusion_spec, bad_registrations)
{
    char err[256] = "";
    cr_assert_not(cgj_fusion_register("k", "(out half y, count int n): y = 1", err, sizeof err));
    assert_has(err, "unknown type 'half'");
    cr_assert_null(cgj_fusion_lookup("k"));
    cr_assert_not(cgj_fusion_register("k", NULL, err, sizeof err));
    assert_has(err, "expected '('");
    cr_assert_not(cgj_fusion_register("", SCALE, err, sizeof err));
    assert_has(err, "no kernel name");
    cr_assert_not(cgj_fusion_register(NULL, SCALE, err, sizeof err));
    assert_has(err, "no kernel name");
    cr_assert_null(cgj_fusion_lookup(""));
}

typedef struct reg_arg {
    int id;
    int failures;
} reg_arg_t;

static void *register_many(void *p)
{
    reg_arg_t *a = p;
    for (int k = 0; k < 200; k++) {
        char name[32], err[256];
        snprintf(name, sizeof name, "t%d_k%d", a->id, k);
        if (!cgj_fusion_register(name, k % 2 ? SCALE : SHIFT, err, sizeof err)) a->failures++;
        if (!cgj_fusion_lookup(name)) a->failures++;
        snprintf(name, sizeof name, "t%d_k%d", (a->id + 1) % 4, k / 2);
        (void)cgj_fusion_lookup(name); /* another thread's, present or not yet */
    }
    return NULL;
}

Test(fusion_spec, registration_is_thread_safe)
{
    pthread_t th[4];
    reg_arg_t arg[4];
    for (int t = 0; t < 4; t++) {
        arg[t] = (reg_arg_t){.id = t};
        cr_assert_eq(pthread_create(&th[t], NULL, register_many, &arg[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        cr_assert_eq(arg[t].failures, 0, "thread %d", t);
    }
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 200; k++) {
            char name[32];
            snprintf(name, sizeof name, "t%d_k%d", t, k);
            const cgj_ew_spec_t *s = cgj_fusion_lookup(name);
            cr_assert_not_null(s, "%s", name);
            cr_assert_eq(s->n[s->assign[0].root].op, k % 2 ? '*' : '+', "%s", name);
        }
}

/* ---- registry files ---- */

#include "../common/stderr_capture.h"

static char file_path[64];

static const char *write_registry(const char *text)
{
    snprintf(file_path, sizeof file_path, "/tmp/cgj_ops_XXXXXX");
    int fd = mkstemp(file_path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return file_path;
}

static const char REGISTRY[] = "# elementwise kernels of the test\n"
                               "\n"
                               "   # an indented comment\n"
                               "scale(out float y, in float x, float a, count int n): y = a * x\n"
                               "shift (out float y, in float x, float b, count int n): y = x + b\n"
                               "\ttabbed\t(inout double x, count long n): x = x * 2\n"
                               "crlf(inout float x, count int n): x = relu(x)\r\n"
                               "bad_type(out half y, count int n): y = 1\n"
                               "nospec\n"
                               "broken (out float y, in float x, count int n): y = q\n"
                               "   \t  \n"
                               "last(inout float x, count int n): x = -x"; /* no final newline */

Test(fusion_spec, load_a_registry_file)
{
    const char *path = write_registry(REGISTRY);
    capture_begin();
    int bad = cgj_fusion_load_file(path);
    const char *err = capture_end();
    unlink(path);
    cr_assert_eq(bad, 3, "bad lines: %d; stderr: %s", bad, err);
    const cgj_ew_spec_t *s = cgj_fusion_lookup("scale");
    cr_assert_not_null(s);
    cr_assert_eq(s->nparams, 4);
    cr_assert_not_null(cgj_fusion_lookup("shift"));
    s = cgj_fusion_lookup("tabbed");
    cr_assert_not_null(s);
    cr_assert_eq(s->elem, CGJ_EW_F64);
    cr_assert_not_null(cgj_fusion_lookup("crlf"));
    cr_assert_not_null(cgj_fusion_lookup("last"));
    cr_assert_not_null(cgj_fusion_lookup("_Z5shiftPfPKffi"));
    cr_assert_null(cgj_fusion_lookup("bad_type"));
    cr_assert_null(cgj_fusion_lookup("nospec"));
    cr_assert_null(cgj_fusion_lookup("broken"));
    cr_assert_null(cgj_fusion_lookup("#"));
    /* each bad line on stderr, with its number and the kernel's name */
    char want[128];
    snprintf(want, sizeof want, "%s:8: kernel 'bad_type': column", path);
    assert_has(err, want);
    assert_has(err, "unknown type 'half'");
    snprintf(want, sizeof want, "%s:9: 'nospec' has no spec", path);
    assert_has(err, want);
    snprintf(want, sizeof want, "%s:10: kernel 'broken'", path);
    assert_has(err, want);
    assert_has(err, "unknown name 'q'");
    int lines = 0;
    for (const char *p = err; (p = strchr(p, '\n')); p++) lines++;
    cr_assert_eq(lines, 3, "one line per bad line: %s", err);
}

Test(fusion_spec, load_an_empty_or_missing_file)
{
    const char *path = write_registry("# nothing\n\n");
    capture_begin();
    int bad = cgj_fusion_load_file(path);
    const char *err = capture_end();
    unlink(path);
    cr_assert_eq(bad, 0);
    cr_assert_str_empty(err);

    capture_begin();
    bad = cgj_fusion_load_file("/nonexistent/cgjit/ops.txt");
    err = capture_end();
    cr_assert_eq(bad, -1);
    assert_has(err, "/nonexistent/cgjit/ops.txt");
    assert_has(err, "No such file");
}

/* CGJIT_OPS is read at the first lookup, once. */
Test(fusion_spec, the_configured_file_is_read_once_at_the_first_lookup)
{
    char path[64];
    snprintf(path, sizeof path, "%s",
             write_registry("scale(out float y, in float x, float a, count int n): y = a * x\n"));
    cgj_cfg.OPS = path;
    char err[256];
    cr_assert(cgj_fusion_register("mine", SHIFT, err, sizeof err));
    cr_assert_not_null(cgj_fusion_lookup("scale"));
    cr_assert_not_null(cgj_fusion_lookup("_Z5scalePfPKffi"));
    cr_assert_not_null(cgj_fusion_lookup("mine"));
    /* not read again: a kernel added to the file later is not found */
    FILE *f = fopen(path, "a");
    cr_assert(f);
    fputs("later(inout float x, count int n): x = 1\n", f);
    fclose(f);
    cr_assert_null(cgj_fusion_lookup("later"));
    unlink(path);
}

Test(fusion_spec, a_missing_configured_file_registers_nothing)
{
    cgj_cfg.OPS = "/nonexistent/cgjit/ops.txt";
    capture_begin();
    const cgj_ew_spec_t *s = cgj_fusion_lookup("scale");
    const char *err = capture_end();
    cr_assert_null(s);
    assert_has(err, "CGJIT_OPS=/nonexistent/cgjit/ops.txt");
    /* the program's registrations still work */
    char e[256];
    cr_assert(cgj_fusion_register("scale", SCALE, e, sizeof e));
    cr_assert_not_null(cgj_fusion_lookup("scale"));
}
