/* infer_util.c - helpers shared by the ops' shape inference (see op.h). */
#include <stdio.h>

#include "op.h"

/* The dtypes pardo_op_infer stops before an op without all_dtypes (those
 * after bool; the half types pass for an op with halves_in_f32); the op's
 * own inference then says which of the others it takes. */
static const char extra_dtypes[] = "uint8, int8, int16, uint16, uint32, uint64, float16 or bfloat16";
static const char extra_ints[] = "uint8, int8, int16, uint16, uint32 or uint64";

int pardo_op_infer(pardo_infer_ctx *ctx) {
    const pardo_op_def *def = ctx->op->def;
    bool halves = false; /* a half input the op takes through its float32 kernel */
    for (int k = 0; def->halves_in_f32 && k < ctx->n_in; k++)
        halves = halves || (ctx->in[k] && pardo_dtype_is_half(ctx->in[k]->dtype));
    if (!def->all_dtypes)
        for (int k = 0; k < ctx->n_in; k++)
            if (ctx->in[k] && pardo_dtype_is_extra(ctx->in[k]->dtype) &&
                !(halves && pardo_dtype_is_half(ctx->in[k]->dtype)))
                return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input %d has dtype %s, which %s does not take (it "
                                    "takes none of %s)", k, pardo_dtype_name(ctx->in[k]->dtype), def->type,
                                    def->halves_in_f32 ? extra_ints : extra_dtypes);
    int rc = halves ? pardo_op_infer_halves(ctx) : def->infer(ctx);
    if (rc != PARDO_OK || def->all_dtypes) return rc;
    for (int k = 0; k < ctx->n_out; k++)
        if (pardo_dtype_is_extra(ctx->out[k].dtype) && !(halves && pardo_dtype_is_half(ctx->out[k].dtype)))
            return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output %d would have dtype %s, which %s does not make "
                                "(it makes none of %s)", k, pardo_dtype_name(ctx->out[k].dtype), def->type,
                                def->halves_in_f32 ? extra_ints : extra_dtypes);
    return PARDO_OK;
}

int pardo_broadcast_types(const pardo_type *a, const pardo_type *b, pardo_type *out, pardo_status *st) {
    char sa[128], sb[128];
    if (a->ndim < 0 || b->ndim < 0) {
        out->ndim = -1;
        return PARDO_OK;
    }
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        int64_t d;
        if (da == db) d = da;
        else if (da == 1) d = db;
        else if (db == 1) d = da;
        else if (da == -1) d = db; /* run time must bring db (or 1, checked then) */
        else if (db == -1) d = da;
        else
            return pardo_errorf(st, PARDO_ESHAPE, "shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                                pardo_shape_str(a->ndim, a->shape, sa, sizeof sa),
                                pardo_shape_str(b->ndim, b->shape, sb, sizeof sb), i, (long long)da, (long long)db);
        out->shape[i] = d;
    }
    out->ndim = nd;
    return PARDO_OK;
}

bool pardo_dtype_listed(pardo_dtype dt, const pardo_dtype *allowed, int n) {
    for (int i = 0; i < n; i++)
        if (dt == allowed[i]) return true;
    return false;
}

int pardo_expect_dtype(const pardo_type *t, const char *what, const pardo_dtype *allowed, int n, pardo_status *st) {
    if (pardo_dtype_listed(t->dtype, allowed, n)) return PARDO_OK;
    char list[128];
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? " or " : "", pardo_dtype_name(allowed[i]));
        if (w > 0 && (size_t)w < sizeof list - used) used += (size_t)w;
    }
    return pardo_errorf(st, PARDO_ESHAPE, "%s has dtype %s, expected %s", what, pardo_dtype_name(t->dtype), list);
}

int pardo_infer_binary_same_dtype(pardo_infer_ctx *ctx, const pardo_dtype *allowed, int n) {
    const pardo_type *a = ctx->in[0], *b = ctx->in[1];
    int rc = pardo_expect_dtype(a, "input 0 'A'", allowed, n, ctx->st);
    if (rc != PARDO_OK) return rc;
    if (b->dtype != a->dtype)
        return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'B' has dtype %s, expected %s like input 0 'A'",
                            pardo_dtype_name(b->dtype), pardo_dtype_name(a->dtype));
    if ((rc = pardo_broadcast_types(a, b, &ctx->out[0], ctx->st)) != PARDO_OK) return rc;
    ctx->out[0].dtype = a->dtype;
    return PARDO_OK;
}

int pardo_normalize_axis(int64_t axis, int ndim, const char *attr, int *out, pardo_status *st) {
    int64_t a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is %lld, expected an axis in [%d, %d] for rank %d", attr,
                            (long long)axis, -ndim, ndim - 1, ndim);
    *out = (int)a;
    return PARDO_OK;
}

bool pardo_op_wants_output(const pardo_op *op, int k) { return k >= 0 && k < op->n_out && op->out[k][0] != '\0'; }

int pardo_grad_expect_float(const pardo_op *op, int k, const pardo_type *t, const char *what, pardo_status *st) {
    if (!pardo_op_wants_output(op, k) || pardo_dtype_is_float(t->dtype)) return PARDO_OK;
    return pardo_errorf(st, PARDO_ENOTSUP, "output %d asks for the gradient of %s, which is %s: only float32 and "
                        "float64 inputs have gradients", k, what, pardo_dtype_name(t->dtype));
}
