/* batch_norm.c - batch_norm (ONNX BatchNormalization) and batch_norm_grad.
 *
 * X is [N, C, ...] (NCHW, or [N, C]); scale, bias, mean and var are [C].
 * Channel c is normalised over its N x S elements (S = the product of the
 * dims after C):
 *   eval (ctx->training false): Y = (X - mean) / sqrt(var + epsilon) * scale + bias,
 *     with the running statistics; outputs 1 and 2 (the running mean and
 *     var, named as inputs 3 and 4 to update them in place) keep them as
 *     they are.
 *   training: the batch's mean m and biased variance v normalise X; the
 *     running statistics become mean * momentum + m * (1 - momentum) and
 *     var * momentum + v * M / (M - 1) * (1 - momentum), M = N x S (the
 *     unbiased variance, as torch.nn.BatchNorm2d keeps). momentum has ONNX's
 *     meaning (default 0.9), which is 1 - torch's momentum (torch's 0.1).
 * batch_norm_grad recomputes the batch's statistics from X in training mode
 * (dX through them: dX = scale / (M sigma) (M dY - sum dY - xhat sum(dY
 * xhat))), and uses the running ones in eval mode (dX = dY scale / sqrt(var
 * + eps)); dscale = sum(dY xhat), dbias = sum(dY). The running statistics
 * get no gradient. Sums run in double in 8 lanes, channel by channel (the
 * channels split over the threads), so the bits do not depend on the
 * thread count. Nothing is allocated in a call. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

static const pardo_attr_def bn_attrs[] = {
    {"epsilon", PARDO_ATTR_FLOAT, "1e-05", "added to the variance, >= 0"},
    {"momentum", PARDO_ATTR_FLOAT, "0.9", "running = running * momentum + batch * (1 - momentum) (ONNX's; torch's "
                                          "momentum is 1 - this), in [0, 1]"},
};

static const pardo_arg_def bn_in[] = {
    {"X", "input [N, C, ...] (float32 or float64)", false, false},
    {"scale", "per channel [C]", false, false},
    {"bias", "per channel [C]", false, false},
    {"mean", "running mean [C] (state)", false, false},
    {"var", "running variance [C] (state)", false, false},
};
static const pardo_arg_def bn_out[] = {
    {"Y", "X normalised, X's dtype and shape", false, false},
    {"running_mean", "the updated running mean (name input 3: updated in place; training mode only)", true, false},
    {"running_var", "the updated running variance (name input 4; training mode only)", true, false},
};

typedef struct bn_geom {
    int64_t n, c, s; // batch, channels, elements per channel and row
    double eps, momentum;
} bn_geom;

/* Checks X and the four [C] inputs (ptrs may be NULL for inference's
 * unknowns only where noted) and the attrs. */
static int bn_geometry(const pardo_op *op, const pardo_type *const *in, bn_geom *g, pardo_status *st) {
    int rc = pardo_nn_expect_float(in[0], "input 0 'X'", st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "epsilon", 1e-5, &g->eps, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "momentum", 0.9, &g->momentum, st);
    if (rc != PARDO_OK) return rc;
    if (!(g->eps >= 0) || isinf(g->eps))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'epsilon' is %g, expected a finite value >= 0", g->eps);
    if (!(g->momentum >= 0 && g->momentum <= 1))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'momentum' is %g, expected [0, 1]", g->momentum);
    const pardo_type *x = in[0];
    if (x->ndim < 2) return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' has %d dims, expected [N, C, ...]", x->ndim);
    g->n = x->shape[0];
    g->c = x->shape[1];
    g->s = 1;
    for (int d = 2; d < x->ndim; d++) g->s = x->shape[d] < 0 || g->s < 0 ? -1 : g->s * x->shape[d];
    static const char *const names[] = {NULL, "input 1 'scale'", "input 2 'bias'", "input 3 'mean'", "input 4 'var'"};
    for (int k = 1; k < 5; k++) {
        const pardo_type *t = in[k];
        if (!t) return pardo_errorf(st, PARDO_EINVAL, "%s is required", names[k]);
        if (t->dtype != x->dtype || t->ndim != 1 || (t->shape[0] >= 0 && g->c >= 0 && t->shape[0] != g->c)) {
            char sh[96];
            return pardo_errorf(st, PARDO_ESHAPE, "%s is %s %s, expected %s [%lld] (X's channels)", names[k],
                                pardo_dtype_name(t->dtype), pardo_shape_str(t->ndim, t->shape, sh, sizeof sh),
                                pardo_dtype_name(x->dtype), (long long)g->c);
        }
    }
    return PARDO_OK;
}

static int bn_infer(pardo_infer_ctx *ctx) {
    bn_geom g;
    const pardo_type *in[5];
    for (int k = 0; k < 5; k++) in[k] = k < ctx->n_in ? ctx->in[k] : NULL;
    int rc = bn_geometry(ctx->op, in, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    for (int k = 1; k < ctx->n_out && k < 3; k++) ctx->out[k] = *ctx->in[k + 2];
    return PARDO_OK;
}

/* Element i of channel c of a float or double array. */
#define BN_AT(p, f32, i) ((f32) ? (double)((const float *)(p))[i] : ((const double *)(p))[i])
#define BN_SET(p, f32, i, v)                                                                                           \
    do {                                                                                                               \
        if (f32) ((float *)(p))[i] = (float)(v);                                                                       \
        else ((double *)(p))[i] = (v);                                                                                 \
    } while (0)

/* Sums of channel c: s1 = sum x, and with mean given, s2 = sum (x - mean)^2. */
static void bn_channel_sums(const void *x, bool f32, const bn_geom *g, int64_t c, double mean, bool second,
                            double *out) {
    double acc = 0;
    for (int64_t r = 0; r < g->n; r++) {
        const int64_t base = (r * g->c + c) * g->s;
        double part;
        if (f32) {
            const float *p = (const float *)x + base;
            if (second) PARDO_LANE_SUM(part, 8, g->s, ((double)p[j] - mean) * ((double)p[j] - mean));
            else PARDO_LANE_SUM(part, 8, g->s, (double)p[j]);
        } else {
            const double *p = (const double *)x + base;
            if (second) PARDO_LANE_SUM(part, 8, g->s, (p[j] - mean) * (p[j] - mean));
            else PARDO_LANE_SUM(part, 8, g->s, p[j]);
        }
        acc += part;
    }
    *out = acc;
}

/* The batch's mean and biased variance of channel c (two passes). */
static void bn_batch_stats(const void *x, bool f32, const bn_geom *g, int64_t c, double *mean, double *var) {
    const double m = (double)(g->n * g->s);
    double s1, s2;
    bn_channel_sums(x, f32, g, c, 0, false, &s1);
    *mean = m > 0 ? s1 / m : 0;
    bn_channel_sums(x, f32, g, c, *mean, true, &s2);
    *var = m > 0 ? s2 / m : 0;
}

typedef struct bn_job {
    bn_geom g;
    bool f32, training;
    const void *x, *scale, *bias, *mean, *var, *dy;
    void *y, *mean_out, *var_out;   // forward (the running outputs may be NULL)
    void *dx, *dscale, *dbias;      // gradient (each may be NULL)
} bn_job;

static void bn_fwd_range(void *arg, int64_t c0, int64_t c1) {
    const bn_job *jb = arg;
    const bn_geom *g = &jb->g;
    const bool f = jb->f32;
    const double m = (double)(g->n * g->s);
    for (int64_t c = c0; c < c1; c++) {
        double mean = BN_AT(jb->mean, f, c), var = BN_AT(jb->var, f, c), rm = mean, rv = var;
        if (jb->training) {
            bn_batch_stats(jb->x, f, g, c, &mean, &var);
            rm = rm * g->momentum + mean * (1 - g->momentum);
            rv = rv * g->momentum + (m > 1 ? var * m / (m - 1) : var) * (1 - g->momentum);
        }
        const double inv = 1 / sqrt(var + g->eps), a = BN_AT(jb->scale, f, c) * inv,
                     b = BN_AT(jb->bias, f, c) - mean * a;
        for (int64_t r = 0; r < g->n; r++) {
            const int64_t base = (r * g->c + c) * g->s;
            if (f) {
                const float *xp = (const float *)jb->x + base;
                float *yp = (float *)jb->y + base;
                for (int64_t i = 0; i < g->s; i++) yp[i] = (float)((double)xp[i] * a + b);
            } else {
                const double *xp = (const double *)jb->x + base;
                double *yp = (double *)jb->y + base;
                for (int64_t i = 0; i < g->s; i++) yp[i] = xp[i] * a + b;
            }
        }
        if (jb->mean_out) BN_SET(jb->mean_out, f, c, rm);
        if (jb->var_out) BN_SET(jb->var_out, f, c, rv);
    }
}

/* The [C] inputs' run-time types and X's, and the geometry. */
static int bn_prepare(pardo_kernel_ctx *ctx, bn_geom *g) {
    pardo_type types[5];
    const pardo_type *tp[5];
    for (int k = 0; k < 5; k++) {
        tp[k] = NULL;
        if (k >= ctx->n_in || !ctx->in[k]) continue;
        if (ctx->in[k]->is_array)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d is a tensor_array, expected a tensor", k);
        types[k] = pardo_tensor_type(ctx->in[k]);
        tp[k] = &types[k];
    }
    return bn_geometry(ctx->op, tp, g, ctx->st);
}

static int bn_cpu(pardo_kernel_ctx *ctx) {
    bn_geom g;
    int rc = bn_prepare(ctx, &g);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *x = ctx->in[0], *out[3] = {NULL, NULL, NULL};
    if (!(out[0] = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape))) return ctx->st->code;
    for (int k = 1; k < ctx->n_out && k < 3; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        const pardo_tensor *src = ctx->in[k + 2];
        if (!(out[k] = pardo_kernel_output(ctx, k, src->dtype, src->ndim, src->shape))) return ctx->st->code;
    }
    bn_job jb = {.g = g, .f32 = x->dtype == PARDO_F32, .training = ctx->training, .x = pardo_tensor_data(x),
                .scale = pardo_tensor_data(ctx->in[1]), .bias = pardo_tensor_data(ctx->in[2]),
                .mean = pardo_tensor_data(ctx->in[3]), .var = pardo_tensor_data(ctx->in[4]),
                .y = pardo_tensor_data(out[0]), .mean_out = out[1] ? pardo_tensor_data(out[1]) : NULL,
                .var_out = out[2] ? pardo_tensor_data(out[2]) : NULL};
    return pardo_parallel_for(ctx, g.c, bn_fwd_range, &jb);
}

/* The running outputs are state, not on any path to the loss: the
 * gradient op takes X, scale, bias, mean, var, Y ("": not read) and dY. */
static int bn_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    /* the running statistics get no gradient, even where the pass asks for one (they share a name with the
     * outputs the params reach) */
    const char *in_grads[5] = {req->in_grads[0], req->in_grads[1], req->in_grads[2], "", ""};
    pardo_grad_request r = *req;
    r.in_grads = in_grads;
    return pardo_grad_wired_n(&r, blk, 0, 7u, 5, st);
}

const pardo_op_def pardo_op_batch_norm = {
    .type = "batch_norm",
    .doc = "ONNX BatchNormalization over [N, C, ...]: the batch's statistics when training (and the running ones "
           "updated in place), the running ones otherwise (float32, float64)",
    .inputs = bn_in,
    .n_inputs = 5,
    .outputs = bn_out,
    .n_outputs = 3,
    .attrs = bn_attrs,
    .n_attrs = 2,
    .infer = bn_infer,
    .cpu = bn_cpu,
    .grad = bn_grad_build,
    .inplace = true,
};

/* ---- batch_norm_grad ---- */

static const pardo_arg_def bn_grad_in[] = {
    {"X", "the forward input X", false, false},
    {"scale", "the forward scale", false, false},
    {"bias", "the forward bias (not read)", true, false},
    {"mean", "the running mean (read in eval mode)", false, false},
    {"var", "the running variance (read in eval mode)", false, false},
    {"Y", "the forward output (not read: \"\")", true, false},
    {"running_mean", "(not read: \"\")", true, false},
    {"running_var", "(not read: \"\")", true, false},
    {"dY", "gradient of Y", false, false},
    {"d_running_mean", "(not read: \"\")", true, false},
    {"d_running_var", "(not read: \"\")", true, false},
};
static const pardo_arg_def bn_grad_out[] = {
    {"dX", "gradient of X", true, false},
    {"dscale", "gradient of scale", true, false},
    {"dbias", "gradient of bias", true, false},
    {"dmean", "(none: \"\")", true, false},
    {"dvar", "(none: \"\")", true, false},
};

static int bn_grad_infer(pardo_infer_ctx *ctx) {
    bn_geom g;
    const pardo_type *in[5] = {ctx->in[0], ctx->in[1], ctx->in[1], ctx->in[3], ctx->in[4]};
    int rc = bn_geometry(ctx->op, in, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (ctx->n_in < 9 || !ctx->in[8])
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 8 'dY' is required");
    if ((rc = pardo_nn_expect_same(ctx->in[8], "input 8 'dY'", ctx->in[0], "input 0 'X'", ctx->st)) != PARDO_OK)
        return rc;
    for (int k = 0; k < ctx->n_out && k < 5; k++) ctx->out[k] = k == 0 ? *ctx->in[0] : *ctx->in[1];
    return PARDO_OK;
}

static void bn_grad_range(void *arg, int64_t c0, int64_t c1) {
    const bn_job *jb = arg;
    const bn_geom *g = &jb->g;
    const bool f = jb->f32;
    const double m = (double)(g->n * g->s);
    for (int64_t c = c0; c < c1; c++) {
        double mean = BN_AT(jb->mean, f, c), var = BN_AT(jb->var, f, c);
        if (jb->training) bn_batch_stats(jb->x, f, g, c, &mean, &var);
        const double inv = 1 / sqrt(var + g->eps), scale = BN_AT(jb->scale, f, c);
        double sdy = 0, sdyx = 0; /* sum dY, sum dY xhat */
        for (int64_t r = 0; r < g->n; r++) {
            const int64_t base = (r * g->c + c) * g->s;
            double a, b;
            if (f) {
                const float *xp = (const float *)jb->x + base, *dp = (const float *)jb->dy + base;
                PARDO_LANE_SUM(a, 8, g->s, (double)dp[j]);
                PARDO_LANE_SUM(b, 8, g->s, (double)dp[j] * (((double)xp[j] - mean) * inv));
            } else {
                const double *xp = (const double *)jb->x + base, *dp = (const double *)jb->dy + base;
                PARDO_LANE_SUM(a, 8, g->s, dp[j]);
                PARDO_LANE_SUM(b, 8, g->s, dp[j] * ((xp[j] - mean) * inv));
            }
            sdy += a;
            sdyx += b;
        }
        if (jb->dscale) BN_SET(jb->dscale, f, c, sdyx);
        if (jb->dbias) BN_SET(jb->dbias, f, c, sdy);
        if (!jb->dx) continue;
        /* training: dX = scale inv (dY - sum dY / M - xhat sum(dY xhat) / M); eval: dX = scale inv dY */
        const double k = scale * inv, mdy = jb->training && m > 0 ? sdy / m : 0, mdyx = jb->training && m > 0 ? sdyx / m : 0;
        for (int64_t r = 0; r < g->n; r++) {
            const int64_t base = (r * g->c + c) * g->s;
            for (int64_t i = 0; i < g->s; i++) {
                const double xh = (BN_AT(jb->x, f, base + i) - mean) * inv;
                BN_SET(jb->dx, f, base + i, k * (BN_AT(jb->dy, f, base + i) - mdy - xh * mdyx));
            }
        }
    }
}

static int bn_grad_cpu(pardo_kernel_ctx *ctx) {
    bn_geom g;
    int rc = bn_prepare(ctx, &g);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 8 ? ctx->in[8] : NULL, *out[3] = {NULL, NULL, NULL};
    if (!dy || dy->is_array || dy->dtype != x->dtype || dy->numel != x->numel)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 8 'dY' must be a tensor of X's dtype and shape");
    for (int k = 0; k < ctx->n_out && k < 3; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        const pardo_tensor *like = k == 0 ? x : ctx->in[1];
        if (!(out[k] = pardo_kernel_output(ctx, k, like->dtype, like->ndim, like->shape))) return ctx->st->code;
    }
    bn_job jb = {.g = g, .f32 = x->dtype == PARDO_F32, .training = ctx->training, .x = pardo_tensor_data(x),
                .scale = pardo_tensor_data(ctx->in[1]), .mean = pardo_tensor_data(ctx->in[3]),
                .var = pardo_tensor_data(ctx->in[4]), .dy = pardo_tensor_data(dy),
                .dx = out[0] ? pardo_tensor_data(out[0]) : NULL, .dscale = out[1] ? pardo_tensor_data(out[1]) : NULL,
                .dbias = out[2] ? pardo_tensor_data(out[2]) : NULL};
    return pardo_parallel_for(ctx, g.c, bn_grad_range, &jb);
}

const pardo_op_def pardo_op_batch_norm_grad = {
    .type = "batch_norm_grad",
    .doc = "gradient of batch_norm: dX (through the batch's statistics when training), dscale, dbias",
    .inputs = bn_grad_in,
    .n_inputs = 11,
    .outputs = bn_grad_out,
    .n_outputs = 5,
    .attrs = bn_attrs,
    .n_attrs = 2,
    .infer = bn_grad_infer,
    .cpu = bn_grad_cpu,
};
