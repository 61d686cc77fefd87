/* launch.h - the CUDA kernels' launchers, in plain C types so that both the
 * .cu files (compiled by nvcc as C++) and the C glue in ops/cuda/ C files can
 * include it. Each returns 0 or a negative pardo status code, with the CUDA
 * error text in err (errlen bytes). All launch on the default stream and
 * synchronise before returning errors, so a kernel fault is reported at its op. */
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

#ifdef __cplusplus
}
#endif

#endif
