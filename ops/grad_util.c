/* grad_util.c - the standard gradient builder and its variants that leave
 * out forward values a gradient op does not read (see op.h). */
#include <stdio.h>
#include <string.h>

#include "core/graph.h"
#include "op.h"

char *pardo_grad_op_type(const char *type, char *buf, size_t n) {
    snprintf(buf, n, "%s_grad", type);
    return buf;
}

int pardo_grad_standard(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 0, 0, st);
}

int pardo_grad_from_output(const pardo_grad_request *req, pardo_block *blk, pardo_status *st) {
    return pardo_grad_wired(req, blk, 1, 0, st);
}

bool pardo_grad_operand_fills_output(const pardo_grad_request *req, const char *operand, const char *other,
                                     const char *out) {
    if (!req->prog || !operand[0] || !other[0] || !out[0]) return false;
    const pardo_graph_var *a = pardo_program_lookup_var(req->prog, req->block, operand, NULL),
                    *b = pardo_program_lookup_var(req->prog, req->block, other, NULL),
                    *c = pardo_program_lookup_var(req->prog, req->block, out, NULL);
    if (!a || !b || !c || a->kind != PARDO_VAR_TENSOR || b->kind != PARDO_VAR_TENSOR) return false;
    const pardo_type *ta = &a->type, *tb = &b->type, *tc = &c->type;
    if (ta->ndim < 0 || tb->ndim < 0 || tc->ndim < 0 || ta->ndim != tc->ndim || tb->ndim > tc->ndim) return false;
    for (int d = 0; d < tc->ndim; d++) {
        int db = d - (tc->ndim - tb->ndim); /* other's dim aligned with d, < 0 where it has none */
        bool known_equal = ta->shape[d] >= 0 && ta->shape[d] == tc->shape[d];
        bool other_not_there = db < 0 || tb->shape[db] == 1;
        if (!known_equal && !other_not_there) return false;
    }
    return true;
}

int pardo_grad_wired(const pardo_grad_request *req, pardo_block *blk, uint64_t drop_in, uint64_t drop_out,
                     pardo_status *st) {
    return pardo_grad_wired_n(req, blk, drop_in, drop_out, -1, st);
}

int pardo_grad_wired_n(const pardo_grad_request *req, pardo_block *blk, uint64_t drop_in, uint64_t drop_out,
                       int n_fwd_in, pardo_status *st) {
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
    int pad_in = n_fwd_in >= 0 ? n_fwd_in : def && !variadic && n_in < def->n_inputs ? def->n_inputs : n_in;
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
        if (pardo_op_add_input(g, k < n_in && !(k < 64 && drop_in >> k & 1) ? fin[k] : "", st) != PARDO_OK)
            return st->code;
    for (int k = 0; k < pad_out; k++)
        if (pardo_op_add_input(g, k < n_out && !(k < 64 && drop_out >> k & 1) ? fout[k] : "", st) != PARDO_OK)
            return st->code;
    for (int k = 0; k < pad_out; k++)
        if (pardo_op_add_input(g, k < n_out ? req->out_grads[k] : "", st) != PARDO_OK) return st->code;
    for (int k = 0; k < pad_in; k++)
        if (pardo_op_add_output(g, k < n_in ? req->in_grads[k] : "", st) != PARDO_OK) return st->code;
    return PARDO_OK;
}
