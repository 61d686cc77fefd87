/* activation.c - the activation functions relu, leaky_relu, sigmoid, tanh
 * and gelu (float32, float64), each with its gradient op T_grad (inputs X, Y,
 * dY; output dX), built from the unary op machinery in ops/unary.h. softmax
 * and log_softmax, which normalise along an axis, are in ops/softmax.c. At a
 * kink (relu and leaky_relu at 0) the gradient takes the left-hand slope, as
 * PyTorch does. */
#include <tgmath.h>

#include "kernels.h"
#include "op.h"
#include "unary.h"
#include "vmath.h"

/* FN_F32 on a float, FN_F64 on a double: float32 kernels take ops/vmath.h's
 * straight-line functions, which vectorise; float64 ones take libm. */
#define BY_TYPE(v, FN_F32, FN_F64) _Generic((v), float: FN_F32, default: FN_F64)(v)

/* relu keeps NaN (v < 0 is false for NaN), like max(x, 0) in ONNX. */
UNARY_OP_BUILT(relu, "Y = max(X, 0) (float32, float64)", NULL, 0, NULL, pardo_cuda_relu, pardo_grad_from_output,
               r = v < 0 ? (elem_t)0 : v;)
/* Y > 0 exactly where X > 0 (NaN and -0 included), so the gradient reads Y. */
UNARY_GRAD_OP_FROM_Y(relu, "dX = dY where X > 0 (read as Y > 0), else 0 (gradient of relu; float32, float64)", NULL,
                     0, NULL, r = w > 0 ? g : (elem_t)0;)

/* leaky_relu: p = alpha. */
static const pardo_attr_def leaky_attrs[] = {{"alpha", PARDO_ATTR_FLOAT, "0.01", "slope for X < 0"}};

static int leaky_args(const pardo_op *op, pardo_unary_args *a, pardo_status *st) {
    a->q = 0;
    return pardo_attr_float(op, "alpha", 0.01, &a->p, st);
}

UNARY_OP(leaky_relu, "Y = X for X >= 0, alpha * X below (float32, float64)", leaky_attrs, 1, leaky_args, NULL,
         r = v < 0 ? p * v : v;)
UNARY_GRAD_OP(leaky_relu, "dX = dY where X > 0, else alpha * dY (gradient of leaky_relu; float32, float64)",
              leaky_attrs, 1, leaky_args, r = v > 0 ? g : p * g;)

/* sigmoid from exp(-|x|), which never overflows: stable for large |x|. */
static inline double sigmoid_d(double v) {
    const double e = exp(-fabs(v));
    return v >= 0 ? 1 / (1 + e) : e / (1 + e);
}
UNARY_OP_BUILT(sigmoid, "Y = 1 / (1 + exp(-X)), computed stably for large |X| (float32, float64)", NULL, 0, NULL,
               pardo_cuda_sigmoid, pardo_grad_from_output, r = BY_TYPE(v, pardo_vsigmoidf, sigmoid_d);)
UNARY_GRAD_OP_FROM_Y(sigmoid, "dX = dY * Y * (1 - Y) (gradient of sigmoid; float32, float64)", NULL, 0, NULL,
              r = g * w * (1 - w);)

UNARY_OP_BUILT(tanh, "Y = tanh(X) (float32, float64)", NULL, 0, NULL, pardo_cuda_tanh, pardo_grad_from_output,
               r = tanh(v);)
UNARY_GRAD_OP_FROM_Y(tanh, "dX = dY * (1 - Y^2) (gradient of tanh; float32, float64)", NULL, 0, NULL,
                     r = g * (1 - w * w);)

/* gelu, the exact form with erf (not the tanh approximation), computed as
 * 0.5 * x * erfc(-x / sqrt(2)), the same function without the cancellation
 * of 1 + erf(x / sqrt(2)) for negative x. */
#define SQRT1_2 0.70710678118654752440      /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */

static inline double gelu_grad_d(double v) { return 0.5 * erfc(-v * SQRT1_2) + v * (INV_SQRT_2PI * exp(-0.5 * v * v)); }

UNARY_OP(gelu, "Y = X * Phi(X) = 0.5 * X * (1 + erf(X / sqrt(2))), the exact form (float32, float64)", NULL, 0, NULL,
         NULL, r = BY_TYPE(v, pardo_vgeluf, pardo_gelu_f64);)
UNARY_GRAD_OP(gelu, "dX = dY * (Phi(X) + X * phi(X)), phi the normal density (gradient of gelu; float32, float64)",
              NULL, 0, NULL, r = g * BY_TYPE(v, pardo_vgelu_gradf, gelu_grad_d);)
