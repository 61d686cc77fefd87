/* check_ops_resize.c - ops/resize.c against values worked out by hand from
 * ONNX's coordinate formulas: nearest with asymmetric coordinates rounding
 * down (numpy's repeat), the round_prefer_floor / round_prefer_ceil ties,
 * linear with align_corners and half_pixel, cubic at integral coordinates
 * (the input back), tf_crop_and_resize inside and outside its roi; the
 * refusals. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

/* Runs resize on x with roi, scales and sizes (NULL: absent) and checks Y's numel values. */
static void check_resize(const char *attrs, pardo_tensor *x, pardo_tensor *roi, pardo_tensor *sc, pardo_tensor *sz,
                         int n, const double *want) {
    pardo_tensor *in[4] = {x, roi, sc, sz}, *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("resize", attrs, 4, in, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
    ck_assert_int_eq(y->numel, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(pardo_tensor_get_f64(y, i) - want[i]) <= 1e-5 * fmax(1, fabs(want[i])), "%s [%d]: %g, want %g",
                      attrs, i, pardo_tensor_get_f64(y, i), want[i]);
    pardo_tensor_release(y);
}

START_TEST(test_resize_modes) {
    pardo_tensor *x4 = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 1, 2, 2}, (double[]){1, 2, 3, 4});
    pardo_tensor *s4 = test_tensor_from(PARDO_F32, 1, (int64_t[]){4}, (double[]){1, 1, 2, 2});
    check_resize("{\"coordinate_transformation_mode\": \"asymmetric\", \"nearest_mode\": \"floor\"}", x4, NULL, s4,
                 NULL, 16, (double[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
    pardo_tensor *x2 = test_tensor_from(PARDO_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    pardo_tensor *z4 = test_tensor_from(PARDO_I64, 1, (int64_t[]){1}, (double[]){4});
    check_resize("{\"coordinate_transformation_mode\": \"asymmetric\"}", x2, NULL, NULL, z4, 4,
                 (double[]){1, 1, 2, 2});
    check_resize("{\"coordinate_transformation_mode\": \"asymmetric\", \"nearest_mode\": \"round_prefer_ceil\"}", x2,
                 NULL, NULL, z4, 4, (double[]){1, 2, 2, 2});
    pardo_tensor *xr = test_tensor_from(PARDO_F32, 2, (int64_t[]){1, 4}, (double[]){0, 1, 2, 3});
    pardo_tensor *z7 = test_tensor_from(PARDO_I64, 1, (int64_t[]){2}, (double[]){1, 7});
    check_resize("{\"mode\": \"linear\", \"coordinate_transformation_mode\": \"align_corners\"}", xr, NULL, NULL, z7,
                 7, (double[]){0, 0.5, 1, 1.5, 2, 2.5, 3});
    pardo_tensor *x1 = test_tensor_from(PARDO_F64, 1, (int64_t[]){4}, (double[]){0, 10, 20, 30});
    pardo_tensor *half = test_tensor_from(PARDO_F32, 1, (int64_t[]){1}, (double[]){0.5});
    check_resize("{\"mode\": \"linear\"}", x1, NULL, half, NULL, 2, (double[]){5, 25});
    pardo_tensor *one = test_tensor_from(PARDO_F32, 1, (int64_t[]){1}, (double[]){1});
    check_resize("{\"mode\": \"cubic\"}", x1, NULL, one, NULL, 4, (double[]){0, 10, 20, 30});
    pardo_tensor *z3 = test_tensor_from(PARDO_I64, 1, (int64_t[]){1}, (double[]){3});
    pardo_tensor *roi_in = test_tensor_from(PARDO_F32, 1, (int64_t[]){2}, (double[]){0.5, 1.0});
    pardo_tensor *roi_out = test_tensor_from(PARDO_F32, 1, (int64_t[]){2}, (double[]){0.5, 1.5});
    static const char crop[] = "{\"mode\": \"linear\", \"coordinate_transformation_mode\": \"tf_crop_and_resize\", "
                               "\"extrapolation_value\": 7}";
    check_resize(crop, x1, roi_in, NULL, z3, 3, (double[]){15, 22.5, 30});
    check_resize(crop, x1, roi_out, NULL, z3, 3, (double[]){15, 30, 7});
    pardo_tensor *const all[] = {x4, s4, x2, z4, xr, z7, x1, half, one, z3, roi_in, roi_out};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) pardo_tensor_release(all[k]);
}
END_TEST

START_TEST(test_resize_errors) {
    pardo_status st;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    pardo_tensor *z = test_tensor_from(PARDO_I64, 1, (int64_t[]){1}, (double[]){4});
    pardo_tensor *in[4] = {x, NULL, NULL, z}, *y = NULL;
    ck_assert_int_eq(test_run_op("resize", NULL, 4, in, 1, &y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "sizes"), "%s", st.msg);
    ck_assert_int_eq(test_run_op("resize", "{\"mode\": \"area\"}", 4, in, 1, &y, &st), PARDO_EINVAL);
    pardo_type tx = test_type(PARDO_F32, 2, (int64_t[]){2, 2}), out;
    const pardo_type *t1[1] = {&tx};
    ck_assert_int_eq(test_infer_op("resize", NULL, 1, t1, 1, &out, &st), PARDO_EINVAL);
    pardo_tensor_release(z);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_ops_resize_suite(void) {
    Suite *s = suite_create("ops_resize");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_resize_modes);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_resize_errors);
    suite_add_tcase(s, errors);
    return s;
}
