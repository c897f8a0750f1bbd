/*
 * fuzz_spec.c — libFuzzer harness for the elementwise spec language (fusion/spec.c), the text a
 * program passes to cgj_op_register_elementwise and a registry file's lines carry.
 *
 * Each input is one spec (a NUL ends it early, as it would a C string). Besides the sanitizers'
 * checks, a spec that parses must hold spec.h's invariants — limits kept, children before
 * parents, every node's operands in range, a count, every out assigned — and evaluate without
 * reading out of bounds; one that does not parse must say so in a terminated "column N: ..."
 * message, also into a buffer too short for it. A broken invariant aborts (a finding).
 *
 * The stack may grow to 1 MiB only (fuzz_stack.h): a parser whose stack use grows with its
 * input overflows it at a size the fuzzer reaches.
 *
 *     fuzz_spec -max_total_time=60 tests/fuzz/corpus/spec
 */
#include "fusion/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_stack.h"

#define CHECK(c)                                                                             \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            fprintf(stderr, "fuzz_spec: %s:%d: %s does not hold\n", __FILE__, __LINE__, #c); \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

static void check_node(const cgj_ew_spec_t *s, uint32_t k)
{
    const cgj_ew_node_t *n = &s->n[k];
    switch (n->kind) {
    case CGJ_EW_NUM: break;
    case CGJ_EW_PARAM: CHECK(n->param < s->nparams && s->p[n->param].role != CGJ_EW_OUT); break;
    case CGJ_EW_NEG: CHECK(n->a < k); break;
    case CGJ_EW_BINARY: CHECK(n->a < k && n->b < k && strchr("+-*/<>lg=!", n->op) && n->op); break;
    case CGJ_EW_SELECT: CHECK(n->a < k && n->b < k && n->c < k); break;
    case CGJ_EW_CALL:
        CHECK(n->fn < CGJ_EW_FUNC_COUNT && n->a < k);
        if (cgj_ew_func_nargs[n->fn] == 2) CHECK(n->b < k);
        break;
    default: CHECK(!"a node of no known kind");
    }
}

static void check_spec(const cgj_ew_spec_t *s)
{
    CHECK(s->nparams >= 1 && s->nparams <= CGJ_EW_MAX_PARAMS);
    CHECK(s->nnodes >= 1 && s->nnodes <= CGJ_EW_MAX_NODES);
    CHECK(s->nassign >= 1 && s->nassign <= s->nparams);
    CHECK(s->elem == CGJ_EW_F32 || s->elem == CGJ_EW_F64);
    CHECK(s->count >= 0 && (uint32_t)s->count < s->nparams && (s->counts >> s->count & 1));
    for (uint32_t k = 0; k < s->nparams; k++) {
        const cgj_ew_param_t *p = &s->p[k];
        CHECK(p->role <= CGJ_EW_COUNT && p->type < CGJ_EW_TYPE_COUNT);
        CHECK(memchr(p->name, 0, sizeof p->name) && p->name[0]);
        CHECK(p->div <= s->nparams && p->mod <= s->nparams);
        CHECK(!cgj_ew_is_pointer(s, k) || p->type == s->elem);
        CHECK(cgj_ew_param_bytes(s, k) == 4 || cgj_ew_param_bytes(s, k) == 8);
    }
    for (uint32_t k = 0; k < s->nnodes; k++) check_node(s, k);
    double params[CGJ_EW_MAX_PARAMS];
    for (uint32_t k = 0; k < CGJ_EW_MAX_PARAMS; k++) params[k] = 0.5 + k;
    for (uint32_t j = 0; j < s->nassign; j++) {
        uint8_t p = s->assign[j].param;
        CHECK(p < s->nparams && (s->p[p].role == CGJ_EW_OUT || s->p[p].role == CGJ_EW_INOUT));
        CHECK(s->assign[j].root < s->nnodes);
        (void)cgj_ew_eval(s, s->assign[j].root, params);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_bound_stack();
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    static cgj_ew_spec_t s;
    char err[256], small[9];
    memset(err, 'x', sizeof err);
    bool ok = cgj_ew_parse(text, &s, err, sizeof err);
    CHECK(memchr(err, 0, sizeof err));
    if (ok) {
        CHECK(err[0] == 0);
        check_spec(&s);
    } else {
        CHECK(!strncmp(err, "column ", 7));
    }
    memset(small, 'x', sizeof small);
    CHECK(cgj_ew_parse(text, &s, small, sizeof small) == ok); /* the same verdict, a cut message */
    CHECK(memchr(small, 0, sizeof small));
    free(text);
    return 0;
}
