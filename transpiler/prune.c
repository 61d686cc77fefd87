/* prune.c - block 0 cut to the ops the fetched vars need (see prune.h). */
#include "prune.h"

#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"
#include "core/value.h"
#include "pass.h"

static bool role_dropped(const pardo_program *p, int b, const pardo_op *op, bool keep_updates) {
    if (keep_updates) return false;
    pardo_op_role r = pardo_op_effective_role(p, b, op);
    return r == PARDO_OP_BACKWARD || r == PARDO_OP_OPTIMIZE;
}

static bool writes_needed(const pardo_op *op, const pardo_name_index *need) {
    for (int k = 0; k < op->n_out; k++)
        if (op->out[k][0] && pardo_name_index_get(need, op->out[k]) >= 0) return true;
    return false;
}

static int need_inputs(const pardo_op *op, pardo_name_index *need, pardo_status *st) {
    for (int k = 0; k < op->n_in; k++)
        if (op->in[k][0] && pardo_name_index_set(need, op->in[k], 1, st) != PARDO_OK) return st->code;
    return PARDO_OK;
}

/* The kept ops of part block `sub` (keep[], its n_ops entries) given the
 * block vars its caller needs in `need` (extended here with what the kept
 * ops read); `all`: every op not dropped by role is a root. */
static int prune_block(const pardo_program *p, int sub, bool all, bool keep_updates, pardo_name_index *need,
                       bool *keep, pardo_status *st) {
    const pardo_block *b = &p->blocks[sub];
    for (int i = b->n_ops - 1; i >= 0; i--) {
        const pardo_op *op = &b->ops[i];
        keep[i] = !role_dropped(p, sub, op, keep_updates) && (all || writes_needed(op, need));
        if (keep[i] && need_inputs(op, need, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

/* A copy of parallel_do `src` into dst with parts_in, parts_out, in and out
 * cut to what the kept ops of its block read (`read`) and the parts_out
 * entries in `out_keys`. */
static int copy_parallel_do(const pardo_op *src, const pardo_name_index *read, const pardo_name_index *out_keys,
                            pardo_block *dst, pardo_status *st) {
    const pardo_value *pin = pardo_attr(src, "parts_in"), *pout = pardo_attr(src, "parts_out");
    pardo_op *op = pardo_block_add_op_copy(dst, src, st);
    if (!op) return st->code;
    pardo_value *nin = pardo_value_new_object(), *nout = pardo_value_new_object();
    pardo_name_index arrays; /* the arrays the kept parts_in entries read */
    pardo_name_index_init(&arrays);
    int rc = nin && nout ? PARDO_OK : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int k = 0; rc == PARDO_OK && pin && k < pin->n; k++)
        if (pardo_name_index_get(read, pin->keys[k]) >= 0 || pardo_name_index_get(out_keys, pin->keys[k]) >= 0) {
            rc = pardo_value_set(nin, pin->keys[k], &pin->items[k], st);
            if (rc == PARDO_OK && pin->items[k].string)
                rc = pardo_name_index_set(&arrays, pin->items[k].string, 1, st);
        }
    for (int k = 0; rc == PARDO_OK && pout && k < pout->n; k++)
        if (pardo_name_index_get(out_keys, pout->keys[k]) >= 0) rc = pardo_value_set(nout, pout->keys[k], &pout->items[k], st);
    /* set_attr takes ownership of each object */
    if (rc == PARDO_OK && pin) rc = pardo_op_set_attr(op, "parts_in", nin, st), nin = NULL;
    if (rc == PARDO_OK && pout) rc = pardo_op_set_attr(op, "parts_out", nout, st), nout = NULL;
    pardo_value_free(nin);
    pardo_value_free(nout);
    /* in: the kept parts_in arrays and the enclosing vars the kept ops read; out: the kept parts_out arrays */
    int n = 0;
    for (int k = 0; rc == PARDO_OK && k < op->n_in; k++) {
        if (pardo_name_index_get(&arrays, op->in[k]) >= 0 || pardo_name_index_get(read, op->in[k]) >= 0)
            op->in[n++] = op->in[k];
        else
            free(op->in[k]);
    }
    if (rc == PARDO_OK) op->n_in = n;
    n = 0;
    const pardo_value *kept_out = pardo_attr(op, "parts_out");
    for (int k = 0; rc == PARDO_OK && k < op->n_out; k++) {
        bool listed = false;
        for (int j = 0; kept_out && j < kept_out->n && !listed; j++)
            listed = kept_out->items[j].string && strcmp(kept_out->items[j].string, op->out[k]) == 0;
        if (listed) op->out[n++] = op->out[k];
        else free(op->out[k]);
    }
    if (rc == PARDO_OK) op->n_out = n;
    pardo_name_index_free(&arrays);
    return rc;
}

typedef struct prune_work {
    bool *keep0;                 // block 0's kept ops
    bool **keep_sub;             // per block: its kept ops, for the blocks a kept parallel_do runs; else NULL
    pardo_name_index need0;      // names block 0's kept ops read, and the fetches
    pardo_name_index *sub_read;  // per block run by a kept parallel_do: what its kept ops read
    pardo_name_index *sub_out;   // and the parts_out keys still needed
} prune_work;

/* A kept control-flow op (if, loop, scan) keeps every op of the blocks it
 * runs, and of theirs: it reads their outputs through its attrs, and lists
 * every enclosing var they read among its inputs. */
static int keep_control(const pardo_program *p, const pardo_op *op, bool **keep_sub, pardo_status *st) {
    int blocks[2], n = pardo_control_blocks(op, blocks);
    for (int k = 0; k < n; k++) {
        const pardo_block *sb = &p->blocks[blocks[k]];
        if (keep_sub[blocks[k]]) continue;
        if (!(keep_sub[blocks[k]] = calloc((size_t)sb->n_ops + 1, sizeof(bool))))
            return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        for (int i = 0; i < sb->n_ops; i++) {
            keep_sub[blocks[k]][i] = true;
            int rc = keep_control(p, &sb->ops[i], keep_sub, st);
            if (rc != PARDO_OK) return rc;
        }
    }
    return PARDO_OK;
}

static int plan(const pardo_program *p, const char *const *fetch, int n_fetch, bool keep_updates, prune_work *w,
                pardo_status *st) {
    const pardo_block *b0 = &p->blocks[0];
    bool all = n_fetch == 0;
    for (int f = 0; f < n_fetch; f++)
        if (pardo_name_index_set(&w->need0, fetch[f], 1, st) != PARDO_OK) return st->code;
    for (int i = b0->n_ops - 1; i >= 0; i--) {
        const pardo_op *op = &b0->ops[i];
        if (role_dropped(p, 0, op, keep_updates)) continue;
        bool root = all || (keep_updates && pardo_op_effective_role(p, 0, op) == PARDO_OP_OPTIMIZE);
        if (!root && !writes_needed(op, &w->need0)) continue;
        w->keep0[i] = true;
        if (!pardo_op_is_parallel_do(op)) {
            if (need_inputs(op, &w->need0, st) != PARDO_OK || keep_control(p, op, w->keep_sub, st) != PARDO_OK)
                return st->code;
            continue;
        }
        int sub = (int)pardo_attr(op, "block")->number;
        const pardo_value *pin = pardo_attr(op, "parts_in"), *pout = pardo_attr(op, "parts_out");
        pardo_name_index *read = &w->sub_read[sub], *outk = &w->sub_out[sub];
        if (!(w->keep_sub[sub] = calloc((size_t)p->blocks[sub].n_ops + 1, sizeof(bool))))
            return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        /* the parts_out entries block 0 needs (all: those a kept op of the block writes, after it is cut) */
        for (int k = 0; pout && k < pout->n; k++)
            if (!all && pout->items[k].string && pardo_name_index_get(&w->need0, pout->items[k].string) >= 0 &&
                (pardo_name_index_set(outk, pout->keys[k], 1, st) != PARDO_OK ||
                 pardo_name_index_set(read, pout->keys[k], 1, st) != PARDO_OK))
                return st->code;
        if (prune_block(p, sub, all, keep_updates, read, w->keep_sub[sub], st) != PARDO_OK) return st->code;
        for (int k = 0; all && pout && k < pout->n; k++) {
            bool written = pardo_value_get(pin, pout->keys[k]) != NULL;
            for (int j = 0; j < p->blocks[sub].n_ops && !written; j++)
                written = w->keep_sub[sub][j] && pardo_op_writes(&p->blocks[sub].ops[j], pout->keys[k]) > 0;
            if (written && pardo_name_index_set(outk, pout->keys[k], 1, st) != PARDO_OK) return st->code;
        }
        /* what the cut op reads: the arrays of the parts_in entries the kept ops read, the other vars they read */
        for (int k = 0; pin && k < pin->n; k++)
            if ((pardo_name_index_get(read, pin->keys[k]) >= 0 || pardo_name_index_get(outk, pin->keys[k]) >= 0) &&
                pin->items[k].string && pardo_name_index_set(&w->need0, pin->items[k].string, 1, st) != PARDO_OK)
                return st->code;
        for (int k = 0; k < op->n_in; k++)
            if (op->in[k][0] && pardo_name_index_get(read, op->in[k]) >= 0 &&
                pardo_name_index_set(&w->need0, op->in[k], 1, st) != PARDO_OK)
                return st->code;
    }
    return PARDO_OK;
}

/* Whether feed var v of block 0 is read by what is kept. */
static bool feed_needed(const prune_work *w, const pardo_program *p, const pardo_graph_var *v) {
    if (pardo_name_index_get(&w->need0, v->name) >= 0) return true;
    for (int b = 1; b < p->n_blocks; b++)
        if (w->keep_sub[b] && pardo_name_index_get(&w->sub_read[b], v->name) >= 0) return true;
    return false;
}

static int build(const pardo_program *p, const prune_work *w, pardo_program *q, pardo_status *st) {
    int rc;
    q->version = p->version;
    if ((p->name && !(q->name = strdup(p->name))) || (p->path && !(q->path = strdup(p->path))) ||
        (p->doc && !(q->doc = pardo_value_clone(p->doc))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int b = 0; b < p->n_blocks; b++) {
        if ((rc = pardo_program_add_block(q, p->blocks[b].parent, st)) < 0) return rc;
        const pardo_block *src = &p->blocks[b];
        q->blocks[b].line = src->line;
        q->blocks[b].col = src->col;
        for (int i = 0; i < src->n_vars; i++) {
            const pardo_graph_var *v = &src->vars[i];
            if (!v->declared || (b == 0 && v->role == PARDO_VAR_FEED && !feed_needed(w, p, v))) continue;
            if (!pardo_block_add_var_copy(&q->blocks[b], v, st)) return st->code;
        }
    }
    for (int b = 0; b < p->n_blocks; b++) {
        const pardo_block *src = &p->blocks[b];
        for (int i = 0; i < src->n_ops; i++) {
            const pardo_op *op = &src->ops[i];
            bool kept = b == 0 ? w->keep0[i] : w->keep_sub[b] ? w->keep_sub[b][i] : false;
            if (!kept) continue;
            if (b == 0 && pardo_op_is_parallel_do(op)) {
                int sub = (int)pardo_attr(op, "block")->number;
                if ((rc = copy_parallel_do(op, &w->sub_read[sub], &w->sub_out[sub], &q->blocks[0], st)) != PARDO_OK)
                    return rc;
            } else if (!pardo_block_add_op_copy(&q->blocks[b], op, st)) {
                return st->code;
            }
        }
    }
    return PARDO_OK;
}

int pardo_pass_prune(const pardo_program *p, const char *const *fetch, int n_fetch, bool keep_updates,
                     pardo_program **out, pardo_status *st) {
    *out = NULL;
    /* a fetched gradient or updated param asks for the updates */
    for (int i = 0; !keep_updates && i < p->blocks[0].n_ops; i++)
        for (int f = 0; f < n_fetch && !keep_updates; f++)
            keep_updates = role_dropped(p, 0, &p->blocks[0].ops[i], false) &&
                           pardo_op_writes(&p->blocks[0].ops[i], fetch[f]) > 0;
    if (n_fetch == 0 && keep_updates) {
        if (!(*out = pardo_program_clone(p))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        return PARDO_OK;
    }
    int nb = p->n_blocks;
    prune_work w = {0};
    pardo_name_index_init(&w.need0);
    w.keep0 = calloc((size_t)p->blocks[0].n_ops + 1, sizeof(bool));
    w.keep_sub = calloc((size_t)nb, sizeof(*w.keep_sub));
    w.sub_read = calloc((size_t)nb, sizeof(*w.sub_read));
    w.sub_out = calloc((size_t)nb, sizeof(*w.sub_out));
    pardo_program *q = NULL;
    int rc = w.keep0 && w.keep_sub && w.sub_read && w.sub_out ? PARDO_OK
                                                              : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int b = 0; rc == PARDO_OK && b < nb; b++) {
        pardo_name_index_init(&w.sub_read[b]);
        pardo_name_index_init(&w.sub_out[b]);
    }
    if (rc == PARDO_OK) rc = plan(p, fetch, n_fetch, keep_updates, &w, st);
    if (rc == PARDO_OK && !(q = pardo_program_new())) rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    if (rc == PARDO_OK) rc = build(p, &w, q, st);
    if (rc == PARDO_OK) {
        pardo_pass_options opt = pardo_pass_defaults();
        if ((rc = pardo_pass_check(q, &opt, st)) != PARDO_OK)
            pardo_status_prefix(st, "%s: cut to the ops the fetched vars need: ", p->path ? p->path : "graph");
    }
    for (int b = 0; b < nb && w.keep_sub; b++) free(w.keep_sub[b]);
    for (int b = 0; b < nb && w.sub_read && w.sub_out; b++) {
        pardo_name_index_free(&w.sub_read[b]);
        pardo_name_index_free(&w.sub_out[b]);
    }
    pardo_name_index_free(&w.need0);
    free(w.keep0);
    free(w.keep_sub);
    free(w.sub_read);
    free(w.sub_out);
    if (rc != PARDO_OK) {
        pardo_program_free(q);
        return rc;
    }
    *out = q;
    return PARDO_OK;
}
