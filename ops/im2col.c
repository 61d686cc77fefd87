/* im2col.c - conv2d's column matrix and its scatter back (see im2col.h).
 *
 * For one tap (kh, kw) of one channel the outputs that read inside the
 * input form a rectangle [oh0, oh1) x [ow0, ow1) (pardo_window2d_tap_range).
 * Where both strides are 1 and the output is as wide as the input (the
 * usual "same" convolution: pads that add up to the dilated kernel's width
 * less one), output q = oh * oW + ow reads input q + off for one offset off
 * over the whole rectangle, so the row is one contiguous copy (or add),
 * with the few elements at the rectangle's left and right edges, which read
 * padding, zeroed; elsewhere each output row is copied on its own. */
#include "im2col.h"

#include <string.h>

#define IM2COL_KERNELS(SUF, T)                                                                                         \
    PARDO_WINDOW2D_LOOPS void pardo_im2col_##SUF(const pardo_im2col *g, const T *x, T *col, int64_t ldc) {             \
        const pardo_window2d *p = g->win;                                                                              \
        const int64_t kh_n = p->kernel[0], kw_n = p->kernel[1], sh = p->stride[0], sw = p->stride[1];                  \
        const int64_t ohn = g->oh, own = g->ow, pn = ohn * own;                                                        \
        const int contiguous = sh == 1 && sw == 1 && own == g->w;                                                      \
        for (int64_t ci = 0; ci < g->c; ci++) {                                                                        \
            const T *xp = x + ci * g->h * g->w;                                                                        \
            for (int64_t kh = 0; kh < kh_n; kh++) {                                                                    \
                int64_t oh0, oh1;                                                                                      \
                pardo_window2d_tap_range(p, 0, kh, g->h, ohn, &oh0, &oh1);                                             \
                for (int64_t kw = 0; kw < kw_n; kw++) {                                                                \
                    int64_t ow0, ow1;                                                                                  \
                    pardo_window2d_tap_range(p, 1, kw, g->w, own, &ow0, &ow1);                                         \
                    T *row = col + ((ci * kh_n + kh) * kw_n + kw) * ldc;                                               \
                    if (oh0 == oh1 || ow0 == ow1) {                                                                    \
                        memset(row, 0, sizeof(T) * (size_t)pn);                                                        \
                        continue;                                                                                      \
                    }                                                                                                  \
                    if (contiguous) {                                                                                  \
                        const int64_t q0 = oh0 * own + ow0, q1 = (oh1 - 1) * own + ow1;                                \
                        const int64_t off = (kh * p->dilation[0] - p->pad[0]) * g->w + kw * p->dilation[1] - p->pad[1]; \
                        for (int64_t q = 0; q < q0; q++) row[q] = 0;                                                   \
                        for (int64_t q = q0; q < q1; q++) row[q] = xp[q + off];                                        \
                        for (int64_t q = q1; q < pn; q++) row[q] = 0;                                                  \
                        for (int64_t o = oh0; o < oh1; o++) {                                                          \
                            for (int64_t j = 0; j < ow0; j++) row[o * own + j] = 0;                                    \
                            for (int64_t j = ow1; j < own; j++) row[o * own + j] = 0;                                  \
                        }                                                                                              \
                        continue;                                                                                      \
                    }                                                                                                  \
                    for (int64_t o = 0; o < ohn; o++) {                                                                \
                        T *d = row + o * own;                                                                          \
                        if (o < oh0 || o >= oh1) {                                                                     \
                            for (int64_t j = 0; j < own; j++) d[j] = 0;                                                \
                            continue;                                                                                  \
                        }                                                                                              \
                        const T *s = xp + (o * sh - p->pad[0] + kh * p->dilation[0]) * g->w + ow0 * sw - p->pad[1] +   \
                                     kw * p->dilation[1];                                                              \
                        T *dr = d + ow0;                                                                               \
                        for (int64_t j = 0; j < ow0; j++) d[j] = 0;                                                    \
                        if (sw == 1)                                                                                   \
                            for (int64_t j = 0; j < ow1 - ow0; j++) dr[j] = s[j];                                      \
                        else                                                                                           \
                            for (int64_t j = 0; j < ow1 - ow0; j++) dr[j] = s[j * sw];                                 \
                        for (int64_t j = ow1; j < own; j++) d[j] = 0;                                                  \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS void pardo_col2im_##SUF(const pardo_im2col *g, T *col, int64_t ldc, T *dx) {                  \
        const pardo_window2d *p = g->win;                                                                              \
        const int64_t kh_n = p->kernel[0], kw_n = p->kernel[1], sh = p->stride[0], sw = p->stride[1];                  \
        const int64_t ohn = g->oh, own = g->ow;                                                                        \
        const int contiguous = sh == 1 && sw == 1 && own == g->w;                                                      \
        for (int64_t ci = 0; ci < g->c; ci++) {                                                                        \
            T *xp = dx + ci * g->h * g->w;                                                                             \
            for (int64_t kh = 0; kh < kh_n; kh++) {                                                                    \
                int64_t oh0, oh1;                                                                                      \
                pardo_window2d_tap_range(p, 0, kh, g->h, ohn, &oh0, &oh1);                                             \
                for (int64_t kw = 0; kw < kw_n; kw++) {                                                                \
                    int64_t ow0, ow1;                                                                                  \
                    pardo_window2d_tap_range(p, 1, kw, g->w, own, &ow0, &ow1);                                         \
                    T *row = col + ((ci * kh_n + kh) * kw_n + kw) * ldc;                                               \
                    if (oh0 == oh1 || ow0 == ow1) continue;                                                            \
                    if (contiguous) {                                                                                  \
                        /* the elements at the rectangle's edges read padding: zero them, then one add over the run    \
                         * (an input element gets + 0 from them, which leaves its value) */                            \
                        const int64_t q0 = oh0 * own + ow0, q1 = (oh1 - 1) * own + ow1;                                \
                        const int64_t off = (kh * p->dilation[0] - p->pad[0]) * g->w + kw * p->dilation[1] - p->pad[1]; \
                        for (int64_t o = oh0; o < oh1; o++) {                                                          \
                            for (int64_t j = 0; j < ow0; j++) row[o * own + j] = 0;                                    \
                            for (int64_t j = ow1; j < own; j++) row[o * own + j] = 0;                                  \
                        }                                                                                              \
                        for (int64_t q = q0; q < q1; q++) xp[q + off] += row[q];                                       \
                        continue;                                                                                      \
                    }                                                                                                  \
                    for (int64_t o = oh0; o < oh1; o++) {                                                              \
                        const T *d = row + o * own + ow0;                                                              \
                        T *s = xp + (o * sh - p->pad[0] + kh * p->dilation[0]) * g->w + ow0 * sw - p->pad[1] +         \
                               kw * p->dilation[1];                                                                    \
                        if (sw == 1)                                                                                   \
                            for (int64_t j = 0; j < ow1 - ow0; j++) s[j] += d[j];                                      \
                        else                                                                                           \
                            for (int64_t j = 0; j < ow1 - ow0; j++) s[j * sw] += d[j];                                 \
                    }                                                                                                  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

IM2COL_KERNELS(f32, float)
IM2COL_KERNELS(f64, double)
