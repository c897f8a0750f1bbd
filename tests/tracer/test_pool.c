/*
 * test_pool.c — in-step allocations served from the planned pool, against the fake driver.
 *
 * Each test runs a step eagerly into buffers E and traced into buffers T and compares them
 * after every step, and checks what replay asked of the driver: no allocation, no free, no
 * synchronization caused by a free.
 */
#define _GNU_SOURCE /* nftw */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakeapp.h"

#define N 64
#define OK(x) cr_assert_eq((x), CUDA_SUCCESS, "%s", #x)
static fk_t fk;

static void setup(void)
{
    fk_open(&fk);
}
TestSuite(tracer_pool, .init = setup);

static fakecuda_counts_t counts(void)
{
    fakecuda_counts_t c;
    fk.get_counts(&c);
    return c;
}

static cgj_trace_info_t info_of(const char *name)
{
    cgj_trace_info_t i;
    cr_assert_eq(cgj_trace_info(name, &i), CGJ_OK);
    return i;
}

static void compare(CUdeviceptr e, CUdeviceptr t, const char *what, int step)
{
    float he[N], ht[N];
    OK(fk.dtoh(he, e, sizeof he));
    OK(fk.dtoh(ht, t, sizeof ht));
    cr_assert(memcmp(he, ht, sizeof he) == 0, "%s differs at step %d", what, step);
}

/* Temporaries allocated and freed every step, as a naive program does; tmp[] gets the
 * addresses handed out. */
static void temporaries_step(int s, CUdeviceptr x, CUdeviceptr *tmp_out)
{
    CUdeviceptr a = 0, b = 0, c = 0;
    OK(fk.mem_alloc(&a, N * sizeof(float)));
    OK(fk.memset32_async(a, 0, N, NULL)); /* copyscale reads its destination */
    OK(fk_copyscale_launch(&fk, NULL, a, x, 1.0f, N));
    OK(fk.mem_alloc(&b, 2 * N * sizeof(float)));
    OK(fk.memset32_async(b, 0x3f800000u, 2 * N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, b, a, 0.5f, N));
    OK(fk.mem_free(a));
    OK(fk.mem_alloc(&c, N * sizeof(float)));
    OK(fk.dtod_async(c, b, N * sizeof(float), NULL));
    OK(fk_axpb_launch(&fk, NULL, c, 0.9f, (float)(s % 4), N, 1));
    OK(fk_copyscale_launch(&fk, NULL, x, c, 1.0f, N));
    OK(fk.mem_free(b));
    OK(fk.mem_free(c));
    if (tmp_out) tmp_out[0] = a, tmp_out[1] = b, tmp_out[2] = c;
}

Test(tracer_pool, temporaries_replay_from_stable_pool_addresses)
{
    CUdeviceptr e = fk_alloc_floats(&fk, N, 3), t = fk_alloc_floats(&fk, N, 3);
    CUdeviceptr first[3] = {0};
    fakecuda_counts_t before = {0};
    for (int s = 0; s < 100; s++) {
        temporaries_step(s, e, NULL);
        if (s == 2) before = counts();
        CUdeviceptr tmp[3];
        cr_assert_eq(cgj_trace_begin("temps"), CGJ_OK);
        temporaries_step(s, t, tmp);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        compare(e, t, "x", s);
        if (s == 2) memcpy(first, tmp, sizeof first);
        if (s >= 2) cr_assert(!memcmp(first, tmp, sizeof first), "pool addresses moved at step %d", s);
    }
    fakecuda_counts_t after = counts();
    /* Between step 2 and the end only the eager half allocated: 3 allocs and 3 frees a step. */
    cr_assert_eq(after.allocs - before.allocs, 97 * 3, "replay allocated from the driver");
    cr_assert_eq(after.frees - before.frees, 97 * 3, "replay freed to the driver");
    cr_assert_eq(after.device_syncs - before.device_syncs, 97 * 3, "only the eager frees synchronize the device");
    cgj_trace_info_t i = info_of("temps");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "%s", i.reason);
    cr_assert_eq(i.replays, 98);
    cr_assert_eq(i.allocations, 3);
    cr_assert_eq(i.segments, 1, "in-step frees end no segment");
    cr_assert_eq(i.varying_slots, 1, "only the step's scalar varies: pool pointers are constants");
    cr_assert_leq(i.lower_bound, i.pool_bytes);
    cr_assert_lt(i.pool_bytes, i.naive_bytes, "a and c can share memory");
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_eq(st.pool_allocs, 98 * 3);
    cr_assert_eq(st.pool_frees, 98 * 3);
    cr_assert_geq(st.pool_bytes, i.pool_bytes);
}

/* An output allocated in the step escapes; `keep` steps' outputs are held at once. */
static void escape_run(const char *name, int keep, int steps)
{
    CUdeviceptr e = fk_alloc_floats(&fk, N, 5), t = fk_alloc_floats(&fk, N, 5);
    CUdeviceptr eo[64] = {0}, to[64] = {0};
    float snap[64][N];
    for (int s = 0; s < steps; s++) {
        for (int pass = 0; pass < 2; pass++) {
            CUdeviceptr x = pass ? t : e, out = 0;
            if (pass) cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
            OK(fk.mem_alloc(&out, N * sizeof(float)));
            OK(fk.memset32_async(out, 0, N, NULL));
            OK(fk_copyscale_launch(&fk, NULL, out, x, 2.0f, N));
            OK(fk_axpb_launch(&fk, NULL, x, 0.5f, (float)s, N, 1));
            if (pass) cr_assert_eq(cgj_trace_end(), CGJ_OK);
            (pass ? to : eo)[s % 64] = out;
        }
        compare(eo[s % 64], to[s % 64], "output", s);
        OK(fk.dtoh(snap[s % 64], to[s % 64], sizeof snap[0]));
        /* Every output still held keeps the value its own step gave it. */
        for (int k = s - keep + 1; k <= s; k++) {
            if (k < 0) continue;
            float now[N];
            OK(fk.dtoh(now, to[k % 64], sizeof now));
            cr_assert(!memcmp(now, snap[k % 64], sizeof now), "the output of step %d was overwritten at step %d", k, s);
        }
        int drop = s - keep + 1;
        if (drop >= 0) {
            OK(fk.mem_free(eo[drop % 64]));
            OK(fk.mem_free(to[drop % 64]));
        }
    }
}

Test(tracer_pool, escaping_output_freed_before_the_next_step_replays)
{
    escape_run("escape1", 1, 60);
    cgj_trace_info_t i = info_of("escape1");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "%s", i.reason);
    cr_assert_eq(i.replays, 58);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_eq(st.escape_exits, 0);
}

Test(tracer_pool, escaping_output_still_held_is_never_overwritten)
{
    escape_run("escape3", 3, 60);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_assert_gt(st.escape_exits, 0, "a held output must make replay leave the trace");
    cgj_trace_info_t i = info_of("escape3");
    cr_assert_neq(i.state, CGJ_STATE_BLACKLISTED, "%s", i.reason);
}

/* Every 10th step allocates a bigger temporary: a different size is a different step. */
static void size_change_step(int s, CUdeviceptr x)
{
    CUdeviceptr tmp = 0;
    size_t n = s % 10 == 7 ? 2 * N : N;
    OK(fk.mem_alloc(&tmp, n * sizeof(float)));
    OK(fk.memset32_async(tmp, 0, N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, tmp, x, 1.5f, N));
    OK(fk_copyscale_launch(&fk, NULL, x, tmp, 0.5f, N));
    OK(fk.mem_free(tmp));
}

/* `steps` steps of `step`, each run eagerly on one buffer, then traced as `name` on another
 * (both from `seed`), compared after each; the anchor's info at the end. */
static cgj_trace_info_t against_eager(const char *name, void (*step)(int, CUdeviceptr), int steps, unsigned seed)
{
    CUdeviceptr e = fk_alloc_floats(&fk, N, seed), t = fk_alloc_floats(&fk, N, seed);
    for (int s = 0; s < steps; s++) {
        step(s, e);
        cr_assert_eq(cgj_trace_begin(name), CGJ_OK);
        step(s, t);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        compare(e, t, "x", s);
    }
    return info_of(name);
}

Test(tracer_pool, allocation_size_change_never_gives_a_wrong_result)
{
    cgj_trace_info_t i = against_eager("sizes", size_change_step, 80, 9);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "%s", i.reason);
    cr_assert_geq(i.replays, 60);
    cr_assert(i.side_exits > 0 || i.variants == 2, "the bigger steps leave the first variant");
}

Test(tracer_pool, free_of_pool_memory_never_reaches_the_driver)
{
    CUdeviceptr t = fk_alloc_floats(&fk, N, 1), out = 0;
    for (int s = 0; s < 5; s++) {
        cr_assert_eq(cgj_trace_begin("free_outside"), CGJ_OK);
        OK(fk.mem_alloc(&out, N * sizeof(float)));
        OK(fk.memset32_async(out, 0, N, NULL));
        OK(fk_copyscale_launch(&fk, NULL, out, t, 1.0f, N));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        fakecuda_counts_t before = counts();
        OK(fk.mem_free(out));
        fakecuda_counts_t after = counts();
        if (s >= 2) {
            cr_assert_eq(after.frees, before.frees, "step %d: a pool block went to the driver", s);
            cr_assert_eq(after.device_syncs, before.device_syncs);
        } else {
            cr_assert_eq(after.frees, before.frees + 1, "eager runs allocate from the driver");
        }
    }
    cr_assert_eq(fk.mem_free(out), CUDA_ERROR_INVALID_VALUE, "a double free is refused");
}

static char g_dump_dir[] = "/tmp/cgjit-dump-XXXXXX";

/* The dump folder's name holds %p: each process writes its own. */
static void dump_setup(void)
{
    char spec[64];
    cr_assert(mkdtemp(g_dump_dir));
    snprintf(spec, sizeof spec, "%s/run-%%p", g_dump_dir);
    setenv("CGJIT_DUMP_ALLOCS", spec, 1);
    fk_open(&fk);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    return remove(path);
}

/* The dump folder goes with the test: the files it checked, and the folder. */
static void dump_teardown(void)
{
    nftw(g_dump_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

Test(tracer_pool_dump, dump_writes_the_allocation_trace, .init = dump_setup, .fini = dump_teardown)
{
    CUdeviceptr t = fk_alloc_floats(&fk, N, 1);
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(cgj_trace_begin("dump me"), CGJ_OK);
        temporaries_step(s, t, NULL);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/run-%d/dump_me-v1.txt", g_dump_dir, (int)getpid());
    FILE *f = fopen(path, "r");
    cr_assert(f, "no dump at %s", path);
    char line[128];
    int allocs = 0, frees = 0;
    while (fgets(line, sizeof line, f)) {
        allocs += line[0] == 'a';
        frees += line[0] == 'f';
    }
    fclose(f);
    cr_assert_eq(allocs, 3);
    cr_assert_eq(frees, 3);
}

/* An anchor named with a newline, a slash and bytes of no UTF-8: the file's name keeps only
 * safe bytes, and the comment line stays one line, so cgjit-plan reads only the trace. */
Test(tracer_pool_dump, a_name_of_any_bytes_stays_in_its_comment, .init = dump_setup, .fini = dump_teardown)
{
    CUdeviceptr t = fk_alloc_floats(&fk, N, 1);
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(cgj_trace_begin("x\na 1 8\n/\xff"), CGJ_OK);
        temporaries_step(s, t, NULL);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/run-%d/x_a_1_8___-v1.txt", g_dump_dir, (int)getpid());
    FILE *f = fopen(path, "r");
    cr_assert(f, "no dump at %s", path);
    char line[256];
    int comments = 0, allocs = 0;
    while (fgets(line, sizeof line, f)) {
        comments += line[0] == '#';
        allocs += line[0] == 'a';
    }
    fclose(f);
    cr_assert_eq(comments, 2, "the name broke the comment line (the anchor's, then cgjit-plan's header)");
    cr_assert_eq(allocs, 3, "a line of the name was taken for an allocation");
}

/* The anchor `name` double-buffers its held outputs with twin variants: at least two, and at
 * least `replays` replays once they exist. The stats, for further checks. */
static cgj_stats_t assert_double_buffered(const char *name, uint64_t replays)
{
    cgj_trace_info_t i = info_of(name);
    cgj_stats_t st;
    cgj_stats(&st);
    cr_log_info("%s: %u variants, %llu replays, %llu side exits, %llu escape exits, %llu switches", name, i.variants,
                (unsigned long long)i.replays, (unsigned long long)i.side_exits, (unsigned long long)st.escape_exits,
                (unsigned long long)st.variant_switches);
    cr_assert_geq(i.variants, 2, "a twin variant double-buffers the held output");
    cr_assert_geq(i.replays, replays, "once twins exist, held outputs no longer stop replay: %s", i.reason);
    return st;
}

Test(tracer_pool, held_outputs_are_double_buffered_by_twin_variants)
{
    escape_run("escape2", 2, 80);
    cgj_stats_t st = assert_double_buffered("escape2", 60);
    cr_assert_gt(st.variant_switches, 0);
}

/* The output of step s is read by step s+1 and freed inside step s+2: frees of memory an
 * earlier step allocated end a segment, and three regions are needed at once. */
static CUdeviceptr g_held[2][2];
static void held_in_step(int s, CUdeviceptr *b, void *ctx)
{
    int pass = *(int *)ctx;
    CUdeviceptr out = 0;
    OK(fk.mem_alloc(&out, N * sizeof(float)));
    OK(fk.memset32_async(out, 0, N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, out, b[0], 1.0f + (float)(s % 5), N));
    CUdeviceptr prev = g_held[pass][(s + 1) % 2];
    if (prev) OK(fk_copyscale_launch(&fk, NULL, b[0], prev, 0.25f, N));
    OK(fk_copyscale_launch(&fk, NULL, b[0], out, 0.5f, N));
    if (g_held[pass][s % 2]) OK(fk.mem_free(g_held[pass][s % 2]));
    g_held[pass][s % 2] = out;
}

Test(tracer_pool, outputs_freed_two_steps_later_inside_the_step)
{
    CUdeviceptr e = fk_alloc_floats(&fk, N, 5), t = fk_alloc_floats(&fk, N, 5);
    for (int s = 0; s < 90; s++) {
        int pass = 0;
        held_in_step(s, &e, &pass);
        pass = 1;
        cr_assert_eq(cgj_trace_begin("held2"), CGJ_OK);
        held_in_step(s, &t, &pass);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        compare(e, t, "x", s);
    }
    cgj_trace_info_t i = info_of("held2");
    cgj_stats_t st;
    cgj_stats(&st);
    cr_log_info("held2: %u variants, %llu replays, %llu side exits, %llu escape exits, %llu switches", i.variants,
                (unsigned long long)i.replays, (unsigned long long)i.side_exits, (unsigned long long)st.escape_exits,
                (unsigned long long)st.variant_switches);
    cr_assert_geq(i.replays, 70, "%s", i.reason);
}

/* As a naive program writes it (tests/apps/alloc_in_loop): temporaries first, then the step's
 * output, the previous step's output freed inside the step. The output is held when the next
 * step allocates, after the temporaries were already served: the variant has to be chosen
 * where the step begins, from the twins whose blocks the program does not hold. */
static CUdeviceptr g_prev[2];
static void output_after_temps_step(int s, CUdeviceptr x, int pass)
{
    CUdeviceptr t1 = 0, out = 0;
    OK(fk.mem_alloc(&t1, N * sizeof(float)));
    OK(fk.memset32_async(t1, 0, N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, t1, x, 0.5f, N));
    OK(fk_axpb_launch(&fk, NULL, x, 0.75f, (float)(s % 3), N, 1));
    OK(fk.mem_alloc(&out, N * sizeof(float)));
    OK(fk.memset32_async(out, 0, N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, out, t1, 2.0f, N));
    OK(fk.mem_free(t1));
    if (g_prev[pass]) {
        OK(fk_copyscale_launch(&fk, NULL, x, g_prev[pass], 0.125f, N));
        OK(fk.mem_free(g_prev[pass]));
    }
    g_prev[pass] = out;
}

Test(tracer_pool, an_output_allocated_after_temporaries_is_double_buffered)
{
    CUdeviceptr e = fk_alloc_floats(&fk, N, 7), t = fk_alloc_floats(&fk, N, 7);
    for (int s = 0; s < 90; s++) {
        output_after_temps_step(s, e, 0);
        cr_assert_eq(cgj_trace_begin("late_out"), CGJ_OK);
        output_after_temps_step(s, t, 1);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        compare(e, t, "x", s);
        compare(g_prev[0], g_prev[1], "output", s);
    }
    assert_double_buffered("late_out", 80); /* each step begins in the twin whose output is free */
}

/* Temporaries on two streams: a kernel on a side stream writes the first, which the main stream
 * reads after an event, then frees; the second is allocated after. Work on two streams is not
 * in one order in a replay (a segment run as made on one, a graph on the other), so the two do
 * not share memory, where on one stream they would. */
static CUstream g_side;
static CUevent g_side_done;

static void two_stream_temps_step(int s, CUdeviceptr x)
{
    CUdeviceptr a = 0, c = 0;
    OK(fk.mem_alloc(&a, N * sizeof(float)));
    OK(fk.memset32_async(a, 0, N, g_side));
    OK(fk_copyscale_launch(&fk, g_side, a, x, 2.0f, N));
    OK(fk.event_record(g_side_done, g_side));
    OK(fk.stream_wait(NULL, g_side_done, 0));
    OK(fk_copyscale_launch(&fk, NULL, x, a, 0.5f, N));
    OK(fk.mem_free(a));
    OK(fk.mem_alloc(&c, N * sizeof(float)));
    OK(fk.memset32_async(c, 0, N, NULL));
    OK(fk_copyscale_launch(&fk, NULL, c, x, 1.0f, N));
    OK(fk_axpb_launch(&fk, NULL, c, 0.9f, (float)(s % 4), N, 1));
    OK(fk_copyscale_launch(&fk, NULL, x, c, 1.0f, N));
    OK(fk.mem_free(c));
}

Test(tracer_pool, temporaries_on_two_streams_do_not_share_memory)
{
    OK(fk.stream_create(&g_side, CU_STREAM_NON_BLOCKING));
    OK(fk.event_create(&g_side_done, 0));
    cgj_trace_info_t i = against_eager("temps2", two_stream_temps_step, 40, 3);
    cr_assert_eq(i.state, CGJ_STATE_REPLAY, "%s", i.reason);
    cr_assert_eq(i.replays, 38);
    cr_assert_eq(i.allocations, 2);
    cr_assert_eq(i.pool_bytes, i.naive_bytes, "blocks of a step on two streams share memory");
}
