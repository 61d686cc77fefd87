/* placement_cuda.c - to_device's CUDA kernel (built only with CUDA=1): the
 * executor moved X to the GPU before it runs, which is the crossing; Y is X
 * there (ops/placement.c). */
#include "placement.h"
#include "kernels.h"

int pardo_cuda_to_device(pardo_kernel_ctx *ctx) { return pardo_place_kernel(ctx); }
