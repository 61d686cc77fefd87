/* quantize.c - ONNX's linear quantization. quantize_linear: Y = saturate(round(X / scale) + zero_point), round
 * half to even, saturated to Y's dtype (zero_point's: uint8 (default when it is absent) or int8);
 * dequantize_linear: Y = (X - zero_point) * scale, X uint8, int8 or int32, Y float32. scale (float32) and
 * zero_point are one value (per tensor) or a 1-D tensor of X's dim attr axis (per axis); zero_point, optional,
 * has scale's shape. dynamic_quantize_linear: uint8 Y with scale and zero point from X's range including 0, as
 * ONNX's formula (float32, rounded half to even). matmul_integer: int32 Y = (A - a_zero_point) @ (B - b_zero_point),
 * A and B uint8 or int8, exact in int32, batch dims broadcast as matmul's. Not differentiable (no gradients). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernel_util.h"
#include "op.h"

static const pardo_arg_def q_in[] = {
    {"X", "input (quantize: float32; dequantize: uint8, int8 or int32)", false, false},
    {"scale", "float32, one value or 1-D of X's dim axis", false, false},
    {"zero_point", "scale's shape; quantize: uint8 or int8 (Y's dtype); dequantize: X's dtype (\"\": 0)", true,
     false},
};
static const pardo_arg_def q_out[] = {{"Y", "X's shape", false, false}};
static const pardo_attr_def q_attrs[] = {
    {"axis", PARDO_ATTR_INT, "1", "X's dim a 1-D scale runs along (negative counts from the end)"},
};

/* Checks scale and zero_point against X (type x); *axis_out the axis normalized (-1 for per tensor). */
static int check_params(const pardo_op *op, const pardo_type *x, const pardo_type *scale, const pardo_type *zp,
                        int *axis_out, pardo_status *st) {
    int64_t axis;
    int rc = pardo_attr_int(op, "axis", 1, &axis, st);
    if (rc != PARDO_OK) return rc;
    if (scale->dtype != PARDO_F32)
        return pardo_errorf(st, PARDO_EINVAL, "input 1 'scale' has dtype %s, expected float32",
                            pardo_dtype_name(scale->dtype));
    int64_t sn = pardo_shape_numel(scale->ndim, scale->shape);
    if (scale->ndim == 0 || (scale->ndim == 1 && sn == 1)) {
        *axis_out = -1;
    } else if (scale->ndim == 1) {
        if (x->ndim < 0) return pardo_errorf(st, PARDO_EINVAL, "input 0 'X' needs a known rank for a 1-D scale");
        if (axis < -x->ndim || axis >= x->ndim)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'axis' %lld out of range for X of rank %d", (long long)axis,
                                x->ndim);
        if (axis < 0) axis += x->ndim;
        if (x->shape[axis] >= 0 && sn >= 0 && x->shape[axis] != sn)
            return pardo_errorf(st, PARDO_EINVAL, "input 1 'scale' has %lld values, expected X's dim %lld (%lld)",
                                (long long)sn, (long long)axis, (long long)x->shape[axis]);
        *axis_out = (int)axis;
    } else {
        return pardo_errorf(st, PARDO_EINVAL, "input 1 'scale' has rank %d, expected one value or 1-D", scale->ndim);
    }
    if (zp) {
        if (zp->ndim != scale->ndim || pardo_shape_numel(zp->ndim, zp->shape) != sn)
            return pardo_errorf(st, PARDO_EINVAL, "input 2 'zero_point' must have scale's shape");
    }
    return PARDO_OK;
}

static int quantize_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *zp = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int axis;
    if (x->dtype != PARDO_F32)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 0 'X' has dtype %s, expected float32",
                            pardo_dtype_name(x->dtype));
    if (zp && zp->dtype != PARDO_U8 && zp->dtype != PARDO_I8)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 2 'zero_point' has dtype %s, expected uint8 or int8",
                            pardo_dtype_name(zp->dtype));
    int rc = check_params(ctx->op, x, ctx->in[1], zp, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    ctx->out[0].dtype = zp ? zp->dtype : PARDO_U8;
    return PARDO_OK;
}

static int dequantize_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *zp = ctx->n_in > 2 ? ctx->in[2] : NULL;
    int axis;
    if (x->dtype != PARDO_U8 && x->dtype != PARDO_I8 && x->dtype != PARDO_I32)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 0 'X' has dtype %s, expected uint8, int8 or int32",
                            pardo_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 2 'zero_point' has dtype %s, expected X's %s",
                            pardo_dtype_name(zp->dtype), pardo_dtype_name(x->dtype));
    int rc = check_params(ctx->op, x, ctx->in[1], zp, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    ctx->out[0].dtype = PARDO_F32;
    return PARDO_OK;
}

/* The run-time layout: element i uses parameter (i / inner) % count (count 1: per tensor). */
typedef struct {
    int64_t inner, count;
} layout;

static int run_layout(pardo_kernel_ctx *ctx, layout *l) {
    pardo_type tx = {ctx->in[0]->dtype, ctx->in[0]->ndim, {0}}, ts = {ctx->in[1]->dtype, ctx->in[1]->ndim, {0}};
    pardo_type tz, *pz = NULL;
    for (int d = 0; d < tx.ndim; d++) tx.shape[d] = ctx->in[0]->shape[d];
    for (int d = 0; d < ts.ndim; d++) ts.shape[d] = ctx->in[1]->shape[d];
    if (ctx->n_in > 2 && ctx->in[2]) {
        tz.dtype = ctx->in[2]->dtype;
        tz.ndim = ctx->in[2]->ndim;
        for (int d = 0; d < tz.ndim; d++) tz.shape[d] = ctx->in[2]->shape[d];
        pz = &tz;
    }
    int axis;
    int rc = check_params(ctx->op, &tx, &ts, pz, &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    l->inner = 1;
    l->count = 1;
    if (axis >= 0) {
        for (int d = axis + 1; d < tx.ndim; d++) l->inner *= tx.shape[d];
        l->count = tx.shape[axis];
    }
    return PARDO_OK;
}

static int64_t zp_at(const pardo_tensor *zp, int64_t j) {
    if (!zp) return 0;
    switch (zp->dtype) {
    case PARDO_U8: return ((const uint8_t *)pardo_tensor_data(zp))[j];
    case PARDO_I8: return ((const int8_t *)pardo_tensor_data(zp))[j];
    default: return ((const int32_t *)pardo_tensor_data(zp))[j];
    }
}

static int quantize_cpu(pardo_kernel_ctx *ctx) {
    layout l;
    int rc = run_layout(ctx, &l);
    if (rc != PARDO_OK) return rc;
    const pardo_tensor *x = ctx->in[0], *zp = ctx->n_in > 2 ? ctx->in[2] : NULL;
    const pardo_dtype dt = zp ? zp->dtype : PARDO_U8;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    const float *xs = pardo_tensor_data(x), *sc = pardo_tensor_data(ctx->in[1]);
    const int64_t lo = dt == PARDO_U8 ? 0 : -128, hi = dt == PARDO_U8 ? 255 : 127;
    for (int64_t i = 0; i < x->numel; i++) {
        const int64_t j = l.count == 1 ? 0 : (i / l.inner) % l.count;
        const float r = nearbyintf(xs[i] / sc[j]); /* default rounding mode: half to even */
        double v = (double)r + (double)zp_at(zp, j);
        if (isnan(r)) v = (double)zp_at(zp, j);
        const int64_t q = v <= (double)lo ? lo : v >= (double)hi ? hi : (int64_t)v;
        if (dt == PARDO_U8)
            ((uint8_t *)pardo_tensor_data(y))[i] = (uint8_t)q;
        else
            ((int8_t *)pardo_tensor_data(y))[i] = (int8_t)q;
    }
    return PARDO_OK;
}

static int dequantize_cpu(pardo_kernel_ctx *ctx) {
    layout l;
    int rc = run_layout(ctx, &l);
    if (rc != PARDO_OK) return rc;
    const pardo_tensor *x = ctx->in[0], *zp = ctx->n_in > 2 ? ctx->in[2] : NULL;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_F32, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    const float *sc = pardo_tensor_data(ctx->in[1]);
    float *ys = pardo_tensor_data(y);
    for (int64_t i = 0; i < x->numel; i++) {
        const int64_t j = l.count == 1 ? 0 : (i / l.inner) % l.count;
        const float d = (float)zp_at(x, i) - (float)zp_at(zp, j); /* as ONNX's reference: in float32 */
        ys[i] = d * sc[j];
    }
    return PARDO_OK;
}

/* Quantize float32 X to uint8 / int8 (Y owned by the executor, as every op's output). */
const pardo_op_def pardo_op_quantize_linear = {
    .type = "quantize_linear",
    .doc = "Y = saturate(round_half_even(X / scale) + zero_point), uint8 or int8 (zero_point's dtype)",
    .inputs = q_in,
    .n_inputs = 3,
    .outputs = q_out,
    .n_outputs = 1,
    .attrs = q_attrs,
    .n_attrs = 1,
    .infer = quantize_infer,
    .cpu = quantize_cpu,
    .all_dtypes = true,
};

/* Dequantize uint8 / int8 / int32 X to float32. */
const pardo_op_def pardo_op_dequantize_linear = {
    .type = "dequantize_linear",
    .doc = "Y = (X - zero_point) * scale, float32",
    .inputs = q_in,
    .n_inputs = 3,
    .outputs = q_out,
    .n_outputs = 1,
    .attrs = q_attrs,
    .n_attrs = 1,
    .infer = dequantize_infer,
    .cpu = dequantize_cpu,
    .all_dtypes = true,
};

/* ---- dynamic_quantize_linear ---- */

static const pardo_arg_def dq_in[] = {{"X", "float32", false, false}};
static const pardo_arg_def dq_out[] = {
    {"Y", "uint8, X's shape", false, false},
    {"scale", "float32 scalar: (max(0, max X) - min(0, min X)) / 255", false, false},
    {"zero_point", "uint8 scalar: round(saturate(-min(0, min X) / scale))", false, false},
};

static int dynamic_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    if (x->dtype != PARDO_F32)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input 0 'X' has dtype %s, expected float32",
                            pardo_dtype_name(x->dtype));
    ctx->out[0] = *x;
    ctx->out[0].dtype = PARDO_U8;
    ctx->out[1] = (pardo_type){PARDO_F32, 0, {0}};
    ctx->out[2] = (pardo_type){PARDO_U8, 0, {0}};
    return PARDO_OK;
}

static float clamp_u8(float v) { return v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v; }

static int dynamic_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *x = ctx->in[0];
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_U8, x->ndim, x->shape);
    pardo_tensor *ys = y ? pardo_kernel_output(ctx, 1, PARDO_F32, 0, NULL) : NULL;
    pardo_tensor *yz = ys ? pardo_kernel_output(ctx, 2, PARDO_U8, 0, NULL) : NULL;
    if (!yz) return ctx->st->code;
    const float *xs = pardo_tensor_data(x);
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < x->numel; i++) {
        lo = xs[i] < lo ? xs[i] : lo;
        hi = xs[i] > hi ? xs[i] : hi;
    }
    const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f; /* as ONNX's reference for an all-zero X */
    const float zp = nearbyintf(clamp_u8(0.0f - lo / scale));
    *(float *)pardo_tensor_data(ys) = scale;
    *(uint8_t *)pardo_tensor_data(yz) = (uint8_t)zp;
    uint8_t *q = pardo_tensor_data(y);
    for (int64_t i = 0; i < x->numel; i++) {
        const float r = nearbyintf(xs[i] / scale) + zp;
        q[i] = (uint8_t)(isnan(r) ? zp : clamp_u8(r));
    }
    return PARDO_OK;
}

/* Quantize float32 X to uint8 with its own scale and zero point (three outputs, the executor's). */
const pardo_op_def pardo_op_dynamic_quantize_linear = {
    .type = "dynamic_quantize_linear",
    .doc = "Y, scale, zero_point: X quantized to uint8 over its range including 0 (ONNX DynamicQuantizeLinear)",
    .inputs = dq_in,
    .n_inputs = 1,
    .outputs = dq_out,
    .n_outputs = 3,
    .infer = dynamic_infer,
    .cpu = dynamic_cpu,
    .all_dtypes = true,
};

/* ---- matmul_integer ---- */

static const pardo_arg_def mi_in[] = {
    {"A", "uint8 or int8, (..., M, K)", false, false},
    {"B", "uint8 or int8, (..., K, N)", false, false},
    {"a_zero_point", "A's dtype, one value or 1-D of M (\"\": 0)", true, false},
    {"b_zero_point", "B's dtype, one value or 1-D of N (\"\": 0)", true, false},
};
static const pardo_arg_def mi_out[] = {{"Y", "int32, (broadcast batch..., M, N)", false, false}};

static bool is_q8(pardo_dtype dt) { return dt == PARDO_U8 || dt == PARDO_I8; }

static int mi_check_zp(const pardo_type *zp, pardo_dtype dt, int64_t len, int i, pardo_status *st) {
    if (!zp) return PARDO_OK;
    if (zp->dtype != dt)
        return pardo_errorf(st, PARDO_EINVAL, "input %d zero point has dtype %s, expected its matrix's %s", i,
                            pardo_dtype_name(zp->dtype), pardo_dtype_name(dt));
    const int64_t n = pardo_shape_numel(zp->ndim, zp->shape);
    if (zp->ndim > 1 || (n != 1 && n >= 0 && len >= 0 && n != len))
        return pardo_errorf(st, PARDO_EINVAL, "input %d zero point has %lld values, expected 1 or %lld", i,
                            (long long)n, (long long)len);
    return PARDO_OK;
}

static int mi_infer(pardo_infer_ctx *ctx) {
    const pardo_type *a = ctx->in[0], *b = ctx->in[1];
    if (!is_q8(a->dtype) || !is_q8(b->dtype))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "A and B have dtypes %s and %s, expected uint8 or int8",
                            pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    if (a->ndim < 2 || b->ndim < 2)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "A and B have ranks %d and %d, expected 2 or more", a->ndim,
                            b->ndim);
    const int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], kb = b->shape[b->ndim - 2],
                  n = b->shape[b->ndim - 1];
    if (k >= 0 && kb >= 0 && k != kb)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "A's last dim %lld differs from B's dim -2 %lld", (long long)k,
                            (long long)kb);
    int rc = mi_check_zp(ctx->n_in > 2 ? ctx->in[2] : NULL, a->dtype, m, 2, ctx->st);
    if (rc == PARDO_OK) rc = mi_check_zp(ctx->n_in > 3 ? ctx->in[3] : NULL, b->dtype, n, 3, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = PARDO_I32;
    y->ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < y->ndim - 2; d++) {
        const int da = d - (y->ndim - a->ndim), db = d - (y->ndim - b->ndim);
        const int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != 1 && sb != 1 && sa >= 0 && sb >= 0 && sa != sb)
            return pardo_errorf(ctx->st, PARDO_EINVAL, "batch dims %lld and %lld do not broadcast", (long long)sa,
                                (long long)sb);
        y->shape[d] = sa == 1 ? sb : sb == 1 ? sa : (sa < 0 ? sb : sa);
    }
    y->shape[y->ndim - 2] = m;
    y->shape[y->ndim - 1] = n;
    return PARDO_OK;
}

static int32_t q8_at(const pardo_tensor *t, int64_t i) {
    const void *d = pardo_tensor_data(t);
    return t->dtype == PARDO_U8 ? ((const uint8_t *)d)[i] : ((const int8_t *)d)[i];
}

static int mi_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    const pardo_tensor *za = ctx->n_in > 2 ? ctx->in[2] : NULL, *zb = ctx->n_in > 3 ? ctx->in[3] : NULL;
    const int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    const int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
    if (b->shape[b->ndim - 2] != k) return pardo_errorf(ctx->st, PARDO_ESHAPE, "A's K differs from B's");
    int64_t shape[PARDO_MAX_DIMS], sa[PARDO_MAX_DIMS], sb[PARDO_MAX_DIMS], batch = 1;
    int64_t ta = m * k, tb = k * n; /* strides of the batch dims, 0 where broadcast */
    for (int d = nd - 3; d >= 0; d--) {
        const int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
        const int64_t la = da >= 0 ? a->shape[da] : 1, lb = db >= 0 ? b->shape[db] : 1;
        shape[d] = la == 1 ? lb : la;
        sa[d] = la == 1 ? 0 : ta;
        sb[d] = lb == 1 ? 0 : tb;
        ta *= la;
        tb *= lb;
        batch *= shape[d];
    }
    shape[nd - 2] = m;
    shape[nd - 1] = n;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_I32, nd, shape);
    if (!y) return ctx->st->code;
    int32_t *ys = pardo_tensor_data(y);
    for (int64_t bi = 0; bi < batch; bi++) {
        int64_t oa = 0, ob = 0, rem = bi;
        for (int d = nd - 3; d >= 0; d--) {
            const int64_t idx = rem % shape[d];
            rem /= shape[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const int32_t zai = za ? q8_at(za, za->numel == 1 ? 0 : i) : 0;
                const int32_t zbj = zb ? q8_at(zb, zb->numel == 1 ? 0 : j) : 0;
                int32_t acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += (q8_at(a, oa + i * k + p) - zai) * (q8_at(b, ob + p * n + j) - zbj);
                ys[(bi * m + i) * n + j] = acc;
            }
    }
    return PARDO_OK;
}

/* Integer matmul of uint8 / int8 matrices into int32 (ONNX MatMulInteger). */
const pardo_op_def pardo_op_matmul_integer = {
    .type = "matmul_integer",
    .doc = "Y = (A - a_zero_point) @ (B - b_zero_point), int32 (uint8 / int8 A and B)",
    .inputs = mi_in,
    .n_inputs = 4,
    .outputs = mi_out,
    .n_outputs = 1,
    .infer = mi_infer,
    .cpu = mi_cpu,
    .all_dtypes = true,
};
