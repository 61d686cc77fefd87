/* dims.c - ops on a tensor's dims, like the ONNX operators of the same
 * meaning (opset 13-17): shape (X's dims as int64, attrs start and end as
 * Shape-15), unsqueeze and squeeze (axes as an attr or an optional int64
 * input) with their gradients (a reshape back), expand (bidirectional
 * broadcast to a shape given as an attr or an int64 input) with expand_grad
 * (dY summed back to X's shape), constant_of_shape and range (no gradient).
 * Any dtype where ONNX allows it; a list given as an input is read at run
 * time, so inference gives -1 dims where it decides them. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "index_util.h"
#include "kernel_util.h"
#include "op.h"

#define IN_TYPE(ctx, k) ((k) < (ctx)->n_in ? (ctx)->in[k] : NULL)

static const pardo_arg_def y_out[] = {{"Y", "output tensor, X's dtype", false, false}};

/* Y = X's elements in shape (ndim, shape): a view of X where that is safe
 * (pardo_kernel_output_as), else a copy. */
static int copy_as(pardo_kernel_ctx *ctx, int ndim, const int64_t *shape) {
    return pardo_kernel_output_as(ctx, 0, 0, ndim, shape) ? PARDO_OK : ctx->st->code;
}

/* ---- shape ---- */

static const pardo_arg_def shape_in[] = {{"X", "input tensor (any dtype); only its shape is read", false, false}};
static const pardo_arg_def shape_out[] = {{"Y", "int64 1-D: X's dims from start to end", false, false}};
static const pardo_attr_def shape_attrs[] = {
    {"start", PARDO_ATTR_INT, "0", "first dim; negative counts from the end; clamped to [0, rank]"},
    {"end", PARDO_ATTR_INT, "null", "one past the last dim; negative counts from the end; clamped; absent: rank"},
};

/* The dims [*s, *e) of a rank-r tensor that shape gives (Shape-15 clamping). */
static int shape_range(const pardo_op *op, int r, int *s, int *e, pardo_status *st) {
    int64_t a, b;
    int rc = pardo_attr_int(op, "start", 0, &a, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "end", r, &b, st);
    if (rc != PARDO_OK) return rc;
    if (a < 0) a += r;
    if (b < 0) b += r;
    a = a < 0 ? 0 : a > r ? r : a;
    b = b < 0 ? 0 : b > r ? r : b;
    *s = (int)a;
    *e = (int)(b < a ? a : b);
    return PARDO_OK;
}

static int shape_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    pardo_type *y = &ctx->out[0];
    y->dtype = PARDO_I64;
    y->ndim = 1;
    y->shape[0] = -1;
    if (x->ndim < 0) { /* still check the attrs' types */
        int s, e;
        return shape_range(ctx->op, 0, &s, &e, ctx->st);
    }
    int s, e;
    int rc = shape_range(ctx->op, x->ndim, &s, &e, ctx->st);
    if (rc == PARDO_OK) y->shape[0] = e - s;
    return rc;
}

static int shape_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    int s, e;
    int rc = shape_range(ctx->op, x->ndim, &s, &e, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t n = e - s;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_I64, 1, &n);
    if (!y) return ctx->st->code;
    int64_t *py = pardo_tensor_data(y);
    for (int i = s; i < e; i++) py[i - s] = x->shape[i];
    return PARDO_OK;
}

const pardo_op_def pardo_op_shape = {
    .type = "shape",
    .doc = "Y = X's dims [start, end) as int64 1-D, like ONNX Shape-15 (any dtype; no gradient)",
    .inputs = shape_in,
    .n_inputs = 1,
    .outputs = shape_out,
    .n_outputs = 1,
    .attrs = shape_attrs,
    .n_attrs = 2,
    .infer = shape_infer,
    .cpu = shape_cpu,
    .all_dtypes = true, /* reads only the dims */
};

/* ---- unsqueeze and squeeze ---- */

static const pardo_arg_def axes_in[] = { /* unsqueeze's and squeeze's */
    {"X", "input tensor (any dtype)", false, false},
    {"axes", "int64 1-D, read at run time; overrides attr axes (\"\": the attr)", true, false},
};
static const pardo_arg_def axes_grad_in[] = {
    {"X", "the forward input", false, false},
    {"axes", "the forward input (unused)", true, false},
    {"Y", "the forward output (unused)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def axes_grad_out[] = {
    {"dX", "gradient of X: dY in X's shape", true, false},
    {"daxes", "never computed: axes has no gradient (must be \"\")", true, false},
};
static const pardo_attr_def unsqueeze_attrs[] = {
    {"axes", PARDO_ATTR_INTS, "null", "dims of Y that are new 1s; negative counts from Y's end (required unless "
                                      "input 1 is given)"},
};
static const pardo_attr_def squeeze_attrs[] = {
    {"axes", PARDO_ATTR_INTS, "null", "dims of X to remove, each of size 1; negative counts from the end; absent: "
                                      "every dim of size 1"},
};

/* Y's shape for unsqueeze of a rank-r x (dims may be -1) by axes[0..n). */
static int unsqueeze_shape(int r, const int64_t *x, const int64_t *axes, int n, pardo_type *y, pardo_status *st) {
    const int out = r + n;
    bool is_new[PARDO_MAX_DIMS] = {false};
    if (out > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'axes' makes rank %d, more than the %d dims pardo has", out,
                            PARDO_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        int a;
        int rc = pardo_normalize_axis(axes[i], out, "axes", &a, st);
        if (rc != PARDO_OK) return rc;
        if (is_new[a]) return pardo_errorf(st, PARDO_EINVAL, "attr 'axes' lists dim %d twice", a);
        is_new[a] = true;
    }
    y->ndim = out;
    for (int j = 0, k = 0; j < out; j++) y->shape[j] = is_new[j] ? 1 : x[k++];
    return PARDO_OK;
}

static int unsqueeze_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *ax = IN_TYPE(ctx, 1);
    pardo_type *y = &ctx->out[0];
    int64_t axes[PARDO_MAX_DIMS];
    int n, rc;
    y->dtype = x->dtype;
    y->ndim = -1;
    if (ax) {
        if ((rc = pardo_index_expect_list(ax, "input 1 'axes'", &n, ctx->st)) != PARDO_OK) return rc;
        if (x->ndim >= 0 && n >= 0) {
            y->ndim = x->ndim + n;
            if (y->ndim > PARDO_MAX_DIMS)
                return pardo_errorf(ctx->st, PARDO_EINVAL, "input 1 'axes' makes rank %d, more than %d", y->ndim,
                                    PARDO_MAX_DIMS);
            for (int j = 0; j < y->ndim; j++) y->shape[j] = -1; /* where the 1s go is known at run time */
        }
        return PARDO_OK;
    }
    if ((rc = pardo_attr_ints(ctx->op, "axes", axes, PARDO_MAX_DIMS, &n, ctx->st)) != PARDO_OK) return rc;
    if (n < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "attr 'axes' is required (or input 1 'axes')");
    if (x->ndim < 0) return PARDO_OK;
    return unsqueeze_shape(x->ndim, x->shape, axes, n, y, ctx->st);
}

static int unsqueeze_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    int64_t axes[PARDO_MAX_DIMS];
    int n;
    int rc = pardo_index_ints(ctx->op, IN_TYPE(ctx, 1), 1, "axes", axes, PARDO_MAX_DIMS, &n, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (n < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "attr 'axes' is required (or input 1 'axes')");
    pardo_type y;
    if ((rc = unsqueeze_shape(x->ndim, x->shape, axes, n, &y, ctx->st)) != PARDO_OK) return rc;
    return copy_as(ctx, y.ndim, y.shape);
}

/* Y's shape for squeeze of a rank-r x by axes[0..n) (n < 0: every 1).
 * With -1 dims (inference) and no axes the rank is unknown (ndim -1). */
static int squeeze_shape(int r, const int64_t *x, const int64_t *axes, int n, pardo_type *y, pardo_status *st) {
    bool drop[PARDO_MAX_DIMS] = {false};
    char s[128];
    for (int i = 0; i < n; i++) {
        int a;
        int rc = pardo_normalize_axis(axes[i], r, "axes", &a, st);
        if (rc != PARDO_OK) return rc;
        if (drop[a]) return pardo_errorf(st, PARDO_EINVAL, "attr 'axes' lists dim %d twice", a);
        if (x[a] != 1 && x[a] != -1)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'axes' names dim %d of X %s, of size %lld: only dims of "
                                "size 1 can be squeezed", a, pardo_shape_str(r, x, s, sizeof s), (long long)x[a]);
        drop[a] = true;
    }
    if (n < 0)
        for (int d = 0; d < r; d++) {
            if (x[d] == -1) {
                y->ndim = -1;
                return PARDO_OK;
            }
            drop[d] = x[d] == 1;
        }
    y->ndim = 0;
    for (int d = 0; d < r; d++)
        if (!drop[d]) y->shape[y->ndim++] = x[d];
    return PARDO_OK;
}

static int squeeze_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *ax = IN_TYPE(ctx, 1);
    pardo_type *y = &ctx->out[0];
    int64_t axes[PARDO_MAX_DIMS];
    int n, rc;
    y->dtype = x->dtype;
    y->ndim = -1;
    if (ax) {
        if ((rc = pardo_index_expect_list(ax, "input 1 'axes'", &n, ctx->st)) != PARDO_OK) return rc;
        if (x->ndim >= 0 && n >= 0) {
            y->ndim = x->ndim - n;
            if (y->ndim < 0)
                return pardo_errorf(ctx->st, PARDO_EINVAL, "input 1 'axes' has %d values, more than X's rank %d", n,
                                    x->ndim);
            for (int j = 0; j < y->ndim; j++) y->shape[j] = -1;
        }
        return PARDO_OK;
    }
    if ((rc = pardo_attr_ints(ctx->op, "axes", axes, PARDO_MAX_DIMS, &n, ctx->st)) != PARDO_OK) return rc;
    if (x->ndim < 0) return PARDO_OK;
    return squeeze_shape(x->ndim, x->shape, axes, n, y, ctx->st);
}

static int squeeze_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    int64_t axes[PARDO_MAX_DIMS];
    int n;
    int rc = pardo_index_ints(ctx->op, IN_TYPE(ctx, 1), 1, "axes", axes, PARDO_MAX_DIMS, &n, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type y;
    if ((rc = squeeze_shape(x->ndim, x->shape, axes, n, &y, ctx->st)) != PARDO_OK) return rc;
    return copy_as(ctx, y.ndim, y.shape);
}

static int axes_grad_infer(pardo_infer_ctx *ctx) { return pardo_index_back_grad_infer(ctx, 3); }
static int axes_grad_cpu(pardo_kernel_ctx *ctx) { return pardo_index_back_grad(ctx, 3); }

const pardo_op_def pardo_op_unsqueeze = {
    .type = "unsqueeze",
    .doc = "Y = X with new dims of size 1 at axes (of Y), like ONNX Unsqueeze-13 (any dtype)",
    .inputs = axes_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = unsqueeze_attrs,
    .n_attrs = 1,
    .infer = unsqueeze_infer,
    .cpu = unsqueeze_cpu,
    .grad = pardo_grad_standard,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_unsqueeze_grad = {
    .type = "unsqueeze_grad",
    .doc = "dX = dY in X's shape (gradient of unsqueeze; float32, float64)",
    .inputs = axes_grad_in,
    .n_inputs = 4,
    .outputs = axes_grad_out,
    .n_outputs = 2,
    .attrs = unsqueeze_attrs,
    .n_attrs = 1,
    .infer = axes_grad_infer,
    .cpu = axes_grad_cpu,
};

const pardo_op_def pardo_op_squeeze = {
    .type = "squeeze",
    .doc = "Y = X without the dims of size 1 at axes (all of them when absent), like ONNX Squeeze-13 (any dtype)",
    .inputs = axes_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = squeeze_attrs,
    .n_attrs = 1,
    .infer = squeeze_infer,
    .cpu = squeeze_cpu,
    .grad = pardo_grad_standard,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_squeeze_grad = {
    .type = "squeeze_grad",
    .doc = "dX = dY in X's shape (gradient of squeeze; float32, float64)",
    .inputs = axes_grad_in,
    .n_inputs = 4,
    .outputs = axes_grad_out,
    .n_outputs = 2,
    .attrs = squeeze_attrs,
    .n_attrs = 1,
    .infer = axes_grad_infer,
    .cpu = axes_grad_cpu,
};

/* ---- expand ---- */

static const pardo_arg_def expand_in[] = {
    {"X", "input tensor (any dtype)", false, false},
    {"shape", "int64 1-D, read at run time; overrides attr shape (\"\": the attr)", true, false},
};
static const pardo_arg_def expand_grad_in[] = {
    {"X", "the forward input", false, false},
    {"shape", "the forward input (unused)", true, false},
    {"Y", "the forward output (unused)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def expand_grad_out[] = {
    {"dX", "gradient of X: dY summed to X's shape", true, false},
    {"dshape", "never computed: shape has no gradient (must be \"\")", true, false},
};
static const pardo_attr_def expand_attrs[] = {
    {"shape", PARDO_ATTR_INTS, "null", "broadcast X against this shape like numpy (ONNX Expand: a 1 keeps X's dim); "
                                       "required unless input 1 is given"},
};

/* Checks an expand shape (no negative dims). */
static int expand_check(const int64_t *s, int n, const char *what, pardo_status *st) {
    for (int i = 0; i < n; i++)
        if (s[i] < 0)
            return pardo_errorf(st, PARDO_EINVAL, "%s element %d is %lld, expected a size >= 0", what, i,
                                (long long)s[i]);
    return PARDO_OK;
}

static int expand_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *sh = IN_TYPE(ctx, 1);
    pardo_type *y = &ctx->out[0];
    pardo_type t = {.dtype = x->dtype};
    int n, rc;
    if (sh) {
        if ((rc = pardo_index_expect_list(sh, "input 1 'shape'", &n, ctx->st)) != PARDO_OK) return rc;
        y->dtype = x->dtype;
        y->ndim = -1;
        if (x->ndim < 0 || n < 0) return PARDO_OK;
        if (n > PARDO_MAX_DIMS)
            return pardo_errorf(ctx->st, PARDO_EINVAL, "input 1 'shape' has %d values, at most %d", n, PARDO_MAX_DIMS);
        y->ndim = x->ndim > n ? x->ndim : n;
        for (int i = 0; i < y->ndim; i++) { /* X's dim stands where it is not 1: the shape must agree */
            int j = i - (y->ndim - x->ndim);
            y->shape[i] = j >= 0 && x->shape[j] > 1 ? x->shape[j] : -1;
        }
        return PARDO_OK;
    }
    if ((rc = pardo_attr_ints(ctx->op, "shape", t.shape, PARDO_MAX_DIMS, &n, ctx->st)) != PARDO_OK) return rc;
    if (n < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "attr 'shape' is required (or input 1 'shape')");
    if ((rc = expand_check(t.shape, n, "attr 'shape'", ctx->st)) != PARDO_OK) return rc;
    t.ndim = n;
    if ((rc = pardo_broadcast_types(x, &t, y, ctx->st)) != PARDO_OK) return rc;
    y->dtype = x->dtype;
    return PARDO_OK;
}

static int expand_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    int64_t s[PARDO_MAX_DIMS];
    int n;
    int rc = pardo_index_ints(ctx->op, IN_TYPE(ctx, 1), 1, "shape", s, PARDO_MAX_DIMS, &n, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (n < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "attr 'shape' is required (or input 1 'shape')");
    if ((rc = expand_check(s, n, IN_TYPE(ctx, 1) ? "input 1 'shape'" : "attr 'shape'", ctx->st)) != PARDO_OK)
        return rc;
    pardo_bcast2 plan;
    if ((rc = pardo_bcast2_plan(x->ndim, x->shape, n, s, &plan, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, plan.ndim, plan.shape);
    if (!y) return ctx->st->code;
    if (plan.numel == 0) return PARDO_OK;
    int64_t xs[PARDO_MAX_DIMS], dims[PARDO_MAX_DIMS];
    int nd = plan.ndim;
    memcpy(dims, plan.shape, sizeof dims);
    pardo_index_bcast_strides(nd, dims, x->ndim, x->shape, xs);
    if (nd == 0) {
        nd = 1;
        dims[0] = 1;
        xs[0] = 0;
    }
    pardo_strided_gather(pardo_dtype_size(x->dtype), pardo_tensor_data(x), pardo_tensor_data(y), nd, dims, xs,
                         plan.numel);
    return PARDO_OK;
}

static int expand_grad_infer(pardo_infer_ctx *ctx) { return pardo_index_back_grad_infer(ctx, 3); }

static int expand_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = IN_TYPE(ctx, 3);
    if (pardo_kernel_wants_output(ctx, 1))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 1 'shape' is an integer list, which has no gradient");
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'X' is %s, which has no gradient",
                            pardo_dtype_name(x->dtype));
    if (dy && dy->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' has dtype %s, expected %s like X",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(x->dtype));
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) {
        pardo_tensor_zero(dx);
        return PARDO_OK;
    }
    return pardo_sum_to_shape(x->dtype, pardo_tensor_data(dy), dy->ndim, dy->shape, pardo_tensor_data(dx), dx->ndim,
                              dx->shape, 1.0, ctx->st);
}

/* expand_grad reads X's shape and dY only. */
static int expand_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_expand = {
    .type = "expand",
    .doc = "Y = X broadcast against shape (attr or input 1) like numpy, like ONNX Expand (any dtype)",
    .inputs = expand_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = expand_attrs,
    .n_attrs = 1,
    .infer = expand_infer,
    .cpu = expand_cpu,
    .grad = expand_grad_build,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_expand_grad = {
    .type = "expand_grad",
    .doc = "dX = dY summed over the broadcast dims to X's shape (gradient of expand; float32, float64)",
    .inputs = expand_grad_in,
    .n_inputs = 4,
    .outputs = expand_grad_out,
    .n_outputs = 2,
    .attrs = expand_attrs,
    .n_attrs = 1,
    .infer = expand_grad_infer,
    .cpu = expand_grad_cpu,
};

/* ---- constant_of_shape ---- */

static const pardo_arg_def cos_in[] = {{"shape", "int64 1-D: Y's dims, each >= 0", false, false}};
static const pardo_arg_def cos_out[] = {{"Y", "dtype attr dtype, every element attr value", false, false}};
static const pardo_attr_def cos_attrs[] = {
    {"value", PARDO_ATTR_ANY, "0", "the value of every element (a number, or a bool for dtype bool)"},
    {"dtype", PARDO_ATTR_STRING, "\"float32\"", "Y's dtype: float32, float64, int32, int64 or bool"},
};

static int cos_attrs_read(const pardo_op *op, pardo_dtype *dt, double *v, pardo_status *st) {
    const char *name;
    int rc = pardo_attr_string(op, "dtype", "float32", &name, st);
    if (rc != PARDO_OK) return rc;
    if ((*dt = pardo_dtype_from_name(name)) == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'dtype' is \"%s\", expected float32, float64, int32, int64 or bool",
                            name);
    const pardo_value *val = pardo_attr(op, "value");
    *v = 0;
    if (val && val->kind == PARDO_V_BOOL) *v = val->boolean;
    else if (val && val->kind == PARDO_V_NUMBER) *v = val->number;
    else if (val) return pardo_errorf(st, PARDO_EINVAL, "attr 'value' is a %s, expected a number or a bool",
                                      pardo_value_kind_name(val->kind));
    if (pardo_dtype_is_int(*dt) && floor(*v) != *v)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'value' is %g, expected an integer for dtype %s", *v, name);
    return PARDO_OK;
}

static int cos_infer(pardo_infer_ctx *ctx) {
    pardo_type *y = &ctx->out[0];
    double v;
    int n, rc = cos_attrs_read(ctx->op, &y->dtype, &v, ctx->st);
    if (rc == PARDO_OK) rc = pardo_index_expect_list(ctx->in[0], "input 0 'shape'", &n, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (n > PARDO_MAX_DIMS)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 0 'shape' has %d values, at most %d", n, PARDO_MAX_DIMS);
    y->ndim = ctx->in[0]->ndim == 0 ? -1 : n; /* a 0-D shape is refused at run time */
    for (int i = 0; i < y->ndim; i++) y->shape[i] = -1;
    return PARDO_OK;
}

static int cos_cpu(pardo_kernel_ctx *ctx) {
    pardo_dtype dt;
    double v;
    int64_t s[PARDO_MAX_DIMS];
    int n, rc = cos_attrs_read(ctx->op, &dt, &v, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (ctx->in[0]->ndim != 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'shape' has rank %d, expected 1-D", ctx->in[0]->ndim);
    if ((rc = pardo_index_read_ints(ctx->in[0], "input 0 'shape'", s, PARDO_MAX_DIMS, &n, ctx->st)) != PARDO_OK ||
        (rc = expand_check(s, n, "input 0 'shape'", ctx->st)) != PARDO_OK)
        return rc;
    if (!pardo_shape_fits(n, s))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 0 'shape' has more elements than fit in 64 bits");
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, n, s);
    if (!y) return ctx->st->code;
    void *p = pardo_tensor_data(y);
    switch (dt) {
    case PARDO_F32: for (int64_t i = 0; i < y->numel; i++) ((float *)p)[i] = (float)v; break;
    case PARDO_F64: for (int64_t i = 0; i < y->numel; i++) ((double *)p)[i] = v; break;
    case PARDO_I32: for (int64_t i = 0; i < y->numel; i++) ((int32_t *)p)[i] = (int32_t)v; break;
    case PARDO_I64: for (int64_t i = 0; i < y->numel; i++) ((int64_t *)p)[i] = (int64_t)v; break;
    default: if (y->nbytes) memset(p, v != 0, y->nbytes); break;
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_constant_of_shape = {
    .type = "constant_of_shape",
    .doc = "Y of the dims in input shape, every element attr value, like ONNX ConstantOfShape (no gradient)",
    .inputs = cos_in,
    .n_inputs = 1,
    .outputs = cos_out,
    .n_outputs = 1,
    .attrs = cos_attrs,
    .n_attrs = 2,
    .infer = cos_infer,
    .cpu = cos_cpu,
};

/* ---- range ---- */

static const pardo_arg_def range_in[] = {
    {"start", "scalar (float32, float64, int32, int64); \"\": attr start", true, false},
    {"limit", "scalar of start's dtype; \"\": attr limit", true, false},
    {"delta", "scalar of start's dtype; \"\": attr delta", true, false},
};
static const pardo_arg_def range_out[] = {{"Y", "1-D: start, start + delta, ... short of limit", false, false}};
static const pardo_attr_def range_attrs[] = {
    {"start", PARDO_ATTR_FLOAT, "null", "first value when input 0 is absent"},
    {"limit", PARDO_ATTR_FLOAT, "null", "exclusive bound when input 1 is absent"},
    {"delta", PARDO_ATTR_FLOAT, "null", "step when input 2 is absent (not 0)"},
    {"dtype", PARDO_ATTR_STRING, "null",
     "Y's dtype when no input is given: float32, float64, int32 or int64 (absent: int64 when start, limit and delta "
     "are whole numbers, else float32)"},
};
static const char *const range_names[3] = {"start", "limit", "delta"};
static const pardo_dtype range_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};

/* Y's dtype from the inputs' types (NULL: absent) or attrs; *all_attrs when
 * every value is an attr (their values then in v). */
static int range_dtype(const pardo_op *op, const pardo_type *const t[3], pardo_dtype *dt, bool *all_attrs, double v[3],
                       pardo_status *st) {
    int rc;
    *dt = PARDO_DTYPE_UNKNOWN;
    *all_attrs = true;
    bool whole = true;
    for (int k = 0; k < 3; k++) {
        char what[32];
        snprintf(what, sizeof what, "input %d '%s'", k, range_names[k]);
        if (t[k]) {
            *all_attrs = false;
            if ((rc = pardo_expect_dtype(t[k], what, range_dtypes, 4, st)) != PARDO_OK) return rc;
            if (t[k]->ndim > 1 || (t[k]->ndim == 1 && t[k]->shape[0] != 1 && t[k]->shape[0] != -1))
                return pardo_errorf(st, PARDO_ESHAPE, "%s has rank %d, expected a scalar", what, t[k]->ndim);
            if (*dt != PARDO_DTYPE_UNKNOWN && t[k]->dtype != *dt)
                return pardo_errorf(st, PARDO_ESHAPE, "%s has dtype %s, expected %s like the other inputs", what,
                                    pardo_dtype_name(t[k]->dtype), pardo_dtype_name(*dt));
            *dt = t[k]->dtype;
            continue;
        }
        if (!pardo_attr(op, range_names[k]))
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is required when input %d is absent", range_names[k], k);
        if ((rc = pardo_attr_float(op, range_names[k], 0, &v[k], st)) != PARDO_OK) return rc;
        whole &= floor(v[k]) == v[k];
    }
    const char *name;
    if ((rc = pardo_attr_string(op, "dtype", NULL, &name, st)) != PARDO_OK) return rc;
    if (name) {
        pardo_dtype want = pardo_dtype_from_name(name);
        if (want != PARDO_F32 && want != PARDO_F64 && want != PARDO_I32 && want != PARDO_I64)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'dtype' is \"%s\", expected float32, float64, int32 or int64",
                                name);
        if (*dt != PARDO_DTYPE_UNKNOWN && want != *dt)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'dtype' is %s, but the inputs are %s", name,
                                pardo_dtype_name(*dt));
        *dt = want;
    }
    if (*dt == PARDO_DTYPE_UNKNOWN) *dt = whole ? PARDO_I64 : PARDO_F32;
    if (pardo_dtype_is_int(*dt))
        for (int k = 0; k < 3; k++)
            if (!t[k] && floor(v[k]) != v[k])
                return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is %g, expected an integer for dtype %s",
                                    range_names[k], v[k], pardo_dtype_name(*dt));
    return PARDO_OK;
}

/* The number of values, ONNX Range: max(ceil((limit - start) / delta), 0). */
static int range_count(pardo_dtype dt, const double v[3], const int64_t iv[3], int64_t *n, pardo_status *st) {
    if (pardo_dtype_is_int(dt) ? iv[2] == 0 : v[2] == 0)
        return pardo_errorf(st, PARDO_EINVAL, "'delta' is 0, expected a nonzero step");
    if (pardo_dtype_is_int(dt)) {
        /* in double for the span, which may not fit int64 */
        double span = (double)iv[1] - (double)iv[0], d = (double)iv[2];
        if (fabs(span / d) > 9e15) return pardo_errorf(st, PARDO_EINVAL, "'range' would make too many values");
        int64_t num = iv[1] - iv[0], q = num / iv[2];
        if (num % iv[2] != 0 && ((num < 0) == (iv[2] < 0))) q++;
        *n = q < 0 ? 0 : q;
        return PARDO_OK;
    }
    double c = ceil((v[1] - v[0]) / v[2]);
    if (!(c < 9e15) && c > 0) return pardo_errorf(st, PARDO_EINVAL, "'range' would make too many values");
    *n = c > 0 ? (int64_t)c : 0;
    return PARDO_OK;
}

static int range_infer(pardo_infer_ctx *ctx) {
    const pardo_type *t[3] = {IN_TYPE(ctx, 0), IN_TYPE(ctx, 1), IN_TYPE(ctx, 2)};
    pardo_type *y = &ctx->out[0];
    double v[3] = {0, 0, 0};
    bool all_attrs;
    int rc = range_dtype(ctx->op, t, &y->dtype, &all_attrs, v, ctx->st);
    if (rc != PARDO_OK) return rc;
    y->ndim = 1;
    y->shape[0] = -1;
    if (!all_attrs) return PARDO_OK;
    int64_t iv[3] = {(int64_t)v[0], (int64_t)v[1], (int64_t)v[2]};
    return range_count(y->dtype, v, iv, &y->shape[0], ctx->st);
}

static int range_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *in[3] = {IN_TYPE(ctx, 0), IN_TYPE(ctx, 1), IN_TYPE(ctx, 2)};
    pardo_type ty[3];
    const pardo_type *t[3];
    for (int k = 0; k < 3; k++) {
        if (in[k]) {
            ty[k] = pardo_tensor_type(in[k]);
            if (in[k]->numel != 1)
                return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d '%s' has %lld elements, expected a scalar", k,
                                    range_names[k], (long long)in[k]->numel);
        }
        t[k] = in[k] ? &ty[k] : NULL;
    }
    pardo_dtype dt;
    double v[3] = {0, 0, 0};
    int64_t iv[3];
    bool all_attrs;
    int rc = range_dtype(ctx->op, t, &dt, &all_attrs, v, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < 3; k++) {
        if (!in[k]) iv[k] = (int64_t)v[k];
        else if (dt == PARDO_I64) v[k] = (double)(iv[k] = *(const int64_t *)pardo_tensor_data(in[k]));
        else if (dt == PARDO_I32) v[k] = (double)(iv[k] = *(const int32_t *)pardo_tensor_data(in[k]));
        else v[k] = pardo_tensor_get_f64(in[k], 0);
    }
    int64_t n;
    if ((rc = range_count(dt, v, iv, &n, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, 1, &n);
    if (!y) return ctx->st->code;
    void *p = pardo_tensor_data(y);
    switch (dt) {
    case PARDO_F32: for (int64_t i = 0; i < n; i++) ((float *)p)[i] = (float)v[0] + (float)i * (float)v[2]; break;
    case PARDO_F64: for (int64_t i = 0; i < n; i++) ((double *)p)[i] = v[0] + (double)i * v[2]; break;
    case PARDO_I32: for (int64_t i = 0; i < n; i++) ((int32_t *)p)[i] = (int32_t)(iv[0] + i * iv[2]); break;
    default: for (int64_t i = 0; i < n; i++) ((int64_t *)p)[i] = iv[0] + i * iv[2]; break;
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_range = {
    .type = "range",
    .doc = "Y = [start, start + delta, ...) short of limit, like ONNX Range; each value from an input scalar or its "
           "attr (float32, float64, int32, int64; no gradient)",
    .inputs = range_in,
    .n_inputs = 3,
    .outputs = range_out,
    .n_outputs = 1,
    .attrs = range_attrs,
    .n_attrs = 4,
    .infer = range_infer,
    .cpu = range_cpu,
};
