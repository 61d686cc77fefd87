/* check_scope.c - name bindings, parents, take and re-bind, growth. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "core/scope.h"

static pardo_tensor *scalar(double v) {
    pardo_status st;
    pardo_tensor *t = pardo_tensor_new_cpu(PARDO_F64, 0, NULL, &st);
    pardo_tensor_set_f64(t, 0, v);
    return t;
}

START_TEST(set_find_replace) {
    pardo_status st;
    pardo_scope *s = pardo_scope_new(NULL);
    pardo_tensor *a = scalar(1), *b = scalar(2);
    ck_assert_int_eq(pardo_scope_set(s, "a", a, &st), PARDO_OK);
    ck_assert_int_eq(atomic_load(&a->refs), 2);
    ck_assert_ptr_eq(pardo_scope_find(s, "a"), a);
    ck_assert_ptr_null(pardo_scope_find(s, "b"));
    ck_assert_int_eq(pardo_scope_set(s, "a", b, &st), PARDO_OK); /* replace releases a */
    ck_assert_int_eq(atomic_load(&a->refs), 1);
    ck_assert_ptr_eq(pardo_scope_find(s, "a"), b);
    ck_assert_int_eq(pardo_scope_set(s, "a", b, &st), PARDO_OK); /* same tensor: still one ref held */
    ck_assert_int_eq(atomic_load(&b->refs), 2);
    ck_assert_int_eq(pardo_scope_size(s), 1);
    pardo_scope_free(s);
    ck_assert_int_eq(atomic_load(&b->refs), 1);
    pardo_tensor_release(a);
    pardo_tensor_release(b);
}
END_TEST

START_TEST(parent_lookup_and_shadowing) {
    pardo_status st;
    pardo_scope *root = pardo_scope_new(NULL), *child = pardo_scope_new(root);
    ck_assert_ptr_eq(pardo_scope_parent(child), root);
    pardo_scope_set_move(root, "w", scalar(1), &st);
    pardo_scope_set_move(child, "h", scalar(2), &st);
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_scope_find(child, "w"), 0), 1);
    ck_assert_ptr_null(pardo_scope_find_local(child, "w"));
    ck_assert_ptr_null(pardo_scope_find(root, "h"));
    pardo_scope_set_move(child, "w", scalar(3), &st);
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_scope_find(child, "w"), 0), 3);
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_scope_find(root, "w"), 0), 1);
    pardo_scope_free(child);
    pardo_scope_free(root);
}
END_TEST

START_TEST(take_and_rebind) {
    pardo_status st;
    pardo_scope *root = pardo_scope_new(NULL), *child = pardo_scope_new(root);
    pardo_scope_set_move(root, "x", scalar(1), &st);
    pardo_scope_set_move(child, "x", scalar(2), &st);
    pardo_tensor *t = pardo_scope_take(child, "x");
    ck_assert_double_eq(pardo_tensor_get_f64(t, 0), 2);
    ck_assert_int_eq(atomic_load(&t->refs), 1);
    ck_assert_int_eq(pardo_scope_size(child), 0);
    ck_assert_ptr_null(pardo_scope_find_local(child, "x"));
    ck_assert_ptr_null(pardo_scope_find(child, "x")); /* reserved: does not fall through to root */
    ck_assert_ptr_null(pardo_scope_take(child, "nope"));
    ck_assert_int_eq(pardo_scope_set_move(child, "x", t, &st), PARDO_OK);
    ck_assert_int_eq(pardo_scope_size(child), 1);
    ck_assert_ptr_eq(pardo_scope_find(child, "x"), t);
    pardo_scope_free(child);
    pardo_scope_free(root);
}
END_TEST

START_TEST(many_names_in_order) {
    pardo_status st;
    pardo_scope *s = pardo_scope_new(NULL);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "v%d", i);
        ck_assert_int_eq(pardo_scope_set_move(s, name, scalar(i), &st), PARDO_OK);
    }
    ck_assert_int_eq(pardo_scope_size(s), 1000);
    for (int i = 0; i < 1000; i += 37) {
        snprintf(name, sizeof name, "v%d", i);
        ck_assert_double_eq(pardo_tensor_get_f64(pardo_scope_find(s, name), 0), i);
    }
    const char *n;
    pardo_tensor *t;
    ck_assert_int_eq(pardo_scope_at(s, 0, &n, &t), PARDO_OK);
    ck_assert_str_eq(n, "v0");
    ck_assert_int_eq(pardo_scope_at(s, 999, &n, &t), PARDO_OK);
    ck_assert_str_eq(n, "v999");
    ck_assert_int_eq(pardo_scope_at(s, 1000, &n, &t), PARDO_ENOTFOUND);
    pardo_scope_free(s);
}
END_TEST

/* Entry handles: reserved names shadow the parent while unbound, entries
 * stay valid while the scope grows, and get / take / set by entry agree
 * with the name-based calls. */
START_TEST(entries_resolve_once) {
    pardo_status st;
    pardo_scope *root = pardo_scope_new(NULL), *child = pardo_scope_new(root);
    pardo_tensor *a = scalar(1), *b = scalar(2);
    ck_assert_int_eq(pardo_scope_set(root, "w", a, &st), PARDO_OK);
    ck_assert_int_eq(pardo_scope_entry(child, "w"), -1);
    int e = pardo_scope_reserve(child, "w", &st);
    ck_assert_int_ge(e, 0);
    ck_assert_int_eq(pardo_scope_reserve(child, "w", &st), e);
    ck_assert_ptr_null(pardo_scope_entry_get(child, e));
    ck_assert_ptr_null(pardo_scope_find(child, "w")); /* reserved here: no fall-through to the parent */
    ck_assert_int_eq(pardo_scope_size(child), 0);
    for (int i = 0; i < 200; i++) { /* grow past several rehashes and reallocs */
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        ck_assert_int_eq(pardo_scope_set(child, name, a, &st), PARDO_OK);
    }
    ck_assert_int_eq(pardo_scope_entry(child, "w"), e);
    pardo_scope_entry_set_move(child, e, pardo_tensor_retain(b));
    ck_assert_ptr_eq(pardo_scope_find(child, "w"), b);
    ck_assert_ptr_eq(pardo_scope_entry_get(child, e), b);
    ck_assert_int_eq(pardo_scope_size(child), 201);
    pardo_scope_entry_set_move(child, e, pardo_tensor_retain(b)); /* the same tensor again: one reference kept */
    ck_assert_int_eq(atomic_load(&b->refs), 2);
    pardo_tensor *t = pardo_scope_entry_take(child, e);
    ck_assert_ptr_eq(t, b);
    ck_assert_int_eq(pardo_scope_size(child), 200);
    ck_assert_ptr_null(pardo_scope_find(child, "w"));
    pardo_tensor_release(t);
    ck_assert_int_eq(pardo_scope_entry(child, "v7"), pardo_scope_entry(child, "v7"));
    ck_assert_ptr_eq(pardo_scope_entry_get(child, pardo_scope_entry(child, "v7")), a);
    pardo_scope_free(child);
    pardo_scope_free(root);
    ck_assert_int_eq(atomic_load(&a->refs), 1);
    ck_assert_int_eq(atomic_load(&b->refs), 1);
    pardo_tensor_release(a);
    pardo_tensor_release(b);
}
END_TEST

Suite *make_scope_suite(void) {
    Suite *s = suite_create("scope");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, set_find_replace);
    tcase_add_test(tc, parent_lookup_and_shadowing);
    tcase_add_test(tc, take_and_rebind);
    tcase_add_test(tc, many_names_in_order);
    tcase_add_test(tc, entries_resolve_once);
    suite_add_tcase(s, tc);
    return s;
}
