/* merge_combine.h - the arithmetic of the merge op's elementwise modes:
 * parts combined element by element, one loop per dtype and mode so that
 * the compiler vectorises them. ops/parallel.c owns the op around it. */
#ifndef PARDO_MERGE_COMBINE_H
#define PARDO_MERGE_COMBINE_H

#include <stdint.h>

#include "op.h"
#include "core/tensor.h"

typedef enum pardo_merge_mode {
    PARDO_MERGE_MEAN,
    PARDO_MERGE_SUM,
    PARDO_MERGE_MAX,
    PARDO_MERGE_MIN,
    PARDO_MERGE_CONCAT
} pardo_merge_mode;

/* What to combine: n parts of equal shape and dtype (borrowed data
 * pointers), into y (borrowed). w: per-part weights of a weighted mean, or
 * NULL (a plain mean divides by n). */
enum {
    PARDO_MERGE_MAX_WEIGHTED = 1024, // parts a weighted mean takes at most (its weights live on the stack)
    PARDO_MERGE_STACK_PARTS = 64,    // parts whose data pointers live on the stack; an update merges at most these
};

typedef struct pardo_merge_args {
    pardo_dtype dtype;
    pardo_merge_mode mode; // not CONCAT
    const void *const *parts;
    int n;
    const double *w;
    void *y;
    const pardo_tensor *first; // part 0 (borrowed): the parts' dtype and shape
} pardo_merge_args;

/* Writes elements [begin, end) of y. Parts are combined in order 0, 1, ...
 * (a part of weight 0 is skipped: an empty part's mean may be NaN), floats
 * in double and integers and bool in int64, so the result depends neither
 * on the range split nor on which thread ran it. */
void pardo_merge_combine(const pardo_merge_args *m, int64_t begin, int64_t end);

/* The factor 1/n where dividing a double by n is multiplying it by 1/n bit for bit: n a power of two (1/n exact:
 * both round the same real value, subnormals and signs included); 0 otherwise (divide). A divide costs 16 cycles a
 * vector of 8 doubles: with its data in cache a plain mean was bound by that rather than by memory. */
double pardo_merge_exact_inverse(int n);

/* Checks the tensor_array a (named a_name in messages) for an elementwise
 * mode and fills *m (y NULL) with part_data (room for cap parts) and w (room
 * for PARDO_MERGE_MAX_WEIGHTED weights) as its storage; with weight_by
 * non-empty the mean is weighted by the parts of weights (the split named
 * weight_by; NULL: it has no value, an error). PARDO_ENOTSUP for concat or
 * more than cap parts; PARDO_ESHAPE for parts of unequal types. For the
 * merge kernel, and for the optimizers, which merge a tensor_array
 * gradient as they update (the fusion pass's merge -> update). */
int pardo_merge_prepare_parts(pardo_kernel_ctx *ctx, const pardo_tensor *a, const char *a_name, pardo_merge_mode mode,
                              const pardo_tensor *weights, const char *weight_by, pardo_merge_args *m,
                              const void **part_data, int cap, double *w);

#endif
