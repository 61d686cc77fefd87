/* elementwise.c - elementwise ops: the binary arithmetic ops add, sub, mul,
 * div (numpy broadcasting, float32/float64/int32/int64) and the unary float
 * ops relu, sigmoid, tanh, exp, log, scale. Each op: schema, inference, CPU
 * kernel. Integer add/sub/mul wrap around on overflow (two's complement, like
 * numpy) instead of being undefined; integer div truncates toward zero (C,
 * ONNX) and a zero divisor is a PARDO_ERUNTIME error. Every kernel reads
 * element i of a same-shaped input before writing element i of the output,
 * so the ops are safe in place (w = add(w, step)). CUDA kernels live in
 * ops/cuda/elementwise.cu. */
#include <stdbool.h>
#include <stdint.h>
#include <tgmath.h>

#include "kernel_util.h"
#include "kernels.h"
#include "op.h"

/* ---- binary ops ---- */

static const pardo_arg_def ab_in[] = {
    {"A", "first operand", false, false},
    {"B", "second operand, broadcast against A like numpy", false, false},
};
static const pardo_arg_def c_out[] = {{"C", "result, of the broadcast shape and A's dtype", false, false}};

static const pardo_dtype binary_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};

static int binary_infer(pardo_infer_ctx *ctx) {
    const pardo_type *a = ctx->in[0], *b = ctx->in[1];
    int rc = pardo_expect_dtype(a, "input 0 'A'", binary_dtypes, 4, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (b->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'B' has dtype %s, expected %s like input 0 'A'",
                            pardo_dtype_name(b->dtype), pardo_dtype_name(a->dtype));
    if ((rc = pardo_broadcast_types(a, b, &ctx->out[0], ctx->st)) != PARDO_OK) return rc;
    ctx->out[0].dtype = a->dtype;
    return PARDO_OK;
}

/* Operations on T through its unsigned companion U, so that integer overflow
 * wraps instead of being undefined (for floats U is T itself). */
#define OP_ADD(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define OP_SUB(T, U, x, y) ((T)((U)(x) - (U)(y)))
#define OP_MUL(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define OP_DIV_F(T, U, x, y) ((x) / (y))
/* y != 0 is checked before; y == -1 negates with wrap-around (INT_MIN / -1). */
#define OP_DIV_I(T, U, x, y) ((y) == -1 ? (T)((U)0 - (U)(x)) : (T)((x) / (y)))

typedef void (*binary_fn)(const pardo_bcast2 *p, const void *a, const void *b, void *y);

/* Defines NAME, a broadcasting kernel of C = OP(A, B) on elements of type T:
 * the outer merged dims are walked with an odometer, the innermost one is a
 * plain loop with A, B or neither held fixed. */
#define BINARY_KERNEL(NAME, T, U, OP)                                                                                  \
    static void NAME(const pardo_bcast2 *p, const void *va, const void *vb, void *vy) {                                \
        const T *a = va, *b = vb;                                                                                      \
        T *y = vy;                                                                                                     \
        const int inner = p->nd - 1;                                                                                   \
        const int64_t n = p->dims[inner];                                                                              \
        const bool step_a = p->sa[inner] != 0, step_b = p->sb[inner] != 0;                                             \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, inner, p->dims, p->sa, p->sb);                                                              \
        for (int64_t base = 0; base < p->numel; base += n, pardo_odo_next(&o)) {                                       \
            const T *pa = a + o.off[0], *pb = b + o.off[1];                                                            \
            T *py = y + base;                                                                                          \
            if (step_a && step_b) {                                                                                    \
                for (int64_t i = 0; i < n; i++) py[i] = OP(T, U, pa[i], pb[i]);                                        \
            } else if (step_a) {                                                                                       \
                const T bv = pb[0];                                                                                    \
                for (int64_t i = 0; i < n; i++) py[i] = OP(T, U, pa[i], bv);                                           \
            } else {                                                                                                   \
                const T av = pa[0];                                                                                    \
                for (int64_t i = 0; i < n; i++) py[i] = OP(T, U, av, pb[i]);                                           \
            }                                                                                                          \
        }                                                                                                              \
    }

/* The four kernels of one op, indexed by dtype (PARDO_F32..PARDO_I64). */
#define BINARY_KERNELS(NAME, OP_F, OP_I)                                                                               \
    BINARY_KERNEL(NAME##_f32, float, float, OP_F)                                                                      \
    BINARY_KERNEL(NAME##_f64, double, double, OP_F)                                                                    \
    BINARY_KERNEL(NAME##_i32, int32_t, uint32_t, OP_I)                                                                 \
    BINARY_KERNEL(NAME##_i64, int64_t, uint64_t, OP_I)                                                                 \
    static const binary_fn NAME##_kernels[4] = {NAME##_f32, NAME##_f64, NAME##_i32, NAME##_i64};

BINARY_KERNELS(add, OP_ADD, OP_ADD)
BINARY_KERNELS(sub, OP_SUB, OP_SUB)
BINARY_KERNELS(mul, OP_MUL, OP_MUL)
BINARY_KERNELS(div, OP_DIV_F, OP_DIV_I)

/* PARDO_ERUNTIME when an integer divisor holds a zero. */
static int check_int_divisor(const pardo_tensor *b, pardo_status *st) {
    const void *p = pardo_tensor_data(b);
    for (int64_t i = 0; i < b->numel; i++) {
        bool zero = b->dtype == PARDO_I32 ? ((const int32_t *)p)[i] == 0 : ((const int64_t *)p)[i] == 0;
        if (zero)
            return pardo_errorf(st, PARDO_ERUNTIME, "integer division by zero: input 1 'B' element %lld is 0",
                                (long long)i);
    }
    return PARDO_OK;
}

/* Runs C = OP(A, B); is_div checks integer divisors for zeros first. */
static int binary_run(pardo_kernel_ctx *ctx, const binary_fn kernels[4], bool is_div) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    if (a->dtype != b->dtype || a->dtype < PARDO_F32 || a->dtype > PARDO_I64)
        return pardo_errorf(ctx->st, PARDO_ESHAPE,
                            "inputs have dtypes %s and %s, expected one of float32, float64, int32, int64 for both",
                            pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    pardo_bcast2 plan;
    int rc = pardo_bcast2_plan(a->ndim, a->shape, b->ndim, b->shape, &plan, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (is_div && pardo_dtype_is_int(a->dtype) && plan.numel > 0 && (rc = check_int_divisor(b, ctx->st)) != PARDO_OK)
        return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, a->dtype, plan.ndim, plan.shape);
    if (!y) return ctx->st->code;
    if (plan.numel > 0) kernels[a->dtype](&plan, pardo_tensor_data(a), pardo_tensor_data(b), pardo_tensor_data(y));
    return PARDO_OK;
}

#define BINARY_OP(NAME, IS_DIV, DOC)                                                                                   \
    static int NAME##_cpu(pardo_kernel_ctx *ctx) { return binary_run(ctx, NAME##_kernels, IS_DIV); }                   \
    const pardo_op_def pardo_op_##NAME = {                                                                             \
        .type = #NAME,                                                                                                 \
        .doc = DOC,                                                                                                    \
        .inputs = ab_in,                                                                                               \
        .n_inputs = 2,                                                                                                 \
        .outputs = c_out,                                                                                              \
        .n_outputs = 1,                                                                                                \
        .infer = binary_infer,                                                                                         \
        .cpu = NAME##_cpu,                                                                                             \
        .cuda = pardo_cuda_##NAME,                                                                                     \
        .inplace = true,                                                                                               \
    };

BINARY_OP(add, false, "C = A + B, broadcasting like numpy (float32, float64, int32, int64)")
BINARY_OP(sub, false, "C = A - B, broadcasting like numpy (float32, float64, int32, int64)")
BINARY_OP(mul, false, "C = A * B, broadcasting like numpy (float32, float64, int32, int64)")
BINARY_OP(div, true, "C = A / B, broadcasting like numpy; ints truncate toward zero, a zero int divisor is an error")

/* ---- unary float ops ---- */

static const pardo_arg_def x_in[] = {{"X", "input tensor (float32 or float64)", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "result, of X's dtype and shape", false, false}};

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

static int unary_infer(pardo_infer_ctx *ctx) {
    int rc = pardo_expect_dtype(ctx->in[0], "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

/* Parameters of the unary ops that take some (scale). */
typedef struct unary_args {
    double scale, bias;
} unary_args;

typedef void (*unary_fn)(const void *x, void *y, int64_t n, const unary_args *args);

/* Defines NAME, y[i] = f(x[i]) over n elements of type T, where BODY sets r
 * from v, values of type elem_t (= T); it may use s = scale and c = bias. Math calls
 * resolve to the float or double functions through <tgmath.h>. */
#define UNARY_KERNEL(NAME, T, ...)                                                                                     \
    static void NAME(const void *vx, void *vy, int64_t n, const unary_args *args) {                                    \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        typedef T elem_t;                                                                                              \
        const elem_t s = (elem_t)args->scale, c = (elem_t)args->bias;                                                  \
        (void)s;                                                                                                       \
        (void)c;                                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const elem_t v = x[i];                                                                                     \
            elem_t r;                                                                                                  \
            __VA_ARGS__                                                                                                \
            y[i] = r;                                                                                                  \
        }                                                                                                              \
    }

static int unary_run(pardo_kernel_ctx *ctx, unary_fn f32, unary_fn f64, const unary_args *args) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s, expected float32 or float64",
                            pardo_dtype_name(x->dtype));
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    (x->dtype == PARDO_F32 ? f32 : f64)(pardo_tensor_data(x), pardo_tensor_data(y), x->numel, args);
    return PARDO_OK;
}

#define UNARY_KERNELS(NAME, ...)                                                                                       \
    UNARY_KERNEL(NAME##_f32, float, __VA_ARGS__)                                                                       \
    UNARY_KERNEL(NAME##_f64, double, __VA_ARGS__)

/* A unary float op without attrs: kernels, CPU entry and op definition. */
#define UNARY_OP(NAME, DOC, ...)                                                                                       \
    UNARY_KERNELS(NAME, __VA_ARGS__)                                                                                   \
    static int NAME##_cpu(pardo_kernel_ctx *ctx) {                                                                     \
        static const unary_args none = {1.0, 0.0};                                                                     \
        return unary_run(ctx, NAME##_f32, NAME##_f64, &none);                                                          \
    }                                                                                                                  \
    const pardo_op_def pardo_op_##NAME = {                                                                             \
        .type = #NAME,                                                                                                 \
        .doc = DOC,                                                                                                    \
        .inputs = x_in,                                                                                                \
        .n_inputs = 1,                                                                                                 \
        .outputs = y_out,                                                                                              \
        .n_outputs = 1,                                                                                                \
        .infer = unary_infer,                                                                                          \
        .cpu = NAME##_cpu,                                                                                             \
        .cuda = pardo_cuda_##NAME,                                                                                     \
        .inplace = true,                                                                                               \
    };

/* relu keeps NaN (v < 0 is false for NaN), like max(x, 0) in ONNX. */
UNARY_OP(relu, "Y = max(X, 0)", r = v < 0 ? (elem_t)0 : v;)
/* sigmoid from exp(-|x|), which never overflows: stable for large |x|. */
UNARY_OP(sigmoid, "Y = 1 / (1 + exp(-X)), computed stably for large |X|",
         const elem_t e = exp(-fabs(v));
         r = v >= 0 ? 1 / (1 + e) : e / (1 + e);)
UNARY_OP(tanh, "Y = tanh(X)", r = tanh(v);)
UNARY_OP(exp, "Y = exp(X)", r = exp(v);)
UNARY_OP(log, "Y = log(X) (natural; -inf at 0, NaN below)", r = log(v);)

/* scale: y = x * scale + bias, computed in X's dtype. */
UNARY_KERNELS(scale, r = v * s + c;)

static const pardo_attr_def scale_attrs[] = {
    {"scale", PARDO_ATTR_FLOAT, "1.0", "factor multiplied into X"},
    {"bias", PARDO_ATTR_FLOAT, "0.0", "added after scaling"},
};

static int scale_args(const pardo_op *op, unary_args *args, pardo_status *st) {
    int rc = pardo_attr_float(op, "scale", 1.0, &args->scale, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "bias", 0.0, &args->bias, st);
    return rc;
}

static int scale_infer(pardo_infer_ctx *ctx) {
    unary_args args;
    int rc = scale_args(ctx->op, &args, ctx->st);
    return rc != PARDO_OK ? rc : unary_infer(ctx);
}

static int scale_cpu(pardo_kernel_ctx *ctx) {
    unary_args args;
    int rc = scale_args(ctx->op, &args, ctx->st);
    return rc != PARDO_OK ? rc : unary_run(ctx, scale_f32, scale_f64, &args);
}

const pardo_op_def pardo_op_scale = {
    .type = "scale",
    .doc = "Y = X * scale + bias",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = scale_attrs,
    .n_attrs = 2,
    .infer = scale_infer,
    .cpu = scale_cpu,
    .cuda = pardo_cuda_scale,
    .inplace = true,
};
