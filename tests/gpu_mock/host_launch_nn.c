/* host_launch_nn.c - host stand-ins for ops/cuda/launch_nn.h's kernels (the network ops), for tests only, linked
 * with host_launch.c into build/gpu-mock/ (see host_device.c): each the reference arithmetic in plain loops, in
 * double, written from the ops' formulas (ops/softmax.c ...) rather than from the .cu kernels, so the glue's
 * views, attrs, optional inputs and scratch are checked against the CPU kernels. What this cannot check: the .cu
 * kernels themselves (their block reductions and launch shapes), which tools/gpu_check.sh runs on a GPU. One
 * thread at a time, as the executor runs its GPU ops. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dropout_mask.h"
#include "launch_nn.h"

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

/* ---- softmax and its kin ---- */

int pardo_cuda_launch_softmax(int log_form, int f64, const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                              double scale, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * n * inner + i;
            const double s = log_form ? 1.0 : scale;
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < n; k++) mx = fmax(mx, s * get(f64, x, base + k * inner));
            for (int64_t k = 0; k < n; k++) sum += exp(s * get(f64, x, base + k * inner) - mx);
            for (int64_t k = 0; k < n; k++) {
                const double v = s * get(f64, x, base + k * inner) - mx;
                put(f64, y, base + k * inner, log_form ? v - log(sum) : exp(v) / sum);
            }
        }
    return 0;
}

int pardo_cuda_launch_softmax_grad(int log_form, int f64, const void *y, const void *dy, void *dx, int64_t outer,
                                   int64_t n, int64_t inner, double scale, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * n * inner + i;
            double s = 0;
            for (int64_t k = 0; k < n; k++) {
                const int64_t j = base + k * inner;
                s += log_form ? get(f64, dy, j) : get(f64, dy, j) * get(f64, y, j);
            }
            for (int64_t k = 0; k < n; k++) {
                const int64_t j = base + k * inner;
                const double g = get(f64, dy, j), v = get(f64, y, j);
                put(f64, dx, j, log_form ? g - exp(v) * s : scale * v * (g - s));
            }
        }
    return 0;
}

static int64_t label_at(const void *labels, int labels64, int64_t r) {
    return labels64 ? ((const int64_t *)labels)[r] : ((const int32_t *)labels)[r];
}

/* log(sum_j exp(x_j)) of row r, through its max */
static double row_lse(int f64, const void *x, int64_t r, int64_t c) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; j++) mx = fmax(mx, get(f64, x, r * c + j));
    for (int64_t j = 0; j < c; j++) s += exp(get(f64, x, r * c + j) - mx);
    return mx + log(s);
}

int pardo_cuda_launch_sce(int f64, const void *x, const void *labels, int labels64, int64_t n, int64_t c, int red,
                          void *y, double *rows, uint64_t *bad, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    double total = 0;
    *bad = 0;
    for (int64_t r = 0; r < n; r++) {
        const int64_t lab = label_at(labels, labels64, r);
        if (lab < 0 || lab >= c) {
            if (*bad == 0) *bad = (uint64_t)(n - r);
            continue;
        }
        const double loss = row_lse(f64, x, r, c) - get(f64, x, r * c + lab);
        if (red == PARDO_CU_RED_NONE)
            put(f64, y, r, loss);
        else
            rows[r] = loss, total += loss;
    }
    if (red == PARDO_CU_RED_SUM) put(f64, y, 0, total);
    if (red == PARDO_CU_RED_MEAN) put(f64, y, 0, n > 0 ? total / (double)n : 0.0);
    return 0;
}

int pardo_cuda_launch_sce_grad(int f64, const void *x, const void *labels, int labels64, const void *dl, int64_t n,
                               int64_t c, int red, void *dx, uint64_t *bad, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    *bad = 0;
    for (int64_t r = 0; r < n; r++) {
        const int64_t lab = label_at(labels, labels64, r);
        if (lab < 0 || lab >= c) {
            if (*bad == 0) *bad = (uint64_t)(n - r);
            continue;
        }
        const double g =
            red == PARDO_CU_RED_NONE ? get(f64, dl, r) : get(f64, dl, 0) / (red == PARDO_CU_RED_MEAN ? (double)n : 1.0);
        const double lse = row_lse(f64, x, r, c);
        for (int64_t j = 0; j < c; j++)
            put(f64, dx, r * c + j, g * (exp(get(f64, x, r * c + j) - lse) - (j == lab ? 1.0 : 0.0)));
    }
    return 0;
}

/* ---- gelu and the activations' gradients ---- */

int pardo_cuda_launch_gelu(int f64, const void *x, void *y, int64_t n, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t i = 0; i < n; i++) {
        const double v = get(f64, x, i);
        put(f64, y, i, v * 0.5 * (1.0 + erf(v / sqrt(2.0))));
    }
    return 0;
}

int pardo_cuda_launch_act_grad(int kind, int f64, const void *v, const void *dy, void *dx, int64_t n, char *err,
                               size_t errlen) {
    (void)err;
    (void)errlen;
    const double pi = 3.14159265358979323846;
    for (int64_t i = 0; i < n; i++) {
        const double g = get(f64, dy, i), w = get(f64, v, i);
        double r;
        switch (kind) {
        case PARDO_CU_GRAD_RELU:
            r = w > 0 ? g : 0.0;
            break;
        case PARDO_CU_GRAD_SIGMOID:
            r = g * w * (1 - w);
            break;
        case PARDO_CU_GRAD_TANH:
            r = g * (1 - w * w);
            break;
        default:
            r = g * (0.5 * (1.0 + erf(w / sqrt(2.0))) + w * exp(-0.5 * w * w) / sqrt(2.0 * pi));
            break;
        }
        put(f64, dx, i, r);
    }
    return 0;
}

/* ---- layer_norm and its gradient ---- */

/* the mean and 1 / sqrt(biased variance + eps) of row r of n elements */
static void ln_stats(int f64, const void *x, int64_t r, int64_t n, double eps, double *mean, double *inv) {
    double s = 0, v = 0;
    for (int64_t j = 0; j < n; j++) s += get(f64, x, r * n + j);
    *mean = n > 0 ? s / (double)n : 0.0;
    for (int64_t j = 0; j < n; j++) v += (get(f64, x, r * n + j) - *mean) * (get(f64, x, r * n + j) - *mean);
    *inv = 1.0 / sqrt((n > 0 ? v / (double)n : 0.0) + eps);
}

int pardo_cuda_launch_layer_norm(int f64, const void *x, const void *scale, const void *bias, void *y, void *mean,
                                 void *inv, int64_t rows, int64_t n, double eps, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t r = 0; r < rows; r++) {
        double m, iv;
        ln_stats(f64, x, r, n, eps, &m, &iv);
        for (int64_t j = 0; j < n; j++)
            put(f64, y, r * n + j,
                (get(f64, x, r * n + j) - m) * iv * (scale ? get(f64, scale, j) : 1.0) +
                    (bias ? get(f64, bias, j) : 0.0));
        if (mean) put(f64, mean, r, m);
        if (inv) put(f64, inv, r, iv);
    }
    return 0;
}

/* dX from the chain rule through xhat = (x - mean) inv written out: dxhat_j = dy_j scale_j, dx_j = inv (dxhat_j -
 * mean(dxhat) - xhat_j mean(dxhat xhat)) + dmean / n + dinv * d inv / dx_j, d inv / dx_j = -inv^3 (x_j - mean) / n */
int pardo_cuda_launch_layer_norm_grad(int f64, const void *x, const void *scale, const void *dy, const void *dmean,
                                      const void *dinv, void *dx, double *stats, void *dscale, void *dbias,
                                      int64_t rows, int64_t n, double eps, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t r = 0; r < rows; r++) {
        double m, iv, a = 0, b = 0;
        ln_stats(f64, x, r, n, eps, &m, &iv);
        if (stats) stats[2 * r] = m, stats[2 * r + 1] = iv;
        if (!dx) continue;
        for (int64_t j = 0; j < n && dy; j++) {
            const double gh = get(f64, dy, r * n + j) * (scale ? get(f64, scale, j) : 1.0);
            a += gh;
            b += gh * (get(f64, x, r * n + j) - m) * iv;
        }
        for (int64_t j = 0; j < n; j++) {
            const double xc = get(f64, x, r * n + j) - m;
            const double gh = dy ? get(f64, dy, r * n + j) * (scale ? get(f64, scale, j) : 1.0) : 0.0;
            double d = iv * (gh - a / (double)n - xc * iv * b / (double)n);
            if (dmean) d += get(f64, dmean, r) / (double)n;
            if (dinv) d -= get(f64, dinv, r) * iv * iv * iv * xc / (double)n;
            put(f64, dx, r * n + j, d);
        }
    }
    if (!stats || n <= 0) return 0;
    for (int64_t j = 0; j < n; j++) {
        double as = 0, ab = 0;
        for (int64_t r = 0; r < rows; r++) {
            as += get(f64, dy, r * n + j) * (get(f64, x, r * n + j) - stats[2 * r]) * stats[2 * r + 1];
            ab += get(f64, dy, r * n + j);
        }
        if (dscale) put(f64, dscale, j, as);
        if (dbias) put(f64, dbias, j, ab);
    }
    return 0;
}

/* ---- the reductions and argmax ---- */

/* X's offset of output o's r-th reduced element under plan p */
static int64_t red_offset(const pardo_cuda_red_plan *p, int64_t o, int64_t r) {
    int64_t off = 0;
    for (int d = p->nk - 1; d >= 0; d--) {
        off += o % p->kdims[d] * p->kstr[d];
        o /= p->kdims[d];
    }
    for (int d = p->nr - 1; d >= 0; d--) {
        off += r % p->rdims[d] * p->rstr[d];
        r /= p->rdims[d];
    }
    return off;
}

/* v beats best: greater (less for min), or a NaN over a number */
static int beats(int min, double v, double best) { return (min ? v < best : v > best) || (isnan(v) && !isnan(best)); }

int pardo_cuda_launch_reduce(int kind, int f64, const void *x, void *y, const pardo_cuda_red_plan *p, char *err,
                             size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t o = 0; o < p->out_numel; o++) {
        double acc = kind == PARDO_CU_REDUCE_MAX ? -HUGE_VAL : kind == PARDO_CU_REDUCE_MIN ? HUGE_VAL : 0.0;
        for (int64_t r = 0; r < p->count; r++) {
            const double v = get(f64, x, red_offset(p, o, r));
            if (kind == PARDO_CU_REDUCE_MAX || kind == PARDO_CU_REDUCE_MIN)
                acc = beats(kind == PARDO_CU_REDUCE_MIN, v, acc) ? v : acc;
            else
                acc += v;
        }
        put(f64, y, o, kind == PARDO_CU_REDUCE_MEAN ? acc / (double)p->count : acc);
    }
    return 0;
}

int pardo_cuda_launch_reduce_grad(int kind, int f64, const void *x, const void *dy, void *dx,
                                  const pardo_cuda_red_plan *p, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t o = 0; o < p->out_numel; o++) {
        const double g = get(f64, dy, o);
        int64_t best = 0;
        for (int64_t r = 1; r < p->count; r++)
            if (beats(kind == PARDO_CU_REDUCE_MIN, get(f64, x, red_offset(p, o, r)),
                      get(f64, x, red_offset(p, o, best))))
                best = r;
        for (int64_t r = 0; r < p->count; r++) {
            double d = g;
            if (kind == PARDO_CU_REDUCE_MEAN) d = g / (double)p->count;
            if (kind == PARDO_CU_REDUCE_MAX || kind == PARDO_CU_REDUCE_MIN) d = r == best ? g : 0.0;
            put(f64, dx, red_offset(p, o, r), d);
        }
    }
    return 0;
}

int pardo_cuda_launch_argmax(int min, int last, int f64, const void *x, int64_t *y, int64_t outer, int64_t n,
                             int64_t inner, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0;
            for (int64_t k = 1; k < n; k++) {
                const double v = get(f64, x, (o * n + k) * inner + i), b = get(f64, x, (o * n + best) * inner + i);
                if (last ? !beats(min, b, v) : beats(min, v, b)) best = k;
            }
            y[o * inner + i] = best;
        }
    return 0;
}

/* ---- mse_loss, dropout and their gradients ---- */

int pardo_cuda_launch_mse(int f64, const void *p, const void *t, int64_t n, int red, void *y, double *partials,
                          char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = get(f64, p, i) - get(f64, t, i);
        if (red == PARDO_CU_RED_NONE) put(f64, y, i, d * d);
        s += d * d;
    }
    if (red != PARDO_CU_RED_NONE) partials[0] = s; /* the scratch is the kernel's to use */
    if (red == PARDO_CU_RED_SUM) put(f64, y, 0, s);
    if (red == PARDO_CU_RED_MEAN) put(f64, y, 0, n > 0 ? s / (double)n : 0.0);
    return 0;
}

int pardo_cuda_launch_mse_grad(int f64, const void *p, const void *t, const void *dl, int64_t n, int red, void *dp,
                               void *dt, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t i = 0; i < n; i++) {
        const double w = red == PARDO_CU_RED_NONE ? get(f64, dl, i) : get(f64, dl, 0);
        const double g = 2.0 * (get(f64, p, i) - get(f64, t, i)) * w / (red == PARDO_CU_RED_MEAN ? (double)n : 1.0);
        if (dp) put(f64, dp, i, g);
        if (dt) put(f64, dt, i, -g);
    }
    return 0;
}

int pardo_cuda_launch_dropout(int f64, const void *in, const uint8_t *mask_in, uint64_t key, double ratio, double scale,
                              int training, void *out, uint8_t *mask_out, int64_t n, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    for (int64_t i = 0; i < n; i++) {
        const bool keep = !training || (mask_in ? mask_in[i] != 0 : pardo_dropout_keep(key, i, ratio));
        put(f64, out, i, !training ? get(f64, in, i) : keep ? get(f64, in, i) * scale : 0.0);
        if (mask_out) mask_out[i] = keep;
    }
    return 0;
}
