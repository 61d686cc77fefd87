/* window2d.c - sliding-window geometry of conv2d and the pools (see window2d.h). */
#include "window2d.h"

#include <stdio.h>

static const char *const axis_name[2] = {"height", "width"};

/* Reads attr `name` as exactly n integers into out, or leaves out alone when
 * the attr is absent. */
static int read_ints(const pardo_op *op, const char *name, int n, const char *layout, int64_t *out, pardo_status *st) {
    int64_t v[PARDO_MAX_DIMS];
    int got, rc = pardo_attr_ints(op, name, v, PARDO_MAX_DIMS, &got, st);
    if (rc != PARDO_OK) return rc;
    if (got <= 0) return PARDO_OK; /* absent or [] */
    if (got != n)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %d values, expected %d (%s)", name, got, n, layout);
    for (int i = 0; i < n; i++) out[i] = v[i];
    return PARDO_OK;
}

int pardo_window2d_attrs(const pardo_op *op, const int64_t *default_stride, bool with_dilations, pardo_window2d *w,
                         pardo_status *st) {
    int rc;
    for (int a = 0; a < 2; a++) {
        w->stride[a] = default_stride ? default_stride[a] : 1;
        w->dilation[a] = 1;
        w->pad[a] = w->pad[a + 2] = 0;
    }
    if ((rc = read_ints(op, "strides", 2, "[stride_h, stride_w]", w->stride, st)) != PARDO_OK) return rc;
    if ((rc = read_ints(op, "pads", 4, "[top, left, bottom, right]", w->pad, st)) != PARDO_OK) return rc;
    if (with_dilations && (rc = read_ints(op, "dilations", 2, "[dilation_h, dilation_w]", w->dilation, st)) != PARDO_OK)
        return rc;
    for (int a = 0; a < 2; a++) {
        if (w->stride[a] < 1)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'strides' has %lld along the %s, expected >= 1",
                                (long long)w->stride[a], axis_name[a]);
        if (w->dilation[a] < 1)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'dilations' has %lld along the %s, expected >= 1",
                                (long long)w->dilation[a], axis_name[a]);
    }
    static const char *const pad_name[4] = {"top", "left", "bottom", "right"};
    for (int i = 0; i < 4; i++)
        if (w->pad[i] < 0)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'pads' has a negative %s pad (%lld), expected >= 0",
                                pad_name[i], (long long)w->pad[i]);
    return PARDO_OK;
}

int pardo_window2d_out_size(const pardo_window2d *w, int a, int64_t n, const char *kernel_what, int64_t *out,
                            pardo_status *st) {
    if (n < 0 || w->kernel[a] < 0) {
        *out = -1;
        return PARDO_OK;
    }
    const int64_t span = (w->kernel[a] - 1) * w->dilation[a] + 1, padded = n + w->pad[a] + w->pad[a + 2];
    if (span > padded) {
        if (w->dilation[a] > 1)
            return pardo_errorf(st, PARDO_ESHAPE,
                                "%s spans %lld along the %s (size %lld, attr 'dilations' %lld), more than the input's "
                                "%lld padded by attr 'pads' (%lld + %lld)",
                                kernel_what, (long long)span, axis_name[a], (long long)w->kernel[a],
                                (long long)w->dilation[a], (long long)n, (long long)w->pad[a],
                                (long long)w->pad[a + 2]);
        return pardo_errorf(st, PARDO_ESHAPE,
                            "%s is %lld along the %s, larger than the input's %lld padded by attr 'pads' (%lld + %lld)",
                            kernel_what, (long long)span, axis_name[a], (long long)n, (long long)w->pad[a],
                            (long long)w->pad[a + 2]);
    }
    *out = (padded - span) / w->stride[a] + 1;
    return PARDO_OK;
}

/* floor(a / b) and ceil(a / b) for b > 0 and any sign of a. */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

void pardo_window2d_tap_range(const pardo_window2d *w, int a, int64_t k, int64_t n, int64_t n_out, int64_t *lo,
                              int64_t *hi) {
    /* input index i(o) = o * s - pad + k * d must lie in [0, n) */
    const int64_t off = k * w->dilation[a] - w->pad[a], s = w->stride[a];
    int64_t l = ceil_div(-off, s), h = floor_div(n - 1 - off, s) + 1;
    if (l < 0) l = 0;
    if (h > n_out) h = n_out;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

void pardo_window2d_clip(const pardo_window2d *w, int a, int64_t o, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t l = o * w->stride[a] - w->pad[a], h = l + w->kernel[a];
    *lo = l < 0 ? 0 : l;
    *hi = h > n ? n : h;
}
