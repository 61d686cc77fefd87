// elementwise.cu - CUDA kernels for the elementwise ops (relu, sigmoid, tanh,
// exp, log, scale; add, sub, mul, div with numpy broadcasting), float32 and
// float64. Launched through ops/cuda/launch.h.
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch.h"

using namespace pardo_cu;

namespace {


template <typename T> __device__ T apply_unary(int kind, T x, T a, T b) {
    switch (kind) {
    case PARDO_CU_RELU: return x > T(0) ? x : T(0);
    case PARDO_CU_SIGMOID: {
        if (x >= T(0)) return T(1) / (T(1) + exp(-x));
        T e = exp(x);
        return e / (T(1) + e);
    }
    case PARDO_CU_TANH: return tanh(x);
    case PARDO_CU_EXP: return exp(x);
    case PARDO_CU_LOG: return log(x);
    case PARDO_CU_SCALE: return x * a + b;
    }
    return x;
}

template <typename T> __global__ void unary_kernel(int kind, const T *x, T *y, int64_t n, T a, T b) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = apply_unary(kind, x[i], a, b);
}

struct Broadcast {
    int ndim;
    int64_t shape[PARDO_CU_MAX_DIMS];
    int64_t a_stride[PARDO_CU_MAX_DIMS];
    int64_t b_stride[PARDO_CU_MAX_DIMS];
};

template <typename T> __device__ T apply_binary(int kind, T a, T b) {
    switch (kind) {
    case PARDO_CU_ADD: return a + b;
    case PARDO_CU_SUB: return a - b;
    case PARDO_CU_MUL: return a * b;
    case PARDO_CU_DIV: return a / b;
    }
    return a;
}

template <typename T>
__global__ void binary_kernel(int kind, const T *a, const T *b, T *z, int64_t n, Broadcast bc) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = i, ia = 0, ib = 0;
        for (int d = bc.ndim - 1; d >= 0; d--) {
            int64_t c = rem % bc.shape[d];
            rem /= bc.shape[d];
            ia += c * bc.a_stride[d];
            ib += c * bc.b_stride[d];
        }
        z[i] = apply_binary(kind, a[ia], b[ib]);
    }
}


int finish(const char *what, char *err, size_t errlen) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(PARDO_CU_STREAM);
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "CUDA %s kernel failed: %s", what, cudaGetErrorString(e));
    return -7; /* PARDO_ECUDA */
}

} // namespace

extern "C" int pardo_cuda_launch_unary(int kind, int f64, const void *x, void *y, int64_t n, double a, double b,
                                       char *err, size_t errlen) {
    if (n == 0) return 0;
    if (f64)
        unary_kernel<double>
            <<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>(kind, (const double *)x, (double *)y, n, a, b);
    else
        unary_kernel<float>
            <<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>(kind, (const float *)x, (float *)y, n, (float)a, (float)b);
    return finish("unary", err, errlen);
}

extern "C" int pardo_cuda_launch_binary(int kind, int f64, const void *a, const void *b, void *z, int ndim,
                                        const int64_t *out_shape, const int64_t *a_strides,
                                        const int64_t *b_strides, char *err, size_t errlen) {
    Broadcast bc;
    int64_t n = 1;
    bc.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        bc.shape[d] = out_shape[d];
        bc.a_stride[d] = a_strides[d];
        bc.b_stride[d] = b_strides[d];
        n *= out_shape[d];
    }
    if (n == 0) return 0;
    if (f64)
        binary_kernel<double><<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>(kind, (const double *)a, (const double *)b,
                                                                             (double *)z, n, bc);
    else
        binary_kernel<float><<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>(kind, (const float *)a, (const float *)b,
                                                                            (float *)z, n, bc);
    return finish("binary", err, errlen);
}
