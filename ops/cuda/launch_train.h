/* launch_train.h - the launchers of the training-side CUDA kernels (the optimizer updates, the data movement ops,
 * conv2d's columns, the 2-D pools, embedding, batch_norm), in plain C types so that both the .cu files (nvcc, as C++)
 * and the C glue of ops/cuda/ include it; launch.h has the elementwise kernels, the matrix product and
 * pardo_cuda_sync_check, which these share. Each returns 0 or a negative pardo status code with the CUDA error text in
 * err (errlen bytes). None synchronises: each launches on PARDO_CU_STREAM (cuda_stream.cuh) and the glue ends the op
 * with pardo_cuda_sync_check, so a kernel fault is reported at its op. tests/gpu_mock/host_launch_train.c has a host
 * stand-in of each. */
#ifndef PARDO_CUDA_LAUNCH_TRAIN_H
#define PARDO_CUDA_LAUNCH_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the optimizer updates (ops/cuda/optimizer.cu) ---- */

enum pardo_cuda_opt { PARDO_CU_SGD, PARDO_CU_MOMENTUM, PARDO_CU_ADAM };

/* One update of n elements, ops/optimizer.c's formulas element by element in double, each state rounded to the
 * param's dtype before it is used (as the CPU kernel does):
 *   sgd:      p -= lr (g + wd p)
 *   momentum: gi = g + wd p; v = (T)(mu v + gi); p -= lr (nesterov ? gi + mu v : v)
 *   adam:     gi = g + wd p; m = (T)(b1 m + (1 - b1) gi); v = (T)(b2 v + (1 - b2) gi^2);
 *             p = (T)(decay == 1 ? p : (T)(p decay) - lr m / (sqrt(v) / bc2_sqrt + eps))
 *             (lr here is the bias-corrected step size lr / (1 - b1^t); adamw: wd 0 and decay 1 - lr wd)
 * Element i of every input is read before element i of any output is written, so an output may be its input
 * (in place); a NULL state output (o1, o2) drops that state. */
typedef struct pardo_cuda_opt_args {
    int kind;                    // enum pardo_cuda_opt
    int f64;                     // double, else float
    int64_t n;                   // elements
    const void *p, *g, *s1, *s2; // param, grad, states (velocity; or m, v)
    void *po, *o1, *o2;          // updated param and states
    double lr, mu, wd, b1, b2, eps, bc2_sqrt, decay;
    int nesterov;
} pardo_cuda_opt_args;

int pardo_cuda_launch_optimizer(const pardo_cuda_opt_args *a, char *err, size_t errlen);

/* ---- data movement (ops/cuda/data.cu) ---- */

#define PARDO_CU_MAX_PERM_DIMS 8

/* dst[i] = src[off(i)] for the n elements of dst, elements of es bytes (1, 2, 4 or 8): i read as coordinates of
 * dims (nd dims, row-major), off(i) their sum times src_strides (elements). transpose's gather. */
int pardo_cuda_launch_gather(size_t es, const void *src, void *dst, int nd, const int64_t *dims,
                             const int64_t *src_strides, int64_t n, char *err, size_t errlen);

/* dst = src, nbytes of device memory (cudaMemcpyAsync device to device). */
int pardo_cuda_launch_copy(void *dst, const void *src, size_t nbytes, char *err, size_t errlen);

/* nbytes of device memory at dst set to zero bytes (cudaMemsetAsync). */
int pardo_cuda_launch_zero(void *dst, size_t nbytes, char *err, size_t errlen);

/* rows rows of width bytes each, from src (rows src_pitch bytes apart) to dst (dst_pitch apart):
 * cudaMemcpy2DAsync. concat's blocks and concat_grad's. */
int pardo_cuda_launch_copy2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                             char *err, size_t errlen);

enum pardo_cuda_dtype { PARDO_CU_F32, PARDO_CU_F64, PARDO_CU_I32, PARDO_CU_I64 };

/* dst[i] = src[i] converted, n elements, as ops/cast.c converts: float to int truncates toward zero and
 * saturates (NaN 0), int64 to int32 keeps the low bits, int to float rounds to nearest. */
int pardo_cuda_launch_cast(int from, const void *src, int to, void *dst, int64_t n, char *err, size_t errlen);

/* dst[i] = (T)value for n elements of dtype dt (enum pardo_cuda_dtype). */
int pardo_cuda_launch_fill(int dt, void *dst, int64_t n, double value, char *err, size_t errlen);

/* ---- conv2d's columns (ops/cuda/conv.cu) ---- */

/* One conv2d's sizes (ops/conv.c): X [n, c, h, w], W [m, c / group, kh, kw], Y [n, m, oh, ow]. */
typedef struct pardo_cuda_conv2d_geom {
    int64_t n, c, h, w, m, group, kh, kw, oh, ow;
    int64_t stride[2], pad[4], dilation[2]; // pad: top, left, bottom, right
} pardo_cuda_conv2d_geom;

/* The columns of images n0 .. n0 + nb - 1 of x: col [nb][c * kh * kw][oh * ow], row (ci, i, j) column (oy, ox)
 * holding x[n, ci, oy * stride_h - pad_top + i * dilation_h, ox * stride_w - pad_left + j * dilation_w] (0
 * outside X); group g's rows are its channels' (rows g * K .. (g + 1) * K - 1, K = c / group * kh * kw). */
int pardo_cuda_launch_im2col(int f64, const void *x, void *col, const pardo_cuda_conv2d_geom *g, int64_t n0, int64_t nb,
                             char *err, size_t errlen);

/* im2col's adjoint: each element of images n0 .. n0 + nb - 1 of dx set (not added) to the sum of the column
 * entries that read it (col laid out as im2col writes it), in a fixed order per element (no atomics). */
int pardo_cuda_launch_col2im(int f64, const void *col, void *dx, const pardo_cuda_conv2d_geom *g, int64_t n0,
                             int64_t nb, char *err, size_t errlen);

/* ---- the 2-D pools (ops/cuda/pool.cu) ---- */

/* One pool's sizes (ops/pool.c): planes = N * C of [h, w] in, [oh, ow] out; each window clipped to the input. */
typedef struct pardo_cuda_pool2d_geom {
    int64_t planes, h, w, oh, ow, kh, kw;
    int64_t stride[2], pad[4]; // pad: top, left, bottom, right
} pardo_cuda_pool2d_geom;

/* y = the pool of x: max (the first maximum of each clipped window in row-major order, strict >) or the average
 * (the sum in double over the window's input elements in row-major order, divided by their count). */
int pardo_cuda_launch_pool2d(int max, int f64, const void *x, void *y, const pardo_cuda_pool2d_geom *g, char *err,
                             size_t errlen);

/* dx of the pool from dy: each element the sum, in the element type and in the windows' row-major order, of dy
 * over the windows whose first maximum it is (max; x read) or of (T)(dy / count) over the windows holding it
 * (average): the CPU kernel's sums, added in its order. Every element of dx is written. */
int pardo_cuda_launch_pool2d_grad(int max, int f64, const void *x, const void *dy, void *dx,
                                  const pardo_cuda_pool2d_geom *g, char *err, size_t errlen);

/* ---- embedding (ops/cuda/embedding.cu) ---- */

/* y[i, :] = w[idx[i], :] for the n indices (int64 where idx64, else int32; each in range: the glue checks), rows
 * of d elements. */
int pardo_cuda_launch_embedding(int f64, const void *w, int idx64, const void *idx, int64_t n, int64_t d, void *y,
                                char *err, size_t errlen);

/* dw[idx[i], :] += dy[i, :] for the n indices, with atomicAdd: repeated indices add in no fixed order, so the sums'
 * bits may differ from the CPU kernel's (in-order) sums and from run to run. dw is not zeroed here. */
int pardo_cuda_launch_embedding_grad(int f64, const void *dy, int idx64, const void *idx, int64_t n, int64_t d,
                                     void *dw, char *err, size_t errlen);

/* ---- batch_norm (ops/cuda/batch_norm.cu) ---- */

/* batch_norm over x [n, c, s] (s: the elements per channel and row): one block per channel. training: the
 * channel's mean and biased variance from two passes summed in double (a tree over the block's threads), the
 * running statistics mean_out / var_out (NULL: dropped) = running * momentum + batch * (1 - momentum), the variance
 * unbiased (times M / (M - 1), M = n s); else the running mean and var normalise. y = x a + b with a = scale /
 * sqrt(var + eps), b = bias - mean a, in double. */
int pardo_cuda_launch_batch_norm(int f64, int training, const void *x, const void *scale, const void *bias,
                                 const void *mean, const void *var, int64_t n, int64_t c, int64_t s, double eps,
                                 double momentum, void *y, void *mean_out, void *var_out, char *err, size_t errlen);

/* batch_norm_grad: per channel (one block each) sum dY and sum dY xhat in double (xhat from the batch's statistics
 * when training, the running ones else), dscale and dbias from them (NULL: not wanted), and dx (NULL: not
 * wanted) = scale / sqrt(var + eps) (dY - [training] (sum dY + xhat sum dY xhat) / M). */
int pardo_cuda_launch_batch_norm_grad(int f64, int training, const void *x, const void *scale, const void *mean,
                                      const void *var, const void *dy, int64_t n, int64_t c, int64_t s, double eps,
                                      void *dx, void *dscale, void *dbias, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
