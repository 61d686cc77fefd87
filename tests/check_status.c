/* check_status.c - status codes and messages. */
#include <check.h>
#include <string.h>

#include "check_suites.h"
#include "core/status.h"

START_TEST(errorf_sets_code_and_message) {
    pardo_status st;
    pardo_status_clear(&st);
    ck_assert_int_eq(st.code, PARDO_OK);
    ck_assert_int_eq(pardo_errorf(&st, PARDO_EINVAL, "bad %s %d", "thing", 7), PARDO_EINVAL);
    ck_assert_int_eq(st.code, PARDO_EINVAL);
    ck_assert_str_eq(st.msg, "bad thing 7");
    ck_assert_int_eq(pardo_status_prefix(&st, "%s: ", "g.json"), PARDO_EINVAL);
    ck_assert_str_eq(st.msg, "g.json: bad thing 7");
}
END_TEST

START_TEST(prefix_leaves_ok_alone_and_truncates) {
    pardo_status st;
    pardo_status_clear(&st);
    ck_assert_int_eq(pardo_status_prefix(&st, "x: "), PARDO_OK);
    ck_assert_str_eq(st.msg, "");
    char big[2 * PARDO_MSG_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    pardo_errorf(&st, PARDO_EIO, "%s", big);
    ck_assert_uint_eq(strlen(st.msg), PARDO_MSG_MAX - 1);
    pardo_status_prefix(&st, "%s", big);
    ck_assert_uint_eq(strlen(st.msg), PARDO_MSG_MAX - 1);
    ck_assert_int_eq(pardo_errorf(NULL, PARDO_ENOMEM, "dropped"), PARDO_ENOMEM);
}
END_TEST

START_TEST(names_and_texts) {
    ck_assert_str_eq(pardo_code_name(PARDO_OK), "OK");
    ck_assert_str_eq(pardo_code_name(PARDO_EPARSE), "EPARSE");
    ck_assert_str_eq(pardo_code_text(PARDO_ENOMEM), "out of memory");
    ck_assert_str_eq(pardo_code_name(-999), "EUNKNOWN");
}
END_TEST

Suite *make_status_suite(void) {
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, errorf_sets_code_and_message);
    tcase_add_test(tc, prefix_leaves_ok_alone_and_truncates);
    tcase_add_test(tc, names_and_texts);
    suite_add_tcase(s, tc);
    return s;
}
