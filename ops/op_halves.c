/* op_halves.c - float16 and bfloat16 through an op's float32 kernel
 * (pardo_op_def.halves_in_f32; see op.h): the half inputs widened to
 * float32, the kernel run on them, its float32 outputs rounded to nearest
 * even back into the half dtype. ONNX Runtime's CPU provider and PyTorch
 * compute the half types this way where they have no kernel of their own;
 * the result is the float32 op's, rounded once. */
#include <stdlib.h>

#include "kernel_util.h"
#include "op.h"

/* The dtype of the first float16 / bfloat16 among n types (NULL entries
 * skipped), or PARDO_DTYPE_UNKNOWN. */
static pardo_dtype first_half(int n, const pardo_type *const *types, pardo_tensor *const *tensors) {
    for (int k = 0; k < n; k++) {
        pardo_dtype dt = types ? (types[k] ? types[k]->dtype : PARDO_DTYPE_UNKNOWN)
                               : (tensors[k] && !tensors[k]->is_array ? tensors[k]->dtype : PARDO_DTYPE_UNKNOWN);
        if (pardo_dtype_is_half(dt)) return dt;
    }
    return PARDO_DTYPE_UNKNOWN;
}

int pardo_op_infer_halves(pardo_infer_ctx *ctx) {
    const pardo_op_def *def = ctx->op->def;
    const pardo_dtype half = first_half(ctx->n_in, ctx->in, NULL);
    pardo_type *wide = calloc((size_t)ctx->n_in + 1, sizeof(*wide));
    const pardo_type **in = calloc((size_t)ctx->n_in + 1, sizeof(*in));
    if (!wide || !in) {
        free(wide);
        free(in);
        return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory inferring %s", def->type);
    }
    for (int k = 0; k < ctx->n_in; k++) {
        if (!ctx->in[k]) continue;
        wide[k] = *ctx->in[k];
        if (pardo_dtype_is_half(wide[k].dtype)) wide[k].dtype = PARDO_F32;
        in[k] = &wide[k];
    }
    pardo_infer_ctx inner = *ctx;
    inner.in = in;
    int rc = def->infer(&inner);
    for (int k = 0; rc == PARDO_OK && k < ctx->n_out; k++)
        if (ctx->out[k].dtype == PARDO_F32) ctx->out[k].dtype = half;
    free(wide);
    free(in);
    return rc;
}

/* A new float32 tensor of t's values (t float16 or bfloat16; exact). */
static pardo_tensor *widen(const pardo_tensor *t, pardo_status *st) {
    pardo_tensor *w = pardo_tensor_new_cpu(PARDO_F32, t->ndim, t->shape, st);
    if (w) pardo_cast_elements(t->dtype, pardo_tensor_data(t), PARDO_F32, pardo_tensor_data(w), t->numel);
    return w;
}

int pardo_op_run_cpu(pardo_kernel_ctx *ctx) {
    const pardo_op_def *def = ctx->op->def;
    const pardo_dtype half = def->halves_in_f32 ? first_half(ctx->n_in, NULL, ctx->in) : PARDO_DTYPE_UNKNOWN;
    if (half == PARDO_DTYPE_UNKNOWN) return def->cpu(ctx);
    pardo_tensor **in = calloc((size_t)ctx->n_in + 1, sizeof(*in));
    pardo_tensor **out = calloc((size_t)ctx->n_out + 1, sizeof(*out));
    bool *mine = calloc((size_t)ctx->n_in + 1, sizeof(*mine));
    int rc = in && out && mine ? PARDO_OK : pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory running %s", def->type);
    for (int k = 0; rc == PARDO_OK && k < ctx->n_in; k++) {
        in[k] = ctx->in[k];
        if (!in[k] || in[k]->is_array || !pardo_dtype_is_half(in[k]->dtype)) continue;
        if (!pardo_tensor_cpu(in[k], ctx->st) || !(in[k] = widen(ctx->in[k], ctx->st))) {
            rc = ctx->st->code;
            break;
        }
        mine[k] = true;
    }
    if (rc == PARDO_OK) {
        pardo_kernel_ctx inner = *ctx;
        inner.in = in;
        inner.out = out;
        rc = def->cpu(&inner);
    }
    for (int k = 0; out && k < ctx->n_out; k++) {
        if (!out[k]) continue;
        if (rc == PARDO_OK && out[k]->dtype == PARDO_F32 && !out[k]->is_array) {
            pardo_tensor *t = pardo_kernel_output(ctx, k, half, out[k]->ndim, out[k]->shape);
            if (t) /* rounded once, to nearest even */
                pardo_cast_elements(PARDO_F32, pardo_tensor_data(out[k]), half, pardo_tensor_data(t), t->numel);
            else rc = ctx->st->code;
            pardo_tensor_release(out[k]);
        } else if (rc == PARDO_OK) { /* not a float32 output: as the kernel made it */
            pardo_tensor_release(ctx->out[k]);
            ctx->out[k] = out[k];
        } else {
            pardo_tensor_release(out[k]);
        }
    }
    for (int k = 0; mine && k < ctx->n_in; k++)
        if (mine[k]) pardo_tensor_release(in[k]);
    free(in);
    free(out);
    free(mine);
    return rc;
}
