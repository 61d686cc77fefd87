/* check_ops_compare.c - the compare family (ops/compare.c): equal, less,
 * greater, less_or_equal, greater_or_equal, and, or, not and where against
 * NumPy fixtures (tests/fixtures/make_index_fixtures.py) with broadcasting
 * and every dtype each takes; inference; where_grad against float64 finite
 * differences; dtype errors. erf (ops/elementwise.c) is checked here too,
 * beside the other ops PyTorch's ONNX exports of GELU and masks need. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static pardo_tensor *fixture(const char *c, const char *part) {
    char name[128];
    snprintf(name, sizeof name, "ops/idx_%s_%s.npy", c, part);
    return test_npy_load(name);
}

static void run_fixture(const char *op, const char *name, int n_in, const char *const *parts, double tol) {
    pardo_tensor *in[3], *y = NULL;
    for (int k = 0; k < n_in; k++) in[k] = fixture(name, parts[k]);
    pardo_status st;
    ck_assert_msg(test_run_op(op, NULL, n_in, in, 1, &y, &st) == PARDO_OK, "%s: %s", name, st.msg);
    pardo_tensor *want = fixture(name, "y");
    test_assert_close(y, want, tol, 0);
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    for (int k = 0; k < n_in; k++) pardo_tensor_release(in[k]);
}

START_TEST(test_compare_fixtures) {
    static const struct {
        const char *op, *name;
    } cases[] = {
        {"equal", "equal_f32"},
        {"equal", "equal_bool"},
        {"less", "less_i64"},
        {"greater", "greater_f64"},
        {"less_or_equal", "less_or_equal_i32"},
        {"greater_or_equal", "greater_or_equal_f32"},
        {"and", "and_bool"},
        {"or", "or_bool"},
    };
    static const char *const ab[2] = {"a", "b"};
    for (int c = 0; c < LEN(cases); c++) run_fixture(cases[c].op, cases[c].name, 2, ab, 0);
    run_fixture("not", "not", 1, ab, 0);
    static const char *const cab[3] = {"c", "a", "b"};
    run_fixture("where", "where_f32", 3, cab, 0);
    run_fixture("where", "where_i32", 3, cab, 0);
    run_fixture("where", "where_f64", 3, cab, 0);
    static const char *const x[1] = {"x"};
    run_fixture("erf", "erf_f32", 1, x, 1e-6);
    run_fixture("erf", "erf_f64", 1, x, 1e-14);
}
END_TEST

/* Every dtype equal takes gives the naive answer, NaN unequal to itself. */
START_TEST(test_equal_dtypes) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64, PARDO_BOOL};
    for (int t = 0; t < LEN(dts); t++) {
        pardo_tensor *a = test_tensor_from(dts[t], 2, (int64_t[]){2, 2}, (double[]){0, 1, 1, 0});
        pardo_tensor *b = test_tensor_from(dts[t], 1, (int64_t[]){2}, (double[]){1, 1});
        pardo_tensor *in[2] = {a, b}, *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("equal", NULL, 2, in, 1, &y, &st), PARDO_OK);
        ck_assert_int_eq(y->dtype, PARDO_BOOL);
        static const double want[4] = {0, 1, 1, 0};
        for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), want[i]);
        pardo_tensor_release(y);
        pardo_tensor_release(b);
        pardo_tensor_release(a);
    }
    pardo_tensor *n = test_tensor_from(PARDO_F64, 1, (int64_t[]){1}, (double[]){NAN}), *in[2] = {n, n}, *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("equal", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 0);
    pardo_tensor_release(y);
    pardo_tensor_release(n);
}
END_TEST

/* The five comparisons on the narrow and unsigned ints (by their signed or unsigned value) and on float16 /
 * bfloat16 (by the value they encode, NaN unordered), broadcasting [3, 4] against [4], against a naive loop. */
START_TEST(test_compare_narrow_dtypes) {
    static const pardo_dtype dts[] = {PARDO_U8,  PARDO_I8,  PARDO_I16, PARDO_U16,
                                      PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
    static const char *const ops[] = {"equal", "less", "greater", "less_or_equal", "greater_or_equal"};
    test_rng r = {808};
    for (int t = 0; t < LEN(dts); t++) {
        pardo_status st;
        pardo_tensor *a = pardo_tensor_new_cpu(dts[t], 2, (int64_t[]){3, 4}, &st);
        pardo_tensor *b = pardo_tensor_new_cpu(dts[t], 1, (int64_t[]){4}, &st);
        const size_t es = pardo_dtype_size(dts[t]);
        for (size_t k = 0; k < a->nbytes; k++) ((uint8_t *)pardo_tensor_data(a))[k] = (uint8_t)(test_rng_next(&r) % 4);
        for (size_t k = 0; k < b->nbytes; k++) ((uint8_t *)pardo_tensor_data(b))[k] = (uint8_t)(test_rng_next(&r) % 4);
        memcpy(pardo_tensor_data(b), pardo_tensor_data(a), es); /* one equal pair at least */
        /* a high bit set: a negative int or half, a large unsigned int */
        ((uint8_t *)pardo_tensor_data(a))[es * 5 + es - 1] |= 0x80;
        if (pardo_dtype_is_half(dts[t])) pardo_tensor_set_f64(a, 6, NAN);
        pardo_tensor *in[2] = {a, b};
        for (int o = 0; o < LEN(ops); o++) {
            pardo_tensor *y = NULL;
            ck_assert_msg(test_run_op(ops[o], NULL, 2, in, 1, &y, &st) == PARDO_OK, "%s %s: %s", ops[o],
                          pardo_dtype_name(dts[t]), st.msg);
            ck_assert_int_eq(y->dtype, PARDO_BOOL);
            for (int64_t e = 0; e < 12; e++) {
                bool want;
                if (dts[t] == PARDO_U64) { /* past 2^53: compare the integers themselves */
                    const uint64_t x = ((const uint64_t *)pardo_tensor_data(a))[e],
                                   z = ((const uint64_t *)pardo_tensor_data(b))[e % 4];
                    want = o == 0 ? x == z : o == 1 ? x < z : o == 2 ? x > z : o == 3 ? x <= z : x >= z;
                } else {
                    const double x = pardo_tensor_get_f64(a, e), z = pardo_tensor_get_f64(b, e % 4);
                    want = o == 0 ? x == z : o == 1 ? x < z : o == 2 ? x > z : o == 3 ? x <= z : x >= z;
                }
                ck_assert_msg(pardo_tensor_get_f64(y, e) == (want ? 1.0 : 0.0), "%s %s element %lld", ops[o],
                              pardo_dtype_name(dts[t]), (long long)e);
            }
            pardo_tensor_release(y);
        }
        pardo_tensor_release(a);
        pardo_tensor_release(b);
    }
}
END_TEST

START_TEST(test_compare_infer) {
    pardo_type a = test_type(PARDO_I64, 2, (int64_t[]){-1, 3}), b = test_type(PARDO_I64, 1, (int64_t[]){3}), y;
    const pardo_type *in[2] = {&a, &b};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("less", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_BOOL);
    ck_assert_int_eq(y.ndim, 2);
    ck_assert_int_eq(y.shape[0], -1);
    pardo_type c = test_type(PARDO_BOOL, 3, (int64_t[]){2, 1, 1}), x = test_type(PARDO_F32, 1, (int64_t[]){4}),
               z = test_type(PARDO_F32, 2, (int64_t[]){-1, 1});
    const pardo_type *win[3] = {&c, &x, &z};
    ck_assert_int_eq(test_infer_op("where", NULL, 3, win, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    ck_assert_int_eq(y.ndim, 3);
    ck_assert_int_eq(y.shape[0], 2);
    ck_assert_int_eq(y.shape[1], -1);
    ck_assert_int_eq(y.shape[2], 4);
}
END_TEST

START_TEST(test_compare_errors) {
    pardo_type f = test_type(PARDO_F32, 1, (int64_t[]){3}), d = test_type(PARDO_F64, 1, (int64_t[]){3}),
               bo = test_type(PARDO_BOOL, 1, (int64_t[]){3}), g = test_type(PARDO_F32, 1, (int64_t[]){2}), y;
    pardo_status st;
    const pardo_type *fd[2] = {&f, &d}, *bb[2] = {&bo, &bo}, *ff[2] = {&f, &f}, *fg[2] = {&f, &g};
    ck_assert_int_eq(test_infer_op("equal", NULL, 2, fd, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float64"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("less", NULL, 2, bb, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("and", NULL, 2, ff, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("or", NULL, 2, fg, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("not", NULL, 1, ff, 1, &y, &st), PARDO_ESHAPE);
    const pardo_type *w1[3] = {&f, &f, &f}, *w2[3] = {&bo, &f, &d}, *w3[3] = {&bo, &f, &g};
    ck_assert_int_eq(test_infer_op("where", NULL, 3, w1, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "cond"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("where", NULL, 3, w2, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("where", NULL, 3, w3, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("erf", NULL, 1, bb, 1, &y, &st), PARDO_ESHAPE);
}
END_TEST

START_TEST(test_where_erf_grad) {
    test_rng r = {13};
    pardo_tensor *c = test_tensor_from(PARDO_BOOL, 3, (int64_t[]){2, 1, 3}, (double[]){1, 0, 1, 0, 0, 1});
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){4, 1}, -1, 1);
    pardo_tensor *y = test_tensor_random(&r, PARDO_F64, 1, (int64_t[]){3}, -1, 1);
    pardo_tensor *in[3] = {c, x, y};
    test_check_grad_default("where", NULL, 3, in, 1, 6u);
    test_check_grad_default("where", NULL, 3, in, 1, 2u); /* dY left out */
    pardo_tensor *e = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 5}, -2.5, 2.5);
    test_check_grad_default("erf", NULL, 1, &e, 1, 1u);
    pardo_tensor_release(e);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
    pardo_tensor_release(c);
}
END_TEST

/* xor against a naive loop over a broadcast [3, 1] x [4]. */
START_TEST(test_xor_broadcast) {
    const double av[3] = {0, 1, 1}, bv[4] = {0, 1, 0, 1};
    pardo_tensor *a = test_tensor_from(PARDO_BOOL, 2, (int64_t[]){3, 1}, av);
    pardo_tensor *b = test_tensor_from(PARDO_BOOL, 1, (int64_t[]){4}, bv);
    pardo_tensor *in[2] = {a, b}, *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("xor", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->dtype, PARDO_BOOL);
    ck_assert_int_eq(y->numel, 12);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            ck_assert_double_eq(pardo_tensor_get_f64(y, i * 4 + j), (av[i] != 0) != (bv[j] != 0));
    pardo_tensor_release(y);
    pardo_tensor_release(b);
    pardo_tensor_release(a);
}
END_TEST

/* is_nan and is_inf (both signs, one, the other) against naive loops, float32 and float64. */
START_TEST(test_nan_inf_predicates) {
    const double v[6] = {1.5, NAN, INFINITY, -INFINITY, 0, -2};
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    static const char *const attrs[3] = {NULL, "{\"detect_negative\": false}", "{\"detect_positive\": false}"};
    for (int t = 0; t < 2; t++) {
        pardo_tensor *x = test_tensor_from(dts[t], 2, (int64_t[]){2, 3}, v), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("is_nan", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        for (int i = 0; i < 6; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), isnan(v[i]) ? 1 : 0);
        pardo_tensor_release(y);
        for (int a = 0; a < 3; a++) {
            ck_assert_msg(test_run_op("is_inf", attrs[a], 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
            for (int i = 0; i < 6; i++) {
                bool want = (a != 2 && v[i] == HUGE_VAL) || (a != 1 && v[i] == -HUGE_VAL);
                ck_assert_double_eq(pardo_tensor_get_f64(y, i), want ? 1 : 0);
            }
            pardo_tensor_release(y);
        }
        pardo_tensor_release(x);
    }
    pardo_type it = test_type(PARDO_I32, 1, (int64_t[]){3}), out;
    const pardo_type *in[1] = {&it};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("is_nan", NULL, 1, in, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("is_inf", NULL, 1, in, 1, &out, &st), PARDO_ESHAPE);
}
END_TEST

Suite *make_ops_compare_suite(void) {
    Suite *s = suite_create("ops_compare");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_equal_dtypes);
    tcase_add_test(core, test_compare_narrow_dtypes);
    tcase_add_test(core, test_compare_infer);
    tcase_add_test(core, test_where_erf_grad);
    tcase_add_test(core, test_xor_broadcast);
    tcase_add_test(core, test_nan_inf_predicates);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_compare_errors);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_compare_fixtures);
    suite_add_tcase(s, fixtures);
    return s;
}
