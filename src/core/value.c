/* value.c - JSON-like value tree (see value.h). */
#include "core/value.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static pardo_value *alloc_kind(pardo_value_kind k) {
    pardo_value *v = calloc(1, sizeof(*v));
    if (v) v->kind = k;
    return v;
}

pardo_value *pardo_value_new_object(void) { return alloc_kind(PARDO_V_OBJECT); }
pardo_value *pardo_value_new_array(void) { return alloc_kind(PARDO_V_ARRAY); }

pardo_value *pardo_value_new_number(double x) {
    pardo_value *v = alloc_kind(PARDO_V_NUMBER);
    if (v) v->number = x;
    return v;
}

pardo_value *pardo_value_new_bool(bool b) {
    pardo_value *v = alloc_kind(PARDO_V_BOOL);
    if (v) v->boolean = b;
    return v;
}

pardo_value *pardo_value_new_string(const char *s) {
    pardo_value *v = alloc_kind(PARDO_V_STRING);
    if (!v) return NULL;
    v->string = strdup(s);
    if (!v->string) {
        free(v);
        return NULL;
    }
    return v;
}

void pardo_value_clear(pardo_value *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        pardo_value_clear(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof(*v));
}

void pardo_value_free(pardo_value *v) {
    if (!v) return;
    pardo_value_clear(v);
    free(v);
}

int pardo_value_copy(pardo_value *dst, const pardo_value *src, pardo_status *st) {
    memset(dst, 0, sizeof(*dst));
    dst->kind = src->kind;
    dst->boolean = src->boolean;
    dst->number = src->number;
    dst->line = src->line;
    dst->col = src->col;
    if (src->string && !(dst->string = strdup(src->string))) goto oom;
    if (src->n > 0) {
        dst->items = calloc((size_t)src->n, sizeof(*dst->items));
        if (!dst->items) goto oom;
        if (src->keys && !(dst->keys = calloc((size_t)src->n, sizeof(*dst->keys)))) goto oom;
        for (int i = 0; i < src->n; i++) {
            dst->n = i + 1;
            if (pardo_value_copy(&dst->items[i], &src->items[i], st) != PARDO_OK) goto oom;
            if (src->keys && !(dst->keys[i] = strdup(src->keys[i]))) goto oom;
        }
    }
    return PARDO_OK;
oom:
    pardo_value_clear(dst);
    return pardo_errorf(st, PARDO_ENOMEM, "out of memory copying a value");
}

pardo_value *pardo_value_clone(const pardo_value *src) {
    pardo_value *v = calloc(1, sizeof(*v));
    if (!v) return NULL;
    if (pardo_value_copy(v, src, NULL) != PARDO_OK) {
        free(v);
        return NULL;
    }
    return v;
}

static int grow(pardo_value *v, bool with_keys) {
    pardo_value *items = realloc(v->items, (size_t)(v->n + 1) * sizeof(*items));
    if (!items) return PARDO_ENOMEM;
    v->items = items;
    if (with_keys) {
        char **keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof(*keys));
        if (!keys) return PARDO_ENOMEM;
        v->keys = keys;
    }
    return PARDO_OK;
}

int pardo_value_append(pardo_value *arr, const pardo_value *item, pardo_status *st) {
    PARDO_ASSERT(arr->kind == PARDO_V_ARRAY);
    if (grow(arr, false) != PARDO_OK) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    if (pardo_value_copy(&arr->items[arr->n], item, st) != PARDO_OK) return st ? st->code : PARDO_ENOMEM;
    arr->n++;
    return PARDO_OK;
}

int pardo_value_set(pardo_value *obj, const char *key, const pardo_value *item, pardo_status *st) {
    PARDO_ASSERT(obj->kind == PARDO_V_OBJECT);
    for (int i = 0; i < obj->n; i++) {
        if (strcmp(obj->keys[i], key) == 0) {
            pardo_value copy;
            if (pardo_value_copy(&copy, item, st) != PARDO_OK) return PARDO_ENOMEM;
            pardo_value_clear(&obj->items[i]);
            obj->items[i] = copy;
            return PARDO_OK;
        }
    }
    if (grow(obj, true) != PARDO_OK) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    char *k = strdup(key);
    if (!k) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    if (pardo_value_copy(&obj->items[obj->n], item, st) != PARDO_OK) {
        free(k);
        return PARDO_ENOMEM;
    }
    obj->keys[obj->n++] = k;
    return PARDO_OK;
}

const pardo_value *pardo_value_get(const pardo_value *obj, const char *key) {
    if (!obj || obj->kind != PARDO_V_OBJECT) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

bool pardo_value_is_integer(const pardo_value *v) {
    return v && v->kind == PARDO_V_NUMBER && isfinite(v->number) && floor(v->number) == v->number &&
           fabs(v->number) <= 9007199254740992.0;
}

const char *pardo_value_kind_name(pardo_value_kind k) {
    static const char *const names[] = {"null", "bool", "number", "string", "array", "object"};
    return (k >= PARDO_V_NULL && k <= PARDO_V_OBJECT) ? names[k] : "?";
}

bool pardo_value_equal(const pardo_value *a, const pardo_value *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case PARDO_V_NULL: return true;
    case PARDO_V_BOOL: return a->boolean == b->boolean;
    case PARDO_V_NUMBER: return a->number == b->number;
    case PARDO_V_STRING: return strcmp(a->string, b->string) == 0;
    case PARDO_V_ARRAY:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (!pardo_value_equal(&a->items[i], &b->items[i])) return false;
        return true;
    case PARDO_V_OBJECT:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++) {
            const pardo_value *o = pardo_value_get(b, a->keys[i]);
            if (!o || !pardo_value_equal(&a->items[i], o)) return false;
        }
        return true;
    }
    return false;
}

bool pardo_value_names(const pardo_value *v, const char *name) {
    if (!v) return false;
    switch (v->kind) {
    case PARDO_V_STRING: return strcmp(v->string, name) == 0;
    case PARDO_V_ARRAY:
    case PARDO_V_OBJECT:
        for (int i = 0; i < v->n; i++)
            if (pardo_value_names(&v->items[i], name)) return true;
        return false;
    default: return false;
    }
}
