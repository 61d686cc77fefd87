/* graph_json.c - loading graph files into the Program IR (see graph_json.h).
 * cJSON parses the text; json_pos.c finds where each value starts; a walk
 * over the cJSON tree that keeps each item's index in that position table
 * checks the file format and fills the IR. */
#include "io/graph_json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/json_pos.h"
#include "core/value_cjson.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)
#define MAX_EXACT_INT 9007199254740992.0 // 2^53: larger doubles are not all integers

/* A cJSON item and its index in the position table (-1 when unknown). */
typedef struct jcur {
    const cJSON *c;
    int i;
} jcur;

typedef struct ctx {
    const char *path;          // for messages
    const pardo_json_pos *pos; // n_pos entries; NULL when positions are unknown
    int n_pos;
    pardo_status *st;
} ctx;

/* ---- walking the tree with positions ---- */

static jcur first_child(const ctx *x, jcur p) {
    jcur r = {p.c->child, (x->pos && p.i >= 0) ? p.i + 1 : -1};
    return r;
}

static jcur next_sibling(const ctx *x, jcur k) {
    jcur r = {k.c->next, (x->pos && k.i >= 0) ? k.i + x->pos[k.i].count : -1};
    return r;
}

static void pos_of(const ctx *x, jcur k, int *line, int *col) {
    bool ok = x->pos && k.i >= 0 && k.i < x->n_pos;
    *line = ok ? x->pos[k.i].line : 0;
    *col = ok ? x->pos[k.i].col : 0;
}

/* Position of a member's name, or of the value when it has none. */
static void key_pos_of(const ctx *x, jcur k, int *line, int *col) {
    if (x->pos && k.i >= 0 && k.i < x->n_pos && x->pos[k.i].key_line > 0) {
        *line = x->pos[k.i].key_line;
        *col = x->pos[k.i].key_col;
    } else {
        pos_of(x, k, line, col);
    }
}

/* Member `key` of object obj (the first one; duplicates are errors anyway). */
static bool member(const ctx *x, jcur obj, const char *key, jcur *out) {
    for (jcur m = first_child(x, obj); m.c; m = next_sibling(x, m))
        if (m.c->string && strcmp(m.c->string, key) == 0) {
            *out = m;
            return true;
        }
    return false;
}

/* ---- messages ---- */

/* s for a message: control bytes as \xNN, cut to about 60 bytes with "...". */
static const char *show(const char *s, char *buf, size_t n) {
    size_t o = 0;
    for (; *s && o + 8 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (o >= 60) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 32 || c == 127) o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

static const char *kind_of(const cJSON *c) {
    if (cJSON_IsObject(c)) return "an object";
    if (cJSON_IsArray(c)) return "an array";
    if (cJSON_IsString(c)) return "a string";
    if (cJSON_IsNumber(c)) return "a number";
    if (cJSON_IsTrue(c)) return "true";
    if (cJSON_IsFalse(c)) return "false";
    return "null";
}

/* Fills st with "PATH:L:C: WHERE: MSG" (no L:C when line is 0, no WHERE
 * when where is NULL); returns PARDO_EPARSE. */
static int vfail(const ctx *x, int line, int col, const char *where, const char *fmt, va_list ap) {
    char msg[PARDO_MSG_MAX], pre[PARDO_MSG_MAX / 2];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (line > 0) snprintf(pre, sizeof pre, "%s:%d:%d: ", x->path, line, col);
    else snprintf(pre, sizeof pre, "%s: ", x->path);
    return pardo_errorf(x->st, PARDO_EPARSE, "%s%s%s%s", pre, where ? where : "", where ? ": " : "", msg);
}

__attribute__((format(printf, 5, 6))) static int fail_at(const ctx *x, int line, int col, const char *where,
                                                         const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(x, line, col, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* An error at value k. */
__attribute__((format(printf, 4, 5))) static int fail_val(const ctx *x, jcur k, const char *where, const char *fmt,
                                                          ...) {
    int line, col;
    pos_of(x, k, &line, &col);
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(x, line, col, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* An error at the name of member k. */
__attribute__((format(printf, 4, 5))) static int fail_key(const ctx *x, jcur k, const char *where, const char *fmt,
                                                          ...) {
    int line, col;
    key_pos_of(x, k, &line, &col);
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(x, line, col, where, fmt, ap);
    va_end(ap);
    return rc;
}

static int oom(const ctx *x) { return pardo_errorf(x->st, PARDO_ENOMEM, "%s: out of memory reading the graph", x->path); }

/* ---- key checks ---- */

/* Every member of obj is one of `allowed` (NULL-terminated, at most 16) and
 * none comes twice. `note` (may be "") follows the key in the message. */
static int check_keys(const ctx *x, jcur obj, const char *const *allowed, const char *where, const char *note) {
    unsigned seen = 0;
    char kb[128];
    for (jcur m = first_child(x, obj); m.c; m = next_sibling(x, m)) {
        int k = 0;
        while (allowed[k] && strcmp(allowed[k], m.c->string) != 0) k++;
        if (!allowed[k]) {
            char list[256];
            size_t o = 0;
            list[0] = '\0';
            for (int j = 0; allowed[j] && o < sizeof list; j++)
                o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "", allowed[j]);
            return fail_key(x, m, where, "unknown key \"%s\"%s (allowed: %s)", show(m.c->string, kb, sizeof kb),
                            note, list);
        }
        if (seen & (1u << k)) return fail_key(x, m, where, "duplicate key \"%s\"", allowed[k]);
        seen |= 1u << k;
    }
    return PARDO_OK;
}

typedef struct keyref {
    const char *key;
    int order; // member index in the object
    jcur cur;
} keyref;

static int cmp_keyref(const void *a, const void *b) {
    const keyref *ka = a, *kb = b;
    int c = strcmp(ka->key, kb->key);
    return c ? c : (ka->order > kb->order) - (ka->order < kb->order);
}

/* No name comes twice among obj's members; the error names the first repeat
 * in the text ("duplicate var 'x'" when vars is true, else "duplicate key"). */
static int check_dups(const ctx *x, jcur obj, const char *where, bool vars) {
    int n = cJSON_GetArraySize(obj.c);
    if (n < 2) return PARDO_OK;
    keyref *refs = calloc((size_t)n, sizeof(*refs));
    if (!refs) return oom(x);
    int i = 0;
    for (jcur m = first_child(x, obj); m.c && i < n; m = next_sibling(x, m), i++) {
        refs[i].key = m.c->string ? m.c->string : "";
        refs[i].order = i;
        refs[i].cur = m;
    }
    qsort(refs, (size_t)i, sizeof(*refs), cmp_keyref);
    int dup = -1;
    for (int j = 1; j < i; j++)
        if (strcmp(refs[j - 1].key, refs[j].key) == 0 && (dup < 0 || refs[j].order < refs[dup].order)) dup = j;
    int rc = PARDO_OK;
    if (dup >= 0) {
        char kb[128];
        show(refs[dup].key, kb, sizeof kb);
        rc = vars ? fail_key(x, refs[dup].cur, where, "duplicate var '%s'", kb)
                  : fail_key(x, refs[dup].cur, where, "duplicate key \"%s\"", kb);
    }
    free(refs);
    return rc;
}

/* ---- scalars ---- */

/* An integral number in [lo, hi] into *v. */
static bool get_int(const cJSON *c, double lo, double hi, int64_t *v) {
    if (!cJSON_IsNumber(c)) return false;
    double d = c->valuedouble;
    if (!(d >= lo && d <= hi) || floor(d) != d) return false;
    *v = (int64_t)d;
    return true;
}

/* Optional string member `key` into *out (borrowed; NULL when absent) and
 * the member into *at; a member that is no string is an error. */
static int opt_string(const ctx *x, jcur obj, const char *key, const char *where, const char **out, jcur *at) {
    *out = NULL;
    if (!member(x, obj, key, at)) return PARDO_OK;
    if (!cJSON_IsString(at->c))
        return fail_val(x, *at, where, "\"%s\" is %s, expected a string", key, kind_of(at->c));
    *out = at->c->valuestring;
    return PARDO_OK;
}

/* Optional number member `key` into *out (left as is when absent). */
static int opt_number(const ctx *x, jcur obj, const char *key, const char *where, double *out) {
    jcur m;
    if (!member(x, obj, key, &m)) return PARDO_OK;
    if (!cJSON_IsNumber(m.c)) return fail_val(x, m, where, "\"%s\" is %s, expected a number", key, kind_of(m.c));
    *out = m.c->valuedouble;
    return PARDO_OK;
}

/* ---- values (attrs, doc) ---- */

/* Walks item k and its conversion v (pardo_value_from_cjson's) together:
 * gives v and everything under it their positions, and rejects objects
 * that repeat a key. */
static int annotate(const ctx *x, jcur k, pardo_value *v, const char *where) {
    pos_of(x, k, &v->line, &v->col);
    if (v->kind != PARDO_V_ARRAY && v->kind != PARDO_V_OBJECT) return PARDO_OK;
    int rc;
    if (v->kind == PARDO_V_OBJECT && (rc = check_dups(x, k, where, false)) != PARDO_OK) return rc;
    int i = 0;
    for (jcur m = first_child(x, k); m.c && i < v->n; m = next_sibling(x, m), i++)
        if ((rc = annotate(x, m, &v->items[i], where)) != PARDO_OK) return rc;
    return PARDO_OK;
}

/* A new heap value for item k, with positions (caller frees with
 * pardo_value_free). */
static int make_heap_value(const ctx *x, jcur k, const char *where, pardo_value **out) {
    pardo_value *v = calloc(1, sizeof(*v));
    if (!v) return oom(x);
    int rc = pardo_value_from_cjson(k.c, v, x->st);
    if (rc == PARDO_OK) rc = annotate(x, k, v, where);
    if (rc != PARDO_OK) {
        pardo_value_free(v);
        return rc;
    }
    *out = v;
    return PARDO_OK;
}

/* ---- vars ---- */

static const char *const var_keys[] = {"dtype", "shape", "kind", "role", "init", "value", NULL};
#define DTYPE_LIST "float32, float64, int32, int64, bool, uint8, int8, int16, uint16, uint32, uint64, float16, bfloat16"
#define FILL_LIST "constant, uniform, normal, xavier_uniform, kaiming_uniform"

static int parse_shape(const ctx *x, jcur var, const char *where, pardo_graph_var *v) {
    jcur s;
    if (!member(x, var, "shape", &s))
        return fail_at(x, v->line, v->col, where, "missing key \"shape\" (a list of sizes, -1 for the batch)");
    if (!cJSON_IsArray(s.c))
        return fail_val(x, s, where, "\"shape\" is %s, expected an array of integers", kind_of(s.c));
    int n = cJSON_GetArraySize(s.c);
    if (n > PARDO_MAX_DIMS) return fail_val(x, s, where, "\"shape\" has %d dims, at most %d allowed", n, PARDO_MAX_DIMS);
    int d = 0;
    for (jcur e = first_child(x, s); e.c && d < n; e = next_sibling(x, e), d++) {
        int64_t size;
        if (!cJSON_IsNumber(e.c))
            return fail_val(x, e, where, "shape[%d] is %s, expected an integer size", d, kind_of(e.c));
        if (!get_int(e.c, -1, MAX_EXACT_INT, &size))
            return fail_val(x, e, where, "shape[%d] is %g, expected an integer >= 0, or -1 for a run-time size", d,
                            e.c->valuedouble);
        v->type.shape[d] = size;
    }
    if (!pardo_shape_fits(n, v->type.shape))
        return fail_val(x, s, where, "\"shape\" has more elements than fit in 64 bits");
    v->type.ndim = n;
    return PARDO_OK;
}

/* Walks a value (a number, true, false or nested arrays of them) in
 * row-major order, checking elements against dtype; stores them into dst
 * when it is not NULL. *n counts the elements. */
static int flatten(const ctx *x, jcur k, const char *where, pardo_dtype dt, double *dst, int64_t *n) {
    if (cJSON_IsArray(k.c)) {
        for (jcur e = first_child(x, k); e.c; e = next_sibling(x, e)) {
            int rc = flatten(x, e, where, dt, dst, n);
            if (rc != PARDO_OK) return rc;
        }
        return PARDO_OK;
    }
    double d;
    if (cJSON_IsNumber(k.c)) d = k.c->valuedouble;
    else if (cJSON_IsBool(k.c)) d = cJSON_IsTrue(k.c) ? 1 : 0;
    else return fail_val(x, k, where, "value element %lld is %s, expected a number, true or false", (long long)*n, kind_of(k.c));
    if (dst) {
        dst[*n] = d;
    } else if (dt == PARDO_I32 || dt == PARDO_I64) {
        double lo = dt == PARDO_I32 ? -2147483648.0 : -9223372036854775808.0;
        double hi = dt == PARDO_I32 ? 2147483647.0 : 9223372036854775807.0; // rounds to 2^63 as a double
        if (floor(d) != d || !(d >= lo && (dt == PARDO_I32 ? d <= hi : d < hi)))
            return fail_val(x, k, where, "value element %lld is %g, expected an integer that fits %s", (long long)*n,
                            d, pardo_dtype_name(dt));
    } else if (dt == PARDO_BOOL && d != 0 && d != 1) {
        return fail_val(x, k, where, "value element %lld is %g, expected true, false, 0 or 1 for dtype bool",
                        (long long)*n, d);
    }
    (*n)++;
    return PARDO_OK;
}

static int parse_value(const ctx *x, jcur val, const char *where, pardo_graph_var *v) {
    if (!cJSON_IsArray(val.c) && !cJSON_IsNumber(val.c) && !cJSON_IsBool(val.c))
        return fail_val(x, val, where, "\"value\" is %s, expected a number, true, false or an array of them",
                        kind_of(val.c));
    int64_t n = 0;
    int rc = flatten(x, val, where, v->type.dtype, NULL, &n);
    if (rc != PARDO_OK) return rc;
    int64_t numel = pardo_shape_numel(v->type.ndim, v->type.shape);
    if (numel >= 0 && n != numel) {
        char sb[128];
        return fail_val(x, val, where, "\"value\" has %lld elements, shape %s has %lld", (long long)n,
                        pardo_shape_str(v->type.ndim, v->type.shape, sb, sizeof sb), (long long)numel);
    }
    if (!(v->value = malloc(n ? (size_t)n * sizeof(double) : 1))) return oom(x);
    v->n_value = n;
    n = 0;
    return flatten(x, val, where, v->type.dtype, v->value, &n);
}

static const char *const init_keys[][5] = {
    [PARDO_FILL_CONSTANT] = {"fill", "value", "seed", NULL},
    [PARDO_FILL_UNIFORM] = {"fill", "low", "high", "seed", NULL},
    [PARDO_FILL_NORMAL] = {"fill", "mean", "std", "seed", NULL},
    [PARDO_FILL_XAVIER_UNIFORM] = {"fill", "seed", NULL},
    [PARDO_FILL_KAIMING_UNIFORM] = {"fill", "seed", NULL},
};

static int parse_init(const ctx *x, jcur ic, const char *var_where, pardo_init *init) {
    char where[PARDO_MSG_MAX / 2 + 8];
    snprintf(where, sizeof where, "%s, init", var_where);
    if (!cJSON_IsObject(ic.c))
        return fail_val(x, ic, var_where, "\"init\" is %s, expected an object such as {\"fill\": \"xavier_uniform\"}",
                        kind_of(ic.c));
    int rc = check_dups(x, ic, where, false);
    if (rc != PARDO_OK) return rc;
    jcur f;
    if (!member(x, ic, "fill", &f)) return fail_val(x, ic, where, "missing key \"fill\" (one of " FILL_LIST ")");
    char fb[128];
    if (!cJSON_IsString(f.c)) return fail_val(x, f, where, "\"fill\" is %s, expected a string", kind_of(f.c));
    if (!pardo_fill_parse(f.c->valuestring, &init->fill))
        return fail_val(x, f, where, "unknown fill \"%s\", expected one of " FILL_LIST,
                        show(f.c->valuestring, fb, sizeof fb));
    char note[64];
    snprintf(note, sizeof note, " for fill %s", pardo_fill_name(init->fill));
    if ((rc = check_keys(x, ic, init_keys[init->fill], where, note)) != PARDO_OK) return rc;
    init->high = 1;
    init->std = 1;
    jcur m;
    if ((rc = opt_number(x, ic, "value", where, &init->value)) != PARDO_OK) return rc;
    if ((rc = opt_number(x, ic, "low", where, &init->low)) != PARDO_OK) return rc;
    if ((rc = opt_number(x, ic, "high", where, &init->high)) != PARDO_OK) return rc;
    if ((rc = opt_number(x, ic, "mean", where, &init->mean)) != PARDO_OK) return rc;
    if ((rc = opt_number(x, ic, "std", where, &init->std)) != PARDO_OK) return rc;
    if (init->fill == PARDO_FILL_CONSTANT && !member(x, ic, "value", &m))
        return fail_val(x, ic, where, "missing key \"value\" (fill constant needs the value)");
    if (init->fill == PARDO_FILL_UNIFORM && !(isfinite(init->low) && isfinite(init->high) && init->low <= init->high))
        return fail_val(x, ic, where, "uniform needs finite low <= high, got low %g, high %g", init->low, init->high);
    if (init->fill == PARDO_FILL_NORMAL && !(isfinite(init->mean) && isfinite(init->std) && init->std >= 0))
        return fail_val(x, ic, where, "normal needs a finite mean and a finite std >= 0, got mean %g, std %g",
                        init->mean, init->std);
    if (member(x, ic, "seed", &m)) {
        int64_t seed;
        if (!get_int(m.c, 0, MAX_EXACT_INT, &seed)) {
            if (cJSON_IsNumber(m.c))
                return fail_val(x, m, where, "\"seed\" is %g, expected a non-negative integer", m.c->valuedouble);
            return fail_val(x, m, where, "\"seed\" is %s, expected a non-negative integer", kind_of(m.c));
        }
        init->seed = (uint64_t)seed;
    }
    return PARDO_OK;
}

static int parse_var(const ctx *x, int b, pardo_block *blk, jcur m) {
    char where[PARDO_MSG_MAX / 2], nb[128], wb[128];
    snprintf(where, sizeof where, "block %d, var '%s'", b, show(m.c->string, nb, sizeof nb));
    if (!m.c->string[0]) return fail_key(x, m, where, "a var name is empty");
    if (!cJSON_IsObject(m.c))
        return fail_val(x, m, where, "the var is %s, expected an object with dtype and shape", kind_of(m.c));
    int rc = check_keys(x, m, var_keys, where, "");
    if (rc != PARDO_OK) return rc;
    pardo_graph_var *v = pardo_block_add_var(blk, m.c->string, x->st);
    if (!v) return PARDO_ENOMEM;
    v->declared = true;
    key_pos_of(x, m, &v->line, &v->col);

    const char *word;
    jcur k;
    if (!member(x, m, "dtype", &k)) return fail_at(x, v->line, v->col, where, "missing key \"dtype\" (one of " DTYPE_LIST ")");
    if (!cJSON_IsString(k.c)) return fail_val(x, k, where, "\"dtype\" is %s, expected a string", kind_of(k.c));
    if ((v->type.dtype = pardo_dtype_from_name(k.c->valuestring)) == PARDO_DTYPE_UNKNOWN)
        return fail_val(x, k, where, "unknown dtype \"%s\", expected one of " DTYPE_LIST,
                        show(k.c->valuestring, wb, sizeof wb));
    if ((rc = parse_shape(x, m, where, v)) != PARDO_OK) return rc;
    if ((rc = opt_string(x, m, "kind", where, &word, &k)) != PARDO_OK) return rc;
    if (word && !pardo_var_kind_parse(word, &v->kind))
        return fail_val(x, k, where, "unknown kind \"%s\", expected tensor or tensor_array", show(word, wb, sizeof wb));
    if ((rc = opt_string(x, m, "role", where, &word, &k)) != PARDO_OK) return rc;
    if (word && !pardo_var_role_parse(word, &v->role))
        return fail_val(x, k, where, "unknown role \"%s\", expected one of feed, param, state, temp",
                        show(word, wb, sizeof wb));
    if (member(x, m, "init", &k) && (rc = parse_init(x, k, where, &v->init)) != PARDO_OK) return rc;
    if (member(x, m, "value", &k) && (rc = parse_value(x, k, where, v)) != PARDO_OK) return rc;
    return PARDO_OK;
}

/* ---- ops ---- */

static const char *const op_keys[] = {"op", "in", "out", "attrs", "name", "role", NULL};

/* Var names of member `key` (an array of strings) onto the op. */
static int parse_names(const ctx *x, jcur list, const char *key, const char *where, pardo_op *op, bool out) {
    if (!cJSON_IsArray(list.c))
        return fail_val(x, list, where, "\"%s\" is %s, expected an array of var names", key, kind_of(list.c));
    if (out && cJSON_GetArraySize(list.c) == 0)
        return fail_val(x, list, where, "\"out\" is empty, expected at least one var the op writes");
    int i = 0;
    for (jcur e = first_child(x, list); e.c; e = next_sibling(x, e), i++) {
        if (!cJSON_IsString(e.c))
            return fail_val(x, e, where, "%s[%d] is %s, expected a var name (a string)", key, i, kind_of(e.c));
        /* "" stands for an absent output (a gradient nobody needs); the
         * validate pass rejects it where the op's schema requires the output */
        int rc = out ? pardo_op_add_output(op, e.c->valuestring, x->st) : pardo_op_add_input(op, e.c->valuestring, x->st);
        if (rc != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

static int parse_op(const ctx *x, int b, int index, pardo_block *blk, jcur oc) {
    char where[PARDO_MSG_MAX / 2], nb[128];
    jcur k;
    snprintf(where, sizeof where, "block %d, op %d", b, index);
    if (!cJSON_IsObject(oc.c)) return fail_val(x, oc, where, "the op is %s, expected an object", kind_of(oc.c));
    if (member(x, oc, "name", &k) && cJSON_IsString(k.c))
        snprintf(where, sizeof where, "block %d, op %d '%s'", b, index, show(k.c->valuestring, nb, sizeof nb));
    else if (member(x, oc, "op", &k) && cJSON_IsString(k.c))
        snprintf(where, sizeof where, "block %d, op %d (%s)", b, index, show(k.c->valuestring, nb, sizeof nb));
    int rc = check_keys(x, oc, op_keys, where, "");
    if (rc != PARDO_OK) return rc;
    if (!member(x, oc, "op", &k)) return fail_val(x, oc, where, "missing key \"op\" (the op type, such as \"matmul\")");
    if (!cJSON_IsString(k.c)) return fail_val(x, k, where, "\"op\" is %s, expected a string", kind_of(k.c));
    if (!k.c->valuestring[0]) return fail_val(x, k, where, "\"op\" is empty, expected an op type");
    pardo_op *op = pardo_block_add_op(blk, k.c->valuestring, x->st);
    if (!op) return PARDO_ENOMEM;
    pos_of(x, oc, &op->line, &op->col);
    if (member(x, oc, "in", &k) && (rc = parse_names(x, k, "in", where, op, false)) != PARDO_OK) return rc;
    if (!member(x, oc, "out", &k)) return fail_val(x, oc, where, "missing key \"out\" (the vars the op writes)");
    if ((rc = parse_names(x, k, "out", where, op, true)) != PARDO_OK) return rc;
    if (member(x, oc, "attrs", &k)) {
        char aw[PARDO_MSG_MAX / 2 + 16];
        snprintf(aw, sizeof aw, "%s, attrs", where);
        if (!cJSON_IsObject(k.c)) return fail_val(x, k, where, "\"attrs\" is %s, expected an object", kind_of(k.c));
        if ((rc = make_heap_value(x, k, aw, &op->attrs)) != PARDO_OK) return rc;
    }
    const char *word;
    if ((rc = opt_string(x, oc, "name", where, &word, &k)) != PARDO_OK) return rc;
    if (word && !word[0]) return fail_val(x, k, where, "\"name\" is empty; leave it out instead");
    if (word && !(op->name = strdup(word))) return oom(x);
    if ((rc = opt_string(x, oc, "role", where, &word, &k)) != PARDO_OK) return rc;
    if (word && !pardo_op_role_parse(word, &op->role))
        return fail_val(x, k, where, "unknown role \"%s\", expected one of forward, loss, backward, optimize",
                        show(word, nb, sizeof nb));
    return PARDO_OK;
}

/* ---- blocks and the top level ---- */

static const char *const block_keys[] = {"parent", "vars", "ops", NULL};
static const char *const top_keys[] = {"pardo", "name", "blocks", "doc", NULL};

/* Parses block b; *parent_at gets its "parent" value (c NULL when none). */
static int parse_block(const ctx *x, pardo_program *p, int b, jcur bc, jcur *parent_at) {
    char where[64];
    snprintf(where, sizeof where, "block %d", b);
    pardo_block *blk = &p->blocks[b];
    pos_of(x, bc, &blk->line, &blk->col);
    parent_at->c = NULL;
    if (!cJSON_IsObject(bc.c)) return fail_val(x, bc, where, "the block is %s, expected an object", kind_of(bc.c));
    int rc = check_keys(x, bc, block_keys, where, "");
    if (rc != PARDO_OK) return rc;
    jcur k;
    if (member(x, bc, "parent", &k)) {
        int64_t parent;
        *parent_at = k;
        if (b == 0) return fail_key(x, k, where, "block 0 is the main block and has no \"parent\"");
        if (!cJSON_IsNumber(k.c))
            return fail_val(x, k, where, "\"parent\" is %s, expected a block index", kind_of(k.c));
        if (!get_int(k.c, 0, p->n_blocks - 1, &parent))
            return fail_val(x, k, where, "\"parent\" is %g, expected a block index from 0 to %d", k.c->valuedouble,
                            p->n_blocks - 1);
        if (parent == b) return fail_val(x, k, where, "\"parent\" is the block itself");
        blk->parent = (int)parent;
    } else if (b != 0) {
        return fail_val(x, bc, where, "missing key \"parent\" (every block but block 0 has one)");
    }
    if (member(x, bc, "vars", &k)) {
        if (!cJSON_IsObject(k.c)) return fail_val(x, k, where, "\"vars\" is %s, expected an object", kind_of(k.c));
        if ((rc = check_dups(x, k, where, true)) != PARDO_OK) return rc;
        for (jcur m = first_child(x, k); m.c; m = next_sibling(x, m))
            if ((rc = parse_var(x, b, blk, m)) != PARDO_OK) return rc;
    }
    if (member(x, bc, "ops", &k)) {
        if (!cJSON_IsArray(k.c)) return fail_val(x, k, where, "\"ops\" is %s, expected an array", kind_of(k.c));
        int i = 0;
        for (jcur m = first_child(x, k); m.c; m = next_sibling(x, m), i++)
            if ((rc = parse_op(x, b, i, blk, m)) != PARDO_OK) return rc;
    }
    return PARDO_OK;
}

/* Every block's parent chain reaches block 0. Linear: each block is walked
 * once, and a walk stops at a block already known to reach block 0. */
static int check_cycles(const ctx *x, const pardo_program *p, const jcur *parent_at) {
    int n = p->n_blocks;
    int *seen = calloc((size_t)n, sizeof(*seen)); // -1: reaches block 0; b + 1: on the walk from b
    if (!seen) return oom(x);
    seen[0] = -1;
    int rc = PARDO_OK;
    for (int b = 1; b < n && rc == PARDO_OK; b++) {
        int cur = b;
        while (seen[cur] == 0) {
            seen[cur] = b + 1;
            cur = p->blocks[cur].parent;
        }
        if (seen[cur] == b + 1) { /* back on this walk: cur is on a cycle */
            char chain[256], where[64];
            size_t o = (size_t)snprintf(chain, sizeof chain, "%d", cur);
            for (int c = p->blocks[cur].parent, i = 0; o < sizeof chain && i < n; c = p->blocks[c].parent, i++) {
                o += (size_t)snprintf(chain + o, sizeof chain - o, " -> %d", c);
                if (c == cur) break;
            }
            if (o >= sizeof chain) memcpy(chain + sizeof chain - 5, " ...", 5);
            snprintf(where, sizeof where, "block %d", cur);
            rc = fail_val(x, parent_at[cur], where, "\"parent\" makes a cycle (%s), expected a chain to block 0",
                          chain);
        }
        for (int c = b; seen[c] == b + 1; c = p->blocks[c].parent) seen[c] = -1;
    }
    free(seen);
    return rc;
}

static int parse_top(const ctx *x, jcur root, pardo_program *p) {
    if (!cJSON_IsObject(root.c))
        return fail_val(x, root, NULL, "the file is %s, expected an object with \"pardo\" and \"blocks\"",
                        kind_of(root.c));
    int rc = check_keys(x, root, top_keys, "top level", "");
    if (rc != PARDO_OK) return rc;
    jcur k;
    if (!member(x, root, "pardo", &k))
        return fail_val(x, root, "top level", "missing key \"pardo\" (the format version: \"pardo\": 1)");
    if (!cJSON_IsNumber(k.c)) return fail_val(x, k, NULL, "\"pardo\" is %s, expected format version 1", kind_of(k.c));
    if (k.c->valuedouble != 1)
        return fail_val(x, k, NULL, "\"pardo\" is %g, expected format version 1", k.c->valuedouble);
    p->version = 1;
    const char *name;
    if ((rc = opt_string(x, root, "name", "top level", &name, &k)) != PARDO_OK) return rc;
    if (name && !(p->name = strdup(name))) return oom(x);
    if (member(x, root, "doc", &k) && (rc = make_heap_value(x, k, "doc", &p->doc)) != PARDO_OK) return rc;
    if (!member(x, root, "blocks", &k))
        return fail_val(x, root, "top level", "missing key \"blocks\" (an array of blocks; block 0 is the main one)");
    if (!cJSON_IsArray(k.c))
        return fail_val(x, k, "top level", "\"blocks\" is %s, expected an array", kind_of(k.c));
    int n = cJSON_GetArraySize(k.c);
    if (n == 0) return fail_val(x, k, "top level", "\"blocks\" is empty, expected at least block 0");
    jcur *parent_at = calloc((size_t)n, sizeof(*parent_at));
    if (!parent_at) return oom(x);
    for (int b = 0; b < n; b++) {
        int index = pardo_program_add_block(p, -1, x->st);
        if (index < 0) {
            rc = index;
            goto done;
        }
    }
    int b = 0;
    for (jcur bc = first_child(x, k); bc.c && b < n; bc = next_sibling(x, bc), b++)
        if ((rc = parse_block(x, p, b, bc, &parent_at[b])) != PARDO_OK) goto done;
    rc = check_cycles(x, p, parent_at);
done:
    free(parent_at);
    return rc;
}

/* ---- entry points ---- */

static int count_items(const cJSON *c) {
    int n = 1;
    for (const cJSON *k = c->child; k; k = k->next) n += count_items(k);
    return n;
}

int pardo_graph_parse(const char *text, size_t len, const char *path, pardo_program **out, pardo_status *st) {
    if (out) *out = NULL;
    if (!text || !out) return pardo_errorf(st, PARDO_EINVAL, "pardo_graph_parse: NULL text or out");
    ctx x = {.path = path ? path : "<input>", .st = st};
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line, col;
        pardo_text_position(text, (size_t)(nul - text), &line, &col);
        return fail_at(&x, line, col, NULL, "invalid JSON: a NUL byte at byte %zu (of %zu)", (size_t)(nul - text), len);
    }
    size_t i = (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) ? 3 : 0;
    while (i < len && (unsigned char)text[i] <= 32) i++;
    if (i == len) return pardo_errorf(st, PARDO_EPARSE, "%s: empty file, expected a graph (a JSON object)", x.path);

    int rc = PARDO_OK;
    pardo_program *p = NULL;
    pardo_json_pos *pos = NULL;
    cJSON *root = NULL;
    char *buf = malloc(len + 1);
    if (!buf) return oom(&x);
    memcpy(buf, text, len);
    buf[len] = '\0';
    const char *end = NULL;
    if (!(root = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1))) {
        int line, col;
        char why[256];
        pardo_json_explain_error(buf, len, end ? (size_t)(end - buf) : 0, &line, &col, why, sizeof why);
        rc = fail_at(&x, line, col, NULL, "invalid JSON: %s", why);
        goto done;
    }
    pardo_status scan_st;
    int n_pos = 0;
    if (pardo_json_scan(buf, len, &pos, &n_pos, &scan_st) == PARDO_OK && n_pos == count_items(root)) {
        x.pos = pos;
        x.n_pos = n_pos;
    } /* else: a scanner that disagrees with cJSON costs the positions, not the load */
    if (!(p = pardo_program_new()) || (path && !(p->path = strdup(path)))) {
        rc = oom(&x);
        goto done;
    }
    jcur top = {root, x.pos ? 0 : -1};
    rc = parse_top(&x, top, p);
done:
    cJSON_Delete(root);
    free(pos);
    free(buf);
    if (rc != PARDO_OK) {
        pardo_program_free(p);
        return rc;
    }
    *out = p;
    return PARDO_OK;
}

int pardo_graph_load(const char *path, pardo_program **out, pardo_status *st) {
    char eb[128];
    if (out) *out = NULL;
    if (!path || !out) return pardo_errorf(st, PARDO_EINVAL, "pardo_graph_load: NULL path or out");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pardo_errorf(st, PARDO_EIO, "%s: cannot open: %s", path, strerror_r(errno, eb, sizeof eb));
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    int rc = PARDO_OK;
    if (!buf) {
        rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory reading the file", path);
        goto done;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_FILE_BYTES) {
                rc = pardo_errorf(st, PARDO_EIO, "%s: file is larger than 1 GiB, too large for a graph", path);
                goto done;
            }
            char *b = realloc(buf, cap * 2);
            if (!b) {
                rc = pardo_errorf(st, PARDO_ENOMEM, "%s: out of memory reading the file", path);
                goto done;
            }
            buf = b;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = pardo_errorf(st, PARDO_EIO, "%s: cannot read: %s", path, strerror_r(errno, eb, sizeof eb));
            goto done;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    rc = pardo_graph_parse(buf, n, path, out, st);
done:
    close(fd);
    free(buf);
    return rc;
}
