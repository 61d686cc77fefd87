/* index_util.c - helpers of the index, dims and compare op families (see
 * index_util.h). */
#include "index_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"

int pardo_index_read_ints(const pardo_tensor *t, const char *what, int64_t *out, int max, int *n, pardo_status *st) {
    char s[128];
    if ((t->dtype != PARDO_I64 && t->dtype != PARDO_I32) || t->ndim > 1)
        return pardo_errorf(st, PARDO_ESHAPE, "%s is %s %s, expected a 1-D int64 (or int32) tensor", what,
                            pardo_dtype_name(t->dtype), pardo_shape_str(t->ndim, t->shape, s, sizeof s));
    if (t->numel > max)
        return pardo_errorf(st, PARDO_EINVAL, "%s has %lld values, at most %d allowed", what, (long long)t->numel, max);
    const void *p = pardo_tensor_data(t);
    for (int64_t i = 0; i < t->numel; i++)
        out[i] = t->dtype == PARDO_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
    *n = (int)t->numel;
    return PARDO_OK;
}

/* One integer attr value, saturated to int64. */
static bool value_to_int64(const pardo_value *v, int64_t *out) {
    if (v->kind != PARDO_V_NUMBER || !isfinite(v->number) || floor(v->number) != v->number) return false;
    if (v->number >= 9223372036854775807.0) *out = INT64_MAX;
    else if (v->number <= -9223372036854775807.0) *out = INT64_MIN;
    else *out = (int64_t)v->number;
    return true;
}

int pardo_index_attr_ints(const pardo_op *op, const char *name, int64_t *out, int max, int *n, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, name);
    *n = -1;
    if (!v) return PARDO_OK;
    if (v->kind == PARDO_V_NUMBER) {
        if (!value_to_int64(v, out)) return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is not an integer", name);
        *n = 1;
        return PARDO_OK;
    }
    if (v->kind != PARDO_V_ARRAY)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is a %s, expected a list of integers", name,
                            pardo_value_kind_name(v->kind));
    if (v->n > max)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %d values, at most %d allowed", name, v->n, max);
    for (int i = 0; i < v->n; i++)
        if (!value_to_int64(&v->items[i], &out[i]))
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' element %d is a %s, expected an integer", name, i,
                                pardo_value_kind_name(v->items[i].kind));
    *n = v->n;
    return PARDO_OK;
}

int pardo_index_ints(const pardo_op *op, const pardo_tensor *in_t, int k, const char *name, int64_t *out, int max,
                     int *n, pardo_status *st) {
    if (in_t) {
        char what[96];
        snprintf(what, sizeof what, "input %d '%s'", k, name);
        return pardo_index_read_ints(in_t, what, out, max, n, st);
    }
    return pardo_index_attr_ints(op, name, out, max, n, st);
}

int pardo_index_expect_list(const pardo_type *t, const char *what, int *len, pardo_status *st) {
    char s[128];
    if ((t->dtype != PARDO_I64 && t->dtype != PARDO_I32) || t->ndim > 1)
        return pardo_errorf(st, PARDO_ESHAPE, "%s is %s %s, expected a 1-D int64 (or int32) tensor", what,
                            pardo_dtype_name(t->dtype), pardo_shape_str(t->ndim, t->shape, s, sizeof s));
    *len = t->ndim == 0 ? 1 : t->ndim == 1 ? (int)(t->shape[0] < 0 ? -1 : t->shape[0]) : -1;
    return PARDO_OK;
}

void pardo_index_bcast_strides(int out_nd, const int64_t *out_shape, int nd, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = out_nd - 1; i >= 0; i--) {
        int j = i - (out_nd - nd);
        if (j < 0 || shape[j] == 1) strides[i] = 0;
        else strides[i] = s;
        if (j >= 0) s *= shape[j];
    }
    (void)out_shape;
}

void pardo_index_copy(size_t es, void *dst, const void *src, int64_t n) {
    if (n > 0) memcpy(dst, src, (size_t)n * es);
}

int pardo_index_back_grad_infer(pardo_infer_ctx *ctx, int dy_k) {
    const pardo_type *x = ctx->in[0], *dy = ctx->n_in > dy_k ? ctx->in[dy_k] : NULL;
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc != PARDO_OK) return rc;
    if (dy && dy->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'dY' has dtype %s, expected %s like input 0 'X'", dy_k,
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(x->dtype));
    ctx->out[0] = *x;
    for (int k = 1; k < ctx->n_out; k++) { /* a list input (axes, shape) has no gradient */
        if (pardo_op_wants_output(ctx->op, k))
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output %d asks for the gradient of input %d, an integer "
                                "list, which has none", k, k);
        ctx->out[k] = *x;
    }
    return PARDO_OK;
}

int pardo_index_back_grad(pardo_kernel_ctx *ctx, int dy_k) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > dy_k ? ctx->in[dy_k] : NULL;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'X' is %s, which has no gradient",
                            pardo_dtype_name(x->dtype));
    if (dy && (dy->dtype != x->dtype || dy->numel != x->numel)) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'dY' is %s %s, expected %s with X's %lld elements (X %s)",
                            dy_k, pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(x->dtype), (long long)x->numel,
                            pardo_shape_str(x->ndim, x->shape, s2, sizeof s2));
    }
    if (dy) return pardo_kernel_output_as(ctx, 0, dy_k, x->ndim, x->shape) ? PARDO_OK : ctx->st->code;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    pardo_tensor_zero(dx);
    return PARDO_OK;
}
