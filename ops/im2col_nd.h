/* im2col_nd.h - the columns of a convolution of 1 to 3 spatial axes (fewer
 * axes seen as 3, with leading axes of size 1), which the products of
 * conv_nd (ops/conv_nd.c) and conv_transpose (ops/conv_transpose.c, the
 * input gradient of a convolution) run over; conv2d keeps its own 2-D
 * im2col (ops/im2col.h).
 *
 * For an image [c, img0, img1, img2] and the positions p of the
 * convolution's output (p_a in [0, pos_a)), row ((ci * k0 + j0) * k1 + j1)
 * * k2 + j2 of the columns holds, at position p's column, the image
 * element that tap j of position p reads, img[ci, p_a * s_a - pb_a + j_a *
 * d_a] (0 where that is padding). The columns come in blocks of whole
 * position rows: rows [r0, r1) of the pos0 * pos1 rows of pos2 positions
 * each, so a block is [c * kp, (r1 - r0) * pos2] with rows that far apart.
 * Nothing here allocates; every function is thread-safe on disjoint
 * outputs. */
#ifndef PARDO_IM2COL_ND_H
#define PARDO_IM2COL_ND_H

#include <stddef.h>
#include <stdint.h>

#define PARDO_COLS_ND_DIMS 3

typedef struct pardo_cols_nd {
    int64_t c;                       // image channels
    int64_t img[PARDO_COLS_ND_DIMS]; // image sizes (the convolution's input)
    int64_t pos[PARDO_COLS_ND_DIMS]; // positions (the convolution's output)
    int64_t k[PARDO_COLS_ND_DIMS];   // taps
    int64_t s[PARDO_COLS_ND_DIMS];   // strides
    int64_t d[PARDO_COLS_ND_DIMS];   // dilations
    int64_t pb[PARDO_COLS_ND_DIMS];  // pads at the begin
    int64_t kp;                      // k0 * k1 * k2
} pardo_cols_nd;

/* The position rows of one block whose columns fit in max_bytes for
 * elements of es bytes (one row at least, all rows at most). From the
 * shapes alone, so sums over blocks have one order whatever the threads. */
int64_t pardo_cols_nd_block_rows(const pardo_cols_nd *g, size_t es, size_t max_bytes);

/* Writes the columns of position rows [r0, r1) of img ([c, img...],
 * contiguous) into col: every element of the block, 0 for padding. */
void pardo_im2col_nd_f32(const pardo_cols_nd *g, const float *img, int64_t r0, int64_t r1, float *col);
void pardo_im2col_nd_f64(const pardo_cols_nd *g, const double *img, int64_t r0, int64_t r1, double *col);

/* The reverse: adds every element of the block col (position rows [r0,
 * r1)) into the image element it stands for, img += scatter of col
 * (padding dropped). Each image element receives its terms in row order,
 * then position order, so a sum over blocks in order has one order. */
void pardo_col2im_nd_f32(const pardo_cols_nd *g, const float *col, int64_t r0, int64_t r1, float *img);
void pardo_col2im_nd_f64(const pardo_cols_nd *g, const double *col, int64_t r0, int64_t r1, double *img);

#endif
