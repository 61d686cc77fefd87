/* gemm_narrow.c - float32 products of a few columns (a 10-class output
 * layer, Y = H W) as dot products along K: the tiles of gemm_kernels.c
 * fill the 16 lanes of a vector with 10 columns and broadcast an element of
 * A for every 10 multiply-adds, where here each lane runs along K, a row of A
 * against a row of op(B)^T, every lane useful; each element's 16 partial
 * sums are added in a fixed tree (the same for every row, so the bits do
 * not depend on the thread count or on which rows a thread was given).
 * AVX-512 (16 lanes) or AVX2 (8 lanes, a tree of 8): gemm.c calls it where
 * its own kernels are one of those, with the kernels' instruction set. */
#include <stdint.h>
#include <string.h>

#include "gemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define NARROW_MAX_COLS 12   // columns this path takes at most (measured: 16 run faster through the tiles)
#define NARROW_MAX_BT 16384  // floats of op(B)^T it packs on the stack at most (12 columns x K 1300)
#define NARROW_ROWS_ITEM 16  // rows per item handed to the pool
#define AVX512 __attribute__((target("avx512f")))

/* The sums of the 16 lanes of v[0..16), lane j of the result v[j]'s: a fixed tree of adds (pairs of lanes, then
 * of pairs, then of 128-bit quarters), the same for every element. */
AVX512 static inline __m512 sums16(const __m512 *v) {
    __m512 u[8], w[4], x[2];
    for (int k = 0; k < 8; k++) /* per quarter: [a0+a2, b0+b2, a1+a3, b1+b3] of v[2k], v[2k+1] */
        u[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
    for (int m = 0; m < 4; m++) { /* per quarter: the quarter's sum of v[4m + s] in slot s */
        const __m512d a = _mm512_castps_pd(u[2 * m]), b = _mm512_castps_pd(u[2 * m + 1]);
        w[m] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    for (int h = 0; h < 2; h++) /* quarters 0+1 and 2+3 of w[2h], then of w[2h+1] */
        x[h] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * h], w[2 * h + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * h], w[2 * h + 1], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xdd));
}

/* Defines dot_NC_R: rows [0, R) of C (NC columns) from R rows of A (lda
 * apart) against op(B)^T (NC rows of k, ldt apart): acc[r][j] sums 16
 * lanes of a(r, p) b(p, j) over p, the last chunk of K masked; then
 * reduced. */
#define DOT_KERNEL(NC, R)                                                                                              \
    AVX512 static void dot_##NC##_##R(const float *a, int64_t lda, const float *bt, int64_t ldt, int64_t k, float *c,  \
                                      int64_t ldc) {                                                                   \
        __m512 acc[R][NC];                                                                                             \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _Pragma("GCC unroll 16") for (int j = 0; j < NC; j++)     \
            acc[r][j] = _mm512_setzero_ps();                                                                           \
        int64_t p = 0;                                                                                                 \
        for (; p + 16 <= k; p += 16) { /* plain loads: a masked one costs an ALU slot besides */                       \
            __m512 av[R];                                                                                              \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) av[r] = _mm512_loadu_ps(a + r * lda + p);              \
            _Pragma("GCC unroll 16") for (int j = 0; j < NC; j++) {                                                    \
                const __m512 bv = _mm512_loadu_ps(bt + j * ldt + p);                                                   \
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(av[r], bv, acc[r][j]); \
            }                                                                                                          \
        }                                                                                                              \
        if (p < k) { /* the last chunk of K, masked */                                                                 \
            const __mmask16 mk = (__mmask16)((1u << (k - p)) - 1);                                                     \
            __m512 av[R];                                                                                              \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) av[r] = _mm512_maskz_loadu_ps(mk, a + r * lda + p);     \
            _Pragma("GCC unroll 16") for (int j = 0; j < NC; j++) {                                                    \
                const __m512 bv = _mm512_maskz_loadu_ps(mk, bt + j * ldt + p);                                         \
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(av[r], bv, acc[r][j]); \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                                          \
            __m512 v[16];                                                                                              \
            _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) v[j] = j < NC ? acc[r][j] : _mm512_setzero_ps();    \
            _mm512_mask_storeu_ps(c + r * ldc, (__mmask16)((1u << NC) - 1), sums16(v));                                \
        }                                                                                                              \
    }

/* R rows at a time as the 32 registers allow (R x NC accumulators, R rows of A, one row of op(B)^T), and 1 */
#define DOT_PAIR(NC, R) DOT_KERNEL(NC, R) DOT_KERNEL(NC, 1)
DOT_PAIR(1, 6)
DOT_PAIR(2, 6)
DOT_PAIR(3, 6)
DOT_PAIR(4, 5)
DOT_PAIR(5, 4)
DOT_PAIR(6, 3)
DOT_PAIR(7, 3)
DOT_PAIR(8, 3)
DOT_PAIR(9, 2)
DOT_PAIR(10, 2)
DOT_PAIR(11, 2)
DOT_PAIR(12, 2)

#define AVX2 __attribute__((target("avx2,fma")))

/* The sums of the 8 lanes of v[0..8), lane j of the result v[j]'s: a fixed tree (pairs of lanes, then pairs of
 * pairs, then the two 128-bit halves), the same for every element. */
AVX2 static inline __m256 sums8(const __m256 *v) {
    __m256 u[4], w[2];
    for (int q = 0; q < 4; q++) /* per half: [a0+a2, b0+b2, a1+a3, b1+b3] of v[2q], v[2q+1] */
        u[q] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * q], v[2 * q + 1]), _mm256_unpackhi_ps(v[2 * q], v[2 * q + 1]));
    for (int m = 0; m < 2; m++) { /* per half: the half's sum of v[4m + s] in slot s */
        const __m256d a = _mm256_castps_pd(u[2 * m]), b = _mm256_castps_pd(u[2 * m + 1]);
        w[m] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(w[0], w[1], 0x20), _mm256_permute2f128_ps(w[0], w[1], 0x31));
}

/* Defines dot8_NC_R, DOT_KERNEL's AVX2 twin: 8 lanes along K, the last chunk through masked loads (cheap on
 * loads), each element's 8 partial sums reduced by sums8 (two trees past 8 columns). */
#define DOT_KERNEL256(NC, R)                                                                                           \
    AVX2 static void dot8_##NC##_##R(const float *a, int64_t lda, const float *bt, int64_t ldt, int64_t k, float *c,   \
                                     int64_t ldc) {                                                                    \
        __m256 acc[R][NC];                                                                                             \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) _Pragma("GCC unroll 16") for (int j = 0; j < NC; j++)     \
            acc[r][j] = _mm256_setzero_ps();                                                                           \
        int64_t p = 0;                                                                                                 \
        for (; p + 8 <= k; p += 8) {                                                                                   \
            __m256 av[R];                                                                                              \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) av[r] = _mm256_loadu_ps(a + r * lda + p);              \
            _Pragma("GCC unroll 16") for (int j = 0; j < NC; j++) {                                                    \
                const __m256 bv = _mm256_loadu_ps(bt + j * ldt + p);                                                   \
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r][j] = _mm256_fmadd_ps(av[r], bv, acc[r][j]); \
            }                                                                                                          \
        }                                                                                                              \
        if (p < k) { /* the last chunk of K, masked */                                                                 \
            const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k - p)),                                     \
                                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));                          \
            __m256 av[R];                                                                                              \
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) av[r] = _mm256_maskload_ps(a + r * lda + p, mk);       \
            _Pragma("GCC unroll 16") for (int j = 0; j < NC; j++) {                                                    \
                const __m256 bv = _mm256_maskload_ps(bt + j * ldt + p, mk);                                            \
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r][j] = _mm256_fmadd_ps(av[r], bv, acc[r][j]); \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                                          \
            __m256 v[16];                                                                                              \
            _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) v[j] = j < NC ? acc[r][j] : _mm256_setzero_ps();    \
            float out[16];                                                                                             \
            _mm256_storeu_ps(out, sums8(v));                                                                           \
            if (NC > 8) _mm256_storeu_ps(out + 8, sums8(v + 8));                                                       \
            memcpy(c + r * ldc, out, NC * sizeof(float));                                                              \
        }                                                                                                              \
    }

/* R rows at a time as the 16 registers allow (R x NC accumulators, R rows of A, one row of op(B)^T), and 1 */
#define DOT_PAIR256(NC, R) DOT_KERNEL256(NC, R) DOT_KERNEL256(NC, 1)
DOT_PAIR256(1, 6)
DOT_PAIR256(2, 5)
DOT_PAIR256(3, 3)
DOT_PAIR256(4, 3)
DOT_PAIR256(5, 2)
DOT_PAIR256(6, 2)
DOT_KERNEL256(7, 1)
DOT_KERNEL256(8, 1)
DOT_KERNEL256(9, 1)
DOT_KERNEL256(10, 1)
DOT_KERNEL256(11, 1)
DOT_KERNEL256(12, 1)

typedef void (*dot_fn)(const float *a, int64_t lda, const float *bt, int64_t ldt, int64_t k, float *c, int64_t ldc);

/* Per column count: the kernel of many rows, how many, and the one-row kernel; AVX-512's, then AVX2's. */
typedef struct dot_kernels {
    dot_fn many;
    int rows;
    dot_fn one;
} dot_kernels;

static const dot_kernels dots[NARROW_MAX_COLS + 1] = {
    [1] = {dot_1_6, 6, dot_1_1},     [2] = {dot_2_6, 6, dot_2_1},     [3] = {dot_3_6, 6, dot_3_1},
    [4] = {dot_4_5, 5, dot_4_1},     [5] = {dot_5_4, 4, dot_5_1},     [6] = {dot_6_3, 3, dot_6_1},
    [7] = {dot_7_3, 3, dot_7_1},     [8] = {dot_8_3, 3, dot_8_1},     [9] = {dot_9_2, 2, dot_9_1},
    [10] = {dot_10_2, 2, dot_10_1},  [11] = {dot_11_2, 2, dot_11_1},  [12] = {dot_12_2, 2, dot_12_1},
};

static const dot_kernels dots8[NARROW_MAX_COLS + 1] = {
    [1] = {dot8_1_6, 6, dot8_1_1},    [2] = {dot8_2_5, 5, dot8_2_1},    [3] = {dot8_3_3, 3, dot8_3_1},
    [4] = {dot8_4_3, 3, dot8_4_1},    [5] = {dot8_5_2, 2, dot8_5_1},    [6] = {dot8_6_2, 2, dot8_6_1},
    [7] = {dot8_7_1, 1, dot8_7_1},    [8] = {dot8_8_1, 1, dot8_8_1},    [9] = {dot8_9_1, 1, dot8_9_1},
    [10] = {dot8_10_1, 1, dot8_10_1}, [11] = {dot8_11_1, 1, dot8_11_1}, [12] = {dot8_12_1, 1, dot8_12_1},
};

typedef struct narrow_job {
    const pardo_gemm *g;
    const dot_kernels *dots; // dots or dots8
    const float *bt; // op(B)^T: n rows of k, ldt apart
    int64_t ldt;
} narrow_job;

/* Items are blocks of NARROW_ROWS_ITEM rows of C: their dot products, then their epilogue. */
static void narrow_items(void *arg, int64_t begin, int64_t end) {
    const narrow_job *j = arg;
    const pardo_gemm *g = j->g;
    const int64_t n = g->n;
    const float *a = g->a;
    float *c = g->c;
    const dot_kernels *dk = &j->dots[n];
    const int step = dk->rows;
    for (int64_t b = begin; b < end; b++) {
        const int64_t r0 = b * NARROW_ROWS_ITEM, r1 = r0 + NARROW_ROWS_ITEM < g->m ? r0 + NARROW_ROWS_ITEM : g->m;
        int64_t r = r0;
        for (; r + step <= r1; r += step)
            dk->many(a + r * g->lda, g->lda, j->bt, j->ldt, g->k, c + r * g->ldc, g->ldc);
        for (; r < r1; r++) dk->one(a + r * g->lda, g->lda, j->bt, j->ldt, g->k, c + r * g->ldc, g->ldc);
        pardo_gemm_epilogue_rows(g, r0, r1);
    }
}

bool pardo_gemm_narrow(pardo_kernel_ctx *ctx, const pardo_gemm *g, bool avx512, int *rc) {
    /* op(B)^T packed, its rows a line more than a multiple of 16 apart: rows 2 KiB apart would share the few
     * L1 sets those addresses map to, and evict one another as the kernels stream them side by side */
    const int64_t ldt = (g->k + 15) / 16 * 16 + 16;
    /* never by the rows: a product's rows come out the same bits however many there are (a parallel_do part's
     * share of a batch, the whole batch) */
    if (g->dtype != PARDO_F32 || g->ta || g->accumulate || g->n > NARROW_MAX_COLS || g->n * ldt > NARROW_MAX_BT)
        return false;
    float bt[NARROW_MAX_BT] __attribute__((aligned(64)));
    const float *b = g->b;
    if (g->tb)
        for (int64_t q = 0; q < g->n; q++) memcpy(bt + q * ldt, b + q * g->ldb, (size_t)g->k * sizeof(float));
    else
        for (int64_t p = 0; p < g->k; p++)
            for (int64_t q = 0; q < g->n; q++) bt[q * ldt + p] = b[p * g->ldb + q];
    narrow_job j = {.g = g, .dots = avx512 ? dots : dots8, .bt = bt, .ldt = ldt};
    *rc = pardo_parallel_for(ctx, (g->m + NARROW_ROWS_ITEM - 1) / NARROW_ROWS_ITEM, narrow_items, &j);
    return true;
}
#else
bool pardo_gemm_narrow(pardo_kernel_ctx *ctx, const pardo_gemm *g, bool avx512, int *rc) {
    (void)ctx, (void)g, (void)avx512, (void)rc;
    return false;
}
#endif
