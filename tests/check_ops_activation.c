/* check_ops_activation.c - leaky_relu, gelu and ONNX's activations (elu,
 * selu, celu, hard_sigmoid, hard_swish, softplus, softsign,
 * thresholded_relu, mish, shrink, prelu with a broadcast slope) against
 * their definitions in double, with their gradients; leaky_relu and gelu against naive loops in double
 * (float32 and float64, edge sizes), special values, the gradients of relu,
 * leaky_relu, sigmoid, tanh and gelu against float64 finite differences
 * (inputs kept away from the kinks at 0), errors and NumPy fixtures for
 * gelu. relu, sigmoid and tanh forward are in check_ops_elementwise.c. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct shape_t {
    int nd;
    int64_t d[PARDO_MAX_DIMS];
} shape_t;

static double ref_leaky_default(double x) { return x < 0 ? 0.01 * x : x; }
static double ref_leaky_02(double x) { return x < 0 ? 0.2 * x : x; }
/* 0.5 x (1 + erf(x / sqrt 2)), written with erfc to keep the digits of negative x */
static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

typedef struct act_case {
    const char *op;
    const char *attrs;
    double (*f)(double);
} act_case;

START_TEST(test_forward) {
    static const act_case cases[] = {
        {"leaky_relu", NULL, ref_leaky_default},
        {"leaky_relu", "{\"alpha\": 0.2}", ref_leaky_02},
        {"gelu", NULL, ref_gelu},
    };
    static const shape_t shapes[] = {{0, {0}}, {1, {1}}, {1, {9}}, {2, {4, 7}}, {2, {0, 5}}, {3, {2, 3, 41}}};
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int c = 0; c < LEN(cases); c++)
        for (int s = 0; s < LEN(shapes); s++)
            for (int t = 0; t < 2; t++) {
                test_rng r = {300u + (uint64_t)(c * 31 + s * 7 + t)};
                pardo_tensor *x = test_tensor_random(&r, dts[t], shapes[s].nd, shapes[s].d, -6, 6), *y = NULL;
                pardo_status st;
                ck_assert_msg(test_run_op(cases[c].op, cases[c].attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s",
                              cases[c].op, st.msg);
                pardo_tensor *want = pardo_tensor_clone(x, &st);
                for (int64_t i = 0; i < x->numel; i++)
                    pardo_tensor_set_f64(want, i, cases[c].f(pardo_tensor_get_f64(x, i)));
                test_assert_close(y, want, dts[t] == PARDO_F32 ? 2e-6 : 1e-14, dts[t] == PARDO_F32 ? 1e-7 : 1e-16);
                pardo_tensor_release(want);
                pardo_tensor_release(y);
                pardo_tensor_release(x);
            }
}
END_TEST

START_TEST(test_special_values) {
    const double xs[] = {-1000, -40, -1e-30, 0, 1e-30, 40, 1000, INFINITY, -INFINITY, NAN};
    int64_t n = LEN(xs);
    for (int t = 0; t < 2; t++) {
        pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
        pardo_tensor *x = test_tensor_from(dt, 1, &n, xs), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("gelu", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 0);     /* -1000 * Phi(-1000) underflows to -0 */
        ck_assert_double_eq(pardo_tensor_get_f64(y, 3), 0);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 5), 40);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 6), 1000);
        ck_assert(isinf(pardo_tensor_get_f64(y, 7)));
        ck_assert(isnan(pardo_tensor_get_f64(y, 9)));
        pardo_tensor_release(y);
        ck_assert_int_eq(test_run_op("leaky_relu", "{\"alpha\": 0.5}", 1, &x, 1, &y, &st), PARDO_OK);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 0), -500);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 6), 1000);
        ck_assert(isinf(pardo_tensor_get_f64(y, 8)) && pardo_tensor_get_f64(y, 8) < 0);
        ck_assert(isnan(pardo_tensor_get_f64(y, 9)));
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_gradients) {
    static const act_case cases[] = {
        {"relu", NULL, NULL},    {"leaky_relu", NULL, NULL}, {"leaky_relu", "{\"alpha\": -0.3}", NULL},
        {"sigmoid", NULL, NULL}, {"tanh", NULL, NULL},       {"gelu", NULL, NULL},
    };
    static const shape_t shapes[] = {{1, {11}}, {3, {2, 3, 4}}, {0, {0}}};
    for (int c = 0; c < LEN(cases); c++)
        for (int s = 0; s < LEN(shapes); s++) {
            test_rng r = {700u + (uint64_t)(c * 8 + s)};
            pardo_tensor *x = test_tensor_random(&r, PARDO_F64, shapes[s].nd, shapes[s].d, -4, 4);
            test_push_away(x, 0, 0.01);
            test_check_grad_default(cases[c].op, cases[c].attrs, 1, &x, 1, 1u);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_gradient_at_kinks_and_float32) {
    /* at 0 relu and leaky_relu take the left slope (PyTorch); float32 agrees
     * with the formulas in double */
    int64_t n = 4;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 1, &n, (double[]){-1.5, 0, 0.5, 3});
    pardo_tensor *dy = test_tensor_from(PARDO_F32, 1, &n, (double[]){1, 2, 3, 4});
    const char *ops[] = {"relu", "leaky_relu", "sigmoid", "tanh", "gelu"};
    for (int k = 0; k < LEN(ops); k++) {
        pardo_tensor *y = NULL, *dx = NULL;
        pardo_status st;
        const char *attrs = k == 1 ? "{\"alpha\": 0.25}" : NULL;
        ck_assert_int_eq(test_run_op(ops[k], attrs, 1, &x, 1, &y, &st), PARDO_OK);
        pardo_tensor *in[3] = {x, y, dy};
        char g[32];
        snprintf(g, sizeof g, "%s_grad", ops[k]);
        ck_assert_msg(test_run_op(g, attrs, 3, in, 1, &dx, &st) == PARDO_OK, "%s: %s", g, st.msg);
        ck_assert_int_eq(dx->dtype, PARDO_F32);
        for (int i = 0; i < n; i++) {
            double v = pardo_tensor_get_f64(x, i), gy = pardo_tensor_get_f64(dy, i), want;
            double sg = 1 / (1 + exp(-v)), th = tanh(v);
            switch (k) {
            case 0: want = v > 0 ? gy : 0; break;
            case 1: want = v > 0 ? gy : 0.25 * gy; break;
            case 2: want = gy * sg * (1 - sg); break;
            case 3: want = gy * (1 - th * th); break;
            default: want = gy * (0.5 * erfc(-v / sqrt(2.0)) + v * exp(-v * v / 2) / sqrt(2 * M_PI)); break;
            }
            ck_assert_msg(fabs(pardo_tensor_get_f64(dx, i) - want) <= 1e-6 * (1 + fabs(want)), "%s at %g: %g, want %g",
                          g, v, pardo_tensor_get_f64(dx, i), want);
        }
        pardo_tensor_release(dx);
        pardo_tensor_release(y);
    }
    pardo_tensor_release(dy);
    pardo_tensor_release(x);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_err_dtypes_and_attrs) {
    pardo_status st;
    int64_t s[] = {3};
    const char *ops[] = {"leaky_relu", "gelu"};
    for (int k = 0; k < 2; k++) {
        pardo_type x = test_type(PARDO_I64, 1, s), y;
        const pardo_type *in[1] = {&x};
        ck_assert_int_eq(test_infer_op(ops[k], NULL, 1, in, 1, &y, &st), PARDO_ESHAPE);
        ck_assert_msg(strstr(st.msg, "int64") && strstr(st.msg, "'X'"), "%s: %s", ops[k], st.msg);
        /* the gradient op refuses an integer X */
        const pardo_type *gin[3] = {&x, &x, &x};
        char g[32];
        snprintf(g, sizeof g, "%s_grad", ops[k]);
        ck_assert_int_eq(test_infer_op(g, NULL, 3, gin, 1, &y, &st), PARDO_ENOTSUP);
        ck_assert_msg(strstr(st.msg, "int64") != NULL, "%s: %s", g, st.msg);
    }
    pardo_type x = test_type(PARDO_F32, 1, s), y;
    const pardo_type *in[1] = {&x};
    ck_assert_int_eq(test_infer_op("leaky_relu", "{\"alpha\": \"big\"}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'alpha'") != NULL, "message: %s", st.msg);
}
END_TEST

/* ---- NumPy fixtures ---- */

START_TEST(test_fixture_gelu) {
    static const char *const cases[] = {"gelu_f32", "gelu_f64"};
    for (int c = 0; c < LEN(cases); c++) {
        char name[96];
        snprintf(name, sizeof name, "ops/%s_x.npy", cases[c]);
        pardo_tensor *x = test_npy_load(name), *y = NULL;
        snprintf(name, sizeof name, "ops/%s_y.npy", cases[c]);
        pardo_tensor *want = test_npy_load(name);
        pardo_status st;
        ck_assert_msg(test_run_op("gelu", NULL, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", cases[c], st.msg);
        test_assert_close(y, want, x->dtype == PARDO_F32 ? 2e-6 : 1e-14, x->dtype == PARDO_F32 ? 1e-7 : 1e-16);
        pardo_tensor_release(y);
        pardo_tensor_release(want);
        pardo_tensor_release(x);
    }
}
END_TEST

/* ---- ONNX's activations, against their definitions in double ---- */

#define SELU_A 1.67326319217681884765625
#define SELU_G 1.05070102214813232421875
static double ref_elu(double x) { return x > 0 ? x : exp(x) - 1; }
static double ref_elu_02(double x) { return x > 0 ? x : 0.2 * (exp(x) - 1); }
static double ref_selu(double x) { return x > 0 ? SELU_G * x : SELU_G * SELU_A * (exp(x) - 1); }
static double ref_celu_2(double x) { return fmax(0, x) + fmin(0, 2 * (exp(x / 2) - 1)); }
static double ref_hard_sigmoid(double x) { return fmax(0, fmin(1, 0.2 * x + 0.5)); }
static double ref_hard_swish(double x) { return x * fmax(0, fmin(1, x / 6 + 0.5)); }
static double ref_softplus(double x) { return log(1 + exp(x)); }
static double ref_softsign(double x) { return x / (1 + fabs(x)); }
static double ref_thresholded(double x) { return x > 1 ? x : 0; }
static double ref_mish(double x) { return x * tanh(log(1 + exp(x))); }
static double ref_shrink(double x) { return x < -1.5 ? x + 0.25 : x > 1.5 ? x - 0.25 : 0; }

static const struct {
    const char *op, *attrs;
    double (*f)(double);
    double kinks[2]; /* kept away from in the gradient checks (NAN: none) */
} onnx_acts[] = {
    {"elu", NULL, ref_elu, {0, NAN}},
    {"elu", "{\"alpha\": 0.2}", ref_elu_02, {0, NAN}},
    {"selu", NULL, ref_selu, {0, NAN}},
    {"celu", "{\"alpha\": 2}", ref_celu_2, {0, NAN}},
    {"hard_sigmoid", NULL, ref_hard_sigmoid, {-2.5, 2.5}},
    {"hard_swish", NULL, ref_hard_swish, {-3, 3}},
    {"softplus", NULL, ref_softplus, {NAN, NAN}},
    {"softsign", NULL, ref_softsign, {0, NAN}},
    {"thresholded_relu", NULL, ref_thresholded, {1, NAN}},
    {"mish", NULL, ref_mish, {NAN, NAN}},
    {"shrink", "{\"lambd\": 1.5, \"bias\": 0.25}", ref_shrink, {-1.5, 1.5}},
};

START_TEST(test_onnx_activations) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int c = 0; c < LEN(onnx_acts); c++)
        for (int t = 0; t < 2; t++) {
            test_rng r = {900u + (uint64_t)(c * 2 + t)};
            pardo_tensor *x = test_tensor_random(&r, dts[t], 2, (int64_t[]){5, 13}, -6, 6), *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op(onnx_acts[c].op, onnx_acts[c].attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s",
                          onnx_acts[c].op, st.msg);
            pardo_tensor *want = pardo_tensor_clone(x, &st);
            for (int64_t i = 0; i < x->numel; i++)
                pardo_tensor_set_f64(want, i, onnx_acts[c].f(pardo_tensor_get_f64(x, i)));
            test_assert_close(y, want, t ? 1e-13 : 2e-6, t ? 1e-15 : 1e-7);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_onnx_activation_gradients) {
    for (int c = 0; c < LEN(onnx_acts); c++) {
        test_rng r = {950u + (uint64_t)c};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 3, 5}, -4, 4);
        for (int k = 0; k < 2; k++)
            if (!isnan(onnx_acts[c].kinks[k])) test_push_away(x, onnx_acts[c].kinks[k], 0.01);
        test_check_grad_default(onnx_acts[c].op, onnx_acts[c].attrs, 1, &x, 1, 1u);
        pardo_tensor_release(x);
    }
}
END_TEST

/* prelu with a slope of [3, 1] broadcast to X [2, 3, 4]; its gradients for both inputs. */
START_TEST(test_prelu_broadcast) {
    test_rng r = {977};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 3, 4}, -2, 2);
    pardo_tensor *sl = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 1}, -1, 1), *in[2] = {x, sl}, *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("prelu", NULL, 2, in, 1, &y, &st), PARDO_OK);
    for (int64_t e = 0; e < 24; e++) {
        const double v = pardo_tensor_get_f64(x, e), a = pardo_tensor_get_f64(sl, e / 4 % 3);
        ck_assert_double_eq(pardo_tensor_get_f64(y, e), v < 0 ? a * v : v);
    }
    pardo_tensor_release(y);
    test_push_away(x, 0, 0.01);
    test_check_grad_default("prelu", NULL, 2, in, 1, 3u);
    /* a slope that does not broadcast to X (it would grow X) is refused */
    pardo_tensor *big = test_tensor_random(&r, PARDO_F64, 4, (int64_t[]){5, 2, 3, 4}, -1, 1), *bad[2] = {x, big};
    ck_assert_int_eq(test_run_op("prelu", NULL, 2, bad, 1, &y, &st), PARDO_ESHAPE);
    pardo_tensor_release(big);
    pardo_tensor_release(sl);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_ops_activation_suite(void) {
    Suite *s = suite_create("ops_activation");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_forward);
    tcase_add_test(core, test_special_values);
    tcase_add_test(core, test_gradients);
    tcase_add_test(core, test_gradient_at_kinks_and_float32);
    tcase_add_test(core, test_onnx_activations);
    tcase_add_test(core, test_onnx_activation_gradients);
    tcase_add_test(core, test_prelu_broadcast);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_dtypes_and_attrs);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_fixture_gelu);
    suite_add_tcase(s, fixtures);
    return s;
}
