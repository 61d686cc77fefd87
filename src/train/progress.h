/* progress.h - what `pardo train` says while it runs: a live progress line
 * on a terminal, one plain line per epoch elsewhere, and the --log file
 * (JSON Lines: one object per epoch). Not thread-safe: the training loop's
 * thread only. */
#ifndef PARDO_PROGRESS_H
#define PARDO_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

/* What one epoch came to. */
typedef struct pardo_epoch_stats {
    int64_t epoch;        // 1-based
    int64_t epochs;       // the run's last epoch (--epochs)
    double loss;          // mean training loss over the epoch's batches, weighted by rows
    bool has_metric;      // the graph has an accuracy op (pardo_loss_info.metric)
    double accuracy;      // its mean over the epoch's training batches, weighted by rows
    bool has_lr;          // the graph's updates read a learning rate var
    double lr;            // the rate of the epoch's last step
    bool has_eval;        // --eval was given and the evaluation ran
    double eval_loss;     // mean loss over the eval set, weighted by rows
    bool has_accuracy;    // the graph has logits and labels
    double eval_accuracy; // fraction of eval rows whose argmax is the label
    double samples_per_s; // training rows per second of this epoch's training (not eval)
    double seconds;       // the epoch's wall time, eval included
} pardo_epoch_stats;

typedef struct pardo_progress {
    FILE *out;     // where lines go (stderr); borrowed
    bool live;     // redraw one line with '\r' (a terminal)
    int64_t epoch; // 1-based, for the live line
    int64_t epochs;
    int64_t n_batches;   // batches in the epoch
    double t_start;      // when this run of the epoch began (seconds, monotonic)
    int64_t first_batch; // batches of the epoch done before (resume)
    double last_draw;    // when the live line was last drawn
    bool drawn;          // a live line is on the screen
} pardo_progress;

/* Seconds on a monotonic clock. */
double pardo_now_s(void);

/* Starts reporting to out (borrowed; NULL: nothing is printed, as on the
 * ranks but 0 of an MPI job); live selects the redrawn line. */
void pardo_progress_init(pardo_progress *p, FILE *out, bool live, int64_t epochs);

/* An epoch (1-based) of n_batches begins at batch first_batch. */
void pardo_progress_epoch_begin(pardo_progress *p, int64_t epoch, int64_t n_batches, int64_t first_batch);

/* batches_done of the epoch are done (counting those before a resume),
 * with this running mean loss and rows trained by this run of the epoch.
 * Redraws the live line at most 10 times a second (and at the last batch);
 * prints nothing when not live. */
void pardo_progress_batch(pardo_progress *p, int64_t batches_done, double mean_loss, int64_t rows);

/* Ends the epoch: replaces the live line (or adds a plain one) with
 * "epoch E/N: loss L, accuracy A, eval_loss L, eval_accuracy A, lr R, S
 * samples/s, T s" (accuracy where the graph has an accuracy op, eval_* with
 * --eval, lr where its updates read a rate var). */
void pardo_progress_epoch_end(pardo_progress *p, const pardo_epoch_stats *s);

/* Ends a live line with a newline, so a message can follow. */
void pardo_progress_break(pardo_progress *p);

/* Writes s to f as one line of JSON: {"epoch": 1, "loss": ..., "accuracy": ..., "eval_loss":
 * ..., "eval_accuracy": ..., "lr": ..., "samples_per_s": ..., "seconds": ...}, with
 * null for what was not measured (and for a non-finite number), then
 * flushes f. PARDO_EIO (st names `path`) when the write fails. */
int pardo_train_log_write(FILE *f, const char *path, const pardo_epoch_stats *s, pardo_status *st);

#endif
