/* conv_cuda.c - conv2d and conv2d_grad on the GPU (pardo_kernel_fn), built only with CUDA=1; ops/conv.c names
 * them through ops/cuda/kernels.h. The semantics are ops/conv.c's (ONNX Conv, NCHW: strides, pads, dilations,
 * group, the bias and attr activation relu; the gradient's dY taken where Y > 0 under relu). Its infer function
 * checks the run-time types (the CPU kernel's checks and messages). Per chunk of images whose columns fit in
 * COL_BYTES (one image at least), with K = C/group kH kW and P = oH oW:
 *   forward: im2col of the chunk into the workspace (ops/cuda/conv.cu), then per group one strided batched
 *            product over the chunk's images, Y_g [M/group, P] = W_g [M/group, K] col_g [K, P] (pardo_cuda_gemm,
 *            row-major through cuBLAS), then the bias and relu (launch.h's epilogue kernel);
 *   dX:      per group col_g = W_g^T dY_g (strided batched over the images), then col2im into dX;
 *   dW:      per group the chunk's dY_g,i col_g,i^T (strided batched, image i's into partial sum i), then the
 *            partial sums and dW so far added in double (launch.h's sum kernel): the same bits on every run;
 *   dB:      dY summed over the images and positions, in double (launch.h's sum kernel).
 * A 1x1 kernel with strides 1 and no pads needs no columns: X (dX) is them. The masked dY (relu), the partial sums and
 * the columns live in device memory from the device cache kept in the op's state slot (train_util.h), so the steady
 * state allocates nothing. What the GPU half does not take (halves, a tensor_array, sizes past cuBLAS's ints) runs the
 * CPU kernel, which also gives the errors. */
#include <limits.h>
#include <string.h>

#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_train.h"
#include "train_util.h"
#include "window2d.h"

#define COL_BYTES ((size_t)16 << 20)  /* bytes: the columns of one chunk of images at most (one image's at least) */
#define PART_BYTES ((size_t)32 << 20) /* bytes: conv2d_grad's partial sums of dW for a chunk of images at most */
#define ALIGN 256                     /* bytes: the workspace's parts start at multiples of it */

/* One conv2d's geometry on the device. */
typedef struct plan {
    pardo_cuda_conv2d_geom g;
    int64_t cg, mg, k, p; // channels per group in and out, K, P
    bool relu, pointwise;
    int f64;
    size_t es;
} plan;

/* Fills pl from the (checked) attrs and shapes of x and w; false where a product size is past cuBLAS's ints. */
static int plan_make(pardo_kernel_ctx *ctx, const pardo_tensor *x, const pardo_tensor *w, plan *pl, bool *fits) {
    pardo_window2d win;
    const char *act;
    int64_t group;
    int rc = pardo_window2d_attrs(ctx->op, NULL, true, &win, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_int(ctx->op, "group", 1, &group, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_string(ctx->op, "activation", "none", &act, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_cuda_conv2d_geom *g = &pl->g;
    memset(pl, 0, sizeof *pl);
    g->n = x->shape[0], g->c = x->shape[1], g->h = x->shape[2], g->w = x->shape[3];
    g->m = w->shape[0], g->kh = w->shape[2], g->kw = w->shape[3], g->group = group;
    for (int a = 0; a < 2; a++) {
        g->stride[a] = win.stride[a];
        g->dilation[a] = win.dilation[a];
        g->pad[a] = win.pad[a];
        g->pad[a + 2] = win.pad[a + 2];
        win.kernel[a] = a ? g->kw : g->kh;
    }
    if ((rc = pardo_window2d_out_size(&win, 0, g->h, "the kernel of input 1 'W'", &g->oh, ctx->st)) != PARDO_OK ||
        (rc = pardo_window2d_out_size(&win, 1, g->w, "the kernel of input 1 'W'", &g->ow, ctx->st)) != PARDO_OK)
        return rc;
    pl->cg = g->c / group;
    pl->mg = g->m / group;
    pl->k = pl->cg * g->kh * g->kw;
    pl->p = g->oh * g->ow;
    pl->relu = strcmp(act, "relu") == 0;
    pl->pointwise = g->kh == 1 && g->kw == 1 && g->stride[0] == 1 && g->stride[1] == 1 && g->pad[0] == 0 &&
                    g->pad[1] == 0 && g->pad[2] == 0 && g->pad[3] == 0;
    pl->f64 = x->dtype == PARDO_F64;
    pl->es = pl->f64 ? sizeof(double) : sizeof(float);
    *fits = pl->k <= INT_MAX && pl->p <= INT_MAX && pl->mg <= INT_MAX && g->n <= INT_MAX &&
            g->c * g->h * g->w <= INT_MAX / 2 && g->m * pl->p <= INT_MAX / 2;
    return PARDO_OK;
}

/* Images per chunk: their columns in COL_BYTES, one at least; all of them for a pointwise conv (no columns). */
static int64_t chunk_images(const plan *pl) {
    if (pl->pointwise) return pl->g.n > 0 ? pl->g.n : 1;
    const size_t per = (size_t)(pl->g.c * pl->g.kh * pl->g.kw * pl->p) * pl->es;
    int64_t nb = per > 0 && per < COL_BYTES ? (int64_t)(COL_BYTES / per) : 1;
    return nb < pl->g.n ? nb : (pl->g.n > 0 ? pl->g.n : 1);
}

static size_t aligned(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int cuda_error(pardo_kernel_ctx *ctx, int rc, const char *err) { return pardo_errorf(ctx->st, rc, "%s", err); }

/* The op's last launch synchronised, the workspace ws given back (or kept): the op's status, rc first. */
static int finish(pardo_kernel_ctx *ctx, void *ws, int rc, const char *err) {
    char e2[256];
    if (!rc) {
        rc = pardo_cuda_sync_check(ctx->op->def->type, e2, sizeof e2);
        err = e2;
    } else {
        pardo_cuda_sync_check(ctx->op->def->type, e2, sizeof e2); /* the work queued so far ends before ws goes */
    }
    pardo_cuda_workspace_done(ctx, ws);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* The op's status after a failure ctx->st holds: the work queued so far waited for, then ws given back. */
static int failed(pardo_kernel_ctx *ctx, void *ws) {
    char e2[256];
    pardo_cuda_sync_check(ctx->op->def->type, e2, sizeof e2);
    pardo_cuda_workspace_done(ctx, ws);
    return ctx->st->code;
}

/* conv2d's CUDA kernel. */
int pardo_cuda_conv2d(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *b = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!pardo_cuda_floats_in(ctx, 0x7)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x7);
    pardo_type ty;
    plan pl;
    bool fits;
    int rc = pardo_cuda_infer_run(ctx, &ty, 1);
    if (rc == PARDO_OK) rc = plan_make(ctx, x, w, &pl, &fits);
    if (rc != PARDO_OK) return rc;
    if (!fits) return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes sizes that fit cuBLAS's ints, not these");
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, 4, ty.shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    const pardo_cuda_conv2d_geom *g = &pl.g;
    const int64_t cs = chunk_images(&pl), rows = g->c * g->kh * g->kw, P = pl.p, K = pl.k, mg = pl.mg;
    void *ws = NULL;
    if (!pl.pointwise && pardo_cuda_workspace_get(ctx, (size_t)(cs * rows * P) * pl.es, &ws) != PARDO_OK)
        return ctx->st->code;
    const char *px = x->mem->gpu_ptr, *pw = w->mem->gpu_ptr;
    char *py = y->mem->gpu_ptr, err[256] = "";
    const size_t es = pl.es;
    for (int64_t n0 = 0; !rc && n0 < g->n; n0 += cs) {
        const int64_t nb = n0 + cs < g->n ? cs : g->n - n0;
        if (!pl.pointwise) rc = pardo_cuda_launch_im2col(pl.f64, px, ws, g, n0, nb, err, sizeof err);
        for (int64_t gi = 0; !rc && gi < g->group; gi++) {
            const char *col = pl.pointwise ? px + (size_t)((n0 * g->c + gi * pl.cg) * P) * es
                                           : (const char *)ws + (size_t)(gi * K * P) * es;
            const int64_t col_stride = pl.pointwise ? g->c * P : rows * P;
            rc = pardo_cuda_gemm(pl.f64, 0, 0, mg, P, K, pw + (size_t)(gi * mg * K) * es, 0, col, col_stride,
                                 py + (size_t)((n0 * g->m + gi * mg) * P) * es, g->m * P, nb, 0.0, err, sizeof err);
        }
    }
    if (!rc && (b || pl.relu)) {
        const int64_t shape[3] = {g->n, g->m, P}, strides[3] = {0, 1, 0};
        rc = pardo_cuda_launch_bias_act(pl.f64, py, b ? b->mem->gpu_ptr : NULL, 3, shape, strides,
                                        pl.relu ? PARDO_CU_ACT_RELU : PARDO_CU_ACT_NONE, err, sizeof err);
    }
    return finish(ctx, ws, rc, err);
}

/* conv2d_grad's CUDA kernel: dX, dW and dB, each where wanted. */
int pardo_cuda_conv2d_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *w = ctx->in[1], *y = ctx->n_in > 3 ? ctx->in[3] : NULL,
                 *dy = ctx->n_in > 4 ? ctx->in[4] : NULL;
    const unsigned read = 0x1f; /* X, W, B, Y and dY of one float dtype */
    if (!pardo_cuda_floats_in(ctx, read)) return pardo_cuda_run_on_cpu_inputs(ctx, read);
    plan pl;
    bool fits;
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = plan_make(ctx, x, w, &pl, &fits);
    if (rc != PARDO_OK) return rc;
    if (!fits || (pl.relu && dy && !y)) /* the CPU kernel says that Y is needed */
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes the shapes and attrs the CPU kernel takes, not these");
    const pardo_cuda_conv2d_geom *g = &pl.g;
    const bool want_dx = pardo_kernel_wants_output(ctx, 0), want_dw = pardo_kernel_wants_output(ctx, 1),
               want_db = pardo_kernel_wants_output(ctx, 2);
    pardo_tensor *dx = want_dx ? pardo_kernel_output(ctx, 0, x->dtype, 4, x->shape) : NULL;
    if (want_dx && !dx) return ctx->st->code;
    pardo_tensor *dw = want_dw ? pardo_kernel_output(ctx, 1, w->dtype, 4, w->shape) : NULL;
    if (want_dw && !dw) return ctx->st->code;
    pardo_tensor *db = want_db ? pardo_kernel_output(ctx, 2, x->dtype, 1, &g->m) : NULL;
    if (want_db && !db) return ctx->st->code;
    char err[256] = "";
    if (!dy || g->n == 0) { /* no gradient flows: zeros */
        pardo_tensor *const outs[3] = {dx, dw, db};
        for (int k = 0; k < 3; k++)
            if (outs[k] && pardo_cuda_zero(ctx, outs[k]) != PARDO_OK) return ctx->st->code;
        return finish(ctx, NULL, 0, err);
    }
    if (!dx && !dw && !db) return PARDO_OK;
    const int64_t rows = g->c * g->kh * g->kw, P = pl.p, K = pl.k, mg = pl.mg, wn = g->m * K;
    const size_t es = pl.es;
    int64_t cs = chunk_images(&pl);
    if (dw) { /* the chunk's partial sums of dW (and the sum so far) fit in PART_BYTES */
        const int64_t fit = (int64_t)(PART_BYTES / ((size_t)wn * es)) - 1;
        if (cs > fit) cs = fit > 1 ? fit : 1;
    }
    const size_t mask_bytes = pl.relu ? aligned(dy->nbytes) : 0,
                 part_bytes = dw ? aligned((size_t)((cs + 1) * wn) * es) : 0,
                 col_bytes = pl.pointwise || (!dx && !dw) ? 0 : (size_t)(cs * rows * P) * es;
    void *ws = NULL;
    if (pardo_cuda_workspace_get(ctx, mask_bytes + part_bytes + col_bytes, &ws) != PARDO_OK) return ctx->st->code;
    /* dY through relu's mask: a copy taken where Y > 0 */
    const char *pg = dy->mem->gpu_ptr;
    if (pl.relu) {
        if (pardo_cuda_copy(ctx, ws, pg, dy->nbytes) != PARDO_OK) return failed(ctx, ws);
        rc = pardo_cuda_launch_relu_mask(pl.f64, ws, y->mem->gpu_ptr, dy->numel, err, sizeof err);
        pg = ws;
    }
    char *part = (char *)ws + mask_bytes, *col = part + part_bytes;
    const char *px = x->mem->gpu_ptr, *pw = w->mem->gpu_ptr;
    if (!rc && db) {
        const int64_t shape[3] = {g->n, g->m, P};
        const int keep[3] = {0, 1, 0};
        rc = pardo_cuda_launch_sum_to(pl.f64, pg, 3, shape, keep, db->mem->gpu_ptr, err, sizeof err);
    }
    for (int64_t n0 = 0; !rc && (dx || dw) && n0 < g->n; n0 += cs) {
        const int64_t nb = n0 + cs < g->n ? cs : g->n - n0;
        if (dw && !pl.pointwise) rc = pardo_cuda_launch_im2col(pl.f64, px, col, g, n0, nb, err, sizeof err);
        for (int64_t gi = 0; !rc && gi < g->group; gi++) {
            const char *dyg = pg + (size_t)((n0 * g->m + gi * mg) * P) * es;
            /* image i's columns of group gi (X's channels where pointwise) */
            const size_t col_at =
                pl.pointwise ? (size_t)((n0 * g->c + gi * pl.cg) * P) * es : (size_t)(gi * K * P) * es;
            const int64_t col_stride = pl.pointwise ? g->c * P : rows * P;
            if (dw) /* image i's dW_g = dY_g,i col_g,i^T into partial sum i + 1, for the chunk's images at once */
                rc = pardo_cuda_gemm(pl.f64, 0, 1, mg, K, P, dyg, g->m * P, (pl.pointwise ? px : col) + col_at,
                                     col_stride, part + (size_t)(wn + gi * mg * K) * es, wn, nb, 0.0, err, sizeof err);
            if (!rc && dx) /* col_g = W_g^T dY_g, for the chunk's images at once; into dX itself where pointwise */
                rc = pardo_cuda_gemm(pl.f64, 1, 0, K, P, mg, pw + (size_t)(gi * mg * K) * es, 0, dyg, g->m * P,
                                     (pl.pointwise ? (char *)dx->mem->gpu_ptr : col) + col_at, col_stride, nb, 0.0, err,
                                     sizeof err);
        }
        if (!rc && dx && !pl.pointwise)
            rc = pardo_cuda_launch_col2im(pl.f64, col, dx->mem->gpu_ptr, g, n0, nb, err, sizeof err);
        if (!rc && dw) { /* dW = the sum, in double, of the chunk's partial sums and (after the first) dW so far */
            if (n0 > 0 && pardo_cuda_copy(ctx, part, dw->mem->gpu_ptr, dw->nbytes) != PARDO_OK) return failed(ctx, ws);
            const int64_t shape[2] = {nb + (n0 > 0), wn};
            const int keep[2] = {0, 1};
            rc = pardo_cuda_launch_sum_to(pl.f64, n0 > 0 ? part : part + (size_t)wn * es, 2, shape, keep,
                                          dw->mem->gpu_ptr, err, sizeof err);
        }
    }
    return finish(ctx, ws, rc, err);
}
