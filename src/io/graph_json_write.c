/* graph_json_write.c - the Program IR as graph-file text, and saving it
 * without ever leaving a partial file (see graph_json.h). The text is built
 * by hand rather than with cJSON_Print: one var and one op a line diff well,
 * and cJSON 1.7 prints a double with %1.15g whenever that reads back within
 * an epsilon, which loses the last bit of some numbers (0.1f as a double). */
#include "io/graph_json.h"
#include "io/file_io.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Growing text plus the first error met while writing it. */
typedef struct writer {
    char *s;       // n bytes so far, NUL-terminated
    size_t n, cap; // bytes
    int rc;        // PARDO_OK, or the first error (message in st)
    pardo_status *st;
} writer;

static void put_n(writer *w, const char *s, size_t n) {
    if (w->rc != PARDO_OK) return;
    if (w->n + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n + 1) cap *= 2;
        char *t = realloc(w->s, cap);
        if (!t) {
            w->rc = pardo_errorf(w->st, PARDO_ENOMEM, "out of memory writing the graph");
            return;
        }
        w->s = t;
        w->cap = cap;
    }
    memcpy(w->s + w->n, s, n);
    w->n += n;
    w->s[w->n] = '\0';
}

static void put(writer *w, const char *s) { put_n(w, s, strlen(s)); }

static void newline(writer *w, int level) {
    put(w, "\n");
    for (int i = 0; i < level; i++) put(w, "  ");
}

__attribute__((format(printf, 2, 3))) static void fail(writer *w, const char *fmt, ...) {
    if (w->rc != PARDO_OK) return;
    char msg[PARDO_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->rc = pardo_errorf(w->st, PARDO_EINVAL, "cannot write the graph as JSON: %s", msg);
}

static void put_string(writer *w, const char *s) {
    put(w, "\"");
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char u[8];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (esc) {
            put_n(w, run, (size_t)(s - run));
            put(w, esc);
            run = s + 1;
        }
    }
    put_n(w, run, (size_t)(s - run));
    put(w, "\"");
}

/* The shortest text strtod reads back as exactly d: integral values as
 * integers, -0 as "-0", infinities as +-1e999 (which strtod overflows back
 * to them). A NaN is an error naming `where`. */
static void put_number(writer *w, double d, const char *where) {
    char t[40];
    if (isnan(d)) {
        fail(w, "%s: NaN has no JSON form", where);
    } else if (isinf(d)) {
        put(w, d > 0 ? "1e999" : "-1e999");
    } else if (d == 0) {
        put(w, signbit(d) ? "-0" : "0");
    } else if (floor(d) == d && fabs(d) < 1e17) {
        snprintf(t, sizeof t, "%.0f", d);
        put(w, t);
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, d);
            if (strtod(t, NULL) == d) break;
        }
        put(w, t);
    }
}

static bool is_scalar(const pardo_value *v) { return v->kind != PARDO_V_ARRAY && v->kind != PARDO_V_OBJECT; }

/* v as JSON. pretty: a non-empty object, or an array holding an array or
 * object, gets one member a line at level + 1; otherwise all on one line. */
static void put_value(writer *w, const pardo_value *v, int level, bool pretty, const char *where) {
    switch (v->kind) {
    case PARDO_V_NULL: put(w, "null"); return;
    case PARDO_V_BOOL: put(w, v->boolean ? "true" : "false"); return;
    case PARDO_V_NUMBER: put_number(w, v->number, where); return;
    case PARDO_V_STRING: put_string(w, v->string ? v->string : ""); return;
    case PARDO_V_ARRAY:
    case PARDO_V_OBJECT: break;
    default: fail(w, "%s: a value of unknown kind %d", where, (int)v->kind); return;
    }
    bool obj = v->kind == PARDO_V_OBJECT;
    bool multi = pretty && v->n > 0 && obj;
    for (int i = 0; i < v->n && pretty && !multi; i++) multi = !is_scalar(&v->items[i]);
    put(w, obj ? "{" : "[");
    for (int i = 0; i < v->n; i++) {
        if (i) put(w, ",");
        if (multi) newline(w, level + 1);
        else if (i) put(w, " ");
        if (obj) {
            put_string(w, v->keys && v->keys[i] ? v->keys[i] : "");
            put(w, ": ");
        }
        put_value(w, &v->items[i], level + 1, pretty, where);
    }
    if (multi) newline(w, level);
    put(w, obj ? "}" : "]");
}

static void put_key_number(writer *w, const char *key, double d, const char *where) {
    put(w, ", \"");
    put(w, key);
    put(w, "\": ");
    put_number(w, d, where);
}

static void put_init(writer *w, const pardo_init *init, const char *where) {
    if (init->fill <= PARDO_FILL_NONE || init->fill > PARDO_FILL_KAIMING_UNIFORM) {
        fail(w, "%s: unknown init fill %d", where, (int)init->fill);
        return;
    }
    put(w, ", \"init\": {\"fill\": ");
    put_string(w, pardo_fill_name(init->fill));
    switch (init->fill) {
    case PARDO_FILL_CONSTANT: put_key_number(w, "value", init->value, where); break;
    case PARDO_FILL_UNIFORM:
        put_key_number(w, "low", init->low, where);
        put_key_number(w, "high", init->high, where);
        break;
    case PARDO_FILL_NORMAL:
        put_key_number(w, "mean", init->mean, where);
        put_key_number(w, "std", init->std, where);
        break;
    default: break;
    }
    if (init->seed > (uint64_t)1 << 53) fail(w, "%s: init seed %llu is over 2^53, which JSON numbers cannot hold", where,
                                             (unsigned long long)init->seed);
    if (init->seed) put_key_number(w, "seed", (double)init->seed, where);
    put(w, "}");
}

static void put_var(writer *w, int b, const pardo_graph_var *v) {
    char where[PARDO_MSG_MAX / 2];
    snprintf(where, sizeof where, "block %d, var '%s'", b, v->name);
    if (v->type.dtype < 0 || v->type.dtype >= PARDO_DTYPE_COUNT) fail(w, "%s: unknown dtype", where);
    if (v->type.ndim < 0 || v->type.ndim > PARDO_MAX_DIMS) fail(w, "%s: unknown rank", where);
    if (v->kind != PARDO_VAR_TENSOR && v->kind != PARDO_VAR_TENSOR_ARRAY) fail(w, "%s: unknown kind", where);
    if (v->role < PARDO_VAR_TEMP || v->role > PARDO_VAR_STATE) fail(w, "%s: unknown role", where);
    if (w->rc != PARDO_OK) return;
    put_string(w, v->name);
    put(w, ": {\"dtype\": ");
    put_string(w, pardo_dtype_name(v->type.dtype));
    put(w, ", \"shape\": [");
    for (int d = 0; d < v->type.ndim; d++) {
        char t[32];
        snprintf(t, sizeof t, "%s%lld", d ? ", " : "", (long long)v->type.shape[d]);
        put(w, t);
    }
    put(w, "]");
    if (v->kind != PARDO_VAR_TENSOR) {
        put(w, ", \"kind\": ");
        put_string(w, pardo_var_kind_name(v->kind));
    }
    if (v->role != PARDO_VAR_TEMP) {
        put(w, ", \"role\": ");
        put_string(w, pardo_var_role_name(v->role));
    }
    if (v->init.fill != PARDO_FILL_NONE) put_init(w, &v->init, where);
    if (v->value) {
        bool bools = v->type.dtype == PARDO_BOOL;
        for (int64_t i = 0; i < v->n_value && bools; i++) bools = v->value[i] == 0 || v->value[i] == 1;
        put(w, ", \"value\": [");
        for (int64_t i = 0; i < v->n_value; i++) {
            if (i) put(w, ", ");
            if (bools) put(w, v->value[i] != 0 ? "true" : "false");
            else put_number(w, v->value[i], where);
        }
        put(w, "]");
    }
    put(w, "}");
}

static void put_names(writer *w, const char *key, char *const *names, int n) {
    put(w, key);
    put(w, "[");
    for (int i = 0; i < n; i++) {
        if (i) put(w, ", ");
        put_string(w, names[i] ? names[i] : "");
    }
    put(w, "]");
}

static void put_op(writer *w, int b, int index, const pardo_op *op) {
    char where[PARDO_MSG_MAX / 2];
    snprintf(where, sizeof where, "block %d, op %d (%s)", b, index, op->type ? op->type : "?");
    if (!op->type) fail(w, "%s: no op type", where);
    if (op->role < PARDO_OP_ROLE_NONE || op->role > PARDO_OP_OPTIMIZE) fail(w, "%s: unknown role", where);
    if (w->rc != PARDO_OK) return;
    put(w, "{\"op\": ");
    put_string(w, op->type);
    put_names(w, ", \"in\": ", op->in, op->n_in);
    put_names(w, ", \"out\": ", op->out, op->n_out);
    if (op->attrs) {
        put(w, ", \"attrs\": ");
        put_value(w, op->attrs, 0, false, where);
    }
    if (op->name) {
        put(w, ", \"name\": ");
        put_string(w, op->name);
    }
    if (op->role != PARDO_OP_ROLE_NONE) {
        put(w, ", \"role\": ");
        put_string(w, pardo_op_role_name(op->role));
    }
    put(w, "}");
}

static void put_block(writer *w, int b, const pardo_block *blk) {
    put(w, "{");
    if (blk->parent >= 0) {
        char t[48];
        snprintf(t, sizeof t, "\"parent\": %d,", blk->parent);
        newline(w, 3);
        put(w, t);
    }
    newline(w, 3);
    put(w, "\"vars\": {");
    bool any = false;
    for (int i = 0; i < blk->n_vars; i++) {
        if (!blk->vars[i].declared) continue;
        if (any) put(w, ",");
        newline(w, 4);
        put_var(w, b, &blk->vars[i]);
        any = true;
    }
    if (any) newline(w, 3);
    put(w, "},");
    newline(w, 3);
    put(w, "\"ops\": [");
    for (int i = 0; i < blk->n_ops; i++) {
        if (i) put(w, ",");
        newline(w, 4);
        put_op(w, b, i, &blk->ops[i]);
    }
    if (blk->n_ops) newline(w, 3);
    put(w, "]");
    newline(w, 2);
    put(w, "}");
}

/* The text, or NULL with *rc (and st) set. */
static char *to_json(const pardo_program *p, pardo_status *st, int *rc) {
    writer w = {.st = st};
    char t[48];
    snprintf(t, sizeof t, "{\n  \"pardo\": %d,", p->version);
    put(&w, t);
    if (p->name) {
        newline(&w, 1);
        put(&w, "\"name\": ");
        put_string(&w, p->name);
        put(&w, ",");
    }
    if (p->doc) {
        newline(&w, 1);
        put(&w, "\"doc\": ");
        put_value(&w, p->doc, 1, true, "doc");
        put(&w, ",");
    }
    newline(&w, 1);
    put(&w, "\"blocks\": [");
    for (int b = 0; b < p->n_blocks; b++) {
        if (b) put(&w, ",");
        newline(&w, 2);
        put_block(&w, b, &p->blocks[b]);
    }
    if (p->n_blocks) newline(&w, 1);
    put(&w, "]\n}\n");
    *rc = w.rc;
    if (w.rc != PARDO_OK) {
        free(w.s);
        return NULL;
    }
    return w.s;
}

char *pardo_graph_to_json(const pardo_program *p, pardo_status *st) {
    int rc;
    if (!p) {
        pardo_errorf(st, PARDO_EINVAL, "pardo_graph_to_json: NULL program");
        return NULL;
    }
    return to_json(p, st, &rc);
}

int pardo_graph_save(const pardo_program *p, const char *path, pardo_status *st) {
    int rc;
    if (!p || !path) return pardo_errorf(st, PARDO_EINVAL, "pardo_graph_save: NULL program or path");
    char *text = to_json(p, st, &rc);
    if (!text) {
        pardo_status_prefix(st, "%s: ", path);
        return rc;
    }
    pardo_file_part part = {text, strlen(text)};
    rc = pardo_file_write_atomic(path, &part, 1, st);
    free(text);
    return rc;
}
