/* math.c - the math ops of ONNX that pardo's arithmetic (ops/elementwise.c)
 * lacks, like the ONNX operators of the same meaning:
 * - unary float ops (float32, float64; ops/unary.h): floor, ceil, round
 *   (half to even), sin, cos, tan, asin, acos, atan, sinh, cosh, asinh,
 *   acosh, atanh and reciprocal; the trigonometric and hyperbolic ones and
 *   reciprocal with their gradient ops, floor, ceil and round without (their
 *   derivative is 0 almost everywhere);
 * - sign (float32, float64, int32, int64; no gradient);
 * - the variadic ops max, min, sum, mean: one or more inputs broadcast like
 *   numpy (max and min: float32, float64, int32, int64, NaN wins; sum:
 *   the same, ints wrapping; mean: floats), with gradient ops max_grad,
 *   min_grad (dY to the first input holding the extreme), sum_grad and
 *   mean_grad (dY summed back to each input's shape); inputs X_0..X_{k-1},
 *   Y, dY, outputs dX_0..dX_{k-1}, like concat_grad;
 * - mod (attr fmod: 0 the sign of the divisor like Python, 1 C's fmod with
 *   the sign of the dividend; floats take fmod 1; broadcasting; a zero int
 *   divisor is an error; no gradient);
 * - cumsum along an axis (attr axis, or an int32/int64 scalar input read at
 *   run time; exclusive, reverse) with cumsum_grad, the reverse cumsum of dY;
 * - hardmax along axis (1 at the first max, 0 elsewhere; floats; no
 *   gradient);
 * - det of the last two dims [..., M, M] (floats; LU with partial pivoting
 *   in double) with det_grad (the cofactors: det inv(X)^T, or each minor's
 *   determinant where X is singular).
 * Kernels never allocate beyond their outputs. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tgmath.h>

#include "core/half.h"
#include "index_util.h"
#include "kernel_util.h"
#include "op.h"
#include "unary.h"

/* ---- unary float ops ---- */

UNARY_OP_BUILT(floor, "Y = floor(X) (float32, float64, float16, bfloat16; no gradient)", NULL, 0, NULL, NULL, NULL,
               r = floor(v);)
UNARY_OP_BUILT(ceil, "Y = ceil(X) (float32, float64, float16, bfloat16; no gradient)", NULL, 0, NULL, NULL, NULL,
               r = ceil(v);)
/* nearbyint in the default rounding mode: halves go to the even neighbour, like ONNX Round. */
UNARY_OP_BUILT(
    round, "Y = X rounded to the nearest integer, halves to even (float32, float64, float16, bfloat16; no gradient)",
    NULL, 0, NULL, NULL, NULL, r = nearbyint(v);)

UNARY_OP(sin, "Y = sin(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = sin(v);)
UNARY_GRAD_OP(sin, "dX = dY * cos(X) (gradient of sin; float32, float64)", NULL, 0, NULL, r = g * cos(v);)
UNARY_OP(cos, "Y = cos(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = cos(v);)
UNARY_GRAD_OP(cos, "dX = -dY * sin(X) (gradient of cos; float32, float64)", NULL, 0, NULL, r = -g * sin(v);)
UNARY_OP_BUILT(tan, "Y = tan(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, pardo_grad_from_output,
               r = tan(v);)
UNARY_GRAD_OP_FROM_Y(tan, "dX = dY * (1 + Y^2) (gradient of tan; float32, float64)", NULL, 0, NULL,
                     r = g * (1 + w * w);)
UNARY_OP(asin, "Y = asin(X), NaN outside [-1, 1] (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL,
         r = asin(v);)
UNARY_GRAD_OP(asin, "dX = dY / sqrt(1 - X^2) (gradient of asin; float32, float64)", NULL, 0, NULL,
              r = g / sqrt(1 - v * v);)
UNARY_OP(acos, "Y = acos(X), NaN outside [-1, 1] (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL,
         r = acos(v);)
UNARY_GRAD_OP(acos, "dX = -dY / sqrt(1 - X^2) (gradient of acos; float32, float64)", NULL, 0, NULL,
              r = -g / sqrt(1 - v * v);)
UNARY_OP(atan, "Y = atan(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = atan(v);)
UNARY_GRAD_OP(atan, "dX = dY / (1 + X^2) (gradient of atan; float32, float64)", NULL, 0, NULL, r = g / (1 + v * v);)
UNARY_OP(sinh, "Y = sinh(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = sinh(v);)
UNARY_GRAD_OP(sinh, "dX = dY * cosh(X) (gradient of sinh; float32, float64)", NULL, 0, NULL, r = g * cosh(v);)
UNARY_OP(cosh, "Y = cosh(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = cosh(v);)
UNARY_GRAD_OP(cosh, "dX = dY * sinh(X) (gradient of cosh; float32, float64)", NULL, 0, NULL, r = g * sinh(v);)
UNARY_OP(asinh, "Y = asinh(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = asinh(v);)
UNARY_GRAD_OP(asinh, "dX = dY / sqrt(X^2 + 1) (gradient of asinh; float32, float64)", NULL, 0, NULL,
              r = g / sqrt(v * v + 1);)
UNARY_OP(acosh, "Y = acosh(X), NaN below 1 (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = acosh(v);)
UNARY_GRAD_OP(acosh, "dX = dY / sqrt(X^2 - 1) (gradient of acosh; float32, float64)", NULL, 0, NULL,
              r = g / sqrt(v * v - 1);)
UNARY_OP(atanh, "Y = atanh(X), NaN outside [-1, 1] (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL,
         r = atanh(v);)
UNARY_GRAD_OP(atanh, "dX = dY / (1 - X^2) (gradient of atanh; float32, float64)", NULL, 0, NULL,
              r = g / (1 - v * v);)
UNARY_OP_BUILT(reciprocal, "Y = 1 / X (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL,
               pardo_grad_from_output, r = 1 / v;)
UNARY_GRAD_OP_FROM_Y(reciprocal, "dX = -dY * Y^2 (gradient of reciprocal; float32, float64)", NULL, 0, NULL,
                     r = -g * w * w;)

/* ---- sign ---- */

static const pardo_arg_def x_in[] = {{"X", "input tensor", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "result, of X's dtype and shape", false, false}};
/* what cumsum takes: ONNX CumSum's float32, float64 and integers */
static const pardo_dtype cumsum_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_U32, PARDO_U64};
static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

static int same_type_infer(pardo_infer_ctx *ctx, const pardo_dtype *dts, int n) {
    int rc = pardo_expect_dtype(ctx->in[0], "input 0 'X'", dts, n, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

static int sign_infer(pardo_infer_ctx *ctx) {
    int rc = pardo_expect_ordered(ctx->in[0], "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

/* Defines NAME: y = sign(x) over n elements of type T (NaN stays: neither comparison holds), built for each
 * vector width; USIGN_KERNEL the unsigned types' (1 or 0); SIGN_HALF_KERNEL float16's and bfloat16's, compared as
 * the values they encode, 1 and -1 given as bits (ONE, MINUS_ONE), zeros and NaN kept as they are. */
#define SIGN_KERNEL(NAME, T)                                                                                           \
    PARDO_SIMD_CLONES static void NAME(const void *vx, void *vy, int64_t n) {                                          \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? (T)1 : x[i] < 0 ? (T)-1 : x[i];                              \
    }
#define USIGN_KERNEL(NAME, T)                                                                                          \
    PARDO_SIMD_CLONES static void NAME(const void *vx, void *vy, int64_t n) {                                          \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? (T)1 : (T)0;                                                 \
    }
#define SIGN_HALF_KERNEL(NAME, LOAD, ONE, MINUS_ONE)                                                                   \
    static void NAME(const void *vx, void *vy, int64_t n) {                                                            \
        const uint16_t *x = vx;                                                                                        \
        uint16_t *y = vy;                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const float v = LOAD(x[i]);                                                                                \
            y[i] = v > 0 ? (uint16_t)ONE : v < 0 ? (uint16_t)MINUS_ONE : x[i];                                         \
        }                                                                                                              \
    }

SIGN_KERNEL(sign_f32, float)
SIGN_KERNEL(sign_f64, double)
SIGN_KERNEL(sign_i8, int8_t)
SIGN_KERNEL(sign_i16, int16_t)
SIGN_KERNEL(sign_i32, int32_t)
SIGN_KERNEL(sign_i64, int64_t)
USIGN_KERNEL(sign_u8, uint8_t)
USIGN_KERNEL(sign_u16, uint16_t)
USIGN_KERNEL(sign_u32, uint32_t)
USIGN_KERNEL(sign_u64, uint64_t)
SIGN_HALF_KERNEL(sign_f16, pardo_f16_to_f32, 0x3C00, 0xBC00)
SIGN_HALF_KERNEL(sign_bf16, pardo_bf16_to_f32, 0x3F80, 0xBF80)

static int sign_cpu(pardo_kernel_ctx *ctx) {
    static void (*const kernels[PARDO_DTYPE_COUNT])(const void *, void *, int64_t) = PARDO_ORDERED_TABLE(sign);
    pardo_tensor *x = ctx->in[0];
    int rc = pardo_expect_ordered(&(pardo_type){.dtype = x->dtype}, "input 0 'X'", ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    kernels[x->dtype](pardo_tensor_data(x), pardo_tensor_data(y), x->numel);
    return PARDO_OK;
}

const pardo_op_def pardo_op_sign = {
    .type = "sign",
    .doc = "Y = 1, -1 or 0 by the sign of X; NaN stays NaN (every numeric dtype; no gradient)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .infer = sign_infer,
    .cpu = sign_cpu,
    .inplace = true,
    .all_dtypes = true,
};

/* ---- variadic max, min, sum, mean ---- */

enum { MAX_NARY = 64 }; /* inputs of one variadic op */

static const pardo_arg_def nary_in[] = {{"X", "one or more inputs of one dtype, broadcast like numpy", false, true}};
static const pardo_arg_def nary_out[] = {{"Y", "result, of the broadcast shape and the inputs' dtype", false, false}};
static const pardo_arg_def nary_grad_in[] = {
    {"X", "the forward inputs X_0..X_{k-1}, then the forward output Y, then dY (\"\": zeros)", true, true},
};
static const pardo_arg_def nary_grad_out[] = {{"dX", "gradient of each X_i, its dtype and shape", true, true}};

/* The types of n inputs: one dtype among the allowed, broadcast into *y. */
static int nary_types(int n, const pardo_type *const *x, const pardo_dtype *dts, int n_dts, pardo_type *y,
                      pardo_status *st) {
    if (n < 1 || n > MAX_NARY)
        return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected 1 to %d", n, MAX_NARY);
    for (int k = 0; k < n; k++)
        if (!x[k]) return pardo_errorf(st, PARDO_EINVAL, "input %d is absent, expected a tensor", k);
    int rc = pardo_expect_dtype(x[0], "input 0 'X'", dts, n_dts, st);
    if (rc != PARDO_OK) return rc;
    *y = *x[0];
    for (int k = 1; k < n; k++) {
        if (x[k]->dtype != x[0]->dtype)
            return pardo_errorf(st, PARDO_ESHAPE, "input %d has dtype %s, expected %s like input 0", k,
                                pardo_dtype_name(x[k]->dtype), pardo_dtype_name(x[0]->dtype));
        pardo_type b;
        if ((rc = pardo_broadcast_types(y, x[k], &b, st)) != PARDO_OK) return rc;
        *y = b;
    }
    y->dtype = x[0]->dtype;
    return PARDO_OK;
}

/* max and min: every numeric dtype; sum: all but the halves (whose sum would round at each step) */
static const pardo_dtype extreme_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_F16, PARDO_BF16, PARDO_I8,  PARDO_I16,
                                             PARDO_I32, PARDO_I64, PARDO_U8,  PARDO_U16,  PARDO_U32, PARDO_U64};
static const pardo_dtype sum_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I8,  PARDO_I16, PARDO_I32,
                                         PARDO_I64, PARDO_U8,  PARDO_U16, PARDO_U32, PARDO_U64};

static int max_infer(pardo_infer_ctx *ctx) {
    return nary_types(ctx->n_in, ctx->in, extreme_dtypes, 12, ctx->out, ctx->st);
}
static int sum_infer(pardo_infer_ctx *ctx) { return nary_types(ctx->n_in, ctx->in, sum_dtypes, 10, ctx->out, ctx->st); }
static int mean_infer(pardo_infer_ctx *ctx) {
    return nary_types(ctx->n_in, ctx->in, float_dtypes, 2, ctx->out, ctx->st);
}

/* The run-time broadcast of n input tensors: the output shape and each input's strides along it. */
typedef struct nary_plan {
    int n, nd;
    int64_t shape[PARDO_MAX_DIMS];
    int64_t numel;
    int64_t s[MAX_NARY][PARDO_MAX_DIMS];
} nary_plan;

static int nary_plan_make(int n, pardo_tensor *const *x, nary_plan *p, pardo_status *st) {
    pardo_type t[MAX_NARY], y;
    const pardo_type *pt[MAX_NARY];
    if (n < 1 || n > MAX_NARY) return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected 1 to %d", n, MAX_NARY);
    for (int k = 0; k < n; k++) {
        if (!x[k]) return pardo_errorf(st, PARDO_EINVAL, "input %d is absent, expected a tensor", k);
        t[k] = pardo_tensor_type(x[k]);
        pt[k] = &t[k];
    }
    int rc = nary_types(n, pt, extreme_dtypes, 12, &y, st);
    if (rc != PARDO_OK) return rc;
    p->n = n;
    p->nd = y.ndim;
    memcpy(p->shape, y.shape, sizeof(int64_t) * (size_t)y.ndim);
    p->numel = pardo_shape_numel(y.ndim, y.shape);
    for (int k = 0; k < n; k++) pardo_index_bcast_strides(p->nd, p->shape, x[k]->ndim, x[k]->shape, p->s[k]);
    return PARDO_OK;
}

/* Walks p's output in row-major order keeping every input's offset. */
typedef struct nary_walk {
    int64_t idx[PARDO_MAX_DIMS];
    int64_t off[MAX_NARY];
} nary_walk;

static void nary_walk_next(const nary_plan *p, nary_walk *w) {
    for (int d = p->nd - 1; d >= 0; d--) {
        if (++w->idx[d] < p->shape[d]) {
            for (int k = 0; k < p->n; k++) w->off[k] += p->s[k][d];
            return;
        }
        w->idx[d] = 0;
        for (int k = 0; k < p->n; k++) w->off[k] -= p->s[k][d] * (p->shape[d] - 1);
    }
}

typedef enum nary_kind { N_MAX, N_MIN, N_SUM, N_MEAN } nary_kind;

/* b beats a for max (min): greater (less), or the first NaN. */
#define BEATS_F(kind, b, a) (((kind) == N_MAX ? (b) > (a) : (b) < (a)) || (isnan(b) && !isnan(a)))
#define BEATS_I(kind, b, a) ((kind) == N_MAX ? (b) > (a) : (b) < (a))
/* float16 and bfloat16 (T uint16_t, their bits): compared as the values they encode; the winner's bits are kept,
 * so nothing rounds. */
#define BEATS_H(kind, b, a) BEATS_F(kind, pardo_f16_to_f32(b), pardo_f16_to_f32(a))
#define BEATS_B(kind, b, a) BEATS_F(kind, pardo_bf16_to_f32(b), pardo_bf16_to_f32(a))

/* Defines NAME: Y over p of inputs of type T; sums in T (ints through U, wrapping), in input order
 * like numpy's x0 + x1 + ...; the first input wins ties and NaN beats every number. */
#define NARY_KERNEL(NAME, T, U, BEATS)                                                                                 \
    static void NAME(const nary_plan *p, nary_kind kind, const void *const *vx, void *vy) {                            \
        T *y = vy;                                                                                                     \
        nary_walk w;                                                                                                   \
        memset(&w, 0, sizeof w);                                                                                       \
        for (int64_t e = 0; e < p->numel; e++, nary_walk_next(p, &w)) {                                                \
            T acc = ((const T *)vx[0])[w.off[0]];                                                                      \
            for (int k = 1; k < p->n; k++) {                                                                           \
                const T v = ((const T *)vx[k])[w.off[k]];                                                              \
                if (kind == N_SUM || kind == N_MEAN) acc = (T)((U)acc + (U)v);                                         \
                else if (BEATS(kind, v, acc)) acc = v;                                                                 \
            }                                                                                                          \
            y[e] = kind == N_MEAN ? (T)(acc / (T)p->n) : acc;                                                          \
        }                                                                                                              \
    }

/* One kernel per dtype, by DEF(NAME, T, U, BEATS); the 8- and 16-bit ints sum through uint32_t (not promoted to
 * int); the halves' U is unused (they are not summed). */
#define NARY_EACH_DTYPE(DEF, P)                                                                                        \
    DEF(P##_f32, float, float, BEATS_F)                                                                                \
    DEF(P##_f64, double, double, BEATS_F)                                                                              \
    DEF(P##_i32, int32_t, uint32_t, BEATS_I)                                                                           \
    DEF(P##_i64, int64_t, uint64_t, BEATS_I)                                                                           \
    DEF(P##_u8, uint8_t, uint32_t, BEATS_I)                                                                            \
    DEF(P##_i8, int8_t, uint32_t, BEATS_I)                                                                             \
    DEF(P##_i16, int16_t, uint32_t, BEATS_I)                                                                           \
    DEF(P##_u16, uint16_t, uint32_t, BEATS_I)                                                                          \
    DEF(P##_u32, uint32_t, uint32_t, BEATS_I)                                                                          \
    DEF(P##_u64, uint64_t, uint64_t, BEATS_I)                                                                          \
    DEF(P##_f16, uint16_t, uint16_t, BEATS_H)                                                                          \
    DEF(P##_bf16, uint16_t, uint16_t, BEATS_B)
#define NARY_TABLE(P)                                                                                                  \
    {[PARDO_F32] = P##_f32, [PARDO_F64] = P##_f64, [PARDO_I32] = P##_i32, [PARDO_I64] = P##_i64,                       \
     [PARDO_U8] = P##_u8,   [PARDO_I8] = P##_i8,   [PARDO_I16] = P##_i16, [PARDO_U16] = P##_u16,                       \
     [PARDO_U32] = P##_u32, [PARDO_U64] = P##_u64, [PARDO_F16] = P##_f16, [PARDO_BF16] = P##_bf16}

NARY_EACH_DTYPE(NARY_KERNEL, nary)
typedef void (*nary_fn)(const nary_plan *p, nary_kind kind, const void *const *vx, void *vy);
static const nary_fn nary_kernels[PARDO_DTYPE_COUNT] = NARY_TABLE(nary);

/* The fast path where every input has the output's shape: one contiguous pass per input over y, built for
 * each vector width (PARDO_SIMD_CLONES) like the binary elementwise kernels; the same folds, in the same order,
 * as NARY_KERNEL. */
#define NARY_SAME_KERNEL(NAME, T, U, BEATS)                                                                            \
    PARDO_SIMD_CLONES static void NAME(int n, nary_kind kind, const void *const *vx, void *vy, int64_t e0,             \
                                       int64_t e1) {                                                                   \
        T *y = vy;                                                                                                     \
        const T *x0 = vx[0];                                                                                           \
        for (int64_t i = e0; i < e1; i++) y[i] = x0[i];                                                                \
        for (int k = 1; k < n; k++) {                                                                                  \
            const T *xk = vx[k];                                                                                       \
            if (kind == N_SUM || kind == N_MEAN)                                                                       \
                for (int64_t i = e0; i < e1; i++) y[i] = (T)((U)y[i] + (U)xk[i]);                                      \
            else if (kind == N_MAX)                                                                                    \
                for (int64_t i = e0; i < e1; i++) y[i] = BEATS(N_MAX, xk[i], y[i]) ? xk[i] : y[i];                     \
            else                                                                                                       \
                for (int64_t i = e0; i < e1; i++) y[i] = BEATS(N_MIN, xk[i], y[i]) ? xk[i] : y[i];                     \
        }                                                                                                              \
        if (kind == N_MEAN)                                                                                            \
            for (int64_t i = e0; i < e1; i++) y[i] = (T)(y[i] / (T)n);                                                 \
    }

NARY_EACH_DTYPE(NARY_SAME_KERNEL, nary_same)
typedef void (*nary_same_fn)(int n, nary_kind kind, const void *const *vx, void *vy, int64_t e0, int64_t e1);
static const nary_same_fn nary_same_kernels[PARDO_DTYPE_COUNT] = NARY_TABLE(nary_same);

typedef struct nary_same_job {
    void (*fn)(int n, nary_kind kind, const void *const *vx, void *vy, int64_t e0, int64_t e1);
    int n;
    nary_kind kind;
    const void *const *x;
    void *y;
} nary_same_job;

static void nary_same_range(void *arg, int64_t e0, int64_t e1) {
    const nary_same_job *j = arg;
    j->fn(j->n, j->kind, j->x, j->y, e0, e1);
}

static int nary_run(pardo_kernel_ctx *ctx, nary_kind kind) {
    nary_plan p;
    int rc = nary_plan_make(ctx->n_in, ctx->in, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    const pardo_dtype dt = ctx->in[0]->dtype;
    if ((kind == N_MEAN && !pardo_dtype_is_float(dt)) || (kind == N_SUM && pardo_dtype_is_half(dt)))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs have dtype %s, which %s does not take",
                            pardo_dtype_name(dt), kind == N_SUM ? "sum" : "mean");
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, p.nd, p.shape);
    if (!y) return ctx->st->code;
    const void *xs[MAX_NARY];
    for (int k = 0; k < p.n; k++) xs[k] = pardo_tensor_data(ctx->in[k]);
    if (p.numel == 0) return PARDO_OK;
    bool same = true;
    for (int k = 0; k < p.n && same; k++)
        same = pardo_shape_equal(ctx->in[k]->ndim, ctx->in[k]->shape, p.nd, p.shape);
    if (same) {
        nary_same_job j = {nary_same_kernels[dt], p.n, kind, xs, pardo_tensor_data(y)};
        return pardo_run_chunks(ctx, p.numel, nary_same_range, &j);
    }
    nary_kernels[dt](&p, kind, xs, pardo_tensor_data(y));
    return PARDO_OK;
}

static int max_cpu(pardo_kernel_ctx *ctx) { return nary_run(ctx, N_MAX); }
static int min_cpu(pardo_kernel_ctx *ctx) { return nary_run(ctx, N_MIN); }
static int sum_cpu(pardo_kernel_ctx *ctx) { return nary_run(ctx, N_SUM); }
static int mean_cpu(pardo_kernel_ctx *ctx) { return nary_run(ctx, N_MEAN); }

#define NARY_OP(NAME, INFER, ALL, DOC)                                                                                 \
    const pardo_op_def pardo_op_##NAME = {                                                                             \
        .type = #NAME,                                                                                                 \
        .doc = DOC,                                                                                                    \
        .inputs = nary_in,                                                                                             \
        .n_inputs = 1,                                                                                                 \
        .outputs = nary_out,                                                                                           \
        .n_outputs = 1,                                                                                                \
        .infer = INFER,                                                                                                \
        .cpu = NAME##_cpu,                                                                                             \
        .grad = pardo_grad_standard,                                                                                   \
        .all_dtypes = ALL,                                                                                             \
    };

NARY_OP(max, max_infer, true,
        "Y = elementwise max of the inputs, broadcast like numpy, like ONNX Max; NaN wins (every numeric dtype; "
        "gradient: float32, float64, to the first input holding the max)")
NARY_OP(min, max_infer, true,
        "Y = elementwise min of the inputs, broadcast like numpy, like ONNX Min; NaN wins (every numeric dtype; "
        "gradient: float32, float64, to the first input holding the min)")
NARY_OP(sum, sum_infer, true,
        "Y = elementwise sum of the inputs, broadcast like numpy, like ONNX Sum (float32, float64 and the ints, "
        "wrapping; gradient: floats)")
NARY_OP(mean, mean_infer, false,
        "Y = elementwise mean of the inputs, broadcast like numpy, like ONNX Mean (float32, float64)")

/* ---- their gradients: inputs X_0..X_{k-1}, Y, dY; outputs dX_0..dX_{k-1} ---- */

static int nary_grad_infer(pardo_infer_ctx *ctx) {
    const int k = ctx->n_in - 2;
    if (k < 1 || ctx->n_out > k)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs and %d outputs, expected k forward inputs, Y and dY "
                            "in and at most k outputs (k >= 1)", ctx->n_in, ctx->n_out);
    pardo_type y;
    int rc = nary_types(k, ctx->in, float_dtypes, 2, &y, ctx->st);
    for (int i = 0; rc == PARDO_OK && i < ctx->n_out; i++) ctx->out[i] = *ctx->in[i];
    const pardo_type *dy = ctx->in[k + 1];
    if (rc == PARDO_OK && dy && dy->dtype != y.dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'dY' has dtype %s, expected %s like the inputs", k + 1,
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(y.dtype));
    return rc;
}

/* Defines NAME: dY at each output element added to the dX of the first input holding the extreme there
 * (dx[k] NULL: not wanted); the dX are zeroed before. */
#define EXTREME_GRAD_KERNEL(NAME, T)                                                                                   \
    static void NAME(const nary_plan *p, nary_kind kind, const void *const *vx, const T *dy, T *const *dx) {           \
        nary_walk w;                                                                                                   \
        memset(&w, 0, sizeof w);                                                                                       \
        for (int64_t e = 0; e < p->numel; e++, nary_walk_next(p, &w)) {                                                \
            int best = 0;                                                                                              \
            T acc = ((const T *)vx[0])[w.off[0]];                                                                      \
            for (int k = 1; k < p->n; k++) {                                                                           \
                const T v = ((const T *)vx[k])[w.off[k]];                                                              \
                if (BEATS_F(kind, v, acc)) {                                                                           \
                    acc = v;                                                                                           \
                    best = k;                                                                                          \
                }                                                                                                      \
            }                                                                                                          \
            if (dx[best]) dx[best][w.off[best]] += dy[e];                                                              \
        }                                                                                                              \
    }

EXTREME_GRAD_KERNEL(extreme_grad_f32, float)
EXTREME_GRAD_KERNEL(extreme_grad_f64, double)

static int nary_grad_run(pardo_kernel_ctx *ctx, nary_kind kind) {
    const int k = ctx->n_in - 2;
    if (k < 1 || ctx->n_out > k)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "has %d inputs and %d outputs, expected k forward inputs, Y and dY "
                            "in and at most k outputs (k >= 1)", ctx->n_in, ctx->n_out);
    nary_plan p;
    int rc = nary_plan_make(k, ctx->in, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    const pardo_dtype dt = ctx->in[0]->dtype;
    pardo_tensor *dy = ctx->in[k + 1];
    if (!pardo_dtype_is_float(dt))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "inputs are %s, which has no gradient", pardo_dtype_name(dt));
    if (dy && (dy->dtype != dt || !pardo_shape_equal(dy->ndim, dy->shape, p.nd, p.shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d 'dY' is %s %s, expected %s %s like Y", k + 1,
                            pardo_dtype_name(dy->dtype), pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            pardo_dtype_name(dt), pardo_shape_str(p.nd, p.shape, s2, sizeof s2));
    }
    void *dx[MAX_NARY];
    const void *xs[MAX_NARY];
    for (int i = 0; i < k; i++) {
        dx[i] = NULL;
        xs[i] = pardo_tensor_data(ctx->in[i]);
        if (i >= ctx->n_out || !pardo_kernel_wants_output(ctx, i)) continue;
        pardo_tensor *x = ctx->in[i], *d = pardo_kernel_output(ctx, i, dt, x->ndim, x->shape);
        if (!d) return ctx->st->code;
        if (!dy || kind == N_MAX || kind == N_MIN) pardo_tensor_zero(d);
        else if ((rc = pardo_sum_to_shape(dt, pardo_tensor_data(dy), p.nd, p.shape, pardo_tensor_data(d), x->ndim,
                                          x->shape, kind == N_MEAN ? 1.0 / k : 1.0, ctx->st)) != PARDO_OK)
            return rc;
        dx[i] = pardo_tensor_data(d);
    }
    if (!dy || p.numel == 0 || kind == N_SUM || kind == N_MEAN) return PARDO_OK;
    if (dt == PARDO_F32) extreme_grad_f32(&p, kind, xs, pardo_tensor_data(dy), (float *const *)dx);
    else extreme_grad_f64(&p, kind, xs, pardo_tensor_data(dy), (double *const *)dx);
    return PARDO_OK;
}

#define NARY_GRAD_OP(NAME, KIND, DOC)                                                                                  \
    static int NAME##_grad_cpu(pardo_kernel_ctx *ctx) { return nary_grad_run(ctx, KIND); }                             \
    const pardo_op_def pardo_op_##NAME##_grad = {                                                                      \
        .type = #NAME "_grad",                                                                                         \
        .doc = DOC,                                                                                                    \
        .inputs = nary_grad_in,                                                                                        \
        .n_inputs = 1,                                                                                                 \
        .outputs = nary_grad_out,                                                                                      \
        .n_outputs = 1,                                                                                                \
        .infer = nary_grad_infer,                                                                                      \
        .cpu = NAME##_grad_cpu,                                                                                        \
    };

NARY_GRAD_OP(max, N_MAX, "dX_i = dY where X_i is the first input holding the max, summed to X_i's shape (gradient of "
                         "max; float32, float64)")
NARY_GRAD_OP(min, N_MIN, "dX_i = dY where X_i is the first input holding the min, summed to X_i's shape (gradient of "
                         "min; float32, float64)")
NARY_GRAD_OP(sum, N_SUM, "dX_i = dY summed to X_i's shape (gradient of sum; float32, float64)")
NARY_GRAD_OP(mean, N_MEAN, "dX_i = dY / k summed to X_i's shape (gradient of mean; float32, float64)")

/* ---- mod ---- */

static const pardo_arg_def ab_in[] = {
    {"A", "dividend", false, false},
    {"B", "divisor, broadcast against A like numpy", false, false},
};
static const pardo_arg_def c_out[] = {{"C", "remainder, of the broadcast shape and A's dtype", false, false}};
static const pardo_attr_def mod_attrs[] = {
    {"fmod", PARDO_ATTR_INT, "0", "0: the remainder takes the divisor's sign (Python); 1: the dividend's (C fmod); "
                                  "floats need 1"},
};

static int mod_fmod(const pardo_op *op, pardo_dtype dt, bool *fmod_out, pardo_status *st) {
    int64_t f;
    int rc = pardo_attr_int(op, "fmod", 0, &f, st);
    if (rc != PARDO_OK) return rc;
    if (f != 0 && f != 1) return pardo_errorf(st, PARDO_EINVAL, "attr 'fmod' is %lld, expected 0 or 1", (long long)f);
    if (f == 0 && (pardo_dtype_is_float(dt) || pardo_dtype_is_half(dt)))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'fmod' is 0 with %s inputs, expected 1 for floats (ONNX Mod)",
                            pardo_dtype_name(dt));
    *fmod_out = f != 0;
    return PARDO_OK;
}

static int mod_infer(pardo_infer_ctx *ctx) {
    const pardo_type *a = ctx->in[0], *b = ctx->in[1];
    bool f;
    int rc = pardo_expect_dtype(a, "input 0 'A'", extreme_dtypes, 12, ctx->st);
    if (rc == PARDO_OK) rc = mod_fmod(ctx->op, a->dtype, &f, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (b->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'B' has dtype %s, expected %s like input 0 'A'",
                            pardo_dtype_name(b->dtype), pardo_dtype_name(a->dtype));
    if ((rc = pardo_broadcast_types(a, b, &ctx->out[0], ctx->st)) != PARDO_OK) return rc;
    ctx->out[0].dtype = a->dtype;
    return PARDO_OK;
}

/* Integer remainder with C's sign (fm) or the divisor's; b != 0 is checked before, and b == -1 gives 0
 * (INT_MIN % -1 is undefined in C). */
static inline int64_t mod_int(int64_t a, int64_t b, bool fm) {
    if (b == -1) return 0;
    int64_t r = a % b;
    if (!fm && r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
}
#define MOD_I(T, a, b, fm) ((T)mod_int(a, b, fm))
#define MOD_F(T, a, b, fm) ((void)(fm), (T)fmod(a, b))
/* unsigned: both signs agree */
#define MOD_U(T, a, b, fm) ((void)(fm), (T)((a) % (b)))
/* float16, bfloat16 (T uint16_t): fmod is exact, so the remainder of the decoded values encodes back as it is */
#define MOD_H(T, a, b, fm) ((void)(fm), pardo_f16_from_f32(fmodf(pardo_f16_to_f32(a), pardo_f16_to_f32(b))))
#define MOD_B(T, a, b, fm) ((void)(fm), pardo_bf16_from_f32(fmodf(pardo_bf16_to_f32(a), pardo_bf16_to_f32(b))))

#define MOD_KERNEL(NAME, T, OP) PARDO_BCAST2_FLAG_KERNEL(NAME, T, OP)

MOD_KERNEL(mod_f32, float, MOD_F)
MOD_KERNEL(mod_f64, double, MOD_F)
MOD_KERNEL(mod_i32, int32_t, MOD_I)
MOD_KERNEL(mod_i64, int64_t, MOD_I)
MOD_KERNEL(mod_i8, int8_t, MOD_I)
MOD_KERNEL(mod_i16, int16_t, MOD_I)
MOD_KERNEL(mod_u8, uint8_t, MOD_U)
MOD_KERNEL(mod_u16, uint16_t, MOD_U)
MOD_KERNEL(mod_u32, uint32_t, MOD_U)
MOD_KERNEL(mod_u64, uint64_t, MOD_U)
MOD_KERNEL(mod_f16, uint16_t, MOD_H)
MOD_KERNEL(mod_bf16, uint16_t, MOD_B)
typedef void (*mod_fn)(const pardo_bcast2 *p, bool fm, const void *va, const void *vb, void *vy);
static const mod_fn mod_kernels[PARDO_DTYPE_COUNT] = {
    [PARDO_F32] = mod_f32, [PARDO_F64] = mod_f64, [PARDO_I32] = mod_i32, [PARDO_I64] = mod_i64,
    [PARDO_U8] = mod_u8,   [PARDO_I8] = mod_i8,   [PARDO_I16] = mod_i16, [PARDO_U16] = mod_u16,
    [PARDO_U32] = mod_u32, [PARDO_U64] = mod_u64, [PARDO_F16] = mod_f16, [PARDO_BF16] = mod_bf16};

static int mod_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    if (a->dtype != b->dtype || a->dtype < 0 || a->dtype >= PARDO_DTYPE_COUNT || !mod_kernels[a->dtype])
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs have dtypes %s and %s, expected the same numeric dtype",
                            pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    bool fm;
    int rc = mod_fmod(ctx->op, a->dtype, &fm, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_bcast2 plan;
    if ((rc = pardo_bcast2_plan(a->ndim, a->shape, b->ndim, b->shape, &plan, ctx->st)) != PARDO_OK) return rc;
    if (pardo_dtype_is_integer(a->dtype) && plan.numel > 0)
        for (int64_t i = 0; i < b->numel; i++)
            if (pardo_tensor_get_f64(b, i) == 0)
                return pardo_errorf(ctx->st, PARDO_ERUNTIME, "integer mod by zero: input 1 'B' element %lld is 0",
                                    (long long)i);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, a->dtype, plan.ndim, plan.shape);
    if (!y) return ctx->st->code;
    if (plan.numel == 0) return PARDO_OK;
    const void *pa = pardo_tensor_data(a), *pb = pardo_tensor_data(b);
    void *py = pardo_tensor_data(y);
    mod_kernels[a->dtype](&plan, fm, pa, pb, py);
    return PARDO_OK;
}

const pardo_op_def pardo_op_mod = {
    .type = "mod",
    .doc = "C = A mod B, broadcasting like numpy, like ONNX Mod: fmod 0 the divisor's sign, fmod 1 C's fmod (the "
           "floats with fmod 1, float16 and bfloat16 exact through float32; the ints, a zero divisor an error; no "
           "gradient)",
    .inputs = ab_in,
    .n_inputs = 2,
    .outputs = c_out,
    .n_outputs = 1,
    .attrs = mod_attrs,
    .n_attrs = 1,
    .infer = mod_infer,
    .cpu = mod_cpu,
    .all_dtypes = true,
};

/* ---- cumsum ---- */

static const pardo_arg_def cumsum_in[] = {
    {"X", "input tensor", false, false},
    {"axis", "int32 or int64 scalar, the axis (read at run time; \"\": attr axis)", true, false},
};
static const pardo_attr_def cumsum_attrs[] = {
    {"axis", PARDO_ATTR_INT, "0", "axis to sum along, negative from the end, when input 'axis' is absent"},
    {"exclusive", PARDO_ATTR_BOOL, "false", "each sum leaves out its own element"},
    {"reverse", PARDO_ATTR_BOOL, "false", "sum from the end of the axis"},
};
static const pardo_arg_def cumsum_grad_in[] = {
    {"X", "the forward input", false, false},
    {"axis", "the forward input axis (or \"\")", true, false},
    {"Y", "the forward output (unused; may be \"\")", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def cumsum_grad_out[] = {
    {"dX", "gradient of X: the cumsum of dY the other way", true, false},
    {"daxis", "never computed (must be \"\")", true, false},
};

static int cumsum_flags(const pardo_op *op, bool *excl, bool *rev, pardo_status *st) {
    int rc = pardo_attr_bool(op, "exclusive", false, excl, st);
    return rc == PARDO_OK ? pardo_attr_bool(op, "reverse", false, rev, st) : rc;
}

static int cumsum_infer(pardo_infer_ctx *ctx) {
    bool e, r;
    int64_t a;
    int rc = cumsum_flags(ctx->op, &e, &r, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_int(ctx->op, "axis", 0, &a, ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(ctx->in[0], "input 0 'X'", cumsum_dtypes, 6, ctx->st);
    if (rc == PARDO_OK && ctx->n_in > 1 && ctx->in[1]) {
        int len;
        rc = pardo_index_expect_list(ctx->in[1], "input 1 'axis'", &len, ctx->st);
        if (rc == PARDO_OK && len > 1)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'axis' has %d elements, expected one", len);
    }
    if (rc == PARDO_OK && ctx->in[0]->ndim == 0)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is a scalar, expected rank >= 1");
    if (rc == PARDO_OK && ctx->in[0]->ndim > 0 && !(ctx->n_in > 1 && ctx->in[1])) {
        int ax;
        rc = pardo_normalize_axis(a, ctx->in[0]->ndim, "axis", &ax, ctx->st);
    }
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

/* The axis of a run: input 'axis' (a one-element int tensor) or the attr, normalised against rank nd. */
static int cumsum_axis(const pardo_kernel_ctx *ctx, const pardo_tensor *axis_t, int nd, int *axis) {
    int64_t a[2];
    int n = 1;
    int rc;
    if (axis_t) {
        rc = pardo_index_read_ints(axis_t, "input 1 'axis'", a, 2, &n, ctx->st);
        if (rc == PARDO_OK && n != 1)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'axis' has %d elements, expected one", n);
    } else {
        rc = pardo_attr_int(ctx->op, "axis", 0, &a[0], ctx->st);
    }
    return rc == PARDO_OK ? pardo_normalize_axis(a[0], nd, "axis", axis, ctx->st) : rc;
}

/* Defines NAME: y = cumsum of x (type T, viewed [outer, n, inner]) along the middle dim; floats sum in
 * double, ints in U wrapping. */
#define CUMSUM_KERNEL(NAME, T, ACC)                                                                                    \
    static void NAME(const void *vx, void *vy, int64_t outer, int64_t n, int64_t inner, bool excl, bool rev) {         \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        for (int64_t o = 0; o < outer; o++)                                                                            \
            for (int64_t i = 0; i < inner; i++) {                                                                      \
                ACC acc = 0;                                                                                           \
                for (int64_t j = 0; j < n; j++) {                                                                      \
                    const int64_t k = rev ? n - 1 - j : j, at = (o * n + k) * inner + i;                               \
                    const T v = x[at];                                                                                 \
                    if (!excl) acc += (ACC)v;                                                                          \
                    y[at] = (T)acc;                                                                                    \
                    if (excl) acc += (ACC)v;                                                                           \
                }                                                                                                      \
            }                                                                                                          \
    }

CUMSUM_KERNEL(cumsum_f32, float, double)
CUMSUM_KERNEL(cumsum_f64, double, double)
CUMSUM_KERNEL(cumsum_i32, int32_t, uint32_t)
CUMSUM_KERNEL(cumsum_i64, int64_t, uint64_t)
CUMSUM_KERNEL(cumsum_u32, uint32_t, uint32_t)
CUMSUM_KERNEL(cumsum_u64, uint64_t, uint64_t)

/* y = cumsum(x) along input-or-attr axis; the gradient runs it with `reverse` flipped. */
static int cumsum_apply(pardo_kernel_ctx *ctx, const pardo_tensor *x, const pardo_tensor *axis_t, pardo_tensor *y,
                        bool flip) {
    bool excl, rev;
    int axis;
    int rc = cumsum_flags(ctx->op, &excl, &rev, ctx->st);
    if (rc == PARDO_OK) rc = cumsum_axis(ctx, axis_t, x->ndim, &axis);
    if (rc != PARDO_OK) return rc;
    int64_t outer = 1, inner = 1, n = x->shape[axis];
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    if (x->numel == 0) return PARDO_OK;
    rev ^= flip;
    const void *px = pardo_tensor_data((pardo_tensor *)x);
    void *py = pardo_tensor_data(y);
    switch (x->dtype) {
    case PARDO_F32: cumsum_f32(px, py, outer, n, inner, excl, rev); break;
    case PARDO_F64: cumsum_f64(px, py, outer, n, inner, excl, rev); break;
    case PARDO_I32: cumsum_i32(px, py, outer, n, inner, excl, rev); break;
    case PARDO_I64: cumsum_i64(px, py, outer, n, inner, excl, rev); break;
    case PARDO_U32: cumsum_u32(px, py, outer, n, inner, excl, rev); break;
    default: cumsum_u64(px, py, outer, n, inner, excl, rev); break;
    }
    return PARDO_OK;
}

static int cumsum_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *axis_t = ctx->n_in > 1 ? ctx->in[1] : NULL;
    char s[128];
    if (!pardo_dtype_listed(x->dtype, cumsum_dtypes, 6) || x->ndim < 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is %s %s, expected float32, float64, int32, int64, "
                            "uint32 or uint64 of rank >= 1", pardo_dtype_name(x->dtype),
                            pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    return y ? cumsum_apply(ctx, x, axis_t, y, false) : ctx->st->code;
}

/* cumsum_grad reads neither Y nor the axis's values' gradient: Y left out. */
static int cumsum_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired_n(req, blk, 0, 1, 2, st);
}

const pardo_op_def pardo_op_cumsum = {
    .type = "cumsum",
    .doc = "Y = cumulative sum of X along axis, like ONNX CumSum (exclusive, reverse; float32, float64, int32, int64, "
           "uint32, uint64 wrapping; gradient: floats)",
    .inputs = cumsum_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = cumsum_attrs,
    .n_attrs = 3,
    .infer = cumsum_infer,
    .cpu = cumsum_cpu,
    .halves_in_f32 = true,
    .all_dtypes = true, /* uint32, uint64 */
    .grad = cumsum_grad_build,
};

static int cumsum_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL;
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK && dy && dy->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' has dtype %s, expected %s like input 0 'X'",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(x->dtype));
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    if (ctx->n_out > 1) ctx->out[1] = ctx->in[1] ? *ctx->in[1] : *x;
    return PARDO_OK;
}

static int cumsum_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *axis_t = ctx->in[1], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL;
    if (ctx->n_out > 1 && pardo_kernel_wants_output(ctx, 1))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "output 1 'daxis' must be \"\": the axis has no gradient");
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_dtype_is_float(x->dtype) || x->ndim < 1 ||
        (dy && (dy->dtype != x->dtype || !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, x->shape))))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs 'X' and 'dY' must be float32 or float64 of one shape, rank "
                            ">= 1");
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) {
        pardo_tensor_zero(dx);
        return PARDO_OK;
    }
    return cumsum_apply(ctx, dy, axis_t, dx, true);
}

const pardo_op_def pardo_op_cumsum_grad = {
    .type = "cumsum_grad",
    .doc = "dX = cumsum of dY along axis the other way, exclusive as the forward (gradient of cumsum; float32, "
           "float64)",
    .inputs = cumsum_grad_in,
    .n_inputs = 4,
    .outputs = cumsum_grad_out,
    .n_outputs = 2,
    .attrs = cumsum_attrs,
    .n_attrs = 3,
    .infer = cumsum_grad_infer,
    .cpu = cumsum_grad_cpu,
};

/* ---- hardmax ---- */

static const pardo_attr_def hardmax_attrs[] = {
    {"axis", PARDO_ATTR_INT, "-1", "axis to search, negative from the end"},
};

static int hardmax_infer(pardo_infer_ctx *ctx) {
    int64_t a;
    int ax;
    int rc = pardo_attr_int(ctx->op, "axis", -1, &a, ctx->st);
    if (rc == PARDO_OK) rc = same_type_infer(ctx, float_dtypes, 2);
    if (rc == PARDO_OK && ctx->in[0]->ndim == 0)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is a scalar, expected rank >= 1");
    if (rc == PARDO_OK && ctx->in[0]->ndim > 0) rc = pardo_normalize_axis(a, ctx->in[0]->ndim, "axis", &ax, ctx->st);
    return rc;
}

#define HARDMAX_KERNEL(NAME, T)                                                                                        \
    static void NAME(const T *x, T *y, int64_t outer, int64_t n, int64_t inner) {                                      \
        for (int64_t o = 0; o < outer; o++)                                                                            \
            for (int64_t i = 0; i < inner; i++) {                                                                      \
                const T *px = x + o * n * inner + i;                                                                   \
                T *py = y + o * n * inner + i;                                                                         \
                int64_t best = 0;                                                                                      \
                for (int64_t k = 1; k < n; k++)                                                                        \
                    if (px[k * inner] > px[best * inner] || (isnan(px[k * inner]) && !isnan(px[best * inner])))       \
                        best = k;                                                                                      \
                for (int64_t k = 0; k < n; k++) py[k * inner] = k == best ? (T)1 : (T)0;                               \
            }                                                                                                          \
    }

HARDMAX_KERNEL(hardmax_f32, float)
HARDMAX_KERNEL(hardmax_f64, double)

static int hardmax_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    int64_t a;
    int axis;
    char s[128];
    if (!pardo_dtype_is_float(x->dtype) || x->ndim < 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is %s %s, expected float32 or float64 of rank >= 1",
                            pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    int rc = pardo_attr_int(ctx->op, "axis", -1, &a, ctx->st);
    if (rc == PARDO_OK) rc = pardo_normalize_axis(a, x->ndim, "axis", &axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    int64_t outer = 1, inner = 1, n = x->shape[axis];
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    if (x->numel == 0) return PARDO_OK;
    if (x->dtype == PARDO_F32) hardmax_f32(pardo_tensor_data(x), pardo_tensor_data(y), outer, n, inner);
    else hardmax_f64(pardo_tensor_data(x), pardo_tensor_data(y), outer, n, inner);
    return PARDO_OK;
}

const pardo_op_def pardo_op_hardmax = {
    .type = "hardmax",
    .doc = "Y = 1 at the first max of X along axis, 0 elsewhere, like ONNX Hardmax (opset 13); NaN wins (float32, "
           "float64; no gradient)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = hardmax_attrs,
    .n_attrs = 1,
    .infer = hardmax_infer,
    .cpu = hardmax_cpu,
    .halves_in_f32 = true,
};

/* ---- det ---- */

enum { DET_MAX = 64 }; /* largest matrix side: the LU works on a stack copy */

static const pardo_arg_def det_out[] = {{"Y", "the determinants, X's dims but the last two", false, false}};

static int det_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    char s[128];
    int rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (x->ndim < 0) {
        ctx->out[0] = *x;
        ctx->out[0].ndim = -1;
        return PARDO_OK;
    }
    if (x->ndim < 2 || (x->shape[x->ndim - 1] >= 0 && x->shape[x->ndim - 2] >= 0 &&
                        x->shape[x->ndim - 1] != x->shape[x->ndim - 2]))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has shape %s, expected [..., M, M]",
                            pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    if (x->shape[x->ndim - 1] > DET_MAX)
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'X' has %lld x %lld matrices; det takes at most %d x %d",
                            (long long)x->shape[x->ndim - 1], (long long)x->shape[x->ndim - 1], DET_MAX, DET_MAX);
    ctx->out[0] = *x;
    ctx->out[0].ndim = x->ndim - 2;
    return PARDO_OK;
}

/* The determinant of the m x m row-major matrix a (overwritten: its LU factors), partial pivoting. */
static double det_lu(double *a, int m) {
    double det = 1;
    for (int c = 0; c < m; c++) {
        int piv = c;
        for (int r = c + 1; r < m; r++)
            if (fabs(a[r * m + c]) > fabs(a[piv * m + c])) piv = r;
        if (a[piv * m + c] == 0) return 0;
        if (piv != c) {
            for (int k = 0; k < m; k++) {
                const double t = a[c * m + k];
                a[c * m + k] = a[piv * m + k];
                a[piv * m + k] = t;
            }
            det = -det;
        }
        const double d = a[c * m + c];
        det *= d;
        for (int r = c + 1; r < m; r++) {
            const double f = a[r * m + c] / d;
            for (int k = c + 1; k < m; k++) a[r * m + k] -= f * a[c * m + k];
        }
    }
    return det;
}

static int det_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    char s[128];
    if (!pardo_dtype_is_float(x->dtype) || x->ndim < 2 || x->shape[x->ndim - 1] != x->shape[x->ndim - 2] ||
        x->shape[x->ndim - 1] > DET_MAX)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is %s %s, expected float32 or float64 [..., M, M] with "
                            "M <= %d", pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, s, sizeof s),
                            DET_MAX);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim - 2, x->shape);
    if (!y) return ctx->st->code;
    const int m = (int)x->shape[x->ndim - 1];
    double a[DET_MAX * DET_MAX];
    for (int64_t b = 0; b < y->numel; b++) {
        for (int64_t i = 0; i < (int64_t)m * m; i++) a[i] = pardo_tensor_get_f64(x, b * m * m + i);
        pardo_tensor_set_f64(y, b, det_lu(a, m));
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_det = {
    .type = "det",
    .doc = "Y = determinant of each M x M matrix of X [..., M, M], like ONNX Det (LU in double; float32, float64, M "
           "<= 64)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = det_out,
    .n_outputs = 1,
    .infer = det_infer,
    .cpu = det_cpu,
    .halves_in_f32 = true,
    .grad = pardo_grad_standard,
};

/* ---- det_grad: dX = dY * adj(X)^T, the cofactors: det * inv(X)^T where X is invertible ---- */

static const pardo_arg_def det_grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def det_grad_out[] = {{"dX", "gradient of X, X's dtype and shape", true, false}};

static int det_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    return PARDO_OK;
}

/* The inverse of the m x m matrix a (overwritten) into inv by Gauss-Jordan with partial pivoting; false when
 * a is singular. */
static bool invert(double *a, double *inv, int m) {
    for (int i = 0; i < m * m; i++) inv[i] = i % (m + 1) == 0 ? 1 : 0;
    for (int c = 0; c < m; c++) {
        int piv = c;
        for (int r = c + 1; r < m; r++)
            if (fabs(a[r * m + c]) > fabs(a[piv * m + c])) piv = r;
        if (a[piv * m + c] == 0) return false;
        for (int k = 0; k < m && piv != c; k++) {
            double t = a[c * m + k];
            a[c * m + k] = a[piv * m + k];
            a[piv * m + k] = t;
            t = inv[c * m + k];
            inv[c * m + k] = inv[piv * m + k];
            inv[piv * m + k] = t;
        }
        const double d = a[c * m + c];
        for (int k = 0; k < m; k++) {
            a[c * m + k] /= d;
            inv[c * m + k] /= d;
        }
        for (int r = 0; r < m; r++) {
            if (r == c) continue;
            const double f = a[r * m + c];
            if (f == 0) continue;
            for (int k = 0; k < m; k++) {
                a[r * m + k] -= f * a[c * m + k];
                inv[r * m + k] -= f * inv[c * m + k];
            }
        }
    }
    return true;
}

static int det_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    char s[128];
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_dtype_is_float(x->dtype) || x->ndim < 2 || x->shape[x->ndim - 1] != x->shape[x->ndim - 2] ||
        x->shape[x->ndim - 1] > DET_MAX)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is %s %s, expected float32 or float64 [..., M, M] with "
                            "M <= %d", pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, s, sizeof s),
                            DET_MAX);
    const int m = (int)x->shape[x->ndim - 1];
    const int64_t batch = m ? x->numel / ((int64_t)m * m) : 0;
    if (dy && (dy->dtype != x->dtype || dy->numel != batch))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'dY' must have Y's dtype and %lld elements",
                            (long long)batch);
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    pardo_tensor_zero(dx);
    if (!dy) return PARDO_OK;
    double a[DET_MAX * DET_MAX], inv[DET_MAX * DET_MAX];
    for (int64_t b = 0; b < batch; b++) {
        const int64_t base = b * m * m;
        const double g = pardo_tensor_get_f64(dy, b);
        for (int64_t i = 0; i < (int64_t)m * m; i++) a[i] = pardo_tensor_get_f64(x, base + i);
        const double det = det_lu(a, m);
        for (int64_t i = 0; i < (int64_t)m * m; i++) a[i] = pardo_tensor_get_f64(x, base + i);
        if (det != 0 && invert(a, inv, m)) { /* d det / d X[i][j] = det * inv[j][i] */
            for (int i = 0; i < m; i++)
                for (int j = 0; j < m; j++) pardo_tensor_set_f64(dx, base + i * m + j, g * det * inv[j * m + i]);
            continue;
        }
        /* singular: the cofactors, each the determinant of a minor (m - 1 at most 63: it fits in inv) */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < m; j++) {
                int k = 0;
                for (int r = 0; r < m; r++)
                    for (int c = 0; c < m; c++)
                        if (r != i && c != j) inv[k++] = pardo_tensor_get_f64(x, base + r * m + c);
                const double cof = (m == 1 ? 1 : det_lu(inv, m - 1)) * ((i + j) % 2 ? -1 : 1);
                pardo_tensor_set_f64(dx, base + i * m + j, g * cof);
            }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_det_grad = {
    .type = "det_grad",
    .doc = "dX = dY * the cofactors of X (det(X) inv(X)^T where X is invertible) (gradient of det; float32, float64)",
    .inputs = det_grad_in,
    .n_inputs = 3,
    .outputs = det_grad_out,
    .n_outputs = 1,
    .infer = det_grad_infer,
    .cpu = det_grad_cpu,
};
