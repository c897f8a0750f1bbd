/*
 * spin.h — a portable spin-wait and the small spinlock built on it.
 *
 * The pause hint is the only architecture-specific instruction in cgjit, and it lives here:
 * `pause` on x86, `yield` on Arm, nothing elsewhere. Spinlocks guard only short critical
 * sections (a thread's step, a table read); waiters spin on a plain load before retrying the
 * exchange, so the cache line is not bounced while the holder works.
 */
#ifndef CGJ_SPIN_H
#define CGJ_SPIN_H

static inline void cgj_spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static inline void cgj_spin_lock(int *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) cgj_spin_pause();
}

static inline void cgj_spin_unlock(int *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

#endif /* CGJ_SPIN_H */
