/* tensor_list.c - ordered named tensors (see tensor_list.h). */
#include "core/tensor_list.h"

#include <stdlib.h>
#include <string.h>

void pardo_tensor_list_init(pardo_tensor_list *l) { memset(l, 0, sizeof(*l)); }

void pardo_tensor_list_clear(pardo_tensor_list *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->names[i]);
        pardo_tensor_release(l->tensors[i]);
    }
    free(l->names);
    free(l->tensors);
    memset(l, 0, sizeof(*l));
}

int pardo_tensor_list_add(pardo_tensor_list *l, const char *name, pardo_tensor *t, pardo_status *st) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        char **names = realloc(l->names, (size_t)cap * sizeof(*names));
        if (!names) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        l->names = names;
        pardo_tensor **ts = realloc(l->tensors, (size_t)cap * sizeof(*ts));
        if (!ts) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
        l->tensors = ts;
        l->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return pardo_errorf(st, PARDO_ENOMEM, "out of memory");
    l->names[l->n] = copy;
    l->tensors[l->n] = pardo_tensor_retain(t);
    l->n++;
    return PARDO_OK;
}

pardo_tensor *pardo_tensor_list_find(const pardo_tensor_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return l->tensors[i];
    return NULL;
}
