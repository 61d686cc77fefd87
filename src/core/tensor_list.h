/* tensor_list.h - an ordered list of named tensors (checkpoint contents,
 * fetch results). The list owns its names and one reference per tensor. */
#ifndef PARDO_TENSOR_LIST_H
#define PARDO_TENSOR_LIST_H

#include "core/status.h"
#include "core/tensor.h"

typedef struct pardo_tensor_list {
    char **names;            // n names, owned
    pardo_tensor **tensors;  // n tensors, one reference each owned
    int n, cap;
} pardo_tensor_list;

/* Initialises an empty list (no allocation). */
void pardo_tensor_list_init(pardo_tensor_list *l);

/* Releases every tensor and name and empties the list. */
void pardo_tensor_list_clear(pardo_tensor_list *l);

/* Appends name (copied) and t (retained: the caller keeps its reference).
 * PARDO_ENOMEM on failure. */
int pardo_tensor_list_add(pardo_tensor_list *l, const char *name, pardo_tensor *t, pardo_status *st);

/* The tensor named name, or NULL. Borrowed. */
pardo_tensor *pardo_tensor_list_find(const pardo_tensor_list *l, const char *name);

#endif
