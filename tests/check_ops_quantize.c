/* check_ops_quantize.c - quantize_linear and dequantize_linear against values computed by hand (ONNX's spec
 * examples: rounding ties to even, saturation at 0/255 and -128/127) and a naive per-axis reference loop in the
 * test; dynamic_quantize_linear on ONNX's example;
 * matmul_integer on ONNX's example and a naive loop (broadcast batch, per-row / per-column zero points);
 * refusals of a scale that does not match the axis and a zero point of the wrong dtype. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void expect_values(const pardo_tensor *y, const double *want, int n) {
    ck_assert_int_eq((int)y->numel, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(pardo_tensor_get_f64(y, i) == want[i], "element %d: %g, expected %g", i,
                      pardo_tensor_get_f64(y, i), want[i]);
}

START_TEST(test_quantize_by_hand) {
    /* ONNX's example: x / 2 rounded half to even, + 128, saturated to uint8 */
    int64_t n = 8, one = 1;
    pardo_tensor *in[3] = {
        test_tensor_from(PARDO_F32, 1, &n, (double[]){0, 2, 3, 1000, -254, -1000, 5, 7}),
        test_tensor_from(PARDO_F32, 0, NULL, (double[]){2}),
        test_tensor_from(PARDO_U8, 0, NULL, (double[]){128}),
    };
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("quantize_linear", "{}", 3, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->dtype, PARDO_U8);
    /* 3/2 = 1.5 -> 2, 5/2 = 2.5 -> 2, 7/2 = 3.5 -> 4 */
    expect_values(y, (double[]){128, 129, 130, 255, 1, 0, 130, 132}, 8);
    pardo_tensor_release(y);
    /* int8, zero point -1, 1-element 1-D scale */
    pardo_tensor_release(in[1]);
    pardo_tensor_release(in[2]);
    in[1] = test_tensor_from(PARDO_F32, 1, &one, (double[]){2});
    in[2] = test_tensor_from(PARDO_I8, 1, &one, (double[]){-1});
    ck_assert_msg(test_run_op("quantize_linear", "{}", 3, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->dtype, PARDO_I8);
    expect_values(y, (double[]){-1, 0, 1, 127, -128, -128, 1, 3}, 8);
    pardo_tensor_release(y);
    /* no zero point: uint8, 0 */
    ck_assert_msg(test_run_op("quantize_linear", "{}", 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->dtype, PARDO_U8);
    expect_values(y, (double[]){0, 1, 2, 255, 0, 0, 2, 4}, 8);
    pardo_tensor_release(y);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_dequantize_by_hand) {
    /* ONNX's example: (x - 128) * 2 */
    int64_t n = 4;
    pardo_tensor *in[3] = {
        test_tensor_from(PARDO_U8, 1, &n, (double[]){0, 3, 128, 255}),
        test_tensor_from(PARDO_F32, 0, NULL, (double[]){2}),
        test_tensor_from(PARDO_U8, 0, NULL, (double[]){128}),
    };
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("dequantize_linear", "{}", 3, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->dtype, PARDO_F32);
    expect_values(y, (double[]){-256, -250, 0, 254}, 4);
    pardo_tensor_release(y);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
    /* int32 without a zero point */
    pardo_tensor *x2[2] = {test_tensor_from(PARDO_I32, 1, &n, (double[]){-5, 0, 7, 100000}),
                           test_tensor_from(PARDO_F32, 0, NULL, (double[]){0.5})};
    ck_assert_msg(test_run_op("dequantize_linear", "{}", 2, x2, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    expect_values(y, (double[]){-2.5, 0, 3.5, 50000}, 4);
    pardo_tensor_release(y);
    for (int i = 0; i < 2; i++) pardo_tensor_release(x2[i]);
}
END_TEST

START_TEST(test_per_axis_reference) {
    /* X (2, 3, 4) along each axis, int8 and uint8: a naive loop over the three indices as reference */
    const int64_t shape[3] = {2, 3, 4};
    for (int axis = 0; axis < 3; axis++)
        for (int s = 0; s < 2; s++) {
            const pardo_dtype dt = s ? PARDO_I8 : PARDO_U8;
            int64_t c = shape[axis];
            double sc[4], zp[4], xs[24];
            for (int k = 0; k < c; k++) {
                sc[k] = 0.25 * (k + 1);
                zp[k] = s ? k * 3 - 4 : k * 10 + 100;
            }
            for (int i = 0; i < 24; i++) xs[i] = (i * 37 % 41) - 20.0 + (i % 2 ? 0.125 : 0);
            pardo_tensor *in[3] = {test_tensor_from(PARDO_F32, 3, shape, xs), test_tensor_from(PARDO_F32, 1, &c, sc),
                                   test_tensor_from(dt, 1, &c, zp)};
            char attrs[32];
            snprintf(attrs, sizeof attrs, "{\"axis\": %d}", axis - (axis == 2 ? 3 : 0)); /* -1 for the last */
            pardo_tensor *q = NULL, *d = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("quantize_linear", attrs, 3, in, 1, &q, &st) == PARDO_OK, "%s", st.msg);
            pardo_tensor *din[3] = {q, in[1], in[2]};
            ck_assert_msg(test_run_op("dequantize_linear", attrs, 3, din, 1, &d, &st) == PARDO_OK, "%s", st.msg);
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 3; b++)
                    for (int e = 0; e < 4; e++) {
                        const int i = (a * 3 + b) * 4 + e, k = axis == 0 ? a : axis == 1 ? b : e;
                        double r = (double)(float)(xs[i] / sc[k]), fl = floor(r), v;
                        v = r - fl > 0.5 ? fl + 1 : r - fl < 0.5 ? fl : (fmod(fl, 2) == 0 ? fl : fl + 1);
                        v += zp[k];
                        const double lo = s ? -128 : 0, hi = s ? 127 : 255;
                        v = v < lo ? lo : v > hi ? hi : v;
                        ck_assert_msg(pardo_tensor_get_f64(q, i) == v, "axis %d i %d: %g, expected %g", axis, i,
                                      pardo_tensor_get_f64(q, i), v);
                        ck_assert_double_eq(pardo_tensor_get_f64(d, i), (v - zp[k]) * sc[k]);
                    }
            pardo_tensor_release(q);
            pardo_tensor_release(d);
            for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

START_TEST(test_dynamic_by_hand) {
    /* ONNX's example: range [-3, 2] -> scale 5/255, zero point round(3 / scale) = 153 */
    int64_t n = 6;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 1, &n, (double[]){0, 2, -3, -2.5, 1.34, 0.5}), *y[3] = {NULL};
    pardo_status st;
    ck_assert_msg(test_run_op("dynamic_quantize_linear", "{}", 1, &x, 3, y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y[0]->dtype, PARDO_U8);
    ck_assert_double_eq(pardo_tensor_get_f64(y[1], 0), (double)(5.0f / 255.0f));
    ck_assert_double_eq(pardo_tensor_get_f64(y[2], 0), 153);
    expect_values(y[0], (double[]){153, 255, 0, 26, 221, 179}, 6);
    for (int i = 0; i < 3; i++) pardo_tensor_release(y[i]);
    pardo_tensor_release(x);
    /* all positive: min is 0, zero point 0; all zero: scale 1/255, all 0 */
    pardo_tensor *p = test_tensor_from(PARDO_F32, 1, &n, (double[]){1, 2.55, 0.01, 0.015, 0.025, 2}), *z = NULL;
    ck_assert_msg(test_run_op("dynamic_quantize_linear", "{}", 1, &p, 3, y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_double_eq(pardo_tensor_get_f64(y[2], 0), 0);
    expect_values(y[0], (double[]){100, 255, 1, 2, 2, 200}, 6); /* 1.5 -> 2, 2.5 -> 2 (scale 0.01 in float32) */
    for (int i = 0; i < 3; i++) pardo_tensor_release(y[i]);
    pardo_tensor_release(p);
    z = test_tensor_from(PARDO_F32, 1, &n, (double[]){0, 0, 0, 0, 0, 0});
    ck_assert_msg(test_run_op("dynamic_quantize_linear", "{}", 1, &z, 3, y, &st) == PARDO_OK, "%s", st.msg);
    expect_values(y[0], (double[]){0, 0, 0, 0, 0, 0}, 6);
    ck_assert_double_eq(pardo_tensor_get_f64(y[2], 0), 0);
    for (int i = 0; i < 3; i++) pardo_tensor_release(y[i]);
    pardo_tensor_release(z);
}
END_TEST

START_TEST(test_matmul_integer_by_hand) {
    /* ONNX's example: A (4, 3) uint8 zero point 12, B (3, 2) uint8 zero point 0 */
    const int64_t sa[2] = {4, 3}, sb[2] = {3, 2};
    pardo_tensor *in[4] = {
        test_tensor_from(PARDO_U8, 2, sa, (double[]){11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0}),
        test_tensor_from(PARDO_U8, 2, sb, (double[]){1, 4, 2, 5, 3, 6}),
        test_tensor_from(PARDO_U8, 0, NULL, (double[]){12}),
        test_tensor_from(PARDO_U8, 0, NULL, (double[]){0}),
    };
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("matmul_integer", "{}", 4, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->dtype, PARDO_I32);
    expect_values(y, (double[]){-38, -83, -44, -98, -50, -113, -56, -128}, 8);
    pardo_tensor_release(y);
    for (int i = 0; i < 4; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_matmul_integer_reference) {
    /* A (2, 1, 3, 5) int8 with per-row zero points, B (4, 5, 2) uint8 with per-column ones: batch (2, 4) */
    const int64_t sa[4] = {2, 1, 3, 5}, sb[3] = {4, 5, 2}, three = 3, two = 2;
    double av[30], bv[40];
    for (int i = 0; i < 30; i++) av[i] = (i * 53 % 256) - 128;
    for (int i = 0; i < 40; i++) bv[i] = i * 97 % 256;
    pardo_tensor *in[4] = {test_tensor_from(PARDO_I8, 4, sa, av), test_tensor_from(PARDO_U8, 3, sb, bv),
                           test_tensor_from(PARDO_I8, 1, &three, (double[]){-128, 0, 127}),
                           test_tensor_from(PARDO_U8, 1, &two, (double[]){255, 3})};
    const double za[3] = {-128, 0, 127}, zb[2] = {255, 3};
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("matmul_integer", "{}", 4, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->ndim, 4);
    ck_assert(y->shape[0] == 2 && y->shape[1] == 4 && y->shape[2] == 3 && y->shape[3] == 2);
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 2; j++) {
                    double want = 0;
                    for (int r = 0; r < 5; r++)
                        want += (av[p * 15 + i * 5 + r] - za[i]) * (bv[q * 10 + r * 2 + j] - zb[j]);
                    ck_assert_double_eq(pardo_tensor_get_f64(y, ((p * 4 + q) * 3 + i) * 2 + j), want);
                }
    pardo_tensor_release(y);
    for (int i = 0; i < 4; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_err_quantize) {
    pardo_type x = {PARDO_F32, 2, {2, 3}}, s3 = {PARDO_F32, 1, {3}}, s2 = {PARDO_F32, 1, {2}};
    pardo_type zi8 = {PARDO_I8, 1, {3}}, zi32 = {PARDO_I32, 1, {3}}, s2d = {PARDO_F32, 2, {1, 3}};
    pardo_type xu8 = {PARDO_U8, 2, {2, 3}}, y;
    pardo_status st;
    const pardo_type *ok[3] = {&x, &s3, &zi8};
    ck_assert_int_eq(test_infer_op("quantize_linear", "{}", 3, ok, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_I8);
    const pardo_type *bad_axis[3] = {&x, &s2, NULL};
    ck_assert_int_eq(test_infer_op("quantize_linear", "{}", 3, bad_axis, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("quantize_linear", "{\"axis\": 2}", 3, ok, 1, &y, &st), PARDO_EINVAL);
    const pardo_type *bad_zp[3] = {&x, &s3, &zi32};
    ck_assert_int_eq(test_infer_op("quantize_linear", "{}", 3, bad_zp, 1, &y, &st), PARDO_EINVAL);
    const pardo_type *bad_rank[3] = {&x, &s2d, NULL};
    ck_assert_int_eq(test_infer_op("quantize_linear", "{}", 3, bad_rank, 1, &y, &st), PARDO_EINVAL);
    const pardo_type *dq_zp[3] = {&xu8, &s3, &zi8}; /* zero point int8, X uint8 */
    ck_assert_int_eq(test_infer_op("dequantize_linear", "{}", 3, dq_zp, 1, &y, &st), PARDO_EINVAL);
    const pardo_type *dq_f[2] = {&x, &s3}; /* float X */
    ck_assert_int_eq(test_infer_op("dequantize_linear", "{}", 2, dq_f, 1, &y, &st), PARDO_EINVAL);
    pardo_type y3[3];
    const pardo_type *dyn_u8[1] = {&xu8};
    ck_assert_int_eq(test_infer_op("dynamic_quantize_linear", "{}", 1, dyn_u8, 3, y3, &st), PARDO_EINVAL);
    pardo_type a = {PARDO_U8, 2, {4, 3}}, b = {PARDO_U8, 2, {3, 2}}, bk = {PARDO_U8, 2, {4, 2}};
    pardo_type zs8 = {PARDO_I8, 0, {0}}, z5 = {PARDO_U8, 1, {5}};
    const pardo_type *mi_ok[4] = {&a, &b, NULL, NULL}, *mi_k[4] = {&a, &bk, NULL, NULL};
    const pardo_type *mi_zd[4] = {&a, &b, &zs8, NULL}, *mi_zn[4] = {&a, &b, NULL, &z5}, *mi_f[4] = {&x, &b, NULL, NULL};
    ck_assert_int_eq(test_infer_op("matmul_integer", "{}", 4, mi_ok, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(test_infer_op("matmul_integer", "{}", 4, mi_k, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("matmul_integer", "{}", 4, mi_zd, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("matmul_integer", "{}", 4, mi_zn, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("matmul_integer", "{}", 4, mi_f, 1, &y, &st), PARDO_EINVAL);
}
END_TEST

Suite *make_ops_quantize_suite(void) {
    Suite *s = suite_create("ops_quantize");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_quantize_by_hand);
    tcase_add_test(core, test_dequantize_by_hand);
    tcase_add_test(core, test_per_axis_reference);
    tcase_add_test(core, test_dynamic_by_hand);
    tcase_add_test(core, test_matmul_integer_by_hand);
    tcase_add_test(core, test_matmul_integer_reference);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_quantize);
    suite_add_tcase(s, errors);
    return s;
}
