/* norm.c - layer_norm (ONNX LayerNormalization) and layer_norm_grad.
 *
 * X is viewed as [rows, n]: rows = prod(shape[:axis]), n = prod(shape[axis:])
 * (attr axis, default -1). Each row is normalised with its own mean and
 * biased variance: Y = (X - mean) * InvStdDev * scale + bias, InvStdDev =
 * 1 / sqrt(var + epsilon). scale and bias are optional and, when given, have
 * exactly the normalised shape X.shape[axis:] (ONNX allows any shape that
 * broadcasts to it; pardo asks for the exact one). Optional outputs Mean and
 * InvStdDev have shape X.shape[:axis] + [1] * (rank - axis), as in ONNX, and
 * X's dtype (ONNX's stash_type is not supported: statistics are computed in
 * double and stored in X's dtype). A row of n = 0 elements has mean 0 and
 * variance 0.
 *
 * layer_norm_grad recomputes each row's statistics from X (the Mean and
 * InvStdDev inputs are not read), and also takes the gradients of Mean and
 * InvStdDev when the graph uses those outputs.
 *
 * Rows split over block 0's threads (pardo_run_rows); dscale and dbias,
 * sums over the rows, split by columns instead and sum the rows in order,
 * from row statistics the row pass keeps (2 doubles a row, in the calling
 * thread's scratch: ops/scratch.h; nothing is allocated in the steady state). Sums run in double, in lanes (PARDO_LANE_SUM), so the
 * bits depend on neither the thread count nor the CPU's vector width. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "kernels.h"
#include "nn_util.h"
#include "op.h"
#include "scratch.h"

static const pardo_attr_def ln_attrs[] = {
    {"axis", PARDO_ATTR_INT, "-1", "first normalised axis: normalise over dims axis..end (negative from the end)"},
    {"epsilon", PARDO_ATTR_FLOAT, "1e-05", "added to the variance, >= 0"},
};

/* Sizes of one layer_norm. */
typedef struct ln_geom {
    int axis;     // first normalised dim
    int64_t rows; // product of the dims before axis; -1 unknown
    int64_t n;    // product of the normalised dims; -1 unknown
    double eps;   // epsilon
    pardo_dtype dtype; // X's
} ln_geom;

/* Checks X, scale and bias (NULL: absent) and the attrs; fills g and, when
 * out is not NULL, the types of Y, Mean and InvStdDev (out[0..3)). Inference
 * (dims may be -1) and kernels use it. */
static int ln_geometry(const pardo_op *op, const pardo_type *x, const pardo_type *scale, const pardo_type *bias,
                       ln_geom *g, pardo_type *out, pardo_status *st) {
    char sx[128];
    int64_t axis;
    int rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'X'", st)) != PARDO_OK) return rc;
    if ((rc = pardo_attr_int(op, "axis", -1, &axis, st)) != PARDO_OK) return rc;
    if ((rc = pardo_attr_float(op, "epsilon", 1e-5, &g->eps, st)) != PARDO_OK) return rc;
    if (!(g->eps >= 0) || isinf(g->eps))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'epsilon' is %g, expected a finite value >= 0", g->eps);
    if (x->ndim == 0) return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' is a scalar, expected rank >= 1");
    if (x->ndim < 0) { /* unknown rank: nothing more to check */
        g->axis = -1;
        g->rows = g->n = -1;
        for (int k = 0; out && k < 3; k++) {
            out[k].dtype = x->dtype;
            out[k].ndim = -1;
        }
        return PARDO_OK;
    }
    if ((rc = pardo_normalize_axis(axis, x->ndim, "axis", &g->axis, st)) != PARDO_OK) return rc;
    g->rows = pardo_shape_numel(g->axis, x->shape);
    g->n = pardo_shape_numel(x->ndim - g->axis, x->shape + g->axis);
    const pardo_type *params[2] = {scale, bias};
    static const char *const what[2] = {"input 1 'scale'", "input 2 'bias'"};
    pardo_type norm = {.dtype = x->dtype, .ndim = x->ndim - g->axis};
    memcpy(norm.shape, x->shape + g->axis, sizeof(int64_t) * (size_t)norm.ndim);
    for (int k = 0; k < 2; k++) {
        if (!params[k]) continue;
        char what_x[192];
        snprintf(what_x, sizeof what_x, "the normalised shape of input 0 'X' %s (from attr 'axis' %lld)",
                 pardo_shape_str(x->ndim, x->shape, sx, sizeof sx), (long long)axis);
        if ((rc = pardo_nn_expect_same(params[k], what[k], &norm, what_x, st)) != PARDO_OK) return rc;
    }
    if (out) {
        out[0] = *x;
        out[1].dtype = x->dtype;
        out[1].ndim = x->ndim;
        for (int d = 0; d < x->ndim; d++) out[1].shape[d] = d < g->axis ? x->shape[d] : 1;
        out[2] = out[1];
    }
    return PARDO_OK;
}

/* One layer_norm or layer_norm_grad: the geometry, the data (absent ones
 * NULL) and, in the gradient, stats: each row's mean and inverse standard
 * deviation (2 doubles a row), which the row pass writes and the column pass
 * (dscale, dbias) reads. */
typedef struct ln_job {
    ln_geom g;
    const void *x, *scale, *bias; // inputs
    void *y, *mean, *inv;         // forward outputs
    const void *dy, *dmean, *dinv; // gradient inputs
    void *dx, *dscale, *dbias;    // gradient outputs
    double *stats;                // the gradient's row statistics, or NULL
} ln_job;

/* Lanes of a row's sums: each sum goes lane by lane and then over the lanes
 * in a fixed order, so the loops vectorise without reassociation and the
 * bits do not depend on the CPU's vector width or the thread split. */
#define LN_LANES 8

/* The mean and inverse standard deviation (biased variance, in double) of
 * row xr of n elements, into the doubles MEAN and INV. */
#define LN_ROW_STATS(xr, n, eps, MEAN, INV)                                                                            \
    do {                                                                                                               \
        double sum_, var_;                                                                                             \
        PARDO_LANE_SUM(sum_, LN_LANES, n, (double)(xr)[j]);                                                            \
        (MEAN) = (n) > 0 ? sum_ / (double)(n) : 0.0;                                                                   \
        PARDO_LANE_SUM(var_, LN_LANES, n, ((double)(xr)[j] - (MEAN)) * ((double)(xr)[j] - (MEAN)));                    \
        (INV) = 1.0 / sqrt(((n) > 0 ? var_ / (double)(n) : 0.0) + (eps));                                              \
    } while (0)

/* Columns of dscale and dbias one pass of the column kernel sums at once. */
#define LN_COL_BLOCK 64

/* Defines, for element type T: ln_fwd_SUF (rows [r0, r1): mean and biased
 * variance in double, Y = (X - mean) inv scale + bias), ln_bwd_rows_SUF
 * (dX of rows [r0, r1), and their statistics into stats when it is set) and
 * ln_bwd_cols_SUF (dscale and dbias of columns [c0, c1), summed over the
 * rows in order in double). */
#define LN_KERNELS(SUF, T)                                                                                             \
    PARDO_SIMD_CLONES static void ln_fwd_##SUF(const ln_job *jb, int64_t r0, int64_t r1) {                             \
        const T *restrict x = jb->x, *restrict s = jb->scale, *restrict b = jb->bias;                                  \
        T *restrict y = jb->y, *restrict mo = jb->mean, *restrict io = jb->inv;                                        \
        const int64_t n = jb->g.n;                                                                                     \
        for (int64_t r = r0; r < r1; r++) {                                                                            \
            const T *xr = x + r * n;                                                                                   \
            T *yr = y + r * n;                                                                                         \
            double mean, inv;                                                                                          \
            LN_ROW_STATS(xr, n, jb->g.eps, mean, inv);                                                                 \
            if (s && b)                                                                                                \
                for (int64_t j = 0; j < n; j++) yr[j] = (T)(((double)xr[j] - mean) * inv * (double)s[j] + (double)b[j]); \
            else                                                                                                       \
                for (int64_t j = 0; j < n; j++) {                                                                      \
                    double v = ((double)xr[j] - mean) * inv;                                                           \
                    if (s) v *= (double)s[j];                                                                          \
                    if (b) v += (double)b[j];                                                                          \
                    yr[j] = (T)v;                                                                                      \
                }                                                                                                      \
            if (mo) mo[r] = (T)mean;                                                                                   \
            if (io) io[r] = (T)inv;                                                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_SIMD_CLONES static void ln_bwd_rows_##SUF(const ln_job *jb, int64_t r0, int64_t r1) {                        \
        const T *restrict x = jb->x, *restrict s = jb->scale, *restrict dy = jb->dy, *restrict dm = jb->dmean,         \
                *restrict di = jb->dinv;                                                                               \
        T *restrict dx = jb->dx;                                                                                       \
        const int64_t n = jb->g.n;                                                                                     \
        const double nn = (double)n;                                                                                   \
        for (int64_t r = r0; r < r1; r++) {                                                                            \
            const T *xr = x + r * n, *dyr = dy ? dy + r * n : NULL;                                                    \
            double mean, inv;                                                                                          \
            LN_ROW_STATS(xr, n, jb->g.eps, mean, inv);                                                                 \
            if (jb->stats) {                                                                                           \
                jb->stats[2 * r] = mean;                                                                               \
                jb->stats[2 * r + 1] = inv;                                                                            \
            }                                                                                                          \
            if (!dx) continue;                                                                                         \
            /* dL/dxhat_j = dy_j * scale_j; its mean and its mean against xhat */                                      \
            double mg = 0, mgx = 0;                                                                                    \
            if (dyr && s) {                                                                                            \
                PARDO_LANE_SUM(mg, LN_LANES, n, (double)dyr[j] * (double)s[j]);                                        \
                PARDO_LANE_SUM(mgx, LN_LANES, n, (double)dyr[j] * (double)s[j] * (((double)xr[j] - mean) * inv));      \
            } else if (dyr) {                                                                                          \
                PARDO_LANE_SUM(mg, LN_LANES, n, (double)dyr[j]);                                                       \
                PARDO_LANE_SUM(mgx, LN_LANES, n, (double)dyr[j] * (((double)xr[j] - mean) * inv));                     \
            }                                                                                                          \
            mg /= nn;                                                                                                  \
            mgx /= nn;                                                                                                 \
            /* d mean / dx_j = 1/n; d inv / dx_j = -inv^3 (x_j - mean) / n */                                          \
            const double dmr = dm ? (double)dm[r] / nn : 0.0, dir = di ? -(double)di[r] * inv * inv * inv / nn : 0.0;  \
            T *dxr = dx + r * n;                                                                                       \
            if (dyr && s)                                                                                              \
                for (int64_t j = 0; j < n; j++) {                                                                      \
                    const double xc = (double)xr[j] - mean, xh = xc * inv;                                             \
                    dxr[j] = (T)(inv * ((double)dyr[j] * (double)s[j] - mg - xh * mgx) + dmr + dir * xc);              \
                }                                                                                                      \
            else                                                                                                       \
                for (int64_t j = 0; j < n; j++) {                                                                      \
                    const double xc = (double)xr[j] - mean, xh = xc * inv;                                             \
                    const double gj = dyr ? (s ? (double)dyr[j] * (double)s[j] : (double)dyr[j]) : 0.0;                \
                    dxr[j] = (T)(inv * (gj - mg - xh * mgx) + dmr + dir * xc);                                         \
                }                                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_SIMD_CLONES static void ln_bwd_cols_##SUF(const ln_job *jb, int64_t c0, int64_t c1) {                        \
        const T *restrict x = jb->x, *restrict dy = jb->dy;                                                            \
        T *restrict ds = jb->dscale, *restrict db = jb->dbias;                                                         \
        const int64_t n = jb->g.n;                                                                                     \
        double acc_s[LN_COL_BLOCK], acc_b[LN_COL_BLOCK];                                                               \
        for (int64_t c = c0; c < c1; c += LN_COL_BLOCK) {                                                              \
            const int64_t w = c1 - c < LN_COL_BLOCK ? c1 - c : LN_COL_BLOCK;                                           \
            for (int64_t k = 0; k < w; k++) acc_s[k] = acc_b[k] = 0;                                                   \
            for (int64_t r = 0; r < jb->g.rows; r++) {                                                                 \
                const T *xr = x + r * n + c, *dyr = dy + r * n + c;                                                    \
                const double mean = jb->stats[2 * r], inv = jb->stats[2 * r + 1];                                      \
                for (int64_t k = 0; k < w; k++) {                                                                      \
                    acc_s[k] += (double)dyr[k] * (((double)xr[k] - mean) * inv);                                       \
                    acc_b[k] += (double)dyr[k];                                                                        \
                }                                                                                                      \
            }                                                                                                          \
            for (int64_t k = 0; k < w; k++) {                                                                          \
                if (ds) ds[c + k] = (T)acc_s[k];                                                                       \
                if (db) db[c + k] = (T)acc_b[k];                                                                       \
            }                                                                                                          \
        }                                                                                                              \
    }

LN_KERNELS(f32, float)
LN_KERNELS(f64, double)

static void ln_fwd_range(void *arg, int64_t r0, int64_t r1) {
    const ln_job *jb = arg;
    (jb->g.dtype == PARDO_F32 ? ln_fwd_f32 : ln_fwd_f64)(jb, r0, r1);
}

static void ln_bwd_rows_range(void *arg, int64_t r0, int64_t r1) {
    const ln_job *jb = arg;
    (jb->g.dtype == PARDO_F32 ? ln_bwd_rows_f32 : ln_bwd_rows_f64)(jb, r0, r1);
}

/* Items are blocks of LN_COL_BLOCK columns. */
static void ln_bwd_cols_range(void *arg, int64_t b0, int64_t b1) {
    const ln_job *jb = arg;
    const int64_t c1 = b1 * LN_COL_BLOCK < jb->g.n ? b1 * LN_COL_BLOCK : jb->g.n;
    (jb->g.dtype == PARDO_F32 ? ln_bwd_cols_f32 : ln_bwd_cols_f64)(jb, b0 * LN_COL_BLOCK, c1);
}

/* ---- layer_norm ---- */

static const pardo_arg_def ln_in[] = {
    {"X", "input (float32 or float64), rank >= 1", false, false},
    {"scale", "per-element scale of shape X.shape[axis:]", true, false},
    {"bias", "per-element bias of shape X.shape[axis:]", true, false},
};
static const pardo_arg_def ln_out[] = {
    {"Y", "normalised X, X's shape", false, false},
    {"Mean", "row means, X.shape[:axis] + [1, ...]", true, false},
    {"InvStdDev", "1 / sqrt(variance + epsilon) per row, Mean's shape", true, false},
};

static int ln_infer(pardo_infer_ctx *ctx) {
    ln_geom g;
    pardo_type out[3];
    int rc = ln_geometry(ctx->op, ctx->in[0], pardo_nn_in_type(ctx, 1), pardo_nn_in_type(ctx, 2), &g, out, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < ctx->n_out && k < 3; k++) ctx->out[k] = out[k];
    return PARDO_OK;
}

/* The run-time types of X, scale and bias (absent ones stay NULL). */
static void ln_types(pardo_tensor *const *t, pardo_type *types, const pardo_type **ptrs) {
    for (int k = 0; k < 3; k++) {
        ptrs[k] = NULL;
        if (!t[k]) continue;
        types[k] = pardo_tensor_type(t[k]);
        ptrs[k] = &types[k];
    }
}

static int ln_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *in[3] = {ctx->in[0], pardo_nn_in(ctx, 1), pardo_nn_in(ctx, 2)}, *out[3] = {NULL, NULL, NULL};
    pardo_type types[3], ot[3];
    const pardo_type *tp[3];
    ln_geom g;
    ln_types(in, types, tp);
    int rc = ln_geometry(ctx->op, tp[0], tp[1], tp[2], &g, ot, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < ctx->n_out && k < 3; k++) {
        if (k > 0 && !pardo_kernel_wants_output(ctx, k)) continue;
        if (!(out[k] = pardo_kernel_output(ctx, k, ot[k].dtype, ot[k].ndim, ot[k].shape))) return ctx->st->code;
    }
    ln_job jb = {.g = g, .x = pardo_tensor_data(in[0]), .scale = in[1] ? pardo_tensor_data(in[1]) : NULL,
                 .bias = in[2] ? pardo_tensor_data(in[2]) : NULL};
    jb.g.dtype = in[0]->dtype;
    jb.y = pardo_tensor_data(out[0]);
    jb.mean = out[1] ? pardo_tensor_data(out[1]) : NULL;
    jb.inv = out[2] ? pardo_tensor_data(out[2]) : NULL;
    return pardo_run_rows(ctx, g.rows, g.n, ln_fwd_range, &jb);
}

const pardo_op_def pardo_op_layer_norm = {
    .type = "layer_norm",
    .doc = "layer normalisation (ONNX LayerNormalization): Y = (X - mean) / sqrt(var + epsilon) * scale + bias over "
           "dims axis..end",
    .inputs = ln_in,
    .n_inputs = 3,
    .outputs = ln_out,
    .n_outputs = 3,
    .attrs = ln_attrs,
    .n_attrs = 2,
    .infer = ln_infer,
    .cpu = ln_cpu,
    .cuda = pardo_cuda_layer_norm,
    .halves_in_f32 = true,
    .grad = pardo_grad_standard,
};

/* ---- layer_norm_grad ---- */

static const pardo_arg_def ln_grad_in[] = {
    {"X", "the forward input", false, false},
    {"scale", "the forward scale", true, false},
    {"bias", "the forward bias (not read)", true, false},
    {"Y", "the forward output (not read)", true, false},
    {"Mean", "the forward Mean output (not read: recomputed)", true, false},
    {"InvStdDev", "the forward InvStdDev output (not read: recomputed)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
    {"dMean", "gradient of Mean (\"\": zeros)", true, false},
    {"dInvStdDev", "gradient of InvStdDev (\"\": zeros)", true, false},
};
static const pardo_arg_def ln_grad_out[] = {
    {"dX", "gradient of X", true, false},
    {"dscale", "gradient of scale", true, false},
    {"dbias", "gradient of bias", true, false},
};

/* Checks the gradient op's inputs: the forward's, and dY, dMean, dInvStdDev
 * (NULL: absent) against the forward outputs' types. */
static int ln_grad_check(const pardo_op *op, const pardo_type *const *in, ln_geom *g, pardo_status *st) {
    pardo_type ot[3];
    int rc = ln_geometry(op, in[0], in[1], in[2], g, ot, st);
    static const char *const what[3] = {"input 6 'dY'", "input 7 'dMean'", "input 8 'dInvStdDev'"};
    static const char *const fwd[3] = {"the output Y of layer_norm", "the output Mean of layer_norm",
                                       "the output InvStdDev of layer_norm"};
    for (int k = 0; rc == PARDO_OK && k < 3; k++)
        if (in[6 + k]) rc = pardo_nn_expect_same(in[6 + k], what[k], &ot[k], fwd[k], st);
    return rc;
}

static int ln_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *in[9];
    ln_geom g;
    for (int k = 0; k < 9; k++) in[k] = pardo_nn_in_type(ctx, k);
    int rc = ln_grad_check(ctx->op, in, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *in[0];
    /* dscale and dbias: the normalised shape */
    pardo_type norm = {.dtype = in[0]->dtype, .ndim = -1};
    if (in[0]->ndim > 0) {
        norm.ndim = in[0]->ndim - g.axis;
        memcpy(norm.shape, in[0]->shape + g.axis, sizeof(int64_t) * (size_t)norm.ndim);
    }
    ctx->out[1] = ctx->out[2] = norm;
    return PARDO_OK;
}

static int ln_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *in[9];
    pardo_type types[9];
    const pardo_type *tp[9];
    ln_geom g;
    for (int k = 0; k < 9; k++) {
        in[k] = pardo_nn_in(ctx, k);
        tp[k] = NULL;
        if (in[k]) {
            types[k] = pardo_tensor_type(in[k]);
            tp[k] = &types[k];
        }
    }
    int rc = ln_grad_check(ctx->op, tp, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *x = in[0], *out[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        int nd = k == 0 ? x->ndim : x->ndim - g.axis;
        if (!(out[k] = pardo_nn_zeros(ctx, k, x->dtype, nd, x->shape + (k == 0 ? 0 : g.axis)))) return ctx->st->code;
    }
    ln_job jb = {.g = g, .x = pardo_tensor_data(x), .scale = in[1] ? pardo_tensor_data(in[1]) : NULL,
                 .dy = in[6] ? pardo_tensor_data(in[6]) : NULL, .dmean = in[7] ? pardo_tensor_data(in[7]) : NULL,
                 .dinv = in[8] ? pardo_tensor_data(in[8]) : NULL};
    jb.g.dtype = x->dtype;
    jb.dx = out[0] ? pardo_tensor_data(out[0]) : NULL;
    jb.dscale = out[1] ? pardo_tensor_data(out[1]) : NULL;
    jb.dbias = out[2] ? pardo_tensor_data(out[2]) : NULL;
    const bool cols = jb.dy && (jb.dscale || jb.dbias) && g.rows > 0 && g.n > 0;
    if (cols && !(jb.stats = pardo_scratch_get(PARDO_SCRATCH_STATS, sizeof(double) * 2 * (size_t)g.rows)))
        return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for the statistics of %lld rows",
                            (long long)g.rows);
    rc = jb.dx || cols ? pardo_run_rows(ctx, g.rows, g.n, ln_bwd_rows_range, &jb) : PARDO_OK;
    if (rc == PARDO_OK && cols)
        rc = pardo_run_rows(ctx, (g.n + LN_COL_BLOCK - 1) / LN_COL_BLOCK, LN_COL_BLOCK * g.rows, ln_bwd_cols_range,
                            &jb);
    return rc;
}

const pardo_op_def pardo_op_layer_norm_grad = {
    .type = "layer_norm_grad",
    .doc = "gradients of layer_norm: dX (through the row mean and variance), dscale, dbias",
    .inputs = ln_grad_in,
    .n_inputs = 9,
    .outputs = ln_grad_out,
    .n_outputs = 3,
    .attrs = ln_attrs,
    .n_attrs = 2,
    .infer = ln_grad_infer,
    .cpu = ln_grad_cpu,
    .cuda = pardo_cuda_layer_norm_grad,
};
