/* check_ops_dropout.c - dropout and dropout_grad: identity when not
 * training; when training, Y = X * mask / (1 - ratio) with a mask that is
 * the same for the same (seed, step), differs between steps and seeds, and
 * keeps about 1 - ratio of the elements; the run-time inputs ratio and
 * training_mode over the attr and the run's mode; gradients by finite
 * differences in training mode (with the Mask output wired in and
 * recomputed); errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

/* Runs dropout on x; out[0] Y, out[1] Mask. */
static void run_dropout(const char *attrs, pardo_tensor *x, bool training, uint64_t step, pardo_tensor **out) {
    pardo_status st;
    ck_assert_msg(test_run_op_ex("dropout", attrs, 1, &x, 2, out, training, step, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(out[1]->dtype, PARDO_BOOL);
}

/* Number of positions where masks a and b differ. */
static int64_t mask_diff(const pardo_tensor *a, const pardo_tensor *b) {
    int64_t d = 0;
    for (int64_t i = 0; i < a->numel; i++) d += pardo_tensor_get_f64(a, i) != pardo_tensor_get_f64(b, i);
    return d;
}

START_TEST(test_dropout_not_training) {
    int64_t s[] = {3, 5};
    test_rng r = {1};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F32, 2, s, -1, 1), *out[2];
    run_dropout("{\"ratio\": 0.9, \"seed\": 4}", x, false, 7, out);
    test_assert_close(out[0], x, 0, 0);
    for (int64_t i = 0; i < x->numel; i++) ck_assert(pardo_tensor_get_f64(out[1], i) == 1);
    pardo_tensor_release(out[0]);
    pardo_tensor_release(out[1]);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_dropout_training) {
    static const double ratios[] = {0.5, 0.3, 0.9, 0.0};
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 4; k++) {
            const pardo_dtype dt = t ? PARDO_F64 : PARDO_F32;
            int64_t s[] = {40, 250};
            test_rng r = {2u + (uint64_t)k};
            pardo_tensor *x = test_tensor_random(&r, dt, 2, s, 0.5, 2), *out[2];
            char attrs[64];
            snprintf(attrs, sizeof attrs, "{\"ratio\": %g, \"seed\": 11}", ratios[k]);
            run_dropout(attrs, x, true, 0, out);
            /* Y = X / (1 - ratio) where kept, 0 where dropped (x > 0 here, so Y says which) */
            int64_t kept = 0;
            const double scale = 1 / (1 - ratios[k]);
            for (int64_t i = 0; i < x->numel; i++) {
                const bool m = pardo_tensor_get_f64(out[1], i) != 0;
                const double y = pardo_tensor_get_f64(out[0], i), xv = pardo_tensor_get_f64(x, i);
                kept += m;
                if (m) ck_assert_double_eq_tol(y, xv * scale, (t ? 1e-14 : 1e-5) * fabs(xv * scale));
                else ck_assert(y == 0);
            }
            /* about 1 - ratio kept: 10000 draws, 5 standard deviations */
            const double frac = (double)kept / (double)x->numel, sd = sqrt(ratios[k] * (1 - ratios[k]) / 10000.0);
            ck_assert_msg(fabs(frac - (1 - ratios[k])) <= 5 * sd + 1e-12, "ratio %g: kept %g", ratios[k], frac);
            pardo_tensor_release(out[0]);
            pardo_tensor_release(out[1]);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_dropout_reproducible) {
    int64_t s[] = {1000};
    test_rng r = {3};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 1, s, -1, 1), *a[2], *b[2], *c[2], *d[2];
    run_dropout("{\"seed\": 5}", x, true, 4, a);
    run_dropout("{\"seed\": 5}", x, true, 4, b);
    run_dropout("{\"seed\": 5}", x, true, 5, c);
    run_dropout("{\"seed\": 6}", x, true, 4, d);
    /* same (seed, step): the same mask and output; another step or seed: another mask */
    ck_assert_int_eq(mask_diff(a[1], b[1]), 0);
    test_assert_close(a[0], b[0], 0, 0);
    ck_assert_int_gt(mask_diff(a[1], c[1]), 300);
    ck_assert_int_gt(mask_diff(a[1], d[1]), 300);
    /* the mask of element i does not depend on the tensor's shape or values */
    int64_t s2[] = {10, 100};
    pardo_tensor *x2 = test_tensor_random(&r, PARDO_F32, 2, s2, -1, 1), *e[2];
    run_dropout("{\"seed\": 5}", x2, true, 4, e);
    ck_assert_int_eq(mask_diff(a[1], e[1]), 0);
    pardo_tensor *all[] = {a[0], a[1], b[0], b[1], c[0], c[1], d[0], d[1], e[0], e[1], x, x2};
    for (int i = 0; i < 12; i++) pardo_tensor_release(all[i]);
}
END_TEST

START_TEST(test_dropout_mask_optional) {
    /* Mask left out (one output): the same Y */
    int64_t s[] = {64};
    test_rng r = {4};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 1, s, -1, 1), *both[2], *y = NULL;
    pardo_status st;
    run_dropout("{\"ratio\": 0.25, \"seed\": 9}", x, true, 2, both);
    ck_assert_int_eq(test_run_op_ex("dropout", "{\"ratio\": 0.25, \"seed\": 9}", 1, &x, 1, &y, true, 2, &st), PARDO_OK);
    test_assert_close(y, both[0], 0, 0);
    pardo_tensor_release(y);
    pardo_tensor_release(both[0]);
    pardo_tensor_release(both[1]);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_dropout_grads) {
    int64_t s[] = {4, 6};
    test_rng r = {5};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, s, -1, 1);
    /* training: the grad recomputes the mask (one output) or reads it (two) */
    test_check_grad_ex("dropout", "{\"ratio\": 0.4, \"seed\": 3}", 1, &x, 1, 1u, 1e-6, 1e-6, true, 3);
    test_check_grad_ex("dropout", "{\"ratio\": 0.4, \"seed\": 3}", 1, &x, 2, 1u, 1e-6, 1e-6, true, 3);
    test_check_grad_ex("dropout", "{\"ratio\": 0.7, \"seed\": 12}", 1, &x, 1, 1u, 1e-6, 1e-6, true, 0);
    /* not training: identity */
    test_check_grad_default("dropout", "{\"ratio\": 0.4}", 1, &x, 2, 1u);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_dropout_grad_reads_mask) {
    /* a given Mask wins over the generator; dY "" gives zeros */
    int64_t s[] = {4};
    pardo_tensor *in[5] = {test_tensor_from(PARDO_F64, 1, s, (double[]){1, 2, 3, 4}), NULL,
                           test_tensor_from(PARDO_BOOL, 1, s, (double[]){1, 0, 0, 1}),
                           test_tensor_from(PARDO_F64, 1, s, (double[]){10, 20, 30, 40}), NULL},
                 *dx = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op_ex("dropout_grad", "{\"ratio\": 0.75}", 5, in, 1, &dx, true, 1, &st), PARDO_OK);
    const double want[] = {40, 0, 0, 160};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), want[i]);
    pardo_tensor_release(dx);
    ck_assert_int_eq(test_run_op_ex("dropout_grad", "{\"ratio\": 0.75}", 5, in, 1, &dx, false, 1, &st), PARDO_OK);
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), 10.0 * (i + 1));
    pardo_tensor_release(dx);
    pardo_tensor_release(in[3]);
    in[3] = NULL;
    ck_assert_int_eq(test_run_op_ex("dropout_grad", NULL, 5, in, 1, &dx, true, 1, &st), PARDO_OK);
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), 0);
    pardo_tensor_release(dx);
    for (int i = 0; i < 5; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_dropout_infer) {
    pardo_type out[2], x = test_type(PARDO_F32, 2, (int64_t[]){-1, 8});
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("dropout", NULL, 1, in, 2, out, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(out[0].ndim, out[0].shape, 2, (int64_t[]){-1, 8}));
    ck_assert_int_eq(out[0].dtype, PARDO_F32);
    ck_assert_int_eq(out[1].dtype, PARDO_BOOL);
    ck_assert(pardo_shape_equal(out[1].ndim, out[1].shape, 2, (int64_t[]){-1, 8}));
}
END_TEST

START_TEST(test_dropout_run_time_inputs) {
    /* ONNX Dropout-12's inputs: training_mode overrides the run's mode, ratio the attr */
    double xv[64];
    for (int i = 0; i < 64; i++) xv[i] = i * 0.25 - 3;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 1, (int64_t[]){64}, xv);
    pardo_tensor *zero = test_tensor_from(PARDO_F32, 0, NULL, (double[]){0});
    pardo_tensor *half = test_tensor_from(PARDO_F64, 0, NULL, (double[]){0.5});
    pardo_tensor *yes = test_tensor_from(PARDO_BOOL, 0, NULL, (double[]){1});
    pardo_tensor *no = test_tensor_from(PARDO_BOOL, 0, NULL, (double[]){0});
    pardo_status st;
    /* training with ratio 0 in an eval run, and not training in a training run: Y = X, Mask all true */
    pardo_tensor *cases[2][2] = {{zero, yes}, {half, no}};
    for (int c = 0; c < 2; c++) {
        pardo_tensor *in[3] = {x, cases[c][0], cases[c][1]}, *out[2] = {NULL, NULL};
        ck_assert_msg(test_run_op_ex("dropout", NULL, 3, in, 2, out, c == 1, 1, &st) == PARDO_OK, "%s", st.msg);
        for (int i = 0; i < 64; i++) {
            ck_assert_msg(pardo_tensor_get_f64(out[0], i) == xv[i], "case %d: Y[%d] %g, X %g", c, i,
                          pardo_tensor_get_f64(out[0], i), xv[i]);
            ck_assert(pardo_tensor_get_f64(out[1], i) == 1);
        }
        pardo_tensor_release(out[0]);
        pardo_tensor_release(out[1]);
    }
    /* training_mode true with ratio 0.5 in an eval run: the mask attr ratio 0.5 gives in a training run */
    pardo_tensor *in[3] = {x, half, yes}, *out[2] = {NULL, NULL}, *ref[2] = {NULL, NULL};
    ck_assert_msg(test_run_op_ex("dropout", "{\"seed\": 4}", 3, in, 2, out, false, 2, &st) == PARDO_OK, "%s", st.msg);
    run_dropout("{\"ratio\": 0.5, \"seed\": 4}", x, true, 2, ref);
    ck_assert_int_eq(mask_diff(out[1], ref[1]), 0);
    int64_t kept = 0;
    for (int i = 0; i < 64; i++) {
        const bool k = pardo_tensor_get_f64(out[1], i) != 0;
        kept += k;
        ck_assert(pardo_tensor_get_f64(out[0], i) == (k ? 2 * xv[i] : 0));
    }
    ck_assert_msg(kept > 10 && kept < 54, "kept %lld of 64", (long long)kept);
    for (int k = 0; k < 2; k++) pardo_tensor_release(out[k]), pardo_tensor_release(ref[k]);
    /* refusals: a ratio of 1, a training_mode that is not bool, a gradient through the run-time inputs */
    pardo_tensor *one = test_tensor_from(PARDO_F32, 0, NULL, (double[]){1}), *bad[3] = {x, one, yes};
    ck_assert_int_eq(test_run_op_ex("dropout", NULL, 3, bad, 2, out, false, 0, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'ratio'"), "%s", st.msg);
    bad[1] = zero, bad[2] = half;
    ck_assert_int_eq(test_run_op_ex("dropout", NULL, 3, bad, 2, out, false, 0, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'training_mode'"), "%s", st.msg);
    pardo_op fwd = {.type = "dropout", .n_in = 3, .in = (char *[]){"x", "r", "t"}, .n_out = 1,
                    .out = (char *[]){"y"}};
    const char *og[1] = {"y@GRAD"}, *ig[3] = {"x@GRAD", "", ""};
    pardo_grad_request req = {.fwd = &fwd, .out_grads = og, .in_grads = ig};
    pardo_block blk = {0};
    ck_assert_int_eq(pardo_op_lookup("dropout")->grad(&req, &blk, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "ratio"), "%s", st.msg);
    pardo_tensor *const all[] = {x, zero, half, yes, no, one};
    for (int i = 0; i < 6; i++) pardo_tensor_release(all[i]);
}
END_TEST

START_TEST(test_dropout_errors) {
    pardo_type out[2], x = test_type(PARDO_F32, 1, (int64_t[]){8});
    const pardo_type *in[1] = {&x};
    pardo_status st;
    static const char *const bad[] = {"{\"ratio\": 1}", "{\"ratio\": -0.1}", "{\"ratio\": 1.5}"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(test_infer_op("dropout", bad[i], 1, in, 2, out, &st), PARDO_EINVAL);
        ck_assert_msg(strstr(st.msg, "'ratio'") && strstr(st.msg, "[0, 1)"), "%s", st.msg);
    }
    ck_assert_int_eq(test_infer_op("dropout", "{\"seed\": 1.5}", 1, in, 2, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'seed'"), "%s", st.msg);
    x = test_type(PARDO_I32, 1, (int64_t[]){8});
    ck_assert_int_eq(test_infer_op("dropout", NULL, 1, in, 2, out, &st), PARDO_ESHAPE);
    /* dropout_grad: a Mask of another shape */
    pardo_type xx = test_type(PARDO_F64, 1, (int64_t[]){4}), m = test_type(PARDO_BOOL, 1, (int64_t[]){5});
    const pardo_type *gin[5] = {&xx, NULL, &m, NULL, NULL};
    ck_assert_int_eq(test_infer_op("dropout_grad", NULL, 5, gin, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'Mask'"), "%s", st.msg);
}
END_TEST

Suite *make_ops_dropout_suite(void) {
    Suite *s = suite_create("ops_dropout");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_dropout_not_training);
    tcase_add_test(core, test_dropout_training);
    tcase_add_test(core, test_dropout_reproducible);
    tcase_add_test(core, test_dropout_mask_optional);
    tcase_add_test(core, test_dropout_grads);
    tcase_add_test(core, test_dropout_grad_reads_mask);
    tcase_add_test(core, test_dropout_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_dropout_errors);
    tcase_add_test(errors, test_dropout_run_time_inputs);
    suite_add_tcase(s, errors);
    return s;
}
