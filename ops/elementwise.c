/* elementwise.c - arithmetic ops: the binary ops add, sub, mul, div (numpy
 * broadcasting, every numeric dtype: the ints narrower than 32 bits and the
 * unsigned ones exact in their own type, float16 and bfloat16 through
 * float32 rounded once per op; their gradient ops (floats) are in
 * ops/elementwise_grad.c) and the unary float ops neg, exp, log, sqrt, abs,
 * pow, scale, clip, erf with their gradient ops (ops/unary.h); pow also
 * takes its exponent as input 1 broadcast against X, like ONNX Pow (any of
 * the four numeric dtypes each, ints exact; pow_grad then gives dX and dE,
 * summed in place to their shapes). Each op: schema,
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

#include "core/half.h"
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
/* add, sub, mul, div: every numeric dtype */
static const pardo_dtype arith_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_F16, PARDO_BF16, PARDO_I8,  PARDO_I16,
                                           PARDO_I32, PARDO_I64, PARDO_U8,  PARDO_U16,  PARDO_U32, PARDO_U64};

static int binary_infer(pardo_infer_ctx *ctx) { return pardo_infer_binary_same_dtype(ctx, arith_dtypes, 12); }

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

/* float16 and bfloat16 (T uint16_t, their bits; U unused): computed in float32, rounded once. For the four
 * operations float32's 24 bits hold the exact result well enough that this rounding is the correctly rounded
 * one (24 >= 2 * 11 + 2). */
#define OP_F16(OP, x, y) pardo_f16_from_f32(OP(float, float, pardo_f16_to_f32(x), pardo_f16_to_f32(y)))
#define OP_BF16(OP, x, y) pardo_bf16_from_f32(OP(float, float, pardo_bf16_to_f32(x), pardo_bf16_to_f32(y)))
#define OP_ADD_H(T, U, x, y) OP_F16(OP_ADD, x, y)
#define OP_SUB_H(T, U, x, y) OP_F16(OP_SUB, x, y)
#define OP_MUL_H(T, U, x, y) OP_F16(OP_MUL, x, y)
#define OP_DIV_H(T, U, x, y) OP_F16(OP_DIV_F, x, y)
#define OP_ADD_B(T, U, x, y) OP_BF16(OP_ADD, x, y)
#define OP_SUB_B(T, U, x, y) OP_BF16(OP_SUB, x, y)
#define OP_MUL_B(T, U, x, y) OP_BF16(OP_MUL, x, y)
#define OP_DIV_B(T, U, x, y) OP_BF16(OP_DIV_F, x, y)
/* Unsigned division: y != 0 is checked before. */
#define OP_DIV_U(T, U, x, y) ((T)((x) / (y)))

/* The kernels of one op, indexed by dtype (NULL for bool). The 8- and 16-bit ints compute through uint32_t,
 * which C does not promote to int (a uint16_t product would overflow int). */
#define BINARY_KERNELS(NAME, OP_F, OP_I, OP_U, OP_H, OP_B)                                                             \
    BINARY_KERNEL(NAME##_f32, float, float, OP_F)                                                                      \
    BINARY_KERNEL(NAME##_f64, double, double, OP_F)                                                                    \
    BINARY_KERNEL(NAME##_i32, int32_t, uint32_t, OP_I)                                                                 \
    BINARY_KERNEL(NAME##_i64, int64_t, uint64_t, OP_I)                                                                 \
    BINARY_KERNEL(NAME##_u8, uint8_t, uint32_t, OP_U)                                                                  \
    BINARY_KERNEL(NAME##_i8, int8_t, uint32_t, OP_I)                                                                   \
    BINARY_KERNEL(NAME##_i16, int16_t, uint32_t, OP_I)                                                                 \
    BINARY_KERNEL(NAME##_u16, uint16_t, uint32_t, OP_U)                                                                \
    BINARY_KERNEL(NAME##_u32, uint32_t, uint32_t, OP_U)                                                                \
    BINARY_KERNEL(NAME##_u64, uint64_t, uint64_t, OP_U)                                                                \
    BINARY_KERNEL(NAME##_f16, uint16_t, float, OP_H)                                                                   \
    BINARY_KERNEL(NAME##_bf16, uint16_t, float, OP_B)                                                                  \
    static const binary_fn NAME##_kernels[PARDO_DTYPE_COUNT] = PARDO_ORDERED_TABLE(NAME);

BINARY_KERNELS(add, OP_ADD, OP_ADD, OP_ADD, OP_ADD_H, OP_ADD_B)
BINARY_KERNELS(sub, OP_SUB, OP_SUB, OP_SUB, OP_SUB_H, OP_SUB_B)
BINARY_KERNELS(mul, OP_MUL, OP_MUL, OP_MUL, OP_MUL_H, OP_MUL_B)
BINARY_KERNELS(div, OP_DIV_F, OP_DIV_I, OP_DIV_U, OP_DIV_H, OP_DIV_B)

/* PARDO_ERUNTIME when an integer divisor holds a zero. */
static int check_int_divisor(const pardo_tensor *b, pardo_status *st) {
    const unsigned char *p = pardo_tensor_data(b);
    const size_t es = pardo_dtype_size(b->dtype);
    for (int64_t i = 0; i < b->numel; i++) {
        uint64_t v = 0; /* the element's bytes: zero exactly when the integer is */
        memcpy(&v, p + (size_t)i * es, es);
        if (v == 0)
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
static int binary_run(pardo_kernel_ctx *ctx, const binary_fn kernels[PARDO_DTYPE_COUNT], bool is_div) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    if (a->dtype != b->dtype || a->dtype < 0 || a->dtype >= PARDO_DTYPE_COUNT || !kernels[a->dtype])
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs have dtypes %s and %s, expected the same numeric dtype",
                            pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    pardo_bcast2 plan;
    int rc = pardo_bcast2_plan(a->ndim, a->shape, b->ndim, b->shape, &plan, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (is_div && pardo_dtype_is_integer(a->dtype) && plan.numel > 0 &&
        (rc = check_int_divisor(b, ctx->st)) != PARDO_OK)
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
        .all_dtypes = true,                                                                                            \
    };

BINARY_OP(add, false, "C = A + B, broadcasting like numpy (every numeric dtype; ints wrap around, float16 and "
                          "bfloat16 computed in float32 and rounded once; gradient: float32, float64)")
BINARY_OP(sub, false, "C = A - B, broadcasting like numpy (every numeric dtype; ints wrap around, float16 and "
                          "bfloat16 computed in float32 and rounded once; gradient: float32, float64)")
BINARY_OP(mul, false, "C = A * B, broadcasting like numpy (every numeric dtype; ints wrap around, float16 and "
                          "bfloat16 computed in float32 and rounded once; gradient: float32, float64)")
BINARY_OP(div, true,
          "C = A / B, broadcasting like numpy (every numeric dtype; ints truncate toward zero, a zero int divisor is "
          "an error; float16 and bfloat16 computed in float32 and rounded once; gradient: float32, float64)")

/* ---- unary ops (float32, float64, the half types through float32; neg and abs the integers too), each with its
 * gradient op (float32, float64) ---- */

/* neg and abs of the integers wrap at the type's minimum (and neg of an unsigned one), as NumPy's do */
UNARY_INT_KERNELS(neg, (uelem_t)0 - (uelem_t)v, (uelem_t)0 - (uelem_t)v)
UNARY_OP_INTS(neg, "Y = -X (float32, float64, float16, bfloat16; the integers wrapping)", NULL, 0, NULL, NULL,
              pardo_grad_from_output, neg_ints, r = -v;)
UNARY_GRAD_OP_FROM_Y(neg, "dX = -dY (gradient of neg; float32, float64)", NULL, 0, NULL, r = -g;)

UNARY_OP_BUILT(exp, "Y = exp(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, pardo_cuda_exp,
               pardo_grad_from_output, r = exp(v);)
UNARY_GRAD_OP_FROM_Y(exp, "dX = dY * Y (gradient of exp; float32, float64)", NULL, 0, NULL, r = g * w;)

UNARY_OP(log, "Y = log(X) (natural; -inf at 0, NaN below; float32, float64, float16, bfloat16)", NULL, 0, NULL,
         pardo_cuda_log, r = log(v);)
UNARY_GRAD_OP(log, "dX = dY / X (gradient of log; float32, float64)", NULL, 0, NULL, r = g / v;)

UNARY_OP_BUILT(sqrt, "Y = sqrt(X) (NaN below 0; float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL,
               pardo_grad_from_output, r = sqrt(v);)
UNARY_GRAD_OP_FROM_Y(sqrt, "dX = dY / (2 Y) (gradient of sqrt, inf at 0; float32, float64)", NULL, 0, NULL,
                     r = g / (w + w);)

UNARY_INT_KERNELS(abs, v < 0 ? (uelem_t)0 - (uelem_t)v : (uelem_t)v, v)
UNARY_OP_INTS(abs, "Y = |X| (float32, float64, float16, bfloat16; the integers, the minimum of a signed one "
                   "wrapping to itself)",
              NULL, 0, NULL, NULL, pardo_grad_standard, abs_ints, r = fabs(v);)
UNARY_GRAD_OP(abs, "dX = dY * sign(X), 0 where X is 0 (gradient of abs; float32, float64)", NULL, 0, NULL,
              r = v > 0 ? g : (v < 0 ? -g : (elem_t)0);)

/* pow: Y = X ** E, E the attr exponent (p; the unary form: float32, float64) or, like ONNX Pow, input 1 broadcast
 * against X (X and E each float32, float64, int32 or int64; Y X's dtype). */
static const pardo_attr_def pow_attrs[] = {
    {"exponent", PARDO_ATTR_FLOAT, "null", "the power X is raised to, when input 1 'E' is absent"}};
static const pardo_arg_def pow_in[] = {
    {"X", "the base (float32 or float64; with E also int32, int64)", false, false},
    {"E", "the exponent, broadcast against X like numpy (any numeric dtype; \"\": attr exponent)", true, false},
};
static const pardo_arg_def pow_grad_in[] = {
    {"X", "the forward input", false, false},
    {"E", "the forward input E (or \"\")", true, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def pow_grad_out[] = {
    {"dX", "gradient of X, summed to its shape", true, false},
    {"dE", "gradient of E, summed to its shape", true, false},
};

static int pow_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    if (!pardo_attr(op, "exponent")) return pardo_errorf(st, PARDO_EINVAL, "attr 'exponent' is required");
    a->q = 0;
    return pardo_attr_float(op, "exponent", 0.0, &a->p, st);
}

UNARY_KERNEL(pow_f32, float, r = pow(v, p);)
UNARY_KERNEL(pow_f64, double, r = pow(v, p);)
UNARY_GRAD_KERNEL(pow_grad_f32, float, r = p == 0 ? (elem_t)0 : g * p * pow(v, p - 1);)
UNARY_GRAD_KERNEL(pow_grad_f64, double, r = p == 0 ? (elem_t)0 : g * p * pow(v, p - 1);)

static bool pow_has_e(int n_in, pardo_tensor *const *in) { return n_in > 1 && in[1]; }

static int pow_infer(pardo_infer_ctx *ctx) {
    if (!(ctx->n_in > 1 && ctx->in[1])) return pardo_unary_infer_ints(ctx, pow_args, NULL);
    const pardo_type *x = ctx->in[0], *e = ctx->in[1];
    int rc = pardo_expect_dtype(x, "input 0 'X'", binary_dtypes, 4, ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(e, "input 1 'E'", arith_dtypes, 12, ctx->st);
    if (rc == PARDO_OK) rc = pardo_broadcast_types(x, e, &ctx->out[0], ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0].dtype = x->dtype;
    return PARDO_OK;
}

/* Element i of t (any of the four numeric dtypes) as a double. */
static inline double num_at(const void *d, pardo_dtype dt, int64_t i) {
    switch (dt) {
    case PARDO_F32: return (double)((const float *)d)[i];
    case PARDO_F64: return ((const double *)d)[i];
    case PARDO_I32: return (double)((const int32_t *)d)[i];
    case PARDO_I64: return (double)((const int64_t *)d)[i];
    default: return pardo_elem_get_f64(d, dt, i); /* an exponent of the other dtypes */
    }
}

/* An integer exponent as an int64 (uint64 ones past int64's range clamp to it: any such power of an integer
 * other than 0, 1 or -1 wraps to 0 or overflows alike). */
static inline int64_t int_exp_at(const void *d, pardo_dtype dt, int64_t i) {
    if (dt == PARDO_I64) return ((const int64_t *)d)[i];
    if (dt == PARDO_U64) {
        const uint64_t u = ((const uint64_t *)d)[i];
        return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    return (int64_t)pardo_elem_get_f64(d, dt, i); /* exact below 2^32 */
}

/* b ** e in integers (e >= 0, wrapping like numpy); e < 0: C's truncation of the real power. */
static int64_t ipow(int64_t b, int64_t e) {
    if (e < 0) return (int64_t)pow((double)b, (double)e);
    uint64_t r = 1, base = (uint64_t)b;
    for (; e; e >>= 1, base *= base)
        if (e & 1) r *= base;
    return (int64_t)r;
}

static int pow_cpu(pardo_kernel_ctx *ctx) {
    if (!pow_has_e(ctx->n_in, ctx->in)) return pardo_unary_run_ints(ctx, pow_f32, pow_f64, NULL, pow_args);
    pardo_tensor *x = ctx->in[0], *e = ctx->in[1];
    if (x->dtype < PARDO_F32 || x->dtype > PARDO_I64 || e->dtype < 0 || e->dtype >= PARDO_DTYPE_COUNT ||
        e->dtype == PARDO_BOOL)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs are %s and %s, expected X float32, float64, int32 or int64 "
                            "and a numeric E", pardo_dtype_name(x->dtype), pardo_dtype_name(e->dtype));
    pardo_bcast2 p;
    int rc = pardo_bcast2_plan(x->ndim, x->shape, e->ndim, e->shape, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, p.ndim, p.shape);
    if (!y) return ctx->st->code;
    const void *px = pardo_tensor_data(x), *pe = pardo_tensor_data(e);
    void *py = pardo_tensor_data(y);
    const bool ints = pardo_dtype_is_int(x->dtype) && pardo_dtype_is_integer(e->dtype);
    pardo_odo o;
    pardo_odo_init(&o, p.nd, p.dims, p.sa, p.sb);
    for (int64_t i = 0; i < p.numel; i++, pardo_odo_next(&o)) {
        const double b = num_at(px, x->dtype, o.off[0]), ex = num_at(pe, e->dtype, o.off[1]);
        switch (x->dtype) {
        case PARDO_F32: ((float *)py)[i] = (float)pow(b, ex); break;
        case PARDO_F64: ((double *)py)[i] = pow(b, ex); break;
        case PARDO_I32:
            ((int32_t *)py)[i] =
                (int32_t)(ints ? ipow((int64_t)b, int_exp_at(pe, e->dtype, o.off[1])) : (int64_t)pow(b, ex));
            break;
        default: /* int64: exact in integers */
            ((int64_t *)py)[i] = ints ? ipow(((const int64_t *)px)[o.off[0]], int_exp_at(pe, e->dtype, o.off[1]))
                                      : (int64_t)pow(b, ex);
            break;
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_pow = {
    .type = "pow",
    .doc = "Y = X ** exponent (attr; float32, float64), or X ** E broadcast like numpy, like ONNX Pow (X float32, "
           "float64, int32, int64, E any numeric dtype; Y X's dtype, ints exact); C pow: NaN for X < 0 with a "
           "non-integer exponent "
           "(gradient: floats)",
    .inputs = pow_in,
    .n_inputs = 2,
    .outputs = pardo_unary_y_out,
    .n_outputs = 1,
    .attrs = pow_attrs,
    .n_attrs = 1,
    .infer = pow_infer,
    .cpu = pow_cpu,
    .inplace = true, /* element i of Y reads only element i of X where the two can be one tensor (same shape) */
    .grad = pardo_grad_standard,
    .all_dtypes = true, /* E: every numeric dtype; X as pow_infer says */
};

/* pow_grad's inputs: X, E, Y, dY; a graph written before input E has X, Y, dY (3 inputs), the unary form's. */
static void pow_grad_inputs(int n_in, pardo_tensor *const *in, pardo_tensor **e, pardo_tensor **y, pardo_tensor **dy) {
    *e = n_in == 4 ? in[1] : NULL;
    *y = n_in == 3 ? in[1] : n_in > 2 ? in[2] : NULL;
    *dy = n_in == 3 ? in[2] : n_in > 3 ? in[3] : NULL;
}

static int pow_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *e = ctx->n_in == 4 ? ctx->in[1] : NULL;
    if (!e) {
        const pardo_type *three[3] = {ctx->in[0], ctx->n_in == 3 ? ctx->in[1] : ctx->in[2],
                                      ctx->n_in == 3 ? ctx->in[2] : ctx->n_in > 3 ? ctx->in[3] : NULL};
        pardo_infer_ctx c3 = *ctx;
        c3.in = three;
        c3.n_in = 3;
        c3.n_out = 1;
        int rc = pardo_unary_grad_infer(&c3, pow_args);
        if (rc == PARDO_OK && ctx->n_out > 1) ctx->out[1] = *ctx->in[0];
        return rc;
    }
    const pardo_type *x = ctx->in[0];
    int rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", binary_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    if (ctx->n_out > 1) ctx->out[1] = *e;
    return PARDO_OK;
}

/* Defines NAME: dX[x's element] += dY E X^(E - 1) and dE[e's element] += dY Y log X over the broadcast output
 * (dx, de NULL: not wanted; both zeroed before). */
#define POW_GRAD_BCAST(NAME, T)                                                                                        \
    static void NAME(const pardo_bcast2 *p, const T *x, const void *e, pardo_dtype edt, const T *y, const T *dy,      \
                     T *dx, T *de) {                                                                                   \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, p->nd, p->dims, p->sa, p->sb);                                                              \
        for (int64_t i = 0; i < p->numel; i++, pardo_odo_next(&o)) {                                                   \
            const double b = (double)x[o.off[0]], ex = num_at(e, edt, o.off[1]), g = (double)dy[i];                    \
            if (dx && ex != 0) dx[o.off[0]] += (T)(g * ex * pow(b, ex - 1));                                           \
            if (de && b > 0) de[o.off[1]] += (T)(g * (double)y[i] * log(b));                                           \
        }                                                                                                              \
    }

POW_GRAD_BCAST(pow_grad_bcast_f32, float)
POW_GRAD_BCAST(pow_grad_bcast_f64, double)

static int pow_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *e, *y, *dy;
    pow_grad_inputs(ctx->n_in, ctx->in, &e, &y, &dy);
    if (!e) {
        pardo_tensor *three[3] = {x, y, dy};
        pardo_kernel_ctx c3 = *ctx;
        c3.in = three;
        c3.n_in = 3;
        c3.n_out = 1;
        if (ctx->n_out > 1 && pardo_kernel_wants_output(ctx, 1))
            return pardo_errorf(ctx->st, PARDO_EINVAL, "output 1 'dE' wanted, but input 1 'E' is absent");
        return pardo_unary_grad_run(&c3, pow_grad_f32, pow_grad_f64, pow_args);
    }
    if (!pardo_dtype_is_float(x->dtype) || !y || y->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs 'X' and 'Y' must be float32 or float64 of one dtype");
    pardo_bcast2 p;
    int rc = pardo_bcast2_plan(x->ndim, x->shape, e->ndim, e->shape, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (dy && (dy->dtype != x->dtype || dy->numel != p.numel))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' must have Y's dtype and shape");
    pardo_tensor *dx = NULL, *de = NULL;
    if (pardo_kernel_wants_output(ctx, 0) && !(dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape)))
        return ctx->st->code;
    if (ctx->n_out > 1 && pardo_kernel_wants_output(ctx, 1)) {
        if (!pardo_dtype_is_float(e->dtype) || e->dtype != x->dtype)
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 1 'E' is %s, which has no gradient here (X is %s)",
                                pardo_dtype_name(e->dtype), pardo_dtype_name(x->dtype));
        if (!(de = pardo_kernel_output(ctx, 1, e->dtype, e->ndim, e->shape))) return ctx->st->code;
    }
    if (dx) pardo_tensor_zero(dx);
    if (de) pardo_tensor_zero(de);
    if (!dy || p.numel == 0) return PARDO_OK;
    const void *pe = pardo_tensor_data(e);
    void *pdx = dx ? pardo_tensor_data(dx) : NULL, *pde = de ? pardo_tensor_data(de) : NULL;
    if (x->dtype == PARDO_F32)
        pow_grad_bcast_f32(&p, pardo_tensor_data(x), pe, e->dtype, pardo_tensor_data(y), pardo_tensor_data(dy), pdx,
                           pde);
    else pow_grad_bcast_f64(&p, pardo_tensor_data(x), pe, e->dtype, pardo_tensor_data(y), pardo_tensor_data(dy), pdx,
                            pde);
    return PARDO_OK;
}

const pardo_op_def pardo_op_pow_grad = {
    .type = "pow_grad",
    .doc = "dX = dY * E * X ** (E - 1), 0 where E is 0; dE = dY * Y * log(X) where X > 0, 0 elsewhere; each summed to "
           "its input's shape (gradient of pow; float32, float64)",
    .inputs = pow_grad_in,
    .n_inputs = 4,
    .outputs = pow_grad_out,
    .n_outputs = 2,
    .attrs = pow_attrs,
    .n_attrs = 1,
    .infer = pow_grad_infer,
    .cpu = pow_grad_cpu,
};

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

UNARY_OP_BUILT(scale, "Y = X * scale + bias (float32, float64, float16, bfloat16)", scale_attrs, 2, scale_args,
               pardo_cuda_scale, pardo_grad_from_output, r = v * p + q;)
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

UNARY_OP(clip,
         "Y = min(max(X, min), max) like ONNX Clip; an absent bound is none (float32, float64, float16, bfloat16)",
         clip_attrs, 2, clip_args, NULL, r = v < p ? p : v;
         r = r > q ? q : r;)
UNARY_GRAD_OP(clip, "dX = dY where min <= X <= max, else 0 (gradient of clip; float32, float64)", clip_attrs, 2,
              clip_args,
              r = v >= p && v <= q ? g : (elem_t)0;)

/* erf like ONNX Erf; PyTorch exports the exact GELU as x * 0.5 * (1 + erf(x / sqrt 2)). */
UNARY_OP(erf, "Y = erf(X), the error function (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL, r = erf(v);)
UNARY_GRAD_OP(erf, "dX = dY * 2 / sqrt(pi) * exp(-X^2) (gradient of erf; float32, float64)", NULL, 0, NULL,
              r = g * (elem_t)1.1283791670955126 * exp(-v * v);)
