/* check_ops_index_select.c - ops/index_select.c: top_k (largest and
 * smallest, ties to the lower index, an inner axis) against a naive
 * selection in the test; compress along an axis and flattened, with a
 * short condition; eye_like on and off the main diagonal and to another
 * dtype; one_hot with negative and out-of-range indices on each axis; the
 * refusals. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

static void expect_values(const pardo_tensor *y, int n, const double *want, const char *what) {
    ck_assert_int_eq(y->numel, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(pardo_tensor_get_f64(y, i) == want[i], "%s[%d]: %g, want %g", what, i,
                      pardo_tensor_get_f64(y, i), want[i]);
}

START_TEST(test_top_k) {
    /* X [2, 3, 2]; along axis 1 (an inner axis); column (0, *, 0) has a tie */
    static const double xv[12] = {5, 1, 5, 9, 2, 4, 0, 7, 3, 3, -1, 8};
    pardo_tensor *x = test_tensor_from(PARDO_F32, 3, (int64_t[]){2, 3, 2}, xv);
    pardo_tensor *k = test_tensor_from(PARDO_I64, 1, (int64_t[]){1}, (double[]){2}), *in[2] = {x, k};
    for (int largest = 0; largest < 2; largest++) {
        pardo_tensor *y[2] = {NULL, NULL};
        pardo_status st;
        ck_assert_msg(test_run_op("top_k", largest ? "{\"axis\": -2}" : "{\"axis\": 1, \"largest\": 0}", 2, in, 2, y,
                                  &st) == PARDO_OK, "%s", st.msg);
        double wv[8], wi[8];
        for (int o = 0; o < 2; o++)
            for (int c = 0; c < 2; c++) {
                bool taken[3] = {false, false, false};
                for (int j = 0; j < 2; j++) {
                    int best = -1;
                    for (int i = 0; i < 3; i++) {
                        const double v = xv[(o * 3 + i) * 2 + c];
                        if (!taken[i] && (best < 0 || (largest ? v > xv[(o * 3 + best) * 2 + c]
                                                               : v < xv[(o * 3 + best) * 2 + c])))
                            best = i;
                    }
                    taken[best] = true;
                    wv[(o * 2 + j) * 2 + c] = xv[(o * 3 + best) * 2 + c];
                    wi[(o * 2 + j) * 2 + c] = best;
                }
            }
        expect_values(y[0], 8, wv, "values");
        expect_values(y[1], 8, wi, "indices");
        ck_assert_int_eq(y[1]->dtype, PARDO_I64);
        pardo_tensor_release(y[1]);
        pardo_tensor_release(y[0]);
    }
    pardo_tensor_release(k);
    pardo_tensor_release(x);
}
END_TEST

/* top_k on every numeric dtype, largest and smallest, along the middle axis
 * of [3, 9, 2], over values spread to the extremes with ties: the values'
 * bits and the indices a naive selection in long double gives (the first
 * of equals first). */
START_TEST(test_top_k_every_dtype) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I8,  PARDO_I16, PARDO_I32, PARDO_I64,
                                      PARDO_U8,  PARDO_U16, PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
    const int64_t xs[] = {3, 9, 2}, K = 4;
    for (int t = 0; t < (int)(sizeof dts / sizeof dts[0]); t++)
        for (int largest = 0; largest < 2; largest++) {
            test_rng r = {1500u + (uint64_t)(t * 2 + largest)};
            pardo_tensor *in[2] = {test_tensor_spread(&r, dts[t], 3, xs),
                                   test_tensor_from(PARDO_I64, 0, NULL, (double[]){(double)K})},
                         *y[2] = {NULL, NULL};
            pardo_status st;
            ck_assert_msg(test_run_op("top_k", largest ? "{\"axis\": 1}" : "{\"axis\": 1, \"largest\": 0}", 2, in, 2, y,
                                      &st) == PARDO_OK,
                          "%s: %s", pardo_dtype_name(dts[t]), st.msg);
            const size_t es = pardo_dtype_size(dts[t]);
            const unsigned char *xd = pardo_tensor_data(in[0]), *vd = pardo_tensor_data(y[0]);
            const int64_t *id = pardo_tensor_data(y[1]);
            for (int64_t a = 0; a < xs[0]; a++)
                for (int64_t c = 0; c < xs[2]; c++) {
                    bool taken[9] = {false};
                    for (int64_t j = 0; j < K; j++) {
                        int64_t best = -1;
                        for (int64_t i = 0; i < xs[1]; i++) {
                            if (taken[i]) continue;
                            const long double v = test_elem_ld(xd, dts[t], (a * xs[1] + i) * xs[2] + c);
                            const long double b =
                                best < 0 ? 0 : test_elem_ld(xd, dts[t], (a * xs[1] + best) * xs[2] + c);
                            if (best < 0 || (largest ? v > b : v < b)) best = i;
                        }
                        taken[best] = true;
                        const int64_t at = (a * K + j) * xs[2] + c;
                        ck_assert_msg(id[at] == best, "%s largest=%d [%lld, %lld, %lld]: index %lld, expected %lld",
                                      pardo_dtype_name(dts[t]), largest, (long long)a, (long long)j, (long long)c,
                                      (long long)id[at], (long long)best);
                        ck_assert(memcmp(vd + (size_t)at * es, xd + (size_t)((a * xs[1] + best) * xs[2] + c) * es,
                                         es) == 0);
                    }
                }
            for (int q = 0; q < 2; q++) {
                pardo_tensor_release(y[q]);
                pardo_tensor_release(in[q]);
            }
        }
}
END_TEST

START_TEST(test_compress_eye_one_hot) {
    pardo_status st;
    pardo_tensor *x = test_tensor_from(PARDO_I64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6});
    pardo_tensor *c2 = test_tensor_from(PARDO_BOOL, 1, (int64_t[]){2}, (double[]){1, 0});
    pardo_tensor *c5 = test_tensor_from(PARDO_BOOL, 1, (int64_t[]){5}, (double[]){0, 1, 0, 1, 1});
    pardo_tensor *in[3] = {x, c2, NULL}, *y = NULL;
    ck_assert_msg(test_run_op("compress", "{\"axis\": 0}", 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->shape[0], 1);
    expect_values(y, 2, (double[]){1, 2}, "compress axis 0");
    pardo_tensor_release(y);
    y = NULL;
    ck_assert_msg(test_run_op("compress", "{\"axis\": -1}", 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    expect_values(y, 3, (double[]){1, 3, 5}, "compress axis -1");
    pardo_tensor_release(y);
    in[1] = c5;
    y = NULL;
    ck_assert_msg(test_run_op("compress", NULL, 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    expect_values(y, 3, (double[]){2, 4, 5}, "compress flattened");
    pardo_tensor_release(y);
    y = NULL;
    ck_assert_int_eq(test_run_op("compress", "{\"axis\": 0}", 2, in, 1, &y, &st), PARDO_ESHAPE);
    pardo_tensor *e = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 3}, (double[]){7, 7, 7, 7, 7, 7});
    in[0] = e;
    y = NULL;
    ck_assert_msg(test_run_op("eye_like", "{\"k\": 1, \"dtype\": \"int32\"}", 1, in, 1, &y, &st) == PARDO_OK, "%s",
                  st.msg);
    ck_assert_int_eq(y->dtype, PARDO_I32);
    expect_values(y, 6, (double[]){0, 1, 0, 0, 0, 1}, "eye_like k 1");
    pardo_tensor_release(y);
    y = NULL;
    ck_assert_msg(test_run_op("eye_like", "{\"k\": -1}", 1, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    expect_values(y, 6, (double[]){0, 0, 0, 1, 0, 0}, "eye_like k -1");
    pardo_tensor_release(y);
    /* one_hot: indices [2] = {-1, 5}, depth 3: the first is class 2, the second none */
    pardo_tensor *ix = test_tensor_from(PARDO_F32, 1, (int64_t[]){2}, (double[]){-1, 5});
    pardo_tensor *d = test_tensor_from(PARDO_F32, 0, NULL, (double[]){3});
    pardo_tensor *v = test_tensor_from(PARDO_I32, 1, (int64_t[]){2}, (double[]){-2, 4});
    pardo_tensor *oin[3] = {ix, d, v};
    y = NULL;
    ck_assert_msg(test_run_op("one_hot", NULL, 3, oin, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->shape[0], 2);
    expect_values(y, 6, (double[]){-2, -2, 4, -2, -2, -2}, "one_hot axis -1");
    pardo_tensor_release(y);
    y = NULL;
    ck_assert_msg(test_run_op("one_hot", "{\"axis\": 0}", 3, oin, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->shape[0], 3);
    expect_values(y, 6, (double[]){-2, -2, -2, -2, 4, -2}, "one_hot axis 0");
    pardo_tensor_release(y);
    pardo_tensor *const all[] = {x, c2, c5, e, ix, d, v};
    for (int i = 0; i < 7; i++) pardo_tensor_release(all[i]);
}
END_TEST

START_TEST(test_index_select_errors) {
    pardo_status st;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    pardo_tensor *k = test_tensor_from(PARDO_I64, 1, (int64_t[]){1}, (double[]){4}), *in[2] = {x, k};
    pardo_tensor *y[2] = {NULL, NULL};
    ck_assert_int_eq(test_run_op("top_k", NULL, 2, in, 2, y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "top_k"), "%s", st.msg);
    pardo_type t1 = test_type(PARDO_F32, 1, (int64_t[]){3}), out;
    const pardo_type *ty[1] = {&t1};
    ck_assert_int_eq(test_infer_op("eye_like", NULL, 1, ty, 1, &out, &st), PARDO_ESHAPE);
    pardo_tensor_release(k);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_ops_index_select_suite(void) {
    Suite *s = suite_create("ops_index_select");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_top_k);
    tcase_add_test(core, test_top_k_every_dtype);
    tcase_add_test(core, test_compress_eye_one_hot);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_index_select_errors);
    suite_add_tcase(s, errors);
    return s;
}
