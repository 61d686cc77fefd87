/* roi_align.c - roi_align, ONNX RoiAlign (forward only): X [N, C, H, W],
 * rois [R, 4] (x1, y1, x2, y2 in input-image units, X's dtype) and
 * batch_indices [R] (int64 or int32, each in [0, N)) -> Y [R, C, oH, oW].
 * Each ROI, scaled by attr spatial_scale and shifted by -0.5 with attr
 * coordinate_transformation_mode "half_pixel" (the default; 0 for
 * "output_half_pixel", which also makes the ROI at least 1 x 1), is cut into
 * oH x oW bins; each bin samples a grid of attr sampling_ratio points per
 * axis (0: ceil(roi size / bins) of them) at the grid cells' centres, each
 * sample the bilinear interpolation of X (a sample more than one pixel
 * outside X reads 0; one nearer is clamped to the border). attr mode "avg"
 * (the default) averages a bin's samples; "max" takes, as ONNX's reference
 * and onnxruntime do, the largest of the samples' weighted corner terms
 * (w * X[corner], not the interpolated values; 0 for a bin of no samples,
 * an empty ROI). The rows (r, c) are split
 * over the kernel's threads (pardo_run_rows), each one item's alone, the
 * arithmetic in double; the checked batch indices sit in a scratch buffer
 * (ops/scratch.h). Nothing is allocated per call in the steady state. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"
#include "scratch.h"

typedef struct roi_geom {
    int64_t n, c, h, w, r; // batch, channels, height, width, ROIs
    int64_t oh, ow;        // bins per ROI
    int64_t ratio;         // samples per bin and axis; 0: adaptive
    double scale, offset;  // spatial_scale, 0.5 for half_pixel
    bool max;              // mode "max"
} roi_geom;

static const pardo_attr_def roi_attrs[] = {
    {"mode", PARDO_ATTR_STRING, "\"avg\"", "\"avg\" or \"max\" over a bin's samples"},
    {"output_height", PARDO_ATTR_INT, "1", "bins along the height, >= 1"},
    {"output_width", PARDO_ATTR_INT, "1", "bins along the width, >= 1"},
    {"sampling_ratio", PARDO_ATTR_INT, "0", "samples per bin and axis, >= 0; 0: ceil(roi size / bins)"},
    {"spatial_scale", PARDO_ATTR_FLOAT, "1.0", "the ROIs' coordinates times this are X's, > 0"},
    {"coordinate_transformation_mode", PARDO_ATTR_STRING, "\"half_pixel\"",
     "\"half_pixel\" (pixel centres at +0.5) or \"output_half_pixel\" (the legacy form)"},
};

static int roi_geometry(const pardo_op *op, const pardo_type *x, const pardo_type *rois, const pardo_type *bi,
                        roi_geom *g, pardo_type *y, pardo_status *st) {
    char s1[128], s2[128];
    const char *mode, *ctm;
    int rc;
    if ((rc = pardo_nn_expect_float(x, "input 0 'X'", st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(x, "input 0 'X'", 4, "[N, C, H, W]", st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(rois, "input 1 'rois'", 2, "[R, 4]", st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(bi, "input 2 'batch_indices'", 1, "[R]", st)) != PARDO_OK)
        return rc;
    if (rois->dtype != x->dtype)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'rois' is %s but input 0 'X' is %s; expected the same dtype",
                            pardo_dtype_name(rois->dtype), pardo_dtype_name(x->dtype));
    if (bi->dtype != PARDO_I64 && bi->dtype != PARDO_I32)
        return pardo_errorf(st, PARDO_ESHAPE, "input 2 'batch_indices' is %s, expected int64 or int32",
                            pardo_dtype_name(bi->dtype));
    const int64_t r = rois->ndim == 2 ? rois->shape[0] : -1, rb = bi->ndim == 1 ? bi->shape[0] : -1;
    if (rois->ndim == 2 && rois->shape[1] >= 0 && rois->shape[1] != 4)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'rois' has shape %s, expected [R, 4] (x1, y1, x2, y2)",
                            pardo_shape_str(rois->ndim, rois->shape, s1, sizeof s1));
    if (r >= 0 && rb >= 0 && r != rb)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'rois' %s and input 2 'batch_indices' %s: expected one index "
                            "per ROI",
                            pardo_shape_str(rois->ndim, rois->shape, s1, sizeof s1),
                            pardo_shape_str(bi->ndim, bi->shape, s2, sizeof s2));
    if ((rc = pardo_attr_string(op, "mode", "avg", &mode, st)) != PARDO_OK ||
        (rc = pardo_attr_string(op, "coordinate_transformation_mode", "half_pixel", &ctm, st)) != PARDO_OK ||
        (rc = pardo_attr_int(op, "output_height", 1, &g->oh, st)) != PARDO_OK ||
        (rc = pardo_attr_int(op, "output_width", 1, &g->ow, st)) != PARDO_OK ||
        (rc = pardo_attr_int(op, "sampling_ratio", 0, &g->ratio, st)) != PARDO_OK ||
        (rc = pardo_attr_float(op, "spatial_scale", 1.0, &g->scale, st)) != PARDO_OK)
        return rc;
    g->max = strcmp(mode, "max") == 0;
    if (!g->max && strcmp(mode, "avg") != 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'mode' is \"%s\", expected \"avg\" or \"max\"", mode);
    const bool half = strcmp(ctm, "half_pixel") == 0;
    if (!half && strcmp(ctm, "output_half_pixel") != 0)
        return pardo_errorf(st, PARDO_EINVAL,
                            "attr 'coordinate_transformation_mode' is \"%s\", expected \"half_pixel\" or "
                            "\"output_half_pixel\"",
                            ctm);
    g->offset = half ? 0.5 : 0.0;
    if (g->oh < 1 || g->ow < 1)
        return pardo_errorf(st, PARDO_EINVAL, "attrs 'output_height' %lld and 'output_width' %lld, expected >= 1",
                            (long long)g->oh, (long long)g->ow);
    if (g->ratio < 0)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'sampling_ratio' is %lld, expected >= 0", (long long)g->ratio);
    if (!(g->scale > 0) || !isfinite(g->scale))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'spatial_scale' is %g, expected a finite value > 0", g->scale);
    const bool xr = x->ndim == 4;
    g->n = xr ? x->shape[0] : -1;
    g->c = xr ? x->shape[1] : -1;
    g->h = xr ? x->shape[2] : -1;
    g->w = xr ? x->shape[3] : -1;
    g->r = r >= 0 ? r : rb;
    if (y) {
        y->dtype = x->dtype;
        y->ndim = 4;
        y->shape[0] = g->r;
        y->shape[1] = g->c;
        y->shape[2] = g->oh;
        y->shape[3] = g->ow;
    }
    return PARDO_OK;
}

/* The four corners and weights of the bilinear sample at (y, x) in an h x w plane; all weights 0 where (y, x) is
 * more than one pixel outside. */
typedef struct corners {
    int64_t at[4];
    double wt[4];
} corners;

static corners sample_at(double y, double x, int64_t h, int64_t w) {
    corners k = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w) return k;
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
    if (y0 >= h - 1) {
        y0 = y1 = h - 1;
        y = (double)y0;
    } else {
        y1 = y0 + 1;
    }
    if (x0 >= w - 1) {
        x0 = x1 = w - 1;
        x = (double)x0;
    } else {
        x1 = x0 + 1;
    }
    const double ly = y - (double)y0, lx = x - (double)x0, hy = 1 - ly, hx = 1 - lx;
    k.at[0] = y0 * w + x0;
    k.at[1] = y0 * w + x1;
    k.at[2] = y1 * w + x0;
    k.at[3] = y1 * w + x1;
    k.wt[0] = hy * hx;
    k.wt[1] = hy * lx;
    k.wt[2] = ly * hx;
    k.wt[3] = ly * lx;
    return k;
}

/* Samples per bin along an axis: the ratio, or ceil(size / bins) (0 for an empty or reversed ROI). */
static int64_t grid(int64_t ratio, double size, int64_t bins) {
    if (ratio > 0) return ratio;
    const double n = ceil(size / (double)bins);
    return n > 0 ? (int64_t)n : 0;
}

typedef struct roi_job {
    const roi_geom *g;
    const void *x, *rois;
    const int64_t *bi; // batch index per ROI (read and checked before the items)
    void *y;
} roi_job;

#define ROI_KERNELS(SUF, T)                                                                                            \
    static void roi_rows_##SUF(void *arg, int64_t r0, int64_t r1) {                                                    \
        const roi_job *j = arg;                                                                                        \
        const roi_geom *g = j->g;                                                                                      \
        const T *x = j->x, *rois = j->rois;                                                                            \
        T *y = j->y;                                                                                                   \
        for (int64_t row = r0; row < r1; row++) {                                                                      \
            const int64_t r = row / g->c, c = row % g->c;                                                              \
            const T *roi = rois + 4 * r, *xp = x + (j->bi[r] * g->c + c) * g->h * g->w;                                \
            const double sw = (double)roi[0] * g->scale - g->offset, sh = (double)roi[1] * g->scale - g->offset;       \
            double rw = (double)roi[2] * g->scale - g->offset - sw, rh = (double)roi[3] * g->scale - g->offset - sh;   \
            if (g->offset == 0) {                                                                                      \
                rw = rw > 1 ? rw : 1;                                                                                  \
                rh = rh > 1 ? rh : 1;                                                                                  \
            }                                                                                                          \
            const double bh = rh / (double)g->oh, bw = rw / (double)g->ow;                                             \
            const int64_t gh = grid(g->ratio, rh, g->oh), gw = grid(g->ratio, rw, g->ow);                              \
            const double count = gh * gw > 1 ? (double)(gh * gw) : 1.0;                                                \
            T *yp = y + row * g->oh * g->ow;                                                                           \
            for (int64_t ph = 0; ph < g->oh; ph++)                                                                     \
                for (int64_t pw = 0; pw < g->ow; pw++) {                                                               \
                    double acc = g->max ? -INFINITY : 0;                                                               \
                    for (int64_t iy = 0; iy < gh; iy++) {                                                              \
                        const double sy = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;                 \
                        for (int64_t ix = 0; ix < gw; ix++) {                                                          \
                            const double sx = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;             \
                            const corners k = sample_at(sy, sx, g->h, g->w);                                           \
                            if (g->max) {                                                                              \
                                for (int q = 0; q < 4; q++) {                                                          \
                                    const double v = k.wt[q] * (double)xp[k.at[q]];                                    \
                                    acc = v > acc ? v : acc;                                                           \
                                }                                                                                      \
                            } else {                                                                                   \
                                for (int q = 0; q < 4; q++) acc += k.wt[q] * (double)xp[k.at[q]];                      \
                            }                                                                                          \
                        }                                                                                              \
                    }                                                                                                  \
                    yp[ph * g->ow + pw] = (T)(g->max ? (gh * gw > 0 ? acc : 0) : acc / count);                        \
                }                                                                                                      \
        }                                                                                                              \
    }

ROI_KERNELS(f32, float)
ROI_KERNELS(f64, double)

static const pardo_arg_def roi_in[] = {
    {"X", "input [N, C, H, W] (float32 or float64)", false, false},
    {"rois", "[R, 4]: x1, y1, x2, y2 of each ROI, X's dtype", false, false},
    {"batch_indices", "[R] int64 or int32: the image of each ROI", false, false},
};
static const pardo_arg_def roi_out[] = {{"Y", "[R, C, output_height, output_width]", false, false}};

static int roi_infer(pardo_infer_ctx *ctx) {
    roi_geom g;
    return roi_geometry(ctx->op, ctx->in[0], ctx->in[1], ctx->in[2], &g, &ctx->out[0], ctx->st);
}

static int roi_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *rois = ctx->in[1], *bi = ctx->in[2];
    pardo_type tx = pardo_tensor_type(x), tr = pardo_tensor_type(rois), tb = pardo_tensor_type(bi), ty;
    roi_geom g;
    int rc = roi_geometry(ctx->op, &tx, &tr, &tb, &g, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, 4, ty.shape);
    if (!y) return ctx->st->code;
    if (y->numel == 0) return PARDO_OK;
    if (g.h == 0 || g.w == 0)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has an empty plane (%lld x %lld) to sample",
                            (long long)g.h, (long long)g.w);
    /* the batch indices as int64, checked, in the calling thread's scratch (the items read them) */
    int64_t *bis = pardo_scratch_get(PARDO_SCRATCH_PART, sizeof(int64_t) * (size_t)g.r);
    if (!bis)
        return pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate roi_align's %lld batch indices", (long long)g.r);
    for (int64_t r = 0; r < g.r && rc == PARDO_OK; r++) {
        bis[r] = bi->dtype == PARDO_I64 ? ((const int64_t *)pardo_tensor_data(bi))[r]
                                        : ((const int32_t *)pardo_tensor_data(bi))[r];
        if (bis[r] < 0 || bis[r] >= g.n)
            rc = pardo_errorf(ctx->st, PARDO_EINVAL, "input 2 'batch_indices' has %lld for ROI %lld, expected 0 to %lld",
                              (long long)bis[r], (long long)r, (long long)(g.n - 1));
    }
    if (rc == PARDO_OK) {
        roi_job j = {.g = &g, .x = pardo_tensor_data(x), .rois = pardo_tensor_data(rois), .bi = bis,
                     .y = pardo_tensor_data(y)};
        rc = pardo_run_rows(ctx, g.r * g.c, g.oh * g.ow * 16, x->dtype == PARDO_F32 ? roi_rows_f32 : roi_rows_f64,
                            &j);
    }
    return rc;
}

const pardo_op_def pardo_op_roi_align = {
    .type = "roi_align",
    .doc = "region-of-interest align (ONNX RoiAlign, forward only): each ROI's bins averaged (or maxed) over "
           "bilinear samples of X",
    .inputs = roi_in,
    .n_inputs = 3,
    .outputs = roi_out,
    .n_outputs = 1,
    .attrs = roi_attrs,
    .n_attrs = 6,
    .infer = roi_infer,
    .cpu = roi_cpu,
    .halves_in_f32 = true,
};
