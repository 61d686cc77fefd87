/* ranks.c - the rewrite for the ranks of an MPI job (pardo_pass_ranks,
 * pass.h): one rank_merge op before block 0's first update, averaging
 * every gradient the updates read over the ranks, weighted by each rank's
 * rows. A pass that names the one op type it adds. */
#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"
#include "pass.h"

/* True when v is a gradient an update reads: a tensor that no param, state, feed or constant is. */
static bool is_gradient(const pardo_graph_var *v) {
    return v && v->kind == PARDO_VAR_TENSOR && v->role == PARDO_VAR_TEMP && !v->value;
}

int pardo_pass_ranks(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    pardo_block *blk = &p->blocks[0];
    int first_update = -1;
    for (int i = 0; i < blk->n_ops && first_update < 0; i++)
        if (pardo_op_effective_role(p, 0, &blk->ops[i]) == PARDO_OP_OPTIMIZE) first_update = i;
    if (first_update < 0) return PARDO_OK; /* nothing is updated: nothing to average */
    /* the first writer of every name before the updates, and the batch: the first feed an op reads */
    pardo_name_index written = {0};
    const char *rows = NULL;
    int rc = PARDO_OK;
    for (int i = 0; i < first_update && rc == PARDO_OK; i++) {
        const pardo_op *op = &blk->ops[i];
        for (int k = 0; k < op->n_in && !rows; k++) {
            const pardo_graph_var *v = op->in[k][0] ? pardo_block_find_var(blk, op->in[k]) : NULL;
            if (v && v->role == PARDO_VAR_FEED) rows = v->name;
        }
        for (int k = 0; k < op->n_out && rc == PARDO_OK; k++)
            if (op->out[k][0]) rc = pardo_name_index_add(&written, op->out[k], i, NULL, st);
    }
    /* the gradients, in the order of their writers (the transpiler's order, the same on every rank) */
    int n_grads = 0, cap = 0;
    struct grad {
        const char *name;
        int writer;
    } *grads = NULL;
    for (int i = first_update; i < blk->n_ops && rc == PARDO_OK; i++) {
        const pardo_op *op = &blk->ops[i];
        for (int k = 0; k < op->n_in && rc == PARDO_OK; k++) {
            const char *name = op->in[k];
            int writer = name[0] ? pardo_name_index_get(&written, name) : -1;
            if (writer < 0 || !is_gradient(pardo_block_find_var(blk, name))) continue;
            bool seen = false;
            for (int g = 0; g < n_grads && !seen; g++) seen = strcmp(grads[g].name, name) == 0;
            if (seen) continue;
            if (n_grads == cap) {
                cap = cap ? 2 * cap : 16;
                struct grad *more = realloc(grads, (size_t)cap * sizeof(*grads));
                if (!more) {
                    rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
                    break;
                }
                grads = more;
            }
            grads[n_grads++] = (struct grad){name, writer};
        }
    }
    if (rc == PARDO_OK && n_grads > 0 && !rows)
        rc = pardo_errorf(st, PARDO_EINVAL, "%s: no feed var is read before the updates: the ranks' gradients have "
                          "no rows to be weighed by", p->path ? p->path : "graph");
    for (int a = 1; a < n_grads; a++) /* insertion sort by writer: stable, n small */
        for (int b = a; b > 0 && grads[b - 1].writer > grads[b].writer; b--) {
            struct grad t = grads[b];
            grads[b] = grads[b - 1];
            grads[b - 1] = t;
        }
    if (rc == PARDO_OK && n_grads > 0) {
        /* names copied: adding an op may move the ops that hold them */
        char **names = calloc((size_t)n_grads + 1, sizeof(char *));
        rc = names ? PARDO_OK : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        for (int g = 0; rc == PARDO_OK && g <= n_grads; g++)
            if (!(names[g] = strdup(g == n_grads ? rows : grads[g].name)))
                rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_op *op = rc == PARDO_OK ? pardo_block_add_op(blk, "rank_merge", st) : NULL;
        if (rc == PARDO_OK && !op) rc = st->code;
        if (rc == PARDO_OK && !(op->name = strdup("rank_merge"))) rc = pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        if (rc == PARDO_OK && opt->bucket_mb > 0)
            rc = pardo_op_set_attr(op, "bucket_mb", pardo_value_new_number(opt->bucket_mb), st);
        if (rc == PARDO_OK) {
            op->role = PARDO_OP_BACKWARD;
            rc = pardo_op_add_input(op, names[n_grads], st);
        }
        for (int g = 0; rc == PARDO_OK && g < n_grads; g++)
            if ((rc = pardo_op_add_input(op, names[g], st)) == PARDO_OK) rc = pardo_op_add_output(op, names[g], st);
        if (rc == PARDO_OK) { /* from the end to its place, before the first update */
            pardo_op moved = blk->ops[blk->n_ops - 1];
            memmove(&blk->ops[first_update + 1], &blk->ops[first_update],
                    sizeof(pardo_op) * (size_t)(blk->n_ops - 1 - first_update));
            blk->ops[first_update] = moved;
        }
        for (int g = 0; names && g <= n_grads; g++) free(names[g]);
        free(names);
    }
    free(grads);
    pardo_name_index_free(&written);
    if (rc != PARDO_OK) return rc;
    return n_grads > 0 ? pardo_pass_check(p, opt, st) : PARDO_OK;
}
