/* executor_internal.h - what the executor's files share (executor.c runs
 * ops and blocks; stage_run.c runs a block's stages of independent chains
 * and the early stage). Not public: nothing outside src/exec/ includes it. */
#ifndef PARDO_EXECUTOR_INTERNAL_H
#define PARDO_EXECUTOR_INTERNAL_H

#include <stdatomic.h>

#include "exec/executor.h"
#include "exec/release_plan.h"
#include "exec/stage_plan.h"
#include "exec/tensor_pool.h"

#define MAX_OP_IO 64

/* What the executor finds once per op, the program being fixed from its
 * creation on. */
typedef struct op_plan {
    const pardo_graph_var **out_vars; // output k's var, for the run-time type check (NULL for ""); owned
    uint64_t inplace;           // bit k: output k names one of the op's inputs (its tensor is shared, not taken)
    int *root_entry;            // block 0: the root scope's entry of input k at [k], of output k at [n_in + k];
                                // -1 until resolved (a name not bound yet stays unresolved); owned
    int *release_entry;         // block 0 with release_temps: root entries of the vars dead after this op
                                // (release.names[release.first[i]..]), -1 until resolved; owned
    /* block 0: called after the op runs in the root scope (pardo_executor_watch_ops), NULL if none; set while
     * other ops run (atomic: watch_arg is stored before it, with release) */
    _Atomic(pardo_op_watch_fn) watch;
    void *watch_arg;
} op_plan;

/* The dataflow executor's plan and state (dataflow.c). */
typedef struct pardo_dataflow pardo_dataflow;

struct pardo_executor {
    const pardo_program *prog; // borrowed
    pardo_exec_options opt;
    pardo_scope *root;         // block 0's vars, owned
    uint64_t steps;            // completed runs of block 0
    pardo_op_state **states;   // per block, per op: kernel state (pardo_kernel_ctx.state); owned
    pardo_stage_plan *plans;   // per block: ops that may run at once (stage_plan.h); built on first run; owned
    op_plan **ops;             // [block][op]: what each op's runs look up once; owned
    bool *planned;             // per block: plans[b] is built
    bool pooling;              // opt.release_temps: block 0's dead temps go to pool
    pardo_release_plan release; // which temps die after which op of block 0
    pardo_tensor_pool pool;    // their tensors, for later outputs; owned
    pardo_early *early;        // block 0's early stage (pardo_executor_early_begin), made on first use; owned
    pardo_dataflow *df;        // kind dataflow: block 0's engine vars and units, made on the first run; owned
    bool df_running;           // a dataflow step is in flight: the pool stays shared, the units free the temps
};

struct pardo_early {
    pardo_executor *ex;
    int n_parts, cap_parts;
    atomic_int *progress;   // per part: ops of the part block it has finished this run
    atomic_int running;     // parts not yet ended
    const atomic_int *stop; // nonzero once a part failed: nothing more runs early
    int nthreads;           // the parallel_do's: an early chain's ops split over them (a part that ends helps)
    int n_chains, cap_chains;
    atomic_int *claimed;    // per chain of the stage: taken by a thread this run
    bool *done;             // per chain: ran early this run (read by run_stage after the join)
    bool active;            // this run of block 0 opened the early stage: run_stage passes over what it ran
};

/* Runs op `index` of block in scope as run says (executor.c). When a trace
 * is on, *ready (may be NULL) is when the op became ready, and gets its
 * end. Inside a stage (in_stage) the temps the op read last are left for
 * the stage to free: chains run in any order. */
int pardo_exec_run_op(pardo_executor *ex, int block, int index, pardo_scope *scope, const pardo_block_run *run,
                      bool in_stage, int64_t *ready, pardo_status *st);

/* Frees the root scope's temps that ops [first, last] of block read last
 * (block 0 in the root scope only): their tensors go to the pool for later
 * outputs (release_plan.h). */
void pardo_exec_release_dead(pardo_executor *ex, int block, const pardo_scope *scope, int first, int last);

/* Runs the stage of block starting at op `first` (stage_run.c): its big
 * chains one after another, each op on all threads, then the small chains
 * as tasks on the pool, passing over chains that ran early. The error of
 * the failed op with the lowest index is the stage's. */
int pardo_exec_run_stage(pardo_executor *ex, int block, int first, pardo_scope *scope, const pardo_block_run *r,
                         pardo_status *st);

/* Binds every name block 0's ops write in the root scope (with no tensor),
 * so that ops running at once never insert into it. PARDO_ENOMEM. */
int pardo_exec_reserve_outputs(pardo_executor *ex, pardo_status *st);

/* dataflow.c: plans block 0 for the engine (once: engine vars, units, their
 * order), reserving its output names first. PARDO_ENOMEM. */
int pardo_dataflow_plan(pardo_executor *ex, pardo_status *st);

/* True when the plan has units that may run at once. */
bool pardo_dataflow_may_overlap(const pardo_executor *ex);

/* dataflow.c: pushes one step of block 0 to the engine (planning it on the
 * first call); returns once pushed. */
int pardo_dataflow_push_step(pardo_executor *ex, pardo_status *st);

/* Waits until the step's writes of block 0's var `name` are done; the
 * step's error (the failed op with the lowest index) if the var's history
 * has one. */
int pardo_dataflow_fetch_wait(pardo_executor *ex, const char *name, pardo_status *st);

/* Waits for the step's every op; its error is the failed op's with the
 * lowest index, as the sequential executor's would be. */
int pardo_dataflow_wait_step(pardo_executor *ex, pardo_status *st);

/* Deletes the engine vars (after the ops pending on them) and frees df. */
void pardo_dataflow_free(pardo_dataflow *df);

#endif
