/*
 * reason.h — the reason table: every way a step leaves the fast path, worded once.
 *
 * Each row is X(CODE, "message", "what the user can do"). Call sites never word a reason: they
 * pass a code and a detail (an op index, a kernel or function name, sizes, a driver error), and
 * everything a user reads — logs, the report, cgj_trace_info's reason — is the row's message
 * followed by that detail. The report counts reasons by code and prints each one's hint; tests
 * assert codes, never substrings.
 *
 * Groups, by prefix: ABORT (the step stops being traced and runs eagerly), DIFF (a call differs
 * from the trace or from the previous run: a side exit in replay, a disagreement in recording),
 * EXIT (a replay leaves its trace for a reason other than a difference), BLACKLIST (the anchor
 * runs eagerly for good), BUILD (a trace could not be made into graphs), BREAK (what ends a
 * segment: a graph launch before the call), LIB (why a library call is never absorbed whole),
 * FUSE (why an elementwise chain replays unfused: the chain's kernels then run as recorded),
 * VERIFY (why CGJIT_VERIFY left a graph segment unchecked: its calls ran eagerly).
 */
#ifndef CGJ_REASON_H
#define CGJ_REASON_H

#include <cgjit.h> /* cgj_reason_name and cgj_reason_hint are public */
#include <stddef.h>
#include <stdint.h>

/* clang-format off */
#define CGJ_REASON_LIST(X)                                                                         \
    X(NONE, "no reason", "")                                                                       \
    /* aborts */                                                                                   \
    X(ABORT_CALL_FAILED, "a call inside the step returned an error",                              \
      "the error is the program's own; cgjit runs such steps eagerly")                            \
    X(ABORT_MAX_OPS, "the step holds more than CGJIT_MAX_OPS calls",                              \
      "raise CGJIT_MAX_OPS, or mark a shorter step with cgj_trace_begin/end")                     \
    X(ABORT_NO_LAYOUT, "a kernel's parameter layout cannot be learned from the driver",           \
      "the kernel cannot be replayed; a newer driver reports layouts of more kernels")            \
    X(ABORT_UNTRACEABLE, "a call cgjit cannot trace was made inside the step",                    \
      "move the call out of the step (before cgj_trace_begin or after cgj_trace_end)")            \
    X(ABORT_AS_MADE_ALLOC,                                                                         \
      "the step allocates memory and makes a call cgjit runs as made (a graph of the program's "   \
      "own, a 2D/3D copy, ...)",                                                                    \
      "allocate before the step: a replay hands the step's allocations other addresses than eager " \
      "execution and reuses them by its plan, which cannot see what such a call reads or writes") \
    X(ABORT_CAPTURE, "the program captures a CUDA graph of its own",                              \
      "nothing to do: its capture runs as it would without cgjit, and steps resume after cuStreamEndCapture") \
    X(ABORT_NESTED, "cgj_trace_begin inside a step (steps do not nest)",                          \
      "end the outer step first, or give the inner work no markers of its own")                   \
    X(ABORT_CONTEXT, "the step runs in another CUDA context than its trace was built in",         \
      "give each context's steps an anchor of their own (markers), or keep one context current")  \
    X(ABORT_EXCEPTION, "the program ended the step with cgj_trace_abort (in Python: an exception "  \
      "left a cgjit.step)",                                                                        \
      "nothing to do if it is rare: the step's work ran eagerly and nothing of it was recorded; "  \
      "where the exception is control flow, raise it outside the step")                           \
    /* differences: side exits in replay, disagreements in recording */                           \
    X(DIFF_OPERATION, "operation differs",                                                         \
      "the step does different work from run to run; CGJIT_LOG=guards says why no other variant took it") \
    X(DIFF_API, "driver function differs",                                                         \
      "the step calls different driver functions; in a decode step, shapes that grow every token "  \
      "(a key-value cache that grows) make libraries take other paths: keep them fixed (a static "  \
      "cache)")                                                                                    \
    X(DIFF_STREAM, "stream differs", "use the same streams in every step")                        \
    X(DIFF_KERNEL, "kernel function differs",                                                      \
      "the step launches different kernels; CGJIT_LOG=guards says why no other variant took it; "   \
      "shapes that grow every step (a key-value cache that grows by a token) make libraries pick "  \
      "other kernels: keep them fixed (a static cache)")                                           \
    X(DIFF_GRID, "grid differs", "patched where the graph takes it; this node refused a patch before")  \
    X(DIFF_BLOCK, "block differs", "patched where the graph takes it; this node refused a patch before") \
    X(DIFF_SMEM, "dynamic shared memory differs", "patched where the graph takes it; this node refused a patch before") \
    X(DIFF_PARAM_FORM, "parameter form differs", "launch kernels the same way (kernelParams or extra) every step") \
    X(DIFF_ATTRS, "launch attributes differ", "use the same launch attributes every step")        \
    X(DIFF_COPY_KIND, "copy direction or memory kind differs",                                    \
      "copy between the same kinds of memory (pageable, pinned, device) every step")              \
    X(DIFF_COPY_SIZE, "copy size differs", "patched where the graph takes it; this node refused a patch before") \
    X(DIFF_COPY_ADDR, "copy address differs", "patched where the graph takes it; this node refused a patch before") \
    X(DIFF_MEMSET, "memset arguments differ", "patched where the graph takes it; this node refused a patch before") \
    X(DIFF_ZERO_LENGTH, "a copy or memset of zero length where the trace has a real one",          \
      "a graph cannot hold an empty copy: skip the call when there is nothing to copy")           \
    X(DIFF_ALLOC_SIZE, "allocation size differs beyond its size class",                           \
      "sizes that vary within a class keep the plan (4 classes per power of two)")                \
    X(DIFF_FREED_ADDR, "freed address differs", "free in-step allocations in the same order")     \
    X(DIFF_EVENT, "event differs", "record and wait on the same events every step")              \
    X(DIFF_HOST_FUNC, "host function differs", "launch the same host functions every step")      \
    X(DIFF_LAYOUT, "parameter layout differs", "the kernel's parameters changed between runs")   \
    X(DIFF_LIB_OPS, "the library call issued another number of driver calls",                     \
      "the library chose other kernels: keep its arguments the same")                            \
    X(DIFF_OP_COUNT, "the run has another number of calls", "the step's length follows the data") \
    X(DIFF_PARAM, "a constant kernel parameter differs", "values that change every step are patched once both recorded runs show them changing") \
    X(DIFF_NO_PARAMS, "no kernel parameters passed", "pass kernelParams or extra")                 \
    /* side exits for other reasons */                                                             \
    X(EXIT_PAST_END, "the step goes on past the end of the trace", "the step's length follows the data") \
    X(EXIT_ENDED_EARLY, "the step ended before the end of the trace", "the step's length follows the data") \
    X(EXIT_HELD_BLOCK, "a block an earlier replay returned is still held by the program",         \
      "free outputs of a step before the next one (in PyTorch, del the step's outputs once read: "  \
      "a loss kept in a list holds its memory), or let cgjit build a twin variant")                \
    X(EXIT_OBSERVED, "another thread synchronized with work this step had absorbed",              \
      "synchronize on the thread that runs the step")                                             \
    X(EXIT_PATCH, "the executable graph refused a new value for a node",                          \
      "that op's values are guarded from now on; values that follow the data make variants")     \
    X(OFF_COST, "replay cost more than eager execution",                                          \
      "steps too short for a graph to pay, or leaving their trace too often: see the side exits") \
    X(OFF_WASTE, "the step's recordings and side exits cost more than its replays save",          \
      "the step's shapes follow the data: such steps run eagerly for a while, and replay is tried again later") \
    X(OFF_NO_GRAPH, "the step has no graph worth launching: replayed, it would make the same calls", \
      "nothing to do: such a step runs eagerly at no cost (CGJIT_GRAPH_MIN_OPS sets the shortest graph)") \
    X(OFF_LONE_RECORDINGS, "runs that leave the trace are no longer recorded: the last ones matched nothing", \
      "the step's shapes follow the data: such runs finish eagerly; one in a growing number is still recorded") \
    X(OFF_UNUSED_VARIANT, "a variant waits for more runs of its shape: variants built before never replayed", \
      "the step's shapes follow the data: a run that matches no variant finishes eagerly") \
    /* blacklists */                                                                               \
    X(BLACKLIST_EXITS, "most replays left the trace", "see the side exits: the step differs too often") \
    X(BLACKLIST_LAUNCH, "a graph launch failed", "the driver refused the graph; the step runs eagerly") \
    X(BLACKLIST_REISSUE, "re-issuing absorbed work failed",                                       \
      "the driver refused work cgjit had accepted for the program: the error is returned at its next call") \
    /* build failures */                                                                           \
    X(BUILD_STREAM, "no capture stream could be created", "the driver is out of resources")      \
    X(BUILD_EVENTS, "no events could be created for a segment", "the driver is out of resources") \
    X(BUILD_CAPTURE, "an op could not be issued under stream capture", "see the op and the error") \
    X(BUILD_NODE, "an op's graph node could not be found", "see the op and the error")            \
    X(BUILD_INSTANTIATE, "a graph could not be instantiated", "see the error")                    \
    X(BUILD_UPLOAD, "a graph could not be uploaded", "see the error")                             \
    X(BUILD_STAGING, "no pinned staging memory for a host-to-device copy", "the host is short of page-locked memory") \
    X(BUILD_HOST_CHANGED, "page-locked host memory was freed while cgjit's thread built the step", \
      "nothing to do: the step is built again where it is recorded")                              \
    X(BUILD_POOL, "no pool memory for the step's allocations",                                    \
      "raise CGJIT_POOL_RESERVE_GB, or free device memory")                                       \
    /* segment breaks */                                                                           \
    X(BREAK_SYNC, "a host synchronization",                                                        \
      "fewer synchronizations inside a step: fewer graphs; read results after the step (in "       \
      "PyTorch, .item(), .cpu(), print(tensor) and torch.cuda.synchronize() synchronize)")         \
    X(BREAK_QUERY, "a host query of GPU progress", "query outside the step")                       \
    X(BREAK_READBACK, "a copy the host reads at once (to pageable memory)",                       \
      "copy into pinned memory with an async copy, then synchronize once")                         \
    X(BREAK_FREE, "a free of memory the step did not allocate", "free outside the step")         \
    X(BREAK_OWN_GRAPH, "a graph of the program's own, launched when the program launches it",     \
      "nothing to do: the work before it is launched first, in the program's order")              \
    X(BREAK_AS_MADE,                                                                               \
      "work cgjit does not capture (a 2D/3D, array or peer copy, a cooperative launch, a stream "  \
      "memory operation), run as the program makes it",                                           \
      "nothing to do: the work before it is launched first, in the program's order")              \
    X(BREAK_CHUNK, "a chunk of CGJIT_CHUNK_OPS ops, launched while the rest is absorbed", "")    \
    X(BREAK_IDLE, "host work before the next call (the program's, or a library's it called; CGJIT_CHUNK_US): the chunk so far runs meanwhile", \
      "nothing to do: the GPU runs the chunk while the host works")                               \
    X(BREAK_HANDOFF, "another thread issues work on the step's stream here (it waited for this thread)", \
      "nothing to do: the work is launched before the other thread needs it")                     \
    X(BREAK_COLLECTIVE, "a collective (NCCL) waits for its peers: launched before its call returns, as eager", \
      "nothing to do: no peer waits for work cgjit holds back")                                   \
    X(BREAK_HOST_VISIBLE, "a kernel that reaches mapped pinned host memory: the host may read it without a CUDA call, so it is launched when the program launches it", \
      "nothing to do: a host that spins on a flag the kernel sets sees it as without cgjit")      \
    /* library calls never absorbed whole */                                                       \
    X(LIB_FAILED, "the library returned an error", "")                                            \
    X(LIB_HANDLE, "its handle cannot be read", "")                                                \
    X(LIB_HOST_RESULT, "its result goes to host memory (the library synchronizes)",               \
      "use device pointer mode for results")                                                      \
    X(LIB_DESCRIPTOR, "a descriptor cannot be read", "")                                          \
    X(LIB_GETTERS, "the library's descriptor getters are missing", "use cuDNN 9")                 \
    X(LIB_KEY_SIZE, "its arguments do not fit the key", "")                                       \
    X(LIB_MANY_ARGS, "it has too many pointer arguments", "")                                     \
    X(LIB_HOST_SCALAR, "a host scalar of an unknown type", "")                                    \
    X(LIB_VARIANT_PACK, "its variant pack cannot be guarded",                                     \
      "set up variant packs and plans after cgjit is loaded")                                     \
    X(LIB_ARG_COUNT, "its pointer arguments differ in number", "")                                \
    X(LIB_ISSUES, "the call issues work that cannot be replayed without the library", "")         \
    X(LIB_UNEXPLAINED, "a kernel parameter changes with none of the call's arguments",            \
      "the library keeps state of its own; it runs on every call")                                 \
    X(LIB_NCCL_GROUP, "NCCL calls grouped by ncclGroupStart/End run as the program makes them",   \
      "nothing to do: the group's kernels are still replayed from graphs")                        \
    X(LIB_OWN_SAMPLE, "a sample's values were cgjit's own (the call was absorbed in the replay the recording continued); it is learned again from the library's runs", "") \
    X(FUSE_LAYOUT, "an elementwise registration disagrees with the kernel's parameters (count or sizes)", \
      "fix the spec: one parameter per kernel parameter, in order, with its type") \
    X(FUSE_VARYING, "an elementwise chain has values that change from run to run", \
      "its kernels replay unfused (fused kernels hold their arguments)") \
    X(FUSE_ALIAS, "an elementwise chain's buffers overlap without being the same", \
      "elementwise kernels fuse over whole, distinct buffers") \
    X(FUSE_SIZE, "an elementwise chain uses more buffers than one fused kernel takes (64)", \
      "the chain is fused up to that point") \
    X(FUSE_COMPILE, "a fused kernel could not be compiled or loaded (NVRTC)", \
      "install NVRTC (CGJIT_NVRTC names the library) or see the detail") \
    X(FUSE_MISMATCH, "a fused kernel's results differ from the kernels it replaces beyond the mode's tolerance", \
      "check the registration's expression against the kernel") \
    X(EXIT_FUSED_CALL, "a library call of a fused chain has other arguments than recorded", \
      "the chain's kernel holds the recorded call; such runs replay up to it and a variant may follow") \
    X(FUSE_VALIDATE, "a fused kernel could not be validated (scratch memory or a launch failed)", \
      "the device may be short of memory") \
    X(FUSE_PENDING, "a fused kernel is compiling in the background: the chain replays unfused until it is ready", \
      "nothing to do: the step is built again, fused, once the compiler is done (CGJIT_FUSE_BACKGROUND=0 compiles at the build)") \
    /* segments CGJIT_VERIFY does not check */                                                     \
    X(VERIFY_SHARED, "CGJIT_VERIFY did not check a segment: another thread's work wrote memory the segment uses while its calls ran (they ran eagerly; their results are kept)", \
      "nothing to do: a segment is checked where no other thread writes its memory between its start and its graph")
/* clang-format on */

typedef enum cgj_reason_code {
#define CGJ_REASON_ENUM(code, msg, hint) CGJ_REASON_##code,
    CGJ_REASON_LIST(CGJ_REASON_ENUM)
#undef CGJ_REASON_ENUM
        CGJ_REASON_COUNT
} cgj_reason_code_t;

#define CGJ_REASON_NO_OP UINT32_MAX

/* A reason as kept: its code, the op it applies to (or CGJ_REASON_NO_OP), and a detail. */
typedef struct cgj_reason {
    cgj_reason_code_t code;
    uint32_t op;
    char detail[200];
} cgj_reason_t;

/* The message of a code ("?" for a value out of range); its name and hint: cgjit.h. */
const char *cgj_reason_message(int code);
/* Set *r (detail printf-style, NULL for none). */
void cgj_reason_set(cgj_reason_t *r, cgj_reason_code_t code, uint32_t op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "message at op N: detail" into buf (any part absent is left out); returns buf. */
const char *cgj_reason_format(const cgj_reason_t *r, char *buf, size_t len);
/* Count r's code process-wide: a step or an anchor took this reason (not a probe that failed). */
void cgj_reason_tally(const cgj_reason_t *r);
/* Times each code was taken since the process started. */
uint64_t cgj_reason_count(int code);

#endif /* CGJ_REASON_H */
