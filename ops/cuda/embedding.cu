// embedding.cu - the device half of embedding and embedding_grad (ops/cuda/embedding_cuda.c): the rows gathered,
// and their gradient scattered back with atomicAdd (float32 and float64; repeated indices add in no fixed order).
// Launched through ops/cuda/launch_train.h on PARDO_CU_STREAM; neither synchronises.
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch_train.h"

using namespace pardo_cu;

namespace {





template <typename T, typename I>
__global__ void gather_rows(const T *w, const I *idx, int64_t total, int64_t d, T *y) {
    GRID_LOOP(e, total) y[e] = w[(int64_t)idx[e / d] * d + e % d];
}

template <typename T, typename I>
__global__ void scatter_rows(const T *dy, const I *idx, int64_t total, int64_t d, T *dw) {
    GRID_LOOP(e, total) atomicAdd(&dw[(int64_t)idx[e / d] * d + e % d], dy[e]);
}

template <typename T> void gather(const void *w, int idx64, const void *idx, int64_t total, int64_t d, void *y) {
    if (idx64)
        gather_rows<T, long long>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>((const T *)w, (const long long *)idx, total, d, (T *)y);
    else
        gather_rows<T, int>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>((const T *)w, (const int *)idx, total, d, (T *)y);
}

template <typename T> void scatter(const void *dy, int idx64, const void *idx, int64_t total, int64_t d, void *dw) {
    if (idx64)
        scatter_rows<T, long long><<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>(
            (const T *)dy, (const long long *)idx, total, d, (T *)dw);
    else
        scatter_rows<T, int>
            <<<grid_for(total), kThreads, 0, PARDO_CU_STREAM>>>((const T *)dy, (const int *)idx, total, d, (T *)dw);
}

} // namespace

extern "C" int pardo_cuda_launch_embedding(int f64, const void *w, int idx64, const void *idx, int64_t n, int64_t d,
                                           void *y, char *err, size_t errlen) {
    const int64_t total = n * d;
    if (total <= 0) return 0;
    if (f64)
        gather<double>(w, idx64, idx, total, d, y);
    else
        gather<float>(w, idx64, idx, total, d, y);
    return launched("embedding", err, errlen);
}

extern "C" int pardo_cuda_launch_embedding_grad(int f64, const void *dy, int idx64, const void *idx, int64_t n,
                                                int64_t d, void *dw, char *err, size_t errlen) {
    const int64_t total = n * d;
    if (total <= 0) return 0;
    if (f64)
        scatter<double>(dy, idx64, idx, total, d, dw);
    else
        scatter<float>(dy, idx64, idx, total, d, dw);
    return launched("embedding gradient", err, errlen);
}
