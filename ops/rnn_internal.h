/* rnn_internal.h - what ops/rnn.c (the schemas, shapes and kernels of rnn,
 * gru, lstm and their gradients) shares with ops/rnn_cells.c (the time loop
 * of one direction, forward and back through time). Everything runs in
 * double on a workspace the caller owns; the products go through
 * pardo_gemm_run. */
#ifndef PARDO_RNN_INTERNAL_H
#define PARDO_RNN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "op.h"

typedef enum rnn_cell {
    RNN_CELL_RNN = 0, // one gate: H = f(X W^T + H R^T + Wb + Rb)
    RNN_CELL_GRU,     // gates z, r, h
    RNN_CELL_LSTM,    // gates i, o, f, c; peepholes i, o, f
} rnn_cell;

/* An activation of a cell (ONNX's list: Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
 * HardSigmoid, Elu, Softsign, Softplus), with its alpha and beta. */
typedef enum rnn_act_kind {
    RNN_ACT_RELU = 0,
    RNN_ACT_TANH,
    RNN_ACT_SIGMOID,
    RNN_ACT_AFFINE,
    RNN_ACT_LEAKY_RELU,
    RNN_ACT_THRESHOLDED_RELU,
    RNN_ACT_SCALED_TANH,
    RNN_ACT_HARD_SIGMOID,
    RNN_ACT_ELU,
    RNN_ACT_SOFTSIGN,
    RNN_ACT_SOFTPLUS,
} rnn_act_kind;

typedef struct rnn_act {
    rnn_act_kind kind;
    double alpha, beta;
} rnn_act;

/* The sizes and attrs of one rnn, gru or lstm (sizes -1 unknown at inference). */
typedef struct rnn_geom {
    rnn_cell cell;
    int gates;                 // 1, 3 or 4
    int64_t seq, batch, input, hidden;
    int dirs;                  // 1 or 2
    bool reverse;              // direction "reverse" (with dirs 1)
    int layout;                // 0: X [seq, batch, input]; 1: X [batch, seq, input]
    bool lbr;                  // gru: linear_before_reset
    bool input_forget;         // lstm: f = 1 - i
    double clip;               // bound on the gates' inputs; <= 0: none
    rnn_act act[2][3];         // per direction: f, g, h (as many as the cell uses)
} rnn_geom;

/* One direction of one run: the geometry, the direction's weights and data
 * in double, and the workspace. Row r = s * batch + b of the step-ordered
 * buffers is batch entry b at step s of the direction (time t = s, or
 * len_b - 1 - s in reverse); rows with s >= len_b are masked (zero). */
typedef struct rnn_dir {
    const rnn_geom *g;
    bool reverse;
    const rnn_act *act;        // f, g, h of this direction
    const int64_t *len;        // batch lengths (each in [0, seq])
    const double *w, *r;       // [G H, input], [G H, H]
    const double *wb, *rb;     // [G H] each (zeros when B is absent)
    const double *p;           // [3 H] peepholes i, o, f (zeros when absent); lstm
    double *xs;                // [seq * batch, input]: X gathered in step order
    double *pre;               // [seq * batch, G H]: each gate's input (before clip and activation)
    double *hs, *cs;           // [(seq + 1) * batch, H]: H (C) before each step and after the last
    double *rh;                // [seq * batch, H]: gru without linear_before_reset, r (.) H_prev
    double *q;                 // [seq * batch, H]: gru with linear_before_reset, H_prev Rh^T + Rbh
    double *hr;                // [batch, G H]: a step's H_prev R^T + Rb
    /* backward only */
    double *dax, *dar;         // [seq * batch, G H]: gradients of the gates' inputs on the X side and the R side
                               // (the same buffer except for gru with linear_before_reset)
    double *dh, *dc;           // [batch, H]: the carried gradients of H and C
    double *tmp, *drh;         // [batch, H]: the next carried gradient of H; gru: gradient of r (.) H_prev
    double *dp;                // [3 H]: peephole gradients (lstm)
} rnn_dir;

/* The time loop forward: fills pre, hs (hs[0] set by the caller), cs
 * (cs[0] set by the caller; lstm), rh or q. xs is set by the caller.
 * Returns PARDO_OK or pardo_gemm_run's error. */
int rnn_dir_forward(pardo_kernel_ctx *ctx, rnn_dir *d);

/* The time loop back, after rnn_dir_forward: from dh and dc (the
 * gradients of the final H and C, set by the caller), with dy the
 * gradient of Y in step order ([seq * batch, H], or NULL), fills dax and
 * dar (dp when lstm) and leaves in dh, dc the gradients of the initial H
 * and C. Returns PARDO_OK or pardo_gemm_run's error. */
int rnn_dir_backward(pardo_kernel_ctx *ctx, rnn_dir *d, const double *dy);

/* f(x), and f'(x) of an activation. */
double rnn_act_apply(const rnn_act *a, double x);
double rnn_act_deriv(const rnn_act *a, double x);

/* C (m x n, row stride ldc) = or += op(A) op(B) in double through pardo_gemm_run, with bias (n doubles, or NULL). */
int rnn_gemm(pardo_kernel_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
             const double *b, int64_t ldb, double *c, int64_t ldc, bool accumulate, const double *bias);

#endif
