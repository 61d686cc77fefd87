/* check_ops_loss.c - mse_loss (mean, sum, none) against a naive loop, its
 * gradient for prediction and target by finite differences, accuracy (first
 * maximum, N = 0, labels of both int dtypes) against a naive argmax;
 * inference and errors (reduction, shapes, labels); nll_loss (ops/loss_nll.c:
 * K-dim, weight, ignore_index, each reduction) against a naive loop, its
 * input gradient by finite differences, its refusals. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const reds[] = {"mean", "sum", "none"};

START_TEST(test_mse_reference) {
    static const struct {
        int nd;
        int64_t shape[3];
    } shapes[] = {{1, {1}}, {2, {3, 5}}, {3, {2, 3, 4}}, {0, {0}}, {2, {0, 3}}, {1, {7}}};
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(shapes); k++)
        for (int t = 0; t < 2; t++)
            for (int rd = 0; rd < 3; rd++) {
                test_rng r = {500u + (uint64_t)(k * 6 + t * 3 + rd)};
                pardo_tensor *in[2] = {test_tensor_random(&r, dts[t], shapes[k].nd, shapes[k].shape, -2, 2),
                                       test_tensor_random(&r, dts[t], shapes[k].nd, shapes[k].shape, -2, 2)},
                             *y = NULL;
                char attrs[48];
                snprintf(attrs, sizeof attrs, "{\"reduction\": \"%s\"}", reds[rd]);
                pardo_status st;
                ck_assert_msg(test_run_op("mse_loss", rd == 0 && k % 2 ? NULL : attrs, 2, in, 1, &y, &st) == PARDO_OK,
                              "%s", st.msg);
                const double tol = t ? 1e-5 : 1e-13;
                double sum = 0;
                for (int64_t i = 0; i < in[0]->numel; i++) {
                    double d = pardo_tensor_get_f64(in[0], i) - pardo_tensor_get_f64(in[1], i);
                    sum += d * d;
                    if (rd == 2) ck_assert_double_eq_tol(pardo_tensor_get_f64(y, i), d * d, tol * (1 + d * d));
                }
                if (rd == 2) {
                    ck_assert(pardo_shape_equal(y->ndim, y->shape, in[0]->ndim, in[0]->shape));
                } else {
                    double want = rd == 1 ? sum : (in[0]->numel ? sum / (double)in[0]->numel : 0);
                    ck_assert_int_eq(y->ndim, 0);
                    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), want, tol * (1 + want));
                }
                pardo_tensor_release(y);
                pardo_tensor_release(in[0]);
                pardo_tensor_release(in[1]);
            }
}
END_TEST

START_TEST(test_mse_grads) {
    int64_t s[] = {3, 4};
    for (int rd = 0; rd < 3; rd++) {
        test_rng r = {510u + (uint64_t)rd};
        pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, 2, s, -2, 2),
                               test_tensor_random(&r, PARDO_F64, 2, s, -2, 2)};
        char attrs[48];
        snprintf(attrs, sizeof attrs, "{\"reduction\": \"%s\"}", reds[rd]);
        test_check_grad_default("mse_loss", attrs, 2, in, 1, 3u);
        test_check_grad_default("mse_loss", attrs, 2, in, 1, 2u); /* only the target's */
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
}
END_TEST

START_TEST(test_mse_grad_known) {
    /* mean over 2: d/dp = 2 (p - t) / 2 * dloss; d/dt = -that; dloss "" gives zeros */
    int64_t s[] = {2}, sc[] = {1};
    pardo_tensor *in[4] = {test_tensor_from(PARDO_F32, 1, s, (double[]){3, -1}),
                           test_tensor_from(PARDO_F32, 1, s, (double[]){1, 1}), NULL,
                           test_tensor_from(PARDO_F32, 0, sc, (double[]){0.5})},
                 *g[2];
    pardo_status st;
    ck_assert_int_eq(test_run_op("mse_loss_grad", NULL, 4, in, 2, g, &st), PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(g[0], 0), 1.0);
    ck_assert_double_eq(pardo_tensor_get_f64(g[0], 1), -1.0);
    ck_assert_double_eq(pardo_tensor_get_f64(g[1], 0), -1.0);
    ck_assert_double_eq(pardo_tensor_get_f64(g[1], 1), 1.0);
    pardo_tensor_release(g[0]);
    pardo_tensor_release(g[1]);
    pardo_tensor_release(in[3]);
    in[3] = NULL;
    ck_assert_int_eq(test_run_op("mse_loss_grad", NULL, 4, in, 2, g, &st), PARDO_OK);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 2; i++) ck_assert_double_eq(pardo_tensor_get_f64(g[k], i), 0);
        pardo_tensor_release(g[k]);
    }
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

START_TEST(test_mse_infer) {
    pardo_type y, p = test_type(PARDO_F32, 2, (int64_t[]){-1, 4}), t = test_type(PARDO_F32, 2, (int64_t[]){16, 4});
    const pardo_type *in[2] = {&p, &t};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("mse_loss", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(y.ndim, 0);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    ck_assert_int_eq(test_infer_op("mse_loss", "{\"reduction\": \"none\"}", 2, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 2, (int64_t[]){-1, 4}));
}
END_TEST

/* Index of the first maximum of row r of x [n, c]. */
static int64_t ref_argmax(const pardo_tensor *x, int64_t r, int64_t c) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
        if (pardo_tensor_get_f64(x, r * c + j) > pardo_tensor_get_f64(x, r * c + best)) best = j;
    return best;
}

START_TEST(test_accuracy_reference) {
    static const int64_t sizes[][2] = {{1, 1}, {10, 3}, {7, 5}, {0, 4}, {33, 2}};
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64}, lts[] = {PARDO_I32, PARDO_I64};
    for (int k = 0; k < LEN(sizes); k++)
        for (int t = 0; t < 2; t++)
            for (int l = 0; l < 2; l++) {
                test_rng r = {600u + (uint64_t)(k * 4 + t * 2 + l)};
                int64_t n = sizes[k][0], c = sizes[k][1], xs[] = {n, c};
                pardo_tensor *in[2] = {test_tensor_random(&r, dts[t], 2, xs, -1, 1),
                                       test_tensor_random(&r, lts[l], 1, &n, 0, (double)c)},
                             *y = NULL;
                /* make about half the rows right */
                for (int64_t i = 0; i < n; i += 2) pardo_tensor_set_f64(in[1], i, (double)ref_argmax(in[0], i, c));
                pardo_status st;
                ck_assert_int_eq(test_run_op("accuracy", NULL, 2, in, 1, &y, &st), PARDO_OK);
                int64_t hits = 0;
                for (int64_t i = 0; i < n; i++)
                    hits += ref_argmax(in[0], i, c) == (int64_t)pardo_tensor_get_f64(in[1], i);
                ck_assert_int_eq(y->dtype, PARDO_F32);
                ck_assert_int_eq(y->ndim, 0);
                ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), n ? (double)hits / (double)n : 0.0, 1e-7);
                pardo_tensor_release(y);
                pardo_tensor_release(in[0]);
                pardo_tensor_release(in[1]);
            }
}
END_TEST

START_TEST(test_accuracy_first_max) {
    /* ties go to the first maximum: row 0 argmax 0 (label 0 right), row 1 argmax 1 (label 2 wrong) */
    int64_t xs[] = {3, 3}, n = 3;
    pardo_tensor *in[2] = {test_tensor_from(PARDO_F64, 2, xs, (double[]){4, 4, 1, 0, 2, 2, -1, -3, -1}),
                           test_tensor_from(PARDO_I64, 1, &n, (double[]){0, 2, 0})},
                 *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("accuracy", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), 2.0 / 3.0, 1e-7);
    ck_assert(pardo_op_lookup("accuracy")->grad == NULL); /* not differentiable */
    pardo_tensor_release(y);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

START_TEST(test_loss_errors) {
    pardo_type y, y2[2], p = test_type(PARDO_F32, 2, (int64_t[]){3, 4}), t = test_type(PARDO_F32, 2, (int64_t[]){3, 5});
    const pardo_type *in[2] = {&p, &t};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("mse_loss", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'target'") && strstr(st.msg, "[3, 5]") && strstr(st.msg, "[3, 4]"), "%s", st.msg);
    t = test_type(PARDO_F64, 2, (int64_t[]){3, 4});
    ck_assert_int_eq(test_infer_op("mse_loss", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    t = p;
    ck_assert_int_eq(test_infer_op("mse_loss", "{\"reduction\": \"avg\"}", 2, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'reduction'") && strstr(st.msg, "avg"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("mse_loss_grad", "{\"reduction\": \"max\"}", 2, in, 2, y2, &st), PARDO_EINVAL);
    p = t = test_type(PARDO_I32, 1, (int64_t[]){3});
    ck_assert_int_eq(test_infer_op("mse_loss", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    /* accuracy */
    pardo_type x = test_type(PARDO_F32, 2, (int64_t[]){4, 3}), l = test_type(PARDO_I64, 1, (int64_t[]){5});
    const pardo_type *ain[2] = {&x, &l};
    ck_assert_int_eq(test_infer_op("accuracy", NULL, 2, ain, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "disagree on N"), "%s", st.msg);
    l = test_type(PARDO_F32, 1, (int64_t[]){4});
    ck_assert_int_eq(test_infer_op("accuracy", NULL, 2, ain, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'labels'"), "%s", st.msg);
    l = test_type(PARDO_I32, 1, (int64_t[]){4});
    x = test_type(PARDO_F32, 1, (int64_t[]){4});
    ck_assert_int_eq(test_infer_op("accuracy", NULL, 2, ain, 1, &y, &st), PARDO_ESHAPE);
    x = test_type(PARDO_F32, 2, (int64_t[]){4, 0});
    ck_assert_int_eq(test_infer_op("accuracy", NULL, 2, ain, 1, &y, &st), PARDO_ESHAPE);
    /* a label outside [0, C) at run time */
    int64_t xs[] = {2, 3}, n = 2;
    test_rng r = {8};
    pardo_tensor *tin[2] = {test_tensor_random(&r, PARDO_F32, 2, xs, -1, 1),
                            test_tensor_from(PARDO_I32, 1, &n, (double[]){1, 3})},
                 *out = NULL;
    ck_assert_int_eq(test_run_op("accuracy", NULL, 2, tin, 1, &out, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "row 1 has label 3"), "%s", st.msg);
    ck_assert_ptr_null(out);
    pardo_tensor_release(tin[0]);
    pardo_tensor_release(tin[1]);
}
END_TEST

/* nll_loss against a naive loop: input [2, 3, 2] (K-dim), targets with an
 * ignored one, with and without weight, each reduction. */
static double nll_ref(const pardo_tensor *x, const double *t, const double *w, int red, int64_t i_out, int ign) {
    const int64_t n = x->shape[0], c = x->shape[1], d = x->shape[2];
    double s = 0, ws = 0;
    for (int64_t a = 0; a < n; a++)
        for (int64_t j = 0; j < d; j++) {
            const int tt = (int)t[a * d + j];
            if (tt == ign) {
                if (red == 2 && a * d + j == i_out) return 0;
                continue;
            }
            const double wt = w ? w[tt] : 1, l = -wt * pardo_tensor_get_f64(x, (a * c + tt) * d + j);
            if (red == 2 && a * d + j == i_out) return l;
            s += l;
            ws += wt;
        }
    return red == 1 ? s : s / ws;
}

START_TEST(test_nll_reference) {
    test_rng r = {5};
    const int64_t xs[3] = {2, 3, 2}, ts[2] = {2, 2};
    const double tv[4] = {0, 2, 1, 2}, wv[3] = {0.5, 2, 1.5};
    static const char *const nll_attr_json[3] = {"{\"reduction\": \"mean\", \"ignore_index\": 1}",
                                        "{\"reduction\": \"sum\", \"ignore_index\": 1}",
                                        "{\"reduction\": \"none\", \"ignore_index\": 1}"};
    for (int dt = 0; dt < 2; dt++)
        for (int useW = 0; useW < 2; useW++)
            for (int red = 0; red < 3; red++) {
                const pardo_dtype fd = dt ? PARDO_F64 : PARDO_F32;
                pardo_tensor *x = test_tensor_random(&r, fd, 3, xs, -3, 0);
                pardo_tensor *t = test_tensor_from(dt ? PARDO_I64 : PARDO_I32, 2, ts, tv);
                pardo_tensor *w = test_tensor_from(fd, 1, (int64_t[]){3}, wv), *in[3] = {x, t, w}, *y = NULL;
                pardo_status st;
                ck_assert_msg(test_run_op("nll_loss", nll_attr_json[red], useW ? 3 : 2, in, 1, &y, &st) == PARDO_OK, "%s",
                              st.msg);
                ck_assert_int_eq(y->ndim, red == 2 ? 2 : 0);
                for (int64_t i = 0; i < y->numel; i++) {
                    const double want = nll_ref(x, tv, useW ? wv : NULL, red, i, 1);
                    ck_assert_msg(fabs(pardo_tensor_get_f64(y, i) - want) <= 1e-6 * fmax(1, fabs(want)),
                                  "red %d w %d [%lld]: %g want %g", red, useW, (long long)i,
                                  pardo_tensor_get_f64(y, i), want);
                }
                pardo_tensor_release(y);
                pardo_tensor_release(w);
                pardo_tensor_release(t);
                pardo_tensor_release(x);
            }
}
END_TEST

START_TEST(test_nll_grads) {
    test_rng r = {6};
    const int64_t xs[3] = {2, 3, 2}, ts[2] = {2, 2};
    const double tv[4] = {0, 2, 1, 2}, wv[3] = {0.5, 2, 1.5};
    static const char *const attrs[4] = {NULL, "{\"reduction\": \"sum\"}", "{\"reduction\": \"none\"}",
                                         "{\"reduction\": \"mean\", \"ignore_index\": 2}"};
    for (int a = 0; a < 4; a++)
        for (int useW = 0; useW < 2; useW++) {
            pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 3, xs, -3, 0);
            pardo_tensor *t = test_tensor_from(PARDO_I64, 2, ts, tv);
            pardo_tensor *w = test_tensor_from(PARDO_F64, 1, (int64_t[]){3}, wv), *in[3] = {x, t, useW ? w : NULL};
            test_check_grad_default("nll_loss", attrs[a], 3, in, 1, 1u);
            pardo_tensor_release(w);
            pardo_tensor_release(t);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_nll_errors) {
    pardo_status st;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 2}, (double[]){-1, -2, -3, -4});
    pardo_tensor *t = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){1, 5}), *in[2] = {x, t}, *y = NULL;
    ck_assert_int_eq(test_run_op("nll_loss", NULL, 2, in, 1, &y, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "nll_loss") && strstr(st.msg, "element 1"), "%s", st.msg);
    pardo_type tx = test_type(PARDO_F32, 3, (int64_t[]){2, 3, 4}), tt = test_type(PARDO_I64, 2, (int64_t[]){2, 5}),
               out;
    const pardo_type *ty[2] = {&tx, &tt};
    ck_assert_int_eq(test_infer_op("nll_loss", NULL, 2, ty, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("nll_loss", "{\"reduction\": \"avg\"}", 2, ty, 1, &out, &st), PARDO_EINVAL);
    pardo_tensor_release(t);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_ops_loss_suite(void) {
    Suite *s = suite_create("ops_loss");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_mse_reference);
    tcase_add_test(core, test_mse_grads);
    tcase_add_test(core, test_mse_grad_known);
    tcase_add_test(core, test_mse_infer);
    tcase_add_test(core, test_accuracy_reference);
    tcase_add_test(core, test_accuracy_first_max);
    tcase_add_test(core, test_nll_reference);
    tcase_add_test(core, test_nll_grads);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_loss_errors);
    tcase_add_test(errors, test_nll_errors);
    suite_add_tcase(s, errors);
    return s;
}
