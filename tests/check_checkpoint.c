/* check_checkpoint.c - params and state through safetensors: save, load
 * into a fresh executor, resume a run bitwise, ignore undeclared entries. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "io/safetensors.h"
#include "test_util.h"

static const char graph[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"g\": {\"dtype\": \"float32\", \"shape\": [2, 3], \"role\": \"feed\"},"
    "\"w\": {\"dtype\": \"float32\", \"shape\": [2, 3], \"role\": \"param\", \"init\": {\"fill\": \"normal\", \"seed\": 9}},"
    "\"k\": {\"dtype\": \"int64\", \"shape\": [], \"role\": \"state\", \"init\": {\"fill\": \"constant\", \"value\": 0}},"
    "\"one\": {\"dtype\": \"int64\", \"shape\": [], \"value\": [1]}},"
    "\"ops\": ["
    "{\"op\": \"tanh\", \"in\": [\"w\"], \"out\": [\"t\"]},"
    "{\"op\": \"mul\", \"in\": [\"t\", \"g\"], \"out\": [\"tg\"]},"
    "{\"op\": \"scale\", \"in\": [\"tg\"], \"out\": [\"step\"], \"attrs\": {\"scale\": -0.1}},"
    "{\"op\": \"add\", \"in\": [\"w\", \"step\"], \"out\": [\"w\"], \"role\": \"optimize\"},"
    "{\"op\": \"add\", \"in\": [\"k\", \"one\"], \"out\": [\"k\"], \"role\": \"optimize\"}"
    "]}]}";

static void run_steps(pardo_executor *ex, pardo_tensor *g, int n) {
    pardo_status st;
    ck_assert_int_eq(pardo_executor_feed(ex, "g", g, "g", &st), PARDO_OK);
    for (int i = 0; i < n; i++) ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
}

static void save(pardo_executor *ex, const char *path) {
    pardo_status st;
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    ck_assert_int_eq(pardo_executor_collect_state(ex, &l, &st), PARDO_OK);
    ck_assert_int_eq(l.n, 2); /* w and k: params and state, not constants or temps */
    ck_assert_msg(pardo_safetensors_write(path, &l, &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_list_clear(&l);
}

static pardo_executor *load(const pardo_program *p, const char *path) {
    pardo_status st;
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    ck_assert_msg(pardo_safetensors_read(path, &l, &st) == PARDO_OK, "%s", st.msg);
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = 1};
    ck_assert_int_eq(pardo_executor_new(p, &opt, &ex, &st), PARDO_OK);
    ck_assert_msg(pardo_executor_init_vars(ex, &l, path, &st) == PARDO_OK, "%s", st.msg);
    pardo_tensor_list_clear(&l);
    return ex;
}

START_TEST(resume_is_bitwise_identical) {
    char dir[64], path[128];
    test_scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    test_rng r = {5};
    int64_t shape[2] = {2, 3};
    pardo_tensor *g = test_tensor_random(&r, PARDO_F32, 2, shape, -1, 1);
    pardo_program *p = test_program(graph, "ck.json");

    pardo_executor *straight = test_executor(p, 1);
    run_steps(straight, g, 6);

    pardo_executor *first = test_executor(p, 1);
    run_steps(first, g, 3);
    save(first, path);
    pardo_executor *second = load(p, path);
    run_steps(second, g, 3);

    test_assert_close(pardo_executor_fetch(second, "w"), pardo_executor_fetch(straight, "w"), 0, 0);
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_executor_fetch(second, "k"), 0), 6);
    pardo_executor_free(straight);
    pardo_executor_free(first);
    pardo_executor_free(second);
    pardo_program_free(p);
    pardo_tensor_release(g);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(extra_entries_are_ignored) {
    pardo_status st;
    pardo_program *p = test_program(graph, "ck.json");
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    int64_t shape[2] = {2, 3};
    pardo_tensor *w = test_tensor_from(PARDO_F32, 2, shape, (const double[]){1, 2, 3, 4, 5, 6});
    pardo_tensor *other = pardo_tensor_new_cpu(PARDO_F64, 0, NULL, &st);
    pardo_tensor_list_add(&l, "w", w, &st);
    pardo_tensor_list_add(&l, "momentum_of_something_else", other, &st);
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = 1};
    ck_assert_int_eq(pardo_executor_new(p, &opt, &ex, &st), PARDO_OK);
    ck_assert_msg(pardo_executor_init_vars(ex, &l, "ck.safetensors", &st) == PARDO_OK, "%s", st.msg);
    test_assert_close(pardo_executor_fetch(ex, "w"), w, 0, 0);
    ck_assert_double_eq(pardo_tensor_get_f64(pardo_executor_fetch(ex, "k"), 0), 0); /* state not in it: its init */
    pardo_tensor_list_clear(&l);
    pardo_tensor_release(w);
    pardo_tensor_release(other);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

START_TEST(dtype_mismatch_is_an_error) {
    pardo_status st;
    pardo_program *p = test_program(graph, "ck.json");
    pardo_tensor_list l;
    pardo_tensor_list_init(&l);
    pardo_tensor *k = pardo_tensor_new_cpu(PARDO_I32, 0, NULL, &st);
    pardo_tensor_list_add(&l, "k", k, &st);
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = 1};
    ck_assert_int_eq(pardo_executor_new(p, &opt, &ex, &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_init_vars(ex, &l, "ck.safetensors", &st), PARDO_ESHAPE);
    ck_assert_msg(strstr(st.msg, "ck.safetensors") && strstr(st.msg, "'k'") && strstr(st.msg, "int32") &&
                      strstr(st.msg, "int64"),
                  "%s", st.msg);
    pardo_tensor_list_clear(&l);
    pardo_tensor_release(k);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

Suite *make_checkpoint_suite(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("Core");
    tcase_add_test(tc, resume_is_bitwise_identical);
    tcase_add_test(tc, extra_entries_are_ignored);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, dtype_mismatch_is_an_error);
    suite_add_tcase(s, te);
    return s;
}
