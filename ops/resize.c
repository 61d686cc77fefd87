/* resize.c - resize, ONNX's Resize (opset 11-18 without antialias and
 * axes): X (float32 or float64, any rank) interpolated separably along
 * every dim to the output size that the run-time input sizes (int32/int64,
 * one per dim) gives, or else scales (float, one per dim; size floor(in *
 * scale)). Attrs as ONNX's: mode nearest (nearest_mode round_prefer_floor,
 * round_prefer_ceil, floor, ceil), linear or cubic (cubic_coeff_a,
 * exclude_outside); coordinate_transformation_mode half_pixel, asymmetric,
 * align_corners, pytorch_half_pixel, tf_half_pixel_for_nn or
 * tf_crop_and_resize (input roi [2 * rank], extrapolation_value outside
 * it). Source coordinates and weights are ONNX's reference ones, in double;
 * taps past the edge read the edge element. The output's dims are known
 * only at run time. Not differentiable. Single-threaded; no allocation
 * beyond the output. */
#include <math.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

typedef enum rs_mode { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;
typedef enum rs_coord { RS_HALF_PIXEL, RS_ASYMMETRIC, RS_ALIGN_CORNERS, RS_PYTORCH_HALF_PIXEL, RS_TF_HALF_PIXEL_NN,
                        RS_TF_CROP } rs_coord;
typedef enum rs_nearest { RS_ROUND_FLOOR, RS_ROUND_CEIL, RS_FLOOR, RS_CEIL } rs_nearest;

typedef struct rs_attrs {
    rs_mode mode;
    rs_coord coord;
    rs_nearest nearest;
    double a;          // cubic coefficient
    bool exclude;      // exclude_outside
    double extrap;     // extrapolation value (tf_crop_and_resize)
} rs_attrs;

static const pardo_attr_def rs_attr_defs[] = {
    {"mode", PARDO_ATTR_STRING, "\"nearest\"", "\"nearest\", \"linear\" or \"cubic\""},
    {"coordinate_transformation_mode", PARDO_ATTR_STRING, "\"half_pixel\"",
     "half_pixel, asymmetric, align_corners, pytorch_half_pixel, tf_half_pixel_for_nn or tf_crop_and_resize"},
    {"nearest_mode", PARDO_ATTR_STRING, "\"round_prefer_floor\"", "round_prefer_floor, round_prefer_ceil, floor, ceil"},
    {"cubic_coeff_a", PARDO_ATTR_FLOAT, "-0.75", "the cubic kernel's a"},
    {"exclude_outside", PARDO_ATTR_INT, "0", "1: taps outside X get weight 0, the others renormalised"},
    {"extrapolation_value", PARDO_ATTR_FLOAT, "0", "the value outside roi (tf_crop_and_resize)"},
};

/* The index of s in the n names, or -1. */
static int rs_pick(const char *s, const char *const *names, int n) {
    for (int k = 0; k < n; k++)
        if (strcmp(s, names[k]) == 0) return k;
    return -1;
}

static int rs_attrs_get(const pardo_op *op, rs_attrs *at, pardo_status *st) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                         "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *m, *c, *nm;
    int64_t ex;
    int rc = pardo_attr_string(op, "mode", "nearest", &m, st);
    if (rc == PARDO_OK) rc = pardo_attr_string(op, "coordinate_transformation_mode", "half_pixel", &c, st);
    if (rc == PARDO_OK) rc = pardo_attr_string(op, "nearest_mode", "round_prefer_floor", &nm, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "cubic_coeff_a", -0.75, &at->a, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "exclude_outside", 0, &ex, st);
    if (rc == PARDO_OK) rc = pardo_attr_float(op, "extrapolation_value", 0, &at->extrap, st);
    if (rc != PARDO_OK) return rc;
    const int im = rs_pick(m, modes, 3), ic = rs_pick(c, coords, 6), in = rs_pick(nm, nearests, 4);
    if (im < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'mode' is \"%s\", expected nearest, linear or cubic", m);
    if (ic < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'coordinate_transformation_mode' is \"%s\", unknown", c);
    if (in < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'nearest_mode' is \"%s\", unknown", nm);
    at->mode = (rs_mode)im;
    at->coord = (rs_coord)ic;
    at->nearest = (rs_nearest)in;
    at->exclude = ex != 0;
    return PARDO_OK;
}

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
static const pardo_dtype size_dtypes[] = {PARDO_I32, PARDO_I64};

static const pardo_arg_def rs_in[] = {
    {"X", "float32 or float64, any rank", false, false},
    {"roi", "float [2 * rank]: starts then ends, normalised (tf_crop_and_resize only; may be empty)", true, false},
    {"scales", "float [rank] (or empty when sizes is given)", true, false},
    {"sizes", "int32 or int64 [rank]: the output's dims", true, false},
};
static const pardo_arg_def rs_out[] = {{"Y", "X's dtype and rank; dims from sizes or scales", false, false}};

static int rs_infer(pardo_infer_ctx *ctx) {
    rs_attrs at;
    const pardo_type *x = ctx->in[0], *roi = pardo_nn_in_type(ctx, 1), *sc = pardo_nn_in_type(ctx, 2),
                     *sz = pardo_nn_in_type(ctx, 3);
    int rc = rs_attrs_get(ctx->op, &at, ctx->st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK && roi) rc = pardo_expect_dtype(roi, "input 1 'roi'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK && sc) rc = pardo_expect_dtype(sc, "input 2 'scales'", float_dtypes, 2, ctx->st);
    if (rc == PARDO_OK && sz) rc = pardo_expect_dtype(sz, "input 3 'sizes'", size_dtypes, 2, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (!sc && !sz) return pardo_errorf(ctx->st, PARDO_EINVAL, "resize needs input 2 'scales' or input 3 'sizes'");
    ctx->out[0].dtype = x->dtype;
    ctx->out[0].ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) ctx->out[0].shape[d] = -1;
    return PARDO_OK;
}

/* The run's per-dim geometry. */
typedef struct rs_job {
    int nd;
    int64_t in[PARDO_MAX_DIMS], out[PARDO_MAX_DIMS], stride[PARDO_MAX_DIMS]; // dims; X's strides (elements)
    double scale[PARDO_MAX_DIMS];                                              // output / input along each dim
    double roi0[PARDO_MAX_DIMS], roi1[PARDO_MAX_DIMS];                         // tf_crop_and_resize's box
    rs_attrs at;
} rs_job;

/* Reads the float or int tensor t's element i as a double. */
static double rs_get(const pardo_tensor *t, int64_t i) { return pardo_tensor_get_f64(t, i); }

/* Fills jb's sizes from the run-time inputs; PARDO_EINVAL for missing or
 * mis-sized ones, nonpositive sizes or scales. */
static int rs_job_init(rs_job *jb, pardo_kernel_ctx *ctx) {
    const pardo_tensor *x = ctx->in[0], *roi = pardo_nn_in(ctx, 1), *sc = pardo_nn_in(ctx, 2),
                       *sz = pardo_nn_in(ctx, 3);
    pardo_status *st = ctx->st;
    jb->nd = x->ndim;
    int64_t s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        jb->in[d] = x->shape[d];
        jb->stride[d] = s;
        s *= x->shape[d];
    }
    const bool use_sizes = sz && sz->numel > 0;
    const pardo_tensor *spec = use_sizes ? sz : sc;
    if (!spec || spec->numel != x->ndim)
        return pardo_errorf(st, PARDO_EINVAL, "resize: input %s has %lld values, expected one per dim of X (%d)",
                            use_sizes ? "3 'sizes'" : "2 'scales'", spec ? (long long)spec->numel : 0LL, x->ndim);
    for (int d = 0; d < x->ndim; d++) {
        const double v = rs_get(spec, d);
        if (use_sizes) {
            if (v < 0) return pardo_errorf(st, PARDO_EINVAL, "resize: sizes[%d] is %g, negative", d, v);
            jb->out[d] = (int64_t)v;
            jb->scale[d] = jb->in[d] ? v / (double)jb->in[d] : 1.0;
        } else {
            if (!(v > 0)) return pardo_errorf(st, PARDO_EINVAL, "resize: scales[%d] is %g, expected > 0", d, v);
            jb->scale[d] = v;
            jb->out[d] = (int64_t)floor(v * (double)jb->in[d]);
        }
        jb->roi0[d] = 0;
        jb->roi1[d] = 1;
    }
    if (jb->at.coord == RS_TF_CROP) {
        if (!roi || roi->numel != 2 * x->ndim)
            return pardo_errorf(st, PARDO_EINVAL, "resize: tf_crop_and_resize needs input 1 'roi' of %d values",
                                2 * x->ndim);
        for (int d = 0; d < x->ndim; d++) {
            jb->roi0[d] = rs_get(roi, d);
            jb->roi1[d] = rs_get(roi, x->ndim + d);
        }
    }
    return PARDO_OK;
}

/* The taps of output coordinate o along dim d: *nt indices (clamped into X)
 * and weights; false when the point lies outside roi (extrapolate). */
static bool rs_taps(const rs_job *jb, int d, int64_t o, int64_t *idx, double *w, int *nt) {
    const double in = (double)jb->in[d], outw = jb->scale[d] * in, x = (double)o;
    double xo;
    switch (jb->at.coord) {
    case RS_ALIGN_CORNERS: xo = outw == 1 ? 0 : x * (in - 1) / (outw - 1); break;
    case RS_ASYMMETRIC: xo = x / jb->scale[d]; break;
    case RS_TF_CROP:
        xo = outw == 1 ? (jb->roi1[d] - jb->roi0[d]) * (in - 1) / 2
                       : x * (jb->roi1[d] - jb->roi0[d]) * (in - 1) / (outw - 1);
        xo += jb->roi0[d] * (in - 1);
        if (xo < 0 || xo > in - 1) return false;
        break;
    case RS_PYTORCH_HALF_PIXEL: xo = outw == 1 ? -0.5 : (x + 0.5) / jb->scale[d] - 0.5; break;
    case RS_TF_HALF_PIXEL_NN: xo = (x + 0.5) / jb->scale[d]; break;
    default: xo = (x + 0.5) / jb->scale[d] - 0.5; break;
    }
    const double fl = floor(xo);
    const bool integral = xo == fl;
    const double r = integral ? 1.0 : xo - fl;
    const int64_t base = (int64_t)fl;
    double c[4];
    int n, first; /* taps base + first .. base + first + n - 1 */
    if (jb->at.mode == RS_CUBIC) {
        const double a = jb->at.a, s = r + 1, t = 1 - r, u = t + 1;
        c[0] = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
        c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
        c[2] = ((a + 2) * t - (a + 3)) * t * t + 1;
        c[3] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
        n = 4;
        first = integral ? -2 : -1;
    } else {
        if (jb->at.mode == RS_LINEAR) {
            c[0] = 1 - r;
            c[1] = r;
        } else if (integral) {
            c[0] = 0;
            c[1] = 1;
        } else {
            const rs_nearest m = jb->at.nearest;
            const bool up = m == RS_ROUND_FLOOR ? r > 0.5 : m == RS_ROUND_CEIL ? r >= 0.5 : m == RS_CEIL;
            c[0] = up ? 0 : 1;
            c[1] = up ? 1 : 0;
        }
        n = 2;
        first = integral ? -1 : 0;
    }
    if (jb->at.exclude) {
        double sum = 0;
        for (int k = 0; k < n; k++) {
            const int64_t i = base + first + k;
            if (i < 0 || i >= jb->in[d]) c[k] = 0;
            sum += c[k];
        }
        for (int k = 0; k < n && sum != 0; k++) c[k] /= sum;
    }
    *nt = 0;
    for (int k = 0; k < n; k++) {
        if (c[k] == 0) continue;
        int64_t i = base + first + k;
        i = i < 0 ? 0 : i >= jb->in[d] ? jb->in[d] - 1 : i;
        idx[*nt] = i;
        w[(*nt)++] = c[k];
    }
    return true;
}

/* Defines rs_run_SUF: every output element of Y from X (type T). */
#define RS_KERNEL(SUF, T)                                                                                              \
    static void rs_run_##SUF(const rs_job *jb, const T *x, T *y, int64_t n_out) {                                      \
        int64_t oc[PARDO_MAX_DIMS] = {0}, idx[PARDO_MAX_DIMS][4];                                                      \
        double w[PARDO_MAX_DIMS][4];                                                                                   \
        int nt[PARDO_MAX_DIMS], tc[PARDO_MAX_DIMS];                                                                    \
        for (int64_t e = 0; e < n_out; e++) {                                                                          \
            bool inside = true;                                                                                        \
            for (int d = 0; d < jb->nd && inside; d++) inside = rs_taps(jb, d, oc[d], idx[d], w[d], &nt[d]);           \
            double acc = 0;                                                                                            \
            bool any = inside;                                                                                         \
            for (int d = 0; d < jb->nd && any; d++) any = nt[d] > 0;                                                   \
            if (!inside) acc = jb->at.extrap;                                                                          \
            else if (any) {                                                                                            \
                memset(tc, 0, sizeof(int) * (size_t)jb->nd);                                                           \
                for (;;) {                                                                                             \
                    double wt = 1;                                                                                     \
                    int64_t off = 0;                                                                                   \
                    for (int d = 0; d < jb->nd; d++) {                                                                 \
                        wt *= w[d][tc[d]];                                                                             \
                        off += idx[d][tc[d]] * jb->stride[d];                                                          \
                    }                                                                                                  \
                    acc += wt * (double)x[off];                                                                        \
                    int d = jb->nd - 1;                                                                                \
                    while (d >= 0 && ++tc[d] == nt[d]) tc[d--] = 0;                                                    \
                    if (d < 0) break;                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
            y[e] = (T)acc;                                                                                             \
            for (int d = jb->nd - 1; d >= 0; d--) {                                                                    \
                if (++oc[d] < jb->out[d]) break;                                                                       \
                oc[d] = 0;                                                                                             \
            }                                                                                                          \
        }                                                                                                              \
    }

RS_KERNEL(f32, float)
RS_KERNEL(f64, double)

static int rs_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    rs_job jb;
    int rc = rs_attrs_get(ctx->op, &jb.at, ctx->st);
    if (rc == PARDO_OK && !pardo_dtype_is_float(x->dtype))
        rc = pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' is %s, expected float32 or float64",
                          pardo_dtype_name(x->dtype));
    if (rc == PARDO_OK) rc = rs_job_init(&jb, ctx);
    if (rc != PARDO_OK) return rc;
    if (x->numel == 0)
        for (int d = 0; d < jb.nd; d++)
            if (jb.out[d] > 0)
                return pardo_errorf(ctx->st, PARDO_EINVAL, "resize: X is empty, so output dim %d cannot be %lld", d,
                                    (long long)jb.out[d]);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, jb.nd, jb.out);
    if (!y) return ctx->st->code;
    if (x->dtype == PARDO_F32) rs_run_f32(&jb, pardo_tensor_data(x), pardo_tensor_data(y), y->numel);
    else rs_run_f64(&jb, pardo_tensor_data(x), pardo_tensor_data(y), y->numel);
    return PARDO_OK;
}

const pardo_op_def pardo_op_resize = {
    .type = "resize",
    .doc = "X interpolated along every dim (nearest, linear, cubic) to sizes or floor(in * scales) (ONNX Resize)",
    .inputs = rs_in,
    .n_inputs = 4,
    .outputs = rs_out,
    .n_outputs = 1,
    .attrs = rs_attr_defs,
    .n_attrs = 6,
    .infer = rs_infer,
    .cpu = rs_cpu,
    .halves_in_f32 = true,
};
