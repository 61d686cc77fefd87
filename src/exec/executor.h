/* executor.h - runs the blocks of a checked program over scopes of tensors:
 * op after op in file order, each through its registered kernel. The
 * executor borrows the program (which must outlive it and must have passed
 * pardo_pass_check) and owns its root scope. Not thread-safe: one caller
 * at a time, except that the parallel_do kernel runs its parts' blocks
 * through pardo_executor_run_block_with from pool threads at once, each
 * over its own child scope. */
#ifndef PARDO_EXECUTOR_H
#define PARDO_EXECUTOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "op.h"
#include "core/scope.h"
#include "core/status.h"
#include "core/tensor_list.h"

/* How block 0's ops are run (pardo run --executor). */
typedef enum pardo_executor_kind {
    PARDO_EXEC_AUTO = 0,   // dataflow where it is never slower: on the CPU, at 2 threads or more, when block 0
                           // has ops that may run at once (settled on the first run); else sequential
    PARDO_EXEC_SEQUENTIAL, // op after op in file order (a stage of merges and updates at once)
    PARDO_EXEC_DATAFLOW,   // pushed to the dependency engine (engine/engine.h) with the vars they read and
                           // write: ops no var links run at once
} pardo_executor_kind;

typedef struct pardo_exec_options {
    int nthreads;               // threads kernels run from block 0 may use (>= 1)
    pardo_executor_kind kind;   // auto (the default), sequential or dataflow
    bool training;              // dropout and the like are active
    pardo_device_kind device;   // where ops with a CUDA kernel run
    int device_index;           // CUDA device number
    /* Frees each of block 0's temporaries after its last reader in a run
     * (release_plan.h) and gives its buffer to a later output of the same
     * size: peak memory near the live set instead of every var at once. A
     * freed var has no value after the run (pardo_executor_fetch gives
     * NULL): name the vars to fetch in keep (n_keep of them, copied). */
    bool release_temps;
    const char *const *keep;
    int n_keep;
} pardo_exec_options;

typedef struct pardo_executor pardo_executor;

/* A new executor for p (borrowed). With device CUDA and no usable device it
 * says so once on stderr and runs on the CPU. *out is freed with
 * pardo_executor_free. */
int pardo_executor_new(const pardo_program *p, const pardo_exec_options *opt, pardo_executor **out,
                       pardo_status *st);

/* Frees the executor and its scopes (tensors it bound are released), then trims the device cache
 * (core/device_cache.h: every cached free device block goes back to the device). */
void pardo_executor_free(pardo_executor *ex);

/* The root scope (block 0's vars); borrowed. */
pardo_scope *pardo_executor_scope(pardo_executor *ex);

/* The device ops with a CUDA kernel actually run on (CPU after a fallback). */
pardo_device_kind pardo_executor_device(const pardo_executor *ex);

/* The CUDA device number it runs on (its options' device_index; meaningless on the CPU). */
int pardo_executor_device_index(const pardo_executor *ex);

/* Binds block 0's vars that exist before any op: constants from `value`,
 * then params and state from `ckpt` (may be NULL; entries the graph does not
 * declare are ignored; a dtype or shape mismatch is PARDO_ESHAPE naming
 * ckpt_name, the entry and both types) or else from their `init`. A param or
 * state var with neither is PARDO_ENOTFOUND. A param with an init that the
 * checkpoint lacks gets a warning on stderr. Call once before the first run. */
int pardo_executor_init_vars(pardo_executor *ex, const pardo_tensor_list *ckpt, const char *ckpt_name,
                             pardo_status *st);

/* Binds feed var `name` of block 0 to t (retained). The var must be declared
 * with role feed, the same dtype and a compatible shape (-1 matches any size);
 * otherwise PARDO_ENOTFOUND / PARDO_EINVAL / PARDO_ESHAPE with a message that
 * names `source` (the file it came from), the var and both types. */
int pardo_executor_feed(pardo_executor *ex, const char *name, pardo_tensor *t, const char *source,
                        pardo_status *st);

/* PARDO_ENOTFOUND naming the first feed var of block 0 that has no tensor. */
int pardo_executor_check_feeds(pardo_executor *ex, pardo_status *st);

/* Runs block 0 once (one step). Fails with PARDO_ENOTFOUND naming a feed that
 * was not given; a kernel's error comes back prefixed with the op's place
 * (with kind dataflow: the failed op with the lowest index, as the
 * sequential executor would stop at). pardo_executor_run_async, then
 * pardo_executor_wait. */
int pardo_executor_run(pardo_executor *ex, pardo_status *st);

/* Starts one step: with kind dataflow (on the CPU), pushes block 0's ops to
 * the engine and returns at once (a step still in flight is waited for
 * first); otherwise runs the step. Nothing may touch the executor's
 * tensors until pardo_executor_wait, except through
 * pardo_executor_fetch_wait. Errors as pardo_executor_run. */
int pardo_executor_run_async(pardo_executor *ex, pardo_status *st);

/* True where copying the next step's feeds while a step runs pays: block 0
 * runs over the engine (kind dataflow on the CPU: run_async returns before
 * the step ends), or on a GPU (the copy includes the host-to-device one). */
bool pardo_executor_overlaps_input(pardo_executor *ex);

/* Waits for the step in flight (if any) and counts it; its error, if one
 * failed. */
int pardo_executor_wait(pardo_executor *ex, pardo_status *st);

/* A fetch during a step: waits until the step's writes of block 0's var
 * `name` are done (the engine's wait_to_read) and gives its tensor (or NULL,
 * as pardo_executor_fetch; borrowed). An op whose failure reached the var
 * makes it return the step's error. */
int pardo_executor_fetch_wait(pardo_executor *ex, const char *name, pardo_tensor **out, pardo_status *st);

/* Runs block `block` over `scope` (borrowed; its parent chain must hold the
 * enclosing blocks' vars), kernels limited to nthreads threads. */
int pardo_executor_run_block(pardo_executor *ex, int block, pardo_scope *scope, int nthreads, pardo_status *st);

/* How pardo_executor_run_block_with runs a block. */
typedef struct pardo_block_run {
    int nthreads;           // threads kernels may use (>= 1; 1 inside a parallel_do part)
    const atomic_int *stop; // may be NULL; read before each op: nonzero stops the run with PARDO_ECANCELED
    bool cpu_only;          // CPU kernels even when the executor runs on CUDA (parallel_do parts)
    bool idle_help;         // with nthreads 1: big kernel loops may take help from idle pool threads (parts)
    /* may be NULL: called once op `index` has run (or ran fused into an earlier one), in order; an error
     * ends the run (parallel_do hands a part's outputs on here once no later op names them) */
    int (*after_op)(void *arg, int index, pardo_status *st);
    void *after_arg;
    atomic_int *progress; // may be NULL: set to index + 1 (release) after after_op(index) (pardo_early_progress)
    int first_op, end_op; // run ops [first_op, end_op) only (end_op 0: to the block's end): parallel_do runs a
                          // part block in segments between its all_reduce ops
} pardo_block_run;

/* As pardo_executor_run_block, with a stop flag checked at every op
 * boundary (an op that started finishes). Thread-safe for distinct scopes
 * whose shared ancestors nobody writes meanwhile, as parallel_do's parts
 * (the early stage writes a var of the root scope only once no op of the
 * part block left to run names it). */
int pardo_executor_run_block_with(pardo_executor *ex, int block, pardo_scope *scope, const pardo_block_run *run,
                                  pardo_status *st);

/* The early stage. A training graph's parallel_do is followed by a stage
 * of merges and optimizer updates (stage_plan.h); the parts end at
 * different times, and a chain of the stage whose gradients every part has
 * handed on (and whose param no part reads any more) can run on a part's
 * thread while another part is still running, instead of that thread
 * waiting at the join. Chains that become ready only as the last part ends
 * are left to the stage, which runs them on all threads. Same ops, same
 * inputs: the same bits. Block 0 in the root scope, on several threads,
 * from the second run on (when stages run), on the CPU. */
typedef struct pardo_early pardo_early;

/* For parallel_do op `index` of `block` (in `scope`, on nthreads) about to
 * run nparts parts, with its output tensor_arrays outs[0..n_out) (borrowed;
 * bound meanwhile in the scope, where the stage's ops read them) and the
 * flag its failing part sets (stop): the early stage, or NULL where there
 * is none. The forking thread calls pardo_executor_early_end after the
 * join. */
pardo_early *pardo_executor_early_begin(pardo_executor *ex, int block, int index, pardo_scope *scope, int nthreads,
                                        pardo_tensor *const *outs, int n_out, int nparts, const atomic_int *stop);

/* Part `part`'s progress counter (pardo_block_run.progress). */
atomic_int *pardo_early_progress(pardo_early *e, int part);

/* On the thread that ran a part, once the part ended: while another part
 * still runs, runs the stage's chains every part has progressed far enough
 * for (their failures are the stage's, reported after the parts). */
void pardo_early_part_ended(pardo_early *e);

/* After the join, on the forking thread. */
void pardo_executor_early_end(pardo_early *e);

/* For pardo_kernel_output: a free tensor of the executor's pool with the
 * bytes dtype and shape need, reshaped to them (reference handed over), or
 * NULL. Only for outputs bound in the root scope of an executor made with
 * release_temps. */
pardo_tensor *pardo_executor_pool_take(pardo_executor *ex, const pardo_scope *scope, pardo_dtype dtype, int ndim,
                                       const int64_t *shape);

/* Gives t (the caller's reference) to the pool when it is a root scope
 * output of such an executor, else releases it. */
void pardo_executor_pool_put(pardo_executor *ex, const pardo_scope *scope, pardo_tensor *t);

/* The run's thread count (pardo_exec_options.nthreads). */
int pardo_executor_nthreads(const pardo_executor *ex);

/* The program the executor runs; borrowed. */
const pardo_program *pardo_executor_program(const pardo_executor *ex);

/* The tensor bound to block 0's var `name` after a run, or NULL; borrowed. */
pardo_tensor *pardo_executor_fetch(pardo_executor *ex, const char *name);

/* Appends every param and state var of block 0 (name, tensor) to out, in
 * declaration order, with host copies current: what a checkpoint holds. */
int pardo_executor_collect_state(pardo_executor *ex, pardo_tensor_list *out, pardo_status *st);

/* Steps run so far. */
uint64_t pardo_executor_steps(const pardo_executor *ex);

/* Sets the count of steps run so far (what kernels see as ctx->step, e.g.
 * dropout's mask) to `steps`, so a run resumed from a checkpoint continues
 * the count of the run that wrote it (`pardo train --load`). Call after
 * init_vars and before the first run. PARDO_ENOMEM. */
int pardo_executor_set_steps(pardo_executor *ex, uint64_t steps, pardo_status *st);

/* A watcher of block 0's ops (pardo_executor_watch_ops): op `index` of block
 * 0 has just run in the root scope, in the run that counts `run` steps
 * before it (ctx->step); in and out are its input and output tensors
 * (borrowed for the call; out before they move into the scope). */
typedef void (*pardo_op_watch_fn)(void *arg, int index, uint64_t run, pardo_tensor *const *in, int n_in,
                                  pardo_tensor *const *out, int n_out);

/* From the next run on, calls fn(arg, ...) after each successful run of ops
 * [first, end) of block 0 in the root scope, on the thread that ran the op
 * (a pool or engine thread: fn must be thread-safe and quick), before the
 * op counts as done (a later op that reads its outputs has not started).
 * The ops of an MPI rank_merge's gradients tell it so, to start their
 * allreduce early. arg is borrowed for the executor's life (an op state
 * is). An op has one watcher: PARDO_EINVAL, and none set, when one of the
 * ops has another (fn, arg) already. */
int pardo_executor_watch_ops(pardo_executor *ex, int first, int end, pardo_op_watch_fn fn, void *arg, pardo_status *st);

#endif
