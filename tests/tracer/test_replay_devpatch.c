/*
 * test_replay_devpatch.c — replay against the fake driver, continued (see test_replay.c): kernel
 * nodes patched on the GPU (CGJIT_DEVICE_PATCH, graphs/devpatch.h), by the graph's patch node. The fake driver runs
 * cgjit's patch kernel as a host function with the kernel's contract (tests/fakecuda/fakecuda_devpatch.c), so what is
 * tested here is what replay sends it: which bytes, in how many launches, and when a node is set from the host instead.
 * Every step must leave memory exactly as eager execution does.
 *
 * Chunks would follow the host's real time between calls (CGJIT_CHUNK_US): off here, so that
 * each step is one graph and the counts are exact.
 */
#include "replay_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void devpatch_setup(void)
{
    setenv("CGJIT_CHUNK_US", "0", 1);
    setup();
}

static void threshold_setup(void)
{
    setenv("CGJIT_DEVICE_PATCH", "13", 1); /* twelve kernels are too few */
    devpatch_setup();
}

static void host_only_setup(void)
{
    setenv("CGJIT_DEVICE_PATCH", "0", 1);
    devpatch_setup();
}

TestSuite(tracer_replay_devpatch, .init = devpatch_setup);
/* Tests with settings of their own (a suite's .init would run in place of a test's). */
TestSuite(tracer_replay_devpatch_off);

/* The patch kernel is built where the toolkit's nvcc was found (graphs/CMakeLists.txt). */
static void need_image(void)
{
#ifndef CGJ_TEST_DEVPATCH_IMAGE
    cr_skip_test("this build has no patch kernel (made without nvcc): nodes are patched from the host only");
#endif
}

/* Twelve kernels, each adding a count that changes every step. */
static void twelve_counters_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++) OK(fk_addk_launch(&fk, NULL, b[j % 2], s + j, N));
}

Test(tracer_replay_devpatch, twelve_varying_kernels_are_patched_by_the_graphs_patch_node)
{
    need_image();
    run_scenario(&(scenario_t){
        .name = "twelve",
        .fn = twelve_counters_step,
        .steps = 60,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(58), .segments = IS(1), .side_exits = IS(0)},
        /* every replay changes all twelve counts: one 4-byte update each, one block set into the
         * graph's patch node (one host call), no kernel launched besides the graph (eager
         * launches: the reference run's and the two recorded steps') */
        .stats = {.params_patched = IS(58 * 12), .params_patched_on_gpu = IS(58 * 12), .patch_launches = IS(58)},
        .fake = {.eager_launches = IS(60 * 12 + 24),
                 .node_param_sets = IS(58),
                 .device_updates = IS(58 * 12),
                 .graph_launches = IS(58)}});
    char *text = fk_report_text();
    cr_assert(text && strstr(text, "kernels patched on the GPU: 12, in 1 segment(s)"), "report: %s", text);
    free(text);
}

/* Twelve varying kernels, every node patched from the host. */
static void expect_host_patching(const char *name)
{
    run_scenario(
        &(scenario_t){.name = name,
                      .fn = twelve_counters_step,
                      .steps = 30,
                      .nbufs = 2,
                      .info = {.replays = IS(28)},
                      .stats = {.params_patched = IS(28 * 12), .params_patched_on_gpu = IS(0), .patch_launches = IS(0)},
                      .fake = {.node_param_sets = IS(28 * 12), .device_updates = IS(0)}});
}

Test(tracer_replay_devpatch_off, below_the_threshold_nodes_are_patched_from_the_host, .init = threshold_setup)
{
    expect_host_patching("twelve_host");
}

Test(tracer_replay_devpatch_off, device_patch_0_patches_every_node_from_the_host, .init = host_only_setup)
{
    expect_host_patching("twelve_off");
}

/* addk(x, k) launched with cuLaunchKernelEx and a launch attribute (a priority). */
static void addk_with_attribute(CUdeviceptr x, int k)
{
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    CUlaunchConfig cfg = fk_ex_config(NULL, &attr, 1);
    int n = N;
    void *p[] = {&x, &k, &n};
    OK(fk.launch_ex(&cfg, fk_addk, p, NULL));
}

/* Twelve counters launched with an attribute: nodes of attributed launches keep the host's
 * patching. */
static void attributed_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++) addk_with_attribute(b[j % 2], s + j);
}

Test(tracer_replay_devpatch, kernels_launched_with_attributes_are_patched_from_the_host)
{
    need_image();
    run_scenario(
        &(scenario_t){.name = "attributed",
                      .fn = attributed_step,
                      .steps = 30,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28), .side_exits = IS(0)},
                      .stats = {.params_patched = IS(28 * 12), .params_patched_on_gpu = IS(0), .patch_launches = IS(0)},
                      .fake = {.node_param_sets = IS(28 * 12), .device_updates = IS(0)}});
}

/* The same first kernel launched with an attribute, then twelve plain counters: the segment's
 * first op would hang from the patch node by an edge that programmatic dependent launch may
 * turn into one that does not wait for it, so the segment has no patch node and every node is
 * patched from the host. */
static void attributed_first_step(int s, CUdeviceptr *b, void *ctx)
{
    addk_with_attribute(b[0], s);
    twelve_counters_step(s, b, ctx);
}

Test(tracer_replay_devpatch, a_segment_opening_with_an_attributed_launch_has_no_patch_node)
{
    need_image();
    run_scenario(
        &(scenario_t){.name = "attributed_first",
                      .fn = attributed_first_step,
                      .steps = 30,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28), .side_exits = IS(0)},
                      .stats = {.params_patched = IS(28 * 13), .params_patched_on_gpu = IS(0), .patch_launches = IS(0)},
                      .fake = {.node_param_sets = IS(28 * 13), .device_updates = IS(0)}});
}

/* 80 copies between two buffers that swap every step, each with a scale that changes: three
 * varying slots per kernel (two 8-byte pointers, a 4-byte float), 240 updates: more than one
 * patch node's block holds (168), so the graph gets two patch nodes. */
static void swapping_copies_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 80; j++) {
        CUdeviceptr dst = b[(s + j) % 2], src = b[1 - (s + j) % 2];
        OK(fk_copyscale_launch(&fk, NULL, dst, src, 0.5f + 0.001f * (float)((s * 7 + j) % 13), N));
    }
}

Test(tracer_replay_devpatch, updates_past_one_block_go_to_a_second_patch_node)
{
    need_image();
    run_scenario(&(scenario_t){
        .name = "swapping",
        .fn = swapping_copies_step,
        .steps = 20,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .varying_slots = IS(240), .side_exits = IS(0)},
        /* 56 kernels (168 updates) in the first block, 24 in the second: two host calls a replay,
         * no kernel launched besides the graph (eager launches: the reference run's and the two
         * recorded steps') */
        .stats = {.params_patched = IS(18 * 80), .params_patched_on_gpu = IS(18 * 80), .patch_launches = IS(18 * 2)},
        .fake = {
            .eager_launches = IS(20 * 80 + 2 * 80), .node_param_sets = IS(18 * 2), .device_updates = IS(18 * 240)}});
}

/* 504 kernels of three varying slots (1,512 updates): the graph's eight patch nodes hold 56
 * kernels each (448); the other 56 are patched from the host. */
static void many_copies_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 504; j++) {
        CUdeviceptr dst = b[(s + j) % 2], src = b[1 - (s + j) % 2];
        OK(fk_copyscale_launch(&fk, NULL, dst, src, 0.5f + 0.001f * (float)((s * 7 + j) % 13), N));
    }
}

static void one_chunk_setup(void)
{
    setenv("CGJIT_CHUNK_OPS", "0", 1); /* the 504 kernels in one segment */
    devpatch_setup();
}

Test(tracer_replay_devpatch_off, kernels_past_eight_blocks_are_patched_from_the_host, .init = one_chunk_setup)
{
    need_image();
    run_scenario(&(scenario_t){
        .name = "many",
        .fn = many_copies_step,
        .steps = 8,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(6), .segments = IS(1), .side_exits = IS(0)},
        .stats = {.params_patched = IS(6 * 504), .params_patched_on_gpu = IS(6 * 448), .patch_launches = IS(6 * 8)},
        .fake = {.node_param_sets = IS(6 * 8 + 6 * 56), .device_updates = IS(6 * 448 * 3)}});
}

/* Twelve counters, and one of them launched on one block or two in turn: its node is set from
 * the host on those replays (once the patch kernels queued before it have run), between the
 * GPU's patches of the others. */
static void changing_grid_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++) {
        int k = s + j, n = N;
        void *p[] = {&b[j % 2], &k, &n};
        OK(fk.launch(fk_addk, j == 5 ? 1 + s % 2 : 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
    }
}

Test(tracer_replay_devpatch, a_grid_change_sets_that_node_from_the_host)
{
    need_image();
    run_scenario(&(scenario_t){
        .name = "grid",
        .fn = changing_grid_step,
        .steps = 40,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(38), .side_exits = IS(0)},
        /* the grid differs from the graph's on every replay: that node from the host, 11 on the
         * GPU; the block holds the values of all twelve (the host's too: written again, equal) */
        .stats = {.params_patched = IS(38 * 12), .params_patched_on_gpu = IS(38 * 11), .patch_launches = IS(38)},
        .fake = {.node_param_sets = IS(38 + 38), .device_updates = IS(38 * 12)}});
}

/* One varying kernel among constant ones (patched on the GPU from one kernel on), its grid
 * changing on every third step: a step after one whose values the patch node wrote into it sets
 * that node from the host, and the patch node must not write its older block over the new
 * values: its block is made again with them (every step is compared with eager). */
static void one_patch_setup(void)
{
    setenv("CGJIT_DEVICE_PATCH", "1", 1);
    devpatch_setup();
}

static void sometimes_grid_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++) {
        int k = j == 5 ? s : j, n = N;
        void *p[] = {&b[j % 2], &k, &n};
        OK(fk.launch(fk_addk, j == 5 && s % 3 == 0 ? 2 : 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
    }
}

Test(tracer_replay_devpatch_off, a_node_set_from_the_host_keeps_its_values_against_the_patch_nodes_older_block,
     .init = one_patch_setup)
{
    need_image();
    /* replays at steps 2..44: on s % 3 == 2 the grid stays and the count goes to the GPU (15);
     * on the others the grid changes and the node is set from the host (28); the count changes
     * every step, so the patch node gets a block on every replay (43) */
    run_scenario(
        &(scenario_t){.name = "sometimes_grid",
                      .fn = sometimes_grid_step,
                      .steps = 45,
                      .nbufs = 2,
                      .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(43), .side_exits = IS(0)},
                      .stats = {.params_patched = IS(43), .params_patched_on_gpu = IS(15), .patch_launches = IS(43)},
                      .fake = {.node_param_sets = IS(28 + 43), .device_updates = IS(43)}});
}

/* Counts that change on every fourth step only (and between the two recorded steps, which
 * makes them vary): the patch node is given a block where values changed and nothing on the
 * replays after that (what it holds, it writes again: the values the nodes hold). */
static void slow_counters_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++) OK(fk_addk_launch(&fk, NULL, b[j % 2], (s < 2 ? s : s / 4) + j, N));
}

Test(tracer_replay_devpatch, the_patch_node_is_set_only_where_values_changed)
{
    need_image();
    run_scenario(&(scenario_t){.name = "slow",
                               .fn = slow_counters_step,
                               .steps = 42,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(40), .side_exits = IS(0)},
                               /* replays are steps 2..41: the counts change at steps 2, 4, 8, ..., 40 (11 blocks, one
                                * host call each); every launch's patch node writes the twelve counts it holds */
                               .stats = {.params_patched_on_gpu = IS(11 * 12), .patch_launches = IS(11)},
                               .fake = {.node_param_sets = IS(11), .device_updates = IS(40 * 12)}});
}

/* Twelve axpb kernels whose two 4-byte factors, side by side (bytes 8 to 16), change every
 * step: one 8-byte update a kernel. */
static void adjacent_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++)
        OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f + 0.01f * (float)((s + j) % 7), (float)((s * 3 + j) % 5), N, 1));
}

/* Twelve kernels a step for 30 steps, whose `varying` values make `updates` device updates a
 * kernel: every replay (28) patches all twelve on the GPU through one block set into the graph's
 * patch node. */
static void pieces_scenario(const char *name, step_fn fn, uint64_t varying, uint64_t updates)
{
    need_image();
    run_scenario(&(scenario_t){
        .name = name,
        .fn = fn,
        .steps = 30,
        .nbufs = 1,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28), .varying_slots = IS(varying), .side_exits = IS(0)},
        .stats = {.params_patched_on_gpu = IS(28 * 12), .patch_launches = IS(28)},
        .fake = {.node_param_sets = IS(28), .device_updates = IS(28 * 12 * updates)}});
}

Test(tracer_replay_devpatch, two_varying_values_side_by_side_are_one_update)
{
    pieces_scenario("adjacent", adjacent_step, 24, 1);
}

/* The same kernels with the first factor (bytes 8 to 12) and the count (bytes 16 to 20)
 * changing: 8 bytes from the first do not reach the second, so two updates a kernel. */
static void apart_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++)
        OK(fk_axpb_launch(&fk, NULL, b[0], 0.5f + 0.01f * (float)((s + j) % 7), 1.0f, N - (s + j) % 2, 1));
}

Test(tracer_replay_devpatch, varying_values_more_than_8_bytes_apart_are_two_updates)
{
    pieces_scenario("apart", apart_step, 24, 2);
}

/* A kernel of parameters of every size: x (8 bytes at 0), a (1 at 8), b (2 at 10), c (1 at 12), n
 * (4 at 16), e (8 at 24), natural alignment leaving padding at 9, 13-15 and 20-23. */
static void k_mixed(void **p, const unsigned g[3], const unsigned blk[3], unsigned smem)
{
    (void)g, (void)blk, (void)smem;
    float *x = *(float **)p[0];
    uint8_t a = *(uint8_t *)p[1], c = *(uint8_t *)p[3];
    uint16_t b = *(uint16_t *)p[2];
    int n = *(int *)p[4];
    int64_t e = *(int64_t *)p[5];
    for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] + (float)a + 2.0f * (float)b + 3.0f * (float)c + (float)e;
}

static CUfunction g_mixed;

/* a, c and e change every step, b and n never: a's window (bytes 8 to 16) takes b, which the node
 * holds already, and c, so a kernel's three varying values are two updates (bytes 8 to 13, and
 * e's 24 to 32). */
static void mixed_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    if (!g_mixed) {
        static const size_t sizes[] = {8, 1, 2, 1, 4, 8};
        g_mixed = fk.register_kernel("mixed", k_mixed, 6, sizes, 0, 0);
    }
    for (int j = 0; j < 12; j++) {
        CUdeviceptr x = b[0];
        uint8_t a = (uint8_t)((s + j) % 7), c = (uint8_t)((s * 3 + j) % 5);
        uint16_t k = 300;
        int n = N;
        int64_t e = (s + j) % 11;
        void *p[] = {&x, &a, &k, &c, &n, &e};
        OK(fk.launch(g_mixed, 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
    }
}

Test(tracer_replay_devpatch, a_window_spanning_a_constant_value_writes_it_as_the_node_holds_it)
{
    pieces_scenario("mixed", mixed_step, 36, 2);
}

/* Twelve kernels whose counts change every other step, then a copy after them in the same
 * graph whose source differs in the second recorded step (so the graph takes it as a value) and
 * moves for good at step 11, where the graph refuses it (injected): the patch pass had written
 * the kernels' new counts into the blocks, and nothing was launched. Step 12 has step 11's
 * counts: its blocks must be set all the same (the segment is stale until a launch with them
 * ran), or the patch node would give the kernels step 10's counts. */
static void refused_copy_step(int s, CUdeviceptr *b, void *ctx)
{
    (void)ctx;
    for (int j = 0; j < 12; j++) OK(fk_addk_launch(&fk, NULL, b[0], (s + 1) / 2 + j, N));
    if (s == 11 && g_traced) fk.fail_next("cuGraphExecMemcpyNodeSetParams", CUDA_ERROR_INVALID_VALUE);
    OK(fk.dtod_async(b[1], b[s == 1 || s >= 11 ? 3 : 2], N * sizeof(float), NULL));
}

Test(tracer_replay_devpatch, blocks_made_for_a_launch_that_never_ran_are_set_on_the_next)
{
    need_image();
    run_scenario(&(scenario_t){.name = "refused copy",
                               .fn = refused_copy_step,
                               .steps = 20,
                               .nbufs = 4,
                               /* the one exit: step 11's refused copy; every step's buffers are compared with eager */
                               .info = {.state = IS(CGJ_STATE_REPLAY), .side_exits = IS(1)},
                               .stats = {.params_patched_on_gpu = MORE_THAN(0)}});
}

/* A parameter passed as one packed buffer (`extra`) is one slot: all of its 8-byte pieces go in
 * the block, the pointer that never changes too (16 bytes: two updates). */
static void packed_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 10; j++) {
        struct {
            CUdeviceptr x;
            int k, n;
        } args = {b[0], s * (j == 3 ? 2 : 1), N};
        size_t size = sizeof args;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        OK(fk.launch(fk_addk, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    }
}

Test(tracer_replay_devpatch, a_packed_parameter_buffer_goes_in_pieces_of_8_bytes)
{
    need_image();
    run_scenario(&(scenario_t){.name = "packed",
                               .fn = packed_step,
                               .steps = 30,
                               .nbufs = 1,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(28), .side_exits = IS(0)},
                               /* k and n share the buffer's second 8 bytes; the pointer in the first never changes,
                                * and goes in the block too */
                               .stats = {.params_patched_on_gpu = IS(28 * 10), .patch_launches = IS(28)},
                               .fake = {.node_param_sets = IS(28), .device_updates = IS(28 * 20)}});
}

/* Anchors given back to stay within CGJIT_POOL_MAX_GB have their graphs destroyed, patched on
 * the GPU (every varying kernel, here: CGJIT_DEVICE_PATCH=1) until then: each is destroyed once
 * its last launch is done, and the anchors built after them patch and replay as before. */
static void budget_setup(void)
{
    setenv("CGJIT_POOL_MAX_GB", "1", 1);
    setenv("CGJIT_DEVICE_PATCH", "1", 1);
    devpatch_setup();
}

Test(tracer_replay_devpatch_off, evicted_anchors_destroy_graphs_patched_on_the_gpu, .init = budget_setup,
     .timeout = 120)
{
    need_image();
    run_short_anchors(600);
    cgj_stats_t st = stats_now();
    cr_assert_gt(st.anchors_evicted, 50);
    cr_assert_geq(st.steps_replayed, 600 * 2);
    cr_assert_geq(st.params_patched_on_gpu, 600, "every anchor's varying kernel patched on the GPU");
    cr_assert_eq(info_of("short599").state, CGJ_STATE_REPLAY);
}

/* A driver that keeps no device update past a host update of the graph (the fake under
 * FAKECUDA_DEVICE_UPDATES_LOST): every patch node's block still leaves the nodes with the run's
 * values, since it holds every device-updatable node's varying bytes, not only those that
 * changed. Twelve kernels whose counts change every step, every second or every third step, one
 * of them launched on two blocks every fifth step (set from the host); every step is compared
 * with eager. */
static void lost_setup(void)
{
    setenv("FAKECUDA_DEVICE_UPDATES_LOST", "1", 1);
    devpatch_setup();
}

TestSuite(tracer_replay_devpatch_lost, .init = lost_setup);

static void uneven_counters_step(int s, CUdeviceptr *b, void *ctx)
{
    for (int j = 0; j < 12; j++) {
        int k = (s < 2 ? s : s / (j % 3 + 1)) + j, n = N;
        void *p[] = {&b[j % 2], &k, &n};
        OK(fk.launch(fk_addk, j == 7 && s % 5 == 0 ? 2 : 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
    }
}

Test(tracer_replay_devpatch_lost, every_block_holds_all_values_so_a_driver_that_drops_device_updates_is_no_matter)
{
    need_image();
    run_scenario(&(scenario_t){.name = "uneven",
                               .fn = uneven_counters_step,
                               .steps = 60,
                               .nbufs = 2,
                               .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(58), .side_exits = IS(0)},
                               .stats = {.params_patched_on_gpu = MORE_THAN(0), .patch_launches = IS(58)}});
}

/* One varying kernel (patched on the GPU from one kernel on) whose node the driver will not make
 * device-updatable (the attribute refused once, at the build): the patch node captured for it
 * has nothing to write and is removed from the graph before it is instantiated. Kernels run: the
 * reference run's 12 a step, the two recorded steps' and the replays' 12 each, and no patch
 * kernel. */
static void refused_step(int s, CUdeviceptr *b, void *ctx)
{
    if (s == 1 && g_traced) fk.fail_next("cuGraphKernelNodeSetAttribute", CUDA_ERROR_NOT_SUPPORTED);
    for (int j = 0; j < 12; j++) OK(fk_addk_launch(&fk, NULL, b[j % 2], j == 5 ? s : j, N));
}

Test(tracer_replay_devpatch_off, a_patch_node_with_nothing_to_write_leaves_the_graph, .init = one_patch_setup)
{
    need_image();
    run_scenario(&(scenario_t){
        .name = "refused",
        .fn = refused_step,
        .steps = 20,
        .nbufs = 2,
        .info = {.state = IS(CGJ_STATE_REPLAY), .replays = IS(18), .side_exits = IS(0)},
        .stats = {.params_patched = IS(18), .params_patched_on_gpu = IS(0), .patch_launches = IS(0)},
        .fake = {.kernels_run = IS(20 * 12 + 2 * 12 + 18 * 12), .node_param_sets = IS(18), .device_updates = IS(0)}});
}
