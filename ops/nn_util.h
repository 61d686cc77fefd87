/* nn_util.h - helpers shared by the network, loss and optimizer op families
 * (conv, pool, norm, dropout, embedding, loss, optimizer): optional inputs
 * that the graph may leave out at the end, dtype and shape agreement checks
 * that name both sides, and zero-filled outputs. Nothing here allocates
 * except pardo_nn_zeros, through pardo_kernel_output. */
#ifndef PARDO_NN_UTIL_H
#define PARDO_NN_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "op.h"

/* Input k's type during inference; NULL when the graph gave "" or left the
 * (trailing, optional) input out. */
static inline const pardo_type *pardo_nn_in_type(const pardo_infer_ctx *ctx, int k) {
    return k < ctx->n_in ? ctx->in[k] : NULL;
}

/* Input k's tensor in a kernel; NULL when absent, as pardo_nn_in_type. */
static inline pardo_tensor *pardo_nn_in(const pardo_kernel_ctx *ctx, int k) {
    return k < ctx->n_in ? ctx->in[k] : NULL;
}

/* PARDO_OK when t is float32 or float64; else PARDO_ESHAPE naming `what`
 * ("input 0 'X'"). */
int pardo_nn_expect_float(const pardo_type *t, const char *what, pardo_status *st);

/* PARDO_OK when t has rank ndim (an unknown rank passes); else PARDO_ESHAPE
 * naming `what`, its shape and `layout` ("[N, C, H, W]"). */
int pardo_nn_expect_rank(const pardo_type *t, const char *what, int ndim, const char *layout, pardo_status *st);

/* PARDO_OK when a and b have the same dtype and agree on every dim known on
 * both sides (-1 and an unknown rank match anything); else PARDO_ESHAPE
 * naming both inputs with their dtypes and shapes. */
int pardo_nn_expect_same(const pardo_type *a, const char *a_what, const pardo_type *b, const char *b_what,
                         pardo_status *st);

/* PARDO_OK when t is a scalar (shape [] or [1]; unknown rank or a -1 dim
 * passes at inference) of one of the n dtypes; else PARDO_ESHAPE naming
 * `what`. */
int pardo_nn_expect_scalar(const pardo_type *t, const char *what, const pardo_dtype *dtypes, int n, pardo_status *st);

/* Reads op's attr `name` as n values, one per spatial axis (2 n for pads:
 * begins, then ends), each >= lo, into out; absent or [] leaves out's
 * defaults. PARDO_EINVAL naming the attr for another count or a value
 * below lo. The window attrs of conv_nd, conv_transpose, the N-d pools and
 * max_unpool. */
int pardo_nn_axis_ints(const pardo_op *op, const char *name, int n, int64_t lo, int64_t *out, pardo_status *st);

/* Output i of the kernel with the given dtype and shape, every element zero;
 * NULL with ctx->st filled on failure. The tensor is borrowed from ctx. */
pardo_tensor *pardo_nn_zeros(pardo_kernel_ctx *ctx, int i, pardo_dtype dtype, int ndim, const int64_t *shape);

#endif
