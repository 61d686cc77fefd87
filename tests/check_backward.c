/* check_backward.c - the autodiff pass: gradients of whole graphs against
 * float64 central finite differences, shared vars summed, roles, errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_suites.h"
#include "graph_test_util.h"
#include "pass.h"
#include "test_util.h"

/* Parses and checks text, then appends the gradient ops of `loss`. */
static pardo_program *backward_program(const char *text, const char *loss) {
    pardo_status st;
    pardo_program *p = test_program(text, "bw.json");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = loss;
    ck_assert_msg(pardo_pass_backward(p, &opt, &st) == PARDO_OK, "backward: %s", st.msg);
    return p;
}

static double run_loss(pardo_executor *ex, const char *loss) {
    pardo_status st;
    ck_assert_msg(pardo_executor_run(ex, &st) == PARDO_OK, "%s", st.msg);
    return pardo_tensor_get_f64(pardo_executor_fetch(ex, loss), 0);
}

/* For every element of every param, d loss / d param from the gradient ops
 * against central differences of the whole forward graph. */
static void check_params(const pardo_program *p, pardo_executor *ex, const char *loss) {
    char gname[256];
    const pardo_block *blk = &p->blocks[0];
    int checked = 0;
    for (int v = 0; v < blk->n_vars; v++) {
        const pardo_var *var = &blk->vars[v];
        if (var->role != PARDO_VAR_PARAM) continue;
        snprintf(gname, sizeof gname, "%s@GRAD", var->name);
        run_loss(ex, loss);
        pardo_tensor *g = pardo_tensor_clone(pardo_executor_fetch(ex, gname), NULL);
        ck_assert_msg(g != NULL, "no gradient '%s'", gname);
        pardo_tensor *w = pardo_scope_find(pardo_executor_scope(ex), var->name);
        for (int64_t i = 0; i < w->numel; i++) {
            const double eps = 1e-6, orig = pardo_tensor_get_f64(w, i);
            pardo_tensor_set_f64(w, i, orig + eps);
            double lp = run_loss(ex, loss);
            pardo_tensor_set_f64(w, i, orig - eps);
            double lm = run_loss(ex, loss);
            pardo_tensor_set_f64(w, i, orig);
            double num = (lp - lm) / (2 * eps), ana = pardo_tensor_get_f64(g, i);
            ck_assert_msg(fabs(num - ana) <= 1e-6 * fmax(1, fmax(fabs(num), fabs(ana))),
                          "%s[%lld]: analytic %.12g, finite differences %.12g", gname, (long long)i, ana, num);
            checked++;
        }
        pardo_tensor_release(g);
    }
    ck_assert_int_gt(checked, 0);
}

#define F64(shape) "{\"dtype\": \"float64\", \"shape\": " shape
static const char mlp[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": " F64("[-1, 4]") ", \"role\": \"feed\"},"
    "\"y\": {\"dtype\": \"int64\", \"shape\": [-1], \"role\": \"feed\"},"
    "\"w1\": " F64("[4, 5]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 1}},"
    "\"b1\": " F64("[5]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 2}},"
    "\"w2\": " F64("[5, 3]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 3}},"
    "\"b2\": " F64("[3]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 4}}},"
    "\"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w1\"], \"out\": [\"h\"]},"
    "{\"op\": \"add\", \"in\": [\"h\", \"b1\"], \"out\": [\"z\"]},"
    "{\"op\": \"tanh\", \"in\": [\"z\"], \"out\": [\"a\"]},"
    "{\"op\": \"matmul\", \"in\": [\"a\", \"w2\"], \"out\": [\"h2\"]},"
    "{\"op\": \"add\", \"in\": [\"h2\", \"b2\"], \"out\": [\"logits\"]},"
    "{\"op\": \"softmax\", \"in\": [\"logits\"], \"out\": [\"probs\"]},"
    "{\"op\": \"softmax_cross_entropy\", \"in\": [\"logits\", \"y\"], \"out\": [\"loss\"]}"
    "]}]}";

static void feed_random(pardo_executor *ex, test_rng *r, int n) {
    pardo_status st;
    int64_t xs[2] = {n, 4}, ys[1] = {n};
    pardo_tensor *x = test_tensor_random(r, PARDO_F64, 2, xs, -2, 2);
    pardo_tensor *y = test_tensor_random(r, PARDO_I64, 1, ys, 0, 3);
    ck_assert_int_eq(pardo_executor_feed(ex, "x", x, "x", &st), PARDO_OK);
    ck_assert_int_eq(pardo_executor_feed(ex, "y", y, "y", &st), PARDO_OK);
    pardo_tensor_release(x);
    pardo_tensor_release(y);
}

START_TEST(mlp_gradients_match_finite_differences) {
    test_rng r = {11};
    pardo_program *p = backward_program(mlp, "loss");
    pardo_executor *ex = test_executor(p, 1);
    feed_random(ex, &r, 7);
    check_params(p, ex, "loss");
    /* roles: forward, loss, backward; no gradient for feeds or the unused softmax */
    const pardo_block *blk = &p->blocks[0];
    ck_assert_int_eq(blk->ops[0].role, PARDO_OP_FORWARD);
    ck_assert_int_eq(blk->ops[6].role, PARDO_OP_LOSS);
    for (int i = 7; i < blk->n_ops; i++) ck_assert_int_eq(blk->ops[i].role, PARDO_OP_BACKWARD);
    ck_assert_ptr_null(pardo_block_find_var(blk, "x@GRAD"));
    ck_assert_ptr_null(pardo_block_find_var(blk, "y@GRAD"));
    ck_assert_ptr_null(pardo_block_find_var(blk, "probs@GRAD"));
    ck_assert_ptr_nonnull(pardo_block_find_var(blk, "loss@GRAD"));
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

/* w used twice (h = x w, k = h w) and a residual add (r = x + k): the
 * gradients of w and of h are sums of two contributions. */
static const char shared[] =
    "{\"pardo\": 1, \"blocks\": [{\"vars\": {"
    "\"x\": " F64("[3, 4]") ", \"role\": \"feed\"},"
    "\"w\": " F64("[4, 4]") ", \"role\": \"param\", \"init\": {\"fill\": \"uniform\", \"low\": -1, \"high\": 1, \"seed\": 8}}},"
    "\"ops\": ["
    "{\"op\": \"matmul\", \"in\": [\"x\", \"w\"], \"out\": [\"h\"]},"
    "{\"op\": \"matmul\", \"in\": [\"h\", \"w\"], \"out\": [\"k\"]},"
    "{\"op\": \"add\", \"in\": [\"h\", \"k\"], \"out\": [\"r\"]},"
    "{\"op\": \"mul\", \"in\": [\"r\", \"r\"], \"out\": [\"sq\"]},"
    "{\"op\": \"reduce_mean\", \"in\": [\"sq\"], \"out\": [\"loss\"], \"attrs\": {\"keepdims\": false}}"
    "]}]}";

START_TEST(shared_vars_get_summed_gradients) {
    pardo_status st;
    test_rng r = {12};
    pardo_program *p = backward_program(shared, "loss");
    ck_assert_ptr_nonnull(pardo_block_find_var(&p->blocks[0], "w@GRAD@RENAME@1"));
    ck_assert_ptr_nonnull(pardo_block_find_var(&p->blocks[0], "h@GRAD@RENAME@1"));
    pardo_executor *ex = test_executor(p, 1);
    int64_t xs[2] = {3, 4};
    pardo_tensor *x = test_tensor_random(&r, PARDO_F64, 2, xs, -1, 1);
    ck_assert_int_eq(pardo_executor_feed(ex, "x", x, "x", &st), PARDO_OK);
    check_params(p, ex, "loss");
    pardo_tensor_release(x);
    pardo_executor_free(ex);
    pardo_program_free(p);
}
END_TEST

static void expect_error(const char *text, const char *loss, int code, const char *word) {
    pardo_status st;
    pardo_program *p = test_program(text, "bw.json");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = loss;
    ck_assert_int_eq(pardo_pass_backward(p, &opt, &st), code);
    ck_assert_msg(strstr(st.msg, "bw.json") && strstr(st.msg, word), "message lacks '%s': %s", word, st.msg);
    pardo_program_free(p);
}

START_TEST(errors) {
    expect_error(mlp, "nope", PARDO_ENOTFOUND, "no var 'nope'");
    expect_error(mlp, "probs", PARDO_EINVAL, "float scalar");
    expect_error(mlp, "y", PARDO_EINVAL, "float scalar");
    /* twice: the second time the graph already has backward ops */
    pardo_status st;
    pardo_program *p = backward_program(mlp, "loss");
    pardo_pass_options opt = pardo_pass_defaults();
    opt.loss = "loss";
    ck_assert_int_eq(pardo_pass_backward(p, &opt, &st), PARDO_EINVAL);
    ck_assert_msg(strstr(st.msg, "already has backward ops"), "%s", st.msg);
    pardo_program_free(p);
}
END_TEST

Suite *make_backward_suite(void) {
    Suite *s = suite_create("backward");
    TCase *tc = tcase_create("Core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, mlp_gradients_match_finite_differences);
    tcase_add_test(tc, shared_vars_get_summed_gradients);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("Errors");
    tcase_add_test(te, errors);
    suite_add_tcase(s, te);
    return s;
}
