/* stage_plan.c - independent chains among a block's merge and optimize ops
 * (see stage_plan.h). */
#include "stage_plan.h"

#include <stdlib.h>
#include <string.h>

static bool stageable(const pardo_op *op) {
    return op->role == PARDO_OP_OPTIMIZE || strcmp(op->type, "merge") == 0;
}

static int find(int *parent, int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

int pardo_stage_plan_build(const pardo_program *p, int b, pardo_stage_plan *plan, pardo_status *st) {
    const pardo_block *blk = &p->blocks[b];
    int n = blk->n_ops;
    memset(plan, 0, sizeof(*plan));
    plan->n_ops = n;
    size_t sz = (size_t)(n > 0 ? n : 1);
    plan->stage_end = malloc(sz * sizeof(int));
    plan->chain = malloc(sz * sizeof(int));
    plan->n_chains = calloc(sz, sizeof(int));
    int *parent = malloc(sz * sizeof(int)), *label = malloc(sz * sizeof(int));
    if (!plan->stage_end || !plan->chain || !plan->n_chains || !parent || !label) {
        free(parent);
        free(label);
        pardo_stage_plan_clear(plan);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning block %d", b);
    }
    for (int i = 0; i < n; i++) {
        plan->stage_end[i] = -1;
        plan->chain[i] = -1;
    }
    for (int a = 0; a < n;) {
        int e = a;
        while (e < n && stageable(&blk->ops[e])) e++;
        if (e - a >= 2) {
            for (int i = a; i < e; i++) parent[i] = i;
            for (int i = a; i < e; i++)
                for (int j = a; j < i; j++)
                    if (pardo_ops_conflict(&blk->ops[j], &blk->ops[i])) parent[find(parent, i)] = find(parent, j);
            int chains = 0;
            for (int i = a; i < e; i++) label[i] = -1;
            for (int i = a; i < e; i++) {
                int r = find(parent, i);
                if (label[r] < 0) label[r] = chains++;
                plan->chain[i] = label[r];
            }
            plan->stage_end[a] = e;
            plan->n_chains[a] = chains;
        }
        a = e > a ? e : a + 1;
    }
    free(parent);
    free(label);
    int widest = 1;
    for (int i = 0; i < n; i++)
        if (plan->n_chains[i] > widest) widest = plan->n_chains[i];
    plan->status = calloc((size_t)widest, sizeof(*plan->status));
    plan->failed_at = calloc((size_t)widest, sizeof(*plan->failed_at));
    plan->elements = calloc((size_t)widest, sizeof(*plan->elements));
    plan->small = calloc((size_t)widest, sizeof(*plan->small));
    if (!plan->status || !plan->failed_at || !plan->elements || !plan->small) {
        pardo_stage_plan_clear(plan);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning block %d", b);
    }
    return PARDO_OK;
}

void pardo_stage_plan_clear(pardo_stage_plan *plan) {
    free(plan->stage_end);
    free(plan->chain);
    free(plan->n_chains);
    free(plan->status);
    free(plan->failed_at);
    free(plan->elements);
    free(plan->small);
    memset(plan, 0, sizeof(*plan));
}
