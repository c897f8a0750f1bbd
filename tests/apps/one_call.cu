/*
 * one_call — a program that makes one CUDA call: it creates its context (cudaFree(0)), prints
 * the device count it sees, and exits. What cgjit costs such a program is its own start-up and
 * exit (scripts/no-replay-cost.sh times the whole process with and without it).
 */
#include "apps_common.h"

int main(void)
{
    CHECK(cudaFree(0));
    printf("one_call: context made\n");
    return 0;
}
