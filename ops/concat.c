/* concat.c - concat joins its inputs along attr axis, like ONNX Concat:
 * every input has the same dtype (any dtype) and rank, and the same sizes
 * except along axis. concat_grad splits dY back into the inputs' shapes
 * (float32, float64). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "kernels.h"
#include "op.h"

static const pardo_arg_def concat_in[] = {{"X", "inputs to join (one or more, same dtype and rank)", false, true}};
static const pardo_arg_def concat_out[] = {{"Y", "the inputs joined along axis", false, false}};
static const pardo_attr_def concat_attrs[] = {
    {"axis", PARDO_ATTR_INT, NULL, "axis to join along, negative from the end"},
};

/* Checks the n inputs x[0..n) (any NULL: an error) and gives their join in
 * *y. PARDO_EINVAL for a missing or bad axis, PARDO_ESHAPE naming the input
 * that differs in dtype, rank or a size off the axis. Dims may be -1 (then
 * they match anything and a -1 along axis makes Y's size there -1); ranks
 * may be -1 (unknown). */
static int concat_type(const pardo_op *op, int n, const pardo_type *const *x, pardo_type *y, int *axis_out,
                       pardo_status *st) {
    int64_t a;
    char s0[128], sk[128];
    if (!pardo_attr(op, "axis")) return pardo_errorf(st, PARDO_EINVAL, "attr 'axis' is required");
    int rc = pardo_attr_int(op, "axis", 0, &a, st);
    if (rc != PARDO_OK) return rc;
    if (n < 1) return pardo_errorf(st, PARDO_EINVAL, "has no inputs, expected at least one");
    for (int k = 0; k < n; k++)
        if (!x[k]) return pardo_errorf(st, PARDO_EINVAL, "input %d is absent, expected a tensor", k);
    const pardo_type *ref = NULL; /* the first input of known rank */
    for (int k = 0; k < n && !ref; k++)
        if (x[k]->ndim >= 0) ref = x[k];
    *y = *x[0];
    if (!ref) {
        y->ndim = -1;
        *axis_out = -1;
    } else {
        *y = *ref;
        if (ref->ndim == 0) return pardo_errorf(st, PARDO_ESHAPE, "inputs are scalars, expected rank >= 1");
        if ((rc = pardo_normalize_axis(a, ref->ndim, "axis", axis_out, st)) != PARDO_OK) return rc;
        y->shape[*axis_out] = 0;
    }
    for (int k = 0; k < n; k++) {
        if (x[k]->dtype != x[0]->dtype)
            return pardo_errorf(st, PARDO_ESHAPE, "input %d has dtype %s, expected %s like input 0", k,
                                pardo_dtype_name(x[k]->dtype), pardo_dtype_name(x[0]->dtype));
        if (!ref || x[k]->ndim < 0) {
            if (ref) y->shape[*axis_out] = -1;
            continue;
        }
        bool ok = x[k]->ndim == ref->ndim;
        for (int d = 0; ok && d < ref->ndim; d++)
            ok = d == *axis_out || x[k]->shape[d] < 0 || y->shape[d] < 0 || x[k]->shape[d] == y->shape[d];
        if (!ok)
            return pardo_errorf(st, PARDO_ESHAPE,
                                "input %d has shape %s, expected the shape of %s except along axis %d", k,
                                pardo_shape_str(x[k]->ndim, x[k]->shape, sk, sizeof sk),
                                pardo_shape_str(ref->ndim, ref->shape, s0, sizeof s0), *axis_out);
        for (int d = 0; d < ref->ndim; d++)
            if (d != *axis_out && y->shape[d] < 0) y->shape[d] = x[k]->shape[d]; /* learn a -1 from another input */
        int64_t *sum = &y->shape[*axis_out];
        *sum = (*sum < 0 || x[k]->shape[*axis_out] < 0) ? -1 : *sum + x[k]->shape[*axis_out];
    }
    return PARDO_OK;
}

static int concat_infer(pardo_infer_ctx *ctx) {
    int axis;
    return concat_type(ctx->op, ctx->n_in, ctx->in, &ctx->out[0], &axis, ctx->st);
}

/* Fills types[0..n) from tensors t[0..n) for concat_type. */
static void tensor_types(int n, pardo_tensor *const *t, pardo_type *types, const pardo_type **ptrs) {
    for (int k = 0; k < n; k++) {
        ptrs[k] = NULL;
        if (!t[k]) continue;
        types[k] = pardo_tensor_type(t[k]);
        ptrs[k] = &types[k];
    }
}

enum { MAX_PARTS = 64 }; /* inputs the kernels take, like the executor */

/* Copies between the joined tensor and its parts, viewed as [outer, size_k *
 * inner] blocks: split = false joins parts into whole, true splits whole
 * into the parts (a NULL part is skipped). es: element size. */
static void concat_move(bool split, size_t es, int n, char *const *parts, const int64_t *sizes, char *whole,
                        int64_t outer, int64_t total, int64_t inner) {
    for (int64_t o = 0; o < outer; o++) {
        int64_t at = 0;
        for (int k = 0; k < n; k++) {
            const size_t bytes = (size_t)(sizes[k] * inner) * es;
            char *w = whole + (size_t)((o * total + at) * inner) * es;
            char *p = parts[k] ? parts[k] + (size_t)o * bytes : NULL;
            if (p && bytes) {
                if (split) memcpy(p, w, bytes);
                else memcpy(w, p, bytes);
            }
            at += sizes[k];
        }
    }
}

/* outer and inner sizes of shape around axis. */
static void around_axis(int ndim, const int64_t *shape, int axis, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= shape[d];
    for (int d = axis + 1; d < ndim; d++) *inner *= shape[d];
}

static int concat_cpu(pardo_kernel_ctx *ctx) {
    const int n = ctx->n_in;
    if (n > MAX_PARTS) return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs, at most %d", n, MAX_PARTS);
    pardo_type types[MAX_PARTS], y;
    const pardo_type *ptrs[MAX_PARTS];
    int axis;
    tensor_types(n, ctx->in, types, ptrs);
    int rc = concat_type(ctx->op, n, ptrs, &y, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *out = pardo_kernel_output(ctx, 0, y.dtype, y.ndim, y.shape);
    if (!out) return ctx->st->code;
    char *parts[MAX_PARTS];
    int64_t sizes[MAX_PARTS], outer, inner;
    for (int k = 0; k < n; k++) {
        parts[k] = pardo_tensor_data(ctx->in[k]);
        sizes[k] = ctx->in[k]->shape[axis];
    }
    around_axis(y.ndim, y.shape, axis, &outer, &inner);
    if (out->numel > 0)
        concat_move(false, pardo_dtype_size(y.dtype), n, parts, sizes, pardo_tensor_data(out), outer, y.shape[axis],
                    inner);
    return PARDO_OK;
}

const pardo_op_def pardo_op_concat = {
    .type = "concat",
    .doc = "Y = the inputs joined along axis, like ONNX Concat (any dtype, all the same)",
    .inputs = concat_in,
    .n_inputs = 1,
    .outputs = concat_out,
    .n_outputs = 1,
    .attrs = concat_attrs,
    .n_attrs = 1,
    .infer = concat_infer,
    .cpu = concat_cpu,
    .cuda = pardo_cuda_concat,
    .grad = pardo_grad_standard,
    .all_dtypes = true, /* copies elements by size */
};

/* ---- concat_grad: inputs X_0..X_{k-1}, Y, dY; outputs dX_0..dX_{k-1} ---- */

static const pardo_arg_def grad_in[] = {
    {"X", "the forward inputs X_0..X_{k-1}, then the forward output Y, then dY (\"\": zeros)", true, true},
};
static const pardo_arg_def grad_out[] = {{"dX", "gradient of each X_i, its dtype and shape", true, true}};

static int concat_grad_infer(pardo_infer_ctx *ctx) {
    const int k = ctx->n_in - 2;
    if (k < 1 || ctx->n_out > k)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs and %d outputs, expected k forward inputs, Y and dY "
                            "in and at most k outputs (k >= 1)", ctx->n_in, ctx->n_out);
    pardo_type y;
    int axis, rc = concat_type(ctx->op, k, ctx->in, &y, &axis, ctx->st);
    for (int i = 0; rc == PARDO_OK && i < ctx->n_out; i++) {
        char what[32];
        snprintf(what, sizeof what, "input %d 'X'", i);
        rc = pardo_grad_expect_float(ctx->op, i, ctx->in[i], what, ctx->st);
        ctx->out[i] = *ctx->in[i];
    }
    const pardo_type *dy = ctx->in[k + 1];
    if (rc == PARDO_OK && dy && dy->dtype != y.dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'dY' has dtype %s, expected %s like the inputs", k + 1,
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(y.dtype));
    return rc;
}

static int concat_grad_cpu(pardo_kernel_ctx *ctx) {
    const int k = ctx->n_in - 2;
    if (k < 1 || k > MAX_PARTS || ctx->n_out > k)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs and %d outputs, expected k forward inputs, Y and dY "
                            "in and at most k outputs (1 <= k <= %d)", ctx->n_in, ctx->n_out, MAX_PARTS);
    pardo_type types[MAX_PARTS], y;
    const pardo_type *ptrs[MAX_PARTS];
    int axis;
    tensor_types(k, ctx->in, types, ptrs);
    int rc = concat_type(ctx->op, k, ptrs, &y, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *dy = ctx->in[k + 1];
    if (dy && (dy->dtype != y.dtype || !pardo_shape_equal(dy->ndim, dy->shape, y.ndim, y.shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'dY' is %s %s, expected %s %s like Y", k + 1,
                            pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(y.dtype), pardo_shape_str(y.ndim, y.shape, s2, sizeof s2));
    }
    char *parts[MAX_PARTS];
    int64_t sizes[MAX_PARTS], outer, inner;
    for (int i = 0; i < k; i++) {
        parts[i] = NULL;
        sizes[i] = ctx->in[i]->shape[axis];
        if (!pardo_kernel_wants_output(ctx, i)) continue;
        pardo_tensor *x = ctx->in[i];
        if (!pardo_dtype_is_float(x->dtype))
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input %d 'X' is %s, which has no gradient", i,
                                pardo_dtype_name(x->dtype));
        pardo_tensor *dx = pardo_kernel_output(ctx, i, x->dtype, x->ndim, x->shape);
        if (!dx) return ctx->st->code;
        if (!dy) pardo_tensor_zero(dx);
        else parts[i] = pardo_tensor_data(dx);
    }
    around_axis(y.ndim, y.shape, axis, &outer, &inner);
    if (dy && dy->numel > 0)
        concat_move(true, pardo_dtype_size(y.dtype), k, parts, sizes, pardo_tensor_data(dy), outer, y.shape[axis],
                    inner);
    return PARDO_OK;
}

const pardo_op_def pardo_op_concat_grad = {
    .type = "concat_grad",
    .doc = "dX_i = the slice of dY that X_i filled (gradient of concat; float32, float64)",
    .inputs = grad_in,
    .n_inputs = 1,
    .outputs = grad_out,
    .n_outputs = 1,
    .attrs = concat_attrs,
    .n_attrs = 1,
    .infer = concat_grad_infer,
    .cpu = concat_grad_cpu,
    .cuda = pardo_cuda_concat_grad,
};
