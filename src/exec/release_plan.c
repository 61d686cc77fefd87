/* release_plan.c - block 0's temporaries and the op after which each is
 * dead (see release_plan.h). */
#include "exec/release_plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"

/* One var's uses in block 0: the first op that touches it (and whether it
 * writes there) and the last (and whether it only reads there). */
typedef struct use {
    const char *name; // borrowed from an op
    int first, last;
    bool first_writes, last_writes;
} use;

typedef struct uses {
    use *v;
    int n, cap;
    pardo_name_index ix; // name -> index in v
} uses;

static use *find_use(uses *u, const char *name) {
    int i = pardo_name_index_get(&u->ix, name);
    return i >= 0 ? &u->v[i] : NULL;
}

/* Records that op i reads (writes false) or writes name. -1 out of memory. */
static int note(uses *u, const char *name, int i, bool writes) {
    if (!name || !name[0]) return 0;
    use *x = find_use(u, name);
    if (!x) {
        if (u->n == u->cap) {
            int cap = u->cap ? u->cap * 2 : 64;
            use *v = realloc(u->v, sizeof(*v) * (size_t)cap);
            if (!v) return -1;
            u->v = v;
            u->cap = cap;
        }
        pardo_status st;
        if (pardo_name_index_set(&u->ix, name, u->n, &st) != PARDO_OK) return -1;
        x = &u->v[u->n++];
        *x = (use){name, i, i, writes, writes};
        return 0;
    }
    if (x->first == i) x->first_writes = x->first_writes && writes; /* read and written by its first op: not fresh */
    if (x->last < i) {
        x->last = i;
        x->last_writes = writes;
    } else if (x->last == i) {
        x->last_writes = x->last_writes || writes;
    }
    return 0;
}

int pardo_release_plan_build(const pardo_program *p, const char *const *keep, int n_keep, pardo_release_plan *plan,
                             pardo_status *st) {
    memset(plan, 0, sizeof(*plan));
    const pardo_block *b0 = &p->blocks[0];
    uses u = {0};
    int rc = 0;
    /* reads before writes within an op: an op that reads and writes a var (in place) reads the old value */
    for (int i = 0; rc == 0 && i < b0->n_ops; i++) {
        const pardo_op *op = &b0->ops[i];
        for (int k = 0; rc == 0 && k < op->n_in; k++) rc = note(&u, op->in[k], i, false);
        for (int k = 0; rc == 0 && k < op->n_out; k++) rc = note(&u, op->out[k], i, true);
    }
    plan->n_ops = b0->n_ops;
    plan->first = calloc((size_t)b0->n_ops + 1, sizeof(int));
    plan->count = calloc((size_t)b0->n_ops + 1, sizeof(int));
    plan->names = calloc((size_t)u.n + 1, sizeof(*plan->names));
    bool *dead = calloc((size_t)u.n + 1, sizeof(bool)); /* a dead var, grouped below by the op it dies after */
    if (rc != 0 || !plan->first || !plan->count || !plan->names || !dead) {
        free(u.v);
        pardo_name_index_free(&u.ix);
        free(dead);
        pardo_release_plan_clear(plan);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory planning block 0's memory");
    }
    for (int v = 0; v < u.n; v++) {
        int owner = -1;
        const pardo_graph_var *var = pardo_program_lookup_var(p, 0, u.v[v].name, &owner);
        /* tensor_arrays stay: split and parallel_do refill their parts in place run after run */
        dead[v] = var && owner == 0 && var->role == PARDO_VAR_TEMP && var->kind == PARDO_VAR_TENSOR && !var->value &&
                  u.v[v].first_writes &&
                  !u.v[v].last_writes && u.v[v].last > u.v[v].first && !pardo_name_listed(keep, n_keep, u.v[v].name);
        if (dead[v]) plan->count[u.v[v].last]++;
    }
    for (int i = 0, at = 0; i < b0->n_ops; i++) {
        plan->first[i] = at;
        at += plan->count[i];
        plan->count[i] = 0;
    }
    for (int v = 0; v < u.n; v++)
        if (dead[v]) {
            int i = u.v[v].last;
            plan->names[plan->first[i] + plan->count[i]++] = u.v[v].name;
        }
    free(dead);
    free(u.v);
    pardo_name_index_free(&u.ix);
    return PARDO_OK;
}

void pardo_release_plan_clear(pardo_release_plan *plan) {
    free(plan->first);
    free(plan->count);
    free((void *)plan->names);
    memset(plan, 0, sizeof(*plan));
}
