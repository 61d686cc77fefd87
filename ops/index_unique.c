/* index_unique.c - ops whose output's size is known only once the data is
 * read, as ONNX's:
 *
 * unique (X; attrs axis, absent: X flattened, sorted 1): the distinct
 * slices of X along axis (elements when flattened), Y, ascending (slices
 * compared in order of their elements, X with axis moved to the front) when
 * sorted, else in order of first appearance; indices (int64) the first
 * place of each in X, inverse_indices (int64) the place in Y of each slice
 * of X, counts (int64) how often each appears (ONNX Unique-11). NaN equals
 * NaN and sorts above every number, as numpy's unique does.
 * non_zero (X): the indices of X's non-zero elements, int64 [rank, nnz], in
 * row-major order (ONNX NonZero; a scalar as numpy's [1] array).
 *
 * Inference gives the data-dependent dim as -1. Any dtype; not
 * differentiable. One thread; unique's order, groups and merge room are its
 * thread's scratch (ops/scratch.h): the steady state allocates nothing but
 * the outputs. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "op.h"
#include "scratch.h"

/* ---- unique ---- */

static const pardo_arg_def unique_in[] = {{"X", "any dtype", false, false}};
static const pardo_arg_def unique_out[] = {
    {"Y", "X's dtype: the distinct slices along axis (elements of X flattened when axis is absent)", false, false},
    {"indices", "int64 [U]: the first place of each of Y's slices in X", true, false},
    {"inverse_indices", "int64 [X's dim at axis, or X's numel]: each slice's place in Y", true, false},
    {"counts", "int64 [U]: how often each of Y's slices appears in X", true, false},
};
static const pardo_attr_def unique_attrs[] = {
    {"axis", PARDO_ATTR_INT, "null", "the dim whose slices are compared; absent: X flattened"},
    {"sorted", PARDO_ATTR_BOOL, "true", "Y ascending; false: in order of first appearance"},
};

/* X seen as [outer, n, inner]: n slices of outer * inner elements each. */
typedef struct unique_view {
    const void *data;
    pardo_dtype dtype;
    int64_t outer, n, inner;
} unique_view;

/* Three-way comparison of elements a and b of v's data (NaN equal to NaN, above all numbers). */
static int elem_cmp(const unique_view *v, int64_t a, int64_t b) {
    switch (v->dtype) {
    case PARDO_F32: {
        const float x = ((const float *)v->data)[a], y = ((const float *)v->data)[b];
        if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
        return (x > y) - (x < y);
    }
    case PARDO_F64: {
        const double x = ((const double *)v->data)[a], y = ((const double *)v->data)[b];
        if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
        return (x > y) - (x < y);
    }
    case PARDO_I32: {
        const int32_t x = ((const int32_t *)v->data)[a], y = ((const int32_t *)v->data)[b];
        return (x > y) - (x < y);
    }
    case PARDO_I64: {
        const int64_t x = ((const int64_t *)v->data)[a], y = ((const int64_t *)v->data)[b];
        return (x > y) - (x < y);
    }
    default: {
        const unsigned char x = ((const unsigned char *)v->data)[a] != 0, y = ((const unsigned char *)v->data)[b] != 0;
        return (x > y) - (x < y);
    }
    }
}

/* Slices i and j compared element by element in row-major order of the rest of X. */
static int slice_cmp(const unique_view *v, int64_t i, int64_t j) {
    for (int64_t o = 0; o < v->outer; o++) {
        const int64_t bi = (o * v->n + i) * v->inner, bj = (o * v->n + j) * v->inner;
        for (int64_t q = 0; q < v->inner; q++) {
            const int c = elem_cmp(v, bi + q, bj + q);
            if (c) return c;
        }
    }
    return 0;
}

/* Sorts idx[0..n) by slice (stable: equal slices keep their order), bottom-up merge through tmp. */
static void sort_slices(const unique_view *v, int64_t *idx, int64_t *tmp, int64_t n) {
    int64_t *src = idx, *dst = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            const int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) dst[k++] = slice_cmp(v, src[b], src[a]) < 0 ? src[b++] : src[a++];
            while (a < mid) dst[k++] = src[a++];
            while (b < hi) dst[k++] = src[b++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx) memcpy(idx, src, sizeof(int64_t) * (size_t)n);
}

static int unique_check(const pardo_op *op, const pardo_type *x, bool *has_axis, int *axis, bool *sorted,
                        pardo_status *st) {
    int64_t a;
    int rc = pardo_attr_int(op, "axis", 0, &a, st);
    if (rc == PARDO_OK) rc = pardo_attr_bool(op, "sorted", true, sorted, st);
    if (rc != PARDO_OK) return rc;
    *has_axis = pardo_attr(op, "axis") != NULL;
    *axis = 0;
    if (!*has_axis || x->ndim < 0) return PARDO_OK;
    if (x->ndim == 0) return pardo_errorf(st, PARDO_EINVAL, "input 0 'X' is a scalar, so it has no axis");
    return pardo_normalize_axis(a, x->ndim, "axis", axis, st);
}

static int unique_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    bool has_axis, sorted;
    int axis;
    int rc = unique_check(ctx->op, x, &has_axis, &axis, &sorted, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t n = -1;
    if (has_axis && x->ndim > 0) {
        n = x->shape[axis];
    } else if (x->ndim >= 0) {
        n = 1;
        for (int d = 0; d < x->ndim && n >= 0; d++) n = x->shape[d] < 0 ? -1 : n * x->shape[d];
    }
    ctx->out[0] = *x;
    if (!has_axis) ctx->out[0].ndim = 1, ctx->out[0].shape[0] = -1;
    else if (x->ndim > 0) ctx->out[0].shape[axis] = -1;
    for (int k = 1; k < ctx->n_out && k < 4; k++)
        ctx->out[k] = (pardo_type){.dtype = PARDO_I64, .ndim = 1, .shape = {k == 2 ? n : -1}};
    return PARDO_OK;
}

static int unique_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0];
    pardo_type tx = pardo_tensor_type(x);
    bool has_axis, sorted;
    int axis;
    int rc = unique_check(ctx->op, &tx, &has_axis, &axis, &sorted, ctx->st);
    if (rc != PARDO_OK) return rc;
    unique_view v = {pardo_tensor_data(x), x->dtype, 1, x->numel, 1};
    if (has_axis) {
        v.n = x->shape[axis];
        for (int d = 0; d < axis; d++) v.outer *= x->shape[d];
        for (int d = axis + 1; d < x->ndim; d++) v.inner *= x->shape[d];
    }
    const int64_t n = v.n;
    /* order: slices sorted; group: each slice's group (by sorted rank); tmp: merge room, then group firsts */
    int64_t *order = pardo_scratch_get(PARDO_SCRATCH_STATS, sizeof(int64_t) * (size_t)(3 * n + 1));
    if (!order) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %lld slices", (long long)n);
    int64_t *group = order + n, *tmp = group + n;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    sort_slices(&v, order, tmp, n);
    int64_t u = 0;
    for (int64_t r = 0; r < n; r++) {
        if (r == 0 || slice_cmp(&v, order[r - 1], order[r]) != 0) tmp[u++] = order[r]; /* first of a group */
        group[order[r]] = u - 1;
    }
    /* tmp[g]: the first place of sorted group g (stable sort: the lowest index). Unsorted: groups renumbered
     * by first appearance, found walking X in order. */
    if (!sorted) {
        int64_t *first = order; /* order is no longer needed: first[g] = new number of group g, -1 unseen */
        for (int64_t g = 0; g < u; g++) first[g] = -1;
        int64_t next = 0;
        for (int64_t i = 0; i < n; i++) {
            const int64_t g = group[i];
            if (first[g] < 0) first[g] = next, tmp[next++] = i;
            group[i] = first[g];
        }
    }
    int64_t shape[PARDO_MAX_DIMS] = {u};
    int nd = 1;
    if (has_axis) {
        nd = x->ndim;
        memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
        shape[axis] = u;
    }
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, nd, shape);
    if (!y) return ctx->st->code;
    const size_t es = pardo_dtype_size(x->dtype), row = (size_t)v.inner * es;
    const char *src = v.data;
    char *dst = pardo_tensor_data(y);
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t g = 0; g < u; g++)
            memcpy(dst + (size_t)(o * u + g) * row, src + (size_t)(o * n + tmp[g]) * row, row);
    const int64_t len[3] = {u, n, u};
    for (int k = 1; k < ctx->n_out && k < 4; k++) {
        if (!pardo_kernel_wants_output(ctx, k)) continue;
        pardo_tensor *t = pardo_kernel_output(ctx, k, PARDO_I64, 1, &len[k - 1]);
        if (!t) return ctx->st->code;
        int64_t *o = pardo_tensor_data(t);
        if (k == 1) memcpy(o, tmp, sizeof(int64_t) * (size_t)u);
        else if (k == 2) memcpy(o, group, sizeof(int64_t) * (size_t)n);
        else {
            memset(o, 0, sizeof(int64_t) * (size_t)u);
            for (int64_t i = 0; i < n; i++) o[group[i]]++;
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_unique = {
    .type = "unique",
    .doc = "the distinct slices of X along axis (or elements), sorted or in order of first appearance, with their "
           "first places, each slice's place among them and their counts (ONNX Unique)",
    .inputs = unique_in,
    .n_inputs = 1,
    .outputs = unique_out,
    .n_outputs = 4,
    .attrs = unique_attrs,
    .n_attrs = 2,
    .infer = unique_infer,
    .cpu = unique_cpu,
};

/* ---- non_zero ---- */

static const pardo_arg_def nz_in[] = {{"X", "any dtype", false, false}};
static const pardo_arg_def nz_out[] = {
    {"Y", "int64 [rank (1 for a scalar), nnz]: row d the index along dim d of each non-zero element", false, false}};

static int nz_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0];
    ctx->out[0] = (pardo_type){.dtype = PARDO_I64, .ndim = 2, .shape = {x->ndim < 0 ? -1 : x->ndim ? x->ndim : 1, -1}};
    return PARDO_OK;
}

static bool nz_at(const pardo_tensor *x, const void *data, int64_t i) {
    switch (x->dtype) {
    case PARDO_F32: return ((const float *)data)[i] != 0;
    case PARDO_F64: return ((const double *)data)[i] != 0;
    case PARDO_I32: return ((const int32_t *)data)[i] != 0;
    case PARDO_I64: return ((const int64_t *)data)[i] != 0;
    default: return ((const unsigned char *)data)[i] != 0;
    }
}

static int nz_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *x = ctx->in[0];
    const void *data = pardo_tensor_data(x);
    int64_t nnz = 0;
    for (int64_t i = 0; i < x->numel; i++) nnz += nz_at(x, data, i);
    const int rank = x->ndim ? x->ndim : 1;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_I64, 2, (int64_t[]){rank, nnz});
    if (!y) return ctx->st->code;
    int64_t *o = pardo_tensor_data(y), idx[PARDO_MAX_DIMS] = {0}, k = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        if (nz_at(x, data, i)) {
            for (int d = 0; d < rank; d++) o[d * nnz + k] = idx[d];
            k++;
        }
        for (int d = x->ndim - 1; d >= 0; d--) { /* the odometer's next index */
            if (++idx[d] < x->shape[d]) break;
            idx[d] = 0;
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_non_zero = {
    .type = "non_zero",
    .doc = "the indices of X's non-zero elements, [rank, nnz] in row-major order (ONNX NonZero)",
    .inputs = nz_in,
    .n_inputs = 1,
    .outputs = nz_out,
    .n_outputs = 1,
    .infer = nz_infer,
    .cpu = nz_cpu,
};
