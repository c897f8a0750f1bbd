/*
 * cgjit_plan.c — cgjit-plan: plan an allocation trace into one pool and print the figures.
 *
 * The trace is the text format of allocator/plan.h (what CGJIT_DUMP_ALLOCS writes): one event
 * per line, `a ID BYTES` or `f ID`. The planner is the one a running program gets, so these
 * figures are the ones the exit report shows for that trace.
 *
 * FILE is read as cgjit reads every input (base/file.h): a regular file only, opened without
 * blocking (a FIFO, /dev/zero or a directory is refused at once), of at most INPUT_MAX_BYTES;
 * standard input ('-') may be a pipe, and is read up to the same bound. Messages show the file's
 * name with its control characters and invalid UTF-8 escaped, as the parser shows the tokens.
 */
#include "allocator/plan.h"
#include "base/cgj_base.h"
#include "base/file.h"
#include "base/json.h"
#include "base/mem.h"
#include "cgjit.h" /* the version macros */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INPUT_MAX_BYTES (256u << 20)

static const char usage[] =
    "usage: cgjit-plan FILE\n"
    "       cgjit-plan --help | --version\n"
    "\n"
    "Plans the allocations of the trace in FILE ('-': standard input) into one pool, as cgjit\n"
    "does for a traced step, and prints:\n"
    "  naive bytes     the sum of all sizes (one allocation each, nothing shared)\n"
    "  planned bytes   the planned pool\n"
    "  lower bound     the largest total of bytes live at one time\n"
    "  planned/lower   planned bytes over the lower bound\n"
    "  heuristic       which heuristic gave the plan\n"
    "Sizes are rounded up to 256 bytes (a size of 0 counts as 256) in all figures; a block never\n"
    "freed escapes the step and has bytes of its own.\n"
    "\n"
    "Trace format: one event per line, in step order; '#' starts a comment.\n"
    "  a ID BYTES      allocation of BYTES (decimal) bytes, named ID (a token without spaces)\n"
    "  f ID            free of the live allocation named ID\n"
    "\n"
    "FILE must be a regular file of at most 256 MiB (a FIFO, a device or a folder is refused);\n"
    "standard input is read up to the same size.\n"
    "\n"
    "Exit status: 0 (also for --help and --version); 2 for bad input (the message names the\n"
    "line), an unreadable or unsuitable file, or wrong usage.\n";

/* `name` as messages show it: control characters and invalid UTF-8 escaped (cgj_text_str). */
static char *shown_name(const char *name)
{
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (!m) return (char *)name;
    cgj_text_str(m, name);
    return fclose(m) == 0 && out ? out : (char *)name;
}

static void print_figures(const cgj_plan_result_t *r)
{
    double ratio = r->lower_bound ? (double)r->pool_bytes / (double)r->lower_bound : 1.0;
    printf("naive bytes:      %llu\n", (unsigned long long)r->naive_bytes);
    printf("planned bytes:    %llu\n", (unsigned long long)r->pool_bytes);
    printf("lower bound:      %llu\n", (unsigned long long)r->lower_bound);
    printf("planned/lower:    %.4f\n", ratio);
    printf("heuristic:        %s\n", r->heuristic);
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("cgjit-plan %s\n", CGJ_VERSION_STRING);
        return 0;
    }
    if (argc != 2 || (argv[1][0] == '-' && argv[1][1] != '\0')) {
        fputs(usage, stderr);
        return 2;
    }
    int from_stdin = strcmp(argv[1], "-") == 0;
    char *name = shown_name(from_stdin ? "<stdin>" : argv[1]);
    size_t len = 0;
    char *text = from_stdin ? cgj_file_read_fd(0, INPUT_MAX_BYTES, &len)
                            : cgj_file_read(argv[1], INPUT_MAX_BYTES, &len);
    if (!text) {
        if (errno == EFBIG) fprintf(stderr, "cgjit-plan: %s: larger than %u bytes\n", name, INPUT_MAX_BYTES);
        else fprintf(stderr, "cgjit-plan: %s: %s\n", name, cgj_file_strerror(errno));
        return 2;
    }
    FILE *f = fmemopen(len ? text : (char *)"\n", len ? len : 1, "r"); /* fmemopen takes no empty buffer */
    if (!f) {
        fprintf(stderr, "cgjit-plan: %s: %s\n", name, strerror(errno));
        return 2;
    }
    cgj_plan_block_t *blocks;
    size_t n;
    char err[512];
    int rc = cgj_plan_parse(f, name, &blocks, &n, err, sizeof err);
    fclose(f);
    cgj_free(text);
    if (rc != 0) {
        fprintf(stderr, "cgjit-plan: %s\n", err);
        return 2;
    }
    cgj_plan_result_t r;
    cgj_plan(blocks, n, &r);
    print_figures(&r);
    cgj_free(blocks);
    return fflush(stdout) == 0 ? 0 : 2;
}
