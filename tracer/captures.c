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
 * nothing.
 *
 * A capture counts from just before its cuStreamBeginCapture reaches the driver (a call another
 * thread makes meanwhile already sees it), and each keeps whether its stream is blocking, asked
 * of the driver then: cuStreamGetFlags on a capturing stream fails and invalidates the capture
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, driver 580 on an H200, a capture of PyTorch's
 * cudagraph trees in thread-local mode), so while captures run cgj_captures_blocking answers
 * instead (tracer/exits.c asks, observing other threads' pending work).
 *
 * This file implements step.h's cgj_step_capture_began and cgj_step_capture_ended;
 * cgj_step_capture_begin, which aborts the thread's step first, is step.c's.
 */
#include "tracer/tracer.h"
#include "base/driver.h"
#include "base/log.h"
#include "base/vec.h"

#include <pthread.h>

int cgj_program_captures;

typedef struct capture {
    CUstream s;
    bool blocking;
    bool begun; /* the driver said it began; before that, on its way */
} capture_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static capture_t *caps;
static size_t ncaps, capcaps;

static void publish(void)
{
    __atomic_store_n(&cgj_program_captures, (int)ncaps, __ATOMIC_RELAXED);
}

static void drop(size_t i)
{
    caps[i] = caps[--ncaps];
    publish();
}

void cgj_captures_beginning(CUstream s)
{
    /* Asked before the capture counts, and only while no other runs: another capture's stream
     * could be the one asked about. */
    bool blocking = cgj_program_capturing() || cgj_stream_blocking(s);
    pthread_mutex_lock(&lock);
    CGJ_VEC_PUSH(caps, ncaps, capcaps, ((capture_t){.s = s, .blocking = blocking}));
    publish();
    pthread_mutex_unlock(&lock);
}

void cgj_step_capture_began(CUstream s, CUresult r, const char *api)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncaps; i++)
        if (caps[i].s == s && !caps[i].begun) {
            if (r == CUDA_SUCCESS) caps[i].begun = true;
            else drop(i);
            break;
        }
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS)
        CGJ_LOG(trace, "%s: the program captures a graph of its own: no step begins until it ends", api);
}

void cgj_step_capture_ended(CUstream s, CUresult r)
{
    if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) return; /* the capture goes on */
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncaps; i++)
        if (caps[i].s == s && caps[i].begun) {
            drop(i);
            break;
        }
    pthread_mutex_unlock(&lock);
}

bool cgj_captures_blocking(CUstream s)
{
    bool blocking = true; /* a stream no capture names: taken as blocking, which only issues more */
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncaps; i++)
        if (caps[i].s == s) {
            blocking = caps[i].blocking;
            break;
        }
    pthread_mutex_unlock(&lock);
    return blocking;
}

void cgj_captures_forked(void)
{
    pthread_mutex_init(&lock, NULL);
    ncaps = 0; /* a capture belongs to the parent's CUDA, which the child cannot use */
    publish();
}
