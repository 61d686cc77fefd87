/* check_ops_max_unpool.c - max_unpool and max_unpool_grad: hand-computed
 * outputs (ONNX's examples, with and without output_shape, a repeated
 * index), a round trip through max_pool_nd's Indices checked against a
 * naive loop, the gradient against float64 finite differences (repeated
 * indices included), inference, and errors (indices outside, shapes). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

static pardo_tensor *i64_tensor(int nd, const int64_t *shape, const int64_t *vals) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_I64, nd, shape, &st);
    ck_assert_ptr_nonnull(t);
    memcpy(pardo_tensor_data(t), vals, sizeof(int64_t) * (size_t)t->numel);
    return t;
}

START_TEST(test_mu_onnx_examples) {
    /* ONNX's: X [[5, 6], [7, 8]] at indices 5, 7, 13, 15 of the 4x4 pooled input, kernel and strides 2 */
    pardo_tensor *x = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){5, 6, 7, 8}),
                 *ix = i64_tensor(4, (int64_t[]){1, 1, 2, 2}, (int64_t[]){5, 7, 13, 15}),
                 *os = i64_tensor(1, (int64_t[]){4}, (int64_t[]){1, 1, 5, 5}), *y = NULL;
    pardo_tensor *in[3] = {x, ix, os};
    pardo_status st;
    const char *attrs = "{\"kernel\": [2, 2], \"strides\": [2, 2]}";
    ck_assert_int_eq(test_run_op("max_unpool", attrs, 2, in, 1, &y, &st), PARDO_OK);
    double w4[16] = {0};
    w4[5] = 5, w4[7] = 6, w4[13] = 7, w4[15] = 8;
    pardo_tensor *want = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 1, 4, 4}, w4);
    test_assert_close(y, want, 0, 0);
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    /* with output_shape [1, 1, 5, 5]: the 4x4 result at the origin (rows 1 and 3, columns 1 and 3) */
    ck_assert_int_eq(test_run_op("max_unpool", attrs, 3, in, 1, &y, &st), PARDO_OK);
    double w5[25] = {0};
    w5[6] = 5, w5[8] = 6, w5[16] = 7, w5[18] = 8;
    want = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 1, 5, 5}, w5);
    test_assert_close(y, want, 0, 0);
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_mu_repeated_index) {
    /* X [1, 2, 3] 1-D, kernel 2 stride 1 (pooled size 4 per plane, 8 in all): indices 1, 1, 2 | 4, 7, 7 -> the
     * later value wins; the gradient goes to that one */
    pardo_tensor *x = test_tensor_from(PARDO_F64, 3, (int64_t[]){1, 2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
                 *ix = i64_tensor(3, (int64_t[]){1, 2, 3}, (int64_t[]){1, 1, 2, 4, 7, 7}), *y = NULL;
    pardo_tensor *in[2] = {x, ix};
    pardo_status st;
    const char *attrs = "{\"kernel\": [2], \"strides\": [1]}";
    ck_assert_int_eq(test_run_op("max_unpool", attrs, 2, in, 1, &y, &st), PARDO_OK);
    pardo_tensor *want = test_tensor_from(PARDO_F64, 3, (int64_t[]){1, 2, 4}, (double[]){0, 2, 3, 0, 4, 0, 0, 6});
    test_assert_close(y, want, 0, 0);
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    test_check_grad_default("max_unpool", attrs, 2, in, 1, 1u);
    pardo_tensor_release(x);
    pardo_tensor_release(ix);
}
END_TEST

START_TEST(test_mu_round_trip) {
    /* max_pool_nd's Indices into max_unpool: every window's maximum back at its place in X's shape, zeros elsewhere
     * (checked element by element against a naive scan: an element is kept iff some window's first maximum is it) */
    test_rng r = {11};
    const int64_t xs[4] = {2, 3, 6, 5};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 4, xs, -1, 1), *pool[2] = {NULL, NULL}, *y = NULL;
    pardo_status st;
    const char *attrs = "{\"kernel\": [2, 2], \"strides\": [2, 2], \"pads\": [0, 0, 0, 1]}";
    ck_assert_int_eq(test_run_op("max_pool_nd", attrs, 1, &x, 2, pool, &st), PARDO_OK);
    pardo_tensor *in[3] = {pool[0], pool[1],
                           i64_tensor(1, (int64_t[]){4}, (int64_t[]){2, 3, 6, 5})};
    ck_assert_int_eq(test_run_op("max_unpool", attrs, 3, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y->ndim, y->shape, 4, xs));
    for (int64_t pl = 0; pl < 6; pl++)
        for (int64_t h = 0; h < 6; h++)
            for (int64_t w = 0; w < 5; w++) {
                /* the window of (h, w): rows 2 * (h / 2) +0..1, columns 2 * (w / 2) +0..1 clipped to width 5 */
                const int64_t h0 = h / 2 * 2, w0 = w / 2 * 2, e = (pl * 6 + h) * 5 + w;
                double best = -2;
                int64_t at = -1;
                for (int64_t a = h0; a < h0 + 2; a++)
                    for (int64_t b = w0; b < w0 + 2 && b < 5; b++) {
                        const double v = pardo_tensor_get_f64(x, (pl * 6 + a) * 5 + b);
                        if (v > best) best = v, at = (pl * 6 + a) * 5 + b;
                    }
                ck_assert(pardo_tensor_get_f64(y, e) == (at == e ? pardo_tensor_get_f64(x, e) : 0));
            }
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_mu_grad) {
    test_rng r = {12};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 4, (int64_t[]){1, 2, 2, 2}, -1, 1),
                 *ix = i64_tensor(4, (int64_t[]){1, 2, 2, 2}, (int64_t[]){0, 3, 5, 8, 9, 9, 16, 23}),
                 *os = i64_tensor(1, (int64_t[]){4}, (int64_t[]){1, 2, 6, 4});
    pardo_tensor *in[3] = {x, ix, os};
    /* pooled input [1, 2, 4, 3] (kernel 3, stride 2, end pads 1 and 2); output_shape enlarges it */
    const char *attrs = "{\"kernel\": [3, 3], \"strides\": [2, 2], \"pads\": [0, 0, 1, 2]}";
    test_check_grad_default("max_unpool", attrs, 3, in, 1, 1u);
    test_check_grad_default("max_unpool", attrs, 2, in, 1, 1u);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_mu_infer) {
    pardo_type x = test_type(PARDO_F32, 4, (int64_t[]){-1, 3, 4, 5}),
               ix = test_type(PARDO_I64, 4, (int64_t[]){-1, 3, 4, 5}), os = test_type(PARDO_I64, 1, (int64_t[]){4}), y;
    const pardo_type *in[3] = {&x, &ix, &os};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("max_unpool", "{\"kernel\": [2, 3], \"strides\": [2, 2], \"pads\": [0, 1, 0, 0]}",
                                   2, in, 1, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){-1, 3, 8, 10}));
    ck_assert_int_eq(test_infer_op("max_unpool", "{\"kernel\": [2, 3]}", 3, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){-1, -1, -1, -1}));
}
END_TEST

START_TEST(test_mu_err) {
    pardo_type x = test_type(PARDO_F32, 4, (int64_t[]){1, 1, 2, 2}),
               ix = test_type(PARDO_I64, 4, (int64_t[]){1, 1, 2, 2}),
               i32 = test_type(PARDO_I32, 4, (int64_t[]){1, 1, 2, 2}),
               ibad = test_type(PARDO_I64, 4, (int64_t[]){1, 1, 2, 3}), os = test_type(PARDO_I64, 1, (int64_t[]){3}), y;
    const pardo_type *in[3] = {&x, &ix, NULL};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("max_unpool", NULL, 2, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'kernel'") && strstr(st.msg, "required"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("max_unpool", "{\"kernel\": [2]}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("max_unpool", "{\"kernel\": [2, 2], \"strides\": [0, 1]}", 2, in, 1, &y, &st),
                     PARDO_EINVAL);
    in[1] = &i32;
    ck_assert_int_eq(test_infer_op("max_unpool", "{\"kernel\": [2, 2]}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'I'") && strstr(st.msg, "int64"), "%s", st.msg);
    in[1] = &ibad;
    ck_assert_int_eq(test_infer_op("max_unpool", "{\"kernel\": [2, 2]}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    in[1] = &ix;
    in[2] = &os;
    ck_assert_int_eq(test_infer_op("max_unpool", "{\"kernel\": [2, 2]}", 3, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'output_shape'") != NULL, "%s", st.msg);
    /* at run time: an index outside the pooled input, an output_shape smaller than it */
    pardo_tensor *xt = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 1, 1, 2}, (double[]){1, 2}),
                 *it = i64_tensor(4, (int64_t[]){1, 1, 1, 2}, (int64_t[]){1, 8}),
                 *ot = i64_tensor(1, (int64_t[]){4}, (int64_t[]){1, 1, 1, 4}), *yt = NULL;
    pardo_tensor *tin[3] = {xt, it, ot};
    ck_assert_int_eq(test_run_op("max_unpool", "{\"kernel\": [2, 2]}", 2, tin, 1, &yt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'I'") && strstr(st.msg, "8"), "%s", st.msg);
    ((int64_t *)pardo_tensor_data(it))[1] = 3;
    ck_assert_int_eq(test_run_op("max_unpool", "{\"kernel\": [2, 2]}", 3, tin, 1, &yt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'output_shape'") && strstr(st.msg, "at least"), "%s", st.msg);
    for (int i = 0; i < 3; i++) pardo_tensor_release(tin[i]);
}
END_TEST

Suite *make_ops_max_unpool_suite(void) {
    Suite *s = suite_create("ops_max_unpool");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_mu_onnx_examples);
    tcase_add_test(core, test_mu_repeated_index);
    tcase_add_test(core, test_mu_round_trip);
    tcase_add_test(core, test_mu_grad);
    tcase_add_test(core, test_mu_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_mu_err);
    suite_add_tcase(s, errors);
    return s;
}
