/* gemm_kernels.c - the own product's micro-kernels: a register-blocked
 * tile of C from a packed panel of op(B) and mr rows of op(A) (broadcast
 * one element at a time), each K block's terms summed in registers with
 * fused multiply-adds (plain C: multiply, add) and the block's sum added to
 * C; the last K block's tiles end with the epilogue as they are stored.
 * Written once as a macro and instantiated for AVX-512 (12x32 and 6x64
 * float, 12x16 double, and the short kernels of 6, 4, 2 and 1 rows),
 * AVX2+FMA (6x16, 6x8, and the short kernels of 4, 2 and 1 rows) and
 * plain C (4x8), each with its target attribute,
 * so the default build stays portable and the CPU picks one at run time
 * (gemm.c). The kernels are static: gemm.c reaches them through the tables
 * at the end (gemm_internal.h), one per instruction set and dtype. */
#include "gemm_internal.h"

#if GEMM_X86
#include <immintrin.h>
#endif

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
        if (ep && ep->act == PARDO_GEMM_ACT_GELU) { /* no vector erfc: stored, then element by element */           \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                      \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) {                                                 \
                T *cp = c + i * ldc + v * LANES;                                                                       \
                STOREU(cp, add ? ADD(LOADU(cp), acc[i][v]) : acc[i][v]);                                               \
            }                                                                                                          \
            pardo_gemm_epilogue_tile(sizeof(T) == sizeof(double) ? PARDO_F64 : PARDO_F32, c, ldc, MR, NV * LANES, ep);  \
        } else if (ep) {                                                                                               \
            const T *bias = ep->bias, *y = ep->y;                                                                      \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                                      \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) {                                                 \
                    T *cp = c + i * ldc + v * LANES;                                                                   \
                    V x = add ? ADD(LOADU(cp), acc[i][v]) : acc[i][v];                                                 \
                    if (bias) x = ADD(x, LOADU(bias + v * LANES));                                                     \
                    if (ep->act == PARDO_GEMM_ACT_RELU) x = RELU(x);                                                   \
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
/* uk256_f32_MRxNV: MR rows by NV vectors of 8 floats (uk256_f64_: of 4 doubles); 6 x 16 (6 x 8) and its half, and
 * the short kernels of 4, 2 and 1 rows a last row panel of fewer than 6 rows is made of */
#define UK256_F32(MR, NV) UKERNEL(uk256_f32_##MR##x##NV, AVX2, float, __m256, 8, MR, NV, AVX2_PS)
#define UK256_F64(MR, NV) UKERNEL(uk256_f64_##MR##x##NV, AVX2, double, __m256d, 4, MR, NV, AVX2_PD)
UK256_F32(6, 2)
UK256_F32(6, 1)
UK256_F32(4, 2)
UK256_F32(4, 1)
UK256_F32(2, 2)
UK256_F32(2, 1)
UK256_F32(1, 2)
UK256_F32(1, 1)
UK256_F64(6, 2)
UK256_F64(6, 1)
UK256_F64(4, 2)
UK256_F64(4, 1)
UK256_F64(2, 2)
UK256_F64(2, 1)
UK256_F64(1, 2)
UK256_F64(1, 1)
#endif

/* the mr-row kernels of full and half width, PFX##SFX and PFX##_half##SFX (no short ones) */
#define FULL_HALF(MR, PFX, SFX) {{[MR] = PFX##SFX}, {[MR] = PFX##_half##SFX}}
const gemm_arch pardo_gemm_arch_c[2] = {
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
const gemm_arch pardo_gemm_arch_avx512[2] = {
    {"own avx512f 12x32 (6x64 for A along rows and N >= 64)", 12, 32, 256,
     {ROWS12(uk512_f32, 2, _r), ROWS12(uk512_f32, 1, _r)}, {ROWS12(uk512_f32, 2, _c), ROWS12(uk512_f32, 1, _c)},
     .simd = true},
    {"own avx512f 12x16", 12, 16, 256, {ROWS12(uk512_f64, 2, _r), ROWS12(uk512_f64, 1, _r)},
     {ROWS12(uk512_f64, 2, _c), ROWS12(uk512_f64, 1, _c)}, .simd = true},
};
const gemm_arch pardo_gemm_arch_avx512_wide = {
    "own avx512f 6x64", 6, 64, 128, {ROWS6(uk512_f32, 4, _r), ROWS6(uk512_f32, 2, _r), ROWS6(uk512_f32, 1, _r)},
    {ROWS6(uk512_f32, 4, _c), ROWS6(uk512_f32, 2, _c), ROWS6(uk512_f32, 1, _c)}, .simd = true};
const gemm_arch pardo_gemm_arch_avx2[2] = {
    {"own avx2+fma 6x16", 6, 16, 256, {ROWS6(uk256_f32, 2, _r), ROWS6(uk256_f32, 1, _r)},
     {ROWS6(uk256_f32, 2, _c), ROWS6(uk256_f32, 1, _c)}, .simd = true},
    {"own avx2+fma 6x8", 6, 8, 256, {ROWS6(uk256_f64, 2, _r), ROWS6(uk256_f64, 1, _r)},
     {ROWS6(uk256_f64, 2, _c), ROWS6(uk256_f64, 1, _c)}, .simd = true},
};
#endif
