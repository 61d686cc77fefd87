/* loss_cuda.c - mse_loss, mse_loss_grad, dropout and dropout_grad on the GPU (pardo_kernel_fn), built only with
 * CUDA=1; ops/loss.c and ops/dropout.c name them through ops/cuda/kernels.h. The semantics are theirs: mse_loss's
 * prediction and target of one dtype and shape, reduction mean (0 for no elements), sum or none, its gradient's
 * optional dloss (zeros) and either output; dropout's attrs ratio in [0, 1) and seed, the optional run-time
 * ratio and training_mode scalars (read on the host), the run's training and step, the optional Mask output;
 * dropout_grad's optional Mask input (else the mask recomputed) and dY. The mask is drawn on the device by
 * ops/dropout_mask.h, the generator the CPU kernel calls: the same (seed, step, index) keep the same elements on
 * both. What the GPU half does not take (half and integer dtypes, a tensor_array, shapes or attrs the CPU kernel
 * refuses) runs the CPU kernel (pardo_cuda_run_on_cpu), which also gives the errors. */
#include <string.h>

#include "core/device.h"
#include "core/device_cache.h"
#include "cuda_util.h"
#include "dropout_mask.h"
#include "kernels.h"
#include "launch.h"
#include "launch_nn.h"
#include "nn_util.h"

static const char k_refused[] = "its CUDA kernel takes the shapes and attrs the CPU kernel takes, not these";

static int cuda_error(pardo_kernel_ctx *ctx, int rc, const char *err) { return pardo_errorf(ctx->st, rc, "%s", err); }

/* mse_loss's reduction attr as launch_nn.h's enum; false for a word the CPU kernel refuses. */
static bool reduction_get(pardo_kernel_ctx *ctx, int *red) {
    const char *s;
    if (pardo_attr_string(ctx->op, "reduction", "mean", &s, ctx->st) != PARDO_OK) return false;
    *red = strcmp(s, "mean") == 0   ? PARDO_CU_RED_MEAN
           : strcmp(s, "sum") == 0  ? PARDO_CU_RED_SUM
           : strcmp(s, "none") == 0 ? PARDO_CU_RED_NONE
                                    : -1;
    return *red >= 0;
}

static bool same_shape(const pardo_tensor *a, const pardo_tensor *b) {
    return pardo_shape_equal(a->ndim, a->shape, b->ndim, b->shape);
}

/* mse_loss's CUDA kernel: (prediction - target)^2, reduced. */
int pardo_cuda_mse_loss(pardo_kernel_ctx *ctx) {
    pardo_tensor *p = ctx->in[0], *t = ctx->in[1];
    if (!pardo_cuda_floats_in(ctx, 0x3)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x3);
    int red;
    if (!reduction_get(ctx, &red) || !same_shape(p, t)) return pardo_cuda_run_on_cpu(ctx, k_refused);
    pardo_tensor *y = red == PARDO_CU_RED_NONE ? pardo_kernel_output(ctx, 0, p->dtype, p->ndim, p->shape)
                                               : pardo_kernel_output(ctx, 0, p->dtype, 0, p->shape);
    if (!y) return ctx->st->code;
    void *partials = NULL;
    if (red != PARDO_CU_RED_NONE &&
        pardo_device_cache_alloc(&partials, sizeof(double) * PARDO_CU_MSE_PARTS, NULL, ctx->st) != PARDO_OK)
        return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_mse(p->dtype == PARDO_F64, p->mem->gpu_ptr, t->mem->gpu_ptr, p->numel, red,
                                   y->mem->gpu_ptr, partials, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("mse_loss", err, sizeof err);
    pardo_device_cache_free(partials);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* mse_loss_grad's CUDA kernel: dprediction = 2 (prediction - target) dloss (/ N for mean), dtarget its negation. */
int pardo_cuda_mse_loss_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *p = ctx->in[0], *t = ctx->in[1], *dl = pardo_nn_in(ctx, 3);
    /* prediction, target, dloss; loss is not read */
    if (!pardo_cuda_floats_in(ctx, 0xb)) return pardo_cuda_run_on_cpu_inputs(ctx, 0xb);
    int red;
    if (!reduction_get(ctx, &red) || !same_shape(p, t) ||
        (dl && (red == PARDO_CU_RED_NONE ? !same_shape(dl, p) : dl->ndim != 0)))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    pardo_tensor *out[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        if (!(out[k] = pardo_kernel_output(ctx, k, p->dtype, p->ndim, p->shape))) return ctx->st->code;
        if (!dl && pardo_device_memset_zero(out[k]->mem->gpu_ptr, out[k]->nbytes, ctx->st) != PARDO_OK)
            return ctx->st->code;
    }
    if (!dl || (!out[0] && !out[1])) return PARDO_OK;
    char err[256];
    int rc = pardo_cuda_launch_mse_grad(p->dtype == PARDO_F64, p->mem->gpu_ptr, t->mem->gpu_ptr, dl->mem->gpu_ptr,
                                        p->numel, red, out[0] ? out[0]->mem->gpu_ptr : NULL,
                                        out[1] ? out[1]->mem->gpu_ptr : NULL, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("mse_loss_grad", err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* dropout's attrs ratio and seed; false where the CPU kernel refuses them (ratio outside [0, 1)). */
static bool dropout_attrs_get(pardo_kernel_ctx *ctx, double *ratio, uint64_t *seed) {
    int64_t s;
    if (pardo_attr_float(ctx->op, "ratio", 0.5, ratio, ctx->st) != PARDO_OK ||
        pardo_attr_int(ctx->op, "seed", 0, &s, ctx->st) != PARDO_OK || !(*ratio >= 0 && *ratio < 1))
        return false;
    *seed = (uint64_t)s;
    return true;
}

/* The run-time ratio and training_mode inputs (ONNX Dropout-12's) over *ratio and *training where given, read on
 * the host; false where the CPU kernel refuses them. */
static bool dropout_inputs(pardo_kernel_ctx *ctx, double *ratio, bool *training) {
    pardo_tensor *r = pardo_nn_in(ctx, 1), *t = pardo_nn_in(ctx, 2);
    if (r) {
        if (r->is_array || r->numel != 1 || !pardo_dtype_is_float(r->dtype) || !pardo_tensor_cpu(r, ctx->st))
            return false;
        *ratio = pardo_tensor_get_f64(r, 0);
        if (!(*ratio >= 0 && *ratio < 1)) return false;
    }
    if (t) {
        const void *v;
        if (t->is_array || t->numel != 1 || t->dtype != PARDO_BOOL || t->ndim > 1 ||
            !(v = pardo_tensor_cpu(t, ctx->st)))
            return false;
        *training = *(const bool *)v;
    }
    return true;
}

/* dropout's CUDA kernel: drops elements with probability ratio and scales the rest when training; else Y = X. */
int pardo_cuda_dropout(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    double ratio;
    uint64_t seed;
    bool training = ctx->training;
    if (!dropout_attrs_get(ctx, &ratio, &seed) || !dropout_inputs(ctx, &ratio, &training))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape), *mask = NULL;
    if (!y) return ctx->st->code;
    if (pardo_kernel_wants_output(ctx, 1) && !(mask = pardo_kernel_output(ctx, 1, PARDO_BOOL, x->ndim, x->shape)))
        return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_dropout(x->dtype == PARDO_F64, x->mem->gpu_ptr, NULL, pardo_dropout_key(seed, ctx->step),
                                       ratio, 1.0 / (1.0 - ratio), training, y->mem->gpu_ptr,
                                       mask ? mask->mem->gpu_ptr : NULL, x->numel, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("dropout", err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* dropout_grad's CUDA kernel: dX = dY * mask / (1 - ratio) when training, dY otherwise. */
int pardo_cuda_dropout_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *mask = pardo_nn_in(ctx, 2), *dy = pardo_nn_in(ctx, 3);
    /* X and dY; Y and dMask are not read, Mask is bool */
    if (!pardo_cuda_floats_in(ctx, 0x9)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x9);
    double ratio;
    uint64_t seed;
    if (!dropout_attrs_get(ctx, &ratio, &seed) || (dy && !same_shape(dy, x)) ||
        (mask && (mask->is_array || mask->dtype != PARDO_BOOL || !same_shape(mask, x))))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) return pardo_device_memset_zero(dx->mem->gpu_ptr, dx->nbytes, ctx->st);
    char err[256];
    int rc = pardo_cuda_launch_dropout(x->dtype == PARDO_F64, dy->mem->gpu_ptr, mask ? mask->mem->gpu_ptr : NULL,
                                       pardo_dropout_key(seed, ctx->step), ratio, 1.0 / (1.0 - ratio), ctx->training,
                                       dx->mem->gpu_ptr, NULL, x->numel, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("dropout_grad", err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}
