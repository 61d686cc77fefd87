/* train_util.c - run-time inference, host scalars and kept device workspace for the training-side CUDA glue
 * (train_util.h). */
#include "train_util.h"

#include <stdlib.h>

#include "core/device_cache.h"
#include "launch_train.h"

enum { MAX_IO = 64 }; /* inputs and outputs an op has at most, like the executor */

int pardo_cuda_infer_run(pardo_kernel_ctx *ctx, pardo_type *out, int n_want) {
    pardo_type in[MAX_IO], res[MAX_IO];
    const pardo_type *ptrs[MAX_IO];
    if (ctx->n_in > MAX_IO || ctx->n_out > MAX_IO || n_want > ctx->n_out)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs and %d outputs, at most %d each", ctx->n_in,
                            ctx->n_out, MAX_IO);
    for (int k = 0; k < ctx->n_in; k++) {
        const pardo_tensor *t = ctx->in[k];
        ptrs[k] = NULL;
        if (!t) continue;
        if (t->is_array) return pardo_errorf(ctx->st, PARDO_EINVAL, "input %d is a tensor_array", k);
        in[k] = pardo_tensor_type(t);
        ptrs[k] = &in[k];
    }
    pardo_infer_ctx ic = {.op = ctx->op, .n_in = ctx->n_in, .in = ptrs, .n_out = ctx->n_out, .out = res, .st = ctx->st};
    int rc = ctx->op->def->infer(&ic);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < n_want; k++) out[k] = res[k];
    return PARDO_OK;
}

int pardo_cuda_host_scalar(pardo_kernel_ctx *ctx, pardo_tensor *t, double *v) {
    const void *h = pardo_tensor_cpu(t, ctx->st);
    if (!h) return ctx->st->code;
    *v = pardo_elem_get_f64(h, t->dtype, 0);
    return PARDO_OK;
}

/* The block an op keeps in its state slot. */
typedef struct workspace {
    void *p;
    size_t nbytes; // bytes asked for when it was allocated
} workspace;

static void workspace_free(void *data) {
    workspace *w = data;
    if (!w) return;
    pardo_device_cache_free(w->p);
    free(w);
}

/* The op's workspace record, made on first use; NULL where the slot is absent or holds another kernel's state. */
static workspace *workspace_of(pardo_kernel_ctx *ctx) {
    pardo_op_state *slot = ctx->state;
    if (!slot || (slot->data && slot->free_fn != workspace_free)) return NULL;
    if (!slot->data) {
        if (!(slot->data = calloc(1, sizeof(workspace)))) return NULL;
        slot->free_fn = workspace_free;
    }
    return slot->data;
}

int pardo_cuda_workspace_get(pardo_kernel_ctx *ctx, size_t nbytes, void **out) {
    *out = NULL;
    if (nbytes == 0) return PARDO_OK;
    workspace *w = workspace_of(ctx);
    if (w && w->p && w->nbytes >= nbytes) {
        *out = w->p;
        return PARDO_OK;
    }
    if (w && w->p) { /* too small: the earlier kernels that used it have finished (each op ends synchronised) */
        pardo_device_cache_free(w->p);
        w->p = NULL;
        w->nbytes = 0;
    }
    int rc = pardo_device_cache_alloc(out, nbytes, NULL, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (w) {
        w->p = *out;
        w->nbytes = nbytes;
    }
    return PARDO_OK;
}

void pardo_cuda_workspace_done(pardo_kernel_ctx *ctx, void *p) {
    if (!p) return;
    const pardo_op_state *slot = ctx->state;
    if (slot && slot->free_fn == workspace_free && slot->data && ((const workspace *)slot->data)->p == p) return;
    pardo_device_cache_free(p);
}

int pardo_cuda_zero(pardo_kernel_ctx *ctx, pardo_tensor *t) {
    char err[256];
    int rc = pardo_cuda_launch_zero(t->mem->gpu_ptr, t->nbytes, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

int pardo_cuda_copy(pardo_kernel_ctx *ctx, void *dst, const void *src, size_t nbytes) {
    char err[256];
    int rc = pardo_cuda_launch_copy(dst, src, nbytes, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}
