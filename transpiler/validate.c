/* validate.c - structural checks of a loaded program against the op
 * registry (see pass.h). */
#include <stdio.h>
#include <string.h>

#include "op.h"
#include "pass.h"

/* Prefixes st with the op's place and returns its code. */
static int op_error(const pardo_program *p, int b, int i, pardo_status *st) {
    char where[512];
    pardo_op_where(p, b, i, where, sizeof where);
    return pardo_status_prefix(st, "%s: ", where);
}

static bool attr_type_ok(const pardo_value *v, pardo_attr_type t) {
    switch (t) {
    case PARDO_ATTR_INT: return pardo_value_is_integer(v) || v->kind == PARDO_V_BOOL;
    case PARDO_ATTR_FLOAT: return v->kind == PARDO_V_NUMBER;
    case PARDO_ATTR_BOOL: return v->kind == PARDO_V_BOOL || (pardo_value_is_integer(v) && (v->number == 0 || v->number == 1));
    case PARDO_ATTR_STRING: return v->kind == PARDO_V_STRING;
    case PARDO_ATTR_INTS:
        if (pardo_value_is_integer(v)) return true;
        if (v->kind != PARDO_V_ARRAY) return false;
        for (int i = 0; i < v->n; i++)
            if (!pardo_value_is_integer(&v->items[i])) return false;
        return true;
    case PARDO_ATTR_FLOATS:
        if (v->kind == PARDO_V_NUMBER) return true;
        if (v->kind != PARDO_V_ARRAY) return false;
        for (int i = 0; i < v->n; i++)
            if (v->items[i].kind != PARDO_V_NUMBER) return false;
        return true;
    case PARDO_ATTR_OBJECT: return v->kind == PARDO_V_OBJECT;
    case PARDO_ATTR_ANY: return true;
    }
    return false;
}

static const char *attr_type_name(pardo_attr_type t) {
    static const char *const names[] = {"an integer", "a number", "true or false", "a string",
                                        "a list of integers", "a list of numbers", "an object", "any value"};
    return (t >= 0 && t <= PARDO_ATTR_ANY) ? names[t] : "?";
}

static int check_attrs(const pardo_op *op, pardo_status *st) {
    const pardo_op_def *d = op->def;
    if (op->attrs && op->attrs->kind != PARDO_V_OBJECT) return pardo_errorf(st, PARDO_EINVAL, "attrs must be an object");
    for (int a = 0; op->attrs && a < op->attrs->n; a++) {
        const char *key = op->attrs->keys[a];
        const pardo_attr_def *ad = NULL;
        for (int k = 0; k < d->n_attrs; k++)
            if (strcmp(d->attrs[k].name, key) == 0) ad = &d->attrs[k];
        if (!ad) {
            char known[512] = "none";
            size_t used = 0;
            for (int k = 0; k < d->n_attrs && used < sizeof known; k++) {
                int w = snprintf(known + used, sizeof known - used, "%s%s", k ? ", " : "", d->attrs[k].name);
                if (w > 0) used += (size_t)w;
            }
            return pardo_errorf(st, PARDO_EINVAL, "unknown attr '%s' (%s takes: %s)", key, d->type, known);
        }
        if (!attr_type_ok(&op->attrs->items[a], ad->type))
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is a %s, expected %s", key,
                                pardo_value_kind_name(op->attrs->items[a].kind), attr_type_name(ad->type));
    }
    for (int k = 0; k < d->n_attrs; k++)
        if (!d->attrs[k].dflt && !pardo_value_get(op->attrs, d->attrs[k].name))
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is required (%s)", d->attrs[k].name,
                                d->attrs[k].doc ? d->attrs[k].doc : attr_type_name(d->attrs[k].type));
    return PARDO_OK;
}

static int check_arity(const pardo_op *op, pardo_status *st) {
    const pardo_op_def *d = op->def;
    int required = 0;
    bool variadic = d->n_inputs > 0 && d->inputs[d->n_inputs - 1].variadic;
    for (int k = 0; k < d->n_inputs; k++)
        if (!d->inputs[k].optional) required = k + 1;
    if (op->n_in < required || (!variadic && op->n_in > d->n_inputs)) {
        if (variadic) return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected at least %d", op->n_in, required);
        if (required == d->n_inputs)
            return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected %d", op->n_in, required);
        return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected %d to %d", op->n_in, required, d->n_inputs);
    }
    for (int k = 0; k < op->n_in; k++) {
        int slot = k < d->n_inputs ? k : d->n_inputs - 1;
        if (op->in[k][0] == '\0' && !d->inputs[slot].optional)
            return pardo_errorf(st, PARDO_EINVAL, "input %d '%s' is required but given as \"\"", k, d->inputs[slot].name);
    }
    int out_required = 0;
    bool out_variadic = d->n_outputs > 0 && d->outputs[d->n_outputs - 1].variadic; /* concat_grad */
    for (int k = 0; k < d->n_outputs; k++)
        if (!d->outputs[k].optional) out_required = k + 1;
    if (op->n_out < out_required || (!out_variadic && op->n_out > d->n_outputs)) {
        if (out_variadic)
            return pardo_errorf(st, PARDO_EINVAL, "has %d outputs, expected at least %d", op->n_out, out_required);
        return pardo_errorf(st, PARDO_EINVAL, "has %d outputs, expected %d", op->n_out, d->n_outputs);
    }
    for (int k = 0; k < op->n_out; k++) {
        int slot = k < d->n_outputs ? k : d->n_outputs - 1;
        if (op->out[k][0] == '\0' && !d->outputs[slot].optional)
            return pardo_errorf(st, PARDO_EINVAL, "output %d '%s' is required but given as \"\"", k,
                                d->outputs[slot].name);
    }
    return PARDO_OK;
}

/* A var can be read when it has a value without any op: feeds, params and
 * state, and vars with a constant value. */
static bool var_is_source(const pardo_var *v) {
    return v->role == PARDO_VAR_FEED || v->role == PARDO_VAR_PARAM || v->role == PARDO_VAR_STATE || v->value != NULL;
}

static bool block_writes(const pardo_block *blk, int limit, const char *name) {
    for (int i = 0; i < limit; i++)
        for (int o = 0; o < blk->ops[i].n_out; o++)
            if (strcmp(blk->ops[i].out[o], name) == 0) return true;
    return false;
}

/* True when an op of block b before index `before`, or any op of an
 * ancestor block, writes name. */
static bool written_before(const pardo_program *p, int b, int before, const char *name) {
    if (block_writes(&p->blocks[b], before, name)) return true;
    for (int a = p->blocks[b].parent; a >= 0; a = p->blocks[a].parent)
        if (block_writes(&p->blocks[a], p->blocks[a].n_ops, name)) return true;
    return false;
}

static int check_blocks(const pardo_program *p, pardo_status *st) {
    const char *path = p->path ? p->path : "graph";
    if (p->n_blocks < 1) return pardo_errorf(st, PARDO_EINVAL, "%s: the program has no blocks, expected at least block 0", path);
    if (p->blocks[0].parent != -1) return pardo_errorf(st, PARDO_EINVAL, "%s: block 0 must not have a parent", path);
    for (int b = 1; b < p->n_blocks; b++) {
        int hops = 0;
        for (int a = p->blocks[b].parent; a != -1; a = p->blocks[a].parent) {
            if (a < 0 || a >= p->n_blocks || a == b || ++hops > p->n_blocks)
                return pardo_errorf(st, PARDO_EINVAL, "%s: block %d: parent chain is broken or cyclic", path, b);
        }
        if (p->blocks[b].parent == -1)
            return pardo_errorf(st, PARDO_EINVAL, "%s: block %d needs a \"parent\"", path, b);
    }
    return PARDO_OK;
}

int pardo_pass_validate(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    (void)opt;
    int rc = check_blocks(p, st);
    if (rc != PARDO_OK) return rc;
    for (int b = 0; b < p->n_blocks; b++) {
        pardo_block *blk = &p->blocks[b];
        for (int i = 0; i < blk->n_ops; i++) {
            pardo_op *op = &blk->ops[i];
            op->def = pardo_op_lookup(op->type);
            if (!op->def) {
                char known[2048];
                pardo_errorf(st, PARDO_EINVAL, "unknown op type '%s' (known types: %s)", op->type,
                             pardo_op_known_list(known, sizeof known));
                return op_error(p, b, i, st);
            }
            if ((rc = check_arity(op, st)) != PARDO_OK || (rc = check_attrs(op, st)) != PARDO_OK)
                return op_error(p, b, i, st);
            for (int k = 0; k < op->n_in; k++) {
                const char *name = op->in[k];
                if (!name[0]) continue;
                const pardo_var *v = pardo_program_lookup_var(p, b, name, NULL);
                if (v && (var_is_source(v) || v->kind == PARDO_VAR_TENSOR_ARRAY)) continue;
                if (written_before(p, b, i, name)) continue;
                if (v)
                    pardo_errorf(st, PARDO_EINVAL,
                                 "input %d: var '%s' is read before any op writes it (it is a temp with no value; "
                                 "make it a feed, param or state, or give it a value)", k, name);
                else
                    pardo_errorf(st, PARDO_ENOTFOUND, "input %d: unknown var '%s' (not declared in block %d or its "
                                 "ancestors, and no earlier op writes it)", k, name, b);
                return op_error(p, b, i, st);
            }
            for (int k = 0; k < op->n_out; k++) {
                if (!op->out[k][0] || pardo_program_lookup_var(p, b, op->out[k], NULL)) continue;
                if (!pardo_block_add_var(blk, op->out[k], st)) return st->code;
            }
        }
    }
    return PARDO_OK;
}
