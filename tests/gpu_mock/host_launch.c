/* host_launch.c - host stand-ins for ops/cuda/launch.h's kernels and products, for tests only (see
 * host_device.c): each the reference arithmetic in plain loops, in double. pardo_cuda_gemm makes the same
 * column-major call matmul.cu makes of cuBLAS (launch.h's pardo_cuda_colmajor_of), checks its arguments as
 * cuBLAS does, and computes it with a naive column-major product of the reference BLAS semantics, so the
 * glue's operands, transposes, leading dims and strides are checked. What this cannot check: the .cu kernels
 * themselves, cuBLAS, and races (everything runs in order here). One thread at a time, as the executor runs its
 * GPU ops. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "launch.h"

/* element i of a float or double array, as a double */
static double get(int f64, const void *p, int64_t i) {
    return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void put(int f64, void *p, int64_t i, double v) {
    if (f64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* The column-major product of the reference BLAS: C = op(X) op(Y) + beta C for `count` matrices at the strides,
 * op(X) rows x inner, op(Y) inner x cols; X stored rows x inner (or inner x rows when tx) with leading dim ldx. */
static void colmajor_gemm(int f64, bool tx, bool ty, int64_t rows, int64_t cols, int64_t inner, const void *x,
                          int64_t ldx, int64_t sx, const void *y, int64_t ldy, int64_t sy, double beta, void *c,
                          int64_t ldc, int64_t sc, int64_t count) {
    for (int64_t q = 0; q < count; q++)
        for (int64_t j = 0; j < cols; j++)
            for (int64_t i = 0; i < rows; i++) {
                double s = 0;
                for (int64_t l = 0; l < inner; l++)
                    s += get(f64, x, q * sx + (tx ? l + i * ldx : i + l * ldx)) *
                         get(f64, y, q * sy + (ty ? j + l * ldy : l + j * ldy));
                const int64_t ic = q * sc + i + j * ldc;
                put(f64, c, ic, beta == 0.0 ? s : s + beta * get(f64, c, ic));
            }
}

int pardo_cuda_gemm(int f64, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t stride_a,
                    const void *b, int64_t stride_b, void *c, int64_t stride_c, int64_t batch, double beta, char *err,
                    size_t errlen) {
    if (m <= 0 || n <= 0 || batch <= 0)
        return 0;
    const pardo_cuda_colmajor g = pardo_cuda_colmajor_of(ta, tb, m, n, k);
    /* cuBLAS's checks: each leading dim at least max(1, the rows of its operand as stored) */
    const int64_t rows_first = g.trans_first ? g.inner : g.rows, rows_second = g.trans_second ? g.cols : g.inner;
    if (k > 0 && (g.ld_first < (rows_first > 1 ? rows_first : 1) || g.ld_second < (rows_second > 1 ? rows_second : 1) ||
                  g.ld_out < (g.rows > 1 ? g.rows : 1))) {
        snprintf(err, errlen,
                 "host cuBLAS: a leading dim below its operand's rows (%lld < %lld, %lld < %lld, %lld < %lld)",
                 (long long)g.ld_first, (long long)rows_first, (long long)g.ld_second, (long long)rows_second,
                 (long long)g.ld_out, (long long)g.rows);
        return -7;
    }
    if (batch > 1 && stride_c != 0 && stride_c < m * n) {
        snprintf(err, errlen, "host cuBLAS: C's matrices overlap (stride %lld < %lld)", (long long)stride_c,
                 (long long)(m * n));
        return -7;
    }
    colmajor_gemm(f64, g.trans_first, g.trans_second, g.rows, g.cols, g.inner, b, g.ld_first, stride_b, a, g.ld_second,
                  stride_a, beta, c, g.ld_out, stride_c, batch);
    return 0;
}

int pardo_cuda_launch_bias_act(int f64, void *y, const void *bias, int ndim, const int64_t *shape,
                               const int64_t *bias_strides, int act, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, ib = 0;
        for (int d = ndim - 1; d >= 0; d--) {
            ib += rem % shape[d] * (bias ? bias_strides[d] : 0);
            rem /= shape[d];
        }
        double v = get(f64, y, i) + (bias ? get(f64, bias, ib) : 0.0);
        if (act == PARDO_CU_ACT_RELU)
            v = v < 0 ? 0.0 : v;
        else if (act == PARDO_CU_ACT_GELU)
            v = 0.5 * v * erfc(-v * 0.70710678118654752440);
        put(f64, y, i, v);
    }
    return 0;
}

int pardo_cuda_launch_relu_mask(int f64, void *d, const void *y, int64_t n, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t i = 0; i < n; i++)
        if (!(get(f64, y, i) > 0))
            put(f64, d, i, 0.0);
    return 0;
}

/* summed another way than the kernel: each src element added into the dst element its kept coordinates name */
int pardo_cuda_launch_sum_to(int f64, const void *src, int ndim, const int64_t *shape, const int *keep, void *dst,
                             char *err, size_t errlen) {
    int64_t n_src = 1, n_dst = 1;
    for (int d = 0; d < ndim; d++) {
        n_src *= shape[d];
        if (keep[d])
            n_dst *= shape[d];
    }
    enum { MAX_DST = 1 << 16 };
    static double acc[MAX_DST];
    if (n_dst > MAX_DST) {
        snprintf(err, errlen, "host sum: %lld elements past %d", (long long)n_dst, MAX_DST);
        return -5;
    }
    memset(acc, 0, sizeof(double) * (size_t)n_dst);
    for (int64_t i = 0; i < n_src; i++) {
        int64_t rem = i, j = 0, scale = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            const int64_t c = rem % shape[d];
            rem /= shape[d];
            if (keep[d]) {
                j += c * scale;
                scale *= shape[d];
            }
        }
        acc[j] += get(f64, src, i);
    }
    for (int64_t j = 0; j < n_dst; j++)
        put(f64, dst, j, acc[j]);
    return 0;
}

int pardo_cuda_sync_check(const char *what, char *err, size_t errlen) {
    (void)what;
    (void)err;
    (void)errlen;
    return 0;
}

int pardo_cuda_launch_unary(int kind, int f64, const void *x, void *y, int64_t n, double a, double b, char *err,
                            size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t i = 0; i < n; i++) {
        const double v = get(f64, x, i);
        double r = v;
        switch (kind) {
        case PARDO_CU_RELU:
            r = v > 0 ? v : 0.0;
            break;
        case PARDO_CU_SIGMOID:
            r = 1.0 / (1.0 + exp(-v));
            break;
        case PARDO_CU_TANH:
            r = tanh(v);
            break;
        case PARDO_CU_EXP:
            r = exp(v);
            break;
        case PARDO_CU_LOG:
            r = log(v);
            break;
        case PARDO_CU_SCALE:
            r = v * a + b;
            break;
        }
        put(f64, y, i, r);
    }
    return 0;
}

int pardo_cuda_launch_binary(int kind, int f64, const void *a, const void *b, void *z, int ndim,
                             const int64_t *out_shape, const int64_t *a_strides, const int64_t *b_strides, char *err,
                             size_t errlen) {
    (void)err;
    (void)errlen;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= out_shape[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, ia = 0, ib = 0;
        for (int d = ndim - 1; d >= 0; d--) {
            const int64_t c = rem % out_shape[d];
            rem /= out_shape[d];
            ia += c * a_strides[d];
            ib += c * b_strides[d];
        }
        const double x = get(f64, a, ia), w = get(f64, b, ib);
        double r = 0;
        switch (kind) {
        case PARDO_CU_ADD:
            r = x + w;
            break;
        case PARDO_CU_SUB:
            r = x - w;
            break;
        case PARDO_CU_MUL:
            r = x * w;
            break;
        case PARDO_CU_DIV:
            r = x / w;
            break;
        }
        put(f64, z, i, r);
    }
    return 0;
}
