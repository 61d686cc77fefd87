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
static int bind_output(pardo_var *v, const pardo_type *made, int k, pardo_status *st) {
    char a[200], b[200];
    if (v->kind == PARDO_VAR_TENSOR_ARRAY) return PARDO_OK; /* typed by the parallel ops themselves */
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

static int infer_op(pardo_program *p, int b, int i, pardo_status *st) {
    pardo_op *op = &p->blocks[b].ops[i];
    pardo_type in_types[64];
    const pardo_type *in_ptrs[64];
    pardo_type out_types[16];
    if (op->n_in > 64 || op->n_out > 16)
        return pardo_errorf(st, PARDO_EINVAL, "too many inputs or outputs (%d, %d; at most 64 and 16)", op->n_in,
                            op->n_out);
    for (int k = 0; k < op->n_in; k++) {
        in_ptrs[k] = NULL;
        if (!op->in[k][0]) continue;
        const pardo_var *v = pardo_program_lookup_var(p, b, op->in[k], NULL);
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
    int rc = op->def->infer(&ctx);
    if (rc != PARDO_OK) return rc;
    for (int k = 0; k < op->n_out; k++) {
        if (!op->out[k][0]) continue; /* an output the graph leaves out */
        pardo_var *v = pardo_program_lookup_var(p, b, op->out[k], NULL);
        PARDO_ASSERT(v != NULL);
        if (out_types[k].dtype == PARDO_DTYPE_UNKNOWN && v->kind != PARDO_VAR_TENSOR_ARRAY)
            return pardo_errorf(st, PARDO_ESHAPE, "output %d: inference left the dtype of '%s' unknown", k, v->name);
        if ((rc = bind_output(v, &out_types[k], k, st)) != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

int pardo_pass_infer_shapes(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    (void)opt;
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++)
            if (infer_op(p, b, i, st) != PARDO_OK) return op_error(p, b, i, st);
    return PARDO_OK;
}

int pardo_pass_check(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    int rc = pardo_pass_validate(p, opt, st);
    if (rc == PARDO_OK) rc = pardo_pass_infer_shapes(p, opt, st);
    return rc;
}
