/* embedding_cuda.c - embedding and embedding_grad on the GPU (pardo_kernel_fn), built only with CUDA=1;
 * ops/embedding.c names them through ops/cuda/kernels.h. The semantics are ops/embedding.c's (W [V, D]'s rows
 * picked by int32 or int64 indices of any shape; the gradient dY's rows added into the rows they came from). The
 * op's infer function checks the run-time types; the indices are checked on the host before anything is written
 * (they are a feed's, current there, as a rule), and where one is outside [0, V) the CPU kernel runs, which says
 * which. The gradient's scatter adds with atomicAdd (ops/cuda/embedding.cu): where indices repeat, the sums are
 * added in no fixed order, so their last bits differ from the CPU kernel's in-order sums (and between runs). */
#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_train.h"
#include "train_util.h"

/* True when every index of idx is a row of a table of v rows; *ok false with ctx->st filled when the host copy
 * cannot be had. */
static bool indices_in_range(pardo_kernel_ctx *ctx, pardo_tensor *idx, int64_t v, bool *ok) {
    const void *p = pardo_tensor_cpu(idx, ctx->st);
    *ok = p != NULL;
    if (!p) return false;
    for (int64_t i = 0; i < idx->numel; i++) {
        const int64_t r = idx->dtype == PARDO_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
        if (r < 0 || r >= v) return false;
    }
    return true;
}

static int finish(pardo_kernel_ctx *ctx, int rc, const char *err) {
    char e2[256];
    if (!rc) {
        rc = pardo_cuda_sync_check(ctx->op->def->type, e2, sizeof e2);
        err = e2;
    }
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

#define RANGE_WHY "its CUDA kernel takes indices inside the table (the CPU kernel says which is not)"

int pardo_cuda_embedding(pardo_kernel_ctx *ctx) {
    pardo_tensor *w = ctx->in[0], *idx = ctx->in[1];
    pardo_type ty;
    bool ok;
    if (!pardo_cuda_floats_in(ctx, 0x1) || idx->is_array) return pardo_cuda_run_on_cpu_inputs(ctx, 0x3);
    int rc = pardo_cuda_infer_run(ctx, &ty, 1);
    if (rc != PARDO_OK) return rc;
    if (!indices_in_range(ctx, idx, w->shape[0], &ok))
        return ok ? pardo_cuda_run_on_cpu(ctx, RANGE_WHY) : ctx->st->code;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    char err[256] = "";
    rc = pardo_cuda_launch_embedding(w->dtype == PARDO_F64, w->mem->gpu_ptr, idx->dtype == PARDO_I64, idx->mem->gpu_ptr,
                                     idx->numel, w->shape[1], y->mem->gpu_ptr, err, sizeof err);
    return finish(ctx, rc, err);
}

int pardo_cuda_embedding_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *w = ctx->in[0], *idx = ctx->in[1], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL;
    bool ok;
    const unsigned read = 1u << 0 | 1u << 3; /* W and dY of one float dtype */
    if (!pardo_cuda_floats_in(ctx, read) || idx->is_array) return pardo_cuda_run_on_cpu_inputs(ctx, read);
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc != PARDO_OK) return rc;
    if (!indices_in_range(ctx, idx, w->shape[0], &ok))
        return ok ? pardo_cuda_run_on_cpu(ctx, RANGE_WHY) : ctx->st->code;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    pardo_tensor *dw = pardo_kernel_output(ctx, 0, w->dtype, 2, w->shape);
    if (!dw) return ctx->st->code;
    if (pardo_cuda_zero(ctx, dw) != PARDO_OK) return ctx->st->code;
    char err[256] = "";
    if (dy)
        rc = pardo_cuda_launch_embedding_grad(w->dtype == PARDO_F64, dy->mem->gpu_ptr, idx->dtype == PARDO_I64,
                                              idx->mem->gpu_ptr, idx->numel, w->shape[1], dw->mem->gpu_ptr, err,
                                              sizeof err);
    return finish(ctx, rc, err);
}
