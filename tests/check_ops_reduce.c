/* check_ops_reduce.c - reduce_sum and reduce_mean against a naive loop in
 * double over many axes/keepdims combinations, edge sizes (scalars, unit
 * and zero-size dims, inner dims past the kernel's chunk), inference with
 * run-time dims, and attr/dtype errors. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct red_case {
    int nd;
    int64_t shape[PARDO_MAX_DIMS];
    const char *axes; // JSON list, or NULL for absent
    int n_axes;       // axes listed (for the reference); -1: all
    int axes_v[PARDO_MAX_DIMS];
} red_case;

static const red_case cases[] = {
    {3, {2, 3, 4}, "[1]", 1, {1}},
    {3, {2, 3, 4}, "[0, 2]", 2, {0, 2}},
    {3, {2, 3, 4}, "[-1]", 1, {2}},
    {3, {2, 3, 4}, "[]", -1, {0}},
    {3, {2, 3, 4}, NULL, -1, {0}},
    {3, {2, 3, 4}, "[2, 0, 1]", 3, {2, 0, 1}},
    {1, {5}, "[0]", 1, {0}},
    {0, {0}, NULL, -1, {0}},
    {3, {1, 7, 1}, "[1]", 1, {1}},
    {3, {3, 1, 5}, "[1]", 1, {1}},
    {2, {0, 3}, "[0]", 1, {0}},
    {2, {0, 3}, "[1]", 1, {1}},
    {2, {3, 300}, "[0]", 1, {0}},
    {2, {3, 600}, "[1]", 1, {1}},
    {4, {2, 3, 4, 5}, "[0, 2]", 2, {0, 2}},
    {4, {2, 3, 4, 5}, "[1, 3]", 2, {1, 3}},
    {4, {2, 3, 4, 5}, "[-3, -4]", 2, {1, 0}},
    {5, {2, 1, 3, 1, 2}, "[1, 2]", 2, {1, 2}},
    {2, {1, 1}, "[0, 1]", 2, {0, 1}},
    {2, {9, 1}, "[0]", 1, {0}},
};

/* The naive reference: every input element added into its output slot. */
static pardo_tensor *ref_reduce(const pardo_tensor *x, const red_case *c, bool keepdims, bool mean) {
    bool red[PARDO_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) red[d] = c->n_axes < 0;
    for (int i = 0; i < c->n_axes; i++) red[c->axes_v[i]] = true;
    int64_t oshape[PARDO_MAX_DIMS], full[PARDO_MAX_DIMS], count = 1;
    int ond = 0;
    for (int d = 0; d < x->ndim; d++) {
        full[d] = red[d] ? 1 : x->shape[d];
        if (red[d]) count *= x->shape[d];
        if (!red[d] || keepdims) oshape[ond++] = full[d];
    }
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, ond, oshape, &st);
    ck_assert_ptr_nonnull(y);
    double acc[4096] = {0};
    ck_assert_int_le(y->numel, 4096);
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t rest = i, oi = 0, mul = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t k = rest % x->shape[d];
            rest /= x->shape[d];
            if (!red[d]) {
                oi += k * mul;
                mul *= x->shape[d];
            }
        }
        acc[oi] += pardo_tensor_get_f64(x, i);
    }
    for (int64_t o = 0; o < y->numel; o++) pardo_tensor_set_f64(y, o, mean ? acc[o] / (double)count : acc[o]);
    return y;
}

static void check_case(const char *op, const red_case *c, pardo_dtype dt, bool keepdims, uint64_t seed) {
    char attrs[128];
    if (c->axes)
        snprintf(attrs, sizeof attrs, "{\"axes\": %s, \"keepdims\": %s}", c->axes, keepdims ? "true" : "false");
    else snprintf(attrs, sizeof attrs, "{\"keepdims\": %s}", keepdims ? "true" : "false");
    test_rng r = {seed};
    bool is_int = pardo_dtype_is_int(dt);
    pardo_tensor *x = test_tensor_random(&r, dt, c->nd, c->shape, is_int ? -100 : -1, is_int ? 100 : 1), *y = NULL;
    pardo_status st;
    int rc = test_run_op(op, attrs, 1, &x, 1, &y, &st);
    ck_assert_msg(rc == PARDO_OK, "%s %s: %s", op, attrs, st.msg);
    pardo_tensor *want = ref_reduce(x, c, keepdims, strcmp(op, "reduce_mean") == 0);
    test_assert_close(y, want, dt == PARDO_F32 ? 1e-6 : 1e-13, dt == PARDO_F32 ? 1e-6 : 1e-13);
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}

START_TEST(test_reduce_sum) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    for (int c = 0; c < LEN(cases); c++)
        for (int t = 0; t < LEN(dts); t++)
            for (int k = 0; k < 2; k++)
                check_case("reduce_sum", &cases[c], dts[t], k, 50u + (uint64_t)(c * 8 + t * 2 + k));
}
END_TEST

START_TEST(test_reduce_mean) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int c = 0; c < LEN(cases); c++)
        for (int t = 0; t < LEN(dts); t++)
            for (int k = 0; k < 2; k++)
                check_case("reduce_mean", &cases[c], dts[t], k, 90u + (uint64_t)(c * 4 + t * 2 + k));
}
END_TEST

START_TEST(test_reduce_empty) {
    /* over zero elements: sum 0, mean NaN (numpy) */
    int64_t s[] = {0, 3};
    pardo_status st;
    pardo_tensor *x = pardo_tensor_new_cpu(PARDO_F32, 2, s, &st), *y = NULL;
    ck_assert_int_eq(test_run_op("reduce_sum", "{\"axes\": [0], \"keepdims\": false}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->numel, 3);
    for (int i = 0; i < 3; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), 0);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("reduce_mean", "{\"axes\": [0]}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->ndim, 2);
    for (int i = 0; i < 3; i++) ck_assert(isnan(pardo_tensor_get_f64(y, i)));
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_reduce_float32_accumulates_in_double) {
    /* 2^24 + 1 + 1 ... : a float accumulator would stall at 2^24 */
    int64_t n = 1 + 1000;
    pardo_status st;
    pardo_tensor *x = pardo_tensor_new_cpu(PARDO_F32, 1, &n, &st), *y = NULL;
    pardo_tensor_set_f64(x, 0, 16777216.0);
    for (int64_t i = 1; i < n; i++) pardo_tensor_set_f64(x, i, 1.0);
    ck_assert_int_eq(test_run_op("reduce_sum", NULL, 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->ndim, 1);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 16778216.0);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

static int infer1(const char *op, const char *attrs, pardo_type x, pardo_type *y, pardo_status *st) {
    const pardo_type *in[1] = {&x};
    return test_infer_op(op, attrs, 1, in, 1, y, st);
}

START_TEST(test_reduce_infer) {
    pardo_type y;
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 2, (int64_t[]){-1, 4});
    ck_assert_int_eq(infer1("reduce_sum", "{\"axes\": [1]}", x, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 2);
    ck_assert_int_eq(y.shape[0], -1);
    ck_assert_int_eq(y.shape[1], 1);
    ck_assert_int_eq(infer1("reduce_mean", "{\"axes\": [0], \"keepdims\": false}", x, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 1);
    ck_assert_int_eq(y.shape[0], 4);
    ck_assert_int_eq(infer1("reduce_mean", "{\"keepdims\": false}", x, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 0);
    ck_assert_int_eq(infer1("reduce_mean", NULL, x, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 2);
    ck_assert_int_eq(y.shape[0], 1);
    x = test_type(PARDO_I64, -1, NULL);
    ck_assert_int_eq(infer1("reduce_sum", "{\"axes\": [0]}", x, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, -1);
    ck_assert_int_eq(y.dtype, PARDO_I64);
    ck_assert_int_eq(infer1("reduce_sum", "{\"keepdims\": false}", x, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 0);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_err_axes) {
    pardo_type y, x = test_type(PARDO_F32, 3, (int64_t[]){2, 3, 4});
    pardo_status st;
    const char *const bad[] = {"{\"axes\": [1, 1]}",    "{\"axes\": [0, -3]}", "{\"axes\": [3]}",
                               "{\"axes\": [-4]}",      "{\"axes\": \"all\"}", "{\"axes\": [0.5]}",
                               "{\"keepdims\": \"no\"}"};
    for (int i = 0; i < LEN(bad); i++)
        for (int op = 0; op < 2; op++) {
            const char *name = op ? "reduce_mean" : "reduce_sum";
            ck_assert_msg(infer1(name, bad[i], x, &y, &st) == PARDO_EINVAL, "%s %s accepted", name, bad[i]);
            ck_assert_msg(strstr(st.msg, i == LEN(bad) - 1 ? "'keepdims'" : "'axes'") != NULL, "%s: %s", bad[i],
                          st.msg);
        }
    ck_assert_int_eq(infer1("reduce_sum", "{\"axes\": [1, -2]}", x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "more than once") != NULL, "message: %s", st.msg);
}
END_TEST

START_TEST(test_err_dtypes) {
    pardo_type y;
    pardo_status st;
    int64_t s[] = {3};
    ck_assert_int_eq(infer1("reduce_mean", NULL, test_type(PARDO_I32, 1, s), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "int32") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer1("reduce_sum", NULL, test_type(PARDO_BOOL, 1, s), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "bool") != NULL, "message: %s", st.msg);
}
END_TEST

Suite *make_ops_reduce_suite(void) {
    Suite *s = suite_create("ops_reduce");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_reduce_sum);
    tcase_add_test(core, test_reduce_mean);
    tcase_add_test(core, test_reduce_empty);
    tcase_add_test(core, test_reduce_float32_accumulates_in_double);
    tcase_add_test(core, test_reduce_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_axes);
    tcase_add_test(errors, test_err_dtypes);
    suite_add_tcase(s, errors);
    return s;
}
