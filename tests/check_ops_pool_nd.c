/* check_ops_pool_nd.c - max_pool_nd and avg_pool_nd: the forward (and
 * max_pool_nd's Indices, both storage orders) against a naive loop over a
 * -inf / NaN-marked padded copy of the input written from ONNX's MaxPool and
 * AveragePool (1-D, 2-D, 3-D; strides, asymmetric pads, dilations), a
 * hand-computed case, the gradients against float64 finite differences,
 * inference, and attr and shape errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct pn_case {
    int nsp;                           // spatial axes
    int64_t xs[5];                     // X [N, C, S...]
    int64_t k[3], s[3], p[6], d[3];    // kernel, strides, pads (begins, ends), dilations
} pn_case;

static void list(char *buf, size_t n, const int64_t *v, int k) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < k; i++) at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)v[i]);
    snprintf(buf + at, n - at, "]");
}

static char *pn_attrs(const pn_case *c, int order, char *buf, size_t n) {
    char k[64], s[64], p[64], d[64];
    list(k, sizeof k, c->k, c->nsp);
    list(s, sizeof s, c->s, c->nsp);
    list(p, sizeof p, c->p, 2 * c->nsp);
    list(d, sizeof d, c->d, c->nsp);
    if (order < 0) snprintf(buf, n, "{\"kernel\": %s, \"strides\": %s, \"pads\": %s, \"dilations\": %s}", k, s, p, d);
    else
        snprintf(buf, n, "{\"kernel\": %s, \"strides\": %s, \"pads\": %s, \"dilations\": %s, \"storage_order\": %d}", k,
                 s, p, d, order);
    return buf;
}

/* The reference: X copied into a padded plane (padding marked NaN), each
 * output's taps read from it in row-major tap order, the padding skipped;
 * max keeps the first strict maximum and its flat index into X (spatial
 * part row-major, or column-major for order 1); avg the mean of the read
 * elements. Spatial axes padded to 3 in front. y: Y, ix: Indices (as
 * doubles), or NULL. */
static void ref_pool(const pn_case *c, const pardo_tensor *x, bool max, int order, pardo_tensor **y,
                     pardo_tensor **ix) {
    const int nsp = c->nsp, o3 = 3 - nsp;
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0}, pe[3] = {0},
            out[3], pd[3];
    for (int a = 0; a < nsp; a++) {
        in[o3 + a] = c->xs[2 + a];
        k[o3 + a] = c->k[a];
        s[o3 + a] = c->s[a];
        d[o3 + a] = c->d[a];
        pb[o3 + a] = c->p[a];
        pe[o3 + a] = c->p[nsp + a];
    }
    for (int a = 0; a < 3; a++) {
        pd[a] = in[a] + pb[a] + pe[a];
        out[a] = (pd[a] - ((k[a] - 1) * d[a] + 1)) / s[a] + 1;
    }
    const int64_t planes = c->xs[0] * c->xs[1], ip = in[0] * in[1] * in[2];
    int64_t ys[5] = {c->xs[0], c->xs[1]};
    for (int a = 0; a < nsp; a++) ys[2 + a] = out[o3 + a];
    pardo_status st;
    *y = pardo_tensor_new_cpu(x->dtype, nsp + 2, ys, &st);
    ck_assert_ptr_nonnull(*y);
    if (ix) *ix = pardo_tensor_new_cpu(PARDO_F64, nsp + 2, ys, &st);
    double padded[4096];
    int64_t where[4096];
    ck_assert(pd[0] * pd[1] * pd[2] <= 4096);
    int64_t e = 0;
    for (int64_t pl = 0; pl < planes; pl++) {
        for (int64_t q = 0; q < pd[0] * pd[1] * pd[2]; q++) {
            const int64_t q0 = q / (pd[1] * pd[2]) - pb[0], q1 = q / pd[2] % pd[1] - pb[1], q2 = q % pd[2] - pb[2];
            const bool inside = q0 >= 0 && q0 < in[0] && q1 >= 0 && q1 < in[1] && q2 >= 0 && q2 < in[2];
            const int64_t flat = inside ? (q0 * in[1] + q1) * in[2] + q2 : -1;
            padded[q] = inside ? pardo_tensor_get_f64(x, pl * ip + flat) : (double)NAN;
            where[q] = !inside ? -1 : order ? (q2 * in[1] + q1) * in[0] + q0 : flat;
        }
        for (int64_t u = 0; u < out[0] * out[1] * out[2]; u++, e++) {
            const int64_t u0 = u / (out[1] * out[2]), u1 = u / out[2] % out[1], u2 = u % out[2];
            double best = -INFINITY, sum = 0;
            int64_t at = -1, count = 0;
            for (int64_t j = 0; j < k[0] * k[1] * k[2]; j++) {
                const int64_t j0 = j / (k[1] * k[2]), j1 = j / k[2] % k[1], j2 = j % k[2];
                const int64_t q = ((u0 * s[0] + j0 * d[0]) * pd[1] + u1 * s[1] + j1 * d[1]) * pd[2] + u2 * s[2] +
                                  j2 * d[2];
                if (where[q] < 0) continue;
                count++;
                sum += padded[q];
                if (at < 0 || padded[q] > best) {
                    best = padded[q];
                    at = where[q];
                }
            }
            ck_assert(count > 0);
            pardo_tensor_set_f64(*y, e, max ? best : sum / (double)count);
            if (ix) pardo_tensor_set_f64(*ix, e, (double)(pl * ip + at));
        }
    }
}

static const pn_case cases[] = {
    {1, {2, 2, 9}, {3}, {2}, {1, 2}, {2}},
    {2, {1, 1, 4, 4}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {2, 2}}, /* ONNX's maxpool_2d_dilations */
    {2, {1, 1, 5, 5}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}}, /* ONNX's argmax precomputed pads */
    {2, {2, 3, 7, 6}, {3, 2}, {2, 1}, {1, 0, 2, 1}, {2, 3}},
    {2, {1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}}, /* drops the last row and column */
    {3, {1, 2, 4, 5, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}},
    {3, {2, 1, 5, 4, 6}, {2, 3, 2}, {2, 1, 3}, {1, 1, 0, 0, 1, 1}, {2, 1, 2}},
    {1, {2, 3, 700}, {3}, {1}, {1, 1}, {1}},                       /* rows of several chunks, stride 1 */
    {2, {1, 2, 6, 300}, {3, 4}, {2, 1}, {1, 2, 1, 1}, {1, 2}},      /* two chunks, dilated */
    {2, {1, 1, 3, 600}, {2, 3}, {1, 2}, {0, 1, 1, 2}, {2, 1}},      /* two chunks, stride 2 */
};

/* max_pool_nd of x (case c, storage_order order) gives the naive walk's Y, in X's dtype, and Indices exactly. */
static void expect_max_as_ref(const pn_case *c, pardo_tensor *x, int order, int k) {
    pardo_tensor *out[2] = {NULL, NULL}, *want, *want_ix;
    pardo_status st;
    char attrs[512];
    ck_assert_msg(test_run_op("max_pool_nd", pn_attrs(c, order, attrs, sizeof attrs), 1, &x, 2, out, &st) == PARDO_OK,
                  "%s case %d: %s", pardo_dtype_name(x->dtype), k, st.msg);
    ref_pool(c, x, true, order, &want, &want_ix);
    ck_assert(pardo_shape_equal(out[0]->ndim, out[0]->shape, want->ndim, want->shape));
    ck_assert_int_eq(out[0]->dtype, x->dtype);
    ck_assert_int_eq(out[1]->dtype, PARDO_I64);
    test_assert_close(out[0], want, 0, 0);
    for (int64_t e = 0; e < want_ix->numel; e++)
        ck_assert_int_eq(((const int64_t *)pardo_tensor_data(out[1]))[e], (int64_t)pardo_tensor_get_f64(want_ix, e));
    pardo_tensor_release(want);
    pardo_tensor_release(want_ix);
    pardo_tensor_release(out[0]);
    pardo_tensor_release(out[1]);
}

START_TEST(test_pool_nd_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases); k++)
        for (int t = 0; t < 2; t++)
            for (int order = 0; order < 2; order++) {
                const pn_case *c = &cases[k];
                test_rng r = {500u + (uint64_t)k * 4 + (uint64_t)t * 2 + (uint64_t)order};
                pardo_tensor *x = test_tensor_random(&r, dts[t], c->nsp + 2, c->xs, -1, 1), *out[1] = {NULL},
                             *want;
                pardo_status st;
                char attrs[512];
                expect_max_as_ref(c, x, order, k);
                ck_assert_int_eq(test_run_op("avg_pool_nd", pn_attrs(c, -1, attrs, sizeof attrs), 1, &x, 1, out, &st),
                                 PARDO_OK);
                ref_pool(c, x, false, 0, &want, NULL);
                test_assert_close(out[0], want, t ? 1e-6 : 1e-14, t ? 1e-6 : 1e-14);
                pardo_tensor_release(want);
                pardo_tensor_release(out[0]);
                pardo_tensor_release(x);
            }
}
END_TEST

/* max_pool_nd's forward on every numeric dtype, 1 to 3 spatial axes with
 * dilations and pads, against the naive walk above (exact: the values are
 * small integers, or the floats float16 holds); ties are common, and the
 * Indices name the first maximum. */
START_TEST(test_pool_nd_max_every_dtype) {
    static const pardo_dtype dts[] = {PARDO_I8,  PARDO_I16, PARDO_I32, PARDO_I64, PARDO_U8,
                                      PARDO_U16, PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
    for (int t = 0; t < LEN(dts); t++)
        for (int k = 0; k < LEN(cases); k++) {
            const pn_case *c = &cases[k];
            test_rng r = {700u + (uint64_t)(t * LEN(cases) + k)};
            const bool unsigned_dt = dts[t] == PARDO_U8 || dts[t] == PARDO_U16 || dts[t] == PARDO_U32 ||
                                     dts[t] == PARDO_U64;
            pardo_tensor *x = test_tensor_random(&r, dts[t], c->nsp + 2, c->xs, unsigned_dt ? 0 : -20, 20);
            expect_max_as_ref(c, x, k % 2, k);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_pool_nd_by_hand) {
    /* X [1, 1, 2, 3] = [[1, 6, 2], [5, 3, 4]], kernel [2, 2], strides [1, 1]: maxima 6 and 6 at row-major index 1,
     * column-major index 2 (w * H + h = 1 * 2 + 0); averages 15 / 4 both */
    pardo_tensor *x = test_tensor_from(PARDO_F64, 4, (int64_t[]){1, 1, 2, 3}, (double[]){1, 6, 2, 5, 3, 4}),
                 *out[2] = {NULL, NULL};
    pardo_status st;
    ck_assert_int_eq(test_run_op("max_pool_nd", "{\"kernel\": [2, 2], \"strides\": [1, 1], \"storage_order\": 1}", 1,
                                 &x, 2, out, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(out[0]->ndim, out[0]->shape, 4, (int64_t[]){1, 1, 1, 2}));
    ck_assert(pardo_tensor_get_f64(out[0], 0) == 6 && pardo_tensor_get_f64(out[0], 1) == 6);
    ck_assert_int_eq(((const int64_t *)pardo_tensor_data(out[1]))[0], 2);
    ck_assert_int_eq(((const int64_t *)pardo_tensor_data(out[1]))[1], 2);
    pardo_tensor_release(out[0]);
    pardo_tensor_release(out[1]);
    ck_assert_int_eq(test_run_op("avg_pool_nd", "{\"kernel\": [2, 2], \"strides\": [1, 1]}", 1, &x, 1, out, &st),
                     PARDO_OK);
    ck_assert(pardo_tensor_get_f64(out[0], 0) == 3.75 && pardo_tensor_get_f64(out[0], 1) == 3.75);
    pardo_tensor_release(out[0]);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_pool_nd_grad) {
    for (int k = 0; k < LEN(cases); k++) {
        const pn_case *c = &cases[k];
        test_rng r = {600u + (uint64_t)k};
        pardo_tensor *x = test_tensor_random(&r, PARDO_F64, c->nsp + 2, c->xs, -1, 1);
        char attrs[512];
        test_check_grad_default("max_pool_nd", pn_attrs(c, 0, attrs, sizeof attrs), 1, &x, 1, 1u);
        test_check_grad_default("max_pool_nd", pn_attrs(c, 0, attrs, sizeof attrs), 1, &x, 2, 1u);
        test_check_grad_default("avg_pool_nd", pn_attrs(c, -1, attrs, sizeof attrs), 1, &x, 1, 1u);
        pardo_tensor_release(x);
    }
}
END_TEST

START_TEST(test_pool_nd_grad_absent_dy) {
    test_rng r = {3};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 4, (int64_t[]){1, 2, 4, 4}, -1, 1), *dx = NULL;
    pardo_tensor *in[5] = {x, NULL, NULL, NULL, NULL};
    pardo_status st;
    ck_assert_int_eq(test_run_op("max_pool_nd_grad", "{\"kernel\": [2, 2]}", 5, in, 1, &dx, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(dx->ndim, dx->shape, x->ndim, x->shape));
    for (int64_t e = 0; e < dx->numel; e++) ck_assert(pardo_tensor_get_f64(dx, e) == 0);
    pardo_tensor_release(dx);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_pool_nd_infer) {
    pardo_type x = test_type(PARDO_F32, 5, (int64_t[]){-1, 3, 32, -1, 8}), out[2];
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("max_pool_nd", "{\"kernel\": [2, 2, 3], \"strides\": [1, 1, 1]}", 1, in, 2, out,
                                   &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(out[0].ndim, out[0].shape, 5, (int64_t[]){-1, 3, 31, -1, 6}));
    ck_assert_int_eq(out[1].dtype, PARDO_I64);
    ck_assert(pardo_shape_equal(out[1].ndim, out[1].shape, 5, (int64_t[]){-1, 3, 31, -1, 6}));
    /* strides default to the kernel */
    ck_assert_int_eq(test_infer_op("avg_pool_nd", "{\"kernel\": [2, 2, 3]}", 1, in, 1, out, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(out[0].ndim, out[0].shape, 5, (int64_t[]){-1, 3, 16, -1, 2}));
}
END_TEST

/* ---- errors ---- */

static void expect_pn_error(const char *type, const char *attrs, int nd, const int64_t *xs, int code, const char *w1,
                            const char *w2) {
    pardo_type x = test_type(PARDO_F32, nd, xs), out[2];
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op(type, attrs, 1, in, 1, out, &st), code);
    ck_assert_msg(strstr(st.msg, w1) != NULL, "message lacks '%s': %s", w1, st.msg);
    ck_assert_msg(!w2 || strstr(st.msg, w2) != NULL, "message lacks '%s': %s", w2, st.msg);
}

START_TEST(test_pool_nd_err) {
    const int64_t xs[] = {1, 2, 6, 6};
    expect_pn_error("max_pool_nd", NULL, 4, xs, PARDO_EINVAL, "'kernel'", "required");
    expect_pn_error("max_pool_nd", "{\"kernel\": [2, 2, 2, 2]}", 4, xs, PARDO_EINVAL, "'kernel'", "1 to 3");
    expect_pn_error("max_pool_nd", "{\"kernel\": [2, 0]}", 4, xs, PARDO_EINVAL, "'kernel'", ">= 1");
    expect_pn_error("max_pool_nd", "{\"kernel\": [2]}", 4, xs, PARDO_ESHAPE, "'X'", "rank 3");
    expect_pn_error("avg_pool_nd", "{\"kernel\": [2, 2], \"strides\": [1]}", 4, xs, PARDO_EINVAL, "'strides'",
                    "expected 2");
    expect_pn_error("avg_pool_nd", "{\"kernel\": [2, 2], \"pads\": [1, 1, 1, -1]}", 4, xs, PARDO_EINVAL, "'pads'",
                    ">= 0");
    expect_pn_error("max_pool_nd", "{\"kernel\": [2, 2], \"dilations\": [0, 1]}", 4, xs, PARDO_EINVAL, "'dilations'",
                    ">= 1");
    expect_pn_error("max_pool_nd", "{\"kernel\": [2, 2], \"storage_order\": 2}", 4, xs, PARDO_EINVAL,
                    "'storage_order'", "0 or 1");
    expect_pn_error("max_pool_nd", "{\"kernel\": [4, 2], \"dilations\": [2, 1]}", 4, xs, PARDO_ESHAPE, "spans 7", NULL);
    /* a window of padding alone: kernel 2 with dilation 3 and a begin pad of 2 reads -2 and 1; pad 3 reads -3, 0;
     * with strides 1 and pad 4 on a size-6 axis the first window reads -4 and -1 */
    expect_pn_error("max_pool_nd", "{\"kernel\": [2, 1], \"strides\": [1, 1], \"dilations\": [3, 1], "
                                   "\"pads\": [4, 0, 0, 0]}",
                    4, xs, PARDO_EINVAL, "only padding", NULL);
    pardo_type xi = test_type(PARDO_I32, 4, xs), out[2];
    const pardo_type *in[1] = {&xi};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("avg_pool_nd", "{\"kernel\": [2, 2]}", 1, in, 1, out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("max_pool_nd", "{\"kernel\": [2, 2]}", 1, in, 2, out, &st), PARDO_OK);
    xi = test_type(PARDO_BOOL, 4, xs); /* not ordered */
    ck_assert_int_eq(test_infer_op("max_pool_nd", "{\"kernel\": [2, 2]}", 1, in, 2, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "bool") != NULL, "%s", st.msg);
    /* the gradient's dY must be the forward output's shape */
    pardo_type x = test_type(PARDO_F32, 4, xs), dy = test_type(PARDO_F32, 4, (int64_t[]){1, 2, 2, 2});
    const pardo_type *gin[5] = {&x, NULL, NULL, &dy, NULL};
    ck_assert_int_eq(test_infer_op("max_pool_nd_grad", "{\"kernel\": [2, 2]}", 5, gin, 1, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "'dY'") != NULL, "%s", st.msg);
}
END_TEST

Suite *make_ops_pool_nd_suite(void) {
    Suite *s = suite_create("ops_pool_nd");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_pool_nd_reference);
    tcase_add_test(core, test_pool_nd_by_hand);
    tcase_add_test(core, test_pool_nd_max_every_dtype);
    tcase_add_test(core, test_pool_nd_grad);
    tcase_add_test(core, test_pool_nd_grad_absent_dy);
    tcase_add_test(core, test_pool_nd_infer);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_pool_nd_err);
    suite_add_tcase(s, errors);
    return s;
}
