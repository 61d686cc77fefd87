/* fusion_plan.c - matmul -> add [-> relu], matmul_grad -> relu_grad
 * [-> add_grad] and merge -> update chains (see fusion_plan.h). */
#include "exec/fusion_plan.h"

#include <string.h>

#include "pass.h"
#include "core/value.h"

/* True when the parallel_do that runs block b binds `name` to a part
 * (a key of its parts_in or parts_out: keys there are that block's vars). */
static bool binds_part(const pardo_program *p, int b, const char *name) {
    int rb, ri;
    if (!pardo_block_runner(p, b, &rb, &ri)) return false;
    const pardo_value *attrs = p->blocks[rb].ops[ri].attrs;
    return pardo_value_get(pardo_value_get(attrs, "parts_in"), name) ||
           pardo_value_get(pardo_value_get(attrs, "parts_out"), name);
}

/* True when the var `name` of block b is a temporary that exactly one op
 * (block b's `writer`) writes and exactly one (`reader`, once) reads, that
 * no attr value names, that no parallel_do binds to a part (parts_in,
 * parts_out), and that the caller does not keep. Ops of a block where the
 * name means a var of its own (a child block's `w@GRAD`) do not count. */
static bool private_temp(const pardo_program *p, int b, const char *name, int writer, int reader,
                         const char *const *keep, int n_keep) {
    int owner = -1;
    const pardo_var *v = pardo_program_lookup_var(p, b, name, &owner);
    if (!v || owner != b || v->role != PARDO_VAR_TEMP || v->kind != PARDO_VAR_TENSOR || v->value) return false;
    if (pardo_name_listed(keep, n_keep, name) || binds_part(p, b, name)) return false;
    for (int bb = 0; bb < p->n_blocks; bb++) {
        int seen_as = -1; /* another block's ops name our var only where the name resolves to it there */
        if (bb != b && (!pardo_program_lookup_var(p, bb, name, &seen_as) || seen_as != b)) continue;
        for (int i = 0; i < p->blocks[bb].n_ops; i++) {
            const pardo_op *op = &p->blocks[bb].ops[i];
            int reads = pardo_op_reads(op, name), writes = pardo_op_writes(op, name);
            bool mine = bb == b && (i == writer || i == reader);
            if (mine ? (reads != (i == reader) || writes != (i == writer)) : (reads || writes)) return false;
            if (pardo_value_names(op->attrs, name)) return false;
        }
    }
    return true;
}

static bool is_update(const char *type) {
    return strcmp(type, "sgd") == 0 || strcmp(type, "momentum") == 0 || strcmp(type, "adam") == 0;
}

/* merge -> update: a merge whose output only an optimizer update reads, as
 * its gradient (input 1), and that nothing else can see. */
static void plan_merge_updates(const pardo_program *p, int b, const char *const *keep, int n_keep,
                               pardo_fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++) {
        const pardo_op *m = &blk->ops[i];
        const pardo_value *mode = m->attrs ? pardo_value_get(m->attrs, "mode") : NULL;
        if (strcmp(m->type, "merge") || m->n_out != 1 || !m->out[0][0] ||
            (mode && mode->kind == PARDO_V_STRING && strcmp(mode->string, "concat") == 0))
            continue;
        const char *g = m->out[0];
        for (int j = i + 1; j < blk->n_ops; j++) {
            const pardo_op *u = &blk->ops[j];
            if (!pardo_op_reads(u, g)) continue;
            /* the first reader: an update taking g as its gradient, and nothing else reads or writes g */
            if (is_update(u->type) && u->n_in > 1 && strcmp(u->in[1], g) == 0 && pardo_op_reads(u, g) == 1 &&
                private_temp(p, b, g, i, j, keep, n_keep)) {
                fuse[i].update = j + 1;
                fuse[j].merge = i + 1;
            }
            break;
        }
    }
}

/* The first op after index `from` of block b that reads `name`, if it
 * shares no var one of them writes with any op between `from` and it (but
 * those listed in `moved`, which run before it anyway): it can then run
 * right after op `from`. -1 otherwise. */
static int hoistable_reader(const pardo_block *blk, int from, const char *name, const int *moved, int n_moved) {
    for (int j = from + 1; j < blk->n_ops; j++) {
        if (!pardo_op_reads(&blk->ops[j], name)) continue;
        for (int x = from + 1; x < j; x++) {
            bool skip = false;
            for (int m = 0; m < n_moved; m++) skip |= moved[m] == x;
            if (!skip && pardo_ops_conflict(&blk->ops[x], &blk->ops[j])) return -1;
        }
        return j;
    }
    return -1;
}

/* matmul_grad at index i -> relu_grad [-> add_grad]: relu_grad reads
 * matmul_grad's dA as its dY and nothing else does; add_grad takes
 * relu_grad's output (read by nobody else) as its dC, one of its operands
 * is left out (its gradient is dC itself: the fused dA goes there) and the
 * other is the bias. Ops between them stay where they are if they share no
 * var one of them writes with the ops moved up. Fills f (len 0: none). */
static void plan_grad_chain(const pardo_program *p, int b, int i, const char *const *keep, int n_keep,
                            pardo_fusion *f) {
    const pardo_block *blk = &p->blocks[b];
    const pardo_op *g = &blk->ops[i];
    if (strcmp(g->type, "matmul_grad") || g->n_out < 1 || !g->out[0][0]) return;
    const char *d = g->out[0];
    const int ri = hoistable_reader(blk, i, d, NULL, 0);
    if (ri < 0) return;
    const pardo_op *r = &blk->ops[ri];
    if (strcmp(r->type, "relu_grad") || r->n_in < 3 || r->n_out != 1 || !r->out[0][0]) return;
    const char *y = r->in[1], *z = r->out[0];
    if (strcmp(r->in[2], d) || !y[0] || pardo_op_writes(g, y) || pardo_op_reads(g, z) || strcmp(z, y) == 0 ||
        !private_temp(p, b, d, i, ri, keep, n_keep))
        return;
    f->len = 1;
    f->follow[0] = ri;
    const int moved[1] = {ri}, ai = hoistable_reader(blk, i, z, moved, 1);
    if (ai < 0) return;
    const pardo_op *a = &blk->ops[ai];
    if (strcmp(a->type, "add_grad") || a->n_in != 4 || a->n_out != 2 || strcmp(a->in[3], z) ||
        !a->in[0][0] == !a->in[1][0] || strcmp(a->in[2], z) == 0)
        return;
    const int fill = a->in[0][0] ? 1 : 0; /* the left-out operand: its gradient is dC */
    const char *h = a->out[fill], *db = a->out[1 - fill];
    if (!h[0] || pardo_op_reads(g, h) || strcmp(h, y) == 0 || pardo_op_reads(g, db) || strcmp(db, y) == 0 ||
        strcmp(h, db) == 0 || !private_temp(p, b, z, ri, ai, keep, n_keep))
        return;
    f->len = 2;
    f->follow[1] = ai;
    f->bias = 1 - fill;
}

void pardo_fusion_plan(const pardo_program *p, int b, const char *const *keep, int n_keep, pardo_fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++) fuse[i] = (pardo_fusion){0};
    plan_merge_updates(p, b, keep, n_keep, fuse);
    for (int i = 0; i + 1 < blk->n_ops; i++) {
        const pardo_op *mm = &blk->ops[i], *add = &blk->ops[i + 1];
        if (strcmp(mm->type, "matmul_grad") == 0) {
            plan_grad_chain(p, b, i, keep, n_keep, &fuse[i]);
            continue;
        }
        if (strcmp(mm->type, "matmul") || mm->n_in != 2 || mm->n_out != 1 || strcmp(add->type, "add") ||
            add->n_in != 2 || add->n_out != 1)
            continue;
        const char *h = mm->out[0];
        int at = strcmp(add->in[0], h) == 0 ? 0 : strcmp(add->in[1], h) == 0 ? 1 : -1;
        if (at < 0 || strcmp(add->in[1 - at], h) == 0 || !private_temp(p, b, h, i, i + 1, keep, n_keep)) continue;
        /* the bias and the result must not be the product's inputs (the fused kernel reads A and B to the end) */
        const char *bias = add->in[1 - at], *z = add->out[0];
        if (!bias[0] || pardo_op_reads(mm, z) || strcmp(bias, z) == 0) continue;
        fuse[i].len = 1;
        fuse[i].follow[0] = i + 1;
        fuse[i].bias = 1 - at;
        if (i + 2 < blk->n_ops) {
            const pardo_op *relu = &blk->ops[i + 2];
            if (strcmp(relu->type, "relu") == 0 && relu->n_in == 1 && relu->n_out == 1 &&
                strcmp(relu->in[0], z) == 0 && !pardo_op_reads(mm, relu->out[0]) &&
                strcmp(relu->out[0], bias) != 0 && private_temp(p, b, z, i + 1, i + 2, keep, n_keep))
                fuse[i].len = 2, fuse[i].follow[1] = i + 2;
        }
        i += fuse[i].len;
    }
}
