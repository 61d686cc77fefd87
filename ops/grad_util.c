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
    for (int k = 0; k < n_in; k++)
        if (pardo_op_add_input(g, fin[k], st) != PARDO_OK) return st->code;
    for (int k = 0; k < n_out; k++)
        if (pardo_op_add_input(g, fout[k], st) != PARDO_OK) return st->code;
    for (int k = 0; k < n_out; k++)
        if (pardo_op_add_input(g, req->out_grads[k], st) != PARDO_OK) return st->code;
    for (int k = 0; k < n_in; k++)
        if (pardo_op_add_output(g, req->in_grads[k], st) != PARDO_OK) return st->code;
    return PARDO_OK;
}
