/* parallel_blocks.c - which parallel_do runs which block (see pass.h). */
#include <string.h>

#include "pass.h"

bool pardo_op_is_parallel_do(const pardo_op *op) { return strcmp(op->type, "parallel_do") == 0; }

bool pardo_block_runner(const pardo_program *p, int sub, int *rb, int *ri) {
    if (sub < 1 || sub >= p->n_blocks) return false;
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++) {
            const pardo_op *op = &p->blocks[b].ops[i];
            if (!pardo_op_is_parallel_do(op)) continue;
            const pardo_value *v = pardo_value_get(op->attrs, "block");
            if (v && pardo_value_is_integer(v) && v->number == sub && p->blocks[sub].parent == b) {
                *rb = b;
                *ri = i;
                return true;
            }
        }
    return false;
}

bool pardo_block_binds(const pardo_program *p, int b, const char *name) {
    int rb, ri;
    if (!pardo_block_runner(p, b, &rb, &ri)) return false;
    const pardo_value *in = pardo_value_get(p->blocks[rb].ops[ri].attrs, "parts_in");
    return pardo_value_get(in, name) != NULL;
}
