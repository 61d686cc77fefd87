// launch_util.cuh - what every .cu file of ops/cuda/ launches with (nvcc only): the block size, the grid for n
// elements (capped at 65535 blocks: the kernels loop over the rest, GRID_LOOP), and the check of the launch just
// made, as a pardo status code with the CUDA error text.
#ifndef PARDO_CUDA_LAUNCH_UTIL_CUH
#define PARDO_CUDA_LAUNCH_UTIL_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

namespace pardo_cu {

constexpr int kThreads = 256; // a block's threads (a multiple of 32: block reductions go warp by warp)
constexpr int kEcuda = -7;    // PARDO_ECUDA

// Blocks of per_block threads for n elements, at least 1 and at most 65535.
inline int grid_for(int64_t n, int per_block = kThreads) {
    int64_t blocks = (n + per_block - 1) / per_block;
    if (blocks > 65535) blocks = 65535;
    return blocks < 1 ? 1 : (int)blocks;
}

// The launch error of the kernel just started, if any (the launchers do not synchronise): 0, or kEcuda with
// "CUDA WHAT kernel failed to start: ..." in err.
inline int launched(const char *what, char *err, size_t errlen) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "CUDA %s kernel failed to start: %s", what, cudaGetErrorString(e));
    return kEcuda;
}

} // namespace pardo_cu

// A grid-stride loop of i over [0, n).
#define GRID_LOOP(i, n)                                                                                                \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#endif
