/* unary.h - the shared machinery of the unary float ops (ops/elementwise.c:
 * neg, exp, log, sqrt, abs, pow, scale, clip; ops/activation.c: relu,
 * leaky_relu, sigmoid, tanh, gelu) and of their gradient ops T_grad (inputs
 * X, Y, dY; output dX). A family file defines one op and its gradient with
 * UNARY_OP and UNARY_GRAD_OP below; the runners live in ops/unary.c.
 * The ops take float32 and float64, and float16 and bfloat16 through the
 * float32 kernel (pardo_op_def.halves_in_f32: widened, run, rounded back,
 * ops/op_halves.c); the gradient ops float32 and float64. Math calls in op
 * bodies resolve to the float or double functions through <tgmath.h>, which
 * the family file includes. */
#ifndef PARDO_UNARY_H
#define PARDO_UNARY_H

#include <stdint.h>

#include "kernel_util.h"
#include "op.h"

/* An op's parameters from its attrs (scale: scale, bias; pow: exponent;
 * clip: min, max; leaky_relu: alpha), as the op's ARGS function reads them. */
typedef struct pardo_unary_args {
    double p, q;
} pardo_unary_args;

/* Reads op's attrs into *args; PARDO_EINVAL naming the attr when one is bad
 * or a required one is missing. */
typedef int (*pardo_unary_args_fn)(const pardo_op *op, pardo_unary_args *args, pardo_status *st);

/* y[i] = f(x[i]) over n elements. */
typedef void (*pardo_unary_fn)(const void *x, void *y, int64_t n, const pardo_unary_args *args);

/* dx[i] = dy[i] * f'(x[i]) (y[i] = f(x[i]) given too) over n elements. */
typedef void (*pardo_unary_grad_fn)(const void *x, const void *y, const void *dy, void *dx, int64_t n,
                                    const pardo_unary_args *args);

/* The schemas every unary op and unary gradient op shares (ops/unary.c). */
extern const pardo_arg_def pardo_unary_x_in[1];
extern const pardo_arg_def pardo_unary_y_out[1];
extern const pardo_arg_def pardo_unary_grad_in[3];
extern const pardo_arg_def pardo_unary_grad_in_from_y[3]; // X optional: Y stands in
extern const pardo_arg_def pardo_unary_grad_out[1];

/* Inference of a unary op: reads its attrs with args (NULL: none), checks
 * that X is float32, float64, float16 or bfloat16, or an integer dtype ints
 * (NULL: none) has a kernel for, and gives Y X's type. */
int pardo_unary_infer_ints(pardo_infer_ctx *ctx, pardo_unary_args_fn args, const pardo_unary_fn *ints);

/* CPU kernel of a unary op: Y = f(X) with f32 or f64 by X's dtype, or
 * ints[X's dtype] (ints may be NULL); float16 and bfloat16 arrive widened
 * (pardo_op_run_cpu). Returns PARDO_OK or the error of args or of the output's
 * allocation. */
int pardo_unary_run_ints(pardo_kernel_ctx *ctx, pardo_unary_fn f32, pardo_unary_fn f64, const pardo_unary_fn *ints,
                         pardo_unary_args_fn args);

/* Inference of a unary gradient op (X, Y, dY -> dX): X float32 or float64,
 * Y and dY (when given) of X's dtype; dX gets X's type. */
int pardo_unary_grad_infer(pardo_infer_ctx *ctx, pardo_unary_args_fn args);

/* CPU kernel of a unary gradient op: dX = g(X, Y, dY); zeros when dY is
 * absent; nothing when dX is not wanted. PARDO_ESHAPE when X, Y and dY
 * disagree on dtype or shape. */
int pardo_unary_grad_run(pardo_kernel_ctx *ctx, pardo_unary_grad_fn f32, pardo_unary_grad_fn f64,
                         pardo_unary_args_fn args);

/* Defines NAME, y[i] = f(x[i]) for elements of type T, where the statements
 * in the variadic part set `r` from `v` (both elem_t = T) and may use the
 * op's parameters `p` and `q` (elem_t). */
#define UNARY_KERNEL(NAME, T, ...)                                                                                     \
    PARDO_SIMD_CLONES static void NAME(const void *vx, void *vy, int64_t n, const pardo_unary_args *args) {            \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        typedef T elem_t;                                                                                              \
        const elem_t p = (elem_t)args->p, q = (elem_t)args->q;                                                         \
        (void)p;                                                                                                       \
        (void)q;                                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const elem_t v = x[i];                                                                                     \
            elem_t r;                                                                                                  \
            __VA_ARGS__                                                                                                \
            y[i] = r;                                                                                                  \
        }                                                                                                              \
    }

/* Defines NAME, a gradient kernel for elements of type T: the statements
 * set `r` (dX) from `v` (X), `w` (Y), `g` (dY) and the parameters p, q. */
#define UNARY_GRAD_KERNEL(NAME, T, ...)                                                                                \
    PARDO_SIMD_CLONES static void NAME(const void *vx, const void *vy, const void *vdy, void *vdx, int64_t n,          \
                     const pardo_unary_args *args) {                                                                   \
        const T *x = vx, *y = vy, *dy = vdy;                                                                           \
        T *dx = vdx;                                                                                                   \
        typedef T elem_t;                                                                                              \
        const elem_t p = (elem_t)args->p, q = (elem_t)args->q;                                                         \
        (void)p;                                                                                                       \
        (void)q;                                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const elem_t v = x[i], w = y[i], g = dy[i];                                                                \
            elem_t r;                                                                                                  \
            (void)v;                                                                                                   \
            (void)w;                                                                                                   \
            __VA_ARGS__                                                                                                \
            dx[i] = r;                                                                                                 \
        }                                                                                                              \
    }

/* Defines op NAME (pardo_op_NAME): kernels, inference, CPU entry and its
 * pardo_op_def. ATTRS/N_ATTRS its attr schema (NULL, 0: none), ARGS its attr
 * reader (NULL: none), CUDA its CUDA kernel (a weak pardo_cuda_* or NULL).
 * The op is differentiable with NAME_grad (UNARY_GRAD_OP). */
#define UNARY_OP(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, ...)                                                           \
    UNARY_OP_BUILT(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, pardo_grad_standard, __VA_ARGS__)

/* As UNARY_OP, with the gradient builder GRAD: pardo_grad_from_output for an
 * op whose NAME_grad reads only Y and dY (UNARY_GRAD_OP_FROM_Y), so that X
 * can be freed after its forward readers. */
#define UNARY_OP_BUILT(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, GRAD, ...)                                               \
    UNARY_OP_DEF(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, GRAD, NULL, false, __VA_ARGS__)

/* As UNARY_OP_BUILT, with INTS (a PARDO_DTYPE_COUNT table of integer
 * kernels, UNARY_INT_KERNELS): the integer dtypes it has a kernel for run
 * it, the others are refused. */
#define UNARY_OP_INTS(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, GRAD, INTS, ...)                                          \
    UNARY_OP_DEF(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, GRAD, INTS, true, __VA_ARGS__)

/* The two above: INTS NULL or a table; ALL whether it takes the integer dtypes past bool. */
#define UNARY_OP_DEF(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, GRAD, INTS, ALL, ...)                                      \
    UNARY_KERNEL(NAME##_f32, float, __VA_ARGS__)                                                                       \
    UNARY_KERNEL(NAME##_f64, double, __VA_ARGS__)                                                                      \
    static int NAME##_infer(pardo_infer_ctx *ctx) { return pardo_unary_infer_ints(ctx, ARGS, INTS); }                  \
    static int NAME##_cpu(pardo_kernel_ctx *ctx) {                                                                     \
        return pardo_unary_run_ints(ctx, NAME##_f32, NAME##_f64, INTS, ARGS);                                          \
    }                                                                                                                  \
    const pardo_op_def pardo_op_##NAME = {                                                                             \
        .type = #NAME,                                                                                                 \
        .doc = DOC,                                                                                                    \
        .inputs = pardo_unary_x_in,                                                                                    \
        .n_inputs = 1,                                                                                                 \
        .outputs = pardo_unary_y_out,                                                                                  \
        .n_outputs = 1,                                                                                                \
        .attrs = ATTRS,                                                                                                \
        .n_attrs = N_ATTRS,                                                                                            \
        .infer = NAME##_infer,                                                                                         \
        .cpu = NAME##_cpu,                                                                                             \
        .cuda = CUDA,                                                                                                  \
        .inplace = true,                                                                                               \
        .grad = GRAD,                                                                                                  \
        .all_dtypes = ALL,                                                                                             \
        .halves_in_f32 = true,                                                                                         \
    };

/* Defines NAME_T, y[i] = EXPR of v = x[i], for the integer type T (U its
 * unsigned twin: arithmetic in U wraps, as NumPy's and ONNX Runtime's
 * integer abs and neg do at the type's minimum, where T would overflow). */
#define UNARY_INT_KERNEL(NAME, T, U, EXPR)                                                                             \
    PARDO_SIMD_CLONES static void NAME(const void *vx, void *vy, int64_t n, const pardo_unary_args *args) {            \
        (void)args;                                                                                                    \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        typedef T elem_t;                                                                                              \
        typedef U uelem_t;                                                                                             \
        (void)sizeof(uelem_t);                                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const elem_t v = x[i];                                                                                     \
            y[i] = (elem_t)(EXPR);                                                                                     \
        }                                                                                                              \
    }

/* Defines NAME_ints, the integer kernels of a unary op by dtype: SIGNED_EXPR
 * for int8..int64, UNSIGNED_EXPR for uint8..uint64, each an expression of v
 * (elem_t) that may use uelem_t. */
#define UNARY_INT_KERNELS(NAME, SIGNED_EXPR, UNSIGNED_EXPR)                                                            \
    UNARY_INT_KERNEL(NAME##_i8, int8_t, uint8_t, SIGNED_EXPR)                                                          \
    UNARY_INT_KERNEL(NAME##_i16, int16_t, uint16_t, SIGNED_EXPR)                                                       \
    UNARY_INT_KERNEL(NAME##_i32, int32_t, uint32_t, SIGNED_EXPR)                                                       \
    UNARY_INT_KERNEL(NAME##_i64, int64_t, uint64_t, SIGNED_EXPR)                                                       \
    UNARY_INT_KERNEL(NAME##_u8, uint8_t, uint8_t, UNSIGNED_EXPR)                                                       \
    UNARY_INT_KERNEL(NAME##_u16, uint16_t, uint16_t, UNSIGNED_EXPR)                                                    \
    UNARY_INT_KERNEL(NAME##_u32, uint32_t, uint32_t, UNSIGNED_EXPR)                                                    \
    UNARY_INT_KERNEL(NAME##_u64, uint64_t, uint64_t, UNSIGNED_EXPR)                                                    \
    static const pardo_unary_fn NAME##_ints[PARDO_DTYPE_COUNT] = {                                                     \
        [PARDO_I8] = NAME##_i8,   [PARDO_I16] = NAME##_i16, [PARDO_I32] = NAME##_i32, [PARDO_I64] = NAME##_i64,        \
        [PARDO_U8] = NAME##_u8,   [PARDO_U16] = NAME##_u16, [PARDO_U32] = NAME##_u32, [PARDO_U64] = NAME##_u64};

/* Defines NAME_grad (pardo_op_NAME_grad), the gradient op of UNARY_OP NAME,
 * taking the same ATTRS and ARGS; the variadic part as UNARY_GRAD_KERNEL. */
#define UNARY_GRAD_OP(NAME, DOC, ATTRS, N_ATTRS, ARGS, ...)                                                            \
    UNARY_GRAD_OP_IN(NAME, DOC, ATTRS, N_ATTRS, ARGS, pardo_unary_grad_in, __VA_ARGS__)

/* As UNARY_GRAD_OP for a gradient that reads only Y (w) and dY (g), never X
 * (v): X may be left out (""), and Y then stands in for it. */
#define UNARY_GRAD_OP_FROM_Y(NAME, DOC, ATTRS, N_ATTRS, ARGS, ...)                                                     \
    UNARY_GRAD_OP_IN(NAME, DOC, ATTRS, N_ATTRS, ARGS, pardo_unary_grad_in_from_y, __VA_ARGS__)

/* As UNARY_GRAD_OP and UNARY_GRAD_OP_FROM_Y, with the CUDA kernel CUDA (ops/cuda/kernels.h). */
#define UNARY_GRAD_OP_CUDA(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, ...)                                                 \
    UNARY_GRAD_OP_DEF(NAME, DOC, ATTRS, N_ATTRS, ARGS, pardo_unary_grad_in, CUDA, __VA_ARGS__)
#define UNARY_GRAD_OP_FROM_Y_CUDA(NAME, DOC, ATTRS, N_ATTRS, ARGS, CUDA, ...)                                          \
    UNARY_GRAD_OP_DEF(NAME, DOC, ATTRS, N_ATTRS, ARGS, pardo_unary_grad_in_from_y, CUDA, __VA_ARGS__)

#define UNARY_GRAD_OP_IN(NAME, DOC, ATTRS, N_ATTRS, ARGS, INPUTS, ...)                                                 \
    UNARY_GRAD_OP_DEF(NAME, DOC, ATTRS, N_ATTRS, ARGS, INPUTS, NULL, __VA_ARGS__)

#define UNARY_GRAD_OP_DEF(NAME, DOC, ATTRS, N_ATTRS, ARGS, INPUTS, CUDA, ...)                                          \
    UNARY_GRAD_KERNEL(NAME##_grad_f32, float, __VA_ARGS__)                                                             \
    UNARY_GRAD_KERNEL(NAME##_grad_f64, double, __VA_ARGS__)                                                            \
    static int NAME##_grad_infer(pardo_infer_ctx *ctx) { return pardo_unary_grad_infer(ctx, ARGS); }                   \
    static int NAME##_grad_cpu(pardo_kernel_ctx *ctx) {                                                                \
        return pardo_unary_grad_run(ctx, NAME##_grad_f32, NAME##_grad_f64, ARGS);                                      \
    }                                                                                                                  \
    const pardo_op_def pardo_op_##NAME##_grad = {                                                                      \
        .type = #NAME "_grad",                                                                                         \
        .doc = DOC,                                                                                                    \
        .inputs = INPUTS,                                                                                              \
        .n_inputs = 3,                                                                                                 \
        .outputs = pardo_unary_grad_out,                                                                               \
        .n_outputs = 1,                                                                                                \
        .attrs = ATTRS,                                                                                                \
        .n_attrs = N_ATTRS,                                                                                            \
        .infer = NAME##_grad_infer,                                                                                    \
        .cpu = NAME##_grad_cpu,                                                                                        \
        .cuda = CUDA,                                                                                                  \
    };

#endif
