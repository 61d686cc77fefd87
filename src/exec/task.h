/* task.h - Task and TaskGroup with MindSpore's semantics (minddata's
 * TaskGroup): a task is a function that returns a status; its group keeps
 * the first real error and, when one happens, interrupts the others;
 * interrupt_all sets a flag the tasks poll (pardo_task_should_stop) and
 * wakes their interruptible waits (pardo_wait_post_wait, pardo_task_sleep);
 * join_all waits for every task and returns the first error.
 *
 * Where tasks run: PARDO_TASK_OWN_THREAD gives the task a dedicated thread
 * for its whole life - for long-running or blocking work such as a data
 * loader's producer and consumer, which must not hold pool workers (DESIGN:
 * only the loader's TaskGroup creates threads besides the pool).
 * PARDO_TASK_POOL runs it on the shared pool (thread_pool.h): short work
 * that never waits for another task; with a pool of size 1 it runs at once
 * on the spawning thread.
 *
 * Error codes: PARDO_ECANCELED from a task means "stopped because it was
 * interrupted" (a clean stop): it is kept only when nothing else was
 * reported, and never overwrites a real error. A group and its tasks are
 * freed together by pardo_task_group_free. Every function is thread-safe
 * unless it says otherwise. */
#ifndef PARDO_TASK_H
#define PARDO_TASK_H

#include <pthread.h>
#include <stdbool.h>

#include "core/status.h"

typedef struct pardo_task pardo_task;
typedef struct pardo_task_group pardo_task_group;

/* A task's body: returns PARDO_OK or a code with st filled (st is the
 * task's own, cleared before the call). self is the running task, for
 * pardo_task_should_stop and the interruptible waits. */
typedef int (*pardo_task_fn)(pardo_task *self, void *arg, pardo_status *st);

typedef enum pardo_task_where {
    PARDO_TASK_OWN_THREAD = 0, /* a dedicated thread, joined by join_all */
    PARDO_TASK_POOL,           /* the shared thread pool */
} pardo_task_where;

/* A new empty group; NULL when out of memory. Free with pardo_task_group_free. */
pardo_task_group *pardo_task_group_new(void);

/* Interrupts and joins any task still running, then frees the group and its
 * tasks. NULL is a no-op. No other call on g may run concurrently. */
void pardo_task_group_free(pardo_task_group *g);

/* Starts fn(task, arg, st) as a task named name (copied; shown in errors)
 * running where said. arg is borrowed: it must outlive the task. When the
 * group is already interrupted the task still starts and sees
 * pardo_task_should_stop true. PARDO_ENOMEM, or PARDO_ERUNTIME when no
 * thread can be created. Must not race with join_all or free. */
int pardo_task_group_spawn(pardo_task_group *g, const char *name, pardo_task_where where, pardo_task_fn fn, void *arg,
                           pardo_status *st);

/* Sets the group's stop flag and wakes every task blocked in an
 * interruptible wait. Tasks stop when they next look. Returns at once. */
void pardo_task_group_interrupt_all(pardo_task_group *g);

/* True once the group was interrupted (by interrupt_all or a task's error). */
bool pardo_task_group_interrupted(const pardo_task_group *g);

/* Waits for every task spawned so far, then returns the first real error
 * (its message prefixed "task 'NAME': "), else PARDO_ECANCELED when a task
 * stopped on interrupt, else PARDO_OK. The group can spawn again after. */
int pardo_task_group_join_all(pardo_task_group *g, pardo_status *st);

/* The first error the group holds (as join_all would return it) without
 * waiting; PARDO_OK when none yet. */
int pardo_task_group_error(pardo_task_group *g, pardo_status *st);

/* True when the task's group was interrupted: the task should return
 * PARDO_ECANCELED soon. NULL (not a task) is false. */
bool pardo_task_should_stop(const pardo_task *t);

/* The task's name (owned by the task). */
const char *pardo_task_name(const pardo_task *t);

/* The task running on this thread, or NULL. */
pardo_task *pardo_task_self(void);

/* A flag one side sets and the other waits for, whose waits a TaskGroup
 * interrupt wakes (MindSpore's WaitPost). Caller memory. */
typedef struct pardo_wait_post {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool posted;
} pardo_wait_post;

/* Initialises w, not posted; pair with pardo_wait_post_destroy. */
void pardo_wait_post_init(pardo_wait_post *w);
void pardo_wait_post_destroy(pardo_wait_post *w);

/* Sets the flag and wakes every waiter. */
void pardo_wait_post_set(pardo_wait_post *w);

/* Clears the flag. */
void pardo_wait_post_clear(pardo_wait_post *w);

/* Blocks until w is set: PARDO_OK. When self (may be NULL: not
 * interruptible) is interrupted first, PARDO_ECANCELED with st filled. */
int pardo_wait_post_wait(pardo_wait_post *w, pardo_task *self, pardo_status *st);

/* Waits seconds, or less when self is interrupted: PARDO_OK after the full
 * time, PARDO_ECANCELED (st filled) on interrupt. A timed wait on a
 * condition variable, never a sleep loop. */
int pardo_task_sleep(pardo_task *self, double seconds, pardo_status *st);

#endif
