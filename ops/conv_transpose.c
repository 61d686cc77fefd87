/* conv_transpose.c - conv_transpose, ONNX ConvTranspose on NC(D)(H)W input
 * of 1 to 3 spatial dims: X [N, C, S...], weight W [C, M/group, K...],
 * optional bias B [M] -> Y [N, M, O...], per spatial axis
 *   O = stride * (S - 1) + output_padding + (K - 1) * dilation + 1
 *       - pad_begin - pad_end,
 * and Y[n, g * M/group + m, o] = B[.] + sum over c in group g and taps k
 * with o = i * stride - pad_begin + k * dilation of X[n, c, i] * W[c, m, k]
 * (the input gradient of a convolution). Attrs strides, pads (begins, then
 * ends, as ONNX), dilations, output_padding (each one value per spatial
 * axis; [] the default) and group. ONNX's output_shape and auto_pad are
 * resolved into pads and output_padding by the importer (src/io/onnx_ops.c).
 * And conv_transpose_grad (dX, dW, dB).
 *
 * The kernels are direct loops over a 3-D geometry (an input of fewer
 * spatial dims is seen with leading axes of size 1), each output plane
 * written by one item alone, so no sum depends on the thread split:
 *   forward: per output plane (n, m), Y = bias, then += each input
 *            element times its taps, in (c, i, k) order;
 *   dX:      per input plane (n, c), each element the sum in double over
 *            (m, k) of dY at its taps times W (a convolution of dY);
 *   dW:      per weight plane (c, m), each tap the sum in double over (n, i);
 *   dB:      per output channel, the sum of dY in double.
 * The planes are split over the kernel's threads (pardo_run_rows) for big
 * shapes. Nothing is allocated per call beyond the outputs. */
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

#define CT_DIMS 3 // spatial axes of the geometry the kernels run on

/* Sizes of one conv_transpose; -1 where unknown during inference. The
 * spatial arrays hold the op's nsp axes last, leading axes of size 1. */
typedef struct ct_geom {
    int nsp;                          // spatial axes of X: 1..3
    int64_t n, c, m, group, cg, mg;   // batch, input and output channels, groups, channels per group in and out
    int64_t in[CT_DIMS], k[CT_DIMS];  // input size, kernel taps
    int64_t out[CT_DIMS];             // output size
    int64_t s[CT_DIMS], d[CT_DIMS];   // strides, dilations
    int64_t pb[CT_DIMS], pe[CT_DIMS]; // pads at the begin and the end of each axis
    int64_t op[CT_DIMS];              // output_padding (added at the end)
    int64_t ip, kp, yp;               // elements of an input plane, a kernel plane, an output plane
} ct_geom;

static const pardo_attr_def ct_attrs[] = {
    {"strides", PARDO_ATTR_INTS, "[]", "one stride per spatial axis, each >= 1; [] (default): 1s"},
    {"pads", PARDO_ATTR_INTS, "[]", "begins then ends (2 per spatial axis), each >= 0; [] (default): 0s"},
    {"dilations", PARDO_ATTR_INTS, "[]", "one dilation per spatial axis, each >= 1; [] (default): 1s"},
    {"output_padding", PARDO_ATTR_INTS, "[]", "extra output at the end of each spatial axis, each >= 0; [] : 0s"},
    {"group", PARDO_ATTR_INT, "1", "channel groups; C and M must be divisible by it"},
};

/* Reads attr `name` as n values (per = values per axis) into out, leaving
 * the defaults where it is absent or []; each must be >= lo. */
static int read_axis_ints(const pardo_op *op, const char *name, int n, int64_t lo, int64_t *out, pardo_status *st) {
    int64_t v[2 * PARDO_MAX_DIMS];
    int got, rc = pardo_attr_ints(op, name, v, 2 * PARDO_MAX_DIMS, &got, st);
    if (rc != PARDO_OK) return rc;
    if (got <= 0) return PARDO_OK;
    if (got != n)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %d values, expected %d for the input's spatial axes", name,
                            got, n);
    for (int i = 0; i < n; i++) {
        if (v[i] < lo)
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %lld at position %d, expected >= %lld", name,
                                (long long)v[i], i, (long long)lo);
        out[i] = v[i];
    }
    return PARDO_OK;
}

/* Checks X, W and B (NULL: absent) against each other and the attrs, fills
 * g and, when y is not NULL, Y's type. The spatial rank comes from X, or
 * from W when X's rank is unknown. Used by inference (dims may be -1) and
 * again by the kernels on the run-time shapes. */
static int ct_geometry(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b,
                       ct_geom *g, pardo_type *y, pardo_status *st) {
    char sx[128], sw[128];
    int rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'X'", st)) != PARDO_OK) return rc;
    if (w->dtype != x->dtype)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' is %s but input 0 'X' is %s; expected the same dtype",
                            pardo_dtype_name(w->dtype), pardo_dtype_name(x->dtype));
    const int rank = x->ndim >= 0 ? x->ndim : w->ndim;
    if (rank < 0) return pardo_errorf(st, PARDO_ESHAPE, "the ranks of input 0 'X' and input 1 'W' are unknown");
    if (rank < 3 || rank > 2 + CT_DIMS)
        return pardo_errorf(st, PARDO_ESHAPE,
                            "input 0 'X' has rank %d, expected 3 to 5 ([N, C, spatial...] of 1 to 3 spatial axes)",
                            rank);
    if (w->ndim >= 0 && w->ndim != rank)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' has shape %s, expected rank %d ([C, M/group, kernel...])",
                            pardo_shape_str(w->ndim, w->shape, sw, sizeof sw), rank);
    const int nsp = rank - 2, o = CT_DIMS - nsp;
    g->nsp = nsp;
    for (int a = 0; a < CT_DIMS; a++) {
        g->in[a] = g->k[a] = g->s[a] = g->d[a] = 1;
        g->pb[a] = g->pe[a] = g->op[a] = 0;
    }
    int64_t pads[2 * CT_DIMS] = {0};
    if ((rc = read_axis_ints(op, "strides", nsp, 1, g->s + o, st)) != PARDO_OK ||
        (rc = read_axis_ints(op, "dilations", nsp, 1, g->d + o, st)) != PARDO_OK ||
        (rc = read_axis_ints(op, "output_padding", nsp, 0, g->op + o, st)) != PARDO_OK ||
        (rc = read_axis_ints(op, "pads", 2 * nsp, 0, pads, st)) != PARDO_OK)
        return rc;
    for (int i = 0; i < nsp; i++) {
        g->pb[o + i] = pads[i];
        g->pe[o + i] = pads[nsp + i];
    }
    if ((rc = pardo_attr_int(op, "group", 1, &g->group, st)) != PARDO_OK) return rc;
    if (g->group < 1) return pardo_errorf(st, PARDO_EINVAL, "attr 'group' is %lld, expected >= 1", (long long)g->group);
    const bool xr = x->ndim >= 0, wr = w->ndim >= 0;
    g->n = xr ? x->shape[0] : -1;
    g->c = xr ? x->shape[1] : -1;
    const int64_t wc = wr ? w->shape[0] : -1;
    g->mg = wr ? w->shape[1] : -1;
    for (int i = 0; i < nsp; i++) {
        g->in[o + i] = xr ? x->shape[2 + i] : -1;
        g->k[o + i] = wr ? w->shape[2 + i] : -1;
        if (g->k[o + i] == 0)
            return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' has shape %s, expected kernel sizes >= 1",
                                pardo_shape_str(w->ndim, w->shape, sw, sizeof sw));
    }
    if (g->c >= 0 && wc >= 0 && wc != g->c)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' has shape %s, expected dim 0 = C = %lld of input 0 'X' %s",
                            pardo_shape_str(w->ndim, w->shape, sw, sizeof sw), (long long)g->c,
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    if (g->c < 0) g->c = wc;
    if (g->c >= 0 && g->c % g->group != 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'group' is %lld but input 0 'X' has %lld channels, not divisible",
                            (long long)g->group, (long long)g->c);
    g->cg = g->c >= 0 ? g->c / g->group : -1;
    g->m = g->mg >= 0 ? g->mg * g->group : -1;
    if (b) {
        if (b->dtype != x->dtype)
            return pardo_errorf(st, PARDO_ESHAPE, "input 2 'B' is %s but input 0 'X' is %s; expected the same dtype",
                                pardo_dtype_name(b->dtype), pardo_dtype_name(x->dtype));
        if ((rc = pardo_nn_expect_rank(b, "input 2 'B'", 1, "[M]", st)) != PARDO_OK) return rc;
        if (b->ndim == 1 && b->shape[0] >= 0 && g->m >= 0 && b->shape[0] != g->m)
            return pardo_errorf(st, PARDO_ESHAPE,
                                "input 2 'B' has %lld values, expected M = %lld (dim 1 of 'W' %s times attr 'group')",
                                (long long)b->shape[0], (long long)g->m,
                                pardo_shape_str(w->ndim, w->shape, sw, sizeof sw));
    }
    g->ip = g->kp = g->yp = 1;
    for (int a = 0; a < CT_DIMS; a++) {
        if (g->in[a] < 0 || g->k[a] < 0) {
            g->out[a] = -1;
            continue;
        }
        if (g->in[a] == 0)
            return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' %s has an empty spatial axis, expected sizes >= 1",
                                pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
        g->out[a] = g->s[a] * (g->in[a] - 1) + g->op[a] + (g->k[a] - 1) * g->d[a] + 1 - g->pb[a] - g->pe[a];
        if (g->out[a] < 1)
            return pardo_errorf(st, PARDO_ESHAPE,
                                "spatial axis %d: attr 'pads' (%lld + %lld) leave %lld outputs of the full %lld "
                                "(input %lld, kernel %lld), expected at least 1",
                                a - o, (long long)g->pb[a], (long long)g->pe[a], (long long)g->out[a],
                                (long long)(g->out[a] + g->pb[a] + g->pe[a]), (long long)g->in[a],
                                (long long)g->k[a]);
        g->ip *= g->in[a];
        g->kp *= g->k[a];
        g->yp *= g->out[a];
    }
    if (y) {
        y->dtype = x->dtype;
        y->ndim = rank;
        y->shape[0] = g->n;
        y->shape[1] = g->m;
        for (int i = 0; i < nsp; i++) y->shape[2 + i] = g->out[o + i];
    }
    return PARDO_OK;
}

/* The geometry of a kernel's concrete X, W and B (NULL: absent). */
static int ct_geometry_run(const pardo_op *op, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b,
                           ct_geom *g, pardo_type *y, pardo_status *st) {
    pardo_type tx = pardo_tensor_type(x), tw = pardo_tensor_type(w), tb;
    if (b) tb = pardo_tensor_type(b);
    return ct_geometry(op, &tx, &tw, b ? &tb : NULL, g, y, st);
}

/* One run of a kernel over planes, shared with the items. */
typedef struct ct_job {
    const ct_geom *g;
    const void *x, *w, *b, *dy; // b: NULL, no bias
    void *out;                  // Y, dX, dW or dB
} ct_job;

/* For tap k along axis a: the inputs i in [*lo, *hi) whose output i * s -
 * pb + k * d lies in [0, out). */
static void tap_range(const ct_geom *g, int a, int64_t k, int64_t *lo, int64_t *hi) {
    const int64_t off = k * g->d[a] - g->pb[a], s = g->s[a];
    /* 0 <= i * s + off < out */
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s, h = g->out[a] - off <= 0 ? 0 : (g->out[a] - off - 1) / s + 1;
    if (h > g->in[a]) h = g->in[a];
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Defines the kernels of element type T with suffix SUF, each over items
 * [p0, p1): fwd_SUF (output planes (n, m)), dx_SUF (input planes (n, c)),
 * dw_SUF (weight planes (c, m)) and db_SUF (output channels). */
#define CT_KERNELS(SUF, T)                                                                                             \
    static void fwd_##SUF(void *arg, int64_t p0, int64_t p1) {                                                         \
        const ct_job *j = arg;                                                                                         \
        const ct_geom *g = j->g;                                                                                       \
        const T *x = j->x, *w = j->w, *b = j->b;                                                                       \
        T *y = j->out;                                                                                                 \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const int64_t n = pl / g->m, oc = pl % g->m, grp = oc / g->mg, m = oc % g->mg;                             \
            T *yp = y + pl * g->yp;                                                                                    \
            const T bv = b ? b[oc] : (T)0;                                                                             \
            for (int64_t e = 0; e < g->yp; e++) yp[e] = bv;                                                            \
            for (int64_t c = grp * g->cg; c < (grp + 1) * g->cg; c++) {                                                \
                const T *xp = x + (n * g->c + c) * g->ip, *wp = w + (c * g->mg + m) * g->kp;                           \
                for (int64_t k0 = 0; k0 < g->k[0]; k0++) {                                                             \
                    int64_t a0, b0;                                                                                    \
                    tap_range(g, 0, k0, &a0, &b0);                                                                     \
                    for (int64_t k1 = 0; k1 < g->k[1]; k1++) {                                                         \
                        int64_t a1, b1;                                                                                \
                        tap_range(g, 1, k1, &a1, &b1);                                                                 \
                        for (int64_t k2 = 0; k2 < g->k[2]; k2++) {                                                     \
                            int64_t a2, b2;                                                                            \
                            tap_range(g, 2, k2, &a2, &b2);                                                             \
                            const T wv = wp[(k0 * g->k[1] + k1) * g->k[2] + k2];                                       \
                            const int64_t off2 = k2 * g->d[2] - g->pb[2];                                              \
                            for (int64_t i0 = a0; i0 < b0; i0++) {                                                     \
                                const int64_t o0 = i0 * g->s[0] - g->pb[0] + k0 * g->d[0];                             \
                                for (int64_t i1 = a1; i1 < b1; i1++) {                                                 \
                                    const int64_t o1 = i1 * g->s[1] - g->pb[1] + k1 * g->d[1];                         \
                                    const T *xr = xp + (i0 * g->in[1] + i1) * g->in[2];                                \
                                    const int64_t yb = (o0 * g->out[1] + o1) * g->out[2] + off2;                       \
                                    for (int64_t i2 = a2; i2 < b2; i2++) yp[yb + i2 * g->s[2]] += xr[i2] * wv;         \
                                }                                                                                      \
                            }                                                                                          \
                        }                                                                                              \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    static void dx_##SUF(void *arg, int64_t p0, int64_t p1) {                                                          \
        const ct_job *j = arg;                                                                                         \
        const ct_geom *g = j->g;                                                                                       \
        const T *dy = j->dy, *w = j->w;                                                                                \
        T *dx = j->out;                                                                                                \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const int64_t n = pl / g->c, c = pl % g->c, grp = c / g->cg;                                               \
            T *dxp = dx + pl * g->ip;                                                                                  \
            for (int64_t i0 = 0; i0 < g->in[0]; i0++)                                                                  \
                for (int64_t i1 = 0; i1 < g->in[1]; i1++)                                                              \
                    for (int64_t i2 = 0; i2 < g->in[2]; i2++) {                                                        \
                        double s = 0;                                                                                  \
                        for (int64_t m = 0; m < g->mg; m++) {                                                          \
                            const T *dyp = dy + (n * g->m + grp * g->mg + m) * g->yp;                                  \
                            const T *wp = w + (c * g->mg + m) * g->kp;                                                 \
                            for (int64_t k0 = 0; k0 < g->k[0]; k0++) {                                                 \
                                const int64_t o0 = i0 * g->s[0] - g->pb[0] + k0 * g->d[0];                             \
                                if (o0 < 0 || o0 >= g->out[0]) continue;                                               \
                                for (int64_t k1 = 0; k1 < g->k[1]; k1++) {                                             \
                                    const int64_t o1 = i1 * g->s[1] - g->pb[1] + k1 * g->d[1];                         \
                                    if (o1 < 0 || o1 >= g->out[1]) continue;                                           \
                                    for (int64_t k2 = 0; k2 < g->k[2]; k2++) {                                         \
                                        const int64_t o2 = i2 * g->s[2] - g->pb[2] + k2 * g->d[2];                     \
                                        if (o2 < 0 || o2 >= g->out[2]) continue;                                       \
                                        s += (double)dyp[(o0 * g->out[1] + o1) * g->out[2] + o2] *                     \
                                             (double)wp[(k0 * g->k[1] + k1) * g->k[2] + k2];                           \
                                    }                                                                                  \
                                }                                                                                      \
                            }                                                                                          \
                        }                                                                                              \
                        dxp[(i0 * g->in[1] + i1) * g->in[2] + i2] = (T)s;                                              \
                    }                                                                                                  \
        }                                                                                                              \
    }                                                                                                                  \
    static void dw_##SUF(void *arg, int64_t p0, int64_t p1) {                                                          \
        const ct_job *j = arg;                                                                                         \
        const ct_geom *g = j->g;                                                                                       \
        const T *x = j->x, *dy = j->dy;                                                                                \
        T *dw = j->out;                                                                                                \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const int64_t c = pl / g->mg, m = pl % g->mg, oc = (c / g->cg) * g->mg + m;                                \
            for (int64_t k0 = 0; k0 < g->k[0]; k0++) {                                                                 \
                int64_t a0, b0;                                                                                        \
                tap_range(g, 0, k0, &a0, &b0);                                                                         \
                for (int64_t k1 = 0; k1 < g->k[1]; k1++) {                                                             \
                    int64_t a1, b1;                                                                                    \
                    tap_range(g, 1, k1, &a1, &b1);                                                                     \
                    for (int64_t k2 = 0; k2 < g->k[2]; k2++) {                                                         \
                        int64_t a2, b2;                                                                                \
                        tap_range(g, 2, k2, &a2, &b2);                                                                 \
                        const int64_t off2 = k2 * g->d[2] - g->pb[2];                                                  \
                        double s = 0;                                                                                  \
                        for (int64_t n = 0; n < g->n; n++) {                                                           \
                            const T *xp = x + (n * g->c + c) * g->ip, *dyp = dy + (n * g->m + oc) * g->yp;             \
                            for (int64_t i0 = a0; i0 < b0; i0++) {                                                     \
                                const int64_t o0 = i0 * g->s[0] - g->pb[0] + k0 * g->d[0];                             \
                                for (int64_t i1 = a1; i1 < b1; i1++) {                                                 \
                                    const int64_t o1 = i1 * g->s[1] - g->pb[1] + k1 * g->d[1];                         \
                                    const T *xr = xp + (i0 * g->in[1] + i1) * g->in[2];                                \
                                    const int64_t yb = (o0 * g->out[1] + o1) * g->out[2] + off2;                       \
                                    for (int64_t i2 = a2; i2 < b2; i2++)                                               \
                                        s += (double)xr[i2] * (double)dyp[yb + i2 * g->s[2]];                          \
                                }                                                                                      \
                            }                                                                                          \
                        }                                                                                              \
                        dw[pl * g->kp + (k0 * g->k[1] + k1) * g->k[2] + k2] = (T)s;                                    \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    static void db_##SUF(void *arg, int64_t p0, int64_t p1) {                                                          \
        const ct_job *j = arg;                                                                                         \
        const ct_geom *g = j->g;                                                                                       \
        const T *dy = j->dy;                                                                                           \
        T *db = j->out;                                                                                                \
        for (int64_t oc = p0; oc < p1; oc++) {                                                                         \
            double s = 0;                                                                                              \
            for (int64_t n = 0; n < g->n; n++) {                                                                       \
                const T *dyp = dy + (n * g->m + oc) * g->yp;                                                           \
                for (int64_t e = 0; e < g->yp; e++) s += (double)dyp[e];                                               \
            }                                                                                                          \
            db[oc] = (T)s;                                                                                             \
        }                                                                                                              \
    }

CT_KERNELS(f32, float)
CT_KERNELS(f64, double)

static const pardo_arg_def ct_in[] = {
    {"X", "input [N, C, spatial...] of 1 to 3 spatial axes (float32 or float64)", false, false},
    {"W", "weight [C, M/group, kernel...], X's dtype", false, false},
    {"B", "bias [M], X's dtype", true, false},
};
static const pardo_arg_def ct_out[] = {{"Y", "output [N, M, out...]", false, false}};

static int ct_infer(pardo_infer_ctx *ctx) {
    ct_geom g;
    return ct_geometry(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 2), &g, &ctx->out[0], ctx->st);
}

static int ct_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in(ctx, 2);
    ct_geom g;
    pardo_type ty;
    int rc = ct_geometry_run(ctx->op, x, w, b, &g, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    ct_job j = {.g = &g, .x = pardo_tensor_data(x), .w = pardo_tensor_data(w), .b = b ? pardo_tensor_data(b) : NULL,
                .out = pardo_tensor_data(y)};
    return pardo_run_rows(ctx, g.n * g.m, g.cg * g.ip * g.kp, x->dtype == PARDO_F32 ? fwd_f32 : fwd_f64, &j);
}

/* conv_transpose_grad does not read Y: it is left out (""), so Y dies after its forward readers. */
static int ct_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_conv_transpose = {
    .type = "conv_transpose",
    .doc = "transposed convolution of 1 to 3 spatial axes (ONNX ConvTranspose, NC...): each input element times the "
           "kernel added into the output at stride steps, with pads, dilations, output_padding and groups, plus B",
    .inputs = ct_in,
    .n_inputs = 3,
    .outputs = ct_out,
    .n_outputs = 1,
    .attrs = ct_attrs,
    .n_attrs = 5,
    .infer = ct_infer,
    .cpu = ct_cpu,
    .halves_in_f32 = true,
    .grad = ct_grad_build,
};

/* ---- conv_transpose_grad ---- */

static const pardo_arg_def ct_grad_in[] = {
    {"X", "the forward input", false, false},
    {"W", "the forward weight", false, false},
    {"B", "the forward bias (not read)", true, false},
    {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def ct_grad_out[] = {
    {"dX", "gradient of X (a convolution of dY by W)", true, false},
    {"dW", "gradient of W", true, false},
    {"dB", "gradient of B", true, false},
};

/* The forward geometry from the gradient op's inputs; checks dY (when given) against Y's type. */
static int ct_grad_check(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b,
                         const pardo_type *dy, ct_geom *g, pardo_status *st) {
    pardo_type ty;
    int rc = ct_geometry(op, x, w, b, g, &ty, st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 4 'dY'", &ty, "the output of conv_transpose", st);
    return rc;
}

static int ct_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *w = ctx->in[1];
    ct_geom g;
    int rc = ct_grad_check(ctx->op, x, w, pardo_nn_in_type(ctx, 2), pardo_nn_in_type(ctx, 4), &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    ctx->out[1] = *w;
    ctx->out[2].dtype = x->dtype;
    ctx->out[2].ndim = 1;
    ctx->out[2].shape[0] = g.m;
    return PARDO_OK;
}

static int ct_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in(ctx, 2), *dy = pardo_nn_in(ctx, 4);
    pardo_type tx = pardo_tensor_type(x), tw = pardo_tensor_type(w), tb, tdy;
    if (b) tb = pardo_tensor_type(b);
    if (dy) tdy = pardo_tensor_type(dy);
    ct_geom g;
    int rc = ct_grad_check(ctx->op, &tx, &tw, b ? &tb : NULL, dy ? &tdy : NULL, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    const bool f32 = x->dtype == PARDO_F32;
    pardo_tensor *outs[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (!pardo_kernel_wants_output(ctx, i)) continue;
        const pardo_tensor *like = i == 0 ? x : w;
        outs[i] = i < 2 ? pardo_kernel_output(ctx, i, x->dtype, like->ndim, like->shape)
                        : pardo_kernel_output(ctx, i, x->dtype, 1, &g.m);
        if (!outs[i]) return ctx->st->code;
        if (!dy || outs[i]->numel == 0) pardo_tensor_zero(outs[i]);
    }
    if (!dy) return PARDO_OK;
    ct_job j = {.g = &g, .x = pardo_tensor_data(x), .w = pardo_tensor_data(w), .dy = pardo_tensor_data(dy)};
    if (outs[0] && outs[0]->numel) {
        j.out = pardo_tensor_data(outs[0]);
        if ((rc = pardo_run_rows(ctx, g.n * g.c, g.mg * g.ip * g.kp, f32 ? dx_f32 : dx_f64, &j)) != PARDO_OK)
            return rc;
    }
    if (outs[1] && outs[1]->numel) {
        j.out = pardo_tensor_data(outs[1]);
        if ((rc = pardo_run_rows(ctx, g.c * g.mg, g.n * g.ip * g.kp, f32 ? dw_f32 : dw_f64, &j)) != PARDO_OK)
            return rc;
    }
    if (outs[2] && outs[2]->numel) {
        j.out = pardo_tensor_data(outs[2]);
        if ((rc = pardo_run_rows(ctx, g.m, g.n * g.yp, f32 ? db_f32 : db_f64, &j)) != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_conv_transpose_grad = {
    .type = "conv_transpose_grad",
    .doc = "gradients of conv_transpose: dX (dY convolved with W), dW (X correlated with dY), dB (sum of dY)",
    .inputs = ct_grad_in,
    .n_inputs = 5,
    .outputs = ct_grad_out,
    .n_outputs = 3,
    .attrs = ct_attrs,
    .n_attrs = 5,
    .infer = ct_grad_infer,
    .cpu = ct_grad_cpu,
};
