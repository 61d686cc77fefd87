/* pool_cuda.c - max_pool2d, avg_pool2d and their gradients on the GPU (pardo_kernel_fn), built only with CUDA=1;
 * ops/pool.c names them through ops/cuda/kernels.h. The semantics are ops/pool.c's (ONNX MaxPool and AveragePool
 * on NCHW, attrs kernel, strides (default: the kernel) and pads, each window clipped to the input, the average
 * over the input elements inside it; the first maximum of a window in row-major order, where the gradient goes).
 * The op's infer function checks the run-time types (the CPU kernel's checks and messages); the kernels
 * (ops/cuda/pool.cu) add in the CPU kernel's order, so the results are its bits. What the GPU half does not take
 * (max_pool2d of integers and halves, a tensor_array) runs the CPU kernel. */
#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_train.h"
#include "train_util.h"
#include "window2d.h"

/* The pool's geometry from its (checked) attrs and X [N, C, H, W]. */
static int geom_make(pardo_kernel_ctx *ctx, const pardo_tensor *x, pardo_cuda_pool2d_geom *g) {
    int64_t k[PARDO_MAX_DIMS];
    int nk;
    pardo_window2d win;
    int rc = pardo_attr_ints(ctx->op, "kernel", k, PARDO_MAX_DIMS, &nk, ctx->st);
    if (rc == PARDO_OK) rc = pardo_window2d_attrs(ctx->op, k, false, &win, ctx->st);
    if (rc != PARDO_OK) return rc;
    win.kernel[0] = k[0];
    win.kernel[1] = k[1];
    *g = (pardo_cuda_pool2d_geom){
        .planes = x->shape[0] * x->shape[1], .h = x->shape[2], .w = x->shape[3], .kh = k[0], .kw = k[1]};
    for (int a = 0; a < 2; a++) {
        g->stride[a] = win.stride[a];
        g->pad[a] = win.pad[a];
        g->pad[a + 2] = win.pad[a + 2];
    }
    if ((rc = pardo_window2d_out_size(&win, 0, g->h, "attr 'kernel'", &g->oh, ctx->st)) != PARDO_OK) return rc;
    return pardo_window2d_out_size(&win, 1, g->w, "attr 'kernel'", &g->ow, ctx->st);
}

static int launched(pardo_kernel_ctx *ctx, int rc, const char *err) {
    char e2[256];
    if (!rc) {
        rc = pardo_cuda_sync_check(ctx->op->def->type, e2, sizeof e2);
        err = e2;
    }
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

static int pool_fwd(pardo_kernel_ctx *ctx, int max) {
    pardo_tensor *x = ctx->in[0];
    pardo_type ty;
    pardo_cuda_pool2d_geom g;
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    int rc = pardo_cuda_infer_run(ctx, &ty, 1);
    if (rc == PARDO_OK) rc = geom_make(ctx, x, &g);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, 4, ty.shape);
    if (!y) return ctx->st->code;
    char err[256] = "";
    rc = pardo_cuda_launch_pool2d(max, x->dtype == PARDO_F64, x->mem->gpu_ptr, y->mem->gpu_ptr, &g, err, sizeof err);
    return launched(ctx, rc, err);
}

static int pool_bwd(pardo_kernel_ctx *ctx, int max) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    pardo_cuda_pool2d_geom g;
    if (!pardo_cuda_floats_in(ctx, 0x5)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x5);
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = geom_make(ctx, x, &g);
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, 4, x->shape);
    if (!dx) return ctx->st->code;
    char err[256] = "";
    if (!dy) {
        if (pardo_cuda_zero(ctx, dx) != PARDO_OK) return ctx->st->code;
        return launched(ctx, 0, err);
    }
    rc = pardo_cuda_launch_pool2d_grad(max, x->dtype == PARDO_F64, x->mem->gpu_ptr, dy->mem->gpu_ptr, dx->mem->gpu_ptr,
                                       &g, err, sizeof err);
    return launched(ctx, rc, err);
}

int pardo_cuda_max_pool2d(pardo_kernel_ctx *ctx) { return pool_fwd(ctx, 1); }
int pardo_cuda_avg_pool2d(pardo_kernel_ctx *ctx) { return pool_fwd(ctx, 0); }
int pardo_cuda_max_pool2d_grad(pardo_kernel_ctx *ctx) { return pool_bwd(ctx, 1); }
int pardo_cuda_avg_pool2d_grad(pardo_kernel_ctx *ctx) { return pool_bwd(ctx, 0); }
