/* engine.h - the dependency engine, after MXNet's ThreadedEngine: a function
 * is pushed with the vars it reads and writes and runs once the functions
 * pushed before it on those vars are done, on the process's thread pool
 * (exec/thread_pool.h; the engine starts no threads of its own). Push
 * returns at once: a function never runs inside pardo_engine_push on the
 * calling thread. SPEC section 5 is the contract.
 *
 * Per var, in push order: a read waits for the writes pushed before it;
 * reads between two writes may run at once; a write waits for every earlier
 * read and write (MXNet's ThreadedVar). A function that fails (returns a
 * code other than PARDO_OK) leaves its status on every var it writes; a
 * function that reads or writes such a var does not run, and passes the
 * error on to the vars it writes. wait_to_read returns the first error of
 * its var's history and clears it; wait_all the first error of all since
 * the last wait_all, and clears every var's.
 *
 * Memory: op and var blocks come from free lists grown in chunks, so a
 * push allocates nothing once the engine has seen as many ops in flight
 * (and a var as many vars at once). Every function is thread-safe. */
#ifndef PARDO_ENGINE_H
#define PARDO_ENGINE_H

#include <stdint.h>

#include "core/status.h"

typedef struct pardo_engine pardo_engine;
typedef struct pardo_var pardo_var;

/* A pushed function: returns PARDO_OK, or a code with st filled (st is the
 * engine's, cleared before the call; its message becomes the error of the
 * vars the function writes). */
typedef int (*pardo_engine_fn)(void *arg, pardo_status *st);

/* The process's engine, made on first use; never NULL. */
pardo_engine *pardo_engine_get(void);

/* A new var with no pending ops and no error; NULL with PARDO_ENOMEM in st.
 * Free it with pardo_engine_delete_var. */
pardo_var *pardo_engine_new_var(pardo_engine *e, pardo_status *st);

/* Pushes fn(arg), to run once the ops pushed earlier on reads[0..n_reads)
 * and writes[0..n_writes) allow (both arrays borrowed for the call; arg is
 * the caller's and must stay valid until fn has run). `name` (borrowed: a
 * string that outlives the op, such as a literal or the program's op name;
 * may be NULL) names the op in errors. Returns at once. PARDO_EINVAL, and
 * nothing is pushed, for a NULL fn, a NULL or repeated var, or a var both
 * read and written. */
int pardo_engine_push(pardo_engine *e, pardo_engine_fn fn, void *arg, pardo_var *const *reads, int n_reads,
                      pardo_var *const *writes, int n_writes, const char *name, pardo_status *st);

/* Blocks until every write pushed on v before the call has finished (it
 * pushes an op that reads v), running ready ops on this thread meanwhile.
 * Returns the first error in v's history (the message names the op that
 * failed) and clears it, else PARDO_OK. PARDO_EINVAL, without waiting,
 * when called from inside an engine op (it would deadlock). */
int pardo_engine_wait_to_read(pardo_engine *e, pardo_var *v, pardo_status *st);

/* Blocks until every op pushed so far has finished, running ready ops on
 * this thread meanwhile. Returns the first error of any op since the last
 * wait_all and clears every var's error, else PARDO_OK. PARDO_EINVAL from
 * inside an engine op. */
int pardo_engine_wait_all(pardo_engine *e, pardo_status *st);

/* Frees v once the ops pushed on it so far are done (it pushes an op that
 * writes v). Nothing may be pushed on v after this call. PARDO_EINVAL for
 * a NULL v. */
int pardo_engine_delete_var(pardo_engine *e, pardo_var *v, pardo_status *st);

/* Beyond SPEC section 5, for pardo's own executor and tests. */

/* The trace tick (trace.h's pardo_trace_ticks) at which the op running on
 * the calling thread became ready: its last dependency was met. 0 outside
 * an engine op, or when no trace was recording as it became ready. */
int64_t pardo_engine_op_ready_ticks(void);

/* Ops pushed and not yet finished (a snapshot). */
int64_t pardo_engine_pending(pardo_engine *e);

/* Frees the engine's free lists (main calls it before it returns, so that
 * valgrind sees nothing held), after making the dispatchers still spinning
 * for work give their pool workers back; a no-op while ops are pending. No
 * var may be used after it. Not thread-safe: nothing may use the engine
 * during the call. */
void pardo_engine_shutdown(void);

#endif
