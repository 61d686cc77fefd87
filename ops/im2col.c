/* im2col.c - conv2d's column matrix and its scatter back (see im2col.h).
 *
 * For one tap (kh, kw) of one channel the outputs that read inside the
 * input form a rectangle [oh0, oh1) x [ow0, ow1) (pardo_window2d_tap_range).
 * Where both strides are 1 and the output is as wide as the input (the
 * usual "same" convolution: pads that add up to the dilated kernel's width
 * less one), output q = oh * oW + ow reads input q + off for one offset off
 * over the whole rectangle, so the row is one contiguous copy (or add),
 * with the few elements at the rectangle's left and right edges, which read
 * padding, masked to zero (masks per kw, made once per geometry and thread,
 * kept in a scratch buffer); elsewhere each output row is copied on its
 * own. */
#include "im2col.h"

#include <stdbool.h>
#include <string.h>

#include "kernel_util.h"
#include "scratch.h"

/* The column masks of the contiguous path: for each kw, P words (uint32_t for float32, uint64_t for float64), all
 * ones where output q's column q % oW reads inside the input (tap_range along the width), else zero. Built on a
 * thread's first call for a geometry, kept in its PARDO_SCRATCH_MASK buffer for the next calls. NULL when out
 * of memory (the caller then zeroes the edges element by element). */
typedef struct mask_geom {
    bool valid;
    int64_t kw_n, dilation, pad, w, oh, ow; // what the masks depend on
    size_t es;                              // bytes of a mask word
} mask_geom;

static _Thread_local mask_geom mask_key;

static const void *col_masks(const pardo_im2col *g, size_t es) {
    const pardo_window2d *p = g->win;
    const int64_t kw_n = p->kernel[1], pn = g->oh * g->ow;
    if (mask_key.valid && mask_key.kw_n == kw_n && mask_key.dilation == p->dilation[1] && mask_key.pad == p->pad[1] &&
        mask_key.w == g->w && mask_key.oh == g->oh && mask_key.ow == g->ow && mask_key.es == es)
        return pardo_scratch_get(PARDO_SCRATCH_MASK, (size_t)(kw_n * pn) * es);
    mask_key.valid = false;
    unsigned char *m = pardo_scratch_get(PARDO_SCRATCH_MASK, (size_t)(kw_n * pn) * es);
    if (!m) return NULL;
    for (int64_t kw = 0; kw < kw_n; kw++) {
        int64_t ow0, ow1;
        pardo_window2d_tap_range(p, 1, kw, g->w, g->ow, &ow0, &ow1);
        unsigned char *mk = m + (size_t)(kw * pn) * es;
        for (int64_t o = 0; o < g->oh; o++)
            for (int64_t j = 0; j < g->ow; j++)
                memset(mk + (size_t)(o * g->ow + j) * es, j >= ow0 && j < ow1 ? 0xff : 0, es);
    }
    mask_key = (mask_geom){.valid = true, .kw_n = kw_n, .dilation = p->dilation[1], .pad = p->pad[1],
                           .w = g->w, .oh = g->oh, .ow = g->ow, .es = es};
    return m;
}

/* Loops over the taps (kh, kw) with their rectangles [oh0, oh1) x [ow0, ow1), then over the channels ci, with
 * `row` the columns' row (ci, kh, kw) and `xp` channel ci of the image: the rectangles are found once per tap.
 * For a given input element the taps still come in (kh, kw) order. */
#define FOR_TAP_ROWS(XT, X, COLT, COL)                                                                                 \
    for (int64_t kh = 0; kh < kh_n; kh++) {                                                                            \
        int64_t oh0, oh1;                                                                                              \
        pardo_window2d_tap_range(p, 0, kh, g->h, ohn, &oh0, &oh1);                                                     \
        for (int64_t kw = 0; kw < kw_n; kw++) {                                                                        \
            int64_t ow0, ow1;                                                                                          \
            pardo_window2d_tap_range(p, 1, kw, g->w, own, &ow0, &ow1);                                                 \
            const int64_t q0 = oh0 * own + ow0, q1 = oh1 > oh0 ? (oh1 - 1) * own + ow1 : q0;                           \
            const int64_t off = (kh * p->dilation[0] - p->pad[0]) * g->w + kw * p->dilation[1] - p->pad[1];           \
            const bool empty = oh0 == oh1 || ow0 == ow1;                                                               \
            for (int64_t ci = 0; ci < g->c; ci++) {                                                                    \
                XT *xp = (X) + ci * g->h * g->w;                                                                       \
                COLT *row = (COL) + ((ci * kh_n + kh) * kw_n + kw) * ldc;

#define END_TAP_ROWS                                                                                                   \
    }                                                                                                                  \
    }                                                                                                                  \
    }

#define IM2COL_KERNELS(SUF, T, U)                                                                                      \
    PARDO_WINDOW2D_LOOPS void pardo_im2col_##SUF(const pardo_im2col *g, const T *x, T *col, int64_t ldc) {             \
        const pardo_window2d *p = g->win;                                                                              \
        const int64_t kh_n = p->kernel[0], kw_n = p->kernel[1], sh = p->stride[0], sw = p->stride[1];                  \
        const int64_t ohn = g->oh, own = g->ow, pn = ohn * own;                                                        \
        const bool contiguous = sh == 1 && sw == 1 && own == g->w;                                                     \
        const U *masks = contiguous ? col_masks(g, sizeof(T)) : NULL;                                                  \
        FOR_TAP_ROWS(const T, x, T, col)                                                                               \
        if (empty) {                                                                                                   \
            for (int64_t q = 0; q < pn; q++) row[q] = 0;                                                               \
        } else if (masks) {                                                                                            \
            /* one pass over the run, the edge elements (which read padding) masked to zero */                        \
            const U *mk = masks + kw * pn;                                                                             \
            for (int64_t q = 0; q < q0; q++) row[q] = 0;                                                               \
            for (int64_t q = q0; q < q1; q++) row[q] = pardo_from_bits_##SUF(pardo_bits_##SUF(xp[q + off]) & mk[q]);               \
            for (int64_t q = q1; q < pn; q++) row[q] = 0;                                                              \
        } else if (contiguous) {                                                                                       \
            for (int64_t q = 0; q < q0; q++) row[q] = 0;                                                               \
            for (int64_t q = q0; q < q1; q++) row[q] = xp[q + off];                                                    \
            for (int64_t q = q1; q < pn; q++) row[q] = 0;                                                              \
            for (int64_t o = oh0; o < oh1; o++) {                                                                      \
                for (int64_t j = 0; j < ow0; j++) row[o * own + j] = 0;                                                \
                for (int64_t j = ow1; j < own; j++) row[o * own + j] = 0;                                              \
            }                                                                                                          \
        } else {                                                                                                       \
            for (int64_t q = 0; q < oh0 * own; q++) row[q] = 0;                                                        \
            for (int64_t o = oh0; o < oh1; o++) {                                                                      \
                T *d = row + o * own;                                                                                  \
                const T *s = xp + (o * sh - p->pad[0] + kh * p->dilation[0]) * g->w + ow0 * sw - p->pad[1] +           \
                             kw * p->dilation[1];                                                                      \
                T *dr = d + ow0;                                                                                       \
                for (int64_t j = 0; j < ow0; j++) d[j] = 0;                                                            \
                if (sw == 1)                                                                                           \
                    for (int64_t j = 0; j < ow1 - ow0; j++) dr[j] = s[j];                                              \
                else                                                                                                   \
                    for (int64_t j = 0; j < ow1 - ow0; j++) dr[j] = s[j * sw];                                         \
                for (int64_t j = ow1; j < own; j++) d[j] = 0;                                                          \
            }                                                                                                          \
            for (int64_t q = oh1 * own; q < pn; q++) row[q] = 0;                                                       \
        }                                                                                                              \
        END_TAP_ROWS                                                                                                   \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS void pardo_col2im_##SUF(const pardo_im2col *g, T *col, int64_t ldc, T *dx) {                  \
        const pardo_window2d *p = g->win;                                                                              \
        const int64_t kh_n = p->kernel[0], kw_n = p->kernel[1], sh = p->stride[0], sw = p->stride[1];                  \
        const int64_t ohn = g->oh, own = g->ow, pn = ohn * own;                                                        \
        const bool contiguous = sh == 1 && sw == 1 && own == g->w;                                                     \
        const U *masks = contiguous ? col_masks(g, sizeof(T)) : NULL;                                                  \
        FOR_TAP_ROWS(T, dx, T, col)                                                                                    \
        if (empty) continue;                                                                                           \
        if (masks) {                                                                                                   \
            /* one pass over the run; an input element gets + 0 from the edge elements, which read padding */        \
            const U *mk = masks + kw * pn;                                                                             \
            for (int64_t q = q0; q < q1; q++) xp[q + off] += pardo_from_bits_##SUF(pardo_bits_##SUF(row[q]) & mk[q]);              \
            continue;                                                                                                  \
        }                                                                                                              \
        if (contiguous) {                                                                                              \
            /* the elements at the rectangle's edges read padding: zero them, then one add over the run (an input    \
             * element gets + 0 from them, which leaves its value) */                                                  \
            for (int64_t o = oh0; o < oh1; o++) {                                                                      \
                for (int64_t j = 0; j < ow0; j++) row[o * own + j] = 0;                                                \
                for (int64_t j = ow1; j < own; j++) row[o * own + j] = 0;                                              \
            }                                                                                                          \
            for (int64_t q = q0; q < q1; q++) xp[q + off] += row[q];                                                   \
            continue;                                                                                                  \
        }                                                                                                              \
        for (int64_t o = oh0; o < oh1; o++) {                                                                          \
            const T *d = row + o * own + ow0;                                                                          \
            T *s = xp + (o * sh - p->pad[0] + kh * p->dilation[0]) * g->w + ow0 * sw - p->pad[1] + kw * p->dilation[1]; \
            if (sw == 1)                                                                                               \
                for (int64_t j = 0; j < ow1 - ow0; j++) s[j] += d[j];                                                  \
            else                                                                                                       \
                for (int64_t j = 0; j < ow1 - ow0; j++) s[j * sw] += d[j];                                             \
        }                                                                                                              \
        END_TAP_ROWS                                                                                                   \
    }

IM2COL_KERNELS(f32, float, uint32_t)
IM2COL_KERNELS(f64, double, uint64_t)
