/* blocking_counter.c - count down to zero, spin then block (see blocking_counter.h). */
#include "exec/blocking_counter.h"

#include <errno.h>

#include "core/status.h"

void pardo_blocking_counter_init(pardo_blocking_counter *c, int n) {
    PARDO_ASSERT(n >= 0);
    atomic_init(&c->state, (unsigned)n << 1);
    pthread_mutex_init(&c->mu, NULL);
    pardo_cond_init_monotonic(&c->cv);
    c->notified = false;
}

void pardo_blocking_counter_destroy(pardo_blocking_counter *c) {
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
}

void pardo_blocking_counter_decrement_by(pardo_blocking_counter *c, int n) {
    PARDO_ASSERT(n >= 1);
    unsigned before = atomic_fetch_sub_explicit(&c->state, (unsigned)n << 1, memory_order_acq_rel);
    PARDO_ASSERT((before >> 1) >= (unsigned)n);
    unsigned v = before - ((unsigned)n << 1);
    if (v != 1) return; /* not zero yet, or zero with nobody blocked */
    pthread_mutex_lock(&c->mu);
    c->notified = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void pardo_blocking_counter_decrement(pardo_blocking_counter *c) { pardo_blocking_counter_decrement_by(c, 1); }

bool pardo_blocking_counter_done(pardo_blocking_counter *c) {
    return (atomic_load_explicit(&c->state, memory_order_acquire) >> 1) == 0;
}

static bool spin_until_zero(pardo_blocking_counter *c, uint64_t spin_ns) {
    pardo_spin sp = {.budget = spin_ns};
    do {
        if ((atomic_load_explicit(&c->state, memory_order_acquire) >> 1) == 0) return true;
    } while (pardo_spin_step(&sp));
    return false;
}

void pardo_blocking_counter_wait_spinning(pardo_blocking_counter *c, uint64_t spin_ns) {
    if (spin_until_zero(c, spin_ns)) return;
    /* announce that we block; if the count hit zero meanwhile, we are done */
    unsigned v = atomic_fetch_or_explicit(&c->state, 1u, memory_order_acq_rel);
    if ((v >> 1) == 0) return;
    pthread_mutex_lock(&c->mu);
    while (!c->notified) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

void pardo_blocking_counter_wait(pardo_blocking_counter *c) { pardo_blocking_counter_wait_spinning(c, 0); }

bool pardo_blocking_counter_wait_for(pardo_blocking_counter *c, uint64_t timeout_ns) {
    uint64_t deadline = pardo_now_ns() + timeout_ns;
    if (spin_until_zero(c, 0)) return true;
    unsigned v = atomic_fetch_or_explicit(&c->state, 1u, memory_order_acq_rel);
    if ((v >> 1) == 0) return true;
    struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u)};
    pthread_mutex_lock(&c->mu);
    while (!c->notified) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT) continue;
        /* timed out; if the count reached zero after all, the last decrement
         * saw our bit and is about to notify: wait for it, so the caller may
         * destroy the counter as soon as we return true */
        if ((atomic_load_explicit(&c->state, memory_order_acquire) >> 1) == 0)
            while (!c->notified) pthread_cond_wait(&c->cv, &c->mu);
        break;
    }
    bool done = c->notified;
    pthread_mutex_unlock(&c->mu);
    return done;
}
