/* window2d.h - the sliding-window geometry of the 2-D NCHW ops (conv2d,
 * max_pool2d, avg_pool2d), ONNX's: attrs strides [sH, sW], pads [top, left,
 * bottom, right] (begins, then ends), dilations [dH, dW]; output size
 * floor((n + pad_begin + pad_end - ((k - 1) * d + 1)) / s) + 1 per axis.
 * Axis 0 is the height, axis 1 the width. Nothing here allocates. */
#ifndef PARDO_WINDOW2D_H
#define PARDO_WINDOW2D_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "core/status.h"
#include "kernel_util.h"

/* Before a loop kernel of the 2-D window ops (im2col, the pools, conv2d's
 * row loops): PARDO_SIMD_CLONES (AVX-512, AVX2 and the baseline, picked at
 * load) and, with GCC, the "cheap" vectorizer cost model for it (-O2's
 * "very cheap" one vectorizes a loop only when its trip count is known to
 * be a multiple of the vector length, which leaves the wide clones scalar),
 * and no loops turned into memset / memcpy calls (the zeros at a row's
 * padded edges are an element or two, which a call costs far more than). */
#if defined(__GNUC__) && !defined(__clang__)
#define PARDO_WINDOW2D_LOOPS \
    PARDO_SIMD_CLONES __attribute__((optimize("vect-cost-model=cheap", "no-tree-loop-distribute-patterns")))
#else
#define PARDO_WINDOW2D_LOOPS PARDO_SIMD_CLONES
#endif

typedef struct pardo_window2d {
    int64_t kernel[2];   // taps along H and W; -1 while unknown (inference)
    int64_t stride[2];   // elements between window starts
    int64_t dilation[2]; // elements between taps
    int64_t pad[4];      // elements: top, left, bottom, right
} pardo_window2d;

/* Reads op's attrs strides (default: default_stride, or [1, 1] when it is
 * NULL), pads (default zeros) and, when with_dilations, dilations (default
 * [1, 1]; otherwise [1, 1] always) into w; leaves w->kernel alone. An
 * empty list ([]) means the default. Returns
 * PARDO_OK or PARDO_EINVAL naming the attr: a wrong number of values, a
 * stride or dilation below 1, a negative pad. Thread-safe. */
int pardo_window2d_attrs(const pardo_op *op, const int64_t *default_stride, bool with_dilations, pardo_window2d *w,
                         pardo_status *st);

/* The output size along axis a (0: height, 1: width) for an input of size n
 * into *out; -1 when n or the kernel is -1. Returns PARDO_ESHAPE when the
 * dilated kernel is longer than the padded input; the message calls the
 * kernel `kernel_what` ("attr 'kernel'") and names the attr pads. */
int pardo_window2d_out_size(const pardo_window2d *w, int a, int64_t n, const char *kernel_what, int64_t *out,
                            pardo_status *st);

/* For tap k (0..kernel-1) along axis a of an input of size n and an output
 * of size n_out: the outputs o in [*lo, *hi) whose tap reads inside the
 * input, at o * stride - pad_begin + k * dilation (an empty range has *lo ==
 * *hi). */
void pardo_window2d_tap_range(const pardo_window2d *w, int a, int64_t k, int64_t n, int64_t n_out, int64_t *lo,
                              int64_t *hi);

/* For output o along axis a of an input of size n (dilation 1, as pools):
 * the input window [*lo, *hi) clipped to [0, n). */
void pardo_window2d_clip(const pardo_window2d *w, int a, int64_t o, int64_t n, int64_t *lo, int64_t *hi);

#endif
