/* check_ops_conv_nd.c - conv_nd and conv_nd_grad: the forward against a
 * naive walk in double over 1 to 3 spatial axes with strides, pads,
 * dilations, groups and bias, and against conv2d in 2-D; the gradients by
 * finite differences (float64); shapes of several column blocks at 1 and 2
 * threads bit for bit, an image alone as in the batch, dX and dW as the
 * forward's adjoints (tests/conv_test_util.c); no dY; inference and the refusals. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "conv_test_util.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct cn_case {
    int nsp;              // spatial axes: 1..3
    int64_t xs[5], ws[5]; // X [N, C, S...], W [M, C/group, K...]
    bool bias;
    int64_t s[3], p[6], d[3]; // strides, pads (begins, ends), dilations
    int64_t group;
} cn_case;

static char *cn_attrs(const cn_case *c, char *buf, size_t n) {
    char s[64], p[64], d[64];
    test_json_ints(s, sizeof s, c->s, c->nsp);
    test_json_ints(p, sizeof p, c->p, 2 * c->nsp);
    test_json_ints(d, sizeof d, c->d, c->nsp);
    snprintf(buf, n, "{\"strides\": %s, \"pads\": %s, \"dilations\": %s, \"group\": %lld}", s, p, d,
             (long long)c->group);
    return buf;
}

/* The output size along spatial axis a. */
static int64_t out_size(const cn_case *c, int a) {
    return (c->xs[2 + a] + c->p[a] + c->p[c->nsp + a] - ((c->ws[2 + a] - 1) * c->d[a] + 1)) / c->s[a] + 1;
}

/* Y[n, oc, o] = B[oc] + sum over c of oc's group and taps k of X[n, c, o * s - pad_begin + k * d] * W[oc, c, k]
 * (0 outside X), in double. Spatial axes padded to 3 with size 1 in front. */
static pardo_tensor *ref_conv(const cn_case *c, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b) {
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
    const int64_t N = c->xs[0], C = c->xs[1], M = c->ws[0], CG = C / c->group, MG = M / c->group;
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
                                    iv[a] = u[a] * s[a] - pb[a] + kv[a] * d[a];
                                    hit = iv[a] >= 0 && iv[a] < in[a];
                                }
                                if (!hit) continue;
                                acc += pardo_tensor_get_f64(x, ((n * C + ch) * in[0] + iv[0]) * in[1] * in[2] +
                                                                   iv[1] * in[2] + iv[2]) *
                                       pardo_tensor_get_f64(w, (oc * CG + cg) * k[0] * k[1] * k[2] + kk);
                            }
                        }
                        pardo_tensor_set_f64(y, yi++, acc);
                    }
    return y;
}

static const cn_case cases[] = {
    {1, {1, 1, 5}, {1, 1, 3}, false, {1}, {0, 0}, {1}, 1},                                    /* plain 1-D */
    {1, {2, 4, 9}, {6, 2, 3}, true, {2}, {1, 2}, {2}, 2},                                     /* 1-D, all attrs */
    {1, {2, 3, 7}, {3, 1, 2}, true, {1}, {1, 0}, {1}, 3},                                     /* depthwise */
    {2, {2, 3, 6, 5}, {4, 3, 3, 2}, true, {2, 1}, {1, 0, 1, 1}, {1, 2}, 1},                   /* 2-D */
    {2, {1, 4, 5, 5}, {2, 2, 1, 1}, false, {2, 2}, {0, 0, 0, 0}, {1, 1}, 2},                  /* 1x1, stride 2 */
    {2, {0, 2, 4, 4}, {2, 2, 2, 2}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},                   /* empty batch */
    {3, {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, true, {1, 1, 1}, {0, 1, 1, 0, 0, 1}, {1, 1, 1}, 1}, /* 3-D */
    {3, {2, 2, 5, 4, 6}, {2, 1, 2, 2, 3}, true, {2, 1, 2}, {1, 0, 1, 0, 1, 1}, {2, 1, 1}, 2},
};

START_TEST(test_cn_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases); k++)
        for (int t = 0; t < 2; t++) {
            const cn_case *c = &cases[k];
            const int rank = c->nsp + 2;
            test_rng r = {100u + (uint64_t)k * 2 + (uint64_t)t};
            pardo_tensor *in[3] = {test_tensor_random(&r, dts[t], rank, c->xs, -1, 1),
                                   test_tensor_random(&r, dts[t], rank, c->ws, -1, 1),
                                   c->bias ? test_tensor_random(&r, dts[t], 1, &c->ws[0], -1, 1) : NULL};
            pardo_tensor *y = NULL;
            pardo_status st;
            char attrs[512];
            ck_assert_msg(test_run_op("conv_nd", cn_attrs(c, attrs, sizeof attrs), 3, in, 1, &y, &st) == PARDO_OK,
                          "case %d: %s", k, st.msg);
            pardo_tensor *want = ref_conv(c, in[0], in[1], in[2]);
            ck_assert(pardo_shape_equal(y->ndim, y->shape, want->ndim, want->shape));
            test_assert_close(y, want, t ? 1e-5 : 1e-12, t ? 1e-5 : 1e-12);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

/* In 2-D conv_nd computes what conv2d does (the two ops sum in other orders: close, not the same bits). */
START_TEST(test_cn_as_conv2d) {
    const cn_case *c = &cases[3];
    test_rng r = {77};
    pardo_tensor *in[3] = {test_tensor_random(&r, PARDO_F64, 4, c->xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 4, c->ws, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 1, &c->ws[0], -1, 1)};
    pardo_tensor *y = NULL, *y2 = NULL;
    pardo_status st;
    char attrs[512];
    ck_assert(test_run_op("conv_nd", cn_attrs(c, attrs, sizeof attrs), 3, in, 1, &y, &st) == PARDO_OK);
    ck_assert_msg(test_run_op("conv2d", "{\"strides\": [2, 1], \"pads\": [1, 0, 1, 1], \"dilations\": [1, 2]}", 3, in,
                              1, &y2, &st) == PARDO_OK,
                  "%s", st.msg);
    test_assert_close(y, y2, 1e-12, 1e-12);
    pardo_tensor_release(y);
    pardo_tensor_release(y2);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}
END_TEST

START_TEST(test_cn_grad) {
    for (int k = 0; k < LEN(cases); k++) {
        const cn_case *c = &cases[k];
        test_rng r = {200u + (uint64_t)k};
        const int rank = c->nsp + 2;
        pardo_tensor *in[3] = {test_tensor_random(&r, PARDO_F64, rank, c->xs, -1, 1),
                               test_tensor_random(&r, PARDO_F64, rank, c->ws, -1, 1),
                               c->bias ? test_tensor_random(&r, PARDO_F64, 1, &c->ws[0], -1, 1) : NULL};
        char attrs[512];
        test_check_grad_default("conv_nd", cn_attrs(c, attrs, sizeof attrs), c->bias ? 3 : 2, in, 1, c->bias ? 7u : 3u);
        for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
    }
}
END_TEST

START_TEST(test_cn_grad_absent_dy) {
    const cn_case *c = &cases[3];
    test_rng r = {9};
    pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F64, 4, c->xs, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 4, c->ws, -1, 1),
                           test_tensor_random(&r, PARDO_F64, 1, &c->ws[0], -1, 1), NULL, NULL};
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    pardo_status st;
    char attrs[512];
    ck_assert_int_eq(test_run_op("conv_nd_grad", cn_attrs(c, attrs, sizeof attrs), 5, in, 3, out, &st), PARDO_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert(pardo_shape_equal(out[i]->ndim, out[i]->shape, in[i]->ndim, in[i]->shape));
        for (int64_t e = 0; e < out[i]->numel; e++) ck_assert(pardo_tensor_get_f64(out[i], e) == 0);
        pardo_tensor_release(out[i]);
        pardo_tensor_release(in[i]);
    }
}
END_TEST

static pardo_tensor *ref_case(const void *ctx, const pardo_tensor *x, const pardo_tensor *w, const pardo_tensor *b) {
    return ref_conv(ctx, x, w, b);
}

/* Shapes of several column blocks per image (1-D is one position row: one block) big enough for the items over
 * 2 threads: test_conv_blocks_threads's checks. */
START_TEST(test_cn_blocks_threads) {
    static const cn_case big[] = {
        {2, {2, 8, 40, 70}, {8, 4, 5, 5}, true, {1, 1}, {2, 2, 2, 2}, {1, 1}, 2},
        {1, {3, 8, 2000}, {16, 8, 5}, true, {2}, {2, 2}, {1}, 1},
        {3, {2, 6, 8, 12, 40}, {4, 6, 3, 3, 3}, true, {1, 1, 2}, {1, 1, 1, 1, 1, 1}, {1, 2, 1}, 1},
    };
    for (int k = 0; k < LEN(big); k++)
        for (int t = 0; t < 2; t++) {
            char attrs[512];
            const test_conv_op op = {"conv_nd",      "conv_nd_grad", cn_attrs(&big[k], attrs, sizeof attrs),
                                     big[k].nsp + 2, big[k].xs,      big[k].ws,
                                     big[k].ws[0],   ref_case,       &big[k]};
            test_conv_blocks_threads(&op, t ? PARDO_F64 : PARDO_F32, 900u + (uint64_t)k * 2 + (uint64_t)t,
                                     t ? 1e-12 : 2e-5, t ? 1e-9 : 2e-4, k);
        }
}
END_TEST

START_TEST(test_cn_infer) {
    pardo_type y;
    pardo_type x = test_type(PARDO_F32, 3, (int64_t[]){-1, 4, 11}), w = test_type(PARDO_F32, 3, (int64_t[]){6, 2, 3});
    const pardo_type *in[2] = {&x, &w};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("conv_nd", "{\"strides\": [2], \"pads\": [1, 1], \"group\": 2}", 2, in, 1, &y, &st),
                     PARDO_OK);
    ck_assert_int_eq(y.dtype, PARDO_F32);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 3, (int64_t[]){-1, 6, 6}));
    x = test_type(PARDO_F32, -1, NULL); /* X's rank unknown: W gives it */
    ck_assert_int_eq(test_infer_op("conv_nd", NULL, 2, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 3, (int64_t[]){-1, 6, -1}));
}
END_TEST

static void expect_cn_error(const char *attrs, int nd, const int64_t *xs, const int64_t *ws, const int64_t *bs,
                            int code, const char *w1, const char *w2) {
    pardo_type y, x = test_type(PARDO_F32, nd, xs), w = test_type(PARDO_F32, nd, ws), b;
    if (bs) b = test_type(PARDO_F32, 1, bs);
    const pardo_type *in[3] = {&x, &w, bs ? &b : NULL};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("conv_nd", attrs, 3, in, 1, &y, &st), code);
    ck_assert_msg(strstr(st.msg, w1) != NULL, "message lacks '%s': %s", w1, st.msg);
    ck_assert_msg(!w2 || strstr(st.msg, w2) != NULL, "message lacks '%s': %s", w2, st.msg);
}

START_TEST(test_cn_err) {
    const int64_t xs[] = {1, 4, 5, 5, 5}, ws[] = {6, 4, 3, 3, 3};
    expect_cn_error("{\"strides\": [1, 1]}", 5, xs, ws, NULL, PARDO_EINVAL, "'strides'", "expected 3");
    expect_cn_error("{\"strides\": [1, 0, 1]}", 5, xs, ws, NULL, PARDO_EINVAL, "'strides'", ">= 1");
    expect_cn_error("{\"pads\": [1, 1, 1]}", 5, xs, ws, NULL, PARDO_EINVAL, "'pads'", "expected 6");
    expect_cn_error("{\"pads\": [0, 0, 0, 0, -1, 0]}", 5, xs, ws, NULL, PARDO_EINVAL, "'pads'", ">= 0");
    expect_cn_error("{\"dilations\": [1, 0, 1]}", 5, xs, ws, NULL, PARDO_EINVAL, "'dilations'", ">= 1");
    expect_cn_error("{\"group\": 0}", 5, xs, ws, NULL, PARDO_EINVAL, "'group'", ">= 1");
    expect_cn_error("{\"group\": 3}", 5, xs, (int64_t[]){6, 1, 3, 3, 3}, NULL, PARDO_EINVAL, "'group'", "4 channels");
    expect_cn_error("{\"group\": 2}", 5, xs, (int64_t[]){5, 2, 3, 3, 3}, NULL, PARDO_EINVAL, "'group'",
                    "5 output channels");
    /* W's dim 1 is C/group; B has M values */
    expect_cn_error(NULL, 5, xs, (int64_t[]){6, 3, 3, 3, 3}, NULL, PARDO_ESHAPE, "'W'", "C/group = 4");
    expect_cn_error(NULL, 5, xs, ws, (int64_t[]){5}, PARDO_ESHAPE, "'B'", "M = 6");
    /* a kernel longer than the padded input */
    expect_cn_error("{\"dilations\": [3, 1, 1]}", 5, xs, ws, NULL, PARDO_ESHAPE, "spatial axis 0", "span");
    /* ranks and dtypes */
    expect_cn_error(NULL, 2, (int64_t[]){1, 4}, (int64_t[]){4, 2}, NULL, PARDO_ESHAPE, "'X'", "rank 2");
    expect_cn_error(NULL, 6, (int64_t[]){1, 1, 2, 2, 2, 2}, (int64_t[]){1, 1, 1, 1, 1, 1}, NULL, PARDO_ESHAPE, "'X'",
                    "3 to 5");
    pardo_type y, x = test_type(PARDO_F32, 3, xs), w4 = test_type(PARDO_F32, 4, ws), wd = test_type(PARDO_F64, 3, ws),
                  xi = test_type(PARDO_I32, 3, xs);
    pardo_status st;
    const pardo_type *a[2] = {&x, &w4};
    ck_assert_int_eq(test_infer_op("conv_nd", NULL, 2, a, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'W'") && strstr(st.msg, "rank 3"), "%s", st.msg);
    const pardo_type *bb[2] = {&x, &wd};
    ck_assert_int_eq(test_infer_op("conv_nd", NULL, 2, bb, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float64"), "%s", st.msg);
    const pardo_type *cc[2] = {&xi, &w4};
    ck_assert_int_eq(test_infer_op("conv_nd", NULL, 2, cc, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "int32"), "%s", st.msg);
}
END_TEST

/* The kernels check the run-time shapes too: a dY of another shape than Y's is refused. */
START_TEST(test_cn_err_runtime) {
    const cn_case *c = &cases[1];
    test_rng r = {5};
    int64_t bad[3] = {2, 6, 3};
    pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F32, 3, c->xs, -1, 1),
                           test_tensor_random(&r, PARDO_F32, 3, c->ws, -1, 1), NULL, NULL,
                           test_tensor_random(&r, PARDO_F32, 3, bad, -1, 1)};
    pardo_tensor *out[3] = {NULL, NULL, NULL};
    pardo_status st;
    char attrs[512];
    ck_assert_int_eq(test_run_op("conv_nd_grad", cn_attrs(c, attrs, sizeof attrs), 5, in, 3, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'dY'"), "%s", st.msg);
    for (int i = 0; i < 5; i++) pardo_tensor_release(in[i]);
}
END_TEST

Suite *make_ops_conv_nd_suite(void) {
    Suite *s = suite_create("ops_conv_nd");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_cn_reference);
    tcase_add_test(core, test_cn_as_conv2d);
    tcase_add_test(core, test_cn_grad);
    tcase_add_test(core, test_cn_grad_absent_dy);
    tcase_add_test(core, test_cn_blocks_threads);
    tcase_add_test(core, test_cn_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_cn_err);
    tcase_add_test(errors, test_cn_err_runtime);
    suite_add_tcase(s, errors);
    return s;
}
