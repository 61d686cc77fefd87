/* onnx_control.c - the mappings of ONNX's control flow: If, Loop and Scan
 * to pardo's if, loop and scan (ops/control_flow.c). Each GRAPH attr
 * becomes a block, a child of the node's (onnx_subgraph); the op lists the
 * block's inputs and outputs by var name in its attrs (body_in, body_out,
 * then_out, else_out), and among its inputs every enclosing var the blocks
 * read, which validate asks for. */
#include <stdlib.h>
#include <string.h>

#include "io/onnx_internal.h"
#include "op.h"
#include "pass.h"

/* At most this many inputs of an op (the executor's limit). */
#define MAX_IN 64

/* A list of var names, borrowed from the program (or the value table). */
typedef struct name_list {
    const char *name[MAX_IN];
    int n;
} name_list;

static bool has(const name_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0) return true;
    return false;
}

static int push(onnx_ctx *c, name_list *l, const char *name, pardo_status *st) {
    if (has(l, name)) return PARDO_OK;
    if (l->n == MAX_IN)
        return onnx_unsupported(c, st, "its subgraphs read more than %d values of the enclosing graphs", MAX_IN);
    l->name[l->n++] = name;
    return PARDO_OK;
}

/* Whether an op of block b writes name, or b binds it as one of subgraph g's inputs. */
static bool local_to(const pardo_program *p, int b, const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_input; i++)
        if (strcmp(g->input[i]->name, name) == 0) return true;
    const pardo_block *blk = &p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++)
        if (pardo_op_writes(&blk->ops[i], name)) return true;
    return false;
}

/* Appends to outer the vars the ops of block b (subgraph g, in attr `attr` of
 * node n) read from outside it, and those of its outputs that are outside. */
static int outer_reads(onnx_ctx *c, const Onnx__NodeProto *n, const char *attr, int b, name_list *outer,
                       pardo_status *st) {
    const Onnx__GraphProto *g = onnx_attr(n, attr)->g;
    const pardo_block *blk = &c->p->blocks[b];
    for (int i = 0; i < blk->n_ops; i++)
        for (int k = 0; k < blk->ops[i].n_in; k++) {
            const char *name = blk->ops[i].in[k];
            if (name[0] && !local_to(c->p, b, g, name) && push(c, outer, name, st) != PARDO_OK) return st->code;
        }
    for (size_t i = 0; i < g->n_output; i++) {
        const onnx_value *v = onnx_value_find(c, g->output[i]->name);
        if (!local_to(c->p, b, g, v->var) && push(c, outer, v->var, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}

/* Sets attr key of op to the list of the vars of subgraph g's inputs (outputs: `outputs`). */
static int set_graph_names(onnx_ctx *c, pardo_op *op, const char *key, const Onnx__GraphProto *g, bool outputs,
                           pardo_status *st) {
    pardo_value *a = pardo_value_new_array();
    if (!a) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    const size_t n = outputs ? g->n_output : g->n_input;
    for (size_t i = 0; i < n; i++) {
        const char *name = outputs ? onnx_value_find(c, g->output[i]->name)->var : g->input[i]->name;
        pardo_value *x = pardo_value_new_string(name);
        int rc = x ? pardo_value_append(a, x, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        pardo_value_free(x);
        if (rc != PARDO_OK) {
            pardo_value_free(a);
            return rc;
        }
    }
    return pardo_op_set_attr(op, key, a, st);
}

/* Emits op `type` reading the n_lead vars `lead` then the outer ones, writing the node's outputs. */
static pardo_op *emit_control(onnx_ctx *c, const Onnx__NodeProto *n, const char *type, const char *const *lead,
                              int n_lead, const name_list *outer, pardo_status *st) {
    const char *in[2 * MAX_IN], *out[MAX_IN];
    if (n_lead + outer->n > MAX_IN || n->n_output > MAX_IN) {
        onnx_unsupported(c, st, "%d inputs (with the values its subgraphs read) and %zu outputs; pardo takes at most "
                         "%d of each", n_lead + outer->n, n->n_output, MAX_IN);
        return NULL;
    }
    for (int i = 0; i < n_lead; i++) in[i] = lead[i];
    for (int i = 0; i < outer->n; i++) in[n_lead + i] = outer->name[i];
    for (size_t i = 0; i < n->n_output; i++)
        if (!(out[i] = n->output[i] && *n->output[i] ? onnx_out_var(c, n, (int)i, st) : "")) return NULL;
    return onnx_emit(c, type, in, n_lead + outer->n, out, (int)n->n_output, st);
}

/* The type of var `var` without dim ax (what a scan binds per slice). */
static int drop_dim(onnx_ctx *c, const char *var, int64_t axis, pardo_type *t, pardo_status *st) {
    if (onnx_type_of(c, var, t, st) != PARDO_OK) return st->code;
    if (t->ndim < 1) return onnx_bad(c, st, "input '%s' has rank %d: no dim to scan", var, t->ndim);
    if (axis < 0) axis += t->ndim;
    if (axis < 0 || axis >= t->ndim)
        return onnx_bad(c, st, "axis %lld is out of range for '%s' of rank %d", (long long)axis, var, t->ndim);
    for (int d = (int)axis; d + 1 < t->ndim; d++) t->shape[d] = t->shape[d + 1];
    t->ndim--;
    return PARDO_OK;
}

int onnx_map_if(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"then_branch", "else_branch", NULL};
    int then_b, else_b;
    name_list outer = {.n = 0};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *cond = onnx_in_var(c, n, 0, st);
    if (!cond) return st->code;
    if (onnx_subgraph(c, n, "then_branch", NULL, 0, &then_b, st) != PARDO_OK ||
        onnx_subgraph(c, n, "else_branch", NULL, 0, &else_b, st) != PARDO_OK)
        return st->code;
    const Onnx__GraphProto *tg = onnx_attr(n, "then_branch")->g, *eg = onnx_attr(n, "else_branch")->g;
    if (tg->n_output != n->n_output || eg->n_output != n->n_output)
        return onnx_bad(c, st, "%zu outputs, but then_branch gives %zu and else_branch %zu", n->n_output,
                        tg->n_output, eg->n_output);
    if (outer_reads(c, n, "then_branch", then_b, &outer, st) != PARDO_OK ||
        outer_reads(c, n, "else_branch", else_b, &outer, st) != PARDO_OK)
        return st->code;
    pardo_op *op = emit_control(c, n, "if", &cond, 1, &outer, st);
    if (!op || onnx_set_int(op, "then_block", then_b, st) != PARDO_OK ||
        onnx_set_int(op, "else_block", else_b, st) != PARDO_OK ||
        set_graph_names(c, op, "then_out", tg, true, st) != PARDO_OK)
        return st->code;
    return set_graph_names(c, op, "else_out", eg, true, st);
}

int onnx_map_loop(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"body", NULL};
    const char *lead[MAX_IN];
    pardo_type types[MAX_IN];
    name_list outer = {.n = 0};
    int body;
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const int n_lead = n->n_input < 2 ? 2 : (int)n->n_input;
    if (n_lead > MAX_IN) return onnx_unsupported(c, st, "%d inputs; pardo takes at most %d", n_lead, MAX_IN);
    types[0] = (pardo_type){.dtype = PARDO_I64, .ndim = 0};
    types[1] = (pardo_type){.dtype = PARDO_BOOL, .ndim = 0};
    for (int i = 0; i < n_lead; i++) {
        if (!(lead[i] = i < 2 ? onnx_opt_var(c, n, i, st) : onnx_in_var(c, n, i, st))) return st->code;
        if (i >= 2 && onnx_type_of(c, lead[i], &types[i], st) != PARDO_OK) return st->code;
    }
    if (onnx_subgraph(c, n, "body", types, n_lead, &body, st) != PARDO_OK) return st->code;
    const Onnx__GraphProto *g = onnx_attr(n, "body")->g;
    if ((int)g->n_output - 1 != (int)n->n_output)
        return onnx_bad(c, st, "%zu outputs, but the body gives %zu (cond, then the carried values and scan outputs)",
                        n->n_output, g->n_output);
    if (outer_reads(c, n, "body", body, &outer, st) != PARDO_OK) return st->code;
    pardo_op *op = emit_control(c, n, "loop", lead, n_lead, &outer, st);
    if (!op || onnx_set_int(op, "body", body, st) != PARDO_OK || set_graph_names(c, op, "body_in", g, false, st) != PARDO_OK)
        return st->code;
    return set_graph_names(c, op, "body_out", g, true, st);
}

int onnx_map_scan(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known8[] = {"body", "num_scan_inputs", "directions", NULL};
    static const char *const known[] = {"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                                        "scan_output_axes", "scan_output_directions", NULL};
    const bool batch = c->opset < 9;
    const char *lead[MAX_IN];
    pardo_type types[MAX_IN];
    name_list outer = {.n = 0};
    int body, n_axes = 0, n_dirs = 0;
    if (onnx_check_attrs(c, n, batch ? known8 : known, st) != PARDO_OK) return st->code;
    const int off = batch ? 1 : 0, n_lead = (int)n->n_input, n_body_in = n_lead - off;
    const int64_t n_scan = onnx_attr_int(n, "num_scan_inputs", 0);
    if (n_lead > MAX_IN) return onnx_unsupported(c, st, "%d inputs; pardo takes at most %d", n_lead, MAX_IN);
    if (n_scan < 1 || n_scan > n_body_in)
        return onnx_bad(c, st, "num_scan_inputs is %lld, expected 1 to %d", (long long)n_scan, n_body_in);
    const int n_state = n_body_in - (int)n_scan;
    const int64_t *axes = onnx_attr_ints(n, "scan_input_axes", &n_axes);
    const int64_t *dirs = onnx_attr_ints(n, batch ? "directions" : "scan_input_directions", &n_dirs);
    if ((axes && n_axes != n_scan) || (dirs && n_dirs != n_scan))
        return onnx_bad(c, st, "scan_input_axes or the directions list %d and %d entries, expected %lld", n_axes,
                        n_dirs, (long long)n_scan);
    if (batch && !(lead[0] = onnx_opt_var(c, n, 0, st))) return st->code;
    for (int i = off; i < n_lead; i++) {
        const int k = i - off; /* body input k */
        if (!(lead[i] = onnx_in_var(c, n, i, st))) return st->code;
        if (k < n_state && !batch && onnx_type_of(c, lead[i], &types[k], st) != PARDO_OK) return st->code;
        if (k < n_state && batch && drop_dim(c, lead[i], 0, &types[k], st) != PARDO_OK) return st->code;
        if (k >= n_state && drop_dim(c, lead[i], batch ? 1 : axes ? axes[k - n_state] : 0, &types[k], st) != PARDO_OK)
            return st->code;
        if (k >= n_state && batch) { /* and the batch dim */
            for (int d = 0; d + 1 < types[k].ndim; d++) types[k].shape[d] = types[k].shape[d + 1];
            types[k].ndim--;
        }
    }
    if (onnx_subgraph(c, n, "body", types, n_body_in, &body, st) != PARDO_OK) return st->code;
    const Onnx__GraphProto *g = onnx_attr(n, "body")->g;
    if (g->n_output != n->n_output || (int)g->n_output < n_state)
        return onnx_bad(c, st, "%zu outputs, but the body gives %zu (the %d states, then the scan outputs)",
                        n->n_output, g->n_output, n_state);
    if (outer_reads(c, n, "body", body, &outer, st) != PARDO_OK) return st->code;
    pardo_op *op = emit_control(c, n, "scan", lead, n_lead, &outer, st);
    if (!op || onnx_set_int(op, "body", body, st) != PARDO_OK ||
        onnx_set_int(op, "num_scan_inputs", n_scan, st) != PARDO_OK ||
        set_graph_names(c, op, "body_in", g, false, st) != PARDO_OK ||
        set_graph_names(c, op, "body_out", g, true, st) != PARDO_OK)
        return st->code;
    if (batch && onnx_set_bool(op, "batch", true, st) != PARDO_OK) return st->code;
    if (dirs && onnx_set_ints(op, "scan_input_directions", dirs, n_dirs, st) != PARDO_OK) return st->code;
    static const char *const lists[] = {"scan_input_axes", "scan_output_axes", "scan_output_directions"};
    for (int k = 0; !batch && k < 3; k++) {
        int cnt = 0;
        const int64_t *v = onnx_attr_ints(n, lists[k], &cnt);
        if (v && onnx_set_ints(op, lists[k], v, cnt, st) != PARDO_OK) return st->code;
    }
    return PARDO_OK;
}
