/* tensor_print.h - human-readable one-line summaries of tensors. */
#ifndef PARDO_TENSOR_PRINT_H
#define PARDO_TENSOR_PRINT_H

#include <stdio.h>

#include "core/tensor.h"

/* Prints "name: dtype [shape] = [v0, v1, ...]" with at most max_values
 * leading values (", ..." when there are more) and a newline. t's host copy
 * must be current (pardo_tensor_cpu). */
void pardo_tensor_print(FILE *f, const char *name, const pardo_tensor *t, int max_values);

#endif
