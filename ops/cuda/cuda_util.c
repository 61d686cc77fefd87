/* cuda_util.c - the input check and the CPU fallback the CUDA kernels share (cuda_util.h). */
#include "cuda_util.h"

#include <stdio.h>

bool pardo_cuda_floats_in(const pardo_kernel_ctx *ctx, unsigned inputs) {
    const pardo_tensor *first = NULL;
    for (int k = 0; k < ctx->n_in && k < 32; k++) {
        const pardo_tensor *t = inputs >> k & 1u ? ctx->in[k] : NULL;
        if (!t) continue;
        if (t->is_array || !pardo_dtype_is_float(t->dtype) || (first && t->dtype != first->dtype)) return false;
        if (!first) first = t;
    }
    return true;
}

int pardo_cuda_run_on_cpu(pardo_kernel_ctx *ctx, const char *why) {
    for (int k = 0; k < ctx->n_in; k++) {
        pardo_tensor *t = ctx->in[k];
        if (!t) continue;
        if (!t->is_array) {
            if (!pardo_tensor_cpu(t, ctx->st)) return ctx->st->code;
            continue;
        }
        for (int i = 0; i < t->n_parts; i++)
            if (t->parts[i] && !pardo_tensor_cpu(t->parts[i], ctx->st)) return ctx->st->code;
    }
    pardo_op_note_cpu_run(ctx->op->def, why);
    ctx->device = PARDO_DEVICE_CPU;
    return pardo_op_run_cpu(ctx);
}

int pardo_cuda_run_on_cpu_inputs(pardo_kernel_ctx *ctx, unsigned inputs) {
    char why[128] = "its CUDA kernel takes float32 and float64 tensors";
    const pardo_tensor *first = NULL;
    for (int k = 0; k < ctx->n_in && k < 32; k++) {
        const pardo_tensor *t = inputs >> k & 1u ? ctx->in[k] : NULL;
        if (!t) continue;
        if (t->is_array) {
            snprintf(why, sizeof why, "its CUDA kernel takes no tensor_array (input %d)", k);
            break;
        }
        if (!pardo_dtype_is_float(t->dtype)) {
            snprintf(why, sizeof why, "its CUDA kernel takes float32 and float64, not %s", pardo_dtype_name(t->dtype));
            break;
        }
        if (first && t->dtype != first->dtype) {
            snprintf(why, sizeof why, "its CUDA kernel takes inputs of one dtype, not %s and %s",
                     pardo_dtype_name(first->dtype), pardo_dtype_name(t->dtype));
            break;
        }
        if (!first) first = t;
    }
    return pardo_cuda_run_on_cpu(ctx, why);
}
