/* op.h - what an op is to pardo: its schema (inputs, outputs, attrs), shape
 * and dtype inference, CPU kernel and optional CUDA kernel. Each op family
 * file in ops/ defines its pardo_op_def values; ops/registry.c lists them all
 * in one explicit table. src/ reaches ops only through this header. */
#ifndef PARDO_OP_H
#define PARDO_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "core/status.h"
#include "core/tensor.h"

typedef enum pardo_attr_type {
    PARDO_ATTR_INT = 0,
    PARDO_ATTR_FLOAT,
    PARDO_ATTR_BOOL,
    PARDO_ATTR_STRING,
    PARDO_ATTR_INTS,
    PARDO_ATTR_FLOATS,
    PARDO_ATTR_OBJECT,
    PARDO_ATTR_ANY,
} pardo_attr_type;

typedef struct pardo_arg_def {
    const char *name;  // e.g. "X"
    const char *doc;   // one line
    bool optional;     // may be "" or left out (trailing)
    bool variadic;     // the last input (output) may repeat (concat's inputs, concat_grad's outputs)
} pardo_arg_def;

typedef struct pardo_attr_def {
    const char *name;
    pardo_attr_type type;
    const char *dflt;  // default as JSON text, for `pardo ops T`; NULL: required; "null": optional, no default value
    const char *doc;
} pardo_attr_def;

/* Shape inference: the types of the inputs (NULL for an absent optional
 * input; a dim may be -1, ndim -1 for unknown rank) in, the output types out.
 * Returns PARDO_OK or an error (PARDO_ESHAPE, PARDO_EINVAL) whose message
 * says what was expected; the caller prefixes file, block and op. */
typedef struct pardo_infer_ctx {
    const pardo_op *op;
    int n_in;
    const pardo_type *const *in;  // n_in pointers, NULL for absent inputs
    int n_out;
    pardo_type *out;              // n_out types to fill
    pardo_status *st;
} pardo_infer_ctx;

typedef enum pardo_device_kind {
    PARDO_DEVICE_CPU = 0,
    PARDO_DEVICE_CUDA,
} pardo_device_kind;

struct pardo_executor;
struct pardo_scope;

/* State a kernel keeps across runs of one op (a kept packed weight,
 * parallel_do's child scopes): data is the kernel's, freed with
 * free_fn(data) when the executor is freed. */
typedef struct pardo_op_state {
    void *data;
    void (*free_fn)(void *data);
} pardo_op_state;

/* What a kernel gets for one run of one op. Inputs are current on the
 * kernel's device. Outputs are made with pardo_kernel_output. */
typedef struct pardo_kernel_ctx {
    const pardo_op *op;
    int n_in;
    pardo_tensor **in;      // n_in, NULL for absent optional inputs; borrowed
    int n_out;
    pardo_tensor **out;     // n_out; current tensors of the outputs or NULL; set by pardo_kernel_output
    pardo_status *st;
    pardo_device_kind device;
    int nthreads;           // threads the kernel may use (1 inside a parallel_do part)
    bool idle_help;         // nthreads 1 in a parallel_do part: pardo_parallel_for_idle may share a loop with
                            // pool threads that have nothing else to do (a part that ended first)
    bool training;          // dropout and the like are active
    uint64_t step;          // index of this run of the block (0, 1, ...)
    struct pardo_executor *exec; // the executor running the op (borrowed); parallel_do runs its block through it
    struct pardo_scope *scope;   // the scope the op runs in (borrowed; read-only for kernels)
    int block, op_index;         // where the op is in the program
    int nparts_default;          // parts when split's attr parts is 0: the run's thread count
    const struct pardo_program *prog; // the program the op is in (borrowed)
    pardo_op_state *state;       // this op's state slot across runs (owned by the executor; NULL outside one); one per
                                 // op, so the parts of a parallel_do share it: keep state in block 0 only
} pardo_kernel_ctx;

typedef int (*pardo_infer_fn)(pardo_infer_ctx *ctx);
typedef int (*pardo_kernel_fn)(pardo_kernel_ctx *ctx);

/* What the autodiff pass asks of a differentiable op: append to blk the ops
 * that compute d(loss)/d(fwd input k) into in_grads[k] from the output
 * gradients out_grads[j] (SPEC section 2: the gradient of V is V@GRAD). */
typedef struct pardo_grad_request {
    const pardo_op *fwd;           // the forward op (borrowed)
    const struct pardo_program *prog; // the program, for the vars' inferred types (borrowed; may be NULL)
    int block;                     // the block fwd is in
    const char *const *out_grads;  // fwd->n_out names; "" where output j does not reach the loss (treat as zeros)
    const char *const *in_grads;   // fwd->n_in names to write; "" where that input needs no gradient
} pardo_grad_request;

/* Appends the gradient ops for req to blk (role backward). Returns PARDO_OK,
 * or an error (PARDO_ENOMEM, PARDO_ENOTSUP for an input that cannot have a
 * gradient). Op pointers into blk are invalidated (blk->ops may grow). */
typedef int (*pardo_grad_fn)(const pardo_grad_request *req, pardo_block *blk, pardo_status *st);

/* The sync form of an op whose kernel reduces over the batch (batch_norm's
 * statistics, attr sync): appends to blk, which op is not in, the ops that
 * run op in a parallel_do part with that reduction over every part's rows
 * (all_reduce between them; the multi_cpu pass calls it for block 1).
 * Names are borrowed from op; blk's op pointers are invalidated. */
typedef int (*pardo_sync_fn)(const pardo_op *op, pardo_block *blk, pardo_status *st);

typedef struct pardo_op_def {
    const char *type;                 // name in graph files
    const char *doc;                  // one line
    const pardo_arg_def *inputs;      // n_inputs
    int n_inputs;
    const pardo_arg_def *outputs;     // n_outputs
    int n_outputs;
    const pardo_attr_def *attrs;      // n_attrs
    int n_attrs;
    pardo_infer_fn infer;             // required
    pardo_kernel_fn cpu;              // required
    pardo_kernel_fn cuda;             // optional; NULL: the CPU kernel runs
    bool inplace;                     // the kernel is correct when an output is the same tensor as an input
    pardo_grad_fn grad;               // builds the gradient ops; NULL: not differentiable
    unsigned array_in;                // bit k: input k must be a tensor_array (the last bit covers repeats)
    unsigned array_ok;                // bit k: input k may be a tensor or a tensor_array (the kernel takes both)
    unsigned array_out;               // bit k: output k is a tensor_array (kind of the var validate adds)
    bool variadic_out;                // the last output may repeat (parallel_do)
    bool metric;                      // output 0 is a float scalar metric of the batch (accuracy), mean over
                                      // rows: `pardo train` reports its epoch mean beside the loss
    pardo_sync_fn sync_parts;         // its sync form in a parallel_do part; NULL: none (see pardo_sync_fn)
    bool all_dtypes;                  // infer and kernels handle the dtypes past bool (uint8..bfloat16,
                                      // pardo_dtype_is_extra); false: pardo_op_infer refuses them
    bool halves_in_f32;               // float16 / bfloat16 inputs run the float32 kernel: widened, and its
                                      // float32 outputs rounded back (pardo_op_run_cpu; ops/op_halves.c)
    bool on_host;                     // runs on the CPU in a GPU run too, by design (to_host): not noted as
                                      // an op without a CUDA kernel
} pardo_op_def;

/* The usual gradient builder (SPEC section 2): one op of type "<T>_grad"
 * whose inputs are T's inputs, T's outputs and the output gradients, whose
 * outputs are the input gradients ("" where not needed), with T's attrs and
 * name (suffixed "@grad") copied. Trailing optional inputs and outputs that
 * the forward op leaves out are passed as "" (inputs, outputs and output
 * gradients alike), so T_grad always sees T's full schema arity (a variadic
 * input list is passed as it is). Set `.grad = pardo_grad_standard` in T's def
 * and register T_grad. */
int pardo_grad_standard(const pardo_grad_request *req, pardo_block *blk, pardo_status *st);

/* As pardo_grad_standard, but forward input k is passed as "" where bit k
 * of drop_in is set, and forward output j where bit j of drop_out is: for
 * a T_grad whose schema lets that input be absent (it needs neither the
 * value nor, there, the shape). A var no gradient op reads is dead after its
 * forward readers, and an executor that frees dead temporaries frees it
 * (pardo_exec_options.release_temps). */
int pardo_grad_wired(const pardo_grad_request *req, pardo_block *blk, uint64_t drop_in, uint64_t drop_out,
                     pardo_status *st);

/* As pardo_grad_wired, with exactly n_fwd_in forward inputs passed (those
 * past the op's own list as ""; -1: the schema's arity as there): for a T
 * whose schema grew optional inputs that T_grad's layout predates. */
int pardo_grad_wired_n(const pardo_grad_request *req, pardo_block *blk, uint64_t drop_in, uint64_t drop_out,
                       int n_fwd_in, pardo_status *st);

/* Builds T_grad with T's input 0 left out (bit 0 of drop_in): for unary ops
 * whose gradient reads only Y and dY (UNARY_GRAD_OP_FROM_Y). */
int pardo_grad_from_output(const pardo_grad_request *req, pardo_block *blk, pardo_status *st);

/* True when forward input `operand` of an elementwise binary op with the
 * other input `other` and output `out` has the output's shape whatever the
 * run-time sizes, going by their inferred types: same rank, and each dim
 * either known and equal to the output's, or one that `other` lacks or has
 * as 1 (so it is not broadcast). False when a type is unknown. */
bool pardo_grad_operand_fills_output(const pardo_grad_request *req, const char *operand, const char *other,
                                     const char *out);

/* The type name of T's standard gradient op ("matmul" -> "matmul_grad") into
 * buf; returns buf. */
char *pardo_grad_op_type(const char *type, char *buf, size_t n);

/* Gives output i a tensor of dtype and shape, current and writable on the
 * kernel's device. Reuses the tensor the output var already holds when its
 * dtype and shape match and nobody else holds it, or when the op is inplace
 * and that tensor is one of its inputs (an update such as w = w - lr * g);
 * otherwise allocates. A reused tensor holds old data: write every element. Returns the tensor (borrowed from ctx) or NULL with
 * ctx->st filled. */
pardo_tensor *pardo_kernel_output(pardo_kernel_ctx *ctx, int i, pardo_dtype dtype, int ndim,
                                  const int64_t *shape);

/* Gives output i input `in`'s elements in shape (ndim, shape), which has as
 * many elements (reshape, flatten, squeeze, unsqueeze and their gradients):
 * on the CPU a view of the input's data, no copy, where both vars are
 * temporaries that only their producer (this op) writes, so that nothing
 * can write through the view or under it while it lives; else a copy in a
 * tensor from pardo_kernel_output. A view is never reused as another op's
 * output nor pooled (it holds its input alive until it is released).
 * Returns the tensor (borrowed from ctx) or NULL with ctx->st filled. */
pardo_tensor *pardo_kernel_output_as(pardo_kernel_ctx *ctx, int i, int in, int ndim, const int64_t *shape);

/* False when the graph leaves output i out ("", an input gradient nobody
 * needs): the kernel may skip computing it and must not ask for its tensor. */
bool pardo_kernel_wants_output(const pardo_kernel_ctx *ctx, int i);

/* Gives output i a tensor_array of n parts of dtype elem: the array the
 * output var already holds when nobody else holds it (its parts are kept
 * for reuse; parts past n are released), else a new one whose parts are
 * NULL. Returns it (borrowed from ctx) or NULL with ctx->st filled. */
pardo_tensor *pardo_kernel_output_array(pardo_kernel_ctx *ctx, int i, pardo_dtype elem, int n);

/* Runs fn(arg, begin, end) over [0, n) split ggml's way: nth =
 * min(ctx->nthreads, thread pool size), dr = (n + nth - 1) / nth, chunk c
 * is [dr * c, min(dr * c + dr, n)), on the calling thread and pool workers;
 * returns when every chunk is done. With nth == 1 (as inside a parallel_do
 * part) or n <= 1, one call fn(arg, 0, n) on the calling thread. fn must be
 * safe to run concurrently on disjoint ranges. PARDO_OK, or PARDO_EINVAL
 * for n < 0. No allocation. */
int pardo_parallel_for(pardo_kernel_ctx *ctx, int64_t n, void (*fn)(void *arg, int64_t begin, int64_t end),
                       void *arg);

/* fn(arg, i, i + 1) for each item i of [0, n), in increasing order on the
 * calling thread; where ctx->idle_help (a kernel inside a parallel_do part)
 * pool threads that are awake with nothing to do take items too (the
 * thread of a part that ended first helps the part still running; none is
 * woken for it), else all run inline. For loops whose items are few and
 * big (a product's row blocks) and give the same result on any thread.
 * PARDO_OK, or PARDO_EINVAL for n < 0. No allocation. */
int pardo_parallel_for_idle(pardo_kernel_ctx *ctx, int64_t n, void (*fn)(void *arg, int64_t begin, int64_t end),
                            void *arg);

/* As pardo_parallel_for, but in blocks of `block` items (the last may be
 * shorter) handed out one at a time to whichever thread asks next: a
 * thread that comes late, or a part's thread that ends while the owner is
 * halfway (the early stage, executor.h), takes what is left. For loops
 * whose every item costs about the same and reads its own memory (an
 * optimizer update). */
int pardo_parallel_for_blocks(pardo_kernel_ctx *ctx, int64_t n, int64_t block,
                              void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

/* Runs ctx's op on the CPU: def->cpu, or, for an op with halves_in_f32
 * given float16 or bfloat16 inputs, def->cpu on float32 copies of them with
 * each float32 output rounded back to the first half input's dtype into
 * ctx's output (other outputs, an int64 index, handed over as they are).
 * The copies are the call's own, freed before it returns. The executor and
 * the CPU fallback of the CUDA kernels call it. */
int pardo_op_run_cpu(pardo_kernel_ctx *ctx);

/* pardo_op_infer's form for halves_in_f32 ops with a half input: def->infer
 * on the inputs' types widened to float32, its float32 outputs given back
 * the half dtype. */
int pardo_op_infer_halves(pardo_infer_ctx *ctx);

/* The registry. Lookup by type name; NULL when unknown. Thread-safe (read-only). */
const pardo_op_def *pardo_op_lookup(const char *type);

/* Number of registered ops and the i-th, in table order. */
int pardo_op_count(void);
const pardo_op_def *pardo_op_at(int i);

/* Checks the table once (duplicate names, missing infer or cpu): returns
 * PARDO_OK or PARDO_EINVAL naming the culprit. main() calls it at start-up. */
int pardo_registry_check(pardo_status *st);

/* Writes the known op names, comma separated, into buf; returns buf. */
char *pardo_op_known_list(char *buf, size_t n);

/* Says on stderr, once per op type and process, that an op of a run on the GPU runs its CPU kernel with its tensors
 * moved to the host and back: "note: op 'T' runs on the CPU in this GPU run (WHY); its tensors are moved between
 * the devices". `why` (borrowed) says why: no CUDA kernel, or a dtype the CUDA kernel does not take. Called by the
 * executor for an op whose def has no CUDA kernel and by a CUDA kernel that hands its op to the CPU; never in CPU
 * runs. Thread-safe. */
void pardo_op_note_cpu_run(const pardo_op_def *def, const char *why);

/* Writes into buf the known op names nearest to type by edit distance (case
 * ignored, a swap of neighbours one edit), up to 3 joined by " or ", for a
 * "did you mean" hint; "" when none is within a third of type's length
 * (rounded up) in edits. Returns buf. Thread-safe. */
char *pardo_op_nearest(const char *type, char *buf, size_t n);

/* Helpers for inference functions (ops/infer_util.c). */

/* Runs ctx->op->def's inference, the one way callers run it: first refuses
 * (PARDO_ENOTSUP, naming the input and its dtype) an input of a dtype past
 * bool (uint8..bfloat16) when the def does not set all_dtypes, and after it
 * an output the op would make of such a dtype. Returns what infer returns. */
int pardo_op_infer(pardo_infer_ctx *ctx);

/* Sets *out to the numpy broadcast of a and b; PARDO_ESHAPE naming both
 * shapes when they do not broadcast. -1 dims broadcast with 1 or -1. */
int pardo_broadcast_types(const pardo_type *a, const pardo_type *b, pardo_type *out, pardo_status *st);

/* PARDO_ESHAPE unless t's dtype is one of the `n` listed; `what` names the
 * input ("input 0 'X'") in the message. */
int pardo_expect_dtype(const pardo_type *t, const char *what, const pardo_dtype *allowed, int n, pardo_status *st);

/* Whether dt is one of the n dtypes of allowed (a kernel's check where its inference already said why). */
bool pardo_dtype_listed(pardo_dtype dt, const pardo_dtype *allowed, int n);

/* The inference of a broadcasting binary op on inputs 0 'A' and 1 'B': A's
 * dtype one of the `n` listed, B's the same (PARDO_ESHAPE naming both
 * otherwise); output 0 gets their broadcast shape and A's dtype. */
int pardo_infer_binary_same_dtype(pardo_infer_ctx *ctx, const pardo_dtype *allowed, int n);

/* For a gradient op's inference: PARDO_OK when output k (the gradient of
 * the forward input `what`, e.g. "input 0 'X'", of type t) is left out ("")
 * or t is float32 or float64; otherwise PARDO_ENOTSUP saying that `what`
 * has t's dtype, which has no gradient. */
int pardo_grad_expect_float(const pardo_op *op, int k, const pardo_type *t, const char *what, pardo_status *st);

/* True when the graph asks op for output k (it is there and not ""). */
bool pardo_op_wants_output(const pardo_op *op, int k);

/* Normalises axis (negative counts from the end) for rank ndim; PARDO_EINVAL
 * naming attr when out of range. */
int pardo_normalize_axis(int64_t axis, int ndim, const char *attr, int *out, pardo_status *st);

#endif
