/* check_ops_nms.c - ops/nms.c: non_max_suppression on ONNX's own worked
 * example (six boxes, three overlapping pairs; its selected indices), with a
 * score threshold, in the center-point form, with no max (nothing kept); a
 * bad boxes shape refused. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

static const double corner_boxes[24] = {0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, -0.1, 1, 0.9,
                                        0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100, 1, 101};
static const double box_scores[6] = {0.9, 0.75, 0.6, 0.95, 0.5, 0.3};

/* Runs non_max_suppression and checks its rows against want (k rows of (batch, class, box)). */
static void check_nms(const char *attrs, const double *boxes, double max_out, double score_thr, int k,
                      const int64_t *want) {
    pardo_tensor *b = test_tensor_from(PARDO_F32, 3, (int64_t[]){1, 6, 4}, boxes);
    pardo_tensor *s = test_tensor_from(PARDO_F32, 3, (int64_t[]){1, 1, 6}, box_scores);
    pardo_tensor *m = test_tensor_from(PARDO_I64, 1, (int64_t[]){1}, (double[]){max_out});
    pardo_tensor *iou = test_tensor_from(PARDO_F32, 1, (int64_t[]){1}, (double[]){0.5});
    pardo_tensor *thr = test_tensor_from(PARDO_F32, 1, (int64_t[]){1}, (double[]){score_thr});
    pardo_tensor *in[5] = {b, s, m, iou, score_thr >= 0 ? thr : NULL}, *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("non_max_suppression", attrs, 5, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->dtype, PARDO_I64);
    ck_assert_int_eq(y->shape[0], k);
    for (int i = 0; i < 3 * k; i++) ck_assert_int_eq(((const int64_t *)pardo_tensor_data(y))[i], want[i]);
    pardo_tensor_release(y);
    pardo_tensor *const all[] = {b, s, m, iou, thr};
    for (int i = 0; i < 5; i++) pardo_tensor_release(all[i]);
}

START_TEST(test_nms_example) {
    check_nms(NULL, corner_boxes, 3, -1, 3, (int64_t[]){0, 0, 3, 0, 0, 0, 0, 0, 5});
    check_nms(NULL, corner_boxes, 3, 0.4, 2, (int64_t[]){0, 0, 3, 0, 0, 0});
    check_nms(NULL, corner_boxes, 0, -1, 0, NULL);
    double flipped[24], center[24];
    memcpy(flipped, corner_boxes, sizeof flipped);
    flipped[0] = 1; /* the first box's corners given the other way round */
    flipped[2] = 0;
    check_nms(NULL, flipped, 3, -1, 3, (int64_t[]){0, 0, 3, 0, 0, 0, 0, 0, 5});
    for (int i = 0; i < 6; i++) {
        const double *c = corner_boxes + 4 * i;
        center[4 * i] = (c[1] + c[3]) / 2; /* x center, y center, width, height */
        center[4 * i + 1] = (c[0] + c[2]) / 2;
        center[4 * i + 2] = c[3] - c[1];
        center[4 * i + 3] = c[2] - c[0];
    }
    check_nms("{\"center_point_box\": 1}", center, 3, -1, 3, (int64_t[]){0, 0, 3, 0, 0, 0, 0, 0, 5});
}
END_TEST

START_TEST(test_nms_errors) {
    pardo_status st;
    pardo_type b = test_type(PARDO_F32, 3, (int64_t[]){1, 6, 3}), s = test_type(PARDO_F32, 3, (int64_t[]){1, 1, 6}),
               s2 = test_type(PARDO_F32, 3, (int64_t[]){1, 1, 5}), b4 = test_type(PARDO_F32, 3, (int64_t[]){1, 6, 4}),
               out;
    const pardo_type *t1[2] = {&b, &s}, *t2[2] = {&b4, &s2};
    ck_assert_int_eq(test_infer_op("non_max_suppression", NULL, 2, t1, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("non_max_suppression", NULL, 2, t2, 1, &out, &st), PARDO_ESHAPE);
}
END_TEST

Suite *make_ops_nms_suite(void) {
    Suite *s = suite_create("ops_nms");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_nms_example);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_nms_errors);
    suite_add_tcase(s, errors);
    return s;
}
