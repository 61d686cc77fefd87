/* launch.h - the CUDA kernels' launchers, in plain C types so that both the
 * .cu files (compiled by nvcc as C++) and the C glue in ops/cuda/ C files can
 * include it. Each returns 0 or a negative pardo status code, with the CUDA
 * error text in err (errlen bytes). All launch on the current device's compute
 * stream (cuda_stream.cuh's PARDO_CU_STREAM, never the legacy default); the
 * elementwise ones synchronise before returning, the matrix product's leave
 * that to pardo_cuda_sync_check at the op's end, so a kernel fault is
 * reported at its op. */
#ifndef PARDO_CUDA_LAUNCH_H
#define PARDO_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pardo_cuda_unary { PARDO_CU_RELU, PARDO_CU_SIGMOID, PARDO_CU_TANH, PARDO_CU_EXP, PARDO_CU_LOG, PARDO_CU_SCALE };
enum pardo_cuda_binary { PARDO_CU_ADD, PARDO_CU_SUB, PARDO_CU_MUL, PARDO_CU_DIV };

#define PARDO_CU_MAX_DIMS 8

/* y[i] = f(x[i]) for n elements; f64 selects double, else float. For SCALE,
 * y = x * a + b. */
int pardo_cuda_launch_unary(int kind, int f64, const void *x, void *y, int64_t n, double a, double b, char *err,
                            size_t errlen);

/* z = a OP b with numpy broadcasting: the output has ndim dims of sizes
 * out_shape; a_strides and b_strides are element strides of a and b per
 * output dim (0 where broadcast). */
int pardo_cuda_launch_binary(int kind, int f64, const void *a, const void *b, void *z, int ndim,
                             const int64_t *out_shape, const int64_t *a_strides, const int64_t *b_strides,
                             char *err, size_t errlen);

/* ---- the matrix product (ops/cuda/matmul.cu) ---- */

/* Row-major products through cuBLAS, `batch` of them: C_i = op(A_i) op(B_i) + beta C_i (beta 0 or 1) with op(A_i)
 * [m, k] and op(B_i) [k, n]; A_i stored [m, k] (lda k), or [k, m] (lda m) when ta; B_i stored [k, n] (ldb n), or
 * [n, k] (ldb k) when tb; C_i [m, n] (ldc n); A_i at a + i * stride_a elements (stride 0: the same matrix for
 * every i), likewise B_i and C_i (stride_c at least m * n when batch > 1). Computed column-major as
 * C^T = op(B)^T op(A)^T, one strided batched call on the calling thread's cuBLAS handle (created on its first
 * call, set to the compute stream every launcher here uses). Every size and count must fit an int (the glue
 * checks). Does not synchronise: pardo_cuda_sync_check after the op's last launch. */
int pardo_cuda_gemm(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t stride_a,
                    const void *b, int64_t stride_b, void *c, int64_t stride_c, int64_t batch, double beta, char *err,
                    size_t errlen);

/* The column-major BLAS call (cuBLAS's gemm) that computes pardo_cuda_gemm's row-major C = op(A) op(B): row-major
 * C [m, n] read column-major is C^T [n, m] (ld n), and C^T = op(B)^T op(A)^T, so B is the call's first operand. B
 * as stored (row-major, ld tb ? k : n) read column-major is B^T when !tb: op(B)^T is it as it is (no transpose),
 * or transposed when tb; likewise A (ld ta ? m : k). matmul.cu makes its call from this, and so does the host
 * stand-in that checks the glue without a GPU (tests/gpu_mock/), against a naive column-major product. */
typedef struct pardo_cuda_colmajor {
    int trans_first, trans_second;       // whether the call transposes its first operand (B) and second (A)
    int64_t rows, cols, inner;           // the call's m, n, k
    int64_t ld_first, ld_second, ld_out; // leading dims of B, A and C as stored
} pardo_cuda_colmajor;

static inline pardo_cuda_colmajor pardo_cuda_colmajor_of(int ta, int tb, int64_t m, int64_t n, int64_t k) {
    pardo_cuda_colmajor g = {tb != 0, ta != 0, n, m, k, tb ? k : n, ta ? m : k, n};
    return g;
}

enum pardo_cuda_act { PARDO_CU_ACT_NONE, PARDO_CU_ACT_RELU, PARDO_CU_ACT_GELU };

/* The product's epilogue, in place: y[i] = act(y[i] + bias[ib(i)]) over the ndim dims of shape, bias read at
 * element strides bias_strides per dim (0 where broadcast); bias NULL: y[i] = act(y[i]). gelu is the exact
 * 0.5 x erfc(-x / sqrt 2). Does not synchronise. */
int pardo_cuda_launch_bias_act(int f64, void *y, const void *bias, int ndim, const int64_t *shape,
                               const int64_t *bias_strides, int act, char *err, size_t errlen);

/* relu_grad's mask, in place: d[i] = y[i] > 0 ? d[i] : 0 for n elements. Does not synchronise. */
int pardo_cuda_launch_relu_mask(int f64, void *d, const void *y, int64_t n, char *err, size_t errlen);

/* dst[j] = the sum (in double) of the src elements that dst element j broadcast to: src has ndim dims of sizes
 * shape, contiguous; keep[d] says whether dim d is dst's too (else summed over); dst holds the product of the
 * kept sizes, row-major. Does not synchronise. */
int pardo_cuda_launch_sum_to(int f64, const void *src, int ndim, const int64_t *shape, const int *keep, void *dst,
                             char *err, size_t errlen);

/* The check that ends an op's launches: the launch error, if any, else waits for the device and returns the
 * error of what ran (PARDO_ECUDA with "CUDA WHAT failed: ..." in err), or 0. It synchronises the compute stream
 * (PARDO_CU_STREAM), not the whole device: the feed stage's copy stream goes on meanwhile. */
int pardo_cuda_sync_check(const char *what, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
