/* check_ops_pad.c - ops/pad.c: pad's three modes and cropping (negative
 * pads) against values worked out by hand, the pads and the value as
 * run-time inputs, an int dtype; pad_grad for X and the value against
 * float64 finite differences in each mode; the refusals. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

static void check_pad(const char *attrs, int n_in, pardo_tensor **in, int n, const double *want) {
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("pad", attrs, n_in, in, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
    ck_assert_int_eq(y->numel, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(pardo_tensor_get_f64(y, i) == want[i], "%s [%d]: %g, want %g", attrs, i,
                      pardo_tensor_get_f64(y, i), want[i]);
    pardo_tensor_release(y);
}

START_TEST(test_pad_modes) {
    static const double xv[6] = {1, 2, 3, 4, 5, 6};
    for (int t = 0; t < 2; t++) {
        pardo_tensor *x = test_tensor_from(t ? PARDO_I32 : PARDO_F32, 2, (int64_t[]){2, 3}, xv), *in[3] = {x, 0, 0};
        check_pad("{\"pads\": [0, 2, 0, 1], \"value\": 9}", 1, in, 12,
                  (double[]){9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9});
        check_pad("{\"pads\": [0, 2, 0, 1], \"mode\": \"edge\"}", 1, in, 12,
                  (double[]){1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6});
        check_pad("{\"pads\": [0, 2, 0, 1], \"mode\": \"reflect\"}", 1, in, 12,
                  (double[]){3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5});
        check_pad("{\"pads\": [1, -1, 0, 0]}", 1, in, 6, (double[]){0, 0, 2, 3, 5, 6});
        pardo_tensor_release(x);
    }
    pardo_tensor *x = test_tensor_from(PARDO_F64, 1, (int64_t[]){3}, xv);
    pardo_tensor *p = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){1, 2});
    pardo_tensor *v = test_tensor_from(PARDO_F64, 0, NULL, (double[]){-1});
    pardo_tensor *in[3] = {x, p, v};
    check_pad(NULL, 3, in, 6, (double[]){-1, 1, 2, 3, -1, -1});
    pardo_tensor_release(v);
    pardo_tensor_release(p);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_pad_grads) {
    test_rng r = {31};
    static const char *const modes[3] = {"constant", "edge", "reflect"};
    for (int m = 0; m < 3; m++) {
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 4}, -1, 1);
        pardo_tensor *p = test_tensor_from(PARDO_I64, 1, (int64_t[]){4}, (double[]){2, 3, -1, 1});
        pardo_tensor *v = test_tensor_from(PARDO_F64, 0, NULL, (double[]){0.5});
        pardo_tensor *in[3] = {x, p, v};
        char attrs[64];
        snprintf(attrs, sizeof attrs, "{\"mode\": \"%s\"}", modes[m]);
        test_check_grad_default("pad", attrs, 3, in, 1, m == 0 ? 5u : 1u);
        pardo_tensor_release(v);
        pardo_tensor_release(p);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_pad_errors) {
    pardo_status st;
    pardo_type tx = test_type(PARDO_F32, 2, (int64_t[]){2, 3}), out;
    const pardo_type *t1[1] = {&tx};
    ck_assert_int_eq(test_infer_op("pad", "{\"pads\": [1, 1]}", 1, t1, 1, &out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("pad", "{\"pads\": [0, -2, 0, -2]}", 1, t1, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("pad", "{\"pads\": [0, 0, 0, 0], \"mode\": \"wrap\"}", 1, t1, 1, &out, &st),
                     PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("pad", NULL, 1, t1, 1, &out, &st), PARDO_EINVAL);
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, (int64_t[]){0, 3}, NULL), *y = NULL, *in[1] = {x};
    ck_assert_int_eq(test_run_op("pad", "{\"pads\": [1, 0, 0, 0], \"mode\": \"edge\"}", 1, in, 1, &y, &st),
                     PARDO_EINVAL);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_ops_pad_suite(void) {
    Suite *s = suite_create("ops_pad");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_pad_modes);
    tcase_add_test(core, test_pad_grads);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_pad_errors);
    suite_add_tcase(s, errors);
    return s;
}
