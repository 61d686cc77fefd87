/* unary.c - inference and kernel runners shared by the unary float ops and
 * their gradient ops (see unary.h). */
#include "kernel_util.h"
#include "unary.h"

const pardo_arg_def pardo_unary_x_in[1] = {
    {"X", "input tensor (float32 or float64; float16 or bfloat16 computed in float32)", false, false}};
const pardo_arg_def pardo_unary_y_out[1] = {{"Y", "result, of X's dtype and shape", false, false}};
const pardo_arg_def pardo_unary_grad_in[3] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
const pardo_arg_def pardo_unary_grad_in_from_y[3] = {
    {"X", "the forward input (\"\": Y stands in; the gradient reads only Y)", true, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
const pardo_arg_def pardo_unary_grad_out[1] = {{"dX", "gradient of X, X's dtype and shape", true, false}};

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
/* what the ops take (float16 and bfloat16 reach the kernels widened: pardo_op_run_cpu, ops/op_halves.c) */
static const pardo_dtype forward_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_F16, PARDO_BF16};

/* One run of a unary kernel (f: out = f(x)) or gradient kernel (g: out =
 * g(x, y, dy)), over element ranges (pardo_run_chunks). */
typedef struct unary_job {
    pardo_unary_fn f;
    pardo_unary_grad_fn g;
    const char *x, *y, *dy; // inputs (y and dy: g only); char * for byte offsets
    char *out;              // f's Y or g's dX
    size_t es;              // bytes per element
    const pardo_unary_args *args;
} unary_job;

static void unary_range(void *arg, int64_t e0, int64_t e1) {
    const unary_job *j = arg;
    const size_t o = (size_t)e0 * j->es;
    if (j->f) j->f(j->x + o, j->out + o, e1 - e0, j->args);
    else j->g(j->x + o, j->y + o, j->dy + o, j->out + o, e1 - e0, j->args);
}

/* An integer kernel of ints for dtype dt, or NULL. */
static pardo_unary_fn int_kernel(const pardo_unary_fn *ints, pardo_dtype dt) {
    return ints && dt >= 0 && dt < PARDO_DTYPE_COUNT ? ints[dt] : NULL;
}

int pardo_unary_infer_ints(pardo_infer_ctx *ctx, pardo_unary_args_fn args, const pardo_unary_fn *ints) {
    pardo_unary_args a;
    int rc = args ? args(ctx->op, &a, ctx->st) : PARDO_OK;
    if (rc == PARDO_OK && !int_kernel(ints, ctx->in[0]->dtype))
        rc = pardo_expect_dtype(ctx->in[0], "input 0 'X'", forward_dtypes, 4, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

int pardo_unary_run_ints(pardo_kernel_ctx *ctx, pardo_unary_fn f32, pardo_unary_fn f64, const pardo_unary_fn *ints,
                         pardo_unary_args_fn args) {
    pardo_tensor *x = ctx->in[0];
    pardo_unary_args a = {0, 0};
    int rc = args ? args(ctx->op, &a, ctx->st) : PARDO_OK;
    if (rc != PARDO_OK) return rc;
    const pardo_unary_fn fi = int_kernel(ints, x->dtype);
    if (!fi && !pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s, expected float32 or float64 (float16 "
                            "and bfloat16 come widened through pardo_op_run_cpu)", pardo_dtype_name(x->dtype));
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    unary_job j = {.f = fi ? fi : x->dtype == PARDO_F64 ? f64 : f32, .x = pardo_tensor_data(x),
                   .out = pardo_tensor_data(y), .es = pardo_dtype_size(x->dtype), .args = &a};
    return pardo_run_chunks(ctx, x->numel, unary_range, &j);
}

/* PARDO_ESHAPE unless t (input k, named name) has x's dtype, and x's shape
 * where both are known. */
static int expect_like_x(const pardo_type *x, const pardo_type *t, int k, const char *name, pardo_status *st) {
    char sx[128], stt[128];
    if (t->dtype != x->dtype)
        return pardo_errorf(st, PARDO_ESHAPE, "input %d '%s' has dtype %s, expected %s like input 0 'X'", k, name,
                            pardo_dtype_name(t->dtype), pardo_dtype_name(x->dtype));
    bool same = x->ndim < 0 || t->ndim < 0 || x->ndim == t->ndim;
    for (int d = 0; same && x->ndim >= 0 && d < x->ndim && d < t->ndim; d++)
        same = x->shape[d] < 0 || t->shape[d] < 0 || x->shape[d] == t->shape[d];
    if (!same)
        return pardo_errorf(st, PARDO_ESHAPE, "input %d '%s' has shape %s, expected X's shape %s", k, name,
                            pardo_shape_str(t->ndim, t->shape, stt, sizeof stt),
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    return PARDO_OK;
}

int pardo_unary_grad_infer(pardo_infer_ctx *ctx, pardo_unary_args_fn args) {
    const pardo_type *x = ctx->in[0] ? ctx->in[0] : ctx->in[1]; /* X left out (schema permitting): Y has its type */
    pardo_unary_args a;
    int rc = args ? args(ctx->op, &a, ctx->st) : PARDO_OK;
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK) rc = expect_like_x(x, ctx->in[1], 1, "Y", ctx->st);
    if (rc == PARDO_OK && ctx->n_in > 2 && ctx->in[2]) rc = expect_like_x(x, ctx->in[2], 2, "dY", ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    return PARDO_OK;
}

int pardo_unary_grad_run(pardo_kernel_ctx *ctx, pardo_unary_grad_fn f32, pardo_unary_grad_fn f64,
                         pardo_unary_args_fn args) {
    pardo_tensor *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!x && ctx->op->def->inputs[0].optional) x = y; /* UNARY_GRAD_OP_FROM_Y: the kernel reads only Y */
    if (!x || !y) return pardo_errorf(ctx->st, PARDO_EINVAL, "input %d '%s' is missing", x ? 1 : 0, x ? "Y" : "X");
    pardo_unary_args a = {0, 0};
    int rc = args ? args(ctx->op, &a, ctx->st) : PARDO_OK;
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    pardo_type tx = pardo_tensor_type(x), ty = pardo_tensor_type(y);
    rc = pardo_expect_dtype(&tx, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK) rc = expect_like_x(&tx, &ty, 1, "Y", ctx->st);
    if (rc == PARDO_OK && dy) {
        pardo_type tdy = pardo_tensor_type(dy);
        rc = expect_like_x(&tx, &tdy, 2, "dY", ctx->st);
    }
    if (rc != PARDO_OK) return rc;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) {
        pardo_tensor_zero(dx);
        return PARDO_OK;
    }
    unary_job j = {.g = x->dtype == PARDO_F32 ? f32 : f64, .x = pardo_tensor_data(x), .y = pardo_tensor_data(y),
                   .dy = pardo_tensor_data(dy), .out = pardo_tensor_data(dx), .es = pardo_dtype_size(x->dtype),
                   .args = &a};
    return pardo_run_chunks(ctx, x->numel, unary_range, &j);
}
