/*
 * follow.c — what follows a GEMM or a convolution on its stream: a bias over its output and an
 * activation of it, recognized among the elementwise stages of a trace (fusion.h).
 *
 * What a stage computes is never taken from its name: each is an elementwise stage (a registered
 * kernel or a library call cgjit describes, spec.h) evaluated at a few points, and it is a bias
 * add only if it computes c + b for them, with b read at the index a bias over the output's rows
 * (a GEMM) or channels (a convolution) is read at; an activation only if it computes relu(x) or
 * gelu_tanh(x). A library that folds them into its call (cuBLASLt's epilogues,
 * cudnnConvolutionBiasActivationForward) then computes the same.
 */
#include "fusion/fusion.h"

#include <math.h>
#include <string.h>

/* The stage of op i: its spec and parameter values (a pointer's: its address). */
typedef struct stage_view {
    const cgj_ew_spec_t *sp;
    uint64_t v[CGJ_EW_MAX_PARAMS];
} stage_view_t;

static void view_of(const cgj_oplist_t *l, const cgj_ew_spec_t *sp, uint32_t i, stage_view_t *out)
{
    out->sp = sp;
    for (uint32_t k = 0; k < sp->nparams; k++) out->v[k] = cgj_fusion_param(&l->ops[i], k);
}

/* Scalar parameter k's value as a double. */
static double scalar_value(const stage_view_t *s, uint32_t k)
{
    uint64_t v = s->v[k];
    switch (s->sp->p[k].type) {
    case CGJ_EW_F32: {
        float f;
        uint32_t u = (uint32_t)v;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    case CGJ_EW_F64: {
        double d;
        memcpy(&d, &v, sizeof d);
        return d;
    }
    case CGJ_EW_I32: return (int32_t)v;
    case CGJ_EW_I64: return (double)(int64_t)v;
    default: return (double)v;
    }
}

/* Its one assignment's value with pointer `x` (and `y`, where not 0) read as the given values:
 * NAN if it has other pointers, or not exactly one assignment. */
static double probe(const stage_view_t *s, CUdeviceptr x, double xv, CUdeviceptr y, double yv)
{
    const cgj_ew_spec_t *sp = s->sp;
    double p[CGJ_EW_MAX_PARAMS];
    if (sp->nassign != 1) return NAN;
    for (uint32_t k = 0; k < sp->nparams; k++) {
        if (!cgj_ew_is_pointer(sp, k)) p[k] = scalar_value(s, k);
        else if (sp->p[k].role == CGJ_EW_OUT) p[k] = NAN; /* never read */
        else if (s->v[k] == x) p[k] = xv;
        else if (y && s->v[k] == y) p[k] = yv;
        else return NAN;
    }
    return cgj_ew_eval(sp, sp->assign[0].root, p);
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (1 + fabs(b));
}

/* Is stage s C += bias, bias read at (i / d) % m (a bias over a GEMM's rows: d 1; over an NCHW
 * tensor's channels: d H*W), written to C? *bias its address. */
static bool is_bias(const stage_view_t *s, CUdeviceptr c, uint64_t d, uint64_t m, CUdeviceptr *bias)
{
    const cgj_ew_spec_t *sp = s->sp;
    if (sp->nassign != 1 || s->v[sp->assign[0].param] != c) return false;
    *bias = 0;
    for (uint32_t k = 0; k < sp->nparams; k++) {
        const cgj_ew_param_t *p = &sp->p[k];
        if (!cgj_ew_is_pointer(sp, k) || !(p->div || p->mod)) continue;
        uint64_t pd = p->div ? s->v[p->div - 1] : 1, pm = p->mod ? s->v[p->mod - 1] : 0;
        if (pd != d || pm != m || *bias) return false;
        *bias = s->v[k];
    }
    static const double pts[][2] = {{0.5, 0.25}, {-1.5, 3.0}, {2.0, -0.75}};
    for (size_t k = 0; *bias && k < sizeof pts / sizeof pts[0]; k++)
        if (!near(probe(s, c, pts[k][0], *bias, pts[k][1]), pts[k][0] + pts[k][1])) return false;
    return *bias != 0;
}

/* The activation stage s applies to C (written to *out), or CGJ_ACT_NONE. */
static cgj_fuse_act_t activation_of(const stage_view_t *s, CUdeviceptr c, CUdeviceptr *out)
{
    const cgj_ew_spec_t *sp = s->sp;
    if (sp->nassign != 1) return CGJ_ACT_NONE;
    *out = s->v[sp->assign[0].param];
    static const double xs[] = {-2.0, -0.5, 0.0, 0.5, 3.0};
    bool relu = true, gelu = true;
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        double y = probe(s, c, xs[k], 0, 0), x = xs[k];
        relu &= near(y, x > 0 ? x : 0);
        gelu &= near(y, 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x))));
    }
    return relu ? CGJ_ACT_RELU : gelu ? CGJ_ACT_GELU : CGJ_ACT_NONE;
}

/* The stage right after op `after` on stream s over n elements, or UINT32_MAX. */
static uint32_t next_stage(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t after, CUstream s,
                           uint64_t n)
{
    uint32_t j = cgj_fusion_next_element(&t->list, after + 1);
    if (j >= t->list.n || !specs[j] || cgj_fusion_element_stream(&t->list, j) != s ||
        cgj_fusion_count(&t->list.ops[j], specs[j]) != n)
        return UINT32_MAX;
    return j;
}

/* Is C (n floats at c) never read after op `last`: an in-step allocation freed in the step and
 * mentioned by no later op? */
static bool dead_after(const cgj_trace_t *t, CUdeviceptr c, uint64_t n, uint32_t last)
{
    cgj_fuse_chain_t one = {.nbufs = 1, .n = n};
    one.buf[0] = (cgj_fuse_buf_t){.addr = c, .extent = n, .type = CGJ_EW_F32, .store = true};
    cgj_fusion_mark_stores(&t->list, last, &one);
    return !one.buf[0].store;
}

bool cgj_fusion_epilogue(const cgj_trace_t *t, const cgj_ew_spec_t *const *specs, uint32_t after, CUstream s,
                         CUdeviceptr c, uint64_t n, uint64_t d, uint64_t m, cgj_epilogue_t *e)
{
    stage_view_t v;
    *e = (cgj_epilogue_t){.out = c, .act = CGJ_ACT_NONE};
    uint32_t j = next_stage(t, specs, after, s, n);
    if (j == UINT32_MAX) return false;
    view_of(&t->list, specs[j], j, &v);
    if (!is_bias(&v, c, d, m, &e->bias)) return false;
    e->stages[e->nstages++] = j, e->last = cgj_fusion_element_end(&t->list, j);
    uint32_t k = next_stage(t, specs, e->last, s, n);
    if (k == UINT32_MAX) return true;
    view_of(&t->list, specs[k], k, &v);
    CUdeviceptr y = 0;
    cgj_fuse_act_t act = activation_of(&v, c, &y);
    uint32_t end = cgj_fusion_element_end(&t->list, k);
    if (act == CGJ_ACT_NONE || (y != c && !dead_after(t, c, n, end))) return true;
    e->act = act, e->out = y;
    e->stages[e->nstages++] = k, e->last = end;
    return true;
}
