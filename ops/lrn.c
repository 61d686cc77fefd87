/* lrn.c - lrn, ONNX LRN (local response normalization across channels) on
 * X [N, C, spatial...] (rank >= 3): with the channel window of c the
 * channels [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to
 * [0, C),
 *   S[n, c, s] = bias + alpha / size * sum over the window of X[n, c', s]^2,
 *   Y = X * S^-beta.
 * Attrs size (required, >= 1), alpha (1e-4), beta (0.75), bias (1.0, > 0).
 * And lrn_grad: with A = alpha / size,
 *   dX[c] = dY[c] * S[c]^-beta - 2 A beta X[c] * sum over the channels i
 *           whose window holds c of dY[i] X[i] S[i]^(-beta - 1).
 * The kernels run row by row ((n, c): one channel of one image, every
 * spatial element), in double, the rows split over the kernel's threads
 * (pardo_run_rows): each row is one item's alone. Nothing is allocated. */
#include <math.h>
#include <stdio.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

typedef struct lrn_geom {
    int64_t n, c, inner; // batch, channels, spatial elements per channel
    int64_t lo, hi;      // channels before and after c in its window
    double a, beta, bias; // alpha / size, beta, bias
} lrn_geom;

static const pardo_attr_def lrn_attrs[] = {
    {"size", PARDO_ATTR_INT, NULL, "channels in the window, >= 1 (required)"},
    {"alpha", PARDO_ATTR_FLOAT, "0.0001", "scale of the sum of squares (divided by size)"},
    {"beta", PARDO_ATTR_FLOAT, "0.75", "exponent"},
    {"bias", PARDO_ATTR_FLOAT, "1.0", "added to the scaled sum of squares, > 0"},
};

/* Reads the attrs and X's type into g (inner -1 where unknown). */
static int lrn_geometry(const pardo_op *op, const pardo_type *x, lrn_geom *g, pardo_status *st) {
    char sx[128];
    int64_t size;
    double alpha;
    int rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'X'", st)) != PARDO_OK) return rc;
    if (x->ndim >= 0 && x->ndim < 3)
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' has shape %s, expected rank >= 3 ([N, C, spatial...])",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    if ((rc = pardo_attr_int(op, "size", -1, &size, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "alpha", 1e-4, &alpha, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "beta", 0.75, &g->beta, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "bias", 1.0, &g->bias, st)) != PARDO_OK)
        return rc;
    if (size < 1) return pardo_errorf(st, PARDO_EINVAL, "attr 'size' is %lld, expected >= 1 (it is required)",
                                      (long long)size);
    if (!(g->bias > 0) || !isfinite(g->bias))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'bias' is %g, expected a finite value > 0", g->bias);
    if (!isfinite(alpha) || alpha < 0 || !isfinite(g->beta))
        return pardo_errorf(st, PARDO_EINVAL, "attrs 'alpha' %g and 'beta' %g: expected finite, alpha >= 0", alpha,
                            g->beta);
    g->a = alpha / (double)size;
    g->lo = (size - 1) / 2;
    g->hi = size - 1 - g->lo;
    g->n = x->ndim >= 0 ? x->shape[0] : -1;
    g->c = x->ndim >= 0 ? x->shape[1] : -1;
    g->inner = x->ndim >= 0 ? 1 : -1;
    for (int i = 2; i < x->ndim; i++) g->inner = g->inner < 0 || x->shape[i] < 0 ? -1 : g->inner * x->shape[i];
    return PARDO_OK;
}

typedef struct lrn_job {
    const lrn_geom *g;
    const void *x, *dy;
    void *out; // Y or dX
} lrn_job;

/* Defines S_SUF (S at channel c, element s of image n's rows from xn), and
 * the kernels fwd_SUF and bwd_SUF over rows (n, c) [r0, r1). */
#define LRN_KERNELS(SUF, T)                                                                                            \
    static double s_##SUF(const lrn_geom *g, const T *xn, int64_t c, int64_t s) {                                      \
        const int64_t c0 = c - g->lo < 0 ? 0 : c - g->lo, c1 = c + g->hi >= g->c ? g->c - 1 : c + g->hi;               \
        double q = 0;                                                                                                  \
        for (int64_t i = c0; i <= c1; i++) {                                                                           \
            const double v = (double)xn[i * g->inner + s];                                                             \
            q += v * v;                                                                                                \
        }                                                                                                              \
        return g->bias + g->a * q;                                                                                     \
    }                                                                                                                  \
    static void fwd_##SUF(void *arg, int64_t r0, int64_t r1) {                                                         \
        const lrn_job *j = arg;                                                                                        \
        const lrn_geom *g = j->g;                                                                                      \
        const T *x = j->x;                                                                                             \
        T *y = j->out;                                                                                                 \
        for (int64_t r = r0; r < r1; r++) {                                                                            \
            const T *xn = x + (r / g->c) * g->c * g->inner;                                                            \
            const int64_t c = r % g->c;                                                                                \
            for (int64_t s = 0; s < g->inner; s++)                                                                     \
                y[r * g->inner + s] = (T)((double)x[r * g->inner + s] * pow(s_##SUF(g, xn, c, s), -g->beta));          \
        }                                                                                                              \
    }                                                                                                                  \
    static void bwd_##SUF(void *arg, int64_t r0, int64_t r1) {                                                         \
        const lrn_job *j = arg;                                                                                        \
        const lrn_geom *g = j->g;                                                                                      \
        const T *x = j->x, *dy = j->dy;                                                                                \
        T *dx = j->out;                                                                                                \
        for (int64_t r = r0; r < r1; r++) {                                                                            \
            const int64_t base = (r / g->c) * g->c * g->inner, c = r % g->c;                                           \
            const T *xn = x + base, *dyn = dy + base;                                                                  \
            /* the channels i whose window [i - lo, i + hi] holds c */                                                 \
            const int64_t i0 = c - g->hi < 0 ? 0 : c - g->hi, i1 = c + g->lo >= g->c ? g->c - 1 : c + g->lo;           \
            for (int64_t s = 0; s < g->inner; s++) {                                                                   \
                double t = 0;                                                                                          \
                for (int64_t i = i0; i <= i1; i++)                                                                     \
                    t += (double)dyn[i * g->inner + s] * (double)xn[i * g->inner + s] *                                \
                         pow(s_##SUF(g, xn, i, s), -g->beta - 1);                                                      \
                const double xc = (double)xn[c * g->inner + s];                                                        \
                dx[r * g->inner + s] = (T)((double)dyn[c * g->inner + s] * pow(s_##SUF(g, xn, c, s), -g->beta) -       \
                                           2 * g->a * g->beta * xc * t);                                               \
            }                                                                                                          \
        }                                                                                                              \
    }

LRN_KERNELS(f32, float)
LRN_KERNELS(f64, double)

static const pardo_arg_def lrn_in[] = {{"X", "input [N, C, spatial...] (float32 or float64)", false, false}};
static const pardo_arg_def lrn_out[] = {{"Y", "output, X's type", false, false}};

static int lrn_infer(pardo_infer_ctx *ctx) {
    lrn_geom g;
    int rc = lrn_geometry(ctx->op, ctx->in[0], &g, ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

static int lrn_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_type tx = pardo_tensor_type(x);
    lrn_geom g;
    int rc = lrn_geometry(ctx->op, &tx, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    lrn_job j = {.g = &g, .x = pardo_tensor_data(x), .out = pardo_tensor_data(y)};
    return pardo_run_rows(ctx, g.n * g.c, g.inner * (g.lo + g.hi + 1), x->dtype == PARDO_F32 ? fwd_f32 : fwd_f64, &j);
}

/* lrn_grad recomputes S from X: Y is left out (""). */
static int lrn_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_lrn = {
    .type = "lrn",
    .doc = "local response normalization across channels (ONNX LRN): Y = X / (bias + alpha / size * sum of X^2 over "
           "size neighbouring channels)^beta",
    .inputs = lrn_in,
    .n_inputs = 1,
    .outputs = lrn_out,
    .n_outputs = 1,
    .attrs = lrn_attrs,
    .n_attrs = 4,
    .infer = lrn_infer,
    .cpu = lrn_cpu,
    .halves_in_f32 = true,
    .grad = lrn_grad_build,
};

static const pardo_arg_def lrn_grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def lrn_grad_out[] = {{"dX", "gradient of X", true, false}};

static int lrn_grad_infer(pardo_infer_ctx *ctx) {
    lrn_geom g;
    const pardo_type *dy = pardo_nn_in_type(ctx, 2);
    int rc = lrn_geometry(ctx->op, ctx->in[0], &g, ctx->st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 2 'dY'", ctx->in[0], "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

static int lrn_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = pardo_nn_in(ctx, 2);
    pardo_type tx = pardo_tensor_type(x);
    lrn_geom g;
    int rc = lrn_geometry(ctx->op, &tx, &g, ctx->st);
    if (rc == PARDO_OK && dy) {
        pardo_type tdy = pardo_tensor_type(dy);
        rc = pardo_nn_expect_same(&tdy, "input 2 'dY'", &tx, "input 0 'X'", ctx->st);
    }
    if (rc != PARDO_OK) return rc;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!dy) return pardo_nn_zeros(ctx, 0, x->dtype, x->ndim, x->shape) ? PARDO_OK : ctx->st->code;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    lrn_job j = {.g = &g, .x = pardo_tensor_data(x), .dy = pardo_tensor_data(dy), .out = pardo_tensor_data(dx)};
    const int64_t w = g.lo + g.hi + 1;
    return pardo_run_rows(ctx, g.n * g.c, g.inner * w * w, x->dtype == PARDO_F32 ? bwd_f32 : bwd_f64, &j);
}

const pardo_op_def pardo_op_lrn_grad = {
    .type = "lrn_grad",
    .doc = "gradient of lrn (S recomputed from X)",
    .inputs = lrn_grad_in,
    .n_inputs = 3,
    .outputs = lrn_grad_out,
    .n_outputs = 1,
    .attrs = lrn_attrs,
    .n_attrs = 4,
    .infer = lrn_grad_infer,
    .cpu = lrn_grad_cpu,
};
