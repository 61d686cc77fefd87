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
 * thread count. Nothing is allocated in a call.
 *
 * The sync form (attr sync, torch.nn.SyncBatchNorm): in a parallel_do
 * part the statistics are the whole batch's, over every part's rows.
 * pardo transpile --parts rewrites each such op into batch_norm_stats
 * (a part's per-channel count M_p, sum x, sum x^2), all_reduce (the sums
 * over the parts) and the op with those sums as its input `stats`; the
 * gradient op likewise, batch_norm_stats then also summing M_p sum dY and
 * M_p sum dY x. Part p's loss is its rows' mean and merge weighs the parts'
 * gradients by w_p = M_p / M, so the part's dX is the whole batch's over
 * w_p: dX = scale inv (dY - (T1 + xhat T2) / M_p), T1 = sum_p w_p sum dY,
 * T2 = sum_p w_p sum dY xhat (one part: the formula above). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "kernels.h"
#include "nn_util.h"
#include "op.h"

static const pardo_attr_def bn_attrs[] = {
    {"epsilon", PARDO_ATTR_FLOAT, "1e-05", "added to the variance, >= 0"},
    {"momentum", PARDO_ATTR_FLOAT, "0.9", "running = running * momentum + batch * (1 - momentum) (ONNX's; torch's "
                                          "momentum is 1 - this), in [0, 1]"},
    {"sync", PARDO_ATTR_BOOL, "false", "in a parallel_do part, the statistics over every part's rows "
                                       "(torch.nn.SyncBatchNorm); pardo transpile --parts rewrites it to take input "
                                       "stats"},
};

static const pardo_arg_def bn_in[] = {
    {"X", "input [N, C, ...] (float32 or float64)", false, false},
    {"scale", "per channel [C]", false, false},
    {"bias", "per channel [C]", false, false},
    {"mean", "running mean [C] (state)", false, false},
    {"var", "running variance [C] (state)", false, false},
    {"stats", "training: the batch's sums instead of X's, float64 [1 + 2C] or [1 + 4C] (batch_norm_stats over "
              "every part, all_reduce)", true, false},
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

/* X's batch, channels and elements per channel and row (-1 where a dim is unknown) into g. */
static int bn_dims(const pardo_type *x, bn_geom *g, pardo_status *st) {
    if (x->ndim < 2) return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' has %d dims, expected [N, C, ...]", x->ndim);
    g->n = x->shape[0];
    g->c = x->shape[1];
    g->s = 1;
    for (int d = 2; d < x->ndim; d++) g->s = x->shape[d] < 0 || g->s < 0 ? -1 : g->s * x->shape[d];
    return PARDO_OK;
}

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
    if ((rc = bn_dims(x, g, st)) != PARDO_OK) return rc;
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

/* Checks the optional `stats` input (input `index`, may be NULL): float64 [1 + 2C], or [1 + 4C] where
 * need_grad (the gradient's sums too). */
static int bn_check_stats(const pardo_type *t, int index, const bn_geom *g, bool need_grad, pardo_status *st) {
    if (!t || g->c < 0) return PARDO_OK;
    const int64_t want = 1 + (need_grad ? 4 : 2) * g->c;
    if (t->dtype == PARDO_F64 && t->ndim == 1 && (t->shape[0] < 0 || t->shape[0] == want ||
                                                    (!need_grad && t->shape[0] == 1 + 4 * g->c)))
        return PARDO_OK;
    char sh[96];
    return pardo_errorf(st, PARDO_ESHAPE, "input %d 'stats' is %s %s, expected float64 [%lld] (batch_norm_stats of "
                        "X%s over %lld channels)", index, pardo_dtype_name(t->dtype),
                        pardo_shape_str(t->ndim, t->shape, sh, sizeof sh), (long long)want, need_grad ? " and dY" : "",
                        (long long)g->c);
}

static int bn_infer(pardo_infer_ctx *ctx) {
    bn_geom g;
    const pardo_type *in[5];
    for (int k = 0; k < 5; k++) in[k] = k < ctx->n_in ? ctx->in[k] : NULL;
    int rc = bn_geometry(ctx->op, in, &g, ctx->st);
    if (rc == PARDO_OK) rc = bn_check_stats(ctx->n_in > 5 ? ctx->in[5] : NULL, 5, &g, false, ctx->st);
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

/* The batch's mean and biased variance of channel c: two passes over X, or from the sums of every part
 * (stats, batch_norm_stats's layout; NULL: X is the batch). */
static void bn_batch_stats(const void *x, bool f32, const bn_geom *g, const double *stats, int64_t c, double *mean,
                           double *var) {
    if (stats) {
        const double m = stats[0];
        *mean = m > 0 ? stats[1 + c] / m : 0;
        const double v = m > 0 ? stats[1 + g->c + c] / m - *mean * *mean : 0;
        *var = v > 0 ? v : 0;
        return;
    }
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
    const double *stats;            // the sums over every part (sync form), or NULL
    void *y, *mean_out, *var_out;   // forward (the running outputs may be NULL)
    void *dx, *dscale, *dbias;      // gradient (each may be NULL)
} bn_job;

static void bn_fwd_range(void *arg, int64_t c0, int64_t c1) {
    const bn_job *jb = arg;
    const bn_geom *g = &jb->g;
    const bool f = jb->f32;
    const double m = jb->stats ? jb->stats[0] : (double)(g->n * g->s);
    for (int64_t c = c0; c < c1; c++) {
        double mean = BN_AT(jb->mean, f, c), var = BN_AT(jb->var, f, c), rm = mean, rv = var;
        if (jb->training) {
            bn_batch_stats(jb->x, f, g, jb->stats, c, &mean, &var);
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

/* The [C] inputs' run-time types and X's, and the geometry; *stats the sums of input stats_at (NULL where
 * the op has none or it does not run in training mode). */
static int bn_prepare(pardo_kernel_ctx *ctx, bn_geom *g, int stats_at, bool need_grad, const double **stats) {
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
    int rc = bn_geometry(ctx->op, tp, g, ctx->st);
    *stats = NULL;
    const pardo_tensor *t = stats_at < ctx->n_in ? ctx->in[stats_at] : NULL;
    if (rc != PARDO_OK || !t || !ctx->training) return rc;
    pardo_type ty = pardo_tensor_type(t);
    if (t->is_array || (rc = bn_check_stats(&ty, stats_at, g, need_grad, ctx->st)) != PARDO_OK)
        return rc != PARDO_OK ? rc : pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'stats' is a tensor_array",
                                                  stats_at);
    *stats = pardo_tensor_data(t);
    return PARDO_OK;
}

static int bn_cpu(pardo_kernel_ctx *ctx) {
    bn_geom g;
    const double *stats;
    int rc = bn_prepare(ctx, &g, 5, false, &stats);
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
                .mean = pardo_tensor_data(ctx->in[3]), .var = pardo_tensor_data(ctx->in[4]), .stats = stats,
                .y = pardo_tensor_data(out[0]), .mean_out = out[1] ? pardo_tensor_data(out[1]) : NULL,
                .var_out = out[2] ? pardo_tensor_data(out[2]) : NULL};
    return pardo_parallel_for(ctx, g.c, bn_fwd_range, &jb);
}

static int bn_sync_parts(const pardo_op *op, pardo_block *blk, pardo_status *st);
static int bn_grad_sync_parts(const pardo_op *op, pardo_block *blk, pardo_status *st);

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
    .n_inputs = 6,
    .outputs = bn_out,
    .n_outputs = 3,
    .attrs = bn_attrs,
    .n_attrs = 3,
    .infer = bn_infer,
    .cpu = bn_cpu,
    .cuda = pardo_cuda_batch_norm,
    .grad = bn_grad_build,
    .sync_parts = bn_sync_parts,
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
    {"stats", "training: the batch's sums, float64 [1 + 4C] (batch_norm_stats of X and dY over every part, "
              "all_reduce)", true, false},
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
    if ((rc = pardo_nn_expect_same(ctx->in[8], "input 8 'dY'", ctx->in[0], "input 0 'X'", ctx->st)) != PARDO_OK ||
        (rc = bn_check_stats(ctx->n_in > 11 ? ctx->in[11] : NULL, 11, &g, true, ctx->st)) != PARDO_OK)
        return rc;
    for (int k = 0; k < ctx->n_out && k < 5; k++) ctx->out[k] = k == 0 ? *ctx->in[0] : *ctx->in[1];
    return PARDO_OK;
}

static void bn_grad_range(void *arg, int64_t c0, int64_t c1) {
    const bn_job *jb = arg;
    const bn_geom *g = &jb->g;
    const bool f = jb->f32;
    const double m = (double)(g->n * g->s); /* this part's M_p */
    for (int64_t c = c0; c < c1; c++) {
        double mean = BN_AT(jb->mean, f, c), var = BN_AT(jb->var, f, c);
        if (jb->training) bn_batch_stats(jb->x, f, g, jb->stats, c, &mean, &var);
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
        /* training: dX = scale inv (dY - sum dY / M - xhat sum(dY xhat) / M), or with every part's sums
         * (T1 + xhat T2) / M_p (see the top); eval: dX = scale inv dY */
        double t1 = sdy, t2 = sdyx;
        if (jb->stats) {
            const double mall = jb->stats[0];
            t1 = mall > 0 ? jb->stats[1 + 2 * g->c + c] / mall : 0;
            t2 = mall > 0 ? inv * (jb->stats[1 + 3 * g->c + c] / mall - mean * t1) : 0;
        }
        const double k = scale * inv, mdy = jb->training && m > 0 ? t1 / m : 0,
                     mdyx = jb->training && m > 0 ? t2 / m : 0;
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
    const double *stats;
    int rc = bn_prepare(ctx, &g, 11, true, &stats);
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
                .var = pardo_tensor_data(ctx->in[4]), .dy = pardo_tensor_data(dy), .stats = stats,
                .dx = out[0] ? pardo_tensor_data(out[0]) : NULL, .dscale = out[1] ? pardo_tensor_data(out[1]) : NULL,
                .dbias = out[2] ? pardo_tensor_data(out[2]) : NULL};
    return pardo_parallel_for(ctx, g.c, bn_grad_range, &jb);
}

const pardo_op_def pardo_op_batch_norm_grad = {
    .type = "batch_norm_grad",
    .doc = "gradient of batch_norm: dX (through the batch's statistics when training), dscale, dbias",
    .inputs = bn_grad_in,
    .n_inputs = 12,
    .outputs = bn_grad_out,
    .n_outputs = 5,
    .attrs = bn_attrs,
    .n_attrs = 3,
    .infer = bn_grad_infer,
    .cpu = bn_grad_cpu,
    .cuda = pardo_cuda_batch_norm_grad,
    .sync_parts = bn_grad_sync_parts,
};

/* ---- batch_norm_stats ---- */

static const pardo_arg_def bn_stats_in[] = {
    {"X", "input [N, C, ...] (float32 or float64)", false, false},
    {"dY", "the gradient of batch_norm's Y (the gradient's sums), X's dtype and shape", true, false},
};
static const pardo_arg_def bn_stats_out[] = {
    {"stats", "float64 [1 + 2C]: M_p (N x the elements per channel and row), then per channel sum x, sum x^2; "
              "with dY [1 + 4C], then M_p sum dY, M_p sum dY x",
     false, false},
};

/* X's geometry (channels from dim 1) and, where given, dY's match. */
static int bn_stats_geometry(const pardo_type *x, const pardo_type *dy, bn_geom *g, pardo_status *st) {
    int rc = pardo_nn_expect_float(x, "input 0 'X'", st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 1 'dY'", x, "input 0 'X'", st);
    return rc == PARDO_OK ? bn_dims(x, g, st) : rc;
}

static int bn_stats_infer(pardo_infer_ctx *ctx) {
    bn_geom g;
    const pardo_type *dy = ctx->n_in > 1 ? ctx->in[1] : NULL;
    int rc = bn_stats_geometry(ctx->in[0], dy, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = (pardo_type){.dtype = PARDO_F64, .ndim = 1, .shape = {g.c < 0 ? -1 : 1 + (dy ? 4 : 2) * g.c}};
    return PARDO_OK;
}

static void bn_stats_range(void *arg, int64_t c0, int64_t c1) {
    const bn_job *jb = arg;
    const bn_geom *g = &jb->g;
    const int64_t C = g->c;
    const double mp = (double)(g->n * g->s);
    double *out = jb->y;
    for (int64_t c = c0; c < c1; c++) {
        double s1 = 0, s2 = 0, d1 = 0, d2 = 0;
        for (int64_t r = 0; r < g->n; r++) {
            const int64_t base = (r * g->c + c) * g->s;
            double a, b, e = 0, h = 0;
            if (jb->f32) {
                const float *xp = (const float *)jb->x + base, *dp = jb->dy ? (const float *)jb->dy + base : NULL;
                PARDO_LANE_SUM(a, 8, g->s, (double)xp[j]);
                PARDO_LANE_SUM(b, 8, g->s, (double)xp[j] * (double)xp[j]);
                if (dp) PARDO_LANE_SUM(e, 8, g->s, (double)dp[j]);
                if (dp) PARDO_LANE_SUM(h, 8, g->s, (double)dp[j] * (double)xp[j]);
            } else {
                const double *xp = (const double *)jb->x + base, *dp = jb->dy ? (const double *)jb->dy + base : NULL;
                PARDO_LANE_SUM(a, 8, g->s, xp[j]);
                PARDO_LANE_SUM(b, 8, g->s, xp[j] * xp[j]);
                if (dp) PARDO_LANE_SUM(e, 8, g->s, dp[j]);
                if (dp) PARDO_LANE_SUM(h, 8, g->s, dp[j] * xp[j]);
            }
            s1 += a;
            s2 += b;
            d1 += e;
            d2 += h;
        }
        out[1 + c] = s1;
        out[1 + C + c] = s2;
        if (jb->dy) {
            out[1 + 2 * C + c] = mp * d1;
            out[1 + 3 * C + c] = mp * d2;
        }
    }
}

static int bn_stats_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (x->is_array || (dy && dy->is_array))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "a tensor_array input, expected tensors");
    pardo_type tx = pardo_tensor_type(x), tdy = dy ? pardo_tensor_type(dy) : tx;
    bn_geom g;
    int rc = bn_stats_geometry(&tx, dy ? &tdy : NULL, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int64_t len = 1 + (dy ? 4 : 2) * g.c;
    pardo_tensor *out = pardo_kernel_output(ctx, 0, PARDO_F64, 1, &len);
    if (!out) return ctx->st->code;
    ((double *)pardo_tensor_data(out))[0] = (double)(g.n * g.s);
    bn_job jb = {.g = g, .f32 = x->dtype == PARDO_F32, .x = pardo_tensor_data(x),
                 .dy = dy ? pardo_tensor_data(dy) : NULL, .y = pardo_tensor_data(out)};
    return pardo_parallel_for(ctx, g.c, bn_stats_range, &jb);
}

const pardo_op_def pardo_op_batch_norm_stats = {
    .type = "batch_norm_stats",
    .doc = "a part's batch sums for the sync form of batch_norm (count, sum x, sum x^2 per channel; with dY the "
           "gradient's sums): all_reduce them over the parts and give them to batch_norm(_grad) as input stats",
    .inputs = bn_stats_in,
    .n_inputs = 2,
    .outputs = bn_stats_out,
    .n_outputs = 1,
    .infer = bn_stats_infer,
    .cpu = bn_stats_cpu,
};

/* ---- the sync form in a parallel_do part (pardo_op_def.sync_parts) ---- */

/* Appends to blk (which op is not in): batch_norm_stats(X[, dY]) -> B@BN_STATS, all_reduce ->
 * B@BN_STATS_ALL, then a copy of op with that as input `stats_at` (the inputs before it padded with ""), all
 * of op's role. B is op's first named output. */
static int bn_sync_append(const pardo_op *op, pardo_block *blk, int dy_at, int stats_at, pardo_status *st) {
    const char *base = NULL;
    for (int k = 0; k < op->n_out && !base; k++)
        if (op->out[k][0]) base = op->out[k];
    if (!base || op->n_in < 1 || (dy_at >= 0 && op->n_in <= dy_at))
        return pardo_errorf(st, PARDO_EINVAL, "%s: the sync form needs X%s and a named output", op->type,
                            dy_at >= 0 ? ", dY" : "");
    if (op->n_in > stats_at && op->in[stats_at][0])
        return pardo_errorf(st, PARDO_EINVAL, "%s: input %d 'stats' is given already", op->type, stats_at);
    char sums[512], all[512];
    snprintf(sums, sizeof sums, "%s@BN_STATS", base);
    snprintf(all, sizeof all, "%s@BN_STATS_ALL", base);
    pardo_op *stats = pardo_block_add_op(blk, "batch_norm_stats", st);
    if (!stats || pardo_op_add_input(stats, op->in[0], st) != PARDO_OK ||
        (dy_at >= 0 && pardo_op_add_input(stats, op->in[dy_at], st) != PARDO_OK) ||
        pardo_op_add_output(stats, sums, st) != PARDO_OK)
        return st->code;
    stats->role = op->role;
    pardo_op *reduce = pardo_block_add_op(blk, "all_reduce", st);
    if (!reduce || pardo_op_add_input(reduce, sums, st) != PARDO_OK || pardo_op_add_output(reduce, all, st) != PARDO_OK)
        return st->code;
    reduce->role = op->role;
    pardo_op *self = pardo_block_add_op_copy(blk, op, st);
    if (!self) return st->code;
    while (self->n_in < stats_at)
        if (pardo_op_add_input(self, "", st) != PARDO_OK) return st->code;
    return pardo_op_add_input(self, all, st);
}

static int bn_sync_parts(const pardo_op *op, pardo_block *blk, pardo_status *st) {
    return bn_sync_append(op, blk, -1, 5, st);
}

static int bn_grad_sync_parts(const pardo_op *op, pardo_block *blk, pardo_status *st) {
    return bn_sync_append(op, blk, 8, 11, st);
}
