/* grad_util.c - the standard gradient builder (see op.h). */
#include <stdio.h>
#include <string.h>

#include "op.h"

char *pardo_grad_op_type(const char *type, char *buf, size_t n) {
    snprintf(buf, n, "%s_grad", type);
    return buf;
}

int pardo_grad_standard(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    const pardo_op *fwd = req->fwd;
    char type[128], name[256] = "";
    pardo_grad_op_type(fwd->type, type, sizeof type);
    /* copy what we need from fwd before blk->ops may move (fwd may live in blk) */
    pardo_value *attrs = fwd->attrs ? pardo_value_clone(fwd->attrs) : NULL;
    if (fwd->attrs && !attrs) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    if (fwd->name) snprintf(name, sizeof name, "%s@grad", fwd->name);
    int n_in = fwd->n_in, n_out = fwd->n_out;
    char *const *fin = fwd->in, *const *fout = fwd->out;
    /* trailing optional inputs and outputs the graph left out count as "", so
     * that T_grad's inputs sit where its schema says whatever the forward
     * op's arity (conv2d without a bias, layer_norm without Mean) */
    const pardo_op_def *def = fwd->def ? fwd->def : pardo_op_lookup(fwd->type);
    bool variadic = def && def->n_inputs > 0 && def->inputs[def->n_inputs - 1].variadic;
    int pad_in = def && !variadic && n_in < def->n_inputs ? def->n_inputs : n_in;
    int pad_out = def && n_out < def->n_outputs ? def->n_outputs : n_out;
    pardo_op *g = pardo_block_add_op(blk, type, st);
    if (!g) {
        pardo_value_free(attrs);
        return st->code;
    }
    /* fin/fout point at strings owned by the forward op, which survive the
     * realloc of blk->ops (only the op structs move) */
    g->attrs = attrs;
    g->role = PARDO_OP_BACKWARD;
    if (name[0] && !(g->name = strdup(name))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int k = 0; k < pad_in; k++)
        if (pardo_op_add_input(g, k < n_in ? fin[k] : "", st) != PARDO_OK) return st->code;
    for (int k = 0; k < pad_out; k++)
        if (pardo_op_add_input(g, k < n_out ? fout[k] : "", st) != PARDO_OK) return st->code;
    for (int k = 0; k < pad_out; k++)
        if (pardo_op_add_input(g, k < n_out ? req->out_grads[k] : "", st) != PARDO_OK) return st->code;
    for (int k = 0; k < pad_in; k++)
        if (pardo_op_add_output(g, k < n_in ? req->in_grads[k] : "", st) != PARDO_OK) return st->code;
    return PARDO_OK;
}
