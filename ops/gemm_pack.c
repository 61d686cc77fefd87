/* gemm_pack.c - op(B) of the own product packed into panels nr columns
 * wide, zero beyond n, K in blocks (gemm_internal.h's gemm_job says which
 * blocks and panels a pass packs, and where): B stored [k, n] is copied a
 * row of a panel at a time (64-byte moves with AVX-512), B stored
 * transposed ([n, k]) is transposed (16 x 16 float blocks in AVX-512
 * registers, the rest element by element); and the per-thread buffers the
 * packed panels (and a swapped product's result) live in, grown to the
 * largest product seen and freed when the thread ends. */
#include "gemm_internal.h"
#include "scratch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if GEMM_X86
#include <immintrin.h>
#endif

/* ---- per-thread buffers, grown, freed when the thread ends (ops/scratch.h) ---- */

_Static_assert(PARDO_SCRATCH_SLOTS - PARDO_SCRATCH_GEMM == N_BUFS, "scratch.h keeps a slot for each GEMM buffer");

void *pardo_gemm_buf_get(int which, size_t n) { return pardo_scratch_get(PARDO_SCRATCH_GEMM + which, n); }

/* ---- packing ---- */

/* Packing op(B) when B is stored transposed ([n, k]) is a transpose: with
 * AVX-512, 16 x 16 float blocks in registers. transpose_T sets d[p * ldd +
 * i] = s[i * lds + p] for i < rows (a multiple of 16) and p < return (a
 * multiple of 16, at most kcb); the caller does the rest. 0 where there is
 * no SIMD transpose (float64, AVX2, plain C). (Packing A stored [m, k] the
 * same way measured no faster than reading it in place: it is read in place.) */
#if GEMM_X86
AVX512 void pardo_gemm_tr16_f32(const float *s, int64_t lds, float *d, int64_t ldd) {
    /* every loop unrolled, so the 32 vectors stay in registers (as plain loops at -O2 they went through the
     * stack: measured 15% of a 256x512x512 product with B transposed, 8% unrolled) */
    __m512 r[16], t[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + i * lds);
    _Pragma("GCC unroll 8") for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < 16; i += 4) _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m512d x = _mm512_castps_pd(t[i + h]), y = _mm512_castps_pd(t[i + h + 2]);
        r[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
        r[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < 16; i += 8) _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
        t[i + h] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], 0x88);
        t[i + h + 4] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], 0xdd);
    }
    _Pragma("GCC unroll 8") for (int h = 0; h < 8; h++) {
        r[h] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0x88);
        r[h + 8] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0xdd);
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) _mm512_storeu_ps(d + i * ldd, r[i]);
}

/* r[i] = column i of the 8 x 8 block whose rows r[0..8) held. */
AVX2 __attribute__((always_inline)) static inline void tr8_regs(__m256 *r) {
    /* rows i, i+1: [i0 i'0 i1 i'1 | i4 i'4 i5 i'5] and [i2 i'2 i3 i'3 | i6 i'6 i7 i'7] */
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    /* uC: column C of rows 0..3 in the low half, column C + 4 in the high; vC: the same of rows 4..7 */
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 v0 = _mm256_shuffle_ps(t4, t6, 0x44), v1 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 v2 = _mm256_shuffle_ps(t5, t7, 0x44), v3 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, v0, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, v1, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, v2, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, v3, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, v0, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, v1, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, v2, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, v3, 0x31);
}

AVX2 void pardo_gemm_tr8_f32(const float *s, int64_t lds, float *d, int64_t ldd) {
    __m256 r[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s + i * lds);
    tr8_regs(r);
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) _mm256_storeu_ps(d + i * ldd, r[i]);
}

/* Each column's 8 lanes are stored whole, mr apart, in order: the lanes past mr land on the next column's slot
 * and are overwritten by its store (a masked store costs a dozen cycles on AMD's cores); the last 8 columns,
 * whose lanes would land past the panel, go through a buffer, and the last kcb % 8 element by element. */
AVX2 static bool pack_a_avx2(const float *a, int64_t lda, int64_t rows, int64_t mr, int64_t kcb, float *d) {
    const float zero[8] __attribute__((aligned(32))) = {0};
    const float *row[8];
    for (int64_t i = 0; i < 8; i++) row[i] = i < rows ? a + i * lda : zero;
    const int64_t inc[8] = {rows > 0 ? 8 : 0, rows > 1 ? 8 : 0, rows > 2 ? 8 : 0, rows > 3 ? 8 : 0,
                            rows > 4 ? 8 : 0, rows > 5 ? 8 : 0, rows > 6 ? 8 : 0, rows > 7 ? 8 : 0};
    int64_t p = 0;
    for (; p + 8 <= kcb; p += 8) {
        __m256 r[8];
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
            r[i] = _mm256_loadu_ps(row[i]);
            row[i] += inc[i];
        }
        tr8_regs(r);
        if (p + 8 < kcb) {
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) _mm256_storeu_ps(d + (p + c) * mr, r[c]);
        } else {
            float t[64] __attribute__((aligned(32)));
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) _mm256_store_ps(t + 8 * c, r[c]);
            for (int64_t c = 0; c < 8; c++)
                for (int64_t i = 0; i < mr; i++) d[(p + c) * mr + i] = t[8 * c + i];
        }
    }
    for (; p < kcb; p++)
        for (int64_t i = 0; i < mr; i++) d[p * mr + i] = i < rows ? a[i * lda + p] : 0.0f;
    return true;
}

bool pardo_gemm_pack_a_f32(const float *a, int64_t lda, int64_t rows, int64_t mr, int64_t kcb, float *d) {
    if (mr > 8 || !own_has_avx2()) return false;
    return pack_a_avx2(a, lda, rows, mr, kcb, d);
}

AVX2 static void pack_at_avx2(const float *at, int64_t lda, int64_t pn, int64_t mr, float *d, bool last) {
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)mr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const int64_t whole = last && mr < 8 ? pn - 1 : pn;
    for (int64_t p = 0; p < whole; p++) _mm256_storeu_ps(d + p * mr, _mm256_maskload_ps(at + p * lda, keep));
    if (whole < pn) _mm256_maskstore_ps(d + whole * mr, keep, _mm256_maskload_ps(at + whole * lda, keep));
}

bool pardo_gemm_pack_at_f32(const float *at, int64_t lda, int64_t pn, int64_t mr, float *d, bool last) {
    if (mr > 8 || !own_has_avx2()) return false;
    pack_at_avx2(at, lda, pn, mr, d, last);
    return true;
}

static int64_t transpose_f32(const float *s, int64_t lds, int64_t rows, int64_t kcb, float *d, int64_t ldd) {
    int64_t p = 0;
    if (rows % 16 == 0 && own_is_avx512()) {
        for (; p + 16 <= kcb; p += 16)
            for (int64_t q = 0; q < rows; q += 16) pardo_gemm_tr16_f32(s + q * lds + p, lds, d + p * ldd + q, ldd);
    } else if (rows % 8 == 0 && own_has_avx2()) {
        for (; p + 8 <= kcb; p += 8)
            for (int64_t q = 0; q < rows; q += 8) pardo_gemm_tr8_f32(s + q * lds + p, lds, d + p * ldd + q, ldd);
    }
    return p;
}
#else
bool pardo_gemm_pack_at_f32(const float *at, int64_t lda, int64_t pn, int64_t mr, float *d, bool last) {
    (void)at, (void)lda, (void)pn, (void)mr, (void)d, (void)last;
    return false;
}

static int64_t transpose_f32(const float *s, int64_t lds, int64_t rows, int64_t kcb, float *d, int64_t ldd) {
    (void)s, (void)lds, (void)rows, (void)kcb, (void)d, (void)ldd;
    return 0;
}

bool pardo_gemm_pack_a_f32(const float *a, int64_t lda, int64_t rows, int64_t mr, int64_t kcb, float *d) {
    (void)a, (void)lda, (void)rows, (void)mr, (void)kcb, (void)d;
    return false;
}
#endif
/* Packing full panels of B stored [k, n] is a copy of kcb rows of np panels
 * of nr elements (s stride lds; panel jp's row p to d + jp * dstep + p * nr),
 * a row at a time, so B is read along its rows (a panel at a time it is read
 * 64 bytes per row, rows apart, which the prefetchers follow badly); with
 * AVX-512 or AVX2 an inline loop of 64- or 32-byte moves beats a memcpy call
 * per row. False where the caller copies. */
#if GEMM_X86
AVX512 static void copy_rows_avx512(const float *s, int64_t lds, int64_t kcb, int64_t nr, int64_t np, float *d,
                                    int64_t dstep) {
    for (int64_t p = 0; p < kcb; p++)
        for (int64_t jp = 0; jp < np; jp++)
            for (int64_t q = 0; q < nr; q += 16)
                _mm512_storeu_ps(d + jp * dstep + p * nr + q, _mm512_loadu_ps(s + p * lds + jp * nr + q));
}

AVX2 static void copy_rows_avx2(const float *s, int64_t lds, int64_t kcb, int64_t nr, int64_t np, float *d,
                                int64_t dstep) {
    for (int64_t p = 0; p < kcb; p++)
        for (int64_t jp = 0; jp < np; jp++)
            for (int64_t q = 0; q < nr; q += 8)
                _mm256_storeu_ps(d + jp * dstep + p * nr + q, _mm256_loadu_ps(s + p * lds + jp * nr + q));
}

static bool copy_rows_f32(const float *s, int64_t lds, int64_t kcb, int64_t nr, int64_t np, float *d, int64_t dstep) {
    if (nr % 16 == 0 && own_is_avx512())
        copy_rows_avx512(s, lds, kcb, nr, np, d, dstep);
    else if (nr % 8 == 0 && own_has_avx2())
        copy_rows_avx2(s, lds, kcb, nr, np, d, dstep);
    else
        return false;
    return true;
}
#else
static bool copy_rows_f32(const float *s, int64_t lds, int64_t kcb, int64_t nr, int64_t np, float *d, int64_t dstep) {
    (void)s, (void)lds, (void)kcb, (void)nr, (void)np, (void)d, (void)dstep;
    return false;
}
#endif
static bool copy_rows_f64(const double *s, int64_t lds, int64_t kcb, int64_t nr, int64_t np, double *d,
                          int64_t dstep) {
    (void)s, (void)lds, (void)kcb, (void)nr, (void)np, (void)d, (void)dstep;
    return false;
}

static int64_t transpose_f64(const double *s, int64_t lds, int64_t rows, int64_t kcb, double *d, int64_t ldd) {
    (void)s, (void)lds, (void)rows, (void)kcb, (void)d, (void)ldd;
    return 0;
}

/* Defines pack_panel_SFX and pack_full_SFX, the packing for element type T. */
#define PACK_PANEL(SFX, T)                                                                                            \
    /* Packs the full panels [begin, end) of a B stored [k, n] for every K block, a row of B at a time (copy_rows); \
     * false where there is no such copy. */                                                                          \
    static bool pack_full_##SFX(const gemm_job *j, int64_t begin, int64_t end) {                                       \
        const pardo_gemm *g = j->g;                                                                                    \
        const int64_t nr = j->arch->nr;                                                                                \
        for (int64_t kb = j->kb0; kb < j->kb1; kb++) {                                                                 \
            const int64_t p0 = kb * j->kc, kcb = g->k - p0 < j->kc ? g->k - p0 : j->kc;                                \
            T *d = (T *)j->bpack + (p0 * j->np * nr - j->boff) + begin * kcb * nr;                                     \
            if (!copy_rows_##SFX((const T *)g->b + p0 * g->ldb + begin * nr, g->ldb, kcb, nr, end - begin, d,          \
                                 kcb * nr))                                                                            \
                return false;                                                                                          \
        }                                                                                                              \
        return true;                                                                                                   \
    }                                                                                                                  \
                                                                                                                       \
    /* Packs panel jp of op(B) for every K block. */                                                                   \
    static void pack_panel_##SFX(const gemm_job *j, int64_t jp) {                                                      \
        const pardo_gemm *g = j->g;                                                                                    \
        const T *b = g->b;                                                                                             \
        const int64_t nr = j->arch->nr, j0 = jp * nr, w = g->n - j0 < nr ? g->n - j0 : nr;                             \
        for (int64_t kb = j->kb0; kb < j->kb1; kb++) {                                                                 \
            const int64_t p0 = kb * j->kc, kcb = g->k - p0 < j->kc ? g->k - p0 : j->kc;                                \
            T *d = (T *)j->bpack + (p0 * j->np * nr - j->boff) + jp * kcb * nr;                                        \
            if (!g->tb) {                                                                                              \
                if (w == nr && copy_rows_##SFX(b + p0 * g->ldb + j0, g->ldb, kcb, nr, 1, d, 0)) continue;              \
                for (int64_t p = 0; p < kcb; p++) {                                                                    \
                    memcpy(d + p * nr, b + (p0 + p) * g->ldb + j0, (size_t)w * sizeof(T));                             \
                    memset(d + p * nr + w, 0, (size_t)(nr - w) * sizeof(T));                                           \
                }                                                                                                      \
                continue;                                                                                              \
            }                                                                                                          \
            int64_t pdone = 0; /* rows of the panel a SIMD transpose filled */                                         \
            if (w == nr) pdone = transpose_##SFX(b + j0 * g->ldb + p0, g->ldb, nr, kcb, d, nr);                        \
            for (int64_t p = pdone; p < kcb; p += 8) {                                                                 \
                const int64_t pe = p + 8 < kcb ? p + 8 : kcb;                                                          \
                for (int64_t q = 0; q < w; q++) {                                                                      \
                    const T *s = b + (j0 + q) * g->ldb + p0;                                                           \
                    for (int64_t pp = p; pp < pe; pp++) d[pp * nr + q] = s[pp];                                        \
                }                                                                                                      \
                for (int64_t pp = p; pp < pe; pp++)                                                                    \
                    for (int64_t q = w; q < nr; q++) d[pp * nr + q] = 0;                                               \
            }                                                                                                          \
        }                                                                                                              \
    }

PACK_PANEL(f32, float)
PACK_PANEL(f64, double)

void pardo_gemm_pack_items(void *arg, int64_t begin, int64_t end) {
    const gemm_job *j = arg;
    if (!j->g->tb) { /* the full panels of B as stored a row at a time, then the last (narrower) one */
        const int64_t full = j->g->n / j->arch->nr, fe = end < full ? end : full;
        if (begin < fe && (j->g->dtype == PARDO_F32 ? pack_full_f32(j, begin, fe) : pack_full_f64(j, begin, fe)))
            begin = fe;
    }
    for (int64_t jp = begin; jp < end; jp++) {
        if (j->g->dtype == PARDO_F32)
            pack_panel_f32(j, jp);
        else
            pack_panel_f64(j, jp);
    }
}

void pardo_gemm_pack_block(gemm_job *j, int64_t kb, int64_t begin, int64_t end, void *buf) {
    const int64_t nr = j->arch->nr, p0 = kb * j->kc, kcb = j->g->k - p0 < j->kc ? j->g->k - p0 : j->kc;
    j->kb0 = kb;
    j->kb1 = kb + 1;
    j->bpack = buf;
    j->boff = p0 * j->np * nr + begin * kcb * nr; /* panel `begin` of block kb lands at buf */
    pardo_gemm_pack_items(j, begin, end);
}
