/* onnx_compose.c - the ONNX op types pardo runs as several of its own ops:
 * one node expanded into a short chain (Trilu as a constant mask,
 * DepthToSpace / SpaceToDepth as reshape-transpose-reshape, Tile as
 * concats, LpNormalization / LpPool / GlobalLpPool as reductions and an
 * average pool), and the run-time forms of Clip and BatchNormalization that
 * onnx_ops.c hands over. Its table is searched beside onnx_ops.c's
 * (onnx_find_mapping); the helpers are onnx_ops.c's (onnx_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx_internal.h"

/* Clip with bounds known only at run time: where(x < min, min, x), then where(y > max, max, y)
 * (min above max gives max everywhere, as ONNX says). */
int onnx_clip_at_run_time(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *y = onnx_in_var(c, n, 0, st);
    for (int k = 1; y && k <= 2; k++) {
        if (!onnx_input(c, n, k)) continue;
        const bool last = k == 2 || !onnx_input(c, n, 2);
        const char *bound = onnx_in_var(c, n, k, st),
                   *cond = bound ? onnx_step(c, n, k == 1 ? "less" : "greater", y, bound, false, st) : NULL;
        const char *out = cond ? (last ? onnx_out_var(c, n, 0, st) : onnx_temp(c, "clip", st)) : NULL;
        const char *in[3] = {cond, bound, y};
        if (!out || !onnx_emit(c, "where", in, 3, &out, 1, st)) return st->code;
        y = out;
    }
    return y ? PARDO_OK : st->code;
}

/* BatchNormalization whose statistics or scale are known only at run time:
 * y = (x - mean) / sqrt(var + epsilon) * scale + B, each [C] input
 * unsqueezed to [C, 1, ...] against x [N, C, ...]. */
int onnx_batch_norm_at_run_time(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = onnx_in_var(c, n, 0, st), *in[4];
    pardo_type t;
    if (!x || onnx_type_of(c, x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 2) return onnx_bad(c, st, "input of rank %d; expected [N, C, ...]", t.ndim);
    int64_t axes[PARDO_MAX_DIMS];
    for (int i = 2; i < t.ndim; i++) axes[i - 2] = i - 1;
    for (int i = 0; i < 4; i++) {
        const char *v = onnx_in_var(c, n, i + 1, st);
        if (!v) return st->code;
        in[i] = v;
        if (t.ndim > 2) {
            const char *u = onnx_temp(c, "bn_c", st);
            pardo_op *op = u ? onnx_emit(c, "unsqueeze", &v, 1, &u, 1, st) : NULL;
            if (!op || onnx_set_ints(op, "axes", axes, t.ndim - 2, st) != PARDO_OK) return st->code;
            in[i] = u;
        }
    }
    const char *centred = onnx_temp(c, "bn", st), *veps = onnx_temp(c, "bn", st), *sd = onnx_temp(c, "bn", st),
               *norm = onnx_temp(c, "bn", st), *scaled = onnx_temp(c, "bn", st);
    if (!scaled) return st->code;
    const char *sub[2] = {x, in[2]}, *div[2] = {centred, sd}, *mul[2] = {norm, in[0]}, *add[2] = {scaled, in[1]};
    pardo_op *op;
    if (!onnx_emit(c, "sub", sub, 2, &centred, 1, st) || !(op = onnx_emit(c, "scale", &in[3], 1, &veps, 1, st)) ||
        onnx_set_float(op, "bias", onnx_attr_float(n, "epsilon", 1e-5), st) != PARDO_OK ||
        !onnx_emit(c, "sqrt", &veps, 1, &sd, 1, st) || !onnx_emit(c, "div", div, 2, &norm, 1, st) ||
        !onnx_emit(c, "mul", mul, 2, &scaled, 1, st))
        return st->code;
    return onnx_emit1(c, n, "add", add, 2, st) ? PARDO_OK : st->code;
}

/* Trilu over static last two dims: a constant mask, where(mask, x, 0). */
static int map_trilu(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"upper", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 2 || t.shape[t.ndim - 1] < 0 || t.shape[t.ndim - 2] < 0)
        return onnx_unsupported(c, st, "Trilu over run-time matrix dims");
    double k = 0;
    if (onnx_input(c, n, 1) && !onnx_const_input_scalar(c, n, 1, &k))
        return onnx_unsupported(c, st, "input 1 (k) must be a constant");
    const bool upper = onnx_attr_int(n, "upper", 1) != 0;
    int64_t dims[2] = {t.shape[t.ndim - 2], t.shape[t.ndim - 1]};
    pardo_tensor *m = pardo_tensor_new_cpu(PARDO_BOOL, 2, dims, st);
    if (!m) return st->code;
    uint8_t *md = pardo_tensor_data(m);
    for (int64_t i = 0; i < dims[0]; i++)
        for (int64_t j = 0; j < dims[1]; j++) md[i * dims[1] + j] = upper ? (double)(j - i) >= k : (double)(j - i) <= k;
    const char *mask = onnx_const_var(c, "trilu_mask", m, false, st),
               *zero = mask ? onnx_scalar_const(c, t.dtype, 0, st) : NULL;
    const char *in[3] = {mask, x, zero};
    return zero && onnx_emit1(c, n, "where", in, 3, st) ? PARDO_OK : st->code;
}

/* x reshaped to `a`, transposed by perm, reshaped to `b` (0 in a shape copies the batch). */
static int reshape_transpose_reshape(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, const int64_t *a, int na,
                                     const int64_t *perm, const int64_t *b, int nb, pardo_status *st) {
    const char *r = onnx_temp(c, "blocks", st), *tr = r ? onnx_temp(c, "blocks", st) : NULL;
    pardo_op *op = tr ? onnx_emit(c, "reshape", &x, 1, &r, 1, st) : NULL;
    if (!op || onnx_set_ints(op, "shape", a, na, st) != PARDO_OK) return st->code;
    if (!(op = onnx_emit(c, "transpose", &r, 1, &tr, 1, st)) || onnx_set_ints(op, "perm", perm, na, st) != PARDO_OK)
        return st->code;
    op = onnx_emit1(c, n, "reshape", &tr, 1, st);
    return op ? onnx_set_ints(op, "shape", b, nb, st) : st->code;
}

/* DepthToSpace / SpaceToDepth over static C, H, W: a reshape, a transpose and a reshape (ONNX's definition). */
static int map_depth_space(onnx_ctx *c, const Onnx__NodeProto *n, bool to_space, pardo_status *st) {
    static const char *const known[] = {"blocksize", "mode", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const int64_t b = onnx_attr_int(n, "blocksize", 0);
    if (b < 1) return onnx_bad(c, st, "attr 'blocksize' must be at least 1");
    if (t.ndim != 4 || t.shape[1] < 0 || t.shape[2] < 0 || t.shape[3] < 0)
        return onnx_unsupported(c, st, "an input other than [N, C, H, W] with static C, H and W");
    const int64_t C = t.shape[1], H = t.shape[2], W = t.shape[3];
    char mode[8];
    const bool crd = strcmp(onnx_attr_string(n, "mode", "DCR", mode, sizeof mode), "CRD") == 0;
    if (to_space) {
        if (C % (b * b)) return onnx_bad(c, st, "C %lld is not a multiple of blocksize^2", (long long)C);
        const int64_t cb = C / (b * b);
        const int64_t dcr[6] = {0, b, b, cb, H, W}, crd_s[6] = {0, cb, b, b, H, W};
        const int64_t p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3};
        const int64_t out[4] = {0, cb, H * b, W * b};
        return reshape_transpose_reshape(c, n, x, crd ? crd_s : dcr, 6, crd ? p_crd : p_dcr, out, 4, st);
    }
    if (H % b || W % b) return onnx_bad(c, st, "H %lld and W %lld must be multiples of blocksize", (long long)H,
                                        (long long)W);
    const int64_t a[6] = {0, C, H / b, b, W / b, b}, perm[6] = {0, 3, 5, 1, 2, 4},
                  out[4] = {0, C * b * b, H / b, W / b};
    return reshape_transpose_reshape(c, n, x, a, 6, perm, out, 4, st);
}

static int map_depth_to_space(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_depth_space(c, n, true, st);
}

static int map_space_to_depth(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    return map_depth_space(c, n, false, st);
}

/* Tile with constant repeats: r copies concatenated along each axis. */
static int map_tile(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x;
    pardo_type t;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    int64_t reps[ONNX_MAX_INTS];
    int nr = 0;
    if (!onnx_const_input_ints(c, n, 1, reps, &nr))
        return onnx_unsupported(c, st, "input 1 (repeats) must be a constant");
    if (nr != t.ndim) return onnx_bad(c, st, "%d repeats for rank %d", nr, t.ndim);
    int last = -1;
    for (int a = 0; a < nr; a++) {
        if (reps[a] < 0) return onnx_bad(c, st, "repeat %lld on axis %d", (long long)reps[a], a);
        if (reps[a] > 64) return onnx_unsupported(c, st, "a repeat over 64");
        if (reps[a] != 1) last = a;
    }
    if (last < 0) return onnx_emit1(c, n, "identity", &x, 1, st) ? PARDO_OK : st->code;
    const char *acc = x;
    for (int a = 0; a <= last; a++) {
        if (reps[a] == 1) continue;
        const char *copies[64];
        for (int k = 0; k < reps[a]; k++) copies[k] = acc;
        const char *out = a == last ? onnx_out_var(c, n, 0, st) : onnx_temp(c, "tile", st);
        pardo_op *op = out && reps[a] ? onnx_emit(c, "concat", copies, (int)reps[a], &out, 1, st) : NULL;
        if (!op || onnx_set_int(op, "axis", a, st) != PARDO_OK)
            return reps[a] ? st->code : onnx_unsupported(c, st, "a repeat of 0");
        acc = out;
    }
    return PARDO_OK;
}

/* SoftmaxCrossEntropyLoss: log_softmax along axis 1 (into the optional
 * log_prob output) then nll_loss with the node's weight, reduction and
 * ignore_index. */
static int map_softmax_cross_entropy_loss(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    const char *x = onnx_in_var(c, n, 0, st);
    if (!x) return st->code;
    const bool want_lp = n->n_output > 1 && n->output[1][0];
    const char *lp = want_lp ? onnx_out_var(c, n, 1, st) : onnx_temp(c, "log_prob", st);
    pardo_op *op = lp ? onnx_emit(c, "log_softmax", &x, 1, &lp, 1, st) : NULL;
    if (!op || onnx_set_int(op, "axis", 1, st) != PARDO_OK) return st->code;
    return onnx_emit_nll(c, n, lp, st);
}

/* (x - mean) / sqrt(var + eps) over the axes (kept), mean and var by
 * reduce_mean; into node output 0 when last and no affine step follows.
 * The normalised var (borrowed) or NULL with st set; the mean and (biased)
 * var vars, kept dims, into *mean_out and *var_out where not NULL. */
static const char *normalise_over_stats(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, pardo_dtype dt,
                                        const int64_t *axes, int na, double eps, bool last, const char **mean_out,
                                        const char **var_out, pardo_status *st) {
    const char *mean = onnx_temp(c, "norm_mean", st);
    pardo_op *op = mean ? onnx_emit(c, "reduce_mean", &x, 1, &mean, 1, st) : NULL;
    if (!op || onnx_set_ints(op, "axes", axes, na, st) != PARDO_OK) return NULL;
    const char *d = onnx_step(c, n, "sub", x, mean, false, st), *sq = d ? onnx_step(c, n, "mul", d, d, false, st) : NULL;
    const char *var = sq ? onnx_temp(c, "norm_var", st) : NULL;
    op = var ? onnx_emit(c, "reduce_mean", &sq, 1, &var, 1, st) : NULL;
    if (!op || onnx_set_ints(op, "axes", axes, na, st) != PARDO_OK) return NULL;
    if (mean_out) *mean_out = mean;
    if (var_out) *var_out = var;
    const char *e = onnx_scalar_const(c, dt, eps, st), *ve = e ? onnx_step(c, n, "add", var, e, false, st) : NULL;
    const char *sd = ve ? onnx_step(c, n, "sqrt", ve, NULL, false, st) : NULL;
    return sd ? onnx_step(c, n, "div", d, sd, last, st) : NULL;
}

static const char *normalise_over(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, pardo_dtype dt,
                                  const int64_t *axes, int na, double eps, bool last, pardo_status *st) {
    return normalise_over_stats(c, n, x, dt, axes, na, eps, last, NULL, NULL, st);
}

/* [C] input i of n reshaped to [C, 1, ...] against an input of rank nd (as it is when nd is 2). */
static const char *per_channel(onnx_ctx *c, const Onnx__NodeProto *n, int i, int nd, pardo_status *st) {
    const char *v = onnx_in_var(c, n, i, st);
    if (!v || nd <= 2) return v;
    int64_t shape[PARDO_MAX_DIMS] = {-1};
    for (int k = 1; k < nd - 1; k++) shape[k] = 1;
    const char *r = onnx_temp(c, "bn_c", st);
    pardo_op *op = r ? onnx_emit(c, "reshape", &v, 1, &r, 1, st) : NULL;
    return op && onnx_set_ints(op, "shape", shape, nd - 1, st) == PARDO_OK ? r : NULL;
}

int onnx_batch_norm_training(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    if (c->opset < 14)
        return onnx_unsupported(c, st, "training_mode before opset 14 (its saved mean and var outputs)");
    const char *x;
    pardo_type t;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 2) return onnx_bad(c, st, "input of rank %d; expected [N, C, ...]", t.ndim);
    int64_t axes[PARDO_MAX_DIMS] = {0};
    for (int k = 2; k < t.ndim; k++) axes[k - 1] = k;
    const char *mean, *var;
    const char *y = normalise_over_stats(c, n, x, t.dtype, axes, t.ndim - 1, onnx_attr_float(n, "epsilon", 1e-5),
                                         false, &mean, &var, st);
    const char *sc = y ? per_channel(c, n, 1, t.ndim, st) : NULL, *b = sc ? per_channel(c, n, 2, t.ndim, st) : NULL;
    const char *ys = b ? onnx_step(c, n, "mul", y, sc, false, st) : NULL;
    if (!ys || !onnx_step(c, n, "add", ys, b, true, st)) return st->code;
    /* running = running * momentum + batch * (1 - momentum), the batch's var biased (ONNX's reference) */
    const double mom = onnx_attr_float(n, "momentum", 0.9);
    const char *batch[2] = {mean, var};
    for (int k = 1; k <= 2; k++) {
        if ((int)n->n_output <= k || !n->output[k][0]) continue;
        const char *flat = onnx_temp(c, "bn_batch", st), *part = flat ? onnx_temp(c, "bn_batch", st) : NULL,
                   *run_in = part ? onnx_in_var(c, n, k + 2, st) : NULL,
                   *run = run_in ? onnx_temp(c, "bn_running", st) : NULL,
                   *out = run ? onnx_out_var(c, n, k, st) : NULL;
        pardo_op *op = out ? onnx_emit(c, "reshape", &batch[k - 1], 1, &flat, 1, st) : NULL;
        if (!op || onnx_set_ints(op, "shape", (const int64_t[]){-1}, 1, st) != PARDO_OK) return st->code;
        if (!(op = onnx_emit(c, "scale", &flat, 1, &part, 1, st)) ||
            onnx_set_float(op, "scale", 1 - mom, st) != PARDO_OK ||
            !(op = onnx_emit(c, "scale", &run_in, 1, &run, 1, st)) || onnx_set_float(op, "scale", mom, st) != PARDO_OK)
            return st->code;
        const char *add[2] = {run, part};
        if (!onnx_emit(c, "add", add, 2, &out, 1, st)) return st->code;
    }
    return PARDO_OK;
}

/* InstanceNormalization: normalised over the spatial dims per image and
 * channel, then scale and B (reshaped to [C, 1, ...]) applied. */
static int map_instance_norm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"epsilon", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 3) return onnx_unsupported(c, st, "InstanceNormalization of a rank-%d input", t.ndim);
    int64_t axes[PARDO_MAX_DIMS], shape[PARDO_MAX_DIMS];
    for (int k = 2; k < t.ndim; k++) axes[k - 2] = k;
    const char *y = normalise_over(c, n, x, t.dtype, axes, t.ndim - 2, onnx_attr_float(n, "epsilon", 1e-5), false, st);
    const char *sc = y ? onnx_in_var(c, n, 1, st) : NULL, *b = sc ? onnx_in_var(c, n, 2, st) : NULL;
    if (!b) return st->code;
    shape[0] = -1;
    for (int k = 1; k < t.ndim - 1; k++) shape[k] = 1;
    const char *in2[2] = {sc, b}, *rs[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        rs[k] = onnx_temp(c, k ? "norm_bias" : "norm_scale", st);
        pardo_op *op = rs[k] ? onnx_emit(c, "reshape", &in2[k], 1, &rs[k], 1, st) : NULL;
        if (!op || onnx_set_ints(op, "shape", shape, t.ndim - 1, st) != PARDO_OK) return st->code;
    }
    const char *ys = onnx_step(c, n, "mul", y, rs[0], false, st);
    return ys && onnx_step(c, n, "add", ys, rs[1], true, st) ? PARDO_OK : st->code;
}

/* MeanVarianceNormalization: normalised over attr axes ([0, 2, 3] by
 * default), eps 1e-9 as ONNX's function body. */
static int map_mean_variance_norm(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axes", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    const char *x;
    pardo_type t;
    if (onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    int na = 3;
    int64_t axes[ONNX_MAX_INTS] = {0, 2, 3};
    const int64_t *a = onnx_attr_ints(n, "axes", &na);
    if (a) {
        if (na > ONNX_MAX_INTS) return onnx_unsupported(c, st, "%d axes", na);
        memcpy(axes, a, sizeof(int64_t) * (size_t)na);
    } else {
        na = 3;
    }
    return normalise_over(c, n, x, t.dtype, axes, na, 1e-9, true, st) ? PARDO_OK : st->code;
}

/* ---- Lp norms and pools ---- */

/* Attr p of an Lp op, checked: an integer >= 1 (LpNormalization: 1 or 2). */
static int lp_order(onnx_ctx *c, const Onnx__NodeProto *n, bool one_or_two, int64_t *p, pardo_status *st) {
    *p = onnx_attr_int(n, "p", 2);
    if (*p < 1 || (one_or_two && *p > 2))
        return onnx_bad(c, st, "attr 'p' = %lld; expected %s", (long long)*p, one_or_two ? "1 or 2" : ">= 1");
    return PARDO_OK;
}

/* |x|^p: x * x for p = 2 (no abs needed), abs for p = 1, else pow(abs(x), p); a temp, or NULL with st set. */
static const char *abs_pow(onnx_ctx *c, const Onnx__NodeProto *n, const char *x, int64_t p, pardo_status *st) {
    if (p == 2) return onnx_step(c, n, "mul", x, x, false, st);
    const char *a = onnx_step(c, n, "abs", x, NULL, false, st);
    if (!a || p == 1) return a;
    const char *y = onnx_temp(c, "lp_pow", st);
    pardo_op *op = y ? onnx_emit(c, "pow", &a, 1, &y, 1, st) : NULL;
    return op && onnx_set_float(op, "exponent", (double)p, st) == PARDO_OK ? y : NULL;
}

/* s^(1/p) into node output 0: sqrt for p = 2, s itself for p = 1 (an identity), else pow. */
static int root_p(onnx_ctx *c, const Onnx__NodeProto *n, const char *s, int64_t p, pardo_status *st) {
    if (p <= 2) return onnx_step(c, n, p == 2 ? "sqrt" : "identity", s, NULL, true, st) ? PARDO_OK : st->code;
    pardo_op *op = onnx_emit1(c, n, "pow", &s, 1, st);
    return op && onnx_set_float(op, "exponent", 1.0 / (double)p, st) == PARDO_OK ? PARDO_OK : st->code;
}

/* LpNormalization: x / ||x||_p along attr axis (keepdims, broadcast back):
 * reduce_l1 or reduce_l2, then div. As ONNX, no epsilon: a zero norm gives
 * NaN or Inf. */
static int map_lp_normalization(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"axis", "p", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t p;
    const char *x;
    pardo_type t;
    if (lp_order(c, n, true, &p, st) != PARDO_OK || onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    const int64_t axis = onnx_attr_int(n, "axis", -1);
    if (t.ndim >= 0 && (axis < -t.ndim || axis >= t.ndim))
        return onnx_bad(c, st, "attr 'axis' = %lld out of range for a rank-%d input", (long long)axis, t.ndim);
    const char *norm = onnx_temp(c, "lp_norm", st);
    pardo_op *op = norm ? onnx_emit(c, p == 1 ? "reduce_l1" : "reduce_l2", &x, 1, &norm, 1, st) : NULL;
    if (!op || onnx_set_ints(op, "axes", &axis, 1, st) != PARDO_OK || onnx_set_bool(op, "keepdims", true, st) != PARDO_OK)
        return st->code;
    return onnx_step(c, n, "div", x, norm, true, st) ? PARDO_OK : st->code;
}

/* GlobalLpPool: (sum over the spatial dims of |x|^p)^(1/p), kept as size-1
 * dims: reduce_l1 / reduce_l2 for p = 1 / 2, else |x|^p, reduce_sum, pow. */
static int map_global_lp_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"p", NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t p, axes[PARDO_MAX_DIMS];
    const char *x;
    pardo_type t;
    if (lp_order(c, n, false, &p, st) != PARDO_OK || onnx_input0(c, n, &x, &t, st) != PARDO_OK) return st->code;
    if (t.ndim < 3) return onnx_bad(c, st, "input of rank %d; expected [N, C, spatial...]", t.ndim);
    for (int i = 2; i < t.ndim; i++) axes[i - 2] = i;
    const bool direct = p <= 2;
    const char *in = direct ? x : abs_pow(c, n, x, p, st), *sum = in && !direct ? onnx_temp(c, "lp_sum", st) : NULL;
    if (!in || (!direct && !sum)) return st->code;
    pardo_op *op = direct ? onnx_emit1(c, n, p == 1 ? "reduce_l1" : "reduce_l2", &in, 1, st)
                          : onnx_emit(c, "reduce_sum", &in, 1, &sum, 1, st);
    if (!op || onnx_set_ints(op, "axes", axes, t.ndim - 2, st) != PARDO_OK ||
        onnx_set_bool(op, "keepdims", true, st) != PARDO_OK)
        return st->code;
    return direct ? PARDO_OK : root_p(c, n, sum, p, st);
}

/* LpPool: per window (sum of |x|^p)^(1/p). |x|^p, zero-padded by the
 * window's pads (auto_pad and ceil_mode as MaxPool's), avg_pool_nd without
 * pads (every window whole, so its mean is the sum over the kernel's
 * elements), scaled by the kernel's size, then the p-th root. Pads add
 * zeros to the sum, as ONNX's reference. */
static int map_lp_pool(onnx_ctx *c, const Onnx__NodeProto *n, pardo_status *st) {
    static const char *const known[] = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides",
                                        NULL};
    if (onnx_check_attrs(c, n, known, st) != PARDO_OK) return st->code;
    int64_t p;
    const char *x = lp_order(c, n, false, &p, st) == PARDO_OK ? onnx_in_var(c, n, 0, st) : NULL;
    onnx_pool_geom g;
    if (!x || onnx_pool_geometry(c, n, x, &g, st) != PARDO_OK) return st->code;
    const char *xp = abs_pow(c, n, x, p, st), *padded = xp ? onnx_pool_zero_pad(c, xp, &g, st) : NULL;
    const char *mean = padded ? onnx_temp(c, "lp_mean", st) : NULL;
    if (!mean || !onnx_emit_pool_nd(c, "avg_pool_nd", padded, &mean, 1, &g, st)) return st->code;
    double count = 1;
    for (int i = 0; i < g.nk; i++) count *= (double)g.kernel[i];
    const char *sum = onnx_temp(c, "lp_sum", st);
    pardo_op *op = sum ? onnx_emit(c, "scale", &mean, 1, &sum, 1, st) : NULL;
    if (!op || onnx_set_float(op, "scale", count, st) != PARDO_OK) return st->code;
    return root_p(c, n, sum, p, st);
}

/* ---- the table (sorted; onnx_ops.c checks it) ---- */

const onnx_mapping onnx_compose_table[] = {
    {"DepthToSpace", map_depth_to_space},
    {"GlobalLpPool", map_global_lp_pool},
    {"InstanceNormalization", map_instance_norm},
    {"LpNormalization", map_lp_normalization},
    {"LpPool", map_lp_pool},
    {"MeanVarianceNormalization", map_mean_variance_norm},
    {"SoftmaxCrossEntropyLoss", map_softmax_cross_entropy_loss},
    {"SpaceToDepth", map_space_to_depth},
    {"Tile", map_tile},
    {"Trilu", map_trilu},
};

const size_t onnx_compose_count = sizeof onnx_compose_table / sizeof onnx_compose_table[0];
