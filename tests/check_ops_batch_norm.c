/* check_ops_batch_norm.c - batch_norm and batch_norm_grad: training and
 * eval mode against PyTorch fixtures (torch.nn.functional.batch_norm and
 * autograd, [N, C] and NCHW, float64 and float32, the running statistics it
 * updates), the gradients against float64 finite differences in both
 * modes, the split over threads bit for bit, inference errors; the sync
 * form's sums (batch_norm_stats) and halves of a batch against the whole. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "grad_test_util.h"
#include "op_test_util.h"
#include "test_util.h"
#include "exec/thread_pool.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static pardo_tensor *load(const char *stem, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "nn/%s_%s.npy", stem, what);
    return test_npy_load(name);
}

START_TEST(test_bn_fixtures) {
    static const struct {
        const char *name, *attrs;
    } fx[] = {{"bn2d_f64", NULL}, {"bn4d_f64", "{\"momentum\": 0.9}"}, {"bn4d_f32", "{\"epsilon\": 0.001}"}};
    static const char *const what[5] = {"x", "scale", "bias", "mean", "var"};
    for (int k = 0; k < LEN(fx); k++)
        for (int training = 1; training >= 0; training--) {
            pardo_tensor *in[11] = {NULL}, *out[3] = {NULL}, *g[3] = {NULL};
            for (int i = 0; i < 5; i++) in[i] = load(fx[k].name, what[i]);
            const double tol = in[0]->dtype == PARDO_F32 ? 2e-5 : 1e-11;
            pardo_status st;
            ck_assert_msg(test_run_op_ex("batch_norm", fx[k].attrs, 5, in, 3, out, training, 0, &st) == PARDO_OK,
                          "%s: %s", fx[k].name, st.msg);
            pardo_tensor *want = load(fx[k].name, training ? "y_train" : "y_eval");
            test_assert_close(out[0], want, tol, tol);
            pardo_tensor_release(want);
            /* the running statistics: updated as torch's momentum 0.1 when training, kept otherwise */
            for (int s = 0; s < 2; s++) {
                want = training ? load(fx[k].name, s ? "var_train" : "mean_train") : pardo_tensor_retain(in[3 + s]);
                test_assert_close(out[1 + s], want, tol, tol);
                pardo_tensor_release(want);
            }
            /* batch_norm_grad: X, scale, bias, mean, var, Y, rm, rv, dY, drm, drv */
            in[8] = load(fx[k].name, "dy");
            ck_assert_msg(test_run_op_ex("batch_norm_grad", fx[k].attrs, 11, in, 3, g, training, 0, &st) == PARDO_OK,
                          "%s grad: %s", fx[k].name, st.msg);
            static const char *const dn[2][3] = {{"dx_eval", "dscale_eval", "dbias_eval"}, {"dx", "dscale", "dbias"}};
            for (int i = 0; i < 3; i++) {
                want = load(fx[k].name, dn[training][i]);
                test_assert_close(g[i], want, tol * 10, tol * 10);
                pardo_tensor_release(want);
                pardo_tensor_release(g[i]);
            }
            for (int i = 0; i < 3; i++) pardo_tensor_release(out[i]);
            for (int i = 0; i < 11; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

/* dX (through the batch's statistics when training), dscale and dbias
 * against finite differences of Y, [N, C] and [N, C, H, W]. */
START_TEST(test_bn_gradients) {
    static const int64_t s2[] = {5, 3}, s4[] = {2, 3, 2, 3}, c3[] = {3};
    for (int training = 0; training < 2; training++)
        for (int c = 0; c < 2; c++) {
            test_rng r = {4100u + (uint64_t)(c + 2 * training)};
            pardo_tensor *in[5] = {c ? test_tensor_random(&r, PARDO_F64, 4, s4, -2, 2)
                                     : test_tensor_random(&r, PARDO_F64, 2, s2, -2, 2),
                                   test_tensor_random(&r, PARDO_F64, 1, c3, 0.5, 1.5),
                                   test_tensor_random(&r, PARDO_F64, 1, c3, -1, 1),
                                   test_tensor_random(&r, PARDO_F64, 1, c3, -0.5, 0.5),
                                   test_tensor_random(&r, PARDO_F64, 1, c3, 0.5, 2)};
            test_check_grad_ex("batch_norm", "{\"epsilon\": 0.01}", 5, in, 1, 7u, 1e-6, 1e-6, training, 0);
            test_check_grad_ex("batch_norm", NULL, 5, in, 1, 1u, 1e-6, 1e-6, training, 0);
            for (int k = 0; k < 5; k++) pardo_tensor_release(in[k]);
        }
}
END_TEST

/* Channels split over 2 threads: the same bits as one. */
START_TEST(test_bn_threads) {
    pardo_status st;
    ck_assert(pardo_thread_pool_configure(2, &st) == PARDO_OK || pardo_thread_pool_size() >= 1);
    test_rng r = {77};
    static const int64_t sx[] = {8, 16, 6, 6}, sc[] = {16};
    pardo_tensor *in[5] = {test_tensor_random(&r, PARDO_F32, 4, sx, -3, 3), test_tensor_random(&r, PARDO_F32, 1, sc, 0.5, 1),
                           test_tensor_random(&r, PARDO_F32, 1, sc, -1, 1), test_tensor_random(&r, PARDO_F32, 1, sc, -1, 1),
                           test_tensor_random(&r, PARDO_F32, 1, sc, 1, 2)};
    pardo_tensor *a[3], *b[3];
    ck_assert(test_run_op_threads("batch_norm", NULL, 5, in, 3, a, 1, &st) == PARDO_OK);
    ck_assert(test_run_op_threads("batch_norm", NULL, 5, in, 3, b, 2, &st) == PARDO_OK);
    for (int k = 0; k < 3; k++) {
        ck_assert(memcmp(pardo_tensor_data(a[k]), pardo_tensor_data(b[k]), a[k]->nbytes) == 0);
        pardo_tensor_release(a[k]);
        pardo_tensor_release(b[k]);
    }
    for (int k = 0; k < 5; k++) pardo_tensor_release(in[k]);
}
END_TEST

START_TEST(test_bn_errors) {
    pardo_status st;
    pardo_type x = test_type(PARDO_F32, 4, (int64_t[]){2, 3, 4, 4}), c = test_type(PARDO_F32, 1, (int64_t[]){3}),
               bad = test_type(PARDO_F32, 1, (int64_t[]){4}), c64 = test_type(PARDO_F64, 1, (int64_t[]){3}),
               out[3];
    const pardo_type *in[5] = {&x, &c, &c, &c, &c};
    ck_assert_int_eq(test_infer_op("batch_norm", NULL, 5, in, 3, out, &st), PARDO_OK);
    ck_assert_int_eq(out[0].ndim, 4);
    in[3] = &bad;
    ck_assert_int_eq(test_infer_op("batch_norm", NULL, 5, in, 3, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "input 3 'mean'") && strstr(st.msg, "[3]"), "%s", st.msg);
    in[3] = &c64;
    ck_assert_int_eq(test_infer_op("batch_norm", NULL, 5, in, 3, out, &st), PARDO_ESHAPE);
    in[3] = &c;
    ck_assert_int_eq(test_infer_op("batch_norm", "{\"momentum\": 2}", 5, in, 3, out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'momentum'"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("batch_norm", "{\"epsilon\": -1}", 5, in, 3, out, &st), PARDO_EINVAL);
    pardo_type v = test_type(PARDO_F32, 1, (int64_t[]){3});
    in[0] = &v;
    ck_assert_int_eq(test_infer_op("batch_norm", NULL, 5, in, 3, out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "[N, C, ...]"), "%s", st.msg);
}
END_TEST

/* Rows [r0, r1) of t, times f (a new tensor). */
static pardo_tensor *rows_of(const pardo_tensor *t, int64_t r0, int64_t r1, double f) {
    int64_t shape[PARDO_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    shape[0] = r1 - r0;
    pardo_status st;
    pardo_tensor *o = pardo_tensor_new_cpu(t->dtype, t->ndim, shape, &st);
    ck_assert_ptr_nonnull(o);
    const int64_t row = t->numel / t->shape[0];
    for (int64_t i = 0; i < o->numel; i++) pardo_tensor_set_f64(o, i, f * pardo_tensor_get_f64(t, r0 * row + i));
    return o;
}

/* batch_norm_stats against naive sums; the sync form's identity: with the
 * sums of both halves of the batch (as all_reduce gives them), batch_norm
 * of a half gives the whole batch's Y rows and running statistics, and
 * batch_norm_grad of a half whose loss is its rows' mean (dY times N / n)
 * gives the whole batch's dX rows times N / n, and dscale, dbias whose
 * mean weighted by rows is the whole batch's (fixture bn4d_f64). */
START_TEST(test_bn_sync_halves) {
    static const char *const what[5] = {"x", "scale", "bias", "mean", "var"};
    pardo_tensor *in[12] = {NULL}, *full[3], *gfull[3];
    for (int i = 0; i < 5; i++) in[i] = load("bn4d_f64", what[i]);
    in[8] = load("bn4d_f64", "dy");
    pardo_status st;
    ck_assert(test_run_op_ex("batch_norm", NULL, 5, in, 3, full, 1, 0, &st) == PARDO_OK);
    ck_assert(test_run_op_ex("batch_norm_grad", NULL, 11, in, 3, gfull, 1, 0, &st) == PARDO_OK);
    const int64_t N = in[0]->shape[0], C = in[0]->shape[1], S = in[0]->numel / (N * C), half[3] = {0, N / 2 + 1, N};
    ck_assert(N >= 3);
    pardo_tensor *xs[2], *dys[2], *sums[2], *gsums[2];
    for (int h = 0; h < 2; h++) {
        const double n = (double)(half[h + 1] - half[h]);
        xs[h] = rows_of(in[0], half[h], half[h + 1], 1);
        dys[h] = rows_of(in[8], half[h], half[h + 1], (double)N / n);
        pardo_tensor *a[2] = {xs[h], dys[h]};
        ck_assert(test_run_op_ex("batch_norm_stats", NULL, 1, a, 1, &sums[h], 1, 0, &st) == PARDO_OK);
        ck_assert(test_run_op_ex("batch_norm_stats", NULL, 2, a, 1, &gsums[h], 1, 0, &st) == PARDO_OK);
        ck_assert_int_eq(sums[h]->numel, 1 + 2 * C);
        ck_assert_int_eq(gsums[h]->numel, 1 + 4 * C);
        /* naive: count, sum x, sum x^2, M_p sum dY, M_p sum dY x */
        const double mp = n * (double)S;
        ck_assert_double_eq(pardo_tensor_get_f64(gsums[h], 0), mp);
        for (int64_t c = 0; c < C; c++) {
            double want[4] = {0, 0, 0, 0};
            for (int64_t r = 0; r < (int64_t)n; r++)
                for (int64_t j = 0; j < S; j++) {
                    const int64_t at = (r * C + c) * S + j;
                    const double x = pardo_tensor_get_f64(xs[h], at), dy = pardo_tensor_get_f64(dys[h], at);
                    want[0] += x;
                    want[1] += x * x;
                    want[2] += mp * dy;
                    want[3] += mp * dy * x;
                }
            for (int k = 0; k < 4; k++) {
                const double got = pardo_tensor_get_f64(gsums[h], 1 + k * C + c);
                ck_assert_msg(fabs(got - want[k]) <= 1e-12 * (1 + fabs(want[k])), "half %d sum %d channel %lld: %g vs %g",
                              h, k, (long long)c, got, want[k]);
                if (k < 2) ck_assert_double_eq(pardo_tensor_get_f64(sums[h], 1 + k * C + c), got);
            }
        }
    }
    /* the all_reduce of the two halves */
    for (int64_t i = 0; i < gsums[0]->numel; i++) {
        pardo_tensor_set_f64(gsums[0], i, pardo_tensor_get_f64(gsums[0], i) + pardo_tensor_get_f64(gsums[1], i));
        if (i < sums[0]->numel)
            pardo_tensor_set_f64(sums[0], i, pardo_tensor_get_f64(sums[0], i) + pardo_tensor_get_f64(sums[1], i));
    }
    double dscale[64] = {0}, dbias[64] = {0};
    ck_assert(C <= 64);
    for (int h = 0; h < 2; h++) {
        const double n = (double)(half[h + 1] - half[h]);
        pardo_tensor *a[12] = {xs[h], in[1], in[2], in[3], in[4], sums[0]}, *y[3], *g[3];
        /* the forward takes either layout */
        a[5] = h ? gsums[0] : sums[0];
        ck_assert_msg(test_run_op_ex("batch_norm", NULL, 6, a, 3, y, 1, 0, &st) == PARDO_OK, "%s", st.msg);
        pardo_tensor *want = rows_of(full[0], half[h], half[h + 1], 1);
        test_assert_close(y[0], want, 1e-10, 1e-10);
        pardo_tensor_release(want);
        test_assert_close(y[1], full[1], 1e-10, 1e-12);
        test_assert_close(y[2], full[2], 1e-10, 1e-12);
        for (int k = 5; k < 12; k++) a[k] = NULL;
        a[8] = dys[h];
        a[11] = gsums[0];
        ck_assert_msg(test_run_op_ex("batch_norm_grad", NULL, 12, a, 3, g, 1, 0, &st) == PARDO_OK, "%s", st.msg);
        want = rows_of(gfull[0], half[h], half[h + 1], (double)N / n);
        test_assert_close(g[0], want, 1e-9, 1e-10);
        pardo_tensor_release(want);
        for (int64_t c = 0; c < C; c++) {
            dscale[c] += n / (double)N * pardo_tensor_get_f64(g[1], c);
            dbias[c] += n / (double)N * pardo_tensor_get_f64(g[2], c);
        }
        for (int k = 0; k < 3; k++) {
            pardo_tensor_release(y[k]);
            pardo_tensor_release(g[k]);
        }
    }
    for (int64_t c = 0; c < C; c++) {
        ck_assert(fabs(dscale[c] - pardo_tensor_get_f64(gfull[1], c)) < 1e-10);
        ck_assert(fabs(dbias[c] - pardo_tensor_get_f64(gfull[2], c)) < 1e-10);
    }
    /* a stats input of the wrong length is refused */
    pardo_tensor *a[6] = {xs[0], in[1], in[2], in[3], in[4], xs[1]};
    pardo_tensor *y[3];
    ck_assert_int_eq(test_run_op_ex("batch_norm", NULL, 6, a, 3, y, 1, 0, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "input 5 'stats'") && strstr(st.msg, "float64"), "%s", st.msg);
    for (int h = 0; h < 2; h++) {
        pardo_tensor_release(xs[h]);
        pardo_tensor_release(dys[h]);
        pardo_tensor_release(sums[h]);
        pardo_tensor_release(gsums[h]);
    }
    for (int k = 0; k < 3; k++) {
        pardo_tensor_release(full[k]);
        pardo_tensor_release(gfull[k]);
    }
    for (int i = 0; i < 12; i++) pardo_tensor_release(in[i]);
}
END_TEST

Suite *make_ops_batch_norm_suite(void) {
    Suite *s = suite_create("ops_batch_norm");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_bn_fixtures);
    tcase_add_test(core, test_bn_gradients);
    tcase_add_test(core, test_bn_threads);
    tcase_add_test(core, test_bn_errors);
    tcase_add_test(core, test_bn_sync_halves);
    suite_add_tcase(s, core);
    return s;
}
