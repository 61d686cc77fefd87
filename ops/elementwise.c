/* elementwise.c - arithmetic ops: the binary ops add, sub, mul, div (numpy
 * broadcasting, float32/float64/int32/int64; their gradient ops are in
 * ops/elementwise_grad.c) and the unary float ops neg, exp, log, sqrt, abs,
 * pow, scale, clip, erf with their gradient ops (ops/unary.h). Each op: schema,
 * inference, CPU kernel. Integer add/sub/mul wrap around on overflow (two's
 * complement, like numpy) instead of being undefined; integer div truncates
 * toward zero (C, ONNX) and a zero divisor is a PARDO_ERUNTIME error. Every
 * kernel reads element i of a same-shaped input before writing element i of
 * the output, so the ops are safe in place (w = add(w, step)). CUDA kernels
 * live in ops/cuda/elementwise.cu. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "kernel_util.h"
#include "kernels.h"
#include "op.h"
#include "unary.h"

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

typedef void (*binary_fn)(const pardo_bcast2 *p, const void *a, const void *b, void *y, int64_t e0, int64_t e1);

/* Defines NAME, a broadcasting kernel of C = OP(A, B) on elements of type T
 * over output elements [e0, e1): the outer merged dims are walked with an
 * odometer, the innermost one is a plain loop with A, B or neither held
 * fixed. */
#define BINARY_KERNEL(NAME, T, U, OP)                                                                                  \
    PARDO_SIMD_CLONES static void NAME(const pardo_bcast2 *p, const void *va, const void *vb, void *vy, int64_t e0,  \
                                       int64_t e1) {                                                            \
        const T *a = va, *b = vb;                                                                                      \
        T *y = vy;                                                                                                     \
        const int inner = p->nd - 1;                                                                                   \
        const int64_t n = p->dims[inner], sa = p->sa[inner], sb = p->sb[inner];                                        \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, inner, p->dims, p->sa, p->sb);                                                              \
        pardo_odo_seek(&o, e0 / n);                                                                                    \
        for (int64_t e = e0, col = e0 % n; e < e1; col = 0, pardo_odo_next(&o)) {                                      \
            const int64_t cnt = n - col < e1 - e ? n - col : e1 - e;                                                   \
            const T *pa = a + o.off[0] + col * sa, *pb = b + o.off[1] + col * sb; /* py may be pa (in place) */     \
            T *py = y + e;                                                                                             \
            if (sa && sb) {                                                                                            \
                for (int64_t i = 0; i < cnt; i++) py[i] = OP(T, U, pa[i], pb[i]);                                      \
            } else if (sa) {                                                                                           \
                const T bv = pb[0];                                                                                    \
                for (int64_t i = 0; i < cnt; i++) py[i] = OP(T, U, pa[i], bv);                                         \
            } else {                                                                                                   \
                const T av = pa[0];                                                                                    \
                for (int64_t i = 0; i < cnt; i++) py[i] = OP(T, U, av, pb[i]);                                         \
            }                                                                                                          \
            e += cnt;                                                                                                  \
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

/* One run of a binary kernel over ranges of output elements
 * (pardo_run_chunks: big tensors of block 0 split over the threads). */
typedef struct binary_job {
    binary_fn fn;
    const pardo_bcast2 *plan;
    const void *a, *b;
    void *y;
} binary_job;

static void binary_range(void *arg, int64_t e0, int64_t e1) {
    const binary_job *j = arg;
    j->fn(j->plan, j->a, j->b, j->y, e0, e1);
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
    binary_job j = {kernels[a->dtype], &plan, pardo_tensor_data(a), pardo_tensor_data(b), pardo_tensor_data(y)};
    return pardo_run_chunks(ctx, plan.numel, binary_range, &j);
}

/* The gradient ops of the binary ops never read C; add_grad and sub_grad
 * read no operand value either, only its shape, which an operand that
 * fills the output has anyway (dA is then dC): leave those out, so that they
 * can be freed after their forward readers. */
static int binary_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    const pardo_op *f = req->fwd;
    uint64_t drop_in = 0;
    bool shape_only = strcmp(f->type, "add") == 0 || strcmp(f->type, "sub") == 0;
    if (shape_only && f->n_in == 2 && f->n_out == 1 && req->out_grads[0][0])
        for (int k = 0; k < 2; k++)
            if (pardo_grad_operand_fills_output(req, f->in[k], f->in[1 - k], f->out[0])) drop_in |= (uint64_t)1 << k;
    return pardo_grad_wired(req, blk, drop_in, 1, st);
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
        .grad = binary_grad_build,                                                                                     \
    };

BINARY_OP(add, false, "C = A + B, broadcasting like numpy (float32, float64, int32, int64; gradient: floats)")
BINARY_OP(sub, false, "C = A - B, broadcasting like numpy (float32, float64, int32, int64; gradient: floats)")
BINARY_OP(mul, false, "C = A * B, broadcasting like numpy (float32, float64, int32, int64; gradient: floats)")
BINARY_OP(div, true,
          "C = A / B, broadcasting like numpy (float32, float64, int32, int64 truncating toward zero, a zero int "
          "divisor is an error; gradient: floats)")

/* ---- unary float ops (float32, float64), each with its gradient op ---- */

UNARY_OP_BUILT(neg, "Y = -X (float32, float64)", NULL, 0, NULL, NULL, pardo_grad_from_output, r = -v;)
UNARY_GRAD_OP_FROM_Y(neg, "dX = -dY (gradient of neg; float32, float64)", NULL, 0, NULL, r = -g;)

UNARY_OP_BUILT(exp, "Y = exp(X) (float32, float64)", NULL, 0, NULL, pardo_cuda_exp, pardo_grad_from_output,
               r = exp(v);)
UNARY_GRAD_OP_FROM_Y(exp, "dX = dY * Y (gradient of exp; float32, float64)", NULL, 0, NULL, r = g * w;)

UNARY_OP(log, "Y = log(X) (natural; -inf at 0, NaN below; float32, float64)", NULL, 0, NULL, pardo_cuda_log,
         r = log(v);)
UNARY_GRAD_OP(log, "dX = dY / X (gradient of log; float32, float64)", NULL, 0, NULL, r = g / v;)

UNARY_OP_BUILT(sqrt, "Y = sqrt(X) (NaN below 0; float32, float64)", NULL, 0, NULL, NULL, pardo_grad_from_output,
               r = sqrt(v);)
UNARY_GRAD_OP_FROM_Y(sqrt, "dX = dY / (2 Y) (gradient of sqrt, inf at 0; float32, float64)", NULL, 0, NULL,
                     r = g / (w + w);)

UNARY_OP(abs, "Y = |X| (float32, float64)", NULL, 0, NULL, NULL, r = fabs(v);)
UNARY_GRAD_OP(abs, "dX = dY * sign(X), 0 where X is 0 (gradient of abs; float32, float64)", NULL, 0, NULL,
              r = v > 0 ? g : (v < 0 ? -g : (elem_t)0);)

/* pow: p = exponent. */
static const pardo_attr_def pow_attrs[] = {{"exponent", PARDO_ATTR_FLOAT, NULL, "the power X is raised to"}};

static int pow_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    if (!pardo_attr(op, "exponent")) return pardo_errorf(st, PARDO_EINVAL, "attr 'exponent' is required");
    a->q = 0;
    return pardo_attr_float(op, "exponent", 0.0, &a->p, st);
}

UNARY_OP(pow, "Y = X ** exponent (C pow: NaN for X < 0 with a non-integer exponent; float32, float64)", pow_attrs, 1,
         pow_args, NULL, r = pow(v, p);)
UNARY_GRAD_OP(pow, "dX = dY * exponent * X ** (exponent - 1), 0 for exponent 0 (gradient of pow wrt X; float32, "
              "float64)", pow_attrs, 1,
              pow_args, r = p == 0 ? (elem_t)0 : g * p * pow(v, p - 1);)

/* scale: y = x * scale + bias, computed in X's dtype; p = scale, q = bias. */
static const pardo_attr_def scale_attrs[] = {
    {"scale", PARDO_ATTR_FLOAT, "1.0", "factor multiplied into X"},
    {"bias", PARDO_ATTR_FLOAT, "0.0", "added after scaling"},
};

static int scale_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    int rc = pardo_attr_float(op, "scale", 1.0, &a->p, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "bias", 0.0, &a->q, st);
    return rc;
}

UNARY_OP_BUILT(scale, "Y = X * scale + bias (float32, float64)", scale_attrs, 2, scale_args, pardo_cuda_scale,
               pardo_grad_from_output, r = v * p + q;)
UNARY_GRAD_OP_FROM_Y(scale, "dX = dY * scale (gradient of scale; float32, float64)", scale_attrs, 2, scale_args, r = g * p;)

/* clip like ONNX Clip: y = min(max(x, min), max), so min > max gives max
 * everywhere; NaN stays NaN. p = min, q = max (+-inf when absent). */
static const pardo_attr_def clip_attrs[] = {
    {"min", PARDO_ATTR_FLOAT, "null", "lower bound; absent: none"},
    {"max", PARDO_ATTR_FLOAT, "null", "upper bound; absent: none"},
};

static int clip_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    int rc = pardo_attr_float(op, "min", -INFINITY, &a->p, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "max", INFINITY, &a->q, st);
    return rc;
}

UNARY_OP(clip, "Y = min(max(X, min), max) like ONNX Clip; an absent bound is none (float32, float64)", clip_attrs, 2,
         clip_args, NULL, r = v < p ? p : v; r = r > q ? q : r;)
UNARY_GRAD_OP(clip, "dX = dY where min <= X <= max, else 0 (gradient of clip; float32, float64)", clip_attrs, 2,
              clip_args,
              r = v >= p && v <= q ? g : (elem_t)0;)

/* erf like ONNX Erf; PyTorch exports the exact GELU as x * 0.5 * (1 + erf(x / sqrt 2)). */
UNARY_OP(erf, "Y = erf(X), the error function (float32, float64)", NULL, 0, NULL, NULL, r = erf(v);)
UNARY_GRAD_OP(erf, "dX = dY * 2 / sqrt(pi) * exp(-X^2) (gradient of erf; float32, float64)", NULL, 0, NULL,
              r = g * (elem_t)1.1283791670955126 * exp(-v * v);)
