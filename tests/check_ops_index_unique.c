/* check_ops_index_unique.c - ops/index_unique.c and ops/reverse_sequence.c:
 * unique (sorted and in order of appearance, flattened and along each axis
 * of a 3-D tensor with repeated slices, int64 data, NaN) against a naive
 * O(n^2) search written here; non_zero against a scan of the elements;
 * reverse_sequence on both layouts with an inner dim against the
 * definition; the refusals. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

static void expect_values(const pardo_tensor *y, int64_t n, const double *want, const char *what) {
    ck_assert_int_eq(y->numel, n);
    for (int64_t i = 0; i < n; i++) {
        const double g = pardo_tensor_get_f64(y, i);
        ck_assert_msg(g == want[i] || (isnan(g) && isnan(want[i])), "%s[%lld]: %g, want %g", what, (long long)i, g,
                      want[i]);
    }
}

/* Element e of slice s of x seen as [outer, n, inner] (slice s's elements in row-major order of the rest). */
static double slice_elem(const double *x, int64_t n, int64_t inner, int64_t s, int64_t e) {
    return x[((e / inner) * n + s) * inner + e % inner];
}

/* Naive order: NaN above all, NaN equal to NaN. */
static int naive_cmp(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : isnan(a) ? 1 : -1;
    return a < b ? -1 : a > b ? 1 : 0;
}

static int naive_slice_cmp(const double *x, int64_t n, int64_t inner, int64_t len, int64_t a, int64_t b) {
    for (int64_t e = 0; e < len; e++) {
        const int c = naive_cmp(slice_elem(x, n, inner, a, e), slice_elem(x, n, inner, b, e));
        if (c) return c;
    }
    return 0;
}

/* Runs unique on x (dtype dt, shape) with attrs and checks its four outputs against a naive search: the
 * distinct slices by first appearance, then (sorted) put in order by repeated selection of the least. */
static void check_unique(pardo_dtype dt, int nd, const int64_t *shape, const double *xv, int axis, bool sorted) {
    int64_t numel = 1, outer = 1, n, inner = 1;
    for (int d = 0; d < nd; d++) numel *= shape[d];
    if (axis < 0) {
        n = numel;
    } else {
        n = shape[axis];
        for (int d = 0; d < axis; d++) outer *= shape[d];
        for (int d = axis + 1; d < nd; d++) inner *= shape[d];
    }
    const int64_t len = outer * inner;
    int64_t first[64], u = 0;
    for (int64_t s = 0; s < n; s++) {
        bool seen = false;
        for (int64_t g = 0; g < u && !seen; g++) seen = naive_slice_cmp(xv, n, inner, len, first[g], s) == 0;
        if (!seen) first[u++] = s;
    }
    if (sorted)
        for (int64_t g = 0; g < u; g++) {
            int64_t best = g;
            for (int64_t h = g + 1; h < u; h++)
                if (naive_slice_cmp(xv, n, inner, len, first[h], first[best]) < 0) best = h;
            const int64_t t = first[g];
            first[g] = first[best];
            first[best] = t;
        }
    double wy[256], wi[64], winv[64], wc[64];
    for (int64_t g = 0; g < u; g++) {
        wi[g] = (double)first[g];
        wc[g] = 0;
        for (int64_t s = 0; s < n; s++)
            if (naive_slice_cmp(xv, n, inner, len, first[g], s) == 0) wc[g]++, winv[s] = (double)g;
    }
    /* Y [outer, u, inner] */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t g = 0; g < u; g++)
            for (int64_t q = 0; q < inner; q++) wy[(o * u + g) * inner + q] = xv[(o * n + first[g]) * inner + q];
    char attrs[64];
    if (axis >= 0) snprintf(attrs, sizeof attrs, "{\"axis\": %d, \"sorted\": %s}", axis, sorted ? "true" : "false");
    else snprintf(attrs, sizeof attrs, "{\"sorted\": %s}", sorted ? "true" : "false");
    pardo_tensor *x = test_tensor_from(dt, nd, shape, xv), *y[4] = {NULL, NULL, NULL, NULL};
    pardo_status st;
    ck_assert_msg(test_run_op("unique", attrs, 1, &x, 4, y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y[0]->dtype, dt);
    ck_assert_int_eq(y[0]->ndim, axis >= 0 ? nd : 1);
    if (axis >= 0) ck_assert_int_eq(y[0]->shape[axis], u);
    expect_values(y[0], outer * u * inner, wy, "Y");
    expect_values(y[1], u, wi, "indices");
    expect_values(y[2], n, winv, "inverse_indices");
    expect_values(y[3], u, wc, "counts");
    for (int k = 0; k < 4; k++) pardo_tensor_release(y[k]);
    pardo_tensor_release(x);
}

START_TEST(test_unique) {
    /* [2, 4, 3]: along axis 1 slices 0 and 2 are equal, along axis 2 columns 0 and 2 */
    static const double xv[24] = {1, 0, 1, 2, 5, 2, 1, 0, 1, 3, 3, 3, 0, 7, 0, 2, 5, 2, 0, 7, 0, -1, 4, -1};
    static const int64_t s3[3] = {2, 4, 3};
    for (int sorted = 0; sorted < 2; sorted++) {
        check_unique(PARDO_F32, 3, s3, xv, -1, sorted);
        for (int axis = 0; axis < 3; axis++) check_unique(PARDO_F32, 3, s3, xv, axis, sorted);
        check_unique(PARDO_I64, 3, s3, xv, 1, sorted);
    }
    /* hand-checked: X = [2, 1, 1, 3, 4, 3] flattened, sorted: Y 1 2 3 4, indices 1 0 3 4, inverse 1 0 0 2 3 2,
     * counts 2 1 2 1 (ONNX's example); NaN twice is one value, last */
    pardo_tensor *x = test_tensor_from(PARDO_F64, 1, (int64_t[]){7}, (double[]){2, 1, NAN, 1, 3, 4, NAN});
    pardo_tensor *y[4] = {NULL, NULL, NULL, NULL};
    pardo_status st;
    ck_assert_msg(test_run_op("unique", NULL, 1, &x, 4, y, &st) == PARDO_OK, "%s", st.msg);
    expect_values(y[0], 5, (double[]){1, 2, 3, 4, NAN}, "Y with NaN");
    expect_values(y[1], 5, (double[]){1, 0, 4, 5, 2}, "indices with NaN");
    expect_values(y[2], 7, (double[]){1, 0, 4, 0, 2, 3, 4}, "inverse with NaN");
    expect_values(y[3], 5, (double[]){2, 1, 1, 1, 2}, "counts with NaN");
    for (int k = 0; k < 4; k++) pardo_tensor_release(y[k]);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_non_zero) {
    static const double xv[12] = {0, 3, 0, -1, 0, 0, 2, 0, 5, 0, 0, 1};
    const int64_t shape[3] = {2, 3, 2};
    pardo_tensor *x = test_tensor_from(PARDO_I32, 3, shape, xv), *y = NULL;
    pardo_status st;
    ck_assert_msg(test_run_op("non_zero", NULL, 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    double want[3 * 12];
    int64_t nnz = 0;
    for (int i = 0; i < 12; i++) nnz += xv[i] != 0;
    int64_t k = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++)
                if (xv[(a * 3 + b) * 2 + c] != 0) {
                    want[k] = a, want[nnz + k] = b, want[2 * nnz + k] = c;
                    k++;
                }
    ck_assert_int_eq(y->ndim, 2);
    ck_assert_int_eq(y->shape[0], 3);
    ck_assert_int_eq(y->shape[1], nnz);
    expect_values(y, 3 * nnz, want, "non_zero");
    pardo_tensor_release(y);
    pardo_tensor_release(x);
    /* all zeros: [1, 0] */
    x = test_tensor_from(PARDO_BOOL, 1, (int64_t[]){3}, (double[]){0, 0, 0});
    y = NULL;
    ck_assert_msg(test_run_op("non_zero", NULL, 1, &x, 1, &y, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_int_eq(y->shape[0], 1);
    ck_assert_int_eq(y->shape[1], 0);
    pardo_tensor_release(y);
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_reverse_sequence) {
    /* X [3, 4, 2] as [batch, time, inner] (batch_axis 0) and as [time, batch, inner] (batch_axis 1) */
    double xv[24];
    for (int i = 0; i < 24; i++) xv[i] = i * 1.5 - 7;
    const int64_t shape[3] = {3, 4, 2};
    pardo_tensor *x = test_tensor_from(PARDO_F32, 3, shape, xv);
    for (int ba = 0; ba < 2; ba++) {
        const int nb = ba == 0 ? 3 : 4, nt = ba == 0 ? 4 : 3;
        const double lens[4] = {nt, 1, 0, 2};
        pardo_tensor *l = test_tensor_from(PARDO_I64, 1, (int64_t[]){nb}, lens), *in[2] = {x, l}, *y = NULL;
        pardo_status st;
        ck_assert_msg(test_run_op("reverse_sequence", ba == 0 ? "{\"batch_axis\": 0, \"time_axis\": 1}" : NULL, 2, in,
                                  1, &y, &st) == PARDO_OK, "%s", st.msg);
        double want[24];
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < nt; t++)
                for (int q = 0; q < 2; q++) {
                    const int from = t < (int)lens[b] ? (int)lens[b] - 1 - t : t;
                    const int at = ba == 0 ? (b * 4 + t) * 2 + q : (t * 4 + b) * 2 + q;
                    want[at] = xv[ba == 0 ? (b * 4 + from) * 2 + q : (from * 4 + b) * 2 + q];
                }
        expect_values(y, 24, want, ba == 0 ? "batch-major" : "time-major");
        pardo_tensor_release(y);
        pardo_tensor_release(l);
    }
    pardo_tensor_release(x);
}
END_TEST

START_TEST(test_index_unique_errors) {
    pardo_status st;
    pardo_tensor *x = test_tensor_from(PARDO_F32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    pardo_tensor *y[4] = {NULL, NULL, NULL, NULL};
    ck_assert_int_eq(test_run_op("unique", "{\"axis\": 2}", 1, &x, 4, y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "axis"), "%s", st.msg);
    pardo_tensor *l = test_tensor_from(PARDO_I64, 1, (int64_t[]){3}, (double[]){1, 4, 0}), *in[2] = {x, l};
    /* batch_axis 1: batch 3, time 2; a length of 4 is past the time dim */
    ck_assert_int_eq(test_run_op("reverse_sequence", NULL, 2, in, 1, y, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "sequence_lens"), "%s", st.msg);
    ck_assert_int_eq(test_run_op("reverse_sequence", "{\"batch_axis\": 0, \"time_axis\": 0}", 2, in, 1, y, &st),
                     PARDO_EINVAL);
    pardo_type tx = test_type(PARDO_F32, 2, (int64_t[]){2, 3}), tl = test_type(PARDO_F32, 1, (int64_t[]){3}), out;
    const pardo_type *ty[2] = {&tx, &tl};
    ck_assert_int_eq(test_infer_op("reverse_sequence", NULL, 2, ty, 1, &out, &st), PARDO_ESHAPE);
    tl = test_type(PARDO_I64, 1, (int64_t[]){2});
    ck_assert_int_eq(test_infer_op("reverse_sequence", NULL, 2, ty, 1, &out, &st), PARDO_ESHAPE);
    pardo_tensor_release(l);
    pardo_tensor_release(x);
}
END_TEST

Suite *make_ops_index_unique_suite(void) {
    Suite *s = suite_create("ops_index_unique");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_unique);
    tcase_add_test(core, test_non_zero);
    tcase_add_test(core, test_reverse_sequence);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_index_unique_errors);
    suite_add_tcase(s, errors);
    return s;
}
