/* kernels.h - the CUDA kernel functions ops/cuda/ C files define (built with
 * CUDA=1 only). Declared weak: in a CPU-only build they are NULL, so an op
 * def's `.cuda = pardo_cuda_relu` stays NULL and the CPU kernel runs. This is
 * the one place the CUDA/no-CUDA choice reaches the op family files. */
#ifndef PARDO_CUDA_KERNELS_H
#define PARDO_CUDA_KERNELS_H

#include "op.h"

#define PARDO_CUDA_KERNEL(name) int pardo_cuda_##name(pardo_kernel_ctx *ctx) __attribute__((weak))
PARDO_CUDA_KERNEL(relu);
PARDO_CUDA_KERNEL(sigmoid);
PARDO_CUDA_KERNEL(tanh);
PARDO_CUDA_KERNEL(exp);
PARDO_CUDA_KERNEL(log);
PARDO_CUDA_KERNEL(scale);
PARDO_CUDA_KERNEL(add);
PARDO_CUDA_KERNEL(sub);
PARDO_CUDA_KERNEL(mul);
PARDO_CUDA_KERNEL(div);
#undef PARDO_CUDA_KERNEL

#endif
