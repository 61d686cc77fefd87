/* check_ops_pool.c - max_pool2d and avg_pool2d with their gradients: the
 * forward against naive loops over each window clipped to the input
 * (count_include_pad = 0 for avg; first maximum for max), the gradients
 * against finite differences, hand-made routing and naive loops (the
 * vectorised 2x2 windows on odd sizes, NaN, ties, outputs holding old data,
 * and 1 and 2 threads giving the same bits), PyTorch fixtures, inference,
 * and attr errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/value_json.h"
#include "exec/thread_pool.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct pool_case {
    int64_t xs[4];      // X [N, C, H, W]
    int64_t k[2], s[2]; // kernel, strides
    int64_t pads[4];    // top, left, bottom, right
} pool_case;

static char *pool_attrs(const pool_case *c, char *buf, size_t n) {
    snprintf(buf, n, "{\"kernel\": [%lld, %lld], \"strides\": [%lld, %lld], \"pads\": [%lld, %lld, %lld, %lld]}",
             (long long)c->k[0], (long long)c->k[1], (long long)c->s[0], (long long)c->s[1], (long long)c->pads[0],
             (long long)c->pads[1], (long long)c->pads[2], (long long)c->pads[3]);
    return buf;
}

/* Max (first maximum, row-major) or mean of the in-input elements of each window, in double. */
static pardo_tensor *ref_pool(const pool_case *c, const pardo_tensor *x, bool max) {
    const int64_t N = c->xs[0], C = c->xs[1], H = c->xs[2], W = c->xs[3];
    const int64_t OH = (H + c->pads[0] + c->pads[2] - c->k[0]) / c->s[0] + 1;
    const int64_t OW = (W + c->pads[1] + c->pads[3] - c->k[1]) / c->s[1] + 1;
    int64_t ys[4] = {N, C, OH, OW};
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, 4, ys, &st);
    ck_assert_ptr_nonnull(y);
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double best = -INFINITY, sum = 0;
                int count = 0;
                for (int64_t kh = 0; kh < c->k[0]; kh++)
                    for (int64_t kw = 0; kw < c->k[1]; kw++) {
                        int64_t ih = oh * c->s[0] - c->pads[0] + kh, iw = ow * c->s[1] - c->pads[1] + kw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        double v = pardo_tensor_get_f64(x, (p * H + ih) * W + iw);
                        best = fmax(best, v);
                        sum += v;
                        count++;
                    }
                ck_assert_int_gt(count, 0);
                pardo_tensor_set_f64(y, (p * OH + oh) * OW + ow, max ? best : sum / count);
            }
    return y;
}

static const pool_case cases[] = {
    {{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}}, {{2, 3, 7, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
    {{2, 2, 5, 7}, {2, 3}, {1, 2}, {1, 0, 0, 2}}, /* asymmetric pads */
    {{1, 3, 1, 9}, {1, 3}, {1, 3}, {0, 1, 0, 1}}, /* height 1 */
    {{3, 1, 5, 5}, {5, 5}, {1, 1}, {0, 0, 0, 0}}, /* window = input */
    {{0, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}}, /* empty batch */
    {{1, 2, 6, 5}, {3, 2}, {3, 1}, {2, 1, 2, 1}}, /* windows mostly in padding at the edges */
    {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
};

START_TEST(test_pool_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    for (int k = 0; k < LEN(cases); k++)
        for (int t = 0; t < 2; t++)
            for (int m = 0; m < 2; m++) {
                const pool_case *c = &cases[k];
                test_rng r = {200u + (uint64_t)(k * 4 + t * 2 + m)};
                pardo_tensor *x = test_tensor_random(&r, dts[t], 4, c->xs, -1, 1), *y = NULL;
                pardo_status st;
                char attrs[160];
                const char *op = m ? "max_pool2d" : "avg_pool2d";
                ck_assert_msg(test_run_op(op, pool_attrs(c, attrs, sizeof attrs), 1, &x, 1, &y, &st) == PARDO_OK,
                              "%s case %d: %s", op, k, st.msg);
                pardo_tensor *want = ref_pool(c, x, m);
                test_assert_close(y, want, t ? 1e-6 : 1e-14, t ? 1e-6 : 1e-14);
                pardo_tensor_release(want);
                pardo_tensor_release(y);
                pardo_tensor_release(x);
            }
}
END_TEST

/* max_pool2d on every numeric dtype: each output element holds the bits of
 * its window's first maximum (strict >, row-major, compared as the value it
 * encodes), found here by a naive walk comparing long doubles; the 2x2 row
 * loops and the clipped windows both. */
START_TEST(test_maxpool_every_dtype) {
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64, PARDO_I8,  PARDO_I16, PARDO_I32, PARDO_I64,
                                      PARDO_U8,  PARDO_U16, PARDO_U32, PARDO_U64, PARDO_F16, PARDO_BF16};
    static const pool_case every[] = {
        {{2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}}, /* the 2x2 rows, an odd row and column left out */
        {{1, 2, 6, 5}, {3, 2}, {3, 1}, {2, 1, 2, 1}}, /* clipped windows */
    };
    for (int t = 0; t < LEN(dts); t++)
        for (int k = 0; k < LEN(every); k++) {
            const pool_case *c = &every[k];
            test_rng r = {900u + (uint64_t)(t * 2 + k)};
            pardo_tensor *x = test_tensor_spread(&r, dts[t], 4, c->xs), *y = NULL;
            pardo_status st;
            char attrs[160];
            ck_assert_msg(test_run_op("max_pool2d", pool_attrs(c, attrs, sizeof attrs), 1, &x, 1, &y, &st) == PARDO_OK,
                          "%s case %d: %s", pardo_dtype_name(dts[t]), k, st.msg);
            ck_assert_int_eq(y->dtype, dts[t]);
            const int64_t H = c->xs[2], W = c->xs[3], OH = y->shape[2], OW = y->shape[3];
            const size_t es = pardo_dtype_size(dts[t]);
            const unsigned char *xd = pardo_tensor_data(x), *yd = pardo_tensor_data(y);
            for (int64_t p = 0; p < c->xs[0] * c->xs[1]; p++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t best = -1;
                        for (int64_t kh = 0; kh < c->k[0]; kh++)
                            for (int64_t kw = 0; kw < c->k[1]; kw++) {
                                const int64_t ih = oh * c->s[0] - c->pads[0] + kh, iw = ow * c->s[1] - c->pads[1] + kw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                const int64_t e = (p * H + ih) * W + iw;
                                if (best < 0 || test_elem_ld(xd, dts[t], e) > test_elem_ld(xd, dts[t], best)) best = e;
                            }
                        const int64_t o = (p * OH + oh) * OW + ow;
                        ck_assert_msg(memcmp(yd + (size_t)o * es, xd + (size_t)best * es, es) == 0,
                                      "%s case %d: output %lld is not input %lld's bits (%Lg vs %Lg)",
                                      pardo_dtype_name(dts[t]), k, (long long)o, (long long)best,
                                      test_elem_ld(yd, dts[t], o), test_elem_ld(xd, dts[t], best));
                    }
            pardo_tensor_release(y);
            pardo_tensor_release(x);
        }
}
END_TEST

START_TEST(test_pool_default_strides) {
    /* strides default to the kernel; pads to zeros; leftover rows are dropped (floor) */
    int64_t xs[] = {1, 1, 5, 4};
    pardo_tensor *x = test_tensor_from(PARDO_F64, 4, xs, (double[]){1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                                                    11, 12, 13, 14, 15, 16, 17, 18, 19, 20}),
                 *y = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("avg_pool2d", "{\"kernel\": [2, 2]}", 1, &x, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y->ndim, y->shape, 4, (int64_t[]){1, 1, 2, 2}));
    const double avg[] = {3.5, 5.5, 11.5, 13.5};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), avg[i]);
    pardo_tensor_release(y);
    ck_assert_int_eq(test_run_op("max_pool2d", "{\"kernel\": [2, 2], \"strides\": []}", 1, &x, 1, &y, &st), PARDO_OK);
    const double mx[] = {6, 8, 14, 16};
    for (int i = 0; i < 4; i++) ck_assert_double_eq(pardo_tensor_get_f64(y, i), mx[i]);
    pardo_tensor_release(y);
    /* count_include_pad = 0: a corner window holding one element and three pads averages to that element */
    ck_assert_int_eq(test_run_op("avg_pool2d", "{\"kernel\": [2, 2], \"pads\": [1, 1, 1, 1]}", 1, &x, 1, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y->ndim, y->shape, 4, (int64_t[]){1, 1, 3, 3}));
    ck_assert_double_eq(pardo_tensor_get_f64(y, 0), 1.0);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 1), 2.5);
    ck_assert_double_eq(pardo_tensor_get_f64(y, 4), (6 + 7 + 10 + 11) / 4.0);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_maxpool_grad_first_max) {
    /* ties: the gradient goes to the first maximum of each window only */
    int64_t xs[] = {1, 1, 2, 4};
    pardo_tensor *in[3] = {test_tensor_from(PARDO_F64, 4, xs, (double[]){5, 5, 1, 2, 5, 5, 2, 2}), NULL, NULL};
    int64_t ys[] = {1, 1, 1, 2};
    in[2] = test_tensor_from(PARDO_F64, 4, ys, (double[]){10, 100});
    pardo_tensor *dx = NULL;
    pardo_status st;
    ck_assert_int_eq(test_run_op("max_pool2d_grad", "{\"kernel\": [2, 2]}", 3, in, 1, &dx, &st), PARDO_OK);
    const double want[] = {10, 0, 0, 100, 0, 0, 0, 0};
    for (int i = 0; i < 8; i++) ck_assert_double_eq(pardo_tensor_get_f64(dx, i), want[i]);
    pardo_tensor_release(dx);
    /* overlapping windows add up at a shared maximum */
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[2]);
    int64_t xs2[] = {1, 1, 1, 3}, ys2[] = {1, 1, 1, 2};
    in[0] = test_tensor_from(PARDO_F64, 4, xs2, (double[]){0, 9, 1});
    in[2] = test_tensor_from(PARDO_F64, 4, ys2, (double[]){1.5, 2});
    ck_assert_int_eq(test_run_op("max_pool2d_grad", "{\"kernel\": [1, 2], \"strides\": [1, 1]}", 3, in, 1, &dx, &st),
                     PARDO_OK);
    ck_assert_double_eq(pardo_tensor_get_f64(dx, 1), 3.5);
    ck_assert_double_eq(pardo_tensor_get_f64(dx, 0), 0);
    pardo_tensor_release(dx);
    pardo_tensor_release(in[0]);
    pardo_tensor_release(in[2]);
}
END_TEST

static void check_pool_grad(const char *op, const pool_case *c, uint64_t seed) {
    test_rng r = {seed};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 4, c->xs, -1, 1);
    char attrs[160];
    test_check_grad_default(op, pool_attrs(c, attrs, sizeof attrs), 1, &x, 1, 1u);
    pardo_tensor_release(x);
}

START_TEST(test_pool_grads) {
    const pool_case a = {{2, 2, 5, 6}, {3, 3}, {2, 2}, {1, 1, 1, 2}}; /* pads, overlap */
    const pool_case b = {{1, 3, 4, 5}, {2, 2}, {1, 1}, {0, 1, 1, 0}}; /* stride 1: every element in several windows */
    const pool_case c = {{2, 1, 3, 3}, {2, 2}, {2, 2}, {1, 1, 1, 1}};
    check_pool_grad("max_pool2d", &a, 1);
    check_pool_grad("max_pool2d", &b, 2);
    check_pool_grad("max_pool2d", &c, 3);
    check_pool_grad("avg_pool2d", &a, 4);
    check_pool_grad("avg_pool2d", &b, 5);
    check_pool_grad("avg_pool2d", &c, 6);
}
END_TEST

/* ---- naive loops for the forward and the gradients; threads; reused outputs ---- */

/* The flat index of the first maximum (strict >, row-major, as max_pool2d: a NaN first stays, a NaN later is
 * never taken) of window (oh, ow) of plane p, or -1 when the window has no input element. */
static int64_t ref_argmax(const pool_case *c, const pardo_tensor *x, int64_t p, int64_t oh, int64_t ow) {
    const int64_t H = c->xs[2], W = c->xs[3];
    int64_t best = -1;
    for (int64_t kh = 0; kh < c->k[0]; kh++)
        for (int64_t kw = 0; kw < c->k[1]; kw++) {
            int64_t ih = oh * c->s[0] - c->pads[0] + kh, iw = ow * c->s[1] - c->pads[1] + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const int64_t i = (p * H + ih) * W + iw;
            if (best < 0 || pardo_tensor_get_f64(x, i) > pardo_tensor_get_f64(x, best)) best = i;
        }
    return best;
}

/* The forward (y) and the gradient dX for dy of max (or avg) pooling, by the definitions, in double. */
static void ref_pool_both(const pool_case *c, const pardo_tensor *x, const pardo_tensor *dy, bool max,
                          pardo_tensor **y, pardo_tensor **dx) {
    const int64_t N = c->xs[0], C = c->xs[1], H = c->xs[2], W = c->xs[3];
    const int64_t OH = (H + c->pads[0] + c->pads[2] - c->k[0]) / c->s[0] + 1;
    const int64_t OW = (W + c->pads[1] + c->pads[3] - c->k[1]) / c->s[1] + 1;
    int64_t ys[4] = {N, C, OH, OW};
    pardo_status st;
    *y = pardo_tensor_new_cpu(x->dtype, 4, ys, &st);
    *dx = pardo_tensor_new_cpu(x->dtype, 4, c->xs, &st);
    ck_assert(*y && *dx);
    for (int64_t i = 0; i < (*dx)->numel; i++) pardo_tensor_set_f64(*dx, i, 0);
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                const int64_t yi = (p * OH + oh) * OW + ow;
                const double d = pardo_tensor_get_f64(dy, yi);
                if (max) {
                    const int64_t b = ref_argmax(c, x, p, oh, ow);
                    pardo_tensor_set_f64(*y, yi, pardo_tensor_get_f64(x, b));
                    pardo_tensor_set_f64(*dx, b, pardo_tensor_get_f64(*dx, b) + d);
                    continue;
                }
                double sum = 0;
                int count = 0;
                for (int pass = 0; pass < 2; pass++)
                    for (int64_t kh = 0; kh < c->k[0]; kh++)
                        for (int64_t kw = 0; kw < c->k[1]; kw++) {
                            int64_t ih = oh * c->s[0] - c->pads[0] + kh, iw = ow * c->s[1] - c->pads[1] + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            const int64_t i = (p * H + ih) * W + iw;
                            if (pass == 0) {
                                sum += pardo_tensor_get_f64(x, i);
                                count++;
                            } else {
                                pardo_tensor_set_f64(*dx, i, pardo_tensor_get_f64(*dx, i) + d / count);
                            }
                        }
                pardo_tensor_set_f64(*y, yi, sum / count);
            }
}

/* Runs op (attrs JSON) on in[0..n_in) into *out with a kernel ctx of nthreads threads; a tensor already in *out
 * of the right dtype and shape is reused (written over, as an executor's outputs are). */
static int run_pool_ctx(const char *type, const char *attrs, int n_in, pardo_tensor **in, pardo_tensor **out,
                        int nthreads, pardo_status *st) {
    pardo_op op;
    memset(&op, 0, sizeof op);
    char tname[32], oname[] = "out", *outs[1] = {oname};
    snprintf(tname, sizeof tname, "%s", type);
    op.type = tname;
    op.def = pardo_op_lookup(type);
    ck_assert_ptr_nonnull(op.def);
    op.out = outs;
    op.n_out = 1;
    op.n_in = n_in;
    ck_assert_msg(pardo_value_parse_json(attrs, &op.attrs, st) == PARDO_OK, "%s", st->msg);
    pardo_kernel_ctx ctx = {.op = &op, .n_in = n_in, .in = in, .n_out = 1, .out = out, .st = st,
                            .device = PARDO_DEVICE_CPU, .nthreads = nthreads};
    int rc = op.def->cpu(&ctx);
    pardo_value_free(op.attrs);
    return rc;
}

/* A tensor of dtype and shape full of NaN: an output holding old data. */
static pardo_tensor *nan_tensor(pardo_dtype dt, const int64_t *shape) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(dt, 4, shape, &st);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < t->numel; i++) pardo_tensor_set_f64(t, i, (double)NAN);
    return t;
}

/* Forward and gradient of both pools against ref_pool_both, in float32 and float64, each output first holding
 * NaN (every element must be written), on 1 and 2 threads with the same bits: the 2x2 windows with strides 2
 * (the vectorised rows) on even and odd sizes (a last row and column no window reads), with ties and NaN in the
 * input, and other windows; inputs past PARDO_PAR_MIN elements are split over the threads. */
START_TEST(test_pool_rows_threads_reference) {
    pardo_status st;
    if (pardo_thread_pool_started() && pardo_thread_pool_size() != 2) pardo_thread_pool_shutdown();
    ck_assert_msg(pardo_thread_pool_configure(2, &st) == PARDO_OK, "%s", st.msg);
    static const pool_case pc[] = {
        {{2, 3, 6, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
        {{3, 2, 7, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}},    /* odd: the last row and column are read by no window */
        {{1, 1, 2, 35}, {2, 2}, {2, 2}, {0, 0, 0, 0}},   /* one row of windows, past a vector's width */
        {{16, 16, 28, 28}, {2, 2}, {2, 2}, {0, 0, 0, 0}}, /* the CNN's first pool: split over the threads */
        {{8, 16, 15, 17}, {3, 3}, {2, 2}, {1, 1, 1, 1}},  /* the generic walk, split over the threads */
        {{2, 2, 5, 6}, {2, 2}, {1, 1}, {0, 0, 1, 1}},
    };
    static const pardo_dtype dts[] = {PARDO_F32, PARDO_F64};
    for (int k = 0; k < LEN(pc); k++)
        for (int t = 0; t < 2; t++)
            for (int m = 0; m < 2; m++) {
                const pool_case *c = &pc[k];
                test_rng r = {700u + (uint64_t)(k * 4 + t * 2 + m)};
                pardo_tensor *x = test_tensor_random(&r, dts[t], 4, c->xs, -1, 1);
                /* ties (values on a coarse grid) and, for max, a few NaN */
                for (int64_t i = 0; i < x->numel; i++) {
                    const double v = floor(pardo_tensor_get_f64(x, i) * 3) / 3;
                    pardo_tensor_set_f64(x, i, m && i % 13 == 5 ? (double)NAN : v);
                }
                const int64_t OH = (c->xs[2] + c->pads[0] + c->pads[2] - c->k[0]) / c->s[0] + 1,
                              OW = (c->xs[3] + c->pads[1] + c->pads[3] - c->k[1]) / c->s[1] + 1,
                              ys[4] = {c->xs[0], c->xs[1], OH, OW};
                pardo_tensor *dy = test_tensor_random(&r, dts[t], 4, ys, -1, 1), *want_y, *want_dx;
                ref_pool_both(c, x, dy, m, &want_y, &want_dx);
                char attrs[160], gop[32];
                pool_attrs(c, attrs, sizeof attrs);
                const char *op = m ? "max_pool2d" : "avg_pool2d";
                snprintf(gop, sizeof gop, "%s_grad", op);
                pardo_tensor *y[2], *dx[2];
                for (int th = 0; th < 2; th++) {
                    y[th] = nan_tensor(dts[t], ys);
                    dx[th] = nan_tensor(dts[t], c->xs);
                    ck_assert_msg(run_pool_ctx(op, attrs, 1, &x, &y[th], th + 1, &st) == PARDO_OK, "%s", st.msg);
                    pardo_tensor *gin[3] = {x, y[th], dy};
                    ck_assert_msg(run_pool_ctx(gop, attrs, 3, gin, &dx[th], th + 1, &st) == PARDO_OK, "%s", st.msg);
                }
                const double tol = t ? 1e-14 : 1e-6;
                test_assert_close(y[0], want_y, tol, tol);
                test_assert_close(dx[0], want_dx, tol, tol);
                ck_assert_msg(memcmp(pardo_tensor_data(y[0]), pardo_tensor_data(y[1]), y[0]->nbytes) == 0 &&
                                  memcmp(pardo_tensor_data(dx[0]), pardo_tensor_data(dx[1]), dx[0]->nbytes) == 0,
                              "%s case %d: 2 threads differ from 1", op, k);
                pardo_tensor *all[] = {x, dy, want_y, want_dx, y[0], y[1], dx[0], dx[1]};
                for (int i = 0; i < LEN(all); i++) pardo_tensor_release(all[i]);
            }
}
END_TEST

START_TEST(test_pool_infer) {
    pardo_type y, x = test_type(PARDO_F32, 4, (int64_t[]){-1, 16, 28, 27});
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("max_pool2d", "{\"kernel\": [2, 2]}", 1, in, 1, &y, &st), PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){-1, 16, 14, 13}));
    ck_assert_int_eq(y.dtype, PARDO_F32);
    x = test_type(PARDO_F64, 4, (int64_t[]){2, 3, -1, 7});
    ck_assert_int_eq(test_infer_op("avg_pool2d", "{\"kernel\": [3, 3], \"strides\": [1, 2], \"pads\": [1, 1, 1, 1]}", 1,
                                   in, 1, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){2, 3, -1, 4}));
}
END_TEST

/* ---- errors ---- */

static void expect_pool_error(const char *op, const char *attrs, const int64_t *xs, int code, const char *w1,
                              const char *w2) {
    pardo_type y, x = test_type(PARDO_F32, 4, xs);
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op(op, attrs, 1, in, 1, &y, &st), code);
    ck_assert_msg(strstr(st.msg, w1) != NULL, "message lacks '%s': %s", w1, st.msg);
    ck_assert_msg(!w2 || strstr(st.msg, w2) != NULL, "message lacks '%s': %s", w2, st.msg);
}

START_TEST(test_pool_errors) {
    const int64_t xs[] = {1, 2, 4, 4};
    for (int m = 0; m < 2; m++) {
        const char *op = m ? "max_pool2d" : "avg_pool2d";
        expect_pool_error(op, "{\"kernel\": [5, 2]}", xs, PARDO_ESHAPE, "'kernel'", "larger than");
        expect_pool_error(op, "{\"kernel\": [2, 6], \"pads\": [0, 1, 0, 0]}", xs, PARDO_ESHAPE, "'kernel'", "'pads'");
        expect_pool_error(op, "{\"kernel\": [2, 2], \"pads\": [0, 0, -1, 0]}", xs, PARDO_EINVAL, "'pads'", "negative");
        expect_pool_error(op, "{\"kernel\": [2, 2], \"pads\": [2, 0, 0, 0]}", xs, PARDO_EINVAL, "'pads'", "'kernel'");
        expect_pool_error(op, "{\"kernel\": [2, 2], \"pads\": [0, 0]}", xs, PARDO_EINVAL, "'pads'", "expected 4");
        expect_pool_error(op, "{\"kernel\": [2]}", xs, PARDO_EINVAL, "'kernel'", "expected 2");
        expect_pool_error(op, "{\"kernel\": [0, 2]}", xs, PARDO_EINVAL, "'kernel'", ">= 1");
        expect_pool_error(op, "{\"kernel\": [2, 2], \"strides\": [1, 0]}", xs, PARDO_EINVAL, "'strides'", ">= 1");
        expect_pool_error(op, "{\"kernel\": [2, 2], \"strides\": [1, 1, 1]}", xs, PARDO_EINVAL, "'strides'", NULL);
        expect_pool_error(op, NULL, xs, PARDO_EINVAL, "'kernel'", "required");
        expect_pool_error(op, "{\"kernel\": [2, 2]}", (int64_t[]){1, 2, 0, 4}, PARDO_ESHAPE, "'kernel'", NULL);
    }
    pardo_type y, x = test_type(PARDO_BOOL, 4, xs);
    const pardo_type *in[1] = {&x};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("max_pool2d", "{\"kernel\": [2, 2]}", 1, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "bool") && strstr(st.msg, "uint8"), "%s", st.msg);
    x = test_type(PARDO_I64, 4, xs); /* integers: max pooling only */
    ck_assert_int_eq(test_infer_op("max_pool2d", "{\"kernel\": [2, 2]}", 1, in, 1, &y, &st), PARDO_OK);
    ck_assert_int_eq(test_infer_op("avg_pool2d", "{\"kernel\": [2, 2]}", 1, in, 1, &y, &st), PARDO_ESHAPE);
    const pardo_type dy = test_type(PARDO_I64, 4, (int64_t[]){1, 2, 2, 2});
    const pardo_type *gin[3] = {&x, NULL, &dy};
    ck_assert_int_eq(test_infer_op("max_pool2d_grad", "{\"kernel\": [2, 2]}", 3, gin, 1, &y, &st), PARDO_ESHAPE);
    x = test_type(PARDO_F32, 2, xs);
    ck_assert_int_eq(test_infer_op("avg_pool2d", "{\"kernel\": [2, 2]}", 1, in, 1, &y, &st), PARDO_ESHAPE);
}
END_TEST

/* ---- PyTorch fixtures ---- */

START_TEST(test_pool_fixtures) {
    static const struct {
        const char *name, *op, *attrs;
    } fx[] = {
        {"maxpool_k3s2p1", "max_pool2d", "{\"kernel\": [3, 3], \"strides\": [2, 2], \"pads\": [1, 1, 1, 1]}"},
        {"maxpool_k2_f32", "max_pool2d", "{\"kernel\": [2, 2]}"},
        {"avgpool_k3s2p1", "avg_pool2d", "{\"kernel\": [3, 3], \"strides\": [2, 2], \"pads\": [1, 1, 1, 1]}"},
        {"avgpool_k2x3_f32", "avg_pool2d", "{\"kernel\": [2, 3], \"strides\": [1, 2], \"pads\": [1, 1, 1, 1]}"},
    };
    for (int k = 0; k < LEN(fx); k++) {
        char name[96], gop[64];
        snprintf(name, sizeof name, "nn/%s_x.npy", fx[k].name);
        pardo_tensor *in[3] = {test_npy_load(name), NULL, NULL}, *y = NULL, *dx = NULL;
        const bool f32 = in[0]->dtype == PARDO_F32;
        pardo_status st;
        ck_assert_msg(test_run_op(fx[k].op, fx[k].attrs, 1, in, 1, &y, &st) == PARDO_OK, "%s: %s", fx[k].name, st.msg);
        snprintf(name, sizeof name, "nn/%s_y.npy", fx[k].name);
        pardo_tensor *want = test_npy_load(name);
        test_assert_close(y, want, f32 ? 1e-6 : 1e-14, f32 ? 1e-6 : 1e-14);
        pardo_tensor_release(want);
        in[1] = y;
        snprintf(name, sizeof name, "nn/%s_dy.npy", fx[k].name);
        in[2] = test_npy_load(name);
        snprintf(gop, sizeof gop, "%s_grad", fx[k].op);
        ck_assert_msg(test_run_op(gop, fx[k].attrs, 3, in, 1, &dx, &st) == PARDO_OK, "%s: %s", fx[k].name, st.msg);
        snprintf(name, sizeof name, "nn/%s_dx.npy", fx[k].name);
        want = test_npy_load(name);
        test_assert_close(dx, want, f32 ? 1e-6 : 1e-14, f32 ? 1e-6 : 1e-14);
        pardo_tensor_release(want);
        pardo_tensor_release(dx);
        for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
    }
}
END_TEST

Suite *make_ops_pool_suite(void) {
    Suite *s = suite_create("ops_pool");
    TCase *core = tcase_create("Core");
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_pool_reference);
    tcase_add_test(core, test_pool_default_strides);
    tcase_add_test(core, test_maxpool_every_dtype);
    tcase_add_test(core, test_maxpool_grad_first_max);
    tcase_add_test(core, test_pool_grads);
    tcase_add_test(core, test_pool_infer);
    tcase_add_test(core, test_pool_fixtures);
    tcase_add_test(core, test_pool_rows_threads_reference);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_pool_errors);
    suite_add_tcase(s, errors);
    return s;
}
