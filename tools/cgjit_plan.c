/*
 * cgjit_plan.c — cgjit-plan: plan an allocation trace into one pool and print the figures.
 *
 * The trace is the text format of allocator/plan.h (what CGJIT_DUMP_ALLOCS writes): one event
 * per line, `a ID BYTES` or `f ID`. The planner is the one a running program gets, so these
 * figures are the ones the exit report shows for that trace.
 */
#include "allocator/plan.h"
#include "base/cgj_base.h"
#include "cgjit.h" /* the version macros */

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
    "Exit status: 0 (also for --help and --version); 2 for bad input (the message names the line), an unreadable file or wrong\n"
    "usage.\n";

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
    const char *name = from_stdin ? "<stdin>" : argv[1];
    FILE *f = from_stdin ? stdin : fopen(argv[1], "r");
    if (!f) {
        fprintf(stderr, "cgjit-plan: %s: %s\n", name, strerror(errno));
        return 2;
    }
    cgj_plan_block_t *blocks;
    size_t n;
    char err[512];
    int rc = cgj_plan_parse(f, name, &blocks, &n, err, sizeof err);
    if (!from_stdin) fclose(f);
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
