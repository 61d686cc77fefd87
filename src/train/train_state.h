/* train_state.h - where `pardo train` is in its run, saved in the
 * checkpoint beside the params and optimizer state so that --load resumes
 * exactly where --save left off, mid-epoch too. Each counter is a scalar
 * safetensors entry named "pardo@..." (no graph declares such a var, so
 * `pardo run --load` ignores them):
 *   pardo@epoch       int64    epochs finished
 *   pardo@batch       int64    batches finished of the epoch in progress
 *   pardo@step        int64    steps run in all
 *   pardo@batch_size  int64    the run's --batch-size
 *   pardo@shuffle     int64    1 with --shuffle, else 0
 *   pardo@seed        int64    the shuffle's seed (its 64 bits)
 *   pardo@loss_sum    float64  sum of loss * rows over the epoch's finished batches
 *   pardo@rows        int64    rows of those batches
 * and, written since early stopping came (a checkpoint without them loads
 * with none of them: no best epoch yet):
 *   pardo@metric_sum     float64  sum of the graph's accuracy * rows over those batches
 *   pardo@best_eval_loss float64  the lowest eval loss after an epoch (meaningless while best_epoch is 0)
 *   pardo@best_epoch     int64    the epoch (1-based) that had it; 0: none yet
 *   pardo@bad_epochs     int64    epochs since then without a lower eval loss
 * The batch order of an epoch depends only on (seed, epoch, rows)
 * (pardo_loader_order), so no generator position needs saving. */
#ifndef PARDO_TRAIN_STATE_H
#define PARDO_TRAIN_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "core/tensor_list.h"

typedef struct pardo_train_state {
    int64_t epoch;      // epochs finished
    int64_t batch;      // batches finished of epoch `epoch` (0 at an epoch boundary)
    int64_t step;       // steps run in all
    int64_t batch_size; // rows per batch
    bool shuffle;       // the order was shuffled
    uint64_t seed;      // its seed
    double loss_sum;    // sum of loss * rows over the finished batches of epoch `epoch`
    int64_t rows;       // rows of those batches
    double metric_sum;  // sum of accuracy * rows over those batches (graphs with an accuracy op)
    double best_eval_loss; // the lowest eval loss at an epoch's end; INFINITY while best_epoch is 0
    int64_t best_epoch; // 1-based epoch of best_eval_loss; 0: none yet
    int64_t bad_epochs; // evaluated epochs since best_epoch without a lower eval loss
} pardo_train_state;

/* Appends the counters to l as new scalar tensors (entries "pardo@epoch"
 * ...; l keeps the only reference). PARDO_ENOMEM. */
int pardo_train_state_save(const pardo_train_state *s, pardo_tensor_list *l, pardo_status *st);

/* Reads the counters from checkpoint entries l (named `ckpt` in messages).
 * *found is false, and *s zeroed (best_eval_loss INFINITY), when l has none of them (a checkpoint of
 * `pardo run`). Some but not all of them, an entry that is not a scalar of
 * its dtype, a negative counter, or a batch size below 1 is PARDO_EPARSE
 * naming ckpt and the entry. Thread-safe. */
int pardo_train_state_load(const pardo_tensor_list *l, const char *ckpt, pardo_train_state *s, bool *found,
                           pardo_status *st);

#endif
