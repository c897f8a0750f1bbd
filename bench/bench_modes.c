/*
 * bench_modes.c — cgjit's modes as cgjit-bench runs them, and the per-mode check (bench_modes.h).
 */
#include "bench_modes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_mode_names[BM_COUNT] = {"reduce-overhead", "default", "max-autotune"};

int bench_modes_parse(const char *list, int *modes, int *n)
{
    char buf[128];
    if (strlen(list) >= sizeof buf) return -1;
    strcpy(buf, list);
    *n = 0;
    for (char *rest = buf, *tok; (tok = strsep(&rest, ",")) != NULL;) { /* empty items are errors */
        int found = -1;
        for (int m = 0; m < BM_COUNT; m++)
            if (!strcmp(tok, bench_mode_names[m])) found = m;
        for (int k = 0; k < *n && found >= 0; k++)
            if (modes[k] == found) found = -1; /* named twice */
        if (found < 0 || *n == BM_COUNT) return -1;
        modes[(*n)++] = found;
    }
    return *n > 0 ? 0 : -1;
}

void bench_mode_enter(int mode)
{
    int st = cgj_mode_set(bench_mode_names[mode]);
    if (st != CGJ_OK) {
        fprintf(stderr, "cgjit-bench: cgj_mode_set(\"%s\"): %s\n", bench_mode_names[mode], cgj_strerror(st));
        exit(1);
    }
}

int bench_mode_fuses(int mode)
{
    return mode != BM_REDUCE_OVERHEAD;
}

void bench_anchor_name(char *buf, size_t cap, const char *base, int mode)
{
    snprintf(buf, cap, "%s@%s", base, bench_mode_names[mode]);
}

/* The share of the tolerance element (e, g) uses: 0 where equal (NaN and NaN, the same infinity). */
static double used_by(float e, float g, double scale)
{
    if (isnan(e) || isnan(g)) return isnan(e) && isnan(g) ? 0.0 : INFINITY;
    if (isinf(e) || isinf(g)) return e == g ? 0.0 : INFINITY;
    return fabs((double)g - (double)e) / (BENCH_ABS_TOL + (scale > 0 ? scale : BENCH_REL_TOL * fabs((double)e)));
}

void bench_compare(const float *eager, const float *got, size_t n, double normwise, bench_cmp_t *c)
{
    memset(c, 0, sizeof *c);
    c->first = n;
    c->bitwise = memcmp(eager, got, n * sizeof(float)) == 0;
    if (c->bitwise) return;
    double scale = 0;
    for (size_t i = 0; normwise > 0 && i < n; i++)
        if (isfinite(eager[i])) scale = fmax(scale, normwise * fabs((double)eager[i]));
    for (size_t i = 0; i < n; i++) {
        if (c->first == n && memcmp(&eager[i], &got[i], sizeof(float))) c->first = i;
        double u = used_by(eager[i], got[i], scale);
        if (u > c->used) {
            c->used = u;
            c->worst = i;
        }
    }
}

int bench_cmp_ok(const bench_cmp_t *c, int mode, uint32_t fused_chains)
{
    if (!bench_mode_fuses(mode) || fused_chains == 0) return c->bitwise;
    return c->bitwise || c->used <= 1.0;
}

const char *bench_cmp_cell(char *buf, size_t cap, const bench_cmp_t *c)
{
    if (c->bitwise) snprintf(buf, cap, "bitwise");
    else snprintf(buf, cap, "tol %.3g", c->used);
    return buf;
}

const char *bench_fused_cell(char *buf, size_t cap, int mode, const cgj_trace_info_t *i)
{
    if (!bench_mode_fuses(mode)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, "%u/%u", i->fused_chains, i->fused_ops);
    return buf;
}

void bench_fuse_note(const char *anchor, const cgj_trace_info_t *i)
{
    if (!i->fuse_drops) return;
    const char *hint = cgj_reason_hint(i->fuse_reason_code);
    printf("note: %s: %u chain(s) or registered kernel(s) left unfused; the last: %s%s%s%s\n", anchor, i->fuse_drops,
           cgj_reason_name(i->fuse_reason_code), hint[0] ? " (" : "", hint, hint[0] ? ")" : "");
}

void bench_cmp_complain(const char *anchor, const char *what, int mode, uint32_t fused_chains, const bench_cmp_t *c,
                        const float *eager, const float *got)
{
    if (!bench_mode_fuses(mode) || fused_chains == 0) {
        size_t i = c->first;
        fprintf(stderr,
                "cgjit-bench: %s: eager and %s results differ first at [%zu]: eager %.9g, %s %.9g (mode %s, "
                "%u chains fused: bitwise equality expected)\n",
                anchor, what, i, eager[i], what, got[i], bench_mode_names[mode], fused_chains);
        return;
    }
    size_t i = c->worst;
    fprintf(stderr,
            "cgjit-bench: %s: %s is beyond the tolerance of eager (%g + %g |eager|) at [%zu]: eager %.9g, "
            "%s %.9g (%.3g of the tolerance)\n",
            anchor, what, BENCH_ABS_TOL, BENCH_REL_TOL, i, eager[i], what, got[i], c->used);
}
