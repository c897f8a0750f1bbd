/*
 * spec.c — the elementwise spec parser (see spec.h): a recursive descent over one string, with
 * the column of the first error.
 *
 * The text comes from a program or a registry file, so nothing about its shape is trusted. The
 * descent recurses once per level of nesting (parentheses, a call's arguments, the branches of
 * ?:), and every such level goes through expr(), which counts it: deeper than CGJ_EW_MAX_DEPTH
 * is a parse error, so the stack the parser needs is bounded whatever the text (at most a few
 * KiB a level; under 200 KiB in all even unoptimized under ASan). Unary signs are read in a
 * loop, not by recursion: a chain of them makes one node per minus, which CGJ_EW_MAX_NODES
 * bounds. Nothing else recurses.
 */
#include "fusion/spec.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cgj_ew_type_names[CGJ_EW_TYPE_COUNT] = {
#define CGJ_EW_TYPE_NAME(name, spelling, bytes, ctype) spelling,
    CGJ_EW_TYPE_LIST(CGJ_EW_TYPE_NAME)
#undef CGJ_EW_TYPE_NAME
};
const char *const cgj_ew_type_ctypes[CGJ_EW_TYPE_COUNT] = {
#define CGJ_EW_TYPE_CTYPE(name, spelling, bytes, ctype) ctype,
    CGJ_EW_TYPE_LIST(CGJ_EW_TYPE_CTYPE)
#undef CGJ_EW_TYPE_CTYPE
};
const unsigned char cgj_ew_type_bytes[CGJ_EW_TYPE_COUNT] = {
#define CGJ_EW_TYPE_BYTES(name, spelling, bytes, ctype) bytes,
    CGJ_EW_TYPE_LIST(CGJ_EW_TYPE_BYTES)
#undef CGJ_EW_TYPE_BYTES
};
const char *const cgj_ew_func_names[CGJ_EW_FUNC_COUNT] = {
#define CGJ_EW_FUNC_NAME(name, nargs, f32, f64) #name,
    CGJ_EW_FUNC_LIST(CGJ_EW_FUNC_NAME)
#undef CGJ_EW_FUNC_NAME
};
const unsigned char cgj_ew_func_nargs[CGJ_EW_FUNC_COUNT] = {
#define CGJ_EW_FUNC_NARGS(name, nargs, f32, f64) nargs,
    CGJ_EW_FUNC_LIST(CGJ_EW_FUNC_NARGS)
#undef CGJ_EW_FUNC_NARGS
};
const char *const cgj_ew_func_forms[CGJ_EW_FUNC_COUNT][2] = {
#define CGJ_EW_FUNC_FORMS(name, nargs, f32, f64) {f32, f64},
    CGJ_EW_FUNC_LIST(CGJ_EW_FUNC_FORMS)
#undef CGJ_EW_FUNC_FORMS
};

/* The names of a broadcast index, resolved once every parameter is known. */
typedef struct pending {
    char div[CGJ_EW_NAME_MAX], mod[CGJ_EW_NAME_MAX];
} pending_t;

typedef struct parser {
    const char *text, *at;
    pending_t pend[CGJ_EW_MAX_PARAMS];
    cgj_ew_spec_t *s;
    char *err;
    size_t errlen;
    unsigned depth; /* levels of nesting around the cursor (expr() calls in progress) */
    bool failed;
} parser_t;

static bool fail(parser_t *P, const char *fmt, ...)
{
    if (P->failed) return false;
    P->failed = true;
    int n = snprintf(P->err, P->errlen, "column %d: ", (int)(P->at - P->text) + 1);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < P->errlen) vsnprintf(P->err + n, P->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static void skip(parser_t *P)
{
    while (isspace((unsigned char)*P->at)) P->at++;
}

static bool eat(parser_t *P, char c)
{
    skip(P);
    if (*P->at != c) return false;
    P->at++;
    return true;
}

static bool expect(parser_t *P, char c)
{
    return eat(P, c) || fail(P, "expected '%c'%s%.12s", c, *P->at ? " at " : " at the end", P->at);
}

/* The identifier at the cursor into buf (empty if none). */
static bool word(parser_t *P, char *buf, size_t len)
{
    skip(P);
    size_t n = 0;
    if (!isalpha((unsigned char)*P->at) && *P->at != '_') return buf[0] = 0, false;
    while (isalnum((unsigned char)P->at[n]) || P->at[n] == '_') n++;
    if (n >= len) return fail(P, "name too long: %.*s", (int)n, P->at);
    memcpy(buf, P->at, n);
    buf[n] = 0;
    P->at += n;
    return true;
}

static int param_named(const cgj_ew_spec_t *s, const char *name)
{
    for (uint32_t k = 0; k < s->nparams; k++)
        if (!strcmp(s->p[k].name, name)) return (int)k;
    return -1;
}

static int node(parser_t *P, cgj_ew_node_t n)
{
    if (P->s->nnodes == CGJ_EW_MAX_NODES) return fail(P, "expression too long (%d nodes)", CGJ_EW_MAX_NODES), -1;
    P->s->n[P->s->nnodes] = n;
    return (int)P->s->nnodes++;
}

static int expr(parser_t *P);

static int call(parser_t *P, const char *name)
{
    int fn = -1;
    for (int f = 0; f < CGJ_EW_FUNC_COUNT; f++)
        if (!strcmp(cgj_ew_func_names[f], name)) fn = f;
    if (fn < 0) return fail(P, "unknown function '%s'", name), -1;
    int args[2] = {0, 0};
    for (int k = 0; k < cgj_ew_func_nargs[fn]; k++) {
        if (k && !expect(P, ',')) return -1;
        if ((args[k] = expr(P)) < 0) return -1;
    }
    if (!eat(P, ')')) return fail(P, "%s takes %d argument(s)", name, cgj_ew_func_nargs[fn]), -1;
    return node(
        P, (cgj_ew_node_t){.kind = CGJ_EW_CALL, .fn = (uint8_t)fn, .a = (uint16_t)args[0], .b = (uint16_t)args[1]});
}

static int primary(parser_t *P)
{
    skip(P);
    if (eat(P, '(')) {
        int e = expr(P);
        return e >= 0 && expect(P, ')') ? e : -1;
    }
    if (isdigit((unsigned char)*P->at) || *P->at == '.') {
        char *end;
        double v = strtod(P->at, &end);
        if (end == P->at) return fail(P, "bad number"), -1;
        P->at = end;
        if (*P->at == 'f' || *P->at == 'F') P->at++;
        return node(P, (cgj_ew_node_t){.kind = CGJ_EW_NUM, .num = v});
    }
    char name[CGJ_EW_NAME_MAX];
    const char *start = P->at;
    if (!word(P, name, sizeof name)) return fail(P, "expected a number, a name or '('"), -1;
    if (eat(P, '(')) return call(P, name);
    int k = param_named(P->s, name);
    if (k < 0) return P->at = start, fail(P, "unknown name '%s'", name), -1;
    const cgj_ew_param_t *p = &P->s->p[k];
    if (p->role == CGJ_EW_OUT) return P->at = start, fail(P, "'%s' is an output: it cannot be read", name), -1;
    return node(P, (cgj_ew_node_t){.kind = CGJ_EW_PARAM, .param = (uint8_t)k});
}

/* Signs, then a primary: `--x` is NEG(NEG(x)), `+x` is x. */
static int unary(parser_t *P)
{
    unsigned minus = 0;
    for (;;) {
        if (eat(P, '-')) minus++;
        else if (!eat(P, '+')) break;
    }
    int a = primary(P);
    for (; a >= 0 && minus; minus--) a = node(P, (cgj_ew_node_t){.kind = CGJ_EW_NEG, .a = (uint16_t)a});
    return a;
}

static int binary(parser_t *P, int l, char op, int (*next)(parser_t *))
{
    int r = next(P);
    if (l < 0 || r < 0) return -1;
    return node(P, (cgj_ew_node_t){.kind = CGJ_EW_BINARY, .op = (uint8_t)op, .a = (uint16_t)l, .b = (uint16_t)r});
}

static int product(parser_t *P)
{
    int l = unary(P);
    for (char op; l >= 0 && (skip(P), (op = *P->at) == '*' || op == '/');) P->at++, l = binary(P, l, op, unary);
    return l;
}

static int sum(parser_t *P)
{
    int l = product(P);
    for (char op; l >= 0 && (skip(P), (op = *P->at) == '+' || op == '-');) P->at++, l = binary(P, l, op, product);
    return l;
}

static int compare(parser_t *P)
{
    int l = sum(P);
    skip(P);
    static const struct {
        const char *text;
        char op;
    } ops[] = {{"<=", 'l'}, {">=", 'g'}, {"==", '='}, {"!=", '!'}, {"<", '<'}, {">", '>'}};
    for (size_t k = 0; l >= 0 && k < sizeof ops / sizeof ops[0]; k++) {
        size_t len = strlen(ops[k].text);
        if (strncmp(P->at, ops[k].text, len)) continue;
        P->at += len;
        return binary(P, l, ops[k].op, sum);
    }
    return l;
}

static int select_expr(parser_t *P)
{
    int c = compare(P);
    if (c < 0 || !eat(P, '?')) return c;
    int a = expr(P);
    if (a < 0 || !expect(P, ':')) return -1;
    int b = expr(P);
    if (b < 0) return -1;
    return node(P, (cgj_ew_node_t){.kind = CGJ_EW_SELECT, .a = (uint16_t)c, .b = (uint16_t)a, .c = (uint16_t)b});
}

/* Every level of nesting passes here: the one place the recursion is bounded. */
static int expr(parser_t *P)
{
    if (P->depth > CGJ_EW_MAX_DEPTH) return fail(P, "nested deeper than %d levels", CGJ_EW_MAX_DEPTH), -1;
    P->depth++;
    int e = select_expr(P);
    P->depth--;
    return e;
}

/* After `[`: `i % M]`, `i / D]` or `(i / D) % M]`. */
static bool broadcast(parser_t *P, uint32_t k)
{
    char w[CGJ_EW_NAME_MAX];
    bool paren = eat(P, '(');
    if (!word(P, w, sizeof w) || strcmp(w, "i")) return fail(P, "an index is i %% M, i / D or (i / D) %% M");
    char op = (skip(P), *P->at);
    if (op != '%' && op != '/') return fail(P, "an index is i %% M, i / D or (i / D) %% M");
    P->at++;
    if (!word(P, op == '%' ? P->pend[k].mod : P->pend[k].div, CGJ_EW_NAME_MAX))
        return fail(P, "expected a parameter's name");
    if (paren) {
        if (op != '/' || !expect(P, ')') || !expect(P, '%') || !word(P, P->pend[k].mod, CGJ_EW_NAME_MAX))
            return fail(P, "an index is i %% M, i / D or (i / D) %% M");
    }
    return expect(P, ']');
}

/* The parameter a broadcast index names: 1 + its index, or 0 with the error. */
static uint8_t index_param(parser_t *P, const char *name)
{
    if (!name[0]) return 0;
    int k = param_named(P->s, name);
    if (k < 0 || (P->s->p[k].role != CGJ_EW_SCALAR && P->s->p[k].role != CGJ_EW_COUNT) || P->s->p[k].type < CGJ_EW_I32)
        return fail(P, "index '%s' is no integer parameter", name), 0;
    return (uint8_t)(k + 1);
}

static bool resolve_indices(parser_t *P)
{
    for (uint32_t k = 0; k < P->s->nparams; k++) {
        cgj_ew_param_t *p = &P->s->p[k];
        p->div = index_param(P, P->pend[k].div);
        p->mod = index_param(P, P->pend[k].mod);
        if (P->failed) return false;
    }
    return true;
}

static bool param(parser_t *P)
{
    cgj_ew_spec_t *s = P->s;
    if (s->nparams == CGJ_EW_MAX_PARAMS) return fail(P, "more than %d parameters", CGJ_EW_MAX_PARAMS);
    cgj_ew_param_t *p = &s->p[s->nparams];
    char w[CGJ_EW_NAME_MAX];
    if (!word(P, w, sizeof w)) return fail(P, "expected a parameter");
    static const char *const roles[] = {"in", "out", "inout", "", "count"};
    p->role = CGJ_EW_SCALAR;
    for (int r = 0; r < 5; r++)
        if (roles[r][0] && !strcmp(w, roles[r])) p->role = (uint8_t)r;
    if (p->role != CGJ_EW_SCALAR && !word(P, w, sizeof w)) return fail(P, "expected a type after '%s'", roles[p->role]);
    int t = -1;
    for (int k = 0; k < CGJ_EW_TYPE_COUNT; k++)
        if (!strcmp(w, cgj_ew_type_names[k])) t = k;
    if (t < 0) return fail(P, "unknown type '%s' (float, double, int, unsigned, long, size_t)", w);
    p->type = (uint8_t)t;
    bool ptr = p->role <= CGJ_EW_INOUT, integer = t >= CGJ_EW_I32;
    if (ptr && integer) return fail(P, "a pointer's elements are float or double");
    if (p->role == CGJ_EW_COUNT && !integer) return fail(P, "the count is an integer");
    if (!word(P, p->name, sizeof p->name)) return fail(P, "expected a parameter name");
    if (param_named(s, p->name) >= 0) return fail(P, "parameter '%s' named twice", p->name);
    if (ptr && s->elem != CGJ_EW_TYPE_COUNT && s->elem != t)
        return fail(P, "pointers of one kernel have one element type");
    if (ptr) s->elem = (uint8_t)t;
    if (p->role == CGJ_EW_COUNT) {
        if (s->count < 0) s->count = (int)s->nparams;
        s->counts |= (uint16_t)(1u << s->nparams);
    }
    if (eat(P, '[') &&
        !(p->role == CGJ_EW_IN ? broadcast(P, s->nparams) : fail(P, "only an `in` pointer may be indexed")))
        return false;
    s->nparams++;
    return true;
}

static bool assignment(parser_t *P)
{
    cgj_ew_spec_t *s = P->s;
    char name[CGJ_EW_NAME_MAX];
    const char *start = (skip(P), P->at);
    if (!word(P, name, sizeof name)) return fail(P, "expected an output's name");
    int k = param_named(s, name);
    if (k < 0 || (s->p[k].role != CGJ_EW_OUT && s->p[k].role != CGJ_EW_INOUT))
        return P->at = start, fail(P, "'%s' is not an out or inout parameter", name);
    for (uint32_t j = 0; j < s->nassign; j++)
        if (s->assign[j].param == k) return P->at = start, fail(P, "'%s' assigned twice", name);
    if (!expect(P, '=')) return false;
    int root = expr(P);
    if (root < 0) return false;
    s->assign[s->nassign].param = (uint8_t)k;
    s->assign[s->nassign++].root = (uint16_t)root;
    return true;
}

/* Whole-spec rules: a count, an output, every out assigned. */
static bool check(parser_t *P)
{
    const cgj_ew_spec_t *s = P->s;
    if (s->count < 0) return fail(P, "no count parameter");
    for (uint32_t k = 0; k < s->nparams; k++) {
        if (s->p[k].role != CGJ_EW_OUT) continue;
        bool set = false;
        for (uint32_t j = 0; j < s->nassign; j++) set |= s->assign[j].param == k;
        if (!set) return fail(P, "output '%s' is never assigned", s->p[k].name);
    }
    return s->nassign ? true : fail(P, "no assignment");
}

bool cgj_ew_parse(const char *text, cgj_ew_spec_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->elem = CGJ_EW_TYPE_COUNT;
    out->count = -1;
    parser_t P = {.text = text ? text : "", .at = text ? text : "", .s = out, .err = err, .errlen = errlen};
    if (errlen) err[0] = 0;
    if (!expect(&P, '(')) return false;
    do {
        if (!param(&P)) return false;
    } while (eat(&P, ','));
    if (!expect(&P, ')') || !resolve_indices(&P) || !expect(&P, ':')) return false;
    do {
        skip(&P);
        if (!*P.at) break; /* a trailing ';' */
        if (!assignment(&P)) return false;
    } while (eat(&P, ';'));
    skip(&P);
    if (*P.at) return fail(&P, "unexpected '%.12s'", P.at);
    if (out->elem == CGJ_EW_TYPE_COUNT) return fail(&P, "no pointer parameter");
    return check(&P);
}

unsigned cgj_ew_param_bytes(const cgj_ew_spec_t *s, uint32_t k)
{
    return cgj_ew_is_pointer(s, k) ? 8u : cgj_ew_type_bytes[s->p[k].type];
}

static double eval_call(const cgj_ew_node_t *n, double a, double b)
{
    switch (n->fn) {
    case CGJ_EW_FN_exp: return exp(a);
    case CGJ_EW_FN_log: return log(a);
    case CGJ_EW_FN_sqrt: return sqrt(a);
    case CGJ_EW_FN_rsqrt: return 1.0 / sqrt(a);
    case CGJ_EW_FN_tanh: return tanh(a);
    case CGJ_EW_FN_erf: return erf(a);
    case CGJ_EW_FN_abs: return fabs(a);
    case CGJ_EW_FN_sigmoid: return 1.0 / (1.0 + exp(-a));
    case CGJ_EW_FN_relu: return fmax(a, 0.0);
    case CGJ_EW_FN_gelu: return 0.5 * a * (1.0 + erf(a * 0.70710678118654752));
    case CGJ_EW_FN_gelu_tanh: return 0.5 * a * (1.0 + tanh(0.79788456080286536 * (a + 0.044715 * a * a * a)));
    case CGJ_EW_FN_min: return fmin(a, b);
    case CGJ_EW_FN_max: return fmax(a, b);
    default: return pow(a, b);
    }
}

static double eval_binary(char op, double a, double b)
{
    switch (op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    case '/': return a / b;
    case '<': return a < b;
    case '>': return a > b;
    case 'l': return a <= b;
    case 'g': return a >= b;
    case '=': return a == b;
    default: return a != b;
    }
}

double cgj_ew_eval(const cgj_ew_spec_t *s, unsigned root, const double *params)
{
    double v[CGJ_EW_MAX_NODES];
    for (unsigned k = 0; k <= root && k < s->nnodes; k++) { /* children come first */
        const cgj_ew_node_t *n = &s->n[k];
        switch (n->kind) {
        case CGJ_EW_NUM: v[k] = n->num; break;
        case CGJ_EW_PARAM: v[k] = params[n->param]; break;
        case CGJ_EW_NEG: v[k] = -v[n->a]; break;
        case CGJ_EW_BINARY: v[k] = eval_binary((char)n->op, v[n->a], v[n->b]); break;
        case CGJ_EW_SELECT: v[k] = v[n->a] != 0 ? v[n->b] : v[n->c]; break;
        default: v[k] = eval_call(n, v[n->a], v[n->b]); break;
        }
    }
    return root < s->nnodes ? v[root] : NAN;
}
