/* tensor_array.c - tensor_arrays: a tensor whose data is a list of part
 * tensors (see tensor.h). */
#include <stdlib.h>

#include "core/tensor.h"

pardo_tensor *pardo_tensor_array_new(pardo_dtype elem, pardo_status *st) {
    pardo_tensor *a = pardo_tensor_new(elem, 0, NULL, st);
    if (!a) return NULL;
    /* an empty header: no data of its own */
    pardo_tensor_bytes_adjust(-(int64_t)a->nbytes);
    a->numel = 0;
    a->nbytes = 0;
    a->mem->nbytes = 0;
    a->is_array = true;
    return a;
}

bool pardo_tensor_is_array(const pardo_tensor *t) { return t && t->is_array; }

int pardo_tensor_array_resize(pardo_tensor *a, int n, pardo_status *st) {
    PARDO_ASSERT(a->is_array && n >= 0);
    for (int i = n; i < a->n_parts; i++) {
        pardo_tensor_release(a->parts[i]);
        a->parts[i] = NULL;
    }
    if (n > a->cap_parts) {
        pardo_tensor **p = realloc(a->parts, (size_t)n * sizeof(*p));
        if (!p) return pardo_errorf(st, PARDO_ENOMEM, "out of memory for a tensor_array of %d parts", n);
        for (int i = a->cap_parts; i < n; i++) p[i] = NULL;
        a->parts = p;
        a->cap_parts = n;
    }
    a->n_parts = n;
    return PARDO_OK;
}

pardo_tensor *pardo_tensor_array_part(const pardo_tensor *a, int i) {
    PARDO_ASSERT(a->is_array && i >= 0 && i < a->n_parts);
    return a->parts[i];
}

void pardo_tensor_array_set_part(pardo_tensor *a, int i, pardo_tensor *t) {
    PARDO_ASSERT(a->is_array && i >= 0 && i < a->n_parts);
    if (a->parts[i] != t) pardo_tensor_release(a->parts[i]);
    else pardo_tensor_release(t); /* the same tensor: keep one reference */
    a->parts[i] = t;
}

pardo_tensor *pardo_tensor_array_take_part(pardo_tensor *a, int i) {
    PARDO_ASSERT(a->is_array && i >= 0 && i < a->n_parts);
    pardo_tensor *t = a->parts[i];
    a->parts[i] = NULL;
    return t;
}
