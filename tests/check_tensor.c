/* check_tensor.c - dtypes, shapes, reference counting, copies, views. */
#include <check.h>
#include <string.h>

#include "check_suites.h"
#include "core/tensor.h"
#include "test_util.h"

START_TEST(dtype_names_and_sizes) {
    const char *names[] = {"float32", "float64", "int32", "int64", "bool"};
    const size_t sizes[] = {4, 8, 4, 8, 1};
    for (int i = 0; i < PARDO_DTYPE_COUNT; i++) {
        ck_assert_str_eq(pardo_dtype_name((pardo_dtype)i), names[i]);
        ck_assert_int_eq(pardo_dtype_from_name(names[i]), i);
        ck_assert_uint_eq(pardo_dtype_size((pardo_dtype)i), sizes[i]);
    }
    ck_assert_int_eq(pardo_dtype_from_name("float16"), PARDO_DTYPE_UNKNOWN);
    ck_assert_int_eq(pardo_dtype_from_name(NULL), PARDO_DTYPE_UNKNOWN);
    ck_assert(pardo_dtype_is_float(PARDO_F64) && !pardo_dtype_is_float(PARDO_I32));
    ck_assert(pardo_dtype_is_int(PARDO_I64) && !pardo_dtype_is_int(PARDO_BOOL));
}
END_TEST

START_TEST(shapes) {
    int64_t s[3] = {2, -1, 4};
    char buf[64];
    ck_assert_int_eq(pardo_shape_numel(3, s), -1);
    s[1] = 3;
    ck_assert_int_eq(pardo_shape_numel(3, s), 24);
    ck_assert_int_eq(pardo_shape_numel(0, s), 1);
    ck_assert_str_eq(pardo_shape_str(3, s, buf, sizeof buf), "[2, 3, 4]");
    ck_assert_str_eq(pardo_shape_str(0, s, buf, sizeof buf), "[]");
    ck_assert_str_eq(pardo_shape_str(-1, s, buf, sizeof buf), "[?]");
    int64_t t[3] = {2, 3, 4};
    ck_assert(pardo_shape_equal(3, s, 3, t));
    ck_assert(!pardo_shape_equal(2, s, 3, t));
}
END_TEST

START_TEST(new_is_zeroed_and_refcounted) {
    pardo_status st;
    int64_t shape[2] = {3, 5};
    pardo_tensor *t = pardo_tensor_new(PARDO_F32, 2, shape, &st);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->numel, 15);
    ck_assert_uint_eq(t->nbytes, 60);
    ck_assert_int_eq(t->mem->head, PARDO_MEM_UNINITIALIZED);
    const float *p = pardo_tensor_cpu(t, &st);
    ck_assert_ptr_nonnull(p);
    for (int i = 0; i < 15; i++) ck_assert(p[i] == 0.0f);
    ck_assert_uint_eq((uintptr_t)p % PARDO_HOST_ALIGN, 0);
    ck_assert_ptr_eq(pardo_tensor_retain(t), t);
    ck_assert_int_eq(atomic_load(&t->refs), 2);
    pardo_tensor_release(t);
    ck_assert_int_eq(atomic_load(&t->refs), 1);
    pardo_tensor_release(t);
    pardo_tensor_release(NULL);
}
END_TEST

START_TEST(zero_size_and_scalar) {
    pardo_status st;
    int64_t shape[2] = {0, 7};
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_I64, 2, shape, &st);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->numel, 0);
    ck_assert_uint_eq(t->nbytes, 0);
    pardo_tensor_release(t);
    pardo_tensor *s = pardo_tensor_new_cpu(PARDO_F64, 0, NULL, &st);
    ck_assert_int_eq(s->numel, 1);
    pardo_tensor_set_f64(s, 0, 2.5);
    ck_assert_double_eq(pardo_tensor_get_f64(s, 0), 2.5);
    pardo_tensor_release(s);
}
END_TEST

START_TEST(set_get_convert_each_dtype) {
    pardo_status st;
    int64_t n = 3;
    for (int d = 0; d < PARDO_DTYPE_COUNT; d++) {
        pardo_tensor *t = pardo_tensor_new_cpu((pardo_dtype)d, 1, &n, &st);
        pardo_tensor_set_f64(t, 0, 1.0);
        pardo_tensor_set_f64(t, 2, d == PARDO_BOOL ? 0.0 : 7.0);
        ck_assert_double_eq(pardo_tensor_get_f64(t, 0), 1.0);
        ck_assert_double_eq(pardo_tensor_get_f64(t, 1), 0.0);
        ck_assert_double_eq(pardo_tensor_get_f64(t, 2), d == PARDO_BOOL ? 0.0 : 7.0);
        pardo_tensor_release(t);
    }
}
END_TEST

START_TEST(copy_and_clone) {
    pardo_status st;
    test_rng r = {42};
    int64_t shape[2] = {4, 3};
    pardo_tensor *a = test_tensor_random(&r, PARDO_F32, 2, shape, -1, 1);
    pardo_tensor *b = pardo_tensor_clone(a, &st);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(b->mem, a->mem);
    test_assert_close(b, a, 0, 0);
    pardo_tensor *c = pardo_tensor_new(PARDO_F64, 2, shape, &st);
    ck_assert_int_eq(pardo_tensor_copy(c, a, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "float32") && strstr(st.msg, "float64"), "%s", st.msg);
    pardo_tensor_release(a);
    pardo_tensor_release(b);
    pardo_tensor_release(c);
}
END_TEST

START_TEST(bad_arguments) {
    pardo_status st;
    int64_t neg[1] = {-1};
    ck_assert_ptr_null(pardo_tensor_new(PARDO_F32, 1, neg, &st));
    ck_assert_int_eq(st.code, PARDO_EINVAL);
    ck_assert_ptr_null(pardo_tensor_new(PARDO_F32, PARDO_MAX_DIMS + 1, neg, &st));
    ck_assert_ptr_null(pardo_tensor_new((pardo_dtype)17, 0, NULL, &st));
    int64_t huge[2] = {INT64_MAX / 2, 4};
    ck_assert_ptr_null(pardo_tensor_new(PARDO_F32, 2, huge, &st));
    ck_assert_int_eq(st.code, PARDO_EINVAL);
}
END_TEST

/* A view reads its base's data from the offset on with no copy, holds the
 * base (one reference) until it is freed or viewed elsewhere, and counts
 * no bytes of its own; bad views are refused. */
START_TEST(views_read_their_base_and_hold_it) {
    pardo_status st;
    int64_t bs[] = {4, 3}, vs[] = {2, 3};
    pardo_tensor *base = pardo_tensor_new_cpu(PARDO_F32, 2, bs, &st);
    pardo_tensor *other = pardo_tensor_new_cpu(PARDO_F32, 2, bs, &st);
    for (int64_t i = 0; i < 12; i++) {
        pardo_tensor_set_f64(base, i, (double)i);
        pardo_tensor_set_f64(other, i, (double)(100 + i));
    }
    const int64_t before = pardo_tensor_bytes_in_use();
    pardo_tensor *v = pardo_tensor_new(PARDO_F32, 2, vs, &st);
    ck_assert_int_eq(pardo_tensor_bytes_in_use(), before + 24);
    ck_assert_int_eq(pardo_tensor_view_of(v, base, 3, &st), PARDO_OK); /* rows 1 and 2 */
    ck_assert_int_eq(pardo_tensor_bytes_in_use(), before);
    ck_assert_int_eq(atomic_load(&base->refs), 2);
    ck_assert_ptr_eq(pardo_tensor_data(v), (float *)pardo_tensor_data(base) + 3);
    for (int64_t i = 0; i < 6; i++) ck_assert_double_eq(pardo_tensor_get_f64(v, i), (double)(3 + i));
    ck_assert_int_eq(pardo_tensor_view_of(v, other, 6, &st), PARDO_OK); /* elsewhere: base let go */
    ck_assert_int_eq(atomic_load(&base->refs), 1);
    ck_assert_int_eq(atomic_load(&other->refs), 2);
    ck_assert_double_eq(pardo_tensor_get_f64(v, 0), 106);
    pardo_tensor_release(other); /* the view keeps it alive */
    ck_assert_double_eq(pardo_tensor_get_f64(v, 5), 111);
    pardo_tensor_release(v);
    ck_assert_int_eq(pardo_tensor_bytes_in_use(), before - 48);
    /* refused: past the end, another dtype, an array, itself */
    pardo_tensor *w = pardo_tensor_new(PARDO_F32, 2, vs, &st), *d = pardo_tensor_new(PARDO_F64, 2, vs, &st);
    ck_assert_int_eq(pardo_tensor_view_of(w, base, 7, &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_tensor_view_of(w, base, -1, &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_tensor_view_of(d, base, 0, &st), PARDO_EINVAL);
    ck_assert_int_eq(pardo_tensor_view_of(w, w, 0, &st), PARDO_EINVAL);
    pardo_tensor *arr = pardo_tensor_array_new(PARDO_F32, &st);
    ck_assert_int_eq(pardo_tensor_view_of(arr, base, 0, &st), PARDO_EINVAL);
    ck_assert_ptr_null(w->base);
    int64_t none[] = {0, 3};
    pardo_tensor *empty = pardo_tensor_new(PARDO_F32, 2, none, &st);
    ck_assert_int_eq(pardo_tensor_view_of(empty, base, 12, &st), PARDO_OK); /* nothing to read */
    ck_assert_ptr_null(empty->base);
    pardo_tensor_release(empty);
    pardo_tensor_release(arr);
    pardo_tensor_release(w);
    pardo_tensor_release(d);
    pardo_tensor_release(base);
}
END_TEST

Suite *make_tensor_suite(void) {
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, dtype_names_and_sizes);
    tcase_add_test(tc, shapes);
    tcase_add_test(tc, new_is_zeroed_and_refcounted);
    tcase_add_test(tc, zero_size_and_scalar);
    tcase_add_test(tc, set_get_convert_each_dtype);
    tcase_add_test(tc, copy_and_clone);
    tcase_add_test(tc, views_read_their_base_and_hold_it);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, bad_arguments);
    suite_add_tcase(s, te);
    return s;
}
