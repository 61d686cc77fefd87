/* onnx_ops.c - the table from ONNX op types to pardo ops: one mapping per
 * op type, reading the node's attrs (and, from the opset that moved them
 * there, the constant inputs that replaced attrs) and emitting the pardo
 * op or ops that compute the same outputs. What pardo cannot run is
 * refused naming the attr or input. Shape computations that fold at load
 * never reach these (onnx_fold.c). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx_internal.h"

#define MAX_INTS 64

/* Var of input i, which must be present. */
static const char *in_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st) {
    onnx_value *v = onnx_input(c, n, i);
    if (!v) {
        onnx_bad(c, st, "input %d is missing", i);
        return NULL;
    }
    return onnx_var_of(c, v, st);
}

/* Var of optional input i, "" when absent. */
static const char *opt_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st) {
    onnx_value *v = onnx_input(c, n, i);
    return v ? onnx_var_of(c, v, st) : "";
}

/* The int64 values of constant input i (*count; false when not constant). */
static bool const_input_ints(onnx_ctx *c, const Onnx__NodeProto *n, int i, int64_t *out, int *count) {
    onnx_value *v = onnx_input(c, n, i);
    return v && v->konst && onnx_const_ints(v->konst, out, MAX_INTS, count);
}

/* The value of constant scalar input i as a double (false when absent or not constant). */
static bool const_input_scalar(onnx_ctx *c, const Onnx__NodeProto *n, int i, double *out) {
    onnx_value *v = onnx_input(c, n, i);
    if (!v || !v->konst || v->konst->numel != 1) return false;
    *out = pardo_tensor_get_f64(v->konst, 0);
    return true;
}

static pardo_op *emit1(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *const *in, int n_in,
                       pardo_status *st) {
    const char *out = onnx_out_var(c, n, 0, st);
    return out ? onnx_emit(c, type, in, n_in, &out, 1, st) : NULL;
}

static const char *const no_attrs[] = {NULL};

/* A scalar constant var of dtype dt holding v. */
static const char *scalar_const(onnx_ctx *c, pardo_dtype dt, double v, pardo_status *st) {
    pardo_tensor *t = pardo_tensor_new_cpu(dt, 0, NULL, st);
    if (!t) return NULL;
    pardo_tensor_set_f64(t, 0, v);
    return onnx_const_var(c, "k", t, false, st);
}

/* Emits op `type` (in1, in2 or one input) into a fresh temp, or into output 0 when last. */
static const char *step(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *a, const char *b,
                        bool last, pardo_status *st) {
    const char *out = last ? onnx_out_var(c, n, 0, st) : onnx_temp(c, type, st);
    const char *in[2] = {a, b};
    return out && onnx_emit(c, type, in, b ? 2 : 1, &out, 1, st) ? out : NULL;
}

/* The type of input 0 (its var in *x). */
static int input0(onnx_ctx *c, const Onnx__NodeProto *n, const char **x, pardo_type *t, pardo_status *st) {
    if (!(*x = in_var(c, n, 0, st))) return st->code;
    return onnx_type_of(c, *x, t, st);
}


/* ---- elementwise ---- */

#define UNARY(fn, pardo_type)                                                                                      \
    static int fn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {                                     \
        if (onnx_check_attrs(c, n, no_attrs, st) != PARDO_OK) return st->code;                                   \
        const char *x = in_var(c, n, 0, st);                                                                     \
        return x && emit1(c, n, pardo_type, &x, 1, st) ? PARDO_OK : st->code;                                    \
    }
UNARY(map_relu, "relu")
UNARY(map_sigmoid, "sigmoid")
UNARY(map_tanh, "tanh")
UNARY(map_exp, "exp")
UNARY(map_log, "log")
UNARY(map_sqrt, "sqrt")
UNARY(map_abs, "abs")
UNARY(map_neg, "neg")
UNARY(map_erf, "erf")
UNARY(map_not, "not")

static int map_identity(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = in_var(c, n, 0, st);
    return x && emit1(c, n, "identity", &x, 1, st) ? PARDO_OK : st->code;
}

#define BINARY(fn, pardo_type)                                                                                     \
    static int fn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {                                     \
        static const char *const known[] = {"broadcast", "axis", NULL};                                          \
        if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;                                      \
        if (onnx_attr_int(n, "broadcast", 0) && onnx_attr(n, "axis"))                                            \
            return onnx_unsupported(c, st, "legacy broadcast with attr 'axis'");                                 \
        const char *in[2] = {in_var(c, n, 0, st), NULL};                                                         \
        if (!in[0] || !(in[1] = in_var(c, n, 1, st))) return st->code;                                           \
        return emit1(c, n, pardo_type, in, 2, st) ? PARDO_OK : st->code;                                         \
    }
BINARY(map_add, "add")
BINARY(map_sub, "sub")
BINARY(map_mul, "mul")
BINARY(map_div, "div")
BINARY(map_equal, "equal")
BINARY(map_less, "less")
BINARY(map_greater, "greater")
BINARY(map_less_or_equal, "less_or_equal")
BINARY(map_greater_or_equal, "greater_or_equal")
BINARY(map_and, "and")
BINARY(map_or, "or")

/* Sum of any number of inputs: a chain of adds. */
static int map_sum(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (n->n_input < 1) return onnx_bad(c, st, "no inputs");
    const char *acc = in_var(c, n, 0, st);
    if (!acc) return st->code;
    if (n->n_input == 1) return emit1(c, n, "identity", &acc, 1, st) ? PARDO_OK : st->code;
    for (size_t i = 1; i < n->n_input; i++) {
        const char *in[2] = {acc, in_var(c, n, (int)i, st)};
        if (!in[1]) return st->code;
        const char *out = i + 1 == n->n_input ? onnx_out_var(c, n, 0, st) : onnx_temp(c, "sum", st);
        if (!out || !onnx_emit(c, "add", in, 2, &out, 1, st)) return st->code;
        acc = out;
    }
    return PARDO_OK;
}

static int map_pow(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    double e;
    if (!const_input_scalar(c, n, 1, &e))
        return onnx_unsupported(c, st, "input 1 (the exponent) must be a constant scalar; pardo's pow takes a "
                                "constant exponent");
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "pow", &x, 1, st) : NULL;
    return op && onnx_set_float(op, "exponent", e, st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_reciprocal(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "pow", &x, 1, st) : NULL;
    return op && onnx_set_float(op, "exponent", -1.0, st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_leaky_relu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"alpha", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "leaky_relu", &x, 1, st) : NULL;
    return op && onnx_set_float(op, "alpha", onnx_attr_float(n, "alpha", 0.01), st) == PARDO_OK ? PARDO_OK : st->code;
}

/* Clip with bounds known only at run time: where(x < min, min, x), then where(y > max, max, y)
 * (min above max gives max everywhere, as ONNX says). */
static int clip_at_run_time(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *y = in_var(c, n, 0, st);
    for (int k = 1; y && k <= 2; k++) {
        if (!onnx_input(c, n, k)) continue;
        const bool last = k == 2 || !onnx_input(c, n, 2);
        const char *bound = in_var(c, n, k, st), *cond = bound ? step(c, n, k == 1 ? "less" : "greater", y, bound,
                                                                      false, st)
                                                              : NULL;
        const char *out = cond ? (last ? onnx_out_var(c, n, 0, st) : onnx_temp(c, "clip", st)) : NULL;
        const char *in[3] = {cond, bound, y};
        if (!out || !onnx_emit(c, "where", in, 3, &out, 1, st)) return st->code;
        y = out;
    }
    return y ? PARDO_OK : st->code;
}

static int map_clip(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    double lo = -INFINITY, hi = INFINITY;
    bool has_lo, has_hi;
    if (c->opset < 11) {
        has_lo = onnx_attr(n, "min") != NULL;
        has_hi = onnx_attr(n, "max") != NULL;
        lo = onnx_attr_float(n, "min", lo);
        hi = onnx_attr_float(n, "max", hi);
    } else {
        has_lo = onnx_input(c, n, 1) != NULL;
        has_hi = onnx_input(c, n, 2) != NULL;
        if ((has_lo && !const_input_scalar(c, n, 1, &lo)) || (has_hi && !const_input_scalar(c, n, 2, &hi)))
            return clip_at_run_time(c, n, st);
    }
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "clip", &x, 1, st) : NULL;
    if (!op) return st->code;
    if (has_lo && onnx_set_float(op, "min", lo, st) != PARDO_OK) return st->code;
    if (has_hi && onnx_set_float(op, "max", hi, st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

static int map_where(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *in[3];
    for (int i = 0; i < 3; i++)
        if (!(in[i] = in_var(c, n, i, st))) return st->code;
    return emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

/* ---- activations over an axis ---- */

static int map_softmax_like(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    int64_t axis = onnx_attr_int(n, "axis", c->opset >= 13 ? -1 : 1);
    if (c->opset < 13) {
        /* before 13: over the input coerced to 2-D at axis, i.e. every dim from axis on */
        pardo_type t;
        if (onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
        if (axis < 0) axis += t.ndim;
        if (axis != t.ndim - 1) {
            const char *flat = onnx_temp(c, "flat", st), *sm = onnx_temp(c, "softmax", st);
            if (!flat || !sm) return st->code;
            pardo_op *f = onnx_emit(c, "flatten", &x, 1, &flat, 1, st);
            if (!f || onnx_set_int(f, "axis", axis, st) != PARDO_OK) return st->code;
            pardo_op *s = onnx_emit(c, type, &flat, 1, &sm, 1, st);
            if (!s || onnx_set_int(s, "axis", -1, st) != PARDO_OK) return st->code;
            int64_t shape[PARDO_MAX_DIMS];
            for (int i = 0; i < t.ndim; i++) shape[i] = t.shape[i] < 0 ? 0 : t.shape[i];
            for (int i = 0; i < t.ndim; i++)
                if (t.shape[i] < 0 && i >= axis)
                    return onnx_unsupported(c, st, "softmax before opset 13 over a run-time dim");
            pardo_op *r = emit1(c, n, "reshape", &sm, 1, st);
            if (!r) return st->code;
            /* 0 copies a leading run-time dim: flatten's rows keep dim 0 only when axis is 1 */
            if (axis != 1) {
                for (int i = 0; i < t.ndim; i++)
                    if (t.shape[i] < 0)
                        return onnx_unsupported(c, st, "softmax before opset 13 at axis %lld with a run-time dim",
                                                (long long)axis);
            }
            return onnx_set_ints(r, "shape", shape, t.ndim, st);
        }
    }
    pardo_op *op = emit1(c, n, type, &x, 1, st);
    return op && onnx_set_int(op, "axis", axis, st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_softmax(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_softmax_like(c, n, "softmax", st);
}

static int map_log_softmax(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_softmax_like(c, n, "log_softmax", st);
}

/* ---- linear algebra ---- */

static int map_matmul(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, no_attrs, st) != PARDO_OK) return st->code;
    const char *in[2] = {in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = in_var(c, n, 1, st))) return st->code;
    return emit1(c, n, "matmul", in, 2, st) ? PARDO_OK : st->code;
}

/* Gemm: alpha * op(A) op(B) + beta * C. */
static int map_gemm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"alpha", "beta", "transA", "transB", "broadcast", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    double alpha = onnx_attr_float(n, "alpha", 1.0), beta = onnx_attr_float(n, "beta", 1.0);
    const char *a = in_var(c, n, 0, st), *b = a ? in_var(c, n, 1, st) : NULL;
    if (!b) return st->code;
    const char *cv = onnx_input(c, n, 2) && beta != 0.0 ? opt_var(c, n, 2, st) : "";
    if (!cv) return st->code;
    bool bias_in_product = *cv && alpha == 1.0 && beta == 1.0;
    const char *prod = bias_in_product || (!*cv && alpha == 1.0) ? onnx_out_var(c, n, 0, st) : onnx_temp(c, "gemm", st);
    if (!prod) return st->code;
    const char *in[3] = {a, b, cv};
    pardo_op *op = onnx_emit(c, "matmul", in, bias_in_product ? 3 : 2, &prod, 1, st);
    if (!op || onnx_set_bool(op, "transpose_a", onnx_attr_int(n, "transA", 0) != 0, st) != PARDO_OK ||
        onnx_set_bool(op, "transpose_b", onnx_attr_int(n, "transB", 0) != 0, st) != PARDO_OK)
        return st->code;
    if (bias_in_product || (!*cv && alpha == 1.0)) return PARDO_OK;
    const char *scaled = prod;
    if (alpha != 1.0) {
        scaled = *cv ? onnx_temp(c, "gemm", st) : onnx_out_var(c, n, 0, st);
        if (!scaled) return st->code;
        pardo_op *s = onnx_emit(c, "scale", &prod, 1, &scaled, 1, st);
        if (!s || onnx_set_float(s, "scale", alpha, st) != PARDO_OK) return st->code;
    }
    if (!*cv) return PARDO_OK;
    const char *cs = cv;
    if (beta != 1.0) {
        if (!(cs = onnx_temp(c, "gemm_c", st))) return st->code;
        pardo_op *s = onnx_emit(c, "scale", &cv, 1, &cs, 1, st);
        if (!s || onnx_set_float(s, "scale", beta, st) != PARDO_OK) return st->code;
    }
    const char *sum[2] = {scaled, cs};
    return emit1(c, n, "add", sum, 2, st) ? PARDO_OK : st->code;
}

/* ---- reductions ---- */

static int map_reduce(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, int axes_input_from,
                      pardo_status *st) {
    static const char *const known[] = {"axes", "keepdims", "noop_with_empty_axes", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t axes[MAX_INTS];
    int na = 0;
    if (c->opset >= axes_input_from) {
        if (onnx_input(c, n, 1) && !const_input_ints(c, n, 1, axes, &na))
            return onnx_unsupported(c, st, "input 1 (axes) must be a constant");
    } else {
        const int64_t *a = onnx_attr_ints(n, "axes", &na);
        if (na > MAX_INTS) return onnx_unsupported(c, st, "too many axes");
        if (na) memcpy(axes, a, sizeof(int64_t) * (size_t)na);
    }
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    if (na == 0 && onnx_attr_int(n, "noop_with_empty_axes", 0))
        return emit1(c, n, "identity", &x, 1, st) ? PARDO_OK : st->code;
    pardo_op *op = emit1(c, n, type, &x, 1, st);
    if (!op || onnx_set_ints(op, "axes", axes, na, st) != PARDO_OK ||
        onnx_set_bool(op, "keepdims", onnx_attr_int(n, "keepdims", 1) != 0, st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

static int map_reduce_sum(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce(c, n, "reduce_sum", 13, st);
}

static int map_reduce_mean(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce(c, n, "reduce_mean", 18, st);
}

static int map_reduce_max(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce(c, n, "reduce_max", 18, st);
}

/* ArgMax / ArgMin: pardo's argmax of X (ArgMin: of -X), with
 * select_last_index the first max of X reversed along the axis, counted
 * back from the end. */
static int map_arg_extreme(onnx_ctx *c, const Onnx__NodeProto *n, bool min, pardo_status *st) {
    static const char *const known[] = {"axis", "keepdims", "select_last_index", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    pardo_type t;
    if (!x || onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    int64_t axis = onnx_attr_int(n, "axis", 0);
    if (axis < -t.ndim || axis >= t.ndim) return onnx_bad(c, st, "attr 'axis' %lld out of range for rank %d",
                                                          (long long)axis, t.ndim);
    if (axis < 0) axis += t.ndim;
    const bool last = onnx_attr_int(n, "select_last_index", 0) != 0;
    const char *src = x;
    if (min) {
        const char *neg = onnx_temp(c, "neg", st);
        if (!neg) return st->code;
        if (pardo_dtype_is_float(t.dtype)) {
            if (!onnx_emit(c, "neg", &src, 1, &neg, 1, st)) return st->code;
        } else {
            pardo_tensor *zero = pardo_tensor_new_cpu(t.dtype, 0, NULL, st);
            if (!zero) return st->code;
            memset(pardo_tensor_data(zero), 0, zero->nbytes);
            const char *z = onnx_const_var(c, "zero", zero, false, st);
            const char *in[2] = {z, src};
            if (!z || !onnx_emit(c, "sub", in, 2, &neg, 1, st)) return st->code;
        }
        src = neg;
    }
    const int64_t len = t.shape[axis];
    if (last) {
        if (len < 0) return onnx_unsupported(c, st, "attr 'select_last_index' 1 over a run-time dim");
        const char *rev = onnx_temp(c, "reversed", st);
        pardo_op *op = rev ? onnx_emit(c, "slice", &src, 1, &rev, 1, st) : NULL;
        const int64_t start = -1, end = -len - 1, step = -1;
        if (!op || onnx_set_ints(op, "starts", &start, 1, st) != PARDO_OK ||
            onnx_set_ints(op, "ends", &end, 1, st) != PARDO_OK || onnx_set_ints(op, "axes", &axis, 1, st) != PARDO_OK ||
            onnx_set_ints(op, "steps", &step, 1, st) != PARDO_OK)
            return st->code;
        src = rev;
    }
    const char *r = last ? onnx_temp(c, "arg", st) : onnx_out_var(c, n, 0, st);
    pardo_op *op = r ? onnx_emit(c, "argmax", &src, 1, &r, 1, st) : NULL;
    if (!op || onnx_set_int(op, "axis", axis, st) != PARDO_OK ||
        onnx_set_bool(op, "keepdims", onnx_attr_int(n, "keepdims", 1) != 0, st) != PARDO_OK)
        return st->code;
    if (!last) return PARDO_OK;
    pardo_tensor *k = pardo_tensor_new_cpu(PARDO_I64, 0, NULL, st);
    if (!k) return st->code;
    *(int64_t *)pardo_tensor_data(k) = len - 1;
    const char *kv = onnx_const_var(c, "last", k, false, st);
    const char *in[2] = {kv, r};
    return kv && emit1(c, n, "sub", in, 2, st) ? PARDO_OK : st->code;
}

static int map_argmax(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_arg_extreme(c, n, false, st);
}

static int map_argmin(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_arg_extreme(c, n, true, st);
}

/* ---- shapes ---- */

static int map_reshape(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"allowzero", "shape", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    bool allowzero = onnx_attr_int(n, "allowzero", 0) != 0;
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    int64_t shape[MAX_INTS];
    int ns = 0;
    onnx_value *sv = c->opset >= 5 ? onnx_input(c, n, 1) : NULL;
    if (c->opset < 5) {
        const int64_t *a = onnx_attr_ints(n, "shape", &ns);
        if (ns > PARDO_MAX_DIMS) return onnx_unsupported(c, st, "a shape of %d dims", ns);
        if (ns) memcpy(shape, a, sizeof(int64_t) * (size_t)ns);
    } else if (!sv) {
        return onnx_bad(c, st, "input 1 (shape) is missing");
    } else if (sv->konst) {
        if (!onnx_const_ints(sv->konst, shape, PARDO_MAX_DIMS, &ns) || sv->konst->ndim != 1)
            return onnx_unsupported(c, st, "input 1 (shape) must be a 1-D int64 tensor of at most %d elements",
                                    PARDO_MAX_DIMS);
    } else if (sv->sym && !sv->sym_scalar && sv->n_sym <= PARDO_MAX_DIMS) {
        /* a run-time entry becomes the one -1, if the others are all known and none is -1 */
        int unknown = 0;
        ns = sv->n_sym;
        for (int i = 0; i < ns; i++) {
            shape[i] = sv->sym[i].var ? -1 : sv->sym[i].value;
            if (sv->sym[i].var || sv->sym[i].value == -1) unknown++;
        }
        if (unknown > 1) ns = -1; /* computed at run time below */
    } else {
        ns = -1;
    }
    if (ns >= 0 && allowzero)
        for (int i = 0; i < ns; i++)
            if (shape[i] == 0) return onnx_unsupported(c, st, "attr 'allowzero' 1 with a 0 in the shape");
    if (ns < 0) {
        const char *s = in_var(c, n, 1, st);
        if (!s) return st->code;
        const char *in[2] = {x, s};
        pardo_op *op = emit1(c, n, "reshape", in, 2, st);
        return op && (!allowzero || onnx_set_bool(op, "allowzero", true, st) == PARDO_OK) ? PARDO_OK : st->code;
    }
    pardo_op *op = emit1(c, n, "reshape", &x, 1, st);
    return op && onnx_set_ints(op, "shape", shape, ns, st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_flatten(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "flatten", &x, 1, st) : NULL;
    return op && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", 1), st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_transpose(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"perm", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "transpose", &x, 1, st) : NULL;
    if (!op) return st->code;
    int np = 0;
    const int64_t *perm = onnx_attr_ints(n, "perm", &np);
    return perm ? onnx_set_ints(op, "perm", perm, np, st) : PARDO_OK;
}

static int map_concat(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (!onnx_attr(n, "axis")) return onnx_bad(c, st, "attr 'axis' is required");
    const char *in[64];
    if (n->n_input < 1 || n->n_input > 64) return onnx_unsupported(c, st, "%zu inputs", n->n_input);
    for (size_t i = 0; i < n->n_input; i++)
        if (!(in[i] = in_var(c, n, (int)i, st))) return st->code;
    pardo_op *op = emit1(c, n, "concat", in, (int)n->n_input, st);
    return op && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", 0), st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_cast(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"to", "saturate", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t to = onnx_attr_int(n, "to", 0);
    pardo_dtype dt = onnx_dtype((int32_t)to);
    if (dt == PARDO_DTYPE_UNKNOWN)
        return onnx_unsupported(c, st, "attr 'to' %s; pardo runs float32, float64, int32, int64 and bool",
                                onnx_dtype_name((int32_t)to));
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "cast", &x, 1, st) : NULL;
    return op && onnx_set_string(op, "dtype", pardo_dtype_name(dt), st) == PARDO_OK ? PARDO_OK : st->code;
}

/* Unsqueeze / Squeeze: axes from the attr before opset 13, from input 1 after. */
static int map_squeeze_like(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"axes", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t axes[MAX_INTS];
    int na = 0;
    bool has = false;
    if (c->opset >= 13) {
        if (onnx_input(c, n, 1)) {
            has = true;
            if (!const_input_ints(c, n, 1, axes, &na)) return onnx_unsupported(c, st, "input 1 (axes) must be a constant");
        }
    } else if (onnx_attr(n, "axes")) {
        const int64_t *a = onnx_attr_ints(n, "axes", &na);
        if (na > MAX_INTS) return onnx_unsupported(c, st, "too many axes");
        if (na) memcpy(axes, a, sizeof(int64_t) * (size_t)na);
        has = true;
    }
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, type, &x, 1, st) : NULL;
    if (!op) return st->code;
    return has ? onnx_set_ints(op, "axes", axes, na, st) : PARDO_OK;
}

static int map_unsqueeze(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_squeeze_like(c, n, "unsqueeze", st);
}

static int map_squeeze(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_squeeze_like(c, n, "squeeze", st);
}

static int map_shape(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = in_var(c, n, 0, st);
    pardo_op *op = x ? emit1(c, n, "shape", &x, 1, st) : NULL;
    if (!op) return st->code;
    if (onnx_attr(n, "start") && onnx_set_int(op, "start", onnx_attr_int(n, "start", 0), st) != PARDO_OK)
        return st->code;
    if (onnx_attr(n, "end") && onnx_set_int(op, "end", onnx_attr_int(n, "end", 0), st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

/* Gather: an embedding where a 2-D float param is read along axis 0, else pardo's gather. */
static int map_gather(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t axis = onnx_attr_int(n, "axis", 0);
    onnx_value *data = onnx_input(c, n, 0);
    const char *d = in_var(c, n, 0, st), *idx = d ? in_var(c, n, 1, st) : NULL;
    if (!idx) return st->code;
    if (axis == 0 && data->initializer && data->konst && data->konst->ndim == 2 &&
        pardo_dtype_is_float(data->konst->dtype)) {
        /* embedding wants indices in [0, V): fine for exported embeddings, which never index from the end */
        const char *in[2] = {d, idx};
        return emit1(c, n, "embedding", in, 2, st) ? PARDO_OK : st->code;
    }
    const char *in[2] = {d, idx};
    pardo_op *op = emit1(c, n, "gather", in, 2, st);
    return op && onnx_set_int(op, "axis", axis, st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_slice(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"starts", "ends", "axes", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    static const char *const names[] = {"starts", "ends", "axes", "steps"};
    int64_t v[4][MAX_INTS];
    int cnt[4] = {0};
    bool have[4] = {false}, runtime = false;
    for (int k = 0; k < 4; k++) {
        if (c->opset < 10) {
            const int64_t *a = onnx_attr_ints(n, names[k], &cnt[k]);
            if (a && cnt[k] <= MAX_INTS) {
                memcpy(v[k], a, sizeof(int64_t) * (size_t)cnt[k]);
                have[k] = true;
            }
        } else if (onnx_input(c, n, k + 1)) {
            have[k] = true;
            if (!const_input_ints(c, n, k + 1, v[k], &cnt[k])) runtime = true;
        }
    }
    if (runtime) { /* bounds known only at run time: pardo's slice takes them as inputs */
        const char *in[5] = {x, opt_var(c, n, 1, st), opt_var(c, n, 2, st), opt_var(c, n, 3, st),
                             opt_var(c, n, 4, st)};
        for (int i = 1; i < 5; i++)
            if (!in[i]) return st->code;
        return emit1(c, n, "slice", in, 5, st) ? PARDO_OK : st->code;
    }
    pardo_op *op = emit1(c, n, "slice", &x, 1, st);
    if (!op) return st->code;
    for (int k = 0; k < 4; k++)
        if (have[k] && onnx_set_ints(op, names[k], v[k], cnt[k], st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

static int map_expand(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *in[2] = {in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = in_var(c, n, 1, st))) return st->code;
    return emit1(c, n, "expand", in, 2, st) ? PARDO_OK : st->code;
}

static int map_constant_of_shape(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *s = in_var(c, n, 0, st);
    pardo_op *op = s ? emit1(c, n, "constant_of_shape", &s, 1, st) : NULL;
    if (!op) return st->code;
    const Onnx__AttributeProto *a = onnx_attr(n, "value");
    if (a && a->t) {
        pardo_tensor *t;
        char what[600];
        snprintf(what, sizeof what, "%s: node '%s' attr 'value'", c->path, n->name ? n->name : "");
        if (onnx_tensor_to_pardo(a->t, c->dir, what, &t, st) != PARDO_OK) return st->code;
        double x = t->numel == 1 ? pardo_tensor_get_f64(t, 0) : 0;
        pardo_dtype dt = t->dtype;
        bool one = t->numel == 1;
        pardo_tensor_release(t);
        if (!one) return onnx_bad(c, st, "attr 'value' must hold one element");
        if (onnx_set_float(op, "value", x, st) != PARDO_OK ||
            onnx_set_string(op, "dtype", pardo_dtype_name(dt), st) != PARDO_OK)
            return st->code;
    }
    return PARDO_OK;
}

static int map_range(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *in[3];
    for (int i = 0; i < 3; i++)
        if (!(in[i] = in_var(c, n, i, st))) return st->code;
    return emit1(c, n, "range", in, 3, st) ? PARDO_OK : st->code;
}

/* Split into n outputs along axis: one slice each. */
static int map_split(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", "split", "num_outputs", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    pardo_type t;
    if (onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    int64_t axis = onnx_attr_int(n, "axis", 0);
    if (axis < 0) axis += t.ndim;
    if (axis < 0 || axis >= t.ndim) return onnx_bad(c, st, "attr 'axis' out of range for rank %d", t.ndim);
    int64_t sizes[MAX_INTS];
    int ns = 0, nout = (int)n->n_output;
    if (nout > MAX_INTS) return onnx_unsupported(c, st, "%d outputs", nout);
    if (c->opset >= 13 && onnx_input(c, n, 1)) {
        if (!const_input_ints(c, n, 1, sizes, &ns)) return onnx_unsupported(c, st, "input 1 (split) must be a constant");
    } else if (onnx_attr(n, "split")) {
        const int64_t *a = onnx_attr_ints(n, "split", &ns);
        if (ns > MAX_INTS) return onnx_unsupported(c, st, "too many parts");
        memcpy(sizes, a, sizeof(int64_t) * (size_t)ns);
    }
    if (ns == 0) {
        if (t.shape[axis] < 0) return onnx_unsupported(c, st, "an even split of a run-time dim");
        int64_t each = (t.shape[axis] + nout - 1) / nout;
        for (int i = 0; i < nout; i++) {
            int64_t left = t.shape[axis] - each * i;
            sizes[i] = left < each ? (left > 0 ? left : 0) : each;
        }
        ns = nout;
    }
    if (ns != nout) return onnx_bad(c, st, "%d split sizes for %d outputs", ns, nout);
    int64_t start = 0;
    for (int i = 0; i < nout; i++) {
        const char *out = onnx_out_var(c, n, i, st);
        if (!out) return st->code;
        pardo_op *op = onnx_emit(c, "slice", &x, 1, &out, 1, st);
        int64_t s = start, e = start + sizes[i];
        if (!op || onnx_set_ints(op, "starts", &s, 1, st) != PARDO_OK || onnx_set_ints(op, "ends", &e, 1, st) ||
            onnx_set_ints(op, "axes", &axis, 1, st) != PARDO_OK)
            return st->code;
        start = e;
    }
    return PARDO_OK;
}

/* ---- network ops ---- */

/* The 2-D window attrs of Conv / MaxPool / AveragePool, checked. */
/* xt: the input's type, asked for before op was emitted (op has no attrs yet: inference would refuse it). */
static int window_attrs(onnx_ctx *c, const Onnx__NodeProto *n, const pardo_type *xt, const int64_t *kernel,
                        pardo_op *op, bool pool, pardo_status *st) {
    int ns = 0, np = 0, nd = 0;
    const int64_t *strides = onnx_attr_ints(n, "strides", &ns), *pads = onnx_attr_ints(n, "pads", &np),
                  *dil = onnx_attr_ints(n, "dilations", &nd);
    int64_t s[2] = {1, 1}, p[4] = {0, 0, 0, 0}, d[2] = {1, 1};
    if (strides) {
        if (ns != 2) return onnx_unsupported(c, st, "attr 'strides' of %d dims; pardo runs 2-D windows", ns);
        memcpy(s, strides, sizeof s);
    }
    if (dil) {
        if (nd != 2) return onnx_unsupported(c, st, "attr 'dilations' of %d dims; pardo runs 2-D windows", nd);
        memcpy(d, dil, sizeof d);
    }
    char ap[32];
    const char *auto_pad = onnx_attr_string(n, "auto_pad", "NOTSET", ap, sizeof ap);
    if (strcmp(auto_pad, "NOTSET") == 0) {
        if (pads) {
            if (np != 4) return onnx_unsupported(c, st, "attr 'pads' of %d values; pardo runs 2-D windows", np);
            memcpy(p, pads, sizeof p);
        }
    } else if (strcmp(auto_pad, "VALID") != 0) {
        bool upper = strcmp(auto_pad, "SAME_UPPER") == 0;
        if (!upper && strcmp(auto_pad, "SAME_LOWER") != 0)
            return onnx_bad(c, st, "attr 'auto_pad' '%s' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", auto_pad);
        for (int i = 0; i < 2; i++) {
            int64_t in = xt->ndim == 4 ? xt->shape[2 + i] : -1;
            if (in < 0) return onnx_unsupported(c, st, "auto_pad SAME over a run-time spatial dim");
            int64_t out = (in + s[i] - 1) / s[i], eff = (kernel[i] - 1) * d[i] + 1;
            int64_t total = (out - 1) * s[i] + eff - in;
            if (total < 0) total = 0;
            p[i] = upper ? total / 2 : total - total / 2;
            p[i + 2] = total - p[i];
        }
    }
    if (onnx_set_ints(op, "strides", s, 2, st) != PARDO_OK || onnx_set_ints(op, "pads", p, 4, st) != PARDO_OK)
        return st->code;
    if (!pool) return onnx_set_ints(op, "dilations", d, 2, st);
    if (d[0] != 1 || d[1] != 1) return onnx_unsupported(c, st, "attr 'dilations' other than 1 on a pool");
    return onnx_set_ints(op, "kernel", kernel, 2, st);
}

static int map_conv(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st), *w = x ? in_var(c, n, 1, st) : NULL, *b = w ? opt_var(c, n, 2, st) : NULL;
    if (!b) return st->code;
    pardo_type wt;
    if (onnx_type_of(c, w, &wt, st) != PARDO_OK) return st->code;
    if (wt.ndim != 4) return onnx_unsupported(c, st, "a %d-D convolution; pardo runs 2-D (NCHW)", wt.ndim - 2);
    int nk = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk);
    int64_t kernel[2] = {wt.shape[2], wt.shape[3]};
    if (ks && (nk != 2 || ks[0] != kernel[0] || ks[1] != kernel[1]))
        return onnx_bad(c, st, "attr 'kernel_shape' does not match the weight's dims");
    pardo_type xt;
    if (onnx_type_of(c, x, &xt, st) != PARDO_OK) return st->code;
    const char *in[3] = {x, w, b};
    pardo_op *op = emit1(c, n, "conv2d", in, *b ? 3 : 2, st);
    if (!op || window_attrs(c, n, &xt, kernel, op, false, st) != PARDO_OK ||
        onnx_set_int(op, "group", onnx_attr_int(n, "group", 1), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

static int map_pool(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                                        "pads", "storage_order", "strides", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (onnx_attr_int(n, "ceil_mode", 0)) return onnx_unsupported(c, st, "attr 'ceil_mode' 1");
    if (onnx_attr_int(n, "storage_order", 0)) return onnx_unsupported(c, st, "attr 'storage_order' 1");
    if (onnx_attr_int(n, "count_include_pad", 0)) return onnx_unsupported(c, st, "attr 'count_include_pad' 1");
    if (n->n_output > 1 && n->output[1] && *n->output[1])
        return onnx_unsupported(c, st, "output 1 (the max indices)");
    int nk = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk);
    if (!ks) return onnx_bad(c, st, "attr 'kernel_shape' is required");
    if (nk != 2) return onnx_unsupported(c, st, "a %d-D pool; pardo runs 2-D (NCHW)", nk);
    const char *x = in_var(c, n, 0, st);
    pardo_type xt;
    if (!x || onnx_type_of(c, x, &xt, st) != PARDO_OK) return st->code;
    pardo_op *op = emit1(c, n, type, &x, 1, st);
    return op && window_attrs(c, n, &xt, ks, op, true, st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_max_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_pool(c, n, "max_pool2d", st);
}

static int map_average_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_pool(c, n, "avg_pool2d", st);
}

static int map_global_pool(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    if (onnx_check_attrs(c, n, no_attrs, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    pardo_type t;
    if (onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 3) return onnx_bad(c, st, "input of rank %d; expected [N, C, spatial...]", t.ndim);
    int64_t axes[PARDO_MAX_DIMS];
    for (int i = 2; i < t.ndim; i++) axes[i - 2] = i;
    pardo_op *op = emit1(c, n, type, &x, 1, st);
    return op && onnx_set_ints(op, "axes", axes, t.ndim - 2, st) == PARDO_OK &&
                   onnx_set_bool(op, "keepdims", true, st) == PARDO_OK
               ? PARDO_OK
               : st->code;
}

static int map_global_average_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_global_pool(c, n, "reduce_mean", st);
}

static int map_global_max_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_global_pool(c, n, "reduce_max", st);
}

/* BatchNormalization whose statistics or scale are known only at run time:
 * y = (x - mean) / sqrt(var + epsilon) * scale + B, each [C] input
 * unsqueezed to [C, 1, ...] against x [N, C, ...]. */
static int batch_norm_at_run_time(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = in_var(c, n, 0, st), *in[4];
    pardo_type t;
    if (!x || onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 2) return onnx_bad(c, st, "input of rank %d; expected [N, C, ...]", t.ndim);
    int64_t axes[PARDO_MAX_DIMS];
    for (int i = 2; i < t.ndim; i++) axes[i - 2] = i - 1;
    for (int i = 0; i < 4; i++) {
        const char *v = in_var(c, n, i + 1, st);
        if (!v) return st->code;
        in[i] = v;
        if (t.ndim > 2) {
            const char *u = onnx_temp(c, "bn_c", st);
            pardo_op *op = u ? onnx_emit(c, "unsqueeze", &v, 1, &u, 1, st) : NULL;
            if (!op || onnx_set_ints(op, "axes", axes, t.ndim - 2, st) != PARDO_OK) return st->code;
            in[i] = u;
        }
    }
    const char *centred = onnx_temp(c, "bn", st), *veps = onnx_temp(c, "bn", st), *sd = onnx_temp(c, "bn", st),
               *norm = onnx_temp(c, "bn", st), *scaled = onnx_temp(c, "bn", st);
    if (!scaled) return st->code;
    const char *sub[2] = {x, in[2]}, *div[2] = {centred, sd}, *mul[2] = {norm, in[0]}, *add[2] = {scaled, in[1]};
    pardo_op *op;
    if (!onnx_emit(c, "sub", sub, 2, &centred, 1, st) || !(op = onnx_emit(c, "scale", &in[3], 1, &veps, 1, st)) ||
        onnx_set_float(op, "bias", onnx_attr_float(n, "epsilon", 1e-5), st) != PARDO_OK ||
        !onnx_emit(c, "sqrt", &veps, 1, &sd, 1, st) || !onnx_emit(c, "div", div, 2, &norm, 1, st) ||
        !onnx_emit(c, "mul", mul, 2, &scaled, 1, st))
        return st->code;
    return emit1(c, n, "add", add, 2, st) ? PARDO_OK : st->code;
}

/* BatchNormalization with statistics known at load: a batch_norm op, its scale and bias params, its
 * running mean and var state vars (the model's weights), so that a fine-tuned model normalises with each
 * batch's statistics and updates the running ones, and eval mode uses those. */
static int map_batch_norm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"epsilon", "momentum", "spatial", "training_mode", "is_test", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (onnx_attr_int(n, "training_mode", 0)) return onnx_unsupported(c, st, "attr 'training_mode' 1");
    for (size_t i = 1; i < n->n_output; i++)
        if (n->output[i] && *n->output[i]) return onnx_unsupported(c, st, "output %zu (training statistics)", i);
    onnx_value *p[4];
    bool konst = true;
    for (int i = 0; i < 4; i++) {
        if (!(p[i] = onnx_input(c, n, i + 1))) return onnx_bad(c, st, "input %d is missing", i + 1);
        konst = konst && p[i]->konst && pardo_dtype_is_float(p[i]->konst->dtype) && p[i]->konst->ndim == 1;
    }
    if (!konst) return batch_norm_at_run_time(c, n, st);
    int64_t ch = p[0]->konst->numel;
    for (int i = 1; i < 4; i++)
        if (p[i]->konst->numel != ch) return onnx_bad(c, st, "input %d has %lld elements, input 1 %lld", i + 1,
                                                      (long long)p[i]->konst->numel, (long long)ch);
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    pardo_type t;
    if (onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 2) return onnx_bad(c, st, "input of rank %d; expected [N, C, ...]", t.ndim);
    for (int i = 0; i < 4; i++)
        if (p[i]->konst->dtype != t.dtype)
            return onnx_bad(c, st, "input %d is %s, X %s", i + 1, pardo_dtype_name(p[i]->konst->dtype),
                            pardo_dtype_name(t.dtype));
    /* batch_norm: scale and bias params, the running statistics state it updates when training (pardo train,
     * pardo run --train) and reads otherwise */
    const char *in[5] = {x, onnx_var_of(c, p[0], st), NULL, NULL, NULL};
    if (!in[1] || !(in[2] = onnx_var_of(c, p[1], st)) || !(in[3] = onnx_state_var(c, p[2], st)) ||
        !(in[4] = onnx_state_var(c, p[3], st)))
        return st->code;
    const char *out[3] = {onnx_out_var(c, n, 0, st), in[3], in[4]};
    if (!out[0]) return st->code;
    pardo_op *op = onnx_emit(c, "batch_norm", in, 5, out, 3, st);
    return op && onnx_set_float(op, "epsilon", onnx_attr_float(n, "epsilon", 1e-5), st) == PARDO_OK &&
                   onnx_set_float(op, "momentum", onnx_attr_float(n, "momentum", 0.9), st) == PARDO_OK
               ? PARDO_OK
               : st->code;
}

static int map_layer_norm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[3] = {in_var(c, n, 0, st), NULL, NULL};
    if (!in[0] || !(in[1] = opt_var(c, n, 1, st)) || !(in[2] = opt_var(c, n, 2, st))) return st->code;
    const char *outs[3];
    int no = 0;
    for (size_t i = 0; i < n->n_output && i < 3; i++) {
        if (!n->output[i] || !*n->output[i]) {
            outs[no++] = "";
            continue;
        }
        if (!(outs[no++] = onnx_out_var(c, n, (int)i, st))) return st->code;
    }
    pardo_op *op = onnx_emit(c, "layer_norm", in, 3, outs, no, st);
    return op && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", -1), st) == PARDO_OK &&
                   onnx_set_float(op, "epsilon", onnx_attr_float(n, "epsilon", 1e-5), st) == PARDO_OK
               ? PARDO_OK
               : st->code;
}

/* Dropout at inference: the identity, and its mask (output 1) all true. */
static int map_dropout(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (c->opset >= 12 && onnx_input(c, n, 2)) {
        double training;
        if (!const_input_scalar(c, n, 2, &training) || training != 0)
            return onnx_unsupported(c, st, "training_mode true (pardo imports models for inference)");
    }
    const char *x = in_var(c, n, 0, st);
    return x && emit1(c, n, "identity", &x, 1, st) ? PARDO_OK : st->code;
}

/* Size folds at load (onnx_fold.c) unless its input has two run-time dims. */
static int map_size(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    (void)n;
    return onnx_unsupported(c, st, "the size of a tensor with two or more run-time dims");
}

/* ---- composites: ops ONNX has and pardo builds from its own ---- */

/* Max / Min of any number of inputs (numpy broadcasting): where(a > b, a, b) pairwise. */
static int map_max_min(onnx_ctx *c, const Onnx__NodeProto *n, bool max, pardo_status *st) {
    if (n->n_input < 1) return onnx_bad(c, st, "no inputs");
    const char *acc = in_var(c, n, 0, st);
    if (!acc) return st->code;
    if (n->n_input == 1) return emit1(c, n, "identity", &acc, 1, st) ? PARDO_OK : st->code;
    for (size_t i = 1; i < n->n_input; i++) {
        const char *b = in_var(c, n, (int)i, st), *cond = b ? step(c, n, max ? "greater" : "less", acc, b, false, st) : NULL;
        if (!cond) return st->code;
        const bool last = i + 1 == n->n_input;
        const char *out = last ? onnx_out_var(c, n, 0, st) : onnx_temp(c, "extreme", st);
        const char *in[3] = {cond, acc, b};
        if (!out || !onnx_emit(c, "where", in, 3, &out, 1, st)) return st->code;
        acc = out;
    }
    return PARDO_OK;
}

static int map_max(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_max_min(c, n, true, st); }
static int map_min(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_max_min(c, n, false, st); }

/* Mean of any number of inputs: their sum scaled by 1/n. */
static int map_mean(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (n->n_input < 1) return onnx_bad(c, st, "no inputs");
    const char *acc = in_var(c, n, 0, st);
    for (size_t i = 1; acc && i < n->n_input; i++) {
        const char *b = in_var(c, n, (int)i, st);
        acc = b ? step(c, n, "add", acc, b, false, st) : NULL;
    }
    pardo_op *op = acc ? emit1(c, n, "scale", &acc, 1, st) : NULL;
    return op && onnx_set_float(op, "scale", 1.0 / (double)n->n_input, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* The Reduce family over pardo's reduce_sum / reduce_max: f(reduce(g(x))). */
static int map_reduce_composite(onnx_ctx *c, const Onnx__NodeProto *n, const char *pre, const char *reduce,
                                const char *post, pardo_status *st) {
    static const char *const known[] = {"axes", "keepdims", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int na = 0;
    const int64_t *axes = onnx_attr_ints(n, "axes", &na);
    const char *x = in_var(c, n, 0, st);
    if (!x) return st->code;
    if (pre && strcmp(pre, "square") == 0) x = step(c, n, "mul", x, x, false, st);
    else if (pre) x = step(c, n, pre, x, NULL, false, st);
    if (!x) return st->code;
    const char *r = post ? onnx_temp(c, reduce, st) : onnx_out_var(c, n, 0, st);
    pardo_op *op = r ? onnx_emit(c, reduce, &x, 1, &r, 1, st) : NULL;
    if (!op || onnx_set_ints(op, "axes", axes, na, st) != PARDO_OK ||
        onnx_set_bool(op, "keepdims", onnx_attr_int(n, "keepdims", 1) != 0, st) != PARDO_OK)
        return st->code;
    return !post || step(c, n, post, r, NULL, true, st) ? PARDO_OK : st->code;
}

static int map_reduce_l1(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce_composite(c, n, "abs", "reduce_sum", NULL, st);
}
static int map_reduce_l2(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce_composite(c, n, "square", "reduce_sum", "sqrt", st);
}
static int map_reduce_sum_square(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce_composite(c, n, "square", "reduce_sum", NULL, st);
}
static int map_reduce_log_sum(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce_composite(c, n, NULL, "reduce_sum", "log", st);
}
/* ReduceLogSumExp = log(sum(exp(x - m))) + m with m the max over the axes (no overflow for big x). */
static int map_reduce_log_sum_exp(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axes", "keepdims", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int na = 0;
    const int64_t *axes = onnx_attr_ints(n, "axes", &na);
    const bool keep = onnx_attr_int(n, "keepdims", 1) != 0;
    const char *x = in_var(c, n, 0, st), *r[3] = {NULL, NULL, NULL};
    static const char *const types[3] = {"reduce_max", "reduce_sum", "reduce_max"};
    const char *src[3] = {x, NULL, x};
    for (int i = 0; x && i < 3; i++) {
        if (i == 1) { /* exp(x - m) */
            const char *d = step(c, n, "sub", x, r[0], false, st);
            if (!d || !(src[1] = step(c, n, "exp", d, NULL, false, st))) return st->code;
        }
        pardo_op *op = (r[i] = onnx_temp(c, "lse", st)) ? onnx_emit(c, types[i], &src[i], 1, &r[i], 1, st) : NULL;
        if (!op || onnx_set_ints(op, "axes", axes, na, st) != PARDO_OK ||
            onnx_set_bool(op, "keepdims", i == 0 || keep, st) != PARDO_OK)
            return st->code;
    }
    const char *l = x ? step(c, n, "log", r[1], NULL, false, st) : NULL;
    return l && step(c, n, "add", l, r[2], true, st) ? PARDO_OK : st->code;
}
/* ReduceMin = -reduce_max(-x), for floats. */
static int map_reduce_min(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_reduce_composite(c, n, "neg", "reduce_max", "neg", st);
}

/* Softplus = log(exp(x) + 1); Softsign = x / (1 + |x|). */
static int map_softplus(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = in_var(c, n, 0, st), *e = x ? step(c, n, "exp", x, NULL, false, st) : NULL;
    const char *p1 = e ? onnx_temp(c, "softplus", st) : NULL;
    pardo_op *op = p1 ? onnx_emit(c, "scale", &e, 1, &p1, 1, st) : NULL;
    if (!op || onnx_set_float(op, "bias", 1.0, st) != PARDO_OK) return st->code;
    return step(c, n, "log", p1, NULL, true, st) ? PARDO_OK : st->code;
}

static int map_softsign(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = in_var(c, n, 0, st), *a = x ? step(c, n, "abs", x, NULL, false, st) : NULL;
    const char *d = a ? onnx_temp(c, "softsign", st) : NULL;
    pardo_op *op = d ? onnx_emit(c, "scale", &a, 1, &d, 1, st) : NULL;
    if (!op || onnx_set_float(op, "bias", 1.0, st) != PARDO_OK) return st->code;
    return step(c, n, "div", x, d, true, st) ? PARDO_OK : st->code;
}

/* HardSigmoid = clip(alpha x + beta, 0, 1). */
static int map_hard_sigmoid(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"alpha", "beta", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st), *l = x ? onnx_temp(c, "hard_sigmoid", st) : NULL;
    pardo_op *op = l ? onnx_emit(c, "scale", &x, 1, &l, 1, st) : NULL;
    if (!op || onnx_set_float(op, "scale", onnx_attr_float(n, "alpha", 0.2), st) != PARDO_OK ||
        onnx_set_float(op, "bias", onnx_attr_float(n, "beta", 0.5), st) != PARDO_OK)
        return st->code;
    op = emit1(c, n, "clip", &l, 1, st);
    return op && onnx_set_float(op, "min", 0.0, st) == PARDO_OK && onnx_set_float(op, "max", 1.0, st) == PARDO_OK
               ? PARDO_OK
               : st->code;
}

/* ThresholdedRelu = where(x > alpha, x, 0). */
static int map_thresholded_relu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const char *alpha = scalar_const(c, t.dtype, onnx_attr_float(n, "alpha", 1.0), st),
               *zero = alpha ? scalar_const(c, t.dtype, 0, st) : NULL,
               *cond = zero ? step(c, n, "greater", x, alpha, false, st) : NULL;
    const char *in[3] = {cond, x, zero};
    return cond && emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

/* Elu = where(x > 0, x, alpha (exp(x) - 1)); Selu = gamma times that with alpha. */
static int map_elu_like(onnx_ctx *c, const Onnx__NodeProto *n, double alpha, double gamma, pardo_status *st) {
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const char *zero = scalar_const(c, t.dtype, 0, st), *e = zero ? step(c, n, "exp", x, NULL, false, st) : NULL;
    const char *neg = e ? onnx_temp(c, "elu", st) : NULL, *pos = neg ? onnx_temp(c, "elu", st) : NULL;
    pardo_op *op = pos ? onnx_emit(c, "scale", &e, 1, &neg, 1, st) : NULL;
    if (!op || onnx_set_float(op, "scale", alpha * gamma, st) != PARDO_OK ||
        onnx_set_float(op, "bias", -alpha * gamma, st) != PARDO_OK)
        return st->code;
    if (!(op = onnx_emit(c, "scale", &x, 1, &pos, 1, st)) || onnx_set_float(op, "scale", gamma, st) != PARDO_OK)
        return st->code;
    const char *cond = step(c, n, "greater", x, zero, false, st);
    const char *in[3] = {cond, pos, neg};
    return cond && emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

static int map_elu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_elu_like(c, n, onnx_attr_float(n, "alpha", 1.0), 1.0, st);
}

static int map_selu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_elu_like(c, n, onnx_attr_float(n, "alpha", 1.67326319217681884765625),
                        onnx_attr_float(n, "gamma", 1.05070102214813232421875), st);
}

/* PRelu = where(x < 0, slope x, x), slope broadcast. */
static int map_prelu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const char *slope = in_var(c, n, 1, st), *zero = slope ? scalar_const(c, t.dtype, 0, st) : NULL;
    const char *sx = zero ? step(c, n, "mul", x, slope, false, st) : NULL;
    const char *cond = sx ? step(c, n, "less", x, zero, false, st) : NULL;
    const char *in[3] = {cond, sx, x};
    return cond && emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

/* Sign = where(x > 0, 1, where(x < 0, -1, 0)). */
static int map_sign(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const char *one = scalar_const(c, t.dtype, 1, st), *minus = one ? scalar_const(c, t.dtype, -1, st) : NULL,
               *zero = minus ? scalar_const(c, t.dtype, 0, st) : NULL;
    const char *lt = zero ? step(c, n, "less", x, zero, false, st) : NULL;
    const char *gt = lt ? step(c, n, "greater", x, zero, false, st) : NULL;
    const char *inner = gt ? onnx_temp(c, "sign", st) : NULL;
    const char *in1[3] = {lt, minus, zero};
    if (!inner || !onnx_emit(c, "where", in1, 3, &inner, 1, st)) return st->code;
    const char *in2[3] = {gt, one, inner};
    return emit1(c, n, "where", in2, 3, st) ? PARDO_OK : st->code;
}

/* Xor of bools = not(a == b). */
static int map_xor(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *a = in_var(c, n, 0, st), *b = a ? in_var(c, n, 1, st) : NULL;
    const char *e = b ? step(c, n, "equal", a, b, false, st) : NULL;
    return e && step(c, n, "not", e, NULL, true, st) ? PARDO_OK : st->code;
}

/* Trilu over static last two dims: a constant mask, where(mask, x, 0). */
static int map_trilu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"upper", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 2 || t.shape[t.ndim - 1] < 0 || t.shape[t.ndim - 2] < 0)
        return onnx_unsupported(c, st, "Trilu over run-time matrix dims");
    double k = 0;
    if (onnx_input(c, n, 1) && !const_input_scalar(c, n, 1, &k))
        return onnx_unsupported(c, st, "input 1 (k) must be a constant");
    const bool upper = onnx_attr_int(n, "upper", 1) != 0;
    int64_t dims[2] = {t.shape[t.ndim - 2], t.shape[t.ndim - 1]};
    pardo_tensor *m = pardo_tensor_new_cpu(PARDO_BOOL, 2, dims, st);
    if (!m) return st->code;
    uint8_t *md = pardo_tensor_data(m);
    for (int64_t i = 0; i < dims[0]; i++)
        for (int64_t j = 0; j < dims[1]; j++) md[i * dims[1] + j] = upper ? (double)(j - i) >= k : (double)(j - i) <= k;
    const char *mask = onnx_const_var(c, "trilu_mask", m, false, st), *zero = mask ? scalar_const(c, t.dtype, 0, st) : NULL;
    const char *in[3] = {mask, x, zero};
    return zero && emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

/* Shrink = where(x < -lambd, x + bias, where(x > lambd, x - bias, 0)). */
static int map_shrink(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"lambd", "bias", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const double lambd = onnx_attr_float(n, "lambd", 0.5), bias = onnx_attr_float(n, "bias", 0.0);
    const char *lo = scalar_const(c, t.dtype, -lambd, st), *hi = lo ? scalar_const(c, t.dtype, lambd, st) : NULL,
               *zero = hi ? scalar_const(c, t.dtype, 0, st) : NULL;
    const char *up = zero ? onnx_temp(c, "shrink", st) : NULL, *down = up ? onnx_temp(c, "shrink", st) : NULL;
    pardo_op *op = down ? onnx_emit(c, "scale", &x, 1, &up, 1, st) : NULL;
    if (!op || onnx_set_float(op, "bias", bias, st) != PARDO_OK) return st->code;
    if (!(op = onnx_emit(c, "scale", &x, 1, &down, 1, st)) || onnx_set_float(op, "bias", -bias, st) != PARDO_OK)
        return st->code;
    const char *gt = step(c, n, "greater", x, hi, false, st), *inner = gt ? onnx_temp(c, "shrink", st) : NULL;
    const char *in1[3] = {gt, down, zero};
    if (!inner || !onnx_emit(c, "where", in1, 3, &inner, 1, st)) return st->code;
    const char *lt = step(c, n, "less", x, lo, false, st);
    const char *in2[3] = {lt, up, inner};
    return lt && emit1(c, n, "where", in2, 3, st) ? PARDO_OK : st->code;
}

/* HardSwish = x * clip(x / 6 + 1/2, 0, 1). */
static int map_hard_swish(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, no_attrs, st) != PARDO_OK) return st->code;
    const char *x = in_var(c, n, 0, st), *l = x ? onnx_temp(c, "hard_swish", st) : NULL,
               *h = l ? onnx_temp(c, "hard_swish", st) : NULL;
    pardo_op *op = h ? onnx_emit(c, "scale", &x, 1, &l, 1, st) : NULL;
    if (!op || onnx_set_float(op, "scale", 1.0 / 6.0, st) != PARDO_OK || onnx_set_float(op, "bias", 0.5, st) != PARDO_OK)
        return st->code;
    if (!(op = onnx_emit(c, "clip", &l, 1, &h, 1, st)) || onnx_set_float(op, "min", 0.0, st) != PARDO_OK ||
        onnx_set_float(op, "max", 1.0, st) != PARDO_OK)
        return st->code;
    return step(c, n, "mul", x, h, true, st) ? PARDO_OK : st->code;
}

/* Celu = where(x > 0, x, alpha (exp(x / alpha) - 1)). */
static int map_celu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"alpha", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const double alpha = onnx_attr_float(n, "alpha", 1.0);
    if (alpha == 0) return onnx_bad(c, st, "attr 'alpha' is 0");
    const char *zero = scalar_const(c, t.dtype, 0, st), *xs = zero ? onnx_temp(c, "celu", st) : NULL;
    pardo_op *op = xs ? onnx_emit(c, "scale", &x, 1, &xs, 1, st) : NULL;
    if (!op || onnx_set_float(op, "scale", 1.0 / alpha, st) != PARDO_OK) return st->code;
    const char *e = step(c, n, "exp", xs, NULL, false, st), *neg = e ? onnx_temp(c, "celu", st) : NULL;
    if (!neg || !(op = onnx_emit(c, "scale", &e, 1, &neg, 1, st)) || onnx_set_float(op, "scale", alpha, st) != PARDO_OK ||
        onnx_set_float(op, "bias", -alpha, st) != PARDO_OK)
        return st->code;
    const char *cond = step(c, n, "greater", x, zero, false, st);
    const char *in[3] = {cond, x, neg};
    return cond && emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

/* x reshaped to `a`, transposed by perm, reshaped to `b` (0 in a shape copies the batch). */
static int reshape_transpose_reshape(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, const int64_t *a, int na,
                                     const int64_t *perm, const int64_t *b, int nb, pardo_status *st) {
    const char *r = onnx_temp(c, "blocks", st), *tr = r ? onnx_temp(c, "blocks", st) : NULL;
    pardo_op *op = tr ? onnx_emit(c, "reshape", &x, 1, &r, 1, st) : NULL;
    if (!op || onnx_set_ints(op, "shape", a, na, st) != PARDO_OK) return st->code;
    if (!(op = onnx_emit(c, "transpose", &r, 1, &tr, 1, st)) || onnx_set_ints(op, "perm", perm, na, st) != PARDO_OK)
        return st->code;
    op = emit1(c, n, "reshape", &tr, 1, st);
    return op ? onnx_set_ints(op, "shape", b, nb, st) : st->code;
}

/* DepthToSpace / SpaceToDepth over static C, H, W: a reshape, a transpose and a reshape (ONNX's definition). */
static int map_depth_space(onnx_ctx *c, const Onnx__NodeProto *n, bool to_space, pardo_status *st) {
    static const char *const known[] = {"blocksize", "mode", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const int64_t b = onnx_attr_int(n, "blocksize", 0);
    if (b < 1) return onnx_bad(c, st, "attr 'blocksize' must be at least 1");
    if (t.ndim != 4 || t.shape[1] < 0 || t.shape[2] < 0 || t.shape[3] < 0)
        return onnx_unsupported(c, st, "an input other than [N, C, H, W] with static C, H and W");
    const int64_t C = t.shape[1], H = t.shape[2], W = t.shape[3];
    char mode[8];
    const bool crd = strcmp(onnx_attr_string(n, "mode", "DCR", mode, sizeof mode), "CRD") == 0;
    if (to_space) {
        if (C % (b * b)) return onnx_bad(c, st, "C %lld is not a multiple of blocksize^2", (long long)C);
        const int64_t cb = C / (b * b);
        const int64_t dcr[6] = {0, b, b, cb, H, W}, crd_s[6] = {0, cb, b, b, H, W};
        const int64_t p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3};
        const int64_t out[4] = {0, cb, H * b, W * b};
        return reshape_transpose_reshape(c, n, x, crd ? crd_s : dcr, 6, crd ? p_crd : p_dcr, out, 4, st);
    }
    if (H % b || W % b) return onnx_bad(c, st, "H %lld and W %lld must be multiples of blocksize", (long long)H,
                                        (long long)W);
    const int64_t a[6] = {0, C, H / b, b, W / b, b}, perm[6] = {0, 3, 5, 1, 2, 4}, out[4] = {0, C * b * b, H / b, W / b};
    return reshape_transpose_reshape(c, n, x, a, 6, perm, out, 4, st);
}

static int map_depth_to_space(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_depth_space(c, n, true, st);
}

static int map_space_to_depth(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_depth_space(c, n, false, st);
}

/* Tile with constant repeats: r copies concatenated along each axis. */
static int map_tile(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x;
    pardo_type t;
    if (input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    int64_t reps[MAX_INTS];
    int nr = 0;
    if (!const_input_ints(c, n, 1, reps, &nr)) return onnx_unsupported(c, st, "input 1 (repeats) must be a constant");
    if (nr != t.ndim) return onnx_bad(c, st, "%d repeats for rank %d", nr, t.ndim);
    int last = -1;
    for (int a = 0; a < nr; a++) {
        if (reps[a] < 0) return onnx_bad(c, st, "repeat %lld on axis %d", (long long)reps[a], a);
        if (reps[a] > 64) return onnx_unsupported(c, st, "a repeat over 64");
        if (reps[a] != 1) last = a;
    }
    if (last < 0) return emit1(c, n, "identity", &x, 1, st) ? PARDO_OK : st->code;
    const char *acc = x;
    for (int a = 0; a <= last; a++) {
        if (reps[a] == 1) continue;
        const char *copies[64];
        for (int k = 0; k < reps[a]; k++) copies[k] = acc;
        const char *out = a == last ? onnx_out_var(c, n, 0, st) : onnx_temp(c, "tile", st);
        pardo_op *op = out && reps[a] ? onnx_emit(c, "concat", copies, (int)reps[a], &out, 1, st) : NULL;
        if (!op || onnx_set_int(op, "axis", a, st) != PARDO_OK) return reps[a] ? st->code : onnx_unsupported(c, st, "a repeat of 0");
        acc = out;
    }
    return PARDO_OK;
}

/* ---- the table ---- */

typedef struct mapping {
    const char *op_type;
    onnx_map_fn fn;
} mapping;

static const mapping table[] = {
    {"Abs", map_abs},
    {"Add", map_add},
    {"And", map_and},
    {"ArgMax", map_argmax},
    {"ArgMin", map_argmin},
    {"AveragePool", map_average_pool},
    {"BatchNormalization", map_batch_norm},
    {"Cast", map_cast},
    {"Celu", map_celu},
    {"Clip", map_clip},
    {"Concat", map_concat},
    {"Constant", NULL},
    {"ConstantOfShape", map_constant_of_shape},
    {"Conv", map_conv},
    {"DepthToSpace", map_depth_to_space},
    {"Div", map_div},
    {"Dropout", map_dropout},
    {"Elu", map_elu},
    {"Equal", map_equal},
    {"Erf", map_erf},
    {"Exp", map_exp},
    {"Expand", map_expand},
    {"Flatten", map_flatten},
    {"Gather", map_gather},
    {"Gemm", map_gemm},
    {"GlobalAveragePool", map_global_average_pool},
    {"GlobalMaxPool", map_global_max_pool},
    {"Greater", map_greater},
    {"GreaterOrEqual", map_greater_or_equal},
    {"HardSigmoid", map_hard_sigmoid},
    {"HardSwish", map_hard_swish},
    {"Identity", map_identity},
    {"LayerNormalization", map_layer_norm},
    {"LeakyRelu", map_leaky_relu},
    {"Less", map_less},
    {"LessOrEqual", map_less_or_equal},
    {"Log", map_log},
    {"LogSoftmax", map_log_softmax},
    {"MatMul", map_matmul},
    {"Max", map_max},
    {"MaxPool", map_max_pool},
    {"Mean", map_mean},
    {"Min", map_min},
    {"Mul", map_mul},
    {"Neg", map_neg},
    {"Not", map_not},
    {"Or", map_or},
    {"PRelu", map_prelu},
    {"Pow", map_pow},
    {"Range", map_range},
    {"Reciprocal", map_reciprocal},
    {"ReduceL1", map_reduce_l1},
    {"ReduceL2", map_reduce_l2},
    {"ReduceLogSum", map_reduce_log_sum},
    {"ReduceLogSumExp", map_reduce_log_sum_exp},
    {"ReduceMax", map_reduce_max},
    {"ReduceMean", map_reduce_mean},
    {"ReduceMin", map_reduce_min},
    {"ReduceSum", map_reduce_sum},
    {"ReduceSumSquare", map_reduce_sum_square},
    {"Relu", map_relu},
    {"Reshape", map_reshape},
    {"Selu", map_selu},
    {"Shape", map_shape},
    {"Shrink", map_shrink},
    {"Sigmoid", map_sigmoid},
    {"Sign", map_sign},
    {"Size", map_size},
    {"Slice", map_slice},
    {"Softmax", map_softmax},
    {"Softplus", map_softplus},
    {"Softsign", map_softsign},
    {"SpaceToDepth", map_space_to_depth},
    {"Split", map_split},
    {"Sqrt", map_sqrt},
    {"Squeeze", map_squeeze},
    {"Sub", map_sub},
    {"Sum", map_sum},
    {"Tanh", map_tanh},
    {"ThresholdedRelu", map_thresholded_relu},
    {"Tile", map_tile},
    {"Transpose", map_transpose},
    {"Trilu", map_trilu},
    {"Unsqueeze", map_unsqueeze},
    {"Where", map_where},
    {"Xor", map_xor},
};

/* Constant always folds (onnx_fold.c); its entry only lists it. */
static int map_constant_folded(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    (void)n;
    return onnx_bad(c, st, "a Constant that did not fold");
}

static char supported[2048];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* Once: the table must be sorted for the binary search (pardo's own invariant), and its list of names. */
static void check_table(void) {
    size_t off = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        PARDO_ASSERT(i == 0 || strcmp(table[i - 1].op_type, table[i].op_type) < 0);
        if (off < sizeof supported - 32)
            off += (size_t)snprintf(supported + off, sizeof supported - off, "%s%s", i ? ", " : "", table[i].op_type);
    }
}

onnx_map_fn onnx_find_mapping(const char *op_type) {
    pthread_once(&table_once, check_table);
    size_t lo = 0, hi = sizeof table / sizeof table[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int cmp = strcmp(op_type, table[mid].op_type);
        if (cmp == 0) return table[mid].fn ? table[mid].fn : map_constant_folded;
        if (cmp < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const char *onnx_supported_list(void) {
    pthread_once(&table_once, check_table);
    return supported;
}
