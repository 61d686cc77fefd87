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
 * The kernels run on the packed GEMM (ops/gemm.h), per image and group,
 * over the columns of the convolution whose input gradient this op is:
 * ops/conv_items.h's column products with I = Y (dY), P = X (dX), so the
 * forward scatters W_g^T X_g into Y_g (= B first), dX = W_g cols(dY_g) and
 * dW += X_g cols(dY_g)^T (1-D and 2-D inputs are seen as 3-D with leading
 * axes of size 1), in column blocks of a size the shapes alone fix
 * (pardo_cols_nd_block_rows), so every sum has one order whatever the threads:
 *   forward and dX: the (image, group) items over the kernel's threads,
 *            each product on one thread, or, where there is one item (or
 *            little work), on the calling thread with each product split
 *            over the threads (the products' bits do not depend on it);
 *   dW:      summed over the images in order on the calling thread, its
 *            products split over the threads (with dX taken along where dX
 *            does not run apart);
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

#define CT_DIMS 3                // spatial axes of the geometry the kernels run on

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

/* Checks X, W and B (NULL: absent) against each other and the attrs, fills
 * g and, when y is not NULL, Y's type. The spatial rank comes from X, or
 * from W when X's rank is unknown. Used by inference (dims may be -1) and
 * again by the kernels on the run-time shapes. */
static int ct_geometry(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b,
                       ct_geom *g, pardo_type *y, pardo_status *st) {
    char sx[128], sw[128];
    int rc;
    pardo_conv_window win;
    if ((rc = pardo_conv_window_read(op, x, w, "[C, M/group, kernel...]", &win, st)) != PARDO_OK) return rc;
    const int nsp = win.nsp, o = CT_DIMS - nsp;
    g->nsp = nsp;
    g->group = win.group;
    for (int a = 0; a < CT_DIMS; a++) {
        g->in[a] = g->k[a] = 1;
        g->s[a] = win.s[a];
        g->d[a] = win.d[a];
        g->pb[a] = win.pb[a];
        g->pe[a] = win.pe[a];
        g->op[a] = 0;
    }
    if ((rc = pardo_nn_axis_ints(op, "output_padding", nsp, 0, g->op + o, st)) != PARDO_OK) return rc;
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
        y->ndim = nsp + 2;
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

/* The columns of one image's group: the convolution this op is the input
 * gradient of reads Y's mg channels (its image) at X's positions. */
static pardo_cols_nd ct_cols(const ct_geom *g) {
    pardo_cols_nd c = {.c = g->mg, .kp = g->kp};
    for (int a = 0; a < CT_DIMS; a++) {
        c.img[a] = g->out[a];
        c.pos[a] = g->in[a];
        c.k[a] = g->k[a];
        c.s[a] = g->s[a];
        c.d[a] = g->d[a];
        c.pb[a] = g->pb[a];
    }
    return c;
}

/* One run of a kernel, shared with its items: the column products with I = Y (dY), P = X (dX). */
typedef struct ct_job {
    const ct_geom *g;
    pardo_conv_cols cc;
    const void *x, *b, *dy; // b: NULL, no bias
    void *out;              // Y or dX
    void *dw;               // conv_transpose_grad's dW
    bool dx_along;          // the dW items compute dX too (one im2col for both)
} ct_job;

/* Item i = (image i / group, group i % group) of the forward, dX, dW (pardo_conv_items). */
static int fwd_item(void *job, pardo_kernel_ctx *c, int64_t i) {
    const ct_job *j = job;
    const ct_geom *g = j->g;
    const int64_t n = i / g->group, grp = i % g->group;
    const size_t es = pardo_dtype_size(j->cc.dtype);
    pardo_conv_bias_planes(j->cc.dtype, (char *)j->out + (size_t)((n * g->m + grp * g->mg) * g->yp) * es,
                           j->b ? (const char *)j->b + (size_t)(grp * g->mg) * es : NULL, g->mg, g->yp, false);
    return pardo_conv_cols_scatter(&j->cc, c, n, grp, j->x, j->out);
}

static int dx_item(void *job, pardo_kernel_ctx *c, int64_t i) {
    const ct_job *j = job;
    return pardo_conv_cols_gather(&j->cc, c, i / j->g->group, i % j->g->group, j->dy, j->out, NULL, NULL, false);
}

static int dw_item(void *job, pardo_kernel_ctx *c, int64_t i) {
    const ct_job *j = job;
    return pardo_conv_cols_gather(&j->cc, c, i / j->g->group, i % j->g->group, j->dy, j->dx_along ? j->out : NULL, j->x,
                                  j->dw, i < j->g->group);
}

/* A job over g's columns for X and W. */
static ct_job ct_job_for(const ct_geom *g, const pardo_tensor *x, const pardo_tensor *w) {
    const pardo_cols_nd cols = ct_cols(g);
    return (ct_job){.g = g,
                    .cc = pardo_conv_cols_make(x->dtype, &cols, g->group, g->cg, pardo_tensor_data(w)),
                    .x = pardo_tensor_data(x)};
}

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
    ct_job j = ct_job_for(&g, x, w);
    j.b = b ? pardo_tensor_data(b) : NULL;
    j.out = pardo_tensor_data(y);
    pardo_conv_items it = {.ctx = ctx, .n = g.n * g.group, .item = fwd_item, .job = &j};
    return pardo_conv_cols_items_run(&it, &j.cc, g.n);
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
    pardo_tensor *outs[3];
    if ((rc = pardo_conv_grad_outputs(ctx, x, w, g.m, dy != NULL, outs)) != PARDO_OK || !dy) return rc;
    ct_job j = ct_job_for(&g, x, w);
    j.dy = pardo_tensor_data(dy);
    const bool want_dx = outs[0] && outs[0]->numel, want_dw = outs[1] && outs[1]->numel;
    if (want_dx) j.out = pardo_tensor_data(outs[0]);
    if (want_dw) j.dw = pardo_tensor_data(outs[1]);
    pardo_conv_items it = {.ctx = ctx, .n = g.n * g.group, .job = &j};
    /* dX image by image over the threads where that pays; dW sums over the images in order, so it runs on the
     * calling thread with its products split over the threads (and takes dX along where dX did not run apart:
     * one im2col for both) */
    const bool dx_apart = want_dx && (!want_dw || pardo_conv_cols_items_apart(ctx, &j.cc, g.n));
    if (dx_apart) {
        it.item = dx_item;
        if ((rc = pardo_conv_cols_items_run(&it, &j.cc, g.n)) != PARDO_OK) return rc;
    }
    if (want_dw) {
        j.dx_along = want_dx && !dx_apart;
        it.item = dw_item;
        if ((rc = pardo_conv_items_inline(&it)) != PARDO_OK) return rc;
        if (g.n == 0) pardo_tensor_zero(outs[1]);
    }
    if (outs[2] && outs[2]->numel) return pardo_conv_bias_grad(ctx, dy, g.n, g.m, g.yp, outs[2]);
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
