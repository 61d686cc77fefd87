/* check_ops_matmul.c - matmul against a naive triple loop in double:
 * 2-D, 1-D operands, batched with broadcast batch dims, transposes, edge
 * sizes; inference with run-time dims; errors; NumPy fixtures; matmul_grad
 * against float64 finite differences on every one of those cases. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct mm_case {
    int a_nd;
    int64_t a[PARDO_MAX_DIMS];
    int b_nd;
    int64_t b[PARDO_MAX_DIMS];
    bool ta, tb;
} mm_case;

/* The naive reference: numpy.matmul on double copies of a and b, written
 * from its definition (vector promotion, batch broadcast, then one
 * dot product per output element). */
static pardo_tensor *ref_matmul(const pardo_tensor *a, const pardo_tensor *b, bool ta, bool tb) {
    int64_t am = a->ndim == 1 ? 1 : (ta ? a->shape[a->ndim - 1] : a->shape[a->ndim - 2]);
    int64_t ak = a->ndim == 1 ? a->shape[0] : (ta ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1]);
    int64_t bn = b->ndim == 1 ? 1 : (tb ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1]);
    int abn = a->ndim > 2 ? a->ndim - 2 : 0, bbn = b->ndim > 2 ? b->ndim - 2 : 0;
    int nb = abn > bbn ? abn : bbn;
    int64_t shape[PARDO_MAX_DIMS], batch[PARDO_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < nb; i++) {
        int ia = abn - nb + i, ib = bbn - nb + i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        batch[i] = shape[nd++] = da == 1 ? db : da;
    }
    if (a->ndim > 1) shape[nd++] = am;
    if (b->ndim > 1) shape[nd++] = bn;
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(a->dtype, nd, shape, &st);
    ck_assert_ptr_nonnull(y);
    int64_t nbatch = 1;
    for (int i = 0; i < nb; i++) nbatch *= batch[i];
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t idx[PARDO_MAX_DIMS], rest = bi, aoff = 0, boff = 0;
        for (int i = nb - 1; i >= 0; i--) {
            idx[i] = rest % batch[i];
            rest /= batch[i];
        }
        for (int i = 0; i < abn; i++) {
            int64_t d = a->shape[i];
            aoff = aoff * d + (d == 1 ? 0 : idx[nb - abn + i]);
        }
        for (int i = 0; i < bbn; i++) {
            int64_t d = b->shape[i];
            boff = boff * d + (d == 1 ? 0 : idx[nb - bbn + i]);
        }
        aoff *= am * ak;
        boff *= ak * bn;
        for (int64_t i = 0; i < am; i++)
            for (int64_t j = 0; j < bn; j++) {
                double acc = 0;
                for (int64_t k = 0; k < ak; k++) {
                    double x = pardo_tensor_get_f64(a, aoff + (ta ? k * am + i : i * ak + k));
                    double w = pardo_tensor_get_f64(b, boff + (tb ? j * ak + k : k * bn + j));
                    acc += x * w;
                }
                pardo_tensor_set_f64(y, (bi * am + i) * bn + j, acc);
            }
    }
    return y;
}

static char *attrs_for(bool ta, bool tb, char *buf, size_t n) {
    snprintf(buf, n, "{\"transpose_a\": %s, \"transpose_b\": %s}", ta ? "true" : "false", tb ? "true" : "false");
    return buf;
}

static const mm_case cases[] = {
    {2, {3, 4}, 2, {4, 5}, false, false},
    {2, {1, 1}, 2, {1, 1}, false, false},
    {2, {7, 13}, 2, {13, 9}, false, false},
    {1, {4}, 2, {4, 5}, false, false},
    {2, {3, 4}, 1, {4}, false, false},
    {1, {4}, 1, {4}, false, false},
    {1, {1}, 1, {1}, false, false},
    {3, {2, 3, 4}, 2, {4, 5}, false, false},
    {3, {2, 3, 4}, 3, {2, 4, 5}, false, false},
    {4, {2, 1, 3, 4}, 3, {5, 4, 6}, false, false},
    {2, {4, 3}, 2, {4, 5}, true, false},
    {2, {3, 4}, 2, {5, 4}, false, true},
    {2, {4, 3}, 2, {5, 4}, true, true},
    {4, {2, 1, 4, 3}, 3, {3, 5, 4}, true, true},
    {3, {3, 5, 2}, 4, {2, 1, 7, 5}, true, true},
    {3, {2, 4, 3}, 2, {4, 6}, true, false},
    {2, {3, 4}, 3, {2, 6, 4}, false, true},
    {3, {0, 3, 4}, 2, {4, 5}, false, false},
    {2, {3, 0}, 2, {0, 5}, false, false},
    {2, {0, 4}, 2, {4, 5}, false, false},
    {2, {1, 4}, 3, {2, 4, 1}, false, false},
    {1, {4}, 3, {2, 4, 5}, false, false},
    {3, {2, 3, 4}, 1, {4}, false, false},
    {1, {5}, 3, {2, 3, 5}, false, true},
    {3, {2, 5, 3}, 1, {5}, true, false},
};

START_TEST(test_matmul_reference) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int c = 0; c < LEN(cases); c++)
        for (int t = 0; t < 2; t++) {
            const mm_case *mc = &cases[c];
            test_rng r = {300u + (uint64_t)c * 2u + (uint64_t)t};
            pardo_tensor *in[2] = {test_tensor_random(&r, dts[t], mc->a_nd, mc->a, -1, 1),
                                   test_tensor_random(&r, dts[t], mc->b_nd, mc->b, -1, 1)},
                         *out = NULL;
            char attrs[96];
            pardo_status st;
            int rc = test_run_op("matmul", attrs_for(mc->ta, mc->tb, attrs, sizeof attrs), 2, in, 1, &out, &st);
            ck_assert_msg(rc == PARDO_OK, "case %d: %s", c, st.msg);
            pardo_tensor *want = ref_matmul(in[0], in[1], mc->ta, mc->tb);
            test_assert_close(out, want, dts[t] == PARDO_F32 ? 1e-5 : 1e-13, dts[t] == PARDO_F32 ? 1e-5 : 1e-13);
            pardo_tensor_release(want);
            pardo_tensor_release(out);
            pardo_tensor_release(in[0]);
            pardo_tensor_release(in[1]);
        }
}
END_TEST

/* matmul on int32, int64, uint32 and uint64 against a naive product in the
 * test (unsigned 64-bit sums reduced to the type: wrapping), with
 * transposes, a broadcast batch and values at the types' extremes. */
START_TEST(test_matmul_integers) {
    static const pardo_dtype dts[] = {PARDO_I32, PARDO_I64, PARDO_U32, PARDO_U64};
    static const char *const attrs[] = {NULL, "{\"transpose_a\": true}", "{\"transpose_b\": true}"};
    for (int t = 0; t < 4; t++)
        for (int at = 0; at < 3; at++) {
            const int64_t m = 5, k = 7, n = 4;
            const bool ta = at == 1, tb = at == 2;
            const int64_t as[] = {2, ta ? k : m, ta ? m : k}, bs[] = {tb ? n : k, tb ? k : n};
            test_rng r = {7100u + (uint64_t)(t * 3 + at)};
            pardo_tensor *in[2] = {test_tensor_spread(&r, dts[t], 3, as), test_tensor_spread(&r, dts[t], 2, bs)};
            pardo_tensor *y = NULL;
            pardo_status st;
            ck_assert_msg(test_run_op("matmul", attrs[at], 2, in, 1, &y, &st) == PARDO_OK, "%s: %s",
                          pardo_dtype_name(dts[t]), st.msg);
            ck_assert_int_eq(y->dtype, dts[t]);
            ck_assert(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == m && y->shape[2] == n);
            const size_t es = pardo_dtype_size(dts[t]);
            const unsigned char *pa = pardo_tensor_data(in[0]), *pb = pardo_tensor_data(in[1]),
                                *py = pardo_tensor_data(y);
            for (int64_t bt = 0; bt < 2; bt++)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        uint64_t sum = 0;
                        for (int64_t p = 0; p < k; p++) {
                            uint64_t av = 0, bv = 0; /* the stored bits, sign-extended for the signed types */
                            memcpy(&av, pa + (size_t)(bt * m * k + (ta ? p * m + i : i * k + p)) * es, es);
                            memcpy(&bv, pb + (size_t)(tb ? j * k + p : p * n + j) * es, es);
                            if (es == 4 && dts[t] == PARDO_I32) {
                                av = (uint64_t)(int64_t)(int32_t)(uint32_t)av;
                                bv = (uint64_t)(int64_t)(int32_t)(uint32_t)bv;
                            }
                            sum += av * bv;
                        }
                        uint64_t got = 0;
                        memcpy(&got, py + (size_t)(bt * m * n + i * n + j) * es, es);
                        const uint64_t want = es == 4 ? (uint64_t)(uint32_t)sum : sum;
                        ck_assert_msg(got == want, "%s %s: Y[%lld, %lld, %lld] is 0x%llx, expected 0x%llx",
                                      pardo_dtype_name(dts[t]), attrs[at] ? attrs[at] : "plain", (long long)bt,
                                      (long long)i, (long long)j, (unsigned long long)got, (unsigned long long)want);
                    }
            pardo_tensor_release(y);
            pardo_tensor_release(in[0]);
            pardo_tensor_release(in[1]);
        }
}
END_TEST

START_TEST(test_matmul_known_values) {
    /* [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]; with A^T: [[26, 30], [38, 44]] */
    int64_t s[] = {2, 2};
    pardo_tensor *in[2] = {test_tensor_from(PARDO_F64, 2, s, (double[]){1, 2, 3, 4}),
                           test_tensor_from(PARDO_F64, 2, s, (double[]){5, 6, 7, 8})},
                 *out = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("matmul", NULL, 2, in, 1, &out, &st), PARDO_OK);
    const double want[] = {19, 22, 43, 50}, want_ta[] = {26, 30, 38, 44};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(out, i), want[i]);
    pardo_tensor_release(out);
    ck_assert_int_eq(test_run_op("matmul", "{\"transpose_a\": true}", 2, in, 1, &out, &st), PARDO_OK);
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(out, i), want_ta[i]);
    pardo_tensor_release(out);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

START_TEST(test_matmul_reused_output) {
    /* a reused output holding old data is fully overwritten (K = 0 gives zeros) */
    int64_t sa[] = {3, 0}, sb[] = {0, 2}, so[] = {3, 2};
    pardo_status st;
    pardo_tensor *in[2] = {pardo_tensor_new_cpu(PARDO_F32, 2, sa, &st), pardo_tensor_new_cpu(PARDO_F32, 2, sb, &st)};
    pardo_tensor *out = pardo_tensor_new_cpu(PARDO_F32, 2, so, &st);
    for (int64_t i = 0; i < out->numel; i++) pardo_tensor_set_f64(out, i, NAN);
    pardo_op op;
    memset(&op, 0, sizeof op);
    op.type = "matmul";
    op.def = pardo_op_lookup("matmul");
    pardo_kernel_ctx ctx = {.op = &op, .n_in = 2, .in = in, .n_out = 1, .out = &out, .st = &st, .nthreads = 1};
    ck_assert_int_eq(op.def->cpu(&ctx), PARDO_OK);
    for (int64_t i = 0; i < out->numel; i++) ck_assert_double_eq(pardo_tensor_get_f64(out, i), 0);
    pardo_tensor_release(out);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

static int infer_mm(const char *attrs, pardo_type a, pardo_type b, pardo_type *y, pardo_status *st) {
    const pardo_type *in[2] = {&a, &b};
    return test_infer_op("matmul", attrs, 2, in, 1, y, st);
}

static void expect_shape(const pardo_type *y, int nd, const int64_t *shape) {
    char a[96], b[96];
    ck_assert_msg(pardo_shape_equal(y->ndim, y->shape, nd, shape), "inferred %s, expected %s",
                  pardo_shape_str(y->ndim, y->shape, a, sizeof a), pardo_shape_str(nd, shape, b, sizeof b));
}

START_TEST(test_matmul_infer) {
    pardo_type y;
    pardo_status st;
    ck_assert_int_eq(
        infer_mm(NULL, test_type(PARDO_F32, 2, (int64_t[]){-1, 4}), test_type(PARDO_F32, 2, (int64_t[]){4, 5}), &y, &st),
        PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    expect_shape(&y, 2, (int64_t[]){-1, 5});
    ck_assert_int_eq(
        infer_mm(NULL, test_type(PARDO_F64, 3, (int64_t[]){-1, 3, 4}), test_type(PARDO_F64, 2, (int64_t[]){4, 5}), &y, &st),
        PARDO_OK);
    expect_shape(&y, 3, (int64_t[]){-1, 3, 5});
    /* an unknown K passes inference (checked at run time) */
    ck_assert_int_eq(
        infer_mm(NULL, test_type(PARDO_F32, 2, (int64_t[]){3, -1}), test_type(PARDO_F32, 2, (int64_t[]){4, 5}), &y, &st),
        PARDO_OK);
    expect_shape(&y, 2, (int64_t[]){3, 5});
    ck_assert_int_eq(infer_mm("{\"transpose_b\": true}", test_type(PARDO_F32, 1, (int64_t[]){4}),
                              test_type(PARDO_F32, 4, (int64_t[]){2, 1, 6, 4}), &y, &st),
                     PARDO_OK);
    expect_shape(&y, 3, (int64_t[]){2, 1, 6});
    ck_assert_int_eq(
        infer_mm(NULL, test_type(PARDO_F32, 1, (int64_t[]){4}), test_type(PARDO_F32, 1, (int64_t[]){4}), &y, &st),
        PARDO_OK);
    ck_assert_int_eq(y.ndim, 0);
    ck_assert_int_eq(infer_mm(NULL, test_type(PARDO_F32, -1, NULL), test_type(PARDO_F32, 2, (int64_t[]){4, 5}), &y, &st),
                     PARDO_OK);
    ck_assert_int_eq(y.ndim, -1);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_err_inner_mismatch) {
    pardo_type y;
    pardo_status st;
    ck_assert_int_eq(
        infer_mm(NULL, test_type(PARDO_F32, 2, (int64_t[]){3, 4}), test_type(PARDO_F32, 2, (int64_t[]){5, 6}), &y, &st),
        PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[3, 4]") && strstr(st.msg, "[5, 6]"), "message: %s", st.msg);
    ck_assert_int_eq(infer_mm("{\"transpose_a\": true}", test_type(PARDO_F32, 2, (int64_t[]){3, 4}),
                              test_type(PARDO_F32, 2, (int64_t[]){4, 6}), &y, &st),
                     PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "transposed") != NULL, "message: %s", st.msg);
    /* at run time, when inference could not tell */
    int64_t sa[] = {2, 3}, sb[] = {4, 2};
    test_rng r = {1};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F32, 2, sa, 0, 1),
                           test_tensor_random(&r, PARDO_F32, 2, sb, 0, 1)};
    pardo_tensor *out = NULL;
    pardo_op op;
    memset(&op, 0, sizeof op);
    op.type = "matmul";
    op.def = pardo_op_lookup("matmul");
    pardo_kernel_ctx ctx = {.op = &op, .n_in = 2, .in = in, .n_out = 1, .out = &out, .st = &st, .nthreads = 1};
    ck_assert_int_eq(op.def->cpu(&ctx), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[2, 3]") && strstr(st.msg, "[4, 2]"), "message: %s", st.msg);
    pardo_tensor_release(out);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

START_TEST(test_err_shapes_and_dtypes) {
    pardo_type y;
    pardo_status st;
    int64_t s2[] = {2, 2};
    ck_assert_int_eq(infer_mm(NULL, test_type(PARDO_BOOL, 2, s2), test_type(PARDO_BOOL, 2, s2), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "bool") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer_mm(NULL, test_type(PARDO_I16, 2, s2), test_type(PARDO_I16, 2, s2), &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(infer_mm(NULL, test_type(PARDO_I32, 2, s2), test_type(PARDO_I64, 2, s2), &y, &st), PARDO_ESHAPE);
    /* the integers take no bias nor activation */
    ck_assert_int_eq(infer_mm("{\"activation\": \"relu\"}", test_type(PARDO_I32, 2, s2), test_type(PARDO_I32, 2, s2),
                              &y, &st),
                     PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "integer") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer_mm(NULL, test_type(PARDO_F32, 2, s2), test_type(PARDO_F64, 2, s2), &y, &st), PARDO_ESHAPE);
    ck_assert_int_eq(infer_mm(NULL, test_type(PARDO_F32, 0, NULL), test_type(PARDO_F32, 2, s2), &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "rank") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer_mm(NULL, test_type(PARDO_F32, 3, (int64_t[]){2, 3, 4}),
                              test_type(PARDO_F32, 3, (int64_t[]){3, 4, 5}), &y, &st),
                     PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "batch") && strstr(st.msg, "[2, 3, 4]") && strstr(st.msg, "[3, 4, 5]"), "message: %s",
                  st.msg);
}
END_TEST

START_TEST(test_err_attrs) {
    pardo_type y;
    pardo_status st;
    int64_t s2[] = {4, 4}, s1[] = {4};
    ck_assert_int_eq(infer_mm("{\"transpose_a\": true}", test_type(PARDO_F32, 1, s1), test_type(PARDO_F32, 2, s2), &y, &st),
                     PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'transpose_a'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(infer_mm("{\"transpose_b\": true}", test_type(PARDO_F32, 2, s2), test_type(PARDO_F32, 1, s1), &y, &st),
                     PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'transpose_b'") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(
        infer_mm("{\"transpose_a\": \"yes\"}", test_type(PARDO_F32, 2, s2), test_type(PARDO_F32, 2, s2), &y, &st),
        PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'transpose_a'") != NULL, "message: %s", st.msg);
}
END_TEST

/* ---- NumPy fixtures ---- */

START_TEST(test_fixtures) {
    static const struct {
        const char *name;
        bool ta, tb;
    } fx[] = {{"matmul_batched", false, false},
              {"matmul_trans", true, true},
              {"matmul_ta", true, false},
              {"matmul_tb", false, true},
              {"matmul_vec", false, false}};
    for (int c = 0; c < LEN(fx); c++) {
        char name[96], attrs[96];
        pardo_tensor *in[2], *want, *out = NULL;
        snprintf(name, sizeof name, "ops/%s_a.npy", fx[c].name);
        in[0] = test_npy_load(name);
        snprintf(name, sizeof name, "ops/%s_b.npy", fx[c].name);
        in[1] = test_npy_load(name);
        snprintf(name, sizeof name, "ops/%s_y.npy", fx[c].name);
        want = test_npy_load(name);
        pardo_status st;
        int rc = test_run_op("matmul", attrs_for(fx[c].ta, fx[c].tb, attrs, sizeof attrs), 2, in, 1, &out, &st);
        ck_assert_msg(rc == PARDO_OK, "%s: %s", fx[c].name, st.msg);
        test_assert_close(out, want, want->dtype == PARDO_F32 ? 1e-5 : 1e-12, 1e-6);
        pardo_tensor_release(out);
        pardo_tensor_release(want);
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
}
END_TEST

/* ---- matmul_grad ---- */

START_TEST(test_matmul_gradients) {
    /* every reference case: 2-D, 1-D promotion, batched, broadcast batch
     * dims (summed back), all four transposes, empty dims */
    for (int c = 0; c < LEN(cases); c++) {
        const mm_case *mc = &cases[c];
        test_rng r = {1300u + (uint64_t)c};
        pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F64, mc->a_nd, mc->a, -1, 1),
                               test_tensor_random(&r, PARDO_F64, mc->b_nd, mc->b, -1, 1)};
        char attrs[96];
        attrs_for(mc->ta, mc->tb, attrs, sizeof attrs);
        test_check_grad_default("matmul", attrs, 2, in, 1, 3u);
        if (c % 4 == 1) { /* one gradient left out */
            test_check_grad_default("matmul", attrs, 2, in, 1, 1u);
            test_check_grad_default("matmul", attrs, 2, in, 1, 2u);
        }
        pardo_tensor_release(in[0]);
        pardo_tensor_release(in[1]);
    }
}
END_TEST

/* matmul with a bias input (an imported Gemm's): dA, dB as without it, and
 * the bias's gradient (add_grad's, dY summed to its shape) against finite
 * differences; [N] along Y's last dim, a [M, 1] column and a scalar bias,
 * plain and transposed B; each gradient alone too. */
START_TEST(test_matmul_bias_gradients) {
    static const struct {
        int bias_nd;
        int64_t bias[2];
        bool tb;
    } bc[] = {{1, {5}, false}, {1, {5}, true}, {2, {3, 1}, false}, {0, {0}, false}};
    for (int c = 0; c < LEN(bc); c++) {
        test_rng r = {1700u + (uint64_t)c};
        int64_t a[] = {3, 4}, b_plain[] = {4, 5}, b_t[] = {5, 4};
        pardo_tensor *in[3] = {test_tensor_random(&r, PARDO_F64, 2, a, -1, 1),
                               test_tensor_random(&r, PARDO_F64, 2, bc[c].tb ? b_t : b_plain, -1, 1),
                               test_tensor_random(&r, PARDO_F64, bc[c].bias_nd, bc[c].bias, -1, 1)};
        const char *attrs = bc[c].tb ? "{\"transpose_b\": true}" : NULL;
        test_check_grad_default("matmul", attrs, 3, in, 1, 7u);
        test_check_grad_default("matmul", attrs, 3, in, 1, 4u);
        test_check_grad_default("matmul", attrs, 3, in, 1, 3u);
        for (int k = 0; k < 3; k++) pardo_tensor_release(in[k]);
    }
}
END_TEST

/* Runs matmul then matmul_grad on a, b with dY = dy (NULL: absent). */
static void run_mm_grad(const char *attrs, pardo_tensor *a, pardo_tensor *b, pardo_tensor *dy, pardo_tensor **out) {
    pardo_tensor *in[2] = {a, b}, *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("matmul", attrs, 2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor *gin[4] = {a, b, y, dy};
    ck_assert_msg(test_run_op("matmul_grad", attrs, 4, gin, 2, out, &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_release(y);
}

static pardo_tensor *to_dtype(pardo_tensor *t, pardo_dtype dt) {
    pardo_status st;
    pardo_tensor *c = pardo_tensor_new_cpu(dt, t->ndim, t->shape, &st);
    ck_assert_ptr_nonnull(c);
    for (int64_t i = 0; i < t->numel; i++) pardo_tensor_set_f64(c, i, pardo_tensor_get_f64(t, i));
    return c;
}

START_TEST(test_matmul_gradient_float32_and_absent_dy) {
    test_rng r = {77};
    int64_t sa[] = {2, 1, 5, 3}, sb[] = {3, 4, 5}, sy[] = {2, 3, 3, 4};
    const char *attrs = "{\"transpose_a\": true, \"transpose_b\": true}";
    pardo_tensor *a = test_tensor_random(&r, PARDO_F64, 4, sa, -1, 1),
                 *b = test_tensor_random(&r, PARDO_F64, 3, sb, -1, 1);
    pardo_tensor *dy = test_tensor_random(&r, PARDO_F64, 4, sy, -1, 1);
    pardo_tensor *a32 = to_dtype(a, PARDO_F32), *b32 = to_dtype(b, PARDO_F32), *dy32 = to_dtype(dy, PARDO_F32);
    pardo_tensor *g64[2], *g32[2];
    run_mm_grad(attrs, a, b, dy, g64);
    run_mm_grad(attrs, a32, b32, dy32, g32);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(g32[k]->dtype, PARDO_F32);
        pardo_tensor *w = to_dtype(g64[k], PARDO_F32);
        test_assert_close(g32[k], w, 1e-5, 1e-5);
        pardo_tensor_release(w);
    }
    for (int k = 0; k < 2; k++) {
        pardo_tensor_release(g64[k]);
        pardo_tensor_release(g32[k]);
    }
    /* dY absent: zeros of A's and B's shapes */
    run_mm_grad(attrs, a, b, NULL, g64);
    ck_assert(pardo_shape_equal(g64[0]->ndim, g64[0]->shape, 4, sa) &&
              pardo_shape_equal(g64[1]->ndim, g64[1]->shape, 3, sb));
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < g64[k]->numel; i++) ck_assert_double_eq(pardo_tensor_get_f64(g64[k], i), 0);
        pardo_tensor_release(g64[k]);
    }
    pardo_tensor_release(a);
    pardo_tensor_release(b);
    pardo_tensor_release(dy);
    pardo_tensor_release(a32);
    pardo_tensor_release(b32);
    pardo_tensor_release(dy32);
}
END_TEST

START_TEST(test_err_matmul_grad) {
    pardo_status st;
    int64_t s2[] = {2, 2};
    pardo_type a = test_type(PARDO_I64, 2, s2), out[2];
    const pardo_type *in[4] = {&a, &a, &a, &a};
    ck_assert_int_eq(test_infer_op("matmul_grad", NULL, 4, in, 2, out, &st), PARDO_ENOTSUP);
    ck_assert_msg(strstr(st.msg, "int64") != NULL, "message: %s", st.msg);
    pardo_type f = test_type(PARDO_F32, 2, s2);
    in[0] = in[1] = in[2] = in[3] = &f;
    ck_assert_int_eq(test_infer_op("matmul_grad", "{\"transpose_a\": 3}", 4, in, 2, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'transpose_a'") != NULL, "message: %s", st.msg);
    /* a dY of another shape than the product is an error at run time */
    test_rng r = {5};
    int64_t s3[] = {3, 2};
    pardo_tensor *t[4] = {
        test_tensor_random(&r, PARDO_F32, 2, s2, -1, 1), test_tensor_random(&r, PARDO_F32, 2, s2, -1, 1),
        test_tensor_random(&r, PARDO_F32, 2, s2, -1, 1), test_tensor_random(&r, PARDO_F32, 2, s3, -1, 1)};
    pardo_tensor *o[2];
    ck_assert_int_eq(test_run_op("matmul_grad", NULL, 4, t, 2, o, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'dY'") && strstr(st.msg, "[3, 2]") && strstr(st.msg, "[2, 2]"), "message: %s",
                  st.msg);
    for (int k = 0; k < 4; k++) pardo_tensor_release(t[k]);
}
END_TEST

Suite *make_ops_matmul_suite(void) {
    Suite *s = suite_create("ops_matmul");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_matmul_reference);
    tcase_add_test(core, test_matmul_known_values);
    tcase_add_test(core, test_matmul_integers);
    tcase_add_test(core, test_matmul_reused_output);
    tcase_add_test(core, test_matmul_infer);
    tcase_add_test(core, test_matmul_gradients);
    tcase_add_test(core, test_matmul_bias_gradients);
    tcase_add_test(core, test_matmul_gradient_float32_and_absent_dy);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_inner_mismatch);
    tcase_add_test(errors, test_err_shapes_and_dtypes);
    tcase_add_test(errors, test_err_attrs);
    tcase_add_test(errors, test_err_matmul_grad);
    suite_add_tcase(s, errors);
    TCase *fixtures = tcase_create("Fixtures");
    tcase_add_test(fixtures, test_fixtures);
    suite_add_tcase(s, fixtures);
    return s;
}
