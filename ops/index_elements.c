/* index_elements.c - element- and tuple-indexed ops, as ONNX's (opset 16/13):
 *
 * gather_elements (data, indices; attr axis): Y has indices' shape, Y[i] =
 * data[i with its axis coordinate replaced by indices[i]]; indices have
 * data's rank and no larger dims off the axis. gather_elements_grad
 * scatter-adds dY into zeros of data's shape.
 * scatter_elements (data, indices, updates; axis, reduction): Y = data with
 * updates[i] written (reduction "none") or combined by add, mul, max or min
 * at the place gather_elements would read; updates have indices' shape.
 * gather_nd (data, indices; batch_dims b): indices' last dim m indexes
 * data's dims b..b+m-1 after the b leading batch dims both share; Y's shape
 * is indices.shape[:-1] + data.shape[b+m:]. gather_nd_grad scatter-adds.
 * scatter_nd (data, indices, updates; reduction): the slices updates
 * [indices.shape[:-1] + data.shape[m:]] written or combined into a copy of
 * data at the tuples of indices.
 *
 * Any dtype for data (reductions other than none: float32, float64, int32,
 * int64); indices int32 or int64, negative ones counting from the end of
 * their dim; one out of range is PARDO_ERUNTIME naming the op, the element
 * of indices and its value, before any output is written. Duplicate
 * indices in the scatters apply in order (the last write wins for none).
 * Single-threaded; no allocation beyond the outputs. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

static const pardo_dtype index_dtypes[] = {PARDO_I32, PARDO_I64};

typedef enum sc_reduction { SC_NONE, SC_ADD, SC_MUL, SC_MAX, SC_MIN } sc_reduction;

/* One run's layout. */
typedef struct ix_job {
    const char *op;                                            // op type, for messages
    int nd;                                                    // data's rank
    int64_t dshape[PARDO_MAX_DIMS], dstride[PARDO_MAX_DIMS];  // data's dims and strides (elements)
    int ind;                                                   // indices' rank
    int64_t ishape[PARDO_MAX_DIMS];                            // indices' dims
    int axis;                                                  // the elements ops' axis
    int64_t m, b;                                              // the nd ops: tuple length, batch dims
    int64_t rows, n_inner, slice, batch_stride;                // tuples; tuples per batch; slice, batch (elements)
    const void *idx;                                           // indices' data
    bool i64;                                                  // indices are int64
} ix_job;

static void ix_job_init(ix_job *jb, const char *op, const pardo_tensor *d, const pardo_tensor *ix) {
    memset(jb, 0, sizeof *jb);
    jb->op = op;
    jb->nd = d->ndim;
    int64_t s = 1;
    for (int k = d->ndim - 1; k >= 0; k--) {
        jb->dshape[k] = d->shape[k];
        jb->dstride[k] = s;
        s *= d->shape[k];
    }
    jb->ind = ix->ndim;
    for (int k = 0; k < ix->ndim; k++) jb->ishape[k] = ix->shape[k];
    jb->idx = pardo_tensor_data(ix);
    jb->i64 = ix->dtype == PARDO_I64;
}

/* Indices element i made nonnegative for data's dim `dim` into *k;
 * PARDO_ERUNTIME naming the op, element and value when out of range. */
static int ix_index(const ix_job *jb, int64_t i, int dim, int64_t *k, pardo_status *st) {
    const int64_t v = jb->i64 ? ((const int64_t *)jb->idx)[i] : ((const int32_t *)jb->idx)[i], n = jb->dshape[dim];
    *k = v < 0 ? v + n : v;
    if (*k >= 0 && *k < n) return PARDO_OK;
    return pardo_errorf(st, PARDO_ERUNTIME, "%s: input 1 'indices' element %lld is %lld, out of range for dim %d of "
                        "input 0 'data' (size %lld; valid [%lld, %lld])", jb->op, (long long)i, (long long)v, dim,
                        (long long)n, (long long)-n, (long long)n - 1);
}

/* The data offset that indices element i of an elements op names. */
static int elements_offset(const ix_job *jb, int64_t i, int64_t *off, pardo_status *st) {
    int64_t o = 0, r = i, k;
    for (int d = jb->ind - 1; d >= 0; d--) {
        const int64_t c = jb->ishape[d] ? r % jb->ishape[d] : 0;
        r = jb->ishape[d] ? r / jb->ishape[d] : 0;
        if (d != jb->axis) o += c * jb->dstride[d];
    }
    int rc = ix_index(jb, i, jb->axis, &k, st);
    *off = o + k * jb->dstride[jb->axis];
    return rc;
}

/* The data offset of the slice that tuple j of an nd op names. */
static int nd_offset(const ix_job *jb, int64_t j, int64_t *off, pardo_status *st) {
    int64_t o = (jb->n_inner ? j / jb->n_inner : 0) * jb->batch_stride, k;
    for (int64_t t = 0; t < jb->m; t++) {
        int rc = ix_index(jb, j * jb->m + t, (int)(jb->b + t), &k, st);
        if (rc != PARDO_OK) return rc;
        o += k * jb->dstride[jb->b + t];
    }
    *off = o;
    return PARDO_OK;
}

/* Fills the nd fields of jb (m, b, rows, n_inner, slice, batch_stride). */
static void nd_job_init(ix_job *jb, int64_t b) {
    jb->b = b;
    jb->m = jb->ishape[jb->ind - 1];
    jb->rows = 1;
    for (int k = 0; k < jb->ind - 1; k++) jb->rows *= jb->ishape[k];
    int64_t nb = 1;
    for (int k = 0; k < b; k++) nb *= jb->ishape[k];
    jb->n_inner = nb ? jb->rows / nb : 0;
    jb->slice = 1;
    for (int k = (int)(b + jb->m); k < jb->nd; k++) jb->slice *= jb->dshape[k];
    jb->batch_stride = b > 0 ? jb->dstride[b - 1] : 0;
}

/* Checks every index of jb (elements ops: one per element; nd ops: the tuples). */
static int ix_check_all(const ix_job *jb, bool nd, pardo_status *st) {
    int64_t off;
    if (nd) {
        for (int64_t j = 0; j < jb->rows; j++)
            if (nd_offset(jb, j, &off, st) != PARDO_OK) return st->code;
        return PARDO_OK;
    }
    int64_t cnt = 1;
    for (int k = 0; k < jb->ind; k++) cnt *= jb->ishape[k];
    for (int64_t i = 0; i < cnt; i++)
        if (elements_offset(jb, i, &off, st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

static int sc_reduction_get(const pardo_op *op, sc_reduction *red, pardo_status *st) {
    const char *s;
    int rc = pardo_attr_string(op, "reduction", "none", &s, st);
    if (rc != PARDO_OK) return rc;
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    for (int k = 0; k < 5; k++)
        if (strcmp(s, names[k]) == 0) {
            *red = (sc_reduction)k;
            return PARDO_OK;
        }
    return pardo_errorf(st, PARDO_EINVAL, "attr 'reduction' is \"%s\", expected \"none\", \"add\", \"mul\", \"max\" or "
                        "\"min\"", s);
}

/* Combines n elements of u from ui into d at off by red, for element type T. */
#define SC_COMBINE(SUF, T)                                                                                             \
    static void sc_combine_##SUF(sc_reduction red, void *vd, int64_t off, const void *vu, int64_t ui, int64_t n) {    \
        T *d = (T *)vd + off;                                                                                          \
        const T *u = (const T *)vu + ui;                                                                               \
        for (int64_t k = 0; k < n; k++) {                                                                              \
            const T a = d[k], b = u[k];                                                                                \
            d[k] = red == SC_ADD ? (T)(a + b) : red == SC_MUL ? (T)(a * b) : red == SC_MAX ? (b > a ? b : a)          \
                                                                : red == SC_MIN ? (b < a ? b : a) : b;                 \
        }                                                                                                              \
    }

SC_COMBINE(f32, float)
SC_COMBINE(f64, double)
SC_COMBINE(i32, int32_t)
SC_COMBINE(i64, int64_t)

/* Writes (none) or combines n elements of updates (from ui) into y at off. */
static void sc_apply(pardo_dtype dt, sc_reduction red, void *y, int64_t off, const void *u, int64_t ui, int64_t n) {
    if (red == SC_NONE) {
        const size_t es = pardo_dtype_size(dt);
        memcpy((char *)y + (size_t)off * es, (const char *)u + (size_t)ui * es, (size_t)n * es);
    } else if (dt == PARDO_F32) sc_combine_f32(red, y, off, u, ui, n);
    else if (dt == PARDO_F64) sc_combine_f64(red, y, off, u, ui, n);
    else if (dt == PARDO_I32) sc_combine_i32(red, y, off, u, ui, n);
    else sc_combine_i64(red, y, off, u, ui, n);
}

/* PARDO_EINVAL for a reduction on a dtype it has no meaning for (bool). */
static int sc_check_reduction(sc_reduction red, pardo_dtype dt, pardo_status *st) {
    if (red == SC_NONE || dt == PARDO_F32 || dt == PARDO_F64 || dt == PARDO_I32 || dt == PARDO_I64) return PARDO_OK;
    return pardo_errorf(st, PARDO_EINVAL, "attr 'reduction' other than \"none\" needs numeric data, not %s",
                        pardo_dtype_name(dt));
}

/* updates (u, `what`) must have data's dtype and the given shape (known dims). */
static int expect_updates(const pardo_type *u, const pardo_type *d, int ndim, const int64_t *shape, pardo_status *st) {
    char s1[128], s2[128];
    bool ok = u->dtype == d->dtype && (u->ndim < 0 || ndim < 0 || u->ndim == ndim);
    for (int k = 0; ok && u->ndim >= 0 && ndim >= 0 && k < ndim; k++)
        ok = u->shape[k] < 0 || shape[k] < 0 || u->shape[k] == shape[k];
    if (ok) return PARDO_OK;
    return pardo_errorf(st, PARDO_ESHAPE, "input 2 'updates' is %s %s, expected %s %s", pardo_dtype_name(u->dtype),
                        pardo_shape_str(u->ndim, u->shape, s1, sizeof s1), pardo_dtype_name(d->dtype),
                        ndim < 0 ? "of unknown shape" : pardo_shape_str(ndim, shape, s2, sizeof s2));
}

/* ---- gather_elements, scatter_elements ---- */

static const pardo_attr_def ge_attrs[] = {
    {"axis", PARDO_ATTR_INT, "0", "the dim of data that indices index; negative counts from the end"},
};
static const pardo_attr_def se_attrs[] = {
    {"axis", PARDO_ATTR_INT, "0", "the dim of data that indices index; negative counts from the end"},
    {"reduction", PARDO_ATTR_STRING, "\"none\"", "\"none\" (write), \"add\", \"mul\", \"max\" or \"min\""},
};

/* Checks data d, indices ix and (scatter_elements) updates u; *axis the
 * normalised axis (left alone while d's rank is unknown); y gets the output
 * type (indices' shape for gather, data's type for scatter). */
static int elements_check(const pardo_op *op, const pardo_type *d, const pardo_type *ix, const pardo_type *u,
                          int *axis, pardo_type *y, pardo_status *st) {
    char s1[128], s2[128];
    int64_t a;
    int rc = pardo_attr_int(op, "axis", 0, &a, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(ix, "input 1 'indices'", index_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    *axis = 0;
    if (d->ndim == 0) return pardo_errorf(st, PARDO_EINVAL, "input 0 'data' is a scalar, expected rank >= 1");
    if (d->ndim > 0 && (rc = pardo_normalize_axis(a, d->ndim, "axis", axis, st)) != PARDO_OK) return rc;
    if (d->ndim > 0 && ix->ndim >= 0) {
        bool ok = ix->ndim == d->ndim;
        for (int k = 0; ok && k < d->ndim; k++)
            ok = k == *axis || ix->shape[k] < 0 || d->shape[k] < 0 || ix->shape[k] <= d->shape[k];
        if (!ok)
            return pardo_errorf(st, PARDO_ESHAPE, "input 1 'indices' has shape %s, expected data's rank and no dim "
                                "larger than data %s off axis %d", pardo_shape_str(ix->ndim, ix->shape, s1, sizeof s1),
                                pardo_shape_str(d->ndim, d->shape, s2, sizeof s2), *axis);
    }
    if (u && (rc = expect_updates(u, d, ix->ndim, ix->shape, st)) != PARDO_OK) return rc;
    if (u) {
        *y = *d;
    } else {
        *y = *ix;
        y->dtype = d->dtype;
    }
    return PARDO_OK;
}

static const pardo_arg_def ge_in[] = {
    {"data", "tensor to read from (any dtype), rank >= 1", false, false},
    {"indices", "int32 or int64, data's rank; negative counts from the end of dim axis", false, false},
};
static const pardo_arg_def ge_out[] = {{"Y", "data's dtype, indices' shape", false, false}};

static int ge_infer(pardo_infer_ctx *ctx) {
    int axis;
    return elements_check(ctx->op, ctx->in[0], ctx->in[1], NULL, &axis, &ctx->out[0], ctx->st);
}

static int ge_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0], *ix = ctx->in[1];
    pardo_type td = pardo_tensor_type(d), ti = pardo_tensor_type(ix), ty;
    ix_job jb;
    int rc = elements_check(ctx->op, &td, &ti, NULL, &jb.axis, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int axis = jb.axis;
    ix_job_init(&jb, "gather_elements", d, ix);
    jb.axis = axis;
    if ((rc = ix_check_all(&jb, false, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, d->dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    const size_t es = pardo_dtype_size(d->dtype);
    const char *src = pardo_tensor_data(d);
    char *dst = pardo_tensor_data(y);
    int64_t off;
    for (int64_t i = 0; i < ix->numel; i++) {
        elements_offset(&jb, i, &off, ctx->st);
        memcpy(dst + (size_t)i * es, src + (size_t)off * es, es);
    }
    return PARDO_OK;
}

/* The gradient ops read data's shape, the indices and dY, never Y. */
static int ix_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_gather_elements = {
    .type = "gather_elements",
    .doc = "Y[i] = data[i with the axis coordinate replaced by indices[i]] (ONNX GatherElements)",
    .inputs = ge_in,
    .n_inputs = 2,
    .outputs = ge_out,
    .n_outputs = 1,
    .attrs = ge_attrs,
    .n_attrs = 1,
    .infer = ge_infer,
    .cpu = ge_cpu,
    .grad = ix_grad_build,
};

static const pardo_arg_def ix_grad_in[] = {
    {"data", "the forward input (its shape)", false, false},
    {"indices", "the forward input", false, false},
    {"Y", "the forward output (unused; may be \"\")", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def ix_grad_out[] = {
    {"ddata", "gradient of data: dY added at the gathered places, zeros elsewhere", true, false},
    {"dindices", "never computed: indices have no gradient (must be \"\")", true, false},
};

/* The inference of both gradient ops, once the forward check passed. */
static int ix_grad_types(pardo_infer_ctx *ctx, const pardo_type *y) {
    const pardo_type *d = ctx->in[0], *dy = pardo_nn_in_type(ctx, 3);
    int rc = pardo_grad_expect_float(ctx->op, 0, d, "input 0 'data'", ctx->st);
    if (rc != PARDO_OK) return rc;
    if (pardo_op_wants_output(ctx->op, 1))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output 1 asks for the gradient of input 1 'indices', which has "
                            "none");
    if (dy && (rc = pardo_nn_expect_same(dy, "input 3 'dY'", y, "the forward Y", ctx->st)) != PARDO_OK) return rc;
    ctx->out[0] = *d;
    ctx->out[1] = *ctx->in[1];
    return PARDO_OK;
}

/* The kernels' shared start: dY checked against y, ddata zeros or NULL when not wanted. */
static int ix_grad_start(pardo_kernel_ctx *ctx, const pardo_type *y, pardo_tensor **dd) {
    pardo_tensor *d = ctx->in[0], *dy = pardo_nn_in(ctx, 3);
    *dd = NULL;
    if (pardo_kernel_wants_output(ctx, 1))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 1 'indices' is an integer tensor, which has no gradient");
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_dtype_is_float(d->dtype))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'data' is %s, which has no gradient",
                            pardo_dtype_name(d->dtype));
    if (dy) {
        pardo_type tdy = pardo_tensor_type(dy);
        int rc = pardo_nn_expect_same(&tdy, "input 3 'dY'", y, "the forward Y", ctx->st);
        if (rc != PARDO_OK) return rc;
    }
    *dd = pardo_nn_zeros(ctx, 0, d->dtype, d->ndim, d->shape);
    return *dd ? PARDO_OK : ctx->st->code;
}

static int ge_grad_infer(pardo_infer_ctx *ctx) {
    int axis;
    pardo_type y;
    int rc = elements_check(ctx->op, ctx->in[0], ctx->in[1], NULL, &axis, &y, ctx->st);
    return rc == PARDO_OK ? ix_grad_types(ctx, &y) : rc;
}

static int ge_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0], *ix = ctx->in[1], *dy = pardo_nn_in(ctx, 3), *dd;
    pardo_type td = pardo_tensor_type(d), ti = pardo_tensor_type(ix), ty;
    ix_job jb;
    int rc = elements_check(ctx->op, &td, &ti, NULL, &jb.axis, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int axis = jb.axis;
    ix_job_init(&jb, "gather_elements_grad", d, ix);
    jb.axis = axis;
    if ((rc = ix_check_all(&jb, false, ctx->st)) != PARDO_OK) return rc;
    if ((rc = ix_grad_start(ctx, &ty, &dd)) != PARDO_OK || !dd || !dy) return rc;
    int64_t off;
    for (int64_t i = 0; i < ix->numel; i++) {
        elements_offset(&jb, i, &off, ctx->st);
        if (d->dtype == PARDO_F32) ((float *)pardo_tensor_data(dd))[off] += ((const float *)pardo_tensor_data(dy))[i];
        else ((double *)pardo_tensor_data(dd))[off] += ((const double *)pardo_tensor_data(dy))[i];
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_gather_elements_grad = {
    .type = "gather_elements_grad",
    .doc = "gradient of gather_elements: dY scatter-added into zeros of data's shape",
    .inputs = ix_grad_in,
    .n_inputs = 4,
    .outputs = ix_grad_out,
    .n_outputs = 2,
    .attrs = ge_attrs,
    .n_attrs = 1,
    .infer = ge_grad_infer,
    .cpu = ge_grad_cpu,
};

static const pardo_arg_def se_in[] = {
    {"data", "tensor to update (any dtype), rank >= 1", false, false},
    {"indices", "int32 or int64, data's rank; negative counts from the end of dim axis", false, false},
    {"updates", "data's dtype, indices' shape", false, false},
};
static const pardo_arg_def se_out[] = {{"Y", "data with updates written or combined in; data's type", false, false}};

static int se_infer(pardo_infer_ctx *ctx) {
    int axis;
    sc_reduction red;
    int rc = sc_reduction_get(ctx->op, &red, ctx->st);
    if (rc == PARDO_OK) rc = sc_check_reduction(red, ctx->in[0]->dtype, ctx->st);
    if (rc == PARDO_OK) rc = elements_check(ctx->op, ctx->in[0], ctx->in[1], ctx->in[2], &axis, &ctx->out[0], ctx->st);
    return rc;
}

static int se_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0], *ix = ctx->in[1], *u = ctx->in[2];
    pardo_type td = pardo_tensor_type(d), ti = pardo_tensor_type(ix), tu = pardo_tensor_type(u), ty;
    sc_reduction red;
    ix_job jb;
    int rc = sc_reduction_get(ctx->op, &red, ctx->st);
    if (rc == PARDO_OK) rc = sc_check_reduction(red, d->dtype, ctx->st);
    if (rc == PARDO_OK) rc = elements_check(ctx->op, &td, &ti, &tu, &jb.axis, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int axis = jb.axis;
    ix_job_init(&jb, "scatter_elements", d, ix);
    jb.axis = axis;
    if ((rc = ix_check_all(&jb, false, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, d->dtype, d->ndim, d->shape);
    if (!y) return ctx->st->code;
    void *yd = pardo_tensor_data(y);
    memcpy(yd, pardo_tensor_data(d), (size_t)d->numel * pardo_dtype_size(d->dtype));
    int64_t off;
    for (int64_t i = 0; i < ix->numel; i++) {
        elements_offset(&jb, i, &off, ctx->st);
        sc_apply(d->dtype, red, yd, off, pardo_tensor_data(u), i, 1);
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_scatter_elements = {
    .type = "scatter_elements",
    .doc = "data with updates[i] written (or added, multiplied, maxed, mined) where gather_elements reads "
           "(ONNX ScatterElements)",
    .inputs = se_in,
    .n_inputs = 3,
    .outputs = se_out,
    .n_outputs = 1,
    .attrs = se_attrs,
    .n_attrs = 2,
    .infer = se_infer,
    .cpu = se_cpu,
};

/* ---- gather_nd, scatter_nd ---- */

static const pardo_attr_def gnd_attrs[] = {
    {"batch_dims", PARDO_ATTR_INT, "0", "leading dims that data and indices share and both keep"},
};
static const pardo_attr_def snd_attrs[] = {
    {"reduction", PARDO_ATTR_STRING, "\"none\"", "\"none\" (write), \"add\", \"mul\", \"max\" or \"min\""},
};

/* Checks data d and indices ix of an nd op with b batch dims (scatter_nd:
 * 0, and updates u); y gets the output type. */
static int nd_check(const pardo_op *op, const pardo_type *d, const pardo_type *ix, const pardo_type *u,
                    int64_t *b_out, pardo_type *y, pardo_status *st) {
    char s1[128], s2[128];
    int64_t b = 0;
    int rc = u ? PARDO_OK : pardo_attr_int(op, "batch_dims", 0, &b, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(ix, "input 1 'indices'", index_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    *b_out = b;
    if (d->ndim == 0 || ix->ndim == 0)
        return pardo_errorf(st, PARDO_EINVAL, "input %d is a scalar, expected rank >= 1", d->ndim == 0 ? 0 : 1);
    y->dtype = d->dtype;
    y->ndim = -1;
    if (d->ndim < 0 || ix->ndim < 0) {
        if (u) *y = *d;
        return PARDO_OK;
    }
    const int64_t m = ix->shape[ix->ndim - 1];
    bool ok = b >= 0 && b < ix->ndim && b < d->ndim && (m < 0 || (m >= 1 && b + m <= d->ndim));
    for (int k = 0; ok && k < b; k++) ok = ix->shape[k] < 0 || d->shape[k] < 0 || ix->shape[k] == d->shape[k];
    if (!ok)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'indices' %s does not index input 0 'data' %s with batch_dims "
                            "%lld (its last dim, between 1 and data's rank less batch_dims, counts the dims indexed)",
                            pardo_shape_str(ix->ndim, ix->shape, s1, sizeof s1),
                            pardo_shape_str(d->ndim, d->shape, s2, sizeof s2), (long long)b);
    if (m < 0) {
        if (u) *y = *d;
        return PARDO_OK;
    }
    pardo_type want = {.dtype = d->dtype, .ndim = 0};
    for (int k = 0; k < ix->ndim - 1; k++) want.shape[want.ndim++] = ix->shape[k];
    for (int64_t k = b + m; k < d->ndim; k++) want.shape[want.ndim++] = d->shape[k];
    if (want.ndim > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_ESHAPE, "the output would have rank %d, more than %d", want.ndim, PARDO_MAX_DIMS);
    if (u) {
        if ((rc = expect_updates(u, d, want.ndim, want.shape, st)) != PARDO_OK) return rc;
        *y = *d;
    } else {
        *y = want;
    }
    return PARDO_OK;
}

static const pardo_arg_def gnd_in[] = {
    {"data", "tensor to read from (any dtype), rank >= 1", false, false},
    {"indices", "int32 or int64 [..., m]: tuples indexing data's dims batch_dims..batch_dims+m-1", false, false},
};
static const pardo_arg_def gnd_out[] = {
    {"Y", "data's dtype, indices.shape[:-1] + data.shape[batch_dims+m:]", false, false}};

static int gnd_infer(pardo_infer_ctx *ctx) {
    int64_t b;
    return nd_check(ctx->op, ctx->in[0], ctx->in[1], NULL, &b, &ctx->out[0], ctx->st);
}

/* The common start of gather_nd's kernels: checks, fills jb, checks every tuple. */
static int gnd_start(pardo_kernel_ctx *ctx, const char *name, ix_job *jb, pardo_type *ty) {
    pardo_tensor *d = ctx->in[0], *ix = ctx->in[1];
    pardo_type td = pardo_tensor_type(d), ti = pardo_tensor_type(ix);
    int64_t b;
    int rc = nd_check(ctx->op, &td, &ti, NULL, &b, ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    ix_job_init(jb, name, d, ix);
    nd_job_init(jb, b);
    return ix_check_all(jb, true, ctx->st);
}

static int gnd_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0];
    pardo_type ty;
    ix_job jb;
    int rc = gnd_start(ctx, "gather_nd", &jb, &ty);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, d->dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    const size_t es = pardo_dtype_size(d->dtype), row = (size_t)jb.slice * es;
    const char *src = pardo_tensor_data(d);
    char *dst = pardo_tensor_data(y);
    int64_t off;
    for (int64_t j = 0; j < jb.rows && row; j++) {
        nd_offset(&jb, j, &off, ctx->st);
        memcpy(dst + (size_t)j * row, src + (size_t)off * es, row);
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_gather_nd = {
    .type = "gather_nd",
    .doc = "the slices of data at the index tuples in indices' last dim, after batch_dims shared dims "
           "(ONNX GatherND)",
    .inputs = gnd_in,
    .n_inputs = 2,
    .outputs = gnd_out,
    .n_outputs = 1,
    .attrs = gnd_attrs,
    .n_attrs = 1,
    .infer = gnd_infer,
    .cpu = gnd_cpu,
    .grad = ix_grad_build,
};

static int gnd_grad_infer(pardo_infer_ctx *ctx) {
    int64_t b;
    pardo_type y;
    int rc = nd_check(ctx->op, ctx->in[0], ctx->in[1], NULL, &b, &y, ctx->st);
    return rc == PARDO_OK ? ix_grad_types(ctx, &y) : rc;
}

static int gnd_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0], *dy = pardo_nn_in(ctx, 3), *dd;
    pardo_type ty;
    ix_job jb;
    int rc = gnd_start(ctx, "gather_nd_grad", &jb, &ty);
    if (rc != PARDO_OK || (rc = ix_grad_start(ctx, &ty, &dd)) != PARDO_OK || !dd || !dy) return rc;
    int64_t off;
    for (int64_t j = 0; j < jb.rows; j++) {
        nd_offset(&jb, j, &off, ctx->st);
        if (d->dtype == PARDO_F32) {
            float *o = (float *)pardo_tensor_data(dd) + off;
            const float *g = (const float *)pardo_tensor_data(dy) + j * jb.slice;
            for (int64_t k = 0; k < jb.slice; k++) o[k] += g[k];
        } else {
            double *o = (double *)pardo_tensor_data(dd) + off;
            const double *g = (const double *)pardo_tensor_data(dy) + j * jb.slice;
            for (int64_t k = 0; k < jb.slice; k++) o[k] += g[k];
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_gather_nd_grad = {
    .type = "gather_nd_grad",
    .doc = "gradient of gather_nd: dY's slices scatter-added into zeros of data's shape",
    .inputs = ix_grad_in,
    .n_inputs = 4,
    .outputs = ix_grad_out,
    .n_outputs = 2,
    .attrs = gnd_attrs,
    .n_attrs = 1,
    .infer = gnd_grad_infer,
    .cpu = gnd_grad_cpu,
};

static const pardo_arg_def snd_in[] = {
    {"data", "tensor to update (any dtype), rank >= 1", false, false},
    {"indices", "int32 or int64 [..., m]: tuples indexing data's first m dims", false, false},
    {"updates", "data's dtype, indices.shape[:-1] + data.shape[m:]", false, false},
};
static const pardo_arg_def snd_out[] = {{"Y", "data with the slices written or combined in; data's type", false, false}};

static int snd_infer(pardo_infer_ctx *ctx) {
    int64_t b;
    sc_reduction red;
    int rc = sc_reduction_get(ctx->op, &red, ctx->st);
    if (rc == PARDO_OK) rc = sc_check_reduction(red, ctx->in[0]->dtype, ctx->st);
    if (rc == PARDO_OK) rc = nd_check(ctx->op, ctx->in[0], ctx->in[1], ctx->in[2], &b, &ctx->out[0], ctx->st);
    return rc;
}

static int snd_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *d = ctx->in[0], *ix = ctx->in[1], *u = ctx->in[2];
    pardo_type td = pardo_tensor_type(d), ti = pardo_tensor_type(ix), tu = pardo_tensor_type(u), ty;
    sc_reduction red;
    int64_t b;
    ix_job jb;
    int rc = sc_reduction_get(ctx->op, &red, ctx->st);
    if (rc == PARDO_OK) rc = sc_check_reduction(red, d->dtype, ctx->st);
    if (rc == PARDO_OK) rc = nd_check(ctx->op, &td, &ti, &tu, &b, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    ix_job_init(&jb, "scatter_nd", d, ix);
    nd_job_init(&jb, 0);
    if ((rc = ix_check_all(&jb, true, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, d->dtype, d->ndim, d->shape);
    if (!y) return ctx->st->code;
    void *yd = pardo_tensor_data(y);
    memcpy(yd, pardo_tensor_data(d), (size_t)d->numel * pardo_dtype_size(d->dtype));
    int64_t off;
    for (int64_t j = 0; j < jb.rows; j++) {
        nd_offset(&jb, j, &off, ctx->st);
        sc_apply(d->dtype, red, yd, off, pardo_tensor_data(u), j * jb.slice, jb.slice);
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_scatter_nd = {
    .type = "scatter_nd",
    .doc = "data with the slices of updates written (or added, multiplied, maxed, mined) at the index tuples "
           "(ONNX ScatterND)",
    .inputs = snd_in,
    .n_inputs = 3,
    .outputs = snd_out,
    .n_outputs = 1,
    .attrs = snd_attrs,
    .n_attrs = 1,
    .infer = snd_infer,
    .cpu = snd_cpu,
};
