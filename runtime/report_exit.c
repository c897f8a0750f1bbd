/*
 * report_exit.c — what cgjit writes when the program exits: the report CGJIT_REPORT asks for
 * (text on stderr or CGJIT_LOG_FILE, text or JSON into a file) and the timeline of
 * CGJIT_TRACE_FILE. Set up at start-up before the driver is loaded, so that a run where cgjit is
 * disabled or finds no driver still reports, and says so.
 */
#define _GNU_SOURCE /* program_invocation_short_name */
#include "runtime/report.h"
#include "base/config.h"
#include "base/file.h"
#include "base/log.h"
#include "base/timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pid_t setup_pid; /* a child of fork() runs the parent's handler: it writes nothing */

/* Open the file a user named (%p expanded), or say why not on stderr. */
static FILE *open_output(const char *var, const char *name, char *path, size_t len)
{
    FILE *f = cgj_file_replace(cgj_file_expand(name, path, len));
    if (!f) fprintf(stderr, "cgjit: warning: %s: '%s' cannot be written (%s)\n", var, path, strerror(errno));
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

static void write_trace(void)
{
    char path[4096], process[96];
    if (!cgj_cfg.TRACE_FILE[0]) return;
    cgj_timeline_stop(); /* what is kept now is what is written */
    FILE *f = open_output("CGJIT_TRACE_FILE", cgj_cfg.TRACE_FILE, path, sizeof path);
    if (!f) return;
    snprintf(process, sizeof process, "%s (cgjit)", program_invocation_short_name);
    bool ok = cgj_timeline_write(f, process);
    if (fclose(f) != 0 || !ok) fprintf(stderr, "cgjit: warning: CGJIT_TRACE_FILE: writing '%s' failed\n", path);
}

static void at_exit(void)
{
    if (getpid() != setup_pid) return;
    write_report();
    write_trace();
}

void cgj_report_forked(void)
{
    if (setup_pid) setup_pid = getpid();
}

void cgj_report_setup(void)
{
    const char *file;
    bool report = cgj_config_report(cgj_cfg.REPORT, &file) != CGJ_REPORT_OFF;
    if (!report && !cgj_cfg.TRACE_FILE[0]) return;
    if (cgj_cfg.TRACE_FILE[0]) cgj_timeline_start((uint64_t)cgj_cfg.TRACE_EVENTS);
    setup_pid = getpid();
    atexit(at_exit);
}
