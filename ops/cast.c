/* cast.c - cast converts X to attr dtype (float32, float64, int32, int64,
 * bool, from any of them), like ONNX Cast where ONNX defines it: float to
 * int truncates toward zero; where C leaves it undefined pardo saturates
 * (NaN becomes 0, values past the int's range its least or greatest value);
 * int to a narrower int wraps around (two's complement, like numpy); to bool
 * is X != 0 (NaN is true), from bool 0 or 1. cast_grad: dX = dY cast back to
 * X's dtype when X and Y are both float; a cast from or to a non-float dtype
 * has no gradient (PARDO_ENOTSUP when one is asked for). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernel_util.h"
#include "op.h"

static const pardo_arg_def x_in[] = {{"X", "input tensor (any dtype)", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "X converted to attr dtype, X's shape", false, false}};
static const pardo_attr_def cast_attrs[] = {
    {"dtype", PARDO_ATTR_STRING, NULL, "target dtype: float32, float64, int32, int64 or bool"},
};

static int cast_dtype(const pardo_op *op, pardo_dtype *out, pardo_status *st) {
    const char *name;
    if (!pardo_attr(op, "dtype")) return pardo_errorf(st, PARDO_EINVAL, "attr 'dtype' is required");
    int rc = pardo_attr_string(op, "dtype", "", &name, st);
    if (rc != PARDO_OK) return rc;
    *out = pardo_dtype_from_name(name);
    if (*out == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'dtype' is \"%s\", expected one of float32, float64, int32, int64, bool", name);
    return PARDO_OK;
}

static int cast_infer(pardo_infer_ctx *ctx) {
    pardo_dtype dt;
    int rc = cast_dtype(ctx->op, &dt, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    ctx->out[0].dtype = dt;
    return PARDO_OK;
}

/* Float to int: truncation toward zero, saturating, NaN to 0. */
static inline int32_t sat_i32(double v) {
    if (isnan(v)) return 0;
    if (v >= 2147483648.0) return INT32_MAX;
    if (v <= -2147483649.0) return INT32_MIN;
    return (int32_t)v;
}

static inline int64_t sat_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

/* A source element becomes a double (float sources, LOAD_F) or an int64
 * (int and bool sources, LOAD_I and LOAD_B); each target dtype stores from
 * either (STORE_*_F, STORE_*_I). */
#define LOAD_F(v) ((double)(v))
#define LOAD_I(v) ((int64_t)(v))
#define LOAD_B(v) ((int64_t)((v) != 0))
#define STORE_F32_F(v) ((float)(v))
#define STORE_F32_I(v) ((float)(v))
#define STORE_F64_F(v) (v)
#define STORE_F64_I(v) ((double)(v))
#define STORE_I32_F(v) sat_i32(v)
#define STORE_I32_I(v) ((int32_t)(uint32_t)(uint64_t)(v))
#define STORE_I64_F(v) sat_i64(v)
#define STORE_I64_I(v) (v)
#define STORE_B_F(v) ((uint8_t)((v) != 0))
#define STORE_B_I(v) ((uint8_t)((v) != 0))

typedef void (*cast_fn)(const void *src, void *dst, int64_t n);

#define CAST_FN(NAME, S, D, LOAD, STORE)                                                                               \
    static void NAME(const void *vs, void *vd, int64_t n) {                                                            \
        const S *s = vs;                                                                                               \
        D *d = vd;                                                                                                     \
        for (int64_t i = 0; i < n; i++) d[i] = STORE(LOAD(s[i]));                                                      \
    }

/* The five casts from source dtype SN (C type S; K: F or I, how it loads). */
#define CAST_ROW(SN, S, LOAD, K)                                                                                       \
    CAST_FN(cast_##SN##_f32, S, float, LOAD, STORE_F32_##K)                                                            \
    CAST_FN(cast_##SN##_f64, S, double, LOAD, STORE_F64_##K)                                                           \
    CAST_FN(cast_##SN##_i32, S, int32_t, LOAD, STORE_I32_##K)                                                          \
    CAST_FN(cast_##SN##_i64, S, int64_t, LOAD, STORE_I64_##K)                                                          \
    CAST_FN(cast_##SN##_b, S, uint8_t, LOAD, STORE_B_##K)

CAST_ROW(f32, float, LOAD_F, F)
CAST_ROW(f64, double, LOAD_F, F)
CAST_ROW(i32, int32_t, LOAD_I, I)
CAST_ROW(i64, int64_t, LOAD_I, I)
CAST_ROW(b, uint8_t, LOAD_B, I)

#define CAST_TABLE_ROW(SN) {cast_##SN##_f32, cast_##SN##_f64, cast_##SN##_i32, cast_##SN##_i64, cast_##SN##_b}
/* [source dtype][target dtype], in pardo_dtype order */
static const cast_fn cast_table[PARDO_DTYPE_COUNT][PARDO_DTYPE_COUNT] = {
    CAST_TABLE_ROW(f32), CAST_TABLE_ROW(f64), CAST_TABLE_ROW(i32), CAST_TABLE_ROW(i64), CAST_TABLE_ROW(b),
};

static bool dtype_ok(pardo_dtype dt) { return dt >= 0 && dt < PARDO_DTYPE_COUNT; }

static int cast_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_dtype dt;
    int rc = cast_dtype(ctx->op, &dt, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (!dtype_ok(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s", pardo_dtype_name(x->dtype));
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    cast_table[x->dtype][dt](pardo_tensor_data(x), pardo_tensor_data(y), x->numel);
    return PARDO_OK;
}

const pardo_op_def pardo_op_cast = {
    .type = "cast",
    .doc = "Y = X converted to attr dtype (any dtype to any; float to int truncates toward zero and saturates, "
           "NaN to 0; to bool: X != 0)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = cast_attrs,
    .n_attrs = 1,
    .infer = cast_infer,
    .cpu = cast_cpu,
    .grad = pardo_grad_standard,
};

/* ---- cast_grad ---- */

static const pardo_arg_def grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def grad_out[] = {{"dX", "gradient of X, X's dtype and shape (float casts only)", true, false}};

/* PARDO_ENOTSUP when dX is wanted but X or Y is not float. */
static int cast_grad_check(const pardo_op *op, pardo_dtype x, pardo_dtype y, pardo_status *st) {
    if (!pardo_op_wants_output(op, 0) || (pardo_dtype_is_float(x) && pardo_dtype_is_float(y))) return PARDO_OK;
    return pardo_errorf(st, PARDO_ENOTSUP, "output 0 asks for the gradient of a cast from %s to %s: only casts "
                        "between float32 and float64 have gradients", pardo_dtype_name(x), pardo_dtype_name(y));
}

static int cast_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    pardo_dtype dt;
    int rc = cast_dtype(ctx->op, &dt, ctx->st);
    if (rc == PARDO_OK) rc = cast_grad_check(ctx->op, x->dtype, y->dtype, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (dy && dy->dtype != y->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'dY' has dtype %s, expected %s like input 1 'Y'",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(y->dtype));
    ctx->out[0] = *x;
    return PARDO_OK;
}

static int cast_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    pardo_dtype dt;
    int rc = cast_dtype(ctx->op, &dt, ctx->st);
    if (rc == PARDO_OK) rc = cast_grad_check(ctx->op, x->dtype, y->dtype, ctx->st);
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    if (dy && (dy->dtype != y->dtype || !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, x->shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'dY' is %s %s, expected %s %s like Y",
                            pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(y->dtype), pardo_shape_str(x->ndim, x->shape, s2, sizeof s2));
    }
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) pardo_tensor_zero(dx);
    else cast_table[dy->dtype][x->dtype](pardo_tensor_data(dy), pardo_tensor_data(dx), x->numel);
    return PARDO_OK;
}

const pardo_op_def pardo_op_cast_grad = {
    .type = "cast_grad",
    .doc = "dX = dY cast back to X's dtype, for float to float casts (gradient of cast; float32, float64)",
    .inputs = grad_in,
    .n_inputs = 3,
    .outputs = grad_out,
    .n_outputs = 1,
    .attrs = cast_attrs,
    .n_attrs = 1,
    .infer = cast_grad_infer,
    .cpu = cast_grad_cpu,
};
