/* ranks.c - the rewrite for the ranks of an MPI job (pardo_pass_ranks,
 * pass.h): one rank_merge op before block 0's first update, averaging
 * every gradient the updates read over the ranks, weighted by each rank's
 * rows. A pass that names the one op type it adds. */
#include <stdlib.h>
#include <string.h>

#include "pass.h"

/* True when v is a gradient an update reads: a tensor that no param, state, feed or constant is. */
static bool is_gradient(const pardo_graph_var *v) {
    return v && v->kind == PARDO_VAR_TENSOR && v->role == PARDO_VAR_TEMP && !v->value;
}

static bool is_update(const pardo_program *p, const pardo_op *op) {
    return pardo_op_effective_role(p, 0, op) == PARDO_OP_OPTIMIZE;
}

/* Whether update u may run after op j instead of before it: j neither reads nor writes what u writes, nor
 * writes what u reads. PARDO_EINVAL naming both otherwise. */
static int may_follow(const pardo_program *p, const pardo_op *u, int ui, const pardo_op *j, int ji, pardo_status *st) {
    for (int k = 0; k < u->n_out; k++)
        if (u->out[k][0] && (pardo_op_reads(j, u->out[k]) || pardo_op_writes(j, u->out[k])))
            return pardo_errorf(st, PARDO_EINVAL,
                                "%s: the ranks' gradients are averaged before the updates, but op %d (%s) updates "
                                "'%s' before op %d (%s) uses it",
                                p->path ? p->path : "graph", ui, u->type, u->out[k], ji, j->type);
    for (int k = 0; k < u->n_in; k++)
        if (u->in[k][0] && pardo_op_writes(j, u->in[k]))
            return pardo_errorf(st, PARDO_EINVAL,
                                "%s: the ranks' gradients are averaged before the updates, but op %d (%s) reads "
                                "'%s' before op %d (%s) writes it",
                                p->path ? p->path : "graph", ui, u->type, u->in[k], ji, j->type);
    return PARDO_OK;
}

/* Moves the updates among ops [first, last] after the others (each group in its order), as a graph whose updates
 * follow their gradients at once (--no-parallel) must be for one rank_merge before them; refused when an update
 * cannot move past an op. */
static int updates_after(pardo_program *p, int first, int last, pardo_status *st) {
    pardo_block *blk = &p->blocks[0];
    for (int u = first; u <= last; u++) {
        if (!is_update(p, &blk->ops[u])) continue;
        for (int j = u + 1; j <= last; j++)
            if (!is_update(p, &blk->ops[j]) && may_follow(p, &blk->ops[u], u, &blk->ops[j], j, st) != PARDO_OK)
                return st->code;
    }
    const int n = last - first + 1;
    pardo_op *tmp = malloc((size_t)n * sizeof(*tmp));
    if (!tmp) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    int k = 0;
    for (int pass = 0; pass < 2; pass++) /* the others, then the updates */
        for (int i = first; i <= last; i++)
            if (is_update(p, &blk->ops[i]) == (pass == 1)) tmp[k++] = blk->ops[i];
    memcpy(&blk->ops[first], tmp, (size_t)n * sizeof(*tmp));
    free(tmp);
    return PARDO_OK;
}

int pardo_pass_ranks(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    pardo_block *blk = &p->blocks[0];
    int first_update = -1;
    for (int i = 0; i < blk->n_ops && first_update < 0; i++)
        if (is_update(p, &blk->ops[i])) first_update = i;
    if (first_update < 0) return PARDO_OK; /* nothing is updated: nothing to average */
    /* the gradients: the temps the updates read, each with its last writer before that update that is not one */
    int n_grads = 0, cap = 0, last_writer = -1;
    struct grad {
        const char *name;
        int writer;
    } *grads = NULL;
    int rc = PARDO_OK;
    for (int u = first_update; u < blk->n_ops && rc == PARDO_OK; u++) {
        const pardo_op *op = &blk->ops[u];
        if (!is_update(p, op)) continue;
        for (int k = 0; k < op->n_in && rc == PARDO_OK; k++) {
            const char *name = op->in[k];
            if (!name[0] || !is_gradient(pardo_block_find_var(blk, name))) continue;
            int writer = -1;
            for (int i = u - 1; i >= 0 && writer < 0; i--)
                if (!is_update(p, &blk->ops[i]) && pardo_op_writes(&blk->ops[i], name)) writer = i;
            bool seen = false;
            for (int g = 0; g < n_grads && !seen; g++) seen = strcmp(grads[g].name, name) == 0;
            if (writer < 0 || seen) continue;
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
            if (writer > last_writer) last_writer = writer;
        }
    }
    /* an update before the last gradient's writer moves after it (names stay: ops are moved, not copied) */
    if (rc == PARDO_OK && last_writer > first_update) {
        rc = updates_after(p, first_update, last_writer, st);
        for (int g = 0; rc == PARDO_OK && g < n_grads; g++) /* the writers' new places, for the order below */
            for (int i = grads[g].writer; i >= 0; i--)
                if (pardo_op_writes(&blk->ops[i], grads[g].name) && !is_update(p, &blk->ops[i])) {
                    grads[g].writer = i;
                    break;
                }
        first_update = -1;
        for (int i = 0; i < blk->n_ops && first_update < 0; i++)
            if (is_update(p, &blk->ops[i])) first_update = i;
    }
    /* the batch: the first feed an op before the updates reads */
    const char *rows = NULL;
    for (int i = 0; i < first_update && !rows; i++) {
        const pardo_op *op = &blk->ops[i];
        for (int k = 0; k < op->n_in && !rows; k++) {
            const pardo_graph_var *v = op->in[k][0] ? pardo_block_find_var(blk, op->in[k]) : NULL;
            if (v && v->role == PARDO_VAR_FEED) rows = v->name;
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
    if (rc != PARDO_OK) return rc;
    return n_grads > 0 ? pardo_pass_check(p, opt, st) : PARDO_OK;
}
