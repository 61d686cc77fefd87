/* check_ops_roi_align.c - roi_align (forward only): exact on a linear
 * input (bilinear interpolation reproduces it, so a bin's average is the
 * plane at the bin's centre), against a naive reference of ONNX RoiAlign's
 * definition (both coordinate modes, avg and max, adaptive and fixed
 * sampling, ROIs partly outside X, several images), and attr, shape and
 * batch-index errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

static pardo_tensor *i64_tensor(int64_t n, const int64_t *vals) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_I64, 1, &n, &st);
    ck_assert_ptr_nonnull(t);
    memcpy(pardo_tensor_data(t), vals, sizeof(int64_t) * (size_t)n);
    return t;
}

START_TEST(test_roi_linear_exact) {
    /* X[h, w] = 3 h + w (a plane): the bilinear sample at (y, x) inside [0, H - 1] x [0, W - 1] is 3 y + x, and a
     * bin's samples sit symmetrically about its centre, so each bin's average is 3 cy + cx */
    const int64_t H = 8, W = 9;
    double xv[72];
    for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) xv[h * W + w] = 3.0 * (double)h + (double)w;
    pardo_tensor *x = test_tensor_from(PARDO_F64, 4, (int64_t[]){1, 1, 8, 9}, xv),
                 *rois = test_tensor_from(PARDO_F64, 2, (int64_t[]){2, 4}, (double[]){2, 2, 12, 10, 1, 3, 5, 13}),
                 *bi = i64_tensor(2, (int64_t[]){0, 0}), *y = NULL;
    pardo_tensor *in[3] = {x, rois, bi};
    pardo_status st;
    /* spatial_scale 0.5, half_pixel: ROI 0 spans x 0.5..5.5, y 0.5..4.5; ROI 1 x 0..2, y 1..6 */
    ck_assert_int_eq(test_run_op("roi_align",
                                 "{\"output_height\": 2, \"output_width\": 5, \"sampling_ratio\": 3, "
                                 "\"spatial_scale\": 0.5}",
                                 3, in, 1, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y->ndim, y->shape, 4, (int64_t[]){2, 1, 2, 5}));
    const double box[2][4] = {{0.5, 0.5, 5.5, 4.5}, {0, 1, 2, 6}};
    for (int r = 0; r < 2; r++)
        for (int ph = 0; ph < 2; ph++)
            for (int pw = 0; pw < 5; pw++) {
                const double cx = box[r][0] + (pw + 0.5) * (box[r][2] - box[r][0]) / 5,
                             cy = box[r][1] + (ph + 0.5) * (box[r][3] - box[r][1]) / 2;
                ck_assert_double_eq_tol(pardo_tensor_get_f64(y, (r * 2 + ph) * 5 + pw), 3 * cy + cx, 1e-12);
            }
    pardo_tensor_release(y);
    for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
}
END_TEST

/* The bilinear value of plane p (h x w) at (y, x): 0 beyond one pixel outside, the coordinates clamped to [0, size
 * - 1] else; with max, the largest weighted corner term instead of their sum. */
static double ref_sample(const pardo_tensor *x, int64_t off, int64_t h, int64_t w, double y, double xx, bool max,
                         double *best) {
    if (y < -1 || y > (double)h || xx < -1 || xx > (double)w) {
        if (max) *best = fmax(*best, 0); /* its corner terms are all 0 */
        return 0;
    }
    y = fmin(fmax(y, 0), (double)(h - 1));
    xx = fmin(fmax(xx, 0), (double)(w - 1));
    const double fy = floor(y), fx = floor(xx);
    const int64_t y0 = (int64_t)fy, x0 = (int64_t)fx, y1 = y0 + 1 < h ? y0 + 1 : y0, x1 = x0 + 1 < w ? x0 + 1 : x0;
    const double ay = y - fy, ax = xx - fx;
    const double t[4] = {(1 - ay) * (1 - ax) * pardo_tensor_get_f64(x, off + y0 * w + x0),
                         (1 - ay) * ax * pardo_tensor_get_f64(x, off + y0 * w + x1),
                         ay * (1 - ax) * pardo_tensor_get_f64(x, off + y1 * w + x0),
                         ay * ax * pardo_tensor_get_f64(x, off + y1 * w + x1)};
    for (int q = 0; q < 4 && max; q++) *best = fmax(*best, t[q]);
    return t[0] + t[1] + t[2] + t[3];
}

static pardo_tensor *ref_roi(const pardo_tensor *x, const pardo_tensor *rois, const int64_t *bi, int64_t oh,
                             int64_t ow, int64_t ratio, double scale, bool half, bool max) {
    const int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3], R = rois->shape[0];
    pardo_status st;
    pardo_tensor *y = pardo_tensor_new_cpu(x->dtype, 4, (int64_t[]){R, C, oh, ow}, &st);
    ck_assert_ptr_nonnull(y);
    for (int64_t r = 0; r < R; r++) {
        double v[4];
        for (int i = 0; i < 4; i++) v[i] = pardo_tensor_get_f64(rois, r * 4 + i) * scale - (half ? 0.5 : 0);
        double rw = v[2] - v[0], rh = v[3] - v[1];
        if (!half) rw = fmax(rw, 1), rh = fmax(rh, 1);
        int64_t gh = ratio ? ratio : (int64_t)ceil(rh / (double)oh), gw = ratio ? ratio : (int64_t)ceil(rw / (double)ow);
        if (gh < 0) gh = 0; /* a reversed ROI: no samples */
        if (gw < 0) gw = 0;
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < oh * ow; i++) {
                const int64_t ph = i / ow, pw = i % ow;
                double sum = 0, best = -INFINITY;
                for (int64_t s = 0; s < gh * gw; s++) {
                    const double sy = v[1] + rh / (double)oh * ((double)ph + ((double)(s / gw) + 0.5) / (double)gh);
                    const double sx = v[0] + rw / (double)ow * ((double)pw + ((double)(s % gw) + 0.5) / (double)gw);
                    sum += ref_sample(x, (bi[r] * C + c) * H * W, H, W, sy, sx, max, &best);
                }
                const double n = gh * gw > 0 ? (double)(gh * gw) : 1;
                pardo_tensor_set_f64(y, (r * C + c) * oh * ow + i, max ? (gh * gw > 0 ? best : 0) : sum / n);
            }
    }
    return y;
}

START_TEST(test_roi_reference) {
    static const pardo_dtype dts[] = {PARDO_F64, PARDO_F32};
    test_rng r = {21};
    const int64_t bis[5] = {1, 0, 1, 1, 0};
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 8; k++) {
            const bool half = k & 1, max = k & 2, adaptive = k & 4;
            pardo_tensor *x = test_tensor_random(&r, dts[t], 4, (int64_t[]){2, 3, 7, 6}, -1, 1);
            /* ROIs inside, partly outside, past the edge by more than a pixel, tiny (under a pixel), reversed */
            const double rv[20] = {0.5, 1, 5, 6, -2, -1.5, 3, 4, 4, 5, 9, 10, 2, 2, 2.3, 2.2, 6, 6, 1, 1};
            pardo_tensor *rois = test_tensor_from(dts[t], 2, (int64_t[]){5, 4}, rv), *bi = i64_tensor(5, bis),
                         *y = NULL;
            pardo_tensor *in[3] = {x, rois, bi};
            char attrs[256];
            snprintf(attrs, sizeof attrs,
                     "{\"output_height\": 3, \"output_width\": 2, \"sampling_ratio\": %d, \"spatial_scale\": 0.9, "
                     "\"mode\": \"%s\", \"coordinate_transformation_mode\": \"%s\"}",
                     adaptive ? 0 : 2, max ? "max" : "avg", half ? "half_pixel" : "output_half_pixel");
            pardo_status st;
            ck_assert_msg(test_run_op("roi_align", attrs, 3, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
            pardo_tensor *want = ref_roi(x, rois, bis, 3, 2, adaptive ? 0 : 2, 0.9, half, max);
            test_assert_close(y, want, t ? 1e-5 : 1e-12, t ? 1e-6 : 1e-12);
            pardo_tensor_release(want);
            pardo_tensor_release(y);
            for (int i = 0; i < 3; i++) pardo_tensor_release(in[i]);
        }
}
END_TEST

START_TEST(test_roi_err) {
    pardo_type x = test_type(PARDO_F32, 4, (int64_t[]){2, 3, 5, 5}), rois = test_type(PARDO_F32, 2, (int64_t[]){4, 4}),
               bi = test_type(PARDO_I64, 1, (int64_t[]){4}), y;
    const pardo_type *in[3] = {&x, &rois, &bi};
    pardo_status st;
    ck_assert_int_eq(test_infer_op("roi_align", "{\"output_height\": 2, \"output_width\": 3}", 3, in, 1, &y, &st),
                     PARDO_OK);
    ck_assert(pardo_shape_equal(y.ndim, y.shape, 4, (int64_t[]){4, 3, 2, 3}));
    static const char *const bad[] = {"{\"mode\": \"sum\"}", "{\"coordinate_transformation_mode\": \"align_corners\"}",
                                      "{\"output_height\": 0}", "{\"sampling_ratio\": -1}", "{\"spatial_scale\": 0}"};
    static const char *const what[] = {"'mode'", "'coordinate_transformation_mode'", "'output_height'",
                                       "'sampling_ratio'", "'spatial_scale'"};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(test_infer_op("roi_align", bad[i], 3, in, 1, &y, &st), PARDO_EINVAL);
        ck_assert_msg(strstr(st.msg, what[i]) != NULL, "%s", st.msg);
    }
    pardo_type r5 = test_type(PARDO_F32, 2, (int64_t[]){4, 5}), rd = test_type(PARDO_F64, 2, (int64_t[]){4, 4}),
               b3 = test_type(PARDO_I64, 1, (int64_t[]){3}), bf = test_type(PARDO_F32, 1, (int64_t[]){4});
    in[1] = &r5;
    ck_assert_int_eq(test_infer_op("roi_align", NULL, 3, in, 1, &y, &st), PARDO_ESHAPE);
    in[1] = &rd;
    ck_assert_int_eq(test_infer_op("roi_align", NULL, 3, in, 1, &y, &st), PARDO_ESHAPE);
    in[1] = &rois;
    in[2] = &b3;
    ck_assert_int_eq(test_infer_op("roi_align", NULL, 3, in, 1, &y, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "one index per ROI") != NULL, "%s", st.msg);
    in[2] = &bf;
    ck_assert_int_eq(test_infer_op("roi_align", NULL, 3, in, 1, &y, &st), PARDO_ESHAPE);
    /* at run time: a batch index outside X's batch */
    test_rng r = {5};
    pardo_tensor *xt = test_tensor_random(&r, PARDO_F32, 4, (int64_t[]){2, 1, 4, 4}, -1, 1),
                 *rt = test_tensor_from(PARDO_F32, 2, (int64_t[]){1, 4}, (double[]){0, 0, 2, 2}),
                 *bt = i64_tensor(1, (int64_t[]){2}), *yt = NULL;
    pardo_tensor *tin[3] = {xt, rt, bt};
    ck_assert_int_eq(test_run_op("roi_align", NULL, 3, tin, 1, &yt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'batch_indices'") && strstr(st.msg, "0 to 1"), "%s", st.msg);
    for (int i = 0; i < 3; i++) pardo_tensor_release(tin[i]);
}
END_TEST

Suite *make_ops_roi_align_suite(void) {
    Suite *s = suite_create("ops_roi_align");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_roi_linear_exact);
    tcase_add_test(core, test_roi_reference);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_roi_err);
    suite_add_tcase(s, errors);
    return s;
}
