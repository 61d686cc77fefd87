/* reduce_cuda.c - reduce_sum, reduce_mean, reduce_max, reduce_min, their gradients and argmax on the GPU
 * (pardo_kernel_fn), built only with CUDA=1; ops/reduce.c names them through ops/cuda/kernels.h. The semantics
 * are ops/reduce.c's: the axes from attr axes or the optional int axes input (read on the host: a few ints),
 * negative from the end, absent or empty meaning all of them unless noop_with_empty_axes; keepdims; the gradient
 * ops' X, axes, Y, dY (or a 3-input X, Y, dY) with dY optional (zeros) and no gradient for the axes; argmax's
 * axis, keepdims and select_last_index. X is planned as ops/reduce.c plans it (unit dims dropped, neighbouring
 * kept or reduced dims merged) for the kernels of ops/cuda/reduce.cu. What the GPU half does not take (integer
 * and half dtypes, a tensor_array, axes or shapes the CPU kernel refuses) runs the CPU kernel
 * (pardo_cuda_run_on_cpu), which also gives the errors. */
#include <string.h>

#include "core/device.h"
#include "cuda_util.h"
#include "index_util.h"
#include "kernel_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_nn.h"

_Static_assert(PARDO_CU_RED_DIMS >= PARDO_MAX_DIMS, "the reduce kernels' plans take every rank");

static const char k_refused[] = "its CUDA kernel takes the axes and shapes the CPU kernel takes, not these";

/* The reduced dims of x (reduced[d]) and keepdims, from axes_t (the int axes input, NULL: attr axes) and the
 * attrs, as ops/reduce.c's reduce_axes; false where that refuses them. */
static bool axes_get(pardo_kernel_ctx *ctx, pardo_tensor *axes_t, const pardo_tensor *x, bool *reduced,
                     bool *keepdims) {
    int64_t axes[PARDO_MAX_DIMS];
    int n;
    bool noop;
    if (pardo_attr_bool(ctx->op, "keepdims", true, keepdims, ctx->st) != PARDO_OK ||
        pardo_attr_bool(ctx->op, "noop_with_empty_axes", false, &noop, ctx->st) != PARDO_OK)
        return false;
    if (axes_t) {
        if (axes_t->is_array || !pardo_tensor_cpu(axes_t, ctx->st) ||
            pardo_index_read_ints(axes_t, "input 1 'axes'", axes, PARDO_MAX_DIMS, &n, ctx->st) != PARDO_OK)
            return false;
    } else if (pardo_attr_ints(ctx->op, "axes", axes, PARDO_MAX_DIMS, &n, ctx->st) != PARDO_OK) {
        return false;
    }
    const bool all = n <= 0 && !noop;
    for (int d = 0; d < x->ndim; d++) reduced[d] = all;
    for (int i = 0; i < n; i++) {
        int a;
        if (pardo_normalize_axis(axes[i], x->ndim, "axes", &a, ctx->st) != PARDO_OK || reduced[a]) return false;
        reduced[a] = true;
    }
    return true;
}

/* Y's shape: the reduced dims 1 (keepdims) or gone. */
static void out_shape(const pardo_tensor *x, const bool *reduced, bool keepdims, int *nd, int64_t *shape) {
    *nd = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!reduced[d])
            shape[(*nd)++] = x->shape[d];
        else if (keepdims)
            shape[(*nd)++] = 1;
}

/* ops/reduce.c's red_plan_make: unit dims dropped, neighbours of one kind merged, strides of the merged dims. */
static void plan_make(const pardo_tensor *x, const bool *reduced, pardo_cuda_red_plan *p) {
    int64_t cd[PARDO_MAX_DIMS], cs[PARDO_MAX_DIMS];
    bool cr[PARDO_MAX_DIMS];
    int nc = 0;
    p->out_numel = p->count = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (reduced[d])
            p->count *= x->shape[d];
        else
            p->out_numel *= x->shape[d];
        if (x->shape[d] == 1) continue;
        if (nc > 0 && cr[nc - 1] == reduced[d]) {
            cd[nc - 1] *= x->shape[d];
        } else {
            cd[nc] = x->shape[d];
            cr[nc++] = reduced[d];
        }
    }
    if (nc == 0) { /* a single element: one kept dim of 1 */
        cd[0] = 1;
        cr[0] = false;
        nc = 1;
    }
    pardo_contiguous_strides(nc, cd, cs);
    p->nk = p->nr = 0;
    for (int i = 0; i < nc; i++) {
        if (cr[i]) {
            p->rdims[p->nr] = cd[i];
            p->rstr[p->nr++] = cs[i];
        } else {
            p->kdims[p->nk] = cd[i];
            p->kstr[p->nk++] = cs[i];
        }
    }
    if (p->nk == 0) { /* everything reduced: one kept dim of 1 */
        p->kdims[0] = 1;
        p->kstr[0] = 0;
        p->nk = 1;
    }
}

static int reduce_run(pardo_kernel_ctx *ctx, int kind) {
    pardo_tensor *x = ctx->in[0], *axes_t = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    bool reduced[PARDO_MAX_DIMS], keepdims;
    if (!axes_get(ctx, axes_t, x, reduced, &keepdims)) return pardo_cuda_run_on_cpu(ctx, k_refused);
    int nd;
    int64_t shape[PARDO_MAX_DIMS];
    out_shape(x, reduced, keepdims, &nd, shape);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, nd, shape);
    if (!y) return ctx->st->code;
    pardo_cuda_red_plan p;
    plan_make(x, reduced, &p);
    char err[256];
    int rc =
        pardo_cuda_launch_reduce(kind, x->dtype == PARDO_F64, x->mem->gpu_ptr, y->mem->gpu_ptr, &p, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

/* reduce_sum's CUDA kernel: Y = the sum of X over the axes (in double). */
int pardo_cuda_reduce_sum(pardo_kernel_ctx *ctx) { return reduce_run(ctx, PARDO_CU_REDUCE_SUM); }

/* reduce_mean's CUDA kernel: Y = the mean of X over the axes. */
int pardo_cuda_reduce_mean(pardo_kernel_ctx *ctx) { return reduce_run(ctx, PARDO_CU_REDUCE_MEAN); }

/* reduce_max's CUDA kernel: Y = the max of X over the axes, NaN winning. */
int pardo_cuda_reduce_max(pardo_kernel_ctx *ctx) { return reduce_run(ctx, PARDO_CU_REDUCE_MAX); }

/* reduce_min's CUDA kernel: Y = the min of X over the axes, NaN winning. */
int pardo_cuda_reduce_min(pardo_kernel_ctx *ctx) { return reduce_run(ctx, PARDO_CU_REDUCE_MIN); }

static int reduce_grad_run(pardo_kernel_ctx *ctx, int kind) {
    /* X, axes, Y, dY; a graph written before the axes input has X, Y, dY */
    const bool old_form = ctx->n_in == 3;
    pardo_tensor *x = ctx->in[0], *axes_t = old_form ? NULL : ctx->n_in > 1 ? ctx->in[1] : NULL;
    const int dy_at = old_form ? 2 : 3;
    pardo_tensor *dy = ctx->n_in > dy_at ? ctx->in[dy_at] : NULL;
    bool reduced[PARDO_MAX_DIMS], keepdims;
    if ((ctx->n_out > 1 && pardo_kernel_wants_output(ctx, 1)) || !axes_get(ctx, axes_t, x, reduced, &keepdims))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    const unsigned read = 1u << 0 | 1u << dy_at; /* X and dY; Y is not read by these four */
    if (!pardo_cuda_floats_in(ctx, read)) return pardo_cuda_run_on_cpu_inputs(ctx, read);
    pardo_cuda_red_plan p;
    plan_make(x, reduced, &p);
    /* ops/reduce.c's reduce_min_grad asks for Y (not read) like the forward's output */
    pardo_tensor *y = ctx->n_in > (old_form ? 1 : 2) ? ctx->in[old_form ? 1 : 2] : NULL;
    if ((dy && dy->numel != p.out_numel) ||
        (kind == PARDO_CU_REDUCE_MIN && dy && x->numel > 0 && (!y || y->dtype != x->dtype || y->numel != dy->numel)))
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy || x->numel == 0) return pardo_device_memset_zero(dx->mem->gpu_ptr, dx->nbytes, ctx->st);
    char err[256];
    int rc = pardo_cuda_launch_reduce_grad(kind, x->dtype == PARDO_F64, x->mem->gpu_ptr, dy->mem->gpu_ptr,
                                           dx->mem->gpu_ptr, &p, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

/* reduce_sum_grad's CUDA kernel: dX = dY broadcast back over the reduced axes. */
int pardo_cuda_reduce_sum_grad(pardo_kernel_ctx *ctx) { return reduce_grad_run(ctx, PARDO_CU_REDUCE_SUM); }

/* reduce_mean_grad's CUDA kernel: dX = dY / count broadcast back over the reduced axes. */
int pardo_cuda_reduce_mean_grad(pardo_kernel_ctx *ctx) { return reduce_grad_run(ctx, PARDO_CU_REDUCE_MEAN); }

/* reduce_max_grad's CUDA kernel: dX = dY at the first max of each reduced set, 0 elsewhere. */
int pardo_cuda_reduce_max_grad(pardo_kernel_ctx *ctx) { return reduce_grad_run(ctx, PARDO_CU_REDUCE_MAX); }

/* reduce_min_grad's CUDA kernel: dX = dY at the first min of each reduced set, 0 elsewhere. */
int pardo_cuda_reduce_min_grad(pardo_kernel_ctx *ctx) { return reduce_grad_run(ctx, PARDO_CU_REDUCE_MIN); }

/* argmax (min 0) or argmin (min 1) along the axis attr. */
static int arg_extreme(pardo_kernel_ctx *ctx, int min) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    int64_t a;
    int axis;
    bool keepdims, last;
    if (x->ndim < 1 || pardo_attr_int(ctx->op, "axis", 0, &a, ctx->st) != PARDO_OK ||
        pardo_attr_bool(ctx->op, "keepdims", true, &keepdims, ctx->st) != PARDO_OK ||
        pardo_attr_bool(ctx->op, "select_last_index", false, &last, ctx->st) != PARDO_OK ||
        pardo_normalize_axis(a, x->ndim, "axis", &axis, ctx->st) != PARDO_OK)
        return pardo_cuda_run_on_cpu(ctx, k_refused);
    int64_t outer = 1, inner = 1, n = x->shape[axis];
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    if (n == 0 && outer * inner > 0) return pardo_cuda_run_on_cpu(ctx, k_refused); /* no max: its error */
    bool reduced[PARDO_MAX_DIMS] = {false};
    reduced[axis] = true;
    int nd;
    int64_t shape[PARDO_MAX_DIMS];
    out_shape(x, reduced, keepdims, &nd, shape);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_I64, nd, shape);
    if (!y) return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_argmax(min, last, x->dtype == PARDO_F64, x->mem->gpu_ptr, y->mem->gpu_ptr, outer, n,
                                      inner, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

/* argmax's CUDA kernel: Y = the int64 index of the first (select_last_index: last) max of X along axis. */
int pardo_cuda_argmax(pardo_kernel_ctx *ctx) { return arg_extreme(ctx, 0); }

/* argmin's CUDA kernel: Y = the int64 index of the first (select_last_index: last) min of X along axis. */
int pardo_cuda_argmin(pardo_kernel_ctx *ctx) { return arg_extreme(ctx, 1); }
