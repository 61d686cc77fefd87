/* infer_shapes.c - dtype and shape inference over every block (see pass.h). */
#include <stdio.h>
#include <string.h>

#include "op.h"
#include "pass.h"

static int op_error(const pardo_program *p, int b, int i, pardo_status *st) {
    char where[512];
    pardo_op_where(p, b, i, where, sizeof where);
    return pardo_status_prefix(st, "%s: ", where);
}

/* True when every known dim agrees (-1 on either side matches anything). */
static bool types_compatible(const pardo_type *declared, const pardo_type *made) {
    if (declared->dtype != made->dtype) return false;
    if (declared->ndim < 0 || made->ndim < 0) return true;
    if (declared->ndim != made->ndim) return false;
    for (int d = 0; d < declared->ndim; d++)
        if (declared->shape[d] != -1 && made->shape[d] != -1 && declared->shape[d] != made->shape[d]) return false;
    return true;
}

static char *type_str(const pardo_type *t, char *buf, size_t n) {
    char shape[160];
    snprintf(buf, n, "%s %s", pardo_dtype_name(t->dtype), pardo_shape_str(t->ndim, t->shape, shape, sizeof shape));
    return buf;
}

/* Records what op makes for its output var v: sets an inferred var's type,
 * or checks a declared or already inferred one. */
static int bind_output(pardo_graph_var *v, const pardo_type *made, int k, pardo_status *st) {
    char a[200], b[200];
    /* a tensor_array var's type is that of its parts (dim `axis` of a split is -1) */
    if (v->type.dtype == PARDO_DTYPE_UNKNOWN) {
        v->type = *made;
        return PARDO_OK;
    }
    if (!types_compatible(&v->type, made))
        return pardo_errorf(st, PARDO_ESHAPE, "output %d: var '%s' is %s %s, but the op makes %s", k, v->name,
                            v->declared ? "declared" : "already inferred as", type_str(&v->type, a, sizeof a),
                            type_str(made, b, sizeof b));
    if (!v->declared) { /* keep what both agree on: dims that differ become -1 */
        for (int d = 0; d < v->type.ndim && made->ndim == v->type.ndim; d++)
            if (v->type.shape[d] != made->shape[d]) v->type.shape[d] = -1;
    }
    return PARDO_OK;
}

/* Appends the op's inputs with their types to st's message, so that every
 * op's shape error names the vars it was given:
 * " (inputs: a1 float32 [-1, 32], w2 float32 [7, 2])". Absent inputs ("")
 * are left out; a var whose type is not known yet shows "?". */
static int note_inputs(const pardo_program *p, int b, const pardo_op *op, int rc, pardo_status *st) {
    char list[PARDO_MSG_MAX] = "", t[200];
    size_t used = 0;
    for (int k = 0; k < op->n_in && used < sizeof list; k++) {
        if (!op->in[k][0]) continue;
        const pardo_graph_var *v = pardo_program_lookup_var(p, b, op->in[k], NULL);
        const char *ts = v && v->type.dtype != PARDO_DTYPE_UNKNOWN ? type_str(&v->type, t, sizeof t) : "?";
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s %s", used ? ", " : "", op->in[k], ts);
    }
    if (list[0]) pardo_status_suffix(st, " (inputs: %s)", list);
    return rc;
}

static int infer_op(pardo_program *p, int b, int i, pardo_status *st) {
    pardo_op *op = &p->blocks[b].ops[i];
    pardo_type in_types[64];
    const pardo_type *in_ptrs[64];
    pardo_type out_types[16];
    if (op->n_in > 64 || op->n_out > 16)
        return pardo_errorf(st, PARDO_EINVAL, "too many inputs or outputs (%d, %d; at most 64 and 16)", op->n_in,
                            op->n_out);
    /* inputs past the op's own up to its schema's arity are absent (NULL), as the executor gives kernels them:
     * an op that leaves out trailing optional inputs is read like one that passes them as "" */
    const int n_slots = op->n_in > op->def->n_inputs ? op->n_in : op->def->n_inputs;
    for (int k = 0; k < n_slots && k < 64; k++) in_ptrs[k] = NULL;
    for (int k = 0; k < op->n_in; k++) {
        if (!op->in[k][0]) continue;
        const pardo_graph_var *v = pardo_program_lookup_var(p, b, op->in[k], NULL);
        PARDO_ASSERT(v != NULL); /* validate checked it */
        if (v->type.dtype == PARDO_DTYPE_UNKNOWN)
            return pardo_errorf(st, PARDO_ESHAPE, "input %d: the type of var '%s' is not known here", k, v->name);
        in_types[k] = v->type;
        in_ptrs[k] = &in_types[k];
    }
    for (int k = 0; k < op->n_out; k++) {
        memset(&out_types[k], 0, sizeof(out_types[k]));
        out_types[k].dtype = PARDO_DTYPE_UNKNOWN;
        out_types[k].ndim = -1;
    }
    pardo_infer_ctx ctx = {.op = op, .n_in = op->n_in, .in = in_ptrs, .n_out = op->n_out, .out = out_types, .st = st};
    int rc = pardo_op_infer(&ctx);
    if (rc != PARDO_OK) return note_inputs(p, b, op, rc, st);
    for (int k = 0; k < op->n_out; k++) {
        if (!op->out[k][0]) continue; /* an output the graph leaves out */
        pardo_graph_var *v = pardo_program_lookup_var(p, b, op->out[k], NULL);
        PARDO_ASSERT(v != NULL);
        if (out_types[k].dtype == PARDO_DTYPE_UNKNOWN)
            return pardo_errorf(st, PARDO_ESHAPE, "output %d: inference left the dtype of '%s' unknown", k, v->name);
        if (out_types[k].ndim > 0 && !pardo_shape_fits(out_types[k].ndim, out_types[k].shape)) {
            char sh[128];
            return pardo_errorf(st, PARDO_ESHAPE, "output %d: var '%s' would be %s, more elements than fit in 64 bits",
                                k, v->name, pardo_shape_str(out_types[k].ndim, out_types[k].shape, sh, sizeof sh));
        }
        if ((rc = bind_output(v, &out_types[k], k, st)) != PARDO_OK) return note_inputs(p, b, op, rc, st);
    }
    return PARDO_OK;
}

static int infer_block(pardo_program *p, int b, pardo_status *st);

/* A parallel_do: its block's parts_in vars get the parts' type (dim `axis`
 * -1), then the block is inferred, then each parts_out tensor_array gets the
 * type of the block var that fills it. Errors come back located (at this op,
 * or at the op of the block that failed). */
static int infer_parallel_do(pardo_program *p, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    int sub = (int)pardo_attr(op, "block")->number, rc;
    const pardo_value *pin = pardo_attr(op, "parts_in"), *pout = pardo_attr(op, "parts_out");
    for (int k = 0; pin && k < pin->n; k++) {
        const pardo_graph_var *a = pardo_program_lookup_var(p, b, pin->items[k].string, NULL);
        pardo_graph_var *v = pardo_block_find_var(&p->blocks[sub], pin->keys[k]);
        PARDO_ASSERT(a && v); /* validate checked them */
        if (a->type.dtype == PARDO_DTYPE_UNKNOWN) {
            pardo_errorf(st, PARDO_ESHAPE, "parts_in '%s': the type of tensor_array '%s' is not known here",
                         pin->keys[k], a->name);
            return op_error(p, b, i, st);
        }
        if ((rc = bind_output(v, &a->type, k, st)) != PARDO_OK) {
            pardo_status_prefix(st, "parts_in '%s' (a part of '%s'): ", pin->keys[k], a->name);
            return op_error(p, b, i, st);
        }
    }
    if ((rc = infer_block(p, sub, st)) != PARDO_OK) return rc;
    op = &p->blocks[b].ops[i];
    for (int k = 0; pout && k < pout->n; k++) {
        const pardo_graph_var *v = pardo_block_find_var(&p->blocks[sub], pout->keys[k]);
        pardo_graph_var *a = pardo_program_lookup_var(p, b, pout->items[k].string, NULL);
        PARDO_ASSERT(a && v);
        if (v->type.dtype == PARDO_DTYPE_UNKNOWN) {
            pardo_errorf(st, PARDO_ESHAPE, "parts_out '%s': its type is not known", v->name);
            return op_error(p, b, i, st);
        }
        if ((rc = bind_output(a, &v->type, k, st)) != PARDO_OK) {
            pardo_status_prefix(st, "parts_out '%s' -> '%s': ", v->name, a->name);
            return op_error(p, b, i, st);
        }
    }
    return PARDO_OK;
}

/* ---- control-flow ops (ops/control_flow.c) ---- */

/* The type of input k of op (NULL when absent or past the end); its var's type must be known. */
static int input_type(const pardo_program *p, int b, const pardo_op *op, int k, const pardo_type **t, pardo_status *st) {
    *t = NULL;
    if (k >= op->n_in || !op->in[k][0]) return PARDO_OK;
    const pardo_graph_var *v = pardo_program_lookup_var(p, b, op->in[k], NULL);
    PARDO_ASSERT(v); /* validate checked it */
    if (v->type.dtype == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_ESHAPE, "input %d: the type of var '%s' is not known here", k, v->name);
    *t = &v->type;
    return PARDO_OK;
}

/* Entry k of names list attr key (validate checked it). */
static const char *name_at(const pardo_op *op, const char *key, int k) { return pardo_attr(op, key)->items[k].string; }

/* t without dim ax (t's rank must be known and above ax). */
static int drop_dim(const pardo_type *t, int ax, const char *what, pardo_type *out, pardo_status *st) {
    if (t->ndim < 1 || ax >= t->ndim)
        return pardo_errorf(st, PARDO_ESHAPE, "%s has rank %d: no dim %d to scan", what, t->ndim, ax);
    *out = *t;
    out->ndim = t->ndim - 1;
    for (int d = ax; d < out->ndim; d++) out->shape[d] = t->shape[d + 1];
    return PARDO_OK;
}

/* t with a dim of size n inserted at ax (0 <= ax <= t's rank). */
static int insert_dim(const pardo_type *t, int ax, int64_t n, const char *what, pardo_type *out, pardo_status *st) {
    if (t->ndim < 0 || t->ndim + 1 > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_ESHAPE, "%s has rank %d: cannot stack it", what, t->ndim);
    *out = *t;
    out->ndim = t->ndim + 1;
    for (int d = out->ndim - 1; d > ax; d--) out->shape[d] = t->shape[d - 1];
    out->shape[ax] = n;
    return PARDO_OK;
}

/* The var `name` of block sub (a body_out entry) with a known type; NULL with st. */
static const pardo_graph_var *typed_var(const pardo_program *p, int sub, const char *key, const char *name,
                                        pardo_status *st) {
    const pardo_graph_var *v = pardo_program_lookup_var(p, sub, name, NULL);
    PARDO_ASSERT(v);
    if (v->type.dtype != PARDO_DTYPE_UNKNOWN) return v;
    pardo_errorf(st, PARDO_ESHAPE, "%s '%s': its type is not known", key, name);
    return NULL;
}

/* What a carried value (a loop's, a scan's state) is across iterations: the
 * type it starts with and the one the body gives back, dims that differ -1.
 * PARDO_ESHAPE when the dtype or rank changes. */
static int carried_type(const pardo_type *in, const pardo_type *back, const char *name, pardo_type *out,
                        pardo_status *st) {
    char a[200], b[200];
    if (in->dtype != back->dtype || in->ndim != back->ndim)
        return pardo_errorf(st, PARDO_ESHAPE, "carried value '%s' starts as %s but the body gives back %s (the dtype "
                            "and rank must stay)", name, type_str(in, a, sizeof a), type_str(back, b, sizeof b));
    *out = *in;
    for (int d = 0; d < in->ndim; d++)
        if (in->shape[d] != back->shape[d]) out->shape[d] = -1;
    return PARDO_OK;
}

/* Binds the body var `name` to type t (its type when unknown, else checked). */
static int bind_body_in(pardo_program *p, int sub, const char *name, const pardo_type *t, int k, pardo_status *st) {
    pardo_graph_var *v = pardo_block_find_var(&p->blocks[sub], name);
    PARDO_ASSERT(v); /* validate added it */
    int rc = bind_output(v, t, k, st);
    if (rc != PARDO_OK) pardo_status_prefix(st, "body_in '%s': ", name);
    return rc;
}

/* Widens body_in var `name` (undeclared) to t, where it was narrower: the
 * body is then inferred again. Sets *again when it changed. */
static void widen_body_in(pardo_program *p, int sub, const char *name, const pardo_type *t, bool *again) {
    pardo_graph_var *v = pardo_block_find_var(&p->blocks[sub], name);
    if (v->declared || v->type.ndim != t->ndim) return;
    for (int d = 0; d < t->ndim; d++)
        if (v->type.shape[d] != t->shape[d]) {
            v->type = *t;
            *again = true;
            return;
        }
}

static int infer_if(pardo_program *p, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    const pardo_type *cond;
    int blocks[2], rc;
    pardo_control_blocks(op, blocks);
    if ((rc = input_type(p, b, op, 0, &cond, st)) != PARDO_OK) return op_error(p, b, i, st);
    if (cond->ndim < 0 || pardo_shape_numel(cond->ndim, cond->shape) > 1) {
        char t[200];
        pardo_errorf(st, PARDO_ESHAPE, "cond is %s, expected one element", type_str(cond, t, sizeof t));
        return op_error(p, b, i, st);
    }
    for (int s = 0; s < 2; s++)
        if ((rc = infer_block(p, blocks[s], st)) != PARDO_OK) return rc;
    op = &p->blocks[b].ops[i];
    for (int k = 0; k < op->n_out; k++) {
        const pardo_graph_var *t = typed_var(p, blocks[0], "then_out", name_at(op, "then_out", k), st),
                              *e = t ? typed_var(p, blocks[1], "else_out", name_at(op, "else_out", k), st) : NULL;
        if (!e) return op_error(p, b, i, st);
        pardo_type y = t->type;
        char a[200], c[200];
        if (t->type.dtype != e->type.dtype || t->type.ndim != e->type.ndim) {
            pardo_errorf(st, PARDO_ESHAPE, "output %d: then_out '%s' is %s but else_out '%s' is %s (the branches must "
                         "agree in dtype and rank)", k, t->name, type_str(&t->type, a, sizeof a), e->name,
                         type_str(&e->type, c, sizeof c));
            return op_error(p, b, i, st);
        }
        for (int d = 0; d < y.ndim; d++)
            if (t->type.shape[d] != e->type.shape[d]) y.shape[d] = -1;
        if (op->out[k][0] && (rc = bind_output(pardo_program_lookup_var(p, b, op->out[k], NULL), &y, k, st)) != PARDO_OK)
            return op_error(p, b, i, st);
    }
    return PARDO_OK;
}

static int infer_loop(pardo_program *p, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    const int sub = (int)pardo_attr(op, "body")->number, n_carried = pardo_attr(op, "body_in")->n - 2,
              n_scan = pardo_attr(op, "body_out")->n - 1 - n_carried;
    const pardo_type *m, *cond, *in[32];
    char t[200];
    int rc;
    if ((rc = input_type(p, b, op, 0, &m, st)) != PARDO_OK || (rc = input_type(p, b, op, 1, &cond, st)) != PARDO_OK)
        return op_error(p, b, i, st);
    if (m && (m->dtype != PARDO_I64 || m->ndim < 0 || pardo_shape_numel(m->ndim, m->shape) > 1))
        rc = pardo_errorf(st, PARDO_ESHAPE, "M is %s, expected one int64", type_str(m, t, sizeof t));
    else if (cond && (cond->dtype != PARDO_BOOL || cond->ndim < 0 || pardo_shape_numel(cond->ndim, cond->shape) > 1))
        rc = pardo_errorf(st, PARDO_ESHAPE, "cond is %s, expected one bool", type_str(cond, t, sizeof t));
    for (int k = 0; rc == PARDO_OK && k < n_carried; k++) rc = input_type(p, b, op, 2 + k, &in[k], st);
    if (rc != PARDO_OK) return op_error(p, b, i, st);
    const pardo_type iter = {.dtype = PARDO_I64, .ndim = 0}, flag = {.dtype = PARDO_BOOL, .ndim = 0};
    rc = bind_body_in(p, sub, name_at(op, "body_in", 0), &iter, 0, st);
    if (rc == PARDO_OK) rc = bind_body_in(p, sub, name_at(op, "body_in", 1), &flag, 1, st);
    for (int k = 0; rc == PARDO_OK && k < n_carried; k++)
        rc = bind_body_in(p, sub, name_at(op, "body_in", 2 + k), in[k], 2 + k, st);
    if (rc != PARDO_OK) return op_error(p, b, i, st);
    pardo_type carried[32];
    for (int pass = 0; pass < 2; pass++) {
        bool again = false;
        if ((rc = infer_block(p, sub, st)) != PARDO_OK) return rc;
        op = &p->blocks[b].ops[i];
        const pardo_graph_var *c = typed_var(p, sub, "body_out", name_at(op, "body_out", 0), st);
        if (!c) return op_error(p, b, i, st);
        if (c->type.dtype != PARDO_BOOL || c->type.ndim < 0 || pardo_shape_numel(c->type.ndim, c->type.shape) > 1) {
            pardo_errorf(st, PARDO_ESHAPE, "body_out[0] '%s' (the next cond) is %s, expected one bool", c->name,
                         type_str(&c->type, t, sizeof t));
            return op_error(p, b, i, st);
        }
        for (int k = 0; k < n_carried; k++) {
            const pardo_graph_var *v = typed_var(p, sub, "body_out", name_at(op, "body_out", 1 + k), st);
            if (!v || carried_type(in[k], &v->type, name_at(op, "body_in", 2 + k), &carried[k], st) != PARDO_OK)
                return op_error(p, b, i, st);
            if (pass == 0) widen_body_in(p, sub, name_at(op, "body_in", 2 + k), &carried[k], &again);
        }
        if (!again) break;
    }
    for (int k = 0; k < n_carried + n_scan; k++) {
        pardo_type y;
        if (k < n_carried) {
            y = carried[k];
        } else {
            const pardo_graph_var *v = typed_var(p, sub, "body_out", name_at(op, "body_out", 1 + k), st);
            if (!v || insert_dim(&v->type, 0, -1, v->name, &y, st) != PARDO_OK) return op_error(p, b, i, st);
        }
        if (op->out[k][0] && (rc = bind_output(pardo_program_lookup_var(p, b, op->out[k], NULL), &y, k, st)) != PARDO_OK)
            return op_error(p, b, i, st);
    }
    return PARDO_OK;
}

static int infer_scan(pardo_program *p, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    const int sub = (int)pardo_attr(op, "body")->number, n_body_in = pardo_attr(op, "body_in")->n;
    const int n_scan = (int)pardo_attr(op, "num_scan_inputs")->number, n_state = n_body_in - n_scan,
              n_out = pardo_attr(op, "body_out")->n - n_state;
    const pardo_value *bv = pardo_attr(op, "batch");
    const bool batch = bv && (bv->kind == PARDO_V_BOOL ? bv->boolean : bv->number != 0);
    const int off = batch ? 1 : 0;
    int64_t in_axes[32] = {0}, out_axes[32] = {0};
    int got, rc = PARDO_OK;
    const pardo_type *lens, *in[64];
    pardo_type body_in[64];
    if (pardo_attr_ints(op, "scan_input_axes", in_axes, 32, &got, st) != PARDO_OK ||
        pardo_attr_ints(op, "scan_output_axes", out_axes, 32, &got, st) != PARDO_OK ||
        input_type(p, b, op, 0, &lens, st) != PARDO_OK)
        return op_error(p, b, i, st);
    if (batch && lens && lens->dtype != PARDO_I32 && lens->dtype != PARDO_I64) {
        pardo_errorf(st, PARDO_ESHAPE, "sequence_lens is %s, expected int32 or int64", pardo_dtype_name(lens->dtype));
        return op_error(p, b, i, st);
    }
    int64_t len = -1, nb = -1; /* slices, batch */
    for (int k = 0; rc == PARDO_OK && k < n_body_in; k++) {
        char what[64];
        snprintf(what, sizeof what, "input %d", off + k);
        if ((rc = input_type(p, b, op, off + k, &in[k], st)) != PARDO_OK) break;
        pardo_type t = *in[k];
        if (batch) {
            if (t.ndim >= 1 && t.shape[0] >= 0) nb = t.shape[0];
            if ((rc = drop_dim(in[k], 0, what, &t, st)) != PARDO_OK) break;
        }
        if (k < n_state) {
            body_in[k] = t;
            continue;
        }
        int ax = 0;
        if (t.ndim < 1) {
            rc = pardo_errorf(st, PARDO_ESHAPE, "scan input %d has rank %d: no dim to scan", k - n_state, t.ndim);
            break;
        }
        if ((rc = pardo_normalize_axis(in_axes[k - n_state], t.ndim, "scan_input_axes", &ax, st)) != PARDO_OK) break;
        if (t.shape[ax] >= 0) len = t.shape[ax];
        rc = drop_dim(&t, ax, what, &body_in[k], st);
    }
    for (int k = 0; rc == PARDO_OK && k < n_body_in; k++)
        rc = bind_body_in(p, sub, name_at(op, "body_in", k), &body_in[k], k, st);
    if (rc != PARDO_OK) return op_error(p, b, i, st);
    pardo_type states[32];
    for (int pass = 0; pass < 2; pass++) {
        bool again = false;
        if ((rc = infer_block(p, sub, st)) != PARDO_OK) return rc;
        op = &p->blocks[b].ops[i];
        for (int k = 0; k < n_state; k++) {
            const pardo_graph_var *v = typed_var(p, sub, "body_out", name_at(op, "body_out", k), st);
            if (!v || carried_type(&body_in[k], &v->type, name_at(op, "body_in", k), &states[k], st) != PARDO_OK)
                return op_error(p, b, i, st);
            if (pass == 0) widen_body_in(p, sub, name_at(op, "body_in", k), &states[k], &again);
        }
        if (!again) break;
    }
    for (int k = 0; k < n_state + n_out; k++) {
        pardo_type y;
        if (k < n_state) {
            y = states[k];
        } else {
            const pardo_graph_var *v = typed_var(p, sub, "body_out", name_at(op, "body_out", k), st);
            int ax = 0;
            if (!v || (!batch && pardo_normalize_axis(out_axes[k - n_state], v->type.ndim + 1, "scan_output_axes", &ax,
                                                      st) != PARDO_OK) ||
                insert_dim(&v->type, ax, len, v->name, &y, st) != PARDO_OK)
                return op_error(p, b, i, st);
        }
        if (batch && insert_dim(&y, 0, nb, op->out[k], &y, st) != PARDO_OK) return op_error(p, b, i, st);
        if (op->out[k][0] && (rc = bind_output(pardo_program_lookup_var(p, b, op->out[k], NULL), &y, k, st)) != PARDO_OK)
            return op_error(p, b, i, st);
    }
    return PARDO_OK;
}

static int infer_control(pardo_program *p, int b, int i, pardo_status *st) {
    const char *type = p->blocks[b].ops[i].type;
    if (strcmp(type, "if") == 0) return infer_if(p, b, i, st);
    if (strcmp(type, "loop") == 0) return infer_loop(p, b, i, st);
    return infer_scan(p, b, i, st);
}

/* Infers block b's ops in order; a parallel_do infers its block in place. */
static int infer_block(pardo_program *p, int b, pardo_status *st) {
    for (int i = 0; i < p->blocks[b].n_ops; i++) {
        const pardo_op *op = &p->blocks[b].ops[i];
        if (pardo_op_is_parallel_do(op)) {
            int rc = infer_parallel_do(p, b, i, st);
            if (rc != PARDO_OK) return rc;
        } else if (pardo_op_is_control(op)) {
            int rc = infer_control(p, b, i, st);
            if (rc != PARDO_OK) return rc;
        } else if (infer_op(p, b, i, st) != PARDO_OK) {
            return op_error(p, b, i, st);
        }
    }
    return PARDO_OK;
}

int pardo_pass_infer_shapes(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    (void)opt;
    for (int b = 0; b < p->n_blocks; b++) {
        int rb, ri;
        if (pardo_block_runner(p, b, &rb, &ri)) continue; /* inferred where its parallel_do runs */
        if (pardo_block_control_runner(p, b, &rb, &ri)) continue; /* where its if, loop or scan runs */
        int rc = infer_block(p, b, st);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

int pardo_pass_check(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    int rc = pardo_pass_validate(p, opt, st);
    if (rc == PARDO_OK) rc = pardo_pass_infer_shapes(p, opt, st);
    return rc;
}
