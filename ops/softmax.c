/* softmax.c - softmax and log_softmax along one axis (float32, float64; the
 * max along the axis is subtracted first, so large logits do not overflow)
 * and softmax_cross_entropy: logits [N, C] against int32/int64 class labels
 * [N], each row's loss log(sum_j exp(x_j)) - x_label computed with
 * log-sum-exp in double, reduced by attr reduction ("mean", "sum" or
 * "none"). Each has its gradient op T_grad (float32, float64; the labels get
 * no gradient). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernel_util.h"
#include "kernels.h"
#include "op.h"
#include "vmath.h"

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
static const pardo_dtype label_dtypes[] = {PARDO_I32, PARDO_I64};

/* ---- softmax ---- */

static const pardo_arg_def x_in[] = {{"X", "input tensor (float32 or float64), rank >= 1", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "softmax of X along axis, X's dtype and shape", false, false}};
/* softmax and softmax_grad take both; log_softmax and its gradient the first. */
static const pardo_attr_def softmax_attrs[] = {
    {"axis", PARDO_ATTR_INT, "-1", "axis to normalise along, negative from the end"},
    {"scale", PARDO_ATTR_FLOAT, "1.0", "X is multiplied by it first: Y = softmax(scale * X) (attention's "
                                       "1/sqrt(d); the fusion pass folds a scale op into it)"},
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

/* One softmax-family op's work: X and Y (or, for the gradients, Y, dY and
 * dX) viewed as [outer, n, inner] around the axis, and the scale (softmax's
 * attr; 1 for the others). Rows are split over the threads by outer index. */
typedef struct sm_job {
    const void *x, *y, *dy; // inputs (borrowed; unused ones NULL)
    void *out;              // Y, or dX
    int64_t outer, n, inner;
    pardo_dtype dtype;      // float32 or float64
    double scale;           // softmax's attr scale (1 for log_softmax)
    bool log_form;          // log_softmax (its gradient), else softmax
} sm_job;

/* Lanes of the contiguous float32 rows: a row's max and sum go lane by lane
 * and then over the lanes in a fixed order, so the compiler can vectorise
 * them without reassociating anything (and the bits do not depend on the
 * vector width the CPU has). */
#define SM_LANES 16

/* Softmax of float32 rows [o0, o1) of n contiguous elements (inner 1): the
 * max, then e = exp(scale x - max) through ops/vmath.h with the sum in
 * double, then y = e * (1 / sum). */
PARDO_SIMD_CLONES static void softmax_rows_f32(const float *restrict x, float *restrict y, int64_t o0, int64_t o1,
                                               int64_t n, float scale) {
    const int64_t nv = n / SM_LANES * SM_LANES;
    for (int64_t o = o0; o < o1; o++) {
        const float *xr = x + o * n;
        float *yr = y + o * n;
        float lane_max[SM_LANES];
        for (int l = 0; l < SM_LANES; l++) lane_max[l] = -INFINITY;
        for (int64_t j = 0; j < nv; j += SM_LANES)
            for (int l = 0; l < SM_LANES; l++) {
                const float v = xr[j + l] * scale;
                lane_max[l] = v > lane_max[l] ? v : lane_max[l];
            }
        float mx = -INFINITY;
        for (int l = 0; l < SM_LANES; l++) mx = lane_max[l] > mx ? lane_max[l] : mx;
        for (int64_t j = nv; j < n; j++) mx = xr[j] * scale > mx ? xr[j] * scale : mx;
        double lane_sum[SM_LANES];
        for (int l = 0; l < SM_LANES; l++) lane_sum[l] = 0;
        for (int64_t j = 0; j < nv; j += SM_LANES)
            for (int l = 0; l < SM_LANES; l++) {
                const float e = pardo_vexpf(xr[j + l] * scale - mx);
                yr[j + l] = e;
                lane_sum[l] += (double)e;
            }
        double sum = 0;
        for (int l = 0; l < SM_LANES; l++) sum += lane_sum[l];
        for (int64_t j = nv; j < n; j++) {
            const float e = pardo_vexpf(xr[j] * scale - mx);
            yr[j] = e;
            sum += (double)e;
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < n; j++) yr[j] *= inv;
    }
}

/* Defines NAME: softmax of x (type T) for outer indices [o0, o1) along the
 * middle dim of [outer, n, inner], any inner; exp in T, the sum in double. */
#define SOFTMAX_KERNEL(NAME, T, EXP)                                                                                   \
    static void NAME(const sm_job *jb, int64_t o0, int64_t o1) {                                                       \
        const T *x = jb->x, scale = (T)jb->scale;                                                                      \
        T *y = jb->out;                                                                                                \
        const int64_t n = jb->n, inner = jb->inner;                                                                    \
        for (int64_t o = o0; o < o1; o++)                                                                              \
            for (int64_t i = 0; i < inner; i++) {                                                                      \
                const T *px = x + o * n * inner + i;                                                                   \
                T *py = y + o * n * inner + i;                                                                         \
                T mx = px[0] * scale;                                                                                  \
                for (int64_t k = 1; k < n; k++)                                                                        \
                    if (px[k * inner] * scale > mx) mx = px[k * inner] * scale;                                        \
                double sum = 0;                                                                                        \
                for (int64_t k = 0; k < n; k++) {                                                                      \
                    const T e = EXP(px[k * inner] * scale - mx);                                                       \
                    py[k * inner] = e;                                                                                 \
                    sum += (double)e;                                                                                  \
                }                                                                                                      \
                const T inv = (T)(1.0 / sum);                                                                          \
                for (int64_t k = 0; k < n; k++) py[k * inner] *= inv;                                                  \
            }                                                                                                          \
    }

SOFTMAX_KERNEL(softmax_strided_f32, float, pardo_vexpf)
SOFTMAX_KERNEL(softmax_f64, double, exp)

/* Defines NAME: log_softmax of x (type T) for outer indices [o0, o1) along
 * the middle dim, y = x - max - log(sum(exp(x - max))) in double. */
#define LOG_SOFTMAX_KERNEL(NAME, T)                                                                                    \
    static void NAME(const sm_job *jb, int64_t o0, int64_t o1) {                                                       \
        const T *x = jb->x;                                                                                            \
        T *y = jb->out;                                                                                                \
        const int64_t n = jb->n, inner = jb->inner;                                                                    \
        for (int64_t o = o0; o < o1; o++)                                                                              \
            for (int64_t i = 0; i < inner; i++) {                                                                      \
                const T *px = x + o * n * inner + i;                                                                   \
                T *py = y + o * n * inner + i;                                                                         \
                double mx = (double)px[0];                                                                             \
                for (int64_t k = 1; k < n; k++)                                                                        \
                    if ((double)px[k * inner] > mx) mx = (double)px[k * inner];                                        \
                double sum = 0;                                                                                        \
                for (int64_t k = 0; k < n; k++) sum += exp((double)px[k * inner] - mx);                                \
                const double lse = mx + log(sum);                                                                      \
                for (int64_t k = 0; k < n; k++) py[k * inner] = (T)((double)px[k * inner] - lse);                      \
            }                                                                                                          \
    }

LOG_SOFTMAX_KERNEL(log_softmax_f32, float)
LOG_SOFTMAX_KERNEL(log_softmax_f64, double)

/* X (input 0) seen as [outer, n, inner] around the op's axis, checked to be
 * float32 or float64 of rank >= 1. */
static int axis_view(pardo_kernel_ctx *ctx, const pardo_tensor *x, int64_t *outer, int64_t *n, int64_t *inner) {
    if (!pardo_dtype_is_float(x->dtype) || x->ndim < 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE,
                            "input 0 'X' is %s of rank %d, expected float32 or float64 of rank >= 1",
                            pardo_dtype_name(x->dtype), x->ndim);
    int axis, rc = softmax_axis(ctx->op, x->ndim, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) *inner *= x->shape[d];
    *n = x->shape[axis];
    return PARDO_OK;
}

/* The scale attr of softmax and softmax_grad: Y = softmax(scale * X). */
static int softmax_scale(const pardo_op *op, double *scale, pardo_status *st) {
    int rc = pardo_attr_float(op, "scale", 1.0, scale, st);
    if (rc == PARDO_OK && !isfinite(*scale))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'scale' is %g, expected a finite number", *scale);
    return rc;
}

static void softmax_range(void *arg, int64_t o0, int64_t o1) {
    const sm_job *jb = arg;
    if (jb->log_form) (jb->dtype == PARDO_F32 ? log_softmax_f32 : log_softmax_f64)(jb, o0, o1);
    else if (jb->dtype == PARDO_F64) softmax_f64(jb, o0, o1);
    else if (jb->inner == 1) softmax_rows_f32(jb->x, jb->out, o0, o1, jb->n, (float)jb->scale);
    else softmax_strided_f32(jb, o0, o1);
}

static int softmax_run(pardo_kernel_ctx *ctx, bool log_form) {
    pardo_tensor *x = ctx->in[0];
    sm_job jb = {.x = pardo_tensor_data(x), .dtype = x->dtype, .scale = 1.0, .log_form = log_form};
    int rc = axis_view(ctx, x, &jb.outer, &jb.n, &jb.inner);
    if (rc == PARDO_OK && !log_form) rc = softmax_scale(ctx->op, &jb.scale, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    if (x->numel == 0) return PARDO_OK;
    jb.out = pardo_tensor_data(y);
    return pardo_run_rows(ctx, jb.outer, jb.n * jb.inner, softmax_range, &jb);
}

static int softmax_cpu(pardo_kernel_ctx *ctx) { return softmax_run(ctx, false); }

static int softmax_scaled_infer(pardo_infer_ctx *ctx) {
    double scale;
    int rc = softmax_infer(ctx);
    return rc == PARDO_OK ? softmax_scale(ctx->op, &scale, ctx->st) : rc;
}
static int log_softmax_cpu(pardo_kernel_ctx *ctx) { return softmax_run(ctx, true); }

const pardo_op_def pardo_op_softmax = {
    .type = "softmax",
    .doc = "Y = exp(scale X) / sum(exp(scale X)) along axis (max subtracted first; float32, float64)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = softmax_attrs,
    .n_attrs = 2,
    .infer = softmax_scaled_infer,
    .cpu = softmax_cpu,
    .cuda = pardo_cuda_softmax,
    .halves_in_f32 = true,
    .grad = pardo_grad_standard,
};

static const pardo_arg_def log_y_out[] = {{"Y", "log_softmax of X along axis, X's dtype and shape", false, false}};

const pardo_op_def pardo_op_log_softmax = {
    .type = "log_softmax",
    .doc = "Y = X - log(sum(exp(X))) along axis, computed stably with the max subtracted (float32, float64)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = log_y_out,
    .n_outputs = 1,
    .attrs = softmax_attrs,
    .n_attrs = 1,
    .infer = softmax_infer,
    .cpu = log_softmax_cpu,
    .cuda = pardo_cuda_log_softmax,
    .halves_in_f32 = true,
    .grad = pardo_grad_standard,
};

/* ---- softmax_grad, log_softmax_grad ---- */

static const pardo_arg_def sm_grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def sm_grad_out[] = {{"dX", "gradient of X, X's dtype and shape", true, false}};

static int sm_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) rc = softmax_infer(ctx);
    if (rc != PARDO_OK) return rc;
    if (y->dtype != x->dtype || (dy && dy->dtype != x->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs 'Y' and 'dY' have dtypes %s and %s, expected %s like 'X'",
                            pardo_dtype_name(y->dtype), dy ? pardo_dtype_name(dy->dtype) : "(absent)",
                            pardo_dtype_name(x->dtype));
    return PARDO_OK;
}

/* Defines NAME: the gradient for outer indices [o0, o1) along the middle
 * dim of [outer, n, inner] (type T), from Y and dY: softmax dX = scale Y
 * (dY - sum(dY Y)); log_softmax (log_form) dX = dY - exp(Y) sum(dY). Sums
 * in double, SM_LANES at a time where inner is 1 (then summed in a fixed
 * order), so that float32 rows vectorise. */
#define SM_GRAD_KERNEL(NAME, T)                                                                                        \
    PARDO_SIMD_CLONES static void NAME(const sm_job *jb, int64_t o0, int64_t o1) {                                     \
        const T *restrict y = jb->y, *restrict dy = jb->dy;                                                            \
        T *restrict dx = jb->out;                                                                                      \
        const int64_t n = jb->n, inner = jb->inner;                                                                    \
        const bool log_form = jb->log_form;                                                                            \
        const T scale = (T)jb->scale;                                                                                  \
        for (int64_t o = o0; o < o1; o++)                                                                              \
            for (int64_t i = 0; i < inner; i++) {                                                                      \
                const int64_t base = o * n * inner + i;                                                                \
                double s = 0;                                                                                          \
                if (inner == 1)                                                                                        \
                    PARDO_LANE_SUM(s, SM_LANES, n,                                                                     \
                                   log_form ? (double)dy[base + j] : (double)dy[base + j] * (double)y[base + j]);      \
                else                                                                                                   \
                    for (int64_t k = 0; k < n; k++) {                                                                  \
                        const int64_t j = base + k * inner;                                                            \
                        s += log_form ? (double)dy[j] : (double)dy[j] * (double)y[j];                                  \
                    }                                                                                                  \
                if (log_form)                                                                                          \
                    for (int64_t k = 0; k < n; k++) {                                                                  \
                        const int64_t j = base + k * inner;                                                            \
                        dx[j] = (T)((double)dy[j] - exp((double)y[j]) * s);                                            \
                    }                                                                                                  \
                else                                                                                                   \
                    for (int64_t k = 0; k < n; k++) {                                                                  \
                        const int64_t j = base + k * inner;                                                            \
                        dx[j] = (T)((double)y[j] * ((double)dy[j] - s)) * scale; /* as softmax_grad, then scale_grad */ \
                    }                                                                                                  \
            }                                                                                                          \
    }

SM_GRAD_KERNEL(sm_grad_f32, float)
SM_GRAD_KERNEL(sm_grad_f64, double)

/* softmax_grad of float32 rows [o0, o1) of n contiguous elements (inner 1): sm_grad_f32's sums and roundings,
 * bit for bit, in unit-stride loops over one row that vectorise (sm_grad_f32's, written for any inner, ran
 * scalar: 4 ns an element on attention's rows of 128). */
PARDO_SIMD_CLONES static void sm_grad_rows_f32(const float *restrict y, const float *restrict dy, float *restrict dx,
                                               int64_t o0, int64_t o1, int64_t n, float scale) {
    for (int64_t o = o0; o < o1; o++) {
        const float *restrict yr = y + o * n, *restrict dyr = dy + o * n;
        float *restrict dxr = dx + o * n;
        double s;
        PARDO_LANE_SUM(s, SM_LANES, n, (double)dyr[j] * (double)yr[j]);
        for (int64_t j = 0; j < n; j++) dxr[j] = (float)((double)yr[j] * ((double)dyr[j] - s)) * scale;
    }
}

static void sm_grad_range(void *arg, int64_t o0, int64_t o1) {
    const sm_job *jb = arg;
    if (jb->dtype == PARDO_F32 && jb->inner == 1 && !jb->log_form)
        sm_grad_rows_f32(jb->y, jb->dy, jb->out, o0, o1, jb->n, (float)jb->scale);
    else
        (jb->dtype == PARDO_F32 ? sm_grad_f32 : sm_grad_f64)(jb, o0, o1);
}

static int sm_grad_run(pardo_kernel_ctx *ctx, bool log_form) {
    pardo_tensor *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    sm_job jb = {.dtype = x->dtype, .scale = 1.0, .log_form = log_form};
    int rc = axis_view(ctx, x, &jb.outer, &jb.n, &jb.inner);
    if (rc == PARDO_OK && !log_form) rc = softmax_scale(ctx->op, &jb.scale, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 1; k < 3; k++) {
        const pardo_tensor *t = k == 1 ? y : dy;
        char s1[128], s2[128];
        if (t && (t->dtype != x->dtype || !pardo_shape_equal(t->ndim, t->shape, x->ndim, x->shape)))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d '%s' is %s %s, expected %s %s like 'X'", k,
                                k == 1 ? "Y" : "dY", pardo_dtype_name(t->dtype),
                                pardo_shape_str(t->ndim, t->shape, s1, sizeof s1), pardo_dtype_name(x->dtype),
                                pardo_shape_str(x->ndim, x->shape, s2, sizeof s2));
    }
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) {
        pardo_tensor_zero(dx);
        return PARDO_OK;
    }
    if (x->numel == 0) return PARDO_OK;
    jb.y = pardo_tensor_data(y);
    jb.dy = pardo_tensor_data(dy);
    jb.out = pardo_tensor_data(dx);
    return pardo_run_rows(ctx, jb.outer, jb.n * jb.inner, sm_grad_range, &jb);
}

static int softmax_grad_cpu(pardo_kernel_ctx *ctx) { return sm_grad_run(ctx, false); }

static int sm_grad_scaled_infer(pardo_infer_ctx *ctx) {
    double scale;
    int rc = sm_grad_infer(ctx);
    return rc == PARDO_OK ? softmax_scale(ctx->op, &scale, ctx->st) : rc;
}
static int log_softmax_grad_cpu(pardo_kernel_ctx *ctx) { return sm_grad_run(ctx, true); }

const pardo_op_def pardo_op_softmax_grad = {
    .type = "softmax_grad",
    .doc = "dX = scale * Y * (dY - sum(dY * Y)) along axis (gradient of softmax; float32, float64)",
    .inputs = sm_grad_in,
    .n_inputs = 3,
    .outputs = sm_grad_out,
    .n_outputs = 1,
    .attrs = softmax_attrs,
    .n_attrs = 2,
    .infer = sm_grad_scaled_infer,
    .cpu = softmax_grad_cpu,
    .cuda = pardo_cuda_softmax_grad,
};

const pardo_op_def pardo_op_log_softmax_grad = {
    .type = "log_softmax_grad",
    .doc = "dX = dY - exp(Y) * sum(dY) along axis (gradient of log_softmax; float32, float64)",
    .inputs = sm_grad_in,
    .n_inputs = 3,
    .outputs = sm_grad_out,
    .n_outputs = 1,
    .attrs = softmax_attrs,
    .n_attrs = 1,
    .infer = sm_grad_infer,
    .cpu = log_softmax_grad_cpu,
    .cuda = pardo_cuda_log_softmax_grad,
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
    .doc = "loss = -log(softmax(logits)[label]) per row, reduced by mean (default), sum or none (float32, float64 "
           "logits; int32, int64 labels)",
    .inputs = sce_in,
    .n_inputs = 2,
    .outputs = sce_out,
    .n_outputs = 1,
    .attrs = sce_attrs,
    .n_attrs = 1,
    .infer = sce_infer,
    .cpu = sce_cpu,
    .cuda = pardo_cuda_softmax_cross_entropy,
    .grad = pardo_grad_standard,
};

/* ---- softmax_cross_entropy_grad ---- */

static const pardo_arg_def sce_grad_in[] = {
    {"logits", "the forward logits [N, C]", false, false},
    {"labels", "the forward labels [N]", false, false},
    {"loss", "the forward loss", false, false},
    {"dloss", "gradient of loss (\"\": zeros)", true, false},
};
static const pardo_arg_def sce_grad_out[] = {
    {"dlogits", "gradient of logits [N, C]", true, false},
    {"dlabels", "labels have no gradient: must be \"\"", true, false},
};

static int sce_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *l = ctx->in[1], *dl = ctx->n_in > 3 ? ctx->in[3] : NULL;
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'logits'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 1, l, "input 1 'labels'", ctx->st);
    if (rc == PARDO_OK) rc = sce_infer(ctx); /* checks attrs, dtypes and shapes; sets out[0] to loss's type */
    if (rc != PARDO_OK) return rc;
    if (dl && dl->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dloss' has dtype %s, expected %s like 'logits'",
                            pardo_dtype_name(dl->dtype), pardo_dtype_name(x->dtype));
    ctx->out[0] = *x;
    if (ctx->n_out > 1) ctx->out[1] = *l;
    return PARDO_OK;
}

enum { SCE_ROW_EXPS = 256 }; /* rows of at most this many classes compute each exp once */

/* Defines NAME: dlogits (type T, [n, c]) = g_r * (softmax(x_r) - onehot(label_r))
 * per row r, g_r the gradient reaching row r's loss (dloss[r] for none,
 * dloss[0] for sum, dloss[0] / n for mean). PARDO_ERUNTIME for a label
 * outside [0, c). */
#define SCE_GRAD_KERNEL(NAME, T)                                                                                       \
    static int NAME(const void *vx, const void *labels, bool labels64, const void *vdl, int64_t n, int64_t c,          \
                    sce_reduction red, void *vdx, pardo_status *st) {                                                  \
        const T *x = vx, *dl = vdl;                                                                                    \
        T *dx = vdx;                                                                                                   \
        for (int64_t r = 0; r < n; r++) {                                                                              \
            const int64_t lab = labels64 ? ((const int64_t *)labels)[r] : ((const int32_t *)labels)[r];                \
            if (lab < 0 || lab >= c)                                                                                   \
                return pardo_errorf(st, PARDO_ERUNTIME, "row %lld has label %lld, expected a class in [0, %lld)",      \
                                    (long long)r, (long long)lab, (long long)c);                                       \
            const double g = red == SCE_NONE ? (double)dl[r] : (double)dl[0] / (red == SCE_MEAN ? (double)n : 1.0);   \
            const T *row = x + r * c;                                                                                  \
            T *drow = dx + r * c;                                                                                      \
            double mx = (double)row[0];                                                                                \
            for (int64_t j = 1; j < c; j++)                                                                            \
                if ((double)row[j] > mx) mx = (double)row[j];                                                          \
            double s = 0, e[SCE_ROW_EXPS]; /* a short row's exps, kept for the second pass (the same values) */     \
            const bool keep = c <= SCE_ROW_EXPS;                                                                       \
            for (int64_t j = 0; j < c; j++) {                                                                          \
                const double ej = exp((double)row[j] - mx);                                                            \
                if (keep) e[j] = ej;                                                                                   \
                s += ej;                                                                                               \
            }                                                                                                          \
            for (int64_t j = 0; j < c; j++)                                                                            \
                drow[j] = (T)(g * ((keep ? e[j] : exp((double)row[j] - mx)) / s - (j == lab ? 1.0 : 0.0)));            \
        }                                                                                                              \
        return PARDO_OK;                                                                                               \
    }

SCE_GRAD_KERNEL(sce_grad_f32, float)
SCE_GRAD_KERNEL(sce_grad_f64, double)

static int sce_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *l = ctx->in[1], *dl = ctx->n_in > 3 ? ctx->in[3] : NULL;
    sce_reduction red;
    char sx[128], sl[128];
    int rc = sce_reduction_get(ctx->op, &red, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (pardo_kernel_wants_output(ctx, 1))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output 1 asks for the gradient of the labels, which have none");
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_dtype_is_float(x->dtype) || !pardo_dtype_is_int(l->dtype) || x->ndim != 2 || l->ndim != 1 ||
        x->shape[0] != l->shape[0])
        return pardo_errorf(ctx->st, PARDO_ESHAPE,
                            "logits %s %s and labels %s %s, expected float [N, C] and int [N]",
                            pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            pardo_dtype_name(l->dtype), pardo_shape_str(l->ndim, l->shape, sl, sizeof sl));
    const int64_t n = x->shape[0], c = x->shape[1];
    if (dl && (dl->dtype != x->dtype || dl->numel != (red == SCE_NONE ? n : 1)))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dloss' is %s %s, expected %s with %lld elements like loss",
                            pardo_dtype_name(dl->dtype), pardo_shape_str(dl->ndim, dl->shape, sl, sizeof sl),
                            pardo_dtype_name(x->dtype), (long long)(red == SCE_NONE ? n : 1));
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, 2, x->shape);
    if (!dx) return ctx->st->code;
    if (!dl) {
        pardo_tensor_zero(dx);
        return PARDO_OK;
    }
    return (x->dtype == PARDO_F32 ? sce_grad_f32 : sce_grad_f64)(pardo_tensor_data(x), pardo_tensor_data(l),
                                                                 l->dtype == PARDO_I64, pardo_tensor_data(dl), n, c,
                                                                 red, pardo_tensor_data(dx), ctx->st);
}

const pardo_op_def pardo_op_softmax_cross_entropy_grad = {
    .type = "softmax_cross_entropy_grad",
    .doc = "dlogits = g * (softmax(logits) - onehot(labels)), g = dloss per row (none), dloss (sum) or dloss / N "
           "(mean); labels get none (gradient of softmax_cross_entropy; float32, float64)",
    .inputs = sce_grad_in,
    .n_inputs = 4,
    .outputs = sce_grad_out,
    .n_outputs = 2,
    .attrs = sce_attrs,
    .n_attrs = 1,
    .infer = sce_grad_infer,
    .cpu = sce_grad_cpu,
    .cuda = pardo_cuda_softmax_cross_entropy_grad,
};
