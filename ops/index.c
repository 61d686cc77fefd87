/* index.c - ops that pick elements by index, like the ONNX operators of the
 * same meaning (opset 13): gather (data, indices; attr axis) with
 * gather_grad (dY scatter-added into zeros of data's shape), slice (starts,
 * ends, axes, steps as attrs or run-time int64 inputs, ONNX's clamping,
 * negative steps) with slice_grad (dY scattered into zeros of X's shape).
 * Any dtype for the forward ops; gradients for float32 and float64. An
 * out-of-range gather index is a run-time error naming it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "index_util.h"
#include "kernel_util.h"
#include "op.h"

#define IN_TYPE(ctx, k) ((k) < (ctx)->n_in ? (ctx)->in[k] : NULL)

/* ---- gather ---- */

static const pardo_arg_def gather_in[] = {
    {"data", "tensor to gather from (any dtype)", false, false},
    {"indices", "int32 or int64, any shape; negative counts from the end of dim axis", false, false},
};
static const pardo_arg_def gather_out[] = {
    {"Y", "data's dtype, shape data.shape[:axis] + indices.shape + data.shape[axis+1:]", false, false}};
static const pardo_arg_def gather_grad_in[] = {
    {"data", "the forward input (its shape)", false, false},
    {"indices", "the forward input", false, false},
    {"Y", "the forward output (unused; may be \"\")", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def gather_grad_out[] = {
    {"ddata", "gradient of data: dY added at the gathered places, zeros elsewhere", true, false},
    {"dindices", "never computed: indices have no gradient (must be \"\")", true, false},
};
static const pardo_attr_def gather_attrs[] = {
    {"axis", PARDO_ATTR_INT, "0", "the dim of data that indices index; negative counts from the end"},
};
static const pardo_dtype index_dtypes[] = {PARDO_I32, PARDO_I64};

/* Y's type from data's and indices' (dims may be -1; ndim -1 unknown); *axis_out the normalised axis. */
static int gather_type(const pardo_op *op, const pardo_type *d, const pardo_type *ix, pardo_type *y, int *axis_out,
                       pardo_status *st) {
    int64_t a;
    int rc = pardo_attr_int(op, "axis", 0, &a, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(ix, "input 1 'indices'", index_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    y->dtype = d->dtype;
    y->ndim = -1;
    if (d->ndim < 0) return PARDO_OK;
    if (d->ndim == 0) return pardo_errorf(st, PARDO_EINVAL, "input 0 'data' is a scalar, expected rank >= 1");
    int axis;
    if ((rc = pardo_normalize_axis(a, d->ndim, "axis", &axis, st)) != PARDO_OK) return rc;
    *axis_out = axis;
    if (ix->ndim < 0) return PARDO_OK;
    if (d->ndim - 1 + ix->ndim > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_ESHAPE, "the output would have rank %d, more than %d", d->ndim - 1 + ix->ndim,
                            PARDO_MAX_DIMS);
    y->ndim = 0;
    for (int i = 0; i < axis; i++) y->shape[y->ndim++] = d->shape[i];
    for (int i = 0; i < ix->ndim; i++) y->shape[y->ndim++] = ix->shape[i];
    for (int i = axis + 1; i < d->ndim; i++) y->shape[y->ndim++] = d->shape[i];
    return PARDO_OK;
}

static int gather_infer(pardo_infer_ctx *ctx) {
    int axis;
    return gather_type(ctx->op, ctx->in[0], ctx->in[1], &ctx->out[0], &axis, ctx->st);
}

/* The index at position j of ix, made nonnegative for a dim of n;
 * PARDO_ERUNTIME naming op, element and value when out of range. */
static int gather_index(const pardo_tensor *ix, int64_t j, int64_t n, int axis, int64_t *k, pardo_status *st) {
    const void *p = pardo_tensor_data(ix);
    int64_t v = ix->dtype == PARDO_I64 ? ((const int64_t *)p)[j] : ((const int32_t *)p)[j];
    *k = v < 0 ? v + n : v;
    if (*k < 0 || *k >= n)
        return pardo_errorf(st, PARDO_ERUNTIME, "gather: input 1 'indices' element %lld is %lld, out of range for dim "
                            "%d of input 0 'data' (size %lld; valid [%lld, %lld])", (long long)j, (long long)v, axis,
                            (long long)n, (long long)-n, (long long)n - 1);
    return PARDO_OK;
}

/* data viewed as [outer, n, inner] around axis. */
static void gather_split(const pardo_tensor *d, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= d->shape[i];
    for (int i = axis + 1; i < d->ndim; i++) *inner *= d->shape[i];
    *n = d->shape[axis];
}

static int gather_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0], *ix = ctx->in[1];
    pardo_type td = pardo_tensor_type(d), ti = pardo_tensor_type(ix), ty;
    int axis = 0;
    int rc = gather_type(ctx->op, &td, &ti, &ty, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t outer, n, inner, k;
    gather_split(d, axis, &outer, &n, &inner);
    for (int64_t j = 0; j < ix->numel; j++)
        if ((rc = gather_index(ix, j, n, axis, &k, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, d->dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    const size_t es = pardo_dtype_size(d->dtype), row = (size_t)inner * es;
    const char *src = pardo_tensor_data(d);
    char *dst = pardo_tensor_data(y);
    const int64_t m = ix->numel;
    for (int64_t o = 0; o < outer && row; o++)
        for (int64_t j = 0; j < m; j++) {
            gather_index(ix, j, n, axis, &k, ctx->st);
            memcpy(dst + (size_t)(o * m + j) * row, src + (size_t)(o * n + k) * row, row);
        }
    return PARDO_OK;
}

/* gather_grad reads data's shape, the indices and dY, never Y. */
static int gather_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

static int gather_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *d = ctx->in[0], *dy = IN_TYPE(ctx, 3);
    pardo_type y;
    int axis;
    int rc = gather_type(ctx->op, d, ctx->in[1], &y, &axis, ctx->st);
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 0, d, "input 0 'data'", ctx->st);
    if (rc != PARDO_OK) return rc;
    if (pardo_op_wants_output(ctx->op, 1))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output 1 asks for the gradient of input 1 'indices', which has "
                            "none");
    if (dy && dy->dtype != d->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' has dtype %s, expected %s like input 0 'data'",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(d->dtype));
    ctx->out[0] = *d;
    ctx->out[1] = *ctx->in[1];
    return PARDO_OK;
}

#define GATHER_GRAD_KERNEL(NAME, T)                                                                                    \
    static void NAME(const pardo_tensor *ix, const T *dy, T *dd, int64_t outer, int64_t n, int64_t inner, int axis,   \
                     pardo_status *st) {                                                                               \
        const int64_t m = ix->numel;                                                                                   \
        int64_t k;                                                                                                     \
        for (int64_t o = 0; o < outer; o++)                                                                            \
            for (int64_t j = 0; j < m; j++) {                                                                          \
                gather_index(ix, j, n, axis, &k, st);                                                                  \
                const T *s = dy + (o * m + j) * inner;                                                                 \
                T *d = dd + (o * n + k) * inner;                                                                       \
                for (int64_t i = 0; i < inner; i++) d[i] += s[i];                                                      \
            }                                                                                                          \
    }

GATHER_GRAD_KERNEL(gather_grad_f32, float)
GATHER_GRAD_KERNEL(gather_grad_f64, double)

static int gather_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0], *ix = ctx->in[1], *dy = IN_TYPE(ctx, 3);
    pardo_type td = pardo_tensor_type(d), ti = pardo_tensor_type(ix), ty;
    int axis = 0;
    int rc = gather_type(ctx->op, &td, &ti, &ty, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (pardo_kernel_wants_output(ctx, 1))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 1 'indices' is an integer tensor, which has no gradient");
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_dtype_is_float(d->dtype))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'data' is %s, which has no gradient",
                            pardo_dtype_name(d->dtype));
    if (dy && (dy->dtype != d->dtype || !pardo_shape_equal(dy->ndim, dy->shape, ty.ndim, ty.shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' is %s %s, expected %s %s like Y",
                            pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(d->dtype), pardo_shape_str(ty.ndim, ty.shape, s2, sizeof s2));
    }
    int64_t outer, n, inner, k;
    gather_split(d, axis, &outer, &n, &inner);
    for (int64_t j = 0; j < ix->numel; j++)
        if ((rc = gather_index(ix, j, n, axis, &k, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *dd = pardo_kernel_output(ctx, 0, d->dtype, d->ndim, d->shape);
    if (!dd) return ctx->st->code;
    pardo_tensor_zero(dd);
    if (!dy || inner == 0) return PARDO_OK;
    if (d->dtype == PARDO_F32)
        gather_grad_f32(ix, pardo_tensor_data(dy), pardo_tensor_data(dd), outer, n, inner, axis, ctx->st);
    else gather_grad_f64(ix, pardo_tensor_data(dy), pardo_tensor_data(dd), outer, n, inner, axis, ctx->st);
    return PARDO_OK;
}

const pardo_op_def pardo_op_gather = {
    .type = "gather",
    .doc = "Y = data indexed along axis by indices, like ONNX Gather (data any dtype; indices int32 or int64, "
           "negative from the end; gradient for data: floats)",
    .inputs = gather_in,
    .n_inputs = 2,
    .outputs = gather_out,
    .n_outputs = 1,
    .attrs = gather_attrs,
    .n_attrs = 1,
    .infer = gather_infer,
    .cpu = gather_cpu,
    .grad = gather_grad_build,
    .all_dtypes = true, /* copies rows of elements by size */
};

const pardo_op_def pardo_op_gather_grad = {
    .type = "gather_grad",
    .doc = "ddata = zeros of data's shape with dY added where gather read (gradient of gather; float32, float64)",
    .inputs = gather_grad_in,
    .n_inputs = 4,
    .outputs = gather_grad_out,
    .n_outputs = 2,
    .attrs = gather_attrs,
    .n_attrs = 1,
    .infer = gather_grad_infer,
    .cpu = gather_grad_cpu,
};

/* ---- slice ---- */

static const char *const slice_lists[4] = {"starts", "ends", "axes", "steps"};

static const pardo_arg_def slice_in[] = {
    {"X", "input tensor (any dtype)", false, false},
    {"starts", "int64 1-D, read at run time; overrides attr starts (\"\": the attr)", true, false},
    {"ends", "int64 1-D, read at run time; overrides attr ends", true, false},
    {"axes", "int64 1-D, read at run time; overrides attr axes", true, false},
    {"steps", "int64 1-D, read at run time; overrides attr steps", true, false},
};
static const pardo_arg_def slice_out[] = {{"Y", "X's dtype: the slice", false, false}};
static const pardo_arg_def slice_grad_in[] = {
    {"X", "the forward input (its shape)", false, false},
    {"starts", "the forward input", true, false},
    {"ends", "the forward input", true, false},
    {"axes", "the forward input", true, false},
    {"steps", "the forward input", true, false},
    {"Y", "the forward output (unused; may be \"\")", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def slice_grad_out[] = {
    {"dX", "gradient of X: dY at the sliced places, zeros elsewhere", true, false},
    {"dstarts", "never computed (must be \"\")", true, false},
    {"dends", "never computed (must be \"\")", true, false},
    {"daxes", "never computed (must be \"\")", true, false},
    {"dsteps", "never computed (must be \"\")", true, false},
};
static const pardo_attr_def slice_attrs[] = {
    /* starts, ends, steps: number lists, since ONNX's INT64_MAX and INT64_MIN are past the integers a JSON
     * number holds exactly (2^53); whole numbers are required and those beyond int64 saturate */
    {"starts", PARDO_ATTR_FLOATS, "null",
     "first index per axis (whole numbers); negative counts from the end; clamped (required unless input 1 is given)"},
    {"ends", PARDO_ATTR_FLOATS, "null", "end (exclusive) per axis; negative counts from the end; clamped, so "
                                      "INT64_MAX and INT64_MIN mean past either end (required unless input 2)"},
    {"axes", PARDO_ATTR_INTS, "null", "the axes starts and ends apply to; negative counts from the end; absent: "
                                      "0, 1, ..."},
    {"steps", PARDO_ATTR_FLOATS, "null", "step per axis, nonzero, negative walks backwards; absent: 1s"},
};

/* Per dim of X: the first index, the step and the count taken. */
typedef struct slice_plan {
    int64_t start[PARDO_MAX_DIMS], step[PARDO_MAX_DIMS], count[PARDO_MAX_DIMS];
} slice_plan;

/* The slice of a rank-r X with dims x (a dim -1: its count is -1), from
 * inputs in[1..4] (NULL: the attr). */
static int slice_make(const pardo_op *op, pardo_tensor *const in[5], int r, const int64_t *x, slice_plan *p,
                      pardo_status *st) {
    int64_t v[4][PARDO_MAX_DIMS];
    int n[4], rc;
    for (int k = 0; k < 4; k++)
        if ((rc = pardo_index_ints(op, in[k + 1], k + 1, slice_lists[k], v[k], PARDO_MAX_DIMS, &n[k], st)) != PARDO_OK)
            return rc;
    for (int k = 0; k < 2; k++)
        if (n[k] < 0)
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is required (or input %d '%s')", slice_lists[k], k + 1,
                                slice_lists[k]);
    for (int k = 1; k < 4; k++)
        if (n[k] >= 0 && n[k] != n[0])
            return pardo_errorf(st, PARDO_EINVAL, "'%s' has %d values and 'starts' %d, expected as many",
                                slice_lists[k], n[k], n[0]);
    if (n[0] > r)
        return pardo_errorf(st, PARDO_EINVAL, "'starts' has %d values, more than X's rank %d", n[0], r);
    for (int d = 0; d < r; d++) {
        p->start[d] = 0;
        p->step[d] = 1;
        p->count[d] = x[d];
    }
    bool seen[PARDO_MAX_DIMS] = {false};
    for (int i = 0; i < n[0]; i++) {
        int a = i;
        if (n[2] >= 0 && (rc = pardo_normalize_axis(v[2][i], r, "axes", &a, st)) != PARDO_OK) return rc;
        if (seen[a]) return pardo_errorf(st, PARDO_EINVAL, "'axes' lists dim %d twice", a);
        seen[a] = true;
        int64_t s = v[0][i], e = v[1][i], step = n[3] >= 0 ? v[3][i] : 1, dim = x[a];
        if (step == 0) return pardo_errorf(st, PARDO_EINVAL, "'steps' element %d is 0, expected a nonzero step", i);
        p->step[a] = step;
        if (dim < 0) { /* a run-time dim: known then */
            p->start[a] = 0;
            p->count[a] = -1;
            continue;
        }
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        int64_t span;
        if (step > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            span = e - s;
            p->count[a] = span <= 0 ? 0 : 1 + (span - 1) / step;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            span = dim == 0 ? 0 : s - e; /* an empty dim: [0, -1] clamps nothing in */
            p->count[a] = span <= 0 ? 0 : step == INT64_MIN ? 1 : 1 + (span - 1) / -step;
        }
        p->start[a] = s;
    }
    return PARDO_OK;
}

static int slice_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    pardo_type *y = &ctx->out[0];
    y->dtype = x->dtype;
    y->ndim = x->ndim;
    bool runtime = false;
    for (int k = 1; k <= 4; k++) {
        const pardo_type *t = IN_TYPE(ctx, k);
        if (!t) continue;
        char what[32];
        int len;
        snprintf(what, sizeof what, "input %d '%s'", k, slice_lists[k - 1]);
        int rc = pardo_index_expect_list(t, what, &len, ctx->st);
        if (rc != PARDO_OK) return rc;
        runtime = true;
    }
    if (x->ndim < 0) return PARDO_OK;
    if (runtime) {
        for (int d = 0; d < x->ndim; d++) y->shape[d] = -1;
        return PARDO_OK;
    }
    pardo_tensor *none[5] = {NULL, NULL, NULL, NULL, NULL};
    slice_plan p;
    int rc = slice_make(ctx->op, none, x->ndim, x->shape, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    memcpy(y->shape, p.count, sizeof(int64_t) * (size_t)x->ndim);
    return PARDO_OK;
}

/* Walks the slice of x (rank nd >= 1 after padding) in row-major order of Y:
 * element i of Y is element src[i] of X. SCATTER swaps the sides (dX[src]
 * = dY[i]). */
#define SLICE_KERNEL(NAME, T, BODY)                                                                                    \
    static void NAME(const void *vx, void *vy, int nd, const int64_t *dims, const int64_t *xs, int64_t base,           \
                     int64_t numel) {                                                                                  \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        (void)x;                                                                                                       \
        const int64_t n = dims[nd - 1], step = xs[nd - 1];                                                             \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, nd - 1, dims, xs, NULL);                                                                    \
        for (int64_t b = 0; b < numel; b += n, pardo_odo_next(&o))                                                     \
            for (int64_t i = 0; i < n; i++) BODY;                                                                      \
    }

SLICE_KERNEL(slice_1, uint8_t, y[b + i] = x[base + o.off[0] + i * step])
SLICE_KERNEL(slice_2, uint16_t, y[b + i] = x[base + o.off[0] + i * step])
SLICE_KERNEL(slice_4, uint32_t, y[b + i] = x[base + o.off[0] + i * step])
SLICE_KERNEL(slice_8, uint64_t, y[b + i] = x[base + o.off[0] + i * step])
/* scatter: vx is dY (walked in order), vy is dX */
SLICE_KERNEL(unslice_4, float, y[base + o.off[0] + i * step] = ((const float *)vx)[b + i])
SLICE_KERNEL(unslice_8, double, y[base + o.off[0] + i * step] = ((const double *)vx)[b + i])

/* The walk of plan p over X of shape (r, x): Y's dims, X's element step per
 * Y dim and the offset of Y's first element. nd at least 1. */
static void slice_walk(const slice_plan *p, int r, const int64_t *x, int *nd, int64_t *dims, int64_t *xs,
                       int64_t *base) {
    int64_t str[PARDO_MAX_DIMS];
    pardo_contiguous_strides(r, x, str);
    *base = 0;
    for (int d = 0; d < r; d++) {
        dims[d] = p->count[d];
        xs[d] = p->step[d] * str[d];
        *base += p->start[d] * str[d];
    }
    *nd = r;
    if (r == 0) {
        *nd = 1;
        dims[0] = 1;
        xs[0] = 0;
    }
}

static int slice_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *in[5] = {ctx->in[0], IN_TYPE(ctx, 1), IN_TYPE(ctx, 2), IN_TYPE(ctx, 3), IN_TYPE(ctx, 4)};
    pardo_tensor *x = in[0];
    slice_plan p;
    int rc = slice_make(ctx->op, in, x->ndim, x->shape, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, p.count);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    int nd;
    int64_t dims[PARDO_MAX_DIMS], xs[PARDO_MAX_DIMS], base;
    slice_walk(&p, x->ndim, x->shape, &nd, dims, xs, &base);
    const size_t es = pardo_dtype_size(x->dtype);
    if (es == 1) slice_1(pardo_tensor_data(x), pardo_tensor_data(y), nd, dims, xs, base, y->numel);
    else if (es == 2) slice_2(pardo_tensor_data(x), pardo_tensor_data(y), nd, dims, xs, base, y->numel);
    else if (es == 4) slice_4(pardo_tensor_data(x), pardo_tensor_data(y), nd, dims, xs, base, y->numel);
    else slice_8(pardo_tensor_data(x), pardo_tensor_data(y), nd, dims, xs, base, y->numel);
    return PARDO_OK;
}

/* slice_grad never reads Y. */
static int slice_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

static int slice_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *dy = IN_TYPE(ctx, 6);
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 1; k < ctx->n_out; k++)
        if (pardo_op_wants_output(ctx->op, k))
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output %d asks for the gradient of input %d '%s', which has "
                                "none", k, k, slice_lists[k - 1]);
    if (dy && dy->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 6 'dY' has dtype %s, expected %s like input 0 'X'",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(x->dtype));
    for (int k = 0; k < ctx->n_out; k++) ctx->out[k] = *x;
    return PARDO_OK;
}

static int slice_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *in[5] = {ctx->in[0], IN_TYPE(ctx, 1), IN_TYPE(ctx, 2), IN_TYPE(ctx, 3), IN_TYPE(ctx, 4)};
    pardo_tensor *x = in[0], *dy = IN_TYPE(ctx, 6);
    slice_plan p;
    int rc = slice_make(ctx->op, in, x->ndim, x->shape, &p, ctx->st);
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    if (!pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'X' is %s, which has no gradient",
                            pardo_dtype_name(x->dtype));
    if (dy && (dy->dtype != x->dtype || !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, p.count))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 6 'dY' is %s %s, expected %s %s like Y",
                            pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, p.count, s2, sizeof s2));
    }
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    pardo_tensor_zero(dx);
    const int64_t ny = pardo_shape_numel(x->ndim, p.count);
    if (!dy || ny == 0) return PARDO_OK;
    int nd;
    int64_t dims[PARDO_MAX_DIMS], xs[PARDO_MAX_DIMS], base;
    slice_walk(&p, x->ndim, x->shape, &nd, dims, xs, &base);
    if (x->dtype == PARDO_F32) unslice_4(pardo_tensor_data(dy), pardo_tensor_data(dx), nd, dims, xs, base, ny);
    else unslice_8(pardo_tensor_data(dy), pardo_tensor_data(dx), nd, dims, xs, base, ny);
    return PARDO_OK;
}

const pardo_op_def pardo_op_slice = {
    .type = "slice",
    .doc = "Y = X[starts:ends:steps] along axes, like ONNX Slice-13 with its clamping; the lists as attrs or "
           "run-time int64 inputs (any dtype)",
    .inputs = slice_in,
    .n_inputs = 5,
    .outputs = slice_out,
    .n_outputs = 1,
    .attrs = slice_attrs,
    .n_attrs = 4,
    .infer = slice_infer,
    .cpu = slice_cpu,
    .grad = slice_grad_build,
    .all_dtypes = true, /* copies elements by size */
};

const pardo_op_def pardo_op_slice_grad = {
    .type = "slice_grad",
    .doc = "dX = zeros of X's shape with dY at the sliced places (gradient of slice; float32, float64)",
    .inputs = slice_grad_in,
    .n_inputs = 7,
    .outputs = slice_grad_out,
    .n_outputs = 5,
    .attrs = slice_attrs,
    .n_attrs = 4,
    .infer = slice_grad_infer,
    .cpu = slice_grad_cpu,
};
