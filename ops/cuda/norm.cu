// norm.cu - the device half of layer_norm and layer_norm_grad (ops/cuda/norm_cuda.c; the CPU kernels are
// ops/norm.c's, whose arithmetic these follow: the row statistics and every sum in double). A row is a block's
// where it is long (its threads stride along it and reduce in shared memory), else a thread's; dscale and dbias
// are a thread per column summing the rows in order. Float32 and float64. Launched through
// ops/cuda/launch_nn.h on PARDO_CU_STREAM; nothing here synchronises.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_stream.cuh"
#include "launch_nn.h"
#include "nn_block.cuh"

using namespace pardo_nn;

namespace {

// The mean and inverse standard deviation (biased variance) of the row of n elements at px, in double.
template <typename T, bool kBlock>
__device__ void row_stats(const T *px, const Walk &w, int64_t n, double eps, double *sh, double *mean, double *inv) {
    double s = 0;
    for (int64_t k = w.first; k < n; k += w.step) s += (double)px[k];
    s = row_reduce<kBlock>(s, sh, SumOp());
    const double m = n > 0 ? s / (double)n : 0.0;
    double v = 0;
    for (int64_t k = w.first; k < n; k += w.step) v += ((double)px[k] - m) * ((double)px[k] - m);
    v = row_reduce<kBlock>(v, sh, SumOp());
    *mean = m;
    *inv = 1.0 / sqrt((n > 0 ? v / (double)n : 0.0) + eps);
}

template <typename T, bool kBlock>
__global__ void ln_fwd_kernel(const T *x, const T *scale, const T *bias, T *y, T *mean_out, T *inv_out, int64_t rows,
                              int64_t n, double eps) {
    __shared__ double sh[32];
    for (int64_t r = row_first<kBlock>(); r < rows; r += row_step<kBlock>()) {
        const Walk w = walk_of<kBlock>(r, n, 1);
        const T *px = x + w.base;
        T *py = y + w.base;
        double mean, inv;
        row_stats<T, kBlock>(px, w, n, eps, sh, &mean, &inv);
        for (int64_t k = w.first; k < n; k += w.step) {
            double v = ((double)px[k] - mean) * inv;
            if (scale) v *= (double)scale[k];
            if (bias) v += (double)bias[k];
            py[k] = (T)v;
        }
        if (w.first == 0 && mean_out) mean_out[r] = (T)mean;
        if (w.first == 0 && inv_out) inv_out[r] = (T)inv;
    }
}

template <typename T, bool kBlock>
__global__ void ln_bwd_rows_kernel(const T *x, const T *scale, const T *dy, const T *dmean, const T *dinv, T *dx,
                                   double *stats, int64_t rows, int64_t n, double eps) {
    __shared__ double sh[32];
    const double nn = (double)n;
    for (int64_t r = row_first<kBlock>(); r < rows; r += row_step<kBlock>()) {
        const Walk w = walk_of<kBlock>(r, n, 1);
        const T *px = x + w.base, *pg = dy ? dy + w.base : nullptr;
        double mean, inv;
        row_stats<T, kBlock>(px, w, n, eps, sh, &mean, &inv);
        if (stats && w.first == 0) {
            stats[2 * r] = mean;
            stats[2 * r + 1] = inv;
        }
        if (!dx) continue;
        // dL/dxhat_j = dy_j scale_j; its mean and its mean against xhat
        double mg = 0, mgx = 0;
        if (pg) {
            for (int64_t k = w.first; k < n; k += w.step) {
                const double g = scale ? (double)pg[k] * (double)scale[k] : (double)pg[k];
                mg += g;
                mgx += g * (((double)px[k] - mean) * inv);
            }
            mg = row_reduce<kBlock>(mg, sh, SumOp()) / nn;
            mgx = row_reduce<kBlock>(mgx, sh, SumOp()) / nn;
        }
        const double dmr = dmean ? (double)dmean[r] / nn : 0.0,
                     dir = dinv ? -(double)dinv[r] * inv * inv * inv / nn : 0.0;
        T *pd = dx + w.base;
        for (int64_t k = w.first; k < n; k += w.step) {
            const double xc = (double)px[k] - mean, xh = xc * inv;
            const double g = pg ? (scale ? (double)pg[k] * (double)scale[k] : (double)pg[k]) : 0.0;
            pd[k] = (T)(inv * (g - mg - xh * mgx) + dmr + dir * xc);
        }
    }
}

// dscale[c] = sum_r dy[r, c] xhat[r, c], dbias[c] = sum_r dy[r, c], the rows in order, a thread per column
template <typename T>
__global__ void ln_bwd_cols_kernel(const T *x, const T *dy, const double *stats, T *dscale, T *dbias, int64_t rows,
                                   int64_t n) {
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < n; c += (int64_t)gridDim.x * blockDim.x) {
        double as = 0, ab = 0;
        for (int64_t r = 0; r < rows; r++) {
            const double g = (double)dy[r * n + c];
            as += g * (((double)x[r * n + c] - stats[2 * r]) * stats[2 * r + 1]);
            ab += g;
        }
        if (dscale) dscale[c] = (T)as;
        if (dbias) dbias[c] = (T)ab;
    }
}

template <typename T>
int ln_grad_launch(const T *x, const T *scale, const T *dy, const T *dmean, const T *dinv, T *dx, double *stats,
                   T *dscale, T *dbias, int64_t rows, int64_t n, double eps, char *err, size_t errlen) {
    if (dx || stats) {
        PARDO_NN_LAUNCH_ROWS(ln_bwd_rows_kernel, T, rows, n, 1, x, scale, dy, dmean, dinv, dx, stats, rows, n, eps);
        int rc = launched("layer_norm_grad", err, errlen);
        if (rc) return rc;
    }
    if (!stats || n <= 0 || (!dscale && !dbias)) return 0;
    ln_bwd_cols_kernel<T>
        <<<grid_for(n, kThreads), kThreads, 0, PARDO_CU_STREAM>>>(x, dy, stats, dscale, dbias, rows, n);
    return launched("layer_norm_grad columns", err, errlen);
}

} // namespace

extern "C" int pardo_cuda_launch_layer_norm(int f64, const void *x, const void *scale, const void *bias, void *y,
                                            void *mean, void *inv, int64_t rows, int64_t n, double eps, char *err,
                                            size_t errlen) {
    if (rows <= 0) return 0;
    if (f64)
        PARDO_NN_LAUNCH_ROWS(ln_fwd_kernel, double, rows, n, 1, (const double *)x, (const double *)scale,
                             (const double *)bias, (double *)y, (double *)mean, (double *)inv, rows, n, eps);
    else
        PARDO_NN_LAUNCH_ROWS(ln_fwd_kernel, float, rows, n, 1, (const float *)x, (const float *)scale,
                             (const float *)bias, (float *)y, (float *)mean, (float *)inv, rows, n, eps);
    return launched("layer_norm", err, errlen);
}

extern "C" int pardo_cuda_launch_layer_norm_grad(int f64, const void *x, const void *scale, const void *dy,
                                                 const void *dmean, const void *dinv, void *dx, double *stats,
                                                 void *dscale, void *dbias, int64_t rows, int64_t n, double eps,
                                                 char *err, size_t errlen) {
    if (rows <= 0) return 0;
    if (f64)
        return ln_grad_launch<double>((const double *)x, (const double *)scale, (const double *)dy,
                                      (const double *)dmean, (const double *)dinv, (double *)dx, stats,
                                      (double *)dscale, (double *)dbias, rows, n, eps, err, errlen);
    return ln_grad_launch<float>((const float *)x, (const float *)scale, (const float *)dy, (const float *)dmean,
                                 (const float *)dinv, (float *)dx, stats, (float *)dscale, (float *)dbias, rows, n, eps,
                                 err, errlen);
}
