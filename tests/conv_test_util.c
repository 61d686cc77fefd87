/* conv_test_util.c - see conv_test_util.h. */
#include "conv_test_util.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_test_util.h"
#include "test_util.h"

void test_json_ints(char *buf, size_t n, const int64_t *v, int k) {
    size_t at = 0;
    at += (size_t)snprintf(buf + at, n - at, "[");
    for (int i = 0; i < k; i++) at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)v[i]);
    snprintf(buf + at, n - at, "]");
}

/* sum of a[i] * b[i] in double (a and b of one shape) */
static double dot(const pardo_tensor *a, const pardo_tensor *b) {
    ck_assert_int_eq(a->numel, b->numel);
    double s = 0;
    for (int64_t e = 0; e < a->numel; e++) s += pardo_tensor_get_f64(a, e) * pardo_tensor_get_f64(b, e);
    return s;
}

static void expect_same_bits(const pardo_tensor *a, const pardo_tensor *b, const char *what, int k) {
    ck_assert_msg(a->nbytes == b->nbytes && memcmp(pardo_tensor_data(a), pardo_tensor_data(b), a->nbytes) == 0,
                  "case %d: %s", k, what);
}

void test_conv_blocks_threads(const test_conv_op *c, pardo_dtype dt, uint64_t seed, double tol, double adj_tol, int k) {
    test_rng r = {seed};
    pardo_tensor *x = test_tensor_random(&r, dt, c->rank, c->xs, -1, 1),
                 *w = test_tensor_random(&r, dt, c->rank, c->ws, -1, 1),
                 *b = test_tensor_random(&r, dt, 1, &c->m, -1, 1);
    pardo_status st;
    test_pool_size(2);
    pardo_tensor *y[2] = {NULL, NULL}, *g[2][3] = {{NULL}};
    for (int th = 0; th < 2; th++) {
        pardo_tensor *in[3] = {x, w, b};
        ck_assert_msg(test_run_op_threads(c->op, c->attrs, 3, in, 1, &y[th], th + 1, &st) == PARDO_OK, "case %d: %s", k,
                      st.msg);
    }
    expect_same_bits(y[0], y[1], "the forward at 2 threads differs from 1", k);
    pardo_tensor *want = c->ref(c->ctx, x, w, b);
    test_assert_close(y[0], want, tol, tol);
    pardo_tensor_release(want);
    /* the last image alone */
    int64_t xs1[PARDO_MAX_DIMS];
    memcpy(xs1, c->xs, sizeof(int64_t) * (size_t)c->rank);
    xs1[0] = 1;
    pardo_tensor *x1 = pardo_tensor_new_cpu(dt, c->rank, xs1, &st), *y1 = NULL;
    ck_assert_ptr_nonnull(x1);
    memcpy(pardo_tensor_data(x1), (char *)pardo_tensor_data(x) + (x->nbytes - x1->nbytes), x1->nbytes);
    pardo_tensor *in1[3] = {x1, w, b};
    ck_assert(test_run_op_threads(c->op, c->attrs, 3, in1, 1, &y1, 2, &st) == PARDO_OK);
    ck_assert_msg(
        memcmp(pardo_tensor_data(y1), (char *)pardo_tensor_data(y[0]) + (y[0]->nbytes - y1->nbytes), y1->nbytes) == 0,
        "case %d: an image alone differs from it in the batch", k);
    /* the gradients at 1 and 2 threads */
    pardo_tensor *dy = test_tensor_random(&r, dt, y[0]->ndim, y[0]->shape, -1, 1);
    for (int th = 0; th < 2; th++) {
        pardo_tensor *gin[5] = {x, w, b, NULL, dy};
        ck_assert_msg(test_run_op_threads(c->grad_op, c->attrs, 5, gin, 3, g[th], th + 1, &st) == PARDO_OK,
                      "case %d: %s", k, st.msg);
    }
    for (int o = 0; o < 3; o++) expect_same_bits(g[0][o], g[1][o], "a gradient at 2 threads differs from 1", k);
    /* the adjoints */
    pardo_tensor *x2 = test_tensor_random(&r, dt, c->rank, c->xs, -1, 1),
                 *w2 = test_tensor_random(&r, dt, c->rank, c->ws, -1, 1), *yx = NULL, *yw = NULL;
    pardo_tensor *inx[2] = {x2, w}, *inw[2] = {x, w2};
    ck_assert(test_run_op(c->op, c->attrs, 2, inx, 1, &yx, &st) == PARDO_OK);
    ck_assert(test_run_op(c->op, c->attrs, 2, inw, 1, &yw, &st) == PARDO_OK);
    const double ax = dot(g[0][0], x2), bx = dot(dy, yx), aw = dot(g[0][1], w2), bw = dot(dy, yw);
    ck_assert_msg(fabs(ax - bx) <= adj_tol * (fabs(bx) + 1), "case %d: <dX, X'> %.10g, <dY, Y(X')> %.10g", k, ax, bx);
    ck_assert_msg(fabs(aw - bw) <= adj_tol * (fabs(bw) + 1), "case %d: <dW, W'> %.10g, <dY, Y(W')> %.10g", k, aw, bw);
    /* dB: the sums of dY's planes */
    const int64_t per = dy->numel / (dy->shape[0] * c->m);
    for (int64_t oc = 0; oc < c->m; oc++) {
        double s = 0;
        for (int64_t n = 0; n < dy->shape[0]; n++)
            for (int64_t e = 0; e < per; e++) s += pardo_tensor_get_f64(dy, (n * c->m + oc) * per + e);
        ck_assert_double_eq_tol(pardo_tensor_get_f64(g[0][2], oc), s, (dt == PARDO_F32 ? 1e-6 : 1e-12) * (fabs(s) + 1));
    }
    pardo_tensor *all[] = {x,  w,  b,  y[0],    y[1],    x1,      y1,      dy,      x2,
                           w2, yx, yw, g[0][0], g[0][1], g[0][2], g[1][0], g[1][1], g[1][2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pardo_tensor_release(all[i]);
}
