/* compare.c - comparisons, logic and selection, like the ONNX operators of
 * the same meaning: equal (any dtype), less, greater, less_or_equal,
 * greater_or_equal (every numeric dtype; float16 and bfloat16 by the value
 * they encode), and, or, xor (bool),
 * each broadcasting A against B like numpy into a bool C; not (bool);
 * is_nan and is_inf (float32, float64 into bool, like ONNX IsNaN and IsInf
 * with detect_positive / detect_negative); where
 * (cond bool, X, Y of one dtype, all three broadcast) with where_grad (dX
 * and dY summed back to their shapes; none for cond). The comparisons and
 * logic ops have no gradient. NaN compares unequal to everything. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "index_util.h"
#include "kernel_util.h"
#include "op.h"

static const pardo_arg_def ab_in[] = {
    {"A", "first operand", false, false},
    {"B", "second operand, broadcast against A like numpy", false, false},
};
static const pardo_arg_def c_out[] = {{"C", "bool result, of the broadcast shape", false, false}};

/* the numeric dtypes, then bool (which equal takes too) */
static const pardo_dtype all_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_F16, PARDO_BF16, PARDO_I8,  PARDO_I16, PARDO_I32,
                                         PARDO_I64, PARDO_U8,  PARDO_U16, PARDO_U32,  PARDO_U64, PARDO_BOOL};
static const pardo_dtype bool_dtype[] = {PARDO_BOOL};

/* A and B of one dtype among the n allowed; C bool of the broadcast shape. */
static int compare_infer_of(pardo_infer_ctx *ctx, const pardo_dtype *allowed, int n) {
    int rc = pardo_infer_binary_same_dtype(ctx, allowed, n);
    if (rc == PARDO_OK) ctx->out[0].dtype = PARDO_BOOL;
    return rc;
}

static int equal_infer(pardo_infer_ctx *ctx) { return compare_infer_of(ctx, all_dtypes, 13); }
static int order_infer(pardo_infer_ctx *ctx) { return compare_infer_of(ctx, all_dtypes, 12); }
static int logic_infer(pardo_infer_ctx *ctx) { return compare_infer_of(ctx, bool_dtype, 1); }

typedef void (*compare_fn)(const pardo_bcast2 *p, const void *a, const void *b, uint8_t *y, int64_t e0, int64_t e1);

#define OP_EQ(x, y) ((x) == (y))
#define OP_LT(x, y) ((x) < (y))
#define OP_GT(x, y) ((x) > (y))
#define OP_LE(x, y) ((x) <= (y))
#define OP_GE(x, y) ((x) >= (y))
#define OP_AND(x, y) ((x) != 0 && (y) != 0)
#define OP_OR(x, y) ((x) != 0 || (y) != 0)
#define OP_XOR(x, y) (((x) != 0) != ((y) != 0))

/* Defines NAME, C = OP(A, B) as 0 or 1 over output elements [e0, e1) for
 * operands of type T: the outer merged dims walked with an odometer, the
 * innermost one a plain loop. */
#define COMPARE_KERNEL(NAME, T, OP) COMPARE_KERNEL_LOAD(NAME, T, OP, PARDO_LOAD_AS_IS)
#define COMPARE_KERNEL_LOAD(NAME, T, OP, LOAD)                                                                         \
    static void NAME(const pardo_bcast2 *p, const void *va, const void *vb, uint8_t *y, int64_t e0, int64_t e1) {      \
        const T *a = va, *b = vb;                                                                                      \
        const int inner = p->nd - 1;                                                                                   \
        const int64_t n = p->dims[inner], sa = p->sa[inner], sb = p->sb[inner];                                        \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, inner, p->dims, p->sa, p->sb);                                                              \
        pardo_odo_seek(&o, e0 / n);                                                                                    \
        for (int64_t e = e0, col = e0 % n; e < e1; col = 0, pardo_odo_next(&o)) {                                      \
            const int64_t cnt = n - col < e1 - e ? n - col : e1 - e;                                                   \
            const T *pa = a + o.off[0] + col * sa, *pb = b + o.off[1] + col * sb;                                      \
            for (int64_t i = 0; i < cnt; i++) y[e + i] = (uint8_t)OP(LOAD(pa[i * sa]), LOAD(pb[i * sb]));              \
            e += cnt;                                                                                                  \
        }                                                                                                              \
    }

/* The kernels of one comparison, indexed by dtype (NULL where the op does not take the dtype). */
#define COMPARE_KERNELS(NAME, OP, BOOL_FN)                                                                             \
    COMPARE_KERNEL(NAME##_f32, float, OP)                                                                              \
    COMPARE_KERNEL(NAME##_f64, double, OP)                                                                             \
    COMPARE_KERNEL(NAME##_i32, int32_t, OP)                                                                            \
    COMPARE_KERNEL(NAME##_i64, int64_t, OP)                                                                            \
    COMPARE_KERNEL(NAME##_u8, uint8_t, OP)                                                                             \
    COMPARE_KERNEL(NAME##_i8, int8_t, OP)                                                                              \
    COMPARE_KERNEL(NAME##_i16, int16_t, OP)                                                                            \
    COMPARE_KERNEL(NAME##_u16, uint16_t, OP)                                                                           \
    COMPARE_KERNEL(NAME##_u32, uint32_t, OP)                                                                           \
    COMPARE_KERNEL(NAME##_u64, uint64_t, OP)                                                                           \
    /* float16 and bfloat16 (their bits) compare as the values they encode */                                          \
    COMPARE_KERNEL_LOAD(NAME##_f16, uint16_t, OP, PARDO_LOAD_F16)                                                      \
    COMPARE_KERNEL_LOAD(NAME##_bf16, uint16_t, OP, PARDO_LOAD_BF16)                                                    \
    static const compare_fn NAME##_kernels[PARDO_DTYPE_COUNT] = {PARDO_ORDERED_ENTRIES(NAME), [PARDO_BOOL] = BOOL_FN};

COMPARE_KERNEL(equal_b8, uint8_t, OP_EQ)
COMPARE_KERNELS(equal, OP_EQ, equal_b8)
COMPARE_KERNELS(less, OP_LT, NULL)
COMPARE_KERNELS(greater, OP_GT, NULL)
COMPARE_KERNELS(less_or_equal, OP_LE, NULL)
COMPARE_KERNELS(greater_or_equal, OP_GE, NULL)
COMPARE_KERNEL(and_b8, uint8_t, OP_AND)
COMPARE_KERNEL(or_b8, uint8_t, OP_OR)
static const compare_fn and_kernels[PARDO_DTYPE_COUNT] = {[PARDO_BOOL] = and_b8};
static const compare_fn or_kernels[PARDO_DTYPE_COUNT] = {[PARDO_BOOL] = or_b8};
COMPARE_KERNEL(xor_b8, uint8_t, OP_XOR)
static const compare_fn xor_kernels[PARDO_DTYPE_COUNT] = {[PARDO_BOOL] = xor_b8};

typedef struct compare_job {
    compare_fn fn;
    const pardo_bcast2 *plan;
    const void *a, *b;
    uint8_t *y;
} compare_job;

static void compare_range(void *arg, int64_t e0, int64_t e1) {
    const compare_job *j = arg;
    j->fn(j->plan, j->a, j->b, j->y, e0, e1);
}

static int compare_run(pardo_kernel_ctx *ctx, const compare_fn kernels[PARDO_DTYPE_COUNT]) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    if (a->dtype != b->dtype || a->dtype < 0 || a->dtype >= PARDO_DTYPE_COUNT || !kernels[a->dtype])
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs have dtypes %s and %s, which this op does not compare",
                            pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype));
    pardo_bcast2 plan;
    int rc = pardo_bcast2_plan(a->ndim, a->shape, b->ndim, b->shape, &plan, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_BOOL, plan.ndim, plan.shape);
    if (!y) return ctx->st->code;
    if (plan.numel == 0) return PARDO_OK;
    compare_job j = {kernels[a->dtype], &plan, pardo_tensor_data(a), pardo_tensor_data(b), pardo_tensor_data(y)};
    return pardo_run_chunks(ctx, plan.numel, compare_range, &j);
}

#define COMPARE_OP(NAME, INFER, DOC)                                                                                   \
    static int NAME##_cpu(pardo_kernel_ctx *ctx) { return compare_run(ctx, NAME##_kernels); }                          \
    const pardo_op_def pardo_op_##NAME = {                                                                             \
        .type = #NAME,                                                                                                 \
        .doc = DOC,                                                                                                    \
        .inputs = ab_in,                                                                                               \
        .n_inputs = 2,                                                                                                 \
        .outputs = c_out,                                                                                              \
        .n_outputs = 1,                                                                                                \
        .infer = INFER,                                                                                                \
        .cpu = NAME##_cpu,                                                                                             \
        .all_dtypes = true,                                                                                            \
    };

COMPARE_OP(equal, equal_infer, "C = (A == B), bool, broadcasting like numpy, like ONNX Equal (any dtype; no gradient)")
COMPARE_OP(less, order_infer,
           "C = (A < B), bool, broadcasting like numpy, like ONNX Less (every numeric dtype; no gradient)")
COMPARE_OP(greater, order_infer,
           "C = (A > B), bool, broadcasting like numpy, like ONNX Greater (every numeric dtype; no "
           "gradient)")
COMPARE_OP(less_or_equal, order_infer,
           "C = (A <= B), bool, broadcasting like numpy, like ONNX LessOrEqual (every numeric dtype; no "
           "gradient)")
COMPARE_OP(greater_or_equal, order_infer,
           "C = (A >= B), bool, broadcasting like numpy, like ONNX GreaterOrEqual (every numeric dtype; "
           "no gradient)")
COMPARE_OP(and, logic_infer, "C = A and B, bool, broadcasting like numpy, like ONNX And (bool; no gradient)")
COMPARE_OP(or, logic_infer, "C = A or B, bool, broadcasting like numpy, like ONNX Or (bool; no gradient)")
COMPARE_OP(xor, logic_infer, "C = A xor B, bool, broadcasting like numpy, like ONNX Xor (bool; no gradient)")

/* ---- not ---- */

static const pardo_arg_def x_in[] = {{"X", "bool input", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "bool, X's shape", false, false}};

static int not_infer(pardo_infer_ctx *ctx) {
    int rc = pardo_expect_dtype(ctx->in[0], "input 0 'X'", bool_dtype, 1, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

static int not_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    if (x->dtype != PARDO_BOOL)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s, expected bool",
                            pardo_dtype_name(x->dtype));
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_BOOL, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    const uint8_t *px = pardo_tensor_data(x);
    uint8_t *py = pardo_tensor_data(y);
    for (int64_t i = 0; i < x->numel; i++) py[i] = px[i] == 0;
    return PARDO_OK;
}

const pardo_op_def pardo_op_not = {
    .type = "not",
    .doc = "Y = not X, like ONNX Not (bool; no gradient)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .infer = not_infer,
    .cpu = not_cpu,
    .inplace = true,
};

/* ---- is_nan, is_inf: float predicates ---- */

static const pardo_arg_def fx_in[] = {{"X", "float32 or float64 input", false, false}};
static const pardo_arg_def pred_out[] = {{"Y", "bool, X's shape", false, false}};
static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
static const pardo_attr_def is_inf_attrs[] = {
    {"detect_positive", PARDO_ATTR_BOOL, "true", "+inf counts"},
    {"detect_negative", PARDO_ATTR_BOOL, "true", "-inf counts"},
};

static int predicate_infer(pardo_infer_ctx *ctx) {
    int rc = pardo_expect_dtype(ctx->in[0], "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    ctx->out[0].dtype = PARDO_BOOL;
    return PARDO_OK;
}

/* Defines NAME: y[i] = x[i] is NaN (nan), or +inf (pos) or -inf (neg), over n elements of type T, built for
 * each vector width. */
#define PREDICATE_KERNEL(NAME, T)                                                                                      \
    PARDO_SIMD_CLONES static void NAME(const void *vx, uint8_t *y, int64_t n, bool nan, bool pos, bool neg) {          \
        const T *x = vx;                                                                                               \
        if (nan)                                                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)(x[i] != x[i]);                                            \
        else                                                                                                           \
            for (int64_t i = 0; i < n; i++)                                                                            \
                y[i] = (uint8_t)((pos && x[i] == (T)HUGE_VAL) || (neg && x[i] == (T)-HUGE_VAL));                       \
    }

PREDICATE_KERNEL(predicate_f32, float)
PREDICATE_KERNEL(predicate_f64, double)

static int predicate_run(pardo_kernel_ctx *ctx, bool nan, bool pos, bool neg) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s, expected float32 or float64",
                            pardo_dtype_name(x->dtype));
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_BOOL, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    if (x->dtype == PARDO_F32) predicate_f32(pardo_tensor_data(x), pardo_tensor_data(y), x->numel, nan, pos, neg);
    else predicate_f64(pardo_tensor_data(x), pardo_tensor_data(y), x->numel, nan, pos, neg);
    return PARDO_OK;
}

static int is_nan_cpu(pardo_kernel_ctx *ctx) { return predicate_run(ctx, true, false, false); }

static int is_inf_cpu(pardo_kernel_ctx *ctx) {
    bool pos, neg;
    int rc = pardo_attr_bool(ctx->op, "detect_positive", true, &pos, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "detect_negative", true, &neg, ctx->st);
    return rc == PARDO_OK ? predicate_run(ctx, false, pos, neg) : rc;
}

static int is_inf_infer(pardo_infer_ctx *ctx) {
    bool b;
    int rc = pardo_attr_bool(ctx->op, "detect_positive", true, &b, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "detect_negative", true, &b, ctx->st);
    return rc == PARDO_OK ? predicate_infer(ctx) : rc;
}

const pardo_op_def pardo_op_is_nan = {
    .type = "is_nan",
    .doc = "Y = X is NaN, like ONNX IsNaN (float32, float64 in; bool out; no gradient)",
    .inputs = fx_in,
    .n_inputs = 1,
    .outputs = pred_out,
    .n_outputs = 1,
    .infer = predicate_infer,
    .cpu = is_nan_cpu,
};

const pardo_op_def pardo_op_is_inf = {
    .type = "is_inf",
    .doc = "Y = X is +inf (detect_positive) or -inf (detect_negative), like ONNX IsInf (float32, float64 in; bool "
           "out; no gradient)",
    .inputs = fx_in,
    .n_inputs = 1,
    .outputs = pred_out,
    .n_outputs = 1,
    .attrs = is_inf_attrs,
    .n_attrs = 2,
    .infer = is_inf_infer,
    .cpu = is_inf_cpu,
};

/* ---- where ---- */

static const pardo_arg_def where_in[] = {
    {"cond", "bool; where true Z takes X, else Y", false, false},
    {"X", "values where cond is true", false, false},
    {"Y", "values where cond is false, X's dtype", false, false},
};
static const pardo_arg_def where_out[] = {{"Z", "X's dtype, the broadcast of cond, X and Y", false, false}};
static const pardo_arg_def where_grad_in[] = {
    {"cond", "the forward input", false, false},
    {"X", "the forward input (its shape)", false, false},
    {"Y", "the forward input (its shape)", false, false},
    {"Z", "the forward output (unused; may be \"\")", true, false},
    {"dZ", "gradient of Z (\"\": zeros)", true, false},
};
static const pardo_arg_def where_grad_out[] = {
    {"dcond", "never computed: cond has no gradient (must be \"\")", true, false},
    {"dX", "gradient of X: dZ where cond, summed to X's shape", true, false},
    {"dY", "gradient of Y: dZ where not cond, summed to Y's shape", true, false},
};

static int where_types(const pardo_type *c, const pardo_type *x, const pardo_type *y, pardo_type *z, pardo_status *st) {
    int rc = pardo_expect_dtype(c, "input 0 'cond'", bool_dtype, 1, st);
    if (rc != PARDO_OK) return rc;
    if (y->dtype != x->dtype)
        return pardo_errorf(st, PARDO_ESHAPE, "input 2 'Y' has dtype %s, expected %s like input 1 'X'",
                            pardo_dtype_name(y->dtype), pardo_dtype_name(x->dtype));
    pardo_type cx;
    if ((rc = pardo_broadcast_types(c, x, &cx, st)) != PARDO_OK) return rc;
    if ((rc = pardo_broadcast_types(&cx, y, z, st)) != PARDO_OK) return rc;
    z->dtype = x->dtype;
    return PARDO_OK;
}

static int where_infer(pardo_infer_ctx *ctx) {
    return where_types(ctx->in[0], ctx->in[1], ctx->in[2], &ctx->out[0], ctx->st);
}

/* The broadcast shape of three operands, and each one's strides along it. */
typedef struct bcast3 {
    int nd;
    int64_t shape[PARDO_MAX_DIMS];
    int64_t numel;
    int64_t s[3][PARDO_MAX_DIMS];
} bcast3;

static int bcast3_plan(pardo_tensor *const t[3], bcast3 *p, pardo_status *st) {
    pardo_bcast2 ab, abc;
    int rc = pardo_bcast2_plan(t[0]->ndim, t[0]->shape, t[1]->ndim, t[1]->shape, &ab, st);
    if (rc == PARDO_OK) rc = pardo_bcast2_plan(ab.ndim, ab.shape, t[2]->ndim, t[2]->shape, &abc, st);
    if (rc != PARDO_OK) return rc;
    p->nd = abc.ndim;
    memcpy(p->shape, abc.shape, sizeof p->shape);
    p->numel = abc.numel;
    for (int k = 0; k < 3; k++) pardo_index_bcast_strides(p->nd, p->shape, t[k]->ndim, t[k]->shape, p->s[k]);
    return PARDO_OK;
}

/* Walks the output in row-major order keeping the three operands' offsets. */
typedef struct walk3 {
    int64_t idx[PARDO_MAX_DIMS];
    int64_t off[3];
} walk3;

static void walk3_next(const bcast3 *p, walk3 *w) {
    for (int d = p->nd - 1; d >= 0; d--) {
        if (++w->idx[d] < p->shape[d]) {
            for (int k = 0; k < 3; k++) w->off[k] += p->s[k][d];
            return;
        }
        w->idx[d] = 0;
        for (int k = 0; k < 3; k++) w->off[k] -= p->s[k][d] * (p->shape[d] - 1);
    }
}

#define WHERE_KERNEL(NAME, T)                                                                                          \
    static void NAME(const bcast3 *p, const uint8_t *c, const void *vx, const void *vy, void *vz) {                    \
        const T *x = vx, *y = vy;                                                                                      \
        T *z = vz;                                                                                                     \
        walk3 w = {{0}, {0, 0, 0}};                                                                                    \
        for (int64_t i = 0; i < p->numel; i++, walk3_next(p, &w)) z[i] = c[w.off[0]] ? x[w.off[1]] : y[w.off[2]];     \
    }

WHERE_KERNEL(where_1, uint8_t)
WHERE_KERNEL(where_2, uint16_t)
WHERE_KERNEL(where_4, uint32_t)
WHERE_KERNEL(where_8, uint64_t)

static int where_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *const *t = ctx->in;
    pardo_type tz, tc = pardo_tensor_type(t[0]), tx = pardo_tensor_type(t[1]), ty = pardo_tensor_type(t[2]);
    int rc = where_types(&tc, &tx, &ty, &tz, ctx->st);
    if (rc != PARDO_OK) return rc;
    bcast3 p;
    if ((rc = bcast3_plan(t, &p, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *z = pardo_kernel_output(ctx, 0, t[1]->dtype, p.nd, p.shape);
    if (!z) return ctx->st->code;
    if (p.numel == 0) return PARDO_OK;
    const size_t es = pardo_dtype_size(t[1]->dtype);
    const uint8_t *c = pardo_tensor_data(t[0]);
    const void *x = pardo_tensor_data(t[1]), *y = pardo_tensor_data(t[2]);
    if (es == 1) where_1(&p, c, x, y, pardo_tensor_data(z));
    else if (es == 2) where_2(&p, c, x, y, pardo_tensor_data(z));
    else if (es == 4) where_4(&p, c, x, y, pardo_tensor_data(z));
    else where_8(&p, c, x, y, pardo_tensor_data(z));
    return PARDO_OK;
}

/* where_grad never reads Z: leave it out so it can die after its readers. */
static int where_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

/* C name where_select: pardo_op_where is taken (core/graph.h). */
const pardo_op_def pardo_op_where_select = {
    .type = "where",
    .doc = "Z = X where cond else Y, cond, X and Y broadcast like numpy, like ONNX Where (X, Y any dtype; cond bool; "
           "gradient for X and Y: floats)",
    .inputs = where_in,
    .n_inputs = 3,
    .outputs = where_out,
    .n_outputs = 1,
    .infer = where_infer,
    .cpu = where_cpu,
    .grad = where_grad_build,
    .all_dtypes = true, /* copies elements by size */
};

static int where_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *c = ctx->in[0], *x = ctx->in[1], *y = ctx->in[2], *dz = ctx->n_in > 4 ? ctx->in[4] : NULL;
    pardo_type z;
    int rc = where_types(c, x, y, &z, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (pardo_op_wants_output(ctx->op, 0))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output 0 asks for the gradient of input 0 'cond', a bool, "
                            "which has none");
    if ((rc = pardo_grad_expect_float(ctx->op, 1, x, "input 1 'X'", ctx->st)) != PARDO_OK ||
        (rc = pardo_grad_expect_float(ctx->op, 2, y, "input 2 'Y'", ctx->st)) != PARDO_OK)
        return rc;
    if (dz && dz->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 4 'dZ' has dtype %s, expected %s like input 1 'X'",
                            pardo_dtype_name(dz->dtype), pardo_dtype_name(x->dtype));
    ctx->out[0] = *c;
    ctx->out[1] = *x;
    ctx->out[2] = *y;
    return PARDO_OK;
}

/* d[off of element i] += dz[i] over the elements where cond is `when`. */
#define WHERE_GRAD_KERNEL(NAME, T)                                                                                     \
    static void NAME(const bcast3 *p, const uint8_t *c, const T *dz, T *d, int k, bool when) {                         \
        walk3 w = {{0}, {0, 0, 0}};                                                                                    \
        for (int64_t i = 0; i < p->numel; i++, walk3_next(p, &w))                                                      \
            if ((c[w.off[0]] != 0) == when) d[w.off[k]] += dz[i];                                                      \
    }

WHERE_GRAD_KERNEL(where_grad_f32, float)
WHERE_GRAD_KERNEL(where_grad_f64, double)

static int where_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *t[3] = {ctx->in[0], ctx->in[1], ctx->in[2]}, *dz = ctx->n_in > 4 ? ctx->in[4] : NULL;
    bcast3 p;
    int rc = bcast3_plan(t, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (pardo_kernel_wants_output(ctx, 0))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'cond' is bool, which has no gradient");
    if (dz && (dz->dtype != t[1]->dtype || !pardo_shape_equal(dz->ndim, dz->shape, p.nd, p.shape))) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 4 'dZ' is %s %s, expected %s %s like Z",
                            pardo_dtype_name(dz->dtype), pardo_shape_str(dz->ndim, dz->shape, s1, sizeof s1),
                            pardo_dtype_name(t[1]->dtype), pardo_shape_str(p.nd, p.shape, s2, sizeof s2));
    }
    for (int k = 1; k <= 2; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        if (!pardo_dtype_is_float(t[k]->dtype))
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input %d is %s, which has no gradient", k,
                                pardo_dtype_name(t[k]->dtype));
        pardo_tensor *d = pardo_kernel_output(ctx, k, t[k]->dtype, t[k]->ndim, t[k]->shape);
        if (!d) return ctx->st->code;
        pardo_tensor_zero(d);
        if (!dz || p.numel == 0) continue;
        const uint8_t *c = pardo_tensor_data(t[0]);
        if (d->dtype == PARDO_F32) where_grad_f32(&p, c, pardo_tensor_data(dz), pardo_tensor_data(d), k, k == 1);
        else where_grad_f64(&p, c, pardo_tensor_data(dz), pardo_tensor_data(d), k, k == 1);
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_where_select_grad = {
    .type = "where_grad",
    .doc = "dX = dZ where cond, dY = dZ where not cond, each summed to its input's shape (gradient of where; float32, "
           "float64)",
    .inputs = where_grad_in,
    .n_inputs = 5,
    .outputs = where_grad_out,
    .n_outputs = 3,
    .infer = where_grad_infer,
    .cpu = where_grad_cpu,
};
