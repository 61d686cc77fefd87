/* elementwise_cuda.c - the CUDA kernel functions of the elementwise ops
 * (pardo_kernel_fn), built only with CUDA=1. ops/elementwise.c and
 * ops/activation.c name them through ops/cuda/kernels.h, which leaves their
 * .cuda NULL in a CPU-only build. Integer and half dtypes run the op's CPU
 * kernel (pardo_cuda_run_on_cpu). */
#include <stdio.h>

#include "cuda_util.h"
#include "kernels.h"
#include "launch.h"

static int unary(pardo_kernel_ctx *ctx, int kind, double a, double b) {
    pardo_tensor *x = ctx->in[0];
    if (!pardo_cuda_floats_in(ctx, 0x1)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x1);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_unary(kind, x->dtype == PARDO_F64, x->mem->gpu_ptr, y->mem->gpu_ptr, x->numel, a, b,
                                     err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

#define PARDO_CUDA_UNARY(name, KIND) \
    int pardo_cuda_##name(pardo_kernel_ctx *ctx) { return unary(ctx, KIND, 1.0, 0.0); }
PARDO_CUDA_UNARY(relu, PARDO_CU_RELU)
PARDO_CUDA_UNARY(sigmoid, PARDO_CU_SIGMOID)
PARDO_CUDA_UNARY(tanh, PARDO_CU_TANH)
PARDO_CUDA_UNARY(exp, PARDO_CU_EXP)
PARDO_CUDA_UNARY(log, PARDO_CU_LOG)
#undef PARDO_CUDA_UNARY

int pardo_cuda_scale(pardo_kernel_ctx *ctx) {
    double scale, bias;
    if (pardo_attr_float(ctx->op, "scale", 1.0, &scale, ctx->st) != PARDO_OK ||
        pardo_attr_float(ctx->op, "bias", 0.0, &bias, ctx->st) != PARDO_OK)
        return ctx->st->code;
    return unary(ctx, PARDO_CU_SCALE, scale, bias);
}

static int binary(pardo_kernel_ctx *ctx, int kind) {
    pardo_tensor *a = ctx->in[0], *b = ctx->in[1];
    char sa[128], sb[128];
    if (!pardo_cuda_floats_in(ctx, 0x3)) return pardo_cuda_run_on_cpu_inputs(ctx, 0x3);
    pardo_type ta = pardo_tensor_type(a), tb = pardo_tensor_type(b), to;
    if (pardo_broadcast_types(&ta, &tb, &to, ctx->st) != PARDO_OK) return ctx->st->code;
    int64_t as[PARDO_MAX_DIMS], bs[PARDO_MAX_DIMS];
    int64_t stride_a = 1, stride_b = 1;
    for (int d = to.ndim - 1; d >= 0; d--) {
        int ia = a->ndim - to.ndim + d, ib = b->ndim - to.ndim + d;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if ((da != to.shape[d] && da != 1) || (db != to.shape[d] && db != 1))
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "shapes %s and %s do not broadcast",
                                pardo_shape_str(a->ndim, a->shape, sa, sizeof sa),
                                pardo_shape_str(b->ndim, b->shape, sb, sizeof sb));
        as[d] = da == 1 ? 0 : stride_a;
        bs[d] = db == 1 ? 0 : stride_b;
        stride_a *= da;
        stride_b *= db;
    }
    pardo_tensor *z = pardo_kernel_output(ctx, 0, a->dtype, to.ndim, to.shape);
    if (!z) return ctx->st->code;
    char err[256];
    int rc = pardo_cuda_launch_binary(kind, a->dtype == PARDO_F64, a->mem->gpu_ptr, b->mem->gpu_ptr, z->mem->gpu_ptr,
                                      to.ndim, to.shape, as, bs, err, sizeof err);
    return rc ? pardo_errorf(ctx->st, rc, "%s", err) : PARDO_OK;
}

#define PARDO_CUDA_BINARY(name, KIND) \
    int pardo_cuda_##name(pardo_kernel_ctx *ctx) { return binary(ctx, KIND); }
PARDO_CUDA_BINARY(add, PARDO_CU_ADD)
PARDO_CUDA_BINARY(sub, PARDO_CU_SUB)
PARDO_CUDA_BINARY(mul, PARDO_CU_MUL)
PARDO_CUDA_BINARY(div, PARDO_CU_DIV)
#undef PARDO_CUDA_BINARY
