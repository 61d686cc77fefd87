/* half.c - float16 and bfloat16 conversions (see half.h). Both formats are
 * handled by one encoder and one decoder given the exponent and mantissa
 * widths: float16 has 5 and 10, bfloat16 8 and 7. */
#include "core/half.h"

#include <math.h>
#include <string.h>

static uint64_t bits_of(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    return u;
}

/* The format's bits nearest v: sign, ebits of exponent, mbits of mantissa. */
static uint16_t encode(double v, int ebits, int mbits) {
    const uint64_t u = bits_of(v);
    const uint32_t sign = (uint32_t)(u >> 63) << (ebits + mbits);
    const uint32_t all_ones = (1u << ebits) - 1;
    const int dexp = (int)((u >> 52) & 0x7ff);
    const uint64_t dman = u & ((1ULL << 52) - 1);
    if (dexp == 0x7ff) {
        if (dman == 0) return (uint16_t)(sign | all_ones << mbits); /* Inf */
        uint32_t payload = (uint32_t)(dman >> (52 - mbits)) | 1u << (mbits - 1); /* quiet, top payload kept */
        return (uint16_t)(sign | all_ones << mbits | payload);
    }
    if (dexp == 0) return (uint16_t)sign; /* zero or a double subnormal: far below either format's range */
    const int bias = (int)(all_ones >> 1), emin = 1 - bias;
    const int e = dexp - 1023;
    if (e + bias >= (int)all_ones) return (uint16_t)(sign | all_ones << mbits); /* too large even before rounding */
    const uint64_t sig = dman | 1ULL << 52; /* value = sig * 2^(e - 52) */
    const int shift = 52 - mbits + (e < emin ? emin - e : 0);
    if (shift > 53) return (uint16_t)sign; /* below half the smallest subnormal */
    uint64_t r = sig >> shift;
    const uint64_t rem = sig & ((1ULL << shift) - 1), half = 1ULL << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    if (e < emin) return (uint16_t)(sign | (uint32_t)r); /* subnormal; r == 2^mbits is the smallest normal */
    /* normal: r in [2^mbits, 2^(mbits+1)]; a carry out of the mantissa moves into the exponent */
    uint32_t mag = ((uint32_t)(e + bias) << mbits) + (uint32_t)(r - (1ULL << mbits));
    if (mag >= all_ones << mbits) mag = all_ones << mbits; /* rounded up to Inf */
    return (uint16_t)(sign | mag);
}

static double decode(uint16_t h, int ebits, int mbits) {
    const uint32_t all_ones = (1u << ebits) - 1;
    const int bias = (int)(all_ones >> 1);
    const uint32_t exp = (h >> mbits) & all_ones, man = h & ((1u << mbits) - 1);
    const double sign = (h >> (ebits + mbits)) & 1 ? -1.0 : 1.0;
    if (exp == all_ones) {
        if (man == 0) return sign * (double)INFINITY;
        /* a NaN with the payload carried to the double's top mantissa bits */
        uint64_t u = (uint64_t)((h >> (ebits + mbits)) & 1) << 63 | 0x7ffULL << 52 | (uint64_t)man << (52 - mbits);
        double d;
        memcpy(&d, &u, sizeof(d));
        return d;
    }
    if (exp == 0) return sign * ldexp((double)man, 1 - bias - mbits);
    const uint64_t u = (uint64_t)((h >> (ebits + mbits)) & 1) << 63 | (uint64_t)((int)exp - bias + 1023) << 52 |
                       (uint64_t)man << (52 - mbits);
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

double pardo_f16_to_f64(uint16_t h) { return decode(h, 5, 10); }
uint16_t pardo_f16_from_f64(double v) { return encode(v, 5, 10); }
double pardo_bf16_to_f64(uint16_t h) { return decode(h, 8, 7); }
uint16_t pardo_bf16_from_f64(double v) { return encode(v, 8, 7); }
