/* placement.c - to_device and to_host, the explicit CPU <-> GPU crossings
 * that the placement pass (transpiler/place.c) puts into a graph run on a
 * GPU, as ONNX Runtime's MemcpyFromHost / MemcpyToHost nodes. Y is X made
 * current on the op's device: the executor moves X there before the kernel
 * runs (the copy, a `copy` trace event inside the op's span), and Y is X's
 * very tensor (no second copy) where no op writes X or Y after their
 * producers, else a copy of it. to_device has a CUDA kernel (which runs in
 * a GPU run; ops/cuda/placement_cuda.c); to_host has none, so it always runs
 * on the CPU, by design (no note). On the CPU both are X itself. */
#include <string.h>

#include "core/device.h"
#include "kernels.h"
#include "op.h"
#include "placement.h"

static const pardo_arg_def place_in[] = {{"X", "the tensor to move (any dtype)", false, false}};
static const pardo_arg_def place_out[] = {{"Y", "X on the op's device", false, false}};

static int place_infer(pardo_infer_ctx *ctx) {
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

/* How many ops of block 0 write var `name`. */
static int writers(const pardo_program *p, const char *name) {
    int n = 0;
    for (int i = 0; p && i < p->blocks[0].n_ops; i++) n += pardo_op_writes(&p->blocks[0].ops[i], name);
    return n;
}

/* Whether Y may be X's tensor: a feed or a temp that only its producer writes, into a temp only this op writes. */
static bool alias_safe(const pardo_kernel_ctx *ctx) {
    if (ctx->block != 0 || !ctx->prog || ctx->in[0]->is_array) return false;
    const pardo_graph_var *x = pardo_block_find_var(&ctx->prog->blocks[0], ctx->op->in[0]),
                          *y = pardo_block_find_var(&ctx->prog->blocks[0], ctx->op->out[0]);
    return x && y && (x->role == PARDO_VAR_TEMP || x->role == PARDO_VAR_FEED) && y->role == PARDO_VAR_TEMP &&
           writers(ctx->prog, ctx->op->in[0]) <= 1 && writers(ctx->prog, ctx->op->out[0]) == 1;
}

int pardo_place_kernel(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    if (x->is_array) return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 is a tensor_array, expected a tensor");
    if (alias_safe(ctx)) { /* X is current on this device now (the executor moved it): Y is X */
        pardo_tensor_release(ctx->out[0]);
        ctx->out[0] = pardo_tensor_retain(x);
        return PARDO_OK;
    }
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    if (y == x || !x->nbytes) return PARDO_OK;
    if (ctx->device == PARDO_DEVICE_CUDA)
        return pardo_device_copy_d2d(y->mem->gpu_ptr, x->mem->gpu_ptr, x->nbytes, ctx->st);
    memcpy(pardo_tensor_data(y), pardo_tensor_data(x), x->nbytes);
    return PARDO_OK;
}

const pardo_op_def pardo_op_to_device = {
    .type = "to_device",
    .doc = "Y = X on the GPU of a GPU run (the placement pass's host-to-device crossing; any dtype); on the CPU, X",
    .inputs = place_in,
    .n_inputs = 1,
    .outputs = place_out,
    .n_outputs = 1,
    .infer = place_infer,
    .cpu = pardo_place_kernel,
    .cuda = pardo_cuda_to_device,
    .all_dtypes = true,
};

const pardo_op_def pardo_op_to_host = {
    .type = "to_host",
    .doc = "Y = X on the CPU (the placement pass's device-to-host crossing; any dtype)",
    .inputs = place_in,
    .n_inputs = 1,
    .outputs = place_out,
    .n_outputs = 1,
    .infer = place_infer,
    .cpu = pardo_place_kernel,
    .on_host = true,
    .all_dtypes = true,
};
