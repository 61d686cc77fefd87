/* kernel_ctx.c - output tensors for kernels (pardo_kernel_output, op.h). */
#include "exec/executor.h"
#include "op.h"

/* True when t is one of the op's inputs (an in-place update). */
static bool is_input(const pardo_kernel_ctx *ctx, const pardo_tensor *t) {
    for (int k = 0; k < ctx->n_in; k++)
        if (ctx->in[k] == t) return true;
    return false;
}

pardo_tensor *pardo_kernel_output(pardo_kernel_ctx *ctx, int i, pardo_dtype dtype, int ndim, const int64_t *shape) {
    PARDO_ASSERT(i >= 0 && i < ctx->n_out);
    pardo_tensor *t = ctx->out[i];
    bool reusable = t && t->dtype == dtype && pardo_shape_equal(t->ndim, t->shape, ndim, shape) &&
                    (atomic_load(&t->refs) == 1 || (ctx->op->def->inplace && is_input(ctx, t)));
    if (!reusable) {
        /* a tensor only this output held goes back to the executor's pool (if it keeps one), and a new
         * output comes from there when a free tensor has its size */
        if (t && atomic_load(&t->refs) == 1) pardo_executor_pool_put(ctx->exec, ctx->scope, t);
        else pardo_tensor_release(t);
        ctx->out[i] = NULL;
        t = pardo_executor_pool_take(ctx->exec, ctx->scope, dtype, ndim, shape);
        if (!t && !(t = pardo_tensor_new(dtype, ndim, shape, ctx->st))) return NULL;
        ctx->out[i] = t;
    }
    void *p = ctx->device == PARDO_DEVICE_CUDA ? pardo_synced_mem_mutable_gpu_data(t->mem, ctx->st)
                                               : pardo_synced_mem_mutable_cpu_data(t->mem, ctx->st);
    return p ? t : NULL;
}

bool pardo_kernel_wants_output(const pardo_kernel_ctx *ctx, int i) {
    return i >= 0 && i < ctx->n_out && ctx->op->out[i][0] != '\0';
}

pardo_tensor *pardo_kernel_output_array(pardo_kernel_ctx *ctx, int i, pardo_dtype elem, int n) {
    PARDO_ASSERT(i >= 0 && i < ctx->n_out && n >= 0);
    pardo_tensor *a = ctx->out[i];
    if (!(a && a->is_array && a->dtype == elem && atomic_load(&a->refs) == 1)) {
        pardo_tensor_release(a);
        ctx->out[i] = NULL;
        if (!(a = pardo_tensor_array_new(elem, ctx->st))) return NULL;
        ctx->out[i] = a;
    }
    return pardo_tensor_array_resize(a, n, ctx->st) == PARDO_OK ? a : NULL;
}
