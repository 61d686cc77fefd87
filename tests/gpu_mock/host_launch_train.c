/* host_launch_train.c - host stand-ins for ops/cuda/launch_train.h's kernels, for tests only (see host_device.c
 * and host_launch.c): each the reference arithmetic in plain loops, in double, written apart from the .cu
 * kernels and the CPU kernels, so that the glue's operands, sizes and layouts are checked against the CPU
 * kernels without a GPU. What this cannot check: the .cu kernels themselves and races (everything runs in order
 * here). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "launch_train.h"

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

/* v rounded to the element type (float or double) */
static double round_to(int f64, double v) { return f64 ? v : (double)(float)v; }

int pardo_cuda_launch_optimizer(const pardo_cuda_opt_args *a, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    const int f = a->f64;
    for (int64_t i = 0; i < a->n; i++) {
        const double p = get(f, a->p, i), g = get(f, a->g, i) + a->wd * p;
        if (a->kind == PARDO_CU_SGD) {
            put(f, a->po, i, p - a->lr * g);
        } else if (a->kind == PARDO_CU_MOMENTUM) {
            const double v = round_to(f, a->mu * get(f, a->s1, i) + g);
            put(f, a->po, i, p - a->lr * (a->nesterov ? g + a->mu * v : v));
            if (a->o1) put(f, a->o1, i, v);
        } else {
            const double m = round_to(f, a->b1 * get(f, a->s1, i) + (1 - a->b1) * g);
            const double v = round_to(f, a->b2 * get(f, a->s2, i) + (1 - a->b2) * g * g);
            const double pd = a->decay == 1 ? p : round_to(f, p * a->decay);
            put(f, a->po, i, pd - a->lr * m / (sqrt(v) / a->bc2_sqrt + a->eps));
            if (a->o1) put(f, a->o1, i, m);
            if (a->o2) put(f, a->o2, i, v);
        }
    }
    return 0;
}

/* ---- data movement ---- */

int pardo_cuda_launch_gather(size_t es, const void *src, void *dst, int nd, const int64_t *dims,
                             const int64_t *src_strides, int64_t n, char *err, size_t errlen) {
    if (es != 1 && es != 2 && es != 4 && es != 8) {
        snprintf(err, errlen, "host gather: elements of %zu bytes", es);
        return -5;
    }
    /* the coordinates counted up like an odometer, innermost first */
    int64_t c[PARDO_CU_MAX_PERM_DIMS] = {0}, off = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy((char *)dst + (size_t)i * es, (const char *)src + (size_t)off * es, es);
        for (int d = nd - 1; d >= 0; d--) {
            off += src_strides[d];
            if (++c[d] < dims[d]) break;
            off -= c[d] * src_strides[d];
            c[d] = 0;
        }
    }
    return 0;
}

int pardo_cuda_launch_copy(void *dst, const void *src, size_t nbytes, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    if (nbytes && dst != src) memmove(dst, src, nbytes);
    return 0;
}

int pardo_cuda_launch_zero(void *dst, size_t nbytes, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    if (nbytes) memset(dst, 0, nbytes);
    return 0;
}

int pardo_cuda_launch_copy2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                             char *err, size_t errlen) {
    if (width > dst_pitch || width > src_pitch) {
        snprintf(err, errlen, "host cudaMemcpy2D: width %zu past a pitch (%zu, %zu)", width, dst_pitch, src_pitch);
        return -7;
    }
    for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, width);
    return 0;
}

/* a value of dtype code dt: floats as double, ints as int64 */
static double load_f(int dt, const void *p, int64_t i) {
    return dt == PARDO_CU_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static int64_t load_i(int dt, const void *p, int64_t i) {
    return dt == PARDO_CU_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

int pardo_cuda_launch_cast(int from, const void *src, int to, void *dst, int64_t n, char *err, size_t errlen) {
    const bool ffloat = from == PARDO_CU_F32 || from == PARDO_CU_F64;
    if ((from < PARDO_CU_F32 || from > PARDO_CU_I64) || (to < PARDO_CU_F32 || to > PARDO_CU_I64)) {
        snprintf(err, errlen, "host cast: codes %d to %d", from, to);
        return -5;
    }
    for (int64_t i = 0; i < n; i++) {
        if (ffloat) {
            const double v = load_f(from, src, i);
            switch (to) {
            case PARDO_CU_F32:
                ((float *)dst)[i] = (float)v;
                break;
            case PARDO_CU_F64:
                ((double *)dst)[i] = v;
                break;
            case PARDO_CU_I32:
                ((int32_t *)dst)[i] = isnan(v)             ? 0
                                      : v >= 2147483647.0  ? INT32_MAX
                                      : v <= -2147483648.0 ? INT32_MIN
                                                           : (int32_t)v;
                break;
            default:
                ((int64_t *)dst)[i] = isnan(v) ? 0 : v >= 0x1p63 ? INT64_MAX : v <= -0x1p63 ? INT64_MIN : (int64_t)v;
                break;
            }
        } else {
            const int64_t v = load_i(from, src, i);
            switch (to) {
            case PARDO_CU_F32:
                ((float *)dst)[i] = (float)v;
                break;
            case PARDO_CU_F64:
                ((double *)dst)[i] = (double)v;
                break;
            case PARDO_CU_I32:
                ((int32_t *)dst)[i] = (int32_t)(uint32_t)(uint64_t)v;
                break;
            default:
                ((int64_t *)dst)[i] = v;
                break;
            }
        }
    }
    return 0;
}

int pardo_cuda_launch_fill(int dt, void *dst, int64_t n, double value, char *err, size_t errlen) {
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case PARDO_CU_F32:
            ((float *)dst)[i] = (float)value;
            break;
        case PARDO_CU_F64:
            ((double *)dst)[i] = value;
            break;
        case PARDO_CU_I32:
            ((int32_t *)dst)[i] = (int32_t)value;
            break;
        case PARDO_CU_I64:
            ((int64_t *)dst)[i] = (int64_t)value;
            break;
        default:
            snprintf(err, errlen, "host fill: dtype code %d", dt);
            return -5;
        }
    }
    return 0;
}

/* ---- conv2d's columns ---- */

/* The input element that column entry (row, p) of an image reads, or -1 where it reads the padding. */
static int64_t tap_of(const pardo_cuda_conv2d_geom *g, int64_t row, int64_t p) {
    const int64_t ci = row / (g->kh * g->kw), ki = row / g->kw % g->kh, kj = row % g->kw;
    const int64_t iy = p / g->ow * g->stride[0] - g->pad[0] + ki * g->dilation[0];
    const int64_t ix = p % g->ow * g->stride[1] - g->pad[1] + kj * g->dilation[1];
    if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) return -1;
    return (ci * g->h + iy) * g->w + ix;
}

int pardo_cuda_launch_im2col(int f64, const void *x, void *col, const pardo_cuda_conv2d_geom *g, int64_t n0, int64_t nb,
                             char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    const int64_t rows = g->c * g->kh * g->kw, P = g->oh * g->ow, img = g->c * g->h * g->w;
    for (int64_t i = 0; i < nb; i++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t p = 0; p < P; p++) {
                const int64_t t = tap_of(g, r, p);
                put(f64, col, (i * rows + r) * P + p, t < 0 ? 0.0 : get(f64, x, (n0 + i) * img + t));
            }
    return 0;
}

/* scattered the other way than the kernel gathers: each column entry added into the element it read */
int pardo_cuda_launch_col2im(int f64, const void *col, void *dx, const pardo_cuda_conv2d_geom *g, int64_t n0,
                             int64_t nb, char *err, size_t errlen) {
    const int64_t rows = g->c * g->kh * g->kw, P = g->oh * g->ow, img = g->c * g->h * g->w;
    enum { MAX_IMG = 1 << 20 };
    static double acc[MAX_IMG];
    if (img > MAX_IMG) {
        snprintf(err, errlen, "host col2im: %lld elements an image, past %d", (long long)img, MAX_IMG);
        return -5;
    }
    for (int64_t i = 0; i < nb; i++) {
        memset(acc, 0, sizeof(double) * (size_t)img);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t p = 0; p < P; p++) {
                const int64_t t = tap_of(g, r, p);
                if (t >= 0) acc[t] += get(f64, col, (i * rows + r) * P + p);
            }
        for (int64_t e = 0; e < img; e++) put(f64, dx, (n0 + i) * img + e, acc[e]);
    }
    return 0;
}

/* ---- the pools ---- */

/* output (oy, ox)'s window clipped to the input: rows [*h0, *h1), columns [*w0, *w1) */
static void window(const pardo_cuda_pool2d_geom *g, int64_t oy, int64_t ox, int64_t *h0, int64_t *h1, int64_t *w0,
                   int64_t *w1) {
    const int64_t r = oy * g->stride[0] - g->pad[0], c = ox * g->stride[1] - g->pad[1];
    *h0 = r < 0 ? 0 : r;
    *h1 = r + g->kh > g->h ? g->h : r + g->kh;
    *w0 = c < 0 ? 0 : c;
    *w1 = c + g->kw > g->w ? g->w : c + g->kw;
}

/* the first maximum of a window of plane xp (row-major, strict >) */
static int64_t first_max(int f64, const void *x, int64_t base, const pardo_cuda_pool2d_geom *g, int64_t oy,
                         int64_t ox) {
    int64_t h0, h1, w0, w1;
    window(g, oy, ox, &h0, &h1, &w0, &w1);
    int64_t best = h0 * g->w + w0;
    for (int64_t ih = h0; ih < h1; ih++)
        for (int64_t iw = w0; iw < w1; iw++)
            if (get(f64, x, base + ih * g->w + iw) > get(f64, x, base + best)) best = ih * g->w + iw;
    return best;
}

int pardo_cuda_launch_pool2d(int max, int f64, const void *x, void *y, const pardo_cuda_pool2d_geom *g, char *err,
                             size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t pl = 0; pl < g->planes; pl++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t base = pl * g->h * g->w, o = (pl * g->oh + oy) * g->ow + ox;
                if (max) {
                    put(f64, y, o, get(f64, x, base + first_max(f64, x, base, g, oy, ox)));
                    continue;
                }
                int64_t h0, h1, w0, w1;
                window(g, oy, ox, &h0, &h1, &w0, &w1);
                double s = 0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) s += get(f64, x, base + ih * g->w + iw);
                put(f64, y, o, s / (double)((h1 - h0) * (w1 - w0)));
            }
    return 0;
}

/* scattered from the outputs (the kernel gathers at the inputs), in double */
int pardo_cuda_launch_pool2d_grad(int max, int f64, const void *x, const void *dy, void *dx,
                                  const pardo_cuda_pool2d_geom *g, char *err, size_t errlen) {
    enum { MAX_PLANE = 1 << 20 };
    static double acc[MAX_PLANE];
    const int64_t hw = g->h * g->w;
    if (hw > MAX_PLANE) {
        snprintf(err, errlen, "host pool gradient: planes of %lld elements, past %d", (long long)hw, MAX_PLANE);
        return -5;
    }
    for (int64_t pl = 0; pl < g->planes; pl++) {
        memset(acc, 0, sizeof(double) * (size_t)hw);
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const double d = get(f64, dy, (pl * g->oh + oy) * g->ow + ox);
                if (max) {
                    acc[first_max(f64, x, pl * hw, g, oy, ox)] += d;
                    continue;
                }
                int64_t h0, h1, w0, w1;
                window(g, oy, ox, &h0, &h1, &w0, &w1);
                const double share = round_to(f64, d / (double)((h1 - h0) * (w1 - w0)));
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) acc[ih * g->w + iw] += share;
            }
        for (int64_t e = 0; e < hw; e++) put(f64, dx, pl * hw + e, acc[e]);
    }
    return 0;
}

/* ---- embedding ---- */

static int64_t index_at(int idx64, const void *idx, int64_t i) {
    return idx64 ? ((const int64_t *)idx)[i] : (int64_t)((const int32_t *)idx)[i];
}

int pardo_cuda_launch_embedding(int f64, const void *w, int idx64, const void *idx, int64_t n, int64_t d, void *y,
                                char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) put(f64, y, i * d + j, get(f64, w, index_at(idx64, idx, i) * d + j));
    return 0;
}

/* the indices taken last to first (the kernel's order is none in particular) */
int pardo_cuda_launch_embedding_grad(int f64, const void *dy, int idx64, const void *idx, int64_t n, int64_t d,
                                     void *dw, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t i = n - 1; i >= 0; i--)
        for (int64_t j = 0; j < d; j++) {
            const int64_t at = index_at(idx64, idx, i) * d + j;
            put(f64, dw, at, get(f64, dw, at) + get(f64, dy, i * d + j));
        }
    return 0;
}

/* ---- batch_norm ---- */

/* the batch's mean and biased variance of channel ch (two passes in double) */
static void channel_stats(int f64, const void *x, int64_t n, int64_t c, int64_t s, int64_t ch, double *mean,
                          double *var) {
    const double m = (double)(n * s);
    double a = 0, b = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < s; i++) a += get(f64, x, (r * c + ch) * s + i);
    *mean = m > 0 ? a / m : 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < s; i++) {
            const double d = get(f64, x, (r * c + ch) * s + i) - *mean;
            b += d * d;
        }
    *var = m > 0 ? b / m : 0;
}

int pardo_cuda_launch_batch_norm(int f64, int training, const void *x, const void *scale, const void *bias,
                                 const void *mean, const void *var, int64_t n, int64_t c, int64_t s, double eps,
                                 double momentum, void *y, void *mean_out, void *var_out, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    const double m = (double)(n * s);
    for (int64_t ch = 0; ch < c; ch++) {
        double mu = get(f64, mean, ch), v = get(f64, var, ch), rm = mu, rv = v;
        if (training) {
            channel_stats(f64, x, n, c, s, ch, &mu, &v);
            rm = rm * momentum + mu * (1 - momentum);
            rv = rv * momentum + (m > 1 ? v * m / (m - 1) : v) * (1 - momentum);
        }
        const double sd = sqrt(v + eps);
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < s; i++) {
                const int64_t at = (r * c + ch) * s + i;
                put(f64, y, at, (get(f64, x, at) - mu) / sd * get(f64, scale, ch) + get(f64, bias, ch));
            }
        if (mean_out) put(f64, mean_out, ch, rm);
        if (var_out) put(f64, var_out, ch, rv);
    }
    return 0;
}

int pardo_cuda_launch_batch_norm_grad(int f64, int training, const void *x, const void *scale, const void *mean,
                                      const void *var, const void *dy, int64_t n, int64_t c, int64_t s, double eps,
                                      void *dx, void *dscale, void *dbias, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    const double m = (double)(n * s);
    for (int64_t ch = 0; ch < c; ch++) {
        double mu = get(f64, mean, ch), v = get(f64, var, ch);
        if (training) channel_stats(f64, x, n, c, s, ch, &mu, &v);
        const double sd = sqrt(v + eps);
        double sdy = 0, sdyx = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < s; i++) {
                const int64_t at = (r * c + ch) * s + i;
                sdy += get(f64, dy, at);
                sdyx += get(f64, dy, at) * (get(f64, x, at) - mu) / sd;
            }
        if (dscale) put(f64, dscale, ch, sdyx);
        if (dbias) put(f64, dbias, ch, sdy);
        for (int64_t r = 0; dx && r < n; r++)
            for (int64_t i = 0; i < s; i++) {
                const int64_t at = (r * c + ch) * s + i;
                const double xh = (get(f64, x, at) - mu) / sd, d = get(f64, dy, at);
                put(f64, dx, at, get(f64, scale, ch) / sd * (training && m > 0 ? d - sdy / m - xh * sdyx / m : d));
            }
    }
    return 0;
}
