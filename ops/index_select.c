/* index_select.c - ops that pick or place elements by position, as ONNX's
 * (opset 11):
 *
 * top_k (X, K; attrs axis -1, largest 1, sorted 1): the K largest (or
 * smallest) elements along axis in order, the lower index first among equal
 * ones, and their int64 indices. K is a run-time int input (a scalar or
 * [1]); inference gives the axis' dim as -1.
 * compress (X, condition; attr axis, absent: X flattened): the slices along
 * axis whose condition (bool, 1-D, at most the dim long; missing entries
 * false) is true.
 * eye_like (X; attrs dtype, k): zeros of X's 2-D shape with ones on the
 * k-th diagonal (k > 0 above the main one); dtype absent: X's.
 * one_hot (indices, depth, values; attr axis -1): values[0] everywhere but
 * values[1] at each index along a new dim of size depth at axis; negative
 * indices count from depth, ones outside [-depth, depth) give no on value.
 *
 * Any dtype for the data; none of them is differentiable here. One thread;
 * top_k's per-row flags are its thread's scratch (ops/scratch.h); nothing
 * else is allocated beyond the outputs. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"
#include "scratch.h"

static const pardo_dtype int_dtypes[] = {PARDO_I32, PARDO_I64};

/* A scalar (or one-element) tensor's value; PARDO_ESHAPE naming `what` otherwise. */
static int scalar_of(const pardo_tensor *t, const char *what, double *v, pardo_status *st) {
    if (t->numel != 1 || t->ndim > 1)
        return pardo_errorf(st, PARDO_ESHAPE, "%s has %lld elements, expected a scalar or [1]", what,
                            (long long)t->numel);
    *v = pardo_tensor_get_f64(t, 0);
    return PARDO_OK;
}

/* X seen as [outer, n, inner] around dim axis. */
static void split_at(const pardo_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) *inner *= x->shape[d];
    *n = x->shape[axis];
}

/* ---- top_k ---- */

static const pardo_arg_def topk_in[] = {
    {"X", "any numeric dtype (float16 and bfloat16 compared as their values), rank >= 1", false, false},
    {"K", "int32 or int64, a scalar or [1]: how many", false, false},
};
static const pardo_arg_def topk_out[] = {
    {"values", "X's dtype; X's shape with K along axis", false, false},
    {"indices", "int64, the values' places along axis", false, false},
};
static const pardo_attr_def topk_attrs[] = {
    {"axis", PARDO_ATTR_INT, "-1", "the dim to pick along; negative counts from the end"},
    {"largest", PARDO_ATTR_INT, "1", "1: the largest, 0: the smallest"},
    {"sorted", PARDO_ATTR_INT, "1", "the values come in order either way"},
};

static int topk_check(const pardo_op *op, const pardo_type *x, const pardo_type *k, int *axis, bool *largest,
                      pardo_status *st) {
    int64_t a, l, so;
    int rc = pardo_attr_int(op, "axis", -1, &a, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "largest", 1, &l, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "sorted", 1, &so, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(k, "input 1 'K'", int_dtypes, 2, st);
    if (rc == PARDO_OK && x->dtype == PARDO_BOOL)
        rc = pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' is bool, expected a number type");
    if (rc != PARDO_OK) return rc;
    *largest = l != 0;
    *axis = 0;
    if (x->ndim == 0) return pardo_errorf(st, PARDO_EINVAL, "input 0 'X' is a scalar, expected rank >= 1");
    return x->ndim > 0 ? pardo_normalize_axis(a, x->ndim, "axis", axis, st) : PARDO_OK;
}

static int topk_infer(pardo_infer_ctx *ctx) {
    int axis;
    bool largest;
    int rc = topk_check(ctx->op, ctx->in[0], ctx->in[1], &axis, &largest, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    if (ctx->in[0]->ndim > 0) ctx->out[0].shape[axis] = -1;
    ctx->out[1] = ctx->out[0];
    ctx->out[1].dtype = PARDO_I64;
    return PARDO_OK;
}

static int topk_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *kt = ctx->in[1];
    pardo_type tx = pardo_tensor_type(x), tk = pardo_tensor_type(kt);
    int axis;
    bool largest;
    double kv = 0;
    int rc = topk_check(ctx->op, &tx, &tk, &axis, &largest, ctx->st);
    if (rc == PARDO_OK) rc = scalar_of(kt, "input 1 'K'", &kv, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t outer, n, inner;
    split_at(x, axis, &outer, &n, &inner);
    const int64_t k = (int64_t)kv;
    if (k < 0 || k > n)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "top_k: K is %lld, expected 0 to %lld (dim %d of X)", (long long)k,
                            (long long)n, axis);
    int64_t shape[PARDO_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[axis] = k;
    pardo_tensor *yv = NULL, *yi = NULL;
    if (pardo_kernel_wants_output(ctx, 0) && !(yv = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, shape)))
        return ctx->st->code;
    if (pardo_kernel_wants_output(ctx, 1) && !(yi = pardo_kernel_output(ctx, 1, PARDO_I64, x->ndim, shape)))
        return ctx->st->code;
    unsigned char *taken = pardo_scratch_get(PARDO_SCRATCH_STATS, (size_t)n + 1);
    if (!taken) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for a row of %lld", (long long)n);
    const size_t es = pardo_dtype_size(x->dtype);
    const char *src = pardo_tensor_data(x);
    char *dv = yv ? pardo_tensor_data(yv) : NULL;
    int64_t *di = yi ? pardo_tensor_data(yi) : NULL;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            memset(taken, 0, (size_t)n);
            const int64_t base = o * n * inner + in;
            for (int64_t j = 0; j < k; j++) {
                int64_t best = -1;
                long double bv = 0;
                for (int64_t i = 0; i < n; i++) {
                    if (taken[i]) continue;
                    const long double v = pardo_elem_get_ld(src, x->dtype, base + i * inner); /* exact: int64 too */
                    /* NaN counts as the largest, as ONNX Runtime orders it */
                    if (best < 0 || (largest ? (v > bv || (isnan(v) && !isnan(bv))) : (v < bv || (isnan(bv) && !isnan(v)))))
                        best = i, bv = v;
                }
                taken[best] = 1;
                const int64_t at = (o * k + j) * inner + in;
                if (dv) memcpy(dv + (size_t)at * es, src + (size_t)(base + best * inner) * es, es);
                if (di) di[at] = best;
            }
        }
    return PARDO_OK;
}

const pardo_op_def pardo_op_top_k = {
    .type = "top_k",
    .doc = "the K largest (or smallest) elements along axis and their indices (ONNX TopK; every numeric dtype)",
    .inputs = topk_in,
    .n_inputs = 2,
    .outputs = topk_out,
    .n_outputs = 2,
    .attrs = topk_attrs,
    .n_attrs = 3,
    .infer = topk_infer,
    .cpu = topk_cpu,
    .all_dtypes = true,
};

/* ---- compress ---- */

static const pardo_arg_def compress_in[] = {
    {"X", "any dtype", false, false},
    {"condition", "bool, 1-D, at most X's dim (or numel) long", false, false},
};
static const pardo_arg_def compress_out[] = {{"Y", "X's dtype; the kept slices", false, false}};
static const pardo_attr_def compress_attrs[] = {
    {"axis", PARDO_ATTR_INT, "null", "the dim to select along; absent: X flattened"},
};

static int compress_check(const pardo_op *op, const pardo_type *x, const pardo_type *c, bool *has_axis, int *axis,
                          pardo_status *st) {
    static const pardo_dtype bool_dtype[] = {PARDO_BOOL};
    int64_t a;
    int rc = pardo_expect_dtype(c, "input 1 'condition'", bool_dtype, 1, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "axis", 0, &a, st);
    if (rc != PARDO_OK) return rc;
    if (c->ndim > 1) return pardo_errorf(st, PARDO_ESHAPE, "input 1 'condition' has rank %d, expected 1", c->ndim);
    *has_axis = pardo_attr(op, "axis") != NULL;
    *axis = 0;
    if (*has_axis && x->ndim == 0) return pardo_errorf(st, PARDO_EINVAL, "input 0 'X' is a scalar, so it has no axis");
    return *has_axis && x->ndim > 0 ? pardo_normalize_axis(a, x->ndim, "axis", axis, st) : PARDO_OK;
}

static int compress_infer(pardo_infer_ctx *ctx) {
    bool has_axis;
    int axis;
    int rc = compress_check(ctx->op, ctx->in[0], ctx->in[1], &has_axis, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    if (!has_axis) ctx->out[0].ndim = 1, ctx->out[0].shape[0] = -1;
    else if (ctx->in[0]->ndim > 0) ctx->out[0].shape[axis] = -1;
    return PARDO_OK;
}

static int compress_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *c = ctx->in[1];
    pardo_type tx = pardo_tensor_type(x), tc = pardo_tensor_type(c);
    bool has_axis;
    int axis;
    int rc = compress_check(ctx->op, &tx, &tc, &has_axis, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t outer = 1, n = x->numel, inner = 1;
    if (has_axis) split_at(x, axis, &outer, &n, &inner);
    if (c->numel > n)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "compress: condition has %lld entries, more than the %lld it "
                            "selects from", (long long)c->numel, (long long)n);
    const bool *cond = pardo_tensor_data(c);
    int64_t kept = 0;
    for (int64_t i = 0; i < c->numel; i++) kept += cond[i];
    int64_t shape[PARDO_MAX_DIMS] = {kept};
    int nd = 1;
    if (has_axis) {
        nd = x->ndim;
        memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
        shape[axis] = kept;
    }
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, nd, shape);
    if (!y) return ctx->st->code;
    const size_t row = (size_t)inner * pardo_dtype_size(x->dtype);
    const char *src = pardo_tensor_data(x);
    char *dst = pardo_tensor_data(y);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < c->numel; i++)
            if (cond[i]) {
                memcpy(dst, src + (size_t)(o * n + i) * row, row);
                dst += row;
            }
    return PARDO_OK;
}

const pardo_op_def pardo_op_compress = {
    .type = "compress",
    .doc = "the slices of X along axis (or elements of X flattened) where condition is true (ONNX Compress)",
    .inputs = compress_in,
    .n_inputs = 2,
    .outputs = compress_out,
    .n_outputs = 1,
    .attrs = compress_attrs,
    .n_attrs = 1,
    .infer = compress_infer,
    .cpu = compress_cpu,
};

/* ---- eye_like ---- */

static const pardo_arg_def eye_in[] = {{"X", "2-D, any dtype: the shape", false, false}};
static const pardo_arg_def eye_out[] = {{"Y", "X's shape, dtype attr dtype (absent: X's)", false, false}};
static const pardo_attr_def eye_attrs[] = {
    {"dtype", PARDO_ATTR_STRING, "null", "float32, float64, int32, int64 or bool; absent: X's"},
    {"k", PARDO_ATTR_INT, "0", "the diagonal: 0 the main one, > 0 above, < 0 below"},
};

static int eye_type(const pardo_op *op, const pardo_type *x, pardo_type *y, int64_t *k, pardo_status *st) {
    const char *name;
    int rc = pardo_attr_int(op, "k", 0, k, st);
    if (rc == PARDO_OK) rc = pardo_attr_string(op, "dtype", "", &name, st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_rank(x, "input 0 'X'", 2, "[rows, cols]", st);
    if (rc != PARDO_OK) return rc;
    *y = *x;
    if (*name) {
        static const pardo_dtype all[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_BOOL};
        int i = 0;
        while (i < 5 && strcmp(name, pardo_dtype_name(all[i])) != 0) i++;
        if (i == 5) return pardo_errorf(st, PARDO_EINVAL, "attr 'dtype' is \"%s\", unknown", name);
        y->dtype = all[i];
    }
    return PARDO_OK;
}

static int eye_infer(pardo_infer_ctx *ctx) {
    int64_t k;
    return eye_type(ctx->op, ctx->in[0], &ctx->out[0], &k, ctx->st);
}

static int eye_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_type tx = pardo_tensor_type(x), ty;
    int64_t k;
    int rc = eye_type(ctx->op, &tx, &ty, &k, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_nn_zeros(ctx, 0, ty.dtype, 2, x->shape);
    if (!y) return ctx->st->code;
    for (int64_t r = 0; r < x->shape[0]; r++)
        if (r + k >= 0 && r + k < x->shape[1]) pardo_tensor_set_f64(y, r * x->shape[1] + r + k, 1);
    return PARDO_OK;
}

const pardo_op_def pardo_op_eye_like = {
    .type = "eye_like",
    .doc = "zeros of X's 2-D shape with ones on diagonal k (ONNX EyeLike)",
    .inputs = eye_in,
    .n_inputs = 1,
    .outputs = eye_out,
    .n_outputs = 1,
    .attrs = eye_attrs,
    .n_attrs = 2,
    .infer = eye_infer,
    .cpu = eye_cpu,
};

/* ---- one_hot ---- */

static const pardo_arg_def oh_in[] = {
    {"indices", "any number type, any shape", false, false},
    {"depth", "a number scalar or [1]: the new dim's size", false, false},
    {"values", "[off, on], any dtype", false, false},
};
static const pardo_arg_def oh_out[] = {{"Y", "values' dtype; indices' shape with depth inserted at axis", false, false}};
static const pardo_attr_def oh_attrs[] = {
    {"axis", PARDO_ATTR_INT, "-1", "where the new dim goes; negative counts from the end of Y"},
};

static int oh_check(const pardo_op *op, const pardo_type *ix, const pardo_type *v, int *axis, pardo_status *st) {
    int64_t a;
    int rc = pardo_attr_int(op, "axis", -1, &a, st);
    if (rc != PARDO_OK) return rc;
    if (ix->dtype == PARDO_BOOL) return pardo_errorf(st, PARDO_ESHAPE, "input 0 'indices' is bool, expected numbers");
    if (v->ndim >= 0 && (v->ndim != 1 || (v->shape[0] >= 0 && v->shape[0] != 2)))
        return pardo_errorf(st, PARDO_ESHAPE, "input 2 'values' is not [off, on]");
    if (ix->ndim + 1 > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_ESHAPE, "the output would have rank %d, more than %d", ix->ndim + 1,
                            PARDO_MAX_DIMS);
    *axis = 0;
    return ix->ndim >= 0 ? pardo_normalize_axis(a, ix->ndim + 1, "axis", axis, st) : PARDO_OK;
}

static int oh_infer(pardo_infer_ctx *ctx) {
    const pardo_type *ix = ctx->in[0];
    int axis;
    int rc = oh_check(ctx->op, ix, ctx->in[2], &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = ctx->in[2]->dtype;
    y->ndim = ix->ndim < 0 ? -1 : ix->ndim + 1;
    for (int d = 0, s = 0; d < y->ndim; d++) y->shape[d] = d == axis ? -1 : ix->shape[s++];
    return PARDO_OK;
}

static int oh_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *ix = ctx->in[0], *dt = ctx->in[1], *v = ctx->in[2];
    pardo_type ti = pardo_tensor_type(ix), tv = pardo_tensor_type(v);
    int axis;
    double dv = 0;
    int rc = oh_check(ctx->op, &ti, &tv, &axis, ctx->st);
    if (rc == PARDO_OK) rc = scalar_of(dt, "input 1 'depth'", &dv, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int64_t depth = (int64_t)dv;
    if (depth < 1) return pardo_errorf(ctx->st, PARDO_EINVAL, "one_hot: depth is %g, expected >= 1", dv);
    int64_t shape[PARDO_MAX_DIMS], outer = 1, inner = 1;
    for (int d = 0, s = 0; d < ix->ndim + 1; d++) shape[d] = d == axis ? depth : ix->shape[s++];
    for (int d = 0; d < axis; d++) outer *= ix->shape[d];
    for (int d = axis; d < ix->ndim; d++) inner *= ix->shape[d];
    pardo_tensor *y = pardo_kernel_output(ctx, 0, v->dtype, ix->ndim + 1, shape);
    if (!y) return ctx->st->code;
    const size_t es = pardo_dtype_size(v->dtype);
    const char *off = pardo_tensor_data(v), *on = off + es;
    char *dst = pardo_tensor_data(y);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < depth; j++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t at = (int64_t)pardo_tensor_get_f64(ix, o * inner + i);
                at = at < 0 ? at + depth : at;
                memcpy(dst + (size_t)((o * depth + j) * inner + i) * es, at == j ? on : off, es);
            }
    return PARDO_OK;
}

const pardo_op_def pardo_op_one_hot = {
    .type = "one_hot",
    .doc = "values[1] at each index along a new dim of size depth, values[0] elsewhere (ONNX OneHot)",
    .inputs = oh_in,
    .n_inputs = 3,
    .outputs = oh_out,
    .n_outputs = 1,
    .attrs = oh_attrs,
    .n_attrs = 1,
    .infer = oh_infer,
    .cpu = oh_cpu,
};
