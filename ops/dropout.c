/* dropout.c - dropout (attrs ratio, seed) and dropout_grad.
 *
 * When the run is not training (ctx->training false) Y = X and the optional
 * Mask output is all true, as ONNX Dropout with training_mode false. When
 * training, element i is kept when u(seed, step, i) >= ratio, where u is a
 * uniform double in [0, 1) from a counter-based generator (splitmix64's
 * mixer applied to a key made of seed and ctx->step, then to the element
 * index): the same seed, step and shape give the same mask on every run,
 * machine and thread count, and each step gets a new mask (ops/dropout_mask.h,
 * which the CUDA kernels share: a GPU run draws the very same mask). Kept
 * elements are scaled by 1 / (1 - ratio); ratio is in [0, 1). The optional inputs ratio
 * (a float scalar) and training_mode (a bool scalar), ONNX Dropout-12's,
 * override attr ratio and the run's training when given: an ONNX model's
 * Dropout whose training_mode is an input.
 *
 * dropout_grad: dX = dY * mask / (1 - ratio) when training, dX = dY
 * otherwise. It reads the forward's Mask output when the graph wires it in,
 * and otherwise recomputes the mask from (seed, step, index); either way it
 * must run in the same block run as the forward (same ctx->training and
 * ctx->step), which is where the autodiff pass puts it. The element index is
 * the index within X, so two ops with the same seed draw the same mask for
 * the same shape: give each dropout its own seed. A dropout given input
 * ratio or training_mode has no gradient here (ENOTSUP). */
#include <string.h>

#include "dropout_mask.h"
#include "kernels.h"
#include "nn_util.h"
#include "op.h"

static const pardo_attr_def dropout_attrs[] = {
    {"ratio", PARDO_ATTR_FLOAT, "0.5", "probability of dropping an element, in [0, 1)"},
    {"seed", PARDO_ATTR_INT, "0", "generator seed; the mask depends on (seed, step, element index)"},
};

/* Reads ratio and seed; PARDO_EINVAL naming the attr when ratio is outside [0, 1). */
static int dropout_attrs_get(const pardo_op *op, double *ratio, uint64_t *seed, pardo_status *st) {
    int64_t s;
    int rc = pardo_attr_float(op, "ratio", 0.5, ratio, st);
    if (rc == PARDO_OK) rc = pardo_attr_int(op, "seed", 0, &s, st);
    if (rc != PARDO_OK) return rc;
    if (!(*ratio >= 0 && *ratio < 1))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'ratio' is %g, expected a probability in [0, 1)", *ratio);
    *seed = (uint64_t)s;
    return PARDO_OK;
}

/* Defines dropout_apply_SUF for element type T: out[i] = in[i] * scale
 * where element i is kept, else 0. The keep bit comes from mask (bool) when
 * it is not NULL, else from the generator; when mask_out is not NULL the
 * keep bits are written there. */
#define DROPOUT_KERNEL(SUF, T)                                                                                         \
    static void dropout_apply_##SUF(int64_t n, const void *vin, const uint8_t *mask, uint64_t key, double ratio,       \
                                    double scale, void *vout, uint8_t *mask_out) {                                     \
        const T *in = vin;                                                                                             \
        T *out = vout;                                                                                                 \
        const T s = (T)scale;                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const bool keep = mask ? mask[i] != 0 : pardo_dropout_keep(key, i, ratio);                                 \
            out[i] = keep ? in[i] * s : (T)0;                                                                          \
            if (mask_out) mask_out[i] = keep;                                                                          \
        }                                                                                                              \
    }

DROPOUT_KERNEL(f32, float)
DROPOUT_KERNEL(f64, double)

/* ---- dropout ---- */

static const pardo_arg_def dropout_in[] = {
    {"X", "input (float32 or float64)", false, false},
    {"ratio", "float scalar: overrides attr ratio at run time (\"\": the attr)", true, false},
    {"training_mode", "bool scalar: overrides the run's training (\"\": the run's)", true, false},
};
static const pardo_arg_def dropout_out[] = {
    {"Y", "X with dropped elements zeroed and kept ones scaled by 1 / (1 - ratio); X when not training", false, false},
    {"Mask", "bool, X's shape: true where kept (all true when not training)", true, false},
};

/* The checks of X and the attrs that dropout and dropout_grad share; out[0] gets X's type, out[1] (dropout's
 * Mask) its bool form. */
static int dropout_infer_x(pardo_infer_ctx *ctx) {
    double ratio;
    uint64_t seed;
    int rc = dropout_attrs_get(ctx->op, &ratio, &seed, ctx->st);
    if (rc == PARDO_OK) rc = pardo_nn_expect_float(ctx->in[0], "input 0 'X'", ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *ctx->in[0];
    if (ctx->n_out > 1) {
        ctx->out[1] = *ctx->in[0];
        ctx->out[1].dtype = PARDO_BOOL;
    }
    return PARDO_OK;
}

static const pardo_dtype bool_dtype[] = {PARDO_BOOL};

static int dropout_infer(pardo_infer_ctx *ctx) {
    const pardo_type *r = pardo_nn_in_type(ctx, 1), *t = pardo_nn_in_type(ctx, 2);
    int rc = dropout_infer_x(ctx);
    if (rc == PARDO_OK && r) {
        static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};
        rc = pardo_nn_expect_scalar(r, "input 1 'ratio'", float_dtypes, 2, ctx->st);
    }
    if (rc == PARDO_OK && t) rc = pardo_nn_expect_scalar(t, "input 2 'training_mode'", bool_dtype, 1, ctx->st);
    return rc;
}

/* The run-time inputs ratio and training_mode over *ratio and *training where given. */
static int dropout_inputs(pardo_kernel_ctx *ctx, double *ratio, bool *training) {
    pardo_tensor *r = pardo_nn_in(ctx, 1), *t = pardo_nn_in(ctx, 2);
    if (r) {
        if (r->numel != 1)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 1 'ratio' has %lld values, expected one",
                                (long long)r->numel);
        *ratio = pardo_tensor_get_f64(r, 0);
        if (!(*ratio >= 0 && *ratio < 1))
            return pardo_errorf(ctx->st, PARDO_EINVAL, "input 1 'ratio' is %g, expected a probability in [0, 1)",
                                *ratio);
    }
    if (t) {
        pardo_type tt = pardo_tensor_type(t);
        int rc = pardo_nn_expect_scalar(&tt, "input 2 'training_mode'", bool_dtype, 1, ctx->st);
        if (rc != PARDO_OK) return rc;
        if (t->numel != 1)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input 2 'training_mode' has %lld values, expected one",
                                (long long)t->numel);
        *training = *(const bool *)pardo_tensor_data(t);
    }
    return PARDO_OK;
}

/* dropout_grad's layout (X, Y, Mask, dY, dMask) predates the inputs ratio and training_mode, which its
 * recomputed mask could not follow: a dropout given them has no gradient. */
static int dropout_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    for (int k = 1; k < 3 && k < req->fwd->n_in; k++)
        if (req->fwd->in[k] && req->fwd->in[k][0])
            return pardo_errorf(st, PARDO_ENOTSUP, "dropout's gradient with input %d '%s' given at run time", k,
                                k == 1 ? "ratio" : "training_mode");
    return pardo_grad_wired_n(req, blk, 0, 0, 1, st);
}

static int dropout_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *mask = NULL;
    double ratio;
    uint64_t seed;
    int rc = dropout_attrs_get(ctx->op, &ratio, &seed, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type tx = pardo_tensor_type(x);
    if ((rc = pardo_nn_expect_float(&tx, "input 0 'X'", ctx->st)) != PARDO_OK) return rc;
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!y) return ctx->st->code;
    if (pardo_kernel_wants_output(ctx, 1) && !(mask = pardo_kernel_output(ctx, 1, PARDO_BOOL, x->ndim, x->shape)))
        return ctx->st->code;
    bool training = ctx->training;
    if ((rc = dropout_inputs(ctx, &ratio, &training)) != PARDO_OK) return rc;
    if (!training) {
        if (y != x && x->nbytes) memcpy(pardo_tensor_data(y), pardo_tensor_data(x), x->nbytes);
        if (mask && mask->nbytes) memset(pardo_tensor_data(mask), 1, mask->nbytes);
        return PARDO_OK;
    }
    (x->dtype == PARDO_F32 ? dropout_apply_f32 : dropout_apply_f64)(
        x->numel, pardo_tensor_data(x), NULL, pardo_dropout_key(seed, ctx->step), ratio, 1.0 / (1.0 - ratio),
        pardo_tensor_data(y), mask ? pardo_tensor_data(mask) : NULL);
    return PARDO_OK;
}

const pardo_op_def pardo_op_dropout = {
    .type = "dropout",
    .doc = "drops elements with probability ratio and scales the rest by 1 / (1 - ratio) when training; identity "
           "otherwise",
    .inputs = dropout_in,
    .n_inputs = 3,
    .outputs = dropout_out,
    .n_outputs = 2,
    .attrs = dropout_attrs,
    .n_attrs = 2,
    .infer = dropout_infer,
    .cpu = dropout_cpu,
    .cuda = pardo_cuda_dropout,
    .grad = dropout_grad_build,
};

/* ---- dropout_grad ---- */

static const pardo_arg_def dropout_grad_in[] = {
    {"X", "the forward input", false, false},
    {"Y", "the forward output (not read)", true, false},
    {"Mask", "the forward Mask output; \"\": recomputed from seed, step and index", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
    {"dMask", "gradient of Mask (bool: not read)", true, false},
};
static const pardo_arg_def dropout_grad_out[] = {{"dX", "gradient of X", true, false}};

static int dropout_grad_infer(pardo_infer_ctx *ctx) {
    const pardo_type *x = ctx->in[0], *mask = pardo_nn_in_type(ctx, 2), *dy = pardo_nn_in_type(ctx, 3);
    int rc = dropout_infer_x(ctx); /* checks the attrs and X; fills out[0] = X's type */
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 3 'dY'", x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK && mask) {
        pardo_type want = *x;
        want.dtype = PARDO_BOOL;
        rc = pardo_nn_expect_same(mask, "input 2 'Mask'", &want, "the Mask of input 0 'X'", ctx->st);
    }
    return rc;
}

static int dropout_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *mask = pardo_nn_in(ctx, 2), *dy = pardo_nn_in(ctx, 3);
    double ratio;
    uint64_t seed;
    int rc = dropout_attrs_get(ctx->op, &ratio, &seed, ctx->st);
    if (rc != PARDO_OK) return rc;
    pardo_type tx = pardo_tensor_type(x);
    if ((rc = pardo_nn_expect_float(&tx, "input 0 'X'", ctx->st)) != PARDO_OK) return rc;
    if (dy) {
        pardo_type tdy = pardo_tensor_type(dy);
        if ((rc = pardo_nn_expect_same(&tdy, "input 3 'dY'", &tx, "input 0 'X'", ctx->st)) != PARDO_OK) return rc;
    }
    if (mask && (mask->dtype != PARDO_BOOL || !pardo_shape_equal(mask->ndim, mask->shape, x->ndim, x->shape))) {
        pardo_type tm = pardo_tensor_type(mask), want = tx;
        want.dtype = PARDO_BOOL;
        return pardo_nn_expect_same(&tm, "input 2 'Mask'", &want, "the Mask of input 0 'X'", ctx->st);
    }
    if (!pardo_kernel_wants_output(ctx, 0)) return PARDO_OK;
    if (!dy) return pardo_nn_zeros(ctx, 0, x->dtype, x->ndim, x->shape) ? PARDO_OK : ctx->st->code;
    pardo_tensor *dx = pardo_kernel_output(ctx, 0, x->dtype, x->ndim, x->shape);
    if (!dx) return ctx->st->code;
    if (!ctx->training) {
        if (dx->nbytes) memcpy(pardo_tensor_data(dx), pardo_tensor_data(dy), dx->nbytes);
        return PARDO_OK;
    }
    (x->dtype == PARDO_F32 ? dropout_apply_f32 : dropout_apply_f64)(
        x->numel, pardo_tensor_data(dy), mask ? pardo_tensor_data(mask) : NULL, pardo_dropout_key(seed, ctx->step),
        ratio, 1.0 / (1.0 - ratio), pardo_tensor_data(dx), NULL);
    return PARDO_OK;
}

const pardo_op_def pardo_op_dropout_grad = {
    .type = "dropout_grad",
    .doc = "gradient of dropout: dX = dY * mask / (1 - ratio) when training, dY otherwise",
    .inputs = dropout_grad_in,
    .n_inputs = 5,
    .outputs = dropout_grad_out,
    .n_outputs = 1,
    .attrs = dropout_attrs,
    .n_attrs = 2,
    .infer = dropout_grad_infer,
    .cpu = dropout_grad_cpu,
    .cuda = pardo_cuda_dropout_grad,
};
