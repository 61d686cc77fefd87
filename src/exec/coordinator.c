/* coordinator.c - stop flag, first status, named tasks, join with a grace
 * period (see coordinator.h). */
#include "exec/coordinator.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/spin.h"

typedef struct coord_task {
    char *name; // owned; NULL for a free slot
    bool running;
} coord_task;

struct pardo_coordinator {
    pthread_mutex_t mu; // guards everything below
    pthread_cond_t cv;  // a stop request or a task's end
    bool stop;
    pardo_status status; // the first request's status; code PARDO_OK when it had none
    coord_task *tasks;   // registered tasks, indexed by id
    int n_tasks, cap_tasks;
};

static struct timespec deadline_after(double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (seconds < 0) seconds = 0;
    if (seconds > 1e9) seconds = 1e9;
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)((seconds - (double)(uint64_t)seconds) * 1e9);
    ts.tv_sec += (time_t)seconds + (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

pardo_coordinator *pardo_coordinator_new(void) {
    pardo_coordinator *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pardo_cond_init_monotonic(&c->cv);
    pardo_status_clear(&c->status);
    return c;
}

void pardo_coordinator_free(pardo_coordinator *c) {
    if (!c) return;
    for (int i = 0; i < c->n_tasks; i++) free(c->tasks[i].name);
    free(c->tasks);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void pardo_coordinator_request_stop(pardo_coordinator *c, const pardo_status *st) {
    pthread_mutex_lock(&c->mu);
    if (!c->stop) {
        c->stop = true;
        if (st && st->code != PARDO_OK && st->code != PARDO_ECANCELED) c->status = *st;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

bool pardo_coordinator_should_stop(pardo_coordinator *c) {
    pthread_mutex_lock(&c->mu);
    bool s = c->stop;
    pthread_mutex_unlock(&c->mu);
    return s;
}

bool pardo_coordinator_wait_for_stop(pardo_coordinator *c, double timeout_s) {
    pthread_mutex_lock(&c->mu);
    if (timeout_s < 0) {
        while (!c->stop) pthread_cond_wait(&c->cv, &c->mu);
    } else {
        struct timespec ts = deadline_after(timeout_s);
        while (!c->stop)
            if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
    }
    bool s = c->stop;
    pthread_mutex_unlock(&c->mu);
    return s;
}

void pardo_coordinator_clear_stop(pardo_coordinator *c) {
    pthread_mutex_lock(&c->mu);
    c->stop = false;
    pardo_status_clear(&c->status);
    pthread_mutex_unlock(&c->mu);
}

int pardo_coordinator_register(pardo_coordinator *c, const char *name, int *id, pardo_status *st) {
    char *copy = strdup(name ? name : "task");
    if (!copy) return pardo_errorf(st, PARDO_ENOMEM, "coordinator: out of memory registering '%s'", name);
    pthread_mutex_lock(&c->mu);
    int slot = -1;
    for (int i = 0; i < c->n_tasks && slot < 0; i++)
        if (!c->tasks[i].name) slot = i;
    if (slot < 0) {
        if (c->n_tasks == c->cap_tasks) {
            int cap = c->cap_tasks ? c->cap_tasks * 2 : 8;
            coord_task *t = realloc(c->tasks, (size_t)cap * sizeof(*t));
            if (!t) {
                pthread_mutex_unlock(&c->mu);
                free(copy);
                return pardo_errorf(st, PARDO_ENOMEM, "coordinator: out of memory registering '%s'", name);
            }
            c->tasks = t;
            c->cap_tasks = cap;
        }
        slot = c->n_tasks++;
    }
    c->tasks[slot] = (coord_task){copy, true};
    *id = slot;
    pthread_mutex_unlock(&c->mu);
    return PARDO_OK;
}

void pardo_coordinator_done(pardo_coordinator *c, int id) {
    pthread_mutex_lock(&c->mu);
    if (id >= 0 && id < c->n_tasks && c->tasks[id].name) c->tasks[id].running = false;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Call with c->mu held. */
static int count_running(const pardo_coordinator *c) {
    int n = 0;
    for (int i = 0; i < c->n_tasks; i++) n += c->tasks[i].name && c->tasks[i].running;
    return n;
}

int pardo_coordinator_running(pardo_coordinator *c) {
    pthread_mutex_lock(&c->mu);
    int n = count_running(c);
    pthread_mutex_unlock(&c->mu);
    return n;
}

int pardo_coordinator_join(pardo_coordinator *c, double grace_s, pardo_status *st) {
    pthread_mutex_lock(&c->mu);
    while (count_running(c) > 0 && !c->stop) pthread_cond_wait(&c->cv, &c->mu);
    if (count_running(c) > 0) { /* stopped: the grace period */
        struct timespec ts = deadline_after(grace_s);
        while (count_running(c) > 0)
            if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
    }
    char names[PARDO_MSG_MAX / 2];
    size_t used = 0;
    int stragglers = 0;
    names[0] = '\0';
    for (int i = 0; i < c->n_tasks; i++) {
        coord_task *t = &c->tasks[i];
        if (!t->name) continue;
        if (!t->running) { /* finished: unregister */
            free(t->name);
            t->name = NULL;
            continue;
        }
        stragglers++;
        if (used < sizeof names) {
            int w = snprintf(names + used, sizeof names - used, "%s'%s'", stragglers > 1 ? ", " : "", t->name);
            if (w > 0) used += (size_t)w;
        }
    }
    while (c->n_tasks > 0 && !c->tasks[c->n_tasks - 1].name) c->n_tasks--;
    int rc = PARDO_OK;
    if (stragglers > 0) {
        rc =
            pardo_errorf(st, PARDO_ERUNTIME, "coordinator: %d task%s still running %g s after the stop request: %s%s%s",
                         stragglers, stragglers == 1 ? "" : "s", grace_s, names,
                         c->status.code != PARDO_OK ? "; the stop was requested by: " : "",
                         c->status.code != PARDO_OK ? c->status.msg : "");
    } else if (c->status.code != PARDO_OK) {
        rc = c->status.code;
        if (st) *st = c->status;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
