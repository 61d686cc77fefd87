/* cast.c - cast converts X to attr dtype (every dtype, from every dtype),
 * like ONNX Cast where ONNX defines it: float to int truncates toward zero;
 * where C leaves it undefined pardo saturates to int32 / int64 (NaN becomes
 * 0, values past the range its least or greatest value) and a narrower int
 * takes the low bits of that int64 (numpy's wraparound: 300.0 -> uint8 44,
 * -1.0 -> 255); int to a narrower int wraps around (two's complement, like
 * numpy); to float16 and bfloat16 rounds to nearest, ties to even, once
 * (from int64 too); to bool is X != 0 (NaN is true), from bool 0 or 1. cast_grad: dX = dY cast back to
 * X's dtype when X and Y are both float; a cast from or to a non-float dtype
 * has no gradient (PARDO_ENOTSUP when one is asked for). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/half.h"
#include "kernel_util.h"
#include "kernels.h"
#include "op.h"

static const pardo_arg_def x_in[] = {{"X", "input tensor (any dtype)", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "X converted to attr dtype, X's shape", false, false}};
static const pardo_attr_def cast_attrs[] = {
    {"dtype", PARDO_ATTR_STRING, NULL, "target dtype: float32, float64, float16, bfloat16, int8, int16, int32, int64, "
                                        "uint8, uint16, uint32, uint64 or bool"},
};

static int cast_dtype(const pardo_op *op, pardo_dtype *out, pardo_status *st) {
    const char *name;
    if (!pardo_attr(op, "dtype")) return pardo_errorf(st, PARDO_EINVAL, "attr 'dtype' is required");
    int rc = pardo_attr_string(op, "dtype", "", &name, st);
    if (rc != PARDO_OK) return rc;
    *out = pardo_dtype_from_name(name);
    if (*out == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'dtype' is \"%s\", expected one of float32, float64, float16, bfloat16, int8, "
                            "int16, int32, int64, uint8, uint16, uint32, uint64, bool", name);
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

/* Float to uint64: truncation toward zero; negative values wrap like the int64 they truncate to (numpy's -1.0 ->
 * 2^64 - 1), values from 2^64 up saturate, NaN to 0. */
static inline uint64_t sat_u64(double v) {
    if (isnan(v)) return 0;
    if (v >= 18446744073709551616.0) return UINT64_MAX;
    if (v >= 9223372036854775808.0) return (uint64_t)v;
    return (uint64_t)sat_i64(v);
}

/* An integer as the double nearest it with its lost bits kept in the last place (round to odd): a double of 53
 * bits rounded again to float16 or bfloat16 (11 or 8 bits) then rounds as the integer itself would. */
static double u64_to_f64_odd(uint64_t u) {
    if (u < (1ULL << 53)) return (double)u;
    int shift = 0;
    while ((u >> shift) >= (1ULL << 53)) shift++;
    const uint64_t kept = (u >> shift) | ((u & ((1ULL << shift) - 1)) != 0);
    return ldexp((double)kept, shift);
}

static double i64_to_f64_odd(int64_t v) {
    return v < 0 ? -u64_to_f64_odd(0 - (uint64_t)v) : u64_to_f64_odd((uint64_t)v);
}

/* A cast runs in chunks: the source elements load into doubles (float sources; exact) or 64-bit integers (int
 * and bool sources; unsigned ones flagged), then store into the target dtype from there. */
enum { CHUNK = 512 };
typedef enum { K_FLOAT, K_INT, K_UINT } load_kind;

#define LOAD_LOOP(T, EXPR)                                                                                             \
    do {                                                                                                               \
        const T *s = (const T *)src + off;                                                                             \
        for (int i = 0; i < n; i++) EXPR;                                                                              \
    } while (0)

static load_kind load_chunk(pardo_dtype dt, const void *src, int64_t off, int n, double *f, int64_t *iv) {
    switch (dt) {
    case PARDO_F32: LOAD_LOOP(float, f[i] = (double)s[i]); return K_FLOAT;
    case PARDO_F64: LOAD_LOOP(double, f[i] = s[i]); return K_FLOAT;
    case PARDO_F16: LOAD_LOOP(uint16_t, f[i] = pardo_f16_to_f64(s[i])); return K_FLOAT;
    case PARDO_BF16: LOAD_LOOP(uint16_t, f[i] = pardo_bf16_to_f64(s[i])); return K_FLOAT;
    case PARDO_I32: LOAD_LOOP(int32_t, iv[i] = s[i]); return K_INT;
    case PARDO_I64: LOAD_LOOP(int64_t, iv[i] = s[i]); return K_INT;
    case PARDO_I8: LOAD_LOOP(int8_t, iv[i] = s[i]); return K_INT;
    case PARDO_I16: LOAD_LOOP(int16_t, iv[i] = s[i]); return K_INT;
    case PARDO_BOOL: LOAD_LOOP(uint8_t, iv[i] = s[i] != 0); return K_INT;
    case PARDO_U8: LOAD_LOOP(uint8_t, iv[i] = s[i]); return K_UINT;
    case PARDO_U16: LOAD_LOOP(uint16_t, iv[i] = s[i]); return K_UINT;
    case PARDO_U32: LOAD_LOOP(uint32_t, iv[i] = s[i]); return K_UINT;
    case PARDO_U64: LOAD_LOOP(uint64_t, iv[i] = (int64_t)s[i]); return K_UINT; /* the bits; K_UINT reads them back */
    default: break;
    }
    PARDO_ASSERT(!"cast: bad source dtype");
    return K_FLOAT;
}

/* Stores n elements into dst + off of dtype dt: from doubles F (FLOAT_EXPR of f[i]) or from 64-bit integers
 * (INT_EXPR of iv[i] for signed, UINT_EXPR of u = (uint64_t)iv[i] for unsigned sources). */
#define STORE_LOOP(T, FLOAT_EXPR, INT_EXPR, UINT_EXPR)                                                                 \
    do {                                                                                                               \
        T *d = (T *)dst + off;                                                                                         \
        if (kind == K_FLOAT)                                                                                           \
            for (int i = 0; i < n; i++) d[i] = FLOAT_EXPR;                                                             \
        else if (kind == K_INT)                                                                                        \
            for (int i = 0; i < n; i++) d[i] = INT_EXPR;                                                               \
        else                                                                                                           \
            for (int i = 0; i < n; i++) d[i] = UINT_EXPR;                                                              \
    } while (0)

/* An integer target keeps the low bits of a 64-bit integer (wraps, two's complement); from a float it takes
 * the value truncated toward zero as an int64 (saturated; NaN 0), then its low bits (numpy's 300.0 -> uint8 44). */
#define U ((uint64_t)iv[i])
static void store_chunk(pardo_dtype dt, void *dst, int64_t off, int n, load_kind kind, const double *f,
                        const int64_t *iv) {
    switch (dt) {
    case PARDO_F32: STORE_LOOP(float, (float)f[i], (float)iv[i], (float)U); return;
    case PARDO_F64: STORE_LOOP(double, f[i], (double)iv[i], (double)U); return;
    case PARDO_F16:
        STORE_LOOP(uint16_t, pardo_f16_from_f64(f[i]), pardo_f16_from_f64(i64_to_f64_odd(iv[i])),
                   pardo_f16_from_f64(u64_to_f64_odd(U)));
        return;
    case PARDO_BF16:
        STORE_LOOP(uint16_t, pardo_bf16_from_f64(f[i]), pardo_bf16_from_f64(i64_to_f64_odd(iv[i])),
                   pardo_bf16_from_f64(u64_to_f64_odd(U)));
        return;
    case PARDO_I32: STORE_LOOP(int32_t, sat_i32(f[i]), (int32_t)(uint32_t)U, (int32_t)(uint32_t)U); return;
    case PARDO_I64: STORE_LOOP(int64_t, sat_i64(f[i]), iv[i], iv[i]); return;
    case PARDO_I8: STORE_LOOP(int8_t, (int8_t)(uint8_t)sat_i64(f[i]), (int8_t)(uint8_t)U, (int8_t)(uint8_t)U); return;
    case PARDO_I16:
        STORE_LOOP(int16_t, (int16_t)(uint16_t)sat_i64(f[i]), (int16_t)(uint16_t)U, (int16_t)(uint16_t)U);
        return;
    case PARDO_U8: STORE_LOOP(uint8_t, (uint8_t)sat_i64(f[i]), (uint8_t)U, (uint8_t)U); return;
    case PARDO_U16: STORE_LOOP(uint16_t, (uint16_t)sat_i64(f[i]), (uint16_t)U, (uint16_t)U); return;
    case PARDO_U32: STORE_LOOP(uint32_t, (uint32_t)sat_i64(f[i]), (uint32_t)U, (uint32_t)U); return;
    case PARDO_U64: STORE_LOOP(uint64_t, sat_u64(f[i]), U, U); return;
    case PARDO_BOOL: STORE_LOOP(uint8_t, (uint8_t)(f[i] != 0), (uint8_t)(iv[i] != 0), (uint8_t)(iv[i] != 0)); return;
    default: break;
    }
    PARDO_ASSERT(!"cast: bad target dtype");
}
#undef U

void pardo_cast_elements(pardo_dtype from, const void *src, pardo_dtype to, void *dst, int64_t n) {
    double f[CHUNK];
    int64_t iv[CHUNK];
    for (int64_t off = 0; off < n; off += CHUNK) {
        const int m = (int)(n - off < CHUNK ? n - off : CHUNK);
        const load_kind kind = load_chunk(from, src, off, m, f, iv);
        store_chunk(to, dst, off, m, kind, f, iv);
    }
}

static int cast_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_dtype dt;
    int rc = cast_dtype(ctx->op, &dt, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (x->dtype < 0 || x->dtype >= PARDO_DTYPE_COUNT)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s", pardo_dtype_name(x->dtype));
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    pardo_cast_elements(x->dtype, pardo_tensor_data(x), dt, pardo_tensor_data(y), x->numel);
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
    .cuda = pardo_cuda_cast,
    .grad = pardo_grad_standard,
    .all_dtypes = true,
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
    else pardo_cast_elements(dy->dtype, pardo_tensor_data(dy), x->dtype, pardo_tensor_data(dx), x->numel);
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
    .cuda = pardo_cuda_cast_grad,
};
