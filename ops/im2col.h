/* im2col.h - the column matrix of a 2-D convolution (conv2d's forward and
 * weight gradient multiply by it, ops/conv.c) and its scatter back (the
 * input gradient). For one image's channels [c, h, w] (one group), row
 * (ci * kH + kh) * kW + kw of the columns holds, at column oh * oW + ow,
 * the input element that tap (kh, kw) of output (oh, ow) reads:
 * x[ci, oh * sH - top + kh * dH, ow * sW - left + kw * dW], 0 where that is
 * padding (window2d.h's geometry). So Y [M, oH * oW] = W [M, c * kH * kW]
 * x columns. Nothing here allocates; every function is thread-safe on
 * disjoint outputs. */
#ifndef PARDO_IM2COL_H
#define PARDO_IM2COL_H

#include <stdint.h>

#include "window2d.h"

/* One image's (group's) convolution geometry. */
typedef struct pardo_im2col {
    const pardo_window2d *win; // kernel, strides, pads, dilations (borrowed)
    int64_t c, h, w;           // channels, input height and width
    int64_t oh, ow;            // output height and width
} pardo_im2col;

/* Writes the columns of x ([c, h, w], contiguous) into col: c * kH * kW
 * rows of oH * oW elements, rows ldc elements apart (ldc >= oH * oW: the
 * columns of several images side by side). Every element of those rows is
 * written. */
void pardo_im2col_f32(const pardo_im2col *g, const float *x, float *col, int64_t ldc);
void pardo_im2col_f64(const pardo_im2col *g, const double *x, double *col, int64_t ldc);

/* The reverse: adds every column element to the input element it was read
 * from, dx ([c, h, w], contiguous) += scatter of col (laid out as
 * pardo_im2col's); elements that read padding are dropped. Each dx element
 * receives its terms in row order ((ci, kh, kw) ascending), whatever the
 * path, so the sums do not depend on it. col is scratch: its padding
 * elements may be overwritten with zeros. */
void pardo_col2im_f32(const pardo_im2col *g, float *col, int64_t ldc, float *dx);
void pardo_col2im_f64(const pardo_im2col *g, double *col, int64_t ldc, double *dx);

#endif
