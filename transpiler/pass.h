/* pass.h - passes over the Program IR. Each is `int pass(pardo_program *,
 * const pardo_pass_options *, pardo_status *)`: PARDO_OK, or an error whose
 * message names the file, line, block, op and var. Passes never run kernels. */
#ifndef PARDO_PASS_H
#define PARDO_PASS_H

#include "core/graph.h"
#include "core/status.h"

typedef enum pardo_optimizer_kind {
    PARDO_OPTIMIZER_NONE = 0,
    PARDO_OPTIMIZER_SGD,
    PARDO_OPTIMIZER_MOMENTUM,
    PARDO_OPTIMIZER_ADAM,
    PARDO_OPTIMIZER_ADAMW,
} pardo_optimizer_kind;

typedef enum pardo_loss_kind {
    PARDO_LOSS_NONE = 0,
    PARDO_LOSS_SOFTMAX_CROSS_ENTROPY, // logits [N, C] against int64 class labels [N]
    PARDO_LOSS_MSE,                   // a prediction against targets of its dtype and shape
} pardo_loss_kind;

typedef struct pardo_pass_options {
    const char *loss;               // backward: the scalar var of block 0 to differentiate
    pardo_optimizer_kind optimizer; // optimizer: which update to append
    double lr;                      // optimizer: learning rate
    double mu;                      // momentum: coefficient (torch default 0.9)
    bool nesterov;                  // momentum: Nesterov update
    double beta1, beta2, epsilon;   // adam, adamw (torch defaults 0.9, 0.999, 1e-8)
    double weight_decay;            // optimizer: L2 (sgd, momentum, adam) or decoupled (adamw); NAN: the op's default
    double clip_grad_norm;          // optimizer: clip the gradients by their global L2 norm first; 0: no clipping
    int parts;                      // multi_cpu: parts per batch; 0: the run's thread count
    double bucket_mb;               // ranks: rank_merge's attr bucket_mb; 0: its default
    bool sync_parts;                // multi_cpu: every op with a sync form (batch_norm) takes it, as attr sync
                                    // true does for one op (--sync-batch-norm)
    pardo_loss_kind add_loss;       // add_loss: which loss to append
    const char *add_loss_output;    // add_loss: the output var of block 0 it reads; borrowed
    const char *labels;             // add_loss: the new labels feed (NULL: "labels"); borrowed
    const char *const *keep;        // fuse: vars the caller fetches (never fused away); borrowed
    int n_keep;
} pardo_pass_options;

/* Options with every default set (no loss, no optimizer, lr 0.01, mu 0.9,
 * beta1 0.9, beta2 0.999, epsilon 1e-8, weight decay the op's default: 0,
 * adamw's 0.01; no clipping). */
pardo_pass_options pardo_pass_defaults(void);

/* Optimizer names as the command line spells them ("sgd", "momentum",
 * "adam", "adamw"); false for an unknown word. */
bool pardo_optimizer_parse(const char *s, pardo_optimizer_kind *out);
const char *pardo_optimizer_name(pardo_optimizer_kind k);

/* Checks what the file format cannot: every op type is registered (an
 * unknown one lists the known ones), input and output counts fit the op's
 * schema, attrs are known to the op and of the right JSON type, every input
 * var exists and is written before it is read, block parents are sane.
 * Resolves op->def. Adds an undeclared (inferred) var to the block for each
 * op output that is not declared. */
int pardo_pass_validate(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* Infers the dtype and shape of every op output in every block, in file
 * order, with each op's registered inference; checks them against declared
 * vars (a -1 dim matches any size). Requires pardo_pass_validate first. */
int pardo_pass_infer_shapes(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* Autodiff (`--backward LOSS`): appends to block 0 the gradient ops of every
 * op that opt->loss depends on, in reverse order, built by each op's
 * registered gradient builder; seeds LOSS@GRAD with ones; sums the gradients
 * of a var used more than once; skips vars that need no gradient (feeds,
 * integers, anything no param reaches); sets roles (forward, loss, backward)
 * and re-runs validate and infer_shapes. The gradient of V is V@GRAD. Errors:
 * no such var, a loss that is not a float scalar, a graph that already has
 * backward or optimize ops, an op on the path that is not differentiable.
 * Requires pardo_pass_check first. */
int pardo_pass_backward(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* `--add-loss KIND:OUTPUT`: appends to block 0 a loss op of role loss
 * (softmax_cross_entropy or mse_loss, reduction mean) reading output var
 * opt->add_loss_output and a new feed opt->labels ("labels" by default:
 * int64 [N] for softmax_cross_entropy, the output's dtype and shape with
 * any row count for mse), writing the scalar `loss`; then re-checks the
 * program. Errors name the file: no op writes the output (the graph's
 * outputs listed), not a float tensor, logits not [N, C], the labels or
 * loss name taken, a graph that already has a loss. */
int pardo_pass_add_loss(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* Loss names as --add-loss spells them ("softmax_cross_entropy", "mse");
 * false for an unknown word. */
bool pardo_loss_kind_parse(const char *s, pardo_loss_kind *out);

/* Appends one optimizer op (role optimize) per param of block 0 that has a
 * gradient P@GRAD, updating P in place, and declares the state it needs
 * (role state, init zeros, so checkpoints save it): momentum P@VELOCITY;
 * adam and adamw P@MOMENT1, P@MOMENT2 and an int64 step counter P@STEP.
 * The learning rate is a state var `learning_rate` (`learning_rate@float64`
 * for float64 params), a float scalar whose init is opt->lr: `pardo train
 * --lr` and its schedules set it at run time, checkpoints keep it. With
 * opt->clip_grad_norm > 0 a clip_grad_norm op (role optimize) scales every
 * gradient the updates read by their global norm first. opt->weight_decay
 * (unless NAN) is each update's attr weight_decay. Errors: no param has a
 * gradient, an optimizer already present. */
int pardo_pass_optimizer(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* The multi-CPU rewrite (SPEC section 2, "The multi-CPU transpiler"): every
 * feed the forward part reads is split (X -> X@PARTS, opt->parts parts);
 * one parallel_do runs the forward, loss and backward ops in block 1, once
 * per part; each param gradient and the loss (and any other output of the
 * parts) is merged back under its own name: weighted mean over parts
 * (weight_by the first split) for values without a batch dim, concat along
 * dim 0 for values with one; the optimize ops stay in block 0, after the
 * merges. An inference graph gets its outputs (vars no op reads) merged the
 * same way. Ops without a role get one inferred (writes a param or state:
 * optimize; reads or writes a @GRAD var: backward; else forward); an op that
 * cannot be placed (a forward op after the optimizer ops, a forward op that
 * writes a param) is an error naming it, and so is a graph that is already
 * transpiled. Re-runs validate and infer_shapes. */
int pardo_pass_multi_cpu(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* The fusion pass (transpiler/fuse.c): rewrites matmul -> add (a [N]
 * bias) [-> relu] into matmul with a bias input and attr activation,
 * matmul_grad -> relu_grad [-> add_grad] into matmul_grad with inputs
 * relu_y [and bias] and output dbias, and merge (mean, sum) -> sgd /
 * momentum / adam into the update taking the parts' tensor_array as its
 * gradient, wherever the chain's intermediates are temporaries no other op,
 * attr or opt->keep names; drops the temps no op names any more and re-runs
 * validate and infer_shapes. The results are the bits of the unfused
 * graph. `pardo run` and `pardo train` apply it on the CPU unless
 * --no-fuse; `pardo check --fused` prints its result. Requires
 * pardo_pass_check first. */
int pardo_pass_fuse(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* validate, then infer_shapes: what `pardo check` and `pardo run` do after loading. */
int pardo_pass_check(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* For the ranks of an MPI job (`mpirun -np N pardo train`, before the
 * fusion pass): one rank_merge op, role backward, right before block 0's
 * first op of effective role optimize, over every gradient the updates
 * read (the temps an op other than an update wrote before them, in the
 * order of their writers), weighted by the rows of the first feed block 0
 * reads; then re-checks. Updates that come before the last gradient's
 * writer (a graph not in parts updates each param as its gradient is
 * ready) move after it, in their order: PARDO_EINVAL, naming both ops,
 * when one cannot (an op before the writer reads or writes what it
 * updates, or writes what it reads). A graph without updates is left as
 * it is. */
int pardo_pass_ranks(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* For a run on a GPU (`pardo run|train --device cuda`, after the other
 * passes): block 0's CPU <-> GPU crossings made explicit. An op runs on
 * the GPU when it has a CUDA kernel (as the executor runs it), else on the
 * CPU; where an op reads a feed or temp whose value is on the
 * other side, a to_device or to_host op (ops/placement.c) before it moves
 * the value into a new temp ("x@CUDA", "h@HOST"), which later readers on
 * that side share until the var is written again. Params, state and
 * constants are left to the executor (moved once, where their ops run), as
 * are tensor_arrays (parallel_do's parts run on the CPU) and a var an op
 * writes in place. Checks the program first and after. */
int pardo_pass_place(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

/* Helpers the passes share about parallel_do (transpiler/parallel_blocks.c). */

/* True when op is a parallel_do. */
bool pardo_op_is_parallel_do(const pardo_op *op);

/* The first parallel_do whose integer attr `block` is sub and that sits in
 * sub's parent block: its block in *rb and index in *ri; false when no op
 * runs block sub (block 0 never is). Works on unvalidated programs (ignores
 * ops with a bad attr). */
bool pardo_block_runner(const pardo_program *p, int sub, int *rb, int *ri);

/* True when block b is run by a parallel_do whose parts_in binds name. */
bool pardo_block_binds(const pardo_program *p, int b, const char *name);

/* Helpers about the control-flow ops if, loop and scan (ops/control_flow.c;
 * transpiler/parallel_blocks.c). */

/* True when op is if, loop or scan. */
bool pardo_op_is_control(const pardo_op *op);

/* The blocks control-flow op runs into blocks (if: then_block, else_block;
 * loop, scan: body); returns how many; 0 when op is not one or an attr is
 * missing or not a block index (unvalidated programs). */
int pardo_control_blocks(const pardo_op *op, int blocks[2]);

/* As pardo_block_runner for the control-flow op that runs block sub (the
 * first in sub's parent naming it). */
bool pardo_block_control_runner(const pardo_program *p, int sub, int *rb, int *ri);

#endif
