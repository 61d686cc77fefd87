/* pool.c - max_pool2d and avg_pool2d (ONNX MaxPool and AveragePool on NCHW
 * input X [N, C, H, W] -> Y [N, C, oH, oW]) and their gradients. Attrs:
 * kernel [kH, kW] (required), strides (default: the kernel), pads [top,
 * left, bottom, right] (default zeros); no dilations, no ceil mode. Padding
 * is never read: each window is clipped to the input. Every pad must be
 * smaller than the kernel along its axis, so every window holds at least one
 * input element.
 *
 * avg_pool2d has ONNX's default count_include_pad = 0: a window's sum is
 * divided by the number of input elements inside it, not by kH * kW.
 * max_pool2d takes the first maximum of a window in row-major order (strict
 * >), and max_pool2d_grad routes each output gradient to that element.
 * max_pool2d takes every numeric dtype (it compares and copies; float16 and
 * bfloat16 compare as the values they encode), the rest float32 or float64.
 * The kernels work plane by plane ((n, c)), the planes split over the
 * kernel's threads for big inputs; 2x2 windows with strides 2 and no pads
 * (the usual pooling) run as vectorised row loops. Nothing is allocated
 * per call. */
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "kernels.h"
#include "nn_util.h"
#include "op.h"
#include "window2d.h"

typedef struct pool_geom {
    int64_t n, c, h, w; // input batch, channels, height, width; -1 unknown
    int64_t oh, ow;     // output height, width
    pardo_window2d win; // kernel, strides, pads (dilation 1)
} pool_geom;

static const pardo_attr_def pool_attrs[] = {
    {"kernel", PARDO_ATTR_INTS, NULL, "[kH, kW] window size, each >= 1"},
    {"strides", PARDO_ATTR_INTS, "[]", "[stride_h, stride_w], each >= 1; [] (default): the kernel"},
    {"pads", PARDO_ATTR_INTS, "[0, 0, 0, 0]", "[top, left, bottom, right], each >= 0 and below the kernel"},
};

/* Reads the attrs and X's type into g and Y's type into y (may be NULL).
 * Inference (dims may be -1) and kernels both use it. any_order: X may have
 * any ordered dtype (max_pool2d), else float32 or float64. */
static int pool_geometry(const pardo_op *op, const pardo_type *x, bool any_order, pool_geom *g, pardo_type *y,
                         pardo_status *st) {
    int64_t k[PARDO_MAX_DIMS];
    int nk, rc;
    if ((rc = any_order ? pardo_expect_ordered(x, "input 0 'X'", st) : pardo_nn_expect_float(x, "input 0 'X'", st)) !=
            PARDO_OK ||
        (rc = pardo_nn_expect_rank(x, "input 0 'X'", 4, "[N, C, H, W]", st)) != PARDO_OK)
        return rc;
    if ((rc = pardo_attr_ints(op, "kernel", k, PARDO_MAX_DIMS, &nk, st)) != PARDO_OK) return rc;
    if (nk < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' is required ([kH, kW])");
    if (nk != 2) return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' has %d values, expected 2 ([kH, kW])", nk);
    if (k[0] < 1 || k[1] < 1)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' is [%lld, %lld], expected sizes >= 1", (long long)k[0],
                            (long long)k[1]);
    if ((rc = pardo_window2d_attrs(op, k, false, &g->win, st)) != PARDO_OK) return rc;
    g->win.kernel[0] = k[0];
    g->win.kernel[1] = k[1];
    static const char *const axis[2] = {"height", "width"};
    for (int i = 0; i < 4; i++)
        if (g->win.pad[i] >= k[i % 2])
            return pardo_errorf(st, PARDO_EINVAL,
                                "attr 'pads' has %lld along the %s, expected less than attr 'kernel' (%lld) so that "
                                "every window holds an input element",
                                (long long)g->win.pad[i], axis[i % 2], (long long)k[i % 2]);
    const bool xr = x->ndim == 4;
    g->n = xr ? x->shape[0] : -1;
    g->c = xr ? x->shape[1] : -1;
    g->h = xr ? x->shape[2] : -1;
    g->w = xr ? x->shape[3] : -1;
    if ((rc = pardo_window2d_out_size(&g->win, 0, g->h, "attr 'kernel'", &g->oh, st)) != PARDO_OK ||
        (rc = pardo_window2d_out_size(&g->win, 1, g->w, "attr 'kernel'", &g->ow, st)) != PARDO_OK)
        return rc;
    if (y) {
        y->dtype = x->dtype;
        y->ndim = 4;
        y->shape[0] = g->n;
        y->shape[1] = g->c;
        y->shape[2] = g->oh;
        y->shape[3] = g->ow;
    }
    return PARDO_OK;
}

/* True for the common window: 2x2, strides 2, no pads (the windows tile
 * the input, leaving at most its last row and column out). */
static bool pool_is_2x2(const pool_geom *g) {
    const pardo_window2d *p = &g->win;
    return p->kernel[0] == 2 && p->kernel[1] == 2 && p->stride[0] == 2 && p->stride[1] == 2 && p->pad[0] == 0 &&
           p->pad[1] == 0 && p->pad[2] == 0 && p->pad[3] == 0;
}

/* Defines max_pool2d's forward for element type T (compared as LOAD(v): the
 * value it encodes) with suffix SUF: maxpool_argmax_SUF (the first maximum of
 * a window in row-major order, strict >), max2x2_row_SUF and maxpool_fwd_SUF
 * on the planes [p0, p1). It only compares and copies: every ordered dtype
 * (PARDO_FOR_ORDERED_DTYPES) gets it, the maximum's bits as stored. */
#define MAXPOOL_FWD(SUF, T, LOAD)                                                                                      \
    static int64_t maxpool_argmax_##SUF(const pool_geom *g, const T *xp, int64_t oh, int64_t ow) {                     \
        int64_t h0, h1, w0, w1;                                                                                        \
        pardo_window2d_clip(&g->win, 0, oh, g->h, &h0, &h1);                                                           \
        pardo_window2d_clip(&g->win, 1, ow, g->w, &w0, &w1);                                                           \
        int64_t best = h0 * g->w + w0;                                                                                 \
        for (int64_t ih = h0; ih < h1; ih++)                                                                           \
            for (int64_t iw = w0; iw < w1; iw++)                                                                       \
                if (LOAD(xp[ih * g->w + iw]) > LOAD(xp[best])) best = ih * g->w + iw;                                 \
        return best;                                                                                                   \
    }                                                                                                                  \
    /* one output row of the 2x2 windows from input rows a and b */                                                    \
    PARDO_WINDOW2D_LOOPS static void max2x2_row_##SUF(const T *restrict a, const T *restrict b, T *restrict y,         \
                                                      int64_t n) {                                                     \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            T m = a[2 * i];                                                                                            \
            m = LOAD(a[2 * i + 1]) > LOAD(m) ? a[2 * i + 1] : m;                                                       \
            m = LOAD(b[2 * i]) > LOAD(m) ? b[2 * i] : m;                                                               \
            y[i] = LOAD(b[2 * i + 1]) > LOAD(m) ? b[2 * i + 1] : m;                                                    \
        }                                                                                                              \
    }                                                                                                                  \
    static void maxpool_fwd_##SUF(const pool_geom *g, const void *vx, const void *vdy, void *vy, int64_t p0,           \
                                  int64_t p1) {                                                                        \
        (void)vdy;                                                                                                     \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        const bool two = pool_is_2x2(g);                                                                               \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const T *xp = x + pl * g->h * g->w;                                                                        \
            T *yp = y + pl * g->oh * g->ow;                                                                            \
            for (int64_t oh = 0; oh < g->oh; oh++)                                                                     \
                if (two)                                                                                               \
                    max2x2_row_##SUF(xp + 2 * oh * g->w, xp + (2 * oh + 1) * g->w, yp + oh * g->ow, g->ow);            \
                else                                                                                                   \
                    for (int64_t ow = 0; ow < g->ow; ow++)                                                             \
                        yp[oh * g->ow + ow] = xp[maxpool_argmax_##SUF(g, xp, oh, ow)];                                 \
        }                                                                                                              \
    }

PARDO_FOR_ORDERED_DTYPES(MAXPOOL_FWD)

/* Defines the other pool kernels of float type T (U: an unsigned integer of
 * its size) with suffix SUF, each on the planes (n, c) [p0, p1):
 * maxpool_bwd_SUF (dX = dY at the first max of each window, 0 elsewhere),
 * avgpool_fwd_SUF (sum in double / count), avgpool_bwd_SUF (dX = sum of dY
 * / count over the windows holding each element). Each writes every element
 * of its planes of the output.
 * The 2x2 windows with strides 2 run as rows of simple loops the compiler
 * vectorises (the same arithmetic and the same first maximum); the others
 * walk each window clipped to the input. */
#define POOL_KERNELS(SUF, T, U)                                                                                        \
    PARDO_WINDOW2D_LOOPS static void max2x2_grad_row_##SUF(const T *restrict a, const T *restrict b,                   \
                                                           const T *restrict dy, T *restrict da, T *restrict db,       \
                                                           int64_t n) {                                                \
        /* the gradient goes to x3 if it beats the maximum of x0..x2, what is left of it to x2 if that beats the      \
         * maximum of x0, x1, then to x1 if it beats x0, else to x0: as masks on dY's bits, without branches, so     \
         * that the loop vectorises and a row shorter than a vector (its scalar loop) does not mispredict */         \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const T x0 = a[2 * i], x1 = a[2 * i + 1], x2 = b[2 * i], x3 = b[2 * i + 1];                                \
            const T m1 = x1 > x0 ? x1 : x0, m2 = x2 > m1 ? x2 : m1;                                                    \
            const U s1 = -(U)(x1 > x0), s2 = -(U)(x2 > m1), s3 = -(U)(x3 > m2), d = pardo_bits_##SUF(dy[i]);                \
            const U r2 = d & ~s3, r1 = r2 & ~s2;                                                                       \
            da[2 * i] = pardo_from_bits_##SUF(r1 & ~s1);                                                                     \
            da[2 * i + 1] = pardo_from_bits_##SUF(r1 & s1);                                                                  \
            db[2 * i] = pardo_from_bits_##SUF(r2 & s2);                                                                      \
            db[2 * i + 1] = pardo_from_bits_##SUF(d & s3);                                                                   \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS static void avg2x2_row_##SUF(const T *restrict a, const T *restrict b, T *restrict y,         \
                                                      int64_t n) {                                                     \
        for (int64_t i = 0; i < n; i++)                                                                                \
            y[i] = (T)(((double)a[2 * i] + (double)a[2 * i + 1] + (double)b[2 * i] + (double)b[2 * i + 1]) / 4.0);     \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS static void avg2x2_grad_row_##SUF(const T *restrict dy, T *restrict da, T *restrict db,       \
                                                           int64_t n) {                                                \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const T d = (T)((double)dy[i] / 4.0);                                                                      \
            da[2 * i] = da[2 * i + 1] = db[2 * i] = db[2 * i + 1] = d;                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    /* the input elements no 2x2 window reads (an odd last row or column) get no gradient */                          \
    static void zero_2x2_rest_##SUF(const pool_geom *g, T *dxp) {                                                      \
        for (int64_t ih = 0; ih < 2 * g->oh && 2 * g->ow < g->w; ih++)                                                 \
            memset(dxp + ih * g->w + 2 * g->ow, 0, sizeof(T) * (size_t)(g->w - 2 * g->ow));                            \
        if (2 * g->oh < g->h) memset(dxp + 2 * g->oh * g->w, 0, sizeof(T) * (size_t)((g->h - 2 * g->oh) * g->w));     \
    }                                                                                                                  \
    static void maxpool_bwd_##SUF(const pool_geom *g, const void *vx, const void *vdy, void *vdx, int64_t p0,          \
                                  int64_t p1) {                                                                        \
        const T *x = vx, *dy = vdy;                                                                                    \
        T *dx = vdx;                                                                                                   \
        const bool two = pool_is_2x2(g);                                                                               \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const T *xp = x + pl * g->h * g->w, *dyp = dy + pl * g->oh * g->ow;                                        \
            T *dxp = dx + pl * g->h * g->w;                                                                            \
            if (two) {                                                                                                 \
                for (int64_t oh = 0; oh < g->oh; oh++)                                                                 \
                    max2x2_grad_row_##SUF(xp + 2 * oh * g->w, xp + (2 * oh + 1) * g->w, dyp + oh * g->ow,              \
                                          dxp + 2 * oh * g->w, dxp + (2 * oh + 1) * g->w, g->ow);                      \
                zero_2x2_rest_##SUF(g, dxp);                                                                           \
                continue;                                                                                              \
            }                                                                                                          \
            memset(dxp, 0, sizeof(T) * (size_t)(g->h * g->w));                                                         \
            for (int64_t oh = 0; oh < g->oh; oh++)                                                                     \
                for (int64_t ow = 0; ow < g->ow; ow++)                                                                 \
                    dxp[maxpool_argmax_##SUF(g, xp, oh, ow)] += dyp[oh * g->ow + ow];                                  \
        }                                                                                                              \
    }                                                                                                                  \
    static void avgpool_fwd_##SUF(const pool_geom *g, const void *vx, const void *vdy, void *vy, int64_t p0,           \
                                  int64_t p1) {                                                                        \
        (void)vdy;                                                                                                     \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        const bool two = pool_is_2x2(g);                                                                               \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const T *xp = x + pl * g->h * g->w;                                                                        \
            T *yp = y + pl * g->oh * g->ow;                                                                            \
            for (int64_t oh = 0; oh < g->oh; oh++) {                                                                   \
                if (two) {                                                                                             \
                    avg2x2_row_##SUF(xp + 2 * oh * g->w, xp + (2 * oh + 1) * g->w, yp + oh * g->ow, g->ow);            \
                    continue;                                                                                          \
                }                                                                                                      \
                int64_t h0, h1;                                                                                        \
                pardo_window2d_clip(&g->win, 0, oh, g->h, &h0, &h1);                                                   \
                for (int64_t ow = 0; ow < g->ow; ow++) {                                                               \
                    int64_t w0, w1;                                                                                    \
                    pardo_window2d_clip(&g->win, 1, ow, g->w, &w0, &w1);                                               \
                    double s = 0;                                                                                      \
                    for (int64_t ih = h0; ih < h1; ih++)                                                               \
                        for (int64_t iw = w0; iw < w1; iw++) s += (double)xp[ih * g->w + iw];                          \
                    yp[oh * g->ow + ow] = (T)(s / (double)((h1 - h0) * (w1 - w0)));                                    \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    static void avgpool_bwd_##SUF(const pool_geom *g, const void *vx, const void *vdy, void *vdx, int64_t p0,          \
                                  int64_t p1) {                                                                        \
        (void)vx;                                                                                                      \
        const T *dy = vdy;                                                                                             \
        T *dx = vdx;                                                                                                   \
        const bool two = pool_is_2x2(g);                                                                               \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const T *dyp = dy + pl * g->oh * g->ow;                                                                    \
            T *dxp = dx + pl * g->h * g->w;                                                                            \
            if (two) {                                                                                                 \
                for (int64_t oh = 0; oh < g->oh; oh++)                                                                 \
                    avg2x2_grad_row_##SUF(dyp + oh * g->ow, dxp + 2 * oh * g->w, dxp + (2 * oh + 1) * g->w, g->ow);    \
                zero_2x2_rest_##SUF(g, dxp);                                                                           \
                continue;                                                                                              \
            }                                                                                                          \
            memset(dxp, 0, sizeof(T) * (size_t)(g->h * g->w));                                                         \
            for (int64_t oh = 0; oh < g->oh; oh++) {                                                                   \
                int64_t h0, h1;                                                                                        \
                pardo_window2d_clip(&g->win, 0, oh, g->h, &h0, &h1);                                                   \
                for (int64_t ow = 0; ow < g->ow; ow++) {                                                               \
                    int64_t w0, w1;                                                                                    \
                    pardo_window2d_clip(&g->win, 1, ow, g->w, &w0, &w1);                                               \
                    const T d = (T)((double)dyp[oh * g->ow + ow] / (double)((h1 - h0) * (w1 - w0)));                   \
                    for (int64_t ih = h0; ih < h1; ih++)                                                               \
                        for (int64_t iw = w0; iw < w1; iw++) dxp[ih * g->w + iw] += d;                                 \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

POOL_KERNELS(f32, float, uint32_t)
POOL_KERNELS(f64, double, uint64_t)

/* A pool kernel on planes [p0, p1): the forward reads x and writes y, the backward reads x (max) and dy, writes dx. */
typedef void (*pool_fn)(const pool_geom *g, const void *x, const void *dy, void *out, int64_t p0, int64_t p1);

typedef struct pool_job {
    const pool_geom *g;
    pool_fn fn;
    const void *x, *dy;
    void *out;
} pool_job;

static void pool_items(void *arg, int64_t p0, int64_t p1) {
    const pool_job *j = arg;
    j->fn(j->g, j->x, j->dy, j->out, p0, p1);
}

/* Runs fn over every plane of g: split over ctx's threads (pardo_parallel_for) where the input has at least
 * PARDO_PAR_MIN elements, else on the calling thread. Each plane is one item's alone, so the bits do not depend
 * on the split. */
static int pool_planes(pardo_kernel_ctx *ctx, const pool_geom *g, pool_fn fn, const void *x, const void *dy,
                       void *out) {
    pool_job j = {.g = g, .fn = fn, .x = x, .dy = dy, .out = out};
    const int64_t planes = g->n * g->c;
    if (planes == 0) return PARDO_OK;
    if ((double)planes * (double)(g->h * g->w) < (double)PARDO_PAR_MIN) {
        pool_items(&j, 0, planes);
        return PARDO_OK;
    }
    return pardo_parallel_for(ctx, planes, pool_items, &j);
}

static const pardo_arg_def pool_in[] = {{"X", "input [N, C, H, W] (float32 or float64)", false, false}};
static const pardo_arg_def maxpool_in[] = {{"X", "input [N, C, H, W] (" PARDO_ORDERED_NAMES ")", false, false}};
static const pardo_arg_def pool_out[] = {{"Y", "output [N, C, oH, oW]", false, false}};
static const pardo_arg_def pool_grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def pool_grad_out[] = {{"dX", "gradient of X", true, false}};

static int maxpool_infer(pardo_infer_ctx *ctx) {
    pool_geom g;
    return pool_geometry(ctx->op, ctx->in[0], true, &g, &ctx->out[0], ctx->st);
}

static int avgpool_infer(pardo_infer_ctx *ctx) {
    pool_geom g;
    return pool_geometry(ctx->op, ctx->in[0], false, &g, &ctx->out[0], ctx->st);
}

/* The forward kernels by X's dtype: max pooling has one for every ordered dtype, average pooling for the floats. */
static const pool_fn maxpool_fwd_kernels[PARDO_DTYPE_COUNT] = PARDO_ORDERED_TABLE(maxpool_fwd);
static const pool_fn avgpool_fwd_kernels[PARDO_DTYPE_COUNT] = {[PARDO_F32] = avgpool_fwd_f32,
                                                               [PARDO_F64] = avgpool_fwd_f64};

/* Runs the forward kernel of X's dtype (the geometry let only dtypes with one through). */
static int pool_run(pardo_kernel_ctx *ctx, bool max) {
    pardo_tensor *x = ctx->in[0];
    pardo_type tx = pardo_tensor_type(x), ty;
    pool_geom g;
    int rc = pool_geometry(ctx->op, &tx, max, &g, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, 4, ty.shape);
    if (!y) return ctx->st->code;
    const pool_fn fn = (max ? maxpool_fwd_kernels : avgpool_fwd_kernels)[x->dtype];
    return pool_planes(ctx, &g, fn, pardo_tensor_data(x), NULL, pardo_tensor_data(y));
}

static int maxpool_cpu(pardo_kernel_ctx *ctx) { return pool_run(ctx, true); }
static int avgpool_cpu(pardo_kernel_ctx *ctx) { return pool_run(ctx, false); }

static int pool_grad_infer(pardo_infer_ctx *ctx) {
    pool_geom g;
    pardo_type ty;
    const pardo_type *dy = pardo_nn_in_type(ctx, 2);
    int rc = pool_geometry(ctx->op, ctx->in[0], false, &g, &ty, ctx->st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 2 'dY'", &ty, "the output of the pool", ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

/* The gradient kernels: checks X and dY; dX is zeros without dY, else the
 * max or avg backward writes it. */
static int pool_grad_run(pardo_kernel_ctx *ctx, bool max) {
    pardo_tensor *x = ctx->in[0], *dy = pardo_nn_in(ctx, 2);
    pardo_type tx = pardo_tensor_type(x), ty;
    pool_geom g;
    int rc = pool_geometry(ctx->op, &tx, false, &g, &ty, ctx->st);
    if (rc == PARDO_OK && dy) {
        pardo_type tdy = pardo_tensor_type(dy);
        rc = pardo_nn_expect_same(&tdy, "input 2 'dY'", &ty, "the output of the pool", ctx->st);
    }
    if (rc != PARDO_OK) return rc;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!dy) return pardo_nn_zeros(ctx, 0, x->dtype, 4, x->shape) ? PARDO_OK : ctx->st->code;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, 4, x->shape);
    if (!dx) return ctx->st->code;
    const bool f32 = x->dtype == PARDO_F32;
    pool_fn fn = max ? (f32 ? maxpool_bwd_f32 : maxpool_bwd_f64) : (f32 ? avgpool_bwd_f32 : avgpool_bwd_f64);
    return pool_planes(ctx, &g, fn, pardo_tensor_data(x), pardo_tensor_data(dy), pardo_tensor_data(dx));
}

static int maxpool_grad_cpu(pardo_kernel_ctx *ctx) { return pool_grad_run(ctx, true); }
static int avgpool_grad_cpu(pardo_kernel_ctx *ctx) { return pool_grad_run(ctx, false); }

const pardo_op_def pardo_op_max_pool2d = {
    .type = "max_pool2d",
    .doc = "2-D max pooling (ONNX MaxPool, NCHW): the maximum of each kernel window (any numeric dtype; the "
           "gradient float32 or float64)",
    .inputs = maxpool_in,
    .n_inputs = 1,
    .outputs = pool_out,
    .n_outputs = 1,
    .attrs = pool_attrs,
    .n_attrs = 3,
    .infer = maxpool_infer,
    .cpu = maxpool_cpu,
    .cuda = pardo_cuda_max_pool2d,
    .grad = pardo_grad_standard,
    .all_dtypes = true,
};

const pardo_op_def pardo_op_max_pool2d_grad = {
    .type = "max_pool2d_grad",
    .doc = "gradient of max_pool2d: each dY goes to the first maximum of its window",
    .inputs = pool_grad_in,
    .n_inputs = 3,
    .outputs = pool_grad_out,
    .n_outputs = 1,
    .attrs = pool_attrs,
    .n_attrs = 3,
    .infer = pool_grad_infer,
    .cpu = maxpool_grad_cpu,
    .cuda = pardo_cuda_max_pool2d_grad,
};

const pardo_op_def pardo_op_avg_pool2d = {
    .type = "avg_pool2d",
    .doc = "2-D average pooling (ONNX AveragePool, NCHW, count_include_pad = 0: padding is not counted)",
    .inputs = pool_in,
    .n_inputs = 1,
    .outputs = pool_out,
    .n_outputs = 1,
    .attrs = pool_attrs,
    .n_attrs = 3,
    .infer = avgpool_infer,
    .cpu = avgpool_cpu,
    .cuda = pardo_cuda_avg_pool2d,
    .halves_in_f32 = true,
    .grad = pardo_grad_standard,
};

const pardo_op_def pardo_op_avg_pool2d_grad = {
    .type = "avg_pool2d_grad",
    .doc = "gradient of avg_pool2d: each dY spread evenly over the input elements of its window",
    .inputs = pool_grad_in,
    .n_inputs = 3,
    .outputs = pool_grad_out,
    .n_outputs = 1,
    .attrs = pool_attrs,
    .n_attrs = 3,
    .infer = pool_grad_infer,
    .cpu = avgpool_grad_cpu,
    .cuda = pardo_cuda_avg_pool2d_grad,
};
