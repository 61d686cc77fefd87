/* check_vmath.c - ops/vmath.h's float32 exp (and its no-overflow form against it), erfc, gelu, gelu' and sigmoid
 * against libm in double, over dense sweeps of the float range and at the
 * special values (0, +-inf, NaN, the overflow and underflow edges). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check_suites.h"
#include "vmath.h"

/* Distance in ulps of float got from the double reference want (want
 * rounded to float first; both finite). */
static double ulps(float got, double want) {
    const float w = (float)want;
    if (got == w) return 0;
    const double ulp = fabs((double)nextafterf(w, INFINITY) - (double)w);
    return fabs((double)got - want) / (ulp > 0 ? ulp : (double)FLT_TRUE_MIN);
}

/* Visits floats from lo to hi, n evenly spaced values and their neighbours. */
#define SWEEP(x, lo, hi, n)                                                                                            \
    for (int i_ = 0; i_ <= (n); i_++)                                                                                  \
        for (int k_ = -1; k_ <= 1; k_++)                                                                               \
            for (float x = k_ == 0 ? (float)((lo) + ((hi) - (lo)) * i_ / (double)(n))                                   \
                                   : nextafterf((float)((lo) + ((hi) - (lo)) * i_ / (double)(n)), k_ * INFINITY),       \
                       once_ = 1;                                                                                      \
                 once_; once_ = 0)

START_TEST(test_exp_accuracy) {
    double worst = 0, at = 0;
    SWEEP(x, -103.0, 88.7, 400000) {
        const double want = exp((double)x);
        if (want < (double)FLT_MIN) { /* subnormal results: within one subnormal step */
            ck_assert_double_le(fabs((double)pardo_vexpf(x) - want), (double)FLT_TRUE_MIN);
            continue;
        }
        const double u = ulps(pardo_vexpf(x), want);
        if (u > worst) worst = u, at = (double)x;
    }
    ck_assert_msg(worst <= 2.0, "pardo_vexpf is %.2f ulp off at x = %.9g", worst, at);
}
END_TEST

START_TEST(test_exp_special) {
    ck_assert_double_eq((double)pardo_vexpf(0.0f), (double)1.0f);
    ck_assert_double_eq((double)pardo_vexpf(-0.0f), (double)1.0f);
    ck_assert(isinf((double)pardo_vexpf(89.0f)) && pardo_vexpf(89.0f) > 0);
    ck_assert(isinf((double)pardo_vexpf(INFINITY)));
    ck_assert(isinf((double)pardo_vexpf(1e30f)));
    ck_assert_double_eq((double)pardo_vexpf(-INFINITY), (double)0.0f);
    ck_assert_double_eq((double)pardo_vexpf(-104.0f), (double)0.0f);
    ck_assert_double_eq((double)pardo_vexpf(-1e30f), (double)0.0f);
    ck_assert(isnan((double)pardo_vexpf(NAN)));
    ck_assert(isfinite((double)pardo_vexpf(88.72f)) && pardo_vexpf(88.72f) > 3.3e38f); /* just below FLT_MAX */
    ck_assert(pardo_vexpf(-87.0f) >= FLT_MIN);                                 /* normal */
    ck_assert(pardo_vexpf(-100.0f) > 0 && pardo_vexpf(-100.0f) < FLT_MIN);     /* subnormal */
}
END_TEST

/* pardo_vexpf2_noover gives pardo_vexpf2's bits wherever it is used (hi <= 0, |lo| <= 2), through the
 * underflow edge and past the clamp at -110, and keeps NaN. */
START_TEST(test_exp_noover_matches) {
    int64_t differ = 0;
    float at_hi = 0, at_lo = 0;
    SWEEP(hi, -130.0, 0.0, 20000) {
        for (int j = -8; j <= 8; j++) {
            const float lo = (float)j / 4.0f + (j % 3) * 1e-7f;
            const float a = pardo_vexpf2_noover(hi, lo), b = pardo_vexpf2(hi, lo);
            if (memcmp(&a, &b, sizeof a) != 0) differ++, at_hi = hi, at_lo = lo;
        }
    }
    ck_assert_msg(differ == 0, "%lld pairs differ, e.g. hi = %.9g, lo = %.9g", (long long)differ, (double)at_hi,
                  (double)at_lo);
    ck_assert(isnan((double)pardo_vexpf2_noover(NAN, 0.0f)));
    ck_assert(isnan((double)pardo_vexpf2_noover(-1.0f, NAN)));
    ck_assert_double_eq((double)pardo_vexpf2_noover(-INFINITY, 1.0f), 0.0);
}
END_TEST

START_TEST(test_erfc_accuracy) {
    double worst = 0, at = 0;
    SWEEP(x, -10.0, 10.0, 400000) {
        const double want = erfc((double)x);
        if (want < 1e-30) continue;
        const double rel = fabs((double)pardo_verfcf(x) - want) / want;
        if (rel > worst) worst = rel, at = (double)x;
    }
    ck_assert_msg(worst <= 1e-6, "pardo_verfcf is %.3g relative off at x = %.9g", worst, at);
    ck_assert_double_eq((double)pardo_verfcf(INFINITY), (double)0.0f);
    ck_assert_double_eq((double)pardo_verfcf(-INFINITY), (double)2.0f);
    ck_assert_double_eq((double)pardo_verfcf(100.0f), (double)0.0f);
    ck_assert(isnan((double)pardo_verfcf(NAN)));
}
END_TEST

START_TEST(test_gelu_and_sigmoid) {
    double worst_g = 0, worst_d = 0, worst_s = 0;
    SWEEP(x, -12.0, 12.0, 200000) {
        const double xd = (double)x, cdf = 0.5 * erfc(-xd / sqrt(2.0)), pdf = exp(-0.5 * xd * xd) / sqrt(2.0 * M_PI);
        const double g = xd * cdf, d = cdf + xd * pdf, s = 1.0 / (1.0 + exp(-xd));
        /* relative (gelu: absolute 1e-30 below it; gelu' = cdf + x pdf: to cdf where it crosses 0) */
        const double eg = fabs((double)pardo_vgeluf(x) - g) / fmax(fabs(g), 1e-30);
        const double ed = fabs((double)pardo_vgelu_gradf(x) - d) / fmax(fabs(d), cdf); /* its larger term */
        const double es = fabs((double)pardo_vsigmoidf(x) - s) / s;
        worst_g = fmax(worst_g, eg);
        worst_d = fmax(worst_d, ed);
        worst_s = fmax(worst_s, es);
    }
    ck_assert_msg(worst_g <= 2e-6, "gelu %.3g relative off", worst_g);
    ck_assert_msg(worst_d <= 2e-6, "gelu' %.3g off", worst_d);
    ck_assert_msg(worst_s <= 5e-7, "sigmoid %.3g relative off", worst_s);
    ck_assert_double_eq((double)pardo_vgeluf(0.0f), (double)0.0f);
    ck_assert_double_eq((double)pardo_vgeluf(1000.0f), (double)1000.0f);
    ck_assert_double_eq((double)pardo_vgeluf(-1000.0f), (double)0.0f);
    ck_assert(isinf((double)pardo_vgeluf(INFINITY)));
    ck_assert(isnan((double)pardo_vgeluf(NAN)));
    ck_assert_double_eq((double)pardo_vgelu_gradf(1000.0f), (double)1.0f);
    ck_assert_double_eq((double)pardo_vgelu_gradf(-1000.0f), (double)0.0f);
    ck_assert_double_eq((double)pardo_vsigmoidf(0.0f), (double)0.5f);
    ck_assert_double_eq((double)pardo_vsigmoidf(200.0f), (double)1.0f);
    ck_assert_double_eq((double)pardo_vsigmoidf(-200.0f), (double)0.0f);
    ck_assert(isnan((double)pardo_vsigmoidf(NAN)));
}
END_TEST

Suite *make_vmath_suite(void) {
    Suite *s = suite_create("vmath");
    TCase *c = tcase_create("Core");
    tcase_add_test(c, test_exp_accuracy);
    tcase_add_test(c, test_exp_special);
    tcase_add_test(c, test_exp_noover_matches);
    tcase_add_test(c, test_erfc_accuracy);
    tcase_add_test(c, test_gelu_and_sigmoid);
    suite_add_tcase(s, c);
    return s;
}
