/* softmax.c - softmax along one axis (float32, float64; the row max is
 * subtracted first, so large logits do not overflow) and
 * softmax_cross_entropy: logits [N, C] against int32/int64 class labels [N],
 * each row's loss log(sum_j exp(x_j)) - x_label computed with log-sum-exp in
 * double, reduced by attr reduction ("mean", "sum" or "none"). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "op.h"

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
static const pardo_dtype label_dtypes[] = {PARDO_I32, PARDO_I64};

/* ---- softmax ---- */

static const pardo_arg_def x_in[] = {{"X", "input tensor (float32 or float64), rank >= 1", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "softmax of X along axis, X's dtype and shape", false, false}};
static const pardo_attr_def softmax_attrs[] = {
    {"axis", PARDO_ATTR_INT, "-1", "axis to normalise along, negative from the end"},
};

static int softmax_axis(const pardo_op *op, int ndim, int *axis, pardo_status *st) {
    int64_t a;
    int rc = pardo_attr_int(op, "axis", -1, &a, st);
    if (rc != PARDO_OK) return rc;
    return pardo_normalize_axis(a, ndim, "axis", axis, st);
}

static int softmax_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    int axis, rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (x->ndim == 0) return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is a scalar, expected rank >= 1");
    if (x->ndim > 0 && (rc = softmax_axis(ctx->op, x->ndim, &axis, ctx->st)) != PARDO_OK) return rc;
    ctx->out[0] = *x;
    return PARDO_OK;
}

typedef void (*softmax_fn)(const void *x, void *y, int64_t outer, int64_t n, int64_t inner);

/* Defines NAME: softmax of x (type T) viewed as [outer, n, inner] along the
 * middle dim; exp in T, the sum in double. */
#define SOFTMAX_KERNEL(NAME, T, EXP)                                                                                   \
    static void NAME(const void *vx, void *vy, int64_t outer, int64_t n, int64_t inner) {                              \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        for (int64_t o = 0; o < outer; o++)                                                                            \
            for (int64_t i = 0; i < inner; i++) {                                                                      \
                const T *px = x + o * n * inner + i;                                                                   \
                T *py = y + o * n * inner + i;                                                                         \
                T mx = px[0];                                                                                          \
                for (int64_t k = 1; k < n; k++)                                                                        \
                    if (px[k * inner] > mx) mx = px[k * inner];                                                        \
                double sum = 0;                                                                                        \
                for (int64_t k = 0; k < n; k++) {                                                                      \
                    const T e = EXP(px[k * inner] - mx);                                                               \
                    py[k * inner] = e;                                                                                 \
                    sum += (double)e;                                                                                  \
                }                                                                                                      \
                const T inv = (T)(1.0 / sum);                                                                          \
                for (int64_t k = 0; k < n; k++) py[k * inner] *= inv;                                                  \
            }                                                                                                          \
    }

SOFTMAX_KERNEL(softmax_f32, float, expf)
SOFTMAX_KERNEL(softmax_f64, double, exp)

static int softmax_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_dtype_is_float(x->dtype) || x->ndim < 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE,
                            "input 0 'X' is %s of rank %d, expected float32 or float64 of rank >= 1",
                            pardo_dtype_name(x->dtype), x->ndim);
    int axis, rc = softmax_axis(ctx->op, x->ndim, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    softmax_fn f = x->dtype == PARDO_F32 ? softmax_f32 : softmax_f64;
    if (x->numel > 0) f(pardo_tensor_data(x), pardo_tensor_data(y), outer, x->shape[axis], inner);
    return PARDO_OK;
}

const pardo_op_def pardo_op_softmax = {
    .type = "softmax",
    .doc = "Y = exp(X) / sum(exp(X)) along axis (max subtracted first)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = softmax_attrs,
    .n_attrs = 1,
    .infer = softmax_infer,
    .cpu = softmax_cpu,
};

/* ---- softmax_cross_entropy ---- */

static const pardo_arg_def sce_in[] = {
    {"logits", "unnormalised scores [N, C] (float32 or float64)", false, false},
    {"labels", "class index per row [N] (int32 or int64), each in [0, C)", false, false},
};
static const pardo_arg_def sce_out[] = {
    {"loss", "mean or sum of the row losses [], or each row's loss [N] (reduction none)", false, false},
};
static const pardo_attr_def sce_attrs[] = {
    {"reduction", PARDO_ATTR_STRING, "\"mean\"", "\"mean\" (0 for N = 0), \"sum\" or \"none\""},
};

typedef enum sce_reduction { SCE_MEAN, SCE_SUM, SCE_NONE } sce_reduction;

static int sce_reduction_get(const pardo_op *op, sce_reduction *out, pardo_status *st) {
    const char *s;
    int rc = pardo_attr_string(op, "reduction", "mean", &s, st);
    if (rc != PARDO_OK) return rc;
    if (strcmp(s, "mean") == 0) *out = SCE_MEAN;
    else if (strcmp(s, "sum") == 0) *out = SCE_SUM;
    else if (strcmp(s, "none") == 0) *out = SCE_NONE;
    else return pardo_errorf(st, PARDO_EINVAL, "attr 'reduction' is \"%s\", expected \"mean\", \"sum\" or \"none\"", s);
    return PARDO_OK;
}

static int sce_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *l = ctx->in[1];
    sce_reduction red;
    char sx[128], sl[128];
    int rc = sce_reduction_get(ctx->op, &red, ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'logits'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(l, "input 1 'labels'", label_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (x->ndim >= 0 && x->ndim != 2)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'logits' has shape %s, expected [N, C]",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    if (l->ndim >= 0 && l->ndim != 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'labels' has shape %s, expected [N]",
                            pardo_shape_str(l->ndim, l->shape, sl, sizeof sl));
    int64_t nx = x->ndim == 2 ? x->shape[0] : -1, nl = l->ndim == 1 ? l->shape[0] : -1;
    if (nx >= 0 && nl >= 0 && nx != nl)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "logits %s and labels %s disagree on N",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            pardo_shape_str(l->ndim, l->shape, sl, sizeof sl));
    pardo_type *y = &ctx->out[0];
    y->dtype = x->dtype;
    y->ndim = red == SCE_NONE ? 1 : 0;
    if (red == SCE_NONE) y->shape[0] = nx >= 0 ? nx : nl;
    return PARDO_OK;
}

/* Defines NAME: per-row losses of logits x (type T) [n, c] against labels
 * (int32 or int64), into y ([n] when red is SCE_NONE, else one value).
 * PARDO_ERUNTIME for a label outside [0, c). */
#define SCE_KERNEL(NAME, T)                                                                                            \
    static int NAME(const void *vx, const void *labels, bool labels64, int64_t n, int64_t c, sce_reduction red,        \
                    void *vy, pardo_status *st) {                                                                      \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        double total = 0;                                                                                              \
        for (int64_t r = 0; r < n; r++) {                                                                              \
            const int64_t lab = labels64 ? ((const int64_t *)labels)[r] : ((const int32_t *)labels)[r];                \
            if (lab < 0 || lab >= c)                                                                                   \
                return pardo_errorf(st, PARDO_ERUNTIME,                                                                \
                                    "row %lld has label %lld, expected a class in "                                    \
                                    "[0, %lld)",                                                                       \
                                    (long long)r, (long long)lab, (long long)c);                                       \
            const T *row = x + r * c;                                                                                  \
            double mx = (double)row[0];                                                                                \
            for (int64_t j = 1; j < c; j++)                                                                            \
                if ((double)row[j] > mx) mx = (double)row[j];                                                          \
            double s = 0;                                                                                              \
            for (int64_t j = 0; j < c; j++) s += exp((double)row[j] - mx);                                             \
            const double loss = log(s) + mx - (double)row[lab];                                                        \
            if (red == SCE_NONE) y[r] = (T)loss;                                                                       \
            else total += loss;                                                                                        \
        }                                                                                                              \
        if (red == SCE_SUM) y[0] = (T)total;                                                                           \
        else if (red == SCE_MEAN) y[0] = (T)(n > 0 ? total / (double)n : 0.0);                                         \
        return PARDO_OK;                                                                                               \
    }

SCE_KERNEL(sce_f32, float)
SCE_KERNEL(sce_f64, double)

static int sce_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *l = ctx->in[1];
    sce_reduction red;
    char sx[128], sl[128];
    int rc = sce_reduction_get(ctx->op, &red, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (!pardo_dtype_is_float(x->dtype) || !pardo_dtype_is_int(l->dtype) || x->ndim != 2 || l->ndim != 1 ||
        x->shape[0] != l->shape[0])
        return pardo_errorf(ctx->st, PARDO_ESHAPE,
                            "logits %s %s and labels %s %s, expected float [N, C] and int [N]",
                            pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            pardo_dtype_name(l->dtype), pardo_shape_str(l->ndim, l->shape, sl, sizeof sl));
    const int64_t n = x->shape[0], c = x->shape[1];
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, red == SCE_NONE ? 1 : 0, &n);
    if (!y) return ctx->st->code;
    return (x->dtype == PARDO_F32 ? sce_f32 : sce_f64)(pardo_tensor_data(x), pardo_tensor_data(l),
                                                       l->dtype == PARDO_I64, n, c, red, pardo_tensor_data(y), ctx->st);
}

const pardo_op_def pardo_op_softmax_cross_entropy = {
    .type = "softmax_cross_entropy",
    .doc = "loss = -log(softmax(logits)[label]) per row, reduced by mean (default), sum or none",
    .inputs = sce_in,
    .n_inputs = 2,
    .outputs = sce_out,
    .n_outputs = 1,
    .attrs = sce_attrs,
    .n_attrs = 1,
    .infer = sce_infer,
    .cpu = sce_cpu,
};
