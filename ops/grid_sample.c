/* grid_sample.c - grid_sample, ONNX's GridSample (opset 16, 2-D; PyTorch's
 * grid_sample, whose outputs the node tests hold): X [N, C, H, W] read at
 * the points of grid [N, Ho, Wo, 2] ((x, y) in [-1, 1]; align_corners 1:
 * -1 and 1 are the corner pixels' centres, 0: their outer edges) into Y
 * [N, C, Ho, Wo]. mode bilinear (default), nearest (halves to even) or
 * bicubic (a = -0.75); padding_mode zeros (points and taps outside read
 * 0), border (coordinates clamped to the edge) or reflection (mirrored at
 * the edges). float32 and float64, in double; not differentiable. One
 * thread; no allocation beyond the output. */
#include <math.h>
#include <string.h>

#include "nn_util.h"
#include "op.h"

typedef enum gs_mode { GS_BILINEAR, GS_NEAREST, GS_BICUBIC } gs_mode;
typedef enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad;

static const pardo_attr_def gs_attrs[] = {
    {"mode", PARDO_ATTR_STRING, "\"bilinear\"", "\"bilinear\", \"nearest\" or \"bicubic\""},
    {"padding_mode", PARDO_ATTR_STRING, "\"zeros\"", "\"zeros\", \"border\" or \"reflection\""},
    {"align_corners", PARDO_ATTR_INT, "0", "1: -1 and 1 are the corner pixels' centres"},
};

static int gs_attrs_get(const pardo_op *op, gs_mode *m, gs_pad *p, bool *align, pardo_status *st) {
    const char *ms, *ps;
    int64_t a;
    int rc = pardo_attr_string(op, "mode", "bilinear", &ms, st);
    if (rc == PARDO_OK) rc = pardo_attr_string(op, "padding_mode", "zeros", &ps, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "align_corners", 0, &a, st);
    if (rc != PARDO_OK) return rc;
    if (strcmp(ms, "bilinear") == 0) *m = GS_BILINEAR;
    else if (strcmp(ms, "nearest") == 0) *m = GS_NEAREST;
    else if (strcmp(ms, "bicubic") == 0) *m = GS_BICUBIC;
    else return pardo_errorf(st, PARDO_EINVAL, "attr 'mode' is \"%s\", expected bilinear, nearest or bicubic", ms);
    if (strcmp(ps, "zeros") == 0) *p = GS_ZEROS;
    else if (strcmp(ps, "border") == 0) *p = GS_BORDER;
    else if (strcmp(ps, "reflection") == 0) *p = GS_REFLECTION;
    else return pardo_errorf(st, PARDO_EINVAL, "attr 'padding_mode' is \"%s\", expected zeros, border or reflection",
                             ps);
    *align = a != 0;
    return PARDO_OK;
}

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

static const pardo_arg_def gs_in[] = {
    {"X", "[N, C, H, W] float32 or float64", false, false},
    {"grid", "[N, Ho, Wo, 2], X's dtype: (x, y) in [-1, 1]", false, false},
};
static const pardo_arg_def gs_out[] = {{"Y", "[N, C, Ho, Wo], X's dtype", false, false}};

static int gs_check(const pardo_op *op, const pardo_type *x, const pardo_type *g, pardo_type *y, pardo_status *st) {
    gs_mode m;
    gs_pad p;
    bool align;
    char s1[128], s2[128];
    int rc = gs_attrs_get(op, &m, &p, &align, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(x, "input 0 'X'", float_dtypes, 2, st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_rank(x, "input 0 'X'", 4, "[N, C, H, W]", st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_rank(g, "input 1 'grid'", 4, "[N, Ho, Wo, 2]", st);
    if (rc != PARDO_OK) return rc;
    if (g->dtype != x->dtype || (g->ndim == 4 && g->shape[3] >= 0 && g->shape[3] != 2) ||
        (g->ndim == 4 && x->ndim == 4 && g->shape[0] >= 0 && x->shape[0] >= 0 && g->shape[0] != x->shape[0]))
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'grid' is %s %s, expected %s [N, Ho, Wo, 2] for X %s",
                            pardo_dtype_name(g->dtype), pardo_shape_str(g->ndim, g->shape, s1, sizeof s1),
                            pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, s2, sizeof s2));
    *y = (pardo_type){.dtype = x->dtype, .ndim = 4};
    y->shape[0] = x->ndim == 4 ? x->shape[0] : -1;
    y->shape[1] = x->ndim == 4 ? x->shape[1] : -1;
    y->shape[2] = g->ndim == 4 ? g->shape[1] : -1;
    y->shape[3] = g->ndim == 4 ? g->shape[2] : -1;
    return PARDO_OK;
}

static int gs_infer(pardo_infer_ctx *ctx) { return gs_check(ctx->op, ctx->in[0], ctx->in[1], &ctx->out[0], ctx->st); }

/* PyTorch's reflect_coordinates: v mirrored into [lo2 / 2, hi2 / 2]. */
static double gs_reflect(double v, double lo2, double hi2) {
    if (lo2 == hi2) return 0;
    const double mn = lo2 / 2, span = (hi2 - lo2) / 2;
    v = fabs(v - mn);
    const double extra = fmod(v, span), flips = floor(v / span);
    return fmod(flips, 2) == 0 ? extra + mn : span - extra + mn;
}

/* A coordinate after the padding rule (border, reflection; zeros: as is). */
static double gs_pad_coord(double v, int64_t n, gs_pad p, bool align) {
    if (p == GS_BORDER) return fmin(fmax(v, 0), (double)(n - 1));
    if (p == GS_REFLECTION) {
        v = align ? gs_reflect(v, 0, 2.0 * (double)(n - 1)) : gs_reflect(v, -1, 2.0 * (double)n - 1);
        return fmin(fmax(v, 0), (double)(n - 1));
    }
    return v;
}

/* The run: one plane's geometry and attrs. */
typedef struct gs_job {
    int64_t h, w;
    gs_mode mode;
    gs_pad pad;
    bool align;
} gs_job;

/* plane[iy][ix], 0 outside. */
static double gs_at(const gs_job *jb, const pardo_tensor *x, int64_t base, int64_t iy, int64_t ix) {
    if (iy < 0 || iy >= jb->h || ix < 0 || ix >= jb->w) return 0;
    return pardo_tensor_get_f64(x, base + iy * jb->w + ix);
}

static double gs_cubic1(double t, double a) { return ((a + 2) * t - (a + 3)) * t * t + 1; }
static double gs_cubic2(double t, double a) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; }

/* The value at unnormalised point (fx, fy) of the plane at base. */
static double gs_sample(const gs_job *jb, const pardo_tensor *x, int64_t base, double fx, double fy) {
    if (jb->mode == GS_BICUBIC) {
        const double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0, a = -0.75;
        const double wx[4] = {gs_cubic2(tx + 1, a), gs_cubic1(tx, a), gs_cubic1(1 - tx, a), gs_cubic2(2 - tx, a)};
        const double wy[4] = {gs_cubic2(ty + 1, a), gs_cubic1(ty, a), gs_cubic1(1 - ty, a), gs_cubic2(2 - ty, a)};
        double acc = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                /* each tap goes through the padding rule, as PyTorch's get_value_bounded */
                const double py = gs_pad_coord(y0 - 1 + i, jb->h, jb->pad, jb->align),
                             px = gs_pad_coord(x0 - 1 + j, jb->w, jb->pad, jb->align);
                acc += wy[i] * wx[j] * gs_at(jb, x, base, (int64_t)floor(py), (int64_t)floor(px));
            }
        return acc;
    }
    fx = gs_pad_coord(fx, jb->w, jb->pad, jb->align);
    fy = gs_pad_coord(fy, jb->h, jb->pad, jb->align);
    if (jb->mode == GS_NEAREST) return gs_at(jb, x, base, (int64_t)nearbyint(fy), (int64_t)nearbyint(fx));
    const double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0;
    const int64_t ix = (int64_t)x0, iy = (int64_t)y0;
    return (1 - ty) * ((1 - tx) * gs_at(jb, x, base, iy, ix) + tx * gs_at(jb, x, base, iy, ix + 1)) +
           ty * ((1 - tx) * gs_at(jb, x, base, iy + 1, ix) + tx * gs_at(jb, x, base, iy + 1, ix + 1));
}

static int gs_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *g = ctx->in[1];
    pardo_type tx = pardo_tensor_type(x), tg = pardo_tensor_type(g), ty;
    gs_job jb;
    int rc = gs_check(ctx->op, &tx, &tg, &ty, ctx->st);
    if (rc == PARDO_OK) rc = gs_attrs_get(ctx->op, &jb.mode, &jb.pad, &jb.align, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, 4, ty.shape);
    if (!y) return ctx->st->code;
    jb.h = x->shape[2];
    jb.w = x->shape[3];
    const int64_t nn = x->shape[0], nc = x->shape[1], ho = g->shape[1], wo = g->shape[2];
    for (int64_t b = 0; b < nn; b++)
        for (int64_t i = 0; i < ho; i++)
            for (int64_t j = 0; j < wo; j++) {
                const int64_t at = ((b * ho + i) * wo + j) * 2;
                const double gx = pardo_tensor_get_f64(g, at), gy = pardo_tensor_get_f64(g, at + 1);
                const double fx = jb.align ? (gx + 1) / 2 * (double)(jb.w - 1) : ((gx + 1) * (double)jb.w - 1) / 2,
                             fy = jb.align ? (gy + 1) / 2 * (double)(jb.h - 1) : ((gy + 1) * (double)jb.h - 1) / 2;
                for (int64_t c = 0; c < nc; c++)
                    pardo_tensor_set_f64(y, ((b * nc + c) * ho + i) * wo + j,
                                         gs_sample(&jb, x, (b * nc + c) * jb.h * jb.w, fx, fy));
            }
    return PARDO_OK;
}

const pardo_op_def pardo_op_grid_sample = {
    .type = "grid_sample",
    .doc = "X read at grid's normalised points: bilinear, nearest or bicubic; zeros, border or reflection padding "
           "(ONNX GridSample)",
    .inputs = gs_in,
    .n_inputs = 2,
    .outputs = gs_out,
    .n_outputs = 1,
    .attrs = gs_attrs,
    .n_attrs = 3,
    .infer = gs_infer,
    .cpu = gs_cpu,
    .halves_in_f32 = true,
};
