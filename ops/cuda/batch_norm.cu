// batch_norm.cu - the device half of batch_norm and batch_norm_grad (ops/cuda/batch_norm_cuda.c): one block per
// channel, its sums in double reduced over the block's threads in a fixed tree (the same bits on every run), then
// the elementwise pass. Float32 and float64. Launched through ops/cuda/launch_train.h on PARDO_CU_STREAM; neither
// synchronises.
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch_train.h"

using namespace pardo_cu;

namespace {



// The sum of every thread's v over the block (kThreads of them), returned to every thread; sh has kThreads slots.
__device__ double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    const double s = sh[0];
    __syncthreads();
    return s;
}

// element e (of n s) of channel ch: row e / s, position e % s
__device__ int64_t at(int64_t e, int64_t ch, int64_t c, int64_t s) { return (e / s * c + ch) * s + e % s; }

// the batch's mean and biased variance of channel ch of x
template <typename T>
__device__ void batch_stats(const T *x, int64_t ch, int64_t n, int64_t c, int64_t s, double *sh, double *mean,
                            double *var) {
    const int64_t m = n * s;
    double a = 0;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) a += (double)x[at(e, ch, c, s)];
    const double mu = m > 0 ? block_sum(a, sh) / (double)m : 0;
    double b = 0;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
        const double d = (double)x[at(e, ch, c, s)] - mu;
        b += d * d;
    }
    const double v = block_sum(b, sh);
    *mean = mu;
    *var = m > 0 ? v / (double)m : 0;
}

template <typename T>
__global__ void bn_kernel(int training, const T *x, const T *scale, const T *bias, const T *mean, const T *var,
                          int64_t n, int64_t c, int64_t s, double eps, double momentum, T *y, T *mean_out, T *var_out) {
    __shared__ double sh[kThreads];
    const int64_t ch = blockIdx.x, m = n * s;
    double mu = (double)mean[ch], v = (double)var[ch], rm = mu, rv = v;
    if (training) { // every thread has read mean[ch] and var[ch] (in place: mean_out's) before block_sum's barriers
        batch_stats(x, ch, n, c, s, sh, &mu, &v);
        const double dm = (double)m;
        rm = rm * momentum + mu * (1 - momentum);
        rv = rv * momentum + (dm > 1 ? v * dm / (dm - 1) : v) * (1 - momentum);
    }
    if (threadIdx.x == 0) { // eval mode: the running statistics as they are
        if (mean_out) mean_out[ch] = (T)rm;
        if (var_out) var_out[ch] = (T)rv;
    }
    const double inv = 1 / sqrt(v + eps), a = (double)scale[ch] * inv, b = (double)bias[ch] - mu * a;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
        const int64_t i = at(e, ch, c, s);
        y[i] = (T)((double)x[i] * a + b);
    }
}

template <typename T>
__global__ void bn_grad_kernel(int training, const T *x, const T *scale, const T *mean, const T *var, const T *dy,
                               int64_t n, int64_t c, int64_t s, double eps, T *dx, T *dscale, T *dbias) {
    __shared__ double sh[kThreads];
    const int64_t ch = blockIdx.x, m = n * s;
    double mu = (double)mean[ch], v = (double)var[ch];
    if (training) batch_stats(x, ch, n, c, s, sh, &mu, &v);
    const double inv = 1 / sqrt(v + eps);
    double a = 0, b = 0;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
        const int64_t i = at(e, ch, c, s);
        const double d = (double)dy[i];
        a += d;
        b += d * (((double)x[i] - mu) * inv);
    }
    const double sdy = block_sum(a, sh), sdyx = block_sum(b, sh);
    if (threadIdx.x == 0) {
        if (dscale) dscale[ch] = (T)sdyx;
        if (dbias) dbias[ch] = (T)sdy;
    }
    if (!dx) return;
    const double k = (double)scale[ch] * inv, mdy = training && m > 0 ? sdy / (double)m : 0,
                 mdyx = training && m > 0 ? sdyx / (double)m : 0;
    for (int64_t e = threadIdx.x; e < m; e += kThreads) {
        const int64_t i = at(e, ch, c, s);
        const double xh = ((double)x[i] - mu) * inv;
        dx[i] = (T)(k * ((double)dy[i] - mdy - xh * mdyx));
    }
}

} // namespace

extern "C" int pardo_cuda_launch_batch_norm(int f64, int training, const void *x, const void *scale, const void *bias,
                                            const void *mean, const void *var, int64_t n, int64_t c, int64_t s,
                                            double eps, double momentum, void *y, void *mean_out, void *var_out,
                                            char *err, size_t errlen) {
    if (c <= 0) return 0;
    if (c > 2147483647) {
        snprintf(err, errlen, "CUDA batch_norm kernel: %lld channels, past a grid", (long long)c);
        return -5; // PARDO_ENOTSUP
    }
    if (f64)
        bn_kernel<double><<<(unsigned)c, kThreads, 0, PARDO_CU_STREAM>>>(
            training, (const double *)x, (const double *)scale, (const double *)bias, (const double *)mean,
            (const double *)var, n, c, s, eps, momentum, (double *)y, (double *)mean_out, (double *)var_out);
    else
        bn_kernel<float><<<(unsigned)c, kThreads, 0, PARDO_CU_STREAM>>>(
            training, (const float *)x, (const float *)scale, (const float *)bias, (const float *)mean,
            (const float *)var, n, c, s, eps, momentum, (float *)y, (float *)mean_out, (float *)var_out);
    return launched("batch_norm", err, errlen);
}

extern "C" int pardo_cuda_launch_batch_norm_grad(int f64, int training, const void *x, const void *scale,
                                                 const void *mean, const void *var, const void *dy, int64_t n,
                                                 int64_t c, int64_t s, double eps, void *dx, void *dscale, void *dbias,
                                                 char *err, size_t errlen) {
    if (c <= 0) return 0;
    if (c > 2147483647) {
        snprintf(err, errlen, "CUDA batch_norm_grad kernel: %lld channels, past a grid", (long long)c);
        return -5; // PARDO_ENOTSUP
    }
    if (f64)
        bn_grad_kernel<double><<<(unsigned)c, kThreads, 0, PARDO_CU_STREAM>>>(
            training, (const double *)x, (const double *)scale, (const double *)mean, (const double *)var,
            (const double *)dy, n, c, s, eps, (double *)dx, (double *)dscale, (double *)dbias);
    else
        bn_grad_kernel<float><<<(unsigned)c, kThreads, 0, PARDO_CU_STREAM>>>(
            training, (const float *)x, (const float *)scale, (const float *)mean, (const float *)var,
            (const float *)dy, n, c, s, eps, (float *)dx, (float *)dscale, (float *)dbias);
    return launched("batch_norm_grad", err, errlen);
}
