/* activation.c - the activation functions relu, leaky_relu, sigmoid, tanh,
 * gelu and ONNX's elu, selu, celu, hard_sigmoid, hard_swish, softplus,
 * softsign, thresholded_relu, mish and shrink (float32, float64), each with
 * its gradient op T_grad (inputs X, Y, dY; output dX), built from the unary
 * op machinery in ops/unary.h; prelu (X and a slope broadcast to it) with
 * prelu_grad (dX and dslope, the slope's summed in place: no buffer). softmax
 * and log_softmax, which normalise along an axis, are in ops/softmax.c. At a
 * kink (relu and leaky_relu at 0) the gradient takes the left-hand slope, as
 * PyTorch does. */
#include <tgmath.h>

#include "kernel_util.h"

#include "kernels.h"
#include "op.h"
#include "unary.h"
#include "vmath.h"

/* FN_F32 on a float, FN_F64 on a double: float32 kernels take ops/vmath.h's
 * straight-line functions, which vectorise; float64 ones take libm. */
#define BY_TYPE(v, FN_F32, FN_F64) _Generic((v), float: FN_F32, default: FN_F64)(v)

/* relu keeps NaN (v < 0 is false for NaN), like max(x, 0) in ONNX. */
UNARY_INT_KERNELS(relu, v < 0 ? 0 : v, v)
UNARY_OP_INTS(relu, "Y = max(X, 0) (float32, float64, float16, bfloat16, the integers)", NULL, 0, NULL,
              pardo_cuda_relu, pardo_grad_from_output, relu_ints, r = v < 0 ? (elem_t)0 : v;)
/* Y > 0 exactly where X > 0 (NaN and -0 included), so the gradient reads Y. */
UNARY_GRAD_OP_FROM_Y_CUDA(relu, "dX = dY where X > 0 (read as Y > 0), else 0 (gradient of relu; float32, float64)",
                          NULL, 0, NULL, pardo_cuda_relu_grad, r = w > 0 ? g : (elem_t)0;)

/* leaky_relu: p = alpha. */
static const pardo_attr_def leaky_attrs[] = {{"alpha", PARDO_ATTR_FLOAT, "0.01", "slope for X < 0"}};

static int leaky_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    a->q = 0;
    return pardo_attr_float(op, "alpha", 0.01, &a->p, st);
}

UNARY_OP(leaky_relu, "Y = X for X >= 0, alpha * X below (float32, float64, float16, bfloat16)", leaky_attrs, 1,
         leaky_args, NULL, r = v < 0 ? p * v : v;)
UNARY_GRAD_OP(leaky_relu, "dX = dY where X > 0, else alpha * dY (gradient of leaky_relu; float32, float64)",
              leaky_attrs, 1, leaky_args, r = v > 0 ? g : p * g;)

/* sigmoid from exp(-|x|), which never overflows: stable for large |x|. */
static inline double sigmoid_d(double v) {
    const double e = exp(-fabs(v));
    return v >= 0 ? 1 / (1 + e) : e / (1 + e);
}
UNARY_OP_BUILT(sigmoid, "Y = 1 / (1 + exp(-X)), computed stably for large |X| (float32, float64, float16, bfloat16)",
               NULL, 0, NULL, pardo_cuda_sigmoid, pardo_grad_from_output, r = BY_TYPE(v, pardo_vsigmoidf, sigmoid_d);)
UNARY_GRAD_OP_FROM_Y_CUDA(sigmoid, "dX = dY * Y * (1 - Y) (gradient of sigmoid; float32, float64)", NULL, 0, NULL,
                          pardo_cuda_sigmoid_grad, r = g * w * (1 - w);)

UNARY_OP_BUILT(tanh, "Y = tanh(X) (float32, float64, float16, bfloat16)", NULL, 0, NULL, pardo_cuda_tanh,
               pardo_grad_from_output, r = tanh(v);)
UNARY_GRAD_OP_FROM_Y_CUDA(tanh, "dX = dY * (1 - Y^2) (gradient of tanh; float32, float64)", NULL, 0, NULL,
                          pardo_cuda_tanh_grad, r = g * (1 - w * w);)

/* gelu, the exact form with erf (not the tanh approximation), computed as
 * 0.5 * x * erfc(-x / sqrt(2)), the same function without the cancellation
 * of 1 + erf(x / sqrt(2)) for negative x. */
#define SQRT1_2 0.70710678118654752440      /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */

static inline double gelu_grad_d(double v) { return 0.5 * erfc(-v * SQRT1_2) + v * (INV_SQRT_2PI * exp(-0.5 * v * v)); }

UNARY_OP(gelu,
         "Y = X * Phi(X) = 0.5 * X * (1 + erf(X / sqrt(2))), the exact form (float32, float64, float16, bfloat16)",
         NULL, 0, NULL, pardo_cuda_gelu, r = BY_TYPE(v, pardo_vgeluf, pardo_gelu_f64);)
UNARY_GRAD_OP_CUDA(gelu, "dX = dY * (Phi(X) + X * phi(X)), phi the normal density (gradient of gelu; float32, float64)",
                   NULL, 0, NULL, pardo_cuda_gelu_grad, r = g * BY_TYPE(v, pardo_vgelu_gradf, gelu_grad_d);)

/* ---- the ONNX activations: elu, selu, celu, hard_sigmoid, hard_swish, softplus, softsign,
 * thresholded_relu, mish, shrink (unary, with gradients) and prelu (X and a slope broadcast to it) ---- */

/* Reads attr a (default da) into p and attr b (default db; NULL: none) into q. */
static int two_floats(const pardo_op *op, const char *a, double da, const char *b, double db, pardo_unary_args *args,
                      pardo_status *st) {
    args->q = db;
    int rc = pardo_attr_float(op, a, da, &args->p, st);
    return rc == PARDO_OK && b ? pardo_attr_float(op, b, db, &args->q, st) : rc;
}

static const pardo_attr_def alpha1_attrs[] = {{"alpha", PARDO_ATTR_FLOAT, "1.0", "the activation's alpha"}};
static int alpha1_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    return two_floats(op, "alpha", 1.0, NULL, 0, a, st);
}

UNARY_OP(elu, "Y = X for X > 0, alpha * (exp(X) - 1) below, like ONNX Elu (float32, float64, float16, bfloat16)",
         alpha1_attrs, 1, alpha1_args, NULL, r = v > 0 ? v : p * (exp(v) - 1);)
UNARY_GRAD_OP(elu, "dX = dY for X > 0, dY * alpha * exp(X) below (gradient of elu; float32, float64)", alpha1_attrs,
              1, alpha1_args, r = v > 0 ? g : g * p * exp(v);)

/* selu: p = alpha, q = gamma (ONNX's defaults, the float32 constants). */
static const pardo_attr_def selu_attrs[] = {
    {"alpha", PARDO_ATTR_FLOAT, "1.67326319217681884765625", "scale of the negative part"},
    {"gamma", PARDO_ATTR_FLOAT, "1.05070102214813232421875", "scale of the whole"},
};
static int selu_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    return two_floats(op, "alpha", 1.67326319217681884765625, "gamma", 1.05070102214813232421875, a, st);
}

UNARY_OP(
    selu,
    "Y = gamma * X for X > 0, gamma * alpha * (exp(X) - 1) below, like ONNX Selu (float32, float64, float16, bfloat16)",
    selu_attrs, 2, selu_args, NULL, r = v > 0 ? q * v : q * p * (exp(v) - 1);)
UNARY_GRAD_OP(selu, "dX = dY * gamma for X > 0, dY * gamma * alpha * exp(X) below (gradient of selu; float32, "
              "float64)", selu_attrs, 2, selu_args, r = v > 0 ? g * q : g * q * p * exp(v);)

static int celu_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    int rc = alpha1_args(op, a, st);
    if (rc == PARDO_OK && a->p == 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'alpha' is 0, expected nonzero");
    return rc;
}

UNARY_OP(celu,
         "Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1)), like ONNX Celu (float32, float64, float16, bfloat16)",
         alpha1_attrs, 1, celu_args, NULL, r = v > 0 ? v : p * (exp(v / p) - 1);)
UNARY_GRAD_OP(celu, "dX = dY for X > 0, dY * exp(X / alpha) below (gradient of celu; float32, float64)",
              alpha1_attrs, 1, celu_args, r = v > 0 ? g : g * exp(v / p);)

static const pardo_attr_def hard_sigmoid_attrs[] = {
    {"alpha", PARDO_ATTR_FLOAT, "0.2", "slope"},
    {"beta", PARDO_ATTR_FLOAT, "0.5", "offset"},
};
static int hard_sigmoid_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    return two_floats(op, "alpha", 0.2, "beta", 0.5, a, st);
}

UNARY_OP(hard_sigmoid,
         "Y = max(0, min(1, alpha * X + beta)), like ONNX HardSigmoid (float32, float64, float16, bfloat16)",
         hard_sigmoid_attrs, 2, hard_sigmoid_args, NULL, r = p * v + q;
         r = r < 0   ? (elem_t)0
             : r > 1 ? (elem_t)1
                     : r;)
UNARY_GRAD_OP(hard_sigmoid, "dX = dY * alpha where 0 < alpha * X + beta < 1, else 0 (gradient of hard_sigmoid; "
              "float32, float64)", hard_sigmoid_attrs, 2, hard_sigmoid_args,
              r = p * v + q; r = r > 0 && r < 1 ? g * p : (elem_t)0;)

UNARY_OP(hard_swish, "Y = X * max(0, min(1, X / 6 + 1/2)), like ONNX HardSwish (float32, float64, float16, bfloat16)",
         NULL, 0, NULL, NULL, r = v / 6 + (elem_t)0.5;
         r = v * (r < 0   ? (elem_t)0
                  : r > 1 ? (elem_t)1
                          : r);)
UNARY_GRAD_OP(hard_swish, "dX = 0 below -3, dY above 3, dY * (X / 3 + 1/2) between (gradient of hard_swish; float32, "
              "float64)", NULL, 0, NULL, r = v < -3 ? (elem_t)0 : v > 3 ? g : g * (v / 3 + (elem_t)0.5);)

/* softplus as max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|. */
UNARY_OP(softplus, "Y = log(1 + exp(X)), computed stably, like ONNX Softplus (float32, float64, float16, bfloat16)",
         NULL, 0, NULL, NULL, r = (v > 0 ? v : (elem_t)0) + log1p(exp(-fabs(v)));)
UNARY_GRAD_OP(softplus, "dX = dY * sigmoid(X) (gradient of softplus; float32, float64)", NULL, 0, NULL,
              r = g * (elem_t)BY_TYPE(v, pardo_vsigmoidf, sigmoid_d);)

UNARY_OP(softsign, "Y = X / (1 + |X|), like ONNX Softsign (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL,
         r = v / (1 + fabs(v));)
UNARY_GRAD_OP(softsign, "dX = dY / (1 + |X|)^2 (gradient of softsign; float32, float64)", NULL, 0, NULL,
              r = g / ((1 + fabs(v)) * (1 + fabs(v)));)

UNARY_OP(thresholded_relu,
         "Y = X for X > alpha, else 0, like ONNX ThresholdedRelu (float32, float64, float16, bfloat16)", alpha1_attrs,
         1, alpha1_args, NULL, r = v > p ? v : (elem_t)0;)
UNARY_GRAD_OP(thresholded_relu, "dX = dY for X > alpha, else 0 (gradient of thresholded_relu; float32, float64)",
              alpha1_attrs, 1, alpha1_args, r = v > p ? g : (elem_t)0;)

/* mish = x tanh(softplus(x)); its derivative tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2). */
UNARY_OP(mish, "Y = X * tanh(softplus(X)), like ONNX Mish (float32, float64, float16, bfloat16)", NULL, 0, NULL, NULL,
         r = v * tanh((v > 0 ? v : (elem_t)0) + log1p(exp(-fabs(v))));)
UNARY_GRAD_OP(mish, "dX = dY * (tanh(sp) + X * sigmoid(X) * (1 - tanh(sp)^2)), sp = softplus(X) (gradient of mish; "
              "float32, float64)", NULL, 0, NULL,
              const elem_t t_ = tanh((v > 0 ? v : (elem_t)0) + log1p(exp(-fabs(v))));
              r = g * (t_ + v * (elem_t)BY_TYPE(v, pardo_vsigmoidf, sigmoid_d) * (1 - t_ * t_));)

/* shrink: p = lambd, q = bias. */
static const pardo_attr_def shrink_attrs[] = {
    {"lambd", PARDO_ATTR_FLOAT, "0.5", "the band [-lambd, lambd] that goes to 0"},
    {"bias", PARDO_ATTR_FLOAT, "0.0", "moved toward 0 outside the band"},
};
static int shrink_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    return two_floats(op, "lambd", 0.5, "bias", 0.0, a, st);
}

UNARY_OP(shrink,
         "Y = X + bias below -lambd, X - bias above lambd, 0 between, like ONNX Shrink (float32, float64, float16, "
         "bfloat16)",
         shrink_attrs, 2, shrink_args, NULL,
         r = v < -p  ? v + q
             : v > p ? v - q
                     : (elem_t)0;)
UNARY_GRAD_OP(shrink, "dX = dY outside [-lambd, lambd], else 0 (gradient of shrink; float32, float64)", shrink_attrs,
              2, shrink_args, r = v < -p || v > p ? g : (elem_t)0;)

/* ---- prelu ---- */

static const pardo_arg_def prelu_in[] = {
    {"X", "input (float32 or float64)", false, false},
    {"slope", "X's dtype, broadcast to X's shape (numpy rules, one way)", false, false},
};
static const pardo_arg_def prelu_out[] = {{"Y", "X's dtype and shape", false, false}};
static const pardo_arg_def prelu_grad_in[] = {
    {"X", "the forward input", false, false},
    {"slope", "the forward input", false, false},
    {"Y", "the forward output (unused; may be \"\")", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def prelu_grad_out[] = {
    {"dX", "gradient of X", true, false},
    {"dslope", "gradient of slope, summed to its shape", true, false},
};
static const pardo_dtype prelu_dtypes[] = {PARDO_F32, PARDO_F64};

/* X and slope of one float dtype, slope broadcasting to X (the result X's shape). */
static int prelu_types(const pardo_type *x, const pardo_type *s, pardo_status *st) {
    int rc = pardo_expect_dtype(x, "input 0 'X'", prelu_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    if (s->dtype != x->dtype)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'slope' has dtype %s, expected %s like input 0 'X'",
                            pardo_dtype_name(s->dtype), pardo_dtype_name(x->dtype));
    pardo_type b;
    if ((rc = pardo_broadcast_types(x, s, &b, st)) != PARDO_OK) return rc;
    char s1[128], s2[128];
    bool same = b.ndim == x->ndim || x->ndim < 0;
    for (int d = 0; same && x->ndim >= 0 && d < x->ndim; d++)
        same = x->shape[d] < 0 || b.shape[d] < 0 || b.shape[d] == x->shape[d];
    if (!same)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'slope' of shape %s does not broadcast to X's shape %s",
                            pardo_shape_str(s->ndim, s->shape, s1, sizeof s1),
                            pardo_shape_str(x->ndim, x->shape, s2, sizeof s2));
    return PARDO_OK;
}

static int prelu_infer(pardo_infer_ctx *ctx) {
    int rc = prelu_types(ctx->in[0], ctx->in[1], ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

/* The run-time plan of x against slope s; PARDO_ESHAPE unless s broadcasts to x's shape. */
static int prelu_plan(const pardo_tensor *x, const pardo_tensor *s, pardo_bcast2 *p, pardo_status *st) {
    pardo_type tx = pardo_tensor_type(x), ts = pardo_tensor_type(s);
    int rc = prelu_types(&tx, &ts, st);
    if (rc == PARDO_OK) rc = pardo_bcast2_plan(x->ndim, x->shape, s->ndim, s->shape, p, st);
    return rc;
}

/* Defines NAME: over p's elements (X not broadcast, so e is X's index), y = x < 0 ? slope x : x, or the
 * gradient: dx = dy (x < 0 ? slope : 1) and ds[slope's element] += dy x where x < 0 (dx, ds NULL: not wanted). */
#define PRELU_KERNELS(NAME, T)                                                                                         \
    static void NAME##_fwd(const pardo_bcast2 *p, const T *x, const T *s, T *y) {                                      \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, p->nd, p->dims, p->sa, p->sb);                                                              \
        for (int64_t e = 0; e < p->numel; e++, pardo_odo_next(&o)) {                                                   \
            const T v = x[e];                                                                                          \
            y[e] = v < 0 ? s[o.off[1]] * v : v;                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    static void NAME##_bwd(const pardo_bcast2 *p, const T *x, const T *s, const T *dy, T *dx, T *ds) {                 \
        pardo_odo o;                                                                                                   \
        pardo_odo_init(&o, p->nd, p->dims, p->sa, p->sb);                                                              \
        for (int64_t e = 0; e < p->numel; e++, pardo_odo_next(&o)) {                                                   \
            const T v = x[e];                                                                                          \
            if (dx) dx[e] = v < 0 ? dy[e] * s[o.off[1]] : dy[e];                                                       \
            if (ds && v < 0) ds[o.off[1]] += dy[e] * v;                                                                \
        }                                                                                                              \
    }

PRELU_KERNELS(prelu_f32, float)
PRELU_KERNELS(prelu_f64, double)

static int prelu_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *s = ctx->in[1];
    pardo_bcast2 p;
    int rc = prelu_plan(x, s, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    if (x->numel == 0) return PARDO_OK;
    if (x->dtype == PARDO_F32) prelu_f32_fwd(&p, pardo_tensor_data(x), pardo_tensor_data(s), pardo_tensor_data(y));
    else prelu_f64_fwd(&p, pardo_tensor_data(x), pardo_tensor_data(s), pardo_tensor_data(y));
    return PARDO_OK;
}

/* prelu_grad never reads Y. */
static int prelu_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_prelu = {
    .type = "prelu",
    .doc = "Y = slope * X for X < 0, X elsewhere, slope broadcast to X, like ONNX PRelu (float32, float64)",
    .inputs = prelu_in,
    .n_inputs = 2,
    .outputs = prelu_out,
    .n_outputs = 1,
    .infer = prelu_infer,
    .cpu = prelu_cpu,
    .halves_in_f32 = true,
    .grad = prelu_grad_build,
};

static int prelu_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *s = ctx->in[1], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL;
    int rc = prelu_types(x, s, ctx->st);
    if (rc == PARDO_OK && dy && dy->dtype != x->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' has dtype %s, expected %s like input 0 'X'",
                            pardo_dtype_name(dy->dtype), pardo_dtype_name(x->dtype));
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    if (ctx->n_out > 1) ctx->out[1] = *s;
    return PARDO_OK;
}

static int prelu_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *s = ctx->in[1], *dy = ctx->n_in > 3 ? ctx->in[3] : NULL;
    pardo_bcast2 p;
    int rc = prelu_plan(x, s, &p, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (dy && (dy->dtype != x->dtype || !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, x->shape)))
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 3 'dY' must have X's dtype and shape");
    pardo_tensor *dx = NULL, *ds = NULL;
    if (pardo_kernel_wants_output(ctx, 0) && !(dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape)))
        return ctx->st->code;
    if (ctx->n_out > 1 && pardo_kernel_wants_output(ctx, 1) &&
        !(ds = pardo_kernel_output(ctx, 1, s->dtype, s->ndim, s->shape)))
        return ctx->st->code;
    if (ds) pardo_tensor_zero(ds);
    if (!dy) {
        if (dx) pardo_tensor_zero(dx);
        return PARDO_OK;
    }
    if (x->numel == 0) return PARDO_OK;
    void *pdx = dx ? pardo_tensor_data(dx) : NULL, *pds = ds ? pardo_tensor_data(ds) : NULL;
    if (x->dtype == PARDO_F32)
        prelu_f32_bwd(&p, pardo_tensor_data(x), pardo_tensor_data(s), pardo_tensor_data(dy), pdx, pds);
    else prelu_f64_bwd(&p, pardo_tensor_data(x), pardo_tensor_data(s), pardo_tensor_data(dy), pdx, pds);
    return PARDO_OK;
}

const pardo_op_def pardo_op_prelu_grad = {
    .type = "prelu_grad",
    .doc = "dX = dY * (X < 0 ? slope : 1), dslope = dY * X where X < 0 summed to slope's shape (gradient of prelu; "
           "float32, float64)",
    .inputs = prelu_grad_in,
    .n_inputs = 4,
    .outputs = prelu_grad_out,
    .n_outputs = 2,
    .infer = prelu_grad_infer,
    .cpu = prelu_grad_cpu,
};
