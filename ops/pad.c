/* pad.c - pad, ONNX's Pad (opset 2-17): X padded along every dim by pads
 * [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] (negative values crop),
 * given as attr pads or as the run-time int input 1 (inference then gives
 * -1 dims); attr mode "constant" (the value: scalar input 2 of X's dtype,
 * else attr value, else 0), "edge" (the nearest element) or "reflect" (the
 * mirror about the edge element). Any dtype. pad_grad gives dX (dY's
 * elements added back where they were read from: a slice for constant
 * mode, sums at the edges for edge and reflect) and the value's gradient
 * (the sum of dY over the padded places); float32 and float64. One thread;
 * no allocation beyond the outputs. */
#include <stdint.h>
#include <string.h>

#include "index_util.h"
#include "kernel_util.h"
#include "nn_util.h"
#include "op.h"

typedef enum pad_mode { PAD_CONSTANT, PAD_EDGE, PAD_REFLECT } pad_mode;

static const pardo_attr_def pad_attrs[] = {
    {"pads", PARDO_ATTR_INTS, "null", "[begins..., ends...] when input 1 is absent"},
    {"mode", PARDO_ATTR_STRING, "\"constant\"", "\"constant\", \"edge\" or \"reflect\""},
    {"value", PARDO_ATTR_FLOAT, "0", "the constant when input 2 is absent"},
};

static int pad_mode_get(const pardo_op *op, pad_mode *m, pardo_status *st) {
    const char *s;
    int rc = pardo_attr_string(op, "mode", "constant", &s, st);
    if (rc != PARDO_OK) return rc;
    if (strcmp(s, "constant") == 0) *m = PAD_CONSTANT;
    else if (strcmp(s, "edge") == 0) *m = PAD_EDGE;
    else if (strcmp(s, "reflect") == 0) *m = PAD_REFLECT;
    else return pardo_errorf(st, PARDO_EINVAL, "attr 'mode' is \"%s\", expected constant, edge or reflect", s);
    return PARDO_OK;
}

/* The output type from X's (ndim known) and the pads (NULL: not known until run time). */
static int pad_type(const pardo_type *x, const int64_t *pads, pardo_type *y, pardo_status *st) {
    *y = *x;
    for (int d = 0; d < x->ndim; d++) {
        if (!pads || x->shape[d] < 0) {
            y->shape[d] = -1;
            continue;
        }
        y->shape[d] = x->shape[d] + pads[d] + pads[x->ndim + d];
        if (y->shape[d] < 0)
            return pardo_errorf(st, PARDO_ESHAPE, "pads %lld and %lld on dim %d of size %lld leave a negative size",
                                (long long)pads[d], (long long)pads[x->ndim + d], d, (long long)x->shape[d]);
    }
    return PARDO_OK;
}

/* The pads from input 1's tensor (NULL: from the attr) into pads; PARDO_EINVAL unless 2 * ndim of them. */
static int pad_read(const pardo_op *op, const pardo_tensor *pt, int ndim, int64_t *pads, bool *have,
                    pardo_status *st) {
    int n;
    int rc = pardo_index_ints(op, pt, 1, "pads", pads, 2 * PARDO_MAX_DIMS, &n, st);
    if (rc != PARDO_OK) return rc;
    *have = n >= 0;
    if (!*have) return pardo_errorf(st, PARDO_EINVAL, "pad needs the pads (attr or input 1)");
    if (n != 2 * ndim)
        return pardo_errorf(st, PARDO_EINVAL, "pads has %d values, expected 2 * rank = %d", n, 2 * ndim);
    return PARDO_OK;
}

static const pardo_arg_def pad_in[] = {
    {"X", "any dtype", false, false},
    {"pads", "int32 or int64 [2 * rank] (else attr pads)", true, false},
    {"value", "X's dtype, scalar: the constant (else attr value)", true, false},
};
static const pardo_arg_def pad_out[] = {{"Y", "X's dtype; dims X + begins + ends", false, false}};

/* Checks attrs and the types of the inputs; y gets the output type. */
static int pad_check(const pardo_op *op, const pardo_type *x, const pardo_type *pt, const pardo_type *vt,
                     pad_mode *m, pardo_type *y, pardo_status *st) {
    int rc = pad_mode_get(op, m, st), len;
    if (rc == PARDO_OK && pt) rc = pardo_index_expect_list(pt, "input 1 'pads'", &len, st);
    if (rc == PARDO_OK && vt) rc = pardo_nn_expect_scalar(vt, "input 2 'value'", &x->dtype, 1, st);
    if (rc != PARDO_OK) return rc;
    if (x->ndim < 0) {
        *y = *x;
        return PARDO_OK;
    }
    int64_t pads[2 * PARDO_MAX_DIMS];
    bool have = false;
    if (!pt && (rc = pad_read(op, NULL, x->ndim, pads, &have, st)) != PARDO_OK) return rc;
    return pad_type(x, pt ? NULL : pads, y, st);
}

static int pad_infer(pardo_infer_ctx *ctx) {
    pad_mode m;
    return pad_check(ctx->op, ctx->in[0], pardo_nn_in_type(ctx, 1), pardo_nn_in_type(ctx, 2), &m, &ctx->out[0],
                     ctx->st);
}

/* The run's geometry. */
typedef struct pad_job {
    int nd;
    int64_t in[PARDO_MAX_DIMS], out[PARDO_MAX_DIMS], stride[PARDO_MAX_DIMS], begin[PARDO_MAX_DIMS];
    pad_mode mode;
} pad_job;

/* The X offset that output coordinates oc read, or -1 for the constant. */
static int64_t pad_source(const pad_job *jb, const int64_t *oc) {
    int64_t off = 0;
    for (int d = 0; d < jb->nd; d++) {
        const int64_t n = jb->in[d];
        int64_t i = oc[d] - jb->begin[d];
        if (i < 0 || i >= n) {
            if (jb->mode == PAD_CONSTANT || n == 0) return -1;
            if (jb->mode == PAD_EDGE) i = i < 0 ? 0 : n - 1;
            else if (n == 1) i = 0;
            else
                while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
        }
        off += i * jb->stride[d];
    }
    return off;
}

/* Steps the coordinates oc through the output in order. */
static void pad_next(const pad_job *jb, int64_t *oc) {
    for (int d = jb->nd - 1; d >= 0; d--) {
        if (++oc[d] < jb->out[d]) return;
        oc[d] = 0;
    }
}

/* Fills jb for a run (pads read, the output's shape checked). */
static int pad_job_init(pardo_kernel_ctx *ctx, pad_job *jb, pardo_type *ty) {
    pardo_tensor *x = ctx->in[0], *pt = pardo_nn_in(ctx, 1), *vt = pardo_nn_in(ctx, 2);
    pardo_type tx = pardo_tensor_type(x), tp, tv;
    if (pt) tp = pardo_tensor_type(pt);
    if (vt) tv = pardo_tensor_type(vt);
    int rc = pad_check(ctx->op, &tx, pt ? &tp : NULL, vt ? &tv : NULL, &jb->mode, ty, ctx->st);
    if (rc != PARDO_OK) return rc;
    int64_t pads[2 * PARDO_MAX_DIMS];
    bool have;
    if ((rc = pad_read(ctx->op, pt, x->ndim, pads, &have, ctx->st)) != PARDO_OK ||
        (rc = pad_type(&tx, pads, ty, ctx->st)) != PARDO_OK)
        return rc;
    jb->nd = x->ndim;
    int64_t s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        jb->in[d] = x->shape[d];
        jb->out[d] = ty->shape[d];
        jb->begin[d] = pads[d];
        jb->stride[d] = s;
        s *= x->shape[d];
        if (x->shape[d] == 0 && ty->shape[d] > 0 && jb->mode != PAD_CONSTANT)
            return pardo_errorf(ctx->st, PARDO_EINVAL, "mode %s cannot pad dim %d, which is empty",
                                jb->mode == PAD_EDGE ? "edge" : "reflect", d);
    }
    return PARDO_OK;
}

static int pad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *vt = pardo_nn_in(ctx, 2);
    pad_job jb;
    pardo_type ty;
    int rc = pad_job_init(ctx, &jb, &ty);
    if (rc != PARDO_OK) return rc;
    double v;
    if ((rc = pardo_attr_float(ctx->op, "value", 0, &v, ctx->st)) != PARDO_OK) return rc;
    if (vt && vt->numel) v = pardo_tensor_get_f64(vt, 0);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, x->dtype, ty.ndim, ty.shape);
    if (!y) return ctx->st->code;
    const size_t es = pardo_dtype_size(x->dtype);
    unsigned char cv[8] = {0};
    switch (x->dtype) {
    case PARDO_F32: *(float *)(void *)cv = (float)v; break;
    case PARDO_F64: *(double *)(void *)cv = v; break;
    case PARDO_I32: *(int32_t *)(void *)cv = (int32_t)v; break;
    case PARDO_I64: *(int64_t *)(void *)cv = vt && vt->numel ? ((const int64_t *)pardo_tensor_data(vt))[0] : (int64_t)v;
        break;
    default: cv[0] = v != 0; break;
    }
    int64_t oc[PARDO_MAX_DIMS] = {0};
    const char *src = pardo_tensor_data(x);
    char *dst = pardo_tensor_data(y);
    for (int64_t e = 0; e < y->numel; e++, pad_next(&jb, oc)) {
        const int64_t off = pad_source(&jb, oc);
        memcpy(dst + (size_t)e * es, off < 0 ? (const char *)cv : src + (size_t)off * es, es);
    }
    return PARDO_OK;
}

/* pad_grad reads X (its shape), the pads and dY; never Y or the value. */
static int pad_grad_build(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 1, st);
}

const pardo_op_def pardo_op_pad = {
    .type = "pad",
    .doc = "X padded by pads (constant value, edge or reflect; negative pads crop) (ONNX Pad)",
    .inputs = pad_in,
    .n_inputs = 3,
    .outputs = pad_out,
    .n_outputs = 1,
    .attrs = pad_attrs,
    .n_attrs = 3,
    .infer = pad_infer,
    .cpu = pad_cpu,
    .grad = pad_grad_build,
};

static const pardo_arg_def pad_grad_in[] = {
    {"X", "the forward input (its shape)", false, false},
    {"pads", "the forward pads (\"\": attr pads)", true, false},
    {"value", "the forward value (not read; may be \"\")", true, false},
    {"Y", "the forward output (not read; may be \"\")", true, false},
    {"dY", "gradient of Y (\"\": zeros)", true, false},
};
static const pardo_arg_def pad_grad_out[] = {
    {"dX", "dY added back where each element was read from", true, false},
    {"dpads", "never computed: must be \"\"", true, false},
    {"dvalue", "the sum of dY over the padded places (constant mode)", true, false},
};

static int pad_grad_infer(pardo_infer_ctx *ctx) {
    pad_mode m;
    pardo_type y;
    const pardo_type *x = ctx->in[0], *dy = pardo_nn_in_type(ctx, 4);
    int rc = pad_check(ctx->op, x, pardo_nn_in_type(ctx, 1), pardo_nn_in_type(ctx, 2), &m, &y, ctx->st);
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 0, x, "input 0 'X'", ctx->st);
    if (rc == PARDO_OK) rc = pardo_grad_expect_float(ctx->op, 2, x, "input 2 'value'", ctx->st);
    if (rc == PARDO_OK && pardo_op_wants_output(ctx->op, 1))
        rc = pardo_errorf(ctx->st, PARDO_ENOTSUP, "output 1 asks for the gradient of the integer pads");
    if (rc == PARDO_OK && dy) rc = pardo_nn_expect_same(dy, "input 4 'dY'", &y, "the forward Y", ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = *x;
    ctx->out[1] = (pardo_type){.dtype = PARDO_I64, .ndim = 1, .shape = {2 * (x->ndim < 0 ? 0 : x->ndim)}};
    ctx->out[2] = (pardo_type){.dtype = x->dtype, .ndim = 0};
    return PARDO_OK;
}

#define PAD_GRAD_KERNEL(SUF, T)                                                                                        \
    static void pad_grad_##SUF(const pad_job *jb, int64_t n, const T *dy, T *dx, T *dv) {                             \
        int64_t oc[PARDO_MAX_DIMS] = {0};                                                                              \
        double s = 0;                                                                                                  \
        for (int64_t e = 0; e < n; e++, pad_next(jb, oc)) {                                                            \
            const int64_t off = pad_source(jb, oc);                                                                    \
            if (off < 0) s += (double)dy[e];                                                                           \
            else if (dx) dx[off] += dy[e];                                                                             \
        }                                                                                                              \
        if (dv) *dv = (T)s;                                                                                            \
    }

PAD_GRAD_KERNEL(f32, float)
PAD_GRAD_KERNEL(f64, double)

static int pad_grad_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *x = ctx->in[0], *dy = pardo_nn_in(ctx, 4), *dx = NULL, *dv = NULL;
    pad_job jb;
    pardo_type ty;
    int rc = pad_job_init(ctx, &jb, &ty);
    if (rc != PARDO_OK) return rc;
    if (pardo_kernel_wants_output(ctx, 1))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "output 1 asks for the gradient of the integer pads");
    const bool want_x = pardo_kernel_wants_output(ctx, 0), want_v = pardo_kernel_wants_output(ctx, 2);
    if ((want_x || want_v) && !pardo_dtype_is_float(x->dtype))
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "input 0 'X' is %s, which has no gradient",
                            pardo_dtype_name(x->dtype));
    if (dy) {
        pardo_type tdy = pardo_tensor_type(dy);
        if ((rc = pardo_nn_expect_same(&tdy, "input 4 'dY'", &ty, "the forward Y", ctx->st)) != PARDO_OK) return rc;
    }
    if (want_x && !(dx = pardo_nn_zeros(ctx, 0, x->dtype, x->ndim, x->shape))) return ctx->st->code;
    if (want_v && !(dv = pardo_nn_zeros(ctx, 2, x->dtype, 0, NULL))) return ctx->st->code;
    if (!dy || (!dx && !dv)) return PARDO_OK;
    if (x->dtype == PARDO_F32)
        pad_grad_f32(&jb, dy->numel, pardo_tensor_data(dy), dx ? pardo_tensor_data(dx) : NULL,
                     dv ? pardo_tensor_data(dv) : NULL);
    else
        pad_grad_f64(&jb, dy->numel, pardo_tensor_data(dy), dx ? pardo_tensor_data(dx) : NULL,
                     dv ? pardo_tensor_data(dv) : NULL);
    return PARDO_OK;
}

const pardo_op_def pardo_op_pad_grad = {
    .type = "pad_grad",
    .doc = "gradient of pad: dY added back where it was read from; the value gets the padded places' sum",
    .inputs = pad_grad_in,
    .n_inputs = 5,
    .outputs = pad_grad_out,
    .n_outputs = 3,
    .attrs = pad_attrs,
    .n_attrs = 3,
    .infer = pad_grad_infer,
    .cpu = pad_grad_cpu,
};
