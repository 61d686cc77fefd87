/* check_ops_index_elements.c - ops/index_elements.c: gather_elements and
 * scatter_elements (every reduction, both axes, negative indices) and
 * gather_nd (batch_dims 0 and 1) and scatter_nd (none, add, mul) against
 * naive loops in the test; the gradients of gather_elements and gather_nd
 * against float64 finite differences; out-of-range indices and bad shapes
 * refused. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

static void expect_values(const pardo_tensor *y, int n, const double *want, const char *what) {
    ck_assert_int_eq(y->numel, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(pardo_tensor_get_f64(y, i) - want[i]) <= 1e-6 * fmax(1, fabs(want[i])),
                      "%s[%d]: %g, want %g", what, i, pardo_tensor_get_f64(y, i), want[i]);
}

/* data [3, 4] = 0..11; indices [2, 4] (with negatives) on either axis. */
START_TEST(test_gather_scatter_elements) {
    double dv[12], iv0[8] = {0, 2, -1, 1, 1, 0, 2, -3}, iv1[8] = {3, 0, -1, 1, 2, 2, -4, 0}, uv[8];
    for (int i = 0; i < 12; i++) dv[i] = i + 0.5;
    for (int i = 0; i < 8; i++) uv[i] = 10 + i;
    static const char *const reds[5] = {"none", "add", "mul", "max", "min"};
    for (int axis = 0; axis < 2; axis++) {
        const double *iv = axis ? iv1 : iv0;
        pardo_tensor *d = test_tensor_from(PARDO_F32, 2, (int64_t[]){3, 4}, dv);
        pardo_tensor *ix = test_tensor_from(axis ? PARDO_I32 : PARDO_I64, 2, (int64_t[]){2, 4}, iv);
        pardo_tensor *u = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 4}, uv);
        pardo_tensor *in[3] = {d, ix, u}, *y = NULL;
        pardo_status st;
        char attrs[96];
        snprintf(attrs, sizeof attrs, "{\"axis\": %d}", axis - 2 * axis); /* 0, then -1 */
        ck_assert_msg(test_run_op("gather_elements", attrs, 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        double want[12];
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 4; c++) {
                int k = (int)iv[r * 4 + c];
                k = k < 0 ? k + (axis ? 4 : 3) : k;
                want[r * 4 + c] = axis ? dv[r * 4 + k] : dv[k * 4 + c];
            }
        expect_values(y, 8, want, "gather_elements");
        pardo_tensor_release(y);
        for (int rd = 0; rd < 5; rd++) {
            snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"reduction\": \"%s\"}", axis, reds[rd]);
            y = NULL;
            ck_assert_msg(test_run_op("scatter_elements", attrs, 3, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
            memcpy(want, dv, sizeof dv);
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < 4; c++) {
                    int k = (int)iv[r * 4 + c];
                    k = k < 0 ? k + (axis ? 4 : 3) : k;
                    double *w = axis ? &want[r * 4 + k] : &want[k * 4 + c], v = uv[r * 4 + c];
                    *w = rd == 0 ? v : rd == 1 ? *w + v : rd == 2 ? *w * v : rd == 3 ? fmax(*w, v) : fmin(*w, v);
                }
            expect_values(y, 12, want, reds[rd]);
            pardo_tensor_release(y);
        }
        pardo_tensor_release(u);
        pardo_tensor_release(ix);
        pardo_tensor_release(d);
    }
}
END_TEST

/* data [2, 3, 2] = 0..11: tuples of 2 with batch_dims 0, tuples of 1 with batch_dims 1. */
START_TEST(test_gather_scatter_nd) {
    double dv[12];
    for (int i = 0; i < 12; i++) dv[i] = i;
    pardo_tensor *d = test_tensor_from(PARDO_F64, 3, (int64_t[]){2, 3, 2}, dv), *y = NULL;
    pardo_tensor *ix = test_tensor_from(PARDO_I64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 0, -1, -2, 0});
    pardo_tensor *in[3] = {d, ix, NULL};
    pardo_status st;
    ck_assert_msg(test_run_op("gather_nd", NULL, 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->ndim, 2);
    expect_values(y, 6, (double[]){10, 11, 4, 5, 0, 1}, "gather_nd");
    pardo_tensor_release(y);
    pardo_tensor *ib = test_tensor_from(PARDO_I32, 2, (int64_t[]){2, 1}, (double[]){2, 0});
    in[1] = ib;
    y = NULL;
    ck_assert_msg(test_run_op("gather_nd", "{\"batch_dims\": 1}", 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->ndim, 2);
    expect_values(y, 4, (double[]){4, 5, 6, 7}, "gather_nd batch_dims 1");
    pardo_tensor_release(y);
    /* scatter_nd: the slices [2] at tuples (1, 2) and (0, -1), then the same tuple twice */
    pardo_tensor *ix2 = test_tensor_from(PARDO_I64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 0, -1, 1, 2});
    pardo_tensor *u = test_tensor_from(PARDO_F64, 2, (int64_t[]){3, 2}, (double[]){100, 101, 102, 103, 2, 3});
    pardo_tensor *sin[3] = {d, ix2, u};
    static const char *const attrs[3] = {NULL, "{\"reduction\": \"add\"}", "{\"reduction\": \"mul\"}"};
    for (int rd = 0; rd < 3; rd++) {
        double want[12];
        memcpy(want, dv, sizeof dv);
        const int at[3] = {10, 4, 10};
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) {
                double *w = &want[at[j] + k], v = pardo_tensor_get_f64(u, j * 2 + k);
                *w = rd == 0 ? v : rd == 1 ? *w + v : *w * v;
            }
        y = NULL;
        ck_assert_msg(test_run_op("scatter_nd", attrs[rd], 3, sin, 1, &y, &st) == PARDO_OK, "%s", st.msg);
        expect_values(y, 12, want, "scatter_nd");
        pardo_tensor_release(y);
    }
    pardo_tensor_release(u);
    pardo_tensor_release(ix2);
    pardo_tensor_release(ib);
    pardo_tensor_release(ix);
    pardo_tensor_release(d);
}
END_TEST

/* Repeated indices, so that the scatter-add sums. */
START_TEST(test_index_elements_grads) {
    test_rng r = {21};
    pardo_tensor *d = test_tensor_random(&r, PARDO_F64, 2, (int64_t[]){3, 4}, -1, 1);
    pardo_tensor *ix = test_tensor_from(PARDO_I64, 2, (int64_t[]){3, 3}, (double[]){0, 3, 3, -1, 1, 1, 2, 2, 0});
    pardo_tensor *in[2] = {d, ix};
    test_check_grad_default("gather_elements", "{\"axis\": 1}", 2, in, 1, 1u);
    pardo_tensor *d3 = test_tensor_random(&r, PARDO_F64, 3, (int64_t[]){2, 3, 2}, -1, 1);
    pardo_tensor *t2 = test_tensor_from(PARDO_I64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 1, 2, 0, 0});
    pardo_tensor *t1 = test_tensor_from(PARDO_I64, 3, (int64_t[]){2, 2, 1}, (double[]){2, 2, 0, 1});
    pardo_tensor *in2[2] = {d3, t2}, *in1[2] = {d3, t1};
    test_check_grad_default("gather_nd", NULL, 2, in2, 1, 1u);
    test_check_grad_default("gather_nd", "{\"batch_dims\": 1}", 2, in1, 1, 1u);
    pardo_tensor_release(t1);
    pardo_tensor_release(t2);
    pardo_tensor_release(d3);
    pardo_tensor_release(ix);
    pardo_tensor_release(d);
}
END_TEST

START_TEST(test_index_elements_errors) {
    pardo_status st;
    pardo_tensor *d = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    pardo_tensor *ix = test_tensor_from(PARDO_I64, 2, (int64_t[]){1, 2}, (double[]){0, 2});
    pardo_tensor *u = test_tensor_from(PARDO_F32, 2, (int64_t[]){1, 2}, (double[]){5, 6});
    pardo_tensor *in[3] = {d, ix, u}, *y = NULL;
    ck_assert_int_eq(test_run_op("gather_elements", NULL, 2, in, 1, &y, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "gather_elements") && strstr(st.msg, "element 1 is 2"), "%s", st.msg);
    ck_assert_int_eq(test_run_op("scatter_elements", NULL, 3, in, 1, &y, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "scatter_elements"), "%s", st.msg);
    ck_assert_int_eq(test_run_op("scatter_elements", "{\"reduction\": \"avg\"}", 3, in, 1, &y, &st), PARDO_EINVAL);
    pardo_tensor *t = test_tensor_from(PARDO_I64, 2, (int64_t[]){1, 2}, (double[]){1, -3});
    in[1] = t;
    ck_assert_int_eq(test_run_op("gather_nd", NULL, 2, in, 1, &y, &st), PARDO_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "gather_nd") && strstr(st.msg, "-3"), "%s", st.msg);
    pardo_type td = test_type(PARDO_F32, 2, (int64_t[]){2, 2}), t3 = test_type(PARDO_I64, 2, (int64_t[]){1, 3}),
               tr = test_type(PARDO_I64, 1, (int64_t[]){2}), out;
    const pardo_type *a[2] = {&td, &t3}, *b[2] = {&td, &tr};
    ck_assert_int_eq(test_infer_op("gather_nd", NULL, 2, a, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("gather_elements", NULL, 2, b, 1, &out, &st), PARDO_ESHAPE);
    pardo_tensor_release(t);
    pardo_tensor_release(u);
    pardo_tensor_release(ix);
    pardo_tensor_release(d);
}
END_TEST

Suite *make_ops_index_elements_suite(void) {
    Suite *s = suite_create("ops_index_elements");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_gather_scatter_elements);
    tcase_add_test(core, test_gather_scatter_nd);
    tcase_add_test(core, test_index_elements_grads);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_index_elements_errors);
    suite_add_tcase(s, errors);
    return s;
}
