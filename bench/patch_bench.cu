/*
 * cgjit-bench-patch — what patching a graph's kernel nodes costs, three ways, on the GPU at
 * hand: the measurements behind CGJIT_DEVICE_PATCH (docs/replay.md), for a GPU, driver or node
 * count other than the ones docs/figures.md reports.
 *
 * One graph of L chained kernels (default 180) whose two int parameters (a position and a KV
 * length) change every step, as a decode step's do. Each step patches every node, launches the
 * graph and waits for it; the same kernels run eagerly on a second pair of buffers, and the two
 * must end bitwise equal. The ways:
 *  - host: cuGraphExecKernelNodeSetParams per node (what cgjit does without the patch kernel);
 *  - kernel: a patch kernel launched before the graph on its stream, its parameter a block of
 *    (device node, offset, size, value) updates applied with cudaGraphKernelNodeUpdatesApply
 *    (what cgjit does with it; graphs/devpatch.cu is cgjit's own);
 *  - in-graph: the same patch kernel as the graph's first node, its block set by one
 *    cuGraphExecKernelNodeSetParams per step: one host call instead of a launch, correct only
 *    where the driver applies a node's device updates to its dependents in the same launch,
 *    which the bitwise check answers.
 * Prints, per way, the host time per node patched (median over steps), the synchronized step and
 * the step when the host does not wait (the GPU sets the pace), and whether the results equal
 * eager's; then whether a node keeps what the patch node wrote into it across a host update of
 * the graph that leaves it out (kept_check). Exit status 0 where the host and kernel ways (cgjit's) are identical, 1
 * otherwise, 77 without a GPU or without device-updatable nodes (a driver before CUDA 12.4). Built with -rdc against
 * the device runtime (cudadevrt).
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                            \
    do {                                                                                                    \
        cudaError_t e_ = (x);                                                                               \
        if (e_ != cudaSuccess) {                                                                            \
            fprintf(stderr, "cgjit-bench-patch: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                                        \
        }                                                                                                   \
    } while (0)

enum { N = 4096, BLOCK = 256, ENTRIES = 168, STEPS = 300, WARM = 20 };

__global__ void decode_op(float *out, const float *in, int pos, int kv)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = in[(i + pos) % N] * 0.5f + (float)(kv % 7) * 1e-3f;
}

struct entry {
    unsigned long long node, value;
    unsigned off, size;
};
struct block {
    unsigned n, pad;
    entry e[ENTRIES];
};

__global__ void patch(const __grid_constant__ block b)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b.n) return;
    unsigned long long v = b.e[i].value;
    alignas(cudaGraphKernelNodeUpdate) char room[sizeof(cudaGraphKernelNodeUpdate)];
    cudaGraphKernelNodeUpdate *u = reinterpret_cast<cudaGraphKernelNodeUpdate *>(room);
    u->node = (cudaGraphDeviceNode_t)b.e[i].node;
    u->field = cudaGraphKernelNodeFieldParam;
    u->updateData.param.pValue = &v;
    u->updateData.param.offset = b.e[i].off;
    u->updateData.param.size = b.e[i].size;
    if (cudaGraphKernelNodeUpdatesApply(u, 1) != cudaSuccess) __trap();
}

static double now_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

enum way { HOST, KERNEL, IN_GRAPH };
static const char *const way_name[] = {"host", "kernel", "in-graph"};

struct graph_set {
    cudaGraph_t graph; /* kept: SetParams names its nodes */
    cudaGraphExec_t exec;
    cudaGraphNode_t patch_node; /* IN_GRAPH */
    std::vector<cudaGraphNode_t> nodes;
    std::vector<cudaGraphDeviceNode_t> dev; /* KERNEL, IN_GRAPH */
};

static void node_params(cudaKernelNodeParams *kp, void **args)
{
    *kp = cudaKernelNodeParams{};
    kp->func = (void *)decode_op;
    kp->gridDim = dim3(N / BLOCK);
    kp->blockDim = dim3(BLOCK);
    kp->kernelParams = args;
}

static void patch_params(cudaKernelNodeParams *kp, void **args)
{
    *kp = cudaKernelNodeParams{};
    kp->func = (void *)patch;
    kp->gridDim = dim3((ENTRIES + 127) / 128);
    kp->blockDim = dim3(128);
    kp->kernelParams = args;
}

/* The graph of way w on buffers x: `nodes` chained kernels, after a patch node for IN_GRAPH. */
static graph_set build(way w, float **x, int nodes, cudaStream_t st)
{
    graph_set s;
    CHECK(cudaGraphCreate(&s.graph, 0));
    cudaGraphNode_t prev = nullptr;
    static block empty;
    if (w == IN_GRAPH) {
        void *args[] = {&empty};
        cudaKernelNodeParams kp;
        patch_params(&kp, args);
        CHECK(cudaGraphAddKernelNode(&s.patch_node, s.graph, nullptr, 0, &kp));
        prev = s.patch_node;
    }
    for (int k = 0; k < nodes; k++) {
        float *o = x[1 - k % 2], *in = x[k % 2];
        int pos = 0, kv = 1;
        void *args[] = {&o, &in, &pos, &kv};
        cudaKernelNodeParams kp;
        node_params(&kp, args);
        cudaGraphNode_t nd;
        CHECK(cudaGraphAddKernelNode(&nd, s.graph, prev ? &prev : nullptr, prev ? 1 : 0, &kp));
        if (w != HOST) {
            cudaLaunchAttributeValue v;
            memset(&v, 0, sizeof v);
            v.deviceUpdatableKernelNode.deviceUpdatable = 1;
            CHECK(cudaGraphKernelNodeSetAttribute(nd, cudaLaunchAttributeDeviceUpdatableKernelNode, &v));
            memset(&v, 0, sizeof v);
            CHECK(cudaGraphKernelNodeGetAttribute(nd, cudaLaunchAttributeDeviceUpdatableKernelNode, &v));
            s.dev.push_back(v.deviceUpdatableKernelNode.devNode);
        }
        s.nodes.push_back(nd);
        prev = nd;
    }
    CHECK(cudaGraphInstantiate(&s.exec, s.graph, 0));
    CHECK(cudaGraphUpload(s.exec, st));
    return s;
}

static size_t off_pos, off_kv;

/* Patch every node of s with step `step`'s values, the way w does. */
static void patch_step(way w, graph_set &s, int step, float **x, cudaStream_t st)
{
    int nodes = (int)s.nodes.size();
    if (w == HOST) {
        for (int k = 0; k < nodes; k++) {
            float *o = x[1 - k % 2], *in = x[k % 2];
            int pos = step + k, kv = step * 3 + k;
            void *args[] = {&o, &in, &pos, &kv};
            cudaKernelNodeParams kp;
            node_params(&kp, args);
            CHECK(cudaGraphExecKernelNodeSetParams(s.exec, s.nodes[k], &kp));
        }
        return;
    }
    static block b;
    b.n = 0;
    for (int k = 0; k < nodes; k++) {
        if (b.n + 2 > ENTRIES) { /* full: launched ahead of the graph (both ways) */
            patch<<<(ENTRIES + 127) / 128, 128, 0, st>>>(b);
            b.n = 0;
        }
        b.e[b.n++] = {(unsigned long long)s.dev[k], (unsigned long long)(unsigned)(step + k), (unsigned)off_pos, 4};
        b.e[b.n++] = {(unsigned long long)s.dev[k], (unsigned long long)(unsigned)(step * 3 + k), (unsigned)off_kv, 4};
    }
    if (w == KERNEL) {
        patch<<<(ENTRIES + 127) / 128, 128, 0, st>>>(b);
    } else {
        void *args[] = {&b};
        cudaKernelNodeParams kp;
        patch_params(&kp, args);
        CHECK(cudaGraphExecKernelNodeSetParams(s.exec, s.patch_node, &kp));
    }
}

/* Does a node keep what the patch node wrote into it once the host updates the graph? Odd steps
 * give the patch node every node's values, even steps node 0's only (one host update of the
 * patch node): nodes 1.. must then run with the values of the step before, as the eager twin
 * does. cgjit's replay does not rely on it (its block holds every node's values); the answer
 * says whether a block of the changed values alone would do on this driver. */
static bool kept_check(float **x, float **r, const std::vector<float> &init, int nodes, cudaStream_t st)
{
    nodes = std::min(nodes, ENTRIES / 2);
    CHECK(cudaMemcpy(x[0], init.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(r[0], init.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    graph_set s = build(IN_GRAPH, x, nodes, st);
    static block b;
    int held = 0; /* the step whose values nodes 1.. hold */
    for (int step = 1; step <= 40; step++) {
        bool all = step % 2 == 1;
        b.n = 0;
        for (int k = 0; k < (all ? nodes : 1); k++) {
            b.e[b.n++] = {(unsigned long long)s.dev[k], (unsigned long long)(unsigned)(step + k), (unsigned)off_pos, 4};
            b.e[b.n++] = {(unsigned long long)s.dev[k], (unsigned long long)(unsigned)(step * 3 + k), (unsigned)off_kv,
                          4};
        }
        void *args[] = {&b};
        cudaKernelNodeParams kp;
        patch_params(&kp, args);
        CHECK(cudaGraphExecKernelNodeSetParams(s.exec, s.patch_node, &kp));
        CHECK(cudaGraphLaunch(s.exec, st));
        if (all) held = step;
        for (int k = 0; k < nodes; k++) {
            int v = k == 0 ? step : held;
            decode_op<<<N / BLOCK, BLOCK, 0, st>>>(r[1 - k % 2], r[k % 2], v + k, v * 3 + k);
        }
    }
    std::vector<float> want(N), got(N);
    CHECK(cudaStreamSynchronize(st));
    CHECK(cudaMemcpy(want.data(), r[nodes % 2], N * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(got.data(), x[nodes % 2], N * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaGraphExecDestroy(s.exec));
    CHECK(cudaGraphDestroy(s.graph));
    return !memcmp(got.data(), want.data(), N * sizeof(float));
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 180;
    if (argc > 2 || nodes < 1 || nodes > 4096) {
        fprintf(stderr, "usage: cgjit-bench-patch [NODES] (1 to 4096, default 180)\n");
        return 2;
    }
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        printf("cgjit-bench-patch: skipped: no CUDA GPU\n");
        return 77;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    CHECK(cudaDriverGetVersion(&driver));
    if (driver < 12040) {
        printf("cgjit-bench-patch: skipped: driver %d has no device-updatable kernel nodes (12.4)\n", driver);
        return 77;
    }
    /* The parameters' offsets, from the driver (found through the runtime: no libcuda link). */
    __typeof__(cuFuncGetParamInfo) *param_info = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuFuncGetParamInfo", (void **)&param_info, 12040, cudaEnableDefault, &q));
    CUfunction fn;
    CHECK(cudaGetFuncBySymbol((cudaFunction_t *)&fn, (const void *)decode_op));
    size_t size;
    if (q != cudaDriverEntryPointSuccess || !param_info || param_info(fn, 2, &off_pos, &size) != CUDA_SUCCESS ||
        param_info(fn, 3, &off_kv, &size) != CUDA_SUCCESS) {
        fprintf(stderr, "cgjit-bench-patch: cuFuncGetParamInfo failed\n");
        return 1;
    }
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::vector<float> init(N), want(N), got(N);
    for (int i = 0; i < N; i++) init[i] = (float)(i % 97) * 0.01f;
    float *x[2], *r[2];
    for (int b = 0; b < 2; b++) {
        CHECK(cudaMalloc(&x[b], N * sizeof(float)));
        CHECK(cudaMalloc(&r[b], N * sizeof(float)));
    }
    /* Eager: the 2 * STEPS steps every way runs. */
    CHECK(cudaMemcpy(r[0], init.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    for (int step = 1; step <= 2 * STEPS; step++)
        for (int k = 0; k < nodes; k++)
            decode_op<<<N / BLOCK, BLOCK, 0, st>>>(r[1 - k % 2], r[k % 2], step + k, step * 3 + k);
    CHECK(cudaMemcpyAsync(want.data(), r[nodes % 2], N * sizeof(float), cudaMemcpyDeviceToHost, st));
    CHECK(cudaStreamSynchronize(st));
    printf("cgjit-bench-patch: %s, driver %d, %d chained kernels, two int parameters of each changing every step, "
           "%d steps synchronized then %d not\n",
           prop.name, driver, nodes, STEPS, STEPS);
    printf("  %-9s %14s %14s %16s  %s\n", "way", "host ns/node", "step us (sync)", "step us (no sync)", "results");
    int failed = 0;
    for (int w = HOST; w <= IN_GRAPH; w++) {
        CHECK(cudaMemcpy(x[0], init.data(), N * sizeof(float), cudaMemcpyHostToDevice));
        graph_set s = build((way)w, x, nodes, st);
        std::vector<double> host, step_us;
        for (int step = 1; step <= STEPS; step++) {
            double t0 = now_ns();
            patch_step((way)w, s, step, x, st);
            double t1 = now_ns();
            CHECK(cudaGraphLaunch(s.exec, st));
            CHECK(cudaStreamSynchronize(st));
            if (step > WARM) host.push_back((t1 - t0) / nodes), step_us.push_back((now_ns() - t0) / 1e3);
        }
        double t0 = now_ns();
        for (int step = STEPS + 1; step <= 2 * STEPS; step++) {
            patch_step((way)w, s, step, x, st);
            CHECK(cudaGraphLaunch(s.exec, st));
        }
        CHECK(cudaStreamSynchronize(st));
        double pipelined = (now_ns() - t0) / 1e3 / STEPS;
        CHECK(cudaMemcpy(got.data(), x[nodes % 2], N * sizeof(float), cudaMemcpyDeviceToHost));
        bool same = !memcmp(got.data(), want.data(), N * sizeof(float));
        failed |= !same && w != IN_GRAPH; /* in-graph: what the driver does, not what cgjit does */
        printf("  %-9s %14.1f %14.1f %16.1f  %s\n", way_name[w], median(host), median(step_us), pipelined,
               same            ? "identical to eager"
               : w == IN_GRAPH ? "DIFFERENT from eager: this driver does not apply a node's device updates "
                                 "to its dependents in the same launch"
                               : "DIFFERENT from eager");
        CHECK(cudaGraphExecDestroy(s.exec));
        CHECK(cudaGraphDestroy(s.graph));
    }
    printf("  kept: a node keeps what the patch node wrote once the host sets the patch node again without it: %s\n",
           kept_check(x, r, init, nodes, st) ? "yes (identical to eager)" : "NO (different from eager)");
    return failed;
}
