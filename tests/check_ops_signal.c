/* check_ops_signal.c - ops/signal.c: dft (real and complex, power-of-two
 * and other lengths, an inner axis, inverse, onesided, padded and cut to
 * dft_length, float64) against the direct sum written here with cos and sin
 * of each angle, and a round trip; stft with and without a window against
 * the same sum over frames; the three windows against numpy's values worked
 * by hand; mel_weight_matrix against ONNX's reference (the numpy script's
 * output in the test); the refusals. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

static void expect_close(const pardo_tensor *y, int64_t n, const double *want, double tol, const char *what) {
    ck_assert_int_eq(y->numel, n);
    for (int64_t i = 0; i < n; i++) {
        const double g = pardo_tensor_get_f64(y, i);
        ck_assert_msg(fabs(g - want[i]) <= tol * (1 + fabs(want[i])), "%s[%lld]: %.9g, want %.9g", what, (long long)i,
                      g, want[i]);
    }
}

/* The direct sum: out[k] (re, im) for k < m of the n-point transform of x[j] (re, im; j < len, zero past). */
static void naive_dft(const double *xr, const double *xi, int64_t len, int64_t n, int64_t m, bool inverse,
                      double *outr, double *outi) {
    for (int64_t k = 0; k < m; k++) {
        double sr = 0, si = 0;
        for (int64_t j = 0; j < len && j < n; j++) {
            const double a = (inverse ? 2 : -2) * M_PI * (double)(k * j) / (double)n;
            sr += xr[j] * cos(a) - xi[j] * sin(a);
            si += xr[j] * sin(a) + xi[j] * cos(a);
        }
        outr[k] = inverse ? sr / (double)n : sr;
        outi[k] = inverse ? si / (double)n : si;
    }
}

/* dft of X [2, len, 3, c] along axis 1 (or -3) against naive_dft on each of the 6 rows. */
static void check_dft(pardo_dtype dt, int64_t len, int64_t c, int64_t dft_length, bool inverse, bool onesided) {
    const int64_t shape[4] = {2, len, 3, c}, n = dft_length > 0 ? dft_length : len, m = onesided ? n / 2 + 1 : n;
    double xv[2 * 64 * 3 * 2], want[2 * 64 * 3 * 2];
    for (int64_t i = 0; i < 2 * len * 3 * c; i++) xv[i] = sin(0.7 * (double)i + 0.3) * 3 + (double)(i % 5) - 2;
    for (int64_t o = 0; o < 2; o++)
        for (int64_t q = 0; q < 3; q++) {
            double xr[64], xi[64], yr[64], yi[64];
            for (int64_t j = 0; j < len; j++) {
                xr[j] = xv[((o * len + j) * 3 + q) * c];
                xi[j] = c == 2 ? xv[((o * len + j) * 3 + q) * c + 1] : 0;
            }
            naive_dft(xr, xi, len, n, m, inverse, yr, yi);
            for (int64_t k = 0; k < m; k++) {
                want[((o * m + k) * 3 + q) * 2] = yr[k];
                want[((o * m + k) * 3 + q) * 2 + 1] = yi[k];
            }
        }
    char attrs[128];
    int at = snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"inverse\": %s, \"onesided\": %s", onesided ? -3 : 1,
                      inverse ? "true" : "false", onesided ? "true" : "false");
    if (dft_length > 0) at += snprintf(attrs + at, sizeof attrs - (size_t)at, ", \"dft_length\": %lld",
                                       (long long)dft_length);
    snprintf(attrs + at, sizeof attrs - (size_t)at, "}");
    pardo_tensor *x = test_tensor_from(dt, 4, shape, xv), *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("dft", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
    ck_assert_int_eq(y->dtype, dt);
    ck_assert_int_eq(y->shape[1], m);
    ck_assert_int_eq(y->shape[3], 2);
    expect_close(y, 2 * m * 3 * 2, want, dt == PARDO_F32 ? 2e-5 : 1e-12, attrs);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}

START_TEST(test_dft) {
    for (int inverse = 0; inverse < 2; inverse++)
        for (int c = 1; c <= 2; c++) {
            check_dft(PARDO_F32, 8, c, 0, inverse, false);  /* radix 2 */
            check_dft(PARDO_F32, 6, c, 0, inverse, false);  /* direct */
            check_dft(PARDO_F64, 16, c, 0, inverse, false);
            check_dft(PARDO_F64, 5, c, 8, inverse, false);  /* padded to a power of two */
            check_dft(PARDO_F64, 8, c, 6, inverse, false);  /* cut */
        }
    check_dft(PARDO_F32, 8, 1, 0, false, true);
    check_dft(PARDO_F64, 7, 1, 0, false, true);
    check_dft(PARDO_F64, 7, 1, 4, false, true);
}
END_TEST

START_TEST(test_dft_round_trip) {
    /* the inverse of the transform is the signal: [32, 2] complex along axis 0 */
    double xv[64];
    for (int i = 0; i < 64; i++) xv[i] = (double)((i * 37) % 11) - 5;
    pardo_tensor *x = test_tensor_from(PARDO_F64, 2, (int64_t[]){32, 2}, xv), *y = NULL, *z = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("dft", "{\"axis\": 0}", 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(test_run_op("dft", "{\"axis\": -2, \"inverse\": true}", 1, &y, 1, &z, &st) == PARDO_OK, "%s",
                  st.msg);
    expect_close(z, 64, xv, 1e-12, "round trip");
    /* hand-checked: the transform of [1, 2, 3, 4] is [10, -2 + 2i, -2, -2 - 2i] */
    pardo_tensor *a = test_tensor_from(PARDO_F32, 2, (int64_t[]){4, 1}, (double[]){1, 2, 3, 4}), *b = NULL;
    ck_assert_msg(test_run_op("dft", "{\"axis\": 0}", 1, &a, 1, &b, &st) == PARDO_OK, "%s", st.msg);
    expect_close(b, 8, (double[]){10, 0, -2, 2, -2, 0, -2, -2}, 1e-6, "[1, 2, 3, 4]");
    pardo_tensor *const all[] = {x, y, z, a, b};
    for (int i = 0; i < 5; i++) pardo_tensor_release(all[i]);
}
END_TEST

START_TEST(test_stft) {
    /* signal [2, 20, 1], frames of 6 every 3: 5 frames; with a window (onesided, 4 bins) and without (6 bins) */
    double sv[40], wv[6] = {0.1, 0.5, 1, 0.9, 0.4, 0.2};
    for (int i = 0; i < 40; i++) sv[i] = cos(0.9 * i) + 0.1 * i;
    pardo_tensor *s = test_tensor_from(PARDO_F32, 3, (int64_t[]){2, 20, 1}, sv);
    pardo_tensor *w = test_tensor_from(PARDO_F32, 1, (int64_t[]){6}, wv);
    for (int windowed = 0; windowed < 2; windowed++) {
        const int64_t m = windowed ? 4 : 6;
        double want[2 * 5 * 6 * 2];
        for (int b = 0; b < 2; b++)
            for (int f = 0; f < 5; f++) {
                double xr[6], xi[6] = {0}, yr[6], yi[6];
                for (int j = 0; j < 6; j++) xr[j] = sv[b * 20 + f * 3 + j] * (windowed ? wv[j] : 1);
                naive_dft(xr, xi, 6, 6, m, false, yr, yi);
                for (int k = 0; k < m; k++) {
                    want[((b * 5 + f) * m + k) * 2] = yr[k];
                    want[((b * 5 + f) * m + k) * 2 + 1] = yi[k];
                }
            }
        pardo_tensor *in[2] = {s, windowed ? w : NULL}, *y = NULL;
        pardo_status st;
        ck_assert_msg(test_run_op("stft", windowed ? "{\"frame_step\": 3}"
                                                   : "{\"frame_step\": 3, \"frame_length\": 6, \"onesided\": false}",
                                  windowed ? 2 : 1, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        ck_assert_int_eq(y->ndim, 4);
        ck_assert_int_eq(y->shape[1], 5);
        ck_assert_int_eq(y->shape[2], m);
        expect_close(y, 2 * 5 * m * 2, want, 2e-5, windowed ? "windowed" : "plain");
        pardo_tensor_release(y);
    }
    pardo_tensor_release(w);
    pardo_tensor_release(s);
}
END_TEST

/* Runs window op `type` of size n with attrs and checks it against want. */
static void check_window(const char *type, const char *attrs, int64_t n, const double *want) {
    pardo_tensor *size = test_tensor_from(PARDO_I32, 0, NULL, (double[]){(double)n}), *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op(type, attrs, 1, &size, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    expect_close(y, n, want, 1e-7, type);
    pardo_tensor_release(y);
    pardo_tensor_release(size);
}

START_TEST(test_windows) {
    /* numpy: hanning(5) = [0, .5, 1, .5, 0]; periodic 4 is hanning(5)[:4]; Hamming 25/46 - 21/46 cos: 4/46 at
     * the ends; blackman(3) = [0, 1, 0], periodic 4 = [0, .34, 1, .34] (0.42 - 0.5 cos(pi / 2) + 0.08 cos(pi)) */
    check_window("hann_window", "{\"periodic\": false}", 5, (double[]){0, 0.5, 1, 0.5, 0});
    check_window("hann_window", NULL, 4, (double[]){0, 0.5, 1, 0.5});
    check_window("hamming_window", "{\"periodic\": false}", 3, (double[]){4.0 / 46, 1, 4.0 / 46});
    check_window("hamming_window", "{\"dtype\": \"float64\"}", 4, (double[]){4.0 / 46, 25.0 / 46, 1, 25.0 / 46});
    check_window("blackman_window", "{\"periodic\": false}", 3, (double[]){0, 1, 0});
    check_window("blackman_window", NULL, 4, (double[]){0, 0.34, 1, 0.34});
    check_window("hann_window", "{\"periodic\": false}", 1, (double[]){1});
    check_window("hann_window", NULL, 0, NULL);
}
END_TEST

START_TEST(test_mel_weight_matrix) {
    /* ONNX's reference (onnx/reference/ops/op_mel_weight_matrix.py) for 4 bins, dft_length 32, sample_rate 8000,
     * 100 to 4000 Hz: edges [0, 1, 3, 5, 7, 11]; the non-zero entries (row, column, value) */
    static const double nz[13][3] = {{1, 0, 1},   {2, 0, .5}, {2, 1, .5}, {3, 1, 1},   {4, 1, .5},
                                     {4, 2, .5},  {5, 2, 1},  {6, 2, .5}, {6, 3, .5},  {7, 3, 1},
                                     {8, 3, .75}, {9, 3, .5}, {10, 3, .25}};
    double want[17 * 4] = {0};
    for (int i = 0; i < 13; i++) want[(int)nz[i][0] * 4 + (int)nz[i][1]] = nz[i][2];
    pardo_tensor *in[5] = {test_tensor_from(PARDO_I64, 0, NULL, (double[]){4}),
                           test_tensor_from(PARDO_I32, 0, NULL, (double[]){32}),
                           test_tensor_from(PARDO_I64, 0, NULL, (double[]){8000}),
                           test_tensor_from(PARDO_F32, 0, NULL, (double[]){100}),
                           test_tensor_from(PARDO_F32, 0, NULL, (double[]){4000})};
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("mel_weight_matrix", NULL, 5, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->shape[0], 17);
    ck_assert_int_eq(y->shape[1], 4);
    expect_close(y, 17 * 4, want, 0, "mel");
    pardo_tensor_release(y);
    /* upper edge far past the Nyquist frequency: the filters leave the matrix */
    pardo_tensor_release(in[4]);
    in[4] = test_tensor_from(PARDO_F32, 0, NULL, (double[]){40000});
    ck_assert_int_eq(test_run_op("mel_weight_matrix", NULL, 5, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "upper_edge_hertz"), "%s", st.msg);
    for (int k = 0; k < 5; k++) pardo_tensor_release(in[k]);
}
END_TEST

START_TEST(test_signal_errors) {
    pardo_status st;
    pardo_type t = test_type(PARDO_F32, 3, (int64_t[]){2, 8, 1}), c = test_type(PARDO_F32, 3, (int64_t[]){2, 8, 2}),
               b = test_type(PARDO_F32, 3, (int64_t[]){2, 8, 3}), out;
    const pardo_type *in[2] = {&t, NULL};
    ck_assert_int_eq(test_infer_op("dft", "{\"axis\": 2}", 1, in, 1, &out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "axis"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("dft", "{\"dft_length\": 0}", 1, in, 1, &out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("dft", "{\"onesided\": true, \"inverse\": true}", 1, in, 1, &out, &st),
                     PARDO_ENOTSUP);
    in[0] = &c;
    ck_assert_int_eq(test_infer_op("dft", "{\"onesided\": true}", 1, in, 1, &out, &st), PARDO_ENOTSUP);
    in[0] = &b;
    ck_assert_int_eq(test_infer_op("dft", NULL, 1, in, 1, &out, &st), PARDO_ESHAPE);
    in[0] = &t;
    ck_assert_int_eq(test_infer_op("stft", NULL, 1, in, 1, &out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "frame_step"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("stft", "{\"frame_step\": 1, \"frame_length\": 9}", 1, in, 1, &out, &st),
                     PARDO_ESHAPE);
    pardo_type w = test_type(PARDO_F32, 1, (int64_t[]){5});
    in[1] = &w;
    ck_assert_int_eq(test_infer_op("stft", "{\"frame_step\": 1, \"frame_length\": 4}", 2, in, 1, &out, &st),
                     PARDO_ESHAPE);
    pardo_tensor *size = test_tensor_from(PARDO_I64, 0, NULL, (double[]){-3}), *y = NULL;
    ck_assert_int_eq(test_run_op("hann_window", NULL, 1, &size, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_run_op("blackman_window", "{\"dtype\": \"int32\"}", 1, &size, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "dtype"), "%s", st.msg);
    pardo_tensor_release(size);
    size = test_tensor_from(PARDO_F32, 0, NULL, (double[]){3});
    ck_assert_int_eq(test_run_op("hamming_window", NULL, 1, &size, 1, &y, &st), PARDO_ESHAPE);
    pardo_tensor_release(size);
}
END_TEST

Suite *make_ops_signal_suite(void) {
    Suite *s = suite_create("ops_signal");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_dft);
    tcase_add_test(core, test_dft_round_trip);
    tcase_add_test(core, test_stft);
    tcase_add_test(core, test_windows);
    tcase_add_test(core, test_mel_weight_matrix);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_signal_errors);
    suite_add_tcase(s, errors);
    return s;
}
