/* loss.c - mse_loss and accuracy.
 *
 * mse_loss: prediction and target of the same dtype (float32 or float64) and
 * shape (no broadcasting), loss = (prediction - target)^2 elementwise,
 * reduced by attr reduction: "mean" (default; 0 for no elements), "sum" or
 * "none" (the elementwise losses, the inputs' shape), as torch's MSELoss.
 * Sums run in double. mse_loss_grad gives both inputs' gradients.
 *
 * accuracy: logits [N, C] (float) and labels [N] (int32 or int64) -> a
 * float32 scalar, the fraction of rows whose argmax (the first maximum)
 * equals the label; 0 when N = 0. A label outside [0, C) is PARDO_ERUNTIME,
 * as in softmax_cross_entropy. Not differentiable. */
#include <string.h>

#include "nn_util.h"
#include "kernel_util.h"
#include "kernels.h"
#include "op.h"

/* ---- mse_loss ---- */

typedef enum mse_reduction { MSE_MEAN, MSE_SUM, MSE_NONE } mse_reduction;

static const pardo_attr_def mse_attrs[] = {
    {"reduction", PARDO_ATTR_STRING, "\"mean\"", "\"mean\" (0 for no elements), \"sum\" or \"none\""},
};

static int mse_reduction_get(const pardo_op *op, mse_reduction *out, pardo_status *st) {
    const char *s;
    int rc = pardo_attr_string(op, "reduction", "mean", &s, st);
    if (rc != PARDO_OK) return rc;
    if (strcmp(s, "mean") == 0) *out = MSE_MEAN;
    else if (strcmp(s, "sum") == 0) *out = MSE_SUM;
    else if (strcmp(s, "none") == 0) *out = MSE_NONE;
    else return pardo_errorf(st, PARDO_EINVAL, "attr 'reduction' is \"%s\", expected \"mean\", \"sum\" or \"none\"", s);
    return PARDO_OK;
}

/* Checks the inputs and the attr; fills the loss type into y (may be NULL). */
static int mse_check(const pardo_op *op, const pardo_type *p, const pardo_type *t, mse_reduction *red, pardo_type *y,
                     pardo_status *st) {
    int rc = mse_reduction_get(op, red, st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_float(p, "input 0 'prediction'", st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_same(t, "input 1 'target'", p, "input 0 'prediction'", st);
    if (rc != PARDO_OK) return rc;
    if (y) {
        if (*red == MSE_NONE) {
            *y = *p;
        } else {
            y->dtype = p->dtype;
            y->ndim = 0;
        }
    }
    return PARDO_OK;
}

/* Lanes of mse_loss's sum. */
#define MSE_LANES 8

/* Defines mse_fwd_SUF (the loss) and mse_bwd_SUF (dp and dt, either NULL
 * when not wanted; dloss NULL means zeros, handled by the caller) for
 * element type T. */
#define MSE_KERNELS(SUF, T)                                                                                            \
    PARDO_SIMD_CLONES static void mse_fwd_##SUF(int64_t n, const void *vp, const void *vt, mse_reduction red,         \
                                                void *vy) {                                                            \
        const T *restrict p = vp, *restrict t = vt;                                                                    \
        T *restrict y = vy;                                                                                            \
        if (red == MSE_NONE) {                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const double d = (double)p[i] - (double)t[i];                                                          \
                y[i] = (T)(d * d);                                                                                     \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        double s; /* in lanes: it vectorises */                                                                        \
        PARDO_LANE_SUM(s, MSE_LANES, n, ((double)p[j] - (double)t[j]) * ((double)p[j] - (double)t[j]));               \
        if (red == MSE_SUM) y[0] = (T)s;                                                                               \
        else y[0] = (T)(n > 0 ? s / (double)n : 0.0);                                                                  \
    }                                                                                                                  \
    PARDO_SIMD_CLONES static void mse_bwd_##SUF(int64_t n, const void *vp, const void *vt, mse_reduction red,         \
                                                const void *vdl, void *vdp, void *vdt) {                               \
        const T *restrict p = vp, *restrict t = vt, *restrict dl = vdl;                                                \
        T *restrict dp = vdp, *restrict dt = vdt;                                                                      \
        const double k = red == MSE_NONE   ? 0.0 /* dL is per element (and empty with the inputs) */                 \
                         : red == MSE_MEAN ? (n > 0 ? 2.0 * (double)dl[0] / (double)n : 0.0)                           \
                                           : 2.0 * (double)dl[0];                                                      \
        /* one loop per case, so that each vectorises */                                                               \
        if (red == MSE_NONE)                                                                                           \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const double g = ((double)p[i] - (double)t[i]) * (2.0 * (double)dl[i]);                                \
                if (dp) dp[i] = (T)g;                                                                                  \
                if (dt) dt[i] = (T)-g;                                                                                 \
            }                                                                                                          \
        else if (dp && dt)                                                                                             \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const double g = ((double)p[i] - (double)t[i]) * k;                                                    \
                dp[i] = (T)g;                                                                                          \
                dt[i] = (T)-g;                                                                                         \
            }                                                                                                          \
        else if (dp)                                                                                                   \
            for (int64_t i = 0; i < n; i++) dp[i] = (T)(((double)p[i] - (double)t[i]) * k);                            \
        else if (dt)                                                                                                   \
            for (int64_t i = 0; i < n; i++) dt[i] = (T) - (((double)p[i] - (double)t[i]) * k);                          \
    }

MSE_KERNELS(f32, float)
MSE_KERNELS(f64, double)

static const pardo_arg_def mse_in[] = {
    {"prediction", "float32 or float64, any shape", false, false},
    {"target", "prediction's dtype and shape", false, false},
};
static const pardo_arg_def mse_out[] = {
    {"loss", "mean or sum of the squared errors [], or each one (reduction none, the inputs' shape)", false, false},
};

static int mse_infer(pardo_infer_ctx *ctx) {
    mse_reduction red;
    return mse_check(ctx->op, ctx->in[0], ctx->in[1], &red, &ctx->out[0], ctx->st);
}

static int mse_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *p = ctx->in[0], *t = ctx->in[1];
    pardo_type tp = pardo_tensor_type(p), tt = pardo_tensor_type(t), ty;
    mse_reduction red;
    int rc = mse_check(ctx->op, &tp, &tt, &red, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    (p->dtype == PARDO_F32 ? mse_fwd_f32 : mse_fwd_f64)(p->numel, pardo_tensor_data(p), pardo_tensor_data(t), red,
                                                        pardo_tensor_data(y));
    return PARDO_OK;
}

const pardo_op_def pardo_op_mse_loss = {
    .type = "mse_loss",
    .doc = "mean squared error: (prediction - target)^2 reduced by mean (default), sum or none",
    .inputs = mse_in,
    .n_inputs = 2,
    .outputs = mse_out,
    .n_outputs = 1,
    .attrs = mse_attrs,
    .n_attrs = 1,
    .infer = mse_infer,
    .cpu = mse_cpu,
    .cuda = pardo_cuda_mse_loss,
    .grad = pardo_grad_standard,
};

static const pardo_arg_def mse_grad_in[] = {
    {"prediction", "the forward prediction", false, false},
    {"target", "the forward target", false, false},
    {"loss", "the forward loss (not read)", true, false},
    {"dloss", "gradient of the loss (\"\": zeros)", true, false},
};
static const pardo_arg_def mse_grad_out[] = {
    {"dprediction", "2 (prediction - target) dloss, / N for mean", true, false},
    {"dtarget", "-dprediction", true, false},
};

static int mse_grad_check(const pardo_op *op, const pardo_type *p, const pardo_type *t, const pardo_type *dl,
                          mse_reduction *red, pardo_status *st) {
    pardo_type ty;
    int rc = mse_check(op, p, t, red, &ty, st);
    if (rc == PARDO_OK && dl) rc = pardo_nn_expect_same(dl, "input 3 'dloss'", &ty, "the loss of mse_loss", st);
    return rc;
}

static int mse_grad_infer(pardo_infer_ctx *ctx) {
    mse_reduction red;
    int rc = mse_grad_check(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 3), &red, ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = ctx->out[1] = *ctx->in[0];
    return rc;
}

static int mse_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *p = ctx->in[0], *t = ctx->in[1], *dl = pardo_nn_in(ctx, 3), *out[2] = {NULL, NULL};
    pardo_type tp = pardo_tensor_type(p), tt = pardo_tensor_type(t), tdl;
    if (dl) tdl = pardo_tensor_type(dl);
    mse_reduction red;
    int rc = mse_grad_check(ctx->op, &tp, &tt, dl ? &tdl : NULL, &red, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < 2; k++)
        if (pardo_kernel_wants_output(ctx, k) && !(out[k] = pardo_nn_zeros(ctx, k, p->dtype, p->ndim, p->shape)))
            return ctx->st->code;
    if (dl && (out[0] || out[1]))
        (p->dtype == PARDO_F32 ? mse_bwd_f32 : mse_bwd_f64)(
            p->numel, pardo_tensor_data(p), pardo_tensor_data(t), red, pardo_tensor_data(dl),
            out[0] ? pardo_tensor_data(out[0]) : NULL, out[1] ? pardo_tensor_data(out[1]) : NULL);
    return PARDO_OK;
}

const pardo_op_def pardo_op_mse_loss_grad = {
    .type = "mse_loss_grad",
    .doc = "gradients of mse_loss for prediction and target",
    .inputs = mse_grad_in,
    .n_inputs = 4,
    .outputs = mse_grad_out,
    .n_outputs = 2,
    .attrs = mse_attrs,
    .n_attrs = 1,
    .infer = mse_grad_infer,
    .cpu = mse_grad_cpu,
    .cuda = pardo_cuda_mse_loss_grad,
};

/* ---- accuracy ---- */

static const pardo_dtype label_dtypes[] = {PARDO_I32, PARDO_I64};

static const pardo_arg_def acc_in[] = {
    {"logits", "scores [N, C] (float32 or float64)", false, false},
    {"labels", "class per row [N] (int32 or int64), each in [0, C)", false, false},
};
static const pardo_arg_def acc_out[] = {
    {"accuracy", "float32 [], fraction of rows whose argmax is the label", false, false}};

static int acc_check(const pardo_type *x, const pardo_type *l, pardo_status *st) {
    char sx[128], sl[128];
    int rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'logits'", st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(x, "input 0 'logits'", 2, "[N, C]", st)) != PARDO_OK ||
        (rc = pardo_expect_dtype(l, "input 1 'labels'", label_dtypes, 2, st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(l, "input 1 'labels'", 1, "[N]", st)) != PARDO_OK)
        return rc;
    const int64_t nx = x->ndim == 2 ? x->shape[0] : -1, nl = l->ndim == 1 ? l->shape[0] : -1;
    if (nx >= 0 && nl >= 0 && nx != nl)
        return pardo_errorf(st, PARDO_ESHAPE, "logits %s and labels %s disagree on N",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            pardo_shape_str(l->ndim, l->shape, sl, sizeof sl));
    if (x->ndim == 2 && x->shape[1] == 0)
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'logits' has shape %s, expected at least one class",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    return PARDO_OK;
}

/* Defines acc_count_SUF: rows of x [n, c] (type T) whose first maximum is
 * at the label into *hits; PARDO_ERUNTIME for a label outside [0, c). */
#define ACC_KERNEL(SUF, T)                                                                                             \
    static int acc_count_##SUF(const void *vx, const pardo_tensor *labels, int64_t n, int64_t c, int64_t *hits,        \
                               pardo_status *st) {                                                                     \
        const T *x = vx;                                                                                               \
        const void *lp = pardo_tensor_data(labels);                                                                    \
        int64_t h = 0;                                                                                                 \
        for (int64_t r = 0; r < n; r++) {                                                                              \
            const int64_t lab = labels->dtype == PARDO_I64 ? ((const int64_t *)lp)[r] : ((const int32_t *)lp)[r];      \
            if (lab < 0 || lab >= c)                                                                                   \
                return pardo_errorf(st, PARDO_ERUNTIME, "row %lld has label %lld, expected a class in [0, %lld)",      \
                                    (long long)r, (long long)lab, (long long)c);                                       \
            const T *row = x + r * c;                                                                                  \
            int64_t best = 0;                                                                                          \
            for (int64_t j = 1; j < c; j++)                                                                            \
                if (row[j] > row[best]) best = j;                                                                      \
            h += best == lab;                                                                                          \
        }                                                                                                              \
        *hits = h;                                                                                                     \
        return PARDO_OK;                                                                                               \
    }

ACC_KERNEL(f32, float)
ACC_KERNEL(f64, double)

static int acc_infer(pardo_infer_ctx *ctx) {
    int rc = acc_check(ctx->in[0], ctx->in[1], ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0].dtype = PARDO_F32;
    ctx->out[0].ndim = 0;
    return PARDO_OK;
}

static int acc_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *l = ctx->in[1];
    pardo_type tx = pardo_tensor_type(x), tl = pardo_tensor_type(l);
    int64_t hits = 0;
    int rc = acc_check(&tx, &tl, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int64_t n = x->shape[0], c = x->shape[1];
    rc = (x->dtype == PARDO_F32 ? acc_count_f32 : acc_count_f64)(pardo_tensor_data(x), l, n, c, &hits, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_F32, 0, NULL);
    if (!y) return ctx->st->code;
    *(float *)pardo_tensor_data(y) = n > 0 ? (float)((double)hits / (double)n) : 0.0f;
    return PARDO_OK;
}

const pardo_op_def pardo_op_accuracy = {
    .type = "accuracy",
    .doc = "fraction of rows of logits whose argmax (first maximum) equals the label; float32 scalar, 0 for no rows",
    .inputs = acc_in,
    .n_inputs = 2,
    .outputs = acc_out,
    .n_outputs = 1,
    .infer = acc_infer,
    .cpu = acc_cpu,
    .metric = true,
};
