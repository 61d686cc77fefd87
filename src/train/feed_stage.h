/* feed_stage.h - `pardo train`'s input overlapped with compute through the
 * dependency engine (engine/engine.h): the copy of the next batch into its
 * feed tensors (and, on a GPU, its host-to-device copy) runs as an engine op
 * while the current step runs. Two sets of feed tensors take turns: the
 * step reads one set while the copy writes the other; each set has an
 * engine var its copy writes and whose wait_to_read hands the set over.
 * The loop: push(b0); then per step: take, feed, run the step, push(next
 * batch), finish the step. One thread (the training loop) calls these. */
#ifndef PARDO_FEED_STAGE_H
#define PARDO_FEED_STAGE_H

#include <stdbool.h>

#include "core/status.h"
#include "core/tensor.h"
#include "train/loader.h"

typedef struct pardo_feed_stage pardo_feed_stage;

/* A stage for batches of n tensors (1..64); to_gpu: each copy also makes
 * its tensors current on the GPU. *out is freed with pardo_feed_stage_free.
 * PARDO_ENOMEM, PARDO_EINVAL for a bad n. */
int pardo_feed_stage_new(int n, bool to_gpu, pardo_feed_stage **out, pardo_status *st);

/* Waits for the copies in flight, then frees the stage and its tensors
 * (a tensor still bound in a scope lives on until released there). */
void pardo_feed_stage_free(pardo_feed_stage *s);

/* Pushes the copy of batch b (borrowed: the loader's, not released until
 * pardo_feed_stage_take has returned this copy's set) into the next set of
 * tensors, as engine op "feed_copy" (a trace event of category "loader").
 * At most two copies may be waiting to be taken. Returns once pushed. */
int pardo_feed_stage_push(pardo_feed_stage *s, const pardo_batch *b, pardo_status *st);

/* Waits for the oldest copy not yet taken and gives its tensors (borrowed;
 * valid until the push after next reuses the set); its error (an
 * allocation failure) if it failed. */
int pardo_feed_stage_take(pardo_feed_stage *s, pardo_tensor *const **tensors, pardo_status *st);

#endif
