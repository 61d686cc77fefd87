/* kernels.h - the CUDA kernel functions ops/cuda/ C files define, and the one
 * list of the ops that have one (PARDO_CUDA_KERNELS). This is the one place the
 * CUDA/no-CUDA choice reaches the op family files, which name the kernels as
 * `.cuda = pardo_cuda_relu`:
 * - a CUDA build (the Makefile's -DPARDO_CUDA) declares them as plain
 *   functions, so each op def's reference pulls its ops/cuda/ object out of
 *   libpardo.a into every program that links it (a kernel missing there is a
 *   link error, not a silent CPU run);
 * - a CPU-only build declares them weak and defines none, so every `.cuda`
 *   is NULL and the CPU kernel runs.
 * tests/check_registry.c checks the registry against the list. */
#ifndef PARDO_CUDA_KERNELS_H
#define PARDO_CUDA_KERNELS_H

#include "op.h"

/* X(op) for every op that has a CUDA kernel pardo_cuda_<op> (the op's type is
 * #op). Adding a kernel: define it in ops/cuda/, add it here and name it in
 * the op's def. */
#define PARDO_CUDA_KERNELS(X)                                                                                          \
    X(relu)                                                                                                            \
    X(sigmoid)                                                                                                         \
    X(tanh)                                                                                                            \
    X(exp)                                                                                                             \
    X(log)                                                                                                             \
    X(scale)                                                                                                           \
    X(add)                                                                                                             \
    X(sub)                                                                                                             \
    X(mul)                                                                                                             \
    X(div)                                                                                                             \
    X(matmul)                                                                                                          \
    X(matmul_grad)                                                                                                     \
    X(softmax)                                                                                                         \
    X(log_softmax)                                                                                                     \
    X(softmax_grad)                                                                                                    \
    X(log_softmax_grad)                                                                                                \
    X(softmax_cross_entropy)                                                                                           \
    X(softmax_cross_entropy_grad)                                                                                      \
    X(gelu)                                                                                                            \
    X(gelu_grad)                                                                                                       \
    X(relu_grad)                                                                                                       \
    X(sigmoid_grad)                                                                                                    \
    X(tanh_grad)                                                                                                       \
    X(layer_norm)                                                                                                      \
    X(layer_norm_grad)                                                                                                 \
    X(reduce_sum)                                                                                                      \
    X(reduce_mean)                                                                                                     \
    X(reduce_max)                                                                                                      \
    X(reduce_min)                                                                                                      \
    X(reduce_sum_grad)                                                                                                 \
    X(reduce_mean_grad)                                                                                                \
    X(reduce_max_grad)                                                                                                 \
    X(reduce_min_grad)                                                                                                 \
    X(argmax)                                                                                                          \
    X(argmin)                                                                                                          \
    X(mse_loss)                                                                                                        \
    X(mse_loss_grad)                                                                                                   \
    X(dropout)                                                                                                         \
    X(dropout_grad)                                                                                                    \
    X(sgd)                                                                                                             \
    X(momentum)                                                                                                        \
    X(adam)                                                                                                            \
    X(adamw)                                                                                                           \
    X(identity)                                                                                                        \
    X(identity_grad)                                                                                                   \
    X(reshape)                                                                                                         \
    X(reshape_grad)                                                                                                    \
    X(flatten)                                                                                                         \
    X(flatten_grad)                                                                                                    \
    X(transpose)                                                                                                       \
    X(transpose_grad)                                                                                                  \
    X(concat)                                                                                                          \
    X(concat_grad)                                                                                                     \
    X(cast)                                                                                                            \
    X(cast_grad)                                                                                                       \
    X(fill)                                                                                                            \
    X(conv2d)                                                                                                          \
    X(conv2d_grad)                                                                                                     \
    X(max_pool2d)                                                                                                      \
    X(max_pool2d_grad)                                                                                                 \
    X(avg_pool2d)                                                                                                      \
    X(avg_pool2d_grad)                                                                                                 \
    X(embedding)                                                                                                       \
    X(embedding_grad)                                                                                                  \
    X(batch_norm)                                                                                                      \
    X(batch_norm_grad)                                                                                                 \
    X(to_device)

#ifdef PARDO_CUDA
#define PARDO_CUDA_KERNEL_DECL(name) int pardo_cuda_##name(pardo_kernel_ctx *ctx);
#else
#define PARDO_CUDA_KERNEL_DECL(name) int pardo_cuda_##name(pardo_kernel_ctx *ctx) __attribute__((weak));
#endif
/* Each runs op <name> on the GPU (ctx->device is CUDA, inputs current there; pardo_kernel_fn's contract): the
 * float dtypes it has a kernel for on the device, any other input on the CPU kernel with its tensors moved
 * (one note per op type). Returns PARDO_OK, or a code with ctx->st filled (PARDO_ECUDA for a CUDA failure).
 * Called by the executor's thread that runs the op; the tensors stay the executor's. */
PARDO_CUDA_KERNELS(PARDO_CUDA_KERNEL_DECL)
#undef PARDO_CUDA_KERNEL_DECL

#endif
