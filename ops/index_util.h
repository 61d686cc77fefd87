/* index_util.h - helpers shared by the index, dims and compare op families
 * (ops/index.c, ops/dims.c, ops/compare.c): int64 lists given as run-time
 * tensors or as attrs (ONNX's inputs that pardo takes either way), strides of
 * a broadcast operand, typed element copies, and the gradient that gives dY
 * back X's shape. Nothing here allocates except through pardo_kernel_output. */
#ifndef PARDO_INDEX_UTIL_H
#define PARDO_INDEX_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "op.h"

/* Reads the int32 or int64 tensor t (0-D or 1-D) into out[0..*n); `what`
 * ("input 1 'starts'") names it in errors: PARDO_ESHAPE for another dtype
 * or rank, PARDO_EINVAL for more than max values. */
int pardo_index_read_ints(const pardo_tensor *t, const char *what, int64_t *out, int max, int *n, pardo_status *st);

/* As pardo_attr_ints, but values beyond int64 (JSON numbers such as
 * 9223372036854775807, which a double rounds up to 2^63) saturate to
 * INT64_MAX and INT64_MIN instead of wrapping. *n = -1 when absent. */
int pardo_index_attr_ints(const pardo_op *op, const char *name, int64_t *out, int max, int *n, pardo_status *st);

/* The list the op gets from optional input k (when the graph gives it; its
 * tensor in in_t, NULL when absent) or else from attr `name`: *n = -1 when
 * neither is there. */
int pardo_index_ints(const pardo_op *op, const pardo_tensor *in_t, int k, const char *name, int64_t *out, int max,
                     int *n, pardo_status *st);

/* PARDO_OK when the inference type t of an optional list input (`what`) is
 * int64 (or int32) of rank 0 or 1 (unknown passes); sets *len to its
 * length (-1 when not known until run time). PARDO_ESHAPE otherwise. */
int pardo_index_expect_list(const pardo_type *t, const char *what, int *len, pardo_status *st);

/* Element strides of an operand of shape (nd dims) broadcast to out_shape
 * (out_nd >= nd dims, numpy alignment): 0 where the operand has no dim or
 * a dim of 1, its contiguous stride otherwise. */
void pardo_index_bcast_strides(int out_nd, const int64_t *out_shape, int nd, const int64_t *shape, int64_t *strides);

/* Copies n elements of size es (1, 2, 4 or 8 bytes) from src to dst. */
void pardo_index_copy(size_t es, void *dst, const void *src, int64_t n);

/* The kernel of a gradient op whose dX is dY's elements in X's shape
 * (unsqueeze, squeeze, reshape): X is input 0, dY input dy_k (absent:
 * zeros). PARDO_ENOTSUP for a non-float X, PARDO_ESHAPE when dY's dtype or
 * element count disagree with X's. */
int pardo_index_back_grad(pardo_kernel_ctx *ctx, int dy_k);

/* Inference of such a gradient op: dX gets X's type; dY (input dy_k) must
 * have X's dtype. */
int pardo_index_back_grad_infer(pardo_infer_ctx *ctx, int dy_k);

#endif
