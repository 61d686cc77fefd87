// conv.cu - the device half of conv2d and conv2d_grad's columns (ops/cuda/conv_cuda.c): im2col of a chunk of
// images into a workspace the glue keeps, and its adjoint col2im as a gather per input element (each dX element
// the sum, in double, of the column entries that read it, taps in row-major order: no atomics, the same bits on
// every run). Float32 and float64. The products are pardo_cuda_gemm's (matmul.cu). Launched through
// ops/cuda/launch_train.h on PARDO_CU_STREAM; neither synchronises.
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch_train.h"

using namespace pardo_cu;

namespace {





template <typename T>
__global__ void im2col_kernel(const T *x, T *col, pardo_cuda_conv2d_geom g, int64_t n0, int64_t total) {
    const int64_t P = g.oh * g.ow, taps = g.kh * g.kw, rows = g.c * taps;
    GRID_LOOP(i, total) {
        const int64_t p = i % P, row = i / P % rows, img = i / (P * rows);
        const int64_t ci = row / taps, ki = row / g.kw % g.kh, kj = row % g.kw;
        const int64_t oy = p / g.ow, ox = p % g.ow;
        const int64_t iy = oy * g.stride[0] - g.pad[0] + ki * g.dilation[0];
        const int64_t ix = ox * g.stride[1] - g.pad[1] + kj * g.dilation[1];
        T v = T(0);
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) v = x[(((n0 + img) * g.c + ci) * g.h + iy) * g.w + ix];
        col[i] = v;
    }
}

template <typename T>
__global__ void col2im_kernel(const T *col, T *dx, pardo_cuda_conv2d_geom g, int64_t n0, int64_t total) {
    const int64_t P = g.oh * g.ow, rows = g.c * g.kh * g.kw;
    GRID_LOOP(i, total) {
        const int64_t ix = i % g.w, iy = i / g.w % g.h, ci = i / (g.w * g.h) % g.c, img = i / (g.w * g.h * g.c);
        const T *cimg = col + img * rows * P;
        double s = 0;
        for (int64_t ki = 0; ki < g.kh; ki++) {
            const int64_t ty = iy + g.pad[0] - ki * g.dilation[0];
            if (ty < 0 || ty % g.stride[0] != 0 || ty / g.stride[0] >= g.oh) continue;
            const int64_t oy = ty / g.stride[0];
            for (int64_t kj = 0; kj < g.kw; kj++) {
                const int64_t tx = ix + g.pad[1] - kj * g.dilation[1];
                if (tx < 0 || tx % g.stride[1] != 0 || tx / g.stride[1] >= g.ow) continue;
                const int64_t row = (ci * g.kh + ki) * g.kw + kj;
                s += (double)cimg[row * P + oy * g.ow + tx / g.stride[1]];
            }
        }
        dx[(n0 + img) * g.c * g.h * g.w + (ci * g.h + iy) * g.w + ix] = (T)s;
    }
}

} // namespace

extern "C" int pardo_cuda_launch_im2col(int f64, const void *x, void *col, const pardo_cuda_conv2d_geom *g, int64_t n0,
                                        int64_t nb, char *err, size_t errlen) {
    const int64_t total = nb * g->c * g->kh * g->kw * g->oh * g->ow;
    if (total <= 0) return 0;
    if (f64)
        im2col_kernel<double>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>((const double *)x, (double *)col, *g, n0, total);
    else
        im2col_kernel<float>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>((const float *)x, (float *)col, *g, n0, total);
    return launched("im2col", err, errlen);
}

extern "C" int pardo_cuda_launch_col2im(int f64, const void *col, void *dx, const pardo_cuda_conv2d_geom *g, int64_t n0,
                                        int64_t nb, char *err, size_t errlen) {
    const int64_t total = nb * g->c * g->h * g->w;
    if (total <= 0) return 0;
    if (f64)
        col2im_kernel<double>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>((const double *)col, (double *)dx, *g, n0, total);
    else
        col2im_kernel<float>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>((const float *)col, (float *)dx, *g, n0, total);
    return launched("col2im", err, errlen);
}
