/*
 * test_verify.c — CGJIT_VERIFY against the fake driver (tracer/verify.c).
 *
 * Each scenario runs its step eagerly and traced from the same data and compares every step
 * bitwise (replay_common.h), with CGJIT_VERIFY=1: the program must see eager results whatever
 * verify finds, the calls of a checked segment must run exactly once (a re-issue after a side
 * exit would run them twice, and the axpb kernel is not idempotent), and the counters must say
 * what was checked. The verify's own report of a divergence is tested against a library with
 * hidden state in tests/runtime/test_libs_hidden.c.
 */
#include "replay_common.h"

#include <dlfcn.h>

#define STEPS 24

/* The fake driver opened under CGJIT_VERIFY, without the cost model, graphs from min_ops ops. */
static void open_verifying(const char *min_ops)
{
    setenv("CGJIT_VERIFY", "1", 1);
    setenv("CGJIT_COST", "0", 1);
    setenv("CGJIT_GRAPH_MIN_OPS", min_ops, 1);
    setup();
}

static void setup_verify(void)
{
    open_verifying("1");
}

TestSuite(tracer_verify, .init = setup_verify, .timeout = 60);

/* `steps` steps of fn, eagerly and traced from the same data, compared after each; then no graph
 * may have diverged. The counters, for more checks. */
static cgj_stats_t run_checked(const char *name, step_fn fn, int nbufs, int steps)
{
    bufs_t b;
    bufs_alloc(&b, nbufs);
    for (int s = 0; s < steps; s++) step_both(name, fn, s, &b, NULL);
    cgj_stats_t st = stats_now();
    cr_assert_eq(st.verify_divergences, 0, "%llu divergences of %llu graphs checked",
                 (unsigned long long)st.verify_divergences, (unsigned long long)st.verify_segments);
    return st;
}

/* x = 2x + 1, y = x / 2 + s, x = x - y: kernels whose result depends on running each once. */
static void three_kernels(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, 1.0f, N, 1));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f, N));
    OK(fk_addk_launch(&fk, NULL, b[1], s, N));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, -1.0f, N, 1));
}

Test(tracer_verify, every_graph_is_checked_and_agrees)
{
    cgj_stats_t st = run_checked("verify_agrees", three_kernels, 2, STEPS);
    cr_assert_geq(info_of("verify_agrees").replays, STEPS - 3);
    cr_assert_geq(st.verify_segments, STEPS - 3, "%llu graphs checked", (unsigned long long)st.verify_segments);
    cr_assert_eq(st.verify_unchecked, 0);
}

/* Every seventh step launches another kernel third: a side exit inside a checked segment, after
 * calls that ran for real already (none may run again). */
static void sometimes_other(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, 1.0f, N, 1));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f, N));
    if (s % 7 == 6) OK(fk_axpb_launch(&fk, NULL, b[1], 3.0f, 0.0f, N, 1));
    else OK(fk_addk_launch(&fk, NULL, b[1], s, N));
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, -1.0f, N, 1));
}

Test(tracer_verify, a_side_exit_in_a_checked_segment_runs_nothing_twice)
{
    bufs_t b;
    bufs_alloc(&b, 2);
    for (int s = 0; s < STEPS; s++) step_both("verify_exit", sometimes_other, s, &b, NULL);
    cgj_stats_t st = stats_now();
    cr_assert_gt(st.side_exits + st.variant_switches, 0, "the step never left its trace");
    cr_assert_gt(st.verify_segments, 0);
    cr_assert_eq(st.verify_divergences, 0);
}

/* The step's second buffer is a fresh allocation every step (made outside the step): the
 * segment names at launch an allocation its start did not know. It is not compared, and the
 * program keeps the eager results. */
typedef struct fresh {
    CUdeviceptr cur;
} fresh_t;

static void fresh_buffer(int s, CUdeviceptr *b, void *ctx)
{
    fresh_t *f = ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, 1.0f, N, 1));
    OK(fk_copyscale_launch(&fk, NULL, f->cur, b[0], 0.5f, N));
    OK(fk_addk_launch(&fk, NULL, f->cur, s, N));
    OK(fk_copyscale_launch(&fk, NULL, b[1], f->cur, 1.0f, N));
}

Test(tracer_verify, an_allocation_unknown_at_the_start_keeps_eager_results)
{
    bufs_t b;
    bufs_alloc(&b, 2);
    fresh_t f;
    CUdeviceptr old[STEPS] = {0};
    for (int s = 0; s < STEPS; s++) {
        f.cur = fk_alloc_floats(&fk, N, 3);
        old[s] = f.cur;
        g_traced = false;
        fresh_buffer(s, b.e, &f);
        f.cur = fk_alloc_floats(&fk, N, 3);
        cr_assert_eq(cgj_trace_begin("verify_fresh"), CGJ_OK);
        fresh_buffer(s, b.t, &f);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        compare_bufs("verify_fresh", s, &b);
    }
    cgj_stats_t st = stats_now();
    cr_assert_eq(st.verify_divergences, 0);
    cr_assert_gt(st.verify_unchecked, 0, "a segment naming an unknown allocation was compared");
    (void)old;
}

/* ---- memory mapped as PyTorch's expandable segments map it (cuMemCreate + cuMemMap) ---- */

static void *driver_fn(const char *name)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    cr_assert_eq(fk.gpa(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st), CUDA_SUCCESS, "%s", name);
    return fn;
}

/* Two chunks of one reservation, mapped side by side; returns the reservation's base. */
static CUdeviceptr expandable_segment(size_t chunk)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr base = 0;
    OK(((__typeof__(cuMemAddressReserve) *)driver_fn("cuMemAddressReserve"))(&base, 2 * chunk, 0, 0, 0));
    for (int k = 0; k < 2; k++) {
        CUmemGenericAllocationHandle h;
        OK(((__typeof__(cuMemCreate) *)driver_fn("cuMemCreate"))(&h, chunk, &prop, 0));
        OK(((__typeof__(cuMemMap) *)driver_fn("cuMemMap"))(base + k * chunk, chunk, 0, h, 0));
        OK(((__typeof__(cuMemSetAccess) *)driver_fn("cuMemSetAccess"))(base + k * chunk, chunk, &acc, 1));
    }
    return base;
}

/* x = 2x + 1 (not idempotent) on a buffer that straddles the two chunks: a graph run on memory
 * the eager calls already changed would be caught by the comparison with eager results. */
static void straddle(int s, CUdeviceptr *b, void *ctx)
{
    (void)s, (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, 1.0f, N, 1));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f, N));
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, -1.0f, N, 1));
}

Test(tracer_verify, a_buffer_across_mapped_chunks_is_checked_whole)
{
    size_t chunk = 2 << 20;
    bufs_t b;
    bufs_alloc(&b, 2);
    /* b[0]: half in each chunk of its own segment, same data in both halves' buffers */
    CUdeviceptr se = expandable_segment(chunk), st = expandable_segment(chunk);
    b.e[0] = se + chunk - N * sizeof(float) / 2, b.t[0] = st + chunk - N * sizeof(float) / 2;
    for (int i = 0; i < N; i++)
        ((float *)(uintptr_t)b.e[0])[i] = ((float *)(uintptr_t)b.t[0])[i] = (float)(i % 9) / 4.0f;
    for (int s = 0; s < STEPS; s++) step_both("verify_vmm", straddle, s, &b, NULL);
    cgj_stats_t sts = stats_now();
    cr_assert_geq(sts.verify_segments, STEPS - 3);
    cr_assert_eq(sts.verify_divergences, 0);
}

/* ---- a kernel that writes where no parameter points (CGJIT_VERIFY_ALL) ---- */

/* x = 2x + 1 on b[0], then b[1] += s + 1 through a cell holding b[1]'s address (the eager twin's
 * cell for the eager run, the traced one's for the traced run): b[1] is named by no op, and the
 * add is not idempotent, so a graph run after the eager calls adds twice there unless verify
 * puts b[1] back too. */
static CUdeviceptr cells[2];

static void through_a_cell(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, 1.0f, N, 1));
    OK(fk_addk_at_launch(&fk, NULL, cells[g_traced], s + 1, N));
}

static void cells_point_at(const bufs_t *b, int i)
{
    OK(fk.mem_alloc(&cells[0], sizeof(CUdeviceptr)));
    OK(fk.mem_alloc(&cells[1], sizeof(CUdeviceptr)));
    OK(fk.htod(cells[0], &b->e[i], sizeof(CUdeviceptr)));
    OK(fk.htod(cells[1], &b->t[i], sizeof(CUdeviceptr)));
}

/* Named memory only: the graph's second add is not undone (the limit CGJIT_VERIFY_ALL lifts). */
Test(tracer_verify, a_write_through_a_pointer_in_memory_escapes_the_named_memory)
{
    bufs_t b;
    bufs_alloc(&b, 2);
    cells_point_at(&b, 1);
    int differs = 0;
    for (int s = 0; s < STEPS; s++) {
        step_pair("verify_cell", through_a_cell, s, &b, NULL);
        float he[N], ht[N];
        OK(fk.dtoh(he, b.e[1], sizeof he));
        OK(fk.dtoh(ht, b.t[1], sizeof ht));
        differs += memcmp(he, ht, sizeof he) != 0;
    }
    cr_assert_gt(stats_now().verify_segments, 0);
    cr_assert_gt(differs, 0, "the memory no op names came out right: this test no longer shows the limit");
}

static void setup_verify_all(void)
{
    setenv("CGJIT_VERIFY_ALL", "1", 1);
    setup_verify();
}

TestSuite(tracer_verify_all, .init = setup_verify_all, .timeout = 60);

/* Every allocation the program holds: the write through the cell is compared and undone, the
 * program sees eager results at every step, and nothing diverges (the graph computes what the
 * calls did). */
Test(tracer_verify_all, undoes_a_write_no_op_names)
{
    bufs_t b;
    bufs_alloc(&b, 2);
    cells_point_at(&b, 1);
    for (int s = 0; s < STEPS; s++) step_both("verify_all_cell", through_a_cell, s, &b, NULL);
    cgj_stats_t st = stats_now();
    cr_assert_geq(st.verify_segments, STEPS - 3, "%llu graphs checked", (unsigned long long)st.verify_segments);
    cr_assert_eq(st.verify_divergences, 0);
    cr_assert_eq(st.verify_unchecked, 0);
}

/* A synchronous copy of new host bytes each step, then kernels that read them (llm.c's step: its
 * batch of tokens copied with cudaMemcpy, then the encoder): the graph's copy stages this run's
 * bytes, and computes what the calls did. */
static void copy_batch(int s, CUdeviceptr *b)
{
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)(s * 3 + i % 5);
    OK(fk.htod(b[0], host, sizeof host));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f, N));
}

static void copy_then_kernels(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    copy_batch(s, b);
    OK(fk_axpb_launch(&fk, NULL, b[1], 2.0f, 1.0f, N, 1));
}

Test(tracer_verify, a_copy_of_new_host_bytes_is_checked_with_them)
{
    cgj_stats_t st = run_checked("verify_copy", copy_then_kernels, 2, STEPS);
    cr_assert_geq(st.verify_segments, STEPS - 3, "%llu graphs checked", (unsigned long long)st.verify_segments);
}

/* The same, in two variants told apart after the copy (every other step ends with another
 * kernel): replay switches variants inside a checked segment, after the copy staged its bytes. */
static void copy_then_two_shapes(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    copy_batch(s, b);
    if (s % 2) OK(fk_axpb_launch(&fk, NULL, b[1], 2.0f, 1.0f, N, 1));
    else OK(fk_addk_launch(&fk, NULL, b[1], 3, N));
}

Test(tracer_verify, a_variant_switch_after_a_copy_is_checked_with_its_bytes)
{
    run_checked("verify_copy2", copy_then_two_shapes, 2, 2 * STEPS);
    uint64_t replays = info_of("verify_copy2").replays;
    cr_assert_geq(replays, STEPS, "%llu replays", (unsigned long long)replays);
}

/* llm.c's step around its batch, as a trace of one anchor: the loss read back and the context
 * synchronized (two boundaries), then the next batch copied synchronously, a memset and the
 * kernels that read the batch, then another copy and kernel. */
static void llmc_like(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    float host[N], back[N];
    OK(fk_axpb_launch(&fk, NULL, b[1], 0.5f, 1.0f, N, 1));
    OK(fk.memset8(b[2], 0, N * sizeof(float)));
    for (int i = 0; i < N; i++) host[i] = (float)(s * 7 + i % 3);
    OK(fk.htod(b[3], host, sizeof host));
    OK(fk_copyscale_launch(&fk, NULL, b[2], b[3], 1.5f, N));
    OK(fk.dtoh(back, b[2], sizeof back));
    OK(fk.ctx_sync());
    for (int i = 0; i < N; i++) host[i] = (float)(s * 5 + i % 4);
    OK(fk.htod(b[0], host, sizeof host));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.5f, N));
    OK(fk_axpb_launch(&fk, NULL, b[1], 2.0f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[1], s, N));
}

Test(tracer_verify, a_batch_copied_after_a_read_back_is_checked_with_its_bytes)
{
    run_checked("verify_llmc", llmc_like, 4, STEPS);
    cr_assert_geq(info_of("verify_llmc").replays, STEPS - 3);
}

/* ---- copies that return before they are done (the GPU's device-to-device cuMemcpy) ---- */

/* The step's kernels on a non-blocking stream, as llm.c and PyTorch issue them. Verify copies
 * memory aside and back with cuMemcpy on the legacy stream, which the GPU runs after the call
 * returns and which work on a non-blocking stream does not wait for: unless verify waits for
 * its copies, the graph starts on memory not yet put back and the program's next kernels on
 * memory not yet restored to eager results. The fake driver holds such copies back until
 * something is ordered after the legacy stream (fakecuda_defer_legacy_copies). */
static CUstream nb;

static void on_nonblocking(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_copyscale_launch(&fk, nb, b[1], b[0], 0.5f, N));
    OK(fk_axpb_launch(&fk, nb, b[1], 2.0f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, nb, b[0], s, N));
    OK(fk.stream_sync(nb));
}

Test(tracer_verify, its_copies_are_done_before_the_graph_and_the_program_go_on)
{
    void (*defer)(int) = (void (*)(int))dlsym(fk.handle, "fakecuda_defer_legacy_copies");
    cr_assert(defer);
    OK(fk.stream_create(&nb, CU_STREAM_NON_BLOCKING));
    defer(1);
    cgj_stats_t st = run_checked("verify_async_copies", on_nonblocking, 2, STEPS);
    defer(0);
    cr_assert_geq(st.verify_segments, STEPS - 3, "%llu graphs checked", (unsigned long long)st.verify_segments);
}

/* One anchor at two places: at even steps the kernel and a copy from pageable memory (a segment
 * too short for a graph, CGJIT_GRAPH_MIN_OPS 3), at odd steps the kernel and six more (a graph).
 * A run begun in the long variant has run its first kernel for real (checked against the
 * graph) when the shapes part: a switch to the short variant would issue it again, eagerly, at
 * its segment's end. Under CGJIT_VERIFY such a run leaves the trace (which issues nothing), and
 * every step's results are eager's. */
static float g_two_src[N];

static void two_places(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 2.0f, 1.0f, N, 1));
    if (s % 2 == 0) {
        for (int i = 0; i < N; i++) g_two_src[i] = (float)(s + i);
        OK(fk.htod_async(b[1], g_two_src, sizeof g_two_src, NULL));
        return;
    }
    for (int k = 0; k < 6; k++) OK(fk_addk_launch(&fk, NULL, b[1], k, N));
}

static void setup_verify_min3(void)
{
    open_verifying("3");
}

TestSuite(tracer_verify_min3, .init = setup_verify_min3, .timeout = 60);

Test(tracer_verify_min3, a_switch_to_a_segment_too_short_for_a_graph_runs_nothing_twice)
{
    run_checked("verify_two_places", two_places, 2, 2 * STEPS);
    cgj_trace_info_t i = info_of("verify_two_places");
    cr_assert_eq(i.variants, 2);
    cr_assert_geq(i.side_exits, STEPS - 4, "%llu side exits: short runs begun in the long variant switched",
                  (unsigned long long)i.side_exits);
}

/* ---- another thread's eager work on a checked segment's memory ----
 * A helper thread, outside any step (the program uses markers), launches on a stream of its own
 * when the test asks it to: an add on the buffer X that the main thread's checked segment reads.
 * Its kernels must neither run inside a window of the check (where the memory is being copied
 * aside and put back) nor be undone by one, and verify must not take them for a divergence. */
#include <pthread.h>
#include <time.h>

static struct helper {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    CUstream s;
    CUdeviceptr x;
    int asked, launching, ran, done, quit; /* requests and how far the last one got */
} hp = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, 0, 0, 0};

/* x[i] += 1, noting that it ran (the helper's kernel). */
static void k_add_one(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    (void)g, (void)b, (void)smem;
    float *x = *(float **)p[0];
    for (int i = 0; i < N; i++) x[i] += 1.0f;
    pthread_mutex_lock(&hp.mu);
    hp.ran++;
    pthread_cond_broadcast(&hp.cv);
    pthread_mutex_unlock(&hp.mu);
}

static CUfunction add_one;

static void *helper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hp.mu);
    for (int served = 0;;) {
        while (hp.asked == served && !hp.quit) pthread_cond_wait(&hp.cv, &hp.mu);
        if (hp.asked == served) break;
        served++;
        hp.launching++;
        pthread_cond_broadcast(&hp.cv);
        pthread_mutex_unlock(&hp.mu);
        void *params[] = {&hp.x};
        CUresult r = fk.launch(add_one, 1, 1, 1, 32, 1, 1, 0, hp.s, params, NULL);
        pthread_mutex_lock(&hp.mu);
        hp.done += r == CUDA_SUCCESS;
        pthread_cond_broadcast(&hp.cv);
    }
    pthread_mutex_unlock(&hp.mu);
    return NULL;
}

static pthread_t helper_start(CUdeviceptr x)
{
    static const size_t sizes[] = {8};
    add_one = fk.register_kernel("add_one", k_add_one, 1, sizes, 0, 0);
    OK(fk.stream_create(&hp.s, CU_STREAM_NON_BLOCKING));
    hp.x = x;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, helper_main, NULL), 0);
    return th;
}

static void helper_stop(pthread_t th)
{
    pthread_mutex_lock(&hp.mu);
    hp.quit = 1;
    pthread_cond_broadcast(&hp.cv);
    pthread_mutex_unlock(&hp.mu);
    pthread_join(th, NULL);
    OK(fk.stream_sync(hp.s));
}

/* Ask for one launch; `wait`: until it returned. */
static void helper_ask(bool wait)
{
    pthread_mutex_lock(&hp.mu);
    int want = ++hp.asked;
    pthread_cond_broadcast(&hp.cv);
    while (wait && hp.done < want) pthread_cond_wait(&hp.cv, &hp.mu);
    pthread_mutex_unlock(&hp.mu);
}

/* The main thread's step on its own non-blocking stream: y = x + y / 2, then y = 2y + 1; at `mid` steps
 * the helper adds one to x between the two, its launch returned before the second. */
static CUstream main_s;

static void read_x_then_scale(CUdeviceptr y, CUdeviceptr x, bool mid)
{
    OK(fk_copyscale_launch(&fk, main_s, y, x, 1.0f, N));
    if (mid) helper_ask(true);
    OK(fk_axpb_launch(&fk, main_s, y, 2.0f, 1.0f, N, 1));
}

Test(tracer_verify, another_threads_kernel_between_the_windows_is_kept_and_not_a_divergence)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3), y = fk_alloc_floats(&fk, N, 4);
    float hx[N], hy[N], got[N];
    OK(fk.dtoh(hx, x, sizeof hx));
    OK(fk.dtoh(hy, y, sizeof hy));
    OK(fk.stream_create(&main_s, CU_STREAM_NON_BLOCKING));
    pthread_t th = helper_start(x);
    int asked = 0;
    for (int s = 0; s < STEPS; s++) {
        bool mid = s >= 6 && s % 3 == 0; /* replayed steps, their segment checked */
        cr_assert_eq(cgj_trace_begin("verify_shared"), CGJ_OK);
        read_x_then_scale(y, x, mid);
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk.stream_sync(main_s));
        for (int i = 0; i < N; i++) {
            float t = 1.0f * hx[i] + 0.5f * hy[i];
            hy[i] = 2.0f * t + 1.0f;
            hx[i] += mid ? 1.0f : 0.0f;
        }
        asked += mid;
        if (mid && asked == 1)
            cr_assert_eq(info_of("verify_shared").reason_code, CGJ_REASON_VERIFY_SHARED, "%s",
                         info_of("verify_shared").reason);
        OK(fk.dtoh(got, y, sizeof got));
        cr_assert(memcmp(got, hy, sizeof got) == 0, "step %d: the step's results are not eager's", s);
        OK(fk.dtoh(got, x, sizeof got));
        cr_assert(memcmp(got, hx, sizeof got) == 0, "step %d: the helper's add to x was undone", s);
    }
    helper_stop(th);
    cgj_stats_t st = stats_now();
    cr_assert_eq(st.verify_divergences, 0, "the helper's add was taken for a divergence of the graph");
    cr_assert_geq(st.verify_unchecked, (uint64_t)asked, "%llu not checked", (unsigned long long)st.verify_unchecked);
    cr_assert_geq(st.verify_segments, STEPS - 3 - asked, "%llu checked", (unsigned long long)st.verify_segments);
}

/* The probe: y[i] = 0.5 y[i] + x[i]. Run from the graph (its second run in a checked step: the
 * first is the program's own call), that is inside the check's second window, it asks the helper
 * for a launch on x and waits until the helper is inside its launch, then gives the helper's
 * kernel 200 ms to run: it must not, before the window is over. */
static int probe_runs, probe_armed, met_window;

static void k_probe(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    (void)g, (void)b, (void)smem;
    float *y = *(float **)p[0], *x = *(float **)p[1];
    for (int i = 0; i < N; i++) y[i] = 0.5f * y[i] + x[i];
    if (!probe_armed || ++probe_runs != 2) return;
    pthread_mutex_lock(&hp.mu);
    int want = ++hp.asked, ran = hp.ran;
    pthread_cond_broadcast(&hp.cv);
    /* A kernel that waits for a host thread is the fake driver's alone (a GPU never does): where
     * the helper's way to its launch has to wait for this thread first (seen once in many runs on
     * a loaded machine), it cannot get there until this kernel returns, so the wait for it is
     * bounded; its kernel then runs after the window, which is what the test asks. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (hp.launching < want && pthread_cond_timedwait(&hp.cv, &hp.mu, &until) == 0) {}
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 200 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    while (hp.ran == ran && pthread_cond_timedwait(&hp.cv, &hp.mu, &until) == 0) {}
    met_window += hp.ran != ran;
    pthread_mutex_unlock(&hp.mu);
}

Test(tracer_verify, another_threads_kernel_never_runs_inside_a_window)
{
    static const size_t sizes[] = {8, 8};
    CUfunction probe = fk.register_kernel("probe", k_probe, 2, sizes, 0, 0);
    CUdeviceptr x = fk_alloc_floats(&fk, N, 5), y = fk_alloc_floats(&fk, N, 6);
    OK(fk.stream_create(&main_s, CU_STREAM_NON_BLOCKING));
    pthread_t th = helper_start(x);
    int armed = 0;
    for (int s = 0; s < 12; s++) {
        probe_runs = 0;
        probe_armed = s == 6 || s == 9;
        armed += probe_armed;
        cr_assert_eq(cgj_trace_begin("verify_window"), CGJ_OK);
        void *params[] = {&y, &x};
        OK(fk.launch(probe, 1, 1, 1, 32, 1, 1, 0, main_s, params, NULL));
        OK(fk_axpb_launch(&fk, main_s, y, 2.0f, 1.0f, N, 1));
        cr_assert_eq(cgj_trace_end(), CGJ_OK);
        OK(fk.stream_sync(main_s));
        if (probe_armed) cr_assert_eq(probe_runs, 2, "step %d: the graph was not checked", s);
    }
    helper_stop(th);
    cr_assert_eq(met_window, 0, "another thread's kernel ran inside a verify window");
    pthread_mutex_lock(&hp.mu);
    cr_assert_eq(hp.ran, armed, "the helper's kernels ran %d times of %d", hp.ran, armed);
    pthread_mutex_unlock(&hp.mu);
    cr_assert_eq(stats_now().verify_divergences, 0);
}
