/* check_tensor.c - dtypes, shapes, reference counting, copies, views. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_suites.h"
#include "core/tensor.h"
#include "test_util.h"

START_TEST(dtype_names_and_sizes) {
    const char *names[] = {"float32", "float64", "int32",  "int64",  "bool",    "uint8",   "int8",
                           "int16",   "uint16",  "uint32", "uint64", "float16", "bfloat16"};
    const size_t sizes[] = {4, 8, 4, 8, 1, 1, 1, 2, 2, 4, 8, 2, 2};
    ck_assert_int_eq(PARDO_DTYPE_COUNT, 13);
    ck_assert_int_eq(PARDO_BOOL, 4); /* the first five keep their numbers */
    for (int i = 0; i < PARDO_DTYPE_COUNT; i++) {
        ck_assert_str_eq(pardo_dtype_name((pardo_dtype)i), names[i]);
        ck_assert_int_eq(pardo_dtype_from_name(names[i]), i);
        ck_assert_uint_eq(pardo_dtype_size((pardo_dtype)i), sizes[i]);
        ck_assert(pardo_dtype_is_extra((pardo_dtype)i) == (i > PARDO_BOOL));
    }
    ck_assert_int_eq(pardo_dtype_from_name("float8"), PARDO_DTYPE_UNKNOWN);
    ck_assert_int_eq(pardo_dtype_from_name(NULL), PARDO_DTYPE_UNKNOWN);
    ck_assert_str_eq(pardo_dtype_name(PARDO_DTYPE_COUNT), "unknown");
    ck_assert_uint_eq(pardo_dtype_size(PARDO_DTYPE_COUNT), 0);
    ck_assert(pardo_dtype_is_float(PARDO_F64) && !pardo_dtype_is_float(PARDO_I32) && !pardo_dtype_is_float(PARDO_F16));
    ck_assert(pardo_dtype_is_int(PARDO_I64) && !pardo_dtype_is_int(PARDO_BOOL) && !pardo_dtype_is_int(PARDO_U8));
    ck_assert(pardo_dtype_is_half(PARDO_F16) && pardo_dtype_is_half(PARDO_BF16) && !pardo_dtype_is_half(PARDO_F32));
    const pardo_dtype ints[] = {PARDO_I8, PARDO_I16, PARDO_I32, PARDO_I64, PARDO_U8, PARDO_U16, PARDO_U32, PARDO_U64};
    for (int i = 0; i < 8; i++) {
        ck_assert(pardo_dtype_is_integer(ints[i]));
        ck_assert(pardo_dtype_is_unsigned(ints[i]) == (i >= 4));
    }
    ck_assert(!pardo_dtype_is_integer(PARDO_BOOL) && !pardo_dtype_is_integer(PARDO_F16));
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

/* The new dtypes' extremes and conversions: stored bits read back with memcpy, values worked by hand. */
START_TEST(set_get_extremes_of_the_narrow_dtypes) {
    pardo_status st;
    const struct {
        pardo_dtype dt;
        double set, get;     // stored value and what reads back
        uint64_t bits;       // the stored element's bytes, little-endian
    } cases[] = {
        {PARDO_U8, 255.0, 255.0, 0xff},
        {PARDO_I8, -128.0, -128.0, 0x80},
        {PARDO_I8, -1.9, -1.0, 0xff}, /* truncated toward 0 */
        {PARDO_I16, -32768.0, -32768.0, 0x8000},
        {PARDO_U16, 65535.0, 65535.0, 0xffff},
        {PARDO_U32, 4294967295.0, 4294967295.0, 0xffffffffULL},
        {PARDO_U64, 9223372036854775808.0, 9223372036854775808.0, 0x8000000000000000ULL},
        {PARDO_F16, 0.1, 0.0999755859375, 0x2e66},
        {PARDO_F16, 1e6, HUGE_VAL, 0x7c00},
        {PARDO_BF16, 0.1, 0.10009765625, 0x3dcd},
        {PARDO_BF16, -3.0, -3.0, 0xc040},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t n = 2;
        pardo_tensor *t = pardo_tensor_new_cpu(cases[k].dt, 1, &n, &st);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(t->nbytes, 2 * pardo_dtype_size(cases[k].dt));
        pardo_tensor_set_f64(t, 1, cases[k].set);
        ck_assert_double_eq(pardo_tensor_get_f64(t, 0), 0.0);
        ck_assert_msg(pardo_tensor_get_f64(t, 1) == cases[k].get, "%s case %zu: %.17g", pardo_dtype_name(cases[k].dt),
                      k, pardo_tensor_get_f64(t, 1));
        uint64_t bits = 0;
        memcpy(&bits, (const char *)pardo_tensor_data(t) + pardo_dtype_size(cases[k].dt),
               pardo_dtype_size(cases[k].dt));
        ck_assert_uint_eq(bits, cases[k].bits);
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
    tcase_add_test(tc, set_get_extremes_of_the_narrow_dtypes);
    tcase_add_test(tc, copy_and_clone);
    tcase_add_test(tc, views_read_their_base_and_hold_it);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, bad_arguments);
    suite_add_tcase(s, te);
    return s;
}
