/* check_ops_softmax.c - softmax, log_softmax and softmax_cross_entropy
 * against naive double loops (log-sum-exp written out), stability on large
 * logits, edge sizes, inference, errors (bad axis, dtypes, reduction,
 * labels) and NumPy fixtures; their gradient ops against float64 finite
 * differences. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "exec/thread_pool.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* softmax of x along axis, the textbook formula in double (inputs here are
 * small enough not to overflow exp). */
static pardo_tensor *ref_softmax(const pardo_tensor *x, int axis) {
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, x->ndim, x->shape, &st);
    ck_assert_ptr_nonnull(y);
    int64_t n = x->shape[axis], inner = 1;
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t base = i - ((i / inner) % n) * inner; /* index of element k = 0 of i's row */
        double den = 0;
        for (int64_t k = 0; k < n; k++) den += exp(pardo_tensor_get_f64(x, base + k * inner));
        pardo_tensor_set_f64(y, i, exp(pardo_tensor_get_f64(x, i)) / den);
    }
    return y;
}

static const struct {
    int nd;
    int64_t shape[4];
    int axis;      // as given
    int axis_norm; // normalised
} sm_cases[] = {
    {1, {5}, -1, 0},    {2, {3, 7}, -1, 1}, {2, {3, 7}, 0, 0}, {3, {2, 3, 4}, 1, 1},    {3, {2, 3, 4}, -3, 0},
    {2, {1, 1}, -1, 1}, {2, {0, 5}, 1, 1},  {2, {4, 1}, 1, 1}, {4, {2, 3, 1, 5}, 2, 2}, {2, {2, 1000}, -1, 1},
};

START_TEST(test_softmax_reference) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int c = 0; c < LEN(sm_cases); c++)
        for (int t = 0; t < 2; t++) {
            test_rng r = {11u + (uint64_t)(c * 2 + t)};
            pardo_tensor *x = test_tensor_random(&r, dts[t], sm_cases[c].nd, sm_cases[c].shape, -5, 5), *y = NULL;
            char attrs[64];
            snprintf(attrs, sizeof attrs, "{\"axis\": %d}", sm_cases[c].axis);
            pardo_status st;
            ck_assert_msg(test_run_op("softmax", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "case %d: %s", c, st.msg);
            pardo_tensor *want = ref_softmax(x, sm_cases[c].axis_norm);
            test_assert_close(y, want, dts[t] == PARDO_F32 ? 1e-5 : 1e-12, 1e-7);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_log_softmax_reference) {
    /* log of the textbook softmax in double, on every softmax case */
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int c = 0; c < LEN(sm_cases); c++)
        for (int t = 0; t < 2; t++) {
            test_rng r = {61u + (uint64_t)(c * 2 + t)};
            pardo_tensor *x = test_tensor_random(&r, dts[t], sm_cases[c].nd, sm_cases[c].shape, -5, 5), *y = NULL;
            char attrs[64];
            snprintf(attrs, sizeof attrs, "{\"axis\": %d}", sm_cases[c].axis);
            pardo_status st;
            ck_assert_msg(test_run_op("log_softmax", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "case %d: %s", c, st.msg);
            pardo_tensor *want = ref_softmax(x, sm_cases[c].axis_norm);
            for (int64_t i = 0; i < want->numel; i++) pardo_tensor_set_f64(want, i, log(pardo_tensor_get_f64(want, i)));
            test_assert_close(y, want, dts[t] == PARDO_F32 ? 1e-5 : 1e-12, dts[t] == PARDO_F32 ? 1e-5 : 1e-12);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_log_softmax_stable) {
    /* exp(1000) overflows and exp(-1000) underflows; log_softmax stays finite and exact */
    int64_t s[] = {2, 3};
    for (int t = 0; t < 2; t++) {
        pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
        pardo_tensor *x = test_tensor_from(dt, 2, s, (double[]){1000, 1001, 1002, -1000, -1001, -1002}), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("log_softmax", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        double lz = log(1 + exp(-1.0) + exp(-2.0));
        const double want[] = {-2 - lz, -1 - lz, -lz, -lz, -1 - lz, -2 - lz};
        for (int i = 0; i < 6; i++) ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i), want[i], 1e-6);
        pardo_tensor_release(y);
        /* a row of -inf but one finite entry: that entry is 0, the rest -inf */
        pardo_tensor *x2 = test_tensor_from(dt, 2, s, (double[]){-INFINITY, 3, -INFINITY, 1, 1, 1});
        ck_assert_int_eq(test_run_op("log_softmax", NULL, 1, &x2, 1, &y, &st), PARDO_OK);
        ck_assert_double_eq(pardo_tensor_get_f64(y, 1), 0);
        ck_assert(isinf(pardo_tensor_get_f64(y, 0)));
        ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 4), -log(3.0), 1e-6);
        pardo_tensor_release(y);
        pardo_tensor_release(x2);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_softmax_scale) {
    /* softmax {scale: s} of X is softmax of s X, row lengths on and off the kernel's 16 lanes */
    static const int64_t shapes[][2] = {{3, 7}, {4, 16}, {2, 37}, {5, 128}};
    static const double scales[] = {0.125, -2.0, 1.0};
    for (int c = 0; c < LEN(shapes); c++)
        for (int k = 0; k < LEN(scales); k++)
            for (int t = 0; t < 2; t++) {
                pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
                test_rng r = {900u + (uint64_t)(c * 8 + k * 2 + t)};
                pardo_tensor *x = test_tensor_random(&r, dt, 2, shapes[c], -5, 5), *y = NULL;
                char attrs[64];
                snprintf(attrs, sizeof attrs, "{\"scale\": %g}", scales[k]);
                pardo_status st;
                ck_assert_msg(test_run_op("softmax", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
                pardo_tensor *xs = pardo_tensor_clone(x, &st);
                for (int64_t i = 0; i < xs->numel; i++)
                    pardo_tensor_set_f64(xs, i, scales[k] * pardo_tensor_get_f64(x, i));
                pardo_tensor *want = ref_softmax(xs, 1);
                test_assert_close(y, want, t ? 1e-12 : 1e-5, 1e-7);
                pardo_tensor_release(want);
                pardo_tensor_release(xs);
                pardo_tensor_release(y);
                pardo_tensor_release(x);
            }
    pardo_type in = {.dtype = PARDO_F32, .ndim = 1, .shape = {4}}, out;
    const pardo_type *ins[1] = {&in};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("softmax", "{\"scale\": \"big\"}", 1, ins, 1, &out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'scale'") != NULL, "message: %s", st.msg);
}
END_TEST

START_TEST(test_split_over_threads) {
    /* rows split over 2 threads: the bits of 1 thread, forward and gradient, contiguous and strided rows */
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert(pardo_thread_pool_configure(2, &st) == PARDO_OK);
    static const struct {
        int64_t shape[3];
        const char *attrs;
    } cases[] = {{{64, 4, 300}, "{\"scale\": 0.5}"}, {{64, 300, 4}, "{\"axis\": 1}"}};
    static const char *const fwd[] = {"softmax", "log_softmax"};
    for (int c = 0; c < LEN(cases); c++)
        for (int f = 0; f < 2; f++)
            for (int t = 0; t < 2; t++) {
                pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
                test_rng r = {77u + (uint64_t)(c * 4 + f * 2 + t)};
                const char *attrs = f == 1 && c == 0 ? NULL : cases[c].attrs;
                pardo_tensor *x = test_tensor_random(&r, dt, 3, cases[c].shape, -4, 4);
                pardo_tensor *dy = test_tensor_random(&r, dt, 3, cases[c].shape, -1, 1), *y[2], *dx[2];
                for (int n = 0; n < 2; n++) {
                    ck_assert_msg(test_run_op_threads(fwd[f], attrs, 1, &x, 1, &y[n], n + 1, &st) == PARDO_OK, "%s",
                                  st.msg);
                    pardo_tensor *gin[3] = {x, y[n], dy};
                    char gname[32];
                    snprintf(gname, sizeof gname, "%s_grad", fwd[f]);
                    ck_assert_msg(test_run_op_threads(gname, attrs, 3, gin, 1, &dx[n], n + 1, &st) == PARDO_OK, "%s",
                                  st.msg);
                }
                ck_assert_msg(memcmp(pardo_tensor_data(y[0]), pardo_tensor_data(y[1]), y[0]->nbytes) == 0,
                              "%s case %d: 2 threads differ from 1", fwd[f], c);
                ck_assert_msg(memcmp(pardo_tensor_data(dx[0]), pardo_tensor_data(dx[1]), dx[0]->nbytes) == 0,
                              "%s_grad case %d: 2 threads differ from 1", fwd[f], c);
                pardo_tensor *all[] = {x, dy, y[0], y[1], dx[0], dx[1]};
                for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
            }
}
END_TEST

/* ---- gradients ---- */

START_TEST(test_softmax_gradients) {
    static const char *const ops[] = {"softmax", "log_softmax"};
    for (int o = 0; o < 2; o++)
        for (int c = 0; c < LEN(sm_cases); c++) {
            if (sm_cases[c].shape[1] == 1000) continue; /* 2000 elements: many finite differences, nothing new */
            test_rng r = {4000u + (uint64_t)(o * 50 + c)};
            pardo_tensor *x = test_tensor_random(&r, PARDO_F64, sm_cases[c].nd, sm_cases[c].shape, -3, 3);
            char attrs[64];
            /* softmax's with a scale as well */
            snprintf(attrs, sizeof attrs, o == 0 ? "{\"axis\": %d, \"scale\": -0.7}" : "{\"axis\": %d}",
                     sm_cases[c].axis);
            test_check_grad_default(ops[o], attrs, 1, &x, 1, 1u);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_sce_gradients) {
    static const char *const reds[] = {"mean", "sum", "none"};
    /* {2, 300}: more classes than the grad kernel keeps exps for (each computed twice) */
    static const int64_t sizes[][2] = {{4, 5}, {1, 3}, {7, 2}, {0, 3}, {2, 300}};
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < LEN(sizes); c++) {
            test_rng r = {4500u + (uint64_t)(k * 10 + c)};
            pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, 2, sizes[c], -3, 3),
                                   test_tensor_random(&r, c % 2 ? PARDO_I32 : PARDO_I64, 1, sizes[c], 0,
                                                      (double)sizes[c][1])};
            char attrs[48];
            snprintf(attrs, sizeof attrs, "{\"reduction\": \"%s\"}", reds[k]);
            test_check_grad_default("softmax_cross_entropy", attrs, 2, in, 1, 1u); /* labels: no gradient */
            pardo_tensor_release(in[0]);
            pardo_tensor_release(in[1]);
        }
}
END_TEST

/* float32 softmax_grad along the last axis (rows of 300: 18 lanes of 16 and a tail), scaled, against the formula
 * in double: dX = scale Y (dY - sum(dY Y)) */
START_TEST(test_gradient_float32_rows) {
    pardo_status st;
    const int64_t shape[2] = {37, 300};
    test_rng r = {4711u};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, shape, -4, 4);
    pardo_tensor *dy = test_tensor_random(&r, PARDO_F32, 2, shape, -1, 1);
    pardo_tensor *y = NULL, *dx = NULL;
    const char *attrs = "{\"scale\": 0.5}";
    ck_assert_int_eq(test_run_op("softmax", attrs, 1, &x, 1, &y, &st), PARDO_OK);
    pardo_tensor *in[3] = {x, y, dy};
    ck_assert_msg(test_run_op("softmax_grad", attrs, 3, in, 1, &dx, &st) == PARDO_OK, "%s", st.msg);
    for (int64_t o = 0; o < shape[0]; o++) {
        double dot = 0;
        for (int64_t j = 0; j < shape[1]; j++)
            dot += pardo_tensor_get_f64(y, o * shape[1] + j) * pardo_tensor_get_f64(dy, o * shape[1] + j);
        for (int64_t j = 0; j < shape[1]; j++) {
            const int64_t i = o * shape[1] + j;
            const double want = 0.5 * pardo_tensor_get_f64(y, i) * (pardo_tensor_get_f64(dy, i) - dot);
            ck_assert_msg(fabs(pardo_tensor_get_f64(dx, i) - want) <= 1e-6 * fabs(want) + 1e-9, "dx[%lld] %g, want %g",
                          (long long)i, pardo_tensor_get_f64(dx, i), want);
        }
    }
    pardo_tensor *all[] = {x, dy, y, dx};
    for (int i = 0; i < 4; i++) pardo_tensor_release(all[i]);
}
END_TEST

START_TEST(test_gradient_float32_and_absent_dy) {
    /* float32 softmax_grad against the formula in double; dY absent: zeros */
    int64_t s[] = {2, 3};
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, s, (double[]){0.5, -1, 2, 0, 0, 0});
    pardo_tensor *dy = test_tensor_from(PARDO_F32, 2, s, (double[]){1, 2, 3, -1, 0, 1});
    pardo_tensor *y = NULL, *dx = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("softmax", NULL, 1, &x, 1, &y, &st), PARDO_OK);
    pardo_tensor *in[3] = {x, y, dy};
    ck_assert_int_eq(test_run_op("softmax_grad", NULL, 3, in, 1, &dx, &st), PARDO_OK);
    for (int r = 0; r < 2; r++) {
        double dot = 0;
        for (int j = 0; j < 3; j++) dot += pardo_tensor_get_f64(y, r * 3 + j) * pardo_tensor_get_f64(dy, r * 3 + j);
        for (int j = 0; j < 3; j++) {
            double yv = pardo_tensor_get_f64(y, r * 3 + j), want = yv * (pardo_tensor_get_f64(dy, r * 3 + j) - dot);
            ck_assert_double_eq_tol(pardo_tensor_get_f64(dx, r * 3 + j), want, 1e-6);
        }
    }
    pardo_tensor_release(dx);
    in[2] = NULL;
    ck_assert_int_eq(test_run_op("log_softmax_grad", NULL, 3, in, 1, &dx, &st), PARDO_OK);
    for (int i = 0; i < 6; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), 0);
    pardo_tensor_release(dx);
    pardo_tensor_release(y);
    pardo_tensor_release(dy);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_softmax_stable) {
    /* exp(1000) overflows; the max shift keeps the result exact */
    int64_t s[] = {2, 3};
    for (int t = 0; t < 2; t++) {
        pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
        pardo_tensor *x = test_tensor_from(dt, 2, s, (double[]){1000, 1001, 1002, -1000, -1001, -1002}), *y = NULL;
        pardo_status st;
        ck_assert_int_eq(test_run_op("softmax", NULL, 1, &x, 1, &y, &st), PARDO_OK);
        double e1 = exp(-1.0), e2 = exp(-2.0), z = 1 + e1 + e2;
        const double want[] = {e2 / z, e1 / z, 1 / z, 1 / z, e1 / z, e2 / z};
        for (int i = 0; i < 6; i++) ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i), want[i], 1e-6);
        pardo_tensor_release(y);
        pardo_tensor_release(x);
    }
}
END_TEST

/* The per-row loss log(sum_j exp(x_j)) - x_label, written naively with the
 * max shift (rows here reach |x| = 1000). */
static double ref_row_loss(const pardo_tensor *x, int64_t r, int64_t c, int64_t label) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; j++) mx = fmax(mx, pardo_tensor_get_f64(x, r * c + j));
    for (int64_t j = 0; j < c; j++) s += exp(pardo_tensor_get_f64(x, r * c + j) - mx);
    return mx + log(s) - pardo_tensor_get_f64(x, r * c + label);
}

static void check_sce(pardo_dtype dt, pardo_dtype lt, int64_t n, int64_t c, double scale, uint64_t seed) {
    test_rng r = {seed};
    int64_t xs[] = {n, c};
    pardo_tensor *in[2] = {test_tensor_random(&r, dt, 2, xs, -scale, scale),
                           test_tensor_random(&r, lt, 1, &n, 0, (double)c)};
    static const char *const reds[] = {"mean", "sum", "none"};
    for (int k = 0; k < 3; k++) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, "{\"reduction\": \"%s\"}", reds[k]);
        pardo_tensor *y = NULL;
        pardo_status st;
        int rc = test_run_op("softmax_cross_entropy", k == 0 && (seed & 1) ? NULL : attrs, 2, in, 1, &y, &st);
        ck_assert_msg(rc == PARDO_OK, "%s: %s", attrs, st.msg);
        double total = 0;
        for (int64_t i = 0; i < n; i++) {
            double l = ref_row_loss(in[0], i, c, (int64_t)pardo_tensor_get_f64(in[1], i));
            total += l;
            if (k == 2) ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i), l, 1e-5 * (1 + fabs(l)));
        }
        if (k == 2) {
            ck_assert_int_eq(y->ndim, 1);
            ck_assert_int_eq(y->shape[0], n);
        } else {
            double want = k == 1 ? total : (n ? total / (double)n : 0.0);
            ck_assert_int_eq(y->ndim, 0);
            ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), want, 1e-5 * (1 + fabs(want)));
        }
        pardo_tensor_release(y);
    }
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}

START_TEST(test_sce_reference) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64}, lts[] = {PARDO_I32, PARDO_I64};
    static const int64_t sizes[][2] = {{1, 1}, {1, 5}, {5, 3}, {8, 10}, {0, 4}, {7, 1}};
    uint64_t seed = 1;
    for (int t = 0; t < 2; t++)
        for (int l = 0; l < 2; l++)
            for (int s = 0; s < LEN(sizes); s++) {
                check_sce(dts[t], lts[l], sizes[s][0], sizes[s][1], 4, seed++);
                check_sce(dts[t], lts[l], sizes[s][0], sizes[s][1], 1000, seed++); /* stability */
            }
}
END_TEST

START_TEST(test_sce_known_values) {
    /* uniform logits: every row's loss is log(C); mean over N = 0 is 0 */
    int64_t xs[] = {3, 4}, n = 3;
    pardo_tensor *in[2] = {test_tensor_from(PARDO_F64, 2, xs, (double[]){0, 0, 0, 0, 2, 2, 2, 2, -7, -7, -7, -7}),
                           test_tensor_from(PARDO_I64, 1, &n, (double[]){0, 3, 1})},
                 *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("softmax_cross_entropy", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), log(4.0), 1e-15);
    pardo_tensor_release(y);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

static int infer_sce(const char *attrs, pardo_type x, pardo_type l, pardo_type *y, pardo_status *st) {
    const pardo_type *in[2] = {&x, &l};
    return test_infer_op("softmax_cross_entropy", attrs, 2, in, 1, y, st);
}

START_TEST(test_infer) {
    pardo_type y, x = test_type(PARDO_F32, 3, (int64_t[]){-1, 4, 5});
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("softmax", "{\"axis\": 1}", 1, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 3, (int64_t[]){-1, 4, 5}));
    ck_assert_int_eq(
        infer_sce(NULL, test_type(PARDO_F32, 2, (int64_t[]){-1, 10}), test_type(PARDO_I64, 1, (int64_t[]){-1}), &y, &st),
        PARDO_OK);
    ck_assert_int_eq(y.ndim, 0);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    ck_assert_int_eq(infer_sce("{\"reduction\": \"none\"}", test_type(PARDO_F64, 2, (int64_t[]){-1, 10}),
                               test_type(PARDO_I32, 1, (int64_t[]){6}), &y, &st),
                     PARDO_OK);
    ck_assert_int_eq(y.ndim, 1);
    ck_assert_int_eq(y.shape[0], 6);
    ck_assert_int_eq(y.dtype, PARDO_F64);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_err_softmax) {
    pardo_type y, x = test_type(PARDO_F32, 2, (int64_t[]){3, 4});
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("softmax", "{\"axis\": 2}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axis'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("softmax", "{\"axis\": -3}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("softmax", "{\"axis\": \"last\"}", 1, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axis'") != NULL, "message: %s", st.msg);
    x = test_type(PARDO_I64, 2, (int64_t[]){3, 4});
    ck_assert_int_eq(test_infer_op("softmax", NULL, 1, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "int64") != NULL, "message: %s", st.msg);
    x = test_type(PARDO_F32, 0, NULL);
    ck_assert_int_eq(test_infer_op("softmax", NULL, 1, in, 1, &y, &st), PARDO_ESHAPE);
}
END_TEST

START_TEST(test_err_sce_infer) {
    pardo_type y;
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 2, (int64_t[]){4, 3}), l = test_type(PARDO_I64, 1, (int64_t[]){4});
    ck_assert_int_eq(infer_sce("{\"reduction\": \"avg\"}", x, l, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'reduction'") && strstr(st.msg, "avg"), "message: %s", st.msg);
    ck_assert_int_eq(infer_sce("{\"reduction\": 1}", x, l, &y, &st), PARDO_EINVAL);
    ck_assert_int_eq(infer_sce(NULL, x, test_type(PARDO_F32, 1, (int64_t[]){4}), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'labels'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer_sce(NULL, test_type(PARDO_I32, 2, (int64_t[]){4, 3}), l, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'logits'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer_sce(NULL, test_type(PARDO_F32, 3, (int64_t[]){4, 3, 2}), l, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(infer_sce(NULL, x, test_type(PARDO_I64, 2, (int64_t[]){4, 1}), &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(infer_sce(NULL, x, test_type(PARDO_I64, 1, (int64_t[]){5}), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[4, 3]") && strstr(st.msg, "[5]"), "message: %s", st.msg);
}
END_TEST

START_TEST(test_err_gradients) {
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 2, (int64_t[]){4, 3}), l = test_type(PARDO_I64, 1, (int64_t[]){4});
    pardo_type loss = test_type(PARDO_F32, 0, NULL), out[2];
    const pardo_type *in[4] = {&x, &l, &loss, &loss};
    /* the labels have no gradient */
    ck_assert_int_eq(test_infer_op("softmax_cross_entropy_grad", NULL, 4, in, 2, out, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "'labels'") && strstr(st.msg, "int64"), "message: %s", st.msg);
    ck_assert_int_eq(test_infer_op("softmax_cross_entropy_grad", NULL, 4, in, 1, out, &st), PARDO_OK);
    ck_assert_int_eq(test_infer_op("softmax_cross_entropy_grad", "{\"reduction\": \"avg\"}", 4, in, 1, out, &st),
                     PARDO_EINVAL);
    const pardo_type *sin[3] = {&x, &x, &x};
    ck_assert_int_eq(test_infer_op("log_softmax_grad", "{\"axis\": 2}", 3, sin, 1, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axis'") != NULL, "message: %s", st.msg);
    pardo_type xi = test_type(PARDO_I32, 2, (int64_t[]){4, 3});
    sin[0] = &xi;
    ck_assert_int_eq(test_infer_op("softmax_grad", NULL, 3, sin, 1, out, &st), PARDO_ENOTSUP);
    ck_assert_int_eq(test_infer_op("log_softmax", NULL, 1, sin, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "int32") != NULL, "message: %s", st.msg);
    /* a bad label is a run-time error in the gradient too */
    int64_t xs[] = {2, 3}, n = 2;
    test_rng r = {8};
    pardo_tensor *t[4] = {test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1),
                          test_tensor_from(PARDO_I32, 1, &n, (double[]){0, 3}), NULL, NULL};
    int64_t one = 1;
    t[2] = test_tensor_from(PARDO_F64, 0, &one, (double[]){0});
    t[3] = test_tensor_from(PARDO_F64, 0, &one, (double[]){1});
    pardo_tensor *o = NULL;
    ck_assert_int_eq(test_run_op("softmax_cross_entropy_grad", NULL, 4, t, 1, &o, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "row 1 has label 3") != NULL, "message: %s", st.msg);
    for (int k = 0; k < 4; k++) pardo_tensor_release(t[k]);
}
END_TEST

START_TEST(test_err_sce_bad_label) {
    const double bad[] = {5, -1, 1e9};
    for (int b = 0; b < LEN(bad); b++)
        for (int t = 0; t < 2; t++) {
            int64_t xs[] = {3, 5}, n = 3;
            test_rng r = {3};
            pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1),
                                   test_tensor_from(t ? PARDO_I64 : PARDO_I32, 1, &n, (double[]){0, 4, bad[b]})};
            pardo_tensor *y = NULL;
            pardo_status st;
            ck_assert_int_eq(test_run_op("softmax_cross_entropy", "{\"reduction\": \"none\"}", 2, in, 1, &y, &st),
                             PARDO_ERUNTIME);
            char want[64];
            snprintf(want, sizeof want, "row 2 has label %lld", (long long)bad[b]);
            ck_assert_msg(strstr(st.msg, want) && strstr(st.msg, "[0, 5)"), "message: %s", st.msg);
            ck_assert_ptr_null(y);
            pardo_tensor_release(in[0]);
            pardo_tensor_release(in[1]);
        }
}
END_TEST

/* ---- NumPy fixtures ---- */

static pardo_tensor *load(const char *stem, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "ops/%s_%s.npy", stem, what);
    return test_npy_load(name);
}

START_TEST(test_fixtures) {
    static const struct {
        const char *name;
        int axis;
    } sm[] = {{"softmax_last", -1}, {"softmax_mid", 1}};
    for (int c = 0; c < LEN(sm); c++) {
        pardo_tensor *x = load(sm[c].name, "x"), *want = load(sm[c].name, "y"), *y = NULL;
        char attrs[32];
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", sm[c].axis);
        pardo_status st;
        ck_assert_msg(test_run_op("softmax", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", sm[c].name, st.msg);
        test_assert_close(y, want, 1e-5, 1e-7);
        pardo_tensor_release(y);
        pardo_tensor_release(want);
        pardo_tensor_release(x);
    }
    static const struct {
        const char *name;
        int axis;
    } lsm[] = {{"log_softmax_last", -1}, {"log_softmax_mid", 1}, {"log_softmax_first", 0}};
    for (int c = 0; c < LEN(lsm); c++) {
        pardo_tensor *x = load(lsm[c].name, "x"), *want = load(lsm[c].name, "y"), *y = NULL;
        char attrs[32];
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", lsm[c].axis);
        pardo_status st;
        ck_assert_msg(test_run_op("log_softmax", attrs, 1, &x, 1, &y, &st) == PARDO_OK, "%s: %s", lsm[c].name, st.msg);
        test_assert_close(y, want, x->dtype == PARDO_F32 ? 1e-6 : 1e-13, x->dtype == PARDO_F32 ? 1e-5 : 1e-13);
        pardo_tensor_release(y);
        pardo_tensor_release(want);
        pardo_tensor_release(x);
    }
    static const char *const sce[] = {"sce_f64", "sce_f32"}, *const reds[] = {"mean", "sum", "none"};
    for (int c = 0; c < LEN(sce); c++) {
        pardo_tensor *in[2] = {load(sce[c], "logits"), load(sce[c], "labels")};
        for (int k = 0; k < 3; k++) {
            char attrs[48];
            snprintf(attrs, sizeof attrs, "{\"reduction\": \"%s\"}", reds[k]);
            pardo_tensor *want = load(sce[c], reds[k]), *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("softmax_cross_entropy", attrs, 2, in, 1, &y, &st) == PARDO_OK, "%s %s: %s",
                          sce[c], reds[k], st.msg);
            test_assert_close(y, want, want->dtype == PARDO_F32 ? 1e-6 : 1e-12, 0);
            pardo_tensor_release(y);
            pardo_tensor_release(want);
        }
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
}
END_TEST

Suite *make_ops_softmax_suite(void) {
    Suite *s = suite_create("ops_softmax");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_softmax_reference);
    tcase_add_test(core, test_softmax_stable);
    tcase_add_test(core, test_sce_reference);
    tcase_add_test(core, test_sce_known_values);
    tcase_add_test(core, test_infer);
    tcase_add_test(core, test_log_softmax_reference);
    tcase_add_test(core, test_log_softmax_stable);
    tcase_add_test(core, test_softmax_gradients);
    tcase_add_test(core, test_sce_gradients);
    tcase_add_test(core, test_gradient_float32_and_absent_dy);
    tcase_add_test(core, test_gradient_float32_rows);
    tcase_add_test(core, test_softmax_scale);
    tcase_add_test(core, test_split_over_threads);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_softmax);
    tcase_add_test(errors, test_err_sce_infer);
    tcase_add_test(errors, test_err_sce_bad_label);
    tcase_add_test(errors, test_err_gradients);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_fixtures);
    suite_add_tcase(s, fixtures);
    return s;
}
