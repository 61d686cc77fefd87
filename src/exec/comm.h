/* comm.h - the MPI communicator of `mpirun -np N pardo train`: which rank
 * this process is, and the collectives the trainer and the rank_merge op
 * need. Built with MPI (make MPI=1, src/exec/comm_mpi.c) it joins the job
 * that mpirun started (its environment says so); otherwise, and in a
 * process mpirun did not start, there is one rank and every collective is
 * the identity (src/exec/comm_none.c when MPI is not built in).
 *
 * Threads: MPI is initialised with MPI_THREAD_SERIALIZED and every call
 * below takes one lock, so any thread may call them, one at a time (the
 * rank_merge op runs on a pool thread under the dataflow executor).
 * Every rank must make the same collective calls in the same order. */
#ifndef PARDO_COMM_H
#define PARDO_COMM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor.h"

/* True when MPI is built in (pardo --version says so). */
bool pardo_comm_built(void);

/* True when this process was started by mpirun (or another launcher whose
 * environment MPI reads): pardo_comm_init will join a job. */
bool pardo_comm_launched(void);

/* Joins the job when launched (MPI_Init_thread), once; a no-op otherwise
 * or when already done. PARDO_ERUNTIME when MPI cannot start. */
int pardo_comm_init(pardo_status *st);

/* This rank and the job's size (0 and 1 before init or without a job). */
int pardo_comm_rank(void);
int pardo_comm_size(void);

/* Ranks on this host (OMPI_COMM_WORLD_LOCAL_SIZE; 1 without a job), so that
 * ranks x threads stay within its cores. */
int pardo_comm_local_size(void);

/* In place: buf (n elements of dtype float32, float64 or int64) becomes
 * its sum over the ranks. The same on every rank (MPI_Allreduce). */
int pardo_comm_allreduce_sum(pardo_dtype dtype, void *buf, int64_t n, pardo_status *st);

/* A started non-blocking allreduce (pardo_comm_iallreduce_sum); 0: none. */
typedef int64_t pardo_comm_request;

/* Starts an in-place sum allreduce of buf (MPI_Iallreduce; buf must stay
 * untouched until the request completes) into *req. Every rank must start
 * its collectives in the same order. One process: done at once (*req 0). */
int pardo_comm_iallreduce_sum(pardo_dtype dtype, void *buf, int64_t n, pardo_comm_request *req, pardo_status *st);

/* Advances the started requests (Open MPI moves data only inside MPI
 * calls): MPI_Test on each of reqs[0..n) not yet done, setting done[k];
 * when another thread holds the communicator it returns at once. */
void pardo_comm_progress(pardo_comm_request *reqs, bool *done, int n);

/* A poll of the collectives in flight, for long kernels to call between
 * their blocks (the GEMM's row blocks), so that a started allreduce moves
 * on during the compute and not only between ops: rank_merge sets it
 * (pardo_comm_set_poll) to what advances its buckets. One atomic load when
 * none is set. Thread-safe. */
typedef void (*pardo_comm_poll_fn)(void);
extern _Atomic(pardo_comm_poll_fn) pardo_comm_poll_hook;
static inline void pardo_comm_poll(void) {
    pardo_comm_poll_fn f = atomic_load_explicit(&pardo_comm_poll_hook, memory_order_acquire);
    if (f) f();
}
static inline void pardo_comm_set_poll(pardo_comm_poll_fn f) {
    atomic_store_explicit(&pardo_comm_poll_hook, f, memory_order_release);
}

/* Waits for req to complete (and frees it; *req becomes 0). */
int pardo_comm_wait(pardo_comm_request *req, pardo_status *st);

/* Ends every rank of the job with exit status `status` (MPI_Abort), or
 * exits this process without a job. Never returns. */
_Noreturn void pardo_comm_abort(int status);

/* Leaves the job (MPI_Finalize) after a run every rank ended normally. */
void pardo_comm_finalize(void);

#endif
