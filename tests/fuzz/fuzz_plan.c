/*
 * fuzz_plan.c — libFuzzer harness for the text format of allocation traces (allocator/plan.h,
 * allocator/plan_text.c): what CGJIT_DUMP_ALLOCS writes and cgjit-plan reads from any file.
 *
 * Each input is a trace file's bytes. Besides the sanitizers' checks, a broken promise of
 * plan.h aborts (a finding):
 *  - a trace that parses gives blocks in allocation order with sizes <= 2^44, lifetimes whose
 *    end lies after their start (or escapes), starts that rise, positions below the number of
 *    events; cgj_plan_write's text of them parses back to the same blocks;
 *  - one that does not parse gives no blocks and one "fuzz:LINE: message" line, terminated, also
 *    into a buffer too short for it, of printable ASCII only (the input's bytes escaped);
 *  - the planner, on the parsed blocks: offsets aligned, blocks live together never share a
 *    byte, the pool the top of the highest block, lower bound <= pool <= naive, the work within
 *    cgj_plan_work_limit (so a trace that makes the planner slow is a finding of its own, and
 *    libFuzzer's -timeout catches what the counting would miss), the same plan twice (for up
 *    to 64 blocks: a trace that runs the search to its budget takes about a second here).
 *
 *     fuzz_plan -max_total_time=60 tests/fuzz/corpus/plan
 */
#define _GNU_SOURCE /* fmemopen, open_memstream */
#include "allocator/plan.h"
#include "base/cgj_base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                             \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            fprintf(stderr, "fuzz_plan: %s:%d: %s does not hold\n", __FILE__, __LINE__, #c); \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

#define ALIGNED(x) ((x) == 0 ? CGJ_PLAN_ALIGN : ((x) + CGJ_PLAN_ALIGN - 1) / CGJ_PLAN_ALIGN * CGJ_PLAN_ALIGN)

static int parse(const uint8_t *data, size_t size, cgj_plan_block_t **b, size_t *n, char *err, size_t errlen)
{
    /* fmemopen of a zero-size buffer fails: an empty input reads from an empty string */
    FILE *f = size ? fmemopen((void *)data, size, "r") : fmemopen((void *)"", 1, "r");
    CHECK(f);
    int rc = cgj_plan_parse(f, "fuzz", b, n, err, errlen);
    fclose(f);
    return rc;
}

static void check_blocks(const cgj_plan_block_t *b, size_t n, size_t size)
{
    CHECK((n == 0) == (b == NULL));
    for (size_t i = 0; i < n; i++) {
        CHECK(b[i].size <= 1ull << 44);
        CHECK(b[i].end == CGJ_PLAN_ESCAPES || b[i].end > b[i].start);
        CHECK(b[i].end == CGJ_PLAN_ESCAPES || b[i].end <= size); /* one event per line at least */
        CHECK(i == 0 || b[i].start > b[i - 1].start);
    }
}

/* Written and parsed again: the same blocks (positions are dense as parsed). */
static void check_round_trip(const cgj_plan_block_t *b, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&text, &len);
    CHECK(w);
    cgj_plan_write(w, b, n);
    CHECK(fclose(w) == 0);
    cgj_plan_block_t *c;
    size_t m;
    char err[256];
    CHECK(parse((const uint8_t *)text, len, &c, &m, err, sizeof err) == 0);
    CHECK(m == n);
    for (size_t i = 0; i < n; i++) CHECK(c[i].size == b[i].size && c[i].start == b[i].start && c[i].end == b[i].end);
    cgj_free(c);
    free(text);
}

static int live_together(const cgj_plan_block_t *x, const cgj_plan_block_t *y)
{
    return x->end == CGJ_PLAN_ESCAPES || y->end == CGJ_PLAN_ESCAPES || (x->start < y->end && y->start < x->end);
}

/* Every promise of cgj_plan, checked by brute force (inputs are small: O(n^2) is fine). */
static void check_plan(cgj_plan_block_t *b, size_t n)
{
    cgj_plan_result_t r;
    cgj_plan(b, n, &r);
    uint64_t naive = 0, top = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = ALIGNED(b[i].size);
        naive += a;
        CHECK(b[i].offset % CGJ_PLAN_ALIGN == 0);
        if (b[i].offset + a > top) top = b[i].offset + a;
        for (size_t j = 0; j < i; j++)
            if (live_together(&b[i], &b[j]))
                CHECK(b[i].offset + a <= b[j].offset || b[j].offset + ALIGNED(b[j].size) <= b[i].offset);
    }
    CHECK(r.naive_bytes == naive && r.pool_bytes == top);
    CHECK(r.lower_bound <= r.pool_bytes && r.pool_bytes <= r.naive_bytes);
    CHECK(r.heuristic && r.heuristic[0]);
    CHECK(r.work <= cgj_plan_work_limit(n));
    if (n == 0 || n > 64) return;
    /* the result depends on the input only (checked where planning twice is cheap) */
    cgj_plan_block_t *again = malloc(n * sizeof *again + 1);
    CHECK(again);
    memcpy(again, b, n * sizeof *again);
    cgj_plan_result_t r2;
    cgj_plan(again, n, &r2);
    CHECK(r2.pool_bytes == r.pool_bytes && r2.work == r.work && strcmp(r2.heuristic, r.heuristic) == 0);
    for (size_t i = 0; i < n; i++) CHECK(again[i].offset == b[i].offset);
    free(again);
}

static void check_error(const uint8_t *data, size_t size, const char *err)
{
    CHECK(strncmp(err, "fuzz:", 5) == 0 && err[5] >= '1' && err[5] <= '9');
    for (const char *c = err; *c; c++) /* one line, that a terminal shows as it is */
        CHECK((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
    /* the same message, cut short but terminated, into a buffer too small for it */
    char small[12];
    memset(small, 'x', sizeof small);
    cgj_plan_block_t *b = (void *)1;
    size_t n = 1;
    CHECK(parse(data, size, &b, &n, small, sizeof small) == -1);
    CHECK(b == NULL && n == 0);
    CHECK(memchr(small, '\0', sizeof small) && strncmp(small, err, sizeof small - 1) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cgj_plan_block_t *b = (void *)1;
    size_t n = 1;
    char err[512];
    memset(err, 0, sizeof err);
    if (parse(data, size, &b, &n, err, sizeof err) != 0) {
        CHECK(b == NULL && n == 0);
        check_error(data, size, err);
        return 0;
    }
    check_blocks(b, n, size);
    check_round_trip(b, n);
    check_plan(b, n);
    cgj_free(b);
    return 0;
}
