/* conv_nd.c - conv_nd, ONNX Conv of 1 to 3 spatial axes on NC(D)(H)W
 * input: X [N, C, S...], weight W [M, C/group, K...], optional bias B [M]
 * -> Y [N, M, O...], per spatial axis
 *   O = floor((S + pad_begin + pad_end - ((K - 1) * dilation + 1)) / stride) + 1,
 * and Y[n, oc, o] = B[oc] + sum over c in oc's group and taps k of
 * X[n, c, o * stride - pad_begin + k * dilation] * W[oc, c, k] (padding
 * reads 0). Attrs strides, pads (begins, then ends, as ONNX), dilations
 * (each one value per spatial axis; [] the default) and group; ONNX's
 * auto_pad is resolved into pads by the importer (src/io/onnx_ops.c).
 * conv2d (ops/conv.c) stays the 2-D op with its fused relu; this is the
 * one the importer gives 1-D and 3-D convolutions. And conv_nd_grad (dX,
 * dW, dB).
 *
 * The kernels run on the packed GEMM (ops/gemm.h) per image and group,
 * ops/conv_items.h's column products with I = X (dX), P = Y (dY): the
 * columns of ops/im2col_nd.h (an image's group of C/group channels read at
 * Y's positions), in column blocks of a size the shapes alone fix
 * (pardo_cols_nd_block_rows), so every sum has one order whatever the
 * threads. With col the columns of a block of positions:
 *   forward: Y_g = W_g col(X_g), then + B, the (image, group) items over
 *            the kernel's threads (each product on one thread), or on the
 *            calling thread with the products split over the threads where
 *            there is one item or little work;
 *   dX:      col = W_g^T dY_g, added back into dX_g (col2im), the items as
 *            the forward's;
 *   dW:      dW_g += dY_g col(X_g)^T over the images and blocks in order, on
 *            the calling thread with its products split over the threads;
 *   dB:      per output channel, the sum of dY in double.
 * The columns live in a per-thread scratch buffer (ops/scratch.h): nothing
 * is allocated per call in the steady state beyond the outputs. */
#include <stdio.h>
#include <string.h>

#include "conv_items.h"
#include "im2col_nd.h"
#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

#define CN_DIMS PARDO_COLS_ND_DIMS // spatial axes of the geometry the kernels run on

/* Sizes of one conv_nd; -1 where unknown during inference. The spatial
 * arrays hold the op's nsp axes last, leading axes of size 1. */
typedef struct cn_geom {
    int nsp;                          // spatial axes of X: 1..3
    int64_t n, c, m, group, cg, mg;   // batch, input and output channels, groups, channels per group in and out
    int64_t in[CN_DIMS], k[CN_DIMS];  // input size, kernel taps
    int64_t out[CN_DIMS];             // output size
    int64_t s[CN_DIMS], d[CN_DIMS];   // strides, dilations
    int64_t pb[CN_DIMS], pe[CN_DIMS]; // pads at the begin and the end of each axis
    int64_t ip, kp, yp;               // elements of an input plane, a kernel plane, an output plane
} cn_geom;

static const pardo_attr_def cn_attrs[] = {
    {"strides", PARDO_ATTR_INTS, "[]", "one stride per spatial axis, each >= 1; [] (default): 1s"},
    {"pads", PARDO_ATTR_INTS, "[]", "begins then ends (2 per spatial axis), each >= 0; [] (default): 0s"},
    {"dilations", PARDO_ATTR_INTS, "[]", "one dilation per spatial axis, each >= 1; [] (default): 1s"},
    {"group", PARDO_ATTR_INT, "1", "channel groups; C and M must be divisible by it"},
};

/* Checks X, W and B (NULL: absent) against each other and the attrs, fills
 * g and, when y is not NULL, Y's type. The spatial rank comes from X, or
 * from W when X's rank is unknown. Used by inference (dims may be -1) and
 * again by the kernels on the run-time shapes. */
static int cn_geometry(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b, cn_geom *g,
                       pardo_type *y, pardo_status *st) {
    char sx[128], sw[128];
    int rc;
    pardo_conv_window win;
    if ((rc = pardo_conv_window_read(op, x, w, "[M, C/group, kernel...]", &win, st)) != PARDO_OK) return rc;
    const int nsp = win.nsp, o = CN_DIMS - nsp;
    g->nsp = nsp;
    g->group = win.group;
    for (int a = 0; a < CN_DIMS; a++) {
        g->in[a] = g->k[a] = 1;
        g->s[a] = win.s[a];
        g->d[a] = win.d[a];
        g->pb[a] = win.pb[a];
        g->pe[a] = win.pe[a];
    }
    const bool xr = x->ndim >= 0, wr = w->ndim >= 0;
    g->n = xr ? x->shape[0] : -1;
    g->c = xr ? x->shape[1] : -1;
    g->m = wr ? w->shape[0] : -1;
    const int64_t wcg = wr ? w->shape[1] : -1;
    for (int i = 0; i < nsp; i++) {
        g->in[o + i] = xr ? x->shape[2 + i] : -1;
        g->k[o + i] = wr ? w->shape[2 + i] : -1;
        if (g->k[o + i] == 0)
            return pardo_errorf(st, PARDO_ESHAPE, "input 1 'W' has shape %s, expected kernel sizes >= 1",
                                pardo_shape_str(w->ndim, w->shape, sw, sizeof sw));
    }
    if (g->c >= 0 && g->c % g->group != 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'group' is %lld but input 0 'X' has %lld channels, not divisible",
                            (long long)g->group, (long long)g->c);
    if (g->m >= 0 && g->m % g->group != 0)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'group' is %lld but input 1 'W' %s has %lld output channels, not divisible",
                            (long long)g->group, pardo_shape_str(w->ndim, w->shape, sw, sizeof sw), (long long)g->m);
    g->cg = g->c >= 0 ? g->c / g->group : wcg;
    if (g->c >= 0 && wcg >= 0 && wcg != g->cg)
        return pardo_errorf(st, PARDO_ESHAPE,
                            "input 1 'W' has shape %s, expected dim 1 = C/group = %lld (input 0 'X' %s, group %lld)",
                            pardo_shape_str(w->ndim, w->shape, sw, sizeof sw), (long long)g->cg,
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx), (long long)g->group);
    g->mg = g->m >= 0 ? g->m / g->group : -1;
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
    g->ip = g->kp = g->yp = 1;
    for (int a = 0; a < CN_DIMS; a++) {
        if (g->in[a] < 0 || g->k[a] < 0) {
            g->out[a] = -1;
            continue;
        }
        const int64_t span = (g->k[a] - 1) * g->d[a] + 1, room = g->in[a] + g->pb[a] + g->pe[a] - span;
        if (room < 0)
            return pardo_errorf(st, PARDO_ESHAPE,
                                "spatial axis %d: the dilated kernel spans %lld but the padded input %s has %lld "
                                "(attr 'pads' %lld + %lld), expected at least the span",
                                a - o, (long long)span, pardo_shape_str(x->ndim, x->shape, sx, sizeof sx),
                                (long long)(g->in[a] + g->pb[a] + g->pe[a]), (long long)g->pb[a], (long long)g->pe[a]);
        g->out[a] = room / g->s[a] + 1;
        g->ip *= g->in[a];
        g->kp *= g->k[a];
        g->yp *= g->out[a];
    }
    if (y) {
        y->dtype = x->dtype;
        y->ndim = nsp + 2;
        y->shape[0] = g->n;
        y->shape[1] = g->m;
        for (int i = 0; i < nsp; i++) y->shape[2 + i] = g->out[o + i];
    }
    return PARDO_OK;
}

/* The geometry of a kernel's concrete X, W and B (NULL: absent). */
static int cn_geometry_run(const pardo_op *op, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b,
                           cn_geom *g, pardo_type *y, pardo_status *st) {
    pardo_type tx = pardo_tensor_type(x), tw = pardo_tensor_type(w), tb;
    if (b) tb = pardo_tensor_type(b);
    return cn_geometry(op, &tx, &tw, b ? &tb : NULL, g, y, st);
}

/* The columns of one image's group: its C/group channels read at Y's positions. */
static pardo_cols_nd cn_cols(const cn_geom *g) {
    pardo_cols_nd c = {.c = g->cg, .kp = g->kp};
    for (int a = 0; a < CN_DIMS; a++) {
        c.img[a] = g->in[a];
        c.pos[a] = g->out[a];
        c.k[a] = g->k[a];
        c.s[a] = g->s[a];
        c.d[a] = g->d[a];
        c.pb[a] = g->pb[a];
    }
    return c;
}

/* One run of a kernel, shared with its items: the column products with I = X (dX), P = Y (dY). */
typedef struct cn_job {
    const cn_geom *g;
    pardo_conv_cols cc;
    const void *x, *b, *dy; // b: NULL, no bias
    void *out;              // Y or dX
    void *dw;               // conv_nd_grad's dW
} cn_job;

/* Item i = (image i / group, group i % group) of the forward, dX, dW (pardo_conv_items). */
static int fwd_item(void *job, pardo_kernel_ctx *c, int64_t i) {
    const cn_job *j = job;
    const cn_geom *g = j->g;
    const int64_t n = i / g->group, grp = i % g->group;
    int rc = pardo_conv_cols_gather(&j->cc, c, n, grp, j->x, j->out, NULL, NULL, false);
    if (rc == PARDO_OK && j->b) {
        const size_t es = pardo_dtype_size(j->cc.dtype);
        pardo_conv_bias_planes(j->cc.dtype, (char *)j->out + (size_t)((n * g->m + grp * g->mg) * g->yp) * es,
                               (const char *)j->b + (size_t)(grp * g->mg) * es, g->mg, g->yp, true);
    }
    return rc;
}

static int dx_item(void *job, pardo_kernel_ctx *c, int64_t i) {
    const cn_job *j = job;
    const cn_geom *g = j->g;
    const int64_t n = i / g->group, grp = i % g->group;
    const size_t es = pardo_dtype_size(j->cc.dtype);
    pardo_conv_bias_planes(j->cc.dtype, (char *)j->out + (size_t)((n * g->c + grp * g->cg) * g->ip) * es, NULL, g->cg,
                           g->ip, false);
    return pardo_conv_cols_scatter(&j->cc, c, n, grp, j->dy, j->out);
}

static int dw_item(void *job, pardo_kernel_ctx *c, int64_t i) {
    const cn_job *j = job;
    return pardo_conv_cols_gather(&j->cc, c, i / j->g->group, i % j->g->group, j->x, NULL, j->dy, j->dw,
                                  i < j->g->group);
}

/* A job over g's columns for X and W. */
static cn_job cn_job_for(const cn_geom *g, const pardo_tensor *x, const pardo_tensor *w) {
    const pardo_cols_nd cols = cn_cols(g);
    return (cn_job){.g = g,
                    .cc = pardo_conv_cols_make(x->dtype, &cols, g->group, g->mg, pardo_tensor_data(w)),
                    .x = pardo_tensor_data(x)};
}

static const pardo_arg_def cn_in[] = {
    {"X", "input [N, C, spatial...] of 1 to 3 spatial axes (float32 or float64)", false, false},
    {"W", "weight [M, C/group, kernel...], X's dtype", false, false},
    {"B", "bias [M], X's dtype", true, false},
};
static const pardo_arg_def cn_out[] = {{"Y", "output [N, M, out...]", false, false}};

static int cn_infer(pardo_infer_ctx *ctx) {
    cn_geom g;
    return cn_geometry(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 2), &g, &ctx->out[0], ctx->st);
}

static int cn_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in(ctx, 2);
    cn_geom g;
    pardo_type ty;
    int rc = cn_geometry_run(ctx->op, x, w, b, &g, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    cn_job j = cn_job_for(&g, x, w);
    j.b = b ? pardo_tensor_data(b) : NULL;
    j.out = pardo_tensor_data(y);
    pardo_conv_items it = {.ctx = ctx, .n = g.n * g.group, .item = fwd_item, .job = &j};
    return pardo_conv_cols_items_run(&it, &j.cc, g.n);
}

/* conv_nd_grad does not read Y: it is left out (""), so Y dies after its forward readers. */
static int cn_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_conv_nd = {
    .type = "conv_nd",
    .doc = "convolution of 1 to 3 spatial axes (ONNX Conv, NC...): each output the sum over its window of the input "
           "times the kernel, with pads, strides, dilations and groups, plus B (conv2d is the 2-D op)",
    .inputs = cn_in,
    .n_inputs = 3,
    .outputs = cn_out,
    .n_outputs = 1,
    .attrs = cn_attrs,
    .n_attrs = 4,
    .infer = cn_infer,
    .cpu = cn_cpu,
    .halves_in_f32 = true,
    .grad = cn_grad_build,
};

/* ---- conv_nd_grad ---- */

static const pardo_arg_def cn_grad_in[] = {
    {"X", "the forward input", false, false},           {"W", "the forward weight", false, false},
    {"B", "the forward bias (not read)", true, false},  {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def cn_grad_out[] = {
    {"dX", "gradient of X (a transposed convolution of dY by W)", true, false},
    {"dW", "gradient of W", true, false},
    {"dB", "gradient of B", true, false},
};

/* The forward geometry from the gradient op's inputs; checks dY (when given) against Y's type. */
static int cn_grad_check(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b,
                         const pardo_type *dy, cn_geom *g, pardo_status *st) {
    pardo_type ty;
    int rc = cn_geometry(op, x, w, b, g, &ty, st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 4 'dY'", &ty, "the output of conv_nd", st);
    return rc;
}

static int cn_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *w = ctx->in[1];
    cn_geom g;
    int rc = cn_grad_check(ctx->op, x, w, pardo_nn_in_type(ctx, 2), pardo_nn_in_type(ctx, 4), &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    ctx->out[1] = *w;
    ctx->out[2].dtype = x->dtype;
    ctx->out[2].ndim = 1;
    ctx->out[2].shape[0] = g.m;
    return PARDO_OK;
}

static int cn_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in(ctx, 2), *dy = pardo_nn_in(ctx, 4);
    pardo_type tx = pardo_tensor_type(x), tw = pardo_tensor_type(w), tb, tdy;
    if (b) tb = pardo_tensor_type(b);
    if (dy) tdy = pardo_tensor_type(dy);
    cn_geom g;
    int rc = cn_grad_check(ctx->op, &tx, &tw, b ? &tb : NULL, dy ? &tdy : NULL, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *outs[3];
    if ((rc = pardo_conv_grad_outputs(ctx, x, w, g.m, dy != NULL, outs)) != PARDO_OK || !dy) return rc;
    cn_job j = cn_job_for(&g, x, w);
    j.dy = pardo_tensor_data(dy);
    pardo_conv_items it = {.ctx = ctx, .n = g.n * g.group, .job = &j};
    if (outs[0] && outs[0]->numel) {
        j.out = pardo_tensor_data(outs[0]);
        it.item = dx_item;
        if ((rc = pardo_conv_cols_items_run(&it, &j.cc, g.n)) != PARDO_OK) return rc;
    }
    if (outs[1] && outs[1]->numel) { /* summed over the images in order: the calling thread, products threaded */
        j.dw = pardo_tensor_data(outs[1]);
        it.item = dw_item;
        if ((rc = pardo_conv_items_inline(&it)) != PARDO_OK) return rc;
        if (g.n == 0) pardo_tensor_zero(outs[1]);
    }
    if (outs[2] && outs[2]->numel) return pardo_conv_bias_grad(ctx, dy, g.n, g.m, g.yp, outs[2]);
    return PARDO_OK;
}

const pardo_op_def pardo_op_conv_nd_grad = {
    .type = "conv_nd_grad",
    .doc = "gradients of conv_nd: dX (dY transposed-convolved with W), dW (X correlated with dY), dB (sum of dY)",
    .inputs = cn_grad_in,
    .n_inputs = 5,
    .outputs = cn_grad_out,
    .n_outputs = 3,
    .attrs = cn_attrs,
    .n_attrs = 4,
    .infer = cn_grad_infer,
    .cpu = cn_grad_cpu,
};
