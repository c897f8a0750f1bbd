/*
 * test_pass.c — the fusion pass (fusion/pass.c) end to end against the fake driver: kernels
 * registered as elementwise (cgj_op_register_elementwise, CGJIT_OPS), steps marked with
 * cgj_trace_begin/end, the mode (cgj_mode_set, CGJIT_MODE), and what the pass decided as the
 * anchor's cgj_trace_info, cgj_stats and the report say it.
 *
 * The fake driver runs kernels as host functions and loads no modules (it has no
 * cuModuleLoadData), so in mode default every chain the pass finds is dropped with FUSE_COMPILE
 * ("loading: operation not supported" where NVRTC is installed and compiles the kernel for the
 * fake's sm_90; NVRTC's own message where it is not) and the step replays its kernels unfused:
 * the chain must be found, the drop counted and named, and replay must stay bitwise equal to
 * eager. Each step runs eagerly on buffers E and traced
 * on buffers T from the same data (run_scenario, tests/tracer/replay_common.h), compared after
 * every step. Criterion runs each test in a process of its own: the environment a test sets in
 * its .init is what cgjit reads when it starts, and the counters are the test's own.
 */
#define _GNU_SOURCE
#include "../tracer/replay_common.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define STEPS 10

#define assert_has(hay, needle) cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in:\n%s", (needle), (hay))

/* The registrations of the fake's kernels (fakeapp.c), by the names the fake gives them. */
#define SPEC_AXPB "(inout float x, float a, float b, count int n): x = a * x + b"
#define SPEC_ADDK "(inout float x, int k, count int n): x = x + k"
#define SPEC_COPYSCALE "(inout float d, in float s, float sc, count int n): d = sc * s + 0.5 * d"

/* ---- the step: three registered kernels on one stream, then an opaque one ---- */

/* smooth(float *y, const float *x, int n): y[i] = (x[i] + x[i+1 mod n]) / 2 — reads a
 * neighbour, so it is no elementwise kernel; never registered with cgjit. */
static CUfunction k_smooth;

static void smooth_fn(void **p, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    (void)g, (void)b, (void)smem;
    float *y = *(float **)p[0];
    const float *x = *(const float **)p[1];
    int n = *(int *)p[2];
    for (int i = 0; i < n; i++) y[i] = 0.5f * (x[i] + x[(i + 1) % n]);
}

static CUresult smooth_launch(CUdeviceptr y, CUdeviceptr x, int n)
{
    void *p[] = {&y, &x, &n};
    return fk.launch(k_smooth, 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL);
}

/* b0 = 0.5 b0 + 1; b0 += 3; b1 = 0.75 b0 + 0.5 b1 (the chain); b2 = smooth(b1) (opaque). */
static void chain_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)s, (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[0], 3, N));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.75f, N));
    OK(smooth_launch(b[2], b[1], N));
}

/* The same with addk's k the step's number: a slot that varies from run to run. */
static void varying_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f, 1.0f, N, 1));
    OK(fk_addk_launch(&fk, NULL, b[0], s, N));
    OK(fk_copyscale_launch(&fk, NULL, b[1], b[0], 0.75f, N));
    OK(smooth_launch(b[2], b[1], N));
}

static void register_all(void)
{
    cr_assert_eq(cgj_op_register_elementwise("axpb", SPEC_AXPB), CGJ_OK);
    cr_assert_eq(cgj_op_register_elementwise("addk", SPEC_ADDK), CGJ_OK);
    cr_assert_eq(cgj_op_register_elementwise("copyscale", SPEC_COPYSCALE), CGJ_OK);
}

/* ---- setup: the environment cgjit reads when it starts, then the fake driver ---- */

static void open_fake(void)
{
    setenv("CGJIT_CACHE_DIR", "off", 1); /* NVRTC may run on the host: keep ~/.cache clean */
    setup();
    static const size_t sizes[] = {8, 8, 4};
    k_smooth = fk.register_kernel("smooth", smooth_fn, 3, sizes, 0, 0);
    cr_assert(k_smooth);
}

static void clean_env(void)
{
    unsetenv("CGJIT_MODE");
    unsetenv("CGJIT_OPS");
    unsetenv("CGJIT_REPORT");
}

static void plain_setup(void)
{
    clean_env();
    open_fake();
}

/* No suite .init: Criterion runs it before a test's own, and a test that sets the environment
 * must do so before cgjit starts (open_fake). */
TestSuite(fusion_pass);
#define PLAIN .init = plain_setup

/* ---- capturing stderr (fd 2) into a temporary file ---- */

#include "../common/stderr_capture.h"

/* ---- expectations shared by the tests ---- */

static void assert_reason(const cgj_trace_info_t *i, int code)
{
    cr_assert_eq(i->fuse_reason_code, code, "fuse_reason_code is %s (%d), expected %s",
                 cgj_reason_name(i->fuse_reason_code), i->fuse_reason_code, cgj_reason_name(code));
}

/* The chain step in mode default: found, dropped (FUSE_COMPILE), replayed unfused. */
static cgj_trace_info_t run_dropped_chain(const char *name)
{
    cgj_trace_info_t i = run_scenario(&(scenario_t){
        .name = name,
        .fn = chain_step,
        .steps = STEPS,
        .nbufs = 3,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(STEPS - 2), .kernels = IS(4), .side_exits = IS(0)},
        .stats = {.fusions = IS(0), .ops_fused = IS(0), .fusions_dropped = AT_LEAST(1), .traces_built = IS(1)},
        /* replays launch the recorded kernels: the graph holds all four */
        .fake = {.graph_launches = AT_LEAST(STEPS - 2)}});
    cr_assert_eq(i.fused_chains, 0);
    cr_assert_eq(i.fused_ops, 0);
    cr_assert_geq(i.fuse_drops, 1);
    assert_reason(&i, CGJ_REASON_FUSE_COMPILE);
    cr_assert_str_eq(cgj_reason_name(i.fuse_reason_code), "FUSE_COMPILE");
    return i;
}

/* ---- 1, 2: the modes ---- */

Test(fusion_pass, default_mode_finds_the_chain_drops_it_and_replays_bitwise, PLAIN)
{
    register_all();
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    cr_assert_str_eq(cgj_mode_get(), "default");
    run_dropped_chain("chain");
    /* one chain (axpb, addk, copyscale), one drop: the opaque kernel and the registered ones
     * with good layouts are no drops of their own */
    cgj_stats_t st = stats_now();
    cr_assert_eq(st.fusions_dropped, 1);
    cr_assert_eq(info_of("chain").fuse_drops, 1);
}

Test(fusion_pass, reduce_overhead_is_the_default_and_fuses_nothing, PLAIN)
{
    register_all();
    cr_assert_str_eq(cgj_mode_get(), "reduce-overhead");
    cgj_trace_info_t i =
        run_scenario(&(scenario_t){.name = "chain",
                                   .fn = chain_step,
                                   .steps = STEPS,
                                   .nbufs = 3,
                                   .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(STEPS - 2), .kernels = IS(4)},
                                   .stats = {.fusions = IS(0), .ops_fused = IS(0), .fusions_dropped = IS(0)}});
    cr_assert_eq(i.fused_chains, 0);
    cr_assert_eq(i.fuse_drops, 0);
    assert_reason(&i, 0);
}

/* A trace keeps the mode it was built in: the mode set after the build changes nothing. */
Test(fusion_pass, mode_set_after_the_build_changes_no_trace, PLAIN)
{
    register_all();
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "chain",
                                                    .fn = chain_step,
                                                    .steps = 4,
                                                    .nbufs = 3,
                                                    .info = {.replays = IS(2)},
                                                    .stats = {.fusions_dropped = IS(0)}});
    assert_reason(&i, 0);
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    i = run_scenario(&(scenario_t){.name = "chain",
                                   .fn = chain_step,
                                   .steps = 4,
                                   .nbufs = 3,
                                   .info = {.replays = IS(6), .variants = IS(1)},
                                   .stats = {.fusions_dropped = IS(0), .traces_built = IS(1)}});
    assert_reason(&i, 0);
}

/* ---- the background compiler (CGJIT_FUSE_BACKGROUND=1) ---- */

static void background_setup(void)
{
    clean_env();
    setenv("CGJIT_FUSE_BACKGROUND", "1", 1);
    open_fake();
}

/* With the compiler in the background, no build waits for NVRTC: the first trace replays the
 * chain unfused (FUSE_PENDING), a worker thread compiles the kernel into the cache, and the
 * anchor then starts over and is built again with it. Here the second build finds the CUBIN in
 * the memory cache and fails only at loading it into the fake ("operation not supported"):
 * NVRTC ran once, off the step. Where NVRTC is missing nothing is queued (FUSE_COMPILE). Replay
 * is bitwise equal to eager throughout (run_scenario compares every step). */
Test(fusion_pass, a_chain_compiles_in_the_background_and_the_step_is_built_again, .init = background_setup)
{
    register_all();
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "bg",
                                                    .fn = chain_step,
                                                    .steps = 4,
                                                    .nbufs = 3,
                                                    .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(2)},
                                                    .stats = {.fusions = IS(0), .traces_built = IS(1)}});
    void *nvrtc = dlopen("libnvrtc.so.13", RTLD_LAZY);
    if (!nvrtc) nvrtc = dlopen("/usr/local/cuda/lib64/libnvrtc.so", RTLD_LAZY);
    if (!nvrtc) { /* no NVRTC here: nothing to queue */
        assert_reason(&i, CGJ_REASON_FUSE_COMPILE);
        return;
    }
    dlclose(nvrtc);
    assert_reason(&i, CGJ_REASON_FUSE_PENDING);
    bool again = false;
    for (int k = 0; k < 600 && !again; k++) { /* up to a minute for NVRTC on a loaded machine; four
                                               * steps each: the build records two of them */
        usleep(100 * 1000);
        i = run_scenario(&(scenario_t){.name = "bg", .fn = chain_step, .steps = 4, .nbufs = 3});
        again = i.fuse_reason_code != CGJ_REASON_FUSE_PENDING; /* built again */
    }
    cr_assert(again, "the anchor was not built again after the background compile");
    assert_reason(&i, CGJ_REASON_FUSE_COMPILE);
    cr_assert_eq(i.fuse_cold, 0, "the second build ran NVRTC itself");
    cr_assert_eq(i.state, CGJ_STATE_REPLAY);
}

/* ---- 3: a registration that disagrees with the kernel's layout ---- */

Test(fusion_pass, layout_mismatch_is_named_and_replays_bitwise, PLAIN)
{
    /* axpb has 4 parameters, this spec 3; copyscale's src is a pointer (8 bytes), this spec's
     * s a float (4); addk's registration is right but alone, so no chain is left */
    cr_assert_eq(cgj_op_register_elementwise("axpb", "(inout float x, float a, count int n): x = a * x"), CGJ_OK);
    cr_assert_eq(cgj_op_register_elementwise("addk", SPEC_ADDK), CGJ_OK);
    cr_assert_eq(
        cgj_op_register_elementwise("copyscale", "(inout float d, float s, float sc, count int n): d = sc * s + d"),
        CGJ_OK);
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    cgj_trace_info_t i = run_scenario(
        &(scenario_t){.name = "layout",
                      .fn = chain_step,
                      .steps = STEPS,
                      .nbufs = 3,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(STEPS - 2), .side_exits = IS(0)},
                      .stats = {.fusions = IS(0), .fusions_dropped = IS(2)}}); /* one per kernel that disagrees */
    cr_assert_eq(i.fuse_drops, 2);
    assert_reason(&i, CGJ_REASON_FUSE_LAYOUT);
}

/* The wrong layout only on the chain's middle kernel: the chain is broken in two singles. */
Test(fusion_pass, layout_mismatch_in_the_middle_breaks_the_chain, PLAIN)
{
    cr_assert_eq(cgj_op_register_elementwise("axpb", SPEC_AXPB), CGJ_OK);
    cr_assert_eq(cgj_op_register_elementwise("addk", "(inout float x, long k, count int n): x = x + k"), CGJ_OK);
    cr_assert_eq(cgj_op_register_elementwise("copyscale", SPEC_COPYSCALE), CGJ_OK);
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "layout_mid",
                                                    .fn = chain_step,
                                                    .steps = STEPS,
                                                    .nbufs = 3,
                                                    .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(STEPS - 2)},
                                                    .stats = {.fusions = IS(0), .fusions_dropped = IS(1)}});
    assert_reason(&i, CGJ_REASON_FUSE_LAYOUT);
}

/* ---- 4: a value that changes from run to run ---- */

Test(fusion_pass, varying_scalar_is_named_and_replays_bitwise, PLAIN)
{
    register_all();
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    cgj_trace_info_t i = run_scenario(&(scenario_t){
        .name = "varying",
        .fn = varying_step,
        .steps = STEPS,
        .nbufs = 3,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(STEPS - 2), .varying_slots = IS(1), .side_exits = IS(0)},
        /* addk leaves the chain (dropped); axpb and copyscale are single kernels then */
        .stats = {.fusions = IS(0), .fusions_dropped = IS(1), .params_patched = AT_LEAST(STEPS - 3)}});
    cr_assert_eq(i.fuse_drops, 1);
    assert_reason(&i, CGJ_REASON_FUSE_VARYING);
}

/* ---- 5: argument errors, the mode's names ---- */

Test(fusion_pass, register_rejects_bad_arguments, PLAIN)
{
    cr_assert_eq(cgj_op_register_elementwise(NULL, SPEC_AXPB), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_op_register_elementwise("", SPEC_AXPB), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_op_register_elementwise("axpb", NULL), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_op_register_elementwise("axpb", ""), CGJ_ERR_INVALID_ARG, "an empty spec, as the header says");
    capture_begin();
    int st = cgj_op_register_elementwise("axpb", "(inout float x, count int n): x = frobnicate(x)");
    int st2 = cgj_op_register_elementwise("axpb", "(inout float x, count int n) x = x");
    const char *err = capture_end();
    cr_assert_eq(st, CGJ_ERR_SPEC);
    cr_assert_eq(st2, CGJ_ERR_SPEC);
    assert_has(err, "cgj_op_register_elementwise(\"axpb\")");
    assert_has(err, "column");
    assert_has(err, "stays opaque");
}

/* A spec nested 30 000 deep (which overflowed the stack) is refused with a message. */
Test(fusion_pass, register_refuses_a_spec_nested_too_deep, PLAIN)
{
    enum { DEPTH = 30000 };
    static const char head[] = "(inout float x, count int n): x = ";
    char *spec = malloc(sizeof head + 2 * DEPTH + 1);
    cr_assert_not_null(spec);
    char *p = stpcpy(spec, head);
    memset(p, '(', DEPTH);
    p[DEPTH] = 'x';
    memset(p + DEPTH + 1, ')', DEPTH);
    p[2 * DEPTH + 1] = 0;
    capture_begin();
    int st = cgj_op_register_elementwise("axpb", spec);
    const char *err = capture_end();
    free(spec);
    cr_assert_eq(st, CGJ_ERR_SPEC);
    assert_has(err, "cgj_op_register_elementwise(\"axpb\")");
    assert_has(err, "nested deeper than");
}

/* A refused registration registers nothing: axpb stays opaque, no chain forms, nothing drops. */
Test(fusion_pass, refused_registration_leaves_the_kernel_opaque, PLAIN)
{
    capture_begin();
    int st = cgj_op_register_elementwise("axpb", "(inout float x, float a, float b, count int n): x = a * x +");
    capture_end();
    cr_assert_eq(st, CGJ_ERR_SPEC);
    cr_assert_eq(cgj_op_register_elementwise("addk", SPEC_ADDK), CGJ_OK);
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    /* axpb (opaque now), addk, copyscale (never registered): no two registered kernels meet */
    cgj_trace_info_t i = run_scenario(&(scenario_t){.name = "refused",
                                                    .fn = chain_step,
                                                    .steps = 6,
                                                    .nbufs = 3,
                                                    .info = {.replays = IS(4)},
                                                    .stats = {.fusions = IS(0), .fusions_dropped = IS(0)}});
    assert_reason(&i, 0);
}

Test(fusion_pass, mode_set_accepts_the_three_names_only, PLAIN)
{
    cr_assert_str_eq(cgj_mode_get(), "reduce-overhead");
    cr_assert_eq(cgj_mode_set(NULL), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_mode_set("fast"), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_mode_set(""), CGJ_ERR_INVALID_ARG);
    cr_assert_eq(cgj_mode_set("Default"), CGJ_ERR_INVALID_ARG);
    cr_assert_str_eq(cgj_mode_get(), "reduce-overhead", "a refused name changed the mode");
    static const char *const names[] = {"default", "max-autotune", "reduce-overhead", "default"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        cr_assert_eq(cgj_mode_set(names[k]), CGJ_OK, "%s", names[k]);
        cr_assert_str_eq(cgj_mode_get(), names[k]);
    }
    cr_assert_eq(cgj_mode_set("fast"), CGJ_ERR_INVALID_ARG);
    cr_assert_str_eq(cgj_mode_get(), "default");
}

static void bogus_mode_setup(void)
{
    clean_env();
    setenv("CGJIT_MODE", "bogus", 1);
}

Test(fusion_pass, bogus_mode_variable_warns_and_means_reduce_overhead, .init = bogus_mode_setup)
{
    capture_begin();
    open_fake(); /* cgjit starts here and reads CGJIT_MODE */
    const char *mode = cgj_mode_get();
    const char *err = capture_end();
    cr_assert_str_eq(mode, "reduce-overhead");
    assert_has(err, "warning");
    assert_has(err, "CGJIT_MODE='bogus'");
    /* and it behaves as reduce-overhead: registered kernels are not fused or dropped */
    register_all();
    run_scenario(&(scenario_t){.name = "chain",
                               .fn = chain_step,
                               .steps = 5,
                               .nbufs = 3,
                               .info = {.replays = IS(3)},
                               .stats = {.fusions_dropped = IS(0)}});
}

static void default_mode_setup(void)
{
    clean_env();
    setenv("CGJIT_MODE", "default", 1);
    open_fake();
}

Test(fusion_pass, mode_variable_sets_the_mode, .init = default_mode_setup)
{
    cr_assert_str_eq(cgj_mode_get(), "default");
    register_all();
    run_dropped_chain("chain");
}

/* ---- 6: the report ---- */

/* A reason's message as the report prints it, from ir/reason.h's table (cgj_reason_message is
 * not exported). */
static const char *reason_message(int code)
{
    static const char *const messages[] = {
#define MESSAGE(c, msg, hint) [CGJ_REASON_##c] = msg,
        CGJ_REASON_LIST(MESSAGE)
#undef MESSAGE
    };
    return messages[code];
}

/* The line of text that starts (after blanks) with `start`, into buf; false if none. */
static bool line_starting(const char *text, const char *start, char *buf, size_t len)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *p = l + strspn(l, " ");
        if (strncmp(p, start, strlen(start))) continue;
        snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
        return true;
    }
    return false;
}

Test(fusion_pass, text_report_names_the_dropped_chain, PLAIN)
{
    register_all();
    cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
    run_dropped_chain("chain");
    char *text = fk_report_text(), line[1024];
    cr_assert(text);
    cr_assert(line_starting(text, "fusion:", line, sizeof line), "no fusion line in:\n%s", text);
    assert_has(line, "0 chain(s)");
    assert_has(line, "last left unfused");
    assert_has(line, reason_message(CGJ_REASON_FUSE_COMPILE));
    assert_has(text, "FUSE_COMPILE"); /* the reason's count, by name */
    /* each chain dropped, with its reason: here the one chain */
    cr_assert(line_starting(text, "left unfused:", line, sizeof line), "no drop listed in:\n%s", text);
    assert_has(line, reason_message(CGJ_REASON_FUSE_COMPILE));
    cr_assert_not(line_starting(text, "fused: ops", line, sizeof line), "a chain listed as fused: %s", line);
    free(text);
}

Test(fusion_pass, text_report_has_no_fusion_line_in_reduce_overhead, PLAIN)
{
    register_all();
    run_scenario(&(scenario_t){.name = "chain", .fn = chain_step, .steps = 5, .nbufs = 3, .info = {.replays = IS(3)}});
    char *text = fk_report_text(), line[1024];
    cr_assert(text);
    cr_assert_not(line_starting(text, "fusion:", line, sizeof line), "a fusion line: %s", line);
    free(text);
}

/* CGJIT_REPORT=json:FILE is written at exit: the test runs itself (this one test) again with it
 * set, and reads the file the child left. */
#define JSON_CHILD "CGJ_TEST_FUSION_PASS_JSON_CHILD"

static void json_setup(void)
{
    clean_env();
    if (getenv(JSON_CHILD)) setenv("CGJIT_REPORT", getenv(JSON_CHILD), 1), open_fake();
}

/* Spawn this program, running only this test, with CGJIT_REPORT=json:path; its exit status. */
static int spawn_json_child(const char *path)
{
    char report[128], child[192];
    snprintf(report, sizeof report, "json:%s", path);
    snprintf(child, sizeof child, "%s=%s", JSON_CHILD, report);
    size_t n = 0;
    while (environ[n]) n++;
    char **envp = calloc(n + 2, sizeof *envp);
    cr_assert(envp);
    size_t m = 0;
    for (size_t k = 0; k < n; k++) /* not Criterion's (BoxFort's) own, not cgjit's */
        if (strncmp(environ[k], "BXFI", 4) && strncmp(environ[k], "CGJIT_", 6)) envp[m++] = environ[k];
    envp[m++] = child;
    char *argv[] = {"/proc/self/exe", "--filter=fusion_pass/json_report_counts_the_drop", "--jobs=1", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    cr_assert_eq(rc, 0, "posix_spawn: %s", strerror(rc));
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(fusion_pass, json_report_counts_the_drop, .init = json_setup)
{
    if (getenv(JSON_CHILD)) { /* the child: the scenario; cgjit writes the report at exit */
        register_all();
        cr_assert_eq(cgj_mode_set("default"), CGJ_OK);
        run_dropped_chain("chain");
        return;
    }
    char path[] = "/tmp/cgjit-fusion-pass-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    int status = spawn_json_child(path);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    static char json[1 << 17];
    size_t n = fread(json, 1, sizeof json - 1, f);
    json[n] = 0;
    fclose(f);
    unlink(path);
    cr_assert_eq(status, 0, "the child run failed (exit %d)", status);
    cr_assert_gt(n, 0, "the child wrote no report");
    assert_has(json, "\"fuse_drops\":1");
    assert_has(json, "\"fuse_dropped\":{\"code\":\"FUSE_COMPILE\"");
    assert_has(json, "\"fusions_dropped\":1");
    assert_has(json, "\"fusions\":[]");
    assert_has(json, "\"fuse_drop_list\":[{\"index\":0,\"reason\":{\"code\":\"FUSE_COMPILE\"");
}

/* ---- 7: a registry file (CGJIT_OPS) with bad lines ---- */

static char ops_path[64];

static void ops_setup(void)
{
    clean_env();
    snprintf(ops_path, sizeof ops_path, "/tmp/cgjit-ops-XXXXXX");
    int fd = mkstemp(ops_path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert(f);
    fprintf(f, "# the fake's elementwise kernels\n"                       /* 1 */
               "\n"                                                       /* 2 */
               "axpb " SPEC_AXPB "\n"                                     /* 3 */
               "smooth (out float y, in float x, count int n): y = x +\n" /* 4: bad */
               "addk" SPEC_ADDK "\n"                                      /* 5: no blank */
               "   lonely\n"                                              /* 6: no spec */
               "copyscale\t" SPEC_COPYSCALE "\n");                        /* 7 */
    fclose(f);
    setenv("CGJIT_OPS", ops_path, 1);
    setenv("CGJIT_MODE", "default", 1);
}

static void ops_cleanup(void)
{
    if (ops_path[0]) unlink(ops_path);
}

Test(fusion_pass, registry_file_registers_good_lines_and_names_bad_ones, .init = ops_setup, .fini = ops_cleanup)
{
    capture_begin(); /* the file is read when fusion first looks a kernel up: at the build */
    open_fake();
    cgj_trace_info_t i = run_dropped_chain("chain");
    const char *err = capture_end();
    cr_assert_eq(i.fuse_drops, 1);
    char want[128];
    snprintf(want, sizeof want, "%s:4: kernel 'smooth'", ops_path);
    assert_has(err, want);
    snprintf(want, sizeof want, "%s:6: 'lonely' has no spec", ops_path);
    assert_has(err, want);
    /* the good lines are no errors */
    snprintf(want, sizeof want, "%s:3:", ops_path);
    cr_assert_null(strstr(err, want), "line 3 reported:\n%s", err);
    snprintf(want, sizeof want, "%s:5:", ops_path);
    cr_assert_null(strstr(err, want), "line 5 reported:\n%s", err);
    snprintf(want, sizeof want, "%s:7:", ops_path);
    cr_assert_null(strstr(err, want), "line 7 reported:\n%s", err);
}

static void missing_ops_setup(void)
{
    clean_env();
    setenv("CGJIT_OPS", "/nonexistent/cgjit-ops.txt", 1);
    setenv("CGJIT_MODE", "default", 1);
}

Test(fusion_pass, missing_registry_file_is_named_and_nothing_breaks, .init = missing_ops_setup)
{
    capture_begin();
    open_fake();
    run_scenario(&(scenario_t){.name = "chain",
                               .fn = chain_step,
                               .steps = 5,
                               .nbufs = 3,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(3)},
                               .stats = {.fusions = IS(0), .fusions_dropped = IS(0)}});
    const char *err = capture_end();
    assert_has(err, "CGJIT_OPS=/nonexistent/cgjit-ops.txt");
}
