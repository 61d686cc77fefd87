/* thread_pool.h - the process's one thread pool (DESIGN: "a process
 * singleton sized once"), after libuv's threadpool.c: started lazily on first
 * use under pthread_once, sized by pardo_thread_pool_configure (pardo run
 * --threads), else $PARDO_NUM_THREADS, else the online CPUs; reset in a
 * forked child (pthread_atfork), which gets a fresh pool that starts on its
 * first use (Check forks each test).
 *
 * Who counts as a thread: a pool of size n starts n - 1 workers, and the
 * thread that forks work (pardo_thread_pool_for) runs items itself while it
 * waits, so one fork never has more than n threads running its items. A pool
 * of size 1 has no workers: everything runs on the calling thread.
 *
 * Waiting: an idle worker spins for at most PARDO_SPIN_NS (spin.h) watching
 * the queue, then blocks on a condition variable; a submit wakes blocked
 * workers only when there are some. Every function here is thread-safe
 * unless it says otherwise. */
#ifndef PARDO_THREAD_POOL_H
#define PARDO_THREAD_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

/* Most threads a pool may have (the caller included). */
#define PARDO_MAX_THREADS 1024

/* A unit of work in the pool's queue. Caller memory (no allocation per
 * submit): it must stay valid until fn has started; the pool does not touch
 * it after dequeuing, so fn may free it. Fields are the pool's. */
typedef struct pardo_pool_task {
    void (*fn)(void *arg);
    void *arg;
    struct pardo_pool_task *next; // queue link
    int wanted;                   // workers still to run fn (pardo_thread_pool_for asks for several)
    bool queued;                  // in the queue now
} pardo_pool_task;

/* Fixes the pool's size at nthreads (1..PARDO_MAX_THREADS), threads counted
 * as above. Call before first use; once the pool has started, asking for
 * its current size is PARDO_OK and any other size PARDO_EINVAL naming both. */
int pardo_thread_pool_configure(int nthreads, pardo_status *st);

/* The pool's size: the configured one, else $PARDO_NUM_THREADS (1..PARDO_MAX_THREADS),
 * else the online CPUs. Does not start the pool. */
int pardo_thread_pool_size(void);

/* True once the workers have been started (and not shut down since). */
bool pardo_thread_pool_started(void);

/* Runs fn(arg) once on a pool worker; returns at once. t is caller memory
 * (see pardo_pool_task). With no workers (size 1, or none could be
 * started) fn runs on the calling thread before this returns. Tasks must
 * not block waiting for other pool tasks (a pool of n - 1 workers could
 * deadlock): long-running or waiting tasks belong on their own threads
 * (task.h, PARDO_TASK_OWN_THREAD). Starts the pool if needed. */
void pardo_thread_pool_submit(pardo_pool_task *t, void (*fn)(void *arg), void *arg);

/* Calls fn(arg, i) exactly once for each i in [0, n), on the calling thread
 * and on at most width - 1 workers (width is capped at the pool's size and
 * at n); returns when every call has returned. Items are handed out one at
 * a time in increasing order; which thread runs which item is not fixed.
 * Workers busy elsewhere do not delay it: the caller runs whatever nobody
 * took. While it waits for workers still running items, the caller runs
 * items of other forks that wait for helpers (never a submitted task). No
 * allocation. May be called from a pool worker. Starts the pool if needed. */
void pardo_thread_pool_for(int width, int64_t n, void (*fn)(void *arg, int64_t i), void *arg);

/* As pardo_thread_pool_for, but it wakes no blocked worker: only threads
 * already awake with nothing to do take items (a worker spinning for work,
 * a fork's caller waiting for its helpers: the thread of a parallel_do part
 * that ended first), so a loop inside a part gets help from a core that
 * would idle, and never a thread woken for it. With nobody idle when it
 * starts (or width 1), the caller runs every item, in order, queues nothing
 * and starts no pool (so a part's products do not keep the pool's lock
 * from a worker on its way to the part meant for it). */
void pardo_thread_pool_for_idle(int width, int64_t n, void (*fn)(void *arg, int64_t i), void *arg);

/* Threads awake with nothing to do right now (spinning for work, or waiting
 * in a fork's helping join): who pardo_thread_pool_for_idle's items may go
 * to. A snapshot, for tests and the loop above. */
int pardo_thread_pool_idle_awake(void);

/* Until cond(arg) holds: runs queued forks' helper runs, spinning up to
 * spin_ns (0: PARDO_SPIN_NS) since the start or, after a helper run, the
 * longer of that and pardo_spin_budget of the run; counted among the threads
 * awake and idle meanwhile (pardo_thread_pool_for_idle offers them items).
 * True when cond held, false when the spin ran out. */
bool pardo_thread_pool_spin_helping(bool (*cond)(void *arg), void *arg, uint64_t spin_ns);

/* Blocks until cond(arg) holds, helping forks meanwhile: spins as
 * pardo_thread_pool_spin_helping (spin_ns at first, as after one's own work;
 * PARDO_SPIN_NS once woken), then blocks on a condition variable that
 * a fork wanting more helpers than the workers free wakes, and
 * pardo_thread_pool_notify. Whoever makes cond true must call
 * pardo_thread_pool_notify after (cond is checked under the pool's lock
 * before blocking, so that call is never missed). For threads outside the
 * pool (a waiter is the pool's n-th thread); not from a pool task. */
void pardo_thread_pool_wait_until(bool (*cond)(void *arg), void *arg, uint64_t spin_ns);

/* Wakes the threads blocked in pardo_thread_pool_wait_until to check their
 * conditions. Takes the pool's lock. */
void pardo_thread_pool_notify(void);

/* Stops and joins the workers after they finish the queued tasks; the pool
 * returns to not started (configure may size it anew; the next use starts
 * it). main calls it before it returns, so that a run ends with every
 * thread joined (valgrind's leak check counts an unjoined thread's stack);
 * tests and tools may too. A no-op in a forked child whose pool has not
 * started (the atfork handler leaves it unstarted). Not thread-safe:
 * nothing may use the pool during the call. */
void pardo_thread_pool_shutdown(void);

#endif
