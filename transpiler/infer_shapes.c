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

/* Infers block b's ops in order; a parallel_do infers its block in place. */
static int infer_block(pardo_program *p, int b, pardo_status *st) {
    for (int i = 0; i < p->blocks[b].n_ops; i++) {
        const pardo_op *op = &p->blocks[b].ops[i];
        if (pardo_op_is_parallel_do(op)) {
            int rc = infer_parallel_do(p, b, i, st);
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
