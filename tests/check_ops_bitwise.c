/* check_ops_bitwise.c - bit_shift against a naive reference (multiplying and dividing by powers of two),
 * every unsigned dtype, broadcasting, shifts past the width; and its refusals. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_suites.h"
#include "op_test_util.h"
#include "test_util.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Element i of an unsigned tensor, and a store of v into it (the low bytes). */
static uint64_t u_at(const pardo_tensor *t, int64_t i) {
    const size_t es = pardo_dtype_size(t->dtype);
    uint64_t v = 0;
    memcpy(&v, (const char *)pardo_tensor_data(t) + (size_t)i * es, es);
    return v;
}

static void u_set(pardo_tensor *t, int64_t i, uint64_t v) {
    const size_t es = pardo_dtype_size(t->dtype);
    memcpy((char *)pardo_tensor_data(t) + (size_t)i * es, &v, es);
}

START_TEST(test_bit_shift_against_powers_of_two) {
    static const pardo_dtype dts[] = {PARDO_U8, PARDO_U16, PARDO_U32, PARDO_U64};
    test_rng r = {31};
    for (int t = 0; t < LEN(dts); t++) {
        const int bits = (int)pardo_dtype_size(dts[t]) * 8;
        pardo_status st;
        pardo_tensor *a = pardo_tensor_new_cpu(dts[t], 2, (int64_t[]){3, 5}, &st);
        pardo_tensor *b = pardo_tensor_new_cpu(dts[t], 1, (int64_t[]){5}, &st);
        for (int64_t i = 0; i < 15; i++) u_set(a, i, test_rng_next(&r));
        const uint64_t shifts[5] = {0, 1, (uint64_t)bits - 1, (uint64_t)bits, (uint64_t)bits + 3};
        for (int64_t i = 0; i < 5; i++) u_set(b, i, shifts[i]);
        for (int left = 0; left < 2; left++) {
            pardo_tensor *in[2] = {a, b}, *y = NULL;
            ck_assert_msg(test_run_op("bit_shift", left ? "{\"direction\": \"left\"}" : "{\"direction\": \"right\"}",
                                      2, in, 1, &y, &st) == PARDO_OK, "%s", st.msg);
            ck_assert(y->dtype == dts[t] && y->ndim == 2 && y->shape[0] == 3 && y->shape[1] == 5);
            for (int64_t i = 0; i < 15; i++) {
                const uint64_t x = u_at(a, i), s = shifts[i % 5];
                uint64_t p = 1; /* 2^s, in a loop */
                for (uint64_t k = 0; k < s && k < 64; k++) p *= 2;
                uint64_t want = s >= (uint64_t)bits ? 0 : left ? x * p : x / p;
                if (bits < 64) want %= (uint64_t)1 << bits;
                ck_assert_msg(u_at(y, i) == want, "%s %s %llu by %llu: %llu, expected %llu", pardo_dtype_name(dts[t]),
                              left ? "left" : "right", (unsigned long long)x, (unsigned long long)s,
                              (unsigned long long)u_at(y, i), (unsigned long long)want);
            }
            pardo_tensor_release(y);
        }
        pardo_tensor_release(a);
        pardo_tensor_release(b);
    }
}
END_TEST

START_TEST(test_err_bit_shift) {
    pardo_status st;
    pardo_type i32 = test_type(PARDO_I32, 1, (int64_t[]){2}), u8 = test_type(PARDO_U8, 1, (int64_t[]){2}),
               u16 = test_type(PARDO_U16, 1, (int64_t[]){2}), out;
    const pardo_type *ii[2] = {&i32, &i32}, *uu[2] = {&u8, &u8}, *mixed[2] = {&u8, &u16};
    ck_assert_int_eq(test_infer_op("bit_shift", "{\"direction\": \"left\"}", 2, ii, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "int32") && strstr(st.msg, "uint8"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("bit_shift", "{\"direction\": \"left\"}", 2, mixed, 1, &out, &st), PARDO_ESHAPE);
    ck_assert_int_eq(test_infer_op("bit_shift", "{\"direction\": \"up\"}", 2, uu, 1, &out, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "'direction'") && strstr(st.msg, "up"), "%s", st.msg);
    ck_assert_int_eq(test_infer_op("bit_shift", NULL, 2, uu, 1, &out, &st), PARDO_EINVAL);
    ck_assert_int_eq(test_infer_op("bit_shift", "{\"direction\": \"right\"}", 2, uu, 1, &out, &st), PARDO_OK);
    ck_assert_int_eq(out.dtype, PARDO_U8);
}
END_TEST

Suite *make_ops_bitwise_suite(void) {
    Suite *s = suite_create("ops_bitwise");
    TCase *core = tcase_create("Core");
    tcase_add_test(core, test_bit_shift_against_powers_of_two);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_test(errors, test_err_bit_shift);
    suite_add_tcase(s, errors);
    return s;
}
