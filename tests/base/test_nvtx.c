/*
 * test_nvtx.c — cgjit's own work on a profiler's timeline (base/nvtx.h, CGJIT_NVTX).
 *
 * The profiler is tests/fakecuda/fakenvtx.c, an NVTX injection library named by
 * NVTX_INJECTION64_PATH, which keeps every range push and pop and every mark. A marked step
 * warms up, records, is built, replays, and then changes its topology and leaves the trace (a
 * side exit, the rest of the run recorded). With CGJIT_NVTX=1 each of these shows as a range in
 * the domain "cgjit" named with the anchor, nested as the work is, balanced on each thread; with
 * CGJIT_NVTX unset nothing reaches the profiler at all.
 */
#include <criterion/criterion.h>
#include <cgjit.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fakeapp.h"

#define N 64
#define ANCHOR "nvtx_step"
#define MAX_DEPTH 16

static fk_t fk;

static const char *injection_path(void)
{
    static char path[PATH_MAX];
    fk_fakecuda_file(path, sizeof path, "libfakenvtx.so");
    return path;
}

static void nvtx_setup(void)
{
    setenv("NVTX_INJECTION64_PATH", injection_path(), 1);
    setenv("CGJIT_NVTX", "1", 0); /* CGJIT_NVTX=0 in the environment: this suite must fail */
    fk_open(&fk);
}

static void dormant_setup(void)
{
    setenv("CGJIT_GOVERN", "2", 1); /* dormant for the whole run */
    nvtx_setup();
}

static void off_setup(void)
{
    setenv("NVTX_INJECTION64_PATH", injection_path(), 1);
    unsetenv("CGJIT_NVTX");
    fk_open(&fk);
}

/* One run of the step: three kernels on one stream, the second through its CUkernel handle where
 * `other` (another kernel identity: the topology changes, a side exit). */
static void run_step(CUdeviceptr x, bool other)
{
    cr_assert_eq(cgj_trace_begin(ANCHOR), CGJ_OK);
    cr_assert_eq(fk_axpb_launch(&fk, NULL, x, 1.5f, 0.5f, N, 1), CUDA_SUCCESS);
    cr_assert_eq(fk_axpb_launch_f(&fk, other ? fk_axpb_kernel_handle : fk_axpb, false, NULL, x, 0.5f, 1.0f, N, 1),
                 CUDA_SUCCESS);
    cr_assert_eq(fk_addk_launch(&fk, NULL, x, 3, N), CUDA_SUCCESS);
    cr_assert_eq(cgj_trace_end(), CGJ_OK);
    float h[N];
    cr_assert_eq(fk.dtoh(h, x, sizeof h), CUDA_SUCCESS);
}

/* What the injection library kept. */
typedef struct ev {
    char what;
    long tid;
    const char *domain, *message;
    int64_t payload;
} ev_t;

static size_t (*count_fn)(size_t *);
static void (*get_fn)(size_t, char *, long *, const char **, const char **, int64_t *);

/* The injection library, if NVTX loaded it in this process. */
static bool injection_loaded(void)
{
    void *h = dlopen(injection_path(), RTLD_NOLOAD | RTLD_LAZY);
    if (!h) return false;
    count_fn = (size_t(*)(size_t *))dlsym(h, "fakenvtx_count");
    get_fn = (void (*)(size_t, char *, long *, const char **, const char **, int64_t *))dlsym(h, "fakenvtx_get");
    cr_assert(count_fn && get_fn, "libfakenvtx.so without its functions");
    return true;
}

static size_t events(ev_t **out)
{
    size_t lost = 0, n = count_fn(&lost);
    cr_assert_eq(lost, 0, "the injection library dropped %zu events", lost);
    ev_t *e = calloc(n ? n : 1, sizeof *e);
    for (size_t i = 0; i < n; i++) get_fn(i, &e[i].what, &e[i].tid, &e[i].domain, &e[i].message, &e[i].payload);
    *out = e;
    return n;
}

/* Replays each thread's stack of ranges from the start: every event is in cgjit's domain, no pop
 * comes with no range open, and every thread ends with none open. For each w[k]: `found`, how
 * often a range named `want` was pushed, and `inside`, how often that was inside a range named
 * `parent` (NULL: anywhere). */
typedef struct nesting {
    const char *want, *parent;
    int found, inside;
} nesting_t;

static void check_ranges(const ev_t *e, size_t n, nesting_t *w, size_t nw)
{
    long tids[16];
    const char *stack[16][MAX_DEPTH];
    int depth[16] = {0}, ntids = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(e[i].domain, "cgjit", "event %zu outside cgjit's domain", i);
        int t = 0;
        while (t < ntids && tids[t] != e[i].tid) t++;
        if (t == ntids) {
            cr_assert(ntids < 16, "events on too many threads");
            tids[ntids++] = e[i].tid;
        }
        if (e[i].what == '(') {
            cr_assert(depth[t] < MAX_DEPTH, "ranges nested too deep on thread %ld", e[i].tid);
            for (size_t k = 0; k < nw; k++) {
                if (strcmp(e[i].message, w[k].want) != 0) continue;
                w[k].found++;
                if (!w[k].parent || (depth[t] && strcmp(stack[t][depth[t] - 1], w[k].parent) == 0)) w[k].inside++;
            }
            stack[t][depth[t]++] = e[i].message;
        } else if (e[i].what == ')') {
            cr_assert(depth[t] > 0, "event %zu: a pop with no range open on thread %ld", i, e[i].tid);
            depth[t]--;
        }
    }
    for (int t = 0; t < ntids; t++)
        cr_assert_eq(depth[t], 0, "thread %ld ends with %d range(s) open", tids[t], depth[t]);
}

TestSuite(base_nvtx, .init = nvtx_setup);

/* cgjit makes no NVTX call as it starts (a profiler subscribing to CUPTI may be looking up driver
 * functions through cgjit's dlsym then): the injection library is loaded by its first range. */
Test(base_nvtx, no_nvtx_call_before_the_first_range)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3); /* through cgjit's wrappers: cgjit has started */
    cgj_stats_t st;
    cr_assert_eq(cgj_stats(&st), CGJ_OK);
    cr_assert_not(injection_loaded(), "an NVTX call before cgjit's first range");
    run_step(x, false); /* the draft's range */
    cr_assert(injection_loaded(), "CGJIT_NVTX=1 and no NVTX call reached the injection library");
}

Test(base_nvtx, ranges_name_the_anchor_nest_and_balance)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3);
    for (int s = 0; s < 5; s++) run_step(x, false); /* warm-up, record and build, replays */
    run_step(x, true);                              /* leaves the trace: a side exit */
    cgj_trace_info_t info;
    cr_assert_eq(cgj_trace_info(ANCHOR, &info), CGJ_OK);
    cr_assert_geq(info.replays, 3);
    cr_assert_eq(info.side_exits, 1);

    cr_assert(injection_loaded(), "CGJIT_NVTX=1 and no NVTX call reached the injection library");
    ev_t *e;
    size_t n = events(&e);
    nesting_t w[] = {
        {"record " ANCHOR, NULL, 0, 0},
        {"build " ANCHOR, "record " ANCHOR, 0, 0}, /* the recording that made it */
        {"instantiate", "build " ANCHOR, 0, 0},
        {"replay " ANCHOR, NULL, 0, 0},
        {"side exit " ANCHOR, NULL, 0, 0},
    };
    check_ranges(e, n, w, sizeof w / sizeof w[0]);
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        cr_assert_gt(w[k].found, 0, "no range '%s'", w[k].want);
        cr_assert_eq(w[k].inside, w[k].found, "'%s': %d of %d inside '%s'", w[k].want, w[k].inside, w[k].found,
                     w[k].parent);
    }
    cr_assert_eq(w[1].found, 1, "one build");
    cr_assert_geq(w[3].found, 3, "a replayed segment's launch in each replay");
    cr_assert_eq(w[4].found, 1, "one side exit");

    /* The side exit carries the op where the run left (1: the second kernel), and the rest of
     * the run is recorded after it. */
    size_t exit_at = n;
    for (size_t i = 0; i < n; i++)
        if (e[i].what == '(' && strcmp(e[i].message, "side exit " ANCHOR) == 0) exit_at = i;
    cr_assert_eq(e[exit_at].payload, 1, "the side exit at op %lld", (long long)e[exit_at].payload);
    cr_assert(exit_at + 2 < n && e[exit_at + 1].what == ')' && e[exit_at + 2].what == '(' &&
                  strcmp(e[exit_at + 2].message, "record " ANCHOR) == 0,
              "the rest of the run that left is recorded");
    free(e);
}

TestSuite(base_nvtx_dormant, .init = dormant_setup);

/* The governor's switch is a mark; dormant, the steps run straight through, with no range. */
Test(base_nvtx_dormant, the_governor_marks_its_switch)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3);
    for (int s = 0; s < 4; s++) run_step(x, false);
    cr_assert(injection_loaded(), "CGJIT_NVTX=1 and no NVTX call reached the injection library");
    ev_t *e;
    size_t n = events(&e);
    cr_assert_eq(n, 1, "%zu events: only the governor's mark", n);
    cr_assert_eq(e[0].what, '!');
    cr_assert_str_eq(e[0].domain, "cgjit");
    cr_assert_str_eq(e[0].message, "governor dormant");
    free(e);
}

TestSuite(base_nvtx_off, .init = off_setup);

Test(base_nvtx_off, nothing_reaches_the_profiler_without_cgjit_nvtx)
{
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3);
    for (int s = 0; s < 5; s++) run_step(x, false);
    run_step(x, true);
    cgj_trace_info_t info;
    cr_assert_eq(cgj_trace_info(ANCHOR, &info), CGJ_OK);
    cr_assert_geq(info.replays, 3);
    /* cgjit made no NVTX call: NVTX never looked for the injection library */
    if (!injection_loaded()) return;
    size_t lost = 0;
    cr_assert_eq(count_fn(&lost), 0, "ranges reached the profiler with CGJIT_NVTX unset");
}
