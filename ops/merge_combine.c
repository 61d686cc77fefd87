/* merge_combine.c - merge's elementwise modes (see merge_combine.h). Each
 * range is done a tile at a time: the tile's accumulators stay in L1 while
 * every part streams through it once. */
#include "merge_combine.h"

#include <stdbool.h>

#include "kernel_util.h"

enum { TILE = 512 };

/* acc[e] = first part, then acc[e] (op)= part, with v = x[e] * w: for a
 * plain mean or sum w is 1.0, which leaves every value as it is. */
#define COMBINE_LOOPS(ACC, X, LEN, W, MODE, FIRST)                                         \
    do {                                                                                   \
        if (FIRST) {                                                                       \
            for (int64_t e = 0; e < (LEN); e++) ACC[e] = X[e] * (W);                      \
        } else if ((MODE) == PARDO_MERGE_MAX) {                                            \
            for (int64_t e = 0; e < (LEN); e++) {                                          \
                __typeof__(ACC[0]) v = X[e] * (W);                                         \
                ACC[e] = v > ACC[e] ? v : ACC[e];                                          \
            }                                                                              \
        } else if ((MODE) == PARDO_MERGE_MIN) {                                            \
            for (int64_t e = 0; e < (LEN); e++) {                                          \
                __typeof__(ACC[0]) v = X[e] * (W);                                         \
                ACC[e] = v < ACC[e] ? v : ACC[e];                                          \
            }                                                                              \
        } else {                                                                           \
            for (int64_t e = 0; e < (LEN); e++) ACC[e] += X[e] * (W);                     \
        }                                                                                  \
    } while (0)

double pardo_merge_exact_inverse(int n) { return n > 0 && (n & (n - 1)) == 0 ? 1.0 / n : 0; }

/* Floats: accumulate in double; a plain mean divides by n at the end (multiplies by 1/n where that is exact). */
#define DEFINE_COMBINE_FLOAT(NAME, T)                                                      \
    PARDO_SIMD_CLONES static void NAME(const pardo_merge_args *m, int64_t begin, int64_t end) {             \
        T *restrict y = m->y;                                                              \
        const bool divide = m->mode == PARDO_MERGE_MEAN && !m->w;                          \
        const double inv = pardo_merge_exact_inverse(m->n);                                \
        double acc[TILE];                                                                  \
        for (int64_t t0 = begin; t0 < end; t0 += TILE) {                                   \
            int64_t len = end - t0 < TILE ? end - t0 : TILE;                               \
            bool first = true;                                                             \
            for (int p = 0; p < m->n; p++) {                                               \
                if (m->w && m->w[p] == 0) continue;                                        \
                const T *restrict x = (const T *)m->parts[p] + t0;                         \
                const double w = m->w ? m->w[p] : 1.0;                                     \
                COMBINE_LOOPS(acc, (double)x, len, w, m->mode, first);                     \
                first = false;                                                             \
            }                                                                              \
            if (divide && inv != 0)                                                        \
                for (int64_t e = 0; e < len; e++) y[t0 + e] = (T)(acc[e] * inv);           \
            else if (divide)                                                               \
                for (int64_t e = 0; e < len; e++) y[t0 + e] = (T)(acc[e] / m->n);          \
            else                                                                           \
                for (int64_t e = 0; e < len; e++) y[t0 + e] = (T)acc[e];                   \
        }                                                                                  \
    }

/* Integers and bool: sum, max and min in int64 (mean is float-only); bool
 * stores "any nonzero". */
#define DEFINE_COMBINE_INT(NAME, T, STORE)                                                 \
    PARDO_SIMD_CLONES static void NAME(const pardo_merge_args *m, int64_t begin, int64_t end) {             \
        T *restrict y = m->y;                                                              \
        int64_t acc[TILE];                                                                 \
        for (int64_t t0 = begin; t0 < end; t0 += TILE) {                                   \
            int64_t len = end - t0 < TILE ? end - t0 : TILE;                               \
            for (int p = 0; p < m->n; p++) {                                               \
                const T *restrict x = (const T *)m->parts[p] + t0;                         \
                COMBINE_LOOPS(acc, (int64_t)x, len, 1, m->mode, p == 0);                   \
            }                                                                              \
            for (int64_t e = 0; e < len; e++) y[t0 + e] = STORE(acc[e]);                   \
        }                                                                                  \
    }

#define STORE_I32(v) ((int32_t)(v))
#define STORE_I64(v) (v)
#define STORE_BOOL(v) ((uint8_t)((v) != 0))

DEFINE_COMBINE_FLOAT(combine_f32, float)
DEFINE_COMBINE_FLOAT(combine_f64, double)
DEFINE_COMBINE_INT(combine_i32, int32_t, STORE_I32)
DEFINE_COMBINE_INT(combine_i64, int64_t, STORE_I64)
DEFINE_COMBINE_INT(combine_bool, uint8_t, STORE_BOOL)

void pardo_merge_combine(const pardo_merge_args *m, int64_t begin, int64_t end) {
    switch (m->dtype) {
    case PARDO_F32: combine_f32(m, begin, end); break;
    case PARDO_F64: combine_f64(m, begin, end); break;
    case PARDO_I32: combine_i32(m, begin, end); break;
    case PARDO_I64: combine_i64(m, begin, end); break;
    default: combine_bool(m, begin, end); break;
    }
}
