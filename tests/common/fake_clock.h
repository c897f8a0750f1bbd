/*
 * fake_clock.h — a monotonic clock for cgjit that a loaded machine cannot stretch.
 *
 * Where cgjit decides by host time (chunks end after CGJIT_CHUNK_US of the program's own work,
 * the cost model weighs replay against eager), a test that read the real clock would decide at
 * random on a busy machine. A test program includes this header once: its clock_gettime, found
 * before libc's, gives libcgjit a CLOCK_MONOTONIC that moves 1 ns per read, and (with
 * driver_too) the fake driver one that moves 1 us per read, so that a delay of D us set on the
 * driver costs exactly D us; the program's own host work moves it explicitly (host_work). Every
 * other caller and every other clock gets the real time. Only a test program may include it: it
 * defines clock_gettime.
 */
#ifndef CGJ_TEST_FAKE_CLOCK_H
#define CGJ_TEST_FAKE_CLOCK_H

#include <criterion/criterion.h>
#include <cgjit.h>
#include <dlfcn.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int fake_clock_on;
static uint64_t fake_clock_ns = 1000000000000ull;        /* never 0: cgjit takes 0 for "no time" */
static const void *fake_clock_cgjit, *fake_clock_driver; /* the libraries whose clock is fake */

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    if (clk == CLOCK_MONOTONIC && __atomic_load_n(&fake_clock_on, __ATOMIC_ACQUIRE)) {
        Dl_info d;
        const void *caller = dladdr(__builtin_return_address(0), &d) ? d.dli_fbase : NULL;
        uint64_t tick = caller == fake_clock_cgjit ? 1 : caller && caller == fake_clock_driver ? 1000 : 0;
        if (tick) {
            uint64_t t = __atomic_add_fetch(&fake_clock_ns, tick, __ATOMIC_RELAXED);
            ts->tv_sec = (time_t)(t / 1000000000ull);
            ts->tv_nsec = (long)(t % 1000000000ull);
            return 0;
        }
    }
    return (int)syscall(SYS_clock_gettime, clk, ts);
}

static inline const void *fake_clock_base_of(const void *addr)
{
    Dl_info d;
    cr_assert(dladdr(addr, &d) && d.dli_fbase, "dladdr");
    return d.dli_fbase;
}

/* The program's host work between its calls: us microseconds on the fake clock. */
static inline void host_work(double us)
{
    __atomic_add_fetch(&fake_clock_ns, (uint64_t)(us * 1000), __ATOMIC_RELAXED);
}

/* From now on cgjit (and, with a driver handle, the fake driver) reads the fake clock. */
static inline void fake_clock_start(void *driver_handle)
{
    fake_clock_cgjit = fake_clock_base_of((const void *)cgj_trace_begin);
    if (driver_handle) {
        fake_clock_driver = fake_clock_base_of(dlsym(driver_handle, "cuInit"));
        cr_assert(fake_clock_cgjit != fake_clock_driver);
    }
    __atomic_store_n(&fake_clock_on, 1, __ATOMIC_RELEASE);
}

#endif /* CGJ_TEST_FAKE_CLOCK_H */
