// data.cu - the device half of the data movement ops (ops/cuda/data_cuda.c): transpose's strided gather (by
// element size, so any dtype), device copies and zeros, concat's blocks as 2-D copies, cast between float32, float64,
// int32 and int64 (as ops/cast.c converts), and the constant fill. Launched through ops/cuda/launch_train.h on
// PARDO_CU_STREAM; none synchronises.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch_train.h"

using namespace pardo_cu;

namespace {

constexpr int kEnotsup = -5; // PARDO_ENOTSUP




struct Gather {
    int nd;
    int64_t dims[PARDO_CU_MAX_PERM_DIMS];
    int64_t strides[PARDO_CU_MAX_PERM_DIMS];
};

template <typename T> __global__ void gather_kernel(const T *src, T *dst, int64_t n, Gather g) {
    GRID_LOOP(i, n) {
        int64_t rem = i, off = 0;
        for (int d = g.nd - 1; d >= 0; d--) {
            off += rem % g.dims[d] * g.strides[d];
            rem /= g.dims[d];
        }
        dst[i] = src[off];
    }
}

// ops/cast.c's conversions: float to int truncates toward zero, saturating, NaN to 0
__device__ int32_t sat_i32(double v) {
    if (isnan(v)) return 0;
    if (v >= 2147483648.0) return INT32_MAX;
    if (v <= -2147483649.0) return INT32_MIN;
    return (int32_t)v;
}

__device__ int64_t sat_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

template <typename S, typename D> struct Convert {
    __device__ static D of(S v) { return (D)v; } // float to float, int to float (round to nearest), int to int64
};
template <> struct Convert<float, int32_t> {
    __device__ static int32_t of(float v) { return sat_i32((double)v); }
};
template <> struct Convert<double, int32_t> {
    __device__ static int32_t of(double v) { return sat_i32(v); }
};
template <> struct Convert<float, int64_t> {
    __device__ static int64_t of(float v) { return sat_i64((double)v); }
};
template <> struct Convert<double, int64_t> {
    __device__ static int64_t of(double v) { return sat_i64(v); }
};
template <> struct Convert<int64_t, int32_t> { // the low 32 bits (two's complement)
    __device__ static int32_t of(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }
};

template <typename S, typename D> __global__ void cast_kernel(const S *src, D *dst, int64_t n) {
    GRID_LOOP(i, n) dst[i] = Convert<S, D>::of(src[i]);
}

template <typename S, typename D> void cast_launch(const void *src, void *dst, int64_t n) {
    cast_kernel<S, D><<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>((const S *)src, (D *)dst, n);
}

template <typename S> bool cast_from(int to, const void *src, void *dst, int64_t n) {
    switch (to) {
    case PARDO_CU_F32:
        cast_launch<S, float>(src, dst, n);
        return true;
    case PARDO_CU_F64:
        cast_launch<S, double>(src, dst, n);
        return true;
    case PARDO_CU_I32:
        cast_launch<S, int32_t>(src, dst, n);
        return true;
    case PARDO_CU_I64:
        cast_launch<S, int64_t>(src, dst, n);
        return true;
    }
    return false;
}

template <typename T> __global__ void fill_kernel(T *dst, int64_t n, T v) { GRID_LOOP(i, n) dst[i] = v; }

} // namespace

extern "C" int pardo_cuda_launch_gather(size_t es, const void *src, void *dst, int nd, const int64_t *dims,
                                        const int64_t *src_strides, int64_t n, char *err, size_t errlen) {
    if (nd < 0 || nd > PARDO_CU_MAX_PERM_DIMS) {
        snprintf(err, errlen, "CUDA gather kernel: rank %d past %d", nd, PARDO_CU_MAX_PERM_DIMS);
        return kEnotsup;
    }
    if (n <= 0) return 0;
    Gather g;
    g.nd = nd;
    for (int d = 0; d < nd; d++) {
        g.dims[d] = dims[d];
        g.strides[d] = src_strides[d];
    }
    const int grid = grid_for(n);
    switch (es) {
    case 1:
        gather_kernel<uint8_t><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((const uint8_t *)src, (uint8_t *)dst, n, g);
        break;
    case 2:
        gather_kernel<uint16_t><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((const uint16_t *)src, (uint16_t *)dst, n, g);
        break;
    case 4:
        gather_kernel<uint32_t><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((const uint32_t *)src, (uint32_t *)dst, n, g);
        break;
    case 8:
        gather_kernel<uint64_t><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((const uint64_t *)src, (uint64_t *)dst, n, g);
        break;
    default:
        snprintf(err, errlen, "CUDA gather kernel: elements of %zu bytes", es);
        return kEnotsup;
    }
    return launched("gather", err, errlen);
}

extern "C" int pardo_cuda_launch_copy(void *dst, const void *src, size_t nbytes, char *err, size_t errlen) {
    if (nbytes == 0 || dst == src) return 0;
    cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, PARDO_CU_STREAM);
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "CUDA cudaMemcpyAsync failed: %s", cudaGetErrorString(e));
    return kEcuda;
}

extern "C" int pardo_cuda_launch_zero(void *dst, size_t nbytes, char *err, size_t errlen) {
    if (nbytes == 0) return 0;
    cudaError_t e = cudaMemsetAsync(dst, 0, nbytes, PARDO_CU_STREAM);
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "CUDA cudaMemsetAsync failed: %s", cudaGetErrorString(e));
    return kEcuda;
}

extern "C" int pardo_cuda_launch_copy2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                                        size_t rows, char *err, size_t errlen) {
    if (width == 0 || rows == 0) return 0;
    cudaError_t e =
        cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, PARDO_CU_STREAM);
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "CUDA cudaMemcpy2DAsync failed: %s", cudaGetErrorString(e));
    return kEcuda;
}

extern "C" int pardo_cuda_launch_cast(int from, const void *src, int to, void *dst, int64_t n, char *err,
                                      size_t errlen) {
    if (n <= 0) return 0;
    bool ok = false;
    switch (from) {
    case PARDO_CU_F32:
        ok = cast_from<float>(to, src, dst, n);
        break;
    case PARDO_CU_F64:
        ok = cast_from<double>(to, src, dst, n);
        break;
    case PARDO_CU_I32:
        ok = cast_from<int32_t>(to, src, dst, n);
        break;
    case PARDO_CU_I64:
        ok = cast_from<int64_t>(to, src, dst, n);
        break;
    }
    if (!ok) {
        snprintf(err, errlen, "CUDA cast kernel: no cast from dtype code %d to %d", from, to);
        return kEnotsup;
    }
    return launched("cast", err, errlen);
}

extern "C" int pardo_cuda_launch_fill(int dt, void *dst, int64_t n, double value, char *err, size_t errlen) {
    if (n <= 0) return 0;
    const int grid = grid_for(n);
    switch (dt) {
    case PARDO_CU_F32:
        fill_kernel<float><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((float *)dst, n, (float)value);
        break;
    case PARDO_CU_F64:
        fill_kernel<double><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((double *)dst, n, value);
        break;
    case PARDO_CU_I32:
        fill_kernel<int32_t><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((int32_t *)dst, n, (int32_t)value);
        break;
    case PARDO_CU_I64:
        fill_kernel<int64_t><<<grid, kThreads, 0, PARDO_CU_STREAM>>>((int64_t *)dst, n, (int64_t)value);
        break;
    default:
        snprintf(err, errlen, "CUDA fill kernel: dtype code %d", dt);
        return kEnotsup;
    }
    return launched("fill", err, errlen);
}
