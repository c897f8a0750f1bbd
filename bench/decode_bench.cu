/*
 * decode_bench.cu — cgjit-bench-decode: a step shaped like ggml's decode loop (llama.cpp making
 * one token per llama_decode), eager, replayed by cgjit, and captured by the program itself the
 * way llama.cpp's own CUDA graphs do it, side by side in one process.
 *
 * One step:
 *   - a small host-to-device copy from pageable memory (the token: cuMemcpyHtoDAsync);
 *   - LAYERS x PER_LAYER kernel launches through cuLaunchKernelEx, each with 20 parameters
 *     (pointers, shapes, strides, flags), two of which change every step (the position and the KV
 *     length), with host work before each launch (ggml builds its graph between launches:
 *     --host-ns per launch);
 *   - a read-back of a few outputs into pinned memory (cuMemcpyDtoHAsync) and a
 *     cuStreamSynchronize, after which the host reads them.
 * Three buffer sets start equal and run the same steps:
 *   eager    the step as written;
 *   replay   the same step between cgj_trace_begin("decode") and cgj_trace_end();
 *   graphs   the program's own graphs, as llama.cpp makes them: the copy, then the launches
 *            captured on the stream (cudaStreamBeginCapture), the executable graph updated in
 *            place with cudaGraphExecUpdate (instantiated again only where the update is refused)
 *            and launched, then the read-back. This is the floor cgjit's replay is held to.
 * Rounds alternate a block of steps of each; the figures are the medians over rounds of a
 * block's mean step time and of its host time per call (from the step's begin to its
 * synchronization, less the program's own host work). At the end the three
 * sets must hold the same bits.
 *
 * Usage: cgjit-bench-decode [--rounds R] [--steps S] [--host-ns NS] [--json FILE] [--call-times]
 *        (defaults 15, 40, 300). --call-times also times each replayed launch call on its own and
 *        prints their spread and the step's costliest positions (the clock reads add to the other
 *        figures). Exit status: 0 identical and replayed; 1 a check failed;
 *        2 bad options; 77 no GPU.
 */
#include <cgjit.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { LAYERS = 12, PER_LAYER = 15, LAUNCHES = LAYERS * PER_LAYER, N = 8192, BLOCK = 256, OUTS = 16, WARMUP = 8 };
enum { SET_EAGER, SET_REPLAY, SET_GRAPHS, SETS };
static const char *const SET_NAMES[SETS] = {"eager", "replay", "graphs"};

#include "../tests/common/cuda_check.h"

/* A driver call that must return CUDA_SUCCESS. */
static const char *cu_result_text(CUresult r)
{
    static char text[32];
    snprintf(text, sizeof text, "CUresult %d", (int)r);
    return text;
}
#define CKD(call) CHECK_STATUS(CUresult, CUDA_SUCCESS, cu_result_text, #call, call)

/* The driver's functions, from the runtime (cudaGetDriverEntryPoint, which cgjit answers with
 * its own entry points, as it does for any program): no link with libcuda, so that a machine
 * without a driver gets a message, not a loader error. */
static struct {
    __typeof__(cuLaunchKernelEx) *launch_ex;
    __typeof__(cuMemcpyHtoDAsync) *htod;
    __typeof__(cuMemcpyDtoHAsync) *dtoh;
    __typeof__(cuStreamSynchronize) *sync;
} drv;

static void driver_entry_points(void)
{
    struct {
        const char *name;
        void **fn;
    } want[] = {{"cuLaunchKernelEx", (void **)&drv.launch_ex},
                {"cuMemcpyHtoDAsync", (void **)&drv.htod},
                {"cuMemcpyDtoHAsync", (void **)&drv.dtoh},
                {"cuStreamSynchronize", (void **)&drv.sync}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        cudaDriverEntryPointQueryResult q;
        CHECK(cudaGetDriverEntryPointByVersion(want[i].name, want[i].fn, 12000, cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || !*want[i].fn) {
            fprintf(stderr, "cgjit-bench-decode: the driver has no %s\n", want[i].name);
            exit(1);
        }
    }
}

/* One ggml-like operation: 20 parameters, as a ggml CUDA kernel takes its tensors' pointers,
 * shapes (ne), strides (nb) and op parameters. pos and kv_len change every step. */
__global__ void ggml_like_op(const float *a, const float *b, float *out, int n, int pos, int kv_len, float scale,
                             int ne0, int ne1, int ne2, int ne3, int nb0, int nb1, int nb2, int nb3, int op, float eps,
                             int layer, int head, const int *tok)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int j = (i + pos + *tok + head) % n;
    float v = a[i] * scale + b[j] * eps + (float)((kv_len + ne0 + ne1 + ne2 + ne3) % 7) * 1e-3f;
    v += (float)((nb0 + nb1 + nb2 + nb3) & 3) * 1e-4f + (float)layer * 1e-5f;
    if (op % 3 == 1) v = v > 0.0f ? v : 0.01f * v;
    else if (op % 3 == 2) v = v / (1.0f + fabsf(v));
    out[i] = v;
}

typedef struct set {
    float *x[2];                        /* the hidden state, ping-pong */
    int *tok;                           /* the token, copied in every step */
    float *out;                         /* pinned: what the host reads back */
    int step;                           /* the next step's index */
    cudaGraphExec_t exec;               /* SET_GRAPHS: the program's own executable graph */
    double host_ns, host_calls, own_ns; /* host time of timed steps, calls, the program's own work */
    double pre_ns, loop_ns, post_ns;    /* host_ns split: begin and copy in; the launches; the read-back */
    /* SET_REPLAY: host_ns and its split count the steps cgjit replayed; all_ns every timed step,
     * cgjit's eager probes (CGJIT_COST: one step in 64 or 128 runs eagerly, to measure that
     * replay pays) among them. */
    double all_ns, all_calls;
    double win_launch_ns;  /* SET_REPLAY: of host_ns, the segment launches inside the window */
    uint64_t replays_seen; /* the anchor's replays after the last step */
    long eager_steps;      /* timed steps cgjit ran eagerly */
} set_t;

static CUfunction g_fn;
static float *g_w[LAYERS][PER_LAYER];
static int g_host_ns = 300;
static double g_timer_ns; /* the host work's clock reads outside what it counts (timer_overhead_ns) */
static unsigned g_graph_updates, g_graph_reinstantiations;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The host work before a launch (ggml walking its graph); its length is added to *own. */
static void host_work(double *own)
{
    double t0 = now_ns(), t = t0;
    while (t - t0 < g_host_ns) t = now_ns();
    *own += t - t0;
}

static void launch(set_t *s, CUstream st, int layer, int k, int cur)
{
    int n = N, pos = s->step, kv_len = s->step + 1, ne[4] = {N, 1, 1, 1}, nb[4] = {4, 4 * N, 4 * N, 4 * N};
    int op = k, head = k % 4;
    float scale = 0.5f + 0.01f * (float)k, eps = 0.25f;
    const float *a = s->x[cur], *b = g_w[layer][k];
    float *out = s->x[1 - cur];
    void *params[20] = {&a,     &b,     &out,   &n,     &pos,   &kv_len, &scale, &ne[0], &ne[1], &ne[2],
                        &ne[3], &nb[0], &nb[1], &nb[2], &nb[3], &op,     &eps,   &layer, &head,  &s->tok};
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = (N + BLOCK - 1) / BLOCK, cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = BLOCK, cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = st;
    CKD(drv.launch_ex(&cfg, g_fn, params, NULL));
}

/* The launches of one step, host work before each; the state ends in x[0] (an even count of
 * ping-pong launches). */
static_assert(LAUNCHES % 2 == 0, "the step's state must end in x[0]");
static double *g_call_ns; /* --call-times: each timed replayed launch call's own time, by step then position */
static size_t g_call_n, g_call_cap;
static long g_faults[SETS], g_switches[SETS]; /* page faults and context switches in the timed blocks */

static void launches(set_t *s, CUstream st, double *own, int timed_calls)
{
    int cur = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < PER_LAYER; k++) {
            host_work(own);
            if (timed_calls && g_call_n < g_call_cap) {
                double c0 = now_ns();
                launch(s, st, l, k, cur);
                g_call_ns[g_call_n++] = now_ns() - c0;
            } else {
                launch(s, st, l, k, cur);
            }
            cur = 1 - cur;
        }
}

/* One step of set `which`; its host time (begin to the synchronization) and own work added to
 * the set's figures when timed. */
static void step(set_t *s, int which, CUstream st, int timed)
{
    static int host_tok;  /* pageable, as llama.cpp hands ggml its inputs */
    cgj_stats_t st0, st1; /* SET_REPLAY: the launches' host time before the window and at its end */
    memset(&st0, 0, sizeof st0), memset(&st1, 0, sizeof st1);
    if (which == SET_REPLAY) cgj_stats(&st0);
    double own = 0, t0 = now_ns(), ta = 0, tb = 0;
    size_t call_n0 = g_call_n;
    if (which == SET_REPLAY && cgj_trace_begin("decode") != CGJ_OK) {
        fprintf(stderr, "decode: cgj_trace_begin failed\n");
        exit(1);
    }
    host_tok = (s->step * 7919) % N;
    CKD(drv.htod((CUdeviceptr)s->tok, &host_tok, sizeof host_tok, st));
    if (which == SET_GRAPHS) {
        cudaGraph_t g;
        CHECK(cudaStreamBeginCapture((cudaStream_t)st, cudaStreamCaptureModeRelaxed));
        launches(s, st, &own, 0);
        CHECK(cudaStreamEndCapture((cudaStream_t)st, &g));
        cudaGraphExecUpdateResultInfo info;
        if (s->exec && cudaGraphExecUpdate(s->exec, g, &info) == cudaSuccess) {
            g_graph_updates++;
        } else {
            cudaGetLastError();
            if (s->exec) {
                CHECK(cudaGraphExecDestroy(s->exec));
                g_graph_reinstantiations++;
            }
            CHECK(cudaGraphInstantiate(&s->exec, g, 0));
        }
        CHECK(cudaGraphDestroy(g));
        CHECK(cudaGraphLaunch(s->exec, (cudaStream_t)st));
    } else {
        ta = now_ns();
        launches(s, st, &own, timed && which == SET_REPLAY);
        tb = now_ns();
    }
    CKD(drv.dtoh(s->out, (CUdeviceptr)s->x[0], OUTS * sizeof(float), st));
    double t1 = now_ns();
    if (which == SET_REPLAY) cgj_stats(&st1);
    CKD(drv.sync(st));
    if (which == SET_REPLAY && cgj_trace_end() != CGJ_OK) {
        fprintf(stderr, "decode: cgj_trace_end failed\n");
        exit(1);
    }
    volatile float sink = s->out[0]; /* the host reads the outputs */
    (void)sink;
    int absorbed = 1; /* every call of the step absorbed (SET_REPLAY), or not SET_REPLAY */
    if (which == SET_REPLAY) {
        cgj_trace_info_t ti;
        memset(&ti, 0, sizeof ti);
        cgj_trace_info("decode", &ti);
        absorbed = ti.replays > s->replays_seen;
        s->replays_seen = ti.replays;
    }
    double host = t1 - t0 - own - g_timer_ns * LAUNCHES; /* the window less the program's own work */
    if (timed) {
        s->all_ns += host;
        s->all_calls += LAUNCHES + 2;
    }
    if (timed && !absorbed) {
        s->eager_steps++;
        g_call_n = call_n0; /* its calls went to the driver: no absorbed call's time */
    } else if (timed) {
        if (which != SET_GRAPHS) {
            s->pre_ns += ta - t0;
            s->loop_ns += tb - ta - own - g_timer_ns * LAUNCHES;
            s->post_ns += t1 - tb;
        }
        s->host_ns += host;
        s->host_calls += LAUNCHES + 2;
        s->own_ns += own;
        s->win_launch_ns += (double)(st1.launch_host_ns - st0.launch_host_ns);
    }
    s->step++;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* What one host_work costs beyond what it adds to *own: the clock reads at its two ends (about
 * one clock_gettime, which some machines make a system call). It is the program's work, not
 * cgjit's: taken out of the host time per call (median of 9 blocks of 2000). */
static double timer_overhead_ns(void)
{
    double v[9];
    for (int b = 0; b < 9; b++) {
        double own = 0, t0 = now_ns();
        for (int i = 0; i < 2000; i++) host_work(&own);
        v[b] = (now_ns() - t0 - own) / 2000;
    }
    double m = median(v, 9);
    return m > 0 ? m : 0;
}

/* --call-times: the replayed launch calls' own times (less an empty timing's cost), spread over
 * calls and the positions in the step that cost most; page faults and context switches per step
 * of the `timed` steps each set ran. */
static void print_call_times(long timed)
{
    double e[1001];
    for (int i = 0; i < 1001; i++) {
        double a = now_ns();
        e[i] = now_ns() - a;
    }
    double empty = median(e, 1001), pos_sum[LAUNCHES] = {0}, sum = 0;
    size_t n = g_call_n - g_call_n % LAUNCHES;
    for (size_t i = 0; i < n; i++) {
        g_call_ns[i] -= empty;
        pos_sum[i % LAUNCHES] += g_call_ns[i], sum += g_call_ns[i];
    }
    int top[5] = {0, 0, 0, 0, 0};
    for (int k = 0; k < 5; k++) {
        int best = -1;
        for (int p = 0; p < LAUNCHES; p++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= top[j] == p;
            if (!taken && (best < 0 || pos_sum[p] > pos_sum[best])) best = p;
        }
        top[k] = best;
    }
    qsort(g_call_ns, n, sizeof *g_call_ns, cmp_double);
    printf("  replayed launch calls timed apart (less %.1f ns an empty timing): mean %.1f ns, p10 %.1f, median %.1f, "
           "p90 %.1f, p99 %.1f, max %.1f\n",
           empty, sum / n, g_call_ns[n / 10], g_call_ns[n / 2], g_call_ns[n * 9 / 10], g_call_ns[n * 99 / 100],
           g_call_ns[n - 1]);
    printf(
        "  page faults per step: eager %.2f, replay %.2f, graphs %.2f; context switches per step: %.2f, %.2f, %.2f\n",
        (double)g_faults[0] / timed, (double)g_faults[1] / timed, (double)g_faults[2] / timed,
        (double)g_switches[0] / timed, (double)g_switches[1] / timed, (double)g_switches[2] / timed);
    printf("  costliest positions in the step (mean ns):");
    for (int k = 0; k < 5; k++) printf(" %d: %.0f%s", top[k], pos_sum[top[k]] / (n / LAUNCHES), k < 4 ? "," : "\n");
}

static void usage(void)
{
    fprintf(stderr, "usage: cgjit-bench-decode [--rounds R] [--steps S] [--host-ns NS] [--json FILE] [--call-times]\n");
    exit(2);
}

static int int_arg(const char *s, int min, int max)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < min || v > max) usage();
    return (int)v;
}

int main(int argc, char **argv)
{
    /* The bench times eager, replay and the program's own graphs side by side: no dormant
     * windows of the governor's among them (CGJIT_GOVERN=0, read when the driver is loaded,
     * before main: start again with it set, unless the environment sets it). */
    if (!getenv("CGJIT_GOVERN") && setenv("CGJIT_GOVERN", "0", 1) == 0) execv("/proc/self/exe", argv);
    int rounds = 15, steps = 40;
    const char *json = NULL;
    int call_times = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--call-times")) {
            call_times = 1;
            continue;
        }
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--rounds")) rounds = int_arg(argv[++i], 1, 100000);
        else if (!strcmp(argv[i], "--steps")) steps = int_arg(argv[++i], 1, 100000);
        else if (!strcmp(argv[i], "--host-ns")) g_host_ns = int_arg(argv[++i], 0, 1000000);
        else if (!strcmp(argv[i], "--json")) json = argv[++i];
        else usage();
    }
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        printf("cgjit-bench-decode: skipped: no CUDA GPU\n");
        return 77;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    driver_entry_points();
    CHECK(cudaGetFuncBySymbol((cudaFunction_t *)&g_fn, (const void *)ggml_like_op));
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    float *init = (float *)malloc(N * sizeof(float));
    if (!init) return 1;
    uint64_t seed = 12345;
    for (int l = 0; l < LAYERS; l++)
        for (int k = 0; k < PER_LAYER; k++) {
            rng_fill_uniform(init, N, &seed, -0.5f, 0.5f);
            CHECK(cudaMalloc((void **)&g_w[l][k], N * sizeof(float)));
            CHECK(cudaMemcpy(g_w[l][k], init, N * sizeof(float), cudaMemcpyHostToDevice));
        }
    rng_fill_uniform(init, N, &seed, -0.5f, 0.5f);
    set_t sets[SETS];
    memset(sets, 0, sizeof sets);
    for (int k = 0; k < SETS; k++) {
        for (int b = 0; b < 2; b++) {
            CHECK(cudaMalloc((void **)&sets[k].x[b], N * sizeof(float)));
            CHECK(cudaMemcpy(sets[k].x[b], init, N * sizeof(float), cudaMemcpyHostToDevice));
        }
        CHECK(cudaMalloc((void **)&sets[k].tok, sizeof(int)));
        CHECK(cudaMallocHost((void **)&sets[k].out, OUTS * sizeof(float)));
    }
    free(init);

    g_timer_ns = timer_overhead_ns();
    if (call_times) {
        g_call_cap = (size_t)rounds * steps * LAUNCHES;
        g_call_ns = (double *)calloc(g_call_cap, sizeof(double));
        if (!g_call_ns) g_call_cap = 0;
    }
    for (int i = 0; i < WARMUP; i++)
        for (int k = 0; k < SETS; k++) step(&sets[k], k, (CUstream)st, 0);
    cgj_trace_info_t before;
    memset(&before, 0, sizeof before);
    cgj_trace_info("decode", &before);                      /* its probes so far: the timed steps' are counted apart */
    double *per[SETS], *hpc[SETS];                          /* per round: mean step time, host ns per call */
    double *lpc = (double *)calloc(rounds, sizeof(double)); /* per round: replay's segment launches, us per step */
    double *npc = (double *)calloc(rounds, sizeof(double)); /* per round: graph launches per step */
    double *apc = (double *)calloc(rounds, sizeof(double)); /* per round: replay, host ns per call, probes included */
    double *cpc = (double *)calloc(rounds, sizeof(double)); /* per round: replayed steps' calls alone, ns per call */
    double *split[3]; /* per round, replay: begin and copy in, launch loop, read-back; us per replayed step */
    for (int j = 0; j < 3; j++) split[j] = (double *)calloc(rounds, sizeof(double));
    for (int k = 0; k < SETS; k++)
        per[k] = (double *)calloc(rounds, sizeof(double)), hpc[k] = (double *)calloc(rounds, sizeof(double));
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < SETS; k++) {
            double t0 = now_ns(), ns0 = sets[k].host_ns, calls0 = sets[k].host_calls;
            double pre0 = sets[k].pre_ns, loop0 = sets[k].loop_ns, post0 = sets[k].post_ns;
            double all0 = sets[k].all_ns, all_calls0 = sets[k].all_calls, win0 = sets[k].win_launch_ns;
            long eager0 = sets[k].eager_steps;
            cgj_stats_t st0, st1;
            memset(&st0, 0, sizeof st0), memset(&st1, 0, sizeof st1);
            cgj_stats(&st0);
            struct rusage ru0, ru1;
            getrusage(RUSAGE_SELF, &ru0);
            for (int i = 0; i < steps; i++) step(&sets[k], k, (CUstream)st, 1);
            getrusage(RUSAGE_SELF, &ru1);
            g_faults[k] += ru1.ru_minflt - ru0.ru_minflt + ru1.ru_majflt - ru0.ru_majflt;
            g_switches[k] += ru1.ru_nvcsw - ru0.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nivcsw;
            per[k][r] = (now_ns() - t0) / steps / 1e3;
            cgj_stats(&st1);
            hpc[k][r] = sets[k].host_calls > calls0 ? (sets[k].host_ns - ns0) / (sets[k].host_calls - calls0) : 0;
            if (k == SET_REPLAY) {
                double nrep = (double)(steps - (sets[k].eager_steps - eager0));
                if (nrep < 1) nrep = 1;
                split[0][r] = (sets[k].pre_ns - pre0) / nrep / 1e3;
                split[1][r] = (sets[k].loop_ns - loop0) / nrep / 1e3;
                split[2][r] = (sets[k].post_ns - post0) / nrep / 1e3;
                lpc[r] = (double)(st1.launch_host_ns - st0.launch_host_ns) / nrep / 1e3;
                npc[r] = (double)(st1.graph_launches - st0.graph_launches) / nrep;
                apc[r] = (sets[k].all_ns - all0) / (sets[k].all_calls - all_calls0);
                if (sets[k].host_calls > calls0)
                    cpc[r] = (sets[k].host_ns - ns0 - (sets[k].win_launch_ns - win0)) / (sets[k].host_calls - calls0);
            }
        }

    /* Every set ran the same steps: the same bits. */
    int equal = 1;
    float *h[SETS];
    for (int k = 0; k < SETS; k++) {
        h[k] = (float *)malloc(N * sizeof(float));
        CHECK(cudaMemcpy(h[k], sets[k].x[0], N * sizeof(float), cudaMemcpyDeviceToHost));
    }
    for (int k = 1; k < SETS; k++)
        if (memcmp(h[0], h[k], N * sizeof(float))) equal = 0;
    cgj_trace_info_t info;
    memset(&info, 0, sizeof info);
    cgj_trace_info("decode", &info);
    double us[SETS], host_per_call[SETS];
    for (int k = 0; k < SETS; k++) {
        us[k] = median(per[k], rounds);
        host_per_call[k] = median(hpc[k], rounds);
    }
    int replayed = info.state == CGJ_STATE_REPLAY && info.replays >= (uint64_t)(rounds * steps) * 9 / 10;

    printf("cgjit-bench-decode: %s, %d launches of 20 parameters per step, %d ns of host work before each, "
           "%d rounds of %d steps\n",
           prop.name, LAUNCHES, g_host_ns, rounds, steps);
    printf("  host ns/call: from a step's begin to its synchronization, less the program's own host work "
           "(its clock reads included: %.1f ns a launch)\n",
           g_timer_ns);
    printf("  %-8s %12s %14s %12s\n", "variant", "us/step", "host ns/call", "vs graphs");
    for (int k = 0; k < SETS; k++)
        printf("  %-8s %12.1f %14.1f %11.3fx\n", SET_NAMES[k], us[k], host_per_call[k], us[k] / us[SET_GRAPHS]);
    printf("  eager/replay %.3fx, replay/graphs %.3fx (target <= 1.02), replay host %.1f ns per absorbed call "
           "(target <= 200)\n",
           us[SET_EAGER] / us[SET_REPLAY], us[SET_REPLAY] / us[SET_GRAPHS], host_per_call[SET_REPLAY]);
    double all_per_call = median(apc, rounds);
    printf("  replay's host ns/call counts the steps cgjit replayed to their end; %ld of its %ld timed steps were "
           "not (%llu of them cgjit's probes, run eagerly to measure that replay pays: CGJIT_COST); with them, "
           "%.1f ns per call\n",
           sets[SET_REPLAY].eager_steps, (long)rounds * steps, (unsigned long long)(info.probes - before.probes),
           all_per_call);
    double launch_us = median(lpc, rounds), launches_per_step = median(npc, rounds);
    printf(
        "  replay's segment launches (patched values set, cuGraphLaunch: the driver's part): %.2f us of host "
        "time per replayed step in %.1f graph launches (the last at the synchronization, after the host time above)\n",
        launch_us, launches_per_step);
    double calls_alone = median(cpc, rounds);
    printf("  replayed steps' host time less the segment launches inside it (the absorbed calls alone, the copy in and "
           "the read-back among them): %.1f ns per call\n",
           calls_alone);
    double pre_us = median(split[0], rounds), loop_us = median(split[1], rounds), post_us = median(split[2], rounds);
    printf(
        "  replay's host time per replayed step: begin and copy in %.2f us, %d launches %.2f us (%.1f ns each), read-back "
        "%.2f us\n",
        pre_us, LAUNCHES, loop_us, loop_us * 1e3 / LAUNCHES, post_us);
    if (g_call_n) print_call_times((long)rounds * steps);
    printf("  cgjit: %s, %llu replays, %u segment(s), %u ops, reason \"%s\"; the program's graphs: %u updates, %u "
           "instantiations again\n",
           cgj_state_name(info.state), (unsigned long long)info.replays, info.segments, info.ops, info.reason,
           g_graph_updates, g_graph_reinstantiations);
    printf("  results: %s\n", equal ? "identical in all three" : "DIFFER");
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "cgjit-bench-decode: cannot write %s\n", json);
            return 1;
        }
        fprintf(
            f,
            "{\"gpu\": \"%s\", \"launches\": %d, \"host_ns\": %d, \"rounds\": %d, \"steps\": %d, "
            "\"eager_us\": %.3f, \"replay_us\": %.3f, \"graphs_us\": %.3f, \"replay_host_ns_per_call\": %.1f, "
            "\"eager_host_ns_per_call\": %.1f, \"replay_host_ns_per_call_with_probes\": %.1f, \"replay_calls_alone_ns_per_call\": %.1f, \"replay_eager_steps\": %ld, \"replay_launch_us_per_step\": %.3f, \"replay_graph_launches_per_step\": %.1f, "
            "\"replay_begin_us_per_step\": %.3f, \"replay_loop_us_per_step\": %.3f, \"replay_readback_us_per_step\": %.3f, \"timer_ns_per_launch\": %.1f, \"segments\": %u, \"replays\": %llu, "
            "\"identical\": %s}\n",
            prop.name, LAUNCHES, g_host_ns, rounds, steps, us[SET_EAGER], us[SET_REPLAY], us[SET_GRAPHS],
            host_per_call[SET_REPLAY], host_per_call[SET_EAGER], all_per_call, calls_alone,
            sets[SET_REPLAY].eager_steps, launch_us, launches_per_step, pre_us, loop_us, post_us, g_timer_ns,
            info.segments, (unsigned long long)info.replays, equal ? "true" : "false");
        fclose(f);
    }
    if (!replayed) printf("  FAIL: the step did not replay (%s)\n", info.reason);
    printf("%s\n", equal && replayed ? "PASS" : "FAIL");
    return equal && replayed ? 0 : 1;
}
