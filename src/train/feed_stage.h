/* feed_stage.h - `pardo train`'s input overlapped with compute through the
 * dependency engine (engine/engine.h): the copy of the next batch into its
 * feed tensors (and, on a GPU, its host-to-device copy) runs as an engine op
 * while the current step runs. Two sets of feed tensors take turns: the
 * step reads one set while the copy writes the other; each set has an
 * engine var its copy writes and whose wait_to_read hands the set over.
 * On a GPU the copy stages each tensor's bytes in a pinned block of the host
 * cache (core/host_cache.h: no cudaMallocHost in the steady state) and queues
 * its host-to-device copy on the device's copy stream, so it overlaps the
 * step's kernels on the compute stream; an event per set, recorded after the
 * copies, is what the compute stream waits for when the set is taken. The
 * GPU tensors' head is then HEAD_AT_GPU (no host copy until a CPU op reads).
 * The loop: push(b0); then per step: take, feed, run the step, push(next
 * batch), finish the step. One thread (the training loop) calls these. */
#ifndef PARDO_FEED_STAGE_H
#define PARDO_FEED_STAGE_H

#include "core/status.h"
#include "core/tensor.h"
#include "train/loader.h"

typedef struct pardo_feed_stage pardo_feed_stage;

/* A stage for batches of n tensors (1..64); device >= 0: each copy puts its
 * tensors on that GPU (the executor's device: the pool thread that copies
 * selects it), -1: on the CPU. *out is freed with pardo_feed_stage_free.
 * PARDO_ENOMEM, PARDO_EINVAL for a bad n. */
int pardo_feed_stage_new(int n, int device, pardo_feed_stage **out, pardo_status *st);

/* Waits for the copies in flight, then frees the stage and its tensors
 * (a tensor still bound in a scope lives on until released there); on a
 * GPU, trims the host cache (pardo_host_cache_trim). */
void pardo_feed_stage_free(pardo_feed_stage *s);

/* Pushes the copy of batch b (borrowed: the loader's, not released until
 * pardo_feed_stage_take has returned this copy's set) into the next set of
 * tensors, as engine op "feed_copy" (a trace event of category "loader").
 * At most two copies may be waiting to be taken. Returns once pushed. */
int pardo_feed_stage_push(pardo_feed_stage *s, const pardo_batch *b, pardo_status *st);

/* Waits for the oldest copy not yet taken and gives its tensors (borrowed;
 * valid until the push after next reuses the set); on a GPU, makes the
 * device's compute stream wait for the set's copies (the host does not
 * wait for them). Its error (an allocation failure, a CUDA error) if it
 * failed. */
int pardo_feed_stage_take(pardo_feed_stage *s, pardo_tensor *const **tensors, pardo_status *st);

#endif
