/* fusion_plan.c - matmul -> add [-> relu] chains (see fusion_plan.h). */
#include "fusion_plan.h"

#include <string.h>

#include "value.h"

static bool value_names(const pardo_value *v, const char *name) {
    if (!v) return false;
    switch (v->kind) {
    case PARDO_V_STRING: return strcmp(v->string, name) == 0;
    case PARDO_V_ARRAY:
    case PARDO_V_OBJECT:
        for (int i = 0; i < v->n; i++)
            if (value_names(&v->items[i], name)) return true;
        return false;
    default: return false;
    }
}

static int count_in(char *const *names, int n, const char *name) {
    int c = 0;
    for (int k = 0; k < n; k++) c += names[k][0] && strcmp(names[k], name) == 0;
    return c;
}

/* True when the var `name` of block b is a temporary that exactly one op
 * (block b's `writer`) writes and exactly one (`reader`, once) reads, that
 * no attr names, and that the caller does not keep. */
static bool private_temp(const pardo_program *p, int b, const char *name, int writer, int reader,
                         const char *const *keep, int n_keep) {
    int owner = -1;
    const pardo_var *v = pardo_program_lookup_var(p, b, name, &owner);
    if (!v || owner != b || v->role != PARDO_VAR_TEMP || v->kind != PARDO_VAR_TENSOR || v->value) return false;
    for (int k = 0; k < n_keep; k++)
        if (keep[k] && strcmp(keep[k], name) == 0) return false;
    for (int bb = 0; bb < p->n_blocks; bb++)
        for (int i = 0; i < p->blocks[bb].n_ops; i++) {
            const pardo_op *op = &p->blocks[bb].ops[i];
            int reads = count_in(op->in, op->n_in, name), writes = count_in(op->out, op->n_out, name);
            bool mine = bb == b && (i == writer || i == reader);
            if (mine ? (reads != (i == reader) || writes != (i == writer)) : (reads || writes)) return false;
            if (value_names(op->attrs, name)) return false;
        }
    return true;
}

void pardo_fusion_plan(const pardo_program *p, int b, const char *const *keep, int n_keep, pardo_fusion *fuse) {
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++) fuse[i] = (pardo_fusion){0, 0};
    for (int i = 0; i + 1 < blk->n_ops; i++) {
        const pardo_op *mm = &blk->ops[i], *add = &blk->ops[i + 1];
        if (strcmp(mm->type, "matmul") || mm->n_in != 2 || mm->n_out != 1 || strcmp(add->type, "add") ||
            add->n_in != 2 || add->n_out != 1)
            continue;
        const char *h = mm->out[0];
        int at = strcmp(add->in[0], h) == 0 ? 0 : strcmp(add->in[1], h) == 0 ? 1 : -1;
        if (at < 0 || strcmp(add->in[1 - at], h) == 0 || !private_temp(p, b, h, i, i + 1, keep, n_keep)) continue;
        /* the bias and the result must not be the product's inputs (the fused kernel reads A and B to the end) */
        const char *bias = add->in[1 - at], *z = add->out[0];
        if (!bias[0] || count_in(mm->in, 2, z) || strcmp(bias, z) == 0) continue;
        fuse[i] = (pardo_fusion){1, 1 - at};
        if (i + 2 < blk->n_ops) {
            const pardo_op *relu = &blk->ops[i + 2];
            if (strcmp(relu->type, "relu") == 0 && relu->n_in == 1 && relu->n_out == 1 &&
                strcmp(relu->in[0], z) == 0 && !count_in(mm->in, 2, relu->out[0]) &&
                strcmp(relu->out[0], bias) != 0 && private_temp(p, b, z, i + 1, i + 2, keep, n_keep))
                fuse[i].len = 2;
        }
        i += fuse[i].len;
    }
}
