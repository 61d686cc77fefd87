// matmul.cu - the device half of matmul and matmul_grad (ops/cuda/matmul_cuda.c): row-major products through
// cuBLAS (opened with dlopen on the first product, so pardo links no cuBLAS and a CPU run never loads it) on one
// handle per thread, and the elementwise kernels around them: the forward's epilogue (bias, then
// relu or the exact gelu), relu_grad's mask on dA and the bias gradient's sum. Float32 and float64. Launched
// through ops/cuda/launch.h, on the compute stream PARDO_CU_STREAM (as ops/cuda/elementwise.cu and device.h's copies).
#include <climits>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_stream.cuh"
#include "launch_util.cuh"
#include "launch.h"

using namespace pardo_cu;

namespace {

constexpr int kEnotsup = -5; // PARDO_ENOTSUP



// ---- cuBLAS: opened on the first product (a CPU run never loads it: its start-up opens the CUDA driver) ----

#define PARDO_STR2(x) #x
#define PARDO_STR(x) PARDO_STR2(x)
#ifndef PARDO_CUDA_LIBDIR
#define PARDO_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif
// the soname of the cuBLAS these headers are, by the runtime's search path (the binary's rpath), then in the
// toolkit's folder the Makefile names
const char *const kCublasNames[] = {"libcublas.so." PARDO_STR(CUBLAS_VER_MAJOR),
                                    PARDO_CUDA_LIBDIR "/libcublas.so." PARDO_STR(CUBLAS_VER_MAJOR)};

struct Cublas {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSgemmStridedBatched) sgemm;
    decltype(&cublasDgemmStridedBatched) dgemm;
    decltype(&cublasGetStatusString) status_string;
};

Cublas blas;
bool blas_ok;
char blas_why[200];
pthread_once_t blas_once = PTHREAD_ONCE_INIT;

template <typename F> bool load(void *lib, const char *name, F *fn) {
    *fn = reinterpret_cast<F>(dlsym(lib, name));
    if (!*fn) snprintf(blas_why, sizeof blas_why, "cuBLAS (%s) has no %s", kCublasNames[0], name);
    return *fn != nullptr;
}

void blas_open() {
    void *lib = nullptr;
    for (const char *name : kCublasNames)
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
        const char *e = dlerror();
        snprintf(blas_why, sizeof blas_why, "cannot open cuBLAS (%s): %s", kCublasNames[0], e ? e : "not found");
        return;
    }
    blas_ok = load(lib, "cublasCreate_v2", &blas.create) && load(lib, "cublasDestroy_v2", &blas.destroy) &&
              load(lib, "cublasSetStream_v2", &blas.set_stream) &&
              load(lib, "cublasSgemmStridedBatched", &blas.sgemm) &&
              load(lib, "cublasDgemmStridedBatched", &blas.dgemm) &&
              load(lib, "cublasGetStatusString", &blas.status_string);
    // the library stays open for the process (handles and their threads may outlive any one caller)
}

// ---- the cuBLAS handle: one per thread, made on its first product, for the device current then ----

struct Handle {
    cublasHandle_t h;
    int device;
    cudaStream_t stream; // the stream it is set to: PARDO_CU_STREAM when it was made or last used
};

pthread_key_t handle_key;
pthread_once_t handle_once = PTHREAD_ONCE_INIT;
bool handle_key_ok;

void handle_free(void *p) {
    Handle *hd = static_cast<Handle *>(p);
    if (!hd) return;
    blas.destroy(hd->h);
    free(hd);
}

void handle_key_make() { handle_key_ok = pthread_key_create(&handle_key, handle_free) == 0; }

int blas_fail(cublasStatus_t s, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "cuBLAS %s failed: %s", what, blas.status_string(s));
    return kEcuda;
}

// The calling thread's handle for the current device (a thread whose device changed gets a new one), set to the
// device's compute stream PARDO_CU_STREAM (cuda_stream.cuh; set again should that have changed, as when it could
// not be made at first); cuBLAS is opened first. The handle is destroyed when its thread ends.
int handle_get(cublasHandle_t *out, char *err, size_t errlen) {
    pthread_once(&blas_once, blas_open);
    if (!blas_ok) {
        snprintf(err, errlen, "%s", blas_why);
        return kEcuda;
    }
    pthread_once(&handle_once, handle_key_make);
    if (!handle_key_ok) {
        snprintf(err, errlen, "cuBLAS: no thread-local key for its handle");
        return kEcuda;
    }
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "CUDA cudaGetDevice failed: %s", cudaGetErrorString(e));
        return kEcuda;
    }
    Handle *hd = static_cast<Handle *>(pthread_getspecific(handle_key));
    const cudaStream_t stream = PARDO_CU_STREAM;
    if (hd && hd->device == device) {
        if (hd->stream != stream) {
            cublasStatus_t s = blas.set_stream(hd->h, stream);
            if (s != CUBLAS_STATUS_SUCCESS) return blas_fail(s, "cublasSetStream", err, errlen);
            hd->stream = stream;
        }
        *out = hd->h;
        return 0;
    }
    if (hd) { // made for another device
        pthread_setspecific(handle_key, NULL);
        handle_free(hd);
    }
    hd = static_cast<Handle *>(calloc(1, sizeof(*hd)));
    if (!hd) {
        snprintf(err, errlen, "out of memory for a cuBLAS handle");
        return -2; // PARDO_ENOMEM
    }
    cublasStatus_t s = blas.create(&hd->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(hd);
        return blas_fail(s, "cublasCreate", err, errlen);
    }
    if ((s = blas.set_stream(hd->h, stream)) != CUBLAS_STATUS_SUCCESS) {
        handle_free(hd);
        return blas_fail(s, "cublasSetStream", err, errlen);
    }
    hd->device = device;
    hd->stream = stream;
    if (pthread_setspecific(handle_key, hd) != 0) {
        handle_free(hd);
        snprintf(err, errlen, "cuBLAS: cannot keep the thread's handle");
        return kEcuda;
    }
    *out = hd->h;
    return 0;
}

// ---- the elementwise kernels ----

struct Strided {
    int ndim;
    int64_t shape[PARDO_CU_MAX_DIMS];
    int64_t stride[PARDO_CU_MAX_DIMS]; // the bias's element stride per dim of y, 0 where broadcast
};

// relu as the CPU epilogue computes it (v < 0 ? 0 : v: NaN stays NaN), gelu as 0.5 x erfc(-x / sqrt 2)
template <typename T> __device__ T apply_act(int act, T v) {
    if (act == PARDO_CU_ACT_RELU) return v < T(0) ? T(0) : v;
    if (act == PARDO_CU_ACT_GELU) return T(0.5) * v * erfc(-v * T(0.70710678118654752440));
    return v;
}

template <typename T> __global__ void bias_act_kernel(T *y, const T *bias, int64_t n, Strided bs, int act) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T v = y[i];
        if (bias) {
            int64_t rem = i, ib = 0;
            for (int d = bs.ndim - 1; d >= 0; d--) {
                ib += rem % bs.shape[d] * bs.stride[d];
                rem /= bs.shape[d];
            }
            v += bias[ib];
        }
        y[i] = apply_act(act, v);
    }
}

template <typename T> __global__ void relu_mask_kernel(T *d, const T *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = y[i] > T(0) ? d[i] : T(0);
}

// The sum's walk: the kept dims (dst's, row-major) and the summed ones, each with its size and src stride.
struct SumPlan {
    int n_kept, n_summed;
    int64_t kept_size[PARDO_CU_MAX_DIMS], kept_stride[PARDO_CU_MAX_DIMS];
    int64_t summed_size[PARDO_CU_MAX_DIMS], summed_stride[PARDO_CU_MAX_DIMS];
    int64_t summed_count; // product of summed_size
};

template <typename T> __global__ void sum_to_kernel(const T *src, T *dst, int64_t n_dst, SumPlan p) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n_dst;
         j += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = j, base = 0;
        for (int d = p.n_kept - 1; d >= 0; d--) {
            base += rem % p.kept_size[d] * p.kept_stride[d];
            rem /= p.kept_size[d];
        }
        double s = 0;
        for (int64_t r = 0; r < p.summed_count; r++) {
            int64_t rr = r, off = base;
            for (int d = p.n_summed - 1; d >= 0; d--) {
                off += rr % p.summed_size[d] * p.summed_stride[d];
                rr /= p.summed_size[d];
            }
            s += (double)src[off];
        }
        dst[j] = (T)s;
    }
}

} // namespace

extern "C" int pardo_cuda_gemm(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
                               int64_t stride_a, const void *b, int64_t stride_b, void *c, int64_t stride_c,
                               int64_t batch, double beta, char *err, size_t errlen) {
    if (m <= 0 || n <= 0 || batch <= 0) return 0;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX) {
        snprintf(err, errlen, "cuBLAS: a product of %lld x %lld x %lld (%lld of them) is past its int sizes",
                 (long long)m, (long long)n, (long long)k, (long long)batch);
        return kEnotsup;
    }
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    if (k <= 0) { // an empty sum: C = beta C, so beta 0 zeroes C and beta 1 leaves it
        if (beta != 0.0) return 0;
        for (int64_t i = 0; i < batch; i++) {
            cudaError_t e =
                cudaMemsetAsync((char *)c + (size_t)(i * stride_c) * es, 0, (size_t)(m * n) * es, PARDO_CU_STREAM);
            if (e != cudaSuccess) {
                snprintf(err, errlen, "CUDA cudaMemsetAsync failed: %s", cudaGetErrorString(e));
                return kEcuda;
            }
        }
        return 0;
    }
    cublasHandle_t h;
    int rc = handle_get(&h, err, errlen);
    if (rc) return rc;
    // row-major C = op(A) op(B) as the column-major C^T = op(B)^T op(A)^T (launch.h's pardo_cuda_colmajor)
    const pardo_cuda_colmajor g = pardo_cuda_colmajor_of(ta, tb, m, n, k);
    const cublasOperation_t op_b = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                            op_a = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int M = (int)g.rows, N = (int)g.cols, K = (int)g.inner, ldb = (int)g.ld_first, lda = (int)g.ld_second,
              ldc = (int)g.ld_out, count = (int)batch;
    cublasStatus_t s;
    if (f64) {
        const double alpha = 1.0, bt = beta;
        s = blas.dgemm(h, op_b, op_a, M, N, K, &alpha, (const double *)b, ldb, stride_b, (const double *)a, lda,
                       stride_a, &bt, (double *)c, ldc, stride_c, count);
    } else {
        const float alpha = 1.0f, bt = (float)beta;
        s = blas.sgemm(h, op_b, op_a, M, N, K, &alpha, (const float *)b, ldb, stride_b, (const float *)a, lda,
                       stride_a, &bt, (float *)c, ldc, stride_c, count);
    }
    return s == CUBLAS_STATUS_SUCCESS ? 0 : blas_fail(s, f64 ? "DgemmStridedBatched" : "SgemmStridedBatched", err,
                                                      errlen);
}

extern "C" int pardo_cuda_launch_bias_act(int f64, void *y, const void *bias, int ndim, const int64_t *shape,
                                          const int64_t *bias_strides, int act, char *err, size_t errlen) {
    if (ndim < 0 || ndim > PARDO_CU_MAX_DIMS) {
        snprintf(err, errlen, "CUDA bias kernel: rank %d past %d", ndim, PARDO_CU_MAX_DIMS);
        return kEnotsup;
    }
    Strided bs;
    int64_t n = 1;
    bs.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        bs.shape[d] = shape[d];
        bs.stride[d] = bias ? bias_strides[d] : 0;
        n *= shape[d];
    }
    if (n == 0 || (!bias && act == PARDO_CU_ACT_NONE)) return 0;
    if (f64)
        bias_act_kernel<double>
            <<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>((double *)y, (const double *)bias, n, bs, act);
    else
        bias_act_kernel<float>
            <<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>((float *)y, (const float *)bias, n, bs, act);
    return launched("bias and activation", err, errlen);
}

extern "C" int pardo_cuda_launch_relu_mask(int f64, void *d, const void *y, int64_t n, char *err, size_t errlen) {
    if (n <= 0) return 0;
    if (f64)
        relu_mask_kernel<double><<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>((double *)d, (const double *)y, n);
    else
        relu_mask_kernel<float><<<grid_for(n), kThreads, 0, PARDO_CU_STREAM>>>((float *)d, (const float *)y, n);
    return launched("relu mask", err, errlen);
}

extern "C" int pardo_cuda_launch_sum_to(int f64, const void *src, int ndim, const int64_t *shape, const int *keep,
                                        void *dst, char *err, size_t errlen) {
    if (ndim < 0 || ndim > PARDO_CU_MAX_DIMS) {
        snprintf(err, errlen, "CUDA sum kernel: rank %d past %d", ndim, PARDO_CU_MAX_DIMS);
        return kEnotsup;
    }
    SumPlan p;
    p.n_kept = p.n_summed = 0;
    p.summed_count = 1;
    int64_t n_dst = 1, stride = 1, n_src = 1;
    for (int d = ndim - 1; d >= 0; d--) { // strides of the contiguous src, innermost first
        if (keep[d]) {
            p.kept_size[p.n_kept] = shape[d];
            p.kept_stride[p.n_kept++] = stride;
            n_dst *= shape[d];
        } else {
            p.summed_size[p.n_summed] = shape[d];
            p.summed_stride[p.n_summed++] = stride;
            p.summed_count *= shape[d];
        }
        stride *= shape[d];
        n_src *= shape[d];
    }
    // the loops above filled the dims innermost first; the kernel walks them outermost first
    for (int i = 0, j = p.n_kept - 1; i < j; i++, j--) {
        int64_t t = p.kept_size[i];
        p.kept_size[i] = p.kept_size[j], p.kept_size[j] = t;
        t = p.kept_stride[i];
        p.kept_stride[i] = p.kept_stride[j], p.kept_stride[j] = t;
    }
    for (int i = 0, j = p.n_summed - 1; i < j; i++, j--) {
        int64_t t = p.summed_size[i];
        p.summed_size[i] = p.summed_size[j], p.summed_size[j] = t;
        t = p.summed_stride[i];
        p.summed_stride[i] = p.summed_stride[j], p.summed_stride[j] = t;
    }
    if (n_dst == 0) return 0;
    if (n_src == 0) { // nothing to sum: zeros
        cudaError_t e =
            cudaMemsetAsync(dst, 0, (size_t)n_dst * (f64 ? sizeof(double) : sizeof(float)), PARDO_CU_STREAM);
        if (e == cudaSuccess) return 0;
        snprintf(err, errlen, "CUDA cudaMemsetAsync failed: %s", cudaGetErrorString(e));
        return kEcuda;
    }
    if (f64)
        sum_to_kernel<double>
            <<<grid_for(n_dst), kThreads, 0, PARDO_CU_STREAM>>>((const double *)src, (double *)dst, n_dst, p);
    else
        sum_to_kernel<float>
            <<<grid_for(n_dst), kThreads, 0, PARDO_CU_STREAM>>>((const float *)src, (float *)dst, n_dst, p);
    return launched("sum", err, errlen);
}

extern "C" int pardo_cuda_sync_check(const char *what, char *err, size_t errlen) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(PARDO_CU_STREAM);
    if (e == cudaSuccess) return 0;
    snprintf(err, errlen, "CUDA %s failed: %s", what, cudaGetErrorString(e));
    return kEcuda;
}
