/*
 * consumer.c — a program that uses an installed cgjit as its users would: built once through
 * pkg-config and once through CMake's find_package(cgjit) (test_install.sh). It checks that the
 * library it runs with is the one its header describes and that libcgjit loads and answers
 * without a CUDA driver or a GPU.
 */
#include <cgjit.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", CGJ_VERSION_MAJOR, CGJ_VERSION_MINOR, CGJ_VERSION_PATCH);
    const char *have = cgj_version();
    if (!have || strcmp(have, CGJ_VERSION_STRING) != 0 || strcmp(have, want) != 0) {
        fprintf(stderr, "consumer: cgj_version() is '%s'; the header says %s (%s)\n", have ? have : "(null)",
                CGJ_VERSION_STRING, want);
        return 1;
    }
    /* A step with no driver runs eagerly and still pairs; with one (a GPU machine) it is a step. */
    int st = cgj_trace_begin("consumer");
    if (st != CGJ_OK && st != CGJ_ERR_NO_DRIVER) {
        fprintf(stderr, "consumer: cgj_trace_begin: %s\n", cgj_strerror(st));
        return 1;
    }
    int end = cgj_trace_end();
    if (end != CGJ_OK) {
        fprintf(stderr, "consumer: cgj_trace_end: %s\n", cgj_strerror(end));
        return 1;
    }
    printf("cgjit %s (%s)\n", have, st == CGJ_OK ? "driver found" : "no driver");
    return 0;
}
