// activation.cu - the device half of gelu and of the gradients of relu, sigmoid, tanh and gelu
// (ops/cuda/activation_cuda.c; the CPU kernels are ops/activation.c's, whose formulas these follow in the data's
// type). Float32 and float64, one element per thread step. Launched through ops/cuda/launch_nn.h on
// PARDO_CU_STREAM; nothing here synchronises.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_stream.cuh"
#include "launch_nn.h"
#include "nn_block.cuh"

using namespace pardo_nn;

namespace {

template <typename T> __device__ T gelu(T v) { return T(0.5) * v * erfc(-v * T(0.70710678118654752440)); }

// Phi(v) + v phi(v), phi the standard normal density
template <typename T> __device__ T gelu_slope(T v) {
    return T(0.5) * erfc(-v * T(0.70710678118654752440)) + v * (T(0.39894228040143267794) * exp(T(-0.5) * v * v));
}

template <typename T> __global__ void gelu_kernel(const T *x, T *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = gelu(x[i]);
}

template <typename T> __global__ void act_grad_kernel(int kind, const T *v, const T *dy, T *dx, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const T g = dy[i], w = v[i];
        T r;
        switch (kind) {
        case PARDO_CU_GRAD_RELU:
            r = w > T(0) ? g : T(0);
            break;
        case PARDO_CU_GRAD_SIGMOID:
            r = g * w * (T(1) - w);
            break;
        case PARDO_CU_GRAD_TANH:
            r = g * (T(1) - w * w);
            break;
        default:
            r = g * gelu_slope(w);
            break;
        }
        dx[i] = r;
    }
}

} // namespace

extern "C" int pardo_cuda_launch_gelu(int f64, const void *x, void *y, int64_t n, char *err, size_t errlen) {
    if (n <= 0) return 0;
    if (f64)
        gelu_kernel<double><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>((const double *)x, (double *)y, n);
    else
        gelu_kernel<float><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>((const float *)x, (float *)y, n);
    return launched("gelu", err, errlen);
}

extern "C" int pardo_cuda_launch_act_grad(int kind, int f64, const void *v, const void *dy, void *dx, int64_t n,
                                          char *err, size_t errlen) {
    if (n <= 0) return 0;
    if (f64)
        act_grad_kernel<double><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(
            kind, (const double *)v, (const double *)dy, (double *)dx, n);
    else
        act_grad_kernel<float><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(
            kind, (const float *)v, (const float *)dy, (float *)dx, n);
    return launched("activation gradient", err, errlen);
}
