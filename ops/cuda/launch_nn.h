/* launch_nn.h - the launchers of the network ops' CUDA kernels (ops/cuda/softmax.cu and the other .cu files of
 * the nn families), in plain C types like launch.h, so both nvcc's C++ and the C glue include it. Each returns 0
 * or a negative pardo status code with the CUDA error text in err (errlen bytes). None synchronises: the glue
 * ends its op with pardo_cuda_sync_check (launch.h), so a kernel fault is reported at its op. Float32 (f64 0) or
 * float64 (f64 1) data, all device pointers, contiguous. tests/gpu_mock/host_launch_nn.c is the host stand-in of
 * each (a reference loop in double) for the glue's tests without a GPU. */
#ifndef PARDO_CUDA_LAUNCH_NN_H
#define PARDO_CUDA_LAUNCH_NN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- softmax, log_softmax and their gradients (ops/cuda/softmax.cu; semantics of ops/softmax.c) ---- */

/* X and Y viewed as [outer, n, inner] around the axis. log_form 0: y = softmax(scale x) (the max of scale x
 * subtracted, exp in the data's type, the sum in double, then y = e * (1 / sum)); log_form 1: log_softmax, in
 * double, scale unused. */
int pardo_cuda_launch_softmax(int log_form, int f64, const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                              double scale, char *err, size_t errlen);

/* dX from Y and dY, same view: log_form 0: dx = scale * y * (dy - sum(dy y)); log_form 1: dx = dy - exp(y) *
 * sum(dy); sums in double. */
int pardo_cuda_launch_softmax_grad(int log_form, int f64, const void *y, const void *dy, void *dx, int64_t outer,
                                   int64_t n, int64_t inner, double scale, char *err, size_t errlen);

enum pardo_cuda_reduction { PARDO_CU_RED_MEAN, PARDO_CU_RED_SUM, PARDO_CU_RED_NONE };

/* softmax_cross_entropy of logits x [n, c] against labels [n] (int64 when labels64, else int32), each row's
 * loss log(sum_j exp(x_j - max)) + max - x_label in double: red NONE writes them to y [n]; MEAN and SUM write
 * the rows' losses to rows (n doubles of device scratch), then their sum (or mean, 0 for n = 0) to y [1].
 * *bad (a device uint64, zeroed here) gets n - r for the first row r whose label is outside [0, c), 0 when
 * none is (the glue reads it back after pardo_cuda_sync_check). */
int pardo_cuda_launch_sce(int f64, const void *x, const void *labels, int labels64, int64_t n, int64_t c, int red,
                          void *y, double *rows, uint64_t *bad, char *err, size_t errlen);

/* softmax_cross_entropy_grad: dx [n, c] = g_r * (softmax(x_r) - onehot(label_r)), g_r = dl[r] (NONE), dl[0]
 * (SUM) or dl[0] / n (MEAN); *bad as pardo_cuda_launch_sce's. */
int pardo_cuda_launch_sce_grad(int f64, const void *x, const void *labels, int labels64, const void *dl, int64_t n,
                               int64_t c, int red, void *dx, uint64_t *bad, char *err, size_t errlen);

/* ---- gelu and the activations' gradients (ops/cuda/activation.cu; semantics of ops/activation.c) ---- */

/* y[i] = gelu(x[i]) = 0.5 x erfc(-x / sqrt 2), the exact form, for n elements (x and y may be one array). */
int pardo_cuda_launch_gelu(int f64, const void *x, void *y, int64_t n, char *err, size_t errlen);

enum pardo_cuda_act_grad { PARDO_CU_GRAD_RELU, PARDO_CU_GRAD_SIGMOID, PARDO_CU_GRAD_TANH, PARDO_CU_GRAD_GELU };

/* dx[i] from dy[i] and v[i] for n elements, in the data's type: v is Y for RELU (dy where y > 0, else 0),
 * SIGMOID (dy y (1 - y)) and TANH (dy (1 - y^2)), X for GELU (dy (Phi(x) + x phi(x))). */
int pardo_cuda_launch_act_grad(int kind, int f64, const void *v, const void *dy, void *dx, int64_t n, char *err,
                               size_t errlen);

/* ---- layer_norm and its gradient (ops/cuda/norm.cu; semantics of ops/norm.c) ---- */

/* layer_norm of x seen as [rows, n]: each row's mean and biased variance in double (0 and 0 for n = 0), inv =
 * 1 / sqrt(var + eps), y = (x - mean) inv scale + bias (scale, bias [n], either NULL: absent); mean and inv
 * [rows] in the data's type (either NULL: not wanted). */
int pardo_cuda_launch_layer_norm(int f64, const void *x, const void *scale, const void *bias, void *y, void *mean,
                                 void *inv, int64_t rows, int64_t n, double eps, char *err, size_t errlen);

/* layer_norm_grad, the row statistics recomputed from x: dx (NULL: not wanted) from scale (NULL: ones), dy,
 * dmean and dinv (each NULL: zeros); where stats (2 rows doubles of device scratch) is set, each row's mean and
 * inv go there and then dscale and dbias [n] (either NULL: not wanted; dy must be set) are summed over the rows
 * in order from them, in double. */
int pardo_cuda_launch_layer_norm_grad(int f64, const void *x, const void *scale, const void *dy, const void *dmean,
                                      const void *dinv, void *dx, double *stats, void *dscale, void *dbias,
                                      int64_t rows, int64_t n, double eps, char *err, size_t errlen);

/* ---- the reductions and argmax (ops/cuda/reduce.cu; semantics of ops/reduce.c) ---- */

#define PARDO_CU_RED_DIMS 8

/* X seen as kept and reduced dims (unit dims dropped, neighbours of one kind merged: ops/reduce.c's plan), each
 * with its element stride in X. Output element o has the kept dims' coordinates of o in row-major order; the
 * elements reduced into it are walked in row-major order of the reduced dims. */
typedef struct pardo_cuda_red_plan {
    int nk, nr;                       // kept and reduced dims (nk >= 1)
    int64_t kdims[PARDO_CU_RED_DIMS]; // kept sizes, in X's order (= Y's)
    int64_t kstr[PARDO_CU_RED_DIMS];  // their X strides, in elements
    int64_t rdims[PARDO_CU_RED_DIMS]; // reduced sizes
    int64_t rstr[PARDO_CU_RED_DIMS];  // their X strides, in elements
    int64_t out_numel;                // Y's elements
    int64_t count;                    // X elements reduced into each
} pardo_cuda_red_plan;

enum pardo_cuda_reduce { PARDO_CU_REDUCE_SUM, PARDO_CU_REDUCE_MEAN, PARDO_CU_REDUCE_MAX, PARDO_CU_REDUCE_MIN };

/* y[o] = the sum (in double), mean (the sum / count: NaN over none), max or min (-inf and +inf over none; NaN
 * wins) of the X elements reduced into o. */
int pardo_cuda_launch_reduce(int kind, int f64, const void *x, void *y, const pardo_cuda_red_plan *p, char *err,
                             size_t errlen);

/* dx (X's shape, every element written) from dy (Y's elements): SUM dy[o], MEAN dy[o] / count at every element
 * reduced into o; MAX (MIN) dy[o] at the first max (min) of o's elements in their order, NaN winning, 0 at the
 * others. */
int pardo_cuda_launch_reduce_grad(int kind, int f64, const void *x, const void *dy, void *dx,
                                  const pardo_cuda_red_plan *p, char *err, size_t errlen);

/* y[o, i] (int64) = the index along the middle dim of x [outer, n, inner] of its first max (min: min; last: the
 * last one), NaN winning; n >= 1. */
int pardo_cuda_launch_argmax(int min, int last, int f64, const void *x, int64_t *y, int64_t outer, int64_t n,
                             int64_t inner, char *err, size_t errlen);

/* ---- mse_loss, dropout and their gradients (ops/cuda/loss.cu; semantics of ops/loss.c, ops/dropout.c) ---- */

/* mse_loss of p and t (n elements each), (p - t)^2 in double: red NONE writes each to y [n]; SUM and MEAN (0 for
 * n = 0) the sum in double to y [1], through partials (PARDO_CU_MSE_PARTS doubles of device scratch). */
#define PARDO_CU_MSE_PARTS 1024
int pardo_cuda_launch_mse(int f64, const void *p, const void *t, int64_t n, int red, void *y, double *partials,
                          char *err, size_t errlen);

/* mse_loss_grad: g_i = (p_i - t_i) * k_i with k_i = 2 dl[i] (NONE), 2 dl[0] (SUM) or 2 dl[0] / n (MEAN, 0 for
 * n = 0); dp = g and dt = -g (either NULL: not wanted). */
int pardo_cuda_launch_mse_grad(int f64, const void *p, const void *t, const void *dl, int64_t n, int red, void *dp,
                               void *dt, char *err, size_t errlen);

/* dropout's elementwise pass over n elements: training 0, out = in and mask_out (if set) all 1; training 1,
 * element i kept when mask_in[i] != 0 (mask_in set) or ops/dropout_mask.h's pardo_dropout_keep(key, i, ratio),
 * out[i] = kept ? in[i] * (T)scale : 0, mask_out[i] (bool bytes, if set) = kept. */
int pardo_cuda_launch_dropout(int f64, const void *in, const uint8_t *mask_in, uint64_t key, double ratio, double scale,
                              int training, void *out, uint8_t *mask_out, int64_t n, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
