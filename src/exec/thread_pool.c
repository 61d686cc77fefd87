/* thread_pool.c - the lazily started singleton pool (see thread_pool.h).
 * One mutex-guarded FIFO of caller-owned tasks; workers spin on an atomic
 * count of queued tasks before they block on a condition variable. */
#include "exec/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/blocking_counter.h"
#include "exec/spin.h"
#include "exec/thread_pin.h"
#include "trace/trace.h"

/* The queue's mutex is glibc's adaptive kind: a thread that finds it held
 * spins a little before sleeping in the kernel. Its critical sections are a
 * few loads and stores, and a fork takes it twice (enqueue, cancel) while a
 * spinning worker takes it once; with a plain mutex the loser of that race
 * slept in futex_wait and the fork's p90 went from ~1.3 to ~25 us. */
static struct {
    pthread_mutex_t mu;           // guards the queue, idle, stopping
    pthread_cond_t cv;            // blocked workers wait here
    pardo_pool_task *head, *tail; // FIFO of tasks with wanted > 0
    int idle;                     // workers blocked in cv
    pthread_cond_t outside_cv;    // threads blocked in pardo_thread_pool_wait_until wait here
    atomic_int outside;           // how many (changed under mu; read without it by notify)
    bool stopping;                // shutdown asked
    int size;                     // threads, the caller included
    int n_workers;                // workers running
    pthread_t workers[PARDO_MAX_THREADS];
    bool pinned;                  // each thread on a CPU of its own (thread_pin.h): thread k on cpus[k]
    int cpus[PARDO_MAX_THREADS];
    _Alignas(PARDO_CACHE_LINE) atomic_int queued; // tasks in the queue, read by spinning workers
    /* threads awake with nothing to do that take a queued helper task: workers spinning for work, forks'
     * callers in a helping join; pardo_thread_pool_for_idle queues nothing while there are none */
    _Alignas(PARDO_CACHE_LINE) atomic_int idle_awake;
    _Alignas(PARDO_CACHE_LINE) atomic_bool started;
} pool = {.mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP, .cv = PTHREAD_COND_INITIALIZER,
           .outside_cv = PTHREAD_COND_INITIALIZER};

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t config_mu = PTHREAD_MUTEX_INITIALIZER; // guards configured and the start
static int configured;                                        // 0: not configured
static atomic_bool atfork_registered;

static int env_size(void) {
    const char *env = getenv("PARDO_NUM_THREADS");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (*end == '\0' && n >= 1 && n <= PARDO_MAX_THREADS) return (int)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > PARDO_MAX_THREADS ? PARDO_MAX_THREADS : (int)n;
}

int pardo_thread_pool_size(void) {
    if (atomic_load(&pool.started)) return pool.size; /* written before started was set; kernels ask often */
    pthread_mutex_lock(&config_mu);
    int n = atomic_load(&pool.started) ? pool.size : configured ? configured : env_size();
    pthread_mutex_unlock(&config_mu);
    return n;
}

bool pardo_thread_pool_started(void) { return atomic_load(&pool.started); }

int pardo_thread_pool_configure(int nthreads, pardo_status *st) {
    if (nthreads < 1 || nthreads > PARDO_MAX_THREADS)
        return pardo_errorf(st, PARDO_EINVAL, "thread pool: %d threads, expected 1..%d", nthreads, PARDO_MAX_THREADS);
    int rc = PARDO_OK;
    pthread_mutex_lock(&config_mu);
    if (atomic_load(&pool.started) && pool.size != nthreads)
        rc = pardo_errorf(st, PARDO_EINVAL,
                          "thread pool: already running with %d threads; cannot resize it to %d "
                          "(configure it before first use)",
                          pool.size, nthreads);
    else configured = nthreads;
    pthread_mutex_unlock(&config_mu);
    return rc;
}

/* Takes the task at *link (prev: the one before it, NULL for the head) out
 * of the queue; call with pool.mu held. */
static void unlink_task(pardo_pool_task **link, pardo_pool_task *prev) {
    pardo_pool_task *t = *link;
    *link = t->next;
    if (pool.tail == t) pool.tail = prev;
    t->queued = false;
    atomic_fetch_sub_explicit(&pool.queued, 1, memory_order_relaxed);
}

/* Takes one run of the task at *link (prev as unlink_task): out of the
 * queue once nobody else is wanted for it. Call with pool.mu held. */
static pardo_pool_task *take_run(pardo_pool_task **link, pardo_pool_task *prev) {
    pardo_pool_task *t = *link;
    if (--t->wanted == 0) unlink_task(link, prev);
    return t;
}

/* Takes one run of the head task; call with pool.mu held and a task queued. */
static void take_head(void (**fn)(void *), void **arg) {
    pardo_pool_task *t = take_run(&pool.head, NULL);
    *fn = t->fn;
    *arg = t->arg;
}

static void *worker_main(void *index) {
    char name[32]; /* "pool-K" in traces; K from 1 (the forking thread is not a worker) */
    snprintf(name, sizeof name, "pool-%d", (int)(intptr_t)index);
    pardo_trace_set_thread_name(name);
    if (pool.pinned) pardo_pin_self(pool.cpus[(intptr_t)index]); /* both written before the worker was made */
    uint64_t worked_ns = 0; /* the last task's time: how long to spin for the next (pardo_spin_budget) */
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (!pool.head && !pool.stopping) {
            /* spin before blocking: a fork that comes soon finds us awake */
            pthread_mutex_unlock(&pool.mu);
            pardo_spin sp = {.budget = pardo_spin_budget(worked_ns)};
            atomic_fetch_add_explicit(&pool.idle_awake, 1, memory_order_relaxed);
            while (atomic_load_explicit(&pool.queued, memory_order_relaxed) == 0 && pardo_spin_step(&sp)) {
            }
            atomic_fetch_sub_explicit(&pool.idle_awake, 1, memory_order_relaxed);
            pthread_mutex_lock(&pool.mu);
            if (pool.head || pool.stopping) break;
            pool.idle++;
            pthread_cond_wait(&pool.cv, &pool.mu);
            pool.idle--;
        }
        if (!pool.head) break; /* stopping, and the queue is drained */
        void (*fn)(void *);
        void *arg;
        take_head(&fn, &arg);
        pthread_mutex_unlock(&pool.mu);
        const uint64_t t0 = pardo_now_ns();
        fn(arg);
        worked_ns = pardo_now_ns() - t0;
        pthread_mutex_lock(&pool.mu);
    }
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

/* The child of a fork has none of the parent's workers: give it a pool
 * that is not started (libuv resets its uv_once the same way). Locks the
 * parent may have held at the fork are re-initialised. */
static void reset_in_child(void) {
    static const pthread_once_t fresh_once = PTHREAD_ONCE_INIT;
    memcpy(&start_once, &fresh_once, sizeof start_once);
    pthread_mutex_init(&config_mu, NULL);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&pool.mu, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_cond_init(&pool.cv, NULL);
    pthread_cond_init(&pool.outside_cv, NULL);
    pool.head = pool.tail = NULL;
    pool.idle = 0;
    atomic_store(&pool.outside, 0);
    pool.stopping = false;
    pool.n_workers = 0;
    pool.size = 0;
    pool.pinned = false;
    pardo_pin_restore_caller(); /* the child's one thread may be the parent's pinned first thread */
    atomic_store(&pool.queued, 0);
    atomic_store(&pool.idle_awake, 0);
    atomic_store(&pool.started, false);
}

static void start_pool(void) {
    pthread_mutex_lock(&config_mu);
    if (!atomic_exchange(&atfork_registered, true)) pthread_atfork(NULL, NULL, reset_in_child);
    pool.size = configured ? configured : env_size();
    pool.stopping = false;
    pool.n_workers = 0;
    /* a core each, the starting thread's first, so that no two share one (thread_pin.h) */
    pool.pinned = pardo_pin_plan(pool.size, pool.cpus);
    if (pool.pinned) {
        pardo_pin_save_caller();
        pardo_pin_self(pool.cpus[0]);
    }
    for (int i = 0; i < pool.size - 1; i++) {
        if (pthread_create(&pool.workers[i], NULL, worker_main, (void *)(intptr_t)(i + 1)) != 0)
            break; /* run with fewer */
        pool.n_workers++;
    }
    atomic_store(&pool.started, true);
    pthread_mutex_unlock(&config_mu);
}

static void ensure_started(void) { pthread_once(&start_once, start_pool); }

static bool is_helper_task(const pardo_pool_task *t);

/* Appends t (wanted set) and, with wake_blocked, wakes up to `wanted` blocked workers (and, for a fork's
 * helper runs the workers cannot all take, the threads blocked in pardo_thread_pool_wait_until). */
static void enqueue(pardo_pool_task *t, bool wake_blocked) {
    pthread_mutex_lock(&pool.mu);
    t->next = NULL;
    t->queued = true;
    if (pool.tail) pool.tail->next = t;
    else pool.head = t;
    pool.tail = t;
    atomic_fetch_add_explicit(&pool.queued, 1, memory_order_relaxed);
    int wake = !wake_blocked ? 0 : t->wanted < pool.idle ? t->wanted : pool.idle;
    if (wake == pool.idle && wake > 1) pthread_cond_broadcast(&pool.cv);
    else
        for (int i = 0; i < wake; i++) pthread_cond_signal(&pool.cv);
    /* a fork's helpers may also come from threads blocked outside the pool (wait_until) */
    if (wake_blocked && atomic_load_explicit(&pool.outside, memory_order_relaxed) > 0 && t->wanted > wake &&
        is_helper_task(t))
        pthread_cond_broadcast(&pool.outside_cv);
    pthread_mutex_unlock(&pool.mu);
}

/* Takes t out of the queue if it is still there; returns how many of its
 * runs nobody claimed. */
static int cancel(pardo_pool_task *t) {
    int left = 0;
    pthread_mutex_lock(&pool.mu);
    if (t->queued) {
        pardo_pool_task **link = &pool.head, *prev = NULL;
        while (*link != t) {
            prev = *link;
            link = &(*link)->next;
        }
        unlink_task(link, prev);
        left = t->wanted;
        t->wanted = 0;
    }
    pthread_mutex_unlock(&pool.mu);
    return left;
}

void pardo_thread_pool_submit(pardo_pool_task *t, void (*fn)(void *arg), void *arg) {
    ensure_started();
    if (pool.n_workers == 0) {
        fn(arg);
        return;
    }
    t->fn = fn;
    t->arg = arg;
    t->wanted = 1;
    enqueue(t, true);
}

typedef struct for_job {
    pardo_pool_task task;
    void (*fn)(void *arg, int64_t i);
    void *arg;
    int64_t n;
    _Alignas(PARDO_CACHE_LINE) atomic_int_least64_t next; // next item to hand out
    pardo_blocking_counter helpers;                       // helper runs not yet finished
} for_job;

static void run_items(for_job *j) {
    for (;;) {
        int64_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->n) return;
        j->fn(j->arg, i);
    }
}

static void for_helper(void *p) {
    for_job *j = p;
    run_items(j);
    pardo_blocking_counter_decrement(&j->helpers); /* last touch of j */
}

static bool is_helper_task(const pardo_pool_task *t) { return t->fn == for_helper; }

/* One run of a queued fork's helper task (for_helper), taken out of the
 * queue; NULL when none is queued. Never a submitted task: those may wait
 * on anything, a helper only runs items. */
static for_job *take_helper_run(void) {
    for_job *j = NULL;
    pthread_mutex_lock(&pool.mu);
    for (pardo_pool_task **link = &pool.head, *prev = NULL; *link; prev = *link, link = &(*link)->next)
        if ((*link)->fn == for_helper) {
            j = take_run(link, prev)->arg;
            break;
        }
    pthread_mutex_unlock(&pool.mu);
    return j;
}

/* The forking thread waits for its helpers, spinning up to spin_ns, and
 * meanwhile runs items of other forks that wait for helpers (a part's
 * thread that ended first may have forked the stage's work: the other
 * part's thread, done, helps instead of idling), then blocks. */
static void wait_helping(for_job *j, uint64_t spin_ns) {
    pardo_spin sp = {.budget = spin_ns};
    if (pardo_blocking_counter_done(&j->helpers)) return;
    atomic_fetch_add_explicit(&pool.idle_awake, 1, memory_order_relaxed);
    while (!pardo_blocking_counter_done(&j->helpers)) {
        for_job *other = atomic_load_explicit(&pool.queued, memory_order_relaxed) > 0 ? take_helper_run() : NULL;
        if (other) {
            for_helper(other);
            sp = (pardo_spin){.budget = spin_ns};
        } else if (!pardo_spin_step(&sp)) {
            break;
        }
    }
    atomic_fetch_sub_explicit(&pool.idle_awake, 1, memory_order_relaxed);
    pardo_blocking_counter_wait(&j->helpers);
}

/* pardo_thread_pool_for, and with !wake_blocked pardo_thread_pool_for_idle. */
static void pool_for(int width, int64_t n, void (*fn)(void *arg, int64_t i), void *arg, bool wake_blocked) {
    if (n <= 0) return;
    ensure_started();
    int64_t w = width;
    if (w > pool.n_workers + 1) w = pool.n_workers + 1;
    if (w > n) w = n;
    if (w <= 1) {
        for (int64_t i = 0; i < n; i++) fn(arg, i);
        return;
    }
    for_job j;
    j.fn = fn;
    j.arg = arg;
    j.n = n;
    atomic_init(&j.next, 0);
    pardo_blocking_counter_init(&j.helpers, (int)w - 1);
    j.task.fn = for_helper;
    j.task.arg = &j;
    j.task.wanted = (int)w - 1;
    enqueue(&j.task, wake_blocked);
    const uint64_t t0 = pardo_now_ns();
    run_items(&j);
    const uint64_t worked_ns = pardo_now_ns() - t0;
    int unclaimed = cancel(&j.task); /* runs no worker has started need not happen */
    if (unclaimed > 0) pardo_blocking_counter_decrement_by(&j.helpers, unclaimed);
    wait_helping(&j, pardo_spin_budget(worked_ns));
    pardo_blocking_counter_destroy(&j.helpers);
}

void pardo_thread_pool_for(int width, int64_t n, void (*fn)(void *arg, int64_t i), void *arg) {
    pool_for(width, n, fn, arg, true);
}

void pardo_thread_pool_for_idle(int width, int64_t n, void (*fn)(void *arg, int64_t i), void *arg) {
    /* nobody to help (or allowed to): no queue traffic, and no pool started for it */
    if (width <= 1 || n <= 1 || atomic_load_explicit(&pool.idle_awake, memory_order_relaxed) == 0) {
        for (int64_t i = 0; i < n; i++) fn(arg, i);
        return;
    }
    pool_for(width, n, fn, arg, false);
}

bool pardo_thread_pool_spin_helping(bool (*cond)(void *arg), void *arg, uint64_t spin_ns) {
    pardo_spin sp = {.budget = spin_ns};
    bool met;
    atomic_fetch_add_explicit(&pool.idle_awake, 1, memory_order_relaxed);
    while (!(met = cond(arg))) {
        for_job *j = atomic_load_explicit(&pool.queued, memory_order_relaxed) > 0 ? take_helper_run() : NULL;
        if (j) {
            const uint64_t t0 = pardo_now_ns();
            for_helper(j);
            /* after helping, spin as a worker back from a task does: more of the same work comes soon */
            const uint64_t budget = pardo_spin_budget(pardo_now_ns() - t0);
            sp = (pardo_spin){.budget = budget > spin_ns ? budget : spin_ns};
        } else if (!pardo_spin_step(&sp)) {
            break;
        }
    }
    atomic_fetch_sub_explicit(&pool.idle_awake, 1, memory_order_relaxed);
    return met;
}

void pardo_thread_pool_wait_until(bool (*cond)(void *arg), void *arg, uint64_t spin_ns) {
    for (;;) {
        if (pardo_thread_pool_spin_helping(cond, arg, spin_ns)) return;
        spin_ns = 0; /* woken: the plain spin */
        pthread_mutex_lock(&pool.mu);
        /* counted before cond is checked (both sequentially consistent): a notify after cond turned true
         * either is seen by the check or sees the count and wakes us */
        atomic_fetch_add(&pool.outside, 1);
        bool helper = false;
        for (pardo_pool_task *t = pool.head; t && !helper; t = t->next) helper = is_helper_task(t);
        if (!helper && !cond(arg)) pthread_cond_wait(&pool.outside_cv, &pool.mu);
        atomic_fetch_sub(&pool.outside, 1);
        pthread_mutex_unlock(&pool.mu);
    }
}

void pardo_thread_pool_notify(void) {
    atomic_thread_fence(memory_order_seq_cst); /* the caller's change to cond, before the count is read */
    if (atomic_load(&pool.outside) == 0) return;
    pthread_mutex_lock(&pool.mu);
    pthread_cond_broadcast(&pool.outside_cv);
    pthread_mutex_unlock(&pool.mu);
}

int pardo_thread_pool_idle_awake(void) { return atomic_load_explicit(&pool.idle_awake, memory_order_relaxed); }

void pardo_thread_pool_shutdown(void) {
    if (!atomic_load(&pool.started)) return;
    pthread_mutex_lock(&pool.mu);
    pool.stopping = true;
    pthread_cond_broadcast(&pool.cv);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.n_workers; i++) pthread_join(pool.workers[i], NULL);
    pthread_mutex_lock(&config_mu);
    static const pthread_once_t fresh_once = PTHREAD_ONCE_INIT;
    memcpy(&start_once, &fresh_once, sizeof start_once);
    pool.n_workers = 0;
    pool.stopping = false;
    if (pool.pinned) pardo_pin_restore_caller(); /* the starting thread's mask as it was, where this is it */
    pool.pinned = false;
    atomic_store(&pool.started, false);
    pthread_mutex_unlock(&config_mu);
}
