/* signal.c - signal processing ops, as ONNX's (opset 17):
 *
 * dft (X; attrs axis 1, inverse false, onesided false, dft_length): the
 * discrete Fourier transform of X along axis. X is [..., 1] (real) or
 * [..., 2] (real, imaginary); the signal along axis (not the last dim) is
 * zero-padded or cut to dft_length (absent: its length n). Y is
 * [..., n or n / 2 + 1 along axis, ..., 2]: y[k] = sum_j x[j] e^(-2 pi i k j
 * / n), inverse e^(+2 pi i k j / n) / n; onesided (a real X, not inverse)
 * keeps k in [0, n / 2].
 * stft (signal, window; attrs frame_step, frame_length, onesided true): the
 * short-time transform of signal [B, L, 1 or 2]: frames of frame_length
 * (absent: the window's length, else L) samples every frame_step, each
 * multiplied by window ([frame_length]; absent: ones) and transformed as
 * dft; Y [B, 1 + (L - frame_length) / frame_step, bins, 2] with bins
 * frame_length / 2 + 1 when onesided, else frame_length.
 * hann_window, hamming_window, blackman_window (size; attrs periodic true,
 * dtype float32): [size] values a0 - a1 cos(2 pi j / N) + a2 cos(4 pi j / N)
 * with N = size when periodic, size - 1 when not (a symmetric window of one
 * value is [1]); (a0, a1, a2) = (1/2, 1/2, 0), (25/46, 21/46, 0) and (0.42,
 * 0.5, 0.08). size is an int scalar read at run time.
 * mel_weight_matrix (num_mel_bins, dft_length, sample_rate,
 * lower_edge_hertz, upper_edge_hertz; attr dtype float32): the
 * [dft_length / 2 + 1, num_mel_bins] matrix of triangular mel filters as
 * ONNX's reference computes it (mel = 2595 log10(1 + hz / 700), the
 * num_mel_bins + 2 edges spaced (high - low) / (num_mel_bins + 2) apart,
 * each edge's bin floor((dft_length + 1) hz / sample_rate)).
 *
 * float32 or float64 data, computed in double; none differentiable. dft
 * and stft split their rows (transforms) over the threads ggml's way; a row
 * of length n is a radix-2 FFT when n is a power of two, else the direct
 * O(n^2) sum, over a table of e^(2 pi i m / n) and room that are the
 * thread's scratch (ops/scratch.h): the steady state allocates nothing but
 * the outputs. The shape inference of the ops whose sizes are run-time
 * values gives those dims as -1. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn_util.h"
#include "op.h"
#include "scratch.h"

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
static const pardo_dtype int_dtypes[] = {PARDO_I32, PARDO_I64};

/* ---- the transform of one row ---- */

/* Room for a row of length n: the table cos, sin (2 pi m / n), the row's re, im and the direct sum's output. */
static double *row_room(int64_t n) {
    return pardo_scratch_get(PARDO_SCRATCH_ROWS, sizeof(double) * (size_t)(6 * n + 1));
}

static void fill_table(int64_t n, double *cs, double *sn) {
    for (int64_t m = 0; m < n; m++) {
        const double a = 2 * M_PI * (double)m / (double)n;
        cs[m] = cos(a);
        sn[m] = sin(a);
    }
}

/* In place over re, im [n]: y[k] = sum_j x[j] e^(sign 2 pi i k j / n) (sign -1 forward, +1 inverse; no 1/n).
 * cs, sn the table of n; wre, wim room of n for the direct sum. */
static void transform(int64_t n, double *re, double *im, const double *cs, const double *sn, double sign, double *wre,
                      double *wim) {
    if (n <= 1) return;
    if ((n & (n - 1)) == 0) {
        for (int64_t i = 1, j = 0; i < n; i++) { /* bit reversal */
            int64_t bit = n >> 1;
            for (; j & bit; bit >>= 1) j ^= bit;
            j ^= bit;
            if (i < j) {
                double t = re[i];
                re[i] = re[j], re[j] = t;
                t = im[i];
                im[i] = im[j], im[j] = t;
            }
        }
        for (int64_t len = 2; len <= n; len <<= 1) {
            const int64_t half = len / 2, step = n / len;
            for (int64_t b = 0; b < n; b += len)
                for (int64_t j = 0; j < half; j++) {
                    const double wr = cs[j * step], wi = sign * sn[j * step];
                    const int64_t p = b + j, q = p + half;
                    const double tr = re[q] * wr - im[q] * wi, ti = re[q] * wi + im[q] * wr;
                    re[q] = re[p] - tr, im[q] = im[p] - ti;
                    re[p] += tr, im[p] += ti;
                }
        }
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        double sr = 0, si = 0;
        int64_t m = 0; /* k * j mod n */
        for (int64_t j = 0; j < n; j++) {
            const double wr = cs[m], wi = sign * sn[m];
            sr += re[j] * wr - im[j] * wi;
            si += re[j] * wi + im[j] * wr;
            if ((m += k) >= n) m -= n;
        }
        wre[k] = sr, wim[k] = si;
    }
    memcpy(re, wre, sizeof(double) * (size_t)n);
    memcpy(im, wim, sizeof(double) * (size_t)n);
}

static double load(const void *p, pardo_dtype dt, int64_t i) {
    return dt == PARDO_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static void store(void *p, pardo_dtype dt, int64_t i, double v) {
    if (dt == PARDO_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

/* The rows of a dft or stft run: row r reads its signal through `read`, is transformed, and keeps m bins. */
typedef struct rows_job {
    const void *x;
    const void *w;   // stft's window or NULL
    void *y;
    pardo_dtype dtype;
    int64_t c;       // 1 real, 2 complex
    int64_t n;       // transform length
    int64_t take;    // samples read per row (the rest zero)
    int64_t m;       // bins kept
    double sign;     // -1 forward, +1 inverse
    double scale;    // 1, or 1 / n for the inverse
    /* dft: row r = (o, q): sample j at ((o * len + j) * inner + q) * c; bin k at ((o * m + k) * inner + q) * 2 */
    int64_t len, inner;
    /* stft: row r = (b, f): sample j at (b * len + f * step + j) * c; bin k at (r * m + k) * 2 */
    int64_t step, frames;
    bool stft;
    bool oom;        // a thread found no room (the job's result is void)
} rows_job;

static void rows_run(void *arg, int64_t begin, int64_t end) {
    rows_job *jb = arg;
    double *room = row_room(jb->n);
    if (!room) {
        jb->oom = true;
        return;
    }
    const int64_t n = jb->n;
    double *cs = room, *sn = cs + n, *re = sn + n, *im = re + n, *wre = im + n, *wim = wre + n;
    fill_table(n, cs, sn);
    for (int64_t r = begin; r < end; r++) {
        int64_t at, stride, out, ostride;
        if (jb->stft) {
            const int64_t b = r / jb->frames, f = r % jb->frames;
            at = (b * jb->len + f * jb->step) * jb->c, stride = jb->c;
            out = r * jb->m * 2, ostride = 2;
        } else {
            const int64_t o = r / jb->inner, q = r % jb->inner;
            at = (o * jb->len * jb->inner + q) * jb->c, stride = jb->inner * jb->c;
            out = (o * jb->m * jb->inner + q) * 2, ostride = jb->inner * 2;
        }
        for (int64_t j = 0; j < n; j++) {
            const double wj = jb->w && j < jb->take ? load(jb->w, jb->dtype, j) : 1;
            re[j] = j < jb->take ? wj * load(jb->x, jb->dtype, at + j * stride) : 0;
            im[j] = j < jb->take && jb->c == 2 ? wj * load(jb->x, jb->dtype, at + j * stride + 1) : 0;
        }
        transform(n, re, im, cs, sn, jb->sign, wre, wim);
        for (int64_t k = 0; k < jb->m; k++) {
            store(jb->y, jb->dtype, out + k * ostride, re[k] * jb->scale);
            store(jb->y, jb->dtype, out + k * ostride + 1, im[k] * jb->scale);
        }
    }
}

static int rows_go(pardo_kernel_ctx *ctx, rows_job *jb, int64_t rows) {
    jb->oom = false;
    int rc = pardo_parallel_for(ctx, rows, rows_run, jb);
    if (rc != PARDO_OK) return rc;
    if (jb->oom) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for a transform of %lld", (long long)jb->n);
    return PARDO_OK;
}

/* ---- dft ---- */

static const pardo_arg_def dft_in[] = {
    {"X", "float32 or float64 [..., 1] (real) or [..., 2] (real, imaginary)", false, false}};
static const pardo_arg_def dft_out[] = {
    {"Y", "X's dtype: X's shape with n (or n / 2 + 1) along axis and 2 last", false, false}};
static const pardo_attr_def dft_attrs[] = {
    {"axis", PARDO_ATTR_INT, "1", "the signal's dim (not the last; negative counts from the end)"},
    {"inverse", PARDO_ATTR_BOOL, "false", "the inverse transform (e^(+2 pi i k j / n) / n)"},
    {"onesided", PARDO_ATTR_BOOL, "false", "only bins 0 to n / 2 (a real X, not inverse)"},
    {"dft_length", PARDO_ATTR_INT, "null", "n: the signal zero-padded or cut to it; absent: its length"},
};

typedef struct dft_cfg {
    int axis;
    bool inverse, onesided;
    int64_t n; // -1: the axis' length (unknown at inference when -1)
    int64_t m; // bins out
} dft_cfg;

static int dft_check(const pardo_op *op, const pardo_type *x, dft_cfg *g, pardo_status *st) {
    char s[128];
    int64_t axis, len = -1;
    int rc = pardo_attr_int(op, "axis", 1, &axis, st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(op, "inverse", false, &g->inverse, st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(op, "onesided", false, &g->onesided, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "dft_length", -1, &len, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    if (pardo_attr(op, "dft_length") && len < 1)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'dft_length' is %lld, expected 1 or more", (long long)len);
    g->axis = 0;
    g->n = len;
    g->m = -1;
    if (x->ndim < 0) return PARDO_OK;
    const int64_t c = x->shape[x->ndim - 1];
    if (x->ndim < 2 || (c >= 0 && c != 1 && c != 2))
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' %s, expected [..., 1] (real) or [..., 2] (complex) of rank "
                            "2 or more", pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis >= x->ndim - 1)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'axis' is out of range for X %s: the last dim is the complex "
                            "pair", pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    g->axis = (int)axis;
    if (g->onesided && (g->inverse || c == 2))
        return pardo_errorf(st, PARDO_ENOTSUP, "attr 'onesided' with %s: only a real X's forward transform is "
                            "one-sided", g->inverse ? "inverse" : "a complex X");
    if (g->n < 0) g->n = x->shape[axis];
    g->m = g->n < 0 ? -1 : g->onesided ? g->n / 2 + 1 : g->n;
    return PARDO_OK;
}

static int dft_infer(pardo_infer_ctx *ctx) {
    dft_cfg g;
    int rc = dft_check(ctx->op, ctx->in[0], &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    if (ctx->out[0].ndim > 0) {
        ctx->out[0].shape[g.axis] = g.m;
        ctx->out[0].shape[ctx->out[0].ndim - 1] = 2;
    }
    return PARDO_OK;
}

static int dft_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *x = ctx->in[0];
    pardo_type tx = pardo_tensor_type(x);
    dft_cfg g;
    int rc = dft_check(ctx->op, &tx, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t shape[PARDO_MAX_DIMS], outer = 1, inner = 1;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[g.axis] = g.m;
    shape[x->ndim - 1] = 2;
    for (int d = 0; d < g.axis; d++) outer *= x->shape[d];
    for (int d = g.axis + 1; d < x->ndim - 1; d++) inner *= x->shape[d];
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, shape);
    if (!y) return ctx->st->code;
    const int64_t len = x->shape[g.axis];
    rows_job jb = {.x = pardo_tensor_data(x), .y = pardo_tensor_data(y), .dtype = x->dtype,
                   .c = x->shape[x->ndim - 1], .n = g.n, .take = len < g.n ? len : g.n, .m = g.m,
                   .sign = g.inverse ? 1 : -1, .scale = g.inverse ? 1.0 / (double)g.n : 1, .len = len,
                   .inner = inner};
    return rows_go(ctx, &jb, outer * inner);
}

const pardo_op_def pardo_op_dft = {
    .type = "dft",
    .doc = "the discrete Fourier transform of X along axis, real or complex ([..., 2]) in, complex out (ONNX DFT)",
    .inputs = dft_in,
    .n_inputs = 1,
    .outputs = dft_out,
    .n_outputs = 1,
    .attrs = dft_attrs,
    .n_attrs = 4,
    .infer = dft_infer,
    .cpu = dft_cpu,
};

/* ---- stft ---- */

static const pardo_arg_def stft_in[] = {
    {"signal", "float32 or float64 [B, L, 1] (real) or [B, L, 2] (complex)", false, false},
    {"window", "signal's dtype [frame_length]: each frame's weights (absent: ones)", true, false},
};
static const pardo_arg_def stft_out[] = {{"Y", "signal's dtype [B, frames, bins, 2]", false, false}};
static const pardo_attr_def stft_attrs[] = {
    {"frame_step", PARDO_ATTR_INT, NULL, "samples between the starts of two frames (1 or more)"},
    {"frame_length", PARDO_ATTR_INT, "null", "samples per frame; absent: the window's length, else L"},
    {"onesided", PARDO_ATTR_BOOL, "true", "only bins 0 to frame_length / 2 (a real signal)"},
};

typedef struct stft_cfg {
    int64_t step, t, frames, m; // -1 where unknown at inference
    bool onesided;
} stft_cfg;

static int stft_check(const pardo_op *op, const pardo_type *x, const pardo_type *w, stft_cfg *g, pardo_status *st) {
    char s[128];
    int64_t t = -1;
    int rc = pardo_attr_int(op, "frame_step", 0, &g->step, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "frame_length", -1, &t, st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(op, "onesided", true, &g->onesided, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'signal'", float_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    if (!pardo_attr(op, "frame_step")) return pardo_errorf(st, PARDO_EINVAL, "attr 'frame_step' is required");
    if (g->step < 1) return pardo_errorf(st, PARDO_EINVAL, "attr 'frame_step' is %lld, expected 1 or more",
                                         (long long)g->step);
    if (pardo_attr(op, "frame_length") && t < 1)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'frame_length' is %lld, expected 1 or more", (long long)t);
    if (x->ndim >= 0 && (x->ndim != 3 || (x->shape[2] >= 0 && x->shape[2] != 1 && x->shape[2] != 2)))
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'signal' %s, expected [B, L, 1] or [B, L, 2]",
                            pardo_shape_str(x->ndim, x->shape, s, sizeof s));
    if (w) {
        if (w->dtype != x->dtype || (w->ndim >= 0 && w->ndim != 1))
            return pardo_errorf(st, PARDO_ESHAPE, "input 1 'window' is %s %s, expected signal's dtype %s, 1-D",
                                pardo_dtype_name(w->dtype), pardo_shape_str(w->ndim, w->shape, s, sizeof s),
                                pardo_dtype_name(x->dtype));
        const int64_t wl = w->ndim == 1 ? w->shape[0] : -1;
        if (t >= 0 && wl >= 0 && wl != t)
            return pardo_errorf(st, PARDO_ESHAPE, "input 1 'window' has %lld values, attr 'frame_length' is %lld",
                                (long long)wl, (long long)t);
        if (t < 0) t = wl;
    }
    const int64_t len = x->ndim == 3 ? x->shape[1] : -1;
    if (t < 0 && !w) t = len;
    if (g->onesided && x->ndim == 3 && x->shape[2] == 2)
        return pardo_errorf(st, PARDO_ENOTSUP, "attr 'onesided' with a complex signal");
    g->t = t;
    g->m = t < 0 ? -1 : g->onesided ? t / 2 + 1 : t;
    g->frames = -1;
    if (t >= 0 && len >= 0) {
        if (len < t)
            return pardo_errorf(st, PARDO_ESHAPE, "input 0 'signal' has %lld samples, fewer than a frame's %lld",
                                (long long)len, (long long)t);
        g->frames = 1 + (len - t) / g->step;
    }
    return PARDO_OK;
}

static int stft_infer(pardo_infer_ctx *ctx) {
    stft_cfg g;
    const pardo_type *x = ctx->in[0];
    int rc = stft_check(ctx->op, x, pardo_nn_in_type(ctx, 1), &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = (pardo_type){.dtype = x->dtype, .ndim = 4,
                               .shape = {x->ndim == 3 ? x->shape[0] : -1, g.frames, g.m, 2}};
    return PARDO_OK;
}

static int stft_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *x = ctx->in[0], *w = pardo_nn_in(ctx, 1);
    pardo_type tx = pardo_tensor_type(x), tw;
    if (w) tw = pardo_tensor_type(w);
    stft_cfg g;
    int rc = stft_check(ctx->op, &tx, w ? &tw : NULL, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, 4, (int64_t[]){x->shape[0], g.frames, g.m, 2});
    if (!y) return ctx->st->code;
    rows_job jb = {.x = pardo_tensor_data(x), .w = w ? pardo_tensor_data(w) : NULL, .y = pardo_tensor_data(y),
                   .dtype = x->dtype, .c = x->shape[2], .n = g.t, .take = g.t, .m = g.m, .sign = -1, .scale = 1,
                   .len = x->shape[1], .step = g.step, .frames = g.frames, .stft = true};
    return rows_go(ctx, &jb, x->shape[0] * g.frames);
}

const pardo_op_def pardo_op_stft = {
    .type = "stft",
    .doc = "the short-time Fourier transform of signal [B, L, 1 or 2]: windowed frames every frame_step, each "
           "transformed (ONNX STFT)",
    .inputs = stft_in,
    .n_inputs = 2,
    .outputs = stft_out,
    .n_outputs = 1,
    .attrs = stft_attrs,
    .n_attrs = 3,
    .infer = stft_infer,
    .cpu = stft_cpu,
};

/* ---- windows and mel filters: outputs of a dtype attr ---- */

/* The dtype attr's type (float32 or float64) into *dt. */
static int out_dtype(const pardo_op *op, pardo_dtype *dt, pardo_status *st) {
    const char *name;
    int rc = pardo_attr_string(op, "dtype", "float32", &name, st);
    if (rc != PARDO_OK) return rc;
    *dt = pardo_dtype_from_name(name);
    if (*dt != PARDO_F32 && *dt != PARDO_F64)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'dtype' is \"%s\", expected float32 or float64", name);
    return PARDO_OK;
}

/* The int scalar input k (`what`) at run time into *v. */
static int read_int(const pardo_tensor *t, const char *what, int64_t *v, pardo_status *st) {
    pardo_type ty = pardo_tensor_type(t);
    int rc = pardo_nn_expect_scalar(&ty, what, int_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    if (t->numel != 1) return pardo_errorf(st, PARDO_ESHAPE, "%s has %lld values, expected one", what,
                                           (long long)t->numel);
    *v = t->dtype == PARDO_I32 ? *(const int32_t *)pardo_tensor_data(t) : *(const int64_t *)pardo_tensor_data(t);
    return PARDO_OK;
}

static const pardo_arg_def win_in[] = {
    {"size", "int32 or int64 scalar: the window's length (0 or more)", false, false}};
static const pardo_arg_def win_out[] = {{"Y", "[size] of attr dtype", false, false}};
static const pardo_attr_def win_attrs[] = {
    {"periodic", PARDO_ATTR_BOOL, "true", "N = size (periodic, for spectral analysis); false: N = size - 1"},
    {"dtype", PARDO_ATTR_STRING, "\"float32\"", "float32 or float64"},
};

static int win_infer(pardo_infer_ctx *ctx) {
    pardo_dtype dt;
    bool periodic;
    int rc = out_dtype(ctx->op, &dt, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "periodic", true, &periodic, ctx->st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_scalar(ctx->in[0], "input 0 'size'", int_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = (pardo_type){.dtype = dt, .ndim = 1, .shape = {-1}};
    return PARDO_OK;
}

/* The window of coefficients a[3] (a0 - a1 cos + a2 cos twice the angle). */
static int win_run(pardo_kernel_ctx *ctx, const double *a) {
    pardo_dtype dt;
    bool periodic;
    int64_t size;
    int rc = out_dtype(ctx->op, &dt, ctx->st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(ctx->op, "periodic", true, &periodic, ctx->st);
    if (rc == PARDO_OK) rc = read_int(ctx->in[0], "input 0 'size'", &size, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (size < 0) return pardo_errorf(ctx->st, PARDO_EINVAL, "input 0 'size' is %lld, expected 0 or more",
                                      (long long)size);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, dt, 1, &size);
    if (!y) return ctx->st->code;
    void *o = pardo_tensor_data(y);
    const int64_t nn = periodic ? size : size - 1;
    for (int64_t j = 0; j < size; j++) {
        const double ang = nn > 0 ? 2 * M_PI * (double)j / (double)nn : 0;
        store(o, dt, j, nn > 0 ? a[0] - a[1] * cos(ang) + a[2] * cos(2 * ang) : 1);
    }
    return PARDO_OK;
}

static int hann_cpu(pardo_kernel_ctx *ctx) { return win_run(ctx, (const double[]){0.5, 0.5, 0}); }
static int hamming_cpu(pardo_kernel_ctx *ctx) { return win_run(ctx, (const double[]){25.0 / 46, 21.0 / 46, 0}); }
static int blackman_cpu(pardo_kernel_ctx *ctx) { return win_run(ctx, (const double[]){0.42, 0.5, 0.08}); }

#define WINDOW_OP(c_name, fn, what)                                                                                \
    const pardo_op_def pardo_op_##c_name = {                                                                       \
        .type = #c_name,                                                                                           \
        .doc = what,                                                                                               \
        .inputs = win_in,                                                                                          \
        .n_inputs = 1,                                                                                             \
        .outputs = win_out,                                                                                        \
        .n_outputs = 1,                                                                                            \
        .attrs = win_attrs,                                                                                        \
        .n_attrs = 2,                                                                                              \
        .infer = win_infer,                                                                                        \
        .cpu = fn,                                                                                                 \
    };
WINDOW_OP(hann_window, hann_cpu, "the Hann window 1/2 - 1/2 cos(2 pi j / N) of size values (ONNX HannWindow)")
WINDOW_OP(hamming_window, hamming_cpu,
          "the Hamming window 25/46 - 21/46 cos(2 pi j / N) of size values (ONNX HammingWindow)")
WINDOW_OP(blackman_window, blackman_cpu,
          "the Blackman window 0.42 - 0.5 cos(2 pi j / N) + 0.08 cos(4 pi j / N) of size values (ONNX BlackmanWindow)")

static const pardo_arg_def mel_in[] = {
    {"num_mel_bins", "int32 or int64 scalar: the filters (1 or more)", false, false},
    {"dft_length", "int32 or int64 scalar: the transform's length", false, false},
    {"sample_rate", "int32 or int64 scalar: samples per second", false, false},
    {"lower_edge_hertz", "float scalar: the lowest filter's lower edge", false, false},
    {"upper_edge_hertz", "float scalar: the highest filter's upper edge", false, false},
};
static const pardo_arg_def mel_out[] = {{"Y", "[dft_length / 2 + 1, num_mel_bins] of attr dtype", false, false}};
static const pardo_attr_def mel_attrs[] = {{"dtype", PARDO_ATTR_STRING, "\"float32\"", "float32 or float64"}};

static int mel_infer(pardo_infer_ctx *ctx) {
    static const char *const what[5] = {"input 0 'num_mel_bins'", "input 1 'dft_length'", "input 2 'sample_rate'",
                                        "input 3 'lower_edge_hertz'", "input 4 'upper_edge_hertz'"};
    pardo_dtype dt;
    int rc = out_dtype(ctx->op, &dt, ctx->st);
    for (int k = 0; k < 5 && rc == PARDO_OK; k++)
        rc = pardo_nn_expect_scalar(ctx->in[k], what[k], k < 3 ? int_dtypes : float_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = (pardo_type){.dtype = dt, .ndim = 2, .shape = {-1, -1}};
    return PARDO_OK;
}

static int mel_cpu(pardo_kernel_ctx *ctx) {
    pardo_dtype dt;
    int64_t nb, len, rate;
    int rc = out_dtype(ctx->op, &dt, ctx->st);
    if (rc == PARDO_OK) rc = read_int(ctx->in[0], "input 0 'num_mel_bins'", &nb, ctx->st);
    if (rc == PARDO_OK) rc = read_int(ctx->in[1], "input 1 'dft_length'", &len, ctx->st);
    if (rc == PARDO_OK) rc = read_int(ctx->in[2], "input 2 'sample_rate'", &rate, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (nb < 1 || len < 1 || rate < 1 || nb > (1 << 20))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "num_mel_bins %lld, dft_length %lld, sample_rate %lld: expected "
                            "each 1 or more (num_mel_bins at most 2^20)", (long long)nb, (long long)len,
                            (long long)rate);
    if (ctx->in[3]->numel != 1 || ctx->in[4]->numel != 1)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "lower_edge_hertz and upper_edge_hertz must be scalars");
    const double lo = pardo_tensor_get_f64(ctx->in[3], 0), hi = pardo_tensor_get_f64(ctx->in[4], 0);
    const int64_t bins = len / 2 + 1;
    if (!(lo >= 0 && hi > lo))
        return pardo_errorf(ctx->st, PARDO_EINVAL, "lower_edge_hertz %g and upper_edge_hertz %g: expected 0 <= lower "
                            "< upper", lo, hi);
    int64_t *edge = pardo_scratch_get(PARDO_SCRATCH_STATS, sizeof(int64_t) * (size_t)(nb + 2));
    if (!edge) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %lld mel bins", (long long)nb);
    const double mlo = 2595 * log10(1 + lo / 700), mhi = 2595 * log10(1 + hi / 700);
    const double step = (mhi - mlo) / (double)(nb + 2);
    for (int64_t i = 0; i < nb + 2; i++) {
        const double hz = 700 * (pow(10, ((double)i * step + mlo) / 2595) - 1);
        edge[i] = (int64_t)floor((double)(len + 1) * hz / (double)rate);
    }
    if (edge[nb + 1] > bins || edge[nb] >= bins)
        return pardo_errorf(ctx->st, PARDO_EINVAL, "upper_edge_hertz %g is above what %lld bins of a %lld-long "
                            "transform at sample_rate %lld reach", hi, (long long)bins, (long long)len,
                            (long long)rate);
    pardo_tensor *y = pardo_nn_zeros(ctx, 0, dt, 2, (int64_t[]){bins, nb});
    if (!y) return ctx->st->code;
    void *o = pardo_tensor_data(y);
    for (int64_t i = 0; i < nb; i++) {
        const int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
        if (c == l) store(o, dt, c * nb + i, 1);
        else
            for (int64_t j = l; j <= c; j++) store(o, dt, j * nb + i, (double)(j - l) / (double)(c - l));
        for (int64_t j = c; j < h; j++) store(o, dt, j * nb + i, (double)(h - j) / (double)(h - c));
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_mel_weight_matrix = {
    .type = "mel_weight_matrix",
    .doc = "the [dft_length / 2 + 1, num_mel_bins] triangular mel filters between two edges (ONNX MelWeightMatrix)",
    .inputs = mel_in,
    .n_inputs = 5,
    .outputs = mel_out,
    .n_outputs = 1,
    .attrs = mel_attrs,
    .n_attrs = 1,
    .infer = mel_infer,
    .cpu = mel_cpu,
};
