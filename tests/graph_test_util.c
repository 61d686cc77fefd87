/* graph_test_util.c - programs and executors from JSON text (see graph_test_util.h). */
#include "graph_test_util.h"

#include <check.h>
#include <string.h>

#include "io/graph_json.h"
#include "pass.h"

int test_program_status(const char *text, const char *path, pardo_program **out, pardo_status *st) {
    pardo_program *p = NULL;
    pardo_pass_options opt = {0};
    if (out) *out = NULL;
    pardo_status_clear(st);
    int rc = pardo_graph_parse(text, strlen(text), path, &p, st);
    if (rc == PARDO_OK) rc = pardo_pass_check(p, &opt, st);
    if (rc == PARDO_OK && out) *out = p;
    else pardo_program_free(p);
    return rc;
}

pardo_program *test_program(const char *text, const char *path) {
    pardo_status st;
    pardo_program *p = NULL;
    int rc = test_program_status(text, path, &p, &st);
    ck_assert_msg(rc == PARDO_OK, "graph %s: %s", path, st.msg);
    return p;
}

pardo_program *test_training_program(const char *text, const char *path, const char *loss,
                                     pardo_optimizer_kind optimizer, double lr, int parts) {
    pardo_status st;
    pardo_program *p = test_program(text, path);
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = loss;
    opt.optimizer = optimizer;
    opt.lr = lr;
    opt.parts = parts;
    ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    ck_assert_msg(pardo_pass_optimizer(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    if (parts > 0) ck_assert_msg(pardo_pass_multi_cpu(p, &opt, &st) == PARDO_OK, "%s", st.msg);
    return p;
}

pardo_executor *test_executor(const pardo_program *p, int nthreads) {
    pardo_status st;
    pardo_executor *ex = NULL;
    pardo_exec_options opt = {.nthreads = nthreads, .device = PARDO_DEVICE_CPU};
    ck_assert_msg(pardo_executor_new(p, &opt, &ex, &st) == PARDO_OK, "executor: %s", st.msg);
    ck_assert_msg(pardo_executor_init_vars(ex, NULL, NULL, &st) == PARDO_OK, "init_vars: %s", st.msg);
    return ex;
}

void test_feed(pardo_executor *ex, const char *name, pardo_tensor *t) {
    pardo_status st;
    ck_assert_msg(pardo_executor_feed(ex, name, t, "test", &st) == PARDO_OK, "feed %s: %s", name, st.msg);
}

void test_run(pardo_executor *ex) {
    pardo_status st;
    ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "run: %s", st.msg);
}

pardo_tensor *test_fetch(pardo_executor *ex, const char *name) {
    pardo_tensor *t = pardo_executor_fetch(ex, name);
    ck_assert_msg(t != NULL, "no value for '%s'", name);
    return t;
}
