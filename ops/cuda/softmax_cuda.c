/* softmax_cuda.c - softmax, log_softmax, softmax_grad, log_softmax_grad, softmax_cross_entropy and
 * softmax_cross_entropy_grad on the GPU (pardo_kernel_fn), built only with CUDA=1; ops/softmax.c names them
 * through ops/cuda/kernels.h. The semantics are ops/softmax.c's: the axis attr (negative from the end) and
 * softmax's finite scale, X seen as [outer, n, inner] around the axis; the gradients' optional dY (zeros when
 * left out); the cross entropy's logits [N, C] against int32 or int64 labels [N] with reduction mean (0 for
 * N = 0), sum or none, a label outside [0, C) failing the op with the CPU kernel's PARDO_ERUNTIME message (the
 * kernels flag the first such row in a word of device scratch, from the device cache, that this glue reads
 * back), and the labels' gradient refused.
 * What the GPU half does not take (half and integer dtypes, a tensor_array, labels of another dtype, shapes or
 * attrs the CPU kernel refuses) runs the CPU kernel (pardo_cuda_run_on_cpu), which also gives the errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/device.h"
#include "core/device_cache.h"
#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_nn.h"

static const char k_refused[] = "its CUDA kernel takes the shapes and attrs the CPU kernel takes, not these";

/* The CUDA error err (code rc) as the op's status. */
static int cuda_error(pardo_kernel_ctx *ctx, int rc, const char *err) { return pardo_errorf(ctx->st, rc, "%s", err); }

/* X as [outer, n, inner] around the op's axis attr; false where the CPU kernel refuses X or the axis. */
static bool axis_view(pardo_kernel_ctx *ctx, const pardo_tensor *x, int64_t *outer, int64_t *n, int64_t *inner) {
    int64_t a;
    int axis;
    if (x->ndim < 1 || pardo_attr_int(ctx->op, "axis", -1, &a, ctx->st) != PARDO_OK ||
        pardo_normalize_axis(a, x->ndim, "axis", &axis, ctx->st) != PARDO_OK)
        return false;
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) *inner *= x->shape[d];
    *n = x->shape[axis];
    return true;
}

/* softmax's scale attr; false where the CPU kernel refuses it (not a finite number). */
static bool scale_get(pardo_kernel_ctx *ctx, double *scale) {
    return pardo_attr_float(ctx->op, "scale", 1.0, scale, ctx->st) == PARDO_OK && isfinite(*scale);
}

static int softmax_run(pardo_kernel_ctx *ctx, bool log_form) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    int64_t outer, n, inner;
    double scale = 1.0;
    if (!axis_view(ctx, x, &outer, &n, &inner) || (!log_form && !scale_get(ctx, &scale)))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    if (x->numel == 0) return PARDO_OK;
    char err[256];
    int rc = pardo_cuda_launch_softmax(log_form, x->dtype == PARDO_F64, x->mem->gpu_ptr, y->mem->gpu_ptr, outer, n,
                                       inner, scale, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* softmax's CUDA kernel: Y = softmax(scale X) along axis. */
int pardo_cuda_softmax(pardo_kernel_ctx *ctx) { return softmax_run(ctx, false); }

/* log_softmax's CUDA kernel: Y = X - log(sum(exp(X))) along axis. */
int pardo_cuda_log_softmax(pardo_kernel_ctx *ctx) { return softmax_run(ctx, true); }

static int softmax_grad_run(pardo_kernel_ctx *ctx, bool log_form) {
    pardo_tensor *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_cuda_floats_in(ctx, 0x7)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x7);
    int64_t outer, n, inner;
    double scale = 1.0;
    if (!axis_view(ctx, x, &outer, &n, &inner) || (!log_form && !scale_get(ctx, &scale)) ||
        !pardo_shape_equal(y->ndim, y->shape, x->ndim, x->shape) ||
        (dy && !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, x->shape)))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) return pardo_device_memset_zero(dx->mem->gpu_ptr, dx->nbytes, ctx->st);
    if (x->numel == 0) return PARDO_OK;
    char err[256];
    int rc = pardo_cuda_launch_softmax_grad(log_form, x->dtype == PARDO_F64, y->mem->gpu_ptr, dy->mem->gpu_ptr,
                                            dx->mem->gpu_ptr, outer, n, inner, scale, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* softmax_grad's CUDA kernel: dX = scale * Y * (dY - sum(dY * Y)) along axis. */
int pardo_cuda_softmax_grad(pardo_kernel_ctx *ctx) { return softmax_grad_run(ctx, false); }

/* log_softmax_grad's CUDA kernel: dX = dY - exp(Y) * sum(dY) along axis. */
int pardo_cuda_log_softmax_grad(pardo_kernel_ctx *ctx) { return softmax_grad_run(ctx, true); }

/* ---- softmax_cross_entropy and its gradient ---- */

/* The reduction attr as launch_nn.h's enum; false for a word the CPU kernel refuses. */
static bool reduction_get(pardo_kernel_ctx *ctx, int *red) {
    const char *s;
    if (pardo_attr_string(ctx->op, "reduction", "mean", &s, ctx->st) != PARDO_OK) return false;
    *red = strcmp(s, "mean") == 0   ? PARDO_CU_RED_MEAN
           : strcmp(s, "sum") == 0  ? PARDO_CU_RED_SUM
           : strcmp(s, "none") == 0 ? PARDO_CU_RED_NONE
                                    : -1;
    return *red >= 0;
}

/* Whether logits x [N, C] and labels l [N] (int32 or int64, a plain tensor) are what the kernels take. */
static bool sce_fits(const pardo_tensor *x, const pardo_tensor *l) {
    return !l->is_array && (l->dtype == PARDO_I32 || l->dtype == PARDO_I64) && x->ndim == 2 && l->ndim == 1 &&
           x->shape[0] == l->shape[0];
}

/* After the kernels of an op that flagged bad labels in the device word *bad_dev: PARDO_OK, or the CPU kernel's
 * PARDO_ERUNTIME naming the first row whose label is outside [0, c), or the copy's error. */
static int labels_check(pardo_kernel_ctx *ctx, const uint64_t *bad_dev, const pardo_tensor *l, int64_t n, int64_t c) {
    uint64_t bad = 0;
    if (pardo_device_copy_d2h(&bad, bad_dev, sizeof bad, ctx->st) != PARDO_OK) return ctx->st->code;
    if (bad == 0) return PARDO_OK;
    const int64_t r = n - (int64_t)bad;
    int64_t lab = 0;
    int32_t lab32 = 0;
    const size_t es = l->dtype == PARDO_I64 ? sizeof lab : sizeof lab32;
    if (pardo_device_copy_d2h(l->dtype == PARDO_I64 ? (void *)&lab : (void *)&lab32,
                              (const char *)l->mem->gpu_ptr + (size_t)r * es, es, ctx->st) != PARDO_OK)
        return ctx->st->code;
    if (l->dtype != PARDO_I64) lab = lab32;
    return pardo_errorf(ctx->st, PARDO_ERUNTIME, "row %lld has label %lld, expected a class in [0, %lld)", (long long)r,
                        (long long)lab, (long long)c);
}

/* softmax_cross_entropy's CUDA kernel: each row's -log(softmax(logits)[label]), reduced. */
int pardo_cuda_softmax_cross_entropy(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *l = ctx->in[1];
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    int red;
    if (!reduction_get(ctx, &red) || !sce_fits(x, l)) return pardo_cuda_run_on_cpu(ctx, k_refused);
    const int64_t n = x->shape[0], c = x->shape[1];
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, red == PARDO_CU_RED_NONE ? 1 : 0, &n);
    if (!y) return ctx->st->code;
    /* device scratch: the bad-label word, then (mean, sum) the rows' losses */
    void *scratch = NULL;
    const size_t nbytes = sizeof(uint64_t) + (red == PARDO_CU_RED_NONE ? 0 : (size_t)n * sizeof(double));
    if (pardo_device_cache_alloc(&scratch, nbytes, NULL, ctx->st) != PARDO_OK) return ctx->st->code;
    uint64_t *bad = scratch;
    char err[256];
    int rc = pardo_cuda_launch_sce(x->dtype == PARDO_F64, x->mem->gpu_ptr, l->mem->gpu_ptr, l->dtype == PARDO_I64, n, c,
                                   red, y->mem->gpu_ptr, (double *)(bad + 1), bad, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("softmax_cross_entropy", err, sizeof err);
    rc = rc ? cuda_error(ctx, rc, err) : labels_check(ctx, bad, l, n, c);
    pardo_device_cache_free(scratch);
    return rc;
}

/* softmax_cross_entropy_grad's CUDA kernel: dlogits = g * (softmax(logits) - onehot(labels)). */
int pardo_cuda_softmax_cross_entropy_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *l = ctx->in[1], *dl = ctx->n_in > 3 ? ctx->in[3] : NULL;
    int red;
    /* a bad reduction, or the labels' gradient asked for: the CPU kernel's errors */
    if (!reduction_get(ctx, &red) || pardo_kernel_wants_output(ctx, 1)) return pardo_cuda_run_on_cpu(ctx, k_refused);
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_cuda_floats_in(ctx, 0x9)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x9);
    if (!sce_fits(x, l) || (dl && dl->numel != (red == PARDO_CU_RED_NONE ? x->shape[0] : 1)))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    const int64_t n = x->shape[0], c = x->shape[1];
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, 2, x->shape);
    if (!dx) return ctx->st->code;
    if (!dl) return pardo_device_memset_zero(dx->mem->gpu_ptr, dx->nbytes, ctx->st);
    void *scratch = NULL;
    if (pardo_device_cache_alloc(&scratch, sizeof(uint64_t), NULL, ctx->st) != PARDO_OK) return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_sce_grad(x->dtype == PARDO_F64, x->mem->gpu_ptr, l->mem->gpu_ptr, l->dtype == PARDO_I64,
                                        dl->mem->gpu_ptr, n, c, red, dx->mem->gpu_ptr, scratch, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("softmax_cross_entropy_grad", err, sizeof err);
    rc = rc ? cuda_error(ctx, rc, err) : labels_check(ctx, scratch, l, n, c);
    pardo_device_cache_free(scratch);
    return rc;
}
