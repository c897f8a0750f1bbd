/*
 * gpu_scenarios.cu — end-to-end checks of cgjit on a real GPU: `gpu_scenarios SCENARIO`.
 *
 * Each scenario is one step function. It is run STEPS times eagerly (no markers) on one set of
 * buffers, the result of every step copied to the host after the step; then STEPS times traced
 * (between cgj_trace_begin and cgj_trace_end) from the same initial state on a second set of
 * buffers, and every step's result is compared bitwise (memcmp) with the eager one. That is
 * cgjit's invariant: whenever the host can observe GPU memory, it holds exactly what eager
 * execution would have produced. Then the scenario's expectations on cgj_trace_info and
 * cgj_stats are checked (did it replay, split, exit, blacklist as it should).
 *
 * Exit status 0 with the last line `PASS <scenario>`; otherwise the problems, a last line
 * `FAIL <scenario> ...` and exit status 1 (2 for a bad command line).
 *
 * The program is built three ways (tests/gpu/CMakeLists.txt): static CUDA runtime, shared CUDA
 * runtime, and static with --default-stream per-thread, where "stream 0" below is the
 * per-thread default stream. All kernels use grid-stride loops, so that a launch with another
 * grid computes the same values (varying_grid relies on it).
 */
#define GPU_CUDA_FAIL_SUMMARY "(CUDA error)"
#include "gpu_common.h"

#ifndef CGJ_GPU_FLAVOUR
#define CGJ_GPU_FLAVOUR "unknown"
#endif

enum { N = 4096, BLOCK = 256, GRID = N / BLOCK, NBUF = 4, STEPS = 1000 };
static const size_t BYTES = N * sizeof(float);

static const char *status_name(int status)
{
    switch (status) {
#define STATUS_CASE(name, value, msg) \
    case CGJ_##name: return "CGJ_" #name;
        CGJ_STATUS_LIST(STATUS_CASE)
#undef STATUS_CASE
    }
    return "unknown status";
}

static void expect_status(int got, int want, const char *what)
{
    if (got != want) problem("%s returned %s (%d), expected %s", what, status_name(got), got, status_name(want));
}

/* ---- kernels (grid-stride: any grid computes the same values) ------------------------------ */

__global__ void k_affine(float *x, float a, float b, int n)
{
    FOR_EACH(i, n) x[i] = a * x[i] + b;
}

/* The same arithmetic under another kernel: a change of the step's topology (side_exit). */
__global__ void k_affine_twin(float *x, float a, float b, int n)
{
    FOR_EACH(i, n) x[i] = a * x[i] + b;
}

__global__ void k_axpy(float *y, const float *x, float alpha, int n)
{
    FOR_EACH(i, n) y[i] = y[i] + alpha * x[i];
}

__global__ void k_stencil(float *out, const float *in, float c, int n)
{
    FOR_EACH(i, n)
    {
        float l = in[i > 0 ? i - 1 : i], r = in[i + 1 < n ? i + 1 : i];
        out[i] = 0.25f * l + 0.5f * in[i] + 0.25f * r + c;
    }
}

__global__ void k_sgd(float *w, const float *g, float lr, int step, int n)
{
    FOR_EACH(i, n) w[i] = w[i] - lr * (g[i] + 1e-3f * (float)((step * 7 + i) % 13));
}

__global__ void k_momentum(float *g, const float *w, int step, int n)
{
    FOR_EACH(i, n) g[i] = 0.9f * g[i] + 0.1f * w[i] + 1e-4f * (float)((i + step) & 3);
}

__global__ void k_fma(float *acc, const float *x, const float *in, int n)
{
    FOR_EACH(i, n) acc[i] = acc[i] + x[i] * in[i];
}

/* An affine chain that neither converges nor blows up within STEPS steps, and whose kernels do
 * not commute: a reordered, skipped or repeated launch changes the result. */
static float chain_a(int k)
{
    return k % 2 ? 0.999f : 1.001f;
}
static float chain_b(int k)
{
    return 0.0005f * (float)(k % 5 - 2) + 0.0003f;
}

static void affine_chain(float *x, int from, int count, cudaStream_t s)
{
    for (int k = from; k < from + count; k++) k_affine<<<GRID, BLOCK, 0, s>>>(x, chain_a(k), chain_b(k), N);
}

/* ---- buffers ------------------------------------------------------------------------------ */

typedef struct set {
    float *d[NBUF];      /* device buffers, N floats each */
    cudaStream_t stream; /* a created non-blocking stream */
    cudaEvent_t ev;
    cudaEvent_t pool[4]; /* events taken in turn, as PyTorch and XLA take theirs from a pool */
    cudaGraphExec_t own; /* a graph of the program's own (own_graph), made at its first step */
    float *pageable;     /* malloc'ed host buffer, N floats */
} set_t;

static void set_init(set_t *s, float init[NBUF][N])
{
    s->own = NULL;
    for (int b = 0; b < NBUF; b++) {
        CHECK(cudaMalloc((void **)&s->d[b], BYTES));
        CHECK(cudaMemcpy(s->d[b], init[b], BYTES, cudaMemcpyHostToDevice));
    }
    CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming));
    for (int k = 0; k < 4; k++) CHECK(cudaEventCreateWithFlags(&s->pool[k], cudaEventDisableTiming));
    s->pageable = (float *)malloc(BYTES);
    if (!s->pageable) {
        printf("FAIL %s (out of host memory)\n", scenario_name);
        exit(1);
    }
    CHECK(cudaDeviceSynchronize());
}

static void set_free(set_t *s)
{
    for (int b = 0; b < NBUF; b++) CHECK(cudaFree(s->d[b]));
    CHECK(cudaStreamDestroy(s->stream));
    CHECK(cudaEventDestroy(s->ev));
    for (int k = 0; k < 4; k++) CHECK(cudaEventDestroy(s->pool[k]));
    if (s->own) CHECK(cudaGraphExecDestroy(s->own));
    free(s->pageable);
}

/* After a step, outside the markers: wait for all of it, then copy the first nbuf buffers. */
static void copy_result(const set_t *s, int nbuf, float *out)
{
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaGetLastError());
    for (int b = 0; b < nbuf; b++) CHECK(cudaMemcpy(out + (size_t)b * N, s->d[b], BYTES, cudaMemcpyDeviceToHost));
}

/* ---- scenarios ------------------------------------------------------------------------------ */

/* chain: 50 dependent kernels on stream 0. */
static void step_chain(set_t *s, int step)
{
    (void)step;
    affine_chain(s->d[0], 0, 50, 0);
}

/* varying_scalar: the step index and a learning rate computed from it are kernel parameters. */
static void step_varying_scalar(set_t *s, int step)
{
    float lr = 0.05f / (1.0f + 0.01f * (float)step);
    for (int k = 0; k < 5; k++) {
        k_sgd<<<GRID, BLOCK>>>(s->d[0], s->d[1], lr, step, N);
        k_momentum<<<GRID, BLOCK>>>(s->d[1], s->d[0], step, N);
    }
}

/* varying_pointer: input and output buffers swap every step. */
static void step_varying_pointer(set_t *s, int step)
{
    float *in = s->d[step % 2], *out = s->d[1 - step % 2];
    k_stencil<<<GRID, BLOCK>>>(out, in, 0.001f, N);
    k_affine<<<GRID, BLOCK>>>(out, 0.99f, 0.0005f, N);
    k_axpy<<<GRID, BLOCK>>>(out, in, 0.01f, N);
}

/* segments: a synchronous device-to-host copy in the middle; the value read feeds the kernels
 * after it. */
static void step_segments(set_t *s, int step)
{
    (void)step;
    float *x = s->d[0], *y = s->d[1];
    affine_chain(x, 0, 5, 0);
    float h;
    CHECK(cudaMemcpy(&h, x + 7, sizeof h, cudaMemcpyDeviceToHost));
    float c = 0.5f * h + 0.25f;
    for (int k = 0; k < 5; k++) k_axpy<<<GRID, BLOCK>>>(y, x, 1e-3f * c, N);
    k_affine<<<GRID, BLOCK>>>(y, 0.99f, 1e-3f * c, N);
    affine_chain(x, 5, 5, 0);
}

/* side_exit: 20 kernels; where step % 37 == 5 the middle one is another kernel (same arithmetic):
 * such steps leave the trace at that kernel until two of them have made a variant. */
static void step_side_exit(set_t *s, int step)
{
    float *x = s->d[0];
    for (int k = 0; k < 20; k++) {
        if (k == 10 && step % 37 == 5) k_affine_twin<<<GRID, BLOCK>>>(x, chain_a(k), chain_b(k), N);
        else k_affine<<<GRID, BLOCK>>>(x, chain_a(k), chain_b(k), N);
    }
}

/* varying_grid: 20 kernels; the middle one's grid changes every step (Guards v2: patched into
 * the graph, no side exit). */
static void step_varying_grid(set_t *s, int step)
{
    float *x = s->d[0];
    for (int k = 0; k < 20; k++) k_affine<<<k == 10 ? GRID + step % 7 : GRID, BLOCK>>>(x, chain_a(k), chain_b(k), N);
}

/* patch_on_gpu: 24 kernels whose parameters change every step, so many that replay patches
 * their nodes on the GPU (CGJIT_DEVICE_PATCH): scalars, pointers that swap, and fields spread
 * over a parameter struct larger than one 8-byte update. Every fifth step one kernel's block
 * changes as well: that node is set from the host, between the GPU's patches. */
typedef struct knobs {
    float a;
    int step;
    char pad[13];
    float b;
    double c;
} knobs_t;

__global__ void k_knobs(float *out, const float *in, knobs_t k, int n)
{
    FOR_EACH(i, n) out[i] = k.a * in[i] + k.b + (float)(k.c * 1e-3) + 1e-4f * (float)((k.step + i + k.pad[12]) % 5);
}

static void step_patch_on_gpu(set_t *s, int step)
{
    for (int j = 0; j < 24; j++) {
        float *in = s->d[(step + j) % 2], *out = s->d[1 - (step + j) % 2];
        knobs_t k;
        memset(&k, 0, sizeof k);
        k.a = chain_a(j + step % 3), k.step = step + j, k.b = chain_b(j) * (float)(1 + step % 4);
        k.c = 0.5 * (double)(step % 11), k.pad[12] = (char)(step % 3);
        int block = j == 12 && step % 5 == 0 ? BLOCK / 2 : BLOCK;
        k_knobs<<<GRID, block>>>(out, in, k, N);
    }
}

/* blacklist: the kernel count changes every run. */
static void step_blacklist(set_t *s, int step)
{
    affine_chain(s->d[0], 0, step % 50 + 1, 0);
}

/* streams: a created stream and stream 0 mixed, ordered by an event; a host-to-device copy from
 * pageable memory that the host overwrites as soon as the call returns; a stream sync at the end
 * of the step. */
static void step_streams(set_t *s, int step)
{
    float *x = s->d[0], *acc = s->d[1], *in = s->d[2], *y = s->d[3];
    CHECK(cudaMemsetAsync(acc, 0, BYTES, s->stream));
    affine_chain(x, step % 2, 1, 0);
    CHECK(cudaEventRecord(s->ev, 0));
    CHECK(cudaStreamWaitEvent(s->stream, s->ev, 0));
    for (int i = 0; i < N; i++) s->pageable[i] = 0.01f * (float)((i * 31 + step * 17) % 101) - 0.5f;
    CHECK(cudaMemcpyAsync(in, s->pageable, BYTES, cudaMemcpyHostToDevice, s->stream));
    memset(s->pageable, 0xa5, BYTES); /* garbage: the copy must have taken the data already */
    k_fma<<<GRID, BLOCK, 0, s->stream>>>(acc, x, in, N);
    k_axpy<<<GRID, BLOCK, 0, s->stream>>>(y, acc, 0.01f, N);
    k_affine<<<GRID, BLOCK, 0, s->stream>>>(y, 0.99f, 0.0f, N);
    CHECK(cudaStreamSynchronize(s->stream));
}

/* event_pool: stream 0 and a created stream ordered by two events that change every step (taken
 * in turn from a pool of four); the host waits on the second, then reads on the created stream
 * what the step left (its graph must record the step's event, not the one it was built with). */
static void step_event_pool(set_t *s, int step)
{
    float *x = s->d[0], *y = s->d[1];
    cudaEvent_t e1 = s->pool[(2 * step) % 4], e2 = s->pool[(2 * step + 1) % 4];
    affine_chain(x, step % 2, 3, 0);
    CHECK(cudaEventRecord(e1, 0));
    CHECK(cudaStreamWaitEvent(s->stream, e1, 0));
    k_axpy<<<GRID, BLOCK, 0, s->stream>>>(y, x, 0.01f, N);
    k_affine<<<GRID, BLOCK, 0, s->stream>>>(y, 0.99f, 0.001f, N);
    CHECK(cudaEventRecord(e2, s->stream));
    CHECK(cudaStreamWaitEvent(0, e2, 0));
    affine_chain(x, 3, 2, 0);
    CHECK(cudaEventSynchronize(e2));
    CHECK(cudaMemcpyAsync(s->pageable, y, BYTES, cudaMemcpyDeviceToHost, s->stream));
    CHECK(cudaStreamSynchronize(s->stream));
    k_axpy<<<GRID, BLOCK, 0, 0>>>(x, y, 0.001f * s->pageable[step % N], N);
}

/* own_graph: a graph of the program's own (two kernels on x, captured at the first step) launched
 * between the step's kernels, as torch.cuda.graph and XLA's command buffers are: the kernels
 * before it must run first, those after it after. */
static void step_own_graph(set_t *s, int step)
{
    float *x = s->d[0], *y = s->d[1];
    if (!s->own) {
        cudaGraph_t g;
        CHECK(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal));
        affine_chain(x, 7, 2, s->stream);
        CHECK(cudaStreamEndCapture(s->stream, &g));
        CHECK(cudaGraphInstantiate(&s->own, g, 0));
        CHECK(cudaGraphDestroy(g));
    }
    affine_chain(x, step % 2, 3, 0);
    CHECK(cudaGraphLaunch(s->own, 0));
    k_axpy<<<GRID, BLOCK, 0, 0>>>(y, x, 0.01f, N);
    affine_chain(x, 3, 2, 0);
}

/* as_made: a 2D copy (work cgjit does not capture) between the step's kernels, run as made. */
static void step_as_made(set_t *s, int step)
{
    float *x = s->d[0], *y = s->d[1];
    affine_chain(x, step % 2, 3, 0);
    CHECK(cudaMemcpy2DAsync(y, 64 * sizeof(float), x, 64 * sizeof(float), 32 * sizeof(float), N / 64,
                            cudaMemcpyDeviceToDevice, 0));
    k_affine<<<GRID, BLOCK, 0, 0>>>(y, 0.99f, 0.001f * (float)(step % 7), N);
    affine_chain(x, 3, 2, 0);
}

/* misuse: the eager step is 10 kernels; the traced one wraps them in API misuse. */
static void step_misuse(set_t *s, int step)
{
    (void)step;
    affine_chain(s->d[0], 0, 10, 0);
}

static void traced_misuse(set_t *s, int step)
{
    expect_status(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE, "cgj_trace_end() with no step");
    expect_status(cgj_trace_begin(NULL), CGJ_ERR_INVALID_ARG, "cgj_trace_begin(NULL)");
    expect_status(cgj_trace_begin(""), CGJ_ERR_INVALID_ARG, "cgj_trace_begin(\"\")");
    expect_status(cgj_trace_begin("misuse"), CGJ_OK, "cgj_trace_begin(\"misuse\")");
    affine_chain(s->d[0], 0, 5, 0);
    if (step % 10 == 3) expect_status(cgj_trace_begin("misuse"), CGJ_ERR_NESTED, "nested cgj_trace_begin(\"misuse\")");
    affine_chain(s->d[0], 5, 5, 0);
    expect_status(cgj_trace_end(), CGJ_OK, "cgj_trace_end()");
    expect_status(cgj_trace_end(), CGJ_ERR_NOT_ACTIVE, "second cgj_trace_end()");
}

/* ---- expectations -------------------------------------------------------------------------- */

static void expect_ge(const char *what, uint64_t got, uint64_t want)
{
    if (got < want)
        problem("%s is %llu, expected at least %llu", what, (unsigned long long)got, (unsigned long long)want);
}

static void expect_state(const cgj_trace_info_t *in, cgj_state_t want)
{
    if (in->state != want)
        problem("state is %s, expected %s (reason: \"%s\")", cgj_state_name(in->state), cgj_state_name(want),
                in->reason);
}

static void expect_chain(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    expect_state(in, CGJ_STATE_REPLAY);
    expect_ge("replays", in->replays, 990);
    if (in->segments != 1) problem("segments is %u, expected 1", in->segments);
}

/* The chain built by cgjit's builder thread (test_gpu sets CGJIT_BUILD_BACKGROUND=1): the runs
 * while it builds are eager and unrecorded, every later one replays, every step's result as
 * eager's (the runner compares them). */
static void expect_background(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    expect_state(in, CGJ_STATE_REPLAY);
    expect_ge("builds_background", st->builds_background, 1);
    if (st->steps_building != in->building_runs)
        problem("steps_building is %llu, the anchor's building_runs %llu", (unsigned long long)st->steps_building,
                (unsigned long long)in->building_runs);
    expect_ge("replays", in->replays + in->building_runs, 990);
    if (in->segments != 1) problem("segments is %u, expected 1", in->segments);
}

/* The chain in chunks of 8 kernels handed to cgjit's launch thread (test_gpu sets
 * CGJIT_LAUNCH_ASYNC=1 and CGJIT_CHUNK_OPS=8): six chunks a step launched there while the
 * program goes on, the last one (two kernels) at the step's end, every step's result as eager's
 * (the runner compares them). */
static void expect_handed(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    expect_state(in, CGJ_STATE_REPLAY);
    expect_ge("replays", in->replays, 990);
    if (in->segments != 7) problem("segments is %u, expected 7", in->segments);
    expect_ge("launches_handed", st->launches_handed, 6 * in->replays);
}

/* The chain under CGJIT_BUSY=1 (test_gpu sets it): every replayed step's GPU time measured
 * through CUPTI, and no longer than the step's period. */
static void expect_busy(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    expect_chain(in, st);
    expect_ge("gpu_busy_steps", in->gpu_busy_steps, 900);
    if (!in->gpu_busy_ns) problem("gpu_busy_ns is 0 over %llu steps", (unsigned long long)in->gpu_busy_steps);
    printf("busy %s: %llu ns per replayed step over %llu steps\n", CGJ_GPU_FLAVOUR, (unsigned long long)in->gpu_busy_ns,
           (unsigned long long)in->gpu_busy_steps);
}

static void expect_varying(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    expect_ge("varying_slots", in->varying_slots, 2);
    expect_ge("replays", in->replays, 990);
}

static void expect_segments(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    expect_ge("segments", in->segments, 2);
    expect_ge("replays", in->replays, 990);
}

static void expect_side_exit(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    /* The twin kernel's steps leave the trace until a variant of them exists; then replay
     * switches to it at that kernel (no side exit). */
    expect_ge("side_exits", in->side_exits, 2);
    expect_ge("variants", in->variants, 2);
    expect_ge("replays", in->replays, 990);
}

static void expect_varying_grid(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    expect_ge("replays", in->replays, 990);
    if (in->side_exits) problem("%llu side exits: a grid that changes is patched", (unsigned long long)in->side_exits);
    expect_ge("params_patched", st->params_patched, 900);
}

static void expect_patch_on_gpu(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    int driver = 0;
    CHECK(cudaDriverGetVersion(&driver));
    expect_ge("replays", in->replays, 990);
    if (in->side_exits) problem("%llu side exits: every change is patched", (unsigned long long)in->side_exits);
    expect_ge("params_patched", st->params_patched, 23 * 990);
    if (driver < 12040) { /* no device-updatable nodes before CUDA 12.4: patched from the host */
        printf("note: driver %d has no device-updatable kernel nodes: nodes were patched from the host\n", driver);
        return;
    }
    expect_ge("params_patched_on_gpu", st->params_patched_on_gpu, 23 * 990);
    expect_ge("patch_launches", st->patch_launches, 990);
}

static void expect_blacklist(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    expect_state(in, CGJ_STATE_BLACKLISTED);
}

static void expect_streams(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    expect_ge("replays", in->replays, 990);
}

static void expect_misuse(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)in, (void)st;
#define STRERROR_CHECK(name, value, msg)                                                     \
    do {                                                                                     \
        const char *m = cgj_strerror(CGJ_##name);                                            \
        if (!m || !m[0]) problem("cgj_strerror(CGJ_" #name ") is %s", m ? "empty" : "NULL"); \
    } while (0);
    CGJ_STATUS_LIST(STRERROR_CHECK)
#undef STRERROR_CHECK
    if (!cgj_strerror(-1) || !cgj_strerror(9999)) problem("cgj_strerror of an unknown code is NULL");
    cgj_trace_info_t none;
    expect_status(cgj_trace_info("no-such-anchor", &none), CGJ_ERR_NOT_FOUND, "cgj_trace_info(\"no-such-anchor\")");
    expect_status(cgj_stats(NULL), CGJ_ERR_INVALID_ARG, "cgj_stats(NULL)");
}

/* ---- in-step allocations (the memory pool) ------------------------------------------------ */

static bool traced_now;      /* the runner is in the traced half */
static float *first_temp[3]; /* addresses the first replayed step got */
static int temp_moves;       /* replayed steps that got other addresses */

static void note_temps(int step, float *a, float *b, float *c)
{
    if (!traced_now || step < 2) return;
    float *t[3] = {a, b, c};
    if (step == 2) memcpy(first_temp, t, sizeof t);
    else if (memcmp(first_temp, t, sizeof t)) temp_moves++;
}

/* temporaries: cudaMalloc/cudaFree of three temporaries every step, as a naive program does. */
static void step_temporaries(set_t *s, int step)
{
    float *a, *b, *c;
    CHECK(cudaMalloc((void **)&a, BYTES));
    CHECK(cudaMalloc((void **)&b, 2 * BYTES));
    k_stencil<<<GRID, BLOCK>>>(a, s->d[0], 0.001f, N);
    CHECK(cudaMemset(b, 0, 2 * BYTES));
    k_axpy<<<GRID, BLOCK>>>(b, a, 0.5f, N);
    CHECK(cudaFree(a));
    CHECK(cudaMalloc((void **)&c, BYTES));
    CHECK(cudaMemcpyAsync(c, b, BYTES, cudaMemcpyDeviceToDevice, 0));
    k_affine<<<GRID, BLOCK>>>(c, 0.99f, 0.0001f * (float)(step % 7), N);
    k_axpy<<<GRID, BLOCK>>>(s->d[0], c, 0.01f, N);
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    note_temps(step, a, b, c);
}

static void expect_temporaries(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    if (in->state != CGJ_STATE_REPLAY || in->replays < 990)
        problem("state %s with %llu replays, expected REPLAY and >= 990 (%s)", cgj_state_name(in->state),
                (unsigned long long)in->replays, in->reason);
    if (in->allocations != 3 || in->segments != 1)
        problem("%u allocations in %u segments, expected 3 in 1 (frees end no segment)", in->allocations, in->segments);
    if (st->pool_allocs < 3 * in->replays || st->pool_frees < 3 * in->replays)
        problem("%llu pool allocations and %llu frees for %llu replays", (unsigned long long)st->pool_allocs,
                (unsigned long long)st->pool_frees, (unsigned long long)in->replays);
    if (temp_moves) problem("replayed temporaries moved in %d steps", temp_moves);
    if (in->lower_bound > in->pool_bytes || in->pool_bytes > in->naive_bytes)
        problem("pool %llu bytes, lower bound %llu, naive %llu", (unsigned long long)in->pool_bytes,
                (unsigned long long)in->lower_bound, (unsigned long long)in->naive_bytes);
    printf("pool temporaries: planned %llu bytes, naive %llu, lower bound %llu\n", (unsigned long long)in->pool_bytes,
           (unsigned long long)in->naive_bytes, (unsigned long long)in->lower_bound);
}

/* async_temporaries: the same with cudaMallocAsync/cudaFreeAsync on a created stream. */
static void step_async_temporaries(set_t *s, int step)
{
    float *a, *b;
    CHECK(cudaMallocAsync((void **)&a, BYTES, s->stream));
    CHECK(cudaMallocAsync((void **)&b, BYTES, s->stream));
    k_stencil<<<GRID, BLOCK, 0, s->stream>>>(a, s->d[0], 0.002f, N);
    k_stencil<<<GRID, BLOCK, 0, s->stream>>>(b, a, 0.001f * (float)(step % 3), N);
    CHECK(cudaFreeAsync(a, s->stream));
    k_axpy<<<GRID, BLOCK, 0, s->stream>>>(s->d[0], b, 0.01f, N);
    CHECK(cudaFreeAsync(b, s->stream));
    CHECK(cudaStreamSynchronize(s->stream));
}

static void expect_async_temporaries(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    if (in->state != CGJ_STATE_REPLAY || in->replays < 990 || in->allocations != 2)
        problem("state %s, %llu replays, %u allocations; expected REPLAY, >= 990, 2 (%s)", cgj_state_name(in->state),
                (unsigned long long)in->replays, in->allocations, in->reason);
}

/* escape: each step allocates an output, reads the previous step's output, and the program
 * frees an output two steps after it was made: a replay must never overwrite an output that is
 * still held (the result would differ from eager). */
static float *held_out[2];
static void step_escape(set_t *s, int step)
{
    float *out;
    CHECK(cudaMalloc((void **)&out, BYTES));
    k_stencil<<<GRID, BLOCK>>>(out, s->d[0], 0.001f * (float)(step % 5), N);
    float *prev = held_out[(step + 1) % 2];
    if (prev) k_axpy<<<GRID, BLOCK>>>(s->d[0], prev, 0.25f, N); /* reads the previous output */
    k_axpy<<<GRID, BLOCK>>>(s->d[0], out, 0.5f, N);
    k_affine<<<GRID, BLOCK>>>(s->d[0], 0.5f, 0.0f, N);
    if (held_out[step % 2]) CHECK(cudaFree(held_out[step % 2])); /* the output of two steps ago */
    held_out[step % 2] = out;
}

static void expect_escape(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    if (in->state == CGJ_STATE_BLACKLISTED) problem("blacklisted: %s", in->reason);
    if (st->escape_exits == 0) problem("no escape exits although outputs stay held across steps");
    if (in->replays < 900 || in->variants < 3)
        problem("%llu replays with %u variants: twin variants should double-buffer the held outputs",
                (unsigned long long)in->replays, in->variants);
    printf("escape: %llu escape exits, %llu replays\n", (unsigned long long)st->escape_exits,
           (unsigned long long)in->replays);
}

/* alloc_sizes: the temporary is bigger every 10th step. */
static void step_alloc_sizes(set_t *s, int step)
{
    float *t;
    size_t n = step % 10 == 7 ? 2 * N : N;
    CHECK(cudaMalloc((void **)&t, n * sizeof(float)));
    k_stencil<<<GRID, BLOCK>>>(t, s->d[0], 0.001f, N);
    k_axpy<<<GRID, BLOCK>>>(s->d[0], t, 0.1f, N);
    k_affine<<<GRID, BLOCK>>>(s->d[0], 0.9f, 0.0f, N);
    CHECK(cudaFree(t));
}

static void expect_alloc_sizes(const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    (void)st;
    if (in->state != CGJ_STATE_REPLAY || in->replays < 850)
        problem("state %s with %llu replays, expected REPLAY and >= 850 (%s)", cgj_state_name(in->state),
                (unsigned long long)in->replays, in->reason);
}

typedef struct scenario {
    const char *name;
    int nbuf;                     /* buffers d[0..nbuf-1] form a step's result */
    void (*step)(set_t *, int);   /* one step, issued without markers */
    void (*traced)(set_t *, int); /* the traced step if not just step() between markers */
    void (*expect)(const cgj_trace_info_t *, const cgj_stats_t *);
} scenario_t;

static const scenario_t SCENARIOS[] = {
    {"chain", 1, step_chain, NULL, expect_chain},
    {"varying_scalar", 2, step_varying_scalar, NULL, expect_varying},
    {"varying_pointer", 2, step_varying_pointer, NULL, expect_varying},
    {"segments", 2, step_segments, NULL, expect_segments},
    {"side_exit", 1, step_side_exit, NULL, expect_side_exit},
    {"varying_grid", 1, step_varying_grid, NULL, expect_varying_grid},
    {"patch_on_gpu", 2, step_patch_on_gpu, NULL, expect_patch_on_gpu},
    {"blacklist", 1, step_blacklist, NULL, expect_blacklist},
    {"streams", 4, step_streams, NULL, expect_streams},
    {"event_pool", 2, step_event_pool, NULL, expect_streams},
    {"own_graph", 2, step_own_graph, NULL, expect_streams},
    {"as_made", 2, step_as_made, NULL, expect_streams},
    {"misuse", 1, step_misuse, traced_misuse, expect_misuse},
    {"temporaries", 1, step_temporaries, NULL, expect_temporaries},
    {"async_temporaries", 1, step_async_temporaries, NULL, expect_async_temporaries},
    {"escape", 1, step_escape, NULL, expect_escape},
    {"alloc_sizes", 1, step_alloc_sizes, NULL, expect_alloc_sizes},
    {"busy", 1, step_chain, NULL, expect_busy},
    {"background", 1, step_chain, NULL, expect_background},
    {"handed", 1, step_chain, NULL, expect_handed},
};
enum { NSCENARIOS = sizeof SCENARIOS / sizeof SCENARIOS[0] };

/* ---- the runner ------------------------------------------------------------------------------ */

static void traced_step(const scenario_t *sc, set_t *s, int step)
{
    if (sc->traced) {
        sc->traced(s, step);
        return;
    }
    expect_status(cgj_trace_begin(sc->name), CGJ_OK, "cgj_trace_begin");
    sc->step(s, step);
    expect_status(cgj_trace_end(), CGJ_OK, "cgj_trace_end");
}

/* The first differing float, at index i, of a step's result. */
static void report_mismatch(int step, const float *want, const float *got, size_t i)
{
    problem("step %d: result differs first at buffer %zu [%zu]: eager %.9g, traced %.9g", step, i / N, i % N, want[i],
            got[i]);
}

static void print_figures(const char *name, const cgj_trace_info_t *in, const cgj_stats_t *st)
{
    printf("info %s: state=%s replays=%llu side_exits=%llu segments=%u varying_slots=%u runs=%llu variants=%u "
           "ops=%u kernels=%u record_failures=%u reason=\"%s\"\n",
           name, cgj_state_name(in->state), (unsigned long long)in->replays, (unsigned long long)in->side_exits,
           in->segments, in->varying_slots, (unsigned long long)in->runs, in->variants, in->ops, in->kernels,
           in->record_failures, in->reason);
    print_stats(st);
}

static int run(const scenario_t *sc)
{
    static float init[NBUF][N];
    random_init(&init[0][0], (size_t)NBUF * N);
    set_t eager_set, traced_set;
    set_init(&eager_set, init);
    set_init(&traced_set, init);
    size_t per_step = (size_t)sc->nbuf * N;
    float *eager = (float *)malloc(STEPS * per_step * sizeof(float));
    float *got = (float *)malloc(per_step * sizeof(float));
    if (!eager || !got) {
        printf("FAIL %s (out of host memory)\n", sc->name);
        return 1;
    }

    for (int i = 0; i < STEPS; i++) {
        sc->step(&eager_set, i);
        copy_result(&eager_set, sc->nbuf, eager + i * per_step);
        expect_step_changes(eager, i, per_step, "result");
    }

    int differing = 0;
    traced_now = true;
    memset(held_out, 0, sizeof held_out);
    for (int i = 0; i < STEPS; i++) {
        traced_step(sc, &traced_set, i);
        copy_result(&traced_set, sc->nbuf, got);
        size_t first = compare_step(eager + i * per_step, got, per_step, &differing);
        if (first < per_step) report_mismatch(i, eager + i * per_step, got, first);
    }
    report_differing(differing, STEPS);

    cgj_trace_info_t in;
    cgj_stats_t st;
    memset(&in, 0, sizeof in);
    memset(&st, 0, sizeof st);
    expect_status(cgj_trace_info(sc->name, &in), CGJ_OK, "cgj_trace_info");
    expect_status(cgj_stats(&st), CGJ_OK, "cgj_stats");
    print_figures(sc->name, &in, &st);
    sc->expect(&in, &st);

    set_free(&eager_set);
    set_free(&traced_set);
    free(eager);
    free(got);
    CHECK(cudaGetLastError());
    if (problems) {
        printf("FAIL %s: %s (%d problem%s, %s)\n", sc->name, first_problem, problems, problems == 1 ? "" : "s",
               CGJ_GPU_FLAVOUR);
        return 1;
    }
    printf("PASS %s\n", sc->name);
    return 0;
}

static const char *scenario_at(int i)
{
    return SCENARIOS[i].name;
}

int main(int argc, char **argv)
{
    int i = scenario_arg(argc, argv, "SCENARIO", scenario_at, NSCENARIOS);
    if (i < 0) return 2;
    const scenario_t *sc = &SCENARIOS[i];
    char gpu[512];
    describe_gpu(gpu, sizeof gpu);
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    const char *ptds = "per-thread";
#else
    const char *ptds = "legacy";
#endif
    printf("gpu_scenarios %s: flavour %s (%s default stream), %s, %d steps\n", sc->name, CGJ_GPU_FLAVOUR, ptds, gpu,
           STEPS);
    return run(sc);
}
