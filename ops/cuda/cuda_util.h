/* cuda_util.h - what the C glue of ops/cuda/ shares (built with CUDA=1 only):
 * which inputs a CUDA kernel takes, and handing an op to its CPU kernel when
 * it does not take them. */
#ifndef PARDO_CUDA_UTIL_H
#define PARDO_CUDA_UTIL_H

#include <stdbool.h>

#include "op.h"

/* True when the inputs of ctx whose bits are set in `inputs` (bit k: input k) and that are present are plain
 * tensors (no tensor_array) of one dtype, float32 or float64: what the CUDA kernels compute in. */
bool pardo_cuda_floats_in(const pardo_kernel_ctx *ctx, unsigned inputs);

/* Runs ctx's op on its CPU kernel (pardo_op_run_cpu) instead: brings every input (a tensor_array's parts too) to
 * the host, sets ctx->device to the CPU, so the outputs are made there, and notes once per op type why
 * (pardo_op_note_cpu_run; `why` borrowed). Returns what the CPU kernel returns (its errors are the op's), or the
 * copy's error with ctx->st filled. The tensors stay the executor's. */
int pardo_cuda_run_on_cpu(pardo_kernel_ctx *ctx, const char *why);

/* pardo_cuda_run_on_cpu for an op whose `inputs` pardo_cuda_floats_in refused, saying which and why. */
int pardo_cuda_run_on_cpu_inputs(pardo_kernel_ctx *ctx, unsigned inputs);

#endif
