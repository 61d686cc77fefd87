// pool.cu - the device half of max_pool2d, avg_pool2d and their gradients (ops/cuda/pool_cuda.c): one thread per
// output element forward, one per input element backward (a gather over the windows holding it, in the CPU
// kernel's order, so no atomics and the CPU kernel's bits). Float32 and float64. Launched through
// ops/cuda/launch_train.h on PARDO_CU_STREAM; neither synchronises.
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch_train.h"

using namespace pardo_cu;

namespace {





// output o's window along an axis clipped to [0, n) (window2d.h's pardo_window2d_clip)
__device__ void clip(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t n, int64_t *lo, int64_t *hi) {
    const int64_t s = o * stride - pad, e = s + k;
    *lo = s < 0 ? 0 : s;
    *hi = e > n ? n : e;
}

// the first maximum of output (oy, ox)'s window in plane xp, as an offset into the plane
template <typename T> __device__ int64_t argmax(const T *xp, const pardo_cuda_pool2d_geom &g, int64_t oy, int64_t ox) {
    int64_t h0, h1, w0, w1;
    clip(oy, g.stride[0], g.pad[0], g.kh, g.h, &h0, &h1);
    clip(ox, g.stride[1], g.pad[1], g.kw, g.w, &w0, &w1);
    int64_t best = h0 * g.w + w0;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++)
            if (xp[ih * g.w + iw] > xp[best]) best = ih * g.w + iw;
    return best;
}

template <typename T> __global__ void pool_kernel(int max, const T *x, T *y, pardo_cuda_pool2d_geom g, int64_t total) {
    GRID_LOOP(i, total) {
        const int64_t ox = i % g.ow, oy = i / g.ow % g.oh, pl = i / (g.ow * g.oh);
        const T *xp = x + pl * g.h * g.w;
        if (max) {
            y[i] = xp[argmax(xp, g, oy, ox)];
            continue;
        }
        int64_t h0, h1, w0, w1;
        clip(oy, g.stride[0], g.pad[0], g.kh, g.h, &h0, &h1);
        clip(ox, g.stride[1], g.pad[1], g.kw, g.w, &w0, &w1);
        double s = 0;
        for (int64_t ih = h0; ih < h1; ih++)
            for (int64_t iw = w0; iw < w1; iw++) s += (double)xp[ih * g.w + iw];
        y[i] = (T)(s / (double)((h1 - h0) * (w1 - w0)));
    }
}

// the outputs along an axis whose window (before clipping) holds input index ix: [*lo, *hi)
__device__ void holders(int64_t ix, int64_t stride, int64_t pad, int64_t k, int64_t n_out, int64_t *lo, int64_t *hi) {
    // o * stride - pad <= ix < o * stride - pad + k
    const int64_t t = ix + pad; // o * stride <= t and o * stride > t - k
    int64_t a = t - k + 1;      // o >= ceil(a / stride)
    a = a <= 0 ? 0 : (a + stride - 1) / stride;
    int64_t b = t / stride + 1; // o <= floor(t / stride)
    *lo = a;
    *hi = b < n_out ? b : n_out;
}

template <typename T>
__global__ void pool_grad_kernel(int max, const T *x, const T *dy, T *dx, pardo_cuda_pool2d_geom g, int64_t total) {
    GRID_LOOP(i, total) {
        const int64_t iw = i % g.w, ih = i / g.w % g.h, pl = i / (g.w * g.h);
        const T *xp = x ? x + pl * g.h * g.w : nullptr, *dyp = dy + pl * g.oh * g.ow;
        int64_t y0, y1, x0, x1;
        holders(ih, g.stride[0], g.pad[0], g.kh, g.oh, &y0, &y1);
        holders(iw, g.stride[1], g.pad[1], g.kw, g.ow, &x0, &x1);
        const int64_t me = ih * g.w + iw;
        T acc = T(0);
        for (int64_t oy = y0; oy < y1; oy++)
            for (int64_t ox = x0; ox < x1; ox++) {
                const T d = dyp[oy * g.ow + ox];
                if (max) {
                    if (argmax(xp, g, oy, ox) == me) acc += d;
                } else {
                    int64_t h0, h1, w0, w1;
                    clip(oy, g.stride[0], g.pad[0], g.kh, g.h, &h0, &h1);
                    clip(ox, g.stride[1], g.pad[1], g.kw, g.w, &w0, &w1);
                    acc += (T)((double)d / (double)((h1 - h0) * (w1 - w0)));
                }
            }
        dx[i] = acc;
    }
}

} // namespace

extern "C" int pardo_cuda_launch_pool2d(int max, int f64, const void *x, void *y, const pardo_cuda_pool2d_geom *g,
                                        char *err, size_t errlen) {
    const int64_t total = g->planes * g->oh * g->ow;
    if (total <= 0) return 0;
    if (f64)
        pool_kernel<double>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>(max, (const double *)x, (double *)y, *g, total);
    else
        pool_kernel<float>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>(max, (const float *)x, (float *)y, *g, total);
    return launched(max ? "max pool" : "average pool", err, errlen);
}

extern "C" int pardo_cuda_launch_pool2d_grad(int max, int f64, const void *x, const void *dy, void *dx,
                                             const pardo_cuda_pool2d_geom *g, char *err, size_t errlen) {
    const int64_t total = g->planes * g->h * g->w;
    if (total <= 0) return 0;
    if (f64)
        pool_grad_kernel<double><<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>(
            max, (const double *)x, (const double *)dy, (double *)dx, *g, total);
    else
        pool_grad_kernel<float><<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>(
            max, (const float *)x, (const float *)dy, (float *)dx, *g, total);
    return launched(max ? "max pool gradient" : "average pool gradient", err, errlen);
}
