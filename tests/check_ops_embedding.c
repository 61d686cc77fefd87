/* check_ops_embedding.c - embedding and embedding_grad: rows gathered for
 * int32 and int64 indices of several shapes (scalar, empty, repeated rows)
 * against a naive loop, dW as a scatter-add (by hand and by finite
 * differences), inference, and out-of-range indices named at run time. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

START_TEST(test_embedding_reference) {
    static const struct {
        int nd;
        int64_t shape[3];
    } idx_shapes[] = {{1, {5}}, {2, {3, 4}}, {0, {0}}, {1, {0}}, {3, {2, 1, 3}}};
    static const pardo_dtype wdt[] = {PARDO_F32, PARDO_F64}, idt[] = {PARDO_I32, PARDO_I64};
    for (int k = 0; k < LEN(idx_shapes); k++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                test_rng r = {400u + (uint64_t)(k * 4 + a * 2 + b)};
                const int64_t V = 7, D = 3, ws[] = {V, D};
                pardo_tensor *in[2] = {test_tensor_random(&r, wdt[a], 2, ws, -1, 1),
                                       test_tensor_random(&r, idt[b], idx_shapes[k].nd, idx_shapes[k].shape, 0, V)},
                             *y = NULL;
                pardo_status st;
                ck_assert_msg(test_run_op("embedding", NULL, 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
                ck_assert_int_eq(y->ndim, idx_shapes[k].nd + 1);
                for (int d = 0; d < idx_shapes[k].nd; d++) ck_assert_int_eq(y->shape[d], idx_shapes[k].shape[d]);
                ck_assert_int_eq(y->shape[y->ndim - 1], D);
                ck_assert_int_eq(y->dtype, wdt[a]);
                for (int64_t i = 0; i < in[1]->numel; i++) {
                    int64_t row = (int64_t)pardo_tensor_get_f64(in[1], i);
                    for (int64_t j = 0; j < D; j++)
                        ck_assert(pardo_tensor_get_f64(y, i * D + j) == pardo_tensor_get_f64(in[0], row * D + j));
                }
                pardo_tensor_release(y);
                pardo_tensor_release(in[0]);
                pardo_tensor_release(in[1]);
            }
}
END_TEST

START_TEST(test_embedding_grad_scatter_add) {
    /* repeated indices add up; rows never picked get zeros */
    int64_t ws[] = {4, 2}, is[] = {2, 2}, ys[] = {2, 2, 2};
    pardo_tensor *in[4] = {test_tensor_from(PARDO_F64, 2, ws, (double[]){0, 0, 0, 0, 0, 0, 0, 0}),
                           test_tensor_from(PARDO_I64, 2, is, (double[]){3, 1, 3, 3}), NULL,
                           test_tensor_from(PARDO_F64, 3, ys, (double[]){1, 2, 3, 4, 5, 6, 7, 8})},
                 *g[2] = {NULL, NULL};
    pardo_status st;
    ck_assert_int_eq(test_run_op("embedding_grad", NULL, 4, in, 1, g, &st), PARDO_OK);
    const double want[] = {0, 0, 3, 4, 0, 0, 13, 16};
    for (int i = 0; i < 8; i++) ck_assert_double_eq(pardo_tensor_get_f64(g[0], i), want[i]);
    pardo_tensor_release(g[0]);
    for (int i = 0; i < 4; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_embedding_grads) {
    test_rng r = {6};
    int64_t ws[] = {5, 3}, is[] = {2, 3}, is1[] = {4};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, 2, ws, -1, 1),
                           test_tensor_from(PARDO_I32, 2, is, (double[]){0, 4, 4, 2, 0, 4})};
    test_check_grad_default("embedding", NULL, 2, in, 1, 1u);
    pardo_tensor_release(in[1]);
    in[1] = test_tensor_from(PARDO_I64, 1, is1, (double[]){1, 1, 3, 2});
    test_check_grad_default("embedding", NULL, 2, in, 1, 1u);
    pardo_tensor_release(in[1]);
    pardo_tensor_release(in[0]);
}
END_TEST

START_TEST(test_embedding_infer) {
    pardo_type y, w = test_type(PARDO_F32, 2, (int64_t[]){100, 16}), i = test_type(PARDO_I64, 2, (int64_t[]){-1, 12});
    const pardo_type *in[2] = {&w, &i};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("embedding", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 3, (int64_t[]){-1, 12, 16}));
    ck_assert_int_eq(y.dtype, PARDO_F32);
}
END_TEST

START_TEST(test_embedding_err_out_of_range) {
    static const double bad[] = {7, -1, 1e9};
    for (int b = 0; b < LEN(bad); b++)
        for (int t = 0; t < 2; t++) {
            test_rng r = {7};
            int64_t ws[] = {7, 2}, is[] = {2, 2};
            pardo_tensor *in[4] = {test_tensor_random(&r, PARDO_F64, 2, ws, -1, 1),
                                   test_tensor_from(t ? PARDO_I64 : PARDO_I32, 2, is, (double[]){0, 6, bad[b], 1}),
                                   NULL, NULL},
                         *y = NULL;
            pardo_status st;
            ck_assert_int_eq(test_run_op("embedding", NULL, 2, in, 1, &y, &st), PARDO_ERUNTIME);
            char want[96];
            snprintf(want, sizeof want, "'indices' [1, 0] (element 2) is %lld", (long long)bad[b]);
            ck_assert_msg(strstr(st.msg, want) && strstr(st.msg, "[0, 7)"), "message: %s", st.msg);
            ck_assert_ptr_null(y);
            /* the gradient checks the indices too */
            ck_assert_int_eq(test_run_op("embedding_grad", NULL, 4, in, 1, &y, &st), PARDO_ERUNTIME);
            ck_assert_msg(strstr(st.msg, want), "message: %s", st.msg);
            pardo_tensor_release(in[0]);
            pardo_tensor_release(in[1]);
        }
}
END_TEST

START_TEST(test_embedding_err_infer) {
    pardo_type y[2], w = test_type(PARDO_F32, 2, (int64_t[]){10, 4}), i = test_type(PARDO_F32, 1, (int64_t[]){3});
    const pardo_type *in[4] = {&w, &i, NULL, NULL};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("embedding", NULL, 2, in, 1, y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'indices'"), "%s", st.msg);
    i = test_type(PARDO_I32, 1, (int64_t[]){3});
    w = test_type(PARDO_F32, 3, (int64_t[]){10, 4, 1});
    ck_assert_int_eq(test_infer_op("embedding", NULL, 2, in, 1, y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[V, D]"), "%s", st.msg);
    w = test_type(PARDO_I32, 2, (int64_t[]){10, 4});
    ck_assert_int_eq(test_infer_op("embedding", NULL, 2, in, 1, y, &st), PARDO_ESHAPE);
    /* the indices get no gradient */
    w = test_type(PARDO_F32, 2, (int64_t[]){10, 4});
    ck_assert_int_eq(test_infer_op("embedding_grad", NULL, 4, in, 2, y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "no gradient"), "%s", st.msg);
}
END_TEST

Suite *make_ops_embedding_suite(void) {
    Suite *s = suite_create("ops_embedding");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_embedding_reference);
    tcase_add_test(core, test_embedding_grad_scatter_add);
    tcase_add_test(core, test_embedding_grads);
    tcase_add_test(core, test_embedding_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_embedding_err_out_of_range);
    tcase_add_test(errors, test_embedding_err_infer);
    suite_add_tcase(s, errors);
    return s;
}
