/*
 * fuzz_cpu.c — every harness's bound on one input, in CPU time: an input that keeps a harness
 * busy for more than FUZZ_CPU_SECONDS of CPU (user and system time of the process; default 10,
 * 0 for none) is a finding: the harness says so on stderr and aborts, and libFuzzer keeps the
 * input as a crash-* file. libFuzzer's own -timeout counts wall-clock time, which a loaded
 * machine stretches at random: scripts/fuzz.sh sets it to a bound only a hang reaches.
 *
 * Each fuzzer is linked with -Wl,--wrap=LLVMFuzzerTestOneInput (tests/fuzz/CMakeLists.txt):
 * libFuzzer calls the wrapper below, which arms a timer of CPU time (ITIMER_PROF), runs the
 * harness's own LLVMFuzzerTestOneInput, and disarms it.
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

int __real_LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int __wrap_LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long limit_s = -1;
static char message[128];
static size_t message_len;

static void cpu_spent(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, message, message_len);
    (void)w;
    abort();
}

static void cpu_setup(void)
{
    const char *v = getenv("FUZZ_CPU_SECONDS");
    char *end = NULL;
    long s = v && *v ? strtol(v, &end, 10) : 10;
    limit_s = (end && *end) || s < 0 ? 10 : s;
    int n = snprintf(message, sizeof message,
                     "fuzz: this input took more than %ld s of CPU time (FUZZ_CPU_SECONDS): a finding\n", limit_s);
    message_len = n > 0 && (size_t)n < sizeof message ? (size_t)n : 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cpu_spent;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
}

int __wrap_LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (limit_s < 0) cpu_setup();
    struct itimerval on = {.it_value = {.tv_sec = limit_s}}, off = {{0, 0}, {0, 0}};
    if (limit_s > 0) setitimer(ITIMER_PROF, &on, NULL);
    int r = __real_LLVMFuzzerTestOneInput(data, size);
    if (limit_s > 0) setitimer(ITIMER_PROF, &off, NULL);
    return r;
}
