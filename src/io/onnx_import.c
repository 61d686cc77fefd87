/* onnx_import.c - an ONNX ModelProto to a pardo program: the model checked
 * (IR, opsets, one graph, tensor types), graph inputs to feeds,
 * initializers to constants known at load, every node folded
 * (onnx_fold.c) or mapped to pardo ops (onnx_ops.c) in order, the graph's
 * outputs kept under their ONNX names, then the program checked. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx.h"
#include "io/onnx_internal.h"
#include "io/onnx_sniff.h"
#include "op.h"
#include "pass.h"

bool pardo_onnx_built(void) { return true; }

bool pardo_onnx_looks_like(const unsigned char *buf, size_t n) { return pardo_onnx_sniff(buf, n); }

/* ---- messages ---- */

static int node_error(onnx_ctx *c, pardo_status *st, int code, const char *fmt, va_list ap) {
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!c->node) return pardo_errorf(st, code, "%s: %s", c->path, msg);
    const Onnx__NodeProto *n = c->node;
    return pardo_errorf(st, code, "%s: node '%s' (index %d, %s, opset %lld): %s", c->path,
                        n->name && *n->name ? n->name : "", c->node_index, n->op_type ? n->op_type : "?",
                        (long long)c->opset, msg);
}

int onnx_unsupported(onnx_ctx *c, pardo_status *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = node_error(c, st, PARDO_ENOTSUP, fmt, ap);
    va_end(ap);
    return rc;
}

int onnx_bad(onnx_ctx *c, pardo_status *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = node_error(c, st, PARDO_EPARSE, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- the value table: open addressing over vals by name ---- */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int rehash(onnx_ctx *c, int cap, pardo_status *st) {
    int *slot = malloc(sizeof(int) * (size_t)cap);
    if (!slot) return pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", c->path);
    for (int i = 0; i < cap; i++) slot[i] = -1;
    for (int v = 0; v < c->n_vals; v++) {
        uint64_t h = hash_name(c->vals[v]->name) & (uint64_t)(cap - 1);
        while (slot[h] >= 0) h = (h + 1) & (uint64_t)(cap - 1);
        slot[h] = v;
    }
    free(c->slot);
    c->slot = slot;
    c->cap_slot = cap;
    return PARDO_OK;
}

onnx_value *onnx_value_find(onnx_ctx *c, const char *name) {
    if (!c->cap_slot || !name) return NULL;
    uint64_t h = hash_name(name) & (uint64_t)(c->cap_slot - 1);
    for (; c->slot[h] >= 0; h = (h + 1) & (uint64_t)(c->cap_slot - 1))
        if (strcmp(c->vals[c->slot[h]]->name, name) == 0) return c->vals[c->slot[h]];
    return NULL;
}

/* The value named name, added (empty) when new. */
static onnx_value *value_get(onnx_ctx *c, const char *name, pardo_status *st) {
    onnx_value *v = onnx_value_find(c, name);
    if (v) return v;
    if (c->n_vals == c->cap_vals) {
        int cap = c->cap_vals ? c->cap_vals * 2 : 64;
        onnx_value **nv = realloc(c->vals, sizeof(*nv) * (size_t)cap);
        if (!nv) {
            pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", c->path);
            return NULL;
        }
        c->vals = nv;
        c->cap_vals = cap;
    }
    if ((c->n_vals + 1) * 2 > c->cap_slot && rehash(c, c->cap_slot ? c->cap_slot * 2 : 128, st) != PARDO_OK)
        return NULL;
    /* each value its own block: the pointers mappings hold stay valid as the table grows */
    if (!(v = calloc(1, sizeof(*v))) || !(v->name = strdup(name))) {
        free(v);
        pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", c->path);
        return NULL;
    }
    v->block = c->block;
    c->vals[c->n_vals] = v;
    uint64_t h = hash_name(name) & (uint64_t)(c->cap_slot - 1);
    while (c->slot[h] >= 0) h = (h + 1) & (uint64_t)(c->cap_slot - 1);
    c->slot[h] = c->n_vals++;
    return v;
}

onnx_value *onnx_input(onnx_ctx *c, const Onnx__NodeProto *n, int i) {
    if (i >= (int)n->n_input || !n->input[i] || !*n->input[i]) return NULL;
    return onnx_value_find(c, n->input[i]);
}

/* Output i's value, refused when the model already defined it (SSA). */
static onnx_value *new_output(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st) {
    if (i >= (int)n->n_output || !n->output[i] || !*n->output[i]) {
        onnx_bad(c, st, "output %d is missing", i);
        return NULL;
    }
    onnx_value *v = onnx_value_find(c, n->output[i]);
    if (v && (v->var || v->konst || v->sym) && c->block != 0) { /* ONNX scopes a subgraph's names; pardo does not */
        onnx_unsupported(c, st, "output '%s' is also a name of an enclosing graph or another subgraph (pardo needs every "
                         "name of the model unique)", n->output[i]);
        return NULL;
    }
    if (v && (v->var || v->konst || v->sym)) {
        onnx_bad(c, st, "output '%s' is already defined by an earlier node, an initializer or an input", n->output[i]);
        return NULL;
    }
    return v ? v : value_get(c, n->output[i], st);
}

int onnx_set_const(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_tensor *t, pardo_status *st) {
    onnx_value *v = new_output(c, n, i, st);
    if (!v) {
        pardo_tensor_release(t);
        return st->code;
    }
    v->konst = t;
    return PARDO_OK;
}

int onnx_set_sym(onnx_ctx *c, const Onnx__NodeProto *n, int i, const onnx_dim *dims, int nd, pardo_status *st) {
    onnx_value *v = new_output(c, n, i, st);
    if (!v) return st->code;
    v->sym_scalar = nd < 0;
    if (nd < 0) nd = 1;
    if (!(v->sym = malloc(sizeof(*dims) * (size_t)(nd ? nd : 1)))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    memcpy(v->sym, dims, sizeof(*dims) * (size_t)nd);
    v->n_sym = nd;
    return PARDO_OK;
}

/* ---- building the program ---- */

static pardo_block *block0(onnx_ctx *c) { return &c->p->blocks[0]; }

/* The block ops are written to: block 0, or the subgraph's being mapped. */
static pardo_block *cur_block(onnx_ctx *c) { return &c->p->blocks[c->block]; }

/* A new value named "onnx::HINT_K", a name neither the model nor the program uses. */
static onnx_value *fresh_value(onnx_ctx *c, const char *hint, pardo_status *st) {
    char name[256];
    do snprintf(name, sizeof name, "onnx::%s_%lld", hint, (long long)c->fresh++);
    while (onnx_value_find(c, name) || pardo_block_find_var(block0(c), name));
    return value_get(c, name, st);
}

const char *onnx_temp(onnx_ctx *c, const char *hint, pardo_status *st) {
    onnx_value *v = fresh_value(c, hint, st);
    if (!v) return NULL;
    if (!(v->var = strdup(v->name))) {
        pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        return NULL;
    }
    return v->var;
}

const char *onnx_const_var(onnx_ctx *c, const char *hint, pardo_tensor *t, bool param, pardo_status *st) {
    onnx_value *v = fresh_value(c, hint, st);
    if (!v) {
        pardo_tensor_release(t);
        return NULL;
    }
    v->konst = t;
    v->initializer = param;
    return onnx_var_of(c, v, st);
}

const char *onnx_out_var(onnx_ctx *c, const Onnx__NodeProto *n, int i, pardo_status *st) {
    onnx_value *v = new_output(c, n, i, st);
    if (!v) return NULL;
    if (!(v->var = strdup(v->name))) {
        pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        return NULL;
    }
    return v->var;
}

pardo_op *onnx_emit(onnx_ctx *c, const char *type, const char *const *in, int n_in, const char *const *out,
                    int n_out, pardo_status *st) {
    pardo_op *op = pardo_block_add_op(cur_block(c), type, st);
    if (!op) return NULL;
    for (int i = 0; i < n_in; i++)
        if (pardo_op_add_input(op, in[i] ? in[i] : "", st) != PARDO_OK) return NULL;
    for (int i = 0; i < n_out; i++)
        if (pardo_op_add_output(op, out[i], st) != PARDO_OK) return NULL;
    const Onnx__NodeProto *n = c->node;
    char name[512];
    if (n && n->name && *n->name) snprintf(name, sizeof name, "%s", n->name);
    else snprintf(name, sizeof name, "%s_%d", n && n->op_type ? n->op_type : "node", c->node_index);
    /* a node mapped to several ops: the later ones get a suffix */
    pardo_block *b = cur_block(c);
    if (b->n_ops >= 2 && b->ops[b->n_ops - 2].name && strncmp(b->ops[b->n_ops - 2].name, name, strlen(name)) == 0 &&
        c->node && b->ops[b->n_ops - 2].line == c->node_index + 1) {
        size_t l = strlen(name);
        snprintf(name + l, sizeof name - l, "/%s", type);
    }
    if (!(op->name = strdup(name))) {
        pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        return NULL;
    }
    op->line = c->node_index + 1; /* messages then say "PATH: ONNX node I: block 0, op K 'NAME'" (graph.h) */
    op->col = -1;
    op->role = PARDO_OP_FORWARD;
    c->types_dirty = true;
    return op;
}

int onnx_set_int(pardo_op *op, const char *key, int64_t v, pardo_status *st) {
    return pardo_op_set_attr(op, key, pardo_value_new_number((double)v), st);
}

int onnx_set_float(pardo_op *op, const char *key, double v, pardo_status *st) {
    return pardo_op_set_attr(op, key, pardo_value_new_number(v), st);
}

int onnx_set_bool(pardo_op *op, const char *key, bool v, pardo_status *st) {
    return pardo_op_set_attr(op, key, pardo_value_new_bool(v), st);
}

int onnx_set_string(pardo_op *op, const char *key, const char *v, pardo_status *st) {
    return pardo_op_set_attr(op, key, pardo_value_new_string(v), st);
}

int onnx_set_ints(pardo_op *op, const char *key, const int64_t *v, int n, pardo_status *st) {
    pardo_value *a = pardo_value_new_array();
    if (!a) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        pardo_value *x = pardo_value_new_number((double)v[i]);
        int rc = x ? pardo_value_append(a, x, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_value_free(x);
        if (rc != PARDO_OK) {
            pardo_value_free(a);
            return rc;
        }
    }
    return pardo_op_set_attr(op, key, a, st);
}

/* Declares var name with type t and role in block 0. */
static pardo_graph_var *declare(onnx_ctx *c, const char *name, pardo_dtype dt, int ndim, const int64_t *shape,
                                pardo_var_role role, pardo_status *st) {
    pardo_graph_var *v = pardo_block_add_var(block0(c), name, st);
    if (!v) return NULL;
    v->declared = true;
    v->role = role;
    v->type.dtype = dt;
    v->type.ndim = ndim;
    for (int i = 0; i < ndim; i++) v->type.shape[i] = shape[i];
    return v;
}

/* A constant var holding t's elements as its `value`. */
static int const_var(onnx_ctx *c, onnx_value *v, pardo_status *st) {
    pardo_tensor *t = v->konst;
    pardo_graph_var *gv = declare(c, v->name, t->dtype, t->ndim, t->shape, PARDO_VAR_TEMP, st);
    if (!gv) return st->code;
    if (!(gv->value = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1))))
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    for (int64_t i = 0; i < t->numel; i++) gv->value[i] = pardo_tensor_get_f64(t, i);
    gv->n_value = t->numel;
    return PARDO_OK;
}

/* A constant var holding the int64 [1] vector {value}. */
static const char *int64_const(onnx_ctx *c, const char *hint, int64_t value, pardo_status *st) {
    const int64_t one = 1;
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_I64, 1, &one, st);
    if (!t) return NULL;
    *(int64_t *)pardo_tensor_data(t) = value;
    return onnx_const_var(c, hint, t, false, st);
}

/* The ops computing shape vector v at run time: each entry a `shape` slice
 * of its var's dims times its factor, or a constant, concatenated. */
static int materialize_sym_here(onnx_ctx *c, onnx_value *v, pardo_status *st) {
    const char *parts[PARDO_MAX_DIMS * 2 + 8];
    int np = 0;
    if (v->n_sym > (int)(sizeof parts / sizeof parts[0])) return onnx_unsupported(c, st, "a shape vector that long");
    for (int i = 0; i < v->n_sym; i++) {
        const onnx_dim *d = &v->sym[i];
        const char *part = d->var ? onnx_temp(c, "dim", st) : int64_const(c, "dim", d->value, st);
        if (!part) return st->code;
        if (d->var) {
            const char *src = d->var;
            pardo_op *op = onnx_emit(c, "shape", &src, 1, &part, 1, st);
            if (!op || onnx_set_int(op, "start", d->dim, st) != PARDO_OK ||
                onnx_set_int(op, "end", d->dim + 1, st) != PARDO_OK)
                return st->code;
            if (d->value != 1) {
                const char *k = int64_const(c, "factor", d->value, st), *scaled = k ? onnx_temp(c, "dim", st) : NULL;
                const char *in[2] = {part, k};
                if (!scaled || !onnx_emit(c, "mul", in, 2, &scaled, 1, st)) return st->code;
                part = scaled;
            }
        }
        parts[np++] = part;
    }
    if (!(v->var = strdup(v->name))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    const char *out = v->sym_scalar ? onnx_temp(c, "dims", st) : v->var;
    if (!out) return st->code;
    pardo_op *op = onnx_emit(c, "concat", parts, np, &out, 1, st);
    if (!op || onnx_set_int(op, "axis", 0, st) != PARDO_OK) return st->code;
    if (!v->sym_scalar) return PARDO_OK;
    const char *scalar = v->var; /* a scalar's one entry: [1] reshaped to [] */
    op = onnx_emit(c, "reshape", &out, 1, &scalar, 1, st);
    return op ? onnx_set_ints(op, "shape", NULL, 0, st) : st->code;
}

/* materialize_sym_here in the block that defined v (a subgraph may read a shape vector of an enclosing graph:
 * its ops go there, before the node whose subgraph reads it). */
static int materialize_sym(onnx_ctx *c, onnx_value *v, pardo_status *st) {
    const int saved = c->block;
    c->block = v->block;
    int rc = materialize_sym_here(c, v, st);
    c->block = saved;
    return rc;
}

const char *onnx_var_of(onnx_ctx *c, onnx_value *v, pardo_status *st) {
    if (v->var) return v->var;
    if (v->konst) {
        pardo_tensor *t = v->konst;
        int rc;
        if (v->initializer && pardo_dtype_is_float(t->dtype)) {
            rc = declare(c, v->name, t->dtype, t->ndim, t->shape, PARDO_VAR_PARAM, st) ? PARDO_OK : st->code;
            if (rc == PARDO_OK) rc = pardo_tensor_list_add(c->weights, v->name, t, st);
        } else {
            rc = const_var(c, v, st);
        }
        if (rc != PARDO_OK) return NULL;
        if (!(v->var = strdup(v->name))) {
            pardo_errorf(st, PARDO_ENOMEM, "out of memory");
            return NULL;
        }
        return v->var;
    }
    if (v->sym) return materialize_sym(c, v, st) == PARDO_OK ? v->var : NULL;
    onnx_bad(c, st, "input '%s' is not defined before this node", v->name);
    return NULL;
}

const char *onnx_state_var(onnx_ctx *c, onnx_value *v, pardo_status *st) {
    char name[512];
    pardo_tensor *t = v->konst;
    /* an initializer keeps its ONNX name where nothing made a var of it yet; else a fresh name */
    if (v->initializer && !v->var) snprintf(name, sizeof name, "%s", v->name);
    else snprintf(name, sizeof name, "%s@state", v->name);
    if (pardo_block_find_var(block0(c), name))
        return onnx_bad(c, st, "'%s' is a running statistic of two BatchNormalization nodes", v->name), NULL;
    if (!declare(c, name, t->dtype, t->ndim, t->shape, PARDO_VAR_STATE, st) ||
        pardo_tensor_list_add(c->weights, name, t, st) != PARDO_OK)
        return NULL;
    if (v->initializer && !v->var && !(v->var = strdup(name))) {
        pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        return NULL;
    }
    return pardo_block_find_var(block0(c), name)->name;
}

/* Infers op i of block 0 with its registry entry (as infer_shapes does,
 * inputs' types from the vars, outputs bound as undeclared temps), so a
 * mapping's type query costs the ops since the last one, not the whole
 * program. PARDO_ENOTFOUND when it cannot (an op type pardo lacks, an input
 * whose type is unknown): the caller then runs the full check, which says
 * why in pardo's own words. */
static int infer_one(onnx_ctx *c, int i, pardo_status *st) {
    pardo_block *b = cur_block(c);
    pardo_op *op = &b->ops[i];
    const pardo_op_def *def = pardo_op_lookup(op->type);
    /* a control-flow op's types come from its blocks: the full check infers them */
    if (!def || op->n_in > 64 || op->n_out > 16 || pardo_op_is_control(op)) return PARDO_ENOTFOUND;
    pardo_type in_types[64], out_types[16];
    const pardo_type *in_ptrs[64];
    const int n_slots = op->n_in > def->n_inputs ? op->n_in : def->n_inputs;
    for (int k = 0; k < n_slots && k < 64; k++) in_ptrs[k] = NULL;
    for (int k = 0; k < op->n_in; k++) {
        if (!op->in[k][0]) continue;
        const pardo_graph_var *v = pardo_program_lookup_var(c->p, c->block, op->in[k], NULL);
        if (!v || v->type.dtype == PARDO_DTYPE_UNKNOWN) return PARDO_ENOTFOUND;
        in_types[k] = v->type;
        in_ptrs[k] = &in_types[k];
    }
    for (int k = 0; k < op->n_out; k++) {
        memset(&out_types[k], 0, sizeof(out_types[k]));
        out_types[k].dtype = PARDO_DTYPE_UNKNOWN;
        out_types[k].ndim = -1;
    }
    op->def = def;
    pardo_status local;
    pardo_status_clear(&local);
    pardo_infer_ctx ctx = {.op = op, .n_in = op->n_in, .in = in_ptrs, .n_out = op->n_out, .out = out_types, .st = &local};
    if (pardo_op_infer(&ctx) != PARDO_OK) return PARDO_ENOTFOUND;
    for (int k = 0; k < op->n_out; k++) {
        if (!op->out[k][0] || out_types[k].dtype == PARDO_DTYPE_UNKNOWN) continue;
        char name[512];
        snprintf(name, sizeof name, "%s", op->out[k]);
        pardo_graph_var *v = pardo_program_lookup_var(c->p, c->block, name, NULL);
        if (!v && !(v = pardo_block_add_var(cur_block(c), name, st))) return st->code;
        if (!v->declared) v->type = out_types[k];
        b = cur_block(c);
        op = &b->ops[i];
    }
    return PARDO_OK;
}

int onnx_type_of(onnx_ctx *c, const char *var, pardo_type *t, pardo_status *st) {
    if (c->types_dirty || c->inferred_ops[c->block] < cur_block(c)->n_ops) {
        bool whole = false;
        for (int i = c->inferred_ops[c->block]; i < cur_block(c)->n_ops && !whole; i++) {
            int rc = infer_one(c, i, st);
            if (rc == PARDO_ENOTFOUND) whole = true;
            else if (rc != PARDO_OK) return rc;
        }
        /* pardo's own check says what is wrong, located (inside a subgraph the program is not whole yet: the
         * type is then unknown) */
        if (whole && c->block == 0) {
            pardo_pass_options opt = pardo_pass_defaults();
            if (pardo_pass_check(c->p, &opt, st) != PARDO_OK) return st->code;
        }
        if (!whole || c->block == 0) c->inferred_ops[c->block] = cur_block(c)->n_ops;
        c->types_dirty = false;
    }
    const pardo_graph_var *v = pardo_program_lookup_var(c->p, c->block, var, NULL);
    if ((!v || v->type.dtype == PARDO_DTYPE_UNKNOWN) && c->block != 0)
        return onnx_unsupported(c, st, "the type of '%s' is not known inside this subgraph (pardo infers a nested If, "
                                "Loop or Scan, or an op whose inputs' types are unknown, only once the whole graph is "
                                "read)", var);
    if (!v || v->type.dtype == PARDO_DTYPE_UNKNOWN) return onnx_bad(c, st, "'%s' has no type", var);
    *t = v->type;
    return PARDO_OK;
}

/* ---- node attrs ---- */

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
    return NULL;
}

int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

double onnx_attr_float(const Onnx__NodeProto *n, const char *name, double dflt) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_f ? (double)a->f : dflt;
}

const char *onnx_attr_string(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t bn) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a || !a->has_s) return dflt;
    size_t l = a->s.len < bn - 1 ? a->s.len : bn - 1;
    memcpy(buf, a->s.data, l);
    buf[l] = '\0';
    return buf;
}

const int64_t *onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int *count) {
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    *count = a ? (int)a->n_ints : 0;
    return a ? a->ints : NULL;
}

int onnx_check_attrs(onnx_ctx *c, const Onnx__NodeProto *n, const char *const *known, pardo_status *st) {
    for (size_t i = 0; i < n->n_attribute; i++) {
        const char *name = n->attribute[i]->name ? n->attribute[i]->name : "";
        bool ok = false;
        for (int k = 0; known[k] && !ok; k++) ok = strcmp(known[k], name) == 0;
        if (!ok) return onnx_unsupported(c, st, "attr '%s' is not supported by pardo's mapping", name);
    }
    return PARDO_OK;
}

/* ---- the model ---- */

/* The type of a graph input: a tensor of a pardo dtype, dims known or -1. */
static int input_type(onnx_ctx *c, const Onnx__ValueInfoProto *vi, pardo_type *t, pardo_status *st) {
    const char *name = vi->name ? vi->name : "";
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: graph input or output '%s' is not a tensor (sequences, maps and "
                            "optionals are not supported)", c->path, name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    pardo_dtype dt = onnx_dtype(tt->elem_type);
    if (dt == PARDO_DTYPE_UNKNOWN)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: graph input '%s' has data type %s; pardo runs float32, float64, "
                            "float16, bfloat16, int8..int64, uint8..uint64 and bool", c->path, name,
                            onnx_dtype_name(tt->elem_type));
    t->dtype = dt;
    if (!tt->shape)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: graph input '%s' has no shape (its rank must be known)", c->path,
                            name);
    if (tt->shape->n_dim > PARDO_MAX_DIMS)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: graph input '%s' has %zu dims, pardo takes at most %d", c->path,
                            name, tt->shape->n_dim, PARDO_MAX_DIMS);
    t->ndim = (int)tt->shape->n_dim;
    for (int i = 0; i < t->ndim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        t->shape[i] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0
                          ? d->dim_value
                          : -1;
    }
    return PARDO_OK;
}

static int read_opset(onnx_ctx *c, const Onnx__ModelProto *m, pardo_status *st) {
    c->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (*d == '\0' || strcmp(d, "ai.onnx") == 0) c->opset = o->has_version ? o->version : 1;
    }
    if (c->opset < 0) return pardo_errorf(st, PARDO_EPARSE, "%s: the model imports no opset of the default domain", c->path);
    if (c->opset < 1 || c->opset > 17)
        return pardo_errorf(st, PARDO_ENOTSUP, "%s: opset %lld of the default domain; pardo reads opsets 1 to 17",
                            c->path, (long long)c->opset);
    return PARDO_OK;
}

static int add_inputs(onnx_ctx *c, const Onnx__GraphProto *g, const pardo_tensor_list *fixed, pardo_status *st) {
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !*t->name) return pardo_errorf(st, PARDO_EPARSE, "%s: initializer %zu has no name", c->path, i);
        char what[512];
        snprintf(what, sizeof what, "%s: initializer '%s'", c->path, t->name);
        onnx_value *v = onnx_value_find(c, t->name);
        if (v) return pardo_errorf(st, PARDO_EPARSE, "%s is given twice", what);
        if (!(v = value_get(c, t->name, st))) return st->code;
        if (onnx_tensor_to_pardo(t, c->dir, what, &v->konst, st) != PARDO_OK) return st->code;
        v->initializer = true;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi->name || !*vi->name) return pardo_errorf(st, PARDO_EPARSE, "%s: graph input %zu has no name", c->path, i);
        if (onnx_value_find(c, vi->name)) continue; /* an initializer listed as an input too (IR < 4): its default */
        pardo_tensor *known = fixed ? pardo_tensor_list_find(fixed, vi->name) : NULL;
        if (known) {
            onnx_value *v = value_get(c, vi->name, st);
            if (!v) return st->code;
            v->konst = pardo_tensor_retain(known);
            continue;
        }
        pardo_type t;
        if (input_type(c, vi, &t, st) != PARDO_OK) return st->code;
        onnx_value *v = value_get(c, vi->name, st);
        if (!v || !declare(c, vi->name, t.dtype, t.ndim, t.shape, PARDO_VAR_FEED, st)) return st->code;
        if (!(v->var = strdup(vi->name))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    }
    return PARDO_OK;
}

static int map_nodes(onnx_ctx *c, const Onnx__GraphProto *g, pardo_status *st) {
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        c->node = n;
        c->node_index = (int)i;
        if (!n->op_type || !*n->op_type) return onnx_bad(c, st, "no op type");
        if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
            return onnx_unsupported(c, st, "domain '%s'; pardo reads the default domain only", n->domain);
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k] && *n->input[k] && !onnx_value_find(c, n->input[k]))
                return onnx_bad(c, st, "input %zu '%s' is not a graph input, an initializer or an earlier node's "
                                "output", k, n->input[k]);
        onnx_map_fn fn = onnx_find_mapping(n->op_type);
        if (!fn)
            return onnx_unsupported(c, st, "op type %s is not supported; pardo maps %s", n->op_type,
                                    onnx_supported_list());
        bool folded = false;
        if (onnx_try_fold(c, n, &folded, st) != PARDO_OK) return st->code;
        if (!folded && fn(c, n, st) != PARDO_OK) return st->code;
    }
    c->node = NULL;
    return PARDO_OK;
}

/* Every graph output has a var of its ONNX name (every value's var is named as the value is). */
static int add_outputs(onnx_ctx *c, const Onnx__GraphProto *g, pardo_status *st) {
    if (g->n_output == 0) return pardo_errorf(st, PARDO_EPARSE, "%s: the graph has no outputs", c->path);
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i]->name;
        onnx_value *v = name ? onnx_value_find(c, name) : NULL;
        if (!v) return pardo_errorf(st, PARDO_EPARSE, "%s: graph output '%s' is computed by no node", c->path,
                                    name ? name : "");
        if (!onnx_var_of(c, v, st)) return st->code; /* a constant or a shape vector: its var, named as it is */
    }
    return PARDO_OK;
}

int onnx_subgraph(onnx_ctx *c, const Onnx__NodeProto *n, const char *attr, const pardo_type *in_types, int n_in,
                  int *block, pardo_status *st) {
    const Onnx__AttributeProto *a = onnx_attr(n, attr);
    if (!a || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !a->g)
        return onnx_bad(c, st, "attr '%s' must be a graph", attr);
    const Onnx__GraphProto *g = a->g;
    if ((int)g->n_input != n_in)
        return onnx_bad(c, st, "subgraph '%s' has %zu inputs, expected %d", attr, g->n_input, n_in);
    if (g->n_output == 0) return onnx_bad(c, st, "subgraph '%s' has no outputs", attr);
    int b = pardo_program_add_block(c->p, c->block, st);
    if (b < 0) return st->code;
    int *inferred = realloc(c->inferred_ops, sizeof(int) * (size_t)(b + 1));
    if (!inferred) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    c->inferred_ops = inferred;
    for (; c->n_inferred <= b; c->n_inferred++) c->inferred_ops[c->n_inferred] = 0;
    const int saved_block = c->block, saved_index = c->node_index;
    const Onnx__NodeProto *saved_node = c->node;
    c->block = b;
    int rc = PARDO_OK;
    for (int i = 0; rc == PARDO_OK && i < n_in; i++) {
        const char *name = g->input[i]->name;
        onnx_value *v = NULL;
        if (!name || !*name) rc = onnx_bad(c, st, "subgraph '%s': input %d has no name", attr, i);
        else if (onnx_value_find(c, name))
            rc = onnx_unsupported(c, st, "subgraph '%s': input '%s' is also a name of the enclosing graph (pardo needs "
                                  "every name of the model unique)", attr, name);
        else if (!(v = value_get(c, name, st)) || !(v->var = strdup(name)))
            rc = st->code ? st->code : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_graph_var *gv = rc == PARDO_OK ? pardo_block_add_var(cur_block(c), name, st) : NULL;
        if (rc == PARDO_OK && !gv) rc = st->code;
        if (rc == PARDO_OK) gv->type = in_types[i]; /* undeclared: validate binds it to the op's body_in */
    }
    for (size_t i = 0; rc == PARDO_OK && i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        char what[512];
        snprintf(what, sizeof what, "%s: subgraph '%s': initializer '%s'", c->path, attr, t->name ? t->name : "");
        onnx_value *v = t->name && *t->name && !onnx_value_find(c, t->name) ? value_get(c, t->name, st) : NULL;
        if (!v) rc = st->code ? st->code : pardo_errorf(st, PARDO_EPARSE, "%s: no name, or a name given twice", what);
        else rc = onnx_tensor_to_pardo(t, c->dir, what, &v->konst, st); /* a constant, not a param: block 0 holds it */
    }
    if (rc == PARDO_OK && (rc = map_nodes(c, g, st)) != PARDO_OK)
        pardo_status_suffix(st, " (in subgraph '%s' of node '%s', index %d, %s)", attr, n->name ? n->name : "",
                            saved_index, n->op_type ? n->op_type : "?");
    for (size_t i = 0; rc == PARDO_OK && i < g->n_output; i++) {
        const char *name = g->output[i]->name;
        onnx_value *v = name ? onnx_value_find(c, name) : NULL;
        if (!v) rc = onnx_bad(c, st, "subgraph '%s': output '%s' is computed by no node", attr, name ? name : "");
        else if (!onnx_var_of(c, v, st)) rc = st->code;
    }
    c->block = saved_block;
    c->node = saved_node;
    c->node_index = saved_index;
    if (rc == PARDO_OK) *block = b;
    return rc;
}

static void ctx_free(onnx_ctx *c) {
    for (int i = 0; i < c->n_vals; i++) {
        free(c->vals[i]->name);
        free(c->vals[i]->var);
        pardo_tensor_release(c->vals[i]->konst);
        free(c->vals[i]->sym);
        free(c->vals[i]);
    }
    free(c->vals);
    free(c->inferred_ops);
    free(c->slot);
    free(c->dir);
    pardo_program_free(c->p);
}

int pardo_onnx_import(const unsigned char *buf, size_t n, const char *path, pardo_program **out,
                      pardo_tensor_list *weights, pardo_status *st) {
    return pardo_onnx_import_fixed(buf, n, path, NULL, out, weights, st);
}

int pardo_onnx_import_fixed(const unsigned char *buf, size_t n, const char *path, const pardo_tensor_list *fixed,
                            pardo_program **out, pardo_tensor_list *weights, pardo_status *st) {
    *out = NULL;
    if (!path) path = "<input>";
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, n, buf);
    if (!m) return pardo_errorf(st, PARDO_EPARSE, "%s: not a valid ONNX model (the protobuf does not parse: truncated "
                                "or not a ModelProto)", path);
    onnx_ctx c;
    memset(&c, 0, sizeof c);
    c.path = path;
    pardo_tensor_list w;
    pardo_tensor_list_init(&w);
    c.weights = &w;
    c.n_inferred = 1;
    int rc = PARDO_OK;
    const char *slash = strrchr(path, '/');
    c.dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    if (!c.dir || !(c.p = pardo_program_new()) || pardo_program_add_block(c.p, -1, st) < 0 ||
        !(c.inferred_ops = calloc(1, sizeof(int)))) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (!(c.p->path = strdup(path))) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (!m->graph) {
        rc = pardo_errorf(st, PARDO_EPARSE, "%s: the model has no graph", path);
        goto done;
    }
    if ((rc = read_opset(&c, m, st)) != PARDO_OK) goto done;
    if (m->graph->name && *m->graph->name && !(c.p->name = strdup(m->graph->name))) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((rc = add_inputs(&c, m->graph, fixed, st)) != PARDO_OK) goto done;
    if ((rc = map_nodes(&c, m->graph, st)) != PARDO_OK) goto done;
    if ((rc = add_outputs(&c, m->graph, st)) != PARDO_OK) goto done;
    pardo_pass_options opt = pardo_pass_defaults();
    if ((rc = pardo_pass_check(c.p, &opt, st)) != PARDO_OK) goto done;
    for (int i = 0; i < w.n; i++)
        if ((rc = pardo_tensor_list_add(weights, w.names[i], w.tensors[i], st)) != PARDO_OK) goto done;
    *out = c.p;
    c.p = NULL;
done:
    pardo_tensor_list_clear(&w);
    ctx_free(&c);
    onnx__model_proto__free_unpacked(m, NULL);
    return rc;
}
