/* onnx_fold.c - the shape computations of exported models evaluated at
 * load. PyTorch writes a reshape's target as Shape -> Gather -> Unsqueeze ->
 * Concat (-> Mul, Div, Cast, Slice) chains; where the dims they read are
 * static these fold to constants, and where one is the batch of a dynamic
 * axis they fold to a shape vector whose entry says "dim d of var X times
 * k", which a Reshape turns into its -1 and anything else computes at run
 * time (onnx_var_of). Nodes whose inputs are neither are left to the
 * mappings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx_internal.h"

#define MAX_IVEC 64

/* A small integer vector: constant entries or run-time dims. */
typedef struct ivec {
    onnx_dim d[MAX_IVEC];
    int n;
    bool scalar;
    pardo_dtype dtype; // of a constant one (int32 or int64)
} ivec;

/* v as an ivec: an int32/int64 constant of rank <= 1, or a shape vector. */
static bool as_ivec(const onnx_value *v, ivec *out) {
    if (!v) return false;
    memset(out, 0, sizeof(*out));
    out->dtype = PARDO_I64;
    if (v->sym) {
        out->n = v->n_sym;
        out->scalar = v->sym_scalar;
        memcpy(out->d, v->sym, sizeof(onnx_dim) * (size_t)v->n_sym);
        return true;
    }
    const pardo_tensor *t = v->konst;
    if (!t || (t->dtype != PARDO_I64 && t->dtype != PARDO_I32) || t->ndim > 1 || t->numel > MAX_IVEC) return false;
    out->n = (int)t->numel;
    out->scalar = t->ndim == 0;
    out->dtype = t->dtype;
    for (int i = 0; i < out->n; i++)
        out->d[i].value = t->dtype == PARDO_I64 ? ((const int64_t *)pardo_tensor_data(t))[i]
                                                : ((const int32_t *)pardo_tensor_data(t))[i];
    return true;
}

static bool ivec_known(const ivec *v) {
    for (int i = 0; i < v->n; i++)
        if (v->d[i].var) return false;
    return true;
}

/* Output i of n set to v: a constant when every entry is known. */
static int set_ivec(onnx_ctx *c, const Onnx__NodeProto *n, int i, const ivec *v, pardo_status *st) {
    if (!ivec_known(v)) {
        if (v->scalar) return onnx_set_sym(c, n, i, v->d, -1, st);
        return onnx_set_sym(c, n, i, v->d, v->n, st);
    }
    int64_t shape[1] = {v->n};
    pardo_tensor *t = pardo_tensor_new_cpu(v->dtype, v->scalar ? 0 : 1, shape, st);
    if (!t) return st->code;
    for (int k = 0; k < v->n; k++) {
        if (v->dtype == PARDO_I32) ((int32_t *)pardo_tensor_data(t))[k] = (int32_t)v->d[k].value;
        else ((int64_t *)pardo_tensor_data(t))[k] = v->d[k].value;
    }
    return onnx_set_const(c, n, i, t, st);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- one fold per op type; each returns PARDO_OK with *done set, or an error ---- */

static int fold_constant(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    const Onnx__AttributeProto *a;
    pardo_tensor *t = NULL;
    char what[600];
    snprintf(what, sizeof what, "%s: node '%s' (index %d, Constant)", c->path, n->name ? n->name : "", c->node_index);
    if ((a = onnx_attr(n, "value")) && a->t) {
        if (onnx_tensor_to_pardo(a->t, c->dir, what, &t, st) != PARDO_OK) return st->code;
    } else if ((a = onnx_attr(n, "value_float")) && a->has_f) {
        if (!(t = pardo_tensor_new_cpu(PARDO_F32, 0, NULL, st))) return st->code;
        *(float *)pardo_tensor_data(t) = a->f;
    } else if ((a = onnx_attr(n, "value_int")) && a->has_i) {
        if (!(t = pardo_tensor_new_cpu(PARDO_I64, 0, NULL, st))) return st->code;
        *(int64_t *)pardo_tensor_data(t) = a->i;
    } else if ((a = onnx_attr(n, "value_floats"))) {
        int64_t len = (int64_t)a->n_floats;
        if (!(t = pardo_tensor_new_cpu(PARDO_F32, 1, &len, st))) return st->code;
        for (size_t i = 0; i < a->n_floats; i++) ((float *)pardo_tensor_data(t))[i] = a->floats[i];
    } else if ((a = onnx_attr(n, "value_ints"))) {
        int64_t len = (int64_t)a->n_ints;
        if (!(t = pardo_tensor_new_cpu(PARDO_I64, 1, &len, st))) return st->code;
        for (size_t i = 0; i < a->n_ints; i++) ((int64_t *)pardo_tensor_data(t))[i] = a->ints[i];
    } else {
        return onnx_unsupported(c, st, "a Constant without value, value_float(s) or value_int(s) (sparse and "
                                "string constants are not supported)");
    }
    *done = true;
    return onnx_set_const(c, n, 0, t, st);
}

static int fold_shape(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    onnx_value *x = onnx_input(c, n, 0);
    if (!x) return PARDO_OK;
    pardo_type t;
    const char *var = NULL;
    if (x->konst) {
        t = pardo_tensor_type(x->konst);
    } else if (x->var) {
        var = x->var;
        if (onnx_type_of(c, var, &t, st) != PARDO_OK) return st->code;
    } else {
        return PARDO_OK; /* a shape vector's shape: rare; runs as an op */
    }
    int64_t r = t.ndim, start = onnx_attr_int(n, "start", 0), end = onnx_attr_int(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = clamp64(start, 0, r);
    end = clamp64(end, 0, r);
    ivec v = {.n = 0, .dtype = PARDO_I64};
    for (int64_t d = start; d < end; d++) {
        v.d[v.n].value = t.shape[d] >= 0 ? t.shape[d] : 1;
        if (t.shape[d] < 0) {
            /* the name must outlive the value table's reallocations: the var's own string in the program */
            v.d[v.n].var = pardo_program_lookup_var(c->p, c->block, var, NULL)->name;
            v.d[v.n].dim = (int)d;
        }
        v.n++;
    }
    *done = true;
    return set_ivec(c, n, 0, &v, st);
}

/* Size: the element count, a constant, or k times the one run-time dim. */
static int fold_size(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    onnx_value *x = onnx_input(c, n, 0);
    if (!x || (!x->konst && !x->var)) return PARDO_OK;
    pardo_type t;
    if (x->konst) t = pardo_tensor_type(x->konst);
    else if (onnx_type_of(c, x->var, &t, st) != PARDO_OK) return st->code;
    ivec v = {.n = 1, .scalar = true, .dtype = PARDO_I64};
    v.d[0].value = 1;
    for (int d = 0; d < t.ndim; d++) {
        if (t.shape[d] >= 0) {
            v.d[0].value *= t.shape[d];
        } else if (v.d[0].var) {
            return PARDO_OK; /* two run-time dims: left to the mapping */
        } else {
            v.d[0].var = pardo_program_lookup_var(c->p, c->block, x->var, NULL)->name;
            v.d[0].dim = d;
        }
    }
    *done = true;
    return set_ivec(c, n, 0, &v, st);
}

static int fold_gather(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    ivec data, idx;
    if (!as_ivec(onnx_input(c, n, 0), &data) || data.scalar || !as_ivec(onnx_input(c, n, 1), &idx) ||
        !ivec_known(&idx) || onnx_attr_int(n, "axis", 0) != 0)
        return PARDO_OK;
    ivec out = {.n = idx.n, .scalar = idx.scalar, .dtype = data.dtype};
    for (int i = 0; i < idx.n; i++) {
        int64_t k = idx.d[i].value < 0 ? idx.d[i].value + data.n : idx.d[i].value;
        if (k < 0 || k >= data.n) return onnx_bad(c, st, "index %lld is out of range for %d elements",
                                                  (long long)idx.d[i].value, data.n);
        out.d[i] = data.d[k];
    }
    *done = true;
    return set_ivec(c, n, 0, &out, st);
}

/* Unsqueeze / Squeeze of a scalar or 1-element vector on axis 0. */
static int fold_unsqueeze(onnx_ctx *c, const Onnx__NodeProto *n, bool squeeze, bool *done, pardo_status *st) {
    ivec x, axes;
    if (!as_ivec(onnx_input(c, n, 0), &x)) return PARDO_OK;
    int na = 0;
    const int64_t *a = onnx_attr_ints(n, "axes", &na);
    int64_t ax0;
    if (c->opset >= 13 && n->n_input > 1) {
        if (!as_ivec(onnx_input(c, n, 1), &axes) || !ivec_known(&axes) || axes.n != 1) return PARDO_OK;
        ax0 = axes.d[0].value;
    } else if (na == 1) {
        ax0 = a[0];
    } else if (squeeze && na == 0 && (c->opset < 13 || n->n_input < 2)) {
        ax0 = 0; /* squeeze all: a 1-element vector's one axis */
    } else {
        return PARDO_OK;
    }
    if (squeeze ? (x.scalar || x.n != 1 || (ax0 != 0 && ax0 != -1)) : (!x.scalar || (ax0 != 0 && ax0 != -1)))
        return PARDO_OK;
    x.scalar = squeeze;
    *done = true;
    return set_ivec(c, n, 0, &x, st);
}

static int fold_concat(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    int64_t axis = onnx_attr_int(n, "axis", 0);
    if (axis != 0 && axis != -1) return PARDO_OK;
    ivec out = {.n = 0, .dtype = PARDO_I64};
    for (size_t i = 0; i < n->n_input; i++) {
        ivec x;
        if (!as_ivec(onnx_input(c, n, (int)i), &x) || x.scalar || out.n + x.n > MAX_IVEC) return PARDO_OK;
        out.dtype = x.dtype;
        memcpy(&out.d[out.n], x.d, sizeof(onnx_dim) * (size_t)x.n);
        out.n += x.n;
    }
    *done = true;
    return set_ivec(c, n, 0, &out, st);
}

static int fold_cast(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    ivec x;
    int64_t to = onnx_attr_int(n, "to", 0);
    if (!as_ivec(onnx_input(c, n, 0), &x) ||
        (to != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && to != ONNX__TENSOR_PROTO__DATA_TYPE__INT32))
        return PARDO_OK;
    x.dtype = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ? PARDO_I32 : PARDO_I64;
    *done = true;
    return set_ivec(c, n, 0, &x, st);
}

/* The int64 elements of a constant input, or false. */
static bool const_ints(onnx_ctx *c, const Onnx__NodeProto *n, int i, int64_t *out, int *count) {
    onnx_value *v = onnx_input(c, n, i);
    return v && v->konst && (v->konst->dtype == PARDO_I64 || v->konst->dtype == PARDO_I32) &&
           onnx_const_ints(v->konst, out, MAX_IVEC, count);
}

static int fold_slice(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    ivec x;
    if (!as_ivec(onnx_input(c, n, 0), &x) || x.scalar) return PARDO_OK;
    int64_t starts[MAX_IVEC], ends[MAX_IVEC], axes[MAX_IVEC] = {0}, steps[MAX_IVEC] = {1};
    int ns = 0, ne = 0, nax = 0, nst = 0;
    if (c->opset < 10) {
        const int64_t *a;
        if (!(a = onnx_attr_ints(n, "starts", &ns)) || ns != 1) return PARDO_OK;
        starts[0] = a[0];
        if (!(a = onnx_attr_ints(n, "ends", &ne)) || ne != 1) return PARDO_OK;
        ends[0] = a[0];
        if ((a = onnx_attr_ints(n, "axes", &nax)) && nax == 1) axes[0] = a[0];
        else if (nax) return PARDO_OK;
    } else {
        if (!const_ints(c, n, 1, starts, &ns) || !const_ints(c, n, 2, ends, &ne) || ns != 1 || ne != 1) return PARDO_OK;
        if (onnx_input(c, n, 3) && (!const_ints(c, n, 3, axes, &nax) || nax != 1)) return PARDO_OK;
        if (onnx_input(c, n, 4) && (!const_ints(c, n, 4, steps, &nst) || nst != 1)) return PARDO_OK;
    }
    if ((axes[0] != 0 && axes[0] != -1) || steps[0] == 0) return PARDO_OK;
    int64_t len = x.n, s = starts[0], e = ends[0], step = steps[0];
    if (s < 0) s += len;
    if (e < 0) e += len;
    s = step > 0 ? clamp64(s, 0, len) : clamp64(s, -1, len - 1);
    e = step > 0 ? clamp64(e, 0, len) : clamp64(e, -1, len - 1);
    ivec out = {.n = 0, .dtype = x.dtype};
    for (int64_t k = s; step > 0 ? k < e : k > e; k += step) out.d[out.n++] = x.d[k];
    *done = true;
    return set_ivec(c, n, 0, &out, st);
}

/* Add, Sub, Mul, Div of integer vectors (a scalar or one element
 * broadcast); a run-time dim may be multiplied or divided by a constant. */
static int fold_arith(onnx_ctx *c, const Onnx__NodeProto *n, char op, bool *done, pardo_status *st) {
    ivec a, b;
    if (!as_ivec(onnx_input(c, n, 0), &a) || !as_ivec(onnx_input(c, n, 1), &b)) return PARDO_OK;
    if (a.n != b.n && a.n != 1 && b.n != 1) return PARDO_OK;
    int len = a.n > b.n ? a.n : b.n;
    ivec out = {.n = len, .scalar = a.scalar && b.scalar, .dtype = a.dtype};
    for (int i = 0; i < len; i++) {
        onnx_dim x = a.d[a.n == 1 ? 0 : i], y = b.d[b.n == 1 ? 0 : i], r = {0};
        if (!x.var && !y.var) {
            switch (op) {
            case '+': r.value = x.value + y.value; break;
            case '-': r.value = x.value - y.value; break;
            case '*': r.value = x.value * y.value; break;
            default:
                if (y.value == 0) return PARDO_OK; /* left to run time, which says so */
                r.value = x.value / y.value; /* truncated, as ONNX Runtime's integer Div */
            }
        } else if (op == '*' && (!x.var || !y.var)) {
            r = x.var ? x : y;
            r.value *= x.var ? y.value : x.value;
        } else if (op == '/' && x.var && !y.var && y.value != 0 && x.value % y.value == 0) {
            r = x;
            r.value /= y.value;
        } else {
            return PARDO_OK;
        }
        out.d[i] = r;
    }
    *done = true;
    return set_ivec(c, n, 0, &out, st);
}

/* Neg of an integer vector: known entries negated, a run-time dim's factor too. */
static int fold_neg(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    ivec x;
    if (!as_ivec(onnx_input(c, n, 0), &x)) return PARDO_OK;
    for (int i = 0; i < x.n; i++) x.d[i].value = -x.d[i].value;
    *done = true;
    return set_ivec(c, n, 0, &x, st);
}

/* Range of constant scalars. */
static int fold_range(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    onnx_value *v[3];
    for (int i = 0; i < 3; i++)
        if (!(v[i] = onnx_input(c, n, i)) || !v[i]->konst || v[i]->konst->numel != 1) return PARDO_OK;
    pardo_dtype dt = v[0]->konst->dtype;
    double s = pardo_tensor_get_f64(v[0]->konst, 0), l = pardo_tensor_get_f64(v[1]->konst, 0),
           d = pardo_tensor_get_f64(v[2]->konst, 0);
    if (d == 0) return onnx_bad(c, st, "delta is 0");
    double cnt = (l - s) / d;
    int64_t len = cnt > 0 ? (int64_t)__builtin_ceil(cnt) : 0;
    if (len > (1 << 24)) return PARDO_OK;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, 1, &len, st);
    if (!t) return st->code;
    for (int64_t i = 0; i < len; i++) pardo_tensor_set_f64(t, i, s + (double)i * d);
    *done = true;
    return onnx_set_const(c, n, 0, t, st);
}

static int fold_constant_of_shape(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    ivec shape;
    if (!as_ivec(onnx_input(c, n, 0), &shape) || !ivec_known(&shape) || shape.scalar || shape.n > PARDO_MAX_DIMS)
        return PARDO_OK;
    int64_t dims[PARDO_MAX_DIMS];
    for (int i = 0; i < shape.n; i++) {
        if (shape.d[i].value < 0) return onnx_bad(c, st, "a negative dim %lld", (long long)shape.d[i].value);
        dims[i] = shape.d[i].value;
    }
    if (!pardo_shape_fits(shape.n, dims) || pardo_shape_numel(shape.n, dims) > (1 << 24)) return PARDO_OK;
    pardo_tensor *value = NULL;
    const Onnx__AttributeProto *a = onnx_attr(n, "value");
    if (a && a->t) {
        char what[600];
        snprintf(what, sizeof what, "%s: node '%s' attr 'value'", c->path, n->name ? n->name : "");
        if (onnx_tensor_to_pardo(a->t, c->dir, what, &value, st) != PARDO_OK) return st->code;
        if (value->numel != 1) {
            pardo_tensor_release(value);
            return onnx_bad(c, st, "attr 'value' must hold one element");
        }
    }
    pardo_tensor *t = pardo_tensor_new_cpu(value ? value->dtype : PARDO_F32, shape.n, dims, st);
    if (t) {
        if (value) { /* the element's bytes, exact for every dtype (int64 and uint64 past 2^53) */
            const size_t es = pardo_dtype_size(t->dtype);
            for (int64_t i = 0; i < t->numel; i++)
                memcpy((char *)pardo_tensor_data(t) + (size_t)i * es, pardo_tensor_data(value), es);
        }
    }
    pardo_tensor_release(value);
    if (!t) return st->code;
    *done = true;
    return onnx_set_const(c, n, 0, t, st);
}

/* Reshape of a constant to a constant shape. */
static int fold_reshape(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    onnx_value *x = onnx_input(c, n, 0);
    ivec shape;
    if (!x || !x->konst || c->opset < 5 || !as_ivec(onnx_input(c, n, 1), &shape) || !ivec_known(&shape) ||
        shape.scalar || shape.n > PARDO_MAX_DIMS || onnx_attr_int(n, "allowzero", 0))
        return PARDO_OK;
    int64_t dims[PARDO_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < shape.n; i++) {
        dims[i] = shape.d[i].value;
        if (dims[i] == 0 && i < x->konst->ndim) dims[i] = x->konst->shape[i];
        if (dims[i] == -1 && infer < 0) infer = i;
        else if (dims[i] < 0) return PARDO_OK;
        else known *= dims[i];
    }
    if (infer >= 0) {
        if (known == 0 || x->konst->numel % known) return PARDO_OK;
        dims[infer] = x->konst->numel / known;
    }
    if (pardo_shape_numel(shape.n, dims) != x->konst->numel) return PARDO_OK; /* the mapping says why */
    pardo_tensor *t = pardo_tensor_clone(x->konst, st);
    if (!t) return st->code;
    t->ndim = shape.n;
    memcpy(t->shape, dims, sizeof(int64_t) * (size_t)shape.n);
    *done = true;
    return onnx_set_const(c, n, 0, t, st);
}

static int fold_identity(onnx_ctx *c, const Onnx__NodeProto *n, bool *done, pardo_status *st) {
    onnx_value *x = onnx_input(c, n, 0);
    if (!x || x->var) return PARDO_OK;
    *done = true;
    if (x->sym) return onnx_set_sym(c, n, 0, x->sym, x->sym_scalar ? -1 : x->n_sym, st);
    pardo_tensor *t = pardo_tensor_retain(x->konst);
    return onnx_set_const(c, n, 0, t, st);
}

int onnx_try_fold(onnx_ctx *c, const Onnx__NodeProto *n, bool *folded, pardo_status *st) {
    *folded = false;
    const char *t = n->op_type;
    if (strcmp(t, "Constant") == 0) return fold_constant(c, n, folded, st);
    if (strcmp(t, "Shape") == 0) return fold_shape(c, n, folded, st);
    if (strcmp(t, "Identity") == 0) return fold_identity(c, n, folded, st);
    if (strcmp(t, "Size") == 0) return fold_size(c, n, folded, st);
    if (strcmp(t, "Gather") == 0) return fold_gather(c, n, folded, st);
    if (strcmp(t, "Unsqueeze") == 0) return fold_unsqueeze(c, n, false, folded, st);
    if (strcmp(t, "Squeeze") == 0) return fold_unsqueeze(c, n, true, folded, st);
    if (strcmp(t, "Concat") == 0) return fold_concat(c, n, folded, st);
    if (strcmp(t, "Cast") == 0) return fold_cast(c, n, folded, st);
    if (strcmp(t, "Slice") == 0) return fold_slice(c, n, folded, st);
    if (strcmp(t, "Add") == 0) return fold_arith(c, n, '+', folded, st);
    if (strcmp(t, "Sub") == 0) return fold_arith(c, n, '-', folded, st);
    if (strcmp(t, "Mul") == 0) return fold_arith(c, n, '*', folded, st);
    if (strcmp(t, "Div") == 0) return fold_arith(c, n, '/', folded, st);
    if (strcmp(t, "Neg") == 0) return fold_neg(c, n, folded, st);
    if (strcmp(t, "Range") == 0) return fold_range(c, n, folded, st);
    if (strcmp(t, "ConstantOfShape") == 0) return fold_constant_of_shape(c, n, folded, st);
    if (strcmp(t, "Reshape") == 0) return fold_reshape(c, n, folded, st);
    return PARDO_OK;
}
