/* check_ops_norm.c - layer_norm and layer_norm_grad: the forward (Y, Mean,
 * InvStdDev) against a naive per-row loop, with and without scale and bias,
 * over several axes and edge sizes; gradients by finite differences
 * (including through the Mean and InvStdDev outputs); PyTorch fixtures;
 * inference; attr and shape errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "exec/thread_pool.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Y, Mean and InvStdDev of layer_norm over dims axis.. of x, in double. */
static void ref_ln(const pardo_tensor *x, int axis, const pardo_tensor *s, const pardo_tensor *b, double eps,
                   pardo_tensor **y, pardo_tensor **mean, pardo_tensor **inv) {
    pardo_status st;
    int64_t rows = 1, n = 1, ms[PARDO_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        if (d < axis) rows *= x->shape[d];
        else n *= x->shape[d];
        ms[d] = d < axis ? x->shape[d] : 1;
    }
    *y = pardo_tensor_new_cpu(x->dtype, x->ndim, x->shape, &st);
    *mean = pardo_tensor_new_cpu(x->dtype, x->ndim, ms, &st);
    *inv = pardo_tensor_new_cpu(x->dtype, x->ndim, ms, &st);
    for (int64_t r = 0; r < rows; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < n; j++) m += pardo_tensor_get_f64(x, r * n + j) / (double)n;
        for (int64_t j = 0; j < n; j++) v += pow(pardo_tensor_get_f64(x, r * n + j) - m, 2) / (double)n;
        double is = 1 / sqrt(v + eps);
        for (int64_t j = 0; j < n; j++) {
            double o = (pardo_tensor_get_f64(x, r * n + j) - m) * is;
            if (s) o *= pardo_tensor_get_f64(s, j);
            if (b) o += pardo_tensor_get_f64(b, j);
            pardo_tensor_set_f64(*y, r * n + j, o);
        }
        pardo_tensor_set_f64(*mean, r, m);
        pardo_tensor_set_f64(*inv, r, is);
    }
}

typedef struct ln_case {
    int nd;
    int64_t shape[4];
    int axis;      // as given
    int axis_norm; // normalised
    bool scale, bias;
} ln_case;

static const ln_case cases[] = {
    {2, {4, 6}, -1, 1, true, true},      {3, {3, 4, 5}, 1, 1, true, true},    {3, {3, 4, 5}, 0, 0, true, false},
    {1, {7}, 0, 0, false, true},         {3, {2, 1, 7}, -2, 1, false, false}, {2, {0, 4}, 1, 1, true, true},
    {4, {2, 3, 1, 2}, 3, 3, true, true}, {2, {5, 1}, -1, 1, true, true},
};

START_TEST(test_ln_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases); k++)
        for (int t = 0; t < 2; t++) {
            const ln_case *c = &cases[k];
            test_rng r = {300u + (uint64_t)(k * 2 + t)};
            const int pn = c->nd - c->axis_norm;
            pardo_tensor *in[3] = {test_tensor_random(&r, dts[t], c->nd, c->shape, -3, 3),
                                   c->scale ? test_tensor_random(&r, dts[t], pn, c->shape + c->axis_norm, 0.5, 2)
                                            : NULL,
                                   c->bias ? test_tensor_random(&r, dts[t], pn, c->shape + c->axis_norm, -1, 1) : NULL};
            pardo_tensor *out[3], *want[3];
            pardo_status st;
            char attrs[64];
            snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"epsilon\": 0.001}", c->axis);
            ck_assert_msg(test_run_op("layer_norm", attrs, 3, in, 3, out, &st) == PARDO_OK, "case %d: %s", k, st.msg);
            ref_ln(in[0], c->axis_norm, in[1], in[2], 1e-3, &want[0], &want[1], &want[2]);
            for (int i = 0; i < 3; i++) {
                test_assert_close(out[i], want[i], t ? 2e-5 : 1e-12, t ? 2e-5 : 1e-12);
                pardo_tensor_release(out[i]);
                pardo_tensor_release(want[i]);
            }
            for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

START_TEST(test_ln_defaults_one_input) {
    /* X only, default axis -1 and epsilon 1e-5; a constant row gives zeros */
    int64_t s[] = {2, 3};
    pardo_tensor *x = test_tensor_from(PARDO_F64, 2, s, (double[]){1, 2, 3, 5, 5, 5}), *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("layer_norm", NULL, 1, &x, 1, &y, &st), PARDO_OK);
    double sd = sqrt(2.0 / 3.0 + 1e-5);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), -1 / sd, 1e-14);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 1), 0, 1e-14);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 2), 1 / sd, 1e-14);
    for (int i = 3; i < 6; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), 0);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

static void check_ln_grad(const ln_case *c, int n_out, uint64_t seed) {
    test_rng r = {seed};
    const int pn = c->nd - c->axis_norm;
    pardo_tensor *in[3] = {test_tensor_random(&r, PARDO_F64, c->nd, c->shape, -2, 2),
                           c->scale ? test_tensor_random(&r, PARDO_F64, pn, c->shape + c->axis_norm, 0.5, 2) : NULL,
                           c->bias ? test_tensor_random(&r, PARDO_F64, pn, c->shape + c->axis_norm, -1, 1) : NULL};
    char attrs[64];
    snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"epsilon\": 0.01}", c->axis);
    unsigned which = 1u | (c->scale ? 2u : 0u) | (c->bias ? 4u : 0u);
    test_check_grad_default("layer_norm", attrs, 3, in, n_out, which);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}

START_TEST(test_ln_grads) {
    const ln_case with = {3, {2, 3, 4}, -1, 2, true, true}, without = {3, {2, 3, 4}, 1, 1, false, false},
                  scale_only = {2, {3, 5}, 1, 1, true, false}, whole = {2, {2, 3}, 0, 0, false, true};
    check_ln_grad(&with, 1, 1);
    check_ln_grad(&without, 1, 2);
    check_ln_grad(&scale_only, 1, 3);
    check_ln_grad(&whole, 1, 4);
    const ln_case lanes = {2, {3, 21}, -1, 1, true, true}; /* rows longer than the kernels' 8 lanes */
    check_ln_grad(&lanes, 1, 7);
    check_ln_grad(&lanes, 3, 8);
    /* the Mean and InvStdDev outputs reach the loss too */
    check_ln_grad(&with, 3, 5);
    check_ln_grad(&without, 3, 6);
}
END_TEST

START_TEST(test_ln_split_over_threads) {
    /* rows over 2 threads (and dscale, dbias by columns): the bits of 1 thread */
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert(pardo_thread_pool_configure(2, &st) == PARDO_OK);
    for (int t = 0; t < 2; t++) {
        pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
        test_rng r = {31u + (uint64_t)t};
        int64_t xs[2] = {300, 259}, ps[1] = {259}, rs[2] = {300, 1};
        pardo_tensor *x = test_tensor_random(&r, dt, 2, xs, -2, 2), *sc = test_tensor_random(&r, dt, 1, ps, 0.5, 2),
                     *bi = test_tensor_random(&r, dt, 1, ps, -1, 1), *dy = test_tensor_random(&r, dt, 2, xs, -1, 1),
                     *dm = test_tensor_random(&r, dt, 2, rs, -1, 1);
        pardo_tensor *y[2][3], *d[2][3];
        for (int n = 0; n < 2; n++) {
            pardo_tensor *in[3] = {x, sc, bi};
            ck_assert_msg(test_run_op_threads("layer_norm", NULL, 3, in, 3, y[n], n + 1, &st) == PARDO_OK, "%s",
                          st.msg);
            pardo_tensor *gin[9] = {x, sc, bi, y[n][0], y[n][1], y[n][2], dy, dm, NULL};
            ck_assert_msg(test_run_op_threads("layer_norm_grad", NULL, 9, gin, 3, d[n], n + 1, &st) == PARDO_OK,
                          "%s", st.msg);
        }
        for (int k = 0; k < 3; k++) {
            ck_assert_msg(memcmp(pardo_tensor_data(y[0][k]), pardo_tensor_data(y[1][k]), y[0][k]->nbytes) == 0,
                          "layer_norm output %d: 2 threads differ from 1", k);
            ck_assert_msg(memcmp(pardo_tensor_data(d[0][k]), pardo_tensor_data(d[1][k]), d[0][k]->nbytes) == 0,
                          "layer_norm_grad output %d: 2 threads differ from 1", k);
            pardo_tensor_release(y[0][k]);
            pardo_tensor_release(y[1][k]);
            pardo_tensor_release(d[0][k]);
            pardo_tensor_release(d[1][k]);
        }
        pardo_tensor *all[] = {x, sc, bi, dy, dm};
        for (int i = 0; i < 5; i++) pardo_tensor_release(all[i]);
    }
}
END_TEST

START_TEST(test_ln_infer) {
    pardo_type out[3], x = test_type(PARDO_F32, 3, (int64_t[]){-1, 5, 8}),
                       s = test_type(PARDO_F32, 2, (int64_t[]){5, 8});
    const pardo_type *in[3] = {&x, &s, NULL};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("layer_norm", "{\"axis\": 1}", 3, in, 3, out, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(out[0].ndim, out[0].shape, 3, (int64_t[]){-1, 5, 8}));
    ck_assert(pardo_shape_equal(out[1].ndim, out[1].shape, 3, (int64_t[]){-1, 1, 1}));
    ck_assert(pardo_shape_equal(out[2].ndim, out[2].shape, 3, (int64_t[]){-1, 1, 1}));
    ck_assert_int_eq(out[2].dtype, PARDO_F32);
    /* a run-time normalised dim matches a known scale */
    x = test_type(PARDO_F32, 2, (int64_t[]){4, -1});
    s = test_type(PARDO_F32, 1, (int64_t[]){8});
    ck_assert_int_eq(test_infer_op("layer_norm", NULL, 2, in, 1, out, &st), PARDO_OK);
}
END_TEST

START_TEST(test_ln_errors) {
    pardo_type out[1], x = test_type(PARDO_F32, 3, (int64_t[]){2, 5, 8}), s = test_type(PARDO_F32, 1, (int64_t[]){5});
    const pardo_type *in[3] = {&x, &s, NULL};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("layer_norm", NULL, 3, in, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'scale'") && strstr(st.msg, "[5]") && strstr(st.msg, "[8]"), "%s", st.msg);
    s = test_type(PARDO_F64, 1, (int64_t[]){8});
    ck_assert_int_eq(test_infer_op("layer_norm", NULL, 3, in, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float64"), "%s", st.msg);
    in[1] = NULL;
    in[2] = &s;
    s = test_type(PARDO_F32, 2, (int64_t[]){5, 8});
    ck_assert_int_eq(test_infer_op("layer_norm", "{\"axis\": 2}", 3, in, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'bias'"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("layer_norm", "{\"axis\": 3}", 1, in, 1, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'axis'"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("layer_norm", "{\"axis\": -4}", 1, in, 1, out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("layer_norm", "{\"epsilon\": -1}", 1, in, 1, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'epsilon'"), "%s", st.msg);
    x = test_type(PARDO_I32, 2, (int64_t[]){2, 3});
    ck_assert_int_eq(test_infer_op("layer_norm", NULL, 1, in, 1, out, &st), PARDO_ESHAPE);
    x = test_type(PARDO_F32, 0, NULL);
    ck_assert_int_eq(test_infer_op("layer_norm", NULL, 1, in, 1, out, &st), PARDO_ESHAPE);
}
END_TEST

/* ---- PyTorch fixtures ---- */

static pardo_tensor *load(const char *stem, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "nn/%s_%s.npy", stem, what);
    return test_npy_load(name);
}

START_TEST(test_ln_fixtures) {
    static const struct {
        const char *name, *attrs;
        bool affine;
    } fx[] = {
        {"ln_last", NULL, true},
        {"ln_axis1", "{\"axis\": 1, \"epsilon\": 0.001}", true},
        {"ln_plain_f32", "{\"axis\": 2}", false},
    };
    for (int k = 0; k < LEN(fx); k++) {
        const bool a = fx[k].affine;
        /* layer_norm_grad inputs: X, scale, bias, Y, Mean, InvStdDev, dY, dMean, dInvStdDev */
        pardo_tensor *in[9] = {load(fx[k].name, "x"), a ? load(fx[k].name, "scale") : NULL,
                               a ? load(fx[k].name, "bias") : NULL};
        for (int i = 3; i < 9; i++) in[i] = NULL;
        const bool f32 = in[0]->dtype == PARDO_F32;
        const double tol = f32 ? 1e-5 : 1e-12;
        pardo_tensor *y = NULL, *g[3];
        pardo_status st;
        ck_assert_msg(test_run_op("layer_norm", fx[k].attrs, 3, in, 1, &y, &st) == PARDO_OK, "%s: %s", fx[k].name,
                      st.msg);
        pardo_tensor *want = load(fx[k].name, "y");
        test_assert_close(y, want, tol, tol);
        pardo_tensor_release(want);
        in[3] = y;
        in[6] = load(fx[k].name, "dy");
        ck_assert_msg(test_run_op("layer_norm_grad", fx[k].attrs, 9, in, a ? 3 : 1, g, &st) == PARDO_OK, "%s: %s",
                      fx[k].name, st.msg);
        static const char *const dn[3] = {"dx", "dscale", "dbias"};
        for (int i = 0; i < (a ? 3 : 1); i++) {
            want = load(fx[k].name, dn[i]);
            test_assert_close(g[i], want, tol, tol);
            pardo_tensor_release(want);
            pardo_tensor_release(g[i]);
        }
        for (int i = 0; i < 9; i++) pardo_tensor_release(in[i]);
    }
}
END_TEST

Suite *make_ops_norm_suite(void) {
    Suite *s = suite_create("ops_norm");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_ln_reference);
    tcase_add_test(core, test_ln_defaults_one_input);
    tcase_add_test(core, test_ln_grads);
    tcase_add_test(core, test_ln_split_over_threads);
    tcase_add_test(core, test_ln_infer);
    tcase_add_test(core, test_ln_fixtures);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_ln_errors);
    suite_add_tcase(s, errors);
    return s;
}
