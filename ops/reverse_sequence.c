/* reverse_sequence.c - reverse_sequence, ONNX's ReverseSequence: X of rank
 * 2 or more whose dims batch_axis and time_axis (0 and 1, one each; attrs,
 * defaults 1 and 0) are the batch and the time; sequence_lens (int32 or
 * int64 [batch]) the length of each batch item's sequence, in [0, time].
 * Y is X with the first sequence_lens[b] time steps of batch item b in
 * reverse order and the rest as they are. Any dtype; not differentiable.
 * One thread, no allocation beyond the output. */
#include <stdint.h>
#include <string.h>

#include "op.h"

static const pardo_dtype int_dtypes[] = {PARDO_I32, PARDO_I64};

static const pardo_arg_def rs_in[] = {
    {"X", "any dtype, rank >= 2: [time, batch, ...] or [batch, time, ...]", false, false},
    {"sequence_lens", "int32 or int64 [batch]: each batch item's length, in [0, time]", false, false},
};
static const pardo_arg_def rs_out[] = {{"Y", "X's type: each sequence's first steps reversed", false, false}};
static const pardo_attr_def rs_attrs[] = {
    {"batch_axis", PARDO_ATTR_INT, "1", "the batch dim: 0 or 1"},
    {"time_axis", PARDO_ATTR_INT, "0", "the time dim: 1 or 0, not batch_axis"},
};

static int rs_check(const pardo_op *op, const pardo_type *x, const pardo_type *l, int *batch_axis, pardo_status *st) {
    char s1[128], s2[128];
    int64_t b, t;
    int rc = pardo_attr_int(op, "batch_axis", 1, &b, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "time_axis", 0, &t, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(l, "input 1 'sequence_lens'", int_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    if (!((b == 0 && t == 1) || (b == 1 && t == 0)))
        return pardo_errorf(st, PARDO_EINVAL, "attrs batch_axis %lld and time_axis %lld, expected 0 and 1 or 1 and 0",
                            (long long)b, (long long)t);
    *batch_axis = (int)b;
    if (x->ndim >= 0 && x->ndim < 2)
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'X' %s has rank %d, expected 2 or more",
                            pardo_shape_str(x->ndim, x->shape, s1, sizeof s1), x->ndim);
    bool ok = l->ndim < 0 || l->ndim == 1;
    if (ok && l->ndim == 1 && x->ndim >= 2) ok = l->shape[0] < 0 || x->shape[b] < 0 || l->shape[0] == x->shape[b];
    if (ok) return PARDO_OK;
    return pardo_errorf(st, PARDO_ESHAPE, "input 1 'sequence_lens' %s, expected [batch] for X %s with batch_axis %lld",
                        pardo_shape_str(l->ndim, l->shape, s2, sizeof s2),
                        pardo_shape_str(x->ndim, x->shape, s1, sizeof s1), (long long)b);
}

static int rs_infer(pardo_infer_ctx *ctx) {
    int batch_axis;
    int rc = rs_check(ctx->op, ctx->in[0], ctx->in[1], &batch_axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    return PARDO_OK;
}

static int rs_cpu(pardo_kernel_ctx *ctx) {
    const pardo_tensor *x = ctx->in[0], *l = ctx->in[1];
    pardo_type tx = pardo_tensor_type(x), tl = pardo_tensor_type(l);
    int batch_axis;
    int rc = rs_check(ctx->op, &tx, &tl, &batch_axis, ctx->st);
    if (rc != PARDO_OK) return rc;
    const int64_t nb = x->shape[batch_axis], nt = x->shape[1 - batch_axis];
    for (int64_t b = 0; b < nb; b++) {
        const double len = pardo_tensor_get_f64(l, b);
        if (!(len >= 0 && len <= (double)nt))
            return pardo_errorf(ctx->st, PARDO_EINVAL, "input 1 'sequence_lens'[%lld] is %g, expected 0 to %lld (the "
                                "time dim)", (long long)b, len, (long long)nt);
    }
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    int64_t inner = 1;
    for (int d = 2; d < x->ndim; d++) inner *= x->shape[d];
    const size_t row = (size_t)inner * pardo_dtype_size(x->dtype);
    /* the row of (time t, batch b) starts at element (t * nb + b) * inner, or (b * nt + t) * inner */
    const int64_t st_t = batch_axis ? nb : 1, st_b = batch_axis ? 1 : nt;
    const char *src = pardo_tensor_data(x);
    char *dst = pardo_tensor_data(y);
    for (int64_t b = 0; b < nb; b++) {
        const int64_t len = (int64_t)pardo_tensor_get_f64(l, b);
        for (int64_t t = 0; t < nt; t++) {
            const int64_t from = t < len ? len - 1 - t : t;
            memcpy(dst + (size_t)(t * st_t + b * st_b) * row, src + (size_t)(from * st_t + b * st_b) * row, row);
        }
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_reverse_sequence = {
    .type = "reverse_sequence",
    .doc = "X with each batch item's first sequence_lens steps along the time dim reversed (ONNX ReverseSequence)",
    .inputs = rs_in,
    .n_inputs = 2,
    .outputs = rs_out,
    .n_outputs = 1,
    .attrs = rs_attrs,
    .n_attrs = 2,
    .infer = rs_infer,
    .cpu = rs_cpu,
};
