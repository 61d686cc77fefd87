/* shape.c - shape ops: identity (issue "Op library" adds reshape, transpose,
 * concat, flatten, cast). Each op: schema, inference, CPU kernel. */
#include <string.h>

#include "op.h"

static const pardo_arg_def x_in[] = {{"X", "input tensor", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "output tensor", false, false}};

static int identity_infer(pardo_infer_ctx *ctx) {
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

static int identity_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    if (y != x && x->nbytes) memcpy(pardo_tensor_data(y), pardo_tensor_data(x), x->nbytes);
    return PARDO_OK;
}

static const pardo_arg_def identity_grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output", false, false},
    {"dY", "gradient of the output", true, false},
};
static const pardo_arg_def identity_grad_out[] = {{"dX", "gradient of X (= dY)", true, false}};

static int identity_grad_infer(pardo_infer_ctx *ctx) {
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

static int identity_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = ctx->in[2];
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (dy) {
        memcpy(pardo_tensor_data(dx), pardo_tensor_data(dy), dx->nbytes);
    } else {
        memset(pardo_tensor_data(dx), 0, dx->nbytes);
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_identity_grad = {
    .type = "identity_grad",
    .doc = "dX = dY (gradient of identity)",
    .inputs = identity_grad_in,
    .n_inputs = 3,
    .outputs = identity_grad_out,
    .n_outputs = 1,
    .infer = identity_grad_infer,
    .cpu = identity_grad_cpu,
};

const pardo_op_def pardo_op_identity = {
    .type = "identity",
    .doc = "Y = X (a copy)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .infer = identity_infer,
    .cpu = identity_cpu,
    .grad = pardo_grad_standard,
};
