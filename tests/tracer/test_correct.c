/*
 * test_correct.c — the invariant on patterns of programs nobody here wrote: a device pointer
 * passed as a "host" source, a thread that exits mid-step, a cross-thread event wait, fork()
 * while another thread replays, errors while absorbed work is re-issued. Each step runs eagerly
 * and traced from the same data and must leave memory bitwise equal.
 */
#include "replay_common.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(tracer_correct, .init = setup);

/* ---- a device pointer as the source of a host-to-device copy (unified addressing) ---- */

static void device_as_host_step(int s, CUdeviceptr *b, void *ctx)
{
    OK(fk_addk_launch(&fk, NULL, b[0], s + 1, N)); /* absorbed in replay: not run yet */
    OK(fk.htod(b[1], (const void *)(uintptr_t)b[0], N * sizeof(float)));
    OK(fk.htod_async(b[2], (const void *)(uintptr_t)b[1], N * sizeof(float), NULL));
    OK(fk_axpb_launch(&fk, NULL, b[2], 2.0f, 1.0f, N, 1));
}

Test(tracer_correct, device_pointer_as_host_source_is_a_device_copy)
{
    run_scenario(&(scenario_t){.name = "dev_as_host", .fn = device_as_host_step, .steps = 12, .nbufs = 3,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(10), .side_exits = IS(0)},
                               .stats = {.bytes_staged = IS(0)}});
}
