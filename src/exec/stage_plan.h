/* stage_plan.h - which ops of a block may run at once: each maximal run of
 * two or more consecutive merge or optimize ops (the tail of a transpiled
 * training graph: merge a param's gradient, update the param) is a stage,
 * split into chains that share no var one of them writes. The executor runs
 * a stage's big chains one after another, each op on all threads, and its
 * small chains as tasks on the pool; ops within a chain keep their order.
 * Built once per block by the executor; pure analysis of the IR. */
#ifndef PARDO_STAGE_PLAN_H
#define PARDO_STAGE_PLAN_H

#include "core/graph.h"
#include "core/status.h"

typedef struct pardo_stage_plan {
    int n_ops;
    int *stage_end;  // per op: for the first op of a stage, one past its last op; else -1
    int *chain;      // per op: its chain within its stage (0..n_chains-1), or -1 outside stages
    int *n_chains;   // per op: for the first op of a stage, its number of chains; else 0
    pardo_status *status; // scratch for running a stage: one status per chain of the widest stage
    int *failed_at;       // scratch: per chain, the op that failed or -1
    int64_t *elements;    // scratch: per chain, the elements its ops write
    int *small;           // scratch: the chains run as tasks
    /* The early stage: a stage that starts right after a parallel_do may
     * have chains its parts' threads run while other parts still run
     * (executor.h, pardo_executor_early_begin). */
    int early_pd;    // that parallel_do's index, or -1 (no stage follows one, or its block runs blocks)
    int *early_need; // per chain of the stage after early_pd: the ops of the part block every part must
                     // have finished first (past the last op naming a var of the part block that the
                     // chain reads through parts_out, or that the chain writes); INT_MAX: never early
} pardo_stage_plan;

/* Fills plan for block b of p (which must have passed the check passes).
 * PARDO_ENOMEM on failure. Freed with pardo_stage_plan_clear. */
int pardo_stage_plan_build(const pardo_program *p, int b, pardo_stage_plan *plan, pardo_status *st);

/* Frees what plan holds. */
void pardo_stage_plan_clear(pardo_stage_plan *plan);

#endif
