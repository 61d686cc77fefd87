/* rank_merge.h - what parallel_do (ops/parallel.c) tells the rank_merge op
 * (ops/rank_merge.c) while its parts run, so that a bucket of gradients is
 * summed over the ranks as soon as every part has handed its gradients on,
 * while the rest of the backward pass runs. */
#ifndef PARDO_RANK_MERGE_H
#define PARDO_RANK_MERGE_H

#include "core/tensor.h"

struct pardo_scope;

/* Part `part` of tensor_array `array` (of n_parts), var `name` of scope
 * (both borrowed for the call), was set. A rank_merge of that scope whose
 * gradient the merge of that var gives packs it once its n_parts are set,
 * and starts the buckets that are then complete, in bucket order. Matched
 * by scope and name, never by the tensor's address (a freed array's memory
 * may come back as another executor's). Thread-safe; one atomic load when
 * no rank_merge waits for arrays. */
void pardo_rank_merge_part_set(const struct pardo_scope *scope, const char *name, const pardo_tensor *array, int part,
                               int n_parts);

/* After an op of a part: advances the buckets started (Open MPI moves their
 * data only inside MPI calls). Thread-safe; one atomic load when none is. */
void pardo_rank_merge_progress(void);

#endif
