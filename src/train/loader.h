/* loader.h - the data loader of `pardo train`: cuts a set of arrays that
 * share their first dim (rows) into batches, in file order or in a seeded
 * permutation per epoch, and gathers them on a task of its own thread while
 * the training step runs.
 *
 * The producer (a PARDO_TASK_OWN_THREAD task of a TaskGroup, task.h) copies
 * the rows of each batch from the mapped .npy files (npy_map.h) into one of
 * capacity + 1 preallocated batch slots and queues it; it waits (an
 * interruptible pardo_wait_post) while `capacity` batches are queued, so it
 * runs at most that many batches ahead of the consumer and nothing is
 * allocated per batch. The consumer takes batches with pardo_loader_next and
 * gives each back with pardo_loader_release before taking the one after it.
 *
 * Stopping: the loader is registered with a Coordinator (coordinator.h) as
 * task "loader". A producer error is reported with
 * pardo_coordinator_request_stop and wakes the consumer; a stop requested by
 * anyone makes pardo_loader_next return PARDO_ECANCELED; pardo_loader_stop
 * interrupts the producer wherever it waits.
 *
 * Threads: one consumer thread calls next/release/stop; the producer runs
 * on its own thread; the rest (new, free, start) from the consumer's thread
 * while no producer runs, unless said otherwise. */
#ifndef PARDO_LOADER_H
#define PARDO_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/coordinator.h"
#include "io/npy_map.h"
#include "core/status.h"
#include "exec/task.h"
#include "core/tensor.h"

/* One array the loader cuts into batches: the feed var it is for and the
 * mapped file. */
typedef struct pardo_loader_source {
    const char *name;          // the feed var's name (copied)
    const pardo_npy_map *data; // borrowed: must outlive the loader
} pardo_loader_source;

typedef struct pardo_loader_options {
    int64_t batch_size; // rows per batch, >= 1
    bool shuffle;       // a new seeded permutation of the rows every epoch (else file order)
    uint64_t seed;      // the shuffle's seed
    bool drop_last;     // drop the last batch when it has fewer than batch_size rows
    int capacity;       // batches gathered ahead, >= 1 (0: 2)
    const char *name;   // the producer's task and coordinator name (borrowed; NULL: "loader")
    int64_t fail_at;    // for tests: the fail_at-th batch the producer gathers (1-based) fails with PARDO_EIO; 0: never
    int rank, ranks;    // a shard for rank `rank` of `ranks` (an MPI job; 0 or 1: every row): the epoch's order is
                        // cut into chunks of ranks x batch_size positions, and the rank takes positions rank,
                        // rank + ranks, ... of each (torch's DistributedSampler), so the ranks' batches together
                        // are the batches of one process with ranks x batch_size rows; the last chunk is cut the
                        // same way, or left out when it has fewer rows than there are ranks
} pardo_loader_options;

/* A gathered batch: `rows` rows of every source, in source order. The
 * tensors belong to the loader and are reused for later batches once the
 * batch is released. */
typedef struct pardo_batch {
    int64_t epoch;                // epoch index, from 0
    int64_t index;                // batch index within the epoch, from 0
    int64_t rows;                 // batch_size, or fewer for an epoch's last batch
    int64_t first_row;            // position of its first row in the epoch's order (index * ranks x batch_size +
                                  // rank; its rows follow every `ranks` positions)
    pardo_tensor *const *tensors; // one per source: [rows, trailing dims of the source...]; borrowed
} pardo_batch;

typedef struct pardo_loader pardo_loader;

/* A loader over n sources (n >= 1). Every source must have at least one
 * dim and the same rows as the first: otherwise PARDO_ESHAPE naming both
 * files and their row counts; no rows at all is PARDO_EINVAL naming the
 * file. Allocates the batch slots now (capacity + 1 batches of each
 * shape). *out is freed with pardo_loader_free. */
int pardo_loader_new(const pardo_loader_source *src, int n, const pardo_loader_options *opt, pardo_loader **out,
                     pardo_status *st);

/* Stops and joins a producer not yet joined (pardo_loader_join), then frees
 * the loader and its batch tensors (a tensor still referenced elsewhere,
 * e.g. bound in a scope, lives on until released there). NULL is a no-op. */
void pardo_loader_free(pardo_loader *l);

/* Rows of every source. */
int64_t pardo_loader_rows(const pardo_loader *l);

/* Batches per epoch: ceil(rows / (ranks x batch_size)), or floor with
 * drop_last or when the last chunk has fewer rows than there are ranks. */
int64_t pardo_loader_batches(const pardo_loader *l);

/* Rows this rank's last batch of an epoch has when it is short (0: every
 * batch has batch_size rows), for pardo_loader_probe. */
int64_t pardo_loader_tail_rows(const pardo_loader *l);

/* Rows of an epoch in no batch of any rank: with ranks, a last chunk of
 * fewer rows than ranks (without drop_last; 0 otherwise). */
int64_t pardo_loader_rows_left_out(const pardo_loader *l);

/* A batch slot's tensors for a batch of `rows` rows (batch_size or the
 * last batch's rows), without starting anything: lets a caller check the
 * tensors against a graph before the first batch. NULL when no batch of an
 * epoch has that many rows. Borrowed. */
pardo_tensor *const *pardo_loader_probe(pardo_loader *l, int64_t rows);

/* The row order of epoch `epoch` into order[0..rows): 0, 1, 2... without
 * shuffle; with it a Fisher-Yates shuffle driven by splitmix64 seeded with
 * the seed mixed with the epoch, so an epoch's order depends only on
 * (seed, epoch, rows). Pure; thread-safe. */
void pardo_loader_order(int64_t rows, bool shuffle, uint64_t seed, int64_t epoch, int64_t *order);

/* Starts the producer as task opt.name of g (its own thread), registered
 * with c: it gathers the batches of epochs first_epoch .. end_epoch - 1,
 * beginning at batch first_batch of the first. g and c are borrowed and
 * must outlive the producer (until pardo_loader_join). Every slot is free
 * again (no batch may be held). PARDO_EINVAL when the last producer was
 * not joined or the range is empty; errors of spawning a task. */
int pardo_loader_start(pardo_loader *l, pardo_task_group *g, pardo_coordinator *c, int64_t first_epoch,
                       int64_t first_batch, int64_t end_epoch, pardo_status *st);

/* Names the producer's thread (its task, and its lane in a trace) from the
 * next pardo_loader_start on, so that the runs of a loader started once per
 * epoch show as distinct lanes ("eval loader, epoch 2"); its spans and its
 * coordinator entry keep opt.name. lane is borrowed: it must live until the
 * producer is joined; NULL: opt.name. Not while a producer runs. */
void pardo_loader_set_lane(pardo_loader *l, const char *lane);

/* Waits for the next batch (*out borrowed until pardo_loader_release).
 * PARDO_ECANCELED (st filled) when a stop was requested on the coordinator
 * (by a producer error, or anyone) before a batch came; PARDO_ENOTFOUND
 * when the producer finished every batch it was asked for. At most one
 * batch is held at a time: release it before the next call. */
int pardo_loader_next(pardo_loader *l, const pardo_batch **out, pardo_status *st);

/* Gives batch b back for reuse. Thread-safe with the producer. */
void pardo_loader_release(pardo_loader *l, const pardo_batch *b);

/* Asks a running producer to stop now: interrupts its TaskGroup, which
 * wakes it wherever it waits. Returns at once; pardo_loader_join waits for
 * it. From the consumer's thread. */
void pardo_loader_stop(pardo_loader *l);

/* Waits for the producer to return (joins its TaskGroup, which must hold
 * no other running task the caller does not also mean to wait for) and
 * returns the group's result: PARDO_OK, PARDO_ECANCELED when it was
 * stopped, else its error ("task 'loader': ..."). PARDO_OK when nothing
 * was started. The loader can start again after. */
int pardo_loader_join(pardo_loader *l, pardo_status *st);

/* Batches queued now, and the most ever queued at once (never above
 * capacity). Thread-safe. */
int pardo_loader_queued(pardo_loader *l);
int pardo_loader_high_water(pardo_loader *l);

/* Batches the producer gathered since the loader was made. Thread-safe. */
int64_t pardo_loader_gathered(pardo_loader *l);

#endif
