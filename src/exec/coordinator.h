/* coordinator.h - tf.train.Coordinator: a stop flag shared by a set of
 * named tasks (a loader's producer and consumer, a trainer), the first
 * status that asked to stop, and a join that waits for the tasks with a
 * grace period after the stop.
 *
 * The coordinator creates no threads: tasks run where their owner put them
 * (a TaskGroup, task.h). A task is registered by name before it starts,
 * polls pardo_coordinator_should_stop (or sleeps in
 * pardo_coordinator_wait_for_stop), and reports pardo_coordinator_done when
 * it returns. Every function is thread-safe. */
#ifndef PARDO_COORDINATOR_H
#define PARDO_COORDINATOR_H

#include <stdbool.h>

#include "core/status.h"

typedef struct pardo_coordinator pardo_coordinator;

/* A new coordinator, not stopped, with no tasks; NULL when out of memory.
 * Free with pardo_coordinator_free. */
pardo_coordinator *pardo_coordinator_new(void);

/* Frees c. The tasks must no longer use it (join returned with no
 * stragglers, or their threads were joined). NULL is a no-op. */
void pardo_coordinator_free(pardo_coordinator *c);

/* Asks every task to stop. The first request's status is kept (copied; st
 * may be NULL or PARDO_OK for a stop without error; PARDO_ECANCELED counts
 * as a clean stop); later requests change nothing, as in TF. Wakes
 * wait_for_stop and join. */
void pardo_coordinator_request_stop(pardo_coordinator *c, const pardo_status *st);

/* True once a stop was requested (and not cleared). */
bool pardo_coordinator_should_stop(pardo_coordinator *c);

/* Waits until a stop is requested or timeout_s passes (negative: no
 * limit); true when a stop was requested. A task's interruptible sleep. */
bool pardo_coordinator_wait_for_stop(pardo_coordinator *c, double timeout_s);

/* Forgets the stop request and its status, so the coordinator can run
 * another set of tasks (TF's clear_stop). */
void pardo_coordinator_clear_stop(pardo_coordinator *c);

/* Registers a running task called name (copied); *id identifies it for
 * pardo_coordinator_done. PARDO_ENOMEM. */
int pardo_coordinator_register(pardo_coordinator *c, const char *name, int *id, pardo_status *st);

/* Says the task id has returned. Call it last, from the task. */
void pardo_coordinator_done(pardo_coordinator *c, int id);

/* Number of registered tasks still running. */
int pardo_coordinator_running(pardo_coordinator *c);

/* Waits until every registered task is done or a stop is requested; after
 * a stop, waits at most grace_s more for the rest. Returns PARDO_ERUNTIME
 * naming the tasks still running when the grace period ended (and the stop
 * request's status, if it had one); else the status given to the first
 * request_stop when it was an error; else PARDO_OK. Finished tasks are
 * unregistered; stragglers stay registered. */
int pardo_coordinator_join(pardo_coordinator *c, double grace_s, pardo_status *st);

#endif
