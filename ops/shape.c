/* shape.c - ops that change a tensor's shape but not its values: identity,
 * reshape (like ONNX Reshape; the shape an attr or a run-time int64 input), flatten (like ONNX
 * Flatten) and transpose (like ONNX Transpose), any dtype, each with its
 * gradient op T_grad (float32 and float64 only: an integer or bool input has
 * no gradient, PARDO_ENOTSUP when one is asked for). concat is in
 * ops/concat.c, cast in ops/cast.c. */
#include <stdbool.h>
#include <string.h>

#include "index_util.h"
#include "kernel_util.h"
#include "kernels.h"
#include "op.h"

static const pardo_arg_def x_in[] = {{"X", "input tensor (any dtype)", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "output tensor, X's dtype", false, false}};
static const pardo_arg_def grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def grad_out[] = {{"dX", "gradient of X, X's dtype and shape", true, false}};

/* ---- the gradients that only give dY back X's shape ---- */

/* identity_grad, reshape_grad, flatten_grad: dX is X's type. */
static int back_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc != PARDO_OK) return rc;
    if (dy && dy->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'dY' has dtype %s, expected %s like input 0 'X'",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(x->dtype));
    ctx->out[0] = *x;
    return PARDO_OK;
}

/* dX = dY's elements in X's shape (zeros when dY is absent). */
static int back_grad_cpu(pardo_kernel_ctx *ctx) { return pardo_index_back_grad(ctx, 2); }

/* ---- identity ---- */

static int identity_infer(pardo_infer_ctx *ctx) {
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

/* Y = X's elements in shape (ndim, shape): a view of X where that is safe
 * (pardo_kernel_output_as), else a copy. */
static int copy_as(pardo_kernel_ctx *ctx, int ndim, const int64_t *shape) {
    return pardo_kernel_output_as(ctx, 0, 0, ndim, shape) ? PARDO_OK : ctx->st->code;
}

static int identity_cpu(pardo_kernel_ctx *ctx) { return copy_as(ctx, ctx->in[0]->ndim, ctx->in[0]->shape); }

const pardo_op_def pardo_op_identity = {
    .type = "identity",
    .doc = "Y = X (a copy; any dtype)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .infer = identity_infer,
    .cpu = identity_cpu,
    .cuda = pardo_cuda_identity,
    .grad = pardo_grad_standard,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_identity_grad = {
    .type = "identity_grad",
    .doc = "dX = dY (gradient of identity; float32, float64)",
    .inputs = grad_in,
    .n_inputs = 3,
    .outputs = grad_out,
    .n_outputs = 1,
    .infer = back_grad_infer,
    .cpu = back_grad_cpu,
    .cuda = pardo_cuda_identity_grad,
};

/* ---- reshape ---- */

static const pardo_arg_def reshape_in[] = {
    {"X", "input tensor (any dtype)", false, false},
    {"shape", "int64 1-D, read at run time; overrides attr shape (\"\": the attr)", true, false},
};
static const pardo_attr_def reshape_attrs[] = {
    {"shape", PARDO_ATTR_INTS, "null", "new shape; 0 copies X's dim at that index, one -1 takes what is left "
                                       "(required unless input 1 is given)"},
    {"allowzero", PARDO_ATTR_BOOL, "false", "a 0 in shape is a 0-size dim, not a copy (ONNX Reshape-14)"},
};

/* The shape reshape makes of x (dims may be -1 at inference, ndim -1:
 * unknown rank) into y, from s[0..n) (`what` names where it came from).
 * PARDO_EINVAL for a bad value (a value below -1, two -1, a 0 past X's
 * rank), PARDO_ESHAPE when the element counts cannot agree. */
static int reshape_target(const int64_t *s, int n, bool allowzero, const char *what, int x_nd, const int64_t *x_shape,
                          pardo_type *y, pardo_status *st) {
    char sx[128], sy[128];
    bool copied[PARDO_MAX_DIMS] = {false};
    int infer_at = -1;
    int64_t out_known = 1; /* product of the output dims neither copied nor inferred */
    y->ndim = n;
    for (int i = 0; i < n; i++) {
        if (s[i] < -1)
            return pardo_errorf(st, PARDO_EINVAL, "%s element %d is %lld, expected a size, 0 or -1", what, i,
                                (long long)s[i]);
        if (s[i] == -1) {
            if (infer_at >= 0)
                return pardo_errorf(st, PARDO_EINVAL, "%s has -1 at elements %d and %d, expected at most one", what,
                                    infer_at, i);
            infer_at = i;
            y->shape[i] = -1;
        } else if (s[i] == 0 && !allowzero) {
            if (x_nd >= 0 && i >= x_nd)
                return pardo_errorf(st, PARDO_EINVAL, "%s element %d is 0 (copy X's dim %d), but X %s has rank %d",
                                    what, i, i, pardo_shape_str(x_nd, x_shape, sx, sizeof sx), x_nd);
            copied[i] = true;
            y->shape[i] = x_nd >= 0 ? x_shape[i] : -1;
        } else {
            y->shape[i] = s[i];
            if (__builtin_mul_overflow(out_known, s[i], &out_known))
                return pardo_errorf(st, PARDO_EINVAL, "%s %s has more elements than fit in 64 bits", what,
                                    pardo_shape_str(n, s, sy, sizeof sy));
        }
    }
    if (x_nd < 0) return PARDO_OK;
    /* a -1 next to a 0-size dim could be any size (numpy and onnxruntime
     * refuse it too) */
    bool zero = false;
    for (int i = 0; i < n; i++) zero |= y->shape[i] == 0;
    if (infer_at >= 0 && zero)
        return pardo_errorf(st, PARDO_ESHAPE, "X %s cannot be reshaped to %s %s: -1 next to a 0-size dim is "
                            "ambiguous", pardo_shape_str(x_nd, x_shape, sx, sizeof sx), what,
                            pardo_shape_str(n, s, sy, sizeof sy));
    /* copied dims stand on both sides, so they cancel out of the count */
    int64_t in_rest = 1;
    for (int d = 0; d < x_nd && in_rest >= 0; d++)
        if (!copied[d] && (x_shape[d] < 0 || __builtin_mul_overflow(in_rest, x_shape[d], &in_rest))) in_rest = -1;
    if (in_rest < 0) return PARDO_OK; /* a run-time dim: the -1 stays unknown */
    if (infer_at >= 0 && in_rest % out_known == 0) {
        y->shape[infer_at] = in_rest / out_known;
        return PARDO_OK;
    }
    if (infer_at < 0 && in_rest == out_known) return PARDO_OK;
    return pardo_errorf(st, PARDO_ESHAPE, "X %s cannot be reshaped to %s %s: the sizes do not match",
                        pardo_shape_str(x_nd, x_shape, sx, sizeof sx), what, pardo_shape_str(n, s, sy, sizeof sy));
}

/* Reads the target from input 1 (sh, when given) or attr shape, and makes y. */
static int reshape_make(const pardo_op *op, const pardo_tensor *sh, int x_nd, const int64_t *x_shape, pardo_type *y,
                        pardo_status *st) {
    int64_t s[PARDO_MAX_DIMS];
    int n;
    bool allowzero;
    int rc = pardo_attr_bool(op, "allowzero", false, &allowzero, st);
    if (rc != PARDO_OK) return rc;
    if (sh) rc = pardo_index_read_ints(sh, "input 1 'shape'", s, PARDO_MAX_DIMS, &n, st);
    else if (!pardo_attr(op, "shape")) return pardo_errorf(st, PARDO_EINVAL, "attr 'shape' is required (or input 1)");
    else rc = pardo_attr_ints(op, "shape", s, PARDO_MAX_DIMS, &n, st);
    if (rc != PARDO_OK) return rc;
    return reshape_target(s, n, allowzero, sh ? "input 1 'shape'" : "attr 'shape'", x_nd, x_shape, y, st);
}

static int reshape_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *sh = ctx->n_in > 1 ? ctx->in[1] : NULL;
    ctx->out[0].dtype = x->dtype;
    if (!sh) return reshape_make(ctx->op, NULL, x->ndim, x->shape, &ctx->out[0], ctx->st);
    /* the values come at run time: the rank is the input's length */
    int n;
    bool allowzero;
    int rc = pardo_index_expect_list(sh, "input 1 'shape'", &n, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "allowzero", false, &allowzero, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (n > PARDO_MAX_DIMS)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 1 'shape' has %d values, at most %d", n, PARDO_MAX_DIMS);
    ctx->out[0].ndim = sh->ndim == 0 ? -1 : n;
    for (int i = 0; i < ctx->out[0].ndim; i++) ctx->out[0].shape[i] = -1;
    return PARDO_OK;
}

static int reshape_cpu(pardo_kernel_ctx *ctx) {
    pardo_type y;
    if (ctx->n_in > 1 && ctx->in[1] && ctx->in[1]->ndim != 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'shape' has rank %d, expected 1-D", ctx->in[1]->ndim);
    int rc = reshape_make(ctx->op, ctx->n_in > 1 ? ctx->in[1] : NULL, ctx->in[0]->ndim, ctx->in[0]->shape, &y,
                          ctx->st);
    return rc != PARDO_OK ? rc : copy_as(ctx, y.ndim, y.shape);
}

/* reshape_grad's layout (X, Y, dY) predates the shape input, which it does
 * not need: dX is dY in X's shape. */
static int reshape_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired_n(req, blk, 0, 0, 1, st);
}

static int reshape_grad_infer(pardo_infer_ctx *ctx) {
    pardo_type y;
    if (pardo_attr(ctx->op, "shape")) { /* the attr is checked here too; a run-time shape is not seen */
        int rc = reshape_make(ctx->op, NULL, ctx->in[0]->ndim, ctx->in[0]->shape, &y, ctx->st);
        if (rc != PARDO_OK) return rc;
    }
    return back_grad_infer(ctx);
}

const pardo_op_def pardo_op_reshape = {
    .type = "reshape",
    .doc = "Y = X's elements in the shape given by input 1 (int64, at run time) or attr shape, like ONNX Reshape: 0 "
           "copies a dim (unless allowzero), one -1 is inferred (any dtype)",
    .inputs = reshape_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = reshape_attrs,
    .n_attrs = 2,
    .infer = reshape_infer,
    .cpu = reshape_cpu,
    .cuda = pardo_cuda_reshape,
    .grad = reshape_grad_build,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_reshape_grad = {
    .type = "reshape_grad",
    .doc = "dX = dY in X's shape (gradient of reshape, inputs X, Y, dY; float32, float64)",
    .inputs = grad_in,
    .n_inputs = 3,
    .outputs = grad_out,
    .n_outputs = 1,
    .attrs = reshape_attrs,
    .n_attrs = 2,
    .infer = reshape_grad_infer,
    .cpu = back_grad_cpu,
    .cuda = pardo_cuda_reshape_grad,
};

/* ---- flatten ---- */

static const pardo_attr_def flatten_attrs[] = {
    {"axis", PARDO_ATTR_INT, "1", "dims before it make Y's rows, the rest its columns; in [-rank, rank]"},
};

/* Y's [rows, cols] for x (dims may be -1: the product is then -1). */
static int flatten_target(const pardo_op *op, int x_nd, const int64_t *x_shape, pardo_type *y, pardo_status *st) {
    int64_t a;
    int rc = pardo_attr_int(op, "axis", 1, &a, st);
    if (rc != PARDO_OK) return rc;
    y->ndim = 2;
    y->shape[0] = y->shape[1] = -1;
    if (x_nd < 0) return PARDO_OK;
    if (a < -x_nd || a > x_nd)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'axis' is %lld, expected an axis in [%d, %d] for rank %d",
                            (long long)a, -x_nd, x_nd, x_nd);
    int axis = (int)(a < 0 ? a + x_nd : a);
    int64_t rows = 1, cols = 1;
    for (int d = 0; d < x_nd; d++) {
        int64_t *p = d < axis ? &rows : &cols;
        *p = (*p < 0 || x_shape[d] < 0) ? -1 : *p * x_shape[d];
    }
    y->shape[0] = rows;
    y->shape[1] = cols;
    return PARDO_OK;
}

static int flatten_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    ctx->out[0].dtype = x->dtype;
    return flatten_target(ctx->op, x->ndim, x->shape, &ctx->out[0], ctx->st);
}

static int flatten_cpu(pardo_kernel_ctx *ctx) {
    pardo_type y;
    int rc = flatten_target(ctx->op, ctx->in[0]->ndim, ctx->in[0]->shape, &y, ctx->st);
    return rc != PARDO_OK ? rc : copy_as(ctx, y.ndim, y.shape);
}

static int flatten_grad_infer(pardo_infer_ctx *ctx) {
    pardo_type y;
    int rc = flatten_target(ctx->op, ctx->in[0]->ndim, ctx->in[0]->shape, &y, ctx->st);
    return rc != PARDO_OK ? rc : back_grad_infer(ctx);
}

const pardo_op_def pardo_op_flatten = {
    .type = "flatten",
    .doc = "Y = X as the 2-D [prod(dims before axis), prod(dims from axis)], like ONNX Flatten (any dtype)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = flatten_attrs,
    .n_attrs = 1,
    .infer = flatten_infer,
    .cpu = flatten_cpu,
    .cuda = pardo_cuda_flatten,
    .grad = pardo_grad_standard,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_flatten_grad = {
    .type = "flatten_grad",
    .doc = "dX = dY in X's shape (gradient of flatten; float32, float64)",
    .inputs = grad_in,
    .n_inputs = 3,
    .outputs = grad_out,
    .n_outputs = 1,
    .attrs = flatten_attrs,
    .n_attrs = 1,
    .infer = flatten_grad_infer,
    .cpu = back_grad_cpu,
    .cuda = pardo_cuda_flatten_grad,
};

/* ---- transpose ---- */

static const pardo_attr_def transpose_attrs[] = {
    {"perm", PARDO_ATTR_INTS, "null", "Y's dim i is X's dim perm[i]; absent: the dims reversed"},
};

/* Reads perm for rank ndim into perm[] (*n = its length; the reversed dims
 * when absent; *n = -1 when absent and ndim unknown). PARDO_EINVAL naming
 * attr 'perm' unless it is a permutation of 0..ndim-1. */
static int transpose_perm(const pardo_op *op, int ndim, int *perm, int *n, pardo_status *st) {
    int64_t p[PARDO_MAX_DIMS];
    int rc = pardo_attr_ints(op, "perm", p, PARDO_MAX_DIMS, n, st);
    if (rc != PARDO_OK) return rc;
    if (*n < 0) {
        if (ndim < 0) return PARDO_OK;
        *n = ndim;
        for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
        return PARDO_OK;
    }
    if (ndim >= 0 && *n != ndim)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'perm' has %d elements, expected %d (X's rank)", *n, ndim);
    bool seen[PARDO_MAX_DIMS] = {false};
    for (int i = 0; i < *n; i++) {
        if (p[i] < 0 || p[i] >= *n)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'perm' element %d is %lld, expected a dim in [0, %d]", i,
                                (long long)p[i], *n - 1);
        if (seen[p[i]])
            return pardo_errorf(st, PARDO_EINVAL, "attr 'perm' lists dim %lld twice, expected a permutation",
                                (long long)p[i]);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return PARDO_OK;
}

static int transpose_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    int perm[PARDO_MAX_DIMS], n;
    int rc = transpose_perm(ctx->op, x->ndim, perm, &n, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = x->dtype;
    y->ndim = n;
    for (int i = 0; i < n; i++) y->shape[i] = x->ndim < 0 ? -1 : x->shape[perm[i]];
    return PARDO_OK;
}

/* Writes src (element size es, shape src_shape of rank nd) transposed by
 * perm into dst, whose shape is src_shape[perm[i]]. */
static void transpose_copy(size_t es, const void *src, int nd, const int64_t *src_shape, const int *perm, void *dst) {
    int64_t sstr[PARDO_MAX_DIMS], dims[PARDO_MAX_DIMS], str[PARDO_MAX_DIMS];
    const int64_t numel = pardo_shape_numel(nd, src_shape);
    if (numel == 0) return;
    pardo_contiguous_strides(nd, src_shape, sstr);
    for (int i = 0; i < nd; i++) {
        dims[i] = src_shape[perm[i]];
        str[i] = sstr[perm[i]];
    }
    if (nd == 0) { /* a scalar: one element, one dim of 1 for the kernels */
        nd = 1;
        dims[0] = str[0] = 1;
    }
    pardo_strided_gather(es, src, dst, nd, dims, str, numel);
}

static int transpose_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    int perm[PARDO_MAX_DIMS], n;
    int rc = transpose_perm(ctx->op, x->ndim, perm, &n, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t shape[PARDO_MAX_DIMS];
    for (int i = 0; i < n; i++) shape[i] = x->shape[perm[i]];
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, n, shape);
    if (!y) return ctx->st->code;
    transpose_copy(pardo_dtype_size(x->dtype), pardo_tensor_data(x), x->ndim, x->shape, perm, pardo_tensor_data(y));
    return PARDO_OK;
}

static int transpose_grad_infer(pardo_infer_ctx *ctx) {
    int perm[PARDO_MAX_DIMS], n;
    int rc = transpose_perm(ctx->op, ctx->in[0]->ndim, perm, &n, ctx->st);
    return rc != PARDO_OK ? rc : back_grad_infer(ctx);
}

/* dX = dY transposed by the inverse of perm. */
static int transpose_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int perm[PARDO_MAX_DIMS], inv[PARDO_MAX_DIMS], n;
    int rc = transpose_perm(ctx->op, x->ndim, perm, &n, ctx->st);
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    int64_t y_shape[PARDO_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        y_shape[i] = x->shape[perm[i]];
        inv[perm[i]] = i;
    }
    if (!pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'X' is %s, which has no gradient",
                            pardo_dtype_name(x->dtype));
    if (dy && (dy->dtype != x->dtype || !pardo_shape_equal(dy->ndim, dy->shape, n, y_shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'dY' is %s %s, expected %s %s like Y",
                            pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(x->dtype), pardo_shape_str(n, y_shape, s2, sizeof s2));
    }
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) pardo_tensor_zero(dx);
    else transpose_copy(pardo_dtype_size(x->dtype), pardo_tensor_data(dy), n, y_shape, inv, pardo_tensor_data(dx));
    return PARDO_OK;
}

const pardo_op_def pardo_op_transpose = {
    .type = "transpose",
    .doc = "Y = X with its dims permuted: Y's dim i is X's dim perm[i], like ONNX Transpose (any dtype)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = transpose_attrs,
    .n_attrs = 1,
    .infer = transpose_infer,
    .cpu = transpose_cpu,
    .cuda = pardo_cuda_transpose,
    .grad = pardo_grad_standard,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_transpose_grad = {
    .type = "transpose_grad",
    .doc = "dX = dY transposed by the inverse of perm (gradient of transpose; float32, float64)",
    .inputs = grad_in,
    .n_inputs = 3,
    .outputs = grad_out,
    .n_outputs = 1,
    .attrs = transpose_attrs,
    .n_attrs = 1,
    .infer = transpose_grad_infer,
    .cpu = transpose_grad_cpu,
    .cuda = pardo_cuda_transpose_grad,
};
