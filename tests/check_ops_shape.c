/* check_ops_shape.c - reshape, flatten, transpose, concat and cast against
 * naive index arithmetic in the test, every dtype, edge sizes (scalars,
 * zero-size dims, single inputs); inference with run-time dims; attribute
 * errors (bad perm, two -1, size mismatch, bad axis, mismatched concat dims,
 * unknown dtype, missing attrs); the gradient ops against float64 finite
 * differences; NumPy fixtures for transpose and reshape. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/half.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct shape_t {
    int nd;
    int64_t d[PARDO_MAX_DIMS];
} shape_t;

static const pardo_dtype all_dtypes[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_BOOL};

/* Random integers that every dtype holds exactly (bool: 0 or 1). */
static pardo_tensor *random_of(test_rng *r, pardo_dtype dt, int nd, const int64_t *shape) {
    pardo_tensor *t = test_tensor_random(r, dt, nd, shape, -100, 100);
    for (int64_t i = 0; i < t->numel; i++) {
        double v = floor(test_rng_uniform(r, -100, 100));
        pardo_tensor_set_f64(t, i, dt == PARDO_BOOL ? (v < 0) : v);
    }
    return t;
}

static void expect_shape(const pardo_type *y, int nd, const int64_t *shape) {
    char a[128], b[128];
    ck_assert_msg(pardo_shape_equal(y->ndim, y->shape, nd, shape), "shape %s, expected %s",
                  pardo_shape_str(y->ndim, y->shape, a, sizeof a), pardo_shape_str(nd, shape, b, sizeof b));
}

static int infer1(const char *op, const char *attrs, pardo_type x, pardo_type *y, pardo_status *st) {
    const pardo_type *in[1] = {&x};
    return test_infer_op(op, attrs, 1, in, 1, y, st);
}

/* ---- reshape and flatten ---- */

typedef struct reshape_case {
    shape_t in;
    const char *attrs;
    shape_t out;
} reshape_case;

START_TEST(test_reshape) {
    static const reshape_case cases[] = {
        {{3, {2, 3, 4}}, "{\"shape\": [0, -1]}", {2, {2, 12}}},
        {{3, {2, 3, 4}}, "{\"shape\": [4, 0, -1]}", {3, {4, 3, 2}}},
        {{3, {2, 3, 4}}, "{\"shape\": [-1]}", {1, {24}}},
        {{1, {24}}, "{\"shape\": [2, -1, 3]}", {3, {2, 4, 3}}},
        {{1, {24}}, "{\"shape\": [2, 3, 4]}", {3, {2, 3, 4}}},
        {{2, {0, 3}}, "{\"shape\": [-1, 3]}", {2, {0, 3}}},
        {{3, {2, 0, 3}}, "{\"shape\": [0, 0, 3]}", {3, {2, 0, 3}}},
        {{2, {3, 0}}, "{\"shape\": [0, -1]}", {2, {3, 0}}},
        {{0, {0}}, "{\"shape\": [1, -1]}", {2, {1, 1}}},
        {{2, {1, 1}}, "{\"shape\": []}", {0, {0}}},
        {{4, {2, 3, 2, 2}}, "{\"shape\": [0, 0, -1]}", {3, {2, 3, 4}}},
        {{2, {5, 7}}, "{\"shape\": 35}", {1, {35}}},
    };
    for (int c = 0; c < LEN(cases); c++)
        for (int t = 0; t < LEN(all_dtypes); t++) {
            test_rng r = {10u + (uint64_t)(c * 8 + t)};
            pardo_tensor *x = random_of(&r, all_dtypes[t], cases[c].in.nd, cases[c].in.d), *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("reshape", cases[c].attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s",
                          cases[c].attrs, st.msg);
            pardo_type ty = pardo_tensor_type(y);
            expect_shape(&ty, cases[c].out.nd, cases[c].out.d);
            ck_assert_int_eq(y->dtype, x->dtype);
            for (int64_t i = 0; i < x->numel; i++)
                ck_assert_double_eq(pardo_tensor_get_f64(y, i), pardo_tensor_get_f64(x, i));
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_reshape_flatten_infer) {
    pardo_type y;
    pardo_status st;
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [0, -1]}", test_type(PARDO_F32, 3, (int64_t[]){-1, 4, 8}), &y, &st),
                     PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, 32}); /* the copied run-time dim cancels out */
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [2, -1]}", test_type(PARDO_I64, 2, (int64_t[]){-1, 4}), &y, &st),
                     PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){2, -1});
    ck_assert_int_eq(y.dtype, PARDO_I64);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [3, 0]}", test_type(PARDO_F32, -1, NULL), &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){3, -1});
    ck_assert_int_eq(infer1("flatten", NULL, test_type(PARDO_F32, 3, (int64_t[]){-1, 3, 4}), &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, 12});
    ck_assert_int_eq(infer1("flatten", "{\"axis\": 2}", test_type(PARDO_BOOL, 3, (int64_t[]){-1, 3, 4}), &y, &st),
                     PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, 4});
    ck_assert_int_eq(y.dtype, PARDO_BOOL);
}
END_TEST

START_TEST(test_flatten) {
    static const struct {
        shape_t in;
        int axis;
        int64_t rows, cols;
    } cases[] = {
        {{3, {2, 3, 4}}, 0, 1, 24}, {{3, {2, 3, 4}}, 1, 2, 12}, {{3, {2, 3, 4}}, 3, 24, 1}, {{3, {2, 3, 4}}, -1, 6, 4},
        {{3, {2, 3, 4}}, -3, 1, 24}, {{0, {0}}, 0, 1, 1},       {{2, {0, 5}}, 1, 0, 5},      {{1, {7}}, 1, 7, 1},
    };
    for (int c = 0; c < LEN(cases); c++)
        for (int t = 0; t < LEN(all_dtypes); t++) {
            test_rng r = {40u + (uint64_t)(c * 8 + t)};
            pardo_tensor *x = random_of(&r, all_dtypes[t], cases[c].in.nd, cases[c].in.d), *y = NULL;
            char attrs[32];
            snprintf(attrs, sizeof attrs, "{\"axis\": %d}", cases[c].axis);
            pardo_status st;
            ck_assert_msg(test_run_op("flatten", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
            pardo_type ty = pardo_tensor_type(y);
            expect_shape(&ty, 2, (int64_t[]){cases[c].rows, cases[c].cols});
            for (int64_t i = 0; i < x->numel; i++)
                ck_assert_double_eq(pardo_tensor_get_f64(y, i), pardo_tensor_get_f64(x, i));
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

/* ---- transpose ---- */

/* The naive transpose: output element i comes from the input element whose
 * index has out index k at dim perm[k]. */
static pardo_tensor *ref_transpose(const pardo_tensor *x, const int *perm) {
    int64_t shape[PARDO_MAX_DIMS], idx[PARDO_MAX_DIMS], src[PARDO_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) shape[k] = x->shape[perm[k]];
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, x->ndim, shape, &st);
    for (int64_t i = 0; i < y->numel; i++) {
        int64_t rest = i;
        for (int k = x->ndim - 1; k >= 0; k--) {
            idx[k] = rest % shape[k];
            rest /= shape[k];
        }
        for (int k = 0; k < x->ndim; k++) src[perm[k]] = idx[k];
        int64_t li = 0;
        for (int d = 0; d < x->ndim; d++) li = li * x->shape[d] + src[d];
        pardo_tensor_set_f64(y, i, pardo_tensor_get_f64(x, li));
    }
    return y;
}

typedef struct transpose_case {
    shape_t in;
    const char *attrs; // NULL: reversed
    int perm[PARDO_MAX_DIMS];
} transpose_case;

static const transpose_case tcases[] = {
    {{2, {3, 4}}, NULL, {1, 0}},
    {{2, {3, 4}}, "{\"perm\": [0, 1]}", {0, 1}},
    {{3, {2, 3, 4}}, "{\"perm\": [2, 0, 1]}", {2, 0, 1}},
    {{3, {2, 3, 4}}, NULL, {2, 1, 0}},
    {{4, {2, 3, 1, 5}}, "{\"perm\": [0, 2, 1, 3]}", {0, 2, 1, 3}},
    {{4, {3, 2, 4, 2}}, "{\"perm\": [3, 1, 0, 2]}", {3, 1, 0, 2}},
    {{1, {7}}, NULL, {0}},
    {{0, {0}}, NULL, {0}},
    {{3, {2, 0, 3}}, "{\"perm\": [1, 2, 0]}", {1, 2, 0}},
    {{2, {1, 9}}, NULL, {1, 0}},
};

START_TEST(test_transpose) {
    for (int c = 0; c < LEN(tcases); c++)
        for (int t = 0; t < LEN(all_dtypes); t++) {
            test_rng r = {70u + (uint64_t)(c * 8 + t)};
            pardo_tensor *x = random_of(&r, all_dtypes[t], tcases[c].in.nd, tcases[c].in.d), *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("transpose", tcases[c].attrs, 1, &x, 1, &y, &st) == PARDO_OK, "case %d: %s", c,
                          st.msg);
            pardo_tensor *want = ref_transpose(x, tcases[c].perm);
            test_assert_close(y, want, 0, 0);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_transpose_infer) {
    pardo_type y;
    pardo_status st;
    ck_assert_int_eq(infer1("transpose", "{\"perm\": [1, 2, 0]}", test_type(PARDO_F32, 3, (int64_t[]){-1, 3, 4}), &y,
                            &st),
                     PARDO_OK);
    expect_shape(&y, 3, (int64_t[]){3, 4, -1});
    ck_assert_int_eq(infer1("transpose", "{\"perm\": [1, 0]}", test_type(PARDO_I32, -1, NULL), &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, -1});
    ck_assert_int_eq(infer1("transpose", NULL, test_type(PARDO_I32, -1, NULL), &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, -1);
}
END_TEST

/* ---- concat ---- */

typedef struct concat_case {
    int n;
    shape_t in[3];
    int axis;
} concat_case;

static const concat_case ccases[] = {
    {2, {{2, {2, 3}}, {2, {4, 3}}}, 0},
    {3, {{2, {2, 3}}, {2, {2, 1}}, {2, {2, 5}}}, 1},
    {2, {{3, {2, 3, 4}}, {3, {2, 3, 2}}}, -1},
    {3, {{3, {2, 0, 3}}, {3, {2, 2, 3}}, {3, {2, 1, 3}}}, 1},
    {1, {{2, {3, 4}}}, 0},
    {2, {{1, {5}}, {1, {0}}}, 0},
    {2, {{3, {1, 2, 3}}, {3, {4, 2, 3}}}, -3},
};

/* The naive concat: output element i, at index k along axis, comes from the
 * input whose range along axis holds k. */
static pardo_tensor *ref_concat(int n, pardo_tensor *const *x, int axis) {
    int64_t shape[PARDO_MAX_DIMS], idx[PARDO_MAX_DIMS];
    int nd = x[0]->ndim;
    memcpy(shape, x[0]->shape, sizeof shape);
    shape[axis] = 0;
    for (int k = 0; k < n; k++) shape[axis] += x[k]->shape[axis];
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x[0]->dtype, nd, shape, &st);
    for (int64_t i = 0; i < y->numel; i++) {
        int64_t rest = i;
        for (int d = nd - 1; d >= 0; d--) {
            idx[d] = rest % shape[d];
            rest /= shape[d];
        }
        int k = 0;
        while (idx[axis] >= x[k]->shape[axis]) idx[axis] -= x[k++]->shape[axis];
        int64_t li = 0;
        for (int d = 0; d < nd; d++) li = li * x[k]->shape[d] + idx[d];
        pardo_tensor_set_f64(y, i, pardo_tensor_get_f64(x[k], li));
    }
    return y;
}

START_TEST(test_concat) {
    for (int c = 0; c < LEN(ccases); c++)
        for (int t = 0; t < LEN(all_dtypes); t++) {
            test_rng r = {110u + (uint64_t)(c * 8 + t)};
            pardo_tensor *x[3], *y = NULL;
            for (int k = 0; k < ccases[c].n; k++)
                x[k] = random_of(&r, all_dtypes[t], ccases[c].in[k].nd, ccases[c].in[k].d);
            char attrs[32];
            snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ccases[c].axis);
            pardo_status st;
            ck_assert_msg(test_run_op("concat", attrs, ccases[c].n, x, 1, &y, &st) == PARDO_OK, "case %d: %s", c,
                          st.msg);
            int axis = ccases[c].axis < 0 ? ccases[c].axis + x[0]->ndim : ccases[c].axis;
            pardo_tensor *want = ref_concat(ccases[c].n, x, axis);
            test_assert_close(y, want, 0, 0);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            for (int k = 0; k < ccases[c].n; k++) pardo_tensor_release(x[k]);
        }
}
END_TEST

START_TEST(test_concat_infer) {
    pardo_type a = test_type(PARDO_F32, 2, (int64_t[]){-1, 3}), b = test_type(PARDO_F32, 2, (int64_t[]){-1, 5}), y;
    const pardo_type *in[2] = {&a, &b};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 1}", 2, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, 8});
    b = test_type(PARDO_F32, 2, (int64_t[]){4, 3});
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 0}", 2, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, 3});
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": -1}", 2, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){4, 6}); /* the -1 rows are 4 like b's */
    a = test_type(PARDO_F32, -1, NULL);
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 1}", 2, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){4, -1});
}
END_TEST

/* ---- cast ---- */

START_TEST(test_cast_values) {
    const double xs[] = {-2.7, -0.5, 0, 0.5, 2.7, 3e9, -3e9, 1e19, -1e19, NAN, INFINITY, -INFINITY};
    int64_t n = LEN(xs);
    const double to_i32[] = {-2, 0, 0, 0, 2, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN};
    const double to_i64[] = {-2, 0, 0, 0, 2, 3e9, -3e9, (double)INT64_MAX, (double)INT64_MIN, 0, (double)INT64_MAX,
                             (double)INT64_MIN};
    const double to_b[] = {1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int t = 0; t < 2; t++) {
        pardo_tensor *x = test_tensor_from(t ? PARDO_F64 : PARDO_F32, 1, &n, xs), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"int32\"}", 1, &x, 1, &y, &st), PARDO_OK);
        ck_assert_int_eq(y->dtype, PARDO_I32);
        for (int i = 0; i < n; i++)
            ck_assert_msg(pardo_tensor_get_f64(y, i) == to_i32[i], "int32(%g) = %g", xs[i], pardo_tensor_get_f64(y, i));
        pardo_tensor_release(y);
        ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"int64\"}", 1, &x, 1, &y, &st), PARDO_OK);
        for (int i = 0; i < n; i++) {
            double want = to_i64[i];
            if (!t && fabs(xs[i]) == 3e9) want = (double)(float)xs[i]; /* 3e9 as a float is 3000000000 exactly */
            ck_assert_msg(pardo_tensor_get_f64(y, i) == want, "int64(%g) = %g", xs[i], pardo_tensor_get_f64(y, i));
        }
        pardo_tensor_release(y);
        ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"bool\"}", 1, &x, 1, &y, &st), PARDO_OK);
        for (int i = 0; i < n; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), to_b[i]);
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
    /* int64 to int32 wraps around; bool to float is 0 or 1; int32 to float64 exact */
    int64_t three = 3;
    pardo_tensor *x = test_tensor_from(PARDO_I64, 1, &three, (double[]){4294967301.0, -1, 2147483648.0}), *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"int32\"}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 5);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 1), -1);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 2), INT32_MIN);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
    x = test_tensor_from(PARDO_BOOL, 1, &three, (double[]){1, 0, 1});
    ((uint8_t *)pardo_tensor_data(x))[2] = 7; /* any nonzero byte is true */
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"float32\"}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 1);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 1), 0);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 2), 1);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_cast_every_pair) {
    /* every dtype to every dtype on values each one holds: the same numbers
     * (bool: value != 0), shapes kept */
    static const shape_t shapes[] = {{2, {3, 5}}, {0, {0}}, {2, {0, 4}}};
    for (int s = 0; s < LEN(shapes); s++)
        for (int a = 0; a < LEN(all_dtypes); a++)
            for (int b = 0; b < LEN(all_dtypes); b++) {
                test_rng r = {150u + (uint64_t)(s * 64 + a * 8 + b)};
                pardo_tensor *x = random_of(&r, all_dtypes[a], shapes[s].nd, shapes[s].d), *y = NULL;
                char attrs[48];
                snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", pardo_dtype_name(all_dtypes[b]));
                pardo_status st;
                ck_assert_msg(test_run_op("cast", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
                ck_assert_int_eq(y->dtype, all_dtypes[b]);
                ck_assert(pardo_shape_equal(y->ndim, y->shape, x->ndim, x->shape));
                for (int64_t i = 0; i < x->numel; i++) {
                    double v = pardo_tensor_get_f64(x, i), want = all_dtypes[b] == PARDO_BOOL ? (v != 0) : v;
                    ck_assert_double_eq(pardo_tensor_get_f64(y, i), want);
                }
                pardo_tensor_release(y);
                pardo_tensor_release(x);
            }
}
END_TEST

/* The value a dtype holds after a cast from the exact value v (C truncation, then the low bits of an integer
 * target, worked in doubles with fmod; but a float past int32's range saturates an int32 target, as cast.c
 * documents; float targets round to nearest), for the reference of every pair. */
static double cast_ref(double v, bool from_float, pardo_dtype to) {
    if (to == PARDO_I32 && from_float && fabs(trunc(v)) >= 2147483648.0)
        return v < 0 ? -2147483648.0 : 2147483647.0;
    int bits = 0;
    bool sgn = false;
    switch (to) {
    case PARDO_BOOL: return v != 0;
    case PARDO_F32: return (double)(float)v;
    case PARDO_F64: return v;
    case PARDO_F16: return pardo_f16_to_f64(pardo_f16_from_f64(v));
    case PARDO_BF16: return pardo_bf16_to_f64(pardo_bf16_from_f64(v));
    case PARDO_I8: bits = 8, sgn = true; break;
    case PARDO_I16: bits = 16, sgn = true; break;
    case PARDO_I32: bits = 32, sgn = true; break;
    case PARDO_I64: bits = 64, sgn = true; break;
    case PARDO_U8: bits = 8; break;
    case PARDO_U16: bits = 16; break;
    case PARDO_U32: bits = 32; break;
    default: bits = 64; break;
    }
    const double t = trunc(v), m = ldexp(1.0, bits);
    if (bits == 64) return sgn || t >= 0 ? t : t + m; /* the values here fit int64; fmod at 2^64 would round */
    double w = fmod(t, m);
    if (w < 0) w += m;
    if (sgn && w >= m / 2) w -= m;
    return w;
}

/* True when dtype dt holds v exactly as set from a double (an int in range, or a float). */
static bool holds(pardo_dtype dt, double v) {
    if (dt == PARDO_BOOL) return v == 0 || v == 1;
    if (!pardo_dtype_is_integer(dt)) return true;
    if (v != floor(v)) return false;
    const double two = 2.0;
    switch (dt) {
    case PARDO_I8: return v >= -128 && v < 128;
    case PARDO_I16: return v >= -32768 && v < 32768;
    case PARDO_I32: return v >= -pow(two, 31) && v < pow(two, 31);
    case PARDO_U8: return v >= 0 && v < 256;
    case PARDO_U16: return v >= 0 && v < 65536;
    case PARDO_U32: return v >= 0 && v < pow(two, 32);
    case PARDO_U64: return v >= 0 && v < pow(two, 53);
    default: return fabs(v) < pow(two, 53);
    }
}

/* Every dtype to every dtype, on values around each integer width's edges and the halves' range, against
 * cast_ref (float sources: the value they hold; out-of-range floats wrap like numpy's). */
START_TEST(test_cast_every_pair_of_all_dtypes) {
    static const double vals[] = {0,     1,      -1,     2.7,        -2.7,         0.5,     127,     128,
                                  255,   256,    300,    -129,       -128,         32767,   32768,   -32769,
                                  65535, 65536,  65504,  65520,      1e5,          -1e5,    1e9,     4294967295.0,
                                  -4294967296.0, 0.1,    1e-5,       3.140625,     -0.0,    2147483648.0, 123456789};
    for (int a = 0; a < PARDO_DTYPE_COUNT; a++) {
        const pardo_dtype from = (pardo_dtype)a;
        double src[64];
        int64_t n = 0;
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++)
            if (holds(from, vals[k])) src[n++] = vals[k];
        pardo_tensor *x = test_tensor_from(from, 1, &n, src);
        for (int b = 0; b < PARDO_DTYPE_COUNT; b++) {
            const pardo_dtype to = (pardo_dtype)b;
            char attrs[48];
            snprintf(attrs, sizeof attrs, "{\"dtype\": \"%s\"}", pardo_dtype_name(to));
            pardo_status st;
            pardo_tensor *y = NULL;
            ck_assert_msg(test_run_op("cast", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
            ck_assert_int_eq(y->dtype, to);
            for (int64_t i = 0; i < n; i++) {
                if (!isfinite(pardo_tensor_get_f64(x, i)) && pardo_dtype_is_integer(to)) continue; /* by hand below */
                const bool from_float = !pardo_dtype_is_integer(from) && from != PARDO_BOOL;
                const double v = pardo_tensor_get_f64(x, i), want = cast_ref(v, from_float, to),
                             got = pardo_tensor_get_f64(y, i);
                ck_assert_msg(got == want, "%s %.17g -> %s: %.17g, expected %.17g", pardo_dtype_name(from), v,
                              pardo_dtype_name(to), got, want);
            }
            pardo_tensor_release(y);
        }
        pardo_tensor_release(x);
    }
}
END_TEST

/* Casts worked by hand: the bits of float16 / bfloat16 results, NaN and Inf, wraparound, int64 and uint64
 * past 2^53 (a bfloat16 from int64 rounds once: through a plain double it would round twice). */
START_TEST(test_cast_narrow_by_hand) {
    pardo_status st;
    pardo_tensor *y = NULL;
    int64_t n = 4;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 1, &n, (double[]){0.1, NAN, -INFINITY, 65520});
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"float16\"}", 1, &x, 1, &y, &st), PARDO_OK);
    const uint16_t *h = pardo_tensor_data(y);
    ck_assert_uint_eq(h[0], 0x2e66);
    ck_assert_uint_eq(h[1] & 0x7e00, 0x7e00);
    ck_assert_uint_eq(h[2], 0xfc00);
    ck_assert_uint_eq(h[3], 0x7c00);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"bfloat16\"}", 1, &x, 1, &y, &st), PARDO_OK);
    h = pardo_tensor_data(y);
    ck_assert_uint_eq(h[0], 0x3dcd); /* 0x3dcccccd rounded, not truncated (0x3dcc) */
    ck_assert_uint_eq(h[1] & 0x7fc0, 0x7fc0);
    ck_assert_uint_eq(h[2], 0xff80);
    ck_assert_uint_eq(h[3], 0x477f + 1); /* 65520 = 0x477ff000: rounds up to 0x4780 (65536) */
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"uint8\"}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_uint_eq(((const uint8_t *)pardo_tensor_data(y))[1], 0); /* NaN: 0 */
    ck_assert_uint_eq(((const uint8_t *)pardo_tensor_data(y))[2], 0); /* -Inf: int64's least, whose low bits are 0 */
    ck_assert_uint_eq(((const uint8_t *)pardo_tensor_data(y))[3], 65520 % 256);
    pardo_tensor_release(y);
    pardo_tensor_release(x);

    int64_t two = 2;
    x = pardo_tensor_new_cpu(PARDO_I64, 1, &two, &st);
    /* just above the tie of 2^62 and 2^62 + 2^55 */
    ((int64_t *)pardo_tensor_data(x))[0] = (1LL << 62) + (1LL << 54) + 1;
    ((int64_t *)pardo_tensor_data(x))[1] = INT64_MIN;
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"bfloat16\"}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_uint_eq(((const uint16_t *)pardo_tensor_data(y))[0], 0x5e81);
    ck_assert_uint_eq(((const uint16_t *)pardo_tensor_data(y))[1], 0xdf00); /* -2^63 */
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"uint64\"}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_uint_eq(((const uint64_t *)pardo_tensor_data(y))[1], 1ULL << 63);
    pardo_tensor *u = y;
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"int64\"}", 1, &u, 1, &y, &st), PARDO_OK);
    ck_assert(memcmp(pardo_tensor_data(y), pardo_tensor_data(x), 16) == 0); /* back bit for bit */
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"float64\"}", 1, &u, 1, &y, &st), PARDO_OK);
    ck_assert(((const double *)pardo_tensor_data(y))[1] == 9223372036854775808.0); /* unsigned, not -2^63 */
    pardo_tensor_release(y);
    pardo_tensor_release(u);
    pardo_tensor_release(x);

    x = test_tensor_from(PARDO_F64, 1, &two, (double[]){1e30, -1.5});
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"uint64\"}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_uint_eq(((const uint64_t *)pardo_tensor_data(y))[0], UINT64_MAX); /* saturates */
    ck_assert_uint_eq(((const uint64_t *)pardo_tensor_data(y))[1], UINT64_MAX); /* -1 wraps, as numpy's */
    pardo_tensor_release(y);
    pardo_tensor_release(x);
    /* large runs cross the kernel's chunks: every element converted */
    int64_t big = 1500;
    x = pardo_tensor_new_cpu(PARDO_U16, 1, &big, &st);
    for (int64_t i = 0; i < big; i++) ((uint16_t *)pardo_tensor_data(x))[i] = (uint16_t)(i * 41);
    ck_assert_int_eq(test_run_op("cast", "{\"dtype\": \"int8\"}", 1, &x, 1, &y, &st), PARDO_OK);
    for (int64_t i = 0; i < big; i++)
        ck_assert_int_eq(((const int8_t *)pardo_tensor_data(y))[i], (int8_t)(uint8_t)(i * 41));
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

/* ---- gradients ---- */

START_TEST(test_gradients) {
    static const struct {
        const char *op, *attrs;
        shape_t in;
    } cases[] = {
        {"identity", NULL, {2, {3, 4}}},
        {"reshape", "{\"shape\": [0, -1]}", {3, {2, 3, 4}}},
        {"reshape", "{\"shape\": [2, 3]}", {1, {6}}},
        {"flatten", "{\"axis\": 0}", {3, {2, 3, 2}}},
        {"flatten", "{\"axis\": 2}", {3, {2, 3, 2}}},
        {"transpose", NULL, {3, {2, 3, 4}}},
        {"transpose", "{\"perm\": [0, 2, 1, 3]}", {4, {2, 3, 1, 2}}},
        {"transpose", "{\"perm\": [1, 0]}", {2, {1, 5}}},
        {"cast", "{\"dtype\": \"float64\"}", {2, {3, 4}}},
        {"cast", "{\"dtype\": \"float64\"}", {0, {0}}},
    };
    for (int c = 0; c < LEN(cases); c++) {
        test_rng r = {200u + (uint64_t)c};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, cases[c].in.nd, cases[c].in.d, -1, 1);
        test_check_grad_default(cases[c].op, cases[c].attrs, 1, &x, 1, 1u);
        pardo_tensor_release(x);
    }
    /* float64 -> float32 -> back: the forward rounds to float32, so the
     * finite differences need a wide step */
    test_rng r = {250};
    int64_t s[] = {3, 4};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, s, -1, 1);
    test_check_grad("cast", "{\"dtype\": \"float32\"}", 1, &x, 1, 1u, 1e-2, 1e-4);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_concat_gradients) {
    for (int c = 0; c < LEN(ccases); c++) {
        test_rng r = {260u + (uint64_t)c};
        pardo_tensor *x[3];
        for (int k = 0; k < ccases[c].n; k++)
            x[k] = test_tensor_random(&r, PARDO_F64, ccases[c].in[k].nd, ccases[c].in[k].d, -1, 1);
        char attrs[32];
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", ccases[c].axis);
        unsigned all = (1u << ccases[c].n) - 1;
        test_check_grad_default("concat", attrs, ccases[c].n, x, 1, all);
        if (ccases[c].n == 3) test_check_grad_default("concat", attrs, 3, x, 1, 5u); /* the middle one left out */
        for (int k = 0; k < ccases[c].n; k++) pardo_tensor_release(x[k]);
    }
}
END_TEST

START_TEST(test_gradient_absent_dy) {
    int64_t sa[] = {2, 3}, sb[] = {2, 2};
    test_rng r = {9};
    pardo_tensor *x[2] = {test_tensor_random(&r, PARDO_F32, 2, sa, -1, 1),
                          test_tensor_random(&r, PARDO_F32, 2, sb, -1, 1)};
    pardo_tensor *y = NULL, *dx[2] = {NULL, NULL};
    pardo_status st;
    ck_assert_int_eq(test_run_op("concat", "{\"axis\": 1}", 2, x, 1, &y, &st), PARDO_OK);
    pardo_tensor *in[4] = {x[0], x[1], y, NULL};
    ck_assert_int_eq(test_run_op("concat_grad", "{\"axis\": 1}", 4, in, 2, dx, &st), PARDO_OK);
    for (int k = 0; k < 2; k++) {
        ck_assert(pardo_shape_equal(dx[k]->ndim, dx[k]->shape, x[k]->ndim, x[k]->shape));
        for (int64_t i = 0; i < dx[k]->numel; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx[k], i), 0);
        pardo_tensor_release(dx[k]);
    }
    /* float32 transpose_grad undoes the transpose exactly */
    pardo_tensor *t = NULL, *g = NULL;
    ck_assert_int_eq(test_run_op("transpose", NULL, 1, &x[0], 1, &t, &st), PARDO_OK);
    pardo_tensor *tin[3] = {x[0], t, t};
    ck_assert_int_eq(test_run_op("transpose_grad", NULL, 3, tin, 1, &g, &st), PARDO_OK);
    test_assert_close(g, x[0], 0, 0);
    pardo_tensor_release(g);
    pardo_tensor_release(t);
    pardo_tensor_release(y);
    pardo_tensor_release(x[0]);
    pardo_tensor_release(x[1]);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_err_reshape) {
    pardo_type y, x = test_type(PARDO_F32, 3, (int64_t[]){2, 3, 4});
    pardo_status st;
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [-1, -1]}", x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'shape'") && strstr(st.msg, "-1"), "message: %s", st.msg);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [5, -1]}", x, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[2, 3, 4]") && strstr(st.msg, "[5, -1]"), "message: %s", st.msg);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [7]}", x, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [0, 0, 0, 0]}", x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "element 3") && strstr(st.msg, "rank 3"), "message: %s", st.msg);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [2, -2, 12]}", x, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(infer1("reshape", NULL, x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'shape'") && strstr(st.msg, "required"), "message: %s", st.msg);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": \"flat\"}", x, &y, &st), PARDO_EINVAL);
    /* -1 next to a 0-size dim (given or copied): any size fits, like numpy an error */
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [0, -1]}", test_type(PARDO_F32, 2, (int64_t[]){0, 3}), &y, &st),
                     PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "ambiguous") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [-1, 0]}", test_type(PARDO_F32, 3, (int64_t[]){2, 0, 3}), &y, &st),
                     PARDO_ESHAPE);
    ck_assert_int_eq(infer1("reshape", "{\"shape\": [0, -1]}", test_type(PARDO_F32, 2, (int64_t[]){3, 0}), &y, &st),
                     PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){3, 0});
    ck_assert_int_eq(infer1("flatten", "{\"axis\": 4}", x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axis'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer1("flatten", "{\"axis\": -4}", x, &y, &st), PARDO_EINVAL);
}
END_TEST

START_TEST(test_err_transpose) {
    pardo_type y, x = test_type(PARDO_F32, 3, (int64_t[]){2, 3, 4});
    pardo_status st;
    const char *const bad[] = {"{\"perm\": [0, 0, 1]}", "{\"perm\": [0, 1, 3]}", "{\"perm\": [0, -1, 1]}",
                               "{\"perm\": [1, 0]}", "{\"perm\": [2, 1, 0, 3]}", "{\"perm\": \"reverse\"}"};
    for (int i = 0; i < LEN(bad); i++) {
        ck_assert_msg(infer1("transpose", bad[i], x, &y, &st) == PARDO_EINVAL, "%s accepted", bad[i]);
        ck_assert_msg(strstr(st.msg, "'perm'") != NULL, "%s: %s", bad[i], st.msg);
    }
    ck_assert_int_eq(infer1("transpose", bad[0], x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "twice") != NULL, "message: %s", st.msg);
    /* the gradient op checks perm too */
    const pardo_type *in[3] = {&x, &x, &x};
    ck_assert_int_eq(test_infer_op("transpose_grad", bad[1], 3, in, 1, &y, &st), PARDO_EINVAL);
}
END_TEST

START_TEST(test_err_concat) {
    pardo_status st;
    pardo_type a = test_type(PARDO_F32, 2, (int64_t[]){2, 3}), b = test_type(PARDO_F32, 2, (int64_t[]){2, 4}), y;
    const pardo_type *in[2] = {&a, &b};
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 0}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "input 1") && strstr(st.msg, "[2, 4]") && strstr(st.msg, "[2, 3]"), "message: %s",
                  st.msg);
    ck_assert_int_eq(test_infer_op("concat", NULL, 2, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axis'") && strstr(st.msg, "required"), "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 2}", 2, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axis'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": -3}", 2, in, 1, &y, &st), PARDO_EINVAL);
    b = test_type(PARDO_F64, 2, (int64_t[]){2, 4});
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 1}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float64") && strstr(st.msg, "float32"), "message: %s", st.msg);
    b = test_type(PARDO_F32, 3, (int64_t[]){2, 4, 1});
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 1}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    a = b = test_type(PARDO_F32, 0, NULL);
    ck_assert_int_eq(test_infer_op("concat", "{\"axis\": 0}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    /* integer inputs have no gradient */
    pardo_type i = test_type(PARDO_I32, 1, (int64_t[]){3}), out[2];
    const pardo_type *gin[4] = {&i, &i, &i, &i};
    ck_assert_int_eq(test_infer_op("concat_grad", "{\"axis\": 0}", 4, gin, 2, out, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "int32") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("concat_grad", "{\"axis\": 0}", 2, gin, 1, out, &st), PARDO_EINVAL);
}
END_TEST

START_TEST(test_err_cast) {
    pardo_type y, x = test_type(PARDO_F32, 1, (int64_t[]){3});
    pardo_status st;
    ck_assert_int_eq(infer1("cast", "{\"dtype\": \"float8\"}", x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'dtype'") && strstr(st.msg, "float8") && strstr(st.msg, "int64"), "message: %s",
                  st.msg);
    ck_assert_int_eq(infer1("cast", NULL, x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'dtype'") && strstr(st.msg, "required"), "message: %s", st.msg);
    ck_assert_int_eq(infer1("cast", "{\"dtype\": 3}", x, &y, &st), PARDO_EINVAL);
    /* casts from or to a non-float dtype have no gradient */
    pardo_type yi = test_type(PARDO_I32, 1, (int64_t[]){3});
    const pardo_type *in[3] = {&x, &yi, &yi};
    ck_assert_int_eq(test_infer_op("cast_grad", "{\"dtype\": \"int32\"}", 3, in, 1, &y, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "float32") && strstr(st.msg, "int32"), "message: %s", st.msg);
    int64_t n = 3;
    pardo_tensor *t[3] = {test_tensor_from(PARDO_F32, 1, &n, (double[]){1, 2, 3}),
                          test_tensor_from(PARDO_I32, 1, &n, (double[]){1, 2, 3}),
                          test_tensor_from(PARDO_I32, 1, &n, (double[]){1, 1, 1})},
                 *o = NULL;
    ck_assert_int_eq(test_run_op("cast_grad", "{\"dtype\": \"int32\"}", 3, t, 1, &o, &st), PARDO_ENOTSUP);
    /* reshape of an int tensor: no gradient either */
    pardo_tensor *rin[3] = {t[1], t[1], t[2]};
    ck_assert_int_eq(test_run_op("reshape_grad", "{\"shape\": [3]}", 3, rin, 1, &o, &st), PARDO_ENOTSUP);
    for (int k = 0; k < 3; k++) pardo_tensor_release(t[k]);
}
END_TEST

/* ---- NumPy fixtures ---- */

START_TEST(test_fixtures) {
    static const struct {
        const char *name, *op, *attrs;
    } fx[] = {
        {"transpose_201", "transpose", "{\"perm\": [2, 0, 1]}"},
        {"transpose_rev", "transpose", NULL},
        {"transpose_0213", "transpose", "{\"perm\": [0, 2, 1, 3]}"},
        {"reshape_0m1", "reshape", "{\"shape\": [0, -1]}"},
        {"reshape_m10", "reshape", "{\"shape\": [4, 0, -1]}"},
        {"reshape_00m1", "reshape", "{\"shape\": [0, 0, -1]}"},
    };
    for (int c = 0; c < LEN(fx); c++) {
        char name[96];
        snprintf(name, sizeof name, "ops/%s_x.npy", fx[c].name);
        pardo_tensor *x = test_npy_load(name), *y = NULL;
        snprintf(name, sizeof name, "ops/%s_y.npy", fx[c].name);
        pardo_tensor *want = test_npy_load(name);
        pardo_status st;
        ck_assert_msg(test_run_op(fx[c].op, fx[c].attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", fx[c].name, st.msg);
        test_assert_close(y, want, 0, 0);
        pardo_tensor_release(y);
        pardo_tensor_release(want);
        pardo_tensor_release(x);
    }
}
END_TEST

/* The ops that move elements take every dtype: transpose, gather, slice and where of 1-, 2-, 4- and 8-byte
 * elements against naive loops, identity, reshape, flatten, unsqueeze, expand and concat keeping the bytes. */
START_TEST(test_narrow_dtypes_move) {
    const pardo_dtype dts[] = {PARDO_U8, PARDO_I8, PARDO_I16, PARDO_U16, PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        pardo_status st;
        const int64_t shape[3] = {2, 3, 4};
        pardo_tensor *x = pardo_tensor_new_cpu(dts[k], 3, shape, &st);
        ck_assert_ptr_nonnull(x);
        const size_t es = pardo_dtype_size(dts[k]);
        uint8_t *px = pardo_tensor_data(x);
        for (size_t b = 0; b < x->nbytes; b++) px[b] = (uint8_t)(b * 37 + 11);
        pardo_tensor *y = NULL;
        ck_assert_msg(test_run_op("transpose", "{\"perm\": [2, 0, 1]}", 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s",
                      pardo_dtype_name(dts[k]), st.msg);
        ck_assert_int_eq(y->dtype, dts[k]);
        const uint8_t *py = pardo_tensor_data(y);
        for (int64_t c = 0; c < 4; c++) /* y[c][a][b] = x[a][b][c] */
            for (int64_t a = 0; a < 2; a++)
                for (int64_t b = 0; b < 3; b++)
                    ck_assert_int_eq(memcmp(py + (size_t)((c * 2 + a) * 3 + b) * es,
                                            px + (size_t)((a * 3 + b) * 4 + c) * es, es), 0);
        pardo_tensor_release(y);
        const char *same_bytes[][2] = {{"identity", NULL}, {"reshape", "{\"shape\": [6, 4]}"},
                                       {"flatten", "{\"axis\": 2}"}, {"unsqueeze", "{\"axes\": [0]}"}};
        for (int o = 0; o < 4; o++) {
            ck_assert_msg(test_run_op(same_bytes[o][0], same_bytes[o][1], 1, &x, 1, &y, &st) == PARDO_OK, "%s %s: %s",
                          same_bytes[o][0], pardo_dtype_name(dts[k]), st.msg);
            ck_assert(y->dtype == dts[k] && y->numel == 24);
            ck_assert_int_eq(memcmp(pardo_tensor_data(y), px, x->nbytes), 0);
            pardo_tensor_release(y);
        }
        /* gather of rows [2, 0] along axis 1: y[a][j][c] = x[a][idx[j]][c] */
        pardo_tensor *idx = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){2, 0});
        pardo_tensor *gin[2] = {x, idx};
        ck_assert_msg(test_run_op("gather", "{\"axis\": 1}", 2, gin, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        for (int64_t a = 0; a < 2; a++)
            for (int64_t j = 0; j < 2; j++)
                for (int64_t c = 0; c < 4; c++)
                    ck_assert_int_eq(memcmp((const uint8_t *)pardo_tensor_data(y) + (size_t)((a * 2 + j) * 4 + c) * es,
                                            px + (size_t)((a * 3 + (j ? 0 : 2)) * 4 + c) * es, es), 0);
        pardo_tensor_release(y);
        pardo_tensor_release(idx);
        /* slice [:, 1:3, ::-2]: y[a][b][c] = x[a][1 + b][3 - 2c] */
        ck_assert_msg(test_run_op("slice", "{\"starts\": [1, -1], \"ends\": [3, -5], \"axes\": [1, 2], "
                                  "\"steps\": [1, -2]}", 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        ck_assert(y->shape[0] == 2 && y->shape[1] == 2 && y->shape[2] == 2);
        for (int64_t a = 0; a < 2; a++)
            for (int64_t b = 0; b < 2; b++)
                for (int64_t c = 0; c < 2; c++)
                    ck_assert_int_eq(memcmp((const uint8_t *)pardo_tensor_data(y) + (size_t)((a * 2 + b) * 2 + c) * es,
                                            px + (size_t)((a * 3 + 1 + b) * 4 + 3 - 2 * c) * es, es), 0);
        pardo_tensor_release(y);
        /* expand [2, 3, 4] to [2, 2, 3, 4]: both copies x */
        ck_assert_msg(test_run_op("expand", "{\"shape\": [2, 1, 1, 1]}", 1, &x, 1, &y, &st) == PARDO_OK, "%s",
                      st.msg);
        ck_assert(y->numel == 48);
        ck_assert_int_eq(memcmp(pardo_tensor_data(y), px, x->nbytes), 0);
        ck_assert_int_eq(memcmp((const uint8_t *)pardo_tensor_data(y) + x->nbytes, px, x->nbytes), 0);
        pardo_tensor_release(y);
        /* where(cond [4], x, x reversed): z[e] = cond[e % 4] ? x[e] : x[23 - e] */
        pardo_tensor *rev = pardo_tensor_new_cpu(dts[k], 3, shape, &st);
        for (int64_t e = 0; e < 24; e++)
            memcpy((uint8_t *)pardo_tensor_data(rev) + (size_t)e * es, px + (size_t)(23 - e) * es, es);
        pardo_tensor *cond = test_tensor_from(PARDO_BOOL, 1, (int64_t[]){4}, (double[]){1, 0, 0, 1});
        pardo_tensor *win[3] = {cond, x, rev};
        ck_assert_msg(test_run_op("where", NULL, 3, win, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        for (int64_t e = 0; e < 24; e++)
            ck_assert_int_eq(memcmp((const uint8_t *)pardo_tensor_data(y) + (size_t)e * es,
                                    (e % 4 == 0 || e % 4 == 3) ? px + (size_t)e * es : px + (size_t)(23 - e) * es, es),
                             0);
        pardo_tensor_release(y);
        pardo_tensor_release(cond);
        pardo_tensor_release(rev);
        pardo_tensor *two[2] = {x, x};
        ck_assert_msg(test_run_op("concat", "{\"axis\": 0}", 2, two, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        ck_assert(y->dtype == dts[k] && y->shape[0] == 4);
        ck_assert_int_eq(memcmp(pardo_tensor_data(y), px, x->nbytes), 0);
        ck_assert_int_eq(memcmp((const uint8_t *)pardo_tensor_data(y) + x->nbytes, px, x->nbytes), 0);
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
}
END_TEST

/* An op whose def does not set all_dtypes refuses the dtypes past bool at inference, naming them; and one that
 * would make such a dtype. */
START_TEST(test_err_narrow_dtypes_refused) {
    pardo_status st;
    pardo_type x = test_type(PARDO_U8, 1, (int64_t[]){3}), f = test_type(PARDO_I64, 1, (int64_t[]){2}), y;
    const pardo_type *in[2] = {&x, &x};
    ck_assert_int_eq(test_infer_op("softmax", NULL, 1, in, 1, &y, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "input 0") && strstr(st.msg, "uint8") && strstr(st.msg, "softmax"), "%s", st.msg);
    in[0] = &f;
    ck_assert_int_eq(test_infer_op("constant_of_shape", "{\"value\": 1, \"dtype\": \"float16\"}", 0, in, 1, &y,
                                   &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "output 0") && strstr(st.msg, "float16"), "%s", st.msg);
}
END_TEST

Suite *make_ops_shape_suite(void) {
    Suite *s = suite_create("ops_shape");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_reshape);
    tcase_add_test(core, test_reshape_flatten_infer);
    tcase_add_test(core, test_flatten);
    tcase_add_test(core, test_transpose);
    tcase_add_test(core, test_transpose_infer);
    tcase_add_test(core, test_concat);
    tcase_add_test(core, test_concat_infer);
    tcase_add_test(core, test_cast_values);
    tcase_add_test(core, test_cast_every_pair);
    tcase_add_test(core, test_cast_every_pair_of_all_dtypes);
    tcase_add_test(core, test_cast_narrow_by_hand);
    tcase_add_test(core, test_gradients);
    tcase_add_test(core, test_concat_gradients);
    tcase_add_test(core, test_gradient_absent_dy);
    tcase_add_test(core, test_narrow_dtypes_move);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_reshape);
    tcase_add_test(errors, test_err_transpose);
    tcase_add_test(errors, test_err_concat);
    tcase_add_test(errors, test_err_cast);
    tcase_add_test(errors, test_err_narrow_dtypes_refused);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_fixtures);
    suite_add_tcase(s, fixtures);
    return s;
}
