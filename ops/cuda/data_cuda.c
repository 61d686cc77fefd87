/* data_cuda.c - the data movement ops on the GPU (pardo_kernel_fn), built only with CUDA=1; ops/shape.c,
 * ops/concat.c, ops/cast.c and ops/fill.c name them through ops/cuda/kernels.h:
 * - identity, reshape (the shape from its attr), flatten and their gradients (identity_grad, reshape_grad,
 *   flatten_grad: dY in X's shape): a device-to-device copy of the bytes, any dtype;
 * - transpose (any perm) and transpose_grad (the inverse perm): a strided gather by element size, any dtype;
 * - concat (any axis) and concat_grad: each input a 2-D block copy into (out of) the joined tensor, any dtype;
 * - cast and cast_grad between float32, float64, int32 and int64 (ops/cast.c's conversions);
 * - fill with the constant fill, float32, float64, int32 and int64.
 * The op's own infer function checks the run-time types and gives the output shapes (the CPU kernel's checks);
 * what the GPU half does not take (reshape's run-time shape input, other casts and fills, a tensor_array, inputs
 * the CPU kernel refuses) runs the CPU kernel (pardo_cuda_run_on_cpu), which also gives the errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_util.h"
#include "kernel_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_train.h"
#include "train_util.h"

enum { MAX_IO = 64 }; /* inputs the kernels take, like the executor */

_Static_assert(PARDO_CU_MAX_PERM_DIMS >= PARDO_MAX_DIMS, "the gather takes every rank");

#define FITS_NOT "its CUDA kernel takes the shapes and attrs the CPU kernel takes, not these"

static int cuda_error(pardo_kernel_ctx *ctx, int rc, const char *err) { return pardo_errorf(ctx->st, rc, "%s", err); }

/* The end of an op's launches: synchronised, its status. */
static int finish(pardo_kernel_ctx *ctx) {
    char err[256];
    int rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : PARDO_OK;
}

/* True when no input is a tensor_array (inputs the GPU halves here take, any dtype). */
static bool plain_in(const pardo_kernel_ctx *ctx) {
    for (int k = 0; k < ctx->n_in; k++)
        if (ctx->in[k] && ctx->in[k]->is_array) return false;
    return true;
}

/* Output 0 of type y holding src's bytes (as many as its): a device copy (none where it is src's tensor). */
static int copy_bytes(pardo_kernel_ctx *ctx, pardo_tensor *src, const pardo_type *y) {
    pardo_tensor *out = pardo_kernel_output(ctx, 0, y->dtype, y->ndim, y->shape);
    if (!out) return ctx->st->code;
    if (out != src && src->nbytes &&
        pardo_cuda_copy(ctx, out->mem->gpu_ptr, src->mem->gpu_ptr, src->nbytes) != PARDO_OK)
        return ctx->st->code;
    return finish(ctx);
}

/* True when every dim of t is known (no -1; the rank too). */
static bool shape_known(const pardo_type *t) {
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0) return false;
    return t->ndim >= 0;
}

/* identity, reshape and flatten: Y = X's bytes in the inferred shape. */
static int shaped_copy(pardo_kernel_ctx *ctx) {
    pardo_type y;
    if (!plain_in(ctx)) return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes no tensor_array");
    int rc = pardo_cuda_infer_run(ctx, &y, 1);
    if (rc != PARDO_OK) return rc;
    if (!shape_known(&y) || pardo_shape_numel(y.ndim, y.shape) != ctx->in[0]->numel)
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes a shape known before the run (attr shape)");
    return copy_bytes(ctx, ctx->in[0], &y);
}

int pardo_cuda_identity(pardo_kernel_ctx *ctx) { return shaped_copy(ctx); }
int pardo_cuda_reshape(pardo_kernel_ctx *ctx) { return shaped_copy(ctx); }
int pardo_cuda_flatten(pardo_kernel_ctx *ctx) { return shaped_copy(ctx); }

/* identity_grad, reshape_grad, flatten_grad: dX = dY's elements in X's shape (zeros without dY). */
static int back_copy(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_cuda_floats_in(ctx, 0x5)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x5);
    if (dy && dy->numel != x->numel) return pardo_cuda_run_on_cpu(ctx, FITS_NOT);
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc != PARDO_OK) return rc;
    const pardo_type tx = pardo_tensor_type(x);
    if (dy) return copy_bytes(ctx, dy, &tx);
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (pardo_cuda_zero(ctx, dx) != PARDO_OK) return ctx->st->code;
    return finish(ctx);
}

int pardo_cuda_identity_grad(pardo_kernel_ctx *ctx) { return back_copy(ctx); }
int pardo_cuda_reshape_grad(pardo_kernel_ctx *ctx) { return back_copy(ctx); }
int pardo_cuda_flatten_grad(pardo_kernel_ctx *ctx) { return back_copy(ctx); }

/* ---- transpose ---- */

/* attr perm for rank nd (the dims reversed where absent), already checked by the infer function. */
static int perm_get(pardo_kernel_ctx *ctx, int nd, int *perm) {
    int64_t p[PARDO_MAX_DIMS];
    int n;
    int rc = pardo_attr_ints(ctx->op, "perm", p, PARDO_MAX_DIMS, &n, ctx->st);
    if (rc != PARDO_OK) return rc;
    for (int i = 0; i < nd; i++) perm[i] = n < 0 ? nd - 1 - i : (int)p[i];
    return PARDO_OK;
}

/* dst (shape dims, nd dims) = src, whose dim perm[i] is dst's dim i (src of shape src_shape, contiguous). */
static int permute(pardo_kernel_ctx *ctx, const pardo_tensor *src, const int *perm, pardo_tensor *dst) {
    int64_t sstr[PARDO_MAX_DIMS], str[PARDO_MAX_DIMS], one = 1;
    const int nd = src->ndim;
    pardo_contiguous_strides(nd, src->shape, sstr);
    for (int i = 0; i < nd; i++) str[i] = sstr[perm[i]];
    char err[256];
    int rc = nd == 0 ? pardo_cuda_launch_gather(pardo_dtype_size(src->dtype), src->mem->gpu_ptr, dst->mem->gpu_ptr, 1,
                                                &one, &one, dst->numel, err, sizeof err)
                     : pardo_cuda_launch_gather(pardo_dtype_size(src->dtype), src->mem->gpu_ptr, dst->mem->gpu_ptr, nd,
                                                dst->shape, str, dst->numel, err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : finish(ctx);
}

int pardo_cuda_transpose(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_type y;
    int perm[PARDO_MAX_DIMS];
    if (!plain_in(ctx)) return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes no tensor_array");
    int rc = pardo_cuda_infer_run(ctx, &y, 1);
    if (rc == PARDO_OK) rc = perm_get(ctx, x->ndim, perm);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *out = pardo_kernel_output(ctx, 0, x->dtype, y.ndim, y.shape);
    return out ? permute(ctx, x, perm, out) : ctx->st->code;
}

int pardo_cuda_transpose_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int perm[PARDO_MAX_DIMS], inv[PARDO_MAX_DIMS];
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_cuda_floats_in(ctx, 0x5)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x5);
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = perm_get(ctx, x->ndim, perm);
    if (rc != PARDO_OK) return rc;
    int64_t y_shape[PARDO_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        y_shape[i] = x->shape[perm[i]];
        inv[perm[i]] = i;
    }
    if (dy && !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, y_shape)) return pardo_cuda_run_on_cpu(ctx, FITS_NOT);
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (dy) return permute(ctx, dy, inv, dx);
    if (pardo_cuda_zero(ctx, dx) != PARDO_OK) return ctx->st->code;
    return finish(ctx);
}

/* ---- concat ---- */

/* attr axis for rank nd, normalised (already checked by the infer function). */
static int axis_get(pardo_kernel_ctx *ctx, int nd, int *axis) {
    int64_t a;
    int rc = pardo_attr_int(ctx->op, "axis", 0, &a, ctx->st);
    return rc != PARDO_OK ? rc : pardo_normalize_axis(a, nd, "axis", axis, ctx->st);
}

/* Copies between the joined tensor whole (shape y, joined along axis) and its n parts (NULL: skipped): split false
 * joins them into whole, true splits whole into them. */
static int blocks_move(pardo_kernel_ctx *ctx, bool split, int n, pardo_tensor *const *parts, const int64_t *sizes,
                       char *whole, const pardo_type *y, int axis) {
    const size_t es = pardo_dtype_size(y->dtype);
    int64_t outer = 1, inner = 1, at = 0;
    for (int d = 0; d < axis; d++) outer *= y->shape[d];
    for (int d = axis + 1; d < y->ndim; d++) inner *= y->shape[d];
    const size_t pitch = (size_t)(y->shape[axis] * inner) * es;
    char err[256];
    for (int k = 0; k < n; k++) {
        const size_t width = (size_t)(sizes[k] * inner) * es;
        char *w = whole + (size_t)(at * inner) * es;
        at += sizes[k];
        if (!parts[k]) continue;
        char *p = parts[k]->mem->gpu_ptr;
        int rc = split ? pardo_cuda_launch_copy2d(p, width, w, pitch, width, (size_t)outer, err, sizeof err)
                       : pardo_cuda_launch_copy2d(w, pitch, p, width, width, (size_t)outer, err, sizeof err);
        if (rc) return cuda_error(ctx, rc, err);
    }
    return finish(ctx);
}

int pardo_cuda_concat(pardo_kernel_ctx *ctx) {
    const int n = ctx->n_in;
    pardo_type y;
    int axis;
    int64_t sizes[MAX_IO];
    if (!plain_in(ctx) || n > MAX_IO) return pardo_cuda_run_on_cpu(ctx, FITS_NOT);
    for (int k = 0; k < n; k++)
        if (!ctx->in[k]) return pardo_cuda_run_on_cpu(ctx, FITS_NOT);
    int rc = pardo_cuda_infer_run(ctx, &y, 1);
    if (rc == PARDO_OK) rc = axis_get(ctx, y.ndim, &axis);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < n; k++) sizes[k] = ctx->in[k]->shape[axis];
    pardo_tensor *out = pardo_kernel_output(ctx, 0, y.dtype, y.ndim, y.shape);
    if (!out) return ctx->st->code;
    if (out->numel == 0) return PARDO_OK;
    return blocks_move(ctx, false, n, ctx->in, sizes, out->mem->gpu_ptr, &y, axis);
}

int pardo_cuda_concat_grad(pardo_kernel_ctx *ctx) {
    const int k = ctx->n_in - 2;
    if (k < 1 || k > MAX_IO || ctx->n_out > k || !plain_in(ctx)) return pardo_cuda_run_on_cpu(ctx, FITS_NOT);
    for (int i = 0; i < k; i++)
        if (!ctx->in[i] || (pardo_kernel_wants_output(ctx, i) && !pardo_dtype_is_float(ctx->in[i]->dtype)))
            return pardo_cuda_run_on_cpu(ctx, FITS_NOT);
    pardo_tensor *dy = ctx->in[k + 1];
    int axis;
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc == PARDO_OK) rc = axis_get(ctx, ctx->in[0]->ndim, &axis);
    if (rc != PARDO_OK) return rc;
    /* Y's type: the inputs joined along axis (checked by the infer function) */
    pardo_type y = pardo_tensor_type(ctx->in[0]);
    int64_t sizes[MAX_IO];
    y.shape[axis] = 0;
    for (int i = 0; i < k; i++) y.shape[axis] += sizes[i] = ctx->in[i]->shape[axis];
    if (dy && (dy->dtype != y.dtype || !pardo_shape_equal(dy->ndim, dy->shape, y.ndim, y.shape)))
        return pardo_cuda_run_on_cpu(ctx, FITS_NOT);
    pardo_tensor *parts[MAX_IO];
    for (int i = 0; i < k; i++) {
        parts[i] = NULL;
        if (!pardo_kernel_wants_output(ctx, i)) continue;
        pardo_tensor *x = ctx->in[i];
        if (!(parts[i] = pardo_kernel_output(ctx, i, x->dtype, x->ndim, x->shape))) return ctx->st->code;
        if (!dy && pardo_cuda_zero(ctx, parts[i]) != PARDO_OK) return ctx->st->code;
    }
    if (!dy || dy->numel == 0) return finish(ctx);
    return blocks_move(ctx, true, k, parts, sizes, dy->mem->gpu_ptr, &y, axis);
}

/* ---- cast ---- */

/* The kernels' code for dt (launch_train.h's enum pardo_cuda_dtype); false for a dtype they do not take. */
static bool dtype_code(pardo_dtype dt, int *code) {
    switch (dt) {
    case PARDO_F32:
        *code = PARDO_CU_F32;
        return true;
    case PARDO_F64:
        *code = PARDO_CU_F64;
        return true;
    case PARDO_I32:
        *code = PARDO_CU_I32;
        return true;
    case PARDO_I64:
        *code = PARDO_CU_I64;
        return true;
    default:
        return false;
    }
}

/* dst = src converted (as many elements). */
static int cast_into(pardo_kernel_ctx *ctx, const pardo_tensor *src, int from, pardo_tensor *dst, int to) {
    char err[256];
    int rc = pardo_cuda_launch_cast(from, src->mem->gpu_ptr, to, dst->mem->gpu_ptr, src->numel, err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : finish(ctx);
}

int pardo_cuda_cast(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_type y;
    int from, to;
    if (x->is_array || !dtype_code(x->dtype, &from))
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel casts between float32, float64, int32 and int64");
    int rc = pardo_cuda_infer_run(ctx, &y, 1);
    if (rc != PARDO_OK) return rc;
    if (!dtype_code(y.dtype, &to))
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel casts between float32, float64, int32 and int64");
    pardo_tensor *out = pardo_kernel_output(ctx, 0, y.dtype, x->ndim, x->shape);
    return out ? cast_into(ctx, x, from, out, to) : ctx->st->code;
}

int pardo_cuda_cast_grad(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int from, to;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (x->is_array || y->is_array || (dy && dy->is_array) || !pardo_dtype_is_float(x->dtype) ||
        !pardo_dtype_is_float(y->dtype) || !dtype_code(x->dtype, &to) || !dtype_code(y->dtype, &from) ||
        (dy && (dy->dtype != y->dtype || !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, x->shape))))
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes float32 and float64 casts of X's shape");
    int rc = pardo_cuda_infer_run(ctx, NULL, 0);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (dy) return cast_into(ctx, dy, from, dx, to);
    if (pardo_cuda_zero(ctx, dx) != PARDO_OK) return ctx->st->code;
    return finish(ctx);
}

/* ---- fill ---- */

int pardo_cuda_fill(pardo_kernel_ctx *ctx) {
    pardo_type y;
    const char *how;
    double v;
    int code;
    int rc = pardo_cuda_infer_run(ctx, &y, 1);
    if (rc == PARDO_OK) rc = pardo_attr_string(ctx->op, "fill", "constant", &how, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_float(ctx->op, "value", 0.0, &v, ctx->st);
    if (rc != PARDO_OK) return rc;
    /* an integer fill within its type's range (the C conversion the CPU makes is defined there) */
    const bool in_range = y.dtype == PARDO_I32   ? v > -2147483649.0 && v < 2147483648.0
                          : y.dtype == PARDO_I64 ? v >= -9223372036854775808.0 && v < 9223372036854775808.0
                                                 : true;
    if (strcmp(how, "constant") != 0 || !dtype_code(y.dtype, &code) || !in_range)
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel fills float32, float64, int32 and int64 with a constant");
    pardo_tensor *out = pardo_kernel_output(ctx, 0, y.dtype, y.ndim, y.shape);
    if (!out) return ctx->st->code;
    char err[256];
    rc = pardo_cuda_launch_fill(code, out->mem->gpu_ptr, out->numel, v, err, sizeof err);
    return rc ? cuda_error(ctx, rc, err) : finish(ctx);
}
