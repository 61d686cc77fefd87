/* validate.c - structural checks of a loaded program against the op
 * registry (see pass.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/name_index.h"

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
    bool out_variadic = d->variadic_out || (d->n_outputs > 0 && d->outputs[d->n_outputs - 1].variadic);
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

/* Bit k of mask, the last bit standing for repeats of a variadic slot. */
static bool slot_bit(unsigned mask, int k, int n_slots) {
    int slot = k < n_slots ? k : n_slots - 1;
    return slot >= 0 && (mask >> slot) & 1u;
}

/* A var can be read when it has a value without any op: feeds, params and
 * state, and vars with a constant value. */
static bool var_is_source(const pardo_graph_var *v) {
    return v->role == PARDO_VAR_FEED || v->role == PARDO_VAR_PARAM || v->role == PARDO_VAR_STATE || v->value != NULL;
}

/* What validate knows of each block before it checks ops, so that no check
 * scans a block's ops: the index of the first op writing each name (outputs
 * "" included), and the parallel_do running the block. The ops do not change
 * while validate runs (it only adds vars), so the keys, borrowed from the
 * ops' outputs, stay valid. */
typedef struct block_facts {
    pardo_name_index first_write; // output name -> index of the first op of the block writing it
    bool part;                    // run by a parallel_do: op runner_op of block runner
    bool ctrl;                    // run by a control-flow op (if, loop, scan): op runner_op of block runner
    int runner, runner_op;
} block_facts;

static void facts_free(block_facts *f, int n) {
    for (int b = 0; f && b < n; b++) pardo_name_index_free(&f[b].first_write);
    free(f);
}

/* The facts of every block of p (n_blocks entries, freed with facts_free);
 * NULL with st filled when out of memory. */
static block_facts *facts_make(const pardo_program *p, pardo_status *st) {
    block_facts *f = calloc((size_t)p->n_blocks, sizeof(*f));
    if (!f) {
        pardo_errorf(st, PARDO_ENOMEM, "out of memory checking the program");
        return NULL;
    }
    for (int b = 0; b < p->n_blocks; b++) {
        const pardo_block *blk = &p->blocks[b];
        f[b].runner = f[b].runner_op = -1;
        for (int i = 0; i < blk->n_ops; i++)
            for (int o = 0; o < blk->ops[i].n_out; o++)
                if (pardo_name_index_add(&f[b].first_write, blk->ops[i].out[o], i, NULL, st) != PARDO_OK) goto fail;
    }
    /* pardo_block_runner's answer for every block at once: the first parallel_do naming it from its parent */
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++) {
            const pardo_op *op = &p->blocks[b].ops[i];
            if (!pardo_op_is_parallel_do(op)) continue;
            const pardo_value *v = pardo_value_get(op->attrs, "block");
            if (!v || !pardo_value_is_integer(v) || v->number < 1 || v->number >= p->n_blocks) continue;
            int sub = (int)v->number;
            if (p->blocks[sub].parent == b && !f[sub].part) {
                f[sub].part = true;
                f[sub].runner = b;
                f[sub].runner_op = i;
            }
        }
    /* and the blocks of the control-flow ops, where no parallel_do runs them (its head check says so) */
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++) {
            int blocks[2], n = pardo_control_blocks(&p->blocks[b].ops[i], blocks);
            for (int k = 0; k < n; k++) {
                int sub = blocks[k];
                if (sub >= 1 && sub < p->n_blocks && p->blocks[sub].parent == b && !f[sub].part && !f[sub].ctrl) {
                    f[sub].ctrl = true;
                    f[sub].runner = b;
                    f[sub].runner_op = i;
                }
            }
        }
    return f;
fail:
    facts_free(f, p->n_blocks);
    return NULL;
}

/* True when an op of block b before index `limit` writes name. */
static bool block_writes(const block_facts *f, int b, int limit, const char *name) {
    int first = pardo_name_index_get(&f[b].first_write, name);
    return first >= 0 && first < limit;
}

/* True when an op of block b before index `before`, or any op of an
 * ancestor block, writes name. */
static bool written_before(const pardo_program *p, const block_facts *f, int b, int before, const char *name) {
    if (block_writes(f, b, before, name)) return true;
    for (int a = p->blocks[b].parent; a >= 0; a = p->blocks[a].parent)
        if (block_writes(f, a, p->blocks[a].n_ops, name)) return true;
    return false;
}

/* pardo_block_binds from the facts: block b is a part block whose
 * parallel_do lists name in parts_in. */
static bool block_binds(const pardo_program *p, const block_facts *f, int b, const char *name) {
    if (f[b].ctrl) { /* a loop's or scan's body_in (an if binds nothing) */
        const pardo_value *in = pardo_value_get(p->blocks[f[b].runner].ops[f[b].runner_op].attrs, "body_in");
        for (int k = 0; in && in->kind == PARDO_V_ARRAY && k < in->n; k++)
            if (in->items[k].kind == PARDO_V_STRING && strcmp(in->items[k].string, name) == 0) return true;
        return false;
    }
    if (!f[b].part) return false;
    const pardo_value *in = pardo_value_get(p->blocks[f[b].runner].ops[f[b].runner_op].attrs, "parts_in");
    return pardo_value_get(in, name) != NULL;
}

/* True when an ancestor of block b binds name (block_binds). */
static bool bound_above(const pardo_program *p, const block_facts *f, int b, const char *name) {
    for (int a = p->blocks[b].parent; a >= 0; a = p->blocks[a].parent)
        if (block_binds(p, f, a, name)) return true;
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

/* ---- parallel ops (SPEC section 2: Split, Merge, ParallelDo) ---- */

/* Writes "block B, op I 'name' (type)" without the file position. */
static char *op_short(const pardo_program *p, int b, int i, char *buf, size_t n) {
    const pardo_op *op = &p->blocks[b].ops[i];
    if (op->name) snprintf(buf, n, "block %d, op %d '%s' (%s)", b, i, op->name, op->type);
    else snprintf(buf, n, "block %d, op %d (%s)", b, i, op->type);
    return buf;
}

static bool listed(char **names, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (strcmp(names[k], name) == 0) return true;
    return false;
}

/* Declared vars: a tensor_array is a temp without init or value; a block
 * run by a parallel_do declares only temps (block 0 holds feeds, params,
 * state and constants; the executor binds those). */
static int check_vars(const pardo_program *p, const block_facts *f, pardo_status *st) {
    for (int b = 0; b < p->n_blocks; b++) {
        bool part_block = f[b].part || f[b].ctrl;
        for (int j = 0; j < p->blocks[b].n_vars; j++) {
            const pardo_graph_var *v = &p->blocks[b].vars[j];
            char where[512];
            if (v->kind == PARDO_VAR_TENSOR_ARRAY && (v->role != PARDO_VAR_TEMP || v->value || v->init.fill))
                pardo_errorf(st, PARDO_EINVAL, "a tensor_array is written by split or parallel_do: it must be a temp "
                             "with no init or value");
            else if (part_block && v->declared && (v->role != PARDO_VAR_TEMP || v->value || v->init.fill) && f[b].ctrl)
                pardo_errorf(st, PARDO_EINVAL, "block %d is run by a %s op, so its vars are temps of each run; "
                             "declare %s vars and constants in block 0", b,
                             p->blocks[f[b].runner].ops[f[b].runner_op].type, pardo_var_role_name(v->role));
            else if (part_block && v->declared && (v->role != PARDO_VAR_TEMP || v->value || v->init.fill))
                pardo_errorf(st, PARDO_EINVAL, "block %d is run by a parallel_do, so its vars are temps of each part; "
                             "declare %s vars and constants in block 0", b, pardo_var_role_name(v->role));
            else if (v->declared && v->init.fill != PARDO_FILL_NONE &&
                     (v->role == PARDO_VAR_FEED || v->role == PARDO_VAR_TEMP))
                pardo_errorf(st, PARDO_EINVAL, "has an init, which only a param or state var takes (a %s %s)",
                             pardo_var_role_name(v->role),
                             v->role == PARDO_VAR_FEED ? "is given at run time" : "is written by an op; give a "
                                                                                  "constant a value");
            else if (v->declared && (v->role == PARDO_VAR_PARAM || v->role == PARDO_VAR_STATE) &&
                     v->kind == PARDO_VAR_TENSOR && pardo_shape_numel(v->type.ndim, v->type.shape) < 0) {
                char shape[160];
                pardo_errorf(st, PARDO_ESHAPE, "a %s is made before the first step: its shape %s needs every dim "
                             "(no -1)", pardo_var_role_name(v->role),
                             pardo_shape_str(v->type.ndim, v->type.shape, shape, sizeof shape));
            } else continue;
            return pardo_status_prefix(st, "%s: ", pardo_var_where(p, b, v, where, sizeof where));
        }
    }
    return PARDO_OK;
}

/* Inputs and outputs are tensor_arrays exactly where the op's schema says
 * (parallel_do's inputs mix both: checked by check_parallel_do). */
static int check_array_io(const pardo_program *p, int b, const pardo_op *op, pardo_status *st) {
    const pardo_op_def *d = op->def;
    if (!pardo_op_is_parallel_do(op)) {
        for (int k = 0; k < op->n_in; k++) {
            const pardo_graph_var *v = op->in[k][0] ? pardo_program_lookup_var(p, b, op->in[k], NULL) : NULL;
            if (!v) continue;
            bool want = slot_bit(d->array_in, k, d->n_inputs), is = v->kind == PARDO_VAR_TENSOR_ARRAY;
            if (want && !is)
                return pardo_errorf(st, PARDO_EINVAL, "input %d: var '%s' is a tensor, but %s reads a tensor_array "
                                    "(the output of split or parallel_do)", k, v->name, op->type);
            if (!want && is && !slot_bit(d->array_ok, k, d->n_inputs))
                return pardo_errorf(st, PARDO_EINVAL, "input %d: var '%s' is a tensor_array; %s reads tensors "
                                    "(merge the parts first)", k, v->name, op->type);
        }
    }
    for (int k = 0; k < op->n_out; k++) {
        const pardo_graph_var *v = op->out[k][0] ? pardo_program_lookup_var(p, b, op->out[k], NULL) : NULL;
        if (!v) continue;
        bool want = slot_bit(d->array_out, k, d->n_outputs), is = v->kind == PARDO_VAR_TENSOR_ARRAY;
        if (want != is)
            return pardo_errorf(st, PARDO_EINVAL, "output %d: var '%s' is declared as a %s, but %s writes a %s", k,
                                v->name, pardo_var_kind_name(v->kind), op->type, want ? "tensor_array" : "tensor");
    }
    return PARDO_OK;
}

/* merge's weight_by names a tensor_array (a split output) the op can see;
 * when input 1 is given it is that var. */
static int check_merge(const pardo_program *p, const block_facts *f, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    const char *wb = "";
    int rc;
    if (strcmp(op->type, "merge") != 0) return PARDO_OK;
    if ((rc = pardo_attr_string(op, "weight_by", "", &wb, st)) != PARDO_OK) return rc;
    if (!wb[0]) {
        if (op->n_in > 1 && op->in[1][0])
            return pardo_errorf(st, PARDO_EINVAL, "input 1 '%s' is given but attr 'weight_by' is not", op->in[1]);
        return PARDO_OK;
    }
    const pardo_graph_var *v = pardo_program_lookup_var(p, b, wb, NULL);
    if (!v) return pardo_errorf(st, PARDO_ENOTFOUND, "attr 'weight_by': unknown var '%s'", wb);
    if (v->kind != PARDO_VAR_TENSOR_ARRAY)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'weight_by': var '%s' is a tensor, expected the tensor_array a split "
                            "wrote", wb);
    if (op->n_in > 1 && op->in[1][0] && strcmp(op->in[1], wb) != 0)
        return pardo_errorf(st, PARDO_EINVAL, "input 1 is '%s' but attr 'weight_by' is '%s'; they must agree", op->in[1],
                            wb);
    if (!written_before(p, f, b, i, wb))
        return pardo_errorf(st, PARDO_EINVAL, "attr 'weight_by': tensor_array '%s' is read before any op writes it", wb);
    return PARDO_OK;
}

/* Attr `key` of a parallel_do must be an object of var names. */
static int check_name_map(const pardo_op *op, const char *key, pardo_status *st) {
    const pardo_value *m = pardo_attr(op, key);
    for (int k = 0; m && k < m->n; k++) {
        if (m->items[k].kind != PARDO_V_STRING || !m->items[k].string[0])
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s': '%s' maps to %s, expected the name of a tensor_array var",
                                key, m->keys[k], pardo_value_kind_name(m->items[k].kind));
        for (int j = 0; j < k; j++)
            if (strcmp(m->items[j].string, m->items[k].string) == 0 && strcmp(key, "parts_out") == 0)
                return pardo_errorf(st, PARDO_EINVAL, "attr 'parts_out': '%s' and '%s' both fill '%s'", m->keys[j],
                                    m->keys[k], m->items[k].string);
    }
    return PARDO_OK;
}

/* What can be checked of parallel_do op i of block b before its block's
 * ops are: the block it runs, nesting, the attrs' shape. */
static int check_parallel_do_head(const pardo_program *p, const block_facts *f, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    char other[256];
    int64_t sub;
    int rc;
    if ((rc = pardo_attr_int(op, "block", 0, &sub, st)) != PARDO_OK) return rc;
    if (op->n_in > 64 || op->n_out > 64)
        return pardo_errorf(st, PARDO_EINVAL, "has %d inputs and %d outputs; a parallel_do takes at most 64 of each",
                            op->n_in, op->n_out);
    if (sub < 1 || sub >= p->n_blocks)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'block' is %lld, but the program's blocks are 0..%d (and block 0 is "
                            "the main block)", (long long)sub, p->n_blocks - 1);
    if (p->blocks[sub].parent != b)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'block' is %lld, whose parent is block %d; the block a parallel_do "
                            "runs must be a child of the op's block %d", (long long)sub, p->blocks[sub].parent, b);
    if (f[b].part)
        return pardo_errorf(st, PARDO_EINVAL, "nested parallel_do: block %d is itself run by parallel_do %s; a part "
                            "runs its ops on one thread and cannot fork again", b,
                            op_short(p, f[b].runner, f[b].runner_op, other, sizeof other));
    if (f[sub].part && (f[sub].runner != b || f[sub].runner_op != i))
        return pardo_errorf(st, PARDO_EINVAL, "block %lld is already run by %s; give each parallel_do its own block",
                            (long long)sub, op_short(p, f[sub].runner, f[sub].runner_op, other, sizeof other));
    if ((rc = check_name_map(op, "parts_in", st)) != PARDO_OK) return rc;
    return check_name_map(op, "parts_out", st);
}

/* The rest, once every block's temps are known: parts_in and parts_out
 * name tensor_arrays the op lists, and the block reads from outside only
 * vars in `in` (it cannot write outside: its writes are its own temps, see
 * pardo_pass_validate). Adds the parts_in vars to the block. */
static int check_parallel_do(pardo_program *p, const block_facts *f, int b, int i, pardo_status *st) {
    pardo_op *op = &p->blocks[b].ops[i];
    int sub = (int)pardo_attr(op, "block")->number;
    pardo_block *sb = &p->blocks[sub];
    const pardo_value *pin = pardo_attr(op, "parts_in"), *pout = pardo_attr(op, "parts_out");
    for (int k = 0; pin && k < pin->n; k++) {
        const char *key = pin->keys[k], *arr = pin->items[k].string;
        const pardo_graph_var *a = pardo_program_lookup_var(p, b, arr, NULL);
        if (!a) return pardo_errorf(st, PARDO_ENOTFOUND, "parts_in '%s': unknown var '%s'", key, arr);
        if (a->kind != PARDO_VAR_TENSOR_ARRAY)
            return pardo_errorf(st, PARDO_EINVAL, "parts_in '%s': var '%s' is a tensor, expected a tensor_array (split's "
                                "output)", key, arr);
        if (!listed(op->in, op->n_in, arr))
            return pardo_errorf(st, PARDO_EINVAL, "parts_in '%s': var '%s' must be listed in \"in\"", key, arr);
        pardo_graph_var *v = pardo_block_find_var(sb, key);
        if (v && v->kind != PARDO_VAR_TENSOR)
            return pardo_errorf(st, PARDO_EINVAL, "parts_in '%s': block %d declares it as a tensor_array; a part is a "
                                "tensor", key, sub);
        if (!v && !pardo_block_add_var(sb, key, st)) return st->code;
    }
    for (int k = 0; pout && k < pout->n; k++) {
        const char *key = pout->keys[k], *arr = pout->items[k].string;
        if (!listed(op->out, op->n_out, arr))
            return pardo_errorf(st, PARDO_EINVAL, "parts_out '%s': var '%s' must be listed in \"out\"", key, arr);
        const pardo_graph_var *a = pardo_program_lookup_var(p, b, arr, NULL);
        if (!a || a->kind != PARDO_VAR_TENSOR_ARRAY)
            return pardo_errorf(st, PARDO_EINVAL, "parts_out '%s': var '%s' is not a tensor_array", key, arr);
        if (!block_writes(f, sub, sb->n_ops, key) && !pardo_value_get(pin, key))
            return pardo_errorf(st, PARDO_EINVAL, "parts_out '%s': no op of block %d writes '%s'", key, sub, key);
    }
    for (int k = 0; k < op->n_out; k++) {
        bool found = false;
        for (int j = 0; pout && j < pout->n && !found; j++) found = strcmp(pout->items[j].string, op->out[k]) == 0;
        if (!found)
            return pardo_errorf(st, PARDO_EINVAL, "output %d '%s' is not a parts_out target (a parallel_do writes only "
                                "the tensor_arrays its parts fill)", k, op->out[k]);
    }
    char where[256];
    for (int j = 0; j < sb->n_ops; j++) {
        const pardo_op *sop = &sb->ops[j];
        for (int k = 0; k < sop->n_in; k++) {
            int owner = sub;
            const char *name = sop->in[k];
            if (!name[0] || pardo_value_get(pin, name)) continue;
            if (pardo_program_lookup_var(p, sub, name, &owner) && owner != sub && !listed(op->in, op->n_in, name))
                return pardo_errorf(st, PARDO_EINVAL, "%s reads '%s' of block %d: list it in \"in\" (a parallel_do "
                                    "lists every var its block reads)", op_short(p, sub, j, where, sizeof where), name,
                                    owner);
        }
    }
    return PARDO_OK;
}

/* ---- control-flow ops (ops/control_flow.c: if, loop, scan) ---- */

/* Attr key of op must be a list of n var names (n < 0: any count, at most
 * 32); the count into *count. */
static int check_names(const pardo_op *op, const char *key, int n, int *count, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, key);
    if (!v || v->kind != PARDO_V_ARRAY)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' must be a list of var names", key);
    for (int k = 0; k < v->n; k++)
        if (v->items[k].kind != PARDO_V_STRING || !v->items[k].string[0])
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s': entry %d is %s, expected a var name", key, k,
                                pardo_value_kind_name(v->items[k].kind));
    if (n >= 0 && v->n != n)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' names %d vars, expected %d", key, v->n, n);
    if (v->n > 32) return pardo_errorf(st, PARDO_EINVAL, "attr '%s' names %d vars, at most 32", key, v->n);
    *count = v->n;
    return PARDO_OK;
}

/* Attr key of op is absent or a list of n integers. */
static int check_int_list(const pardo_op *op, const char *key, int n, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, key);
    int got = v && v->kind == PARDO_V_ARRAY ? v->n : v ? 1 : -1;
    if (got >= 0 && got != n)
        return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %d entries, expected %d (one per %s)", key, got, n,
                            strstr(key, "input") ? "scan input" : "scan output");
    return PARDO_OK;
}

/* The counts of a control-flow op's attrs and its inputs and outputs agree;
 * the blocks it runs are children of its block that nothing else runs. */
static int check_control_head(const pardo_program *p, const block_facts *f, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    const bool is_if = strcmp(op->type, "if") == 0, is_loop = strcmp(op->type, "loop") == 0;
    const char *keys[2] = {is_if ? "then_block" : "body", "else_block"};
    char other[256];
    int rc, n_in = 0, n_out = 0;
    for (int k = 0; k < (is_if ? 2 : 1); k++) {
        int64_t sub;
        if ((rc = pardo_attr_int(op, keys[k], 0, &sub, st)) != PARDO_OK) return rc;
        if (sub < 1 || sub >= p->n_blocks)
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is %lld, but the program's blocks are 0..%d (and block 0 "
                                "is the main block)", keys[k], (long long)sub, p->n_blocks - 1);
        if (p->blocks[sub].parent != b)
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is %lld, whose parent is block %d; the block a %s runs "
                                "must be a child of the op's block %d", keys[k], (long long)sub,
                                p->blocks[sub].parent, op->type, b);
        if (f[sub].runner != b || f[sub].runner_op != i || !f[sub].ctrl)
            return pardo_errorf(st, PARDO_EINVAL, "block %lld is already run by %s; give each op its own block",
                                (long long)sub, op_short(p, f[sub].runner, f[sub].runner_op, other, sizeof other));
    }
    if (is_if) {
        int n_else, blocks[2];
        if (pardo_control_blocks(op, blocks) == 2 && blocks[0] == blocks[1])
            return pardo_errorf(st, PARDO_EINVAL, "then_block and else_block are both block %d; give each branch its "
                                "own block", blocks[0]);
        if ((rc = check_names(op, "then_out", -1, &n_out, st)) != PARDO_OK ||
            (rc = check_names(op, "else_out", -1, &n_else, st)) != PARDO_OK)
            return rc;
        if (n_out != n_else)
            return pardo_errorf(st, PARDO_EINVAL, "then_out names %d vars but else_out %d: both branches give every "
                                "output", n_out, n_else);
        if (op->n_out != n_out)
            return pardo_errorf(st, PARDO_EINVAL, "has %d outputs but the branches give %d", op->n_out, n_out);
        return PARDO_OK;
    }
    if ((rc = check_names(op, "body_in", -1, &n_in, st)) != PARDO_OK ||
        (rc = check_names(op, "body_out", -1, &n_out, st)) != PARDO_OK)
        return rc;
    if (is_loop) {
        if (n_in < 2)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'body_in' names %d vars, expected at least 2 (the iteration "
                                "number, cond, then the carried values)", n_in);
        const int n_carried = n_in - 2;
        if (n_out < 1 + n_carried)
            return pardo_errorf(st, PARDO_EINVAL, "attr 'body_out' names %d vars, expected at least %d (cond and the "
                                "%d carried values, then the scan outputs)", n_out, 1 + n_carried, n_carried);
        if (op->n_in < 2 + n_carried)
            return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected at least %d (M, cond and the %d carried "
                                "values the body takes)", op->n_in, 2 + n_carried, n_carried);
        if (op->n_out != n_out - 1)
            return pardo_errorf(st, PARDO_EINVAL, "has %d outputs, expected %d (the %d carried values and %d scan "
                                "outputs of the body)", op->n_out, n_out - 1, n_carried, n_out - 1 - n_carried);
        for (int k = 0; k < n_carried; k++)
            if (!op->in[2 + k][0])
                return pardo_errorf(st, PARDO_EINVAL, "input %d: carried value %d is required but given as \"\"",
                                    2 + k, k);
        if ((op->n_in < 1 || !op->in[0][0]) && (op->n_in < 2 || !op->in[1][0]))
            return pardo_errorf(st, PARDO_EINVAL, "has neither a trip count M nor a cond: the loop would not end");
        return PARDO_OK;
    }
    int64_t n_scan;
    bool batch;
    if ((rc = pardo_attr_int(op, "num_scan_inputs", 0, &n_scan, st)) != PARDO_OK ||
        (rc = pardo_attr_bool(op, "batch", false, &batch, st)) != PARDO_OK)
        return rc;
    if (n_scan < 1 || n_scan > n_in)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'num_scan_inputs' is %lld, expected 1 to %d (body_in's count)",
                            (long long)n_scan, n_in);
    const int n_state = n_in - (int)n_scan, off = batch ? 1 : 0;
    if (n_out < n_state)
        return pardo_errorf(st, PARDO_EINVAL, "attr 'body_out' names %d vars, expected at least the %d states", n_out,
                            n_state);
    if (op->n_in < off + n_in)
        return pardo_errorf(st, PARDO_EINVAL, "has %d inputs, expected at least %d (%s%d states and %lld scan inputs)",
                            op->n_in, off + n_in, batch ? "sequence_lens, " : "", n_state, (long long)n_scan);
    if (op->n_out != n_out)
        return pardo_errorf(st, PARDO_EINVAL, "has %d outputs, expected %d (the %d states and %d scan outputs of the "
                            "body)", op->n_out, n_out, n_state, n_out - n_state);
    for (int k = off; k < off + n_in; k++)
        if (!op->in[k][0]) return pardo_errorf(st, PARDO_EINVAL, "input %d is required but given as \"\"", k);
    if ((rc = check_int_list(op, "scan_input_axes", (int)n_scan, st)) != PARDO_OK ||
        (rc = check_int_list(op, "scan_input_directions", (int)n_scan, st)) != PARDO_OK ||
        (rc = check_int_list(op, "scan_output_axes", n_out - n_state, st)) != PARDO_OK ||
        (rc = check_int_list(op, "scan_output_directions", n_out - n_state, st)) != PARDO_OK)
        return rc;
    if (batch && (pardo_attr(op, "scan_input_axes") || pardo_attr(op, "scan_output_axes")))
        return pardo_errorf(st, PARDO_EINVAL, "batch scans dim 1 and stacks along dim 1: it takes no "
                            "scan_input_axes or scan_output_axes");
    return PARDO_OK;
}

/* The rest, once every block's temps are known: body_in vars are added to
 * the body, body_out / then_out / else_out name vars the block sees, and the
 * block reads from outside only vars the op lists in "in". */
static int check_control(pardo_program *p, const block_facts *f, int b, int i, pardo_status *st) {
    const pardo_op *op = &p->blocks[b].ops[i];
    const bool is_if = strcmp(op->type, "if") == 0;
    int blocks[2], n = pardo_control_blocks(op, blocks);
    char where[256];
    for (int s = 0; s < n; s++) {
        const int sub = blocks[s];
        const char *out_key = is_if ? (s == 0 ? "then_out" : "else_out") : "body_out";
        const pardo_value *bin = is_if ? NULL : pardo_attr(op, "body_in"), *bout = pardo_attr(op, out_key);
        for (int k = 0; bin && k < bin->n; k++) {
            pardo_graph_var *v = pardo_block_find_var(&p->blocks[sub], bin->items[k].string);
            if (v && v->kind != PARDO_VAR_TENSOR)
                return pardo_errorf(st, PARDO_EINVAL, "body_in '%s': block %d declares it as a tensor_array, expected "
                                    "a tensor", bin->items[k].string, sub);
            if (!v && !pardo_block_add_var(&p->blocks[sub], bin->items[k].string, st)) return st->code;
            op = &p->blocks[b].ops[i];
        }
        const pardo_block *sb = &p->blocks[sub];
        for (int k = 0; k < bout->n; k++) {
            const char *name = bout->items[k].string;
            int owner = sub;
            const pardo_graph_var *v = pardo_program_lookup_var(p, sub, name, &owner);
            if (!v && !block_writes(f, sub, sb->n_ops, name))
                return pardo_errorf(st, PARDO_ENOTFOUND, "%s '%s': no op of block %d writes it and no enclosing block "
                                    "has it", out_key, name, sub);
            if (v && v->kind != PARDO_VAR_TENSOR)
                return pardo_errorf(st, PARDO_EINVAL, "%s '%s' is a tensor_array, expected a tensor", out_key, name);
            if (v && owner != sub && !listed(op->in, op->n_in, name))
                return pardo_errorf(st, PARDO_EINVAL, "%s '%s' is a var of block %d: list it in \"in\" (a %s lists "
                                    "every enclosing var its blocks read)", out_key, name, owner, op->type);
        }
        for (int j = 0; j < sb->n_ops; j++) {
            const pardo_op *sop = &sb->ops[j];
            for (int k = 0; k < sop->n_in; k++) {
                int owner = sub;
                const char *name = sop->in[k];
                if (!name[0] || block_binds(p, f, sub, name)) continue;
                if (pardo_program_lookup_var(p, sub, name, &owner) && owner != sub && !listed(op->in, op->n_in, name))
                    return pardo_errorf(st, PARDO_EINVAL, "%s reads '%s' of block %d: list it in \"in\" (a %s lists "
                                        "every enclosing var its blocks read)", op_short(p, sub, j, where, sizeof where),
                                        name, owner, op->type);
            }
        }
    }
    return PARDO_OK;
}

static int validate_ops(pardo_program *p, const block_facts *f, pardo_status *st) {
    int rc = check_vars(p, f, st);
    if (rc != PARDO_OK) return rc;
    for (int b = 0; b < p->n_blocks; b++) {
        pardo_block *blk = &p->blocks[b];
        bool part_block = f[b].part || f[b].ctrl; /* its writes are locals of each part (each run) */
        for (int i = 0; i < blk->n_ops; i++) {
            pardo_op *op = &blk->ops[i];
            op->def = pardo_op_lookup(op->type);
            if (!op->def) {
                char known[2048], near[256];
                pardo_op_nearest(op->type, near, sizeof near);
                pardo_errorf(st, PARDO_EINVAL, "unknown op type '%s'%s%s%s (known types: %s)", op->type,
                             near[0] ? "; did you mean " : "", near, near[0] ? "?" : "",
                             pardo_op_known_list(known, sizeof known));
                return op_error(p, b, i, st);
            }
            if ((rc = check_arity(op, st)) != PARDO_OK || (rc = check_attrs(op, st)) != PARDO_OK)
                return op_error(p, b, i, st);
            if (pardo_op_is_parallel_do(op) && (rc = check_parallel_do_head(p, f, b, i, st)) != PARDO_OK)
                return op_error(p, b, i, st);
            if (pardo_op_is_control(op) && (rc = check_control_head(p, f, b, i, st)) != PARDO_OK)
                return op_error(p, b, i, st);
            for (int k = 0; k < op->n_in; k++) {
                const char *name = op->in[k];
                if (!name[0]) continue;
                int owner = b;
                const pardo_graph_var *v = pardo_program_lookup_var(p, b, name, &owner);
                if (part_block && block_binds(p, f, b, name)) continue; /* the part's slice */
                if (bound_above(p, f, b, name)) continue; /* an enclosing loop's or scan's body_in, a part's slice */
                if (part_block && ((v && owner == b) || block_writes(f, b, blk->n_ops, name))) {
                    if (block_writes(f, b, i, name)) continue;
                    if (v && owner != b && f[b].ctrl)
                        pardo_errorf(st, PARDO_EINVAL, "var '%s' of block %d is read here and written in block %d, "
                                     "which a %s op runs: enclosing vars are read-only inside its blocks (give the "
                                     "result another name)", name, owner, b,
                                     p->blocks[f[b].runner].ops[f[b].runner_op].type);
                    else if (v && owner != b) /* an update of an enclosing var, such as sgd on a param */
                        pardo_errorf(st, PARDO_EINVAL, "var '%s' of block %d is read here and written in block %d, "
                                     "which a parallel_do runs: enclosing vars are read-only inside a parallel_do "
                                     "(give the result another name)", name, owner, b);
                    else
                        pardo_errorf(st, PARDO_EINVAL, "input %d: var '%s' of block %d is read before any op of the "
                                     "block writes it", k, name, b);
                    return op_error(p, b, i, st);
                }
                if (v && var_is_source(v)) continue; /* a tensor_array is a temp: split or parallel_do writes it */
                if (written_before(p, f, b, i, name)) continue;
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
                if (!op->out[k][0]) continue;
                /* a part block's writes are its own temps, even where an enclosing block has the name */
                if (part_block ? pardo_block_find_var(blk, op->out[k]) != NULL
                               : pardo_program_lookup_var(p, b, op->out[k], NULL) != NULL)
                    continue;
                pardo_graph_var *v = pardo_block_add_var(blk, op->out[k], st);
                if (!v) return st->code;
                if (slot_bit(op->def->array_out, k, op->def->n_outputs)) v->kind = PARDO_VAR_TENSOR_ARRAY;
            }
            if ((rc = check_array_io(p, b, op, st)) != PARDO_OK || (rc = check_merge(p, f, b, i, st)) != PARDO_OK)
                return op_error(p, b, i, st);
        }
    }
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_ops; i++)
            if ((pardo_op_is_parallel_do(&p->blocks[b].ops[i]) && (rc = check_parallel_do(p, f, b, i, st)) != PARDO_OK) ||
                (pardo_op_is_control(&p->blocks[b].ops[i]) && (rc = check_control(p, f, b, i, st)) != PARDO_OK))
                return op_error(p, b, i, st);
    return PARDO_OK;
}

int pardo_pass_validate(pardo_program *p, const pardo_pass_options *opt, pardo_status *st) {
    (void)opt;
    int rc = check_blocks(p, st);
    if (rc != PARDO_OK) return rc;
    block_facts *f = facts_make(p, st);
    if (!f) return st->code;
    rc = validate_ops(p, f, st);
    facts_free(f, p->n_blocks);
    return rc;
}
