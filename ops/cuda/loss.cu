// loss.cu - the device half of mse_loss, mse_loss_grad, dropout and dropout_grad (ops/cuda/loss_cuda.c; the CPU
// kernels are ops/loss.c's and ops/dropout.c's, whose arithmetic these follow: the squared errors and their sum
// in double; dropout's mask from ops/dropout_mask.h, the very generator the CPU kernel calls, so a GPU run keeps
// the same elements). Float32 and float64. Launched through ops/cuda/launch_nn.h on PARDO_CU_STREAM; nothing here
// synchronises.
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_stream.cuh"
#include "dropout_mask.h"
#include "launch_nn.h"
#include "nn_block.cuh"

using namespace pardo_nn;

namespace {

// NONE: y[i] = (T)((p - t)^2); else partials[block] = the block's sum of (p - t)^2 in double
template <typename T> __global__ void mse_kernel(const T *p, const T *t, int64_t n, int red, T *y, double *partials) {
    __shared__ double sh[32];
    double s = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double d = (double)p[i] - (double)t[i];
        if (red == PARDO_CU_RED_NONE)
            y[i] = (T)(d * d);
        else
            s += d * d;
    }
    if (red == PARDO_CU_RED_NONE) return;
    s = block_reduce(s, sh, SumOp());
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// y[0] = the sum of partials[0, parts) (or the mean over n, 0 for n = 0), by one block
template <typename T> __global__ void mse_total_kernel(const double *partials, int parts, int64_t n, int red, T *y) {
    __shared__ double sh[32];
    double s = 0;
    for (int k = threadIdx.x; k < parts; k += blockDim.x) s += partials[k];
    s = block_reduce(s, sh, SumOp());
    if (threadIdx.x == 0) y[0] = (T)(red == PARDO_CU_RED_MEAN ? (n > 0 ? s / (double)n : 0.0) : s);
}

template <typename T>
__global__ void mse_grad_kernel(const T *p, const T *t, const T *dl, int64_t n, int red, T *dp, T *dt) {
    const double k = red == PARDO_CU_RED_MEAN ? (n > 0 ? 2.0 * (double)dl[0] / (double)n : 0.0) : 2.0 * (double)dl[0];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double g = ((double)p[i] - (double)t[i]) * (red == PARDO_CU_RED_NONE ? 2.0 * (double)dl[i] : k);
        if (dp) dp[i] = (T)g;
        if (dt) dt[i] = (T)-g;
    }
}

template <typename T>
__global__ void dropout_kernel(const T *in, const uint8_t *mask_in, uint64_t key, double ratio, T scale, int training,
                               T *out, uint8_t *mask_out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (!training) {
            out[i] = in[i];
            if (mask_out) mask_out[i] = 1;
            continue;
        }
        const bool keep = mask_in ? mask_in[i] != 0 : pardo_dropout_keep(key, i, ratio);
        out[i] = keep ? in[i] * scale : T(0);
        if (mask_out) mask_out[i] = keep;
    }
}

} // namespace

extern "C" int pardo_cuda_launch_mse(int f64, const void *p, const void *t, int64_t n, int red, void *y,
                                     double *partials, char *err, size_t errlen) {
    int parts = n > 0 ? grid_for(n, kThreads) : 0; // a partial per block
    if (red != PARDO_CU_RED_NONE && parts > PARDO_CU_MSE_PARTS) parts = PARDO_CU_MSE_PARTS;
    if (n > 0) {
        if (f64)
            mse_kernel<double><<<parts, kThreads, 0, PARDO_CU_STREAM>>>((const double *)p, (const double *)t, n, red,
                                                                        (double *)y, partials);
        else
            mse_kernel<float><<<parts, kThreads, 0, PARDO_CU_STREAM>>>((const float *)p, (const float *)t, n, red,
                                                                       (float *)y, partials);
        int rc = launched("mse_loss", err, errlen);
        if (rc) return rc;
    }
    if (red == PARDO_CU_RED_NONE) return 0;
    if (f64)
        mse_total_kernel<double><<<1, kThreads, 0, PARDO_CU_STREAM>>>(partials, parts, n, red, (double *)y);
    else
        mse_total_kernel<float><<<1, kThreads, 0, PARDO_CU_STREAM>>>(partials, parts, n, red, (float *)y);
    return launched("mse_loss total", err, errlen);
}

extern "C" int pardo_cuda_launch_mse_grad(int f64, const void *p, const void *t, const void *dl, int64_t n, int red,
                                          void *dp, void *dt, char *err, size_t errlen) {
    if (n <= 0 || (!dp && !dt)) return 0;
    if (f64)
        mse_grad_kernel<double><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(
            (const double *)p, (const double *)t, (const double *)dl, n, red, (double *)dp, (double *)dt);
    else
        mse_grad_kernel<float><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(
            (const float *)p, (const float *)t, (const float *)dl, n, red, (float *)dp, (float *)dt);
    return launched("mse_loss_grad", err, errlen);
}

extern "C" int pardo_cuda_launch_dropout(int f64, const void *in, const uint8_t *mask_in, uint64_t key, double ratio,
                                         double scale, int training, void *out, uint8_t *mask_out, int64_t n, char *err,
                                         size_t errlen) {
    if (n <= 0) return 0;
    if (f64)
        dropout_kernel<double><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(
            (const double *)in, mask_in, key, ratio, scale, training, (double *)out, mask_out, n);
    else
        dropout_kernel<float><<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(
            (const float *)in, mask_in, key, ratio, (float)scale, training, (float *)out, mask_out, n);
    return launched("dropout", err, errlen);
}
