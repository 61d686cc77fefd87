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
#include <strings.h>

#include "core/value.h"
#include "io/onnx_internal.h"

/* ---- helpers the mapping files share (declared in onnx_internal.h) ---- */

/* Var of input i, which must be present. */
const char *onnx_in_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st) {
    onnx_value *v = onnx_input(c, n, i);
    if (!v) {
        onnx_bad(c, st, "input %d is missing", i);
        return NULL;
    }
    return onnx_var_of(c, v, st);
}

/* Var of optional input i, "" when absent. */
const char *onnx_opt_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st) {
    onnx_value *v = onnx_input(c, n, i);
    return v ? onnx_var_of(c, v, st) : "";
}

/* The int64 values of constant input i (*count; false when not constant). */
bool onnx_const_input_ints(onnx_ctx *c, const Onnx__NodeProto *n, int i, int64_t *out, int *count) {
    onnx_value *v = onnx_input(c, n, i);
    return v && v->konst && onnx_const_ints(v->konst, out, ONNX_MAX_INTS, count);
}

/* The value of constant scalar input i as a double (false when absent or not constant). */
bool onnx_const_input_scalar(onnx_ctx *c, const Onnx__NodeProto *n, int i, double *out) {
    onnx_value *v = onnx_input(c, n, i);
    if (!v || !v->konst || v->konst->numel != 1) return false;
    *out = pardo_tensor_get_f64(v->konst, 0);
    return true;
}

pardo_op *onnx_emit1(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *const *in, int n_in,
                     pardo_status *st) {
    const char *out = onnx_out_var(c, n, 0, st);
    return out ? onnx_emit(c, type, in, n_in, &out, 1, st) : NULL;
}

const char *const onnx_no_attrs[] = {NULL};

/* A scalar constant var of dtype dt holding v. */
const char *onnx_scalar_const(onnx_ctx *c, pardo_dtype dt, double v, pardo_status *st) {
    pardo_tensor *t = pardo_tensor_new_cpu(dt, 0, NULL, st);
    if (!t) return NULL;
    pardo_tensor_set_f64(t, 0, v);
    return onnx_const_var(c, "k", t, false, st);
}

/* Emits op `type` (in1, in2 or one input) into a fresh temp, or into output 0 when last. */
const char *onnx_step(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *a, const char *b,
                      bool last, pardo_status *st) {
    const char *out = last ? onnx_out_var(c, n, 0, st) : onnx_temp(c, type, st);
    const char *in[2] = {a, b};
    return out && onnx_emit(c, type, in, b ? 2 : 1, &out, 1, st) ? out : NULL;
}

/* The type of input 0 (its var in *x). */
int onnx_input0(onnx_ctx *c, const Onnx__NodeProto *n, const char **x, pardo_type *t, pardo_status *st) {
    if (!(*x = onnx_in_var(c, n, 0, st))) return st->code;
    return onnx_type_of(c, *x, t, st);
}

/* ---- elementwise ---- */

#define UNARY(fn, pardo_type)                                                                                      \
    static int fn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {                                       \
        if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;                                \
        const char *x = onnx_in_var(c, n, 0, st);                                                                  \
        return x && onnx_emit1(c, n, pardo_type, &x, 1, st) ? PARDO_OK : st->code;                                 \
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

UNARY(map_is_nan, "is_nan")
UNARY(map_floor, "floor")
UNARY(map_ceil, "ceil")
UNARY(map_round, "round")
UNARY(map_sign, "sign")
UNARY(map_reciprocal, "reciprocal")
UNARY(map_sin, "sin")
UNARY(map_cos, "cos")
UNARY(map_tan, "tan")
UNARY(map_asin, "asin")
UNARY(map_acos, "acos")
UNARY(map_atan, "atan")
UNARY(map_sinh, "sinh")
UNARY(map_cosh, "cosh")
UNARY(map_asinh, "asinh")
UNARY(map_acosh, "acosh")
UNARY(map_atanh, "atanh")
UNARY(map_det, "det")

/* An activation whose float attrs (the NULL-terminated `attrs`, ONNX's names and defaults) pass over as they are. */
static int map_float_attrs(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *const *attrs,
                           pardo_status *st) {
    if (onnx_check_attrs(c, n, attrs, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, type, &x, 1, st) : NULL;
    if (!op) return st->code;
    for (int i = 0; attrs[i]; i++)
        if (onnx_attr(n, attrs[i]) && onnx_set_float(op, attrs[i], onnx_attr_float(n, attrs[i], 0), st) != PARDO_OK)
            return st->code;
    return PARDO_OK;
}

#define FLOAT_ATTRS(fn, pardo_type, ...)                                                                           \
    static int fn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {                                       \
        static const char *const attrs[] = {__VA_ARGS__};                                                          \
        return map_float_attrs(c, n, pardo_type, attrs, st);                                                       \
    }
FLOAT_ATTRS(map_elu, "elu", "alpha", NULL)
FLOAT_ATTRS(map_selu, "selu", "alpha", "gamma", NULL)
FLOAT_ATTRS(map_celu, "celu", "alpha", NULL)
FLOAT_ATTRS(map_hard_sigmoid, "hard_sigmoid", "alpha", "beta", NULL)
FLOAT_ATTRS(map_hard_swish, "hard_swish", NULL)
FLOAT_ATTRS(map_softplus, "softplus", NULL)
FLOAT_ATTRS(map_softsign, "softsign", NULL)
FLOAT_ATTRS(map_thresholded_relu, "thresholded_relu", "alpha", NULL)
FLOAT_ATTRS(map_mish, "mish", NULL)
FLOAT_ATTRS(map_shrink, "shrink", "lambd", "bias", NULL)

static int map_prelu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
    return onnx_emit1(c, n, "prelu", in, 2, st) ? PARDO_OK : st->code;
}

static int map_einsum(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"equation", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    char eq[256];
    const Onnx__AttributeProto *a = onnx_attr(n, "equation");
    if (!a) return onnx_bad(c, st, "attr 'equation' is required");
    if (a->s.len >= sizeof eq) return onnx_unsupported(c, st, "attr 'equation' of %zu characters", a->s.len);
    onnx_attr_string(n, "equation", "", eq, sizeof eq);
    const char *in[8];
    if (n->n_input < 1 || n->n_input > 8) return onnx_unsupported(c, st, "%zu inputs; pardo's einsum takes 1 to 8",
                                                                 n->n_input);
    for (size_t i = 0; i < n->n_input; i++)
        if (!(in[i] = onnx_in_var(c, n, (int)i, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "einsum", in, (int)n->n_input, st);
    return op && onnx_set_string(op, "equation", eq, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* Max, Min, Sum, Mean: pardo's variadic op of the same meaning over all the inputs. */
static int map_variadic(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *in[ONNX_MAX_INTS];
    if (n->n_input < 1 || n->n_input > ONNX_MAX_INTS) return onnx_unsupported(c, st, "%zu inputs", n->n_input);
    for (size_t i = 0; i < n->n_input; i++)
        if (!(in[i] = onnx_in_var(c, n, (int)i, st))) return st->code;
    return onnx_emit1(c, n, type, in, (int)n->n_input, st) ? PARDO_OK : st->code;
}

static int map_max(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_variadic(c, n, "max", st); }
static int map_min(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_variadic(c, n, "min", st); }
static int map_sum(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_variadic(c, n, "sum", st); }
static int map_mean(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_variadic(c, n, "mean", st); }

static int map_mod(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"fmod", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "mod", in, 2, st);
    return op && onnx_set_int(op, "fmod", onnx_attr_int(n, "fmod", 0), st) == PARDO_OK ? PARDO_OK : st->code;
}

/* BitShift: bit_shift, direction "LEFT" / "RIGHT" as "left" / "right". */
static int map_bit_shift(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"direction", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    char buf[16];
    const char *d = onnx_attr_string(n, "direction", "", buf, sizeof buf);
    const char *dir = strcmp(d, "LEFT") == 0 ? "left" : strcmp(d, "RIGHT") == 0 ? "right" : NULL;
    if (!dir) return onnx_bad(c, st, "attr 'direction' is \"%s\", expected \"LEFT\" or \"RIGHT\"", d);
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "bit_shift", in, 2, st);
    return op && onnx_set_string(op, "direction", dir, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* CumSum: the axis (input 1) as attr when known at load, else read by cumsum at run time. */
static int map_cumsum(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"exclusive", "reverse", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t axis[ONNX_MAX_INTS];
    int na = 0;
    const bool konst = onnx_const_input_ints(c, n, 1, axis, &na);
    if (konst && na != 1) return onnx_bad(c, st, "input 1 (axis) has %d elements, expected one", na);
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || (!konst && !(in[1] = onnx_in_var(c, n, 1, st)))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "cumsum", in, konst ? 1 : 2, st);
    if (!op || (konst && onnx_set_int(op, "axis", axis[0], st) != PARDO_OK)) return st->code;
    return onnx_set_bool(op, "exclusive", onnx_attr_int(n, "exclusive", 0) != 0, st) == PARDO_OK &&
                   onnx_set_bool(op, "reverse", onnx_attr_int(n, "reverse", 0) != 0, st) == PARDO_OK
               ? PARDO_OK
               : st->code;
}

/* Hardmax: along axis from opset 13; before, over the input coerced to 2-D at axis (every dim from axis on),
 * as flatten, hardmax along the last dim, reshape back (static dims). */
static int map_hardmax(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    int64_t axis = onnx_attr_int(n, "axis", c->opset >= 13 ? -1 : 1);
    if (c->opset >= 13 || axis == t.ndim - 1 || axis == -1) {
        pardo_op *op = onnx_emit1(c, n, "hardmax", &x, 1, st);
        return op && onnx_set_int(op, "axis", axis, st) == PARDO_OK ? PARDO_OK : st->code;
    }
    for (int i = 0; i < t.ndim; i++)
        if (t.shape[i] < 0) return onnx_unsupported(c, st, "Hardmax before opset 13 over a run-time dim");
    const char *flat = onnx_temp(c, "flat", st), *hm = flat ? onnx_temp(c, "hardmax", st) : NULL;
    pardo_op *f = hm ? onnx_emit(c, "flatten", &x, 1, &flat, 1, st) : NULL;
    if (!f || onnx_set_int(f, "axis", axis, st) != PARDO_OK) return st->code;
    pardo_op *h = onnx_emit(c, "hardmax", &flat, 1, &hm, 1, st);
    if (!h || onnx_set_int(h, "axis", -1, st) != PARDO_OK) return st->code;
    pardo_op *r = onnx_emit1(c, n, "reshape", &hm, 1, st);
    return r ? onnx_set_ints(r, "shape", t.shape, t.ndim, st) : st->code;
}

static int map_is_inf(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"detect_positive", "detect_negative", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "is_inf", &x, 1, st) : NULL;
    return op && onnx_set_bool(op, "detect_positive", onnx_attr_int(n, "detect_positive", 1) != 0, st) == PARDO_OK &&
                   onnx_set_bool(op, "detect_negative", onnx_attr_int(n, "detect_negative", 1) != 0, st) == PARDO_OK
               ? PARDO_OK
               : st->code;
}

static int map_identity(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = onnx_in_var(c, n, 0, st);
    return x && onnx_emit1(c, n, "identity", &x, 1, st) ? PARDO_OK : st->code;
}

#define BINARY(fn, pardo_type)                                                                                     \
    static int fn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {                                       \
        static const char *const known[] = {"broadcast", "axis", NULL};                                            \
        if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;                                        \
        if (onnx_attr_int(n, "broadcast", 0) && onnx_attr(n, "axis"))                                              \
            return onnx_unsupported(c, st, "legacy broadcast with attr 'axis'");                                   \
        const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};                                                      \
        if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;                                        \
        return onnx_emit1(c, n, pardo_type, in, 2, st) ? PARDO_OK : st->code;                                      \
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
BINARY(map_xor, "xor")


/* Pow: a float base with a constant scalar exponent as attr exponent, anything else with the exponent as input 1. */
static int map_pow(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"broadcast", "axis", NULL}; /* before opset 7, as the binary ops */
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (onnx_attr_int(n, "broadcast", 0) && onnx_attr(n, "axis"))
        return onnx_unsupported(c, st, "legacy broadcast with attr 'axis'");
    const char *x;
    pardo_type t;
    double e;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    if (pardo_dtype_is_float(t.dtype) && onnx_const_input_scalar(c, n, 1, &e)) {
        pardo_op *op = onnx_emit1(c, n, "pow", &x, 1, st);
        return op && onnx_set_float(op, "exponent", e, st) == PARDO_OK ? PARDO_OK : st->code;
    }
    const char *in[2] = {x, onnx_in_var(c, n, 1, st)};
    return in[1] && onnx_emit1(c, n, "pow", in, 2, st) ? PARDO_OK : st->code;
}

static int map_leaky_relu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"alpha", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "leaky_relu", &x, 1, st) : NULL;
    return op && onnx_set_float(op, "alpha", onnx_attr_float(n, "alpha", 0.01), st) == PARDO_OK ? PARDO_OK : st->code;
}


/* Clip of an integer or half input (opset 11 on: its bounds are inputs of its dtype): max with the lower
 * bound, then min with the upper, which take every numeric dtype exactly; no bound: identity. */
static int clip_by_max_min(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *y = onnx_in_var(c, n, 0, st);
    const bool lo = onnx_input(c, n, 1) != NULL, hi = onnx_input(c, n, 2) != NULL;
    if (y && !lo && !hi) return onnx_emit1(c, n, "identity", &y, 1, st) ? PARDO_OK : st->code;
    for (int k = 1; y && k <= 2; k++) {
        if (!onnx_input(c, n, k)) continue;
        const char *bound = onnx_in_var(c, n, k, st);
        y = bound ? onnx_step(c, n, k == 1 ? "max" : "min", y, bound, k == 2 || !hi, st) : NULL;
    }
    return y ? PARDO_OK : st->code;
}

static int map_clip(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    double lo = -INFINITY, hi = INFINITY;
    bool has_lo, has_hi;
    const onnx_value *xv = onnx_input(c, n, 0);
    if (c->opset >= 11 && xv && (xv->konst || xv->var)) {
        pardo_type xt;
        if (xv->konst) xt = pardo_tensor_type(xv->konst);
        else if (onnx_type_of(c, xv->var, &xt, st) != PARDO_OK) return st->code;
        if (!pardo_dtype_is_float(xt.dtype)) return clip_by_max_min(c, n, st);
    }
    if (c->opset < 11) {
        has_lo = onnx_attr(n, "min") != NULL;
        has_hi = onnx_attr(n, "max") != NULL;
        lo = onnx_attr_float(n, "min", lo);
        hi = onnx_attr_float(n, "max", hi);
    } else {
        has_lo = onnx_input(c, n, 1) != NULL;
        has_hi = onnx_input(c, n, 2) != NULL;
        if ((has_lo && !onnx_const_input_scalar(c, n, 1, &lo)) || (has_hi && !onnx_const_input_scalar(c, n, 2, &hi)))
            return onnx_clip_at_run_time(c, n, st);
    }
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "clip", &x, 1, st) : NULL;
    if (!op) return st->code;
    if (has_lo && onnx_set_float(op, "min", lo, st) != PARDO_OK) return st->code;
    if (has_hi && onnx_set_float(op, "max", hi, st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

static int map_where(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *in[3];
    for (int i = 0; i < 3; i++)
        if (!(in[i] = onnx_in_var(c, n, i, st))) return st->code;
    return onnx_emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

/* ---- activations over an axis ---- */

static int map_softmax_like(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
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
            pardo_op *r = onnx_emit1(c, n, "reshape", &sm, 1, st);
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
    pardo_op *op = onnx_emit1(c, n, type, &x, 1, st);
    return op && onnx_set_int(op, "axis", axis, st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_softmax(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_softmax_like(c, n, "softmax", st);
}

static int map_log_softmax(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_softmax_like(c, n, "log_softmax", st);
}

/* NegativeLogLikelihoodLoss (and SoftmaxCrossEntropyLoss's second half, from
 * onnx_compose.c): nll_loss of `input` against node input 1, with node input
 * 2 as the optional weight, into node output 0. */
int onnx_emit_nll(onnx_ctx *c, const Onnx__NodeProto *n, const char *input, pardo_status *st) {
    static const char *const known[] = {"reduction", "ignore_index", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    char red[16];
    onnx_attr_string(n, "reduction", "mean", red, sizeof red);
    const char *t = onnx_in_var(c, n, 1, st), *w = t ? onnx_opt_var(c, n, 2, st) : NULL;
    if (!w) return st->code;
    const char *in[3] = {input, t, w};
    pardo_op *op = onnx_emit1(c, n, "nll_loss", in, *w ? 3 : 2, st);
    if (!op || onnx_set_string(op, "reduction", red, st) != PARDO_OK) return st->code;
    if (onnx_attr(n, "ignore_index") &&
        onnx_set_int(op, "ignore_index", onnx_attr_int(n, "ignore_index", 0), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

static int map_nll_loss(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = onnx_in_var(c, n, 0, st);
    return x ? onnx_emit_nll(c, n, x, st) : st->code;
}

/* Resize (opset 11 on: X, roi, scales, sizes) and Upsample (opset 9: X,
 * scales; asymmetric coordinates, nearest rounding down, as its numpy
 * reference repeats): resize. Opset 10's Resize is refused. */
static int map_resize_like(onnx_ctx *c, const Onnx__NodeProto *n, bool upsample, pardo_status *st) {
    static const char *const known[] = {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                        "exclude_outside", "extrapolation_value", NULL};
    static const char *const known_up[] = {"mode", NULL};
    if (onnx_check_attrs(c, n, upsample ? known_up : known, st) != PARDO_OK) return st->code;
    if (upsample ? c->opset < 9 : c->opset < 11)
        return onnx_unsupported(c, st, "%s before opset %d (its scales %s)", upsample ? "Upsample" : "Resize",
                                upsample ? 9 : 11, upsample ? "as an attr" : "with opset 10's coordinates");
    const char *in[4] = {"", "", "", ""};
    int n_in = 0;
    const int map[4] = {0, upsample ? -1 : 1, upsample ? 1 : 2, upsample ? -1 : 3};
    for (int k = 0; k < 4; k++) {
        if (map[k] < 0) continue;
        if (!(in[k] = k == 0 ? onnx_in_var(c, n, 0, st) : onnx_opt_var(c, n, map[k], st))) return st->code;
        if (*in[k]) n_in = k + 1;
    }
    pardo_op *op = onnx_emit1(c, n, "resize", in, n_in, st);
    if (!op) return st->code;
    char buf[32];
    const char *mode = onnx_attr_string(n, "mode", "nearest", buf, sizeof buf);
    if (upsample && strcmp(mode, "bilinear") == 0) mode = "linear";
    if (onnx_set_string(op, "mode", mode, st) != PARDO_OK) return st->code;
    if (upsample)
        return onnx_set_string(op, "coordinate_transformation_mode", "asymmetric", st) == PARDO_OK &&
                       onnx_set_string(op, "nearest_mode", "floor", st) == PARDO_OK
                   ? PARDO_OK
                   : st->code;
    static const char *const str_attrs[] = {"coordinate_transformation_mode", "nearest_mode"};
    for (int k = 0; k < 2; k++)
        if (onnx_attr(n, str_attrs[k]) &&
            onnx_set_string(op, str_attrs[k], onnx_attr_string(n, str_attrs[k], "", buf, sizeof buf), st) != PARDO_OK)
            return st->code;
    static const char *const float_attrs[] = {"cubic_coeff_a", "extrapolation_value"};
    for (int k = 0; k < 2; k++)
        if (onnx_attr(n, float_attrs[k]) &&
            onnx_set_float(op, float_attrs[k], onnx_attr_float(n, float_attrs[k], 0), st) != PARDO_OK)
            return st->code;
    if (onnx_attr(n, "exclude_outside") &&
        onnx_set_int(op, "exclude_outside", onnx_attr_int(n, "exclude_outside", 0), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

static int map_resize(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_resize_like(c, n, false, st);
}

static int map_upsample(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_resize_like(c, n, true, st);
}

/* NonMaxSuppression: non_max_suppression, its optional inputs passed on. */
static int map_nms(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"center_point_box", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[5] = {"", "", "", "", ""};
    int n_in = 0;
    for (int k = 0; k < 5; k++) {
        if (!(in[k] = k < 2 ? onnx_in_var(c, n, k, st) : onnx_opt_var(c, n, k, st))) return st->code;
        if (*in[k]) n_in = k + 1;
    }
    pardo_op *op = onnx_emit1(c, n, "non_max_suppression", in, n_in, st);
    if (!op) return st->code;
    if (onnx_attr(n, "center_point_box") &&
        onnx_set_int(op, "center_point_box", onnx_attr_int(n, "center_point_box", 0), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* Pad: pad, with the pads folded into its attr where constant (attrs pads
 * and value before opset 11). */
static int map_pad(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"mode", "pads", "value", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[3] = {onnx_in_var(c, n, 0, st), "", ""};
    if (!in[0]) return st->code;
    int64_t pads[ONNX_MAX_INTS];
    int np = -1, n_in = 1;
    if (c->opset < 11) {
        const int64_t *a = onnx_attr_ints(n, "pads", &np);
        if (!a || np > ONNX_MAX_INTS) return onnx_bad(c, st, "Pad without attr pads");
        memcpy(pads, a, sizeof(int64_t) * (size_t)np);
    } else {
        if (!onnx_input(c, n, 1)) return onnx_bad(c, st, "Pad without input pads");
        if (!onnx_const_input_ints(c, n, 1, pads, &np)) {
            np = -1;
            if (!(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
            n_in = 2;
        }
        if (!(in[2] = onnx_opt_var(c, n, 2, st))) return st->code;
        if (*in[2]) n_in = 3;
    }
    pardo_op *op = onnx_emit1(c, n, "pad", in, n_in, st);
    if (!op || (np >= 0 && onnx_set_ints(op, "pads", pads, np, st) != PARDO_OK)) return st->code;
    char buf[16];
    if (onnx_attr(n, "mode") && onnx_set_string(op, "mode", onnx_attr_string(n, "mode", "", buf, sizeof buf), st) !=
                                    PARDO_OK)
        return st->code;
    if (c->opset < 11 && onnx_attr(n, "value") &&
        onnx_set_float(op, "value", onnx_attr_float(n, "value", 0), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* An op whose node inputs (the first n_in, all required) and int attrs
 * (those the node sets; NULL-terminated list) go to pardo's op as they are:
 * TopK, Compress, OneHot. */
static int map_plain(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, int n_in,
                     const char *const *int_attrs, pardo_status *st) {
    if (onnx_check_attrs(c, n, int_attrs, st) != PARDO_OK) return st->code;
    const char *in[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n_in; k++)
        if (!(in[k] = onnx_in_var(c, n, k, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, type, in, n_in, st);
    if (!op) return st->code;
    for (int k = 0; int_attrs[k]; k++)
        if (onnx_attr(n, int_attrs[k]) &&
            onnx_set_int(op, int_attrs[k], onnx_attr_int(n, int_attrs[k], 0), st) != PARDO_OK)
            return st->code;
    return PARDO_OK;
}

static int map_top_k(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", "largest", "sorted", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (c->opset < 10) return onnx_unsupported(c, st, "TopK before opset 10 (k as an attr)");
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL}, *out[2] = {NULL, NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
    for (int k = 0; k < 2; k++)
        if (!(out[k] = k < (int)n->n_output && n->output[k][0] ? onnx_out_var(c, n, k, st) : "")) return st->code;
    pardo_op *op = onnx_emit(c, "top_k", in, 2, out, 2, st);
    if (!op) return st->code;
    for (int k = 0; known[k]; k++)
        if (onnx_attr(n, known[k]) && onnx_set_int(op, known[k], onnx_attr_int(n, known[k], 0), st) != PARDO_OK)
            return st->code;
    return PARDO_OK;
}

static int map_compress(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    return map_plain(c, n, "compress", 2, known, st);
}

static int map_one_hot(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    return map_plain(c, n, "one_hot", 3, known, st);
}

/* Unique: unique, the outputs the node names (the others ""), attr sorted as a bool. */
static int map_unique(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", "sorted", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st), *out[4] = {"", "", "", ""};
    if (!x) return st->code;
    int n_out = 1;
    for (int k = 0; k < 4 && k < (int)n->n_output; k++) {
        if (!n->output[k][0] && k > 0) continue;
        if (!(out[k] = onnx_out_var(c, n, k, st))) return st->code;
        n_out = k + 1;
    }
    pardo_op *op = onnx_emit(c, "unique", &x, 1, out, n_out, st);
    if (!op) return st->code;
    if (onnx_attr(n, "axis") && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", 0), st) != PARDO_OK)
        return st->code;
    return onnx_set_bool(op, "sorted", onnx_attr_int(n, "sorted", 1) != 0, st);
}

static int map_non_zero(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    return x && onnx_emit1(c, n, "non_zero", &x, 1, st) ? PARDO_OK : st->code;
}

static int map_reverse_sequence(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"batch_axis", "time_axis", NULL};
    return map_plain(c, n, "reverse_sequence", 2, known, st);
}

/* ---- signal ---- */

/* The int value of constant scalar input i into *v (false, with st filled, when it is absent or not constant). */
static bool const_int_input(onnx_ctx *c, const Onnx__NodeProto *n, int i, const char *what, int64_t *v,
                            pardo_status *st) {
    double d;
    if (!onnx_const_input_scalar(c, n, i, &d)) {
        onnx_unsupported(c, st, "input %d (%s) not known at load", i, what);
        return false;
    }
    *v = (int64_t)d;
    return true;
}

/* Attr output_datatype (ONNX's code; absent: float) as op's attr dtype, float32 or float64. */
static int set_output_dtype(onnx_ctx *c, const Onnx__NodeProto *n, pardo_op *op, pardo_status *st) {
    const int32_t code = (int32_t)onnx_attr_int(n, "output_datatype", 1);
    const pardo_dtype dt = onnx_dtype(code);
    if (dt != PARDO_F32 && dt != PARDO_F64)
        return onnx_unsupported(c, st, "attr 'output_datatype' %s; pardo's windows are float32 or float64",
                                onnx_dtype_name(code));
    return onnx_set_string(op, "dtype", pardo_dtype_name(dt), st);
}

/* DFT: dft with dft_length (input 1) and, from opset 20, axis (input 2) known at load as attrs. */
static int map_dft(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", "inverse", "onesided", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t len = 0, axis = c->opset >= 20 ? -2 : onnx_attr_int(n, "axis", 1);
    if (onnx_input(c, n, 1) && !const_int_input(c, n, 1, "dft_length", &len, st)) return st->code;
    if (c->opset >= 20 && onnx_input(c, n, 2) && !const_int_input(c, n, 2, "axis", &axis, st)) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "dft", &x, 1, st) : NULL;
    if (!op || onnx_set_int(op, "axis", axis, st) != PARDO_OK ||
        onnx_set_bool(op, "inverse", onnx_attr_int(n, "inverse", 0) != 0, st) != PARDO_OK ||
        onnx_set_bool(op, "onesided", onnx_attr_int(n, "onesided", 0) != 0, st) != PARDO_OK)
        return st->code;
    return onnx_input(c, n, 1) ? onnx_set_int(op, "dft_length", len, st) : PARDO_OK;
}

/* STFT: stft with frame_step (input 1) and frame_length (input 3) known at load as attrs, the window passed on. */
static int map_stft(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"onesided", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t step, len = 0;
    if (!const_int_input(c, n, 1, "frame_step", &step, st)) return st->code;
    if (onnx_input(c, n, 3) && !const_int_input(c, n, 3, "frame_length", &len, st)) return st->code;
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = onnx_opt_var(c, n, 2, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "stft", in, *in[1] ? 2 : 1, st);
    if (!op || onnx_set_int(op, "frame_step", step, st) != PARDO_OK ||
        onnx_set_bool(op, "onesided", onnx_attr_int(n, "onesided", 1) != 0, st) != PARDO_OK)
        return st->code;
    return onnx_input(c, n, 3) ? onnx_set_int(op, "frame_length", len, st) : PARDO_OK;
}

/* HannWindow, HammingWindow, BlackmanWindow: pardo's window op of that name. */
static int map_window(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"periodic", "output_datatype", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, type, &x, 1, st) : NULL;
    if (!op || onnx_set_bool(op, "periodic", onnx_attr_int(n, "periodic", 1) != 0, st) != PARDO_OK) return st->code;
    return set_output_dtype(c, n, op, st);
}

static int map_hann_window(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_window(c, n, "hann_window", st);
}

static int map_hamming_window(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_window(c, n, "hamming_window", st);
}

static int map_blackman_window(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_window(c, n, "blackman_window", st);
}

static int map_mel_weight_matrix(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"output_datatype", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[5];
    for (int k = 0; k < 5; k++)
        if (!(in[k] = onnx_in_var(c, n, k, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "mel_weight_matrix", in, 5, st);
    return op ? set_output_dtype(c, n, op, st) : st->code;
}

/* TfIdfVectorizer over integer tokens: tf_idf_vectorizer with the node's attrs (a string pool is refused). */
static int map_tf_idf_vectorizer(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"max_gram_length", "max_skip_count", "min_gram_length", "mode",
                                        "ngram_counts", "ngram_indexes", "pool_int64s", "pool_strings",
                                        "weights", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (onnx_attr(n, "pool_strings")) return onnx_unsupported(c, st, "attr 'pool_strings' (string tokens)");
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "tf_idf_vectorizer", &x, 1, st) : NULL;
    if (!op) return st->code;
    char mode[16];
    if (onnx_set_string(op, "mode", onnx_attr_string(n, "mode", "", mode, sizeof mode), st) != PARDO_OK)
        return st->code;
    for (int k = 0; k < 3; k++)
        if (onnx_attr(n, known[k]) && onnx_set_int(op, known[k], onnx_attr_int(n, known[k], 0), st) != PARDO_OK)
            return st->code;
    for (int k = 4; k < 7; k++) {
        int cnt;
        const int64_t *v = onnx_attr_ints(n, known[k], &cnt);
        if (v && onnx_set_ints(op, known[k], v, cnt, st) != PARDO_OK) return st->code;
    }
    const Onnx__AttributeProto *w = onnx_attr(n, "weights");
    if (!w) return PARDO_OK;
    pardo_value *a = pardo_value_new_array();
    if (!a) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (size_t i = 0; i < w->n_floats; i++) {
        pardo_value *f = pardo_value_new_number((double)w->floats[i]);
        const int rc = f ? pardo_value_append(a, f, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_value_free(f);
        if (rc != PARDO_OK) {
            pardo_value_free(a);
            return rc;
        }
    }
    return pardo_op_set_attr(op, "weights", a, st);
}

/* EyeLike: eye_like, the dtype code turned into pardo's name. */
static int map_eye_like(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"dtype", "k", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "eye_like", &x, 1, st) : NULL;
    if (!op) return st->code;
    if (onnx_attr(n, "dtype")) {
        const int32_t code = (int32_t)onnx_attr_int(n, "dtype", 1);
        const pardo_dtype dt = onnx_dtype(code);
        if (dt == PARDO_DTYPE_UNKNOWN) return onnx_unsupported(c, st, "EyeLike to %s", onnx_dtype_name(code));
        if (onnx_set_string(op, "dtype", pardo_dtype_name(dt), st) != PARDO_OK) return st->code;
    }
    if (onnx_attr(n, "k") && onnx_set_int(op, "k", onnx_attr_int(n, "k", 0), st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

/* GridSample: grid_sample, its attrs passed on. */
static int map_grid_sample(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"align_corners", "mode", "padding_mode", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "grid_sample", in, 2, st);
    if (!op) return st->code;
    char buf[32];
    for (int k = 1; k < 3; k++)
        if (onnx_attr(n, known[k]) &&
            onnx_set_string(op, known[k], onnx_attr_string(n, known[k], "", buf, sizeof buf), st) != PARDO_OK)
            return st->code;
    if (onnx_attr(n, "align_corners") &&
        onnx_set_int(op, "align_corners", onnx_attr_int(n, "align_corners", 0), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* ---- linear algebra ---- */

static int map_matmul(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
    return onnx_emit1(c, n, "matmul", in, 2, st) ? PARDO_OK : st->code;
}

/* Gemm: alpha * op(A) op(B) + beta * C. */
static int map_gemm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"alpha", "beta", "transA", "transB", "broadcast", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    double alpha = onnx_attr_float(n, "alpha", 1.0), beta = onnx_attr_float(n, "beta", 1.0);
    const char *a = onnx_in_var(c, n, 0, st), *b = a ? onnx_in_var(c, n, 1, st) : NULL;
    if (!b) return st->code;
    const char *cv = onnx_input(c, n, 2) && beta != 0.0 ? onnx_opt_var(c, n, 2, st) : "";
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
    return onnx_emit1(c, n, "add", sum, 2, st) ? PARDO_OK : st->code;
}

/* ---- reductions ---- */

static int map_reduce(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, int axes_input_from,
                      pardo_status *st) {
    static const char *const known[] = {"axes", "keepdims", "noop_with_empty_axes", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t axes[ONNX_MAX_INTS];
    int na = 0;
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0]) return st->code;
    const bool noop = onnx_attr_int(n, "noop_with_empty_axes", 0) != 0;
    if (c->opset >= axes_input_from) {
        /* axes known at load become the attr; others are read by the op at run time */
        if (onnx_input(c, n, 1) && !onnx_const_input_ints(c, n, 1, axes, &na) && !(in[1] = onnx_in_var(c, n, 1, st)))
            return st->code;
    } else {
        const int64_t *a = onnx_attr_ints(n, "axes", &na);
        if (na > ONNX_MAX_INTS) return onnx_unsupported(c, st, "too many axes");
        if (na) memcpy(axes, a, sizeof(int64_t) * (size_t)na);
    }
    if (!in[1] && na == 0 && noop) return onnx_emit1(c, n, "identity", in, 1, st) ? PARDO_OK : st->code;
    pardo_op *op = onnx_emit1(c, n, type, in, in[1] ? 2 : 1, st);
    if (!op || (!in[1] && onnx_set_ints(op, "axes", axes, na, st) != PARDO_OK) ||
        onnx_set_bool(op, "keepdims", onnx_attr_int(n, "keepdims", 1) != 0, st) != PARDO_OK ||
        (noop && onnx_set_bool(op, "noop_with_empty_axes", true, st) != PARDO_OK))
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

#define REDUCE18(fn, pardo_type)                                                                                   \
    static int fn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {                                       \
        return map_reduce(c, n, pardo_type, 18, st);                                                               \
    }
REDUCE18(map_reduce_min, "reduce_min")
REDUCE18(map_reduce_prod, "reduce_prod")
REDUCE18(map_reduce_l1, "reduce_l1")
REDUCE18(map_reduce_l2, "reduce_l2")
REDUCE18(map_reduce_sum_square, "reduce_sum_square")
REDUCE18(map_reduce_log_sum, "reduce_log_sum")
REDUCE18(map_reduce_log_sum_exp, "reduce_log_sum_exp")

/* ArgMax / ArgMin: pardo's argmax / argmin with the same attrs. */
static int map_arg_extreme(onnx_ctx *c, const Onnx__NodeProto *n, bool min, pardo_status *st) {
    static const char *const known[] = {"axis", "keepdims", "select_last_index", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, min ? "argmin" : "argmax", &x, 1, st) : NULL;
    return op && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", 0), st) == PARDO_OK &&
                   onnx_set_bool(op, "keepdims", onnx_attr_int(n, "keepdims", 1) != 0, st) == PARDO_OK &&
                   onnx_set_bool(op, "select_last_index", onnx_attr_int(n, "select_last_index", 0) != 0, st) ==
                       PARDO_OK
               ? PARDO_OK
               : st->code;
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
    const char *x = onnx_in_var(c, n, 0, st);
    if (!x) return st->code;
    int64_t shape[ONNX_MAX_INTS];
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
    if (ns < 0) {
        const char *s = onnx_in_var(c, n, 1, st);
        if (!s) return st->code;
        const char *in[2] = {x, s};
        pardo_op *op = onnx_emit1(c, n, "reshape", in, 2, st);
        return op && (!allowzero || onnx_set_bool(op, "allowzero", true, st) == PARDO_OK) ? PARDO_OK : st->code;
    }
    pardo_op *op = onnx_emit1(c, n, "reshape", &x, 1, st);
    return op && onnx_set_ints(op, "shape", shape, ns, st) == PARDO_OK &&
                   (!allowzero || onnx_set_bool(op, "allowzero", true, st) == PARDO_OK)
               ? PARDO_OK
               : st->code;
}

static int map_flatten(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "flatten", &x, 1, st) : NULL;
    return op && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", 1), st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_transpose(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"perm", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "transpose", &x, 1, st) : NULL;
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
        if (!(in[i] = onnx_in_var(c, n, (int)i, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "concat", in, (int)n->n_input, st);
    return op && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", 0), st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_cast(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"to", "saturate", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t to = onnx_attr_int(n, "to", 0);
    pardo_dtype dt = onnx_dtype((int32_t)to);
    if (dt == PARDO_DTYPE_UNKNOWN)
        return onnx_unsupported(c, st, "attr 'to' %s; pardo runs float32, float64, float16, bfloat16, "
                                "int8..int64, uint8..uint64 and bool",
                                onnx_dtype_name((int32_t)to));
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "cast", &x, 1, st) : NULL;
    return op && onnx_set_string(op, "dtype", pardo_dtype_name(dt), st) == PARDO_OK ? PARDO_OK : st->code;
}

/* QuantizeLinear / DequantizeLinear: per tensor or per axis (blocked quantization and output_dtype refused). */
static int map_quant(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"axis", "saturate", "block_size", "output_dtype", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (onnx_attr_int(n, "block_size", 0) != 0) return onnx_unsupported(c, st, "blocked quantization (block_size)");
    if (onnx_attr_int(n, "output_dtype", 0) != 0) return onnx_unsupported(c, st, "attr 'output_dtype'");
    const char *in[3];
    if (!(in[0] = onnx_in_var(c, n, 0, st)) || !(in[1] = onnx_in_var(c, n, 1, st)) ||
        !(in[2] = onnx_opt_var(c, n, 2, st)))
        return st->code;
    pardo_op *op = onnx_emit1(c, n, type, in, 3, st);
    return op && onnx_set_int(op, "axis", onnx_attr_int(n, "axis", 1), st) == PARDO_OK ? PARDO_OK : st->code;
}

static int map_quantize_linear(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_quant(c, n, "quantize_linear", st);
}

static int map_dequantize_linear(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_quant(c, n, "dequantize_linear", st);
}

static int map_dynamic_quantize_linear(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st), *out[3];
    if (!x) return st->code;
    for (int i = 0; i < 3; i++)
        if (!(out[i] = onnx_out_var(c, n, i, st))) return st->code;
    return onnx_emit(c, "dynamic_quantize_linear", &x, 1, out, 3, st) ? PARDO_OK : st->code;
}

static int map_matmul_integer(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *in[4];
    if (!(in[0] = onnx_in_var(c, n, 0, st)) || !(in[1] = onnx_in_var(c, n, 1, st)) ||
        !(in[2] = onnx_opt_var(c, n, 2, st)) || !(in[3] = onnx_opt_var(c, n, 3, st)))
        return st->code;
    return onnx_emit1(c, n, "matmul_integer", in, 4, st) ? PARDO_OK : st->code;
}

/* QLinearMatMul as matmul_integer (exact int32), cast to float32, times a_scale * b_scale (broadcast as numpy's,
 * as ONNX's reference), quantize_linear by y_scale and y_zero_point along the last axis (numpy's broadcast of 1-D). */
static int map_qlinear_matmul(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *v[8];
    for (int i = 0; i < 8; i++)
        if (!(v[i] = onnx_in_var(c, n, i, st))) return st->code;
    const char *acc = onnx_temp(c, "qmm_acc", st), *sab = acc ? onnx_temp(c, "qmm_scale", st) : NULL;
    const char *f = sab ? onnx_temp(c, "qmm_f", st) : NULL, *out = f ? onnx_out_var(c, n, 0, st) : NULL;
    if (!out) return st->code;
    const char *mi[4] = {v[0], v[3], v[2], v[5]}, *mul[2] = {v[1], v[4]};
    if (!onnx_emit(c, "matmul_integer", mi, 4, &acc, 1, st) || !onnx_emit(c, "mul", mul, 2, &sab, 1, st))
        return st->code;
    const char *accf = onnx_temp(c, "qmm_accf", st);
    if (!accf) return st->code;
    pardo_op *op = onnx_emit(c, "cast", &acc, 1, &accf, 1, st);
    if (!op || onnx_set_string(op, "dtype", "float32", st) != PARDO_OK) return st->code;
    const char *fm[2] = {accf, sab}, *q[3] = {f, v[6], v[7]};
    if (!onnx_emit(c, "mul", fm, 2, &f, 1, st)) return st->code;
    op = onnx_emit(c, "quantize_linear", q, 3, &out, 1, st);
    return op && onnx_set_int(op, "axis", -1, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* CastLike: cast to the dtype of input 1 (target_type), whose values are not read. */
static int map_cast_like(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"saturate", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const onnx_value *like = onnx_input(c, n, 1);
    if (!like) return onnx_bad(c, st, "input 1 'target_type' is required");
    pardo_type t;
    if (like->konst) t = pardo_tensor_type(like->konst);
    else if (!like->var) return onnx_unsupported(c, st, "input 1 'target_type' is a run-time shape vector");
    else if (onnx_type_of(c, like->var, &t, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "cast", &x, 1, st) : NULL;
    return op && onnx_set_string(op, "dtype", pardo_dtype_name(t.dtype), st) == PARDO_OK ? PARDO_OK : st->code;
}

/* Unsqueeze / Squeeze: axes from the attr before opset 13, from input 1 after. */
static int map_squeeze_like(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"axes", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t axes[ONNX_MAX_INTS];
    int na = 0;
    bool has = false;
    if (c->opset >= 13) {
        if (onnx_input(c, n, 1)) {
            has = true;
            if (!onnx_const_input_ints(c, n, 1, axes, &na))
                return onnx_unsupported(c, st, "input 1 (axes) must be a constant");
        }
    } else if (onnx_attr(n, "axes")) {
        const int64_t *a = onnx_attr_ints(n, "axes", &na);
        if (na > ONNX_MAX_INTS) return onnx_unsupported(c, st, "too many axes");
        if (na) memcpy(axes, a, sizeof(int64_t) * (size_t)na);
        has = true;
    }
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, type, &x, 1, st) : NULL;
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
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "shape", &x, 1, st) : NULL;
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
    const char *d = onnx_in_var(c, n, 0, st), *idx = d ? onnx_in_var(c, n, 1, st) : NULL;
    if (!idx) return st->code;
    if (axis == 0 && data->initializer && data->konst && data->konst->ndim == 2 &&
        pardo_dtype_is_float(data->konst->dtype)) {
        /* embedding wants indices in [0, V): fine for exported embeddings, which never index from the end */
        const char *in[2] = {d, idx};
        return onnx_emit1(c, n, "embedding", in, 2, st) ? PARDO_OK : st->code;
    }
    const char *in[2] = {d, idx};
    pardo_op *op = onnx_emit1(c, n, "gather", in, 2, st);
    return op && onnx_set_int(op, "axis", axis, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* GatherElements, ScatterElements (and opset 9-10 Scatter), GatherND,
 * ScatterND: one pardo op each, the attrs passed on. */
static int map_indexed(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, int n_in, const char *int_attr,
                       bool reduction, pardo_status *st) {
    const char *const known[] = {int_attr ? int_attr : "reduction", reduction ? "reduction" : NULL, NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[3] = {NULL, NULL, NULL};
    for (int k = 0; k < n_in; k++)
        if (!(in[k] = onnx_in_var(c, n, k, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, type, in, n_in, st);
    if (!op) return st->code;
    if (int_attr && onnx_attr(n, int_attr) &&
        onnx_set_int(op, int_attr, onnx_attr_int(n, int_attr, 0), st) != PARDO_OK)
        return st->code;
    if (reduction && onnx_attr(n, "reduction")) {
        char red[16];
        if (onnx_set_string(op, "reduction", onnx_attr_string(n, "reduction", "none", red, sizeof red), st) !=
            PARDO_OK)
            return st->code;
    }
    return PARDO_OK;
}

static int map_gather_elements(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_indexed(c, n, "gather_elements", 2, "axis", false, st);
}

static int map_scatter_elements(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_indexed(c, n, "scatter_elements", 3, "axis", true, st);
}

static int map_gather_nd(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_indexed(c, n, "gather_nd", 2, "batch_dims", false, st);
}

static int map_scatter_nd(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_indexed(c, n, "scatter_nd", 3, NULL, true, st);
}

static int map_slice(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"starts", "ends", "axes", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    if (!x) return st->code;
    static const char *const names[] = {"starts", "ends", "axes", "steps"};
    int64_t v[4][ONNX_MAX_INTS];
    int cnt[4] = {0};
    bool have[4] = {false}, runtime = false;
    for (int k = 0; k < 4; k++) {
        if (c->opset < 10) {
            const int64_t *a = onnx_attr_ints(n, names[k], &cnt[k]);
            if (a && cnt[k] <= ONNX_MAX_INTS) {
                memcpy(v[k], a, sizeof(int64_t) * (size_t)cnt[k]);
                have[k] = true;
            }
        } else if (onnx_input(c, n, k + 1)) {
            have[k] = true;
            if (!onnx_const_input_ints(c, n, k + 1, v[k], &cnt[k])) runtime = true;
        }
    }
    if (runtime) { /* bounds known only at run time: pardo's slice takes them as inputs */
        const char *in[5] = {x, onnx_opt_var(c, n, 1, st), onnx_opt_var(c, n, 2, st), onnx_opt_var(c, n, 3, st),
                             onnx_opt_var(c, n, 4, st)};
        for (int i = 1; i < 5; i++)
            if (!in[i]) return st->code;
        return onnx_emit1(c, n, "slice", in, 5, st) ? PARDO_OK : st->code;
    }
    pardo_op *op = onnx_emit1(c, n, "slice", &x, 1, st);
    if (!op) return st->code;
    for (int k = 0; k < 4; k++)
        if (have[k] && onnx_set_ints(op, names[k], v[k], cnt[k], st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

static int map_expand(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *in[2] = {onnx_in_var(c, n, 0, st), NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st))) return st->code;
    return onnx_emit1(c, n, "expand", in, 2, st) ? PARDO_OK : st->code;
}

static int map_constant_of_shape(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *s = onnx_in_var(c, n, 0, st);
    pardo_op *op = s ? onnx_emit1(c, n, "constant_of_shape", &s, 1, st) : NULL;
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
        if (!(in[i] = onnx_in_var(c, n, i, st))) return st->code;
    return onnx_emit1(c, n, "range", in, 3, st) ? PARDO_OK : st->code;
}

/* Split into n outputs along axis: one slice each. */
static int map_split(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", "split", "num_outputs", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    if (!x) return st->code;
    pardo_type t;
    if (onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    int64_t axis = onnx_attr_int(n, "axis", 0);
    if (axis < 0) axis += t.ndim;
    if (axis < 0 || axis >= t.ndim) return onnx_bad(c, st, "attr 'axis' out of range for rank %d", t.ndim);
    int64_t sizes[ONNX_MAX_INTS];
    int ns = 0, nout = (int)n->n_output;
    if (nout > ONNX_MAX_INTS) return onnx_unsupported(c, st, "%d outputs", nout);
    if (c->opset >= 13 && onnx_input(c, n, 1)) {
        if (!onnx_const_input_ints(c, n, 1, sizes, &ns))
            return onnx_unsupported(c, st, "input 1 (split) must be a constant");
    } else if (onnx_attr(n, "split")) {
        const int64_t *a = onnx_attr_ints(n, "split", &ns);
        if (ns > ONNX_MAX_INTS) return onnx_unsupported(c, st, "too many parts");
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

/* ONNX's auto_pad SAME_UPPER (upper) / SAME_LOWER pads of one axis: the input of size in, stride s, the dilated
 * kernel spanning span elements, out = ceil(in / s); the total padding with its larger half at the end (UPPER)
 * or the begin (LOWER) into *begin and *end. */
static void same_pads(int64_t in, int64_t s, int64_t span, bool upper, int64_t *begin, int64_t *end) {
    const int64_t out = (in + s - 1) / s;
    int64_t total = (out - 1) * s + span - in;
    if (total < 0) total = 0;
    *begin = upper ? total / 2 : total - total / 2;
    *end = total - *begin;
}

/* Node n's attr auto_pad: *same (SAME_UPPER or SAME_LOWER), *upper (SAME_UPPER) and *valid (VALID) set;
 * NOTSET (or absent) leaves all three false. Any other word: onnx_bad naming it. */
static int auto_pad_mode(onnx_ctx *c, const Onnx__NodeProto *n, bool *same, bool *upper, bool *valid,
                         pardo_status *st) {
    char ap[32];
    const char *auto_pad = onnx_attr_string(n, "auto_pad", "NOTSET", ap, sizeof ap);
    *upper = strcmp(auto_pad, "SAME_UPPER") == 0;
    *same = *upper || strcmp(auto_pad, "SAME_LOWER") == 0;
    *valid = strcmp(auto_pad, "VALID") == 0;
    if (!*same && !*valid && strcmp(auto_pad, "NOTSET") != 0)
        return onnx_bad(c, st, "attr 'auto_pad' '%s' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", auto_pad);
    return PARDO_OK;
}

/* The window geometry of Conv / MaxPool / AveragePool, checked, as 2-D:
 * strides s, pads p (top, left, bottom, right) and dilations d from the
 * node's attrs of nsp spatial dims (1: a 1-D window, seen as height 1).
 * xt: the (2-D view of the) input's type, for auto_pad; kernel: 2 dims. */
static int window_geometry(onnx_ctx *c, const Onnx__NodeProto *n, const pardo_type *xt, const int64_t *kernel, int nsp,
                           int64_t *s, int64_t *p, int64_t *d, pardo_status *st) {
    int ns = 0, np = 0, nd = 0;
    const int64_t *strides = onnx_attr_ints(n, "strides", &ns), *pads = onnx_attr_ints(n, "pads", &np),
                  *dil = onnx_attr_ints(n, "dilations", &nd);
    s[0] = s[1] = d[0] = d[1] = 1;
    p[0] = p[1] = p[2] = p[3] = 0;
    const int o = 2 - nsp; /* the first dim the attrs give */
    if (strides) {
        if (ns != nsp) return onnx_unsupported(c, st, "attr 'strides' of %d dims for a %d-D window", ns, nsp);
        memcpy(s + o, strides, sizeof(int64_t) * (size_t)nsp);
    }
    if (dil) {
        if (nd != nsp) return onnx_unsupported(c, st, "attr 'dilations' of %d dims for a %d-D window", nd, nsp);
        memcpy(d + o, dil, sizeof(int64_t) * (size_t)nsp);
    }
    char ap[32];
    const char *auto_pad = onnx_attr_string(n, "auto_pad", "NOTSET", ap, sizeof ap);
    if (strcmp(auto_pad, "NOTSET") == 0) {
        if (pads) {
            if (np != 2 * nsp) return onnx_unsupported(c, st, "attr 'pads' of %d values for a %d-D window", np, nsp);
            for (int i = 0; i < nsp; i++) {
                p[o + i] = pads[i];
                p[2 + o + i] = pads[nsp + i];
            }
        }
    } else if (strcmp(auto_pad, "VALID") != 0) {
        bool upper = strcmp(auto_pad, "SAME_UPPER") == 0;
        if (!upper && strcmp(auto_pad, "SAME_LOWER") != 0)
            return onnx_bad(c, st, "attr 'auto_pad' '%s' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", auto_pad);
        for (int i = 0; i < 2; i++) {
            int64_t in = xt->ndim == 4 ? xt->shape[2 + i] : -1;
            if (in < 0) return onnx_unsupported(c, st, "auto_pad SAME over a run-time spatial dim");
            same_pads(in, s[i], (kernel[i] - 1) * d[i] + 1, upper, &p[i], &p[i + 2]);
        }
    }
    return PARDO_OK;
}

/* The 2-D window attrs of Conv / MaxPool / AveragePool, checked. */
/* xt: the input's type, asked for before op was emitted (op has no attrs yet: inference would refuse it). */
static int window_attrs(onnx_ctx *c, const Onnx__NodeProto *n, const pardo_type *xt, const int64_t *kernel,
                        pardo_op *op, bool pool, pardo_status *st) {
    int64_t s[2], p[4], d[2];
    if (window_geometry(c, n, xt, kernel, 2, s, p, d, st) != PARDO_OK) return st->code;
    if (onnx_set_ints(op, "strides", s, 2, st) != PARDO_OK || onnx_set_ints(op, "pads", p, 4, st) != PARDO_OK)
        return st->code;
    if (!pool) return onnx_set_ints(op, "dilations", d, 2, st);
    if (d[0] != 1 || d[1] != 1) return onnx_unsupported(c, st, "attr 'dilations' other than 1 on a pool");
    return onnx_set_ints(op, "kernel", kernel, 2, st);
}

/* Conv of 1 or 3 spatial dims (weight wt of rank 3 or 5) as conv_nd: strides, dilations and pads as given,
 * auto_pad SAME_* as pads (ONNX's total padding, the larger half at the end for SAME_UPPER), VALID as none.
 * Needs static spatial dims of X for auto_pad SAME. */
static int map_conv_nd(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, const char *w, const char *b,
                       const pardo_type *wt, pardo_status *st) {
    if (wt->ndim != 3 && wt->ndim != 5)
        return onnx_unsupported(c, st, "a weight of rank %d; pardo runs 1 to 3 spatial dims", wt->ndim);
    const int nsp = wt->ndim - 2;
    pardo_type xt;
    if (onnx_type_of(c, x, &xt, st) != PARDO_OK) return st->code;
    if (xt.ndim >= 0 && xt.ndim != wt->ndim)
        return onnx_bad(c, st, "input of rank %d, weight of rank %d", xt.ndim, wt->ndim);
    int nk = 0, ns = 0, nd = 0, np = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk), *sa = onnx_attr_ints(n, "strides", &ns),
                  *da = onnx_attr_ints(n, "dilations", &nd), *pa = onnx_attr_ints(n, "pads", &np);
    int64_t k[3], s[3], d[3], p[6];
    for (int i = 0; i < nsp; i++) {
        k[i] = wt->shape[2 + i];
        s[i] = sa && ns == nsp ? sa[i] : 1;
        d[i] = da && nd == nsp ? da[i] : 1;
        p[i] = pa && np == 2 * nsp ? pa[i] : 0;
        p[nsp + i] = pa && np == 2 * nsp ? pa[nsp + i] : 0;
    }
    if (ks && (nk != nsp || memcmp(ks, k, sizeof(int64_t) * (size_t)nsp) != 0))
        return onnx_bad(c, st, "attr 'kernel_shape' does not match the weight's dims");
    if ((sa && ns != nsp) || (da && nd != nsp) || (pa && np != 2 * nsp))
        return onnx_bad(c, st, "attrs strides, dilations, pads of the wrong length for %d-D", nsp);
    bool same, upper, valid;
    if (auto_pad_mode(c, n, &same, &upper, &valid, st) != PARDO_OK) return st->code;
    if (valid)
        for (int i = 0; i < 2 * nsp; i++) p[i] = 0;
    for (int i = 0; same && i < nsp; i++) {
        const int64_t in = xt.ndim >= 0 ? xt.shape[2 + i] : -1;
        if (in < 0) return onnx_unsupported(c, st, "auto_pad SAME over a run-time spatial dim");
        same_pads(in, s[i], (k[i] - 1) * d[i] + 1, upper, &p[i], &p[nsp + i]);
    }
    const char *in[3] = {x, w, b};
    pardo_op *op = onnx_emit1(c, n, "conv_nd", in, *b ? 3 : 2, st);
    if (!op || onnx_set_ints(op, "strides", s, nsp, st) != PARDO_OK ||
        onnx_set_ints(op, "pads", p, 2 * nsp, st) != PARDO_OK ||
        onnx_set_ints(op, "dilations", d, nsp, st) != PARDO_OK ||
        onnx_set_int(op, "group", onnx_attr_int(n, "group", 1), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

static int map_conv(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st), *w = x ? onnx_in_var(c, n, 1, st) : NULL,
               *b = w ? onnx_opt_var(c, n, 2, st) : NULL;
    if (!b) return st->code;
    pardo_type wt;
    if (onnx_type_of(c, w, &wt, st) != PARDO_OK) return st->code;
    if (wt.ndim != 4) return map_conv_nd(c, n, x, w, b, &wt, st);
    int nk = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk);
    int64_t kernel[2] = {wt.shape[2], wt.shape[3]};
    if (ks && (nk != 2 || ks[0] != kernel[0] || ks[1] != kernel[1]))
        return onnx_bad(c, st, "attr 'kernel_shape' does not match the weight's dims");
    pardo_type xt;
    if (onnx_type_of(c, x, &xt, st) != PARDO_OK) return st->code;
    const char *in[3] = {x, w, b};
    pardo_op *op = onnx_emit1(c, n, "conv2d", in, *b ? 3 : 2, st);
    if (!op || window_attrs(c, n, &xt, kernel, op, false, st) != PARDO_OK ||
        onnx_set_int(op, "group", onnx_attr_int(n, "group", 1), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* ConvInteger as conv2d in float64 (every sum of uint8 / int8 products is an integer float64 holds exactly) of
 * X - x_zero_point and W - w_zero_point, cast to int32; a per-channel w_zero_point is refused. */
static int conv_integer_f64(onnx_ctx *c, const Onnx__NodeProto *n, const int idx[4], const char **y,
                            pardo_status *st) {
    static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *v[4] = {onnx_in_var(c, n, idx[0], st), NULL, NULL, NULL};
    if (!v[0] || !(v[1] = onnx_in_var(c, n, idx[1], st)) || !(v[2] = onnx_opt_var(c, n, idx[2], st)) ||
        !(v[3] = onnx_opt_var(c, n, idx[3], st)))
        return st->code;
    pardo_type xt, wt;
    if (onnx_type_of(c, v[0], &xt, st) != PARDO_OK || onnx_type_of(c, v[1], &wt, st) != PARDO_OK) return st->code;
    if (wt.ndim != 4) return onnx_unsupported(c, st, "a %d-D convolution; pardo runs 2-D (NCHW)", wt.ndim - 2);
    const char *f[2];
    for (int i = 0; i < 2; i++) {
        const char *zp = v[i + 2];
        if (*zp) {
            pardo_type zt;
            if (onnx_type_of(c, zp, &zt, st) != PARDO_OK) return st->code;
            if (pardo_shape_numel(zt.ndim, zt.shape) != 1)
                return onnx_unsupported(c, st, "a zero point of more than one value (input %d)", i + 2);
        }
        const char *cv = onnx_temp(c, "convint_f", st);
        pardo_op *op = cv ? onnx_emit(c, "cast", &v[i], 1, &cv, 1, st) : NULL;
        if (!op || onnx_set_string(op, "dtype", "float64", st) != PARDO_OK) return st->code;
        f[i] = cv;
        if (*zp) {
            const char *zf = onnx_temp(c, "convint_zp", st), *d = zf ? onnx_temp(c, "convint_d", st) : NULL;
            op = d ? onnx_emit(c, "cast", &zp, 1, &zf, 1, st) : NULL;
            if (!op || onnx_set_string(op, "dtype", "float64", st) != PARDO_OK) return st->code;
            const char *sub[2] = {cv, zf};
            if (!onnx_emit(c, "sub", sub, 2, &d, 1, st)) return st->code;
            f[i] = d;
        }
    }
    int nk = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk);
    int64_t kernel[2] = {wt.shape[2], wt.shape[3]};
    if (ks && (nk != 2 || ks[0] != kernel[0] || ks[1] != kernel[1]))
        return onnx_bad(c, st, "attr 'kernel_shape' does not match the weight's dims");
    *y = onnx_temp(c, "convint_y", st);
    pardo_op *op = *y ? onnx_emit(c, "conv2d", f, 2, y, 1, st) : NULL;
    if (!op || window_attrs(c, n, &xt, kernel, op, false, st) != PARDO_OK ||
        onnx_set_int(op, "group", onnx_attr_int(n, "group", 1), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

static int map_conv_integer(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const int idx[4] = {0, 1, 2, 3};
    const char *y = NULL, *out;
    if (conv_integer_f64(c, n, idx, &y, st) != PARDO_OK || !(out = onnx_out_var(c, n, 0, st))) return st->code;
    pardo_op *op = onnx_emit(c, "cast", &y, 1, &out, 1, st);
    return op && onnx_set_string(op, "dtype", "int32", st) == PARDO_OK ? PARDO_OK : st->code;
}

/* QLinearConv as ConvInteger's float64 conv, cast to float32, times x_scale * w_scale, quantize_linear by y_scale
 * and y_zero_point; a bias or a per-channel w_scale refused at import. */
static int map_qlinear_conv(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const int idx[4] = {0, 3, 2, 5};
    if (onnx_input(c, n, 8)) return onnx_unsupported(c, st, "a bias (input 8 'B')");
    const char *xs = onnx_in_var(c, n, 1, st), *ws = xs ? onnx_in_var(c, n, 4, st) : NULL;
    const char *ys = ws ? onnx_in_var(c, n, 6, st) : NULL, *yz = ys ? onnx_opt_var(c, n, 7, st) : NULL;
    if (!yz) return st->code;
    pardo_type wst;
    if (onnx_type_of(c, ws, &wst, st) != PARDO_OK) return st->code;
    if (pardo_shape_numel(wst.ndim, wst.shape) != 1) return onnx_unsupported(c, st, "a per-channel w_scale");
    const char *y = NULL;
    if (conv_integer_f64(c, n, idx, &y, st) != PARDO_OK) return st->code;
    const char *yf = onnx_temp(c, "qconv_f", st), *sc = yf ? onnx_temp(c, "qconv_s", st) : NULL;
    const char *r = sc ? onnx_temp(c, "qconv_r", st) : NULL, *out = r ? onnx_out_var(c, n, 0, st) : NULL;
    if (!out) return st->code;
    pardo_op *op = onnx_emit(c, "cast", &y, 1, &yf, 1, st);
    if (!op || onnx_set_string(op, "dtype", "float32", st) != PARDO_OK) return st->code;
    const char *m1[2] = {xs, ws}, *m2[2] = {yf, sc}, *q[3] = {r, ys, yz};
    if (!onnx_emit(c, "mul", m1, 2, &sc, 1, st) || !onnx_emit(c, "mul", m2, 2, &r, 1, st)) return st->code;
    op = onnx_emit(c, "quantize_linear", q, *yz ? 3 : 2, &out, 1, st);
    return op && onnx_set_int(op, "axis", 1, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* ConvTranspose of 1 to 3 spatial dims as conv_transpose: attr output_shape
 * and auto_pad SAME_* (output = input * stride) become pads, ONNX's total
 * padding split with the larger half at the begin (NOTSET, SAME_LOWER) or
 * the end (SAME_UPPER); a negative end pad (an output longer than the full
 * transposed convolution) becomes output_padding. Needs static spatial dims
 * of X where output_shape or auto_pad SAME is given. */
static int map_conv_transpose(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"auto_pad", "dilations",      "group",   "kernel_shape",
                                        "pads",     "output_padding", "strides", "output_shape", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st), *w = x ? onnx_in_var(c, n, 1, st) : NULL,
               *b = w ? onnx_opt_var(c, n, 2, st) : NULL;
    if (!b) return st->code;
    pardo_type xt, wt;
    if (onnx_type_of(c, x, &xt, st) != PARDO_OK || onnx_type_of(c, w, &wt, st) != PARDO_OK) return st->code;
    if (wt.ndim < 3 || wt.ndim > 5)
        return onnx_unsupported(c, st, "a weight of rank %d; pardo runs 1 to 3 spatial dims", wt.ndim);
    const int nsp = wt.ndim - 2;
    if (xt.ndim >= 0 && xt.ndim != wt.ndim)
        return onnx_bad(c, st, "input of rank %d, weight of rank %d", xt.ndim, wt.ndim);
    int nk = 0, ns = 0, nd = 0, np = 0, nop = 0, nos = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk), *sa = onnx_attr_ints(n, "strides", &ns),
                  *da = onnx_attr_ints(n, "dilations", &nd), *pa = onnx_attr_ints(n, "pads", &np),
                  *opa = onnx_attr_ints(n, "output_padding", &nop), *osa = onnx_attr_ints(n, "output_shape", &nos);
    int64_t k[3], s[3], d[3], op[3], p[6], os[3];
    for (int i = 0; i < nsp; i++) {
        k[i] = wt.shape[2 + i];
        s[i] = d[i] = 1;
        op[i] = p[i] = p[nsp + i] = 0;
    }
    if (ks && (nk != nsp || memcmp(ks, k, sizeof(int64_t) * (size_t)nsp) != 0))
        return onnx_bad(c, st, "attr 'kernel_shape' does not match the weight's dims");
    if ((sa && ns != nsp) || (da && nd != nsp) || (opa && nop != nsp) || (pa && np != 2 * nsp))
        return onnx_bad(c, st, "attrs strides, dilations, output_padding, pads of the wrong length for %d-D", nsp);
    if (osa && nos != nsp && nos != nsp + 2)
        return onnx_bad(c, st, "attr 'output_shape' of %d values for %d spatial dims", nos, nsp);
    for (int i = 0; i < nsp; i++) {
        if (sa) s[i] = sa[i];
        if (da) d[i] = da[i];
        if (opa) op[i] = opa[i];
        if (pa) p[i] = pa[i], p[nsp + i] = pa[nsp + i];
        if (osa) os[i] = osa[nos - nsp + i];
    }
    bool same, upper, valid;
    if (auto_pad_mode(c, n, &same, &upper, &valid, st) != PARDO_OK) return st->code;
    if (osa || same)
        for (int i = 0; i < nsp; i++) {
            const int64_t in = xt.ndim >= 0 ? xt.shape[2 + i] : -1;
            if (in < 0) return onnx_unsupported(c, st, "output_shape or auto_pad SAME over a run-time spatial dim");
            const int64_t want = osa ? os[i] : in * s[i];
            const int64_t total = s[i] * (in - 1) + op[i] + (k[i] - 1) * d[i] + 1 - want;
            const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor(total / 2) */
            p[i] = upper ? half : total - half;
            p[nsp + i] = total - p[i];
            if (p[i] < 0) return onnx_unsupported(c, st, "attr 'output_shape' needing a negative begin pad");
            if (p[nsp + i] < 0) {
                op[i] -= p[nsp + i];
                p[nsp + i] = 0;
            }
        }
    const char *in[3] = {x, w, b};
    pardo_op *o = onnx_emit1(c, n, "conv_transpose", in, *b ? 3 : 2, st);
    if (!o || onnx_set_ints(o, "strides", s, nsp, st) != PARDO_OK ||
        onnx_set_ints(o, "pads", p, 2 * nsp, st) != PARDO_OK ||
        onnx_set_ints(o, "dilations", d, nsp, st) != PARDO_OK ||
        onnx_set_ints(o, "output_padding", op, nsp, st) != PARDO_OK ||
        onnx_set_int(o, "group", onnx_attr_int(n, "group", 1), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* Whether a MaxPool / AveragePool needs max_pool_nd / avg_pool_nd: 3
 * spatial dims, a dilation other than 1, or MaxPool's output 1 (Indices). */
static bool pool_needs_nd(const Onnx__NodeProto *n) {
    int nk = 0, nd = 0;
    const int64_t *dil = onnx_attr_ints(n, "dilations", &nd);
    (void)onnx_attr_ints(n, "kernel_shape", &nk);
    for (int i = 0; dil && i < nd; i++)
        if (dil[i] != 1) return true;
    return nk == 3 || (n->n_output > 1 && n->output[1] && *n->output[1]);
}

int onnx_pool_geometry(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, onnx_pool_geom *g, pardo_status *st) {
    const bool ceil_mode = onnx_attr_int(n, "ceil_mode", 0) != 0;
    int nk = 0, ns = 0, nd = 0, np = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk), *sa = onnx_attr_ints(n, "strides", &ns),
                  *da = onnx_attr_ints(n, "dilations", &nd), *pa = onnx_attr_ints(n, "pads", &np);
    if (!ks) return onnx_bad(c, st, "attr 'kernel_shape' is required");
    if (nk < 1 || nk > 3) return onnx_unsupported(c, st, "a %d-D pool; pardo runs 1-D to 3-D (NC...)", nk);
    if ((sa && ns != nk) || (da && nd != nk) || (pa && np != 2 * nk))
        return onnx_bad(c, st, "attrs strides, dilations, pads of the wrong length for a %d-D pool", nk);
    pardo_type xt;
    if (onnx_type_of(c, x, &xt, st) != PARDO_OK) return st->code;
    if (xt.ndim >= 0 && xt.ndim != nk + 2) return onnx_bad(c, st, "a %d-D pool of a rank-%d input", nk, xt.ndim);
    g->nk = nk;
    int64_t *s = g->strides, *d = g->dilations, *p = g->pads;
    for (int i = 0; i < nk; i++) {
        if (ks[i] < 1) return onnx_bad(c, st, "kernel_shape[%d] = %lld; expected >= 1", i, (long long)ks[i]);
        g->kernel[i] = ks[i];
        s[i] = sa ? sa[i] : 1;
        d[i] = da ? da[i] : 1;
        p[i] = pa ? pa[i] : 0;
        p[nk + i] = pa ? pa[nk + i] : 0;
    }
    bool same, upper, valid;
    if (auto_pad_mode(c, n, &same, &upper, &valid, st) != PARDO_OK) return st->code;
    if (valid)
        for (int i = 0; i < 2 * nk; i++) p[i] = 0;
    for (int i = 0; i < nk && (same || ceil_mode); i++) {
        const int64_t in = xt.ndim >= 0 ? xt.shape[2 + i] : -1, span = (ks[i] - 1) * d[i] + 1;
        if (in < 0) return onnx_unsupported(c, st, "auto_pad SAME or ceil_mode over a run-time spatial dim");
        if (same) {
            same_pads(in, s[i], span, upper, &p[i], &p[nk + i]);
        } else {
            const int64_t room = in + p[i] + p[nk + i] - span;
            if (room < 0) continue;
            int64_t out = (room + s[i] - 1) / s[i] + 1;
            if ((out - 1) * s[i] >= in + p[i]) out--; /* no window may start in the end padding */
            const int64_t extra = (out - 1) * s[i] + span - (in + p[i] + p[nk + i]);
            if (extra > 0) p[nk + i] += extra;
        }
    }
    return PARDO_OK;
}

const char *onnx_pool_zero_pad(onnx_ctx *c, const char *x, onnx_pool_geom *g, pardo_status *st) {
    const int nk = g->nk;
    bool any_pad = false;
    for (int i = 0; i < 2 * nk; i++) any_pad = any_pad || g->pads[i] != 0;
    if (!any_pad) return x;
    int64_t pads[10] = {0};
    for (int i = 0; i < nk; i++) {
        pads[2 + i] = g->pads[i];
        pads[nk + 4 + i] = g->pads[nk + i];
    }
    const char *xp = onnx_temp(c, "pool_padded", st);
    pardo_op *pad = xp ? onnx_emit(c, "pad", &x, 1, &xp, 1, st) : NULL;
    if (!pad || onnx_set_ints(pad, "pads", pads, 2 * (nk + 2), st) != PARDO_OK) return NULL;
    for (int i = 0; i < 2 * nk; i++) g->pads[i] = 0;
    return xp;
}

pardo_op *onnx_emit_pool_nd(onnx_ctx *c, const char *type, const char *x, const char *const *out, int n_out,
                            const onnx_pool_geom *g, pardo_status *st) {
    const int nk = g->nk;
    pardo_op *op = onnx_emit(c, type, &x, 1, out, n_out, st);
    if (!op || onnx_set_ints(op, "kernel", g->kernel, nk, st) != PARDO_OK ||
        onnx_set_ints(op, "strides", g->strides, nk, st) != PARDO_OK ||
        onnx_set_ints(op, "pads", g->pads, 2 * nk, st) != PARDO_OK ||
        onnx_set_ints(op, "dilations", g->dilations, nk, st) != PARDO_OK)
        return NULL;
    return op;
}

/* MaxPool / AveragePool of 1 to 3 spatial dims as max_pool_nd (with its
 * Indices, storage_order) / avg_pool_nd: auto_pad SAME_* and ceil_mode as
 * pads (onnx_pool_geometry), count_include_pad as a zero pad before a pool
 * without pads. */
static int map_pool_nd(onnx_ctx *c, const Onnx__NodeProto *n, bool max, pardo_status *st) {
    const bool ceil_mode = onnx_attr_int(n, "ceil_mode", 0) != 0,
               include = !max && onnx_attr_int(n, "count_include_pad", 0) != 0;
    const int64_t order = onnx_attr_int(n, "storage_order", 0);
    if (ceil_mode && include) return onnx_unsupported(c, st, "attrs 'ceil_mode' and 'count_include_pad' both 1");
    const char *x = onnx_in_var(c, n, 0, st);
    onnx_pool_geom g;
    if (!x || onnx_pool_geometry(c, n, x, &g, st) != PARDO_OK) return st->code;
    if (include && !(x = onnx_pool_zero_pad(c, x, &g, st))) return st->code;
    const int nout = max && n->n_output > 1 && n->output[1] && *n->output[1] ? 2 : 1;
    const char *out[2];
    for (int i = 0; i < nout; i++)
        if (!(out[i] = onnx_out_var(c, n, i, st))) return st->code;
    pardo_op *op = onnx_emit_pool_nd(c, max ? "max_pool_nd" : "avg_pool_nd", x, out, nout, &g, st);
    if (!op) return st->code;
    if (max && order != 0 && onnx_set_int(op, "storage_order", order, st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

/* MaxPool / AveragePool of 1 or 2 spatial dims (a 1-D one as height 1:
 * unsqueeze, the 2-D pool, squeeze), or through map_pool_nd where
 * pool_needs_nd (attr storage_order only orders the Indices); ceil_mode as
 * the extra end padding that gives its last window (over static spatial dims); AveragePool's
 * count_include_pad as a zero pad before a pool without pads. */
static int map_pool(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    static const char *const known[] = {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                                        "pads", "storage_order", "strides", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (pool_needs_nd(n)) return map_pool_nd(c, n, strcmp(type, "max_pool2d") == 0, st);
    const bool ceil_mode = onnx_attr_int(n, "ceil_mode", 0) != 0, include = onnx_attr_int(n, "count_include_pad", 0);
    if (ceil_mode && include) return onnx_unsupported(c, st, "attrs 'ceil_mode' and 'count_include_pad' both 1");
    int nk = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk);
    if (!ks) return onnx_bad(c, st, "attr 'kernel_shape' is required");
    if (nk != 2 && nk != 1) return onnx_unsupported(c, st, "a %d-D pool; pardo runs 1-D and 2-D (NCHW)", nk);
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_type xt;
    if (!x || onnx_type_of(c, x, &xt, st) != PARDO_OK) return st->code;
    if (xt.ndim >= 0 && xt.ndim != nk + 2) return onnx_bad(c, st, "a %d-D pool of a rank-%d input", nk, xt.ndim);
    const int64_t kernel[2] = {nk == 1 ? 1 : ks[0], ks[nk - 1]};
    int64_t s[2], p[4], d[2], axis2 = 2;
    if (nk == 1) {
        const char *x4 = onnx_temp(c, "pool_2d", st);
        pardo_op *u = x4 ? onnx_emit(c, "unsqueeze", &x, 1, &x4, 1, st) : NULL;
        if (!u || onnx_set_ints(u, "axes", &axis2, 1, st) != PARDO_OK) return st->code;
        x = x4;
        if (xt.ndim == 3) {
            xt.ndim = 4;
            xt.shape[3] = xt.shape[2];
            xt.shape[2] = 1;
        }
    }
    if (window_geometry(c, n, &xt, kernel, nk, s, p, d, st) != PARDO_OK) return st->code;
    if (d[0] != 1 || d[1] != 1) return onnx_unsupported(c, st, "attr 'dilations' other than 1 on a pool");
    if (ceil_mode)
        for (int i = 0; i < 2; i++) {
            const int64_t in = xt.ndim == 4 ? xt.shape[2 + i] : -1, span = in + p[i] + p[2 + i] - kernel[i];
            if (in < 0) return onnx_unsupported(c, st, "ceil_mode over a run-time spatial dim");
            if (span < 0) continue;
            int64_t out = (span + s[i] - 1) / s[i] + 1;
            if ((out - 1) * s[i] >= in + p[i]) out--; /* no window may start in the end padding */
            const int64_t extra = (out - 1) * s[i] + kernel[i] - (in + p[i] + p[2 + i]);
            if (extra > 0) p[2 + i] += extra;
        }
    if (include && (p[0] || p[1] || p[2] || p[3]) && strcmp(type, "avg_pool2d") == 0) {
        const int64_t pads[8] = {0, 0, p[0], p[1], 0, 0, p[2], p[3]};
        const char *xp = onnx_temp(c, "pool_padded", st);
        pardo_op *pad = xp ? onnx_emit(c, "pad", &x, 1, &xp, 1, st) : NULL;
        if (!pad || onnx_set_ints(pad, "pads", pads, 8, st) != PARDO_OK) return st->code;
        x = xp;
        p[0] = p[1] = p[2] = p[3] = 0;
    }
    const char *y = nk == 1 ? onnx_temp(c, "pool_2d_out", st) : onnx_out_var(c, n, 0, st);
    pardo_op *op = y ? onnx_emit(c, type, &x, 1, &y, 1, st) : NULL;
    if (!op || onnx_set_ints(op, "strides", s, 2, st) != PARDO_OK || onnx_set_ints(op, "pads", p, 4, st) != PARDO_OK ||
        onnx_set_ints(op, "kernel", kernel, 2, st) != PARDO_OK)
        return st->code;
    if (nk == 1) {
        const char *out = onnx_out_var(c, n, 0, st);
        pardo_op *sq = out ? onnx_emit(c, "squeeze", &y, 1, &out, 1, st) : NULL;
        if (!sq || onnx_set_ints(sq, "axes", &axis2, 1, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

static int map_max_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_pool(c, n, "max_pool2d", st);
}

static int map_average_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_pool(c, n, "avg_pool2d", st);
}

static int map_global_pool(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, pardo_status *st) {
    if (onnx_check_attrs(c, n, onnx_no_attrs, st) != PARDO_OK) return st->code;
    const char *x = onnx_in_var(c, n, 0, st);
    if (!x) return st->code;
    pardo_type t;
    if (onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 3) return onnx_bad(c, st, "input of rank %d; expected [N, C, spatial...]", t.ndim);
    int64_t axes[PARDO_MAX_DIMS];
    for (int i = 2; i < t.ndim; i++) axes[i - 2] = i;
    pardo_op *op = onnx_emit1(c, n, type, &x, 1, st);
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


/* MaxUnpool as max_unpool: attrs kernel_shape, strides and pads as kernel, strides, pads; input 2 output_shape
 * (optional) passed on. */
static int map_max_unpool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"kernel_shape", "pads", "strides", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int nk = 0, ns = 0, np = 0;
    const int64_t *ks = onnx_attr_ints(n, "kernel_shape", &nk), *sa = onnx_attr_ints(n, "strides", &ns),
                  *pa = onnx_attr_ints(n, "pads", &np);
    if (!ks) return onnx_bad(c, st, "attr 'kernel_shape' is required");
    const char *in[3] = {onnx_in_var(c, n, 0, st), NULL, NULL};
    if (!in[0] || !(in[1] = onnx_in_var(c, n, 1, st)) || !(in[2] = onnx_opt_var(c, n, 2, st))) return st->code;
    pardo_op *op = onnx_emit1(c, n, "max_unpool", in, *in[2] ? 3 : 2, st);
    if (!op || onnx_set_ints(op, "kernel", ks, nk, st) != PARDO_OK ||
        (sa && onnx_set_ints(op, "strides", sa, ns, st) != PARDO_OK) ||
        (pa && onnx_set_ints(op, "pads", pa, np, st) != PARDO_OK))
        return st->code;
    return PARDO_OK;
}

/* RoiAlign as roi_align, its attrs as they are; before opset 16 (no attr coordinate_transformation_mode) the
 * legacy "output_half_pixel". */
static int map_roi_align(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"coordinate_transformation_mode", "mode", "output_height", "output_width",
                                        "sampling_ratio", "spatial_scale", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *in[3];
    for (int i = 0; i < 3; i++)
        if (!(in[i] = onnx_in_var(c, n, i, st))) return st->code;
    char mode[32], ctm[32];
    pardo_op *op = onnx_emit1(c, n, "roi_align", in, 3, st);
    if (!op ||
        onnx_set_string(op, "mode", onnx_attr_string(n, "mode", "avg", mode, sizeof mode), st) != PARDO_OK ||
        onnx_set_string(op, "coordinate_transformation_mode",
                        onnx_attr_string(n, "coordinate_transformation_mode",
                                         c->opset >= 16 ? "half_pixel" : "output_half_pixel", ctm, sizeof ctm),
                        st) != PARDO_OK ||
        onnx_set_int(op, "output_height", onnx_attr_int(n, "output_height", 1), st) != PARDO_OK ||
        onnx_set_int(op, "output_width", onnx_attr_int(n, "output_width", 1), st) != PARDO_OK ||
        onnx_set_int(op, "sampling_ratio", onnx_attr_int(n, "sampling_ratio", 0), st) != PARDO_OK ||
        onnx_set_float(op, "spatial_scale", onnx_attr_float(n, "spatial_scale", 1.0), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* LRN as lrn, its attrs as they are (size required). */
static int map_lrn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"alpha", "beta", "bias", "size", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (!onnx_attr(n, "size")) return onnx_bad(c, st, "attr 'size' is required");
    const char *x = onnx_in_var(c, n, 0, st);
    pardo_op *op = x ? onnx_emit1(c, n, "lrn", &x, 1, st) : NULL;
    if (!op || onnx_set_int(op, "size", onnx_attr_int(n, "size", 1), st) != PARDO_OK ||
        onnx_set_float(op, "alpha", onnx_attr_float(n, "alpha", 1e-4), st) != PARDO_OK ||
        onnx_set_float(op, "beta", onnx_attr_float(n, "beta", 0.75), st) != PARDO_OK ||
        onnx_set_float(op, "bias", onnx_attr_float(n, "bias", 1.0), st) != PARDO_OK)
        return st->code;
    return PARDO_OK;
}

/* BatchNormalization with statistics known at load: a batch_norm op, its scale and bias params, its
 * running mean and var state vars (the model's weights), so that a fine-tuned model normalises with each
 * batch's statistics and updates the running ones, and eval mode uses those. */
static int map_batch_norm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"epsilon", "momentum", "spatial", "training_mode", "is_test", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    if (onnx_attr_int(n, "training_mode", 0)) return onnx_batch_norm_training(c, n, st);
    for (size_t i = 1; i < n->n_output; i++)
        if (n->output[i] && *n->output[i]) return onnx_unsupported(c, st, "output %zu (training statistics)", i);
    onnx_value *p[4];
    bool konst = true;
    for (int i = 0; i < 4; i++) {
        if (!(p[i] = onnx_input(c, n, i + 1))) return onnx_bad(c, st, "input %d is missing", i + 1);
        konst = konst && p[i]->konst && pardo_dtype_is_float(p[i]->konst->dtype) && p[i]->konst->ndim == 1;
    }
    if (!konst) return onnx_batch_norm_at_run_time(c, n, st);
    int64_t ch = p[0]->konst->numel;
    for (int i = 1; i < 4; i++)
        if (p[i]->konst->numel != ch) return onnx_bad(c, st, "input %d has %lld elements, input 1 %lld", i + 1,
                                                      (long long)p[i]->konst->numel, (long long)ch);
    const char *x = onnx_in_var(c, n, 0, st);
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
    const char *in[3] = {onnx_in_var(c, n, 0, st), NULL, NULL};
    if (!in[0] || !(in[1] = onnx_opt_var(c, n, 1, st)) || !(in[2] = onnx_opt_var(c, n, 2, st))) return st->code;
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

/* Dropout whose training_mode (input 2, opset 12 on) is not a constant false: pardo's dropout with the
 * node's ratio and training_mode as its run-time inputs (training with a ratio above 0 draws pardo's own mask). */
static int map_dropout_training(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *in[3] = {onnx_in_var(c, n, 0, st), NULL, NULL}, *out[2] = {NULL, ""};
    if (!in[0] || !(in[1] = onnx_opt_var(c, n, 1, st)) || !(in[2] = onnx_in_var(c, n, 2, st))) return st->code;
    if (!(out[0] = onnx_out_var(c, n, 0, st))) return st->code;
    const bool mask = n->n_output > 1 && n->output[1][0];
    if (mask && !(out[1] = onnx_out_var(c, n, 1, st))) return st->code;
    pardo_op *op = onnx_emit(c, "dropout", in, 3, out, mask ? 2 : 1, st);
    if (!op) return st->code;
    return onnx_attr(n, "seed") ? onnx_set_int(op, "seed", onnx_attr_int(n, "seed", 0), st) : PARDO_OK;
}

/* Dropout at inference: the identity, and its mask (output 1) all true. */
static int map_dropout(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (c->opset >= 12 && onnx_input(c, n, 2)) {
        double training;
        if (!onnx_const_input_scalar(c, n, 2, &training) || training != 0) return map_dropout_training(c, n, st);
    }
    const char *x = onnx_in_var(c, n, 0, st);
    if (!x || !onnx_emit1(c, n, "identity", &x, 1, st)) return st->code;
    if (n->n_output < 2 || !n->output[1][0]) return PARDO_OK;
    /* the mask of an inference-mode Dropout: true everywhere, X's shape */
    const char *shp = onnx_temp(c, "dropout_shape", st), *mask = shp ? onnx_out_var(c, n, 1, st) : NULL;
    if (!mask || !onnx_emit(c, "shape", &x, 1, &shp, 1, st)) return st->code;
    pardo_op *op = onnx_emit(c, "constant_of_shape", &shp, 1, &mask, 1, st);
    return op && onnx_set_string(op, "dtype", "bool", st) == PARDO_OK && onnx_set_bool(op, "value", true, st) == PARDO_OK
               ? PARDO_OK
               : st->code;
}

/* Size folds at load (onnx_fold.c) unless its input has two run-time dims. */
static int map_size(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    (void)n;
    return onnx_unsupported(c, st, "the size of a tensor with two or more run-time dims");
}

/* RNN, GRU, LSTM: the rnn, gru and lstm ops, inputs and outputs as they are (absent ones ""), the attrs with the
 * activation names in pardo's snake_case (ONNX's LeakyRelu -> leaky_relu). */
static int map_recurrent(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, int n_in, int n_out,
                         pardo_status *st) {
    static const char *const known[] = {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                                        "hidden_size", "layout", "linear_before_reset", "input_forget", NULL};
    static const char *const acts[][2] = {
        {"Relu", "relu"},   {"Tanh", "tanh"}, {"Sigmoid", "sigmoid"}, {"Affine", "affine"},
        {"LeakyRelu", "leaky_relu"}, {"ThresholdedRelu", "thresholded_relu"}, {"ScaledTanh", "scaled_tanh"},
        {"HardSigmoid", "hard_sigmoid"}, {"Elu", "elu"}, {"Softsign", "softsign"}, {"Softplus", "softplus"},
    };
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const bool gru = strcmp(type, "gru") == 0, lstm = strcmp(type, "lstm") == 0;
    if ((onnx_attr(n, "linear_before_reset") && !gru) || (onnx_attr(n, "input_forget") && !lstm))
        return onnx_unsupported(c, st, "attr '%s' on %s (linear_before_reset is GRU's, input_forget LSTM's)",
                                gru ? "input_forget" : onnx_attr(n, "linear_before_reset") ? "linear_before_reset"
                                                                                        : "input_forget",
                                n->op_type);
    if ((int)n->n_input > n_in) return onnx_bad(c, st, "%zu inputs, expected at most %d", n->n_input, n_in);
    if ((int)n->n_output > n_out) return onnx_bad(c, st, "%zu outputs, expected at most %d", n->n_output, n_out);
    const char *in[8], *outs[3];
    if (!(in[0] = onnx_in_var(c, n, 0, st)) || !(in[1] = onnx_in_var(c, n, 1, st)) ||
        !(in[2] = onnx_in_var(c, n, 2, st)))
        return st->code;
    for (int k = 3; k < n_in; k++)
        if (!(in[k] = onnx_opt_var(c, n, k, st))) return st->code;
    int no = 0;
    for (size_t i = 0; i < n->n_output && i < (size_t)n_out; i++) {
        if (!n->output[i] || !*n->output[i]) {
            outs[no++] = "";
            continue;
        }
        if (!(outs[no++] = onnx_out_var(c, n, (int)i, st))) return st->code;
    }
    pardo_op *op = onnx_emit(c, type, in, n_in, outs, no, st);
    if (!op) return st->code;
    char buf[32];
    if ((onnx_attr(n, "hidden_size") && onnx_set_int(op, "hidden_size", onnx_attr_int(n, "hidden_size", 0), st)) ||
        onnx_set_int(op, "layout", onnx_attr_int(n, "layout", 0), st) ||
        onnx_set_string(op, "direction", onnx_attr_string(n, "direction", "forward", buf, sizeof buf), st) ||
        (onnx_attr(n, "clip") && onnx_set_float(op, "clip", onnx_attr_float(n, "clip", 0), st)) ||
        (gru && onnx_set_int(op, "linear_before_reset", onnx_attr_int(n, "linear_before_reset", 0), st)) ||
        (lstm && onnx_set_int(op, "input_forget", onnx_attr_int(n, "input_forget", 0), st)))
        return st->code;
    const Onnx__AttributeProto *a = onnx_attr(n, "activations");
    if (a && a->n_strings) {
        pardo_value *list = pardo_value_new_array();
        if (!list) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        for (size_t i = 0; i < a->n_strings; i++) {
            const char *name = NULL;
            char s[32];
            snprintf(s, sizeof s, "%.*s", (int)a->strings[i].len, (const char *)a->strings[i].data);
            for (size_t k = 0; k < sizeof acts / sizeof acts[0] && !name; k++)
                if (strcasecmp(s, acts[k][0]) == 0) name = acts[k][1];
            pardo_value *item = name ? pardo_value_new_string(name) : NULL;
            if (!name || !item || pardo_value_append(list, item, st) != PARDO_OK) {
                pardo_value_free(item);
                pardo_value_free(list);
                return name ? st->code
                            : onnx_unsupported(c, st, "activation '%s' (pardo's cells run Relu, Tanh, Sigmoid, Affine, "
                                               "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign "
                                               "and Softplus)", s);
            }
            pardo_value_free(item);
        }
        if (pardo_op_set_attr(op, "activations", list, st) != PARDO_OK) return st->code;
    }
    static const char *const lists[2] = {"activation_alpha", "activation_beta"};
    for (int l = 0; l < 2; l++) {
        const Onnx__AttributeProto *fl = onnx_attr(n, lists[l]);
        if (!fl) continue;
        pardo_value *list = pardo_value_new_array();
        if (!list) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        for (size_t i = 0; i < fl->n_floats; i++) {
            pardo_value *item = pardo_value_new_number(fl->floats[i]);
            if (!item || pardo_value_append(list, item, st) != PARDO_OK) {
                pardo_value_free(item);
                pardo_value_free(list);
                return item ? st->code : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
            }
            pardo_value_free(item);
        }
        if (pardo_op_set_attr(op, lists[l], list, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

static int map_rnn(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_recurrent(c, n, "rnn", 6, 2, st); }
static int map_gru(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) { return map_recurrent(c, n, "gru", 6, 2, st); }
static int map_lstm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_recurrent(c, n, "lstm", 8, 3, st);
}

/* ---- the table ---- */

static const onnx_mapping table[] = {
    {"Abs", map_abs},
    {"Acos", map_acos},
    {"Acosh", map_acosh},
    {"Add", map_add},
    {"And", map_and},
    {"ArgMax", map_argmax},
    {"ArgMin", map_argmin},
    {"Asin", map_asin},
    {"Asinh", map_asinh},
    {"Atan", map_atan},
    {"Atanh", map_atanh},
    {"AveragePool", map_average_pool},
    {"BatchNormalization", map_batch_norm},
    {"BitShift", map_bit_shift},
    {"BlackmanWindow", map_blackman_window},
    {"Cast", map_cast},
    {"CastLike", map_cast_like},
    {"Ceil", map_ceil},
    {"Celu", map_celu},
    {"Clip", map_clip},
    {"Compress", map_compress},
    {"Concat", map_concat},
    {"Constant", NULL},
    {"ConstantOfShape", map_constant_of_shape},
    {"Conv", map_conv},
    {"ConvInteger", map_conv_integer},
    {"ConvTranspose", map_conv_transpose},
    {"Cos", map_cos},
    {"Cosh", map_cosh},
    {"CumSum", map_cumsum},
    {"DFT", map_dft},
    {"DequantizeLinear", map_dequantize_linear},
    {"Det", map_det},
    {"Div", map_div},
    {"Dropout", map_dropout},
    {"DynamicQuantizeLinear", map_dynamic_quantize_linear},
    {"Einsum", map_einsum},
    {"Elu", map_elu},
    {"Equal", map_equal},
    {"Erf", map_erf},
    {"Exp", map_exp},
    {"Expand", map_expand},
    {"EyeLike", map_eye_like},
    {"Flatten", map_flatten},
    {"Floor", map_floor},
    {"GRU", map_gru},
    {"Gather", map_gather},
    {"GatherElements", map_gather_elements},
    {"GatherND", map_gather_nd},
    {"Gemm", map_gemm},
    {"GlobalAveragePool", map_global_average_pool},
    {"GlobalMaxPool", map_global_max_pool},
    {"Greater", map_greater},
    {"GreaterOrEqual", map_greater_or_equal},
    {"GridSample", map_grid_sample},
    {"HammingWindow", map_hamming_window},
    {"HannWindow", map_hann_window},
    {"HardSigmoid", map_hard_sigmoid},
    {"HardSwish", map_hard_swish},
    {"Hardmax", map_hardmax},
    {"Identity", map_identity},
    {"If", onnx_map_if},
    {"IsInf", map_is_inf},
    {"IsNaN", map_is_nan},
    {"LRN", map_lrn},
    {"LSTM", map_lstm},
    {"LayerNormalization", map_layer_norm},
    {"LeakyRelu", map_leaky_relu},
    {"Less", map_less},
    {"LessOrEqual", map_less_or_equal},
    {"Log", map_log},
    {"LogSoftmax", map_log_softmax},
    {"Loop", onnx_map_loop},
    {"MatMul", map_matmul},
    {"MatMulInteger", map_matmul_integer},
    {"Max", map_max},
    {"MaxPool", map_max_pool},
    {"MaxUnpool", map_max_unpool},
    {"Mean", map_mean},
    {"MelWeightMatrix", map_mel_weight_matrix},
    {"Min", map_min},
    {"Mish", map_mish},
    {"Mod", map_mod},
    {"Mul", map_mul},
    {"Neg", map_neg},
    {"NegativeLogLikelihoodLoss", map_nll_loss},
    {"NonMaxSuppression", map_nms},
    {"NonZero", map_non_zero},
    {"Not", map_not},
    {"OneHot", map_one_hot},
    {"Or", map_or},
    {"PRelu", map_prelu},
    {"Pad", map_pad},
    {"Pow", map_pow},
    {"QLinearConv", map_qlinear_conv},
    {"QLinearMatMul", map_qlinear_matmul},
    {"QuantizeLinear", map_quantize_linear},
    {"RNN", map_rnn},
    {"Range", map_range},
    {"Reciprocal", map_reciprocal},
    {"ReduceL1", map_reduce_l1},
    {"ReduceL2", map_reduce_l2},
    {"ReduceLogSum", map_reduce_log_sum},
    {"ReduceLogSumExp", map_reduce_log_sum_exp},
    {"ReduceMax", map_reduce_max},
    {"ReduceMean", map_reduce_mean},
    {"ReduceMin", map_reduce_min},
    {"ReduceProd", map_reduce_prod},
    {"ReduceSum", map_reduce_sum},
    {"ReduceSumSquare", map_reduce_sum_square},
    {"Relu", map_relu},
    {"Reshape", map_reshape},
    {"Resize", map_resize},
    {"ReverseSequence", map_reverse_sequence},
    {"RoiAlign", map_roi_align},
    {"Round", map_round},
    {"STFT", map_stft},
    {"Scan", onnx_map_scan},
    {"Scatter", map_scatter_elements},
    {"ScatterElements", map_scatter_elements},
    {"ScatterND", map_scatter_nd},
    {"Selu", map_selu},
    {"Shape", map_shape},
    {"Shrink", map_shrink},
    {"Sigmoid", map_sigmoid},
    {"Sign", map_sign},
    {"Sin", map_sin},
    {"Sinh", map_sinh},
    {"Size", map_size},
    {"Slice", map_slice},
    {"Softmax", map_softmax},
    {"Softplus", map_softplus},
    {"Softsign", map_softsign},
    {"Split", map_split},
    {"Sqrt", map_sqrt},
    {"Squeeze", map_squeeze},
    {"Sub", map_sub},
    {"Sum", map_sum},
    {"Tan", map_tan},
    {"Tanh", map_tanh},
    {"TfIdfVectorizer", map_tf_idf_vectorizer},
    {"ThresholdedRelu", map_thresholded_relu},
    {"TopK", map_top_k},
    {"Transpose", map_transpose},
    {"Unique", map_unique},
    {"Unsqueeze", map_unsqueeze},
    {"Upsample", map_upsample},
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

/* Binary search of the n sorted entries of t for op_type; NULL when absent. */
static const onnx_mapping *search(const onnx_mapping *t, size_t n, const char *op_type) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int cmp = strcmp(op_type, t[mid].op_type);
        if (cmp == 0) return &t[mid];
        if (cmp < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

/* Once: both tables must be sorted for the binary search and share no op type (pardo's own invariants);
 * the list of names, the two tables merged in order. */
static void check_table(void) {
    const size_t n1 = sizeof table / sizeof table[0], n2 = onnx_compose_count;
    for (size_t i = 1; i < n1; i++) PARDO_ASSERT(strcmp(table[i - 1].op_type, table[i].op_type) < 0);
    for (size_t i = 1; i < n2; i++)
        PARDO_ASSERT(strcmp(onnx_compose_table[i - 1].op_type, onnx_compose_table[i].op_type) < 0);
    size_t off = 0, i = 0, j = 0;
    while (i < n1 || j < n2) {
        const char *name;
        if (j == n2 || (i < n1 && strcmp(table[i].op_type, onnx_compose_table[j].op_type) < 0)) {
            name = table[i++].op_type;
        } else {
            PARDO_ASSERT(i == n1 || strcmp(table[i].op_type, onnx_compose_table[j].op_type) != 0);
            name = onnx_compose_table[j++].op_type;
        }
        if (off < sizeof supported - 32)
            off += (size_t)snprintf(supported + off, sizeof supported - off, "%s%s", off ? ", " : "", name);
    }
}

onnx_map_fn onnx_find_mapping(const char *op_type) {
    pthread_once(&table_once, check_table);
    const onnx_mapping *m = search(table, sizeof table / sizeof table[0], op_type);
    if (m) return m->fn ? m->fn : map_constant_folded;
    m = search(onnx_compose_table, onnx_compose_count, op_type);
    return m ? m->fn : NULL;
}

const char *onnx_supported_list(void) {
    pthread_once(&table_once, check_table);
    return supported;
}
