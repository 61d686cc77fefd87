/* eval_program.h - what `pardo train` needs to know of a training graph:
 * whether it trains at all, which var is its loss (and which logits and
 * labels give an accuracy), and the program that evaluates it on held-out
 * data without updating anything. Roles only: no op type is named but the
 * parallel ones (DESIGN, rules of the house). */
#ifndef PARDO_EVAL_PROGRAM_H
#define PARDO_EVAL_PROGRAM_H

#include <stdbool.h>

#include "core/graph.h"
#include "core/status.h"

/* The loss of a training graph and, when the op that computes it has the
 * shape of a classifier's loss, its logits and labels. */
typedef struct pardo_loss_info {
    const char *loss;   // a var of block 0, written by the graph's ops; borrowed from the program
    const char *logits; // the loss op's first input, a float [N, C] var, or NULL: no accuracy
    const char *labels; // the loss op's second input, an integer [N] feed of block 0, or NULL
    int block;          // the block of the loss op; -1 when no op of role loss writes the loss
    const char *metric; // a float scalar var of block 0 holding the batch's accuracy: output 0 of the first op
                        // whose def is a metric (in block 0, or merged back there from a parallel_do under
                        // its own name); NULL: none. Borrowed from the program
} pardo_loss_info;

/* True when an op of any block of p has role optimize (effective role). */
bool pardo_program_trains(const pardo_program *p);

/* Finds the loss of checked program p. `loss` (may be NULL) names it;
 * by default it is the first output of the first op with role loss (block
 * 0 first, then the other blocks: the transpiler keeps the loss's name
 * when it merges it back into block 0). The var must be a float scalar
 * temp of block 0 (not a feed, param or state): otherwise PARDO_ENOTFOUND
 * or PARDO_EINVAL naming p's file and the var. logits and labels are the inputs of the op of role loss that
 * writes the loss (in any block), when they fit: a float rank-2 input 0
 * and an integer rank-1 input 1 that is a feed of block 0. metric as
 * pardo_loss_info says. Borrows from p. */
int pardo_loss_find(const pardo_program *p, const char *loss, pardo_loss_info *out, pardo_status *st);

/* Builds the program that evaluates training program `train` (checked):
 * a copy without its backward and optimize ops (so it reads the params and
 * never writes them), each parallel_do left filling only the arrays its
 * remaining ops write; when li->logits lives only in a parallel_do's block,
 * the parts' logits are concatenated back into block 0 under their own name
 * (a merge, mode concat). Then the copy is checked (validate, infer
 * shapes). *logits gets the block-0 var that holds the logits in the new
 * program (borrowed from it), or NULL when li has none or they cannot be
 * brought back. *out is freed with pardo_program_free. An error names
 * train's file: the program cannot run without the dropped ops. */
int pardo_eval_program_build(const pardo_program *train, const pardo_loss_info *li, pardo_program **out,
                             const char **logits, pardo_status *st);

#endif
