/* rnn_cells.c - the time loop of one direction of rnn, gru and lstm (ONNX
 * RNN, GRU, LSTM), forward and back through time, in double. The products
 * (X W^T for all steps at once, H_prev R^T per step, and in the gradient
 * dA R per step, dA^T X, dA^T H_prev and dA W for all steps at once) run
 * through pardo_gemm_run; the gates' elementwise work is a plain loop over
 * batch and hidden (small next to the products). The ONNX equations, with
 * a the gate inputs after clip (clip: [-clip, clip] when attr clip is set):
 *   rnn:  H = f(a_i), a_i = X Wi^T + H_prev Ri^T + Wbi + Rbi
 *   gru:  z = f(a_z), r = f(a_r), h = g(a_h), H = (1 - z) h + z H_prev, with
 *         a_h = X Wh^T + (r H_prev) Rh^T + Rbh + Wbh, or with
 *         linear_before_reset a_h = X Wh^T + r (H_prev Rh^T + Rbh) + Wbh
 *   lstm: i = f(a_i + Pi C_prev), f = f(a_f + Pf C_prev) (1 - i with
 *         input_forget), c = g(a_c), C = f C_prev + i c, o = f(a_o + Po C),
 *         H = o h(C)
 * A batch entry past its length keeps its H and C and gives zero outputs. */
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "rnn_internal.h"

double rnn_act_apply(const rnn_act *a, double x) {
    switch (a->kind) {
    case RNN_ACT_RELU: return x > 0 ? x : 0;
    case RNN_ACT_TANH: return tanh(x);
    case RNN_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case RNN_ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case RNN_ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0;
    case RNN_ACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
    case RNN_ACT_HARD_SIGMOID: {
        const double v = a->alpha * x + a->beta;
        return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case RNN_ACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
    case RNN_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case RNN_ACT_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
    }
    return x;
}

double rnn_act_deriv(const rnn_act *a, double x) {
    switch (a->kind) {
    case RNN_ACT_RELU: return x > 0 ? 1 : 0;
    case RNN_ACT_TANH: {
        const double t = tanh(x);
        return 1 - t * t;
    }
    case RNN_ACT_SIGMOID: {
        const double s = 1 / (1 + exp(-x));
        return s * (1 - s);
    }
    case RNN_ACT_AFFINE: return a->alpha;
    case RNN_ACT_LEAKY_RELU: return x >= 0 ? 1 : a->alpha;
    case RNN_ACT_THRESHOLDED_RELU: return x > a->alpha ? 1 : 0;
    case RNN_ACT_SCALED_TANH: {
        const double t = tanh(a->beta * x);
        return a->alpha * a->beta * (1 - t * t);
    }
    case RNN_ACT_HARD_SIGMOID: {
        const double v = a->alpha * x + a->beta;
        return v > 0 && v < 1 ? a->alpha : 0;
    }
    case RNN_ACT_ELU: return x >= 0 ? 1 : a->alpha * exp(x);
    case RNN_ACT_SOFTSIGN: {
        const double d = 1 + fabs(x);
        return 1 / (d * d);
    }
    case RNN_ACT_SOFTPLUS: return 1 / (1 + exp(-x));
    }
    return 1;
}

int rnn_gemm(pardo_kernel_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
             const double *b, int64_t ldb, double *c, int64_t ldc, bool accumulate, const double *bias) {
    if (m == 0 || n == 0) return PARDO_OK;
    const pardo_gemm g = {.dtype = PARDO_F64, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a, .lda = lda,
                          .b = b, .ldb = ldb, .c = c, .ldc = ldc, .accumulate = accumulate, .bias = bias};
    return pardo_gemm_run(ctx, &g, PARDO_GEMM_AUTO);
}

/* x clipped to [-clip, clip] (clip <= 0: none), and whether it passes unclipped. */
static double clip_to(double x, double clip) {
    if (clip <= 0) return x;
    return x > clip ? clip : x < -clip ? -clip : x;
}
static double clip_pass(double x, double clip) { return clip <= 0 || (x >= -clip && x <= clip) ? 1.0 : 0.0; }

/* f(clip(x)) and its derivative in x. */
static double gate(const rnn_act *a, double x, double clip) { return rnn_act_apply(a, clip_to(x, clip)); }
static double gate_d(const rnn_act *a, double x, double clip) {
    return clip_pass(x, clip) * rnn_act_deriv(a, clip_to(x, clip));
}

int rnn_dir_forward(pardo_kernel_ctx *ctx, rnn_dir *d) {
    const rnn_geom *g = d->g;
    const int64_t B = g->batch, H = g->hidden, GH = g->gates * H, S = g->seq;
    const double clip = g->clip;
    const rnn_act *fa = &d->act[0], *ga = &d->act[1], *ha = &d->act[2];
    const bool gru_rh = g->cell == RNN_CELL_GRU && !g->lbr;
    int rc = rnn_gemm(ctx, false, true, S * B, GH, g->input, d->xs, g->input, d->w, g->input, d->pre, GH, false, d->wb);
    for (int64_t s = 0; rc == PARDO_OK && s < S; s++) {
        const double *hp = d->hs + s * B * H, *cp = d->cs ? d->cs + s * B * H : NULL;
        double *hn = d->hs + (s + 1) * B * H, *cn = d->cs ? d->cs + (s + 1) * B * H : NULL;
        double *pre = d->pre + s * B * GH;
        /* H_prev R^T + Rb; gru without linear_before_reset: gates z and r only here */
        if ((rc = rnn_gemm(ctx, false, true, B, gru_rh ? 2 * H : GH, H, hp, H, d->r, H, d->hr, GH, false, d->rb)) !=
            PARDO_OK)
            break;
        for (int64_t b = 0; b < B; b++) {
            const bool on = s < d->len[b];
            const double *hpb = hp + b * H, *hr = d->hr + b * GH;
            double *pb = pre + b * GH, *hnb = hn + b * H;
            if (!on) { /* past the entry's length: H and C stay */
                memcpy(hnb, hpb, sizeof(double) * (size_t)H);
                if (cn) memcpy(cn + b * H, cp + b * H, sizeof(double) * (size_t)H);
                memset(pb, 0, sizeof(double) * (size_t)GH);
                if (gru_rh) memset(d->rh + (s * B + b) * H, 0, sizeof(double) * (size_t)H);
                continue;
            }
            switch (g->cell) {
            case RNN_CELL_RNN:
                for (int64_t j = 0; j < H; j++) {
                    pb[j] += hr[j];
                    hnb[j] = gate(fa, pb[j], clip);
                }
                break;
            case RNN_CELL_GRU:
                for (int64_t j = 0; j < 2 * H; j++) pb[j] += hr[j];
                if (gru_rh) {
                    double *rh = d->rh + (s * B + b) * H;
                    for (int64_t j = 0; j < H; j++) rh[j] = gate(fa, pb[H + j], clip) * hpb[j];
                } else {
                    double *q = d->q + (s * B + b) * H;
                    for (int64_t j = 0; j < H; j++) {
                        q[j] = hr[2 * H + j];
                        pb[2 * H + j] += gate(fa, pb[H + j], clip) * q[j];
                    }
                }
                break;
            case RNN_CELL_LSTM: {
                const double *cpb = cp + b * H, *p = d->p;
                double *cnb = cn + b * H;
                for (int64_t j = 0; j < H; j++) {
                    double *ai = pb + j, *ao = pb + H + j, *af = pb + 2 * H + j, *ac = pb + 3 * H + j;
                    *ai += hr[j] + p[j] * cpb[j];
                    *af += hr[2 * H + j] + p[2 * H + j] * cpb[j];
                    *ac += hr[3 * H + j];
                    const double i = gate(fa, *ai, clip), f = g->input_forget ? 1 - i : gate(fa, *af, clip);
                    cnb[j] = f * cpb[j] + i * gate(ga, *ac, clip);
                    *ao += hr[H + j] + p[H + j] * cnb[j];
                    hnb[j] = gate(fa, *ao, clip) * rnn_act_apply(ha, cnb[j]);
                }
                break;
            }
            }
        }
        if (g->cell != RNN_CELL_GRU) continue;
        if (gru_rh) { /* (r H_prev) Rh^T + Rbh */
            if ((rc = rnn_gemm(ctx, false, true, B, H, H, d->rh + s * B * H, H, d->r + 2 * H * H, H, d->hr + 2 * H,
                               GH, false, d->rb + 2 * H)) != PARDO_OK)
                break;
        }
        for (int64_t b = 0; b < B; b++) {
            if (s >= d->len[b]) continue;
            const double *hpb = hp + b * H, *hr = d->hr + b * GH;
            double *pb = pre + b * GH, *hnb = hn + b * H;
            for (int64_t j = 0; j < H; j++) {
                if (gru_rh) pb[2 * H + j] += hr[2 * H + j];
                const double z = gate(fa, pb[j], clip), h = gate(ga, pb[2 * H + j], clip);
                hnb[j] = (1 - z) * h + z * hpb[j];
            }
        }
    }
    return rc;
}

int rnn_dir_backward(pardo_kernel_ctx *ctx, rnn_dir *d, const double *dy) {
    const rnn_geom *g = d->g;
    const int64_t B = g->batch, H = g->hidden, GH = g->gates * H, S = g->seq;
    const double clip = g->clip;
    const rnn_act *fa = &d->act[0], *ga = &d->act[1], *ha = &d->act[2];
    const bool gru_rh = g->cell == RNN_CELL_GRU && !g->lbr;
    int rc = PARDO_OK;
    if (d->dp) memset(d->dp, 0, sizeof(double) * 3 * (size_t)H);
    for (int64_t s = S - 1; rc == PARDO_OK && s >= 0; s--) {
        const double *hp = d->hs + s * B * H, *pre = d->pre + s * B * GH;
        double *dax = d->dax + s * B * GH, *dar = d->dar + s * B * GH;
        for (int64_t b = 0; b < B; b++) {
            const bool on = s < d->len[b];
            const double *hpb = hp + b * H, *pb = pre + b * GH;
            double *dh = d->dh + b * H, *tmp = d->tmp + b * H, *dxb = dax + b * GH, *drb = dar + b * GH;
            if (!on) { /* H and C pass through */
                memcpy(tmp, dh, sizeof(double) * (size_t)H);
                memset(dxb, 0, sizeof(double) * (size_t)GH);
                if (dar != dax) memset(drb, 0, sizeof(double) * (size_t)GH);
                continue;
            }
            if (dy)
                for (int64_t j = 0; j < H; j++) dh[j] += dy[(s * B + b) * H + j];
            switch (g->cell) {
            case RNN_CELL_RNN:
                for (int64_t j = 0; j < H; j++) {
                    dxb[j] = dh[j] * gate_d(fa, pb[j], clip);
                    tmp[j] = 0;
                }
                break;
            case RNN_CELL_GRU:
                for (int64_t j = 0; j < H; j++) {
                    const double z = gate(fa, pb[j], clip), h = gate(ga, pb[2 * H + j], clip);
                    const double dah = dh[j] * (1 - z) * gate_d(ga, pb[2 * H + j], clip);
                    dxb[j] = dh[j] * (hpb[j] - h) * gate_d(fa, pb[j], clip);
                    dxb[2 * H + j] = dah;
                    tmp[j] = dh[j] * z;
                    if (!gru_rh) { /* a_h = ... + r q */
                        const double q = d->q[(s * B + b) * H + j];
                        drb[j] = dxb[j];
                        dxb[H + j] = drb[H + j] = dah * q * gate_d(fa, pb[H + j], clip);
                        drb[2 * H + j] = dah * gate(fa, pb[H + j], clip);
                    }
                }
                break;
            case RNN_CELL_LSTM: {
                const double *cpb = d->cs + (s * B + b) * H, *cnb = d->cs + ((s + 1) * B + b) * H, *p = d->p;
                double *dc = d->dc + b * H;
                for (int64_t j = 0; j < H; j++) {
                    const double ai = pb[j], ao = pb[H + j], af = pb[2 * H + j], ac = pb[3 * H + j];
                    const double i = gate(fa, ai, clip), f = g->input_forget ? 1 - i : gate(fa, af, clip);
                    const double c = gate(ga, ac, clip), o = gate(fa, ao, clip), hc = rnn_act_apply(ha, cnb[j]);
                    const double dao = dh[j] * hc * gate_d(fa, ao, clip);
                    const double dct = dc[j] + dh[j] * o * rnn_act_deriv(ha, cnb[j]) + dao * p[H + j];
                    double di = dct * c;
                    const double df = dct * cpb[j];
                    double daf = 0;
                    if (g->input_forget) di -= df;
                    else daf = df * gate_d(fa, af, clip);
                    const double dai = di * gate_d(fa, ai, clip), dac = dct * i * gate_d(ga, ac, clip);
                    dc[j] = dct * f + dai * p[j] + daf * p[2 * H + j];
                    d->dp[j] += dai * cpb[j];
                    d->dp[H + j] += dao * cnb[j];
                    d->dp[2 * H + j] += daf * cpb[j];
                    dxb[j] = dai;
                    dxb[H + j] = dao;
                    dxb[2 * H + j] = daf;
                    dxb[3 * H + j] = dac;
                    tmp[j] = 0;
                }
                break;
            }
            }
        }
        if (gru_rh) { /* d(r H_prev) = da_h Rh; then r's gradient and H_prev's through r H_prev */
            if ((rc = rnn_gemm(ctx, false, false, B, H, H, dax + 2 * H, GH, d->r + 2 * H * H, H, d->drh, H, false,
                               NULL)) != PARDO_OK)
                break;
            for (int64_t b = 0; b < B; b++) {
                if (s >= d->len[b]) continue;
                const double *hpb = hp + b * H, *pb = pre + b * GH, *drh = d->drh + b * H;
                double *tmp = d->tmp + b * H, *dxb = dax + b * GH;
                for (int64_t j = 0; j < H; j++) {
                    dxb[H + j] = drh[j] * hpb[j] * gate_d(fa, pb[H + j], clip);
                    tmp[j] += drh[j] * gate(fa, pb[H + j], clip);
                }
            }
        }
        /* H_prev's gradient through the R products: tmp += dA R (gru without linear_before_reset: gates z, r) */
        if ((rc = rnn_gemm(ctx, false, false, B, H, gru_rh ? 2 * H : GH, dar, GH, d->r, H, d->tmp, H, true, NULL)) !=
            PARDO_OK)
            break;
        memcpy(d->dh, d->tmp, sizeof(double) * (size_t)(B * H));
    }
    return rc;
}
