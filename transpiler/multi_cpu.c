/* multi_cpu.c - the data-parallel rewrite: split / parallel_do / merge
 * (see pass.h). The forward part of block 0 moves into a new block 1 run once
 * per part; block 0 keeps the splits, the parallel_do, the merges and the
 * optimizer ops. Like every pass it names only the parallel op types. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"
#include "op.h"
#include "pass.h"

/* A growable list of borrowed names, kept unique (the index finds them). */
typedef struct name_list {
    const char **names;
    int n, cap;
    pardo_name_index ix; // name -> position in names
} name_list;

static bool has_name(const name_list *l, const char *name) { return pardo_name_index_get(&l->ix, name) >= 0; }

static int add_unique(name_list *l, const char *name, pardo_status *st) {
    if (!name[0] || has_name(l, name)) return PARDO_OK;
    if (pardo_name_index_set(&l->ix, name, l->n, st) != PARDO_OK) return st->code;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        const char **names = realloc(l->names, (size_t)cap * sizeof(*names));
        if (!names) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        l->names = names;
        l->cap = cap;
    }
    l->names[l->n++] = name;
    return PARDO_OK;
}

static bool is_parallel_type(const char *type) {
    return strcmp(type, "split") == 0 || strcmp(type, "merge") == 0 || strcmp(type, "parallel_do") == 0;
}

static int op_error(const pardo_program *p, int i, pardo_status *st) {
    char where[512];
    pardo_op_where(p, 0, i, where, sizeof where);
    return pardo_status_prefix(st, "%s: ", where);
}

/* Moves the optimize ops behind all others, keeping their order, when no op
 * they pass depends on them (the optimizer pass places each update right
 * after the last use of its param and gradient, see optimizer.c). Where one
 * cannot move, the order stays and place_ops says why. */
static void hoist_optimize_ops(pardo_block *blk) {
    int n = blk->n_ops;
    if (n == 0) return; /* no ops (an ONNX graph of no nodes): nothing to move, and blk->ops may be NULL */
    for (int i = 0; i < n; i++) {
        if (blk->ops[i].role != PARDO_OP_OPTIMIZE) continue;
        for (int j = i + 1; j < n; j++)
            if (blk->ops[j].role != PARDO_OP_OPTIMIZE && pardo_ops_conflict(&blk->ops[i], &blk->ops[j])) return;
    }
    pardo_op *order = malloc(sizeof(pardo_op) * (size_t)(n + 1));
    if (!order) return; /* the check below still holds */
    int at = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if ((blk->ops[i].role == PARDO_OP_OPTIMIZE) == (pass == 1)) order[at++] = blk->ops[i];
    memcpy(blk->ops, order, sizeof(pardo_op) * (size_t)n);
    free(order);
}

/* True when op writes a var of block 0 of role `role`. */
static bool writes_role(const pardo_block *blk, const pardo_op *op, pardo_var_role role) {
    for (int k = 0; k < op->n_out; k++) {
        const pardo_graph_var *v = op->out[k][0] ? pardo_block_find_var(blk, op->out[k]) : NULL;
        if (v && v->role == role) return true;
    }
    return false;
}

/* Gives every op a role and checks that the optimize ops come last. A
 * forward or backward op may write a state var (batch_norm's running
 * statistics): each part writes its own copy, merged back (below). */
static int place_ops(pardo_program *p, int *first_optimize, pardo_status *st) {
    pardo_block *blk = &p->blocks[0];
    *first_optimize = blk->n_ops;
    for (int i = 0; i < blk->n_ops; i++) {
        pardo_op *op = &blk->ops[i];
        if (is_parallel_type(op->type)) {
            pardo_errorf(st, PARDO_EINVAL, "the graph is already transpiled (it has a %s op); transpile the "
                         "single-thread graph instead", op->type);
            return op_error(p, i, st);
        }
        if (pardo_op_is_control(op)) { /* its blocks are children of block 0, which the rewrite does not move */
            pardo_errorf(st, PARDO_ENOTSUP, "a %s op runs blocks of its own; the multi-CPU rewrite does not move "
                         "them into the part block (run the graph on one part)", op->type);
            return op_error(p, i, st);
        }
        op->role = pardo_op_effective_role(p, 0, op);
    }
    hoist_optimize_ops(blk);
    for (int i = 0; i < blk->n_ops; i++) {
        pardo_op *op = &blk->ops[i];
        if (op->role == PARDO_OP_OPTIMIZE) {
            if (*first_optimize == blk->n_ops) *first_optimize = i;
        } else if (*first_optimize < blk->n_ops) {
            pardo_errorf(st, PARDO_EINVAL, "cannot place this %s op: it comes after the optimize op %d; the "
                         "rewrite runs forward, loss and backward ops per part and the optimizer after them",
                         pardo_op_role_name(op->role), *first_optimize);
            return op_error(p, i, st);
        } else if (writes_role(blk, op, PARDO_VAR_PARAM)) {
            pardo_errorf(st, PARDO_EINVAL, "this %s op writes a param; only optimize ops may, since parts run at once",
                         pardo_op_role_name(op->role));
            return op_error(p, i, st);
        }
    }
    if (p->n_blocks > 1)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: the graph has %d blocks; the rewrite takes a single-block graph",
                            p->path ? p->path : "graph", p->n_blocks);
    return PARDO_OK;
}

typedef struct plan {
    int n_part_ops;     // ops [0, n_part_ops) run per part
    name_list feeds;    // split inputs, first use order
    name_list reads;    // block-0 vars the part ops read (not split)
    name_list merged;   // vars merged back into block 0
    name_list moved;    // declared temps written by the part ops: they move into block 1
    name_list state;    // state vars of block 0 the part ops write: per part as S@PART, merged back into S
} plan;

static void list_free(name_list *l) {
    free(l->names);
    pardo_name_index_free(&l->ix);
}

static void plan_free(plan *pl) {
    list_free(&pl->feeds);
    list_free(&pl->reads);
    list_free(&pl->merged);
    list_free(&pl->moved);
    list_free(&pl->state);
}

/* Who touches what in block 0, found in one pass over its ops: the first
 * op writing each name, the last reading it. Keys borrowed from the ops. */
typedef struct uses {
    pardo_name_index first_write, last_read;
} uses;

static int uses_make(const pardo_block *blk, uses *u, pardo_status *st) {
    for (int i = 0; i < blk->n_ops; i++) {
        const pardo_op *op = &blk->ops[i];
        for (int k = 0; k < op->n_in; k++)
            if (op->in[k][0] && pardo_name_index_set(&u->last_read, op->in[k], i, st) != PARDO_OK) return st->code;
        for (int k = 0; k < op->n_out; k++)
            if (op->out[k][0] && pardo_name_index_add(&u->first_write, op->out[k], i, NULL, st) != PARDO_OK)
                return st->code;
    }
    return PARDO_OK;
}

static void uses_free(uses *u) {
    pardo_name_index_free(&u->first_write);
    pardo_name_index_free(&u->last_read);
}

static int make_plan(const pardo_program *p, int n_part_ops, plan *pl, pardo_status *st) {
    const pardo_block *blk = &p->blocks[0];
    uses u = {0};
    int rc = uses_make(blk, &u, st);
    pl->n_part_ops = n_part_ops;
    for (int i = 0; i < n_part_ops && rc == PARDO_OK; i++) {
        const pardo_op *op = &blk->ops[i];
        for (int k = 0; k < op->n_in && rc == PARDO_OK; k++) {
            const pardo_graph_var *v = op->in[k][0] ? pardo_block_find_var(blk, op->in[k]) : NULL;
            if (!v || !v->declared) continue; /* written by a part op before */
            int first = pardo_name_index_get(&u.first_write, v->name);
            if (first >= 0 && first < i) continue; /* written before */
            rc = add_unique(v->role == PARDO_VAR_FEED ? &pl->feeds : &pl->reads, v->name, st);
        }
        for (int k = 0; k < op->n_out && rc == PARDO_OK; k++) {
            const pardo_graph_var *v = op->out[k][0] ? pardo_block_find_var(blk, op->out[k]) : NULL;
            if (v && v->declared && v->role == PARDO_VAR_TEMP) rc = add_unique(&pl->moved, v->name, st);
            if (v && v->role == PARDO_VAR_STATE) rc = add_unique(&pl->state, v->name, st);
        }
    }
    /* merged: what the optimizer reads, what the loss ops write, and the outputs no op reads */
    for (int i = 0; i < n_part_ops && rc == PARDO_OK; i++) {
        const pardo_op *op = &blk->ops[i];
        for (int k = 0; k < op->n_out && rc == PARDO_OK; k++) {
            const char *name = op->out[k];
            if (!name[0] || has_name(&pl->state, name)) continue;
            int last = pardo_name_index_get(&u.last_read, name); /* -1: no op reads it */
            if (last >= n_part_ops || op->role == PARDO_OP_LOSS || last < 0) rc = add_unique(&pl->merged, name, st);
        }
    }
    uses_free(&u);
    if (rc != PARDO_OK) return rc;
    if (pl->feeds.n == 0)
        return pardo_errorf(st, PARDO_EINVAL, "%s: no feed var is read by the forward ops; there is no batch to split",
                            p->path ? p->path : "graph");
    if (pl->merged.n == 0)
        return pardo_errorf(st, PARDO_EINVAL, "%s: the forward ops produce nothing to merge", p->path ? p->path : "graph");
    return PARDO_OK;
}

static void parts_name(const char *var, char *buf, size_t n) { snprintf(buf, n, "%s@PARTS", var); }
static void part_name(const char *var, char *buf, size_t n) { snprintf(buf, n, "%s@PART", var); }

/* Block 1's ops write a state var S of block 0 as S@PART (and read that
 * copy after the write), which parts_out hands to S@PARTS. */
static int rename_state_writes(pardo_block *b1, const plan *pl, pardo_status *st) {
    char name[512];
    bool *written = calloc((size_t)pl->state.n + 1, sizeof(bool));
    if (!written) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int i = 0; i < b1->n_ops; i++) {
        pardo_op *op = &b1->ops[i];
        for (int k = 0; k < op->n_in; k++)
            for (int s = 0; s < pl->state.n; s++)
                if (written[s] && strcmp(op->in[k], pl->state.names[s]) == 0) {
                    part_name(pl->state.names[s], name, sizeof name);
                    char *dup = strdup(name);
                    if (!dup) { free(written); return pardo_errorf(st, PARDO_ENOMEM, "out of memory"); }
                    free(op->in[k]);
                    op->in[k] = dup;
                }
        for (int k = 0; k < op->n_out; k++)
            for (int s = 0; s < pl->state.n; s++)
                if (strcmp(op->out[k], pl->state.names[s]) == 0) {
                    part_name(pl->state.names[s], name, sizeof name);
                    char *dup = strdup(name);
                    if (!dup) { free(written); return pardo_errorf(st, PARDO_ENOMEM, "out of memory"); }
                    free(op->out[k]);
                    op->out[k] = dup;
                    written[s] = true;
                }
    }
    free(written);
    return PARDO_OK;
}

/* Declares tensor_array var `name` in blk with parts of type ty; dim 0 of a
 * split's parts is -1 (their rows). The parts a parallel_do fills have the
 * type of the var they are parts of (a gradient's parts are the param's
 * shape), so merge gives that type back. */
static int declare_array(pardo_block *blk, const char *name, const pardo_type *ty, bool split, pardo_status *st) {
    pardo_graph_var *a = pardo_block_add_var(blk, name, st);
    if (!a) return st->code;
    a->declared = true;
    a->kind = PARDO_VAR_TENSOR_ARRAY;
    a->type = *ty;
    if (split && a->type.ndim > 0) a->type.shape[0] = -1; /* a part's rows */
    return PARDO_OK;
}

/* True when var's type has a leading run-time (batch) dim: merged by concat. */
static bool has_batch_dim(const pardo_graph_var *v) { return v->type.ndim > 0 && v->type.shape[0] == -1; }

static int build(const pardo_program *src, const plan *pl, const pardo_pass_options *opt, pardo_program *dst,
                 pardo_status *st) {
    const pardo_block *old = &src->blocks[0];
    char name[512], weight[512];
    int rc;
    if ((rc = pardo_program_add_block(dst, -1, st)) < 0 || (rc = pardo_program_add_block(dst, 0, st)) < 0) return rc;
    pardo_block *b0 = &dst->blocks[0], *b1 = &dst->blocks[1];
    /* vars: block 0 keeps its declared vars but the moved temps; block 1 gets those */
    for (int i = 0; i < old->n_vars; i++) {
        const pardo_graph_var *v = &old->vars[i];
        if (!v->declared) continue;
        if (!pardo_block_add_var_copy(has_name(&pl->moved, v->name) ? b1 : b0, v, st)) return st->code;
    }
    for (int i = 0; i < pl->feeds.n; i++) {
        parts_name(pl->feeds.names[i], name, sizeof name);
        const pardo_type *ty = &pardo_block_find_var(old, pl->feeds.names[i])->type;
        if ((rc = declare_array(b0, name, ty, true, st)) != PARDO_OK) return rc;
    }
    for (int i = 0; i < pl->merged.n; i++) {
        parts_name(pl->merged.names[i], name, sizeof name);
        const pardo_type *ty = &pardo_block_find_var(old, pl->merged.names[i])->type;
        if ((rc = declare_array(b0, name, ty, false, st)) != PARDO_OK) return rc;
    }
    for (int i = 0; i < pl->state.n; i++) {
        parts_name(pl->state.names[i], name, sizeof name);
        const pardo_type *ty = &pardo_block_find_var(old, pl->state.names[i])->type;
        if ((rc = declare_array(b0, name, ty, false, st)) != PARDO_OK) return rc;
    }
    /* block 0: splits */
    for (int i = 0; i < pl->feeds.n; i++) {
        pardo_op *op = pardo_block_add_op(b0, "split", st);
        parts_name(pl->feeds.names[i], name, sizeof name);
        if (!op || pardo_op_add_input(op, pl->feeds.names[i], st) != PARDO_OK ||
            pardo_op_add_output(op, name, st) != PARDO_OK ||
            pardo_op_set_attr(op, "parts", pardo_value_new_number(opt->parts), st) != PARDO_OK)
            return st->code;
        op->role = PARDO_OP_FORWARD;
    }
    /* the parallel_do */
    pardo_op *pd = pardo_block_add_op(b0, "parallel_do", st);
    if (!pd || !(pd->name = strdup("parts"))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    pd->role = PARDO_OP_FORWARD;
    pardo_value *pin = pardo_value_new_object(), *pout = pardo_value_new_object();
    rc = (pin && pout) ? PARDO_OK : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int i = 0; rc == PARDO_OK && i < pl->feeds.n; i++) {
        parts_name(pl->feeds.names[i], name, sizeof name);
        pardo_value *s = pardo_value_new_string(name);
        rc = s ? pardo_value_set(pin, pl->feeds.names[i], s, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_value_free(s);
        if (rc == PARDO_OK) rc = pardo_op_add_input(pd, name, st);
    }
    for (int i = 0; rc == PARDO_OK && i < pl->reads.n; i++) rc = pardo_op_add_input(pd, pl->reads.names[i], st);
    for (int i = 0; rc == PARDO_OK && i < pl->merged.n; i++) {
        parts_name(pl->merged.names[i], name, sizeof name);
        pardo_value *s = pardo_value_new_string(name);
        rc = s ? pardo_value_set(pout, pl->merged.names[i], s, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_value_free(s);
        if (rc == PARDO_OK) rc = pardo_op_add_output(pd, name, st);
    }
    for (int i = 0; rc == PARDO_OK && i < pl->state.n; i++) {
        char part[512];
        parts_name(pl->state.names[i], name, sizeof name);
        part_name(pl->state.names[i], part, sizeof part);
        pardo_value *s = pardo_value_new_string(name);
        rc = s ? pardo_value_set(pout, part, s, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_value_free(s);
        if (rc == PARDO_OK) rc = pardo_op_add_output(pd, name, st);
    }
    if (rc == PARDO_OK) rc = pardo_op_set_attr(pd, "block", pardo_value_new_number(1), st);
    if (rc == PARDO_OK) rc = pardo_op_set_attr(pd, "parts_in", pin, st);
    else pardo_value_free(pin);
    if (rc == PARDO_OK) rc = pardo_op_set_attr(pd, "parts_out", pout, st);
    else pardo_value_free(pout);
    if (rc != PARDO_OK) return rc;
    /* merges, each back under its own name */
    parts_name(pl->feeds.names[0], weight, sizeof weight);
    for (int i = 0; i < pl->merged.n; i++) {
        const pardo_graph_var *v = pardo_block_find_var(old, pl->merged.names[i]);
        bool concat = has_batch_dim(v);
        pardo_op *op = pardo_block_add_op(b0, "merge", st);
        parts_name(v->name, name, sizeof name);
        if (!op || pardo_op_add_input(op, name, st) != PARDO_OK) return st->code;
        op->role = v->name[0] && strstr(v->name, "@GRAD") ? PARDO_OP_BACKWARD : PARDO_OP_FORWARD;
        if (concat) {
            rc = pardo_op_set_attr(op, "mode", pardo_value_new_string("concat"), st);
        } else {
            rc = pardo_op_add_input(op, weight, st);
            if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "mode", pardo_value_new_string("mean"), st);
            if (rc == PARDO_OK) rc = pardo_op_set_attr(op, "weight_by", pardo_value_new_string(weight), st);
        }
        if (rc != PARDO_OK || pardo_op_add_output(op, v->name, st) != PARDO_OK) return st->code;
    }
    /* each part's state (batch_norm's running statistics, each part's own
     * batch: DDP without SyncBatchNorm) averaged back, weighted by the
     * parts' rows; role optimize, so an evaluation leaves the state alone */
    for (int i = 0; i < pl->state.n; i++) {
        pardo_op *op = pardo_block_add_op(b0, "merge", st);
        parts_name(pl->state.names[i], name, sizeof name);
        if (!op || pardo_op_add_input(op, name, st) != PARDO_OK || pardo_op_add_input(op, weight, st) != PARDO_OK ||
            pardo_op_set_attr(op, "mode", pardo_value_new_string("mean"), st) != PARDO_OK ||
            pardo_op_set_attr(op, "weight_by", pardo_value_new_string(weight), st) != PARDO_OK ||
            pardo_op_add_output(op, pl->state.names[i], st) != PARDO_OK)
            return st->code;
        op->role = PARDO_OP_OPTIMIZE;
    }
    /* the optimizer ops, as they were */
    for (int i = pl->n_part_ops; i < old->n_ops; i++)
        if (!pardo_block_add_op_copy(b0, &old->ops[i], st)) return st->code;
    /* block 1: the forward, loss and backward ops; an op with a sync form (attr sync, or --sync-batch-norm)
     * as its def writes it, joining the parts at an all_reduce */
    for (int i = 0; i < pl->n_part_ops; i++) {
        const pardo_op *op = &old->ops[i];
        bool sync = false;
        if (op->def && op->def->sync_parts) {
            if (pardo_attr_bool(op, "sync", false, &sync, st) != PARDO_OK) return op_error(src, i, st);
            sync |= opt->sync_parts;
        }
        if (!sync ? !pardo_block_add_op_copy(b1, op, st) : op->def->sync_parts(op, b1, st) != PARDO_OK)
            return sync ? op_error(src, i, st) : st->code;
    }
    return rename_state_writes(b1, pl, st);
}

int pardo_pass_multi_cpu(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    int first_optimize, rc;
    plan pl;
    memset(&pl, 0, sizeof pl);
    if (opt->parts < 0)
        return pardo_errorf(st, PARDO_EINVAL, "--parts is %d, expected 0 (the thread count) or more", opt->parts);
    if ((rc = place_ops(p, &first_optimize, st)) != PARDO_OK) return rc;
    if ((rc = make_plan(p, first_optimize, &pl, st)) != PARDO_OK) goto done;
    pardo_program *q = pardo_program_new();
    if (!q) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = build(p, &pl, opt, q, st)) != PARDO_OK) {
        pardo_program_free(q);
        goto done;
    }
    /* swap the blocks in: p keeps its name, path and doc */
    pardo_block *blocks = p->blocks;
    int n_blocks = p->n_blocks;
    p->blocks = q->blocks;
    p->n_blocks = q->n_blocks;
    q->blocks = blocks;
    q->n_blocks = n_blocks;
    pardo_program_free(q);
    rc = pardo_pass_check(p, opt, st);
done:
    plan_free(&pl);
    return rc;
}
