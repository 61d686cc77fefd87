/* nms.c - non_max_suppression, ONNX's NonMaxSuppression: boxes [B, N, 4]
 * and scores [B, C, N] (float32 or float64), the optional scalar inputs
 * max_output_boxes_per_class (int; absent or 0: nothing is selected),
 * iou_threshold and score_threshold (float; absent: 0 and none). For each
 * batch and class, the boxes whose score is above score_threshold are taken
 * in decreasing score (the lower index first on ties) and a box is kept
 * unless its IoU with one kept before exceeds iou_threshold (a box of no
 * area overlaps nothing), up to max_output_boxes_per_class. Attr
 * center_point_box 0: a box is two opposite corners [y1, x1, y2, x2] in any
 * order; 1: [x_center, y_center, width, height]. Output selected_indices
 * [K, 3] int64 rows (batch, class, box) in that order; K is known only at
 * run time. Not differentiable. One thread; the kernel's room (a flag and a
 * kept index per box) is its thread's scratch (ops/scratch.h): the steady
 * state allocates nothing but the output. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn_util.h"
#include "op.h"
#include "scratch.h"

static const pardo_dtype float_dtypes[] = {PARDO_F32, PARDO_F64};

static const pardo_arg_def nms_in[] = {
    {"boxes", "[B, N, 4] float32 or float64", false, false},
    {"scores", "[B, C, N], boxes' dtype", false, false},
    {"max_output_boxes_per_class", "int32 or int64 scalar (absent: 0)", true, false},
    {"iou_threshold", "float scalar (absent: 0)", true, false},
    {"score_threshold", "float scalar (absent: no threshold)", true, false},
};
static const pardo_arg_def nms_out[] = {
    {"selected_indices", "int64 [K, 3]: batch, class, box of each kept box", false, false}};
static const pardo_attr_def nms_attrs[] = {
    {"center_point_box", PARDO_ATTR_INT, "0", "0: [y1, x1, y2, x2] corners; 1: [x_center, y_center, width, height]"},
};

static int nms_check(const pardo_type *b, const pardo_type *s, pardo_status *st) {
    char s1[128], s2[128];
    int rc = pardo_expect_dtype(b, "input 0 'boxes'", float_dtypes, 2, st);
    if (rc == PARDO_OK) rc = pardo_expect_dtype(s, "input 1 'scores'", float_dtypes, 2, st);
    if (rc != PARDO_OK) return rc;
    bool ok = (b->ndim < 0 || (b->ndim == 3 && (b->shape[2] < 0 || b->shape[2] == 4))) && (s->ndim < 0 || s->ndim == 3);
    if (ok && b->ndim == 3 && s->ndim == 3)
        for (int k = 0; k < 2 && ok; k++) {
            const int64_t x = b->shape[k], y = s->shape[k == 0 ? 0 : 2];
            ok = x < 0 || y < 0 || x == y;
        }
    if (ok) return PARDO_OK;
    return pardo_errorf(st, PARDO_ESHAPE, "boxes %s and scores %s, expected [B, N, 4] and [B, C, N]",
                        pardo_shape_str(b->ndim, b->shape, s1, sizeof s1),
                        pardo_shape_str(s->ndim, s->shape, s2, sizeof s2));
}

static int nms_infer(pardo_infer_ctx *ctx) {
    int64_t cpb;
    int rc = pardo_attr_int(ctx->op, "center_point_box", 0, &cpb, ctx->st);
    if (rc == PARDO_OK) rc = nms_check(ctx->in[0], ctx->in[1], ctx->st);
    if (rc != PARDO_OK) return rc;
    ctx->out[0] = (pardo_type){.dtype = PARDO_I64, .ndim = 2, .shape = {-1, 3}};
    return PARDO_OK;
}

/* Box i of batch b as [ymin, xmin, ymax, xmax]. */
static void nms_box(const pardo_tensor *boxes, int64_t b, int64_t i, bool center, double *o) {
    const int64_t at = (b * boxes->shape[1] + i) * 4;
    double v[4];
    for (int k = 0; k < 4; k++) v[k] = pardo_tensor_get_f64(boxes, at + k);
    if (center) {
        o[0] = v[1] - v[3] / 2;
        o[1] = v[0] - v[2] / 2;
        o[2] = v[1] + v[3] / 2;
        o[3] = v[0] + v[2] / 2;
    } else {
        o[0] = fmin(v[0], v[2]);
        o[1] = fmin(v[1], v[3]);
        o[2] = fmax(v[0], v[2]);
        o[3] = fmax(v[1], v[3]);
    }
}

/* True when boxes i and j of batch b overlap by more than thr (IoU). */
static bool nms_suppresses(const pardo_tensor *boxes, int64_t b, int64_t i, int64_t j, bool center, double thr) {
    double p[4], q[4];
    nms_box(boxes, b, i, center, p);
    nms_box(boxes, b, j, center, q);
    const double ap = (p[2] - p[0]) * (p[3] - p[1]), aq = (q[2] - q[0]) * (q[3] - q[1]);
    if (ap <= 0 || aq <= 0) return false;
    const double ih = fmax(0, fmin(p[2], q[2]) - fmax(p[0], q[0])), iw = fmax(0, fmin(p[3], q[3]) - fmax(p[1], q[1]));
    const double inter = ih * iw, uni = ap + aq - inter;
    return uni > 0 && inter / uni > thr;
}

/* Runs the selection for every batch and class: counts into *k, and writes
 * the rows into out when it is not NULL. flags and kept have room for N. */
static void nms_select(const pardo_tensor *boxes, const pardo_tensor *scores, int64_t max_out, double iou,
                       bool has_score_thr, double score_thr, bool center, unsigned char *flags, int64_t *kept,
                       int64_t *out, int64_t *k) {
    const int64_t nb = scores->shape[0], nc = scores->shape[1], n = scores->shape[2];
    *k = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t c = 0; c < nc; c++) {
            const int64_t base = (b * nc + c) * n;
            for (int64_t i = 0; i < n; i++)
                flags[i] = has_score_thr && !(pardo_tensor_get_f64(scores, base + i) > score_thr);
            int64_t nk = 0;
            while (nk < max_out) {
                int64_t best = -1;
                double bs = 0;
                for (int64_t i = 0; i < n; i++) {
                    if (flags[i]) continue;
                    const double s = pardo_tensor_get_f64(scores, base + i);
                    if (best < 0 || s > bs) best = i, bs = s;
                }
                if (best < 0) break;
                flags[best] = 1;
                bool drop = false;
                for (int64_t j = 0; j < nk && !drop; j++) drop = nms_suppresses(boxes, b, best, kept[j], center, iou);
                if (drop) continue;
                kept[nk++] = best;
                if (out) {
                    out[*k * 3] = b;
                    out[*k * 3 + 1] = c;
                    out[*k * 3 + 2] = best;
                }
                ++*k;
            }
        }
}

static int nms_cpu(pardo_kernel_ctx *ctx) {
    pardo_tensor *boxes = ctx->in[0], *scores = ctx->in[1], *mo = pardo_nn_in(ctx, 2), *it = pardo_nn_in(ctx, 3),
                 *stt = pardo_nn_in(ctx, 4);
    pardo_type tb = pardo_tensor_type(boxes), ts = pardo_tensor_type(scores);
    int64_t cpb;
    int rc = pardo_attr_int(ctx->op, "center_point_box", 0, &cpb, ctx->st);
    if (rc == PARDO_OK) rc = nms_check(&tb, &ts, ctx->st);
    if (rc != PARDO_OK) return rc;
    const pardo_tensor *sc[3] = {mo, it, stt};
    static const char *const names[3] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
    for (int k = 0; k < 3; k++)
        if (sc[k] && sc[k]->numel > 1)
            return pardo_errorf(ctx->st, PARDO_ESHAPE, "input %d '%s' has %lld elements, expected a scalar", k + 2,
                                names[k], (long long)sc[k]->numel);
    const int64_t max_out = mo && mo->numel ? (int64_t)pardo_tensor_get_f64(mo, 0) : 0;
    const double iou = it && it->numel ? pardo_tensor_get_f64(it, 0) : 0;
    const bool has_thr = stt && stt->numel;
    const double thr = has_thr ? pardo_tensor_get_f64(stt, 0) : 0;
    const int64_t n = scores->shape[2];
    unsigned char *room = pardo_scratch_get(PARDO_SCRATCH_STATS, (size_t)n * (sizeof(int64_t) + 1) + 8);
    if (!room) return pardo_errorf(ctx->st, PARDO_ENOMEM, "out of memory for %lld boxes", (long long)n);
    int64_t *kept = (int64_t *)(void *)room, k;
    unsigned char *flags = room + (size_t)n * sizeof(int64_t);
    nms_select(boxes, scores, max_out, iou, has_thr, thr, cpb != 0, flags, kept, NULL, &k);
    pardo_tensor *y = pardo_kernel_output(ctx, 0, PARDO_I64, 2, (int64_t[]){k, 3});
    if (!y) return ctx->st->code;
    nms_select(boxes, scores, max_out, iou, has_thr, thr, cpb != 0, flags, kept, pardo_tensor_data(y), &k);
    return PARDO_OK;
}

const pardo_op_def pardo_op_non_max_suppression = {
    .type = "non_max_suppression",
    .doc = "per batch and class, boxes by decreasing score kept unless they overlap a kept one by more than "
           "iou_threshold (ONNX NonMaxSuppression)",
    .inputs = nms_in,
    .n_inputs = 5,
    .outputs = nms_out,
    .n_outputs = 1,
    .attrs = nms_attrs,
    .n_attrs = 1,
    .infer = nms_infer,
    .cpu = nms_cpu,
};
