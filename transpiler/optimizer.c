/* optimizer.c - appends optimizer ops and their state vars (see pass.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"
#include "pass.h"

pardo_pass_options pardo_pass_defaults(void) {
    pardo_pass_options o;
    memset(&o, 0, sizeof o);
    o.lr = 0.01;
    o.mu = 0.9;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.epsilon = 1e-8;
    o.weight_decay = NAN;
    return o;
}

static const char *const optimizer_names[] = {NULL, "sgd", "momentum", "adam", "adamw"};
#define N_OPTIMIZER_NAMES 5

bool pardo_optimizer_parse(const char *s, pardo_optimizer_kind *out) {
    for (int i = 1; i < N_OPTIMIZER_NAMES; i++)
        if (s && strcmp(s, optimizer_names[i]) == 0) {
            *out = (pardo_optimizer_kind)i;
            return true;
        }
    return false;
}

const char *pardo_optimizer_name(pardo_optimizer_kind k) {
    return (k > 0 && k < N_OPTIMIZER_NAMES) ? optimizer_names[k] : "none";
}

/* Declares a state var like param (zeros), or an int64 scalar counter. */
static int add_state(pardo_block *blk, const pardo_graph_var *param, const char *suffix, bool counter, pardo_status *st) {
    char name[512];
    snprintf(name, sizeof name, "%s@%s", param->name, suffix);
    pardo_type ty = param->type; /* copy before blk->vars may move */
    if (pardo_block_find_var(blk, name))
        return pardo_errorf(st, PARDO_EINVAL, "var '%s' already exists; the optimizer would declare it", name);
    pardo_graph_var *v = pardo_block_add_var(blk, name, st);
    if (!v) return st->code;
    v->declared = true;
    v->role = PARDO_VAR_STATE;
    v->init.fill = PARDO_FILL_CONSTANT;
    v->init.value = 0;
    if (counter) {
        memset(&v->type, 0, sizeof v->type);
        v->type.dtype = PARDO_I64;
        v->type.ndim = 0;
    } else {
        v->type = ty;
    }
    return PARDO_OK;
}

/* The learning-rate var for dtype dt, declared on first use: a state
 * scalar starting at lr, which the runtime may set (pardo train --lr). */
static int lr_var(pardo_block *blk, pardo_dtype dt, double lr, const char **name, pardo_status *st) {
    *name = dt == PARDO_F64 ? "learning_rate@float64" : "learning_rate";
    if (pardo_block_find_var(blk, *name)) return PARDO_OK;
    pardo_graph_var *v = pardo_block_add_var(blk, *name, st);
    if (!v) return st->code;
    v->declared = true;
    v->role = PARDO_VAR_STATE;
    v->type.dtype = dt;
    v->type.ndim = 0;
    v->init.fill = PARDO_FILL_CONSTANT;
    v->init.value = lr;
    return PARDO_OK;
}

/* Sets attr weight_decay on an update unless the options leave the op's default. */
static int set_weight_decay(pardo_op *op, const pardo_pass_options *o, pardo_status *st) {
    return isnan(o->weight_decay) ? PARDO_OK : pardo_op_set_attr(op, "weight_decay", pardo_value_new_number(o->weight_decay), st);
}

static int add_names(pardo_op *op, const char *const *in, int n_in, const char *const *out, int n_out,
                     pardo_status *st) {
    for (int k = 0; k < n_in; k++)
        if (pardo_op_add_input(op, in[k], st) != PARDO_OK) return st->code;
    for (int k = 0; k < n_out; k++)
        if (pardo_op_add_output(op, out[k], st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

static int append_update(pardo_block *blk, int param_index, const pardo_pass_options *o, pardo_status *st) {
    pardo_graph_var param = blk->vars[param_index]; /* a copy: blk->vars moves as state is declared */
    char grad[512], s1[512], s2[512], s3[512];
    const char *lr;
    int rc;
    snprintf(grad, sizeof grad, "%s@GRAD", param.name);
    if ((rc = lr_var(blk, param.type.dtype, o->lr, &lr, st)) != PARDO_OK) return rc;
    pardo_op *op = NULL;
    switch (o->optimizer) {
    case PARDO_OPTIMIZER_SGD: {
        const char *in[] = {param.name, grad, lr}, *out[] = {param.name};
        if (!(op = pardo_block_add_op(blk, "sgd", st))) return st->code;
        rc = add_names(op, in, 3, out, 1, st);
        if (rc == PARDO_OK) rc = set_weight_decay(op, o, st);
        break;
    }
    case PARDO_OPTIMIZER_MOMENTUM: {
        if ((rc = add_state(blk, &param, "VELOCITY", false, st)) != PARDO_OK) return rc;
        snprintf(s1, sizeof s1, "%s@VELOCITY", param.name);
        const char *in[] = {param.name, grad, s1, lr}, *out[] = {param.name, s1};
        if (!(op = pardo_block_add_op(blk, "momentum", st))) return st->code;
        rc = add_names(op, in, 4, out, 2, st);
        if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "mu", pardo_value_new_number(o->mu), st);
        if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "nesterov", pardo_value_new_bool(o->nesterov), st);
        if (rc == PARDO_OK) rc = set_weight_decay(op, o, st);
        break;
    }
    case PARDO_OPTIMIZER_ADAM:
    case PARDO_OPTIMIZER_ADAMW: {
        if ((rc = add_state(blk, &param, "MOMENT1", false, st)) != PARDO_OK ||
            (rc = add_state(blk, &param, "MOMENT2", false, st)) != PARDO_OK ||
            (rc = add_state(blk, &param, "STEP", true, st)) != PARDO_OK)
            return rc;
        snprintf(s1, sizeof s1, "%s@MOMENT1", param.name);
        snprintf(s2, sizeof s2, "%s@MOMENT2", param.name);
        snprintf(s3, sizeof s3, "%s@STEP", param.name);
        const char *in[] = {param.name, grad, s1, s2, s3, lr}, *out[] = {param.name, s1, s2, s3};
        if (!(op = pardo_block_add_op(blk, o->optimizer == PARDO_OPTIMIZER_ADAMW ? "adamw" : "adam", st)))
            return st->code;
        rc = add_names(op, in, 6, out, 4, st);
        if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "beta1", pardo_value_new_number(o->beta1), st);
        if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "beta2", pardo_value_new_number(o->beta2), st);
        if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "epsilon", pardo_value_new_number(o->epsilon), st);
        if (rc == PARDO_OK) rc = set_weight_decay(op, o, st);
        break;
    }
    case PARDO_OPTIMIZER_NONE: return pardo_errorf(st, PARDO_EINVAL, "no optimizer given");
    }
    if (rc == PARDO_OK) op->role = PARDO_OP_OPTIMIZE;
    return rc;
}

/* Moves each update (ops [first, n_ops), in order, one per param) to just
 * after the last op before them that touches its param or the param's
 * gradient: once the backward pass is done with a param, its gradient is
 * used and dead, so an executor that frees dead temporaries holds one
 * gradient at a time rather than all of them (as PyTorch's optimizer-in-
 * backward hooks do). Nothing after the new place reads or writes either
 * var, so every value computed stays the same. The parallel rewrite
 * (multi_cpu.c) moves the updates back behind the parts. One pass over the
 * ops finds each name's last touch (a name index), so this is linear. */
static int place_updates(pardo_block *blk, int first) {
    int n = blk->n_ops, n_upd = n - first, rc = PARDO_ENOMEM;
    int *anchor = malloc(sizeof(int) * (size_t)(n_upd + 1));
    int *next = malloc(sizeof(int) * (size_t)(n_upd + 1)), *head = malloc(sizeof(int) * (size_t)(first + 2));
    pardo_op *order = malloc(sizeof(pardo_op) * (size_t)(n + 1));
    pardo_name_index last = {0}; /* var -> the last op before `first` reading or writing it */
    pardo_status st;
    if (!anchor || !next || !head || !order) goto done;
    for (int i = 0; i < first; i++) {
        const pardo_op *op = &blk->ops[i];
        for (int k = 0; k < op->n_in; k++)
            if (op->in[k][0] && pardo_name_index_set(&last, op->in[k], i, &st) != PARDO_OK) goto done;
        for (int k = 0; k < op->n_out; k++)
            if (op->out[k][0] && pardo_name_index_set(&last, op->out[k], i, &st) != PARDO_OK) goto done;
    }
    for (int u = 0; u < n_upd; u++) {
        const pardo_op *up = &blk->ops[first + u];
        char grad[512];
        snprintf(grad, sizeof grad, "%s@GRAD", up->out[0]);
        int a = pardo_name_index_get(&last, up->out[0]), g = pardo_name_index_get(&last, grad);
        anchor[u] = a > g ? a : g;
    }
    /* head[a + 1]: the first update anchored at op a, then next[u]; in update order */
    for (int i = 0; i < first + 1; i++) head[i] = -1;
    for (int u = n_upd - 1; u >= 0; u--) {
        next[u] = head[anchor[u] + 1];
        head[anchor[u] + 1] = u;
    }
    int at = 0;
    for (int u = head[0]; u >= 0; u = next[u]) order[at++] = blk->ops[first + u]; /* a param nothing touches before: its update first */
    for (int i = 0; i < first; i++) {
        order[at++] = blk->ops[i];
        for (int u = head[i + 1]; u >= 0; u = next[u]) order[at++] = blk->ops[first + u];
    }
    memcpy(blk->ops, order, sizeof(pardo_op) * (size_t)n); /* the op structs move; what they own stays theirs */
    rc = PARDO_OK;
done:
    pardo_name_index_free(&last);
    free(anchor);
    free(next);
    free(head);
    free(order);
    return rc;
}

/* True when param var gets an update: a float param with a gradient
 * (written into grad, n bytes). */
static bool has_update(const pardo_block *blk, const pardo_graph_var *var, char *grad, size_t n) {
    if (var->role != PARDO_VAR_PARAM || !pardo_dtype_is_float(var->type.dtype)) return false;
    snprintf(grad, n, "%s@GRAD", var->name);
    return pardo_block_find_var(blk, grad) != NULL;
}

/* One clip_grad_norm op (role optimize) over the gradients of the first
 * n_params vars that get an update, scaling them in place; the updates
 * appended after it read them clipped. */
static int append_clip(pardo_block *blk, int n_params, double max_norm, pardo_status *st) {
    char grad[512];
    pardo_op *op = pardo_block_add_op(blk, "clip_grad_norm", st);
    if (!op) return st->code;
    op->role = PARDO_OP_OPTIMIZE;
    if (!(op->name = strdup("clip_grad_norm"))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int v = 0; v < n_params; v++) {
        if (!has_update(blk, &blk->vars[v], grad, sizeof grad)) continue;
        if (pardo_op_add_input(op, grad, st) != PARDO_OK || pardo_op_add_output(op, grad, st) != PARDO_OK)
            return st->code;
    }
    if (op->n_in == 0) return pardo_errorf(st, PARDO_EINVAL, "no param has a gradient to clip");
    return pardo_op_set_attr(op, "max_norm", pardo_value_new_number(max_norm), st);
}

int pardo_pass_optimizer(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    pardo_block *blk = &p->blocks[0];
    const char *path = p->path ? p->path : "graph";
    char grad[512];
    for (int i = 0; i < blk->n_ops; i++)
        if (blk->ops[i].role == PARDO_OP_OPTIMIZE)
            return pardo_errorf(st, PARDO_EINVAL, "%s: --optimizer: the graph already has optimize ops (op %d, %s)",
                                path, i, blk->ops[i].type);
    int n_params = blk->n_vars, updated = 0;
    if (opt->clip_grad_norm > 0 && append_clip(blk, n_params, opt->clip_grad_norm, st) != PARDO_OK)
        return pardo_status_prefix(st, "%s: --clip-grad-norm: ", path);
    for (int v = 0; v < n_params; v++) {
        const pardo_graph_var *var = &blk->vars[v];
        if (!has_update(blk, var, grad, sizeof grad)) continue;
        int rc = append_update(blk, v, opt, st);
        if (rc != PARDO_OK) return pardo_status_prefix(st, "%s: --optimizer %s: ", path, pardo_optimizer_name(opt->optimizer));
        updated++;
    }
    if (updated == 0)
        return pardo_errorf(st, PARDO_EINVAL, "%s: --optimizer %s: no param has a gradient (append them with --backward LOSS)",
                            path, pardo_optimizer_name(opt->optimizer));
    if (place_updates(blk, blk->n_ops - updated) != PARDO_OK)
        return pardo_errorf(st, PARDO_ENOMEM, "%s: --optimizer: out of memory", path);
    return pardo_pass_check(p, opt, st);
}
