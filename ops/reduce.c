/* reduce.c - reductions over a set of axes, like ONNX ReduceSum, ReduceMean,
 * ReduceMax and the rest of ONNX's Reduce family: reduce_sum, reduce_max,
 * reduce_min, reduce_prod, reduce_l1, reduce_sum_square (float32, float64,
 * int32, int64) and reduce_mean, reduce_l2, reduce_log_sum,
 * reduce_log_sum_exp (float32, float64; log_sum_exp in one pass with a
 * running max, so it never overflows), each with its gradient op (inputs
 * X, axes, Y, dY; a 3-input X, Y, dY op of an older graph file still
 * runs). The axes come from attr axes or, like ONNX from opset 18, from an
 * int64 input read at run time (inference then knows the rank at most);
 * noop_with_empty_axes makes no axes the identity. attr axes lists the axes (negative
 * counts from the end; absent or [] means all axes), keepdims (default true)
 * keeps them as size-1 dims. Float sums accumulate in double, integer sums in
 * 64 bits wrapping around like numpy. The mean over zero elements is NaN,
 * like numpy; the max over zero elements is -inf (the least integer for
 * ints), like ONNX; NaN is greater than every number (numpy's max
 * propagates it). argmax and argmin (one axis, int64 indices, the first
 * index on ties or the last with select_last_index, like ONNX ArgMax and
 * ArgMin). The gradient ops reduce_sum_grad, reduce_mean_grad and
 * reduce_max_grad spread dY back over X (float32, float64); reduce_max's
 * gradient goes to the first max position in row-major order of the reduced
 * elements, like the indices of PyTorch's max(dim), and ties get nothing. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "index_util.h"
#include "kernel_util.h"
#include "kernels.h"
#include "op.h"

static const pardo_arg_def x_in[] = {{"X", "input tensor", false, false}};
static const pardo_arg_def reduce_in[] = {
    {"X", "input tensor", false, false},
    {"axes", "int64 (or int32) 1-D: the axes, read at run time (\"\": attr axes), like ONNX's input from opset 18",
     true, false},
};
static const pardo_arg_def y_out[] = {{"Y", "X reduced over axes", false, false}};
static const pardo_attr_def reduce_attrs[] = {
    {"axes", PARDO_ATTR_INTS, "[]", "axes to reduce, negative from the end; [] reduces all"},
    {"keepdims", PARDO_ATTR_BOOL, "true", "keep reduced axes as size-1 dims"},
    {"noop_with_empty_axes", PARDO_ATTR_BOOL, "false", "with no axes, Y = X instead of reducing them all (ONNX)"},
};
static const pardo_dtype sum_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
/* what the sums and products take (ONNX ReduceSum's, ReduceProd's, ReduceL1's and ReduceSumSquare's integers) */
static const pardo_dtype int_sum_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_U32, PARDO_U64};
/* what reduce_max, reduce_min, argmax and argmin take: every ordered dtype (they compare and copy) */
static const pardo_dtype ordered_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_U8,  PARDO_I8,
                                             PARDO_I16, PARDO_U16, PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
#define N_ORDERED ((int)(sizeof ordered_dtypes / sizeof ordered_dtypes[0]))

/* v beats the best so far: greater, or the first NaN (floats). */
#define GT_F(v, best) ((v) > (best) || (isnan(v) && !isnan(best)))
#define GT_I(v, best) ((v) > (best))

/* Reads keepdims and marks the reduced axes of a rank-ndim input in
 * reduced[]: from axes_t (an int tensor, the op's run-time input) when not
 * NULL, else attr axes. PARDO_EINVAL for an out-of-range or repeated axis.
 * *all is set when the axes are absent or empty and noop_with_empty_axes is
 * false; with it set, no axis is reduced. ndim < 0 (unknown rank) skips the
 * range checks and leaves reduced[] unset. */
static int reduce_axes(const pardo_op *op, const pardo_tensor *axes_t, int ndim, bool reduced[PARDO_MAX_DIMS],
                       bool *keepdims, bool *all, pardo_status *st) {
    int64_t axes[PARDO_MAX_DIMS];
    int n;
    bool noop;
    int rc = pardo_attr_bool(op, "keepdims", true, keepdims, st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(op, "noop_with_empty_axes", false, &noop, st);
    if (rc == PARDO_OK && axes_t) rc = pardo_index_read_ints(axes_t, "input 1 'axes'", axes, PARDO_MAX_DIMS, &n, st);
    else if (rc == PARDO_OK) rc = pardo_attr_ints(op, "axes", axes, PARDO_MAX_DIMS, &n, st);
    if (rc != PARDO_OK) return rc;
    *all = n <= 0 && !noop;
    if (ndim < 0) return PARDO_OK;
    for (int d = 0; d < ndim; d++) reduced[d] = *all;
    for (int i = 0; i < n; i++) {
        int a;
        if ((rc = pardo_normalize_axis(axes[i], ndim, "axes", &a, st)) != PARDO_OK) return rc;
        if (reduced[a])
            return pardo_errorf(st, PARDO_EINVAL, "%s lists axis %d more than once, expected distinct axes",
                                axes_t ? "input 1 'axes'" : "attr 'axes'", a);
        reduced[a] = true;
    }
    return PARDO_OK;
}

/* The output shape: reduced dims become 1 (keepdims) or go. */
static void reduce_shape(int ndim, const int64_t *shape, const bool *reduced, bool keepdims, int *out_nd,
                         int64_t *out) {
    int k = 0;
    for (int d = 0; d < ndim; d++) {
        if (!reduced[d]) out[k++] = shape[d];
        else if (keepdims) out[k++] = 1;
    }
    *out_nd = k;
}

static int reduce_infer(pardo_infer_ctx *ctx, const pardo_dtype *dtypes, int n_dtypes) {
    const pardo_type *x = ctx->in[0];
    bool reduced[PARDO_MAX_DIMS], keepdims, all;
    int rc = pardo_expect_dtype(x, "input 0 'X'", dtypes, n_dtypes, ctx->st);
    const pardo_type *at = ctx->n_in > 1 ? ctx->in[1] : NULL;
    if (rc == PARDO_OK && at) { /* the axes known only at run time: the rank at most */
        int len;
        bool noop;
        if ((rc = pardo_index_expect_list(at, "input 1 'axes'", &len, ctx->st)) == PARDO_OK &&
            (rc = pardo_attr_bool(ctx->op, "keepdims", true, &keepdims, ctx->st)) == PARDO_OK)
            rc = pardo_attr_bool(ctx->op, "noop_with_empty_axes", false, &noop, ctx->st);
        if (rc != PARDO_OK) return rc;
        ctx->out[0] = *x;
        if (!keepdims) ctx->out[0].ndim = -1;
        for (int d = 0; keepdims && d < x->ndim; d++) ctx->out[0].shape[d] = -1;
        return PARDO_OK;
    }
    if (rc == PARDO_OK) rc = reduce_axes(ctx->op, NULL, x->ndim, reduced, &keepdims, &all, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = x->dtype;
    if (x->ndim < 0) {
        y->ndim = all && !keepdims ? 0 : -1;
        return PARDO_OK;
    }
    reduce_shape(x->ndim, x->shape, reduced, keepdims, &y->ndim, y->shape);
    return PARDO_OK;
}

static int reduce_sum_infer(pardo_infer_ctx *ctx) { return reduce_infer(ctx, int_sum_dtypes, 6); }
static int reduce_mean_infer(pardo_infer_ctx *ctx) { return reduce_infer(ctx, sum_dtypes, 2); }
static int reduce_max_infer(pardo_infer_ctx *ctx) { return reduce_infer(ctx, ordered_dtypes, N_ORDERED); }

/* The input seen as kept and reduced dims, unit dims dropped and neighbours
 * of the same kind merged, with their element strides in the input. */
typedef struct red_plan {
    int nk, nr;                    // kept and reduced dims
    int64_t kdims[PARDO_MAX_DIMS]; // kept sizes, in input order (= output order)
    int64_t kstr[PARDO_MAX_DIMS];  // their input strides, in elements
    int64_t rdims[PARDO_MAX_DIMS]; // reduced sizes
    int64_t rstr[PARDO_MAX_DIMS];  // their input strides, in elements
    bool inner_kept;               // the innermost dim is kept (else reduced); it has stride 1
    int64_t out_numel;             // output elements
    int64_t count;                 // input elements reduced into each output element
} red_plan;

static void red_plan_make(int ndim, const int64_t *shape, const bool *reduced, red_plan *p) {
    int64_t cd[PARDO_MAX_DIMS], cs[PARDO_MAX_DIMS];
    bool cr[PARDO_MAX_DIMS];
    int nc = 0;
    p->out_numel = p->count = 1;
    for (int d = 0; d < ndim; d++) {
        if (reduced[d]) p->count *= shape[d];
        else p->out_numel *= shape[d];
        if (shape[d] == 1) continue;
        if (nc > 0 && cr[nc - 1] == reduced[d]) {
            cd[nc - 1] *= shape[d];
        } else {
            cd[nc] = shape[d];
            cr[nc] = reduced[d];
            nc++;
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
    p->inner_kept = !cr[nc - 1];
}

typedef void (*reduce_fn)(const red_plan *p, const void *x, void *y);

enum { RED_CHUNK = 256 }; /* accumulators on the stack when the innermost dim is kept */

/* Defines NAME, the reduction of p's input x (type T) into y, each output
 * starting from INIT in an accumulator of type ACC, taking each element v
 * with COMB(ACC, acc, v) and finishing with FIN(T, acc, count). Innermost dim
 * reduced: a contiguous pass per output element. Innermost dim kept: chunks
 * of RED_CHUNK neighbouring outputs accumulate together, so every pass over
 * the input is contiguous too. */
#define REDUCE_KERNEL(NAME, T, ACC, INIT, COMB, FIN)                                                                   \
    static void NAME(const red_plan *p, const void *vx, void *vy) {                                                    \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        const double cnt = (double)p->count;                                                                           \
        (void)cnt;                                                                                                     \
        if (!p->inner_kept) {                                                                                          \
            const int64_t rn = p->rdims[p->nr - 1];                                                                    \
            int64_t outer = 1;                                                                                         \
            for (int d = 0; d < p->nr - 1; d++) outer *= p->rdims[d];                                                  \
            pardo_odo ko;                                                                                              \
            pardo_odo_init(&ko, p->nk, p->kdims, p->kstr, NULL);                                                       \
            for (int64_t o = 0; o < p->out_numel; o++, pardo_odo_next(&ko)) {                                          \
                ACC acc = INIT;                                                                                        \
                pardo_odo ro;                                                                                          \
                pardo_odo_init(&ro, p->nr - 1, p->rdims, p->rstr, NULL);                                               \
                for (int64_t r = 0; r < outer; r++, pardo_odo_next(&ro)) {                                             \
                    const T *px = x + ko.off[0] + ro.off[0];                                                           \
                    for (int64_t i = 0; i < rn; i++) COMB(ACC, acc, px[i]);                                            \
                }                                                                                                      \
                y[o] = FIN(T, acc, cnt);                                                                               \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        const int64_t kn = p->kdims[p->nk - 1];                                                                        \
        pardo_odo ko;                                                                                                  \
        pardo_odo_init(&ko, p->nk - 1, p->kdims, p->kstr, NULL);                                                       \
        for (int64_t ob = 0; ob < p->out_numel; ob += kn, pardo_odo_next(&ko)) {                                       \
            for (int64_t c0 = 0; c0 < kn; c0 += RED_CHUNK) {                                                           \
                const int64_t cn = kn - c0 < RED_CHUNK ? kn - c0 : RED_CHUNK;                                          \
                ACC acc[RED_CHUNK];                                                                                    \
                for (int64_t i = 0; i < cn; i++) acc[i] = INIT;                                                        \
                pardo_odo ro;                                                                                          \
                pardo_odo_init(&ro, p->nr, p->rdims, p->rstr, NULL);                                                   \
                for (int64_t r = 0; r < p->count; r++, pardo_odo_next(&ro)) {                                          \
                    const T *px = x + ko.off[0] + ro.off[0] + c0;                                                      \
                    for (int64_t i = 0; i < cn; i++) COMB(ACC, acc[i], px[i]);                                         \
                }                                                                                                      \
                for (int64_t i = 0; i < cn; i++) y[ob + c0 + i] = FIN(T, acc[i], cnt);                                 \
            }                                                                                                          \
        }                                                                                                              \
    }

#define COMB_SUM(ACC, acc, v) ((acc) += (ACC)(v))
#define COMB_MAX_F(ACC, acc, v) ((acc) = GT_F(v, acc) ? (v) : (acc))
#define COMB_MAX_I(ACC, acc, v) ((acc) = GT_I(v, acc) ? (v) : (acc))
#define FIN_SUM(T, acc, cnt) ((T)(acc))
#define FIN_MEAN(T, acc, cnt) ((T)((acc) / (cnt)))

REDUCE_KERNEL(sum_f32, float, double, 0, COMB_SUM, FIN_SUM)
REDUCE_KERNEL(sum_f64, double, double, 0, COMB_SUM, FIN_SUM)
REDUCE_KERNEL(sum_i32, int32_t, uint64_t, 0, COMB_SUM, FIN_SUM)
REDUCE_KERNEL(sum_i64, int64_t, uint64_t, 0, COMB_SUM, FIN_SUM)
REDUCE_KERNEL(sum_u32, uint32_t, uint64_t, 0, COMB_SUM, FIN_SUM)
REDUCE_KERNEL(sum_u64, uint64_t, uint64_t, 0, COMB_SUM, FIN_SUM)
REDUCE_KERNEL(mean_f32, float, double, 0, COMB_SUM, FIN_MEAN)
REDUCE_KERNEL(mean_f64, double, double, 0, COMB_SUM, FIN_MEAN)
/* The kernels of reduce_max or reduce_min (NAME max or min, COMB_F / COMB_I its float and integer step) for every
 * ordered dtype, each starting from its type's limit (LIM(T, MIN, MAX): the one a max starts from is the least).
 * float16 and bfloat16 compare as floats, the float of the winner (exactly one of the inputs) stored back. */
#define FIN_F16(T, acc, cnt) pardo_f16_from_f32(acc)
#define FIN_BF16(T, acc, cnt) pardo_bf16_from_f32(acc)
#define EXTREME_KERNELS(NAME, COMB_F, COMB_I, LIM)                                                                     \
    REDUCE_KERNEL(NAME##_f32, float, float, LIM(float, -INFINITY, INFINITY), COMB_F, FIN_SUM)                         \
    REDUCE_KERNEL(NAME##_f64, double, double, LIM(double, -HUGE_VAL, HUGE_VAL), COMB_F, FIN_SUM)                      \
    REDUCE_KERNEL(NAME##_i32, int32_t, int32_t, LIM(int32_t, INT32_MIN, INT32_MAX), COMB_I, FIN_SUM)                  \
    REDUCE_KERNEL(NAME##_i64, int64_t, int64_t, LIM(int64_t, INT64_MIN, INT64_MAX), COMB_I, FIN_SUM)                  \
    REDUCE_KERNEL(NAME##_i8, int8_t, int8_t, LIM(int8_t, INT8_MIN, INT8_MAX), COMB_I, FIN_SUM)                        \
    REDUCE_KERNEL(NAME##_i16, int16_t, int16_t, LIM(int16_t, INT16_MIN, INT16_MAX), COMB_I, FIN_SUM)                  \
    REDUCE_KERNEL(NAME##_u8, uint8_t, uint8_t, LIM(uint8_t, 0, UINT8_MAX), COMB_I, FIN_SUM)                           \
    REDUCE_KERNEL(NAME##_u16, uint16_t, uint16_t, LIM(uint16_t, 0, UINT16_MAX), COMB_I, FIN_SUM)                      \
    REDUCE_KERNEL(NAME##_u32, uint32_t, uint32_t, LIM(uint32_t, 0, UINT32_MAX), COMB_I, FIN_SUM)                      \
    REDUCE_KERNEL(NAME##_u64, uint64_t, uint64_t, LIM(uint64_t, 0, UINT64_MAX), COMB_I, FIN_SUM)                      \
    REDUCE_KERNEL(NAME##_f16, uint16_t, float, LIM(float, -INFINITY, INFINITY), NAME##_F16_STEP, FIN_F16)             \
    REDUCE_KERNEL(NAME##_bf16, uint16_t, float, LIM(float, -INFINITY, INFINITY), NAME##_BF16_STEP, FIN_BF16)
#define LIM_LEAST(T, MIN, MAX) (T)(MIN)
#define LIM_GREATEST(T, MIN, MAX) (T)(MAX)
#define max_F16_STEP(ACC, acc, v) COMB_MAX_F(ACC, acc, pardo_f16_to_f32(v))
#define max_BF16_STEP(ACC, acc, v) COMB_MAX_F(ACC, acc, pardo_bf16_to_f32(v))
EXTREME_KERNELS(max, COMB_MAX_F, COMB_MAX_I, LIM_LEAST)

/* The ONNX family: min, prod, l1, l2, sum_square, log_sum, log_sum_exp. */
#define LT_F(v, best) ((v) < (best) || (isnan(v) && !isnan(best)))
#define COMB_MIN_F(ACC, acc, v) ((acc) = LT_F(v, acc) ? (v) : (acc))
#define COMB_MIN_I(ACC, acc, v) ((acc) = (v) < (acc) ? (v) : (acc))
#define COMB_PROD(ACC, acc, v) ((acc) = (ACC)((acc) * (ACC)(v)))
#define COMB_ABS_F(ACC, acc, v) ((acc) += fabs((ACC)(v)))
#define COMB_ABS_I(ACC, acc, v) ((acc) += (v) < 0 ? (ACC)0 - (ACC)(v) : (ACC)(v))
#define COMB_SQ(ACC, acc, v) ((acc) += (ACC)(v) * (ACC)(v))
#define FIN_SQRT(T, acc, cnt) ((T)sqrt(acc))
#define FIN_LOG(T, acc, cnt) ((T)log(acc))

/* log(sum(exp(x))) in one pass: the running max m and the sum s of exp(x - m) (rescaled when m grows). */
typedef struct lse_acc {
    double m, s;
} lse_acc;

static inline lse_acc lse_step(lse_acc a, double v) {
    if (v == -HUGE_VAL) return a; /* exp(-inf) adds nothing */
    if (v > a.m) {
        a.s = a.s * exp(a.m - v) + 1;
        a.m = v;
    } else {
        a.s += exp(v - a.m);
    }
    return a;
}
#define LSE_INIT ((lse_acc){-HUGE_VAL, 0})
#define COMB_LSE(ACC, acc, v) ((acc) = lse_step(acc, (double)(v)))
#define FIN_LSE(T, acc, cnt) ((T)((acc).s == 0 ? -HUGE_VAL : (acc).m + log((acc).s)))

#define min_F16_STEP(ACC, acc, v) COMB_MIN_F(ACC, acc, pardo_f16_to_f32(v))
#define min_BF16_STEP(ACC, acc, v) COMB_MIN_F(ACC, acc, pardo_bf16_to_f32(v))
EXTREME_KERNELS(min, COMB_MIN_F, COMB_MIN_I, LIM_GREATEST)
REDUCE_KERNEL(prod_f32, float, double, 1, COMB_PROD, FIN_SUM)
REDUCE_KERNEL(prod_f64, double, double, 1, COMB_PROD, FIN_SUM)
REDUCE_KERNEL(prod_i32, int32_t, uint64_t, 1, COMB_PROD, FIN_SUM)
REDUCE_KERNEL(prod_i64, int64_t, uint64_t, 1, COMB_PROD, FIN_SUM)
REDUCE_KERNEL(prod_u32, uint32_t, uint64_t, 1, COMB_PROD, FIN_SUM)
REDUCE_KERNEL(prod_u64, uint64_t, uint64_t, 1, COMB_PROD, FIN_SUM)
REDUCE_KERNEL(l1_f32, float, double, 0, COMB_ABS_F, FIN_SUM)
REDUCE_KERNEL(l1_f64, double, double, 0, COMB_ABS_F, FIN_SUM)
REDUCE_KERNEL(l1_i32, int32_t, uint64_t, 0, COMB_ABS_I, FIN_SUM)
REDUCE_KERNEL(l1_i64, int64_t, uint64_t, 0, COMB_ABS_I, FIN_SUM)
REDUCE_KERNEL(l1_u32, uint32_t, uint64_t, 0, COMB_SUM, FIN_SUM) /* |v| is v */
REDUCE_KERNEL(l1_u64, uint64_t, uint64_t, 0, COMB_SUM, FIN_SUM)
REDUCE_KERNEL(l2_f32, float, double, 0, COMB_SQ, FIN_SQRT)
REDUCE_KERNEL(l2_f64, double, double, 0, COMB_SQ, FIN_SQRT)
REDUCE_KERNEL(sum_square_f32, float, double, 0, COMB_SQ, FIN_SUM)
REDUCE_KERNEL(sum_square_f64, double, double, 0, COMB_SQ, FIN_SUM)
REDUCE_KERNEL(sum_square_i32, int32_t, uint64_t, 0, COMB_SQ, FIN_SUM)
REDUCE_KERNEL(sum_square_i64, int64_t, uint64_t, 0, COMB_SQ, FIN_SUM)
REDUCE_KERNEL(sum_square_u32, uint32_t, uint64_t, 0, COMB_SQ, FIN_SUM)
REDUCE_KERNEL(sum_square_u64, uint64_t, uint64_t, 0, COMB_SQ, FIN_SUM)
REDUCE_KERNEL(log_sum_f32, float, double, 0, COMB_SUM, FIN_LOG)
REDUCE_KERNEL(log_sum_f64, double, double, 0, COMB_SUM, FIN_LOG)
REDUCE_KERNEL(log_sum_exp_f32, float, lse_acc, LSE_INIT, COMB_LSE, FIN_LSE)
REDUCE_KERNEL(log_sum_exp_f64, double, lse_acc, LSE_INIT, COMB_LSE, FIN_LSE)

static int reduce_cpu(pardo_kernel_ctx *ctx, const reduce_fn *kernels, int n_kernels) {
    pardo_tensor *x = ctx->in[0];
    bool reduced[PARDO_MAX_DIMS], keepdims, all;
    if (x->dtype < 0 || (int)x->dtype >= n_kernels || !kernels[x->dtype])
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s, which this reduction does not take",
                            pardo_dtype_name(x->dtype));
    int rc = reduce_axes(ctx->op, ctx->n_in > 1 ? ctx->in[1] : NULL, x->ndim, reduced, &keepdims, &all, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t shape[PARDO_MAX_DIMS];
    int nd;
    reduce_shape(x->ndim, x->shape, reduced, keepdims, &nd, shape);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, nd, shape);
    if (!y) return ctx->st->code;
    red_plan p;
    red_plan_make(x->ndim, x->shape, reduced, &p);
    if (p.out_numel > 0) kernels[x->dtype](&p, pardo_tensor_data(x), pardo_tensor_data(y));
    return PARDO_OK;
}

/* the sums' and products' kernels by dtype (floats in double, the integers in uint64_t, wrapping) */
#define INT_SUM_TABLE(P)                                                                                               \
    {[PARDO_F32] = P##_f32, [PARDO_F64] = P##_f64, [PARDO_I32] = P##_i32,                                              \
     [PARDO_I64] = P##_i64, [PARDO_U32] = P##_u32, [PARDO_U64] = P##_u64}
static const reduce_fn sum_kernels[PARDO_DTYPE_COUNT] = INT_SUM_TABLE(sum);
static const reduce_fn mean_kernels[] = {mean_f32, mean_f64};
static const reduce_fn max_kernels[PARDO_DTYPE_COUNT] = PARDO_ORDERED_TABLE(max);
static const reduce_fn min_kernels[PARDO_DTYPE_COUNT] = PARDO_ORDERED_TABLE(min);
static const reduce_fn prod_kernels[PARDO_DTYPE_COUNT] = INT_SUM_TABLE(prod);
static const reduce_fn l1_kernels[PARDO_DTYPE_COUNT] = INT_SUM_TABLE(l1);
static const reduce_fn l2_kernels[] = {l2_f32, l2_f64};
static const reduce_fn sum_square_kernels[PARDO_DTYPE_COUNT] = INT_SUM_TABLE(sum_square);
static const reduce_fn log_sum_kernels[] = {log_sum_f32, log_sum_f64};
static const reduce_fn log_sum_exp_kernels[] = {log_sum_exp_f32, log_sum_exp_f64};

static int reduce_sum_cpu(pardo_kernel_ctx *ctx) { return reduce_cpu(ctx, sum_kernels, PARDO_DTYPE_COUNT); }
static int reduce_mean_cpu(pardo_kernel_ctx *ctx) { return reduce_cpu(ctx, mean_kernels, 2); }
static int reduce_max_cpu(pardo_kernel_ctx *ctx) { return reduce_cpu(ctx, max_kernels, PARDO_DTYPE_COUNT); }

const pardo_op_def pardo_op_reduce_sum = {
    .type = "reduce_sum",
    .doc = "Y = sum of X over axes (float32, float64, int32, int64, uint32, uint64 wrapping; gradient: floats)",
    .inputs = reduce_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = reduce_attrs,
    .n_attrs = 3,
    .infer = reduce_sum_infer,
    .cpu = reduce_sum_cpu,
    .cuda = pardo_cuda_reduce_sum,
    .halves_in_f32 = true,
    .all_dtypes = true, /* uint32, uint64 */
    .grad = pardo_grad_standard,
};

const pardo_op_def pardo_op_reduce_mean = {
    .type = "reduce_mean",
    .doc = "Y = mean of X over axes (float32, float64)",
    .inputs = reduce_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = reduce_attrs,
    .n_attrs = 3,
    .infer = reduce_mean_infer,
    .cpu = reduce_mean_cpu,
    .cuda = pardo_cuda_reduce_mean,
    .halves_in_f32 = true,
    .grad = pardo_grad_standard,
};

const pardo_op_def pardo_op_reduce_max = {
    .type = "reduce_max",
    .doc = "Y = max of X over axes; -inf (least int) over none; NaN wins (every numeric dtype: float16 and bfloat16 "
           "compare as their values; gradient: float32, float64, to the first max)",
    .inputs = reduce_in,
    .n_inputs = 2,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = reduce_attrs,
    .n_attrs = 3,
    .infer = reduce_max_infer,
    .cpu = reduce_max_cpu,
    .cuda = pardo_cuda_reduce_max,
    .grad = pardo_grad_standard,
    .all_dtypes = true,
};

/* The ONNX reductions: one def each, its kernels by dtype (the first n_kernels of f32, f64, i32, i64). */
#define REDUCE_OP(NAME, KERNELS, N, DOC) REDUCE_OP_OF(NAME, KERNELS, sum_dtypes, N, N, false, true, DOC)
/* As REDUCE_OP, taking the N_DTYPES of DTYPES (ALL: some added after bool) with KERNELS indexed by dtype up to N;
 * HALVES: float16 and bfloat16 through the float32 kernel (ops without half kernels of their own). */
#define REDUCE_OP_OF(NAME, KERNELS, DTYPES, N_DTYPES, N, ALL, HALVES, DOC)                                             \
    REDUCE_OP_OF_CUDA(NAME, KERNELS, DTYPES, N_DTYPES, N, ALL, HALVES, NULL, DOC)
/* As REDUCE_OP_OF, with the CUDA kernel CUDA (ops/cuda/kernels.h). */
#define REDUCE_OP_OF_CUDA(NAME, KERNELS, DTYPES, N_DTYPES, N, ALL, HALVES, CUDA, DOC)                                  \
    static int NAME##_infer(pardo_infer_ctx *ctx) { return reduce_infer(ctx, DTYPES, N_DTYPES); }                      \
    static int NAME##_cpu(pardo_kernel_ctx *ctx) { return reduce_cpu(ctx, KERNELS, N); }                               \
    const pardo_op_def pardo_op_##NAME = {                                                                             \
        .type = #NAME,                                                                                                 \
        .doc = DOC,                                                                                                    \
        .inputs = reduce_in,                                                                                           \
        .n_inputs = 2,                                                                                                 \
        .outputs = y_out,                                                                                              \
        .n_outputs = 1,                                                                                                \
        .attrs = reduce_attrs,                                                                                         \
        .n_attrs = 3,                                                                                                  \
        .infer = NAME##_infer,                                                                                         \
        .cpu = NAME##_cpu,                                                                                             \
        .cuda = CUDA,                                                                                                  \
        .grad = pardo_grad_standard,                                                                                   \
        .all_dtypes = ALL,                                                                                             \
        .halves_in_f32 = HALVES,                                                                                       \
    };

REDUCE_OP_OF_CUDA(reduce_min, min_kernels, ordered_dtypes, N_ORDERED, PARDO_DTYPE_COUNT, true, false,
                  pardo_cuda_reduce_min,
                  "Y = min of X over axes, like ONNX ReduceMin; +inf (greatest int) over none; NaN wins (every numeric "
                  "dtype: float16 and bfloat16 compare as their values; gradient: float32, float64, to the first min)")
REDUCE_OP_OF(reduce_prod, prod_kernels, int_sum_dtypes, 6, PARDO_DTYPE_COUNT, true, true,
             "Y = product of X over axes, like ONNX ReduceProd (floats in double; int32, int64, uint32, uint64 "
             "wrapping; gradient: floats)")
REDUCE_OP_OF(reduce_l1, l1_kernels, int_sum_dtypes, 6, PARDO_DTYPE_COUNT, true, true,
             "Y = sum of |X| over axes, like ONNX ReduceL1 (float32, float64, int32, int64, uint32, uint64; gradient: "
             "floats)")
REDUCE_OP(reduce_l2, l2_kernels, 2, "Y = sqrt(sum of X^2) over axes, like ONNX ReduceL2 (float32, float64)")
REDUCE_OP_OF(reduce_sum_square, sum_square_kernels, int_sum_dtypes, 6, PARDO_DTYPE_COUNT, true, true,
             "Y = sum of X^2 over axes, like ONNX ReduceSumSquare (float32, float64, int32, int64, uint32, uint64; "
             "gradient: floats)")
REDUCE_OP(reduce_log_sum, log_sum_kernels, 2, "Y = log(sum of X) over axes, like ONNX ReduceLogSum (float32, float64)")
REDUCE_OP(reduce_log_sum_exp, log_sum_exp_kernels, 2,
          "Y = log(sum of exp(X)) over axes, computed without overflow, like ONNX ReduceLogSumExp (float32, float64)")

/* ---- gradients: reduce_sum_grad, reduce_mean_grad, reduce_max_grad and the ONNX family's ---- */

static const pardo_arg_def grad_in[] = {
    {"X", "the forward input", false, false},
    {"axes", "the forward input axes (\"\": attr axes)", true, false},
    {"Y", "the forward output (read by the gradients that need it)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def grad_out[] = {
    {"dX", "gradient of X, X's dtype and shape", true, false},
    {"daxes", "never computed: the axes have no gradient (must be \"\")", true, false},
};

/* A gradient op's inputs: X, axes, Y, dY; a graph written before the axes input has X, Y, dY (3 inputs). */
static void grad_inputs(int n_in, const void *const *in, const void **axes, const void **y, const void **dy) {
    if (n_in == 3) {
        *axes = NULL;
        *y = in[1];
        *dy = in[2];
        return;
    }
    *axes = n_in > 1 ? in[1] : NULL;
    *y = n_in > 2 ? in[2] : NULL;
    *dy = n_in > 3 ? in[3] : NULL;
}
static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

static int reduce_grad_infer(pardo_infer_ctx *ctx) {
    const void *pa, *py, *pdy;
    grad_inputs(ctx->n_in, (const void *const *)ctx->in, &pa, &py, &pdy);
    const pardo_type *x = ctx->in[0], *at = pa, *dy = pdy;
    bool reduced[PARDO_MAX_DIMS], keepdims, all;
    int len, rc = at ? pardo_index_expect_list(at, "input 1 'axes'", &len, ctx->st)
                     : reduce_axes(ctx->op, NULL, x->ndim, reduced, &keepdims, &all, ctx->st);
    (void)py;
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK && dy && dy->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 'dY' has dtype %s, expected %s like input 0 'X'",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(x->dtype));
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    if (ctx->n_out > 1) ctx->out[1] = at ? *at : *x;
    return PARDO_OK;
}

typedef enum grad_kind { G_SUM, G_MEAN, G_MAX, G_MIN, G_PROD, G_L1, G_L2, G_SUM_SQUARE, G_LOG_SUM, G_LSE } grad_kind;

/* Defines NAME: for each output element o of p (type T), dX at the first
 * position of the max among the elements reduced into o gets dY[o]; dX is
 * zeroed before. */
#define MAX_GRAD_KERNEL(NAME, T)                                                                                       \
    static void NAME(const red_plan *p, const T *x, const T *dy, T *dx) {                                              \
        pardo_odo ko;                                                                                                  \
        pardo_odo_init(&ko, p->nk, p->kdims, p->kstr, NULL);                                                           \
        for (int64_t o = 0; o < p->out_numel; o++, pardo_odo_next(&ko)) {                                              \
            pardo_odo ro;                                                                                              \
            pardo_odo_init(&ro, p->nr, p->rdims, p->rstr, NULL);                                                       \
            int64_t best = ko.off[0];                                                                                  \
            for (int64_t r = 0; r < p->count; r++, pardo_odo_next(&ro))                                                \
                if (GT_F(x[ko.off[0] + ro.off[0]], x[best])) best = ko.off[0] + ro.off[0];                             \
            if (p->count > 0) dx[best] = dy[o];                                                                        \
        }                                                                                                              \
    }

MAX_GRAD_KERNEL(max_grad_f32, float)
MAX_GRAD_KERNEL(max_grad_f64, double)

/* Defines NAME: for each output element o of p (type T), every X element v reduced into o gets dX = F(v, y, g)
 * with y = Y[o], g = dY[o] (the elementwise gradients: min and prod are handled apart). */
#define EW_GRAD_KERNEL(NAME, T)                                                                                        \
    static void NAME(const red_plan *p, grad_kind kind, const T *x, const T *y, const T *dy, T *dx) {                  \
        pardo_odo ko;                                                                                                  \
        pardo_odo_init(&ko, p->nk, p->kdims, p->kstr, NULL);                                                           \
        for (int64_t o = 0; o < p->out_numel; o++, pardo_odo_next(&ko)) {                                              \
            pardo_odo ro;                                                                                              \
            pardo_odo_init(&ro, p->nr, p->rdims, p->rstr, NULL);                                                       \
            const double yo = (double)y[o], g = (double)dy[o];                                                         \
            int64_t zeros = 0;                                                                                         \
            double nz = 1; /* prod: the product of the nonzero elements */                                             \
            if (kind == G_PROD) {                                                                                      \
                for (int64_t r = 0; r < p->count; r++, pardo_odo_next(&ro)) {                                          \
                    const double v = (double)x[ko.off[0] + ro.off[0]];                                                 \
                    if (v == 0) zeros++;                                                                               \
                    else nz *= v;                                                                                      \
                }                                                                                                      \
            }                                                                                                          \
            int64_t best = ko.off[0];                                                                                  \
            for (int64_t r = 0; r < p->count; r++, pardo_odo_next(&ro)) {                                              \
                const int64_t at = ko.off[0] + ro.off[0];                                                              \
                const double v = (double)x[at];                                                                        \
                double d;                                                                                              \
                switch (kind) {                                                                                        \
                case G_MIN:                                                                                            \
                    if (LT_F(x[at], x[best])) best = at;                                                               \
                    d = 0;                                                                                             \
                    break;                                                                                             \
                case G_PROD: d = zeros == 0 ? g * nz / v : zeros == 1 && v == 0 ? g * nz : 0; break;                   \
                case G_L1: d = v > 0 ? g : v < 0 ? -g : 0; break;                                                      \
                case G_L2: d = yo == 0 ? 0 : g * v / yo; break;                                                        \
                case G_SUM_SQUARE: d = 2 * g * v; break;                                                               \
                case G_LOG_SUM: d = g / exp(yo); break;                                                                \
                default: d = g * exp(v - yo); break; /* G_LSE */                                                       \
                }                                                                                                      \
                dx[at] = (T)d;                                                                                         \
            }                                                                                                          \
            if (kind == G_MIN && p->count > 0) dx[best] = dy[o];                                                       \
        }                                                                                                              \
    }

EW_GRAD_KERNEL(ew_grad_f32, float)
EW_GRAD_KERNEL(ew_grad_f64, double)

static int reduce_grad_run(pardo_kernel_ctx *ctx, grad_kind kind) {
    const void *pa, *py, *pdy;
    grad_inputs(ctx->n_in, (const void *const *)ctx->in, &pa, &py, &pdy);
    pardo_tensor *x = ctx->in[0], *y = (pardo_tensor *)py, *dy = (pardo_tensor *)pdy;
    bool reduced[PARDO_MAX_DIMS], keepdims, all;
    if (ctx->n_out > 1 && pardo_kernel_wants_output(ctx, 1))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "output 1 'daxes' must be \"\": the axes have no gradient");
    int rc = reduce_axes(ctx->op, pa, x->ndim, reduced, &keepdims, &all, ctx->st);
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    if (!pardo_dtype_is_float(x->dtype) || (dy && dy->dtype != x->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE,
                            "inputs 'X' and 'dY' have dtypes %s and %s, expected float32 or float64 for both",
                            pardo_dtype_name(x->dtype), dy ? pardo_dtype_name(dy->dtype) : "(absent)");
    /* dY seen with the reduced dims kept as 1: it broadcasts back to X */
    int64_t kept[PARDO_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) kept[d] = reduced[d] ? 1 : x->shape[d];
    if (dy && dy->numel != pardo_shape_numel(x->ndim, kept)) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'dY' has shape %s, expected %lld elements like Y %s",
                            pardo_shape_str(dy->ndim, dy->shape, s1, sizeof s1),
                            (long long)pardo_shape_numel(x->ndim, kept), pardo_shape_str(x->ndim, kept, s2, sizeof s2));
    }
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    red_plan p;
    red_plan_make(x->ndim, x->shape, reduced, &p);
    if (!dy || kind == G_MAX || kind == G_MIN || x->numel == 0) pardo_tensor_zero(dx);
    if (!dy || x->numel == 0) return PARDO_OK;
    if (kind == G_MAX) {
        if (x->dtype == PARDO_F32) max_grad_f32(&p, pardo_tensor_data(x), pardo_tensor_data(dy), pardo_tensor_data(dx));
        else max_grad_f64(&p, pardo_tensor_data(x), pardo_tensor_data(dy), pardo_tensor_data(dx));
        return PARDO_OK;
    }
    if (kind != G_SUM && kind != G_MEAN) {
        if (!y || y->dtype != x->dtype || y->numel != dy->numel)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'Y' must be the forward output (%s, %lld elements)",
                                pardo_dtype_name(x->dtype), (long long)dy->numel);
        if (x->dtype == PARDO_F32)
            ew_grad_f32(&p, kind, pardo_tensor_data(x), pardo_tensor_data(y), pardo_tensor_data(dy),
                        pardo_tensor_data(dx));
        else ew_grad_f64(&p, kind, pardo_tensor_data(x), pardo_tensor_data(y), pardo_tensor_data(dy),
                         pardo_tensor_data(dx));
        return PARDO_OK;
    }
    double scale = kind == G_MEAN ? 1.0 / (double)p.count : 1.0;
    return pardo_expand_to_shape(x->dtype, pardo_tensor_data(dy), x->ndim, kept, pardo_tensor_data(dx), x->ndim,
                                 x->shape, scale, ctx->st);
}

#define REDUCE_GRAD_OP(NAME, KIND, DOC) REDUCE_GRAD_OP_CUDA(NAME, KIND, NULL, DOC)
/* As REDUCE_GRAD_OP, with the CUDA kernel CUDA (ops/cuda/kernels.h). */
#define REDUCE_GRAD_OP_CUDA(NAME, KIND, CUDA, DOC)                                                                     \
    static int NAME##_grad_cpu(pardo_kernel_ctx *ctx) { return reduce_grad_run(ctx, KIND); }                           \
    const pardo_op_def pardo_op_##NAME##_grad = {                                                                      \
        .type = #NAME "_grad",                                                                                         \
        .doc = DOC,                                                                                                    \
        .inputs = grad_in,                                                                                             \
        .n_inputs = 4,                                                                                                 \
        .outputs = grad_out,                                                                                           \
        .n_outputs = 2,                                                                                                \
        .attrs = reduce_attrs,                                                                                         \
        .n_attrs = 3,                                                                                                  \
        .infer = reduce_grad_infer,                                                                                    \
        .cpu = NAME##_grad_cpu,                                                                                        \
        .cuda = CUDA,                                                                                                  \
    };

REDUCE_GRAD_OP_CUDA(reduce_sum, G_SUM, pardo_cuda_reduce_sum_grad,
                    "dX = dY broadcast back over the reduced axes (gradient of reduce_sum; float32, float64)")
REDUCE_GRAD_OP_CUDA(reduce_mean, G_MEAN, pardo_cuda_reduce_mean_grad,
                    "dX = dY / count broadcast back over the reduced axes (gradient of reduce_mean; float32, float64)")
REDUCE_GRAD_OP_CUDA(reduce_max, G_MAX, pardo_cuda_reduce_max_grad,
                    "dX = dY at the first max of each reduced set, 0 elsewhere (gradient of reduce_max; float32, "
                    "float64)")
REDUCE_GRAD_OP_CUDA(reduce_min, G_MIN, pardo_cuda_reduce_min_grad,
                    "dX = dY at the first min of each reduced set, 0 elsewhere (gradient of reduce_min; float32, "
                    "float64)")
REDUCE_GRAD_OP(reduce_prod, G_PROD,
               "dX = dY times the product of the other reduced elements (gradient of reduce_prod; float32, float64)")
REDUCE_GRAD_OP(reduce_l1, G_L1, "dX = dY * sign(X) (gradient of reduce_l1; float32, float64)")
REDUCE_GRAD_OP(reduce_l2, G_L2, "dX = dY * X / Y, 0 where Y is 0 (gradient of reduce_l2; float32, float64)")
REDUCE_GRAD_OP(reduce_sum_square, G_SUM_SQUARE, "dX = 2 dY X (gradient of reduce_sum_square; float32, float64)")
REDUCE_GRAD_OP(reduce_log_sum, G_LOG_SUM, "dX = dY / exp(Y), the sum (gradient of reduce_log_sum; float32, float64)")
REDUCE_GRAD_OP(reduce_log_sum_exp, G_LSE,
               "dX = dY * exp(X - Y), the softmax over the reduced set (gradient of reduce_log_sum_exp; float32, "
               "float64)")

/* ---- argmax ---- */

static const pardo_arg_def argmax_out[] = {{"Y", "int64 index along axis of the first (or last) max", false, false}};
static const pardo_arg_def argmin_out[] = {{"Y", "int64 index along axis of the first (or last) min", false, false}};
static const pardo_attr_def argmax_attrs[] = {
    {"axis", PARDO_ATTR_INT, "0", "axis to search, negative from the end"},
    {"keepdims", PARDO_ATTR_BOOL, "true", "keep the axis as a size-1 dim"},
    {"select_last_index", PARDO_ATTR_BOOL, "false", "on ties, the last index instead of the first"},
};

static int argmax_attrs_get(const pardo_op *op, int ndim, int *axis, bool *keepdims, pardo_status *st) {
    int64_t a;
    int rc = pardo_attr_int(op, "axis", 0, &a, st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(op, "keepdims", true, keepdims, st);
    if (rc == PARDO_OK && ndim >= 0) rc = pardo_normalize_axis(a, ndim, "axis", axis, st);
    return rc;
}

/* Y's shape: X's with the axis 1 (keepdims) or dropped. */
static void argmax_shape(int ndim, const int64_t *shape, int axis, bool keepdims, int *out_nd, int64_t *out) {
    bool reduced[PARDO_MAX_DIMS] = {false};
    reduced[axis] = true;
    reduce_shape(ndim, shape, reduced, keepdims, out_nd, out);
}

static int argmax_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    int axis;
    bool keepdims;
    int rc = pardo_expect_dtype(x, "input 0 'X'", ordered_dtypes, N_ORDERED, ctx->st);
    if (rc == PARDO_OK && x->ndim == 0)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is a scalar, expected rank >= 1");
    if (rc == PARDO_OK) rc = argmax_attrs_get(ctx->op, x->ndim, &axis, &keepdims, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = PARDO_I64;
    if (x->ndim < 0) {
        y->ndim = -1;
        return PARDO_OK;
    }
    bool others_nonempty = true;
    for (int d = 0; d < x->ndim; d++) others_nonempty &= d == axis || x->shape[d] > 0;
    if (x->shape[axis] == 0 && others_nonempty) {
        char s[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has shape %s: axis %d is empty, so it has no max",
                            pardo_shape_str(x->ndim, x->shape, s, sizeof s), axis);
    }
    argmax_shape(x->ndim, x->shape, axis, keepdims, &y->ndim, y->shape);
    return PARDO_OK;
}

typedef void (*argmax_fn)(const void *x, int64_t *y, int64_t outer, int64_t n, int64_t inner, bool min, bool last);

/* v beats best: greater (LT: less), or NaN over a number (v != v only for a NaN: an integer never). */
#define GT_ANY(v, best) ((v) > (best) || ((v) != (v) && (best) == (best)))
#define LT_ANY(v, best) ((v) < (best) || ((v) != (v) && (best) == (best)))

/* Defines argmax_SUF: for x (stored type T, compared as LOAD(v)) viewed as [outer, n, inner], the index along
 * the middle dim of the first (last: the last) element found greatest (min: least); NaN wins either way. */
#define ARGMAX_KERNEL(SUF, T, LOAD)                                                                                    \
    static void argmax_##SUF(const void *vx, int64_t *y, int64_t outer, int64_t n, int64_t inner, bool min,          \
                             bool last) {                                                                              \
        const T *x = vx;                                                                                               \
        for (int64_t o = 0; o < outer; o++)                                                                            \
            for (int64_t i = 0; i < inner; i++) {                                                                      \
                const T *px = x + o * n * inner + i;                                                                   \
                int64_t best = 0;                                                                                      \
                for (int64_t k = 1; k < n; k++) {                                                                      \
                    const __typeof__(LOAD(px[0])) v = LOAD(px[k * inner]), b = LOAD(px[best * inner]);                 \
                    const bool wins =                                                                                  \
                        last ? !(min ? LT_ANY(b, v) : GT_ANY(b, v)) : (min ? LT_ANY(v, b) : GT_ANY(v, b));             \
                    if (wins) best = k;                                                                                \
                }                                                                                                      \
                y[o * inner + i] = best;                                                                               \
            }                                                                                                          \
    }

PARDO_FOR_ORDERED_DTYPES(ARGMAX_KERNEL)

static int arg_extreme_cpu(pardo_kernel_ctx *ctx, bool min) {
    static const argmax_fn kernels[PARDO_DTYPE_COUNT] = PARDO_ORDERED_TABLE(argmax);
    pardo_tensor *x = ctx->in[0];
    int axis;
    bool keepdims;
    char s[128];
    if (x->dtype < 0 || x->dtype >= PARDO_DTYPE_COUNT || !kernels[x->dtype] || x->ndim < 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is %s %s, expected " PARDO_ORDERED_NAMES " of rank >= 1",
                            pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    bool last;
    int rc = argmax_attrs_get(ctx->op, x->ndim, &axis, &keepdims, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "select_last_index", false, &last, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t shape[PARDO_MAX_DIMS], outer = 1, inner = 1, n = x->shape[axis];
    int nd;
    argmax_shape(x->ndim, x->shape, axis, keepdims, &nd, shape);
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    if (n == 0 && outer * inner > 0)
        return pardo_errorf(ctx->st, PARDO_ERUNTIME, "input 0 'X' has shape %s: axis %d is empty, so it has no max",
                            pardo_shape_str(x->ndim, x->shape, s, sizeof s), axis);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_I64, nd, shape);
    if (!y) return ctx->st->code;
    if (y->numel > 0) kernels[x->dtype](pardo_tensor_data(x), pardo_tensor_data(y), outer, n, inner, min, last);
    return PARDO_OK;
}

static int argmax_cpu(pardo_kernel_ctx *ctx) { return arg_extreme_cpu(ctx, false); }
static int argmin_cpu(pardo_kernel_ctx *ctx) { return arg_extreme_cpu(ctx, true); }

const pardo_op_def pardo_op_argmax = {
    .type = "argmax",
    .doc = "Y = int64 index of the first (select_last_index: last) max of X along axis, like ONNX ArgMax; NaN wins "
           "(every numeric dtype; not differentiable)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = argmax_out,
    .n_outputs = 1,
    .attrs = argmax_attrs,
    .n_attrs = 3,
    .infer = argmax_infer,
    .cpu = argmax_cpu,
    .cuda = pardo_cuda_argmax,
    .all_dtypes = true,
};

const pardo_op_def pardo_op_argmin = {
    .type = "argmin",
    .doc = "Y = int64 index of the first (select_last_index: last) min of X along axis, like ONNX ArgMin; NaN wins "
           "(every numeric dtype; not differentiable)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = argmin_out,
    .n_outputs = 1,
    .attrs = argmax_attrs,
    .n_attrs = 3,
    .infer = argmax_infer,
    .cpu = argmin_cpu,
    .cuda = pardo_cuda_argmin,
    .all_dtypes = true,
};
