/* gemm.c - the own matrix product (gemm.h), BLIS's way: op(B) is packed
 * into panels nr columns wide, K in blocks of at most KC_MAX rows; a
 * register-blocked micro-kernel computes an mr x nr tile of C from a panel
 * and mr rows of op(A) (broadcast one element at a time), summing each
 * block's terms in registers with fused multiply-adds and adding the
 * block's sum to C. A is read in place along its rows, a panel of B staying
 * in L1 over a block of rows; A read down its columns (transpose_a) is packed
 * a row panel at a time instead, which then stays in L1 over all panels. The micro-kernels are written once as a
 * macro and instantiated for AVX-512 (12x32 and 6x64 float, 12x16 double),
 * AVX2+FMA (6x16, 6x8) and plain C (4x8), each with its target attribute,
 * so the default build stays portable and the CPU picks one at run time.
 *
 * An element's terms are summed in the same order whatever rows a thread
 * is given (the K blocks depend on K alone, tiles start at multiples of mr,
 * a short last row panel overlaps the one above rather than being padded),
 * so the bits do not depend on the thread count. */
#include "gemm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMM_X86 1
#else
#define GEMM_X86 0
#endif

#define DIRECT_MAX_ROWS 48 // products of at most this many rows read B in place (gemm_own)
#define KC_MAX 256 // most rows of op(B) per packed block (gemm_arch.kc): an element's terms are summed in such blocks
#ifndef MC_ROWS
#define MC_ROWS 96 // rows of C a thread sweeps across all panels before the next rows (A's rows stay in L2)
#endif
#define MR_MAX 12              // largest kernel tile, rows
#define NR_MAX 64              // largest kernel tile, columns
#define PAR_MIN_MACS (1 << 19) // products smaller than this many multiply-adds run on one thread
#define PACK_STACK 32768       // bytes: a packed op(B) this small lives on the stack
#define NARROW_COLS 16         // products of fewer columns waste most of a tile's lanes (gemm_swapped)
#define COLS_MIN_K 128         // a product split by column panels sums at least this many terms (split_columns)

/* The epilogue of one tile, applied as the last K block's sums are stored (the same arithmetic as the add,
 * relu and relu_grad ops, so the bits match theirs): C += bias along the row, then relu, then relu_grad's mask
 * through y. Pointers at the tile's first column (y: its first element, rows ldc apart, like C's). */
typedef struct tile_ep {
    const void *bias; // or NULL
    bool relu;
    const void *y; // or NULL
} tile_ep;

/* An mr x (nv * lanes) tile: C[i][j] (+)= sum_p a(i, p) b(p, j) over p < kc,
 * a(i, p) = a[i * rsa + p * csa], b(p, j) = b[p * bs + j]; add: C += sum;
 * then the epilogue ep (NULL: none). */
typedef void (*ukernel_fn)(int64_t kc, const void *a, int64_t rsa, int64_t csa, const void *b, int64_t bs, void *c,
                           int64_t ldc, bool add, const tile_ep *ep);

/* Defines NAME, the micro-kernel for elements T held in vectors V of LANES:
 * MR rows by NV vectors of accumulators, loads and stores through the
 * macros given (unaligned C; the packed panels are 64-byte aligned); RELU
 * and YMASK (x where y > 0, else 0) for the epilogue. */
#define UKERNEL1(NAME, ATTR, T, V, LANES, MR, NV, ZERO, LOAD, LOADU, STOREU, SET1, FMA, ADD, RELU, YMASK, RSA, CSA)    \
    ATTR static void NAME(int64_t kc, const void *va, int64_t rsa, int64_t csa, const void *vb, int64_t bs, void *vc,  \
                          int64_t ldc, bool add, const tile_ep *ep) {                                                  \
        const T *restrict a = va, *restrict b = vb;                                                                    \
        T *restrict c = vc;                                                                                            \
        (void)rsa;                                                                                                     \
        (void)csa;                                                                                                     \
        V acc[MR][NV];                                                                                                 \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++)     \
            acc[i][v] = ZERO;                                                                                          \
        for (int64_t p = 0; p < kc; p++) {                                                                             \
            V bv[NV];                                                                                                  \
            _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) bv[v] = LOAD(b + p * bs + v * LANES);                 \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                    \
                const V av = SET1(a[i * (RSA) + p * (CSA)]);                                                           \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) acc[i][v] = FMA(av, bv[v], acc[i][v]);            \
            }                                                                                                          \
        }                                                                                                              \
        if (ep) {                                                                                                      \
            const T *bias = ep->bias, *y = ep->y;                                                                      \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                      \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) {                                                 \
                    T *cp = c + i * ldc + v * LANES;                                                                   \
                    V x = add ? ADD(LOADU(cp), acc[i][v]) : acc[i][v];                                                 \
                    if (bias) x = ADD(x, LOADU(bias + v * LANES));                                                     \
                    if (ep->relu) x = RELU(x);                                                                         \
                    if (y) x = YMASK(x, LOADU(y + i * ldc + v * LANES));                                               \
                    STOREU(cp, x);                                                                                     \
                }                                                                                                      \
        } else if (add) {                                                                                              \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                      \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) {                                                 \
                T *cp = c + i * ldc + v * LANES;                                                                       \
                STOREU(cp, ADD(LOADU(cp), acc[i][v]));                                                                 \
            }                                                                                                          \
        } else {                                                                                                       \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) \
                STOREU(c + i * ldc + v * LANES, acc[i][v]);                                                            \
        }                                                                                                              \
    }

/* Each kernel comes in two: A read along rows (a(i, p) = a[i * rsa + p],
 * csa 1: A as stored, not transposed) and down columns (a[i + p * csa],
 * rsa 1: A transposed, and the packed edge panel), so the compiler keeps
 * the addressing in few registers. */
#define UKERNEL(NAME, ...)                                                                                             \
    UKERNEL1(NAME##_r, __VA_ARGS__, rsa, 1)                                                                            \
    UKERNEL1(NAME##_c, __VA_ARGS__, 1, csa)

/* Plain C: scalars, the compiler vectorises what it can; no FMA (mul, add). */
#define S_ZERO 0
#define S_LOAD(p) (*(p))
#define S_STORE(p, x) (*(p) = (x))
#define S_SET1(x) (x)
#define S_FMA(x, y, z) ((z) + (x) * (y))
#define S_ADD(x, y) ((x) + (y))
#define S_RELU(x) ((x) < 0 ? 0 : (x))
#define S_YMASK(x, y) ((y) > 0 ? (x) : 0)
#define S_OPS S_ZERO, S_LOAD, S_LOAD, S_STORE, S_SET1, S_FMA, S_ADD, S_RELU, S_YMASK
UKERNEL(uk_c_f32, , float, float, 1, 4, 8, S_OPS)
UKERNEL(uk_c_f32_half, , float, float, 1, 4, 4, S_OPS)
UKERNEL(uk_c_f64, , double, double, 1, 4, 8, S_OPS)
UKERNEL(uk_c_f64_half, , double, double, 1, 4, 4, S_OPS)

#if GEMM_X86
#define AVX512 __attribute__((target("avx512f")))
/* relu as max(0, x): x where 0 > x is false, so NaN and -0 are kept as the relu op keeps them; the mask: x where
 * y > 0 (ordered: not for NaN), else +0 */
#define RELU512_PS(x) _mm512_max_ps(_mm512_setzero_ps(), x)
#define RELU512_PD(x) _mm512_max_pd(_mm512_setzero_pd(), x)
#define YMASK512_PS(x, y) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_GT_OQ), x)
#define YMASK512_PD(x, y) _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(y, _mm512_setzero_pd(), _CMP_GT_OQ), x)
/* uk512_f32_MRxNV: MR rows by NV vectors of 16 floats (uk512_f64_: of 8 doubles) */
#define UK512_F32(MR, NV)                                                                                              \
    UKERNEL(uk512_f32_##MR##x##NV, AVX512, float, __m512, 16, MR, NV, _mm512_setzero_ps(), _mm512_load_ps,             \
            _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, RELU512_PS, YMASK512_PS)
#define UK512_F64(MR, NV)                                                                                              \
    UKERNEL(uk512_f64_##MR##x##NV, AVX512, double, __m512d, 8, MR, NV, _mm512_setzero_pd(), _mm512_load_pd,            \
            _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd, RELU512_PD, YMASK512_PD)
/* 12 x 32 (its half 12 x 16); 6 x 64 (half 6 x 32, quarter 6 x 16): fewer rows of A to stream (6 broadcasts and
 * 4 loads per 24 multiply-adds), for A read along its rows; and the short kernels of 4, 2 and 1 rows (6 below 12)
 * that a last row panel of fewer than mr rows is made of */
UK512_F32(12, 2)
UK512_F32(12, 1)
UK512_F32(6, 4)
UK512_F32(6, 2)
UK512_F32(6, 1)
UK512_F32(4, 4)
UK512_F32(4, 2)
UK512_F32(4, 1)
UK512_F32(2, 4)
UK512_F32(2, 2)
UK512_F32(2, 1)
UK512_F32(1, 4)
UK512_F32(1, 2)
UK512_F32(1, 1)
UK512_F64(12, 2)
UK512_F64(12, 1)
UK512_F64(6, 2)
UK512_F64(6, 1)
UK512_F64(4, 2)
UK512_F64(4, 1)
UK512_F64(2, 2)
UK512_F64(2, 1)
UK512_F64(1, 2)
UK512_F64(1, 1)

#define AVX2 __attribute__((target("avx2,fma")))
#define RELU256_PS(x) _mm256_max_ps(_mm256_setzero_ps(), x)
#define RELU256_PD(x) _mm256_max_pd(_mm256_setzero_pd(), x)
#define YMASK256_PS(x, y) _mm256_and_ps(x, _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_GT_OQ))
#define YMASK256_PD(x, y) _mm256_and_pd(x, _mm256_cmp_pd(y, _mm256_setzero_pd(), _CMP_GT_OQ))
#define AVX2_PS                                                                                                        \
    _mm256_setzero_ps(), _mm256_load_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps,          \
        _mm256_add_ps, RELU256_PS, YMASK256_PS
#define AVX2_PD                                                                                                        \
    _mm256_setzero_pd(), _mm256_load_pd, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd,          \
        _mm256_add_pd, RELU256_PD, YMASK256_PD
UKERNEL(uk_avx2_f32, AVX2, float, __m256, 8, 6, 2, AVX2_PS)
UKERNEL(uk_avx2_f32_half, AVX2, float, __m256, 8, 6, 1, AVX2_PS)
UKERNEL(uk_avx2_f64, AVX2, double, __m256d, 4, 6, 2, AVX2_PD)
UKERNEL(uk_avx2_f64_half, AVX2, double, __m256d, 4, 6, 1, AVX2_PD)
#endif

/* A kernel's width: its columns are nr >> width. */
enum { WIDTH_FULL, WIDTH_HALF, WIDTH_QUARTER };

/* One instruction set's kernels for one dtype. */
typedef struct gemm_arch {
    const char *name;          // for pardo_gemm_describe
    int mr, nr; // tile of the full kernel
    int kc;     // most rows of op(B) per K block (a panel of kc x nr stays in L1)
    /* [width][rows]: the kernels reading the first nr >> width columns of a panel (width WIDTH_FULL, _HALF or
     * _QUARTER; no quarter kernels, NULL: the half ones serve) for mr rows, and for fewer (1, 2, 4 and 6 rows, see
     * short_rows) that a last row panel of fewer than mr rows is cut into; without those (tile_r[0][1] NULL) it
     * overlaps the panel above */
    ukernel_fn tile_r[3][MR_MAX + 1]; // A along rows (csa 1)
    ukernel_fn tile_c[3][MR_MAX + 1]; // A down columns (rsa 1)
    bool simd;                        // an instruction-set kernel (not plain C)
} gemm_arch;

/* the mr-row kernels of full and half width, PFX##SFX and PFX##_half##SFX (no short ones) */
#define FULL_HALF(MR, PFX, SFX) {{[MR] = PFX##SFX}, {[MR] = PFX##_half##SFX}}
static const gemm_arch arch_c[2] = {
    {"own plain C 4x8", 4, 8, 256, FULL_HALF(4, uk_c_f32, _r), FULL_HALF(4, uk_c_f32, _c), .simd = false},
    {"own plain C 4x8", 4, 8, 256, FULL_HALF(4, uk_c_f64, _r), FULL_HALF(4, uk_c_f64, _c), .simd = false},
};
#if GEMM_X86
/* the kernels of one width (NV vectors): [rows] for 1, 2, 4 and 6 rows (12: and 12), A along rows (V _r) or down
 * columns (_c) */
#define ROWS6(PFX, NV, V) {[1] = PFX##_1x##NV##V, [2] = PFX##_2x##NV##V, [4] = PFX##_4x##NV##V, [6] = PFX##_6x##NV##V}
#define ROWS12(PFX, NV, V)                                                                                             \
    {[1] = PFX##_1x##NV##V, [2] = PFX##_2x##NV##V, [4] = PFX##_4x##NV##V, [6] = PFX##_6x##NV##V,                      \
     [12] = PFX##_12x##NV##V}
static const gemm_arch arch_avx512[2] = {
    {"own avx512f 12x32 (6x64 for A along rows and N >= 64)", 12, 32, 256,
     {ROWS12(uk512_f32, 2, _r), ROWS12(uk512_f32, 1, _r)}, {ROWS12(uk512_f32, 2, _c), ROWS12(uk512_f32, 1, _c)},
     .simd = true},
    {"own avx512f 12x16", 12, 16, 256, {ROWS12(uk512_f64, 2, _r), ROWS12(uk512_f64, 1, _r)},
     {ROWS12(uk512_f64, 2, _c), ROWS12(uk512_f64, 1, _c)}, .simd = true},
};
static const gemm_arch arch_avx512_wide = {
    "own avx512f 6x64", 6, 64, 128, {ROWS6(uk512_f32, 4, _r), ROWS6(uk512_f32, 2, _r), ROWS6(uk512_f32, 1, _r)},
    {ROWS6(uk512_f32, 4, _c), ROWS6(uk512_f32, 2, _c), ROWS6(uk512_f32, 1, _c)}, .simd = true};
static const gemm_arch arch_avx2[2] = {
    {"own avx2+fma 6x16", 6, 16, 256, FULL_HALF(6, uk_avx2_f32, _r), FULL_HALF(6, uk_avx2_f32, _c), .simd = true},
    {"own avx2+fma 6x8", 6, 8, 256, FULL_HALF(6, uk_avx2_f64, _r), FULL_HALF(6, uk_avx2_f64, _c), .simd = true},
};
#endif

/* The rows of the first short kernel a last row panel of h < mr rows is cut into: the most of 6, 4, 2 and 1
 * that fit (each short kernel sums an element's terms as the full one does, so the bits are the same); 0 where
 * the arch has none. */
static int64_t short_rows(const gemm_arch *ar, int64_t h) {
    if (!ar->tile_r[WIDTH_FULL][1]) return 0;
    static const int64_t sizes[] = {6, 4, 2, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] <= h && sizes[i] < ar->mr) return sizes[i];
    return 0;
}

/* The narrowest kernel width of ar that covers a column panel w wide (each sums an element's terms as the full
 * kernel does: the same bits). */
static int width_for(const gemm_arch *ar, int64_t w) {
    if (w <= ar->nr / 4 && ar->tile_r[WIDTH_QUARTER][ar->mr]) return WIDTH_QUARTER;
    return w <= ar->nr / 2 ? WIDTH_HALF : WIDTH_FULL;
}

/* The kernel for a tile of `rows` rows (mr or a short one) of the given width, A down its columns or along rows. */
static ukernel_fn kernel_for(const gemm_arch *ar, int64_t rows, int width, bool down) {
    return down ? ar->tile_c[width][rows] : ar->tile_r[width][rows];
}

typedef enum { PICK_DEFAULT, PICK_OWN, PICK_BLAS } gemm_pick;

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static const gemm_arch *own_arch = arch_c; // [0] float32, [1] float64
static gemm_pick env_pick = PICK_DEFAULT;  // $PARDO_GEMM

/* The best own kernels this CPU runs. */
static const gemm_arch *best_arch(void) {
#if GEMM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return arch_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return arch_avx2;
#endif
    return arch_c;
}

static void setup(void) {
    own_arch = best_arch();
    const char *e = getenv("PARDO_GEMM");
    if (e && strcmp(e, "own") == 0)
        env_pick = PICK_OWN;
    else if (e && strcmp(e, "blas") == 0 && pardo_gemm_blas_compiled())
        env_pick = PICK_BLAS;
}

int pardo_gemm_force_isa(const char *isa, pardo_status *st) {
    pthread_once(&setup_once, setup);
    const gemm_arch *best = best_arch(), *want = NULL;
    if (strcmp(isa, "auto") == 0)
        want = best;
    else if (strcmp(isa, "c") == 0)
        want = arch_c;
#if GEMM_X86
    else if (strcmp(isa, "avx512f") == 0 && best == arch_avx512)
        want = arch_avx512;
    else if (strcmp(isa, "avx2") == 0 && (best == arch_avx512 || best == arch_avx2))
        want = arch_avx2;
#endif
    if (!want) return pardo_errorf(st, PARDO_ENOTSUP, "gemm: no '%s' kernel on this CPU (auto, avx512f, avx2, c)", isa);
    own_arch = want;
    return PARDO_OK;
}

/* True when the own kernels are AVX-512's (gemm_narrow.c's may run too). */
static bool own_is_avx512(void) {
#if GEMM_X86
    return own_arch == arch_avx512;
#else
    return false;
#endif
}

static bool use_blas(pardo_gemm_impl impl) {
    pthread_once(&setup_once, setup);
    if (impl == PARDO_GEMM_BLAS) return true;
    if (impl == PARDO_GEMM_OWN) return false;
    if (env_pick != PICK_DEFAULT) return env_pick == PICK_BLAS;
    return !own_arch[0].simd && pardo_gemm_blas_compiled();
}

const char *pardo_gemm_describe(pardo_dtype dtype, pardo_gemm_impl impl) {
    if (use_blas(impl)) return pardo_gemm_blas_name();
    return own_arch[dtype == PARDO_F64].name;
}

/* ---- per-thread buffers (op(B) packed; a swapped product's result), grown, freed when the thread ends ---- */

enum { BUF_PACK, BUF_SWAP, BUF_COLS, N_BUFS }; /* BUF_COLS: col_items only, which never waits */
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

/* This thread's buffer `which` of at least n bytes, or NULL when out of memory. */
static void *buf_get(int which, size_t n) {
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

/* ---- the blocked product ---- */

/* Packing op(B) when B is stored transposed ([n, k]) is a transpose: with
 * AVX-512, 16 x 16 float blocks in registers. transpose_T sets d[p * ldd +
 * i] = s[i * lds + p] for i < rows (a multiple of 16) and p < return (a
 * multiple of 16, at most kcb); the caller does the rest. 0 where there is
 * no SIMD transpose (float64, AVX2, plain C). (Packing A stored [m, k] the
 * same way measured no faster than reading it in place: it is read in place.) */
#if GEMM_X86
/* d[p * ldd + i] = s[i * lds + p] for p, i < 16. */
AVX512 static void tr16_f32(const float *s, int64_t lds, float *d, int64_t ldd) {
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
    if (rows % 16 || own_arch != arch_avx512) return 0;
    int64_t p = 0;
    for (; p + 16 <= kcb; p += 16)
        for (int64_t q = 0; q < rows; q += 16) tr16_f32(s + q * lds + p, lds, d + p * ldd + q, ldd);
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
    if (nr % 16 || own_arch != arch_avx512) return false;
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

/* A product in progress: the packed op(B) and how K is blocked. */
typedef struct gemm_job {
    const pardo_gemm *g;
    const gemm_arch *arch;
    void *bpack;      // packed op(B): per K block, np panels of kc x nr, zero beyond n
    int64_t np;       // panels (ceil(n / nr))
    int64_t kc;       // rows per K block (the last may have fewer)
    int64_t nkb;      // K blocks
    int64_t kb0, kb1; // the K blocks this pass packs and computes
    int64_t boff;     // elements of the packed op(B) before bpack[0] (earlier blocks, packed and gone)
    bool direct;      // B read in place (row stride ldb) instead of packed: see gemm_own
    int64_t jp0, jp1; // the column panels this pass computes (all: 0, np)
    atomic_bool oom;  // a thread could not get its buffer for its panels (col_items)
} gemm_job;

/* The epilogue on n elements of a row of C: += bias, then relu, then the relu_grad mask through y (bias and y
 * at the same columns; either NULL: none); the same arithmetic as the add, relu and relu_grad ops, so the bits
 * match theirs. The kernels apply it as they store a tile (tile_ep); this is for what they do not. */
#define EPILOGUE_SPAN(SFX, T)                                                                                          \
    static void epilogue_span_##SFX(T *restrict row, const T *restrict bias, bool relu, const T *restrict y,          \
                                    int64_t n) {                                                                       \
        if (bias && relu)                                                                                              \
            for (int64_t q = 0; q < n; q++) {                                                                          \
                const T v = row[q] + bias[q];                                                                          \
                row[q] = v < 0 ? (T)0 : v;                                                                             \
            }                                                                                                          \
        else if (bias)                                                                                                 \
            for (int64_t q = 0; q < n; q++) row[q] = row[q] + bias[q];                                                 \
        else if (relu)                                                                                                 \
            for (int64_t q = 0; q < n; q++) row[q] = row[q] < 0 ? (T)0 : row[q];                                       \
        if (y)                                                                                                         \
            for (int64_t q = 0; q < n; q++) row[q] = y[q] > 0 ? row[q] : (T)0;                                         \
    }
EPILOGUE_SPAN(f32, float)
EPILOGUE_SPAN(f64, double)

void pardo_gemm_epilogue_rows(const pardo_gemm *g, int64_t r0, int64_t r1) {
    if (!g->bias && !g->relu && !g->relu_y) return;
    for (int64_t i = r0; i < r1; i++) {
        if (g->dtype == PARDO_F32)
            epilogue_span_f32((float *)g->c + i * g->ldc, g->bias, g->relu,
                              g->relu_y ? (const float *)g->relu_y + i * g->ldc : NULL, g->n);
        else
            epilogue_span_f64((double *)g->c + i * g->ldc, g->bias, g->relu,
                              g->relu_y ? (const double *)g->relu_y + i * g->ldc : NULL, g->n);
    }
}

/* The epilogue of g's tile at row i0, column j0 (in ep), or NULL when g has none. */
static const tile_ep *tile_ep_at(const pardo_gemm *g, int64_t i0, int64_t j0, tile_ep *ep) {
    if (!g->bias && !g->relu && !g->relu_y) return NULL;
    const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    ep->bias = g->bias ? (const char *)g->bias + (size_t)j0 * es : NULL;
    ep->relu = g->relu;
    ep->y = g->relu_y ? (const char *)g->relu_y + (size_t)(i0 * g->ldc + j0) * es : NULL;
    return ep;
}

/* A row panel of A in the packed path: it computes rows [i0, i0 + h) of C; rows [top, top + rows) of op(A) are
 * packed (zeros after them up to mr); cut: into short kernels; sh: rows of the panel above it overlaps. */
typedef struct a_panel {
    int64_t i0, h, sh, top, rows;
    bool cut;
} a_panel;

/* The row panels of rows [ic, ie) of an m-row product (ic a multiple of mr), into pan; returns how many. */
static int64_t a_panels(const gemm_arch *ar, int64_t m, int64_t ic, int64_t ie, a_panel *pan) {
    const int64_t mr = ar->mr;
    int64_t q = 0;
    for (int64_t i0 = ic; i0 < ie; i0 += mr, q++) {
        const int64_t h = ie - i0 < mr ? ie - i0 : mr;
        const bool cut = h < mr && short_rows(ar, h) > 0;
        const int64_t sh = m < mr || cut ? 0 : mr - h;
        pan[q] = (a_panel){.i0 = i0, .h = h, .sh = sh, .top = i0 - sh, .rows = m < mr || cut ? h : mr, .cut = cut};
    }
    return q;
}

/* Defines the packing and the sweep over rows for element type T. */
#define GEMM_DRIVER(SFX, T)                                                                                            \
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
    }                                                                                                                  \
                                                                                                                       \
    /* One tile: kernel uk on A (ap, strides ra, ca) and panel bp into C at cp, then the epilogue ep (NULL: none),  \
     * or through the tile buffer when the tile is short (h < mr rows, of which the first sh are the panel above's and \
     * not written) or narrow (w < the kernel's kw columns). */                                                        \
    static void tile_##SFX(ukernel_fn uk, int64_t kcb, const T *ap, int64_t ra, int64_t ca, const T *bp, int64_t bs,   \
                           T *cp, int64_t ldc, int64_t mr, int64_t h, int64_t sh, int64_t w, int64_t kw, bool add,     \
                           const tile_ep *ep) {                                                                        \
        if (h == mr && w == kw) {                                                                                      \
            uk(kcb, ap, ra, ca, bp, bs, cp, ldc, add, ep);                                                             \
            return;                                                                                                    \
        }                                                                                                              \
        T tile[MR_MAX * NR_MAX] __attribute__((aligned(64)));                                                          \
        uk(kcb, ap, ra, ca, bp, bs, tile, NR_MAX, false, NULL);                                                        \
        for (int64_t i = 0; i < h; i++) {                                                                              \
            for (int64_t q = 0; q < w; q++)                                                                            \
                cp[i * ldc + q] = add ? cp[i * ldc + q] + tile[(i + sh) * NR_MAX + q] : tile[(i + sh) * NR_MAX + q];   \
            if (ep)                                                                                                    \
                epilogue_span_##SFX(cp + i * ldc, ep->bias, ep->relu, ep->y ? (const T *)ep->y + i * ldc : NULL, w);   \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    /* A short row panel (h < mr rows, row r of A at ap + r * ra) cut into short kernels (short_rows). */            \
    static void cut_##SFX(const gemm_arch *ar, int width, bool down, int64_t kcb, const T *ap, int64_t ra, int64_t ca,  \
                          const T *bp, int64_t bs, T *cp, int64_t ldc, int64_t h, int64_t w, int64_t kw, bool add,     \
                          const tile_ep *ep) {                                                                         \
        for (int64_t off = 0, s; off < h; off += s) {                                                                  \
            s = short_rows(ar, h - off);                                                                               \
            tile_ep e;                                                                                                 \
            if (ep) e = (tile_ep){ep->bias, ep->relu, ep->y ? (const T *)ep->y + off * ldc : NULL};                    \
            tile_##SFX(kernel_for(ar, s, width, down), kcb, ap + off * ra, ra, ca, bp, bs, cp + off * ldc, ldc, s, s,  \
                       0, w, kw, add, ep ? &e : NULL);                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
                                                                                                                       \
    /* Row panel pn of C by the column panel from column j0, w wide: the short kernels where pn is cut, else one     \
     * tile of mr rows whose first sh are the panel above's; A from pn's top row at at (strides ra, ca), the panel of  \
     * B at bp (rows bs apart); on the last K block (last) the tiles end with the epilogue. */                         \
    static void panel_##SFX(const pardo_gemm *g, const gemm_arch *ar, const a_panel *pn, bool down, int64_t kcb,       \
                            const T *at, int64_t ra, int64_t ca, const T *bp, int64_t bs, int64_t j0, int64_t w,       \
                            bool add, bool last) {                                                                     \
        const int width = width_for(ar, w);                                                                            \
        const int64_t kw = ar->nr >> width;                                                                            \
        tile_ep e;                                                                                                     \
        const tile_ep *ep = last ? tile_ep_at(g, pn->i0, j0, &e) : NULL;                                               \
        T *cp = (T *)g->c + pn->i0 * g->ldc + j0;                                                                      \
        if (pn->cut)                                                                                                   \
            cut_##SFX(ar, width, down, kcb, at, ra, ca, bp, bs, cp, g->ldc, pn->h, w, kw, add, ep);                    \
        else                                                                                                           \
            tile_##SFX(kernel_for(ar, ar->mr, width, down), kcb, at, ra, ca, bp, bs, cp, g->ldc, ar->mr, pn->h,        \
                       pn->sh, w, kw, add, ep);                                                                        \
    }                                                                                                                  \
                                                                                                                       \
    /* Rows [r0, r1) of C (r0 a multiple of mr) from the packed op(B). A short last row panel is cut into short        \
     * kernels where the arch has them; else it starts sh rows higher, overlapping the panel above (the same sums;     \
     * only its own rows are written), so it needs no padding unless A has fewer than mr rows in all. */               \
    static void rows_##SFX(const gemm_job *j, int64_t r0, int64_t r1) {                                                \
        const pardo_gemm *g = j->g;                                                                                    \
        const gemm_arch *ar = j->arch;                                                                                 \
        const int64_t mr = ar->mr, nr = ar->nr;                                                                        \
        const T *a = g->a;                                                                                             \
        T ap[MC_ROWS * KC_MAX] __attribute__((aligned(64))); /* a block's row panels of A packed [panel][p][mr] */     \
        for (int64_t kb = j->kb0; kb < j->kb1; kb++) {                                                                 \
            const int64_t p0 = kb * j->kc, kcb = g->k - p0 < j->kc ? g->k - p0 : j->kc;                                \
            const bool add = g->accumulate || kb > 0, last = kb == j->nkb - 1; /* last: the tiles end with the epilogue */ \
            /* panel jp of this K block starts at bblock + jp * pstep, its rows bs apart */                            \
            const T *bblock =                                                                                          \
                j->direct ? (const T *)g->b + p0 * g->ldb : (const T *)j->bpack + (p0 * j->np * nr - j->boff);         \
            const int64_t bs = j->direct ? g->ldb : nr, pstep = j->direct ? nr : kcb * nr;                             \
            for (int64_t ic = r0; ic < r1; ic += MC_ROWS) {                                                            \
                const int64_t ie = ic + MC_ROWS < r1 ? ic + MC_ROWS : r1;                                              \
                if (g->m < mr || (j->np > 1 && g->ta)) {                                                               \
                    /* A read down its columns (or tiny): pack the block's row panels (panel q's [p][mr] at ap + q *   \
                     * mr * kcb; down columns, a stored row of A at a time, so the reads run along it), then sweep     \
                     * them with each column panel of B in L1 (measured: 3% faster than each row panel in L1 across   \
                     * the column panels where K is a part's 128 rows; the same at 256) */                             \
                    a_panel pan[MC_ROWS];                                                                              \
                    const int64_t npan = a_panels(ar, g->m, ic, ie, pan);                                              \
                    for (int64_t p = 0; p < kcb && g->ta; p++) {                                                       \
                        const T *src = a + (p0 + p) * g->lda;                                                          \
                        for (int64_t q = 0; q < npan; q++) {                                                           \
                            T *d = ap + q * mr * kcb + p * mr;                                                         \
                            if (pan[q].rows == MR_MAX) /* a copy of known size: inline moves, not a call */            \
                                memcpy(d, src + pan[q].top, MR_MAX * sizeof(T));                                       \
                            else                                                                                       \
                                memcpy(d, src + pan[q].top, (size_t)pan[q].rows * sizeof(T));                          \
                            for (int64_t i = pan[q].rows; i < mr; i++) d[i] = 0;                                       \
                        }                                                                                              \
                    }                                                                                                  \
                    for (int64_t q = 0; q < npan && !g->ta; q++)                                                       \
                        for (int64_t p = 0; p < kcb; p++) {                                                            \
                            T *d = ap + q * mr * kcb + p * mr;                                                         \
                            for (int64_t i = 0; i < pan[q].rows; i++) d[i] = a[(pan[q].top + i) * g->lda + p0 + p];    \
                            for (int64_t i = pan[q].rows; i < mr; i++) d[i] = 0;                                       \
                        }                                                                                              \
                    for (int64_t jp = j->jp0; jp < j->jp1; jp++) {                                                      \
                        const int64_t j0 = jp * nr, w = g->n - j0 < nr ? g->n - j0 : nr;                               \
                        for (int64_t q = 0; q < npan; q++)                                                             \
                            panel_##SFX(g, ar, &pan[q], true, kcb, ap + q * mr * kcb, 1, mr, bblock + jp * pstep, bs,  \
                                        j0, w, add, last);                                                             \
                    }                                                                                                  \
                    continue;                                                                                          \
                }                                                                                                      \
                /* A read in place; a column panel of B stays in L1 over the block's row panels */                     \
                const int64_t rsa = g->ta ? 1 : g->lda, csa = g->ta ? g->lda : 1;                                      \
                a_panel pan[MC_ROWS];                                                                                  \
                const int64_t npan = a_panels(ar, g->m, ic, ie, pan);                                                  \
                for (int64_t jp = j->jp0; jp < j->jp1; jp++) {                                                          \
                    const int64_t j0 = jp * nr, w = g->n - j0 < nr ? g->n - j0 : nr;                                   \
                    for (int64_t q = 0; q < npan; q++)                                                                 \
                        panel_##SFX(g, ar, &pan[q], g->ta, kcb, a + pan[q].top * rsa + p0 * csa, rsa, csa,             \
                                    bblock + jp * pstep, bs, j0, w, add, last);                                        \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

GEMM_DRIVER(f32, float)
GEMM_DRIVER(f64, double)

static void pack_items(void *arg, int64_t begin, int64_t end) {
    const gemm_job *j = arg;
    for (int64_t jp = begin; jp < end; jp++) {
        if (j->g->dtype == PARDO_F32)
            pack_panel_f32(j, jp);
        else
            pack_panel_f64(j, jp);
    }
}

/* Rows [begin * unit, end * unit) of C (clipped to m), unit a multiple of mr. */
static void rows_in_units(const gemm_job *j, int64_t unit, int64_t begin, int64_t end) {
    const int64_t r0 = begin * unit, r1 = end * unit < j->g->m ? end * unit : j->g->m;
    if (j->g->dtype == PARDO_F32)
        rows_f32(j, r0, r1);
    else
        rows_f64(j, r0, r1);
}

/* Items are blocks of MC_ROWS rows (a multiple of every mr), the blocks rows_ sweeps one at a time: run one
 * after the other they are rows_ over all rows. */
static void block_items(void *arg, int64_t begin, int64_t end) { rows_in_units(arg, MC_ROWS, begin, end); }

/* Items are row panels of mr rows. */
static void row_items(void *arg, int64_t begin, int64_t end) {
    const gemm_job *j = arg;
    rows_in_units(j, j->arch->mr, begin, end);
}

static int gemm_own(pardo_kernel_ctx *ctx, const pardo_gemm *g, int kc);

/* Packs K block kb of op(B)'s panels [begin, end) into buf and sets j's
 * pass to that block alone, read from buf (a buffer of one block's panels
 * [begin, end), used just after packing, while it is still in L2). */
static void pack_block(gemm_job *j, int64_t kb, int64_t begin, int64_t end, void *buf) {
    const int64_t nr = j->arch->nr, p0 = kb * j->kc, kcb = j->g->k - p0 < j->kc ? j->g->k - p0 : j->kc;
    j->kb0 = kb;
    j->kb1 = kb + 1;
    j->bpack = buf;
    j->boff = p0 * j->np * nr + begin * kcb * nr; /* panel `begin` of block kb lands at buf */
    pack_items(j, begin, end);
}

/* Items are column panels: all rows of C for panels [begin, end), their
 * panels of op(B) packed by this thread, a K block at a time, into its own
 * buffer (BUF_COLS: the item never waits, so nothing else on this thread
 * uses it meanwhile), where they stay in its L2 and no other thread reads
 * them. The same tiles and K blocks as a split by rows: the same bits. */
static void col_items(void *arg, int64_t begin, int64_t end) {
    gemm_job *shared = arg;
    gemm_job j = {.g = shared->g, .arch = shared->arch, .np = shared->np, .kc = shared->kc, .nkb = shared->nkb,
                  .jp0 = begin, .jp1 = end};
    const size_t es = j.g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    void *buf = buf_get(BUF_COLS, (size_t)j.kc * (size_t)(end - begin) * (size_t)j.arch->nr * es);
    if (!buf) {
        atomic_store(&shared->oom, true);
        return;
    }
    for (int64_t kb = 0; kb < j.nkb; kb++) {
        pack_block(&j, kb, begin, end, buf);
        rows_in_units(&j, j.g->m, 0, 1);
    }
}

/* True when g on the own kernels (np column panels) at nthreads splits its
 * column panels over the threads (col_items) rather than its rows: each
 * thread then packs only the part of op(B) it multiplies, where a split by
 * rows packs op(B) once and has every thread read all of it, half from
 * another core. Measured at 2 threads: four of the five MLP products it
 * takes 5 to 9% faster (fc1 dW1 the same), the training step's
 * single-thread graph 3 to 8%. Only where the panels share out evenly, the
 * rows are enough to reuse each packed block (MC_ROWS) and K is long
 * enough for packing to matter (COLS_MIN_K). */
static bool split_columns(const pardo_gemm *g, int64_t np, int nthreads) {
    return nthreads > 1 && g->m >= MC_ROWS && g->k >= COLS_MIN_K && np >= 2 * nthreads && np % nthreads == 0;
}

/* The own kernels for a product of dtype, A transposed or not, n columns. */
static const gemm_arch *arch_for(pardo_dtype dtype, bool ta, int64_t n) {
    const gemm_arch *ar = &own_arch[dtype == PARDO_F64];
#if GEMM_X86
    /* measured: 6x64 is 3-9% faster where A is read along its rows and the product is wide; 12x32 (12x16 tiles
     * for N <= 16) where A is packed down its columns or N is narrow. The pick depends on the shape alone. */
    if (ar == &arch_avx512[0] && !ta && n >= 64) ar = &arch_avx512_wide;
#endif
    return ar;
}

/* Rows [i0, i1) of C from t = C^T ([n, m], rows m apart), then their epilogue: 16 x 16 blocks in registers where
 * the rows are 16 and AVX-512 runs, else element by element. */
static void swap_rows(const pardo_gemm *g, const void *t, int64_t i0, int64_t i1) {
    int64_t jdone = 0;
#if GEMM_X86
    if (g->dtype == PARDO_F32 && i1 - i0 == 16 && own_is_avx512())
        for (; jdone + 16 <= g->n; jdone += 16)
            tr16_f32((const float *)t + jdone * g->m + i0, g->m, (float *)g->c + i0 * g->ldc + jdone, g->ldc);
#endif
    for (int64_t i = i0; i < i1; i++) {
        if (g->dtype == PARDO_F32)
            for (int64_t j = jdone; j < g->n; j++) ((float *)g->c)[i * g->ldc + j] = ((const float *)t)[j * g->m + i];
        else
            for (int64_t j = jdone; j < g->n; j++) ((double *)g->c)[i * g->ldc + j] = ((const double *)t)[j * g->m + i];
    }
    pardo_gemm_epilogue_rows(g, i0, i1);
}

typedef struct swap_job {
    const pardo_gemm *g;
    const void *t; // C^T
} swap_job;

/* Items are blocks of 16 rows of C. */
static void swap_items(void *arg, int64_t begin, int64_t end) {
    const swap_job *sj = arg;
    for (int64_t b = begin; b < end; b++) swap_rows(sj->g, sj->t, b * 16, b * 16 + 16 < sj->g->m ? b * 16 + 16 : sj->g->m);
}

/* True when g runs cheaper as the swapped product C^T = op(B)^T op(A)^T (gemm_swapped), never from the thread
 * count (so that a product's bits do not depend on it): op(B) transposed ([n, k] as stored), which packing
 * would transpose whole, where the swapped product transposes less: A (m x k, unless A is stored transposed) and
 * its result (m x n) -- a handful of rows, a part's few rows against a square weight (dY W^T of a parallel_do
 * part), or a batch against a wider weight (dY W^T of a 784-input layer: measured 2% faster swapped; a tie, as a
 * batch of 256 against a square 512 weight, stays unswapped); or few columns (fewer than NARROW_COLS, a 10-class
 * layer's weight gradient A^T dY) from a transposed A, where the kernels would fill a tile's lanes with zeros and
 * C^T = dY^T A has few rows and its wide B (A itself) read in place. Not for accumulate (its K blocks would be
 * added to C in another order). The choice depends on the shape and on whether B is kept packed
 * (pardo_gemm.b_packed, the same for every run of an op). */
static bool swap_pays(const pardo_gemm *g) {
    if (g->accumulate) return false;
    if (g->tb) {
        if (g->m <= DIRECT_MAX_ROWS && g->n >= 4 * g->m) return true;
        /* by the transposes, but not where B is kept packed from run to run (pardo_gemm_packed: no packing to
         * save; the bits are the same either way) */
        const double swapped = (double)g->m * (double)((g->ta ? 0 : g->k) + g->n), packed = (double)g->n * (double)g->k;
        return !g->b_packed && swapped < packed;
    }
    return g->ta && g->n < NARROW_COLS && g->m >= 4 * g->n;
}

/* g as the swapped product (swap_pays): C^T into a per-thread buffer, then transposed into C (its rows split over
 * the threads), each block of rows given the epilogue as it lands. */
static int gemm_swapped(pardo_kernel_ctx *ctx, const pardo_gemm *g) {
    const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    void *t = buf_get(BUF_SWAP, (size_t)(g->n * g->m) * es);
    if (!t) return pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate a product's %lld x %lld result",
                                (long long)g->n, (long long)g->m);
    pardo_gemm s = {.dtype = g->dtype, .ta = !g->tb, .tb = !g->ta, .m = g->n, .n = g->m, .k = g->k, .a = g->b,
                    .lda = g->ldb, .b = g->a, .ldb = g->lda, .c = t, .ldc = g->m};
    /* K blocked as g's own kernels would block it: each element's terms summed in the same order (the swapped
     * kernel multiplies b a for a b), so the bits are the unswapped product's */
    int rc = gemm_own(ctx, &s, arch_for(g->dtype, g->ta, g->n)->kc);
    if (rc != PARDO_OK) return rc;
    swap_job sj = {.g = g, .t = t};
    return pardo_parallel_for(ctx, (g->m + 15) / 16, swap_items, &sj);
}

void pardo_gemm_packed_clear(pardo_gemm_packed *p) {
    free(p->data);
    *p = (pardo_gemm_packed){0};
}

/* j for g from the caller's kept op(B) (g->b_packed): true when j reads it
 * (packed now if B is the one seen last time, unchanged), with *rc the
 * packing's status; false when B is to be packed as usual. */
static bool kept_b(pardo_kernel_ctx *ctx, const pardo_gemm *g, gemm_job *j, size_t es, int *rc) {
    pardo_gemm_packed *pc = g->b_packed;
    const bool same = pc->valid && pc->b == g->b && pc->arch == j->arch && pc->ldb == g->ldb && pc->k == g->k &&
                      pc->n == g->n && pc->tb == g->tb && pc->dtype == g->dtype && pc->version == g->b_version;
    const bool again = pc->seen_b == g->b && pc->seen_version == g->b_version;
    pc->seen_b = g->b;
    pc->seen_version = g->b_version;
    if (!same) {
        if (!again) return false; /* seen once: packed as usual */
        const size_t bytes = ((size_t)g->k * (size_t)j->np * (size_t)j->arch->nr * es + 63) & ~(size_t)63;
        if (bytes > pc->cap) {
            void *p = aligned_alloc(64, bytes);
            if (!p) return false; /* packed as usual */
            free(pc->data);
            pc->data = p;
            pc->cap = bytes;
        }
        pc->valid = false;
    }
    /* all K blocks of op(B), packed whole at pc->data */
    j->kb0 = 0;
    j->kb1 = j->nkb;
    j->boff = 0;
    j->direct = false;
    j->bpack = pc->data;
    if (same) return true;
    if ((*rc = pardo_parallel_for(ctx, j->np, pack_items, j)) != PARDO_OK) return true;
    *pc = (pardo_gemm_packed){.data = pc->data, .cap = pc->cap, .valid = true, .b = g->b, .arch = j->arch,
                              .ldb = g->ldb, .k = g->k, .n = g->n, .tb = g->tb, .dtype = g->dtype,
                              .version = g->b_version, .seen_b = g->b, .seen_version = g->b_version};
    return true;
}

/* g on the own kernels, K in blocks of at most kc rows (0: the kernels' own). */
static int gemm_own(pardo_kernel_ctx *ctx, const pardo_gemm *g, int kc) {
    const gemm_arch *ar = arch_for(g->dtype, g->ta, g->n);
    const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
    gemm_job j = {.g = g, .arch = ar, .np = (g->n + ar->nr - 1) / ar->nr};
    j.jp1 = j.np;
    if (kc <= 0) kc = ar->kc;
    j.nkb = (g->k + kc - 1) / kc;
    j.kc = (g->k + j.nkb - 1) / j.nkb;
    const int64_t mp = (g->m + ar->mr - 1) / ar->mr;
    const bool one = ctx->nthreads <= 1 || mp <= 1;
    /* few rows: packing op(B) would cost about what the product does, so where B is not transposed, its
     * panels whole and its rows 64-byte aligned, the kernel reads it in place (its aligned loads hold) */
    j.direct = !g->tb && g->m <= DIRECT_MAX_ROWS && g->n % ar->nr == 0 && (uintptr_t)g->b % 64 == 0 &&
               (size_t)g->ldb * es % 64 == 0;
    if (g->b_packed) {
        int rc = PARDO_OK;
        if (kept_b(ctx, g, &j, es, &rc)) return rc == PARDO_OK ? pardo_parallel_for(ctx, mp, row_items, &j) : rc;
    }
    if (j.direct) {
        j.kb0 = 0;
        j.kb1 = j.nkb;
        return pardo_parallel_for(ctx, mp, row_items, &j);
    }
    if (!one && split_columns(g, j.np, ctx->nthreads)) {
        atomic_init(&j.oom, false);
        int rc = pardo_parallel_for(ctx, j.np, col_items, &j);
        if (rc == PARDO_OK && atomic_load(&j.oom))
            rc = pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate a buffer to pack a matrix product's panels");
        return rc;
    }
    /* one thread packs one K block at a time; several share all of op(B) */
    const size_t bytes = (size_t)(one ? j.kc : g->k) * (size_t)j.np * (size_t)ar->nr * es;
    /* small products pack on the stack, so they never touch the heap (not even on a thread's first product) */
    max_align_t small[PACK_STACK / sizeof(max_align_t)] __attribute__((aligned(64)));
    void *buf = bytes <= sizeof small ? (void *)small : buf_get(BUF_PACK, bytes);
    if (!buf) return pardo_errorf(ctx->st, PARDO_ENOMEM, "cannot allocate %zu bytes to pack a matrix product", bytes);
    if (one) { /* pack each K block just before it is used, so it is still in L2 */
        const int64_t nblocks = (g->m + MC_ROWS - 1) / MC_ROWS;
        for (int64_t kb = 0; kb < j.nkb; kb++) {
            pack_block(&j, kb, 0, j.np, buf);
            /* the row blocks in order, some maybe on an idle thread (a parallel_do part's product, helped by the
             * thread of a part that ended first); the same tiles and sums either way */
            int rc = pardo_parallel_for_idle(ctx, nblocks, block_items, &j);
            if (rc != PARDO_OK) return rc;
        }
        return PARDO_OK;
    }
    j.bpack = buf;
    /* several: pack all of op(B) at once (split by panels), then split the rows */
    j.kb0 = 0;
    j.kb1 = j.nkb;
    int rc = pardo_parallel_for(ctx, j.np, pack_items, &j);
    if (rc == PARDO_OK) rc = pardo_parallel_for(ctx, mp, row_items, &j);
    return rc;
}

bool pardo_gemm_splits_columns(const pardo_gemm *g, int nthreads) {
    pthread_once(&setup_once, setup);
    const gemm_arch *ar = arch_for(g->dtype, g->ta, g->n);
    return !g->b_packed && split_columns(g, (g->n + ar->nr - 1) / ar->nr, nthreads);
}

/* ---- through BLAS: rows in fixed blocks, so the bits do not depend on the thread count ---- */

#define BLAS_ROWS 128

typedef struct blas_job {
    const pardo_gemm *g;
    atomic_int failed;
    pardo_status st; // the first failure
} blas_job;

static void blas_items(void *arg, int64_t begin, int64_t end) {
    blas_job *j = arg;
    pardo_status st;
    for (int64_t r = begin; r < end; r++) {
        int64_t m0 = r * BLAS_ROWS, m1 = m0 + BLAS_ROWS < j->g->m ? m0 + BLAS_ROWS : j->g->m;
        if (pardo_gemm_blas_rows(j->g, m0, m1, &st) != PARDO_OK) {
            if (atomic_exchange(&j->failed, 1) == 0) j->st = st;
            continue;
        }
        pardo_gemm_epilogue_rows(j->g, m0, m1);
    }
}

static int gemm_blas(pardo_kernel_ctx *ctx, const pardo_gemm *g) {
    blas_job j = {.g = g};
    int rc = pardo_parallel_for(ctx, (g->m + BLAS_ROWS - 1) / BLAS_ROWS, blas_items, &j);
    if (rc == PARDO_OK && atomic_load(&j.failed)) {
        *ctx->st = j.st;
        rc = j.st.code;
    }
    return rc;
}

static bool stride_ok(int64_t ld, int64_t cols) { return ld >= cols; }

int pardo_gemm_run(pardo_kernel_ctx *ctx, const pardo_gemm *g, pardo_gemm_impl impl) {
    if ((g->dtype != PARDO_F32 && g->dtype != PARDO_F64) || g->m < 0 || g->n < 0 || g->k < 0 ||
        !stride_ok(g->lda, g->ta ? g->m : g->k) || !stride_ok(g->ldb, g->tb ? g->k : g->n) || !stride_ok(g->ldc, g->n))
        return pardo_errorf(ctx->st, PARDO_EINVAL,
                            "gemm: bad product (%s, m %lld, n %lld, k %lld, lda %lld, ldb %lld, ldc %lld)",
                            pardo_dtype_name(g->dtype), (long long)g->m, (long long)g->n, (long long)g->k,
                            (long long)g->lda, (long long)g->ldb, (long long)g->ldc);
    const bool blas = use_blas(impl);
    if (blas && !pardo_gemm_blas_compiled())
        return pardo_errorf(ctx->st, PARDO_ENOTSUP, "gemm: pardo was built without BLAS (make BLAS=1)");
    if (g->m == 0 || g->n == 0) return PARDO_OK;
    if (g->k == 0) { /* an empty sum */
        const size_t es = g->dtype == PARDO_F64 ? sizeof(double) : sizeof(float);
        for (int64_t i = 0; !g->accumulate && i < g->m; i++)
            memset((char *)g->c + (size_t)(i * g->ldc) * es, 0, (size_t)g->n * es);
        pardo_gemm_epilogue_rows(g, 0, g->m);
        return PARDO_OK;
    }
    pardo_kernel_ctx one = *ctx;
    if ((double)g->m * (double)g->n * (double)g->k < (double)PAR_MIN_MACS) {
        one.nthreads = 1;
        one.idle_help = false;
    }
    if (blas) return gemm_blas(&one, g);
    int rc;
    if (own_is_avx512() && pardo_gemm_narrow(&one, g, &rc)) return rc;
    if (swap_pays(g)) return gemm_swapped(&one, g);
    return gemm_own(&one, g, 0);
}
