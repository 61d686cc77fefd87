/* blocking_counter.h - TensorFlow's BlockingCounter: a count set once, which
 * workers decrement and one waiter waits to reach zero. The waiter spins
 * briefly, then blocks on a condition variable; a decrement takes the lock
 * only when it brings the count to zero while the waiter is blocked. Used to
 * join the parts of a fork (parallel_do, pardo_thread_pool_for).
 *
 * The counter lives in caller memory (usually the forking thread's stack):
 * no allocation. Decrement is thread-safe; one thread waits. A waiter that
 * returned may destroy the counter at once: the last decrement does not touch
 * it after waking the waiter. */
#ifndef PARDO_BLOCKING_COUNTER_H
#define PARDO_BLOCKING_COUNTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "exec/spin.h"

typedef struct pardo_blocking_counter {
    _Alignas(PARDO_CACHE_LINE) atomic_uint state; // (count << 1) | 1 when the waiter blocks
    pthread_mutex_t mu;                           // guards notified
    pthread_cond_t cv;                            // the blocked waiter waits here
    bool notified;                                // the count reached zero while the waiter blocked
} pardo_blocking_counter;

/* Sets the count to n (>= 0). Call before any decrement or wait; not
 * thread-safe against them. Pair with pardo_blocking_counter_destroy. */
void pardo_blocking_counter_init(pardo_blocking_counter *c, int n);

/* Releases the mutex and condition variable. The count must be zero or
 * nobody may use the counter any more. */
void pardo_blocking_counter_destroy(pardo_blocking_counter *c);

/* Subtracts n (>= 1) from the count; the one that reaches zero wakes the
 * waiter. Going below zero is a bug in pardo (asserts). Thread-safe. */
void pardo_blocking_counter_decrement_by(pardo_blocking_counter *c, int n);

/* pardo_blocking_counter_decrement_by(c, 1). Thread-safe. */
void pardo_blocking_counter_decrement(pardo_blocking_counter *c);

/* Returns once the count is zero: spins up to PARDO_SPIN_NS, then blocks.
 * One waiter at a time. */
void pardo_blocking_counter_wait(pardo_blocking_counter *c);

/* True once the count is zero (acquire: what the decrementers wrote is seen). */
bool pardo_blocking_counter_done(pardo_blocking_counter *c);

/* As wait, spinning up to spin_ns (0: PARDO_SPIN_NS) before it blocks. */
void pardo_blocking_counter_wait_spinning(pardo_blocking_counter *c, uint64_t spin_ns);

/* As wait, but gives up after timeout_ns; true when the count reached zero.
 * After false the counter is still in use: wait (or wait_for) again before
 * destroying it. */
bool pardo_blocking_counter_wait_for(pardo_blocking_counter *c, uint64_t timeout_ns);

#endif
