/* check_ops_elementwise.c - add, sub, mul, div, neg, exp, log, sqrt, abs,
 * pow, scale, clip (and relu, sigmoid, tanh, which live in ops/activation.c
 * now) against naive loops in double on seeded random data; broadcasting,
 * edge sizes, integer semantics, inference, errors and NumPy fixtures; the
 * gradient ops against float64 finite differences. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "core/half.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"
#include "unary.h"
#include "exec/thread_pool.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct shape_t {
    int nd;
    int64_t d[PARDO_MAX_DIMS];
} shape_t;

/* Naive numpy broadcast of a and b; false when they do not broadcast. */
static int ref_broadcast(const shape_t *a, const shape_t *b, shape_t *out) {
    out->nd = a->nd > b->nd ? a->nd : b->nd;
    for (int i = 0; i < out->nd; i++) {
        int ia = a->nd - out->nd + i, ib = b->nd - out->nd + i;
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return 0;
        out->d[i] = da == 1 ? db : da;
    }
    return 1;
}

/* Linear index into operand s of the output multi-index idx (rank out_nd). */
static int64_t ref_index(const shape_t *s, int out_nd, const int64_t *idx) {
    int64_t li = 0;
    for (int i = 0; i < s->nd; i++) {
        int64_t d = s->d[i], k = idx[out_nd - s->nd + i];
        li = li * d + (d == 1 ? 0 : k);
    }
    return li;
}

static void unravel(int64_t li, int nd, const int64_t *shape, int64_t *idx) {
    for (int i = nd - 1; i >= 0; i--) {
        idx[i] = shape[i] ? li % shape[i] : 0;
        li = shape[i] ? li / shape[i] : 0;
    }
}

typedef enum { ADD, SUB, MUL, DIV } binop;
static const char *const binop_names[] = {"add", "sub", "mul", "div"};

static double ref_binop(binop op, pardo_dtype dt, double a, double b) {
    switch (op) {
    case ADD: return a + b;
    case SUB: return a - b;
    case MUL: return a * b;
    default: return pardo_dtype_is_int(dt) ? (double)((int64_t)a / (int64_t)b) : a / b;
    }
}

/* Runs op on random inputs of shapes a and b and compares with the naive loop. */
static void check_binary(binop op, pardo_dtype dt, shape_t a, shape_t b, uint64_t seed) {
    test_rng r = {seed};
    bool is_int = pardo_dtype_is_int(dt);
    pardo_tensor *in[2] = {test_tensor_random(&r, dt, a.nd, a.d, is_int ? -50 : -2, is_int ? 50 : 2),
                           test_tensor_random(&r, dt, b.nd, b.d, is_int ? -9 : (op == DIV ? 0.5 : -2), is_int ? 9 : 2)};
    if (op == DIV && is_int) /* no zero divisors here; that is an error case */
        for (int64_t i = 0; i < in[1]->numel; i++)
            if (pardo_tensor_get_f64(in[1], i) == 0) pardo_tensor_set_f64(in[1], i, 3);
    shape_t o;
    ck_assert(ref_broadcast(&a, &b, &o));
    pardo_tensor *out = NULL;
    pardo_status st;
    int rc = test_run_op(binop_names[op], NULL, 2, in, 1, &out, &st);
    ck_assert_msg(rc == PARDO_OK, "%s: %s", binop_names[op], st.msg);
    pardo_tensor *want = pardo_tensor_new_cpu(dt, o.nd, o.d, &st);
    ck_assert_ptr_nonnull(want);
    int64_t idx[PARDO_MAX_DIMS];
    for (int64_t i = 0; i < want->numel; i++) {
        unravel(i, o.nd, o.d, idx);
        double x = pardo_tensor_get_f64(in[0], ref_index(&a, o.nd, idx));
        double y = pardo_tensor_get_f64(in[1], ref_index(&b, o.nd, idx));
        pardo_tensor_set_f64(want, i, ref_binop(op, dt, x, y));
    }
    test_assert_close(out, want, dt == PARDO_F32 ? 1e-6 : 1e-14, 0);
    pardo_tensor_release(want);
    pardo_tensor_release(out);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}

static const shape_t bcast_cases[][2] = {
    {{2, {2, 3}}, {1, {3}}},
    {{3, {4, 1, 3}}, {2, {2, 1}}},
    {{0, {0}}, {0, {0}}},
    {{1, {5}}, {0, {0}}},
    {{0, {0}}, {2, {2, 3}}},
    {{1, {1}}, {1, {7}}},
    {{2, {3, 1}}, {2, {1, 4}}},
    {{3, {2, 3, 4}}, {3, {2, 3, 4}}},
    {{2, {0, 3}}, {1, {3}}},
    {{3, {2, 1, 5}}, {3, {1, 3, 1}}},
    {{3, {1, 1, 1}}, {1, {1}}},
    {{2, {7, 9}}, {2, {7, 1}}},
    {{4, {1, 2, 1, 3}}, {3, {2, 2, 1}}},
    {{2, {1, 13}}, {3, {3, 5, 13}}},
    {{1, {1}}, {0, {0}}},
};

START_TEST(test_binary_broadcast) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    for (int op = ADD; op <= DIV; op++)
        for (int t = 0; t < LEN(dts); t++)
            for (int c = 0; c < LEN(bcast_cases); c++) {
                check_binary((binop)op, dts[t], bcast_cases[c][0], bcast_cases[c][1], 1000u + (uint64_t)c);
                check_binary((binop)op, dts[t], bcast_cases[c][1], bcast_cases[c][0], 2000u + (uint64_t)c);
            }
}
END_TEST

/* ---- the narrow and unsigned ints, float16, bfloat16 ---- */

static const pardo_dtype narrow_dtypes[] = {PARDO_U8,  PARDO_I8,  PARDO_I16, PARDO_U16,
                                            PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};

/* Element i of an integer array of dtype dt as 64 bits (sign-extended for the signed ones). */
static uint64_t ref_load_bits(pardo_dtype dt, const void *p, int64_t i) {
    const size_t es = pardo_dtype_size(dt);
    uint64_t v = 0;
    memcpy(&v, (const char *)p + (size_t)i * es, es);
    const bool sgn = dt == PARDO_I8 || dt == PARDO_I16;
    if (sgn && es < 8 && (v >> (8 * es - 1)) & 1) v |= ~0ULL << (8 * es);
    return v;
}

/* The reference of one element: ints in 64-bit arithmetic (wrapping), then their low bytes; division truncates
 * (C's int64 division of the sign-extended values, unsigned for the unsigned dtypes); float16 and bfloat16 in
 * double, rounded once. Writes the element's bytes to out. */
static void ref_narrow(binop op, pardo_dtype dt, const void *pa, int64_t ia, const void *pb, int64_t ib, void *out) {
    const size_t es = pardo_dtype_size(dt);
    if (pardo_dtype_is_half(dt)) {
        const bool f16 = dt == PARDO_F16;
        const uint16_t ha = ((const uint16_t *)pa)[ia], hb = ((const uint16_t *)pb)[ib];
        const double x = f16 ? pardo_f16_to_f64(ha) : pardo_bf16_to_f64(ha);
        const double y = f16 ? pardo_f16_to_f64(hb) : pardo_bf16_to_f64(hb);
        const double r = op == ADD ? x + y : op == SUB ? x - y : op == MUL ? x * y : x / y;
        const uint16_t h = f16 ? pardo_f16_from_f64(r) : pardo_bf16_from_f64(r);
        memcpy(out, &h, 2);
        return;
    }
    const uint64_t x = ref_load_bits(dt, pa, ia), y = ref_load_bits(dt, pb, ib);
    uint64_t r;
    if (op == ADD) r = x + y;
    else if (op == SUB) r = x - y;
    else if (op == MUL) r = x * y;
    else if (pardo_dtype_is_unsigned(dt)) r = x / y;
    else r = (int64_t)y == -1 ? 0 - x : (uint64_t)((int64_t)x / (int64_t)y);
    memcpy(out, &r, es); /* little-endian: the low bytes */
}

/* A tensor of random bytes (an integer dtype) or of random finite halves. */
static pardo_tensor *random_bytes(test_rng *r, pardo_dtype dt, const shape_t *s) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, s->nd, s->d, &st);
    ck_assert_ptr_nonnull(t);
    uint8_t *p = pardo_tensor_data(t);
    for (size_t b = 0; b < t->nbytes; b++) p[b] = (uint8_t)test_rng_next(r);
    if (pardo_dtype_is_half(dt))
        for (int64_t i = 0; i < t->numel; i++) {
            uint16_t *h = (uint16_t *)p + i;
            if (!isfinite(pardo_tensor_get_f64(t, i))) *h &= 0xbfff; /* clear the exponent's top bit: finite */
        }
    return t;
}

static void check_binary_narrow(binop op, pardo_dtype dt, shape_t a, shape_t b, uint64_t seed) {
    test_rng r = {seed};
    pardo_tensor *in[2] = {random_bytes(&r, dt, &a), random_bytes(&r, dt, &b)};
    if (op == DIV && !pardo_dtype_is_half(dt)) /* no zero divisors here */
        for (int64_t i = 0; i < in[1]->numel; i++)
            if (ref_load_bits(dt, pardo_tensor_data(in[1]), i) == 0) pardo_tensor_set_f64(in[1], i, 3);
    shape_t o;
    ck_assert(ref_broadcast(&a, &b, &o));
    pardo_tensor *out = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op(binop_names[op], NULL, 2, in, 1, &out, &st) == PARDO_OK, "%s %s: %s", binop_names[op],
                  pardo_dtype_name(dt), st.msg);
    ck_assert_int_eq(out->dtype, dt);
    const size_t es = pardo_dtype_size(dt);
    int64_t idx[PARDO_MAX_DIMS];
    for (int64_t i = 0; i < out->numel; i++) {
        unravel(i, o.nd, o.d, idx);
        uint64_t want = 0, got = 0;
        ref_narrow(op, dt, pardo_tensor_data(in[0]), ref_index(&a, o.nd, idx), pardo_tensor_data(in[1]),
                   ref_index(&b, o.nd, idx), &want);
        memcpy(&got, (const char *)pardo_tensor_data(out) + (size_t)i * es, es);
        const double want_v = dt == PARDO_F16 ? pardo_f16_to_f64((uint16_t)want) : pardo_bf16_to_f64((uint16_t)want);
        const bool both_nan = pardo_dtype_is_half(dt) && isnan(pardo_tensor_get_f64(out, i)) && isnan(want_v);
        ck_assert_msg(got == want || both_nan, "%s %s element %lld: %llx, expected %llx", binop_names[op],
                      pardo_dtype_name(dt), (long long)i, (unsigned long long)got, (unsigned long long)want);
    }
    pardo_tensor_release(out);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}

START_TEST(test_binary_narrow_dtypes) {
    for (int op = ADD; op <= DIV; op++)
        for (int t = 0; t < LEN(narrow_dtypes); t++)
            for (int c = 0; c < LEN(bcast_cases); c++) {
                check_binary_narrow((binop)op, narrow_dtypes[t], bcast_cases[c][0], bcast_cases[c][1],
                                    3000u + (uint64_t)c);
                check_binary_narrow((binop)op, narrow_dtypes[t], bcast_cases[c][1], bcast_cases[c][0],
                                    4000u + (uint64_t)c);
            }
}
END_TEST

/* Wraparound and truncation worked by hand: uint8 200 + 100 = 44, 3 - 5 = 254, 16 * 17 = 16; int8 -128 / -1 =
 * -128, -7 / 2 = -3; uint32 7 / 4294967295 = 0 (not a negation); int16 300 * 300 = 24464; uint64 2^63 * 2 = 0. */
START_TEST(test_narrow_int_semantics) {
    pardo_status st;
    int64_t n = 1;
    const struct {
        const char *op;
        pardo_dtype dt;
        double a, b, want;
    } cases[] = {
        {"add", PARDO_U8, 200, 100, 44},  {"sub", PARDO_U8, 3, 5, 254},        {"mul", PARDO_U8, 16, 17, 16},
        {"div", PARDO_I8, -128, -1, -128}, {"div", PARDO_I8, -7, 2, -3},       {"div", PARDO_U32, 7, 4294967295.0, 0},
        {"mul", PARDO_I16, 300, 300, 24464}, {"mul", PARDO_U64, 9223372036854775808.0, 2, 0},
        {"sub", PARDO_U16, 0, 1, 65535}, {"add", PARDO_F16, 2048, 1, 2048}, /* 2049 is a tie: to even 2048 */
        {"add", PARDO_F16, 2048, 3, 2052},                                   /* 2051: a tie, to even 2052 */
        {"mul", PARDO_BF16, 3, 1.0 / 3, 1.0},
    };
    for (int k = 0; k < LEN(cases); k++) {
        pardo_tensor *in[2] = {test_tensor_from(cases[k].dt, 1, &n, &cases[k].a),
                               test_tensor_from(cases[k].dt, 1, &n, &cases[k].b)},
                     *out = NULL;
        ck_assert_msg(test_run_op(cases[k].op, NULL, 2, in, 1, &out, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_msg(pardo_tensor_get_f64(out, 0) == cases[k].want, "case %d %s %s: %.17g", k, cases[k].op,
                      pardo_dtype_name(cases[k].dt), pardo_tensor_get_f64(out, 0));
        pardo_tensor_release(out);
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
    /* a zero divisor of a narrow int is the same error as int32's */
    double zero = 0, one = 1;
    pardo_tensor *in[2] = {test_tensor_from(PARDO_U8, 1, &n, &one), test_tensor_from(PARDO_U8, 1, &n, &zero)},
                 *out = NULL;
    ck_assert_int_eq(test_run_op("div", NULL, 2, in, 1, &out, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "division by zero"), "%s", st.msg);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

/* pow with an exponent of the narrow dtypes: int bases with int exponents exact in integers (a naive product
 * loop, wrapping in uint64 then truncated), with float16/bfloat16 exponents C's pow truncated, float bases
 * through C's pow of the exponent's value. */
START_TEST(test_pow_narrow_exponents) {
    const double base[5] = {2, -3, 7, 0, 1}, expo[5] = {3, 5, 20, 0, 255};
    int64_t n = 5;
    for (int t = 0; t < LEN(narrow_dtypes); t++) {
        const pardo_dtype edt = narrow_dtypes[t];
        pardo_tensor *e = test_tensor_from(edt, 1, &n, expo);
        const pardo_dtype bases[3] = {PARDO_I32, PARDO_I64, PARDO_F32};
        for (int b = 0; b < 3; b++) {
            pardo_tensor *in[2] = {test_tensor_from(bases[b], 1, &n, base), e}, *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("pow", NULL, 2, in, 1, &y, &st) == PARDO_OK, "%s ** %s: %s",
                          pardo_dtype_name(bases[b]), pardo_dtype_name(edt), st.msg);
            ck_assert_int_eq(y->dtype, bases[b]);
            for (int i = 0; i < 5; i++) {
                const double ev = pardo_tensor_get_f64(e, i); /* what the exponent holds (bfloat16: 256 for 255) */
                double want;
                if (bases[b] == PARDO_F32) {
                    want = (double)(float)pow(base[i], ev);
                } else if (pardo_dtype_is_half(edt)) { /* a float exponent: C's pow, truncated like a cast */
                    const int64_t r = (int64_t)pow(base[i], ev);
                    want = bases[b] == PARDO_I32 ? (double)(int32_t)(uint32_t)(uint64_t)r : (double)r;
                } else {
                    uint64_t r = 1;
                    for (int64_t k = 0; k < (int64_t)ev; k++) r *= (uint64_t)(int64_t)base[i];
                    want = bases[b] == PARDO_I32 ? (double)(int32_t)(uint32_t)r : (double)(int64_t)r;
                }
                ck_assert_msg(pardo_tensor_get_f64(y, i) == want, "%s %g ** %s %g: %.17g, expected %.17g",
                              pardo_dtype_name(bases[b]), base[i], pardo_dtype_name(edt), ev,
                              pardo_tensor_get_f64(y, i), want);
            }
            pardo_tensor_release(y);
            pardo_tensor_release(in[0]);
        }
        pardo_tensor_release(e);
    }
}
END_TEST

/* One op on given values; returns the output, which the caller releases. */
static pardo_tensor *run2(const char *op, pardo_dtype dt, int n, const double *a, const double *b) {
    int64_t shape[1] = {n};
    pardo_tensor *in[2] = {test_tensor_from(dt, 1, shape, a), test_tensor_from(dt, 1, shape, b)}, *out = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op(op, NULL, 2, in, 1, &out, &st) == PARDO_OK, "%s: %s", op, st.msg);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
    return out;
}

START_TEST(test_int_semantics) {
    /* truncation toward zero, INT_MIN / -1 wraps instead of trapping */
    const double a32[] = {-7, 7, -7, 7, -2147483648.0, 0}, b32[] = {2, -2, -2, 2, -1, 5};
    const double q32[] = {-3, -3, 3, 3, -2147483648.0, 0};
    pardo_tensor *y = run2("div", PARDO_I32, 6, a32, b32);
    for (int i = 0; i < 6; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), q32[i]);
    pardo_tensor_release(y);

    pardo_status st;
    int64_t one = 1;
    pardo_tensor *in[2] = {test_tensor_from(PARDO_I64, 1, &one, (double[]){0}),
                           test_tensor_from(PARDO_I64, 1, &one, (double[]){-1})},
                 *out = NULL;
    ((int64_t *)pardo_tensor_data(in[0]))[0] = INT64_MIN;
    ck_assert_int_eq(test_run_op("div", NULL, 2, in, 1, &out, &st), PARDO_OK);
    ck_assert(((int64_t *)pardo_tensor_data(out))[0] == INT64_MIN);
    pardo_tensor_release(out);
    /* add wraps around (two's complement) */
    ((int64_t *)pardo_tensor_data(in[0]))[0] = INT64_MAX;
    ((int64_t *)pardo_tensor_data(in[1]))[0] = 1;
    ck_assert_int_eq(test_run_op("add", NULL, 2, in, 1, &out, &st), PARDO_OK);
    ck_assert(((int64_t *)pardo_tensor_data(out))[0] == INT64_MIN);
    pardo_tensor_release(out);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);

    const double m1[] = {2147483647.0, -3}, m2[] = {2, 4};
    y = run2("mul", PARDO_I32, 2, m1, m2);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), -2.0);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 1), -12.0);
    pardo_tensor_release(y);
}
END_TEST

typedef struct unary_case {
    const char *op;
    const char *attrs;
    double lo, hi;       // input range
    double (*f)(double); // reference
} unary_case;

static double ref_relu(double x) { return x < 0 ? 0 : x; }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_scale(double x) { return x * 2.5 - 1.25; }
static double ref_neg(double x) { return -x; }
static double ref_pow25(double x) { return pow(x, 2.5); }
static double ref_cube(double x) { return x * x * x; }
static double ref_clip(double x) { return x < -0.5 ? -0.5 : x > 0.75 ? 0.75 : x; }
static double ref_clip_min(double x) { return x < 0.25 ? 0.25 : x; }
static double ref_clip_max(double x) { return x > -0.25 ? -0.25 : x; }
static double ref_clip_crossed(double x) { (void)x; return -1.0; } /* min > max: max everywhere (ONNX) */

START_TEST(test_unary) {
    static const unary_case cases[] = {
        {"relu", NULL, -3, 3, ref_relu},
        {"sigmoid", NULL, -8, 8, ref_sigmoid},
        {"tanh", NULL, -4, 4, tanh},
        {"exp", NULL, -5, 5, exp},
        {"log", NULL, 0.01, 50, log},
        {"scale", "{\"scale\": 2.5, \"bias\": -1.25}", -3, 3, ref_scale},
        {"neg", NULL, -3, 3, ref_neg},
        {"sqrt", NULL, 0, 40, sqrt},
        {"abs", NULL, -3, 3, fabs},
        {"pow", "{\"exponent\": 2.5}", 0, 3, ref_pow25},
        {"pow", "{\"exponent\": 3}", -2, 2, ref_cube},
        {"clip", "{\"min\": -0.5, \"max\": 0.75}", -2, 2, ref_clip},
        {"clip", "{\"min\": 0.25}", -2, 2, ref_clip_min},
        {"clip", "{\"max\": -0.25}", -2, 2, ref_clip_max},
        {"clip", "{\"min\": 1, \"max\": -1}", -2, 2, ref_clip_crossed},
        {"clip", NULL, -2, 2, NULL}, /* no bounds: Y = X */
    };
    static const shape_t shapes[] = {{0, {0}}, {1, {1}}, {1, {7}}, {2, {3, 5}}, {2, {0, 4}}, {3, {2, 3, 33}}};
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int c = 0; c < LEN(cases); c++)
        for (int s = 0; s < LEN(shapes); s++)
            for (int t = 0; t < 2; t++) {
                test_rng r = {77u + (uint64_t)(c * 31 + s * 7 + t)};
                pardo_tensor *x = test_tensor_random(&r, dts[t], shapes[s].nd, shapes[s].d, cases[c].lo, cases[c].hi);
                const char *attrs = cases[c].attrs;
                pardo_tensor *y = NULL;
                pardo_status st;
                ck_assert_msg(test_run_op(cases[c].op, attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", cases[c].op,
                              st.msg);
                pardo_tensor *want = pardo_tensor_clone(x, &st);
                for (int64_t i = 0; i < x->numel; i++) {
                    double v = pardo_tensor_get_f64(x, i);
                    pardo_tensor_set_f64(want, i, cases[c].f ? cases[c].f(v) : v); /* clip without bounds: X */
                }
                test_assert_close(y, want, dts[t] == PARDO_F32 ? 2e-6 : 1e-14, dts[t] == PARDO_F32 ? 1e-7 : 0);
                pardo_tensor_release(want);
                pardo_tensor_release(y);
                pardo_tensor_release(x);
            }
}
END_TEST

START_TEST(test_scale_default_and_special_values) {
    const double xs[] = {-1000, -100, -88, -20, 0, 20, 88, 100, 1000, NAN};
    int64_t n = LEN(xs);
    for (int t = 0; t < 2; t++) {
        pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
        pardo_tensor *x = test_tensor_from(dt, 1, &n, xs), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("sigmoid", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        for (int i = 0; i < n - 1; i++) {
            double v = pardo_tensor_get_f64(y, i);
            ck_assert_msg(isfinite(v) && v >= 0 && v <= 1, "sigmoid(%g) = %g", xs[i], v);
            ck_assert_double_eq_tol(v, ref_sigmoid(xs[i]), 1e-7);
        }
        ck_assert(isnan(pardo_tensor_get_f64(y, n - 1)));
        pardo_tensor_release(y);
        ck_assert_int_eq(test_run_op("relu", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        ck_assert(isnan(pardo_tensor_get_f64(y, n - 1))); /* relu keeps NaN */
        ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 0);
        pardo_tensor_release(y);
        ck_assert_int_eq(test_run_op("scale", NULL, 1, &x, 1, &y, &st), PARDO_OK); /* defaults: identity */
        for (int i = 0; i < n - 1; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), xs[i]);
        pardo_tensor_release(y);
        ck_assert_int_eq(test_run_op("tanh", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 0), -1);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 8), 1);
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_infer_runtime_dims) {
    pardo_type a = test_type(PARDO_F32, 2, (int64_t[]){-1, 3}), b = test_type(PARDO_F32, 1, (int64_t[]){3}), y;
    const pardo_type *in[2] = {&a, &b};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("mul", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    ck_assert_int_eq(y.ndim, 2);
    ck_assert_int_eq(y.shape[0], -1);
    ck_assert_int_eq(y.shape[1], 3);
    a = test_type(PARDO_I64, 2, (int64_t[]){-1, 1});
    b = test_type(PARDO_I64, 2, (int64_t[]){1, 4});
    ck_assert_int_eq(test_infer_op("sub", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.shape[0], -1);
    ck_assert_int_eq(y.shape[1], 4);
    a = test_type(PARDO_F64, -1, NULL);
    ck_assert_int_eq(test_infer_op("exp", NULL, 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, -1);
    ck_assert_int_eq(y.dtype, PARDO_F64);
    a = test_type(PARDO_F32, 3, (int64_t[]){-1, 2, 5});
    ck_assert_int_eq(test_infer_op("scale", "{\"scale\": 3}", 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 3);
    ck_assert_int_eq(y.shape[0], -1);
}
END_TEST

/* Runs op's CPU kernel directly with out[0] preset to `reuse` (may be NULL);
 * returns the code; *out gets the output (a new reference or NULL). */
static int run_kernel(const char *type, int n_in, pardo_tensor **in, pardo_tensor *reuse, pardo_tensor **out,
                      pardo_status *st) {
    pardo_op op;
    memset(&op, 0, sizeof op);
    op.type = (char *)type;
    op.def = pardo_op_lookup(type);
    ck_assert_ptr_nonnull(op.def);
    *out = reuse;
    pardo_kernel_ctx ctx = {
        .op = &op, .n_in = n_in, .in = in, .n_out = 1, .out = out, .st = st, .device = PARDO_DEVICE_CPU, .nthreads = 1};
    pardo_status_clear(st);
    int rc = op.def->cpu(&ctx);
    if (rc != PARDO_OK) {
        pardo_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

START_TEST(test_reused_output_is_overwritten) {
    test_rng r = {5};
    int64_t sa[] = {4, 1, 3}, sb[] = {2, 1}, so[] = {4, 2, 3};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, 3, sa, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 2, sb, -1, 1)};
    pardo_status st;
    pardo_tensor *stale = pardo_tensor_new_cpu(PARDO_F64, 3, so, &st), *out = NULL;
    for (int64_t i = 0; i < stale->numel; i++) pardo_tensor_set_f64(stale, i, NAN);
    ck_assert_int_eq(run_kernel("add", 2, in, stale, &out, &st), PARDO_OK);
    ck_assert_ptr_eq(out, stale); /* reused, and every element written */
    for (int64_t i = 0; i < out->numel; i++) ck_assert(!isnan(pardo_tensor_get_f64(out, i)));
    pardo_tensor_release(out);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

/* ---- errors ---- */

static int infer2(const char *op, pardo_type a, pardo_type b, pardo_status *st) {
    const pardo_type *in[2] = {&a, &b};
    pardo_type y;
    return test_infer_op(op, NULL, 2, in, 1, &y, st);
}

START_TEST(test_err_bad_broadcast) {
    pardo_status st;
    ck_assert_int_eq(
        infer2("add", test_type(PARDO_F32, 2, (int64_t[]){2, 3}), test_type(PARDO_F32, 1, (int64_t[]){4}), &st),
        PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[2, 3]") && strstr(st.msg, "[4]"), "message: %s", st.msg);
    ck_assert_int_eq(
        infer2("div", test_type(PARDO_I32, 2, (int64_t[]){5, 3}), test_type(PARDO_I32, 2, (int64_t[]){4, 1}), &st),
        PARDO_ESHAPE);
}
END_TEST

START_TEST(test_err_dtypes) {
    pardo_status st;
    int64_t s[] = {3};
    ck_assert_int_eq(infer2("add", test_type(PARDO_F32, 1, s), test_type(PARDO_F64, 1, s), &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float64") && strstr(st.msg, "float32"), "message: %s", st.msg);
    ck_assert_int_eq(infer2("mul", test_type(PARDO_BOOL, 1, s), test_type(PARDO_BOOL, 1, s), &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "bool") != NULL, "message: %s", st.msg);
    const char *unary[] = {"relu", "sigmoid", "tanh", "exp", "log", "scale", "neg", "sqrt", "abs", "pow", "clip"};
    for (int i = 0; i < LEN(unary); i++) {
        pardo_type x = test_type(i % 2 ? PARDO_I32 : PARDO_BOOL, 1, s), y;
        const pardo_type *in[1] = {&x};
        const char *attrs = strcmp(unary[i], "pow") == 0 ? "{\"exponent\": 2}" : NULL;
        ck_assert_int_eq(test_infer_op(unary[i], attrs, 1, in, 1, &y, &st), PARDO_ESHAPE);
        ck_assert_msg(strstr(st.msg, pardo_dtype_name(x.dtype)) && strstr(st.msg, "'X'"), "%s: %s", unary[i], st.msg);
    }
}
END_TEST

START_TEST(test_err_scale_attr) {
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 1, (int64_t[]){3}), y;
    const pardo_type *in[1] = {&x};
    ck_assert_int_eq(test_infer_op("scale", "{\"scale\": \"big\"}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'scale'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("scale", "{\"bias\": [1]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'bias'") != NULL, "message: %s", st.msg);
}
END_TEST

START_TEST(test_err_int_div_by_zero) {
    static const pardo_dtype dts[] = {PARDO_I32, PARDO_I64};
    for (int t = 0; t < 2; t++) {
        int64_t sa[] = {2, 3}, sb[] = {3};
        pardo_tensor *in[2] = {test_tensor_from(dts[t], 2, sa, (double[]){1, 2, 3, 4, 5, 6}),
                               test_tensor_from(dts[t], 1, sb, (double[]){1, 0, 2})},
                     *out = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("div", NULL, 2, in, 1, &out, &st), PARDO_ERUNTIME);
        ck_assert_ptr_null(out);
        ck_assert_msg(strstr(st.msg, "division by zero") && strstr(st.msg, "element 1"), "message: %s", st.msg);
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
    /* float division by zero is IEEE: inf, not an error */
    pardo_tensor *y = run2("div", PARDO_F32, 1, (double[]){1}, (double[]){0});
    ck_assert(isinf(pardo_tensor_get_f64(y, 0)));
    pardo_tensor_release(y);
}
END_TEST

START_TEST(test_err_runtime_shape_mismatch) {
    /* inference let [-1, 3] and [4, 3] pass; the kernel sees [2, 3] and [4, 3] */
    int64_t sa[] = {2, 3}, sb[] = {4, 3};
    test_rng r = {9};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F32, 2, sa, 0, 1),
                           test_tensor_random(&r, PARDO_F32, 2, sb, 0, 1)};
    pardo_tensor *out = NULL;
    pardo_status st;
    ck_assert_int_eq(run_kernel("sub", 2, in, NULL, &out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[2, 3]") && strstr(st.msg, "[4, 3]"), "message: %s", st.msg);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

/* ---- NumPy fixtures ---- */

START_TEST(test_fixture_add) {
    static const char *const cases[] = {"add_bcast3", "add_row"};
    for (int c = 0; c < LEN(cases); c++) {
        char name[96];
        pardo_tensor *in[2], *want, *out = NULL;
        snprintf(name, sizeof name, "ops/%s_a.npy", cases[c]);
        in[0] = test_npy_load(name);
        snprintf(name, sizeof name, "ops/%s_b.npy", cases[c]);
        in[1] = test_npy_load(name);
        snprintf(name, sizeof name, "ops/%s_y.npy", cases[c]);
        want = test_npy_load(name);
        pardo_status st;
        ck_assert_msg(test_run_op("add", NULL, 2, in, 1, &out, &st) == PARDO_OK, "%s: %s", cases[c], st.msg);
        test_assert_close(out, want, 1e-6, 0);
        pardo_tensor_release(out);
        pardo_tensor_release(want);
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
}
END_TEST

/* ---- gradients ---- */

START_TEST(test_binary_gradients) {
    static const shape_t pairs[][2] = {
        {{2, {3, 4}}, {2, {3, 4}}},       {{3, {2, 3, 4}}, {1, {4}}},       {{2, {3, 1}}, {2, {1, 4}}},
        {{3, {2, 1, 3}}, {2, {4, 1}}},    {{1, {5}}, {0, {0}}},             {{3, {2, 3, 1}}, {3, {1, 3, 5}}},
        {{4, {1, 2, 1, 3}}, {3, {2, 2, 1}}},
    };
    for (int op = ADD; op <= DIV; op++)
        for (int c = 0; c < LEN(pairs); c++)
            for (int swap = 0; swap < 2; swap++) {
                test_rng r = {500u + (uint64_t)(op * 100 + c * 2 + swap)};
                const shape_t *sa = &pairs[c][swap], *sb = &pairs[c][!swap];
                pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, sa->nd, sa->d, -2, 2),
                                       test_tensor_random(&r, PARDO_F64, sb->nd, sb->d, op == DIV ? 0.5 : -2, 2)};
                test_check_grad_default(binop_names[op], NULL, 2, in, 1, 3u);
                if (c == 1) { /* one gradient left out ("") */
                    test_check_grad_default(binop_names[op], NULL, 2, in, 1, 1u);
                    test_check_grad_default(binop_names[op], NULL, 2, in, 1, 2u);
                }
                pardo_tensor_release(in[0]);
                pardo_tensor_release(in[1]);
            }
}
END_TEST

typedef struct grad_case {
    const char *op;
    const char *attrs;
    double lo, hi;     // input range
    int n_kinks;       // points the inputs keep away from
    double kinks[2];
} grad_case;

START_TEST(test_unary_gradients) {
    static const grad_case cases[] = {
        {"neg", NULL, -2, 2, 0, {0}},
        {"exp", NULL, -2, 2, 0, {0}},
        {"log", NULL, 0.5, 3, 0, {0}},
        {"sqrt", NULL, 0.5, 3, 0, {0}},
        {"abs", NULL, -2, 2, 1, {0}},
        {"pow", "{\"exponent\": 2.5}", 0.5, 2, 0, {0}},
        {"pow", "{\"exponent\": -1.5}", 0.5, 2, 0, {0}},
        {"pow", "{\"exponent\": 3}", -2, 2, 0, {0}},
        {"pow", "{\"exponent\": 0}", -2, 2, 0, {0}},
        {"scale", "{\"scale\": -2.5, \"bias\": 1}", -2, 2, 0, {0}},
        {"scale", NULL, -2, 2, 0, {0}},
        {"clip", "{\"min\": -0.5, \"max\": 0.75}", -2, 2, 2, {-0.5, 0.75}},
        {"clip", "{\"min\": 0.25}", -2, 2, 1, {0.25}},
        {"clip", "{\"max\": -0.25}", -2, 2, 1, {-0.25}},
        {"clip", NULL, -2, 2, 0, {0}},
    };
    static const shape_t shapes[] = {{1, {7}}, {2, {3, 5}}, {0, {0}}};
    for (int c = 0; c < LEN(cases); c++)
        for (int k = 0; k < LEN(shapes); k++) {
            test_rng r = {900u + (uint64_t)(c * 8 + k)};
            pardo_tensor *x = test_tensor_random(&r, PARDO_F64, shapes[k].nd, shapes[k].d, cases[c].lo, cases[c].hi);
            for (int j = 0; j < cases[c].n_kinks; j++) test_push_away(x, cases[c].kinks[j], 0.01);
            test_check_grad_default(cases[c].op, cases[c].attrs, 1, &x, 1, 1u);
            pardo_tensor_release(x);
        }
}
END_TEST

/* Runs gradient op `type` on X, Y (computed by the forward op) and dY
 * (NULL: absent); returns dX. */
static pardo_tensor *run_unary_grad(const char *op, const char *attrs, pardo_tensor *x, pardo_tensor *dy) {
    pardo_status st;
    pardo_tensor *y = NULL, *dx = NULL;
    char gtype[64];
    ck_assert_msg(test_run_op(op, attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", op, st.msg);
    pardo_tensor *in[3] = {x, y, dy};
    snprintf(gtype, sizeof gtype, "%s_grad", op);
    ck_assert_msg(test_run_op(gtype, attrs, 3, in, 1, &dx, &st) == PARDO_OK, "%s: %s", gtype, st.msg);
    pardo_tensor_release(y);
    return dx;
}

START_TEST(test_gradient_special_points) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int t = 0; t < 2; t++) {
        int64_t n = 5;
        pardo_tensor *x = test_tensor_from(dts[t], 1, &n, (double[]){-1, -0.5, 0, 0.75, 2});
        pardo_tensor *dy = test_tensor_from(dts[t], 1, &n, (double[]){1, 2, 3, 4, 5});
        /* abs: sign, 0 at 0 */
        pardo_tensor *dx = run_unary_grad("abs", NULL, x, dy);
        const double abs_want[] = {-1, -2, 0, 4, 5};
        for (int i = 0; i < n; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), abs_want[i]);
        pardo_tensor_release(dx);
        /* clip passes the gradient through inside the bounds, bounds included */
        dx = run_unary_grad("clip", "{\"min\": -0.5, \"max\": 0.75}", x, dy);
        const double clip_want[] = {0, 2, 3, 4, 0};
        for (int i = 0; i < n; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), clip_want[i]);
        pardo_tensor_release(dx);
        /* pow with exponent 0 is constant: no gradient even at 0 */
        dx = run_unary_grad("pow", "{\"exponent\": 0}", x, dy);
        for (int i = 0; i < n; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), 0);
        pardo_tensor_release(dx);
        /* an absent dY ("") means zeros */
        dx = run_unary_grad("exp", NULL, x, NULL);
        ck_assert_int_eq(dx->numel, n);
        for (int i = 0; i < n; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), 0);
        pardo_tensor_release(dx);
        pardo_tensor_release(dy);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_binary_gradient_float32_and_absent_dc) {
    /* float32 against the float64 formula; then dC absent: zeros of A's and B's shapes */
    test_rng r = {31};
    int64_t sa[] = {4, 1, 3}, sb[] = {2, 1}, sc[] = {4, 2, 3};
    pardo_tensor *a = test_tensor_random(&r, PARDO_F32, 3, sa, -2, 2),
                 *b = test_tensor_random(&r, PARDO_F32, 2, sb, 0.5, 2);
    pardo_tensor *dc = test_tensor_random(&r, PARDO_F32, 3, sc, -1, 1), *out[2] = {NULL, NULL};
    pardo_status st;
    pardo_tensor *in[4] = {a, b, dc, dc}; /* C itself is not read by div_grad's formula */
    ck_assert_msg(test_run_op("div_grad", NULL, 4, in, 2, out, &st) == PARDO_OK, "%s", st.msg);
    double want_b[2] = {0, 0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) {
                double av = pardo_tensor_get_f64(a, i * 3 + k), bv = pardo_tensor_get_f64(b, j);
                double g = pardo_tensor_get_f64(dc, (i * 2 + j) * 3 + k);
                want_b[j] += -g * av / (bv * bv);
            }
    for (int j = 0; j < 2; j++)
        ck_assert_double_eq_tol(pardo_tensor_get_f64(out[1], j), want_b[j], 1e-5 * (1 + fabs(want_b[j])));
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++) {
            double w = 0;
            for (int j = 0; j < 2; j++)
                w += pardo_tensor_get_f64(dc, (i * 2 + j) * 3 + k) / pardo_tensor_get_f64(b, j);
            ck_assert_double_eq_tol(pardo_tensor_get_f64(out[0], i * 3 + k), w, 1e-5 * (1 + fabs(w)));
        }
    pardo_tensor_release(out[0]);
    pardo_tensor_release(out[1]);
    in[3] = NULL;
    ck_assert_msg(test_run_op("mul_grad", NULL, 4, in, 2, out, &st) == PARDO_OK, "%s", st.msg);
    ck_assert(pardo_shape_equal(out[0]->ndim, out[0]->shape, 3, sa) &&
              pardo_shape_equal(out[1]->ndim, out[1]->shape, 2, sb));
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < out[k]->numel; i++) ck_assert_double_eq(pardo_tensor_get_f64(out[k], i), 0);
    pardo_tensor_release(out[0]);
    pardo_tensor_release(out[1]);
    pardo_tensor_release(a);
    pardo_tensor_release(b);
    pardo_tensor_release(dc);
}
END_TEST

START_TEST(test_err_gradients) {
    pardo_status st;
    int64_t s3[] = {3};
    pardo_type a = test_type(PARDO_I32, 1, s3), c = a, dc = a, out[2];
    const pardo_type *in[4] = {&a, &a, &c, &dc};
    /* integer operands have no gradient */
    ck_assert_int_eq(test_infer_op("add_grad", NULL, 4, in, 2, out, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "int32") && strstr(st.msg, "gradient"), "message: %s", st.msg);
    pardo_type x = test_type(PARDO_F32, 1, s3), y64 = test_type(PARDO_F64, 1, s3);
    const pardo_type *uin[3] = {&x, &x, &y64};
    ck_assert_int_eq(test_infer_op("exp_grad", NULL, 3, uin, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'dY'") && strstr(st.msg, "float64"), "message: %s", st.msg);
    pardo_type y4 = test_type(PARDO_F32, 1, (int64_t[]){4});
    uin[1] = &y4;
    uin[2] = NULL;
    ck_assert_int_eq(test_infer_op("sqrt_grad", NULL, 3, uin, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'Y'") && strstr(st.msg, "[4]"), "message: %s", st.msg);
    /* the gradient ops check the forward attrs too */
    uin[1] = &x;
    ck_assert_int_eq(test_infer_op("pow_grad", NULL, 3, uin, 1, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'exponent'") != NULL, "message: %s", st.msg);
}
END_TEST

START_TEST(test_err_unary_attrs) {
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 1, (int64_t[]){3}), y;
    const pardo_type *in[1] = {&x};
    ck_assert_int_eq(test_infer_op("pow", NULL, 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'exponent'") && strstr(st.msg, "required"), "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("pow", "{\"exponent\": \"two\"}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'exponent'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("clip", "{\"min\": [0]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'min'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("clip", "{\"max\": true}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'max'") != NULL, "message: %s", st.msg);
}
END_TEST

/* Output 0 of op `type` (no attrs) on in[0..n_in) with a kernel ctx of
 * nthreads threads (ops of block 0 split big tensors over the pool);
 * the caller releases it. */
static pardo_tensor *run_threads(const char *type, int n_in, pardo_tensor **in, int n_out, int nthreads) {
    pardo_op op;
    memset(&op, 0, sizeof op);
    char tname[32], o0[] = "y", o1[] = "y2", *outs[2] = {o0, o1};
    snprintf(tname, sizeof tname, "%s", type);
    op.type = tname;
    op.def = pardo_op_lookup(type);
    op.out = outs;
    op.n_out = n_out;
    pardo_tensor *out[2] = {NULL, NULL};
    pardo_status st;
    pardo_kernel_ctx ctx = {.op = &op, .n_in = n_in, .in = in, .n_out = n_out, .out = out, .st = &st,
                            .device = PARDO_DEVICE_CPU, .nthreads = nthreads};
    ck_assert_msg(op.def->cpu(&ctx) == PARDO_OK, "%s: %s", type, st.msg);
    pardo_tensor_release(out[1]);
    return out[0];
}

START_TEST(test_split_over_threads) {
    /* big enough to be split into chunks over 2 threads: the same bits as one thread */
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert(pardo_thread_pool_configure(2, &st) == PARDO_OK);
    test_rng r = {11};
    struct {
        const char *op;
        int nd0, nd1;
        int64_t s0[2], s1[2];
    } cases[] = {
        {"add", 2, 1, {301, 257}, {257}},   /* a bias: rows of the output, chunks cut across them */
        {"sub", 2, 2, {257, 1}, {1, 300}},  /* an outer product */
        {"mul", 1, 1, {70001}, {70001}},    /* one merged dim */
        {"div", 2, 1, {2, 40000}, {1}},     /* a scalar */
    };
    for (int c = 0; c < LEN(cases); c++) {
        pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F32, cases[c].nd0, cases[c].s0, -1, 1),
                               test_tensor_random(&r, PARDO_F32, cases[c].nd1, cases[c].s1, 0.5, 1)};
        pardo_tensor *y1 = run_threads(cases[c].op, 2, in, 1, 1), *y2 = run_threads(cases[c].op, 2, in, 1, 2);
        ck_assert_msg(y1->nbytes > 0 && memcmp(pardo_tensor_data(y1), pardo_tensor_data(y2), y1->nbytes) == 0,
                      "%s: 2 threads differ from 1", cases[c].op);
        pardo_tensor *y3 = NULL;
        ck_assert_int_eq(test_run_op(cases[c].op, NULL, 2, in, 1, &y3, &st), PARDO_OK);
        test_assert_close(y2, y3, 0, 0);
        pardo_tensor_release(y1);
        pardo_tensor_release(y2);
        pardo_tensor_release(y3);
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
    int64_t sx[2] = {300, 259};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, sx, -2, 2), *dy = test_tensor_random(&r, PARDO_F64, 2, sx, -1, 1);
    pardo_tensor *y1 = run_threads("relu", 1, &x, 1, 1), *y2 = run_threads("tanh", 1, &x, 1, 2);
    pardo_tensor *y1b = run_threads("relu", 1, &x, 1, 2), *y2b = run_threads("tanh", 1, &x, 1, 1);
    ck_assert(memcmp(pardo_tensor_data(y1), pardo_tensor_data(y1b), y1->nbytes) == 0);
    ck_assert(memcmp(pardo_tensor_data(y2), pardo_tensor_data(y2b), y2->nbytes) == 0);
    pardo_tensor *gin[3] = {x, y1, dy};
    pardo_tensor *g1 = run_threads("relu_grad", 3, gin, 1, 1), *g2 = run_threads("relu_grad", 3, gin, 1, 2);
    ck_assert(memcmp(pardo_tensor_data(g1), pardo_tensor_data(g2), g1->nbytes) == 0);
    const double *xd = pardo_tensor_data(x), *gd = pardo_tensor_data(g2), *dyd = pardo_tensor_data(dy);
    for (int64_t i = 0; i < x->numel; i++) ck_assert(gd[i] == (xd[i] > 0 ? dyd[i] : 0));
    pardo_tensor *all[] = {x, dy, y1, y2, y1b, y2b, g1, g2};
    for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
}
END_TEST

/* pow with the exponent as input 1 (ONNX Pow): broadcasting, mixed dtypes, exact ints, both gradients. */
START_TEST(test_pow_tensor_exponent) {
    pardo_status st;
    test_rng r = {1234};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){2, 3}, 0.5, 2);
    pardo_tensor *e = test_tensor_random(&r, PARDO_F64, 1, (int64_t[]){3}, -2, 2), *in[2] = {x, e}, *y = NULL;
    ck_assert_int_eq(test_run_op("pow", NULL, 2, in, 1, &y, &st), PARDO_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i),
                                pow(pardo_tensor_get_f64(x, i), pardo_tensor_get_f64(e, i % 3)), 1e-14);
    pardo_tensor_release(y);
    test_check_grad_default("pow", NULL, 2, in, 1, 3u);
    /* float32 ** int32, broadcast the other way ([3] against [2, 3]) */
    pardo_tensor *fb = test_tensor_from(PARDO_F32, 1, (int64_t[]){3}, (double[]){1.5, -2, 3});
    pardo_tensor *ie = test_tensor_from(PARDO_I32, 2, (int64_t[]){2, 3}, (double[]){2, 3, -1, 0, 1, 2});
    pardo_tensor *fi[2] = {fb, ie};
    ck_assert_int_eq(test_run_op("pow", NULL, 2, fi, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->dtype, PARDO_F32);
    ck_assert_int_eq(y->ndim, 2);
    static const double want_fi[6] = {2.25, -8, 1.0 / 3, 1, -2, 9};
    for (int i = 0; i < 6; i++) ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i), want_fi[i], 1e-6);
    pardo_tensor_release(y);
    /* int64 ** int64 exact beyond a double's 53 bits: 3^39; int32 ** float32 truncated */
    pardo_tensor *ib = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){3, -2});
    pardo_tensor *ix = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){39, 5}), *ii[2] = {ib, ix};
    ck_assert_int_eq(test_run_op("pow", NULL, 2, ii, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->dtype, PARDO_I64);
    int64_t p39 = 1;
    for (int k = 0; k < 39; k++) p39 *= 3;
    ck_assert(((const int64_t *)pardo_tensor_data(y))[0] == p39);
    ck_assert(((const int64_t *)pardo_tensor_data(y))[1] == -32);
    pardo_tensor_release(y);
    pardo_tensor *i3 = test_tensor_from(PARDO_I32, 1, (int64_t[]){2}, (double[]){2, 5});
    pardo_tensor *f3 = test_tensor_from(PARDO_F32, 1, (int64_t[]){2}, (double[]){1.5, 0.5}), *if3[2] = {i3, f3};
    ck_assert_int_eq(test_run_op("pow", NULL, 2, if3, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->dtype, PARDO_I32);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 2); /* 2.83 truncated */
    ck_assert_double_eq(pardo_tensor_get_f64(y, 1), 2); /* 2.24 truncated */
    pardo_tensor_release(y);
    /* refusals: a bool exponent, shapes that do not broadcast */
    pardo_type tx = test_type(PARDO_F32, 1, (int64_t[]){3}), tb = test_type(PARDO_BOOL, 1, (int64_t[]){3}),
               t4 = test_type(PARDO_F32, 1, (int64_t[]){4}), ty;
    const pardo_type *xb[2] = {&tx, &tb}, *x4[2] = {&tx, &t4};
    ck_assert_int_eq(test_infer_op("pow", NULL, 2, xb, 1, &ty, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("pow", NULL, 2, x4, 1, &ty, &st), PARDO_ESHAPE);
    pardo_tensor_release(f3);
    pardo_tensor_release(i3);
    pardo_tensor_release(ix);
    pardo_tensor_release(ib);
    pardo_tensor_release(ie);
    pardo_tensor_release(fb);
    pardo_tensor_release(e);
    pardo_tensor_release(x);
}
END_TEST

/* Every unary float op (the ops on the shared unary schema, pardo_unary_x_in)
 * on float16 and bfloat16: Y is the op's float32 result on X's values,
 * rounded to X's dtype, bit for bit (NaN included: both sides round the same
 * float32), over a length that is not a multiple of the kernel's block; and
 * the gradient ops still refuse the half types. */
START_TEST(test_unary_ops_take_half_types) {
    static const pardo_dtype halves[] = {PARDO_F16, PARDO_BF16};
    const int64_t n[] = {1000};
    int ops = 0;
    for (int i = 0; i < pardo_op_count(); i++) {
        const pardo_op_def *def = pardo_op_at(i);
        if (def->inputs != pardo_unary_x_in) continue;
        ops++;
        for (int h = 0; h < 2; h++) {
            test_rng r = {4000u + (uint64_t)(i * 2 + h)};
            pardo_tensor *x32 = test_tensor_random(&r, PARDO_F32, 1, n, -3, 3), *y32 = NULL, *yh = NULL;
            pardo_status st;
            pardo_tensor *xh = pardo_tensor_new_cpu(halves[h], 1, n, &st);
            ck_assert_ptr_nonnull(xh);
            uint16_t *hx = pardo_tensor_data(xh);
            float *fx = pardo_tensor_data(x32);
            for (int64_t e = 0; e < n[0]; e++) { /* X32 holds exactly X's values */
                hx[e] = h ? pardo_bf16_from_f32(fx[e]) : pardo_f16_from_f32(fx[e]);
                fx[e] = h ? pardo_bf16_to_f32(hx[e]) : pardo_f16_to_f32(hx[e]);
            }
            ck_assert_msg(test_run_op(def->type, NULL, 1, &x32, 1, &y32, &st) == PARDO_OK, "%s: %s", def->type, st.msg);
            ck_assert_msg(test_run_op(def->type, NULL, 1, &xh, 1, &yh, &st) == PARDO_OK, "%s %s: %s", def->type,
                          pardo_dtype_name(halves[h]), st.msg);
            ck_assert_int_eq(yh->dtype, halves[h]);
            const float *fy = pardo_tensor_data(y32);
            const uint16_t *hy = pardo_tensor_data(yh);
            for (int64_t e = 0; e < n[0]; e++) {
                const uint16_t want = h ? pardo_bf16_from_f32(fy[e]) : pardo_f16_from_f32(fy[e]);
                ck_assert_msg(hy[e] == want, "%s %s element %lld: 0x%04x, expected 0x%04x (x %g, float32 y %g)",
                              def->type, pardo_dtype_name(halves[h]), (long long)e, hy[e], want, (double)fx[e],
                              (double)fy[e]);
            }
            pardo_tensor_release(yh);
            pardo_tensor_release(y32);
            pardo_tensor_release(x32);
            pardo_tensor_release(xh);
        }
    }
    ck_assert_int_ge(ops, 30);
    pardo_type x = test_type(PARDO_F16, 1, n), y;
    const pardo_type *gin[3] = {&x, &x, &x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("exp_grad", NULL, 3, gin, 1, &y, &st), PARDO_ENOTSUP);
}
END_TEST

/* v reduced into dtype dt's range modulo 2^bits (dt an integer dtype): what wrapping arithmetic stores. */
static long double wrap_to(long double v, pardo_dtype dt) {
    const int bits = (int)pardo_dtype_size(dt) * 8;
    const long double m = ldexpl(1.0L, bits);
    long double w = fmodl(v, m);
    if (w < 0) w += m;
    const bool is_signed = dt == PARDO_I8 || dt == PARDO_I16 || dt == PARDO_I32 || dt == PARDO_I64;
    if (is_signed && w >= m / 2) w -= m;
    return w;
}

/* abs, neg and relu on the integer dtypes (their own kernels, wrapping at the
 * type's limits as NumPy does), and sign on every numeric dtype, against the
 * values worked out here in long double over spread values with the
 * extremes. */
START_TEST(test_unary_integer_kernels) {
    static const pardo_dtype ints[] = {PARDO_I8, PARDO_I16, PARDO_I32, PARDO_I64,
                                       PARDO_U8, PARDO_U16, PARDO_U32, PARDO_U64};
    static const char *const ops[] = {"abs", "neg", "relu"};
    const int64_t n[] = {517};
    for (int t = 0; t < LEN(ints); t++)
        for (int o = 0; o < 3; o++) {
            test_rng r = {5100u + (uint64_t)(t * 3 + o)};
            pardo_tensor *x = test_tensor_spread(&r, ints[t], 1, n), *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op(ops[o], NULL, 1, &x, 1, &y, &st) == PARDO_OK, "%s %s: %s", ops[o],
                          pardo_dtype_name(ints[t]), st.msg);
            ck_assert_int_eq(y->dtype, ints[t]);
            for (int64_t e = 0; e < n[0]; e++) {
                const long double v = test_elem_ld(pardo_tensor_data(x), ints[t], e);
                const long double want = wrap_to(o == 0 ? fabsl(v) : o == 1 ? -v : (v < 0 ? 0 : v), ints[t]);
                ck_assert_msg(test_elem_ld(pardo_tensor_data(y), ints[t], e) == want, "%s %s of %Lg: %Lg, expected %Lg",
                              ops[o], pardo_dtype_name(ints[t]), v, test_elem_ld(pardo_tensor_data(y), ints[t], e),
                              want);
            }
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
    static const pardo_dtype all[] = {PARDO_F32, PARDO_F64, PARDO_I8,  PARDO_I16, PARDO_I32, PARDO_I64,
                                      PARDO_U8,  PARDO_U16, PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
    for (int t = 0; t < LEN(all); t++) {
        test_rng r = {5200u + (uint64_t)t};
        pardo_tensor *x = test_tensor_spread(&r, all[t], 1, n), *y = NULL;
        pardo_status st;
        ck_assert_msg(test_run_op("sign", NULL, 1, &x, 1, &y, &st) == PARDO_OK, "sign %s: %s",
                      pardo_dtype_name(all[t]), st.msg);
        for (int64_t e = 0; e < n[0]; e++) {
            const long double v = test_elem_ld(pardo_tensor_data(x), all[t], e);
            const long double want = v > 0 ? 1 : v < 0 ? -1 : v;
            ck_assert_msg(test_elem_ld(pardo_tensor_data(y), all[t], e) == want, "sign %s of %Lg: %Lg",
                          pardo_dtype_name(all[t]), v, test_elem_ld(pardo_tensor_data(y), all[t], e));
        }
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
    /* the gradient ops take the floats only */
    pardo_status st;
    pardo_type xt = test_type(PARDO_I32, 1, n), yt;
    const pardo_type *gin[3] = {&xt, &xt, &xt};
    ck_assert_int_ne(test_infer_op("abs_grad", NULL, 3, gin, 1, &yt, &st), PARDO_OK);
    ck_assert_msg(strstr(st.msg, "int32") != NULL, "%s", st.msg);
}
END_TEST

Suite *make_ops_elementwise_suite(void) {
    Suite *s = suite_create("ops_elementwise");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_binary_broadcast);
    tcase_add_test(core, test_binary_narrow_dtypes);
    tcase_add_test(core, test_narrow_int_semantics);
    tcase_add_test(core, test_pow_narrow_exponents);
    tcase_add_test(core, test_int_semantics);
    tcase_add_test(core, test_unary);
    tcase_add_test(core, test_unary_ops_take_half_types);
    tcase_add_test(core, test_unary_integer_kernels);
    tcase_add_test(core, test_scale_default_and_special_values);
    tcase_add_test(core, test_infer_runtime_dims);
    tcase_add_test(core, test_reused_output_is_overwritten);
    tcase_add_test(core, test_binary_gradients);
    tcase_add_test(core, test_unary_gradients);
    tcase_add_test(core, test_pow_tensor_exponent);
    tcase_add_test(core, test_split_over_threads);
    tcase_add_test(core, test_gradient_special_points);
    tcase_add_test(core, test_binary_gradient_float32_and_absent_dc);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_bad_broadcast);
    tcase_add_test(errors, test_err_dtypes);
    tcase_add_test(errors, test_err_scale_attr);
    tcase_add_test(errors, test_err_int_div_by_zero);
    tcase_add_test(errors, test_err_runtime_shape_mismatch);
    tcase_add_test(errors, test_err_gradients);
    tcase_add_test(errors, test_err_unary_attrs);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_fixture_add);
    suite_add_tcase(s, fixtures);
    return s;
}
