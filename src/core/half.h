/* half.h - float16 (IEEE binary16) and bfloat16 conversions: to a double
 * exactly, from a double or float with one round to nearest, ties to even.
 * Values too large become Inf, NaN stays NaN (quiet, sign and the top of its
 * payload kept), values below half the smallest subnormal become signed zero.
 * Pure functions, thread-safe. */
#ifndef PARDO_HALF_H
#define PARDO_HALF_H

#include <stdint.h>

/* float16 bits to the value they encode (exact). */
double pardo_f16_to_f64(uint16_t h);

/* The float16 nearest v (ties to even). */
uint16_t pardo_f16_from_f64(double v);

/* bfloat16 bits to the value they encode (exact). */
double pardo_bf16_to_f64(uint16_t h);

/* The bfloat16 nearest v (ties to even). */
uint16_t pardo_bf16_from_f64(double v);

/* float versions of the same, for kernels (float to double is exact, so
 * these round once too). */
static inline float pardo_f16_to_f32(uint16_t h) { return (float)pardo_f16_to_f64(h); }
static inline uint16_t pardo_f16_from_f32(float v) { return pardo_f16_from_f64((double)v); }
static inline float pardo_bf16_to_f32(uint16_t h) { return (float)pardo_bf16_to_f64(h); }
static inline uint16_t pardo_bf16_from_f32(float v) { return pardo_bf16_from_f64((double)v); }

#endif
