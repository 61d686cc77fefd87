/* batch_norm_cuda.c - batch_norm and batch_norm_grad on the GPU (pardo_kernel_fn), built only with CUDA=1;
 * ops/batch_norm.c names them through ops/cuda/kernels.h. The semantics are ops/batch_norm.c's (ONNX
 * BatchNormalization over [N, C, ...]: the batch's statistics in training mode, the running ones updated in place,
 * the running ones in eval mode; the gradient through the batch's statistics when training). The op's infer
 * function checks the run-time types; one block per channel sums in double (ops/cuda/batch_norm.cu). The sync
 * form's input `stats` (the sums of every part) and what else the GPU half does not take run the CPU kernel. */
#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_train.h"
#include "train_util.h"

/* X's batch, channels and elements per channel and row. */
static void dims(const pardo_tensor *x, int64_t *n, int64_t *c, int64_t *s) {
    *n = x->shape[0];
    *c = x->shape[1];
    *s = 1;
    for (int d = 2; d < x->ndim; d++) *s *= x->shape[d];
}

static int finish(pardo_kernel_ctx *ctx, int rc, const char *err) {
    char e2[256];
    if (!rc) {
        rc = pardo_cuda_sync_check(ctx->op->def->type, e2, sizeof e2);
        err = e2;
    }
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

#define STATS_WHY "its CUDA kernel takes the batch's statistics from X, not input 'stats' (the sync form)"

int pardo_cuda_batch_norm(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_cuda_floats_in(ctx, 0x1f)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1f);
    if (ctx->training && ctx->n_in > 5 && ctx->in[5]) return pardo_cuda_run_on_cpu(ctx, STATS_WHY);
    double eps, momentum;
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "epsilon", 1e-5, &eps, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "momentum", 0.9, &momentum, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    if (!(out[0] = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape))) return ctx->st->code;
    for (int k = 1; k < ctx->n_out && k < 3; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        const pardo_tensor *src = ctx->in[k + 2];
        if (!(out[k] = pardo_kernel_output(ctx, k, src->dtype, src->ndim, src->shape))) return ctx->st->code;
    }
    int64_t n, c, s;
    dims(x, &n, &c, &s);
    char err[256] = "";
    rc = pardo_cuda_launch_batch_norm(x->dtype == PARDO_F64, ctx->training, x->mem->gpu_ptr, ctx->in[1]->mem->gpu_ptr,
                                      ctx->in[2]->mem->gpu_ptr, ctx->in[3]->mem->gpu_ptr, ctx->in[4]->mem->gpu_ptr, n,
                                      c, s, eps, momentum, out[0]->mem->gpu_ptr, out[1] ? out[1]->mem->gpu_ptr : NULL,
                                      out[2] ? out[2]->mem->gpu_ptr : NULL, err, sizeof err);
    return finish(ctx, rc, err);
}

int pardo_cuda_batch_norm_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 8 ? ctx->in[8] : NULL;
    const unsigned read = 1u << 0 | 1u << 1 | 1u << 3 | 1u << 4 | 1u << 8; /* X, scale, mean, var, dY */
    if (!pardo_cuda_floats_in(ctx, read)) return pardo_cuda_run_on_cpu_inputs(ctx, read);
    if (ctx->training && ctx->n_in > 11 && ctx->in[11]) return pardo_cuda_run_on_cpu(ctx, STATS_WHY);
    if (!dy || dy->numel != x->numel) /* the CPU kernel says what dY must be */
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes a dY of X's shape");
    double eps;
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "epsilon", 1e-5, &eps, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    for (int k = 0; k < ctx->n_out && k < 3; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        const pardo_tensor *like = k == 0 ? x : ctx->in[1];
        if (!(out[k] = pardo_kernel_output(ctx, k, like->dtype, like->ndim, like->shape))) return ctx->st->code;
    }
    if (!out[0] && !out[1] && !out[2]) return PARDO_OK;
    int64_t n, c, s;
    dims(x, &n, &c, &s);
    char err[256] = "";
    rc = pardo_cuda_launch_batch_norm_grad(
        x->dtype == PARDO_F64, ctx->training, x->mem->gpu_ptr, ctx->in[1]->mem->gpu_ptr, ctx->in[3]->mem->gpu_ptr,
        ctx->in[4]->mem->gpu_ptr, dy->mem->gpu_ptr, n, c, s, eps, out[0] ? out[0]->mem->gpu_ptr : NULL,
        out[1] ? out[1]->mem->gpu_ptr : NULL, out[2] ? out[2]->mem->gpu_ptr : NULL, err, sizeof err);
    return finish(ctx, rc, err);
}
