/* backward.c - the autodiff pass (see pass.h). Reverse-mode over block 0:
 * the ops on the path from the params to the loss get their registered
 * gradient ops appended in reverse order. A var used k > 1 times gets k
 * partial gradients (V@GRAD@RENAME@i) summed into V@GRAD before its producer's
 * gradient reads it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "pass.h"

/* Per-var bookkeeping, indexed like block 0's vars. */
typedef struct var_info {
    bool needed;     // the loss depends on it
    bool grad_flows; // a param reaches it through float values
    int uses;        // gradient contributions expected (op input slots on the path)
    int given;       // contributions named so far
    bool summed;     // V@GRAD is complete
} var_info;

typedef struct bw {
    pardo_program *p;
    pardo_block *blk;
    var_info *info;  // one per var of block 0 at the start (new vars are gradients)
    int n_vars;
    int last;        // index of the last op writing the loss
    bool *relevant;  // per op up to last
    pardo_status *st;
} bw;

/* The index of var `name` among the first n_vars vars of block 0 (the
 * first such), or -1: through the block's var index. */
static int var_index(const bw *b, const char *name) {
    const pardo_graph_var *v = pardo_block_find_var(b->blk, name);
    return v && v - b->blk->vars < b->n_vars ? (int)(v - b->blk->vars) : -1;
}

static bool is_float_var(const pardo_graph_var *v) {
    return v->kind == PARDO_VAR_TENSOR && pardo_dtype_is_float(v->type.dtype);
}

static int where_error(const bw *b, int op_index) {
    char where[512];
    pardo_op_where(b->p, 0, op_index, where, sizeof where);
    return pardo_status_prefix(b->st, "%s: ", where);
}

/* Marks the ops the loss depends on and the vars they read. */
static void mark_needed(bw *b, const char *loss) {
    int li = var_index(b, loss);
    if (li >= 0) b->info[li].needed = true;
    for (int i = b->last; i >= 0; i--) {
        const pardo_op *op = &b->blk->ops[i];
        bool writes_needed = false;
        for (int k = 0; k < op->n_out; k++) {
            int v = op->out[k][0] ? var_index(b, op->out[k]) : -1;
            writes_needed |= v >= 0 && b->info[v].needed;
        }
        if (!writes_needed) continue;
        b->relevant[i] = true;
        for (int k = 0; k < op->n_in; k++) {
            int v = op->in[k][0] ? var_index(b, op->in[k]) : -1;
            if (v >= 0) b->info[v].needed = true;
        }
    }
}

/* Marks vars a param reaches through float values, in file order. */
static void mark_grad_flow(bw *b) {
    for (int v = 0; v < b->n_vars; v++)
        b->info[v].grad_flows = b->blk->vars[v].role == PARDO_VAR_PARAM && is_float_var(&b->blk->vars[v]);
    for (int i = 0; i <= b->last; i++) {
        const pardo_op *op = &b->blk->ops[i];
        bool any = false;
        for (int k = 0; k < op->n_in; k++) {
            int v = op->in[k][0] ? var_index(b, op->in[k]) : -1;
            any |= v >= 0 && b->info[v].grad_flows;
        }
        if (!any) continue;
        for (int k = 0; k < op->n_out; k++) {
            int v = op->out[k][0] ? var_index(b, op->out[k]) : -1;
            if (v >= 0 && is_float_var(&b->blk->vars[v])) b->info[v].grad_flows = true;
        }
    }
}

static bool wants_grad(const bw *b, int v) { return v >= 0 && b->info[v].needed && b->info[v].grad_flows; }

static void grad_name(const char *var, char *buf, size_t n) { snprintf(buf, n, "%s@GRAD", var); }

/* The name for the next gradient contribution to var v. */
static void next_partial(bw *b, int v, char *buf, size_t n) {
    const char *name = b->blk->vars[v].name;
    if (b->info[v].uses <= 1) grad_name(name, buf, n);
    else snprintf(buf, n, "%s@GRAD@RENAME@%d", name, b->info[v].given);
    b->info[v].given++;
}

static pardo_op *add_backward_op(bw *b, const char *type, pardo_status *st) {
    pardo_op *op = pardo_block_add_op(b->blk, type, st);
    if (op) op->role = PARDO_OP_BACKWARD;
    return op;
}

/* Emits V@GRAD = sum of its partials, once all of them exist. */
static int finish_sum(bw *b, int v) {
    var_info *in = &b->info[v];
    if (in->summed || in->uses <= 1) {
        in->summed = true;
        return PARDO_OK;
    }
    const char *name = b->blk->vars[v].name;
    char total[512], part[512];
    grad_name(name, total, sizeof total);
    for (int i = 1; i < in->uses; i++) {
        pardo_op *op = add_backward_op(b, "add", b->st);
        if (!op) return b->st->code;
        if (i == 1) snprintf(part, sizeof part, "%s@GRAD@RENAME@0", name);
        else snprintf(part, sizeof part, "%s", total);
        if (pardo_op_add_input(op, part, b->st) != PARDO_OK) return b->st->code;
        snprintf(part, sizeof part, "%s@GRAD@RENAME@%d", name, i);
        if (pardo_op_add_input(op, part, b->st) != PARDO_OK || pardo_op_add_output(op, total, b->st) != PARDO_OK)
            return b->st->code;
    }
    in->summed = true;
    return PARDO_OK;
}

/* Emits LOSS@GRAD = ones of the loss's shape. */
static int seed(bw *b, const pardo_graph_var *loss) {
    char name[512];
    grad_name(loss->name, name, sizeof name);
    pardo_op *op = add_backward_op(b, "fill", b->st);
    if (!op || pardo_op_add_output(op, name, b->st) != PARDO_OK) return b->st->code;
    pardo_value *attrs = pardo_value_new_object(), *shape = pardo_value_new_array();
    pardo_value *one = pardo_value_new_number(1), *dtype = pardo_value_new_string(pardo_dtype_name(loss->type.dtype));
    int rc = (attrs && shape && one && dtype) ? PARDO_OK : pardo_errorf(b->st, PARDO_ENOMEM, "out of memory");
    for (int d = 0; rc == PARDO_OK && d < loss->type.ndim; d++) {
        pardo_value dim = {.kind = PARDO_V_NUMBER, .number = (double)loss->type.shape[d]};
        rc = pardo_value_append(shape, &dim, b->st);
    }
    if (rc == PARDO_OK) rc = pardo_value_set(attrs, "shape", shape, b->st);
    if (rc == PARDO_OK) rc = pardo_value_set(attrs, "dtype", dtype, b->st);
    if (rc == PARDO_OK) rc = pardo_value_set(attrs, "value", one, b->st);
    pardo_value_free(shape);
    pardo_value_free(one);
    pardo_value_free(dtype);
    if (rc != PARDO_OK) {
        pardo_value_free(attrs);
        return rc;
    }
    b->blk->ops[b->blk->n_ops - 1].attrs = attrs;
    return PARDO_OK;
}

/* Appends the gradient ops of forward op i. */
static int differentiate(bw *b, int i) {
    pardo_op fwd = b->blk->ops[i]; /* a copy: blk->ops moves as ops are added; the strings stay */
    const char *out_grads[16], *in_grads[64];
    char out_names[16][512], in_names[64][512];
    bool any_out = false, any_in = false;
    if (fwd.n_out > 16 || fwd.n_in > 64) return pardo_errorf(b->st, PARDO_ENOTSUP, "too many inputs or outputs");
    for (int k = 0; k < fwd.n_out; k++) {
        int v = fwd.out[k][0] ? var_index(b, fwd.out[k]) : -1;
        out_grads[k] = "";
        if (!wants_grad(b, v) || b->info[v].given == 0) continue;
        int rc = finish_sum(b, v);
        if (rc != PARDO_OK) return rc;
        grad_name(fwd.out[k], out_names[k], sizeof out_names[k]);
        out_grads[k] = out_names[k];
        any_out = true;
    }
    if (!any_out) return PARDO_OK;
    for (int k = 0; k < fwd.n_in; k++) {
        int v = fwd.in[k][0] ? var_index(b, fwd.in[k]) : -1;
        in_grads[k] = "";
        if (!wants_grad(b, v)) continue;
        next_partial(b, v, in_names[k], sizeof in_names[k]);
        in_grads[k] = in_names[k];
        any_in = true;
    }
    if (!any_in) return PARDO_OK;
    if (!fwd.def->grad) {
        pardo_errorf(b->st, PARDO_ENOTSUP, "op %s is not differentiable, but the loss needs gradients through its "
                     "output '%s'", fwd.type, fwd.out[0]);
        return where_error(b, i);
    }
    pardo_grad_request req = {.fwd = &fwd, .prog = b->p, .block = (int)(b->blk - b->p->blocks),
                              .out_grads = out_grads, .in_grads = in_grads};
    if (fwd.def->grad(&req, b->blk, b->st) != PARDO_OK) return where_error(b, i);
    return PARDO_OK;
}

/* Counts, per var, the input slots whose gradient will be computed: those
 * of relevant ops with an output that carries a gradient. */
static int count_uses(bw *b) {
    for (int i = 0; i <= b->last; i++) {
        if (!b->relevant[i]) continue;
        const pardo_op *op = &b->blk->ops[i];
        bool carries = false;
        for (int k = 0; k < op->n_out; k++) carries |= wants_grad(b, op->out[k][0] ? var_index(b, op->out[k]) : -1);
        if (!carries) continue;
        for (int k = 0; k < op->n_in; k++) {
            int v = op->in[k][0] ? var_index(b, op->in[k]) : -1;
            if (wants_grad(b, v)) b->info[v].uses++;
        }
    }
    return PARDO_OK;
}

static void set_roles(bw *b, const char *loss) {
    for (int i = 0; i <= b->last; i++) {
        pardo_op *op = &b->blk->ops[i];
        if (op->role != PARDO_OP_ROLE_NONE) continue;
        bool writes_loss = false;
        for (int k = 0; k < op->n_out; k++) writes_loss |= strcmp(op->out[k], loss) == 0;
        op->role = writes_loss ? PARDO_OP_LOSS : PARDO_OP_FORWARD;
    }
}

static int check_request(bw *b, const char *loss, const pardo_graph_var **lv) {
    pardo_block *blk = b->blk;
    const char *path = b->p->path ? b->p->path : "graph";
    char shape[128];
    for (int i = 0; i < blk->n_ops; i++)
        if (blk->ops[i].role == PARDO_OP_BACKWARD || blk->ops[i].role == PARDO_OP_OPTIMIZE) {
            pardo_errorf(b->st, PARDO_EINVAL, "--backward %s: the graph already has %s ops; it expects a forward graph",
                         loss, pardo_op_role_name(blk->ops[i].role));
            return where_error(b, i);
        }
    *lv = pardo_block_find_var(blk, loss);
    if (!*lv) return pardo_errorf(b->st, PARDO_ENOTFOUND, "%s: --backward %s: block 0 has no var '%s'", path, loss, loss);
    if (!is_float_var(*lv) || pardo_shape_numel((*lv)->type.ndim, (*lv)->type.shape) != 1)
        return pardo_errorf(b->st, PARDO_EINVAL, "%s: --backward %s: the loss must be a float scalar, it is %s %s", path,
                            loss, pardo_dtype_name((*lv)->type.dtype),
                            pardo_shape_str((*lv)->type.ndim, (*lv)->type.shape, shape, sizeof shape));
    b->last = -1;
    for (int i = 0; i < blk->n_ops; i++)
        for (int k = 0; k < blk->ops[i].n_out; k++)
            if (strcmp(blk->ops[i].out[k], loss) == 0) b->last = i;
    if (b->last < 0)
        return pardo_errorf(b->st, PARDO_EINVAL, "%s: --backward %s: no op writes '%s'", path, loss, loss);
    return PARDO_OK;
}

int pardo_pass_backward(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    bw b = {.p = p, .blk = &p->blocks[0], .st = st};
    const pardo_graph_var *lv = NULL;
    if (!opt || !opt->loss) return pardo_errorf(st, PARDO_EINVAL, "backward: no loss var given");
    int rc = check_request(&b, opt->loss, &lv);
    if (rc != PARDO_OK) return rc;
    b.n_vars = b.blk->n_vars;
    b.info = calloc((size_t)b.n_vars, sizeof(*b.info));
    b.relevant = calloc((size_t)b.last + 1, sizeof(*b.relevant));
    if (!b.info || !b.relevant) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        goto done;
    }
    mark_needed(&b, opt->loss);
    mark_grad_flow(&b);
    count_uses(&b);
    set_roles(&b, opt->loss);
    pardo_graph_var loss_copy = *lv; /* lv points into blk->vars, which may move */
    if ((rc = seed(&b, &loss_copy)) != PARDO_OK) goto done;
    int li = var_index(&b, opt->loss);
    b.info[li].given = 1; /* the seed */
    b.info[li].uses = 1;
    b.info[li].needed = b.info[li].grad_flows = true;
    for (int i = b.last; i >= 0; i--)
        if (b.relevant[i] && (rc = differentiate(&b, i)) != PARDO_OK) goto done;
    for (int v = 0; v < b.n_vars; v++)
        if (wants_grad(&b, v) && b.info[v].given > 0 && (rc = finish_sum(&b, v)) != PARDO_OK) goto done;
    rc = pardo_pass_check(p, opt, st);
done:
    free(b.info);
    free(b.relevant);
    return rc;
}
