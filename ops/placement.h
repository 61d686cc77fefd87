/* placement.h - the kernel to_device and to_host share (ops/placement.c),
 * for to_device's CUDA entry (ops/cuda/placement_cuda.c). */
#ifndef PARDO_PLACEMENT_H
#define PARDO_PLACEMENT_H

#include "op.h"

/* Y = X on ctx's device, which the executor made X current on: X's own tensor where no op writes X or Y after
 * their producers, else a copy on that device. Any dtype. */
int pardo_place_kernel(pardo_kernel_ctx *ctx);

#endif
