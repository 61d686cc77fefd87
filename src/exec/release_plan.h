/* release_plan.h - which of block 0's temporaries may be freed after which
 * op of a run: a temp var (role temp, declared in block 0) whose first use
 * in the block is a write and whose last use is a read is dead after that
 * read until the next run writes it again (tensor_arrays excepted: split
 * and parallel_do refill their parts in place run after run). The executor frees such vars
 * there (their buffers go to its pool for later outputs) when asked to
 * (pardo_exec_options.release_temps), keeping the vars a caller names.
 * Reads counted: op inputs (a parallel_do lists every enclosing var its
 * block reads; merge's weight_by names a tensor_array, which always stays).
 * Pure analysis of the IR. */
#ifndef PARDO_RELEASE_PLAN_H
#define PARDO_RELEASE_PLAN_H

#include "core/graph.h"
#include "core/status.h"

typedef struct pardo_release_plan {
    int n_ops;         // block 0's ops
    int *first;        // per op: index into names of its first var to free after it
    int *count;        // per op: how many
    const char **names; // the vars, grouped by op; borrowed from the program's ops
} pardo_release_plan;

/* Fills plan for block 0 of p (checked by the passes), never freeing the
 * n_keep vars named in keep. PARDO_ENOMEM on failure. Freed with
 * pardo_release_plan_clear. */
int pardo_release_plan_build(const pardo_program *p, const char *const *keep, int n_keep, pardo_release_plan *plan,
                             pardo_status *st);

/* Frees what plan holds. */
void pardo_release_plan_clear(pardo_release_plan *plan);

#endif
