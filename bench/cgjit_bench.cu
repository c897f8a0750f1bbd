/*
 * cgjit_bench.cu — the harness that runs each workload eager, replayed by cgjit, and as a
 * hand-built CUDA graph, in one process, once per cgjit mode, and reports per-step times.
 * (Here: the options, chain and temps, main. A model's or elementwise workload's row is run by
 * bench_models.cu; the tables and the JSON are written by bench_output.cu; the modes and their
 * check are bench_modes.c; the rows' types are bench_run.h.)
 *
 * Workload `chain` (--workload chain|all; sizes default 10,100,1000): N small dependent kernels
 * per step, x[i] = a*x[i] + b over 4096 floats. Each kernel costs the GPU about as much as its
 * launch costs the host, so the step time is launch overhead: exactly what replaying a step as
 * one graph is meant to remove. In modes default and max-autotune cgjit fuses the N kernels into
 * one generated kernel (axpb is registered as elementwise), so replay can go below the floor.
 *
 * Workload `temps` (--workload temps|all; sizes default 10,100): a naive program's step with
 * temporaries, N "layers" over the same 4096 floats x. Layer k (0..N-1): cudaMalloc a
 * temporary t_k of 4096 + 1024*(k%4) floats; a kernel writes all of t_k from x
 * (t[i] = 0.5*x[i % 4096] + c_k); a kernel updates x from t_k (x = 0.999*x + 0.001*t); cudaFree
 * the temporary of layer k-2 (so three temporaries are live when t_k is allocated, two after
 * the free). After the loop the last two are freed. cudaMalloc/cudaFree are the synchronous
 * ones, as a naive program uses them: eager, every cudaFree waits for the device. In replay,
 * cgjit serves them from its planned pool (no driver call, no synchronization). Its kernels are
 * registered as elementwise, but cgjit leaves them unfused (see register_kernels): the rows of
 * the fusing modes say why in a note line.
 *
 * Workloads `mlp`, `cnn`, `gpt2` (--workload mlp|cnn|gpt2|all; the models, run after chain and
 * temps): real forward passes written in plain CUDA C++ with cuBLAS and cuDNN, fp32 without
 * TF32, fixed-seed random weights and input, handles created once and bound to the stream, every
 * buffer and workspace allocated once before timing (nothing is allocated inside a step). Each
 * file's top comment gives the exact math:
 *  - mlp (workloads_mlp.cu): Linear(1024,1024)-ReLU-Linear(1024,1024)-ReLU-Linear(1024,10),
 *    batch 128: cublasSgemm_v2, cudnnAddTensor (bias), cudnnActivationForward (ReLU); 8 calls.
 *  - cnn (workloads_cnn.cu): batch 1, input 3x64x64, four blocks of conv3x3 pad 1 (IMPLICIT_GEMM,
 *    CUDNN_FMA_MATH) + bias (cudnnAddTensor) + ReLU + 2x2 max pooling, channels 3-32-64-64-128,
 *    output 128x4x4; 16 calls.
 *  - gpt2 (workloads_gpt2.cu): 12 GPT-2-small-shaped layers, d 768, 12 heads, T 64, batch 1:
 *    own layernorm, bias, causal softmax, GELU and residual kernels, cuBLAS SGEMM and strided
 *    batched SGEMM; 193 calls. Its bias, GELU and residual kernels are registered as
 *    elementwise: in modes default and max-autotune cgjit fuses 3 chains of 2 per layer.
 * Needs cuDNN for mlp and cnn: where CMake did not find it they are not built, and the bench
 * says so when asked to run them (gpt2 needs cuBLAS only); --workload all skips them, and
 * --workload mlp or cnn exits with status 1. mlp and cnn register nothing: their bias
 * (cudnnAddTensor) and activation (cudnnActivationForward) are library calls cgjit describes as
 * elementwise itself, so the fusing modes may fuse each bias + ReLU pair into one generated
 * kernel (mlp: 2 pairs, cnn: 4).
 *
 * Workload `elementwise` (--workload elementwise|ew16M|ew10|all; run after the models;
 * workloads_elementwise.cu gives the exact math): steps of registered elementwise kernels only,
 * through temporaries the step allocates and frees itself (cudaMallocAsync / cudaFreeAsync):
 *  - ew16M: relu(2x + 1) over 16M floats, 2 kernels through one temporary; fused, the temporary
 *    is never written (128 MB of traffic per step instead of 256 MB).
 *  - ew10: a chain of 10 different kernels (scale, bias, multiply, tanh, sigmoid, GELU, add,
 *    ReLU, residual, scale-shift) over 1M floats through 3 temporaries.
 * They run through the models' machinery (model_desc_t): their floor is a stream capture of the
 * unfused kernels on temporaries preallocated in the floor's set.
 *
 * cgjit modes (--modes LIST, default reduce-overhead,default,max-autotune; bench_modes.h): every
 * workload (and size) runs once per mode, side by side in this process: a row per mode. Before a
 * row's first step the bench calls cgj_mode_set(mode), and the row's anchor carries the mode
 * ("chain1000@default", "gpt2@reduce-overhead"), so each mode's traces are built in that mode.
 * Each row measures its own eager and floor times alongside its replay, round by round, as
 * below: the modes do not share a row. The elementwise kernels of the workloads that run are
 * registered (cgj_op_register_elementwise, under the names cudaFuncGetName gives) once at start,
 * before any step; reduce-overhead ignores them. Three modes make the default run about three
 * times as long as one (the rounds per row are not reduced; each row is as it was), plus
 * compiling the fused kernels (NVRTC, cached in memory and on disk) once per distinct chain.
 *
 * Ways of running a step, all on one created non-blocking stream:
 *  - eager:  the step's calls, plain.
 *  - replay: the same calls between cgj_trace_begin("chain<N>@<mode>" / "temps<N>@<mode>" /
 *            "<workload>@<mode>") and cgj_trace_end().
 *  - floor:  a CUDA graph of the same kernels, captured by hand: what replay can at best reach
 *            without fusion (in a fusing mode replay may go below it).
 *            For temps, the kernels run on three preallocated temporaries of the largest size
 *            (layer k uses buffer k%3, the same rotation of live blocks): no allocations.
 *            For the models, a stream capture of the eager step itself, library calls included,
 *            taken after one eager step (the libraries' lazy set-up is done by then); where the
 *            capture fails, the floor columns say n/a and a note gives the reason.
 * Each model (and elementwise workload) computes each way into its own set of activations
 * (weights, input and library workspaces are shared), so that none can borrow another's results;
 * it is created afresh for each cgjit mode.
 *
 * Timing: R rounds of S steps per way of running; a round is timed on the host from its first
 * launch to a cudaStreamSynchronize after its S-th step; per-step time = round time / S; the
 * median over rounds is reported. Eager, replay and floor are interleaved round by round so that
 * clock and thermal drift affect all of them alike. Replay rounds also time the host from just
 * before cgj_trace_begin to just before cgj_trace_end, divided by the step's CUDA calls: cgjit's
 * host cost per absorbed call (chain: N launches, "host_ns/launch", and "drv_ns/launch": the
 * same step with each launch made by cuLaunchKernel rather than <<<>>>, anchor
 * "chain<N>-drv@<mode>", R more rounds of S replayed steps, so what the CUDA runtime's launch
 * adds is the difference; temps: 2N launches + N
 * cudaMalloc + N cudaFree, "host_ns/call"). For the models, the divisor is the driver calls in the
 * replayed trace, the `ops` of cgj_trace_info after the timed rounds ("host_ns/op": what the
 * library's host work and cgjit together cost per absorbed driver call), and also the calls the
 * program makes (library calls and kernel launches, "host_ns/call"). For the elementwise
 * workloads, "host_ns/call" divides by the kernel launches, allocations and frees of a step.
 *
 * GPU-busy floor (busy.c, cupti_busy.c): after a row's timed rounds and checks, 3 windows
 * of S replayed steps each run with CUPTI's activity API recording every kernel, copy and
 * memset; the union of their intervals over S is the time the GPU was busy per step, the
 * physical floor below which no way of launching the step can go (the hand-built graph's floor
 * still pays the GPU's scheduling of each node). "busy_us" is the median over the windows and
 * "replay/busy" sits beside replay/floor. CUPTI is attached only for those windows and detached
 * again (cuptiFinalize) before the next row's timed rounds; a window counts only if every
 * step in it was replayed. Where CUPTI cannot be used (missing, or refused under
 * compute-sanitizer or another profiler) one line says so and the tables leave the two columns
 * out; the JSON has null there. In a fusing mode it is the busy time of the fused kernels.
 *
 * No GPU: one line on stderr, `cgjit-bench: no CUDA GPU found: <why>`, and exit status 77.
 *
 * Correctness (bench_modes.h): from the same random initial x, K steps eager into one buffer
 * and K steps replayed into another must agree as the row's mode promises: in reduce-overhead
 * bitwise (memcmp); in default and max-autotune every element within 1e-6 + 1e-5 |eager| (where
 * the trace made GEMMs cuBLASLt matmuls: within 1e-6 + 1e-4 max |eager|, normwise), and
 * bitwise where the trace fused no chain (cgj_trace_info's fused_chains). The column `vs_eager`
 * says "bitwise", or "tol X" where X (<= 1 to pass) is the share of that tolerance the worst
 * element used; the column `fused` gives the trace's fused chains / the kernels and library calls
 * they hold ("-" in reduce-overhead), and a note line follows a table for each row whose trace left
 * chains or registered kernels unfused (how many, the last one's FUSE_* reason and its hint).
 * The K replayed steps must actually have been replayed. Exit status 1 on any failed check,
 * where replay never happened, or where cgjit refused a registration of the bench's own.
 * For temps the table also gives the pool figures of cgj_trace_info after the run: in-step
 * allocations, planned pool bytes, naive bytes (sum of sizes), lower bound (most bytes live at
 * once) and planned/lower. For the models and the elementwise workloads: every set's activations
 * are poisoned (bytes 0xff, NaN), then K steps eager, K replayed and K floor launches each into
 * its own set; the replayed output must agree with the eager one as above, the floor's must be
 * bitwise equal to it in every mode (the same kernels run), the eager output must be finite, and
 * the K replayed steps must have been replayed. --reference also computes each model (and
 * elementwise workload) on the host in double from the same weights and input and requires
 * max |eager - reference| <= 1e-3 * max |reference|.
 *
 * --compare FILE adds PyTorch's times to the models' and the elementwise tables: FILE is what
 * bench/torch_compare.py writes, {"gpu": "...", "torch": "2.x", "results": {"mlp": {"eager_us": x,
 * "compile_us": y, "reduce_overhead_us": z}, "cnn": {...}, "gpt2": {...}, "ew16M": {...},
 * "ew10": {...}}}, any value possibly null (read by torch_compare.c). The columns torch_eager_us,
 * torch_compile_us, torch_reduce_overhead_us and replay/reduce_overhead (replay_us /
 * torch_reduce_overhead_us), and in the elementwise table also replay/compile (replay_us /
 * torch_compile_us), say n/a where FILE is missing, unreadable or has no such value; every mode's
 * row of a workload shows the same torch figures. Under each table a note line says why where
 * they are n/a, another one shows FILE's own top-level "note" where it has one, and another one
 * when FILE's "gpu" is not this GPU's name.
 *
 * Output: per row one "warm-up" line as it runs (in a fusing mode ending with what fusion cost
 * and did), then the tables. Every table has one row per workload (and N) and mode, the modes of
 * one workload together, with `mode` as its second column and `fused`, `vs_eager` before
 * `check`; the elementwise table's columns are workload, mode, eager_us, replay_us, floor_us,
 * eager/replay, replay/floor, [busy_us, replay/busy,] host_ns/call, calls, [torch_eager_us,
 * torch_compile_us, torch_reduce_overhead_us, replay/reduce_overhead, replay/compile,] fused,
 * vs_eager, check. A line "fusion: ..." (cgj_stats' fusions, ops_fused, fusions_dropped over the
 * run) follows where a fusing mode ran, then "bench: PASS" or "bench: FAIL".
 *
 * JSON (--json FILE). The top-level keys of the chain-only bench are kept, with the same
 * meaning: "workload" is "chain" and "floats" / "results" are chain's ("results" is [] when
 * chain was not run). Every result row (chain, temps, models, elementwise) has, besides the keys
 * below, "mode", "anchor" (the row's trace anchor), "bitwise" (replay equal to eager byte for
 * byte), "tolerance_used" (0 when bitwise, null for a NaN or infinity mismatch), "fused_chains",
 * "fused_ops", "fuse_drops", "fuse_reason" (the FUSE_* code of the last chain left unfused, null
 * when none), "fuse_ms" (compiling and validating the fused kernels at build), "fuse_compile_ms"
 * (of which generating, compiling or finding in a cache, and loading) and "fuse_cold" (kernels
 * NVRTC compiled, in no cache yet), from cgj_trace_info after the row's checked steps. Rows come in the order of
 * --modes for each size. temps has the parallel object "temps", always present:
 *   {
 *     "gpu": "...", "compute_capability": "9.0", "driver_version": 13000, "runtime_version": 13000,
 *     "workload": "chain", "floats": 4096, "rounds": 31, "steps": 20, "check_steps": 50,
 *     "modes": ["reduce-overhead", "default", "max-autotune"], "tolerance": {"rel": 1e-05, "abs": 1e-06},
 *     "results": [ {"n", "eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                   "replay_over_floor", "host_ns_per_launch", "host_ns_per_launch_driver"
 *                   (null where n/a), "state", "replays_checked",
 *                   "check", "gpu_busy_us", "replay_over_gpu_busy", <mode keys>}, ... ],
 *     "workloads_run": ["chain", "temps"],
 *     "temps": {
 *       "workload": "temps", "floats": 4096, "temp_floats": "4096 + 1024*(k%4)",
 *       "results": [ {"n", "eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                     "replay_over_floor", "host_ns_per_call", "state", "replays_checked",
 *                     "check", "ops", "allocations", "pool_bytes", "naive_bytes",
 *                     "lower_bound", "planned_over_lower", "pool_allocs_checked",
 *                     "pool_frees_checked", "gpu_busy_us", "replay_over_gpu_busy",
 *                     <mode keys>}, ... ]    ([] when temps was not run)
 *     },
 *     "pass": true
 *   }
 * "ops" and the pool figures are cgj_trace_info's after the run; "pool_allocs_checked" /
 * "pool_frees_checked" are the growth of cgj_stats' pool_allocs / pool_frees over the K checked
 * replayed steps (N each per replayed step when every in-step allocation came from the pool).
 * "workloads_run" also names the models that ran, and "elementwise" where one of its workloads
 * ran. Each model has a parallel object, always present, between "temps" and "pass" (here mlp;
 * cnn and gpt2 alike), then the elementwise object, and the compare file's summary follows them:
 *     "mlp": {
 *       "workload": "mlp", "built": true, "description": "...",
 *       "results": [ {"workload", "eager_us", "replay_us", "floor_us", "eager_over_replay",
 *                     "replay_over_floor", "host_ns_per_op", "ops", "host_ns_per_call",
 *                     "eager_host_ns_per_call", "saved_host_ns_per_call", "lib_absorbed_per_step", "calls",
 *                     "kernels", "segments", "varying_slots", "state", "timed_replays",
 *                     "replays_checked", "check", "floor", "floor_check", "reference_rel_err",
 *                     "torch_eager_us", "torch_compile_us", "torch_reduce_overhead_us",
 *                     "replay_over_reduce_overhead", "replay_over_compile", "gpu_busy_us",
 *                     "replay_over_gpu_busy", <mode keys>}, ... ]
 *                                                        (one row per mode; [] when not run)
 *     },
 *     "cnn": {...}, "gpt2": {...},
 *     "elementwise": {
 *       "workload": "elementwise", "description": {"ew16M": "...", "ew10": "..."},
 *       "results": [ {"workload": "ew16M", <the models' row keys>}, ..., {"workload": "ew10", ...} ]
 *                                                        (one row per workload and mode; [] when not run)
 *     },
 *     "torch_compare": {"file", "loaded", "torch", "gpu", "note", "elementwise_note"},
 *     "gpu_busy": {"method", "available", "note"},
 *     "fusion": {"fusions", "ops_fused", "fusions_dropped", "registrations_refused"},
 * "built" is false where the model was not compiled in (no cuDNN). "floor_us",
 * "replay_over_floor" and "floor_check" ("equal" / "differs") are null when the floor is n/a,
 * and "floor" is then "n/a: <reason>" instead of "captured"; "host_ns_per_op" is null when the
 * trace has no ops; "reference_rel_err" is null without --reference; the torch values,
 * "replay_over_reduce_overhead" and "replay_over_compile" are null where the compare file gave
 * none. "ops", "kernels", "segments", "varying_slots" are cgj_trace_info's of the replayed trace
 * ("kernels" counts a fused chain's kernels one by one); "timed_replays" counts the timed steps
 * (rounds x steps) that were replayed from start to end. "torch_compare": the --compare path
 * (null without it), whether it was read, its "torch" and "gpu" strings, and why columns are n/a
 * (null when none are; "elementwise_note" for the elementwise workloads' columns). "gpu_busy_us"
 * and "replay_over_gpu_busy" are null where the busy figure is n/a; "gpu_busy" says how it is
 * measured, whether CUPTI could be used, and why not (its "note", null when it could).
 * "fusion": cgj_stats' counters at the end of the run, and the registrations cgjit refused.
 * "pass" covers every workload and mode run.
 */
#include <cuda_runtime.h>

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "bench_run.h"
#include "busy.h"
#include "cgjit.h"
#include "torch_compare.h"


/* Contracting slowly towards b / (1 - a) = 10: values stay finite for any number of steps,
 * and 50 checked steps of 1000 kernels (0.9999^50000 ~ 0.007) still carry the initial data. */
static const float CHAIN_A = 0.9999f;
static const float CHAIN_B = 0.001f;

__global__ void axpb(float *x, float a, float b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + b;
}

/* temps: x = 0.999*x + 0.001*(0.5*x + c_k) = 0.9995*x + 0.001*c_k per layer, contracting towards
 * 2*c_k: 50 checked steps of 100 layers (0.9995^5000 ~ 0.08) still carry the initial data. */
static const float TEMPS_HALF = 0.5f;
static const float TEMPS_KEEP = 0.999f;
static const float TEMPS_MIX = 0.001f;

/* t[i] = 0.5*x[i % n] + c for every i < m: the whole temporary is written before it is read. */
__global__ void temps_fill(float *t, const float *x, float half, float c, int m, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) t[i] = half * x[i % n] + c;
}

/* x[i] = keep*x[i] + mix*t[i] for i < n (n <= the temporary's size). */
__global__ void temps_update(float *x, const float *t, float keep, float mix, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = keep * x[i] + mix * t[i];
}

/* chain's and temps' kernels as elementwise (bench_common.h), for modes default and max-autotune:
 * chain's N axpb launches on one x become one generated kernel. temps_fill reads x at a broadcast
 * index (t[i] = half * x[i % n] + c for i < m, m >= n), which the spec language expresses
 * (`in float x[i % n]`), so both temps kernels are registered. They stay unfused all the same, as
 * fusion/ stands: a chain has one element count, so a temps_fill of m != n elements stands alone
 * between temps_updates of n, and where m == n (every fourth layer) the chain around it both
 * writes x (temps_update) and reads it broadcast (temps_fill), which fusion declines
 * (FUSE_ALIAS). temps replays the kernels eager ran in every mode; the rows of the fusing modes
 * say why (a note line, the JSON's fuse_drops and fuse_reason). Returns the registrations cgjit
 * refused. */
static int register_kernels(void)
{
    int refused = 0;
    refused += bench_register_elementwise((const void *)axpb, "axpb",
                                          "(inout float x, float a, float b, count int n): x = a * x + b") != 0;
    refused += bench_register_elementwise((const void *)temps_fill, "temps_fill",
                                          "(out float t, in float x[i % n], float half, float c, count int m, int n): "
                                          "t = half * x + c") != 0;
    refused += bench_register_elementwise(
                   (const void *)temps_update, "temps_update",
                   "(inout float x, in float t, float keep, float mix, count int n): x = keep * x + mix * t") != 0;
    return refused;
}

/* ---- options ---------------------------------------------------------------------------- */

const char *const WL_NAMES[WL_COUNT] = {"chain", "temps"};
const char *const MD_NAMES[MD_COUNT] = {"mlp", "cnn", "gpt2", "ew16M", "ew10"};

const model_desc_t *model_of(int m)
{
    switch (m) {
#ifdef CGJ_BENCH_CUDNN
    case MD_MLP: return &model_mlp;
    case MD_CNN: return &model_cnn;
#endif
    case MD_GPT2: return &model_gpt2;
    case MD_EW16M: return &model_ew16M;
    case MD_EW10: return &model_ew10;
    }
    return NULL;
}

/* The sizes a workload runs: --sizes where given, else its defaults. */
static int workload_sizes(const options_t *o, int wl, const int **sizes)
{
    static const int chain_default[] = {10, 100, 1000};
    static const int temps_default[] = {10, 100};
    if (o->sizes_given) {
        *sizes = o->sizes;
        return o->nsizes;
    }
    if (wl == WL_CHAIN) {
        *sizes = chain_default;
        return (int)(sizeof chain_default / sizeof chain_default[0]);
    }
    *sizes = temps_default;
    return (int)(sizeof temps_default / sizeof temps_default[0]);
}

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "usage: %s [--workload chain|temps|mlp|cnn|gpt2|elementwise|all] [--modes LIST]\n"
            "          [--rounds R] [--steps S] [--sizes N1,N2,...] [--json FILE] [--compare FILE]\n"
            "          [--reference] [--help] [--version]\n"
            "Runs each workload eager, replayed by cgjit, and as a hand-built CUDA graph (floor),\n"
            "once per cgjit mode, and reports the median per-step time over R rounds of S steps.\n"
            "  chain: N dependent kernels x = a*x + b over %d floats per step.\n"
            "  temps: N layers per step over %d floats; layer k cudaMallocs a temporary of\n"
            "         %d + 1024*(k%%4) floats, runs 2 kernels, and cudaFrees the temporary of layer k-2.\n"
            "  mlp:   Linear(1024,1024)-ReLU-Linear(1024,1024)-ReLU-Linear(1024,10), batch 128\n"
            "         (cuBLAS SGEMM, cuDNN bias and ReLU).\n"
            "  cnn:   4 x [conv3x3 + bias + ReLU + maxpool 2x2], channels 3-32-64-64-128, input\n"
            "         1x3x64x64 (cuDNN).\n"
            "  gpt2:  12-layer GPT-2-small-shaped transformer forward, d 768, 12 heads, T 64, batch 1\n"
            "         (cuBLAS GEMMs, own layernorm/softmax/GELU/bias/residual kernels).\n"
            "         The models are fp32 without TF32; their floor is a stream capture of the\n"
            "         eager step (n/a where the capture fails).\n"
            "  elementwise: ew16M: relu(2x + 1) over 16M floats through an in-step temporary;\n"
            "         ew10: 10 different elementwise kernels over 1M floats through 3 in-step\n"
            "         temporaries (cudaMallocAsync/cudaFreeAsync); cgjit fuses each in mode default.\n"
            "  --workload W    chain, temps, mlp, cnn, gpt2, elementwise (ew16M and ew10; or one of\n"
            "                  them) or all (default all)\n"
            "  --modes LIST    cgjit modes, comma-separated, each workload run once per mode under\n"
            "                  anchors of its own (default reduce-overhead,default,max-autotune):\n"
            "                  reduce-overhead replays the same kernels (bitwise equal to eager);\n"
            "                  default and max-autotune also fuse registered elementwise kernels\n"
            "                  (within 1e-6 + 1e-5 |eager| per element; bitwise where none fused)\n"
            "  --rounds R      rounds of eager, replay and floor per row (default 31)\n"
            "  --steps S       steps per round (default 20)\n"
            "  --sizes LIST    N per step, comma-separated, for chain and temps (default:\n"
            "                  chain 10,100,1000; temps 10,100; at most %d)\n"
            "  --json FILE     also write the results as JSON to FILE\n"
            "  --compare FILE  add PyTorch's times from FILE (written by bench/torch_compare.py)\n"
            "                  to the mlp/cnn/gpt2 and elementwise tables; n/a where FILE is\n"
            "                  missing or unreadable\n"
            "  --reference     also check each model's eager output against a host computation\n"
            "                  in double (relative error <= 1e-3 of the largest output; gpt2 takes\n"
            "                  some seconds)\n"
            "  --version       print the version of cgjit (cgjit.h) and exit\n"
            "Exit status: 0 all checks passed, 1 a check or a CUDA call failed (or the workload\n"
            "named by --workload was not built), 2 bad options, 77 no CUDA GPU (one line says why).\n",
            argv0, NFLOAT, NFLOAT, NFLOAT, MAX_SIZES);
}

/* A whole-string decimal integer in [lo, hi], or -1. */
static long parse_int(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    return v;
}

static int parse_sizes(const char *s, options_t *o)
{
    char buf[256];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    o->nsizes = 0;
    for (char *rest = buf, *tok; (tok = strsep(&rest, ",")) != NULL;) { /* empty items are errors */
        long v = parse_int(tok, 1, MAX_KERNELS);
        if (v < 0 || o->nsizes == MAX_SIZES) return -1;
        o->sizes[o->nsizes++] = (int)v;
    }
    return o->nsizes > 0 ? 0 : -1;
}

static void parse_options(int argc, char **argv, options_t *o)
{
    o->rounds = 31;
    o->steps = 20;
    o->nsizes = 0;
    o->sizes_given = 0;
    for (int w = 0; w < WL_COUNT; w++) o->run[w] = 1;
    for (int m = 0; m < MD_COUNT; m++) o->run_model[m] = 1;
    o->named = 0;
    o->nmodes = BM_COUNT;
    for (int m = 0; m < BM_COUNT; m++) o->modes[m] = m;
    o->json = NULL;
    o->compare = NULL;
    o->reference = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            exit(0);
        }
        if (!strcmp(a, "--version")) {
            printf("cgjit-bench %s\n", CGJ_VERSION_STRING);
            exit(0);
        }
        if (!strcmp(a, "--reference")) {
            o->reference = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = v != NULL;
        if (ok && !strcmp(a, "--rounds")) ok = (o->rounds = (int)parse_int(v, 1, 100000)) > 0;
        else if (ok && !strcmp(a, "--steps")) ok = (o->steps = (int)parse_int(v, 1, 100000)) > 0;
        else if (ok && !strcmp(a, "--sizes")) ok = (o->sizes_given = parse_sizes(v, o) == 0);
        else if (ok && !strcmp(a, "--workload")) {
            int all = !strcmp(v, "all");
            ok = all;
            o->named = !all;
            for (int w = 0; w < WL_COUNT; w++) {
                o->run[w] = all || !strcmp(v, WL_NAMES[w]);
                ok |= o->run[w];
            }
            for (int m = 0; m < MD_COUNT; m++) {
                o->run_model[m] = all || !strcmp(v, MD_NAMES[m]) || (m >= MD_MODELS && !strcmp(v, "elementwise"));
                ok |= o->run_model[m];
            }
        } else if (ok && !strcmp(a, "--modes")) ok = bench_modes_parse(v, o->modes, &o->nmodes) == 0;
        else if (ok && !strcmp(a, "--json")) ok = (o->json = v)[0] != '\0';
        else if (ok && !strcmp(a, "--compare")) ok = (o->compare = v)[0] != '\0';
        else ok = 0;
        if (!ok) {
            fprintf(stderr, "%s: bad option or value: %s%s%s\n", argv[0], a, v ? " " : "", v ? v : "");
            usage(stderr, argv[0]);
            exit(2);
        }
        i++;
    }
}

/* ---- the workload ----------------------------------------------------------------------- */

static void chain(float *x, int n, cudaStream_t s)
{
    for (int k = 0; k < n; k++) axpb<<<GRID, BLOCK, 0, s>>>(x, CHAIN_A, CHAIN_B, NFLOAT);
}

/* temps: layer k's temporary size (floats) and constant. */
static int temp_floats(int k)
{
    return NFLOAT + 1024 * (k % 4);
}
static float temp_c(int k)
{
    return 0.25f * (float)(k % 8) - 1.0f;
}

/* Layer k's two kernels on the temporary t. */
static void temps_layer(float *x, float *t, int k, cudaStream_t s)
{
    temps_fill<<<GRID, BLOCK, 0, s>>>(t, x, TEMPS_HALF, temp_c(k), temp_floats(k), NFLOAT);
    temps_update<<<GRID, BLOCK, 0, s>>>(x, t, TEMPS_KEEP, TEMPS_MIX, NFLOAT);
}

/* One step of N layers, each with its own cudaMalloc'd temporary; t_k is held in slot k%3. */
static void temps(float *x, int n, cudaStream_t s)
{
    float *t[TEMPS_LIVE] = {NULL, NULL, NULL};
    for (int k = 0; k < n; k++) {
        CHECK(cudaMalloc((void **)&t[k % TEMPS_LIVE], (size_t)temp_floats(k) * sizeof(float)));
        temps_layer(x, t[k % TEMPS_LIVE], k, s);
        if (k >= 2) CHECK(cudaFree(t[(k - 2) % TEMPS_LIVE]));
    }
    for (int k = n >= 2 ? n - 2 : 0; k < n; k++) CHECK(cudaFree(t[k % TEMPS_LIVE]));
}

/* The floor's temps step: the same kernels on preallocated temporaries, layer k on tf[k%3]. */
static void temps_prealloc(float *x, float *const *tf, int n, cudaStream_t s)
{
    for (int k = 0; k < n; k++) temps_layer(x, tf[k % TEMPS_LIVE], k, s);
}

/* The step's work on x, as the program issues it. */
static void step_work(const size_run_t *r, float *x, cudaStream_t s)
{
    if (r->wl == WL_CHAIN) chain(x, r->n, s);
    else temps(x, r->n, s);
}

static void step_eager(size_run_t *r, float *x, cudaStream_t s)
{
    step_work(r, x, s);
}

/* One replayed step; returns the host seconds from before begin to before end. */
static double step_replay(size_run_t *r, float *x, cudaStream_t s)
{
    double t0 = now_s();
    CGJ_CHECK(cgj_trace_begin(r->name));
    step_work(r, x, s);
    double t1 = now_s();
    CGJ_CHECK(cgj_trace_end());
    return t1 - t0;
}

static void build_floor(size_run_t *r, cudaStream_t s)
{
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (r->wl == WL_CHAIN) chain(r->xf, r->n, s);
    else temps_prealloc(r->xf, r->tf, r->n, s);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&r->floor, g, 0));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphUpload(r->floor, s));
}

/* What the JIT costs before it pays: the first three traced runs (two recorded, one built and
 * replayed), each to the end of its GPU work, against a warm eager step; and cgjit's own
 * figures of the anchor's warm-up (cgj_trace_info). Printed as one "warm-up" line. */
static void warm_up_cost(size_run_t *r, cudaStream_t s)
{
    step_eager(r, r->xe, s); /* modules loaded */
    CHECK(cudaStreamSynchronize(s));
    double t0 = now_s();
    step_eager(r, r->xe, s);
    CHECK(cudaStreamSynchronize(s));
    double eager = now_s() - t0, run[3], extra = 0;
    for (int k = 0; k < 3; k++) {
        t0 = now_s();
        step_replay(r, r->xr, s);
        CHECK(cudaStreamSynchronize(s));
        run[k] = now_s() - t0;
        extra += run[k] - eager;
    }
    cgj_trace_info_t i;
    CGJ_CHECK(cgj_trace_info(r->name, &i));
    printf("warm-up %s: eager step %.2f ms; traced runs 1-3: %.2f, %.2f, %.2f ms; JIT cost %.2f ms over eager "
           "(%.2f ms per 1000 calls); recording %.2f us per call, plan %.3f ms, graphs %.2f ms (instantiate %.2f ms); "
           "first replay at run %llu",
           r->name, eager * 1e3, run[0] * 1e3, run[1] * 1e3, run[2] * 1e3, extra * 1e3, extra * 1e6 / r->calls,
           i.recorded_ops ? (double)i.record_ns / (double)i.recorded_ops / 1e3 : 0.0, (double)i.plan_ns / 1e6,
           (double)i.build_ns / 1e6, (double)i.instantiate_ns / 1e6, (unsigned long long)i.first_replay_run);
    if (bench_mode_fuses(r->mode)) /* compiling (NVRTC or the cache) and validating the fused kernels */
        printf("; fusion %.2f ms (compiling %.2f ms, %u NVRTC compiles; %u chains of %u kernels fused, %u left "
               "unfused)",
               (double)i.fuse_ns / 1e6, (double)i.fuse_compile_ns / 1e6, i.fuse_cold, i.fused_chains, i.fused_ops,
               i.fuse_drops);
    printf("\n");
    fflush(stdout);
}

/* Row (wl, n) in cgjit mode `mode`: the mode is set here, before the row's first traced step, and
 * stays set until the row is done (bench_modes.h). */
static void setup(size_run_t *r, int wl, int n, int mode, const options_t *o, const float *init, cudaStream_t s)
{
    memset(r, 0, sizeof *r);
    r->wl = wl;
    r->n = n;
    r->mode = mode;
    r->calls = wl == WL_CHAIN ? n : 4 * n;
    char base[32];
    snprintf(base, sizeof base, "%s%d", WL_NAMES[wl], n);
    bench_anchor_name(r->name, sizeof r->name, base, mode);
    bench_mode_enter(mode);
    size_t bytes = NFLOAT * sizeof(float);
    CHECK(cudaMalloc((void **)&r->xe, bytes));
    CHECK(cudaMalloc((void **)&r->xr, bytes));
    CHECK(cudaMalloc((void **)&r->xf, bytes));
    if (wl == WL_TEMPS)
        for (int i = 0; i < TEMPS_LIVE; i++) CHECK(cudaMalloc((void **)&r->tf[i], TEMPS_MAX_FLOATS * sizeof(float)));
    CHECK(cudaMemcpy(r->xe, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(r->xr, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(r->xf, init, bytes, cudaMemcpyHostToDevice));
    r->t_eager = (double *)calloc(o->rounds, sizeof(double));
    r->t_replay = (double *)calloc(o->rounds, sizeof(double));
    r->t_floor = (double *)calloc(o->rounds, sizeof(double));
    r->host = (double *)calloc((size_t)o->rounds * o->steps, sizeof(double));
    if (!r->t_eager || !r->t_replay || !r->t_floor || !r->host) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    build_floor(r, s);
    warm_up_cost(r, s);

    /* Warm up eager, replay and floor: module loading, cgjit's two eager runs and its graph build. */
    for (int i = 0; i < WARMUP_STEPS; i++) {
        step_eager(r, r->xe, s);
        step_replay(r, r->xr, s);
        CHECK(cudaGraphLaunch(r->floor, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    cgj_trace_info_t info;
    CGJ_CHECK(cgj_trace_info(r->name, &info));
    r->replay_reached = info.state == CGJ_STATE_REPLAY;
    if (!r->replay_reached)
        fprintf(stderr, "cgjit-bench: %s is in state %s after %d warmup steps, not REPLAY (%s)\n", r->name,
                cgj_state_name(info.state), WARMUP_STEPS, info.reason[0] ? info.reason : "no reason given");
}

/* One timed round of S steps eager, replayed or of the floor; returns seconds per step. */
static double round_eager(size_run_t *r, int steps, cudaStream_t s)
{
    double t0 = now_s();
    for (int i = 0; i < steps; i++) step_eager(r, r->xe, s);
    CHECK(cudaStreamSynchronize(s));
    double t = (now_s() - t0) / steps;
    CHECK_LAST();
    return t;
}

static double round_replay(size_run_t *r, int steps, cudaStream_t s)
{
    double t0 = now_s();
    for (int i = 0; i < steps; i++) r->host[r->nhost++] = step_replay(r, r->xr, s) / r->calls;
    CHECK(cudaStreamSynchronize(s));
    double t = (now_s() - t0) / steps;
    CHECK_LAST();
    return t;
}

static double round_floor(size_run_t *r, int steps, cudaStream_t s)
{
    double t0 = now_s();
    for (int i = 0; i < steps; i++) CHECK(cudaGraphLaunch(r->floor, s));
    CHECK(cudaStreamSynchronize(s));
    double t = (now_s() - t0) / steps;
    CHECK_LAST();
    return t;
}

/* chain's host cost per absorbed launch when the program calls the driver itself: the same step
 * with each axpb launched by cuLaunchKernel (the entry point the runtime hands out, so cgjit's
 * wrapper) under an anchor of its own, "chain<N>-drv@<mode>" (the runtime launches another
 * handle of axpb than cudaGetFuncBySymbol gives: another step to cgjit), warmed up, then R
 * rounds of S steps. What `host_ns/launch` has beyond it is the CUDA runtime's own work for a
 * <<<>>> launch. Seconds per launch, or -1 (and a line on stderr) where it cannot be measured. */
static double drv_host_per_launch(size_run_t *r, const options_t *o, cudaStream_t s)
{
    void *fp = NULL;
    cudaDriverEntryPointQueryResult q;
    cudaFunction_t fn;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fp, 12000, cudaEnableDefault, &q);
    if (e == cudaSuccess && q != cudaDriverEntryPointSuccess) e = cudaErrorSymbolNotFound;
    if (e == cudaSuccess) e = cudaGetFuncBySymbol(&fn, (const void *)axpb);
    if (e != cudaSuccess) {
        cudaGetLastError();
        fprintf(stderr, "cgjit-bench: %s: drv_ns/launch n/a: no cuLaunchKernel or no handle of axpb (%s)\n", r->name,
                cudaGetErrorString(e));
        return -1;
    }
    typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, cudaStream_t,
                             void **, void **);
    launch_fn launch = (launch_fn)fp;
    char name[64];
    const char *at = strchr(r->name, '@');
    snprintf(name, sizeof name, "%.*s-drv%s", at ? (int)(at - r->name) : (int)strlen(r->name), r->name, at ? at : "");
    float a = CHAIN_A, b = CHAIN_B;
    int n = NFLOAT;
    float *x = r->xr;
    void *args[] = {&x, &a, &b, &n};
    size_t m = 0, total = (size_t)o->rounds * (size_t)o->steps;
    double *per = (double *)malloc(sizeof(double) * total);
    int failed = 0;
    cgj_trace_info_t before, after;
    for (int w = -1; w < o->rounds && per; w++) { /* round -1: the warm-up, untimed */
        if (w == 0) CGJ_CHECK(cgj_trace_info(name, &before));
        for (int i = 0; i < (w < 0 ? WARMUP_STEPS : o->steps); i++) {
            double t0 = now_s();
            CGJ_CHECK(cgj_trace_begin(name));
            for (int j = 0; j < r->n; j++) failed |= launch((void *)fn, GRID, 1, 1, BLOCK, 1, 1, 0, s, args, NULL) != 0;
            double t1 = now_s();
            CGJ_CHECK(cgj_trace_end());
            if (w >= 0) per[m++] = (t1 - t0) / r->calls;
        }
        CHECK(cudaStreamSynchronize(s));
    }
    CGJ_CHECK(cgj_trace_info(name, &after));
    double v = per && !failed && m == total && after.replays - before.replays == m ? median(per, m) : -1;
    if (v < 0)
        fprintf(stderr, "cgjit-bench: %s: drv_ns/launch n/a: %llu of %zu timed steps replayed%s (%s)\n", name,
                (unsigned long long)(after.replays - before.replays), m, failed ? ", a launch failed" : "",
                after.reason[0] ? after.reason : "no reason given");
    free(per);
    return v;
}

static void measure(size_run_t *r, const options_t *o, cudaStream_t s)
{
    for (int k = 0; k < o->rounds; k++) {
        CHECK(cudaStreamSynchronize(s));
        r->t_eager[k] = round_eager(r, o->steps, s);
        r->t_replay[k] = round_replay(r, o->steps, s);
        r->t_floor[k] = round_floor(r, o->steps, s);
    }
    r->eager_us = median(r->t_eager, o->rounds) * 1e6;
    r->replay_us = median(r->t_replay, o->rounds) * 1e6;
    r->floor_us = median(r->t_floor, o->rounds) * 1e6;
    r->host_ns = median(r->host, r->nhost) * 1e9;
    double drv = r->wl == WL_CHAIN ? drv_host_per_launch(r, o, s) : -1;
    r->host_drv_ns = drv < 0 ? -1 : drv * 1e9;
}

/* K steps eager into xe and K steps replayed into xr, both from `init`; compare as the mode
 * promises (bench_modes.h): bitwise, or within the tolerance where the trace fused a chain. */
static void check(size_run_t *r, const float *init, cudaStream_t s)
{
    size_t bytes = NFLOAT * sizeof(float);
    float *he = (float *)malloc(bytes), *hr = (float *)malloc(bytes);
    if (!he || !hr) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(r->xe, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(r->xr, init, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaDeviceSynchronize());
    cgj_trace_info_t before;
    CGJ_CHECK(cgj_trace_info(r->name, &before));
    for (int i = 0; i < CHECK_STEPS; i++) step_eager(r, r->xe, s);
    cgj_stats_t st0, st1;
    CGJ_CHECK(cgj_stats(&st0));
    for (int i = 0; i < CHECK_STEPS; i++) step_replay(r, r->xr, s);
    CGJ_CHECK(cgj_stats(&st1));
    CHECK(cudaStreamSynchronize(s));
    CHECK_LAST();
    CGJ_CHECK(cgj_trace_info(r->name, &r->info));
    r->replays_checked = r->info.replays - before.replays;
    r->pool_allocs_checked = st1.pool_allocs - st0.pool_allocs;
    r->pool_frees_checked = st1.pool_frees - st0.pool_frees;
    if (r->wl == WL_TEMPS && (r->pool_allocs_checked != r->replays_checked * (uint64_t)r->n ||
                              r->pool_frees_checked != r->replays_checked * (uint64_t)r->n))
        fprintf(stderr,
                "cgjit-bench: %s: the pool served %llu allocations and %llu frees in %llu replayed "
                "steps, not %d each per step\n",
                r->name, (unsigned long long)r->pool_allocs_checked, (unsigned long long)r->pool_frees_checked,
                (unsigned long long)r->replays_checked, r->n);
    CHECK(cudaMemcpy(he, r->xe, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hr, r->xr, bytes, cudaMemcpyDeviceToHost));
    bench_compare(he, hr, NFLOAT, 0, &r->cmp);
    r->equal = bench_cmp_ok(&r->cmp, r->mode, r->info.fused_chains);
    if (!r->equal) bench_cmp_complain(r->name, "replay", r->mode, r->info.fused_chains, &r->cmp, he, hr);
    if (r->replays_checked < CHECK_STEPS)
        fprintf(stderr, "cgjit-bench: %s: only %llu of %d checked steps were replayed (%s)\n", r->name,
                (unsigned long long)r->replays_checked, CHECK_STEPS,
                r->info.reason[0] ? r->info.reason : "no reason given");
    free(he);
    free(hr);
}

const char *verdict(const size_run_t *r)
{
    if (!r->equal) return "FAIL(mismatch)";
    if (!r->replay_reached || r->replays_checked == 0) return "FAIL(no replay)";
    return "PASS";
}

static void release(size_run_t *r)
{
    CHECK(cudaGraphExecDestroy(r->floor));
    CHECK(cudaFree(r->xe));
    CHECK(cudaFree(r->xr));
    CHECK(cudaFree(r->xf));
    for (int i = 0; i < TEMPS_LIVE; i++)
        if (r->tf[i]) CHECK(cudaFree(r->tf[i]));
    free(r->t_eager);
    free(r->t_replay);
    free(r->t_floor);
    free(r->host);
}

/* ---- the GPU-busy floor (busy.c) ---------------------------------------------------------- */

static void busy_step_size(void *arg, cudaStream_t s)
{
    size_run_t *r = (size_run_t *)arg;
    step_replay(r, r->xr, s);
}


/* ---- no GPU ------------------------------------------------------------------------------ */

/* Exit status where this machine has no usable CUDA GPU (automake's "skipped"). */
enum { EXIT_NO_GPU = 77 };

/* Where there is no GPU the bench has nothing to measure: one line saying why, and EXIT_NO_GPU.
 * The CUDA runtime says "driver version is insufficient" when the driver is missing: the line
 * says what it means. */
static void require_gpu(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0) return;
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) fprintf(stderr, "cgjit-bench: no CUDA GPU found: the CUDA driver cannot be loaded (%s)\n", dlerror());
    else if (e != cudaSuccess)
        fprintf(stderr, "cgjit-bench: no CUDA GPU found: cudaGetDeviceCount: %s (%s)\n", cudaGetErrorName(e),
                cudaGetErrorString(e));
    else fprintf(stderr, "cgjit-bench: no CUDA GPU found: the CUDA driver sees no device\n");
    exit(EXIT_NO_GPU);
}

int main(int argc, char **argv)
{
    /* The bench times replay itself: no eager probes among its timed steps (CGJIT_COST), no
     * dormant windows of the governor's either (CGJIT_GOVERN: eager and replay are timed side by
     * side here), and fused kernels in the trace from its build (CGJIT_FUSE_BACKGROUND=0: its
     * warm-up line says what compiling costs there), and a step recorded from its first run
     * (CGJIT_WARMUP_RUNS=0: the warm-up line's runs 1-3 are two recorded runs and the first
     * replay), built on the thread that recorded it (CGJIT_BUILD_BACKGROUND=0: the warm-up
     * line's build is timed there). cgjit reads its settings when the driver is
     * loaded, before main: start again with them set, unless the environment sets them already. */
    bool again = false;
    if (!getenv("CGJIT_COST")) again |= setenv("CGJIT_COST", "0", 1) == 0;
    if (!getenv("CGJIT_GOVERN")) again |= setenv("CGJIT_GOVERN", "0", 1) == 0;
    if (!getenv("CGJIT_FUSE_BACKGROUND")) again |= setenv("CGJIT_FUSE_BACKGROUND", "0", 1) == 0;
    if (!getenv("CGJIT_WARMUP_RUNS")) again |= setenv("CGJIT_WARMUP_RUNS", "0", 1) == 0;
    if (!getenv("CGJIT_BUILD_BACKGROUND")) again |= setenv("CGJIT_BUILD_BACKGROUND", "0", 1) == 0;
    if (again) execv("/proc/self/exe", argv);
    options_t o;
    parse_options(argc, argv, &o);

    require_gpu();
    int dev, driver, runtime;
    cudaDeviceProp prop;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaDriverGetVersion(&driver));
    CHECK(cudaRuntimeGetVersion(&runtime));
    printf("cgjit-bench: GPU %s (sm_%d%d), CUDA driver %d.%d, runtime %d.%d\n", prop.name, prop.major, prop.minor,
           driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    fflush(stdout);

    float init[NFLOAT];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < NFLOAT; i++) { /* xorshift64*: uniform in [-1, 1) */
        seed ^= seed >> 12, seed ^= seed << 25, seed ^= seed >> 27;
        init[i] = (float)((seed * 0x2545f4914f6cdd1dull) >> 40) / (float)(1u << 23) - 1.0f;
    }

    /* The elementwise kernels of the workloads that run, registered before any step (a mode that
     * fuses needs them; reduce-overhead ignores them). */
    static bench_results_t res;
    if (o.run[WL_CHAIN] || o.run[WL_TEMPS]) res.registrations_refused += register_kernels();
    for (int m = 0; m < MD_COUNT; m++)
        if (o.run_model[m] && model_of(m) && model_of(m)->register_ops)
            res.registrations_refused += model_of(m)->register_ops();
    printf("cgjit-bench: modes");
    for (int k = 0; k < o.nmodes; k++) printf("%s %s", k ? "," : "", bench_mode_names[o.modes[k]]);
    printf(" (each workload once per mode, anchors NAME@MODE); CGJIT_COST=%s%s\n",
           getenv("CGJIT_COST") ? getenv("CGJIT_COST") : "?",
           res.registrations_refused ? "; some elementwise registrations were refused (FAIL)" : "");
    fflush(stdout);
    int pass = res.registrations_refused == 0;

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int w = 0; w < WL_COUNT; w++) {
        if (!o.run[w]) continue;
        const int *sizes;
        int nsizes = workload_sizes(&o, w, &sizes);
        for (int i = 0; i < nsizes; i++)
            for (int k = 0; k < o.nmodes; k++) {
                size_run_t *r = &res.runs[w][res.nruns[w]++];
                setup(r, w, sizes[i], o.modes[k], &o, init, s);
                measure(r, &o, s);
                check(r, init, s);
                r->busy_us = bench_busy_floor(r->name, busy_step_size, r, o.steps, s);
                res.busy_shown |= r->busy_us >= 0;
                pass &= strcmp(verdict(r), "PASS") == 0;
                release(r);
            }
    }
    /* The models and then the elementwise workloads, after chain and temps (so that theirs run as
     * they always did). */
    for (int m = 0; m < MD_COUNT; m++) {
        if (!o.run_model[m]) continue;
        const model_desc_t *md = model_of(m);
        if (!md) { /* skipped under all; a failure when asked for by name */
            fprintf(stderr,
                    "cgjit-bench: workload %s: not built (cuDNN was not found when cgjit-bench was "
                    "built); %s\n",
                    MD_NAMES[m], o.named ? "not run" : "skipped");
            if (o.named) pass = 0;
            continue;
        }
        for (int k = 0; k < o.nmodes; k++) {
            model_run_t *r = &res.mruns[m][res.nmruns[m]++];
            model_setup(r, md, o.modes[k], &o, s);
            model_measure(r, &o, s);
            model_check(r, &o, s);
            r->busy_us = bench_busy_floor(r->name, busy_step_model, r, o.steps, s);
            res.busy_shown |= r->busy_us >= 0;
            pass &= strcmp(model_verdict(r), "PASS") == 0;
            model_release(r);
        }
    }
    CHECK(cudaStreamDestroy(s));
    CGJ_CHECK(cgj_stats(&res.stats));

    if (o.compare) { /* each table its own torch figures, and its own notes on what is missing */
        torch_compare_load(o.compare, MD_NAMES, MD_MODELS, &res.tc);
        torch_compare_load(o.compare, MD_NAMES + MD_MODELS, MD_EW_COUNT, &res.tc_ew);
    }

    if (o.run[WL_CHAIN]) print_chain_table(&res, &o);
    if (o.run[WL_TEMPS]) print_temps_table(&res, &o);
    print_models_table(&res, &o, prop.name);
    print_elementwise_table(&res, &o, prop.name);
    print_fusion_summary(&res, &o);
    if (o.json && write_json(o.json, &prop, driver, runtime, &res, &o, pass) != 0) return 1;
    printf("bench: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
