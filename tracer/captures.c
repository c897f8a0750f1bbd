/*
 * captures.c — the program's own stream captures in progress (cuStreamBeginCapture ...
 * cuStreamEndCapture, runtime/wrappers.c).
 *
 * While one runs, in any thread, no step begins and no trace is built: a step begun inside the
 * capture would absorb launches the program means to capture into its graph, and cgjit's own
 * graph building (capture, instantiate, upload) is among the calls a capture in global mode
 * forbids to every thread: the driver fails them and invalidates the program's capture. Steps
 * resume on the first call after the last capture ends. The streams are kept (not only their
 * number) so that an end the driver refused, or one of a capture cgjit never saw begin, changes
 * nothing. This file implements step.h's cgj_step_capture_began and cgj_step_capture_ended;
 * cgj_step_capture_begin, which aborts the thread's step, is step.c's.
 */
#include "tracer/tracer.h"
#include "base/log.h"
#include "base/vec.h"

#include <pthread.h>

int cgj_program_captures;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUstream *streams;
static size_t nstreams, capstreams;

void cgj_step_capture_began(CUstream s, const char *api)
{
    pthread_mutex_lock(&lock);
    CGJ_VEC_PUSH(streams, nstreams, capstreams, s);
    __atomic_store_n(&cgj_program_captures, (int)nstreams, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    CGJ_LOG(trace, "%s: the program captures a graph of its own: no step begins until it ends", api);
}

void cgj_step_capture_ended(CUstream s, CUresult r)
{
    if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) return; /* the capture goes on */
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nstreams; i++)
        if (streams[i] == s) {
            streams[i] = streams[--nstreams];
            __atomic_store_n(&cgj_program_captures, (int)nstreams, __ATOMIC_RELAXED);
            break;
        }
    pthread_mutex_unlock(&lock);
}

void cgj_captures_forked(void)
{
    pthread_mutex_init(&lock, NULL);
    nstreams = 0; /* a capture belongs to the parent's CUDA, which the child cannot use */
    __atomic_store_n(&cgj_program_captures, 0, __ATOMIC_RELAXED);
}
