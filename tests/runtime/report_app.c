/*
 * report_app.c — a small CUDA program on the fake driver, for the tests of what cgjit writes at
 * exit (tests/runtime/check_outputs.py): the JSON report, the Chrome trace, names that are the
 * same from run to run, log files shared by processes, and the report of a run without driver.
 *
 *   report_app implicit [STEPS [SHIFT]]  a loop with no markers, read back every iteration (a
 *                                       step under CGJIT_STEP=sync; a cycle under auto); every
 *                                       10th iteration launches one kernel more (a side exit).
 *                                       SHIFT bytes are allocated first, so that handles land
 *                                       at other addresses than in another run.
 *   report_app marked [STEPS]           the same loop between cgj_trace_begin/end, and a setup
 *                                       step that runs once.
 *   report_app nodriver                 one marked step, with CGJIT_DRIVER naming no driver.
 *   report_app named NAME [STEPS]       the marked loop, its anchor named NAME (any bytes).
 *   report_app wait [HANDLER]           the marked loop (10 steps), then "ready" on stdout, then
 *                                       it waits for a signal. HANDLER: none (the default
 *                                       action: the signal ends it), early (its own SIGTERM
 *                                       handler, installed before cgjit starts) or late (after):
 *                                       with a handler it exits with status 3 once signalled.
 */
#define _GNU_SOURCE /* sigaction */
#include "fakeapp.h"
#include <cgjit.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 64

static fk_t fk;

static int check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "report_app: %s failed (%d)\n", what, (int)r);
        exit(1);
    }
    return 0;
}

/* One iteration on stream s: two kernels (a third every 10th time), then the host reads x. */
static void iteration(CUstream s, CUdeviceptr x, int it)
{
    float seen[N];
    check(fk_axpb_launch(&fk, s, x, 0.5f, 0.25f, N, 1), "axpb");
    check(fk_addk_launch(&fk, s, x, it % 7, N), "addk");
    if (it % 10 == 9) check(fk_copyscale_launch(&fk, s, x, x, 0.5f, N), "copyscale");
    check(fk.dtoh(seen, x, sizeof seen), "read back");
}

static int run(const char *name, int steps, size_t shift)
{
    bool marked = name != NULL;
    void *junk = shift ? malloc(shift) : NULL; /* moves what the fake driver allocates next */
    if (junk) memset(junk, 1, shift);
    fk_open(&fk);
    CUstream s;
    check(fk.stream_create(&s, 0), "stream");
    CUdeviceptr x = fk_alloc_floats(&fk, N, 3);
    if (marked) {
        cgj_trace_begin("setup");
        check(fk_axpb_launch(&fk, s, x, 1.0f, 0.0f, N, 1), "setup");
        cgj_trace_end();
    }
    for (int it = 0; it < steps; it++) {
        if (marked) cgj_trace_begin(name);
        iteration(s, x, it);
        if (marked) cgj_trace_end();
    }
    free(junk);
    return 0;
}

static volatile sig_atomic_t signalled;

static void on_term(int sig)
{
    (void)sig;
    signalled = 1;
}

/* The loop, then "ready", then wait for SIGTERM (or SIGINT), handled by the program or not. */
static int wait_for_signal(const char *handler)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &old); /* until sigsuspend: no signal is missed */
    if (!strcmp(handler, "early")) sigaction(SIGTERM, &sa, NULL);
    run("train", 10, 0);
    if (!strcmp(handler, "late")) sigaction(SIGTERM, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    while (!signalled) sigsuspend(&old);
    return 3;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "implicit";
    int steps = argc > 2 ? atoi(argv[2]) : 60;
    size_t shift = argc > 3 ? (size_t)atol(argv[3]) : 0;
    if (!strcmp(mode, "nodriver")) {
        cgj_trace_begin("without_driver"); /* starts cgjit: the driver is not found */
        cgj_trace_end();
        return 0;
    }
    if (!strcmp(mode, "named") && argc > 2) return run(argv[2], argc > 3 ? atoi(argv[3]) : 5, 0);
    if (!strcmp(mode, "wait")) return wait_for_signal(argc > 2 ? argv[2] : "none");
    if (strcmp(mode, "implicit") && strcmp(mode, "marked")) {
        fprintf(
            stderr,
            "usage: report_app implicit|marked|nodriver [STEPS [SHIFT]] | named NAME [STEPS] | wait [none|early|late]\n");
        return 2;
    }
    return run(!strcmp(mode, "marked") ? "train" : NULL, steps, shift);
}
