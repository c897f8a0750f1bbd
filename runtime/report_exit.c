/*
 * report_exit.c — what cgjit writes as the program ends: the report CGJIT_REPORT asks for (text
 * on stderr or CGJIT_LOG_FILE, text or JSON into a file) and the timeline of CGJIT_TRACE_FILE.
 * Set up at start-up before the driver is loaded, so that a run where cgjit is disabled or finds
 * no driver still reports, and says so. Both are written:
 *  - at exit (atexit: exit(), a return from main);
 *  - when SIGTERM or SIGINT ends the program (kill, timeout, Ctrl-C), where the program left the
 *    signal's default action: what cgjit has is written, then the signal ends the process;
 *  - every CGJIT_REPORT_EVERY_S seconds while it runs, if set (the timeline keeps recording).
 * One write at a time (write_lock); after the last one (at exit or on a signal) none follows.
 *
 * Why a thread, not the handler. Writing a report takes locks — the anchor table's, stdio's,
 * malloc's — that the interrupted thread may be holding, so it is not async-signal-safe and is
 * never done in a handler. The handler does only async-signal-safe things: it records the signal
 * and posts a semaphore (sem_post), then returns. cgjit's writer thread, which blocks every
 * signal so that none of the program's is ever delivered to it, wakes and writes while the
 * interrupted thread runs on and lets go of what it held; then it restores the default action,
 * unblocks the signal in itself and raises it: the process ends killed by that signal, the
 * status its parent would have seen without cgjit. A second SIGTERM or SIGINT meanwhile ends the
 * process at once (the handler restores the default action and raises it), so that nothing
 * keeps alive a program asked twice to end. The same thread writes every CGJIT_REPORT_EVERY_S
 * seconds. The cost: one idle thread where a handler is installed or a period is set.
 *
 * The program's own handling is unchanged:
 *  - the handler is installed only where the signal's action is the default (SIG_DFL) when
 *    cgjit starts. A signal the program ignores or handles itself is left alone: the program
 *    owns it. Where its handler ends the program with exit(), the report is written at exit as
 *    always; where it calls _exit() or raises the signal again, nothing is written. That path
 *    is not covered: chaining from cgjit's handler into the program's would run a handler
 *    written for the interrupted context from another schedule, and a write racing its _exit()
 *    would leave a truncated file.
 *  - a program that installs its own handler later replaces cgjit's and owns the signal from
 *    then on; one that chains to the handler it replaced (cgjit's) gets, after the write, the
 *    default action it would have had.
 *  - SA_RESTART: a system call the handler interrupts restarts, except those that never do
 *    under any handler (sleep, poll, ...: they return EINTR, and the process ends soon after).
 *  - exec() resets a caught signal to its default: programs the program starts are not
 *    affected. A child of fork() that cgjit traces starts its own writer (cgj_report_forked);
 *    in any other child the handler finds no writer of its process and ends it at once.
 * Limits: a program that installs its handler only where it finds SIG_DFL (Python's SIGINT)
 * sees cgjit's where cgjit started first, which happens only in a program linked with libcuda
 * (cgjit starts in a constructor there; elsewhere at the first CUDA call). A periodic write
 * replaces the file in place: a reader may see it half written.
 */
#define _GNU_SOURCE /* program_invocation_short_name */
#include "runtime/report.h"
#include "base/config.h"
#include "base/file.h"
#include "base/log.h"
#include "base/timeline.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pid_t setup_pid; /* a child of fork() runs the parent's handler: it writes nothing */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static bool last_written; /* under write_lock: at exit or on a signal; nothing is written after */
static const int end_signals[] = {SIGTERM, SIGINT};
static sem_t wake;       /* the handler's post to the writer */
static int caught;       /* the signal the writer is to end the process with; 0: none */
static pid_t writer_pid; /* the process whose writer thread runs; 0: none */

/* Open the file a user named (%p expanded), or say why not on stderr. */
static FILE *open_output(const char *var, const char *name, char *path, size_t len)
{
    FILE *f = cgj_file_replace(cgj_file_expand(name, path, len));
    if (!f) cgj_log_message("warning: %s: '%s' cannot be written (%s)", var, path, cgj_file_strerror(errno));
    return f;
}

static void write_report(void)
{
    const char *file;
    char path[4096];
    int kind = cgj_config_report(cgj_cfg.REPORT, &file);
    if (kind == CGJ_REPORT_OFF) return;
    FILE *f = file ? open_output("CGJIT_REPORT", file, path, sizeof path) : cgj_log_stream();
    if (!f) return;
    if (kind == CGJ_REPORT_JSON) cgj_report_json(f);
    else cgj_report(f);
    if (file) fclose(f);
    else fflush(f);
}

/* The timeline as kept now; the last time, it stops recording first. */
static void write_trace(bool last)
{
    char path[4096], process[96];
    if (!cgj_cfg.TRACE_FILE[0]) return;
    if (last) cgj_timeline_stop(); /* what is kept now is what is written */
    FILE *f = open_output("CGJIT_TRACE_FILE", cgj_cfg.TRACE_FILE, path, sizeof path);
    if (!f) return;
    snprintf(process, sizeof process, "%s (cgjit)", program_invocation_short_name);
    bool ok = cgj_timeline_write(f, process);
    if (fclose(f) != 0 || !ok) cgj_log_message("warning: CGJIT_TRACE_FILE: writing '%s' failed", path);
}

static void write_outputs(bool last)
{
    pthread_mutex_lock(&write_lock);
    if (!last_written) {
        last_written = last;
        write_report();
        write_trace(last);
    }
    pthread_mutex_unlock(&write_lock);
}

static void at_exit(void)
{
    if (getpid() == setup_pid) write_outputs(true);
}

/* Async-signal-safe only (see above): hand the signal to the writer, or end the process now. */
static void on_signal(int sig)
{
    int saved = errno;
    if (__atomic_load_n(&writer_pid, __ATOMIC_ACQUIRE) == getpid() &&
        __atomic_exchange_n(&caught, sig, __ATOMIC_ACQ_REL) == 0) {
        sem_post(&wake);
    } else { /* no writer in this process, or asked twice: the default action, on return */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    errno = saved;
}

/* On the writer thread: write, then end the process with `sig` as its default action would. */
static void end_with(int sig)
{
    write_outputs(true);
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    _exit(128 + sig); /* not reached: the default action of SIGTERM and SIGINT ends the process */
}

static void *writer(void *arg)
{
    (void)arg;
    long long every = cgj_cfg.REPORT_EVERY_S;
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)every;
        int r;
        while ((r = every ? sem_timedwait(&wake, &until) : sem_wait(&wake)) != 0 && errno == EINTR) {}
        int sig = __atomic_load_n(&caught, __ATOMIC_ACQUIRE);
        if (sig) end_with(sig);
        if (r != 0) write_outputs(false); /* the period is over */
    }
    return NULL;
}

/* The writer thread, with every signal blocked; true if it runs. */
static bool start_writer(void)
{
    sem_init(&wake, 0, 0);
    bool up = cgj_spawn(writer);
    if (up) __atomic_store_n(&writer_pid, getpid(), __ATOMIC_RELEASE);
    return up;
}

/* Is the action of `sig` the default? */
static bool is_default(int sig)
{
    struct sigaction old;
    return sigaction(sig, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
}

/* The writer where a signal's action is the default or a period is set, and the handler on the
 * signals whose action is the default. */
static void setup_writer(void)
{
    bool dfl[CGJ_ARRAY_LEN(end_signals)], any = cgj_cfg.REPORT_EVERY_S > 0;
    for (size_t k = 0; k < CGJ_ARRAY_LEN(end_signals); k++) any |= dfl[k] = is_default(end_signals[k]);
    if (!any || !start_writer()) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t k = 0; k < CGJ_ARRAY_LEN(end_signals); k++)
        if (dfl[k]) sigaction(end_signals[k], &sa, NULL);
}

void cgj_report_forked(void)
{
    if (!setup_pid) return;
    setup_pid = getpid();
    pthread_mutex_init(&write_lock, NULL); /* a thread of the parent may have held it */
    __atomic_store_n(&caught, 0, __ATOMIC_RELAXED);
    if (__atomic_load_n(&writer_pid, __ATOMIC_ACQUIRE)) start_writer(); /* threads do not survive fork() */
}

void cgj_report_setup(void)
{
    const char *file;
    bool report = cgj_config_report(cgj_cfg.REPORT, &file) != CGJ_REPORT_OFF;
    if (!report && !cgj_cfg.TRACE_FILE[0]) return;
    if (cgj_cfg.TRACE_FILE[0]) cgj_timeline_start((uint64_t)cgj_cfg.TRACE_EVENTS);
    setup_pid = getpid();
    atexit(at_exit);
    setup_writer();
}
