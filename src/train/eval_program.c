/* eval_program.c - the loss, logits and labels of a training graph, and
 * its evaluation program (see eval_program.h). */
#include "train/eval_program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "pass.h"

static bool dropped(const pardo_program *p, int block, const pardo_op *op) {
    pardo_op_role r = pardo_op_effective_role(p, block, op);
    return r == PARDO_OP_BACKWARD || r == PARDO_OP_OPTIMIZE;
}

bool pardo_program_trains(const pardo_program *p) {
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++)
            if (pardo_op_effective_role(p, b, &p->blocks[b].ops[i]) == PARDO_OP_OPTIMIZE) return true;
    return false;
}

/* The first op of role loss (block 0 first) that writes `name`, or that writes anything when name is NULL. */
static const pardo_op *loss_op(const pardo_program *p, const char *name, int *block) {
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++) {
            const pardo_op *op = &p->blocks[b].ops[i];
            if (op->role == PARDO_OP_LOSS && op->n_out > 0 && (!name || pardo_op_writes(op, name))) {
                *block = b;
                return op;
            }
        }
    return NULL;
}

/* The block-0 var of the first metric op's output (pardo_loss_info.metric). */
static const char *find_metric(const pardo_program *p) {
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++) {
            const pardo_op *op = &p->blocks[b].ops[i];
            if (!op->def || !op->def->metric || op->n_out < 1 || !op->out[0][0]) continue;
            const pardo_graph_var *v = pardo_block_find_var(&p->blocks[0], op->out[0]);
            if (!v || v->kind != PARDO_VAR_TENSOR || v->role != PARDO_VAR_TEMP || !pardo_dtype_is_float(v->type.dtype) ||
                v->type.ndim != 0)
                continue;
            bool written = false;
            for (int k = 0; k < p->blocks[0].n_ops && !written; k++) written = pardo_op_writes(&p->blocks[0].ops[k], v->name) > 0;
            if (written) return v->name;
        }
    return NULL;
}

int pardo_loss_find(const pardo_program *p, const char *loss, pardo_loss_info *out, pardo_status *st) {
    const char *file = p->path ? p->path : "graph";
    memset(out, 0, sizeof(*out));
    out->block = -1;
    int block = -1;
    const pardo_op *op = loss_op(p, loss, &block);
    if (!loss) {
        if (!op || !op->out[0][0])
            return pardo_errorf(st, PARDO_ENOTFOUND, "%s: no op has role \"loss\"; name the loss var with --loss NAME",
                                file);
        loss = op->out[0];
    }
    const pardo_graph_var *v = pardo_block_find_var(&p->blocks[0], loss);
    if (!v)
        return pardo_errorf(st, PARDO_ENOTFOUND,
                            "%s: the loss '%s' is not a var of block 0 (name one with --loss NAME)", file, loss);
    int64_t numel = v->type.ndim >= 0 ? pardo_shape_numel(v->type.ndim, v->type.shape) : -1;
    if (!pardo_dtype_is_float(v->type.dtype) || v->kind != PARDO_VAR_TENSOR || v->role != PARDO_VAR_TEMP ||
        (numel >= 0 && numel != 1)) {
        char shape[160];
        return pardo_errorf(
            st, PARDO_EINVAL, "%s: the loss '%s' is a %s %s %s %s, expected a float scalar the graph's ops compute",
            file, loss, pardo_var_role_name(v->role), pardo_dtype_name(v->type.dtype), pardo_var_kind_name(v->kind),
            pardo_shape_str(v->type.ndim, v->type.shape, shape, sizeof shape));
    }
    out->loss = v->name;
    out->metric = find_metric(p);
    if (!op) return PARDO_OK;
    out->block = block;
    if (op->n_in < 2 || !op->in[0][0] || !op->in[1][0]) return PARDO_OK;
    const pardo_graph_var *lg = pardo_program_lookup_var(p, block, op->in[0], NULL);
    const pardo_graph_var *lb = pardo_block_find_var(&p->blocks[0], op->in[1]);
    if (lg && lg->kind == PARDO_VAR_TENSOR && pardo_dtype_is_float(lg->type.dtype) && lg->type.ndim == 2 && lb &&
        lb->role == PARDO_VAR_FEED && pardo_dtype_is_int(lb->type.dtype) && lb->type.ndim == 1) {
        out->logits = lg->name;
        out->labels = lb->name;
    }
    return PARDO_OK;
}

/* True when a kept op of block b writes name. */
static bool kept_writes(const pardo_program *p, int b, const char *name) {
    for (int i = 0; i < p->blocks[b].n_ops; i++) {
        const pardo_op *op = &p->blocks[b].ops[i];
        if (!dropped(p, b, op) && pardo_op_writes(op, name)) return true;
    }
    return false;
}

static int set_attr(pardo_op *op, const char *key, pardo_value *val, pardo_status *st) {
    if (!val) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    if (!op->attrs && !(op->attrs = pardo_value_new_object())) {
        pardo_value_free(val);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    }
    int rc = pardo_value_set(op->attrs, key, val, st);
    pardo_value_free(val);
    return rc;
}

/* Copies parallel_do `src` of block 0 into dst's block 0, keeping the
 * parts_out entries whose block var a kept op writes (or a parts_in var
 * passed straight out), plus logits -> logits_parts when that is given. */
static int copy_parallel_do(const pardo_program *p, const pardo_op *src, pardo_block *dst, const char *logits,
                            const char *logits_parts, pardo_status *st) {
    int sub = (int)pardo_attr(src, "block")->number;
    const pardo_value *pin = pardo_attr(src, "parts_in"), *pout = pardo_attr(src, "parts_out");
    pardo_op *op = pardo_block_add_op(dst, src->type, st);
    if (!op) return st->code;
    op->role = src->role;
    op->line = src->line;
    op->col = src->col;
    if ((src->name && !(op->name = strdup(src->name))) || (src->attrs && !(op->attrs = pardo_value_clone(src->attrs))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int k = 0; k < src->n_in; k++)
        if (pardo_op_add_input(op, src->in[k], st) != PARDO_OK) return st->code;
    pardo_value *keep = pardo_value_new_object();
    int rc = keep ? PARDO_OK : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int k = 0; rc == PARDO_OK && pout && k < pout->n; k++) {
        if (!kept_writes(p, sub, pout->keys[k]) && !pardo_value_get(pin, pout->keys[k])) continue;
        rc = pardo_value_set(keep, pout->keys[k], &pout->items[k], st);
        if (rc == PARDO_OK) rc = pardo_op_add_output(op, pout->items[k].string, st);
    }
    if (rc == PARDO_OK && logits) {
        pardo_value *s = pardo_value_new_string(logits_parts);
        rc = s ? pardo_value_set(keep, logits, s, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_value_free(s);
        if (rc == PARDO_OK) rc = pardo_op_add_output(op, logits_parts, st);
    }
    if (rc != PARDO_OK) {
        pardo_value_free(keep);
        return rc;
    }
    return set_attr(op, "parts_out", keep, st);
}

/* Appends to block 0 of q: tensor_array var `parts` of logits' type and a
 * merge (concat) of it into `logits`. */
static int add_logits_merge(const pardo_program *train, const pardo_loss_info *li, pardo_program *q, const char *parts,
                            pardo_status *st) {
    const pardo_graph_var *lv = pardo_program_lookup_var(train, li->block, li->logits, NULL);
    pardo_graph_var *a = pardo_block_add_var(&q->blocks[0], parts, st);
    if (!a) return st->code;
    a->declared = true;
    a->kind = PARDO_VAR_TENSOR_ARRAY;
    a->type = lv->type;
    a->type.shape[0] = -1;
    pardo_op *m = pardo_block_add_op(&q->blocks[0], "merge", st);
    if (!m || pardo_op_add_input(m, parts, st) != PARDO_OK || pardo_op_add_output(m, li->logits, st) != PARDO_OK ||
        set_attr(m, "mode", pardo_value_new_string("concat"), st) != PARDO_OK)
        return st->code;
    m->role = PARDO_OP_FORWARD;
    return PARDO_OK;
}

static int build(const pardo_program *train, const pardo_loss_info *li, pardo_program *q, const char **logits,
                 pardo_status *st) {
    int rc;
    q->version = train->version;
    if ((train->name && !(q->name = strdup(train->name))) || (train->path && !(q->path = strdup(train->path))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int b = 0; b < train->n_blocks; b++) {
        if ((rc = pardo_program_add_block(q, train->blocks[b].parent, st)) < 0) return rc;
        const pardo_block *src = &train->blocks[b];
        for (int i = 0; i < src->n_vars; i++)
            if (src->vars[i].declared && !pardo_block_add_var_copy(&q->blocks[b], &src->vars[i], st)) return st->code;
    }
    /* the logits: in block 0 already, or brought back from the parallel_do that runs the loss op */
    int rb = -1, ri = -1;
    char parts[512] = "";
    *logits = NULL;
    if (li->logits && pardo_block_find_var(&train->blocks[0], li->logits)) {
        *logits = li->logits;
    } else if (li->logits && li->block > 0 && pardo_block_runner(train, li->block, &rb, &ri) && rb == 0) {
        snprintf(parts, sizeof parts, "%s@PARTS", li->logits);
        if (pardo_block_find_var(&train->blocks[0], parts)) snprintf(parts, sizeof parts, "%s@EVAL@PARTS", li->logits);
        *logits = li->logits;
    }
    for (int b = 0; b < train->n_blocks; b++) {
        const pardo_block *src = &train->blocks[b];
        for (int i = 0; i < src->n_ops; i++) {
            const pardo_op *op = &src->ops[i];
            if (dropped(train, b, op)) continue;
            if (b == 0 && pardo_op_is_parallel_do(op)) {
                bool bring = b == rb && i == ri;
                if ((rc = copy_parallel_do(train, op, &q->blocks[0], bring ? li->logits : NULL, parts, st)) != PARDO_OK)
                    return rc;
                if (bring && (rc = add_logits_merge(train, li, q, parts, st)) != PARDO_OK) return rc;
            } else if (!pardo_block_add_op_copy(&q->blocks[b], op, st)) {
                return st->code;
            }
        }
    }
    return PARDO_OK;
}

int pardo_eval_program_build(const pardo_program *train, const pardo_loss_info *li, pardo_program **out,
                             const char **logits, pardo_status *st) {
    *out = NULL;
    *logits = NULL;
    pardo_program *q = pardo_program_new();
    if (!q) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    int rc = build(train, li, q, logits, st);
    if (rc == PARDO_OK) {
        pardo_pass_options opt = pardo_pass_defaults();
        rc = pardo_pass_check(q, &opt, st);
    }
    if (rc != PARDO_OK) {
        pardo_program_free(q);
        *logits = NULL;
        return pardo_status_prefix(
            st, "cannot evaluate %s without its backward and optimize ops: ", train->path ? train->path : "the graph");
    }
    /* *logits must borrow from q */
    if (*logits) {
        const pardo_graph_var *v = pardo_block_find_var(&q->blocks[0], *logits);
        *logits = v ? v->name : NULL;
    }
    *out = q;
    return PARDO_OK;
}
