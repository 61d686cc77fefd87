/* conv.c - conv2d, ONNX Conv on NCHW input with 2-D kernels: X [N, C, H, W],
 * weight W [M, C/group, kH, kW], optional bias B [M] -> Y [N, M, oH, oW];
 * attrs strides, pads [top, left, bottom, right], dilations, group (see
 * window2d.h for the output size). And conv2d_grad (dX, dW, dB).
 *
 * The kernels are direct loops, no im2col: for one weight tap (kh, kw) the
 * outputs whose tap lands inside the input form a rectangle
 * (pardo_window2d_tap_range), so the inner loop is a branch-free (strided)
 * multiply-add over an output row. Nothing is allocated per call and no
 * scratch buffer is needed; weight and bias gradients sum in double. */
#include <string.h>

#include "nn_util.h"
#include "op.h"
#include "window2d.h"

/* Sizes of one conv2d; -1 where unknown during inference. */
typedef struct conv_geom {
    int64_t n, c, h, w; // input batch, channels, height, width
    int64_t m;          // output channels
    int64_t group;      // groups
    int64_t cg, mg;     // input and output channels per group
    int64_t oh, ow;     // output height, width
    pardo_window2d win; // kernel [kH, kW], strides, pads, dilations
} conv_geom;

static const pardo_attr_def conv_attrs[] = {
    {"strides", PARDO_ATTR_INTS, "[1, 1]", "[stride_h, stride_w], each >= 1"},
    {"pads", PARDO_ATTR_INTS, "[0, 0, 0, 0]", "[top, left, bottom, right] zero padding, each >= 0"},
    {"dilations", PARDO_ATTR_INTS, "[1, 1]", "[dilation_h, dilation_w], each >= 1"},
    {"group", PARDO_ATTR_INT, "1", "channel groups; C and M must be divisible by it"},
};

/* Checks the types of X, W and B (NULL: absent) against each other and the
 * attrs, fills g and, when y is not NULL, Y's type. Used by inference (dims
 * may be -1) and again by the kernels on the run-time shapes. */
static int conv_geometry(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b,
                         conv_geom *g, pardo_type *y, pardo_status *st) {
    char sx[128], sw[128];
    int rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'X'", st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(x, "input 0 'X'", 4, "[N, C, H, W]", st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(w, "input 1 'W'", 4, "[M, C/group, kH, kW]", st)) != PARDO_OK)
        return rc;
    if (w->dtype != x->dtype)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' is %s but input 0 'X' is %s; expected the same dtype",
                            pardo_dtype_name(w->dtype), pardo_dtype_name(x->dtype));
    if ((rc = pardo_window2d_attrs(op, NULL, true, &g->win, st)) != PARDO_OK) return rc;
    if ((rc = pardo_attr_int(op, "group", 1, &g->group, st)) != PARDO_OK) return rc;
    if (g->group < 1) return pardo_errorf(st, PARDO_EINVAL, "attr 'group' is %lld, expected >= 1", (long long)g->group);
    const bool xr = x->ndim == 4, wr = w->ndim == 4;
    g->n = xr ? x->shape[0] : -1;
    g->c = xr ? x->shape[1] : -1;
    g->h = xr ? x->shape[2] : -1;
    g->w = xr ? x->shape[3] : -1;
    g->m = wr ? w->shape[0] : -1;
    g->cg = wr ? w->shape[1] : -1;
    g->win.kernel[0] = wr ? w->shape[2] : -1;
    g->win.kernel[1] = wr ? w->shape[3] : -1;
    if (g->c >= 0 && g->c % g->group != 0)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'group' is %lld but input 0 'X' %s has %lld channels, not divisible",
                            (long long)g->group, pardo_shape_str(x->ndim, x->shape, sx, sizeof sx), (long long)g->c);
    if (g->m >= 0 && g->m % g->group != 0)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'group' is %lld but input 1 'W' %s has %lld output channels, not divisible",
                            (long long)g->group, pardo_shape_str(w->ndim, w->shape, sw, sizeof sw), (long long)g->m);
    if (g->c >= 0 && g->cg >= 0 && g->cg * g->group != g->c)
        return pardo_errorf(st, PARDO_ESHAPE,
                            "input 1 'W' has shape %s, expected dim 1 = C/group = %lld for input 0 'X' %s with attr "
                            "'group' %lld",
                            pardo_shape_str(w->ndim, w->shape, sw, sizeof sw), (long long)(g->c / g->group),
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx), (long long)g->group);
    if (g->win.kernel[0] == 0 || g->win.kernel[1] == 0)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' has shape %s, expected a kernel of at least 1 x 1",
                            pardo_shape_str(w->ndim, w->shape, sw, sizeof sw));
    if (b) {
        if (b->dtype != x->dtype)
            return pardo_errorf(st, PARDO_ESHAPE, "input 2 'B' is %s but input 0 'X' is %s; expected the same dtype",
                                pardo_dtype_name(b->dtype), pardo_dtype_name(x->dtype));
        if ((rc = pardo_nn_expect_rank(b, "input 2 'B'", 1, "[M]", st)) != PARDO_OK) return rc;
        if (b->ndim == 1 && b->shape[0] >= 0 && g->m >= 0 && b->shape[0] != g->m)
            return pardo_errorf(st, PARDO_ESHAPE, "input 2 'B' has %lld values, expected M = %lld (dim 0 of 'W' %s)",
                                (long long)b->shape[0], (long long)g->m,
                                pardo_shape_str(w->ndim, w->shape, sw, sizeof sw));
    }
    g->mg = g->m >= 0 ? g->m / g->group : -1;
    const char *kw = "the kernel of input 1 'W'";
    if ((rc = pardo_window2d_out_size(&g->win, 0, g->h, kw, &g->oh, st)) != PARDO_OK ||
        (rc = pardo_window2d_out_size(&g->win, 1, g->w, kw, &g->ow, st)) != PARDO_OK)
        return rc;
    if (y) {
        y->dtype = x->dtype;
        y->ndim = 4;
        y->shape[0] = g->n;
        y->shape[1] = g->m;
        y->shape[2] = g->oh;
        y->shape[3] = g->ow;
    }
    return PARDO_OK;
}

/* The geometry of a kernel's concrete X, W and B (NULL: absent) and Y's
 * shape into y_shape. */
static int conv_geometry_run(const pardo_op *op, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b,
                             conv_geom *g, pardo_type *y, pardo_status *st) {
    pardo_type tx = pardo_tensor_type(x), tw = pardo_tensor_type(w), tb;
    if (b) tb = pardo_tensor_type(b);
    return conv_geometry(op, &tx, &tw, b ? &tb : NULL, g, y, st);
}

/* Defines the conv2d kernels of element type T with suffix SUF:
 * conv_fwd_SUF (Y from X, W, B), conv_dx_SUF (dX += W^T dY), conv_dw_SUF
 * (dW = dY (x) X, summed in double) and conv_db_SUF (dB = sum of dY). Every
 * tap loop visits the rectangle of outputs [oh0, oh1) x [ow0, ow1) that read
 * inside the input (see the file comment). */
#define CONV_KERNELS(SUF, T)                                                                                           \
    static void conv_fwd_##SUF(const conv_geom *g, const void *vx, const void *vw, const void *vb, void *vy) {         \
        const T *x = vx, *w = vw, *b = vb;                                                                             \
        T *y = vy;                                                                                                     \
        const pardo_window2d *p = &g->win;                                                                             \
        const int64_t hw = g->h * g->w, ohw = g->oh * g->ow, kk = p->kernel[0] * p->kernel[1];                         \
        for (int64_t n = 0; n < g->n; n++)                                                                             \
            for (int64_t m = 0; m < g->m; m++) {                                                                       \
                T *yp = y + (n * g->m + m) * ohw;                                                                      \
                const T bias = b ? b[m] : (T)0;                                                                        \
                for (int64_t i = 0; i < ohw; i++) yp[i] = bias;                                                        \
                const int64_t c0 = (m / g->mg) * g->cg;                                                                \
                for (int64_t cg = 0; cg < g->cg; cg++) {                                                               \
                    const T *xp = x + (n * g->c + c0 + cg) * hw, *wp = w + (m * g->cg + cg) * kk;                      \
                    for (int64_t kh = 0; kh < p->kernel[0]; kh++) {                                                    \
                        int64_t oh0, oh1;                                                                              \
                        pardo_window2d_tap_range(p, 0, kh, g->h, g->oh, &oh0, &oh1);                                   \
                        for (int64_t kw = 0; kw < p->kernel[1]; kw++) {                                                \
                            int64_t ow0, ow1;                                                                          \
                            pardo_window2d_tap_range(p, 1, kw, g->w, g->ow, &ow0, &ow1);                               \
                            const T wv = wp[kh * p->kernel[1] + kw];                                                   \
                            const int64_t sw = p->stride[1];                                                           \
                            for (int64_t oh = oh0; oh < oh1; oh++) {                                                   \
                                const T *xr = xp + (oh * p->stride[0] - p->pad[0] + kh * p->dilation[0]) * g->w +      \
                                              ow0 * sw - p->pad[1] + kw * p->dilation[1];                              \
                                T *yr = yp + oh * g->ow + ow0;                                                         \
                                for (int64_t j = 0; j < ow1 - ow0; j++) yr[j] += wv * xr[j * sw];                      \
                            }                                                                                          \
                        }                                                                                              \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
    }                                                                                                                  \
    static void conv_dx_##SUF(const conv_geom *g, const void *vw, const void *vdy, void *vdx) {                        \
        const T *w = vw, *dy = vdy;                                                                                    \
        T *dx = vdx;                                                                                                   \
        const pardo_window2d *p = &g->win;                                                                             \
        const int64_t hw = g->h * g->w, ohw = g->oh * g->ow, kk = p->kernel[0] * p->kernel[1];                         \
        for (int64_t n = 0; n < g->n; n++)                                                                             \
            for (int64_t m = 0; m < g->m; m++) {                                                                       \
                const T *dyp = dy + (n * g->m + m) * ohw;                                                              \
                const int64_t c0 = (m / g->mg) * g->cg;                                                                \
                for (int64_t cg = 0; cg < g->cg; cg++) {                                                               \
                    T *dxp = dx + (n * g->c + c0 + cg) * hw;                                                           \
                    const T *wp = w + (m * g->cg + cg) * kk;                                                           \
                    for (int64_t kh = 0; kh < p->kernel[0]; kh++) {                                                    \
                        int64_t oh0, oh1;                                                                              \
                        pardo_window2d_tap_range(p, 0, kh, g->h, g->oh, &oh0, &oh1);                                   \
                        for (int64_t kw = 0; kw < p->kernel[1]; kw++) {                                                \
                            int64_t ow0, ow1;                                                                          \
                            pardo_window2d_tap_range(p, 1, kw, g->w, g->ow, &ow0, &ow1);                               \
                            const T wv = wp[kh * p->kernel[1] + kw];                                                   \
                            const int64_t sw = p->stride[1];                                                           \
                            for (int64_t oh = oh0; oh < oh1; oh++) {                                                   \
                                T *xr = dxp + (oh * p->stride[0] - p->pad[0] + kh * p->dilation[0]) * g->w +           \
                                        ow0 * sw - p->pad[1] + kw * p->dilation[1];                                    \
                                const T *yr = dyp + oh * g->ow + ow0;                                                  \
                                for (int64_t j = 0; j < ow1 - ow0; j++) xr[j * sw] += wv * yr[j];                      \
                            }                                                                                          \
                        }                                                                                              \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
    }                                                                                                                  \
    static void conv_dw_##SUF(const conv_geom *g, const void *vx, const void *vdy, void *vdw) {                        \
        const T *x = vx, *dy = vdy;                                                                                    \
        T *dw = vdw;                                                                                                   \
        const pardo_window2d *p = &g->win;                                                                             \
        const int64_t hw = g->h * g->w, ohw = g->oh * g->ow;                                                           \
        for (int64_t m = 0; m < g->m; m++) {                                                                           \
            const int64_t c0 = (m / g->mg) * g->cg;                                                                    \
            for (int64_t cg = 0; cg < g->cg; cg++)                                                                     \
                for (int64_t kh = 0; kh < p->kernel[0]; kh++) {                                                        \
                    int64_t oh0, oh1;                                                                                  \
                    pardo_window2d_tap_range(p, 0, kh, g->h, g->oh, &oh0, &oh1);                                       \
                    for (int64_t kw = 0; kw < p->kernel[1]; kw++) {                                                    \
                        int64_t ow0, ow1;                                                                              \
                        pardo_window2d_tap_range(p, 1, kw, g->w, g->ow, &ow0, &ow1);                                   \
                        const int64_t sw = p->stride[1];                                                               \
                        double acc = 0;                                                                                \
                        for (int64_t n = 0; n < g->n; n++) {                                                           \
                            const T *xp = x + (n * g->c + c0 + cg) * hw, *dyp = dy + (n * g->m + m) * ohw;             \
                            for (int64_t oh = oh0; oh < oh1; oh++) {                                                   \
                                const T *xr = xp + (oh * p->stride[0] - p->pad[0] + kh * p->dilation[0]) * g->w +      \
                                              ow0 * sw - p->pad[1] + kw * p->dilation[1];                              \
                                const T *yr = dyp + oh * g->ow + ow0;                                                  \
                                for (int64_t j = 0; j < ow1 - ow0; j++) acc += (double)yr[j] * (double)xr[j * sw];     \
                            }                                                                                          \
                        }                                                                                              \
                        dw[((m * g->cg + cg) * p->kernel[0] + kh) * p->kernel[1] + kw] = (T)acc;                       \
                    }                                                                                                  \
                }                                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    static void conv_db_##SUF(const conv_geom *g, const void *vdy, void *vdb) {                                        \
        const T *dy = vdy;                                                                                             \
        T *db = vdb;                                                                                                   \
        const int64_t ohw = g->oh * g->ow;                                                                             \
        for (int64_t m = 0; m < g->m; m++) {                                                                           \
            double acc = 0;                                                                                            \
            for (int64_t n = 0; n < g->n; n++)                                                                         \
                for (int64_t i = 0; i < ohw; i++) acc += (double)dy[(n * g->m + m) * ohw + i];                         \
            db[m] = (T)acc;                                                                                            \
        }                                                                                                              \
    }

CONV_KERNELS(f32, float)
CONV_KERNELS(f64, double)

/* ---- conv2d ---- */

static const pardo_arg_def conv_in[] = {
    {"X", "input [N, C, H, W] (float32 or float64)", false, false},
    {"W", "weight [M, C/group, kH, kW], X's dtype", false, false},
    {"B", "bias [M], X's dtype", true, false},
};
static const pardo_arg_def conv_out[] = {{"Y", "output [N, M, oH, oW]", false, false}};

static int conv_infer(pardo_infer_ctx *ctx) {
    conv_geom g;
    return conv_geometry(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 2), &g, &ctx->out[0], ctx->st);
}

static int conv_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in(ctx, 2);
    conv_geom g;
    pardo_type ty;
    int rc = conv_geometry_run(ctx->op, x, w, b, &g, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, 4, ty.shape);
    if (!y) return ctx->st->code;
    (x->dtype == PARDO_F32 ? conv_fwd_f32 : conv_fwd_f64)(&g, pardo_tensor_data(x), pardo_tensor_data(w),
                                                          b ? pardo_tensor_data(b) : NULL, pardo_tensor_data(y));
    return PARDO_OK;
}

const pardo_op_def pardo_op_conv2d = {
    .type = "conv2d",
    .doc = "2-D convolution (ONNX Conv, NCHW): Y = X * W + B with strides, pads, dilations and groups",
    .inputs = conv_in,
    .n_inputs = 3,
    .outputs = conv_out,
    .n_outputs = 1,
    .attrs = conv_attrs,
    .n_attrs = 4,
    .infer = conv_infer,
    .cpu = conv_cpu,
    .grad = pardo_grad_standard,
};

/* ---- conv2d_grad ---- */

static const pardo_arg_def conv_grad_in[] = {
    {"X", "the forward input", false, false},
    {"W", "the forward weight", false, false},
    {"B", "the forward bias", true, false},
    {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def conv_grad_out[] = {
    {"dX", "gradient of X", true, false},
    {"dW", "gradient of W", true, false},
    {"dB", "gradient of B", true, false},
};

/* Geometry of the forward op from the gradient op's inputs; checks dY (when
 * given) against Y's type. */
static int conv_grad_check(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b,
                           const pardo_type *dy, conv_geom *g, pardo_status *st) {
    pardo_type ty;
    int rc = conv_geometry(op, x, w, b, g, &ty, st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 4 'dY'", &ty, "the output of conv2d", st);
    return rc;
}

static int conv_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in_type(ctx, 2);
    conv_geom g;
    int rc = conv_grad_check(ctx->op, x, w, b, pardo_nn_in_type(ctx, 4), &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    ctx->out[1] = *w;
    ctx->out[2].dtype = x->dtype;
    ctx->out[2].ndim = 1;
    ctx->out[2].shape[0] = g.m;
    return PARDO_OK;
}

static int conv_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in(ctx, 2), *dy = pardo_nn_in(ctx, 4);
    conv_geom g;
    pardo_type tx = pardo_tensor_type(x), tw = pardo_tensor_type(w), tb, tdy;
    if (b) tb = pardo_tensor_type(b);
    if (dy) tdy = pardo_tensor_type(dy);
    int rc = conv_grad_check(ctx->op, &tx, &tw, b ? &tb : NULL, dy ? &tdy : NULL, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    const bool f32 = x->dtype == PARDO_F32;
    if (pardo_kernel_wants_output(ctx, 0)) {
        pardo_tensor *dx = pardo_nn_zeros(ctx, 0, x->dtype, 4, x->shape);
        if (!dx) return ctx->st->code;
        if (dy)
            (f32 ? conv_dx_f32 : conv_dx_f64)(&g, pardo_tensor_data(w), pardo_tensor_data(dy), pardo_tensor_data(dx));
    }
    if (pardo_kernel_wants_output(ctx, 1)) {
        pardo_tensor *dw = pardo_nn_zeros(ctx, 1, w->dtype, 4, w->shape);
        if (!dw) return ctx->st->code;
        if (dy)
            (f32 ? conv_dw_f32 : conv_dw_f64)(&g, pardo_tensor_data(x), pardo_tensor_data(dy), pardo_tensor_data(dw));
    }
    if (pardo_kernel_wants_output(ctx, 2)) {
        pardo_tensor *db = pardo_nn_zeros(ctx, 2, x->dtype, 1, &g.m);
        if (!db) return ctx->st->code;
        if (dy) (f32 ? conv_db_f32 : conv_db_f64)(&g, pardo_tensor_data(dy), pardo_tensor_data(db));
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_conv2d_grad = {
    .type = "conv2d_grad",
    .doc = "gradients of conv2d: dX (transposed convolution of dY), dW (dY correlated with X), dB (sum of dY)",
    .inputs = conv_grad_in,
    .n_inputs = 5,
    .outputs = conv_grad_out,
    .n_outputs = 3,
    .attrs = conv_attrs,
    .n_attrs = 4,
    .infer = conv_grad_infer,
    .cpu = conv_grad_cpu,
};
