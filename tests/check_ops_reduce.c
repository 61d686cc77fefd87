/* check_ops_reduce.c - reduce_sum, reduce_mean and reduce_max against a
 * naive loop in double over many axes/keepdims combinations, edge sizes
 * (scalars, unit and zero-size dims, inner dims past the kernel's chunk),
 * inference with run-time dims, and attr/dtype errors; argmax against a
 * naive loop (ties, NaN) and NumPy fixtures; the gradient ops against
 * float64 finite differences, reduce_max's tie rule. */
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

typedef enum { R_SUM, R_MEAN, R_MAX } red_mode;

static red_mode mode_of(const char *op) {
    return strcmp(op, "reduce_mean") == 0 ? R_MEAN : strcmp(op, "reduce_max") == 0 ? R_MAX : R_SUM;
}

/* The naive reference: every input element added (or maxed) into its output slot. */
static pardo_tensor *ref_reduce(const pardo_tensor *x, const red_case *c, bool keepdims, red_mode mode) {
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
    static double acc[4096];
    ck_assert_int_le(y->numel, 4096);
    for (int64_t o = 0; o < y->numel; o++) acc[o] = mode == R_MAX ? -INFINITY : 0;
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
        double v = pardo_tensor_get_f64(x, i);
        if (mode != R_MAX) acc[oi] += v;
        else if (v > acc[oi]) acc[oi] = v;
    }
    for (int64_t o = 0; o < y->numel; o++) {
        double v = mode == R_MEAN ? acc[o] / (double)count : acc[o];
        if (isinf(v) && pardo_dtype_is_int(x->dtype)) v = x->dtype == PARDO_I32 ? INT32_MIN : (double)INT64_MIN;
        pardo_tensor_set_f64(y, o, v);
    }
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
    pardo_tensor *want = ref_reduce(x, c, keepdims, mode_of(op));
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

START_TEST(test_reduce_max) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    for (int c = 0; c < LEN(cases); c++)
        for (int t = 0; t < LEN(dts); t++)
            for (int k = 0; k < 2; k++)
                check_case("reduce_max", &cases[c], dts[t], k, 130u + (uint64_t)(c * 8 + t * 2 + k));
}
END_TEST

START_TEST(test_reduce_max_special) {
    /* NaN beats every number (numpy's max propagates it); over zero elements -inf (ONNX) */
    int64_t s[] = {2, 3};
    pardo_tensor *x = test_tensor_from(PARDO_F64, 2, s, (double[]){1, NAN, 5, -INFINITY, -INFINITY, -INFINITY}),
                 *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("reduce_max", "{\"axes\": [1], \"keepdims\": false}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert(isnan(pardo_tensor_get_f64(y, 0)));
    ck_assert(isinf(pardo_tensor_get_f64(y, 1)) && pardo_tensor_get_f64(y, 1) < 0);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
    int64_t e[] = {0, 2};
    x = pardo_tensor_new_cpu(PARDO_I32, 2, e, &st);
    ck_assert_int_eq(test_run_op("reduce_max", "{\"axes\": [0]}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), INT32_MIN);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

/* ---- argmax ---- */

/* Naive argmax of x along axis (first index on ties, NaN wins). */
static pardo_tensor *ref_argmax(const pardo_tensor *x, int axis, bool keepdims) {
    int64_t shape[PARDO_MAX_DIMS], outer = 1, inner = 1, n = x->shape[axis];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != axis) shape[nd++] = x->shape[d];
        else if (keepdims) shape[nd++] = 1;
        if (d < axis) outer *= x->shape[d];
        if (d > axis) inner *= x->shape[d];
    }
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(PARDO_I64, nd, shape, &st);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t best = 0;
            double bv = pardo_tensor_get_f64(x, o * n * inner + i);
            for (int64_t k = 1; k < n; k++) {
                double v = pardo_tensor_get_f64(x, (o * n + k) * inner + i);
                if (!isnan(bv) && (v > bv || isnan(v))) {
                    best = k;
                    bv = v;
                }
            }
            pardo_tensor_set_f64(y, o * inner + i, (double)best);
        }
    return y;
}

START_TEST(test_argmax) {
    static const struct {
        int nd;
        int64_t shape[4];
        int axis; /* as given; the reference gets it normalised */
    } acases[] = {
        {1, {7}, 0}, {2, {4, 5}, 0}, {2, {4, 5}, 1}, {2, {4, 5}, -1}, {3, {2, 3, 4}, 1}, {3, {2, 3, 4}, -3},
        {3, {1, 1, 1}, 2}, {2, {0, 3}, 1}, {3, {3, 1, 9}, 2}, {2, {1, 33}, 1},
    };
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    for (int c = 0; c < LEN(acases); c++)
        for (int t = 0; t < LEN(dts); t++)
            for (int k = 0; k < 2; k++) {
                test_rng r = {2000u + (uint64_t)(c * 8 + t * 2 + k)};
                /* few distinct values: ties on purpose */
                pardo_tensor *x = test_tensor_random(&r, dts[t], acases[c].nd, acases[c].shape, -3, 3), *y = NULL;
                if (!pardo_dtype_is_int(dts[t]))
                    for (int64_t i = 0; i < x->numel; i++)
                        pardo_tensor_set_f64(x, i, floor(pardo_tensor_get_f64(x, i)));
                char attrs[64];
                snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"keepdims\": %s}", acases[c].axis, k ? "true" : "false");
                pardo_status st;
                ck_assert_msg(test_run_op("argmax", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
                int axis = acases[c].axis < 0 ? acases[c].axis + acases[c].nd : acases[c].axis;
                pardo_tensor *want = ref_argmax(x, axis, k);
                test_assert_close(y, want, 0, 0);
                pardo_tensor_release(want);
                pardo_tensor_release(y);
                pardo_tensor_release(x);
            }
}
END_TEST

START_TEST(test_argmax_ties_nan_defaults) {
    int64_t s[] = {2, 4};
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, s, (double[]){1, 7, 7, 2, 3, NAN, 9, NAN}), *y = NULL;
    pardo_status st;
    /* defaults: axis 0, keepdims true */
    ck_assert_int_eq(test_run_op("argmax", NULL, 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->ndim, 2);
    ck_assert_int_eq(y->shape[0], 1);
    const double want0[] = {1, 1, 1, 1};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), want0[i]);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("argmax", "{\"axis\": 1, \"keepdims\": false}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->ndim, 1);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 1); /* first of the tied 7s */
    ck_assert_double_eq(pardo_tensor_get_f64(y, 1), 1); /* first NaN */
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_argmax_infer) {
    pardo_type y;
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 3, (int64_t[]){-1, 5, 6});
    const pardo_type *in[1] = {&x};
    ck_assert_int_eq(test_infer_op("argmax", "{\"axis\": -1}", 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_I64);
    ck_assert_int_eq(y.ndim, 3);
    ck_assert_int_eq(y.shape[0], -1);
    ck_assert_int_eq(y.shape[2], 1);
    ck_assert_int_eq(test_infer_op("argmax", "{\"axis\": 1, \"keepdims\": false}", 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 2);
    ck_assert_int_eq(y.shape[1], 6);
    x = test_type(PARDO_I32, -1, NULL);
    ck_assert_int_eq(test_infer_op("argmax", NULL, 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, -1);
    ck_assert_int_eq(y.dtype, PARDO_I64);
}
END_TEST

/* ---- gradients ---- */

START_TEST(test_reduce_gradients) {
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max"};
    for (int o = 0; o < LEN(ops); o++)
        for (int c = 0; c < LEN(cases); c++)
            for (int k = 0; k < 2; k++) {
                const red_case *rc = &cases[c];
                char attrs[128];
                if (rc->axes)
                    snprintf(attrs, sizeof attrs, "{\"axes\": %s, \"keepdims\": %s}", rc->axes, k ? "true" : "false");
                else snprintf(attrs, sizeof attrs, "{\"keepdims\": %s}", k ? "true" : "false");
                test_rng r = {3000u + (uint64_t)(o * 100 + c * 2 + k)};
                /* distinct continuous values: no ties for reduce_max */
                pardo_tensor *x = test_tensor_random(&r, PARDO_F64, rc->nd, rc->shape, -1, 1);
                test_check_grad_default(ops[o], attrs, 1, &x, 1, 1u);
                pardo_tensor_release(x);
            }
}
END_TEST

/* Runs op then op_grad on x with dY dy (NULL: absent); returns dX. */
static pardo_tensor *run_grad(const char *op, const char *attrs, pardo_tensor *x, pardo_tensor *dy) {
    pardo_status st;
    pardo_tensor *y = NULL, *dx = NULL;
    ck_assert_msg(test_run_op(op, attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor *in[3] = {x, y, dy};
    char g[32];
    snprintf(g, sizeof g, "%s_grad", op);
    ck_assert_msg(test_run_op(g, attrs, 3, in, 1, &dx, &st) == PARDO_OK, "%s: %s", g, st.msg);
    pardo_tensor_release(y);
    return dx;
}

START_TEST(test_reduce_max_grad_ties) {
    /* the whole gradient goes to the first max in row-major order of the
     * reduced elements; float32 too */
    int64_t s[] = {2, 2, 3}, s1[] = {2};
    pardo_tensor *x = test_tensor_from(PARDO_F32, 3, s, (double[]){1, 3, 3, 3, 0, 2, 2, 2, 0, 5, 1, 5});
    pardo_tensor *dy = test_tensor_from(PARDO_F32, 1, s1, (double[]){10, 20});
    pardo_tensor *dx = run_grad("reduce_max", "{\"axes\": [1, 2], \"keepdims\": false}", x, dy);
    const double want[] = {0, 10, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0};
    for (int i = 0; i < 12; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), want[i]);
    pardo_tensor_release(dx);
    /* reduce over the leading axis, the inner one kept */
    int64_t s23[] = {1, 2, 3};
    pardo_tensor *dy2 = test_tensor_from(PARDO_F32, 3, s23, (double[]){1, 2, 3, 4, 5, 6});
    dx = run_grad("reduce_max", "{\"axes\": [0]}", x, dy2);
    const double want2[] = {0, 2, 3, 0, 0, 0, 1, 0, 0, 4, 5, 6};
    for (int i = 0; i < 12; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), want2[i]);
    pardo_tensor_release(dx);
    /* dY absent: zeros */
    dx = run_grad("reduce_sum", "{\"axes\": [0]}", x, NULL);
    ck_assert_int_eq(dx->numel, 12);
    for (int i = 0; i < 12; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), 0);
    pardo_tensor_release(dx);
    /* reduce_mean spreads dY / count, float32 */
    dx = run_grad("reduce_mean", "{\"axes\": [0]}", x, dy2);
    for (int i = 0; i < 12; i++) ck_assert_double_eq_tol(pardo_tensor_get_f64(dx, i), (i % 6 + 1) / 2.0, 1e-7);
    pardo_tensor_release(dx);
    pardo_tensor_release(dy2);
    pardo_tensor_release(dy);
    pardo_tensor_release(x);
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
            ck_assert_msg(infer1("reduce_max", bad[i], x, &y, &st) == PARDO_EINVAL, "reduce_max %s accepted", bad[i]);
            ck_assert_msg(infer1(name, bad[i], x, &y, &st) == PARDO_EINVAL, "%s %s accepted", name, bad[i]);
            ck_assert_msg(strstr(st.msg, i == LEN(bad) - 1 ? "'keepdims'" : "'axes'") != NULL, "%s: %s", bad[i],
                          st.msg);
        }
    ck_assert_int_eq(infer1("reduce_sum", "{\"axes\": [1, -2]}", x, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "more than once") != NULL, "message: %s", st.msg);
}
END_TEST

START_TEST(test_err_argmax) {
    pardo_type y;
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 2, (int64_t[]){3, 4});
    const char *const bad[] = {"{\"axis\": 2}", "{\"axis\": -3}", "{\"axis\": [0]}", "{\"keepdims\": \"yes\"}"};
    for (int i = 0; i < LEN(bad); i++) {
        ck_assert_msg(infer1("argmax", bad[i], x, &y, &st) == PARDO_EINVAL, "%s accepted", bad[i]);
        ck_assert_msg(strstr(st.msg, i == 3 ? "'keepdims'" : "'axis'") != NULL, "%s: %s", bad[i], st.msg);
    }
    ck_assert_int_eq(infer1("argmax", NULL, test_type(PARDO_BOOL, 1, (int64_t[]){3}), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "bool") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer1("argmax", NULL, test_type(PARDO_F32, 0, NULL), &y, &st), PARDO_ESHAPE);
    /* the max over an empty axis does not exist: at inference, and at run time */
    ck_assert_int_eq(infer1("argmax", "{\"axis\": 0}", test_type(PARDO_F32, 2, (int64_t[]){0, 3}), &y, &st),
                     PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "empty") != NULL, "message: %s", st.msg);
    int64_t e[] = {0, 3};
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_F32, 2, e, &st), *out = NULL;
    pardo_op op;
    memset(&op, 0, sizeof op);
    op.type = "argmax";
    op.def = pardo_op_lookup("argmax");
    pardo_kernel_ctx ctx = {.op = &op, .n_in = 1, .in = &t, .n_out = 1, .out = &out, .st = &st, .nthreads = 1};
    ck_assert_int_eq(op.def->cpu(&ctx), PARDO_ERUNTIME);
    pardo_tensor_release(out);
    pardo_tensor_release(t);
}
END_TEST

START_TEST(test_err_gradients) {
    pardo_type y;
    pardo_status st;
    pardo_type x = test_type(PARDO_I32, 2, (int64_t[]){3, 4});
    const pardo_type *in[3] = {&x, &x, &x};
    ck_assert_int_eq(test_infer_op("reduce_sum_grad", NULL, 3, in, 1, &y, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "int32") != NULL, "message: %s", st.msg);
    pardo_type f = test_type(PARDO_F64, 2, (int64_t[]){3, 4});
    in[0] = in[1] = in[2] = &f;
    ck_assert_int_eq(test_infer_op("reduce_max_grad", "{\"axes\": [2]}", 3, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axes'") != NULL, "message: %s", st.msg);
}
END_TEST

/* reduce_max, reduce_min, argmax and argmin on every numeric dtype, over the
 * middle axis of [3, 7, 5] (and, for the reductions, over all of it):
 * values spread over each dtype's range with its extremes and ties; the
 * reductions give the value of an input element holding the extreme, the
 * arg ops the first (select_last_index: last) index of it, against a naive
 * walk comparing long doubles (exact for every dtype). */
START_TEST(test_extremes_every_dtype) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I8,  PARDO_I16, PARDO_I32, PARDO_I64,
                                      PARDO_U8,  PARDO_U16, PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
    const int64_t xs[] = {3, 7, 5};
    for (int t = 0; t < LEN(dts); t++) {
        test_rng r = {1300u + (uint64_t)t};
        pardo_tensor *x = test_tensor_spread(&r, dts[t], 3, xs);
        const unsigned char *xd = pardo_tensor_data(x);
        for (int m = 0; m < 2; m++) /* max, min */
            for (int all = 0; all < 2; all++) {
                pardo_tensor *y = NULL;
                pardo_status st;
                const char *op = m ? "reduce_min" : "reduce_max";
                ck_assert_msg(test_run_op(op, all ? "{\"keepdims\": false}" : "{\"axes\": [1]}", 1, &x, 1, &y, &st) ==
                                  PARDO_OK,
                              "%s %s: %s", op, pardo_dtype_name(dts[t]), st.msg);
                ck_assert_int_eq(y->dtype, dts[t]);
                const unsigned char *yd = pardo_tensor_data(y);
                for (int64_t o = 0; o < (all ? 1 : xs[0] * xs[2]); o++) {
                    int64_t best = -1;
                    for (int64_t k = 0; k < (all ? 3 * 7 * 5 : xs[1]); k++) {
                        const int64_t e = all ? k : (o / xs[2] * xs[1] + k) * xs[2] + o % xs[2];
                        const long double v = test_elem_ld(xd, dts[t], e);
                        if (best < 0 || (m ? v < test_elem_ld(xd, dts[t], best) : v > test_elem_ld(xd, dts[t], best)))
                            best = e;
                    }
                    ck_assert_msg(test_elem_ld(yd, dts[t], o) == test_elem_ld(xd, dts[t], best), /* -0 == +0 */
                                  "%s %s all=%d output %lld: %Lg, expected %Lg", op, pardo_dtype_name(dts[t]), all,
                                  (long long)o, test_elem_ld(yd, dts[t], o), test_elem_ld(xd, dts[t], best));
                }
                pardo_tensor_release(y);
            }
        for (int m = 0; m < 2; m++)
            for (int last = 0; last < 2; last++) {
                pardo_tensor *y = NULL;
                pardo_status st;
                const char *op = m ? "argmin" : "argmax";
                ck_assert_msg(test_run_op(op, last ? "{\"axis\": 1, \"select_last_index\": true}" : "{\"axis\": 1}", 1,
                                          &x, 1, &y, &st) == PARDO_OK,
                              "%s %s: %s", op, pardo_dtype_name(dts[t]), st.msg);
                for (int64_t o = 0; o < xs[0] * xs[2]; o++) {
                    int64_t best = 0;
                    for (int64_t k = 1; k < xs[1]; k++) {
                        const long double v = test_elem_ld(xd, dts[t], (o / xs[2] * xs[1] + k) * xs[2] + o % xs[2]),
                                          b = test_elem_ld(xd, dts[t], (o / xs[2] * xs[1] + best) * xs[2] + o % xs[2]);
                        if (m ? (last ? v <= b : v < b) : (last ? v >= b : v > b)) best = k;
                    }
                    ck_assert_msg(((const int64_t *)pardo_tensor_data(y))[o] == best, "%s %s last=%d output %lld: %lld, "
                                  "expected %lld", op, pardo_dtype_name(dts[t]), last, (long long)o,
                                  (long long)((const int64_t *)pardo_tensor_data(y))[o], (long long)best);
                }
                pardo_tensor_release(y);
            }
        pardo_tensor_release(x);
    }
}
END_TEST

/* reduce_sum, reduce_prod, reduce_l1 and reduce_sum_square of uint32 and
 * uint64 over the middle axis of [3, 5, 4], against sums in uint64_t
 * reduced to the type (wrapping), over values spread to the extremes. */
START_TEST(test_sums_of_unsigned) {
    static const pardo_dtype dts[] = {PARDO_U32, PARDO_U64};
    static const char *const ops[] = {"reduce_sum", "reduce_prod", "reduce_l1", "reduce_sum_square"};
    const int64_t xs[] = {3, 5, 4};
    for (int t = 0; t < 2; t++)
        for (int o = 0; o < 4; o++) {
            test_rng r = {1400u + (uint64_t)(t * 4 + o)};
            pardo_tensor *x = test_tensor_spread(&r, dts[t], 3, xs), *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op(ops[o], "{\"axes\": [1]}", 1, &x, 1, &y, &st) == PARDO_OK, "%s %s: %s", ops[o],
                          pardo_dtype_name(dts[t]), st.msg);
            ck_assert_int_eq(y->dtype, dts[t]);
            const size_t es = pardo_dtype_size(dts[t]);
            for (int64_t a = 0; a < xs[0]; a++)
                for (int64_t c = 0; c < xs[2]; c++) {
                    uint64_t acc = o == 1 ? 1 : 0, v = 0, got = 0;
                    for (int64_t b = 0; b < xs[1]; b++) {
                        memcpy(&v, (const char *)pardo_tensor_data(x) + (size_t)((a * xs[1] + b) * xs[2] + c) * es, es);
                        acc = o == 1 ? acc * v : o == 3 ? acc + v * v : acc + v;
                    }
                    if (es == 4) acc = (uint32_t)acc;
                    memcpy(&got, (const char *)pardo_tensor_data(y) + (size_t)(a * xs[2] + c) * es, es);
                    ck_assert_msg(got == acc, "%s %s [%lld, %lld]: %llu, expected %llu", ops[o],
                                  pardo_dtype_name(dts[t]), (long long)a, (long long)c, (unsigned long long)got,
                                  (unsigned long long)acc);
                }
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
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
    ck_assert_int_eq(infer1("reduce_max", NULL, test_type(PARDO_BOOL, 1, s), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "bool") != NULL, "message: %s", st.msg);
}
END_TEST

/* ---- NumPy fixtures ---- */

START_TEST(test_fixture_argmax) {
    static const struct {
        const char *name, *attrs;
    } fx[] = {
        {"argmax_f32_a1", "{\"axis\": 1}"},
        {"argmax_i32_last", "{\"axis\": -1, \"keepdims\": false}"},
        {"argmax_f64_a0", "{\"axis\": 0, \"keepdims\": true}"},
    };
    for (int c = 0; c < LEN(fx); c++) {
        char name[96];
        snprintf(name, sizeof name, "ops/%s_x.npy", fx[c].name);
        pardo_tensor *x = test_npy_load(name), *y = NULL;
        snprintf(name, sizeof name, "ops/%s_y.npy", fx[c].name);
        pardo_tensor *want = test_npy_load(name);
        pardo_status st;
        ck_assert_msg(test_run_op("argmax", fx[c].attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", fx[c].name, st.msg);
        test_assert_close(y, want, 0, 0);
        pardo_tensor_release(y);
        pardo_tensor_release(want);
        pardo_tensor_release(x);
    }
}
END_TEST

/* ---- the ONNX family: reduce_min, reduce_prod, reduce_l1, reduce_l2, reduce_sum_square, reduce_log_sum,
 * reduce_log_sum_exp; argmin and select_last_index ---- */

static const struct {
    const char *op;
    int n_dtypes;   /* of f32, f64, i32, i64 */
    double lo, hi;  /* the data: small ints for prod (no overflow), positive for log_sum */
} onnx_reds[] = {
    {"reduce_min", 4, -100, 100},     {"reduce_prod", 4, -3, 3},   {"reduce_l1", 4, -100, 100},
    {"reduce_l2", 2, -1, 1},          {"reduce_sum_square", 4, -50, 50}, {"reduce_log_sum", 2, 0.1, 2},
    {"reduce_log_sum_exp", 2, -30, 30},
};

/* The naive reference of onnx_reds[k] on x: every element folded into its output slot in double. */
static pardo_tensor *ref_onnx_reduce(const pardo_tensor *x, const red_case *c, bool keepdims, int k) {
    bool red[PARDO_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) red[d] = c->n_axes < 0;
    for (int i = 0; i < c->n_axes; i++) red[c->axes_v[i]] = true;
    int64_t oshape[PARDO_MAX_DIMS];
    int ond = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!red[d] || keepdims) oshape[ond++] = red[d] ? 1 : x->shape[d];
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, ond, oshape, &st);
    ck_assert_ptr_nonnull(y);
    static double acc[4096];
    ck_assert_int_le(y->numel, 4096);
    for (int64_t o = 0; o < y->numel; o++) acc[o] = k == 0 ? INFINITY : k == 1 ? 1 : 0;
    for (int i = 0; i < x->numel; i++) {
        int64_t rest = i, oi = 0, mul = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t q = rest % x->shape[d];
            rest /= x->shape[d];
            if (!red[d]) {
                oi += q * mul;
                mul *= x->shape[d];
            }
        }
        const double v = pardo_tensor_get_f64(x, i);
        switch (k) {
        case 0: acc[oi] = fmin(acc[oi], v); break;
        case 1: acc[oi] *= v; break;
        case 2: acc[oi] += fabs(v); break;
        case 3: case 4: acc[oi] += v * v; break;
        case 5: acc[oi] += v; break;
        default: acc[oi] += exp(v); break;
        }
    }
    for (int64_t o = 0; o < y->numel; o++) {
        double v = acc[o];
        if (k == 3) v = sqrt(v);
        if (k == 5 || k == 6) v = log(v);
        if (isinf(v) && k == 0 && x->dtype == PARDO_I64) { /* the greatest int64, which a double cannot hold */
            ((int64_t *)pardo_tensor_data(y))[o] = INT64_MAX;
            continue;
        }
        if (isinf(v) && k == 0 && x->dtype == PARDO_I32) v = INT32_MAX;
        pardo_tensor_set_f64(y, o, v);
    }
    return y;
}

START_TEST(test_onnx_reductions) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I32, PARDO_I64};
    for (int k = 0; k < LEN(onnx_reds); k++)
        for (int c = 0; c < LEN(cases); c++)
            for (int t = 0; t < onnx_reds[k].n_dtypes; t++)
                for (int keep = 0; keep < 2; keep++) {
                    const red_case *rc = &cases[c];
                    char attrs[128];
                    if (rc->axes)
                        snprintf(attrs, sizeof attrs, "{\"axes\": %s, \"keepdims\": %s}", rc->axes,
                                 keep ? "true" : "false");
                    else snprintf(attrs, sizeof attrs, "{\"keepdims\": %s}", keep ? "true" : "false");
                    test_rng r = {5000u + (uint64_t)(k * 1000 + c * 8 + t * 2 + keep)};
                    pardo_tensor *x = test_tensor_random(&r, dts[t], rc->nd, rc->shape, onnx_reds[k].lo,
                                                         onnx_reds[k].hi), *y = NULL;
                    pardo_status st;
                    ck_assert_msg(test_run_op(onnx_reds[k].op, attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s %s: %s",
                                  onnx_reds[k].op, attrs, st.msg);
                    pardo_tensor *want = ref_onnx_reduce(x, rc, keep, k);
                    test_assert_close(y, want, dts[t] == PARDO_F32 ? 2e-6 : 1e-12, dts[t] == PARDO_F32 ? 1e-6 : 1e-12);
                    pardo_tensor_release(want);
                    pardo_tensor_release(y);
                    pardo_tensor_release(x);
                }
    /* log_sum_exp of large values does not overflow; of -inf only is -inf */
    pardo_tensor *x = test_tensor_from(PARDO_F32, 1, (int64_t[]){3}, (double[]){1000, 1000, -INFINITY}), *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("reduce_log_sum_exp", NULL, 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), 1000 + log(2.0), 1e-3);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_onnx_reduction_gradients) {
    for (int k = 0; k < LEN(onnx_reds); k++)
        for (int c = 0; c < LEN(cases); c++) {
            const red_case *rc = &cases[c];
            char attrs[128];
            if (rc->axes) snprintf(attrs, sizeof attrs, "{\"axes\": %s, \"keepdims\": false}", rc->axes);
            else snprintf(attrs, sizeof attrs, "{\"keepdims\": true}");
            test_rng r = {7000u + (uint64_t)(k * 100 + c)};
            const bool pos = k == 5;
            pardo_tensor *x = test_tensor_random(&r, PARDO_F64, rc->nd, rc->shape, pos ? 0.2 : -1, pos ? 2 : 1);
            if (k == 2) test_push_away(x, 0, 0.01); /* l1's kink */
            test_check_grad_default(onnx_reds[k].op, attrs, 1, &x, 1, 1u);
            pardo_tensor_release(x);
        }
    /* prod with one zero and with two in a reduced set: the other elements' product, and nothing */
    pardo_tensor *z = test_tensor_from(PARDO_F64, 2, (int64_t[]){2, 3}, (double[]){2, 0, 3, 0, 5, 0});
    test_check_grad("reduce_prod", "{\"axes\": [1]}", 1, &z, 1, 1u, 1e-6, 1e-6);
    pardo_tensor_release(z);
}
END_TEST

START_TEST(test_argmin_select_last) {
    pardo_tensor *x = test_tensor_from(PARDO_F64, 2, (int64_t[]){2, 4}, (double[]){3, 1, 7, 1, 7, NAN, 2, NAN}),
                 *y = NULL;
    pardo_status st;
    static const struct {
        const char *op, *attrs;
        double want[2];
    } cases_arg[] = {
        {"argmin", "{\"axis\": 1}", {1, 5}},                               /* NaN wins for min too */
        {"argmin", "{\"axis\": 1, \"select_last_index\": true}", {3, 7}},
        {"argmax", "{\"axis\": 1, \"select_last_index\": true}", {2, 7}},
        {"argmax", "{\"axis\": 1}", {2, 5}},
    };
    for (int c = 0; c < LEN(cases_arg); c++) {
        ck_assert_msg(test_run_op(cases_arg[c].op, cases_arg[c].attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_int_eq(y->dtype, PARDO_I64);
        for (int i = 0; i < 2; i++)
            ck_assert_msg(pardo_tensor_get_f64(y, i) == cases_arg[c].want[i] - 4 * i, "%s %s row %d: %g",
                          cases_arg[c].op, cases_arg[c].attrs, i, pardo_tensor_get_f64(y, i));
        pardo_tensor_release(y);
    }
    /* against a naive loop over random ints with ties, both ends */
    test_rng r = {77};
    pardo_tensor *xi = test_tensor_random(&r, PARDO_I32, 2, (int64_t[]){5, 9}, 0, 3);
    for (int last = 0; last < 2; last++) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, "{\"axis\": 1, \"keepdims\": false, \"select_last_index\": %s}",
                 last ? "true" : "false");
        ck_assert_int_eq(test_run_op("argmin", attrs, 1, &xi, 1, &y, &st), PARDO_OK);
        for (int i = 0; i < 5; i++) {
            int best = 0;
            for (int j = 1; j < 9; j++) {
                const double v = pardo_tensor_get_f64(xi, i * 9 + j), b = pardo_tensor_get_f64(xi, i * 9 + best);
                if (last ? v <= b : v < b) best = j;
            }
            ck_assert_double_eq(pardo_tensor_get_f64(y, i), best);
        }
        pardo_tensor_release(y);
    }
    pardo_tensor_release(xi);
    pardo_tensor_release(x);
}
END_TEST

/* The axes as an int64 input read at run time (ONNX from opset 18) give what attr axes gives; with
 * noop_with_empty_axes no axes is the identity; inference knows the rank at most; the gradients take the
 * input too (X, axes, Y, dY). */
START_TEST(test_reduce_axes_input) {
    static const char *const ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
                                      "reduce_l1", "reduce_l2", "reduce_sum_square", "reduce_log_sum",
                                      "reduce_log_sum_exp"};
    test_rng r = {4242};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 3, 4}, 0.2, 2);
    pardo_tensor *axes = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){-1, 0});
    pardo_status st;
    for (int o = 0; o < LEN(ops); o++)
        for (int keep = 0; keep < 2; keep++) {
            char attrs[96];
            snprintf(attrs, sizeof attrs, "{\"axes\": [2, 0], \"keepdims\": %s}", keep ? "true" : "false");
            pardo_tensor *by_attr = NULL, *by_input = NULL, *in[2] = {x, axes};
            ck_assert_int_eq(test_run_op(ops[o], attrs, 1, &x, 1, &by_attr, &st), PARDO_OK);
            ck_assert_msg(test_run_op(ops[o], keep ? NULL : "{\"keepdims\": false}", 2, in, 1, &by_input, &st) ==
                              PARDO_OK, "%s: %s", ops[o], st.msg);
            test_assert_close(by_input, by_attr, 0, 0);
            pardo_tensor_release(by_input);
            pardo_tensor_release(by_attr);
            test_check_grad_default(ops[o], keep ? NULL : "{\"keepdims\": false}", 2, in, 1, 1u);
        }
    /* no axes: all of them, or with noop_with_empty_axes none */
    pardo_tensor *none = test_tensor_from(PARDO_I64, 1, (int64_t[]){0}, NULL), *in[2] = {x, none}, *y = NULL;
    ck_assert_int_eq(test_run_op("reduce_sum", "{\"keepdims\": false}", 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y->ndim, 0);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("reduce_sum", "{\"noop_with_empty_axes\": true}", 2, in, 1, &y, &st), PARDO_OK);
    test_assert_close(y, x, 0, 0);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("reduce_max", "{\"noop_with_empty_axes\": true}", 1, &x, 1, &y, &st), PARDO_OK);
    test_assert_close(y, x, 0, 0);
    pardo_tensor_release(y);
    /* inference: the rank (keepdims) or nothing */
    pardo_type tx = test_type(PARDO_F32, 2, (int64_t[]){5, 6}), ta = test_type(PARDO_I64, 1, (int64_t[]){1}), ty;
    const pardo_type *ti[2] = {&tx, &ta};
    ck_assert_int_eq(test_infer_op("reduce_mean", NULL, 2, ti, 1, &ty, &st), PARDO_OK);
    ck_assert_int_eq(ty.ndim, 2);
    ck_assert_int_eq(ty.shape[0], -1);
    ck_assert_int_eq(test_infer_op("reduce_mean", "{\"keepdims\": false}", 2, ti, 1, &ty, &st), PARDO_OK);
    ck_assert_int_eq(ty.ndim, -1);
    pardo_type tf = test_type(PARDO_F32, 1, (int64_t[]){1});
    const pardo_type *bad[2] = {&tx, &tf};
    ck_assert_int_eq(test_infer_op("reduce_mean", NULL, 2, bad, 1, &ty, &st), PARDO_ESHAPE);
    /* a repeated axis in the input is refused at run time */
    pardo_tensor *twice = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){1, -2}), *in2[2] = {x, twice};
    ck_assert_int_eq(test_run_op("reduce_sum", NULL, 2, in2, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "input 1 'axes'"), "%s", st.msg);
    pardo_tensor_release(twice);
    pardo_tensor_release(none);
    pardo_tensor_release(axes);
    pardo_tensor_release(x);
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
    tcase_add_test(core, test_reduce_max);
    tcase_add_test(core, test_extremes_every_dtype);
    tcase_add_test(core, test_sums_of_unsigned);
    tcase_add_test(core, test_onnx_reductions);
    tcase_add_test(core, test_onnx_reduction_gradients);
    tcase_add_test(core, test_argmin_select_last);
    tcase_add_test(core, test_reduce_axes_input);
    tcase_add_test(core, test_reduce_max_special);
    tcase_add_test(core, test_argmax);
    tcase_add_test(core, test_argmax_ties_nan_defaults);
    tcase_add_test(core, test_argmax_infer);
    tcase_add_test(core, test_reduce_gradients);
    tcase_add_test(core, test_reduce_max_grad_ties);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_axes);
    tcase_add_test(errors, test_err_dtypes);
    tcase_add_test(errors, test_err_argmax);
    tcase_add_test(errors, test_err_gradients);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_fixture_argmax);
    suite_add_tcase(s, fixtures);
    return s;
}
