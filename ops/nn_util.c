/* nn_util.c - checks and outputs shared by the network ops (see nn_util.h). */
#include "nn_util.h"

#include <stdio.h>
#include <string.h>

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

int pardo_nn_expect_float(const pardo_type *t, const char *what, pardo_status *st) {
    return pardo_expect_dtype(t, what, float_dtypes, 2, st);
}

int pardo_nn_expect_rank(const pardo_type *t, const char *what, int ndim, const char *layout, pardo_status *st) {
    char s[128];
    if (t->ndim < 0 || t->ndim == ndim) return PARDO_OK;
    return pardo_errorf(st, PARDO_ESHAPE, "%s has shape %s, expected %s", what,
                        pardo_shape_str(t->ndim, t->shape, s, sizeof s), layout);
}

int pardo_nn_expect_same(const pardo_type *a, const char *a_what, const pardo_type *b, const char *b_what,
                         pardo_status *st) {
    bool same = a->dtype == b->dtype;
    if (same && a->ndim >= 0 && b->ndim >= 0) {
        same = a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++)
            same = a->shape[d] == b->shape[d] || a->shape[d] == -1 || b->shape[d] == -1;
    }
    if (same) return PARDO_OK;
    char sa[128], sb[128];
    return pardo_errorf(st, PARDO_ESHAPE, "%s is %s %s but %s is %s %s; expected the same dtype and shape", a_what,
                        pardo_dtype_name(a->dtype), pardo_shape_str(a->ndim, a->shape, sa, sizeof sa), b_what,
                        pardo_dtype_name(b->dtype), pardo_shape_str(b->ndim, b->shape, sb, sizeof sb));
}

int pardo_nn_expect_scalar(const pardo_type *t, const char *what, const pardo_dtype *dtypes, int n, pardo_status *st) {
    char s[128];
    int rc = pardo_expect_dtype(t, what, dtypes, n, st);
    if (rc != PARDO_OK) return rc;
    if (t->ndim < 0 || t->ndim == 0 || (t->ndim == 1 && (t->shape[0] == 1 || t->shape[0] == -1))) return PARDO_OK;
    return pardo_errorf(st, PARDO_ESHAPE, "%s has shape %s, expected a scalar ([] or [1])", what,
                        pardo_shape_str(t->ndim, t->shape, s, sizeof s));
}

pardo_tensor *pardo_nn_zeros(pardo_kernel_ctx *ctx, int i, pardo_dtype dtype, int ndim, const int64_t *shape) {
    pardo_tensor *t = pardo_kernel_output(ctx, i, dtype, ndim, shape);
    if (t && t->nbytes) memset(pardo_tensor_data(t), 0, t->nbytes);
    return t;
}

int pardo_nn_axis_ints(const pardo_op *op, const char *name, int n, int64_t lo, int64_t *out, pardo_status *st) {
    int64_t v[2 * PARDO_MAX_DIMS];
    int got, rc = pardo_attr_ints(op, name, v, 2 * PARDO_MAX_DIMS, &got, st);
    if (rc != PARDO_OK) return rc;
    if (got <= 0) return PARDO_OK;
    if (got != n)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %d values, expected %d (%s per spatial axis%s)", name, got,
                            n, strcmp(name, "pads") == 0 ? "two" : "one",
                            strcmp(name, "pads") == 0 ? ": begins, then ends" : "");
    for (int i = 0; i < n; i++) {
        if (v[i] < lo)
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %lld at position %d, expected >= %lld", name,
                                (long long)v[i], i, (long long)lo);
        out[i] = v[i];
    }
    return PARDO_OK;
}
