/* check_ops_conv_transpose.c - conv_transpose and conv_transpose_grad: the
 * forward against a naive gather loop written from ONNX ConvTranspose's
 * definition (1-D, 2-D and 3-D; strides, asymmetric pads, dilations,
 * output_padding, groups, bias), a hand-computed case, the gradients dX, dW
 * and dB against float64 finite differences, inference with run-time dims,
 * and attr and shape errors. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "conv_test_util.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct ct_case {
    int nsp;                        // spatial axes: 1..3
    int64_t xs[5], ws[5];           // X [N, C, S...], W [C, M/group, K...]
    bool bias;
    int64_t s[3], p[6], d[3], op[3]; // strides, pads (begins, ends), dilations, output_padding
    int64_t group;
} ct_case;

static char *ct_attrs(const ct_case *c, char *buf, size_t n) {
    char s[64], p[64], d[64], op[64];
    test_json_ints(s, sizeof s, c->s, c->nsp);
    test_json_ints(p, sizeof p, c->p, 2 * c->nsp);
    test_json_ints(d, sizeof d, c->d, c->nsp);
    test_json_ints(op, sizeof op, c->op, c->nsp);
    snprintf(buf, n,
             "{\"strides\": %s, \"pads\": %s, \"dilations\": %s, \"output_padding\": %s, \"group\": %lld}", s, p, d,
             op, (long long)c->group);
    return buf;
}

/* The output size along spatial axis a. */
static int64_t out_size(const ct_case *c, int a) {
    return c->s[a] * (c->xs[2 + a] - 1) + c->op[a] + (c->ws[2 + a] - 1) * c->d[a] + 1 - c->p[a] - c->p[c->nsp + a];
}

/* Y[n, oc, o] = B[oc] + sum over c of oc's group and taps k of X[n, c, i] *
 * W[c, oc mod M/group, k] where o = i * s - pad_begin + k * d, i.e. i = (o +
 * pad_begin - k * d) / s when that divides and lies in X; gathered per
 * output, in double. Spatial axes padded to 3 with size 1 in front. */
static pardo_tensor *ref_ct(const ct_case *c, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b) {
    const int nsp = c->nsp, o3 = 3 - nsp;
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1},
            pb[3] = {0, 0, 0};
    for (int a = 0; a < nsp; a++) {
        in[o3 + a] = c->xs[2 + a];
        k[o3 + a] = c->ws[2 + a];
        out[o3 + a] = out_size(c, a);
        s[o3 + a] = c->s[a];
        d[o3 + a] = c->d[a];
        pb[o3 + a] = c->p[a];
    }
    const int64_t N = c->xs[0], C = c->xs[1], MG = c->ws[1], M = MG * c->group, CG = C / c->group;
    int64_t ys[5] = {N, M};
    for (int a = 0; a < nsp; a++) ys[2 + a] = out[o3 + a];
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, nsp + 2, ys, &st);
    ck_assert_ptr_nonnull(y);
    int64_t yi = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oc = 0; oc < M; oc++)
            for (int64_t u0 = 0; u0 < out[0]; u0++)
                for (int64_t u1 = 0; u1 < out[1]; u1++)
                    for (int64_t u2 = 0; u2 < out[2]; u2++) {
                        const int64_t u[3] = {u0, u1, u2};
                        double acc = b ? pardo_tensor_get_f64(b, oc) : 0;
                        for (int64_t cg = 0; cg < CG; cg++) {
                            const int64_t ch = (oc / MG) * CG + cg;
                            for (int64_t kk = 0; kk < k[0] * k[1] * k[2]; kk++) {
                                const int64_t kv[3] = {kk / (k[1] * k[2]), kk / k[2] % k[1], kk % k[2]};
                                int64_t iv[3];
                                bool hit = true;
                                for (int a = 0; a < 3 && hit; a++) {
                                    const int64_t t = u[a] + pb[a] - kv[a] * d[a];
                                    hit = t >= 0 && t % s[a] == 0 && t / s[a] < in[a];
                                    iv[a] = hit ? t / s[a] : 0;
                                }
                                if (!hit) continue;
                                acc += pardo_tensor_get_f64(x, ((n * C + ch) * in[0] + iv[0]) * in[1] * in[2] +
                                                                   iv[1] * in[2] + iv[2]) *
                                       pardo_tensor_get_f64(w, (ch * MG + oc % MG) * k[0] * k[1] * k[2] + kk);
                            }
                        }
                        pardo_tensor_set_f64(y, yi++, acc);
                    }
    return y;
}

static const ct_case cases[] = {
    {1, {1, 1, 3}, {1, 2, 3}, false, {1}, {0, 0}, {1}, {0}, 1},                         /* ONNX's 1-D example */
    {1, {2, 4, 5}, {4, 3, 2}, true, {3}, {1, 2}, {2}, {1}, 2},                          /* 1-D, all attrs */
    {2, {1, 1, 3, 3}, {1, 2, 3, 3}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1},      /* ONNX's example */
    {2, {2, 3, 4, 3}, {3, 2, 3, 2}, true, {3, 2}, {1, 0, 2, 1}, {1, 2}, {2, 1}, 1},       /* strides, pads, op */
    {2, {1, 4, 3, 5}, {4, 1, 2, 3}, true, {2, 1}, {0, 1, 1, 0}, {2, 1}, {1, 0}, 4},       /* depthwise */
    {2, {2, 2, 2, 2}, {2, 3, 1, 1}, false, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1},      /* 1x1, stride 2 */
    {2, {1, 2, 3, 3}, {2, 1, 3, 3}, true, {1, 1}, {2, 2, 2, 2}, {1, 1}, {0, 0}, 2},       /* pads eat the border */
    {2, {0, 2, 3, 3}, {2, 2, 2, 2}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1},       /* empty batch */
    {3, {1, 1, 3, 4, 5}, {1, 2, 3, 3, 3}, false, {1, 1, 1}, {0}, {1, 1, 1}, {0, 0, 0}, 1}, /* ONNX's 3-D example */
    {3, {2, 2, 2, 3, 2}, {2, 2, 2, 2, 3}, true, {2, 1, 2}, {1, 0, 0, 0, 1, 1}, {1, 2, 1}, {1, 0, 0}, 2},
};

START_TEST(test_ct_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases); k++)
        for (int t = 0; t < 2; t++) {
            const ct_case *c = &cases[k];
            const int rank = c->nsp + 2;
            test_rng r = {300u + (uint64_t)k * 2 + (uint64_t)t};
            const int64_t m = c->ws[1] * c->group;
            pardo_tensor *in[3] = {test_tensor_random(&r, dts[t], rank, c->xs, -1, 1),
                                   test_tensor_random(&r, dts[t], rank, c->ws, -1, 1),
                                   c->bias ? test_tensor_random(&r, dts[t], 1, &m, -1, 1) : NULL};
            pardo_tensor *y = NULL;
            pardo_status st;
            char attrs[512];
            ck_assert_msg(test_run_op("conv_transpose", ct_attrs(c, attrs, sizeof attrs), 3, in, 1, &y, &st) ==
                              PARDO_OK,
                          "case %d: %s", k, st.msg);
            pardo_tensor *want = ref_ct(c, in[0], in[1], in[2]);
            ck_assert(pardo_shape_equal(y->ndim, y->shape, want->ndim, want->shape));
            test_assert_close(y, want, t ? 1e-5 : 1e-12, t ? 1e-5 : 1e-12);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

START_TEST(test_ct_by_hand) {
    /* X [1, 1, 2] = [1, 2], W [1, 1, 2] = [3, 5], stride 2, no attrs else: Y = [3, 5, 6, 10] (each x times the
     * kernel, placed 2 apart); with output_padding 1 a fifth output of 0 (the bias 0.5 with a bias). */
    pardo_tensor *x = test_tensor_from(PARDO_F64, 3, (int64_t[]){1, 1, 2}, (double[]){1, 2}),
                 *w = test_tensor_from(PARDO_F64, 3, (int64_t[]){1, 1, 2}, (double[]){3, 5}),
                 *b = test_tensor_from(PARDO_F64, 1, (int64_t[]){1}, (double[]){0.5}), *y = NULL;
    pardo_tensor *in[3] = {x, w, b};
    pardo_status st;
    ck_assert_int_eq(test_run_op("conv_transpose", "{\"strides\": [2]}", 2, in, 1, &y, &st), PARDO_OK);
    pardo_tensor *want = test_tensor_from(PARDO_F64, 3, (int64_t[]){1, 1, 4}, (double[]){3, 5, 6, 10});
    test_assert_close(y, want, 0, 0);
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("conv_transpose", "{\"strides\": [2], \"output_padding\": [1]}", 3, in, 1, &y, &st),
                     PARDO_OK);
    want = test_tensor_from(PARDO_F64, 3, (int64_t[]){1, 1, 5}, (double[]){3.5, 5.5, 6.5, 10.5, 0.5});
    test_assert_close(y, want, 0, 0);
    pardo_tensor_release(want);
    pardo_tensor_release(y);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}
END_TEST

static void check_ct_grad(const ct_case *c, uint64_t seed) {
    test_rng r = {seed};
    const int rank = c->nsp + 2;
    const int64_t m = c->ws[1] * c->group;
    pardo_tensor *in[3] = {test_tensor_random(&r, PARDO_F64, rank, c->xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, rank, c->ws, -1, 1),
                           c->bias ? test_tensor_random(&r, PARDO_F64, 1, &m, -1, 1) : NULL};
    char attrs[512];
    test_check_grad_default("conv_transpose", ct_attrs(c, attrs, sizeof attrs), c->bias ? 3 : 2, in, 1,
                            c->bias ? 7u : 3u);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}

START_TEST(test_ct_grad) {
    for (int k = 0; k < LEN(cases); k++) check_ct_grad(&cases[k], 400u + (uint64_t)k);
}
END_TEST

static pardo_tensor *ref_case(const void *ctx, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b) {
    return ref_ct(ctx, x, w, b);
}

/* Shapes big enough for several of the GEMM form's column blocks per image (2-D and 3-D) and for the items over
 * 2 threads: test_conv_blocks_threads's checks. */
START_TEST(test_ct_blocks_threads) {
    static const ct_case big[] = {
        {2, {2, 4, 24, 64}, {4, 8, 5, 5}, true, {2, 2}, {1, 2, 1, 0}, {1, 1}, {1, 0}, 2},
        {1, {2, 8, 3000}, {8, 16, 5}, true, {1}, {2, 2}, {2}, {0}, 1},
        {3, {2, 4, 6, 12, 40}, {4, 8, 3, 3, 3}, true, {2, 1, 2}, {0, 1, 1, 0, 1, 1}, {1, 1, 1}, {1, 0, 1}, 1},
    };
    for (int k = 0; k < LEN(big); k++)
        for (int t = 0; t < 2; t++) {
            char attrs[512];
            const test_conv_op op = {"conv_transpose", "conv_transpose_grad", ct_attrs(&big[k], attrs, sizeof attrs),
                                     big[k].nsp + 2, big[k].xs, big[k].ws, big[k].ws[1] * big[k].group, ref_case,
                                     &big[k]};
            test_conv_blocks_threads(&op, t ? PARDO_F64 : PARDO_F32, 700u + (uint64_t)k * 2 + (uint64_t)t,
                                     t ? 1e-12 : 1e-5, t ? 1e-9 : 2e-4, k);
        }
}
END_TEST

START_TEST(test_ct_grad_absent_dy) {
    /* no dY: every wanted gradient is zeros */
    const ct_case *c = &cases[3];
    test_rng r = {9};
    const int64_t m = c->ws[1] * c->group;
    pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F64, 4, c->xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 4, c->ws, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 1, &m, -1, 1), NULL, NULL};
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    pardo_status st;
    char attrs[512];
    ck_assert_int_eq(test_run_op("conv_transpose_grad", ct_attrs(c, attrs, sizeof attrs), 5, in, 3, out, &st),
                     PARDO_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert(pardo_shape_equal(out[i]->ndim, out[i]->shape, in[i]->ndim, in[i]->shape));
        for (int64_t e = 0; e < out[i]->numel; e++) ck_assert(pardo_tensor_get_f64(out[i], e) == 0);
        pardo_tensor_release(out[i]);
        pardo_tensor_release(in[i]);
    }
}
END_TEST

START_TEST(test_ct_infer) {
    pardo_type y;
    pardo_type x = test_type(PARDO_F32, 4, (int64_t[]){-1, 4, 5, -1}),
               w = test_type(PARDO_F32, 4, (int64_t[]){4, 3, 3, 3});
    const pardo_type *in[2] = {&x, &w};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("conv_transpose", "{\"strides\": [2, 2], \"pads\": [1, 1, 1, 1], \"group\": 2}", 2,
                                   in, 1, &y, &st),
                     PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){-1, 6, 9, -1}));
    /* X's rank unknown: W gives it */
    x = test_type(PARDO_F32, -1, NULL);
    ck_assert_int_eq(test_infer_op("conv_transpose", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){-1, 3, -1, -1}));
}
END_TEST

/* ---- errors ---- */

static void expect_ct_error(const char *attrs, int nd, const int64_t *xs, const int64_t *ws, const int64_t *bs,
                            int code, const char *w1, const char *w2) {
    pardo_type y, x = test_type(PARDO_F32, nd, xs), w = test_type(PARDO_F32, nd, ws), b;
    if (bs) b = test_type(PARDO_F32, 1, bs);
    const pardo_type *in[3] = {&x, &w, bs ? &b : NULL};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("conv_transpose", attrs, 3, in, 1, &y, &st), code);
    ck_assert_msg(strstr(st.msg, w1) != NULL, "message lacks '%s': %s", w1, st.msg);
    ck_assert_msg(!w2 || strstr(st.msg, w2) != NULL, "message lacks '%s': %s", w2, st.msg);
}

START_TEST(test_ct_err) {
    const int64_t xs[] = {1, 4, 5, 5}, ws[] = {4, 2, 3, 3};
    expect_ct_error("{\"strides\": [1, 1, 1]}", 4, xs, ws, NULL, PARDO_EINVAL, "'strides'", "expected 2");
    expect_ct_error("{\"strides\": [0, 1]}", 4, xs, ws, NULL, PARDO_EINVAL, "'strides'", ">= 1");
    expect_ct_error("{\"pads\": [1, 1]}", 4, xs, ws, NULL, PARDO_EINVAL, "'pads'", "expected 4");
    expect_ct_error("{\"pads\": [0, -1, 0, 0]}", 4, xs, ws, NULL, PARDO_EINVAL, "'pads'", ">= 0");
    expect_ct_error("{\"output_padding\": [-1, 0]}", 4, xs, ws, NULL, PARDO_EINVAL, "'output_padding'", NULL);
    expect_ct_error("{\"dilations\": [1, 0]}", 4, xs, ws, NULL, PARDO_EINVAL, "'dilations'", ">= 1");
    expect_ct_error("{\"group\": 0}", 4, xs, ws, NULL, PARDO_EINVAL, "'group'", ">= 1");
    expect_ct_error("{\"group\": 3}", 4, xs, (int64_t[]){4, 1, 3, 3}, NULL, PARDO_EINVAL, "'group'", "4 channels");
    /* W's dim 0 is C; B has M = W's dim 1 * group values */
    expect_ct_error(NULL, 4, xs, (int64_t[]){3, 2, 3, 3}, NULL, PARDO_ESHAPE, "'W'", "C = 4");
    expect_ct_error("{\"group\": 2}", 4, xs, ws, (int64_t[]){2}, PARDO_ESHAPE, "'B'", "M = 4");
    /* pads that leave no output */
    expect_ct_error("{\"pads\": [4, 0, 3, 0]}", 4, xs, ws, NULL, PARDO_ESHAPE, "'pads'", "at least 1");
    /* ranks and dtypes */
    expect_ct_error(NULL, 2, (int64_t[]){1, 4}, (int64_t[]){4, 2}, NULL, PARDO_ESHAPE, "'X'", "rank 2");
    expect_ct_error(NULL, 6, (int64_t[]){1, 1, 2, 2, 2, 2}, (int64_t[]){1, 1, 1, 1, 1, 1}, NULL, PARDO_ESHAPE, "'X'",
                    "3 to 5");
    pardo_type y, x = test_type(PARDO_F32, 4, xs), w3 = test_type(PARDO_F32, 3, (int64_t[]){4, 2, 3}),
                  wd = test_type(PARDO_F64, 4, ws), xi = test_type(PARDO_I32, 4, xs);
    const pardo_type *in[2] = {&x, &w3};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("conv_transpose", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'W'") && strstr(st.msg, "rank 4"), "%s", st.msg);
    in[1] = &wd;
    ck_assert_int_eq(test_infer_op("conv_transpose", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'W'") && strstr(st.msg, "float64"), "%s", st.msg);
    in[0] = &xi;
    ck_assert_int_eq(test_infer_op("conv_transpose", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    /* the gradient op checks dY against the forward's output */
    pardo_type wg = test_type(PARDO_F32, 4, ws), dy = test_type(PARDO_F32, 4, (int64_t[]){1, 2, 7, 6}), out[3];
    const pardo_type *gin[5] = {&x, &wg, NULL, NULL, &dy};
    ck_assert_int_eq(test_infer_op("conv_transpose_grad", NULL, 5, gin, 3, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'dY'") != NULL, "%s", st.msg);
}
END_TEST

START_TEST(test_ct_err_runtime_shapes) {
    /* a run-time shape inference could not see is caught by the kernel: W's dim 0 is not X's C */
    test_rng r = {1};
    pardo_tensor *in[2] = {test_tensor_random(&r, PARDO_F32, 4, (int64_t[]){1, 2, 3, 3}, -1, 1),
                           test_tensor_random(&r, PARDO_F32, 4, (int64_t[]){3, 1, 2, 2}, -1, 1)};
    pardo_tensor *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("conv_transpose", NULL, 2, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'W'") != NULL, "%s", st.msg);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[1]);
}
END_TEST

Suite *make_ops_conv_transpose_suite(void) {
    Suite *s = suite_create("ops_conv_transpose");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_ct_reference);
    tcase_add_test(core, test_ct_by_hand);
    tcase_add_test(core, test_ct_grad);
    tcase_add_test(core, test_ct_grad_absent_dy);
    tcase_add_test(core, test_ct_blocks_threads);
    tcase_add_test(core, test_ct_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_ct_err);
    tcase_add_test(errors, test_ct_err_runtime_shapes);
    suite_add_tcase(s, errors);
    return s;
}
