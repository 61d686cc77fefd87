/* check_value.c - the JSON-like value tree and its JSON text bridge. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_suites.h"
#include "core/value.h"
#include "core/value_json.h"

START_TEST(parse_and_query) {
    pardo_status st;
    pardo_value *v = NULL;
    ck_assert_int_eq(pardo_value_parse_json("{\"a\": 3, \"b\": [1, 2.5, true], \"c\": {\"d\": \"x\"}, \"n\": null}", &v, &st), PARDO_OK);
    ck_assert_int_eq(v->kind, PARDO_V_OBJECT);
    ck_assert_int_eq(v->n, 4);
    const pardo_value *a = pardo_value_get(v, "a");
    ck_assert(pardo_value_is_integer(a));
    ck_assert_double_eq(a->number, 3.0);
    const pardo_value *b = pardo_value_get(v, "b");
    ck_assert_int_eq(b->kind, PARDO_V_ARRAY);
    ck_assert_int_eq(b->n, 3);
    ck_assert(!pardo_value_is_integer(&b->items[1]));
    ck_assert_int_eq(b->items[2].kind, PARDO_V_BOOL);
    ck_assert_str_eq(pardo_value_get(pardo_value_get(v, "c"), "d")->string, "x");
    ck_assert_int_eq(pardo_value_get(v, "n")->kind, PARDO_V_NULL);
    ck_assert_ptr_null(pardo_value_get(v, "missing"));
    ck_assert_ptr_null(pardo_value_get(b, "a"));
    pardo_value_free(v);
}
END_TEST

START_TEST(clone_set_append_equal) {
    pardo_status st;
    pardo_value *v = NULL;
    ck_assert_int_eq(pardo_value_parse_json("{\"k\": [1, {\"z\": false}]}", &v, &st), PARDO_OK);
    pardo_value *c = pardo_value_clone(v);
    ck_assert(pardo_value_equal(v, c));
    pardo_value *num = pardo_value_new_number(4);
    ck_assert_int_eq(pardo_value_set(c, "k", num, &st), PARDO_OK); /* replace */
    ck_assert_int_eq(c->n, 1);
    ck_assert(!pardo_value_equal(v, c));
    ck_assert_int_eq(pardo_value_set(c, "new", num, &st), PARDO_OK);
    ck_assert_int_eq(c->n, 2);
    pardo_value *arr = pardo_value_new_array();
    ck_assert_int_eq(pardo_value_append(arr, num, &st), PARDO_OK);
    ck_assert_int_eq(pardo_value_append(arr, v, &st), PARDO_OK);
    ck_assert_int_eq(arr->n, 2);
    ck_assert(pardo_value_equal(&arr->items[1], v));
    char *text = pardo_value_to_json(arr);
    ck_assert_str_eq(text, "[4,{\"k\":[1,{\"z\":false}]}]");
    free(text);
    pardo_value_free(arr);
    pardo_value_free(num);
    pardo_value_free(c);
    pardo_value_free(v);
}
END_TEST

START_TEST(syntax_error_has_position) {
    pardo_status st;
    pardo_value *v = NULL;
    ck_assert_int_eq(pardo_value_parse_json("{\n  \"a\": [1, 2,,]\n}", &v, &st), PARDO_EPARSE);
    ck_assert_ptr_null(v);
    ck_assert_msg(strstr(st.msg, "line 2") != NULL, "message: %s", st.msg);
    ck_assert_int_eq(pardo_value_parse_json("{\"a\": 1} trailing", &v, &st), PARDO_EPARSE);
    ck_assert_int_eq(pardo_value_parse_json("", &v, &st), PARDO_EPARSE);
}
END_TEST

Suite *make_value_suite(void) {
    Suite *s = suite_create("value");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, parse_and_query);
    tcase_add_test(tc, clone_set_append_equal);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, syntax_error_has_position);
    suite_add_tcase(s, te);
    return s;
}
