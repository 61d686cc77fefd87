/* task.c - tasks, task groups and interruptible waits (see task.h). */
#include "exec/task.h"

#include "trace/trace.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/spin.h"
#include "exec/thread_pool.h"

struct pardo_task {
    char *name;              // owned
    pardo_task_group *group; // borrowed: the group owns the task
    pardo_task_fn fn;
    void *arg; // borrowed
    pardo_task_where where;
    pthread_t thread;         // PARDO_TASK_OWN_THREAD
    bool has_thread;          // thread was created and is not joined yet
    pardo_pool_task node;     // PARDO_TASK_POOL: the pool's queue entry
    bool done;                // guarded by group->mu
    pardo_status st;          // what fn reported
    pthread_mutex_t mu;       // guards waiting
    pardo_wait_post *waiting; // the wait the task is blocked in, for interrupt_all
    pardo_wait_post sleeper;  // never posted: pardo_task_sleep waits on it
    pardo_task *next;         // group list
};

struct pardo_task_group {
    pthread_mutex_t mu; // guards tasks, running, rc, err, done flags
    pthread_cond_t cv;  // signalled when a task finishes
    pardo_task *tasks;  // spawned since the last join
    int running;        // tasks not finished
    atomic_bool interrupted;
    int rc;           // first real error, else PARDO_ECANCELED, else PARDO_OK
    pardo_status err; // its message
};

static _Thread_local pardo_task *current_task;

pardo_task *pardo_task_self(void) { return current_task; }

const char *pardo_task_name(const pardo_task *t) { return t->name; }

bool pardo_task_should_stop(const pardo_task *t) { return t && atomic_load(&t->group->interrupted); }

bool pardo_task_group_interrupted(const pardo_task_group *g) { return atomic_load(&g->interrupted); }

void pardo_wait_post_init(pardo_wait_post *w) {
    pthread_mutex_init(&w->mu, NULL);
    pardo_cond_init_monotonic(&w->cv);
    w->posted = false;
}

void pardo_wait_post_destroy(pardo_wait_post *w) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

void pardo_wait_post_set(pardo_wait_post *w) {
    pthread_mutex_lock(&w->mu);
    w->posted = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void pardo_wait_post_clear(pardo_wait_post *w) {
    pthread_mutex_lock(&w->mu);
    w->posted = false;
    pthread_mutex_unlock(&w->mu);
}

enum { WAIT_POSTED, WAIT_INTERRUPTED, WAIT_TIMED_OUT };

/* Waits for w until deadline_ns (0: none). self (may be NULL) registers the
 * wait so interrupt_all can wake it: it publishes w under self->mu, then
 * checks its stop flag under w->mu, and the interrupter sets the flag
 * before it looks under self->mu and broadcasts under w->mu, so a wake-up
 * is never lost. */
static int wait_posted(pardo_wait_post *w, pardo_task *self, uint64_t deadline_ns) {
    if (self) {
        pthread_mutex_lock(&self->mu);
        self->waiting = w;
        pthread_mutex_unlock(&self->mu);
    }
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u), .tv_nsec = (long)(deadline_ns % 1000000000u)};
    int r = WAIT_POSTED;
    pthread_mutex_lock(&w->mu);
    while (!w->posted) {
        if (pardo_task_should_stop(self)) {
            r = WAIT_INTERRUPTED;
            break;
        }
        if (!deadline_ns) {
            pthread_cond_wait(&w->cv, &w->mu);
        } else if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT && !w->posted) {
            r = pardo_task_should_stop(self) ? WAIT_INTERRUPTED : WAIT_TIMED_OUT;
            break;
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (self) {
        pthread_mutex_lock(&self->mu);
        self->waiting = NULL;
        pthread_mutex_unlock(&self->mu);
    }
    return r;
}

int pardo_wait_post_wait(pardo_wait_post *w, pardo_task *self, pardo_status *st) {
    if (wait_posted(w, self, 0) == WAIT_INTERRUPTED)
        return pardo_errorf(st, PARDO_ECANCELED, "task '%s' was interrupted while waiting", self->name);
    return PARDO_OK;
}

int pardo_task_sleep(pardo_task *self, double seconds, pardo_status *st) {
    uint64_t ns = seconds > 0 ? (uint64_t)(seconds * 1e9) : 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    pardo_wait_post local, *w = self ? &self->sleeper : &local;
    if (!self) pardo_wait_post_init(&local);
    int r = wait_posted(w, self, now + ns + 1);
    if (!self) pardo_wait_post_destroy(&local);
    if (r == WAIT_INTERRUPTED)
        return pardo_errorf(st, PARDO_ECANCELED, "task '%s' was interrupted while sleeping", self->name);
    return PARDO_OK;
}

pardo_task_group *pardo_task_group_new(void) {
    pardo_task_group *g = calloc(1, sizeof(*g));
    if (!g) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    atomic_init(&g->interrupted, false);
    g->rc = PARDO_OK;
    pardo_status_clear(&g->err);
    return g;
}

void pardo_task_group_interrupt_all(pardo_task_group *g) {
    atomic_store(&g->interrupted, true);
    pthread_mutex_lock(&g->mu);
    for (pardo_task *t = g->tasks; t; t = t->next) {
        if (t->done) continue;
        pthread_mutex_lock(&t->mu);
        if (t->waiting) {
            pthread_mutex_lock(&t->waiting->mu);
            pthread_cond_broadcast(&t->waiting->cv);
            pthread_mutex_unlock(&t->waiting->mu);
        }
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

/* Keeps the first real error; a clean stop only fills an empty slot. */
static void record(pardo_task_group *g, pardo_task *t, int rc) {
    if (rc == PARDO_OK) return;
    if (g->rc == PARDO_OK || (g->rc == PARDO_ECANCELED && rc != PARDO_ECANCELED)) {
        g->rc = rc;
        g->err = t->st;
        g->err.code = rc;
        pardo_status_prefix(&g->err, "task '%s': ", t->name);
    }
}

static void run_task(pardo_task *t) {
    pardo_task_group *g = t->group;
    current_task = t;
    pardo_status_clear(&t->st);
    int rc = t->fn(t, t->arg, &t->st);
    current_task = NULL;
    if (rc != PARDO_OK && rc != PARDO_ECANCELED)
        pardo_task_group_interrupt_all(g); /* MindSpore: an error stops the group */
    pthread_mutex_lock(&g->mu);
    record(g, t, rc);
    t->done = true;
    g->running--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu); /* last touch of t and g: the joiner may free them now */
}

static void *thread_main(void *p) {
    pardo_trace_set_thread_name(((pardo_task *)p)->name); /* its lane in a trace (nothing when tracing is off) */
    run_task(p);
    return NULL;
}

static void pool_main(void *p) { run_task(p); }

static void free_task(pardo_task *t) {
    pthread_mutex_destroy(&t->mu);
    pardo_wait_post_destroy(&t->sleeper);
    free(t->name);
    free(t);
}

int pardo_task_group_spawn(pardo_task_group *g, const char *name, pardo_task_where where, pardo_task_fn fn, void *arg,
                           pardo_status *st) {
    pardo_task *t = calloc(1, sizeof(*t));
    if (!t || !(t->name = strdup(name ? name : "task"))) {
        free(t);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory starting task '%s'", name ? name : "task");
    }
    t->group = g;
    t->fn = fn;
    t->arg = arg;
    t->where = where;
    pthread_mutex_init(&t->mu, NULL);
    pardo_wait_post_init(&t->sleeper);
    pthread_mutex_lock(&g->mu);
    t->next = g->tasks;
    g->tasks = t;
    g->running++;
    pthread_mutex_unlock(&g->mu);
    if (where == PARDO_TASK_POOL) {
        pardo_thread_pool_submit(&t->node, pool_main, t);
        return PARDO_OK;
    }
    int e = pthread_create(&t->thread, NULL, thread_main, t);
    if (e == 0) {
        t->has_thread = true; /* only join_all (this thread's caller) reads it */
        return PARDO_OK;
    }
    pthread_mutex_lock(&g->mu);
    for (pardo_task **link = &g->tasks; *link; link = &(*link)->next)
        if (*link == t) {
            *link = t->next;
            break;
        }
    g->running--;
    pthread_mutex_unlock(&g->mu);
    free_task(t);
    return pardo_errorf(st, PARDO_ERUNTIME, "cannot start a thread for task '%s': %s", name ? name : "task",
                        strerror(e));
}

int pardo_task_group_error(pardo_task_group *g, pardo_status *st) {
    pthread_mutex_lock(&g->mu);
    int rc = g->rc;
    if (rc != PARDO_OK && st) *st = g->err;
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int pardo_task_group_join_all(pardo_task_group *g, pardo_status *st) {
    pthread_mutex_lock(&g->mu);
    while (g->running > 0) pthread_cond_wait(&g->cv, &g->mu);
    pardo_task *list = g->tasks;
    g->tasks = NULL;
    int rc = g->rc;
    if (rc != PARDO_OK && st) *st = g->err;
    g->rc = PARDO_OK;
    pardo_status_clear(&g->err);
    atomic_store(&g->interrupted, false);
    pthread_mutex_unlock(&g->mu);
    while (list) {
        pardo_task *next = list->next;
        if (list->has_thread) pthread_join(list->thread, NULL);
        free_task(list);
        list = next;
    }
    return rc;
}

void pardo_task_group_free(pardo_task_group *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    bool busy = g->running > 0;
    pthread_mutex_unlock(&g->mu);
    if (busy) pardo_task_group_interrupt_all(g);
    pardo_task_group_join_all(g, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
