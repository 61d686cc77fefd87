/* pool_nd.c - max_pool_nd and avg_pool_nd: ONNX MaxPool and AveragePool of
 * 1 to 3 spatial axes with dilations, X [N, C, S...] -> Y [N, C, O...], and
 * max_pool_nd's output Indices (ONNX's: the flat index into X of each
 * window's maximum, over [N, C, S...] in row-major order, or with the
 * spatial axes in column-major order for attr storage_order 1). And their
 * gradients. max_pool2d and avg_pool2d (ops/pool.c) stay the fast 2-D path
 * without dilations; these are the general ones.
 *
 * Attrs: kernel (one size per spatial axis, required), strides (default:
 * the kernel), pads (begins then ends; default zeros), dilations (default
 * ones), storage_order (max_pool_nd). Along each axis output o's window
 * reads taps j = 0..k-1 at o * stride - pad_begin + j * dilation; taps in
 * the padding are not read, and every window must hold at least one input
 * element (checked where the sizes are known). O = floor((S + pads - ((k -
 * 1) * d + 1)) / stride) + 1. avg_pool_nd divides by the number of input
 * elements in the window (ONNX's count_include_pad 0); max_pool_nd takes the
 * first maximum in row-major tap order (strict >) and its gradient routes
 * each dY there.
 *
 * The kernels run plane by plane ((n, c)) over a 3-D geometry (fewer
 * spatial axes seen with leading axes of size 1), the planes split over the
 * kernel's threads for big inputs (pardo_run_rows); each plane is one item's
 * alone, so no bits depend on the split. Within a plane they go an output
 * row at a time, tap by tap over a chunk of the row (PN_ROW_TAPS), which
 * vectorises. Nothing is allocated per call. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"
#include "window2d.h"

#define PN_DIMS 3 // spatial axes of the geometry the kernels run on

/* Sizes of one pool; -1 where unknown during inference. The spatial arrays
 * hold the op's nsp axes last, leading axes of size 1. */
typedef struct pn_geom {
    int nsp;                                        // spatial axes of X: 1..3
    int64_t n, c;                                   // batch, channels
    int64_t in[PN_DIMS], out[PN_DIMS];              // input and output sizes
    int64_t k[PN_DIMS], s[PN_DIMS], d[PN_DIMS];     // kernel taps, strides, dilations
    int64_t pb[PN_DIMS], pe[PN_DIMS];               // pads at the begin and the end
    int64_t ip, yp;                                 // elements of an input and an output plane
    bool col_major;                                 // storage_order 1: Indices with the spatial axes column-major
} pn_geom;

static const pardo_attr_def max_attrs[] = {
    {"kernel", PARDO_ATTR_INTS, NULL, "window size per spatial axis (1 to 3 of them), each >= 1"},
    {"strides", PARDO_ATTR_INTS, "[]", "one stride per spatial axis, each >= 1; [] (default): the kernel"},
    {"pads", PARDO_ATTR_INTS, "[]", "begins then ends (2 per spatial axis), each >= 0; [] (default): 0s"},
    {"dilations", PARDO_ATTR_INTS, "[]", "one dilation per spatial axis, each >= 1; [] (default): 1s"},
    {"storage_order", PARDO_ATTR_INT, "0", "Indices' order of the spatial axes: 0 row-major, 1 column-major"},
};
#define AVG_N_ATTRS 4 // avg_pool_nd: max_attrs without storage_order

/* The taps [*lo, *hi) of output o's window along axis a that read inside the input. */
static void taps(const pn_geom *g, int a, int64_t o, int64_t *lo, int64_t *hi) {
    const int64_t start = o * g->s[a] - g->pb[a], d = g->d[a];
    int64_t l = start >= 0 ? 0 : (-start + d - 1) / d, h = g->in[a] - start <= 0 ? 0 : (g->in[a] - start - 1) / d + 1;
    if (h > g->k[a]) h = g->k[a];
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Reads the attrs (storage_order when with_order) and X's type into g and
 * Y's type into y (may be NULL). Inference (dims may be -1) and kernels both
 * use it. any_order: X may have any ordered dtype (max_pool_nd's forward),
 * else float32 or float64. */
static int pn_geometry(const pardo_op *op, const pardo_type *x, bool with_order, bool any_order, pn_geom *g,
                       pardo_type *y, pardo_status *st) {
    char sx[128];
    int64_t k[PARDO_MAX_DIMS];
    int nk, rc;
    if ((rc = any_order ? pardo_expect_ordered(x, "input 0 'X'", st) : pardo_nn_expect_float(x, "input 0 'X'", st)) !=
        PARDO_OK)
        return rc;
    if ((rc = pardo_attr_ints(op, "kernel", k, PARDO_MAX_DIMS, &nk, st)) != PARDO_OK) return rc;
    if (nk < 0) return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' is required (one size per spatial axis)");
    if (nk < 1 || nk > PN_DIMS)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' has %d values, expected 1 to 3 (spatial axes)", nk);
    if (x->ndim >= 0 && x->ndim != nk + 2)
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' has shape %s, expected rank %d ([N, C] and attr "
                            "'kernel''s %d spatial axes)",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx), nk + 2, nk);
    const int nsp = nk, o = PN_DIMS - nsp;
    g->nsp = nsp;
    for (int a = 0; a < PN_DIMS; a++) {
        g->in[a] = g->k[a] = g->s[a] = g->d[a] = 1;
        g->pb[a] = g->pe[a] = 0;
    }
    for (int i = 0; i < nsp; i++) {
        if (k[i] < 1)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'kernel' has %lld at position %d, expected >= 1",
                                (long long)k[i], i);
        g->k[o + i] = g->s[o + i] = k[i];
    }
    int64_t pads[2 * PN_DIMS] = {0};
    if ((rc = pardo_nn_axis_ints(op, "strides", nsp, 1, g->s + o, st)) != PARDO_OK ||
        (rc = pardo_nn_axis_ints(op, "dilations", nsp, 1, g->d + o, st)) != PARDO_OK ||
        (rc = pardo_nn_axis_ints(op, "pads", 2 * nsp, 0, pads, st)) != PARDO_OK)
        return rc;
    for (int i = 0; i < nsp; i++) {
        g->pb[o + i] = pads[i];
        g->pe[o + i] = pads[nsp + i];
    }
    int64_t order = 0;
    if (with_order && (rc = pardo_attr_int(op, "storage_order", 0, &order, st)) != PARDO_OK) return rc;
    if (order != 0 && order != 1)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'storage_order' is %lld, expected 0 or 1", (long long)order);
    g->col_major = order == 1;
    const bool xr = x->ndim >= 0;
    g->n = xr ? x->shape[0] : -1;
    g->c = xr ? x->shape[1] : -1;
    g->ip = g->yp = 1;
    for (int a = 0; a < PN_DIMS; a++) {
        if (a >= o) g->in[a] = xr ? x->shape[2 + a - o] : -1;
        if (g->in[a] < 0) {
            g->out[a] = -1;
            continue;
        }
        const int64_t span = (g->k[a] - 1) * g->d[a] + 1, padded = g->in[a] + g->pb[a] + g->pe[a];
        if (span > padded)
            return pardo_errorf(st, PARDO_ESHAPE,
                                "attr 'kernel' spans %lld along spatial axis %d (size %lld, dilation %lld), more than "
                                "input 0 'X' %s padded by attr 'pads' (%lld + %lld)",
                                (long long)span, a - o, (long long)g->k[a], (long long)g->d[a],
                                pardo_shape_str(x->ndim, x->shape, sx, sizeof sx), (long long)g->pb[a],
                                (long long)g->pe[a]);
        g->out[a] = (padded - span) / g->s[a] + 1;
        for (int64_t u = 0; u < g->out[a]; u++) {
            int64_t lo, hi;
            taps(g, a, u, &lo, &hi);
            if (lo == hi)
                return pardo_errorf(st, PARDO_EINVAL,
                                    "output %lld along spatial axis %d reads only padding (attrs 'pads' %lld + %lld, "
                                    "'dilations' %lld, input size %lld); expected every window to hold an input "
                                    "element",
                                    (long long)u, a - o, (long long)g->pb[a], (long long)g->pe[a], (long long)g->d[a],
                                    (long long)g->in[a]);
        }
        g->ip *= g->in[a];
        g->yp *= g->out[a];
    }
    if (y) {
        y->dtype = x->dtype;
        y->ndim = nsp + 2;
        y->shape[0] = g->n;
        y->shape[1] = g->c;
        for (int i = 0; i < nsp; i++) y->shape[2 + i] = g->out[o + i];
    }
    return PARDO_OK;
}

/* One run of a pool kernel over planes, shared with the items. */
typedef struct pn_job {
    const pn_geom *g;
    const void *x, *dy;
    void *out;      // Y or dX
    int64_t *index; // max_pool_nd's Indices; NULL: not wanted
} pn_job;

/* The outputs [*lo, *hi) along axis 2 whose tap j reads inside the input (at u * s - pb + j * d), within
 * [c0, c1). */
static void outs_of_tap(const pn_geom *g, int64_t j, int64_t c0, int64_t c1, int64_t *lo, int64_t *hi) {
    const int64_t off = j * g->d[2] - g->pb[2], s = g->s[2];
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s, h = g->in[2] - off <= 0 ? 0 : (g->in[2] - off - 1) / s + 1;
    if (l < c0) l = c0;
    if (h > c1) h = c1;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* A plane offset (row-major) as ONNX's Indices spatial part: itself, or with the axes column-major. */
static int64_t order_index(const pn_geom *g, int64_t e) {
    if (!g->col_major) return e;
    const int64_t i2 = e % g->in[2], i1 = e / g->in[2] % g->in[1], i0 = e / (g->in[1] * g->in[2]);
    return (i2 * g->in[1] + i1) * g->in[0] + i0;
}

#define PN_CHUNK 256 // outputs along the last axis handled at once (their running values on the stack)

/* The kernels walk an output row (u0, u1) in chunks of outputs [c0, c1)
 * along the last axis, tap by tap in row-major tap order, each tap a loop
 * over the chunk's outputs it reads inside the input (which vectorises):
 * every output meets its taps in the order a window-by-window walk takes,
 * so max pooling keeps the first maximum and average pooling's sums add in
 * that order. PN_ROW_TAPS runs BODY for each tap with xo, the tap's plane
 * offset for output 0 of the chunk's axis (its output u reads xo + u * s2),
 * and [ua, ub), the chunk's outputs it reads. */
#define PN_ROW_TAPS(g, u0, u1, c0, c1, BODY)                                                                           \
    do {                                                                                                               \
        int64_t lo0_, hi0_, lo1_, hi1_;                                                                                \
        taps(g, 0, u0, &lo0_, &hi0_);                                                                                  \
        taps(g, 1, u1, &lo1_, &hi1_);                                                                                  \
        for (int64_t j0 = lo0_; j0 < hi0_; j0++) {                                                                     \
            const int64_t i0 = (u0) * g->s[0] - g->pb[0] + j0 * g->d[0];                                               \
            for (int64_t j1 = lo1_; j1 < hi1_; j1++) {                                                                 \
                const int64_t i1 = (u1) * g->s[1] - g->pb[1] + j1 * g->d[1];                                           \
                for (int64_t j2 = 0; j2 < g->k[2]; j2++) {                                                             \
                    int64_t ua, ub;                                                                                    \
                    outs_of_tap(g, j2, c0, c1, &ua, &ub);                                                              \
                    const int64_t xo = (i0 * g->in[1] + i1) * g->in[2] + j2 * g->d[2] - g->pb[2];                      \
                    BODY                                                                                               \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

/* Runs BODY for each chunk [c0, c1) of PN_CHUNK outputs (the last shorter) of each output row (u0, u1) of g, in
 * output order. */
#define PN_FOR_CHUNKS(g, BODY)                                                                                         \
    for (int64_t u0 = 0; u0 < (g)->out[0]; u0++)                                                                       \
        for (int64_t u1 = 0; u1 < (g)->out[1]; u1++)                                                                   \
            for (int64_t c0 = 0; c0 < (g)->out[2]; c0 += PN_CHUNK) {                                                   \
                const int64_t c1 = c0 + PN_CHUNK < (g)->out[2] ? c0 + PN_CHUNK : (g)->out[2];                          \
                BODY                                                                                                   \
            }

/* n[u - c0] = the element count of the windows of outputs [c0, c1) of row (u0, u1): axes 0 and 1's taps
 * times the last axis's taps that read inside the input (counted tap by tap: no division per output). */
static void window_counts(const pn_geom *g, int64_t u0, int64_t u1, int64_t c0, int64_t c1, double *n) {
    int64_t l0, h0, l1, h1;
    taps(g, 0, u0, &l0, &h0);
    taps(g, 1, u1, &l1, &h1);
    for (int64_t u = 0; u < c1 - c0; u++) n[u] = 0;
    for (int64_t j2 = 0; j2 < g->k[2]; j2++) {
        int64_t ua, ub;
        outs_of_tap(g, j2, c0, c1, &ua, &ub);
        for (int64_t u = ua; u < ub; u++) n[u - c0] += 1;
    }
    const double n01 = (double)((h0 - l0) * (h1 - l1));
    for (int64_t u = 0; u < c1 - c0; u++) n[u] *= n01;
}

/* One tap of max_row over outputs [ua, ub): output u reads plane offset AT. */
#define PN_MAX_TAP(T, LOAD, AT)                                                                                        \
    for (int64_t u = ua; u < ub; u++) {                                                                                \
        const T v = xp[AT];                                                                                            \
        const bool more = !seen[u - c0] || LOAD(v) > LOAD(best[u - c0]);                                               \
        best[u - c0] = more ? v : best[u - c0];                                                                        \
        at[u - c0] = more ? (AT) : at[u - c0];                                                                         \
        seen[u - c0] = true;                                                                                           \
    }

/* Defines max_pool_nd's forward for element type T (compared as LOAD(v),
 * the value it encodes) with suffix SUF: max_row_SUF (the first maximum of
 * the windows of outputs [c0, c1) of row (u0, u1): its plane offset into
 * at[u - c0], its value into best) and max_fwd_SUF (Y and Indices) over
 * planes [p0, p1). It compares and copies only: every ordered dtype gets
 * it. */
#define PN_MAX_FWD(SUF, T, LOAD)                                                                                       \
    PARDO_WINDOW2D_LOOPS static void max_row_##SUF(const pn_geom *g, const T *xp, int64_t u0, int64_t u1, int64_t c0,  \
                                                   int64_t c1, T *best, int64_t *at) {                                 \
        const int64_t s2 = g->s[2];                                                                                    \
        bool seen[PN_CHUNK]; /* a window's first tap in order is taken whatever it holds */                            \
        for (int64_t u = 0; u < c1 - c0; u++) seen[u] = false;                                                         \
        PN_ROW_TAPS(g, u0, u1, c0, c1, {                                                                               \
            if (s2 == 1)                                                                                               \
                PN_MAX_TAP(T, LOAD, xo + u)                                                                            \
            else                                                                                                       \
                PN_MAX_TAP(T, LOAD, xo + u * s2)                                                                       \
        });                                                                                                            \
    }                                                                                                                  \
    static void max_fwd_##SUF(void *arg, int64_t p0, int64_t p1) {                                                     \
        const pn_job *j = arg;                                                                                         \
        const pn_geom *g = j->g;                                                                                       \
        const T *x = j->x;                                                                                             \
        T *y = j->out, best[PN_CHUNK];                                                                                 \
        int64_t at[PN_CHUNK];                                                                                          \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const T *xp = x + pl * g->ip;                                                                              \
            int64_t e = pl * g->yp;                                                                                    \
            PN_FOR_CHUNKS(g, {                                                                                         \
                max_row_##SUF(g, xp, u0, u1, c0, c1, best, at);                                                        \
                for (int64_t u = 0; u < c1 - c0; u++, e++) {                                                           \
                    y[e] = best[u];                                                                                    \
                    if (j->index) j->index[e] = pl * g->ip + order_index(g, at[u]);                                    \
                }                                                                                                      \
            });                                                                                                        \
        }                                                                                                              \
    }

PARDO_FOR_ORDERED_DTYPES(PN_MAX_FWD)

/* Defines the other kernels of float type T with suffix SUF over planes
 * [p0, p1): max_bwd_SUF (each dY added at its window's first maximum, in
 * output order), avg_fwd_SUF (the sum in double / count), avg_bwd_SUF.
 * Each writes every element of its planes. */
#define PN_KERNELS(SUF, T)                                                                                             \
    static void max_bwd_##SUF(void *arg, int64_t p0, int64_t p1) {                                                     \
        const pn_job *j = arg;                                                                                         \
        const pn_geom *g = j->g;                                                                                       \
        const T *x = j->x, *dy = j->dy;                                                                                \
        T *dx = j->out, best[PN_CHUNK];                                                                                \
        int64_t at[PN_CHUNK];                                                                                          \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const T *xp = x + pl * g->ip;                                                                              \
            T *dxp = dx + pl * g->ip;                                                                                  \
            memset(dxp, 0, sizeof(T) * (size_t)g->ip);                                                                 \
            int64_t e = pl * g->yp;                                                                                    \
            PN_FOR_CHUNKS(g, {                                                                                         \
                max_row_##SUF(g, xp, u0, u1, c0, c1, best, at);                                                        \
                for (int64_t u = 0; u < c1 - c0; u++, e++) dxp[at[u]] += dy[e];                                        \
            });                                                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS static void avg_fwd_##SUF(void *arg, int64_t p0, int64_t p1) {                                \
        const pn_job *j = arg;                                                                                         \
        const pn_geom *g = j->g;                                                                                       \
        const T *x = j->x;                                                                                             \
        T *y = j->out;                                                                                                 \
        const int64_t s2 = g->s[2];                                                                                    \
        double sum[PN_CHUNK], cnt[PN_CHUNK];                                                                           \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            const T *xp = x + pl * g->ip;                                                                              \
            int64_t e = pl * g->yp;                                                                                    \
            PN_FOR_CHUNKS(g, {                                                                                         \
                for (int64_t u = 0; u < c1 - c0; u++) sum[u] = 0;                                                      \
                PN_ROW_TAPS(g, u0, u1, c0, c1, {                                                                       \
                    if (s2 == 1)                                                                                       \
                        for (int64_t u = ua; u < ub; u++) sum[u - c0] += (double)xp[xo + u];                           \
                    else                                                                                               \
                        for (int64_t u = ua; u < ub; u++) sum[u - c0] += (double)xp[xo + u * s2];                      \
                });                                                                                                    \
                window_counts(g, u0, u1, c0, c1, cnt);                                                                 \
                for (int64_t u = 0; u < c1 - c0; u++, e++) y[e] = (T)(sum[u] / cnt[u]);                                \
            });                                                                                                        \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS static void avg_bwd_##SUF(void *arg, int64_t p0, int64_t p1) {                                \
        const pn_job *j = arg;                                                                                         \
        const pn_geom *g = j->g;                                                                                       \
        const T *dy = j->dy;                                                                                           \
        T *dx = j->out, v[PN_CHUNK];                                                                                   \
        double cnt[PN_CHUNK];                                                                                          \
        const int64_t s2 = g->s[2];                                                                                    \
        for (int64_t pl = p0; pl < p1; pl++) {                                                                         \
            T *dxp = dx + pl * g->ip;                                                                                  \
            memset(dxp, 0, sizeof(T) * (size_t)g->ip);                                                                 \
            int64_t e = pl * g->yp;                                                                                    \
            PN_FOR_CHUNKS(g, {                                                                                         \
                window_counts(g, u0, u1, c0, c1, cnt);                                                                 \
                for (int64_t u = 0; u < c1 - c0; u++, e++) v[u] = (T)((double)dy[e] / cnt[u]);                         \
                PN_ROW_TAPS(g, u0, u1, c0, c1, {                                                                       \
                    if (s2 == 1)                                                                                       \
                        for (int64_t u = ua; u < ub; u++) dxp[xo + u] += v[u - c0];                                    \
                    else                                                                                               \
                        for (int64_t u = ua; u < ub; u++) dxp[xo + u * s2] += v[u - c0];                               \
                });                                                                                                    \
            });                                                                                                        \
        }                                                                                                              \
    }

PN_KERNELS(f32, float)
PN_KERNELS(f64, double)

typedef void (*pn_fn)(void *arg, int64_t p0, int64_t p1);

static const pardo_arg_def pn_in[] = {
    {"X", "input [N, C, spatial...] of 1 to 3 spatial axes (float32 or float64)", false, false}};
static const pardo_arg_def max_in[] = {
    {"X", "input [N, C, spatial...] of 1 to 3 spatial axes (" PARDO_ORDERED_NAMES ")", false, false}};
static const pardo_arg_def max_out[] = {
    {"Y", "output [N, C, out...]", false, false},
    {"Indices", "int64, Y's shape: the flat index into X of each window's maximum (attr storage_order)", true, false},
};
static const pardo_arg_def avg_out[] = {{"Y", "output [N, C, out...]", false, false}};

static int max_infer(pardo_infer_ctx *ctx) {
    pn_geom g;
    int rc = pn_geometry(ctx->op, ctx->in[0], true, true, &g, &ctx->out[0], ctx->st);
    if (rc == PARDO_OK && ctx->n_out > 1) {
        ctx->out[1] = ctx->out[0];
        ctx->out[1].dtype = PARDO_I64;
    }
    return rc;
}

static int avg_infer(pardo_infer_ctx *ctx) {
    pn_geom g;
    return pn_geometry(ctx->op, ctx->in[0], false, false, &g, &ctx->out[0], ctx->st);
}

/* The forward kernels by X's dtype: max pooling's for every ordered dtype, average pooling's for the floats. */
static const pn_fn max_fwd_kernels[PARDO_DTYPE_COUNT] = PARDO_ORDERED_TABLE(max_fwd);
static const pn_fn avg_fwd_kernels[PARDO_DTYPE_COUNT] = {[PARDO_F32] = avg_fwd_f32, [PARDO_F64] = avg_fwd_f64};

/* Runs the forward kernel of X's dtype (the geometry let only dtypes with one through); max: with Indices where
 * wanted. */
static int pn_run(pardo_kernel_ctx *ctx, bool max) {
    pardo_tensor *x = ctx->in[0];
    pardo_type tx = pardo_tensor_type(x), ty;
    pn_geom g;
    int rc = pn_geometry(ctx->op, &tx, max, max, &g, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, ty.ndim, ty.shape), *ix = NULL;
    if (!y) return ctx->st->code;
    if (max && ctx->n_out > 1 && pardo_kernel_wants_output(ctx, 1) &&
        !(ix = pardo_kernel_output(ctx, 1, PARDO_I64, ty.ndim, ty.shape)))
        return ctx->st->code;
    pn_job j = {.g = &g, .x = pardo_tensor_data(x), .out = pardo_tensor_data(y),
                .index = ix ? pardo_tensor_data(ix) : NULL};
    return pardo_run_rows(ctx, g.n * g.c, g.ip, (max ? max_fwd_kernels : avg_fwd_kernels)[x->dtype], &j);
}

static int max_cpu(pardo_kernel_ctx *ctx) { return pn_run(ctx, true); }
static int avg_cpu(pardo_kernel_ctx *ctx) { return pn_run(ctx, false); }

/* max_pool_nd_grad reads X and dY alone: Y and Indices are left out (""). */
static int max_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 3, st);
}

/* avg_pool_nd_grad reads X's shape and dY: Y is left out (""). */
static int avg_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_max_pool_nd = {
    .type = "max_pool_nd",
    .doc = "max pooling of 1 to 3 spatial axes (ONNX MaxPool, NC...) with dilations: the maximum of each window, and "
           "optionally its flat index into X (Indices); any numeric dtype (the gradient float32 or float64)",
    .inputs = max_in,
    .n_inputs = 1,
    .outputs = max_out,
    .n_outputs = 2,
    .attrs = max_attrs,
    .n_attrs = 5,
    .infer = max_infer,
    .cpu = max_cpu,
    .grad = max_grad_build,
    .all_dtypes = true,
};

const pardo_op_def pardo_op_avg_pool_nd = {
    .type = "avg_pool_nd",
    .doc = "average pooling of 1 to 3 spatial axes (ONNX AveragePool, NC..., count_include_pad = 0) with dilations",
    .inputs = pn_in,
    .n_inputs = 1,
    .outputs = avg_out,
    .n_outputs = 1,
    .attrs = max_attrs,
    .n_attrs = AVG_N_ATTRS,
    .infer = avg_infer,
    .cpu = avg_cpu,
    .halves_in_f32 = true,
    .grad = avg_grad_build,
};

/* ---- gradients ---- */

static const pardo_arg_def max_grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output (not read)", true, false},
    {"Indices", "the forward indices (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
    {"dIndices", "(not read: Indices has no gradient)", true, false},
};
static const pardo_arg_def avg_grad_in[] = {
    {"X", "the forward input (its shape)", false, false},
    {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def pn_grad_out[] = {{"dX", "gradient of X", true, false}};

/* The forward geometry and dY (input dy_at; when given) checked against Y's type. */
static int pn_grad_check(const pardo_op *op, const pardo_type *x, const pardo_type *dy, bool max, pn_geom *g,
                         pardo_status *st) {
    pardo_type ty;
    int rc = pn_geometry(op, x, max, false, g, &ty, st);
    if (rc == PARDO_OK && dy)
        rc = pardo_nn_expect_same(dy, max ? "input 3 'dY'" : "input 2 'dY'", &ty, "the output of the pool", st);
    return rc;
}

static int pn_grad_infer(pardo_infer_ctx *ctx, bool max) {
    pn_geom g;
    int rc = pn_grad_check(ctx->op, ctx->in[0], pardo_nn_in_type(ctx, max ? 3 : 2), max, &g, ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}
static int max_grad_infer(pardo_infer_ctx *ctx) { return pn_grad_infer(ctx, true); }
static int avg_grad_infer(pardo_infer_ctx *ctx) { return pn_grad_infer(ctx, false); }

static int pn_grad_run(pardo_kernel_ctx *ctx, bool max) {
    pardo_tensor *x = ctx->in[0], *dy = pardo_nn_in(ctx, max ? 3 : 2);
    pardo_type tx = pardo_tensor_type(x), tdy;
    if (dy) tdy = pardo_tensor_type(dy);
    pn_geom g;
    int rc = pn_grad_check(ctx->op, &tx, dy ? &tdy : NULL, max, &g, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!dy) return pardo_nn_zeros(ctx, 0, x->dtype, x->ndim, x->shape) ? PARDO_OK : ctx->st->code;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    const bool f32 = x->dtype == PARDO_F32;
    pn_fn fn = max ? (f32 ? max_bwd_f32 : max_bwd_f64) : (f32 ? avg_bwd_f32 : avg_bwd_f64);
    pn_job j = {.g = &g, .x = pardo_tensor_data(x), .dy = pardo_tensor_data(dy), .out = pardo_tensor_data(dx)};
    return pardo_run_rows(ctx, g.n * g.c, g.ip, fn, &j);
}
static int max_grad_cpu(pardo_kernel_ctx *ctx) { return pn_grad_run(ctx, true); }
static int avg_grad_cpu(pardo_kernel_ctx *ctx) { return pn_grad_run(ctx, false); }

const pardo_op_def pardo_op_max_pool_nd_grad = {
    .type = "max_pool_nd_grad",
    .doc = "gradient of max_pool_nd: each dY goes to the first maximum of its window",
    .inputs = max_grad_in,
    .n_inputs = 5,
    .outputs = pn_grad_out,
    .n_outputs = 1,
    .attrs = max_attrs,
    .n_attrs = 5,
    .infer = max_grad_infer,
    .cpu = max_grad_cpu,
};

const pardo_op_def pardo_op_avg_pool_nd_grad = {
    .type = "avg_pool_nd_grad",
    .doc = "gradient of avg_pool_nd: each dY spread evenly over the input elements of its window",
    .inputs = avg_grad_in,
    .n_inputs = 3,
    .outputs = pn_grad_out,
    .n_outputs = 1,
    .attrs = max_attrs,
    .n_attrs = AVG_N_ATTRS,
    .infer = avg_grad_infer,
    .cpu = avg_grad_cpu,
};
