// softmax.cu - the device half of softmax, log_softmax, their gradients, softmax_cross_entropy and its gradient
// (ops/cuda/softmax_cuda.c; the CPU kernels are ops/softmax.c, whose arithmetic these follow: softmax's exp in
// the data's type with the sum in double, log_softmax and the cross entropy in double). Float32 and float64.
// A row along the axis is a block's where it is contiguous and long, else a thread's (nn_block.cuh). Launched
// through ops/cuda/launch_nn.h on PARDO_CU_STREAM; nothing here synchronises.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda_stream.cuh"
#include "launch_nn.h"
#include "nn_block.cuh"

using namespace pardo_nn;

namespace {

// softmax: m = max(scale x), e = exp(scale x - m) in T, y = e * (T)(1 / sum e); log_softmax: y = x - m - log(sum
// exp(x - m)), in double.
template <typename T, bool kBlock>
__global__ void softmax_kernel(int log_form, const T *x, T *y, int64_t rows, int64_t n, int64_t inner, T scale) {
    __shared__ double sh[32];
    for (int64_t r = row_first<kBlock>(); r < rows; r += row_step<kBlock>()) {
        const Walk w = walk_of<kBlock>(r, n, inner);
        const T *px = x + w.base;
        T *py = y + w.base;
        if (log_form) {
            double m = -INFINITY;
            for (int64_t k = w.first; k < n; k += w.step) m = MaxOp()(m, (double)px[k * w.stride]);
            m = row_reduce<kBlock>(m, sh, MaxOp());
            double s = 0;
            for (int64_t k = w.first; k < n; k += w.step) s += exp((double)px[k * w.stride] - m);
            s = row_reduce<kBlock>(s, sh, SumOp());
            const double lse = m + log(s);
            for (int64_t k = w.first; k < n; k += w.step) py[k * w.stride] = (T)((double)px[k * w.stride] - lse);
            continue;
        }
        double m = -INFINITY;
        for (int64_t k = w.first; k < n; k += w.step) m = MaxOp()(m, (double)(px[k * w.stride] * scale));
        const T mt = (T)row_reduce<kBlock>(m, sh, MaxOp()); // a T's value: exact
        double s = 0;
        for (int64_t k = w.first; k < n; k += w.step) {
            const T e = exp(px[k * w.stride] * scale - mt);
            py[k * w.stride] = e;
            s += (double)e;
        }
        const T inv = (T)(1.0 / row_reduce<kBlock>(s, sh, SumOp()));
        for (int64_t k = w.first; k < n; k += w.step) py[k * w.stride] *= inv; // this thread's own writes
    }
}

// softmax: dx = (T)(y (dy - sum(dy y))) * scale; log_softmax: dx = dy - exp(y) sum(dy); the sums in double.
template <typename T, bool kBlock>
__global__ void softmax_grad_kernel(int log_form, const T *y, const T *dy, T *dx, int64_t rows, int64_t n,
                                    int64_t inner, T scale) {
    __shared__ double sh[32];
    for (int64_t r = row_first<kBlock>(); r < rows; r += row_step<kBlock>()) {
        const Walk w = walk_of<kBlock>(r, n, inner);
        const T *py = y + w.base, *pg = dy + w.base;
        T *pd = dx + w.base;
        double s = 0;
        for (int64_t k = w.first; k < n; k += w.step) {
            const int64_t j = k * w.stride;
            s += log_form ? (double)pg[j] : (double)pg[j] * (double)py[j];
        }
        s = row_reduce<kBlock>(s, sh, SumOp());
        for (int64_t k = w.first; k < n; k += w.step) {
            const int64_t j = k * w.stride;
            if (log_form)
                pd[j] = (T)((double)pg[j] - exp((double)py[j]) * s);
            else
                pd[j] = (T)((double)py[j] * ((double)pg[j] - s)) * scale;
        }
    }
}

__device__ int64_t label_at(const void *labels, int labels64, int64_t r) {
    return labels64 ? ((const int64_t *)labels)[r] : (int64_t)((const int32_t *)labels)[r];
}

// Notes row r's label outside [0, c): *bad keeps the largest n - r, i.e. the first such row.
__device__ void note_bad(uint64_t *bad, int64_t n, int64_t r) {
    atomicMax((unsigned long long *)bad, (unsigned long long)(n - r));
}

template <typename T, bool kBlock>
__global__ void sce_kernel(const T *x, const void *labels, int labels64, int64_t n, int64_t c, int red, T *y,
                           double *rows, uint64_t *bad) {
    __shared__ double sh[32];
    for (int64_t r = row_first<kBlock>(); r < n; r += row_step<kBlock>()) {
        const int64_t lab = label_at(labels, labels64, r);
        const Walk w = walk_of<kBlock>(r, c, 1);
        if (lab < 0 || lab >= c) { // the same for the whole block
            if (w.first == 0) note_bad(bad, n, r);
            continue;
        }
        const T *px = x + w.base;
        double m = -INFINITY;
        for (int64_t k = w.first; k < c; k += w.step) m = MaxOp()(m, (double)px[k]);
        m = row_reduce<kBlock>(m, sh, MaxOp());
        double s = 0;
        for (int64_t k = w.first; k < c; k += w.step) s += exp((double)px[k] - m);
        s = row_reduce<kBlock>(s, sh, SumOp());
        if (w.first != 0) continue;
        const double loss = log(s) + m - (double)px[lab];
        if (red == PARDO_CU_RED_NONE)
            y[r] = (T)loss;
        else
            rows[r] = loss;
    }
}

// y[0] = the sum of rows[0, n) (or its mean, 0 for n = 0) in double, by one block.
template <typename T> __global__ void sce_total_kernel(const double *rows, int64_t n, int red, T *y) {
    __shared__ double sh[32];
    double s = 0;
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) s += rows[r];
    s = block_reduce(s, sh, SumOp());
    if (threadIdx.x == 0) y[0] = (T)(red == PARDO_CU_RED_MEAN ? (n > 0 ? s / (double)n : 0.0) : s);
}

template <typename T, bool kBlock>
__global__ void sce_grad_kernel(const T *x, const void *labels, int labels64, const T *dl, int64_t n, int64_t c,
                                int red, T *dx, uint64_t *bad) {
    __shared__ double sh[32];
    for (int64_t r = row_first<kBlock>(); r < n; r += row_step<kBlock>()) {
        const int64_t lab = label_at(labels, labels64, r);
        const Walk w = walk_of<kBlock>(r, c, 1);
        if (lab < 0 || lab >= c) {
            if (w.first == 0) note_bad(bad, n, r);
            continue;
        }
        const double g =
            red == PARDO_CU_RED_NONE ? (double)dl[r] : (double)dl[0] / (red == PARDO_CU_RED_MEAN ? (double)n : 1.0);
        const T *px = x + w.base;
        T *pd = dx + w.base;
        double m = -INFINITY;
        for (int64_t k = w.first; k < c; k += w.step) m = MaxOp()(m, (double)px[k]);
        m = row_reduce<kBlock>(m, sh, MaxOp());
        double s = 0;
        for (int64_t k = w.first; k < c; k += w.step) s += exp((double)px[k] - m);
        s = row_reduce<kBlock>(s, sh, SumOp());
        for (int64_t k = w.first; k < c; k += w.step)
            pd[k] = (T)(g * (exp((double)px[k] - m) / s - (k == lab ? 1.0 : 0.0)));
    }
}

int memset_async(void *p, size_t nbytes, char *err, size_t errlen) {
    cudaError_t e = cudaMemsetAsync(p, 0, nbytes, PARDO_CU_STREAM);
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "CUDA cudaMemsetAsync failed: %s", cudaGetErrorString(e));
    return kEcuda;
}

} // namespace

extern "C" int pardo_cuda_launch_softmax(int log_form, int f64, const void *x, void *y, int64_t outer, int64_t n,
                                         int64_t inner, double scale, char *err, size_t errlen) {
    const int64_t rows = outer * inner;
    if (rows <= 0 || n <= 0) return 0;
    if (f64)
        PARDO_NN_LAUNCH_ROWS(softmax_kernel, double, rows, n, inner, log_form, (const double *)x, (double *)y, rows, n,
                             inner, scale);
    else
        PARDO_NN_LAUNCH_ROWS(softmax_kernel, float, rows, n, inner, log_form, (const float *)x, (float *)y, rows, n,
                             inner, (float)scale);
    return launched(log_form ? "log_softmax" : "softmax", err, errlen);
}

extern "C" int pardo_cuda_launch_softmax_grad(int log_form, int f64, const void *y, const void *dy, void *dx,
                                              int64_t outer, int64_t n, int64_t inner, double scale, char *err,
                                              size_t errlen) {
    const int64_t rows = outer * inner;
    if (rows <= 0 || n <= 0) return 0;
    if (f64)
        PARDO_NN_LAUNCH_ROWS(softmax_grad_kernel, double, rows, n, inner, log_form, (const double *)y,
                             (const double *)dy, (double *)dx, rows, n, inner, scale);
    else
        PARDO_NN_LAUNCH_ROWS(softmax_grad_kernel, float, rows, n, inner, log_form, (const float *)y, (const float *)dy,
                             (float *)dx, rows, n, inner, (float)scale);
    return launched(log_form ? "log_softmax_grad" : "softmax_grad", err, errlen);
}

extern "C" int pardo_cuda_launch_sce(int f64, const void *x, const void *labels, int labels64, int64_t n, int64_t c,
                                     int red, void *y, double *rows, uint64_t *bad, char *err, size_t errlen) {
    int rc = memset_async(bad, sizeof *bad, err, errlen);
    if (rc) return rc;
    if (n > 0) {
        if (f64)
            PARDO_NN_LAUNCH_ROWS(sce_kernel, double, n, c, 1, (const double *)x, labels, labels64, n, c, red,
                                 (double *)y, rows, bad);
        else
            PARDO_NN_LAUNCH_ROWS(sce_kernel, float, n, c, 1, (const float *)x, labels, labels64, n, c, red, (float *)y,
                                 rows, bad);
        if ((rc = launched("softmax_cross_entropy", err, errlen))) return rc;
    }
    if (red == PARDO_CU_RED_NONE) return 0;
    if (f64)
        sce_total_kernel<double><<<1, kThreads, 0, PARDO_CU_STREAM>>>(rows, n, red, (double *)y);
    else
        sce_total_kernel<float><<<1, kThreads, 0, PARDO_CU_STREAM>>>(rows, n, red, (float *)y);
    return launched("softmax_cross_entropy total", err, errlen);
}

extern "C" int pardo_cuda_launch_sce_grad(int f64, const void *x, const void *labels, int labels64, const void *dl,
                                          int64_t n, int64_t c, int red, void *dx, uint64_t *bad, char *err,
                                          size_t errlen) {
    int rc = memset_async(bad, sizeof *bad, err, errlen);
    if (rc || n <= 0) return rc;
    if (f64)
        PARDO_NN_LAUNCH_ROWS(sce_grad_kernel, double, n, c, 1, (const double *)x, labels, labels64, (const double *)dl,
                             n, c, red, (double *)dx, bad);
    else
        PARDO_NN_LAUNCH_ROWS(sce_grad_kernel, float, n, c, 1, (const float *)x, labels, labels64, (const float *)dl, n,
                             c, red, (float *)dx, bad);
    return launched("softmax_cross_entropy_grad", err, errlen);
}
