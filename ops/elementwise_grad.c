/* elementwise_grad.c - the gradient ops of the broadcasting binary ops:
 * add_grad, sub_grad, mul_grad, div_grad (float32, float64). Inputs A, B,
 * the forward output C (not read) and its gradient dC ("" = zeros); add_grad
 * and sub_grad read only shapes, and take a left-out operand to have dC's
 * shape; outputs dA and dB,
 * each optional, of A's and B's shapes: where an operand was broadcast, the
 * gradient is summed over the dims it was broadcast along. Integer operands
 * have no gradient (PARDO_ENOTSUP when one is asked for). */
#include <stdbool.h>
#include <stdint.h>

#include "kernel_util.h"
#include "op.h"

static const pardo_arg_def grad_in[] = {
    {"A", "the forward input A", false, false},
    {"B", "the forward input B", false, false},
    {"C", "the forward output (not read: the backward pass leaves it out, \"\")", true, false},
    {"dC", "gradient of C (\"\": zeros)", true, false},
};
/* add_grad and sub_grad read only the operands' shapes: an operand left out
 * ("") has dC's shape (the backward pass leaves out an operand that fills
 * the output, see elementwise.c). */
static const pardo_arg_def shape_grad_in[] = {
    {"A", "the forward input A (\"\": A has dC's shape)", true, false},
    {"B", "the forward input B (\"\": B has dC's shape)", true, false},
    {"C", "the forward output (not read: the backward pass leaves it out, \"\")", true, false},
    {"dC", "gradient of C (\"\": zeros; needed when A or B is left out)", true, false},
};
static const pardo_arg_def grad_out[] = {
    {"dA", "gradient of A, A's dtype and shape", true, false},
    {"dB", "gradient of B, B's dtype and shape", true, false},
};
static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

/* The operands' types, dC's type standing in for one left out; PARDO_EINVAL
 * when one is left out and dC is too. */
static int operand_types(const pardo_type *const *in, int n_in, const pardo_type **a, const pardo_type **b,
                         pardo_status *st) {
    const pardo_type *dc = n_in > 3 ? in[3] : NULL;
    *a = in[0] ? in[0] : dc;
    *b = in[1] ? in[1] : dc;
    if (!*a || !*b)
        return pardo_errorf(st, PARDO_EINVAL, "input %d '%s' is left out, so dC must be given for its shape",
                            *a ? 1 : 0, *a ? "B" : "A");
    return PARDO_OK;
}

static int binary_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *a, *b, *dc = ctx->n_in > 3 ? ctx->in[3] : NULL;
    int rc = operand_types(ctx->in, ctx->n_in, &a, &b, ctx->st);
    if (rc != PARDO_OK) return rc;
    rc = pardo_grad_expect_float(ctx->op, 0, a, "input 0 'A'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 1, b, "input 1 'B'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(a, "input 0 'A'", float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (b->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'B' has dtype %s, expected %s like input 0 'A'",
                            pardo_dtype_name(b->dtype), pardo_dtype_name(a->dtype));
    pardo_type c;
    if ((rc = pardo_broadcast_types(a, b, &c, ctx->st)) != PARDO_OK) return rc;
    if (dc && dc->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dC' has dtype %s, expected %s like input 0 'A'",
                            pardo_dtype_name(dc->dtype), pardo_dtype_name(a->dtype));
    ctx->out[0] = *a;
    if (ctx->n_out > 1) ctx->out[1] = *b;
    return PARDO_OK;
}

/* Defines NAME, the fused gradient of C = f(A, B) for elements of type T:
 * walks the broadcast C in row-major order (dC's own order) and adds
 * GA(g, a, b) into dA and GB(g, a, b) into dB at the operands' offsets
 * (dA, dB zeroed before; either may be NULL: not wanted). */
#define BINARY_GRAD_KERNEL(NAME, T, GA, GB)                                                                            \
    PARDO_SIMD_CLONES static void NAME(const pardo_bcast2 *p, const void *va, const void *vb, const void *vdc,       \
                                       void *vda, void *vdb) {                                                  \
        const T *a = va, *b = vb, *dc = vdc;                                                                           \
        T *da = vda, *db = vdb;                                                                                        \
        const int inner = p->nd - 1;                                                                                   \
        const int64_t n = p->dims[inner], sa = p->sa[inner], sb = p->sb[inner];                                        \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, inner, p->dims, p->sa, p->sb);                                                              \
        for (int64_t base = 0; base < p->numel; base += n, pardo_odo_next(&o)) {                                       \
            const T *pa = a + o.off[0], *pb = b + o.off[1], *pg = dc + base;                                           \
            if (da) {                                                                                                  \
                T *pda = da + o.off[0];                                                                                \
                for (int64_t i = 0; i < n; i++) pda[i * sa] += GA(pg[i], pa[i * sa], pb[i * sb]);                     \
            }                                                                                                          \
            if (db) {                                                                                                  \
                T *pdb = db + o.off[1];                                                                                \
                for (int64_t i = 0; i < n; i++) pdb[i * sb] += GB(pg[i], pa[i * sa], pb[i * sb]);                      \
            }                                                                                                          \
        }                                                                                                              \
    }

#define MUL_GA(g, a, b) ((g) * (b))
#define MUL_GB(g, a, b) ((g) * (a))
#define DIV_GA(g, a, b) ((g) / (b))
#define DIV_GB(g, a, b) (-(g) * (a) / ((b) * (b)))

typedef void (*binary_grad_fn)(const pardo_bcast2 *p, const void *a, const void *b, const void *dc, void *da,
                               void *db);

BINARY_GRAD_KERNEL(mul_grad_f32, float, MUL_GA, MUL_GB)
BINARY_GRAD_KERNEL(mul_grad_f64, double, MUL_GA, MUL_GB)
BINARY_GRAD_KERNEL(div_grad_f32, float, DIV_GA, DIV_GB)
BINARY_GRAD_KERNEL(div_grad_f64, double, DIV_GA, DIV_GB)

typedef enum grad_kind { G_ADD, G_SUB, G_MUL, G_DIV } grad_kind;

static int binary_grad_run(pardo_kernel_ctx *ctx, grad_kind kind) {
    pardo_tensor *dc = ctx->n_in > 3 ? ctx->in[3] : NULL;
    /* add_grad and sub_grad read shapes only: a left-out operand has dC's (inference checked dC is given) */
    pardo_tensor *a = ctx->in[0] ? ctx->in[0] : dc, *b = ctx->in[1] ? ctx->in[1] : dc;
    if (!a || !b)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "input %d is left out, so dC must be given for its shape",
                            a ? 1 : 0);
    if ((kind == G_MUL || kind == G_DIV) && (!ctx->in[0] || !ctx->in[1]))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "%s reads A and B: neither may be left out", ctx->op->type);
    const bool want_a = pardo_kernel_wants_output(ctx, 0), want_b = pardo_kernel_wants_output(ctx, 1);
    if (!want_a && !want_b) return PARDO_OK;
    if (a->dtype != b->dtype || !pardo_dtype_is_float(a->dtype) || (dc && dc->dtype != a->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "inputs A, B and dC have dtypes %s, %s and %s, expected one of "
                            "float32 or float64 for all", pardo_dtype_name(a->dtype), pardo_dtype_name(b->dtype),
                            dc ? pardo_dtype_name(dc->dtype) : "(absent)");
    pardo_bcast2 plan;
    int rc = pardo_bcast2_plan(a->ndim, a->shape, b->ndim, b->shape, &plan, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (dc && !pardo_shape_equal(dc->ndim, dc->shape, plan.ndim, plan.shape)) {
        char s1[128], s2[128];
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dC' has shape %s, expected the broadcast shape %s",
                            pardo_shape_str(dc->ndim, dc->shape, s1, sizeof s1),
                            pardo_shape_str(plan.ndim, plan.shape, s2, sizeof s2));
    }
    pardo_tensor *da = want_a ? pardo_kernel_output(ctx, 0, a->dtype, a->ndim, a->shape) : NULL;
    if (want_a && !da) return ctx->st->code;
    pardo_tensor *db = want_b ? pardo_kernel_output(ctx, 1, b->dtype, b->ndim, b->shape) : NULL;
    if (want_b && !db) return ctx->st->code;
    if (!dc || plan.numel == 0 || kind == G_MUL || kind == G_DIV) { /* add and sub overwrite below */
        if (da) pardo_tensor_zero(da);
        if (db) pardo_tensor_zero(db);
    }
    if (!dc || plan.numel == 0) return PARDO_OK;

    const void *g = pardo_tensor_data(dc);
    if (kind == G_ADD || kind == G_SUB) {
        if (da && (rc = pardo_sum_to_shape(a->dtype, g, dc->ndim, dc->shape, pardo_tensor_data(da), a->ndim, a->shape,
                                           1.0, ctx->st)) != PARDO_OK)
            return rc;
        if (db && (rc = pardo_sum_to_shape(b->dtype, g, dc->ndim, dc->shape, pardo_tensor_data(db), b->ndim, b->shape,
                                           kind == G_SUB ? -1.0 : 1.0, ctx->st)) != PARDO_OK)
            return rc;
        return PARDO_OK;
    }
    static const binary_grad_fn kernels[2][2] = {{mul_grad_f32, mul_grad_f64}, {div_grad_f32, div_grad_f64}};
    void *pda = da ? pardo_tensor_data(da) : NULL, *pdb = db ? pardo_tensor_data(db) : NULL;
    kernels[kind == G_DIV][a->dtype == PARDO_F64](&plan, pardo_tensor_data(a), pardo_tensor_data(b), g, pda, pdb);
    return PARDO_OK;
}

#define BINARY_GRAD_OP(NAME, KIND, DOC)                                                                                \
    static int NAME##_grad_cpu(pardo_kernel_ctx *ctx) { return binary_grad_run(ctx, KIND); }                           \
    const pardo_op_def pardo_op_##NAME##_grad = {                                                                      \
        .type = #NAME "_grad",                                                                                         \
        .doc = DOC,                                                                                                    \
        .inputs = (KIND) == G_ADD || (KIND) == G_SUB ? shape_grad_in : grad_in,                                        \
        .n_inputs = 4,                                                                                                 \
        .outputs = grad_out,                                                                                           \
        .n_outputs = 2,                                                                                                \
        .infer = binary_grad_infer,                                                                                    \
        .cpu = NAME##_grad_cpu,                                                                                        \
    };

BINARY_GRAD_OP(add, G_ADD, "dA = dC, dB = dC, each summed to its operand's shape (gradient of add; float32, float64)")
BINARY_GRAD_OP(sub, G_SUB, "dA = dC, dB = -dC, each summed to its operand's shape (gradient of sub; float32, float64)")
BINARY_GRAD_OP(mul, G_MUL,
               "dA = dC * B, dB = dC * A, each summed to its operand's shape (gradient of mul; float32, float64)")
BINARY_GRAD_OP(div, G_DIV,
               "dA = dC / B, dB = -dC * A / B^2, each summed to its operand's shape (gradient of div; float32, "
               "float64)")
