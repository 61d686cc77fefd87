/* check_half.c - float16 and bfloat16 conversions (core/half.h), each bit
 * pattern and each rounding case against a reference written here: values
 * from the formats' definitions, nearest by search over the sorted finite
 * values, ties to the even pattern. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check_suites.h"
#include "core/half.h"

/* The value a format's bits encode, from the definition. */
static double ref_value(uint16_t h, int ebits, int mbits) {
    const int bias = (1 << (ebits - 1)) - 1, all = (1 << ebits) - 1;
    const int e = (h >> mbits) & all, m = h & ((1 << mbits) - 1);
    const double s = (h >> (ebits + mbits)) ? -1.0 : 1.0;
    if (e == all) return m ? (double)NAN : s * HUGE_VAL;
    if (e == 0) return s * pow(2.0, 1 - bias) * ((double)m / (double)(1 << mbits));
    return s * pow(2.0, e - bias) * (1.0 + (double)m / (double)(1 << mbits));
}

/* The bits nearest v, by binary search over the non-negative finite
 * patterns (whose values increase with the pattern); the pattern past the
 * largest finite one (Inf) counts as the next power of two, so that values
 * from the midpoint up round to Inf. */
static uint16_t ref_nearest(double v, int ebits, int mbits) {
    const uint16_t sign = signbit(v) ? (uint16_t)(1u << (ebits + mbits)) : 0;
    const uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    const double a = fabs(v);
    const double past = ldexp(1.0, (1 << (ebits - 1))); /* 2^(emax + 1) */
    uint32_t lo = 0, hi = inf; /* value(lo) <= a < value(hi) once a >= 0 and a < past */
    if (a >= past) return sign | inf;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (ref_value((uint16_t)mid, ebits, mbits) <= a) lo = mid;
        else hi = mid;
    }
    const double vl = ref_value((uint16_t)lo, ebits, mbits);
    const double vh = hi == inf ? past : ref_value((uint16_t)hi, ebits, mbits);
    uint32_t r;
    if (a - vl < vh - a) r = lo;
    else if (a - vl > vh - a) r = hi;
    else r = (lo & 1) ? hi : lo;
    return (uint16_t)(sign | r);
}

typedef struct fmt {
    const char *name;
    int ebits, mbits;
    double (*to)(uint16_t);
    uint16_t (*from)(double);
} fmt;

static const fmt fmts[2] = {
    {"float16", 5, 10, pardo_f16_to_f64, pardo_f16_from_f64},
    {"bfloat16", 8, 7, pardo_bf16_to_f64, pardo_bf16_from_f64},
};

START_TEST(every_pattern_decodes_and_round_trips) {
    const fmt *f = &fmts[_i];
    for (uint32_t b = 0; b < 65536; b++) {
        const uint16_t h = (uint16_t)b;
        const double want = ref_value(h, f->ebits, f->mbits), got = f->to(h);
        if (isnan(want)) {
            ck_assert_msg(isnan(got), "%s %04x: %g, expected NaN", f->name, b, got);
            const uint16_t back = f->from(got); /* NaN stays NaN, sign kept */
            ck_assert_msg(isnan(f->to(back)) && (back >> 15) == (b >> 15), "%s %04x: NaN back as %04x", f->name, b,
                          back);
            continue;
        }
        ck_assert_msg(got == want && signbit(got) == signbit(want), "%s %04x: %.17g, expected %.17g", f->name, b, got,
                      want);
        ck_assert_msg(f->from(got) == h, "%s %04x: back as %04x", f->name, b, f->from(got));
    }
}
END_TEST

START_TEST(rounding_matches_the_nearest_ties_to_even) {
    const fmt *f = &fmts[_i];
    const uint16_t inf = (uint16_t)(((1u << f->ebits) - 1) << f->mbits);
    for (uint32_t b = 0; b < inf; b++) { /* every gap between neighbours: its midpoint and just either side */
        const double lo = ref_value((uint16_t)b, f->ebits, f->mbits);
        const double hi = b + 1 == inf ? ldexp(1.0, 1 << (f->ebits - 1)) : ref_value((uint16_t)(b + 1), f->ebits,
                                                                                     f->mbits);
        const double mid = lo + (hi - lo) / 2; /* exact: a few significant bits */
        const double probes[5] = {mid, nextafter(mid, 0.0), nextafter(mid, HUGE_VAL), -mid, lo + (hi - lo) / 4};
        for (int k = 0; k < 5; k++) {
            const uint16_t want = ref_nearest(probes[k], f->ebits, f->mbits), got = f->from(probes[k]);
            ck_assert_msg(got == want, "%s of %.17g: %04x, expected %04x", f->name, probes[k], got, want);
        }
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL; /* random doubles over the whole exponent range */
    for (int k = 0; k < 200000; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v;
        memcpy(&v, &x, sizeof(v));
        if (isnan(v)) continue;
        const uint16_t want = ref_nearest(v, f->ebits, f->mbits), got = f->from(v);
        ck_assert_msg(got == want, "%s of %.17g: %04x, expected %04x", f->name, v, got, want);
    }
}
END_TEST

/* The inline float conversions agree with the double ones bit for bit: every pattern decoded, and floats
 * encoded over a stride through all 2^32 patterns plus each float16 gap's midpoint and neighbours. */
static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float ffrom(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* True when both float conversions agree with the double ones on f (no ck_assert here: Check reports each
 * assertion to its parent, too slow for millions of probes). */
static bool same_encoding(float f) {
    return pardo_f16_from_f32(f) == pardo_f16_from_f64((double)f) &&
           pardo_bf16_from_f32(f) == pardo_bf16_from_f64((double)f);
}

#define EXPECT_SAME(f)                                                                                                 \
    do {                                                                                                               \
        const float f_ = (f);                                                                                          \
        if (!same_encoding(f_))                                                                                        \
            ck_abort_msg("%a (%08x): float16 %04x / %04x, bfloat16 %04x / %04x (inline / double)", (double)f_,         \
                         fbits(f_), pardo_f16_from_f32(f_), pardo_f16_from_f64((double)f_), pardo_bf16_from_f32(f_),  \
                         pardo_bf16_from_f64((double)f_));                                                             \
    } while (0)

START_TEST(float_versions_match_the_double_ones) {
    for (uint32_t b = 0; b < 65536; b++) {
        const uint16_t h = (uint16_t)b;
        const double x = pardo_f16_to_f64(h), y = pardo_bf16_to_f64(h);
        const float fx = pardo_f16_to_f32(h), fy = pardo_bf16_to_f32(h);
        if (!(isnan(x) ? isnan(fx) && !signbit(fx) == !signbit(x) : fbits(fx) == fbits((float)x)))
            ck_abort_msg("float16 %04x: inline %a, double %a", b, (double)fx, x);
        if (!(isnan(y) ? isnan(fy) && !signbit(fy) == !signbit(y) : fbits(fy) == fbits((float)y)))
            ck_abort_msg("bfloat16 %04x: inline %a, double %a", b, (double)fy, y);
        if (b < 0x7c00) { /* the gap above this float16: its midpoint and the floats either side */
            const double next = b + 1 == 0x7c00 ? 65536.0 : pardo_f16_to_f64((uint16_t)(b + 1));
            const float mid = (float)(x + (next - x) / 2);
            const float probes[4] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, HUGE_VALF), -mid};
            for (int k = 0; k < 4; k++) EXPECT_SAME(probes[k]);
        }
    }
    for (uint64_t u = 0; u <= 0xffffffffULL; u += 257) EXPECT_SAME(ffrom((uint32_t)u)); /* NaNs too */
    const uint32_t edges[] = {0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x477fefffu, 0x477ff000u, 0x47800000u,
                              0x387fffffu, 0x38800000u, 0x33000000u, 0x33000001u, 0x7fc00001u, 0xff800001u};
    for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++) {
        EXPECT_SAME(ffrom(edges[k]));
        EXPECT_SAME(ffrom(edges[k] ^ 0x80000000u));
    }
}
END_TEST

/* Values worked by hand, including a double whose rounding through float32 first would differ. */
START_TEST(hand_values) {
    ck_assert_uint_eq(pardo_f16_from_f64(1.0), 0x3c00);
    ck_assert_uint_eq(pardo_f16_from_f64(-2.0), 0xc000);
    ck_assert_uint_eq(pardo_f16_from_f64(65504.0), 0x7bff);
    ck_assert_uint_eq(pardo_f16_from_f64(65519.99), 0x7bff);
    ck_assert_uint_eq(pardo_f16_from_f64(65520.0), 0x7c00);    /* the tie with 2^16 goes to Inf (even) */
    ck_assert_uint_eq(pardo_f16_from_f64(ldexp(1.0, -24)), 0x0001); /* the smallest subnormal */
    ck_assert_uint_eq(pardo_f16_from_f64(ldexp(1.0, -25)), 0x0000); /* half of it: a tie, to even 0 */
    ck_assert_uint_eq(pardo_f16_from_f64(-ldexp(1.0, -25)), 0x8000);
    ck_assert_uint_eq(pardo_f16_from_f64(ldexp(1.5, -25)), 0x0001);
    ck_assert_uint_eq(pardo_f16_from_f64(1.0 + ldexp(1.0, -11)), 0x3c00); /* tie: even 1.0 */
    ck_assert_uint_eq(pardo_f16_from_f64(1.0 + 3 * ldexp(1.0, -11)), 0x3c02); /* tie: even 1 + 2^-9 */
    ck_assert_uint_eq(pardo_f16_from_f64(HUGE_VAL), 0x7c00);
    ck_assert_uint_eq(pardo_f16_from_f64(-HUGE_VAL), 0xfc00);
    ck_assert_uint_eq(pardo_f16_from_f64(NAN) & 0x7e00, 0x7e00);
    ck_assert_uint_eq(pardo_f16_from_f32(0.1f), 0x2e66);
    ck_assert(pardo_f16_to_f32(0x2e66) == 0.0999755859375f);
    ck_assert_uint_eq(pardo_bf16_from_f64(1.0), 0x3f80);
    ck_assert_uint_eq(pardo_bf16_from_f32(0.1f), 0x3dcd); /* 0x3dcccccd: rounds up */
    ck_assert_uint_eq(pardo_bf16_from_f64(1.0 + ldexp(1.0, -8)), 0x3f80); /* tie: even 1.0 */
    /* just above the tie: 0x3f81; through float32 first it would be the tie itself, and 1.0 */
    ck_assert_uint_eq(pardo_bf16_from_f64(1.0 + ldexp(1.0, -8) + ldexp(1.0, -40)), 0x3f81);
    ck_assert_uint_eq(pardo_bf16_from_f64(3.4e38), 0x7f80); /* past the largest, 0x7f7f (3.39e38), by over half */
    ck_assert_uint_eq(pardo_bf16_from_f64(3.38e38), 0x7f7e);
    ck_assert(pardo_bf16_to_f64(0x7f7f) == 0x1.fep127);
    ck_assert_uint_eq(pardo_bf16_from_f64(-HUGE_VAL), 0xff80);
    ck_assert_uint_eq(pardo_bf16_from_f32(-NAN) & 0xffc0, 0xffc0);
}
END_TEST

Suite *make_half_suite(void) {
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("Core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, every_pattern_decodes_and_round_trips, 0, 2);
    tcase_add_loop_test(tc, rounding_matches_the_nearest_ties_to_even, 0, 2);
    tcase_add_test(tc, float_versions_match_the_double_ones);
    tcase_add_test(tc, hand_values);
    suite_add_tcase(s, tc);
    return s;
}
