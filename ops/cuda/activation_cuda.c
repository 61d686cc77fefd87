/* activation_cuda.c - gelu, relu_grad, sigmoid_grad, tanh_grad and gelu_grad on the GPU (pardo_kernel_fn), built
 * only with CUDA=1; ops/activation.c names them through ops/cuda/kernels.h. The semantics are ops/unary.c's
 * pardo_unary_grad_run with ops/activation.c's formulas: inputs X, Y and the optional dY (zeros when left out),
 * Y and dY of X's dtype and shape; relu_grad, sigmoid_grad and tanh_grad read only Y (X may be left out), gelu_grad
 * only X. gelu is the exact 0.5 x erfc(-x / sqrt 2) (the op has no tanh form). What the GPU half does not take
 * (half and integer dtypes, a tensor_array, inputs the CPU kernel refuses) runs the CPU kernel
 * (pardo_cuda_run_on_cpu), which also gives the errors. */
#include "core/device.h"
#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"
#include "launch_nn.h"

/* gelu's CUDA kernel: Y = 0.5 X erfc(-X / sqrt 2). */
int pardo_cuda_gelu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_gelu(x->dtype == PARDO_F64, x->mem->gpu_ptr, y->mem->gpu_ptr, x->numel, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check("gelu", err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

/* The gradient op of kind (launch_nn.h's pardo_cuda_act_grad); from_y: X may be left out, Y standing in. */
static int act_grad(pardo_kernel_ctx *ctx, int kind, bool from_y) {
    pardo_tensor *x = ctx->in[0], *y = ctx->in[1], *dy = ctx->n_in > 2 ? ctx->in[2] : NULL;
    if (!x && from_y) x = y;
    if (!x || !y || (dy && !pardo_shape_equal(dy->ndim, dy->shape, x->ndim, x->shape)) ||
        !pardo_shape_equal(y->ndim, y->shape, x->ndim, x->shape))
        return pardo_cuda_run_on_cpu(ctx, "its CUDA kernel takes the inputs the CPU kernel takes, not these");
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!pardo_cuda_floats_in(ctx, 0x7)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x7);
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!dy) return pardo_device_memset_zero(dx->mem->gpu_ptr, dx->nbytes, ctx->st);
    const pardo_tensor *v = kind == PARDO_CU_GRAD_GELU ? x : y;
    char err[256];
    int rc = pardo_cuda_launch_act_grad(kind, x->dtype == PARDO_F64, v->mem->gpu_ptr, dy->mem->gpu_ptr,
                                        dx->mem->gpu_ptr, x->numel, err, sizeof err);
    if (!rc) rc = pardo_cuda_sync_check(ctx->op->def->type, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

/* relu_grad's CUDA kernel: dX = dY where Y > 0, else 0. */
int pardo_cuda_relu_grad(pardo_kernel_ctx *ctx) { return act_grad(ctx, PARDO_CU_GRAD_RELU, true); }

/* sigmoid_grad's CUDA kernel: dX = dY Y (1 - Y). */
int pardo_cuda_sigmoid_grad(pardo_kernel_ctx *ctx) { return act_grad(ctx, PARDO_CU_GRAD_SIGMOID, true); }

/* tanh_grad's CUDA kernel: dX = dY (1 - Y^2). */
int pardo_cuda_tanh_grad(pardo_kernel_ctx *ctx) { return act_grad(ctx, PARDO_CU_GRAD_TANH, true); }

/* gelu_grad's CUDA kernel: dX = dY (Phi(X) + X phi(X)). */
int pardo_cuda_gelu_grad(pardo_kernel_ctx *ctx) { return act_grad(ctx, PARDO_CU_GRAD_GELU, false); }
