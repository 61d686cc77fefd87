/* graph.c - building, copying and querying the Program IR (see graph.h). */
#include "core/graph.h"

#include "core/name_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pardo_program *pardo_program_new(void) {
    pardo_program *p = calloc(1, sizeof(*p));
    if (p) p->version = 1;
    return p;
}

static void var_clear(pardo_graph_var *v) {
    free(v->name);
    free(v->value);
}

static void op_clear(pardo_op *op) {
    free(op->type);
    free(op->name);
    for (int i = 0; i < op->n_in; i++) free(op->in[i]);
    for (int i = 0; i < op->n_out; i++) free(op->out[i]);
    free(op->in);
    free(op->out);
    pardo_value_free(op->attrs);
}

void pardo_block_clear(pardo_block *b) {
    pardo_block_vars_changed(b);
    for (int i = 0; i < b->n_vars; i++) var_clear(&b->vars[i]);
    for (int i = 0; i < b->n_ops; i++) op_clear(&b->ops[i]);
    free(b->vars);
    free(b->ops);
    b->vars = NULL;
    b->ops = NULL;
    b->n_vars = b->cap_vars = b->n_ops = b->cap_ops = 0;
}

void pardo_program_free(pardo_program *p) {
    if (!p) return;
    for (int b = 0; b < p->n_blocks; b++) pardo_block_clear(&p->blocks[b]);
    free(p->blocks);
    free(p->name);
    free(p->path);
    pardo_value_free(p->doc);
    free(p);
}

static char *dup_or_null(const char *s, bool *oom) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = true;
    return d;
}

static char **dup_names(char **names, int n, bool *oom) {
    if (n == 0) return NULL;
    char **d = calloc((size_t)n, sizeof(*d));
    if (!d) {
        *oom = true;
        return NULL;
    }
    for (int i = 0; i < n; i++) d[i] = dup_or_null(names[i], oom);
    return d;
}

pardo_program *pardo_program_clone(const pardo_program *src) {
    bool oom = false;
    pardo_program *p = pardo_program_new();
    if (!p) return NULL;
    p->version = src->version;
    p->name = dup_or_null(src->name, &oom);
    p->path = dup_or_null(src->path, &oom);
    if (src->doc && !(p->doc = pardo_value_clone(src->doc))) oom = true;
    if (src->n_blocks > 0) {
        p->blocks = calloc((size_t)src->n_blocks, sizeof(*p->blocks));
        if (!p->blocks) goto fail;
        p->n_blocks = src->n_blocks;
    }
    for (int b = 0; b < src->n_blocks && !oom; b++) {
        const pardo_block *sb = &src->blocks[b];
        pardo_block *db = &p->blocks[b];
        *db = *sb;
        db->vars = NULL;
        db->ops = NULL;
        db->n_vars = db->n_ops = db->cap_vars = db->cap_ops = 0;
        db->var_index = NULL;
        db->n_indexed = 0;
        if (sb->n_vars && !(db->vars = calloc((size_t)sb->n_vars, sizeof(*db->vars)))) goto fail;
        db->cap_vars = sb->n_vars;
        for (int i = 0; i < sb->n_vars; i++, db->n_vars++) {
            db->vars[i] = sb->vars[i];
            db->vars[i].name = dup_or_null(sb->vars[i].name, &oom);
            db->vars[i].value = NULL;
            if (sb->vars[i].value) {
                size_t bytes = (size_t)sb->vars[i].n_value * sizeof(double);
                db->vars[i].value = malloc(bytes ? bytes : 1);
                if (!db->vars[i].value) oom = true;
                else memcpy(db->vars[i].value, sb->vars[i].value, bytes);
            }
        }
        if (sb->n_ops && !(db->ops = calloc((size_t)sb->n_ops, sizeof(*db->ops)))) goto fail;
        db->cap_ops = sb->n_ops;
        for (int i = 0; i < sb->n_ops; i++, db->n_ops++) {
            const pardo_op *so = &sb->ops[i];
            pardo_op *d = &db->ops[i];
            *d = *so;
            d->type = dup_or_null(so->type, &oom);
            d->name = dup_or_null(so->name, &oom);
            d->in = dup_names(so->in, so->n_in, &oom);
            d->out = dup_names(so->out, so->n_out, &oom);
            d->attrs = NULL;
            if (so->attrs && !(d->attrs = pardo_value_clone(so->attrs))) oom = true;
        }
    }
    if (oom) goto fail;
    return p;
fail:
    pardo_program_free(p);
    return NULL;
}

int pardo_program_add_block(pardo_program *p, int parent, pardo_status *st) {
    pardo_block *blocks = realloc(p->blocks, (size_t)(p->n_blocks + 1) * sizeof(*blocks));
    if (!blocks) return pardo_errorf(st, PARDO_ENOMEM, "out of memory adding a block");
    p->blocks = blocks;
    memset(&blocks[p->n_blocks], 0, sizeof(*blocks));
    blocks[p->n_blocks].parent = parent;
    return p->n_blocks++;
}

pardo_graph_var *pardo_block_add_var(pardo_block *b, const char *name, pardo_status *st) {
    if (b->n_vars == b->cap_vars) {
        int cap = b->cap_vars ? b->cap_vars * 2 : 8;
        pardo_graph_var *vars = realloc(b->vars, (size_t)cap * sizeof(*vars));
        if (!vars) goto oom;
        b->vars = vars;
        b->cap_vars = cap;
    }
    pardo_graph_var *v = &b->vars[b->n_vars];
    memset(v, 0, sizeof(*v));
    v->type.dtype = PARDO_DTYPE_UNKNOWN;
    v->type.ndim = -1;
    if (!(v->name = strdup(name))) goto oom;
    b->n_vars++;
    return v;
oom:
    pardo_errorf(st, PARDO_ENOMEM, "out of memory adding var '%s'", name);
    return NULL;
}

pardo_op *pardo_block_add_op(pardo_block *b, const char *type, pardo_status *st) {
    if (b->n_ops == b->cap_ops) {
        int cap = b->cap_ops ? b->cap_ops * 2 : 8;
        pardo_op *ops = realloc(b->ops, (size_t)cap * sizeof(*ops));
        if (!ops) goto oom;
        b->ops = ops;
        b->cap_ops = cap;
    }
    pardo_op *op = &b->ops[b->n_ops];
    memset(op, 0, sizeof(*op));
    if (!(op->type = strdup(type))) goto oom;
    b->n_ops++;
    return op;
oom:
    pardo_errorf(st, PARDO_ENOMEM, "out of memory adding op '%s'", type);
    return NULL;
}

pardo_op *pardo_block_add_op_copy(pardo_block *b, const pardo_op *src, pardo_status *st) {
    /* copy what src owns first: src may live in b->ops, which add_op may move */
    pardo_value *attrs = src->attrs ? pardo_value_clone(src->attrs) : NULL;
    char *name = src->name ? strdup(src->name) : NULL;
    int n_in = src->n_in, n_out = src->n_out, line = src->line, col = src->col;
    pardo_op_role role = src->role;
    char **in = src->in, **out = src->out;
    pardo_op *op = NULL;
    if ((src->attrs && !attrs) || (src->name && !name)) goto oom;
    if (!(op = pardo_block_add_op(b, src->type, st))) goto fail;
    op->attrs = attrs;
    op->name = name;
    op->role = role;
    op->line = line;
    op->col = col;
    for (int k = 0; k < n_in; k++)
        if (pardo_op_add_input(op, in[k], st) != PARDO_OK) return NULL;
    for (int k = 0; k < n_out; k++)
        if (pardo_op_add_output(op, out[k], st) != PARDO_OK) return NULL;
    return op;
oom:
    pardo_errorf(st, PARDO_ENOMEM, "out of memory copying op '%s'", src->type);
fail:
    pardo_value_free(attrs);
    free(name);
    return NULL;
}

pardo_graph_var *pardo_block_add_var_copy(pardo_block *b, const pardo_graph_var *src, pardo_status *st) {
    pardo_graph_var copy = *src; /* src may live in b->vars */
    double *value = NULL;
    if (src->value) {
        size_t bytes = (size_t)src->n_value * sizeof(double);
        if (!(value = malloc(bytes ? bytes : 1))) {
            pardo_errorf(st, PARDO_ENOMEM, "out of memory copying var '%s'", src->name);
            return NULL;
        }
        memcpy(value, src->value, bytes);
    }
    pardo_graph_var *v = pardo_block_add_var(b, copy.name, st);
    if (!v) {
        free(value);
        return NULL;
    }
    char *name = v->name;
    *v = copy;
    v->name = name;
    v->value = value;
    return v;
}

static int add_name(char ***list, int *n, const char *name, pardo_status *st) {
    char **l = realloc(*list, (size_t)(*n + 1) * sizeof(*l));
    if (!l) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    *list = l;
    if (!(l[*n] = strdup(name))) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    (*n)++;
    return PARDO_OK;
}

int pardo_op_add_input(pardo_op *op, const char *name, pardo_status *st) {
    return add_name(&op->in, &op->n_in, name, st);
}

int pardo_op_add_output(pardo_op *op, const char *name, pardo_status *st) {
    return add_name(&op->out, &op->n_out, name, st);
}

void pardo_block_vars_changed(pardo_block *b) {
    if (b->var_index) pardo_name_index_free(b->var_index);
    free(b->var_index);
    b->var_index = NULL;
    b->n_indexed = 0;
}

/* Brings b's var index up to vars[0..n_vars); false (index dropped) when
 * out of memory. Fewer vars than indexed means some were dropped without
 * pardo_block_vars_changed: the index starts again (its keys are not read). */
static bool index_vars(pardo_block *b) {
    if (b->n_indexed > b->n_vars) pardo_block_vars_changed(b);
    if (!b->var_index && !(b->var_index = calloc(1, sizeof(*b->var_index)))) return false;
    pardo_status st;
    if (pardo_name_index_reserve(b->var_index, (size_t)b->n_vars, &st) != PARDO_OK) goto fail;
    for (; b->n_indexed < b->n_vars; b->n_indexed++)
        if (pardo_name_index_add(b->var_index, b->vars[b->n_indexed].name, b->n_indexed, NULL, &st) != PARDO_OK)
            goto fail;
    return true;
fail:
    pardo_block_vars_changed(b);
    return false;
}

pardo_graph_var *pardo_block_find_var(const pardo_block *b, const char *name) {
    if (b->n_vars >= PARDO_BLOCK_INDEX_MIN) {
        pardo_block *m = (pardo_block *)b; /* the index is a cache of the vars, not part of the block's value */
        if ((m->n_indexed == m->n_vars && m->var_index) || index_vars(m)) {
            int i = pardo_name_index_get(m->var_index, name);
            return i >= 0 ? &m->vars[i] : NULL;
        }
    }
    for (int i = 0; i < b->n_vars; i++)
        if (strcmp(b->vars[i].name, name) == 0) return &b->vars[i];
    return NULL;
}

void pardo_program_index_vars(const pardo_program *p) {
    for (int b = 0; b < p->n_blocks; b++)
        if (p->blocks[b].n_vars >= PARDO_BLOCK_INDEX_MIN) index_vars(&p->blocks[b]);
}

static int count_named(char *const *names, int n, const char *name) {
    int c = 0;
    for (int k = 0; k < n; k++) c += names[k][0] && strcmp(names[k], name) == 0;
    return c;
}

int pardo_op_reads(const pardo_op *op, const char *name) { return count_named(op->in, op->n_in, name); }
int pardo_op_writes(const pardo_op *op, const char *name) { return count_named(op->out, op->n_out, name); }

int pardo_block_last_use(const pardo_block *b, const char *name) {
    for (int i = b->n_ops - 1; i >= 0; i--) {
        const pardo_op *op = &b->ops[i];
        if (pardo_op_reads(op, name) || pardo_op_writes(op, name) || pardo_value_names(op->attrs, name)) return i;
    }
    return -1;
}

/* Sets every string v holds at any depth (what pardo_value_names matches) to i. */
static int note_attr_names(const pardo_value *v, int i, pardo_name_index *ix, pardo_status *st) {
    if (!v) return PARDO_OK;
    if (v->kind == PARDO_V_STRING) return pardo_name_index_set(ix, v->string, i, st);
    if (v->kind != PARDO_V_ARRAY && v->kind != PARDO_V_OBJECT) return PARDO_OK;
    for (int k = 0; k < v->n; k++) {
        int rc = note_attr_names(&v->items[k], i, ix, st);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

int pardo_block_last_uses(const pardo_block *b, pardo_name_index *ix, pardo_status *st) {
    for (int i = 0; i < b->n_ops; i++) {
        const pardo_op *op = &b->ops[i];
        int rc = PARDO_OK;
        for (int k = 0; rc == PARDO_OK && k < op->n_in; k++)
            if (op->in[k][0]) rc = pardo_name_index_set(ix, op->in[k], i, st);
        for (int k = 0; rc == PARDO_OK && k < op->n_out; k++)
            if (op->out[k][0]) rc = pardo_name_index_set(ix, op->out[k], i, st);
        if (rc == PARDO_OK) rc = note_attr_names(op->attrs, i, ix, st);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

bool pardo_ops_conflict(const pardo_op *a, const pardo_op *b) {
    for (int k = 0; k < a->n_out; k++)
        if (a->out[k][0] && (pardo_op_writes(b, a->out[k]) || pardo_op_reads(b, a->out[k]))) return true;
    for (int k = 0; k < b->n_out; k++)
        if (b->out[k][0] && pardo_op_reads(a, b->out[k])) return true;
    return false;
}

bool pardo_op_writes_state(const pardo_program *p, int block, const pardo_op *op) {
    for (int k = 0; k < op->n_out; k++) {
        const pardo_graph_var *v = op->out[k][0] ? pardo_program_lookup_var(p, block, op->out[k], NULL) : NULL;
        if (v && (v->role == PARDO_VAR_PARAM || v->role == PARDO_VAR_STATE)) return true;
    }
    return false;
}

static bool touches_grad(const pardo_op *op) {
    for (int k = 0; k < op->n_in; k++)
        if (strstr(op->in[k], "@GRAD")) return true;
    for (int k = 0; k < op->n_out; k++)
        if (strstr(op->out[k], "@GRAD")) return true;
    return false;
}

/* True when op writes a param or state var and nothing else (an update:
 * not batch_norm, whose output is a temp beside its running statistics). */
static bool writes_only_state(const pardo_program *p, int block, const pardo_op *op) {
    bool any = false;
    for (int k = 0; k < op->n_out; k++) {
        if (!op->out[k][0]) continue;
        const pardo_graph_var *v = pardo_program_lookup_var(p, block, op->out[k], NULL);
        if (!v || (v->role != PARDO_VAR_PARAM && v->role != PARDO_VAR_STATE)) return false;
        any = true;
    }
    return any;
}

pardo_op_role pardo_op_effective_role(const pardo_program *p, int block, const pardo_op *op) {
    if (op->role != PARDO_OP_ROLE_NONE) return op->role;
    return writes_only_state(p, block, op) ? PARDO_OP_OPTIMIZE
           : touches_grad(op)                  ? PARDO_OP_BACKWARD
                                               : PARDO_OP_FORWARD;
}

bool pardo_name_listed(const char *const *names, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (names[k] && strcmp(names[k], name) == 0) return true;
    return false;
}

pardo_graph_var *pardo_program_lookup_var(const pardo_program *p, int block, const char *name, int *owner) {
    for (int b = block, hops = 0; b >= 0 && b < p->n_blocks && hops <= p->n_blocks; b = p->blocks[b].parent, hops++) {
        pardo_graph_var *v = pardo_block_find_var(&p->blocks[b], name);
        if (v) {
            if (owner) *owner = b;
            return v;
        }
    }
    return NULL;
}

static size_t where_prefix(const pardo_program *p, int line, int col, char *buf, size_t n) {
    int w = 0;
    if (p->path && line > 0 && col < 0) w = snprintf(buf, n, "%s: ONNX node %d: ", p->path, line - 1); /* onnx.h */
    else if (p->path && line > 0) w = snprintf(buf, n, "%s:%d:%d: ", p->path, line, col);
    else if (p->path) w = snprintf(buf, n, "%s: ", p->path);
    else if (n) buf[0] = '\0';
    return w < 0 ? 0 : ((size_t)w < n ? (size_t)w : n);
}

char *pardo_op_where(const pardo_program *p, int block, int index, char *buf, size_t n) {
    const pardo_op *op = &p->blocks[block].ops[index];
    size_t used = where_prefix(p, op->line, op->col, buf, n);
    if (op->name)
        snprintf(buf + used, n - used, "block %d, op %d '%s' (%s)", block, index, op->name, op->type);
    else
        snprintf(buf + used, n - used, "block %d, op %d (%s)", block, index, op->type);
    return buf;
}

char *pardo_var_where(const pardo_program *p, int block, const pardo_graph_var *v, char *buf, size_t n) {
    size_t used = where_prefix(p, v->line, v->col, buf, n);
    snprintf(buf + used, n - used, "block %d, var '%s'", block, v->name);
    return buf;
}

static bool parse_word(const char *s, const char *const *words, int n, int *out) {
    for (int i = 0; i < n; i++)
        if (s && words[i] && strcmp(s, words[i]) == 0) {
            *out = i;
            return true;
        }
    return false;
}

static const char *const var_roles[] = {"temp", "feed", "param", "state"};
static const char *const var_kinds[] = {"tensor", "tensor_array"};
static const char *const op_roles[] = {NULL, "forward", "loss", "backward", "optimize"};
static const char *const fills[] = {NULL, "constant", "uniform", "normal", "xavier_uniform", "kaiming_uniform"};
#define NWORDS(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *pardo_var_role_name(pardo_var_role r) { return (r >= 0 && r < NWORDS(var_roles)) ? var_roles[r] : "?"; }
const char *pardo_var_kind_name(pardo_var_kind k) { return (k >= 0 && k < NWORDS(var_kinds)) ? var_kinds[k] : "?"; }
const char *pardo_op_role_name(pardo_op_role r) {
    return (r > 0 && r < NWORDS(op_roles)) ? op_roles[r] : "none";
}
const char *pardo_fill_name(pardo_fill f) { return (f > 0 && f < NWORDS(fills)) ? fills[f] : "none"; }

bool pardo_var_role_parse(const char *s, pardo_var_role *out) {
    int i;
    if (!parse_word(s, var_roles, NWORDS(var_roles), &i)) return false;
    *out = (pardo_var_role)i;
    return true;
}
bool pardo_var_kind_parse(const char *s, pardo_var_kind *out) {
    int i;
    if (!parse_word(s, var_kinds, NWORDS(var_kinds), &i)) return false;
    *out = (pardo_var_kind)i;
    return true;
}
bool pardo_op_role_parse(const char *s, pardo_op_role *out) {
    int i;
    if (!parse_word(s, op_roles, NWORDS(op_roles), &i)) return false;
    *out = (pardo_op_role)i;
    return true;
}
bool pardo_fill_parse(const char *s, pardo_fill *out) {
    int i;
    if (!parse_word(s, fills, NWORDS(fills), &i)) return false;
    *out = (pardo_fill)i;
    return true;
}

int pardo_op_set_attr(pardo_op *op, const char *key, pardo_value *val, pardo_status *st) {
    if (!val) return pardo_errorf(st, PARDO_ENOMEM, "out of memory setting attr '%s'", key);
    if (!op->attrs && !(op->attrs = pardo_value_new_object())) {
        pardo_value_free(val);
        return pardo_errorf(st, PARDO_ENOMEM, "out of memory setting attr '%s'", key);
    }
    int rc = pardo_value_set(op->attrs, key, val, st);
    pardo_value_free(val);
    return rc;
}

const pardo_value *pardo_attr(const pardo_op *op, const char *name) { return pardo_value_get(op->attrs, name); }

static int attr_type_error(const pardo_op *op, const char *name, const pardo_value *v, const char *expected,
                           pardo_status *st) {
    (void)op;
    return pardo_errorf(st, PARDO_EINVAL, "attr '%s' is a %s, expected %s", name, pardo_value_kind_name(v->kind),
                        expected);
}

int pardo_attr_int(const pardo_op *op, const char *name, int64_t dflt, int64_t *out, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, name);
    if (!v) {
        *out = dflt;
        return PARDO_OK;
    }
    if (v->kind == PARDO_V_BOOL) {
        *out = v->boolean;
        return PARDO_OK;
    }
    if (!pardo_value_is_integer(v)) return attr_type_error(op, name, v, "an integer", st);
    *out = (int64_t)v->number;
    return PARDO_OK;
}

int pardo_attr_float(const pardo_op *op, const char *name, double dflt, double *out, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, name);
    if (!v) {
        *out = dflt;
        return PARDO_OK;
    }
    if (v->kind != PARDO_V_NUMBER) return attr_type_error(op, name, v, "a number", st);
    *out = v->number;
    return PARDO_OK;
}

int pardo_attr_bool(const pardo_op *op, const char *name, bool dflt, bool *out, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, name);
    if (!v) {
        *out = dflt;
        return PARDO_OK;
    }
    if (v->kind == PARDO_V_BOOL) *out = v->boolean;
    else if (v->kind == PARDO_V_NUMBER && (v->number == 0 || v->number == 1)) *out = v->number != 0;
    else return attr_type_error(op, name, v, "true or false", st);
    return PARDO_OK;
}

int pardo_attr_string(const pardo_op *op, const char *name, const char *dflt, const char **out, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, name);
    if (!v) {
        *out = dflt;
        return PARDO_OK;
    }
    if (v->kind != PARDO_V_STRING) return attr_type_error(op, name, v, "a string", st);
    *out = v->string;
    return PARDO_OK;
}

int pardo_attr_ints(const pardo_op *op, const char *name, int64_t *out, int max, int *n, pardo_status *st) {
    const pardo_value *v = pardo_attr(op, name);
    if (!v) {
        *n = -1;
        return PARDO_OK;
    }
    if (pardo_value_is_integer(v)) { /* a single integer stands for a one-element list */
        if (max < 1) return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has too many values", name);
        out[0] = (int64_t)v->number;
        *n = 1;
        return PARDO_OK;
    }
    if (v->kind != PARDO_V_ARRAY) return attr_type_error(op, name, v, "a list of integers", st);
    if (v->n > max) return pardo_errorf(st, PARDO_EINVAL, "attr '%s' has %d values, at most %d allowed", name, v->n, max);
    for (int i = 0; i < v->n; i++) {
        if (!pardo_value_is_integer(&v->items[i]))
            return pardo_errorf(st, PARDO_EINVAL, "attr '%s' element %d is a %s, expected an integer", name, i,
                                pardo_value_kind_name(v->items[i].kind));
        out[i] = (int64_t)v->items[i].number;
    }
    *n = v->n;
    return PARDO_OK;
}
