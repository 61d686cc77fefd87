/* gemm_pack.c - op(B) of the own product packed into panels nr columns
 * wide, zero beyond n, K in blocks (gemm_internal.h's gemm_job says which
 * blocks and panels a pass packs, and where): B stored [k, n] is copied a
 * row of a panel at a time (64-byte moves with AVX-512), B stored
 * transposed ([n, k]) is transposed (16 x 16 float blocks in AVX-512
 * registers, the rest element by element); and the per-thread buffers the
 * packed panels (and a swapped product's result) live in, grown to the
 * largest product seen and freed when the thread ends. */
#include "gemm_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if GEMM_X86
#include <immintrin.h>
#endif

/* ---- per-thread buffers, grown, freed when the thread ends ---- */

static pthread_key_t buf_keys[N_BUFS];
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static bool buf_keys_ok;
static _Thread_local void *bufs[N_BUFS];    // 64-byte aligned
static _Thread_local size_t buf_caps[N_BUFS]; // bytes

static void buf_free(void *p) { free(p); }
static void buf_keys_make(void) {
    buf_keys_ok = true;
    for (int i = 0; i < N_BUFS; i++) buf_keys_ok &= pthread_key_create(&buf_keys[i], buf_free) == 0;
}

void *pardo_gemm_buf_get(int which, size_t n) {
    if (n <= buf_caps[which]) return bufs[which];
    pthread_once(&buf_once, buf_keys_make);
    size_t cap = (n + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, cap);
    if (!p) return NULL;
    free(bufs[which]);
    bufs[which] = p;
    buf_caps[which] = cap;
    if (buf_keys_ok) pthread_setspecific(buf_keys[which], p); /* freed at thread exit */
    return p;
}

/* ---- packing ---- */

/* Packing op(B) when B is stored transposed ([n, k]) is a transpose: with
 * AVX-512, 16 x 16 float blocks in registers. transpose_T sets d[p * ldd +
 * i] = s[i * lds + p] for i < rows (a multiple of 16) and p < return (a
 * multiple of 16, at most kcb); the caller does the rest. 0 where there is
 * no SIMD transpose (float64, AVX2, plain C). (Packing A stored [m, k] the
 * same way measured no faster than reading it in place: it is read in place.) */
#if GEMM_X86
AVX512 void pardo_gemm_tr16_f32(const float *s, int64_t lds, float *d, int64_t ldd) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + i * lds);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
        for (int h = 0; h < 2; h++) {
            __m512d x = _mm512_castps_pd(t[i + h]), y = _mm512_castps_pd(t[i + h + 2]);
            r[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
            r[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
        }
    for (int i = 0; i < 16; i += 8)
        for (int h = 0; h < 4; h++) {
            t[i + h] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], 0x88);
            t[i + h + 4] = _mm512_shuffle_f32x4(r[i + h], r[i + h + 4], 0xdd);
        }
    for (int h = 0; h < 8; h++) {
        r[h] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0x88);
        r[h + 8] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0xdd);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(d + i * ldd, r[i]);
}

static int64_t transpose_f32(const float *s, int64_t lds, int64_t rows, int64_t kcb, float *d, int64_t ldd) {
    if (rows % 16 || !own_is_avx512()) return 0;
    int64_t p = 0;
    for (; p + 16 <= kcb; p += 16)
        for (int64_t q = 0; q < rows; q += 16) pardo_gemm_tr16_f32(s + q * lds + p, lds, d + p * ldd + q, ldd);
    return p;
}
#else
static int64_t transpose_f32(const float *s, int64_t lds, int64_t rows, int64_t kcb, float *d, int64_t ldd) {
    (void)s, (void)lds, (void)rows, (void)kcb, (void)d, (void)ldd;
    return 0;
}
#endif
/* Packing a full panel of B stored [k, n] is a copy of kcb rows of nr
 * elements (s stride lds, d stride nr); with AVX-512 an inline loop of
 * 64-byte moves beats a memcpy call per row. False where the caller copies. */
#if GEMM_X86
AVX512 static void copy_rows_avx512(const float *s, int64_t lds, int64_t kcb, int64_t nr, float *d) {
    for (int64_t p = 0; p < kcb; p++)
        for (int64_t q = 0; q < nr; q += 16) _mm512_storeu_ps(d + p * nr + q, _mm512_loadu_ps(s + p * lds + q));
}

static bool copy_rows_f32(const float *s, int64_t lds, int64_t kcb, int64_t nr, float *d) {
    if (nr % 16 || !own_is_avx512()) return false;
    copy_rows_avx512(s, lds, kcb, nr, d);
    return true;
}
#else
static bool copy_rows_f32(const float *s, int64_t lds, int64_t kcb, int64_t nr, float *d) {
    (void)s, (void)lds, (void)kcb, (void)nr, (void)d;
    return false;
}
#endif
static bool copy_rows_f64(const double *s, int64_t lds, int64_t kcb, int64_t nr, double *d) {
    (void)s, (void)lds, (void)kcb, (void)nr, (void)d;
    return false;
}

static int64_t transpose_f64(const double *s, int64_t lds, int64_t rows, int64_t kcb, double *d, int64_t ldd) {
    (void)s, (void)lds, (void)rows, (void)kcb, (void)d, (void)ldd;
    return 0;
}

/* Defines pack_panel_SFX, the packing for element type T. */
#define PACK_PANEL(SFX, T)                                                                                            \
    /* Packs panel jp of op(B) for every K block. */                                                                   \
    static void pack_panel_##SFX(const gemm_job *j, int64_t jp) {                                                      \
        const pardo_gemm *g = j->g;                                                                                    \
        const T *b = g->b;                                                                                             \
        const int64_t nr = j->arch->nr, j0 = jp * nr, w = g->n - j0 < nr ? g->n - j0 : nr;                             \
        for (int64_t kb = j->kb0; kb < j->kb1; kb++) {                                                                 \
            const int64_t p0 = kb * j->kc, kcb = g->k - p0 < j->kc ? g->k - p0 : j->kc;                                \
            T *d = (T *)j->bpack + (p0 * j->np * nr - j->boff) + jp * kcb * nr;                                        \
            if (!g->tb) {                                                                                              \
                if (w == nr && copy_rows_##SFX(b + p0 * g->ldb + j0, g->ldb, kcb, nr, d)) continue;                    \
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
