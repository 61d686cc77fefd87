// nn_block.cuh - what the nn families' .cu files share (nvcc only): the launch sizes, the launch-error check, and
// the row walk of a [outer, n, inner] view either by a whole block (a contiguous row: inner 1, the block's
// threads stride along it and reduce in shared memory) or by one thread (a strided column: inner > 1, or rows
// too short for a block), with the reductions in double.
#ifndef PARDO_CUDA_NN_BLOCK_CUH
#define PARDO_CUDA_NN_BLOCK_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "launch_util.cuh"

namespace pardo_nn {

using pardo_cu::grid_for;
using pardo_cu::kEcuda;
using pardo_cu::kThreads;
using pardo_cu::launched;
constexpr int kBlockRowMin = 64; // a contiguous row at least this long gets a block

struct SumOp {
    __device__ double operator()(double a, double b) const { return a + b; }
};
struct MaxOp { // NaN-blind like the CPU kernels' `v > m ? v : m`
    __device__ double operator()(double a, double b) const { return b > a ? b : a; }
};

// The reduction of v over the block (every thread gets it); sh is 32 doubles of shared memory. Every thread of
// the block must call it (it synchronises).
template <typename Op> __device__ double block_reduce(double v, double *sh, Op op) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    __syncthreads(); // the previous call's readers are done with sh
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) { // the warps' results in a fixed order: the same bits every run
        double w = sh[0];
        for (int k = 1; k < warps; k++) w = op(w, sh[k]);
        sh[0] = w;
    }
    __syncthreads();
    return sh[0];
}

// One row of a [outer, n, inner] view: its first element, the stride between its elements, and which of them
// this thread walks (first, first + step, ...).
struct Walk {
    int64_t base, stride;
    int first, step;
};

// kBlock: row r is the block's (a contiguous row, inner 1); else the thread's (r over outer * inner columns).
template <bool kBlock> __device__ Walk walk_of(int64_t r, int64_t n, int64_t inner) {
    if (kBlock) return Walk{r * n, 1, (int)threadIdx.x, (int)blockDim.x};
    return Walk{(r / inner) * n * inner + r % inner, inner, 0, 1};
}

// The first row of this block or thread, and the step to its next.
template <bool kBlock> __device__ int64_t row_first() {
    return kBlock ? (int64_t)blockIdx.x : blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
}
template <bool kBlock> __device__ int64_t row_step() {
    return kBlock ? (int64_t)gridDim.x : (int64_t)gridDim.x * blockDim.x;
}

// The row's reduction of this thread's part v: over the block, or v itself for a thread's row.
template <bool kBlock, typename Op> __device__ double row_reduce(double v, double *sh, Op op) {
    return kBlock ? block_reduce(v, sh, op) : v;
}

// Launches KERNEL<T, true> with a block per row where inner is 1 and a row is long, else KERNEL<T, false> with a
// thread per row; rows = outer * inner. ARGS are the kernel's arguments.
#define PARDO_NN_LAUNCH_ROWS(KERNEL, T, rows, n, inner, ...)                                                           \
    do {                                                                                                               \
        if ((inner) == 1 && (n) >= pardo_nn::kBlockRowMin)                                                             \
            KERNEL<T, true><<<pardo_nn::grid_for(rows, 1), pardo_nn::kThreads, 0, PARDO_CU_STREAM>>>(__VA_ARGS__);     \
        else                                                                                                           \
            KERNEL<T, false>                                                                                           \
                <<<pardo_nn::grid_for(rows, pardo_nn::kThreads), pardo_nn::kThreads, 0, PARDO_CU_STREAM>>>(            \
                    __VA_ARGS__);                                                                                      \
    } while (0)

} // namespace pardo_nn

#endif
