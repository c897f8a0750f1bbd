/*
 * test_gpu.c — the GPU scenarios as Criterion tests: one test per scenario and flavour.
 *
 * Each test runs `<dir of this executable>/gpu/gpu_scenarios_<flavour> <scenario>` (see
 * gpu_scenarios.cu) in a child process and passes when it exits 0 with a line `PASS <scenario>`.
 * The library wrappers' tests run `<dir>/gpu/gpu_libs <scenario>` (see gpu_libs.cu), and fusion's
 * `<dir>/gpu/gpu_fusion <scenario>` (gpu_fusion.cu), the same way;
 * one that prints `SKIP <scenario> <reason>` (a cuDNN scenario where cuDNN was not found at build
 * time) skips with that reason.
 * Where the machine has no usable CUDA GPU the whole program says so on one line,
 * `SKIP: no CUDA GPU: <reason>`, and exits with status 77 before running any test: ctest shows
 * the suite as skipped, not passed (SKIP_RETURN_CODE in tests/gpu/CMakeLists.txt). Each test
 * also skips itself with the reason where the GPU is gone by the time it runs. The GPU is probed
 * through the driver library alone (dlopen libcuda.so.1, cuInit, cuDeviceGetCount): this
 * program links neither CUDA nor cgjit, and the programs under test run in their own processes,
 * as a user's would.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The two driver entry points needed, declared here so that no cuda.h is needed. */
typedef int (*cu_init_fn)(unsigned int flags);
typedef int (*cu_device_get_count_fn)(int *count);

/* 1 if a CUDA device is usable; else 0 with the reason in why. */
static int gpu_present(char *why, size_t len)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, len, "dlopen(libcuda.so.1) failed: %s", dlerror());
        return 0;
    }
    cu_init_fn cu_init;
    cu_device_get_count_fn cu_count;
    *(void **)&cu_init = dlsym(lib, "cuInit");
    *(void **)&cu_count = dlsym(lib, "cuDeviceGetCount");
    if (!cu_init || !cu_count) {
        snprintf(why, len, "libcuda.so.1 lacks cuInit or cuDeviceGetCount");
        return 0;
    }
    int rc = cu_init(0), count = 0;
    if (rc != 0) {
        snprintf(why, len, "cuInit(0) returned CUresult %d", rc);
        return 0;
    }
    rc = cu_count(&count);
    if (rc != 0 || count <= 0) {
        snprintf(why, len, "cuDeviceGetCount returned CUresult %d, %d devices", rc, count);
        return 0;
    }
    return 1; /* the library stays loaded: this process ends with the test */
}

/* The path of the program `name`, beside this executable: <dir>/gpu/<name>. */
static void gpu_program(const char *name, char *path, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0, "readlink(/proc/self/exe): %s", strerror(errno));
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    cr_assert(slash != NULL, "no directory in %s", self);
    *slash = '\0';
    int w = snprintf(path, len, "%s/gpu/%s", self, name);
    cr_assert(w > 0 && (size_t)w < len, "path too long");
    cr_assert(access(path, X_OK) == 0, "%s: %s (is the build complete?)", path, strerror(errno));
}

typedef struct output {
    char *text; /* NUL-terminated */
    size_t len, cap;
} output_t;

static void output_append(output_t *o, const char *buf, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (o->len + n + 1 > cap) cap *= 2;
        o->text = realloc(o->text, cap);
        cr_assert(o->text != NULL, "out of memory");
        o->cap = cap;
    }
    memcpy(o->text + o->len, buf, n);
    o->len += n;
    o->text[o->len] = '\0';
}

/* Run argv with stdout and stderr into *out; returns the wait status. */
static int run_captured(char *const argv[], output_t *out)
{
    int fds[2];
    cr_assert(pipe(fds) == 0, "pipe: %s", strerror(errno));
    /* The scenarios check replay's mechanics and count replays: no eager probes, and timing
     * never turns replay off there (CGJIT_COST), nor makes the process dormant (CGJIT_GOVERN,
     * whose decision follows the machine's pace); their own tests are host tests. */
    setenv("CGJIT_COST", "0", 0);
    setenv("CGJIT_GOVERN", "0", 0);
    setenv("CGJIT_WARMUP_RUNS", "0", 0);      /* recorded from the first run, as counted */
    setenv("CGJIT_BUILD_BACKGROUND", "0", 0); /* built where recorded, replayed from the next run */
    setenv("CGJIT_GRAPH_MIN_OPS", "1", 0);    /* the scenarios' small steps as graphs, as counted */
    setenv("CGJIT_FUSE_BACKGROUND", "0", 0);  /* fused kernels in the trace as built, as counted */
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    cr_assert(rc == 0, "posix_spawn(%s): %s", argv[0], strerror(rc));
    output_append(out, "", 0);
    char buf[4096];
    for (;;) {
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n > 0) output_append(out, buf, (size_t)n);
        else if (n == 0 || errno != EINTR) break;
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) cr_assert(errno == EINTR, "waitpid: %s", strerror(errno));
    return status;
}

/* 1 if text holds the line `line` exactly. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) return 1;
    return 0;
}

/* The line starting with `prefix`, copied into buf (empty if none). */
static const char *find_line(const char *text, const char *prefix, char *buf, size_t len)
{
    buf[0] = '\0';
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) {
            size_t n = strcspn(p, "\n");
            snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
            break;
        }
    return buf;
}

/* Run `<dir>/gpu/<name> <scenario>`; pass on `PASS <scenario>`, skip on `SKIP <scenario> ...`.
 * `label` names the run in the log (the flavour, or the program). */
static void run_program(const char *name, const char *scenario, const char *label)
{
    char why[512];
    if (!gpu_present(why, sizeof why)) cr_skip_test("no CUDA GPU: %s", why);

    char program[PATH_MAX + 64];
    gpu_program(name, program, sizeof program);
    char *argv[] = {program, (char *)scenario, NULL};
    output_t out = {0};
    int status = run_captured(argv, &out);

    char pass[128], skip[128], info[512];
    snprintf(pass, sizeof pass, "PASS %s", scenario);
    snprintf(skip, sizeof skip, "SKIP %s ", scenario);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && find_line(out.text, skip, info, sizeof info)[0]) {
        free(out.text);
        cr_skip_test("%s", info);
    }
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && has_line(out.text, pass);
    const char *tail = out.len > 3000 ? out.text + out.len - 3000 : out.text;
    if (!ok && tail != out.text) /* the whole output, for the log; the assertion message keeps its end */
        fprintf(stderr, "---- %s %s: output ----\n%s---- end of output ----\n", program, scenario, out.text);
    cr_assert(WIFEXITED(status), "%s %s was killed by signal %d; output ends:\n%s", name, scenario,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0, tail);
    cr_assert(WEXITSTATUS(status) == 0, "%s %s exited with status %d; output ends:\n%s", name, scenario,
              WEXITSTATUS(status), tail);
    cr_assert(ok, "%s %s printed no line \"%s\"; output ends:\n%s", name, scenario, pass, tail);
    char key[128];
    snprintf(key, sizeof key, "info %s:", scenario);
    cr_log_info("%s: %s", label, find_line(out.text, key, info, sizeof info));
    free(out.text);
}

static void run_scenario(const char *scenario, const char *flavour)
{
    char name[64];
    snprintf(name, sizeof name, "gpu_scenarios_%s", flavour);
    run_program(name, scenario, flavour);
}

#define GPU_TEST(scenario, flavour)                           \
    Test(gpu_scenarios, scenario##_##flavour, .timeout = 300) \
    {                                                         \
        run_scenario(#scenario, #flavour);                    \
    }

#define GPU_TESTS(scenario)    \
    GPU_TEST(scenario, static) \
    GPU_TEST(scenario, shared) \
    GPU_TEST(scenario, ptds)

GPU_TESTS(chain)
GPU_TESTS(varying_scalar)
GPU_TESTS(varying_pointer)
GPU_TESTS(segments)
GPU_TESTS(side_exit)
GPU_TESTS(varying_grid)
GPU_TESTS(patch_on_gpu)
GPU_TESTS(blacklist)
GPU_TESTS(streams)
GPU_TESTS(event_pool)
GPU_TESTS(own_graph)
GPU_TESTS(as_made)
GPU_TESTS(misuse)
GPU_TESTS(temporaries)
GPU_TESTS(async_temporaries)
GPU_TESTS(escape)
GPU_TESTS(alloc_sizes)

/* CGJIT_BUSY: the chain's GPU-busy time per replayed step, through CUPTI. */
Test(gpu_scenarios, busy_static, .timeout = 300)
{
    setenv("CGJIT_BUSY", "1", 1);
    run_scenario("busy", "static");
    unsetenv("CGJIT_BUSY");
}

/* CGJIT_BUILD_BACKGROUND=1, as users get it: the chain built by cgjit's builder thread. */
#define BACKGROUND_TEST(flavour)                              \
    Test(gpu_scenarios, background_##flavour, .timeout = 300) \
    {                                                         \
        setenv("CGJIT_BUILD_BACKGROUND", "1", 1);             \
        run_scenario("background", #flavour);                 \
    }
BACKGROUND_TEST(static)
BACKGROUND_TEST(shared)
BACKGROUND_TEST(ptds)

/* CGJIT_LAUNCH_ASYNC=1: the chain in chunks of 8 kernels, launched by cgjit's launch thread. Not
 * the ptds flavour: a chunk on the per-thread default stream is launched by the program's thread
 * (the handle names the stream of the thread that uses it). */
#define HANDED_TEST(flavour)                              \
    Test(gpu_scenarios, handed_##flavour, .timeout = 300) \
    {                                                     \
        setenv("CGJIT_LAUNCH_ASYNC", "1", 1);             \
        setenv("CGJIT_CHUNK_OPS", "8", 1);                \
        run_scenario("handed", #flavour);                 \
    }
HANDED_TEST(static)
HANDED_TEST(shared)

/* Fusion (mode default): one test per gpu_fusion scenario. */
#define FUSION_TEST(scenario)                               \
    Test(gpu_fusion, scenario, .timeout = 300)              \
    {                                                       \
        run_program("gpu_fusion", #scenario, "gpu_fusion"); \
    }
FUSION_TEST(chain)
FUSION_TEST(split)
FUSION_TEST(long_chain)
FUSION_TEST(wrong_registration)
FUSION_TEST(layout_mismatch)
FUSION_TEST(reduce_overhead)
FUSION_TEST(registry_file)
FUSION_TEST(changing_scalar)
FUSION_TEST(library_calls)
FUSION_TEST(library_exit)
FUSION_TEST(gemm_relu)
FUSION_TEST(gemm_gelu)
FUSION_TEST(gemm_autotune)
FUSION_TEST(conv_relu)
FUSION_TEST(gemm_lt_relu)
FUSION_TEST(gemm_relu_timed)

/* The library wrappers: two tests per gpu_libs scenario (`gpu_libs --list`): the default, where
 * the library runs on every call and its kernels replay, and the optional learned path
 * (CGJIT_LIBS_LEARNED=1), where replay absorbs calls whole. */
#define LIB_TEST(scenario)                                        \
    Test(gpu_libs, scenario, .timeout = 300)                      \
    {                                                             \
        setenv("CGJIT_LIBS_LEARNED", "0", 1);                     \
        run_program("gpu_libs", #scenario, "gpu_libs");           \
    }                                                             \
    Test(gpu_libs_learned, scenario, .timeout = 300)              \
    {                                                             \
        setenv("CGJIT_LIBS_LEARNED", "1", 1);                     \
        run_program("gpu_libs", #scenario, "gpu_libs (learned)"); \
    }

LIB_TEST(sgemm)
LIB_TEST(gemm_ex)
LIB_TEST(sgemm_strided_batched)
LIB_TEST(gemm_strided_batched_ex)
LIB_TEST(gemm_batched_ex)
LIB_TEST(sgemv)
LIB_TEST(saxpy)
LIB_TEST(sscal)
LIB_TEST(scopy)
LIB_TEST(sdot)
LIB_TEST(sdot_host)
LIB_TEST(axpy_ex)
LIB_TEST(scal_ex)
LIB_TEST(copy_ex)
LIB_TEST(dot_ex)
LIB_TEST(lt_matmul)
LIB_TEST(lt_matmul_relu_bias)
LIB_TEST(conv_forward)
LIB_TEST(conv_bias_act)
LIB_TEST(activation)
LIB_TEST(op_tensor)
LIB_TEST(add_tensor)
LIB_TEST(scale_tensor)
LIB_TEST(softmax)
LIB_TEST(pooling)
LIB_TEST(batchnorm_inference)
LIB_TEST(backend_execute)
LIB_TEST(desc_modified)
LIB_TEST(alpha_changes)
LIB_TEST(handle_recreate)
LIB_TEST(pointers_alternate)

/* cuBLAS from a program whose link dropped libcublas (--as-needed): cgjit loads it. */
Test(gpu_libs, as_needed, .timeout = 300)
{
    run_program("gpu_as_needed", "as_needed", "gpu_as_needed");
}
Test(gpu_libs_learned, as_needed, .timeout = 300)
{
    setenv("CGJIT_LIBS_LEARNED", "1", 1);
    run_program("gpu_as_needed", "as_needed", "gpu_as_needed (learned)");
}

/* ---- main: the whole suite skips, with its reason, where there is no GPU ---------------- */

enum { EXIT_SKIP = 77 }; /* SKIP_RETURN_CODE of the ctest entry */

/* gpu_present() in a child process, its reason sent back through a pipe: cuInit must not run
 * in this process, whose Criterion workers are forked from it (CUDA does not survive fork). */
static int gpu_present_forked(char *why, size_t len)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, len, "pipe: %s", strerror(errno));
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char buf[512] = "";
        int ok = gpu_present(buf, sizeof buf);
        ssize_t w = write(fds[1], buf, strlen(buf));
        _exit(ok && w >= 0 ? 0 : 1);
    }
    close(fds[1]);
    ssize_t n = 0;
    if (pid > 0)
        while ((n = read(fds[0], why, len - 1)) < 0 && errno == EINTR) {}
    why[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status = 0;
    if (pid < 0) {
        snprintf(why, len, "fork: %s", strerror(errno));
        return 0;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status)) snprintf(why, len, "probing the driver was killed by signal %d", WTERMSIG(status));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Arguments that only ask about the suite (its list, the usage) need no GPU. */
static bool asks_only(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--list", 6) || !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ||
            !strcmp(argv[i], "--version"))
            return true;
    return false;
}

int main(int argc, char *argv[])
{
    char why[512];
    if (!asks_only(argc, argv) && !gpu_present_forked(why, sizeof why)) {
        printf("SKIP: no CUDA GPU: %s\n", why);
        return EXIT_SKIP;
    }
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true)) result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}
