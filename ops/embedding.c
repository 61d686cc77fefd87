/* embedding.c - embedding: rows of a table W [V, D] (float32 or float64)
 * picked by integer indices (int32 or int64, any shape) -> Y [*indices.shape,
 * D]. Inputs in ONNX Gather(W, indices, axis = 0) order: W first. Indices
 * must be in [0, V) (negative ones are errors, not counted from the end);
 * one outside is PARDO_ERUNTIME naming its position and value.
 * embedding_grad: dW is dY's rows added into the rows they came from
 * (scatter-add; repeated indices add up); indices have no gradient. */
#include <stdio.h>
#include <string.h>

#include "kernels.h"
#include "nn_util.h"
#include "op.h"

static const pardo_dtype index_dtypes[] = {PARDO_I32, PARDO_I64};

/* Checks W and indices; fills Y's type into y (may be NULL). */
static int emb_check(const pardo_type *w, const pardo_type *idx, pardo_type *y, pardo_status *st) {
    int rc;
    if ((rc = pardo_nn_expect_float(w, "input 0 'W'", st)) != PARDO_OK ||
        (rc = pardo_nn_expect_rank(w, "input 0 'W'", 2, "[V, D]", st)) != PARDO_OK ||
        (rc = pardo_expect_dtype(idx, "input 1 'indices'", index_dtypes, 2, st)) != PARDO_OK)
        return rc;
    if (idx->ndim >= PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_ESHAPE, "input 1 'indices' has rank %d, expected at most %d", idx->ndim,
                            PARDO_MAX_DIMS - 1);
    if (!y) return PARDO_OK;
    y->dtype = w->dtype;
    if (idx->ndim < 0) {
        y->ndim = -1;
        return PARDO_OK;
    }
    y->ndim = idx->ndim + 1;
    memcpy(y->shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    y->shape[idx->ndim] = w->ndim == 2 ? w->shape[1] : -1;
    return PARDO_OK;
}

/* Element i of indices (int32 or int64 data p), unchecked. */
static inline int64_t emb_row(const pardo_tensor *idx, const void *p, int64_t i) {
    return idx->dtype == PARDO_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* PARDO_OK when element i of indices is a row of W (v rows); PARDO_ERUNTIME
 * naming its position and value otherwise. */
static int emb_check_index(const pardo_tensor *idx, int64_t i, int64_t v, pardo_status *st) {
    const int64_t r = emb_row(idx, pardo_tensor_data(idx), i);
    if (r < 0 || r >= v) {
        char pos[160] = "";
        size_t used = 0;
        int64_t rest = i;
        /* the multi-index of element i, as [a, b, ...] */
        int64_t stride[PARDO_MAX_DIMS];
        int64_t s = 1;
        for (int d = idx->ndim - 1; d >= 0; d--) {
            stride[d] = s;
            s *= idx->shape[d];
        }
        for (int d = 0; d < idx->ndim && used < sizeof pos; d++) {
            int w = snprintf(pos + used, sizeof pos - used, "%s%lld", d ? ", " : "", (long long)(rest / stride[d]));
            if (w > 0) used += (size_t)w;
            rest %= stride[d];
        }
        return pardo_errorf(st, PARDO_ERUNTIME,
                            "input 1 'indices' [%s] (element %lld) is %lld, expected a row of input 0 'W' in [0, %lld)",
                            pos, (long long)i, (long long)r, (long long)v);
    }
    return PARDO_OK;
}

/* Checks every index before anything is written, so a bad one leaves no
 * half-made output. */
static int emb_check_indices(const pardo_tensor *idx, int64_t v, pardo_status *st) {
    for (int64_t i = 0; i < idx->numel; i++) {
        int rc = emb_check_index(idx, i, v, st);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

/* ---- embedding ---- */

static const pardo_arg_def emb_in[] = {
    {"W", "table [V, D] (float32 or float64)", false, false},
    {"indices", "row numbers (int32 or int64, any shape), each in [0, V)", false, false},
};
static const pardo_arg_def emb_out[] = {{"Y", "W's rows [*indices.shape, D]", false, false}};

static int emb_infer(pardo_infer_ctx *ctx) { return emb_check(ctx->in[0], ctx->in[1], &ctx->out[0], ctx->st); }

static int emb_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *w = ctx->in[0], *idx = ctx->in[1];
    pardo_type tw = pardo_tensor_type(w), ti = pardo_tensor_type(idx), ty;
    int rc = emb_check(&tw, &ti, &ty, ctx->st);
    if (rc == PARDO_OK) rc = emb_check_indices(idx, w->shape[0], ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    const size_t row_bytes = (size_t)w->shape[1] * pardo_dtype_size(w->dtype);
    const char *src = pardo_tensor_data(w);
    const void *ip = pardo_tensor_data(idx);
    char *dst = pardo_tensor_data(y);
    for (int64_t i = 0; i < idx->numel; i++) {
        const int64_t r = emb_row(idx, ip, i); /* checked above */
        if (row_bytes) memcpy(dst + (size_t)i * row_bytes, src + (size_t)r * row_bytes, row_bytes);
    }
    return PARDO_OK;
}

const pardo_op_def pardo_op_embedding = {
    .type = "embedding",
    .doc = "Y[..., :] = W[indices[...], :] (ONNX Gather on axis 0 of W)",
    .inputs = emb_in,
    .n_inputs = 2,
    .outputs = emb_out,
    .n_outputs = 1,
    .infer = emb_infer,
    .cpu = emb_cpu,
    .cuda = pardo_cuda_embedding,
    .grad = pardo_grad_standard,
};

/* ---- embedding_grad ---- */

static const pardo_arg_def emb_grad_in[] = {
    {"W", "the forward table", false, false},
    {"indices", "the forward indices", false, false},
    {"Y", "the forward output (not read)", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def emb_grad_out[] = {
    {"dW", "gradient of W: dY's rows added into the rows they were read from", true, false},
    {"dindices", "must be \"\": integer indices have no gradient", true, false},
};

/* Defines emb_scatter_SUF: dw[idx[i], :] += dy[i, :] for every i (indices
 * checked before). */
#define EMB_SCATTER(SUF, T)                                                                                            \
    static void emb_scatter_##SUF(const pardo_tensor *idx, int64_t d, const void *vdy, void *vdw) {                    \
        const T *dy = vdy;                                                                                             \
        T *dw = vdw;                                                                                                   \
        const void *ip = pardo_tensor_data(idx);                                                                       \
        for (int64_t i = 0; i < idx->numel; i++) {                                                                     \
            const int64_t r = emb_row(idx, ip, i);                                                                     \
            for (int64_t j = 0; j < d; j++) dw[r * d + j] += dy[i * d + j];                                            \
        }                                                                                                              \
    }

EMB_SCATTER(f32, float)
EMB_SCATTER(f64, double)

static int emb_grad_check(const pardo_op *op, const pardo_type *w, const pardo_type *idx, const pardo_type *dy,
                          pardo_status *st) {
    pardo_type ty;
    int rc = emb_check(w, idx, &ty, st);
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 3 'dY'", &ty, "the output of embedding", st);
    if (rc == PARDO_OK && op->n_out > 1 && op->out[1][0])
        rc = pardo_errorf(st, PARDO_EINVAL,
                          "output 1 (gradient of the indices) must be \"\": integer indices have "
                          "no gradient");
    return rc;
}

static int emb_grad_infer(pardo_infer_ctx *ctx) {
    int rc = emb_grad_check(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 3), ctx->st);
    if (rc == PARDO_OK) ctx->out[0] = *ctx->in[0];
    return rc;
}

static int emb_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *w = ctx->in[0], *idx = ctx->in[1], *dy = pardo_nn_in(ctx, 3);
    pardo_type tw = pardo_tensor_type(w), ti = pardo_tensor_type(idx), tdy;
    if (dy) tdy = pardo_tensor_type(dy);
    int rc = emb_grad_check(ctx->op, &tw, &ti, dy ? &tdy : NULL, ctx->st);
    if (rc == PARDO_OK) rc = emb_check_indices(idx, w->shape[0], ctx->st);
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    pardo_tensor *dw = pardo_nn_zeros(ctx, 0, w->dtype, 2, w->shape);
    if (!dw) return ctx->st->code;
    if (dy)
        (w->dtype == PARDO_F32 ? emb_scatter_f32 : emb_scatter_f64)(idx, w->shape[1], pardo_tensor_data(dy),
                                                                    pardo_tensor_data(dw));
    return PARDO_OK;
}

const pardo_op_def pardo_op_embedding_grad = {
    .type = "embedding_grad",
    .doc = "gradient of embedding: dW[indices[i], :] += dY[i, :] (scatter-add); none for the indices",
    .inputs = emb_grad_in,
    .n_inputs = 4,
    .outputs = emb_grad_out,
    .n_outputs = 2,
    .infer = emb_grad_infer,
    .cpu = emb_grad_cpu,
    .cuda = pardo_cuda_embedding_grad,
};
