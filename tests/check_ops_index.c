/* check_ops_index.c - the index and dims families (ops/index.c, ops/dims.c):
 * gather, slice, shape, unsqueeze, squeeze, expand, constant_of_shape,
 * range, and reshape's run-time shape input, against NumPy fixtures
 * (tests/fixtures/make_index_fixtures.py) with the lists as attrs and as
 * run-time int64 inputs; inference with -1 dims; the gradient ops against
 * float64 finite differences; errors (bad axes, dtypes, out-of-range gather
 * indices at run time, zero steps). */
#include <check.h>
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

/* An int64 1-D tensor of n values. */
static pardo_tensor *ints(int n, const int64_t *v) {
    pardo_status st;
    int64_t shape[1] = {n};
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_I64, 1, shape, &st);
    ck_assert_ptr_nonnull(t);
    if (n) memcpy(pardo_tensor_data(t), v, sizeof(int64_t) * (size_t)n);
    return t;
}

/* Runs op on n_in inputs and compares its one output with `want` exactly;
 * releases want. */
static void expect_op(const char *op, const char *attrs, int n_in, pardo_tensor **in, pardo_tensor *want,
                      const char *what) {
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op(op, attrs, n_in, in, 1, &y, &st) == PARDO_OK, "%s: %s", what, st.msg);
    test_assert_close(y, want, 0, 0);
    pardo_tensor_release(y);
    pardo_tensor_release(want);
}

static void expect_shape(const pardo_type *y, int nd, const int64_t *shape) {
    char a[128], b[128];
    ck_assert_msg(pardo_shape_equal(y->ndim, y->shape, nd, shape), "shape %s, expected %s",
                  pardo_shape_str(y->ndim, y->shape, a, sizeof a), pardo_shape_str(nd, shape, b, sizeof b));
}

/* ---- gather ---- */

static const struct {
    const char *name, *attrs;
} gather_fx[] = {
    {"gather_a0", "{\"axis\": 0}"},
    {"gather_a1neg", "{\"axis\": -2}"},
    {"gather_scalar", "{\"axis\": 1}"},
    {"gather_bool", NULL},
};

START_TEST(test_gather_fixtures) {
    for (int c = 0; c < LEN(gather_fx); c++) {
        pardo_tensor *in[2] = {fixture(gather_fx[c].name, "x"), fixture(gather_fx[c].name, "i")};
        expect_op("gather", gather_fx[c].attrs, 2, in, fixture(gather_fx[c].name, "y"), gather_fx[c].name);
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
}
END_TEST

START_TEST(test_gather_infer) {
    pardo_type d = test_type(PARDO_F32, 3, (int64_t[]){-1, 4, 5}), i = test_type(PARDO_I64, 2, (int64_t[]){2, -1}), y;
    const pardo_type *in[2] = {&d, &i};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("gather", "{\"axis\": -2}", 2, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 4, (int64_t[]){-1, 2, -1, 5});
    i = test_type(PARDO_I32, 0, NULL);
    ck_assert_int_eq(test_infer_op("gather", "{\"axis\": 2}", 2, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, 4});
}
END_TEST

START_TEST(test_gather_errors) {
    pardo_status st;
    pardo_tensor *d = test_tensor_from(PARDO_F32, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6}), *y = NULL;
    pardo_tensor *bad = test_tensor_from(PARDO_I64, 1, (int64_t[]){3}, (double[]){0, 3, 1});
    pardo_tensor *in[2] = {d, bad};
    ck_assert_int_eq(test_run_op("gather", NULL, 2, in, 1, &y, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "gather") && strstr(st.msg, "element 1 is 3"), "%s", st.msg);
    pardo_tensor_set_f64(bad, 1, -4);
    ck_assert_int_eq(test_run_op("gather", NULL, 2, in, 1, &y, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "is -4"), "%s", st.msg);
    pardo_tensor_set_f64(bad, 1, -3);
    ck_assert_int_eq(test_run_op("gather", "{\"axis\": 2}", 2, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "axis"), "%s", st.msg);
    pardo_tensor *fl = test_tensor_from(PARDO_F32, 1, (int64_t[]){1}, (double[]){0});
    in[1] = fl;
    ck_assert_int_eq(test_run_op("gather", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "indices"), "%s", st.msg);
    pardo_tensor_release(fl);
    pardo_tensor_release(bad);
    pardo_tensor_release(d);
}
END_TEST

START_TEST(test_gather_grad) {
    test_rng r = {5};
    pardo_tensor *d = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){3, 4, 2}, -1, 1);
    /* repeated indices: their gradients add up */
    pardo_tensor *ix = test_tensor_from(PARDO_I64, 2, (int64_t[]){2, 3}, (double[]){1, -1, 1, 0, 3, -3});
    pardo_tensor *in[2] = {d, ix};
    test_check_grad_default("gather", "{\"axis\": 1}", 2, in, 1, 1u);
    pardo_tensor *sc = test_tensor_from(PARDO_I32, 0, NULL, (double[]){-1});
    in[1] = sc;
    test_check_grad_default("gather", NULL, 2, in, 1, 1u);
    pardo_tensor_release(sc);
    pardo_tensor_release(ix);
    pardo_tensor_release(d);
}
END_TEST

/* ---- slice ---- */

static const struct {
    const char *name, *attrs;
    int n;
    int64_t lists[4][3]; /* starts, ends, axes, steps */
    bool has_axes, has_steps;
} slice_fx[] = {
    {"slice_basic", "{\"starts\": [1, 0], \"ends\": [3, 9223372036854775807], \"axes\": [0, 2], \"steps\": [1, 2]}",
     2, {{1, 0}, {3, INT64_MAX}, {0, 2}, {1, 2}}, true, true},
    {"slice_neg", "{\"starts\": [-1, 4], \"ends\": [-9223372036854775808, -6], \"axes\": [0, 1], \"steps\": [-2, -1]}",
     2, {{-1, 4}, {INT64_MIN, -6}, {0, 1}, {-2, -1}}, true, true},
    {"slice_empty", "{\"starts\": [2], \"ends\": [1], \"axes\": [-1]}", 1, {{2}, {1}, {-1}, {0}}, true, false},
    {"slice_clamp", "{\"starts\": -10, \"ends\": 100}", 1, {{-10}, {100}, {0}, {0}}, false, false},
    {"slice_mid", "{\"starts\": [-3, 1], \"ends\": [-1, 1000], \"axes\": [-1, 0], \"steps\": [1, 1]}", 2,
     {{-3, 1}, {-1, 1000}, {-1, 0}, {1, 1}}, true, true},
};

START_TEST(test_slice_fixtures) {
    for (int c = 0; c < LEN(slice_fx); c++) {
        pardo_tensor *x = fixture(slice_fx[c].name, "x");
        expect_op("slice", slice_fx[c].attrs, 1, &x, fixture(slice_fx[c].name, "y"), slice_fx[c].attrs);
        /* the same lists as run-time inputs, overriding contrary attrs */
        pardo_tensor *in[5] = {x, NULL, NULL, NULL, NULL};
        for (int k = 0; k < 4; k++)
            if (k < 2 || (k == 2 && slice_fx[c].has_axes) || (k == 3 && slice_fx[c].has_steps))
                in[k + 1] = ints(slice_fx[c].n, slice_fx[c].lists[k]);
        expect_op("slice", "{\"starts\": [0], \"ends\": [0]}", 5, in, fixture(slice_fx[c].name, "y"), "inputs");
        for (int k = 0; k < 5; k++) pardo_tensor_release(in[k]);
    }
}
END_TEST

START_TEST(test_slice_infer) {
    pardo_type x = test_type(PARDO_F32, 3, (int64_t[]){-1, 10, 6}), y;
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("slice", "{\"starts\": [1, -1], \"ends\": [-1, -7], \"axes\": [1, 2], \"steps\": "
                                   "[3, -2]}", 1, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 3, (int64_t[]){-1, 3, 3});
    ck_assert_int_eq(test_infer_op("slice", "{\"starts\": [0], \"ends\": [2]}", 1, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 3, (int64_t[]){-1, 10, 6}); /* a run-time dim stays -1 */
    pardo_type z = test_type(PARDO_F32, 2, (int64_t[]){0, 3});
    const pardo_type *zin[1] = {&z};
    ck_assert_int_eq(test_infer_op("slice", "{\"starts\": [-1], \"ends\": [-9223372036854775808], \"steps\": [-1]}",
                                   1, zin, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){0, 3}); /* backwards over an empty dim */
    pardo_type s = test_type(PARDO_I64, 1, (int64_t[]){1});
    const pardo_type *in2[3] = {&x, &s, &s};
    ck_assert_int_eq(test_infer_op("slice", NULL, 3, in2, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 3, (int64_t[]){-1, -1, -1});
}
END_TEST

START_TEST(test_slice_errors) {
    pardo_type x = test_type(PARDO_F32, 2, (int64_t[]){4, 5}), y;
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("slice", "{\"starts\": [0], \"ends\": [2], \"steps\": [0]}", 1, in, 1, &y, &st),
                     PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "steps"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("slice", "{\"starts\": [0], \"ends\": [2], \"axes\": [2]}", 1, in, 1, &y, &st),
                     PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "axes"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("slice", "{\"starts\": [0, 1], \"ends\": [2]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("slice", "{\"ends\": [2]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "starts"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("slice", "{\"starts\": [0, 0], \"ends\": [2, 2], \"axes\": [1, -1]}", 1, in, 1, &y,
                                   &st), PARDO_EINVAL);
    pardo_type f = test_type(PARDO_F32, 1, (int64_t[]){1});
    const pardo_type *in2[2] = {&x, &f};
    ck_assert_int_eq(test_infer_op("slice", "{\"ends\": [2]}", 2, in2, 1, &y, &st), PARDO_ESHAPE);
}
END_TEST

START_TEST(test_slice_grad) {
    test_rng r = {7};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){4, 5, 3}, -1, 1);
    test_check_grad_default("slice", "{\"starts\": [-1, 1], \"ends\": [-9223372036854775808, 5], \"axes\": [0, 1], "
                            "\"steps\": [-2, 2]}", 1, &x, 1, 1u);
    test_check_grad_default("slice", "{\"starts\": [1], \"ends\": [1], \"axes\": [-1]}", 1, &x, 1, 1u); /* empty */
    pardo_tensor *in[5] = {x, ints(1, (int64_t[]){1}), ints(1, (int64_t[]){-1}), ints(1, (int64_t[]){2}), NULL};
    test_check_grad_default("slice", NULL, 5, in, 1, 1u);
    for (int k = 1; k < 4; k++) pardo_tensor_release(in[k]);
    pardo_tensor_release(x);
}
END_TEST

/* ---- shape, unsqueeze, squeeze, expand ---- */

START_TEST(test_shape_op) {
    static const struct {
        const char *attrs;
        int n;
        int64_t want[4];
    } cases[] = {
        {NULL, 4, {2, 0, 3, 5}},  {"{\"start\": 1}", 3, {0, 3, 5}},         {"{\"start\": -2}", 2, {3, 5}},
        {"{\"end\": -1}", 3, {2, 0, 3}}, {"{\"start\": -10, \"end\": 10}", 4, {2, 0, 3, 5}},
        {"{\"start\": 3, \"end\": 1}", 0, {0}},
    };
    pardo_status st;
    pardo_tensor *x = pardo_tensor_new_cpu(PARDO_BOOL, 4, (int64_t[]){2, 0, 3, 5}, &st);
    for (int c = 0; c < LEN(cases); c++) {
        expect_op("shape", cases[c].attrs, 1, &x, ints(cases[c].n, cases[c].want),
                  cases[c].attrs ? cases[c].attrs : "");
        pardo_type tx = pardo_tensor_type(x), y;
        const pardo_type *in[1] = {&tx};
        ck_assert_int_eq(test_infer_op("shape", cases[c].attrs, 1, in, 1, &y, &st), PARDO_OK);
        expect_shape(&y, 1, (int64_t[]){cases[c].n});
    }
    pardo_tensor_release(x);
}
END_TEST

static const struct {
    const char *name, *op, *attrs;
    int n;
    int64_t axes[3];
} dims_fx[] = {
    {"unsqueeze_f32", "unsqueeze", "{\"axes\": [0, -1]}", 2, {0, -1}},
    {"unsqueeze_mid", "unsqueeze", "{\"axes\": [1, 3]}", 2, {3, 1}},
    {"squeeze_axis", "squeeze", "{\"axes\": [-2]}", 1, {-2}},
    {"squeeze_all", "squeeze", NULL, -1, {0}},
};

START_TEST(test_dims_fixtures) {
    for (int c = 0; c < LEN(dims_fx); c++) {
        pardo_tensor *x = fixture(dims_fx[c].name, "x");
        expect_op(dims_fx[c].op, dims_fx[c].attrs, 1, &x, fixture(dims_fx[c].name, "y"), dims_fx[c].name);
        if (dims_fx[c].n >= 0) { /* axes as a run-time input */
            pardo_tensor *in[2] = {x, ints(dims_fx[c].n, dims_fx[c].axes)};
            expect_op(dims_fx[c].op, NULL, 2, in, fixture(dims_fx[c].name, "y"), "input axes");
            pardo_tensor_release(in[1]);
        }
        pardo_tensor_release(x);
    }
    static const struct {
        const char *name;
        int n;
        int64_t shape[3];
    } ex[] = {{"expand_f32", 3, {2, 1, 4}}, {"expand_i64", 1, {3}}, {"expand_keep", 2, {1, 1}},
              {"expand_bool", 2, {2, 3}}};
    for (int c = 0; c < LEN(ex); c++) {
        pardo_tensor *x = fixture(ex[c].name, "x");
        char attrs[96];
        int used = snprintf(attrs, sizeof attrs, "{\"shape\": [");
        for (int i = 0; i < ex[c].n; i++)
            used += snprintf(attrs + used, sizeof attrs - (size_t)used, "%s%lld", i ? ", " : "",
                             (long long)ex[c].shape[i]);
        snprintf(attrs + used, sizeof attrs - (size_t)used, "]}");
        expect_op("expand", attrs, 1, &x, fixture(ex[c].name, "y"), attrs);
        pardo_tensor *in[2] = {x, ints(ex[c].n, ex[c].shape)};
        expect_op("expand", NULL, 2, in, fixture(ex[c].name, "y"), "input shape");
        pardo_tensor_release(in[1]);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_dims_infer) {
    pardo_type x = test_type(PARDO_F32, 3, (int64_t[]){-1, 1, 4}), y;
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("unsqueeze", "{\"axes\": [-1, 1]}", 1, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 5, (int64_t[]){-1, 1, 1, 4, 1});
    ck_assert_int_eq(test_infer_op("squeeze", "{\"axes\": [1]}", 1, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, 4});
    ck_assert_int_eq(test_infer_op("squeeze", NULL, 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, -1); /* the -1 dim may be 1 */
    ck_assert_int_eq(test_infer_op("expand", "{\"shape\": [2, 3, 1, 1]}", 1, in, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 4, (int64_t[]){2, 3, 1, 4}); /* the -1 must be 3 (or 1) */
    pardo_type s = test_type(PARDO_I64, 1, (int64_t[]){4});
    const pardo_type *in2[2] = {&x, &s};
    ck_assert_int_eq(test_infer_op("expand", NULL, 2, in2, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 4, (int64_t[]){-1, -1, -1, 4});
    s = test_type(PARDO_I64, 1, (int64_t[]){2});
    ck_assert_int_eq(test_infer_op("unsqueeze", NULL, 2, in2, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 5, (int64_t[]){-1, -1, -1, -1, -1});
    const pardo_type *in1[1] = {&s};
    ck_assert_int_eq(test_infer_op("constant_of_shape", "{\"dtype\": \"int32\"}", 1, in1, 1, &y, &st), PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){-1, -1});
    ck_assert_int_eq(y.dtype, PARDO_I32);
}
END_TEST

START_TEST(test_dims_errors) {
    pardo_type x = test_type(PARDO_F32, 2, (int64_t[]){3, 1}), y;
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("unsqueeze", "{\"axes\": [3]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "axes"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("unsqueeze", "{\"axes\": [0, -4]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("unsqueeze", NULL, 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("squeeze", "{\"axes\": [0]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "size 3"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("squeeze", "{\"axes\": [-3]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("expand", "{\"shape\": [2, 2]}", 1, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("expand", "{\"shape\": [-2]}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("constant_of_shape", "{\"dtype\": \"float8\"}", 1, in, 1, &y, &st), PARDO_EINVAL);
    /* run-time shape input that does not broadcast */
    pardo_tensor *t = test_tensor_from(PARDO_F32, 2, (int64_t[]){3, 1}, (double[]){1, 2, 3}), *out = NULL;
    pardo_tensor *in2[2] = {t, ints(2, (int64_t[]){2, 5})};
    ck_assert_int_eq(test_run_op("expand", NULL, 2, in2, 1, &out, &st), PARDO_ESHAPE);
    pardo_tensor_release(in2[1]);
    in2[1] = ints(1, (int64_t[]){0});
    ck_assert_int_eq(test_run_op("squeeze", NULL, 2, in2, 1, &out, &st), PARDO_EINVAL);
    pardo_tensor_release(in2[1]);
    pardo_tensor_release(t);
}
END_TEST

START_TEST(test_dims_grad) {
    test_rng r = {9};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 1}, -1, 1);
    test_check_grad_default("unsqueeze", "{\"axes\": [0, -1]}", 1, &x, 1, 1u);
    test_check_grad_default("squeeze", NULL, 1, &x, 1, 1u);
    test_check_grad_default("expand", "{\"shape\": [2, 1, 4]}", 1, &x, 1, 1u);
    pardo_tensor *in[2] = {x, ints(3, (int64_t[]){2, 3, 4})};
    test_check_grad_default("expand", NULL, 2, in, 1, 1u);
    pardo_tensor_release(in[1]);
    in[1] = ints(1, (int64_t[]){1});
    test_check_grad_default("unsqueeze", NULL, 2, in, 1, 1u);
    test_check_grad_default("squeeze", NULL, 2, in, 1, 1u);
    pardo_tensor_release(in[1]);
    pardo_tensor_release(x);
}
END_TEST

/* ---- constant_of_shape, range ---- */

START_TEST(test_constant_of_shape) {
    pardo_status st;
    pardo_tensor *s = ints(3, (int64_t[]){2, 3, 1}), *y = NULL;
    ck_assert_int_eq(test_run_op("constant_of_shape", "{\"value\": -2.5, \"dtype\": \"float64\"}", 1, &s, 1, &y, &st),
                     PARDO_OK);
    ck_assert_int_eq(y->dtype, PARDO_F64);
    ck_assert_int_eq(y->numel, 6);
    for (int64_t i = 0; i < y->numel; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), -2.5);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("constant_of_shape", "{\"value\": true, \"dtype\": \"bool\"}", 1, &s, 1, &y, &st),
                     PARDO_OK);
    for (int64_t i = 0; i < y->numel; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), 1);
    pardo_tensor_release(y);
    pardo_tensor_release(s);
    s = ints(1, (int64_t[]){0});
    ck_assert_int_eq(test_run_op("constant_of_shape", NULL, 1, &s, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->dtype, PARDO_F32);
    ck_assert_int_eq(y->numel, 0);
    pardo_tensor_release(y);
    pardo_tensor_release(s);
    s = ints(2, (int64_t[]){2, -1});
    ck_assert_int_eq(test_run_op("constant_of_shape", NULL, 1, &s, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_run_op("constant_of_shape", "{\"value\": 0.5, \"dtype\": \"int64\"}", 1, &s, 1, &y, &st),
                     PARDO_EINVAL);
    pardo_tensor_release(s);
}
END_TEST

START_TEST(test_range) {
    static const struct {
        const char *name;
        pardo_dtype dt;
        double v[3];
    } cases[] = {
        {"range_i64", PARDO_I64, {0, 10, 3}},
        {"range_f32", PARDO_F32, {1.0, -2.0, -0.5}},
        {"range_empty", PARDO_I64, {5, 1, 2}},
        {"range_f64", PARDO_F64, {0.5, 2.0, 0.25}},
    };
    for (int c = 0; c < LEN(cases); c++) {
        char attrs[160];
        snprintf(attrs, sizeof attrs, "{\"start\": %g, \"limit\": %g, \"delta\": %g, \"dtype\": \"%s\"}", cases[c].v[0],
                 cases[c].v[1], cases[c].v[2], pardo_dtype_name(cases[c].dt));
        expect_op("range", attrs, 0, NULL, fixture(cases[c].name, "y"), attrs);
        pardo_type y;
        pardo_status st;
        ck_assert_int_eq(test_infer_op("range", attrs, 0, NULL, 1, &y, &st), PARDO_OK);
        pardo_tensor *want = fixture(cases[c].name, "y");
        expect_shape(&y, 1, want->shape);
        /* the same as scalar inputs */
        pardo_tensor *in[3];
        for (int k = 0; k < 3; k++) in[k] = test_tensor_from(cases[c].dt, 0, NULL, &cases[c].v[k]);
        expect_op("range", NULL, 3, in, want, "inputs");
        for (int k = 0; k < 3; k++) pardo_tensor_release(in[k]);
    }
    /* attrs only, whole numbers: int64 */
    pardo_type y;
    pardo_status st;
    ck_assert_int_eq(test_infer_op("range", "{\"start\": 0, \"limit\": 4, \"delta\": 1}", 0, NULL, 1, &y, &st),
                     PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_I64);
    expect_shape(&y, 1, (int64_t[]){4});
    ck_assert_int_eq(test_infer_op("range", "{\"start\": 0, \"limit\": 4, \"delta\": 0}", 0, NULL, 1, &y, &st),
                     PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "delta"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("range", "{\"start\": 0, \"limit\": 4}", 0, NULL, 1, &y, &st), PARDO_EINVAL);
    pardo_type b = test_type(PARDO_BOOL, 0, NULL);
    const pardo_type *in[1] = {&b};
    ck_assert_int_eq(test_infer_op("range", "{\"limit\": 4, \"delta\": 1}", 1, in, 1, &y, &st), PARDO_ESHAPE);
}
END_TEST

/* ---- reshape's run-time shape input ---- */

START_TEST(test_reshape_input) {
    pardo_status st;
    test_rng r = {11};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 3, 4}, -1, 1), *y = NULL;
    pardo_tensor *in[2] = {x, ints(2, (int64_t[]){0, -1})};
    ck_assert_int_eq(test_run_op("reshape", NULL, 2, in, 1, &y, &st), PARDO_OK);
    pardo_type ty = pardo_tensor_type(y);
    expect_shape(&ty, 2, (int64_t[]){2, 12});
    for (int64_t i = 0; i < x->numel; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), pardo_tensor_get_f64(x, i));
    pardo_tensor_release(y);
    test_check_grad_default("reshape", NULL, 2, in, 1, 1u);
    pardo_type tx = pardo_tensor_type(x), ts = test_type(PARDO_I64, 1, (int64_t[]){3}), out;
    const pardo_type *tin[2] = {&tx, &ts};
    ck_assert_int_eq(test_infer_op("reshape", NULL, 2, tin, 1, &out, &st), PARDO_OK);
    expect_shape(&out, 3, (int64_t[]){-1, -1, -1});
    pardo_tensor_release(in[1]);
    /* allowzero: a 0 is a 0-size dim */
    pardo_tensor *e = pardo_tensor_new_cpu(PARDO_F32, 2, (int64_t[]){0, 3}, &st);
    in[0] = e;
    in[1] = ints(2, (int64_t[]){3, 0});
    ck_assert_int_eq(test_run_op("reshape", "{\"allowzero\": true}", 2, in, 1, &y, &st), PARDO_OK);
    ty = pardo_tensor_type(y);
    expect_shape(&ty, 2, (int64_t[]){3, 0});
    pardo_tensor_release(y);
    pardo_tensor_release(in[1]);
    in[1] = ints(2, (int64_t[]){4, 2});
    ck_assert_int_eq(test_run_op("reshape", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    pardo_tensor_release(in[1]);
    pardo_tensor_release(e);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_ops_index_suite(void) {
    Suite *s = suite_create("ops_index");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_gather_infer);
    tcase_add_test(core, test_gather_grad);
    tcase_add_test(core, test_slice_infer);
    tcase_add_test(core, test_slice_grad);
    tcase_add_test(core, test_shape_op);
    tcase_add_test(core, test_dims_infer);
    tcase_add_test(core, test_dims_grad);
    tcase_add_test(core, test_constant_of_shape);
    tcase_add_test(core, test_range);
    tcase_add_test(core, test_reshape_input);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_gather_errors);
    tcase_add_test(errors, test_slice_errors);
    tcase_add_test(errors, test_dims_errors);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_gather_fixtures);
    tcase_add_test(fixtures, test_slice_fixtures);
    tcase_add_test(fixtures, test_dims_fixtures);
    suite_add_tcase(s, fixtures);
    return s;
}
