/* max_unpool.c - max_unpool, ONNX MaxUnpool: X [N, C, spatial...] (rank >=
 * 3) and I (int64, X's shape; MaxPool's Indices) -> Y. The pooled input's
 * shape P = [N, C, (S - 1) * stride + kernel - pad_begin - pad_end...]
 * (attrs kernel, required; strides, default ones; pads, begins then ends,
 * default zeros); I's values are flat indices into P. Y is P's zeros but
 * P.flat[I[e]] = X[e] (in order of e: a repeated index keeps the last), or
 * with input 2 output_shape (its values, at run time; X's rank, each dim at
 * least P's) that array placed at Y's origin, the rest zeros (ONNX's
 * reference: an index is unravelled in P and ravelled in Y). And
 * max_unpool_grad: dX[e] = dY at I[e]'s place where e is the last element
 * written there, 0 for the ones overwritten.
 * Both run on the calling thread (a scatter whose order decides repeated
 * indices); the gradient marks Y's elements in a scratch bitmap
 * (ops/scratch.h), nothing else is allocated per call. */
#include <stdio.h>
#include <string.h>

#include "index_util.h"
#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"
#include "scratch.h"

static const pardo_attr_def mu_attrs[] = {
    {"kernel", PARDO_ATTR_INTS, NULL, "the pool's window size per spatial axis, each >= 1"},
    {"strides", PARDO_ATTR_INTS, "[]", "the pool's strides, each >= 1; [] (default): 1s"},
    {"pads", PARDO_ATTR_INTS, "[]", "the pool's pads, begins then ends, each >= 0; [] (default): 0s"},
};

/* Checks X, I and output_shape's type (os: NULL when absent) against the
 * attrs and fills p with the pooled input's type P and y with Y's: P, or X's
 * rank of -1 dims with output_shape (the kernel reads its values). */
static int mu_geometry(const pardo_op *op, const pardo_type *x, const pardo_type *ix, const pardo_type *os,
                       pardo_type *p_type, pardo_type *y, pardo_status *st) {
    char sx[128];
    int64_t k[PARDO_MAX_DIMS], s[PARDO_MAX_DIMS], p[2 * PARDO_MAX_DIMS];
    int nk, rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'X'", st)) != PARDO_OK) return rc;
    if (ix->dtype != PARDO_I64)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'I' is %s, expected int64 (MaxPool's Indices)",
                            pardo_dtype_name(ix->dtype));
    if ((rc = pardo_attr_ints(op, "kernel", k, PARDO_MAX_DIMS, &nk, st)) != PARDO_OK) return rc;
    if (nk < 1) return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' is required (one size per spatial axis)");
    if (x->ndim >= 0 && x->ndim != nk + 2)
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' has shape %s, expected rank %d (attr 'kernel' has %d "
                            "spatial axes)",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx), nk + 2, nk);
    for (int i = 0; i < nk; i++) {
        if (k[i] < 1)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' has %lld at position %d, expected >= 1",
                                (long long)k[i], i);
        s[i] = 1;
        p[i] = p[nk + i] = 0;
    }
    if ((rc = pardo_nn_axis_ints(op, "strides", nk, 1, s, st)) != PARDO_OK ||
        (rc = pardo_nn_axis_ints(op, "pads", 2 * nk, 0, p, st)) != PARDO_OK)
        return rc;
    pardo_type want = *x;
    want.dtype = PARDO_I64;
    if ((rc = pardo_nn_expect_same(ix, "input 1 'I'", &want, "input 0 'X''s shape", st)) != PARDO_OK) return rc;
    y->dtype = x->dtype;
    y->ndim = nk + 2;
    if (os) {
        if ((rc = mu_geometry(op, x, ix, NULL, NULL, p_type, st)) != PARDO_OK) return rc;
        if (os->dtype != PARDO_I64 && os->dtype != PARDO_I32)
            return pardo_errorf(st, PARDO_ESHAPE, "input 2 'output_shape' is %s, expected int64 or int32",
                                pardo_dtype_name(os->dtype));
        if (os->ndim >= 0 && (os->ndim != 1 || (os->shape[0] >= 0 && os->shape[0] != nk + 2)))
            return pardo_errorf(st, PARDO_ESHAPE, "input 2 'output_shape' has shape %s, expected [%d] (X's rank)",
                                pardo_shape_str(os->ndim, os->shape, sx, sizeof sx), nk + 2);
        for (int i = 0; i < nk + 2; i++) y->shape[i] = -1;
        return PARDO_OK;
    }
    const bool xr = x->ndim >= 0;
    y->shape[0] = xr ? x->shape[0] : -1;
    y->shape[1] = xr ? x->shape[1] : -1;
    for (int i = 0; i < nk; i++) {
        const int64_t in = xr ? x->shape[2 + i] : -1;
        y->shape[2 + i] = in < 0 ? -1 : (in - 1) * s[i] + k[i] - p[i] - p[nk + i];
        if (in >= 0 && y->shape[2 + i] < 0)
            return pardo_errorf(st, PARDO_ESHAPE, "attr 'pads' (%lld + %lld) leave a negative output along spatial "
                                "axis %d",
                                (long long)p[i], (long long)p[nk + i], i);
    }
    if (p_type) *p_type = *y;
    return PARDO_OK;
}

/* Y's shape of a kernel: output_shape's values when given, checked (each at least P's), else P's. */
static int mu_out_shape(const pardo_kernel_ctx *ctx, const pardo_type *tp, int64_t *shape, pardo_status *st) {
    const pardo_tensor *os = pardo_nn_in(ctx, 2);
    const pardo_type *ty = tp;
    memcpy(shape, ty->shape, sizeof(int64_t) * (size_t)ty->ndim);
    if (!os) return PARDO_OK;
    int n, rc = pardo_index_read_ints(os, "input 2 'output_shape'", shape, PARDO_MAX_DIMS, &n, st);
    if (rc != PARDO_OK) return rc;
    if (n != ty->ndim)
        return pardo_errorf(st, PARDO_ESHAPE, "input 2 'output_shape' has %d values, expected %d (X's rank)", n,
                            ty->ndim);
    for (int i = 0; i < n; i++)
        if (shape[i] < tp->shape[i])
            return pardo_errorf(st, PARDO_EINVAL,
                                "input 2 'output_shape' has %lld at position %d, expected at least the pooled "
                                "input's %lld",
                                (long long)shape[i], i, (long long)tp->shape[i]);
    if (!pardo_shape_fits(n, shape))
        return pardo_errorf(st, PARDO_EINVAL, "input 2 'output_shape' has more elements than fit in 64 bits");
    return PARDO_OK;
}

/* Checks every index of ix against [0, numel(P)); PARDO_EINVAL naming the first one outside. */
static int check_indices(const int64_t *ix, int64_t n, const pardo_type *tp, pardo_status *st) {
    const int64_t np = pardo_shape_numel(tp->ndim, tp->shape);
    for (int64_t e = 0; e < n; e++)
        if (ix[e] < 0 || ix[e] >= np)
            return pardo_errorf(st, PARDO_EINVAL,
                                "input 1 'I' has %lld at element %lld, outside the pooled input's %lld elements",
                                (long long)ix[e], (long long)e, (long long)np);
    return PARDO_OK;
}

/* Index i of P as an index of Y (shape y): unravelled in P, ravelled in Y. */
static int64_t to_y(const pardo_type *tp, const int64_t *y, int64_t i) {
    int64_t r = 0, m = 1;
    for (int a = tp->ndim - 1; a >= 0; a--) {
        r += i % tp->shape[a] * m;
        i /= tp->shape[a];
        m *= y[a];
    }
    return r;
}

static const pardo_arg_def mu_in[] = {
    {"X", "the pooled values [N, C, spatial...] (float32 or float64)", false, false},
    {"I", "int64, X's shape: the flat index into Y of each value (MaxPool's Indices)", false, false},
    {"output_shape", "int64 [rank]: Y's shape (default: the pool's input size from the attrs)", true, false},
};
static const pardo_arg_def mu_out[] = {{"Y", "zeros but the values of X at I", false, false}};

static int mu_types(const pardo_type *const *in, int n_in, const pardo_op *op, pardo_type *y, pardo_status *st) {
    pardo_type tp;
    return mu_geometry(op, in[0], in[1], n_in > 2 ? in[2] : NULL, &tp, y, st);
}

static int mu_infer(pardo_infer_ctx *ctx) {
    return mu_types((const pardo_type *const *)ctx->in, ctx->n_in, ctx->op, &ctx->out[0], ctx->st);
}

/* A kernel's geometry: P's type into tp, Y's shape into shape. */
static int mu_run_geometry(const pardo_kernel_ctx *ctx, pardo_type *tp, int64_t *shape) {
    pardo_type t[3];
    const pardo_type *p[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        const pardo_tensor *v = pardo_nn_in(ctx, i);
        if (v) {
            t[i] = pardo_tensor_type(v);
            p[i] = &t[i];
        }
    }
    pardo_type ty;
    int rc = mu_geometry(ctx->op, p[0], p[1], p[2], tp, &ty, ctx->st);
    return rc == PARDO_OK ? mu_out_shape(ctx, tp, shape, ctx->st) : rc;
}

static int mu_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *ixt = ctx->in[1];
    pardo_type tp;
    int64_t shape[PARDO_MAX_DIMS];
    int rc = mu_run_geometry(ctx, &tp, shape);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, tp.ndim, shape);
    if (!y) return ctx->st->code;
    const int64_t *ix = pardo_tensor_data(ixt);
    if ((rc = check_indices(ix, x->numel, &tp, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor_zero(y);
    if (x->dtype == PARDO_F32) {
        const float *xv = pardo_tensor_data(x);
        float *yv = pardo_tensor_data(y);
        for (int64_t e = 0; e < x->numel; e++) yv[to_y(&tp, shape, ix[e])] = xv[e];
    } else {
        const double *xv = pardo_tensor_data(x);
        double *yv = pardo_tensor_data(y);
        for (int64_t e = 0; e < x->numel; e++) yv[to_y(&tp, shape, ix[e])] = xv[e];
    }
    return PARDO_OK;
}

/* max_unpool_grad reads I and dY (and X's type): Y is left out (""). */
static int mu_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_max_unpool = {
    .type = "max_unpool",
    .doc = "the partial inverse of max pooling (ONNX MaxUnpool): zeros with the values of X put at the flat "
           "indices I",
    .inputs = mu_in,
    .n_inputs = 3,
    .outputs = mu_out,
    .n_outputs = 1,
    .attrs = mu_attrs,
    .n_attrs = 3,
    .infer = mu_infer,
    .cpu = mu_cpu,
    .grad = mu_grad_build,
};

static const pardo_arg_def mu_grad_in[] = {
    {"X", "the forward input", false, false},
    {"I", "the forward indices", false, false},
    {"output_shape", "the forward output_shape", true, false},
    {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def mu_grad_out[] = {
    {"dX", "gradient of X", true, false},
    {"dI", "(never made: I has no gradient)", true, false},
    {"doutput_shape", "(never made)", true, false},
};

static int mu_grad_infer(pardo_infer_ctx *ctx) {
    pardo_type ty;
    int rc = mu_types((const pardo_type *const *)ctx->in, ctx->n_in < 3 ? ctx->n_in : 3, ctx->op, &ty, ctx->st);
    const pardo_type *dy = pardo_nn_in_type(ctx, 4);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 4 'dY'", &ty, "the output of max_unpool", ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

static int mu_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *ixt = ctx->in[1], *dy = pardo_nn_in(ctx, 4);
    pardo_type tp;
    int64_t shape[PARDO_MAX_DIMS];
    int rc = mu_run_geometry(ctx, &tp, shape);
    if (rc != PARDO_OK) return rc;
    if (dy) {
        char a[128], b[128];
        if (dy->dtype != x->dtype || !pardo_shape_equal(dy->ndim, dy->shape, tp.ndim, shape))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 4 'dY' is %s %s, expected %s %s (the output of "
                                "max_unpool)",
                                pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, a, sizeof a),
                                pardo_dtype_name(x->dtype), pardo_shape_str(tp.ndim, shape, b, sizeof b));
    }
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!dy) return pardo_nn_zeros(ctx, 0, x->dtype, x->ndim, x->shape) ? PARDO_OK : ctx->st->code;
    const int64_t *ix = pardo_tensor_data(ixt);
    if ((rc = check_indices(ix, x->numel, &tp, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    /* from the last element back: the first to reach an element of Y is its forward's last writer */
    const size_t words = (size_t)(pardo_shape_numel(tp.ndim, tp.shape) + 63) / 64;
    uint64_t *seen = words ? pardo_scratch_get(PARDO_SCRATCH_PART, words * sizeof(uint64_t)) : NULL;
    if (words && !seen)
        return pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate %zu bytes for max_unpool_grad's marks",
                            words * sizeof(uint64_t));
    if (words) memset(seen, 0, words * sizeof(uint64_t));
    const bool f32 = x->dtype == PARDO_F32;
    for (int64_t e = x->numel - 1; e >= 0; e--) {
        const int64_t i = ix[e];
        const bool first = !(seen[i / 64] >> (i % 64) & 1);
        seen[i / 64] |= (uint64_t)1 << (i % 64);
        const int64_t at = to_y(&tp, shape, i);
        if (f32) ((float *)pardo_tensor_data(dx))[e] = first ? ((const float *)pardo_tensor_data(dy))[at] : 0.0f;
        else ((double *)pardo_tensor_data(dx))[e] = first ? ((const double *)pardo_tensor_data(dy))[at] : 0.0;
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_max_unpool_grad = {
    .type = "max_unpool_grad",
    .doc = "gradient of max_unpool: dX = dY at I (0 where a later element overwrote the same index)",
    .inputs = mu_grad_in,
    .n_inputs = 5,
    .outputs = mu_grad_out,
    .n_outputs = 3,
    .attrs = mu_attrs,
    .n_attrs = 3,
    .infer = mu_grad_infer,
    .cpu = mu_grad_cpu,
};
