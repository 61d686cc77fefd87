/* check_ops_lrn.c - lrn and lrn_grad: the forward against a naive loop
 * written from ONNX LRN's definition (odd and even sizes, a window wider
 * than the channels, ranks 3 to 5), a hand-computed value, the gradient
 * against float64 finite differences, and attr and shape errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct lrn_case {
    int nd;
    int64_t xs[5];
    int64_t size;
    double alpha, beta, bias;
} lrn_case;

static char *lrn_attrs(const lrn_case *c, char *buf, size_t n) {
    snprintf(buf, n, "{\"size\": %lld, \"alpha\": %.17g, \"beta\": %.17g, \"bias\": %.17g}", (long long)c->size,
             c->alpha, c->beta, c->bias);
    return buf;
}

/* square_sum[n, c, s] = sum of X[n, i, s]^2 for i from max(0, c - floor((size - 1) / 2)) to min(C - 1, c +
 * ceil((size - 1) / 2)); Y = X / (bias + alpha / size * square_sum)^beta (ONNX's formula), in double. */
static pardo_tensor *ref_lrn(const lrn_case *c, const pardo_tensor *x) {
    const int64_t N = c->xs[0], C = c->xs[1];
    int64_t inner = 1;
    for (int i = 2; i < c->nd; i++) inner *= c->xs[i];
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, c->nd, c->xs, &st);
    ck_assert_ptr_nonnull(y);
    const int64_t before = (int64_t)floor((double)(c->size - 1) / 2), after = (int64_t)ceil((double)(c->size - 1) / 2);
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t s = 0; s < inner; s++) {
                double q = 0;
                for (int64_t i = ch - before; i <= ch + after; i++) {
                    if (i < 0 || i >= C) continue;
                    const double v = pardo_tensor_get_f64(x, (n * C + i) * inner + s);
                    q += v * v;
                }
                const int64_t e = (n * C + ch) * inner + s;
                const double scale = pow(c->bias + c->alpha / (double)c->size * q, c->beta);
                pardo_tensor_set_f64(y, e, pardo_tensor_get_f64(x, e) / scale);
            }
    return y;
}

static const lrn_case cases[] = {
    {4, {2, 5, 3, 2}, 3, 0.0002, 0.5, 2.0},
    {4, {1, 4, 2, 3}, 2, 0.5, 0.75, 1.0}, /* even size: the channel and the next */
    {3, {2, 3, 4}, 7, 1.5, 0.6, 0.5},    /* the window wider than the channels */
    {5, {1, 6, 2, 2, 2}, 4, 0.8, 1.2, 1.5},
    {4, {1, 1, 3, 3}, 1, 2.0, 0.75, 1.0}, /* one channel */
};

START_TEST(test_lrn_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases); k++)
        for (int t = 0; t < 2; t++) {
            const lrn_case *c = &cases[k];
            test_rng r = {700u + (uint64_t)k * 2 + (uint64_t)t};
            pardo_tensor *x = test_tensor_random(&r, dts[t], c->nd, c->xs, -2, 2), *y = NULL;
            pardo_status st;
            char attrs[256];
            ck_assert_msg(test_run_op("lrn", lrn_attrs(c, attrs, sizeof attrs), 1, &x, 1, &y, &st) == PARDO_OK,
                          "case %d: %s", k, st.msg);
            pardo_tensor *want = ref_lrn(c, x);
            test_assert_close(y, want, t ? 1e-6 : 1e-13, t ? 1e-6 : 1e-13);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_lrn_by_hand) {
    /* X [1, 2, 1] = [1, 2], size 2 (windows {0, 1} and {1}), alpha 2 (alpha / size 1), beta 1, bias 1:
     * Y = [1 / (1 + 1 + 4), 2 / (1 + 4)] = [1/6, 2/5] */
    pardo_tensor *x = test_tensor_from(PARDO_F64, 3, (int64_t[]){1, 2, 1}, (double[]){1, 2}), *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("lrn", "{\"size\": 2, \"alpha\": 2, \"beta\": 1, \"bias\": 1}", 1, &x, 1, &y, &st),
                     PARDO_OK);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 0), 1.0 / 6, 1e-15);
    ck_assert_double_eq_tol(pardo_tensor_get_f64(y, 1), 2.0 / 5, 1e-15);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_lrn_grad) {
    for (int k = 0; k < LEN(cases); k++) {
        const lrn_case *c = &cases[k];
        test_rng r = {800u + (uint64_t)k};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, c->nd, c->xs, -2, 2);
        char attrs[256];
        test_check_grad_default("lrn", lrn_attrs(c, attrs, sizeof attrs), 1, &x, 1, 1u);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_lrn_err) {
    pardo_type x = test_type(PARDO_F32, 4, (int64_t[]){1, 3, 2, 2}), out;
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("lrn", NULL, 1, in, 1, &out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'size'") && strstr(st.msg, "required"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("lrn", "{\"size\": 0}", 1, in, 1, &out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("lrn", "{\"size\": 3, \"bias\": 0}", 1, in, 1, &out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'bias'") != NULL, "%s", st.msg);
    ck_assert_int_eq(test_infer_op("lrn", "{\"size\": 3, \"alpha\": -1}", 1, in, 1, &out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("lrn", "{\"size\": \"three\"}", 1, in, 1, &out, &st), PARDO_EINVAL);
    pardo_type x2 = test_type(PARDO_F32, 2, (int64_t[]){3, 3}), xi = test_type(PARDO_I64, 4, (int64_t[]){1, 3, 2, 2});
    in[0] = &x2;
    ck_assert_int_eq(test_infer_op("lrn", "{\"size\": 3}", 1, in, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "rank >= 3") != NULL, "%s", st.msg);
    in[0] = &xi;
    ck_assert_int_eq(test_infer_op("lrn", "{\"size\": 3}", 1, in, 1, &out, &st), PARDO_ESHAPE);
    /* the gradient's dY must match X */
    pardo_type dy = test_type(PARDO_F32, 4, (int64_t[]){1, 3, 2, 1});
    const pardo_type *gin[3] = {&x, NULL, &dy};
    ck_assert_int_eq(test_infer_op("lrn_grad", "{\"size\": 3}", 3, gin, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'dY'") != NULL, "%s", st.msg);
}
END_TEST

Suite *make_ops_lrn_suite(void) {
    Suite *s = suite_create("ops_lrn");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_lrn_reference);
    tcase_add_test(core, test_lrn_by_hand);
    tcase_add_test(core, test_lrn_grad);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_lrn_err);
    suite_add_tcase(s, errors);
    return s;
}
