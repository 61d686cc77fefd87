/* norm_cuda.c - layer_norm and layer_norm_grad on the GPU (pardo_kernel_fn), built only with CUDA=1; ops/norm.c
 * names them through ops/cuda/kernels.h. The semantics are ops/norm.c's: X seen as [rows, n] from attr axis
 * (negative from the end), epsilon finite and >= 0, the optional scale and bias of exactly X.shape[axis:], the
 * optional Mean and InvStdDev outputs of shape X.shape[:axis] + [1, ...] in X's dtype; the gradient recomputes the
 * statistics from X (Y, Mean and InvStdDev are not read), takes the optional dY, dMean and dInvStdDev (zeros when
 * left out) and gives any of dX, dscale, dbias (dscale and dbias from the row statistics, kept in device scratch
 * from the device cache). What the GPU half does not take (half and integer dtypes, a tensor_array, shapes or
 * attrs the CPU kernel refuses) runs the CPU kernel (pardo_cuda_run_on_cpu), which also gives the errors. */
#include <math.h>
#include <string.h>

#include "core/device.h"
#include "core/device_cache.h"
#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_nn.h"

static const char k_refused[] = "its CUDA kernel takes the shapes and attrs the CPU kernel takes, not these";

/* Input k of ctx, NULL when absent or past the inputs given. */
static pardo_tensor *in_at(const pardo_kernel_ctx *ctx, int k) { return k < ctx->n_in ? ctx->in[k] : NULL; }

/* One layer_norm's sizes. */
typedef struct ln_view {
    int axis;
    int64_t rows, n;
    double eps;
} ln_view;

/* X's view from the attrs, with scale and bias (NULL: absent) of X.shape[axis:]; false where the CPU kernel
 * refuses them. */
static bool view_make(pardo_kernel_ctx *ctx, const pardo_tensor *x, const pardo_tensor *scale, const pardo_tensor *bias,
                      ln_view *v) {
    int64_t axis;
    if (x->ndim < 1 || pardo_attr_int(ctx->op, "axis", -1, &axis, ctx->st) != PARDO_OK ||
        pardo_attr_float(ctx->op, "epsilon", 1e-5, &v->eps, ctx->st) != PARDO_OK || !(v->eps >= 0) || isinf(v->eps) ||
        pardo_normalize_axis(axis, x->ndim, "axis", &v->axis, ctx->st) != PARDO_OK)
        return false;
    const int nd = x->ndim - v->axis;
    const pardo_tensor *params[2] = {scale, bias};
    for (int k = 0; k < 2; k++)
        if (params[k] && !pardo_shape_equal(params[k]->ndim, params[k]->shape, nd, x->shape + v->axis)) return false;
    v->rows = pardo_shape_numel(v->axis, x->shape);
    v->n = pardo_shape_numel(nd, x->shape + v->axis);
    return true;
}

/* The shape of Mean and InvStdDev: X.shape[:axis] + [1] * (rank - axis). */
static void stats_shape(const pardo_tensor *x, int axis, int64_t *shape) {
    for (int d = 0; d < x->ndim; d++) shape[d] = d < axis ? x->shape[d] : 1;
}

static const void *dev_or_null(const pardo_tensor *t) { return t ? t->mem->gpu_ptr : NULL; }

/* layer_norm's CUDA kernel: Y = (X - mean) * InvStdDev * scale + bias per row, and the optional Mean and
 * InvStdDev. */
int pardo_cuda_layer_norm(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *scale = in_at(ctx, 1), *bias = in_at(ctx, 2);
    if (!pardo_cuda_floats_in(ctx, 0x7)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x7);
    ln_view v;
    if (!view_make(ctx, x, scale, bias, &v)) return pardo_cuda_run_on_cpu(ctx, k_refused);
    int64_t sshape[PARDO_MAX_DIMS];
    stats_shape(x, v.axis, sshape);
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3 && k < ctx->n_out; k++) {
        if (k > 0 && !pardo_kernel_wants_output(ctx, k)) continue;
        if (!(out[k] = pardo_kernel_output(ctx, k, x->dtype, x->ndim, k == 0 ? x->shape : sshape)))
            return ctx->st->code;
    }
    char err[256];
    int rc = pardo_cuda_launch_layer_norm(x->dtype == PARDO_F64, x->mem->gpu_ptr, dev_or_null(scale), dev_or_null(bias),
                                          out[0]->mem->gpu_ptr, out[1] ? out[1]->mem->gpu_ptr : NULL,
                                          out[2] ? out[2]->mem->gpu_ptr : NULL, v.rows, v.n, v.eps, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("layer_norm", err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

/* layer_norm_grad's CUDA kernel: dX through the row mean and variance, dscale and dbias summed over the rows. */
int pardo_cuda_layer_norm_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *scale = in_at(ctx, 1), *bias = in_at(ctx, 2), *dy = in_at(ctx, 6),
                 *dmean = in_at(ctx, 7), *dinv = in_at(ctx, 8);
    /* X, scale, bias (checked, not read), dY, dMean, dInvStdDev; Y, Mean and InvStdDev are not read */
    const unsigned read = 1u << 0 | 1u << 1 | 1u << 2 | 1u << 6 | 1u << 7 | 1u << 8;
    if (!pardo_cuda_floats_in(ctx, read)) return pardo_cuda_run_on_cpu_inputs(ctx, read);
    ln_view v;
    bool fits =
        view_make(ctx, x, scale, bias, &v) && (!dy || pardo_shape_equal(dy->ndim, dy->shape, x->ndim, x->shape));
    int64_t sshape[PARDO_MAX_DIMS];
    if (fits) stats_shape(x, v.axis, sshape);
    for (int k = 0; fits && k < 2; k++) {
        const pardo_tensor *t = k ? dinv : dmean;
        fits = !t || pardo_shape_equal(t->ndim, t->shape, x->ndim, sshape);
    }
    if (!fits) return pardo_cuda_run_on_cpu(ctx, k_refused);
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        const int nd = k == 0 ? x->ndim : x->ndim - v.axis;
        if (!(out[k] = pardo_kernel_output(ctx, k, x->dtype, nd, x->shape + (k == 0 ? 0 : v.axis))))
            return ctx->st->code;
        /* dscale and dbias are zeros where no dY or no rows reach them; dX is written whole */
        if (k > 0 && pardo_device_memset_zero(out[k]->mem->gpu_ptr, out[k]->nbytes, ctx->st) != PARDO_OK)
            return ctx->st->code;
    }
    const bool cols = dy && (out[1] || out[2]) && v.rows > 0 && v.n > 0;
    if (!out[0] && !cols) return PARDO_OK;
    void *stats = NULL;
    if (cols && pardo_device_cache_alloc(&stats, sizeof(double) * 2 * (size_t)v.rows, NULL, ctx->st) != PARDO_OK)
        return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_layer_norm_grad(
        x->dtype == PARDO_F64, x->mem->gpu_ptr, dev_or_null(scale), dev_or_null(dy), dev_or_null(dmean),
        dev_or_null(dinv), out[0] ? out[0]->mem->gpu_ptr : NULL, stats, out[1] ? out[1]->mem->gpu_ptr : NULL,
        out[2] ? out[2]->mem->gpu_ptr : NULL, v.rows, v.n, v.eps, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("layer_norm_grad", err, sizeof err);
    pardo_device_cache_free(stats);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}
