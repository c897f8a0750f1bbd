/*
 * fuzz_registry.c — libFuzzer harness for the registry file (CGJIT_OPS, fusion/registry.c):
 * each input is a whole file, read through cgj_fusion_load_stream from memory (fmemopen).
 *
 * The bad lines' messages would go to stderr by the thousand: the harness points the C library's
 * stderr at /dev/null at start (FUZZ_VERBOSE=1 keeps it). The sanitizers and libFuzzer write
 * their own reports to descriptor 2 and their own stream, which this leaves alone. A few
 * lookups follow each file (names its lines may register, plain and mangled), then the registry
 * is emptied, so that memory stays flat over millions of inputs. The stack may grow to 1 MiB
 * only (fuzz_stack.h): a line's nesting must not need more (4000 levels once did).
 *
 *     fuzz_registry -max_total_time=60 tests/fuzz/corpus/registry
 */
#define _GNU_SOURCE
#include "fusion/fusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_stack.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_bound_stack();
    const char *v = getenv("FUZZ_VERBOSE");
    if (!v || strcmp(v, "1")) {
        FILE *null = fopen("/dev/null", "w");
        if (null) stderr = null;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (!size) return 0; /* fmemopen of 0 bytes fails before glibc 2.22; nothing to read anyway */
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f) return 0;
    int bad = cgj_fusion_load_stream(f, "fuzz");
    fclose(f);
    if (bad < 0) abort();
    /* names the fuzzer can reach, and lookups that must not misbehave */
    (void)cgj_fusion_lookup("k");
    (void)cgj_fusion_lookup("_Z1kPfi");
    (void)cgj_fusion_lookup("");
    cgj_fusion_registry_reset();
    return 0;
}
