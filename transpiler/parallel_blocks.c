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

bool pardo_op_is_control(const pardo_op *op) {
    return strcmp(op->type, "if") == 0 || strcmp(op->type, "loop") == 0 || strcmp(op->type, "scan") == 0;
}

int pardo_control_blocks(const pardo_op *op, int blocks[2]) {
    if (!pardo_op_is_control(op)) return 0;
    const bool is_if = strcmp(op->type, "if") == 0;
    const char *keys[2] = {is_if ? "then_block" : "body", "else_block"};
    int n = 0;
    for (int k = 0; k < (is_if ? 2 : 1); k++) {
        const pardo_value *v = pardo_value_get(op->attrs, keys[k]);
        if (!v || !pardo_value_is_integer(v) || v->number < 0 || v->number > 1 << 30) return 0;
        blocks[n++] = (int)v->number;
    }
    return n;
}

bool pardo_block_control_runner(const pardo_program *p, int sub, int *rb, int *ri) {
    if (sub < 1 || sub >= p->n_blocks) return false;
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++) {
            int blocks[2], n = pardo_control_blocks(&p->blocks[b].ops[i], blocks);
            for (int k = 0; k < n; k++)
                if (blocks[k] == sub && p->blocks[sub].parent == b) {
                    *rb = b;
                    *ri = i;
                    return true;
                }
        }
    return false;
}
