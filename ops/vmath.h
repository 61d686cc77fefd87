/* vmath.h - float32 exp, erfc and the normal CDF as straight-line
 * arithmetic (no calls, no branches, no tables), so that a loop over them in
 * a PARDO_SIMD_CLONES kernel vectorises: libm's expf and erfcf are calls the
 * compiler cannot vectorise without -ffast-math, and they made gelu and
 * softmax cost 10-20 ns an element. The kernels of gelu, sigmoid, softmax
 * and the GEMM's gelu epilogue use them for float32; float64 stays on libm.
 *
 * Every operation is a plain IEEE float operation (pardo builds with
 * -std=c11, so the compiler contracts no a*b+c into an FMA): a value comes
 * out the same bits in the AVX-512, AVX2 and baseline builds of a kernel,
 * at any vector width, on any thread.
 *
 * Accuracy, checked against libm in double by tests/check_vmath.c:
 * pardo_vexpf within 2 ulp over the whole float range (0 below the smallest
 * subnormal, inf above FLT_MAX, NaN kept); pardo_verfcf within 1e-6
 * relative wherever erfc(x) > 1e-30 (W. H. Press et al., Numerical Recipes,
 * erfcc: a Chebyshev fit with fractional error below 1.2e-7, evaluated in
 * float); gelu and its derivative within 2e-6 relative, sigmoid 5e-7. */
#ifndef PARDO_VMATH_H
#define PARDO_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* 2^n for an integer n in [-126, 127], from the exponent bits. */
static inline float pardo_vexp2i(int32_t n) {
    const uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* e^(h + l) for h + l in [-112, 89] (NaN kept) without rounding h + l
 * first (Cephes' expf: h + l = n ln2 + r, |r| <= ln2 / 2, r taken as h - n
 * ln2 (exact) + l, a degree-6 polynomial for e^r in Estrin's scheme, whose
 * dependency chain is half Horner's, then 2^n applied in two halves so that
 * subnormal and near-overflow results come out right). */
static inline float pardo_vexpf2_core(float h, float l) {
    const float magic = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer
    const float nf = ((h + l) * 1.44269504088896341f + magic) - magic;
    const float r = ((h - nf * 0.693359375f) + l) - nf * -2.12194440e-4f;
    const float r2 = r * r, r4 = r2 * r2;
    const float d0 = 5.0000001201e-1f + 1.6666665459e-1f * r, d1 = 4.1665795894e-2f + 8.3334519073e-3f * r;
    const float d2 = 1.3981999507e-3f + 1.9875691500e-4f * r;
    const float p = ((d0 + d1 * r2) + d2 * r4) * r2 + r + 1.0f;
    const int32_t n = (int32_t)nf, n1 = n >> 1; // floor(n / 2), arithmetic shift (GCC); NaN: p is NaN
    return p * pardo_vexp2i(n1) * pardo_vexp2i(n - n1);
}

/* e^(hi + lo) in float32 for any hi + lo, without rounding the sum first
 * (0 below the smallest subnormal, inf above FLT_MAX, NaN kept). erfc's
 * e^(-x^2 + P) passes -x^2 split in two, so that its rounding costs
 * nothing. */
static inline float pardo_vexpf2(float hi, float lo) {
    const float s = hi + lo;
    float sc = s < -104.0f ? -104.0f : s; // e^-104 rounds to 0, e^89 to inf
    sc = sc > 89.0f ? 89.0f : sc;
    sc = sc == sc ? sc : 0.0f; // NaN: compute on 0, return NaN below
    const float y = pardo_vexpf2_core(sc == s ? hi : sc, sc == s ? lo : 0.0f);
    return s == s ? y : s;
}

/* e^(hi + lo) where hi <= 0 and |lo| <= 2 (erfc's and the normal density's arguments,
 * never near overflow): pardo_vexpf2's value (0 where it is below the
 * smallest subnormal, NaN kept) with one clamp instead of its six selects,
 * as hi below -110 gives 0 whatever lo adds. */
static inline float pardo_vexpf2_noover(float hi, float lo) {
    return pardo_vexpf2_core(hi < -110.0f ? -110.0f : hi, lo);
}

/* e^x in float32. */
static inline float pardo_vexpf(float x) { return pardo_vexpf2(x, 0.0f); }

/* x with the low 12 bits of its significand cleared: its square is exact. */
static inline float pardo_vhigh12(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits &= 0xFFFFF000u;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* erfc(z) for z >= 0 given z and z^2 as sq_hi + sq_lo, sq_hi exact
 * (Numerical Recipes' erfcc: t = 1 / (1 + z / 2), erfc(z) = t exp(-z^2 +
 * P(t))); the exponential takes -sq_hi and P - sq_lo apart (pardo_vexpf2_noover),
 * as musl's erff splits its e^-z^2, so that rounding -z^2 + P to float (an
 * error of up to 4e-6 in the argument near z = 9) costs nothing. */
static inline float pardo_verfc_sq(float z, float sq_hi, float sq_lo) {
    const float t = 1.0f / (1.0f + 0.5f * z);
    // Estrin's scheme over t, t^2, t^4, t^8 (its chain is 7 operations deep, Horner's 18)
    const float t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
    const float a0 = -1.26551223f + 1.00002368f * t, a1 = 0.37409196f + 0.09678418f * t;
    const float a2 = -0.18628806f + 0.27886807f * t, a3 = -1.13520398f + 1.48851587f * t;
    const float a4 = -0.82215223f + 0.17087277f * t;
    const float p = ((a0 + a1 * t2) + (a2 + a3 * t2) * t4) + a4 * t8;
    return t * pardo_vexpf2_noover(-sq_hi, p - sq_lo);
}

/* erfc(x) in float32: erfc(-|x|) = 2 - erfc(|x|). */
static inline float pardo_verfcf(float x) {
    float z = x < 0 ? -x : x;
    z = z > 1e4f ? 1e4f : z; // erfc(1e4) is 0 already; keeps inf - inf out of the split
    const float zh = pardo_vhigh12(z);
    const float e = pardo_verfc_sq(z, zh * zh, (z - zh) * (z + zh));
    return x < 0 ? 2.0f - e : e;
}

/* x^2 / 2 as hi + lo, hi exact, split from x (not from x / sqrt 2 rounded,
 * whose error would grow with x^2); |x| capped at 1e4 (Phi is 0 or 1 and
 * the density 0 long before), which keeps inf - inf out of the split. */
static inline void pardo_vhalf_square(float x, float *hi, float *lo) {
    float a = x < 0 ? -x : x;
    a = a > 1e4f ? 1e4f : a;
    const float ah = pardo_vhigh12(a);
    *hi = 0.5f * (ah * ah);
    *lo = 0.5f * ((a - ah) * (a + ah));
}

/* Phi(x), the standard normal CDF, = erfc(-x / sqrt 2) / 2. */
static inline float pardo_vnormal_cdf(float x) {
    float hi, lo;
    pardo_vhalf_square(x, &hi, &lo);
    const float a = x < 0 ? -x : x, z = (a > 1e4f ? 1e4f : a) * 0.707106781186547524f;
    const float e = 0.5f * pardo_verfc_sq(z, hi, lo);
    return x > 0 ? 1.0f - e : e;
}

/* gelu(x) = x Phi(x) = 0.5 x erfc(-x / sqrt 2), the exact form, in float32:
 * the gelu op's float32 kernel and the GEMM's gelu epilogue both call this,
 * so a fused matmul + bias + gelu gives the ops' bits. */
static inline float pardo_vgeluf(float x) { return x * pardo_vnormal_cdf(x); }

/* gelu in float64, from libm's erfc: the gelu op's float64 kernel, the
 * GEMM's epilogue and matmul's bias-after path all call this. */
static inline double pardo_gelu_f64(double x) { return 0.5 * x * erfc(-x * 0.70710678118654752440); }

/* d gelu / dx = Phi(x) + x phi(x), phi the standard normal density, in float32. */
static inline float pardo_vgelu_gradf(float x) {
    float hi, lo;
    pardo_vhalf_square(x, &hi, &lo);
    return pardo_vnormal_cdf(x) + x * (0.398942280401432678f * pardo_vexpf2_noover(-hi, -lo));
}

/* The logistic sigmoid 1 / (1 + e^-x) in float32, from e^-|x| (never overflows). */
static inline float pardo_vsigmoidf(float x) {
    const float e = pardo_vexpf(x < 0 ? x : -x);
    return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

#endif
