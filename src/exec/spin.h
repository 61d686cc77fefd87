/* spin.h - bounded spinning before a thread blocks (internal to src/: the
 * thread pool, the blocking counter and task waits). A waiter spins for at
 * most PARDO_SPIN_NS, checking its condition, then blocks on a condition
 * variable; nobody sleeps in a loop. */
#ifndef PARDO_SPIN_H
#define PARDO_SPIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* How long a waiter spins before it blocks: long enough to catch the next
 * fork of a tight parallel_do loop, short enough that an idle pool costs
 * nothing measurable. */
#define PARDO_SPIN_NS 50000

/* A waiter whose wait follows work of its own (a fork's caller joining, a
 * worker back from a task) spins for a quarter of that work's time, within
 * [PARDO_SPIN_NS, PARDO_SPIN_MAX_NS]: the parts of one parallel_do are
 * alike, so the others end within a fraction of a part, and waking a
 * blocked thread costs 50-70 us on a VM (measured: W1's 2-thread step lost
 * a median 60 us at every join the worker ended last). */
#define PARDO_SPIN_MAX_NS 2000000

/* The spin budget after `worked_ns` of one's own work (see PARDO_SPIN_MAX_NS). */
static inline uint64_t pardo_spin_budget(uint64_t worked_ns) {
    const uint64_t q = worked_ns / 4;
    return q < PARDO_SPIN_NS ? PARDO_SPIN_NS : q > PARDO_SPIN_MAX_NS ? PARDO_SPIN_MAX_NS : q;
}

/* Cache line size for aligning hot atomics (ggml's GGML_CACHE_ALIGN). */
#define PARDO_CACHE_LINE 64

/* Tells the CPU this is a spin-wait loop (x86 pause, arm yield). */
static inline void pardo_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

/* Initialises cv for timed waits against CLOCK_MONOTONIC (the clock
 * pardo_now_ns reads), so that a wall-clock change does not stretch or cut
 * a timeout. Pair with pthread_cond_destroy. */
static inline void pardo_cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

/* Monotonic time in nanoseconds. */
static inline uint64_t pardo_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One bounded spin: `pardo_spin sp = {0}; while (!ready() && pardo_spin_step(&sp)) {}`. */
typedef struct pardo_spin {
    unsigned iter;     // steps taken
    uint64_t deadline; // ns; 0 until the first clock read
    uint64_t budget;   // ns to spin; 0: PARDO_SPIN_NS
} pardo_spin;

/* Relaxes once; false when the spin budget is spent and the caller should
 * block. Reads the clock every 64 steps only. */
static inline bool pardo_spin_step(pardo_spin *s) {
    pardo_cpu_relax();
    if ((++s->iter & 63u) != 0) return true;
    uint64_t now = pardo_now_ns();
    if (s->deadline == 0) {
        s->deadline = now + (s->budget ? s->budget : PARDO_SPIN_NS);
        return true;
    }
    return now < s->deadline;
}

#endif
