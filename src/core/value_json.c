/* value_json.c - JSON text <-> pardo_value through cJSON (see value_json.h). */
#include "core/value_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/value_cjson.h"

int pardo_value_from_cjson(const cJSON *item, pardo_value *out, pardo_status *st) {
    memset(out, 0, sizeof(*out));
    if (cJSON_IsNull(item)) {
        out->kind = PARDO_V_NULL;
    } else if (cJSON_IsBool(item)) {
        out->kind = PARDO_V_BOOL;
        out->boolean = cJSON_IsTrue(item);
    } else if (cJSON_IsNumber(item)) {
        out->kind = PARDO_V_NUMBER;
        out->number = item->valuedouble;
    } else if (cJSON_IsString(item)) {
        out->kind = PARDO_V_STRING;
        if (!(out->string = strdup(item->valuestring))) goto oom;
    } else if (cJSON_IsArray(item) || cJSON_IsObject(item)) {
        bool obj = cJSON_IsObject(item);
        out->kind = obj ? PARDO_V_OBJECT : PARDO_V_ARRAY;
        int n = cJSON_GetArraySize(item);
        if (n > 0) {
            if (!(out->items = calloc((size_t)n, sizeof(*out->items)))) goto oom;
            if (obj && !(out->keys = calloc((size_t)n, sizeof(*out->keys)))) goto oom;
        }
        int i = 0;
        for (const cJSON *c = item->child; c && i < n; c = c->next, i++) {
            out->n = i + 1;
            if (pardo_value_from_cjson(c, &out->items[i], st) != PARDO_OK) goto oom;
            if (obj && !(out->keys[i] = strdup(c->string ? c->string : ""))) goto oom;
        }
    } else {
        out->kind = PARDO_V_NULL;
    }
    return PARDO_OK;
oom:
    pardo_value_clear(out);
    return pardo_errorf(st, PARDO_ENOMEM, "out of memory reading JSON");
}

cJSON *pardo_value_to_cjson(const pardo_value *v) {
    cJSON *c = NULL;
    switch (v->kind) {
    case PARDO_V_NULL: return cJSON_CreateNull();
    case PARDO_V_BOOL: return cJSON_CreateBool(v->boolean);
    case PARDO_V_NUMBER: return cJSON_CreateNumber(v->number);
    case PARDO_V_STRING: return cJSON_CreateString(v->string);
    case PARDO_V_ARRAY:
    case PARDO_V_OBJECT:
        c = v->kind == PARDO_V_ARRAY ? cJSON_CreateArray() : cJSON_CreateObject();
        if (!c) return NULL;
        for (int i = 0; i < v->n; i++) {
            cJSON *item = pardo_value_to_cjson(&v->items[i]);
            if (!item) {
                cJSON_Delete(c);
                return NULL;
            }
            if (v->kind == PARDO_V_ARRAY) cJSON_AddItemToArray(c, item);
            else cJSON_AddItemToObject(c, v->keys[i], item);
        }
        return c;
    }
    return NULL;
}

void pardo_text_position(const char *text, size_t off, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

int pardo_value_parse_json(const char *text, pardo_value **out, pardo_status *st) {
    const char *end = NULL;
    *out = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        int line, col;
        size_t off = end ? (size_t)(end - text) : 0;
        pardo_text_position(text, off, &line, &col);
        return pardo_errorf(st, PARDO_EPARSE, "line %d, column %d: invalid JSON", line, col);
    }
    pardo_value *v = calloc(1, sizeof(*v));
    int rc = v ? pardo_value_from_cjson(root, v, st) : pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    cJSON_Delete(root);
    if (rc != PARDO_OK) {
        free(v);
        return rc;
    }
    *out = v;
    return PARDO_OK;
}

char *pardo_value_to_json(const pardo_value *v) {
    cJSON *c = pardo_value_to_cjson(v);
    if (!c) return NULL;
    char *s = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return s;
}
