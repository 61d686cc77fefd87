/* check_ops_math.c - the math family (ops/math.c) against naive loops in
 * double: the unary float ops against libm, round's halves to even, sign of
 * every dtype, the variadic max, min, sum and mean over broadcast inputs
 * (ints and NaN too), mod with both fmod settings and mixed signs, cumsum
 * (axes, exclusive, reverse, the axis as an input), hardmax, det
 * (against cofactor expansion) and einsum (ops/einsum.c); the gradients against float64 finite
 * differences; the refusals. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/half.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef double (*dfn)(double);

static const struct {
    const char *op;
    dfn f;
    double lo, hi; /* the domain sampled */
    bool grad;
} unary_cases[] = {
    {"floor", floor, -5, 5, false}, {"ceil", ceil, -5, 5, false},  {"sin", sin, -4, 4, true},
    {"cos", cos, -4, 4, true},      {"tan", tan, -1.2, 1.2, true}, {"asin", asin, -0.9, 0.9, true},
    {"acos", acos, -0.9, 0.9, true}, {"atan", atan, -4, 4, true},  {"sinh", sinh, -3, 3, true},
    {"cosh", cosh, -3, 3, true},    {"asinh", asinh, -4, 4, true}, {"acosh", acosh, 1.1, 5, true},
    {"atanh", atanh, -0.9, 0.9, true},
};

static double recip(double v) { return 1 / v; }

static void check_unary(const char *op, dfn f, double lo, double hi) {
    test_rng r = {11};
    int64_t shape[2] = {3, 7};
    for (int t = 0; t < 2; t++) {
        const pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
        pardo_tensor *x = test_tensor_random(&r, dt, 2, shape, lo, hi), *y = NULL;
        pardo_status st;
        ck_assert_msg(test_run_op(op, NULL, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", op, st.msg);
        ck_assert_int_eq(y->dtype, dt);
        for (int64_t i = 0; i < x->numel; i++) {
            const double want = f(pardo_tensor_get_f64(x, i)), got = pardo_tensor_get_f64(y, i);
            ck_assert_msg(fabs(got - want) <= (t ? 1e-14 : 1e-6) * fmax(1, fabs(want)),
                          "%s %s[%lld]: %.17g, want %.17g", op, pardo_dtype_name(dt), (long long)i, got, want);
        }
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
}

START_TEST(test_unary_against_libm) {
    for (int c = 0; c < LEN(unary_cases); c++) check_unary(unary_cases[c].op, unary_cases[c].f, unary_cases[c].lo,
                                                           unary_cases[c].hi);
    check_unary("reciprocal", recip, 0.5, 4);
}
END_TEST

START_TEST(test_round_half_to_even) {
    const double v[8] = {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 3.5000001};
    const double want[8] = {0, 2, 2, -0.0, -2, 2, -3, 4};
    for (int t = 0; t < 2; t++) {
        pardo_tensor *x = test_tensor_from(t ? PARDO_F64 : PARDO_F32, 1, (int64_t[]){8}, v), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("round", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        for (int i = 0; i < 8; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), want[i]);
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_sign_dtypes) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    const double v[5] = {-3, 0, 2, -1, 7};
    for (int t = 0; t < LEN(dts); t++) {
        pardo_tensor *x = test_tensor_from(dts[t], 1, (int64_t[]){5}, v), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("sign", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        ck_assert_int_eq(y->dtype, dts[t]);
        for (int i = 0; i < 5; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), v[i] > 0 ? 1 : v[i] < 0 ? -1 : 0);
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
}
END_TEST

/* Inputs of shapes [2, 3, 4], [3, 1] and [4]: element (i, j, k) of each. */
static double at3(const pardo_tensor *a, const pardo_tensor *b, const pardo_tensor *c, int w, int i, int j, int k) {
    (void)a;
    (void)b;
    (void)c;
    if (w == 0) return pardo_tensor_get_f64(a, (i * 3 + j) * 4 + k);
    if (w == 1) return pardo_tensor_get_f64(b, j);
    return pardo_tensor_get_f64(c, k);
}

START_TEST(test_variadic_broadcast) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    static const char *const ops[] = {"max", "min", "sum", "mean"};
    test_rng r = {5};
    for (int t = 0; t < LEN(dts); t++) {
        pardo_tensor *in[3] = {test_tensor_random(&r, dts[t], 3, (int64_t[]){2, 3, 4}, -9, 9),
                               test_tensor_random(&r, dts[t], 2, (int64_t[]){3, 1}, -9, 9),
                               test_tensor_random(&r, dts[t], 1, (int64_t[]){4}, -9, 9)};
        for (int o = 0; o < 4; o++) {
            if (o == 3 && t >= 2) continue; /* mean: floats */
            pardo_tensor *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op(ops[o], NULL, 3, in, 1, &y, &st) == PARDO_OK, "%s: %s", ops[o], st.msg);
            ck_assert_int_eq(y->ndim, 3);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++)
                    for (int k = 0; k < 4; k++) {
                        double want = at3(in[0], in[1], in[2], 0, i, j, k);
                        for (int w = 1; w < 3; w++) {
                            const double v = at3(in[0], in[1], in[2], w, i, j, k);
                            want = o == 0 ? fmax(want, v) : o == 1 ? fmin(want, v) : want + v;
                        }
                        if (o == 3) want /= 3;
                        const double got = pardo_tensor_get_f64(y, (i * 3 + j) * 4 + k);
                        ck_assert_msg(fabs(got - want) <= 1e-5 * fmax(1, fabs(want)), "%s %s: %g, want %g", ops[o],
                                      pardo_dtype_name(dts[t]), got, want);
                    }
            pardo_tensor_release(y);
        }
        for (int k = 0; k < 3; k++) pardo_tensor_release(in[k]);
    }
    /* one input: a copy; NaN wins */
    pardo_tensor *a = test_tensor_from(PARDO_F32, 1, (int64_t[]){3}, (double[]){1, NAN, 3});
    pardo_tensor *b = test_tensor_from(PARDO_F32, 1, (int64_t[]){3}, (double[]){NAN, 2, 1});
    pardo_tensor *in[2] = {a, b}, *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("max", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert(isnan(pardo_tensor_get_f64(y, 0)) && isnan(pardo_tensor_get_f64(y, 1)));
    ck_assert_double_eq(pardo_tensor_get_f64(y, 2), 3);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("min", NULL, 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 2), 3);
    pardo_tensor_release(y);
    pardo_tensor_release(b);
    pardo_tensor_release(a);
}
END_TEST

/* Inputs of one shape take the contiguous path, in chunks over 2 threads past 32K elements: the same
 * values as the naive fold, for every dtype and op. */
START_TEST(test_variadic_same_shape) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    static const char *const ops[] = {"max", "min", "sum", "mean"};
    test_rng r = {6};
    const int64_t n = 40000;
    for (int t = 0; t < LEN(dts); t++) {
        pardo_tensor *in[3];
        for (int k = 0; k < 3; k++) in[k] = test_tensor_random(&r, dts[t], 1, &n, -50, 50);
        for (int o = 0; o < 4; o++) {
            if (o == 3 && t >= 2) continue;
            pardo_tensor *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op_threads(ops[o], NULL, 3, in, 1, &y, 2, &st) == PARDO_OK, "%s", st.msg);
            for (int64_t i = 0; i < n; i++) {
                double want = pardo_tensor_get_f64(in[0], i);
                for (int k = 1; k < 3; k++) {
                    const double v = pardo_tensor_get_f64(in[k], i);
                    want = o == 0 ? fmax(want, v) : o == 1 ? fmin(want, v) : want + v;
                }
                if (o == 3) want /= 3;
                ck_assert_msg(fabs(pardo_tensor_get_f64(y, i) - want) <= 1e-4 * fmax(1, fabs(want)), "%s %s [%lld]",
                              ops[o], pardo_dtype_name(dts[t]), (long long)i);
            }
            pardo_tensor_release(y);
        }
        for (int k = 0; k < 3; k++) pardo_tensor_release(in[k]);
    }
}
END_TEST

static double naive_mod(double a, double b, bool fm) {
    if (fm) return fmod(a, b);
    double r = fmod(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

START_TEST(test_mod_signs) {
    const double av[6] = {-4, 7, 5, -4, 7, -9}, bv[6] = {2, -3, 8, -2, 3, 4};
    for (int fm = 0; fm < 2; fm++) {
        static const pardo_dtype dts[] = {PARDO_I32, PARDO_I64, PARDO_F32, PARDO_F64};
        for (int t = 0; t < LEN(dts); t++) {
            if (!fm && t >= 2) continue; /* floats need fmod 1 */
            pardo_tensor *a = test_tensor_from(dts[t], 1, (int64_t[]){6}, av);
            pardo_tensor *b = test_tensor_from(dts[t], 1, (int64_t[]){6}, bv);
            pardo_tensor *in[2] = {a, b}, *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("mod", fm ? "{\"fmod\": 1}" : NULL, 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
            for (int i = 0; i < 6; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), naive_mod(av[i], bv[i], fm));
            pardo_tensor_release(y);
            pardo_tensor_release(b);
            pardo_tensor_release(a);
        }
    }
    /* broadcast: [2, 3] mod [3] */
    pardo_tensor *a = test_tensor_from(PARDO_I64, 2, (int64_t[]){2, 3}, (double[]){-7, 8, 9, 10, -11, 12});
    pardo_tensor *b = test_tensor_from(PARDO_I64, 1, (int64_t[]){3}, (double[]){3, -5, 7});
    pardo_tensor *in[2] = {a, b}, *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("mod", NULL, 2, in, 1, &y, &st), PARDO_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq(pardo_tensor_get_f64(y, i),
                            naive_mod(pardo_tensor_get_f64(a, i), pardo_tensor_get_f64(b, i % 3), false));
    pardo_tensor_release(y);
    pardo_tensor_release(b);
    pardo_tensor_release(a);
}
END_TEST

/* ---- max, min, sum, mod on the narrow and unsigned ints, float16, bfloat16 ---- */

static const pardo_dtype narrow_dtypes[] = {PARDO_U8,  PARDO_I8,  PARDO_I16, PARDO_U16,
                                            PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};

/* Element i's bytes as 64 bits, sign-extended for the signed ints. */
static uint64_t bits_at(const pardo_tensor *t, int64_t i) {
    const size_t es = pardo_dtype_size(t->dtype);
    uint64_t v = 0;
    memcpy(&v, (const char *)pardo_tensor_data(t) + (size_t)i * es, es);
    if ((t->dtype == PARDO_I8 || t->dtype == PARDO_I16) && (v >> (8 * es - 1)) & 1) v |= ~0ULL << (8 * es);
    return v;
}

/* True when element value b (bits) beats a for max (is_max) or min: ints by their signed or unsigned value,
 * halves by the value they encode, the first NaN winning. */
static bool ref_beats(pardo_dtype dt, uint64_t b, uint64_t a, bool is_max) {
    if (pardo_dtype_is_half(dt)) {
        const double x = dt == PARDO_F16 ? pardo_f16_to_f64((uint16_t)b) : pardo_bf16_to_f64((uint16_t)b);
        const double y = dt == PARDO_F16 ? pardo_f16_to_f64((uint16_t)a) : pardo_bf16_to_f64((uint16_t)a);
        if (isnan(y)) return false;
        return isnan(x) || (is_max ? x > y : x < y);
    }
    if (pardo_dtype_is_unsigned(dt)) return is_max ? b > a : b < a;
    return is_max ? (int64_t)b > (int64_t)a : (int64_t)b < (int64_t)a;
}

static pardo_tensor *bytes_tensor(test_rng *r, pardo_dtype dt, int nd, const int64_t *shape) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, nd, shape, &st);
    ck_assert_ptr_nonnull(t);
    for (size_t b = 0; b < t->nbytes; b++) ((uint8_t *)pardo_tensor_data(t))[b] = (uint8_t)test_rng_next(r);
    if (pardo_dtype_is_half(dt))
        for (int64_t i = 0; i < t->numel; i++)
            if (i != 1 && !isfinite(pardo_tensor_get_f64(t, i))) ((uint16_t *)pardo_tensor_data(t))[i] &= 0xbfff;
    return t;
}

START_TEST(test_narrow_dtypes_max_min_sum_mod) {
    test_rng r = {77};
    for (int t = 0; t < LEN(narrow_dtypes); t++) {
        const pardo_dtype dt = narrow_dtypes[t];
        const size_t es = pardo_dtype_size(dt);
        pardo_tensor *in[3] = {bytes_tensor(&r, dt, 3, (int64_t[]){2, 3, 4}),
                               bytes_tensor(&r, dt, 2, (int64_t[]){3, 1}), bytes_tensor(&r, dt, 1, (int64_t[]){4})};
        if (pardo_dtype_is_half(dt)) pardo_tensor_set_f64(in[0], 1, NAN); /* NaN wins */
        for (int o = 0; o < 3; o++) {
            if (o == 2 && pardo_dtype_is_half(dt)) continue; /* sum: not the halves */
            const char *op = o == 0 ? "max" : o == 1 ? "min" : "sum";
            pardo_tensor *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op(op, NULL, 3, in, 1, &y, &st) == PARDO_OK, "%s %s: %s", op, pardo_dtype_name(dt),
                          st.msg);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++)
                    for (int k = 0; k < 4; k++) {
                        const uint64_t v[3] = {bits_at(in[0], (i * 3 + j) * 4 + k), bits_at(in[1], j),
                                               bits_at(in[2], k)};
                        uint64_t want = v[0];
                        for (int w = 1; w < 3; w++)
                            if (o == 2) want += v[w];
                            else if (ref_beats(dt, v[w], want, o == 0)) want = v[w];
                        if (es < 8) want &= (1ULL << (8 * es)) - 1;
                        uint64_t got = bits_at(y, (i * 3 + j) * 4 + k);
                        if (es < 8) got &= (1ULL << (8 * es)) - 1;
                        ck_assert_msg(got == want, "%s %s [%d %d %d]: %llx, expected %llx", op, pardo_dtype_name(dt), i,
                                      j, k, (unsigned long long)got, (unsigned long long)want);
                    }
            pardo_tensor_release(y);
        }
        /* mod of in[0] by in[2] (zeros made 7), fmod 0 and 1 for the ints, 1 for the halves */
        for (int64_t k = 0; k < 4; k++)
            if (!pardo_dtype_is_half(dt) && bits_at(in[2], k) == 0) pardo_tensor_set_f64(in[2], k, 7);
        pardo_tensor *ab[2] = {in[0], in[2]};
        for (int fm = pardo_dtype_is_half(dt) ? 1 : 0; fm < 2; fm++) {
            pardo_tensor *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("mod", fm ? "{\"fmod\": 1}" : NULL, 2, ab, 1, &y, &st) == PARDO_OK, "%s", st.msg);
            for (int64_t e = 0; e < 24; e++) {
                const double a = pardo_tensor_get_f64(in[0], e), b = pardo_tensor_get_f64(in[2], e % 4);
                if (pardo_dtype_is_half(dt)) {
                    const double want = fmod(a, b), got = pardo_tensor_get_f64(y, e);
                    ck_assert_msg((isnan(want) && isnan(got)) || got == want, "mod %s: %g mod %g = %g, expected %g",
                                  pardo_dtype_name(dt), a, b, got, want);
                } else if (dt == PARDO_U64 || dt == PARDO_U32) {
                    ck_assert_uint_eq(bits_at(y, e), bits_at(in[0], e) % bits_at(in[2], e % 4));
                } else {
                    ck_assert_double_eq(pardo_tensor_get_f64(y, e), naive_mod(a, b, fm));
                }
            }
            pardo_tensor_release(y);
        }
        for (int k = 0; k < 3; k++) pardo_tensor_release(in[k]);
    }
    /* sum of the halves and fmod 0 on them are refused */
    pardo_status st;
    pardo_type h = test_type(PARDO_F16, 1, (int64_t[]){2}), out;
    const pardo_type *hh[2] = {&h, &h};
    ck_assert_int_eq(test_infer_op("sum", NULL, 2, hh, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float16"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("mod", NULL, 2, hh, 1, &out, &st), PARDO_EINVAL);
}
END_TEST

/* cumsum of a [3, 4] tensor against a naive loop, every axis, exclusive and reverse. */
START_TEST(test_cumsum_forms) {
    test_rng r = {9};
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_U32, PARDO_U64};
    for (int t = 0; t < LEN(dts); t++) {
        pardo_tensor *x = test_tensor_random(&r, dts[t], 2, (int64_t[]){3, 4}, t >= 4 ? 0 : -5, 5);
        for (int axis = -2; axis < 2; axis++)
            for (int f = 0; f < 4; f++) {
                const bool excl = f & 1, rev = f & 2;
                char attrs[128];
                snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"exclusive\": %s, \"reverse\": %s}", axis,
                         excl ? "true" : "false", rev ? "true" : "false");
                pardo_tensor *y = NULL;
                pardo_status st;
                ck_assert_msg(test_run_op("cumsum", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
                const int a = axis < 0 ? axis + 2 : axis;
                for (int i = 0; i < 3; i++)
                    for (int j = 0; j < 4; j++) {
                        double want = 0;
                        const int pos = a == 0 ? i : j, n = a == 0 ? 3 : 4;
                        for (int k = 0; k < n; k++) {
                            const bool in = rev ? (excl ? k > pos : k >= pos) : (excl ? k < pos : k <= pos);
                            if (in) want += pardo_tensor_get_f64(x, a == 0 ? k * 4 + j : i * 4 + k);
                        }
                        ck_assert_msg(fabs(pardo_tensor_get_f64(y, i * 4 + j) - want) <= 1e-5, "%s %s", attrs,
                                      pardo_dtype_name(dts[t]));
                    }
                pardo_tensor_release(y);
            }
        pardo_tensor_release(x);
    }
    /* the unsigned sums wrap */
    pardo_tensor *u = test_tensor_from(PARDO_U32, 1, (int64_t[]){3}, (double[]){4294967295.0, 2, 1}), *uy = NULL;
    pardo_status ust;
    ck_assert_int_eq(test_run_op("cumsum", NULL, 1, &u, 1, &uy, &ust), PARDO_OK);
    const uint32_t *pu = pardo_tensor_data(uy);
    ck_assert(pu[0] == 4294967295u && pu[1] == 1 && pu[2] == 2);
    pardo_tensor_release(uy);
    pardo_tensor_release(u);
    /* the axis as an int32 input read at run time */
    pardo_tensor *x = test_tensor_from(PARDO_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    pardo_tensor *ax = test_tensor_from(PARDO_I32, 0, NULL, (double[]){1}), *in[2] = {x, ax}, *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("cumsum", NULL, 2, in, 1, &y, &st), PARDO_OK);
    static const double want[4] = {1, 3, 3, 7};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), want[i]);
    pardo_tensor_release(y);
    pardo_tensor_release(ax);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_hardmax_axes) {
    test_rng r = {4};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 3, (int64_t[]){2, 3, 4}, -1, 1);
    for (int axis = 0; axis < 3; axis++) {
        char attrs[32];
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", axis);
        pardo_tensor *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("hardmax", attrs, 1, &x, 1, &y, &st), PARDO_OK);
        const int64_t dims[3] = {2, 3, 4}, str[3] = {12, 4, 1};
        for (int64_t e = 0; e < 24; e++) {
            const int64_t pos = e / str[axis] % dims[axis], base = e - pos * str[axis];
            int64_t best = 0;
            for (int64_t k = 1; k < dims[axis]; k++)
                if (pardo_tensor_get_f64(x, base + k * str[axis]) > pardo_tensor_get_f64(x, base + best * str[axis]))
                    best = k;
            ck_assert_double_eq(pardo_tensor_get_f64(y, e), pos == best ? 1 : 0);
        }
        pardo_tensor_release(y);
    }
    pardo_tensor_release(x);
}
END_TEST

/* The determinant by cofactor expansion along row 0 (m <= 4). */
static double cofactor_det(const double *a, int m) {
    if (m == 1) return a[0];
    double sub[16], det = 0;
    for (int c = 0; c < m; c++) {
        int k = 0;
        for (int i = 1; i < m; i++)
            for (int j = 0; j < m; j++)
                if (j != c) sub[k++] = a[i * m + j];
        det += (c % 2 ? -1 : 1) * a[c] * cofactor_det(sub, m - 1);
    }
    return det;
}

START_TEST(test_det_against_cofactors) {
    test_rng r = {8};
    for (int m = 1; m <= 4; m++) {
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, m, m}, -2, 2), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("det", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        ck_assert_int_eq(y->ndim, 1);
        for (int b = 0; b < 2; b++) {
            double a[16];
            for (int i = 0; i < m * m; i++) a[i] = pardo_tensor_get_f64(x, b * m * m + i);
            ck_assert_double_eq_tol(pardo_tensor_get_f64(y, b), cofactor_det(a, m), 1e-12);
        }
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
    pardo_tensor *s = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 2, 4}), *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("det", NULL, 1, &s, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 0);
    pardo_tensor_release(y);
    pardo_tensor_release(s);
}
END_TEST

static double get3(const pardo_tensor *t, int64_t a, int64_t b, int64_t c, const int64_t *shape) {
    return pardo_tensor_get_f64(t, (a * shape[1] + b) * shape[2] + c);
}

/* einsum's forms against naive loops: a batched product (explicit and implicit output), a batch of
 * diagonals through '...', a transpose, an inner product to a scalar, a row sum, a broadcast '...'. */
START_TEST(test_einsum_forms) {
    test_rng r = {31};
    pardo_status st;
    const int64_t sa[3] = {2, 3, 4}, sb[3] = {2, 4, 5};
    pardo_tensor *a = test_tensor_random(&r, PARDO_F64, 3, sa, -1, 1),
                 *b = test_tensor_random(&r, PARDO_F64, 3, sb, -1, 1);
    pardo_tensor *ab[2] = {a, b}, *y = NULL;
    /* explicit, and implicit: the labels that appear once (i, k), so b is summed too, as numpy does */
    static const char *const bmm[2] = {"{\"equation\": \"bij, bjk -> bik\"}", "{\"equation\": \"bij,bjk\"}"};
    for (int f = 0; f < 2; f++) {
        ck_assert_msg(test_run_op("einsum", bmm[f], 2, ab, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_int_eq(y->ndim, f ? 2 : 3);
        ck_assert_int_eq(y->shape[y->ndim - 1], 5);
        for (int bi = 0; bi < 2; bi++)
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < 5; k++) {
                    double want = 0;
                    for (int j = 0; j < 4; j++) want += get3(a, bi, i, j, sa) * get3(b, bi, j, k, sb);
                    if (f) { /* add the other batch's in */
                        if (bi) continue;
                        for (int j = 0; j < 4; j++) want += get3(a, 1, i, j, sa) * get3(b, 1, j, k, sb);
                    }
                    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, f ? i * 5 + k : (bi * 3 + i) * 5 + k), want, 1e-12);
                }
        pardo_tensor_release(y);
    }
    /* '...ii->...i' over [2, 3, 3] */
    const int64_t sq[3] = {2, 3, 3};
    pardo_tensor *m = test_tensor_random(&r, PARDO_F32, 3, sq, -1, 1);
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"...ii ->...i\"}", 1, &m, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->ndim, 2);
    for (int bi = 0; bi < 2; bi++)
        for (int i = 0; i < 3; i++)
            ck_assert_double_eq(pardo_tensor_get_f64(y, bi * 3 + i), get3(m, bi, i, i, sq));
    pardo_tensor_release(y);
    /* 'ij->ji', 'ij->i' and 'i,i' */
    pardo_tensor *t = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 4}, -1, 1);
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"ij->ji\"}", 1, &t, 1, &y, &st), PARDO_OK);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            ck_assert_double_eq(pardo_tensor_get_f64(y, j * 3 + i), pardo_tensor_get_f64(t, i * 4 + j));
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"ij->i\"}", 1, &t, 1, &y, &st), PARDO_OK);
    for (int i = 0; i < 3; i++) {
        double want = 0;
        for (int j = 0; j < 4; j++) want += pardo_tensor_get_f64(t, i * 4 + j);
        ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i), want, 1e-14);
    }
    pardo_tensor_release(y);
    pardo_tensor *v = test_tensor_random(&r, PARDO_F64, 1, (int64_t[]){6}, -1, 1), *vv[2] = {v, v};
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"i,i\"}", 2, vv, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->ndim, 0);
    double dot = 0;
    for (int i = 0; i < 6; i++) dot += pardo_tensor_get_f64(v, i) * pardo_tensor_get_f64(v, i);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), dot, 1e-14);
    pardo_tensor_release(y);
    /* '...' broadcasting: [2, 1, 4] with [3, 4] over 'j' -> '...' [2, 3] */
    pardo_tensor *p = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 1, 4}, -1, 1);
    pardo_tensor *q = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 4}, -1, 1), *pq[2] = {p, q};
    ck_assert_msg(test_run_op("einsum", "{\"equation\": \"...j,...j->...\"}", 2, pq, 1, &y, &st) == PARDO_OK, "%s",
                  st.msg);
    ck_assert_int_eq(y->ndim, 2);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) {
            double want = 0;
            for (int j = 0; j < 4; j++) want += pardo_tensor_get_f64(p, i * 4 + j) * pardo_tensor_get_f64(q, k * 4 + j);
            ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i * 3 + k), want, 1e-14);
        }
    pardo_tensor_release(y);
    /* refusals: a term for the wrong rank, sizes that disagree, no equation, a bad character */
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"ijk->i\"}", 1, &t, 1, &y, &st), PARDO_EINVAL);
    pardo_tensor *tt[2] = {t, t};
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"ij,ij->ji\"}", 2, tt, 1, &y, &st), PARDO_OK);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"ij,ji->ij\"}", 2, tt, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_run_op("einsum", NULL, 1, &t, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"i$->i\"}", 1, &t, 1, &y, &st), PARDO_EINVAL);
    /* an implicit output of more dims than a tensor has */
    pardo_tensor *u = test_tensor_random(&r, PARDO_F64, 5, (int64_t[]){1, 1, 1, 1, 1}, -1, 1), *uu[2] = {u, u};
    ck_assert_int_eq(test_run_op("einsum", "{\"equation\": \"abcde,fghij\"}", 2, uu, 1, &y, &st), PARDO_EINVAL);
    pardo_tensor_release(u);
    pardo_tensor_release(q);
    pardo_tensor_release(p);
    pardo_tensor_release(v);
    pardo_tensor_release(t);
    pardo_tensor_release(m);
    pardo_tensor_release(b);
    pardo_tensor_release(a);
}
END_TEST

START_TEST(test_math_gradients) {
    test_rng r = {21};
    int64_t shape[2] = {2, 3};
    for (int c = 0; c < LEN(unary_cases); c++) {
        if (!unary_cases[c].grad) continue;
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, shape, unary_cases[c].lo, unary_cases[c].hi);
        test_check_grad_default(unary_cases[c].op, NULL, 1, &x, 1, 1u);
        pardo_tensor_release(x);
    }
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, shape, 0.5, 3);
    test_check_grad_default("reciprocal", NULL, 1, &x, 1, 1u);
    pardo_tensor_release(x);
    static const char *const ops[] = {"max", "min", "sum", "mean"};
    for (int o = 0; o < 4; o++) {
        pardo_tensor *in[3] = {test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 3, 4}, -1, 1),
                               test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 1}, -1, 1),
                               test_tensor_random(&r, PARDO_F64, 1, (int64_t[]){4}, -1, 1)};
        test_check_grad_default(ops[o], NULL, 3, in, 1, 7u);
        for (int k = 0; k < 3; k++) pardo_tensor_release(in[k]);
    }
    /* einsum: a product, a diagonal, an inner product, a broadcast '...', a transpose */
    static const struct {
        const char *eq;
        int n, nd[2];
        int64_t shape[2][3];
    } es[] = {
        {"{\"equation\": \"bij,bjk->bik\"}", 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}},
        {"{\"equation\": \"...ii->...i\"}", 1, {3, 0}, {{2, 3, 3}, {0}}},
        {"{\"equation\": \"i,i\"}", 2, {1, 1}, {{5}, {5}}},
        {"{\"equation\": \"...j,...j->...\"}", 2, {3, 2}, {{2, 1, 4}, {3, 4}}},
        {"{\"equation\": \"ij->ji\"}", 1, {2, 0}, {{3, 4}, {0}}},
    };
    for (int k = 0; k < LEN(es); k++) {
        pardo_tensor *in[2] = {NULL, NULL};
        for (int i = 0; i < es[k].n; i++) in[i] = test_tensor_random(&r, PARDO_F64, es[k].nd[i], es[k].shape[i], -1, 1);
        test_check_grad_default("einsum", es[k].eq, es[k].n, in, 1, es[k].n == 2 ? 3u : 1u);
        for (int i = 0; i < es[k].n; i++) pardo_tensor_release(in[i]);
    }
    /* det: a batch of 3 x 3, and a singular matrix (the cofactors, not an inverse) */
    pardo_tensor *dm = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 3, 3}, -1, 1);
    test_check_grad_default("det", NULL, 1, &dm, 1, 1u);
    pardo_tensor_release(dm);
    pardo_tensor *sing = test_tensor_from(PARDO_F64, 2, (int64_t[]){3, 3}, (double[]){1, 2, 3, 2, 4, 6, 0.5, -1, 2});
    test_check_grad_default("det", NULL, 1, &sing, 1, 1u);
    pardo_tensor_release(sing);
    static const char *const cs[] = {"{\"axis\": 1}", "{\"axis\": 0, \"exclusive\": true}",
                                     "{\"axis\": -1, \"reverse\": true}",
                                     "{\"axis\": 1, \"exclusive\": true, \"reverse\": true}"};
    for (int k = 0; k < LEN(cs); k++) {
        pardo_tensor *cx = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 4}, -1, 1);
        test_check_grad_default("cumsum", cs[k], 1, &cx, 1, 1u);
        pardo_tensor_release(cx);
    }
}
END_TEST

START_TEST(test_math_errors) {
    pardo_status st;
    pardo_tensor *a = test_tensor_from(PARDO_I32, 1, (int64_t[]){2}, (double[]){3, 4});
    pardo_tensor *z = test_tensor_from(PARDO_I32, 1, (int64_t[]){2}, (double[]){1, 0});
    pardo_tensor *in[2] = {a, z}, *y = NULL;
    ck_assert_int_eq(test_run_op("mod", NULL, 2, in, 1, &y, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "zero"), "%s", st.msg);
    pardo_type f = test_type(PARDO_F32, 1, (int64_t[]){2}), i = test_type(PARDO_I32, 1, (int64_t[]){2}),
               sq = test_type(PARDO_F32, 2, (int64_t[]){2, 3}), out;
    const pardo_type *ff[2] = {&f, &f}, *fi[2] = {&f, &i}, *s1[1] = {&sq}, *i1[1] = {&i};
    ck_assert_int_eq(test_infer_op("mod", NULL, 2, ff, 1, &out, &st), PARDO_EINVAL); /* floats need fmod 1 */
    ck_assert_int_eq(test_infer_op("max", NULL, 2, fi, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("det", NULL, 1, s1, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("mean", NULL, 1, i1, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("sin", NULL, 1, i1, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("cumsum", "{\"axis\": 3}", 1, i1, 1, &out, &st), PARDO_EINVAL);
    pardo_tensor_release(z);
    pardo_tensor_release(a);
}
END_TEST

Suite *make_ops_math_suite(void) {
    Suite *s = suite_create("ops_math");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_unary_against_libm);
    tcase_add_test(core, test_round_half_to_even);
    tcase_add_test(core, test_sign_dtypes);
    tcase_add_test(core, test_variadic_broadcast);
    tcase_add_test(core, test_variadic_same_shape);
    tcase_add_test(core, test_mod_signs);
    tcase_add_test(core, test_narrow_dtypes_max_min_sum_mod);
    tcase_add_test(core, test_cumsum_forms);
    tcase_add_test(core, test_hardmax_axes);
    tcase_add_test(core, test_det_against_cofactors);
    tcase_add_test(core, test_einsum_forms);
    tcase_add_test(core, test_math_gradients);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_math_errors);
    suite_add_tcase(s, errors);
    return s;
}
