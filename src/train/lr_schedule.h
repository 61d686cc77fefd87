/* lr_schedule.h - the learning rate of `pardo train` step by step: an
 * optional linear warm-up from 0, then a schedule over the run's remaining
 * steps, as torch.optim.lr_scheduler's LinearLR (warm-up), StepLR,
 * CosineAnnealingLR (eta_min 0) and LinearLR (to 0) give it, stepped once
 * per training step; and the vars a training graph's updates read it from. */
#ifndef PARDO_LR_SCHEDULE_H
#define PARDO_LR_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/graph.h"

typedef enum pardo_lr_kind {
    PARDO_LR_CONSTANT = 0,
    PARDO_LR_STEP,   // times gamma every `every` steps
    PARDO_LR_COSINE, // half a cosine from 1 to 0
    PARDO_LR_LINEAR, // a line from 1 to 0
} pardo_lr_kind;

typedef struct pardo_lr_schedule {
    pardo_lr_kind kind;
    int64_t every;  // PARDO_LR_STEP: steps between decays, >= 1
    double gamma;   // PARDO_LR_STEP: the factor, > 0
    int64_t warmup; // steps of linear warm-up from 0 before the schedule, >= 0
} pardo_lr_schedule;

/* Parses `constant`, `step:EVERY:GAMMA`, `cosine` or `linear` into s (its
 * warmup left 0). False, with what was expected in err (n bytes), for
 * anything else. */
bool pardo_lr_schedule_parse(const char *text, pardo_lr_schedule *s, char *err, size_t n);

/* The factor of the base rate at step `step` (0-based) of a run of `total`
 * steps: step / warmup during the warm-up, then, with u = step - warmup and
 * r = total - warmup (at least 1), 1 (constant), gamma^floor(u / every),
 * (1 + cos(pi min(u, r) / r)) / 2 or 1 - min(u, r) / r. */
double pardo_lr_factor(const pardo_lr_schedule *s, int64_t step, int64_t total);

/* The vars of block 0 that p's optimize ops read as their input named "lr"
 * (the schema's name: no op type is named), each once, into names (at most
 * max, borrowed from p); returns how many. */
int pardo_lr_vars(const pardo_program *p, const char **names, int max);

/* The rate var `name` of p starts at: its init constant (a state var, as
 * pardo transpile declares it) or its value (a constant var of an older
 * graph); false when it has neither. */
bool pardo_lr_declared(const pardo_program *p, const char *name, double *out);

#endif
