/* check_ops_grid_sample.c - ops/grid_sample.c: the grid of the pixel
 * centres (align_corners 1) gives X back in every mode; a point outside
 * reads 0 with zeros padding and the edge with border; bicubic and
 * reflection against PyTorch's grid_sample on a 3x2 image (the values
 * below, from the command in the comment); the refusals. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

static void check_gs(const char *attrs, pardo_tensor *x, pardo_tensor *g, int n, const double *want) {
    pardo_tensor *in[2] = {x, g}, *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("grid_sample", attrs, 2, in, 1, &y, &st) == PARDO_OK, "%s: %s", attrs, st.msg);
    ck_assert_int_eq(y->numel, n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(pardo_tensor_get_f64(y, i) - want[i]) <= 1e-6 * fmax(1, fabs(want[i])),
                      "%s [%d]: %.9g, want %.9g", attrs, i, pardo_tensor_get_f64(y, i), want[i]);
    pardo_tensor_release(y);
}

static const double img[6] = {0, 1, 2, 3, 4, 5}; /* [1, 1, 3, 2] */

START_TEST(test_grid_sample_identity_and_padding) {
    pardo_tensor *x = test_tensor_from(PARDO_F64, 4, (int64_t[]){1, 1, 3, 2}, img);
    double gv[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            gv[(i * 2 + j) * 2] = j * 2.0 - 1; /* x over W = 2 */
            gv[(i * 2 + j) * 2 + 1] = i - 1.0; /* y over H = 3 */
        }
    pardo_tensor *g = test_tensor_from(PARDO_F64, 4, (int64_t[]){1, 3, 2, 2}, gv);
    static const char *const modes[3] = {"bilinear", "nearest", "bicubic"};
    for (int m = 0; m < 3; m++) {
        char attrs[96];
        snprintf(attrs, sizeof attrs, "{\"mode\": \"%s\", \"align_corners\": 1}", modes[m]);
        check_gs(attrs, x, g, 6, img);
    }
    pardo_tensor *out = test_tensor_from(PARDO_F64, 4, (int64_t[]){1, 1, 1, 2}, (double[]){3, 1});
    check_gs("{\"align_corners\": 1}", x, out, 1, (double[]){0});
    check_gs("{\"align_corners\": 1, \"padding_mode\": \"border\"}", x, out, 1, (double[]){5});
    pardo_tensor_release(out);
    pardo_tensor_release(g);
    pardo_tensor_release(x);
}
END_TEST

/* python3 -c "import torch; x = torch.arange(6.).reshape(1, 1, 3, 2); g = torch.tensor([-1, -1, -0.5, -0.5,
 *   -0.2, -0.2, 0, 0, 0, 0, -0.2, -0.2, 0.5, 0.5, 1, 1.]).reshape(1, 2, 4, 2);
 *   print(torch.nn.functional.grid_sample(x, g, mode='bicubic', align_corners=False).ravel().tolist());
 *   print(torch.nn.functional.grid_sample(x, g * 1.7, padding_mode='reflection', align_corners=False)
 *   .ravel().tolist())" */
START_TEST(test_grid_sample_pytorch) {
    static const double gv[16] = {-1, -1, -0.5, -0.5, -0.2, -0.2, 0, 0, 0, 0, -0.2, -0.2, 0.5, 0.5, 1, 1};
    double gr[16];
    for (int i = 0; i < 16; i++) gr[i] = (double)((float)gv[i] * 1.7f);
    pardo_tensor *x = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 1, 3, 2}, img);
    pardo_tensor *g = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 2, 4, 2}, gv);
    pardo_tensor *g2 = test_tensor_from(PARDO_F32, 4, (int64_t[]){1, 2, 4, 2}, gr);
    check_gs("{\"mode\": \"bicubic\"}", x, g, 8,
             (double[]){-0.140625, 0.3828125, 1.7555530071258545, 2.96875, 2.96875, 1.7555530071258545, 5.14453125,
                        1.390625});
    check_gs("{\"padding_mode\": \"reflection\"}", x, g2, 8,
             (double[]){1.3000001907348633, 0.0, 1.1399998664855957, 2.5, 2.5, 1.1399998664855957, 5.0,
                        3.6999995708465576});
    pardo_tensor_release(g2);
    pardo_tensor_release(g);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_grid_sample_errors) {
    pardo_status st;
    pardo_type tx = test_type(PARDO_F32, 4, (int64_t[]){1, 1, 3, 2}), tg = test_type(PARDO_F32, 4, (int64_t[]){1, 2, 4, 3}),
               out;
    const pardo_type *t[2] = {&tx, &tg};
    ck_assert_int_eq(test_infer_op("grid_sample", NULL, 2, t, 1, &out, &st), PARDO_ESHAPE);
    tg.shape[3] = 2;
    ck_assert_int_eq(test_infer_op("grid_sample", "{\"mode\": \"area\"}", 2, t, 1, &out, &st), PARDO_EINVAL);
}
END_TEST

Suite *make_ops_grid_sample_suite(void) {
    Suite *s = suite_create("ops_grid_sample");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_grid_sample_identity_and_padding);
    tcase_add_test(core, test_grid_sample_pytorch);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_grid_sample_errors);
    suite_add_tcase(s, errors);
    return s;
}
