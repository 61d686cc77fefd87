/* im2col_nd.c - the N-d convolution columns of ops/im2col_nd.h: a loop per
 * row and position row, its innermost loop along the last axis (which
 * vectorises for stride 1). */
#include "im2col_nd.h"

#include "window2d.h"

int64_t pardo_cols_nd_block_rows(const pardo_cols_nd *g, size_t es, size_t max_bytes) {
    const double per_row = (double)g->c * (double)g->kp * (double)g->pos[2] * (double)es;
    const int64_t rows = g->pos[0] * g->pos[1];
    int64_t r = per_row >= (double)max_bytes ? 1 : (int64_t)((double)max_bytes / (per_row > 0 ? per_row : 1));
    return r > rows ? rows : r < 1 ? 1 : r;
}

/* The positions [*lo, *hi) along the last axis whose tap j reads inside the image. */
static void last_axis_range(const pardo_cols_nd *g, int64_t j, int64_t *lo, int64_t *hi) {
    const int64_t off = j * g->d[2] - g->pb[2], s = g->s[2];
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s, h = g->img[2] - off <= 0 ? 0 : (g->img[2] - off - 1) / s + 1;
    if (h > g->pos[2]) h = g->pos[2];
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* Runs BODY for every column row (ci, j0, j1, j2) and position row r in [r0, r1): cq points at the row's
 * block segment (pos2 elements), io at the image element of position (r, 0) of that tap along the last axis
 * (the segment's element p reads io + p * s2), [a2, b2) the positions that read inside, and in whether the
 * position row's taps along axes 0 and 1 read inside. */
#define COLS_ND_WALK(T, COL, BODY)                                                                                     \
    const int64_t ld_ = (r1 - r0) * g->pos[2];                                                                         \
    for (int64_t ci = 0; ci < g->c; ci++)                                                                              \
        for (int64_t j0 = 0; j0 < g->k[0]; j0++)                                                                       \
            for (int64_t j1 = 0; j1 < g->k[1]; j1++)                                                                   \
                for (int64_t j2 = 0; j2 < g->k[2]; j2++) {                                                             \
                    T *crow = (COL) + (((ci * g->k[0] + j0) * g->k[1] + j1) * g->k[2] + j2) * ld_;                     \
                    int64_t a2, b2;                                                                                    \
                    last_axis_range(g, j2, &a2, &b2);                                                                  \
                    const int64_t off2 = j2 * g->d[2] - g->pb[2], s2 = g->s[2];                                        \
                    int64_t p0 = r0 / g->pos[1], p1 = r0 % g->pos[1]; /* position row r, counted along */              \
                    for (int64_t r = r0; r < r1; r++, p1 = p1 + 1 < g->pos[1] ? p1 + 1 : (p0++, 0)) {                  \
                        const int64_t i0 = p0 * g->s[0] - g->pb[0] + j0 * g->d[0];                                     \
                        const int64_t i1 = p1 * g->s[1] - g->pb[1] + j1 * g->d[1];                                     \
                        const int in = i0 >= 0 && i0 < g->img[0] && i1 >= 0 && i1 < g->img[1];                         \
                        const int64_t io = ((ci * g->img[0] + i0) * g->img[1] + i1) * g->img[2] + off2;                \
                        T *cq = crow + (r - r0) * g->pos[2];                                                           \
                        BODY                                                                                           \
                    }                                                                                                  \
                }

#define COLS_ND_FNS(SUF, T)                                                                                            \
    PARDO_WINDOW2D_LOOPS void pardo_im2col_nd_##SUF(const pardo_cols_nd *g, const T *img, int64_t r0, int64_t r1,      \
                                                    T *col) {                                                          \
        const int64_t n2 = g->pos[2];                                                                                  \
        COLS_ND_WALK(T, col, {                                                                                         \
            if (!in) {                                                                                                 \
                for (int64_t p = 0; p < n2; p++) cq[p] = (T)0;                                                         \
                continue;                                                                                              \
            }                                                                                                          \
            const T *ir = img + io;                                                                                    \
            for (int64_t p = 0; p < a2; p++) cq[p] = (T)0;                                                             \
            if (s2 == 1)                                                                                               \
                for (int64_t p = a2; p < b2; p++) cq[p] = ir[p];                                                       \
            else                                                                                                       \
                for (int64_t p = a2; p < b2; p++) cq[p] = ir[p * s2];                                                  \
            for (int64_t p = b2; p < n2; p++) cq[p] = (T)0;                                                            \
        })                                                                                                             \
    }                                                                                                                  \
    PARDO_WINDOW2D_LOOPS void pardo_col2im_nd_##SUF(const pardo_cols_nd *g, const T *col, int64_t r0, int64_t r1,      \
                                                    T *img) {                                                          \
        COLS_ND_WALK(const T, col, {                                                                                   \
            if (!in) continue;                                                                                         \
            T *ir = img + io;                                                                                          \
            if (s2 == 1)                                                                                               \
                for (int64_t p = a2; p < b2; p++) ir[p] += cq[p];                                                      \
            else                                                                                                       \
                for (int64_t p = a2; p < b2; p++) ir[p * s2] += cq[p];                                                 \
        })                                                                                                             \
    }

COLS_ND_FNS(f32, float)
COLS_ND_FNS(f64, double)
