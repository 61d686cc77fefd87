/* graph_equal.c - structural equality of programs (see pardo_program_equal
 * in graph_json.h), the check behind graph-file round trips. */
#include <math.h>
#include <string.h>

#include "io/graph_json.h"

/* Same double: NaN equals NaN, -0 differs from 0. */
static bool same_double(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

static bool same_str(const char *a, const char *b) {
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

static bool same_value(const pardo_value *a, const pardo_value *b) {
    if (!a || !b) return a == b;
    return pardo_value_equal(a, b);
}

/* Inits are equal in the fields their fill uses (the file holds only those). */
static bool same_init(const pardo_init *a, const pardo_init *b) {
    if (a->fill != b->fill || a->seed != b->seed) return false;
    switch (a->fill) {
    case PARDO_FILL_CONSTANT: return same_double(a->value, b->value);
    case PARDO_FILL_UNIFORM: return same_double(a->low, b->low) && same_double(a->high, b->high);
    case PARDO_FILL_NORMAL: return same_double(a->mean, b->mean) && same_double(a->std, b->std);
    default: return true;
    }
}

static bool same_var(const pardo_graph_var *a, const pardo_graph_var *b) {
    if (!same_str(a->name, b->name) || a->declared != b->declared || a->kind != b->kind || a->role != b->role)
        return false;
    if (a->type.dtype != b->type.dtype || a->type.ndim != b->type.ndim) return false;
    for (int d = 0; d < a->type.ndim && d < PARDO_MAX_DIMS; d++)
        if (a->type.shape[d] != b->type.shape[d]) return false;
    if (!same_init(&a->init, &b->init)) return false;
    if (!a->value || !b->value) return a->value == b->value;
    if (a->n_value != b->n_value) return false;
    for (int64_t i = 0; i < a->n_value; i++)
        if (!same_double(a->value[i], b->value[i])) return false;
    return true;
}

static bool same_names(char *const *a, int na, char *const *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (!same_str(a[i], b[i])) return false;
    return true;
}

static bool same_op(const pardo_op *a, const pardo_op *b) {
    return same_str(a->type, b->type) && same_str(a->name, b->name) && a->role == b->role &&
           same_names(a->in, a->n_in, b->in, b->n_in) && same_names(a->out, a->n_out, b->out, b->n_out) &&
           same_value(a->attrs, b->attrs);
}

bool pardo_program_equal(const pardo_program *a, const pardo_program *b) {
    if (!a || !b) return a == b;
    if (a->version != b->version || !same_str(a->name, b->name) || !same_value(a->doc, b->doc) ||
        a->n_blocks != b->n_blocks)
        return false;
    for (int k = 0; k < a->n_blocks; k++) {
        const pardo_block *x = &a->blocks[k], *y = &b->blocks[k];
        if (x->parent != y->parent || x->n_vars != y->n_vars || x->n_ops != y->n_ops) return false;
        for (int i = 0; i < x->n_vars; i++)
            if (!same_var(&x->vars[i], &y->vars[i])) return false;
        for (int i = 0; i < x->n_ops; i++)
            if (!same_op(&x->ops[i], &y->ops[i])) return false;
    }
    return true;
}
