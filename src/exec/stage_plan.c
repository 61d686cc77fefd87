/* stage_plan.c - independent chains among a block's merge and optimize ops
 * (see stage_plan.h). */
#include "exec/stage_plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"
#include "core/value.h"

static bool stageable(const pardo_op *op) {
    return op->role == PARDO_OP_OPTIMIZE || strcmp(op->type, "merge") == 0;
}

static int find(int *parent, int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

/* Raises *need to past the last op of the part block that names `name`
 * (last: its pardo_block_last_uses). */
static void need_past(const pardo_name_index *last_use, const char *name, int *need) {
    int last = pardo_name_index_get(last_use, name);
    if (last + 1 > *need) *need = last + 1;
}

/* The part var a parallel_do's parts_out publishes as its output `array`, or NULL. */
static const char *part_var_of(const pardo_value *parts_out, const char *array) {
    for (int k = 0; parts_out && k < parts_out->n; k++)
        if (parts_out->items[k].kind == PARDO_V_STRING && strcmp(parts_out->items[k].string, array) == 0)
            return parts_out->keys[k];
    return NULL;
}

/* Fills plan->early_pd and early_need for the first stage of block b that
 * starts right after a parallel_do (see stage_plan.h). */
static int plan_early(const pardo_program *p, int b, pardo_stage_plan *plan, pardo_status *st) {
    const pardo_block *blk = &p->blocks[b];
    plan->early_pd = -1;
    int a = 1;
    /* a stage of one chain runs as plain ops (the executor's block loop), where nothing is passed over */
    while (a < blk->n_ops && !(plan->n_chains[a] > 1 && strcmp(blk->ops[a - 1].type, "parallel_do") == 0)) a++;
    if (a >= blk->n_ops) return PARDO_OK;
    const pardo_op *pd = &blk->ops[a - 1];
    int64_t pbi;
    pardo_status ignored;
    if (pardo_attr_int(pd, "block", -1, &pbi, &ignored) != PARDO_OK || pbi <= 0 || pbi >= p->n_blocks)
        return PARDO_OK;
    const pardo_block *pb = &p->blocks[pbi];
    for (int i = 0; i < pb->n_ops; i++) /* a part that runs blocks of its own names vars out of sight */
        if (pardo_attr(&pb->ops[i], "block")) return PARDO_OK;
    const pardo_value *parts_out = pardo_attr(pd, "parts_out");
    const int n = plan->n_chains[a], end = plan->stage_end[a];
    pardo_name_index last_use = {0};
    if (!(plan->early_need = malloc((size_t)n * sizeof(int))) || pardo_block_last_uses(pb, &last_use, st) != PARDO_OK) {
        pardo_name_index_free(&last_use);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning block %d", b);
    }
    for (int c = 0; c < n; c++) plan->early_need[c] = 0;
    for (int i = a; i < end; i++) {
        const pardo_op *op = &blk->ops[i];
        int *need = &plan->early_need[plan->chain[i]];
        for (int k = 0; k < op->n_in; k++) {
            if (!op->in[k][0] || !pardo_op_writes(pd, op->in[k])) continue; /* written before the parts: there */
            const char *pv = part_var_of(parts_out, op->in[k]);
            if (!pv || pardo_name_index_get(&last_use, pv) < 0) *need = INT_MAX; /* published when its part ends */
            else if (*need != INT_MAX) need_past(&last_use, pv, need);
        }
        for (int k = 0; k < op->n_out; k++) /* what the chain writes, no part may still read */
            if (op->out[k][0] && *need != INT_MAX) need_past(&last_use, op->out[k], need);
    }
    pardo_name_index_free(&last_use);
    plan->early_pd = a - 1;
    return PARDO_OK;
}

int pardo_stage_plan_build(const pardo_program *p, int b, pardo_stage_plan *plan, pardo_status *st) {
    const pardo_block *blk = &p->blocks[b];
    int n = blk->n_ops;
    memset(plan, 0, sizeof(*plan));
    plan->early_pd = -1;
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
    if (plan_early(p, b, plan, st) != PARDO_OK) {
        pardo_stage_plan_clear(plan);
        return st->code;
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
    free(plan->early_need);
    memset(plan, 0, sizeof(*plan));
    plan->early_pd = -1;
}
