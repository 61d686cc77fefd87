/* conv.c - conv2d, ONNX Conv on NCHW input with 2-D kernels: X [N, C, H, W],
 * weight W [M, C/group, kH, kW], optional bias B [M] -> Y [N, M, oH, oW];
 * attrs strides, pads [top, left, bottom, right], dilations, group (see
 * window2d.h for the output size) and activation (relu after the bias: the
 * form the fusion pass gives conv2d -> relu). And conv2d_grad (dX, dW, dB).
 *
 * The kernels run on the packed GEMM (ops/gemm.h) over im2col columns
 * (ops/im2col.h). Per chunk of images and per group, with K = C/group * kH
 * * kW and P = oH * oW, the columns of the chunk's nb images side by side
 * make col [K, nb * P], and
 *   forward: Y_g [M/group, nb * P] = W_g [M/group, K] x col, each row then
 *            copied out to its image with the bias added and relu applied
 *            (in place when nb is 1), while it is in cache;
 *   dW:      dW_g += dY_g [M/group, nb * P] x col^T, dY_g the chunk's output
 *            gradient rows gathered side by side (for small images; for
 *            bigger ones one product per image reads dY in place);
 *   dX:      col = W_g^T x dY_g, then scattered back into each image
 *            (col2im);
 *   dB:      the sums of dY_g's rows, in double.
 * With attr activation relu, conv2d_grad's input 3 Y is relu's output and
 * dY is taken where Y > 0 (relu_grad's mask) as it is gathered.
 * A 1x1 kernel with strides 1 and no pads needs no columns: its X is them.
 *
 * Chunks of images run over the kernel's threads (ops/conv_items.h,
 * each product on one thread), or on the calling thread with the products
 * split over the threads where there is one chunk. The forward's and dX's
 * bits depend on neither (each output element is one product's, and the
 * products' bits do not depend on the split: gemm.h). dW and dB sum over
 * the batch: in blocks of images whose size depends on the shapes alone,
 * each block's partial sum made by one thread, the blocks then added in
 * order, so their bits do not depend on the thread count either. The
 * columns, gathered rows and partial sums live in per-thread scratch
 * buffers (ops/scratch.h): nothing is allocated per call in the steady
 * state. */
#include <stdlib.h>
#include <string.h>

#include "conv_items.h"
#include "gemm.h"
#include "im2col.h"
#include "kernel_util.h"
#include "kernels.h"
#include "nn_util.h"
#include "op.h"
#include "scratch.h"
#include "window2d.h"

#define COL_BYTES (1 << 19)    // im2col columns of one chunk of images, at most (one image's at least): with the
                               // product's packed copy of them and its output rows, about a core's L2
#define GRAD_BLOCKS 16         // conv2d_grad sums dW and dB over at most this many blocks of images
#define PART_ELEMS (1 << 22)   // elements of those blocks' partial sums of dW, at most (one block at least)
#define PAR_MIN_MACS (1 << 18) // a conv2d (gradient) of fewer multiply-adds runs on the calling thread
#define GATHER_BELOW 512       // conv2d_grad gathers a chunk's dY rows for one product over the chunk where the output
                               // has fewer elements per channel (products over one image's would be short); measured

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
    {"activation", PARDO_ATTR_STRING, "\"none\"", "applied after the bias: \"none\" or \"relu\""},
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

/* The activation attr: relu or none; PARDO_EINVAL for any other word. */
static int conv_activation(const pardo_op *op, bool *relu, pardo_status *st) {
    const char *act;
    int rc = pardo_attr_string(op, "activation", "none", &act, st);
    if (rc != PARDO_OK) return rc;
    *relu = strcmp(act, "relu") == 0;
    if (!*relu && strcmp(act, "none") != 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'activation' is \"%s\", expected \"none\" or \"relu\"", act);
    return PARDO_OK;
}

/* True when the columns of one image are X itself: a 1x1 kernel, strides 1, no pads. */
static bool conv_pointwise(const conv_geom *g) {
    const pardo_window2d *p = &g->win;
    return p->kernel[0] == 1 && p->kernel[1] == 1 && p->stride[0] == 1 && p->stride[1] == 1 && p->pad[0] == 0 &&
           p->pad[1] == 0 && p->pad[2] == 0 && p->pad[3] == 0;
}

/* One run of a kernel over chunks of images, shared with the items. */
typedef struct conv_job {
    const conv_geom *g;
    pardo_kernel_ctx *ctx; // the kernel's
    int64_t k, p;          // K = C/group * kH * kW, P = oH * oW
    int64_t cs;            // images per chunk (its columns side by side)
    int64_t bs;            // conv2d_grad: images per block (chunks of cs inside)
    /* conv2d */
    const void *x, *w, *b; // b: NULL, no bias
    void *y;
    bool relu;
    /* conv2d_grad */
    const void *dy, *mask;            // dY, taken where mask > 0 (Y with activation relu); NULL: no mask
    void *dx, *dw;                    // NULL: not wanted; dw holds block 0's partial sum
    void *part;                       // the partial sums of dW of blocks 1.., numel(W) each
    double *dbp;                      // the partial sums of dB, [block][M]; NULL: not wanted
} conv_job;

static int no_scratch(pardo_kernel_ctx *c, const char *what, size_t bytes) {
    return pardo_errorf(c->st, PARDO_ENOMEM, "cannot allocate %zu bytes for conv2d's %s", bytes, what);
}

/* Which implementation runs the products: the own kernel, whose bits do not
 * depend on a product's column count, unless $PARDO_GEMM forces one. The
 * columns are a chunk's images side by side, whose number depends on the
 * batch (a parallel_do part's share or the whole) and the thread count, and
 * the own/BLAS pick (ops/gemm_pick.c) decides by column count: through it,
 * conv2d's bits would depend on both. */
static pardo_gemm_impl conv_gemm_impl(void) {
    static int forced = -1; /* whether $PARDO_GEMM is set, read once (a data race would be benign: same value) */
    int f = __atomic_load_n(&forced, __ATOMIC_RELAXED);
    if (f < 0) __atomic_store_n(&forced, f = getenv("PARDO_GEMM") != NULL, __ATOMIC_RELAXED);
    return f ? PARDO_GEMM_AUTO : PARDO_GEMM_OWN;
}

/* Defines the row loops and chunk kernels of element type T with suffix SUF:
 * finish_row_SUF (a forward row copied out with its bias and relu),
 * gather_row_SUF (an output gradient row, masked), row_sum_SUF (in double,
 * in 16 lanes then in lane order), fwd_chunk_SUF and grad_chunk_SUF (one
 * chunk of nb images from image n0, all groups) and add_parts_SUF (dW +=
 * the partial sums of blocks 1.., in block order, over elements [e0, e1)). */
#define CONV_KERNELS(SUF, T)                                                                                           \
    PARDO_WINDOW2D_LOOPS static void finish_row_##SUF(T *d, const T *s, int64_t n, const T *bias, bool relu) {        \
        if (bias && relu) {                                                                                            \
            const T bv = *bias;                                                                                        \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const T v = s[i] + bv;                                                                                 \
                d[i] = v < 0 ? (T)0 : v;                                                                               \
            }                                                                                                          \
        } else if (bias) {                                                                                             \
            const T bv = *bias;                                                                                        \
            for (int64_t i = 0; i < n; i++) d[i] = s[i] + bv;                                                          \
        } else if (relu) {                                                                                             \
            for (int64_t i = 0; i < n; i++) d[i] = s[i] < 0 ? (T)0 : s[i];                                             \
        } else if (d != s) {                                                                                           \
            memcpy(d, s, sizeof(T) * (size_t)n);                                                                       \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS static void gather_row_##SUF(T *restrict d, const T *restrict s, const T *restrict m,         \
                                                      int64_t n) {                                                     \
        if (m)                                                                                                         \
            for (int64_t i = 0; i < n; i++) d[i] = m[i] > 0 ? s[i] : (T)0;                                             \
        else                                                                                                           \
            memcpy(d, s, sizeof(T) * (size_t)n);                                                                       \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS static double row_sum_##SUF(const T *s, int64_t n) {                                          \
        double t;                                                                                                      \
        PARDO_LANE_SUM(t, 16, n, (double)s[j]);                                                                        \
        return t;                                                                                                      \
    }                                                                                                                  \
    static int fwd_chunk_##SUF(const conv_job *j, pardo_kernel_ctx *c, int64_t n0, int64_t nb) {                       \
        const conv_geom *g = j->g;                                                                                     \
        const int64_t hw = g->h * g->w, P = j->p, K = j->k, ld = nb * P;                                               \
        const bool direct = nb == 1 && conv_pointwise(g);                                                              \
        const size_t col_bytes = sizeof(T) * (size_t)(K * ld), rows_bytes = sizeof(T) * (size_t)(g->mg * ld);          \
        T *col = direct ? NULL : pardo_scratch_get(PARDO_SCRATCH_COL, col_bytes);                                      \
        T *rows = nb == 1 ? NULL : pardo_scratch_get(PARDO_SCRATCH_ROWS, rows_bytes);                                  \
        if (!direct && !col) return no_scratch(c, "columns", col_bytes);                                               \
        if (nb > 1 && !rows) return no_scratch(c, "output rows", rows_bytes);                                          \
        const T *x = j->x, *w = j->w, *b = j->b;                                                                       \
        T *y = j->y;                                                                                                   \
        const pardo_im2col ig = {.win = &g->win, .c = g->cg, .h = g->h, .w = g->w, .oh = g->oh, .ow = g->ow};          \
        for (int64_t gi = 0; gi < g->group; gi++) {                                                                    \
            const T *xg = x + (n0 * g->c + gi * g->cg) * hw;                                                           \
            for (int64_t i = 0; !direct && i < nb; i++) pardo_im2col_##SUF(&ig, xg + i * g->c * hw, col + i * P, ld);  \
            T *out = nb == 1 ? y + (n0 * g->m + gi * g->mg) * P : rows;                                                \
            pardo_gemm gm = {.dtype = j->ctx->in[0]->dtype, .m = g->mg, .n = ld, .k = K, .a = w + gi * g->mg * K,      \
                             .lda = K, .b = direct ? xg : col, .ldb = direct ? hw : ld, .c = out, .ldc = ld};          \
            int rc = pardo_gemm_run(c, &gm, conv_gemm_impl());                                                          \
            if (rc != PARDO_OK) return rc;                                                                             \
            if (nb == 1 && !b && !j->relu) continue;                                                                   \
            for (int64_t i = 0; i < nb; i++)                                                                           \
                for (int64_t r = 0; r < g->mg; r++) {                                                                  \
                    const int64_t m = gi * g->mg + r;                                                                  \
                    finish_row_##SUF(y + ((n0 + i) * g->m + m) * P, out + r * ld + i * P, P, b ? b + m : NULL,        \
                                     j->relu);                                                                         \
                }                                                                                                      \
        }                                                                                                              \
        return PARDO_OK;                                                                                               \
    }                                                                                                                  \
    static int grad_chunk_##SUF(const conv_job *j, pardo_kernel_ctx *c, int64_t blk, int64_t n0, int64_t nb,          \
                                bool first) {                                                                          \
        const conv_geom *g = j->g;                                                                                     \
        const int64_t hw = g->h * g->w, P = j->p, K = j->k, ld = nb * P, wn = g->m * K;                               \
        const bool direct = nb == 1 && conv_pointwise(g);                                                              \
        const size_t col_bytes = sizeof(T) * (size_t)(K * ld), rows_bytes = sizeof(T) * (size_t)(g->mg * ld);          \
        T *col = NULL, *rows = NULL;                                                                                   \
        if ((j->dw && !direct) || (j->dx && !direct)) {                                                                \
            if (!(col = pardo_scratch_get(PARDO_SCRATCH_COL, col_bytes))) return no_scratch(c, "columns", col_bytes);  \
        }                                                                                                              \
        /* for small images the chunk's rows of dY are gathered side by side, one product covering the chunk; for  \
         * bigger ones each product covers one image, reading its rows of dY in place, or a copy taken through the   \
         * mask. Which, depends on the shapes alone: masked or not (relu_grad fused in or not), the same sums. */     \
        const bool gather = nb > 1 && P < GATHER_BELOW;                                                                \
        const int64_t per = gather ? nb : 1;                                                                           \
        if ((gather || j->mask) && !(rows = pardo_scratch_get(PARDO_SCRATCH_ROWS, rows_bytes)))                        \
            return no_scratch(c, "output gradient rows", rows_bytes);                                                  \
        const T *x = j->x, *w = j->w, *dy = j->dy, *mask = j->mask;                                                    \
        T *dx = j->dx, *dw = j->dw;                                                                                    \
        const pardo_dtype dt = j->ctx->in[0]->dtype;                                                                   \
        const pardo_im2col ig = {.win = &g->win, .c = g->cg, .h = g->h, .w = g->w, .oh = g->oh, .ow = g->ow};          \
        for (int64_t gi = 0; gi < g->group; gi++) {                                                                    \
            const int64_t y0 = (n0 * g->m + gi * g->mg) * P; /* image n0's group gi in dY */                          \
            const T *xg = x + (n0 * g->c + gi * g->cg) * hw;                                                           \
            T *dxg = dx ? dx + (n0 * g->c + gi * g->cg) * hw : NULL;                                                   \
            for (int64_t i = 0; dw && !direct && i < nb; i++)                                                          \
                pardo_im2col_##SUF(&ig, xg + i * g->c * hw, col + i * P, ld);                                          \
            for (int64_t i0 = 0; i0 < nb; i0 += per) {                                                                 \
                const T *dyg = dy + y0 + i0 * g->m * P;                                                                \
                int64_t ldy = P;                                                                                       \
                if (rows) { /* the rows of images [i0, i0 + per), side by side, masked */                              \
                    for (int64_t i = 0; i < per; i++)                                                                  \
                        for (int64_t r = 0; r < g->mg; r++) {                                                          \
                            const int64_t o = y0 + ((i0 + i) * g->m + r) * P;                                          \
                            gather_row_##SUF(rows + r * per * P + i * P, dy + o, mask ? mask + o : NULL, P);           \
                        }                                                                                              \
                    dyg = rows;                                                                                        \
                    ldy = per * P;                                                                                     \
                }                                                                                                      \
                for (int64_t r = 0; j->dbp && r < g->mg; r++)                                                          \
                    j->dbp[blk * g->m + gi * g->mg + r] += row_sum_##SUF(dyg + r * ldy, per * P);                      \
                if (dw) {                                                                                              \
                    T *part = blk == 0 ? dw : (T *)j->part + (blk - 1) * wn;                                           \
                    pardo_gemm gm = {.dtype = dt, .tb = true, .m = g->mg, .n = K, .k = per * P, .a = dyg,              \
                                     .lda = ldy, .b = direct ? xg : col + i0 * P, .ldb = direct ? hw : ld,             \
                                     .c = part + gi * g->mg * K, .ldc = K, .accumulate = !(first && i0 == 0)};         \
                    int rc = pardo_gemm_run(c, &gm, conv_gemm_impl());                                                  \
                    if (rc != PARDO_OK) return rc;                                                                     \
                }                                                                                                      \
                if (dx) { /* into the columns of images [i0, i0 + per), which dW has just used */                      \
                    pardo_gemm gm = {.dtype = dt, .ta = true, .m = K, .n = per * P, .k = g->mg,                        \
                                     .a = w + gi * g->mg * K, .lda = K, .b = dyg, .ldb = ldy,                          \
                                     .c = direct ? dxg : col + i0 * P, .ldc = direct ? hw : ld};                       \
                    int rc = pardo_gemm_run(c, &gm, conv_gemm_impl());                                                  \
                    if (rc != PARDO_OK) return rc;                                                                     \
                }                                                                                                      \
            }                                                                                                          \
            for (int64_t i = 0; dx && !direct && i < nb; i++) {                                                        \
                T *dxi = dxg + i * g->c * hw;                                                                          \
                memset(dxi, 0, sizeof(T) * (size_t)(g->cg * hw));                                                      \
                pardo_col2im_##SUF(&ig, col + i * P, ld, dxi);                                                         \
            }                                                                                                          \
        }                                                                                                              \
        return PARDO_OK;                                                                                               \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS static void add_parts_##SUF(T *dw, const T *part, int64_t nparts, int64_t wn, int64_t e0,     \
                                                     int64_t e1) {                                                     \
        for (int64_t b = 0; b < nparts; b++) {                                                                         \
            const T *p = part + b * wn;                                                                                \
            for (int64_t e = e0; e < e1; e++) dw[e] += p[e];                                                           \
        }                                                                                                              \
    }

CONV_KERNELS(f32, float)
CONV_KERNELS(f64, double)

/* Item ch of the forward: the chunk of images from ch * cs (pardo_conv_items). */
static int fwd_item(void *job, pardo_kernel_ctx *c, int64_t ch) {
    const conv_job *j = job;
    const int64_t n0 = ch * j->cs, nb = n0 + j->cs < j->g->n ? j->cs : j->g->n - n0;
    return (j->ctx->in[0]->dtype == PARDO_F32 ? fwd_chunk_f32 : fwd_chunk_f64)(j, c, n0, nb);
}

/* Item b of the gradient: block b of images, chunk by chunk. */
static int grad_item(void *job, pardo_kernel_ctx *c, int64_t b) {
    const conv_job *j = job;
    const bool f32 = j->ctx->in[0]->dtype == PARDO_F32;
    const int64_t b0 = b * j->bs, b1 = b0 + j->bs < j->g->n ? b0 + j->bs : j->g->n;
    for (int64_t n0 = b0; n0 < b1; n0 += j->cs) {
        const int64_t nb = n0 + j->cs < b1 ? j->cs : b1 - n0;
        int rc = (f32 ? grad_chunk_f32 : grad_chunk_f64)(j, c, b, n0, nb, n0 == b0);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

/* Splits n items into chunks of at most `most` (>= 1) of about the same size: the chunk size. */
static int64_t even_chunks(int64_t n, int64_t most) {
    if (n <= 0) return 1;
    if (most < 1) most = 1;
    const int64_t k = (n + most - 1) / most;
    return (n + k - 1) / k;
}

/* Images whose columns fit in COL_BYTES (one at least). */
static int64_t col_images(const conv_job *j, size_t es) {
    const double per = (double)j->k * (double)j->p * (double)es;
    return per >= (double)COL_BYTES ? 1 : (int64_t)((double)COL_BYTES / (per > 0 ? per : 1));
}

/* ---- conv2d ---- */

static const pardo_arg_def conv_in[] = {
    {"X", "input [N, C, H, W] (float32 or float64)", false, false},
    {"W", "weight [M, C/group, kH, kW], X's dtype", false, false},
    {"B", "bias [M], X's dtype", true, false},
};
static const pardo_arg_def conv_out[] = {{"Y", "output [N, M, oH, oW]", false, false}};

static int conv_infer(pardo_infer_ctx *ctx) {
    conv_geom g;
    bool relu;
    int rc = conv_activation(ctx->op, &relu, ctx->st);
    if (rc != PARDO_OK) return rc;
    return conv_geometry(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 2), &g, &ctx->out[0], ctx->st);
}

static int conv_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in(ctx, 2);
    conv_geom g;
    pardo_type ty;
    bool relu;
    int rc = conv_activation(ctx->op, &relu, ctx->st);
    if (rc == PARDO_OK) rc = conv_geometry_run(ctx->op, x, w, b, &g, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, 4, ty.shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    conv_job j = {.g = &g, .ctx = ctx, .k = g.cg * g.win.kernel[0] * g.win.kernel[1], .p = g.oh * g.ow,
                  .x = pardo_tensor_data(x), .w = pardo_tensor_data(w), .b = b ? pardo_tensor_data(b) : NULL,
                  .y = pardo_tensor_data(y), .relu = relu};
    /* chunks of images whose columns fit in COL_BYTES, a few per thread (the bits do not depend on them) */
    const int64_t nth = ctx->nthreads > 1 ? ctx->nthreads : 1, few = 4 * nth;
    int64_t most = conv_pointwise(&g) ? 1 : col_images(&j, pardo_dtype_size(x->dtype));
    if ((g.n + most - 1) / most < few) most = (g.n + few - 1) / few;
    j.cs = even_chunks(g.n, most);
    const double macs = (double)g.n * (double)g.m * (double)j.p * (double)j.k;
    pardo_conv_items it = {.ctx = ctx, .n = (g.n + j.cs - 1) / j.cs, .item = fwd_item, .job = &j};
    return pardo_conv_items_run(&it, macs, PAR_MIN_MACS);
}

/* conv2d_grad reads Y only for attr activation "relu" (dY is taken where Y
 * > 0): elsewhere Y is left out of it, so that Y dies after its forward
 * readers and the fusion pass sees a relu's input read by the relu alone. */
static int conv_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    const char *act = "none";
    int rc = pardo_attr_string(req->fwd, "activation", "none", &act, st);
    if (rc != PARDO_OK) return rc;
    return pardo_grad_wired(req, blk, 0, strcmp(act, "relu") == 0 ? 0 : 1, st);
}

const pardo_op_def pardo_op_conv2d = {
    .type = "conv2d",
    .doc = "2-D convolution (ONNX Conv, NCHW): Y = X * W + B with strides, pads, dilations and groups, then attr "
           "activation",
    .inputs = conv_in,
    .n_inputs = 3,
    .outputs = conv_out,
    .n_outputs = 1,
    .attrs = conv_attrs,
    .n_attrs = 5,
    .infer = conv_infer,
    .cpu = conv_cpu,
    .cuda = pardo_cuda_conv2d,
    .halves_in_f32 = true,
    .grad = conv_grad_build,
};

/* ---- conv2d_grad ---- */

static const pardo_arg_def conv_grad_in[] = {
    {"X", "the forward input", false, false},
    {"W", "the forward weight", false, false},
    {"B", "the forward bias", true, false},
    {"Y", "the forward output (read with attr activation \"relu\" only: dY is taken where Y > 0)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def conv_grad_out[] = {
    {"dX", "gradient of X", true, false},
    {"dW", "gradient of W", true, false},
    {"dB", "gradient of B", true, false},
};

/* Geometry of the forward op from the gradient op's inputs; checks dY (when
 * given) against Y's type, and Y too where attr activation is relu (when
 * given; the kernel needs it). */
static int conv_grad_check(const pardo_op *op, const pardo_type *x, const pardo_type *w, const pardo_type *b,
                           const pardo_type *y, const pardo_type *dy, conv_geom *g, bool *relu, pardo_status *st) {
    pardo_type ty;
    int rc = conv_activation(op, relu, st);
    if (rc == PARDO_OK) rc = conv_geometry(op, x, w, b, g, &ty, st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 4 'dY'", &ty, "the output of conv2d", st);
    if (rc == PARDO_OK && *relu && y) rc = pardo_nn_expect_same(y, "input 3 'Y'", &ty, "the output of conv2d", st);
    return rc;
}

static int conv_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *w = ctx->in[1], *b = pardo_nn_in_type(ctx, 2);
    conv_geom g;
    bool relu;
    int rc = conv_grad_check(ctx->op, x, w, b, pardo_nn_in_type(ctx, 3), pardo_nn_in_type(ctx, 4), &g, &relu,
                             ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    ctx->out[1] = *w;
    ctx->out[2].dtype = x->dtype;
    ctx->out[2].ndim = 1;
    ctx->out[2].shape[0] = g.m;
    return PARDO_OK;
}

/* The type of input k of a kernel into *t, or NULL where it is absent. */
static const pardo_type *in_type(const pardo_kernel_ctx *ctx, int k, pardo_type *t) {
    const pardo_tensor *v = pardo_nn_in(ctx, k);
    if (!v) return NULL;
    *t = pardo_tensor_type(v);
    return t;
}

/* dW = block 0's partial sum + those of blocks 1.. in order, over elements [e0, e1). */
typedef struct parts_job {
    void *dw;
    const void *part;
    int64_t nparts, wn;
    bool f32;
} parts_job;

static void parts_items(void *arg, int64_t e0, int64_t e1) {
    const parts_job *p = arg;
    if (p->f32) add_parts_f32(p->dw, p->part, p->nparts, p->wn, e0, e1);
    else add_parts_f64(p->dw, p->part, p->nparts, p->wn, e0, e1);
}

static int conv_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *y = pardo_nn_in(ctx, 3), *dy = pardo_nn_in(ctx, 4);
    conv_geom g;
    pardo_type t[5];
    bool relu;
    int rc = conv_grad_check(ctx->op, in_type(ctx, 0, &t[0]), in_type(ctx, 1, &t[1]), in_type(ctx, 2, &t[2]),
                             in_type(ctx, 3, &t[3]), in_type(ctx, 4, &t[4]), &g, &relu, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (relu && dy && !y)
        return pardo_errorf(ctx->st, PARDO_EINVAL,
                            "attr 'activation' is \"relu\": input 3 'Y' (the forward output) is needed to mask dY");
    const bool want_dx = pardo_kernel_wants_output(ctx, 0), want_dw = pardo_kernel_wants_output(ctx, 1),
               want_db = pardo_kernel_wants_output(ctx, 2);
    pardo_tensor *dx = want_dx ? pardo_kernel_output(ctx, 0, x->dtype, 4, x->shape) : NULL;
    if (want_dx && !dx) return ctx->st->code;
    pardo_tensor *dw = want_dw ? pardo_kernel_output(ctx, 1, w->dtype, 4, w->shape) : NULL;
    if (want_dw && !dw) return ctx->st->code;
    pardo_tensor *db = want_db ? pardo_kernel_output(ctx, 2, x->dtype, 1, &g.m) : NULL;
    if (want_db && !db) return ctx->st->code;
    if (!dy || g.n == 0) { /* no gradient flows: zeros */
        if (dx) pardo_tensor_zero(dx);
        if (dw) pardo_tensor_zero(dw);
        if (db) pardo_tensor_zero(db);
        return PARDO_OK;
    }
    if (!dx && !dw && !db) return PARDO_OK;
    const size_t es = pardo_dtype_size(x->dtype);
    conv_job j = {.g = &g, .ctx = ctx, .k = g.cg * g.win.kernel[0] * g.win.kernel[1], .p = g.oh * g.ow,
                  .x = pardo_tensor_data(x), .w = pardo_tensor_data(w), .dy = pardo_tensor_data(dy),
                  .mask = relu ? pardo_tensor_data(y) : NULL, .dx = dx ? pardo_tensor_data(dx) : NULL,
                  .dw = dw ? pardo_tensor_data(dw) : NULL};
    /* blocks of images, their number from the shapes alone (at most GRAD_BLOCKS, their partial sums of dW at most
     * PART_ELEMS elements), each in chunks whose columns fit in COL_BYTES */
    const int64_t wn = g.m * j.k, fit = wn > 0 && wn < PART_ELEMS ? PART_ELEMS / wn : 1;
    int64_t nblk = g.n < GRAD_BLOCKS ? g.n : GRAD_BLOCKS;
    if (dw && nblk > fit) nblk = fit;
    j.bs = (g.n + nblk - 1) / nblk;
    nblk = (g.n + j.bs - 1) / j.bs;
    j.cs = even_chunks(j.bs, col_images(&j, es));
    /* the partial sums: dW's of blocks 1.. (block 0's is dW itself), then dB's of every block, in double */
    const size_t part_bytes = dw ? (size_t)((nblk - 1) * wn) * es : 0, part_at = (part_bytes + 63) & ~(size_t)63,
                 db_bytes = db ? sizeof(double) * (size_t)(nblk * g.m) : 0;
    char *part = part_at + db_bytes ? pardo_scratch_get(PARDO_SCRATCH_PART, part_at + db_bytes) : NULL;
    if (part_at + db_bytes && !part)
        return pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate %zu bytes for conv2d_grad's partial sums",
                            part_at + db_bytes);
    j.part = part;
    if (db_bytes) {
        j.dbp = (double *)(part + part_at);
        memset(j.dbp, 0, db_bytes);
    }
    const double macs = (double)g.n * (double)g.m * (double)j.p * (double)j.k * ((dx != NULL) + (dw != NULL));
    pardo_conv_items it = {.ctx = ctx, .n = nblk, .item = grad_item, .job = &j};
    if ((rc = pardo_conv_items_run(&it, macs, PAR_MIN_MACS)) != PARDO_OK) return rc;
    if (dw && nblk > 1) {
        parts_job pj = {.dw = j.dw, .part = part, .nparts = nblk - 1, .wn = wn, .f32 = x->dtype == PARDO_F32};
        if ((rc = pardo_run_chunks(ctx, wn, parts_items, &pj)) != PARDO_OK) return rc;
    }
    for (int64_t m = 0; db && m < g.m; m++) {
        double s = 0;
        for (int64_t b = 0; b < nblk; b++) s += j.dbp[b * g.m + m];
        if (x->dtype == PARDO_F32) ((float *)pardo_tensor_data(db))[m] = (float)s;
        else ((double *)pardo_tensor_data(db))[m] = s;
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_conv2d_grad = {
    .type = "conv2d_grad",
    .doc = "gradients of conv2d: dX (transposed convolution of dY), dW (dY correlated with X), dB (sum of dY); with "
           "attr activation relu, dY taken where Y > 0 (relu_grad's mask)",
    .inputs = conv_grad_in,
    .n_inputs = 5,
    .outputs = conv_grad_out,
    .n_outputs = 3,
    .attrs = conv_attrs,
    .n_attrs = 5,
    .infer = conv_grad_infer,
    .cpu = conv_grad_cpu,
    .cuda = pardo_cuda_conv2d_grad,
};
