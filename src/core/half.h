/* half.h - float16 (IEEE binary16) and bfloat16 conversions: to a double
 * exactly, from a double or float with one round to nearest, ties to even.
 * Values too large become Inf, NaN stays NaN (quiet, sign and the top of its
 * payload kept), values below half the smallest subnormal become signed zero.
 * Pure functions, thread-safe. */
#ifndef PARDO_HALF_H
#define PARDO_HALF_H

#include <stdint.h>
#include <string.h>

/* float16 bits to the value they encode (exact). */
double pardo_f16_to_f64(uint16_t h);

/* The float16 nearest v (ties to even). */
uint16_t pardo_f16_from_f64(double v);

/* bfloat16 bits to the value they encode (exact). */
double pardo_bf16_to_f64(uint16_t h);

/* The bfloat16 nearest v (ties to even). */
uint16_t pardo_bf16_from_f64(double v);

/* float versions of the same, for kernels: inline, bit-level (float to
 * double is exact, so these agree with the double ones bit for bit, which
 * tests/check_half.c checks). */

static inline uint32_t pardo_half_bits_of_(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float pardo_half_float_of_(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline float pardo_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, em = h & 0x7fffu;
    if (em >= 0x7c00) return pardo_half_float_of_(sign | 0x7f800000u | (em & 0x3ffu) << 13); /* Inf, NaN */
    if (em >= 0x400) return pardo_half_float_of_(sign | ((em << 13) + (112u << 23)));       /* normal: rebias */
    const float v = (float)em * 0x1p-24f;                                                      /* subnormal: exact */
    return sign ? -v : v;
}

/* Round to nearest even with a bias (F. Giesen's float_to_half_fast3_rtne): a normal result adds half an ulp
 * less one, plus the kept mantissa's low bit, then truncates; a subnormal one lets a float addition of 0.5
 * round the bits into place. */
static inline uint16_t pardo_f16_from_f32(float f) {
    uint32_t u = pardo_half_bits_of_(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    u &= 0x7fffffffu;
    if (u >= 0x47800000u) /* 2^16 and up: Inf; NaN quiet with its payload's top bits */
        return (uint16_t)(sign | (u > 0x7f800000u ? 0x7e00u | ((u >> 13) & 0x3ffu) : 0x7c00u));
    if (u < 0x38800000u) /* below 2^-14: a float16 subnormal or zero */
        return (uint16_t)(sign | (pardo_half_bits_of_(pardo_half_float_of_(u) + 0.5f) - 0x3f000000u));
    u += 0xc8000fffu + ((u >> 13) & 1); /* exponent rebiased by -112, and the rounding bias */
    return (uint16_t)(sign | (u >> 13));
}

static inline float pardo_bf16_to_f32(uint16_t h) { return pardo_half_float_of_((uint32_t)h << 16); }

static inline uint16_t pardo_bf16_from_f32(float f) {
    const uint32_t u = pardo_half_bits_of_(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN: quiet, payload's top kept */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);                 /* carries reach Inf as they should */
}

#endif
