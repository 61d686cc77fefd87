/* loss_nll.c - nll_loss and nll_loss_grad, ONNX's NegativeLogLikelihoodLoss.
 *
 * nll_loss: input [N, C, d1, ..., dk] (float32 or float64; k >= 0), target
 * [N, d1, ..., dk] (int32 or int64), optional weight [C] (input's dtype).
 * Each element's loss is -weight[t] * input[n, t, d...] with t its target
 * (weight 1 without the input); an element whose target equals attr
 * ignore_index has loss 0 and weight 0. Attr reduction: "none" (the
 * elementwise losses, target's shape), "sum", or "mean" (default: the sum
 * divided by the sum of the weights of the elements not ignored, as ONNX;
 * 0 / 0 gives NaN as ONNX's reference does). A target outside [0, C) that is
 * not ignore_index is PARDO_ERUNTIME naming the element. Sums run in double.
 * ONNX's SoftmaxCrossEntropyLoss is log_softmax along axis 1 then nll_loss
 * (the importer emits the two), so it needs no op of its own.
 *
 * nll_loss_grad: the input's gradient (scatter of -weight[t] dloss, / the
 * weight sum for mean); target has none (integers) and weight's gradient is
 * refused (PARDO_ENOTSUP): a class weight is a constant in the losses ONNX
 * exports. Single-threaded; no allocation beyond the outputs. */
#include <math.h>
#include <string.h>

#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

typedef enum nll_reduction { NLL_MEAN, NLL_SUM, NLL_NONE } nll_reduction;

static const pardo_dtype target_dtypes[] = {PARDO_I32, PARDO_I64};

static const pardo_attr_def nll_attrs[] = {
    {"reduction", PARDO_ATTR_STRING, "\"mean\"", "\"mean\" (sum / sum of the weights), \"sum\" or \"none\""},
    {"ignore_index", PARDO_ATTR_INT, "null", "a target value whose elements count neither loss nor weight"},
};

/* The op's attrs: reduction into *red, ignore_index into *ign with *has_ign. */
static int nll_attrs_get(const pardo_op *op, nll_reduction *red, bool *has_ign, int64_t *ign, pardo_status *st) {
    const char *s;
    int rc = pardo_attr_string(op, "reduction", "mean", &s, st);
    if (rc != PARDO_OK) return rc;
    if (strcmp(s, "mean") == 0) *red = NLL_MEAN;
    else if (strcmp(s, "sum") == 0) *red = NLL_SUM;
    else if (strcmp(s, "none") == 0) *red = NLL_NONE;
    else return pardo_errorf(st, PARDO_EINVAL, "attr 'reduction' is \"%s\", expected \"mean\", \"sum\" or \"none\"", s);
    *has_ign = pardo_attr(op, "ignore_index") != NULL;
    return pardo_attr_int(op, "ignore_index", 0, ign, st);
}

/* Checks input x, target t and weight w (NULL: absent) against each other;
 * fills the loss type into y (may be NULL). Unknown ranks and -1 dims pass. */
static int nll_check(const pardo_op *op, const pardo_type *x, const pardo_type *t, const pardo_type *w,
                     nll_reduction *red, bool *has_ign, int64_t *ign, pardo_type *y, pardo_status *st) {
    char sx[128], stt[128];
    int rc = nll_attrs_get(op, red, has_ign, ign, st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_float(x, "input 0 'input'", st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(t, "input 1 'target'", target_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    if (x->ndim >= 0 && x->ndim < 2)
        return pardo_errorf(st, PARDO_ESHAPE, "input 0 'input' has shape %s, expected [N, C, d1, ..., dk]",
                            pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    if (x->ndim >= 0 && t->ndim >= 0) {
        bool ok = t->ndim == x->ndim - 1;
        for (int d = 0; ok && d < t->ndim; d++) {
            const int64_t a = t->shape[d], b = x->shape[d == 0 ? 0 : d + 1];
            ok = a < 0 || b < 0 || a == b;
        }
        if (!ok)
            return pardo_errorf(st, PARDO_ESHAPE, "input 1 'target' has shape %s, expected input %s without dim 1",
                                pardo_shape_str(t->ndim, t->shape, stt, sizeof stt),
                                pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    }
    if (w) {
        if (w->dtype != x->dtype || (w->ndim >= 0 && w->ndim != 1) ||
            (w->ndim == 1 && x->ndim >= 2 && w->shape[0] >= 0 && x->shape[1] >= 0 && w->shape[0] != x->shape[1]))
            return pardo_errorf(st, PARDO_ESHAPE, "input 2 'weight' is %s %s, expected %s [C] for input %s",
                                pardo_dtype_name(w->dtype), pardo_shape_str(w->ndim, w->shape, stt, sizeof stt),
                                pardo_dtype_name(x->dtype), pardo_shape_str(x->ndim, x->shape, sx, sizeof sx));
    }
    if (y) {
        y->dtype = x->dtype;
        if (*red == NLL_NONE) *y = (pardo_type){.dtype = x->dtype, .ndim = t->ndim};
        else y->ndim = 0;
        if (*red == NLL_NONE && t->ndim > 0) memcpy(y->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    }
    return PARDO_OK;
}

/* The layout of one run: N, C, D (product of d1..dk) and the attrs. */
typedef struct nll_job {
    int64_t n, c, d;
    nll_reduction red;
    bool has_ign;
    int64_t ign;
    const void *tgt;
    bool t64;
} nll_job;

static int64_t nll_target(const nll_job *jb, int64_t i) {
    return jb->t64 ? ((const int64_t *)jb->tgt)[i] : ((const int32_t *)jb->tgt)[i];
}

/* Checks every target of jb: in [0, C) or ignore_index; PARDO_ERUNTIME naming
 * the first one that is neither. */
static int nll_check_targets(const nll_job *jb, pardo_status *st) {
    for (int64_t i = 0; i < jb->n * jb->d; i++) {
        const int64_t t = nll_target(jb, i);
        if ((jb->has_ign && t == jb->ign) || (t >= 0 && t < jb->c)) continue;
        return pardo_errorf(st, PARDO_ERUNTIME, "nll_loss: target element %lld is %lld, expected a class in [0, %lld)",
                            (long long)i, (long long)t, (long long)jb->c);
    }
    return PARDO_OK;
}

/* Defines nll_fwd_SUF (loss into y) and nll_bwd_SUF (dx, zeroed by the
 * caller, from dl) for element type T; w may be NULL. */
#define NLL_KERNELS(SUF, T)                                                                                            \
    static void nll_fwd_##SUF(const nll_job *jb, const void *vx, const void *vw, void *vy) {                           \
        const T *x = vx, *w = vw;                                                                                      \
        T *y = vy;                                                                                                     \
        double s = 0, ws = 0;                                                                                          \
        for (int64_t n = 0; n < jb->n; n++)                                                                            \
            for (int64_t j = 0; j < jb->d; j++) {                                                                      \
                const int64_t i = n * jb->d + j, t = nll_target(jb, i);                                                \
                double l = 0, wt = 0;                                                                                  \
                if (!(jb->has_ign && t == jb->ign)) {                                                                  \
                    wt = w ? (double)w[t] : 1.0;                                                                       \
                    l = -wt * (double)x[(n * jb->c + t) * jb->d + j];                                                  \
                }                                                                                                      \
                if (jb->red == NLL_NONE) y[i] = (T)l;                                                                  \
                s += l;                                                                                                \
                ws += wt;                                                                                              \
            }                                                                                                          \
        if (jb->red == NLL_SUM) y[0] = (T)s;                                                                           \
        else if (jb->red == NLL_MEAN) y[0] = (T)(s / ws);                                                              \
    }                                                                                                                  \
    static void nll_bwd_##SUF(const nll_job *jb, const void *vw, const void *vdl, void *vdx) {                         \
        const T *w = vw, *dl = vdl;                                                                                    \
        T *dx = vdx;                                                                                                   \
        double ws = 0;                                                                                                 \
        if (jb->red == NLL_MEAN)                                                                                       \
            for (int64_t i = 0; i < jb->n * jb->d; i++) {                                                              \
                const int64_t t = nll_target(jb, i);                                                                   \
                if (!(jb->has_ign && t == jb->ign)) ws += w ? (double)w[t] : 1.0;                                      \
            }                                                                                                          \
        for (int64_t n = 0; n < jb->n; n++)                                                                            \
            for (int64_t j = 0; j < jb->d; j++) {                                                                      \
                const int64_t i = n * jb->d + j, t = nll_target(jb, i);                                                \
                if (jb->has_ign && t == jb->ign) continue;                                                             \
                const double g = jb->red == NLL_NONE ? (double)dl[i]                                                   \
                                 : jb->red == NLL_SUM ? (double)dl[0]                                                  \
                                                      : (double)dl[0] / ws;                                            \
                dx[(n * jb->c + t) * jb->d + j] = (T)(-(w ? (double)w[t] : 1.0) * g);                                  \
            }                                                                                                          \
    }

NLL_KERNELS(f32, float)
NLL_KERNELS(f64, double)

/* Fills jb from the run's tensors (x [N, C, ...], target) after the checks. */
static void nll_job_init(nll_job *jb, const pardo_tensor *x, const pardo_tensor *t, nll_reduction red, bool has_ign,
                         int64_t ign) {
    jb->n = x->shape[0];
    jb->c = x->shape[1];
    jb->d = 1;
    for (int k = 2; k < x->ndim; k++) jb->d *= x->shape[k];
    jb->red = red;
    jb->has_ign = has_ign;
    jb->ign = ign;
    jb->tgt = pardo_tensor_data(t);
    jb->t64 = t->dtype == PARDO_I64;
}

static const pardo_arg_def nll_in[] = {
    {"input", "log-probabilities [N, C, d1, ..., dk] (float32 or float64)", false, false},
    {"target", "class per element [N, d1, ..., dk] (int32 or int64)", false, false},
    {"weight", "per-class weight [C], input's dtype (absent: 1)", true, false},
};
static const pardo_arg_def nll_out[] = {
    {"loss", "[] for mean or sum, target's shape for none; input's dtype", false, false},
};

static int nll_infer(pardo_infer_ctx *ctx) {
    nll_reduction red;
    bool has_ign;
    int64_t ign;
    return nll_check(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 2), &red, &has_ign, &ign, &ctx->out[0],
                     ctx->st);
}

static int nll_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *t = ctx->in[1], *w = pardo_nn_in(ctx, 2);
    pardo_type tx = pardo_tensor_type(x), tt = pardo_tensor_type(t), tw, ty;
    if (w) tw = pardo_tensor_type(w);
    nll_reduction red;
    bool has_ign;
    int64_t ign;
    int rc = nll_check(ctx->op, &tx, &tt, w ? &tw : NULL, &red, &has_ign, &ign, &ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    nll_job jb;
    nll_job_init(&jb, x, t, red, has_ign, ign);
    if ((rc = nll_check_targets(&jb, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, ty.dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    (x->dtype == PARDO_F32 ? nll_fwd_f32 : nll_fwd_f64)(&jb, pardo_tensor_data(x), w ? pardo_tensor_data(w) : NULL,
                                                        pardo_tensor_data(y));
    return PARDO_OK;
}

const pardo_op_def pardo_op_nll_loss = {
    .type = "nll_loss",
    .doc = "negative log-likelihood: -weight[t] input[n, t, ...] per element, reduced by mean (default), sum or none; "
           "ignore_index (ONNX NegativeLogLikelihoodLoss)",
    .inputs = nll_in,
    .n_inputs = 3,
    .outputs = nll_out,
    .n_outputs = 1,
    .attrs = nll_attrs,
    .n_attrs = 2,
    .infer = nll_infer,
    .cpu = nll_cpu,
    .grad = pardo_grad_standard,
};

static const pardo_arg_def nll_grad_in[] = {
    {"input", "the forward input", false, false},
    {"target", "the forward target", false, false},
    {"weight", "the forward weight (\"\": none)", true, false},
    {"loss", "the forward loss (not read)", true, false},
    {"dloss", "gradient of the loss (\"\": zeros)", true, false},
};
static const pardo_arg_def nll_grad_out[] = {
    {"dinput", "-weight[t] dloss at [n, t, ...] (/ the weight sum for mean), 0 elsewhere", true, false},
    {"dtarget", "none: must be left out", true, false},
    {"dweight", "refused: must be left out", true, false},
};

static int nll_grad_check(const pardo_op *op, const pardo_type *x, const pardo_type *t, const pardo_type *w,
                          const pardo_type *dl, nll_reduction *red, bool *has_ign, int64_t *ign, pardo_status *st) {
    pardo_type ty;
    int rc = nll_check(op, x, t, w, red, has_ign, ign, &ty, st);
    if (rc == PARDO_OK && dl) rc = pardo_nn_expect_same(dl, "input 4 'dloss'", &ty, "the loss of nll_loss", st);
    if (rc == PARDO_OK && pardo_op_wants_output(op, 1))
        rc = pardo_errorf(st, PARDO_ENOTSUP, "output 1 asks for the gradient of the integer target");
    if (rc == PARDO_OK && pardo_op_wants_output(op, 2))
        rc = pardo_errorf(st, PARDO_ENOTSUP, "output 2 asks for the gradient of the class weight, which nll_loss_grad "
                                             "does not compute");
    return rc;
}

static int nll_grad_infer(pardo_infer_ctx *ctx) {
    nll_reduction red;
    bool has_ign;
    int64_t ign;
    int rc = nll_grad_check(ctx->op, ctx->in[0], ctx->in[1], pardo_nn_in_type(ctx, 2), pardo_nn_in_type(ctx, 4), &red,
                            &has_ign, &ign, ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    ctx->out[1] = *ctx->in[1];
    ctx->out[2] = *ctx->in[0];
    return PARDO_OK;
}

static int nll_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *t = ctx->in[1], *w = pardo_nn_in(ctx, 2), *dl = pardo_nn_in(ctx, 4);
    pardo_type tx = pardo_tensor_type(x), tt = pardo_tensor_type(t), tw, tdl;
    if (w) tw = pardo_tensor_type(w);
    if (dl) tdl = pardo_tensor_type(dl);
    nll_reduction red;
    bool has_ign;
    int64_t ign;
    int rc = nll_grad_check(ctx->op, &tx, &tt, w ? &tw : NULL, dl ? &tdl : NULL, &red, &has_ign, &ign, ctx->st);
    if (rc != PARDO_OK || !pardo_kernel_wants_output(ctx, 0)) return rc;
    nll_job jb;
    nll_job_init(&jb, x, t, red, has_ign, ign);
    if ((rc = nll_check_targets(&jb, ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *dx = pardo_nn_zeros(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (dl)
        (x->dtype == PARDO_F32 ? nll_bwd_f32 : nll_bwd_f64)(&jb, w ? pardo_tensor_data(w) : NULL,
                                                            pardo_tensor_data(dl), pardo_tensor_data(dx));
    return PARDO_OK;
}

const pardo_op_def pardo_op_nll_loss_grad = {
    .type = "nll_loss_grad",
    .doc = "gradient of nll_loss for its input (target and weight get none)",
    .inputs = nll_grad_in,
    .n_inputs = 5,
    .outputs = nll_grad_out,
    .n_outputs = 3,
    .attrs = nll_attrs,
    .n_attrs = 2,
    .infer = nll_grad_infer,
    .cpu = nll_grad_cpu,
};
