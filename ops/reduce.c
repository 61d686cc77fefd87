/* reduce.c - reductions over a set of axes, like ONNX ReduceSum/ReduceMean:
 * reduce_sum (float32, float64, int32, int64) and reduce_mean (float32,
 * float64). attr axes lists the axes (negative counts from the end; absent or
 * [] means all axes), keepdims (default true) keeps them as size-1 dims.
 * Float sums accumulate in double, integer sums in 64 bits wrapping around
 * like numpy. The mean over zero elements is NaN, like numpy. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernel_util.h"
#include "op.h"

static const pardo_arg_def x_in[] = {{"X", "input tensor", false, false}};
static const pardo_arg_def y_out[] = {{"Y", "X reduced over axes", false, false}};
static const pardo_attr_def reduce_attrs[] = {
    {"axes", PARDO_ATTR_INTS, "[]", "axes to reduce, negative from the end; [] reduces all"},
    {"keepdims", PARDO_ATTR_BOOL, "true", "keep reduced axes as size-1 dims"},
};
static const pardo_dtype sum_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};

/* Reads keepdims and marks the reduced axes of a rank-ndim input in
 * reduced[]. PARDO_EINVAL for an out-of-range or repeated axis. *all is set
 * when axes is absent or empty. ndim < 0 (unknown rank) skips the range
 * checks and leaves reduced[] unset. */
static int reduce_axes(const pardo_op *op, int ndim, bool reduced[PARDO_MAX_DIMS], bool *keepdims, bool *all,
                       pardo_status *st) {
    int64_t axes[PARDO_MAX_DIMS];
    int n;
    int rc = pardo_attr_bool(op, "keepdims", true, keepdims, st);
    if (rc == PARDO_OK) rc = pardo_attr_ints(op, "axes", axes, PARDO_MAX_DIMS, &n, st);
    if (rc != PARDO_OK) return rc;
    *all = n <= 0;
    if (ndim < 0) return PARDO_OK;
    for (int d = 0; d < ndim; d++) reduced[d] = *all;
    for (int i = 0; i < n; i++) {
        int a;
        if ((rc = pardo_normalize_axis(axes[i], ndim, "axes", &a, st)) != PARDO_OK) return rc;
        if (reduced[a])
            return pardo_errorf(st, PARDO_EINVAL, "attr 'axes' lists axis %d more than once, expected distinct axes",
                                a);
        reduced[a] = true;
    }
    return PARDO_OK;
}

/* The output shape: reduced dims become 1 (keepdims) or go. */
static void reduce_shape(int ndim, const int64_t *shape, const bool *reduced, bool keepdims, int *out_nd,
                         int64_t *out) {
    int k = 0;
    for (int d = 0; d < ndim; d++) {
        if (!reduced[d]) out[k++] = shape[d];
        else if (keepdims) out[k++] = 1;
    }
    *out_nd = k;
}

static int reduce_infer(pardo_infer_ctx *ctx, const pardo_dtype *dtypes, int n_dtypes) {
    const pardo_type *x = ctx->in[0];
    bool reduced[PARDO_MAX_DIMS], keepdims, all;
    int rc = pardo_expect_dtype(x, "input 0 'X'", dtypes, n_dtypes, ctx->st);
    if (rc == PARDO_OK) rc = reduce_axes(ctx->op, x->ndim, reduced, &keepdims, &all, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type *y = &ctx->out[0];
    y->dtype = x->dtype;
    if (x->ndim < 0) {
        y->ndim = all && !keepdims ? 0 : -1;
        return PARDO_OK;
    }
    reduce_shape(x->ndim, x->shape, reduced, keepdims, &y->ndim, y->shape);
    return PARDO_OK;
}

static int reduce_sum_infer(pardo_infer_ctx *ctx) { return reduce_infer(ctx, sum_dtypes, 4); }
static int reduce_mean_infer(pardo_infer_ctx *ctx) { return reduce_infer(ctx, sum_dtypes, 2); }

/* The input seen as kept and reduced dims, unit dims dropped and neighbours
 * of the same kind merged, with their element strides in the input. */
typedef struct red_plan {
    int nk, nr;                    // kept and reduced dims
    int64_t kdims[PARDO_MAX_DIMS]; // kept sizes, in input order (= output order)
    int64_t kstr[PARDO_MAX_DIMS];  // their input strides, in elements
    int64_t rdims[PARDO_MAX_DIMS]; // reduced sizes
    int64_t rstr[PARDO_MAX_DIMS];  // their input strides, in elements
    bool inner_kept;               // the innermost dim is kept (else reduced); it has stride 1
    int64_t out_numel;             // output elements
    int64_t count;                 // input elements reduced into each output element
} red_plan;

static void red_plan_make(int ndim, const int64_t *shape, const bool *reduced, red_plan *p) {
    int64_t cd[PARDO_MAX_DIMS], cs[PARDO_MAX_DIMS];
    bool cr[PARDO_MAX_DIMS];
    int nc = 0;
    p->out_numel = p->count = 1;
    for (int d = 0; d < ndim; d++) {
        if (reduced[d]) p->count *= shape[d];
        else p->out_numel *= shape[d];
        if (shape[d] == 1) continue;
        if (nc > 0 && cr[nc - 1] == reduced[d]) {
            cd[nc - 1] *= shape[d];
        } else {
            cd[nc] = shape[d];
            cr[nc] = reduced[d];
            nc++;
        }
    }
    if (nc == 0) { /* a single element: one kept dim of 1 */
        cd[0] = 1;
        cr[0] = false;
        nc = 1;
    }
    pardo_contiguous_strides(nc, cd, cs);
    p->nk = p->nr = 0;
    for (int i = 0; i < nc; i++) {
        if (cr[i]) {
            p->rdims[p->nr] = cd[i];
            p->rstr[p->nr++] = cs[i];
        } else {
            p->kdims[p->nk] = cd[i];
            p->kstr[p->nk++] = cs[i];
        }
    }
    p->inner_kept = !cr[nc - 1];
}

typedef void (*reduce_fn)(const red_plan *p, const void *x, void *y);

enum { RED_CHUNK = 256 }; /* accumulators on the stack when the innermost dim is kept */

/* Defines NAME, the reduction of p's input x (type T) into y, accumulating
 * in ACC and finishing each output with FIN(T, acc, count). Innermost dim
 * reduced: a contiguous sum per output element. Innermost dim kept: chunks
 * of RED_CHUNK neighbouring outputs accumulate together, so every pass over
 * the input is contiguous too. */
#define REDUCE_KERNEL(NAME, T, ACC, FIN)                                                                               \
    static void NAME(const red_plan *p, const void *vx, void *vy) {                                                    \
        const T *x = vx;                                                                                               \
        T *y = vy;                                                                                                     \
        const double cnt = (double)p->count;                                                                           \
        (void)cnt;                                                                                                     \
        if (!p->inner_kept) {                                                                                          \
            const int64_t rn = p->rdims[p->nr - 1];                                                                    \
            int64_t outer = 1;                                                                                         \
            for (int d = 0; d < p->nr - 1; d++) outer *= p->rdims[d];                                                  \
            pardo_odo ko;                                                                                              \
            pardo_odo_init(&ko, p->nk, p->kdims, p->kstr, NULL);                                                       \
            for (int64_t o = 0; o < p->out_numel; o++, pardo_odo_next(&ko)) {                                          \
                ACC acc = 0;                                                                                           \
                pardo_odo ro;                                                                                          \
                pardo_odo_init(&ro, p->nr - 1, p->rdims, p->rstr, NULL);                                               \
                for (int64_t r = 0; r < outer; r++, pardo_odo_next(&ro)) {                                             \
                    const T *px = x + ko.off[0] + ro.off[0];                                                           \
                    for (int64_t i = 0; i < rn; i++) acc += (ACC)px[i];                                                \
                }                                                                                                      \
                y[o] = FIN(T, acc, cnt);                                                                               \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        const int64_t kn = p->kdims[p->nk - 1];                                                                        \
        pardo_odo ko;                                                                                                  \
        pardo_odo_init(&ko, p->nk - 1, p->kdims, p->kstr, NULL);                                                       \
        for (int64_t ob = 0; ob < p->out_numel; ob += kn, pardo_odo_next(&ko)) {                                       \
            for (int64_t c0 = 0; c0 < kn; c0 += RED_CHUNK) {                                                           \
                const int64_t cn = kn - c0 < RED_CHUNK ? kn - c0 : RED_CHUNK;                                          \
                ACC acc[RED_CHUNK];                                                                                    \
                for (int64_t i = 0; i < cn; i++) acc[i] = 0;                                                           \
                pardo_odo ro;                                                                                          \
                pardo_odo_init(&ro, p->nr, p->rdims, p->rstr, NULL);                                                   \
                for (int64_t r = 0; r < p->count; r++, pardo_odo_next(&ro)) {                                          \
                    const T *px = x + ko.off[0] + ro.off[0] + c0;                                                      \
                    for (int64_t i = 0; i < cn; i++) acc[i] += (ACC)px[i];                                             \
                }                                                                                                      \
                for (int64_t i = 0; i < cn; i++) y[ob + c0 + i] = FIN(T, acc[i], cnt);                                 \
            }                                                                                                          \
        }                                                                                                              \
    }

#define FIN_SUM(T, acc, cnt) ((T)(acc))
#define FIN_MEAN(T, acc, cnt) ((T)((acc) / (cnt)))

REDUCE_KERNEL(sum_f32, float, double, FIN_SUM)
REDUCE_KERNEL(sum_f64, double, double, FIN_SUM)
REDUCE_KERNEL(sum_i32, int32_t, uint64_t, FIN_SUM)
REDUCE_KERNEL(sum_i64, int64_t, uint64_t, FIN_SUM)
REDUCE_KERNEL(mean_f32, float, double, FIN_MEAN)
REDUCE_KERNEL(mean_f64, double, double, FIN_MEAN)

static int reduce_cpu(pardo_kernel_ctx *ctx, const reduce_fn *kernels, int n_kernels) {
    pardo_tensor *x = ctx->in[0];
    bool reduced[PARDO_MAX_DIMS], keepdims, all;
    if (x->dtype < 0 || (int)x->dtype >= n_kernels)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 0 'X' has dtype %s, which this reduction does not take",
                            pardo_dtype_name(x->dtype));
    int rc = reduce_axes(ctx->op, x->ndim, reduced, &keepdims, &all, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t shape[PARDO_MAX_DIMS];
    int nd;
    reduce_shape(x->ndim, x->shape, reduced, keepdims, &nd, shape);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, nd, shape);
    if (!y) return ctx->st->code;
    red_plan p;
    red_plan_make(x->ndim, x->shape, reduced, &p);
    if (p.out_numel > 0) kernels[x->dtype](&p, pardo_tensor_data(x), pardo_tensor_data(y));
    return PARDO_OK;
}

static const reduce_fn sum_kernels[] = {sum_f32, sum_f64, sum_i32, sum_i64};
static const reduce_fn mean_kernels[] = {mean_f32, mean_f64};

static int reduce_sum_cpu(pardo_kernel_ctx *ctx) { return reduce_cpu(ctx, sum_kernels, 4); }
static int reduce_mean_cpu(pardo_kernel_ctx *ctx) { return reduce_cpu(ctx, mean_kernels, 2); }

const pardo_op_def pardo_op_reduce_sum = {
    .type = "reduce_sum",
    .doc = "Y = sum of X over axes (float32, float64, int32, int64)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = reduce_attrs,
    .n_attrs = 2,
    .infer = reduce_sum_infer,
    .cpu = reduce_sum_cpu,
};

const pardo_op_def pardo_op_reduce_mean = {
    .type = "reduce_mean",
    .doc = "Y = mean of X over axes (float32, float64)",
    .inputs = x_in,
    .n_inputs = 1,
    .outputs = y_out,
    .n_outputs = 1,
    .attrs = reduce_attrs,
    .n_attrs = 2,
    .infer = reduce_mean_infer,
    .cpu = reduce_mean_cpu,
};
