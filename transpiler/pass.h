/* pass.h - passes over the Program IR. Each is `int pass(pardo_program *,
 * const pardo_pass_options *, pardo_status *)`: PARDO_OK, or an error whose
 * message names the file, line, block, op and var. Passes never run kernels. */
#ifndef PARDO_PASS_H
#define PARDO_PASS_H

#include "graph.h"
#include "status.h"

typedef struct pardo_pass_options {
    int reserved; /* options of later passes (parts, optimizer) go here */
} pardo_pass_options;

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

/* validate, then infer_shapes: what `pardo check` and `pardo run` do after loading. */
int pardo_pass_check(pardo_program *p, const pardo_pass_options *opt, pardo_status *st);

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

#endif
