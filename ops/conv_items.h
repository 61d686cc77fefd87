/* conv_items.h - what the GEMM-form convolutions (conv2d in ops/conv.c,
 * conv_nd in ops/conv_nd.c, conv_transpose in ops/conv_transpose.c) share
 * around their per-image work: running their items (chunks of images, or
 * (image, group) pairs) over the kernel's threads or inline; and for the
 * two N-d ones the products and their gradients' dB and outputs. Nothing here allocates but pardo_conv_grad_outputs
 * (the kernel's outputs). */
#ifndef PARDO_CONV_ITEMS_H
#define PARDO_CONV_ITEMS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "im2col_nd.h"
#include "op.h"

/* One run of a kernel over items [0, n). The caller fills ctx, n, item
 * and job; pardo_conv_items_run the rest. */
typedef struct pardo_conv_items {
    pardo_kernel_ctx *ctx; // the kernel's
    int64_t n;             // items
    /* runs item i with c (its products' context; c->st its status): PARDO_OK or c->st's code */
    int (*item)(void *job, pardo_kernel_ctx *c, int64_t i);
    void *job;       // the op's, for item
    bool inline_run; // the items run on the calling thread, their products on ctx's threads
    atomic_bool failed;
    pardo_status st; // the first failure
} pardo_conv_items;

/* Runs every item: handed out over ctx's threads, one product on one
 * thread each, where there are several items, threads and at least
 * min_macs multiply-adds of work (macs); else on the calling thread with
 * each product split over the threads. The products' bits do not depend
 * on it (gemm.h). Returns PARDO_OK or the first failing item's error,
 * copied into ctx->st. */
int pardo_conv_items_run(pardo_conv_items *it, double macs, double min_macs);

/* Runs every item in order on the calling thread, each product split over
 * ctx's threads (the sums over the images of dW). As pardo_conv_items_run
 * for the result. */
int pardo_conv_items_inline(pardo_conv_items *it);

/* The product C [m, n] (row stride ldc) = op(A) op(B), or += when acc,
 * through pardo_gemm_run on c (gemm.h gives the layouts). */
int pardo_conv_gemm(pardo_kernel_ctx *c, pardo_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const void *a, int64_t lda, const void *b, int64_t ldb, void *out, int64_t ldc, bool acc);

/* The wanted outputs of a convolution's gradient op into outs (NULL: not
 * wanted): dX of x's shape, dW of w's, dB [m], each zeroed when there is no
 * dY (has_dy false) or it is empty. PARDO_OK or ctx->st's code. */
int pardo_conv_grad_outputs(pardo_kernel_ctx *ctx, const pardo_tensor *x, const pardo_tensor *w, int64_t m, bool has_dy,
                            pardo_tensor *outs[3]);

/* db[oc] = the sum in double of dY's planes of channel oc over the n
 * images (dy [n, m, plane...] of db's dtype, float32 or float64), the
 * channels over ctx's threads. PARDO_OK or pardo_run_rows's error. */
int pardo_conv_bias_grad(pardo_kernel_ctx *ctx, const pardo_tensor *dy, int64_t n, int64_t m, int64_t plane,
                         pardo_tensor *db);

/* The window attrs of a convolution of 1 to 3 spatial axes, the op's axes
 * last and leading axes of size 1 (strides and dilations 1, pads 0). */
typedef struct pardo_conv_window {
    int nsp;                          // spatial axes of X: 1..3
    int64_t s[PARDO_COLS_ND_DIMS];    // strides
    int64_t d[PARDO_COLS_ND_DIMS];    // dilations
    int64_t pb[PARDO_COLS_ND_DIMS];   // pads at the begin
    int64_t pe[PARDO_COLS_ND_DIMS];   // pads at the end
    int64_t group;                    // channel groups (>= 1)
} pardo_conv_window;

/* The checks and attrs conv_nd and conv_transpose share: X float32 or
 * float64, W of X's dtype and rank (w_layout names W's dims in the message:
 * "[M, C/group, kernel...]"), 1 to 3 spatial axes from X's rank (W's where
 * X's is unknown); then attrs strides, dilations, pads and group into win.
 * PARDO_OK, or PARDO_ESHAPE / PARDO_EINVAL naming the input or attr. */
int pardo_conv_window_read(const pardo_op *op, const pardo_type *x, const pardo_type *w, const char *w_layout,
                           pardo_conv_window *win, pardo_status *st);

/* The column products of the N-d convolutions, whose three kernels serve
 * both ops: I is the tensor the columns are read from or scattered into
 * ([n, group * cols.c, img...]), P the tensor at the positions ([n, group *
 * p_ch, pos...]), W [group * p_ch, cols.c * kp], row-major, a group's rows
 * after another's. conv_nd: I = X (dX), P = Y (dY); conv_transpose: I = Y
 * (dY), P = X (dX). */
typedef struct pardo_conv_cols {
    pardo_dtype dtype;   // float32 or float64
    pardo_cols_nd cols;  // the columns of one image's group of I
    int64_t rows;        // position rows per column block (pardo_cols_nd_block_rows)
    int64_t group, p_ch; // groups; P's channels per group
    const void *w;       // W (borrowed)
} pardo_conv_cols;

#define PARDO_CONV_COL_BYTES (1 << 19)    // one column block's bytes at most (one position row's at least): with the
                                          // product's packed copy of it, about a core's L2
#define PARDO_CONV_PAR_MIN_MACS (1 << 18) // a convolution (gradient) of fewer multiply-adds runs on the calling thread

/* The column products of W (borrowed) over cols for elements of dtype: the
 * blocks' position rows from the shapes alone (at most PARDO_CONV_COL_BYTES
 * of columns a block, pardo_cols_nd_block_rows). */
pardo_conv_cols pardo_conv_cols_make(pardo_dtype dtype, const pardo_cols_nd *cols, int64_t group, int64_t p_ch,
                                     const void *w);

/* Runs it's items (n images x cc's groups) with pardo_conv_items_run, its
 * work the multiply-adds of one W_g cols(I_g) product per item. */
int pardo_conv_cols_items_run(pardo_conv_items *it, const pardo_conv_cols *cc, int64_t n);

/* Whether pardo_conv_cols_items_run hands n images' items out over ctx's
 * threads (else they run inline). */
bool pardo_conv_cols_items_apart(const pardo_kernel_ctx *ctx, const pardo_conv_cols *cc, int64_t n);

/* For image n and group grp, over the columns of I's (i) in blocks: the
 * group's P in p_out (NULL: not wanted) = W_g cols(I_g), and dW (dw, NULL:
 * not wanted) += P_g cols(I_g)^T of P in p_in, set instead where first and
 * at the first block. The columns of a block are made once for both.
 * PARDO_OK, or PARDO_ENOMEM (the columns' scratch) / the product's error in
 * c->st. */
int pardo_conv_cols_gather(const pardo_conv_cols *cc, pardo_kernel_ctx *c, int64_t n, int64_t grp, const void *i,
                           void *p_out, const void *p_in, void *dw, bool first);

/* ch channel planes of plane elements at out (dtype float32 or float64):
 * each set to its bias b[k] (b NULL: to 0), or, when add, the bias added. */
void pardo_conv_bias_planes(pardo_dtype dtype, void *out, const void *b, int64_t ch, int64_t plane, bool add);

/* For image n and group grp: I_g (in i_out) += col2im(W_g^T P_g), P in p,
 * block by block in order. As pardo_conv_cols_gather for the result. */
int pardo_conv_cols_scatter(const pardo_conv_cols *cc, pardo_kernel_ctx *c, int64_t n, int64_t grp, const void *p,
                            void *i_out);

#endif
