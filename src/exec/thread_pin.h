/* thread_pin.h - where the pool's threads run (PARDO_PIN_THREADS).
 *
 * Unpinned, Linux may leave two of the pool's threads on one core (a
 * waker's wakee placed beside it) for the whole run while another core
 * idles: on 2 cores about one process in eight ran the two-tower graph's
 * towers one after the other. Pinned, each thread keeps a core of its own,
 * as OpenMP's OMP_PROC_BIND=true places a team (its first thread included).
 *
 *   PARDO_PIN_THREADS=auto (or unset): pin when the pool has as many
 *     threads as the CPUs the process may run on (2 or more: it has them
 *     all; a smaller pool pinned to the first CPUs would share them with
 *     any other process doing the same while the rest idle; `taskset -c`
 *     makes the mask smaller) and the process is not one of several MPI
 *     ranks on the host;
 *   on: pin whenever the pool has 2 threads or more (thread k to the
 *     process's CPU k modulo their count);
 *   off: never. */
#ifndef PARDO_EXEC_THREAD_PIN_H
#define PARDO_EXEC_THREAD_PIN_H

#include <stdbool.h>

typedef enum pardo_pin_mode { PARDO_PIN_AUTO, PARDO_PIN_ON, PARDO_PIN_OFF } pardo_pin_mode;

/* The mode a PARDO_PIN_THREADS value names (NULL or "": auto); false for
 * any other word. The CLI refuses a bad value with it; the pool reads an
 * unknown word as auto. */
bool pardo_pin_mode_parse(const char *text, pardo_pin_mode *mode);

/* Decides where n threads go: true, with cpus[k] the CPU of thread k (0 the
 * thread starting the pool) for k < n, when they are to be pinned; false to
 * leave them as they are. Reads PARDO_PIN_THREADS and the calling thread's
 * affinity mask (the mask saved by pardo_pin_save_caller, once it pinned). */
bool pardo_pin_plan(int n, int *cpus);

/* Pins the calling thread to cpu; false when the system refused. */
bool pardo_pin_self(int cpu);

/* Saves the calling thread's mask before the pool pins it, and puts it back
 * (the thread that saved it only: the pool's shutdown, or a forked child
 * whose only thread is that one). */
void pardo_pin_save_caller(void);
void pardo_pin_restore_caller(void);

#endif
